/*
 * test_stream.c — the binary stream port against a real deformd: many viewers rebuild the
 * server's state bitwise, slow readers are caught up or dropped without stalling anyone, and
 * malformed frames fail only their connection or request.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

/* Positions of a replica compared with the server's, bit for bit. */
static void assert_same_shape(harness *h, client_replica *r) {
  uint32_t n;
  float *server = harness_server_positions(h, "demo", &n);
  ASSERT_EQ(n, r->mesh->vertex_count);
  float *mine = malloc(sizeof(float) * 3 * n);
  ASSERT_OK(client_replica_positions(r, mine), NULL);
  for (uint32_t i = 0; i < 3 * n; i++)
    if (memcmp(&mine[i], &server[i], sizeof(float)) != 0)
      test__fail(__FILE__, __LINE__, "coordinate %u differs: %.9g (viewer) vs %.9g (server)", i, mine[i], server[i]);
  free(mine);
  free(server);
}

static uint64_t server_version(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

/* Reads whatever an editor connection has been sent, without blocking. */
static void drain(client_conn *c, client_replica *r) {
  proto_header hd;
  const uint8_t *p;
  char err[256];
  while (client_read_frame(c, 0, &hd, &p, err, sizeof(err)) == 0) {
    ASSERT(hd.type != PROTO_ERROR);
    client_replica_apply(r, &hd, p, err, sizeof(err));
  }
}

TEST(two_editors_and_ten_viewers_rebuild_the_server_state_bitwise) {
  harness h;
  harness_start(&h, "demo", demo_args);
  enum { VIEWERS = 10, EDITS = 150 };
  client_conn viewers[VIEWERS], editors[2];
  client_replica vr[VIEWERS], er[2];
  for (int i = 0; i < VIEWERS; i++) harness_join(&h, &viewers[i], &vr[i], "demo", PROTO_ROLE_VIEWER, NULL);
  for (int i = 0; i < 2; i++) harness_join(&h, &editors[i], &er[i], "demo", PROTO_ROLE_EDITOR, NULL);
  uint32_t nv = vr[0].mesh->vertex_count, nt = vr[0].mesh->target_count;
  proto_buf b;
  proto_buf_init(&b);
  for (int e = 0; e < EDITS; e++) {
    /* Editor 0: a few weights; editor 1: offsets of 40 random vertices (sorted, unique). */
    uint32_t ti[3];
    float tv[3];
    for (int k = 0; k < 3; k++) {
      ti[k] = rnd() % nt;
      tv[k] = (float)(rnd() % 1001) / 1000.0f;
    }
    ASSERT_OK(proto_encode_edit_weights(&b, (uint32_t)e, 3, ti, tv), NULL);
    ASSERT_OK(client_send_buf(&editors[0], &b), NULL);
    uint32_t vi[40];
    int32_t q[120];
    uint32_t base = rnd() % (nv - 4000);
    for (int k = 0; k < 40; k++) {
      vi[k] = base + (uint32_t)k * 97;
      for (int c = 0; c < 3; c++) q[3 * k + c] = (int32_t)(rnd() % 20001) - 10000;
    }
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e, 40, vi, q), NULL);
    ASSERT_OK(client_send_buf(&editors[1], &b), NULL);
    if (e % 50 == 0) /* and scripts edit through JSON-RPC at the same time */
      cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.25}}"));
    drain(&editors[0], &er[0]);
    drain(&editors[1], &er[1]);
  }
  proto_buf_fini(&b);
  /* A PING round trip on each editor proves the server has read all their edits. */
  for (int i = 0; i < 2; i++) {
    proto_buf_init(&b);
    proto_ping ping = {1, 0, 99};
    proto_encode_ping(&b, PROTO_PING, &ping);
    ASSERT_OK(client_send_buf(&editors[i], &b), NULL);
    proto_buf_fini(&b);
    for (;;) {
      proto_header hd;
      const uint8_t *p;
      char err[256];
      ASSERT_EQ(client_read_frame(&editors[i], 10000, &hd, &p, err, sizeof(err)), 0);
      ASSERT(hd.type != PROTO_ERROR);
      if (hd.type == PROTO_PONG) break;
      client_replica_apply(&er[i], &hd, p, err, sizeof(err));
    }
  }
  uint64_t final = server_version(&h);
  ASSERT_EQ(final, 2 * EDITS + EDITS / 50);
  for (int i = 0; i < VIEWERS; i++) {
    harness_follow(&viewers[i], &vr[i], final, 20000);
    assert_same_shape(&h, &vr[i]);
  }
  for (int i = 0; i < 2; i++) {
    harness_follow(&editors[i], &er[i], final, 20000);
    assert_same_shape(&h, &er[i]);
  }
  /* A viewer joining now gets the same state from its snapshot alone. */
  client_conn late;
  client_replica lr;
  harness_join(&h, &late, &lr, "demo", PROTO_ROLE_VIEWER, NULL);
  ASSERT_EQ(lr.version, final);
  assert_same_shape(&h, &lr);
  client_replica_fini(&lr);
  client_close(&late);
  for (int i = 0; i < VIEWERS; i++) {
    client_replica_fini(&vr[i]);
    client_close(&viewers[i]);
  }
  for (int i = 0; i < 2; i++) {
    client_replica_fini(&er[i]);
    client_close(&editors[i]);
  }
  harness_stop(&h);
}

