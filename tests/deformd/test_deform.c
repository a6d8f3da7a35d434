/*
 * test_deform.c — deformation gestures, reset and targets from the sculpt layer, through a real
 * deformd: what viewers rebuild equals what the solver computes on its own, drags coalesce,
 * and a sculpt turned into a target leaves the shape as it was.
 */
#include <math.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfm.h"
#include "dfm_brush.h"
#include "dfm_stroke.h"
#include "harness.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

/* The solver run directly, as the server runs it for this gesture (pick + radii, no anchors,
 * the smooth border by default): the expected quantised offsets of every render vertex after
 * the given drags. */
static int32_t *expected_offsets(dfm_mode mode, uint32_t pick, double handle_r, double roi_r, int iterations,
                                 const dfm_xform *drags, int ndrags, float quantum) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology t;
  mesh_adjacency a;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&a, t.vertex_count, t.triangles, t.triangle_count), NULL);
  uint32_t seed = t.render_to_topo[pick], *h, nh, *roi, nr;
  ASSERT_OK(dfm_geodesic_region(&a, t.positions, &seed, 1, handle_r, 0, &h, &nh), NULL);
  ASSERT_OK(dfm_geodesic_region(&a, t.positions, h, nh, roi_r, 0, &roi, &nr), NULL);
  double pivot[3] = {0, 0, 0};
  for (uint32_t i = 0; i < nh; i++)
    for (int k = 0; k < 3; k++) pivot[k] += t.positions[3 * h[i] + k] / nh;
  dfm_params p = {.mode = mode, .roi = roi, .roi_count = nr, .handle = h, .handle_count = nh, .iterations = iterations,
                  .smooth_border = 1};
  dfm_system *s = NULL;
  char err[256];
  ASSERT_OK(dfm_system_create(&t, &a, t.positions, &p, &s, err, sizeof(err)), err);
  double *out = malloc(sizeof(double) * 3 * t.vertex_count);
  for (int d = 0; d < ndrags; d++) {
    dfm_xform x = drags[d];
    memcpy(x.pivot, pivot, sizeof(pivot));
    ASSERT_OK(dfm_system_solve(s, &x, out, err, sizeof(err)), err);
  }
  int32_t *q = calloc(3 * m->vertex_count, sizeof(int32_t));
  uint8_t *in = calloc(t.vertex_count, 1);
  for (uint32_t i = 0; i < nr; i++) in[roi[i]] = 1;
  for (uint32_t i = 0; i < nh; i++) in[h[i]] = 1;
  for (uint32_t r = 0; r < m->vertex_count; r++) {
    uint32_t v = t.render_to_topo[r];
    if (!in[v]) continue;
    for (int k = 0; k < 3; k++) q[3 * r + k] = proto_quantize((float)(out[3 * v + k] - t.positions[3 * v + k]), quantum);
  }
  free(in);
  free(out);
  free(h);
  free(roi);
  dfm_system_destroy(s);
  mesh_adjacency_fini(&a);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  return q;
}

static uint64_t version_of(cJSON *r) {
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

TEST(an_arap_gesture_reaches_viewers_exactly_as_the_solver_computes_it) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  cJSON *b = harness_rpc_ok(&h, "deform.begin",
                            "{\"session\":\"demo\",\"mode\":\"arap\",\"pick\":2000,\"handle_radius\":0.01,"
                            "\"roi_radius\":0.05,\"iterations\":2}");
  uint32_t gesture = (uint32_t)cJSON_GetObjectItem(b, "gesture")->valuedouble;
  ASSERT(cJSON_GetObjectItem(b, "free")->valueint > 100);
  cJSON_Delete(b);
  dfm_xform drags[3];
  const double moves[3][3] = {{0, 0.004, 0}, {0.002, 0.008, 0.001}, {0.003, 0.012, 0.004}};
  uint64_t last = 0;
  for (int d = 0; d < 3; d++) {
    dfm_xform_identity(&drags[d]);
    memcpy(drags[d].translate, moves[d], sizeof(moves[d]));
    char params[256];
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%u,\"translate\":[%.17g,%.17g,%.17g]}", gesture,
             moves[d][0], moves[d][1], moves[d][2]);
    /* One at a time, so that each drag is solved (no coalescing) like the oracle's. */
    last = version_of(harness_rpc_ok(&h, "deform.drag", params));
  }
  char params[128];
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%u}", gesture);
  ASSERT_EQ(version_of(harness_rpc_ok(&h, "deform.end", params)), last);
  harness_follow(&v, &r, last, 20000);
  int32_t *want = expected_offsets(DFM_ARAP, 2000, 0.01, 0.05, 2, drags, 3, r.quantum);
  uint32_t moved = 0;
  for (uint32_t i = 0; i < 3 * r.mesh->vertex_count; i++) {
    float expect = proto_dequantize(want[i], r.quantum);
    if (memcmp(&expect, &r.offsets[i], sizeof(float)) != 0)
      test__fail(__FILE__, __LINE__, "offset %u: viewer %.9g, solver %.9g", i, r.offsets[i], expect);
    moved += want[i] != 0;
  }
  ASSERT(moved > 300);
  free(want);
  /* The gesture is gone once ended. */
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%u,\"translate\":[0,0,0]}", gesture);
  ASSERT_EQ(harness_rpc_err(&h, "deform.drag", params, NULL, 0), -32010);
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
}

