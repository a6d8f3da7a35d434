/*
 * test_net.c — the viewer's connection (viewer/vw_net.c) against a real deformd: it follows a
 * session exactly and says precisely what changed, never blocks a frame, refuses edits when
 * read-only, and survives the server going away (kept shape, backoff, fresh SNAPSHOT).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "vw_net.h"

static const char *const demo_args[] = {"--demo", NULL};

static uint64_t version_of(cJSON *r) {
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static uint64_t server_version(harness *h) {
  return version_of(harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}"));
}

/* Merges one poll's changes into a running total (what a renderer that skipped frames would
 * have to upload). */
static void merge(vw_net_changes *acc, const vw_net_changes *ch) {
  if (ch->snapshot) {
    memset(acc, 0, sizeof(*acc));
    acc->snapshot = 1;
  }
  acc->weights |= ch->weights;
  acc->target_meta |= ch->target_meta;
  acc->new_targets += ch->new_targets;
  acc->frames += ch->frames;
  acc->partial = ch->partial;
  if (ch->offsets_first != ch->offsets_end) {
    if (acc->offsets_first == acc->offsets_end) {
      acc->offsets_first = ch->offsets_first;
      acc->offsets_end = ch->offsets_end;
    } else {
      if (ch->offsets_first < acc->offsets_first) acc->offsets_first = ch->offsets_first;
      if (ch->offsets_end > acc->offsets_end) acc->offsets_end = ch->offsets_end;
    }
  }
}

/* Polls (20 ms at a time) until the state is `want`, merging changes into *acc (may be NULL). */
static void poll_until_state(vw_net *n, vw_net_state want, vw_net_changes *acc, int timeout_ms) {
  uint64_t deadline = vw_net_now_ms() + (uint64_t)timeout_ms;
  vw_net_changes ch;
  while (vw_net_poll(n, 20, &ch) != want || (want == VW_NET_LIVE && ch.partial)) {
    if (acc) merge(acc, &ch);
    if (vw_net_now_ms() > deadline)
      test__fail(__FILE__, __LINE__, "still %s, want %s (last error: %s)", vw_net_state_name(n->state),
                 vw_net_state_name(want), n->last_error);
  }
  if (acc) merge(acc, &ch);
}

/* Polls until the replica reached `version` with no update half applied; changes go to *acc. */
static void follow(vw_net *n, uint64_t version, vw_net_changes *acc) {
  memset(acc, 0, sizeof(*acc));
  uint64_t deadline = vw_net_now_ms() + 10000;
  for (;;) {
    vw_net_changes ch;
    vw_net_poll(n, 20, &ch);
    merge(acc, &ch);
    if (n->state == VW_NET_LIVE && n->replica.version >= version && !ch.partial) break;
    if (vw_net_now_ms() > deadline)
      test__fail(__FILE__, __LINE__, "stuck at version %llu (%s), want %llu; last error: %s",
                 (unsigned long long)n->replica.version, vw_net_state_name(n->state),
                 (unsigned long long)version, n->last_error);
  }
  ASSERT_EQ(n->replica.version, version);
}

static uint32_t target_index(const vw_net *n, const char *name) {
  for (uint32_t t = 0; t < n->replica.mesh->target_count; t++)
    if (strcmp(n->replica.mesh->targets[t].name, name) == 0) return t;
  test__fail(__FILE__, __LINE__, "no target %s in the replica", name);
}

/* The replica has exactly the server's weights (weights.get) and shape (session.export). */
static void same_as_server(harness *h, const vw_net *n) {
  cJSON *r = harness_rpc_ok(h, "weights.get", "{\"session\":\"demo\"}");
  const cJSON *weights = cJSON_GetObjectItem(r, "weights"), *w;
  ASSERT_EQ((uint32_t)cJSON_GetArraySize(weights), n->replica.mesh->target_count);
  cJSON_ArrayForEach(w, weights) ASSERT((float)w->valuedouble == n->replica.weights[target_index(n, w->string)]);
  cJSON_Delete(r);
  uint32_t count;
  float *server = harness_server_positions(h, "demo", &count);
  ASSERT_EQ(count, n->replica.mesh->vertex_count);
  float *mine = malloc(sizeof(float) * 3 * count);
  ASSERT_OK(client_replica_positions(&n->replica, mine), NULL);
  for (uint32_t i = 0; i < 3 * count; i++)
    if (mine[i] != server[i])
      test__fail(__FILE__, __LINE__, "component %u: replica %.9g, server %.9g", i, mine[i], server[i]);
  free(mine);
  free(server);
}

/* The vertices whose dequantised offset differs between two offset arrays: their span. */
static void changed_span(const float *before, const float *after, uint32_t vertex_count, uint32_t *first,
                         uint32_t *end) {
  *first = *end = 0;
  for (uint32_t v = 0; v < vertex_count; v++) {
    if (memcmp(before + 3 * (size_t)v, after + 3 * (size_t)v, 3 * sizeof(float)) == 0) continue;
    if (*first == *end) *first = v;
    *end = v + 1;
  }
}

