/*
 * test_brush.c — sculpt brushes against closed forms and independent oracles: the falloff
 * formulas written out again, vertex normals recomputed here with acos over all triangles
 * (the code uses atan2 over the adjacency), neighbour lists rebuilt from raw triangle edges,
 * exact lattice distances for the radius boundary, and the x-, y- or z-mirror twin of every
 * vertex found by coordinates.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dfm_brush.h"
#include "oracle.h"
#include "test.h"

/* ---- fixtures ------------------------------------------------------------------------------- */

typedef struct fixture {
  mesh *m;
  mesh_topology t;
  mesh_adjacency a;
  double *p;     /* working positions, 3 per topology vertex */
  double *rest;  /* copy taken by fixture_snapshot() */
  uint8_t *moved;
} fixture;

static void fixture_init(fixture *f, mesh *m) {
  f->m = m;
  ASSERT_OK(mesh_topology_init(&f->t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&f->a, f->t.vertex_count, f->t.triangles, f->t.triangle_count), NULL);
  size_t n = 3 * (size_t)f->t.vertex_count;
  f->p = malloc(sizeof(double) * n);
  f->rest = malloc(sizeof(double) * n);
  f->moved = calloc(f->t.vertex_count, 1);
  ASSERT(f->p && f->rest && f->moved);
  memcpy(f->p, f->t.positions, sizeof(double) * n);
}

static void fixture_snapshot(fixture *f) {
  memcpy(f->rest, f->p, sizeof(double) * 3 * f->t.vertex_count);
  memset(f->moved, 0, f->t.vertex_count);
}

static void fixture_fini(fixture *f) {
  free(f->p);
  free(f->rest);
  free(f->moved);
  mesh_adjacency_fini(&f->a);
  mesh_topology_fini(&f->t);
  mesh_destroy(f->m);
}

static int apply(fixture *f, dfm_brush_kind kind, dfm_falloff falloff, int mirror,
                 const dfm_brush_sample *s, uint32_t count, char *err) {
  dfm_brush b = {.kind = kind, .falloff = falloff, .mirror_x = mirror};
  return dfm_brush_apply(&b, &f->a, f->t.triangles, f->t.triangle_count, s, count, f->p, f->moved,
                         err, 256);
}

/* The 16×16 lattice grid centred on the origin (integer x, y in [-8, 8], exact in float), with
 * bumps only at vertices strictly inside the xy-disc of radius `r` around c or around its
 * mirror; everything else stays at z = 0, so its distance to either centre is exact. */
static void bumpy_lattice(fixture *f, const double c[3], double r) {
  fixture_init(f, oracle_grid(16, 1.0));
  for (uint32_t v = 0; v < f->t.vertex_count; v++) {
    double *p = f->p + 3 * v;
    p[0] -= 8.0, p[1] -= 8.0;
    double d0 = (p[0] - c[0]) * (p[0] - c[0]) + (p[1] - c[1]) * (p[1] - c[1]);
    double d1 = (p[0] + c[0]) * (p[0] + c[0]) + (p[1] - c[1]) * (p[1] - c[1]);
    if (d0 < r * r || d1 < r * r) p[2] = 0.4 * sin(1.3 * p[0] + 0.4) * cos(0.7 * p[1] - 0.2);
  }
}

static double dist3(const double *a, const double *b) {
  double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
  return sqrt(dx * dx + dy * dy + dz * dz);
}

/* The falloffs as the header writes them. */
static double falloff_oracle(dfm_falloff f, double t) {
  if (t >= 1.0) return 0.0;
  switch (f) {
    case DFM_FALLOFF_SMOOTHSTEP: return 1.0 - (3.0 * t * t - 2.0 * t * t * t);
    case DFM_FALLOFF_LINEAR: return 1.0 - t;
    case DFM_FALLOFF_GAUSSIAN: return (exp(-4.5 * t * t) - exp(-4.5)) / (1.0 - exp(-4.5));
    case DFM_FALLOFF_CONSTANT: return 1.0;
  }
  return NAN;
}

/* Angle-weighted unit normal of v over every triangle that uses it (acos of the normalised
 * corner cosine; unit face normals from the counter-clockwise edges). */
