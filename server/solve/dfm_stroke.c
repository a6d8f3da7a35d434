/*
 * dfm_stroke.c — a stroke's path turned into dabs (see dfm_stroke.h): placed by arc length at a
 * spacing relative to the radius, weighted so that a pass does the same whatever the spacing,
 * then applied by dfm_brush.c.
 *
 * DOES NOT: touch a vertex itself, or keep anything between strokes.
 */
#include "dfm_stroke.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Grab's dabs drag by the step to the next one; a step of at most a tenth of the radius keeps
 * each dab's map x -> x + falloff(x)·step one-to-one (smoothstep's slope is at most 1.5 per
 * radius, so 1 - 1.5 · 0.1 > 0): the surface is carried along, never folded. */
#define GRAB_MAX_SPACING 0.1

double dfm_stroke_falloff_integral(dfm_falloff f) {
  switch (f) {
    case DFM_FALLOFF_SMOOTHSTEP: return 0.5;
    case DFM_FALLOFF_LINEAR: return 0.5;
    case DFM_FALLOFF_CONSTANT: return 1.0;
    case DFM_FALLOFF_GAUSSIAN: {
      /* ∫₀¹ (e^(−a t²) − e^(−a)) / (1 − e^(−a)) dt with a = 4.5 (dfm_falloff_eval). */
      const double a = 4.5, e = exp(-a);
      return (0.5 * sqrt(M_PI / a) * erf(sqrt(a)) - e) / (1.0 - e);
    }
  }
  return 1.0;
}

/* What one straight pass at strength 1 does, in units of the per-dab weight's sum (see the
 * header's table): the pass's total falloff weight under the middle of the path is divided out
 * and this is what remains. */
static double pass_gain(dfm_brush_kind k) {
  switch (k) {
    case DFM_BRUSH_DRAW:
    case DFM_BRUSH_INFLATE:
    case DFM_BRUSH_CREASE: return 0.5;  /* × radius: the height of a pass */
    case DFM_BRUSH_LAYER: return 1.0;
    case DFM_BRUSH_PINCH: return 1.0;   /* e^(−1) of the distance */
    case DFM_BRUSH_FLATTEN: return 2.0;
    case DFM_BRUSH_SMOOTH: return 10.0; /* steps of smoothing */
    case DFM_BRUSH_GRAB: return 1.0;
  }
  return 0.0;
}

typedef struct dab_list {
  dfm_brush_sample *v;
  uint32_t n, cap;
} dab_list;

static int push(dab_list *l, const double c[3], double radius, double strength) {
  if (l->n == DFM_STROKE_MAX_DABS + 1u) return DFM_EINVAL;
  if (l->n == l->cap) {
    uint32_t cap = l->cap ? 2 * l->cap : 64;
    dfm_brush_sample *g = realloc(l->v, sizeof(*g) * cap);
    if (!g) return DFM_ENOMEM;
    l->v = g;
    l->cap = cap;
  }
  dfm_brush_sample *d = &l->v[l->n++];
  memset(d, 0, sizeof(*d));
  memcpy(d->center, c, sizeof(d->center));
  d->radius = radius;
  d->strength = strength;
  return 0;
}

static int check(const dfm_brush *brush, const dfm_brush_sample *points, uint32_t count, char *err, size_t errlen) {
  if (!brush || (count && !points)) {
    dfm_set_err(err, errlen, "brush and points must not be NULL");
    return DFM_EINVAL;
  }
  if (count == 0) {
    dfm_set_err(err, errlen, "a stroke needs at least one point");
    return DFM_EINVAL;
  }
  if (!(brush->autosmooth >= 0.0 && brush->autosmooth <= 1.0)) {
    dfm_set_err(err, errlen, "autosmooth must be between 0 and 1 (got %g)", brush->autosmooth);
    return DFM_EINVAL;
  }
  if (!(brush->spacing == 0.0 || (brush->spacing >= 0.01 && brush->spacing <= 1.0))) {
    dfm_set_err(err, errlen, "spacing must be between 0.01 and 1 (a fraction of the radius; got %g)", brush->spacing);
    return DFM_EINVAL;
  }
  return dfm_brush_check_samples(points, count, 1.0, "point", err, errlen);
}

/* Dab centres along the polyline, one every `frac` radii of arc length, the first `need` after
 * its first point (with `need` <= 0, on the first point itself), with radius and strength
 * interpolated along each segment. *need_after: the arc length from the last point to the
 * next dab. A dab within a billionth of the spacing of a point counts as on it, so that a path
 * that ends on a multiple of the spacing gets its last dab whatever the rounding. */
