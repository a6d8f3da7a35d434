/*
 * test_rotation.c — the ARAP local step's rotation fit (server/solve/dfm_rotation.c) against
 * LAPACK's SVD: random matrices, reflections, rank-one and nearly-rotation matrices, cold and
 * warm starts, one at a time (dfm_fit_rotation) and four at a time (dfm_fit_rotation4).
 */
#include <lapacke.h>

#include "dfm.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift64, uniform in [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

static double det3(const double *m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
}

/* The oracle: R = U diag(1, 1, det(U Vᵀ)) Vᵀ from LAPACK's dgesvd. Returns the singular values. */
static void svd_rotation(const double M[9], double R[9], double sv[3]) {
  double a[9], U[9], VT[9], superb[2];
  memcpy(a, M, sizeof(a));
  ASSERT_EQ(LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'A', 'A', 3, 3, a, 3, sv, U, 3, VT, 3, superb), 0);
  double UV[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) UV[3 * i + j] = U[3 * i] * VT[j] + U[3 * i + 1] * VT[3 + j] + U[3 * i + 2] * VT[6 + j];
  double d = det3(UV) < 0 ? -1.0 : 1.0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) R[3 * i + j] = U[3 * i] * VT[j] + U[3 * i + 1] * VT[3 + j] + d * U[3 * i + 2] * VT[6 + j];
}

static double objective(const double R[9], const double M[9]) {
  double t = 0;
  for (int i = 0; i < 9; i++) t += R[i] * M[i];
  return t;
}

/* The oracle's checks on one fitted R: a proper rotation, never worse than the SVD's, and the
 * same as the SVD's where the answer is unique (a clear gap to the smallest singular value). */
static void check_fit(const double M[9], const double R[9], int kind) {
  double want[9], sv[3];
  svd_rotation(M, want, sv);
  double RtR[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) RtR[3 * i + j] = R[i] * R[j] + R[3 + i] * R[3 + j] + R[6 + i] * R[6 + j];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) ASSERT_NEAR(RtR[3 * i + j], i == j ? 1.0 : 0.0, 1e-12);
  ASSERT_NEAR(det3(R), 1.0, 1e-12);
  ASSERT(objective(R, M) >= objective(want, M) - 1e-10 * (sv[0] + 1e-300));
  if (kind != 2 && sv[1] - sv[2] > 1e-3 * sv[0] && sv[2] > 1e-6 * sv[0])
    for (int i = 0; i < 9; i++) ASSERT_NEAR(R[i], want[i], 1e-8);
}

/* dfm_fit_rotation, and dfm_fit_rotation4 on the same matrices four at a time. */
TEST(rotation_fit_matches_lapack_svd) {
  int fallbacks = 0, slow_lanes = 0;
  for (int trial = 0; trial < 20000; trial += 4) {
    double M[36], R0[36];
    int kinds[4];
    for (int l = 0; l < 4; l++) {
      double *m = M + 9 * l, *r = R0 + 9 * l;
      for (int i = 0; i < 9; i++) m[i] = urand();
      int kind = kinds[l] = (trial + l) % 5;
      if (kind == 1) { /* a reflection: det < 0 */
        if (det3(m) > 0)
          for (int i = 0; i < 3; i++) m[i] = -m[i];
      } else if (kind == 2) { /* rank one */
        double u[3] = {urand(), urand(), urand()}, v[3] = {urand(), urand(), urand()};
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 3; j++) m[3 * i + j] = u[i] * v[j];
      } else if (kind == 3) { /* nearly a rotation, as in a converging ARAP */
        double q[4] = {urand(), urand(), urand(), urand()}, Q[9];
        dfm_quat_to_matrix(q, Q);
        for (int i = 0; i < 9; i++) m[i] = Q[i] * 3.0 + 1e-3 * urand();
      }
      static const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
      memcpy(r, id, sizeof(id));
      if ((trial / 4 + l) % 2) { /* a random warm start */
        double q[4] = {urand(), urand(), urand(), urand()};
        dfm_quat_to_matrix(q, r);
      }
    }
    double R4[36], *lanes[4] = {R4, R4 + 9, R4 + 18, R4 + 27};
    memcpy(R4, R0, sizeof(R4));
    slow_lanes += dfm_fit_rotation4(M, lanes);
    for (int l = 0; l < 4; l++) {
      double R[9];
      memcpy(R, R0 + 9 * l, sizeof(R));
      fallbacks += dfm_fit_rotation(M + 9 * l, R) < 0;
      check_fit(M + 9 * l, R, kinds[l]);
      check_fit(M + 9 * l, lanes[l], kinds[l]);
    }
  }
  fprintf(stderr, "exact fallback used in %d of 20000 fits; %d lanes of dfm_fit_rotation4 left its fast path\n",
          fallbacks, slow_lanes);
  /* A zero and a non-finite matrix give the identity, beside two ordinary lanes. */
  double M[36] = {0}, R4[36], *lanes[4] = {R4, R4 + 9, R4 + 18, R4 + 27};
  M[9] = NAN;
  for (int i = 18; i < 36; i++) M[i] = urand();
  for (int l = 0; l < 4; l++) {
    double q[4] = {urand(), urand(), urand(), urand()};
    dfm_quat_to_matrix(q, lanes[l]);
  }
  dfm_fit_rotation4(M, lanes);
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < 9; i++) ASSERT_EQ(lanes[l][i], i % 4 == 0 ? 1.0 : 0.0);
  check_fit(M + 18, lanes[2], 0);
  check_fit(M + 27, lanes[3], 0);
}