TEST(drags_sent_while_the_factorisation_runs_coalesce_to_the_latest) {
  /* Laplacian editing is linear and has no memory, so the final shape is the solve of the last
   * drag however many drags were skipped. All requests are sent at once. */
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn rpc;
  char err[256];
  ASSERT_OK(client_connect(&rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  char batch[32768];
  size_t n = (size_t)snprintf(batch, sizeof(batch),
                              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"deform.begin\",\"params\":{\"session\":\"demo\","
                              "\"mode\":\"laplacian\",\"gesture\":77,\"pick\":5000,\"handle_radius\":0.008,\"roi_radius\":0.06}}\n");
  for (int d = 1; d <= 40; d++)
    n += (size_t)snprintf(batch + n, sizeof(batch) - n,
                          "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"deform.drag\",\"params\":{\"session\":\"demo\","
                          "\"gesture\":77,\"translate\":[0,%.17g,0]}}\n",
                          d + 1, 0.0005 * d);
  ASSERT_OK(client_send(&rpc, batch, n), NULL);
  /* 41 answers; drag versions never go down, and the last one carries the final state. */
  uint64_t prev = 0, final = 0;
  int drags = 0;
  for (int i = 0; i < 41; i++) {
    char line[4096];
    size_t len = 0;
    for (;;) {
      ASSERT(recv(rpc.fd, line + len, 1, 0) == 1);
      if (line[len] == '\n') break;
      len++;
    }
    line[len] = '\0';
    cJSON *o = cJSON_Parse(line);
    ASSERT(o != NULL && cJSON_GetObjectItem(o, "result") != NULL);
    int id = cJSON_GetObjectItem(o, "id")->valueint;
    if (id > 1) {
      uint64_t v = (uint64_t)cJSON_GetObjectItem(cJSON_GetObjectItem(o, "result"), "version")->valuedouble;
      ASSERT(v >= prev);
      prev = v;
      if (id == 41) final = v;
      drags++;
    }
    cJSON_Delete(o);
  }
  ASSERT_EQ(drags, 40);
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  uint64_t solves = (uint64_t)cJSON_GetObjectItem(st, "version")->valuedouble;
  cJSON_Delete(st);
  fprintf(stderr, "40 drags, %llu solves applied\n", (unsigned long long)solves);
  ASSERT(solves < 40);
  ASSERT_EQ(final, solves);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  dfm_xform x;
  dfm_xform_identity(&x);
  x.translate[1] = 0.0005 * 40;
  int32_t *want = expected_offsets(DFM_LAPLACIAN, 5000, 0.008, 0.06, 1, &x, 1, r.quantum);
  for (uint32_t i = 0; i < 3 * r.mesh->vertex_count; i++) {
    float expect = proto_dequantize(want[i], r.quantum);
    if (memcmp(&expect, &r.offsets[i], sizeof(float)) != 0)
      test__fail(__FILE__, __LINE__, "offset %u: viewer %.9g, last drag's solve %.9g", i, r.offsets[i], expect);
  }
  free(want);
  client_replica_fini(&r);
  client_close(&v);
  client_close(&rpc);
  harness_stop(&h);
}

TEST(binary_gesture_edits_stream_deltas_and_name_failed_requests) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn ed, v;
  client_replica er, vr;
  harness_join(&h, &v, &vr, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_buf b;
  proto_buf_init(&b);
  proto_gesture_begin gb = {0};
  gb.gesture = 9;
  gb.mode = DFM_BIHARMONIC;
  gb.iterations = 1;
  gb.pick = 3000;
  gb.handle_radius = 0.01f;
  gb.roi_radius = 0.05f;
  ASSERT_OK(proto_encode_edit_gesture_begin(&b, 1, &gb, NULL, NULL, NULL), NULL);
  proto_gesture_drag gd = {9, {0.0f, 0.0f, 0.01f}, {0, 0, 0, 1}, 0, {0, 0, 0}};
  ASSERT_OK(proto_encode_edit_gesture_drag(&b, 2, &gd), NULL);
  ASSERT_OK(proto_encode_edit_gesture_end(&b, 3, 9), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  harness_follow(&v, &vr, 1, 20000);
  uint32_t moved = 0;
  for (uint32_t i = 0; i < 3 * vr.mesh->vertex_count; i++) moved += vr.offsets[i] != 0.0f;
  ASSERT(moved > 100);
  /* A drag for a gesture that does not exist, and a begin with a vertex out of range. */
  gd.gesture = 12345;
  ASSERT_OK(proto_encode_edit_gesture_drag(&b, 4, &gd), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  uint32_t rid;
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 4);
  gb.gesture = 10;
  gb.pick = PROTO_NO_PICK;
  gb.handle.count = 1;
  uint32_t bad = 4000000;
  ASSERT_OK(proto_encode_edit_gesture_begin(&b, 5, &gb, &bad, NULL, NULL), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 5);
  /* A zero quaternion is refused as over JSON-RPC (gesture 11 is open, so only the rotation is wrong). */
  gb.gesture = 11;
  gb.pick = 3000;
  gb.handle.count = 0;
  ASSERT_OK(proto_encode_edit_gesture_begin(&b, 7, &gb, NULL, NULL, NULL), NULL);
  proto_gesture_drag zero = {11, {0.0f, 0.0f, 0.01f}, {0, 0, 0, 0}, 0, {0, 0, 0}};
  ASSERT_OK(proto_encode_edit_gesture_drag(&b, 8, &zero), NULL);
  ASSERT_OK(proto_encode_edit_gesture_end(&b, 9, 11), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 20000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 8);
  /* RESET over the binary port puts everything back. */
  ASSERT_OK(proto_encode_edit_reset(&b, 6, 0, NULL), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  harness_follow(&v, &vr, 2, 10000);
  for (uint32_t i = 0; i < 3 * vr.mesh->vertex_count; i++) ASSERT(vr.offsets[i] == 0.0f);
  proto_buf_fini(&b);
  client_replica_fini(&er);
  client_replica_fini(&vr);
  client_close(&ed);
  client_close(&v);
  harness_stop(&h);
}

TEST(a_sculpt_turned_into_a_target_reaches_every_viewer_and_keeps_the_shape) {
  harness h;
  const char *const args[] = {"--demo", "--soft-limit", "65536", "--slow-timeout-ms", "60000", NULL};
  harness_start(&h, "demo", args);
  client_conn v, slow;
  client_replica vr, sr;
  harness_join(&h, &v, &vr, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &slow, &sr, "demo", PROTO_ROLE_VIEWER, NULL); /* reads only at the end */
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}"));
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump\"}", msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "empty");
  cJSON_Delete(harness_rpc_ok(&h, "deform.begin", "{\"session\":\"demo\",\"mode\":\"laplacian\",\"gesture\":5,\"pick\":1000,\"handle_radius\":0.01,\"roi_radius\":0.04}"));
  cJSON_Delete(harness_rpc_ok(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":5,\"translate\":[0,0,0.01]}"));
  cJSON_Delete(harness_rpc_ok(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":5}"));
  /* Big edits (every vertex) until `slow`, which reads nothing, has fallen behind: then the
   * TARGET frame can only reach it through its catch-up. */
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  uint32_t nv = vr.mesh->vertex_count;
  uint32_t *idx = malloc(sizeof(uint32_t) * nv);
  int32_t *q = malloc(sizeof(int32_t) * 3 * nv);
  for (uint32_t i = 0; i < nv; i++) idx[i] = i;
  proto_buf b;
  proto_buf_init(&b);
  for (int e = 1, lagging = 0; e <= 300 && !lagging; e++) {
    for (uint32_t i = 0; i < 3 * nv; i++) q[i] = (int32_t)((i * 31u + (uint32_t)e * 977u) % 4001u) - 2000;
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e, nv, idx, q), NULL);
    ASSERT_OK(client_send_buf(&ed, &b), NULL);
    uint64_t ver = version_of(harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}"));
    harness_follow(&v, &vr, ver, 10000);
    harness_follow(&ed, &er, ver, 10000);
    cJSON *st = harness_rpc_ok(&h, "server.stats", NULL);
    lagging = cJSON_GetObjectItem(st, "lagging_connections")->valueint > 0;
    cJSON_Delete(st);
  }
  proto_buf_fini(&b);
  free(idx);
  free(q);
  uint64_t before_v = version_of(harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}"));
  harness_follow(&v, &vr, before_v, 10000);
  float *before = malloc(sizeof(float) * 3 * vr.mesh->vertex_count);
  ASSERT_OK(client_replica_positions(&vr, before), NULL);
  cJSON *r = harness_rpc_ok(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump\"}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "index")->valueint, 68);
  uint64_t created = version_of(r);
  ASSERT_EQ(harness_rpc_err(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"smile_L\"}", msg, sizeof(msg)), -32006);
  /* Lots of traffic for the slow viewer to fall behind on, then a weight for the new target. */
  for (int i = 0; i < 200; i++) {
    char p[256];
    snprintf(p, sizeof(p), "{\"session\":\"demo\",\"offsets\":{\"%d\":[0.001,0,0]}}", 20000 + i);
    cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", p));
  }
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"bump\":0.25}}"));
  uint64_t final = version_of(harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}"));
  /* The live viewer got the TARGET frame: 69 targets, weight 1, shape unchanged at `created`. */
  harness_follow(&v, &vr, created, 10000);
  ASSERT_EQ(vr.mesh->target_count, 69);
  ASSERT(strcmp(vr.mesh->targets[68].name, "bump") == 0);
  ASSERT(vr.weights[68] == 1.0f);
  float *after = malloc(sizeof(float) * 3 * vr.mesh->vertex_count);
  ASSERT_OK(client_replica_positions(&vr, after), NULL);
  for (uint32_t i = 0; i < 3 * vr.mesh->vertex_count; i++) ASSERT_NEAR(after[i], before[i], 1e-7);
  for (uint32_t i = 0; i < 3 * vr.mesh->vertex_count; i++) ASSERT(vr.offsets[i] == 0.0f);
  harness_follow(&v, &vr, final, 10000);
  /* The slow viewer, the live one and a late joiner all end with the server's shape. */
  int catchups = harness_follow(&slow, &sr, final, 20000);
  ASSERT(catchups >= 1);
  client_conn late;
  client_replica lr;
  harness_join(&h, &late, &lr, "demo", PROTO_ROLE_VIEWER, NULL);
  ASSERT_EQ(lr.mesh->target_count, 69);
  uint32_t n;
  float *server = harness_server_positions(&h, "demo", &n);
  client_replica *all[3] = {&vr, &sr, &lr};
  for (int k = 0; k < 3; k++) {
    ASSERT_EQ(all[k]->mesh->target_count, 69);
    float *p = malloc(sizeof(float) * 3 * n);
    ASSERT_OK(client_replica_positions(all[k], p), NULL);
    for (uint32_t i = 0; i < 3 * n; i++)
      if (memcmp(&p[i], &server[i], sizeof(float)) != 0)
        test__fail(__FILE__, __LINE__, "viewer %d, coordinate %u: %.9g vs the server's %.9g", k, i, p[i], server[i]);
    free(p);
  }
  cJSON *st = harness_rpc_ok(&h, "server.stats", NULL);
  fprintf(stderr, "frames coalesced: %d\n", cJSON_GetObjectItem(st, "frames_coalesced")->valueint);
  cJSON_Delete(st);
  free(server);
  free(before);
  free(after);
  client_replica_fini(&vr);
  client_replica_fini(&sr);
  client_replica_fini(&lr);
  client_replica_fini(&er);
  client_close(&v);
  client_close(&slow);
  client_close(&late);
  client_close(&ed);
  harness_stop(&h);
}

