/*
 * mesh_ply.c — triangle strips from PLY files.
 *
 * Two defects of assimp 5.2's PLY reader are worked around here:
 *   - it loops forever on a file that ends inside the header, and aborts (ai_assert) or reads
 *     garbage on one that ends inside the data, so every PLY file is walked once here (ASCII,
 *     binary little- and big-endian) and refused unless its data is complete and its face
 *     indices are in range;
 *   - it sizes its face array by the number of triangle strips, so each strip keeps only its
 *     last triangle (and leaks the rest); files with strips are read here entirely: positions,
 *     normals and UVs of the vertices, and the strips turned into triangles (-1 restarts a
 *     strip, odd triangles are flipped to keep the winding, triangles with a repeated index —
 *     strip joins — are skipped).
 *
 * DOES NOT read faces or any other property: for files without strips, assimp does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"


enum { PLY_MAX_ELEMENTS = 64, PLY_MAX_PROPS = 64 };

typedef enum ply_format { PLY_ASCII, PLY_LE, PLY_BE } ply_format;

typedef struct ply_prop {
  int is_list;
  int count_size; /* bytes of the list count (lists only) */
  int size;       /* bytes of the scalar / list item */
  int is_float;
  int is_signed;
  char name[64];
} ply_prop;

typedef struct ply_element {
  char name[64];
  uint64_t count;
  int prop_count;
  ply_prop props[PLY_MAX_PROPS];
} ply_element;

typedef struct ply_header {
  ply_format format;
  int element_count;
  ply_element elements[PLY_MAX_ELEMENTS];
  size_t data_offset;
} ply_header;

static int type_info(const char *t, int *size, int *is_float, int *is_signed) {
  static const struct {
    const char *name;
    int size, is_float, is_signed;
  } types[] = {{"char", 1, 0, 1},   {"int8", 1, 0, 1},    {"uchar", 1, 0, 0},   {"uint8", 1, 0, 0},
               {"short", 2, 0, 1},  {"int16", 2, 0, 1},   {"ushort", 2, 0, 0},  {"uint16", 2, 0, 0},
               {"int", 4, 0, 1},    {"int32", 4, 0, 1},   {"uint", 4, 0, 0},    {"uint32", 4, 0, 0},
               {"float", 4, 1, 1},  {"float32", 4, 1, 1}, {"double", 8, 1, 1},  {"float64", 8, 1, 1}};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
    if (strcmp(t, types[i].name) == 0) {
      *size = types[i].size;
      *is_float = types[i].is_float;
      *is_signed = types[i].is_signed;
      return 0;
    }
  }
  return -1;
}

