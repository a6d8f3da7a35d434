/*
 * dfm_brush.h — sculpt brush dabs: grab, inflate, smooth, flatten, pinch, draw, crease and
 * layer, with a radial falloff, optional x-mirror symmetry, auto-smoothing and a front-faces-
 * only filter, applied directly to a session's current shape.
 *
 * A dab is immediate: it displaces the vertices within `radius` of its centre (straight-line
 * distance, not geodesic) and the next dab sees the result. There is no factorisation and no
 * solve, so a dab costs one distance scan over the vertices plus work proportional to the
 * vertices it touches; normals are computed only for those vertices. Strokes — where the dabs
 * go along a path and how strong each one is — are dfm_stroke.h's.
 *
 * This module DOES NOT: place dabs along a path or calibrate their strength (dfm_stroke.c), keep
 * state between calls (undo, dyntopo), build adjacency, know about sessions or versions, or
 * guard against self-intersection. The caller owns the positions and decides which thread runs
 * a call (one call at a time per positions array).
 *
 * Errors: 0 or a negative DFM_E* code (dfm.h), with a reason in `err`.
 */
#ifndef DEFORMD_DFM_BRUSH_H
#define DEFORMD_DFM_BRUSH_H

#include <stddef.h>
#include <stdint.h>

#include "dfm.h"
#include "mesh.h"

/* The numbers are the binary protocol's (EDIT kind 6, docs/protocol.md). */
typedef enum dfm_brush_kind {
  DFM_BRUSH_GRAB = 0,
  DFM_BRUSH_INFLATE,
  DFM_BRUSH_SMOOTH,
  DFM_BRUSH_FLATTEN,
  DFM_BRUSH_PINCH,
  DFM_BRUSH_DRAW,
  DFM_BRUSH_CREASE,
  DFM_BRUSH_LAYER
} dfm_brush_kind;

/* The most Laplacian steps one smooth sample takes (dfm_brush_apply). */
#define DFM_BRUSH_SMOOTH_MAX_STEPS 32

typedef enum dfm_falloff {
  DFM_FALLOFF_SMOOTHSTEP = 0,
  DFM_FALLOFF_LINEAR,
  DFM_FALLOFF_GAUSSIAN,
  DFM_FALLOFF_CONSTANT
} dfm_falloff;

/* Parses "grab", "inflate", "smooth", "flatten", "pinch", "draw", "crease", "layer". Returns 0
 * or DFM_EINVAL (also for NULL). */
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
  int mirror_axis; /* 1 x, 2 y, 3 z: the same across that axis's plane through 0 (0: none, or x
                    * with mirror_x; issue 26: one plane per stroke) */
  /* Optional (may be NULL): the index error messages give for each position, e.g. the server's
   * render vertex of each welded vertex, so a client reads an index it knows. */
  const uint32_t *vertex_names;
  /* The rest are optional; zero means "off" or "default". */
  double spacing;     /* strokes only (dfm_stroke.h): dab spacing as a fraction of the radius,
                       * 0.01 to 1; 0: DFM_STROKE_SPACING */
  double autosmooth;  /* each dab also smooths what it touches by this weight (0 to 1), as the
                       * smooth brush's per-dab weight; strokes scale it like smooth */
  int front_only;     /* non-zero: a vertex whose normal points along `view` (away from the
                       * viewer) is not touched */
  double view[3];     /* with front_only: the direction the viewer looks in (need not be unit) */
  double height;      /* layer: how far a stroke may move a vertex from `origin` (mesh units);
                       * 0: a quarter of the dab's radius */
  const double *origin; /* the positions when the stroke began (3 per vertex), or NULL. Layer
                       * measures its height from them; and inflate, draw, crease and layer
                       * never turn a triangle by more than 45° from how it was there: the
                       * vertices of a triangle that a dab would turn further stay where they
                       * are for that dab (a fold-over guard) */
  const float *take;  /* per position, in [0, 1], or NULL (1 everywhere): each dab's displacement
                       * of a vertex is multiplied by it, and a vertex with 0 is never moved,
                       * bit for bit (an author's mask, dfm_mask_free in dfm_mask.h) */
  const double *rest; /* smooth (and auto-smoothing): the shape before any sculpting (3 per
                       * vertex), or NULL. Given, they smooth the sculpted change p - rest
                       * instead of the positions, so the mesh's own shape is kept while a
                       * sculpted crease is smoothed out */
} dfm_brush;

/* Checks samples as dfm_brush_apply and strokes do: center and direction finite, radius finite
 * and > 0, strength finite and within ±max_strength (INFINITY: any). Returns 0, or DFM_EINVAL
 * with "<what> <index>: <reason>" in err. */
int dfm_brush_check_samples(const dfm_brush_sample *samples, uint32_t count, double max_strength, const char *what,
                            char *err, size_t errlen);

/* Applies `samples` (dabs) in order to `positions` (3 doubles per topology vertex, in place).
 *
 * For a sample, a vertex p at distance d = |p - center| < radius gets the weight
 * w = strength · falloff(d / radius); every other vertex is left bitwise unchanged. With
 * n̂ the unit angle-weighted normal of p over its incident triangles (current shape), and
 * N̂ the area normal (the falloff-weighted mean of the touched vertices' n̂, normalised), each
 * touched vertex moves by:
 *   grab     w · direction
 *   inflate  w · radius · n̂
 *   smooth   w · (mean of p's neighbours - p)            (uniform Laplacian; |w| <= 1 is one
 *            step; a sample with |strength| > 1 takes ceil(|strength|) such steps, at most
 *            DFM_BRUSH_SMOOTH_MAX_STEPS, each of strength / steps (at most 1) times the falloff,
 *            each from the shape the previous step left, over the vertices touched at the start)
 *   flatten  w · (projection of p onto the plane - p), the plane passing through the
 *            falloff-weighted centroid of the touched vertices, normal N̂
 *   pinch    w · (center - p) minus its component along n̂ (pulls along the surface)
 *   draw     w · radius · N̂                              (one direction for the whole dab)
 *   crease   -w · radius · N̂ + |w| · (center - p minus its component along n̂): a groove
 *            that also pinches towards its line (a negative strength raises a ridge)
 *   layer    as draw, then held within `height` of `origin` (when origin is given)
 * plus, with autosmooth a > 0, a · falloff · (mean of p's neighbours - p). With front_only, a
 * vertex with n̂ · view >= 0 gets no weight. All displacements of one sample are computed
 * from the shape before that sample.
 *
 * mirror_x (or mirror_axis, the same for y or z): the sample and its mirror (center.x and
 * direction.x negated) are both evaluated
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
 * direction, radius or strength, radius <= 0, unknown kind or falloff, autosmooth outside
 * [0, 1], a negative or non-finite height, front_only with a zero or non-finite view);
 * DFM_ENONFINITE when a
 * sample would produce a non-finite position; DFM_ENOMEM. On any error nothing of this call is
 * applied: `positions` and `moved` are as they were. Scratch memory (allocated per call, freed
 * before returning) is proportional to the vertices the samples touch, not to the mesh. */
/* The plane a brush mirrors across: 0 x, 1 y, 2 z, or -1 for none (mirror_x is x; otherwise
 * mirror_axis 1..3; another mirror_axis is none: dfm_brush_apply refuses it). */
int dfm_brush_mirror_axis(const dfm_brush *brush);

int dfm_brush_apply(const dfm_brush *brush, const mesh_adjacency *adj, const uint32_t *triangles,
                    uint32_t triangle_count, const dfm_brush_sample *samples, uint32_t count,
                    double *positions, uint8_t *moved, char *err, size_t errlen);

#endif
