/*
 * mesh_core.h — the mesh handle and what it holds: render vertices, triangles, sparse morph
 * targets, keyframes, clips and submesh ranges; the MESH_E* codes and mesh_strerror(); creating,
 * filling, evaluating and validating a mesh (mesh.c).
 *
 * DOES NOT read or write files (mesh_io.h) or compute topology, Laplacians, normals or
 * statistics (mesh_geom.h). Most callers include mesh.h, which includes this.
 */
#ifndef DEFORMD_MESH_CORE_H
#define DEFORMD_MESH_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: a named range of their own, below -4000 so they never collide with -errno. */
enum {
  MESH_ENOENT = -4001,       /* file missing or unreadable */
  MESH_EFORMAT = -4002,      /* no importer for this format, or the file does not parse */
  MESH_ENOTRIS = -4003,      /* nothing triangular in the file */
  MESH_ENONFINITE = -4004,   /* NaN or Inf in positions, normals, UVs, targets or frames */
  MESH_ERANGE = -4005,       /* an index points outside its array */
  MESH_ETOOBIG = -4006,      /* more vertices or triangles than the configured limit */
  MESH_ENOMEM = -4007,       /* allocation failed */
  MESH_EINVAL = -4008,       /* bad argument from the caller */
  MESH_EIO = -4009,          /* writing an output file failed */
  MESH_EMISMATCH = -4010     /* frames or targets disagree with the base mesh */
};

/* Returns a static string naming `code` (any MESH_E* code, 0, or a negative errno). */
const char *mesh_strerror(int code);

/* Size of the error buffers the functions below accept. Shorter buffers are truncated. */
#define MESH_ERR_LEN 256

/* A morph target (blendshape): position deltas of the render vertices it moves.
 * Stored sparsely: `indices` ascending, `deltas` 3 floats per entry. Vertices not listed have a
 * zero delta. */
typedef struct mesh_target {
  char *name;            /* owned, NUL-terminated, never NULL */
  float default_weight;  /* glTF mesh.weights[i]; 0 when the file has none */
  uint32_t count;        /* number of moved vertices */
  uint32_t *indices;     /* owned, `count` ascending render vertex indices */
  float *deltas;         /* owned, 3 * `count` floats */
} mesh_target;

/* A named animation. Keyframe clips are a range of `frames`; weight clips (glTF morph-weight
 * animations) are keys of target weights over time. */
typedef struct mesh_clip {
  char *name;              /* owned, never NULL, unique within the mesh */
  float fps;               /* keyframe clips: playback rate (frames per second) */
  uint32_t first_frame, frame_count;   /* keyframe clips; frame_count 0 for a weight clip */
  uint32_t loop_frames;    /* keyframe clips: when it loops, only its last loop_frames frames
                            * repeat (a Quake III animation.cfg says so); 0 = the whole clip */
  int play_once;           /* keyframe clips: it does not loop (animation.cfg's looping frames 0) */
  uint32_t key_count;      /* weight clips: number of keys (0 for keyframe clips) */
  uint32_t target_count;   /* weight clips: weights per key, for targets 0 .. target_count-1 */
  float *times;            /* owned, key_count seconds, ascending */
  float *weights;          /* owned, key_count × target_count */
} mesh_clip;

/* The part of a multi-mesh file a range of triangles and vertices came from. */
typedef struct mesh_submesh {
  char *name;               /* owned; "" when the file names none */
  uint32_t first_triangle;  /* [first_triangle, first_triangle + triangle_count) */
  uint32_t triangle_count;
  uint32_t first_vertex;    /* [first_vertex, first_vertex + vertex_count) */
  uint32_t vertex_count;
  /* Its material's base colour, as the file gives it: glTF's baseColorFactor, an MTL's Kd, ...
   * (RGBA, each in [0, 1]). has_color 0: the file gives none (viewers draw their own grey). */
  int has_color;
  float base_color[4];
  uint32_t texture;         /* its base-colour texture: 1 + an index into mesh.images; 0: none */
} mesh_submesh;

/* A decoded base-colour texture (mesh_image.c: PNG, JPEG, BMP, TGA through stb_image; PCX of its
 * own), shared by the submeshes that name it. */
typedef struct mesh_image {
  char *name;               /* owned: the name the material gives it ('/' separators), or "*N"
                             * for the file's N-th embedded image */
  uint32_t width, height;   /* each 1 to MESH_MAX_IMAGE_SIDE */
  uint8_t *rgba;            /* owned: width · height · 4 bytes, row 0 the top of the image */
} mesh_image;

#define MESH_MAX_IMAGE_SIDE 8192u
#define MESH_MAX_IMAGES 64u

