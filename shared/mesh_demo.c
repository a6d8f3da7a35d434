/*
 * mesh_demo.c — the bundled demo head, generated in code.
 *
 * Builds a closed, head-shaped triangle mesh with UVs, normals and 68 sculpted blendshapes (16 of
 * its own, then ARKit's 52 names, see below) from
 * pure math. The surface is a subdivided icosahedron (level 6, 40962 vertices) whose vertices are
 * pushed out along rays until they meet an implicit head: smoothly blended ellipsoids and cones
 * for cranium, jaw, neck stub, nose, brow, eyes, lips, cheekbones and ears. The rays start on the
 * vertical axis inside the head and never cross one another (see demo_ray_origin), so every
 * vertex lands on its own point of the surface, the mesh cannot intersect itself, and the
 * triangles keep the icosphere's connectivity. The sphere is first warped conformally towards
 * the face, which gets about 1.2 mm edges where the back of the head gets about 4 mm.
 *
 * UVs are a cylindrical projection (u around the vertical axis, v up) with the seam behind the
 * head; vertices of triangles that straddle the seam are duplicated with a shifted u, so the mesh
 * has more render vertices than topology vertices and exercises welding.
 *
 * Every blendshape is a displacement field of the rest position with compact support (deltas are
 * exactly zero outside a radius), the way a sculptor paints a shape key. A right-hand target is
 * the exact mirror of its left-hand twin, delta_R(p) = M·delta_L(M·p) with M = diag(-1, 1, 1), so
 * no vertex correspondence is needed; since the vertex set is itself mirror-symmetric bit for bit,
 * mirrored vertices get mirrored deltas bit for bit. Seam duplicates share their twin's position
 * and therefore its deltas.
 *
 * The plain subdivided icosahedron is public too (mesh_demo_icosphere): benchmarks and tests
 * compare solvers and GPU passes on it.
 *
 * DOES NOT read files, use random numbers, or keep state: the same bits come out on every run
 * (given the same libm). It does not animate (frame_count stays 0) and it is not a likeness of
 * anyone: it is a smooth mannequin head, enough to see blendshapes and solves do their job.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

#define DEMO_LEVEL 6            /* icosphere subdivisions: 10 * 4^6 + 2 = 40962 vertices */
#define DEMO_PI 3.14159265358979323846
#define DEMO_DEG (DEMO_PI / 180.0)

typedef struct demo_v3 {
  double x, y, z;
} demo_v3;

static demo_v3 v3(double x, double y, double z) {
  demo_v3 r = {x, y, z};
  return r;
}
static demo_v3 v3_add(demo_v3 a, demo_v3 b) { return v3(a.x + b.x, a.y + b.y, a.z + b.z); }
static demo_v3 v3_sub(demo_v3 a, demo_v3 b) { return v3(a.x - b.x, a.y - b.y, a.z - b.z); }
static demo_v3 v3_scale(demo_v3 a, double s) { return v3(a.x * s, a.y * s, a.z * s); }
static double v3_dot(demo_v3 a, demo_v3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static double v3_len(demo_v3 a) { return sqrt(v3_dot(a, a)); }
static demo_v3 v3_unit(demo_v3 a) {
  double l = v3_len(a);
  return l > 0.0 ? v3_scale(a, 1.0 / l) : a;
}

static double demo_clamp01(double t) { return t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t); }

/* Smoothstep from e0 to e1 (e0 > e1 gives a falling edge). Exactly 0 and 1 outside the edges,
 * which is what makes the targets sparse. */
static double demo_smoothstep(double e0, double e1, double x) {
  double t = demo_clamp01((x - e0) / (e1 - e0));
  return t * t * (3.0 - 2.0 * t);
}

/* Compactly supported bell: (1 - t²)³ for t < 1, exactly 0 beyond. Looks like a gaussian but
 * ends, so a shape key painted with it touches only the vertices inside its radius. */
static double demo_bell(double t) {
  if (t >= 1.0) return 0.0;
  double s = 1.0 - t * t;
  return s * s * s;
}

/* Bell over the ellipsoidal distance of p from c with radii r. */
static double demo_bell3(demo_v3 p, demo_v3 c, demo_v3 r) {
  double dx = (p.x - c.x) / r.x, dy = (p.y - c.y) / r.y, dz = (p.z - c.z) / r.z;
  return demo_bell(sqrt(dx * dx + dy * dy + dz * dz));
}

/* Rotation of p about the axis through `o` along unit `axis` by `angle` (Rodrigues). */
static demo_v3 demo_rotate(demo_v3 p, demo_v3 o, demo_v3 axis, double angle) {
  demo_v3 v = v3_sub(p, o);
  double c = cos(angle), s = sin(angle);
  demo_v3 k = axis;
  demo_v3 kxv = v3(k.y * v.z - k.z * v.y, k.z * v.x - k.x * v.z, k.x * v.y - k.y * v.x);
  double kv = v3_dot(k, v);
  demo_v3 r = v3_add(v3_add(v3_scale(v, c), v3_scale(kxv, s)), v3_scale(k, kv * (1.0 - c)));
  return v3_add(o, r);
}

/* ---------------------------------------------------------------------------------------------
 * The implicit head: an approximate signed distance in metres, negative inside.
 */

/* Polynomial smooth minimum / maximum with blend radius k (Quilez). */
static double demo_smin(double a, double b, double k) {
  double h = fmax(k - fabs(a - b), 0.0) / k;
  return fmin(a, b) - h * h * k * 0.25;
}
static double demo_smax(double a, double b, double k) { return -demo_smin(-a, -b, k); }

/* Approximate distance to an axis-aligned ellipsoid (Quilez's k0·(k0-1)/k1 bound). */
static double demo_ellipsoid(demo_v3 p, demo_v3 c, demo_v3 r) {
  double px = p.x - c.x, py = p.y - c.y, pz = p.z - c.z;
  double a = px / r.x, b = py / r.y, d = pz / r.z;
  double k0 = sqrt(a * a + b * b + d * d);
  double e = px / (r.x * r.x), f = py / (r.y * r.y), g = pz / (r.z * r.z);
  double k1 = sqrt(e * e + f * f + g * g);
  if (k1 < 1e-12) return -fmin(r.x, fmin(r.y, r.z));
  return k0 * (k0 - 1.0) / k1;
}

/* Distance to a cone with rounded ends from a (radius ra) to b (radius rb), approximately. */
static double demo_cone(demo_v3 p, demo_v3 a, demo_v3 b, double ra, double rb) {
  demo_v3 ba = v3_sub(b, a), pa = v3_sub(p, a);
  double t = demo_clamp01(v3_dot(pa, ba) / v3_dot(ba, ba));
  return v3_len(v3_sub(pa, v3_scale(ba, t))) - (ra + (rb - ra) * t);
}

