/*
 * bench_solve.c — `deform-bench solve` and `deform-bench brush`: the deformation engine timed
 * on its own, in process (no server, no network), the way a gesture uses it.
 *
 *   deform-bench solve MESH --mode arap --roi N --iters K --drags D [--handle H]
 *                      [--factor auto|simplicial|supernodal] [--gestures G] [--reserve-mb R]
 *                      [--border smooth|sharp] [--sweeps auto|double|float] [--compare-sweeps]
 *                      [--multires [--proxy N] [--no-exact] [--kept-proxy on|off]] [--subdivide L] [--mesh-order auto|on|off] [--mesh-symbolic on|off] [--json]
 *   deform-bench brush MESH --brush KIND --touch N --samples S [--strength W] [--guard] [--per-call K]
 *                      [--falloff F] [--mirror] [--json]
 *
 * MESH is a file (anything mesh_import reads) or a generated shape: icosphere:LEVEL
 * (10·4^LEVEL + 2 vertices) or grid:N (an (N+1)² vertex plane).
 *
 * solve: the handle is the H vertices (default 50) nearest the topmost vertex, the region the N
 * nearest by geodesic distance (0: the whole mesh; outside it everything is fixed). It times
 * dfm_system_create (weights, assembly, CHOLMOD analyse + factorise: "prefactor"; with G > 1,
 * G gestures in a row, the median of the later ones as "prefactor_next" and the parts of the
 * last) and D drags
 * (each a translation plus a small rotation of the handle; ARAP does K local/global iterations
 * per drag, warm-started from the previous one), and reports peak memory (ru_maxrss) and the
 * crease the last drag leaves: the largest change of the angle between the two triangles of
 * any edge, from the rest shape to the result. --border sharp solves without the smooth border
 * that deformd uses by default (dfm_params.smooth_border).
 * Before the first gesture it does what deformd does once a session is open:
 * dfm_memory_reserve(dfm_memory_estimate(V)), or R MiB with --reserve-mb (0: none, the cold
 * heap of a server started without it), and reports its time ("reserve_ms"); and, as deformd
 * does for a mesh of at least DFM_MESH_ORDER_MIN vertices (--mesh-order auto; on: any mesh; off:
 * none), the mesh's AMD order (dfm_mesh_order, "mesh_order_ms"), which whole-mesh gestures then
 * restrict instead of running AMD ("order":"mesh" against "amd"), and then its symbolic
 * analysis (dfm_mesh_symbolic, "mesh_symbolic_ms"; --mesh-symbolic off: not), which they copy
 * instead of analysing their own matrix ("symbolic":"mesh" against "own"; "mesh_symbolic_mb" the
 * memory it holds).
 * brush: S dabs along a short path (round a small circle, again and again), each with the radius
 * that touches about N vertices at its start and the weight W (0.2), one call each; reports the
 * time per dab and the vertices it moved. With --guard each call is given the shape before it as
 * its stroke's starting shape, so inflate, draw, crease and layer check for folds after it;
 * --per-call K applies K dabs per call, as a stroke (or a piece of one) does, and reports each
 * call's time divided by K (samples and moved then count calls).
 *
 * DOES NOT start a server: `deform-bench fanout` measures the network side.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"
#include "dfm.h"
#include "dfm_brush.h"
#include "mesh.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread): what a drag costs the cores, which other
 * tenants' load moves less than it moves wall time. */