static void normal_oracle(const fixture *f, const double *pos, uint32_t v, double n[3]) {
  n[0] = n[1] = n[2] = 0;
  for (uint32_t t = 0; t < f->t.triangle_count; t++) {
    const uint32_t *tri = f->t.triangles + 3 * t;
    int c = -1;
    for (int k = 0; k < 3; k++)
      if (tri[k] == v) c = k;
    if (c < 0) continue;
    const double *p0 = pos + 3 * tri[0], *p1 = pos + 3 * tri[1], *p2 = pos + 3 * tri[2];
    double u[3], w[3], fn[3];
    for (int k = 0; k < 3; k++) u[k] = p1[k] - p0[k], w[k] = p2[k] - p0[k];
    fn[0] = u[1] * w[2] - u[2] * w[1], fn[1] = u[2] * w[0] - u[0] * w[2], fn[2] = u[0] * w[1] - u[1] * w[0];
    double fl = sqrt(fn[0] * fn[0] + fn[1] * fn[1] + fn[2] * fn[2]);
    const double *pv = pos + 3 * tri[c], *pa = pos + 3 * tri[(c + 1) % 3], *pb = pos + 3 * tri[(c + 2) % 3];
    double la = dist3(pa, pv), lb = dist3(pb, pv), dot = 0;
    for (int k = 0; k < 3; k++) dot += (pa[k] - pv[k]) * (pb[k] - pv[k]);
    double cosang = dot / (la * lb);
    double angle = acos(cosang > 1 ? 1 : cosang < -1 ? -1 : cosang);
    for (int k = 0; k < 3; k++) n[k] += angle * fn[k] / fl;
  }
  double l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  for (int k = 0; k < 3; k++) n[k] /= l;
}

static const dfm_brush_kind all_brushes[] = {DFM_BRUSH_GRAB, DFM_BRUSH_INFLATE, DFM_BRUSH_SMOOTH,
                                             DFM_BRUSH_FLATTEN, DFM_BRUSH_PINCH};
static const dfm_falloff all_falloffs[] = {DFM_FALLOFF_SMOOTHSTEP, DFM_FALLOFF_LINEAR,
                                           DFM_FALLOFF_GAUSSIAN, DFM_FALLOFF_CONSTANT};

/* ---- names and falloffs ---------------------------------------------------------------------- */

