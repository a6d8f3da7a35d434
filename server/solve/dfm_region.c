/*
 * dfm_region.c — regions of interest: picking one (the vertices within a geodesic radius of a
 * handle) and cutting one out of the mesh as a sub-mesh of its own, on which a small region's
 * system is built so that it costs what the region costs.
 *
 * Picking: Dijkstra over mesh edges with their rest lengths as costs, from every seed at once,
 * stopping at the radius. Edge paths overestimate true surface distance by a few percent on
 * irregular meshes, which for picking a region is what users expect from sculpt tools anyway.
 *
 * Cutting: the region, its handles and the rings of vertices the system reads around them,
 * renumbered in mesh order, with the gesture's parameters in the new numbering
 * (dfm__region_init).
 *
 * DOES NOT decide roles (handle, anchor) or build the system on the sub-mesh: dfm_system.c does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dfm_internal.h"

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

/* Dijkstra from what is in the heap, over `within` vertices only (NULL: all), to `radius` and at
 * most max_count settled vertices (0: no limit), in order into result (may be NULL). */
static uint32_t dijkstra(const mesh_adjacency *adj, const double *positions, heap *h, const uint8_t *within,
                         double radius, uint32_t max_count, double *dist, uint32_t *result) {
  uint32_t k = 0;
  while (h->n > 0 && (max_count == 0 || k < max_count)) {
    uint32_t v;
    double d;
    heap_pop(h, &v, &d);
    if (d > dist[v]) continue; /* stale entry */
    if (result) result[k] = v;
    k++;
    const double *pv = positions + 3 * (size_t)v;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
      uint32_t u = adj->vv[e];
      if (within && !within[u]) continue;
      const double *pu = positions + 3 * (size_t)u;
      double len = sqrt((pu[0] - pv[0]) * (pu[0] - pv[0]) + (pu[1] - pv[1]) * (pu[1] - pv[1]) +
                        (pu[2] - pv[2]) * (pu[2] - pv[2]));
      double nd = d + len;
      if (nd <= radius && nd < dist[u]) {
        dist[u] = nd;
        heap_push(h, u, nd);
      }
    }
  }
  return k;
}

int dfm__geodesic_distances(const mesh_adjacency *adj, const double *positions, const uint32_t *seeds,
                            uint32_t seed_count, double radius, uint32_t max_count, double *dist, uint32_t *result,
                            uint32_t *count) {
  uint32_t n = adj->vertex_count;
  /* Lazy deletion: a vertex can be pushed once per edge, so size the heap by the edge count. */
  size_t cap = adj->vv_offsets[n] + seed_count + 1;
  heap h = {malloc(sizeof(uint32_t) * cap), malloc(sizeof(double) * cap), 0};
  if (!h.v || !h.d) {
    free(h.v);
    free(h.d);
    return DFM_ENOMEM;
  }
  for (uint32_t v = 0; v < n; v++) dist[v] = INFINITY;
  for (uint32_t i = 0; i < seed_count; i++) {
    if (seeds[i] >= n || dist[seeds[i]] == 0.0) continue;
    dist[seeds[i]] = 0.0;
    heap_push(&h, seeds[i], 0.0);
  }
  uint32_t k = dijkstra(adj, positions, &h, NULL, radius, max_count, dist, result);
  free(h.v);
  free(h.d);
  if (count) *count = k;
  return 0;
}

int dfm__geodesic_resume(const mesh_adjacency *adj, const double *positions, const uint8_t *within, double *dist,
                         uint32_t *result, uint32_t *count) {
  uint32_t n = adj->vertex_count;
  size_t cap = 1;
  for (uint32_t v = 0; v < n; v++)
    if (within[v]) cap += 1 + adj->vv_offsets[v + 1] - adj->vv_offsets[v];
  heap h = {malloc(sizeof(uint32_t) * cap), malloc(sizeof(double) * cap), 0};
  if (!h.v || !h.d) {
    free(h.v);
    free(h.d);
    return DFM_ENOMEM;
  }
  for (uint32_t v = 0; v < n; v++)
    if (within[v] && dist[v] < INFINITY) heap_push(&h, v, dist[v]);
  uint32_t k = dijkstra(adj, positions, &h, within, INFINITY, 0, dist, result);
  free(h.v);
  free(h.d);
  if (count) *count = k;
  return 0;
}

