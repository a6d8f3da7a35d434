/*
 * dfm.h — the deformation engine: Laplacian, biharmonic and as-rigid-as-possible editing on
 * CHOLMOD, the ARAP rotation fit, regions of interest, and sculpt brushes.
 *
 * Pure computation on a welded topology (shared/mesh.h): no sockets, no sessions, no libuv.
 * The server runs these on its thread pool. A dfm_system is a handle owning one factorised
 * system for one editing gesture (mode, region, handle set): created once, then each drag is a
 * right-hand side and a back-substitution (plus, for ARAP, local/global iterations).
 *
 * Errors: 0 or a negative DFM_E* code, with a reason a user can act on in `err`.
 * Positions are doubles, 3 per topology vertex.
 */
#ifndef DEFORMD_DFM_H
#define DEFORMD_DFM_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"

enum {
  DFM_EINVAL = -6001,    /* bad parameters (index out of range, empty handle, ...) */
  DFM_ESINGULAR = -6002, /* the system is not positive definite (reason names where) */
  DFM_ESOLVER = -6003,   /* CHOLMOD reported an error (reason quotes its status) */
  DFM_ENOMEM = -6004,
  DFM_ENONFINITE = -6005 /* a solve produced NaN/Inf (the result is not applied) */
};

const char *dfm_strerror(int code);
/* Writes a formatted reason into err (nothing when err is NULL or errlen 0): the error buffers
 * of the solver modules (dfm_*, blend, pca). */
void dfm_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The solvers' parallel loops (dfm_pool.c): fn(ctx, begin, end) over [0, n) in chunks of
 * `grain`, on the calling thread and a pool of workers that sleep between loops (one per core
 * beyond the first). When the pool is busy with another caller's loop, the caller runs all of
 * it alone. dfm_pool_threads() is the pool's size, the caller included. */
typedef void (*dfm_range_fn)(void *ctx, size_t begin, size_t end);
void dfm_parallel_for(size_t n, size_t grain, dfm_range_fn fn, void *ctx);
int dfm_pool_threads(void);

/* Memory kept between gestures (dfm_memory.c). A gesture's first touch of fresh pages is a
 * third or more of its prefactor on this kind of VM; these keep the heap's pages once written.
 * dfm_memory_init(): once, at the start of a program, before it starts threads: one malloc
 * arena for all threads and a fixed mmap threshold (32 MiB). Programs that skip it only lose
 * the reuse. dfm_memory_estimate(): the bytes an ARAP gesture over `vertices` vertices takes
 * (measured, ~2.5 KiB per vertex), held to 1 GiB and a quarter of the RAM. dfm_memory_reserve(): keeps at least `bytes` of freed memory
 * in the heap from now on and writes that much once, so that later allocations find it faulted
 * in; grows only, thread-safe, returns the milliseconds it took (slow: call it off any latency
 * path). dfm_memory_reserved(): the bytes kept so far. */
void dfm_memory_init(void);
/* Process-wide settings for programs that run the solvers (deformd, deform-bench), once at the
 * start before any thread: dfm_memory_init() and OpenBLAS kept on its caller's thread (its own
 * workers spin after each call on cores the solvers' threads need; dfm_pool.c). */
void dfm_init(void);
/* First thing in main(), before any thread and before the environment is changed: when
 * OpenBLAS fell back to its generic Prescott kernels on a CPU with AVX2 or AVX-512 it does not
 * know by model, starts the program again (the same argv, /proc/self/exe) with
 * OPENBLAS_CORETYPE naming the kernels the CPU can run; returns if it need not or cannot. A
 * user's own OPENBLAS_CORETYPE is left alone. dfm_blas_core(): the kernels in use. */
void dfm_blas_kernels(char **argv);
const char *dfm_blas_core(void);
size_t dfm_memory_estimate(uint32_t vertices);
/* The bytes one gesture's system over `unknowns` free vertices takes (the measurement behind
 * dfm_memory_estimate, without its cap): what a memory budget counts. */
size_t dfm_memory_gesture_bytes(uint32_t unknowns);
/* Gives the heap's free pages back to the system, keeping the reserve (dfm_memory_reserve). Walks
 * the heap: call it off any latency path. */
void dfm_memory_trim(void);
double dfm_memory_reserve(size_t bytes);
size_t dfm_memory_reserved(void);

typedef enum dfm_mode { DFM_LAPLACIAN = 0, DFM_ARAP = 1, DFM_BIHARMONIC = 2 } dfm_mode;