/* Parses the header of `buf` (the whole file). Returns 0 or MESH_EFORMAT with a reason. */
static int parse_header(const char *buf, size_t len, ply_header *h, char *err, size_t errlen) {
  memset(h, 0, sizeof(*h));
  if (len < 4 || memcmp(buf, "ply", 3) != 0) {
    mesh__set_err(err, errlen, "not a PLY file");
    return MESH_EFORMAT;
  }
  size_t pos = 0;
  char line[256];
  int have_format = 0;
  while (pos < len) {
    size_t end = pos;
    while (end < len && buf[end] != '\n') end++;
    size_t n = end - pos;
    if (n >= sizeof(line)) n = sizeof(line) - 1;
    memcpy(line, buf + pos, n);
    line[n] = '\0';
    if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
    /* The last line may have no newline: the data then starts at the end, not past it (a
     * header ending the file in "end_header" sent the data reader past the buffer; found by
     * fuzzing). */
    pos = end < len ? end + 1 : len;
    char a[64], b[64], c[64], d[64];
    int k = sscanf(line, "%63s %63s %63s %63s", a, b, c, d);
    if (k <= 0) continue;
    if (strcmp(a, "end_header") == 0) {
      if (!have_format) break;
      h->data_offset = pos;
      return 0;
    }
    if (strcmp(a, "format") == 0 && k >= 2) {
      have_format = 1;
      if (strcmp(b, "ascii") == 0) h->format = PLY_ASCII;
      else if (strcmp(b, "binary_little_endian") == 0) h->format = PLY_LE;
      else if (strcmp(b, "binary_big_endian") == 0) h->format = PLY_BE;
      else {
        mesh__set_err(err, errlen, "PLY: unknown format '%s'", b);
        return MESH_EFORMAT;
      }
    } else if (strcmp(a, "element") == 0 && k >= 3) {
      if (h->element_count == PLY_MAX_ELEMENTS) {
        mesh__set_err(err, errlen, "PLY: more than %d elements", PLY_MAX_ELEMENTS);
        return MESH_EFORMAT;
      }
      /* Two elements of one name: assimp reads one of them, this walk another (fuzzing found
       * assimp aborting on such a file). */
      for (int i = 0; i < h->element_count; i++)
        if (strcmp(h->elements[i].name, b) == 0) {
          mesh__set_err(err, errlen, "PLY: element '%s' is declared twice", b);
          return MESH_EFORMAT;
        }
      ply_element *e = &h->elements[h->element_count++];
      snprintf(e->name, sizeof(e->name), "%s", b);
      char *stop = NULL;
      errno = 0;
      e->count = strtoull(c, &stop, 10);
      if (errno || stop == c || *stop != '\0') {
        mesh__set_err(err, errlen, "PLY: element '%s' has a bad count '%s'", b, c);
        return MESH_EFORMAT;
      }
    } else if (strcmp(a, "property") == 0 && h->element_count > 0) {
      ply_element *e = &h->elements[h->element_count - 1];
      if (e->prop_count == PLY_MAX_PROPS) {
        mesh__set_err(err, errlen, "PLY: element '%s' has too many properties", e->name);
        return MESH_EFORMAT;
      }
      ply_prop *p = &e->props[e->prop_count++];
      int ok;
      if (strcmp(b, "list") == 0 && k >= 4) {
        int fl, sg;
        char name[64] = "";
        sscanf(line, "%*s %*s %*s %*s %63s", name);
        p->is_list = 1;
        ok = type_info(c, &p->count_size, &fl, &sg) == 0 && !fl &&
             type_info(d, &p->size, &p->is_float, &p->is_signed) == 0;
        snprintf(p->name, sizeof(p->name), "%s", name);
      } else {
        ok = k >= 3 && type_info(b, &p->size, &p->is_float, &p->is_signed) == 0;
        snprintf(p->name, sizeof(p->name), "%s", c);
      }
      if (!ok) {
        mesh__set_err(err, errlen, "PLY: bad property line '%s'", line);
        return MESH_EFORMAT;
      }
    } else if (strcmp(a, "property") == 0) {
      /* A property of no element: assimp looped forever on such a header (found by fuzzing).
       * Other unknown lines are skipped, as assimp does (Blender 2.47 wrote one). */
      mesh__set_err(err, errlen, "PLY: a property before any element: '%.60s'", line);
      return MESH_EFORMAT;
    }
  }
  mesh__set_err(err, errlen, "PLY: header has no end_header or no format line");
  return MESH_EFORMAT;
}

/* A cursor over the data section that yields numbers in the file's encoding. */
typedef struct ply_reader {
  const char *buf;
  size_t len, pos;
  ply_format format;
  int bad_number; /* an ASCII token that is not wholly a number */
} ply_reader;

