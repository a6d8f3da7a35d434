/*
 * test_edit.c — the sculpting UI's logic without a window: picking against a second,
 * independent ray–triangle intersection (plane hit and barycentric signs, in double), and the
 * viewer's undo/redo against a real deformd (the server's own state is the oracle).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "test.h"
#include "vw_edit.h"
#include "vw_net.h"

static uint64_t seed = 0x2545f4914f6cdd1dull;
static double rnd(void) {
  seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
  return (double)(seed >> 11) * 0x1p-53;
}

/* The oracle: the nearest triangle along the ray, by plane intersection and the signs of the
 * sub-triangle areas (double precision). Returns the ray parameter, or INFINITY. */
static double oracle_pick(const float *p, const uint32_t *tri, uint32_t nt, const double o[3], const double d[3],
                          uint32_t *face) {
  double best = INFINITY;
  for (uint32_t f = 0; f < nt; f++) {
    double a[3], b[3], c[3], n[3];
    for (int k = 0; k < 3; k++)
      a[k] = p[3 * tri[3 * f] + k], b[k] = p[3 * tri[3 * f + 1] + k], c[k] = p[3 * tri[3 * f + 2] + k];
    double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    n[0] = e1[1] * e2[2] - e1[2] * e2[1], n[1] = e1[2] * e2[0] - e1[0] * e2[2], n[2] = e1[0] * e2[1] - e1[1] * e2[0];
    double den = n[0] * d[0] + n[1] * d[1] + n[2] * d[2];
    if (fabs(den) < 1e-300) continue;
    double t = (n[0] * (a[0] - o[0]) + n[1] * (a[1] - o[1]) + n[2] * (a[2] - o[2])) / den;
    if (!(t > 0) || t >= best) continue;
    double x[3] = {o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2]};
    const double *q[3] = {a, b, c};
    int inside = 1;
    for (int e = 0; e < 3 && inside; e++) {
      const double *u = q[e], *v = q[(e + 1) % 3];
      double uv[3] = {v[0] - u[0], v[1] - u[1], v[2] - u[2]}, ux[3] = {x[0] - u[0], x[1] - u[1], x[2] - u[2]};
      double cr[3] = {uv[1] * ux[2] - uv[2] * ux[1], uv[2] * ux[0] - uv[0] * ux[2], uv[0] * ux[1] - uv[1] * ux[0]};
      inside = cr[0] * n[0] + cr[1] * n[1] + cr[2] * n[2] >= -1e-12;
    }
    if (inside) best = t, *face = f;
  }
  return best;
}

TEST(picking_finds_the_nearest_triangle_and_its_nearest_corner) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_icosphere(4, 1.0, &m), NULL);
  uint32_t hits = 0, misses = 0;
  for (int i = 0; i < 2000; i++) {
    /* From a random point outside, towards a random point (inside the sphere, or near it). */
    double from[3], to[3], d[3];
    for (int k = 0; k < 3; k++) from[k] = (rnd() - 0.5) * 8, to[k] = (rnd() - 0.5) * 2.6;
    double len = 0;
    for (int k = 0; k < 3; k++) d[k] = to[k] - from[k], len += d[k] * d[k];
    if (from[0] * from[0] + from[1] * from[1] + from[2] * from[2] < 2.0) continue;
    float o[3] = {(float)from[0], (float)from[1], (float)from[2]}, df[3] = {(float)d[0], (float)d[1], (float)d[2]};
    double od[3] = {o[0], o[1], o[2]}, dd[3] = {df[0], df[1], df[2]};
    uint32_t face = 0, vertex = 0;
    double t = oracle_pick(m->positions, m->triangles, m->triangle_count, od, dd, &face);
    float hit[3];
    int got = vw_edit_pick(m->positions, m->triangles, m->triangle_count, o, df, hit, &vertex);
    if (!isfinite(t)) {
      ASSERT(!got);
      misses++;
      continue;
    }
    ASSERT(got);
    hits++;
    double want[3] = {od[0] + t * dd[0], od[1] + t * dd[1], od[2] + t * dd[2]};
    for (int k = 0; k < 3; k++) ASSERT_NEAR(hit[k], want[k], 1e-4);
    /* The vertex is the hit triangle's corner nearest the hit point. */
    double bestd = INFINITY;
    uint32_t bestv = 0;
    for (int c = 0; c < 3; c++) {
      uint32_t v = m->triangles[3 * face + c];
      double dx = m->positions[3 * v] - want[0], dy = m->positions[3 * v + 1] - want[1],
             dz = m->positions[3 * v + 2] - want[2];
      double dist = dx * dx + dy * dy + dz * dz;
      if (dist < bestd) bestd = dist, bestv = v;
    }
    if (vertex != bestv) { /* a hit on an edge may belong to either triangle: the distances tie */
      double dx = m->positions[3 * vertex] - want[0], dy = m->positions[3 * vertex + 1] - want[1],
             dz = m->positions[3 * vertex + 2] - want[2];
      ASSERT_NEAR(dx * dx + dy * dy + dz * dz, bestd, 1e-6);
    }
  }
  ASSERT(hits > 500 && misses > 100);
  mesh_destroy(m);
}

