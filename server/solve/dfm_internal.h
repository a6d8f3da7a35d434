/*
 * dfm_internal.h — what the files of one gesture's system share: the dfm_system handle's fields,
 * the layout of its ARAP tables, and the dfm__ helpers one of those files calls in another.
 *
 *   dfm_system.c   creation (roles, edge weights, assembly, CHOLMOD's factorisation) and the
 *                  solve entry points; the only caller of the dfm__ functions below
 *   dfm_arap.c     the ARAP tables (stars) and each iteration's local step and rotation terms
 *   dfm_sweep.c    the supernodal three-column solve and its two-thread plan
 *   dfm_region.c   the sub-mesh a small region is solved on (and geodesic regions)
 *   dfm_roles.c    the parameters checked, each vertex's role, the soft constraints' targets
 *   dfm_border.c   what a smooth border does to a solve
 *   dfm_multires.c the multiresolution path's proxy (a simplified mesh) and embedding
 *
 * Calls go one way: dfm_system.c calls the other six, they call only dfm_pool.c and
 * dfm_rotation.c, and nothing calls back up, so no files call each other in a circle.
 *
 * DOES NOT declare anything for programs or the service (dfm.h does); include it only from
 * server/solve/dfm_*.c.
 */
#ifndef DEFORMD_DFM_INTERNAL_H
#define DEFORMD_DFM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cholmod.h>

#include "dfm.h"

/* What each vertex of a gesture is (dfm_system.role). */
enum { DFM__ROLE_FREE = 0, DFM__ROLE_OUTSIDE = 1, DFM__ROLE_HANDLE = 2, DFM__ROLE_ANCHOR = 3, DFM__ROLE_PINNED = 4 };

/* How the supernodal sweeps are split over two threads (dfm_sweep.c; opaque elsewhere). */
typedef struct solve_plan solve_plan;

/* ARAP triangles (those with a free corner): corners and weights. The rest edge opposite
 * corner c, p[c+2] - p[c+1], is recomputed from `rest` where needed (rest_edge, dfm_arap.c):
 * storing it and the right-hand side's per-corner vectors took 144 bytes a triangle, freshly
 * faulted in at every gesture. */
typedef struct arap_tris {
  uint32_t *v;  /* 3 per triangle */
  double *c;    /* 3: weight of the edge opposite each corner, ½ cot (clamped, floored) */
} arap_tris;

/* Both ARAP passes are linear in what they read, so each is precomputed as one short list per
 * vertex over its star (itself and its neighbours in active triangles, ~7 entries):
 *   local step   M_r = Σ_u p_u k_{r,u}ᵀ          (the rotation fit's covariance)
 *   global rhs   b_j = Σ_u R_u h_{j,u}            (⅓ Σ_t (R_a + R_b + R_c) g_{t,j} regrouped)
 * One pass each, reading positions or rotations of neighbours and a contiguous list of
 * vectors, instead of per-triangle temporaries written and read back. */
typedef struct arap_star {
  uint32_t *off;  /* count + 1 */
  uint32_t *idx;  /* local: the vertex u; global: the rotation slot of u */
  double *vec;    /* 3 per entry */
} arap_star;

/* Three right-hand sides and a spare lane: one factor entry updates them in one vector op. */
typedef double dfm_v4 __attribute__((vector_size(32), aligned(32)));