int dfm_geodesic_region(const mesh_adjacency *adj, const double *positions, const uint32_t *seeds,
                        uint32_t seed_count, double radius, uint32_t max_count, uint32_t **out,
                        uint32_t *count) {
  uint32_t n = adj->vertex_count, k = 0;
  double *dist = malloc(sizeof(double) * (n + 1));
  uint32_t *result = malloc(sizeof(uint32_t) * (n + 1));
  int rc = dist && result ? dfm__geodesic_distances(adj, positions, seeds, seed_count, radius, max_count, dist, result, &k)
                          : DFM_ENOMEM;
  free(dist);
  if (rc) {
    free(result);
    return rc;
  }
  qsort(result, k, sizeof(uint32_t), cmp_u32);
  *out = result;
  *count = k;
  return 0;
}

/* Appends v to a growing list. */
static int push_u32(uint32_t **list, uint32_t *count, uint32_t *cap, uint32_t v) {
  if (*count == *cap) {
    uint32_t ncap = *cap ? 2 * *cap : 1024;
    uint32_t *g = realloc(*list, sizeof(uint32_t) * ncap);
    if (!g) return DFM_ENOMEM;
    *list = g;
    *cap = ncap;
  }
  (*list)[(*count)++] = v;
  return 0;
}

/* The gesture on its region only: the region, the handles and the rings of vertices the
 * system reads around them (one ring; two for the biharmonic operator, whose rows reach the
 * neighbours' neighbours), with the triangles among them, renumbered in mesh order so that
 * the matrix, its ordering and its factor are those of the whole-mesh system. Every row of
 * the system sees its whole neighbourhood in the sub-mesh, so the results agree with the
 * whole-mesh system's to rounding (tests/solve/test_region.c). What it costs is proportional
 * to the region, apart from one pass over an index map of the mesh's size. */
