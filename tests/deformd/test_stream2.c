/*
 * test_stream2.c — protocol version 2 against a real deformd: quantised viewers stay within the
 * documented bound of the server's state through 10,000 deltas (no drift) and equal a late
 * joiner of their grid bit for bit; lossless ones equal version 1 viewers and the server bit
 * for bit; a viewer paced at 10 Hz beside a 60 Hz editor gets at most 12 updates in any second
 * and the exact final state while full-rate viewers get every change; catch-ups of version 2 are
 * exact; refused HELLOs say why.
 *
 * The oracles: a version 1 viewer (the reference replica, itself checked bitwise against the
 * server's export), the server's state through JSON-RPC, and the bound written out from the
 * grid the SNAPSHOT declares.
 */
#include <math.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

static uint32_t rng_state = 7;
static uint32_t rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

static uint64_t server_version(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static float *positions(const client_replica *r) {
  float *p = malloc(sizeof(float) * 3 * (r->mesh->vertex_count + 1));
  ASSERT_OK(client_replica_positions(r, p), NULL);
  return p;
}

/* Two replicas hold the same state, bit for bit: weights, offsets, targets, positions. */
static void assert_same_replica(const client_replica *a, const client_replica *b, const char *what) {
  ASSERT_EQ(a->version, b->version);
  ASSERT_EQ(a->mesh->target_count, b->mesh->target_count);
  uint32_t nv = a->mesh->vertex_count;
  if (memcmp(a->weights, b->weights, 4 * (size_t)a->mesh->target_count) != 0)
    test__fail(__FILE__, __LINE__, "%s: weights differ", what);
  if (memcmp(a->offsets, b->offsets, 12 * (size_t)nv) != 0) test__fail(__FILE__, __LINE__, "%s: offsets differ", what);
  for (uint32_t t = 0; t < a->mesh->target_count; t++) {
    const mesh_target *x = &a->mesh->targets[t], *y = &b->mesh->targets[t];
    if (x->count != y->count || memcmp(x->indices, y->indices, 4 * (size_t)x->count) != 0 ||
        memcmp(x->deltas, y->deltas, 12 * (size_t)x->count) != 0)
      test__fail(__FILE__, __LINE__, "%s: target %u differs", what, t);
  }
  float *p = positions(a), *q = positions(b);
  if (memcmp(p, q, 12 * (size_t)nv) != 0) test__fail(__FILE__, __LINE__, "%s: positions differ", what);
  free(p);
  free(q);
}

/* A quantised replica against the exact one: each field within the bound docs/protocol.md
 * §12.6 states (half a grid step, plus float rounding), positions within their sum. */
static void assert_within_grid(const client_replica *q, const client_replica *exact) {
  ASSERT_EQ(q->version, exact->version);
  ASSERT(q->grid.shift > 0 && q->quantum == exact->quantum);
  double half = q->grid.step / 2.0, worst_pos = 0, worst_off = 0;
  uint32_t nv = q->mesh->vertex_count, nt = q->mesh->target_count;
  ASSERT(memcmp(q->weights, exact->weights, 4 * (size_t)nt) == 0); /* weights travel exactly */
  double wsum = 0;
  for (uint32_t t = 0; t < nt; t++) wsum += fabs(exact->weights[t]);
  for (size_t i = 0; i < 3 * (size_t)nv; i++) {
    double d = fabs((double)q->offsets[i] - exact->offsets[i]);
    ASSERT_NEAR(q->offsets[i], exact->offsets[i], half + ldexp(fabs(exact->offsets[i]), -22));
    if (d > worst_off) worst_off = d;
  }
  float *p = positions(q), *e = positions(exact);
  for (size_t i = 0; i < 3 * (size_t)nv; i++) {
    double bound = half * (2 + wsum) + ldexp(fabs(e[i]) + 1e-3, -20);
    ASSERT_NEAR(p[i], e[i], bound);
    if (fabs((double)p[i] - e[i]) > worst_pos) worst_pos = fabs((double)p[i] - e[i]);
  }
  fprintf(stderr, "grid step %.3g: worst offset error %.3g, worst position error %.3g (bound %.3g)\n", q->grid.step,
          worst_off, worst_pos, half * (2 + wsum));
  free(p);
  free(e);
}

/* Reads every frame there is now (no waiting) into r; counts complete updates and notes when
 * each arrived (ms). */
static void poll_viewer(client_conn *c, client_replica *r, uint32_t *updates, double *times, uint32_t cap) {
  proto_header hd;
  const uint8_t *p;
  char err[256];
  while (client_read_frame(c, 0, &hd, &p, err, sizeof(err)) == 0) {
    ASSERT(hd.type != PROTO_ERROR && hd.type != PROTO_BYE);
    ASSERT_OK(client_replica_apply(r, &hd, p, err, sizeof(err)), err);
    int state = hd.type == PROTO_WEIGHTS || hd.type == PROTO_DELTA || hd.type == PROTO_TARGET ||
                hd.type == PROTO_TARGET_META;
    if (state && !(hd.flags & PROTO_FLAG_MORE)) {
      if (times && *updates < cap) times[*updates] = (double)client_now_ns() / 1e6;
      (*updates)++;
    }
  }
}

TEST(a_quantised_viewer_through_10000_deltas_stays_within_its_grid_and_equals_a_late_joiner) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn c1, cl, cq, cc, ed;
  client_replica r1, rl, rq, rc, er;
  proto_hello_opts lossless = {.codec = PROTO_CODEC_LOSSLESS}, quantised = {.codec = PROTO_CODEC_QUANTISED},
                   coarse = {.codec = PROTO_CODEC_QUANTISED, .tolerance = 2e-4f};
  harness_join(&h, &c1, &r1, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join2(&h, &cl, &rl, "demo", PROTO_ROLE_VIEWER, NULL, &lossless);
  harness_join2(&h, &cq, &rq, "demo", PROTO_ROLE_VIEWER, NULL, &quantised);
  harness_join2(&h, &cc, &rc, "demo", PROTO_ROLE_VIEWER, NULL, &coarse); /* a grid made on the pool */
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  ASSERT_EQ(r1.protocol, 1);
  ASSERT(rl.protocol == 2 && rl.grid.shift == 0);
  ASSERT(rq.protocol == 2 && rq.grid.shift == 5);
  ASSERT(rc.grid.shift > rq.grid.shift && rc.grid.step / 2 <= 2e-4f);
  uint32_t nv = r1.mesh->vertex_count;
  proto_buf b;
  proto_buf_init(&b);
  uint64_t version = 0;
  for (int e = 0; e < 10000; e++) {
    uint32_t n = 1 + rnd() % 24, at = rnd() % (nv - 2000), idx[24];
    int32_t q[72];
    for (uint32_t k = 0; k < n; k++) {
      at += 1 + rnd() % 60; /* ascending, spread over a region */
      idx[k] = at;
      for (int c = 0; c < 3; c++) q[3 * k + c] = (int32_t)(rnd() % 200001) - 100000;
    }
    if (e % 10 == 9) memset(q, 0, sizeof(int32_t) * 3); /* a vertex back at rest */
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e + 1, n, idx, q), NULL);
    if (e % 97 == 0) {
      uint32_t t = rnd() % 11;
      float w = (float)(rnd() % 1000) / 1000.0f;
      ASSERT_OK(proto_encode_edit_weights(&b, 20000 + (uint32_t)e, 1, &t, &w), NULL);
      version++;
    }
    version++;
    if (e % 250 == 249) { /* every viewer reads as it goes, so most frames arrive live */
      ASSERT_OK(client_send_buf(&ed, &b), NULL);
      harness_follow(&ed, &er, version, 30000);
      harness_follow(&c1, &r1, version, 30000);
      harness_follow(&cl, &rl, version, 30000);
      harness_follow(&cq, &rq, version, 30000);
      harness_follow(&cc, &rc, version, 30000);
    }
    if (e == 5000) { /* a live TARGET in every codec, and its DELTA of zeros */
      cJSON_Delete(harness_rpc_ok(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"dent\"}"));
      cJSON_Delete(harness_rpc_ok(&h, "targets.configure", "{\"session\":\"demo\",\"target\":\"dent\",\"min\":-1}"));
      version += 2;
    }
  }
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  proto_buf_fini(&b);
  ASSERT_EQ(server_version(&h), version);
  harness_follow(&c1, &r1, version, 30000);
  harness_follow(&cl, &rl, version, 30000);
  harness_follow(&cq, &rq, version, 30000);
  harness_follow(&cc, &rc, version, 30000);
  /* The reference: version 1 equals the server's own export, and lossless equals version 1. */
  uint32_t n;
  float *server = harness_server_positions(&h, "demo", &n), *mine = positions(&r1);
  ASSERT_EQ(n, nv);
  ASSERT(memcmp(server, mine, 12 * (size_t)nv) == 0);
  free(server);
  free(mine);
  assert_same_replica(&rl, &r1, "lossless vs version 1");
  /* No drift: after 10,000 deltas each quantised field is still within half a step. */
  assert_within_grid(&rq, &r1);
  assert_within_grid(&rc, &r1);
  /* A late joiner of each grid rebuilds exactly what the live viewer holds. */
  client_conn lq, lc;
  client_replica lrq, lrc;
  harness_join2(&h, &lq, &lrq, "demo", PROTO_ROLE_VIEWER, NULL, &quantised);
  harness_join2(&h, &lc, &lrc, "demo", PROTO_ROLE_VIEWER, NULL, &coarse);
  assert_same_replica(&lrq, &rq, "late quantised joiner vs live");
  assert_same_replica(&lrc, &rc, "late coarse joiner vs live");
  client_replica *all[] = {&r1, &rl, &rq, &rc, &er, &lrq, &lrc};
  client_conn *conns[] = {&c1, &cl, &cq, &cc, &ed, &lq, &lc};
  for (int i = 0; i < 7; i++) {
    client_replica_fini(all[i]);
    client_close(conns[i]);
  }
  harness_stop(&h);
}

