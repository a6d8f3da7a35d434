/*
 * test_presence.c — presence (docs/protocol.md §16, json-api.md "presence.list") against a real
 * deformd: participants see each other's author, role, cursor and camera, exactly as sent;
 * join and leave are told; presence.list lists everyone who joined; presence reaches neither
 * the store nor the history and bumps no version (the store's own op table, read with SQLite,
 * is the oracle); a viewer that reads nothing slows nobody's presence or edits; a client
 * without the capability is never sent a PRESENCE frame and may not send one.
 */
#define _GNU_SOURCE /* memmem */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "proto_caps.h"
#include "presence_client.h"
#include "store_rows.h"
#include "proto_presence.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

#define ASSERT_STR_SAME(a, b) ASSERT(strcmp((a), (b)) == 0)

static cJSON *participant(cJSON *list, const char *author) {
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(list, "participants"))
    if (strcmp(cJSON_GetObjectItem(e, "author")->valuestring, author) == 0) return e;
  return NULL;
}

TEST(presence_clients_see_each_others_authors_cursors_and_cameras_and_who_left) {
  harness h;
  client_conn a, b;
  client_replica ra, rb;
  heard wa, wb;
  harness_start(&h, "demo", demo_args);
  presence_join(&h, "demo", &a, &ra, &wa, PROTO_ROLE_EDITOR, "ana");
  presence_join(&h, "demo", &b, &rb, &wb, PROTO_ROLE_VIEWER, "bob");
  ASSERT(heard_author(&wb, "ana")); /* bob's list had ana in it already */
  heard_until(&a, &ra, &wa, heard_author, "bob");
  int i = heard_find(&wa, wb.self);
  ASSERT_EQ(wa.p[i].role, PROTO_ROLE_VIEWER);
  ASSERT_EQ(wa.p[i].flags & PROTO_PRES_EDITING, 0);
  ASSERT_EQ(wb.p[heard_find(&wb, wa.self)].flags & PROTO_PRES_EDITING, PROTO_PRES_EDITING);
  /* ana moves: bob gets exactly her floats; many moves coalesce, the last one always arrives. */
  proto_presence_state last = presence_sample(0);
  for (int k = 0; k < 50; k++) {
    last = presence_sample((float)k);
    presence_send_state(&a, &last);
  }
  want_state ws = {wa.self, &last};
  heard_until(&b, &rb, &wb, heard_state, &ws);
  /* presence.list: both, with ana's cursor and camera. */
  char params[64];
  snprintf(params, sizeof(params), "{\"session\":\"demo\"}");
  cJSON *list = harness_rpc_ok(&h, "presence.list", params);
  cJSON *ana = participant(list, "ana"), *bob = participant(list, "bob");
  ASSERT(ana && bob);
  ASSERT_EQ((uint32_t)cJSON_GetObjectItem(ana, "id")->valuedouble, wa.self);
  ASSERT_STR_SAME(cJSON_GetObjectItem(ana, "role")->valuestring, "editor");
  ASSERT_STR_SAME(cJSON_GetObjectItem(bob, "role")->valuestring, "viewer");
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(ana, "editing")));
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(bob, "editing")));
  cJSON *cur = cJSON_GetObjectItem(ana, "cursor"), *cam = cJSON_GetObjectItem(ana, "camera");
  ASSERT(cur && cam && !cJSON_GetObjectItem(bob, "cursor"));
  ASSERT_STR_SAME(cJSON_GetObjectItem(cur, "tool")->valuestring, "inflate");
  ASSERT_EQ((float)cJSON_GetArrayItem(cJSON_GetObjectItem(cur, "hit"), 0)->valuedouble, last.hit[0]);
  ASSERT_EQ((float)cJSON_GetArrayItem(cJSON_GetObjectItem(cam, "eye"), 2)->valuedouble, last.eye[2]);
  ASSERT_EQ((float)cJSON_GetObjectItem(cam, "fov")->valuedouble, last.fov);
  cJSON_Delete(list);
  /* bob leaves: ana is told. */
  uint32_t bob_id = wb.self;
  client_replica_fini(&rb);
  client_close(&b);
  heard_until(&a, &ra, &wa, heard_left, &bob_id);
  client_replica_fini(&ra);
  client_close(&a);
  harness_stop(&h);
}