TEST(gesture_requests_with_bad_parameters_are_refused) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\"}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "handle");
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"mode\":\"melt\",\"pick\":1}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":99999999}", msg, sizeof(msg)), -32006);
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"nope\",\"pick\":1}", msg, sizeof(msg)), -32001);
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"iterations\":0}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":3}", msg, sizeof(msg)), -32010);
  ASSERT_EQ(harness_rpc_err(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":\"x\"}", msg, sizeof(msg)), -32602);
  cJSON_Delete(harness_rpc_ok(&h, "deform.begin", "{\"session\":\"demo\",\"gesture\":3,\"pick\":1,\"roi_radius\":0.02}"));
  ASSERT_EQ(harness_rpc_err(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":3,\"rotate\":[0,0,0,0]}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":3,\"translate\":[1,2]}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"gesture\":3,\"pick\":1}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "already in progress");
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"gesture\":4,\"pick\":1,\"roi\":[]}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "roi");
  ASSERT_EQ(harness_rpc_err(&h, "deform.reset", "{\"session\":\"demo\",\"vertices\":[]}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "omit it");
  /* While gesture 3 is open its sculpt cannot be baked into a target; once it ends, it can. */
  ASSERT_EQ(harness_rpc_err(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"t\"}", msg, sizeof(msg)), -32012);
  ASSERT_STR_CONTAINS(msg, "in progress");
  /* Nothing changed the state. */
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "version")->valueint, 0);
  cJSON_Delete(st);
  harness_stop(&h);
}

/* The brush oracle: the demo head at rest (no weights, no offsets), the strokes applied with
 * dfm_stroke_apply directly (the same path, dabs placed the same way), displacements quantised like the server does. */
static int32_t *expected_brush_offsets(const dfm_brush *brushes, const dfm_brush_sample *const *samples,
                                       const uint32_t *counts, int nstrokes, float quantum) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology t;
  mesh_adjacency a;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&a, t.vertex_count, t.triangles, t.triangle_count), NULL);
  int32_t *q = calloc(3 * m->vertex_count, sizeof(int32_t));
  double *p = malloc(sizeof(double) * 3 * t.vertex_count), *p0 = malloc(sizeof(double) * 3 * t.vertex_count);
  uint8_t *moved = malloc(t.vertex_count);
  for (int k = 0; k < nstrokes; k++) {
    /* The current shape: base + dequantised offsets, per topology vertex. */
    for (uint32_t v = 0; v < t.vertex_count; v++) {
      uint32_t r = t.topo_render[t.topo_offsets[v]];
      for (int c = 0; c < 3; c++) p[3 * v + c] = (float)(m->positions[3 * r + c] + proto_dequantize(q[3 * r + c], quantum));
    }
    memcpy(p0, p, sizeof(double) * 3 * t.vertex_count);
    memset(moved, 0, t.vertex_count);
    char err[256];
    ASSERT_OK(dfm_stroke_apply(&brushes[k], &a, t.triangles, t.triangle_count, samples[k], counts[k], p, moved, NULL, NULL, err,
                               sizeof(err)),
              err);
    for (uint32_t r = 0; r < m->vertex_count; r++) {
      uint32_t v = t.render_to_topo[r];
      if (!moved[v]) continue;
      for (int c = 0; c < 3; c++) {
        float off = proto_dequantize(q[3 * r + c], quantum) + (float)(p[3 * v + c] - p0[3 * v + c]);
        q[3 * r + c] = proto_quantize(off, quantum);
      }
    }
  }
  free(p);
  free(p0);
  free(moved);
  mesh_adjacency_fini(&a);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  return q;
}

