/*
 * mesh.h — the mesh core shared by deformd (server) and deform-view (viewer).
 *
 * A mesh is what a session deforms: render vertices (positions, optional normals and UVs),
 * triangles, named morph targets stored sparsely, optional keyframe animation, named animation
 * clips (ranges of keyframes, or target weights over time), and submesh ranges that remember
 * which part of the source file each triangle came from.
 *
 * This module DOES:   import (assimp), animation clips found in the file, validation, export
 *                     (OBJ, GLB), welding into topology vertices, adjacency, Laplacian weights,
 *                     vertex areas, reference normals, statistics, and the generated demo head.
 * This module DOES NOT: know about sockets, sessions, versions, threads or GPUs, or play clips
 *                     back (the server samples and compresses them). Every function here is
 *                     synchronous and touches only the memory it is given; callers decide which
 *                     thread runs it (the server runs imports on its thread pool).
 *
 * Errors: functions return 0 or a negative MESH_E* code; mesh_strerror() names the code. Where a
 * reason is more specific than the code ("triangle 12 references vertex 99 of 24"), the function
 * takes an `err` buffer and writes one readable line into it.
 */
#ifndef DEFORMD_MESH_H
#define DEFORMD_MESH_H

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
} mesh_submesh;

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

  float bbox_min[3], bbox_max[3];  /* of `positions`; see mesh_update_bounds() */
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

/* Position of render vertex v in t->indices (so its delta is t->deltas + 3 × position), or -1
 * when the target does not move it. Binary search. */
int64_t mesh_target_entry(const mesh_target *t, uint32_t v);

/* Returns the index of the clip called `name`, or -1. */
int mesh_find_clip(const mesh *m, const char *name);

/* Recomputes bbox_min/bbox_max from positions. */
void mesh_update_bounds(mesh *m);

/* Length of the bounding-box diagonal (0 for an empty mesh). */
double mesh_bbox_diagonal(const mesh *m);

/* Reorders the triangles of each submesh for the vertex cache (meshoptimizer's
 * optimizeVertexCache): what the index codec of protocol version 2 compresses best. Vertices,
 * their order, and each triangle's corners and winding stay as they are; submesh ranges stay
 * valid. Returns 0 or MESH_ENOMEM (the order then is unchanged). */
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

/* ---------------------------------------------------------------------------------------------
 * Import and export (mesh_import.c, mesh_export.c)
 */

typedef struct mesh_import_opts {
  uint32_t max_vertices;    /* refuse files with more render vertices; 0 = 5,000,000 */
  uint32_t max_frames;      /* keyframes read from MD2/MD3; 0 = all */
  int keep_unreferenced;    /* non-zero: do not drop vertices no triangle uses (tests only) */
  /* Confinement (a server importing what a client names): when root_count > 0, `path` is a
   * name relative to one of these folders (open descriptors, tried in order), and the mesh and
   * every file it refers to are opened beneath the folder it was found in (mesh_open_beneath):
   * no absolute path, no "..", no symlink out. A name found in none of them, or one that is not
   * a relative name (mesh_name_ok), fails with MESH_ENOENT and one message that says nothing
   * about why. */
  const int *roots;
  uint32_t root_count;
  int redact;               /* non-zero: error messages echo nothing read from the file (names
                             * in it become '…', assimp's own messages are reduced to the
                             * format and a reason) */
  uint64_t max_file_bytes;  /* refuse larger files (MESH_ETOOBIG); 0 = no limit */
} mesh_import_opts;

#define MESH_DEFAULT_MAX_VERTICES 5000000u

/* Imports a mesh file through assimp: OBJ, PLY (ASCII, binary, triangle strips), OFF, STL,
 * glTF 2.0 / GLB (morph targets, extras.targetNames, mesh.weights, morph-weight animations as
 * weight clips), MD2 / MD3 (all keyframes, grouped into clips by frame name), and anything else
 * assimp reads. Polygons are triangulated, points and lines dropped, every mesh of the file
 * placed by its node transform and joined into one mesh with submesh ranges, render vertices
 * that are identical in every attribute merged, unreferenced ones dropped.
 * Before assimp reads a file, the counts its header declares are checked against the file's
 * size wherever the format has them (OFF, PLY, MD2, MD3), and a lying header is refused.
 * `opts` may be NULL. On success *out is a new mesh the caller frees with mesh_destroy().
 * On failure returns a MESH_E* code, writes the reason into `err`, and leaves *out NULL.
 * Thread-safe: imports may run concurrently on different threads. */
