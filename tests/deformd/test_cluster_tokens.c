/*
 * test_cluster_tokens.c — with --redis, access tokens are the cluster's: a redis-server of the
 * test's own (support/redis_harness.c), a primary and a relay, every node given the same
 * administrator's token.
 *
 * The oracles: what each node answers with the token (auth's role and session, the binary
 * port's WELCOME or ERROR, an edit's effect on the primary's version), each node's token.list
 * (ids as token.create gave them), and Redis' own content (every key and value, scanned for
 * the token's text and for its SHA-256 computed here with libcrypto). Waits are bounded polls
 * of those answers, never sleeps.
 */
#define _GNU_SOURCE /* memmem */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "redis_harness.h"
#include "test.h"

#define ADMIN "cluster-admin-s3cret-0123456789"
#define WAIT_MS 60000

static void wait_flag(harness *h, const char *a, const char *b, int want);

/* A primary (the demo head) or a relay on rd, with the administrator's token, once both its
 * Redis connections are up and its tokens are in sync (until then token.create answers that
 * they are not). A relay waits until its registry lists demo. */
static void start_node(harness *h, const redis_harness *rd, int relay) {
  const char *args[16] = {"--redis", rd->url, "--lease-ms", "1000", "--redis-timeout-ms", "1000",
                          "--hello-timeout-ms", "60000"};
  int n = 8;
  args[n++] = relay ? "--relay" : "--demo";
  args[n] = NULL;
  harness_start_token(h, relay ? NULL : "demo", args, ADMIN);
  wait_flag(h, "redis", "connected", 1); /* changes go on the command connection */
  wait_flag(h, "tokens", "synced", 1);
  if (!relay) return;
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *st = harness_rpc_ok(h, "server.stats", NULL);
    const cJSON *s, *list = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "cluster"), "sessions");
    int listed = 0;
    cJSON_ArrayForEach(s, list) listed |= strcmp(cJSON_GetObjectItem(s, "session")->valuestring, "demo") == 0;
    cJSON_Delete(st);
    if (listed) return;
    if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "the relay's registry never listed demo");
    usleep(20000);
  }
}

/* token.create on conn c; the token into tok (96 bytes), its id returned. */
static int64_t make_on(client_conn *c, const char *role, const char *session, const char *user, char *tok) {
  char p[300], msg[256];
  if (session) snprintf(p, sizeof(p), "{\"role\":\"%s\",\"session\":\"%s\",\"user\":\"%s\"}", role, session, user);
  else snprintf(p, sizeof(p), "{\"role\":\"%s\",\"user\":\"%s\"}", role, user);
  cJSON *r = NULL;
  if (harness_call(c, "token.create", p, &r, msg, sizeof(msg)) != 0) test__fail(__FILE__, __LINE__, "token.create: %s", msg);
  snprintf(tok, 96, "%s", cJSON_GetObjectItem(r, "token")->valuestring);
  int64_t id = (int64_t)cJSON_GetObjectItem(r, "id")->valuedouble;
  cJSON_Delete(r);
  return id;
}

static int64_t make(harness *h, const char *role, const char *session, const char *user, char *tok) {
  return make_on(&h->rpc, role, session, user, tok);
}

/* h's token.list entry for `id` (detached; caller frees), or NULL. */
static cJSON *listed(harness *h, int64_t id) {
  cJSON *list = harness_rpc_ok(h, "token.list", NULL), *found = NULL;
  const cJSON *t;
  cJSON_ArrayForEach(t, list) if ((int64_t)cJSON_GetObjectItem(t, "id")->valuedouble == id) found =
      cJSON_Duplicate(t, 1);
  cJSON_Delete(list);
  return found;
}

/* Waits until h lists token `id` (present) or no longer does. */
static void wait_token(harness *h, int64_t id, int present) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *e = listed(h, id);
    cJSON_Delete(e);
    if (!!e == present) return;
    if (client_now_ns() > deadline)
      test__fail(__FILE__, __LINE__, "token %lld still %s", (long long)id, present ? "unknown" : "listed");
    usleep(20000);
  }
}

