/*
 * dfm_border.c — what a smooth border does to a gesture's solves (dfm_params.smooth_border): the
 * surface leaves the region's border and meets the handle with zero slope, where the plain
 * Laplacian and ARAP solves leave a kink (a crease at the border, a ridge around the handle).
 * Every piece works from the handle's harmonic weight u of each free vertex (1 on the handle, 0
 * on every other constrained vertex), which dfm_system.c solves once per gesture.
 *
 *   Laplacian   the harmonic displacement d becomes d · (3u − 2u²)
 *   ARAP        the rotations of constrained vertices are prescribed, not fitted, and the
 *               result is blended towards the handle's smoothstepped rigid motion at both ends
 *               (dfm__border_blend_arap); dfm_arap.c adds the rotations' smoothness term
 *   biharmonic  nothing: its two fixed rings already make it C1
 *
 * DOES NOT solve: it reshapes what dfm_system.c solved, and calls nothing but dfm_rotation.c.
 */
#include <string.h>

#include "dfm_internal.h"

/* A smooth border prescribes the rotations of the constrained vertices instead of fitting them:
 * the drag's rotation on the handle, none elsewhere. The free vertices next to them then keep
 * their rest shape relative to them, so the surface leaves the border and the handle without a
 * kink (a fitted rotation there lets the first ring of free vertices fold against it). */
void dfm__border_prescribe_rotations(dfm_system *s, const dfm_xform *xf) {
  static const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  double Rh[9];
  dfm_quat_to_matrix(xf->rotation, Rh);
  for (uint32_t r = s->nrot_fit; r < s->nrot; r++)
    memcpy(s->R + 9 * (size_t)r, s->role[s->rot_vertex[r]] == DFM__ROLE_HANDLE ? Rh : id, sizeof(id));
}

/* A smooth border shapes a harmonic displacement d by its handle weight u: d · (3u − 2u²). For a
 * translated handle d = u·t, so this is smoothstep(u)·t, which leaves the region's border
 * (u = 0) and the handle's edge (u = 1) with zero slope where the plain harmonic field has a
 * kink: a crease at the border and a ridge around the handle. */
static inline double smooth_gain(double u) { return 3.0 * u - 2.0 * u * u; }

/* The handle's rigid motion carried to point r: R (r − c) + c + t − r. */
static void rigid_displacement(const double R[9], const dfm_xform *xf, const double *r, double d[3]) {
  double q[3] = {r[0] - xf->pivot[0], r[1] - xf->pivot[1], r[2] - xf->pivot[2]};
  for (int i = 0; i < 3; i++) d[i] = R[3 * i] * q[0] + R[3 * i + 1] * q[1] + R[3 * i + 2] * q[2] - q[i] + xf->translate[i];
}

void dfm__border_shape_harmonic(dfm_system *s) {
  uint32_t nf = s->nf;
  for (uint32_t k = 0; k < nf; k++) {
    double g = smooth_gain(s->u[k]);
    for (int d = 0; d < 3; d++) {
      /* Only what the handle causes is shaped: the soft targets' own pull stays whole. */
      double f = s->f ? s->f[3 * (size_t)k + d] : 0.0;
      s->x[k + (size_t)d * nf] = g * (s->x[k + (size_t)d * nf] - f) + f;
    }
  }
}

/* ARAP with a smooth border: with d_h(x) = R (x − c) + c + t − x the handle's rigid motion
 * carried to every point and s the smoothstep, the result is
 *     d = s(u)·d_h + f + φ(u)·(d_arap − u·d_h − f),   φ(u) = s(2u)·s(2 − 2u),
 * so the surface leaves the border (u = 0) with zero displacement and zero slope, meets the
 * handle (u = 1) moving rigidly with it and with zero slope relative to it, and is ARAP's in
 * the middle of the region (φ = 1 for u = ½). For a translated handle u·d_h is the harmonic
 * displacement, so the ends are the smooth Laplacian's. ARAP's own solution has the same kink
 * as the harmonic one at both ends; on the README's drag of the demo head's nose it turned
 * edges by up to 32° where this turns none by 10° (docs/performance.md). A part of the mesh that
 * no border reaches (u = 1) moves rigidly with the handle, as ARAP moves it. f, the harmonic
 * pull of soft targets that are not where their vertices are, is kept whole: it is what takes a
 * strongly held vertex to its target. `p` is ARAP's
 * iterate (the next drag's warm start); the blend goes to `out`. */
typedef struct blend_job {
  const dfm_system *s;
  const dfm_xform *xf;
  double R[9];
  const double *p;
  double *out;
} blend_job;

static void blend_range(void *ctx, size_t lo, size_t hi) {
  const blend_job *j = ctx;
  const dfm_system *s = j->s;
  for (uint32_t k = (uint32_t)lo; k < (uint32_t)hi; k++) {
    uint32_t v = s->free_vertex[k];
    const double *r = s->rest + 3 * (size_t)v, *q = j->p + 3 * (size_t)v;
    double u = s->u[k], a = 2.0 * u, b = 2.0 - 2.0 * u, dh[3];
    a = a > 1 ? 1 : a, b = b > 1 ? 1 : b;
    double phi = a * a * (3 - 2 * a) * b * b * (3 - 2 * b), g = u * u * (3 - 2 * u);
    rigid_displacement(j->R, j->xf, r, dh);
    for (int i = 0; i < 3; i++) {
      double f = s->f ? s->f[3 * (size_t)k + i] : 0.0;
      j->out[3 * (size_t)v + i] = r[i] + g * dh[i] + f + phi * (q[i] - r[i] - u * dh[i] - f);
    }
  }
}

void dfm__border_blend_arap(const dfm_system *s, const dfm_xform *xf, const double *p, double *out) {
  blend_job j = {s, xf, {0}, p, out};
  dfm_quat_to_matrix(xf->rotation, j.R);
  dfm_parallel_for(s->nf, dfm__grain(s->nf), blend_range, &j);
}

/* ARAP's first iterate with a smooth border: u·d_h + f, the harmonic start for a translation,
 * without a solve. */
void dfm__border_arap_start(const dfm_system *s, const dfm_xform *xf, double *p) {
  double R[9], d[3];
  dfm_quat_to_matrix(xf->rotation, R);
  for (uint32_t k = 0; k < s->nf; k++) {
    double *q = p + 3 * (size_t)s->free_vertex[k];
    rigid_displacement(R, xf, q, d);
    for (int i = 0; i < 3; i++) q[i] += s->u[k] * d[i] + (s->f ? s->f[3 * (size_t)k + i] : 0.0);
  }
}