int mesh_import(const char *path, const mesh_import_opts *opts, mesh **out, char *err,
                size_t errlen);

typedef enum mesh_format {
  MESH_FORMAT_AUTO = 0,  /* from the file name's extension */
  MESH_FORMAT_OBJ,
  MESH_FORMAT_GLB
} mesh_format;

/* The same into memory: *out (malloc'ed, the caller frees it) of *len bytes, in `fmt` (OBJ or
 * GLB; AUTO is MESH_EINVAL here). Returns 0 or a MESH_E* code with a reason in `err`. */
int mesh_export_mem(const mesh *m, const float *positions, mesh_format fmt, uint8_t **out, size_t *len,
                    char *err, size_t errlen);

/* Writes the mesh to `path`. `positions` replaces the mesh's own positions when not NULL (the
 * current shape of a session); normals are recomputed from whichever positions are written.
 * OBJ keeps the render vertex order exactly (v i is vertex i-1). GLB goes through assimp's
 * glTF 2 exporter and carries the morph targets with extras.targetNames and default weights.
 * Returns 0 or a MESH_E* code with a reason in `err`. */
int mesh_export(const mesh *m, const float *positions, const char *path, mesh_format fmt,
                char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------
 * Files beneath a folder (mesh_file.c)
 */

/* openat2(root_fd, name, flags | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): `name`
 * must resolve inside the folder root_fd names, through no absolute path, ".." or symlink that
 * leaves it (Linux 5.6 or later). `mode` applies with O_CREAT. Returns the descriptor or a
 * negative errno (-EXDEV for a name that would leave the folder). */
int mesh_open_beneath(int root_fd, const char *name, int flags, unsigned mode);

/* Whether `name` is a relative name a client may give: 1 to max_len bytes, components
 * separated by single '/', none empty, "." or "..", no leading '/', no control character or
 * backslash. Syntax only: nothing is opened. */
int mesh_name_ok(const char *name, size_t max_len);

/* ---------------------------------------------------------------------------------------------
 * Blobs (mesh_blob.c): a whole mesh as one exact byte string — positions, normals, UVs,
 * triangles, targets (names, default weights, sparse deltas), keyframes, clips, submeshes and
 * bounds — little-endian, versioned ("DFMB" + version), ending in a CRC-32. The import worker
 * sends meshes over a pipe in it; the session store keeps imported meshes in it. A round trip
 * gives back every value bit for bit.
 */

/* Exact size in bytes of m's blob. Returns 0, MESH_EINVAL (an array missing for its count) or
 * MESH_ETOOBIG (does not fit in size_t). */
int mesh_blob_size(const mesh *m, size_t *len);

/* Writes m's blob into dst, which must be exactly mesh_blob_size() bytes long (`len`).
 * Returns 0 or MESH_EINVAL / MESH_ETOOBIG; nothing is allocated. */
int mesh_blob_encode(const mesh *m, uint8_t *dst, size_t len);

/* m's blob in a fresh malloc'ed buffer: *out (the caller frees it with free()) of *len bytes.
 * Returns 0, MESH_EINVAL, MESH_ETOOBIG or MESH_ENOMEM (then *out is NULL). */
int mesh_blob_write(const mesh *m, uint8_t **out, size_t *len);

/* Reads a blob of `n` bytes. Every count is checked against the bytes present before anything
 * is allocated for it; a mesh with more than `max_vertices` vertices (0 = MESH_DEFAULT_MAX_VERTICES)
 * is refused; the result passes mesh_validate(). On success *out is a new mesh the caller frees
 * with mesh_destroy(). On failure returns MESH_EFORMAT (bad magic or version, truncated, CRC
 * mismatch, trailing bytes, a name with a NUL), MESH_ETOOBIG, MESH_ENOMEM or what
 * mesh_validate() found, with a reason in `err`, and leaves *out NULL. Never reads outside
 * p[0..n). */
int mesh_blob_read(const uint8_t *p, size_t n, uint32_t max_vertices, mesh **out, char *err,
                   size_t errlen);

/* CRC-32 as zlib and PNG compute it (reflected polynomial 0xEDB88320), used for the blob's
 * trailer. */
uint32_t mesh_blob_crc32(const uint8_t *p, size_t n);

/* ---------------------------------------------------------------------------------------------
 * Welding (mesh_weld.c): topology vertices for solves.
 *
 * Render vertices split at UV or normal seams share a position; solves and normals want one
 * vertex there. Welding merges render vertices whose positions lie within
 * `tolerance` × bbox diagonal of a representative, keeping both maps.
 */

typedef struct mesh_topology {
  uint32_t vertex_count;        /* topology vertices */
  uint32_t render_count;        /* render vertices of the source mesh */
  uint32_t *render_to_topo;     /* render_count entries */
  uint32_t *topo_offsets;       /* vertex_count + 1: CSR of topo -> render vertices */
  uint32_t *topo_render;        /* render_count entries */
  double *positions;            /* 3 * vertex_count: the representative render vertex's position */
  uint32_t triangle_count;      /* triangles whose three corners are distinct topology vertices */
  uint32_t *triangles;          /* 3 * triangle_count, in topology indices */
  uint32_t *triangle_source;    /* triangle_count: index of the render triangle each came from */
  uint32_t collapsed_count;     /* render triangles dropped because two corners welded together */
} mesh_topology;

#define MESH_WELD_DEFAULT_TOLERANCE 1e-6

/* Builds the welded topology of `m`. `tolerance` is relative to the bounding-box diagonal
 * (<= 0 means MESH_WELD_DEFAULT_TOLERANCE). Positions come from `positions` when not NULL,
 * else from m->positions. Returns 0 or MESH_ENOMEM. Free with mesh_topology_fini(). */
int mesh_topology_init(mesh_topology *t, const mesh *m, const float *positions, double tolerance);
void mesh_topology_fini(mesh_topology *t);

/* ---------------------------------------------------------------------------------------------
 * Adjacency (mesh_adjacency.c): CSR vertex -> vertex and vertex -> triangle over a topology.
 */

typedef struct mesh_adjacency {
  uint32_t vertex_count;
  uint32_t *vv_offsets;   /* vertex_count + 1 */
  uint32_t *vv;           /* neighbours of v: vv[vv_offsets[v] .. vv_offsets[v+1]), ascending */
  uint32_t *vt_offsets;   /* vertex_count + 1 */
  uint32_t *vt;           /* triangles around v, ascending */
} mesh_adjacency;

/* Builds adjacency for `triangle_count` triangles over `vertex_count` vertices.
 * Returns 0, MESH_ERANGE (an index >= vertex_count) or MESH_ENOMEM. Free with _fini(). */
int mesh_adjacency_init(mesh_adjacency *a, uint32_t vertex_count, const uint32_t *triangles,
                        uint32_t triangle_count);
void mesh_adjacency_fini(mesh_adjacency *a);

/* Position of `j` in v's neighbour list (an index into vv[]), or -1 when not adjacent. */
int64_t mesh_adjacency_edge(const mesh_adjacency *a, uint32_t v, uint32_t j);

/* ---------------------------------------------------------------------------------------------
 * Laplacian weights and vertex areas (mesh_laplacian.c)
 */

typedef enum mesh_cotan_mode {
  MESH_COTAN_CLAMPED = 0,  /* each cotangent clamped to [0, MESH_COT_MAX]: obtuse angles give 0 */
  MESH_COTAN_RAW = 1       /* signed cotangents, only limited to [-MESH_COT_MAX, MESH_COT_MAX] */
} mesh_cotan_mode;

/* Largest |cot| admitted: an angle of about 1e-5 rad. Keeps degenerate triangles finite. */
#define MESH_COT_MAX 1e5

/* Cotangent edge weights w_ij = (cot α_ij + cot β_ij) / 2, one per entry of a->vv (so the weight
 * of edge (i, j) is at the same index as j in i's list; the matrix is symmetric).
 * `positions` are 3 doubles per vertex. `weights` has a->vv_offsets[vertex_count] entries. */
void mesh_cotan_weights(const mesh_adjacency *a, const double *positions,
                        const uint32_t *triangles, uint32_t triangle_count, mesh_cotan_mode mode,
                        double *weights);

/* The cotangents of the three corner angles of one triangle (cot[c] at corner c, opposite edge
 * (c+1, c+2)), limited and clamped by `mode` like mesh_cotan_weights(). All zero when two
 * corners share an index. */
void mesh_triangle_cotangents(const double *positions, const uint32_t *tri, mesh_cotan_mode mode,
                              double cot[3]);

/* Uniform (graph) weights: 1 for every edge. Same layout as mesh_cotan_weights(). */
void mesh_uniform_weights(const mesh_adjacency *a, double *weights);

typedef enum mesh_area_mode {
  MESH_AREA_MIXED = 0,     /* Meyer et al. 2003: Voronoi, falling back to area/2 or /4 when obtuse */
  MESH_AREA_VORONOI = 1,   /* pure circumcentric Voronoi (can be negative near obtuse angles) */
  MESH_AREA_BARYCENTRIC = 2
} mesh_area_mode;

/* Per-vertex area, `areas` has vertex_count entries. Mixed and barycentric areas sum to the
 * surface area exactly; degenerate triangles contribute nothing. */
void mesh_vertex_areas(uint32_t vertex_count, const double *positions, const uint32_t *triangles,
                       uint32_t triangle_count, mesh_area_mode mode, double *areas);

/* Area of triangle (a, b, c) given 3 doubles per vertex. */
double mesh_triangle_area(const double *positions, const uint32_t *tri);

/* ---------------------------------------------------------------------------------------------
 * Reference normals (mesh_normals.c): the CPU oracle for the viewer's GPU normals.
 */

typedef enum mesh_normal_mode {
  MESH_NORMALS_ANGLE = 0,  /* face normals weighted by the corner angle (Thürmer & Wüthrich) */
  MESH_NORMALS_AREA = 1    /* face normals weighted by the face area */
} mesh_normal_mode;

/* Unit normals per render vertex (3 * m->vertex_count floats) for the shape `positions`
 * (NULL = m->positions), accumulated over the welded topology `t` so that render vertices on a
 * seam get the same normal. A vertex with no non-degenerate triangle gets (0, 0, 0). */
void mesh_compute_normals(const mesh *m, const mesh_topology *t, const float *positions,
                          mesh_normal_mode mode, float *normals);

/* ---------------------------------------------------------------------------------------------
 * Statistics (mesh_stats.c)
 */

typedef struct mesh_stats {
  uint32_t vertices;              /* render vertices */
  uint32_t triangles;
  uint32_t topology_vertices;     /* after welding */
  uint32_t components;            /* connected components over the welded triangles */
  uint32_t boundary_edges;        /* welded edges with exactly one triangle */
  uint32_t nonmanifold_edges;     /* welded edges with three or more triangles */
  uint32_t degenerate_triangles;  /* two corners weld together, or the area is ~0 */
  uint32_t targets;
  uint32_t frames;
  uint32_t submeshes;
} mesh_stats;

/* A triangle is degenerate when its height over its longest edge is at most this fraction of
 * that edge (2·area <= eps·longest²): slivers with an angle under ~1e-6 rad and collapsed
 * triangles, at any scale. */
#define MESH_DEGENERATE_EPS 1e-6

/* Fills `s` from `m` and its topology `t`. Returns 0 or MESH_ENOMEM. */
int mesh_compute_stats(const mesh *m, const mesh_topology *t, mesh_stats *s);

/* Whether triangle `tri` (3 indices into `positions`, 3 doubles each) is degenerate by the rule
 * above. Repeated indices count as degenerate too. */
int mesh_triangle_is_degenerate(const double *positions, const uint32_t *tri);

/* ---------------------------------------------------------------------------------------------
 * Demo head (mesh_demo.c)
 */

/* Generates the bundled demo head deterministically: a closed head-like surface of about 40k
 * render vertices with UVs (split at a seam behind the head), normals, and 16 named blendshapes
 * (jaw_open, smile_L/R, frown_L/R, brow_up_L/R, brow_down_L/R, blink_L/R, cheek_puff,
 * nose_wide, lip_pucker, mouth_left, mouth_right). Units are metres, +Y up, the face looks
 * towards +Z. Returns 0 or MESH_ENOMEM; *out is owned by the caller (mesh_destroy). */
int mesh_demo_head(mesh **out);

/* An icosphere of `radius`: the icosahedron subdivided `levels` times (10·4^levels + 2
 * vertices; 6 gives 40962, 7 gives 163842), the shape benchmarks compare solvers on. Returns 0,
 * MESH_EINVAL (levels > 10) or MESH_ENOMEM. */
int mesh_demo_icosphere(uint32_t levels, double radius, mesh **out);

#ifdef __cplusplus
}
#endif

#endif /* DEFORMD_MESH_H */
