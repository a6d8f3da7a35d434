/*
 * test_bulk.c — the stream port's bulk arrays (capability "bulk", docs/protocol.md §15) against a
 * real deformd on the demo head: refused to a connection that did not ask for them; a GET of
 * the current positions, the sculpt offsets and a target's deltas (whole, a range, welded)
 * equals what the JSON-RPC port says; a SET is one undoable step of its editor's author and
 * refuses a viewer, non-finite and too large offsets and ranges past the mesh, with a reason.
 *
 * Oracles: sculpt.get, weights.get, state.get and mesh.info over JSON-RPC; the demo head built
 * here (mesh_demo_head) with the CPU reference mesh_evaluate for the positions, its targets for
 * the deltas and its welded topology (mesh_topology_init, the server's tolerance) for the
 * welded numbering.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "mesh.h"
#include "mesh_geom.h"
#include "proto_bulk.h"
#include "proto_caps.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

/* A v2 stream connection that asked for "bulk" (and was granted it), as a viewer or an editor. */
static void join_bulk(harness *h, client_conn *c, client_replica *r, proto_role role, const char *author) {
  proto_hello_opts o = {.codec = PROTO_CODEC_QUANTISED, .caps = PROTO_CAP_BIT(PROTO_CAP_BULK), .caps_option = 1};
  if (author) o.author = (proto_str){author, (uint16_t)strlen(author)};
  harness_join2(h, c, r, "demo", role, NULL, &o);
}

/* Sends `b` and reads until the BULK answer or the ERROR naming `rid` (skipping live frames).
 * Returns 0 with the answer (its payload copied into *keep, freed by the caller) and the
 * header's version, or the ERROR's code with its message. */
static int bulk_call(client_conn *c, proto_buf *b, uint32_t rid, proto_bulk_answer *a, uint8_t **keep,
                     uint64_t *version, char *msg, size_t msglen) {
  char err[256];
  ASSERT_OK(client_send_buf(c, b), NULL);
  for (;;) {
    proto_header hd;
    const uint8_t *p;
    ASSERT_OK(client_read_frame(c, 30000, &hd, &p, err, sizeof(err)), err);
    if (hd.type == PROTO_ERROR) {
      proto_error e;
      ASSERT_OK(proto_decode_error(p, hd.length, &e), NULL);
      if (e.request_id != rid) continue;
      snprintf(msg, msglen, "%.*s", (int)e.message.len, e.message.ptr);
      return e.code;
    }
    if (hd.type != PROTO_BULK) continue;
    *keep = malloc(hd.length + 1);
    memcpy(*keep, p, hd.length);
    ASSERT_OK(proto_decode_bulk_answer(*keep, hd.length, a), NULL);
    ASSERT_EQ(a->request_id, rid);
    *version = hd.session_version;
    return 0;
  }
}

static int bulk_get(client_conn *c, uint32_t rid, uint8_t what, uint8_t flags, uint32_t target, uint32_t first,
                    uint32_t count, proto_bulk_answer *a, uint8_t **keep, uint64_t *version, char *msg, size_t n) {
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_bulk_get(&b, rid, what, flags, target, first, count), NULL);
  int rc = bulk_call(c, &b, rid, a, keep, version, msg, n);
  proto_buf_fini(&b);
  return rc;
}

static int bulk_set(client_conn *c, uint32_t rid, uint8_t flags, uint32_t first, uint32_t count, const float *v,
                    uint64_t *version, char *msg, size_t n) {
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_bulk_set(&b, rid, flags, first, count, v), NULL);
  proto_bulk_answer a;
  uint8_t *keep = NULL;
  int rc = bulk_call(c, &b, rid, &a, &keep, version, msg, n);
  if (rc == 0) {
    ASSERT_EQ(a.op, PROTO_BULK_SET);
    ASSERT_EQ(a.first, first);
    ASSERT_EQ(a.count, count);
  }
  free(keep);
  proto_buf_fini(&b);
  return rc;
}

static float value_at(const proto_bulk_answer *a, size_t i) { return proto_load_f32(a->values + 4 * i); }

/* The sculpt offsets sculpt.get reports, as a dense float array of 3 per vertex. */
static float *sculpt_oracle(harness *h, uint32_t nv, uint64_t *version) {
  cJSON *r = harness_rpc_ok(h, "sculpt.get", "{\"session\":\"demo\"}");
  float *off = calloc(3 * (size_t)nv, sizeof(float));
  const cJSON *o = cJSON_GetObjectItem(r, "offsets"), *e;
  cJSON_ArrayForEach(e, o) {
    uint32_t v = (uint32_t)strtoul(e->string, NULL, 10);
    for (int k = 0; k < 3; k++) off[3 * (size_t)v + k] = (float)cJSON_GetArrayItem(e, k)->valuedouble;
  }
  *version = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return off;
}

