/*
 * dfm_brush.c — sculpt brush dabs (grab, inflate, smooth, flatten, pinch, draw, crease, layer)
 * with radial falloffs, mirror symmetry across x, y or z = 0, auto-smoothing and a front-faces-only filter,
 * applied dab by dab to a shape in place.
 *
 * Per dab: one linear scan finds the touched vertices (and, with a mirror, the mirror dab's, in
 * the same pass); angle-weighted normals are computed for those vertices only, from their
 * incident triangles; every displacement is computed from the pre-dab shape into a scratch
 * list, checked for finiteness, then added. An undo log of the previous dabs of the call lets a
 * late failure restore everything, so a call is all or nothing.
 *
 * DOES NOT: compute normals or neighbourhoods of untouched vertices, keep state between calls,
 * or know about stroke spacing and strength calibration (dfm_stroke.c decides where dabs are
 * and how strong).
 */
#include "dfm_brush.h"
#include "dfm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const brush_names[] = {"grab", "inflate", "smooth", "flatten", "pinch", "draw", "crease", "layer"};
static const char *const falloff_names[] = {"smoothstep", "linear", "gaussian", "constant"};

#define N_BRUSHES (sizeof(brush_names) / sizeof(brush_names[0]))
#define N_FALLOFFS (sizeof(falloff_names) / sizeof(falloff_names[0]))

int dfm_brush_parse(const char *name, dfm_brush_kind *out) {
  if (!name) return DFM_EINVAL;
  for (size_t i = 0; i < N_BRUSHES; i++)
    if (strcmp(name, brush_names[i]) == 0) {
      *out = (dfm_brush_kind)i;
      return 0;
    }
  return DFM_EINVAL;
}

int dfm_falloff_parse(const char *name, dfm_falloff *out) {
  if (!name) return DFM_EINVAL;
  for (size_t i = 0; i < N_FALLOFFS; i++)
    if (strcmp(name, falloff_names[i]) == 0) {
      *out = (dfm_falloff)i;
      return 0;
    }
  return DFM_EINVAL;
}

const char *dfm_brush_name(dfm_brush_kind k) {
  return (unsigned)k < N_BRUSHES ? brush_names[k] : "unknown";
}

int dfm_brush_mirror_axis(const dfm_brush *brush) {
  if (brush->mirror_x) return 0;
  return brush->mirror_axis >= 1 && brush->mirror_axis <= 3 ? brush->mirror_axis - 1 : -1;
}

const char *dfm_falloff_name(dfm_falloff f) {
  return (unsigned)f < N_FALLOFFS ? falloff_names[f] : "unknown";
}

double dfm_falloff_eval(dfm_falloff f, double t) {
  /* The comparison is written so that NaN also lands here: nothing at or beyond the radius may
   * move, whatever rounding the formulas below would give near t = 1. */
  if (!(t < 1.0)) return 0.0;
  if (t < 0.0) t = 0.0;
  switch (f) {
    case DFM_FALLOFF_SMOOTHSTEP: {
      double g = 1.0 - t * t * (3.0 - 2.0 * t);
      return g > 0.0 ? g : 0.0; /* rounding just below t = 1 must not go negative */
    }
    case DFM_FALLOFF_LINEAR: return 1.0 - t;
    case DFM_FALLOFF_GAUSSIAN: {
      /* A plain Gaussian never reaches 0; shifting and rescaling keeps f(0) = 1 exactly and
       * makes the edge of the brush continuous. */
      const double edge = exp(-4.5);
      double g = (exp(-4.5 * t * t) - edge) / (1.0 - edge);
      return g > 0.0 ? g : 0.0;
    }
    case DFM_FALLOFF_CONSTANT: return 1.0;
  }
  return 0.0;
}

/* ---- scratch -------------------------------------------------------------------------------- */

/* A position as it was before this call first wrote it, for the all-or-nothing rollback. */
typedef struct undo_entry {
  double p[3];
  uint32_t v;
  uint8_t moved;
} undo_entry;

/* Buffers reused by every sample of one call; they grow with the touched set, never to the mesh
 * size unless a sample touches the whole mesh. */
typedef struct scratch {
  uint32_t cap;
  uint32_t n;        /* touched vertices of the current sample */
  uint32_t *idx;     /* ascending vertex ids */
  double *f;         /* 2 per vertex: falloff of the sample and of its mirror (0 = not touched) */
  double *normal;    /* 3 per vertex, when the brush needs normals */
  double *disp;      /* 3 per vertex */
  undo_entry *log;
  size_t log_len, log_cap;
  /* The fold guard (guard_folds), allocated on its first use in a call: */
  int32_t *slot;     /* per vertex: its place in idx during the current dab, -1 otherwise */
  uint32_t *stamp;   /* per triangle: the last guard pass that looked at it */
  uint32_t stamp_now;
  uint32_t *queue;   /* vertices frozen in the current guard pass */
  float *onormal;    /* per triangle: its unit normal in the stroke's starting shape, and 1
                      * (0: degenerate there), once ohave says it is computed */
  uint8_t *ohave;
} scratch;