TEST(brush_strokes_reach_viewers_exactly_as_the_brush_computes_them_and_in_order) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  /* Two strokes sent back to back: an inflate with X mirror, then a grab over the same area. */
  const char *first =
      "{\"session\":\"demo\",\"brush\":\"inflate\",\"falloff\":\"smoothstep\",\"radius\":0.02,\"strength\":0.3,"
      "\"mirror_x\":true,\"samples\":[{\"center\":[0.03,0.02,0.09]},{\"center\":[0.035,0.025,0.088]}]}";
  const char *second =
      "{\"session\":\"demo\",\"brush\":\"grab\",\"falloff\":\"gaussian\",\"radius\":0.025,\"strength\":1,"
      "\"samples\":[{\"center\":[0.03,0.02,0.09],\"direction\":[0,0.004,0.002]}]}";
  client_conn rpc;
  char err[256];
  ASSERT_OK(client_connect(&rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  char batch[2048];
  size_t n = (size_t)snprintf(batch, sizeof(batch),
                              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"brush.stroke\",\"params\":%s}\n"
                              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"brush.stroke\",\"params\":%s}\n",
                              first, second);
  ASSERT_OK(client_send(&rpc, batch, n), NULL);
  cJSON *res, *e, *sp = cJSON_Parse("{\"session\":\"demo\"}");
  ASSERT_EQ(client_rpc(&rpc, "state.get", sp, 10000, &res, &e), 0); /* answered after both strokes queued */
  cJSON_Delete(sp);
  cJSON_Delete(res);
  for (int i = 0; i < 60; i++) {
    uint64_t ver = version_of(harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}"));
    if (ver == 2) break;
    usleep(50000);
  }
  harness_follow(&v, &r, 2, 20000);
  dfm_brush brushes[2] = {{.kind = DFM_BRUSH_INFLATE, .falloff = DFM_FALLOFF_SMOOTHSTEP, .mirror_x = 1},
                          {.kind = DFM_BRUSH_GRAB, .falloff = DFM_FALLOFF_GAUSSIAN}};
  dfm_brush_sample s1[2] = {{{0.03, 0.02, 0.09}, {0, 0, 0}, 0.02, 0.3}, {{0.035, 0.025, 0.088}, {0, 0, 0}, 0.02, 0.3}};
  dfm_brush_sample s2[1] = {{{0.03, 0.02, 0.09}, {0, 0.004, 0.002}, 0.025, 1}};
  const dfm_brush_sample *samples[2] = {s1, s2};
  uint32_t counts[2] = {2, 1};
  int32_t *want = expected_brush_offsets(brushes, samples, counts, 2, r.quantum);
  uint32_t moved = 0;
  for (uint32_t i = 0; i < 3 * r.mesh->vertex_count; i++) {
    float expect = proto_dequantize(want[i], r.quantum);
    if (memcmp(&expect, &r.offsets[i], sizeof(float)) != 0)
      test__fail(__FILE__, __LINE__, "offset %u: viewer %.9g, brush %.9g", i, r.offsets[i], expect);
    moved += want[i] != 0;
  }
  ASSERT(moved > 100);
  free(want);
  /* Refusals. */
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"melt\",\"radius\":1,\"samples\":[{\"center\":[0,0,0]}]}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"grab\",\"radius\":1,\"samples\":[]}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"grab\",\"samples\":[{\"center\":[0,0,0]}]}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "radius");
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"grab\",\"radius\":1,\"samples\":[{\"center\":[0,0]}]}", msg, sizeof(msg)), -32602);
  client_close(&rpc);
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
}

