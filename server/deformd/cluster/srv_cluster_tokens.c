/*
 * srv_cluster_tokens.c — with --redis, access tokens are the cluster's: a token made on any node
 * works on every node, outlives any node's restart, and a revocation anywhere takes effect
 * everywhere (connections holding it lose their rights, as with a local revoke).
 *
 * Only a token's record crosses Redis — id, SHA-256 (hex), role, session, user, created —
 * never the token. Keys (prefix "deformd:"):
 *   tokens           hash: id -> the record, JSON {hash, role, session?, user, created}
 *   tokens:next      the last id given (INCR): ids are unique in the cluster
 *   tokens:revoked   set of the ids taken back: a node that was away drops them on its return
 *                    instead of bringing them back
 *   tokens:seq       the change stream's last sequence
 *   tokens:log       the change stream: entries <seq>-0 {op: create|revoke, id, rec}
 * Each change is one Lua script (the hash, the set and the stream move together), sent on the
 * cluster's command connection; token.create and token.revoke answer once it has answered.
 *
 * Every node keeps the cluster's tokens in memory (srv_access.c; `auth` and HELLO never wait on
 * Redis). On a connection of its own it syncs whenever that connection comes up (and again after
 * a gap in the stream): one script hands Redis this node's tokens (those of a primary's store
 * made before --redis, or ones Redis lost) and returns the whole hash with the stream's sequence;
 * the node then knows exactly that set, and follows the stream from there with XREAD BLOCK.
 * A primary with --data keeps what it knows in its store too, so it starts with them while
 * Redis is down.
 *
 * DOES NOT decide who may do what (srv_access.c) or answer calls (srv_token_rpc.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "proto.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_grant.h"
#include "srv_server.h"
#include "srv_access.h"
#include "srv_cluster.h"

#define LOG_MAXLEN "1000" /* entries kept in tokens:log (about): a node further behind syncs again */
#define XREAD_BLOCK_MS 2000
#define USER_MAX 64

typedef struct srv_ctokens {
  srv_cluster *k;
  srv_redis *conn;          /* the sync, then XREAD BLOCK on the change stream */
  int syncing, reading, synced;
  uint64_t seq;             /* the change stream's last entry known here */
  uint64_t changes;         /* this node's changes answered (a sync they overtook runs again) */
  uint64_t changes_at_sync;
  uint64_t syncs, gaps;
} srv_ctokens;

/* KEYS: tokens, next, log, seq. ARGV: the record. Returns the new id. */
static const char *LUA_CREATE =
    "local id = redis.call('INCR', KEYS[2])\n"
    "redis.call('HSET', KEYS[1], id, ARGV[1])\n"
    "local seq = redis.call('INCR', KEYS[4])\n"
    "redis.call('XADD', KEYS[3], 'MAXLEN', '~', " LOG_MAXLEN ", seq .. '-0', 'op', 'create', 'id', id, 'rec', ARGV[1])\n"
    "return id\n";

/* KEYS: tokens, revoked, log, seq. ARGV: the id. */
static const char *LUA_REVOKE =
    "redis.call('HDEL', KEYS[1], ARGV[1])\n"
    "redis.call('SADD', KEYS[2], ARGV[1])\n"
    "local seq = redis.call('INCR', KEYS[4])\n"
    "redis.call('XADD', KEYS[3], 'MAXLEN', '~', " LOG_MAXLEN ", seq .. '-0', 'op', 'revoke', 'id', ARGV[1])\n"
    "return 1\n";

/* KEYS: tokens, next, revoked, log, seq. ARGV: triples (id, hex hash, record) of this node's
 * tokens. Ids never come back once given: the counter passes every id presented. A token
 * Redis does not hold (and never took back) is added; one whose id holds another token gets a
 * new id. Returns {the hash as field, value pairs, the stream's sequence}. */