static float *copy_offsets(const vw_net *n) {
  size_t len = 3 * (size_t)n->replica.mesh->vertex_count * sizeof(float);
  float *c = malloc(len);
  memcpy(c, n->replica.offsets, len);
  return c;
}

/* A session change through JSON-RPC, followed by the viewer; the offsets span reported must be
 * exactly the span of the vertices whose offset changed. Returns the merged changes. */
static vw_net_changes rpc_and_follow(harness *h, vw_net *n, const char *method, const char *params) {
  float *before = copy_offsets(n);
  cJSON_Delete(harness_rpc_ok(h, method, params));
  vw_net_changes acc;
  follow(n, server_version(h), &acc);
  uint32_t first, end;
  changed_span(before, n->replica.offsets, n->replica.mesh->vertex_count, &first, &end);
  ASSERT_EQ(acc.offsets_first, first);
  ASSERT_EQ(acc.offsets_end, end);
  free(before);
  same_as_server(h, n);
  return acc;
}

TEST(net_viewer_follows_a_session_exactly_and_reports_what_changed) {
  harness h;
  harness_start(&h, "demo", demo_args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  ASSERT_EQ(n.state, VW_NET_CONNECTING);
  vw_net_changes acc = {0};
  poll_until_state(&n, VW_NET_LIVE, &acc, 10000);
  ASSERT_EQ(acc.snapshot, 1);
  ASSERT_EQ(n.role, PROTO_ROLE_VIEWER);
  ASSERT_EQ(n.joins, 1);
  ASSERT_EQ(n.reconnects, 0);
  ASSERT_EQ(n.backoff_ms, 0);
  same_as_server(&h, &n);
  uint32_t targets = n.replica.mesh->target_count;

  acc = rpc_and_follow(&h, &n, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5,\"jaw_open\":0.25}}");
  ASSERT_EQ(acc.frames, 1);
  ASSERT_EQ(acc.weights, 1);
  ASSERT_EQ(acc.snapshot, 0);
  ASSERT_EQ(acc.new_targets, 0);
  ASSERT_EQ(acc.target_meta, 0);
  ASSERT_EQ(acc.offsets_first, acc.offsets_end);

  acc = rpc_and_follow(&h, &n, "sculpt.set",
                       "{\"session\":\"demo\",\"offsets\":{\"7\":[0,0.001,0],\"100\":[0.002,0,-0.001],\"350\":[0,0,0.0005]}}");
  ASSERT_EQ(acc.offsets_first, 7);
  ASSERT_EQ(acc.offsets_end, 351);
  ASSERT_EQ(acc.weights, 0);
  acc = rpc_and_follow(&h, &n, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"200\":[0.001,0.001,0]}}");
  ASSERT_EQ(acc.offsets_first, 200);
  ASSERT_EQ(acc.offsets_end, 201);

  /* The sculpt moves into a new target: one TARGET, and (its DELTA) the offsets of 7..350 go
   * to zero; the shape stays. */
  acc = rpc_and_follow(&h, &n, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump\"}");
  ASSERT_EQ(acc.new_targets, 1);
  ASSERT_EQ(n.replica.mesh->target_count, targets + 1);
  ASSERT_EQ(acc.offsets_first, 7);
  ASSERT_EQ(acc.offsets_end, 351);
  ASSERT(n.replica.weights[targets] == 1.0f);

  /* A combination target: TARGET_META (MORE) and the WEIGHTS it moved, as one update. */
  acc = rpc_and_follow(&h, &n, "targets.configure",
                       "{\"session\":\"demo\",\"target\":\"lip_pucker\",\"drivers\":[\"smile_L\",\"jaw_open\"]}");
  ASSERT_EQ(acc.frames, 2);
  ASSERT_EQ(acc.target_meta, 1);
  ASSERT_EQ(acc.weights, 1);
  ASSERT_EQ(acc.partial, 0);
  ASSERT_EQ(n.replica.meta[target_index(&n, "lip_pucker")].driver_count, 2);
  ASSERT(n.replica.weights[target_index(&n, "lip_pucker")] == 0.5f * 0.25f);
  acc = rpc_and_follow(&h, &n, "targets.configure", "{\"session\":\"demo\",\"target\":\"smile_R\",\"muted\":true}");
  ASSERT_EQ(acc.target_meta, 1);
  ASSERT(n.replica.meta[target_index(&n, "smile_R")].flags & PROTO_TARGET_MUTED);
  ASSERT_EQ(n.state, VW_NET_LIVE);
  ASSERT_EQ(n.errors, 0);
  vw_net_fini(&n);
  harness_stop(&h);
}

TEST(net_a_lagging_viewer_catches_up_through_frames_flagged_more) {
  harness h;
  const char *const args[] = {"--demo", "--soft-limit", "65536", "--slow-timeout-ms", "60000", NULL};
  harness_start(&h, "demo", args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  poll_until_state(&n, VW_NET_LIVE, NULL, 10000);
  float *before = copy_offsets(&n);
  uint32_t targets = n.replica.mesh->target_count;
  /* Big edits (every vertex) from an editor while `n` is not polled, until the server counts
   * it as lagging; from then on it gets only catch-ups. */
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  uint32_t nv = er.mesh->vertex_count;
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
    harness_follow(&ed, &er, server_version(&h), 10000);
    cJSON *st = harness_rpc_ok(&h, "server.stats", NULL);
    lagging = cJSON_GetObjectItem(st, "lagging_connections")->valueint > 0;
    cJSON_Delete(st);
  }
  ASSERT(lagging);
  proto_buf_fini(&b);
  free(idx);
  free(q);
  client_replica_fini(&er);
  client_close(&ed);
  /* Then one of everything: the catch-up brings TARGET, TARGET_META, WEIGHTS (MORE) and DELTA. */
  const char *S = "\"session\":\"demo\"";
  char p[512];
  cJSON_Delete(harness_rpc_ok(&h, "deform.reset", "{\"session\":\"demo\"}"));
  snprintf(p, sizeof(p), "{%s,\"offsets\":{\"7\":[0,0.001,0],\"100\":[0.002,0,-0.001]}}", S);
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", p));
  snprintf(p, sizeof(p), "{%s,\"name\":\"bump\"}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.create_from_sculpt", p));
  snprintf(p, sizeof(p), "{%s,\"weights\":{\"jaw_open\":0.25}}", S);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", p));
  snprintf(p, sizeof(p), "{%s,\"target\":\"cheek_puff\",\"drivers\":[\"jaw_open\",\"bump\"]}", S);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", p));
  snprintf(p, sizeof(p), "{%s,\"offsets\":{\"70\":[0,0,0.001]}}", S);
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", p));
  uint64_t final = server_version(&h);
  /* Polls never end inside the update: `partial` is reported while the replica is between. */
  vw_net_changes acc = {0};
  int saw_partial = 0;
  uint64_t deadline = vw_net_now_ms() + 20000;
  for (;;) {
    vw_net_changes ch;
    ASSERT_EQ(vw_net_poll(&n, 20, &ch), VW_NET_LIVE);
    merge(&acc, &ch);
    saw_partial |= ch.partial;
    if (ch.partial) ASSERT(n.replica.version < final);
    if (n.replica.version == final && !ch.partial) break;
    ASSERT(vw_net_now_ms() < deadline);
  }
  fprintf(stderr, "%u frames to catch up (partial seen: %d), offsets [%u, %u)\n", acc.frames, saw_partial,
          acc.offsets_first, acc.offsets_end);
  ASSERT_EQ(acc.new_targets, 1);
  ASSERT_EQ(n.replica.mesh->target_count, targets + 1);
  ASSERT_EQ(acc.target_meta, 1);
  ASSERT_EQ(acc.weights, 1);
  ASSERT_EQ(acc.snapshot, 0);
  /* The span covers every vertex whose offset differs from before the burst. */
  uint32_t first, end;
  changed_span(before, n.replica.offsets, nv, &first, &end);
  ASSERT(acc.offsets_first <= first && acc.offsets_end >= end);
  same_as_server(&h, &n);
  free(before);
  vw_net_fini(&n);
  harness_stop(&h);
}