/* The sculpt after the session reaches `version`, printed (cJSON's own, so two equal sculpts
 * print equal). */
static char *sculpt_at(harness *h, uint64_t version) {
  for (int i = 0; i < 200 && version_of(harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}")) < version; i++) usleep(50000);
  cJSON *r = harness_rpc_ok(h, "sculpt.get", "{\"session\":\"demo\"}");
  char *out = cJSON_PrintUnformatted(cJSON_GetObjectItem(r, "offsets"));
  cJSON_Delete(r);
  return out;
}

/* Issue 26: brush.stroke's "mirror" names the plane; "x" is "mirror_x": true. */
TEST(brush_stroke_mirror_x_is_mirror_x_y_mirrors_elsewhere_and_bad_planes_are_refused) {
  harness h;
  harness_start(&h, "demo", demo_args);
  static const char stroke[] = "{\"session\":\"demo\",\"brush\":\"inflate\",\"radius\":0.02,\"strength\":0.3,%s,"
                               "\"samples\":[{\"center\":[0.03,-0.05,0.08]},{\"center\":[0.035,-0.048,0.079]}]}";
  static const char *const how[] = {"\"mirror_x\":true", "\"mirror\":\"x\"", "\"mirror\":\"y\"", "\"mirror\":\"none\""};
  char *sculpt[4], params[512];
  uint64_t version = 0;
  for (int k = 0; k < 4; k++) {
    if (k) {
      harness_rpc_done(&h, "deform.reset", "{\"session\":\"demo\"}");
      free(sculpt_at(&h, ++version));
    }
    snprintf(params, sizeof(params), stroke, how[k]);
    harness_rpc_done(&h, "brush.stroke", params);
    sculpt[k] = sculpt_at(&h, ++version);
  }
  fprintf(stderr, "sculpt sizes: mirror_x %zu, mirror x %zu, mirror y %zu, none %zu bytes\n", strlen(sculpt[0]),
          strlen(sculpt[1]), strlen(sculpt[2]), strlen(sculpt[3]));
  ASSERT(strcmp(sculpt[0], sculpt[1]) == 0);
  ASSERT(strcmp(sculpt[2], sculpt[1]) != 0 && strcmp(sculpt[2], sculpt[3]) != 0);
  ASSERT(strlen(sculpt[2]) > strlen(sculpt[3]) + strlen(sculpt[3]) / 2); /* y mirrors: about twice the vertices */
  for (int k = 0; k < 4; k++) free(sculpt[k]);
  char msg[256];
  snprintf(params, sizeof(params), stroke, "\"mirror\":\"w\"");
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", params, msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "\"mirror\" must be");
  snprintf(params, sizeof(params), stroke, "\"mirror_x\":true,\"mirror\":\"z\"");
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", params, msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "one plane");
  harness_stop(&h);
}

