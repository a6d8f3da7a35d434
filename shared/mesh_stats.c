/*
 * mesh_stats.c — the counts `deformd --check-mesh` and `mesh.info` report.
 *
 * Everything topological (components, boundary and non-manifold edges) is counted on the welded
 * topology, so a UV seam is neither a boundary nor a second component.
 *
 * DOES NOT repair anything: it reports.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static uint32_t uf_find(uint32_t *parent, uint32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

static void uf_union(uint32_t *parent, uint32_t a, uint32_t b) {
  a = uf_find(parent, a);
  b = uf_find(parent, b);
  if (a == b) return;
  if (a < b)
    parent[b] = a;
  else
    parent[a] = b;
}

int mesh_triangle_is_degenerate(const double *positions, const uint32_t *tri) {
  if (tri[0] == tri[1] || tri[1] == tri[2] || tri[0] == tri[2]) return 1;
  const double *p[3] = {positions + 3 * (size_t)tri[0], positions + 3 * (size_t)tri[1],
                        positions + 3 * (size_t)tri[2]};
  double longest2 = 0.0;
  for (int c = 0; c < 3; c++) {
    double l2 = 0.0;
    for (int k = 0; k < 3; k++) {
      double d = p[(c + 1) % 3][k] - p[c][k];
      l2 += d * d;
    }
    if (l2 > longest2) longest2 = l2;
  }
  double twice_area = 2.0 * mesh_triangle_area(positions, tri);
  return twice_area <= MESH_DEGENERATE_EPS * longest2;
}

int mesh_compute_stats(const mesh *m, const mesh_topology *t, mesh_stats *s) {
  memset(s, 0, sizeof(*s));
  s->vertices = m->vertex_count;
  s->triangles = m->triangle_count;
  s->topology_vertices = t->vertex_count;
  s->targets = m->target_count;
  s->frames = m->frame_count;
  s->submeshes = m->submesh_count;

  uint32_t *parent = malloc(sizeof(uint32_t) * ((size_t)t->vertex_count + 1));
  uint8_t *used = calloc((size_t)t->vertex_count + 1, 1);
  uint64_t *edges = malloc(sizeof(uint64_t) * (3 * (size_t)t->triangle_count + 1));
  if (!parent || !used || !edges) {
    free(parent);
    free(used);
    free(edges);
    return MESH_ENOMEM;
  }
  for (uint32_t v = 0; v < t->vertex_count; v++) parent[v] = v;
  /* Components over every render triangle, collapsed ones included: they still connect. */
  for (uint32_t f = 0; f < m->triangle_count; f++) {
    uint32_t a = t->render_to_topo[m->triangles[3 * (size_t)f]];
    uint32_t b = t->render_to_topo[m->triangles[3 * (size_t)f + 1]];
    uint32_t c = t->render_to_topo[m->triangles[3 * (size_t)f + 2]];
    used[a] = used[b] = used[c] = 1;
    uf_union(parent, a, b);
    uf_union(parent, b, c);
  }
  for (uint32_t v = 0; v < t->vertex_count; v++)
    if (used[v] && uf_find(parent, v) == v) s->components++;

  size_t ne = 0;
  for (uint32_t f = 0; f < t->triangle_count; f++) {
    const uint32_t *tri = t->triangles + 3 * (size_t)f;
    for (int c = 0; c < 3; c++) {
      uint32_t a = tri[c], b = tri[(c + 1) % 3];
      uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
      edges[ne++] = ((uint64_t)lo << 32) | hi;
    }
    if (mesh_triangle_is_degenerate(t->positions, tri)) s->degenerate_triangles++;
  }
  s->degenerate_triangles += t->collapsed_count;
  qsort(edges, ne, sizeof(uint64_t), cmp_u64);
  for (size_t i = 0; i < ne;) {
    size_t j = i;
    while (j < ne && edges[j] == edges[i]) j++;
    if (j - i == 1) s->boundary_edges++;
    if (j - i >= 3) s->nonmanifold_edges++;
    i = j;
  }
  free(parent);
  free(used);
  free(edges);
  return 0;
}
