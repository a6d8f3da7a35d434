/*
 * bench_undo.c — `deform-bench undo`: undo of a stroke under later overlapping strokes.
 *
 *   deform-bench undo [--later 1,10,100] [--repeat R] [--data none] [--json] [--deformd PATH]
 *
 * A fresh deformd --demo (with a store in a temporary folder, as deployed; --data none: memory
 * only). For each N of --later, on a fresh demo session: `ana` inflates the cheek (radius 0.02,
 * strength 1), `bob` then draws N strokes across it (radius 0.012, strength 0.2, each a line
 * through the cheek at another angle and place), and ana undoes her inflate. Reported: what the
 * undo restored (vertices, and those bob had changed since: overlapped), the time of
 * history.undo and of history.redo from send to answer (the answer comes once the operation is
 * committed; ana redoes and undoes R times, default 5: median and best), and before and after
 * the undo the worst dihedral change against the rest shape (crease, degrees, over the welded
 * mesh's interior edges) and the worst offset jump across an edge (in edge lengths), measured
 * on the shape a viewer receives.
 *
 * DOES NOT compare against a goal (docs/performance.md states the figures) or share the
 * tests' oracle (tests/support/oracle.c): the crease here is measured on its own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
#include "client_replica.h"
#include "mesh_geom.h"

typedef struct opts {
  int later[16], nlater, repeat, json, memory;
  char deformd[4096];
} opts;

/* ---- the shape a viewer receives ------------------------------------------------------------------- */

/* A viewer's replica of the demo session, read once: its SNAPSHOT. */
static int snapshot(int port, client_replica *r) {
  client_conn c;
  char err[256];
  client_replica_init(r);
  if (client_connect(&c, "127.0.0.1", port, err, sizeof(err)) != 0 ||
      client_hello(&c, "demo", PROTO_ROLE_VIEWER, NULL) != 0) {
    fprintf(stderr, "deform-bench undo: cannot join: %s\n", err);
    return -1;
  }
  for (;;) {
    proto_header h;
    const uint8_t *p;
    if (client_read_frame(&c, 60000, &h, &p, err, sizeof(err)) != 0) break;
    if (h.type == PROTO_WELCOME) continue;
    int rc = h.type == PROTO_SNAPSHOT ? client_replica_apply(r, &h, p, err, sizeof(err)) : -1;
    client_close(&c);
    return rc;
  }
  fprintf(stderr, "deform-bench undo: no SNAPSHOT: %s\n", err);
  client_close(&c);
  return -1;
}

typedef struct edge_ref {
  uint32_t a, b, tri;
} edge_ref;

static int cmp_edge(const void *x, const void *y) {
  const edge_ref *p = x, *q = y;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  if (p->b != q->b) return p->b < q->b ? -1 : 1;
  return 0;
}

/* The interior edges of the welded mesh: pairs of triangles (t1 has the edge a -> b in its
 * winding), sorted out once. */
typedef struct edges {
  uint32_t n;
  uint32_t (*pair)[4]; /* a, b, t1, t2 */
} edges;

static int edges_init(edges *e, const mesh_topology *t) {
  size_t m = 3 * (size_t)t->triangle_count;
  edge_ref *r = malloc(sizeof(edge_ref) * (m + 1));
  e->pair = malloc(sizeof(e->pair[0]) * (m + 1));
  e->n = 0;
  if (!r || !e->pair) return free(r), -1;
  for (uint32_t f = 0; f < t->triangle_count; f++)
    for (int k = 0; k < 3; k++) {
      uint32_t a = t->triangles[3 * f + k], b = t->triangles[3 * f + (k + 1) % 3];
      r[3 * (size_t)f + k] = (edge_ref){a < b ? a : b, a < b ? b : a, f};
    }
  qsort(r, m, sizeof(edge_ref), cmp_edge);
  for (size_t i = 0; i + 1 < m; i++) {
    if (cmp_edge(&r[i], &r[i + 1]) != 0 || (i + 2 < m && cmp_edge(&r[i], &r[i + 2]) == 0)) continue;
    if (i > 0 && cmp_edge(&r[i - 1], &r[i]) == 0) continue; /* three or more: not manifold */
    uint32_t f = r[i].tri, a = r[i].a, b = r[i].b;
    const uint32_t *c = t->triangles + 3 * (size_t)f;
    int forward = (c[0] == a && c[1] == b) || (c[1] == a && c[2] == b) || (c[2] == a && c[0] == b);
    e->pair[e->n][0] = forward ? a : b, e->pair[e->n][1] = forward ? b : a;
    e->pair[e->n][2] = f, e->pair[e->n][3] = r[i + 1].tri;
    e->n++;
  }
  free(r);
  return 0;
}

