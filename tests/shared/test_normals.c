/*
 * test_normals.c — reference normals against the analytic sphere, across UV seams.
 */
#include "oracle.h"
#include "test.h"

/* Largest angle in degrees between the computed normals and p/|p|. */
static double max_sphere_error(const mesh *m, const float *normals) {
  double worst = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *p = m->positions + 3 * v, *n = normals + 3 * v;
    double pl = sqrt((double)p[0] * p[0] + (double)p[1] * p[1] + (double)p[2] * p[2]);
    double nl = sqrt((double)n[0] * n[0] + (double)n[1] * n[1] + (double)n[2] * n[2]);
    ASSERT_NEAR(nl, 1.0, 1e-6);
    double c = (p[0] * n[0] + p[1] * n[1] + p[2] * n[2]) / pl;
    double deg = acos(c > 1 ? 1 : c) * 180.0 / M_PI;
    if (deg > worst) worst = deg;
  }
  return worst;
}

static double icosphere_error(uint32_t levels, mesh_normal_mode mode) {
  mesh *m = oracle_icosphere(levels, 3.0);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  float *n = malloc(sizeof(float) * 3 * m->vertex_count);
  mesh_compute_normals(m, &t, NULL, mode, n);
  double e = max_sphere_error(m, n);
  free(n);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  return e;
}

TEST(normals_of_an_icosphere_match_the_analytic_sphere) {
  /* Discretisation error only: small, and shrinking with every subdivision. */
  for (int mode = 0; mode < 2; mode++) {
    double e4 = icosphere_error(4, (mesh_normal_mode)mode);
    double e5 = icosphere_error(5, (mesh_normal_mode)mode);
    fprintf(stderr, "mode %d: level 4 %.4f°, level 5 %.4f°\n", mode, e4, e5);
    ASSERT(e4 < 0.15);
    ASSERT(e5 < 0.6 * e4); /* about first order, limited by the valence-5 vertices */
  }
}

TEST(normals_do_not_crease_at_a_uv_seam) {
  mesh *m = oracle_uv_sphere(48, 64, 1.0);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_EQ(t.vertex_count, m->vertex_count - 47); /* one seam duplicate per inner ring */
  float *n = malloc(sizeof(float) * 3 * m->vertex_count);
  mesh_compute_normals(m, &t, NULL, MESH_NORMALS_ANGLE, n);
  /* Seam twins: first and last vertex of each ring, bitwise equal normals. */
  for (uint32_t j = 0; j < 47; j++) {
    uint32_t a = j * 65, b = a + 64;
    ASSERT(memcmp(n + 3 * a, n + 3 * b, sizeof(float) * 3) == 0);
  }
  ASSERT(max_sphere_error(m, n) < 0.1);
  free(n);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}

TEST(normals_follow_a_new_shape_without_rewelding) {
  /* Scaling the sphere by (2, 1, 1) gives an ellipsoid whose normal at p is ∝ (x/4, y, z). */
  mesh *m = oracle_icosphere(4, 1.0);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  float *shape = malloc(sizeof(float) * 3 * m->vertex_count);
  float *n = malloc(sizeof(float) * 3 * m->vertex_count);
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    shape[3 * v] = 2.0f * m->positions[3 * v];
    shape[3 * v + 1] = m->positions[3 * v + 1];
    shape[3 * v + 2] = m->positions[3 * v + 2];
  }
  mesh_compute_normals(m, &t, shape, MESH_NORMALS_ANGLE, n);
  double worst = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    double e[3] = {shape[3 * v] / 4.0, shape[3 * v + 1], shape[3 * v + 2]};
    double el = sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
    double c = (e[0] * n[3 * v] + e[1] * n[3 * v + 1] + e[2] * n[3 * v + 2]) / el;
    double deg = acos(c > 1 ? 1 : c) * 180.0 / M_PI;
    if (deg > worst) worst = deg;
  }
  ASSERT(worst < 0.5);
  free(shape);
  free(n);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}
