/*
 * test_border.c — the smooth border of a gesture's system (dfm_params.smooth_border in
 * server/solve/dfm_system.c) against independent oracles: the dihedral angles of every welded
 * edge (tests/support/oracle.c, its own edge list and normals) for the README's drag and for a
 * 16k-vertex region of a scan, the plain Laplacian solve for the shape of the smooth one, and
 * closed-form rigid motions; and soft constraints pulled towards where they are.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dfm.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

/* A gesture's handle and region grown geodesically around one vertex, either to radii or to
 * vertex counts (radius < 0: the count). */
typedef struct drag_case {
  uint32_t *handle, nh, *roi, nr;
  uint32_t seed;
} drag_case;

static void grow(const fixture *f, uint32_t seed, double hr, uint32_t hcount, double rr, uint32_t rcount, drag_case *c) {
  c->seed = seed;
  ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, &seed, 1, hr, hcount, &c->handle, &c->nh), NULL);
  ASSERT_OK(dfm_geodesic_region(&f->a, f->t.positions, c->handle, c->nh, rr, rcount, &c->roi, &c->nr), NULL);
}

/* The vertex with the largest y. */
static uint32_t topmost(const fixture *f) {
  uint32_t top = 0;
  for (uint32_t v = 1; v < f->t.vertex_count; v++)
    if (f->t.positions[3 * v + 1] > f->t.positions[3 * top + 1]) top = v;
  return top;
}

static void case_fini(drag_case *c) {
  free(c->handle);
  free(c->roi);
}

/* One drag of the case's handle by `t` in `mode` (2 ARAP iterations, deformd's default), and the
 * crease it leaves (dihedral change over every welded edge, from the rest shape). */
static oracle_crease crease_of(const fixture *f, const drag_case *c, dfm_mode mode, int smooth, const double t[3],
                               int drags) {
  dfm_params p = {.mode = mode, .handle = c->handle, .handle_count = c->nh, .roi = c->roi, .roi_count = c->nr,
                  .iterations = 2, .smooth_border = smooth};
  dfm_system *s = NULL;
  char err[256];
  ASSERT_OK(dfm_system_create(&f->t, &f->a, f->t.positions, &p, &s, err, sizeof(err)), err);
  double *out = malloc(sizeof(double) * 3 * f->t.vertex_count);
  memcpy(out, f->t.positions, sizeof(double) * 3 * f->t.vertex_count);
  /* Several drags, as a hand makes them: ARAP's warm start carries on towards its solution. */
  for (int d = 1; d <= drags; d++) {
    dfm_xform x;
    dfm_xform_identity(&x);
    for (int k = 0; k < 3; k++) x.translate[k] = t[k] * d / drags;
    memcpy(x.pivot, f->t.positions + 3 * (size_t)c->seed, sizeof(x.pivot));
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
  }
  oracle_crease cr;
  oracle_dihedral_change(f->t.triangles, f->t.triangle_count, f->t.positions, out, 10.0, 0.0, &cr);
  free(out);
  dfm_system_destroy(s);
  return cr;
}

/* The README's drag: pick 20400 (the tip of the demo head's nose), handle_radius 0.01,
 * roi_radius 0.05, 1 cm up. */
TEST(the_readme_drag_turns_no_edge_by_more_than_ten_degrees_with_the_smooth_border) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  fixture f;
  fixture_init(&f, m);
  drag_case c;
  grow(&f, f.t.render_to_topo[20400], 0.01, 0, 0.05, 0, &c);
  const double up[3] = {0, 0.01, 0};
  for (int mode = DFM_LAPLACIAN; mode <= DFM_ARAP; mode++) {
    for (int drags = 1; drags <= 20; drags += 19) {
      oracle_crease smooth = crease_of(&f, &c, (dfm_mode)mode, 1, up, drags);
      fprintf(stderr, "%s, %d drag(s): smooth border %.2f°\n", dfm_mode_name((dfm_mode)mode), drags, smooth.max_deg);
      ASSERT_EQ(smooth.over, 0);
      ASSERT(smooth.max_deg < 10.0);
    }
    /* The oracle sees the crease the plain solve leaves at the handle's edge. */
    oracle_crease sharp = crease_of(&f, &c, (dfm_mode)mode, 0, up, 1);
    fprintf(stderr, "%s: sharp border %.2f°, %u edges over 10°\n", dfm_mode_name((dfm_mode)mode), sharp.max_deg, sharp.over);
    ASSERT(sharp.max_deg > 20.0 && sharp.over > 10);
  }
  /* The biharmonic operator holds the slope at the border whatever `border` says. */
  oracle_crease bih = crease_of(&f, &c, DFM_BIHARMONIC, 0, up, 1);
  fprintf(stderr, "biharmonic: %.2f°\n", bih.max_deg);
  ASSERT_EQ(bih.over, 0);
  case_fini(&c);
  fixture_fini(&f);
}

