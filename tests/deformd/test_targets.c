/*
 * test_targets.c — the blendshape model through a real deformd: per-target ranges up to
 * [-10, 10], mute, and combination targets driven by the product of other weights. The
 * expected weights are computed here from the rules, the expected shape by the CPU reference
 * (mesh_evaluate) on a freshly generated demo head; live, late and lagging viewers must all end
 * with exactly the server's weights, target settings and shape.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test.h"

static uint64_t version_of(cJSON *r) {
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static float weight_of(harness *h, const char *target) {
  cJSON *r = harness_rpc_ok(h, "weights.get", "{\"session\":\"demo\"}");
  float w = (float)cJSON_GetObjectItem(cJSON_GetObjectItem(r, "weights"), target)->valuedouble;
  cJSON_Delete(r);
  return w;
}

/* Big edits (every vertex's offset) from an editor until the server counts a lagging
 * connection — `slow`, which reads nothing; `live` keeps reading. */
static void make_one_lag(harness *h, client_conn *live, client_replica *lr) {
  client_conn ed;
  client_replica er;
  harness_join(h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  uint32_t nv = lr->mesh->vertex_count;
  uint32_t *idx = malloc(sizeof(uint32_t) * nv);
  int32_t *q = malloc(sizeof(int32_t) * 3 * nv);
  for (uint32_t i = 0; i < nv; i++) idx[i] = i;
  proto_buf b;
  proto_buf_init(&b);
  int lagging = 0;
  for (int e = 1; e <= 300 && !lagging; e++) {
    for (uint32_t i = 0; i < 3 * nv; i++) q[i] = (int32_t)((i * 31u + (uint32_t)e * 977u) % 4001u) - 2000;
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e, nv, idx, q), NULL);
    ASSERT_OK(client_send_buf(&ed, &b), NULL);
    uint64_t ver = version_of(harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}"));
    harness_follow(live, lr, ver, 10000);
    harness_follow(&ed, &er, ver, 10000);
    cJSON *st = harness_rpc_ok(h, "server.stats", NULL);
    lagging = cJSON_GetObjectItem(st, "lagging_connections")->valueint > 0;
    cJSON_Delete(st);
  }
  ASSERT(lagging);
  cJSON_Delete(harness_rpc_ok(h, "deform.reset", "{\"session\":\"demo\"}"));
  proto_buf_fini(&b);
  free(idx);
  free(q);
  client_replica_fini(&er);
  client_close(&ed);
}

/* The replica's target settings and weights equal targets.list, entry by entry. */
static void same_targets_as_server(harness *h, const client_replica *r) {
  cJSON *list = harness_rpc_ok(h, "targets.list", "{\"session\":\"demo\"}");
  ASSERT_EQ((uint32_t)cJSON_GetArraySize(list), r->mesh->target_count);
  const cJSON *o;
  uint32_t t = 0;
  cJSON_ArrayForEach(o, list) {
    const client_target_meta *m = &r->meta[t];
    ASSERT(strcmp(cJSON_GetObjectItem(o, "name")->valuestring, r->mesh->targets[t].name) == 0);
    ASSERT((float)cJSON_GetObjectItem(o, "weight")->valuedouble == r->weights[t]);
    ASSERT((float)cJSON_GetObjectItem(o, "min")->valuedouble == m->min);
    ASSERT((float)cJSON_GetObjectItem(o, "max")->valuedouble == m->max);
    ASSERT_EQ(cJSON_IsTrue(cJSON_GetObjectItem(o, "muted")), (m->flags & PROTO_TARGET_MUTED) != 0);
    const cJSON *drivers = cJSON_GetObjectItem(o, "drivers");
    ASSERT_EQ((uint32_t)cJSON_GetArraySize(drivers), m->driver_count);
    for (uint32_t i = 0; i < m->driver_count; i++)
      ASSERT(strcmp(cJSON_GetArrayItem(drivers, (int)i)->valuestring, r->mesh->targets[m->drivers[i]].name) == 0);
    t++;
  }
  cJSON_Delete(list);
}