static void tri_normal(const double *p, const uint32_t *c, double *n) {
  double u[3], v[3];
  for (int k = 0; k < 3; k++) u[k] = p[3 * c[1] + k] - p[3 * c[0] + k], v[k] = p[3 * c[2] + k] - p[3 * c[0] + k];
  n[0] = u[1] * v[2] - u[2] * v[1], n[1] = u[2] * v[0] - u[0] * v[2], n[2] = u[0] * v[1] - u[1] * v[0];
  double l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  for (int k = 0; k < 3; k++) n[k] = l > 0 ? n[k] / l : 0;
}

/* The signed angle between the normals of an edge's two triangles, about the edge. */
static double dihedral(const double *p, const mesh_topology *t, const uint32_t *e) {
  double n1[3], n2[3], d[3], x[3];
  tri_normal(p, t->triangles + 3 * (size_t)e[2], n1);
  tri_normal(p, t->triangles + 3 * (size_t)e[3], n2);
  for (int k = 0; k < 3; k++) d[k] = p[3 * e[1] + k] - p[3 * e[0] + k];
  x[0] = n1[1] * n2[2] - n1[2] * n2[1], x[1] = n1[2] * n2[0] - n1[0] * n2[2], x[2] = n1[0] * n2[1] - n1[1] * n2[0];
  double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  return atan2((x[0] * d[0] + x[1] * d[1] + x[2] * d[2]) / (l > 0 ? l : 1), n1[0] * n2[0] + n1[1] * n2[1] + n1[2] * n2[2]);
}

typedef struct shape_figures {
  double crease_deg, jump;
} shape_figures;

/* Crease and offset jump of replica r against the rest positions of topology t. */
static shape_figures figures_of(const mesh_topology *t, const edges *e, const client_replica *r) {
  shape_figures f = {0, 0};
  double *now = malloc(sizeof(double) * 3 * (t->vertex_count + 1));
  if (!now) return f;
  for (uint32_t v = 0; v < t->vertex_count; v++) {
    uint32_t k = t->topo_render[t->topo_offsets[v]];
    for (int c = 0; c < 3; c++) now[3 * v + c] = t->positions[3 * v + c] + r->offsets[3 * (size_t)k + c];
  }
  for (uint32_t i = 0; i < e->n; i++) {
    double turn = fabs(dihedral(now, t, e->pair[i]) - dihedral(t->positions, t, e->pair[i]));
    if (turn > M_PI) turn = 2 * M_PI - turn;
    if (turn * 180 / M_PI > f.crease_deg) f.crease_deg = turn * 180 / M_PI;
    double jump = 0, len = 0;
    for (int c = 0; c < 3; c++) {
      uint32_t a = e->pair[i][0], b = e->pair[i][1];
      double da = now[3 * a + c] - t->positions[3 * a + c], db = now[3 * b + c] - t->positions[3 * b + c];
      jump += (da - db) * (da - db);
      len += pow(t->positions[3 * a + c] - t->positions[3 * b + c], 2);
    }
    if (len > 0 && sqrt(jump / len) > f.jump) f.jump = sqrt(jump / len);
  }
  free(now);
  return f;
}

/* ---- the editors ------------------------------------------------------------------------------------- */

static int rpc(client_conn *c, const char *method, const char *params, cJSON **out, double *ms) {
  cJSON *p = params ? cJSON_Parse(params) : NULL, *r = NULL, *e = NULL;
  uint64_t t0 = client_now_ns();
  int rc = client_rpc(c, method, p, 600000, &r, &e);
  if (ms) *ms = (double)(client_now_ns() - t0) / 1e6;
  if (rc) {
    char *t = e ? cJSON_PrintUnformatted(e) : NULL;
    fprintf(stderr, "deform-bench undo: %s: %s\n", method, t ? t : client_strerror(rc));
    free(t);
  }
  cJSON_Delete(p), cJSON_Delete(e);
  if (out && rc == 0) *out = r;
  else cJSON_Delete(r);
  return rc;
}

