/*
 * test_mesh_order.c — the mesh's own fill-reducing order (dfm_mesh_order, dfm_params.mesh_order)
 * and its symbolic analysis (dfm_mesh_symbolic, dfm_params.mesh_symbolic): a whole-mesh gesture
 * that restricts the order, or pads its matrix to the analysis, solves as the gesture that runs
 * AMD on its own columns does (the same linear system, another elimination order: the same
 * answer to rounding), with a factor no bigger than a few percent; a region or a biharmonic
 * gesture does not take them.
 */
#include "dfm.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

static uint32_t topmost(const fixture *f) {
  uint32_t top = 0;
  for (uint32_t v = 0; v < f->t.vertex_count; v++)
    if (f->t.positions[3 * v + 1] > f->t.positions[3 * top + 1]) top = v;
  return top;
}

/* Every vertex once. */
static void assert_permutation(const int64_t *order, uint32_t n) {
  uint8_t *seen = calloc(n + 1, 1);
  for (uint32_t i = 0; i < n; i++) {
    ASSERT(order[i] >= 0 && order[i] < (int64_t)n);
    ASSERT_EQ(seen[order[i]], 0);
    seen[order[i]] = 1;
  }
  free(seen);
}

/* The vertices lowest along y, as anchors: `count` non-free columns that a padded system
 * (dfm_params.mesh_symbolic) keeps as identity columns. */
static uint32_t *lowest(const fixture *f, uint32_t count) {
  uint32_t n = f->t.vertex_count, *out = malloc(sizeof(uint32_t) * count);
  uint8_t *taken = calloc(n, 1);
  for (uint32_t i = 0; i < count; i++) {
    uint32_t best = UINT32_MAX;
    for (uint32_t v = 0; v < n; v++)
      if (!taken[v] && (best == UINT32_MAX || f->t.positions[3 * v + 1] < f->t.positions[3 * best + 1])) best = v;
    taken[best] = 1, out[i] = best;
  }
  free(taken);
  return out;
}

/* A system that orders its own columns against one given the mesh's order (variant 1) or the
 * mesh's symbolic analysis (variant 2, padded), with `anchors` of the lowest vertices held. */
static void compare(fixture *f, dfm_mode mode, int sharp, int variant, uint32_t anchors, const char *what) {
  char err[256];
  uint32_t n = f->t.vertex_count, top = topmost(f);
  int64_t *order = NULL;
  dfm_symbolic *sym = NULL;
  ASSERT_OK(dfm_mesh_order(&f->a, &order), NULL);
  assert_permutation(order, n);
  if (variant == 2) ASSERT_OK(dfm_mesh_symbolic(&f->a, order, &sym), NULL);
  uint32_t *handle, nh, *anchor = anchors ? lowest(f, anchors) : NULL;
  ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, &top, 1, INFINITY, 50, &handle, &nh), NULL);
  dfm_system *s[2];
  dfm_info info[2];
  for (int k = 0; k < 2; k++) {
    dfm_params p = {.mode = mode, .handle = handle, .handle_count = nh, .anchors = anchor, .anchor_count = anchors,
                    .iterations = 2, .smooth_border = !sharp, .mesh_order = k && variant == 1 ? order : NULL,
                    .mesh_symbolic = k ? sym : NULL};
    ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s[k], err, sizeof(err)), err);
    dfm_system_info(s[k], &info[k]);
    ASSERT_EQ(info[k].order_from_mesh, k);
    ASSERT_EQ(info[k].symbolic_from_mesh, k && variant == 2);
  }
  free(order); /* read only while the system is made */
  dfm_mesh_symbolic_free(sym);
  ASSERT_EQ(info[0].free, info[1].free);
  fprintf(stderr, "%s %s, %u anchors: nnz(L) %zu with its own AMD, %zu with the mesh's %s (%+.2f %%)\n", what,
          dfm_mode_name(mode), anchors, info[0].factor_nnz, info[1].factor_nnz,
          variant == 1 ? "order restricted" : "analysis, padded",
          100.0 * ((double)info[1].factor_nnz / (double)info[0].factor_nnz - 1));
  ASSERT((double)info[1].factor_nnz <= 1.05 * (double)info[0].factor_nnz);
  double *a = malloc(sizeof(double) * 3 * n), *b = malloc(sizeof(double) * 3 * n);
  memcpy(a, f->t.positions, sizeof(double) * 3 * n);
  memcpy(b, f->t.positions, sizeof(double) * 3 * n);
  drag_both(f, s, a, b, top, 2, 1e-9, mode, variant == 1 ? "own AMD and the mesh's order" : "own AMD and the mesh's analysis");
  for (int k = 0; k < 2; k++) dfm_system_destroy(s[k]);
  free(a);
  free(b);
  free(handle);
  free(anchor);
}

TEST(a_whole_mesh_gesture_given_the_meshs_order_solves_as_one_that_orders_its_own_columns) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  compare(&f, DFM_ARAP, 1, 1, 0, "icosphere 10k");
  compare(&f, DFM_LAPLACIAN, 0, 1, 0, "icosphere 10k");
  fixture_fini(&f);
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("bunny00.off"), NULL, &m, err, sizeof(err)), err);
  fixture_init(&f, m);
  compare(&f, DFM_ARAP, 1, 1, 0, "bunny00");
  compare(&f, DFM_ARAP, 0, 1, 0, "bunny00");
  fixture_fini(&f);
}

