/*
 * dfm_weights.c — a system's edge weights: the clamped cotangent (or uniform) weight of each
 * edge leaving a vertex that needs one, from the cotangents of its triangles, each computed once
 * and kept for the ARAP tables (dfm_system's tri_cot), and the floor every weight is held to.
 *
 * DOES NOT assemble the matrix (dfm_system.c does, from these weights).
 */
#include <stdlib.h>

#include "dfm_internal.h"

typedef struct weights_job {
  const mesh_topology *topo;
  const mesh_adjacency *adj;
  const double *rest;
  const uint8_t *need;
  double *w;
  double *cot; /* 3 per triangle: its cotangents (NULL: uniform weights) */
} weights_job;

/* The cotangents of each triangle with a corner that needs weights, once (each of its corners
 * reads them, and so do the ARAP tables: s->tri_cot). */
static void cotangents_range(void *ctx, size_t lo, size_t hi) {
  const weights_job *job = ctx;
  const uint32_t *tris = job->topo->triangles;
  for (size_t f = lo; f < hi; f++) {
    const uint32_t *t = tris + 3 * f;
    if (job->need[t[0]] || job->need[t[1]] || job->need[t[2]])
      mesh_triangle_cotangents(job->rest, t, MESH_COTAN_CLAMPED, job->cot + 3 * f);
  }
}

static void weights_range(void *ctx, size_t lo, size_t hi) {
  const weights_job *job = ctx;
  const mesh_topology *topo = job->topo;
  const mesh_adjacency *adj = job->adj;
  const uint8_t *need = job->need;
  double *w = job->w;
  static const double ones[3] = {1.0, 1.0, 1.0};
  for (uint32_t v = (uint32_t)lo; v < (uint32_t)hi; v++) {
    if (!need[v]) continue;
    for (uint32_t k = adj->vt_offsets[v]; k < adj->vt_offsets[v + 1]; k++) {
      const uint32_t *t = topo->triangles + 3 * (size_t)adj->vt[k];
      const double *cot = job->cot ? job->cot + 3 * (size_t)adj->vt[k] : ones;
      for (int c = 0; c < 3; c++) {
        if (t[c] != v) continue;
        /* The edge to the next corner is opposite the previous one, and the reverse. */
        int64_t e1 = mesh_adjacency_edge(adj, v, t[(c + 1) % 3]), e2 = mesh_adjacency_edge(adj, v, t[(c + 2) % 3]);
        if (e1 >= 0 && t[(c + 1) % 3] != v) w[e1] += 0.5 * cot[(c + 2) % 3];
        if (e2 >= 0 && t[(c + 2) % 3] != v) w[e2] += 0.5 * cot[(c + 1) % 3];
      }
    }
  }
}

/* Per-edge weights (aligned with adj->vv) from per-triangle cotangents, floored, computed only
 * around the vertices marked in `need` (the system never reads the others): a small region of
 * a large mesh costs what the region costs. With cotangent weights the triangles' cotangents
 * (3 per topology triangle, those with a needed corner) are left in *cot_out for the ARAP
 * tables (free()). */
int dfm__edge_weights(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest, int uniform,
                      const uint8_t *need, double **out, double *floor_out, double **cot_out) {
  uint32_t n = adj->vertex_count, nt = topo->triangle_count;
  size_t ne = adj->vv_offsets[n];
  double *w = calloc(ne + 1, sizeof(double)), *cot = uniform ? NULL : malloc(sizeof(double) * 3 * ((size_t)nt + 1));
  if (!w || (!uniform && !cot)) {
    free(w);
    free(cot);
    return DFM_ENOMEM;
  }
  /* The cotangents once per triangle; then each vertex fills its own row (the edges leaving
   * it), so vertices run in parallel. */
  weights_job job = {topo, adj, rest, need, w, cot};
  if (cot) dfm_parallel_for(nt, dfm__grain(nt), cotangents_range, &job);
  dfm_parallel_for(n, dfm__grain(n), weights_range, &job);
  double sum = 0;
  size_t pos = 0;
  for (uint32_t v = 0; v < n; v++) {
    if (!need[v]) continue;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++)
      if (w[e] > 0) sum += w[e], pos++;
  }
  double floor = pos ? 1e-12 * sum / (double)pos : 1e-12;
  for (uint32_t v = 0; v < n; v++) {
    if (!need[v]) continue;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++)
      if (w[e] < floor) w[e] = floor;
  }
  *out = w;
  *floor_out = floor;
  *cot_out = cot;
  return 0;
}