/* The Stanford bunny (a scan, libcgal-demo's bunny00.off, 37.7k welded vertices): a region of
 * the 16,000 vertices nearest its top (so it is solved on its own sub-mesh) with the 640
 * nearest as the handle — the README's proportions, handle radius a fifth of the region's —
 * dragged up by a fifth of the region's radius. */
TEST(a_16k_vertex_region_of_a_scan_drags_without_creases_with_the_smooth_border) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_cgal_mesh("bunny00.off"), NULL, &m, err, sizeof(err)), err);
  fixture f;
  fixture_init(&f, m);
  uint32_t top = topmost(&f);
  drag_case c;
  grow(&f, top, INFINITY, 640, INFINITY, 16000, &c);
  ASSERT_EQ(c.nr, 16000);
  ASSERT(2 * c.nr < f.t.vertex_count);
  double radius = 0;
  for (uint32_t i = 0; i < c.nr; i++) {
    const double *p = f.t.positions + 3 * (size_t)c.roi[i], *q = f.t.positions + 3 * (size_t)top;
    radius = fmax(radius, sqrt((p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) + (p[2] - q[2]) * (p[2] - q[2])));
  }
  const double up[3] = {0, radius / 5, 0};
  for (int mode = DFM_LAPLACIAN; mode <= DFM_ARAP; mode++) {
    oracle_crease smooth = crease_of(&f, &c, (dfm_mode)mode, 1, up, 1);
    oracle_crease sharp = crease_of(&f, &c, (dfm_mode)mode, 0, up, 1);
    fprintf(stderr, "%s: smooth %.2f°, sharp %.2f° (%u edges over 10°)\n", dfm_mode_name((dfm_mode)mode), smooth.max_deg,
            sharp.max_deg, sharp.over);
    ASSERT_EQ(smooth.over, 0);
    ASSERT(sharp.over > 0);
  }
  oracle_crease bih = crease_of(&f, &c, DFM_BIHARMONIC, 0, up, 1);
  fprintf(stderr, "biharmonic: %.2f°\n", bih.max_deg);
  ASSERT_EQ(bih.over, 0);
  case_fini(&c);
  fixture_fini(&f);
}

static double smoothstep(double u) { return u * u * (3 - 2 * u); }

/* The smooth Laplacian of a translated handle is smoothstep(u)·t, u the displacement the plain
 * solve gives a unit translation (the handle's harmonic weight): checked vertex by vertex. */
TEST(the_smooth_laplacian_moves_each_vertex_by_smoothstep_of_its_harmonic_weight) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t top = topmost(&f);
  drag_case c;
  grow(&f, top, 0.15, 0, 1.2, 0, &c);
  uint32_t n = f.t.vertex_count;
  double *plain = malloc(sizeof(double) * 3 * n), *smooth = malloc(sizeof(double) * 3 * n);
  char err[256];
  for (int k = 0; k < 2; k++) {
    dfm_params p = {.mode = DFM_LAPLACIAN, .handle = c.handle, .handle_count = c.nh, .roi = c.roi, .roi_count = c.nr,
                    .smooth_border = k};
    dfm_system *s = NULL;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    dfm_xform x;
    dfm_xform_identity(&x);
    x.translate[0] = k ? 0.3 : 1.0; /* the plain solve of a unit translation is u itself */
    x.translate[2] = k ? -0.2 : 0.0;
    double *out = k ? smooth : plain;
    memcpy(out, f.t.positions, sizeof(double) * 3 * n);
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    dfm_system_destroy(s);
  }
  uint32_t inside = 0;
  for (uint32_t v = 0; v < n; v++) {
    double u = plain[3 * v] - f.t.positions[3 * v];
    ASSERT(u >= -1e-12 && u <= 1 + 1e-12);
    inside += u > 0.01 && u < 0.99;
    ASSERT_NEAR(smooth[3 * v] - f.t.positions[3 * v], 0.3 * smoothstep(u), 1e-9);
    ASSERT_NEAR(smooth[3 * v + 1] - f.t.positions[3 * v + 1], 0.0, 1e-9);
    ASSERT_NEAR(smooth[3 * v + 2] - f.t.positions[3 * v + 2], -0.2 * smoothstep(u), 1e-9);
  }
  ASSERT(inside > 200);
  free(plain);
  free(smooth);
  case_fini(&c);
  fixture_fini(&f);
}