struct dfm_system {
  dfm_params p;
  uint32_t n;            /* topology vertices */
  double *rest;          /* 3n */
  uint8_t *role;         /* n */
  int32_t *col;          /* n: column of a free vertex, -1 otherwise */
  uint32_t *free_vertex; /* nf: the vertex of each column */
  SuiteSparse_long *order; /* nf, while building: the AMD order of the columns (NULL: CHOLMOD's) */
  uint32_t nf;
  uint32_t pinned;
  double *soft_w;        /* nf: soft constraint weight (0 = none) */
  /* Coupling of each free vertex to known positions: rhs_k += Σ coef · x_j. */
  uint32_t *cp_off, *cp_vertex;
  double *cp_coef;
  /* ARAP */
  arap_tris tri;
  uint32_t ntris;
  uint32_t *rot_vertex;  /* vertices that need a rotation (corners of active triangles) */
  uint32_t nrot;
  uint32_t nrot_fit;     /* rotations the local step fits: slots [0, nrot_fit) are those of free
                          * vertices; the rest are prescribed (smooth border) or fitted too */  int32_t *rot_slot;     /* n: slot in rot_vertex, -1 */
  arap_star local;       /* per rotation slot */
  arap_star global;      /* per free column */
  double *R;             /* 9 per rotation slot */
  double *Rsum;          /* smooth border: per free column, its neighbours' rotations summed
                          * by the last right-hand side pass (9 each) */
  double bend;           /* smooth border: weight of the rotations' smoothness term (0: none) */
  double *current;       /* 3n: last solution (ARAP warm start) */
  double *disp;          /* 3n: the knowns' displacements (zero except at handles) */
  double *soft_p;        /* 3 nf: soft targets as positions, NULL without soft constraints */
  double *soft_d;        /* 3 nf: the same as displacements from rest */
  double *u;             /* nf: a smooth border's handle weight (smooth_fields), else NULL */
  int rigid;             /* smooth ARAP with u = 1 everywhere: a drag is a rigid motion */
  double *f;             /* 3 nf: with u, the displacement the soft targets alone cause; NULL
                          * when every soft target is where its vertex is */
  int have_current;
  /* CHOLMOD */
  cholmod_common cc;
  int cc_started;
  cholmod_factor *L;
  dfm_v4 *rhs;           /* nf + 1: the right-hand sides, a free column's x, y and z in one
                          * vector (the fourth lane zero) */
  cholmod_dense *B, *X, *Y, *E; /* a simplicial factor's solve2: rhs as three columns, the
                          * solution, workspaces */
  double *x;             /* 3 nf, column-major: the solution of either solve path, except an ARAP
                          * iteration's on a supernodal factor (written into the positions) */
  void *work;            /* the supernodal solve's vectors: L->n (nf, or n padded: see sym),
                          * plus the tallest supernode's rows */
  solve_plan *plan;      /* how the supernodal sweeps are split over two threads */
  uint32_t *col_vertex;  /* supernodal: L->n, the vertex of each factor column (UINT32_MAX:
                          * padding), where the ARAP sweeps write their solution */
  double analyze_ms, factor_ms, roles_ms, weights_ms, assemble_ms, arap_ms, order_ms;
  int order_from_mesh; /* the columns' order is dfm_params.mesh_order restricted */
  const dfm_symbolic *sym; /* while building: dfm_params.mesh_symbolic, taken (see there) */
  double *tri_cot;     /* while building: 3 per topology triangle, the clamped cotangents the edge
                        * weights took (those with a corner near a free vertex; NULL with uniform
                        * weights), which the ARAP tables take too */
  int symbolic_from_mesh;
  double lnz, fl;      /* nnz(L) and the flops, from CHOLMOD's analysis or sym's */
  /* Error messages name vertex v as vertex_id[v] (the mesh's numbering when this system
   * solves a region renumbered by an outer one; NULL: v itself). */
  const uint32_t *vertex_id;
  /* A region-local system: `sub` is the same gesture on the region and the vertices around
   * it, renumbered 0 .. ns-1 (sub_vertex: the mesh vertex of each), so that nothing it does
   * costs in proportion to the whole mesh. Every other field but p and n is then unused. */
  dfm_system *sub;
  uint32_t *sub_vertex;
  uint32_t ns;
  double *sub_io;        /* 3 ns: the sub-system's positions */
  double sub_ms;         /* creating the sub-system */
  /* The multiresolution path: `sub` is then the proxy's system (sub_vertex unused). */
  struct dfm__multires *mr;
};

/* With a smooth border the local step also pulls each rotation towards its neighbours' (the
 * smooth-rotation ARAP of Levi & Gotsman 2015): the energy gains
 *     bend · ℓ² · Σ_edges |R_i − R_j|²_F      (ℓ² the mean squared rest edge length)
 * and each fit maximises tr(Rᵀ (M_i + bend ℓ² Σ_j R_j)), the neighbours' rotations of the
 * previous iteration (summed by the right-hand side pass, which reads them anyway). Without it ARAP's rotations jump from ring to ring where a small handle
 * pulls the surface out of its plane, and repeated drags converge to a creased cone. */
