/*
 * test_stroke.c — brush strokes (server/solve/dfm_stroke.c, with dfm_brush.c's dabs) against
 * closed forms and independent oracles: arc lengths along straight and bent paths, the height
 * of a pass over a flat grid, the dihedral angles of every welded edge (tests/support/oracle.c)
 * for the demo head and a scan, and normals recomputed from the raw triangles.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dfm_stroke.h"
#include "oracle.h"
#include "solve_helpers.h"
#include "test.h"

static double dist3(const double *a, const double *b) {
  return sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
}

static double *copy_positions(const fixture *f) {
  double *p = malloc(sizeof(double) * 3 * f->t.vertex_count);
  ASSERT(p);
  memcpy(p, f->t.positions, sizeof(double) * 3 * f->t.vertex_count);
  return p;
}

static int stroke(const fixture *f, const dfm_brush *b, const dfm_brush_sample *pts, uint32_t n, double *p, uint32_t *dabs,
                  char *err) {
  return dfm_stroke_apply(b, &f->a, f->t.triangles, f->t.triangle_count, pts, n, p, NULL, NULL, dabs, err, 256);
}

static double max_displacement(const fixture *f, const double *p) {
  double m = 0;
  for (uint32_t v = 0; v < f->t.vertex_count; v++) m = fmax(m, dist3(p + 3 * (size_t)v, f->t.positions + 3 * (size_t)v));
  return m;
}

/* ---- where the dabs go ------------------------------------------------------------------------- */

TEST(dabs_go_a_tenth_of_the_radius_apart_along_the_path_however_many_points_describe_it) {
  /* An L-shaped path: 0.5 along x, then 0.3 along y, radius 0.1: dabs every 0.01 of arc. */
  const double r = 0.1;
  dfm_brush b = {.kind = DFM_BRUSH_DRAW};
  dfm_brush_sample *first = NULL;
  uint32_t first_n = 0;
  for (int detail = 1; detail <= 40; detail *= 5) {
    /* The same path described by 8·detail + 1 points, the corner (at arc 0.5) among them. */
    uint32_t n = 8 * (uint32_t)detail + 1;
    dfm_brush_sample *pts = calloc(n, sizeof(*pts));
    for (uint32_t i = 0; i < n; i++) {
      double s = 0.8 * i / (n - 1); /* arc length of point i */
      pts[i].center[0] = s < 0.5 ? s : 0.5;
      pts[i].center[1] = s < 0.5 ? 0 : s - 0.5;
      pts[i].radius = r, pts[i].strength = 0.5;
    }
    dfm_brush_sample *d = NULL;
    uint32_t nd = 0;
    char err[256];
    ASSERT_OK(dfm_stroke_dabs(&b, pts, n, NULL, &d, &nd, NULL, err, sizeof(err)), err);
    ASSERT_EQ(nd, 81); /* 0, 0.01, ..., 0.80 */
    for (uint32_t i = 0; i < nd; i++) {
      double s = 0.01 * i, want[3] = {s < 0.5 ? s : 0.5, s < 0.5 ? 0 : s - 0.5, 0};
      ASSERT(dist3(d[i].center, want) < 1e-9);
      ASSERT_EQ(d[i].radius, r);
    }
    if (!first) {
      first = d, first_n = nd;
    } else {
      for (uint32_t i = 0; i < nd && i < first_n; i++) ASSERT(dist3(d[i].center, first[i].center) < 1e-9);
      free(d);
    }
    free(pts);
  }
  free(first);
}