TEST(brush_and_falloff_names_round_trip_through_the_parsers) {
  const char *brushes[] = {"grab", "inflate", "smooth", "flatten", "pinch"};
  const char *falloffs[] = {"smoothstep", "linear", "gaussian", "constant"};
  for (int i = 0; i < 5; i++) {
    dfm_brush_kind k;
    ASSERT_OK(dfm_brush_parse(brushes[i], &k), brushes[i]);
    ASSERT_EQ(k, all_brushes[i]);
    ASSERT(strcmp(dfm_brush_name(k), brushes[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    dfm_falloff fo;
    ASSERT_OK(dfm_falloff_parse(falloffs[i], &fo), falloffs[i]);
    ASSERT_EQ(fo, all_falloffs[i]);
    ASSERT(strcmp(dfm_falloff_name(fo), falloffs[i]) == 0);
  }
  dfm_brush_kind k;
  dfm_falloff fo;
  ASSERT_EQ(dfm_brush_parse("Grab", &k), DFM_EINVAL);
  ASSERT_EQ(dfm_brush_parse("", &k), DFM_EINVAL);
  ASSERT_EQ(dfm_brush_parse(NULL, &k), DFM_EINVAL);
  ASSERT_EQ(dfm_falloff_parse("sharp", &fo), DFM_EINVAL);
  ASSERT(strcmp(dfm_brush_name((dfm_brush_kind)99), "unknown") == 0);
}

TEST(brush_falloff_is_one_at_the_centre_decreasing_and_exactly_zero_from_the_radius_on) {
  for (int i = 0; i < 4; i++) {
    dfm_falloff fo = all_falloffs[i];
    ASSERT(dfm_falloff_eval(fo, 0.0) == 1.0);
    ASSERT(dfm_falloff_eval(fo, 1.0) == 0.0);
    ASSERT(dfm_falloff_eval(fo, 1.5) == 0.0);
    ASSERT(dfm_falloff_eval(fo, nextafter(1.0, 2.0)) == 0.0);
    ASSERT(dfm_falloff_eval(fo, 1e300) == 0.0);
    ASSERT(dfm_falloff_eval(fo, INFINITY) == 0.0);
    ASSERT(dfm_falloff_eval(fo, NAN) == 0.0);
    ASSERT(dfm_falloff_eval(fo, nextafter(1.0, 0.0)) >= 0.0);
    double prev = 1.0;
    for (int j = 0; j <= 1024; j++) {
      double t = j / 1024.0, v = dfm_falloff_eval(fo, t);
      ASSERT(v <= prev);
      ASSERT(v >= 0.0);
      ASSERT_NEAR(v, falloff_oracle(fo, t), 1e-15);
      if (fo != DFM_FALLOFF_CONSTANT && j > 0 && j < 1024) ASSERT(v < 1.0 && v > 0.0);
      prev = v;
    }
  }
}

/* ---- the radius ------------------------------------------------------------------------------- */

TEST(brush_of_every_kind_leaves_vertices_at_or_beyond_the_radius_bitwise_unchanged) {
  /* Radius 5 on an integer lattice: offsets (±3, ±4), (±4, ±3), (±5, 0), (0, ±5) from the
   * centre lie exactly on the sphere, the sharpest case for "distance >= radius". */
  const double c[3] = {2.0, 1.0, 0.0}, r = 5.0;
  for (int mirror = 0; mirror <= 1; mirror++)
    for (int b = 0; b < 5; b++)
      for (int fi = 0; fi < 4; fi++) {
        fixture f;
        bumpy_lattice(&f, c, r);
        fixture_snapshot(&f);
        dfm_brush_sample s = {{c[0], c[1], c[2]}, {0.3, -0.2, 0.5}, r, 0.6};
        char err[256];
        ASSERT_OK(apply(&f, all_brushes[b], all_falloffs[fi], mirror, &s, 1, err), err);
        const double mc[3] = {-c[0], c[1], c[2]};
        uint32_t on_sphere = 0, inside_moved = 0;
        for (uint32_t v = 0; v < f.t.vertex_count; v++) {
          const double *p0 = f.rest + 3 * v, *p1 = f.p + 3 * v;
          double d = dist3(p0, c), dm = mirror ? dist3(p0, mc) : INFINITY;
          int changed = memcmp(p0, p1, sizeof(double) * 3) != 0;
          ASSERT_EQ(f.moved[v], changed);
          if (d == r || dm == r) on_sphere++;
          if (d >= r && dm >= r) {
            if (changed)
              test__fail(__FILE__, __LINE__, "%s/%s mirror %d: vertex %u at distance %.17g moved",
                         dfm_brush_name(all_brushes[b]), dfm_falloff_name(all_falloffs[fi]), mirror,
                         v, d < dm ? d : dm);
          } else {
            inside_moved += changed;
          }
        }
        ASSERT(on_sphere >= 7); /* the rest of the 12 lie in the other disc, bumped */
        ASSERT(inside_moved > 10); /* and the brush did act inside */
        fixture_fini(&f);
      }
}

/* ---- mirror symmetry -------------------------------------------------------------------------- */

/* twin[v]: the vertex with coordinate `axis` negated, found by exact coordinates (the
 * icosphere is built exactly symmetric in x, y and z). */
static uint32_t *mirror_twins(const fixture *f, int axis) {
  uint32_t n = f->t.vertex_count, *twin = malloc(sizeof(uint32_t) * n);
  for (uint32_t v = 0; v < n; v++) {
    const double *p = f->p + 3 * v;
    double m[3] = {p[0], p[1], p[2]};
    m[axis] = -m[axis];
    twin[v] = UINT32_MAX;
    for (uint32_t u = 0; u < n; u++) {
      const double *q = f->p + 3 * u;
      if (q[0] == m[0] && q[1] == m[1] && q[2] == m[2]) twin[v] = u;
    }
    ASSERT(twin[v] != UINT32_MAX);
  }
  return twin;
}

/* Every kind and falloff mirrored across `axis` (mirror_x, or mirror_axis 1 + axis): the
 * offsets are the mirror image of themselves, twin by twin (the oracle: the twin's offset with
 * that coordinate negated). */
static void check_mirror_symmetry(int axis, int by_mirror_x) {
  /* A stroke of overlapping samples that crosses the plane, on a sphere symmetric in it: the
   * x-stroke's coordinates turned so that its x runs along `axis`. */
  dfm_brush_sample stroke[7];
  for (int i = 0; i < 7; i++) {
    double c[3] = {0.55 - 0.15 * i, 0.35 + 0.02 * i, 0.75}, l = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
    double d[3] = {0.04, 0.02 - 0.01 * i, -0.03};
    dfm_brush_sample s = {{0, 0, 0}, {0, 0, 0}, 0.45, 0.35};
    for (int k = 0; k < 3; k++) s.center[(axis + k) % 3] = c[k] / l, s.direction[(axis + k) % 3] = d[k];
    stroke[i] = s;
  }
  for (int b = 0; b < 5; b++)
    for (int fi = 0; fi < 4; fi++) {
      fixture f;
      fixture_init(&f, oracle_icosphere(3, 1.0));
      uint32_t *twin = mirror_twins(&f, axis);
      fixture_snapshot(&f);
      char err[256];
      dfm_brush br = {.kind = all_brushes[b], .falloff = all_falloffs[fi], .mirror_x = by_mirror_x,
                      .mirror_axis = by_mirror_x ? 0 : 1 + axis};
      ASSERT_OK(dfm_brush_apply(&br, &f.a, f.t.triangles, f.t.triangle_count, stroke, 7, f.p, f.moved, err, 256), err);
      double maxoff = 0, maxasym = 0;
      for (uint32_t v = 0; v < f.t.vertex_count; v++) {
        uint32_t u = twin[v];
        double ov[3], ou[3];
        for (int k = 0; k < 3; k++) ov[k] = f.p[3 * v + k] - f.rest[3 * v + k], ou[k] = f.p[3 * u + k] - f.rest[3 * u + k];
        ou[axis] = -ou[axis];
        double asym = fmax(fabs(ou[0] - ov[0]), fmax(fabs(ou[1] - ov[1]), fabs(ou[2] - ov[2])));
        maxasym = fmax(maxasym, asym);
        maxoff = fmax(maxoff, sqrt(ov[0] * ov[0] + ov[1] * ov[1] + ov[2] * ov[2]));
        ASSERT_EQ(f.moved[u], f.moved[v]);
      }
      if (!(maxasym <= 1e-12))
        test__fail(__FILE__, __LINE__, "%s/%s mirrored in %c: asymmetry %.3g (largest offset %.3g)",
                   dfm_brush_name(all_brushes[b]), dfm_falloff_name(all_falloffs[fi]), "xyz"[axis], maxasym, maxoff);
      ASSERT(maxoff > 1e-3);
      free(twin);
      fixture_fini(&f);
    }
}

TEST(brush_strokes_mirrored_in_x_give_mirror_symmetric_offsets_for_every_kind) {
  check_mirror_symmetry(0, 1);
  check_mirror_symmetry(0, 0);
}

/* Issue 26: symmetry on Y or Z is the server's too. */
TEST(brush_strokes_mirrored_in_y_or_z_give_mirror_symmetric_offsets_for_every_kind) {
  check_mirror_symmetry(1, 0);
  check_mirror_symmetry(2, 0);
}

/* Without a mirror, the same stroke is not symmetric (the test above could not pass by
 * accident), and a second plane beside mirror_x is refused. */
TEST(brush_strokes_without_a_mirror_are_not_symmetric_and_two_planes_are_refused) {
  fixture f;
  fixture_init(&f, oracle_icosphere(3, 1.0));
  uint32_t *twin = mirror_twins(&f, 1);
  fixture_snapshot(&f);
  dfm_brush_sample s = {{0.3, 0.5, 0.81}, {0, 0, 0}, 0.45, 0.35};
  double l = sqrt(0.3 * 0.3 + 0.5 * 0.5 + 0.81 * 0.81);
  for (int k = 0; k < 3; k++) s.center[k] /= l;
  char err[256];
  dfm_brush br = {.kind = DFM_BRUSH_INFLATE, .falloff = DFM_FALLOFF_SMOOTHSTEP};
  ASSERT_OK(dfm_brush_apply(&br, &f.a, f.t.triangles, f.t.triangle_count, &s, 1, f.p, f.moved, err, 256), err);
  uint32_t lopsided = 0;
  for (uint32_t v = 0; v < f.t.vertex_count; v++) lopsided += f.moved[v] != f.moved[twin[v]];
  ASSERT(lopsided > 0);
  dfm_brush two = {.kind = DFM_BRUSH_INFLATE, .mirror_x = 1, .mirror_axis = 2};
  ASSERT_EQ(dfm_brush_apply(&two, &f.a, f.t.triangles, f.t.triangle_count, &s, 1, f.p, f.moved, err, 256), DFM_EINVAL);
  ASSERT(strstr(err, "one plane") != NULL);
  free(twin);
  fixture_fini(&f);
}

/* ---- each brush's effect ---------------------------------------------------------------------- */

TEST(brush_grab_moves_each_vertex_by_strength_times_falloff_times_direction) {
  for (int fi = 0; fi < 4; fi++) {
    fixture f;
    fixture_init(&f, oracle_grid(10, 0.5));
    fixture_snapshot(&f);
    /* The centre is exactly vertex (4, 6) of the grid. */
    const double c[3] = {2.0, 3.0, 0.0}, dir[3] = {0.1, -0.2, 0.3}, strength = 0.7, r = 1.3;
    dfm_brush_sample s = {{c[0], c[1], c[2]}, {dir[0], dir[1], dir[2]}, r, strength};
    char err[256];
    ASSERT_OK(apply(&f, DFM_BRUSH_GRAB, all_falloffs[fi], 0, &s, 1, err), err);
    int found_centre = 0;
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      const double *p0 = f.rest + 3 * v, *p1 = f.p + 3 * v;
      double w = strength * falloff_oracle(all_falloffs[fi], dist3(p0, c) / r);
      for (int k = 0; k < 3; k++) ASSERT_NEAR(p1[k] - p0[k], w * dir[k], 1e-15);
      if (dist3(p0, c) == 0.0) {
        found_centre = 1;
        for (int k = 0; k < 3; k++) ASSERT_NEAR(p1[k], c[k] + strength * dir[k], 1e-15);
      }
    }
    ASSERT(found_centre);
    fixture_fini(&f);
  }
}

TEST(brush_inflate_on_a_sphere_moves_vertices_outward_along_the_angle_weighted_normal) {
  fixture f;
  fixture_init(&f, oracle_icosphere(4, 2.0));
  fixture_snapshot(&f);
  const double c[3] = {0.3, 1.2, 1.57}, r = 0.9, strength = 0.25;
  dfm_brush_sample s = {{c[0], c[1], c[2]}, {0, 0, 0}, r, strength};
  char err[256];
  ASSERT_OK(apply(&f, DFM_BRUSH_INFLATE, DFM_FALLOFF_SMOOTHSTEP, 0, &s, 1, err), err);
  uint32_t touched = 0;
  double worst_radial = 0;
  for (uint32_t v = 0; v < f.t.vertex_count; v++) {
    const double *p0 = f.rest + 3 * v;
    double d[3], n[3];
    for (int k = 0; k < 3; k++) d[k] = f.p[3 * v + k] - p0[k];
    double w = strength * falloff_oracle(DFM_FALLOFF_SMOOTHSTEP, dist3(p0, c) / r);
    if (w == 0.0) continue;
    touched++;
    /* Exactly w·radius along the normal computed independently... */
    normal_oracle(&f, f.rest, v, n);
    for (int k = 0; k < 3; k++) ASSERT_NEAR(d[k], w * r * n[k], 1e-12);
    /* ...which on a sphere points outward along the position (up to the icosphere's
     * irregularity: the angle-weighted normal of a subdivided icosahedron deviates by well
     * under a degree). */
    double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]), pl = dist3(p0, (double[3]){0, 0, 0});
    double cosang = (d[0] * p0[0] + d[1] * p0[1] + d[2] * p0[2]) / (len * pl);
    ASSERT(cosang > 0.0);
    worst_radial = fmax(worst_radial, 1.0 - cosang);
  }
  ASSERT(touched > 20);
  ASSERT(worst_radial < 1e-4);
  fixture_fini(&f);
}