static size_t server_rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  size_t kb = 0;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %zu kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

TEST(slow_viewers_are_caught_up_or_dropped_without_stalling_others) {
  harness h;
  /* No heap reserve: its job writes ~100 MiB after the session opens, at a time of its own,
   * and the RSS bound below is about what the connections queue, not about the reserve. */
  /* The slow timeout leaves `pausing` (behind for a few hundred milliseconds of edits) ample
   * room on a slow build or a busy machine; `stuck` is dropped after it. */
  const char *const args[] = {"--demo", "--soft-limit", "65536", "--slow-timeout-ms", "6000", "--reserve-mb", "0",
                              NULL};
  harness_start(&h, "demo", args);
  client_conn active, pausing, stuck, editor;
  client_replica ar, pr, er;
  harness_join(&h, &active, &ar, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &pausing, &pr, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &editor, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  /* `stuck` says HELLO and never reads again: not even its snapshot. */
  char err[256];
  ASSERT_OK(client_connect(&stuck, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_OK(client_hello(&stuck, "demo", PROTO_ROLE_VIEWER, NULL), NULL);
  harness_wait_demo_dressed(&h, "demo"); /* so that the RSS below counts the connections' queues only */
  size_t rss_before = server_rss_kb(h.pid);

  uint32_t nv = ar.mesh->vertex_count;
  uint32_t *idx = malloc(sizeof(uint32_t) * nv);
  int32_t *q = malloc(sizeof(int32_t) * 3 * nv);
  for (uint32_t v = 0; v < nv; v++) idx[v] = v;
  proto_buf b;
  proto_buf_init(&b);
  size_t frame_size = 0, max_queued = 0;
  int catchups = 0, last = 0;
  uint64_t lag_seen = 0;
  /* Edit until `pausing` has fallen behind, stayed behind a moment, caught up, and kept up for
   * ten more edits. Driven by what the server reports, not by timing, so that slow builds
   * (sanitizers) behave the same. */
  for (int e = 1, after = -1; e <= 400 && after < 10; e++) {
    /* Every vertex moves: each DELTA is a few hundred kilobytes. */
    for (uint32_t v = 0; v < 3 * nv; v++) q[v] = (int32_t)((v * 7919u + (uint32_t)e * 104729u) % 2001u) - 1000;
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e, nv, idx, q), NULL);
    frame_size = b.len;
    ASSERT_OK(client_send_buf(&editor, &b), NULL);
    last = e;
    /* The active viewer gets every edit while the others lag: were the server waiting for
     * them, this would not come until `stuck` was dropped (and would fail when pausing is). */
    harness_follow(&active, &ar, (uint64_t)e, 10000);
    harness_follow(&editor, &er, (uint64_t)e, 10000);
    cJSON *r = harness_rpc_ok(&h, "server.stats", NULL);
    size_t queued = (size_t)cJSON_GetObjectItem(r, "queued_bytes")->valuedouble;
    int lagging = cJSON_GetObjectItem(r, "lagging_connections")->valueint;
    cJSON_Delete(r);
    if (queued > max_queued) max_queued = queued;
    if (!lag_seen && lagging >= 2) lag_seen = client_now_ns(); /* stuck and pausing both behind */
    if (after < 0 && lag_seen && client_now_ns() - lag_seen > 300000000ull) after = 0;
    if (after >= 0) {
      catchups += harness_follow(&pausing, &pr, (uint64_t)e, 20000);
      after++;
    }
  }
  ASSERT(lag_seen != 0);
  harness_follow(&pausing, &pr, (uint64_t)last, 20000);
  free(idx);
  free(q);
  proto_buf_fini(&b);
  fprintf(stderr, "frame %zu bytes, max queued %zu bytes, catch-ups seen %d\n", frame_size, max_queued, catchups);
  /* Memory stays bounded: per connection at most the soft limit or one frame, never the sum of
   * everything sent (every frame × every viewer). */
  ASSERT(max_queued <= 4 * (65536 + frame_size) + 4500000); /* + the SNAPSHOT `stuck` never reads
                                                             * (4.2 MB in version 1: the head's 68 targets) */
  assert_same_shape(&h, &ar);
  assert_same_shape(&h, &pr);
  ASSERT(catchups >= 1);
  /* The stuck viewer is dropped after the slow timeout. */
  int dropped = 0;
  for (int i = 0; i < 300 && !dropped; i++) {
    cJSON *r = harness_rpc_ok(&h, "server.stats", NULL);
    dropped = cJSON_GetObjectItem(r, "clients_dropped")->valueint;
    if (i == 0) ASSERT(cJSON_GetObjectItem(r, "frames_coalesced")->valueint > 0);
    cJSON_Delete(r);
    if (!dropped) usleep(100000);
  }
  ASSERT_EQ(dropped, 1);
  ASSERT(harness_closed(&stuck, 10000));
  size_t rss_after = server_rss_kb(h.pid);
  fprintf(stderr, "server RSS %zu kB -> %zu kB\n", rss_before, rss_after);
#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine keeps freed memory resident on purpose */
  ASSERT(rss_after < rss_before + 64 * 1024);
#endif
  client_replica_fini(&ar);
  client_replica_fini(&pr);
  client_replica_fini(&er);
  client_close(&active);
  client_close(&pausing);
  client_close(&stuck);
  client_close(&editor);
  harness_stop(&h);
}

static void send_raw(client_conn *c, const void *p, size_t n) { ASSERT_OK(client_send(c, p, n), NULL); }

static void header_bytes(uint8_t *out, uint32_t magic, uint16_t version, uint8_t type, uint32_t len) {
  proto_header h = {magic, version, type, 0, len, 0};
  proto_header_encode(&h, out);
}

/* A PING on `c` is answered: the connection is alive. */
static void assert_alive(client_conn *c) {
  proto_buf b;
  proto_buf_init(&b);
  proto_ping ping = {7, 0, 7};
  proto_encode_ping(&b, PROTO_PING, &ping);
  ASSERT_OK(client_send_buf(c, &b), NULL);
  proto_buf_fini(&b);
  char err[256];
  for (;;) {
    proto_header hd;
    const uint8_t *p;
    ASSERT_EQ(client_read_frame(c, 10000, &hd, &p, err, sizeof(err)), 0);
    if (hd.type == PROTO_PONG) return;
  }
}

TEST(malformed_frames_fail_only_their_connection_or_request) {
  harness h;
  const char *const args[] = {"--demo", "--max-frame", "1048576", NULL};
  harness_start(&h, "demo", args);
  client_conn healthy;
  client_replica hr;
  harness_join(&h, &healthy, &hr, "demo", PROTO_ROLE_VIEWER, NULL);
  char err[256];
  client_conn c;
  uint8_t hdr[PROTO_HEADER_SIZE];

  /* Truncated header, then the client goes away. */
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  send_raw(&c, "DFMD\x01", 5);
  client_close(&c);

  /* Bad magic, wrong version, over-long length, first frame not HELLO: ERROR, then closed. */
  struct {
    uint32_t magic;
    uint16_t version;
    uint8_t type;
    uint32_t len;
  } cases[] = {{0x21212121u, 1, PROTO_HELLO, 0},
               {PROTO_MAGIC, 9, PROTO_HELLO, 0},
               {PROTO_MAGIC, 1, PROTO_HELLO, 2u << 20},
               {PROTO_MAGIC, 1, PROTO_PING, 0}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
    header_bytes(hdr, cases[i].magic, cases[i].version, cases[i].type, cases[i].len);
    send_raw(&c, hdr, sizeof(hdr));
    ASSERT_EQ(harness_expect_error(&c, PROTO_ERROR, NULL, 5000), PROTO_ERR_MALFORMED);
    ASSERT(harness_closed(&c, 5000));
    client_close(&c);
  }

  /* Unknown session. */
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_OK(client_hello(&c, "nope", PROTO_ROLE_VIEWER, NULL), NULL);
  ASSERT_EQ(harness_expect_error(&c, PROTO_ERROR, NULL, 5000), PROTO_ERR_UNKNOWN_SESSION);
  ASSERT(harness_closed(&c, 5000));
  client_close(&c);

  /* 10 MB of garbage. */
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  size_t big = 10u << 20;
  uint8_t *garbage = malloc(big);
  for (size_t i = 0; i < big; i++) garbage[i] = (uint8_t)(i * 131u + 7u);
  client_send(&c, garbage, big); /* may fail half-way once the server closes: that is fine */
  free(garbage);
  ASSERT(harness_closed(&c, 10000));
  client_close(&c);

  /* Request-level problems on an editor: an ERROR naming the request, and the connection stays. */
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_buf b;
  proto_buf_init(&b);
  uint32_t ti[1] = {2};
  float tv[1] = {0.5f};
  /* (a) a count that overflows the payload */
  ASSERT_OK(proto_encode_edit_weights(&b, 41, 1, ti, tv), NULL);
  b.data[PROTO_HEADER_SIZE + 5 + 1] = 0xff; /* count := 0x..ff.. */
  b.data[PROTO_HEADER_SIZE + 5 + 2] = 0xff;
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  uint32_t rid = 0;
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_MALFORMED);
  ASSERT_EQ(rid, 41);
  /* (b) a NaN weight */
  ASSERT_OK(proto_encode_edit_weights(&b, 42, 1, ti, tv), NULL);
  float nan = NAN;
  memcpy(b.data + b.len - 4, &nan, 4);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 42);
  /* (c) a target index past the mesh's targets */
  ti[0] = 500;
  ASSERT_OK(proto_encode_edit_weights(&b, 43, 1, ti, tv), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 43);
  /* (d) a vertex index past the mesh's vertices */
  uint32_t vi[1] = {100000}; /* the demo head has 41077 */
  int32_t q[3] = {1, 1, 1};
  ASSERT_OK(proto_encode_edit_offsets(&b, 44, 1, vi, q), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 44);
  assert_alive(&ed);

  /* A viewer's edit is refused; the viewer stays connected. */
  ti[0] = 1;
  ASSERT_OK(proto_encode_edit_weights(&b, 45, 1, ti, tv), NULL);
  ASSERT_OK(client_send_buf(&healthy, &b), NULL);
  ASSERT_EQ(harness_expect_error(&healthy, PROTO_ERROR, &rid, 5000), PROTO_ERR_FORBIDDEN);
  ASSERT_EQ(rid, 45);
  assert_alive(&healthy);
  proto_buf_fini(&b);

  /* Nothing above changed the state, and everyone still gets live updates. */
  ASSERT_EQ(server_version(&h), 0);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"blink_L\":1}}"));
  harness_follow(&healthy, &hr, 1, 10000);
  ASSERT(hr.weights[mesh_find_target(hr.mesh, "blink_L")] == 1.0f);
  harness_follow(&ed, &er, 1, 10000);
  client_replica_fini(&hr);
  client_replica_fini(&er);
  client_close(&healthy);
  client_close(&ed);
  harness_stop(&h);
}

