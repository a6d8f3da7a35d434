/*
 * solve_helpers.c — the helpers tests/solve's files share (solve_helpers.h).
 */
#include "solve_helpers.h"

#include "test.h"

void fixture_init(fixture *f, mesh *m) {
  f->m = m;
  ASSERT_OK(mesh_topology_init(&f->t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&f->a, f->t.vertex_count, f->t.triangles, f->t.triangle_count), NULL);
  f->diag = mesh_bbox_diagonal(m);
}

void fixture_fini(fixture *f) {
  mesh_adjacency_fini(&f->a);
  mesh_topology_fini(&f->t);
  mesh_destroy(f->m);
}

void drag_both(fixture *f, dfm_system *s[2], double *a, double *b, uint32_t top, int axis, double tol,
               dfm_mode mode, const char *what) {
  char err[256];
  for (int d = 1; d <= 3; d++) {
    dfm_xform x;
    dfm_xform_identity(&x);
    x.translate[0] = 0.02 * d * f->diag, x.translate[1] = 0.03 * d * f->diag;
    x.rotation[axis] = sin(0.1 * d), x.rotation[3] = cos(0.1 * d);
    memcpy(x.pivot, f->t.positions + 3 * top, sizeof(double) * 3);
    ASSERT_OK(dfm_system_solve(s[0], &x, a, err, sizeof(err)), err);
    ASSERT_OK(dfm_system_solve(s[1], &x, b, err, sizeof(err)), err);
    double worst = 0, moved = 0;
    for (size_t i = 0; i < 3 * (size_t)f->t.vertex_count; i++) {
      worst = fmax(worst, fabs(a[i] - b[i]));
      moved = fmax(moved, fabs(a[i] - f->t.positions[i]));
    }
    if (worst > tol * f->diag)
      test__fail(__FILE__, __LINE__, "%s drag %d: %s differ by %.3g (diagonal %.3g)", dfm_mode_name(mode), d, what,
                 worst, f->diag);
    ASSERT(moved > 0.01 * f->diag);
  }
}
