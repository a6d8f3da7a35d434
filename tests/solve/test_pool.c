/*
 * test_pool.c — the solvers' thread pool (server/solve/dfm_pool.c): a loop that finds the pool
 * busy runs on its caller alone, so systems built from the pool's own threads equal one built
 * alone.
 */
#include "dfm.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

/* Two gestures built at once from the pool's own threads, as two sessions' gestures on two libuv
 * workers: the pool is busy, so each system's setup and solves run on their own thread alone.
 * Both must equal a system built alone. */
typedef struct busy_build {
  fixture *f;
  dfm_params p;
  double *out[2];
  int rc[2];
} busy_build;

static void build_and_drag(void *ctx, size_t lo, size_t hi) {
  busy_build *b = ctx;
  for (size_t i = lo; i < hi; i++) {
    char err[256];
    dfm_system *s = NULL;
    dfm_xform x;
    dfm_xform_identity(&x);
    x.translate[1] = 0.05 * b->f->diag;
    memcpy(b->out[i], b->f->t.positions, sizeof(double) * 3 * b->f->t.vertex_count);
    b->rc[i] = dfm_system_create(&b->f->t, &b->f->a, b->f->t.positions, &b->p, &s, err, sizeof(err));
    if (b->rc[i] == 0) b->rc[i] = dfm_system_solve(s, &x, b->out[i], err, sizeof(err));
    dfm_system_destroy(s);
  }
}

TEST(systems_built_while_the_pool_is_busy_match_one_built_alone) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t n = f.t.vertex_count, top = 0;
  for (uint32_t v = 0; v < n; v++)
    if (f.t.positions[3 * v + 1] > f.t.positions[3 * top + 1]) top = v;
  uint32_t *handle, nh, *roi, nr;
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, 0.1 * f.diag, 0, &handle, &nh), NULL);
  ASSERT_OK(dfm_geodesic_region(&f.a, f.t.positions, &top, 1, 1.0 * f.diag, 0, &roi, &nr), NULL);
  for (int mode = 0; mode < 3; mode++) {
    busy_build b = {&f, {.mode = (dfm_mode)mode, .roi = roi, .roi_count = nr, .handle = handle, .handle_count = nh,
                         .iterations = 2}, {NULL, NULL}, {0, 0}};
    double *alone = malloc(sizeof(double) * 3 * n);
    b.out[0] = malloc(sizeof(double) * 3 * n), b.out[1] = malloc(sizeof(double) * 3 * n);
    double *keep = b.out[0];
    b.out[0] = alone;
    build_and_drag(&b, 0, 1); /* alone: the pool is free */
    ASSERT_OK(b.rc[0], "built alone");
    b.out[0] = keep;
    dfm_parallel_for(2, 1, build_and_drag, &b);
    for (int k = 0; k < 2; k++) {
      ASSERT_OK(b.rc[k], "built while the pool was busy");
      for (size_t i = 0; i < 3 * (size_t)n; i++) ASSERT_NEAR(b.out[k][i], alone[i], 1e-12 * f.diag);
    }
    free(alone);
    free(b.out[0]);
    free(b.out[1]);
  }
  free(handle);
  free(roi);
  fixture_fini(&f);
}
