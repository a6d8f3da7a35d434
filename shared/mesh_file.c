/*
 * mesh_file.c — opening the files an import reads (the mesh file and whatever it names: an
 * OBJ's .mtl, a glTF's buffers, an MD3's animation.cfg), anywhere for a local tool, or only
 * beneath one folder for a server whose clients name meshes, never paths on its machine.
 *
 * A confined import resolves every name with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 * against the folder its mesh was found in: an absolute path, a ".." that climbs out, or a
 * symlink that leaves the folder fails inside the kernel, so nothing outside can be read or
 * even told apart from a missing file. assimp reads through an aiFileIO that opens the same
 * way. The confinement, and the redaction of error messages that goes with it (nothing read
 * from a file is echoed), hold for the thread that runs one mesh_import and end with it.
 *
 * DOES NOT parse anything, and opens nothing for writing itself (mesh_open_beneath does what
 * its caller asks).
 */
#define _GNU_SOURCE
#include <assimp/cfileio.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mesh.h"
#include "mesh_internal.h"

int mesh_open_beneath(int root_fd, const char *name, int flags, unsigned mode) {
  if (root_fd < 0 || !name || !name[0]) return -ENOENT;
  struct open_how how;
  memset(&how, 0, sizeof(how));
  how.flags = (uint64_t)(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = syscall(SYS_openat2, root_fd, name, &how, sizeof(how));
    if (fd >= 0) return (int)fd;
    /* EAGAIN: a concurrent rename raced the lookup (the kernel asks to retry). */
    if (errno != EINTR && errno != EAGAIN) return -errno;
  }
}

int mesh_name_ok(const char *name, size_t max_len) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > max_len || name[0] == '/') return 0;
  for (const char *c = name; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\') return 0;
  /* Every component: not empty, not "." or "..", at most 255 bytes. */
  for (const char *p = name; *p;) {
    const char *slash = strchr(p, '/');
    size_t len = slash ? (size_t)(slash - p) : strlen(p);
    if (len == 0 || len > 255 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) return 0;
    if (!slash) break;
    p = slash + 1;
    if (!*p) return 0; /* a trailing slash names a folder */
  }
  return 1;
}

/* ---- the confinement of one import (per thread) ---------------------------------------------- */

static _Thread_local int tls_root = -1;
static _Thread_local int tls_redact;

void mesh__confine_begin(int root_fd, int redact) {
  tls_root = root_fd;
  tls_redact = redact;
}

void mesh__confine_end(void) {
  tls_root = -1;
  tls_redact = 0;
}

int mesh__redacting(void) { return tls_redact; }

FILE *mesh__fopen(const char *path) {
  if (tls_root < 0) return fopen(path, "rb");
  int fd = mesh_open_beneath(tls_root, path, O_RDONLY, 0);
  if (fd < 0) {
    errno = -fd;
    return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) close(fd);
  return f;
}

/* ---- assimp's file system while confined ----------------------------------------------------- */

static size_t ai_read(struct aiFile *f, char *buf, size_t size, size_t count) {
  return fread(buf, size, count, (FILE *)f->UserData);
}

static size_t ai_write(struct aiFile *f, const char *buf, size_t size, size_t count) {
  (void)f, (void)buf, (void)size, (void)count;
  return 0; /* an import writes nothing */
}

static size_t ai_tell(struct aiFile *f) {
  long at = ftell((FILE *)f->UserData);
  return at < 0 ? 0 : (size_t)at;
}

static size_t ai_size(struct aiFile *f) {
  struct stat st;
  return fstat(fileno((FILE *)f->UserData), &st) == 0 ? (size_t)st.st_size : 0;
}

static void ai_flush(struct aiFile *f) { (void)f; }

static enum aiReturn ai_seek(struct aiFile *f, size_t offset, enum aiOrigin origin) {
  int whence = origin == aiOrigin_CUR ? SEEK_CUR : origin == aiOrigin_END ? SEEK_END : SEEK_SET;
  return fseek((FILE *)f->UserData, (long)offset, whence) == 0 ? aiReturn_SUCCESS : aiReturn_FAILURE;
}

static struct aiFile *ai_open(struct aiFileIO *io, const char *path, const char *mode) {
  (void)io;
  if (!mode || strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+')) return NULL;
  FILE *fp = mesh__fopen(path);
  if (!fp) return NULL;
  struct aiFile *f = calloc(1, sizeof(*f));
  if (!f) {
    fclose(fp);
    return NULL;
  }
  f->ReadProc = ai_read;
  f->WriteProc = ai_write;
  f->TellProc = ai_tell;
  f->FileSizeProc = ai_size;
  f->SeekProc = ai_seek;
  f->FlushProc = ai_flush;
  f->UserData = (aiUserData)fp;
  return f;
}

static void ai_close(struct aiFileIO *io, struct aiFile *f) {
  (void)io;
  if (!f) return;
  fclose((FILE *)f->UserData);
  free(f);
}

struct aiFileIO *mesh__ai_file_io(void) {
  static struct aiFileIO io = {ai_open, ai_close, NULL};
  return tls_root >= 0 ? &io : NULL;
}

/* ---- messages that echo nothing a file said ---------------------------------------------------- */

/* A quote opens after the start, a space or an opening bracket, and closes before the end, a
 * space or punctuation: "assimp's" is not a quote. */
static int opens_quote(const char *s, size_t i) {
  return (s[i] == '\'' || s[i] == '"') && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '(' || s[i - 1] == '[');
}

void mesh__redact(char *err, size_t errlen, int keep_first) {
  if (!err || errlen == 0) return;
  size_t w = 0, n = strlen(err);
  int quotes = 0;
  char out[MESH_ERR_LEN];
  for (size_t i = 0; i < n && w + 8 < sizeof(out);) {
    if (opens_quote(err, i)) {
      char q = err[i];
      const char *end = strchr(err + i + 1, q);
      if (end) {
        size_t len = (size_t)(end - (err + i)) + 1;
        if (quotes++ == 0 && keep_first) { /* the name the caller gave, not the file's words */
          if (w + len >= sizeof(out)) break;
          memcpy(out + w, err + i, len);
          w += len;
        } else {
          out[w++] = q;
          memcpy(out + w, "\xe2\x80\xa6", 3); /* … */
          w += 3;
          out[w++] = q;
        }
        i += len;
        continue;
      }
    }
    out[w++] = err[i++];
  }
  if (w >= errlen) w = errlen - 1;
  out[w] = '\0';
  memcpy(err, out, w + 1);
}