static int read_number(ply_reader *r, int size, int is_float, int is_signed, double *out) {
  if (r->format == PLY_ASCII) {
    while (r->pos < r->len && (r->buf[r->pos] == ' ' || r->buf[r->pos] == '\t' ||
                               r->buf[r->pos] == '\n' || r->buf[r->pos] == '\r'))
      r->pos++;
    if (r->pos >= r->len) return -1;
    char tmp[64];
    size_t n = 0;
    while (r->pos < r->len && n < sizeof(tmp) - 1 && r->buf[r->pos] != ' ' &&
           r->buf[r->pos] != '\t' && r->buf[r->pos] != '\n' && r->buf[r->pos] != '\r')
      tmp[n++] = r->buf[r->pos++];
    tmp[n] = '\0';
    char *stop = NULL;
    *out = strtod(tmp, &stop);
    /* The whole token, or it is not a number: "-1.00.000000" read as -1.00 here but as two
     * numbers by assimp, which then took a coordinate for a face's corner count and aborted
     * (found by fuzzing). */
    if (stop == tmp || *stop != '\0') {
      r->bad_number = 1;
      return -1;
    }
    return 0;
  }
  if (r->pos > r->len || r->len - r->pos < (size_t)size) return -1;
  unsigned char b[8];
  memcpy(b, r->buf + r->pos, (size_t)size);
  r->pos += (size_t)size;
  if (r->format == PLY_BE) {
    for (int i = 0; i < size / 2; i++) {
      unsigned char t = b[i];
      b[i] = b[size - 1 - i];
      b[size - 1 - i] = t;
    }
  }
  if (is_float) {
    if (size == 4) {
      float f;
      memcpy(&f, b, 4);
      *out = f;
    } else {
      double d;
      memcpy(&d, b, 8);
      *out = d;
    }
    return 0;
  }
  uint64_t u = 0;
  for (int i = size - 1; i >= 0; i--) u = (u << 8) | b[i];
  if (is_signed && size < 8 && (u >> (size * 8 - 1)) & 1) u |= ~0ULL << (size * 8);
  *out = is_signed ? (double)(int64_t)u : (double)u;
  return 0;
}

static int load_file(const char *path, char **buf, size_t *len) {
  FILE *f = mesh__fopen(path);
  if (!f) return MESH_ENOENT;
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return MESH_ENOENT;
  }
  long n = ftell(f);
  if (n < 0) {
    fclose(f);
    return MESH_ENOENT;
  }
  rewind(f);
  *buf = malloc((size_t)n + 1);
  if (!*buf) {
    fclose(f);
    return MESH_ENOMEM;
  }
  size_t got = fread(*buf, 1, (size_t)n, f);
  fclose(f);
  (*buf)[got] = '\0';
  *len = got;
  return 0;
}

/* Appends the triangles of one strip. */
static int emit_strip(const int64_t *s, size_t n, uint32_t **tris, size_t *count, size_t *cap) {
  for (size_t i = 0; i + 2 < n; i++) {
    int64_t a = s[i], b = s[i + 1], c = s[i + 2];
    if (a == b || b == c || a == c) continue;
    if (*count == *cap) {
      size_t ncap = *cap ? 2 * *cap : 256;
      uint32_t *g = realloc(*tris, sizeof(uint32_t) * 3 * ncap);
      if (!g) return MESH_ENOMEM;
      *tris = g;
      *cap = ncap;
    }
    uint32_t *t = *tris + 3 * *count;
    if (i % 2 == 0) {
      t[0] = (uint32_t)a, t[1] = (uint32_t)b, t[2] = (uint32_t)c;
    } else {
      t[0] = (uint32_t)b, t[1] = (uint32_t)a, t[2] = (uint32_t)c;
    }
    (*count)++;
  }
  return 0;
}

static int is_index_list(const ply_prop *p) {
  return p->is_list && (strcmp(p->name, "vertex_indices") == 0 || strcmp(p->name, "vertex_index") == 0);
}

/* Where each property of the vertex element goes, slot[p] (PLY_MAX_PROPS entries): 0-2
 * position, 3-5 normal, 6-7 UV, -1 nowhere; for a strip file also the arrays its vertices are
 * read into (info->positions, normals, uvs, freed by mesh__ply_info_fini). Returns 0,
 * MESH_EFORMAT (no x, y, z; fewer data bytes than vertices) or MESH_ENOMEM. */
