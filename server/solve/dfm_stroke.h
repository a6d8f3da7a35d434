/*
 * dfm_stroke.h — brush strokes as artists know them: dabs placed along a path at a spacing
 * relative to the radius, with strengths calibrated per pass, so that a stroke's result depends
 * on the path and not on how many input events described it.
 *
 * A stroke is a path (the points' centres, in order) with a radius and a strength at each point
 * (interpolated linearly in between). Dabs go along the path from its first point, one every
 * `spacing · radius` of arc length (radius taken where the dab is), and each is applied by
 * dfm_brush.c to the shape the previous one left. Their weights are chosen so that one pass
 * does what the strength says whatever the spacing and falloff:
 *
 *   draw, inflate   a straight pass raises the surface under the middle of the path by
 *                   ½ · strength · radius (strength 1: half the radius; never more than the
 *                   radius, as |strength| <= 1);
 *   layer           the same at twice the rate, held within `height` of where the stroke
 *                   began (default a quarter of the radius): a plateau;
 *   crease          a groove ½ · strength · radius deep that also pinches towards the path;
 *   pinch           distances to the path shrink by a factor e^(−strength) per pass;
 *   flatten         distances to the fitted plane shrink by about e^(−2 · strength) per pass;
 *   smooth          strength · max(10, (1.5 · radius / mean edge length)²) steps of Laplacian
 *                   smoothing per pass (a dab whose weight is over one step takes several, at
 *                   most DFM_BRUSH_SMOOTH_MAX_STEPS: dfm_brush_apply), so a pass reaches across
 *                   the radius at any resolution;
 *                   auto-smoothing rides along at about 10 · `autosmooth` steps, each dab at
 *                   most one;
 *   grab            the surface under the path follows it: each dab drags what it touches by
 *                   strength · falloff times the step to the next dab (at most a tenth of the
 *                   radius), so the vertices at the centre travel the whole path and nothing
 *                   folds over. A one-point stroke drags by its point's `direction`.
 *
 * Per dab the weight is k · falloff with k = gain · strength · spacing / (2 ∫₀¹ falloff): a
 * straight pass adds up to (radius / (spacing·radius)) · 2 ∫₀¹ falloff dabs' worth of falloff
 * under its middle, which k divides out. A single dab (a click, or a path shorter than the
 * spacing) is one such dab. A dab's falloff is measured from its point of the path, which stays
 * where it was given while the surface under it rises: a tall pass comes out somewhat lower
 * (3 % at ½ strength with the smoothstep falloff, none with the constant one).
 *
 * A stroke may come in pieces, as a pointer moves (dfm_stroke_state): each piece continues the
 * path from where the previous one ended, the next dab exactly one spacing after the last one,
 * and the layer's height and the fold guard measure from the shape when the first piece began.
 * Pieces then give the dabs, and the result, of the whole path sent at once.
 *
 * DOES NOT: apply dabs itself (dfm_brush_apply), keep state between strokes, or know sessions.
 *
 * Errors: 0 or a negative DFM_E* code (dfm.h), with a reason in `err`.
 */
#ifndef DEFORMD_DFM_STROKE_H
#define DEFORMD_DFM_STROKE_H

#include <stddef.h>
#include <stdint.h>

#include "dfm_brush.h"

#define DFM_STROKE_SPACING 0.1     /* default dab spacing, as a fraction of the radius */
#define DFM_STROKE_MAX_DABS 65536  /* a stroke that would place more is refused */

/* Where a stroke sent in pieces stands between them. Zero it for a new stroke; free it with
 * dfm_stroke_state_fini. */
typedef struct dfm_stroke_state {
  int started;            /* a piece has been applied */
  double need;            /* arc length from `last` to the next dab */
  dfm_brush_sample last;  /* the path's last point so far */
  double *origin;         /* the positions when the first piece began (3 per vertex; owned), for
                           * the layer's height and the fold guard; NULL for the other brushes */
  double edge;            /* smooth: the mesh's mean edge length when the first piece began */
} dfm_stroke_state;

void dfm_stroke_state_fini(dfm_stroke_state *s);

/* The dabs of the stroke (or of its next piece, with `state` started) along `points`
 * (count >= 1), with their calibrated strengths and, for grab, their directions; *need_after
 * (may be NULL) gets the arc length from the last point to the dab after the last one.
 * Validates the points and the brush's stroke settings (strength within [-1, 1], spacing
 * within [0.01, 1] or 0, autosmooth within [0, 1]). Returns 0 with *out (malloc'ed, caller
 * frees; NULL when the piece holds no dab) and *dab_count, or DFM_EINVAL (reason in err; also
 * for a path that would need more than DFM_STROKE_MAX_DABS dabs) or DFM_ENOMEM. */
int dfm_stroke_dabs(const dfm_brush *brush, const dfm_brush_sample *points, uint32_t count,
                    const dfm_stroke_state *state, dfm_brush_sample **out, uint32_t *dab_count, double *need_after,
                    char *err, size_t errlen);

/* Places the dabs of the stroke along `points` and applies them to `positions` (as
 * dfm_brush_apply: 3 doubles per topology vertex, in place; `moved` may be NULL). For inflate,
 * draw, crease and layer it keeps the positions at the start as the brush's origin (the layer's
 * height and the fold-over guard; brush->origin is ignored). `state` may be NULL (a whole
 * stroke); otherwise the points continue the stroke it describes (a new one when zeroed), and
 * on success it is updated for the next piece. *dab_count (may be NULL) gets the number of
 * dabs. All or nothing: on error nothing is applied and `state` is as it was. */
int dfm_stroke_apply(const dfm_brush *brush, const mesh_adjacency *adj, const uint32_t *triangles,
                     uint32_t triangle_count, const dfm_brush_sample *points, uint32_t count, double *positions,
                     uint8_t *moved, dfm_stroke_state *state, uint32_t *dab_count, char *err, size_t errlen);

/* ∫₀¹ falloff(t) dt: ½ smoothstep and linear, 1 constant, 0.4101... gaussian. */
double dfm_stroke_falloff_integral(dfm_falloff f);

#endif
