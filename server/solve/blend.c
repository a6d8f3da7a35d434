/*
 * blend.c — blendshape weight solves: pinned vertices (direct manipulation) and whole-shape fits.
 *
 * Both reduce to the same small bounded least-squares problem in normal-equation form,
 *
 *     min ½ wᵀH w − cᵀw   subject to  lo ≤ w ≤ hi,    H = BᵀB + λI,  c = Bᵀr + λ w0,
 *
 * solved by a primal active-set method (Nocedal & Wright, Numerical Optimization, §16.5,
 * specialised to bounds). H is positive definite (checked), so each equality-constrained step is a
 * Cholesky solve on the free weights and the method ends, in finitely many steps, at the unique
 * constrained minimiser, which satisfies the KKT conditions: gradient g = H w − c zero on free
 * weights, g ≥ 0 at a lower bound, g ≤ 0 at an upper one. The unconstrained minimiser comes first,
 * from the cached factor of H alone; only when it leaves the box does the active set run.
 *
 * Pins: B is 3P × S, built by a binary search of each pinned vertex in each solved target's
 * ascending index list. Fit: B would be 3V × S, so it is never formed: H comes from the targets'
 * overlaps (a vertex → targets transpose, then outer products per vertex) and c = Bᵀd from one pass
 * over the targets' entries.
 *
 * DOES NOT evaluate shapes for clients, know about sessions or threads, or compute the pins'
 * desired displacements (the caller does).
 */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blend.h"
#include "dfm.h"

/* Below this ratio of smallest to largest eigenvalue of the Jacobi-scaled H (λ = 0), the weights
 * are taken as not determined: the scaled B's condition number (the ratio's inverse square root)
 * passes 1e6, so the float rounding of the deltas alone (~6e-8) can move some combination of
 * weights by several percent, which is noise, not a solve. */
#define BLEND_EIG_RATIO_MIN 1e-12

/* The active-set method's cap: each iteration adds or releases one bound, and in exact arithmetic
 * no working set repeats, so a handful per weight is already generous. */
#define BLEND_ITER_PER_WEIGHT 20
#define BLEND_ITER_MIN 100

enum { QP_FREE = 0, QP_LO = 1, QP_HI = 2, QP_FIXED = 3 };

/* Scratch for one bounded solve over n weights (allocated once per pins handle). */
typedef struct qp_work {
  uint32_t n;
  double *lf;        /* n × n (leading dimension n): Cholesky factor of H_FF, F = free_i order */
  double *y;         /* n: the free sub-system's solution */
  double *v;         /* n: the column a factor update works on */
  double *x;         /* n: the iterate */
  double *b;         /* n: c − H_{:,W} x_W, the right-hand side with the bound weights moved over */
  double *sd;        /* n: sqrt(H_ii), for the gradient's rounding scale */
  double *g;         /* n: H x_F (bound weights zeroed), for the multipliers */
  uint32_t *free_i;  /* n: the free weights, in the factor's order */
  uint8_t *state;    /* n: QP_* */
  uint32_t updates;  /* factor updates since the last refactorisation */
} qp_work;

struct blend_pins {
  uint32_t S;           /* solved targets */
  uint32_t P;           /* pins */
  uint32_t rows;        /* 3P */
  double lambda;
  uint32_t *solved;     /* S target indices, ascending */
  double *B;            /* rows × S, column-major: column s is target solved[s] at the pins */
  double *H;            /* S × S, BᵀB + λI, both triangles */
  double *L;            /* S × S, Cholesky factor of H in the lower triangle */
  double *c;            /* S */
  double *resid;        /* rows */
  qp_work qp;
};

const char *blend_strerror(int code) {
  switch (code) {
    case 0: return "success";
    case BLEND_EINVAL: return "invalid blendshape solve parameters";
    case BLEND_ENONFINITE: return "a blendshape solve input is not a finite number";
    case BLEND_EUNMOVED: return "a pinned vertex is moved by no solved target";
    case BLEND_ESINGULAR: return "the blendshape weights are not determined";
    case BLEND_ELAPACK: return "LAPACK failed in a blendshape solve";
    case BLEND_EITER: return "the bounded blendshape solve did not converge";
    case BLEND_ENOMEM: return "out of memory";
    default: return "unknown error";
  }
}


static double us_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e6 + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-3;
}

/* ---- the bounded solver ------------------------------------------------------------------- */