static void scratch_fini(scratch *s) {
  free(s->onormal);
  free(s->ohave);
  free(s->slot);
  free(s->stamp);
  free(s->queue);
  free(s->idx);
  free(s->f);
  free(s->normal);
  free(s->disp);
  free(s->log);
}

static int scratch_grow(scratch *s, uint32_t limit) {
  uint32_t cap = s->cap ? (s->cap > limit / 2 ? limit : 2 * s->cap) : (limit < 256 ? limit : 256);
  uint32_t *idx = realloc(s->idx, sizeof(uint32_t) * cap);
  if (!idx) return DFM_ENOMEM;
  s->idx = idx;
  double *f = realloc(s->f, sizeof(double) * 2 * cap);
  if (!f) return DFM_ENOMEM;
  s->f = f;
  double *normal = realloc(s->normal, sizeof(double) * 3 * cap);
  if (!normal) return DFM_ENOMEM;
  s->normal = normal;
  double *disp = realloc(s->disp, sizeof(double) * 3 * cap);
  if (!disp) return DFM_ENOMEM;
  s->disp = disp;
  s->cap = cap;
  return 0;
}

static int log_reserve(scratch *s, size_t extra) {
  if (s->log_len + extra <= s->log_cap) return 0;
  size_t cap = s->log_cap ? 2 * s->log_cap : 1024;
  while (cap < s->log_len + extra) cap *= 2;
  undo_entry *log = realloc(s->log, sizeof(undo_entry) * cap);
  if (!log) return DFM_ENOMEM;
  s->log = log;
  s->log_cap = cap;
  return 0;
}

/* Replays the undo log backwards: the earliest saved value of a vertex is restored last. */
static void log_rollback(const scratch *s, double *positions, uint8_t *moved) {
  for (size_t i = s->log_len; i-- > 0;) {
    const undo_entry *e = &s->log[i];
    memcpy(positions + 3 * (size_t)e->v, e->p, sizeof(e->p));
    if (moved) moved[e->v] = e->moved;
  }
}

/* ---- geometry ------------------------------------------------------------------------------- */


static int finite3(const double v[3]) { return isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]); }

/* Unit normal of vertex v: face normals weighted by the corner angle at v (Thürmer & Wüthrich),
 * so that it does not depend on how the surface around v is split into triangles. Each corner's
 * terms are formed from (a - v) and (b - v) in the triangle's cyclic order, which makes the
 * contribution of a mirrored triangle the exact mirror image; only the summation order differs.
 * (0, 0, 0) when v has no non-degenerate triangle. */
static void vertex_normal(const mesh_adjacency *adj, const uint32_t *triangles,
                          const double *positions, uint32_t v, double n[3]) {
  const double *p = positions + 3 * (size_t)v;
  n[0] = n[1] = n[2] = 0.0;
  for (uint32_t k = adj->vt_offsets[v]; k < adj->vt_offsets[v + 1]; k++) {
    const uint32_t *tri = triangles + 3 * (size_t)adj->vt[k];
    int c = tri[0] == v ? 0 : tri[1] == v ? 1 : 2;
    const double *a = positions + 3 * (size_t)tri[(c + 1) % 3];
    const double *b = positions + 3 * (size_t)tri[(c + 2) % 3];
    double e1[3] = {a[0] - p[0], a[1] - p[1], a[2] - p[2]};
    double e2[3] = {b[0] - p[0], b[1] - p[1], b[2] - p[2]};
    double cr[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                    e1[0] * e2[1] - e1[1] * e2[0]};
    double len = sqrt(cr[0] * cr[0] + cr[1] * cr[1] + cr[2] * cr[2]);
    if (!(len > 0.0)) continue;
    double dot = e1[0] * e2[0] + e1[1] * e2[1] + e1[2] * e2[2];
    double l12 = sqrt((e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2]) *
                      (e2[0] * e2[0] + e2[1] * e2[1] + e2[2] * e2[2]));
    /* acos costs half of atan2 and is as accurate while the angle is away from 0 and π (the
     * usual case); near them it loses digits, so atan2 takes over. */
    double cosang = dot / l12;
    double angle = fabs(cosang) < 0.9 ? acos(cosang) : atan2(len, dot);
    double s = angle / len;
    n[0] += s * cr[0], n[1] += s * cr[1], n[2] += s * cr[2];
  }
  double len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  if (len > 0.0 && isfinite(len)) {
    n[0] /= len, n[1] /= len, n[2] /= len;
  } else {
    n[0] = n[1] = n[2] = 0.0;
  }
}