/* Parses "laplacian", "arap", "biharmonic". Returns 0 or DFM_EINVAL. */
int dfm_mode_parse(const char *name, dfm_mode *out);
const char *dfm_mode_name(dfm_mode mode);

/* A rigid motion: p -> R(q)·(p - pivot) + pivot + translate, q = (x, y, z, w). */
typedef struct dfm_xform {
  double rotation[4];
  double translate[3];
  double pivot[3];
} dfm_xform;

void dfm_xform_identity(dfm_xform *x);
void dfm_xform_apply(const dfm_xform *x, const double p[3], double out[3]);
void dfm_quat_to_matrix(const double q[4], double R[9]);

/* The Cholesky factor's form. AUTO lets CHOLMOD choose; the others force one (tests compare
 * the two solve paths: CHOLMOD's simplicial solve and our three-column supernodal one). */
typedef enum dfm_factor { DFM_FACTOR_AUTO = 0, DFM_FACTOR_SIMPLICIAL = 1, DFM_FACTOR_SUPERNODAL = 2 } dfm_factor;

/* The values the ARAP iterations' sweeps read. FLOAT: a float32 copy of the factor (half the
 * bytes per sweep, sums still in double; each iteration's result stays within 1e-6 of the mesh's
 * bounding-box diagonal of the double solve: tests/solve/test_sweep32.c). AUTO: FLOAT for a
 * supernodal factor of at least DFM_SWEEP32_MIN stored values, DOUBLE below. The harmonic start
 * and the Laplacian and biharmonic modes always solve in double. */
typedef enum dfm_sweeps { DFM_SWEEPS_AUTO = 0, DFM_SWEEPS_DOUBLE = 1, DFM_SWEEPS_FLOAT = 2 } dfm_sweeps;
#define DFM_SWEEP32_MIN 4000000

/* The multiresolution path (dfm_multires.c) for meshes a direct solve cannot make interactive:
 * the gesture is solved on a proxy, the mesh simplified to about multires_proxy vertices by
 * meshoptimizer's meshopt_simplify (its vertices a subset of the mesh's), and every vertex of the
 * mesh follows the proxy through a smooth embedding: bound at begin to the nearest point of a
 * proxy triangle near it (barycentric coordinates) plus its offset from that point, which each
 * drag turns by the barycentric blend of the proxy corners' rotations (each fitted to its ring of
 * proxy edges, as ARAP's local step does). A rigid motion of the proxy is then a rigid motion of
 * the mesh. Handles and anchors keep their exact positions. AUTO: a whole-mesh gesture (no
 * region) without soft constraints on at least multires_min vertices (0: DFM_MULTIRES_MIN); ON:
 * any gesture without soft constraints; OFF: never. */
typedef enum dfm_multires { DFM_MULTIRES_AUTO = 0, DFM_MULTIRES_OFF = 1, DFM_MULTIRES_ON = 2 } dfm_multires;
#define DFM_MULTIRES_MIN 1000000
#define DFM_MULTIRES_PROXY 40000

typedef struct dfm_params {
  dfm_mode mode;
  int uniform;                  /* uniform instead of cotangent weights */
  const uint32_t *roi;          /* topology vertices that may move; NULL = every vertex */
  uint32_t roi_count;
  const uint32_t *handle;       /* moved rigidly by the drag's transform (hard) */
  uint32_t handle_count;
  const uint32_t *anchors;      /* held at rest (hard) */
  uint32_t anchor_count;
  const uint32_t *soft;         /* pulled towards a position (see soft_position) ... */
  const double *soft_weight;    /* ... with these weights (relative to the mean edge weight) */
  const double *soft_position;  /* 3 per soft vertex: a fixed target; NULL: each soft vertex's
                                 * rest position moved by the drag's transform */
  uint32_t soft_count;
  int smooth_border;            /* C1 where the region meets what holds it (dfm_system_create) */
  int iterations;               /* ARAP local/global iterations per drag (>= 1) */
  dfm_factor factor;            /* DFM_FACTOR_AUTO (0): CHOLMOD chooses from the predicted fill */
  int whole_mesh;               /* build on the whole mesh even for a small region (tests
                                 * compare it with the region-local system) */
  dfm_sweeps sweeps;            /* DFM_SWEEPS_AUTO (0): float32 sweeps for big ARAP factors */
  dfm_multires multires;        /* DFM_MULTIRES_AUTO (0): by size (see above) */
  uint32_t multires_min;        /* AUTO's threshold in mesh vertices; 0: DFM_MULTIRES_MIN */
  uint32_t multires_proxy;      /* the proxy's target vertex count; 0: DFM_MULTIRES_PROXY */
  /* dfm_mesh_order's order of this topology's vertices, or NULL. A Laplacian or ARAP gesture
   * that leaves at least 15/16 of the mesh free takes its columns' order from it (restricted to
   * the free vertices) instead of running AMD on them, so that only the first such gesture of a
   * mesh, or a session's job at open, pays for AMD. Read during dfm_system_create only. */
  const int64_t *mesh_order;
  /* dfm_mesh_symbolic's analysis of this topology's vertex graph, or NULL. A Laplacian or ARAP
   * gesture that leaves all but 1/256 of the mesh free (a handle, a few anchors) and whose
   * factor CHOLMOD makes supernodal then skips CHOLMOD's
   * symbolic analysis: its matrix is padded to every vertex of the mesh (each non-free vertex an
   * identity column), whose pattern the analysis holds, and only the values are factorised. The
   * same answers to rounding; nnz(L) is the whole graph's. Read during dfm_system_create only. */
  const struct dfm_symbolic *mesh_symbolic;
  /* dfm_proxy_build's proxy of this topology, or NULL: a gesture on the multiresolution path
   * then copies it (when made for the same multires_proxy) instead of simplifying the mesh and
   * finding each vertex's nearest proxy vertex again, which is most of that path's prefactor.
   * Read during dfm_system_create only. */
  const struct dfm_proxy *proxy;
} dfm_params;