/* An EDIT of kind 1 may carry a quantised run, 16-bit (mode 2) or 8-bit (mode 3): the server
 * applies exactly (float)q · scale to targets first.., and refuses a value outside a target's
 * range like any weights edit. The oracle is the formula of protocol.md §4.1, computed here. */
static void send_edit_run(client_conn *c, proto_buf *b, uint32_t request_id, uint32_t first, uint32_t count,
                          const int16_t *q16, const int8_t *q8, float scale) {
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  uint8_t *p = proto_buf_append(b, 4 + 1 + 1 + 4 + 2 + 4);
  ASSERT(p != NULL);
  uint8_t mode = q8 ? PROTO_WEIGHTS_QRUN8 : PROTO_WEIGHTS_QRUN;
  memcpy(p, &request_id, 4); /* little-endian host, as the tests assume elsewhere */
  p[4] = PROTO_EDIT_WEIGHTS;
  p[5] = mode;
  memcpy(p + 6, &count, 4);
  uint16_t f16 = (uint16_t)first;
  memcpy(p + 10, &f16, 2);
  memcpy(p + 12, &scale, 4);
  for (uint32_t i = 0; i < count; i++) {
    if (q8) {
      uint8_t *x = proto_buf_append(b, 1);
      *x = (uint8_t)q8[i];
    } else {
      uint8_t *x = proto_buf_append(b, 2);
      memcpy(x, &q16[i], 2);
    }
  }
  ASSERT_OK(proto_frame_end(b, at), NULL);
  ASSERT_OK(client_send_buf(c, b), NULL);
}