#define DFM_ARAP_BEND 8.0

/* dfm_arap.c: the ARAP tables and what each iteration does with them.
 * dfm__arap_prepare: the active triangles of s's free vertices, their corners' rotation slots,
 * the stars and the rotations (identity), weights floored at `floor` (the edge weights'). Writes
 * only those fields (it runs beside the factorisation); what it allocated, even on failure, is
 * freed by dfm_system_destroy. Returns 0 or DFM_ENOMEM.
 * dfm__arap_local_step: fits every rotation to positions p (3 per vertex).
 * dfm__arap_rhs: the global step's right-hand sides into s->rhs, in one pass: each free
 * column's coupling to the known positions in p and its soft target (dfm__known_rhs_row) plus
 * Σ_u R_u h_{j,u}.
 * dfm__arap_energy: the spokes-and-rims energy of p with the current rotations. */
/* dfm_order.c: s->order (nf entries) from AMD on s's free vertices (left NULL without memory:
 * CHOLMOD then orders), or from dfm_params.mesh_order restricted to them (0 or DFM_ENOMEM). */
void dfm__amd_columns(dfm_system *s, const mesh_adjacency *adj);
int dfm__restrict_mesh_order(dfm_system *s, const int64_t *mesh_order);

/* dfm_params.mesh_symbolic: the analysis of the whole mesh's vertex graph (CHOLMOD's factor of
 * its pattern, Perm in vertex numbers) and its statistics, which a padded system's factor
 * shares. dfm__symbolic_copy: a copy of it for s (in s->cc) with Perm in s's padded numbering
 * (free vertices their columns, the others nf, nf + 1, ... in vertex order), or NULL (memory). */
struct dfm_symbolic {
  cholmod_common cc;
  cholmod_factor *L;
  double lnz, fl;
  uint32_t n;
};
cholmod_factor *dfm__symbolic_copy(dfm_system *s, const dfm_symbolic *sym);
#define DFM_PAD_MAX 256 /* padded only when at most 1/DFM_PAD_MAX of the mesh is not free */
void dfm__cholmod_start(cholmod_common *cc, dfm_factor factor);

/* dfm_weights.c: per-edge weights (aligned with adj->vv) around the vertices marked in `need`,
 * floored at *floor_out; with cotangent weights the triangles' cotangents in *cot_out (free()).
 * 0 or DFM_ENOMEM. */
int dfm__edge_weights(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest, int uniform,
                      const uint8_t *need, double **out, double *floor_out, double **cot_out);

int dfm__arap_prepare(dfm_system *s, const mesh_topology *topo, const mesh_adjacency *adj, double floor);
void dfm__arap_local_step(dfm_system *s, const double *p);
void dfm__arap_rhs(dfm_system *s, const double *p, const double *soft_target);
double dfm__arap_energy(const dfm_system *s, const double *p);

/* dfm_region.c: a small region's gesture cut out of the mesh, what dfm_system.c builds a
 * region-local system on. dfm__region_init fills *r (zeroed first) and returns 0, or
 * DFM_ENOMEM with *r zeroed. Every array in *r is owned by it and freed by dfm__region_fini;
 * a caller that keeps one sets its field to NULL first. */
typedef struct dfm__region {
  uint32_t n;           /* vertices of the sub-mesh */
  uint32_t *vertex;     /* n: the mesh vertex of each, ascending */
  double *rest;         /* 3n: their rest positions */
  mesh_topology topo;   /* vertex_count, triangle_count and triangles only */
  mesh_adjacency adj;   /* of topo's triangles */
  dfm_params params;    /* the gesture in the sub-mesh's numbering: anchors and soft constraints
                         * outside it are dropped */
} dfm__region;

/* dfm_region.c: Dijkstra over edges (rest lengths in `positions`) from every seed at once, up to
 * `radius` (inclusive) and at most `max_count` settled vertices (0: no limit): dist[v] for each
 * vertex (n entries, INFINITY where not reached), the settled vertices in order into `settled`
 * (may be NULL) and their number into *count (may be NULL). 0 or DFM_ENOMEM. */
