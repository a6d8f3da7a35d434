/*
 * test_demo.c — the generated demo head: size, closedness, targets, symmetry, determinism.
 */
#include <math.h>

#include "oracle.h"
#include "test.h"

static const char *required[] = {"jaw_open",  "smile_L",    "smile_R",    "brow_up_L", "brow_up_R",
                                 "blink_L",   "blink_R",    "cheek_puff", "nose_wide", "lip_pucker",
                                 "frown_L",   "frown_R"};

TEST(demo_head_is_a_closed_manifold_of_the_right_size) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  ASSERT(m->vertex_count >= 20000 && m->vertex_count <= 60000);
  mesh_topology t;
  mesh_stats s;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_compute_stats(m, &t, &s), NULL);
  ASSERT(s.topology_vertices < s.vertices); /* UV seam: render vertices split */
  ASSERT_EQ(s.components, 1);
  ASSERT_EQ(s.boundary_edges, 0);
  ASSERT_EQ(s.nonmanifold_edges, 0);
  ASSERT_EQ(s.degenerate_triangles, 0);
  ASSERT_EQ((int64_t)s.topology_vertices - 3 * (int64_t)s.triangles / 2 + s.triangles, 2); /* genus 0 */
  ASSERT(m->normals != NULL && m->uvs != NULL);
  /* Head-sized, in metres, +Y up, facing +Z. */
  double h = m->bbox_max[1] - m->bbox_min[1];
  ASSERT(h > 0.15 && h < 0.4);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}

TEST(demo_head_has_named_localized_blendshapes) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  ASSERT(m->target_count >= 12);
  for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
    int t = mesh_find_target(m, required[i]);
    if (t < 0) test__fail(__FILE__, __LINE__, "missing target %s", required[i]);
    const mesh_target *tg = &m->targets[t];
    /* Localized: moves something, but far from everything; deltas a few millimetres. */
    ASSERT(tg->count > 50);
    ASSERT(tg->count < m->vertex_count / 2);
    double biggest = 0;
    for (uint32_t k = 0; k < tg->count; k++) {
      const float *d = tg->deltas + 3 * k;
      double len = sqrt((double)d[0] * d[0] + (double)d[1] * d[1] + (double)d[2] * d[2]);
      if (len > biggest) biggest = len;
    }
    ASSERT(biggest > 0.001 && biggest < 0.05);
  }
  mesh_destroy(m);
}


static int64_t find_mirror(const mesh *m, uint32_t v, const uint32_t *sorted) {
  float q[3] = {-m->positions[3 * v], m->positions[3 * v + 1], m->positions[3 * v + 2]};
  uint32_t lo = 0, hi = m->vertex_count;
  while (lo < hi) { /* sorted by x */
    uint32_t mid = (lo + hi) / 2;
    if (m->positions[3 * sorted[mid]] < q[0] - 1e-6f) lo = mid + 1;
    else hi = mid;
  }
  for (uint32_t i = lo; i < m->vertex_count && m->positions[3 * sorted[i]] <= q[0] + 1e-6f; i++) {
    const float *r = m->positions + 3 * sorted[i];
    if (fabsf(r[1] - q[1]) < 1e-6f && fabsf(r[2] - q[2]) < 1e-6f) return sorted[i];
  }
  return -1;
}

static const mesh *sort_mesh;
static int cmp_x(const void *a, const void *b) {
  float x = sort_mesh->positions[3 * *(const uint32_t *)a], y = sort_mesh->positions[3 * *(const uint32_t *)b];
  return (x > y) - (x < y);
}