/* A plane for flatten: point c, unit normal n; `ok` is 0 when there is no usable plane (all
 * normals cancel out), in which case that pass flattens nothing. */
typedef struct plane {
  double c[3], n[3];
  int ok;
} plane;

static plane fit_plane(const scratch *s, const double *positions, int pass) {
  plane pl = {{0, 0, 0}, {0, 0, 0}, 0};
  double wsum = 0.0;
  for (uint32_t i = 0; i < s->n; i++) {
    double f = s->f[2 * i + pass];
    if (f <= 0.0) continue;
    const double *p = positions + 3 * (size_t)s->idx[i];
    for (int k = 0; k < 3; k++) {
      pl.c[k] += f * p[k];
      pl.n[k] += f * s->normal[3 * i + k];
    }
    wsum += f;
  }
  double len = sqrt(pl.n[0] * pl.n[0] + pl.n[1] * pl.n[1] + pl.n[2] * pl.n[2]);
  if (!(wsum > 0.0) || !(len > 0.0) || !isfinite(len)) return pl;
  for (int k = 0; k < 3; k++) {
    pl.c[k] /= wsum;
    pl.n[k] /= len;
  }
  pl.ok = 1;
  return pl;
}

/* ---- the fold guard ------------------------------------------------------------------------- */

/* A dab of a brush that moves vertices along normals can fold a triangle over where the surface
 * is concave: the normals on either side of a crease point at each other and their vertices
 * cross (an inflate stroke over the demo head's eye turned 104 edges by more than 90°). With
 * the stroke's starting shape at hand, no dab may turn a triangle by more than 45° from how it
 * was then: the vertices of a triangle that would turn further stay where they are for this
 * dab, and the triangles around them are checked again, until none would (holding every vertex
 * still satisfies it, since the shape before the dab did). */
#define GUARD_COS2 0.5 /* cos² 45°: two neighbours can then turn apart by 90° at most */

static int guard_wanted(const dfm_brush *b) {
  return b->origin && (b->kind == DFM_BRUSH_INFLATE || b->kind == DFM_BRUSH_DRAW || b->kind == DFM_BRUSH_CREASE ||
                       b->kind == DFM_BRUSH_LAYER);
}

static void cross_of(const double *a, const double *b, const double *c, double n[3]) {
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  n[0] = u[1] * v[2] - u[2] * v[1], n[1] = u[2] * v[0] - u[0] * v[2], n[2] = u[0] * v[1] - u[1] * v[0];
}

/* Whether triangle t, with the current dab's displacements, turns more than the guard allows:
 * cos(turn) > cos 45° is n0·n1 > 0 and 2 (n0·n1)² > |n0|²|n1|², no square root. The starting
 * shape's normal is computed once per call and kept. */
static int turns_too_far(const dfm_brush *b, const uint32_t *triangles, uint32_t t, const double *positions,
                         scratch *s, int with_dab) {
  const uint32_t *tri = triangles + 3 * (size_t)t;
  float *o = s->onormal + 4 * (size_t)t;
  if (!s->ohave[t]) {
    s->ohave[t] = 1;
    double n0[3];
    cross_of(b->origin + 3 * (size_t)tri[0], b->origin + 3 * (size_t)tri[1], b->origin + 3 * (size_t)tri[2], n0);
    double l0 = n0[0] * n0[0] + n0[1] * n0[1] + n0[2] * n0[2];
    /* Scaled to unit length in float: only the direction matters, and the unit vector keeps it
     * to ~1e-7 whatever the triangle's size. */
    double inv = l0 > 0.0 ? 1.0 / sqrt(l0) : 0.0;
    o[0] = (float)(n0[0] * inv), o[1] = (float)(n0[1] * inv), o[2] = (float)(n0[2] * inv), o[3] = l0 > 0.0 ? 1.0f : 0.0f;
  }
  if (o[3] == 0.0f) return 0; /* degenerate at the start: no orientation to keep */
  double q[3][3];
  for (int c = 0; c < 3; c++) {
    const double *p = positions + 3 * (size_t)tri[c];
    int32_t i = with_dab ? s->slot[tri[c]] : -1;
    for (int k = 0; k < 3; k++) q[c][k] = p[k] + (i >= 0 ? s->disp[3 * (size_t)i + k] : 0.0);
  }
  double n1[3];
  cross_of(q[0], q[1], q[2], n1);
  double l1 = n1[0] * n1[0] + n1[1] * n1[1] + n1[2] * n1[2];
  double dot = o[0] * n1[0] + o[1] * n1[1] + o[2] * n1[2];
  return !(dot > 0.0 && dot * dot > GUARD_COS2 * l1);
}