/* Landmarks of the left half (+X); the right half is their mirror. */
#define DEMO_EYE_Y 0.012
#define DEMO_EYE_X 0.032
#define DEMO_EYE_Z 0.068
#define DEMO_EYE_R 0.0125   /* eyeball */
#define DEMO_LID_T 0.0018   /* lid thickness over the eyeball */
#define DEMO_MOUTH_Y (-0.0595)
#define DEMO_MOUTH_X 0.024  /* corner */
#define DEMO_NECK_BOTTOM (-0.175)

/* Heights of the upper and lower lid edges above the eye centre at x (>= 0): almond-shaped
 * arcs that nearly meet at the corners of the eye, DEMO_EYE_W either side of its centre. */
#define DEMO_EYE_W 0.0135
static double demo_eye_arch(double x) {
  double t = (x - DEMO_EYE_X) / DEMO_EYE_W;
  return t * t < 1.0 ? 1.0 - t * t : 0.0;
}
static double demo_lid_upper(double x) { return -0.0005 + 0.0037 * demo_eye_arch(x); }
static double demo_lid_lower(double x) { return -0.0015 - 0.0025 * demo_eye_arch(x); }

/* The head's implicit function. It sees x only through |x| and x², so the surface is
 * mirror-symmetric bit for bit: F(x, y, z) and F(-x, y, z) do the same arithmetic. */
static double demo_field(demo_v3 p) {
  /* Parts centred on the mirror plane see |x|; they depend on x² and are smooth there. Paired
   * parts see a smoothed |x|, so where a left part and its mirror overlap the midline (the brows)
   * they blend instead of meeting in a crease. */
  demo_v3 q = v3(fabs(p.x), p.y, p.z);
  demo_v3 qp = v3(sqrt(p.x * p.x + 0.003 * 0.003), p.y, p.z);

  /* Cranium, and a narrower lower face whose width shrinks towards the chin, cut underneath by
   * the jaw line (a plane from below the ear to under the chin). */
  double d = demo_ellipsoid(q, v3(0, 0.030, -0.012), v3(0.074, 0.096, 0.100));
  double taper = 1.0 + 0.45 * demo_smoothstep(-0.01, -0.11, q.y);
  double face = demo_ellipsoid(v3(q.x * taper, q.y, q.z), v3(0, -0.035, 0.012),
                               v3(0.064, 0.076, 0.080));
  face = demo_smin(face, demo_ellipsoid(q, v3(0, -0.090, 0.070), v3(0.026, 0.018, 0.020)),
                   0.025);
  face = demo_smax(face, -0.915 * (q.y + 0.106) - 0.403 * (q.z - 0.070), 0.02);
  d = demo_smin(d, face, 0.03);

  /* Neck stub: an elliptic cylinder, capped flat at the bottom with a rounded rim. */
  {
    double nx = q.x / 0.052, nz = (q.z + 0.020) / 0.058;
    double neck = (sqrt(nx * nx + nz * nz) - 1.0) * 0.052;
    neck = demo_smax(neck, q.y + 0.03, 0.01);
    neck = demo_smax(neck, DEMO_NECK_BOTTOM - q.y, 0.012);
    d = demo_smin(d, neck, 0.025);
  }

  /* Cheekbones and brow ridge, kept soft: the mesh resolves about 2 mm. */
  d = demo_smin(d, demo_ellipsoid(qp, v3(0.046, -0.004, 0.056), v3(0.018, 0.012, 0.018)), 0.02);
  d = demo_smin(d, demo_ellipsoid(qp, v3(0.030, 0.032, 0.079), v3(0.026, 0.010, 0.012)), 0.02);

  /* Eye sockets carved, then the eyeball put back. The lids are the eyeball thickened by
   * DEMO_LID_T outside an almond-shaped opening, ramped over a couple of millimetres so the mesh
   * (about 1.2 mm edges here) resolves their edges; blink moves those edges. */
  {
    demo_v3 e = v3(DEMO_EYE_X, DEMO_EYE_Y, DEMO_EYE_Z);
    d = demo_smax(d, -demo_ellipsoid(qp, v3(DEMO_EYE_X, DEMO_EYE_Y - 0.002, 0.090),
                                     v3(0.019, 0.013, 0.017)),
                  0.014);
    double h = qp.y - DEMO_EYE_Y, hu = demo_lid_upper(qp.x), hl = demo_lid_lower(qp.x);
    double lid = DEMO_LID_T * demo_smoothstep(hu - 0.0012, hu + 0.0022, h) +
                 0.8 * DEMO_LID_T * demo_smoothstep(hl + 0.0012, hl - 0.0022, h);
    d = demo_smin(d, v3_len(v3_sub(qp, e)) - (DEMO_EYE_R + lid), 0.004);
  }

  /* Nose: bridge to tip, on a broad base that carries the nostril wings. One base rather than
   * two wings, because a deep crease between wing and tip would face away from the rays. */
  d = demo_smin(d, demo_cone(q, v3(0, 0.020, 0.086), v3(0, -0.016, 0.107), 0.0050, 0.0088),
                0.012);
  d = demo_smin(d, demo_ellipsoid(q, v3(0, -0.024, 0.091), v3(0.017, 0.0072, 0.0095)), 0.012);

  /* Lips: two rolls meeting in a crease of their own, bent back with the face so their corners
   * sink into the cheeks. A carved groove would have a lower wall facing up, away from the rays,
   * which a radial surface cannot represent. */
  {
    demo_v3 ql = v3(q.x, q.y, q.z + 15.0 * q.x * q.x);
    double upper = demo_ellipsoid(ql, v3(0, -0.0530, 0.088), v3(0.023, 0.0060, 0.0090));
    double lower = demo_ellipsoid(ql, v3(0, -0.0660, 0.086), v3(0.020, 0.0068, 0.0090));
    d = demo_smin(d, demo_smin(upper, lower, 0.004), 0.012);
  }

  /* Ears: flattened discs on the sides with a hollow facing outwards. */
  d = demo_smin(d, demo_ellipsoid(q, v3(0.073, -0.002, -0.014), v3(0.012, 0.031, 0.019)), 0.008);
  d = demo_smax(d, -demo_ellipsoid(q, v3(0.086, -0.006, -0.010), v3(0.006, 0.015, 0.009)),
                0.004);
  return d;
}

/* Outward unit normal of the implicit surface at p, by central differences. Mirror-symmetric
 * like the field itself, so cheek_puff stays symmetric. */
static demo_v3 demo_field_normal(demo_v3 p) {
  const double h = 1e-5;
  double gx = demo_field(v3(p.x + h, p.y, p.z)) - demo_field(v3(p.x - h, p.y, p.z));
  double gy = demo_field(v3(p.x, p.y + h, p.z)) - demo_field(v3(p.x, p.y - h, p.z));
  double gz = demo_field(v3(p.x, p.y, p.z + h)) - demo_field(v3(p.x, p.y, p.z - h));
  return v3_unit(v3(gx, gy, gz));
}