TEST(a_dabs_strength_divides_out_the_pass_so_spacing_and_falloff_do_not_change_a_stroke) {
  /* A long straight draw stroke over a flat grid at strength 0.2: the middle of the path rises
   * by ½ · strength · radius whatever the spacing and the falloff, within the sampling error of
   * a sum of falloffs against its integral and the few per cent a dab loses as the surface under
   * it rises away from its point of the path. */
  fixture f;
  fixture_init(&f, oracle_grid(120, 1.0 / 120));
  const double r = 0.1, strength = 0.2, want = 0.5 * strength * r;
  for (int fo = 0; fo < 4; fo++) {
    double at_default = 0;
    for (int sp = 0; sp < 3; sp++) {
      const double spacing[3] = {0.1, 0.05, 0.25};
      dfm_brush b = {.kind = DFM_BRUSH_DRAW, .falloff = (dfm_falloff)fo, .spacing = spacing[sp]};
      dfm_brush_sample pts[2] = {{{0.1, 0.5, 0}, {0, 0, 0}, r, strength}, {{0.9, 0.5, 0}, {0, 0, 0}, r, strength}};
      double *p = copy_positions(&f);
      char err[256];
      ASSERT_OK(stroke(&f, &b, pts, 2, p, NULL, err), err);
      uint32_t mid = 60 * 121 + 60; /* the vertex at (0.5, 0.5), under the middle of the path */
      ASSERT_NEAR(f.t.positions[3 * mid], 0.5, 1e-12);
      double h = p[3 * mid + 2];
      fprintf(stderr, "%s, spacing %.2f: %.3f of ½ · strength · radius\n", dfm_falloff_name((dfm_falloff)fo), spacing[sp],
              h / want);
      ASSERT_NEAR(h, want, 0.06 * want);
      if (sp == 0) at_default = h;
      ASSERT_NEAR(h, at_default, 0.03 * want);
      ASSERT(max_displacement(&f, p) <= 1.06 * want);
      free(p);
    }
  }
  fixture_fini(&f);
}

TEST(a_layer_stroke_stops_at_its_height_and_a_crease_cuts_a_groove_that_pinches_towards_the_path) {
  fixture f;
  fixture_init(&f, oracle_grid(120, 1.0 / 120));
  const double r = 0.1;
  dfm_brush_sample pts[2] = {{{0.1, 0.5, 0}, {0, 0, 0}, r, 1.0}, {{0.9, 0.5, 0}, {0, 0, 0}, r, 1.0}};
  char err[256];
  /* Layer at full strength would rise by the radius; its default height is a quarter of it. */
  for (int given = 0; given < 2; given++) {
    dfm_brush b = {.kind = DFM_BRUSH_LAYER, .height = given ? 0.012 : 0};
    double *p = copy_positions(&f), hmax = given ? 0.012 : 0.25 * r;
    ASSERT_OK(stroke(&f, &b, pts, 2, p, NULL, err), err);
    uint32_t plateau = 0;
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      double moved = dist3(p + 3 * v, f.t.positions + 3 * v);
      ASSERT(moved <= hmax * (1 + 1e-12));
      plateau += moved >= hmax * (1 - 1e-9);
    }
    fprintf(stderr, "layer height %g: %u vertices at it\n", hmax, plateau);
    ASSERT(plateau > 100); /* a flat top, not a ridge */
    free(p);
  }
  /* Crease: the middle of the path goes down by about half the radius times the strength, and
   * the vertices beside it move towards it. */
  dfm_brush b = {.kind = DFM_BRUSH_CREASE};
  pts[0].strength = pts[1].strength = 0.5;
  double *p = copy_positions(&f);
  ASSERT_OK(stroke(&f, &b, pts, 2, p, NULL, err), err);
  uint32_t mid = 60 * 121 + 60, side = 64 * 121 + 60; /* (0.5, 0.5) and (0.5, 0.533) */
  ASSERT_NEAR(p[3 * mid + 2], -0.25 * r, 0.05 * 0.25 * r);
  ASSERT(p[3 * side + 1] < f.t.positions[3 * side + 1] - 1e-4);
  free(p);
  fixture_fini(&f);
}