/* The starting shape's normals, for the check after the call (ohave: 0 not computed yet, 1
 * computed, 2 checked in that pass). Written only where a triangle is looked at, so the pages
 * of a large mesh's other triangles are never touched. */
static int normals_alloc(uint32_t triangle_count, scratch *s) {
  if (s->onormal) return 0;
  s->onormal = malloc(sizeof(float) * 4 * ((size_t)triangle_count + 1));
  s->ohave = calloc((size_t)triangle_count + 1, 1);
  return s->onormal && s->ohave ? 0 : DFM_ENOMEM;
}

/* What the guard after each dab needs besides: where each touched vertex is in the dab's
 * lists, which triangles a pass has looked at, the vertices it froze. */
static int guard_alloc(const mesh_adjacency *adj, uint32_t triangle_count, scratch *s) {
  uint32_t nv = adj->vertex_count;
  if (normals_alloc(triangle_count, s)) return DFM_ENOMEM;
  if (!s->slot) {
    s->slot = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    s->stamp = calloc((size_t)triangle_count + 1, sizeof(uint32_t));
    s->queue = malloc(sizeof(uint32_t) * (2 * (size_t)nv + 1)); /* the moved vertices, then each frozen once */
    if (!s->slot || !s->stamp || !s->queue) return DFM_ENOMEM;
    memset(s->slot, 0xff, sizeof(int32_t) * nv);
  }
  return 0;
}

static int guard_folds(const dfm_brush *b, const mesh_adjacency *adj, const uint32_t *triangles,
                       uint32_t triangle_count, const double *positions, scratch *s) {
  int rc = guard_alloc(adj, triangle_count, s);
  if (rc) return rc;
  for (uint32_t i = 0; i < s->n; i++) s->slot[s->idx[i]] = (int32_t)i;
  /* First every triangle around a moved vertex, then those around each vertex frozen since. */
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < s->n; i++) s->queue[tail++] = s->idx[i];
  uint32_t first = tail;
  s->stamp_now++;
  while (head < tail) {
    if (head == first) s->stamp_now++, first = tail; /* a new round: look at triangles again */
    uint32_t v = s->queue[head++];
    for (uint32_t e = adj->vt_offsets[v]; e < adj->vt_offsets[v + 1]; e++) {
      uint32_t t = adj->vt[e];
      if (s->stamp[t] == s->stamp_now) continue;
      s->stamp[t] = s->stamp_now;
      if (!turns_too_far(b, triangles, t, positions, s, 1)) continue;
      for (int c = 0; c < 3; c++) {
        int32_t i = s->slot[triangles[3 * (size_t)t + c]];
        if (i < 0) continue;
        double *d = s->disp + 3 * (size_t)i;
        if (d[0] == 0.0 && d[1] == 0.0 && d[2] == 0.0) continue;
        d[0] = d[1] = d[2] = 0.0;
        s->queue[tail++] = triangles[3 * (size_t)t + c];
      }
    }
  }
  for (uint32_t i = 0; i < s->n; i++) s->slot[s->idx[i]] = -1;
  return 0;
}

/* Whether any triangle around a vertex the call moved (the undo log's) turns by more than the
 * guard allows: checking once, after all the dabs, costs a fraction of checking after each. */
static int guard_exceeded(const dfm_brush *b, const mesh_adjacency *adj, const uint32_t *triangles,
                          uint32_t triangle_count, const double *positions, scratch *s, int *over) {
  *over = 0;
  int rc = normals_alloc(triangle_count, s);
  if (rc) return rc;
  for (size_t i = 0; i < s->log_len && !*over; i++) {
    uint32_t v = s->log[i].v;
    for (uint32_t e = adj->vt_offsets[v]; e < adj->vt_offsets[v + 1] && !*over; e++) {
      uint32_t t = adj->vt[e];
      if (s->ohave[t] == 2) continue;
      *over = turns_too_far(b, triangles, t, positions, s, 0);
      s->ohave[t] = 2;
    }
  }
  return 0;
}

/* ---- one sample ----------------------------------------------------------------------------- */

/* Collects the vertices strictly inside either pass's sphere, with each pass's falloff. One scan
 * over all vertices (~50 µs at 50k vertices), cheaper than maintaining a spatial index for a
 * shape that changes with every sample. The mirror centre differs only along the mirror's axis
 * a (x when there is no mirror), so the other two are shared and most vertices are rejected on
 * |p[a] - c[a]| alone. A vertex and its twin see the same operands, negated, for their
 * respective passes, so their falloffs are bitwise equal. */