TEST(brush_inflate_moves_a_vertex_with_a_symmetric_ring_exactly_radially) {
  /* An original icosahedron vertex has a five-fold symmetric ring, so its angle-weighted
   * normal is its position direction to rounding. */
  fixture f;
  fixture_init(&f, oracle_icosphere(3, 1.0));
  fixture_snapshot(&f);
  const double phi = (1.0 + sqrt(5.0)) / 2.0, l = sqrt(1.0 + phi * phi);
  const double c[3] = {0.0, 1.0 / l, phi / l};
  dfm_brush_sample s = {{c[0], c[1], c[2]}, {0, 0, 0}, 0.3, 0.5};
  char err[256];
  ASSERT_OK(apply(&f, DFM_BRUSH_INFLATE, DFM_FALLOFF_LINEAR, 0, &s, 1, err), err);
  uint32_t best = 0;
  for (uint32_t v = 1; v < f.t.vertex_count; v++)
    if (dist3(f.rest + 3 * v, c) < dist3(f.rest + 3 * best, c)) best = v;
  ASSERT(dist3(f.rest + 3 * best, c) < 1e-6);
  const double *p0 = f.rest + 3 * best, *p1 = f.p + 3 * best;
  double d[3] = {p1[0] - p0[0], p1[1] - p0[1], p1[2] - p0[2]};
  double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  double w = 0.5 * (1.0 - dist3(p0, c) / 0.3);
  ASSERT_NEAR(len, w * 0.3, 1e-12);
  for (int k = 0; k < 3; k++) ASSERT_NEAR(d[k] / len, p0[k] / dist3(p0, (double[3]){0, 0, 0}), 1e-6);
  fixture_fini(&f);
}