TEST(a_binary_brush_edit_streams_a_delta) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_buf b;
  proto_buf_init(&b);
  proto_brush_sample smp = {{0.0f, 0.05f, 0.1f}, {0, 0, 0}, 0.03f, 0.5f};
  /* Inflate: smooth would move nothing here, the head being unsculpted (it smooths offsets). */
  ASSERT_OK(proto_encode_edit_brush(&b, 8, 1 /* inflate */, 1 /* linear */, 0, 1, &smp), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  harness_follow(&ed, &er, 1, 20000);
  uint32_t moved = 0;
  for (uint32_t i = 0; i < 3 * er.mesh->vertex_count; i++) moved += er.offsets[i] != 0.0f;
  ASSERT(moved > 10);
  smp.radius = -1.0f; /* refused by the brush: an ERROR naming request 9 */
  ASSERT_OK(proto_encode_edit_brush(&b, 9, 0, 0, 0, 1, &smp), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  uint32_t rid;
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 9);
  proto_buf_fini(&b);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

/* JSON-RPC "multires": the answer says which path the gesture took (the proxy's size with it),
 * a drag on the proxy path applies, and a value that is not a boolean is refused. */
TEST(a_gesture_asked_for_the_multiresolution_path_says_so_and_its_drags_apply) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"multires\":\"yes\"}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "multires");
  cJSON *b = harness_rpc_ok(&h, "deform.begin", "{\"session\":\"demo\",\"gesture\":8,\"pick\":2000,\"handle_radius\":0.01}");
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(b, "multires"))); /* 41k vertices: below DFM_MULTIRES_MIN */
  ASSERT(cJSON_GetObjectItem(b, "proxy_vertices") == NULL);
  cJSON_Delete(b);
  cJSON_Delete(harness_rpc_ok(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":8}"));
  b = harness_rpc_ok(&h, "deform.begin",
                     "{\"session\":\"demo\",\"gesture\":9,\"pick\":2000,\"handle_radius\":0.01,\"border\":\"sharp\",\"multires\":true}");
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(b, "multires")));
  double proxy = cJSON_GetObjectItem(b, "proxy_vertices")->valuedouble;
  ASSERT(proxy > 1000 && proxy <= 40962);
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(b, "proxy_reused"))); /* the session's first on the path makes it */
  cJSON_Delete(b);
  uint64_t before = version_of(harness_rpc_ok(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":9,\"translate\":[0,0,0]}"));
  uint64_t after = version_of(harness_rpc_ok(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":9,\"translate\":[0,0.01,0]}"));
  ASSERT(after > before);
  cJSON_Delete(harness_rpc_ok(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":9}"));
  /* The next one binds the moved shape to the session's proxy, and its drags apply too. */
  b = harness_rpc_ok(&h, "deform.begin",
                     "{\"session\":\"demo\",\"gesture\":10,\"pick\":2000,\"handle_radius\":0.01,\"border\":\"sharp\",\"multires\":true}");
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(b, "proxy_reused")));
  ASSERT_EQ(cJSON_GetObjectItem(b, "proxy_vertices")->valuedouble, proxy);
  cJSON_Delete(b);
  ASSERT(version_of(harness_rpc_ok(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":10,\"translate\":[0,0.01,0]}")) > after);
  cJSON_Delete(harness_rpc_ok(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":10}"));
  harness_stop(&h);
}

/* Begins gesture `id` on the demo head (ARAP, sharp border, whole mesh, picked at vertex 2000)
 * with `extra` keys, drags it through `drags` translations, one answer at a time so none
 * collapse, and returns deform.end's answer. */
static cJSON *dragged_gesture(harness *h, uint32_t id, const char *extra, const char *const *drags, int count) {
  char params[512];
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%u,\"mode\":\"arap\",\"pick\":2000,"
           "\"handle_radius\":0.01,\"border\":\"sharp\"%s}", id, extra);
  cJSON_Delete(harness_rpc_ok(h, "deform.begin", params));
  for (int i = 0; i < count; i++) {
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%u,\"translate\":%s}", id, drags[i]);
    cJSON_Delete(harness_rpc_ok(h, "deform.drag", params));
  }
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%u}", id);
  return harness_rpc_ok(h, "deform.end", params);
}

static const cJSON *exact_distance(const cJSON *end) {
  const cJSON *d = cJSON_GetObjectItem(end, "exact_distance");
  ASSERT(cJSON_IsObject(d));
  return d;
}

static double number(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItem(o, key);
  ASSERT(cJSON_IsNumber(v));
  return v->valuedouble;
}

