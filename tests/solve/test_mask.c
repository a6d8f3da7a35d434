/*
 * test_mask.c — dfm_mask.c against closed forms on a regular grid: a dab's values are its
 * falloff, the vertices outside every dab keep their bits; the feather a brush takes under a mask
 * is the smoothstep of the distance to the held part (on a grid the edge path to a held column is
 * straight along the row); the auto-masks hold the other loose part, the far side, the boundary.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dfm_mask.h"
#include "oracle.h"
#include "test.h"

#define N 20     /* squares per side */
#define H 0.01   /* spacing */

typedef struct grid {
  mesh *m;
  mesh_adjacency adj;
  double *p;
  uint32_t n;
} grid;

static void grid_init(grid *g) {
  g->m = oracle_grid(N, H);
  g->n = g->m->vertex_count;
  ASSERT_OK(mesh_adjacency_init(&g->adj, g->n, g->m->triangles, g->m->triangle_count), NULL);
  g->p = malloc(sizeof(double) * 3 * g->n);
  for (uint32_t i = 0; i < 3 * g->n; i++) g->p[i] = g->m->positions[i];
}

static void grid_fini(grid *g) {
  mesh_adjacency_fini(&g->adj);
  mesh_destroy(g->m);
  free(g->p);
}

TEST(mask_dabs_take_their_falloff_and_leave_every_other_value_bit_for_bit) {
  grid g;
  grid_init(&g);
  float *m = calloc(g.n, sizeof(float));
  for (uint32_t v = 0; v < g.n; v++) m[v] = (float)(v % 7) / 13.0f; /* some values to keep */
  float *before = malloc(sizeof(float) * g.n);
  memcpy(before, m, sizeof(float) * g.n);
  uint8_t *changed = calloc(g.n, 1);
  dfm_brush_sample d = {{0.1, 0.1, 0}, {0, 0, 0}, 0.05, 0.5};
  char err[256];
  ASSERT_OK(dfm_mask_dabs(DFM_MASK_PAINT, DFM_FALLOFF_LINEAR, &g.adj, g.p, &d, 1, m, changed, err, sizeof(err)), err);
  for (uint32_t v = 0; v < g.n; v++) {
    double dist = hypot(g.p[3 * v] - 0.1, g.p[3 * v + 1] - 0.1);
    if (dist < 0.05) {
      double want = fmin(1.0, before[v] + 0.5 * (1 - dist / 0.05));
      ASSERT_NEAR(m[v], want, 1e-6);
    } else {
      ASSERT(memcmp(&m[v], &before[v], sizeof(float)) == 0);
      ASSERT_EQ(changed[v], 0);
    }
  }
  /* Erasing the same dab at full strength twice leaves 0 inside; smoothing moves values
   * towards their neighbours' mean, within [0, 1]. */
  d.strength = 1.0;
  dfm_brush_sample two[2] = {d, d};
  ASSERT_OK(dfm_mask_dabs(DFM_MASK_ERASE, DFM_FALLOFF_CONSTANT, &g.adj, g.p, two, 2, m, NULL, err, sizeof(err)), err);
  for (uint32_t v = 0; v < g.n; v++)
    if (hypot(g.p[3 * v] - 0.1, g.p[3 * v + 1] - 0.1) < 0.05) ASSERT(m[v] == 0.0f);
  ASSERT_OK(dfm_mask_dabs(DFM_MASK_SMOOTH, DFM_FALLOFF_SMOOTHSTEP, &g.adj, g.p, &d, 1, m, NULL, err, sizeof(err)), err);
  for (uint32_t v = 0; v < g.n; v++) ASSERT(m[v] >= 0.0f && m[v] <= 1.0f);
  /* Refusals: a strength over 1 or below 0, a radius of 0. */
  d.strength = 1.5;
  ASSERT_EQ(dfm_mask_dabs(DFM_MASK_PAINT, DFM_FALLOFF_LINEAR, &g.adj, g.p, &d, 1, m, NULL, err, sizeof(err)), DFM_EINVAL);
  d.strength = -0.5;
  ASSERT_EQ(dfm_mask_dabs(DFM_MASK_PAINT, DFM_FALLOFF_LINEAR, &g.adj, g.p, &d, 1, m, NULL, err, sizeof(err)), DFM_EINVAL);
  d.strength = 0.5, d.radius = 0;
  ASSERT_EQ(dfm_mask_dabs(DFM_MASK_PAINT, DFM_FALLOFF_LINEAR, &g.adj, g.p, &d, 1, m, NULL, err, sizeof(err)), DFM_EINVAL);
  free(m), free(before), free(changed);
  grid_fini(&g);
}

