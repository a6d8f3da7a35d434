/*
 * dfm_mask.c — masks on the welded topology (dfm_mask.h): dabs that paint, erase and smooth a
 * mask, the auto-masks, and how much of a brush each vertex takes under a mask.
 *
 * The feather (dfm_mask_free) is what keeps a masked stroke from creasing: without it a dab
 * displaces the first free vertex next to a held one fully, a step of one edge. With the
 * smoothstep of the geodesic distance to the held part the displacement and its slope both
 * start at zero there, as a gesture's smooth border leaves its anchors (dfm_border.c).
 *
 * DOES NOT keep state between calls or allocate beyond each call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfm_mask.h"
#include "dfm_internal.h"

static const char *const tool_names[] = {"paint", "erase", "smooth"};

int dfm_mask_tool_parse(const char *name, dfm_mask_tool *out) {
  for (int k = 0; name && k < 3; k++)
    if (strcmp(name, tool_names[k]) == 0) {
      *out = (dfm_mask_tool)k;
      return 0;
    }
  return DFM_EINVAL;
}

const char *dfm_mask_tool_name(dfm_mask_tool t) { return (unsigned)t < 3 ? tool_names[t] : "unknown"; }

static float clamp01(double x) { return x <= 0.0 ? 0.0f : x >= 1.0 ? 1.0f : (float)x; }

int dfm_mask_dabs(dfm_mask_tool tool, dfm_falloff falloff, const mesh_adjacency *adj, const double *positions,
                  const dfm_brush_sample *samples, uint32_t count, float *mask, uint8_t *changed, char *err,
                  size_t errlen) {
  if ((unsigned)tool > DFM_MASK_SMOOTH || (unsigned)falloff > DFM_FALLOFF_CONSTANT) {
    snprintf(err, errlen, "unknown mask tool %d or falloff %d", (int)tool, (int)falloff);
    return DFM_EINVAL;
  }
  int rc = dfm_brush_check_samples(samples, count, 1.0, "sample", err, errlen);
  if (rc) return rc;
  for (uint32_t i = 0; i < count; i++)
    if (samples[i].strength < 0) {
      snprintf(err, errlen, "sample %u: a mask's strength must be between 0 and 1 (got %g)", i, samples[i].strength);
      return DFM_EINVAL;
    }
  uint32_t n = adj->vertex_count;
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  float *next = malloc(sizeof(float) * ((size_t)n + 1));
  if (!idx || !next) {
    free(idx);
    free(next);
    snprintf(err, errlen, "out of memory");
    return DFM_ENOMEM;
  }
  for (uint32_t i = 0; i < count; i++) {
    const dfm_brush_sample *d = &samples[i];
    double r = d->radius, r2 = r * r;
    uint32_t k = 0;
    /* Every value of one dab is computed from the mask before it (smoothing reads neighbours). */
    for (uint32_t v = 0; v < n; v++) {
      const double *p = positions + 3 * (size_t)v;
      double dx = p[0] - d->center[0], dy = p[1] - d->center[1], dz = p[2] - d->center[2];
      double d2 = dx * dx + dy * dy + dz * dz;
      if (!(d2 < r2)) continue;
      double w = d->strength * dfm_falloff_eval(falloff, sqrt(d2) / r);
      if (!(w > 0.0)) continue;
      double m = mask[v];
      if (tool == DFM_MASK_PAINT) m += w;
      else if (tool == DFM_MASK_ERASE) m -= w;
      else {
        uint32_t lo = adj->vv_offsets[v], hi = adj->vv_offsets[v + 1];
        if (lo == hi) continue;
        double sum = 0.0;
        for (uint32_t e = lo; e < hi; e++) sum += mask[adj->vv[e]];
        m += w * (sum / (double)(hi - lo) - m);
      }
      idx[k] = v;
      next[k++] = clamp01(m);
    }
    for (uint32_t j = 0; j < k; j++) {
      if (mask[idx[j]] == next[j]) continue;
      mask[idx[j]] = next[j];
      if (changed) changed[idx[j]] = 1;
    }
  }
  free(idx);
  free(next);
  return 0;
}

int dfm_mask_topology(const mesh_adjacency *adj, uint32_t seed, float *out) {
  uint32_t n = adj->vertex_count;
  if (seed >= n) return DFM_EINVAL;
  uint32_t *queue = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  if (!queue) return DFM_ENOMEM;
  for (uint32_t v = 0; v < n; v++) out[v] = 1.0f;
  uint32_t head = 0, tail = 0;
  queue[tail++] = seed;
  out[seed] = 0.0f;
  while (head < tail) {
    uint32_t v = queue[head++];
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
      uint32_t u = adj->vv[e];
      if (out[u] == 0.0f) continue;
      out[u] = 0.0f;
      queue[tail++] = u;
    }
  }
  free(queue);
  return 0;
}

