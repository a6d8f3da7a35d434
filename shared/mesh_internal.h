/*
 * mesh_internal.h — helpers shared between the mesh_*.c files. Not part of the public API.
 */
#ifndef DEFORMD_MESH_INTERNAL_H
#define DEFORMD_MESH_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "mesh.h"

#if defined(__GNUC__)
#define MESH__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MESH__PRINTF(a, b)
#endif

/* Writes a formatted reason into err (when not NULL). */
void mesh__set_err(char *err, size_t errlen, const char *fmt, ...) MESH__PRINTF(3, 4);

/* Files an import reads (mesh_file.c). Between mesh__confine_begin and _end, on this thread,
 * every file is opened beneath root_fd (mesh_open_beneath) and, with `redact`, messages echo
 * nothing a file said. mesh__fopen opens for reading ("rb"), confined or not; mesh__ai_file_io
 * is the aiFileIO assimp must read through (NULL when not confined: its own). */
struct aiFileIO;
void mesh__confine_begin(int root_fd, int redact);
void mesh__confine_end(void);
int mesh__redacting(void);
FILE *mesh__fopen(const char *path);
struct aiFileIO *mesh__ai_file_io(void);
/* Replaces what every quoted run of `err` says ('x' or "x" -> '…'), except the first one when
 * keep_first (the name the caller gave). */