int dfm__region_init(dfm__region *r, const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                     const dfm_params *params) {
  memset(r, 0, sizeof(*r));
  uint32_t n = topo->vertex_count, ns = 0, nring = 0, ring_cap = 0, nt = 0, *ring = NULL;
  uint32_t *map = calloc((size_t)n + 1, sizeof(uint32_t)); /* local index + 1, 0: not in */
  uint32_t *vertex = NULL, *tris = NULL, *lroi = NULL, *lhandle = NULL, *lanchor = NULL, *lsoft = NULL;
  double *lrest = NULL, *lsoft_w = NULL, *lsoft_p = NULL;
  mesh_adjacency la = {0};
  int rc = DFM_ENOMEM;
  if (!map) goto out;
  for (uint32_t i = 0; i < params->roi_count; i++) map[params->roi[i]] = 1;
  for (uint32_t i = 0; i < params->handle_count; i++) map[params->handle[i]] = 1;
  int rings = params->mode == DFM_BIHARMONIC ? 2 : 1;
  for (uint32_t i = 0; i < params->roi_count; i++) {
    uint32_t v = params->roi[i];
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++)
      if (!map[adj->vv[e]]) {
        map[adj->vv[e]] = 1;
        if (rings > 1 && push_u32(&ring, &nring, &ring_cap, adj->vv[e])) goto out;
      }
  }
  for (uint32_t i = 0; i < nring; i++) {
    uint32_t v = ring[i];
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) map[adj->vv[e]] = 1;
  }
  for (uint32_t v = 0; v < n; v++)
    if (map[v]) map[v] = ++ns;
  vertex = malloc(sizeof(uint32_t) * ((size_t)ns + 1));
  lrest = malloc(sizeof(double) * 3 * ((size_t)ns + 1));
  if (!vertex || !lrest) goto out;
  for (uint32_t v = 0, k = 0; v < n && k < ns; v++)
    if (map[v]) {
      vertex[k] = v;
      memcpy(lrest + 3 * (size_t)k, rest + 3 * (size_t)v, sizeof(double) * 3);
      k++;
    }
  /* Triangles with three corners inside, each taken once: from its first corner. */
  uint32_t cap = 0;
  for (uint32_t k = 0; k < ns; k++) {
    uint32_t v = vertex[k];
    for (uint32_t e = adj->vt_offsets[v]; e < adj->vt_offsets[v + 1]; e++) {
      const uint32_t *t = topo->triangles + 3 * (size_t)adj->vt[e];
      if (!map[t[0]] || !map[t[1]] || !map[t[2]]) continue;
      uint32_t first = t[0] < t[1] ? (t[0] < t[2] ? t[0] : t[2]) : (t[1] < t[2] ? t[1] : t[2]);
      if (first != v) continue;
      for (int c = 0; c < 3; c++)
        if (push_u32(&tris, &nt, &cap, map[t[c]] - 1)) goto out;
    }
  }
  nt /= 3;
  rc = mesh_adjacency_init(&la, ns, tris, nt) == 0 ? 0 : DFM_ENOMEM;
  if (rc) goto out;
  rc = DFM_ENOMEM;
  /* The parameters in local numbering; anchors and soft constraints outside touch nothing. */
  dfm_params lp = *params;
  lroi = malloc(sizeof(uint32_t) * ((size_t)params->roi_count + 1));
  lhandle = malloc(sizeof(uint32_t) * ((size_t)params->handle_count + 1));
  lanchor = malloc(sizeof(uint32_t) * ((size_t)params->anchor_count + 1));
  lsoft = malloc(sizeof(uint32_t) * ((size_t)params->soft_count + 1));
  lsoft_w = malloc(sizeof(double) * ((size_t)params->soft_count + 1));
  if (params->soft_position) lsoft_p = malloc(sizeof(double) * 3 * ((size_t)params->soft_count + 1));
  if (!lroi || !lhandle || !lanchor || !lsoft || !lsoft_w || (params->soft_position && !lsoft_p)) goto out;
  for (uint32_t i = 0; i < params->roi_count; i++) lroi[i] = map[params->roi[i]] - 1;
  for (uint32_t i = 0; i < params->handle_count; i++) lhandle[i] = map[params->handle[i]] - 1;
  lp.anchor_count = lp.soft_count = 0;
  for (uint32_t i = 0; i < params->anchor_count; i++)
    if (map[params->anchors[i]]) lanchor[lp.anchor_count++] = map[params->anchors[i]] - 1;
  for (uint32_t i = 0; i < params->soft_count; i++)
    if (map[params->soft[i]]) {
      lsoft[lp.soft_count] = map[params->soft[i]] - 1;
      if (lsoft_p) memcpy(lsoft_p + 3 * (size_t)lp.soft_count, params->soft_position + 3 * (size_t)i, sizeof(double) * 3);
      lsoft_w[lp.soft_count++] = params->soft_weight[i];
    }
  lp.roi = lroi, lp.handle = lhandle, lp.anchors = lanchor, lp.soft = lsoft, lp.soft_weight = lsoft_w;
  lp.soft_position = lsoft_p;
  /* Everything built is the caller's now (dfm__region_fini). */
  r->n = ns;
  r->vertex = vertex;
  r->rest = lrest;
  r->topo = (mesh_topology){.vertex_count = ns, .triangle_count = nt, .triangles = tris};
  r->adj = la;
  r->params = lp;
  vertex = tris = lroi = lhandle = lanchor = lsoft = NULL;
  lrest = lsoft_w = lsoft_p = NULL;
  memset(&la, 0, sizeof(la));
  rc = 0;
out:
  free(map);
  free(ring);
  free(vertex);
  free(tris);
  free(lrest);
  free(lroi);
  free(lhandle);
  free(lanchor);
  free(lsoft);
  free(lsoft_w);
  free(lsoft_p);
  mesh_adjacency_fini(&la);
  return rc;
}

void dfm__region_fini(dfm__region *r) {
  free(r->vertex);
  free(r->rest);
  free(r->topo.triangles);
  mesh_adjacency_fini(&r->adj);
  free((void *)r->params.roi);
  free((void *)r->params.handle);
  free((void *)r->params.anchors);
  free((void *)r->params.soft);
  free((void *)r->params.soft_weight);
  free((void *)r->params.soft_position);
  memset(r, 0, sizeof(*r));
}