TEST(demo_head_left_and_right_shapes_mirror_each_other) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  uint32_t *sorted = malloc(sizeof(uint32_t) * m->vertex_count);
  for (uint32_t v = 0; v < m->vertex_count; v++) sorted[v] = v;
  sort_mesh = m;
  qsort(sorted, m->vertex_count, sizeof(uint32_t), cmp_x);
  float *dl = malloc(sizeof(float) * 3 * m->vertex_count), *dr = malloc(sizeof(float) * 3 * m->vertex_count);
  float *w = calloc(m->target_count, sizeof(float));
  const char *pairs[][2] = {{"smile_L", "smile_R"}, {"brow_up_L", "brow_up_R"}, {"blink_L", "blink_R"},
                            {"frown_L", "frown_R"}, {"eyeLookDownLeft", "eyeLookDownRight"},
                            {"eyeLookOutLeft", "eyeLookOutRight"}, {"eyeSquintLeft", "eyeSquintRight"},
                            {"eyeWideLeft", "eyeWideRight"}, {"mouthDimpleLeft", "mouthDimpleRight"},
                            {"mouthStretchLeft", "mouthStretchRight"}, {"mouthPressLeft", "mouthPressRight"},
                            {"mouthLowerDownLeft", "mouthLowerDownRight"}, {"mouthUpperUpLeft", "mouthUpperUpRight"},
                            {"browOuterUpLeft", "browOuterUpRight"}, {"cheekSquintLeft", "cheekSquintRight"},
                            {"noseSneerLeft", "noseSneerRight"}};
  for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
    int l = mesh_find_target(m, pairs[p][0]), r = mesh_find_target(m, pairs[p][1]);
    ASSERT(l >= 0 && r >= 0);
    memset(w, 0, sizeof(float) * m->target_count);
    w[l] = 1;
    mesh_evaluate(m, w, NULL, dl);
    memset(w, 0, sizeof(float) * m->target_count);
    w[r] = 1;
    mesh_evaluate(m, w, NULL, dr);
    uint32_t checked = 0;
    double left_moves_left = 0;
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      int64_t mv = find_mirror(m, v, sorted);
      if (mv < 0) test__fail(__FILE__, __LINE__, "vertex %u has no mirror image", v);
      const float *p0 = m->positions + 3 * v, *pm = m->positions + 3 * mv;
      /* delta_R(v) = M delta_L(mirror(v)), M = diag(-1, 1, 1) */
      ASSERT_NEAR(dr[3 * v] - p0[0], -(dl[3 * mv] - pm[0]), 1e-6);
      ASSERT_NEAR(dr[3 * v + 1] - p0[1], dl[3 * mv + 1] - pm[1], 1e-6);
      ASSERT_NEAR(dr[3 * v + 2] - p0[2], dl[3 * mv + 2] - pm[2], 1e-6);
      double move = fabs(dl[3 * v] - p0[0]) + fabs(dl[3 * v + 1] - p0[1]) + fabs(dl[3 * v + 2] - p0[2]);
      left_moves_left += p0[0] > 0 ? move : -move;
      checked++;
    }
    ASSERT_EQ(checked, m->vertex_count);
    ASSERT(left_moves_left > 0); /* _L is the character's left: +X */
  }
  free(w);
  free(dl);
  free(dr);
  free(sorted);
  mesh_destroy(m);
}

/* ARKit's 52 blendshape names, from Apple's ARFaceAnchor.BlendShapeLocation documentation. */
static const char *const ARKIT[52] = {
    "browDownLeft", "browDownRight", "browInnerUp", "browOuterUpLeft", "browOuterUpRight", "cheekPuff",
    "cheekSquintLeft", "cheekSquintRight", "eyeBlinkLeft", "eyeBlinkRight", "eyeLookDownLeft",
    "eyeLookDownRight", "eyeLookInLeft", "eyeLookInRight", "eyeLookOutLeft", "eyeLookOutRight", "eyeLookUpLeft",
    "eyeLookUpRight", "eyeSquintLeft", "eyeSquintRight", "eyeWideLeft", "eyeWideRight", "jawForward", "jawLeft",
    "jawOpen", "jawRight", "mouthClose", "mouthDimpleLeft", "mouthDimpleRight", "mouthFrownLeft",
    "mouthFrownRight", "mouthFunnel", "mouthLeft", "mouthLowerDownLeft", "mouthLowerDownRight", "mouthPressLeft",
    "mouthPressRight", "mouthPucker", "mouthRight", "mouthRollLower", "mouthRollUpper", "mouthShrugLower",
    "mouthShrugUpper", "mouthSmileLeft", "mouthSmileRight", "mouthStretchLeft", "mouthStretchRight",
    "mouthUpperUpLeft", "mouthUpperUpRight", "noseSneerLeft", "noseSneerRight", "tongueOut"};

static void tri_normal(const float *p, const uint32_t *t, double n[3]) {
  const float *a = p + 3 * t[0], *b = p + 3 * t[1], *c = p + 3 * t[2];
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  n[0] = u[1] * v[2] - u[2] * v[1], n[1] = u[2] * v[0] - u[0] * v[2], n[2] = u[0] * v[1] - u[1] * v[0];
}