/* JSON-RPC "measure_exact": deform.end of a multiresolution gesture answers how far the shape it
 * left lies from the exact solve of the same drags. The oracle: the same drags dragged live
 * through an exact gesture from the same shape (the first one reset in between), both shapes
 * read back from the server. The replay is charged to the session's budget; a gesture that was
 * solved exactly, or dragged not at all, says so. */
TEST(a_measured_multires_gesture_ends_with_its_distance_from_the_same_drags_solved_exactly) {
  harness h;
  harness_start(&h, "demo", demo_args);
  uint32_t n, n2;
  float *rest = harness_server_positions(&h, "demo", &n);
  double lo[3] = {1e30, 1e30, 1e30}, hi[3] = {-1e30, -1e30, -1e30}, diag = 0;
  for (uint32_t v = 0; v < n; v++)
    for (int k = 0; k < 3; k++) {
      if (rest[3 * v + k] < lo[k]) lo[k] = rest[3 * v + k];
      if (rest[3 * v + k] > hi[k]) hi[k] = rest[3 * v + k];
    }
  for (int k = 0; k < 3; k++) diag += (hi[k] - lo[k]) * (hi[k] - lo[k]);
  diag = sqrt(diag);
  const char *const drags[] = {"[0,0.01,0]", "[0.004,0.02,0.002]", "[0.01,0.03,0.006]", "[0.012,0.04,0.01]"};
  /* A proxy of 4,000 of the head's 41,000 vertices: far enough from the mesh to measure. */
  cJSON *end = dragged_gesture(&h, 21, ",\"multires\":true,\"proxy_vertices\":4000,\"measure_exact\":true", drags, 4);
  const cJSON *d = exact_distance(end);
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(d, "measured")));
  ASSERT_EQ(number(d, "drags"), 4);
  double max_frac = number(d, "max_over_diag"), rms_frac = number(d, "rms_over_diag");
  ASSERT(number(d, "exact_prefactor_ms") > 0 && number(d, "exact_replay_ms") > 0);
  ASSERT(fabs(number(d, "max") - max_frac * diag) <= 1e-9 * diag);
  float *multires = harness_server_positions(&h, "demo", &n2);
  ASSERT_EQ(n2, n);
  cJSON_Delete(end);
  cJSON_Delete(harness_rpc_ok(&h, "deform.reset", "{\"session\":\"demo\"}"));
  end = dragged_gesture(&h, 22, ",\"multires\":false", drags, 4);
  ASSERT(cJSON_GetObjectItem(end, "exact_distance") == NULL); /* not asked: the answer is as it was */
  cJSON_Delete(end);
  float *exact = harness_server_positions(&h, "demo", &n2);
  ASSERT_EQ(n2, n);
  double worst = 0, sum = 0, moved = 0;
  for (uint32_t v = 0; v < n; v++) {
    double d2 = 0, m2 = 0;
    for (int k = 0; k < 3; k++) {
      d2 += (multires[3 * v + k] - exact[3 * v + k]) * (multires[3 * v + k] - exact[3 * v + k]);
      m2 += (exact[3 * v + k] - rest[3 * v + k]) * (exact[3 * v + k] - rest[3 * v + k]);
    }
    worst = fmax(worst, d2), sum += d2, moved = fmax(moved, m2);
  }
  /* Both shapes went through quantised offsets (diag / 2^20) and the OBJ's digits. */
  fprintf(stderr, "measured max %.4g rms %.4g; live max %.4g rms %.4g (over the diagonal); handle moved %.4g\n",
          max_frac, rms_frac, sqrt(worst) / diag, sqrt(sum / n) / diag, sqrt(moved) / diag);
  ASSERT(sqrt(moved) > 0.02 * diag);                   /* the drags did move the head */
  ASSERT(max_frac > 1e-4 && max_frac < 0.5);            /* the proxy is not the mesh, but close to it */
  ASSERT(fabs(sqrt(worst) / diag - max_frac) <= 0.005 * max_frac + 1e-5);
  /* The RMS: over render vertices here, welded ones in the answer (seams count twice here). */
  ASSERT(fabs(sqrt(sum / n) / diag - rms_frac) <= 0.02 * rms_frac + 1e-5);
  free(rest);
  free(multires);
  free(exact);
  /* Solved exactly: nothing to measure, and the answer says why. */
  end = dragged_gesture(&h, 23, ",\"multires\":false,\"measure_exact\":true", drags, 1);
  d = exact_distance(end);
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(d, "measured")));
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(d, "reason")->valuestring, "solved exactly");
  cJSON_Delete(end);
  /* Never dragged: both are the shape at begin. */
  end = dragged_gesture(&h, 24, ",\"multires\":true,\"measure_exact\":true", drags, 0);
  d = exact_distance(end);
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(d, "measured")));
  ASSERT_EQ(number(d, "drags"), 0);
  ASSERT_EQ(number(d, "max_over_diag"), 0);
  cJSON_Delete(end);
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"measure_exact\":1}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "measure_exact");
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"proxy_vertices\":99}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "proxy_vertices");
  harness_stop(&h);
  /* 64 MiB a session: the gesture on its proxy fits (about 30 MiB), its exact replay (about
   * 100 MiB more) does not, and the end says so instead of passing the budget. */
  const char *const small[] = {"--demo", "--session-memory-mb", "64", NULL};
  harness_start(&h, "demo", small);
  end = dragged_gesture(&h, 25, ",\"multires\":true,\"proxy_vertices\":4000,\"measure_exact\":true", drags, 2);
  d = exact_distance(end);
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(d, "measured")));
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(d, "reason")->valuestring, "--session-memory-mb");
  ASSERT(number(end, "version") >= 2);
  cJSON_Delete(end);
  harness_stop(&h);
}