/* Σ over interior vertices of |mean of neighbours - p|², neighbours from the raw triangle
 * edges. (Boundary vertices have a large in-plane Laplacian that no brush here is meant to
 * change.) */
static double laplacian_energy(const fixture *f, const double *pos) {
  uint32_t n = f->t.vertex_count;
  uint8_t *adj = calloc((size_t)n * n, 1);
  for (uint32_t t = 0; t < f->t.triangle_count; t++)
    for (int k = 0; k < 3; k++) {
      uint32_t a = f->t.triangles[3 * t + k], b = f->t.triangles[3 * t + (k + 1) % 3];
      adj[(size_t)a * n + b] = adj[(size_t)b * n + a] = 1;
    }
  double e = 0;
  for (uint32_t v = 0; v < n; v++) {
    double m[3] = {0, 0, 0};
    int deg = 0;
    for (uint32_t u = 0; u < n; u++)
      if (adj[(size_t)v * n + u]) {
        deg++;
        for (int k = 0; k < 3; k++) m[k] += pos[3 * u + k];
      }
    if (deg < 6) continue; /* on the grid's border */
    for (int k = 0; k < 3; k++) {
      double l = m[k] / deg - pos[3 * v + k];
      e += l * l;
    }
  }
  free(adj);
  return e;
}

