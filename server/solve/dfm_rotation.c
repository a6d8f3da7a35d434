/*
 * dfm_rotation.c — the ARAP local step's 3×3 rotation fit.
 *
 * Wanted: the proper rotation R maximising tr(Rᵀ M) for a 3×3 M (M = Σ w e' eᵀ over a vertex's
 * edges), i.e. U·diag(1, 1, det(UVᵀ))·Vᵀ for the SVD M = U Σ Vᵀ.
 *
 * Fast path: starting from the previous iteration's rotation (ARAP warm-starts every
 * vertex), rotate R by ω until ω vanishes. ω is Müller et al.'s (2016, "A Robust Method to
 * Extract the Rotational Part of Deformations") Σ rᵢ × mᵢ / |Σ rᵢ · mᵢ| far from the answer,
 * and the full Newton step on SO(3) near it, which turns their linear convergence into a
 * quadratic one: one to three steps from a warm start. It always yields a proper rotation. Its
 * fixed points are all R with RᵀM symmetric, so the result is then checked: RᵀM positive
 * semi-definite proves R is the maximiser. Otherwise (reflections, det M < 0, or a saddle) the exact path runs: Horn's
 * quaternion method, the largest eigenvector of a 4×4 symmetric matrix by cyclic Jacobi.
 * tests/solve/test_rotation.c (rotation_fit_matches_lapack_svd) compares both against LAPACK's SVD.
 *
 * DOES NOT allocate or keep state: safe to call from any number of threads.
 */
#include <math.h>
#include <string.h>

#include "dfm.h"

/* The drag's rigid motion (dfm.h). */
void dfm_xform_identity(dfm_xform *x) {
  memset(x, 0, sizeof(*x));
  x->rotation[3] = 1.0;
}

void dfm_xform_apply(const dfm_xform *x, const double p[3], double out[3]) {
  double R[9], d[3] = {p[0] - x->pivot[0], p[1] - x->pivot[1], p[2] - x->pivot[2]};
  dfm_quat_to_matrix(x->rotation, R);
  for (int i = 0; i < 3; i++)
    out[i] = R[3 * i] * d[0] + R[3 * i + 1] * d[1] + R[3 * i + 2] * d[2] + x->pivot[i] + x->translate[i];
}

/* Row-major 3×3 helpers. */
static void mul3(const double a[9], const double b[9], double out[9]) {
  double r[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) r[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
  memcpy(out, r, sizeof(r));
}

void dfm_quat_to_matrix(const double q[4], double R[9]) {
  /* q = (x, y, z, w), normalised here. */
  double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (!(n > 0)) {
    static const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    memcpy(R, id, sizeof(id));
    return;
  }
  double x = q[0] / n, y = q[1] / n, z = q[2] / n, w = q[3] / n;
  R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - z * w), R[2] = 2 * (x * z + y * w);
  R[3] = 2 * (x * y + z * w), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - x * w);
  R[6] = 2 * (x * z - y * w), R[7] = 2 * (y * z + x * w), R[8] = 1 - 2 * (x * x + y * y);
}

