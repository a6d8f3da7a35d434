/*
 * pca.c — PCA compression of vertex animations (see pca.h).
 *
 * X is the F × 3V matrix of centred frames (frame f minus the mean shape), in double. Its
 * singular value decomposition X = Σ σ_i a_i b_iᵀ gives the components b_i (unit rows of 3V) and
 * each frame's weights w_fi = x_f · b_i. Two ways to get it:
 *
 *   Gram   G = X Xᵀ (F × F, dsyrk), eigenpairs (λ_i, a_i) by dsyevr, σ_i = √λ_i, b_i = Xᵀ a_i / σ_i,
 *          then one QR pass (dgeqrf/dorgqr) restores the orthonormality that the division by
 *          small σ_i loses. Cheap when F is small next to 3V, the usual clip (198 frames of
 *          thousands of vertices). Squaring the matrix halves the digits of the small σ_i.
 *   SVD    dgesdd on X directly, for clips with more frames than coordinates.
 *
 * Rank: singular values at or below max(noise, precision) are not data. `noise` is the spectral
 * norm that rounding the input positions to float can create, FLT_EPSILON · max|p| · (√F + √3V)
 * (a few times the expected norm of uniform rounding noise); `precision` is the decomposition's
 * own: (F, 3V) · DBL_EPSILON · σ_1 for the SVD, √((F + √3V) · DBL_EPSILON) · σ_1 · 2 for the
 * Gram matrix (its eigenvalues carry absolute errors of about that many ε · σ_1²).
 *
 * Errors by count: the vertex error is not monotone in theory (projecting out one more direction
 * shrinks each frame's total residual but may move some of it onto a vertex), so every count is
 * measured, not bisected. One pass per vertex: its F × 3 residual starts as the centred
 * positions, and for k = 0 .. rank we take the largest and summed squared error over the frames,
 * then subtract w_k b_k restricted to that vertex. O(F · V · rank), the cost of forming the
 * components; vertices are spread over dfm_pool's threads.
 *
 * DOES NOT quantise, encode or stream weights; the server does.
 */
#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pca.h"
#include "dfm.h"

/* Reconstructions run over blocks of this many coordinates (85 vertices) with a double
 * accumulator on the stack: one sequential sweep per component, no allocation. */
#define PCA_BLOCK 255

const char *pca_strerror(int code) {
  switch (code) {
    case 0: return "success";
    case PCA_EINVAL: return "invalid PCA arguments";
    case PCA_ENONFINITE: return "non-finite value in the animation frames";
    case PCA_ENOMEM: return "out of memory";
    case PCA_ELAPACK: return "the LAPACK decomposition failed";
    case PCA_ETOOBIG: return "animation too big for LAPACK's 32-bit dimensions";
    default: return "unknown error";
  }
}


static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* LAPACKE's own negative codes for failed work or transpose allocations are out-of-memory, not a
 * bad argument of ours. */
static int lapack_fail(const char *routine, lapack_int info, const char *why, char *err,
                       size_t errlen) {
  if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR) {
    dfm_set_err(err, errlen, "%s: out of memory for its workspace", routine);
    return PCA_ENOMEM;
  }
  if (info < 0)
    dfm_set_err(err, errlen, "%s: argument %d had an illegal value (a bug in pca.c)", routine,
            (int)-info);
  else
    dfm_set_err(err, errlen, "%s: info %d: %s", routine, (int)info, why);
  return PCA_ELAPACK;
}

static int check_finite(const float *frames, uint32_t F, uint32_t V, char *err, size_t errlen) {
  size_t D = 3 * (size_t)V;
  for (uint32_t f = 0; f < F; f++) {
    const float *p = frames + D * f;
    for (size_t d = 0; d < D; d++)
      if (!isfinite(p[d])) {
        dfm_set_err(err, errlen, "frame %u vertex %zu has a non-finite coordinate (%s = %g)", f,
                d / 3, d % 3 == 0 ? "x" : d % 3 == 1 ? "y" : "z", (double)p[d]);
        return PCA_ENONFINITE;
      }
  }
  return 0;
}