static const char *LUA_SYNC =
    "local n = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "for i = 1, #ARGV, 3 do\n"
    "  if tonumber(ARGV[i]) > n then n = tonumber(ARGV[i]) end\n"
    "end\n"
    "redis.call('SET', KEYS[2], n)\n"
    "for i = 1, #ARGV, 3 do\n"
    "  local id, hex, rec = ARGV[i], ARGV[i + 1], ARGV[i + 2]\n"
    "  if redis.call('SISMEMBER', KEYS[3], id) == 0 then\n"
    "    local have = redis.call('HGET', KEYS[1], id)\n"
    "    if have and not string.find(have, '\"hash\":\"' .. hex .. '\"', 1, true) then\n"
    "      id = redis.call('INCR', KEYS[2])\n"
    "      have = false\n"
    "    end\n"
    "    if not have then\n"
    "      redis.call('HSET', KEYS[1], id, rec)\n"
    "      local seq = redis.call('INCR', KEYS[5])\n"
    "      redis.call('XADD', KEYS[4], 'MAXLEN', '~', " LOG_MAXLEN ", seq .. '-0', 'op', 'create', 'id', id, 'rec', rec)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {redis.call('HGETALL', KEYS[1]), tonumber(redis.call('GET', KEYS[5]) or '0')}\n";

/* ---- records ------------------------------------------------------------------------------------- */

static void to_hex(const uint8_t *h, char out[2 * SRV_TOKEN_HASH + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < SRV_TOKEN_HASH; i++) {
    out[2 * i] = digits[h[i] >> 4];
    out[2 * i + 1] = digits[h[i] & 15];
  }
  out[2 * SRV_TOKEN_HASH] = '\0';
}

static int from_hex(const char *s, uint8_t *h) {
  if (strlen(s) != 2 * SRV_TOKEN_HASH) return -1;
  for (int i = 0; i < 2 * SRV_TOKEN_HASH; i++) {
    char c = s[i];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return -1;
    if (i % 2 == 0) h[i / 2] = (uint8_t)(v << 4);
    else h[i / 2] |= (uint8_t)v;
  }
  return 0;
}

/* The record of t as JSON text (malloc'ed; caller frees), or NULL. */
static char *record_text(const srv_token *t) {
  char hex[2 * SRV_TOKEN_HASH + 1];
  to_hex(t->hash, hex);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "hash", hex);
  cJSON_AddStringToObject(o, "role", srv_role_name(t->role));
  if (t->session) cJSON_AddStringToObject(o, "session", t->session);
  cJSON_AddStringToObject(o, "user", t->user);
  cJSON_AddNumberToObject(o, "created", t->created);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return text;
}

static int valid_name(const cJSON *v, size_t max) {
  if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > max) return 0;
  for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++)
    if (*p < 0x20 || *p == 0x7f) return 0;
  return 1;
}

/* A record from Redis becomes a token this node knows. Redis is another program's memory:
 * every field is checked as a request's would be. 0, or -1 for a record that is not one
 * (logged, skipped). */
static int learn(srv_server *s, const char *id_text, const char *text, size_t len) {
  char *end = NULL;
  long long id = strtoll(id_text, &end, 10);
  cJSON *o = cJSON_ParseWithLength(text, len);
  const cJSON *hash = cJSON_GetObjectItemCaseSensitive(o, "hash");
  const cJSON *role = cJSON_GetObjectItemCaseSensitive(o, "role");
  const cJSON *session = cJSON_GetObjectItemCaseSensitive(o, "session");
  const cJSON *user = cJSON_GetObjectItemCaseSensitive(o, "user");
  const cJSON *created = cJSON_GetObjectItemCaseSensitive(o, "created");
  uint8_t h[SRV_TOKEN_HASH];
  srv_role r;
  int rc = -1;
  if (*end || id <= 0 || !cJSON_IsString(hash) || from_hex(hash->valuestring, h) != 0 || !cJSON_IsString(role) ||
      srv_role_parse(role->valuestring, &r) != 0 || (session && !valid_name(session, PROTO_MAX_NAME)) ||
      (session && r == SRV_ROLE_ADMIN) || !valid_name(user, USER_MAX) || !cJSON_IsNumber(created)) {
    srv_log(SRV_LOG_WARN, "tokens: Redis holds a record for id '%.32s' that is not a token's: skipped", id_text);
  } else if (srv_access_put(s, id, h, r, session ? session->valuestring : NULL, user->valuestring,
                            created->valuedouble) == 0) {
    rc = 0;
  }
  cJSON_Delete(o);
  return rc;
}

