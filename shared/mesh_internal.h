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

/* Frees what a clip owns and zeroes it. */
void mesh__clip_fini(mesh_clip *c);

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

/* ---- Clips (mesh_clip.c) ---- */

/* Length of a name field in MD2 and MD3 frame headers. */
#define MESH__FRAME_NAME_LEN 16

/* Turns per-frame names (`count` fields of 16 bytes, NUL-padded, for frames 0..count-1) into
 * keyframe clips of m->frames played at `fps`: consecutive frames whose names agree once trailing
 * digits are stripped form one clip named by that prefix ("<prefix>_<first frame>" for a prefix
 * that comes back after another one). When names is NULL or any name is unusable (empty, not
 * printable ASCII, or only digits), one clip "all" covers every frame. Expects a mesh without
 * clips and count == m->frame_count. 0 or MESH_ENOMEM. */
int mesh__clips_from_frame_names(mesh *m, const char (*names)[MESH__FRAME_NAME_LEN],
                                 uint32_t count, float fps);

typedef enum mesh__interp {
  MESH__INTERP_LINEAR = 0,
  MESH__INTERP_STEP,
  MESH__INTERP_CUBIC  /* per key: in-tangents, values, out-tangents (value_count each) */
} mesh__interp;

/* One animated set of target weights, as a file stores it (borrowed arrays). */
typedef struct mesh__weight_channel {
  uint32_t key_count;
  const float *times;      /* key_count seconds */
  const float *values;     /* key_count × value_count, or × 3 × value_count for CUBIC */
  uint32_t value_count;
  const int *target_of;    /* value_count entries: index into m->targets, or -1 for none */
  mesh__interp interp;
} mesh__weight_channel;

/* Appends a weight clip built from `n` channels of one animation. Channels with different key
 * times are resampled onto the union of their times (each by its own interpolation); one
 * channel keeps its keys exactly. `name` NULL or "" becomes "animation<index>"; a name already
 * taken gets "_<index>" appended. Nothing is added when no channel reaches a target of m.
 * Returns 0, MESH_EFORMAT (times not increasing), MESH_ENONFINITE, MESH_ETOOBIG or MESH_ENOMEM,
 * with a reason in `err`. */
int mesh__add_weight_clip(mesh *m, const char *name, uint32_t index,
                          const mesh__weight_channel *ch, uint32_t n, char *err, size_t errlen);

/* glTF 2.0 morph-weight animations (mesh_gltf_anim.c): reads the animations of the .gltf/.glb
 * at `path` from its JSON and buffers and adds one weight clip per animation that drives
 * targets of m (matched by name, the way the importer named them). 0 or a MESH_E* code with a
 * reason. */
int mesh__gltf_weight_clips(const char *path, mesh *m, char *err, size_t errlen);

/* Refuses (MESH_EFORMAT, with a reason) the weight samplers assimp 5.2.5 crashes on: no keys
 * (it divides by the key count: SIGFPE), or a CUBICSPLINE output shorter than 3 per key (its
 * target count wraps below zero). Run before assimp reads a glTF file; the JSON is parsed only
 * when it mentions "weights". 0 or a MESH_E* code. */
int mesh__gltf_precheck(const char *path, char *err, size_t errlen);

/* MD2 frame names (mesh_md2.c). Checks the header, the frame table and the declared file end
 * against the file size, so a truncated or lying file is refused here (MESH_EFORMAT, with a
 * reason). On success *names is a malloc'ed array of *count 16-byte names the caller frees. */
int mesh__md2_frame_names(const char *path, char (**names)[MESH__FRAME_NAME_LEN], uint32_t *count,
                          char *err, size_t errlen);

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
  const unsigned char *frame_headers; /* frame_count × 56 bytes; the name at +40 */
  mesh__md3_surface *surfaces;
} mesh__md3;

/* Loads and bounds-checks `path`. Returns 0 or a MESH_E* code with a reason. Free with _fini. */
int mesh__md3_load(const char *path, mesh__md3 *f, char *err, size_t errlen);
void mesh__md3_fini(mesh__md3 *f);
/* Positions of surface `surface` at `frame`, three per triangle, corners in file order (the
 * layout assimp uses): `out` has 9 * triangle_count floats. */
void mesh__md3_expand(const mesh__md3 *f, uint32_t surface, uint32_t frame, float *out);

#endif
