/*
 * mesh_internal.h — helpers shared between the mesh_*.c files. Not part of the public API.
 */
#ifndef DEFORMD_MESH_INTERNAL_H
#define DEFORMD_MESH_INTERNAL_H

#include <stddef.h>

#include "mesh.h"

#if defined(__GNUC__)
#define MESH__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MESH__PRINTF(a, b)
#endif

/* Writes a formatted reason into err (when not NULL). */
void mesh__set_err(char *err, size_t errlen, const char *fmt, ...) MESH__PRINTF(3, 4);

/* malloc'ed copy of s, or NULL when out of memory. */
char *mesh__strdup(const char *s);

/* Frees what a target owns and zeroes it. */
void mesh__target_fini(mesh_target *t);

/* Appends *t to m->targets, taking ownership of its arrays (t is zeroed). 0 or MESH_ENOMEM. */
int mesh__push_target(mesh *m, mesh_target *t);

/* PLY files (mesh_ply.c): a structural check run before assimp sees the file, which also
 * reads triangle strips (assimp keeps one triangle per strip). */
typedef struct mesh__ply_info {
  uint64_t vertex_count;      /* the vertex element's count */
  int has_strips;             /* when set, everything below is filled and assimp is not used */
  uint32_t *strip_triangles;  /* 3 * strip_triangle_count, malloc'ed */
  uint32_t strip_triangle_count;
  float *positions;           /* 3 * vertex_count */
  float *normals;             /* 3 * vertex_count or NULL */
  float *uvs;                 /* 2 * vertex_count or NULL */
} mesh__ply_info;

/* Returns 0 when the whole file is present and every face/strip index is in range, else a
 * MESH_E* code with a reason. On success free `info` with mesh__ply_info_fini(). */
int mesh__ply_check(const char *path, mesh__ply_info *info, char *err, size_t errlen);
void mesh__ply_info_fini(mesh__ply_info *info);

/* MD3 files (mesh_md3.c): assimp reads only frame 0, so frames are read here. */
typedef struct mesh__md3_surface {
  uint32_t vertex_count, triangle_count;
  const unsigned char *triangles; /* 3 * triangle_count little-endian uint32 */
  const unsigned char *xyz;       /* frame_count * vertex_count * (int16 x, y, z, normal) */
} mesh__md3_surface;

typedef struct mesh__md3 {
  unsigned char *data; /* the whole file */
  size_t size;
  uint32_t frame_count, surface_count;
  mesh__md3_surface *surfaces;
} mesh__md3;

/* Loads and bounds-checks `path`. Returns 0 or a MESH_E* code with a reason. Free with _fini. */
int mesh__md3_load(const char *path, mesh__md3 *f, char *err, size_t errlen);
void mesh__md3_fini(mesh__md3 *f);
/* Positions of surface `surface` at `frame`, three per triangle, corners in file order (the
 * layout assimp uses): `out` has 9 * triangle_count floats. */
void mesh__md3_expand(const mesh__md3 *f, uint32_t surface, uint32_t frame, float *out);

#endif