TEST(a_grab_stroke_carries_the_surface_under_its_start_along_the_whole_path) {
  fixture f;
  fixture_init(&f, oracle_grid(100, 1.0 / 100));
  /* A drag of 0.3 (three radii) to the right and 0.1 up, described by 3 or by 30 points. */
  const double r = 0.1;
  uint32_t start = 50 * 101 + 30; /* (0.3, 0.5) */
  double *res[2];
  for (int k = 0; k < 2; k++) {
    uint32_t n = k ? 30 : 3;
    dfm_brush_sample *pts = calloc(n, sizeof(*pts));
    for (uint32_t i = 0; i < n; i++) {
      double s = (double)i / (n - 1);
      pts[i].center[0] = 0.3 + 0.3 * s, pts[i].center[1] = 0.5, pts[i].center[2] = 0.1 * s;
      pts[i].radius = r, pts[i].strength = 1.0;
    }
    dfm_brush b = {.kind = DFM_BRUSH_GRAB};
    res[k] = copy_positions(&f);
    char err[256];
    ASSERT_OK(stroke(&f, &b, pts, n, res[k], NULL, err), err);
    const double want[3] = {0.6, 0.5, 0.1};
    ASSERT(dist3(res[k] + 3 * start, want) < 1e-6);
    oracle_crease c;
    oracle_dihedral_change(f.t.triangles, f.t.triangle_count, f.t.positions, res[k], 90.0, 0.0, &c);
    ASSERT_EQ(c.over, 0);
    free(pts);
  }
  for (uint32_t i = 0; i < 3 * f.t.vertex_count; i++) ASSERT_NEAR(res[0][i], res[1][i], 1e-9);
  /* A one-point stroke drags by its direction, as a sample did before strokes had paths. */
  dfm_brush_sample one = {{0.3, 0.5, 0}, {0, 0, 0.05}, r, 1.0};
  dfm_brush b = {.kind = DFM_BRUSH_GRAB};
  double *p = copy_positions(&f);
  char err[256];
  ASSERT_OK(stroke(&f, &b, &one, 1, p, NULL, err), err);
  ASSERT_NEAR(p[3 * start + 2], 0.05, 1e-9);
  free(p);
  free(res[0]);
  free(res[1]);
  fixture_fini(&f);
}

TEST(a_stroke_sent_in_pieces_gives_what_the_whole_path_gives) {
  /* A curved path of 40 points over a bumpy sphere, sent at once and in 2, 5 or 40 pieces (as a
   * pointer moves): the same dabs, so the same shape, for a brush that moves along normals
   * with the fold guard (draw), one whose height is measured from the start (layer) and grab. */
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  const uint32_t n = 40;
  dfm_brush_sample pts[40];
  memset(pts, 0, sizeof(pts));
  for (uint32_t i = 0; i < n; i++) {
    double a = 0.8 * i / (n - 1) - 0.4;
    pts[i].center[0] = sin(a), pts[i].center[1] = 0.3 * sin(3 * a), pts[i].center[2] = cos(a);
    pts[i].radius = 0.3, pts[i].strength = 0.7;
  }
  const dfm_brush_kind kinds[3] = {DFM_BRUSH_DRAW, DFM_BRUSH_LAYER, DFM_BRUSH_GRAB};
  for (int k = 0; k < 3; k++) {
    dfm_brush b = {.kind = kinds[k]};
    double *whole = copy_positions(&f);
    char err[256];
    uint32_t dabs_whole = 0;
    ASSERT_OK(stroke(&f, &b, pts, n, whole, &dabs_whole, err), err);
    const uint32_t pieces[3] = {2, 5, 40};
    for (int pc = 0; pc < 3; pc++) {
      double *p = copy_positions(&f);
      dfm_stroke_state st;
      memset(&st, 0, sizeof(st));
      uint32_t dabs = 0, per = n / pieces[pc];
      for (uint32_t at = 0; at < n; at += per) {
        uint32_t d = 0;
        ASSERT_OK(dfm_stroke_apply(&b, &f.a, f.t.triangles, f.t.triangle_count, pts + at, per, p, NULL, &st, &d, err,
                                   sizeof(err)),
                  err);
        dabs += d;
      }
      dfm_stroke_state_fini(&st);
      /* Grab's pieces each end with a shorter step to their last point: a few more dabs. */
      if (kinds[k] != DFM_BRUSH_GRAB) ASSERT_EQ(dabs, dabs_whole);
      double worst = 0, most = max_displacement(&f, whole);
      for (uint32_t v = 0; v < f.t.vertex_count; v++) worst = fmax(worst, dist3(p + 3 * (size_t)v, whole + 3 * (size_t)v));
      fprintf(stderr, "%s in %u pieces: %u dabs (%u at once), differs by %.2g of the largest displacement\n",
              dfm_brush_name(kinds[k]), pieces[pc], dabs, dabs_whole, worst / most);
      ASSERT(worst <= (kinds[k] == DFM_BRUSH_GRAB ? 0.02 : 1e-9) * most);
      free(p);
    }
    free(whole);
  }
  fixture_fini(&f);
}

/* ---- options -------------------------------------------------------------------------------------- */