/* Moves unit directions towards +Z so the face gets about twice the vertex density of the back of
 * the head: stereographic projection from the back pole, scaled by DEMO_FACE_ZOOM, projected
 * back. The map is conformal, so the icosphere's near-equilateral triangles stay well shaped,
 * and it only multiplies x and y by common factors, so it keeps the x -> -x symmetry exactly. */
#define DEMO_FACE_ZOOM 0.5
static demo_v3 demo_warp(demo_v3 d) {
  if (d.z <= -1.0) return d;
  double s = DEMO_FACE_ZOOM / (1.0 + d.z);
  double X = d.x * s, Y = d.y * s;
  double r2 = X * X + Y * Y;
  return v3(2.0 * X / (1.0 + r2), 2.0 * Y / (1.0 + r2), (1.0 - r2) / (1.0 + r2));
}

/* Where the ray along unit direction `dir` starts: a point on the vertical axis that rises with
 * the ray's elevation. Rays looking at the lips start low enough to see into the crease between
 * them; rays looking at the brow start high enough to see under it. In each half-plane of fixed
 * azimuth the rays then never cross (a steeper ray starts no lower), and different half-planes
 * meet only on the axis, which lies inside the head; so every ray hits the surface at its own
 * point and the mesh cannot intersect itself. */
static demo_v3 demo_ray_origin(demo_v3 dir) {
  double s = demo_smoothstep(sin(-20.0 * DEMO_DEG), sin(10.0 * DEMO_DEG), dir.y);
  return v3(0.0, -0.022 + 0.03 * s, 0.0);
}

/* Distance along unit direction `dir` from its origin `o` to the outermost crossing of the
 * surface. Marches inwards from outside with steps bounded by the field (halved, since the
 * blended ellipsoid distances are only approximate) until it is inside, then closes the bracket
 * with the Illinois variant of regula falsi, which converges in a few steps where bisection would
 * need thirty. */
static double demo_radius(demo_v3 o, demo_v3 dir) {
  double hi = 0.26, lo = 0.0;
  double fhi = demo_field(v3_add(o, v3_scale(dir, hi))), flo = -1.0;
  for (;;) {
    double r = hi - fmax(0.5 * fhi, 0.0008);
    if (r <= 0.0) {
      flo = demo_field(o); /* the origin is inside the head */
      break;
    }
    double fr = demo_field(v3_add(o, v3_scale(dir, r)));
    if (fr < 0.0) {
      lo = r;
      flo = fr;
      break;
    }
    hi = r;
    fhi = fr;
  }
  int side = 0;
  for (int i = 0; i < 60 && hi - lo > 1e-9; i++) {
    double r = hi - fhi * (hi - lo) / (fhi - flo);
    if (!(r > lo && r < hi)) r = 0.5 * (lo + hi);
    double fr = demo_field(v3_add(o, v3_scale(dir, r)));
    if (fr < 0.0) {
      lo = r;
      flo = fr;
      if (side < 0) fhi *= 0.5; /* the same end moved twice: pull the other one in */
      side = -1;
    } else {
      hi = r;
      fhi = fr;
      if (fr == 0.0) break;
      if (side > 0) flo *= 0.5;
      side = 1;
    }
  }
  return hi;
}

/* ---------------------------------------------------------------------------------------------
 * Icosphere
 */

typedef struct demo_sphere {
  uint32_t vertex_count, triangle_count;
  double *dirs;        /* 3 per vertex, unit length */
  uint32_t *triangles; /* 3 per triangle, counter-clockwise seen from outside */
} demo_sphere;

static void demo_sphere_fini(demo_sphere *s) {
  free(s->dirs);
  free(s->triangles);
  memset(s, 0, sizeof(*s));
}

/* Index of the midpoint vertex of edge (a, b), created on first use. The edge table is open
 * addressing keyed by the ordered pair; creation order follows the triangle order, so vertex
 * numbering is deterministic. */
static uint32_t demo_midpoint(demo_sphere *s, uint64_t *keys, uint32_t *vals, uint32_t mask,
                              uint32_t a, uint32_t b) {
  uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
  uint64_t key = ((uint64_t)lo << 32 | hi) + 1; /* +1: 0 marks an empty slot */
  uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & mask;
  while (keys[h] != 0) {
    if (keys[h] == key) return vals[h];
    h = (h + 1) & mask;
  }
  uint32_t v = s->vertex_count++;
  const double *pa = s->dirs + 3 * (size_t)a, *pb = s->dirs + 3 * (size_t)b;
  /* (a + b) / |a + b| is exactly mirror-symmetric: negation commutes with every rounding. */
  demo_v3 m = v3_unit(v3(pa[0] + pb[0], pa[1] + pb[1], pa[2] + pb[2]));
  s->dirs[3 * (size_t)v + 0] = m.x;
  s->dirs[3 * (size_t)v + 1] = m.y;
  s->dirs[3 * (size_t)v + 2] = m.z;
  keys[h] = key;
  vals[h] = v;
  return v;
}

/* Builds the unit icosphere subdivided `level` times. The base vertex set (0,±1,±φ),
 * (±1,±φ,0), (±φ,0,±1) is symmetric under x -> -x and midpoint subdivision keeps it so.
 * Returns 0 or MESH_ENOMEM. */
