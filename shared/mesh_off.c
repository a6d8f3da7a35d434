/*
 * mesh_off.c — the counts in an OFF header, checked against the file size before assimp reads
 * the file.
 *
 * assimp 5.2's OFF reader believes the header: a 45-byte file that declares 1,000,000,000 faces
 * makes it reserve and fill memory for them until the process runs out (3 GB in 2.4 s here), and
 * it never notices that the file ends long before. Every vertex line holds at least three
 * numbers and every face line at least one (its corner count), each number at least one digit
 * and one separator, so a header whose counts need more bytes than the file has is a lie and is
 * refused here with both figures.
 *
 * The header is read the way assimp reads it: comments (#) and blank space skipped, an optional
 * keyword ([ST][C][N][4][n]OFF, where n is followed by a dimension), then the vertex, face and
 * edge counts.
 *
 * DOES NOT read vertices or faces (assimp does), or check other formats (mesh_ply.c, mesh_md2.c,
 * mesh_md3.c do theirs).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mesh.h"
#include "mesh_internal.h"

/* The header is at the start: 4 KiB covers any sane amount of leading comments. */
#define OFF_HEAD 4096

typedef struct cursor {
  const char *p, *end;
} cursor;

/* Skips blank space and # comments up to the end of their line. */
static void skip_space(cursor *c) {
  while (c->p < c->end) {
    if (isspace((unsigned char)*c->p)) {
      c->p++;
    } else if (*c->p == '#') {
      while (c->p < c->end && *c->p != '\n') c->p++;
    } else {
      break;
    }
  }
}

/* An unsigned decimal count; 0 when there is none (*ok = 0). Saturates instead of wrapping. */
static uint64_t read_count(cursor *c, int *ok) {
  skip_space(c);
  uint64_t v = 0;
  int digits = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    if (v < (UINT64_MAX - 9) / 10) v = v * 10 + (uint64_t)(*c->p - '0');
    c->p++;
    digits++;
  }
  *ok = digits > 0;
  return v;
}

int mesh__off_is_off(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  if (dot && strcasecmp(dot, ".off") == 0) return 1;
  char h[16] = {0};
  FILE *f = mesh__fopen(path);
  if (!f) return 0;
  size_t n = fread(h, 1, sizeof(h) - 1, f);
  fclose(f);
  h[n] = '\0';
  /* "OFF", "COFF", "NOFF", "STOFF", "4OFF", "nOFF" … at the very start. */
  const char *off = strstr(h, "OFF");
  if (!off) return 0;
  for (const char *q = h; q < off; q++)
    if (!strchr("STCN4n", *q)) return 0;
  return 1;
}

int mesh__off_check(const char *path, char *err, size_t errlen) {
  FILE *f = mesh__fopen(path);
  if (!f) {
    mesh__set_err(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return MESH_ENOENT;
  }
  char head[OFF_HEAD];
  size_t n = fread(head, 1, sizeof(head), f);
  int rc = fseek(f, 0, SEEK_END);
  long size = rc == 0 ? ftell(f) : -1;
  fclose(f);
  if (size < 0) {
    mesh__set_err(err, errlen, "cannot read '%s'", path);
    return MESH_ENOENT;
  }
  cursor c = {head, head + n};
  skip_space(&c);
  /* The optional keyword: letters up to and including "OFF". */
  const char *word = c.p;
  while (c.p < c.end && (isalpha((unsigned char)*c.p) || *c.p == '4')) c.p++;
  int has_dimension = 0;
  if (c.p - word >= 3 && memcmp(c.p - 3, "OFF", 3) == 0) {
    for (const char *q = word; q < c.p - 3; q++) has_dimension |= *q == 'n';
  } else {
    c.p = word; /* no keyword: the counts come first */
  }
  int ok = 1;
  if (has_dimension) {
    uint64_t dim = read_count(&c, &ok);
    if (!ok || dim > 3) {
      mesh__set_err(err, errlen, "OFF: the dimension after nOFF is missing or above 3");
      return MESH_EFORMAT;
    }
  }
  int okv, okf;
  uint64_t vertices = read_count(&c, &okv), faces = read_count(&c, &okf);
  if (!okv || !okf) {
    mesh__set_err(err, errlen, "OFF: the header has no vertex and face counts");
    return MESH_EFORMAT;
  }
  /* Bytes the declared elements take at the least: "0 0 0\n" per vertex, "0\n" per face. */
  uint64_t need = vertices * 6 + faces * 2;
  uint64_t have = (uint64_t)size - (uint64_t)(c.p - head);
  if (vertices > UINT64_MAX / 16 || faces > UINT64_MAX / 16 || need > have) {
    mesh__set_err(err, errlen,
                  "OFF: the header declares %llu vertices and %llu faces, which take at least "
                  "%llu bytes, but the file has %llu bytes after its header",
                  (unsigned long long)vertices, (unsigned long long)faces,
                  (unsigned long long)(vertices > UINT64_MAX / 16 || faces > UINT64_MAX / 16 ? UINT64_MAX : need),
                  (unsigned long long)have);
    return MESH_EFORMAT;
  }
  return 0;
}