TEST(quantised_weight_runs_in_edits_set_exactly_the_weights_they_encode) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_buf b;
  proto_buf_init(&b);
  /* 16-bit: targets 2, 3, 4. */
  int16_t q16[3] = {32767, 12345, 0};
  float s16 = 1.0f / 32767.0f;
  send_edit_run(&ed, &b, 1, 2, 3, q16, NULL, s16);
  harness_follow(&ed, &er, 1, 10000);
  for (int i = 0; i < 3; i++) ASSERT(er.weights[2 + i] == (float)q16[i] * s16);
  /* 8-bit: targets 5, 6, 7, 8 (the last one back to 0). */
  int8_t q8[4] = {127, 64, 1, 0};
  float s8 = 0.75f / 127.0f;
  send_edit_run(&ed, &b, 2, 5, 4, NULL, q8, s8);
  harness_follow(&ed, &er, 2, 10000);
  for (int i = 0; i < 4; i++) ASSERT(er.weights[5 + i] == (float)q8[i] * s8);
  for (int i = 0; i < 3; i++) ASSERT(er.weights[2 + i] == (float)q16[i] * s16); /* untouched */
  /* The server's own state says the same. */
  cJSON *w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  cJSON *ws = cJSON_GetObjectItem(w, "weights");
  for (int t = 2; t <= 8; t++) {
    cJSON *v = cJSON_GetObjectItem(ws, er.mesh->targets[t].name);
    ASSERT(cJSON_IsNumber(v));
    ASSERT((float)v->valuedouble == er.weights[t]); /* printed as the shortest float that reads back */
  }
  cJSON_Delete(w);
  /* A value outside the targets' range [0, 1] (-127 · 0.5): refused, nothing applied. */
  int8_t bad[1] = {-127};
  send_edit_run(&ed, &b, 3, 5, 1, NULL, bad, 0.5f);
  uint32_t rid = 0;
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 3);
  /* A run past the last target of the mesh (68 targets): refused. */
  send_edit_run(&ed, &b, 4, 66, 4, NULL, q8, s8);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 5000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 4);
  ASSERT_EQ(server_version(&h), 2);
  assert_alive(&ed);
  proto_buf_fini(&b);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

