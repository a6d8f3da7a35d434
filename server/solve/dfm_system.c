/*
 * dfm_system.c — one editing gesture's factorised system (Laplacian, biharmonic, ARAP).
 *
 * Unknowns are the *free* vertices: in the region of interest, neither handle nor anchor, and in
 * a part of the mesh that some constraint reaches (a part nothing constrains is held still —
 * its system would be singular). Everything else is a known position: handles follow the
 * drag's rigid transform, anchors and everything outside the region stay at rest.
 *
 *   laplacian   L_FF d_F = -L_FC d_C (+ soft terms)        displacements d, cotangent L
 *   biharmonic  K_FF d_F = -K_FC d_C (+ soft terms)        K = L M⁻¹ L, M the mixed areas
 *   arap        L_FF p_F = b_F - L_FC p_C (+ soft terms)   Sorkine & Alexa 2007 with the
 *               spokes-and-rims energy (Chao et al. 2010): per vertex a rotation fitted over the
 *               edges of all its triangles; b_j = ⅓ Σ_t (R_a + R_b + R_c) g_{t,j}.
 *
 * The matrix depends only on the gesture, so CHOLMOD analyses and factorises it once (on the
 * server's thread pool) and each drag is right-hand sides and a back-substitution. Edge weights
 * are the clamped cotangents, floored at 1e-12 of their mean so that no vertex is cut loose by a
 * degenerate triangle. The parallel loops (ARAP local step, right-hand sides, setup) and the two
 * halves of the triangular sweeps run on dfm_pool.c's workers.
 *
 * This file creates a system (roles, edge weights, assembly, factorisation, the smooth border's
 * handle weight), holds the module's error strings, modes and rigid transforms, and runs the
 * drags; it calls on dfm_order.c (the columns' order), dfm_arap.c (the ARAP tables, local step
 * and rotation terms), dfm_sweep.c (the supernodal solve), dfm_region.c (a small region's
 * sub-mesh) and dfm_border.c (what a smooth border does to a solve), which never call back
 * (dfm_internal.h).
 *
 * DOES NOT know about sessions, render vertices or the network.
 */
#include <cholmod.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
#include <string.h>
#include <time.h>

#include "dfm_internal.h"

enum {
  ROLE_FREE = DFM__ROLE_FREE,
  ROLE_OUTSIDE = DFM__ROLE_OUTSIDE,
  ROLE_HANDLE = DFM__ROLE_HANDLE,
  ROLE_ANCHOR = DFM__ROLE_ANCHOR,
  ROLE_PINNED = DFM__ROLE_PINNED
};

const char *dfm_strerror(int code) {
  switch (code) {
    case 0: return "success";
    case DFM_EINVAL: return "invalid deformation parameters";
    case DFM_ESINGULAR: return "the system is singular";
    case DFM_ESOLVER: return "the sparse solver failed";
    case DFM_ENOMEM: return "out of memory";
    case DFM_ENONFINITE: return "the solve produced non-finite positions";
    default: return "unknown error";
  }
}

void dfm_set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

void dfm_system_destroy(dfm_system *s) {
  if (!s) return;
  dfm_system_destroy(s->sub);
  dfm__multires_free(s->mr);
  free(s->sub_vertex);
  free(s->sub_io);
  free(s->tri_cot);
  if (s->cc_started) {
    cholmod_l_free_factor(&s->L, &s->cc);
    cholmod_l_free_dense(&s->B, &s->cc);
    cholmod_l_free_dense(&s->X, &s->cc);
    cholmod_l_free_dense(&s->Y, &s->cc);
    cholmod_l_free_dense(&s->E, &s->cc);
    cholmod_l_finish(&s->cc);
  }
  free(s->x);
  free(s->rhs);
  free(s->work);
  free(s->col_vertex);
  dfm__sweep_plan_free(s->plan);
  free(s->rest);
  free(s->role);
  free(s->col);
  free(s->free_vertex);
  free(s->order);
  free(s->soft_w);
  free(s->cp_off);
  free(s->cp_vertex);
  free(s->cp_coef);
  free(s->tri.v);
  free(s->tri.c);
  free(s->rot_vertex);
  free(s->rot_slot);
  free(s->local.off);
  free(s->local.idx);
  free(s->local.vec);
  free(s->global.off);
  free(s->global.idx);
  free(s->global.vec);
  free(s->R);
  free(s->Rsum);
  free(s->current);
  free(s->disp);
  free(s->soft_p);
  free(s->soft_d);
  free(s->u);
  free(s->f);
  free((void *)s->p.roi);
  free((void *)s->p.handle);
  free((void *)s->p.anchors);
  free((void *)s->p.soft);
  free((void *)s->p.soft_weight);
  free((void *)s->p.soft_position);
  free(s);
}

void dfm_system_info(const dfm_system *s, dfm_info *info) {
  if (s->sub) {
    dfm_system_info(s->sub, info);
    info->vertices = s->n;
    info->roles_ms += s->roles_ms;
    if (s->mr) {
      info->multires = 1, info->proxy_vertices = s->mr->np, info->multires_ms = s->mr->ms;
      info->multires_simplify_ms = s->mr->simplify_ms, info->multires_near_ms = s->mr->near_ms;
      info->multires_bind_ms = s->mr->bind_ms, info->proxy_reused = s->mr->proxy_reused;
    }
    return;
  }
  memset(info, 0, sizeof(*info));
  info->vertices = s->n;
  info->free = s->nf;
  info->pinned = s->pinned;
  if (s->L) info->factor_nnz = (size_t)s->lnz, info->factor_flops = s->fl, info->supernodal = s->L->is_super;
  info->solve_threads = dfm__sweep_plan_threads(s->plan);
  info->sweep32 = dfm__sweep_plan_has_f32(s->plan);
  info->analyze_ms = s->analyze_ms;
  info->factor_ms = s->factor_ms;
  info->roles_ms = s->roles_ms;
  info->weights_ms = s->weights_ms;
  info->assemble_ms = s->assemble_ms;
  info->arap_ms = s->arap_ms;
  info->order_ms = s->order_ms;
  info->order_from_mesh = s->order_from_mesh;
  info->symbolic_from_mesh = s->symbolic_from_mesh;
}