/* ---- the change stream ----------------------------------------------------------------------------- */

static void sync_tokens(srv_ctokens *t);

static int stopped(const srv_ctokens *t) { return t->k->stopping; }

static void key(char *buf, size_t len, const char *what, size_t *out_len) {
  *out_len = srv_cluster_key(buf, len, NULL, what);
}

/* One entry of tokens:log: [id, [field, value, ...]]. */
static void apply(srv_ctokens *t, const redisReply *e) {
  const redisReply *f = e->element[1];
  const char *op = NULL, *id = NULL, *rec = NULL;
  size_t rec_len = 0;
  for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2) {
    const redisReply *name = f->element[i], *v = f->element[i + 1];
    if (name->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
    if (strcmp(name->str, "op") == 0) op = v->str;
    else if (strcmp(name->str, "id") == 0) id = v->str;
    else if (strcmp(name->str, "rec") == 0) rec = v->str, rec_len = v->len;
  }
  if (!op || !id) return;
  if (strcmp(op, "create") == 0 && rec) {
    learn(t->k->srv, id, rec, rec_len);
  } else if (strcmp(op, "revoke") == 0) {
    long long n = strtoll(id, NULL, 10);
    if (n > 0 && srv_access_revoke(t->k->srv, n) == 0)
      srv_log(SRV_LOG_INFO, "token %lld revoked by another node of the cluster", n);
  }
}

static void read_log(srv_ctokens *t);

static void on_log(srv_redis *r, redisReply *reply, void *arg) {
  srv_ctokens *t = arg;
  (void)r;
  t->reading = 0;
  if (!reply || stopped(t)) return; /* the connection went: it syncs again when it is back */
  if (reply->type == REDIS_REPLY_ERROR) {
    srv_log(SRV_LOG_WARN, "tokens: reading the change stream: %s (syncing again)", reply->str);
    t->synced = 0;
    return;
  }
  for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; i++) {
    const redisReply *st = reply->element[i];
    if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 || st->element[1]->type != REDIS_REPLY_ARRAY) continue;
    const redisReply *entries = st->element[1];
    for (size_t j = 0; j < entries->elements; j++) {
      const redisReply *e = entries->element[j];
      if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING) continue;
      uint64_t seq = strtoull(e->element[0]->str, NULL, 10);
      if (seq != t->seq + 1) { /* trimmed past us, or Redis started again: what was missed is in the hash */
        t->gaps++;
        t->synced = 0;
        sync_tokens(t);
        return;
      }
      apply(t, e);
      t->seq = seq;
    }
  }
  read_log(t);
}

static void read_log(srv_ctokens *t) {
  if (t->reading || t->syncing || !t->synced || stopped(t) || !srv_redis_ready(t->conn)) return;
  char log[64], from[32], block[16];
  size_t log_len;
  key(log, sizeof(log), "tokens:log", &log_len);
  snprintf(from, sizeof(from), "%llu-0", (unsigned long long)t->seq);
  snprintf(block, sizeof(block), "%d", XREAD_BLOCK_MS);
  const char *argv[] = {"XREAD", "COUNT", "100", "BLOCK", block, "STREAMS", log, from};
  size_t lens[] = {5, 5, 3, 5, strlen(block), 7, log_len, strlen(from)};
  if (srv_redis_command(t->conn, XREAD_BLOCK_MS + t->k->srv->cfg.redis_timeout_ms, on_log, t, 8, argv, lens) == 0)
    t->reading = 1;
}