/* A JSON-RPC connection to h that presented `token`: auth's code, its result's role into role. */
static int auth_on(harness *h, client_conn *c, const char *token, char *role, size_t rolelen) {
  char err[256], p[200], msg[256];
  ASSERT_OK(client_connect(c, "127.0.0.1", h->rpc_port, err, sizeof(err)), err);
  snprintf(p, sizeof(p), "{\"token\":\"%s\"}", token);
  cJSON *r = NULL;
  int rc = harness_call(c, "auth", p, &r, msg, sizeof(msg));
  if (role) snprintf(role, rolelen, "%s", rc == 0 ? cJSON_GetObjectItem(r, "role")->valuestring : msg);
  cJSON_Delete(r);
  return rc;
}

/* Whether `token` passes auth on h (on a connection of its own, closed after). */
static int accepted(harness *h, const char *token, const char *want_role) {
  client_conn c;
  char role[256];
  int rc = auth_on(h, &c, token, role, sizeof(role));
  client_close(&c);
  if (rc == 0 && want_role && strcmp(role, want_role) != 0)
    test__fail(__FILE__, __LINE__, "auth gave role %s, want %s", role, want_role);
  return rc == 0;
}

/* A HELLO on h's binary port: 0 when WELCOME came, else the ERROR's code. */
static int hello_code(harness *h, proto_role role, const char *token) {
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h->stream_port, err, sizeof(err)), err);
  ASSERT_OK(client_hello(&c, "demo", role, token), NULL);
  proto_header hd;
  const uint8_t *p;
  ASSERT_OK(client_read_frame(&c, WAIT_MS, &hd, &p, err, sizeof(err)), err);
  int code = 0;
  if (hd.type == PROTO_ERROR || hd.type == PROTO_BYE) {
    proto_error e;
    ASSERT_OK(proto_decode_error(p, hd.length, &e), NULL);
    code = e.code;
  } else {
    ASSERT_EQ(hd.type, PROTO_WELCOME);
  }
  client_close(&c);
  return code;
}

/* A redis-server, a primary and a relay; and all three stopped (the nodes must exit cleanly). */
static void cluster_up(redis_harness *rd, harness *p, harness *r) {
  redis_harness_start(rd, 0);
  start_node(p, rd, 0);
  start_node(r, rd, 1);
}

static void cluster_down(redis_harness *rd, harness *p, harness *r) {
  harness_stop(r);
  harness_stop(p);
  redis_harness_kill(rd);
}

static uint64_t version_of(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static const cJSON *cluster_item(cJSON *stats, const char *a, const char *b) {
  const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "cluster"), a);
  return b ? cJSON_GetObjectItem(o, b) : o;
}

/* Waits until h's server.stats cluster.<a>.<b> is the boolean `want`. */
static void wait_flag(harness *h, const char *a, const char *b, int want) {
  uint64_t deadline = client_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  for (;;) {
    cJSON *st = harness_rpc_ok(h, "server.stats", NULL);
    int v = cJSON_IsTrue(cluster_item(st, a, b));
    cJSON_Delete(st);
    if (v == want) return;
    if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "cluster.%s.%s never became %d", a, b, want);
    usleep(20000);
  }
}