TEST(ranges_mute_and_combination_targets_reach_every_viewer) {
  harness h;
  const char *const args[] = {"--demo", "--soft-limit", "65536", "--slow-timeout-ms", "60000", NULL};
  harness_start(&h, "demo", args);
  client_conn live, slow;
  client_replica lr, sr;
  harness_join(&h, &live, &lr, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &slow, &sr, "demo", PROTO_ROLE_VIEWER, NULL); /* reads only at the end */
  make_one_lag(&h, &live, &lr); /* from here on, `slow` gets only catch-ups */
  char msg[512];
  const char *S = "\"session\":\"demo\"";
  char p[512];
  /* Ranges: up to [-10, 10]; the weight must stay inside. */
  snprintf(p, sizeof(p), "{%s,\"target\":\"smile_L\",\"min\":-2,\"max\":3}", S);
  cJSON *r = harness_rpc_ok(&h, "targets.configure", p);
  ASSERT((float)cJSON_GetObjectItem(cJSON_GetObjectItem(r, "target"), "max")->valuedouble == 3.0f);
  cJSON_Delete(r);
  snprintf(p, sizeof(p), "{%s,\"weights\":{\"smile_L\":2.5,\"smile_R\":0.6}}", S);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", p));
  snprintf(p, sizeof(p), "{%s,\"weights\":{\"smile_L\":3.5}}", S);
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", p, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "outside its range [-2, 3]");
  snprintf(p, sizeof(p), "{%s,\"target\":\"smile_L\",\"max\":11}", S);
  ASSERT_EQ(harness_rpc_err(&h, "targets.configure", p, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "[-10, 10]");
  snprintf(p, sizeof(p), "{%s,\"target\":\"smile_L\",\"min\":1,\"max\":1}", S);
  ASSERT_EQ(harness_rpc_err(&h, "targets.configure", p, msg, sizeof(msg)), -32006);
  /* A combination target: lip_pucker = smile_L × smile_R, and it cannot be set directly. */
  snprintf(p, sizeof(p), "{%s,\"target\":\"lip_pucker\",\"drivers\":[\"smile_L\",\"smile_R\"]}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", p));
  ASSERT(weight_of(&h, "lip_pucker") == 1.0f); /* 2.5 × 0.6, held to its own range [0, 1] */
  snprintf(p, sizeof(p), "{%s,\"target\":\"lip_pucker\",\"max\":5}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", p));
  ASSERT(weight_of(&h, "lip_pucker") == 2.5f * 0.6f);
  snprintf(p, sizeof(p), "{%s,\"weights\":{\"smile_R\":0.8}}", S);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", p));
  ASSERT(weight_of(&h, "lip_pucker") == 2.5f * 0.8f);
  snprintf(p, sizeof(p), "{%s,\"weights\":{\"lip_pucker\":0.1}}", S);
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", p, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "combination");
  /* No chains and no loops: a driver cannot be a combination, nor a combination's driver become one. */
  snprintf(p, sizeof(p), "{%s,\"target\":\"frown_L\",\"drivers\":[\"lip_pucker\"]}", S);
  ASSERT_EQ(harness_rpc_err(&h, "targets.configure", p, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "combination target itself");
  snprintf(p, sizeof(p), "{%s,\"target\":\"smile_L\",\"drivers\":[\"frown_L\"]}", S);
  ASSERT_EQ(harness_rpc_err(&h, "targets.configure", p, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "drives the combination target 'lip_pucker'");
  snprintf(p, sizeof(p), "{%s,\"target\":\"frown_L\",\"drivers\":[\"frown_L\"]}", S);
  ASSERT_EQ(harness_rpc_err(&h, "targets.configure", p, msg, sizeof(msg)), -32006);
  snprintf(p, sizeof(p), "{%s,\"target\":\"frown_L\",\"drivers\":[\"nope\"]}", S);
  ASSERT_EQ(harness_rpc_err(&h, "targets.configure", p, msg, sizeof(msg)), -32002);
  snprintf(p, sizeof(p), "{%s,\"target\":\"frown_L\",\"muted\":1}", S);
  ASSERT_EQ(harness_rpc_err(&h, "targets.configure", p, msg, sizeof(msg)), -32602);
  /* Mute: the driver's weight goes to 0 and so does the combination's; the set value stays. */
  snprintf(p, sizeof(p), "{%s,\"target\":\"smile_R\",\"muted\":true}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", p));
  ASSERT(weight_of(&h, "smile_R") == 0.0f && weight_of(&h, "lip_pucker") == 0.0f);
  snprintf(p, sizeof(p), "{%s,\"weights\":{\"smile_R\":0.5}}", S); /* allowed while muted */
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", p));
  ASSERT(weight_of(&h, "smile_R") == 0.0f);
  snprintf(p, sizeof(p), "{%s,\"target\":\"smile_R\",\"muted\":false}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", p));
  ASSERT(weight_of(&h, "smile_R") == 0.5f && weight_of(&h, "lip_pucker") == 2.5f * 0.5f);
  /* Narrowing a range moves the value inside it. */
  snprintf(p, sizeof(p), "{%s,\"target\":\"smile_L\",\"max\":2}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", p));
  ASSERT(weight_of(&h, "smile_L") == 2.0f && weight_of(&h, "lip_pucker") == 2.0f * 0.5f);
  /* A muted target stays muted in every viewer, including ones that join or catch up later. */
  snprintf(p, sizeof(p), "{%s,\"target\":\"blink_L\",\"muted\":true,\"min\":-1}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", p));
  uint64_t final = version_of(harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}"));

  /* The shape the rules give, from the CPU reference on a fresh demo head. */
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  float *w = calloc(m->target_count, sizeof(float));
  w[mesh_find_target(m, "smile_L")] = 2.0f;
  w[mesh_find_target(m, "smile_R")] = 0.5f;
  w[mesh_find_target(m, "lip_pucker")] = 2.0f * 0.5f;
  float *want = malloc(sizeof(float) * 3 * m->vertex_count);
  mesh_evaluate(m, w, NULL, want);
  uint32_t n;
  float *server = harness_server_positions(&h, "demo", &n);
  ASSERT_EQ(n, m->vertex_count);
  for (uint32_t i = 0; i < 3 * n; i++) ASSERT(server[i] == want[i]);

  harness_follow(&live, &lr, final, 10000);
  int catchups = harness_follow(&slow, &sr, final, 20000);
  ASSERT(catchups >= 1);
  client_conn late;
  client_replica jr;
  harness_join(&h, &late, &jr, "demo", PROTO_ROLE_VIEWER, NULL);
  client_replica *all[3] = {&lr, &sr, &jr};
  float *got = malloc(sizeof(float) * 3 * n);
  for (int k = 0; k < 3; k++) {
    same_targets_as_server(&h, all[k]);
    ASSERT_OK(client_replica_positions(all[k], got), NULL);
    for (uint32_t i = 0; i < 3 * n; i++)
      if (got[i] != want[i]) test__fail(__FILE__, __LINE__, "viewer %d, coordinate %u: %.9g, want %.9g", k, i, got[i], want[i]);
  }
  ASSERT(jr.meta[mesh_find_target(m, "blink_L")].flags & PROTO_TARGET_MUTED);
  ASSERT_EQ(jr.meta[mesh_find_target(m, "lip_pucker")].driver_count, 2);
  free(got);
  free(server);
  free(want);
  free(w);
  mesh_destroy(m);
  client_replica_fini(&lr);
  client_replica_fini(&sr);
  client_replica_fini(&jr);
  client_close(&live);
  client_close(&slow);
  client_close(&late);
  harness_stop(&h);
}

