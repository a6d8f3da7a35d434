/*
 * dfm_brush.h — sculpt brushes: grab, inflate, smooth, flatten and pinch, with a radial falloff
 * and optional x-mirror symmetry, applied directly to a session's current shape.
 *
 * A brush is immediate: each sample of a stroke displaces the vertices within `radius` of its
 * centre (straight-line distance, not geodesic) and the next sample sees the result. There is no
 * factorisation and no solve, so a sample costs one distance scan over the vertices plus work
 * proportional to the vertices it touches; normals are computed only for those vertices.
 *
 * This module DOES NOT: keep state between calls (strokes, undo, dyntopo), build adjacency,
 * know about sessions or versions, or guard against self-intersection. The caller owns the
 * positions and decides which thread runs a call (one call at a time per positions array).
 *
 * Errors: 0 or a negative DFM_E* code (dfm.h), with a reason in `err`.
 */
#ifndef DEFORMD_DFM_BRUSH_H
#define DEFORMD_DFM_BRUSH_H

#include <stddef.h>
#include <stdint.h>

#include "dfm.h"
#include "mesh.h"

typedef enum dfm_brush_kind {
  DFM_BRUSH_GRAB = 0,
  DFM_BRUSH_INFLATE,
  DFM_BRUSH_SMOOTH,
  DFM_BRUSH_FLATTEN,
  DFM_BRUSH_PINCH
} dfm_brush_kind;

typedef enum dfm_falloff {
  DFM_FALLOFF_SMOOTHSTEP = 0,
  DFM_FALLOFF_LINEAR,
  DFM_FALLOFF_GAUSSIAN,
  DFM_FALLOFF_CONSTANT
} dfm_falloff;

/* Parses "grab", "inflate", "smooth", "flatten", "pinch". Returns 0 or DFM_EINVAL (also for
 * NULL). */
int dfm_brush_parse(const char *name, dfm_brush_kind *out);
/* Parses "smoothstep", "linear", "gaussian", "constant". Returns 0 or DFM_EINVAL. */
int dfm_falloff_parse(const char *name, dfm_falloff *out);
/* Static names as accepted by the parsers; "unknown" for values outside the enums. */
const char *dfm_brush_name(dfm_brush_kind k);
const char *dfm_falloff_name(dfm_falloff f);

/* Falloff weight at t = distance / radius. 1 at t <= 0, non-increasing, and EXACTLY 0 for
 * t >= 1 and for NaN, so a brush never moves anything at or beyond its radius:
 *   smoothstep  1 - (3t² - 2t³)
 *   linear      1 - t
 *   gaussian    (exp(-4.5 t²) - exp(-4.5)) / (1 - exp(-4.5))   (shifted to reach 0 at t = 1)
 *   constant    1
 * Values outside the enum give 0. */
double dfm_falloff_eval(dfm_falloff f, double t);

/* One dab of a stroke, in mesh units. */
typedef struct dfm_brush_sample {
  double center[3];
  double direction[3];  /* grab: the drag vector of this sample; other brushes ignore it */
  double radius;        /* > 0 */
  double strength;      /* any finite value; negative reverses inflate/pinch/smooth/flatten */
} dfm_brush_sample;

typedef struct dfm_brush {
  dfm_brush_kind kind;
  dfm_falloff falloff;
  int mirror_x;  /* non-zero: every sample also applies its mirror image across x = 0 */
  /* Optional (may be NULL): the index error messages give for each position, e.g. the server's
   * render vertex of each welded vertex, so a client reads an index it knows. */
  const uint32_t *vertex_names;
} dfm_brush;

/* Applies `samples` in order to `positions` (3 doubles per topology vertex, in place).
 *
 * For a sample, a vertex p at distance d = |p - center| < radius gets the weight
 * w = strength · falloff(d / radius); every other vertex is left bitwise unchanged. With
 * n̂ the unit angle-weighted normal of p over its incident triangles (current shape), each
 * touched vertex moves by:
 *   grab     w · direction
 *   inflate  w · radius · n̂
 *   smooth   w · (mean of p's neighbours - p)            (uniform Laplacian; strength in [0, 1])
 *   flatten  w · (projection of p onto the plane - p), the plane passing through the
 *            falloff-weighted centroid of the touched vertices with their falloff-weighted
 *            mean normal
 *   pinch    w · (center - p) minus its component along n̂ (pulls along the surface)
 * All displacements of one sample are computed from the shape before that sample.
 *
 * mirror_x: the sample and its mirror (center.x and direction.x negated) are both evaluated
 * on the same pre-sample shape and their displacements added, so a stroke on a mesh symmetric
 * in x gives mirror-symmetric offsets (up to rounding in sums over neighbours, ~1e-15
 * relative). A sample exactly on x = 0 is therefore applied twice, which keeps the effect
 * continuous as a stroke crosses the plane.
 *
 * `adj` is the adjacency of `triangles` (triangle_count, counter-clockwise) over
 * adj->vertex_count vertices. `moved` may be NULL; otherwise it has adj->vertex_count bytes and
 * gets 1 for every vertex whose position changed (other bytes are not written).
 *
 * Returns 0; DFM_EINVAL with a reason in `err` for a bad argument (non-finite center,
 * direction, radius or strength, radius <= 0, unknown kind or falloff); DFM_ENONFINITE when a
 * sample would produce a non-finite position; DFM_ENOMEM. On any error nothing of this call is
 * applied: `positions` and `moved` are as they were. Scratch memory (allocated per call, freed
 * before returning) is proportional to the vertices the samples touch, not to the mesh. */
int dfm_brush_apply(const dfm_brush *brush, const mesh_adjacency *adj, const uint32_t *triangles,
                    uint32_t triangle_count, const dfm_brush_sample *samples, uint32_t count,
                    double *positions, uint8_t *moved, char *err, size_t errlen);

#endif