/* The largest number of updates that arrived within any one second. */
static uint32_t most_in_a_second(const double *t, uint32_t n) {
  uint32_t most = 0;
  for (uint32_t i = 0, j = 0; i < n; i++) {
    while (t[i] - t[j] >= 1000.0) j++;
    if (i - j + 1 > most) most = i - j + 1;
  }
  return most;
}

TEST(a_viewer_at_10_hz_beside_a_60_hz_editor_gets_at_most_12_updates_a_second_and_the_final_state) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn slow, fast, v1, ed;
  client_replica rs, rf, r1, er;
  proto_hello_opts paced = {.codec = PROTO_CODEC_QUANTISED, .max_rate = 10.0f, .tolerance = 0}, full = {.codec = PROTO_CODEC_QUANTISED};
  harness_join2(&h, &slow, &rs, "demo", PROTO_ROLE_VIEWER, NULL, &paced);
  harness_join2(&h, &fast, &rf, "demo", PROTO_ROLE_VIEWER, NULL, &full);
  harness_join(&h, &v1, &r1, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  enum { EDITS = 180 };
  static double slow_t[EDITS + 8];
  uint32_t slow_n = 0, fast_n = 0, v1_n = 0;
  proto_buf b;
  proto_buf_init(&b);
  uint64_t start = client_now_ns();
  for (int e = 0; e < EDITS; e++) {
    /* A drag at 60 Hz: weights and a few offsets, as a sculpting editor sends them. */
    uint32_t t = (uint32_t)e % 11, vi[3] = {100u + (uint32_t)e, 5000u + (uint32_t)e, 20000u + (uint32_t)e};
    float w = (float)(e % 50) / 50.0f;
    int32_t q[9];
    for (int k = 0; k < 9; k++) q[k] = (int32_t)(rnd() % 20001) - 10000;
    ASSERT_OK(proto_encode_edit_weights(&b, (uint32_t)e + 1, 1, &t, &w), NULL);
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e + 1000, 3, vi, q), NULL);
    ASSERT_OK(client_send_buf(&ed, &b), NULL);
    uint64_t due = start + (uint64_t)(e + 1) * 16666667ull;
    while (client_now_ns() < due) {
      poll_viewer(&slow, &rs, &slow_n, slow_t, EDITS + 8);
      poll_viewer(&fast, &rf, &fast_n, NULL, 0);
      poll_viewer(&v1, &r1, &v1_n, NULL, 0);
      usleep(1000);
    }
  }
  proto_buf_fini(&b);
  uint64_t final = 2 * EDITS;
  harness_follow(&fast, &rf, final, 10000);
  harness_follow(&v1, &r1, final, 10000);
  /* The paced viewer: its updates keep coming until it has the final state. */
  uint64_t deadline = client_now_ns() + 5000000000ull;
  while (rs.version < final && client_now_ns() < deadline) {
    poll_viewer(&slow, &rs, &slow_n, slow_t, EDITS + 8);
    usleep(2000);
  }
  poll_viewer(&fast, &rf, &fast_n, NULL, 0);
  double seconds = (double)(client_now_ns() - start) / 1e9;
  fprintf(stderr, "over %.2f s: paced viewer %u updates (most in one second %u), full-rate %u, version 1 %u\n",
          seconds, slow_n, most_in_a_second(slow_t, slow_n), fast_n, v1_n);
  ASSERT_EQ(rs.version, final);
  /* The server spaces a paced class's updates by at least 1/rate; over the whole run that is at
   * most 10 a second (12 leaves room for the last update and scheduling, never for the 60 Hz). */
  ASSERT(slow_n >= 3 && slow_n <= 12 * seconds);
  /* The full-rate viewers were not held back: every change reached them, as it happened. */
  ASSERT(fast_n >= final - 2 && v1_n >= final - 2);
  /* The paced viewer ends exactly where the full-rate one of its grid does. */
  assert_same_replica(&rs, &rf, "paced vs full rate");
  /* server.stats counts each kind of viewer and each message type. */
  cJSON *st = harness_rpc_ok(&h, "server.stats", NULL);
  const cJSON *classes = cJSON_GetObjectItem(st, "viewer_classes"), *types = cJSON_GetObjectItem(st, "bytes_by_type");
  int seen_paced = 0, seen_v1 = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, classes) {
    double rate = cJSON_GetObjectItem(c, "max_rate")->valuedouble, bytes = cJSON_GetObjectItem(c, "bytes_sent")->valuedouble;
    int protocol = cJSON_GetObjectItem(c, "protocol")->valueint;
    if (rate == 10 && protocol == 2) seen_paced = bytes > 0 && cJSON_GetObjectItem(c, "viewers")->valueint == 1;
    if (protocol == 1) seen_v1 = bytes > 0 && cJSON_GetObjectItem(c, "viewers")->valueint == 2;
  }
  ASSERT(seen_paced && seen_v1);
  ASSERT(cJSON_GetObjectItem(types, "SNAPSHOT")->valuedouble > 0 && cJSON_GetObjectItem(types, "DELTA")->valuedouble > 0 &&
         cJSON_GetObjectItem(types, "WEIGHTS")->valuedouble > 0);
  cJSON_Delete(st);
  client_replica *all[] = {&rs, &rf, &r1, &er};
  client_conn *conns[] = {&slow, &fast, &v1, &ed};
  for (int i = 0; i < 4; i++) {
    client_replica_fini(all[i]);
    client_close(conns[i]);
  }
  harness_stop(&h);
}