static int check_args(const float *frames, uint32_t F, uint32_t V, const pca_options *opt,
                      char *err, size_t errlen) {
  if (!opt) {
    dfm_set_err(err, errlen, "no options given");
    return PCA_EINVAL;
  }
  if (!frames || F < 1) {
    dfm_set_err(err, errlen, "the clip has no frames");
    return PCA_EINVAL;
  }
  if (V == 0) {
    dfm_set_err(err, errlen, "the clip has no vertices");
    return PCA_EINVAL;
  }
  if (opt->method != PCA_AUTO && opt->method != PCA_GRAM && opt->method != PCA_SVD) {
    dfm_set_err(err, errlen, "unknown method %d (0 auto, 1 Gram, 2 SVD)", opt->method);
    return PCA_EINVAL;
  }
  /* Checked even when components decide: a NaN here is a caller's bug worth hearing about. */
  if (isnan(opt->max_error) || opt->max_error < 0) {
    dfm_set_err(err, errlen, "max_error must be a distance >= 0, not %g", opt->max_error);
    return PCA_EINVAL;
  }
  if (opt->components == 0 && opt->max_error == 0) {
    dfm_set_err(err, errlen, "set components (> 0) or max_error (> 0): both are zero");
    return PCA_EINVAL;
  }
  /* lapack_int is 32 bits: every dimension and leading dimension must fit, and F × 3V doubles
   * must fit size_t with room for a second copy. */
  if ((uint64_t)3 * V > INT_MAX || F > INT_MAX ||
      (double)F * 3.0 * V > (double)(SIZE_MAX / (4 * sizeof(double)))) {
    dfm_set_err(err, errlen, "%u frames of %u vertices exceed LAPACK's 32-bit dimensions", F, V);
    return PCA_ETOOBIG;
  }
  return 0;
}

/* xt (3V × F column-major = F rows of 3V) = frames - mean. Returns max |p| over the frames. */
static double centre(const float *frames, uint32_t F, size_t D, const double *mean, double *xt) {
  double max_abs = 0;
  for (uint32_t f = 0; f < F; f++) {
    const float *p = frames + D * f;
    double *x = xt + D * f;
    for (size_t d = 0; d < D; d++) {
      x[d] = (double)p[d] - mean[d];
      double a = fabs((double)p[d]);
      if (a > max_abs) max_abs = a;
    }
  }
  return max_abs;
}

/* Flips each basis column so that its largest-magnitude entry is positive: the sign of a
 * singular vector is arbitrary, and this makes the two methods (and reruns) agree. */
static void fix_signs(double *b, size_t D, uint32_t r) {
  for (uint32_t k = 0; k < r; k++) {
    double *col = b + D * k, big = 0;
    for (size_t d = 0; d < D; d++)
      if (fabs(col[d]) > fabs(big)) big = col[d];
    if (big < 0)
      for (size_t d = 0; d < D; d++) col[d] = -col[d];
  }
}

/* The Gram path: fills sv (n_sv, descending) and, once the rank is known from them, the basis
 * b (3V × rank column-major). *rank_out gets the rank found with tolerance from *tol_inout
 * (the noise part; the precision part is added here). */