/* Angle-weighted vertex normal from the raw triangle list (not the adjacency the brush uses). */
static void raw_normal(const fixture *f, const double *pos, uint32_t v, double n[3]) {
  n[0] = n[1] = n[2] = 0;
  for (uint32_t t = 0; t < f->t.triangle_count; t++) {
    const uint32_t *tri = f->t.triangles + 3 * t;
    int c = tri[0] == v ? 0 : tri[1] == v ? 1 : tri[2] == v ? 2 : -1;
    if (c < 0) continue;
    const double *p0 = pos + 3 * tri[c], *p1 = pos + 3 * tri[(c + 1) % 3], *p2 = pos + 3 * tri[(c + 2) % 3];
    double u[3], w[3], fn[3];
    for (int k = 0; k < 3; k++) u[k] = p1[k] - p0[k], w[k] = p2[k] - p0[k];
    fn[0] = u[1] * w[2] - u[2] * w[1], fn[1] = u[2] * w[0] - u[0] * w[2], fn[2] = u[0] * w[1] - u[1] * w[0];
    double fl = sqrt(fn[0] * fn[0] + fn[1] * fn[1] + fn[2] * fn[2]);
    double cosang = (u[0] * w[0] + u[1] * w[1] + u[2] * w[2]) / (dist3(p1, p0) * dist3(p2, p0));
    double a = acos(cosang > 1 ? 1 : cosang < -1 ? -1 : cosang);
    for (int k = 0; k < 3; k++) n[k] += a * fn[k] / fl;
  }
  double l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  for (int k = 0; k < 3; k++) n[k] /= l;
}

TEST(front_faces_only_leaves_every_vertex_that_faces_away_from_the_viewer) {
  fixture f;
  fixture_init(&f, oracle_icosphere(3, 1.0));
  /* A brush bigger than the sphere, the viewer on +z looking down -z (a little to the side). */
  dfm_brush_sample pt = {{0, 0, 0}, {0, 0, 0}, 3.0, 0.2};
  uint32_t front = 0, back = 0;
  for (int only = 0; only < 2; only++) {
    dfm_brush b = {.kind = DFM_BRUSH_INFLATE, .front_only = only, .view = {0.1, 0, -1}};
    double *p = copy_positions(&f);
    char err[256];
    ASSERT_OK(stroke(&f, &b, &pt, 1, p, NULL, err), err);
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      double n[3];
      raw_normal(&f, f.t.positions, v, n);
      double facing = n[0] * 0.1 - n[2];
      int moved = memcmp(p + 3 * (size_t)v, f.t.positions + 3 * (size_t)v, sizeof(double) * 3) != 0;
      if (!only) {
        ASSERT(moved);
      } else if (facing > 1e-9) {
        ASSERT(!moved);
        back++;
      } else if (facing < -1e-9) {
        ASSERT(moved);
        front++;
      }
    }
    free(p);
  }
  ASSERT(front > 100 && back > 100);
  fixture_fini(&f);
}

/* The uniform-Laplacian energy Σ over edges |p_a − p_b − (r_a − r_b)|², i.e. of the displacement
 * field, from a raw edge list: a rough displacement scores high. */
static double roughness(const fixture *f, const double *p) {
  double e = 0;
  for (uint32_t t = 0; t < f->t.triangle_count; t++)
    for (int c = 0; c < 3; c++) {
      uint32_t a = f->t.triangles[3 * t + c], b = f->t.triangles[3 * t + (c + 1) % 3];
      for (int k = 0; k < 3; k++) {
        double d = (p[3 * a + k] - f->t.positions[3 * a + k]) - (p[3 * b + k] - f->t.positions[3 * b + k]);
        e += d * d;
      }
    }
  return e;
}

TEST(autosmooth_makes_a_stroke_smoother_than_the_same_stroke_without_it) {
  /* Inflate over a lumpy sphere: the lumps' normals make inflate's displacement rough. */
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 1.0));
  double *pos = (double *)f.t.positions;
  for (uint32_t v = 0; v < f.t.vertex_count; v++) {
    double *q = pos + 3 * (size_t)v, s = 1 + 0.03 * sin(17 * q[0]) * cos(13 * q[1]) * sin(11 * q[2]);
    for (int k = 0; k < 3; k++) q[k] *= s;
  }
  dfm_brush_sample pts[2] = {{{-0.4, 0, 0.9}, {0, 0, 0}, 0.5, 0.8}, {{0.4, 0, 0.9}, {0, 0, 0}, 0.5, 0.8}};
  double rough[2];
  for (int k = 0; k < 2; k++) {
    dfm_brush b = {.kind = DFM_BRUSH_INFLATE, .autosmooth = k ? 0.5 : 0};
    double *p = copy_positions(&f);
    char err[256];
    ASSERT_OK(stroke(&f, &b, pts, 2, p, NULL, err), err);
    rough[k] = roughness(&f, p);
    free(p);
  }
  fprintf(stderr, "roughness without / with autosmooth: %.4g / %.4g\n", rough[0], rough[1]);
  ASSERT(rough[1] < 0.8 * rough[0]);
  fixture_fini(&f);
}

