/*
 * dfm_sweep.c — solving a supernodal Cholesky factor for three right-hand sides at once (the x, y
 * and z of a drag's free vertices): the forward and backward sweeps over CHOLMOD's supernodes,
 * and the plan that splits them over two threads. Why a solve of our own, and what it gained:
 * at dfm__sweep_solve3 and at struct solve_plan.
 *
 * DOES NOT analyse or factorise (dfm_system.c does, with CHOLMOD), solve simplicial factors
 * (CHOLMOD's own solve does), or allocate during a solve: the plan and the caller's work
 * vectors hold everything, so one solve at a time per plan.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "dfm_internal.h"

/* Splitting the two sweeps over two threads. In the supernodal elimination tree (postordered by
 * CHOLMOD, so a subtree is a contiguous range of supernodes), pick a node c on the heavy path from
 * the root: A = c's subtree, R = c's ancestors, B = everything else. A and B share no column and
 * each writes, besides its own columns, only the columns of R (a supernode's rows below its
 * triangle are columns of its ancestors). So the forward sweep runs A and B side by side, each
 * keeping its updates to R's columns apart, adds them, then runs R; the backward sweep runs R
 * first, then A and B side by side. c minimises weight(R) + max(weight(A), weight(B)), the
 * weight of a supernode being its factor entries. On the 41k sphere: R 17 %, A 45 %, B 38 %. */
struct solve_plan {
  uint32_t *nodes;   /* A's supernodes, then B's, then R's, each ascending */
  size_t na, nb, nr;
  uint32_t *rcol;    /* per slot: R's column */
  size_t rcols;
  size_t a_lo, a_hi; /* A's columns (a subtree's are contiguous): its thread gathers and
                      * scatters those, the other thread the rest */
  void *scratch;     /* second thread: rows of the tallest supernode; both threads: R's columns */
  size_t tallest;
  double *inv_diag;  /* per column: 1 / L's diagonal entry (a multiply on the sweeps' dependent
                      * chain instead of a division: the triangles of small supernodes waited
                      * on their divisions) */
  float *lx32;       /* L's values rounded to float32 (dfm__sweep_plan_f32), or NULL */
  int32_t *frow;     /* with two threads, indexed as L->s: the rows, those of R's columns as
                      * -1 - their slot, read in order by the forward pair (a look-up of the
                      * slot per row, at random, cost it 2-3 % of the solve on the dragon) */
};

int dfm__sweep_plan_threads(const solve_plan *p) { return p && p->na ? 2 : 1; }

int dfm__sweep_plan_f32(const cholmod_factor *L, solve_plan *p) {
  size_t count = (size_t)((const SuiteSparse_long *)L->px)[L->nsuper];
  if (p->lx32) return 0;
  p->lx32 = malloc(sizeof(float) * (count + 1));
  if (!p->lx32) return DFM_ENOMEM;
  const double *x = L->x;
  for (size_t i = 0; i < count; i++) p->lx32[i] = (float)x[i];
  return 0;
}

int dfm__sweep_plan_has_f32(const solve_plan *p) { return p && p->lx32; }

void dfm__sweep_plan_free(solve_plan *p) {
  if (!p) return;
  free(p->nodes);
  free(p->rcol);
  free(p->scratch);
  free(p->inv_diag);
  free(p->lx32);
  free(p->frow);
  free(p);
}