TEST(a_client_may_share_no_cursor_or_camera_and_is_still_listed_by_name) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn a, b;
  client_replica ra, rb;
  heard wa, wb;
  presence_join(&h, "demo", &a, &ra, &wa, PROTO_ROLE_EDITOR, "ana");
  /* ana says she is private, then moves: bob sees her name, flagged private, and no cursor. */
  proto_buf buf;
  proto_buf_init(&buf);
  size_t at = proto_presence_begin(&buf);
  ASSERT_OK(proto_presence_put_about(&buf, PROTO_CLIENT_VIEW, PROTO_PRES_PRIVATE), NULL);
  proto_presence_state s = presence_sample(1);
  ASSERT_OK(proto_presence_put_state(&buf, &s), NULL);
  ASSERT_OK(proto_presence_end(&buf, at), NULL);
  ASSERT_OK(client_send_buf(&a, &buf), NULL);
  proto_buf_fini(&buf);
  /* An ordinary STATE from a JSON client after it, so that "no cursor" is not just "not yet". */
  presence_join(&h, "demo", &b, &rb, &wb, PROTO_ROLE_VIEWER, "bob");
  cJSON_Delete(harness_rpc_ok(&h, "presence.set",
                              "{\"session\":\"demo\",\"cursor\":{\"hit\":[0,0.5,0],\"normal\":[0,1,0],\"radius\":0.1}}"));
  uint64_t deadline = client_now_ns() + 10000000000ull;
  int json_id = -1;
  while (json_id < 0) {
    ASSERT(client_now_ns() < deadline);
    heard_until(&b, &rb, &wb, heard_author, "ana");
    for (int i = 0; i < wb.n; i++)
      if (wb.p[i].client == PROTO_CLIENT_JSON && wb.p[i].has_state) json_id = (int)i;
    if (json_id < 0) {
      proto_header hd;
      const uint8_t *p;
      char err[256];
      if (client_read_frame(&b, 200, &hd, &p, err, sizeof(err)) == 0 && hd.type == PROTO_PRESENCE) heard_apply(&wb, p, hd.length);
    }
  }
  int i = heard_find(&wb, wa.self);
  ASSERT_EQ(wb.p[i].flags & PROTO_PRES_PRIVATE, PROTO_PRES_PRIVATE);
  ASSERT_EQ(wb.p[i].client, PROTO_CLIENT_VIEW);
  ASSERT_EQ(wb.p[i].has_state, 0);
  cJSON *list = harness_rpc_ok(&h, "presence.list", "{\"session\":\"demo\"}");
  cJSON *ana = participant(list, "ana");
  ASSERT(ana && cJSON_IsTrue(cJSON_GetObjectItem(ana, "private")) && !cJSON_GetObjectItem(ana, "cursor"));
  ASSERT_STR_SAME(cJSON_GetObjectItem(ana, "client")->valuestring, "view");
  cJSON_Delete(list);
  client_replica_fini(&ra);
  client_replica_fini(&rb);
  client_close(&a);
  client_close(&b);
  harness_stop(&h);
}