static int strip_vertex_slots(const ply_header *h, size_t len, uint64_t nverts, int *slot, mesh__ply_info *info,
                              char *err, size_t errlen) {
  /* For strip files the vertices are kept too: assimp is not asked to read them at all (its
   * strip path also leaks the face arrays it overwrites). */
  int have_normals = 0, have_uvs = 0;
  for (int i = 0; i < PLY_MAX_PROPS; i++) slot[i] = -1;
  for (int ei = 0; ei < h->element_count && info->has_strips; ei++) {
    const ply_element *e = &h->elements[ei];
    if (strcmp(e->name, "vertex") != 0) continue;
    static const char *names[][3] = {{"x", NULL, NULL}, {"y", NULL, NULL}, {"z", NULL, NULL},
                                     {"nx", NULL, NULL}, {"ny", NULL, NULL}, {"nz", NULL, NULL},
                                     {"s", "u", "texture_u"}, {"t", "v", "texture_v"}};
    for (int pi = 0; pi < e->prop_count; pi++)
      for (int k = 0; k < 8; k++)
        for (int a = 0; a < 3; a++)
          if (names[k][a] && !e->props[pi].is_list && strcmp(e->props[pi].name, names[k][a]) == 0)
            slot[pi] = k;
    int found[8] = {0};
    for (int pi = 0; pi < e->prop_count; pi++)
      if (slot[pi] >= 0) found[slot[pi]] = 1;
    if (!found[0] || !found[1] || !found[2]) {
      mesh__set_err(err, errlen, "PLY vertices have no x, y, z properties");
      return MESH_EFORMAT;
    }
    have_normals = found[3] && found[4] && found[5];
    have_uvs = found[6] && found[7];
    if (nverts > (len - h->data_offset)) { /* at least one byte per vertex */
      mesh__set_err(err, errlen, "PLY: the data ends before the counts in the header are read (truncated file?)");
      return MESH_EFORMAT;
    }
    info->positions = calloc(3 * (size_t)nverts + 1, sizeof(float));
    info->normals = have_normals ? calloc(3 * (size_t)nverts + 1, sizeof(float)) : NULL;
    info->uvs = have_uvs ? calloc(2 * (size_t)nverts + 1, sizeof(float)) : NULL;
    if (!info->positions || (have_normals && !info->normals) || (have_uvs && !info->uvs)) return MESH_ENOMEM;
  }
  return 0;
}