/* Whole-mesh ARAP gestures (sharp border, a handle at vertex 0) begun and ended until one
 * says it took the session's mesh order, at most `tries`; returns 0 if none did, else 1, or 2
 * when that gesture also took the session's symbolic analysis ("mesh_analysis"). Both are
 * computed on the pool when the session opens, so the first gesture may come before them. */
static int gestures_until_mesh_order(harness *h, const char *session, const char *extra, int tries) {
  for (int i = 0; i < tries; i++) {
    char params[512];
    snprintf(params, sizeof(params), "{\"session\":\"%s\",\"mode\":\"arap\",\"border\":\"sharp\",\"pick\":0,"
             "\"handle_radius\":0.002%s}", session, extra);
    cJSON *b = harness_rpc_ok(h, "deform.begin", params);
    int took = cJSON_IsTrue(cJSON_GetObjectItem(b, "mesh_order"));
    took += took && cJSON_IsTrue(cJSON_GetObjectItem(b, "mesh_analysis"));
    ASSERT(took || !cJSON_GetObjectItem(b, "mesh_analysis"));
    snprintf(params, sizeof(params), "{\"session\":\"%s\",\"gesture\":%u}", session,
             (uint32_t)cJSON_GetObjectItem(b, "gesture")->valuedouble);
    cJSON_Delete(b);
    harness_rpc_done(h, "deform.end", params);
    if (took) return took;
  }
  return 0;
}

TEST(a_scan_sessions_whole_mesh_gestures_take_its_mesh_order_once_computed_and_again_after_kill_9) {
  char folder[1024];
  snprintf(folder, sizeof(folder), "%s", test_dragon("dragon_vrip_res2.ply")); /* 100,250 vertices */
  *strrchr(folder, '/') = '\0';
  const char *dir = test_tmp_path("mesh-order");
  const char *const args[] = {"--data", dir, "--mesh-dir", folder, NULL};
  harness h;
  harness_start(&h, NULL, args);
  harness_rpc_done(&h, "session.create", "{\"session\":\"dragon\",\"mesh\":\"dragon_vrip_res2.ply\"}");
  harness_rpc_done(&h, "session.create", "{\"session\":\"dragon2\",\"mesh\":\"dragon_vrip_res2.ply\"}");
  harness_rpc_done(&h, "session.create", "{\"session\":\"head\",\"mesh\":\"demo\"}");
  ASSERT_EQ(gestures_until_mesh_order(&h, "dragon", "", 50), 2);
  ASSERT_EQ(gestures_until_mesh_order(&h, "dragon2", "", 50), 2); /* made after dragon's, one at a time */
  /* A region's system keeps its own AMD; so does a mesh under DFM_MESH_ORDER_MIN vertices. */
  ASSERT(!gestures_until_mesh_order(&h, "dragon", ",\"roi_radius\":0.02", 1));
  ASSERT(!gestures_until_mesh_order(&h, "head", "", 2));
  harness_kill(&h);
  harness_start(&h, "dragon", args);
  ASSERT_EQ(gestures_until_mesh_order(&h, "dragon", "", 50), 2); /* restored sessions compute them too */
  ASSERT_EQ(gestures_until_mesh_order(&h, "dragon2", "", 50), 2);
  harness_stop(&h);
}

/* The kernels CHOLMOD's dense updates run on: where this test's own OpenBLAS fell back to its
 * Prescott kernels on a CPU with AVX2 (a model it does not know), deformd names faster ones
 * through OPENBLAS_CORETYPE (dfm_blas_kernels); elsewhere it keeps what OpenBLAS picked, which
 * is this process's pick too. */
TEST(deformd_runs_the_blas_kernels_the_cpu_has_even_where_openblas_does_not_know_its_model) {
  harness h;
  harness_start(&h, "demo", demo_args);
  FILE *f = fopen(h.log_path, "r");
  char line[1024], core[64] = "";
  int env = 0;
  while (f && fgets(line, sizeof(line), f)) {
    const char *at = strstr(line, "OpenBLAS kernels: ");
    if (at && sscanf(at + strlen("OpenBLAS kernels: "), "%63s", core) == 1) env = strstr(at, "(OPENBLAS_CORETYPE)") != NULL;
  }
  if (f) fclose(f);
  harness_stop(&h);
  ASSERT(core[0] != '\0');
  const char *ours = dfm_blas_core();
  __builtin_cpu_init();
  int fallback = !getenv("OPENBLAS_CORETYPE") && strcmp(ours, "Prescott") == 0 && __builtin_cpu_supports("avx2") &&
                 __builtin_cpu_supports("fma");
  fprintf(stderr, "this process: %s; deformd: %s%s\n", ours, core, env ? " (OPENBLAS_CORETYPE)" : "");
  if (fallback) {
    ASSERT(strcmp(core, "Prescott") != 0);
    ASSERT(env);
  } else {
    ASSERT(strcmp(core, ours) == 0);
  }
}