static void *dup_array(const void *src, size_t bytes) {
  if (!src || bytes == 0) return NULL;
  void *d = malloc(bytes);
  if (d) memcpy(d, src, bytes);
  return d;
}

/* Sparse row accumulator over columns (free indices) and known vertices. */
typedef struct row_acc {
  int32_t *pos;      /* n: index into the lists, -1 */
  uint32_t *cols;    /* free columns touched */
  double *cval;
  uint32_t ncols;
  uint32_t *known;   /* known vertices touched */
  double *kval;
  uint32_t nknown;
} row_acc;

static void acc_add(row_acc *a, const dfm_system *s, uint32_t v, double x) {
  if (a->pos[v] >= 0) {
    if (s->col[v] >= 0) a->cval[a->pos[v]] += x;
    else a->kval[a->pos[v]] += x;
    return;
  }
  if (s->col[v] >= 0) {
    a->pos[v] = (int32_t)a->ncols;
    a->cols[a->ncols] = (uint32_t)s->col[v];
    a->cval[a->ncols++] = x;
  } else {
    a->pos[v] = (int32_t)a->nknown;
    a->known[a->nknown] = v;
    a->kval[a->nknown++] = x;
  }
}

/* L row of vertex v, as (vertex, value) pairs into acc scaled by `scale`: L_vv = Σ w, L_vu = -w. */
static void add_laplacian_row(row_acc *a, const dfm_system *s, const mesh_adjacency *adj,
                              const double *w, uint32_t v, double scale) {
  double diag = 0;
  for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
    acc_add(a, s, adj->vv[e], -scale * w[e]);
    diag += w[e];
  }
  acc_add(a, s, v, scale * diag);
}

/* 1 / (mixed vertex area) per vertex, each area floored at 1e-12 of the mean: the biharmonic
 * M⁻¹ of L M⁻¹ L, in *out (n + 1 entries, malloc'ed; the caller frees it). 0 or DFM_ENOMEM. */
static int inverse_areas(const dfm_system *s, const mesh_topology *topo, double **out) {
  uint32_t n = s->n;
  double *inv_area = malloc(sizeof(double) * (n + 1));
  if (!inv_area) return DFM_ENOMEM;
  mesh_vertex_areas(n, s->rest, topo->triangles, topo->triangle_count, MESH_AREA_MIXED, inv_area);
  double mean = 0;
  for (uint32_t v = 0; v < n; v++) mean += inv_area[v];
  mean = n ? mean / n : 1.0;
  for (uint32_t v = 0; v < n; v++) inv_area[v] = 1.0 / (inv_area[v] > 1e-12 * mean ? inv_area[v] : 1e-12 * mean);
  *out = inv_area;
  return 0;
}

/* The lower triangle of A (free × free) into *keys_out / *vals_out (*nnz_out entries, malloc'ed;
 * the caller frees both, after a failure too), the known-vertex coupling into s->cp_off, cp_vertex
 * and cp_coef. `inv_area`: the biharmonic M⁻¹, NULL in the other modes. 0 or DFM_ENOMEM. */
static int assemble_lower(dfm_system *s, const mesh_adjacency *adj, const double *w, const double *inv_area,
                          uint64_t **keys_out, double **vals_out, size_t *nnz_out) {
  uint32_t n = s->n, nf = s->nf;
  row_acc a = {0};
  a.pos = malloc(sizeof(int32_t) * (n + 1));
  a.cols = malloc(sizeof(uint32_t) * (n + 1));
  a.cval = malloc(sizeof(double) * (n + 1));
  a.known = malloc(sizeof(uint32_t) * (n + 1));
  a.kval = malloc(sizeof(double) * (n + 1));
  /* Column-major lower triangle, built row by row of the symmetric matrix: entry (r, c) with
   * r >= c is stored in column c. Collected as (c << 32 | r, value), in column order. */
  size_t cap = 16 * (size_t)nf + 16, nnz = 0;
  uint64_t *keys = malloc(sizeof(uint64_t) * cap);
  double *vals = malloc(sizeof(double) * cap);
  size_t kcap = 8 * (size_t)nf + 16, nk = 0;
  s->cp_off = calloc((size_t)nf + 1, sizeof(uint32_t));
  s->cp_vertex = malloc(sizeof(uint32_t) * kcap);
  s->cp_coef = malloc(sizeof(double) * kcap);
  int rc = DFM_ENOMEM;
  if (!a.pos || !a.cols || !a.cval || !a.known || !a.kval || !keys || !vals || !s->cp_off ||
      !s->cp_vertex || !s->cp_coef)
    goto out;
  memset(a.pos, 0xff, sizeof(int32_t) * n);
  for (uint32_t k = 0; k < nf; k++) {
    uint32_t v = s->free_vertex[k];
    a.ncols = a.nknown = 0;
    if (s->p.mode == DFM_BIHARMONIC) {
      /* Row v of L M⁻¹ L = Σ_u L_vu (1/area_u) L_u·, over u in v's one ring and v itself. */
      double diag = 0;
      for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
        add_laplacian_row(&a, s, adj, w, adj->vv[e], -w[e] * inv_area[adj->vv[e]]);
        diag += w[e];
      }
      add_laplacian_row(&a, s, adj, w, v, diag * inv_area[v]);
    } else {
      add_laplacian_row(&a, s, adj, w, v, 1.0);
    }
    acc_add(&a, s, v, s->soft_w[k]);
    for (uint32_t i = 0; i < a.ncols; i++) {
      if (a.cols[i] >= k) {
        if (nnz == cap) {
          cap *= 2;
          uint64_t *gk = realloc(keys, sizeof(uint64_t) * cap);
          double *gv = realloc(vals, sizeof(double) * cap);
          if (!gk || !gv) {
            keys = gk ? gk : keys;
            vals = gv ? gv : vals;
            goto out;
          }
          keys = gk;
          vals = gv;
        }
        keys[nnz] = ((uint64_t)k << 32) | a.cols[i];
        vals[nnz++] = a.cval[i];
      }
      a.pos[s->free_vertex[a.cols[i]]] = -1;
    }
    /* Known vertices move to the right-hand side with the opposite sign. */
    for (uint32_t i = 0; i < a.nknown; i++) {
      a.pos[a.known[i]] = -1;
      if (a.kval[i] == 0.0) continue;
      if (nk == kcap) {
        kcap *= 2;
        uint32_t *gv = realloc(s->cp_vertex, sizeof(uint32_t) * kcap);
        double *gc = realloc(s->cp_coef, sizeof(double) * kcap);
        if (gv) s->cp_vertex = gv;
        if (gc) s->cp_coef = gc;
        if (!gv || !gc) goto out;
      }
      s->cp_vertex[nk] = a.known[i];
      s->cp_coef[nk++] = -a.kval[i];
    }
    s->cp_off[k + 1] = (uint32_t)nk;
  }
  rc = 0;
