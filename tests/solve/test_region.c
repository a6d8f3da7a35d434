/*
 * test_region.c — regions of interest (server/solve/dfm_region.c): geodesic regions against
 * the closed-form edge-path distance on a grid, and a small region's system, built on its own
 * sub-mesh, against the whole-mesh system with the same region.
 */
#include "dfm.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

TEST(geodesic_region_on_a_grid_matches_the_closed_form_distance) {
  /* Right-triangle grid, spacing 1, diagonals along (+1, +1): the edge-path distance from the
   * centre to (dx, dy) is √2·min + (max - min) when dx, dy have the same sign, |dx| + |dy|
   * otherwise. */
  const uint32_t n = 20, side = n + 1, c = 10 * side + 10;
  fixture f;
  fixture_init(&f, oracle_grid(n, 1.0));
  for (double r = 0.5; r < 9; r += 1.3) {
    uint32_t *region, count;
    ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &c, 1, r, 0, &region, &count), NULL);
    uint32_t want = 0;
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      int dx = (int)(v % side) - 10, dy = (int)(v / side) - 10;
      double d;
      if ((dx >= 0) == (dy >= 0)) {
        int a = abs(dx), b = abs(dy), mn = a < b ? a : b, mx = a < b ? b : a;
        d = sqrt(2.0) * mn + (mx - mn);
      } else {
        d = abs(dx) + abs(dy);
      }
      int in = 0;
      for (uint32_t k = 0; k < count; k++) in |= region[k] == v;
      if (d <= r + 1e-9) want++;
      ASSERT_EQ(in, d <= r + 1e-9);
    }
    ASSERT_EQ(count, want);
    free(region);
  }
  fixture_fini(&f);
}

/* A small region is solved on its own sub-mesh; the whole-mesh system with the same region is
 * the oracle (same matrix, same ordering): every mode with the plain and the smooth border,
 * soft constraints and an anchor inside, an anchor and a soft constraint outside (which touch
 * nothing), three drags. */
TEST(a_region_solved_on_its_own_sub_mesh_matches_the_whole_mesh_system) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("armadillo.off"), NULL, &m, err, sizeof(err)), err);
  fixture f;
  fixture_init(&f, m);
  uint32_t n = f.t.vertex_count, top = 0;
  for (uint32_t v = 0; v < n; v++)
    if (f.t.positions[3 * v + 1] > f.t.positions[3 * top + 1]) top = v;
  uint32_t *handle, nh, *roi, nr;
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, 0.03 * f.diag, 0, &handle, &nh), NULL);
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, 0.25 * f.diag, 0, &roi, &nr), NULL);
  ASSERT(nr * 2 < n && nr > 10 * nh);
  /* An anchor and a soft constraint inside the region (its last vertices are its rim), and
   * one of each far outside it (the vertex nearest the bottom). */
  uint32_t bottom = 0;
  for (uint32_t v = 0; v < n; v++)
    if (f.t.positions[3 * v + 1] < f.t.positions[3 * bottom + 1]) bottom = v;
  uint32_t anchors[2] = {roi[nr - 1], bottom}, soft[2] = {roi[nr / 2], bottom};
  double soft_w[2] = {2.0, 5.0};
  double *a = malloc(sizeof(double) * 3 * n), *b = malloc(sizeof(double) * 3 * n);
  for (int run = 0; run < 6; run++) {
    int mode = run % 3, smooth = run / 3;
    memcpy(a, f.t.positions, sizeof(double) * 3 * n);
    memcpy(b, f.t.positions, sizeof(double) * 3 * n);
    dfm_system *s[2];
    dfm_info info[2];
    for (int k = 0; k < 2; k++) {
      dfm_params p = {.mode = (dfm_mode)mode, .roi = roi, .roi_count = nr, .handle = handle, .handle_count = nh,
                      .anchors = anchors, .anchor_count = 2, .soft = soft, .soft_weight = soft_w, .soft_count = 2,
                      .iterations = 2, .whole_mesh = k, .smooth_border = smooth};
      ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s[k], err, sizeof(err)), err);
      dfm_system_info(s[k], &info[k]);
    }
    ASSERT_EQ(info[0].vertices, n);
    ASSERT_EQ(info[0].free, info[1].free);
    ASSERT_EQ(info[0].factor_nnz, info[1].factor_nnz);
    drag_both(&f, s, a, b, top, 2, mode == DFM_BIHARMONIC ? 1e-8 : 1e-10, (dfm_mode)mode,
              "region and whole-mesh systems");
    if (mode == DFM_ARAP && !smooth) {
      double ea = dfm_system_arap_energy(s[0], a, 1), eb = dfm_system_arap_energy(s[1], b, 1);
      ASSERT_NEAR(ea, eb, 1e-9 * eb);
      dfm_xform x;
      dfm_xform_identity(&x);
      x.translate[2] = 0.05 * f.diag;
      ASSERT_OK(dfm_system_arap_iterate(s[0], &x, a, err, sizeof(err)), err);
      ASSERT_OK(dfm_system_arap_iterate(s[1], &x, b, err, sizeof(err)), err);
      for (size_t i = 0; i < 3 * (size_t)n; i++) ASSERT_NEAR(a[i], b[i], 1e-10 * f.diag);
    }
    dfm_system_destroy(s[0]);
    dfm_system_destroy(s[1]);
  }
  free(a);
  free(b);
  free(handle);
  free(roi);
  fixture_fini(&f);
}
