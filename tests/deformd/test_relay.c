/*
 * test_relay.c — many machines on one: a redis-server of the test's own (support/redis_harness.c),
 * a primary (deformd --redis) and relays (deformd --relay --redis), with viewers on the relays.
 *
 * The oracle is always the primary: its state read back exactly through session.export
 * (harness_server_positions) and its version, against each viewer's CPU replica
 * (client_replica, the reference client). Waits are on versions and conditions with generous
 * deadlines, never on times.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <stb_image_write.h>

#include "harness.h"
#include "proto_caps.h"
#include "proto_texclip.h"
#include "redis_harness.h"
#include "tcp_proxy.h"
#include "test.h"

#define WAIT_MS 60000

#define ASSERT_STR_EQ(a, b)                                                                 \
  do {                                                                                      \
    const char *a_ = (a), *b_ = (b);                                                        \
    if (strcmp(a_, b_) != 0) test__fail(__FILE__, __LINE__, "%s == %s: '%s' != '%s'", #a, #b, a_, b_); \
  } while (0)

typedef struct viewer {
  client_conn c;
  client_replica r;
  int v2;
} viewer;

static void start_primary(harness *h, const redis_harness *rd, const char *wait_session, const char *const *extra) {
  const char *args[24] = {"--redis", rd->url, "--lease-ms", "1000", "--redis-timeout-ms", "1000"};
  int n = 6;
  for (int i = 0; extra && extra[i] && n < 22; i++) args[n++] = extra[i];
  args[n] = NULL;
  harness_start(h, wait_session, args);
}

static void wait_listed(harness *relay, const char *session);

/* A relay (with `extra` args); with wait_session, waits until its registry lists that session
 * (it loads a session when a viewer asks for it). A join waits for that load: half the HELLO
 * timeout, here 30 s, however slow a sanitizer build is. */
static void start_relay_with(harness *h, const redis_harness *rd, const char *wait_session, const char *const *extra) {
  const char *args[24] = {"--relay", "--redis", rd->url, "--lease-ms", "1000", "--redis-timeout-ms", "1000",
                          "--hello-timeout-ms", "60000"};
  int n = 9;
  for (int i = 0; extra && extra[i] && n < 22; i++) args[n++] = extra[i];
  args[n] = NULL;
  harness_start(h, NULL, args);
  if (wait_session) wait_listed(h, wait_session);
}

static void start_relay(harness *h, const redis_harness *rd, const char *wait_session) {
  start_relay_with(h, rd, wait_session, NULL);
}

/* Waits until calls for `session` on h reach its owner (a node learns of other nodes' sessions
 * from the registry, twice a second). history.list, because a relay answers state.get from its
 * replica even when the registry does not list the session. */
static void wait_known(harness *h, const char *session) {
  char params[300];
  snprintf(params, sizeof(params), "{\"session\":\"%s\",\"limit\":1}", session);
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *p = cJSON_Parse(params), *result = NULL, *error = NULL;
    int rc = client_rpc(&h->rpc, "history.list", p, 30000, &result, &error);
    cJSON_Delete(p);
    cJSON_Delete(result);
    cJSON_Delete(error);
    if (rc == 0) return;
    ASSERT(client_now_ns() < deadline);
    usleep(20000);
  }
}

/* A redis-server, a primary (the demo head, with `args` added) and one or two relays that hold
 * the demo session. */
static void cluster_up(redis_harness *rd, harness *p, const char *const *args, harness *r1, harness *r2) {
  const char *all[16] = {"--demo"};
  int n = 1;
  for (int i = 0; args && args[i] && n < 15; i++) all[n++] = args[i];
  all[n] = NULL;
  redis_harness_start(rd, 0);
  start_primary(p, rd, "demo", all);
  start_relay(r1, rd, "demo");
  if (r2) start_relay(r2, rd, "demo");
}

/* Stops what is still running: the relays, the primary (each must exit cleanly), Redis. */
static void cluster_down(redis_harness *rd, harness *p, harness *r1, harness *r2) {
  if (r1 && r1->pid > 0) harness_stop(r1);
  if (r2 && r2->pid > 0) harness_stop(r2);
  harness_stop(p);
  redis_harness_kill(rd);
}

static uint64_t version_of(harness *h, const char *session) {
  char params[300];
  snprintf(params, sizeof(params), "{\"session\":\"%s\"}", session);
  cJSON *r = harness_rpc_ok(h, "state.get", params);
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

/* The relay's cluster.sessions entry for `session`, or NULL (caller frees the whole stats). */
static const cJSON *relay_entry(cJSON *stats, const char *session) {
  const cJSON *s, *list = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "cluster"), "sessions");
  cJSON_ArrayForEach(s, list) {
    const cJSON *n = cJSON_GetObjectItem(s, "session");
    if (cJSON_IsString(n) && strcmp(n->valuestring, session) == 0) return s;
  }
  return NULL;
}

/* The relay's cluster.sessions entry for `session`, detached (caller frees; NULL: none). */
static cJSON *relay_entry_of(harness *relay, const char *session) {
  cJSON *st = harness_rpc_ok(relay, "server.stats", NULL);
  const cJSON *e = relay_entry(st, session);
  cJSON *copy = e ? cJSON_Duplicate(e, 1) : NULL;
  cJSON_Delete(st);
  return copy;
}

static void wait_listed(harness *relay, const char *session) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *e = relay_entry_of(relay, session);
    cJSON_Delete(e);
    if (e) return;
    if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "the relay's registry never listed %s", session);
    usleep(20000);
  }
}

/* Waits until Redis holds `session` at `version` (the primary has published it: a relay that
 * loads it now gets that state). */
static void wait_published(const redis_harness *rd, const char *session, uint64_t version) {
  char cmd[256], out[64];
  snprintf(cmd, sizeof(cmd), "HGET deformd:s:%s:meta version", session);
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    redis_harness_command(rd, cmd, out, sizeof(out));
    if (strtoull(out, NULL, 10) == version && out[0] != '$') return;
    if (client_now_ns() > deadline)
      test__fail(__FILE__, __LINE__, "Redis holds %s at '%s', want %llu", session, out, (unsigned long long)version);
    usleep(20000);
  }
}

/* Waits until the relay's replica of `session` is at `version` (its own server.stats). */
static void wait_relay_version(harness *relay, const char *session, uint64_t version) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *st = harness_rpc_ok(relay, "server.stats", NULL);
    const cJSON *e = relay_entry(st, session);
    uint64_t v = e && cJSON_IsTrue(cJSON_GetObjectItem(e, "loaded")) ? (uint64_t)cJSON_GetObjectItem(e, "version")->valuedouble : 0;
    int loaded = e && cJSON_IsTrue(cJSON_GetObjectItem(e, "loaded"));
    cJSON_Delete(st);
    if (loaded && v == version) return;
    if (client_now_ns() > deadline)
      test__fail(__FILE__, __LINE__, "relay stuck at version %llu of %s, want %llu", (unsigned long long)v, session,
                 (unsigned long long)version);
    usleep(20000);
  }
}

/* A number in the relay's server.stats "cluster" object. */
static double cluster_stat(harness *h, const char *key) {
  cJSON *st = harness_rpc_ok(h, "server.stats", NULL);
  const cJSON *k = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "cluster"), key);
  double v = cJSON_IsNumber(k) ? k->valuedouble : -1;
  cJSON_Delete(st);
  return v;
}

static void wait_cluster_stat_at_least(harness *h, const char *key, double want) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  while (cluster_stat(h, key) < want) {
    if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "cluster.%s never reached %g", key, want);
    usleep(20000);
  }
}

static void wait_version(harness *h, const char *session, uint64_t want) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  while (version_of(h, session) != want) {
    ASSERT(client_now_ns() < deadline);
    usleep(2000);
  }
}

static void wait_cluster_stat(harness *h, const char *key, double want) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  while (cluster_stat(h, key) != want) {
    if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "cluster.%s never became %g", key, want);
    usleep(20000);
  }
}

/* Waits until h's registry view has `node` alive at JSON-RPC port `rpc_port` (alive), or
 * without a lease (!alive: the port is not looked at). */
static void wait_node_state(harness *h, const char *node, int rpc_port, int alive) {
  char want[64];
  snprintf(want, sizeof(want), "127.0.0.1:%d", rpc_port);
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *st = harness_rpc_ok(h, "server.stats", NULL);
    const cJSON *n, *nodes = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "cluster"), "nodes");
    int ok = 0;
    cJSON_ArrayForEach(n, nodes) ok |= strcmp(cJSON_GetObjectItem(n, "node")->valuestring, node) == 0 &&
                                       cJSON_IsTrue(cJSON_GetObjectItem(n, "alive")) == alive &&
                                       (!alive || strcmp(cJSON_GetObjectItem(n, "rpc")->valuestring, want) == 0);
    cJSON_Delete(st);
    if (ok) return;
    ASSERT(client_now_ns() < deadline);
    usleep(20000);
  }
}