static int author(client_conn *c, int port, const char *name) {
  char err[256], p[64];
  if (client_connect(c, "127.0.0.1", port, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench undo: %s\n", err);
    return -1;
  }
  snprintf(p, sizeof(p), "{\"author\":\"%s\"}", name);
  return rpc(c, "hello", p, NULL, NULL);
}

/* brush.stroke params: 12 samples on the straight line from `from` to `to`, each put on the
 * nearest render vertex of the rest mesh. */
static void stroke(char *out, size_t cap, const client_replica *r, const char *brush, double radius, double strength,
                   const double *from, const double *to) {
  size_t n = (size_t)snprintf(out, cap, "{\"session\":\"demo\",\"brush\":\"%s\",\"radius\":%g,\"strength\":%g,"
                              "\"samples\":[", brush, radius, strength);
  const float *pos = r->mesh->positions;
  for (int i = 0; i < 12 && n < cap; i++) {
    double q[3], best = INFINITY;
    uint32_t bv = 0;
    for (int k = 0; k < 3; k++) q[k] = from[k] + (to[k] - from[k]) * i / 11.0;
    for (uint32_t v = 0; v < r->mesh->vertex_count; v++) {
      double d = pow(pos[3 * v] - q[0], 2) + pow(pos[3 * v + 1] - q[1], 2) + pow(pos[3 * v + 2] - q[2], 2);
      if (d < best) best = d, bv = v;
    }
    n += (size_t)snprintf(out + n, cap - n, "%s{\"center\":[%.9g,%.9g,%.9g]}", i ? "," : "", (double)pos[3 * bv],
                          (double)pos[3 * bv + 1], (double)pos[3 * bv + 2]);
  }
  if (n < cap) snprintf(out + n, cap - n, "]}");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One N: ana's inflate, bob's N strokes, ana's undo timed R times (with a redo between). */
static int run_one(const opts *o, int stream_port, int port, int later, const client_replica *rest,
                   const mesh_topology *t, const edges *e, const char *cmdline) {
  client_conn ana, bob;
  if (author(&ana, port, "ana") != 0 || author(&bob, port, "bob") != 0) return -1;
  char p[4096];
  const double cheek[3] = {0.0425, -0.02, 0.079};
  double a0[3] = {cheek[0] - 0.005, cheek[1], cheek[2]}, a1[3] = {cheek[0] + 0.005, cheek[1], cheek[2]};
  stroke(p, sizeof(p), rest, "inflate", 0.02, 1.0, a0, a1);
  int rc = rpc(&ana, "brush.stroke", p, NULL, NULL);
  for (int i = 0; rc == 0 && i < later && !g_stop; i++) { /* lines at the golden angle, through the cheek */
    double th = 2.39996323 * i, off = 0.012 * sin(1.3 * i);
    double dir[3] = {cos(th), sin(th), 0}, side[3] = {-sin(th) * off, cos(th) * off, 0}, b0[3], b1[3];
    for (int k = 0; k < 3; k++) b0[k] = cheek[k] + side[k] - 0.03 * dir[k], b1[k] = cheek[k] + side[k] + 0.03 * dir[k];
    stroke(p, sizeof(p), rest, "draw", 0.012, 0.2, b0, b1);
    rc = rpc(&bob, "brush.stroke", p, NULL, NULL);
  }
  client_replica now;
  shape_figures before = {0, 0}, after = {0, 0};
  if (rc == 0 && (rc = snapshot(stream_port, &now)) == 0) before = figures_of(t, e, &now), client_replica_fini(&now);
  double undo_ms[64], redo_ms[64];
  int restored = 0, overlapped = 0, reps = o->repeat;
  for (int i = 0; rc == 0 && i < reps; i++) {
    cJSON *res = NULL;
    rc = rpc(&ana, "history.undo", "{\"session\":\"demo\"}", &res, &undo_ms[i]);
    if (rc == 0) {
      cJSON *ov = cJSON_GetObjectItem(res, "overlapped"); /* (a deformd before issue 25 has none) */
      restored = cJSON_GetObjectItem(res, "restored")->valueint;
      overlapped = ov ? ov->valueint : -1;
      cJSON_Delete(res);
    }
    if (rc == 0 && i + 1 < reps) rc = rpc(&ana, "history.redo", "{\"session\":\"demo\"}", NULL, &redo_ms[i]);
  }
  if (rc == 0 && (rc = snapshot(stream_port, &now)) == 0) after = figures_of(t, e, &now), client_replica_fini(&now);
  client_close(&ana), client_close(&bob);
  if (rc) return rc;
  int nr = reps > 1 ? reps - 1 : 0;
  qsort(undo_ms, (size_t)reps, sizeof(double), cmp_double);
  qsort(redo_ms, (size_t)nr, sizeof(double), cmp_double);
  double redo_med = nr ? redo_ms[nr / 2] : NAN;
  char redo[32] = "null"; /* (no redo with --repeat 1) */
  if (nr) snprintf(redo, sizeof(redo), "%.3f", redo_med);
  if (o->json)
    printf("{\"command\":\"%s\",\"later_strokes\":%d,\"restored\":%d,\"overlapped\":%d,\"undo_ms\":%.3f,"
           "\"undo_best_ms\":%.3f,\"redo_ms\":%s,\"crease_before_deg\":%.2f,\"crease_after_deg\":%.2f,"
           "\"jump_before\":%.3f,\"jump_after\":%.3f}\n",
           cmdline, later, restored, overlapped, undo_ms[reps / 2], undo_ms[0], redo, before.crease_deg,
           after.crease_deg, before.jump, after.jump);
  else
    printf("%5d  %8d  %10d  %8.2f  %8.2f  %8.2f  %7.2f° → %6.2f°  %6.3f → %6.3f\n", later, restored, overlapped,
           undo_ms[reps / 2], undo_ms[0], redo_med, before.crease_deg, after.crease_deg, before.jump, after.jump);
  fflush(stdout);
  return 0;
}

static int parse(int argc, char **argv, opts *o) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--later") == 0 && v) {
      o->nlater = 0;
      char list[256], *save = NULL;
      snprintf(list, sizeof(list), "%s", argv[++i]);
      for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nlater == 16 || atoi(t) < 0 || atoi(t) > 10000) return -1;
        o->later[o->nlater++] = atoi(t);
      }
    } else if (strcmp(a, "--repeat") == 0 && v) {
      o->repeat = atoi(argv[++i]);
    } else if (strcmp(a, "--data") == 0 && v && strcmp(v, "none") == 0) {
      o->memory = 1, i++;
    } else if (strcmp(a, "--deformd") == 0 && v) {
      snprintf(o->deformd, sizeof(o->deformd), "%s", argv[++i]);
    } else {
      return -1;
    }
  }
  return o->nlater > 0 && o->repeat >= 1 && o->repeat <= 64 && o->deformd[0] ? 0 : -1;
}

