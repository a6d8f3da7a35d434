/*
 * srv_data.h — the data folders clients name files in (DIR/meshes, DIR/exports, --mesh-dir) and files
 * written beneath them (a temporary name, then a rename).
 */
#ifndef DEFORMD_SRV_DATA_H
#define DEFORMD_SRV_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"

#define SRV_MAX_MESH_DIRS 16

typedef struct srv_data {
  int meshes, exports;            /* DIR/meshes and DIR/exports, -1 with --data none */
  int roots[SRV_MAX_MESH_DIRS + 1]; /* where meshes are looked up: meshes/ first, then each --mesh-dir */
  uint32_t root_count;
} srv_data;

/* Creates (when missing) and opens DIR/meshes and DIR/exports (dir NULL: --data none) and the
 * --mesh-dir folders. At start only. Returns 0 or SRV_EIO / SRV_EPARAMS with a reason. */
int srv_data_open(srv_data *d, const char *dir, char *const *mesh_dirs, uint32_t n, char *err, size_t errlen);
void srv_data_close(srv_data *d);
/* Creates `dir` and every missing folder above it, each 0700 (as the XDG base directory spec
 * asks of $XDG_DATA_HOME: a first run's ~/.local/share may not exist). At start only. Returns 0
 * or SRV_EIO with a reason naming the folder that could not be made. */
int srv_data_make_dir(const char *dir, char *err, size_t errlen);

/* A file being written beneath a folder: a temporary name beside the final one. On the pool. */
typedef struct srv_data_temp {
  int fd, parent, own_parent;
  char tmp[64], base[256];
} srv_data_temp;

/* `name` (a relative name, mesh_name_ok) beneath dir_fd; `folder` names it in messages
 * ("meshes", "exports"). Each returns 0 or SRV_EIO with a reason; commit and discard close it. */
int srv_data_temp_open(int dir_fd, const char *name, const char *folder, srv_data_temp *t, char *err, size_t errlen);
int srv_data_temp_write(srv_data_temp *t, uint64_t offset, const void *data, size_t len, char *err, size_t errlen);
int srv_data_temp_commit(srv_data_temp *t, const char *name, const char *folder, char *err, size_t errlen);
void srv_data_temp_discard(srv_data_temp *t);
/* The whole file at once. */
int srv_data_write(int dir_fd, const char *name, const char *folder, const void *data, size_t len, char *err,
                   size_t errlen);

#endif
