/*
 * test_sweep32.c — the ARAP iterations' float32 sweeps (dfm_params.sweeps, dfm_sweep.c) against
 * the double sweeps of the same system: from the same positions every iteration gives the same
 * answer to 1e-6 of the mesh's diagonal, on a sphere, a scan and the dragon at 100k vertices.
 */
#include "dfm.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

/* Whole-mesh ARAP with a sharp border (a handle around the top vertex, nothing else: the solve
 * the dragon figure measures), one system per sweep type. Each iteration starts both from the
 * double path's last result, so the difference is that one iteration's. */
static void compare_sweeps(fixture *f, const char *what) {
  char err[256];
  uint32_t n = f->t.vertex_count, top = 0;
  for (uint32_t v = 0; v < n; v++)
    if (f->t.positions[3 * v + 1] > f->t.positions[3 * top + 1]) top = v;
  uint32_t *handle, nh;
  ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, &top, 1, INFINITY, 50, &handle, &nh), NULL);
  dfm_system *s[2];
  for (int k = 0; k < 2; k++) {
    dfm_params p = {.mode = DFM_ARAP, .handle = handle, .handle_count = nh, .iterations = 1,
                    .factor = DFM_FACTOR_SUPERNODAL, .sweeps = k ? DFM_SWEEPS_FLOAT : DFM_SWEEPS_DOUBLE};
    ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s[k], err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s[k], &info);
    ASSERT_EQ(info.sweep32, k);
  }
  double *a = malloc(sizeof(double) * 3 * n), *b = malloc(sizeof(double) * 3 * n);
  memcpy(a, f->t.positions, sizeof(double) * 3 * n);
  double worst = 0, moved = 0;
  for (int d = 1; d <= 3; d++) {
    dfm_xform x;
    dfm_xform_identity(&x);
    x.translate[1] = 0.03 * d * f->diag, x.translate[0] = 0.01 * d * f->diag;
    x.rotation[2] = sin(0.05 * d), x.rotation[3] = cos(0.05 * d);
    memcpy(x.pivot, f->t.positions + 3 * top, sizeof(double) * 3);
    for (int it = 0; it < 3; it++) {
      memcpy(b, a, sizeof(double) * 3 * n);
      ASSERT_OK(dfm_system_arap_iterate(s[0], &x, a, err, sizeof(err)), err);
      ASSERT_OK(dfm_system_arap_iterate(s[1], &x, b, err, sizeof(err)), err);
      double e = 0;
      for (size_t i = 0; i < 3 * (size_t)n; i++) {
        ASSERT(isfinite(b[i]));
        e = fmax(e, fabs(a[i] - b[i]));
        moved = fmax(moved, fabs(a[i] - f->t.positions[i]));
      }
      worst = fmax(worst, e);
      if (e > 1e-6 * f->diag)
        test__fail(__FILE__, __LINE__, "%s drag %d iteration %d: float32 sweeps %.3g from double (diagonal %.3g)",
                   what, d, it, e, f->diag);
    }
  }
  fprintf(stderr, "%s: %u vertices, float32 sweeps at most %.3g of the diagonal from double\n", what, n,
          worst / f->diag);
  ASSERT(worst > 0);               /* the float copy was read: rounding shows */
  ASSERT(moved > 0.05 * f->diag);  /* and the mesh moved */
  for (int k = 0; k < 2; k++) dfm_system_destroy(s[k]);
  free(a);
  free(b);
  free(handle);
}

TEST(float32_sweeps_give_each_arap_iteration_of_the_double_sweeps_to_1e_6_of_the_diagonal) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  compare_sweeps(&f, "icosphere 10k");
  fixture_fini(&f);
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("bunny00.off"), NULL, &m, err, sizeof(err)), err);
  fixture_init(&f, m);
  compare_sweeps(&f, "bunny00");
  fixture_fini(&f);
  m = NULL;
  ASSERT_OK(mesh_import(test_dragon("dragon_vrip_res2.ply"), NULL, &m, err, sizeof(err)), err);
  fixture_init(&f, m);
  compare_sweeps(&f, "dragon 100k");
  fixture_fini(&f);
}

/* AUTO takes the float copy only for big ARAP factors, and never for the Laplacian. */
TEST(auto_sweeps_use_float32_only_for_big_arap_factors) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  char err[256];
  uint32_t h[3] = {0, 1, 2};
  for (int mode = 0; mode < 2; mode++) {
    dfm_params p = {.mode = (dfm_mode)mode, .handle = h, .handle_count = 3, .iterations = 1,
                    .factor = DFM_FACTOR_SUPERNODAL};
    dfm_system *s = NULL;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s, &info);
    ASSERT_EQ(info.sweep32, 0); /* 2.6k vertices: below DFM_SWEEP32_MIN */
    dfm_system_destroy(s);
    p.sweeps = DFM_SWEEPS_FLOAT;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_system_info(s, &info);
    ASSERT_EQ(info.sweep32, mode == DFM_ARAP);
    dfm_system_destroy(s);
  }
  fixture_fini(&f);
}