TEST(version_2_viewers_that_fall_behind_are_caught_up_exactly) {
  static const char *const args[] = {"--demo", "--soft-limit", "1", NULL};
  harness h;
  harness_start(&h, "demo", args);
  client_conn cl, cq, v1, ed;
  client_replica rl, rq, r1, er;
  proto_hello_opts lossless = {.codec = PROTO_CODEC_LOSSLESS}, quantised = {.codec = PROTO_CODEC_QUANTISED};
  harness_join2(&h, &cl, &rl, "demo", PROTO_ROLE_VIEWER, NULL, &lossless);
  harness_join2(&h, &cq, &rq, "demo", PROTO_ROLE_VIEWER, NULL, &quantised);
  harness_join(&h, &v1, &r1, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  /* A burst nobody reads: with a soft limit of one byte every viewer lags after the first. */
  proto_buf b;
  proto_buf_init(&b);
  for (int e = 0; e < 300; e++) {
    uint32_t vi[2] = {(uint32_t)(rnd() % 20000), 20000u + (uint32_t)(rnd() % 20000)};
    int32_t q[6];
    for (int k = 0; k < 6; k++) q[k] = (int32_t)(rnd() % 80001) - 40000;
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e + 1, 2, vi, q), NULL);
  }
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  proto_buf_fini(&b);
  usleep(300000);
  cJSON_Delete(harness_rpc_ok(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"70\":[0.001,0,0]}}"));
  uint64_t v = server_version(&h);
  int lc = harness_follow(&cl, &rl, v, 10000), qc = harness_follow(&cq, &rq, v, 10000);
  harness_follow(&v1, &r1, v, 10000);
  fprintf(stderr, "catch-up frames: lossless %d, quantised %d\n", lc, qc);
  ASSERT(lc > 0 && qc > 0);
  assert_same_replica(&rl, &r1, "caught-up lossless vs version 1");
  assert_within_grid(&rq, &r1);
  client_conn late;
  client_replica lr;
  harness_join2(&h, &late, &lr, "demo", PROTO_ROLE_VIEWER, NULL, &quantised);
  assert_same_replica(&lr, &rq, "late quantised joiner vs caught-up viewer");
  client_replica *all[] = {&rl, &rq, &r1, &er, &lr};
  client_conn *conns[] = {&cl, &cq, &v1, &ed, &late};
  for (int i = 0; i < 5; i++) {
    client_replica_fini(all[i]);
    client_close(conns[i]);
  }
  harness_stop(&h);
}