/* ARAP with the smooth border keeps what a gesture promises: the handle follows the drag's
 * rigid motion exactly, outside the region nothing moves; and with the whole mesh as the region
 * (no border), a rotated and translated handle moves the mesh rigidly, as ARAP would. */
TEST(smooth_arap_keeps_the_handle_rigid_the_outside_still_and_a_borderless_mesh_rigid) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t n = f.t.vertex_count, top = topmost(&f);
  drag_case c;
  grow(&f, top, 0.2, 0, 1.0, 0, &c);
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[0] = 0.1, x.translate[1] = 0.2;
  x.rotation[2] = sin(0.2), x.rotation[3] = cos(0.2);
  memcpy(x.pivot, f.t.positions + 3 * top, sizeof(x.pivot));
  double *out = malloc(sizeof(double) * 3 * n);
  char err[256];
  for (int whole = 0; whole < 2; whole++) {
    dfm_params p = {.mode = DFM_ARAP, .handle = c.handle, .handle_count = c.nh, .roi = whole ? NULL : c.roi,
                    .roi_count = whole ? 0 : c.nr, .iterations = 3, .smooth_border = 1};
    dfm_system *s = NULL;
    ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
    memcpy(out, f.t.positions, sizeof(double) * 3 * n);
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
    dfm_system_destroy(s);
    uint8_t *in = calloc(n, 1), *is_handle = calloc(n, 1);
    for (uint32_t i = 0; i < c.nr; i++) in[c.roi[i]] = 1;
    for (uint32_t i = 0; i < c.nh; i++) is_handle[c.handle[i]] = 1;
    uint32_t outside = 0;
    for (uint32_t v = 0; v < n; v++) {
      const double *r = f.t.positions + 3 * (size_t)v;
      double want[3];
      dfm_xform_apply(&x, r, want);
      if (is_handle[v] || whole) {
        for (int k = 0; k < 3; k++) ASSERT_NEAR(out[3 * (size_t)v + k], want[k], 1e-9);
      } else if (!in[v]) {
        outside++;
        ASSERT(memcmp(out + 3 * (size_t)v, r, sizeof(double) * 3) == 0);
      }
    }
    ASSERT(whole || outside > 100);
    free(in);
    free(is_handle);
  }
  free(out);
  case_fini(&c);
  fixture_fini(&f);
}

/* Soft constraints without a position hold their vertex where it was at begin: with a large
 * weight it stays there while its neighbours follow the handle; with a position given it goes
 * there instead (every mode, with either border: the smooth border shapes only what the handle
 * does, not the soft targets' own pull). */
TEST(soft_constraints_without_a_position_pull_towards_where_the_vertex_is) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  uint32_t n = f.t.vertex_count, top = topmost(&f);
  drag_case c;
  grow(&f, top, 0.15, 0, 1.2, 0, &c);
  /* A vertex halfway between the handle and the border, and a neighbour of it. */
  uint32_t soft = c.roi[c.nr / 3];
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[1] = 0.3;
  double *out = malloc(sizeof(double) * 3 * n);
  char err[256];
  for (int m = 0; m < 6; m++) {
    int mode = m % 3, smooth = m / 3;
    double moved[3];
    for (int run = 0; run < 3; run++) {
      double weight = run == 1 ? 1e8 : 1.0, target[3];
      for (int k = 0; k < 3; k++) target[k] = f.t.positions[3 * (size_t)soft + k] + (k == 2 ? 0.25 : 0.0);
      dfm_params p = {.mode = (dfm_mode)mode, .handle = c.handle, .handle_count = c.nh, .roi = c.roi, .roi_count = c.nr,
                      .soft = &soft, .soft_weight = &weight, .soft_count = run ? 1 : 0, .iterations = 3,
                      .soft_position = run == 2 ? target : NULL, .smooth_border = smooth};
      if (run == 2) weight = 1e8;
      dfm_system *s = NULL;
      ASSERT_OK(dfm_system_create(&f.t, &f.a, f.t.positions, &p, &s, err, sizeof(err)), err);
      memcpy(out, f.t.positions, sizeof(double) * 3 * n);
      ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
      dfm_system_destroy(s);
      const double *r = f.t.positions + 3 * (size_t)soft, *q = out + 3 * (size_t)soft;
      if (run == 0) {
        for (int k = 0; k < 3; k++) moved[k] = q[k] - r[k];
        ASSERT(moved[1] > 0.01); /* without the constraint it follows the handle */
      } else if (run == 1) {
        for (int k = 0; k < 3; k++) ASSERT_NEAR(q[k], r[k], 1e-5);
      } else {
        for (int k = 0; k < 3; k++) ASSERT_NEAR(q[k], target[k], 1e-5);
      }
    }
  }
  free(out);
  case_fini(&c);
  fixture_fini(&f);
}
