/*
 * test_blend.c — blendshape weight solves against independent oracles: known weights recovered
 * from the pins and shapes they produce, a brute force over every active set (each weight free,
 * at its lower or at its upper bound, each case solved densely with LAPACK), the KKT conditions
 * on bigger problems, the closed form of the regularised unconstrained solve, and the errors a
 * user sees. The oracles build B densely by a linear scan of the targets (no binary search, no
 * overlap transpose) and never call the code under test.
 */
#include <lapacke.h>
#include <time.h>

#include "blend.h"
#include "oracle.h"
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64, uniform in [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}
static uint32_t irand(uint32_t n) { return (uint32_t)((urand() + 1.0) * 0.5 * n) % n; }

/* A multiple of 1/64 in [-1, 1], never 0: sums of such deltas times weights that are multiples
 * of 1/16 are exact in float, so a shape made from known weights carries no rounding. */
static float qdelta(void) {
  double u = urand();
  double k = 1.0 + floor(fabs(u) * 63.0);
  return (float)((u < 0 ? -k : k) / 64.0);
}

/* Adds `count` targets, each moving the vertices within `radius` of a random vertex. */
static void add_local_targets(mesh *m, uint32_t count, double radius) {
  uint32_t *idx = malloc(sizeof(uint32_t) * m->vertex_count);
  float *d = malloc(sizeof(float) * 3 * m->vertex_count);
  for (uint32_t t = 0; t < count; t++) {
    const float *c = m->positions + 3 * (size_t)irand(m->vertex_count);
    uint32_t n = 0;
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      const float *p = m->positions + 3 * (size_t)v;
      double dx = p[0] - c[0], dy = p[1] - c[1], dz = p[2] - c[2];
      if (dx * dx + dy * dy + dz * dz > radius * radius) continue;
      idx[n] = v;
      for (int k = 0; k < 3; k++) d[3 * n + k] = qdelta();
      n++;
    }
    char name[32];
    snprintf(name, sizeof(name), "t%u", t);
    ASSERT_OK(mesh_add_target_sparse(m, name, n, idx, d, 0), NULL);
  }
  free(idx);
  free(d);
}

static mesh *sphere_with_targets(uint32_t levels, uint32_t targets, double radius) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_icosphere(levels, 1.0, &m), NULL);
  add_local_targets(m, targets, radius);
  return m;
}

/* Pin k sits on a random vertex moved by solved target k mod S, so every target is pinned. */
static uint32_t *pins_on_targets(const mesh *m, const uint32_t *solved, uint32_t S, uint32_t P) {
  uint32_t *v = malloc(sizeof(uint32_t) * P);
  for (uint32_t k = 0; k < P; k++) {
    const mesh_target *t = &m->targets[solved[k % S]];
    v[k] = t->indices[irand(t->count)];
  }
  return v;
}

/* The solved targets' indices: flags NULL = all. Returns S. */
static uint32_t solved_indices(const mesh *m, const uint8_t *flags, uint32_t *out) {
  uint32_t S = 0;
  for (uint32_t t = 0; t < m->target_count; t++)
    if (!flags || flags[t]) out[S++] = t;
  return S;
}

/* The oracle's B: 3 rows per listed vertex, one column per solved target (column-major), from a
 * linear scan of each target's entries. */
static double *dense_b(const mesh *m, const uint32_t *solved, uint32_t S, const uint32_t *verts,
                       uint32_t n) {
  double *B = calloc((size_t)3 * n * S, sizeof(double));
  for (uint32_t s = 0; s < S; s++) {
    const mesh_target *t = &m->targets[solved[s]];
    for (uint32_t k = 0; k < n; k++)
      for (uint32_t e = 0; e < t->count; e++)
        if (t->indices[e] == verts[k])
          for (int c = 0; c < 3; c++) B[(size_t)s * 3 * n + 3 * k + c] = t->deltas[3 * e + c];
  }
  return B;
}

/* H = BᵀB + λI and c = Bᵀr + λ w0 (w0 may be NULL), computed by plain loops. */
static void normal_eq(const double *B, uint32_t rows, uint32_t S, const double *r, double lambda,
                      const double *w0, double *H, double *c) {
  for (uint32_t i = 0; i < S; i++) {
    for (uint32_t j = 0; j < S; j++) {
      double acc = 0;
      for (uint32_t k = 0; k < rows; k++) acc += B[(size_t)i * rows + k] * B[(size_t)j * rows + k];
      H[(size_t)j * S + i] = acc + (i == j ? lambda : 0.0);
    }
    double acc = 0;
    for (uint32_t k = 0; k < rows; k++) acc += B[(size_t)i * rows + k] * r[k];
    c[i] = acc + (w0 ? lambda * w0[i] : 0.0);
  }
}

/* ½ wᵀH w − cᵀw. */
static double qp_objective(const double *H, const double *c, const double *w, uint32_t S) {
  double f = 0;
  for (uint32_t i = 0; i < S; i++) {
    double hw = 0;
    for (uint32_t j = 0; j < S; j++) hw += H[(size_t)j * S + i] * w[j];
    f += 0.5 * w[i] * hw - c[i] * w[i];
  }
  return f;
}