static int qp_init(qp_work *q, uint32_t n) {
  memset(q, 0, sizeof(*q));
  q->n = n;
  q->lf = malloc((size_t)n * n * sizeof(double));
  q->y = malloc((size_t)n * 6 * sizeof(double));
  q->free_i = malloc((size_t)n * sizeof(uint32_t));
  q->state = malloc(n);
  if (!q->lf || !q->y || !q->free_i || !q->state) return BLEND_ENOMEM;
  q->v = q->y + n;
  q->x = q->y + 2 * (size_t)n;
  q->b = q->y + 3 * (size_t)n;
  q->sd = q->y + 4 * (size_t)n;
  q->g = q->y + 5 * (size_t)n;
  return 0;
}

static void qp_fini(qp_work *q) {
  free(q->lf);
  free(q->y);
  free(q->free_i);
  free(q->state);
  memset(q, 0, sizeof(*q));
}

/* Checks the weight-sized inputs of a solve: w0, lo, hi finite (each may be NULL), lo ≤ hi. */
static int check_weights(uint32_t n, const double *w0, const double *lo, const double *hi,
                         char *err, size_t errlen) {
  for (uint32_t i = 0; i < n; i++) {
    if (w0 && !isfinite(w0[i])) {
      dfm_set_err(err, errlen, "current weight %u is not a finite number (%g)", i, w0[i]);
      return BLEND_ENONFINITE;
    }
    if (lo && !isfinite(lo[i])) {
      dfm_set_err(err, errlen, "lower bound %u is not a finite number (%g); pass NULL for no bound", i, lo[i]);
      return BLEND_ENONFINITE;
    }
    if (hi && !isfinite(hi[i])) {
      dfm_set_err(err, errlen, "upper bound %u is not a finite number (%g); pass NULL for no bound", i, hi[i]);
      return BLEND_ENONFINITE;
    }
    if (lo && hi && lo[i] > hi[i]) {
      dfm_set_err(err, errlen, "weight %u: lower bound %g is above upper bound %g", i, lo[i], hi[i]);
      return BLEND_EINVAL;
    }
  }
  return 0;
}

/* Factorises H_FF for the first nf free weights from scratch. Returns LAPACK's info. */
static lapack_int qp_refactor(qp_work *q, const double *H, uint32_t nf) {
  const uint32_t n = q->n;
  for (uint32_t a = 0; a < nf; a++) {
    const double *hcol = H + (size_t)q->free_i[a] * n;
    for (uint32_t b = a; b < nf; b++) q->lf[(size_t)a * n + b] = hcol[q->free_i[b]];
  }
  q->updates = 0;
  return nf ? LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)nf, q->lf, (lapack_int)n) : 0;
}

/* Removes free position k (of nf) from the factor: rows and columns after k move up and left,
 * and the trailing block absorbs the removed column as a rank-one update (Givens-style, the
 * classic cholupdate), so L'L'ᵀ is H_FF without row and column k. O((nf − k)²). */
static void qp_drop(qp_work *q, uint32_t nf, uint32_t k) {
  const size_t ld = q->n;
  double *L = q->lf, *v = q->v;
  const uint32_t m = nf - 1 - k; /* size of the trailing block */
  for (uint32_t j = 0; j < k; j++)
    for (uint32_t i = k; i + 1 < nf; i++) L[i + ld * j] = L[i + 1 + ld * j];
  for (uint32_t t = 0; t < m; t++) v[t] = L[k + 1 + t + ld * k];
  for (uint32_t j = k; j + 1 < nf; j++)
    for (uint32_t i = j; i + 1 < nf; i++) L[i + ld * j] = L[i + 1 + ld * (j + 1)];
  for (uint32_t t = 0; t < m; t++) {
    double *col = L + (k + t) * ld;
    double d = col[k + t], r = sqrt(d * d + v[t] * v[t]), cs = r / d, sn = v[t] / d;
    col[k + t] = r;
    for (uint32_t i = t + 1; i < m; i++) {
      col[k + i] = (col[k + i] + sn * v[i]) / cs;
      v[i] = cs * v[i] - sn * col[k + i];
    }
  }
  memmove(q->free_i + k, q->free_i + k + 1, m * sizeof(uint32_t));
  q->updates++;
}

/* Appends weight j as free position nf: a forward substitution for its row of the factor.
 * Returns 0, or -1 when the new pivot is not safely positive (the caller refactorises). */