out:
  free(a.pos);
  free(a.cols);
  free(a.cval);
  free(a.known);
  free(a.kval);
  *keys_out = keys;
  *vals_out = vals;
  *nnz_out = nnz;
  return rc;
}

/* Starts the system's CHOLMOD workspace with the settings every system uses. */
static void start_cholmod(dfm_system *s) {
  dfm__cholmod_start(&s->cc, s->p.factor);
  s->cc_started = 1;
}

/* Analyses A (AMD, or the order beside the weights; or copies the mesh's analysis, s->sym),
 * factorises and frees it, then allocates B, x, the sweep workspace, plan (and float32 copy).
 * 0, DFM_ENOMEM, DFM_ESOLVER or DFM_ESINGULAR. */
static int factor_system(dfm_system *s, cholmod_sparse *A, char *err, size_t errlen) {
  uint32_t nf = s->nf;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (s->sym) {
    /* The mesh's analysis, for this padded matrix (dfm_params.mesh_symbolic). */
    s->L = dfm__symbolic_copy(s, s->sym);
    s->lnz = s->sym->lnz, s->fl = s->sym->fl;
    s->symbolic_from_mesh = 1;
    s->sym = NULL;
    if (!s->L) {
      snprintf(err, errlen, "out of memory copying the mesh's analysis for %u unknowns", nf);
      cholmod_l_free_sparse(&A, &s->cc);
      return DFM_ENOMEM;
    }
  } else {
    if (s->order) s->cc.method[0].ordering = CHOLMOD_GIVEN; /* AMD's, computed beside the weights */
    s->L = s->order ? cholmod_l_analyze_p(A, s->order, NULL, 0, &s->cc) : cholmod_l_analyze(A, &s->cc);
    s->lnz = s->cc.lnz, s->fl = s->cc.fl;
  }
  free(s->order);
  s->order = NULL;
  s->analyze_ms = ms_since(&t0);
  if (!s->L || s->cc.status < CHOLMOD_OK) {
    snprintf(err, errlen, "CHOLMOD analyze failed (status %d) for %u unknowns", s->cc.status, nf);
    cholmod_l_free_sparse(&A, &s->cc);
    return s->cc.status == CHOLMOD_OUT_OF_MEMORY ? DFM_ENOMEM : DFM_ESOLVER;
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* CHOLMOD 3's supernodal factorisation scatters updates in OpenMP regions whose thread
   * count is fixed when CHOLMOD is built (num_threads(CHOLMOD_OMP_NUM_THREADS)), one region
   * per large supernode. On two cores, beside the ARAP tables and OpenBLAS's own threads,
   * the wake-ups cost more than they save: the 16k-vertex region factorised in 37-44 ms
   * with them and 27-28 ms without, 164k 0.74-0.79 s against 0.51-0.59 s (performance.md). */
  omp_set_max_active_levels(0);
  cholmod_l_factorize(A, s->L, &s->cc);
  s->factor_ms = ms_since(&t0);
  cholmod_l_free_sparse(&A, &s->cc);
  if (s->cc.status == CHOLMOD_NOT_POSDEF || s->L->minor < s->L->n) {
    /* L->minor is the column where factorisation broke down; name its vertex. */
    SuiteSparse_long minor = (SuiteSparse_long)s->L->minor;
    SuiteSparse_long col = minor < (SuiteSparse_long)s->L->n ? ((SuiteSparse_long *)s->L->Perm)[minor] : 0;
    if (col >= (SuiteSparse_long)nf) col = 0; /* a padding column is the identity's: never */
    snprintf(err, errlen,
             "the %s system is not positive definite near topology vertex %u: that part of the "
             "mesh is not held by any handle or anchor, or its triangles are degenerate",
             dfm_mode_name(s->p.mode), s->vertex_id ? s->vertex_id[s->free_vertex[col]] : s->free_vertex[col]);
    return DFM_ESINGULAR;
  }
  if (s->cc.status < CHOLMOD_OK) {
    snprintf(err, errlen, "CHOLMOD factorize failed (status %d)", s->cc.status);
    return s->cc.status == CHOLMOD_OUT_OF_MEMORY ? DFM_ENOMEM : DFM_ESOLVER;
  }
  if (!s->L->is_super && !(s->B = cholmod_l_zeros(nf, 3, CHOLMOD_REAL, &s->cc))) return DFM_ENOMEM;
  size_t tallest = 0;
  if (s->L->is_super)
    for (size_t k = 0; k < s->L->nsuper; k++) {
      size_t rows = (size_t)(((SuiteSparse_long *)s->L->pi)[k + 1] - ((SuiteSparse_long *)s->L->pi)[k]);
      if (rows > tallest) tallest = rows;
    }
  s->x = malloc(sizeof(double) * 3 * ((size_t)nf + 1));
  s->rhs = aligned_alloc(32, 32 * ((size_t)nf + 1));
  s->work = aligned_alloc(32, 32 * ((size_t)s->L->n + tallest + 1));
  if (!s->x || !s->rhs || !s->work) return DFM_ENOMEM;
  if (s->L->is_super) {
    if (dfm__sweep_plan_make(s->L, &s->plan) != 0 || !(s->col_vertex = malloc(sizeof(uint32_t) * ((size_t)s->L->n + 1))))
      return DFM_ENOMEM;
    const SuiteSparse_long *perm = s->L->Perm;
    for (size_t k = 0; k < s->L->n; k++) s->col_vertex[k] = (size_t)perm[k] < nf ? s->free_vertex[perm[k]] : UINT32_MAX;
  }
  if (!s->L->is_super || s->p.mode != DFM_ARAP || s->p.sweeps == DFM_SWEEPS_DOUBLE) return 0;
  return s->p.sweeps == DFM_SWEEPS_FLOAT || ((SuiteSparse_long *)s->L->px)[s->L->nsuper] >= DFM_SWEEP32_MIN ? dfm__sweep_plan_f32(s->L, s->plan) : 0;
}

/* Assembles the lower triangle of A (free × free) and the known-vertex coupling, then analyses
 * and factorises it. */
static int assemble_and_factor(dfm_system *s, const mesh_topology *topo, const mesh_adjacency *adj,
                               const double *w, char *err, size_t errlen) {
  uint32_t nf = s->nf;
  double *inv_area = NULL, *vals = NULL;
  uint64_t *keys = NULL;
  size_t nnz = 0;
  int rc = s->p.mode == DFM_BIHARMONIC ? inverse_areas(s, topo, &inv_area) : 0;
  if (rc == 0) rc = assemble_lower(s, adj, w, inv_area, &keys, &vals, &nnz);
  if (rc != 0) goto out;
  start_cholmod(s);
  if (nf) {
    /* Entries were collected column by column (rows unsorted within a column, which CHOLMOD
     * accepts with sorted = 0). */
    /* Padded to the mesh's analysis (s->sym): every other vertex an identity column after them. */
    uint32_t dim = s->sym ? s->n : nf;
    cholmod_sparse *A = cholmod_l_allocate_sparse(dim, dim, nnz + (dim - nf), 0, 1, -1, CHOLMOD_REAL, &s->cc);
    if (!A) {
      snprintf(err, errlen, "CHOLMOD could not allocate the %u × %u matrix", dim, dim);
      rc = DFM_ENOMEM;
      goto out;
    }
    SuiteSparse_long *Ap = A->p, *Ai = A->i;
    double *Ax = A->x;
    size_t at = 0;
    for (uint32_t c = 0; c < nf; c++) {
      Ap[c] = (SuiteSparse_long)at;
      for (; at < nnz && (keys[at] >> 32) == c; at++) {
        Ai[at] = (SuiteSparse_long)(keys[at] & 0xffffffffu);
        Ax[at] = vals[at];
      }
    }
    for (uint32_t c = nf; c < dim; c++) Ap[c] = (SuiteSparse_long)at, Ai[at] = c, Ax[at++] = 1.0;
    Ap[dim] = (SuiteSparse_long)at;
    rc = factor_system(s, A, err, errlen);
  }
out:
  free(inv_area);
  free(keys);
  free(vals);
  return rc;
}

/* The two halves of a system's setup: 0 assembles and factorises, 1 builds the ARAP tables. */
typedef struct setup_job {
  dfm_system *s;
  const mesh_topology *topo;
  const mesh_adjacency *adj;
  const double *w;
  double floor;
  char *err;
  size_t errlen;
  int rc;
} setup_job;

static void setup_range(void *ctx, size_t lo, size_t hi) {
  setup_job *jobs = ctx;
  for (size_t i = lo; i < hi; i++) {
    setup_job *j = &jobs[i];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (i == 0) {
      j->rc = assemble_and_factor(j->s, j->topo, j->adj, j->w, j->err, j->errlen);
      j->s->assemble_ms = ms_since(&t0) - j->s->analyze_ms - j->s->factor_ms;
    } else {
      j->rc = dfm__arap_prepare(j->s, j->topo, j->adj, j->floor);
      j->s->arap_ms = ms_since(&t0);
    }
  }
}

typedef struct weights_order_job {
  dfm_system *s;
  const mesh_topology *topo;
  const mesh_adjacency *adj;
  const uint8_t *need;
  double *w, floor, order_ms;
  int rc;
} weights_order_job;

static void weights_and_order(void *ctx, size_t lo, size_t hi) {
  weights_order_job *j = ctx;
  for (size_t i = lo; i < hi; i++) {
    if (i == 0) {
      j->rc = dfm__edge_weights(j->topo, j->adj, j->s->rest, j->s->p.uniform, j->need, &j->w, &j->floor, &j->s->tri_cot);
    } else {
      struct timespec t0;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      dfm__amd_columns(j->s, j->adj);
      j->order_ms = ms_since(&t0);
    }
  }
}

static int solve_columns(dfm_system *s, int f32, double *p, char *err, size_t errlen);
static void known_rhs(dfm_system *s, const double *x, const double *soft_target);

/* Solves with the gesture's own factor for the knowns' values `x` (3 per vertex) and soft
 * targets `soft` (3 per column, or NULL), into `dst` (3 per column, interleaved). */
static int solve_field(dfm_system *s, const double *x, const double *soft, double *dst, char *err, size_t errlen) {
  known_rhs(s, x, soft);
  int rc = solve_columns(s, 0, NULL, err, errlen);
  if (rc) return rc;
  uint32_t nf = s->nf;
  for (uint32_t k = 0; k < nf; k++)
    for (int d = 0; d < 3; d++) dst[3 * (size_t)k + d] = s->x[k + (size_t)d * nf];
  return 0;
}

/* What a smooth border needs, once per gesture (a solve or two with the gesture's factor): the
 * handle's harmonic weight u of every free vertex — 1 on the handle, 0 on every other
 * constrained vertex and as the soft targets, harmonic in between — and, when some soft target
 * is not where its vertex is, f: the harmonic displacement those targets alone cause, which the
 * smooth border leaves as it is (dfm_border.c). */
static int smooth_fields(dfm_system *s, char *err, size_t errlen) {
  uint32_t n = s->n, nf = s->nf;
  double *x = calloc(3 * ((size_t)n + 1), sizeof(double));
  double *u3 = malloc(sizeof(double) * 3 * ((size_t)nf + 1));
  s->u = malloc(sizeof(double) * ((size_t)nf + 1));
  int rc = DFM_ENOMEM;
  if (!x || !u3 || !s->u) goto out;
  for (uint32_t i = 0; i < s->p.handle_count; i++) x[3 * (size_t)s->p.handle[i]] = 1.0;
  if ((rc = solve_field(s, x, NULL, u3, err, errlen)) != 0) goto out;
  for (uint32_t k = 0; k < nf; k++) {
    double u = u3[3 * (size_t)k];
    s->u[k] = u < 0 ? 0 : u > 1 ? 1 : u; /* the maximum principle, up to rounding */
  }
  int moved = 0;
  for (size_t i = 0; s->soft_d && i < 3 * (size_t)nf; i++) moved |= s->soft_d[i] != 0.0;
  /* No border reachable (no anchor, no region's edge, no soft target): ARAP's blend is then
   * the handle's rigid motion all over. */
  s->rigid = s->p.mode == DFM_ARAP && !moved;
  for (uint32_t k = 0; k < nf && s->rigid; k++) s->rigid = s->u[k] >= 1.0 - 1e-9;
  if (moved) {
    rc = DFM_ENOMEM;
    s->f = malloc(sizeof(double) * 3 * ((size_t)nf + 1));
    if (!s->f) goto out;
    memset(x, 0, sizeof(double) * 3 * n);
    if ((rc = solve_field(s, x, s->soft_d, s->f, err, errlen)) != 0) goto out;
  }
out:
  free(x);
  free(u3);
  return rc;
}

/* The system on the whole of topo (parameters checked); error messages name vertex v as
 * ids[v] when ids is not NULL. */
static int create_full(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                       const dfm_params *params, const uint32_t *ids, const int64_t *mesh_order,
                       const dfm_symbolic *sym, dfm_system **out, char *err, size_t errlen) {
  *out = NULL;
  dfm_system *s = calloc(1, sizeof(*s));
  if (!s) return DFM_ENOMEM;
  s->vertex_id = ids;
  s->p = *params;
  s->p.roi = dup_array(params->roi, sizeof(uint32_t) * params->roi_count);
  s->p.handle = dup_array(params->handle, sizeof(uint32_t) * params->handle_count);
  s->p.anchors = dup_array(params->anchors, sizeof(uint32_t) * params->anchor_count);
  s->p.soft = dup_array(params->soft, sizeof(uint32_t) * params->soft_count);
  s->p.soft_weight = dup_array(params->soft_weight, sizeof(double) * params->soft_count);
  s->p.soft_position = dup_array(params->soft_position, sizeof(double) * 3 * params->soft_count);
  s->p.mesh_order = NULL; /* read here only (mesh_order, sym: the caller's, for this topology) */
  s->p.mesh_symbolic = NULL;
  if (s->p.iterations < 1) s->p.iterations = 1;
  s->n = topo->vertex_count;
  uint32_t n = s->n;
  s->rest = dup_array(rest, sizeof(double) * 3 * n);
  s->role = malloc(n + 1);
  s->col = malloc(sizeof(int32_t) * (n + 1));
  s->current = malloc(sizeof(double) * 3 * ((size_t)n + 1));
  uint8_t *is_soft = calloc(n + 1, 1);
  double *w = NULL, floor = 0;
  int rc = DFM_ENOMEM;
  if (!s->rest || !s->role || !s->col || !s->current || !is_soft ||
      (params->roi_count && !s->p.roi) || (params->handle_count && !s->p.handle) ||
      (params->anchor_count && !s->p.anchors) || (params->soft_count && (!s->p.soft || !s->p.soft_weight)) ||
      (params->soft_count && params->soft_position && !s->p.soft_position))
    goto fail;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dfm__roles_assign(s);
  for (uint32_t i = 0; i < s->p.soft_count; i++)
    if (s->role[s->p.soft[i]] == ROLE_FREE) is_soft[s->p.soft[i]] = 1;
  rc = dfm__roles_pin_unconstrained(s, adj, is_soft);
  if (rc) goto fail;
  s->free_vertex = malloc(sizeof(uint32_t) * (n + 1));
  if (!s->free_vertex) {
    rc = DFM_ENOMEM;
    goto fail;
  }
  for (uint32_t v = 0; v < n; v++) {
    s->col[v] = -1;
    if (s->role[v] == ROLE_FREE) {
      s->col[v] = (int32_t)s->nf;
      s->free_vertex[s->nf++] = v;
    }
  }
  /* Weights are needed around free vertices (and one ring further for K = L M⁻¹ L). */
  uint8_t *need = calloc(n + 1, 1);
  if (!need) {
    rc = DFM_ENOMEM;
    goto fail;
  }
  for (uint32_t k = 0; k < s->nf; k++) {
    uint32_t v = s->free_vertex[k];
    need[v] = 1;
    if (s->p.mode == DFM_BIHARMONIC)
      for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) need[adj->vv[e]] = 1;
  }
  s->roles_ms = ms_since(&t0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int whole = s->p.mode != DFM_BIHARMONIC && s->nf > 0 && (uint64_t)s->nf * 16 >= (uint64_t)n * 15;
  if (whole && sym && sym->n == n && sym->L->is_super && s->p.factor != DFM_FACTOR_SIMPLICIAL &&
      (uint64_t)(n - s->nf) * DFM_PAD_MAX <= n) {
    /* All but a handle's worth of the mesh is free and its analysis is at hand: padded to it,
     * no order or analysis needed. (Each padding column keeps the fill its vertex caused in
     * the whole graph: on bunny00 a 50-vertex handle costs 0.4 % more nnz(L) than its own
     * AMD, with anchors up to 1/256 of the mesh 3.3 %, 1/128 6 %, 1/20 17 %: the drags would
     * pay for that.) */
    s->sym = sym;
    s->order_from_mesh = 1;
    rc = dfm__edge_weights(topo, adj, s->rest, s->p.uniform, need, &w, &floor, &s->tri_cot);
  } else if (whole && mesh_order) {
    /* Nearly the whole mesh is free: the mesh's own order, restricted, instead of AMD again. */
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rc = dfm__restrict_mesh_order(s, mesh_order);
    s->order_ms = ms_since(&t1);
    s->order_from_mesh = 1;
    if (rc == 0) rc = dfm__edge_weights(topo, adj, s->rest, s->p.uniform, need, &w, &floor, &s->tri_cot);
  } else if (s->p.mode != DFM_BIHARMONIC && s->nf > 0) {
    weights_order_job wj = {s, topo, adj, need, NULL, 0, 0, 0};
    dfm_parallel_for(2, 1, weights_and_order, &wj);
    rc = wj.rc, w = wj.w, floor = wj.floor;
    s->order_ms = wj.order_ms;
  } else {
    rc = dfm__edge_weights(topo, adj, s->rest, s->p.uniform, need, &w, &floor, &s->tri_cot);
  }
  s->weights_ms = ms_since(&t0);
  free(need);
  if (rc) goto fail;
  /* Soft weights are given relative to the mean edge weight, so 1 means "as strong as an edge". */
  s->soft_w = calloc((size_t)s->nf + 1, sizeof(double));
  if (!s->soft_w) {
    rc = DFM_ENOMEM;
    goto fail;
  }
  double mean_w = floor * 1e12;
  for (uint32_t i = 0; i < s->p.soft_count; i++) {
    int32_t col = s->col[s->p.soft[i]];
    if (col >= 0) s->soft_w[col] += s->p.soft_weight[i] * mean_w;
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  s->disp = calloc(3 * ((size_t)n + 1), sizeof(double));
  if (!s->disp) {
    rc = DFM_ENOMEM;
    goto fail;
  }
  for (uint32_t k = 0; k < s->nf; k++)
    if (s->soft_w[k] != 0.0) {
      if ((rc = dfm__roles_soft_targets(s, mean_w)) != 0) goto fail;
      break;
    }
  /* The factorisation and the ARAP tables touch different fields: they run side by side. */
  setup_job jobs[2] = {{s, topo, adj, w, floor, err, errlen, 0}, {s, topo, adj, w, floor, NULL, 0, 0}};
  dfm_parallel_for(s->p.mode == DFM_ARAP ? 2 : 1, 1, setup_range, jobs);
  free(s->tri_cot);
  s->tri_cot = NULL;
  rc = jobs[0].rc ? jobs[0].rc : jobs[1].rc;
  if (rc == DFM_ENOMEM && jobs[1].rc && err && !err[0]) snprintf(err, errlen, "out of memory building the ARAP tables");
  if (rc) goto fail;
  if (s->p.smooth_border && s->p.mode != DFM_BIHARMONIC && s->nf && (rc = smooth_fields(s, err, errlen)) != 0) goto fail;
  free(w);
  free(is_soft);
  *out = s;
  return 0;
fail:
  if (rc == DFM_ENOMEM && err && !err[0]) snprintf(err, errlen, "out of memory building the system");
  free(w);
  free(is_soft);
  dfm_system_destroy(s);
  return rc;
}

/* The gesture on its region only: a system built on the sub-mesh dfm_region.c cuts out (the
 * region and the rings of vertices around it, renumbered), so that what it costs is proportional
 * to the region. s keeps the sub-mesh's vertex numbering to move positions in and out. */
static int create_region(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                         const dfm_params *params, dfm_system *s, char *err, size_t errlen) {
  dfm__region r;
  int rc = dfm__region_init(&r, topo, adj, rest, params);
  if (rc) return rc;
  s->ns = r.n;
  s->sub_vertex = r.vertex; /* the sub-system's vertex_id: it lives as long as s */
  r.vertex = NULL;
  s->sub_io = malloc(sizeof(double) * 3 * ((size_t)r.n + 1));
  if (s->sub_io) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = create_full(&r.topo, &r.adj, r.rest, &r.params, s->sub_vertex, NULL, NULL, &s->sub, err, errlen);
    s->sub_ms = ms_since(&t0);
  } else {
    rc = DFM_ENOMEM;
  }
  dfm__region_fini(&r);
  return rc;
}

/* The multiresolution path: the proxy's system as s->sub (dfm_multires.c prepares it). */
static int create_multires(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                           const dfm_params *params, dfm_system *s, char *err, size_t errlen) {
  int rc = dfm__multires_init(&s->mr, topo, adj, rest, params, err, errlen);
  const dfm__multires *m = s->mr;
  if (rc) return rc;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rc = create_full(&m->topo, &m->adj, m->rest, &m->params, m->proxy_vertex, NULL, NULL, &s->sub, err, errlen);
  s->sub_ms = ms_since(&t0);
  return rc;
}

int dfm_system_create(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                      const dfm_params *params, dfm_system **out, char *err, size_t errlen) {
  *out = NULL;
  if (adj->vertex_count != topo->vertex_count) {
    snprintf(err, errlen, "adjacency has %u vertices, topology %u", adj->vertex_count, topo->vertex_count);
    return DFM_EINVAL;
  }
  int rc = dfm__roles_check(params, topo->vertex_count, err, errlen);
  if (rc) return rc;
  int multires = dfm__multires_pick(params, topo->vertex_count);
  /* A region under half the mesh is solved on its own sub-mesh (create_region). */
  if (!multires && (!params->roi || params->whole_mesh || (uint64_t)params->roi_count * 2 >= topo->vertex_count))
    return create_full(topo, adj, rest, params, NULL, params->mesh_order, params->mesh_symbolic, out, err, errlen);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dfm_system *s = calloc(1, sizeof(*s));
  if (!s) return DFM_ENOMEM;
  s->n = topo->vertex_count;
  s->p = *params; /* mode and counts only: the arrays are the sub-system's */
  s->p.roi = s->p.handle = s->p.anchors = s->p.soft = NULL;
  s->p.soft_weight = s->p.soft_position = NULL;
  rc = multires ? create_multires(topo, adj, rest, params, s, err, errlen) : create_region(topo, adj, rest, params, s, err, errlen);
  if (rc) {
    if (rc == DFM_ENOMEM && err && !err[0]) snprintf(err, errlen, "out of memory building the system");
    dfm_system_destroy(s);
    return rc;
  }
  s->roles_ms = ms_since(&t0) - s->sub_ms; /* building the sub-mesh */
  *out = s;
  return 0;
}

/* Between the caller's positions (3 per mesh vertex) and the sub-system's. */
static void sub_gather(const dfm_system *s, const double *p) {
  for (uint32_t k = 0; k < s->ns; k++) memcpy(s->sub_io + 3 * (size_t)k, p + 3 * (size_t)s->sub_vertex[k], sizeof(double) * 3);
}

static void sub_scatter(const dfm_system *s, double *p) {
  for (uint32_t k = 0; k < s->ns; k++) memcpy(p + 3 * (size_t)s->sub_vertex[k], s->sub_io + 3 * (size_t)k, sizeof(double) * 3);
}

/* Handles at the drag's transform of their rest positions. */
static void place_handles(dfm_system *s, const dfm_xform *xf, double *p) {
  for (uint32_t i = 0; i < s->p.handle_count; i++) {
    uint32_t v = s->p.handle[i];
    dfm_xform_apply(xf, s->rest + 3 * (size_t)v, p + 3 * (size_t)v);
  }
}

/* Known positions: handles transformed, everything else not free at rest. */
static void place_known(dfm_system *s, const dfm_xform *xf, double *p) {
  for (uint32_t v = 0; v < s->n; v++) {
    if (s->role[v] == ROLE_FREE) continue;
    if (s->role[v] == ROLE_HANDLE) dfm_xform_apply(xf, s->rest + 3 * (size_t)v, p + 3 * (size_t)v);
    else memcpy(p + 3 * (size_t)v, s->rest + 3 * (size_t)v, sizeof(double) * 3);
  }
}

static int scatter(dfm_system *s, double *p, int displacement);

/* A x = rhs into s->x (three columns), or, when p is non-NULL, into the free vertices' positions
 * p (the supernodal solve writes them as it leaves the factor's order; DFM_ENONFINITE when a
 * value is not finite). f32: with the float32 factor if the plan has one. */
static int solve_columns(dfm_system *s, int f32, double *p, char *err, size_t errlen) {
  uint32_t nf = s->nf;
  if (s->L->is_super) {
    int bad = dfm__sweep_solve3(s->L, s->plan, nf, s->rhs, p ? p : s->x, p ? s->col_vertex : NULL, s->work,
                                (dfm_v4 *)s->work + s->L->n, f32 && dfm__sweep_plan_has_f32(s->plan));
    return bad ? DFM_ENONFINITE : 0;
  }
  double *b = s->B->x;
  for (uint32_t k = 0; k < nf; k++)
    for (int d = 0; d < 3; d++) b[k + (size_t)d * nf] = s->rhs[k][d];
  if (!cholmod_l_solve2(CHOLMOD_A, s->L, s->B, NULL, &s->X, NULL, &s->Y, &s->E, &s->cc) ||
      s->cc.status < CHOLMOD_OK) {
    snprintf(err, errlen, "CHOLMOD solve failed (status %d)", s->cc.status);
    return s->cc.status == CHOLMOD_OUT_OF_MEMORY ? DFM_ENOMEM : DFM_ESOLVER;
  }
  memcpy(s->x, s->X->x, sizeof(double) * 3 * nf);
  return p ? scatter(s, p, 0) : 0;
}

typedef struct known_job {
  dfm_system *s;
  const double *x, *soft_target;
} known_job;

static void known_range(void *ctx, size_t lo, size_t hi) {
  const known_job *job = ctx;
  dfm_system *s = job->s;
  for (uint32_t k = (uint32_t)lo; k < (uint32_t)hi; k++) {
    double acc[3];
    dfm__known_rhs_row(s, job->x, job->soft_target, k, acc);
    s->rhs[k] = (dfm_v4){acc[0], acc[1], acc[2], 0};
  }
}

/* Right-hand side: coupling to known values x (positions or displacements) plus soft terms. */
static void known_rhs(dfm_system *s, const double *x, const double *soft_target) {
  known_job job = {s, x, soft_target};
  dfm_parallel_for(s->nf, dfm__grain(s->nf), known_range, &job);
}

static int scatter(dfm_system *s, double *p, int displacement) {
  const double *x = s->x;
  uint32_t nf = s->nf;
  for (uint32_t k = 0; k < nf; k++) {
    uint32_t v = s->free_vertex[k];
    for (int d = 0; d < 3; d++) {
      double val = x[k + (size_t)d * nf];
      if (!isfinite(val)) return DFM_ENONFINITE;
      p[3 * (size_t)v + d] = displacement ? s->rest[3 * (size_t)v + d] + val : val;
    }
  }
  return 0;
}

static int arap_iteration(dfm_system *s, const dfm_xform *xf, double *p, char *err, size_t errlen) {
  dfm__arap_local_step(s, p);
  if (s->nrot_fit < s->nrot) dfm__border_prescribe_rotations(s, xf);
  dfm__arap_rhs(s, p, s->soft_p);
  int rc = solve_columns(s, 1, p, err, errlen);
  if (rc == DFM_ENONFINITE) snprintf(err, errlen, "the ARAP solve produced non-finite positions");
  return rc;
}

/* Harmonic displacement of the free vertices for the knowns' motion (the Laplacian mode's
 * solve; ARAP's matrix is the same L, so it also gives ARAP its first starting point). */
static int harmonic(dfm_system *s, const dfm_xform *xf, int smooth, double *out, char *err, size_t errlen) {
  uint32_t n = s->n;
  double *d = s->disp;
  for (uint32_t i = 0; i < s->p.handle_count; i++) {
    uint32_t v = s->p.handle[i];
    double q[3];
    dfm_xform_apply(xf, s->rest + 3 * (size_t)v, q);
    for (int k = 0; k < 3; k++) d[3 * (size_t)v + k] = q[k] - s->rest[3 * (size_t)v + k];
  }
  memcpy(out, s->rest, sizeof(double) * 3 * n);
  place_known(s, xf, out);
  int rc = 0;
  if (s->nf) {
    known_rhs(s, d, s->soft_d);
    rc = solve_columns(s, 0, NULL, err, errlen);
    if (rc == 0 && smooth) dfm__border_shape_harmonic(s);
    if (rc == 0) rc = scatter(s, out, 1);
    if (rc == DFM_ENONFINITE) snprintf(err, errlen, "the %s solve produced non-finite positions", dfm_mode_name(s->p.mode));
  }
  return rc;
}

int dfm_system_solve(dfm_system *s, const dfm_xform *xf, double *out, char *err, size_t errlen) {
  if (s->mr) {
    int rc = dfm_system_solve(s->sub, xf, s->mr->io, err, errlen);
    if (rc == 0 && (rc = dfm__multires_embed(s->mr, xf, out)) != 0) snprintf(err, errlen, "the multiresolution embedding produced non-finite positions");
    return rc;
  }
  if (s->sub) {
    int rc = dfm_system_solve(s->sub, xf, s->sub_io, err, errlen);
    if (rc == 0) sub_scatter(s, out);
    return rc;
  }
  uint32_t n = s->n;
  if (s->p.mode != DFM_ARAP) return harmonic(s, xf, s->u != NULL, out, err, errlen);
  if (s->rigid) {
    /* Every free vertex has u = 1: the smooth border's result is the handle's rigid motion
     * whatever ARAP would say, so nothing is solved. */
    memcpy(out, s->rest, sizeof(double) * 3 * n);
    place_known(s, xf, out);
    for (uint32_t k = 0; k < s->nf; k++) dfm_xform_apply(xf, s->rest + 3 * (size_t)s->free_vertex[k], out + 3 * (size_t)s->free_vertex[k]);
    return 0;
  }
  /* ARAP warm-starts from the previous drag; the first drag starts from the harmonic
   * deformation, which is already exact for a pure translation of every constraint (with a
   * smooth border it is at hand without a solve). */
  double *p = s->current;
  int rc = 0;
  if (!s->have_current) {
    if (s->u) {
      memcpy(p, s->rest, sizeof(double) * 3 * n);
      place_known(s, xf, p);
      dfm__border_arap_start(s, xf, p);
    } else {
      rc = harmonic(s, xf, 0, p, err, errlen);
    }
  }
  if (rc) return rc;
  place_handles(s, xf, p); /* the other knowns are at rest in `current` since the harmonic start */
  for (int it = 0; rc == 0 && s->nf && it < s->p.iterations; it++) rc = arap_iteration(s, xf, p, err, errlen);
  if (rc == 0) {
    s->have_current = 1;
    memcpy(out, p, sizeof(double) * 3 * n);
    if (s->u) dfm__border_blend_arap(s, xf, p, out);
  } else {
    s->have_current = 0; /* do not warm-start from a failed solve */
  }
  return rc;
}

int dfm_system_arap_iterate(dfm_system *s, const dfm_xform *xf, double *io, char *err, size_t errlen) {
  if (s->p.mode != DFM_ARAP || s->mr) return DFM_EINVAL;
  if (s->sub) {
    sub_gather(s, io);
    int rc = dfm_system_arap_iterate(s->sub, xf, s->sub_io, err, errlen);
    if (rc == 0) sub_scatter(s, io);
    return rc;
  }
  place_known(s, xf, io);
  return s->nf ? arap_iteration(s, xf, io, err, errlen) : 0;
}

double dfm_system_arap_energy(dfm_system *s, const double *p, int refit_rotations) {
  if (s->p.mode != DFM_ARAP || s->mr) return NAN;
  if (s->sub) {
    sub_gather(s, p);
    return dfm_system_arap_energy(s->sub, s->sub_io, refit_rotations);
  }
  if (refit_rotations) dfm__arap_local_step(s, p);
  return dfm__arap_energy(s, p);
}