/* The area-weighted normal of v (not normalised: its length is twice the area around v). */
static void area_normal(const mesh_adjacency *adj, const uint32_t *triangles, const double *p, uint32_t v, double n[3]) {
  n[0] = n[1] = n[2] = 0.0;
  for (uint32_t e = adj->vt_offsets[v]; e < adj->vt_offsets[v + 1]; e++) {
    const uint32_t *t = triangles + 3 * (size_t)adj->vt[e];
    const double *a = p + 3 * (size_t)t[0], *b = p + 3 * (size_t)t[1], *c = p + 3 * (size_t)t[2];
    double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, w[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    n[0] += u[1] * w[2] - u[2] * w[1];
    n[1] += u[2] * w[0] - u[0] * w[2];
    n[2] += u[0] * w[1] - u[1] * w[0];
  }
}

int dfm_mask_normal(const mesh_adjacency *adj, const uint32_t *triangles, const double *positions, uint32_t seed,
                    double angle, float *out) {
  uint32_t n = adj->vertex_count;
  if (seed >= n || !(angle >= 0.0)) return DFM_EINVAL;
  double n0[3];
  area_normal(adj, triangles, positions, seed, n0);
  double l0 = sqrt(n0[0] * n0[0] + n0[1] * n0[1] + n0[2] * n0[2]);
  double limit = cos(angle > M_PI ? M_PI : angle);
  for (uint32_t v = 0; v < n; v++) {
    double nv[3];
    area_normal(adj, triangles, positions, v, nv);
    double l = sqrt(nv[0] * nv[0] + nv[1] * nv[1] + nv[2] * nv[2]);
    double c = l > 0 && l0 > 0 ? (nv[0] * n0[0] + nv[1] * n0[1] + nv[2] * n0[2]) / (l * l0) : 1.0;
    out[v] = c < limit ? 1.0f : 0.0f;
  }
  return 0;
}

/* Triangles containing both v and u (the vt lists are ascending: a merge). */
static uint32_t shared_triangles(const mesh_adjacency *adj, uint32_t v, uint32_t u) {
  uint32_t i = adj->vt_offsets[v], ie = adj->vt_offsets[v + 1], j = adj->vt_offsets[u], je = adj->vt_offsets[u + 1];
  uint32_t k = 0;
  while (i < ie && j < je) {
    if (adj->vt[i] < adj->vt[j]) i++;
    else if (adj->vt[i] > adj->vt[j]) j++;
    else k++, i++, j++;
  }
  return k;
}

int dfm_mask_boundary(const mesh_adjacency *adj, const uint32_t *triangles, uint32_t rings, float *out) {
  (void)triangles;
  uint32_t n = adj->vertex_count;
  if (rings < 1) return DFM_EINVAL;
  for (uint32_t v = 0; v < n; v++) {
    out[v] = 0.0f;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++)
      if (shared_triangles(adj, v, adj->vv[e]) == 1) {
        out[v] = 1.0f;
        break;
      }
  }
  uint8_t *grow = malloc((size_t)n + 1);
  if (!grow) return DFM_ENOMEM;
  for (uint32_t r = 1; r < rings; r++) {
    memset(grow, 0, n);
    for (uint32_t v = 0; v < n; v++)
      if (out[v] == 1.0f)
        for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) grow[adj->vv[e]] = 1;
    for (uint32_t v = 0; v < n; v++)
      if (grow[v]) out[v] = 1.0f;
  }
  free(grow);
  return 0;
}

/* ---- the feather: the geodesic distance to the fully held part, up to `band` ------------------ */

int dfm_mask_free(const mesh_adjacency *adj, const double *positions, const float *mask, double band, float *out) {
  uint32_t n = adj->vertex_count, nseeds = 0;
  for (uint32_t v = 0; v < n; v++) out[v] = mask ? 1.0f - clamp01(mask[v]) : 1.0f;
  if (!mask || !(band > 0.0)) return 0;
  double *dist = malloc(sizeof(double) * ((size_t)n + 1));
  uint32_t *seeds = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  int rc = dist && seeds ? 0 : DFM_ENOMEM;
  for (uint32_t v = 0; !rc && v < n; v++)
    if (mask[v] >= 1.0f) seeds[nseeds++] = v;
  if (!rc && nseeds) rc = dfm__geodesic_distances(adj, positions, seeds, nseeds, band, 0, dist, NULL, NULL);
  for (uint32_t v = 0; !rc && nseeds && v < n; v++) {
    if (!(dist[v] < band)) continue;
    double t = dist[v] / band;
    out[v] = (float)((double)out[v] * (t * t * (3.0 - 2.0 * t)));
  }
  free(dist);
  free(seeds);
  return rc;
}