static int qp_append(qp_work *q, const double *H, uint32_t nf, uint32_t j) {
  const size_t ld = q->n;
  double *L = q->lf, *row = q->v;
  const double *hcol = H + (size_t)j * ld;
  for (uint32_t a = 0; a < nf; a++) row[a] = hcol[q->free_i[a]];
  if (nf) cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)nf, L, (int)ld, row, 1);
  double d2 = hcol[j];
  for (uint32_t a = 0; a < nf; a++) d2 -= row[a] * row[a];
  q->free_i[nf] = j;
  if (!(d2 > 1e-10 * hcol[j])) return -1;
  for (uint32_t a = 0; a < nf; a++) L[nf + ld * a] = row[a];
  L[nf + ld * nf] = sqrt(d2);
  q->updates++;
  return 0;
}

/* Minimises ½ xᵀH x − cᵀx over lo ≤ x ≤ hi (either may be NULL: unbounded), H positive
 * definite with Cholesky factor L (lower, column-major, both n × n). Writes the minimiser into x
 * (n), the iteration count and the number of weights on a bound. Allocates nothing.
 *
 * Each iteration either adds the first bound a step towards the free sub-problem's minimiser
 * hits, or, once that minimiser is feasible, frees the bound whose multiplier has the wrong sign
 * the most. The free sub-system's factor is updated in O(n²) per change rather than rebuilt. */
