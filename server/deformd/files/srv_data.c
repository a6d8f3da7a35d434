/*
 * srv_data.c — the data directory as a boundary: the folders clients may name files in, and
 * writing files beneath them.
 *
 *   DIR/meshes/    what session.create and blend.fit read, and mesh.upload writes
 *   DIR/exports/   where session.export {path} writes
 *   --mesh-dir P   more folders session.create reads (read-only; e.g. /usr/share/assimp/models)
 * With --data none there is no DIR: only --mesh-dir folders are readable and nothing is written
 * (downloads still work: they are answers, not files).
 *
 * Each folder is opened once at start and kept as a descriptor; every name a client gives is
 * checked as a relative name (mesh_name_ok) and opened with mesh_open_beneath (openat2
 * RESOLVE_BENEATH), so no absolute path, "..", or symlink leads outside, and what exists outside
 * cannot be told from what does not. A file is written to a temporary name beside its final
 * one and renamed over it: a reader never sees half a file.
 *
 * The srv_data_* functions that touch files run on the thread pool (srv_jobs.c,
 * srv_transfer_rpc.c); srv_data_open runs at start, before the loop serves anyone.
 *
 * DOES NOT decide who may write (srv_access.c) or what a file holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mesh.h"
#include "srv_data.h"
#include "srv_error.h"

static int open_dir(const char *path) { return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

int srv_data_make_dir(const char *dir, char *err, size_t errlen) {
  char path[1100];
  if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
    snprintf(err, errlen, "the data directory's name is too long");
    return SRV_EIO;
  }
  /* Each prefix that ends at a '/', then the whole: mkdir(1) -p, with 0700 for what it makes. */
  for (char *slash = path + 1;; slash++) {
    if (*slash != '/' && *slash != '\0') continue;
    char was = *slash;
    *slash = '\0';
    struct stat st;
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
      snprintf(err, errlen, "cannot create the data directory %s: %s", path, strerror(errno));
      return SRV_EIO;
    }
    if (was == '\0' && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
      snprintf(err, errlen, "the data directory %s is not a folder", path);
      return SRV_EIO;
    }
    *slash = was;
    if (was == '\0') return 0;
  }
}

int srv_data_open(srv_data *d, const char *dir, char *const *mesh_dirs, uint32_t n, char *err, size_t errlen) {
  memset(d, 0, sizeof(*d));
  d->meshes = d->exports = -1;
  if (n > SRV_MAX_MESH_DIRS) {
    snprintf(err, errlen, "at most %d --mesh-dir folders", SRV_MAX_MESH_DIRS);
    return SRV_EPARAMS;
  }
  if (dir) {
    char path[1100];
    const char *sub[2] = {"meshes", "exports"};
    int *fd[2] = {&d->meshes, &d->exports};
    for (int k = 0; k < 2; k++) {
      snprintf(path, sizeof(path), "%s/%s", dir, sub[k]);
      if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        srv_data_close(d);
        return SRV_EIO;
      }
      if ((*fd[k] = open_dir(path)) < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        srv_data_close(d);
        return SRV_EIO;
      }
    }
    d->roots[d->root_count++] = d->meshes;
  }
  for (uint32_t i = 0; i < n; i++) {
    int fd = open_dir(mesh_dirs[i]);
    if (fd < 0) {
      snprintf(err, errlen, "--mesh-dir %s: %s", mesh_dirs[i], strerror(errno));
      srv_data_close(d);
      return SRV_EPARAMS;
    }
    d->roots[d->root_count++] = fd;
  }
  return 0;
}

void srv_data_close(srv_data *d) {
  for (uint32_t i = 0; i < d->root_count; i++)
    if (d->roots[i] >= 0 && d->roots[i] != d->meshes) close(d->roots[i]);
  if (d->meshes >= 0) close(d->meshes);
  if (d->exports >= 0) close(d->exports);
  memset(d, 0, sizeof(*d));
  d->meshes = d->exports = -1;
}