/* ---- the sync ------------------------------------------------------------------------------------- */

/* Whether `id` is a field of the hash (flat field, value pairs). */
static int in_hash(const redisReply *pairs, int64_t id) {
  char text[24];
  snprintf(text, sizeof(text), "%lld", (long long)id);
  for (size_t i = 0; i + 1 < pairs->elements; i += 2)
    if (pairs->element[i]->type == REDIS_REPLY_STRING && strcmp(pairs->element[i]->str, text) == 0) return 1;
  return 0;
}

static void on_synced(srv_redis *r, redisReply *reply, void *arg) {
  srv_ctokens *t = arg;
  srv_server *s = t->k->srv;
  (void)r;
  t->syncing = 0;
  if (!reply || stopped(t)) return;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_ARRAY ||
      reply->element[1]->type != REDIS_REPLY_INTEGER) {
    srv_log(SRV_LOG_WARN, "tokens: Redis refused the sync: %s (trying again)",
            reply->type == REDIS_REPLY_ERROR ? reply->str : "an answer of another shape");
    return; /* the tick tries again */
  }
  if (t->changes != t->changes_at_sync) { /* a change of ours may be on either side of it: again */
    sync_tokens(t);
    return;
  }
  const redisReply *pairs = reply->element[0];
  for (size_t i = 0; i + 1 < pairs->elements; i += 2)
    if (pairs->element[i]->type == REDIS_REPLY_STRING && pairs->element[i + 1]->type == REDIS_REPLY_STRING)
      learn(s, pairs->element[i]->str, pairs->element[i + 1]->str, pairs->element[i + 1]->len);
  /* What this node knows and the cluster does not: taken back while this node was away. */
  for (uint32_t i = 0; i < s->access.count;) {
    int64_t id = s->access.tokens[i].id;
    if (id > 0 && !in_hash(pairs, id) && srv_access_revoke(s, id) == 0) {
      srv_log(SRV_LOG_INFO, "token %lld was revoked while this node was away from Redis", (long long)id);
      continue; /* slot i holds another token now */
    }
    i++;
  }
  t->seq = (uint64_t)reply->element[1]->integer;
  t->synced = 1;
  t->syncs++;
  srv_log(SRV_LOG_INFO, "tokens: in sync with the cluster (%u known, change %llu)", s->access.count,
          (unsigned long long)t->seq);
  read_log(t);
}

static void sync_tokens(srv_ctokens *t) {
  if (t->syncing || t->reading || stopped(t) || !srv_redis_ready(t->conn)) return;
  const srv_access *a = &t->k->srv->access;
  size_t argc = 3 + 5 + 3 * (size_t)a->count;
  const char **argv = calloc(argc, sizeof(*argv));
  size_t *lens = calloc(argc, sizeof(*lens));
  char (*ids)[24] = calloc(a->count + 1, sizeof(*ids));
  char (*hexes)[2 * SRV_TOKEN_HASH + 1] = calloc(a->count + 1, sizeof(*hexes));
  char **recs = calloc(a->count + 1, sizeof(*recs));
  char keys[5][64];
  static const char *const what[] = {"tokens", "tokens:next", "tokens:revoked", "tokens:log", "tokens:seq"};
  size_t n = 0;
  if (!argv || !lens || !ids || !hexes || !recs) goto cleanup;
  argv[n] = "EVAL", lens[n++] = 4;
  argv[n] = LUA_SYNC, lens[n++] = strlen(LUA_SYNC);
  argv[n] = "5", lens[n++] = 1;
  for (int i = 0; i < 5; i++) {
    key(keys[i], sizeof(keys[i]), what[i], &lens[n]);
    argv[n++] = keys[i];
  }
  for (uint32_t i = 0; i < a->count; i++) {
    const srv_token *tk = &a->tokens[i];
    if (tk->id <= 0) continue; /* the configured administrator's: every node has its own */
    if (!(recs[i] = record_text(tk))) goto cleanup;
    lens[n] = (size_t)snprintf(ids[i], sizeof(ids[i]), "%lld", (long long)tk->id);
    argv[n++] = ids[i];
    to_hex(tk->hash, hexes[i]);
    argv[n] = hexes[i], lens[n++] = 2 * SRV_TOKEN_HASH;
    argv[n] = recs[i], lens[n++] = strlen(recs[i]);
  }
  t->changes_at_sync = t->changes;
  if (srv_redis_command(t->conn, t->k->srv->cfg.redis_timeout_ms * 4, on_synced, t, (int)n, argv, lens) == 0)
    t->syncing = 1;
cleanup:
  for (uint32_t i = 0; recs && i < a->count; i++) free(recs[i]);
  free(recs);
  free(hexes);
  free(ids);
  free(lens);
  free(argv);
}