static int qp_solve(qp_work *q, const double *H, const double *L, const double *c,
                    const double *lo, const double *hi, double *x, int *iterations,
                    uint32_t *active, char *err, size_t errlen) {
  const uint32_t n = q->n;
  double *xi = q->x;
  *iterations = 0;
  *active = 0;

  /* The unconstrained minimiser: one back-substitution with the cached factor. */
  memcpy(xi, c, n * sizeof(double));
  lapack_int info = LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'L', (lapack_int)n, 1, L, (lapack_int)n,
                                        xi, (lapack_int)n);
  if (info != 0) {
    dfm_set_err(err, errlen, "LAPACK dpotrs failed (info %d)", (int)info);
    return BLEND_ELAPACK;
  }
  int inside = 1;
  for (uint32_t i = 0; i < n && inside; i++)
    inside = (!lo || xi[i] >= lo[i]) && (!hi || xi[i] <= hi[i]);
  if (inside) {
    for (uint32_t i = 0; i < n; i++) *active += (lo && xi[i] == lo[i]) || (hi && xi[i] == hi[i]);
    memcpy(x, xi, n * sizeof(double));
    return 0;
  }

  /* A feasible start: the unconstrained minimiser clamped, the clamped weights held at their
   * bounds. From here every step keeps the iterate feasible and lowers the objective. */
  uint8_t *st = q->state;
  uint32_t nf = 0;
  for (uint32_t i = 0; i < n; i++) {
    double l = lo ? lo[i] : -INFINITY, h = hi ? hi[i] : INFINITY;
    if (l == h) {
      st[i] = QP_FIXED;
      xi[i] = l;
    } else if (xi[i] < l) {
      st[i] = QP_LO;
      xi[i] = l;
    } else if (xi[i] > h) {
      st[i] = QP_HI;
      xi[i] = h;
    } else {
      st[i] = QP_FREE;
      q->free_i[nf++] = i;
    }
  }
  info = qp_refactor(q, H, nf);
  memcpy(q->b, c, n * sizeof(double));
  for (uint32_t j = 0; j < n; j++) {
    q->sd[j] = sqrt(H[(size_t)j * n + j]);
    if (st[j] != QP_FREE) cblas_daxpy((int)n, -xi[j], H + (size_t)j * n, 1, q->b, 1);
  }

  const int cap = (int)(BLEND_ITER_PER_WEIGHT * n) + BLEND_ITER_MIN;
  const double eps = 2.220446049250313e-16;
  for (int it = 1;; it++) {
    if (info != 0) {
      dfm_set_err(err, errlen, "LAPACK dpotrf failed on the %u free weights (info %d): the system is "
              "numerically singular; use regularization > 0", nf, (int)info);
      return BLEND_ELAPACK;
    }
    if (it > cap) {
      dfm_set_err(err, errlen,
              "the bounded solve did not settle in %d iterations over %u weights (bounds may be "
              "nearly degenerate; widen them or use regularization > 0)", cap, n);
      return BLEND_EITER;
    }
    *iterations = it;

    /* Minimise over the free weights with the others held: H_FF y = c_F − H_FW x_W. */
    if (nf > 0) {
      for (uint32_t a = 0; a < nf; a++) q->y[a] = q->b[q->free_i[a]];
      /* dpotrs with one right-hand side, as two triangular solves: LAPACK's goes through dtrsm
       * and costs several times more at this size. */
      cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)nf, q->lf, (int)n, q->y, 1);
      cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (int)nf, q->lf, (int)n, q->y, 1);

      /* Step towards y as far as the bounds allow; the first bound hit joins the working set.
       * A bound overshot by rounding only is not a block: the weight is clamped below. */
      double alpha = 1.0;
      uint32_t block = n;
      uint8_t block_state = QP_FREE;
      for (uint32_t a = 0; a < nf; a++) {
        uint32_t i = q->free_i[a];
        double yi = q->y[a];
        if (lo && yi < lo[i] - 1e-13 * (1.0 + fabs(lo[i]))) {
          double s = (lo[i] - xi[i]) / (yi - xi[i]);
          if (s < alpha) alpha = s, block = a, block_state = QP_LO;
        } else if (hi && yi > hi[i] + 1e-13 * (1.0 + fabs(hi[i]))) {
          double s = (hi[i] - xi[i]) / (yi - xi[i]);
          if (s < alpha) alpha = s, block = a, block_state = QP_HI;
        }
      }
      if (alpha < 0) alpha = 0;
      for (uint32_t a = 0; a < nf; a++) {
        uint32_t i = q->free_i[a];
        double v = block < n ? xi[i] + alpha * (q->y[a] - xi[i]) : q->y[a];
        if (lo && v < lo[i]) v = lo[i];
        if (hi && v > hi[i]) v = hi[i];
        xi[i] = v;
      }
      if (block < n) {
        uint32_t i = q->free_i[block];
        st[i] = block_state;
        xi[i] = block_state == QP_LO ? lo[i] : hi[i];
        cblas_daxpy((int)n, -xi[i], H + (size_t)i * n, 1, q->b, 1);
        qp_drop(q, nf, block);
        nf--;
        if (q->updates > n) info = qp_refactor(q, H, nf); /* bound the updates' drift */
        continue;
      }
    }

    /* y is feasible, so x minimises over this working set: check the bounds' multipliers (the
     * gradient's sign, g_W = H_WF x_F − b_W) and release the one most in the way. The tolerance
     * bounds the rounding of the gradient's terms: |H_ij| ≤ sqrt(H_ii H_jj) for H ⪰ 0. */
    double xs = 0;
    for (uint32_t j = 0; j < n; j++) {
      xs += q->sd[j] * fabs(xi[j]);
      q->v[j] = st[j] == QP_FREE ? xi[j] : 0.0;
    }
    cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)n, 1.0, H, (int)n, q->v, 1, 0.0, q->g, 1);
    uint32_t release = n;
    double worst = 0;
    for (uint32_t i = 0; i < n; i++) {
      if (st[i] != QP_LO && st[i] != QP_HI) continue;
      double gi = q->g[i] - q->b[i];
      double tol = 16.0 * (double)(n + 1) * eps * (fabs(c[i]) + q->sd[i] * xs);
      double v = st[i] == QP_LO ? -gi : gi; /* > 0: moving inwards lowers the objective */
      if (v > tol && v > worst) worst = v, release = i;
    }
    if (release == n) break;
    st[release] = QP_FREE;
    cblas_daxpy((int)n, xi[release], H + (size_t)release * n, 1, q->b, 1);
    if (qp_append(q, H, nf, release) != 0 || q->updates > n) {
      q->free_i[nf] = release;
      info = qp_refactor(q, H, nf + 1);
    }
    nf++;
  }

  for (uint32_t i = 0; i < n; i++) *active += st[i] != QP_FREE;
  memcpy(x, xi, n * sizeof(double));
  return 0;
}

/* ---- shared set-up ------------------------------------------------------------------------ */

/* Collects the solved targets' indices into a new array (*out, caller frees). */
static int solved_list(const mesh *m, const uint8_t *solved, uint32_t **out, uint32_t *count,
                       char *err, size_t errlen) {
  *out = NULL;
  *count = 0;
  uint32_t S = 0;
  for (uint32_t t = 0; t < m->target_count; t++) S += !solved || solved[t];
  if (S == 0) {
    dfm_set_err(err, errlen, m->target_count ? "no target is selected for solving"
                                         : "the mesh has no blendshape targets");
    return BLEND_EINVAL;
  }
  uint32_t *list = malloc(S * sizeof(uint32_t));
  if (!list) return BLEND_ENOMEM;
  S = 0;
  for (uint32_t t = 0; t < m->target_count; t++)
    if (!solved || solved[t]) list[S++] = t;
  *out = list;
  *count = S;
  return 0;
}