int mesh__ply_check(const char *path, mesh__ply_info *info, char *err, size_t errlen) {
  memset(info, 0, sizeof(*info));
  char *buf = NULL;
  size_t len = 0;
  ply_header *h = malloc(sizeof(*h));
  int64_t *strip = NULL;
  size_t strip_cap = 0, ntris = 0, cap = 0;
  int rc = h ? load_file(path, &buf, &len) : MESH_ENOMEM;
  if (rc) goto out;
  rc = parse_header(buf, len, h, err, errlen);
  if (rc) goto out;

  uint64_t nverts = 0;
  int have_faces = 0;
  for (int ei = 0; ei < h->element_count; ei++) {
    if (strcmp(h->elements[ei].name, "vertex") == 0) nverts = h->elements[ei].count;
    if (strcmp(h->elements[ei].name, "face") == 0 && h->elements[ei].count > 0) have_faces = 1;
    if (strcmp(h->elements[ei].name, "tristrips") == 0 && h->elements[ei].count > 0) info->has_strips = 1;
  }
  if (have_faces && info->has_strips) {
    mesh__set_err(err, errlen, "PLY files with both faces and triangle strips are not supported");
    rc = MESH_EFORMAT;
    goto out;
  }
  info->vertex_count = nverts;

  int slot[PLY_MAX_PROPS];
  rc = strip_vertex_slots(h, len, nverts, slot, info, err, errlen);
  if (rc) goto out;

  ply_reader rd = {buf, len, h->data_offset, h->format, 0};
  for (int ei = 0; ei < h->element_count; ei++) {
    const ply_element *e = &h->elements[ei];
    int is_face = strcmp(e->name, "face") == 0, is_strip = strcmp(e->name, "tristrips") == 0;
    int keep = info->positions && strcmp(e->name, "vertex") == 0;
    for (uint64_t inst = 0; inst < e->count; inst++) {
      for (int pi = 0; pi < e->prop_count; pi++) {
        const ply_prop *p = &e->props[pi];
        double v;
        if (!p->is_list) {
          if (read_number(&rd, p->size, p->is_float, p->is_signed, &v)) goto truncated;
          if (keep && slot[pi] >= 0) {
            int k = slot[pi];
            if (k < 3) info->positions[3 * inst + (uint64_t)k] = (float)v;
            else if (k < 6 && info->normals) info->normals[3 * inst + (uint64_t)(k - 3)] = (float)v;
            else if (k >= 6 && info->uvs) info->uvs[2 * inst + (uint64_t)(k - 6)] = (float)v;
          }
          continue;
        }
        double cnt;
        if (read_number(&rd, p->count_size, 0, 0, &cnt)) goto truncated;
        /* A list cannot hold more items than bytes remain: checked before allocating. */
        if (!(cnt >= 0) || cnt > (double)(len - rd.pos)) goto truncated;
        size_t n = (size_t)cnt;
        int indices = (is_face || is_strip) && is_index_list(p);
        if (indices && is_face && n == 0) {
          /* assimp 5.2 aborts on a face without vertices (an assert in its post-processing;
           * found by fuzzing). */
          mesh__set_err(err, errlen, "PLY face %llu has no vertices", (unsigned long long)inst);
          rc = MESH_EFORMAT;
          goto out;
        }
        if (indices && is_strip && n > strip_cap) {
          free(strip);
          strip_cap = n;
          strip = malloc(sizeof(int64_t) * (n + 1));
          if (!strip) {
            rc = MESH_ENOMEM;
            goto out;
          }
        }
        size_t run = 0;
        for (size_t i = 0; i < n; i++) {
          if (read_number(&rd, p->size, p->is_float, p->is_signed, &v)) goto truncated;
          if (!indices) continue;
          if (is_strip && v == -1.0) { /* restart */
            rc = emit_strip(strip, run, &info->strip_triangles, &ntris, &cap);
            if (rc) goto out;
            run = 0;
            continue;
          }
          if (!(v >= 0) || v >= (double)nverts || v != (double)(int64_t)v) {
            mesh__set_err(err, errlen, "PLY %s %llu references vertex %.0f but the file has %llu vertices",
                          is_strip ? "strip" : "face", (unsigned long long)inst, v,
                          (unsigned long long)nverts);
            rc = MESH_ERANGE;
            goto out;
          }
          if (is_strip) strip[run++] = (int64_t)v;
        }
        if (indices && is_strip) {
          rc = emit_strip(strip, run, &info->strip_triangles, &ntris, &cap);
          if (rc) goto out;
        }
      }
    }
  }
  if (ntris > UINT32_MAX / 3) {
    mesh__set_err(err, errlen, "PLY: too many triangles in strips");
    rc = MESH_ETOOBIG;
    goto out;
  }
  info->strip_triangle_count = (uint32_t)ntris;
  rc = 0;
  goto out;

truncated:
  if (rd.bad_number)
    mesh__set_err(err, errlen, "PLY: a value near byte %zu of the data is not a number", rd.pos);
  else
    mesh__set_err(err, errlen, "PLY: the data ends before the counts in the header are read (truncated file?)");
  rc = MESH_EFORMAT;
out:
  if (rc) mesh__ply_info_fini(info);
  free(strip);
  free(buf);
  free(h);
  return rc;
}

void mesh__ply_info_fini(mesh__ply_info *info) {
  free(info->strip_triangles);
  free(info->positions);
  free(info->normals);
  free(info->uvs);
  memset(info, 0, sizeof(*info));
}