static void wait_node(harness *h, const char *node, int rpc_port) { wait_node_state(h, node, rpc_port, 1); }

static void join(viewer *v, harness *at, int v2) {
  proto_hello_opts lossless = {.codec = PROTO_CODEC_LOSSLESS};
  v->v2 = v2;
  harness_join2(at, &v->c, &v->r, "demo", PROTO_ROLE_VIEWER, NULL, v2 ? &lossless : NULL);
}

static void leave(viewer *v) {
  client_close(&v->c);
  client_replica_fini(&v->r);
}

/* Reads until the replica is at `version`, asserting that every change arrived as its own live
 * frame, in order: versions go up by one (a frame with MORE is followed by the rest of its
 * update at the same version), and nothing came as a catch-up. */
static void follow_in_order(viewer *v, uint64_t version) {
  char err[256];
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull, last = v->r.version;
  int in_update = 0;
  while (v->r.version < version || in_update) {
    if (client_now_ns() > deadline)
      test__fail(__FILE__, __LINE__, "viewer stuck at version %llu, want %llu", (unsigned long long)v->r.version,
                 (unsigned long long)version);
    proto_header h;
    const uint8_t *p;
    int rc = client_read_frame(&v->c, 1000, &h, &p, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) continue;
    if (rc) test__fail(__FILE__, __LINE__, "viewer: %s", err);
    if (h.type == PROTO_WEIGHTS || h.type == PROTO_DELTA || h.type == PROTO_TARGET || h.type == PROTO_TARGET_META) {
      ASSERT(!(h.flags & PROTO_FLAG_CATCHUP));
      if (in_update) ASSERT_EQ(h.session_version, last);
      else ASSERT_EQ(h.session_version, last + 1);
      last = h.session_version;
      in_update = (h.flags & PROTO_FLAG_MORE) != 0;
    }
    ASSERT_OK(client_replica_apply(&v->r, &h, p, err, sizeof(err)), err);
  }
  ASSERT_EQ(v->r.version, version);
}

/* The viewer's shape of `session` against the primary's, bit for bit. */
static void assert_shape(harness *primary, const char *session, const client_replica *r) {
  uint32_t n;
  float *server = harness_server_positions(primary, session, &n);
  ASSERT_EQ(n, r->mesh->vertex_count);
  float *mine = malloc(sizeof(float) * 3 * n);
  ASSERT_OK(client_replica_positions(r, mine), NULL);
  for (uint32_t i = 0; i < 3 * n; i++)
    if (memcmp(&mine[i], &server[i], sizeof(float)) != 0)
      test__fail(__FILE__, __LINE__, "coordinate %u differs: %.9g (viewer) vs %.9g (primary)", i, mine[i], server[i]);
  free(mine);
  free(server);
}

static void assert_primary_shape(harness *primary, const client_replica *r) { assert_shape(primary, "demo", r); }

/* A mix of what changes a session, through the primary and through a relay (forwarded): weights,
 * sculpt offsets, a new target from the sculpt, a target's settings. */
static void edit(harness *primary, harness *relay, int i) {
  char params[256];
  harness *via = i % 2 ? relay : primary;
  if (i % 5 == 0) {
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"offsets\":{\"%d\":[%g,0,%g]}}", 100 + 37 * i,
             0.0005 * (i % 7), -0.0003 * (i % 3));
    cJSON_Delete(harness_rpc_ok(via, "sculpt.set", params));
  } else {
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"weights\":{\"%s\":%g}}",
             i % 3 ? "smile_L" : "jaw_open", 0.01 * (i % 90));
    cJSON_Delete(harness_rpc_ok(via, "weights.set", params));
  }
}

TEST(fifty_viewers_on_two_relays_get_every_edit_in_order_and_end_at_the_primary_state) {
  redis_harness rd;
  harness p, r1, r2;
  cluster_up(&rd, &p, NULL, &r1, &r2);
  enum { N = 50 };
  viewer *v = calloc(N, sizeof(viewer));
  for (int i = 0; i < N; i++) join(&v[i], i % 2 ? &r2 : &r1, i % 4 < 2); /* versions 1 and 2 on each relay */
  /* An editor on relay 1, named in its HELLO: its binary EDITs go to the primary, under its name. */
  client_conn ed;
  client_replica er;
  proto_hello_opts ana = {.codec = PROTO_CODEC_LOSSLESS, .author = {"ana", 3}};
  harness_join2(&r1, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL, &ana);
  for (int i = 0; i < 60; i++) edit(&p, &r2, i);
  uint64_t want = version_of(&p, "demo") + 1;
  proto_buf b;
  proto_buf_init(&b);
  uint32_t ti[1] = {3};
  float tv[1] = {0.75f};
  ASSERT_OK(proto_encode_edit_weights(&b, 7, 1, ti, tv), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  proto_buf_fini(&b);
  wait_version(&p, "demo", want); /* the forwarded EDIT, applied by the primary */
  cJSON *steps = harness_rpc_ok(&p, "history.list", "{\"session\":\"demo\",\"limit\":1}");
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(steps, "steps"), 0), "author")->valuestring,
                      "ana");
  cJSON_Delete(steps);
  cJSON_Delete(harness_rpc_ok(&r2, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"relayed\"}"));
  cJSON_Delete(harness_rpc_ok(&p, "targets.configure", "{\"session\":\"demo\",\"target\":\"relayed\",\"max\":2}"));
  for (int i = 60; i < 100; i++) edit(&p, &r1, i);
  want = version_of(&p, "demo");
  ASSERT(want >= 80); /* (an edit that sets what is already there changes nothing) */
  for (int i = 0; i < N; i++) follow_in_order(&v[i], want);
  harness_follow(&ed, &er, want, WAIT_MS);
  assert_primary_shape(&p, &er);
  for (int i = 0; i < N; i++) {
    if (i < 4 || i == N - 1) assert_primary_shape(&p, &v[i].r); /* each kind of viewer, on both relays */
    ASSERT_EQ(v[i].r.mesh->target_count, er.mesh->target_count);
    for (uint32_t t = 0; t < er.mesh->target_count; t++) ASSERT(v[i].r.weights[t] == er.weights[t]);
  }
  /* The relays forwarded, the primary published, nothing was reloaded. */
  ASSERT(cluster_stat(&r2, "forwarded_rpc") >= 31); /* the odd edits of the first 60, and the new target */
  ASSERT(cluster_stat(&r1, "forwarded_rpc") >= 20);
  ASSERT(cluster_stat(&r1, "forwarded_edits") >= 1);
  ASSERT(cluster_stat(&p, "frames_published") >= (double)want);
  ASSERT_EQ(cluster_stat(&r1, "reloads"), 0);

  /* A late joiner on a relay gets the primary's state in its SNAPSHOT. */
  viewer late;
  join(&late, &r2, 1);
  ASSERT_EQ(late.r.version, want);
  assert_primary_shape(&p, &late.r);
  viewer late1;
  join(&late1, &r1, 0);
  ASSERT_EQ(late1.r.version, want);
  assert_primary_shape(&p, &late1.r);
  leave(&late);
  leave(&late1);
  for (int i = 0; i < N; i++) leave(&v[i]);
  free(v);
  client_close(&ed);
  client_replica_fini(&er);
  cluster_down(&rd, &p, &r1, &r2);
}

TEST(viewers_of_a_relay_that_dies_join_another_and_resynchronise_from_its_snapshot) {
  redis_harness rd;
  harness p, r1, r2;
  cluster_up(&rd, &p, NULL, &r1, &r2);
  viewer v[6];
  for (int i = 0; i < 6; i++) join(&v[i], &r1, i % 2);
  for (int i = 0; i < 20; i++) edit(&p, &p, i);
  uint64_t want = version_of(&p, "demo");
  for (int i = 0; i < 6; i++) follow_in_order(&v[i], want);
  harness_kill(&r1);
  /* Each viewer sees its connection end, and joins the other relay (what deform-view does
   * with several addresses). */
  for (int i = 0; i < 6; i++) {
    ASSERT(harness_closed(&v[i].c, WAIT_MS));
    leave(&v[i]);
  }
  for (int i = 20; i < 30; i++) edit(&p, &p, i); /* meanwhile */
  want = version_of(&p, "demo");
  wait_published(&rd, "demo", want); /* relay 2 loads it as the first viewer joins */
  for (int i = 0; i < 6; i++) {
    join(&v[i], &r2, i % 2);
    ASSERT_EQ(v[i].r.version, want);
  }
  assert_primary_shape(&p, &v[0].r);
  assert_primary_shape(&p, &v[1].r);
  for (int i = 30; i < 40; i++) edit(&p, &r2, i);
  want = version_of(&p, "demo");
  for (int i = 0; i < 6; i++) follow_in_order(&v[i], want);
  assert_primary_shape(&p, &v[5].r);
  for (int i = 0; i < 6; i++) leave(&v[i]);
  cluster_down(&rd, &p, &r1, &r2);
}