TEST(brush_smooth_lowers_the_laplacian_energy_of_a_bumpy_grid) {
  for (int fi = 0; fi < 4; fi++) {
    fixture f;
    fixture_init(&f, oracle_grid(20, 1.0));
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      f.p[3 * v + 2] = 0.6 * ((double)(rng >> 11) / 9007199254740992.0 - 0.5);
    }
    fixture_snapshot(&f);
    double before = laplacian_energy(&f, f.p);
    dfm_brush_sample s[2] = {{{10, 10, 0}, {0, 0, 0}, 7.0, 0.5}, {{11, 9, 0}, {0, 0, 0}, 6.0, 0.5}};
    char err[256];
    ASSERT_OK(apply(&f, DFM_BRUSH_SMOOTH, all_falloffs[fi], 0, s, 2, err), err);
    double after = laplacian_energy(&f, f.p);
    /* Only the brushed part of the grid smooths (between 15% and 40% of the total here). */
    if (!(after < 0.9 * before))
      test__fail(__FILE__, __LINE__, "%s: energy %.6g -> %.6g", dfm_falloff_name(all_falloffs[fi]), before, after);
    fixture_fini(&f);
  }
}

TEST(brush_flatten_scales_each_distance_to_the_fitted_plane_by_one_minus_the_weight) {
  for (int fi = 0; fi < 4; fi++)
    for (int full = 0; full <= 1; full++) {
      const double c[3] = {0.5, -1.0, 0.2}, r = 4.0, strength = full ? 1.0 : 0.6;
      fixture f;
      bumpy_lattice(&f, c, r + 1.0);
      /* A tilt, so the plane is not simply z = const. */
      for (uint32_t v = 0; v < f.t.vertex_count; v++) f.p[3 * v + 2] += 0.3 * f.p[3 * v] - 0.1 * f.p[3 * v + 1];
      fixture_snapshot(&f);
      /* The plane by the definition: falloff-weighted centroid and mean normal. */
      double pc[3] = {0, 0, 0}, pn[3] = {0, 0, 0}, wsum = 0;
      for (uint32_t v = 0; v < f.t.vertex_count; v++) {
        double fo = falloff_oracle(all_falloffs[fi], dist3(f.rest + 3 * v, c) / r), n[3];
        if (fo == 0.0) continue;
        normal_oracle(&f, f.rest, v, n);
        for (int k = 0; k < 3; k++) pc[k] += fo * f.rest[3 * v + k], pn[k] += fo * n[k];
        wsum += fo;
      }
      double nl = sqrt(pn[0] * pn[0] + pn[1] * pn[1] + pn[2] * pn[2]);
      for (int k = 0; k < 3; k++) pc[k] /= wsum, pn[k] /= nl;

      dfm_brush_sample s = {{c[0], c[1], c[2]}, {0, 0, 0}, r, strength};
      char err[256];
      ASSERT_OK(apply(&f, DFM_BRUSH_FLATTEN, all_falloffs[fi], 0, &s, 1, err), err);
      double max_before = 0, max_after = 0;
      for (uint32_t v = 0; v < f.t.vertex_count; v++) {
        double fo = falloff_oracle(all_falloffs[fi], dist3(f.rest + 3 * v, c) / r);
        if (fo == 0.0) continue;
        double h0 = 0, h1 = 0;
        for (int k = 0; k < 3; k++) h0 += (f.rest[3 * v + k] - pc[k]) * pn[k], h1 += (f.p[3 * v + k] - pc[k]) * pn[k];
        ASSERT_NEAR(h1, (1.0 - strength * fo) * h0, 1e-12);
        max_before = fmax(max_before, fabs(h0));
        max_after = fmax(max_after, fabs(h1));
      }
      ASSERT(max_before > 0.05);
      ASSERT(max_after < max_before);
      if (full && all_falloffs[fi] == DFM_FALLOFF_CONSTANT) ASSERT(max_after < 1e-12);
      fixture_fini(&f);
    }
}