/* A mesh handle. Create with mesh_create() (empty) or an importer; free with mesh_destroy(). */
typedef struct mesh {
  uint32_t vertex_count;     /* render vertices */
  uint32_t triangle_count;
  float *positions;          /* 3 * vertex_count */
  float *normals;            /* 3 * vertex_count, or NULL */
  float *uvs;                /* 2 * vertex_count, or NULL */
  uint32_t *triangles;       /* 3 * triangle_count, counter-clockwise */

  uint32_t target_count;
  mesh_target *targets;

  /* Keyframe animation: `frame_count` full copies of the positions (frame 0 is usually the
   * same as `positions`), played at `frame_rate` frames per second. */
  uint32_t frame_count;
  float frame_rate;
  float *frames;             /* 3 * vertex_count * frame_count, or NULL */

  /* Named clips, in file order. Row k of a weight clip's `weights` holds the weights of the
   * targets the mesh had when the clip was made (clip.target_count, in `targets` order) at
   * times[k]. Clips never change afterwards: targets appended later (sculpts) have no column
   * and weigh 0; removing a target a clip covers makes mesh_validate() refuse the mesh. */
  uint32_t clip_count;
  mesh_clip *clips;

  uint32_t submesh_count;
  mesh_submesh *submeshes;   /* at least one when the mesh has triangles */

  uint32_t image_count;      /* the submeshes' textures, each decoded once */
  mesh_image *images;

  float bbox_min[3], bbox_max[3];  /* of `positions`; see mesh_update_bounds() */

  /* 'z' when the file says its +Z axis points up (an FBX file's GlobalSettings UpAxis = 2,
   * UpAxisSign = 1), else 0: the file says Y or nothing. Positions are as the file has them;
   * session.create takes this as the session's up axis when the caller names none. (COLLADA's
   * up_axis needs nothing: assimp turns a Z_UP file Y-up in its root transform.) */
  char file_up;
} mesh;

/* Allocates an empty mesh (all counts zero). Returns NULL when out of memory.
 * The caller owns the result and frees it with mesh_destroy(). */
mesh *mesh_create(void);

/* Frees the mesh and everything it owns. NULL is allowed. */
void mesh_destroy(mesh *m);

/* Allocates positions/triangles (and normals/uvs when asked) for the given counts, replacing
 * any previous arrays. Contents are zeroed. Returns 0 or MESH_ENOMEM. */
int mesh_alloc(mesh *m, uint32_t vertex_count, uint32_t triangle_count, int with_normals,
               int with_uvs);

/* Appends a target built from a dense delta array (3 * vertex_count floats); entries whose
 * three components are exactly zero are not stored. Copies `name` and `dense`.
 * Returns 0, MESH_ENOMEM or MESH_ENONFINITE. */
int mesh_add_target_dense(mesh *m, const char *name, const float *dense, float default_weight);

/* Appends a target from sparse data: `count` ascending vertex indices and 3 * count deltas
 * (copied). Returns 0, MESH_ENOMEM, MESH_ERANGE (index out of range or not ascending) or
 * MESH_ENONFINITE. */
int mesh_add_target_sparse(mesh *m, const char *name, uint32_t count, const uint32_t *indices,
                           const float *deltas, float default_weight);

/* Removes (and frees) the last target; nothing when there is none. */
void mesh_remove_last_target(mesh *m);

/* Returns the index of the target called `name`, or -1. */
int mesh_find_target(const mesh *m, const char *name);

/* Whether two targets move exactly the same vertices by exactly the same deltas (bit for bit:
 * the demo head's jawOpen is its jaw_open). */
int mesh_targets_same(const mesh_target *a, const mesh_target *b);

/* How far back a target may name another as its copy (mesh_target_copy_of, and the `copy` of a
 * version 2 entropy join's target record, docs/protocol.md §12.11). */
#define MESH_COPY_WINDOW 64u

/* The first of the MESH_COPY_WINDOW targets before target t that is the same as t
 * (mesh_targets_same), when none of the window before that one is the same as it (so that it
 * is never a copy itself); else -1. */
int64_t mesh_target_copy_of(const mesh *m, uint32_t t);

/* Position of render vertex v in t->indices (so its delta is t->deltas + 3 × position), or -1
 * when the target does not move it. Binary search. */
int64_t mesh_target_entry(const mesh_target *t, uint32_t v);

/* Returns the index of the clip called `name`, or -1. */
int mesh_find_clip(const mesh *m, const char *name);

/* Recomputes bbox_min/bbox_max from positions. */
void mesh_update_bounds(mesh *m);

/* Length of the bounding-box diagonal (0 for an empty mesh). */
double mesh_bbox_diagonal(const mesh *m);

/* Reorders the triangles of each submesh in the order a depth-first walk across their shared
 * edges meets them (mesh_order.c): what protocol version 2's triangle coding compresses best.
 * Vertices, their order, and each triangle's winding stay as they are (a triangle's corners
 * may be rotated); submesh ranges stay valid. Returns 0 or MESH_ENOMEM (the order then is
 * unchanged). */
int mesh_optimize_triangle_order(mesh *m);

/* Writes base + Σ weights[i]·Δ_i (+ offsets when not NULL) into `out` (3 * vertex_count floats).
 * `weights` has target_count entries (NULL = all zero). Computed in double, then rounded.
 * This is the CPU reference of the formula every client evaluates. */
void mesh_evaluate(const mesh *m, const float *weights, const float *offsets, float *out);

/* Checks every invariant the rest of the system relies on: indices in range, all values finite,
 * target indices ascending and in range, submesh ranges inside the arrays, frame array present
 * when frame_count > 0, clips named (non-empty, unique), keyframe clips inside frame_count with
 * a positive rate, weight clips with ascending finite times, finite weights, and no more
 * targets than the mesh has.
 * Returns 0 or the first violation's code, with a reason in `err`. */
int mesh_validate(const mesh *m, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* DEFORMD_MESH_CORE_H */