/* Reads frames until an ERROR with `code` arrives; fails on a close. */
static void expect_status(viewer *v, uint16_t code) {
  uint32_t rid = 99;
  ASSERT_EQ(harness_expect_error(&v->c, PROTO_ERROR, &rid, WAIT_MS), code);
  ASSERT_EQ(rid, 0);
}

TEST(relays_keep_serving_the_last_state_and_report_a_lost_primary_until_a_durable_restart_brings_a_new_epoch) {
  redis_harness rd;
  redis_harness_start(&rd, 0);
  char data[1100];
  snprintf(data, sizeof(data), "%s/primary-data", test_tmpdir());
  harness p, r1;
  const char *args[] = {"--demo", "--data", data, "--node-id", "primary-a", NULL};
  start_primary(&p, &rd, "demo", args);
  start_relay(&r1, &rd, "demo");
  viewer v[2];
  join(&v[0], &r1, 1);
  join(&v[1], &r1, 0);
  for (int i = 0; i < 15; i++) edit(&p, &r1, i);
  uint64_t want = version_of(&p, "demo");
  for (int i = 0; i < 2; i++) follow_in_order(&v[i], want);
  uint32_t n;
  float *before = harness_server_positions(&p, "demo", &n);
  harness_kill(&p);
  /* Lost: a status frame, the connection stays, the state stays. */
  for (int i = 0; i < 2; i++) expect_status(&v[i], PROTO_ERR_PRIMARY_LOST);
  wait_cluster_stat_at_least(&r1, "primary_lost", 1);
  ASSERT_EQ(cluster_stat(&r1, "primary_lost"), 1);
  float *mine = malloc(sizeof(float) * 3 * n);
  ASSERT_OK(client_replica_positions(&v[0].r, mine), NULL);
  ASSERT(memcmp(mine, before, sizeof(float) * 3 * n) == 0);
  /* A late joiner still gets the last state, and hears the status at once. */
  viewer late;
  join(&late, &r1, 1);
  ASSERT_EQ(late.r.version, want);
  expect_status(&late, PROTO_ERR_PRIMARY_LOST);
  ASSERT_OK(client_replica_positions(&late.r, mine), NULL);
  ASSERT(memcmp(mine, before, sizeof(float) * 3 * n) == 0);
  leave(&late);
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&r1, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":1}}", msg, sizeof(msg)),
            -32012);
  ASSERT_STR_CONTAINS(msg, "lost");
  /* The primary comes back from its store: the relay hears it, loads the new epoch, and its
   * viewers are told to join again (BYE RESYNC); they get the restored state. */
  const char *again[] = {"--data", data, "--node-id", "primary-a", NULL};
  start_primary(&p, &rd, "demo", again);
  ASSERT_EQ(version_of(&p, "demo"), want);
  for (int i = 0; i < 2; i++) {
    expect_status(&v[i], PROTO_ERR_PRIMARY_BACK);
    ASSERT_EQ(harness_expect_error(&v[i].c, PROTO_BYE, NULL, WAIT_MS), PROTO_ERR_RESYNC);
    leave(&v[i]);
  }
  wait_cluster_stat_at_least(&r1, "reloads", 1);
  wait_cluster_stat(&r1, "primary_lost", 0);
  wait_node(&r1, "primary-a", p.rpc_port); /* its new address, for what the relay forwards */
  for (int i = 15; i < 25; i++) edit(&p, &r1, i);
  want = version_of(&p, "demo");
  wait_relay_version(&r1, "demo", want);
  for (int i = 0; i < 2; i++) {
    join(&v[i], &r1, i);
    ASSERT_EQ(v[i].r.version, want);
  }
  assert_primary_shape(&p, &v[0].r);
  assert_primary_shape(&p, &v[1].r);
  free(mine);
  free(before);
  for (int i = 0; i < 2; i++) leave(&v[i]);
  cluster_down(&rd, &p, &r1, NULL);
}

TEST(every_node_reconnects_after_redis_restarts_empty_and_nothing_acknowledged_is_lost) {
  redis_harness rd;
  harness p, r1;
  cluster_up(&rd, &p, NULL, &r1, NULL);
  viewer v;
  join(&v, &r1, 1);
  for (int i = 0; i < 10; i++) edit(&p, &p, i);
  follow_in_order(&v, version_of(&p, "demo"));
  int port = rd.port;
  redis_harness_kill(&rd);
  /* Acknowledged by the primary while Redis is away. */
  for (int i = 10; i < 20; i++) edit(&p, &p, i);
  uint64_t want = version_of(&p, "demo");
  redis_harness_start(&rd, port); /* empty: it kept nothing */
  /* The primary starts a new epoch, the relay loads it and tells its viewer to join again. */
  ASSERT_EQ(harness_expect_error(&v.c, PROTO_BYE, NULL, WAIT_MS), PROTO_ERR_RESYNC);
  leave(&v);
  wait_relay_version(&r1, "demo", want);
  join(&v, &r1, 0);
  ASSERT_EQ(v.r.version, want);
  assert_primary_shape(&p, &v.r);
  ASSERT(cluster_stat(&p, "epochs") >= 2);
  wait_known(&r1, "demo"); /* the registry, refilled by the primary, as the relay sees it */
  for (int i = 20; i < 30; i++) edit(&p, &r1, i);
  want = version_of(&p, "demo");
  follow_in_order(&v, want);
  assert_primary_shape(&p, &v.r);
  leave(&v);
  cluster_down(&rd, &p, &r1, NULL);
}

TEST(a_stalled_redis_is_detected_by_the_watchdog_and_every_node_carries_on_when_it_answers_again) {
  redis_harness rd;
  harness p, r1;
  cluster_up(&rd, &p, NULL, &r1, NULL);
  viewer v;
  join(&v, &r1, 1);
  redis_harness_pause(&rd, 1);
  /* No command is answered: the watchdogs drop their connections and retry. */
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *a = harness_rpc_ok(&p, "server.stats", NULL), *b = harness_rpc_ok(&r1, "server.stats", NULL);
    double sa = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "cluster"), "redis"), "stalls")->valuedouble;
    double sb = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "cluster"), "redis"), "stalls")->valuedouble;
    cJSON_Delete(a);
    cJSON_Delete(b);
    if (sa >= 1 && sb >= 1) break;
    ASSERT(client_now_ns() < deadline);
    usleep(50000);
  }
  for (int i = 0; i < 5; i++) edit(&p, &p, i); /* the primary serves on */
  redis_harness_pause(&rd, 0);
  for (int i = 5; i < 10; i++) edit(&p, &p, i);
  uint64_t want = version_of(&p, "demo");
  wait_relay_version(&r1, "demo", want);
  /* The viewer either followed along or was told to join again (a new epoch): either way it
   * ends at the primary's state. */
  char err[256];
  while (v.r.version < want) {
    proto_header h;
    const uint8_t *pl;
    int rc = client_read_frame(&v.c, 1000, &h, &pl, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) continue;
    if (rc || h.type == PROTO_BYE) {
      leave(&v);
      join(&v, &r1, 1);
      continue;
    }
    ASSERT_OK(client_replica_apply(&v.r, &h, pl, err, sizeof(err)), err);
  }
  assert_primary_shape(&p, &v.r);
  leave(&v);
  cluster_down(&rd, &p, &r1, NULL);
}

/* A number in h's server.stats cluster.redis object (connected as 1 or 0). */
static double redis_stat(harness *h, const char *key) {
  cJSON *st = harness_rpc_ok(h, "server.stats", NULL);
  const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(st, "cluster"), "redis"), key);
  double x = cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
  cJSON_Delete(st);
  return x;
}

/* A connection the network resets (RST, here from a proxy between the primary and Redis) makes
 * libuv stop polling the socket with an error. The node notices at once and connects again; it
 * used to notice only when its watchdog found a command unanswered (here after 60 s: the wait
 * below gives up after 20). */