/* With λ = 0, decides whether H = BᵀB determines every weight, and if not says why: a target
 * with no column at all, or (from the eigen-decomposition of the Jacobi-scaled H) how many
 * independent combinations the data constrains and which targets it cannot tell apart.
 * `pins` is the pin count, or 0 for a fit. Returns 0, BLEND_ESINGULAR, BLEND_ELAPACK or
 * BLEND_ENOMEM. */
static int check_determined(const mesh *m, const uint32_t *solved, uint32_t S, const double *H,
                            uint32_t pins, char *err, size_t errlen) {
  for (uint32_t s = 0; s < S; s++) {
    if (H[(size_t)s * S + s] > 0) continue;
    if (pins)
      dfm_set_err(err, errlen, "target %u '%s' moves none of the pinned vertices, so the pins do not "
              "determine its weight; pin a vertex it moves, leave it out of the solve, or use "
              "regularization > 0", solved[s], m->targets[solved[s]].name);
    else
      dfm_set_err(err, errlen, "target %u '%s' moves no vertex, so the shape does not determine its "
              "weight; leave it out of the solve or use regularization > 0", solved[s],
              m->targets[solved[s]].name);
    return BLEND_ESINGULAR;
  }
  double *a = malloc(((size_t)S * S + 2 * (size_t)S) * sizeof(double));
  if (!a) return BLEND_ENOMEM;
  double *ev = a + (size_t)S * S, *d = ev + S;
  for (uint32_t s = 0; s < S; s++) d[s] = 1.0 / sqrt(H[(size_t)s * S + s]);
  for (uint32_t j = 0; j < S; j++)
    for (uint32_t i = 0; i < S; i++) a[(size_t)j * S + i] = d[i] * H[(size_t)j * S + i] * d[j];
  lapack_int info = LAPACKE_dsyev(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)S, a, (lapack_int)S, ev);
  int rc = 0;
  if (info != 0) {
    dfm_set_err(err, errlen, "LAPACK dsyev failed (info %d) checking that the weights are determined",
            (int)info);
    rc = BLEND_ELAPACK;
    goto out;
  }
  double top = ev[S - 1];
  uint32_t rank = 0;
  for (uint32_t s = 0; s < S; s++) rank += ev[s] > BLEND_EIG_RATIO_MIN * top;
  if (rank == S) goto out;

  /* The eigenvector of the smallest eigenvalue is the combination the data cannot see; its two
   * largest entries name a pair of targets to blame. */
  uint32_t i1 = 0, i2 = S > 1 ? 1 : 0;
  for (uint32_t s = 1; s < S; s++)
    if (fabs(a[s]) > fabs(a[i1])) i1 = s;
  if (i2 == i1) i2 = 0;
  for (uint32_t s = 0; s < S; s++)
    if (s != i1 && fabs(a[s]) > fabs(a[i2])) i2 = s;
  char pair[160] = "";
  if (S > 1 && (!pins || S <= 3 * pins)) /* with fewer equations than targets, any pair would do */
    snprintf(pair, sizeof(pair), " (it cannot tell '%s' from '%s')", m->targets[solved[i1]].name,
             m->targets[solved[i2]].name);
  if (pins)
    dfm_set_err(err, errlen, "under-determined: %u targets but the %u pins (%u equations) constrain "
            "only %u independent combinations of their weights%s; pin more vertices, solve fewer "
            "targets, or use regularization > 0", S, pins, 3 * pins, rank, pair);
  else
    dfm_set_err(err, errlen, "under-determined: the %u solved targets span only %u independent "
            "directions of the shape%s; solve fewer targets or use regularization > 0", S, rank,
            pair);
  rc = BLEND_ESINGULAR;
out:
  free(a);
  return rc;
}

/* Mirrors the lower triangle of H into the upper, adds λ on the diagonal, and factorises a copy
 * into L (after the λ = 0 determinacy check). */