static int gram_decompose(double *xt, uint32_t F, size_t D, uint32_t n_sv, double *sv,
                          double *tol_inout, uint32_t *rank_out, double **b_out, char *err,
                          size_t errlen) {
  int rc = 0;
  lapack_int info, found = 0;
  double *g = NULL, *w = NULL, *z = NULL, *zsel = NULL, *b = NULL, *tau = NULL;
  lapack_int *isuppz = NULL;
  uint32_t r = 0;

  g = malloc(sizeof(double) * F * F);
  if (!g) goto nomem;
  cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, (int)F, (int)D, 1.0, xt, (int)D, 0.0, g,
              (int)F);
  w = malloc(sizeof(double) * F);
  z = malloc(sizeof(double) * F * F);
  isuppz = malloc(sizeof(lapack_int) * 2 * F);
  if (!w || !z || !isuppz) goto nomem;
  info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'A', 'U', (lapack_int)F, g, (lapack_int)F, 0, 0, 0,
                        0, LAPACKE_dlamch('S'), &found, w, z, (lapack_int)F, isuppz);
  if (info != 0) {
    rc = lapack_fail("dsyevr", info, "the eigenvalue iteration did not converge", err, errlen);
    goto cleanup;
  }
  if ((uint32_t)found != F) {
    dfm_set_err(err, errlen, "dsyevr: found %d of %u eigenvalues", (int)found, F);
    rc = PCA_ELAPACK;
    goto cleanup;
  }
  /* Ascending eigenvalues; tiny negative ones are rounding of zeros. */
  for (uint32_t i = 0; i < n_sv; i++) {
    double l = w[F - 1 - i];
    sv[i] = l > 0 ? sqrt(l) : 0;
  }
  double precision = 2.0 * sqrt(((double)F + sqrt((double)D)) * DBL_EPSILON) * sv[0];
  if (precision > *tol_inout) *tol_inout = precision;
  while (r < n_sv && sv[r] > *tol_inout) r++;
  if (r > 0) {
    zsel = malloc(sizeof(double) * F * r);
    b = malloc(sizeof(double) * D * r);
    tau = malloc(sizeof(double) * r);
    if (!zsel || !b || !tau) goto nomem;
    for (uint32_t i = 0; i < r; i++) {
      const double *col = z + (size_t)F * (F - 1 - i);
      for (uint32_t f = 0; f < F; f++) zsel[(size_t)F * i + f] = col[f] / sv[i];
    }
    /* b_i = Xᵀ a_i / σ_i */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)r, (int)F, 1.0, xt,
                (int)D, zsel, (int)F, 0.0, b, (int)D);
    info = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)D, (lapack_int)r, b, (lapack_int)D, tau);
    if (info != 0) {
      rc = lapack_fail("dgeqrf", info, "QR of the components failed", err, errlen);
      goto cleanup;
    }
    /* Q's columns carry the sign of R's diagonal: keep each component's orientation (zsel is
     * no longer needed, its first r entries hold the signs). */
    for (uint32_t i = 0; i < r; i++) zsel[i] = b[D * i + i] < 0 ? -1.0 : 1.0;
    info = LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)D, (lapack_int)r, (lapack_int)r, b,
                          (lapack_int)D, tau);
    if (info != 0) {
      rc = lapack_fail("dorgqr", info, "forming Q of the components failed", err, errlen);
      goto cleanup;
    }
    for (uint32_t i = 0; i < r; i++)
      if (zsel[i] < 0)
        for (size_t d = 0; d < D; d++) b[D * i + d] = -b[D * i + d];
  }
  *rank_out = r;
  *b_out = b;
  b = NULL;
  goto cleanup;
nomem:
  dfm_set_err(err, errlen, "out of memory for the %u × %u Gram matrix and its eigenvectors", F, F);
  rc = PCA_ENOMEM;
cleanup:
  free(tau);
  free(b);
  free(zsel);
  free(isuppz);
  free(z);
  free(w);
  free(g);
  return rc;
}

/* The SVD path: dgesdd on Xᵀ (3V × F column-major), whose left singular vectors are the
 * components. Destroys xt (the caller refills it). Same outputs as gram_decompose. */
static int svd_decompose(double *xt, uint32_t F, size_t D, uint32_t n_sv, double *sv,
                         double *tol_inout, uint32_t *rank_out, double **b_out, char *err,
                         size_t errlen) {
  int rc = 0;
  double *u = malloc(sizeof(double) * D * n_sv), *vt = malloc(sizeof(double) * n_sv * F);
  uint32_t r = 0;
  if (!u || !vt) {
    dfm_set_err(err, errlen, "out of memory for the singular vectors (%zu × %u)", D, n_sv);
    rc = PCA_ENOMEM;
    goto cleanup;
  }
  lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (lapack_int)D, (lapack_int)F, xt,
                                   (lapack_int)D, sv, u, (lapack_int)D, vt, (lapack_int)n_sv);
  if (info != 0) {
    rc = lapack_fail("dgesdd", info, "the bidiagonal SVD (dbdsdc) did not converge", err, errlen);
    goto cleanup;
  }
  double precision = (double)(F > D ? F : D) * DBL_EPSILON * sv[0];
  if (precision > *tol_inout) *tol_inout = precision;
  while (r < n_sv && sv[r] > *tol_inout) r++;
  *rank_out = r;
  /* The first r columns of u are the basis; shrink the array to them. */
  if (r == 0) {
    free(u);
    u = NULL;
  } else if (r < n_sv) {
    double *shrunk = realloc(u, sizeof(double) * D * r);
    if (shrunk) u = shrunk;
  }
  *b_out = u;
  u = NULL;
cleanup:
  free(vt);
  free(u);
  return rc;
}

typedef struct errors_job {
  const float *frames;
  uint32_t F, V, r;
  const double *mean, *b, *wc;
  double *max2, *sum2; /* merged under `lock` */
  pthread_mutex_t lock;
  int failed;
} errors_job;