TEST(a_connection_to_redis_reset_by_the_network_is_made_again_at_once_not_after_the_watchdog) {
  redis_harness rd;
  redis_harness_start(&rd, 0);
  tcp_proxy px;
  tcp_proxy_start(&px, rd.port);
  char url[64];
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", px.port);
  harness p;
  const char *const args[] = {"--redis", url, "--lease-ms", "1000", "--redis-timeout-ms", "60000", "--demo", NULL};
  harness_start(&p, "demo", args);
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  while (redis_stat(&p, "connected") != 1) {
    ASSERT(client_now_ns() < deadline);
    usleep(20000);
  }
  double connects = redis_stat(&p, "connects");
  tcp_proxy_reset(&px);
  deadline = client_now_ns() + 20000ull * 1000000ull;
  while (redis_stat(&p, "connects") <= connects || redis_stat(&p, "connected") != 1) {
    if (client_now_ns() > deadline)
      test__fail(__FILE__, __LINE__, "the reset connection was not made again within 20 s (stalls %g)",
                 redis_stat(&p, "stalls"));
    usleep(20000);
  }
  ASSERT(redis_stat(&p, "disconnects") >= 1);
  ASSERT_EQ(redis_stat(&p, "stalls"), 0); /* the reset was seen, not a silence */
  /* And the node carries on through Redis: an edit is published. */
  cJSON_Delete(harness_rpc_ok(&p, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5}}"));
  wait_published(&rd, "demo", version_of(&p, "demo"));
  harness_stop(&p);
  tcp_proxy_stop(&px);
  redis_harness_kill(&rd);
}

TEST(session_create_on_a_relay_places_the_session_on_the_least_loaded_primary) {
  redis_harness rd;
  redis_harness_start(&rd, 0);
  harness p1, p2, r1;
  const char *a1[] = {"--demo", "--node-id", "busy", NULL};
  const char *a2[] = {"--node-id", "idle", NULL};
  start_primary(&p1, &rd, "demo", a1);
  start_primary(&p2, &rd, NULL, a2);
  start_relay(&r1, &rd, "demo");
  /* Both primaries' leases, with their session counts, are in the relay's registry view before
   * it places anything. */
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *st = harness_rpc_ok(&r1, "server.stats", NULL);
    const cJSON *n, *nodes = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "cluster"), "nodes");
    int alive = 0, busy = 0;
    cJSON_ArrayForEach(n, nodes) {
      alive += cJSON_IsTrue(cJSON_GetObjectItem(n, "alive"));
      busy += strcmp(cJSON_GetObjectItem(n, "node")->valuestring, "busy") == 0 &&
              cJSON_GetObjectItem(n, "sessions")->valuedouble == 1;
    }
    cJSON_Delete(st);
    if (alive == 3 && busy) break;
    ASSERT(client_now_ns() < deadline);
    usleep(20000);
  }
  cJSON *r = harness_rpc_ok(&r1, "session.create", "{\"session\":\"second\",\"mesh\":\"demo\"}");
  ASSERT_EQ((int)cJSON_GetObjectItem(r, "vertices")->valuedouble, 41077);
  cJSON_Delete(r);
  /* It lives on the idle primary, not the busy one; calls on any node reach it. */
  ASSERT_EQ(version_of(&p2, "second"), 0);
  ASSERT_EQ(cluster_stat(&r1, "placements"), 1);
  wait_known(&p1, "second");
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&p1, "session.create", "{\"session\":\"second\",\"mesh\":\"demo\"}", msg, sizeof(msg)),
            -32005);
  cJSON_Delete(harness_rpc_ok(&p1, "weights.set", "{\"session\":\"second\",\"weights\":{\"smile_L\":0.5}}"));
  ASSERT_EQ(version_of(&p2, "second"), 1);
  wait_known(&r1, "second");
  ASSERT_EQ(version_of(&r1, "second"), 1); /* forwarded to its owner */
  /* Closed through the relay: its owner closes it, and the relay's viewers of it hear so. */
  client_conn c;
  client_replica rr;
  harness_join(&r1, &c, &rr, "second", PROTO_ROLE_VIEWER, NULL);
  cJSON_Delete(harness_rpc_ok(&r1, "session.close", "{\"session\":\"second\"}"));
  ASSERT_EQ(harness_expect_error(&c, PROTO_BYE, NULL, WAIT_MS), PROTO_ERR_SESSION_CLOSED);
  ASSERT_EQ(harness_rpc_err(&p2, "state.get", "{\"session\":\"second\"}", msg, sizeof(msg)), -32001);
  client_close(&c);
  client_replica_fini(&rr);
  harness_stop(&r1);
  harness_stop(&p2);
  harness_stop(&p1);
  redis_harness_kill(&rd);
}

static int relay_viewers(harness *relay) {
  cJSON *st = harness_rpc_ok(relay, "server.stats", NULL);
  const cJSON *e = relay_entry(st, "demo");
  int n = e ? (int)cJSON_GetObjectItem(e, "viewers")->valuedouble : 0;
  cJSON_Delete(st);
  return n;
}

static void wait_relay_viewers(harness *relay, int want) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  while (relay_viewers(relay) != want) {
    ASSERT(client_now_ns() < deadline);
    usleep(20000);
  }
}

TEST(deformctl_reaches_the_owner_through_any_address_and_watch_moves_to_the_next_relay) {
  redis_harness rd;
  harness p, r1, r2;
  cluster_up(&rd, &p, NULL, &r1, &r2);
  /* The first address answers nothing (nobody listens on port 1): the second is used. */
  char cmd[2048], out[4096];
  snprintf(cmd, sizeof(cmd), "'%s' --rpc 127.0.0.1:1,127.0.0.1:%d weights.set demo smile_L=0.25 2>/dev/null",
           harness_tool("deformctl"), r1.rpc_port);
  FILE *f = popen(cmd, "r");
  ASSERT(f != NULL);
  size_t n = fread(out, 1, sizeof(out) - 1, f);
  out[n] = '\0';
  ASSERT_EQ(pclose(f), 0);
  ASSERT_EQ(version_of(&p, "demo"), 1); /* applied by the owner */
  char lines[1100];
  snprintf(lines, sizeof(lines), "%s/watch-lines.txt", test_tmpdir());
  snprintf(cmd, sizeof(cmd), "'%s' --stream 127.0.0.1:%d,127.0.0.1:%d watch demo --count 2 --seconds 60 > '%s' 2>&1",
           harness_tool("deformctl"), r1.stream_port, r2.stream_port, lines);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  wait_relay_viewers(&r1, 1);
  harness_kill(&r1);
  wait_relay_viewers(&r2, 1); /* it moved to the other relay */
  cJSON_Delete(harness_rpc_ok(&p, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}"));
  cJSON_Delete(harness_rpc_ok(&p, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.75}}"));
  int status;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FILE *l = fopen(lines, "r");
  ASSERT(l != NULL);
  char line[512], last[512] = "";
  int snapshots = 0;
  while (fgets(line, sizeof(line), l)) {
    snapshots += strstr(line, "type=SNAPSHOT") != NULL;
    snprintf(last, sizeof(last), "%s", line);
  }
  fclose(l);
  ASSERT_EQ(snapshots, 2); /* one from each relay */
  ASSERT(strcmp(last, "2 frames\n") == 0);
  cluster_down(&rd, &p, &r1, &r2);
}

TEST(a_relay_that_falls_behind_a_trimmed_stream_reloads_the_snapshot_and_its_viewers_join_again) {
  redis_harness rd;
  harness p, r1;
  const char *args[] = {"--stream-maxlen", "1000", "--snapshot-every", "50", NULL};
  cluster_up(&rd, &p, args, &r1, NULL);
  viewer v;
  join(&v, &r1, 1);
  /* --demo's texture clip (compressed after the session opened) is the stream's entry 1: wait for
   * it, so the 1,600 below are entries 2 to 1,601 */
  char seq[64] = "";
  for (int i = 0; i < WAIT_MS / 10 && strcmp(seq, "1") != 0; i++) {
    redis_harness_command(&rd, "HGET deformd:s:demo:meta seq", seq, sizeof(seq));
    if (strcmp(seq, "1") != 0) usleep(10000);
  }
  ASSERT(strcmp(seq, "1") == 0);
  /* The relay stops reading while the stream moves on by more than it keeps. */
  harness_stop_process(r1.pid);
  for (int i = 0; i < 1600; i++) {
    char params[128];
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"weights\":{\"smile_L\":%g}}", (i % 2 ? 0.25 : 0.5));
    cJSON_Delete(harness_rpc_ok(&p, "weights.set", params));
  }
  /* The primary answers before it has published (XADD runs on its Redis connection): wait
   * until all 1,600 are in the stream, or a relay woken early would still find entry 2 there
   * and follow the stream with no gap at all (it failed so now and then under load). */
  char len[64];
  for (int i = 0; i < WAIT_MS / 10 && strcmp(seq, "1601") != 0; i++) {
    redis_harness_command(&rd, "HGET deformd:s:demo:meta seq", seq, sizeof(seq));
    if (strcmp(seq, "1601") != 0) usleep(10000);
  }
  ASSERT(strcmp(seq, "1601") == 0);
  redis_harness_command(&rd, "XLEN deformd:s:demo:stream", len, sizeof(len));
  ASSERT(atoi(len + 1) < 1600); /* ":N": trimmed, so entry 2, the relay's next, is gone */
  kill(r1.pid, SIGCONT);
  uint64_t want = version_of(&p, "demo");
  ASSERT_EQ(harness_expect_error(&v.c, PROTO_BYE, NULL, WAIT_MS), PROTO_ERR_RESYNC);
  leave(&v);
  wait_relay_version(&r1, "demo", want);
  ASSERT(cluster_stat(&r1, "gaps") >= 1);
  join(&v, &r1, 0);
  ASSERT_EQ(v.r.version, want);
  assert_primary_shape(&p, &v.r);
  leave(&v);
  cluster_down(&rd, &p, &r1, NULL);
}