int dfm__sweep_plan_make(const cholmod_factor *L, solve_plan **out) {
  size_t ns = L->nsuper, n = L->n;
  const SuiteSparse_long *super = L->super, *pi = L->pi, *px = L->px, *rs = L->s;
  *out = NULL;
  SuiteSparse_long *col2s = malloc(sizeof(SuiteSparse_long) * (n + 1)), *parent = malloc(sizeof(SuiteSparse_long) * (ns + 1));
  double *w = calloc(ns + 1, sizeof(double));
  size_t *first = malloc(sizeof(size_t) * (ns + 1));
  uint8_t *cls = calloc(ns + 1, 1);
  int32_t *rmap = NULL; /* per column: its slot among R's columns, or -1 */
  solve_plan *p = calloc(1, sizeof(*p));
  int rc = DFM_ENOMEM;
  if (!col2s || !parent || !w || !first || !cls || !p) goto out;
  double total = 0;
  for (size_t k = 0; k < ns; k++) {
    size_t nsrow = (size_t)(pi[k + 1] - pi[k]);
    for (SuiteSparse_long c = super[k]; c < super[k + 1]; c++) col2s[c] = (SuiteSparse_long)k;
    if (nsrow > p->tallest) p->tallest = nsrow;
  }
  for (size_t k = 0; k < ns; k++) {
    size_t nscol = (size_t)(super[k + 1] - super[k]), nsrow = (size_t)(pi[k + 1] - pi[k]);
    parent[k] = nsrow > nscol ? col2s[rs[pi[k] + nscol]] : -1;
    first[k] = k;
    w[k] += (double)nsrow * nscol;
    total += (double)nsrow * nscol;
  }
  for (size_t k = 0; k < ns; k++) /* children come before parents */
    if (parent[k] >= 0) {
      w[parent[k]] += w[k];
      if (first[k] < first[parent[k]]) first[parent[k]] = first[k];
    }
  /* Down the heavy path from the heaviest root, for the best c. */
  SuiteSparse_long at = -1, best_c = -1;
  for (size_t k = 0; k < ns; k++)
    if (parent[k] < 0 && (at < 0 || w[k] > w[at])) at = (SuiteSparse_long)k;
  double path = 0, best = total;
  while (at >= 0) {
    path += (double)(size_t)(pi[at + 1] - pi[at]) * (size_t)(super[at + 1] - super[at]);
    SuiteSparse_long c1 = -1;
    for (size_t k = first[at]; k < (size_t)at; k++)
      if (parent[k] == at && (c1 < 0 || w[k] > w[c1])) c1 = (SuiteSparse_long)k;
    if (c1 < 0) break;
    double cost = path + fmax(w[c1], total - w[c1] - path);
    if (cost < best) best = cost, best_c = c1;
    at = c1;
  }
  /* Worth a second thread only for a real gain on a big enough factor. */
  if (best_c >= 0 && best < 0.8 * total && total > 2e5) {
    for (size_t k = 0; k < ns; k++) cls[k] = 2;
    for (size_t k = first[best_c]; k <= (size_t)best_c; k++) cls[k] = 1;
    for (SuiteSparse_long x = parent[best_c]; x >= 0; x = parent[x]) cls[x] = 0;
  } else {
    for (size_t k = 0; k < ns; k++) cls[k] = 0; /* one list, one thread */
  }
  p->nodes = malloc(sizeof(uint32_t) * (ns + 1));
  rmap = malloc(sizeof(int32_t) * (n + 1));
  if (!p->nodes || !rmap) goto out;
  for (int c = 1; c <= 3; c++) /* A (1), B (2), R (0, last) */
    for (size_t k = 0; k < ns; k++)
      if (cls[k] == c % 3) {
        p->nodes[p->na + p->nb + p->nr] = (uint32_t)k;
        if (c == 1) p->na++;
        else if (c == 2) p->nb++;
        else p->nr++;
      }
  for (size_t c = 0; c < n; c++) rmap[c] = -1;
  p->rcol = malloc(sizeof(uint32_t) * (n + 1));
  if (!p->rcol) goto out;
  if (p->na) {
    for (size_t k = 0; k < ns; k++)
      if (cls[k] == 0)
        for (SuiteSparse_long c = super[k]; c < super[k + 1]; c++) p->rcol[p->rcols] = (uint32_t)c, rmap[c] = (int32_t)p->rcols++;
    p->a_lo = (size_t)super[first[best_c]], p->a_hi = (size_t)super[best_c + 1];
    p->frow = malloc(sizeof(int32_t) * ((size_t)pi[ns] + 1));
    if (!p->frow) goto out;
    for (size_t e = 0; e < (size_t)pi[ns]; e++) p->frow[e] = rmap[rs[e]] >= 0 ? -1 - rmap[rs[e]] : (int32_t)rs[e];
  }
  p->scratch = aligned_alloc(32, 32 * (p->tallest + 2 * p->rcols + 1));
  p->inv_diag = malloc(sizeof(double) * (n + 1));
  if (!p->scratch || !p->inv_diag) goto out;
  for (size_t k = 0; k < ns; k++) {
    size_t nsrow = (size_t)(pi[k + 1] - pi[k]);
    const double *Lk = (const double *)L->x + px[k];
    for (size_t j = 0; j < (size_t)(super[k + 1] - super[k]); j++) p->inv_diag[super[k] + j] = 1.0 / Lk[j * nsrow + j];
  }
  *out = p;
  p = NULL;
  rc = 0;
out:
  dfm__sweep_plan_free(p);
  free(col2s), free(parent), free(w), free(first), free(cls), free(rmap);
  return rc;
}

/* One sweep over a list of supernodes (see dfm__sweep_solve3). Forward with `frow`: updates to a
 * column of R go to acc[its slot] (added later) instead of w. */