static void on_state(srv_redis *r, int ready, void *arg) {
  srv_ctokens *t = arg;
  (void)r;
  t->synced = t->reading = t->syncing = 0;
  if (ready) sync_tokens(t);
}

/* ---- changes made here ---------------------------------------------------------------------------- */

typedef struct change {
  srv_ctokens *t;
  int creating;
  int64_t id;
  srv_token_done_cb done;
  void *arg;
} change;

static void on_changed(srv_redis *r, redisReply *reply, void *arg) {
  change *c = arg;
  srv_ctokens *t = c->t;
  (void)r;
  t->changes++;
  int status = 0;
  int64_t id = c->id;
  char why[256] = "";
  if (stopped(t)) {
    status = SRV_ESHUTDOWN;
    snprintf(why, sizeof(why), "the server is shutting down");
  } else if (!reply) {
    status = SRV_EBUSY;
    snprintf(why, sizeof(why), "Redis went away before it answered: the %s may or may not have been made there "
             "(token.list on any node tells once Redis is back)", c->creating ? "token" : "revocation");
  } else if (reply->type == REDIS_REPLY_ERROR) {
    status = SRV_EBUSY;
    snprintf(why, sizeof(why), "Redis refused the change: %s", reply->str);
  } else if (c->creating && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0) {
    id = reply->integer;
  } else if (c->creating) {
    status = SRV_EINTERNAL;
    snprintf(why, sizeof(why), "Redis answered the new token's id with something else");
  }
  if (c->done) c->done(t->k->srv, c->arg, status, id, why);
  else if (status) srv_log(SRV_LOG_WARN, "token %lld: %s", (long long)c->id, why);
  free(c);
}

static void unreachable(const srv_cluster *k, char *why, size_t whylen) {
  snprintf(why, whylen, "Redis cannot be reached (%s:%d): tokens are the cluster's and are changed there first; "
           "try again when it is back", k->url.host, k->url.port);
}

/* EVAL script with the four keys named in `what` and one argument, on the command connection. */
static int change_in_redis(srv_cluster *k, const char *script, const char *const what[4], const char *arg_text,
                           change *c, char *why, size_t whylen) {
  char keys[4][64];
  const char *argv[8] = {"EVAL", script, "4"};
  size_t lens[8] = {4, strlen(script), 1};
  for (int i = 0; i < 4; i++) {
    key(keys[i], sizeof(keys[i]), what[i], &lens[3 + i]);
    argv[3 + i] = keys[i];
  }
  argv[7] = arg_text, lens[7] = strlen(arg_text);
  if (!srv_redis_ready(k->cmd) ||
      srv_redis_command(k->cmd, k->srv->cfg.redis_timeout_ms, on_changed, c, 8, argv, lens) != 0) {
    unreachable(k, why, whylen);
    free(c);
    return SRV_EBUSY;
  }
  return 0;
}

