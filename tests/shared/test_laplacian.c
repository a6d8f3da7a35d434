/*
 * test_laplacian.c — cotangent and uniform weights, vertex areas, against closed forms.
 */
#include "oracle.h"
#include "test.h"

/* Builds topology + adjacency + weights for a mesh. */
typedef struct lap {
  mesh_topology t;
  mesh_adjacency a;
  double *w;
} lap;

static void lap_init(lap *l, const mesh *m, mesh_cotan_mode mode) {
  ASSERT_OK(mesh_topology_init(&l->t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&l->a, l->t.vertex_count, l->t.triangles, l->t.triangle_count), NULL);
  l->w = malloc(sizeof(double) * (l->a.vv_offsets[l->a.vertex_count] + 1));
  mesh_cotan_weights(&l->a, l->t.positions, l->t.triangles, l->t.triangle_count, mode, l->w);
}

static void lap_fini(lap *l) {
  free(l->w);
  mesh_adjacency_fini(&l->a);
  mesh_topology_fini(&l->t);
}

static double weight(const lap *l, uint32_t i, uint32_t j) {
  int64_t e = mesh_adjacency_edge(&l->a, i, j);
  ASSERT(e >= 0);
  return l->w[e];
}

TEST(cotan_weights_of_right_triangle_grid_are_the_five_point_stencil) {
  /* Squares split along one diagonal: the angles opposite an axis edge are 45° (cot 1) on both
   * sides, those opposite a diagonal are 90° (cot 0). So interior axis edges weigh 1, diagonals
   * 0, boundary axis edges 1/2 — for any spacing. */
  const uint32_t n = 8, side = n + 1;
  for (int s = 0; s < 2; s++) {
    mesh *m = oracle_grid(n, s ? 0.037 : 1.0);
    lap l;
    lap_init(&l, m, MESH_COTAN_RAW);
    for (uint32_t j = 0; j < side; j++)
      for (uint32_t i = 0; i < side; i++) {
        uint32_t v = j * side + i;
        if (i + 1 < side) {
          double expect = (j == 0 || j == n) ? 0.5 : 1.0;
          ASSERT_NEAR(weight(&l, v, v + 1), expect, 1e-6);
          ASSERT_NEAR(weight(&l, v + 1, v), expect, 1e-6);
        }
        if (j + 1 < side) {
          double expect = (i == 0 || i == n) ? 0.5 : 1.0;
          ASSERT_NEAR(weight(&l, v, v + side), expect, 1e-6);
        }
        if (i + 1 < side && j + 1 < side) ASSERT_NEAR(weight(&l, v, v + side + 1), 0.0, 1e-6);
      }
    lap_fini(&l);
    mesh_destroy(m);
  }
}

TEST(cotan_weights_of_equilateral_grid_are_one_over_root_three) {
  const uint32_t n = 6, side = n + 1;
  mesh *m = oracle_equilateral_grid(n, 0.5);
  lap l;
  lap_init(&l, m, MESH_COTAN_CLAMPED);
  /* Interior edge: two 60° angles, (cot 60° + cot 60°)/2 = 1/√3. */
  uint32_t v = 3 * side + 3;
  ASSERT_NEAR(weight(&l, v, v + 1), 1.0 / sqrt(3.0), 1e-6);
  ASSERT_NEAR(weight(&l, v, v + side), 1.0 / sqrt(3.0), 1e-6);
  ASSERT_NEAR(weight(&l, v, v - 1), 1.0 / sqrt(3.0), 1e-6);
  /* Boundary edge on the bottom row: one 60° angle. */
  ASSERT_NEAR(weight(&l, 1, 2), 0.5 / sqrt(3.0), 1e-6);
  /* Every interior vertex has six neighbours. */
  ASSERT_EQ(l.a.vv_offsets[v + 1] - l.a.vv_offsets[v], 6);
  lap_fini(&l);
  mesh_destroy(m);
}

TEST(cotan_weights_are_clamped_where_angles_are_obtuse) {
  /* One triangle with a 120° angle at vertex 2, opposite edge (0, 1). */
  mesh *m = mesh_create();
  ASSERT_OK(mesh_alloc(m, 3, 1, 0, 0), NULL);
  float p[9] = {-1, 0, 0, 1, 0, 0, 0, (float)(1.0 / sqrt(3.0)), 0};
  memcpy(m->positions, p, sizeof(p));
  uint32_t t[3] = {0, 1, 2};
  memcpy(m->triangles, t, sizeof(t));
  mesh_update_bounds(m);
  lap raw, clamped;
  lap_init(&raw, m, MESH_COTAN_RAW);
  lap_init(&clamped, m, MESH_COTAN_CLAMPED);
  ASSERT_NEAR(weight(&raw, 0, 1), 0.5 / tan(2.0 * M_PI / 3.0), 1e-6); /* cot 120° / 2 < 0 */
  ASSERT_NEAR(weight(&clamped, 0, 1), 0.0, 0.0);
  ASSERT_NEAR(weight(&clamped, 0, 2), 0.5 / tan(M_PI / 6.0), 1e-6);   /* cot 30° / 2 */
  lap_fini(&raw);
  lap_fini(&clamped);
  mesh_destroy(m);
}

