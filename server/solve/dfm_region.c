/*
 * dfm_region.c — regions of interest: the vertices within a geodesic radius of a handle.
 *
 * Dijkstra over mesh edges with their rest lengths as costs, from every seed at once, stopping
 * at the radius. Edge paths overestimate true surface distance by a few percent on irregular
 * meshes, which for picking a region is what users expect from sculpt tools anyway.
 *
 * DOES NOT decide roles (handle, anchor): dfm_system.c does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dfm.h"

typedef struct heap {
  uint32_t *v;
  double *d;
  uint32_t n;
} heap;

static void heap_push(heap *h, uint32_t v, double d) {
  uint32_t i = h->n++;
  while (i > 0) {
    uint32_t parent = (i - 1) / 2;
    if (h->d[parent] <= d) break;
    h->v[i] = h->v[parent];
    h->d[i] = h->d[parent];
    i = parent;
  }
  h->v[i] = v;
  h->d[i] = d;
}

static void heap_pop(heap *h, uint32_t *v, double *d) {
  *v = h->v[0];
  *d = h->d[0];
  uint32_t lv = h->v[--h->n];
  double ld = h->d[h->n];
  uint32_t i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->d[c + 1] < h->d[c]) c++;
    if (h->d[c] >= ld) break;
    h->v[i] = h->v[c];
    h->d[i] = h->d[c];
    i = c;
  }
  h->v[i] = lv;
  h->d[i] = ld;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

int dfm_geodesic_region(const mesh_adjacency *adj, const double *positions, const uint32_t *seeds,
                        uint32_t seed_count, double radius, uint32_t max_count, uint32_t **out,
                        uint32_t *count) {
  uint32_t n = adj->vertex_count;
  /* Lazy deletion: a vertex can be pushed once per edge, so size the heap by the edge count. */
  size_t cap = adj->vv_offsets[n] + seed_count + 1;
  double *dist = malloc(sizeof(double) * (n + 1));
  heap h = {malloc(sizeof(uint32_t) * cap), malloc(sizeof(double) * cap), 0};
  uint32_t *result = malloc(sizeof(uint32_t) * (n + 1));
  if (!dist || !h.v || !h.d || !result) {
    free(dist);
    free(h.v);
    free(h.d);
    free(result);
    return DFM_ENOMEM;
  }
  for (uint32_t v = 0; v < n; v++) dist[v] = INFINITY;
  for (uint32_t i = 0; i < seed_count; i++) {
    if (seeds[i] >= n || dist[seeds[i]] == 0.0) continue;
    dist[seeds[i]] = 0.0;
    heap_push(&h, seeds[i], 0.0);
  }
  uint32_t k = 0;
  while (h.n > 0 && (max_count == 0 || k < max_count)) {
    uint32_t v;
    double d;
    heap_pop(&h, &v, &d);
    if (d > dist[v]) continue; /* stale entry */
    result[k++] = v;
    const double *pv = positions + 3 * (size_t)v;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
      uint32_t u = adj->vv[e];
      const double *pu = positions + 3 * (size_t)u;
      double len = sqrt((pu[0] - pv[0]) * (pu[0] - pv[0]) + (pu[1] - pv[1]) * (pu[1] - pv[1]) +
                        (pu[2] - pv[2]) * (pu[2] - pv[2]));
      double nd = d + len;
      if (nd <= radius && nd < dist[u]) {
        dist[u] = nd;
        heap_push(&h, u, nd);
      }
    }
  }
  free(dist);
  free(h.v);
  free(h.d);
  qsort(result, k, sizeof(uint32_t), cmp_u32);
  *out = result;
  *count = k;
  return 0;
}