/* One line from a JSON-RPC connection read byte by byte (no buffering beyond it), into buf. */
static void read_line(client_conn *c, char *buf, size_t cap) {
  size_t n = 0;
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    struct pollfd pfd = {c->fd, POLLIN, 0};
    if (poll(&pfd, 1, 1000) <= 0) {
      if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "no answer line within %d ms", WAIT_MS);
      continue;
    }
    char ch;
    ssize_t k = read(c->fd, &ch, 1);
    if (k <= 0) test__fail(__FILE__, __LINE__, "the connection closed before a whole line");
    if (ch == '\n') break;
    if (n + 1 < cap) buf[n++] = ch;
  }
  buf[n] = '\0';
}

/* Sends a request line as written (its id text exactly as given). */
static void send_line(client_conn *c, const char *line) {
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "%s\n", line);
  ASSERT_OK(client_send(c, buf, (size_t)n), NULL);
}

TEST(a_call_forwarded_through_a_relay_is_answered_once_even_when_its_primary_goes_away) {
  redis_harness rd;
  harness p, r1;
  cluster_up(&rd, &p, NULL, &r1, NULL);
  client_conn c;
  char err[256], line[65536];
  ASSERT_OK(client_connect(&c, "127.0.0.1", r1.rpc_port, err, sizeof(err)), err);
  /* Three ids that differ only as text: each answer names its own call, as the client wrote it. */
  send_line(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"weights.get\",\"params\":{\"session\":\"demo\"}}");
  send_line(&c, "{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"state.get\",\"params\":{\"session\":\"demo\"}}");
  send_line(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"method\":\"targets.list\",\"params\":{\"session\":\"demo\"}}");
  read_line(&c, line, sizeof(line));
  ASSERT_STR_CONTAINS(line, "\"id\":1,\"result\":{\"version\":0,\"weights\"");
  read_line(&c, line, sizeof(line));
  ASSERT_STR_CONTAINS(line, "\"id\":1.0,\"result\":{\"session\":\"demo\"");
  read_line(&c, line, sizeof(line));
  ASSERT_STR_CONTAINS(line, "\"id\":\"1\",\"result\":[");
  ASSERT_EQ(cluster_stat(&r1, "forwarded_rpc"), 3);
  /* The primary goes away: the relay owes this client nothing, so it sends nothing more than
   * the answer to the next call. */
  harness_kill(&p);
  wait_cluster_stat_at_least(&r1, "primary_lost", 1);
  send_line(&c, "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"session.list\"}");
  read_line(&c, line, sizeof(line));
  ASSERT_STR_CONTAINS(line, "\"id\":99,");
  client_close(&c);
  cluster_down(&rd, &p, &r1, NULL);
}

/* The registry's owner of `session` and its meta's owner, as Redis holds them now. */
static void assert_owner_in_redis(const redis_harness *rd, const char *session, const char *node) {
  char cmd[256], out[256];
  snprintf(cmd, sizeof(cmd), "HGET deformd:sessions %s", session);
  redis_harness_command(rd, cmd, out, sizeof(out));
  ASSERT_STR_EQ(out, node);
  snprintf(cmd, sizeof(cmd), "HGET deformd:s:%s:meta owner", session);
  redis_harness_command(rd, cmd, out, sizeof(out));
  ASSERT_STR_EQ(out, node);
}

/* Whether h's session.list (the sessions it holds itself) names `session`. */
static int holds(harness *h, const char *session) {
  cJSON *list = harness_rpc_ok(h, "session.list", NULL), *e;
  int found = 0;
  cJSON_ArrayForEach(e, list) found |= strcmp(cJSON_GetObjectItem(e, "session")->valuestring, session) == 0;
  cJSON_Delete(list);
  return found;
}

/* The registry forgets `name`: a create that did not open has let go of it. The node sends the
 * release before its answer; Redis may get it a moment after. */
static void wait_released(const redis_harness *rd, const char *name) {
  char cmd[128], out[64];
  snprintf(cmd, sizeof(cmd), "HEXISTS deformd:sessions %s", name);
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    redis_harness_command(rd, cmd, out, sizeof(out));
    if (strcmp(out, ":0") == 0) return;
    ASSERT(client_now_ns() < deadline);
    usleep(20000);
  }
}

TEST(two_primaries_given_the_same_session_create_at_once_agree_on_one_owner_and_relays_follow_it) {
  redis_harness rd;
  redis_harness_start(&rd, 0);
  harness p[2], r1;
  const char *a1[] = {"--node-id", "p1", NULL}, *a2[] = {"--node-id", "p2", NULL};
  start_primary(&p[0], &rd, NULL, a1);
  start_primary(&p[1], &rd, NULL, a2);
  start_relay(&r1, &rd, NULL);
  wait_node(&p[0], "p2", p[1].rpc_port);
  wait_node(&p[1], "p1", p[0].rpc_port);
  /* Each primary is told to open "race" itself, and both requests are out before either answer
   * is read: neither registry survey can know of the other's session yet. */
  client_conn c[2];
  char err[256], line[2][4096];
  for (int i = 0; i < 2; i++) ASSERT_OK(client_connect(&c[i], "127.0.0.1", p[i].rpc_port, err, sizeof(err)), err);
  send_line(&c[0], "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.create\",\"params\":{\"session\":\"race\",\"mesh\":\"demo\",\"node\":\"p1\"}}");
  send_line(&c[1], "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.create\",\"params\":{\"session\":\"race\",\"mesh\":\"demo\",\"node\":\"p2\"}}");
  for (int i = 0; i < 2; i++) {
    read_line(&c[i], line[i], sizeof(line[i]));
    fprintf(stderr, "p%d: %s\n", i + 1, line[i]);
    client_close(&c[i]);
  }
  int won[2];
  for (int i = 0; i < 2; i++) won[i] = strstr(line[i], "\"result\":{\"session\":\"race\"") != NULL;
  ASSERT_EQ(won[0] + won[1], 1);
  int w = won[0] ? 0 : 1;
  const char *winner = w == 0 ? "p1" : "p2";
  char want[128];
  snprintf(want, sizeof(want), "\"code\":-32005,\"message\":\"a session called 'race' already exists (on node %s)\"", winner);
  ASSERT_STR_CONTAINS(line[1 - w], want);
  /* The registry names the winner; the loser holds nothing of that name. */
  assert_owner_in_redis(&rd, "race", winner);
  ASSERT(holds(&p[w], "race"));
  ASSERT(!holds(&p[1 - w], "race"));
  ASSERT_EQ(cluster_stat(&p[1 - w], "claims_refused"), 1);
  /* Calls for it on the loser and on the relay reach the winner; the relay follows the winner. */
  wait_known(&p[1 - w], "race");
  cJSON_Delete(harness_rpc_ok(&p[1 - w], "weights.set", "{\"session\":\"race\",\"weights\":{\"smile_L\":0.5}}"));
  ASSERT_EQ(version_of(&p[w], "race"), 1);
  wait_listed(&r1, "race");
  wait_published(&rd, "race", 1);
  client_conn vc;
  client_replica vr;
  harness_join(&r1, &vc, &vr, "race", PROTO_ROLE_VIEWER, NULL);
  ASSERT_EQ(vr.version, 1);
  cJSON *e = relay_entry_of(&r1, "race");
  ASSERT_STR_EQ(cJSON_GetObjectItem(e, "primary")->valuestring, winner);
  cJSON_Delete(e);
  cJSON_Delete(harness_rpc_ok(&r1, "weights.set", "{\"session\":\"race\",\"weights\":{\"jaw_open\":0.25}}"));
  harness_follow(&vc, &vr, 2, WAIT_MS);
  assert_shape(&p[w], "race", &vr);
  client_close(&vc);
  client_replica_fini(&vr);
  /* A create that does not open lets go of its name: the registry forgets it, and another node
   * may take it at once. */
  char params[256], msg[256];
  snprintf(params, sizeof(params), "{\"session\":\"broken\",\"mesh\":\"%s/no-such-mesh.obj\",\"node\":\"%s\"}",
           test_tmpdir(), w == 0 ? "p2" : "p1");
  ASSERT_EQ(harness_rpc_err(&p[1 - w], "session.create", params, msg, sizeof(msg)), -32004);
  ASSERT_STR_CONTAINS(msg, "mesh refused"); /* the import worker's answer: the open began, then failed */
  wait_released(&rd, "broken");
  /* So does one whose open is refused before it begins, after the claim (no file system takes a
   * name this long: the importer says so at once): the same node may claim the name again at once. */
  char *longp = malloc(4200 + 128);
  ASSERT(longp != NULL);
  int n = snprintf(longp, 128, "{\"session\":\"too-long\",\"node\":\"%s\",\"mesh\":\"", w == 0 ? "p2" : "p1");
  memset(longp + n, 'a', 4200);
  snprintf(longp + n + 4200, 128, "\"}");
  ASSERT_EQ(harness_rpc_err(&p[1 - w], "session.create", longp, msg, sizeof(msg)), -32004);
  ASSERT_STR_EQ(msg, "the file name is 4200 bytes long");
  free(longp);
  snprintf(params, sizeof(params), "{\"session\":\"too-long\",\"mesh\":\"demo\",\"node\":\"%s\"}",
           w == 0 ? "p2" : "p1");
  cJSON_Delete(harness_rpc_ok(&p[1 - w], "session.create", params));
  assert_owner_in_redis(&rd, "too-long", w == 0 ? "p2" : "p1");
  snprintf(params, sizeof(params), "{\"session\":\"broken\",\"mesh\":\"demo\",\"node\":\"%s\"}", winner);
  cJSON_Delete(harness_rpc_ok(&p[w], "session.create", params));
  assert_owner_in_redis(&rd, "broken", winner);
  harness_stop(&r1);
  harness_stop(&p[1]);
  harness_stop(&p[0]);
  redis_harness_kill(&rd);
}