static int find_touched(scratch *s, const dfm_brush *brush, const dfm_brush_sample *smp,
                        int mirror_axis, const double *positions, uint32_t vertex_count) {
  const double r = smp->radius, r2 = r * r;
  const int mirror = mirror_axis >= 0, a = mirror ? mirror_axis : 0, b = (a + 1) % 3, c = (a + 2) % 3;
  const double ca = smp->center[a], cb = smp->center[b], cc = smp->center[c], ma = -ca;
  s->n = 0;
  for (uint32_t v = 0; v < vertex_count; v++) {
    const double *p = positions + 3 * (size_t)v;
    double dx0 = p[a] - ca, dx1 = p[a] - ma;
    int in0 = fabs(dx0) < r, in1 = mirror && fabs(dx1) < r;
    if (!in0 && !in1) continue;
    double dy = p[b] - cb, dz = p[c] - cc, e = dy * dy + dz * dz;
    if (!(e < r2)) continue;
    double f[2] = {0.0, 0.0}, d2;
    if (in0 && (d2 = dx0 * dx0 + e) < r2) f[0] = dfm_falloff_eval(brush->falloff, sqrt(d2) / r);
    if (in1 && (d2 = dx1 * dx1 + e) < r2) f[1] = dfm_falloff_eval(brush->falloff, sqrt(d2) / r);
    if (!(f[0] > 0.0) && !(f[1] > 0.0)) continue;
    if (s->n == s->cap) {
      int rc = scratch_grow(s, vertex_count);
      if (rc) return rc;
    }
    s->idx[s->n] = v;
    s->f[2 * s->n] = f[0];
    s->f[2 * s->n + 1] = f[1];
    s->n++;
  }
  return 0;
}

/* w · (mean of v's neighbours - p): the smooth brush and auto-smoothing; with `rest`, of the
 * sculpted change p - rest instead. */
static void add_smoothing(const mesh_adjacency *adj, const double *positions, const double *rest, uint32_t v,
                          double w, double d[3]) {
  const double *p = positions + 3 * (size_t)v;
  uint32_t lo = adj->vv_offsets[v], hi = adj->vv_offsets[v + 1];
  if (lo == hi) return;
  double m[3] = {0, 0, 0};
  for (uint32_t e = lo; e < hi; e++) {
    const double *q = positions + 3 * (size_t)adj->vv[e];
    m[0] += q[0], m[1] += q[1], m[2] += q[2];
    if (rest) {
      const double *r = rest + 3 * (size_t)adj->vv[e];
      m[0] -= r[0], m[1] -= r[1], m[2] -= r[2];
    }
  }
  double inv = 1.0 / (double)(hi - lo);
  for (int k = 0; k < 3; k++) d[k] += w * (m[k] * inv - (p[k] - (rest ? rest[3 * (size_t)v + k] : 0.0)));
}

/* w · (center - p) without its part along the vertex normal n: pinch, and crease's pull. */
static void add_pinch(const double *center, const double *p, const double *n, double w, double d[3]) {
  double u[3] = {center[0] - p[0], center[1] - p[1], center[2] - p[2]};
  double un = u[0] * n[0] + u[1] * n[1] + u[2] * n[2];
  for (int k = 0; k < 3; k++) d[k] += w * (u[k] - un * n[k]);
}

/* Adds the displacement of touched vertex i under one pass, with weight w = strength · falloff,
 * into d. `pl` is the pass's plane: its normal is the area normal. */
static void add_displacement(const dfm_brush *brush, const dfm_brush_sample *smp, const plane *pl,
                             const mesh_adjacency *adj, const double *positions, const scratch *s,
                             uint32_t i, double w, double d[3]) {
  uint32_t v = s->idx[i];
  const double *p = positions + 3 * (size_t)v;
  const double *n = s->normal + 3 * (size_t)i;
  switch (brush->kind) {
    case DFM_BRUSH_GRAB:
      for (int k = 0; k < 3; k++) d[k] += w * smp->direction[k];
      break;
    case DFM_BRUSH_INFLATE: {
      double a = w * smp->radius;
      for (int k = 0; k < 3; k++) d[k] += a * n[k];
      break;
    }
    case DFM_BRUSH_DRAW:
    case DFM_BRUSH_LAYER:
    case DFM_BRUSH_CREASE: {
      if (!pl->ok) break;
      double a = (brush->kind == DFM_BRUSH_CREASE ? -w : w) * smp->radius;
      for (int k = 0; k < 3; k++) d[k] += a * pl->n[k];
      if (brush->kind == DFM_BRUSH_CREASE) add_pinch(smp->center, p, n, fabs(w), d);
      break;
    }
    case DFM_BRUSH_SMOOTH:
      add_smoothing(adj, positions, brush->rest, v, w, d);
      break;
    case DFM_BRUSH_FLATTEN: {
      if (!pl->ok) break;
      double h = (p[0] - pl->c[0]) * pl->n[0] + (p[1] - pl->c[1]) * pl->n[1] +
                 (p[2] - pl->c[2]) * pl->n[2];
      for (int k = 0; k < 3; k++) d[k] -= w * h * pl->n[k];
      break;
    }
    case DFM_BRUSH_PINCH:
      add_pinch(smp->center, p, n, w, d);
      break;
  }
}