static uint64_t state_version(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

TEST(bulk_frames_are_refused_to_a_connection_that_did_not_ask_for_the_bulk_capability) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn c;
  client_replica r;
  proto_hello_opts o = {.codec = PROTO_CODEC_LOSSLESS, .caps = PROTO_CAP_BIT(PROTO_CAP_NOOP), .caps_option = 1};
  harness_join2(&h, &c, &r, "demo", PROTO_ROLE_EDITOR, NULL, &o);
  proto_buf b;
  proto_buf_init(&b);
  for (int k = 0; k < 2; k++) { /* a GET, then a SET: the same refusal, and the connection stays */
    float v[3] = {0.001f, 0, 0};
    if (k == 0) ASSERT_OK(proto_encode_bulk_get(&b, 5, PROTO_BULK_POSITIONS, 0, 0, 0, PROTO_BULK_TO_END), NULL);
    else ASSERT_OK(proto_encode_bulk_set(&b, 6, 0, 0, 1, v), NULL);
    ASSERT_OK(client_send_buf(&c, &b), NULL);
    uint32_t rid = 99;
    ASSERT_EQ(harness_expect_error(&c, PROTO_ERROR, &rid, 10000), PROTO_ERR_MALFORMED);
    ASSERT_EQ(rid, 0u);
  }
  proto_buf_fini(&b);
  cJSON *s = harness_rpc_ok(&h, "sculpt.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(s, "offsets")), 0); /* the SET did nothing */
  cJSON_Delete(s);
  /* Still joined: a change reaches it. */
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}");
  harness_follow(&c, &r, 1, 10000);
  client_close(&c);
  client_replica_fini(&r);
  harness_stop(&h);
}

