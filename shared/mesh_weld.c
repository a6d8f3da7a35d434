/*
 * mesh_weld.c — welding render vertices into topology vertices.
 *
 * Render vertices are what a GPU draws: a vertex on a UV or normal seam appears several times
 * with the same position. Solvers, adjacency and reference normals need one vertex per surface
 * point, so render vertices whose positions lie within a tolerance of a representative are
 * merged. The first render vertex of a cluster is its representative; later vertices join the
 * nearest representative within the tolerance (never a chain of neighbours, so a weld can never
 * drift further than the tolerance).
 *
 * DOES NOT change the mesh: the render mesh stays as imported, the topology sits beside it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"

/* Open-addressing hash from a grid cell to the first representative in it; representatives of
 * the same cell are chained through `next`. */
typedef struct weld_grid {
  uint64_t *keys;
  uint32_t *heads;
  uint32_t mask;
  uint32_t *next;
} weld_grid;

#define WELD_EMPTY UINT32_MAX

static uint64_t cell_key(int64_t x, int64_t y, int64_t z) {
  /* 21 bits per axis is enough: the grid spans at most 1/tolerance cells per axis. */
  return ((uint64_t)(x & 0x1fffff) << 42) | ((uint64_t)(y & 0x1fffff) << 21) |
         (uint64_t)(z & 0x1fffff);
}

static uint32_t hash64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return (uint32_t)k;
}

static uint32_t *grid_slot(weld_grid *g, uint64_t key, int create) {
  uint32_t h = hash64(key) & g->mask;
  for (;;) {
    if (g->heads[h] == WELD_EMPTY) {
      if (!create) return NULL;
      g->keys[h] = key;
      return &g->heads[h];
    }
    if (g->keys[h] == key) return &g->heads[h];
    h = (h + 1) & g->mask;
  }
}

void mesh_topology_fini(mesh_topology *t) {
  free(t->render_to_topo);
  free(t->topo_offsets);
  free(t->topo_render);
  free(t->positions);
  free(t->triangles);
  free(t->triangle_source);
  memset(t, 0, sizeof(*t));
}