/* Layer: holds q within `limit` of the stroke's origin o (along the line from o to q). */
static void hold_within(const double *o, double limit, double q[3]) {
  double e[3] = {q[0] - o[0], q[1] - o[1], q[2] - o[2]};
  double len = sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
  if (!(len > limit)) return;
  double f = limit / len;
  for (int k = 0; k < 3; k++) q[k] = o[k] + f * e[k];
}

/* What options add to touched vertex i's displacement d, kept out of the plain brushes' loop:
 * auto-smoothing by the dab's falloff, and the layer's hold within its height of the origin. */
static __attribute__((noinline)) void add_extras(const dfm_brush *brush, const dfm_brush_sample *smp,
                                                 const mesh_adjacency *adj, const double *positions,
                                                 const scratch *s, uint32_t i, int passes, double d[3]) {
  uint32_t v = s->idx[i];
  double fsum = 0.0;
  for (int k = 0; k < passes; k++) fsum += s->f[2 * i + k] > 0.0 ? s->f[2 * i + k] : 0.0;
  if (brush->autosmooth > 0.0 && fsum > 0.0) add_smoothing(adj, positions, brush->rest, v, brush->autosmooth * (fsum > 1.0 ? 1.0 : fsum), d);
  if (brush->kind == DFM_BRUSH_LAYER && brush->origin) {
    const double *p = positions + 3 * (size_t)v;
    double q[3] = {p[0] + d[0], p[1] + d[1], p[2] + d[2]};
    hold_within(brush->origin + 3 * (size_t)v, brush->height > 0 ? brush->height : 0.25 * smp->radius, q);
    for (int k = 0; k < 3; k++) d[k] = q[k] - p[k];
  }
}

/* The displacement of every touched vertex under one sample (and its mirror), from the shape
 * before it, into s->disp; the plain brushes' weights times `scale`. Returns 0, or
 * DFM_ENONFINITE with *bad_vertex. */
static int displace(const dfm_brush *brush, const dfm_brush_sample *smp, const dfm_brush_sample *pass,
                    const plane *planes, int passes, const mesh_adjacency *adj, const double *positions,
                    const scratch *s, double scale, uint32_t *bad_vertex) {
  /* Both passes read the pre-sample shape; a vertex inside both gets the sum, which is the
   * same two terms in either order for a vertex and its twin, so the sum stays symmetric. */
  int extras = brush->autosmooth > 0.0 || (brush->kind == DFM_BRUSH_LAYER && brush->origin);
  for (uint32_t i = 0; i < s->n; i++) {
    double *d = s->disp + 3 * (size_t)i;
    d[0] = d[1] = d[2] = 0.0;
    for (int k = 0; k < passes; k++) {
      double f = s->f[2 * i + k];
      if (f > 0.0) add_displacement(brush, &pass[k], &planes[k], adj, positions, s, i, scale * smp->strength * f, d);
    }
    if (extras) add_extras(brush, smp, adj, positions, s, i, passes, d);
    if (brush->take) {
      double k = brush->take[s->idx[i]];
      for (int c = 0; c < 3; c++) d[c] = k > 0.0 ? d[c] * k : 0.0;
    }
    const double *p = positions + 3 * (size_t)s->idx[i];
    double q[3] = {p[0] + d[0], p[1] + d[1], p[2] + d[2]};
    if (!finite3(q)) {
      *bad_vertex = s->idx[i];
      return DFM_ENONFINITE;
    }
  }
  return 0;
}

/* Moves the touched vertices by s->disp (logging what they were first, when `logged`: the log
 * has room). */
static void write_displaced(scratch *s, double *positions, uint8_t *moved, int logged) {
  for (uint32_t i = 0; i < s->n; i++) {
    uint32_t v = s->idx[i];
    double *p = positions + 3 * (size_t)v;
    const double *d = s->disp + 3 * (size_t)i;
    double q[3] = {p[0] + d[0], p[1] + d[1], p[2] + d[2]};
    if (q[0] == p[0] && q[1] == p[1] && q[2] == p[2]) continue;
    if (logged) {
      undo_entry *e = &s->log[s->log_len++];
      memcpy(e->p, p, sizeof(e->p));
      e->v = v;
      e->moved = moved ? moved[v] : 0;
    }
    memcpy(p, q, sizeof(q));
    if (moved) moved[v] = 1;
  }
}

