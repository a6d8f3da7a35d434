/*
 * mesh_laplacian.c — discrete Laplacian edge weights and vertex areas.
 *
 * Cotangent weights follow Pinkall & Polthier / Meyer et al.: w_ij = (cot α + cot β) / 2 over
 * the two angles opposite edge ij. Two things make them safe to factor:
 *   - clamping: an obtuse angle has a negative cotangent, which can make the Laplacian lose its
 *     M-matrix property; the clamped mode (the default) takes max(cot, 0);
 *   - finiteness: a degenerate triangle has |e1 × e2| = 0 and an infinite cotangent; every
 *     cotangent is limited to ±MESH_COT_MAX (an angle of about 1e-5 rad).
 * Vertex areas are the mixed Voronoi areas of Meyer et al. 2003 (section 3.3), which sum to the
 * surface area exactly.
 *
 * DOES NOT assemble matrices: the solvers in server/ do, from these weights.
 */
#include <math.h>
#include <string.h>

#include "mesh.h"

static void sub3(const double *a, const double *b, double *out) {
  out[0] = a[0] - b[0];
  out[1] = a[1] - b[1];
  out[2] = a[2] - b[2];
}

static double dot3(const double *a, const double *b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static double cross_norm(const double *a, const double *b) {
  double c0 = a[1] * b[2] - a[2] * b[1];
  double c1 = a[2] * b[0] - a[0] * b[2];
  double c2 = a[0] * b[1] - a[1] * b[0];
  return sqrt(c0 * c0 + c1 * c1 + c2 * c2);
}

/* Cotangent of the angle between a and b, limited to ±MESH_COT_MAX. */
static double safe_cot(const double *a, const double *b) {
  double d = dot3(a, b), c = cross_norm(a, b);
  if (c * MESH_COT_MAX <= fabs(d)) {
    if (d == 0.0) return 0.0; /* both vectors zero: no angle at all */
    return d > 0.0 ? MESH_COT_MAX : -MESH_COT_MAX;
  }
  return d / c;
}

double mesh_triangle_area(const double *positions, const uint32_t *tri) {
  double e1[3], e2[3];
  sub3(positions + 3 * (size_t)tri[1], positions + 3 * (size_t)tri[0], e1);
  sub3(positions + 3 * (size_t)tri[2], positions + 3 * (size_t)tri[0], e2);
  return 0.5 * cross_norm(e1, e2);
}

void mesh_uniform_weights(const mesh_adjacency *a, double *weights) {
  uint32_t n = a->vv_offsets[a->vertex_count];
  for (uint32_t i = 0; i < n; i++) weights[i] = 1.0;
}

void mesh_triangle_cotangents(const double *positions, const uint32_t *t, mesh_cotan_mode mode,
                              double cot[3]) {
  if (t[0] == t[1] || t[1] == t[2] || t[0] == t[2]) {
    cot[0] = cot[1] = cot[2] = 0.0;
    return;
  }
  for (int c = 0; c < 3; c++) {
    /* Angle at corner k, opposite edge (i, j). */
    uint32_t k = t[c], i = t[(c + 1) % 3], j = t[(c + 2) % 3];
    double u[3], v[3];
    sub3(positions + 3 * (size_t)i, positions + 3 * (size_t)k, u);
    sub3(positions + 3 * (size_t)j, positions + 3 * (size_t)k, v);
    cot[c] = safe_cot(u, v);
    if (mode == MESH_COTAN_CLAMPED && cot[c] < 0.0) cot[c] = 0.0;
  }
}

void mesh_cotan_weights(const mesh_adjacency *a, const double *positions,
                        const uint32_t *triangles, uint32_t triangle_count, mesh_cotan_mode mode,
                        double *weights) {
  uint32_t n = a->vv_offsets[a->vertex_count];
  memset(weights, 0, sizeof(double) * n);
  for (uint32_t f = 0; f < triangle_count; f++) {
    const uint32_t *t = triangles + 3 * (size_t)f;
    double cot[3];
    mesh_triangle_cotangents(positions, t, mode, cot);
    for (int c = 0; c < 3; c++) {
      uint32_t i = t[(c + 1) % 3], j = t[(c + 2) % 3];
      int64_t ij = mesh_adjacency_edge(a, i, j), ji = mesh_adjacency_edge(a, j, i);
      if (ij >= 0) weights[ij] += 0.5 * cot[c];
      if (ji >= 0) weights[ji] += 0.5 * cot[c];
    }
  }
}

void mesh_vertex_areas(uint32_t vertex_count, const double *positions, const uint32_t *triangles,
                       uint32_t triangle_count, mesh_area_mode mode, double *areas) {
  memset(areas, 0, sizeof(double) * vertex_count);
  for (uint32_t f = 0; f < triangle_count; f++) {
    const uint32_t *t = triangles + 3 * (size_t)f;
    double area = mesh_triangle_area(positions, t);
    if (!(area > 0.0)) continue;
    if (mode == MESH_AREA_BARYCENTRIC) {
      for (int c = 0; c < 3; c++) areas[t[c]] += area / 3.0;
      continue;
    }
    const double *p[3] = {positions + 3 * (size_t)t[0], positions + 3 * (size_t)t[1],
                          positions + 3 * (size_t)t[2]};
    double cot[3], len2[3], dots[3];
    int obtuse = -1;
    for (int c = 0; c < 3; c++) {
      double u[3], v[3], e[3];
      sub3(p[(c + 1) % 3], p[c], u);
      sub3(p[(c + 2) % 3], p[c], v);
      sub3(p[(c + 2) % 3], p[(c + 1) % 3], e);
      dots[c] = dot3(u, v);
      /* The exact cotangent: area > 0 here, so the cross product is non-zero. */
      cot[c] = dots[c] / (2.0 * area);
      len2[c] = dot3(e, e); /* squared length of the edge opposite corner c */
      if (dots[c] < 0.0) obtuse = c;
    }
    if (mode == MESH_AREA_MIXED && obtuse >= 0) {
      for (int c = 0; c < 3; c++) areas[t[c]] += (c == obtuse) ? area / 2.0 : area / 4.0;
      continue;
    }
    /* Voronoi region of corner c: (|e_b|² cot B + |e_c|² cot C) / 8 where e_b, e_c are the two
     * edges meeting at c and B, C the angles opposite them. */
    for (int c = 0; c < 3; c++) {
      int b = (c + 1) % 3, d = (c + 2) % 3;
      areas[t[c]] += (len2[b] * cot[b] + len2[d] * cot[d]) / 8.0;
    }
  }
}