/* A poll that blocked on a silent connection would never return here: the server is stopped
 * (SIGSTOP), so nothing can arrive, and a watchdog fails the test instead of the test runner's
 * timeout. No clock is asserted on: what is checked is that every poll comes back. */
static void poll_blocked(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: a vw_net_poll did not return in 60 s (it blocked)\n";
  ssize_t w = write(2, msg, sizeof(msg) - 1);
  (void)w;
  _exit(1);
}

TEST(net_poll_never_blocks_when_nothing_arrives) {
  harness h;
  harness_start(&h, "demo", demo_args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  poll_until_state(&n, VW_NET_LIVE, NULL, 10000);
  ASSERT_EQ(kill(h.pid, SIGSTOP), 0); /* silent from here: the connection stays up, nothing comes */
  signal(SIGALRM, poll_blocked);
  alarm(60);
  for (int i = 0; i < 500; i++) {
    vw_net_changes ch;
    ASSERT_EQ(vw_net_poll(&n, 0, &ch), VW_NET_LIVE);
    ASSERT_EQ(ch.snapshot + ch.weights + (int)ch.new_targets + ch.target_meta + (int)ch.frames, 0);
  }
  /* With a wait, it comes back once the wait is over. */
  for (int i = 0; i < 5; i++) ASSERT_EQ(vw_net_poll(&n, 40, NULL), VW_NET_LIVE);
  alarm(0);
  ASSERT_EQ(kill(h.pid, SIGCONT), 0);
  /* Nor while the server is gone. */
  harness_stop(&h);
  poll_until_state(&n, VW_NET_DOWN, NULL, 5000);
  alarm(60);
  for (int i = 0; i < 100; i++) vw_net_poll(&n, 0, NULL);
  alarm(0);
  signal(SIGALRM, SIG_DFL);
  vw_net_fini(&n);
}

TEST(net_pings_measure_latency_and_bytes_per_second) {
  harness h;
  harness_start(&h, "demo", demo_args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  ASSERT(n.latency_ms < 0);
  poll_until_state(&n, VW_NET_LIVE, NULL, 10000);
  uint64_t snapshot_bytes = n.bytes_total;
  ASSERT(snapshot_bytes > 100000); /* the demo head */
  uint64_t t0 = vw_net_now_ms();
  while (n.latency_ms < 0 && vw_net_now_ms() - t0 < 3000) vw_net_poll(&n, 20, NULL);
  ASSERT(n.latency_ms >= 0 && n.latency_ms < 1000);
  ASSERT(n.bytes_per_s > 0 || vw_net_now_ms() - n.rate_t0_ms < 1000);
  /* Once a second: over 2.5 s, 2 or 3 more PINGs, each answered. */
  uint32_t seq = n.ping_seq;
  t0 = vw_net_now_ms();
  while (vw_net_now_ms() - t0 < 2500) vw_net_poll(&n, 20, NULL);
  ASSERT(n.ping_seq - seq >= 2 && n.ping_seq - seq <= 3);
  ASSERT_EQ(n.bytes_total, snapshot_bytes + 40ull * n.ping_seq); /* a 40-byte PONG per PING */
  /* Idle now: bytes/s is the PONGs' trickle, not the snapshot any more. */
  ASSERT(n.bytes_per_s > 0 && n.bytes_per_s < 1000);
  vw_net_fini(&n);
  harness_stop(&h);
}

TEST(net_viewer_role_refuses_edits_and_editor_edits_come_back_as_frames) {
  harness h;
  harness_start(&h, "demo", demo_args);
  vw_net v, e;
  vw_net_init(&v, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  vw_net_init(&e, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_EDITOR);
  uint32_t t = 0;
  float w = 0.7f;
  ASSERT_EQ(vw_net_set_weights(&e, 1, &t, &w), 0); /* not live yet */
  poll_until_state(&v, VW_NET_LIVE, NULL, 10000);
  poll_until_state(&e, VW_NET_LIVE, NULL, 10000);
  ASSERT_EQ(e.role, PROTO_ROLE_EDITOR);
  ASSERT(e.client_id != 0 && e.client_id != v.client_id);

  /* Read-only: nothing is sent (the server would answer FORBIDDEN). */
  ASSERT_EQ(vw_net_can_edit(&v), 0);
  t = target_index(&v, "smile_L");
  ASSERT_EQ(vw_net_set_weights(&v, 1, &t, &w), 0);
  ASSERT_EQ(vw_net_reset(&v, 0, NULL), 0);
  ASSERT_EQ(vw_net_gesture_end(&v, 1), 0);
  ASSERT_EQ(v.next_request, 1);

  /* The editor's weight edit comes back to both as a WEIGHTS frame. */
  ASSERT_EQ(vw_net_can_edit(&e), 1);
  uint32_t id = vw_net_set_weights(&e, 1, &t, &w);
  ASSERT_EQ(id, 1);
  vw_net_changes acc;
  uint64_t ver = server_version(&h);
  ASSERT_EQ(ver, 1);
  follow(&e, ver, &acc);
  ASSERT_EQ(acc.weights, 1);
  ASSERT(e.replica.weights[t] == 0.7f);
  follow(&v, ver, &acc);
  ASSERT_EQ(acc.weights, 1);
  same_as_server(&h, &v);

  /* Offsets: one DELTA with exactly those vertices. */
  uint32_t verts[2] = {5, 300};
  int32_t q[6] = {3, -2, 0, -1, 200, 64};
  ASSERT_EQ(vw_net_set_offsets(&e, 2, verts, q), 2);
  follow(&v, ++ver, &acc);
  ASSERT_EQ(acc.offsets_first, 5);
  ASSERT_EQ(acc.offsets_end, 301);
  ASSERT(v.replica.offsets[3 * 300 + 1] == proto_dequantize(200, v.replica.quantum));

  /* A refused edit: ERROR with its request id, and the connection stays. */
  uint32_t bad = 9999;
  id = vw_net_set_weights(&e, 1, &bad, &w);
  ASSERT_EQ(id, 3);
  uint64_t t0 = vw_net_now_ms();
  while (e.errors == 0 && vw_net_now_ms() - t0 < 5000) vw_net_poll(&e, 20, NULL);
  ASSERT_EQ(e.errors, 1);
  ASSERT_EQ(e.last_error_request, id);
  ASSERT_EQ(e.last_error_code, PROTO_ERR_INVALID);
  ASSERT_STR_CONTAINS(e.last_error, "INVALID (request 3)");
  ASSERT_EQ(e.state, VW_NET_LIVE);

  /* A gesture: begin, drag, end; the solve arrives as one DELTA. */
  proto_gesture_begin g = {0};
  g.gesture = 9000 + e.client_id;
  g.mode = 0;
  g.iterations = 1;
  g.pick = 1000;
  g.handle_radius = 0.01f;
  g.roi_radius = 0.04f;
  ASSERT(vw_net_gesture_begin(&e, &g, NULL, NULL, NULL) != 0);
  proto_gesture_drag d = {0};
  d.gesture = g.gesture;
  d.translate[2] = 0.01f;
  d.rotate[3] = 1.0f;
  ASSERT(vw_net_gesture_drag(&e, &d) != 0);
  ASSERT(vw_net_gesture_end(&e, g.gesture) != 0);
  t0 = vw_net_now_ms();
  while (server_version(&h) == ver && vw_net_now_ms() - t0 < 10000) vw_net_poll(&e, 20, NULL);
  ver = server_version(&h);
  ASSERT_EQ(ver, 3);
  follow(&v, ver, &acc);
  ASSERT(acc.offsets_end > acc.offsets_first);
  ASSERT(acc.offsets_first <= 1000 && acc.offsets_end > 1000);
  same_as_server(&h, &v);

  /* A brush stroke at vertex 1000's position, then a reset of everything. */
  proto_brush_sample s = {{0}, {0}, 0.02f, 0.3f};
  float *pos = malloc(sizeof(float) * 3 * v.replica.mesh->vertex_count);
  ASSERT_OK(client_replica_positions(&v.replica, pos), NULL);
  memcpy(s.center, pos + 3 * 1000, sizeof(s.center));
  free(pos);
  ASSERT(vw_net_brush(&e, 1, 0, 0, 0, 1, &s) != 0);
  t0 = vw_net_now_ms();
  while (server_version(&h) == ver && vw_net_now_ms() - t0 < 10000) vw_net_poll(&e, 20, NULL);
  follow(&v, ++ver, &acc);
  ASSERT(acc.offsets_end > acc.offsets_first);
  same_as_server(&h, &v);
  ASSERT(vw_net_reset(&e, 0, NULL) != 0);
  t0 = vw_net_now_ms();
  while (server_version(&h) == ver && vw_net_now_ms() - t0 < 10000) vw_net_poll(&e, 20, NULL);
  follow(&v, ++ver, &acc);
  for (uint32_t i = 0; i < 3 * v.replica.mesh->vertex_count; i++) ASSERT(v.replica.offsets[i] == 0.0f);
  same_as_server(&h, &v);
  follow(&e, ver, &acc);
  ASSERT_EQ(e.errors, 1);
  ASSERT_EQ(v.errors, 0);
  vw_net_fini(&v);
  vw_net_fini(&e);
  harness_stop(&h);
}

TEST(net_editor_with_a_viewer_token_watches_read_only) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start_token(&h, "demo", args, "s3cret");
  cJSON *tok = harness_rpc_ok(&h, "token.create", "{\"role\":\"viewer\",\"session\":\"demo\",\"user\":\"vic\"}");
  vw_net bad, good;
  vw_net_init(&bad, "127.0.0.1", h.stream_port, "demo", cJSON_GetObjectItem(tok, "token")->valuestring,
              PROTO_ROLE_EDITOR);
  cJSON_Delete(tok);
  vw_net_init(&good, "127.0.0.1", h.stream_port, "demo", "s3cret", PROTO_ROLE_EDITOR);
  poll_until_state(&bad, VW_NET_LIVE, NULL, 10000);
  poll_until_state(&good, VW_NET_LIVE, NULL, 10000);
  /* The server refused the editor HELLO (FORBIDDEN, closed); the retry as a viewer was at once. */
  ASSERT_EQ(bad.role, PROTO_ROLE_VIEWER);
  ASSERT_EQ(bad.last_error_code, PROTO_ERR_FORBIDDEN);
  ASSERT_STR_CONTAINS(bad.last_error, "FORBIDDEN");
  ASSERT_EQ(bad.reconnects, 1);
  ASSERT_EQ(bad.backoff_ms, 0);
  ASSERT_EQ(vw_net_can_edit(&bad), 0);
  uint32_t t = 0;
  float w = 0.5f;
  ASSERT_EQ(vw_net_set_weights(&bad, 1, &t, &w), 0);
  ASSERT_EQ(good.role, PROTO_ROLE_EDITOR);
  ASSERT_EQ(vw_net_can_edit(&good), 1);
  ASSERT(vw_net_set_weights(&good, 1, &t, &w) != 0);
  vw_net_changes acc;
  follow(&bad, 1, &acc);
  ASSERT_EQ(acc.weights, 1);
  ASSERT(bad.replica.weights[0] == 0.5f);
  vw_net_fini(&bad);
  vw_net_fini(&good);
  harness_stop(&h);
}

/* SIGKILL: no BYE, the socket just ends. (harness_stop would want a clean exit.) */
static void kill_server(harness *h) {
  client_close(&h->rpc);
  kill(h->pid, SIGKILL);
  waitpid(h->pid, NULL, 0);
  h->pid = 0; /* the harness's leftover list skips it (the struct is static: no dangling slot) */
}

/* deformd on a given stream port (the harness keeps a pointer to *h until it stops). */
static void start_on_port(harness *h, int port) {
  char p[16];
  snprintf(p, sizeof(p), "%d", port);
  const char *const args[] = {"--demo", "--stream-port", p, NULL}; /* overrides the harness's 0 */
  harness_start(h, "demo", args);
  ASSERT_EQ(h->stream_port, port);
}

TEST(net_viewer_keeps_its_shape_when_the_server_dies_and_resyncs_from_a_new_one) {
  static harness a, b;
  harness_start(&a, "demo", demo_args);
  int port = a.stream_port;
  vw_net n;
  vw_net_init(&n, "127.0.0.1", port, "demo", NULL, PROTO_ROLE_VIEWER);
  poll_until_state(&n, VW_NET_LIVE, NULL, 10000);
  vw_net_changes acc;
  cJSON_Delete(harness_rpc_ok(&a, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}"));
  cJSON_Delete(harness_rpc_ok(&a, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"100\":[0.002,0,-0.001]}}"));
  follow(&n, server_version(&a), &acc);
  same_as_server(&a, &n);
  uint32_t vc = n.replica.mesh->vertex_count, smile_l = target_index(&n, "smile_L");
  float *before = malloc(sizeof(float) * 3 * vc), *now = malloc(sizeof(float) * 3 * vc);
  ASSERT_OK(client_replica_positions(&n.replica, before), NULL);

  kill_server(&a);
  acc = (vw_net_changes){0};
  poll_until_state(&n, VW_NET_DOWN, &acc, 5000);
  fprintf(stderr, "after SIGKILL: %s\n", n.last_error);
  ASSERT(n.last_error[0] != '\0');
  ASSERT_EQ(acc.snapshot, 0);
  ASSERT_EQ(n.backoff_ms, 250);
  ASSERT_EQ(vw_net_can_edit(&n), 0);
  /* The last shape stays while retries fail. */
  uint64_t t0 = vw_net_now_ms();
  while (vw_net_now_ms() - t0 < 600) ASSERT(vw_net_poll(&n, 20, NULL) != VW_NET_LIVE);
  ASSERT(n.reconnects >= 1);
  ASSERT(n.backoff_ms >= 500);
  ASSERT(n.replica.have_snapshot);
  ASSERT(n.replica.weights[smile_l] == 0.5f);
  ASSERT_OK(client_replica_positions(&n.replica, now), NULL);
  ASSERT(memcmp(before, now, sizeof(float) * 3 * vc) == 0);

  /* A new server on the same port, in another state: the viewer rejoins from its SNAPSHOT. */
  start_on_port(&b, port);
  cJSON_Delete(harness_rpc_ok(&b, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_R\":0.3}}"));
  acc = (vw_net_changes){0};
  poll_until_state(&n, VW_NET_LIVE, &acc, 15000);
  ASSERT_EQ(acc.snapshot, 1);
  ASSERT_EQ(n.joins, 2);
  ASSERT_EQ(n.backoff_ms, 0);
  ASSERT_EQ(n.replica.version, 1);
  ASSERT(n.replica.weights[smile_l] == 0.0f);
  ASSERT(n.replica.weights[target_index(&n, "smile_R")] == 0.3f);
  for (uint32_t i = 0; i < 3 * vc; i++) ASSERT(n.replica.offsets[i] == 0.0f);
  same_as_server(&b, &n);
  /* And it follows the new server. */
  cJSON_Delete(harness_rpc_ok(&b, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.9}}"));
  follow(&n, 2, &acc);
  same_as_server(&b, &n);
  free(before);
  free(now);
  vw_net_fini(&n);
  harness_stop(&b);
}

TEST(net_bye_on_shutdown_marks_the_viewer_down_with_the_reason) {
  harness h;
  harness_start(&h, "demo", demo_args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  poll_until_state(&n, VW_NET_LIVE, NULL, 10000);
  harness_stop(&h); /* SIGTERM: BYE SHUTDOWN, then close */
  poll_until_state(&n, VW_NET_DOWN, NULL, 5000);
  ASSERT_EQ(n.last_error_code, PROTO_ERR_SHUTDOWN);
  ASSERT_STR_CONTAINS(n.last_error, "BYE SHUTDOWN");
  ASSERT(n.replica.have_snapshot);
  ASSERT_EQ(n.backoff_ms, 250);
  vw_net_fini(&n);
}

TEST(net_backoff_doubles_from_a_quarter_second_up_to_eight_seconds) {
  static harness h;
  int port = harness_free_port();
  vw_net n;
  vw_net_init(&n, "127.0.0.1", port, "demo", NULL, PROTO_ROLE_VIEWER);
  uint64_t t0 = vw_net_now_ms();
  ASSERT_EQ(vw_net_poll(&n, 0, NULL), VW_NET_DOWN);
  ASSERT_STR_CONTAINS(n.last_error, "connect");
  ASSERT_EQ(n.backoff_ms, 250);
  ASSERT_EQ(n.reconnects, 0);
  ASSERT(n.retry_at_ms >= t0 + 250 && n.retry_at_ms <= vw_net_now_ms() + 250);
  /* Not before its time. */
  ASSERT_EQ(vw_net_poll(&n, 0, NULL), VW_NET_DOWN);
  ASSERT_EQ(n.reconnects, 0);
  /* A poll that may wait sleeps until the retry, which fails again: 500 ms next. */
  while (n.reconnects == 0) {
    ASSERT(vw_net_now_ms() - t0 < 20000); /* a deadline, not a speed */
    vw_net_poll(&n, 400, NULL);
  }
  ASSERT(vw_net_now_ms() - t0 >= 250);
  ASSERT_EQ(n.backoff_ms, 500);
  ASSERT_EQ(n.state, VW_NET_DOWN);
  /* Skipping the waits (retry_at_ms is the clock): 1, 2, 4, 8 s, then 8 s for good. */
  const uint32_t want[] = {1000, 2000, 4000, 8000, 8000, 8000};
  for (uint32_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    n.retry_at_ms = 0;
    uint64_t before = vw_net_now_ms();
    ASSERT_EQ(vw_net_poll(&n, 0, NULL), VW_NET_DOWN);
    ASSERT_EQ(n.backoff_ms, want[i]);
    ASSERT_EQ(n.reconnects, 2 + i);
    ASSERT(n.retry_at_ms >= before + want[i] && n.retry_at_ms <= vw_net_now_ms() + want[i]);
  }
  /* A server appears: a successful SNAPSHOT resets the backoff... */
  start_on_port(&h, port);
  n.retry_at_ms = 0;
  poll_until_state(&n, VW_NET_LIVE, NULL, 10000);
  ASSERT_EQ(n.backoff_ms, 0);
  ASSERT_EQ(n.joins, 1);
  /* ...so the next loss starts again at a quarter second. */
  kill_server(&h);
  poll_until_state(&n, VW_NET_DOWN, NULL, 5000);
  ASSERT_EQ(n.backoff_ms, 250);
  vw_net_fini(&n);
}

/* A fake server (a plain listening socket in this thread): it checks the HELLO, stays silent
 * for a while, then sends bytes that are not a frame. */
TEST(net_a_malformed_frame_header_drops_the_connection_and_retries) {
  int port;
  int lfd = harness_listen_loopback(&port);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", port, "demo", "tok", PROTO_ROLE_EDITOR);
  /* The kernel completes the handshake from the backlog: HELLO goes out. */
  uint64_t t0 = vw_net_now_ms();
  while (n.phase < 2) { /* PHASE_WELCOME */
    ASSERT(vw_net_now_ms() - t0 < 20000);
    ASSERT_EQ(vw_net_poll(&n, 10, NULL), VW_NET_CONNECTING);
  }
  proto_header h;
  const uint8_t *p;
  client_conn peer = harness_accept_hello(lfd, 1024, 2000, &h, &p);
  int fd = peer.fd;
  proto_hello hello;
  ASSERT_OK(proto_decode_hello(p, h.length, &hello), NULL);
  ASSERT_EQ(hello.role, PROTO_ROLE_EDITOR);
  ASSERT(hello.session.len == 4 && memcmp(hello.session.ptr, "demo", 4) == 0);
  ASSERT(hello.token.len == 3 && memcmp(hello.token.ptr, "tok", 3) == 0);
  /* Waiting for WELCOME does not block either: this thread is the server and sends nothing,
   * so a poll that waited for it would never return (the watchdog fails the test). */
  signal(SIGALRM, poll_blocked);
  alarm(60);
  for (int i = 0; i < 100; i++) ASSERT_EQ(vw_net_poll(&n, 0, NULL), VW_NET_CONNECTING);
  alarm(0);
  signal(SIGALRM, SIG_DFL);
  /* Not a frame: the boundaries are lost, so the connection goes, and a retry is scheduled. */
  static const char junk[PROTO_HEADER_SIZE] = "HTTP/1.1 200 OK\r\n\r\n";
  ASSERT(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
  poll_until_state(&n, VW_NET_DOWN, NULL, 2000);
  ASSERT_STR_CONTAINS(n.last_error, "bad frame header");
  ASSERT_EQ(n.backoff_ms, 250);
  ASSERT_EQ(n.replica.have_snapshot, 0);
  ASSERT_EQ(harness_closed(&peer, 2000), 1);
  client_close(&peer);
  close(lfd);
  vw_net_fini(&n);
}

/* Protocol version 2 through the viewer's connection: a lossless one follows the server
 * exactly and reports exact spans; a quantised one paced at 20 Hz reports what the server
 * granted and stays within half a grid step of the server's offsets. */
TEST(net_version_2_viewers_follow_lossless_exactly_and_quantised_within_their_grid) {
  harness h;
  harness_start(&h, "demo", demo_args);
  vw_net n, q;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  vw_net_init(&q, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  proto_hello_opts lossless = {.codec = PROTO_CODEC_LOSSLESS}, paced = {.codec = PROTO_CODEC_QUANTISED, .max_rate = 20.0f, .tolerance = 0};
  vw_net_set_protocol(&n, 2, &lossless);
  vw_net_set_protocol(&q, 2, &paced);
  poll_until_state(&n, VW_NET_LIVE, NULL, 10000);
  poll_until_state(&q, VW_NET_LIVE, NULL, 10000);
  ASSERT(n.granted.protocol_version == 2 && n.granted.codec == PROTO_CODEC_LOSSLESS && n.granted.tolerance == 0);
  ASSERT(q.granted.protocol_version == 2 && q.granted.codec == PROTO_CODEC_QUANTISED && q.granted.max_rate == 20.0f);
  ASSERT(q.granted.tolerance > 0 && q.granted.tolerance == q.replica.grid.step / 2);
  same_as_server(&h, &n);
  rpc_and_follow(&h, &n, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"17\":[0,0.001,0],\"9000\":[0.002,0,-0.001]}}");
  rpc_and_follow(&h, &n, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5}}");
  rpc_and_follow(&h, &n, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump\"}");
  rpc_and_follow(&h, &n, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"400\":[0.0031,0.0017,-0.0005]}}");
  vw_net_changes acc;
  follow(&q, server_version(&h), &acc);
  ASSERT(acc.offsets_first <= 17 && acc.offsets_end >= 9001);
  ASSERT_EQ(q.replica.mesh->target_count, n.replica.mesh->target_count);
  ASSERT(memcmp(q.replica.weights, n.replica.weights, 4 * (size_t)n.replica.mesh->target_count) == 0);
  for (size_t i = 0; i < 3 * (size_t)n.replica.mesh->vertex_count; i++)
    ASSERT_NEAR(q.replica.offsets[i], n.replica.offsets[i], q.granted.tolerance + 1e-9);
  ASSERT_EQ(n.errors + q.errors, 0);
  vw_net_fini(&n);
  vw_net_fini(&q);
  harness_stop(&h);
}

TEST(net_over_tls_joins_edits_and_refuses_an_untrusted_server) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem"), *other = harness_cert("other-ca.pem");
  const char *const args[] = {"--demo", "--tls-cert", cert, "--tls-key", key, NULL};
  harness h;
  harness_start_full(&h, "demo", args, "net-admin", ca);
  vw_net e, bad;
  vw_net_init(&e, "127.0.0.1", h.stream_port, "demo", "net-admin", PROTO_ROLE_EDITOR);
  proto_hello_opts lossless = {.codec = PROTO_CODEC_LOSSLESS};
  vw_net_set_protocol(&e, PROTO_VERSION_2, &lossless);
  vw_net_set_tls(&e, 1, ca);
  poll_until_state(&e, VW_NET_LIVE, NULL, 10000);
  ASSERT_EQ(e.role, PROTO_ROLE_EDITOR);
  uint32_t t = 3;
  float w = 0.75f;
  ASSERT(vw_net_set_weights(&e, 1, &t, &w) != 0);
  vw_net_changes acc;
  follow(&e, 1, &acc);
  ASSERT(e.replica.weights[3] == 0.75f);
  same_as_server(&h, &e);
  /* A viewer that trusts another CA never gets past the handshake. */
  vw_net_init(&bad, "127.0.0.1", h.stream_port, "demo", "net-admin", PROTO_ROLE_VIEWER);
  vw_net_set_tls(&bad, 1, other);
  uint64_t t0 = vw_net_now_ms();
  while (bad.reconnects < 1 && vw_net_now_ms() - t0 < 10000) vw_net_poll(&bad, 20, NULL);
  ASSERT(bad.joins == 0);
  ASSERT_STR_CONTAINS(bad.last_error, "not trusted");
  vw_net_fini(&bad);
  vw_net_fini(&e);
  harness_stop(&h);
}

TEST(net_viewer_with_several_addresses_moves_to_the_next_when_one_is_lost) {
  /* Two servers on the same session name (relays of one cluster, as far as a viewer can tell):
   * the first address answers nothing, the second serves; when it goes away, the next one in
   * turn (the first, now listening) gets the viewer and a fresh SNAPSHOT. */
  harness a, b;
  harness_start(&b, "demo", demo_args);
  int dead = 1; /* nobody listens on port 1 */
  vw_net n;
  vw_net_init(&n, "127.0.0.1", dead, "demo", NULL, PROTO_ROLE_VIEWER);
  ASSERT_OK(vw_net_add_address(&n, "127.0.0.1", b.stream_port), NULL);
  poll_until_state(&n, VW_NET_LIVE, NULL, 30000);
  ASSERT_EQ(n.port, b.stream_port);
  ASSERT_EQ(n.joins, 1);
  harness_start(&a, "demo", demo_args);
  snprintf(n.addresses[0].host, sizeof(n.addresses[0].host), "127.0.0.1"); /* the first now answers */
  n.addresses[0].port = a.stream_port;
  cJSON_Delete(harness_rpc_ok(&a, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}"));
  harness_kill(&b);
  poll_until_state(&n, VW_NET_DOWN, NULL, 30000);
  poll_until_state(&n, VW_NET_LIVE, NULL, 30000);
  ASSERT_EQ(n.port, a.stream_port);
  ASSERT_EQ(n.joins, 2);
  ASSERT_EQ(n.replica.version, 1);
  same_as_server(&a, &n);
  vw_net_fini(&n);
  harness_stop(&a);
}