/* The folder `name` goes in beneath dir_fd, and its last component. *parent is dir_fd itself
 * for a name without '/', else a descriptor the caller closes (it differs from dir_fd). */
static int open_parent(int dir_fd, const char *name, int *parent, const char **base) {
  const char *slash = strrchr(name, '/');
  *base = slash ? slash + 1 : name;
  *parent = dir_fd;
  if (!slash) return 0;
  char folder[1100];
  size_t n = (size_t)(slash - name);
  if (n >= sizeof(folder)) return -ENAMETOOLONG;
  memcpy(folder, name, n);
  folder[n] = '\0';
  int fd = mesh_open_beneath(dir_fd, folder, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return fd;
  *parent = fd;
  return 0;
}

/* Why a write beneath a folder failed, in words that name nothing outside it. */
static void write_error(char *err, size_t errlen, const char *name, const char *folder, int e) {
  if (e == EXDEV || e == ELOOP || e == ENOENT || e == ENOTDIR)
    snprintf(err, errlen, "'%s' is not a file name in %s/ (a folder in it must exist)", name, folder);
  else
    snprintf(err, errlen, "cannot write '%s' in %s/: %s", name, folder, strerror(e));
}

int srv_data_temp_open(int dir_fd, const char *name, const char *folder, srv_data_temp *t, char *err, size_t errlen) {
  memset(t, 0, sizeof(*t));
  t->fd = t->parent = -1;
  const char *base;
  int rc = open_parent(dir_fd, name, &t->parent, &base);
  if (rc < 0) {
    write_error(err, errlen, name, folder, -rc);
    return SRV_EIO;
  }
  t->own_parent = t->parent != dir_fd;
  uint32_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) r = (uint32_t)getpid();
  snprintf(t->tmp, sizeof(t->tmp), ".deformd-%08x.part", r);
  snprintf(t->base, sizeof(t->base), "%s", base);
  /* A fresh name, never a link: O_EXCL does not follow one. */
  t->fd = openat(t->parent, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (t->fd < 0) {
    write_error(err, errlen, name, folder, errno);
    srv_data_temp_discard(t);
    return SRV_EIO;
  }
  return 0;
}

int srv_data_temp_write(srv_data_temp *t, uint64_t offset, const void *data, size_t len, char *err, size_t errlen) {
  const uint8_t *p = data;
  while (len > 0) {
    ssize_t w = pwrite(t->fd, p, len, (off_t)offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      snprintf(err, errlen, "cannot write: %s", w < 0 ? strerror(errno) : "no space");
      return SRV_EIO;
    }
    p += w;
    len -= (size_t)w;
    offset += (uint64_t)w;
  }
  return 0;
}

int srv_data_temp_commit(srv_data_temp *t, const char *name, const char *folder, char *err, size_t errlen) {
  int rc = 0;
  if (fsync(t->fd) != 0 || renameat(t->parent, t->tmp, t->parent, t->base) != 0) {
    write_error(err, errlen, name, folder, errno);
    rc = SRV_EIO;
  } else {
    t->tmp[0] = '\0'; /* renamed: nothing to remove */
  }
  srv_data_temp_discard(t);
  return rc;
}

void srv_data_temp_discard(srv_data_temp *t) {
  if (t->fd >= 0) close(t->fd);
  if (t->tmp[0] && t->parent >= 0) unlinkat(t->parent, t->tmp, 0);
  if (t->own_parent && t->parent >= 0) close(t->parent);
  t->fd = t->parent = -1;
  t->tmp[0] = '\0';
  t->own_parent = 0;
}

int srv_data_write(int dir_fd, const char *name, const char *folder, const void *data, size_t len, char *err,
                   size_t errlen) {
  srv_data_temp t;
  int rc = srv_data_temp_open(dir_fd, name, folder, &t, err, errlen);
  if (rc == 0) rc = srv_data_temp_write(&t, 0, data, len, err, errlen);
  if (rc == 0) return srv_data_temp_commit(&t, name, folder, err, errlen);
  srv_data_temp_discard(&t);
  return rc;
}