static int place(const dfm_brush_sample *pts, uint32_t count, double frac, double need, dab_list *l, double *need_after) {
  int rc = 0;
  if (need <= 0) {
    rc = push(l, pts[0].center, pts[0].radius, pts[0].strength);
    need = frac * pts[0].radius;
  }
  for (uint32_t i = 0; rc == 0 && i + 1 < count; i++) {
    const dfm_brush_sample *a = &pts[i], *b = &pts[i + 1];
    double seg[3] = {b->center[0] - a->center[0], b->center[1] - a->center[1], b->center[2] - a->center[2]};
    double len = sqrt(seg[0] * seg[0] + seg[1] * seg[1] + seg[2] * seg[2]), at = 0.0;
    while (rc == 0 && len - at + 1e-9 * need >= need) {
      at += need;
      double t = at < len ? at / len : 1.0;
      double c[3] = {a->center[0] + t * seg[0], a->center[1] + t * seg[1], a->center[2] + t * seg[2]};
      double r = a->radius + t * (b->radius - a->radius);
      rc = push(l, c, r, a->strength + t * (b->strength - a->strength));
      need = frac * r;
    }
    need -= len - at < 0 ? 0 : len - at;
  }
  *need_after = need;
  return rc;
}

void dfm_stroke_state_fini(dfm_stroke_state *s) {
  free(s->origin);
  memset(s, 0, sizeof(*s));
}

int dfm_stroke_dabs(const dfm_brush *brush, const dfm_brush_sample *points, uint32_t count,
                    const dfm_stroke_state *state, dfm_brush_sample **out, uint32_t *dab_count, double *need_after,
                    char *err, size_t errlen) {
  *out = NULL;
  *dab_count = 0;
  if (err && errlen) err[0] = '\0';
  int rc = check(brush, points, count, err, errlen);
  if (rc) return rc;
  if ((unsigned)brush->kind > DFM_BRUSH_LAYER || (unsigned)brush->falloff > DFM_FALLOFF_CONSTANT) {
    dfm_set_err(err, errlen, "unknown brush kind %d or falloff %d", (int)brush->kind, (int)brush->falloff);
    return DFM_EINVAL;
  }
  int continued = state && state->started;
  double spacing = brush->spacing > 0 ? brush->spacing : DFM_STROKE_SPACING;
  double frac = brush->kind == DFM_BRUSH_GRAB && spacing > GRAB_MAX_SPACING ? GRAB_MAX_SPACING : spacing;
  /* The path: the points, after the previous piece's last point when this continues a stroke;
   * for a one-point grab stroke, the drag its direction asks for. */
  dfm_brush_sample *path = malloc(sizeof(*path) * ((size_t)count + 2));
  if (!path) {
    dfm_set_err(err, errlen, "out of memory for the stroke's path");
    return DFM_ENOMEM;
  }
  uint32_t np = 0;
  if (continued) path[np++] = state->last;
  memcpy(path + np, points, sizeof(*path) * count);
  np += count;
  if (brush->kind == DFM_BRUSH_GRAB && !continued && count == 1) {
    path[1] = path[0];
    for (int k = 0; k < 3; k++) path[1].center[k] += points[0].direction[k];
    np = 2;
  }
  dab_list l = {NULL, 0, 0};
  double after = 0;
  rc = place(path, np, frac, continued ? state->need : 0.0, &l, &after);
  if (brush->kind == DFM_BRUSH_GRAB) {
    /* The path's end is the last dab's target, so the surface under it travels all of it; the
     * next piece starts with a dab on that end. */
    const dfm_brush_sample *end = &path[np - 1];
    if (rc == 0) rc = push(&l, end->center, end->radius, end->strength);
    if (rc == 0) {
      for (uint32_t i = 0; i + 1 < l.n; i++)
        for (int k = 0; k < 3; k++) l.v[i].direction[k] = l.v[i + 1].center[k] - l.v[i].center[k];
      l.n--;
      /* A last step of (almost) nothing adds nothing. */
      if (l.n && fabs(l.v[l.n - 1].direction[0]) + fabs(l.v[l.n - 1].direction[1]) + fabs(l.v[l.n - 1].direction[2]) <=
                     1e-12 * l.v[l.n - 1].radius)
        l.n--;
    }
    after = 0.0;
  } else {
    double k = pass_gain(brush->kind) * spacing / (2.0 * dfm_stroke_falloff_integral(brush->falloff));
    for (uint32_t i = 0; rc == 0 && i < l.n; i++) {
      double w = k * l.v[i].strength;
      l.v[i].strength = w;
    }
  }
  free(path);
  if (rc == DFM_EINVAL || (rc == 0 && l.n > DFM_STROKE_MAX_DABS)) {
    dfm_set_err(err, errlen, "the stroke would place more than %u dabs: give a larger radius or spacing, or a shorter path",
                DFM_STROKE_MAX_DABS);
    rc = DFM_EINVAL;
  } else if (rc == DFM_ENOMEM) {
    dfm_set_err(err, errlen, "out of memory for the stroke's dabs");
  }
  if (rc) {
    free(l.v);
    return rc;
  }
  *out = l.v;
  *dab_count = l.n;
  if (need_after) *need_after = after;
  return 0;
}