/* Fails unless w is a KKT point of the bounded problem (bounds exact, gradient signs within
 * `tol` of the gradient's scale). */
static void assert_kkt(const double *H, const double *c, const double *lo, const double *hi,
                       const double *w, uint32_t S, double tol) {
  for (uint32_t i = 0; i < S; i++) {
    ASSERT(w[i] >= lo[i] && w[i] <= hi[i]);
    double g = -c[i], scale = fabs(c[i]);
    for (uint32_t j = 0; j < S; j++) {
      g += H[(size_t)j * S + i] * w[j];
      scale += fabs(H[(size_t)j * S + i] * w[j]);
    }
    double t = tol * (scale + 1e-300);
    if (lo[i] == hi[i]) continue;
    if (w[i] == lo[i]) {
      if (g < -t) test__fail(__FILE__, __LINE__, "weight %u at its lower bound with gradient %.3g", i, g);
    } else if (w[i] == hi[i]) {
      if (g > t) test__fail(__FILE__, __LINE__, "weight %u at its upper bound with gradient %.3g", i, g);
    } else if (fabs(g) > t) {
      test__fail(__FILE__, __LINE__, "free weight %u (%.6g in [%.6g, %.6g]) with gradient %.3g", i,
                 w[i], lo[i], hi[i], g);
    }
  }
}

/* ---- known weights ------------------------------------------------------------------------ */

TEST(pins_recover_known_weights_exactly_without_regularization) {
  mesh *m = sphere_with_targets(3, 10, 0.7);
  uint32_t solved[10] = {0};
  uint32_t S = solved_indices(m, NULL, solved);
  uint32_t P = 20, *pins = pins_on_targets(m, solved, S, P);
  double *B = dense_b(m, solved, S, pins, P);
  double want[10], lo[10], hi[10], r[60], w[10];
  for (uint32_t s = 0; s < S; s++) want[s] = (1 + irand(15)) / 16.0, lo[s] = 0, hi[s] = 1;
  for (uint32_t k = 0; k < 3 * P; k++) {
    r[k] = 0;
    for (uint32_t s = 0; s < S; s++) r[k] += B[(size_t)s * 3 * P + k] * want[s];
  }
  blend_pins *p = NULL;
  char err[256] = "";
  ASSERT_OK(blend_pins_create(m, NULL, pins, P, 0.0, &p, err, sizeof(err)), err);
  ASSERT_EQ(blend_pins_solved_count(p), S);
  blend_result res;
  ASSERT_OK(blend_pins_solve(p, r, NULL, lo, hi, w, &res, err, sizeof(err)), err);
  for (uint32_t s = 0; s < S; s++) ASSERT_NEAR(w[s], want[s], 1e-9);
  ASSERT_EQ(res.iterations, 0);
  ASSERT_EQ(res.active, 0);
  ASSERT(res.residual <= 1e-9);
  /* Unbounded, and with the bounds exactly at the answer, the same. */
  ASSERT_OK(blend_pins_solve(p, r, NULL, NULL, NULL, w, NULL, err, sizeof(err)), err);
  for (uint32_t s = 0; s < S; s++) ASSERT_NEAR(w[s], want[s], 1e-9);
  ASSERT_OK(blend_pins_solve(p, r, NULL, want, want, w, &res, err, sizeof(err)), err);
  for (uint32_t s = 0; s < S; s++) ASSERT_EQ(w[s] == want[s], 1);
  ASSERT_EQ(res.active, S);
  blend_pins_destroy(p);
  free(B);
  free(pins);
  mesh_destroy(m);
}