TEST(a_session_whose_primary_is_lost_can_be_created_again_and_the_old_primary_gives_it_up_when_it_returns) {
  redis_harness rd;
  redis_harness_start(&rd, 0);
  char data[1100];
  snprintf(data, sizeof(data), "%s/primary-a-data", test_tmpdir());
  harness a, b, r1;
  const char *aa[] = {"--demo", "--data", data, "--node-id", "a", NULL}, *ba[] = {"--node-id", "b", NULL};
  start_primary(&a, &rd, "demo", aa);
  start_primary(&b, &rd, NULL, ba);
  start_relay(&r1, &rd, "demo");
  for (int i = 0; i < 5; i++) edit(&a, &a, i);
  harness_kill(&a);
  wait_node_state(&b, "a", 0, 0);
  /* Its primary is lost: the name may be taken, and b takes it. */
  cJSON *r = harness_rpc_ok(&b, "session.create", "{\"session\":\"demo\",\"mesh\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "version")->valuedouble, 0);
  cJSON_Delete(r);
  cJSON_Delete(harness_rpc_ok(&b, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}"));
  assert_owner_in_redis(&rd, "demo", "b");
  wait_published(&rd, "demo", 1);
  viewer v;
  join(&v, &r1, 1);
  ASSERT_EQ(v.r.version, 1);
  assert_primary_shape(&b, &v.r);
  double reloads = cluster_stat(&r1, "reloads");
  /* a comes back with its stored "demo": b's lease is alive, so a gives the name up. */
  const char *again[] = {"--data", data, "--node-id", "a", NULL};
  start_primary(&a, &rd, NULL, again);
  wait_cluster_stat_at_least(&a, "epochs_refused", 1);
  ASSERT(!holds(&a, "demo"));
  assert_owner_in_redis(&rd, "demo", "b");
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&a, "session.create", "{\"session\":\"demo\",\"mesh\":\"demo\",\"node\":\"a\"}", msg, sizeof(msg)),
            -32005);
  /* Calls on a reach b's session; the relay's viewer keeps following b, with no new epoch. */
  wait_known(&a, "demo");
  cJSON_Delete(harness_rpc_ok(&a, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.75}}"));
  ASSERT_EQ(version_of(&b, "demo"), 2);
  follow_in_order(&v, 2);
  assert_primary_shape(&b, &v.r);
  ASSERT_EQ(cluster_stat(&r1, "reloads"), reloads);
  ASSERT_EQ(cluster_stat(&b, "epochs_refused"), 0);
  leave(&v);
  harness_stop(&r1);
  harness_stop(&b);
  harness_stop(&a);
  redis_harness_kill(&rd);
}

TEST(a_relay_answers_read_calls_from_its_replica_while_the_primary_is_lost_and_still_refuses_edits) {
  redis_harness rd;
  harness p, r1;
  cluster_up(&rd, &p, NULL, &r1, NULL);
  /* Every kind of state a read shows: weights, offsets, a target made from the sculpt and its
   * settings, more offsets on top. */
  for (int i = 0; i < 12; i++) edit(&p, &r1, i);
  cJSON_Delete(harness_rpc_ok(&p, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"kept\"}"));
  cJSON_Delete(harness_rpc_ok(&r1, "targets.configure", "{\"session\":\"demo\",\"target\":\"kept\",\"max\":2,\"muted\":true}"));
  cJSON_Delete(harness_rpc_ok(&r1, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"7\":[0.001,0.002,-0.003]}}"));
  /* While the primary is alive a read on the relay is the primary's: a client reads its own
   * write at once. */
  cJSON_Delete(harness_rpc_ok(&r1, "weights.set", "{\"session\":\"demo\",\"weights\":{\"brow_up_L\":0.625}}"));
  cJSON *w = harness_rpc_ok(&r1, "weights.get", "{\"session\":\"demo\"}");
  ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), "brow_up_L")->valuedouble == 0.625);
  cJSON_Delete(w);
  uint64_t want = version_of(&p, "demo");
  wait_published(&rd, "demo", want);
  ASSERT_EQ(cluster_stat(&r1, "replicas_loaded"), 0); /* nobody watches it there: the first read loads it */
  static const char *const reads[] = {"state.get", "weights.get", "targets.list", "mesh.info", "sculpt.get"};
  enum { NREADS = sizeof(reads) / sizeof(reads[0]) };
  cJSON *before[NREADS];
  for (int i = 0; i < NREADS; i++) before[i] = harness_rpc_ok(&p, reads[i], "{\"session\":\"demo\"}");
  harness_kill(&p);
  wait_cluster_stat_at_least(&r1, "primary_lost", 1);
  /* The relay answers each read as the primary did just before it died. */
  for (int i = 0; i < NREADS; i++) {
    cJSON *now = harness_rpc_ok(&r1, reads[i], "{\"session\":\"demo\"}");
    if (!cJSON_Compare(before[i], now, 1)) {
      char *a = cJSON_PrintUnformatted(before[i]), *b = cJSON_PrintUnformatted(now);
      test__fail(__FILE__, __LINE__, "%s: the relay answers %.300s, the primary answered %.300s", reads[i], b, a);
    }
    cJSON_Delete(now);
    cJSON_Delete(before[i]);
  }
  /* Edits, and what only the primary knows, are refused with the reason. */
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&r1, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":1}}", msg, sizeof(msg)),
            -32012);
  ASSERT_STR_CONTAINS(msg, "is lost");
  ASSERT_EQ(harness_rpc_err(&r1, "history.list", "{\"session\":\"demo\"}", msg, sizeof(msg)), -32012);
  ASSERT_EQ(harness_rpc_err(&r1, "anim.list", "{\"session\":\"demo\"}", msg, sizeof(msg)), -32012);
  cluster_down(&rd, &p, &r1, NULL);
}

