/*
 * vw_edit.c — picking a vertex with a ray (see vw_edit.h).
 */
#include "vw_edit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void sub3(const float *a, const float *b, float *o) { o[0] = a[0] - b[0], o[1] = a[1] - b[1], o[2] = a[2] - b[2]; }
static void cross3(const float *a, const float *b, float *o) {
  o[0] = a[1] * b[2] - a[2] * b[1], o[1] = a[2] * b[0] - a[0] * b[2], o[2] = a[0] * b[1] - a[1] * b[0];
}
static float dot3(const float *a, const float *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

/* The nearest triangle the ray hits: its index in *face and the ray parameter, or INFINITY. */
static float nearest(const float *positions, const uint32_t *triangles, uint32_t triangle_count, const float origin[3],
                     const float dir[3], uint32_t *face) {
  float best = INFINITY;
  uint32_t best_f = 0;
  for (uint32_t f = 0; f < triangle_count; f++) {
    const float *v0 = positions + 3 * (size_t)triangles[3 * f], *v1 = positions + 3 * (size_t)triangles[3 * f + 1],
                *v2 = positions + 3 * (size_t)triangles[3 * f + 2];
    float e1[3], e2[3], s[3], h[3], q[3];
    sub3(v1, v0, e1);
    sub3(v2, v0, e2);
    sub3(origin, v0, s);
    cross3(dir, e2, h);
    float det = dot3(e1, h);
    if (fabsf(det) < 1e-30f) continue;
    float inv = 1.0f / det, u = inv * dot3(s, h);
    if (u < 0 || u > 1) continue;
    cross3(s, e1, q);
    float v = inv * dot3(dir, q);
    if (v < 0 || u + v > 1) continue;
    float t = inv * dot3(e2, q);
    if (t > 0 && t < best) best = t, best_f = f;
  }
  *face = best_f;
  return best;
}

int vw_edit_pick(const float *positions, const uint32_t *triangles, uint32_t triangle_count, const float origin[3],
            const float dir[3], float hit[3], uint32_t *vertex) {
  uint32_t best_f;
  float best = nearest(positions, triangles, triangle_count, origin, dir, &best_f);
  if (!isfinite(best)) return 0;
  for (int k = 0; k < 3; k++) hit[k] = origin[k] + best * dir[k];
  float bd = INFINITY;
  for (int c = 0; c < 3; c++) {
    uint32_t v = triangles[3 * best_f + c];
    float d[3];
    sub3(hit, positions + 3 * (size_t)v, d);
    float dd = dot3(d, d);
    if (dd < bd) bd = dd, *vertex = v;
  }
  return 1;
}

int vw_edit_pick_surface(const float *positions, const uint32_t *triangles, uint32_t triangle_count,
                         const float origin[3], const float dir[3], float hit[3], float normal[3]) {
  uint32_t f;
  float t = nearest(positions, triangles, triangle_count, origin, dir, &f);
  if (!isfinite(t)) return 0;
  for (int k = 0; k < 3; k++) hit[k] = origin[k] + t * dir[k];
  const float *v0 = positions + 3 * (size_t)triangles[3 * f], *v1 = positions + 3 * (size_t)triangles[3 * f + 1],
              *v2 = positions + 3 * (size_t)triangles[3 * f + 2];
  float e1[3], e2[3];
  sub3(v1, v0, e1);
  sub3(v2, v0, e2);
  cross3(e1, e2, normal);
  if (dot3(normal, dir) > 0)
    for (int k = 0; k < 3; k++) normal[k] = -normal[k]; /* the side the ray came from */
  float len = sqrtf(dot3(normal, normal));
  for (int k = 0; k < 3; k++) normal[k] = len > 0 ? normal[k] / len : 0;
  return 1;
}