TEST(sigterm_says_bye_to_viewers_and_exits_cleanly) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  kill(h.pid, SIGTERM);
  ASSERT_EQ(harness_expect_error(&v, PROTO_BYE, NULL, 5000), PROTO_ERR_SHUTDOWN);
  ASSERT(harness_closed(&v, 5000));
  harness_stop(&h); /* asserts exit status 0 */
  client_replica_fini(&r);
  client_close(&v);
}

TEST(closing_a_session_says_bye_to_its_viewers) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  cJSON_Delete(harness_rpc_ok(&h, "session.close", "{\"session\":\"demo\"}"));
  ASSERT_EQ(harness_expect_error(&v, PROTO_BYE, NULL, 5000), PROTO_ERR_SESSION_CLOSED);
  ASSERT(harness_closed(&v, 5000));
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
}

/* state.get's "viewers" and "editors" of demo, into *viewers and *editors. */
static void joined_counts(harness *h, int *viewers, int *editors) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  *viewers = cJSON_GetObjectItem(r, "viewers")->valueint;
  *editors = cJSON_GetObjectItem(r, "editors")->valueint;
  cJSON_Delete(r);
}

TEST(state_get_counts_the_viewers_and_editors_that_joined_and_not_those_that_left) {
  harness h;
  harness_start(&h, "demo", demo_args);
  enum { N = 5 };
  client_conn c[N];
  client_replica r[N];
  proto_hello_opts paced = {.codec = PROTO_CODEC_QUANTISED, .max_rate = 10.0f};
  harness_join(&h, &c[0], &r[0], "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join2(&h, &c[1], &r[1], "demo", PROTO_ROLE_VIEWER, NULL, &paced);
  harness_join(&h, &c[2], &r[2], "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &c[3], &r[3], "demo", PROTO_ROLE_EDITOR, NULL);
  harness_join2(&h, &c[4], &r[4], "demo", PROTO_ROLE_EDITOR, NULL, &paced);
  int viewers, editors;
  joined_counts(&h, &viewers, &editors);
  ASSERT_EQ(viewers, 5); /* every connection that joined, editors too */
  ASSERT_EQ(editors, 2);
  /* The paced viewer and one editor leave: the server sees them go when it reads the close. */
  for (int i = 1; i < N; i += 2) {
    client_replica_fini(&r[i]);
    client_close(&c[i]);
  }
  for (int i = 0; i < 500; i++) {
    joined_counts(&h, &viewers, &editors);
    if (viewers == 3) break;
    usleep(10000);
  }
  ASSERT_EQ(viewers, 3);
  ASSERT_EQ(editors, 1);
  for (int i = 0; i < N; i += 2) {
    client_replica_fini(&r[i]);
    client_close(&c[i]);
  }
  harness_stop(&h);
}

TEST(editors_need_the_token_when_one_is_set) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start_token(&h, "demo", args, "s3cret");
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_OK(client_hello(&c, "demo", PROTO_ROLE_EDITOR, "guess"), NULL);
  ASSERT_EQ(harness_expect_error(&c, PROTO_ERROR, NULL, 5000), PROTO_ERR_FORBIDDEN);
  client_close(&c);
  client_replica r;
  harness_join(&h, &c, &r, "demo", PROTO_ROLE_EDITOR, "s3cret");
  client_replica_fini(&r);
  client_close(&c);
  harness_join(&h, &c, &r, "demo", PROTO_ROLE_VIEWER, "s3cret"); /* viewers need one too */
  client_replica_fini(&r);
  client_close(&c);
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_OK(client_hello(&c, "demo", PROTO_ROLE_VIEWER, NULL), NULL);
  ASSERT_EQ(harness_expect_error(&c, PROTO_ERROR, NULL, 5000), PROTO_ERR_FORBIDDEN);
  client_close(&c);
  /* JSON-RPC connections must call auth first. */
  client_conn rpc;
  ASSERT_OK(client_connect(&rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  cJSON *result, *error;
  ASSERT_EQ(client_rpc(&rpc, "session.list", NULL, 5000, &result, &error), CLIENT_ERPC);
  ASSERT_EQ(cJSON_GetObjectItem(error, "code")->valueint, -32009);
  cJSON_Delete(error);
  cJSON *auth = cJSON_Parse("{\"token\":\"wrong\"}");
  ASSERT_EQ(client_rpc(&rpc, "auth", auth, 5000, &result, &error), CLIENT_ERPC);
  cJSON_Delete(error);
  cJSON_Delete(auth);
  auth = cJSON_Parse("{\"token\":\"s3cret\"}");
  ASSERT_EQ(client_rpc(&rpc, "auth", auth, 5000, &result, &error), 0);
  cJSON_Delete(result);
  cJSON_Delete(auth);
  ASSERT_EQ(client_rpc(&rpc, "session.list", NULL, 5000, &result, &error), 0);
  cJSON_Delete(result);
  client_close(&rpc);
  harness_stop(&h);
}

TEST(a_connection_that_never_says_hello_is_closed) {
  harness h;
  const char *const args[] = {"--demo", "--hello-timeout-ms", "500", NULL};
  harness_start(&h, "demo", args);
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_EQ(harness_expect_error(&c, PROTO_ERROR, NULL, 5000), PROTO_ERR_MALFORMED);
  ASSERT(harness_closed(&c, 5000));
  client_close(&c);
  harness_stop(&h);
}

TEST(a_client_that_sends_without_reading_is_not_read_either) {
  /* 20 MB of PINGs and nothing read: the server stops reading this connection once its
   * replies pass the soft limit, so its memory stays bounded and everyone else is served. */
  harness h;
  const char *const args[] = {"--demo", "--soft-limit", "262144", NULL};
  harness_start(&h, "demo", args);
  client_conn c;
  client_replica r;
  harness_join(&h, &c, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  int flags = fcntl(c.fd, F_GETFL);
  fcntl(c.fd, F_SETFL, flags | O_NONBLOCK);
  proto_buf b;
  proto_buf_init(&b);
  proto_ping ping = {1, 0, 1};
  for (int i = 0; i < 4096; i++) proto_encode_ping(&b, PROTO_PING, &ping);
  size_t sent = 0;
  uint64_t deadline = client_now_ns() + 5000000000ull;
  while (sent < (20u << 20) && client_now_ns() < deadline) {
    ssize_t w = send(c.fd, b.data, b.len, MSG_NOSIGNAL);
    if (w > 0) sent += (size_t)w;
    else usleep(1000);
  }
  proto_buf_fini(&b);
  fprintf(stderr, "sent %zu bytes of PINGs before the socket filled\n", sent);
  ASSERT(sent < (20u << 20)); /* the server stopped reading: the socket filled up */
  cJSON *st = harness_rpc_ok(&h, "server.stats", NULL);
  size_t queued = (size_t)cJSON_GetObjectItem(st, "queued_bytes")->valuedouble;
  cJSON_Delete(st);
  fprintf(stderr, "server queued %zu bytes\n", queued);
  ASSERT(queued < 2 * 262144 + 65536);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5}}"));
  client_replica_fini(&r);
  client_close(&c);
  harness_stop(&h);
}

TEST(connections_over_the_limit_are_refused_with_a_reason) {
  harness h;
  const char *const args[] = {"--demo", "--max-connections", "2", NULL};
  harness_start(&h, "demo", args); /* its RPC connection is the first */
  client_conn a, b;
  client_replica r;
  harness_join(&h, &a, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  char err[256];
  ASSERT_OK(client_connect(&b, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_EQ(harness_expect_error(&b, PROTO_ERROR, NULL, 5000), PROTO_ERR_OVERLOADED);
  ASSERT(harness_closed(&b, 5000));
  client_close(&b);
  client_replica_fini(&r);
  client_close(&a);
  harness_stop(&h);
}

/* A relay's link for an editor's EDITs joins a session without being sent its frames. When the
 * session closes, the link gets BYE SESSION_CLOSED and is closed like every viewer: it kept
 * pointing at the freed session, and an EDIT through it then read freed memory. */
TEST(a_forwarding_link_leaves_a_closed_session_like_its_viewers) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  client_conn link;
  harness_connect(&h, &link, h.stream_port);
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hello = {PROTO_VERSION_2, PROTO_ROLE_EDITOR, {"demo", 4}, {"", 0}};
  proto_hello_opts o = {0};
  ASSERT_OK(proto_encode_hello_forward(&b, &hello, &o), NULL);
  ASSERT_OK(client_send_buf(&link, &b), NULL);
  proto_header fh;
  const uint8_t *payload;
  char err[256];
  ASSERT_OK(client_read_frame(&link, 10000, &fh, &payload, err, sizeof(err)), err);
  ASSERT_EQ(fh.type, PROTO_WELCOME);
  cJSON_Delete(harness_rpc_ok(&h, "session.close", "{\"session\":\"demo\"}"));
  ASSERT_EQ(harness_expect_error(&link, PROTO_BYE, NULL, 10000), PROTO_ERR_SESSION_CLOSED);
  ASSERT(harness_closed(&link, 5000));
  client_close(&link);
  proto_buf_fini(&b);
  cJSON_Delete(harness_rpc_ok(&h, "session.list", NULL)); /* and the server goes on */
  harness_stop(&h);
}