typedef struct sweep_job {
  const cholmod_factor *L;
  const float *lx32;     /* non-NULL: read the factor's values from this float32 copy */
  const double *inv_diag;
  dfm_v4 *w, *t, *acc;
  const int32_t *frow;    /* non-NULL: the plan's frow, updates to R's columns go to acc */
  const uint32_t *nodes;
  size_t count;
  int backward;
  struct permute_job *pj;       /* with two threads: gathers (forward) or scatters (backward) */
  size_t lo[2], hi[2];          /* these column ranges of P b / Pᵀ w itself */
} sweep_job;

/* Asks for the first 4 KB of the next supernode's factor values while this one is swept. The
 * blocks follow each other in memory, but they are short (1.6 KB on the dragon on average) and
 * swept backward in descending order, too little for the hardware's prefetcher to find streams
 * in. (Asking for the entries of w at its rows, gathered or scattered at random, gained
 * nothing.) */
static inline __attribute__((always_inline)) void sweep_prefetch(const sweep_job *job, size_t k, int f32) {
  const SuiteSparse_long *px = job->L->px;
  const char *at = f32 ? (const char *)(job->lx32 + px[k]) : (const char *)((const double *)job->L->x + px[k]);
  size_t bytes = (size_t)(px[k + 1] - px[k]) * (f32 ? sizeof(float) : sizeof(double));
  for (size_t o = 0; o < bytes && o < 4096; o += 64) __builtin_prefetch(at + o, 0, 3);
}

/* The sweep, for factor values of type double (f32 = 0) or float (f32 = 1); always inlined into
 * the two functions below, so each is compiled for its type with no test in the loops. The sums
 * are in double either way. */
#define LV(off) (f32 ? (double)Lkf[off] : Lkd[off])
static inline __attribute__((always_inline)) void sweep_body(const sweep_job *job, int f32) {
  const cholmod_factor *L = job->L;
  const SuiteSparse_long *super = L->super, *pi = L->pi, *px = L->px, *rs = L->s;
  const double *Lx = L->x;
  const float *Lx32 = job->lx32;
  dfm_v4 *w = job->w, *t = job->t;
  for (size_t q = 0; q < job->count; q++) {
    size_t k = job->nodes[job->backward ? job->count - 1 - q : q];
    if (q + 1 < job->count) sweep_prefetch(job, job->nodes[job->backward ? job->count - 2 - q : q + 1], f32);
    size_t k1 = (size_t)super[k], nscol = (size_t)(super[k + 1] - super[k]);
    size_t nsrow = (size_t)(pi[k + 1] - pi[k]), nbelow = nsrow - nscol;
    const double *Lkd = f32 ? NULL : Lx + px[k];
    const float *Lkf = f32 ? Lx32 + px[k] : NULL;
    const SuiteSparse_long *rows = rs + pi[k] + nscol;
    dfm_v4 *wk = w + k1;
    if (!job->backward) {
      /* Forward: L y = P b. The triangle, then the rows below, four columns at a time so each
       * pass over t does four columns' work. */
      for (size_t j = 0; j < nscol; j++) {
        size_t col = j * nsrow;
        dfm_v4 wj = wk[j] * job->inv_diag[k1 + j];
        wk[j] = wj;
        for (size_t i = j + 1; i < nscol; i++) wk[i] -= LV(col + i) * wj;
      }
      if (!nbelow) continue;
      for (size_t i = 0; i < nbelow; i++) t[i] = (dfm_v4){0, 0, 0, 0};
      size_t j = 0;
      for (; j + 4 <= nscol; j += 4) {
        size_t b0 = j * nsrow + nscol, b1 = b0 + nsrow, b2 = b1 + nsrow, b3 = b2 + nsrow;
        dfm_v4 w0 = wk[j], w1 = wk[j + 1], w2 = wk[j + 2], w3 = wk[j + 3];
        for (size_t i = 0; i < nbelow; i++)
          t[i] += (LV(b0 + i) * w0 + LV(b1 + i) * w1) + (LV(b2 + i) * w2 + LV(b3 + i) * w3);
      }
      for (; j < nscol; j++) {
        size_t b0 = j * nsrow + nscol;
        dfm_v4 w0 = wk[j];
        for (size_t i = 0; i < nbelow; i++) t[i] += LV(b0 + i) * w0;
      }
      if (job->frow) {
        const int32_t *fr = job->frow + pi[k] + nscol;
        for (size_t i = 0; i < nbelow; i++) {
          int32_t r = fr[i];
          if (r < 0) job->acc[-1 - r] += t[i];
          else w[r] -= t[i];
        }
      } else {
        for (size_t i = 0; i < nbelow; i++) w[rows[i]] -= t[i];
      }
      continue;
    }
    /* Backward: Lᵀ z = y. The rows below (four columns at a time, four independent sums), then
     * the triangle. */
    if (nbelow) {
      for (size_t i = 0; i < nbelow; i++) t[i] = w[rows[i]];
      size_t j = 0;
      for (; j + 4 <= nscol; j += 4) {
        size_t b0 = j * nsrow + nscol, b1 = b0 + nsrow, b2 = b1 + nsrow, b3 = b2 + nsrow;
        dfm_v4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = 0; i < nbelow; i++) {
          dfm_v4 ti = t[i];
          a0 += LV(b0 + i) * ti, a1 += LV(b1 + i) * ti, a2 += LV(b2 + i) * ti, a3 += LV(b3 + i) * ti;
        }
        wk[j] -= a0, wk[j + 1] -= a1, wk[j + 2] -= a2, wk[j + 3] -= a3;
      }
      for (; j < nscol; j++) {
        size_t b0 = j * nsrow + nscol;
        dfm_v4 a0 = {0, 0, 0, 0}, a1 = a0;
        size_t i = 0;
        for (; i + 2 <= nbelow; i += 2) a0 += LV(b0 + i) * t[i], a1 += LV(b0 + i + 1) * t[i + 1];
        if (i < nbelow) a0 += LV(b0 + i) * t[i];
        wk[j] -= a0 + a1;
      }
    }
    for (size_t j = nscol; j-- > 0;) {
      size_t col = j * nsrow;
      dfm_v4 a = wk[j], a1 = {0, 0, 0, 0}; /* two sums: one waits on the multiply-add's latency */
      size_t i = j + 1;
      for (; i + 2 <= nscol; i += 2) a -= LV(col + i) * wk[i], a1 += LV(col + i + 1) * wk[i + 1];
      if (i < nscol) a -= LV(col + i) * wk[i];
      wk[j] = (a - a1) * job->inv_diag[k1 + j];
    }
  }
}
#undef LV