static int finish_normal_matrix(const mesh *m, const uint32_t *solved, uint32_t S, double lambda,
                                uint32_t pins, double *H, double *L, char *err, size_t errlen) {
  for (uint32_t j = 0; j < S; j++)
    for (uint32_t i = j + 1; i < S; i++) H[(size_t)i * S + j] = H[(size_t)j * S + i];
  for (uint32_t s = 0; s < S; s++) H[(size_t)s * S + s] += lambda;
  if (lambda == 0) {
    int rc = check_determined(m, solved, S, H, pins, err, errlen);
    if (rc) return rc;
  }
  memcpy(L, H, (size_t)S * S * sizeof(double));
  lapack_int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)S, L, (lapack_int)S);
  if (info > 0) {
    dfm_set_err(err, errlen, "the normal equations are not positive definite at target %u '%s' "
            "(LAPACK dpotrf info %d); use a larger regularization", solved[info - 1],
            m->targets[solved[info - 1]].name, (int)info);
    return BLEND_ESINGULAR;
  }
  if (info < 0) {
    dfm_set_err(err, errlen, "LAPACK dpotrf failed (info %d)", (int)info);
    return BLEND_ELAPACK;
  }
  return 0;
}

static int check_lambda(double lambda, char *err, size_t errlen) {
  if (!isfinite(lambda)) {
    dfm_set_err(err, errlen, "regularization is not a finite number (%g)", lambda);
    return BLEND_ENONFINITE;
  }
  if (lambda < 0) {
    dfm_set_err(err, errlen, "regularization must be >= 0 (got %g)", lambda);
    return BLEND_EINVAL;
  }
  return 0;
}

/* ---- pins --------------------------------------------------------------------------------- */

int blend_pins_create(const mesh *m, const uint8_t *solved, const uint32_t *vertices,
                      uint32_t pin_count, double lambda, blend_pins **out, char *err,
                      size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (out) *out = NULL;
  if (!m || !out || (!vertices && pin_count)) {
    dfm_set_err(err, errlen, "missing mesh, vertices or output");
    return BLEND_EINVAL;
  }
  if (pin_count == 0) {
    dfm_set_err(err, errlen, "no pinned vertices");
    return BLEND_EINVAL;
  }
  if (pin_count > (uint32_t)INT32_MAX / 3) { /* 3 rows each, counted in BLAS's int */
    dfm_set_err(err, errlen, "too many pins (%u)", pin_count);
    return BLEND_EINVAL;
  }
  int rc = check_lambda(lambda, err, errlen);
  if (rc) return rc;
  for (uint32_t k = 0; k < pin_count; k++) {
    if (vertices[k] >= m->vertex_count) {
      dfm_set_err(err, errlen, "pin %u: vertex %u is out of range (the mesh has %u vertices)", k,
              vertices[k], m->vertex_count);
      return BLEND_EINVAL;
    }
  }

  blend_pins *p = calloc(1, sizeof(*p));
  if (!p) return BLEND_ENOMEM;
  rc = solved_list(m, solved, &p->solved, &p->S, err, errlen);
  if (rc) goto fail_pins;
  const uint32_t S = p->S;
  p->P = pin_count;
  p->rows = 3 * pin_count;
  p->lambda = lambda;
  p->B = calloc((size_t)p->rows * S, sizeof(double));
  p->H = malloc((size_t)S * S * sizeof(double));
  p->L = malloc((size_t)S * S * sizeof(double));
  p->c = malloc((size_t)S * sizeof(double));
  p->resid = malloc((size_t)p->rows * sizeof(double));
  rc = BLEND_ENOMEM;
  if (!p->B || !p->H || !p->L || !p->c || !p->resid) goto fail_arrays;
  rc = qp_init(&p->qp, S);
  if (rc) goto fail_qp;

  for (uint32_t s = 0; s < S; s++) {
    const mesh_target *t = &m->targets[p->solved[s]];
    double *col = p->B + (size_t)s * p->rows;
    for (uint32_t k = 0; k < pin_count; k++) {
      int64_t e = mesh_target_entry(t, vertices[k]);
      if (e < 0) continue;
      for (int c = 0; c < 3; c++) col[3 * k + c] = t->deltas[3 * e + c];
    }
  }
  for (uint32_t k = 0; k < pin_count; k++) {
    int moved = 0;
    for (uint32_t s = 0; s < S && !moved; s++)
      for (int c = 0; c < 3; c++) moved |= p->B[(size_t)s * p->rows + 3 * k + c] != 0;
    if (!moved) {
      dfm_set_err(err, errlen, "pin %u (vertex %u): no %starget moves this vertex, so no weights can "
              "move it", k, vertices[k], S < m->target_count ? "solved " : "");
      rc = BLEND_EUNMOVED;
      goto fail_qp;
    }
  }

  cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (int)S, (int)p->rows, 1.0, p->B, (int)p->rows,
              0.0, p->H, (int)S);
  rc = finish_normal_matrix(m, p->solved, S, lambda, pin_count, p->H, p->L, err, errlen);
  if (rc) goto fail_qp;
  *out = p;
  return 0;

