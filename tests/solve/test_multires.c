/*
 * test_multires.c — the multiresolution path (dfm_params.multires, dfm_multires.c): on meshes
 * small enough for the exact solve, the multiresolution answer stays within a stated bound of the
 * exact one and the distance deform-bench reports (dfm_distance) is the one computed here; a
 * rigid motion of the handle moves the whole mesh rigidly (closed form); AUTO picks the path by
 * size.
 */
#include "dfm.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

/* The k vertices nearest (along edges) the vertex with the largest (sign 1) or smallest (sign
 * -1) y. */
static uint32_t *extreme_patch(fixture *f, int sign, uint32_t k, uint32_t *count, uint32_t *seed) {
  uint32_t n = f->t.vertex_count, best = 0;
  for (uint32_t v = 0; v < n; v++)
    if (sign * f->t.positions[3 * v + 1] > sign * f->t.positions[3 * best + 1]) best = v;
  uint32_t *out = NULL;
  ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, &best, 1, INFINITY, k, &out, count), NULL);
  if (seed) *seed = best;
  return out;
}

static void drag_xform(const fixture *f, uint32_t top, int d, dfm_xform *x) {
  dfm_xform_identity(x);
  x->translate[1] = 0.04 * d * f->diag, x->translate[0] = 0.015 * d * f->diag;
  x->rotation[2] = sin(0.06 * d), x->rotation[3] = cos(0.06 * d);
  memcpy(x->pivot, f->t.positions + 3 * (size_t)top, sizeof(double) * 3);
}

/* An ARAP gesture with a handle on top and anchors at the bottom, sharp border, solved exactly
 * and on a proxy of about `proxy` vertices through the same three drags. After each drag the two
 * must be within `bound` of the diagonal at every vertex, and dfm_distance must say what the
 * distance computed here says. */
static void compare_exact(fixture *f, uint32_t proxy, double bound, const char *what) {
  char err[256];
  uint32_t n = f->t.vertex_count, nh, na, top;
  uint32_t *handle = extreme_patch(f, 1, 40, &nh, &top), *anchors = extreme_patch(f, -1, 40, &na, NULL);
  dfm_system *s[2];
  for (int k = 0; k < 2; k++) {
    dfm_params p = {.mode = DFM_ARAP, .handle = handle, .handle_count = nh, .anchors = anchors, .anchor_count = na,
                    .iterations = 3, .multires = k ? DFM_MULTIRES_ON : DFM_MULTIRES_OFF, .multires_proxy = proxy};
    ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s[k], err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s[k], &info);
    ASSERT_EQ(info.multires, k);
    ASSERT_EQ(info.vertices, n);
    if (k) ASSERT(info.proxy_vertices > proxy / 2 && info.proxy_vertices < proxy + proxy / 10);
  }
  double *a = malloc(sizeof(double) * 3 * n), *b = malloc(sizeof(double) * 3 * n);
  memcpy(a, f->t.positions, sizeof(double) * 3 * n);
  memcpy(b, f->t.positions, sizeof(double) * 3 * n);
  double worst = 0, moved = 0;
  for (int d = 1; d <= 3; d++) {
    dfm_xform x;
    drag_xform(f, top, d, &x);
    ASSERT_OK(dfm_system_solve(s[0], &x, a, err, sizeof(err)), err);
    ASSERT_OK(dfm_system_solve(s[1], &x, b, err, sizeof(err)), err);
    double mx = 0, sum = 0;
    for (uint32_t v = 0; v < n; v++) {
      const double *p = a + 3 * (size_t)v, *q = b + 3 * (size_t)v, *r = f->t.positions + 3 * (size_t)v;
      double e = sqrt((p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) + (p[2] - q[2]) * (p[2] - q[2]));
      mx = fmax(mx, e), sum += e * e;
      moved = fmax(moved, sqrt((p[0] - r[0]) * (p[0] - r[0]) + (p[1] - r[1]) * (p[1] - r[1]) + (p[2] - r[2]) * (p[2] - r[2])));
    }
    double rep_max, rep_rms;
    dfm_distance(a, b, n, f->diag, &rep_max, &rep_rms);
    ASSERT_NEAR(rep_max, mx / f->diag, 1e-12);
    ASSERT_NEAR(rep_rms, sqrt(sum / n) / f->diag, 1e-12);
    worst = fmax(worst, rep_max);
    if (rep_max > bound)
      test__fail(__FILE__, __LINE__, "%s drag %d: multiresolution %.3g of the diagonal from exact (bound %.3g)", what, d,
                 rep_max, bound);
    /* Handles and anchors are exact. */
    for (uint32_t i = 0; i < nh; i++) {
      double h[3];
      dfm_xform_apply(&x, f->t.positions + 3 * (size_t)handle[i], h);
      for (int k = 0; k < 3; k++) ASSERT_NEAR(b[3 * (size_t)handle[i] + k], h[k], 1e-12 * f->diag);
    }
    for (uint32_t i = 0; i < na; i++)
      for (int k = 0; k < 3; k++) ASSERT_EQ(b[3 * (size_t)anchors[i] + k], f->t.positions[3 * (size_t)anchors[i] + k]);
  }
  fprintf(stderr, "%s: %u vertices, proxy %u: multiresolution at most %.3g of the diagonal from exact, mesh moved %.3g\n",
          what, n, proxy, worst, moved / f->diag);
  ASSERT(worst > 0);              /* two different solves */
  ASSERT(moved > 0.1 * f->diag);  /* of a real drag */
  for (int k = 0; k < 2; k++) dfm_system_destroy(s[k]);
  free(a);
  free(b);
  free(handle);
  free(anchors);
}