typedef struct dfm_system dfm_system;

typedef struct dfm_info {
  uint32_t vertices;     /* topology vertices of the mesh */
  uint32_t free;         /* unknowns of the system */
  uint32_t pinned;       /* ROI vertices held still because nothing constrains their part */
  size_t factor_nnz;     /* non-zeros of the Cholesky factor */
  double factor_flops;   /* floating-point operations of the factorisation (CHOLMOD's count) */
  int supernodal;        /* the factor is supernodal (solved by dfm's three-column solve) */
  int solve_threads;     /* 2 when its sweeps are split over two threads, else 1 */
  int sweep32;           /* the ARAP iterations' sweeps read a float32 copy of the factor */
  double analyze_ms, factor_ms;
  /* The rest of dfm_system_create: regions and roles, edge weights, matrix assembly, and the
   * ARAP tables (rotations' stars). */
  double roles_ms, weights_ms, assemble_ms, arap_ms;
  double order_ms;       /* AMD's order of the columns, beside the weights (inside weights_ms),
                          * or restricting dfm_params.mesh_order (then order_from_mesh is 1) */
  int order_from_mesh;
  int symbolic_from_mesh; /* analyze_ms is then copying dfm_params.mesh_symbolic's analysis */
  /* The multiresolution path: the fields above are then the proxy's system's (vertices stays
   * the mesh's); proxy_vertices its vertices and multires_ms simplifying and binding (also
   * counted in roles_ms). */
  int multires;
  uint32_t proxy_vertices;
  double multires_ms;
  double multires_simplify_ms, multires_near_ms, multires_bind_ms; /* its parts (simplify: 0 with dfm_params.proxy) */
  int proxy_reused;      /* the multiresolution path took dfm_params.proxy */
} dfm_info;

/* Builds and factorises the system for one gesture. `rest` (3 doubles per topology vertex) is
 * the shape the gesture starts from; `topo` supplies the triangles, `adj` their adjacency (on
 * topo's triangles). Copies what it needs: the inputs may go after this returns.
 * On success *out is a new system (dfm_system_destroy). */
int dfm_system_create(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                      const dfm_params *params, dfm_system **out, char *err, size_t errlen);
void dfm_system_destroy(dfm_system *s);

/* AMD's fill-reducing order of every vertex of adj's mesh (its vertex graph: the pattern of the
 * Laplacian and ARAP systems), for dfm_params.mesh_order: *out gets adj->vertex_count entries
 * (free()). 0 or DFM_ENOMEM. Takes about as long as a whole-mesh gesture's own AMD (0.66 s on
 * the 435k-vertex dragon); a server computes it once per mesh, off its loop. */
int dfm_mesh_order(const mesh_adjacency *adj, int64_t **out);
#define DFM_MESH_ORDER_MIN 100000 /* deformd computes it when a session of this many vertices opens */

/* CHOLMOD's symbolic analysis (supernodal when CHOLMOD's AUTO picks it) of the Laplacian's
 * pattern on every vertex of adj's mesh, in dfm_mesh_order's `order`, for
 * dfm_params.mesh_symbolic: whole-mesh gestures then factorise without analysing (0.25-0.37 s
 * of the dragon's prefactor). 0 or DFM_ENOMEM. Read-only once made: any number of gestures
 * may share it. dfm_mesh_symbolic_bytes: the memory it holds. */