int dfm__geodesic_distances(const mesh_adjacency *adj, const double *positions, const uint32_t *seeds,
                            uint32_t seed_count, double radius, uint32_t max_count, double *dist, uint32_t *settled,
                            uint32_t *count);
/* The same search resumed: from every `within` vertex whose dist is finite (at that distance),
 * over `within` vertices only; dist (n entries) is INFINITY elsewhere on entry, the distances
 * found on return, and result (n entries) the settled vertices in order. 0 or DFM_ENOMEM. */
int dfm__geodesic_resume(const mesh_adjacency *adj, const double *positions, const uint8_t *within, double *dist,
                         uint32_t *result, uint32_t *count);
int dfm__region_init(dfm__region *r, const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                     const dfm_params *params);
void dfm__region_fini(dfm__region *r);

/* dfm_multires.c: the multiresolution path (dfm.h's dfm_multires). dfm_system.c builds and
 * solves the proxy's system on topo, adj, rest and params (the gesture in the proxy's numbering,
 * its solve writing into io) and dfm__multires_embed then carries it to the mesh. */
/* A proxy vertex as the embedding reads it: its solved position, its rotation in float32 (the
 * offsets it turns are small), 64 bytes. */
typedef struct dfm__frame {
  double x[3];
  float R[9];
  float pad;
} __attribute__((aligned(64))) dfm__frame;

typedef struct dfm__multires {
  uint32_t n;             /* mesh vertices */
  uint32_t np;            /* proxy vertices */
  uint32_t *proxy_vertex; /* np: the mesh vertex each proxy vertex is */
  mesh_topology topo;     /* the proxy: vertex_count, triangle_count and triangles only */
  mesh_adjacency adj;
  double *rest;           /* 3 np */
  dfm_params params;      /* arrays owned */
  double *io;             /* 3 np: the proxy's last solve (rest until the first) */
  double *R;              /* 9 np: each proxy vertex's rotation, fitted after each solve */
  struct dfm__frame *xr;  /* np: each proxy vertex's position and rotation after a solve, one
                           * cache line each for the embedding's reads */
  uint32_t *bind_corner;  /* 3 n: the corners of the proxy triangle each mesh vertex follows
                           * (UINT32_MAX first: none, it stays at rest) */
  float *bind;            /* 5 n: two barycentric coordinates and the offset at rest */
  double *mesh_rest;      /* 3 n */
  uint8_t *moves;         /* n: written by a solve (the region and its handles) */
  uint32_t *handle, *anchor; /* the mesh's handles and anchors, placed exactly after a drag */
  uint32_t nh, na;
  double ms;              /* building all this: */
  double simplify_ms, near_ms, bind_ms; /* the proxy made (0: the caller's), pieces and params, the binding */
  int proxy_reused;       /* the proxy was dfm_params.proxy */
} dfm__multires;

/* Whether a gesture of params on n vertices takes the multiresolution path (1) or not (0). */
int dfm__multires_pick(const dfm_params *params, uint32_t n);
/* 0 with *out, or DFM_EINVAL (soft constraints) / DFM_ENOMEM with a reason. */
int dfm__multires_init(dfm__multires **out, const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                       const dfm_params *params, char *err, size_t errlen);
/* After a solve of the proxy into io: the mesh's positions of the vertices that move into out. */
int dfm__multires_embed(dfm__multires *m, const dfm_xform *xf, double *out);
void dfm__multires_free(dfm__multires *m);

/* dfm_roles.c.
 * dfm__roles_check: the parameters against a mesh of n vertices: 0, or DFM_EINVAL with a reason.
 * dfm__roles_assign: s->role from the checked parameters.
 * dfm__roles_pin_unconstrained: every free part of the mesh that no constraint reaches (no known
 * vertex next to it, no soft constraint in it: is_soft, per vertex) becomes PINNED, held still.
 * dfm__roles_soft_targets: s->soft_p and s->soft_d once s->soft_w is summed (mean_w: the mean
 * edge weight the soft weights are relative to). Each returns 0 or DFM_ENOMEM. */