TEST(fit_recovers_known_weights_of_the_shape_they_produce) {
  mesh *m = sphere_with_targets(3, 12, 0.6);
  uint32_t V = m->vertex_count, T = m->target_count;
  double want[12], lo[12], hi[12], w[12];
  for (uint32_t t = 0; t < T; t++) want[t] = (1 + irand(15)) / 16.0, lo[t] = 0, hi[t] = 1;
  /* Exact in float: deltas are multiples of 1/64, weights of 1/16. */
  float *d = calloc(3 * (size_t)V, sizeof(float));
  double *acc = calloc(3 * (size_t)V, sizeof(double));
  for (uint32_t t = 0; t < T; t++)
    for (uint32_t e = 0; e < m->targets[t].count; e++)
      for (int c = 0; c < 3; c++) acc[3 * m->targets[t].indices[e] + c] += want[t] * m->targets[t].deltas[3 * e + c];
  for (size_t i = 0; i < 3 * (size_t)V; i++) {
    d[i] = (float)acc[i];
    ASSERT_EQ((double)d[i] == acc[i], 1);
  }
  char err[256] = "";
  blend_fit_result res;
  ASSERT_OK(blend_fit(m, NULL, d, 0.0, NULL, lo, hi, w, &res, err, sizeof(err)), err);
  for (uint32_t t = 0; t < T; t++) ASSERT_NEAR(w[t], want[t], 1e-9);
  ASSERT(res.rms <= 1e-9 && res.max_error <= 1e-9);
  ASSERT_EQ(res.active, 0);
  fprintf(stderr, "fit of %u targets on %u vertices: assemble %.3f ms, solve %.3f ms, rms %.3g\n", T,
          V, res.assemble_ms, res.solve_ms, res.rms);

  /* Solving every other target: the caller removes the others' contribution first. */
  uint8_t flags[12];
  double sub[6];
  for (uint32_t t = 0; t < T; t++) flags[t] = t % 2 == 0;
  memset(acc, 0, sizeof(double) * 3 * V);
  for (uint32_t t = 0; t < T; t += 2)
    for (uint32_t e = 0; e < m->targets[t].count; e++)
      for (int c = 0; c < 3; c++) acc[3 * m->targets[t].indices[e] + c] += want[t] * m->targets[t].deltas[3 * e + c];
  for (size_t i = 0; i < 3 * (size_t)V; i++) d[i] = (float)acc[i];
  ASSERT_OK(blend_fit(m, flags, d, 0.0, NULL, NULL, NULL, sub, NULL, err, sizeof(err)), err);
  for (uint32_t s = 0; s < 6; s++) ASSERT_NEAR(sub[s], want[2 * s], 1e-9);

  /* Noise off the targets' span stays in the error report, not in the weights' bounds. */
  for (size_t i = 0; i < 3 * (size_t)V; i++) d[i] = (float)(acc[i] + 1e-3 * urand());
  ASSERT_OK(blend_fit(m, flags, d, 0.0, NULL, NULL, NULL, sub, &res, err, sizeof(err)), err);
  ASSERT(res.rms > 5e-4 && res.rms < 1.5e-3 && res.max_error < 2e-3);
  ASSERT(res.max_vertex < V);
  free(acc);
  free(d);
  mesh_destroy(m);
}

TEST(fit_recovers_the_demo_heads_expression) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  /* The head's own 16 targets: its ARKit targets after them repeat some of those exactly (jawOpen
   * is jaw_open), so all 68 together are under-determined. */
  uint32_t V = m->vertex_count, T = 16;
  uint8_t *solved = calloc(m->target_count, 1);
  memset(solved, 1, T);
  double *want = malloc(sizeof(double) * T), *w = malloc(sizeof(double) * T);
  double *lo = calloc(T, sizeof(double)), *hi = malloc(sizeof(double) * T);
  for (uint32_t t = 0; t < T; t++) want[t] = 0.5 + 0.45 * urand(), hi[t] = 1;
  float *d = calloc(3 * (size_t)V, sizeof(float));
  double *acc = calloc(3 * (size_t)V, sizeof(double));
  for (uint32_t t = 0; t < T; t++)
    for (uint32_t e = 0; e < m->targets[t].count; e++)
      for (int c = 0; c < 3; c++) acc[3 * m->targets[t].indices[e] + c] += want[t] * m->targets[t].deltas[3 * e + c];
  for (size_t i = 0; i < 3 * (size_t)V; i++) d[i] = (float)acc[i];
  char err[256] = "";
  blend_fit_result res;
  ASSERT_OK(blend_fit(m, solved, d, 0.0, NULL, lo, hi, w, &res, err, sizeof(err)), err);
  double worst = 0;
  for (uint32_t t = 0; t < T; t++) worst = fmax(worst, fabs(w[t] - want[t]));
  free(solved);
  fprintf(stderr, "demo head (%u vertices, %u targets): max weight error %.3g, rms %.3g m, "
          "assemble %.2f ms, solve %.3f ms\n", V, T, worst, res.rms, res.assemble_ms, res.solve_ms);
  ASSERT(worst <= 1e-5); /* the float rounding of the shape, nothing more */
  ASSERT(res.max_error <= 1e-6);
  free(acc);
  free(d);
  free(want);
  free(w);
  free(lo);
  free(hi);
  mesh_destroy(m);
}

/* ---- the constrained optimum -------------------------------------------------------------- */

/* Brute force: every assignment of each weight to free / lower / upper, the free ones solved
 * densely (dposv); of the feasible KKT points, the lowest objective. Returns it in `best`. */