static int token_create(srv_server *s, const srv_token *record, srv_token_done_cb done, void *arg, char *why,
                        size_t whylen) {
  srv_cluster *k = s->cluster;
  static const char *const what[4] = {"tokens", "tokens:next", "tokens:log", "tokens:seq"};
  if (!k->tokens->synced) { /* this node's own ids are not in Redis' counter yet */
    if (srv_redis_ready(k->cmd))
      snprintf(why, whylen, "this node is still syncing its tokens with Redis: try again in a moment");
    else
      unreachable(k, why, whylen);
    return SRV_EBUSY;
  }
  change *c = calloc(1, sizeof(*c));
  char *text = record_text(record);
  if (!c || !text) {
    free(c);
    free(text);
    snprintf(why, whylen, "out of memory");
    return SRV_EINTERNAL;
  }
  *c = (change){k->tokens, 1, 0, done, arg};
  int rc = change_in_redis(k, LUA_CREATE, what, text, c, why, whylen);
  free(text);
  return rc;
}

static int token_revoke(srv_server *s, int64_t id, srv_token_done_cb done, void *arg, char *why, size_t whylen) {
  srv_cluster *k = s->cluster;
  static const char *const what[4] = {"tokens", "tokens:revoked", "tokens:log", "tokens:seq"};
  change *c = calloc(1, sizeof(*c));
  if (!c) {
    snprintf(why, whylen, "out of memory");
    return SRV_EINTERNAL;
  }
  *c = (change){k->tokens, 0, id, done, arg};
  char text[24];
  snprintf(text, sizeof(text), "%lld", (long long)id);
  return change_in_redis(k, LUA_REVOKE, what, text, c, why, whylen);
}

/* ---- start, tick, stop ---------------------------------------------------------------------------- */

int srv_cluster_tokens_start(srv_cluster *k) {
  srv_ctokens *t = calloc(1, sizeof(*t));
  if (!t) return SRV_EINTERNAL;
  t->k = k;
  k->tokens = t;
  if (srv_redis_create(k->srv->loop, &k->url, "tokens", on_state, t, &t->conn) != 0) return SRV_EINTERNAL;
  k->srv->token_create = token_create;
  k->srv->token_revoke = token_revoke;
  return 0;
}

void srv_cluster_tokens_tick(srv_cluster *k) {
  srv_ctokens *t = k->tokens;
  if (!t) return;
  if (!t->synced) sync_tokens(t);
  else read_log(t);
}

void srv_cluster_tokens_redis_lost(srv_cluster *k) {
  srv_ctokens *t = k->tokens;
  /* A Redis that went away without a word (no reset: a paused or black-holed one) is found by
   * the watchdog of the connection that waits longest, and this one may be in a long XREAD
   * BLOCK, believing itself in sync meanwhile: another connection's loss is taken as this
   * one's, and it syncs again when it is back. */
  if (t && t->conn && srv_redis_ready(t->conn)) srv_redis_drop(t->conn);
}

void srv_cluster_tokens_stop(srv_cluster *k) {
  srv_ctokens *t = k->tokens;
  k->srv->token_create = NULL;
  k->srv->token_revoke = NULL;
  if (!t || !t->conn) return;
  srv_redis_drop(t->conn); /* nothing to flush: a blocked XREAD is not waited for */
  srv_redis_destroy(t->conn);
  t->conn = NULL;
}

void srv_cluster_tokens_fini(srv_cluster *k) {
  free(k->tokens);
  k->tokens = NULL;
}

cJSON *srv_cluster_tokens_stats(const srv_cluster *k) {
  const srv_ctokens *t = k->tokens;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddBoolToObject(o, "synced", t && t->synced);
  cJSON_AddNumberToObject(o, "known", k->srv->access.count);
  cJSON_AddNumberToObject(o, "change", t ? (double)t->seq : 0);
  cJSON_AddNumberToObject(o, "syncs", t ? (double)t->syncs : 0);
  cJSON_AddNumberToObject(o, "gaps", t ? (double)t->gaps : 0);
  return o;
}