TEST(a_relay_loads_a_session_when_its_first_viewer_joins_and_drops_it_once_the_last_has_gone) {
  redis_harness rd;
  harness p, r1;
  redis_harness_start(&rd, 0);
  const char *pargs[] = {"--demo", NULL};
  start_primary(&p, &rd, "demo", pargs);
  cJSON_Delete(harness_rpc_ok(&p, "session.create", "{\"session\":\"other\",\"mesh\":\"demo\"}"));
  const char *idle[] = {"--replica-idle-ms", "300", NULL};
  start_relay_with(&r1, &rd, "demo", idle);
  wait_listed(&r1, "other");
  /* Known from the registry, held by nobody: nothing loaded. */
  for (int i = 0; i < 10; i++) edit(&p, &p, i);
  ASSERT_EQ(cluster_stat(&r1, "replicas_loaded"), 0);
  ASSERT(!holds(&r1, "demo") && !holds(&r1, "other"));
  /* The first viewer's join loads it, caught up with everything Redis holds. */
  uint64_t want = version_of(&p, "demo");
  wait_published(&rd, "demo", want);
  viewer v;
  join(&v, &r1, 1);
  ASSERT_EQ(v.r.version, want);
  assert_primary_shape(&p, &v.r);
  cJSON *e = relay_entry_of(&r1, "other");
  ASSERT(!cJSON_IsTrue(cJSON_GetObjectItem(e, "loaded")));
  cJSON_Delete(e);
  ASSERT_EQ(cluster_stat(&r1, "replicas_loaded"), 1);
  for (int i = 10; i < 20; i++) edit(&p, &r1, i);
  want = version_of(&p, "demo");
  follow_in_order(&v, want);
  assert_primary_shape(&p, &v.r);
  /* The last viewer leaves: after replica_idle_ms the replica goes. */
  leave(&v);
  wait_cluster_stat(&r1, "replicas_loaded", 0);
  ASSERT_EQ(cluster_stat(&r1, "replicas_dropped"), 1);
  ASSERT(!holds(&r1, "demo"));
  /* Edits meanwhile; the next viewer loads it again, at the primary's state. */
  for (int i = 20; i < 30; i++) edit(&p, &p, i);
  want = version_of(&p, "demo");
  wait_published(&rd, "demo", want);
  join(&v, &r1, 0);
  ASSERT_EQ(v.r.version, want);
  assert_primary_shape(&p, &v.r);
  for (int i = 30; i < 35; i++) edit(&p, &r1, i);
  want = version_of(&p, "demo");
  follow_in_order(&v, want);
  assert_primary_shape(&p, &v.r);
  leave(&v);
  cluster_down(&rd, &p, &r1, NULL);
}

/* One whole frame, copied (the client's buffer is reused by the next read). */
static uint8_t *read_whole(client_conn *c, proto_header *h, size_t *n) {
  const uint8_t *p;
  char err[256];
  ASSERT_OK(client_read_frame(c, WAIT_MS, h, &p, err, sizeof(err)), err);
  *n = PROTO_HEADER_SIZE + h->length;
  uint8_t *f = malloc(*n);
  memcpy(f, p - PROTO_HEADER_SIZE, *n);
  return f;
}

TEST(a_viewer_of_a_relay_is_granted_capabilities_as_on_a_primary_and_gets_the_same_frames_otherwise) {
  redis_harness rd;
  harness p, r1;
  cluster_up(&rd, &p, NULL, &r1, NULL);
  /* The first HELLO makes the relay load the session and answers it after that load (the same
   * HELLO handled again, srv_stream.c's on_hello): it asks for "noop". */
  client_conn a, b;
  char err[256];
  proto_hello_opts caps = {0}, none = {0};
  ASSERT_OK(client_caps_parse("noop", &caps, err, sizeof(err)), err);
  harness_connect(&r1, &a, r1.stream_port);
  ASSERT_OK(client_hello2(&a, "demo", PROTO_ROLE_VIEWER, NULL, &caps), NULL);
  proto_welcome w;
  proto_welcome_opts wo;
  ASSERT_OK(client_read_welcome(&a, WAIT_MS, &w, &wo, err, sizeof(err)), err);
  ASSERT_EQ(wo.caps_option, 1);
  ASSERT_EQ(wo.caps, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  harness_connect(&r1, &b, r1.stream_port);
  ASSERT_OK(client_hello2(&b, "demo", PROTO_ROLE_VIEWER, NULL, &none), NULL);
  ASSERT_OK(client_read_welcome(&b, WAIT_MS, &w, &wo, err, sizeof(err)), err);
  ASSERT_EQ(wo.protocol_version, PROTO_VERSION_2);
  ASSERT_EQ(wo.caps_option, 0);
  /* The SNAPSHOT and the frames of a few edits: the same bytes for both. */
  for (int i = 1; i <= 4; i++) edit(&p, &p, i == 4 ? 5 : i); /* weights, and (5) sculpt offsets */
  uint64_t want = version_of(&p, "demo");
  int frames = 0;
  for (;;) {
    proto_header ha, hb;
    size_t na, nb;
    uint8_t *fa = read_whole(&a, &ha, &na), *fb = read_whole(&b, &hb, &nb);
    ASSERT_EQ(na, nb);
    ASSERT(memcmp(fa, fb, na) == 0);
    free(fa);
    free(fb);
    frames++;
    if (ha.type != PROTO_SNAPSHOT && !(ha.flags & PROTO_FLAG_MORE) && ha.session_version >= want) break;
  }
  ASSERT(frames >= 2);
  client_close(&a);
  client_close(&b);
  cluster_down(&rd, &p, &r1, NULL);
}

/* The up axis travels with the session's epoch: a relay's viewers that ask for "up" are told the
 * primary's, and the relay's mesh.info reports it. */
TEST(a_relays_viewers_get_the_up_axis_the_session_was_created_with_on_its_primary) {
  redis_harness rd;
  harness p, r1;
  cluster_up(&rd, &p, NULL, &r1, NULL);
  cJSON_Delete(harness_rpc_ok(&p, "session.create", "{\"session\":\"scan\",\"mesh\":\"demo\",\"up\":\"z\"}"));
  wait_listed(&r1, "scan");
  wait_published(&rd, "scan", 0);
  client_conn a;
  char err[256];
  proto_hello_opts caps = {0};
  ASSERT_OK(client_caps_parse("up", &caps, err, sizeof(err)), err);
  const char *const sessions[2] = {"scan", "demo"};
  const uint8_t want[2] = {'z', 'y'};
  for (int i = 0; i < 2; i++) {
    harness_connect(&r1, &a, r1.stream_port);
    ASSERT_OK(client_hello2(&a, sessions[i], PROTO_ROLE_VIEWER, NULL, &caps), NULL);
    proto_welcome w;
    proto_welcome_opts wo;
    ASSERT_OK(client_read_welcome(&a, WAIT_MS, &w, &wo, err, sizeof(err)), err);
    ASSERT_EQ(wo.caps, PROTO_CAP_BIT(PROTO_CAP_UP));
    ASSERT_EQ(wo.up, want[i]);
    client_close(&a);
  }
  cJSON *info = harness_rpc_ok(&r1, "mesh.info", "{\"session\":\"scan\"}");
  ASSERT(strcmp(cJSON_GetObjectItem(info, "up")->valuestring, "z") == 0);
  cJSON_Delete(info);
  cluster_down(&rd, &p, &r1, NULL);
}

/* ---- textures and texture clips through a relay ------------------------------------------------ */

static void png_sink(void *ctx, void *data, int size) {
  proto_buf *b = ctx;
  uint8_t *p = proto_buf_append(b, (size_t)size);
  if (p) memcpy(p, data, (size_t)size);
}

/* texclip.upload's params for session "syd": 4 PNG frames of 16 × 8 texels, a ramp whose slope
 * and phase change with the frame (`seed` makes another clip). */
static char *texclip_params(const char *name, int seed) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "session", "syd");
  cJSON_AddStringToObject(p, "name", name);
  cJSON_AddStringToObject(p, "clip", "run");
  cJSON_AddNumberToObject(p, "fps", 10);
  cJSON *frames = cJSON_AddArrayToObject(p, "frames");
  for (int f = 0; f < 4; f++) {
    uint8_t rgb[16 * 8 * 3];
    for (int i = 0; i < 16 * 8 * 3; i++) rgb[i] = (uint8_t)(40 + (i % 48) * (f + 1 + seed) + 7 * f * (i / 48));
    proto_buf png;
    proto_buf_init(&png);
    stbi_write_png_to_func(png_sink, &png, 16, 8, 3, rgb, 16 * 3);
    char *b64 = malloc(png.len / 3 * 4 + 8);
    EVP_EncodeBlock((unsigned char *)b64, png.data, (int)png.len);
    cJSON_AddItemToArray(frames, cJSON_CreateString(b64));
    free(b64);
    proto_buf_fini(&png);
  }
  char *s = cJSON_PrintUnformatted(p);
  cJSON_Delete(p);
  return s;
}