static double brute_force(const double *H, const double *c, const double *lo, const double *hi,
                          uint32_t S, double *best) {
  double best_f = INFINITY;
  uint32_t cases = 1;
  for (uint32_t i = 0; i < S; i++) cases *= 3;
  double Hf[49], x[7], w[7];
  uint32_t fi[7];
  for (uint32_t code = 0; code < cases; code++) {
    uint32_t nf = 0, k = code;
    int state[7];
    for (uint32_t i = 0; i < S; i++, k /= 3) {
      state[i] = (int)(k % 3);
      if (state[i] == 0) fi[nf++] = i;
      else w[i] = state[i] == 1 ? lo[i] : hi[i];
    }
    for (uint32_t a = 0; a < nf; a++) {
      x[a] = c[fi[a]];
      for (uint32_t j = 0; j < S; j++)
        if (state[j]) x[a] -= H[(size_t)j * S + fi[a]] * w[j];
      for (uint32_t b = 0; b < nf; b++) Hf[b * nf + a] = H[(size_t)fi[b] * S + fi[a]];
    }
    if (nf && LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', (lapack_int)nf, 1, Hf, (lapack_int)nf, x, (lapack_int)nf) != 0)
      continue;
    int ok = 1;
    for (uint32_t a = 0; a < nf && ok; a++) {
      uint32_t i = fi[a];
      w[i] = x[a];
      ok = x[a] >= lo[i] - 1e-12 && x[a] <= hi[i] + 1e-12;
    }
    for (uint32_t i = 0; i < S && ok; i++) { /* the bounds' multipliers */
      if (!state[i] || lo[i] == hi[i]) continue;
      double g = -c[i];
      for (uint32_t j = 0; j < S; j++) g += H[(size_t)j * S + i] * w[j];
      ok = state[i] == 1 ? g >= -1e-10 : g <= 1e-10;
    }
    if (!ok) continue;
    for (uint32_t i = 0; i < S; i++) w[i] = fmin(fmax(w[i], lo[i]), hi[i]);
    double f = qp_objective(H, c, w, S);
    if (f < best_f) {
      best_f = f;
      memcpy(best, w, sizeof(double) * S);
    }
  }
  return best_f;
}

TEST(bounded_pin_solves_match_a_brute_force_over_every_active_set) {
  int with_lambda = 0, singular = 0, total_active = 0;
  for (int trial = 0; trial < 400; trial++) {
    uint32_t S = 1 + (uint32_t)trial % 7;
    mesh *m = sphere_with_targets(2, S, 0.9);
    uint32_t solved[7] = {0};
    solved_indices(m, NULL, solved);
    uint32_t P = 1 + irand(4), *pins = pins_on_targets(m, solved, S, P);
    double lambda = trial % 3 == 0 ? 0.02 + fabs(urand()) : 0.0;
    blend_pins *p = NULL;
    char err[256] = "";
    int rc = blend_pins_create(m, NULL, pins, P, lambda, &p, err, sizeof(err));
    if (rc == BLEND_ESINGULAR) { /* too few pins for λ = 0: regularise instead */
      ASSERT(lambda == 0);
      ASSERT_STR_CONTAINS(err, "regularization > 0");
      singular++;
      lambda = 0.1;
      rc = blend_pins_create(m, NULL, pins, P, lambda, &p, err, sizeof(err));
    }
    ASSERT_OK(rc, err);
    with_lambda += lambda > 0;
    double r[12], w0[7], lo[7], hi[7], w[7], best[7], H[49], c[7];
    for (uint32_t k = 0; k < 3 * P; k++) r[k] = 3.0 * urand();
    for (uint32_t s = 0; s < S; s++) {
      w0[s] = urand();
      lo[s] = -0.5 + 0.5 * urand();
      hi[s] = irand(8) == 0 ? lo[s] : lo[s] + fabs(urand());
    }
    blend_result res;
    ASSERT_OK(blend_pins_solve(p, r, w0, lo, hi, w, &res, err, sizeof(err)), err);
    total_active += (int)res.active;

    double *B = dense_b(m, solved, S, pins, P);
    normal_eq(B, 3 * P, S, r, lambda, w0, H, c);
    double fb = brute_force(H, c, lo, hi, S, best);
    ASSERT(isfinite(fb));
    double f = qp_objective(H, c, w, S), scale = 0;
    for (uint32_t s = 0; s < S; s++) scale = fmax(scale, fabs(c[s]) + H[s * S + s]);
    ASSERT_NEAR(f, fb, 1e-10 * (1 + scale));
    for (uint32_t s = 0; s < S; s++) {
      ASSERT(w[s] >= lo[s] && w[s] <= hi[s]);
      ASSERT_NEAR(w[s], best[s], 1e-7);
    }
    assert_kkt(H, c, lo, hi, w, S, 1e-9);
    free(B);
    blend_pins_destroy(p);
    free(pins);
    mesh_destroy(m);
  }
  fprintf(stderr, "400 problems: %d regularised, %d refused without regularization, %d weights on bounds\n",
          with_lambda, singular, total_active);
  ASSERT(total_active > 200);
}

TEST(bounded_solves_satisfy_kkt_on_large_random_problems) {
  mesh *m = sphere_with_targets(4, 52, 0.5);
  uint32_t solved[52] = {0};
  uint32_t S = solved_indices(m, NULL, solved);
  uint32_t P = 20, *pins = pins_on_targets(m, solved, S, P);
  double *B = dense_b(m, solved, S, pins, P);
  double H[52 * 52], c[52], r[60], w0[52], lo[52], hi[52], w[52];
  const double lambdas[3] = {1e-4, 1e-2, 1.0};
  int max_iter = 0;
  for (int li = 0; li < 3; li++) {
    blend_pins *p = NULL;
    char err[256] = "";
    ASSERT_OK(blend_pins_create(m, NULL, pins, P, lambdas[li], &p, err, sizeof(err)), err);
    for (int trial = 0; trial < 40; trial++) {
      for (uint32_t k = 0; k < 3 * P; k++) r[k] = 2.0 * urand();
      for (uint32_t s = 0; s < S; s++) {
        w0[s] = 0.5 + 0.5 * urand();
        lo[s] = trial % 2 ? -1.0 : 0.0;
        hi[s] = 1.0;
      }
      blend_result res;
      ASSERT_OK(blend_pins_solve(p, r, w0, lo, hi, w, &res, err, sizeof(err)), err);
      if (res.iterations > max_iter) max_iter = res.iterations;
      normal_eq(B, 3 * P, S, r, lambdas[li], w0, H, c);
      assert_kkt(H, c, lo, hi, w, S, 1e-9);
    }
    blend_pins_destroy(p);
  }
  fprintf(stderr, "52 targets, 20 pins: at most %d active-set iterations\n", max_iter);

  /* A fit over the whole sphere, against the dense 3V × S oracle. */
  uint32_t V = m->vertex_count, *all = calloc(V, sizeof(uint32_t));
  for (uint32_t v = 0; v < V; v++) all[v] = v;
  double *Bv = dense_b(m, solved, S, all, V), *dd = malloc(sizeof(double) * 3 * V);
  float *d = malloc(sizeof(float) * 3 * V);
  /* Weights in [-1.5, 2.5] and some noise: many fitted weights end on a bound. */
  double *wt = malloc(sizeof(double) * S);
  for (uint32_t s = 0; s < S; s++) wt[s] = 0.5 + 2.0 * urand();
  for (size_t i = 0; i < 3 * (size_t)V; i++) {
    double acc = 0.05 * urand();
    for (uint32_t s = 0; s < S; s++) acc += Bv[(size_t)s * 3 * V + i] * wt[s];
    d[i] = (float)acc;
    dd[i] = d[i];
  }
  free(wt);
  for (int li = 0; li < 3; li++) {
    blend_fit_result res;
    char err[256] = "";
    double lambda = li == 0 ? 0.0 : lambdas[li];
    ASSERT_OK(blend_fit(m, NULL, d, lambda, w0, lo, hi, w, &res, err, sizeof(err)), err);
    normal_eq(Bv, 3 * V, S, dd, lambda, w0, H, c);
    assert_kkt(H, c, lo, hi, w, S, 1e-9);
    /* The reported errors, recomputed. */
    double sum = 0, worst = 0;
    for (uint32_t v = 0; v < V; v++) {
      double q = 0;
      for (int k = 0; k < 3; k++) {
        double e = -dd[3 * v + k];
        for (uint32_t s = 0; s < S; s++) e += Bv[(size_t)s * 3 * V + 3 * v + k] * w[s];
        q += e * e;
      }
      sum += q;
      worst = fmax(worst, sqrt(q));
    }
    ASSERT_NEAR(res.rms, sqrt(sum / V), 1e-12);
    ASSERT_NEAR(res.max_error, worst, 1e-12);
    fprintf(stderr, "fit λ=%g: %d iterations, %u on bounds, rms %.4f\n", lambda, res.iterations,
            res.active, res.rms);
    ASSERT(res.active > 5 && res.iterations > 0);
  }
  free(d);
  free(dd);
  free(Bv);
  free(all);
  free(B);
  free(pins);
  mesh_destroy(m);
}

/* ---- regularisation and caching ----------------------------------------------------------- */

TEST(regularization_pulls_towards_the_current_weights) {
  mesh *m = sphere_with_targets(3, 10, 0.7);
  uint32_t solved[10] = {0};
  uint32_t S = solved_indices(m, NULL, solved);
  uint32_t P = 2, *pins = pins_on_targets(m, solved, S, P); /* 6 equations, 10 weights */
  double *B = dense_b(m, solved, S, pins, P);
  double r[6], w0[10], w[10], H[100], c[10];
  for (uint32_t k = 0; k < 6; k++) r[k] = urand();
  for (uint32_t s = 0; s < S; s++) w0[s] = urand();
  double prev = INFINITY;
  const double lambdas[5] = {1e-3, 0.05, 1.0, 30.0, 1e8};
  for (int li = 0; li < 5; li++) {
    blend_pins *p = NULL;
    char err[256] = "";
    ASSERT_OK(blend_pins_create(m, NULL, pins, P, lambdas[li], &p, err, sizeof(err)), err);
    blend_result res;
    ASSERT_OK(blend_pins_solve(p, r, w0, NULL, NULL, w, &res, err, sizeof(err)), err);
    ASSERT_EQ(res.iterations, 0);
    /* The closed form (BᵀB + λI) w = Bᵀr + λ w0, solved here with dposv. */
    normal_eq(B, 6, S, r, lambdas[li], w0, H, c);
    ASSERT_EQ(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', (lapack_int)S, 1, H, (lapack_int)S, c, (lapack_int)S), 0);
    double dist = 0;
    for (uint32_t s = 0; s < S; s++) {
      ASSERT_NEAR(w[s], c[s], 1e-10 * (1 + fabs(c[s])));
      dist += (w[s] - w0[s]) * (w[s] - w0[s]);
    }
    ASSERT(sqrt(dist) < prev); /* stronger regularisation, closer to w0 */
    prev = sqrt(dist);
    /* Pins asked to stay where the current weights put them: the weights stay. */
    double r0[6];
    for (uint32_t k = 0; k < 6; k++) {
      r0[k] = 0;
      for (uint32_t s = 0; s < S; s++) r0[k] += B[s * 6 + k] * w0[s];
    }
    ASSERT_OK(blend_pins_solve(p, r0, w0, NULL, NULL, w, NULL, err, sizeof(err)), err);
    for (uint32_t s = 0; s < S; s++) ASSERT_NEAR(w[s], w0[s], 1e-10);
    blend_pins_destroy(p);
  }
  ASSERT(prev < 1e-6);
  free(B);
  free(pins);
  mesh_destroy(m);
}

TEST(a_cached_factor_gives_the_same_answer_as_a_fresh_create) {
  mesh *m = sphere_with_targets(3, 16, 0.6);
  uint32_t solved[16] = {0};
  uint8_t flags[16];
  for (uint32_t t = 0; t < 16; t++) flags[t] = t != 3 && t != 9;
  uint32_t S = solved_indices(m, flags, solved);
  uint32_t P = 9, *pins = pins_on_targets(m, solved, S, P);
  blend_pins *cached = NULL;
  char err[256] = "";
  ASSERT_OK(blend_pins_create(m, flags, pins, P, 0.01, &cached, err, sizeof(err)), err);
  ASSERT_EQ(blend_pins_solved_count(cached), S);
  for (uint32_t s = 0; s < S; s++) ASSERT_EQ(blend_pins_solved_targets(cached)[s], solved[s]);
  double r[27], w0[16], lo[16], hi[16], a[16], b[16];
  for (int drag = 0; drag < 8; drag++) {
    for (uint32_t k = 0; k < 3 * P; k++) r[k] = (1 + drag) * 0.3 * urand();
    for (uint32_t s = 0; s < S; s++) w0[s] = urand(), lo[s] = -0.3, hi[s] = 0.8;
    ASSERT_OK(blend_pins_solve(cached, r, w0, lo, hi, a, NULL, err, sizeof(err)), err);
    blend_pins *fresh = NULL;
    ASSERT_OK(blend_pins_create(m, flags, pins, P, 0.01, &fresh, err, sizeof(err)), err);
    ASSERT_OK(blend_pins_solve(fresh, r, w0, lo, hi, b, NULL, err, sizeof(err)), err);
    for (uint32_t s = 0; s < S; s++) ASSERT_NEAR(a[s], b[s], 1e-13);
    blend_pins_destroy(fresh);
  }
  blend_pins_destroy(cached);
  free(pins);
  mesh_destroy(m);
}

/* ---- errors ------------------------------------------------------------------------------- */

TEST(pins_on_a_vertex_no_target_moves_are_refused_with_a_reason) {
  mesh *m = sphere_with_targets(3, 4, 0.4);
  uint8_t *moved = calloc(m->vertex_count, 1), *only = calloc(m->vertex_count, 1);
  for (uint32_t t = 0; t < 4; t++)
    for (uint32_t e = 0; e < m->targets[t].count; e++) {
      moved[m->targets[t].indices[e]] = 1;
      if (t == 0) only[m->targets[t].indices[e]] = 1;
    }
  uint32_t still = 0, first = 0;
  while (moved[still]) still++;
  for (uint32_t v = 0; v < m->vertex_count; v++)
    if (only[v]) {
      int other = 0;
      for (uint32_t t = 1; t < 4; t++)
        for (uint32_t e = 0; e < m->targets[t].count; e++) other |= m->targets[t].indices[e] == v;
      if (!other) { first = v; break; }
    }
  ASSERT(only[first]);
  uint32_t pins[3] = {m->targets[1].indices[0], still, m->targets[2].indices[0]};
  blend_pins *p = NULL;
  char err[256] = "", want[128];
  ASSERT_EQ(blend_pins_create(m, NULL, pins, 3, 0.1, &p, err, sizeof(err)), BLEND_EUNMOVED);
  ASSERT(p == NULL);
  snprintf(want, sizeof(want), "pin 1 (vertex %u): no target moves this vertex, so no weights can move it", still);
  ASSERT_STR_CONTAINS(err, want);
  /* Moved only by a target left out of the solve. */
  uint8_t flags[4] = {0, 1, 1, 1};
  pins[1] = first;
  ASSERT_EQ(blend_pins_create(m, flags, pins, 3, 0.1, &p, err, sizeof(err)), BLEND_EUNMOVED);
  ASSERT_STR_CONTAINS(err, "no solved target moves this vertex");
  ASSERT_STR_CONTAINS(blend_strerror(BLEND_EUNMOVED), "no solved target");
  free(moved);
  free(only);
  mesh_destroy(m);
}

TEST(pins_and_fits_refuse_nan_and_inf) {
  mesh *m = sphere_with_targets(3, 4, 0.7);
  uint32_t solved[4] = {0};
  solved_indices(m, NULL, solved);
  uint32_t *pins = pins_on_targets(m, solved, 4, 4);
  blend_pins *p = NULL;
  char err[256] = "";
  ASSERT_EQ(blend_pins_create(m, NULL, pins, 4, NAN, &p, err, sizeof(err)), BLEND_ENONFINITE);
  ASSERT_EQ(blend_pins_create(m, NULL, pins, 4, INFINITY, &p, err, sizeof(err)), BLEND_ENONFINITE);
  ASSERT_OK(blend_pins_create(m, NULL, pins, 4, 0.0, &p, err, sizeof(err)), err);
  double r[12] = {0}, w0[4] = {0}, lo[4] = {0, 0, 0, 0}, hi[4] = {1, 1, 1, 1};
  double w[4] = {7, 7, 7, 7};
  r[4] = NAN;
  ASSERT_EQ(blend_pins_solve(p, r, w0, lo, hi, w, NULL, err, sizeof(err)), BLEND_ENONFINITE);
  ASSERT_STR_CONTAINS(err, "pin 1: desired displacement y is not a finite number");
  r[4] = 0;
  w0[2] = INFINITY;
  ASSERT_EQ(blend_pins_solve(p, r, w0, lo, hi, w, NULL, err, sizeof(err)), BLEND_ENONFINITE);
  w0[2] = 0;
  hi[3] = NAN;
  ASSERT_EQ(blend_pins_solve(p, r, w0, lo, hi, w, NULL, err, sizeof(err)), BLEND_ENONFINITE);
  hi[3] = 1;
  lo[0] = -INFINITY;
  ASSERT_EQ(blend_pins_solve(p, r, w0, lo, hi, w, NULL, err, sizeof(err)), BLEND_ENONFINITE);
  ASSERT_STR_CONTAINS(err, "pass NULL for no bound");
  for (int s = 0; s < 4; s++) ASSERT_EQ(w[s] == 7, 1); /* untouched */
  blend_pins_destroy(p);

  float *d = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  d[3 * 17 + 2] = NAN;
  ASSERT_EQ(blend_fit(m, NULL, d, 0.0, NULL, NULL, NULL, w, NULL, err, sizeof(err)), BLEND_ENONFINITE);
  ASSERT_STR_CONTAINS(err, "vertex 17");
  free(d);
  free(pins);
  mesh_destroy(m);
}

TEST(lower_bounds_above_upper_bounds_and_negative_regularization_are_refused) {
  mesh *m = sphere_with_targets(3, 4, 0.7);
  uint32_t solved[4] = {0};
  solved_indices(m, NULL, solved);
  uint32_t *pins = pins_on_targets(m, solved, 4, 4);
  blend_pins *p = NULL;
  char err[256] = "";
  ASSERT_EQ(blend_pins_create(m, NULL, pins, 4, -1e-3, &p, err, sizeof(err)), BLEND_EINVAL);
  ASSERT_STR_CONTAINS(err, "regularization must be >= 0");
  ASSERT_OK(blend_pins_create(m, NULL, pins, 4, 0.0, &p, err, sizeof(err)), err);
  double r[12] = {0}, lo[4] = {0, 0, 0.6, 0}, hi[4] = {1, 1, 0.5, 1}, w[4];
  ASSERT_EQ(blend_pins_solve(p, r, NULL, lo, hi, w, NULL, err, sizeof(err)), BLEND_EINVAL);
  ASSERT_STR_CONTAINS(err, "weight 2: lower bound 0.6 is above upper bound 0.5");
  float *d = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  ASSERT_EQ(blend_fit(m, NULL, d, 0.0, NULL, lo, hi, w, NULL, err, sizeof(err)), BLEND_EINVAL);
  ASSERT_EQ(blend_fit(m, NULL, d, -1.0, NULL, NULL, NULL, w, NULL, err, sizeof(err)), BLEND_EINVAL);
  free(d);
  blend_pins_destroy(p);
  free(pins);
  mesh_destroy(m);
}

TEST(pin_vertices_out_of_range_are_refused) {
  mesh *m = sphere_with_targets(3, 4, 0.7);
  uint32_t pins[3] = {m->targets[0].indices[0], m->targets[1].indices[0], 99999};
  blend_pins *p = NULL;
  char err[256] = "", want[128];
  ASSERT_EQ(blend_pins_create(m, NULL, pins, 3, 0.1, &p, err, sizeof(err)), BLEND_EINVAL);
  snprintf(want, sizeof(want), "pin 2: vertex 99999 is out of range (the mesh has %u vertices)", m->vertex_count);
  ASSERT_STR_CONTAINS(err, want);
  ASSERT(p == NULL);
  ASSERT_EQ(blend_pins_create(m, NULL, pins, 0, 0.1, &p, err, sizeof(err)), BLEND_EINVAL);
  uint8_t none[4] = {0};
  ASSERT_EQ(blend_pins_create(m, none, pins, 2, 0.1, &p, err, sizeof(err)), BLEND_EINVAL);
  ASSERT_STR_CONTAINS(err, "no target is selected");
  mesh_destroy(m);
}

TEST(underdetermined_solves_without_regularization_are_refused_with_counts) {
  /* Targets that move every vertex, two pins: 6 equations for 10 weights. */
  mesh *g = sphere_with_targets(3, 10, 2.5);
  uint32_t pins[2] = {5, 300};
  blend_pins *p = NULL;
  char err[512] = "";
  ASSERT_EQ(blend_pins_create(g, NULL, pins, 2, 0.0, &p, err, sizeof(err)), BLEND_ESINGULAR);
  ASSERT_STR_CONTAINS(err, "10 targets but the 2 pins (6 equations) constrain only 6 independent");
  ASSERT_STR_CONTAINS(err, "regularization > 0");
  fprintf(stderr, "%s\n", err);
  ASSERT_OK(blend_pins_create(g, NULL, pins, 2, 1e-3, &p, err, sizeof(err)), err);
  blend_pins_destroy(p);
  mesh_destroy(g);
  mesh *m = sphere_with_targets(3, 10, 0.7);

  /* Enough pins, but one target moves none of them. */
  uint8_t two[10] = {1, 1};
  uint32_t far = 0;
  for (uint32_t v = 0; v < m->vertex_count && !far; v++) {
    int in0 = 0, in1 = 0;
    for (uint32_t e = 0; e < m->targets[0].count; e++) in0 |= m->targets[0].indices[e] == v;
    for (uint32_t e = 0; e < m->targets[1].count; e++) in1 |= m->targets[1].indices[e] == v;
    if (in0 && !in1) far = v;
  }
  ASSERT(far);
  uint32_t one[1] = {far};
  ASSERT_EQ(blend_pins_create(m, two, one, 1, 0.0, &p, err, sizeof(err)), BLEND_ESINGULAR);
  ASSERT_STR_CONTAINS(err, "target 1 't1' moves none of the pinned vertices");

  /* A fit with a target repeated: the shape cannot tell the copies apart. */
  const mesh_target *t3 = &m->targets[3];
  ASSERT_OK(mesh_add_target_sparse(m, "t3_copy", t3->count, t3->indices, t3->deltas, 0), NULL);
  float *d = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  double w[11];
  ASSERT_EQ(blend_fit(m, NULL, d, 0.0, NULL, NULL, NULL, w, NULL, err, sizeof(err)), BLEND_ESINGULAR);
  ASSERT_STR_CONTAINS(err, "11 solved targets span only 10 independent directions");
  ASSERT_STR_CONTAINS(err, "'t3'");
  ASSERT_STR_CONTAINS(err, "'t3_copy'");
  fprintf(stderr, "%s\n", err);
  ASSERT_OK(blend_fit(m, NULL, d, 1e-6, NULL, NULL, NULL, w, NULL, err, sizeof(err)), err);
  free(d);
  mesh_destroy(m);
}

/* ---- speed -------------------------------------------------------------------------------- */

TEST(a_drag_with_52_targets_and_20_pins_takes_microseconds) {
  mesh *m = sphere_with_targets(4, 52, 0.5);
  uint32_t solved[52] = {0};
  uint32_t S = solved_indices(m, NULL, solved);
  uint32_t P = 20, *pins = pins_on_targets(m, solved, S, P);
  double *B = dense_b(m, solved, S, pins, P);
  blend_pins *p = NULL;
  char err[256] = "";
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ASSERT_OK(blend_pins_create(m, NULL, pins, P, 1e-3, &p, err, sizeof(err)), err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double create_us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3;
  double r[60], w0[52], lo[52], hi[52], w[52], target[52];
  for (uint32_t s = 0; s < S; s++) w0[s] = 0.5, lo[s] = 0, hi[s] = 1;
  const int drags = 2000;
  double sum[2] = {0, 0}, worst[2] = {0, 0};
  int bounded = 0, iterations = 0;
  for (int kind = 0; kind < 2; kind++) {
    for (int i = 0; i < drags; i++) {
      /* kind 0: pins reachable inside the bounds (the cached factor alone); kind 1: far drags. */
      for (uint32_t s = 0; s < S; s++) target[s] = 0.5 + 0.4 * urand();
      for (uint32_t k = 0; k < 3 * P; k++) {
        r[k] = kind ? 2.0 * urand() : 0;
        if (!kind)
          for (uint32_t s = 0; s < S; s++) r[k] += B[(size_t)s * 3 * P + k] * target[s];
      }
      blend_result res;
      ASSERT_OK(blend_pins_solve(p, r, w0, lo, hi, w, &res, err, sizeof(err)), err);
      sum[kind] += res.solve_us;
      worst[kind] = fmax(worst[kind], res.solve_us);
      bounded += res.iterations > 0;
      iterations += res.iterations;
    }
  }
  fprintf(stderr, "52 targets, 20 pins: create %.1f µs; drag %.2f µs mean (%.1f max) inside the "
          "bounds, %.2f µs mean (%.1f max) against them (%d of %d drags hit a bound, %.1f "
          "active-set iterations on average)\n", create_us, sum[0] / drags, worst[0], sum[1] / drags,
          worst[1], bounded, 2 * drags, bounded ? (double)iterations / bounded : 0.0);
  blend_pins_destroy(p);
  free(B);
  free(pins);
  mesh_destroy(m);
}