/* Applies one sample (and its mirror) to `positions`. When `logged`, the previous values go to
 * the undo log first. Returns 0, DFM_ENONFINITE (nothing of this sample applied) or
 * DFM_ENOMEM. */
static int apply_sample(const dfm_brush *brush, const mesh_adjacency *adj,
                        const uint32_t *triangles, uint32_t triangle_count, const dfm_brush_sample *smp,
                        double *positions, uint8_t *moved, scratch *s, int logged, int guarded,
                        uint32_t *bad_vertex) {
  dfm_brush_sample pass[2] = {*smp, *smp};
  const int axis = dfm_brush_mirror_axis(brush), a = axis >= 0 ? axis : 0;
  int passes = axis >= 0 ? 2 : 1;
  pass[1].center[a] = -smp->center[a];
  pass[1].direction[a] = -smp->direction[a];

  int rc = find_touched(s, brush, smp, axis, positions, adj->vertex_count);
  if (rc) return rc;
  if (s->n == 0) return 0;

  int area = brush->kind == DFM_BRUSH_FLATTEN || brush->kind == DFM_BRUSH_DRAW || brush->kind == DFM_BRUSH_CREASE ||
             brush->kind == DFM_BRUSH_LAYER;
  if (area || brush->kind == DFM_BRUSH_INFLATE || brush->kind == DFM_BRUSH_PINCH || brush->front_only)
    for (uint32_t i = 0; i < s->n; i++)
      vertex_normal(adj, triangles, positions, s->idx[i], s->normal + 3 * (size_t)i);
  if (brush->front_only) {
    /* A vertex facing away from the viewer (the mirror pass looks through the mirror) is left
     * alone, like the back of a thin part under the brush. */
    double mview[3] = {brush->view[0], brush->view[1], brush->view[2]};
    mview[a] = -mview[a];
    for (uint32_t i = 0; i < s->n; i++) {
      const double *n = s->normal + 3 * (size_t)i;
      if (n[0] * brush->view[0] + n[1] * brush->view[1] + n[2] * brush->view[2] >= 0) s->f[2 * i] = 0;
      if (n[0] * mview[0] + n[1] * mview[1] + n[2] * mview[2] >= 0) s->f[2 * i + 1] = 0;
    }
  }

  plane planes[2] = {{{0, 0, 0}, {0, 0, 0}, 0}, {{0, 0, 0}, {0, 0, 0}, 0}};
  if (area)
    for (int k = 0; k < passes; k++) planes[k] = fit_plane(s, positions, k);

  /* Smooth with a weight above one step: that many steps of the same touched vertices, each
   * from the shape the previous one left (see the header). */
  int steps = 1;
  double scale = 1.0;
  if (brush->kind == DFM_BRUSH_SMOOTH && fabs(smp->strength) > 1.0) {
    double want = ceil(fabs(smp->strength));
    steps = want < DFM_BRUSH_SMOOTH_MAX_STEPS ? (int)want : DFM_BRUSH_SMOOTH_MAX_STEPS;
    scale = fabs(smp->strength) / steps > 1.0 ? 1.0 / fabs(smp->strength) : 1.0 / steps;
    logged = 1; /* a later step may fail after an earlier one was written */
  }
  for (int step = 0; step < steps; step++) {
    rc = displace(brush, smp, pass, planes, passes, adj, positions, s, scale, bad_vertex);
    if (rc) return rc;
    if (guarded && (rc = guard_folds(brush, adj, triangles, triangle_count, positions, s)) != 0) return rc;
    if (logged) {
      rc = log_reserve(s, s->n);
      if (rc) return rc;
    }
    write_displaced(s, positions, moved, logged);
  }
  return 0;
}

int dfm_brush_check_samples(const dfm_brush_sample *samples, uint32_t count, double max_strength, const char *what,
                            char *err, size_t errlen) {
  for (uint32_t i = 0; i < count; i++) {
    const dfm_brush_sample *smp = &samples[i];
    if (!finite3(smp->center) || !finite3(smp->direction)) {
      dfm_set_err(err, errlen, "%s %u: center and direction must be finite", what, i);
      return DFM_EINVAL;
    }
    if (!isfinite(smp->radius) || !(smp->radius > 0.0)) {
      dfm_set_err(err, errlen, "%s %u: radius must be finite and > 0 (got %g)", what, i, smp->radius);
      return DFM_EINVAL;
    }
    if (!isfinite(smp->strength) || !(fabs(smp->strength) <= max_strength)) {
      if (isinf(max_strength)) dfm_set_err(err, errlen, "%s %u: strength must be finite (got %g)", what, i, smp->strength);
      else dfm_set_err(err, errlen, "%s %u: strength must be between %g and %g (got %g)", what, i, -max_strength, max_strength,
                       smp->strength);
      return DFM_EINVAL;
    }
  }
  return 0;
}