TEST(brush_pinch_pulls_touched_vertices_towards_the_centre_along_the_surface) {
  for (int fi = 0; fi < 4; fi++) {
    fixture f;
    fixture_init(&f, oracle_icosphere(4, 1.0));
    fixture_snapshot(&f);
    const double c[3] = {0.48, 0.6, 0.64}, r = 0.5, strength = 0.5;
    dfm_brush_sample s = {{c[0], c[1], c[2]}, {0, 0, 0}, r, strength};
    char err[256];
    ASSERT_OK(apply(&f, DFM_BRUSH_PINCH, all_falloffs[fi], 0, &s, 1, err), err);
    double sum0 = 0, sum1 = 0;
    uint32_t touched = 0;
    for (uint32_t v = 0; v < f.t.vertex_count; v++) {
      double fo = falloff_oracle(all_falloffs[fi], dist3(f.rest + 3 * v, c) / r), n[3];
      if (fo == 0.0) continue;
      touched++;
      double d0 = dist3(f.rest + 3 * v, c), d1 = dist3(f.p + 3 * v, c);
      ASSERT(d1 <= d0 + 1e-15);
      sum0 += d0, sum1 += d1;
      /* Tangential: nothing along the vertex normal. */
      normal_oracle(&f, f.rest, v, n);
      double dn = 0;
      for (int k = 0; k < 3; k++) dn += (f.p[3 * v + k] - f.rest[3 * v + k]) * n[k];
      ASSERT_NEAR(dn, 0.0, 1e-12);
    }
    ASSERT(touched > 20);
    ASSERT(sum1 / touched < 0.95 * (sum0 / touched));
    fixture_fini(&f);
  }
}

/* ---- sequencing and refusals ------------------------------------------------------------------ */

TEST(brush_samples_later_in_a_call_see_the_results_of_earlier_ones) {
  fixture f;
  fixture_init(&f, oracle_grid(8, 1.0));
  fixture_snapshot(&f);
  /* Vertex (4, 4) is dragged by 0.5 in z; the second sample, centred where it now is with a
   * radius that reaches nothing else, drags it again. */
  dfm_brush_sample s[2] = {{{4, 4, 0}, {0, 0, 0.5}, 0.6, 1.0}, {{4, 4, 0.5}, {0, 0, 0.25}, 0.1, 1.0}};
  char err[256];
  ASSERT_OK(apply(&f, DFM_BRUSH_GRAB, DFM_FALLOFF_CONSTANT, 0, s, 2, err), err);
  uint32_t v = 4 * 9 + 4;
  ASSERT(f.p[3 * v + 2] == 0.75);
  for (uint32_t u = 0; u < f.t.vertex_count; u++)
    if (u != v) ASSERT(memcmp(f.p + 3 * u, f.rest + 3 * u, sizeof(double) * 3) == 0);
  fixture_fini(&f);
}