/* The vertices [lo, hi): their errors per component count, merged into the job's totals. */
static void errors_range(void *ctx, size_t lo, size_t hi) {
  errors_job *job = ctx;
  const uint32_t F = job->F, r = job->r;
  const size_t D = 3 * (size_t)job->V;
  double *res = malloc(sizeof(double) * 3 * F); /* x, y, z residuals: F each */
  double *lmax = calloc((size_t)r + 1, sizeof(double));
  double *lsum = calloc((size_t)r + 1, sizeof(double));
  int ok = res && lmax && lsum;
  for (size_t v = lo; ok && v < hi; v++) {
    size_t o = 3 * v;
    double *rx = res, *ry = res + F, *rz = res + 2 * (size_t)F;
    double mx = 0, sm = 0;
    for (uint32_t f = 0; f < F; f++) {
      const float *p = job->frames + D * f + o;
      rx[f] = (double)p[0] - job->mean[o];
      ry[f] = (double)p[1] - job->mean[o + 1];
      rz[f] = (double)p[2] - job->mean[o + 2];
      double e = rx[f] * rx[f] + ry[f] * ry[f] + rz[f] * rz[f];
      sm += e;
      mx = e > mx ? e : mx;
    }
    lmax[0] = mx > lmax[0] ? mx : lmax[0];
    lsum[0] += sm;
    /* Subtract component k and measure in one sweep (vectorised: the reductions may be
     * reordered, which changes sm in its last bits only). */
    for (uint32_t k = 0; k < r; k++) {
      const double *bk = job->b + D * k + o, *wk = job->wc + (size_t)F * k;
      double bx = bk[0], by = bk[1], bz = bk[2];
      mx = 0;
      sm = 0;
#if !defined(__clang__) /* clang 14 cannot vectorise the max reduction and says so (-Wpass-failed) */
#pragma omp simd reduction(+ : sm) reduction(max : mx)
#endif
      for (uint32_t f = 0; f < F; f++) {
        rx[f] -= wk[f] * bx;
        ry[f] -= wk[f] * by;
        rz[f] -= wk[f] * bz;
        double e = rx[f] * rx[f] + ry[f] * ry[f] + rz[f] * rz[f];
        sm += e;
        mx = e > mx ? e : mx;
      }
      lmax[k + 1] = mx > lmax[k + 1] ? mx : lmax[k + 1];
      lsum[k + 1] += sm;
    }
  }
  pthread_mutex_lock(&job->lock);
  if (ok) {
    for (uint32_t k = 0; k <= r; k++) {
      if (lmax[k] > job->max2[k]) job->max2[k] = lmax[k];
      job->sum2[k] += lsum[k];
    }
  } else {
    job->failed = 1;
  }
  pthread_mutex_unlock(&job->lock);
  free(lsum);
  free(lmax);
  free(res);
}

/* max2[k] and sum2[k] (k = 0 .. r): the largest and the summed squared vertex error over all
 * frames when keeping k components, from the double basis b (3V × r) and weights wc (F × r,
 * column-major). Runs on dfm_pool (a chunk of vertices per call, buffers per chunk). Returns 0
 * or PCA_ENOMEM. */
static int errors_by_count(const float *frames, uint32_t F, uint32_t V, const double *mean,
                           const double *b, const double *wc, uint32_t r, double *max2,
                           double *sum2) {
  for (uint32_t k = 0; k <= r; k++) max2[k] = sum2[k] = 0;
  errors_job job = {.frames = frames, .F = F, .V = V, .r = r, .mean = mean, .b = b, .wc = wc, .max2 = max2, .sum2 = sum2};
  if (pthread_mutex_init(&job.lock, NULL) != 0) return PCA_ENOMEM;
  size_t grain = V / (8 * (size_t)dfm_pool_threads()) + 1;
  dfm_parallel_for(V, grain < 64 ? 64 : grain, errors_range, &job);
  pthread_mutex_destroy(&job.lock);
  return job.failed ? PCA_ENOMEM : 0;
}

/* Stores the first K components and their weights as float in m (replacing earlier arrays) and
 * measures the stored reconstruction over all frames. */