TEST(strokes_refuse_strengths_beyond_one_bad_spacing_and_paths_needing_too_many_dabs) {
  fixture f;
  fixture_init(&f, oracle_icosphere(2, 1.0));
  dfm_brush_sample pts[2] = {{{0, 0, 1}, {0, 0, 0}, 0.3, 0.5}, {{0.3, 0, 1}, {0, 0, 0}, 0.3, 0.5}};
  struct {
    const char *why;
    dfm_brush b;
    double strength, radius, far;
  } bad[] = {
      {"strength", {.kind = DFM_BRUSH_DRAW}, 1.5, 0.3, 0.3},
      {"strength", {.kind = DFM_BRUSH_GRAB}, NAN, 0.3, 0.3},
      {"spacing", {.kind = DFM_BRUSH_DRAW, .spacing = 2}, 0.5, 0.3, 0.3},
      {"spacing", {.kind = DFM_BRUSH_DRAW, .spacing = 0.001}, 0.5, 0.3, 0.3},
      {"autosmooth", {.kind = DFM_BRUSH_DRAW, .autosmooth = 1.5}, 0.5, 0.3, 0.3},
      {"view", {.kind = DFM_BRUSH_DRAW, .front_only = 1}, 0.5, 0.3, 0.3},
      {"dabs", {.kind = DFM_BRUSH_DRAW}, 0.5, 1e-6, 0.3},
      {"radius", {.kind = DFM_BRUSH_DRAW}, 0.5, 0, 0.3},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    dfm_brush_sample q[2] = {pts[0], pts[1]};
    q[0].strength = q[1].strength = bad[i].strength;
    q[0].radius = q[1].radius = bad[i].radius;
    double *p = copy_positions(&f);
    char err[256] = "";
    ASSERT_EQ(stroke(&f, &bad[i].b, q, 2, p, NULL, err), DFM_EINVAL);
    ASSERT_STR_CONTAINS(err, bad[i].why);
    ASSERT(memcmp(p, f.t.positions, sizeof(double) * 3 * f.t.vertex_count) == 0);
    free(p);
  }
  fixture_fini(&f);
}

/* ---- real meshes --------------------------------------------------------------------------------- */

/* The nearest point of the mesh under (x, y), looking down -z (brute force over the triangles,
 * by barycentric coordinates in the xy plane): where a viewer facing the front would click. */
static int surface_at(const fixture *f, double x, double y, double out[3]) {
  int found = 0;
  for (uint32_t t = 0; t < f->t.triangle_count; t++) {
    const double *a = f->t.positions + 3 * f->t.triangles[3 * t], *b = f->t.positions + 3 * f->t.triangles[3 * t + 1],
                 *c = f->t.positions + 3 * f->t.triangles[3 * t + 2];
    double det = (b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1]);
    if (fabs(det) < 1e-18) continue;
    double u = ((x - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (y - a[1])) / det;
    double v = ((b[0] - a[0]) * (y - a[1]) - (x - a[0]) * (b[1] - a[1])) / det;
    if (u < 0 || v < 0 || u + v > 1) continue;
    double z = a[2] + u * (b[2] - a[2]) + v * (c[2] - a[2]);
    if (!found || z > out[2]) out[0] = x, out[1] = y, out[2] = z, found = 1;
  }
  return found;
}

/* A stroke's path of n points on the surface, evenly spaced in x and y from (x0, y0) to (x1, y1). */
static dfm_brush_sample *path_on(const fixture *f, double x0, double y0, double x1, double y1, uint32_t n, double radius,
                                 double strength) {
  dfm_brush_sample *pts = calloc(n, sizeof(*pts));
  for (uint32_t i = 0; i < n; i++) {
    double s = (double)i / (n - 1);
    ASSERT(surface_at(f, x0 + s * (x1 - x0), y0 + s * (y1 - y0), pts[i].center));
    pts[i].radius = radius, pts[i].strength = strength;
  }
  return pts;
}