TEST(presence_never_reaches_the_store_or_the_history_and_bumps_no_version) {
  const char *dir = test_tmp_path("presence-store");
  harness h;
  harness_start_on(&h, dir, NULL, NULL);
  harness_rpc_done(&h, "session.create", "{\"session\":\"demo\",\"mesh\":\"demo\"}");
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}");
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  double version = cJSON_GetObjectItem(st, "version")->valuedouble;
  cJSON_Delete(st);
  client_conn a, b;
  client_replica ra, rb;
  heard wa, wb;
  presence_join(&h, "demo", &a, &ra, &wa, PROTO_ROLE_EDITOR, "ana");
  presence_join(&h, "demo", &b, &rb, &wb, PROTO_ROLE_VIEWER, "bob");
  proto_presence_state last = presence_sample(0);
  for (int k = 0; k < 200; k++) {
    last = presence_sample((float)k);
    presence_send_state(&a, &last);
    presence_send_state(&b, &last);
  }
  cJSON_Delete(harness_rpc_ok(&h, "presence.set", "{\"session\":\"demo\",\"camera\":{\"eye\":[0,0,2],\"target\":[0,0,0],\"fov\":0.8}}"));
  want_state ws = {wa.self, &last};
  heard_until(&b, &rb, &wb, heard_state, &ws);
  st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "version")->valuedouble, version);
  cJSON_Delete(st);
  cJSON *hist = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(hist, "steps")), 1); /* the weights.set alone */
  cJSON_Delete(hist);
  client_replica_fini(&ra);
  client_replica_fini(&rb);
  client_close(&a);
  client_close(&b);
  harness_stop(&h);
  /* The store's own table of operations: the weights.set alone, as before anyone moved. */
  ASSERT_EQ(count_rows(dir, "SELECT COUNT(*) FROM ops"), 1);
}

/* Reads every frame that is there now: PRESENCE into w, the others into the replica. */
static void drain(client_conn *c, client_replica *r, heard *w) {
  char err[256];
  proto_header h;
  const uint8_t *p;
  while (client_read_frame(c, 0, &h, &p, err, sizeof(err)) == 0) {
    if (h.type == PROTO_PRESENCE) heard_apply(w, p, h.length);
    else ASSERT_OK(client_replica_apply(r, &h, p, err, sizeof(err)), err);
  }
}