#define TEX_FRAMES_MAX 32

/* The TEXTURE, TEXCLIP and TEXWEIGHTS frames a viewer got, whole, in order. */
typedef struct tex_frames {
  uint8_t *f[TEX_FRAMES_MAX];
  size_t n[TEX_FRAMES_MAX];
  uint8_t type[TEX_FRAMES_MAX];
  int count;
} tex_frames;

static void tex_frames_fini(tex_frames *t) {
  for (int i = 0; i < t->count; i++) free(t->f[i]);
  t->count = 0;
}

/* Reads c's frames into t until a TEXWEIGHTS after a frame of `version` or later, one with the
 * bytes of `match` when given; returns that TEXWEIGHTS's index in t. */
static int read_textures(client_conn *c, uint64_t version, const uint8_t *match, size_t match_len, tex_frames *t) {
  int reached = 0;
  for (;;) {
    proto_header h;
    size_t n;
    uint8_t *f = read_whole(c, &h, &n);
    if (h.session_version >= version && (h.type == PROTO_SNAPSHOT || h.type == PROTO_WEIGHTS)) reached = 1;
    if (h.type != PROTO_TEXTURE && h.type != PROTO_TEXCLIP && h.type != PROTO_TEXWEIGHTS) {
      free(f);
      continue;
    }
    ASSERT(t->count < TEX_FRAMES_MAX);
    t->f[t->count] = f, t->n[t->count] = n, t->type[t->count] = h.type;
    int at = t->count++;
    if (h.type == PROTO_TEXWEIGHTS && reached && (!match || (n == match_len && memcmp(f, match, n) == 0))) return at;
  }
}

/* Frames of `type` in a and b: the same bytes in the same order. Returns how many. */
static int assert_same_of_type(const tex_frames *a, const tex_frames *b, uint8_t type) {
  int i = 0, j = 0, same = 0;
  for (;; i++, j++) {
    while (i < a->count && a->type[i] != type) i++;
    while (j < b->count && b->type[j] != type) j++;
    if (i >= a->count || j >= b->count) break;
    ASSERT_EQ(a->n[i], b->n[j]);
    ASSERT(memcmp(a->f[i], b->f[j], a->n[i]) == 0);
    same++;
  }
  ASSERT(i >= a->count && j >= b->count); /* as many in each */
  return same;
}

static void join_textured(harness *at, client_conn *c) {
  char err[256];
  proto_hello_opts caps = {.caps = PROTO_CAP_BIT(PROTO_CAP_TEXTURE) | PROTO_CAP_BIT(PROTO_CAP_TEXCLIP)};
  harness_connect(at, c, at->stream_port);
  ASSERT_OK(client_hello2(c, "syd", PROTO_ROLE_VIEWER, NULL, &caps), NULL);
  proto_welcome w;
  proto_welcome_opts wo;
  ASSERT_OK(client_read_welcome(c, WAIT_MS, &w, &wo, err, sizeof(err)), err);
  ASSERT_EQ(wo.caps, caps.caps);
}

static uint64_t seek_syd(harness *p, int frame) {
  char params[96];
  snprintf(params, sizeof(params), "{\"session\":\"syd\",\"frame\":%d}", frame);
  cJSON_Delete(harness_rpc_ok(p, "anim.seek", params));
  return version_of(p, "syd");
}

/* sydney.md2 with its skin and a texture clip on its "run" clip: a relay's viewer gets the
 * TEXTURE frames (its materials and the skin's pixels) and the TEXCLIP a primary's viewer gets,
 * byte for byte, whether the relay loaded the clip with the snapshot (the session's "tex" hash)
 * or followed it in the stream, and TEXWEIGHTS on the primary's clip clock; and again after a
 * new epoch (Redis restarted empty). */
TEST(a_relays_viewers_get_the_textures_texture_clips_and_texture_weights_a_primarys_viewers_get) {
  redis_harness rd;
  harness p, r1;
  cluster_up(&rd, &p, NULL, &r1, NULL);
  char params[1200];
  snprintf(params, sizeof(params), "{\"session\":\"syd\",\"mesh\":\"%s\"}",
           harness_mesh_name(test_assimp_model("MD2/sydney.md2")));
  cJSON_Delete(harness_rpc_ok(&p, "session.create", params));
  cJSON_Delete(harness_rpc_ok(&p, "anim.compress", "{\"session\":\"syd\",\"clip\":\"run\",\"components\":4}"));
  char *up = texclip_params("skin", 0);
  cJSON_Delete(harness_rpc_ok(&p, "texclip.upload", up));
  free(up);
  cJSON_Delete(harness_rpc_ok(&p, "anim.play", "{\"session\":\"syd\",\"clip\":\"run\"}"));
  cJSON_Delete(harness_rpc_ok(&p, "anim.pause", "{\"session\":\"syd\"}"));
  uint64_t v = seek_syd(&p, 2);
  wait_listed(&r1, "syd");
  /* Joins: the relay loads the session (and "skin") from Redis for its viewer. */
  client_conn a, b;
  tex_frames ta = {0}, tb = {0};
  join_textured(&p, &a);
  int wa = read_textures(&a, v, NULL, 0, &ta);
  join_textured(&r1, &b);
  read_textures(&b, v, ta.f[wa], ta.n[wa], &tb);
  ASSERT(assert_same_of_type(&ta, &tb, PROTO_TEXTURE) >= 2); /* MATERIALS and the skin */
  ASSERT_EQ(assert_same_of_type(&ta, &tb, PROTO_TEXCLIP), 1);
  tex_frames_fini(&ta), tex_frames_fini(&tb);
  /* Live: a second clip (through the stream) and the clock moved on. */
  up = texclip_params("glow", 3);
  cJSON_Delete(harness_rpc_ok(&p, "texclip.upload", up));
  free(up);
  v = seek_syd(&p, 5);
  wa = read_textures(&a, v, NULL, 0, &ta);
  int wb = read_textures(&b, v, ta.f[wa], ta.n[wa], &tb);
  ASSERT_EQ(assert_same_of_type(&ta, &tb, PROTO_TEXCLIP), 1);
  ASSERT_EQ(assert_same_of_type(&ta, &tb, PROTO_TEXTURE), 0); /* once per join */
  proto_texweights_entry e[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t n = 0;
  ASSERT_OK(proto_decode_texweights(tb.f[wb] + PROTO_HEADER_SIZE, tb.n[wb] - PROTO_HEADER_SIZE, e, &n), NULL);
  ASSERT_EQ(n, 2); /* both clips follow "run" */
  tex_frames_fini(&ta), tex_frames_fini(&tb);
  /* A late joiner of the relay: both clips and the weights shown now, as a primary's. */
  client_conn c, d;
  join_textured(&p, &c);
  wa = read_textures(&c, v, NULL, 0, &ta);
  join_textured(&r1, &d);
  read_textures(&d, v, ta.f[wa], ta.n[wa], &tb);
  ASSERT(assert_same_of_type(&ta, &tb, PROTO_TEXTURE) >= 2);
  ASSERT_EQ(assert_same_of_type(&ta, &tb, PROTO_TEXCLIP), 2);
  tex_frames_fini(&tb);
  /* Redis restarts empty: the primary's new epoch writes the clips and the weights again, and a
   * viewer joining the relay's new replica gets what the primary's late joiner got. */
  int port = rd.port;
  redis_harness_kill(&rd);
  redis_harness_start(&rd, port);
  ASSERT_EQ(harness_expect_error(&d, PROTO_BYE, NULL, WAIT_MS), PROTO_ERR_RESYNC);
  client_conn late;
  join_textured(&r1, &late);
  read_textures(&late, v, ta.f[wa], ta.n[wa], &tb);
  ASSERT(assert_same_of_type(&ta, &tb, PROTO_TEXTURE) >= 2);
  ASSERT_EQ(assert_same_of_type(&ta, &tb, PROTO_TEXCLIP), 2);
  tex_frames_fini(&ta), tex_frames_fini(&tb);
  client_close(&a), client_close(&b), client_close(&c), client_close(&d), client_close(&late);
  cluster_down(&rd, &p, &r1, NULL);
}