/* The padded system: the same matrix on the free columns, so the same drags to rounding, with
 * the handle alone and with anchors (the handle and anchors 1/256 of the mesh), sharp and
 * smooth. */
TEST(a_whole_mesh_gesture_given_the_meshs_analysis_solves_as_one_that_analyses_its_own_matrix) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("bunny00.off"), NULL, &m, err, sizeof(err)), err);
  fixture f;
  fixture_init(&f, m);
  uint32_t n = f.t.vertex_count;
  compare(&f, DFM_ARAP, 1, 2, 0, "bunny00");
  compare(&f, DFM_ARAP, 0, 2, 0, "bunny00");
  compare(&f, DFM_ARAP, 1, 2, n / 256 - 50, "bunny00");
  compare(&f, DFM_LAPLACIAN, 0, 2, n / 256 - 50, "bunny00");
  fixture_fini(&f);
}

/* The analysis is of one mesh, for supernodal factors and few fixed vertices: another mesh's,
 * a simplicial factor, anchors on 1/20 of the mesh (whose own order has less fill), a region
 * or a biharmonic gesture analyse their own. */
TEST(a_gesture_the_meshs_analysis_does_not_fit_analyses_its_own_matrix) {
  fixture f, g;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  fixture_init(&g, oracle_icosphere(4, 1.0));
  char err[256];
  uint32_t top = topmost(&f);
  int64_t *order = NULL, *other = NULL;
  dfm_symbolic *sym = NULL, *wrong = NULL;
  ASSERT_OK(dfm_mesh_order(&f.a, &order), NULL);
  ASSERT_OK(dfm_mesh_symbolic(&f.a, order, &sym), NULL);
  ASSERT_OK(dfm_mesh_order(&g.a, &other), NULL);
  ASSERT_OK(dfm_mesh_symbolic(&g.a, other, &wrong), NULL);
  ASSERT(dfm_mesh_symbolic_bytes(sym) > sizeof(int64_t) * 2 * f.t.vertex_count);
  uint32_t *handle, nh, *roi, nr, many = f.t.vertex_count / 20, *anchor = lowest(&f, many);
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, INFINITY, 20, &handle, &nh), NULL);
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, INFINITY, f.t.vertex_count * 9 / 10, &roi, &nr), NULL);
  struct {
    dfm_mode mode;
    const uint32_t *roi;
    uint32_t roi_count, anchors;
    dfm_factor factor;
    const dfm_symbolic *sym;
    int takes;
  } cases[] = {{DFM_ARAP, NULL, 0, 0, DFM_FACTOR_AUTO, sym, 1},         {DFM_ARAP, NULL, 0, 0, DFM_FACTOR_AUTO, wrong, 0},
               {DFM_ARAP, NULL, 0, 0, DFM_FACTOR_SIMPLICIAL, sym, 0},  {DFM_ARAP, NULL, 0, many, DFM_FACTOR_AUTO, sym, 0},
               {DFM_ARAP, roi, nr, 0, DFM_FACTOR_AUTO, sym, 0},        {DFM_BIHARMONIC, NULL, 0, 0, DFM_FACTOR_AUTO, sym, 0}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    dfm_params p = {.mode = cases[c].mode, .handle = handle, .handle_count = nh, .roi = cases[c].roi,
                    .roi_count = cases[c].roi_count, .anchors = anchor, .anchor_count = cases[c].anchors,
                    .iterations = 1, .factor = cases[c].factor, .mesh_symbolic = cases[c].sym};
    dfm_system *s;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s, &info);
    if (info.symbolic_from_mesh != cases[c].takes) test__fail(__FILE__, __LINE__, "case %zu: symbolic_from_mesh %d", c, info.symbolic_from_mesh);
    dfm_system_destroy(s);
  }
  free(order), free(other);
  dfm_mesh_symbolic_free(sym);
  dfm_mesh_symbolic_free(wrong);
  free(handle);
  free(roi);
  free(anchor);
  fixture_fini(&f);
  fixture_fini(&g);
}

TEST(a_region_or_a_biharmonic_gesture_orders_its_own_columns_even_given_the_meshs_order) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  char err[256];
  uint32_t top = topmost(&f);
  int64_t *order = NULL;
  ASSERT_OK(dfm_mesh_order(&f.a, &order), NULL);
  uint32_t *handle, nh, *roi, nr;
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, INFINITY, 50, &handle, &nh), NULL);
  /* A region of 90 % of the mesh: solved on the whole mesh's system, but too many columns
   * are fixed for the restriction to stay a good order. */
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, INFINITY, f.t.vertex_count * 9 / 10, &roi, &nr), NULL);
  struct {
    dfm_mode mode;
    const uint32_t *roi;
    uint32_t roi_count;
  } cases[] = {{DFM_ARAP, roi, nr}, {DFM_LAPLACIAN, roi, nr}, {DFM_BIHARMONIC, NULL, 0}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    dfm_params p = {.mode = cases[c].mode, .handle = handle, .handle_count = nh, .roi = cases[c].roi,
                    .roi_count = cases[c].roi_count, .iterations = 1, .mesh_order = order};
    dfm_system *s;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s, &info);
    ASSERT_EQ(info.order_from_mesh, 0);
    dfm_system_destroy(s);
  }
  free(order);
  free(handle);
  free(roi);
  fixture_fini(&f);
}