/* The stroke of issue 18: inflate, radius 0.04, strength 0.3, 20 points across the demo head's
 * cheek (what deform-view sent for a short mouse stroke: 3 mm apart), then the same path with
 * 5 and with 50 points. Before strokes had paths it moved the cheek 6.8 cm and folded 3,412
 * edges over by more than 10°, the worst by 179.8°. */
TEST(the_cheek_stroke_gives_the_same_bump_from_5_20_or_50_points_and_folds_nothing) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  fixture f;
  fixture_init(&f, m);
  const double radius = 0.04;
  const uint32_t counts[3] = {5, 20, 50};
  double *res[3], top = 0;
  for (int k = 0; k < 3; k++) {
    dfm_brush_sample *pts = path_on(&f, 0.022, -0.045, 0.062, -0.005, counts[k], radius, 0.3);
    if (k == 1) ASSERT_NEAR(dist3(pts[0].center, pts[1].center), 0.003, 0.0005);
    dfm_brush b = {.kind = DFM_BRUSH_INFLATE};
    res[k] = copy_positions(&f);
    char err[256];
    uint32_t dabs = 0;
    ASSERT_OK(stroke(&f, &b, pts, counts[k], res[k], &dabs, err), err);
    double d = max_displacement(&f, res[k]);
    oracle_crease c;
    oracle_dihedral_change(f.t.triangles, f.t.triangle_count, f.t.positions, res[k], 90.0, 0.0, &c);
    fprintf(stderr, "%u points: %u dabs, max displacement %.4f (%.2f radius), worst edge turn %.1f°\n", counts[k], dabs, d,
            d / radius, c.max_deg);
    ASSERT_EQ(c.over, 0);
    ASSERT(d <= radius);
    ASSERT(d > 0.05 * radius); /* it does raise the cheek */
    if (k == 1) top = d;
    free(pts);
  }
  for (int k = 0; k < 3; k += 2) {
    double worst = 0;
    for (uint32_t v = 0; v < f.t.vertex_count; v++) worst = fmax(worst, dist3(res[k] + 3 * (size_t)v, res[1] + 3 * (size_t)v));
    fprintf(stderr, "%u points against 20: %.1f%% of the largest displacement\n", counts[k], 100 * worst / top);
    ASSERT(worst <= 0.1 * top);
  }
  for (int k = 0; k < 3; k++) free(res[k]);
  fixture_fini(&f);
}

/* Every brush at its defaults (strength 0.5, grab 1; smoothstep, spacing 0.1), one stroke across
 * the demo head's cheek and one across the Stanford bunny (a scan, bunny00.off), the radius a
 * tenth of the mesh's diagonal: no edge turns by 90° or more (no triangle folds over). */
TEST(every_brush_at_its_defaults_folds_nothing_on_the_demo_head_or_on_a_scan) {
  for (int which = 0; which < 2; which++) {
    mesh *m = NULL;
    char err[MESH_ERR_LEN];
    if (which == 0) ASSERT_OK(mesh_demo_head(&m), NULL);
    else ASSERT_OK(mesh_import(test_cgal_mesh("bunny00.off"), NULL, &m, err, sizeof(err)), err);
    fixture f;
    fixture_init(&f, m);
    double radius = which ? 0.1 * f.diag : 0.04;
    double x0 = which ? 0.5 * (m->bbox_min[0] + m->bbox_max[0]) - 0.5 * radius : 0.022;
    double y0 = which ? 0.5 * (m->bbox_min[1] + m->bbox_max[1]) - 0.5 * radius : -0.045;
    double len = which ? radius : 0.04;
    for (int k = DFM_BRUSH_GRAB; k <= DFM_BRUSH_LAYER; k++) {
      dfm_brush_sample *pts = path_on(&f, x0, y0, x0 + len, y0 + len, 20, radius, k == DFM_BRUSH_GRAB ? 1.0 : 0.5);
      dfm_brush b = {.kind = (dfm_brush_kind)k};
      double *p = copy_positions(&f);
      ASSERT_OK(stroke(&f, &b, pts, 20, p, NULL, err), err);
      oracle_crease c;
      oracle_dihedral_change(f.t.triangles, f.t.triangle_count, f.t.positions, p, 90.0, 0.0, &c);
      fprintf(stderr, "%s, %s: moved up to %.4f, worst edge turn %.1f°\n", which ? "bunny" : "demo head",
              dfm_brush_name((dfm_brush_kind)k), max_displacement(&f, p), c.max_deg);
      ASSERT(max_displacement(&f, p) > 1e-4 * radius);
      ASSERT_EQ(c.over, 0);
      free(p);
      free(pts);
    }
    fixture_fini(&f);
  }
}