__attribute__((target_clones("avx2", "default"))) static void sweep_f64(const sweep_job *job) { sweep_body(job, 0); }
__attribute__((target_clones("avx2", "default"))) static void sweep_f32(const sweep_job *job) { sweep_body(job, 1); }

static void sweep(const sweep_job *job) {
  if (job->lx32) sweep_f32(job);
  else sweep_f64(job);
}

/* Into and out of the factor's order: P b into w, and x = Pᵀ w. Random reads (or writes), 3-4 ms
 * a drag at the dragon's 435k unknowns on one thread when b and x were three columns each: with
 * two threads each sweep thread does its own columns' share, in the hand-offs the sweeps make
 * anyway. b is interleaved (one 32-byte read a column); x is three columns, or positions
 * (dfm__sweep_solve3's `vertex`: one 24-byte write a column, and no pass of its own after the
 * solve). */
typedef struct permute_job {
  const SuiteSparse_long *perm;
  size_t n; /* rows of b and x: A's columns from n on are padding (zero in, dropped out) */
  const dfm_v4 *b;
  double *x;
  const uint32_t *vertex; /* non-NULL: x is positions, factor column k's at x + 3 vertex[k] */
  dfm_v4 *w;
  atomic_int nonfinite;   /* set when a solution written to positions is not finite */
} permute_job;

/* Both read or write at random (the columns' order is the factor's): each asks for the rows 16
 * columns ahead while it moves this one. */
#define PERMUTE_AHEAD 16

static void gather_range(const permute_job *j, size_t lo, size_t hi) {
  const dfm_v4 zero = {0, 0, 0, 0};
  for (size_t k = lo; k < hi; k++) {
    if (k + PERMUTE_AHEAD < hi) {
      size_t a = (size_t)j->perm[k + PERMUTE_AHEAD];
      if (a < j->n) __builtin_prefetch(j->b + a, 0, 3);
    }
    size_t q = (size_t)j->perm[k];
    dfm_v4 v = q < j->n ? j->b[q] : zero;
    v[3] = 0; /* the spare lane stays zero whatever b holds there */
    j->w[k] = v;
  }
}