/* The mean length of the mesh's edges (each counted once), 0 for a mesh without any. */
static double mean_edge(const mesh_adjacency *adj, const double *p) {
  double sum = 0;
  uint64_t count = 0;
  for (uint32_t v = 0; v < adj->vertex_count; v++)
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
      uint32_t u = adj->vv[e];
      if (u <= v) continue;
      const double *a = p + 3 * (size_t)v, *b = p + 3 * (size_t)u;
      sum += sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
      count++;
    }
  return count ? sum / (double)count : 0.0;
}

/* How many times the smooth brush's 10 steps a pass takes at `radius` over edges of length
 * `edge`: steps of the uniform Laplacian spread a bump by about an edge times the square root
 * of their number, so a pass takes SMOOTH_REACH² · (radius / edge)² steps (never fewer than
 * 10), enough to carry the smoothing across the brush's radius whatever the resolution. */
#define SMOOTH_REACH 1.5
static double smooth_scale(double radius, double edge) {
  if (!(edge > 0)) return 1.0;
  double q = SMOOTH_REACH * radius / edge, steps = q * q;
  return steps > pass_gain(DFM_BRUSH_SMOOTH) ? steps / pass_gain(DFM_BRUSH_SMOOTH) : 1.0;
}

/* The brushes whose dabs need the shape when the stroke began: the layer's height, and the
 * fold guard of those that move along normals. */
static int needs_origin(dfm_brush_kind k) {
  return k == DFM_BRUSH_LAYER || k == DFM_BRUSH_INFLATE || k == DFM_BRUSH_DRAW || k == DFM_BRUSH_CREASE;
}

int dfm_stroke_apply(const dfm_brush *brush, const mesh_adjacency *adj, const uint32_t *triangles,
                     uint32_t triangle_count, const dfm_brush_sample *points, uint32_t count, double *positions,
                     uint8_t *moved, dfm_stroke_state *state, uint32_t *dab_count, char *err, size_t errlen) {
  if (dab_count) *dab_count = 0;
  if (!adj || !positions) {
    dfm_set_err(err, errlen, "adjacency and positions must not be NULL");
    return DFM_EINVAL;
  }
  dfm_brush_sample *dabs = NULL;
  uint32_t n = 0;
  double need_after = 0;
  int rc = dfm_stroke_dabs(brush, points, count, state, &dabs, &n, &need_after, err, errlen);
  if (rc) return rc;
  dfm_brush b = *brush;
  double spacing = brush->spacing > 0 ? brush->spacing : DFM_STROKE_SPACING;
  /* Auto-smoothing is a smooth brush riding along: the same calibration. */
  double a = 10.0 * brush->autosmooth * spacing / (2.0 * dfm_stroke_falloff_integral(brush->falloff));
  b.autosmooth = a < 1.0 ? a : 1.0;
  double *origin = state && state->started ? state->origin : NULL, *fresh = NULL;
  if (!origin && needs_origin(brush->kind)) {
    size_t bytes = sizeof(double) * 3 * (size_t)adj->vertex_count;
    origin = fresh = malloc(bytes + sizeof(double));
    if (!fresh) {
      free(dabs);
      dfm_set_err(err, errlen, "out of memory for the stroke's starting shape");
      return DFM_ENOMEM;
    }
    memcpy(fresh, positions, bytes);
  }
  b.origin = needs_origin(brush->kind) ? origin : NULL;
  if (brush->kind == DFM_BRUSH_SMOOTH) {
    double edge = state && state->started && state->edge > 0 ? state->edge : mean_edge(adj, positions);
    if (state) state->edge = edge;
    for (uint32_t i = 0; i < n; i++) dabs[i].strength *= smooth_scale(dabs[i].radius, edge);
  }
  rc = dfm_brush_apply(&b, adj, triangles, triangle_count, dabs, n, positions, moved, err, errlen);
  free(dabs);
  if (rc == 0 && dab_count) *dab_count = n;
  if (rc == 0 && state) {
    if (fresh) state->origin = fresh, fresh = NULL;
    state->started = 1;
    state->need = need_after;
    state->last = points[count - 1];
  }
  free(fresh);
  return rc;
}