static void hex_sha256(const char *token, char out[65]) {
  unsigned char h[32];
  unsigned int n = 32;
  EVP_Digest(token, strlen(token), h, &n, EVP_sha256(), NULL);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* ---- the tests ------------------------------------------------------------------------------------ */

TEST(a_token_made_on_either_node_works_on_the_other_and_its_role_is_enforced_there) {
  redis_harness rd;
  harness p, r;
  cluster_up(&rd, &p, &r);
  char viewer[96], editor[96], msg[512];
  int64_t vid = make(&p, "viewer", "demo", "vic", viewer); /* on the primary */
  int64_t eid = make(&r, "editor", NULL, "eve", editor);   /* on the relay */
  ASSERT(vid != eid);
  wait_token(&r, vid, 1);
  wait_token(&p, eid, 1);
  /* The primary's viewer token on the relay: both ports, as a viewer only. */
  client_conn c;
  char role[256];
  ASSERT_EQ(auth_on(&r, &c, viewer, role, sizeof(role)), 0);
  ASSERT_STR_CONTAINS(role, "viewer");
  ASSERT_EQ(harness_call(&c, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":1}}", NULL, msg, sizeof(msg)),
            -32009);
  ASSERT_STR_CONTAINS(msg, "needs the editor role");
  client_close(&c);
  ASSERT_EQ(hello_code(&r, PROTO_ROLE_VIEWER, viewer), 0);
  ASSERT_EQ(hello_code(&r, PROTO_ROLE_EDITOR, viewer), PROTO_ERR_FORBIDDEN);
  ASSERT_EQ(version_of(&p), 0);
  /* The relay's editor token on the primary, and through the relay to the primary. */
  ASSERT_EQ(auth_on(&p, &c, editor, role, sizeof(role)), 0);
  ASSERT_STR_CONTAINS(role, "editor");
  ASSERT_EQ(harness_call(&c, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":1}}", NULL, msg, sizeof(msg)), 0);
  client_close(&c);
  ASSERT_EQ(auth_on(&r, &c, editor, NULL, 0), 0);
  ASSERT_EQ(harness_call(&c, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5}}", NULL, msg, sizeof(msg)),
            0);
  client_close(&c);
  ASSERT_EQ(version_of(&p), 2);
  ASSERT_EQ(hello_code(&p, PROTO_ROLE_EDITOR, editor), 0);
  /* Neither node knows the other's tokens by accident: a made-up one is refused on both. */
  ASSERT(!accepted(&r, "dfm_not-a-token", NULL));
  ASSERT(!accepted(&p, "dfm_not-a-token", NULL));
  cluster_down(&rd, &p, &r);
}