static int store_floats(pca_model *m, const float *frames, const double *b, const double *wc,
                        uint32_t K) {
  uint32_t F = m->frame_count;
  size_t D = 3 * (size_t)m->vertex_count;
  free(m->basis);
  free(m->weights);
  m->basis = NULL;
  m->weights = NULL;
  m->components = K;
  if (K > 0) {
    m->basis = malloc(sizeof(float) * D * K);
    m->weights = malloc(sizeof(float) * F * K);
    if (!m->basis || !m->weights) return PCA_ENOMEM;
    for (size_t i = 0; i < D * K; i++) m->basis[i] = (float)b[i];
    for (uint32_t f = 0; f < F; f++)
      for (uint32_t k = 0; k < K; k++) m->weights[(size_t)K * f + k] = (float)wc[(size_t)F * k + f];
  }
  double sum2 = 0, mx = 0;
  for (uint32_t f = 0; f < F; f++) {
    double rms, max;
    pca_frame_error(m, frames + D * f, m->weights ? m->weights + (size_t)K * f : NULL, &rms, &max);
    sum2 += rms * rms;
    if (max > mx) mx = max;
  }
  m->rms_error = sqrt(sum2 / F);
  m->max_error = mx;
  return 0;
}

int pca_build(const float *frames, uint32_t frame_count, uint32_t vertex_count,
              const pca_options *opt, pca_model *out, char *err, size_t errlen) {
  double t0 = now_ms();
  if (!out) {
    dfm_set_err(err, errlen, "no output model");
    return PCA_EINVAL;
  }
  memset(out, 0, sizeof(*out));
  int rc = check_args(frames, frame_count, vertex_count, opt, err, errlen);
  if (rc == 0) rc = check_finite(frames, frame_count, vertex_count, err, errlen);
  if (rc != 0) return rc;

  uint32_t F = frame_count, V = vertex_count, r = 0;
  size_t D = 3 * (size_t)V;
  uint32_t n_sv = F < D ? F : (uint32_t)D;
  int method = opt->method != PCA_AUTO ? opt->method : (F <= D ? PCA_GRAM : PCA_SVD);
  double *mean = NULL, *xt = NULL, *b = NULL, *wc = NULL, *max2 = NULL, *sum2 = NULL;
  pca_model *m = out;
  m->frame_count = F;
  m->vertex_count = V;
  m->method = method;
  m->requested = opt->components;
  m->singular_count = n_sv;

  mean = calloc(D, sizeof(double));
  xt = malloc(sizeof(double) * D * F);
  m->mean = malloc(sizeof(float) * D);
  m->singular_values = calloc(n_sv, sizeof(double));
  if (!mean || !xt || !m->mean || !m->singular_values) goto nomem;
  for (uint32_t f = 0; f < F; f++)
    for (size_t d = 0; d < D; d++) mean[d] += (double)frames[D * f + d];
  for (size_t d = 0; d < D; d++) {
    mean[d] /= F;
    m->mean[d] = (float)mean[d];
  }
  double max_abs = centre(frames, F, D, mean, xt);
  double tol = FLT_EPSILON * max_abs * (sqrt((double)F) + sqrt((double)D));

  if (method == PCA_GRAM)
    rc = gram_decompose(xt, F, D, n_sv, m->singular_values, &tol, &r, &b, err, errlen);
  else
    rc = svd_decompose(xt, F, D, n_sv, m->singular_values, &tol, &r, &b, err, errlen);
  if (rc != 0) goto fail;
  if (method == PCA_SVD) centre(frames, F, D, mean, xt); /* dgesdd destroyed it */
  m->rank = r;
  m->rank_tolerance = tol;

  /* Weights: the projection of every centred frame on every component, wc = X B (F × r). */
  if (r > 0) {
    fix_signs(b, D, r);
    wc = malloc(sizeof(double) * F * r);
    if (!wc) goto nomem;
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)F, (int)r, (int)D, 1.0, xt, (int)D,
                b, (int)D, 0.0, wc, (int)F);
  }
  free(xt);
  xt = NULL;

  max2 = malloc(sizeof(double) * (r + 1));
  sum2 = malloc(sizeof(double) * (r + 1));
  m->max_error_by_count = malloc(sizeof(double) * (r + 1));
  m->rms_error_by_count = malloc(sizeof(double) * (r + 1));
  if (!max2 || !sum2 || !m->max_error_by_count || !m->rms_error_by_count) goto nomem;
  if (errors_by_count(frames, F, V, mean, b, wc, r, max2, sum2) != 0) goto nomem;
  for (uint32_t k = 0; k <= r; k++) {
    m->max_error_by_count[k] = sqrt(max2[k]);
    m->rms_error_by_count[k] = sqrt(sum2[k] / ((double)F * V));
  }

  uint32_t K;
  if (opt->components > 0) {
    K = opt->components < r ? opt->components : r;
    m->clamped = opt->components > r;
  } else {
    for (K = 0; K < r && m->max_error_by_count[K] > opt->max_error; K++) {}
  }
  if (store_floats(m, frames, b, wc, K) != 0) goto nomem;
  /* Float rounding of the stored arrays may push a count that met the budget in double just
   * over it: take the next one. */
  while (opt->components == 0 && m->max_error > opt->max_error && K < r)
    if (store_floats(m, frames, b, wc, ++K) != 0) goto nomem;
  m->budget_met = opt->components > 0 || m->max_error <= opt->max_error;
  m->build_ms = now_ms() - t0;
  goto cleanup;