TEST(a_viewer_that_reads_nothing_slows_nobodys_presence_or_edits) {
  static const char *const args[] = {"--demo", "--soft-limit", "65536", NULL};
  harness h;
  harness_start(&h, "demo", args);
  /* The sleeper asks for presence, takes a tiny receive buffer and never reads again. */
  client_conn z;
  client_replica rz;
  heard wz;
  presence_join(&h, "demo", &z, &rz, &wz, PROTO_ROLE_VIEWER, "zed");
  int small = 4096;
  setsockopt(z.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  client_conn a, b;
  client_replica ra, rb;
  heard wa, wb;
  presence_join(&h, "demo", &a, &ra, &wa, PROTO_ROLE_EDITOR, "ana");
  presence_join(&h, "demo", &b, &rb, &wb, PROTO_ROLE_VIEWER, "bob");
  /* ana sculpts every vertex 100 times (tens of megabytes of DELTA for the sleeper, more than
   * the sockets' buffers hold) and moves after each. */
  uint32_t n = rb.mesh->vertex_count;
  uint32_t *idx = malloc(sizeof(uint32_t) * n);
  int32_t *q = malloc(sizeof(int32_t) * 3 * n);
  ASSERT(idx && q);
  proto_presence_state last = presence_sample(0);
  uint64_t v0 = rb.version;
  for (int round = 1; round <= 100; round++) {
    for (uint32_t v = 0; v < n; v++) {
      idx[v] = v;
      q[3 * v] = round * 100000 + (int32_t)(v % 7), q[3 * v + 1] = -round * 70000, q[3 * v + 2] = (int32_t)(v * 31);
    }
    proto_buf buf;
    proto_buf_init(&buf);
    ASSERT_OK(proto_encode_edit_offsets(&buf, (uint32_t)round, n, idx, q), NULL);
    ASSERT_OK(client_send_buf(&a, &buf), NULL);
    proto_buf_fini(&buf);
    last = presence_sample((float)round);
    presence_send_state(&a, &last);
    /* ana and bob read what came (the server stops reading an editor whose own output it
     * cannot send: backpressure); only the sleeper does not. */
    drain(&a, &ra, &wa);
    drain(&b, &rb, &wb);
  }
  /* bob gets every edit (the last offsets exactly) and ana's last cursor. */
  uint64_t version = 0, deadline = client_now_ns() + 60000000000ull;
  while (version < v0 + 100) {
    ASSERT(client_now_ns() < deadline);
    cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
    version = (uint64_t)cJSON_GetObjectItem(st, "version")->valuedouble;
    cJSON_Delete(st);
    drain(&a, &ra, &wa);
    drain(&b, &rb, &wb);
  }
  while (rb.version < version) {
    ASSERT(client_now_ns() < deadline);
    drain(&b, &rb, &wb);
  }
  want_state ws = {wa.self, &last};
  heard_until(&b, &rb, &wb, heard_state, &ws);
  for (uint32_t v = 0; v < n; v += 997)
    ASSERT_EQ(rb.offsets[3 * v], proto_dequantize(q[3 * v], rb.quantum));
  /* The sleeper was skipped, not waited for: the server says so (joins are never counted). */
  cJSON *stats = harness_rpc_ok(&h, "server.stats", NULL);
  cJSON *pres = cJSON_GetObjectItem(stats, "presence");
  ASSERT(pres != NULL);
  ASSERT(cJSON_GetObjectItem(pres, "skipped")->valuedouble >= 1);
  cJSON_Delete(stats);
  free(idx);
  free(q);
  client_replica_fini(&ra);
  client_replica_fini(&rb);
  client_replica_fini(&rz);
  client_close(&a);
  client_close(&b);
  client_close(&z);
  harness_stop(&h);
}

TEST(a_client_not_granted_presence_may_not_send_it_and_a_bad_frame_is_refused_with_a_reason) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn c;
  client_replica r;
  harness_join2(&h, &c, &r, "demo", PROTO_ROLE_EDITOR, NULL, &(proto_hello_opts){0});
  proto_presence_state s = presence_sample(0);
  presence_send_state(&c, &s);
  char err[256];
  proto_header hd;
  const uint8_t *p;
  ASSERT_OK(client_read_frame(&c, 10000, &hd, &p, err, sizeof(err)), err);
  ASSERT_EQ(hd.type, PROTO_ERROR);
  proto_error e;
  ASSERT_OK(proto_decode_error(p, hd.length, &e), NULL);
  ASSERT_EQ(e.code, PROTO_ERR_MALFORMED);
  ASSERT(memmem(e.message.ptr, e.message.len, "not granted \"presence\"", 22) != NULL);
  client_replica_fini(&r);
  client_close(&c);
  /* Granted, but a fov of 4 radians: INVALID, with the record named; the connection stays. */
  heard w;
  presence_join(&h, "demo", &c, &r, &w, PROTO_ROLE_VIEWER, "ana");
  s.fov = 4;
  presence_send_state(&c, &s);
  for (;;) {
    ASSERT_OK(client_read_frame(&c, 10000, &hd, &p, err, sizeof(err)), err);
    if (hd.type == PROTO_ERROR) break;
  }
  ASSERT_OK(proto_decode_error(p, hd.length, &e), NULL);
  ASSERT_EQ(e.code, PROTO_ERR_INVALID);
  ASSERT(memmem(e.message.ptr, e.message.len, "malformed PRESENCE: record 1", 28) != NULL);
  cJSON *list = harness_rpc_ok(&h, "presence.list", "{\"session\":\"demo\"}");
  ASSERT(participant(list, "ana") && !cJSON_GetObjectItem(participant(list, "ana"), "cursor"));
  cJSON_Delete(list);
  client_replica_fini(&r);
  client_close(&c);
  harness_stop(&h);
}