TEST(multires_arap_stays_within_its_bound_of_the_exact_solve_and_reports_that_distance) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  compare_exact(&f, 2500, 0.015, "icosphere 10k");
  fixture_fini(&f);
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_dragon("dragon_vrip_res3.ply"), NULL, &m, err, sizeof(err)), err);
  fixture_init(&f, m);
  compare_exact(&f, 5000, 0.015, "dragon res3");
  fixture_fini(&f);
}

/* A rigid motion of the handle with nothing else holding the mesh: the proxy moves rigidly
 * (the smooth border's ARAP shortcut, or the Laplacian's constant field for a translation), and
 * the embedding must carry that to every vertex: p -> R (p - pivot) + pivot + t, to the float
 * rounding of the stored offsets. */
static void rigid_case(fixture *f, dfm_mode mode, int smooth, int rotate, const char *what) {
  char err[256];
  uint32_t n = f->t.vertex_count, nh, top;
  uint32_t *handle = extreme_patch(f, 1, 30, &nh, &top);
  dfm_params p = {.mode = mode, .handle = handle, .handle_count = nh, .iterations = 2, .smooth_border = smooth,
                  .multires = DFM_MULTIRES_ON, .multires_proxy = 1500};
  dfm_system *s;
  ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s, err, sizeof(err)), err);
  double *out = malloc(sizeof(double) * 3 * n);
  memcpy(out, f->t.positions, sizeof(double) * 3 * n);
  dfm_xform x;
  drag_xform(f, top, 2, &x);
  if (!rotate) x.rotation[2] = 0, x.rotation[3] = 1;
  ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
  double worst = 0;
  for (uint32_t v = 0; v < n; v++) {
    double want[3];
    dfm_xform_apply(&x, f->t.positions + 3 * (size_t)v, want); /* closed form */
    for (int k = 0; k < 3; k++) worst = fmax(worst, fabs(out[3 * (size_t)v + k] - want[k]));
  }
  fprintf(stderr, "%s: rigid motion reproduced to %.3g of the diagonal\n", what, worst / f->diag);
  ASSERT(worst < 1e-7 * f->diag);
  dfm_system_destroy(s);
  free(out);
  free(handle);
}

TEST(multires_carries_a_rigid_motion_of_the_handle_to_a_rigid_motion_of_the_mesh) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  rigid_case(&f, DFM_ARAP, 1, 1, "icosphere, smooth ARAP, turn and move");
  rigid_case(&f, DFM_LAPLACIAN, 0, 0, "icosphere, Laplacian, move");
  fixture_fini(&f);
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_dragon("dragon_vrip_res3.ply"), NULL, &m, err, sizeof(err)), err);
  fixture_init(&f, m);
  rigid_case(&f, DFM_ARAP, 1, 1, "dragon res3, smooth ARAP, turn and move");
  fixture_fini(&f);
}

/* AUTO: by size (multires_min) for whole-mesh gestures only; soft constraints keep the exact
 * path, and asking for the multiresolution path with them is refused with a reason. */
TEST(multires_auto_picks_the_path_by_size_and_refuses_soft_constraints) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  char err[256] = "";
  uint32_t h[3] = {0, 1, 2}, roi[4] = {0, 1, 2, 3}, soft = 5;
  double w = 1.0;
  struct {
    uint32_t min;
    int with_roi, with_soft, want;
  } cases[] = {{0, 0, 0, 0}, {2000, 0, 0, 1}, {2000, 1, 0, 0}, {2000, 0, 1, 0}, {5000, 0, 0, 0}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    dfm_params p = {.mode = DFM_ARAP, .handle = h, .handle_count = 3, .iterations = 1, .multires_min = cases[c].min,
                    .roi = cases[c].with_roi ? roi : NULL, .roi_count = cases[c].with_roi ? 4 : 0,
                    .soft = &soft, .soft_weight = &w, .soft_count = (uint32_t)cases[c].with_soft};
    dfm_system *s = NULL;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_info info;
    dfm_system_info(s, &info);
    ASSERT_EQ(info.multires, cases[c].want);
    /* The budget's count follows the same choice: the proxy's system and the binding. */
    size_t bytes = dfm_multires_gesture_bytes(&p, f.t.vertex_count);
    if (cases[c].want)
      ASSERT_EQ(bytes, dfm_memory_gesture_bytes(f.t.vertex_count < DFM_MULTIRES_PROXY ? f.t.vertex_count : DFM_MULTIRES_PROXY) +
                           (size_t)DFM_MULTIRES_VERTEX_BYTES * f.t.vertex_count);
    else
      ASSERT_EQ(bytes, (size_t)0);
    dfm_system_destroy(s);
  }
  dfm_params p = {.mode = DFM_ARAP, .handle = h, .handle_count = 3, .iterations = 1, .multires = DFM_MULTIRES_ON,
                  .soft = &soft, .soft_weight = &w, .soft_count = 1};
  dfm_system *s = NULL;
  ASSERT_EQ(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), DFM_EINVAL);
  ASSERT(strstr(err, "soft constraints") != NULL);
  ASSERT(s == NULL);
  fixture_fini(&f);
}