nomem:
  dfm_set_err(err, errlen, "out of memory compressing %u frames of %u vertices", F, V);
  rc = PCA_ENOMEM;
fail:
  pca_fini(m);
cleanup:
  free(sum2);
  free(max2);
  free(wc);
  free(b);
  free(xt);
  free(mean);
  return rc;
}

void pca_fini(pca_model *m) {
  if (!m) return;
  free(m->mean);
  free(m->basis);
  free(m->weights);
  free(m->max_error_by_count);
  free(m->rms_error_by_count);
  free(m->singular_values);
  memset(m, 0, sizeof(*m));
}

void pca_project(const pca_model *m, const float *shape, float *weights) {
  size_t D = 3 * (size_t)m->vertex_count;
  for (uint32_t k = 0; k < m->components; k++) {
    const float *bk = m->basis + D * k;
    double s = 0;
    for (size_t d = 0; d < D; d++) s += (double)bk[d] * ((double)shape[d] - (double)m->mean[d]);
    weights[k] = (float)s;
  }
}

/* acc[0 .. n) = mean + Σ w_k basis_k over coordinates [d0, d0 + n). */
static void reconstruct_block(const pca_model *m, const float *weights, size_t d0, size_t n,
                              double *acc) {
  size_t D = 3 * (size_t)m->vertex_count;
  for (size_t i = 0; i < n; i++) acc[i] = m->mean[d0 + i];
  for (uint32_t k = 0; k < m->components; k++) {
    double w = weights[k];
    const float *bk = m->basis + D * k + d0;
    for (size_t i = 0; i < n; i++) acc[i] += w * bk[i];
  }
}

void pca_reconstruct(const pca_model *m, const float *weights, float *out) {
  size_t D = 3 * (size_t)m->vertex_count;
  double acc[PCA_BLOCK];
  for (size_t d0 = 0; d0 < D; d0 += PCA_BLOCK) {
    size_t n = D - d0 < PCA_BLOCK ? D - d0 : PCA_BLOCK;
    reconstruct_block(m, weights, d0, n, acc);
    for (size_t i = 0; i < n; i++) out[d0 + i] = (float)acc[i];
  }
}

void pca_frame_error(const pca_model *m, const float *frame, const float *weights, double *rms,
                     double *max) {
  size_t D = 3 * (size_t)m->vertex_count;
  double acc[PCA_BLOCK], sum2 = 0, max2 = 0;
  for (size_t d0 = 0; d0 < D; d0 += PCA_BLOCK) { /* PCA_BLOCK is whole vertices */
    size_t n = D - d0 < PCA_BLOCK ? D - d0 : PCA_BLOCK;
    reconstruct_block(m, weights, d0, n, acc);
    for (size_t i = 0; i < n; i += 3) {
      double dx = acc[i] - frame[d0 + i], dy = acc[i + 1] - frame[d0 + i + 1],
             dz = acc[i + 2] - frame[d0 + i + 2];
      double e = dx * dx + dy * dy + dz * dz;
      sum2 += e;
      if (e > max2) max2 = e;
    }
  }
  if (rms) *rms = m->vertex_count ? sqrt(sum2 / m->vertex_count) : 0;
  if (max) *max = sqrt(max2);
}

/* ---- region budgets ------------------------------------------------------------------------ */

