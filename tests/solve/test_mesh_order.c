/*
 * test_mesh_order.c — the mesh's own fill-reducing order (dfm_mesh_order, dfm_params.mesh_order):
 * a whole-mesh gesture that restricts it solves as the gesture that runs AMD on its own columns
 * does (the same linear system, another elimination order: the same answer to rounding), with
 * a factor no bigger than a few percent; a region or a biharmonic gesture does not take it.
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

static void compare(fixture *f, dfm_mode mode, int sharp, const char *what) {
  char err[256];
  uint32_t n = f->t.vertex_count, top = topmost(f);
  int64_t *order = NULL;
  ASSERT_OK(dfm_mesh_order(&f->a, &order), NULL);
  assert_permutation(order, n);
  uint32_t *handle, nh;
  ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, &top, 1, INFINITY, 50, &handle, &nh), NULL);
  dfm_system *s[2];
  dfm_info info[2];
  for (int k = 0; k < 2; k++) {
    dfm_params p = {.mode = mode, .handle = handle, .handle_count = nh, .iterations = 2, .smooth_border = !sharp,
                    .mesh_order = k ? order : NULL};
    ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s[k], err, sizeof(err)), err);
    dfm_system_info(s[k], &info[k]);
    ASSERT_EQ(info[k].order_from_mesh, k);
  }
  free(order); /* read only while the system is made */
  ASSERT_EQ(info[0].free, info[1].free);
  fprintf(stderr, "%s %s: nnz(L) %zu with its own AMD, %zu with the mesh's order restricted (%+.2f %%)\n", what,
          dfm_mode_name(mode), info[0].factor_nnz, info[1].factor_nnz,
          100.0 * ((double)info[1].factor_nnz / (double)info[0].factor_nnz - 1));
  ASSERT((double)info[1].factor_nnz <= 1.05 * (double)info[0].factor_nnz);
  double *a = malloc(sizeof(double) * 3 * n), *b = malloc(sizeof(double) * 3 * n);
  memcpy(a, f->t.positions, sizeof(double) * 3 * n);
  memcpy(b, f->t.positions, sizeof(double) * 3 * n);
  drag_both(f, s, a, b, top, 2, 1e-9, mode, "own AMD and the mesh's order");
  for (int k = 0; k < 2; k++) dfm_system_destroy(s[k]);
  free(a);
  free(b);
  free(handle);
}

TEST(a_whole_mesh_gesture_given_the_meshs_order_solves_as_one_that_orders_its_own_columns) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  compare(&f, DFM_ARAP, 1, "icosphere 10k");
  compare(&f, DFM_LAPLACIAN, 0, "icosphere 10k");
  fixture_fini(&f);
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("bunny00.off"), NULL, &m, err, sizeof(err)), err);
  fixture_init(&f, m);
  compare(&f, DFM_ARAP, 1, "bunny00");
  compare(&f, DFM_ARAP, 0, "bunny00");
  fixture_fini(&f);
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