static void scatter_range(permute_job *j, size_t lo, size_t hi) {
  if (j->vertex) {
    int finite = 1;
    for (size_t k = lo; k < hi; k++) {
      if (k + PERMUTE_AHEAD < hi && j->vertex[k + PERMUTE_AHEAD] != UINT32_MAX)
        __builtin_prefetch(j->x + 3 * (size_t)j->vertex[k + PERMUTE_AHEAD], 1, 3);
      if (j->vertex[k] == UINT32_MAX) continue;
      double *o = j->x + 3 * (size_t)j->vertex[k];
      o[0] = j->w[k][0], o[1] = j->w[k][1], o[2] = j->w[k][2];
      finite &= isfinite(o[0]) & isfinite(o[1]) & isfinite(o[2]);
    }
    if (!finite) atomic_store_explicit(&j->nonfinite, 1, memory_order_relaxed);
    return;
  }
  for (size_t k = lo; k < hi; k++) {
    if (k + PERMUTE_AHEAD < hi) {
      size_t a = (size_t)j->perm[k + PERMUTE_AHEAD];
      if (a < j->n) __builtin_prefetch(j->x + a, 1, 3), __builtin_prefetch(j->x + a + j->n, 1, 3), __builtin_prefetch(j->x + a + 2 * j->n, 1, 3);
    }
    size_t q = (size_t)j->perm[k];
    if (q < j->n) j->x[q] = j->w[k][0], j->x[q + j->n] = j->w[k][1], j->x[q + 2 * j->n] = j->w[k][2];
  }
}

static void sweep_range(void *ctx, size_t lo, size_t hi) {
  const sweep_job *jobs = ctx;
  for (size_t i = lo; i < hi; i++) {
    const sweep_job *j = &jobs[i];
    if (j->pj && !j->backward)
      for (int r = 0; r < 2; r++) gather_range(j->pj, j->lo[r], j->hi[r]);
    sweep(j);
    if (j->pj && j->backward)
      for (int r = 0; r < 2; r++) scatter_range(j->pj, j->lo[r], j->hi[r]);
  }
}

/* Runs two sweeps side by side on the pool (one after the other when it is busy). */
static void sweep_pair(const sweep_job *a, const sweep_job *b) {
  sweep_job jobs[2] = {*a, *b};
  dfm_parallel_for(2, 1, sweep_range, jobs);
}

/* A X = B for the three columns of B with a supernodal LLᵀ = P A Pᵀ, all three at once.
 * CHOLMOD's own supernodal solve calls dtrsm/dgemm per supernode, which for three columns spends
 * its time packing and dispatching (docs/performance.md). Here each supernode's dense block is
 * read once per sweep in storage order, and the right-hand sides are interleaved four to a
 * vector (the fourth lane is zero), so one factor entry is one vector multiply-add (AVX2 or the
 * baseline, picked at load time). Big factors run their sweeps on two threads (solve_plan). */
int dfm__sweep_solve3(const cholmod_factor *L, const solve_plan *p, size_t nb, const dfm_v4 *b, double *x,
                      const uint32_t *vertex, dfm_v4 *w, dfm_v4 *t, int f32) {
  const float *lx = f32 ? p->lx32 : NULL;
  size_t n = L->n;
  permute_job pj = {L->Perm, nb, b, x, vertex, w, 0};
  const uint32_t *A = p->nodes, *B = A + p->na, *R = B + p->nb;
  dfm_v4 *t2 = p->scratch, *acc_a = t2 + p->tallest, *acc_b = acc_a + p->rcols;
  sweep_job r_fwd = {L, lx, p->inv_diag, w, t, NULL, NULL, R, p->nr, 0, NULL, {0, 0}, {0, 0}}, r_bwd = r_fwd;
  r_bwd.backward = 1;
  if (!p->na) {
    gather_range(&pj, 0, n);
    sweep(&r_fwd);
    sweep(&r_bwd);
    scatter_range(&pj, 0, n);
    return atomic_load(&pj.nonfinite);
  }
  for (size_t i = 0; i < 2 * p->rcols; i++) acc_a[i] = (dfm_v4){0, 0, 0, 0};
  /* A's thread moves A's columns in and out, B's thread everything else (R's included: the
   * forward pair only writes R's updates to acc, and R is swept before the backward pair). */
  sweep_job a = {L, lx, p->inv_diag, w, t, acc_a, p->frow, A, p->na, 0, &pj, {p->a_lo, 0}, {p->a_hi, 0}};
  sweep_job bj = {L, lx, p->inv_diag, w, t2, acc_b, p->frow, B, p->nb, 0, &pj, {0, p->a_hi}, {p->a_lo, n}};
  sweep_pair(&a, &bj);
  for (size_t i = 0; i < p->rcols; i++) w[p->rcol[i]] -= acc_a[i] + acc_b[i];
  sweep(&r_fwd);
  sweep(&r_bwd);
  a.backward = bj.backward = 1;
  a.acc = bj.acc = NULL, a.frow = bj.frow = NULL;
  sweep_pair(&a, &bj);
  return atomic_load(&pj.nonfinite);
}