/* One gesture (handle on top, anchors below, ARAP, three iterations) from `rest`, exact
 * (proxy_arg NULL and multires off) or on the multiresolution path with dfm_params.proxy =
 * proxy_arg (NULL: made in the gesture); out gets the last of three drags. */
static void gesture_from(fixture *f, const double *rest, int multires, const dfm_proxy *proxy_arg, uint32_t target,
                         int want_reused, double *out) {
  char err[256];
  uint32_t n = f->t.vertex_count, nh, na, top;
  uint32_t *handle = extreme_patch(f, 1, 40, &nh, &top), *anchors = extreme_patch(f, -1, 40, &na, NULL);
  dfm_params p = {.mode = DFM_ARAP, .handle = handle, .handle_count = nh, .anchors = anchors, .anchor_count = na,
                  .iterations = 3, .multires = multires ? DFM_MULTIRES_ON : DFM_MULTIRES_OFF, .multires_proxy = target,
                  .proxy = proxy_arg};
  dfm_system *s;
  ASSERT_OK(dfm_system_create(&f->t, &f->a, rest, &p, &s, err, sizeof(err)), err);
  dfm_info info;
  dfm_system_info(s, &info);
  ASSERT_EQ(info.multires, multires);
  ASSERT_EQ(info.proxy_reused, want_reused);
  memcpy(out, rest, sizeof(double) * 3 * n);
  for (int d = 1; d <= 3; d++) {
    dfm_xform x;
    drag_xform(f, top, d, &x);
    memcpy(x.pivot, rest + 3 * (size_t)top, sizeof(double) * 3);
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
  }
  dfm_system_destroy(s);
  free(handle);
  free(anchors);
}

TEST(a_multires_gesture_given_the_meshs_proxy_solves_as_one_that_makes_its_own_and_serves_a_sculpted_shape) {
  fixture f;
  fixture_init(&f, oracle_icosphere(5, 1.0));
  uint32_t n = f.t.vertex_count;
  char err[256];
  dfm_proxy *proxy = NULL;
  ASSERT_OK(dfm_proxy_build(&f.t, &f.a, f.t.positions, 2500, &proxy, err, sizeof(err)), err);
  double *a = malloc(sizeof(double) * 3 * n), *b = malloc(sizeof(double) * 3 * n), *c = malloc(sizeof(double) * 3 * n);
  /* From the shape it was made from: the same proxy, the same binding, the same answer. */
  gesture_from(&f, f.t.positions, 1, NULL, 2500, 0, a);
  gesture_from(&f, f.t.positions, 1, proxy, 2500, 1, b);
  ASSERT(memcmp(a, b, sizeof(double) * 3 * n) == 0);
  /* Made for another proxy size, it is not taken. */
  gesture_from(&f, f.t.positions, 1, proxy, 3000, 0, b);
  /* A sculpted shape (a smooth bulge over the top half, up to 20 % of the radius): the proxy
   * made from the sphere takes its positions from the sculpted rest, and stays within the
   * multiresolution path's bound (as in the test above) of the exact solve from that rest. */
  double *sculpted = malloc(sizeof(double) * 3 * n);
  for (uint32_t v = 0; v < n; v++) {
    const double *p = f.t.positions + 3 * (size_t)v;
    double y = p[1] > 0 ? p[1] : 0, grow = 1 + 0.2 * y * y;
    for (int k = 0; k < 3; k++) sculpted[3 * (size_t)v + k] = p[k] * grow;
  }
  gesture_from(&f, sculpted, 0, NULL, 2500, 0, a);
  gesture_from(&f, sculpted, 1, proxy, 2500, 1, c);
  double mx, rms;
  dfm_distance(a, c, n, f.diag, &mx, &rms);
  fprintf(stderr, "sculpted icosphere 10k, the sphere's proxy: %.3g of the diagonal from exact (RMS %.3g)\n", mx, rms);
  ASSERT(mx > 0 && mx < 0.015);
  dfm_proxy_free(proxy);
  free(a);
  free(b);
  free(c);
  free(sculpted);
  fixture_fini(&f);
}