int dfm_brush_apply(const dfm_brush *brush, const mesh_adjacency *adj, const uint32_t *triangles,
                    uint32_t triangle_count, const dfm_brush_sample *samples, uint32_t count,
                    double *positions, uint8_t *moved, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!brush || !adj || !positions || (count && !samples) || (triangle_count && !triangles)) {
    dfm_set_err(err, errlen, "brush, adjacency, positions and samples must not be NULL");
    return DFM_EINVAL;
  }
  if ((unsigned)brush->kind >= N_BRUSHES || (unsigned)brush->falloff >= N_FALLOFFS) {
    dfm_set_err(err, errlen, "unknown brush kind %d or falloff %d", (int)brush->kind,
            (int)brush->falloff);
    return DFM_EINVAL;
  }
  if (!(brush->autosmooth >= 0.0 && brush->autosmooth <= 1.0)) {
    dfm_set_err(err, errlen, "autosmooth must be between 0 and 1 (got %g)", brush->autosmooth);
    return DFM_EINVAL;
  }
  if (brush->mirror_axis < 0 || brush->mirror_axis > 3 || (brush->mirror_x && brush->mirror_axis > 1)) {
    dfm_set_err(err, errlen, "mirror: one plane, x, y or z (got axis %d%s)", brush->mirror_axis,
                brush->mirror_x ? " with mirror_x" : "");
    return DFM_EINVAL;
  }
  if (!(brush->height >= 0.0) || !isfinite(brush->height)) {
    dfm_set_err(err, errlen, "height must be finite and >= 0 (got %g)", brush->height);
    return DFM_EINVAL;
  }
  if (brush->front_only && (!finite3(brush->view) || (brush->view[0] == 0 && brush->view[1] == 0 && brush->view[2] == 0))) {
    dfm_set_err(err, errlen, "front faces only needs a finite, non-zero view direction");
    return DFM_EINVAL;
  }
  /* Cheap consistency check: the vertex -> triangle lists must refer to these triangles. */
  if (adj->vertex_count && adj->vt_offsets[adj->vertex_count] > 3 * (uint64_t)triangle_count) {
    dfm_set_err(err, errlen, "adjacency lists %u triangle corners, but only %u triangles were given",
            adj->vt_offsets[adj->vertex_count], triangle_count);
    return DFM_EINVAL;
  }
  /* Validate every sample before touching anything: a call is all or nothing. */
  int rc = dfm_brush_check_samples(samples, count, INFINITY, "sample", err, errlen);
  if (rc) return rc;

  scratch s;
  memset(&s, 0, sizeof(s));
  /* With the fold guard the dabs first run unguarded, every one logged; if the result turns a
   * triangle too far (rare: a concave crease under inflate), the call is undone and run again
   * with the guard after each dab. */
  int guard = guard_wanted(brush), guarded = 0;
again:
  for (uint32_t i = 0; i < count; i++) {
    uint32_t bad = 0;
    /* The last sample checks its result before writing, so it never needs undoing (unless the
     * guard may have to undo the call). */
    rc = apply_sample(brush, adj, triangles, triangle_count, &samples[i], positions, moved, &s,
                      i + 1 < count || (guard && !guarded), guarded, &bad);
    if (rc == DFM_ENONFINITE) {
      dfm_set_err(err, errlen, "sample %u (%s) would move vertex %u to a non-finite position", i,
              dfm_brush_name(brush->kind), brush->vertex_names ? brush->vertex_names[bad] : bad);
    } else if (rc == DFM_ENOMEM) {
      dfm_set_err(err, errlen, "out of memory for the brush's scratch buffers (sample %u)", i);
    }
    if (rc) {
      log_rollback(&s, positions, moved);
      break;
    }
  }
  if (rc == 0 && guard && !guarded) {
    int over = 0;
    rc = guard_exceeded(brush, adj, triangles, triangle_count, positions, &s, &over);
    if (rc == DFM_ENOMEM) {
      dfm_set_err(err, errlen, "out of memory for the brush's fold guard");
      log_rollback(&s, positions, moved);
    } else if (over) {
      log_rollback(&s, positions, moved);
      s.log_len = 0;
      guarded = 1;
      goto again;
    }
  }
  scratch_fini(&s);
  return rc;
}