int pca_build_regions(const float *frames, uint32_t frame_count, uint32_t vertex_count,
                      const uint32_t *region_of_vertex, uint32_t region_count,
                      const pca_options *opt, pca_regions *out, char *err, size_t errlen) {
  double t0 = now_ms();
  if (!out) {
    dfm_set_err(err, errlen, "no output regions");
    return PCA_EINVAL;
  }
  memset(out, 0, sizeof(*out));
  int rc = check_args(frames, frame_count, vertex_count, opt, err, errlen);
  if (rc != 0) return rc;
  if (!region_of_vertex || region_count == 0) {
    dfm_set_err(err, errlen, "no regions given");
    return PCA_EINVAL;
  }
  for (uint32_t v = 0; v < vertex_count; v++)
    if (region_of_vertex[v] >= region_count) {
      dfm_set_err(err, errlen, "vertex %u is in region %u of %u", v, region_of_vertex[v],
              region_count);
      return PCA_EINVAL;
    }
  /* Checked here so that the reason names the mesh's vertex, not the region's. */
  if ((rc = check_finite(frames, frame_count, vertex_count, err, errlen)) != 0) return rc;

  uint32_t F = frame_count;
  size_t D = 3 * (size_t)vertex_count;
  float *sub = NULL;
  double sum2 = 0;
  out->frame_count = F;
  out->vertex_count = vertex_count;
  out->region_count = region_count;
  out->budget_met = 1;
  out->regions = calloc(region_count, sizeof(pca_region));
  if (!out->regions) goto nomem;
  for (uint32_t v = 0; v < vertex_count; v++) out->regions[region_of_vertex[v]].vertex_count++;
  for (uint32_t g = 0; g < region_count; g++) {
    pca_region *reg = &out->regions[g];
    if (reg->vertex_count == 0) continue;
    reg->vertices = malloc(sizeof(uint32_t) * reg->vertex_count);
    if (!reg->vertices) goto nomem;
    reg->vertex_count = 0;
  }
  for (uint32_t v = 0; v < vertex_count; v++) {
    pca_region *reg = &out->regions[region_of_vertex[v]];
    reg->vertices[reg->vertex_count++] = v;
  }

  for (uint32_t g = 0; g < region_count; g++) {
    pca_region *reg = &out->regions[g];
    uint32_t n = reg->vertex_count;
    if (n == 0) {
      reg->model.frame_count = F;
      reg->model.budget_met = 1;
      continue;
    }
    float *grown = realloc(sub, sizeof(float) * 3 * n * F);
    if (!grown) goto nomem;
    sub = grown;
    for (uint32_t f = 0; f < F; f++)
      for (uint32_t i = 0; i < n; i++)
        memcpy(sub + 3 * ((size_t)n * f + i), frames + D * f + 3 * (size_t)reg->vertices[i],
               3 * sizeof(float));
    char why[256] = "";
    rc = pca_build(sub, F, n, opt, &reg->model, why, sizeof(why));
    if (rc != 0) {
      dfm_set_err(err, errlen, "region %u (%u vertices): %s", g, n, why);
      goto fail;
    }
    out->total_components += reg->model.components;
    out->budget_met &= reg->model.budget_met;
    if (reg->model.max_error > out->max_error) out->max_error = reg->model.max_error;
    sum2 += reg->model.rms_error * reg->model.rms_error * n;
  }
  out->rms_error = sqrt(sum2 / vertex_count);
  out->build_ms = now_ms() - t0;
  free(sub);
  return 0;

nomem:
  dfm_set_err(err, errlen, "out of memory splitting %u frames into %u regions", F, region_count);
  rc = PCA_ENOMEM;
fail:
  free(sub);
  pca_regions_fini(out);
  return rc;
}

void pca_regions_fini(pca_regions *r) {
  if (!r) return;
  for (uint32_t g = 0; r->regions && g < r->region_count; g++) {
    free(r->regions[g].vertices);
    pca_fini(&r->regions[g].model);
  }
  free(r->regions);
  memset(r, 0, sizeof(*r));
}

void pca_regions_reconstruct(const pca_regions *r, const float *weights, float *out) {
  for (uint32_t g = 0; g < r->region_count; g++) {
    const pca_region *reg = &r->regions[g];
    const pca_model *m = &reg->model;
    size_t D = 3 * (size_t)reg->vertex_count;
    for (uint32_t i = 0; i < reg->vertex_count; i++)
      for (int c = 0; c < 3; c++) {
        size_t d = 3 * (size_t)i + c;
        double s = m->mean[d];
        for (uint32_t k = 0; k < m->components; k++) s += (double)weights[k] * m->basis[D * k + d];
        out[3 * (size_t)reg->vertices[i] + c] = (float)s;
      }
    weights += m->components;
  }
}