typedef struct dfm_symbolic dfm_symbolic;
int dfm_mesh_symbolic(const mesh_adjacency *adj, const int64_t *order, dfm_symbolic **out);
size_t dfm_mesh_symbolic_bytes(const dfm_symbolic *sym);
void dfm_mesh_symbolic_free(dfm_symbolic *sym);

/* A mesh's multiresolution proxy, made once and given to gestures (dfm_params.proxy): the mesh
 * simplified to about `target` vertices (0: DFM_MULTIRES_PROXY) from `rest`, and each mesh
 * vertex's nearest proxy vertex along its edges. A gesture takes the proxy's positions from
 * its own rest shape and binds the mesh to it again (barycentric coordinates and offsets), so
 * a proxy made from the shape a session opened with serves its later, sculpted shapes too.
 * 0, DFM_EINVAL (nothing left of the mesh) or DFM_ENOMEM, with a reason. */
typedef struct dfm_proxy dfm_proxy;
int dfm_proxy_build(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest, uint32_t target,
                    dfm_proxy **out, char *err, size_t errlen);
void dfm_proxy_free(dfm_proxy *proxy);
void dfm_system_info(const dfm_system *s, dfm_info *info);

/* Solves for a drag: handles (and soft constraints) follow `xf`. Writes into `out` (3 × mesh
 * vertices) the positions of the vertices the gesture can move: the region, the handles, and
 * the ring of fixed vertices around them (at rest). Other entries are left as they are, so
 * `out` starts as the rest shape; without a region every vertex is written. A region smaller
 * than half the mesh is solved on its own renumbered sub-mesh, so a drag costs what the
 * region costs. ARAP starts from the previous drag's result. Returns 0 or DFM_ENONFINITE /
 * DFM_ESOLVER. */
int dfm_system_solve(dfm_system *s, const dfm_xform *xf, double *out, char *err, size_t errlen);

/* The spokes-and-rims ARAP energy of `deformed` against the system's rest shape, using the
 * rotations of its last local step (for tests: it must never increase across iterations). */
double dfm_system_arap_energy(dfm_system *s, const double *deformed, int refit_rotations);
/* Runs exactly one more local/global ARAP iteration from `io` (in place; the entries written
 * are those dfm_system_solve writes). */
int dfm_system_arap_iterate(dfm_system *s, const dfm_xform *xf, double *io, char *err, size_t errlen);

/* The rotation maximising tr(Rᵀ M) (row-major 3×3); R holds a warm start on entry. Returns the
 * iterations of the fast path, or -1 when the exact path ran. */
int dfm_fit_rotation(const double M[9], double R[9]);
/* dfm_fit_rotation for four matrices at once (M: four row-major 3×3, R: their four warm starts,
 * replaced), faster than four calls: the Newton steps run in vector lanes; a lane that leaves
 * that path is finished by dfm_fit_rotation. Returns how many lanes were. */
int dfm_fit_rotation4(const double M[36], double *R[4]);

/* What a gesture of `params` on a mesh of `vertices` takes on the multiresolution path: 0 when
 * dfm_system_create would not put it there, else the proxy's system (dfm_memory_gesture_bytes of
 * the proxy's target) plus DFM_MULTIRES_VERTEX_BYTES per mesh vertex (the binding kept, and while
 * binding the simplifier's copies and the Dijkstra's heap: counted from the arrays' sizes; about
 * twice what the dragon subdivided once was measured to take). What a memory budget counts. */
#define DFM_MULTIRES_VERTEX_BYTES 400
size_t dfm_multires_gesture_bytes(const dfm_params *params, uint32_t vertices);

/* How far positions a are from b (3 × n doubles each): the largest and the root-mean-square
 * distance over the n vertices, each divided by `diag` (the mesh's bounding-box diagonal). What a
 * multiresolution gesture reports as its distance from the exact solve. */
void dfm_distance(const double *a, const double *b, uint32_t n, double diag, double *max_frac, double *rms_frac);

/* Topology vertices within geodesic distance `radius` of any seed (Dijkstra over edges, edge
 * length as cost), at most `max_count` of them (the nearest; 0 = no limit). Returns 0 with *out
 * (malloc'ed, ascending) and *count, or DFM_ENOMEM. */
int dfm_geodesic_region(const mesh_adjacency *adj, const double *positions, const uint32_t *seeds,
                        uint32_t seed_count, double radius, uint32_t max_count, uint32_t **out,
                        uint32_t *count);

#endif