/* The mean length of the mesh's edges at rest. */
static double mean_edge_of(const fixture *f) {
  double sum = 0;
  uint32_t n = 0;
  for (uint32_t v = 0; v < f->a.vertex_count; v++)
    for (uint32_t e = f->a.vv_offsets[v]; e < f->a.vv_offsets[v + 1]; e++, n++)
      sum += dist3(f->t.positions + 3 * (size_t)v, f->t.positions + 3 * (size_t)f->a.vv[e]);
  return sum / n;
}

/* Issue 26: a crease stroke at strength 1 across the demo head's cheek, then two smooth strokes
 * at strength 1 along the same path, the smooth brush told the shape before any sculpting
 * (rest, as deformd tells it). The dihedral-angle oracle against the rest shape: a one-ring
 * crease (radius 1.5 mean edges) smoothed with twice its radius, and a crease at the radius of
 * the cheek tests (0.04, 20 edges, whose groove turns an edge by 87°) smoothed with its own
 * radius, come out with at least half and a quarter, respectively, of the crease's worst turn.
 * Before (10 Laplacian steps a pass of the positions themselves, whatever the radius) these
 * were 31 % and 40 %; and smoothing where nothing was sculpted turned edges by up to 9°, where
 * now it moves nothing. */
TEST(two_smooth_passes_at_full_strength_take_out_most_of_a_crease_and_leave_the_unsculpted_head_alone) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  fixture f;
  fixture_init(&f, m);
  double edge = mean_edge_of(&f);
  const struct { double crease_r, smooth_r, crease_strength, at_most; } cases[3] = {
      {1.5 * edge, 3.0 * edge, 1.0, 0.5}, {0.04, 0.04, 1.0, 0.25}, {0.01, 0.02, 0.0, 0.0}};
  for (int c = 0; c < 3; c++) {
    dfm_brush_sample *pts = path_on(&f, 0.022, -0.045, 0.062, -0.005, 20, cases[c].crease_r, cases[c].crease_strength);
    dfm_brush crease = {.kind = DFM_BRUSH_CREASE}, smooth = {.kind = DFM_BRUSH_SMOOTH, .rest = f.t.positions};
    double *p = copy_positions(&f);
    char err[256];
    oracle_crease before, after[2];
    ASSERT_OK(stroke(&f, &crease, pts, 20, p, NULL, err), err);
    oracle_dihedral_change(f.t.triangles, f.t.triangle_count, f.t.positions, p, 90.0, 0.0, &before);
    for (uint32_t k = 0; k < 20; k++) pts[k].radius = cases[c].smooth_r, pts[k].strength = 1.0;
    for (int pass = 0; pass < 2; pass++) {
      ASSERT_OK(stroke(&f, &smooth, pts, 20, p, NULL, err), err);
      oracle_dihedral_change(f.t.triangles, f.t.triangle_count, f.t.positions, p, 90.0, 0.0, &after[pass]);
    }
    fprintf(stderr, "crease radius %.4f (%.1f edges), smooth radius %.4f: worst turn %.2f° -> %.2f° -> %.2f° (%.0f %%)\n",
            cases[c].crease_r, cases[c].crease_r / edge, cases[c].smooth_r, before.max_deg, after[0].max_deg,
            after[1].max_deg, before.max_deg > 0 ? 100 * after[1].max_deg / before.max_deg : 0.0);
    ASSERT_EQ(after[1].over, 0); /* nothing folds */
    if (cases[c].crease_strength > 0) {
      ASSERT(before.max_deg > 20.0); /* a crease to smooth */
      ASSERT(after[1].max_deg <= cases[c].at_most * before.max_deg);
    } else {
      ASSERT(max_displacement(&f, p) == 0.0); /* nothing sculpted: nothing to smooth */
    }
    free(p);
    free(pts);
  }
  fixture_fini(&f);
}