void mesh__redact(char *err, size_t errlen, int keep_first);

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
 * that comes back after another one); a group whose names number variants the Quake II way
 * (death101…, death201…) also gets one clip per variant ("death1", "death2", …) after all the
 * groups; and when there is more than one group, a last clip "all" spans every frame. When names
 * is NULL or any name is unusable (empty, not printable ASCII, or only digits), one clip "all"
 * covers every frame. Clips the mesh has already (an animation.cfg's) keep their names: a
 * clip of the same name is not added. Expects count == m->frame_count. 0 or MESH_ENOMEM. */
int mesh__clip_from_frame_names(mesh *m, const char (*names)[MESH__FRAME_NAME_LEN],
                                uint32_t count, float fps);

/* Quake III's animation.cfg beside an MD3 (mesh_md3_cfg.c): when `model_path`'s folder has
 * one, appends one clip per animation it defines, in the game's order and with its names
 * (BOTH_DEATH1 … LEGS_TURN, then the Team Arena gestures), its first frame, frame count,
 * looping frames and rate. A lower*.md3 gets the BOTH_ and LEGS_ animations (the legs' first
 * frames counted without the torso's, as the game does), an upper*.md3 the BOTH_ and TORSO_
 * ones, any other model every animation its frames hold. Animations beyond the frames read are
 * left out (cut at the last frame read). Returns 0 (also with no animation.cfg) or MESH_EFORMAT
 * with the line that does not parse, or MESH_ENOMEM. */
int mesh__md3_cfg_clips(const char *model_path, mesh *m, char *err, size_t errlen);

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
int mesh__clip_from_weight_channels(mesh *m, const char *name, uint32_t index,
                                    const mesh__weight_channel *ch, uint32_t n, char *err,
                                    size_t errlen);

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

/* ---- assimp scenes (mesh_scene.c) ---- */

struct aiScene;
struct aiMesh;
struct aiVector3D;

/* A transform: row-major, column vectors (p' = M p). */
typedef struct mesh__mat4d {
  double m[4][4];
} mesh__mat4d;

/* One placed aiMesh: which mesh (borrowed from the scene), with its node's global transform. */
typedef struct mesh__instance {
  const struct aiMesh *mesh;
  mesh__mat4d xf;
  const char *name; /* the mesh's name, else its node's (borrowed) */
} mesh__instance;

/* Every aiMesh with triangles in a scene's node tree, depth first. */
typedef struct mesh__scene {
  mesh__instance *items; /* malloc'ed: free with mesh__scene_fini */
  uint32_t count, cap;
} mesh__scene;

/* Reads `path` through assimp with the flags and properties every read uses. `md2_keyframe` >= 0
 * names the MD2 keyframe to read; -1 for other files. Returns MESH_ENOMEM, or 0 with *out the
 * scene (release it with aiReleaseImport), or NULL when assimp could not read the file: its log
 * says why. */
int mesh__scene_read(const char *path, int md2_keyframe, const struct aiScene **out);
/* Fills `g` from the node tree of `sc` (zeroing it first). Returns 0, MESH_EFORMAT (a hierarchy
 * deeper than 256: a cycle), MESH_ERANGE (a node names a mesh that does not exist) or
 * MESH_ENOMEM; call mesh__scene_fini either way. */
int mesh__scene_gather(const struct aiScene *sc, mesh__scene *g);
/* 'z' when the scene's metadata says +Z is up (FBX's UpAxis 2 with UpAxisSign 1), else 0. */
char mesh__scene_up_axis(const struct aiScene *sc);
/* Reads the image file `path` (through mesh__fopen: beneath the import's folder when confined),
 * at most max_bytes of it, and decodes it (mesh_image_decode). MESH_ENOENT when it cannot be
 * opened, MESH_ETOOBIG when it is longer. */
int mesh__image_read(const char *path, size_t max_bytes, mesh_image *out, char *err, size_t errlen);
/* The base colours and textures of the scene's materials, onto the submeshes made from `g`'s
 * instances (one each, in order); decoded images appended to *images. A texture that cannot be
 * found, or is in a format not decoded here, leaves its submesh untextured (files often name
 * images they do not ship); one that should decode and does not, or that is over the limits,
 * fails with MESH_EFORMAT / MESH_ETOOBIG and the reason in err; so does running out of memory.
 * (mesh_material.c) */
int mesh__scene_materials(const struct aiScene *sc, const mesh__scene *g, const char *mesh_path,
                          mesh_submesh *submeshes, mesh_image **images, uint32_t *image_count, char *err,
                          size_t errlen);
void mesh__scene_fini(mesh__scene *g);

/* ---- materials in exports (mesh_export_mat.c) ---- */

struct cJSON;
/* Whether any submesh has a base colour or a texture. */
int mesh__has_materials(const mesh *m);
/* The MTL name of submesh i ("material<i>"). */
void mesh__mtl_name(const mesh_submesh *s, uint32_t i, char *out, size_t cap);
/* The MTL beside `stem`.obj: a material per submesh, Kd, d and map_Kd `stem`_N.png for image N.
 * Returns a malloc'ed string (caller frees) or NULL. */
char *mesh__mtl_text(const mesh *m, const char *stem);
/* Gives the glTF `root` (a GLB's JSON, its binary chunk `bin_len` bytes) a material per submesh,
 * a texture and an image per image, each image's PNG in *pngs / *png_lens (malloc'ed arrays of
 * image_count, the caller frees both and every PNG) to be appended to the binary chunk at 4-byte
 * boundaries, as the bufferViews it adds say; primitive i (counted across the meshes) takes
 * material i (per_mesh) or 0. Returns 0, MESH_ENOMEM or MESH_EINVAL (no buffer). */
int mesh__gltf_add_materials(const mesh *m, struct cJSON *root, int per_mesh, size_t bin_len, uint8_t ***pngs,
                             size_t **png_lens);
/* `v` placed by `xf`. */
void mesh__scene_point(const mesh__mat4d *xf, const struct aiVector3D *v, double out[3]);
/* The matrix that places normals under `xf`: the inverse-transpose of its 3x3 up to a positive
 * factor (the 3x3 itself when singular). */
void mesh__scene_normal_matrix(const mesh__mat4d *xf, double n[3][3]);

/* ---- header counts against the file size, before assimp reads a file ---- */

/* Whether `path` is an OFF file: by its extension, or a [ST][C][N][4][n]OFF keyword at its start. */
int mesh__off_is_off(const char *path);
/* Refuses (MESH_EFORMAT, with both figures) an OFF file whose header declares more vertices and
 * faces than its bytes can hold (mesh_off.c). 0 or a MESH_E* code. */
int mesh__off_check(const char *path, char *err, size_t errlen);
/* Refuses an MD3 file whose frame, tag or surface counts or offsets lie outside it, or whose
 * triangles name vertices it does not have (mesh_md3.c). 0 or a MESH_E* code with a reason. */
int mesh__md3_check(const char *path, char *err, size_t errlen);

/* ---- keyframe files (mesh_md2.c, mesh_md3.c) ---- */

/* MD2 frame names. Checks the header, the frame table and the declared file end against the
 * file size, so a truncated or lying file is refused here (MESH_EFORMAT, with a reason). On
 * success *names is a malloc'ed array of *count 16-byte names the caller frees. */
int mesh__md2_frame_names(const char *path, char (**names)[MESH__FRAME_NAME_LEN], uint32_t *count,
                          char *err, size_t errlen);

/* MD2 keyframes 0 .. nframes-1. assimp reads one keyframe per import, so frames 1 .. nframes-1
 * are one more import of `path` each, placed by their node transforms like frame 0 (`frame0`,
 * vertex_count render vertices, already read) and required to have as many vertices.
 * `assimp_error` is the first error assimp logged in this mesh_import, quoted when an import
 * fails (mesh_import.c's log capture fills it while each import runs). Returns 0 with *frames a
 * malloc'ed array of nframes × 3 × vertex_count floats, or MESH_EFORMAT, MESH_EMISMATCH,
 * MESH_ENONFINITE or MESH_ENOMEM with a reason. */
int mesh__md2_read_frames(const char *path, uint32_t nframes, const float *frame0, uint32_t vertex_count,
                          const char *assimp_error, float **frames, char *err, size_t errlen);

/* MD3 keyframes, read from the file itself: assimp 5.2 reads only frame 0. `g` is assimp's
 * scene of the same file (frame 0), whose meshes (vertex_count vertices in all, in `g`'s order)
 * are matched to the file's surfaces by their frame-0 positions. Returns 0 with *count =
 * min(nframes, the file's frames), *frames a malloc'ed array of *count × 3 × vertex_count floats
 * placed like `g`, and *names their *count malloc'ed 16-byte frame names; or a MESH_E* code with
 * a reason (the file's surfaces do not match assimp's, a count or offset lies outside the file). */
int mesh__md3_read_frames(const char *path, const mesh__scene *g, uint32_t nframes, uint32_t vertex_count,
                          float **frames, char (**names)[MESH__FRAME_NAME_LEN], uint32_t *count, char *err,
                          size_t errlen);

#endif