TEST(token_list_on_a_relay_lists_the_primarys_tokens_with_ids_unique_across_nodes_and_owners_keep_their_limits) {
  redis_harness rd;
  harness p, r;
  cluster_up(&rd, &p, &r);
  char tok[6][96], msg[512];
  int64_t ids[6];
  for (int i = 0; i < 6; i++) {
    char user[16];
    snprintf(user, sizeof(user), "u%d", i);
    ids[i] = make(i % 2 ? &r : &p, i < 3 ? "viewer" : "owner", i == 2 ? NULL : "demo", user, tok[i]);
    for (int j = 0; j < i; j++) ASSERT(ids[i] != ids[j]);
  }
  for (int i = 0; i < 6; i++) {
    wait_token(&p, ids[i], 1);
    wait_token(&r, ids[i], 1);
  }
  /* The relay's list holds the primary's tokens with the record each creation answered. */
  cJSON *e = listed(&r, ids[4]);
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(e, "role")->valuestring, "owner");
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(e, "session")->valuestring, "demo");
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(e, "user")->valuestring, "u4");
  cJSON_Delete(e);
  e = listed(&r, ids[2]);
  ASSERT(cJSON_GetObjectItem(e, "session") == NULL); /* every session */
  cJSON_Delete(e);
  /* An owner of demo on the relay: its role or less, on demo only, and it sees demo's tokens. */
  client_conn c;
  ASSERT_EQ(auth_on(&r, &c, tok[3], NULL, 0), 0);
  ASSERT_EQ(harness_call(&c, "token.create", "{\"role\":\"admin\",\"user\":\"x\"}", NULL, msg, sizeof(msg)), -32009);
  ASSERT_EQ(harness_call(&c, "token.create", "{\"role\":\"viewer\",\"user\":\"x\"}", NULL, msg, sizeof(msg)), -32009);
  char made[96];
  int64_t mid = make_on(&c, "viewer", "demo", "made-by-owner", made);
  ASSERT_EQ(harness_call(&c, "token.list", NULL, NULL, msg, sizeof(msg)), -32009); /* every session's: not an owner's */
  cJSON *list = NULL;
  ASSERT_EQ(harness_call(&c, "token.list", "{\"session\":\"demo\"}", &list, msg, sizeof(msg)), 0);
  int seen = 0, n = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, list) {
    int64_t id = (int64_t)cJSON_GetObjectItem(t, "id")->valuedouble;
    seen += id == mid || id == ids[0] || id == ids[1] || id == ids[3] || id == ids[4] || id == ids[5];
    n++;
  }
  cJSON_Delete(list);
  ASSERT_EQ(seen, 6); /* demo's tokens, made on either node; not ids[2], for every session */
  ASSERT_EQ(n, 6);
  client_close(&c);
  wait_token(&p, mid, 1);
  ASSERT(accepted(&p, made, "viewer"));
  /* Nothing in Redis holds a token's text; its SHA-256 is there. */
  size_t len = 0;
  char *dump = redis_harness_dump(&rd, &len);
  const char *all[] = {tok[0], tok[1], tok[2], tok[3], tok[4], tok[5], made, ADMIN};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    char hex[65];
    hex_sha256(all[i], hex);
    if (memmem(dump, len, all[i], strlen(all[i]))) test__fail(__FILE__, __LINE__, "Redis holds the text of token %zu", i);
    if (i < 7 && !memmem(dump, len, hex, 64)) test__fail(__FILE__, __LINE__, "Redis lacks the SHA-256 of token %zu", i);
  }
  free(dump);
  cluster_down(&rd, &p, &r);
}

TEST(a_relay_or_a_primary_started_again_still_accepts_tokens_made_before_on_either_node) {
  redis_harness rd;
  harness p, r;
  cluster_up(&rd, &p, &r);
  char a[96], b[96];
  int64_t aid = make(&p, "viewer", "demo", "ann", a);
  int64_t bid = make(&r, "editor", NULL, "bob", b);
  wait_token(&r, aid, 1);
  wait_token(&p, bid, 1);
  harness_kill(&r);
  start_node(&r, &rd, 1);
  wait_token(&r, aid, 1);
  wait_token(&r, bid, 1);
  ASSERT(accepted(&r, a, "viewer"));
  ASSERT(accepted(&r, b, "editor"));
  ASSERT_EQ(hello_code(&r, PROTO_ROLE_VIEWER, a), 0);
  /* The primary keeps no store here (--data none): the relay's token comes back from Redis. */
  harness_kill(&p);
  start_node(&p, &rd, 0);
  wait_token(&p, bid, 1);
  ASSERT(accepted(&p, b, "editor"));
  ASSERT(accepted(&p, a, "viewer"));
  cluster_down(&rd, &p, &r);
}

/* A connection on `on` holding `token` (JSON-RPC, and a binary viewer), revoked on `by`: both lose
 * their rights on `on`, and the token is refused there. */