fail_qp:
  qp_fini(&p->qp);
fail_arrays:
  free(p->resid);
  free(p->c);
  free(p->L);
  free(p->H);
  free(p->B);
  free(p->solved);
fail_pins:
  free(p);
  if (rc == BLEND_ENOMEM) dfm_set_err(err, errlen, "out of memory building the pins' system");
  return rc;
}

void blend_pins_destroy(blend_pins *p) {
  if (!p) return;
  qp_fini(&p->qp);
  free(p->resid);
  free(p->c);
  free(p->L);
  free(p->H);
  free(p->B);
  free(p->solved);
  free(p);
}

uint32_t blend_pins_solved_count(const blend_pins *p) { return p->S; }

const uint32_t *blend_pins_solved_targets(const blend_pins *p) { return p->solved; }

int blend_pins_solve(blend_pins *p, const double *r, const double *w0, const double *lo,
                     const double *hi, double *w, blend_result *res, char *err, size_t errlen) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (err && errlen) err[0] = '\0';
  if (!p || !r || !w) {
    dfm_set_err(err, errlen, "missing pins, displacements or output");
    return BLEND_EINVAL;
  }
  const uint32_t S = p->S;
  for (uint32_t i = 0; i < p->rows; i++) {
    if (!isfinite(r[i])) {
      dfm_set_err(err, errlen, "pin %u: desired displacement %c is not a finite number (%g)", i / 3,
              "xyz"[i % 3], r[i]);
      return BLEND_ENONFINITE;
    }
  }
  int rc = check_weights(S, w0, lo, hi, err, errlen);
  if (rc) return rc;

  cblas_dgemv(CblasColMajor, CblasTrans, (int)p->rows, (int)S, 1.0, p->B, (int)p->rows, r, 1, 0.0,
              p->c, 1);
  if (w0 && p->lambda > 0) cblas_daxpy((int)S, p->lambda, w0, 1, p->c, 1);

  int iterations;
  uint32_t active;
  rc = qp_solve(&p->qp, p->H, p->L, p->c, lo, hi, w, &iterations, &active, err, errlen);
  if (rc) return rc;

  if (res) {
    memcpy(p->resid, r, p->rows * sizeof(double));
    cblas_dgemv(CblasColMajor, CblasNoTrans, (int)p->rows, (int)S, 1.0, p->B, (int)p->rows, w, 1,
                -1.0, p->resid, 1);
    res->iterations = iterations;
    res->active = active;
    res->residual = cblas_dnrm2((int)p->rows, p->resid, 1);
    res->solve_us = us_since(&t0);
  }
  return 0;
}

/* ---- fit ---------------------------------------------------------------------------------- */