int mesh_topology_init(mesh_topology *t, const mesh *m, const float *positions, double tolerance) {
  memset(t, 0, sizeof(*t));
  const float *p = positions ? positions : m->positions;
  uint32_t n = m->vertex_count;
  if (tolerance <= 0.0) tolerance = MESH_WELD_DEFAULT_TOLERANCE;

  double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
  for (uint32_t v = 0; v < n; v++) {
    for (int k = 0; k < 3; k++) {
      double x = p[3 * (size_t)v + k];
      if (v == 0 || x < lo[k]) lo[k] = x;
      if (v == 0 || x > hi[k]) hi[k] = x;
    }
  }
  double diag = sqrt((hi[0] - lo[0]) * (hi[0] - lo[0]) + (hi[1] - lo[1]) * (hi[1] - lo[1]) +
                     (hi[2] - lo[2]) * (hi[2] - lo[2]));
  double tol = tolerance * diag;
  /* Cells no smaller than the tolerance, and few enough per axis for the 21-bit key. */
  double cell = tol > diag / 1.0e6 ? tol : diag / 1.0e6;
  if (!(cell > 0.0)) cell = 1.0;
  double tol2 = tol * tol;

  uint32_t cap = 16;
  while (cap < 2 * (uint64_t)n && cap < (1u << 31)) cap <<= 1;
  weld_grid g = {0};
  g.keys = malloc(sizeof(uint64_t) * cap);
  g.heads = malloc(sizeof(uint32_t) * cap);
  g.next = malloc(sizeof(uint32_t) * (n + 1));
  g.mask = cap - 1;
  uint32_t *rep = malloc(sizeof(uint32_t) * (n + 1)); /* topo vertex -> representative render */
  t->render_to_topo = malloc(sizeof(uint32_t) * (n + 1));
  if (!g.keys || !g.heads || !g.next || !rep || !t->render_to_topo) goto nomem;
  memset(g.heads, 0xff, sizeof(uint32_t) * cap);

  uint32_t topo = 0;
  for (uint32_t v = 0; v < n; v++) {
    const float *pv = p + 3 * (size_t)v;
    int64_t c[3];
    for (int k = 0; k < 3; k++) c[k] = (int64_t)floor((pv[k] - lo[k]) / cell);
    uint32_t best = WELD_EMPTY;
    double best_d2 = tol2;
    for (int dx = -1; dx <= 1; dx++) {
      for (int dy = -1; dy <= 1; dy++) {
        for (int dz = -1; dz <= 1; dz++) {
          uint32_t *slot = grid_slot(&g, cell_key(c[0] + dx, c[1] + dy, c[2] + dz), 0);
          for (uint32_t r = slot ? *slot : WELD_EMPTY; r != WELD_EMPTY; r = g.next[r]) {
            const float *pr = p + 3 * (size_t)rep[r];
            double d2 = 0.0;
            for (int k = 0; k < 3; k++) d2 += ((double)pv[k] - pr[k]) * ((double)pv[k] - pr[k]);
            if (d2 <= best_d2 && (best == WELD_EMPTY || d2 < best_d2 || r < best)) {
              best = r;
              best_d2 = d2;
            }
          }
        }
      }
    }
    if (best == WELD_EMPTY) {
      best = topo++;
      rep[best] = v;
      uint32_t *slot = grid_slot(&g, cell_key(c[0], c[1], c[2]), 1);
      g.next[best] = *slot;
      *slot = best;
    }
    t->render_to_topo[v] = best;
  }
  free(g.keys);
  free(g.heads);
  free(g.next);
  g.keys = NULL;
  g.heads = NULL;
  g.next = NULL;

  t->vertex_count = topo;
  t->render_count = n;
  t->topo_offsets = calloc((size_t)topo + 1, sizeof(uint32_t));
  t->topo_render = malloc(sizeof(uint32_t) * (n + 1));
  t->positions = malloc(sizeof(double) * 3 * ((size_t)topo + 1));
  if (!t->topo_offsets || !t->topo_render || !t->positions) goto nomem;
  for (uint32_t v = 0; v < n; v++) t->topo_offsets[t->render_to_topo[v] + 1]++;
  for (uint32_t i = 0; i < topo; i++) t->topo_offsets[i + 1] += t->topo_offsets[i];
  {
    uint32_t *fill = malloc(sizeof(uint32_t) * ((size_t)topo + 1));
    if (!fill) goto nomem;
    memcpy(fill, t->topo_offsets, sizeof(uint32_t) * topo);
    for (uint32_t v = 0; v < n; v++) t->topo_render[fill[t->render_to_topo[v]]++] = v;
    free(fill);
  }
  for (uint32_t i = 0; i < topo; i++)
    for (int k = 0; k < 3; k++) t->positions[3 * (size_t)i + k] = p[3 * (size_t)rep[i] + k];
  free(rep);
  rep = NULL;

  t->triangles = malloc(sizeof(uint32_t) * 3 * ((size_t)m->triangle_count + 1));
  t->triangle_source = malloc(sizeof(uint32_t) * ((size_t)m->triangle_count + 1));
  if (!t->triangles || !t->triangle_source) goto nomem;
  for (uint32_t f = 0; f < m->triangle_count; f++) {
    uint32_t a = t->render_to_topo[m->triangles[3 * (size_t)f]];
    uint32_t b = t->render_to_topo[m->triangles[3 * (size_t)f + 1]];
    uint32_t c = t->render_to_topo[m->triangles[3 * (size_t)f + 2]];
    if (a == b || b == c || a == c) {
      t->collapsed_count++;
      continue;
    }
    uint32_t *dst = t->triangles + 3 * (size_t)t->triangle_count;
    dst[0] = a;
    dst[1] = b;
    dst[2] = c;
    t->triangle_source[t->triangle_count++] = f;
  }
  return 0;

nomem:
  free(g.keys);
  free(g.heads);
  free(g.next);
  free(rep);
  mesh_topology_fini(t);
  return MESH_ENOMEM;
}