static void revoke_across(harness *by, harness *on, const char *token, int64_t id) {
  client_conn c, v;
  client_replica rep;
  char msg[512], p[64];
  ASSERT_EQ(auth_on(on, &c, token, NULL, 0), 0);
  ASSERT_EQ(harness_call(&c, "state.get", "{\"session\":\"demo\"}", NULL, msg, sizeof(msg)), 0);
  harness_join(on, &v, &rep, "demo", PROTO_ROLE_VIEWER, token);
  snprintf(p, sizeof(p), "{\"id\":%lld}", (long long)id);
  cJSON *r = harness_rpc_ok(by, "token.revoke", p);
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(r, "revoked")));
  cJSON_Delete(r);
  /* The viewer is told and closed once `on` learns it (bounded by the wait, not a sleep). */
  ASSERT_EQ(harness_expect_error(&v, PROTO_ERROR, NULL, WAIT_MS), PROTO_ERR_FORBIDDEN);
  ASSERT(harness_closed(&v, WAIT_MS));
  ASSERT_EQ(harness_call(&c, "state.get", "{\"session\":\"demo\"}", NULL, msg, sizeof(msg)), -32009);
  ASSERT_STR_CONTAINS(msg, "needs a token");
  wait_token(on, id, 0);
  ASSERT(!accepted(on, token, NULL));
  ASSERT(!accepted(by, token, NULL));
  client_replica_fini(&rep);
  client_close(&v);
  client_close(&c);
}

TEST(a_revocation_on_one_node_takes_the_rights_of_connections_on_the_other) {
  redis_harness rd;
  harness p, r;
  cluster_up(&rd, &p, &r);
  char a[96], b[96];
  int64_t aid = make(&p, "editor", NULL, "ann", a);
  int64_t bid = make(&r, "viewer", "demo", "bob", b);
  wait_token(&r, aid, 1);
  wait_token(&p, bid, 1);
  revoke_across(&p, &r, a, aid); /* made and revoked on the primary, used on the relay */
  revoke_across(&r, &p, b, bid); /* made and revoked on the relay, used on the primary */
  cluster_down(&rd, &p, &r);
}

TEST(with_redis_down_nodes_accept_the_tokens_they_knew_and_refuse_changes_with_a_reason_until_it_is_back) {
  redis_harness rd;
  harness p, r;
  cluster_up(&rd, &p, &r);
  char a[96], c[96], msg[512], params[64];
  int64_t aid = make(&p, "viewer", "demo", "ann", a);
  wait_token(&r, aid, 1);
  int port = rd.port;
  redis_harness_kill(&rd);
  wait_flag(&p, "redis", "connected", 0);
  wait_flag(&r, "redis", "connected", 0);
  ASSERT(accepted(&r, a, "viewer"));
  ASSERT(accepted(&p, a, "viewer"));
  ASSERT_EQ(hello_code(&p, PROTO_ROLE_VIEWER, a), 0); /* (the relay could not load demo's replica now) */
  harness *nodes[] = {&p, &r};
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(harness_rpc_err(nodes[i], "token.create", "{\"role\":\"viewer\",\"user\":\"x\"}", msg, sizeof(msg)),
              -32012);
    ASSERT_STR_CONTAINS(msg, "Redis cannot be reached");
    snprintf(params, sizeof(params), "{\"id\":%lld}", (long long)aid);
    ASSERT_EQ(harness_rpc_err(nodes[i], "token.revoke", params, msg, sizeof(msg)), -32012);
    ASSERT_STR_CONTAINS(msg, "Redis cannot be reached");
  }
  ASSERT(accepted(&r, a, "viewer")); /* the refused revocation did nothing */
  /* Back, empty: the nodes give it their tokens again, and creation works. */
  redis_harness_start(&rd, port);
  for (int i = 0; i < 2; i++) {
    wait_flag(nodes[i], "redis", "connected", 1);
    wait_flag(nodes[i], "tokens", "synced", 1);
  }
  int64_t cid = make(&r, "editor", NULL, "cat", c); /* (demo's owner may not be registered again yet) */
  ASSERT(cid != aid);
  wait_token(&p, cid, 1);
  ASSERT(accepted(&p, c, "editor"));
  ASSERT(accepted(&r, a, "viewer"));
  char field[64], out[64];
  snprintf(field, sizeof(field), "HEXISTS deformd:tokens %lld", (long long)aid);
  redis_harness_command(&rd, field, out, sizeof(out));
  ASSERT_STR_CONTAINS(out, ":1");
  cluster_down(&rd, &p, &r);
}