TEST(bulk_get_answers_the_positions_offsets_and_deltas_the_json_port_and_the_cpu_reference_give) {
  harness h;
  harness_start(&h, "demo", demo_args);
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.8,\"jaw_open\":0.3,\"blink_R\":1}}");
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"100\":[0.001,0,-0.002],\"7\":[0,0.0005,0],"
                                     "\"41076\":[-0.003,0.002,0.001]}}");
  harness_rpc_done(&h, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"draw\",\"radius\":0.02,"
                                       "\"samples\":[{\"center\":[0.046,-0.016,0.075]}]}");
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  uint32_t nv = m->vertex_count;
  client_conn c;
  client_replica r;
  join_bulk(&h, &c, &r, PROTO_ROLE_VIEWER, NULL);
  uint64_t sv;
  float *off = sculpt_oracle(&h, nv, &sv);
  cJSON *wg = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  float *w = calloc(m->target_count, sizeof(float));
  int k = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(wg, "weights")) w[k++] = (float)e->valuedouble;
  ASSERT_EQ((uint32_t)k, m->target_count);
  cJSON_Delete(wg);
  float *want = malloc(sizeof(float) * 3 * nv);
  mesh_evaluate(m, w, off, want);

  proto_bulk_answer a;
  uint8_t *keep = NULL;
  uint64_t version;
  char msg[256];
  ASSERT_OK(bulk_get(&c, 1, PROTO_BULK_POSITIONS, 0, 0, 0, PROTO_BULK_TO_END, &a, &keep, &version, msg, sizeof(msg)),
            msg);
  ASSERT_EQ(version, sv);
  ASSERT_EQ(a.first, 0u);
  ASSERT_EQ(a.count, nv);
  ASSERT_EQ(a.total, nv);
  ASSERT(memcmp(a.values, want, 12 * (size_t)nv) == 0); /* bit for bit, little-endian host */
  free(keep);

  /* The sculpt offsets of a range, 95 .. 104: vertex 100's as sculpt.get says, the others 0. */
  ASSERT_OK(bulk_get(&c, 2, PROTO_BULK_SCULPT, 0, 0, 95, 10, &a, &keep, &version, msg, sizeof(msg)), msg);
  ASSERT_EQ(a.count, 10u);
  for (uint32_t i = 0; i < 30; i++) ASSERT_EQ(value_at(&a, i), off[3 * 95 + i]);
  ASSERT(value_at(&a, 15) != 0);
  free(keep);
  /* The last vertex alone, to the end. */
  ASSERT_OK(bulk_get(&c, 3, PROTO_BULK_SCULPT, 0, 0, nv - 1, PROTO_BULK_TO_END, &a, &keep, &version, msg, sizeof(msg)),
            msg);
  ASSERT_EQ(a.count, 1u);
  for (int i = 0; i < 3; i++) ASSERT_EQ(value_at(&a, (size_t)i), off[3 * (size_t)(nv - 1) + (size_t)i]);
  free(keep);

  /* A target's deltas: the file's, at its vertices, 0 elsewhere. */
  const mesh_target *t = &m->targets[3];
  float *dense = calloc(3 * (size_t)nv, sizeof(float));
  for (uint32_t i = 0; i < t->count; i++) memcpy(dense + 3 * (size_t)t->indices[i], t->deltas + 3 * (size_t)i, 12);
  ASSERT_OK(bulk_get(&c, 4, PROTO_BULK_TARGET, 0, 3, 0, PROTO_BULK_TO_END, &a, &keep, &version, msg, sizeof(msg)), msg);
  ASSERT_EQ(a.target, 3u);
  ASSERT(memcmp(a.values, dense, 12 * (size_t)nv) == 0);
  free(keep);

  /* Welded: mesh.info's topology_vertices of them, each its first render vertex's value. */
  mesh_topology topo;
  ASSERT_OK(mesh_topology_init(&topo, m, NULL, 0.0), NULL);
  cJSON *info = harness_rpc_ok(&h, "mesh.info", "{\"session\":\"demo\"}");
  ASSERT_EQ((uint32_t)cJSON_GetObjectItem(info, "topology_vertices")->valuedouble, topo.vertex_count);
  cJSON_Delete(info);
  ASSERT(topo.vertex_count < nv);
  ASSERT_OK(bulk_get(&c, 5, PROTO_BULK_POSITIONS, PROTO_BULK_WELDED, 0, 0, PROTO_BULK_TO_END, &a, &keep, &version, msg,
                     sizeof(msg)), msg);
  ASSERT_EQ(a.total, topo.vertex_count);
  ASSERT_EQ(a.count, topo.vertex_count);
  ASSERT(a.flags == PROTO_BULK_WELDED);
  for (uint32_t v = 0; v < topo.vertex_count; v++) {
    uint32_t rv = topo.topo_render[topo.topo_offsets[v]];
    for (int i = 0; i < 3; i++) ASSERT_EQ(value_at(&a, 3 * (size_t)v + (size_t)i), want[3 * (size_t)rv + (size_t)i]);
  }
  free(keep);

  /* Refusals name the range or the target; the connection goes on. */
  ASSERT_EQ(bulk_get(&c, 6, PROTO_BULK_SCULPT, 0, 0, nv, 1, &a, &keep, &version, msg, sizeof(msg)), PROTO_ERR_INVALID);
  ASSERT_STR_CONTAINS(msg, "out of range (the mesh has 41077 render vertices)");
  ASSERT_EQ(bulk_get(&c, 7, PROTO_BULK_SCULPT, PROTO_BULK_WELDED, 0, topo.vertex_count - 1, 2, &a, &keep, &version, msg,
                     sizeof(msg)), PROTO_ERR_INVALID);
  ASSERT_STR_CONTAINS(msg, "welded vertices");
  ASSERT_EQ(bulk_get(&c, 8, PROTO_BULK_TARGET, 0, 99, 0, 1, &a, &keep, &version, msg, sizeof(msg)), PROTO_ERR_INVALID);
  ASSERT_STR_CONTAINS(msg, "no target 99");
  ASSERT_OK(bulk_get(&c, 9, PROTO_BULK_SCULPT, 0, 0, 0, 0, &a, &keep, &version, msg, sizeof(msg)), msg); /* empty */
  ASSERT_EQ(a.count, 0u);
  free(keep);
  mesh_topology_fini(&topo);
  free(dense);
  free(want);
  free(w);
  free(off);
  mesh_destroy(m);
  client_close(&c);
  client_replica_fini(&r);
  harness_stop(&h);
}