static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static long peak_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double percentile(double *v, int n, double p) {
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  int i = (int)ceil(p * n) - 1;
  return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

/* A plane of (n+1)² vertices, spacing 1/n, split along one diagonal. */
static int grid_mesh(uint32_t n, mesh **out) {
  uint32_t side = n + 1;
  mesh *m = mesh_create();
  if (!m || mesh_alloc(m, side * side, 2 * n * n, 0, 0) != 0) {
    mesh_destroy(m);
    return MESH_ENOMEM;
  }
  for (uint32_t j = 0; j < side; j++)
    for (uint32_t i = 0; i < side; i++) {
      float *p = m->positions + 3 * (size_t)(j * side + i);
      p[0] = (float)i / (float)n, p[1] = (float)j / (float)n, p[2] = 0.0f;
    }
  uint32_t *t = m->triangles;
  for (uint32_t j = 0; j < n; j++)
    for (uint32_t i = 0; i < n; i++) {
      uint32_t a = j * side + i, b = a + 1, c = a + side + 1, d = a + side;
      *t++ = a, *t++ = b, *t++ = c, *t++ = a, *t++ = c, *t++ = d;
    }
  mesh_update_bounds(m);
  *out = m;
  return 0;
}

static int load_mesh(const char *spec, mesh **m, char *err, size_t errlen) {
  unsigned long v;
  char tail;
  if (sscanf(spec, "icosphere:%lu%c", &v, &tail) == 1) {
    int rc = mesh_demo_icosphere((uint32_t)v, 1.0, m);
    if (rc) snprintf(err, errlen, "icosphere:%lu: %s", v, mesh_strerror(rc));
    return rc;
  }
  if (sscanf(spec, "grid:%lu%c", &v, &tail) == 1) {
    if (v < 1 || v > 4000) {
      snprintf(err, errlen, "grid:N wants 1 <= N <= 4000");
      return MESH_EINVAL;
    }
    return grid_mesh((uint32_t)v, m);
  }
  return mesh_import(spec, NULL, m, err, errlen);
}

/* --subdivide: midpoint subdivision of the welded mesh, once per level: a vertex at the middle
 * of every edge, each triangle split in four (the shape is unchanged; the vertex count about
 * quadruples). Replaces *m. */
static int subdivide_mesh(mesh **m) {
  mesh_topology t;
  mesh_adjacency a;
  int rc = mesh_topology_init(&t, *m, NULL, 0);
  if (rc) return rc;
  rc = mesh_adjacency_init(&a, t.vertex_count, t.triangles, t.triangle_count);
  if (rc) {
    mesh_topology_fini(&t);
    return rc;
  }
  uint32_t n = t.vertex_count, ne = 0, *mid = malloc(sizeof(uint32_t) * ((size_t)a.vv_offsets[n] + 1));
  for (uint32_t v = 0; mid && v < n; v++)
    for (uint32_t e = a.vv_offsets[v]; e < a.vv_offsets[v + 1]; e++)
      if (a.vv[e] > v) mid[e] = n + ne++;
  mesh *out = mesh_create();
  rc = mid && out ? mesh_alloc(out, n + ne, 4 * t.triangle_count, 0, 0) : MESH_ENOMEM;
  for (uint32_t v = 0; rc == 0 && v < n; v++) {
    for (int k = 0; k < 3; k++) out->positions[3 * (size_t)v + k] = (float)t.positions[3 * (size_t)v + k];
    for (uint32_t e = a.vv_offsets[v]; e < a.vv_offsets[v + 1]; e++)
      for (int k = 0; k < 3 && a.vv[e] > v; k++)
        out->positions[3 * (size_t)mid[e] + k] = (float)(0.5 * (t.positions[3 * (size_t)v + k] + t.positions[3 * (size_t)a.vv[e] + k]));
  }
  for (uint32_t f = 0; rc == 0 && f < t.triangle_count; f++) {
    const uint32_t *c = t.triangles + 3 * (size_t)f;
    uint32_t e[3];
    for (int k = 0; k < 3; k++) {
      uint32_t x = c[k], y = c[(k + 1) % 3], lo = x < y ? x : y, hi = x < y ? y : x;
      e[k] = mid[mesh_adjacency_edge(&a, lo, hi)];
    }
    uint32_t q[12] = {c[0], e[0], e[2], e[0], c[1], e[1], e[2], e[1], c[2], e[0], e[1], e[2]};
    memcpy(out->triangles + 12 * (size_t)f, q, sizeof(q));
  }
  free(mid);
  mesh_adjacency_fini(&a);
  mesh_topology_fini(&t);
  if (rc) {
    mesh_destroy(out);
    return rc;
  }
  mesh_update_bounds(out);
  mesh_destroy(*m);
  *m = out;
  return 0;
}

/* What both subcommands share: the mesh, its topology and adjacency. */
typedef struct shape {
  mesh *m;
  mesh_topology t;
  mesh_adjacency a;
  double diag;
  uint32_t top; /* topology vertex with the largest y */
} shape;

static int shape_init(shape *s, const char *spec, int subdivide, char *err, size_t errlen) {
  memset(s, 0, sizeof(*s));
  int rc = load_mesh(spec, &s->m, err, errlen);
  if (rc) return rc;
  for (int i = 0; i < subdivide && rc == 0; i++) rc = subdivide_mesh(&s->m);
  rc = mesh_topology_init(&s->t, s->m, NULL, 0);
  if (rc == 0) rc = mesh_adjacency_init(&s->a, s->t.vertex_count, s->t.triangles, s->t.triangle_count);
  if (rc) {
    snprintf(err, errlen, "%s", mesh_strerror(rc));
    return rc;
  }
  s->diag = mesh_bbox_diagonal(s->m);
  for (uint32_t v = 1; v < s->t.vertex_count; v++)
    if (s->t.positions[3 * v + 1] > s->t.positions[3 * s->top + 1]) s->top = v;
  return 0;
}

static void shape_fini(shape *s) {
  mesh_adjacency_fini(&s->a);
  mesh_topology_fini(&s->t);
  mesh_destroy(s->m);
}

/* The crease a deformation leaves: the largest change, in degrees, of the angle between the
 * unit normals of two triangles that share an edge (each triangle's edges found through the
 * adjacency; degenerate triangles skipped). */
static double triangle_normal(const double *p, const uint32_t *t, double n[3]) {
  const double *a = p + 3 * (size_t)t[0], *b = p + 3 * (size_t)t[1], *c = p + 3 * (size_t)t[2];
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  n[0] = u[1] * v[2] - u[2] * v[1], n[1] = u[2] * v[0] - u[0] * v[2], n[2] = u[0] * v[1] - u[1] * v[0];
  double l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  if (l > 0) n[0] /= l, n[1] /= l, n[2] /= l;
  return l;
}

static double worst_crease(const shape *s, const double *now) {
  const mesh_adjacency *a = &s->a;
  const uint32_t *tris = s->t.triangles;
  double worst = 0;
  for (uint32_t v = 0; v < a->vertex_count; v++)
    for (uint32_t i = a->vt_offsets[v]; i < a->vt_offsets[v + 1]; i++)
      for (uint32_t j = i + 1; j < a->vt_offsets[v + 1]; j++) {
        const uint32_t *t1 = tris + 3 * (size_t)a->vt[i], *t2 = tris + 3 * (size_t)a->vt[j];
        /* Shared edge (v, w) with w > v, counted once from its lower end. */
        int shared = 0;
        for (int x = 0; x < 3; x++)
          for (int y = 0; y < 3; y++) shared += t1[x] == t2[y] && t1[x] > v;
        if (shared != 1) continue;
        double n1[3], n2[3], m1[3], m2[3];
        if (!(triangle_normal(s->t.positions, t1, n1) > 0) || !(triangle_normal(s->t.positions, t2, n2) > 0) ||
            !(triangle_normal(now, t1, m1) > 0) || !(triangle_normal(now, t2, m2) > 0))
          continue;
        double c0 = n1[0] * n2[0] + n1[1] * n2[1] + n1[2] * n2[2], c1 = m1[0] * m2[0] + m1[1] * m2[1] + m1[2] * m2[2];
        double d = fabs(acos(c1 > 1 ? 1 : c1 < -1 ? -1 : c1) - acos(c0 > 1 ? 1 : c0 < -1 ? -1 : c0)) * 180.0 / M_PI;
        if (d > worst) worst = d;
      }
  return worst;
}

typedef struct solve_opts {
  const char *mesh;
  dfm_mode mode;
  uint32_t roi, handle;
  int iters, drags, json, gestures, sharp, compare;
  dfm_factor factor;
  long reserve_mb; /* -1: dfm_memory_estimate(V), as deformd */
  dfm_sweeps sweeps;
  int multires, subdivide, exact; /* --multires, --subdivide L; exact: 0 with --no-exact */
  uint32_t proxy;                 /* --proxy N: the proxy's target vertices (0: the default) */
  int mesh_order;                 /* --mesh-order: -1 auto (by DFM_MESH_ORDER_MIN), 0 off, 1 on */
  int kept_proxy;                 /* --kept-proxy on (1, the default) | off */
  int mesh_symbolic;              /* --mesh-symbolic on (1, the default, with a mesh order) | off */
} solve_opts;

/* Drag d of `drags`: the handle dragged up and turning slowly, as a hand would. */
static void drag_xform(const shape *s, const double pivot[3], int d, int drags, dfm_xform *x) {
  dfm_xform_identity(x);
  double f = (double)(d + 1) / drags, angle = 0.3 * f;
  x->translate[1] = 0.1 * s->diag * f;
  x->translate[0] = 0.02 * s->diag * sin(6.0 * f);
  x->rotation[2] = sin(angle / 2), x->rotation[3] = cos(angle / 2);
  memcpy(x->pivot, pivot, sizeof(double) * 3);
}

/* --compare-sweeps: the gesture built twice, with float32 and with double sweeps, dragged in
 * turn drag by drag (which goes first alternating), so that the VM's drift and other tenants'
 * load fall on both alike. Prints both p50s (wall and CPU) and the largest distance between the
 * two results after any drag, over the diagonal. */
static int compare_sweeps(const shape *s, dfm_params p, const double pivot[3], int drags, const char *cmdline) {
  char err[512] = "";
  dfm_system *sys[2] = {NULL, NULL};
  size_t n3 = 3 * (size_t)s->t.vertex_count;
  double *out[2] = {malloc(sizeof(double) * n3), malloc(sizeof(double) * n3)};
  double *ms[2] = {malloc(sizeof(double) * (size_t)drags), malloc(sizeof(double) * (size_t)drags)};
  double *cpu[2] = {malloc(sizeof(double) * (size_t)drags), malloc(sizeof(double) * (size_t)drags)};
  int rc = out[0] && out[1] && ms[0] && ms[1] && cpu[0] && cpu[1] ? 0 : DFM_ENOMEM;
  for (int k = 0; k < 2 && rc == 0; k++) {
    p.sweeps = k ? DFM_SWEEPS_DOUBLE : DFM_SWEEPS_FLOAT;
    rc = dfm_system_create(&s->t, &s->a, s->t.positions, &p, &sys[k], err, sizeof(err));
    memcpy(out[k], s->t.positions, sizeof(double) * n3);
  }
  double worst = 0;
  for (int d = 0; d < drags && rc == 0; d++) {
    dfm_xform x;
    drag_xform(s, pivot, d, drags, &x);
    for (int i = 0; i < 2 && rc == 0; i++) {
      int k = (d + i) % 2;
      double t1 = now_ms(), c1 = cpu_ms();
      rc = dfm_system_solve(sys[k], &x, out[k], err, sizeof(err));
      ms[k][d] = now_ms() - t1, cpu[k][d] = cpu_ms() - c1;
    }
    for (size_t i = 0; i < n3 && rc == 0; i++) worst = fmax(worst, fabs(out[0][i] - out[1][i]));
  }
  if (rc == 0)
    printf("{\"bench\":\"solve-compare-sweeps\",\"command\":\"%s\",\"vertices\":%u,\"drags\":%d,"
           "\"float_p50_ms\":%.3f,\"double_p50_ms\":%.3f,\"float_cpu_p50_ms\":%.3f,\"double_cpu_p50_ms\":%.3f,"
           "\"max_diff_over_diag\":%.3g}\n",
           cmdline, s->t.vertex_count, drags, percentile(ms[0], drags, 0.5), percentile(ms[1], drags, 0.5),
           percentile(cpu[0], drags, 0.5), percentile(cpu[1], drags, 0.5), worst / s->diag);
  else
    fprintf(stderr, "deform-bench solve: %s\n", err[0] ? err : "out of memory");
  for (int k = 0; k < 2; k++) {
    dfm_system_destroy(sys[k]);
    free(out[k]), free(ms[k]), free(cpu[k]);
  }
  return rc ? 1 : 0;
}

/* "on" 1, "off" 0, anything else -1. */
static int on_off(const char *v) { return !v ? -1 : strcmp(v, "on") == 0 ? 1 : strcmp(v, "off") == 0 ? 0 : -1; }

/* v in fmt, or null when it is not a number (JSON has no NaN). */
static const char *json_num(double v, const char *fmt, char buf[32]) {
  if (isnan(v)) return "null";
  snprintf(buf, 32, fmt, v);
  return buf;
}

/* What deformd computes once a session of at least DFM_MESH_ORDER_MIN vertices opens (--mesh-order
 * auto; on: any mesh; off: none): the mesh's own AMD order, then (unless --mesh-symbolic off) its
 * symbolic analysis, each timed (-1: no memory). */
typedef struct mesh_prep {
  int64_t *order;
  dfm_symbolic *sym;
  double order_ms, symbolic_ms;
  size_t symbolic_bytes;
} mesh_prep;

static int bench_mesh_prep(const shape *s, const solve_opts *o, mesh_prep *m) {
  memset(m, 0, sizeof(*m));
  if (o->mesh_order == 0 || (o->mesh_order < 0 && s->t.vertex_count < DFM_MESH_ORDER_MIN)) return 0;
  double t0 = now_ms();
  m->order_ms = dfm_mesh_order(&s->a, &m->order) == 0 ? now_ms() - t0 : -1;
  if (!m->order) return DFM_ENOMEM;
  t0 = now_ms();
  if (o->mesh_symbolic) m->symbolic_ms = dfm_mesh_symbolic(&s->a, m->order, &m->sym) == 0 ? now_ms() - t0 : -1;
  m->symbolic_bytes = dfm_mesh_symbolic_bytes(m->sym);
  return o->mesh_symbolic && !m->sym ? DFM_ENOMEM : 0;
}

static void print_before_gestures(size_t reserve, double reserve_ms, const mesh_prep *m, int copied) {
  printf("# heap reserve %.0f MiB written in %.1f ms before the first gesture\n", reserve / 1048576.0, reserve_ms);
  if (m->order_ms > 0) printf("# the mesh's AMD order computed in %.1f ms before the first gesture\n", m->order_ms);
  if (m->symbolic_ms > 0) printf("# its symbolic analysis in %.1f ms (the gesture's: %s)\n", m->symbolic_ms, copied ? "copied" : "its own");
}

static void bench_mesh_prep_free(mesh_prep *m) {
  free(m->order);
  dfm_mesh_symbolic_free(m->sym);
}

/* --multires: the gesture on the multiresolution path (dfm_params.multires), timed drag by
 * drag, and beside it the same gesture solved exactly (unless --no-exact), dragged through the
 * same transforms in turn: after each drag the distance between the two results (dfm_distance,
 * over the diagonal). Prints the multiresolution prefactor (simplifying, binding, the proxy's
 * factorisation), its drags' p50/p95, the last drag's distance (max and RMS over vertices) and
 * the largest max over all drags, with the exact solve's prefactor and drag p50 beside. */
static int multires_bench(const shape *s, dfm_params p, const double pivot[3], const solve_opts *o, const char *cmdline) {
  char err[512] = "";
  dfm_system *sys[2] = {NULL, NULL};
  uint32_t n = s->t.vertex_count;
  int drags = o->drags, runs = o->exact ? 2 : 1;
  double *out[2] = {malloc(sizeof(double) * 3 * n), malloc(sizeof(double) * 3 * n)};
  double *ms[2] = {malloc(sizeof(double) * (size_t)drags), malloc(sizeof(double) * (size_t)drags)}, pre[2] = {0, 0};
  double *cpu = malloc(sizeof(double) * (size_t)drags);
  int rc = out[0] && out[1] && ms[0] && ms[1] && cpu ? 0 : DFM_ENOMEM;
  p.multires_proxy = o->proxy;
  /* As deformd keeps a session's proxy (made when it opens, past DFM_MULTIRES_MIN vertices, or
   * by its first gesture on the path): made here first and timed apart, unless --kept-proxy off. */
  dfm_proxy *kept = NULL;
  double kept_ms = 0;
  if (rc == 0 && o->kept_proxy) {
    double t0 = now_ms();
    rc = dfm_proxy_build(&s->t, &s->a, s->t.positions, o->proxy, &kept, err, sizeof(err));
    kept_ms = now_ms() - t0;
    p.proxy = kept;
  }
  for (int k = 0; k < runs && rc == 0; k++) {
    p.multires = k ? DFM_MULTIRES_OFF : DFM_MULTIRES_ON;
    double t0 = now_ms();
    rc = dfm_system_create(&s->t, &s->a, s->t.positions, &p, &sys[k], err, sizeof(err));
    pre[k] = now_ms() - t0;
    memcpy(out[k], s->t.positions, sizeof(double) * 3 * n);
  }
  double last_max = NAN, last_rms = NAN, worst = NAN;
  for (int d = 0; d < drags && rc == 0; d++) {
    dfm_xform x;
    drag_xform(s, pivot, d, drags, &x);
    for (int k = 0; k < runs && rc == 0; k++) {
      double t1 = now_ms(), c1 = cpu_ms();
      rc = dfm_system_solve(sys[k], &x, out[k], err, sizeof(err));
      ms[k][d] = now_ms() - t1;
      if (k == 0) cpu[d] = cpu_ms() - c1;
    }
    if (rc == 0 && runs == 2) {
      dfm_distance(out[0], out[1], n, s->diag, &last_max, &last_rms);
      worst = d == 0 || last_max > worst ? last_max : worst;
    }
  }
  if (rc == 0) {
    dfm_info info;
    dfm_system_info(sys[0], &info);
    double first = ms[0][0], p50 = percentile(ms[0], drags, 0.5), p95 = percentile(ms[0], drags, 0.95);
    double exact50 = runs == 2 ? percentile(ms[1], drags, 0.5) : NAN;
    char j[5][32]; /* what --no-exact leaves unmeasured is null */
    printf("{\"bench\":\"solve-multires\",\"command\":\"%s\",\"mesh\":\"%s\",\"vertices\":%u,\"triangles\":%u,"
           "\"subdivide\":%d,\"mode\":\"%s\",\"border\":\"%s\",\"handle\":%u,\"iters\":%d,\"drags\":%d,"
           "\"proxy_vertices\":%u,\"proxy_free\":%u,\"proxy_pinned\":%u,\"kept_proxy_ms\":%.1f,\"prefactor_ms\":%.1f,\"multires_ms\":%.1f,\"simplify_ms\":%.1f,\"near_ms\":%.1f,\"bind_ms\":%.1f,\"proxy_factor_ms\":%.1f,"
           "\"first_drag_ms\":%.2f,\"drag_p50_ms\":%.2f,\"drag_p95_ms\":%.2f,\"drag_cpu_p50_ms\":%.2f,\"exact_prefactor_ms\":%s,"
           "\"exact_drag_p50_ms\":%s,\"error_max_over_diag\":%s,\"error_rms_over_diag\":%s,"
           "\"error_max_any_drag_over_diag\":%s,\"peak_rss_kb\":%ld}\n",
           cmdline, o->mesh, n, s->t.triangle_count, o->subdivide, dfm_mode_name(o->mode), o->sharp ? "sharp" : "smooth",
           p.handle_count, o->iters, drags, info.proxy_vertices, info.free, info.pinned, kept_ms, pre[0], info.multires_ms,
           info.multires_simplify_ms, info.multires_near_ms, info.multires_bind_ms,
           info.analyze_ms + info.factor_ms, first, p50, p95, percentile(cpu, drags, 0.5), json_num(runs == 2 ? pre[1] : NAN, "%.1f", j[0]),
           json_num(exact50, "%.2f", j[1]), json_num(last_max, "%.4g", j[2]), json_num(last_rms, "%.4g", j[3]),
           json_num(worst, "%.4g", j[4]), peak_kb());
  } else {
    fprintf(stderr, "deform-bench solve: %s\n", err[0] ? err : "out of memory");
  }
  for (int k = 0; k < 2; k++) {
    dfm_system_destroy(sys[k]);
    free(out[k]), free(ms[k]);
  }
  free(cpu);
  dfm_proxy_free(kept);
  return rc ? 1 : 0;
}

static int parse_uint(const char *text, long max, long *out) {
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (!end || *end || v < 0 || v > max) return -1;
  *out = v;
  return 0;
}

int bench_solve_main(int argc, char **argv, const char *cmdline) {
  solve_opts o = {NULL, DFM_ARAP, 0, 50, 1, 50, 0, 1, 0, 0, DFM_FACTOR_AUTO, -1, DFM_SWEEPS_AUTO, 0, 0, 1, 0, -1, 1, 1};
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    long v = 0;
    if (strcmp(a, "--json") == 0) o.json = 1;
    else if (strcmp(a, "--compare-sweeps") == 0) o.compare = 1;
    else if (strcmp(a, "--multires") == 0) o.multires = 1;
    else if (strcmp(a, "--no-exact") == 0) o.exact = 0;
    else if (strcmp(a, "--subdivide") == 0 && val && parse_uint(val, 3, &v) == 0) o.subdivide = (int)v, i++;
    else if (strcmp(a, "--proxy") == 0 && val && parse_uint(val, 100000000, &v) == 0 && v > 0) o.proxy = (uint32_t)v, i++;
    else if (strcmp(a, "--mode") == 0 && val && dfm_mode_parse(val, &o.mode) == 0) i++;
    else if (strcmp(a, "--roi") == 0 && val && (strcmp(val, "all") == 0 || parse_uint(val, 100000000, &v) == 0))
      o.roi = strcmp(argv[++i], "all") == 0 ? 0 : (uint32_t)v;
    else if (strcmp(a, "--handle") == 0 && val && parse_uint(val, 100000000, &v) == 0 && v > 0) o.handle = (uint32_t)v, i++;
    else if (strcmp(a, "--iters") == 0 && val && parse_uint(val, 100, &v) == 0 && v > 0) o.iters = (int)v, i++;
    else if (strcmp(a, "--drags") == 0 && val && parse_uint(val, 100000, &v) == 0 && v > 0) o.drags = (int)v, i++;
    else if (strcmp(a, "--gestures") == 0 && val && parse_uint(val, 1000, &v) == 0 && v > 0) o.gestures = (int)v, i++;
    else if (strcmp(a, "--reserve-mb") == 0 && val && parse_uint(val, 1 << 20, &v) == 0) o.reserve_mb = v, i++;
    else if (strcmp(a, "--border") == 0 && val && (strcmp(val, "smooth") == 0 || strcmp(val, "sharp") == 0))
      o.sharp = strcmp(argv[++i], "sharp") == 0;
    else if (strcmp(a, "--factor") == 0 && val && strcmp(val, "auto") == 0) o.factor = DFM_FACTOR_AUTO, i++;
    else if (strcmp(a, "--factor") == 0 && val && strcmp(val, "simplicial") == 0) o.factor = DFM_FACTOR_SIMPLICIAL, i++;
    else if (strcmp(a, "--factor") == 0 && val && strcmp(val, "supernodal") == 0) o.factor = DFM_FACTOR_SUPERNODAL, i++;
    else if (strcmp(a, "--sweeps") == 0 && val && strcmp(val, "auto") == 0) o.sweeps = DFM_SWEEPS_AUTO, i++;
    else if (strcmp(a, "--sweeps") == 0 && val && strcmp(val, "double") == 0) o.sweeps = DFM_SWEEPS_DOUBLE, i++;
    else if (strcmp(a, "--sweeps") == 0 && val && strcmp(val, "float") == 0) o.sweeps = DFM_SWEEPS_FLOAT, i++;
    else if (strcmp(a, "--kept-proxy") == 0 && on_off(val) >= 0) o.kept_proxy = on_off(val), i++;
    else if (strcmp(a, "--mesh-symbolic") == 0 && on_off(val) >= 0) o.mesh_symbolic = on_off(val), i++;
    else if (strcmp(a, "--mesh-order") == 0 && val && (strcmp(val, "auto") == 0 || strcmp(val, "on") == 0 || strcmp(val, "off") == 0))
      o.mesh_order = strcmp(val, "auto") == 0 ? -1 : strcmp(val, "on") == 0, i++;
    else if (a[0] != '-' && !o.mesh) o.mesh = a;
    else {
      fprintf(stderr, "deform-bench solve: bad or incomplete option '%s'\n", a);
      return 2;
    }
  }
  if (!o.mesh) {
    fprintf(stderr, "usage: deform-bench solve MESH --mode arap --roi N --iters K --drags D [--handle H] [--factor auto|simplicial|supernodal] [--gestures G] [--reserve-mb R] [--border smooth|sharp] [--sweeps auto|double|float] [--compare-sweeps] [--multires [--proxy N] [--no-exact] [--kept-proxy on|off]] [--subdivide L] [--mesh-order auto|on|off] [--mesh-symbolic on|off] [--json]\n");
    return 2;
  }
  char err[512] = "";
  shape s;
  if (shape_init(&s, o.mesh, o.subdivide, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench solve: %s\n", err);
    return 1;
  }
  uint32_t *handle = NULL, nh = 0, *roi = NULL, nr = 0;
  if (dfm_geodesic_region(&s.a, s.t.positions, &s.top, 1, INFINITY, o.handle, &handle, &nh) != 0 ||
      (o.roi && dfm_geodesic_region(&s.a, s.t.positions, &s.top, 1, INFINITY, o.roi, &roi, &nr) != 0)) {
    fprintf(stderr, "deform-bench solve: out of memory\n");
    shape_fini(&s);
    return 1;
  }
  double pivot[3] = {0, 0, 0};
  for (uint32_t i = 0; i < nh; i++)
    for (int k = 0; k < 3; k++) pivot[k] += s.t.positions[3 * handle[i] + k] / nh;
  dfm_params p = {.mode = o.mode, .roi = roi, .roi_count = nr, .handle = handle, .handle_count = nh, .iterations = o.iters,
                  .factor = o.factor, .smooth_border = !o.sharp, .sweeps = o.sweeps};
  if (o.compare || o.multires) {
    size_t reserve = o.reserve_mb < 0 ? dfm_memory_estimate(s.t.vertex_count) : (size_t)o.reserve_mb << 20;
    if (reserve) dfm_memory_reserve(reserve);
    int crc = o.multires ? multires_bench(&s, p, pivot, &o, cmdline) : compare_sweeps(&s, p, pivot, o.drags, cmdline);
    free(handle);
    free(roi);
    shape_fini(&s);
    return crc;
  }
  /* G gestures one after another, as a server sees them: the first pays for fresh memory
   * (page faults), the later ones reuse what the previous gesture freed. The last one is
   * dragged. */
  size_t reserve = o.reserve_mb < 0 ? dfm_memory_estimate(s.t.vertex_count) : (size_t)o.reserve_mb << 20;
  double reserve_ms = reserve ? dfm_memory_reserve(reserve) : 0;
  mesh_prep mp;
  int rc = bench_mesh_prep(&s, &o, &mp);
  p.mesh_order = mp.order, p.mesh_symbolic = mp.sym;
  dfm_system *sys = NULL;
  double prefactor = 0, *later = malloc(sizeof(double) * (size_t)o.gestures);
  if (!later) rc = DFM_ENOMEM;
  for (int g = 0; g < o.gestures && rc == 0; g++) {
    dfm_system_destroy(sys);
    sys = NULL;
    double t0 = now_ms();
    rc = dfm_system_create(&s.t, &s.a, s.t.positions, &p, &sys, err, sizeof(err));
    if (g == 0) prefactor = now_ms() - t0;
    else later[g - 1] = now_ms() - t0;
  }
  double prefactor_next = o.gestures > 1 ? percentile(later, o.gestures - 1, 0.5) : 0;
  free(later);
  bench_mesh_prep_free(&mp);
  if (rc) {
    fprintf(stderr, "deform-bench solve: %s\n", err);
    free(handle);
    free(roi);
    shape_fini(&s);
    return 1;
  }
  dfm_info info;
  dfm_system_info(sys, &info);
  double *out = malloc(sizeof(double) * 3 * s.t.vertex_count);
  if (out) memcpy(out, s.t.positions, sizeof(double) * 3 * s.t.vertex_count); /* a solve writes what can move */
  double *ms = malloc(sizeof(double) * (size_t)o.drags), *cpu = malloc(sizeof(double) * (size_t)o.drags);
  for (int d = 0; d < o.drags && out && ms && cpu; d++) {
    dfm_xform x;
    drag_xform(&s, pivot, d, o.drags, &x);
    double t1 = now_ms(), c1 = cpu_ms();
    rc = dfm_system_solve(sys, &x, out, err, sizeof(err));
    ms[d] = now_ms() - t1;
    cpu[d] = cpu_ms() - c1;
    if (rc) {
      fprintf(stderr, "deform-bench solve: drag %d: %s\n", d, err);
      break;
    }
  }
  if (rc == 0 && out && ms && cpu) {
    double first = ms[0], crease = worst_crease(&s, out);
    double p50 = percentile(ms, o.drags, 0.5), p95 = percentile(ms, o.drags, 0.95), cpu50 = percentile(cpu, o.drags, 0.5);
    if (o.json) {
      printf("{\"bench\":\"solve\",\"command\":\"%s\",\"mesh\":\"%s\",\"vertices\":%u,\"triangles\":%u,"
             "\"mode\":\"%s\",\"region\":%u,\"free\":%u,\"handle\":%u,\"iters\":%d,\"drags\":%d,"
             "\"reserve_mb\":%.1f,\"reserve_ms\":%.1f,\"prefactor_ms\":%.3f,\"gestures\":%d,\"prefactor_next_ms\":%.3f,\"analyze_ms\":%.3f,\"factor_ms\":%.3f,\"roles_ms\":%.3f,\"weights_ms\":%.3f,\"order_ms\":%.3f,"
             "\"order\":\"%s\",\"mesh_order_ms\":%.1f,\"symbolic\":\"%s\",\"mesh_symbolic_ms\":%.1f,\"mesh_symbolic_mb\":%.1f,"
             "\"assemble_ms\":%.3f,\"arap_setup_ms\":%.3f,\"factor_nnz\":%zu,\"factor_mflops\":%.1f,\"supernodal\":%s,\"solve_threads\":%d,\"sweep32\":%s,"
             "\"first_drag_ms\":%.3f,\"drag_p50_ms\":%.3f,\"drag_p95_ms\":%.3f,\"drag_cpu_p50_ms\":%.3f,\"peak_rss_kb\":%ld,\"border\":\"%s\",\"crease_deg\":%.2f}\n",
             cmdline, o.mesh, s.t.vertex_count, s.t.triangle_count, dfm_mode_name(o.mode), nr ? nr : s.t.vertex_count,
             info.free, nh, o.iters, o.drags, reserve / 1048576.0, reserve_ms, prefactor, o.gestures, prefactor_next, info.analyze_ms, info.factor_ms, info.roles_ms, info.weights_ms, info.order_ms,
             info.order_from_mesh ? "mesh" : "amd", mp.order_ms, info.symbolic_from_mesh ? "mesh" : "own", mp.symbolic_ms, mp.symbolic_bytes / 1e6, info.assemble_ms, info.arap_ms, info.factor_nnz, info.factor_flops / 1e6, info.supernodal ? "true" : "false", info.solve_threads,
             info.sweep32 ? "true" : "false", first,
             p50, p95, cpu50, peak_kb(), o.sharp ? "sharp" : "smooth", crease);
    } else {
      printf("# %s\n", cmdline);
      print_before_gestures(reserve, reserve_ms, &mp, info.symbolic_from_mesh);
      if (o.gestures > 1) printf("# prefactor of gestures 2..%d: median %.1f ms\n", o.gestures, prefactor_next);
      printf("# CPU time per drag (all threads): median %.2f ms\n", cpu50);
      printf("%-22s %8s %8s %-10s %-6s %8s %5s %12s %10s %9s %9s %9s %10s %8s\n", "mesh", "vertices", "region", "mode",
             "border", "free", "iters", "prefactor ms", "nnz(L)", "drag p50", "drag p95", "1st drag", "peak MB", "crease");
      printf("%-22s %8u %8u %-10s %-6s %8u %5d %12.1f %10zu %9.2f %9.2f %9.2f %10.1f %7.1f°\n", o.mesh, s.t.vertex_count,
             nr ? nr : s.t.vertex_count, dfm_mode_name(o.mode), o.sharp ? "sharp" : "smooth", info.free, o.iters, prefactor,
             info.factor_nnz, p50, p95, first, peak_kb() / 1024.0, crease);
    }
  }
  free(out);
  free(ms);
  free(cpu);
  free(handle);
  free(roi);
  dfm_system_destroy(sys);
  shape_fini(&s);
  return rc ? 1 : 0;
}

int bench_brush_main(int argc, char **argv, const char *cmdline) {
  const char *spec = NULL;
  dfm_brush brush = {.kind = DFM_BRUSH_INFLATE, .falloff = DFM_FALLOFF_SMOOTHSTEP};
  long touch = 2000, samples = 200, per_call = 1;
  double strength = 0.2;
  int json = 0, guard = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) json = 1;
    else if (strcmp(a, "--mirror") == 0) brush.mirror_x = 1;
    else if (strcmp(a, "--guard") == 0) guard = 1;
    else if (strcmp(a, "--per-call") == 0 && val && parse_uint(val, 65536, &per_call) == 0 && per_call > 0) i++;
    else if (strcmp(a, "--brush") == 0 && val && dfm_brush_parse(val, &brush.kind) == 0) i++;
    else if (strcmp(a, "--falloff") == 0 && val && dfm_falloff_parse(val, &brush.falloff) == 0) i++;
    else if (strcmp(a, "--touch") == 0 && val && parse_uint(val, 100000000, &touch) == 0 && touch > 0) i++;
    else if (strcmp(a, "--samples") == 0 && val && parse_uint(val, 1000000, &samples) == 0 && samples > 0) i++;
    else if (strcmp(a, "--strength") == 0 && val && isfinite(strtod(val, NULL))) strength = strtod(argv[++i], NULL);
    else if (a[0] != '-' && !spec) spec = a;
    else {
      fprintf(stderr, "deform-bench brush: bad or incomplete option '%s'\n", a);
      return 2;
    }
  }
  if (!spec) {
    fprintf(stderr, "usage: deform-bench brush MESH --brush KIND --touch N --samples S [--strength W] [--guard] [--per-call K] [--falloff F] [--mirror] [--json]\n");
    return 2;
  }
  char err[512] = "";
  shape s;
  if (shape_init(&s, spec, 0, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench brush: %s\n", err);
    return 1;
  }
  uint32_t nt = s.t.vertex_count;
  /* The centre: the vertex nearest the middle of the bounding box's top face region, i.e.
   * the topmost vertex; the radius: the distance to the touch-th nearest vertex. */
  const double *c0 = s.t.positions + 3 * s.top;
  double *d2 = malloc(sizeof(double) * nt);
  for (uint32_t v = 0; v < nt; v++) {
    const double *p = s.t.positions + 3 * v;
    d2[v] = (p[0] - c0[0]) * (p[0] - c0[0]) + (p[1] - c0[1]) * (p[1] - c0[1]) + (p[2] - c0[2]) * (p[2] - c0[2]);
  }
  qsort(d2, nt, sizeof(double), cmp_double);
  double radius = sqrt(d2[(uint32_t)touch < nt ? (uint32_t)touch : nt - 1]);
  free(d2);
  double *pos = malloc(sizeof(double) * 3 * nt), *ms = malloc(sizeof(double) * (size_t)samples);
  dfm_brush_sample *smp = malloc(sizeof(*smp) * (size_t)per_call);
  uint8_t *moved = malloc(nt);
  memcpy(pos, s.t.positions, sizeof(double) * 3 * nt);
  /* With --guard each dab is a stroke of its own: its starting shape is the shape before it. */
  double *origin = guard ? malloc(sizeof(double) * 3 * nt) : NULL;
  brush.origin = origin;
  double moved_sum = 0;
  int rc = 0;
  long calls = (samples + per_call - 1) / per_call;
  for (long c = 0; c < calls && rc == 0; c++) {
    uint32_t k = 0;
    for (long i = c * per_call; i < samples && i < (c + 1) * per_call; i++, k++) {
      /* Along a short arc so that successive samples overlap, as in a stroke. */
      dfm_brush_sample one = {{c0[0] + 0.2 * radius * sin(0.1 * i), c0[1], c0[2] + 0.2 * radius * cos(0.1 * i)},
                              {0, 0.01 * radius, 0},
                              radius,
                              strength};
      smp[k] = one;
    }
    memset(moved, 0, nt);
    if (origin) memcpy(origin, pos, sizeof(double) * 3 * nt);
    double t0 = now_ms();
    rc = dfm_brush_apply(&brush, &s.a, s.t.triangles, s.t.triangle_count, smp, k, pos, moved, err, sizeof(err));
    ms[c] = (now_ms() - t0) / k;
    uint32_t m = 0;
    for (uint32_t v = 0; v < nt; v++) m += moved[v];
    moved_sum += m; /* vertices a call moved (with --per-call K, the union over its K dabs) */
  }
  samples = calls; /* the percentiles are over calls */
  if (rc) fprintf(stderr, "deform-bench brush: %s\n", err);
  else {
    double p50 = percentile(ms, (int)samples, 0.5), p95 = percentile(ms, (int)samples, 0.95);
    if (json)
      printf("{\"bench\":\"brush\",\"command\":\"%s\",\"mesh\":\"%s\",\"vertices\":%u,\"brush\":\"%s\","
             "\"falloff\":\"%s\",\"mirror_x\":%s,\"samples\":%ld,\"radius\":%.6g,\"moved_per_sample\":%.1f,"
             "\"sample_p50_ms\":%.4f,\"sample_p95_ms\":%.4f,\"strength\":%g,\"guard\":%s,\"per_call\":%ld}\n",
             cmdline, spec, nt, dfm_brush_name(brush.kind), dfm_falloff_name(brush.falloff),
             brush.mirror_x ? "true" : "false", samples, radius, moved_sum / samples, p50, p95, strength,
             guard ? "true" : "false", per_call);
    else {
      printf("# %s\n", cmdline);
      printf("%-22s %8s %-8s %-10s %6s %8s %10s %12s %12s\n", "mesh", "vertices", "brush", "falloff", "mirror",
             "samples", "moved/smp", "sample p50", "sample p95");
      printf("%-22s %8u %-8s %-10s %6s %8ld %10.0f %9.3f ms %9.3f ms\n", spec, nt, dfm_brush_name(brush.kind),
             dfm_falloff_name(brush.falloff), brush.mirror_x ? "yes" : "no", samples, moved_sum / samples, p50, p95);
    }
  }
  free(pos);
  free(smp);
  free(origin);
  free(ms);
  free(moved);
  shape_fini(&s);
  return rc ? 1 : 0;
}