int bench_undo_main(int argc, char **argv, const char *cmdline) {
  opts o = {{1, 10, 100}, 3, 5, 0, 0, ""};
  bench_default_deformd(o.deformd, sizeof(o.deformd));
  if (parse(argc, argv, &o) != 0) {
    fprintf(stderr, "usage: deform-bench undo [--later 1,10,100] [--repeat R (1-64)] [--data none] [--json] "
                    "[--deformd PATH]\n");
    return 2;
  }
  char dir[] = "/tmp/deform-bench-undo-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("deform-bench undo: mkdtemp");
    return 1;
  }
  const char *args[] = {"--demo", "--data", o.memory ? "none" : dir, "--reserve-mb", "0", NULL};
  bench_child child;
  char err[512];
  int rc = bench_child_start(o.deformd, args, &child, err, sizeof(err)), started = rc == 0;
  if (rc) fprintf(stderr, "deform-bench undo: %s\n", err);
  if (rc == 0 && (rc = bench_wait_session(child.rpc_port, "demo")) != 0)
    fprintf(stderr, "deform-bench undo: the demo session did not open\n");
  client_replica rest;
  mesh_topology t;
  edges e = {0, NULL};
  int have = rc == 0 && snapshot(child.stream_port, &rest) == 0;
  if (have && (mesh_topology_init(&t, rest.mesh, NULL, 0) != 0 || edges_init(&e, &t) != 0)) {
    fprintf(stderr, "deform-bench undo: out of memory\n");
    rc = 1;
  }
  if (!have) rc = 1;
  if (rc == 0 && !o.json)
    printf("# %s\n# later  restored  overlapped  undo ms  best ms  redo ms  crease before → after  jump before → after\n",
           cmdline);
  client_conn admin;
  int connected = rc == 0 && client_connect(&admin, "127.0.0.1", child.rpc_port, err, sizeof(err)) == 0;
  if (rc == 0 && !connected) fprintf(stderr, "deform-bench undo: %s\n", err), rc = 1;
  for (int i = 0; rc == 0 && i < o.nlater && !g_stop; i++) {
    if (i) /* a fresh demo session for each N */
      rc = rpc(&admin, "session.close", "{\"session\":\"demo\"}", NULL, NULL) ||
           rpc(&admin, "session.create", "{\"session\":\"demo\",\"mesh\":\"demo\"}", NULL, NULL);
    if (rc == 0) rc = run_one(&o, child.stream_port, child.rpc_port, o.later[i], &rest, &t, &e, cmdline);
  }
  if (connected) client_close(&admin);
  if (have) {
    free(e.pair);
    mesh_topology_fini(&t);
    client_replica_fini(&rest);
  }
  if (started) bench_child_stop(&child);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "deform-bench undo: could not remove %s\n", dir);
  return rc ? 1 : 0;
}