int dfm__roles_check(const dfm_params *p, uint32_t n, char *err, size_t errlen);
void dfm__roles_assign(dfm_system *s);
int dfm__roles_pin_unconstrained(dfm_system *s, const mesh_adjacency *adj, const uint8_t *is_soft);
int dfm__roles_soft_targets(dfm_system *s, double mean_w);

/* dfm_border.c, for a system whose u is set (a smooth border).
 * dfm__border_shape_harmonic: the harmonic solution in s->x (displacements) shaped by u.
 * dfm__border_prescribe_rotations: after a local step, the constrained vertices' rotations
 * (slots nrot_fit .. nrot) set to the drag's on the handle, the identity elsewhere.
 * dfm__border_arap_start: ARAP's first iterate in p (3 per vertex, the knowns already placed).
 * dfm__border_blend_arap: the drag's result in out from ARAP's iterate p (free vertices). */
void dfm__border_shape_harmonic(dfm_system *s);
void dfm__border_prescribe_rotations(dfm_system *s, const dfm_xform *xf);
void dfm__border_arap_start(const dfm_system *s, const dfm_xform *xf, double *p);
void dfm__border_blend_arap(const dfm_system *s, const dfm_xform *xf, const double *p, double *out);

/* dfm_sweep.c: the supernodal solve.
 * dfm__sweep_plan_make: the plan for supernodal factor L (L is read, not kept). Returns 0 with
 * *out, freed by dfm__sweep_plan_free (NULL allowed), or DFM_ENOMEM.
 * dfm__sweep_plan_threads: 2 when the plan splits the sweeps over two threads, else 1 (NULL too).
 * dfm__sweep_solve3: A X = B for nb right-hand sides b (x, y and z interleaved in a vector each,
 * the fourth lane ignored), with LLᵀ = P A Pᵀ, into x: three columns of nb (column-major) or,
 * when vertex is non-NULL, positions (factor column k's solution at x + 3 vertex[k], none where
 * vertex[k] is UINT32_MAX: L->n entries). w: L->n vectors, t: the tallest supernode's rows
 * (32-byte aligned, both overwritten). nb ≤ L->n: A's columns from nb on are a padding's identity
 * (dfm_symbolic), whose right-hand sides are zero and whose solutions are dropped. Returns 1 when
 * a solution written to positions is not finite (all are written), else 0. */
int dfm__sweep_plan_make(const cholmod_factor *L, solve_plan **out);
void dfm__sweep_plan_free(solve_plan *p);
int dfm__sweep_plan_threads(const solve_plan *p);
int dfm__sweep_solve3(const cholmod_factor *L, const solve_plan *p, size_t nb, const dfm_v4 *b, double *x,
                      const uint32_t *vertex, dfm_v4 *w, dfm_v4 *t, int f32);
int dfm__sweep_plan_f32(const cholmod_factor *L, solve_plan *p);
int dfm__sweep_plan_has_f32(const solve_plan *p);

/* Free column k's right-hand side from the known values x (3 per vertex: positions or
 * displacements, Σ coef · x over its coupling) and its soft target (3 per column, or NULL).
 * (Into acc: a vector returned by value would change the ABI between AVX clones and the rest.) */
static inline void dfm__known_rhs_row(const dfm_system *s, const double *x, const double *soft_target, uint32_t k,
                                      double acc[3]) {
  acc[0] = acc[1] = acc[2] = 0;
  for (uint32_t e = s->cp_off[k]; e < s->cp_off[k + 1]; e++)
    for (int d = 0; d < 3; d++) acc[d] += s->cp_coef[e] * x[3 * (size_t)s->cp_vertex[e] + d];
  if (soft_target)
    for (int d = 0; d < 3; d++) acc[d] += s->soft_w[k] * soft_target[3 * (size_t)k + d];
}

/* Chunks of a parallel loop: about four per thread, at least 256 iterations each. */
static inline size_t dfm__grain(size_t n) {
  size_t g = n / (4 * (size_t)dfm_pool_threads());
  return g < 256 ? 256 : g;
}

#endif