/* Largest eigenvector of a symmetric 4×4 by cyclic Jacobi. */
static void largest_eigenvector4(double A[16], double v[4]) {
  double V[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  for (int sweep = 0; sweep < 50; sweep++) {
    double off = 0, scale = 0;
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) {
        if (i != j) off += A[4 * i + j] * A[4 * i + j];
        scale += A[4 * i + j] * A[4 * i + j];
      }
    if (off <= 1e-30 * scale || off == 0.0) break;
    for (int p = 0; p < 3; p++) {
      for (int q = p + 1; q < 4; q++) {
        double apq = A[4 * p + q];
        if (apq == 0.0) continue;
        double theta = (A[4 * q + q] - A[4 * p + p]) / (2.0 * apq);
        double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
        double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
        for (int k = 0; k < 4; k++) { /* A := Jᵀ A J, columns then rows */
          double akp = A[4 * k + p], akq = A[4 * k + q];
          A[4 * k + p] = c * akp - s * akq;
          A[4 * k + q] = s * akp + c * akq;
        }
        for (int k = 0; k < 4; k++) {
          double apk = A[4 * p + k], aqk = A[4 * q + k];
          A[4 * p + k] = c * apk - s * aqk;
          A[4 * q + k] = s * apk + c * aqk;
        }
        for (int k = 0; k < 4; k++) {
          double vkp = V[4 * k + p], vkq = V[4 * k + q];
          V[4 * k + p] = c * vkp - s * vkq;
          V[4 * k + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  int best = 0;
  for (int i = 1; i < 4; i++)
    if (A[4 * i + i] > A[4 * best + best]) best = i;
  for (int k = 0; k < 4; k++) v[k] = V[4 * k + best];
}

/* Horn 1987: the unit quaternion maximising Σ a·(R b) for M = Σ a bᵀ is the eigenvector of the
 * largest eigenvalue of N(M). Exact for any M, reflections included. */
static void exact_rotation(const double M[9], double R[9]) {
  /* S = Mᵀ: S_xy = Σ b_x a_y. */
  double Sxx = M[0], Sxy = M[3], Sxz = M[6];
  double Syx = M[1], Syy = M[4], Syz = M[7];
  double Szx = M[2], Szy = M[5], Szz = M[8];
  double N[16] = {Sxx + Syy + Szz, Syz - Szy,        Szx - Sxz,        Sxy - Syx,
                  Syz - Szy,       Sxx - Syy - Szz,  Sxy + Syx,        Szx + Sxz,
                  Szx - Sxz,       Sxy + Syx,        -Sxx + Syy - Szz, Syz + Szy,
                  Sxy - Syx,       Szx + Sxz,        Syz + Szy,        -Sxx - Syy + Szz};
  double v[4];
  largest_eigenvector4(N, v);
  double q[4] = {v[1], v[2], v[3], v[0]}; /* (x, y, z, w) */
  dfm_quat_to_matrix(q, R);
}

/* Whether RᵀM is (numerically) positive semi-definite, which makes R the maximiser. */
static int is_maximiser(const double M[9], const double R[9]) {
  double B[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) B[3 * i + j] = R[i] * M[j] + R[3 + i] * M[3 + j] + R[6 + i] * M[6 + j];
  double norm = 0;
  for (int i = 0; i < 9; i++) norm += B[i] * B[i];
  double eps = 1e-12 * sqrt(norm) + 1e-300;
  double sym = fabs(B[1] - B[3]) + fabs(B[2] - B[6]) + fabs(B[5] - B[7]);
  if (sym > 1e-9 * sqrt(norm) + 1e-300) return 0;
  double b01 = 0.5 * (B[1] + B[3]), b02 = 0.5 * (B[2] + B[6]), b12 = 0.5 * (B[5] + B[7]);
  if (B[0] < -eps || B[4] < -eps || B[8] < -eps) return 0;
  double m01 = B[0] * B[4] - b01 * b01, m02 = B[0] * B[8] - b02 * b02, m12 = B[4] * B[8] - b12 * b12;
  double e2 = eps * sqrt(norm);
  if (m01 < -e2 || m02 < -e2 || m12 < -e2) return 0;
  double det = B[0] * (B[4] * B[8] - b12 * b12) - b01 * (b01 * B[8] - b12 * b02) + b02 * (b01 * b12 - B[4] * b02);
  return det >= -e2 * sqrt(norm);
}

int dfm_fit_rotation(const double M[9], double R[9]) {
  double norm = 0;
  for (int i = 0; i < 9; i++) norm += M[i] * M[i];
  if (!(norm > 0) || !isfinite(norm)) {
    static const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    memcpy(R, id, sizeof(id));
    return 0;
  }
  norm = sqrt(norm);
  double tiny = 1e-8 * norm;
  for (int it = 1; it <= 12; it++) {
    /* Second-order model of f(Q R) = tr((Q R)ᵀ M), Q = exp([ω]×), with C = M Rᵀ:
     *   f ≈ f₀ + g·ω - ½ ωᵀ H ω,  g = axial(C - Cᵀ) = Σ_i r_i × m_i,  H = tr(C) I - sym(C).
     * Newton's step ω = H⁻¹ g converges quadratically near the maximum, where H is positive
     * definite; far from it, Müller's step ω = g / |tr C| (H ≈ tr(C) I) is taken instead. */
    double C[9];
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) C[3 * a + b] = M[3 * a] * R[3 * b] + M[3 * a + 1] * R[3 * b + 1] + M[3 * a + 2] * R[3 * b + 2];
    double g[3] = {C[7] - C[5], C[2] - C[6], C[3] - C[1]};
    double tr = C[0] + C[4] + C[8];
    double h00 = tr - C[0], h11 = tr - C[4], h22 = tr - C[8];
    double h01 = -0.5 * (C[1] + C[3]), h02 = -0.5 * (C[2] + C[6]), h12 = -0.5 * (C[5] + C[7]);
    /* LDLᵀ of the 3×3 H (no square roots); a pivot below 1e-8·|M| means "not safely
     * positive definite". */
    double w[3];
    int newton = 0;
    double d0 = h00;
    if (d0 > tiny) {
      double l10 = h01 / d0, l20 = h02 / d0;
      double d1 = h11 - l10 * h01;
      if (d1 > tiny) {
        double l21 = (h12 - l20 * h01) / d1;
        double d2 = h22 - l20 * h02 - l21 * l21 * d1;
        if (d2 > tiny) {
          double y0 = g[0], y1 = g[1] - l10 * y0, y2 = g[2] - l20 * y0 - l21 * y1;
          w[2] = y2 / d2;
          w[1] = y1 / d1 - l21 * w[2];
          w[0] = y0 / d0 - l10 * w[1] - l20 * w[2];
          newton = 1;
        }
      }
    }
    if (!newton) {
      double scale = 1.0 / (fabs(tr) + 1e-9 * norm);
      w[0] = g[0] * scale, w[1] = g[1] * scale, w[2] = g[2] * scale;
    }
    double angle2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
    if (angle2 > 1.0) { /* a long step is not to be trusted: take a bounded one */
      double inv = 1.0 / sqrt(angle2);
      for (int k = 0; k < 3; k++) w[k] *= inv;
      angle2 = 1.0;
    }
    /* Q from the unit quaternion (ω/2, 1)/|·|: a rotation by about |ω| without any trig (the
     * difference from exp is third order in |ω|, and the iteration corrects it). Each of Q's
     * entries is a product of two of the quaternion's components, that is the unnormalised
     * one's over |·|²: one division, no square root. */
    double qx = 0.5 * w[0], qy = 0.5 * w[1], qz = 0.5 * w[2];
    double s2 = 2.0 / (qx * qx + qy * qy + qz * qz + 1.0);
    double Q[9] = {1 - s2 * (qy * qy + qz * qz), s2 * (qx * qy - qz),     s2 * (qx * qz + qy),
                   s2 * (qx * qy + qz),     1 - s2 * (qx * qx + qz * qz), s2 * (qy * qz - qx),
                   s2 * (qx * qz - qy),     s2 * (qy * qz + qx),     1 - s2 * (qx * qx + qy * qy)};
    mul3(Q, R, R);
    /* Converged. A Newton step of size ε leaves an error of order ε² divided by the gap
     * between singular values: under 1e-9 radians for |ε| < 1e-6 wherever the gap is above
     * 1e-3 |M| (rotation_fit_matches_lapack_svd asks 1e-8 of LAPACK's answer there), far finer
     * than one ARAP iteration resolves. Stopping there instead of at 1e-8 saves the third
     * step of most warm-started fits (16k region: 83 % of the fits took 3 steps, now 83 % take
     * 2). A Müller step must itself shrink to 1e-8. When H was positive definite the point is a
     * local maximum of tr(RᵀM) on SO(3), and that function has no other local maximum: R is
     * the answer. */
    if (angle2 < (newton ? 1e-12 : 1e-16)) {
      if (newton) return it;
      break;
    }
  }
  if (is_maximiser(M, R)) return 12;
  exact_rotation(M, R);
  return -1;
}

/* Four fits at once, one per vector lane: the Newton steps of dfm_fit_rotation without their
 * dependent chain of divisions and square roots costing four times (a scalar fit is bound by
 * their latency, not by arithmetic). A lane that meets a Hessian not safely positive definite,
 * or has not converged after four steps, is fitted again by dfm_fit_rotation from its original
 * warm start, so every result is one dfm_fit_rotation could give. */
typedef double rot_v4 __attribute__((vector_size(32)));
typedef long long rot_m4 __attribute__((vector_size(32)));

/* a where the mask is set, else b (a macro: passing AVX vectors to a function changes the ABI). */
#define rot_sel(m, a, b) ((rot_v4)(((rot_m4)(a) & (m)) | ((rot_m4)(b) & ~(m))))

/* GCC builds an AVX2 clone beside the default. clang 14 names a multiversioned function's
 * resolver `dfm_fit_rotation4.ifunc`, which calls from other files do not link against: clang
 * builds keep the default version only. */
#if defined(__clang__)
#define ROTATION4_CLONES
#else
#define ROTATION4_CLONES __attribute__((target_clones("avx2", "default")))
#endif
ROTATION4_CLONES
int dfm_fit_rotation4(const double M[36], double *R[4]) {
  rot_v4 m[9], r[9];
  for (int i = 0; i < 9; i++) {
    m[i] = (rot_v4){M[i], M[9 + i], M[18 + i], M[27 + i]};
    r[i] = (rot_v4){R[0][i], R[1][i], R[2][i], R[3][i]};
  }
  /* As a tree, not a chain of nine additions: the norm only sets the pivots' threshold. */
  rot_v4 norm = ((m[0] * m[0] + m[1] * m[1]) + (m[2] * m[2] + m[3] * m[3])) +
         ((m[4] * m[4] + m[5] * m[5]) + (m[6] * m[6] + m[7] * m[7])) + m[8] * m[8];
  rot_v4 tiny;
  rot_m4 ok; /* lanes still on the fast path */
  for (int l = 0; l < 4; l++) {
    double nl = norm[l];
    ok[l] = nl > 0 && isfinite(nl) ? -1 : 0;
    tiny[l] = ok[l] ? 1e-8 * sqrt(nl) : 1.0;
  }
  rot_m4 done = {0, 0, 0, 0};
  const rot_v4 one = {1, 1, 1, 1}, half = {0.5, 0.5, 0.5, 0.5};
  for (int it = 0; it < 4; it++) {
    rot_v4 C[9];
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) C[3 * a + b] = m[3 * a] * r[3 * b] + m[3 * a + 1] * r[3 * b + 1] + m[3 * a + 2] * r[3 * b + 2];
    rot_v4 g0 = C[7] - C[5], g1 = C[2] - C[6], g2 = C[3] - C[1];
    rot_v4 tr = C[0] + C[4] + C[8];
    rot_v4 h00 = tr - C[0], h11 = tr - C[4], h22 = tr - C[8];
    rot_v4 h01 = -half * (C[1] + C[3]), h02 = -half * (C[2] + C[6]), h12 = -half * (C[5] + C[7]);
    /* LDLᵀ of H, as in dfm_fit_rotation; a lane with a small pivot leaves the fast path. */
    rot_m4 pd = h00 > tiny;
    rot_v4 d0 = rot_sel(pd, h00, one);
    rot_v4 l10 = h01 / d0, l20 = h02 / d0;
    rot_v4 d1 = h11 - l10 * h01;
    pd &= d1 > tiny;
    d1 = rot_sel(pd, d1, one);
    rot_v4 l21 = (h12 - l20 * h01) / d1;
    rot_v4 d2 = h22 - l20 * h02 - l21 * l21 * d1;
    pd &= d2 > tiny;
    d2 = rot_sel(pd, d2, one);
    ok &= pd | done;
    rot_v4 y1 = g1 - l10 * g0, y2 = g2 - l20 * g0 - l21 * y1;
    rot_v4 w2 = y2 / d2, w1 = y1 / d1 - l21 * w2, w0 = g0 / d0 - l10 * w1 - l20 * w2;
    rot_v4 angle2 = w0 * w0 + w1 * w1 + w2 * w2;
    rot_m4 step = ok & ~done; /* lanes that take this step */
    rot_m4 big = step & (angle2 > one); /* rare: the scalar loop only when a lane needs it */
    if (big[0] | big[1] | big[2] | big[3]) {
      rot_v4 shrink = one;
      for (int l = 0; l < 4; l++)
        if (big[l]) shrink[l] = 1.0 / sqrt(angle2[l]);
      w0 *= shrink, w1 *= shrink, w2 *= shrink;
    }
    /* Q as in dfm_fit_rotation: one vector division, where the square root and the division
     * of a normalised quaternion were a scalar loop (11 % of this function's samples). */
    rot_v4 qx = half * w0, qy = half * w1, qz = half * w2;
    rot_v4 two = one + one, s2 = two / (qx * qx + qy * qy + qz * qz + one);
    rot_v4 Q[9] = {one - s2 * (qy * qy + qz * qz), s2 * (qx * qy - qz), s2 * (qx * qz + qy),
                   s2 * (qx * qy + qz), one - s2 * (qx * qx + qz * qz), s2 * (qy * qz - qx),
                   s2 * (qx * qz - qy), s2 * (qy * qz + qx), one - s2 * (qx * qx + qy * qy)};
    for (int b = 0; b < 3; b++) {
      rot_v4 c0 = r[b], c1 = r[3 + b], c2 = r[6 + b];
      for (int a = 0; a < 3; a++)
        r[3 * a + b] = rot_sel(step, Q[3 * a] * c0 + Q[3 * a + 1] * c1 + Q[3 * a + 2] * c2, r[3 * a + b]);
    }
    /* The convergence test of dfm_fit_rotation's Newton steps. */
    rot_v4 eps = {1e-12, 1e-12, 1e-12, 1e-12};
    done |= step & (angle2 < eps);
    rot_m4 pending = ok & ~done;
    if (!(pending[0] | pending[1] | pending[2] | pending[3])) break;
  }
  int slow = 0;
  for (int l = 0; l < 4; l++) {
    if (ok[l] && done[l]) {
      for (int i = 0; i < 9; i++) R[l][i] = r[i][l];
    } else {
      dfm_fit_rotation(M + 9 * l, R[l]); /* from the original warm start, still in R[l] */
      slow++;
    }
  }
  return slow;
}