static void poll_to(vw_net *n, uint64_t version) {
  vw_net_changes ch;
  for (int i = 0; i < 2000; i++) {
    vw_net_poll(n, 10, &ch);
    if (n->state == VW_NET_LIVE && n->replica.version >= version) return;
  }
  test__fail(__FILE__, __LINE__, "the viewer did not reach version %llu (at %llu, %s)", (unsigned long long)version,
             (unsigned long long)n->replica.version, n->last_error);
}

static uint64_t server_version(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

/* Polls until the server has passed `version` and the viewer has followed it there. */
static void settle(harness *h, vw_net *n, uint64_t version) {
  for (int i = 0; i < 500 && server_version(h) < version; i++) {
    vw_net_changes ch;
    vw_net_poll(n, 10, &ch);
  }
  ASSERT(server_version(h) >= version);
  poll_to(n, server_version(h));
}

TEST(undo_and_redo_bring_the_server_back_and_forth_exactly) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_EDITOR);
  vw_net_set_author(&n, "ana");
  poll_to(&n, 0);
  ASSERT(vw_net_can_edit(&n));
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"blink_L\":0.4}}"));
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"9\":[0.001,0,0]}}"));
  settle(&h, &n, 2);
  uint32_t count;
  float *before = harness_server_positions(&h, "demo", &count);
  /* ana's two edits (two steps): two weights, then three vertices' offsets (one back to zero). */
  uint32_t t[2] = {0, 5}, v[3] = {9, 100, 20400};
  float w[2] = {0.7f, 0.25f};
  int32_t q[9] = {0, 0, 0, 1000, -2000, 3000, 50, 60, 70};
  ASSERT(vw_net_set_weights(&n, 2, t, w) != 0);
  settle(&h, &n, 3);
  float *weighted = harness_server_positions(&h, "demo", &count);
  ASSERT(vw_net_set_offsets(&n, 3, v, q) != 0);
  settle(&h, &n, 4);
  float *edited = harness_server_positions(&h, "demo", &count);
  ASSERT(memcmp(before, edited, sizeof(float) * 3 * count) != 0);
  /* Undo: the offsets step, then the weights step. */
  ASSERT(vw_net_history(&n, 0) != 0);
  settle(&h, &n, 5);
  float *undone1 = harness_server_positions(&h, "demo", &count);
  ASSERT(memcmp(weighted, undone1, sizeof(float) * 3 * count) == 0);
  /* The undo history is the server's: it survives a new connection under the same author. The
   * first connection (protocol 1) named ana in an EDIT AUTHOR, this one (protocol 2) in HELLO. */
  vw_net_fini(&n);
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_EDITOR);
  vw_net_set_protocol(&n, PROTO_VERSION_2, NULL);
  vw_net_set_author(&n, "ana");
  poll_to(&n, server_version(&h));
  ASSERT(vw_net_history(&n, 0) != 0);
  settle(&h, &n, 6);
  float *undone2 = harness_server_positions(&h, "demo", &count);
  ASSERT(memcmp(before, undone2, sizeof(float) * 3 * count) == 0);
  /* Nothing older of ana's: the server says so. */
  uint32_t errors = n.errors;
  ASSERT(vw_net_history(&n, 0) != 0);
  for (int i = 0; i < 200 && n.errors == errors; i++) {
    vw_net_changes ch;
    vw_net_poll(&n, 10, &ch);
  }
  ASSERT_EQ(n.errors, errors + 1);
  ASSERT(strstr(n.last_error, "nothing to undo") != NULL);
  /* Redo twice: the state of the edits again. */
  ASSERT(vw_net_history(&n, 1) != 0);
  settle(&h, &n, 7);
  ASSERT(vw_net_history(&n, 1) != 0);
  settle(&h, &n, 8);
  float *redone = harness_server_positions(&h, "demo", &count);
  ASSERT(memcmp(edited, redone, sizeof(float) * 3 * count) == 0);
  /* A viewer-role connection cannot undo. */
  vw_net ro;
  vw_net_init(&ro, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  poll_to(&ro, server_version(&h));
  ASSERT_EQ(vw_net_history(&ro, 0), 0);
  free(before), free(weighted), free(edited), free(undone1), free(undone2), free(redone);
  vw_net_fini(&ro);
  vw_net_fini(&n);
  harness_stop(&h);
}