TEST(bulk_set_is_one_undoable_sculpt_step_of_its_editor_and_refuses_viewers_and_bad_values_with_a_reason) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn viewer, ed;
  client_replica rv, re;
  join_bulk(&h, &viewer, &rv, PROTO_ROLE_VIEWER, NULL);
  join_bulk(&h, &ed, &re, PROTO_ROLE_EDITOR, "ana");
  float v[9] = {0.001f, 0, -0.002f, 0, 0.0005f, 0, -0.25f, 0.125f, 3e-7f};
  uint64_t version;
  char msg[256];
  ASSERT_EQ(bulk_set(&viewer, 1, 0, 500, 3, v, &version, msg, sizeof(msg)), PROTO_ERR_FORBIDDEN);
  ASSERT_STR_CONTAINS(msg, "joined as a viewer");
  ASSERT_OK(bulk_set(&ed, 2, 0, 500, 3, v, &version, msg, sizeof(msg)), msg);
  ASSERT_EQ(version, 1u);
  ASSERT_EQ(state_version(&h), 1u);
  uint64_t sv;
  float *off = sculpt_oracle(&h, 41077, &sv);
  cJSON *q = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  float quantum = (float)cJSON_GetObjectItem(q, "offset_quantum")->valuedouble;
  cJSON_Delete(q);
  for (int i = 0; i < 9; i++) /* stored as sculpt.set stores: (float)round(x / quantum) · quantum */
    ASSERT_EQ(off[3 * 500 + i], proto_dequantize(proto_quantize(v[i], quantum), quantum));
  free(off);
  cJSON *hl = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\",\"limit\":1}");
  const cJSON *step = cJSON_GetArrayItem(cJSON_GetObjectItem(hl, "steps"), 0);
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(step, "author")->valuestring, "ana");
  cJSON_Delete(hl);

  /* Refused, with the vertex named: nothing changes. */
  float bad[6] = {0, 0, 0, NAN, 0, 0};
  ASSERT_EQ(bulk_set(&ed, 3, 0, 10, 2, bad, &version, msg, sizeof(msg)), PROTO_ERR_INVALID);
  ASSERT_STR_CONTAINS(msg, "the offset of render vertex 11 is not finite");
  float far[3] = {0, 1e30f, 0};
  ASSERT_EQ(bulk_set(&ed, 4, 0, 10, 1, far, &version, msg, sizeof(msg)), PROTO_ERR_INVALID);
  ASSERT_STR_CONTAINS(msg, "beyond the largest allowed");
  ASSERT_EQ(bulk_set(&ed, 5, 0, 41076, 2, v, &version, msg, sizeof(msg)), PROTO_ERR_INVALID);
  ASSERT_STR_CONTAINS(msg, "out of range");
  ASSERT_EQ(state_version(&h), 1u);

  /* Welded: a welded vertex on a seam sets every render copy of it. */
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology topo;
  ASSERT_OK(mesh_topology_init(&topo, m, NULL, 0.0), NULL);
  uint32_t seam = 0;
  while (topo.topo_offsets[seam + 1] - topo.topo_offsets[seam] < 2) seam++;
  float d[3] = {0.002f, -0.001f, 0.0005f};
  ASSERT_OK(bulk_set(&ed, 6, PROTO_BULK_WELDED, seam, 1, d, &version, msg, sizeof(msg)), msg);
  ASSERT_EQ(version, 2u);
  off = sculpt_oracle(&h, m->vertex_count, &sv);
  for (uint32_t x = topo.topo_offsets[seam]; x < topo.topo_offsets[seam + 1]; x++)
    for (int i = 0; i < 3; i++)
      ASSERT_EQ(off[3 * (size_t)topo.topo_render[x] + (size_t)i], proto_dequantize(proto_quantize(d[i], quantum), quantum));
  free(off);

  /* ana's undo takes back her newest step (the welded one), then the first. */
  client_conn rpc;
  harness_connect(&h, &rpc, h.rpc_port);
  cJSON *res = NULL;
  ASSERT_OK(harness_call(&rpc, "hello", "{\"author\":\"ana\"}", &res, NULL, 0), NULL);
  cJSON_Delete(res);
  ASSERT_OK(harness_call(&rpc, "history.undo", "{\"session\":\"demo\"}", &res, NULL, 0), NULL);
  cJSON_Delete(res);
  ASSERT_OK(harness_call(&rpc, "history.undo", "{\"session\":\"demo\"}", &res, NULL, 0), NULL);
  cJSON_Delete(res);
  cJSON *s = harness_rpc_ok(&h, "sculpt.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(s, "offsets")), 0);
  cJSON_Delete(s);
  client_close(&rpc);
  mesh_topology_fini(&topo);
  mesh_destroy(m);
  client_close(&viewer);
  client_close(&ed);
  client_replica_fini(&rv);
  client_replica_fini(&re);
  harness_stop(&h);
}