int blend_fit(const mesh *m, const uint8_t *solved, const float *displacement, double lambda,
              const double *w0, const double *lo, const double *hi, double *w,
              blend_fit_result *res, char *err, size_t errlen) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (err && errlen) err[0] = '\0';
  if (!m || !displacement || !w) {
    dfm_set_err(err, errlen, "missing mesh, displacement or output");
    return BLEND_EINVAL;
  }
  int rc = check_lambda(lambda, err, errlen);
  if (rc) return rc;
  const uint32_t V = m->vertex_count;
  for (size_t i = 0; i < 3 * (size_t)V; i++) {
    if (!isfinite(displacement[i])) {
      dfm_set_err(err, errlen, "displacement of vertex %zu (%c) is not a finite number", i / 3,
              "xyz"[i % 3]);
      return BLEND_ENONFINITE;
    }
  }

  uint32_t *list = NULL, S = 0;
  rc = solved_list(m, solved, &list, &S, err, errlen);
  if (rc) return rc;
  rc = check_weights(S, w0, lo, hi, err, errlen);
  if (rc) goto out_list;

  /* The vertex → solved targets transpose: entries of vertex v are [off[v], off[v+1]), in
   * ascending solved order (filled target by target). */
  size_t entries = 0;
  for (uint32_t s = 0; s < S; s++) entries += m->targets[list[s]].count;
  rc = BLEND_ENOMEM;
  uint32_t *off = calloc((size_t)V + 1, sizeof(uint32_t));
  if (!off) goto out_list;
  uint32_t *ent_s = malloc((entries ? entries : 1) * sizeof(uint32_t));
  if (!ent_s) goto out_off;
  const float **ent_d = malloc((entries ? entries : 1) * sizeof(*ent_d));
  if (!ent_d) goto out_ent_s;
  double *H = calloc((size_t)S * S * 2 + 2 * (size_t)S, sizeof(double));
  if (!H) goto out_ent_d;
  double *L = H + (size_t)S * S, *c = L + (size_t)S * S, *x = c + S;
  double *e = malloc(3 * (size_t)V * sizeof(double) + 1);
  if (!e) goto out_h;
  qp_work qp;
  rc = qp_init(&qp, S);
  if (rc) goto out_all; /* qp_fini frees what qp_init got */

  for (uint32_t s = 0; s < S; s++) {
    const mesh_target *t = &m->targets[list[s]];
    for (uint32_t k = 0; k < t->count; k++) off[t->indices[k] + 1]++;
  }
  for (uint32_t v = 0; v < V; v++) off[v + 1] += off[v];
  for (uint32_t s = 0; s < S; s++) { /* off[v] walks forward, then is shifted back below */
    const mesh_target *t = &m->targets[list[s]];
    for (uint32_t k = 0; k < t->count; k++) {
      uint32_t slot = off[t->indices[k]]++;
      ent_s[slot] = s;
      ent_d[slot] = t->deltas + 3 * (size_t)k;
    }
  }
  for (uint32_t v = V; v > 0; v--) off[v] = off[v - 1];
  off[0] = 0;

  /* H (lower triangle) from the overlaps at each vertex; c = Bᵀd from each target's entries. */
  for (uint32_t v = 0; v < V; v++) {
    for (uint32_t a = off[v]; a < off[v + 1]; a++) {
      const float *da = ent_d[a];
      double *hcol = H + (size_t)ent_s[a] * S;
      for (uint32_t b = a; b < off[v + 1]; b++) {
        const float *db = ent_d[b];
        hcol[ent_s[b]] += (double)da[0] * db[0] + (double)da[1] * db[1] + (double)da[2] * db[2];
      }
    }
  }
  for (uint32_t s = 0; s < S; s++) {
    const mesh_target *t = &m->targets[list[s]];
    double acc = 0;
    for (uint32_t k = 0; k < t->count; k++) {
      const float *dv = displacement + 3 * (size_t)t->indices[k], *dt = t->deltas + 3 * (size_t)k;
      acc += (double)dt[0] * dv[0] + (double)dt[1] * dv[1] + (double)dt[2] * dv[2];
    }
    c[s] = acc + (w0 ? lambda * w0[s] : 0.0);
  }
  rc = finish_normal_matrix(m, list, S, lambda, 0, H, L, err, errlen);
  if (rc) goto out_all;
  double assemble_ms = us_since(&t0) * 1e-3;

  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int iterations;
  uint32_t active;
  rc = qp_solve(&qp, H, L, c, lo, hi, x, &iterations, &active, err, errlen);
  if (rc) goto out_all;
  memcpy(w, x, S * sizeof(double));

  if (res) {
    for (size_t i = 0; i < 3 * (size_t)V; i++) e[i] = -(double)displacement[i];
    for (uint32_t s = 0; s < S; s++) {
      const mesh_target *t = &m->targets[list[s]];
      for (uint32_t k = 0; k < t->count; k++)
        for (int j = 0; j < 3; j++) e[3 * (size_t)t->indices[k] + j] += x[s] * t->deltas[3 * (size_t)k + j];
    }
    double sum = 0, worst = 0;
    uint32_t where = 0;
    for (uint32_t v = 0; v < V; v++) {
      double q2 = e[3 * v] * e[3 * v] + e[3 * v + 1] * e[3 * v + 1] + e[3 * v + 2] * e[3 * v + 2];
      sum += q2;
      if (q2 > worst) worst = q2, where = v;
    }
    res->iterations = iterations;
    res->active = active;
    res->rms = V ? sqrt(sum / V) : 0.0;
    res->max_error = sqrt(worst);
    res->max_vertex = where;
    res->assemble_ms = assemble_ms;
    res->solve_ms = us_since(&t1) * 1e-3;
  }

out_all:
  qp_fini(&qp);
  free(e);
out_h:
  free(H);
out_ent_d:
  free(ent_d);
out_ent_s:
  free(ent_s);
out_off:
  free(off);
out_list:
  free(list);
  if (rc == BLEND_ENOMEM && err && !err[0]) dfm_set_err(err, errlen, "out of memory fitting the shape");
  return rc;
}