TEST(a_binary_weight_edit_of_a_combination_target_is_refused_with_a_reason) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure",
                              "{\"session\":\"demo\",\"target\":\"cheek_puff\",\"drivers\":[\"smile_L\",\"smile_R\"]}"));
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  uint32_t t = (uint32_t)mesh_find_target(er.mesh, "cheek_puff");
  ASSERT_EQ(er.meta[t].driver_count, 2);
  proto_buf b;
  proto_buf_init(&b);
  float v = 0.5f;
  ASSERT_OK(proto_encode_edit_weights(&b, 42, 1, &t, &v), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  uint32_t rid;
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 42);
  ASSERT(weight_of(&h, "cheek_puff") == 0.0f);
  proto_buf_fini(&b);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

/* A catch-up that creates targets where an earlier one is driven by a later one: the drivers
 * arrive after every target exists, so the viewer can follow. */
TEST(a_lagging_viewer_follows_new_targets_driven_by_newer_ones) {
  harness h;
  const char *const args[] = {"--demo", "--soft-limit", "65536", "--slow-timeout-ms", "60000", NULL};
  harness_start(&h, "demo", args);
  client_conn live, slow;
  client_replica lr, sr;
  harness_join(&h, &live, &lr, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &slow, &sr, "demo", PROTO_ROLE_VIEWER, NULL);
  make_one_lag(&h, &live, &lr);
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"100\":[0,0.002,0]}}"));
  cJSON_Delete(harness_rpc_ok(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"200\":[0.003,0,0]}}"));
  cJSON_Delete(harness_rpc_ok(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump2\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", "{\"session\":\"demo\",\"target\":\"bump\",\"drivers\":[\"bump2\",\"smile_L\"]}"));
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"bump2\":0.5,\"smile_L\":0.5}}"));
  uint64_t final = version_of(harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}"));
  ASSERT(weight_of(&h, "bump") == 0.25f);
  harness_follow(&live, &lr, final, 10000);
  int catchups = harness_follow(&slow, &sr, final, 20000);
  ASSERT(catchups >= 1);
  uint32_t n;
  float *server = harness_server_positions(&h, "demo", &n);
  float *got = malloc(sizeof(float) * 3 * n);
  client_replica *all[2] = {&lr, &sr};
  for (int k = 0; k < 2; k++) {
    same_targets_as_server(&h, all[k]);
    ASSERT_OK(client_replica_positions(all[k], got), NULL);
    for (uint32_t i = 0; i < 3 * n; i++) ASSERT(got[i] == server[i]);
  }
  free(got);
  free(server);
  client_replica_fini(&lr);
  client_replica_fini(&sr);
  client_close(&live);
  client_close(&slow);
  harness_stop(&h);
}