static int demo_sphere_init(demo_sphere *s, int level) {
  static const double phi = 1.6180339887498948482;
  static const double base[12][3] = {
      {-1, phi, 0}, {1, phi, 0}, {-1, -phi, 0}, {1, -phi, 0}, {0, -1, phi}, {0, 1, phi},
      {0, -1, -phi}, {0, 1, -phi}, {phi, 0, -1}, {phi, 0, 1}, {-phi, 0, -1}, {-phi, 0, 1}};
  static const uint32_t faces[20][3] = {
      {0, 11, 5}, {0, 5, 1}, {0, 1, 7}, {0, 7, 10}, {0, 10, 11}, {1, 5, 9}, {5, 11, 4},
      {11, 10, 2}, {10, 7, 6}, {7, 1, 8}, {3, 9, 4}, {3, 4, 2}, {3, 2, 6}, {3, 6, 8},
      {3, 8, 9}, {4, 9, 5}, {2, 4, 11}, {6, 2, 10}, {8, 6, 7}, {9, 8, 1}};
  uint32_t final_v = 10u * (1u << (2 * level)) + 2u;
  uint32_t final_t = 20u * (1u << (2 * level));
  uint32_t *tmp = NULL;
  uint64_t *keys = NULL;
  uint32_t *vals = NULL;
  int rc = MESH_ENOMEM;

  memset(s, 0, sizeof(*s));
  s->dirs = malloc(sizeof(double) * 3 * final_v);
  s->triangles = malloc(sizeof(uint32_t) * 3 * final_t);
  tmp = malloc(sizeof(uint32_t) * 3 * final_t);
  /* The last split creates one midpoint per edge of the level before: 30 * 4^(level-1) edges.
   * The table holds twice that, rounded up to a power of two, so probes stay short. */
  uint32_t edges = level > 0 ? 30u << (2 * (level - 1)) : 0;
  uint32_t slots = 64;
  while (slots < 2u * edges) slots <<= 1;
  keys = malloc(sizeof(uint64_t) * slots);
  vals = malloc(sizeof(uint32_t) * slots);
  if (!s->dirs || !s->triangles || !tmp || !keys || !vals) goto fail;

  for (int i = 0; i < 12; i++) {
    demo_v3 d = v3_unit(v3(base[i][0], base[i][1], base[i][2]));
    s->dirs[3 * i + 0] = d.x;
    s->dirs[3 * i + 1] = d.y;
    s->dirs[3 * i + 2] = d.z;
  }
  s->vertex_count = 12;
  for (int f = 0; f < 20; f++) {
    /* Orient each base face outwards, whatever the table's winding. */
    const double *a = base[faces[f][0]], *b = base[faces[f][1]], *c = base[faces[f][2]];
    demo_v3 e1 = v3(b[0] - a[0], b[1] - a[1], b[2] - a[2]);
    demo_v3 e2 = v3(c[0] - a[0], c[1] - a[1], c[2] - a[2]);
    demo_v3 n = v3(e1.y * e2.z - e1.z * e2.y, e1.z * e2.x - e1.x * e2.z,
                   e1.x * e2.y - e1.y * e2.x);
    int flip = v3_dot(n, v3(a[0] + b[0] + c[0], a[1] + b[1] + c[1], a[2] + b[2] + c[2])) < 0;
    s->triangles[3 * f + 0] = faces[f][0];
    s->triangles[3 * f + 1] = faces[f][flip ? 2 : 1];
    s->triangles[3 * f + 2] = faces[f][flip ? 1 : 2];
  }
  s->triangle_count = 20;

  for (int l = 0; l < level; l++) {
    memset(keys, 0, sizeof(uint64_t) * slots);
    uint32_t n = 0;
    for (uint32_t t = 0; t < s->triangle_count; t++) {
      uint32_t a = s->triangles[3 * t], b = s->triangles[3 * t + 1], c = s->triangles[3 * t + 2];
      uint32_t ab = demo_midpoint(s, keys, vals, slots - 1, a, b);
      uint32_t bc = demo_midpoint(s, keys, vals, slots - 1, b, c);
      uint32_t ca = demo_midpoint(s, keys, vals, slots - 1, c, a);
      const uint32_t sub[4][3] = {{a, ab, ca}, {ab, b, bc}, {ca, bc, c}, {ab, bc, ca}};
      memcpy(tmp + 3 * (size_t)n, sub, sizeof(sub));
      n += 4;
    }
    memcpy(s->triangles, tmp, sizeof(uint32_t) * 3 * n);
    s->triangle_count = n;
  }
  rc = 0;
  goto done;
fail:
  demo_sphere_fini(s);
done:
  free(vals);
  free(keys);
  free(tmp);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Blendshapes: displacement fields of the rest position. The _L versions move the character's
 * left (+X); _R versions are their mirrors. Each returns exactly zero outside its support.
 */

static const demo_v3 demo_zero = {0.0, 0.0, 0.0};

/* The lower face rotates about a hinge axis just in front of the ears. The weight follows the
 * elevation around the hinge: the lower lip and everything below the mouth line move fully, the
 * upper lip not at all, with a wider blend across the cheeks so they stretch instead of
 * creasing; the neck and everything behind the hinge stay put. */
static const demo_v3 demo_hinge = {0.0, -0.008, 0.010};

/* How much of the jaw's motion a point takes (0 .. 1): see demo_jaw_open. */
static double demo_jaw_weight(demo_v3 p) {
  const demo_v3 hinge = demo_hinge;
  double ax = fabs(p.x);
  double elev = atan2(p.y - hinge.y, p.z - hinge.z);
  double mouth = atan2(DEMO_MOUTH_Y - hinge.y, 0.095 - hinge.z);
  double lat = demo_smoothstep(0.020, 0.048, ax);
  double hi = mouth + (1.5 + 13.0 * lat) * DEMO_DEG;
  double lo = mouth - (2.5 + 13.0 * lat) * DEMO_DEG;
  double w = demo_smoothstep(hi, lo, elev);
  w *= demo_smoothstep(hinge.z, hinge.z + 0.035, p.z);
  w *= demo_smoothstep(-0.150, -0.105, p.y);
  return w;
}

static demo_v3 demo_jaw_open(demo_v3 p) {
  const double angle = 0.15; /* rad: the chin moves about 1.8 cm */
  double w = demo_jaw_weight(p);
  if (w == 0.0) return demo_zero;
  demo_v3 q = demo_rotate(p, demo_hinge, v3(1, 0, 0), angle * w);
  return v3_sub(q, p);
}

/* Mouth corner pulled up, out and back, lifting the cheek above it. */
static demo_v3 demo_smile(demo_v3 p) {
  const demo_v3 corner = {DEMO_MOUTH_X, DEMO_MOUTH_Y, 0.086};
  double w = demo_bell3(p, corner, v3(0.020, 0.020, 0.030));
  double wc = demo_bell3(p, v3(0.038, -0.030, 0.070), v3(0.022, 0.018, 0.030));
  if (w == 0.0 && wc == 0.0) return demo_zero;
  demo_v3 d = v3_scale(v3_unit(v3(0.45, 0.80, -0.30)), 0.007 * w);
  return v3_add(d, v3_scale(v3(0.0, 1.0, 0.25), 0.0025 * wc));
}

/* Mouth corner pulled down and slightly out. */
static demo_v3 demo_frown(demo_v3 p) {
  const demo_v3 corner = {DEMO_MOUTH_X, DEMO_MOUTH_Y, 0.086};
  double w = demo_bell3(p, v3(corner.x + 0.001, corner.y - 0.002, corner.z),
                        v3(0.018, 0.022, 0.030));
  if (w == 0.0) return demo_zero;
  return v3_scale(v3_unit(v3(0.15, -1.0, -0.05)), 0.006 * w);
}

/* Keeps brow shapes off the eye itself: 0 at the upper lid, 1 from the top of the socket. */
static double demo_above_eye(demo_v3 p) {
  return demo_smoothstep(DEMO_EYE_Y + 0.008, DEMO_EYE_Y + 0.020, p.y);
}

/* Brow raised: the whole brow slides up, most at its middle, less on the forehead above. */
static demo_v3 demo_brow_up(demo_v3 p) {
  double w = demo_bell3(p, v3(0.032, 0.036, 0.088), v3(0.032, 0.034, 0.045));
  w *= demo_above_eye(p);
  if (w == 0.0) return demo_zero;
  return v3_scale(v3(0.0, 1.0, 0.12), 0.006 * w);
}

/* Brow lowered and drawn towards the nose, most at its inner end. */
static demo_v3 demo_brow_down(demo_v3 p) {
  double w = demo_bell3(p, v3(0.022, 0.032, 0.090), v3(0.028, 0.026, 0.040));
  w *= demo_above_eye(p);
  if (w == 0.0) return demo_zero;
  return v3_scale(v3_unit(v3(-0.35, -1.0, 0.15)), 0.0045 * w);
}

/* Upper lid closes: points around the eye rotate about a horizontal axis through the eyeball's
 * centre, so the lid slides down over the ball instead of cutting into it. The lid edge turns
 * down to just above the lower lid; above it the turn fades out towards the brow, below it the
 * exposed eyeball is squeezed into the gap that is left. */
static demo_v3 demo_blink(demo_v3 p) {
  const demo_v3 e = {DEMO_EYE_X, DEMO_EYE_Y, DEMO_EYE_Z};
  double rho = sqrt((p.y - e.y) * (p.y - e.y) + (p.z - e.z) * (p.z - e.z));
  double w = demo_bell(fabs(p.x - e.x) / 0.024) * demo_smoothstep(0.022, 0.0165, rho);
  if (w == 0.0 || p.z <= e.z) return demo_zero;
  const double lid_r = DEMO_EYE_R + DEMO_LID_T;
  double a = atan2(p.y - e.y, p.z - e.z);
  double edge = asin(demo_lid_upper(p.x) / lid_r);  /* upper lid edge at this x */
  double low = asin(demo_lid_lower(p.x) / lid_r);   /* lower lid edge */
  const double top = 45.0 * DEMO_DEG;               /* fold under the brow */
  double shut = 0.85 * (edge - low);                /* lid edge ends just above the lower lid */
  double turn;
  /* A positive turn about +X carries the front of the eye downwards. */
  if (a >= edge)
    turn = shut * demo_smoothstep(top, edge, a);
  else if (a > low)
    turn = shut * (a - low) / (edge - low);
  else
    turn = 0.0;
  if (turn == 0.0) return demo_zero;
  demo_v3 q = demo_rotate(p, e, v3(1, 0, 0), turn * w);
  return v3_sub(q, p);
}

/* Both cheeks pushed out along the surface normal. */
static demo_v3 demo_cheek_puff(demo_v3 p) {
  demo_v3 q = v3(fabs(p.x), p.y, p.z);
  double w = demo_bell3(q, v3(0.042, -0.046, 0.062), v3(0.026, 0.026, 0.035));
  if (w == 0.0) return demo_zero;
  return v3_scale(demo_field_normal(p), 0.007 * w);
}

/* Nostril wings pushed apart; the tip and bridge stay. */
static demo_v3 demo_nose_wide(demo_v3 p) {
  demo_v3 q = v3(fabs(p.x), p.y, p.z);
  double w = demo_bell3(q, v3(0.015, -0.026, 0.095), v3(0.012, 0.012, 0.014));
  if (w == 0.0) return demo_zero;
  return v3(copysign(0.0035 * w, p.x), 0.0, 0.0);
}

/* Lips pushed forward and gathered towards the middle. */
static demo_v3 demo_lip_pucker(demo_v3 p) {
  double w = demo_bell3(p, v3(0.0, DEMO_MOUTH_Y, 0.092), v3(0.034, 0.024, 0.032));
  if (w == 0.0) return demo_zero;
  return v3(-0.2 * p.x * w, 0.0, 0.006 * w);
}

/* The mouth slides towards the character's left, following the curve of the face: a turn about
 * a vertical axis behind the mouth. */
static demo_v3 demo_mouth_left(demo_v3 p) {
  double w = demo_bell3(p, v3(0.0, DEMO_MOUTH_Y, 0.090), v3(0.045, 0.030, 0.050));
  if (w == 0.0) return demo_zero;
  demo_v3 q = demo_rotate(p, v3(0.0, 0.0, 0.0), v3(0, 1, 0), 0.065 * w);
  return v3_sub(q, p);
}

/* ---------------------------------------------------------------------------------------------
 * ARKit's 52 blendshapes (ARFaceAnchor.BlendShapeLocation), so a phone drives the head with no
 * mapping. The head is one closed surface with no eyeballs to turn and no mouth cavity or tongue:
 * the eye-look shapes move the lids the way they follow a gaze, and tongueOut parts the lips. "Left"
 * is the character's left (+X), as in ARKit; each Right shape is its Left twin's mirror. Several
 * reuse a shape above unchanged (jawOpen is jaw_open, eyeBlinkLeft is blink_L, ...).
 */

/* The lids turned about the eyeball's centre, as demo_blink turns them: `upper` at and above the
 * upper lid's edge (fading out towards the brow), `lower` at and below the lower lid's edge
 * (fading out towards the cheek), in between a linear blend; positive turns carry the front of the
 * eye downwards. Amounts are fractions of a blink's full turn. */
static demo_v3 demo_lids(demo_v3 p, double upper, double lower) {
  const demo_v3 e = {DEMO_EYE_X, DEMO_EYE_Y, DEMO_EYE_Z};
  double rho = sqrt((p.y - e.y) * (p.y - e.y) + (p.z - e.z) * (p.z - e.z));
  double w = demo_bell(fabs(p.x - e.x) / 0.024) * demo_smoothstep(0.022, 0.0165, rho);
  if (w == 0.0 || p.z <= e.z) return demo_zero;
  const double lid_r = DEMO_EYE_R + DEMO_LID_T;
  double a = atan2(p.y - e.y, p.z - e.z);
  double edge = asin(demo_lid_upper(p.x) / lid_r), low = asin(demo_lid_lower(p.x) / lid_r);
  double shut = 0.85 * (edge - low), turn;
  if (a >= edge) turn = upper * shut * demo_smoothstep(45.0 * DEMO_DEG, edge, a);
  else if (a > low) turn = shut * (lower + (upper - lower) * (a - low) / (edge - low));
  else turn = lower * shut * demo_smoothstep(-45.0 * DEMO_DEG, low, a);
  if (turn == 0.0) return demo_zero;
  return v3_sub(demo_rotate(p, e, v3(1, 0, 0), turn * w), p);
}

static demo_v3 demo_eye_look_down(demo_v3 p) { return demo_lids(p, 0.35, 0.25); }
static demo_v3 demo_eye_look_up(demo_v3 p) { return demo_lids(p, -0.2, -0.15); }
static demo_v3 demo_eye_squint(demo_v3 p) { return demo_lids(p, 0.1, -0.3); }
static demo_v3 demo_eye_wide(demo_v3 p) { return demo_lids(p, -0.25, 0.1); }

/* The lids and the skin round the eye turned about a vertical axis through the eyeball's centre,
 * as they follow the gaze sideways: `angle` > 0 towards +X on the front of the eye. */
static demo_v3 demo_eye_side(demo_v3 p, double angle) {
  const demo_v3 e = {DEMO_EYE_X, DEMO_EYE_Y, DEMO_EYE_Z};
  double w = demo_bell3(p, e, v3(0.020, 0.018, 0.022));
  if (w == 0.0 || p.z <= e.z) return demo_zero;
  return v3_sub(demo_rotate(p, e, v3(0, 1, 0), angle * w), p);
}
static demo_v3 demo_eye_look_in(demo_v3 p) { return demo_eye_side(p, -0.18); }
static demo_v3 demo_eye_look_out(demo_v3 p) { return demo_eye_side(p, 0.18); }

/* The lower face slid forward, or turned towards +X about a vertical axis behind the mouth. */
static demo_v3 demo_jaw_forward(demo_v3 p) {
  double w = demo_jaw_weight(p);
  return w == 0.0 ? demo_zero : v3(0.0, 0.0, 0.004 * w);
}
static demo_v3 demo_jaw_left(demo_v3 p) {
  double w = demo_jaw_weight(p);
  if (w == 0.0) return demo_zero;
  return v3_sub(demo_rotate(p, v3(0.0, -0.06, 0.0), v3(0, 1, 0), 0.06 * w), p);
}

/* Points within `r` of `c` drawn towards the lips' crease (y = DEMO_MOUTH_Y) by up to `k` of their
 * height above or below it; k < 0.5 keeps the map one-to-one (the bell's slope is bounded). */
static demo_v3 demo_lips_press(demo_v3 p, demo_v3 c, demo_v3 r, double k) {
  double w = demo_bell3(p, c, r);
  return w == 0.0 ? demo_zero : v3(0.0, -k * w * (p.y - DEMO_MOUTH_Y), 0.0);
}
static demo_v3 demo_mouth_close(demo_v3 p) {
  return demo_lips_press(p, v3(0.0, DEMO_MOUTH_Y, 0.088), v3(0.030, 0.016, 0.025), 0.35);
}
static demo_v3 demo_mouth_press(demo_v3 p) {
  return demo_lips_press(p, v3(0.012, DEMO_MOUTH_Y, 0.088), v3(0.018, 0.014, 0.022), 0.3);
}

/* The lips pushed forward into an O: forward, a little together, and apart vertically. */
static demo_v3 demo_mouth_funnel(demo_v3 p) {
  double w = demo_bell3(p, v3(0.0, DEMO_MOUTH_Y, 0.090), v3(0.030, 0.022, 0.030));
  if (w == 0.0) return demo_zero;
  return v3(-0.1 * p.x * w, 0.2 * w * (p.y - DEMO_MOUTH_Y), 0.005 * w);
}

/* A bell at `c` with radii `r` moving its points by `d`. */
static demo_v3 demo_push(demo_v3 p, demo_v3 c, demo_v3 r, demo_v3 d) {
  double w = demo_bell3(p, c, r);
  return w == 0.0 ? demo_zero : v3_scale(d, w);
}

static const demo_v3 demo_corner = {DEMO_MOUTH_X, DEMO_MOUTH_Y, 0.086};
static demo_v3 demo_mouth_dimple(demo_v3 p) {
  return demo_push(p, demo_corner, v3(0.015, 0.015, 0.022), v3_scale(v3_unit(v3(0.3, 0.0, -1.0)), 0.004));
}
static demo_v3 demo_mouth_stretch(demo_v3 p) {
  return demo_push(p, demo_corner, v3(0.018, 0.018, 0.026), v3_scale(v3_unit(v3(1.0, -0.5, -0.2)), 0.005));
}
static demo_v3 demo_mouth_roll_lower(demo_v3 p) {
  return demo_push(p, v3(0.0, -0.066, 0.088), v3(0.025, 0.008, 0.012), v3(0.0, 0.0015, -0.004));
}
static demo_v3 demo_mouth_roll_upper(demo_v3 p) {
  return demo_push(p, v3(0.0, -0.053, 0.090), v3(0.025, 0.008, 0.012), v3(0.0, -0.0015, -0.004));
}
static demo_v3 demo_mouth_shrug_lower(demo_v3 p) {
  return demo_push(p, v3(0.0, -0.072, 0.085), v3(0.028, 0.016, 0.020), v3(0.0, 0.004, 0.002));
}
static demo_v3 demo_mouth_shrug_upper(demo_v3 p) {
  return demo_push(p, v3(0.0, -0.052, 0.088), v3(0.026, 0.010, 0.015), v3(0.0, 0.003, 0.001));
}
static demo_v3 demo_mouth_lower_down(demo_v3 p) {
  return demo_push(p, v3(0.010, -0.067, 0.087), v3(0.016, 0.010, 0.015), v3(0.0, -0.004, 0.0));
}
static demo_v3 demo_mouth_upper_up(demo_v3 p) {
  return demo_push(p, v3(0.010, -0.052, 0.088), v3(0.016, 0.010, 0.015), v3(0.0, 0.003, 0.0));
}

/* Brows: both inner ends raised (mirror-symmetric through |x|), or the outer end of one. */
static demo_v3 demo_brow_inner_up(demo_v3 p) {
  double w = demo_bell3(v3(fabs(p.x), p.y, p.z), v3(0.012, 0.036, 0.090), v3(0.022, 0.030, 0.040));
  w *= demo_above_eye(p);
  return w == 0.0 ? demo_zero : v3(0.0, 0.005 * w, 0.0006 * w);
}
static demo_v3 demo_brow_outer_up(demo_v3 p) {
  double w = demo_bell3(p, v3(0.046, 0.034, 0.075), v3(0.022, 0.030, 0.040));
  w *= demo_above_eye(p);
  return w == 0.0 ? demo_zero : v3(0.0, 0.005 * w, 0.0006 * w);
}

/* The cheek raised towards the eye, kept below the lower lid. */
static demo_v3 demo_cheek_squint(demo_v3 p) {
  double w = demo_bell3(p, v3(0.040, -0.012, 0.068), v3(0.020, 0.018, 0.025));
  w *= demo_smoothstep(DEMO_EYE_Y - 0.004, DEMO_EYE_Y - 0.014, p.y);
  return w == 0.0 ? demo_zero : v3(0.0, 0.003 * w, 0.001 * w);
}

/* A nostril wing and the skin beside the nose raised. */
static demo_v3 demo_nose_sneer(demo_v3 p) {
  return demo_push(p, v3(0.013, -0.020, 0.092), v3(0.012, 0.016, 0.016), v3(0.0, 0.003, 0.0005));
}

/* No tongue to put out: the jaw drops a little and the lower lip comes forward, parting the lips. */
static demo_v3 demo_tongue_out(demo_v3 p) {
  demo_v3 j = v3_scale(demo_jaw_open(p), 0.3);
  return v3_add(j, demo_push(p, v3(0.0, -0.068, 0.087), v3(0.022, 0.010, 0.014), v3(0.0, -0.001, 0.002)));
}

typedef demo_v3 (*demo_shape_fn)(demo_v3 p);

static const struct {
  const char *name;
  demo_shape_fn fn;
  int mirror; /* evaluate as M·fn(M·p) */
} demo_shapes[] = {
    {"jaw_open", demo_jaw_open, 0},    {"smile_L", demo_smile, 0},
    {"smile_R", demo_smile, 1},        {"frown_L", demo_frown, 0},
    {"frown_R", demo_frown, 1},        {"brow_up_L", demo_brow_up, 0},
    {"brow_up_R", demo_brow_up, 1},    {"brow_down_L", demo_brow_down, 0},
    {"brow_down_R", demo_brow_down, 1}, {"blink_L", demo_blink, 0},
    {"blink_R", demo_blink, 1},        {"cheek_puff", demo_cheek_puff, 0},
    {"nose_wide", demo_nose_wide, 0},  {"lip_pucker", demo_lip_pucker, 0},
    {"mouth_left", demo_mouth_left, 0}, {"mouth_right", demo_mouth_left, 1},
    /* ARKit's 52, in ARFaceAnchor's order (Live Link Face sends them so) */
    {"eyeBlinkLeft", demo_blink, 0},             {"eyeLookDownLeft", demo_eye_look_down, 0},
    {"eyeLookInLeft", demo_eye_look_in, 0},      {"eyeLookOutLeft", demo_eye_look_out, 0},
    {"eyeLookUpLeft", demo_eye_look_up, 0},      {"eyeSquintLeft", demo_eye_squint, 0},
    {"eyeWideLeft", demo_eye_wide, 0},           {"eyeBlinkRight", demo_blink, 1},
    {"eyeLookDownRight", demo_eye_look_down, 1}, {"eyeLookInRight", demo_eye_look_in, 1},
    {"eyeLookOutRight", demo_eye_look_out, 1},   {"eyeLookUpRight", demo_eye_look_up, 1},
    {"eyeSquintRight", demo_eye_squint, 1},      {"eyeWideRight", demo_eye_wide, 1},
    {"jawForward", demo_jaw_forward, 0},         {"jawLeft", demo_jaw_left, 0},
    {"jawRight", demo_jaw_left, 1},              {"jawOpen", demo_jaw_open, 0},
    {"mouthClose", demo_mouth_close, 0},         {"mouthFunnel", demo_mouth_funnel, 0},
    {"mouthPucker", demo_lip_pucker, 0},         {"mouthLeft", demo_mouth_left, 0},
    {"mouthRight", demo_mouth_left, 1},          {"mouthSmileLeft", demo_smile, 0},
    {"mouthSmileRight", demo_smile, 1},          {"mouthFrownLeft", demo_frown, 0},
    {"mouthFrownRight", demo_frown, 1},          {"mouthDimpleLeft", demo_mouth_dimple, 0},
    {"mouthDimpleRight", demo_mouth_dimple, 1},  {"mouthStretchLeft", demo_mouth_stretch, 0},
    {"mouthStretchRight", demo_mouth_stretch, 1}, {"mouthRollLower", demo_mouth_roll_lower, 0},
    {"mouthRollUpper", demo_mouth_roll_upper, 0}, {"mouthShrugLower", demo_mouth_shrug_lower, 0},
    {"mouthShrugUpper", demo_mouth_shrug_upper, 0}, {"mouthPressLeft", demo_mouth_press, 0},
    {"mouthPressRight", demo_mouth_press, 1},    {"mouthLowerDownLeft", demo_mouth_lower_down, 0},
    {"mouthLowerDownRight", demo_mouth_lower_down, 1}, {"mouthUpperUpLeft", demo_mouth_upper_up, 0},
    {"mouthUpperUpRight", demo_mouth_upper_up, 1}, {"browDownLeft", demo_brow_down, 0},
    {"browDownRight", demo_brow_down, 1},        {"browInnerUp", demo_brow_inner_up, 0},
    {"browOuterUpLeft", demo_brow_outer_up, 0},  {"browOuterUpRight", demo_brow_outer_up, 1},
    {"cheekPuff", demo_cheek_puff, 0},           {"cheekSquintLeft", demo_cheek_squint, 0},
    {"cheekSquintRight", demo_cheek_squint, 1},  {"noseSneerLeft", demo_nose_sneer, 0},
    {"noseSneerRight", demo_nose_sneer, 1},      {"tongueOut", demo_tongue_out, 0},
};

/* ---------------------------------------------------------------------------------------------
 * Assembly
 */

/* Cylindrical u in [0, 1]: 0.5 in front (+Z), the seam behind the head. A vertex exactly on the
 * seam (x = +0, z < 0) gets u = 1. */
static double demo_u(const float *p) {
  return 0.5 + atan2((double)p[0], (double)p[2]) / (2.0 * DEMO_PI);
}

/* The corners of sphere triangle t that must use their seam twin: tri[k] is UINT32_MAX for a
 * corner that keeps its own vertex, anything else for one that moves to the twin. */
static void demo_seam_corners(const demo_sphere *s, const float *pos, const double *us,
                              uint32_t t, uint32_t tri[3]) {
  const uint32_t *c = s->triangles + 3 * (size_t)t;
  double umin = fmin(us[c[0]], fmin(us[c[1]], us[c[2]]));
  double umax = fmax(us[c[0]], fmax(us[c[1]], us[c[2]]));
  double cx = (double)pos[3 * (size_t)c[0]] + pos[3 * (size_t)c[1]] + pos[3 * (size_t)c[2]];
  for (int k = 0; k < 3; k++) {
    int move = umax - umin > 0.5 && (cx >= 0.0 ? us[c[k]] < 0.5 : us[c[k]] >= 0.5);
    tri[k] = move ? 0 : UINT32_MAX;
  }
}

int mesh_demo_head(mesh **out) {
  demo_sphere s;
  mesh *m = NULL;
  float *pos = NULL;    /* per sphere vertex: rest position */
  double *us = NULL;    /* per sphere vertex: u before seam handling */
  uint32_t *dup = NULL; /* per sphere vertex: its seam twin, or UINT32_MAX */
  float *dense = NULL;
  mesh_topology topo;
  int rc;

  *out = NULL;
  rc = demo_sphere_init(&s, DEMO_LEVEL);
  if (rc) return rc;
  rc = MESH_ENOMEM;
  m = mesh_create();
  if (!m) goto fail_sphere;
  pos = malloc(sizeof(float) * 3 * (size_t)s.vertex_count);
  if (!pos) goto fail_mesh;
  us = malloc(sizeof(double) * s.vertex_count);
  if (!us) goto fail_pos;
  dup = malloc(sizeof(uint32_t) * s.vertex_count);
  if (!dup) goto fail_us;

  for (uint32_t v = 0; v < s.vertex_count; v++) {
    demo_v3 d = demo_warp(v3(s.dirs[3 * v], s.dirs[3 * v + 1], s.dirs[3 * v + 2]));
    demo_v3 o = demo_ray_origin(d);
    demo_v3 p = v3_add(o, v3_scale(d, demo_radius(o, d)));
    pos[3 * v + 0] = (float)p.x + 0.0f; /* + 0.0f: a -0 on the mirror plane becomes +0 */
    pos[3 * v + 1] = (float)p.y;
    pos[3 * v + 2] = (float)p.z;
    us[v] = demo_u(pos + 3 * v);
    dup[v] = UINT32_MAX;
  }

  /* A triangle straddles the seam when its u values span more than half the circle. It keeps
   * the side of its centroid: on the +X side its low-u corners use a twin at u + 1, on the -X
   * side its high-u corners use a twin at u - 1. A vertex is either low or high, so it needs at
   * most one twin; twins are numbered after the sphere vertices in order of first use. */
  uint32_t nv = s.vertex_count;
  for (uint32_t t = 0; t < s.triangle_count; t++) {
    uint32_t tri[3];
    demo_seam_corners(&s, pos, us, t, tri);
    for (int k = 0; k < 3; k++) {
      if (tri[k] == UINT32_MAX) continue;
      uint32_t v = s.triangles[3 * (size_t)t + k];
      if (dup[v] == UINT32_MAX) dup[v] = nv++;
    }
  }

  rc = mesh_alloc(m, nv, s.triangle_count, 1, 1);
  if (rc) goto fail_dup;
  rc = MESH_ENOMEM;
  memcpy(m->positions, pos, sizeof(float) * 3 * (size_t)s.vertex_count);
  for (uint32_t v = 0; v < s.vertex_count; v++) {
    m->uvs[2 * (size_t)v] = (float)us[v];
    if (dup[v] == UINT32_MAX) continue;
    memcpy(m->positions + 3 * (size_t)dup[v], pos + 3 * (size_t)v, sizeof(float) * 3);
    m->uvs[2 * (size_t)dup[v]] = (float)(us[v] < 0.5 ? us[v] + 1.0 : us[v] - 1.0);
  }
  for (uint32_t t = 0; t < s.triangle_count; t++) {
    uint32_t tri[3];
    demo_seam_corners(&s, pos, us, t, tri);
    for (int k = 0; k < 3; k++) {
      uint32_t v = s.triangles[3 * (size_t)t + k];
      m->triangles[3 * (size_t)t + k] = tri[k] == UINT32_MAX ? v : dup[v];
    }
  }
  mesh_update_bounds(m);
  {
    double y0 = m->bbox_min[1], y1 = m->bbox_max[1];
    for (uint32_t v = 0; v < nv; v++) {
      double y = m->positions[3 * (size_t)v + 1];
      m->uvs[2 * (size_t)v + 1] = (float)((y - y0) / (y1 - y0));
    }
  }

  m->submeshes = calloc(1, sizeof(*m->submeshes));
  if (!m->submeshes) goto fail_dup;
  m->submesh_count = 1;
  m->submeshes[0].name = mesh__strdup("head");
  if (!m->submeshes[0].name) goto fail_dup;
  m->submeshes[0].triangle_count = m->triangle_count;
  m->submeshes[0].vertex_count = m->vertex_count;

  /* Each target is a field of the stored (float) rest position, so seam twins agree and
   * mirrored vertices get mirrored deltas. */
  dense = malloc(sizeof(float) * 3 * (size_t)nv);
  if (!dense) goto fail_dup;
  for (size_t i = 0; i < sizeof(demo_shapes) / sizeof(demo_shapes[0]); i++) {
    for (uint32_t v = 0; v < nv; v++) {
      const float *pf = m->positions + 3 * (size_t)v;
      demo_v3 d;
      if (demo_shapes[i].mirror) {
        d = demo_shapes[i].fn(v3(-(double)pf[0], pf[1], pf[2]));
        d.x = -d.x;
      } else {
        d = demo_shapes[i].fn(v3(pf[0], pf[1], pf[2]));
      }
      dense[3 * (size_t)v + 0] = (float)d.x;
      dense[3 * (size_t)v + 1] = (float)d.y;
      dense[3 * (size_t)v + 2] = (float)d.z;
    }
    rc = mesh_add_target_dense(m, demo_shapes[i].name, dense, 0.0f);
    if (rc) goto fail_dense;
  }

  rc = mesh_topology_init(&topo, m, NULL, 0);
  if (rc) goto fail_dense;
  mesh_compute_normals(m, &topo, NULL, MESH_NORMALS_ANGLE, m->normals);
  mesh_topology_fini(&topo);

  free(dense);
  free(dup);
  free(us);
  free(pos);
  demo_sphere_fini(&s);
  *out = m;
  return 0;

fail_dense:
  free(dense);
fail_dup:
  free(dup);
fail_us:
  free(us);
fail_pos:
  free(pos);
fail_mesh:
  mesh_destroy(m);
fail_sphere:
  demo_sphere_fini(&s);
  return rc;
}

int mesh_demo_icosphere(uint32_t levels, double radius, mesh **out) {
  *out = NULL;
  if (levels > 10) return MESH_EINVAL;
  demo_sphere sp;
  int rc = demo_sphere_init(&sp, (int)levels);
  if (rc) return rc;
  mesh *m = mesh_create();
  if (!m || mesh_alloc(m, sp.vertex_count, sp.triangle_count, 0, 0) != 0) {
    mesh_destroy(m);
    demo_sphere_fini(&sp);
    return MESH_ENOMEM;
  }
  for (size_t i = 0; i < 3 * (size_t)sp.vertex_count; i++) m->positions[i] = (float)(radius * sp.dirs[i]);
  memcpy(m->triangles, sp.triangles, sizeof(uint32_t) * 3 * sp.triangle_count);
  demo_sphere_fini(&sp);
  m->submeshes = calloc(1, sizeof(mesh_submesh));
  if (!m->submeshes || !(m->submeshes[0].name = mesh__strdup("icosphere"))) {
    mesh_destroy(m);
    return MESH_ENOMEM;
  }
  m->submesh_count = 1;
  m->submeshes[0].vertex_count = m->vertex_count;
  m->submeshes[0].triangle_count = m->triangle_count;
  mesh_update_bounds(m);
  *out = m;
  return 0;
}