TEST(brush_refuses_invalid_samples_and_applies_nothing_of_the_call) {
  fixture f;
  fixture_init(&f, oracle_icosphere(2, 1.0));
  fixture_snapshot(&f);
  const dfm_brush_sample good = {{0, 0, 1}, {0.1, 0, 0}, 0.5, 0.5};
  for (int bad = 0; bad < 9; bad++) {
    dfm_brush_sample s[3] = {good, good, good};
    dfm_brush_sample *x = &s[2];
    const char *why = "radius";
    switch (bad) {
      case 0: x->radius = NAN; break;
      case 1: x->radius = INFINITY; break;
      case 2: x->radius = 0.0; break;
      case 3: x->radius = -1.0; break;
      case 4: x->center[1] = NAN, why = "center"; break;
      case 5: x->center[0] = -INFINITY, why = "center"; break;
      case 6: x->direction[2] = INFINITY, why = "direction"; break;
      case 7: x->strength = NAN, why = "strength"; break;
      case 8: x->strength = INFINITY, why = "strength"; break;
    }
    for (int b = 0; b < 5; b++) {
      char err[256] = "";
      ASSERT_EQ(apply(&f, all_brushes[b], DFM_FALLOFF_SMOOTHSTEP, 1, s, 3, err), DFM_EINVAL);
      ASSERT_STR_CONTAINS(err, why);
      ASSERT_STR_CONTAINS(err, "sample 2");
      ASSERT(memcmp(f.p, f.rest, sizeof(double) * 3 * f.t.vertex_count) == 0);
      for (uint32_t v = 0; v < f.t.vertex_count; v++) ASSERT_EQ(f.moved[v], 0);
    }
  }
  /* An unknown brush kind or falloff is refused too. */
  dfm_brush b = {.kind = (dfm_brush_kind)17, .falloff = DFM_FALLOFF_LINEAR};
  char err[256];
  ASSERT_EQ(dfm_brush_apply(&b, &f.a, f.t.triangles, f.t.triangle_count, &good, 1, f.p, NULL, err, sizeof(err)),
            DFM_EINVAL);
  ASSERT(memcmp(f.p, f.rest, sizeof(double) * 3 * f.t.vertex_count) == 0);
  fixture_fini(&f);
}

TEST(brush_sample_that_would_overflow_rolls_back_the_whole_call) {
  fixture f;
  fixture_init(&f, oracle_icosphere(2, 1.0));
  /* A vertex already flagged by an earlier call keeps its flag through the rollback. */
  fixture_snapshot(&f);
  f.moved[0] = 1;
  dfm_brush_sample s[3] = {{{0, 0, 1}, {0.1, 0.2, 0}, 0.8, 0.5},
                           {{0, 0.3, 0.95}, {0, 0.1, 0}, 0.8, 0.5},
                           {{0, 0, 1}, {1e300, 0, 0}, 0.8, 1e300}};
  char err[256];
  ASSERT_EQ(apply(&f, DFM_BRUSH_GRAB, DFM_FALLOFF_SMOOTHSTEP, 0, s, 3, err), DFM_ENONFINITE);
  ASSERT_STR_CONTAINS(err, "non-finite");
  ASSERT(memcmp(f.p, f.rest, sizeof(double) * 3 * f.t.vertex_count) == 0);
  ASSERT_EQ(f.moved[0], 1);
  for (uint32_t v = 1; v < f.t.vertex_count; v++) ASSERT_EQ(f.moved[v], 0);
  /* Without the bad sample the same call goes through. */
  ASSERT_OK(apply(&f, DFM_BRUSH_GRAB, DFM_FALLOFF_SMOOTHSTEP, 0, s, 2, err), err);
  ASSERT(memcmp(f.p, f.rest, sizeof(double) * 3 * f.t.vertex_count) != 0);
  /* With vertex_names the message gives the caller's index of a vertex the bad sample touches. */
  fixture_snapshot(&f);
  uint32_t *names = malloc(sizeof(uint32_t) * f.t.vertex_count);
  ASSERT(names != NULL);
  for (uint32_t v = 0; v < f.t.vertex_count; v++) names[v] = 5000 + 7 * v;
  dfm_brush b = {.kind = DFM_BRUSH_GRAB, .falloff = DFM_FALLOFF_SMOOTHSTEP, .vertex_names = names};
  ASSERT_EQ(dfm_brush_apply(&b, &f.a, f.t.triangles, f.t.triangle_count, s + 2, 1, f.p, f.moved, err, sizeof(err)),
            DFM_ENONFINITE);
  const char *at = strstr(err, "vertex ");
  ASSERT(at != NULL);
  unsigned long named = strtoul(at + 7, NULL, 10);
  ASSERT(named >= 5000 && (named - 5000) % 7 == 0 && (named - 5000) / 7 < f.t.vertex_count);
  const double *q = f.rest + 3 * ((named - 5000) / 7);
  ASSERT(sqrt(q[0] * q[0] + q[1] * q[1] + (q[2] - 1) * (q[2] - 1)) < 0.8);
  free(names);
  fixture_fini(&f);
}