TEST(a_hello_of_an_unknown_version_or_with_a_bad_option_is_refused_with_a_reason) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char err[256];
  client_conn c;
  /* Version 3. */
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  uint8_t v3[20 + 8] = {'D', 'F', 'M', 'D', 2, 0, PROTO_HELLO, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 1, 0, 0, 0, 0, 0};
  ASSERT_OK(client_send(&c, v3, sizeof(v3)), NULL);
  proto_header hd;
  const uint8_t *p;
  ASSERT_OK(client_read_frame(&c, 5000, &hd, &p, err, sizeof(err)), err);
  ASSERT_EQ(hd.type, PROTO_ERROR);
  proto_error e;
  ASSERT_OK(proto_decode_error(p, hd.length, &e), NULL);
  char msg[1100];
  snprintf(msg, sizeof(msg), "%.*s", (int)e.message.len, e.message.ptr);
  ASSERT_EQ(e.code, PROTO_ERR_MALFORMED);
  ASSERT_STR_CONTAINS(msg, "protocol version 3 is not supported (this server speaks 1 to 2)");
  ASSERT(harness_closed(&c, 3000));
  client_close(&c);
  /* Version 2 with a negative tolerance. */
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hi = {PROTO_VERSION_2, PROTO_ROLE_VIEWER, {"demo", 4}, {"", 0}};
  proto_hello_opts ok = {.codec = PROTO_CODEC_QUANTISED, .tolerance = 1.0f};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &ok), NULL);
  size_t tol_at = b.len - 4; /* the tolerance's f32 is the last option */
  float neg = -1.0f;
  memcpy(b.data + tol_at, &neg, 4);
  ASSERT_OK(client_send_buf(&c, &b), NULL);
  proto_buf_fini(&b);
  ASSERT_EQ(harness_expect_error(&c, PROTO_ERROR, NULL, 5000), PROTO_ERR_MALFORMED);
  ASSERT(harness_closed(&c, 3000));
  client_close(&c);
  harness_stop(&h);
}