TEST(the_feather_is_the_smoothstep_of_the_distance_to_the_held_columns) {
  grid g;
  grid_init(&g);
  float *m = calloc(g.n, sizeof(float)), *take = malloc(sizeof(float) * g.n);
  /* Columns 0..4 held fully, column 5 half: take = (1 - m) · s(k h / band) for column k. */
  for (uint32_t v = 0; v < g.n; v++) {
    uint32_t i = v % (N + 1);
    m[v] = i <= 4 ? 1.0f : i == 5 ? 0.5f : 0.0f;
  }
  const double band = 0.06;
  ASSERT_OK(dfm_mask_free(&g.adj, g.p, m, band, take), NULL);
  for (uint32_t v = 0; v < g.n; v++) {
    uint32_t i = v % (N + 1);
    double t = fmin(1.0, (i <= 4 ? 0 : (i - 4) * H) / band);
    double want = (1.0 - m[v]) * t * t * (3 - 2 * t);
    ASSERT_NEAR(take[v], want, 1e-5);
    if (i <= 4) ASSERT(take[v] == 0.0f); /* held: nothing at all */
  }
  /* Without a mask, or a band of 0, the feather is 1 − mask. */
  ASSERT_OK(dfm_mask_free(&g.adj, g.p, NULL, band, take), NULL);
  for (uint32_t v = 0; v < g.n; v++) ASSERT(take[v] == 1.0f);
  ASSERT_OK(dfm_mask_free(&g.adj, g.p, m, 0.0, take), NULL);
  for (uint32_t v = 0; v < g.n; v++) ASSERT(take[v] == 1.0f - m[v]);
  free(m), free(take);
  grid_fini(&g);
}

TEST(auto_masks_hold_the_other_part_the_turned_away_side_and_the_boundary) {
  grid g;
  grid_init(&g);
  float *a = malloc(sizeof(float) * g.n);
  /* A grid is open: its boundary is the outer ring (two rings with rings = 2). */
  ASSERT_OK(dfm_mask_boundary(&g.adj, g.m->triangles, 1, a), NULL);
  for (uint32_t v = 0; v < g.n; v++) {
    uint32_t i = v % (N + 1), j = v / (N + 1);
    int edge = i == 0 || j == 0 || i == N || j == N;
    ASSERT(a[v] == (edge ? 1.0f : 0.0f));
  }
  ASSERT_OK(dfm_mask_boundary(&g.adj, g.m->triangles, 2, a), NULL);
  ASSERT(a[1 * (N + 1) + 1] == 1.0f && a[2 * (N + 1) + 2] == 0.0f);
  /* One part: topology holds nothing; a flat grid's normals all agree: normal holds nothing at
   * 10°, and folding half of it up by 90° makes that half held. */
  ASSERT_OK(dfm_mask_topology(&g.adj, 0, a), NULL);
  for (uint32_t v = 0; v < g.n; v++) ASSERT(a[v] == 0.0f);
  for (uint32_t v = 0; v < g.n; v++)
    if (v % (N + 1) > N / 2) g.p[3 * v + 2] = (double)(v % (N + 1) - N / 2) * H, g.p[3 * v] = (N / 2) * H;
  ASSERT_OK(dfm_mask_normal(&g.adj, g.m->triangles, g.p, 0, 10.0 * M_PI / 180.0, a), NULL);
  uint32_t held = 0;
  for (uint32_t v = 0; v < g.n; v++) {
    uint32_t i = v % (N + 1);
    if (i < N / 2) ASSERT(a[v] == 0.0f);
    if (i > N / 2) ASSERT(a[v] == 1.0f);
    held += a[v] == 1.0f;
  }
  ASSERT(held >= (N / 2) * (N + 1));
  ASSERT_EQ(dfm_mask_topology(&g.adj, g.n, a), DFM_EINVAL);
  free(a);
  grid_fini(&g);
}
