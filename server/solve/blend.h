/*
 * blend.h — blendshape weight solves: direct manipulation (Lewis & Anjyo 2010, "Direct
 * manipulation blendshapes") and fitting a whole shape, with bounds on the weights.
 *
 * A mesh (shared/mesh.h) has T sparse targets; its shape is base + sculpt + Σ w_t Δ_t. Both
 * solves pick the weights of S *solved* targets (a subset, in target order) that minimise
 *
 *     ‖B w − r‖² + λ ‖w − w0‖²     subject to  lo ≤ w ≤ hi
 *
 * where the columns of B are the solved targets' deltas at some vertices and r is where those
 * vertices should move (relative to base + sculpt + the targets not being solved). The bounded
 * problem is solved exactly by a primal active-set method on the small normal equations
 * H = BᵀB + λI, c = Bᵀr + λ w0 (LAPACK Cholesky on the free sub-system), and the answer is a
 * KKT point: gradient H w − c ~0 on free weights, ≥ 0 at a lower bound, ≤ 0 at an upper one.
 *
 *   pins  the user drags P vertices. B (3P × S) and the Cholesky factor of H depend only on the
 *         pinned vertex set, the solved set and λ, so blend_pins_create() builds them once and
 *         every drag is blend_pins_solve(): c = Bᵀr, one back-substitution with the cached
 *         factor when no bound is hit (microseconds), a few small refactorisations when some are.
 *   fit   blend_fit() matches a whole displacement field (3 per render vertex); H comes from
 *         the targets' overlaps (O(Σ overlaps)), never from a dense 3V × S matrix.
 *
 * This module DOES NOT: know about sessions, the network or threads (a blend_pins handle is used
 * by one thread at a time; different handles are independent), evaluate shapes for clients, or
 * compute r for the caller — the caller subtracts base, sculpt and the unsolved targets.
 *
 * Errors: 0 or a negative BLEND_E* code, with a reason a user can act on in `err` (may be NULL).
 * Weight arrays (w0, lo, hi, w) hold one double per solved target, in ascending target order.
 */
#ifndef DEFORMD_BLEND_H
#define DEFORMD_BLEND_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"

/* Error codes: their own range, next to dfm's (-6001…) and clear of it. */
enum {
  BLEND_EINVAL = -6101,     /* bad argument: vertex out of range, lo > hi, λ < 0, empty sets */
  BLEND_ENONFINITE = -6102, /* NaN or Inf in pins, weights, bounds, λ or the displacement */
  BLEND_EUNMOVED = -6103,   /* a pin sits on a vertex that no solved target moves */
  BLEND_ESINGULAR = -6104,  /* λ = 0 and the weights are not determined (reason says why) */
  BLEND_ELAPACK = -6105,    /* LAPACK reported an error (reason quotes its info) */
  BLEND_EITER = -6106,      /* the active-set method hit its iteration cap */
  BLEND_ENOMEM = -6107
};

/* Returns a static string naming `code` (any BLEND_E* code or 0). */
const char *blend_strerror(int code);

/* What a pin solve did. */
typedef struct blend_result {
  int iterations;   /* active-set iterations; 0 when the unconstrained solution was feasible */
  uint32_t active;  /* weights that ended on a bound (fixed weights, lo == hi, included) */
  double residual;  /* ‖B w − r‖: how far, in all, the pins are from where they were asked */
  double solve_us;  /* wall time of blend_pins_solve() */
} blend_result;

/* What a fit did. */
typedef struct blend_fit_result {
  int iterations;       /* as in blend_result */
  uint32_t active;
  double rms;           /* sqrt(Σ_v |e_v|² / V), e_v the fitted shape's error at render vertex v */
  double max_error;     /* max_v |e_v| (Euclidean) */
  uint32_t max_vertex;  /* where it is */
  double assemble_ms;   /* building H and c from the targets' overlaps */
  double solve_ms;      /* the bounded solve and the error measurement */
} blend_fit_result;

/* A pinned-vertex set's cached system: B, H = BᵀB + λI and its Cholesky factor. */
typedef struct blend_pins blend_pins;

/* Builds and factorises the system for pinning `vertices` (pin_count render vertices of `m`; a
 * vertex may repeat) with the targets flagged in `solved` (target_count flags, NULL = all) and
 * regularisation `lambda` ≥ 0. Copies what it needs: `m` and the arrays may go after it returns.
 * Fails with BLEND_EUNMOVED when a pinned vertex is moved by no solved target, and with
 * BLEND_ESINGULAR when λ = 0 and the pins do not determine every weight (too few independent
 * pin constraints, or a target moving none of the pinned vertices).
 * On success *out is a new handle the caller frees with blend_pins_destroy(). */
int blend_pins_create(const mesh *m, const uint8_t *solved, const uint32_t *vertices,
                      uint32_t pin_count, double lambda, blend_pins **out, char *err,
                      size_t errlen);

/* Frees the handle. NULL is allowed. */
void blend_pins_destroy(blend_pins *p);

/* Number of solved targets S (the length of the weight arrays), and their target indices
 * (S entries, ascending; owned by the handle). */
uint32_t blend_pins_solved_count(const blend_pins *p);
const uint32_t *blend_pins_solved_targets(const blend_pins *p);

/* Solves one drag: `r` has 3 doubles per pin (the desired displacement of each pinned vertex),
 * `w0` the current weights (NULL = zeros), `lo`/`hi` the bounds (NULL = unbounded on that
 * side; given bounds must be finite with lo ≤ hi). Writes the S weights into `w`. `res` may be
 * NULL. Allocates nothing: the handle's workspace is reused, so one thread at a time.
 * Returns 0, BLEND_ENONFINITE, BLEND_EINVAL, BLEND_ELAPACK or BLEND_EITER (w untouched). */
int blend_pins_solve(blend_pins *p, const double *r, const double *w0, const double *lo,
                     const double *hi, double *w, blend_result *res, char *err, size_t errlen);

/* Fits the solved targets' weights to a whole displacement field: `displacement` has 3 floats
 * per render vertex (shape − base − sculpt − the unsolved targets). `solved`, `lambda`, `w0`,
 * `lo`, `hi` and `w` as for the pins (w0, lo, hi may be NULL). `res` may be NULL; it reports the
 * fitted shape's RMS and largest per-vertex error. Allocates its scratch and frees it.
 * Returns 0 or a BLEND_E* code (BLEND_ESINGULAR with λ = 0 when some solved target moves
 * nothing or is a combination of others). */
int blend_fit(const mesh *m, const uint8_t *solved, const float *displacement, double lambda,
              const double *w0, const double *lo, const double *hi, double *w,
              blend_fit_result *res, char *err, size_t errlen);

#endif