TEST(cotan_weights_stay_finite_on_degenerate_triangles) {
  /* A collinear triangle and one with two coincident corners, glued to a healthy one. */
  mesh *m = mesh_create();
  ASSERT_OK(mesh_alloc(m, 6, 3, 0, 0), NULL);
  float p[18] = {0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 1, 0, 5, 5, 5, 5, 5, 5.0000000f};
  memcpy(m->positions, p, sizeof(p));
  uint32_t t[9] = {0, 1, 2, 0, 1, 3, 3, 4, 1};
  memcpy(m->triangles, t, sizeof(t));
  m->positions[3 * 5] = 0.0f; /* vertex 5 unused */
  mesh_update_bounds(m);
  for (int mode = 0; mode < 2; mode++) {
    lap l;
    lap_init(&l, m, (mesh_cotan_mode)mode);
    for (uint32_t e = 0; e < l.a.vv_offsets[l.a.vertex_count]; e++) {
      ASSERT(isfinite(l.w[e]));
      ASSERT(fabs(l.w[e]) <= MESH_COT_MAX);
      if (mode == MESH_COTAN_CLAMPED) ASSERT(l.w[e] >= 0.0);
    }
    lap_fini(&l);
  }
  mesh_destroy(m);
}

TEST(uniform_weights_are_one_per_neighbour) {
  mesh *m = oracle_icosphere(2, 1.0);
  lap l;
  lap_init(&l, m, MESH_COTAN_CLAMPED);
  mesh_uniform_weights(&l.a, l.w);
  uint32_t fives = 0;
  for (uint32_t v = 0; v < l.a.vertex_count; v++) {
    double sum = 0;
    for (uint32_t e = l.a.vv_offsets[v]; e < l.a.vv_offsets[v + 1]; e++) sum += l.w[e];
    uint32_t deg = l.a.vv_offsets[v + 1] - l.a.vv_offsets[v];
    ASSERT_NEAR(sum, deg, 0);
    ASSERT(deg == 5 || deg == 6);
    fives += deg == 5;
  }
  ASSERT_EQ(fives, 12); /* the icosahedron's original vertices */
  lap_fini(&l);
  mesh_destroy(m);
}

static double heron_total(const mesh_topology *t) {
  double total = 0;
  for (uint32_t f = 0; f < t->triangle_count; f++) {
    const uint32_t *tri = t->triangles + 3 * f;
    total += oracle_heron_area(t->positions + 3 * tri[0], t->positions + 3 * tri[1],
                               t->positions + 3 * tri[2]);
  }
  return total;
}

static void check_areas_sum(mesh *m) {
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  double *areas = malloc(sizeof(double) * t.vertex_count);
  double expect = heron_total(&t);
  for (int mode = 0; mode < 3; mode++) {
    if (mode == MESH_AREA_VORONOI) continue; /* pure Voronoi only sums right without obtuse */
    mesh_vertex_areas(t.vertex_count, t.positions, t.triangles, t.triangle_count,
                      (mesh_area_mode)mode, areas);
    double sum = 0;
    for (uint32_t v = 0; v < t.vertex_count; v++) {
      ASSERT(areas[v] >= 0.0);
      sum += areas[v];
    }
    ASSERT_NEAR(sum, expect, 1e-9 * expect);
  }
  free(areas);
  mesh_topology_fini(&t);
}

TEST(mixed_and_barycentric_areas_sum_to_surface_area) {
  mesh *sphere = oracle_icosphere(3, 2.0);
  check_areas_sum(sphere);
  mesh_destroy(sphere);
  char err[MESH_ERR_LEN];
  mesh *arm = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("armadillo.off"), NULL, &arm, err, sizeof(err)), err);
  check_areas_sum(arm); /* a real scan, with plenty of obtuse triangles */
  mesh_destroy(arm);
}

TEST(voronoi_area_of_a_grid_vertex_is_its_dual_square) {
  /* Right triangles' circumcentres sit on the hypotenuse midpoints: an interior vertex's
   * Voronoi cell is the h × h square around it. */
  const uint32_t n = 6, side = n + 1;
  const double h = 0.25;
  mesh *m = oracle_grid(n, h);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  double *areas = malloc(sizeof(double) * t.vertex_count);
  for (int mode = 0; mode < 2; mode++) {
    mesh_vertex_areas(t.vertex_count, t.positions, t.triangles, t.triangle_count,
                      (mesh_area_mode)mode, areas);
    ASSERT_NEAR(areas[3 * side + 3], h * h, 1e-9);
    ASSERT_NEAR(areas[0 * side + 3], h * h / 2, 1e-9); /* edge vertex: half a cell */
  }
  free(areas);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}