TEST(demo_head_has_all_52_arkit_targets_none_of_which_folds_a_triangle) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  ASSERT_EQ(m->target_count, 16 + 52); /* its own 16 stay, first */
  for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) ASSERT(mesh_find_target(m, required[i]) < 16);
  float *pos = malloc(sizeof(float) * 3 * m->vertex_count), *w = calloc(m->target_count, sizeof(float));
  for (int k = 0; k < 52; k++) {
    int t = mesh_find_target(m, ARKIT[k]);
    if (t < 16) test__fail(__FILE__, __LINE__, "no ARKit target %s after the demo head's own", ARKIT[k]);
    const mesh_target *tg = &m->targets[t];
    ASSERT(tg->count > 50 && tg->count < m->vertex_count / 2);
    double biggest = 0;
    for (uint32_t v = 0; v < tg->count; v++) {
      const float *d = tg->deltas + 3 * v;
      biggest = fmax(biggest, sqrt((double)d[0] * d[0] + (double)d[1] * d[1] + (double)d[2] * d[2]));
    }
    if (!(biggest > 0.0005 && biggest < 0.05)) test__fail(__FILE__, __LINE__, "%s moves %g m", ARKIT[k], biggest);
    /* At full weight no triangle turns over or collapses: its normal keeps within 90 degrees of
     * the rest normal and its area stays above a tenth of the rest area. */
    memset(w, 0, sizeof(float) * m->target_count);
    w[t] = 1;
    mesh_evaluate(m, w, NULL, pos);
    for (uint32_t f = 0; f < m->triangle_count; f++) {
      double n0[3], n1[3];
      tri_normal(m->positions, m->triangles + 3 * f, n0);
      tri_normal(pos, m->triangles + 3 * f, n1);
      double a0 = sqrt(n0[0] * n0[0] + n0[1] * n0[1] + n0[2] * n0[2]);
      double a1 = sqrt(n1[0] * n1[0] + n1[1] * n1[1] + n1[2] * n1[2]);
      double c = (n0[0] * n1[0] + n0[1] * n1[1] + n0[2] * n1[2]) / (a0 * a1);
      if (!(c > 0.0) || a1 < 0.1 * a0)
        test__fail(__FILE__, __LINE__, "%s folds triangle %u (cos %.3f, area x%.3f)", ARKIT[k], f, c, a1 / a0);
    }
  }
  free(pos);
  free(w);
  mesh_destroy(m);
}

TEST(demo_head_is_deterministic) {
  mesh *a = NULL, *b = NULL;
  ASSERT_OK(mesh_demo_head(&a), NULL);
  ASSERT_OK(mesh_demo_head(&b), NULL);
  ASSERT_EQ(a->vertex_count, b->vertex_count);
  ASSERT(memcmp(a->positions, b->positions, sizeof(float) * 3 * a->vertex_count) == 0);
  ASSERT(memcmp(a->triangles, b->triangles, sizeof(uint32_t) * 3 * a->triangle_count) == 0);
  for (uint32_t t = 0; t < a->target_count; t++) {
    ASSERT_EQ(a->targets[t].count, b->targets[t].count);
    ASSERT(memcmp(a->targets[t].deltas, b->targets[t].deltas, sizeof(float) * 3 * a->targets[t].count) == 0);
  }
  mesh_destroy(a);
  mesh_destroy(b);
}

TEST(icosphere_has_closed_form_counts_and_lies_on_the_sphere) {
  for (uint32_t lv = 0; lv <= 4; lv++) {
    mesh *m = NULL;
    ASSERT_OK(mesh_demo_icosphere(lv, 2.5, &m), NULL);
    uint32_t pow4 = 1u << (2 * lv);
    ASSERT_EQ(m->vertex_count, 10 * pow4 + 2);
    ASSERT_EQ(m->triangle_count, 20 * pow4);
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      const float *p = m->positions + 3 * (size_t)v;
      double r = sqrt((double)p[0] * p[0] + (double)p[1] * p[1] + (double)p[2] * p[2]);
      ASSERT_NEAR(r, 2.5, 1e-5);
    }
    mesh_topology t;
    mesh_stats s;
    ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
    ASSERT_OK(mesh_compute_stats(m, &t, &s), NULL);
    ASSERT_EQ(s.boundary_edges, 0);
    ASSERT_EQ(s.nonmanifold_edges, 0);
    ASSERT_EQ(s.components, 1);
    /* Outward winding: the signed volume is positive and below the sphere's. */
    double vol = 0;
    for (uint32_t f = 0; f < m->triangle_count; f++) {
      const float *a = m->positions + 3 * (size_t)m->triangles[3 * f];
      const float *b = m->positions + 3 * (size_t)m->triangles[3 * f + 1];
      const float *c = m->positions + 3 * (size_t)m->triangles[3 * f + 2];
      vol += (a[0] * ((double)b[1] * c[2] - (double)b[2] * c[1]) - a[1] * ((double)b[0] * c[2] - (double)b[2] * c[0]) +
              a[2] * ((double)b[0] * c[1] - (double)b[1] * c[0])) / 6.0;
    }
    double sphere = 4.0 / 3.0 * M_PI * 2.5 * 2.5 * 2.5;
    ASSERT(vol > 0.6 * sphere && vol < sphere);
    mesh_topology_fini(&t);
    mesh_destroy(m);
  }
}
