/*
 * mesh_adjacency.c — compressed-row vertex->vertex and vertex->triangle adjacency.
 *
 * Built once per topology and shared read-only by Laplacian assembly, normals, ROI searches
 * and the viewer's normal pass. Neighbour lists are sorted so an edge's slot can be found by
 * binary search and so matrices assembled from them have sorted column indices.
 *
 * DOES NOT weld or drop degenerate triangles: it takes the triangles it is given.
 */
#include <stdlib.h>
#include <string.h>

#include "mesh.h"

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* A vertex has about a dozen candidates: insertion sort, where qsort's call per comparison
 * made this loop most of the adjacency's cost (a gesture's region builds one). */
static void sort_u32(uint32_t *x, size_t n) {
  if (n > 32) {
    qsort(x, n, sizeof(uint32_t), cmp_u32);
    return;
  }
  for (size_t i = 1; i < n; i++) {
    uint32_t v = x[i];
    size_t j = i;
    for (; j > 0 && x[j - 1] > v; j--) x[j] = x[j - 1];
    x[j] = v;
  }
}

void mesh_adjacency_fini(mesh_adjacency *a) {
  free(a->vv_offsets);
  free(a->vv);
  free(a->vt_offsets);
  free(a->vt);
  memset(a, 0, sizeof(*a));
}

int mesh_adjacency_init(mesh_adjacency *a, uint32_t vertex_count, const uint32_t *triangles,
                        uint32_t triangle_count) {
  memset(a, 0, sizeof(*a));
  size_t corners = 3 * (size_t)triangle_count;
  for (size_t i = 0; i < corners; i++)
    if (triangles[i] >= vertex_count) return MESH_ERANGE;

  a->vertex_count = vertex_count;
  a->vt_offsets = calloc((size_t)vertex_count + 1, sizeof(uint32_t));
  a->vt = malloc(sizeof(uint32_t) * (corners + 1));
  a->vv_offsets = calloc((size_t)vertex_count + 1, sizeof(uint32_t));
  uint32_t *fill = malloc(sizeof(uint32_t) * ((size_t)vertex_count + 1));
  /* Each corner contributes its two other corners; duplicates are removed after sorting. */
  uint32_t *raw = malloc(sizeof(uint32_t) * (2 * corners + 1));
  if (!a->vt_offsets || !a->vt || !a->vv_offsets || !fill || !raw) goto nomem;

  for (size_t i = 0; i < corners; i++) a->vt_offsets[triangles[i] + 1]++;
  for (uint32_t v = 0; v < vertex_count; v++) a->vt_offsets[v + 1] += a->vt_offsets[v];
  memcpy(fill, a->vt_offsets, sizeof(uint32_t) * vertex_count);
  for (uint32_t f = 0; f < triangle_count; f++) {
    for (int c = 0; c < 3; c++) {
      uint32_t v = triangles[3 * (size_t)f + c];
      /* A triangle with a repeated corner is listed once per vertex. */
      if (c > 0 && triangles[3 * (size_t)f] == v) continue;
      if (c > 1 && triangles[3 * (size_t)f + 1] == v) continue;
      a->vt[fill[v]++] = f;
    }
  }
  /* Compact vt in place where repeated corners left gaps. */
  {
    uint32_t out = 0;
    for (uint32_t v = 0; v < vertex_count; v++) {
      uint32_t begin = a->vt_offsets[v], end = fill[v];
      a->vt_offsets[v] = out;
      for (uint32_t i = begin; i < end; i++) a->vt[out++] = a->vt[i];
    }
    a->vt_offsets[vertex_count] = out;
  }

  /* Neighbour candidates: at most 2 per incident triangle. */
  uint32_t *off = a->vv_offsets;
  for (uint32_t v = 0; v < vertex_count; v++) off[v + 1] = off[v] + 2 * (a->vt_offsets[v + 1] - a->vt_offsets[v]);
  memcpy(fill, off, sizeof(uint32_t) * vertex_count);
  for (uint32_t v = 0; v < vertex_count; v++) {
    for (uint32_t i = a->vt_offsets[v]; i < a->vt_offsets[v + 1]; i++) {
      const uint32_t *t = triangles + 3 * (size_t)a->vt[i];
      for (int c = 0; c < 3; c++)
        if (t[c] != v) raw[fill[v]++] = t[c];
    }
  }
  uint32_t out = 0;
  for (uint32_t v = 0; v < vertex_count; v++) {
    uint32_t begin = off[v], end = fill[v];
    sort_u32(raw + begin, end - begin);
    off[v] = out;
    for (uint32_t i = begin; i < end; i++)
      if (i == begin || raw[i] != raw[i - 1]) raw[out++] = raw[i];
  }
  off[vertex_count] = out;
  /* Shrink to fit; if even shrinking fails, keep the larger block. */
  uint32_t *shrunk = realloc(raw, sizeof(uint32_t) * (out + 1));
  a->vv = shrunk ? shrunk : raw;
  free(fill);
  return 0;

nomem:
  free(fill);
  free(raw);
  mesh_adjacency_fini(a);
  return MESH_ENOMEM;
}

int64_t mesh_adjacency_edge(const mesh_adjacency *a, uint32_t v, uint32_t j) {
  uint32_t lo = a->vv_offsets[v], hi = a->vv_offsets[v + 1];
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (a->vv[mid] < j)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (lo < a->vv_offsets[v + 1] && a->vv[lo] == j) ? (int64_t)lo : -1;
}
