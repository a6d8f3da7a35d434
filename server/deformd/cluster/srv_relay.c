/*
 * srv_relay.c — a relay's sessions: replicas of the sessions in the registry, loaded from their
 * snapshot in Redis and kept current by reading their streams, so that viewers can join a relay
 * exactly as they join a primary.
 *
 * A replica is a real srv_session. It is built on the pool from the session's mesh and the
 * snapshot (srv_session_create, srv_record_load_checkpoint: what a restart from the store
 * does), then each stream entry — an operation record (srv_publish.c) — goes through
 * srv_session_check() and srv_session_apply(), which encode the frames of every viewer class
 * this relay has and fan them out. So a relay serves protocol versions 1 and 2, every codec and
 * rate, SNAPSHOTs and catch-ups of slow viewers by the same code as a primary; what it keeps in
 * memory for late joiners and slow viewers is the replica's state and its per-block versions,
 * which answer "everything since version v" for any v (not only within a ring of frames).
 * Loading the snapshot is invariant 5's one exception (docs/architecture.md); every entry after
 * it goes through the one mutator.
 *
 * Reading: one XREAD BLOCK over every live replica's stream on a connection of its own (a
 * blocked connection answers nothing else); a replica added meanwhile unblocks it (CLIENT
 * UNBLOCK from the command connection). Entries continue the replica when their sequence is the
 * next one and their epoch is the replica's; anything else — a gap (a trimmed stream, a relay
 * that fell behind), another epoch (a restarted primary, a Redis that lost its data), a record
 * that does not apply, a version that differs — makes the relay load the snapshot again. The
 * new replica replaces the old one when it is ready; the old one's viewers get BYE RESYNC and
 * join again (their clients reconnect at once).
 *
 * Texture clips and the weights they show come the same way (srv_publish.c): each clip's
 * stored body and each TEXWEIGHTS frame is a stream entry among the operations, applied in
 * order (srv_texclip_follow_*), and a load reads them all from the session's "tex" hash.
 *
 * Status: when the owner's lease is gone, viewers keep the last state and get an ERROR
 * PRIMARY_LOST (a status: the connection stays open), then PRIMARY_BACK when it returns.
 *
 * On demand. A replica costs memory (13.8 MiB for the 41k-vertex demo head, docs/operations.md
 * §10), so a relay knows every session of the registry but loads one only when a viewer joins it
 * (or, while its primary is lost, a read asks for it), and drops it once it has had no viewer
 * for replica_idle_ms. This is sound with the catch-up rules because nothing a viewer relies on
 * outlives its connection: a join always starts from a SNAPSHOT, and a load always starts from a
 * snapshot of the primary's and applies the stream after it. The HELLOs and reads that asked
 * wait while the session loads and then catches up with what its stream holds (XRANGE), so the
 * first SNAPSHOT is as current as Redis is; they are answered with the reason if it does not
 * load within half the HELLO timeout.
 *
 * DOES NOT change a replica except by applying the primary's records; edits and JSON-RPC calls
 * on a relay go to the owner (srv_forward.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_frame.h"
#include "srv_conn.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_fanout.h"
#include "srv_record.h"
#include "srv_texclip.h"
#include "srv_rpc.h"
#include "srv_methods.h"
#include "srv_cluster.h"

#define XREAD_BLOCK_MS 2000
#define XREAD_COUNT 1000

/* A HELLO or a read waiting for its session to load. */
typedef struct relay_wait {
  struct relay_wait *next;
  srv_conn *conn;           /* a join's connection (referenced) */
  uint8_t *hello;           /* a join: its HELLO, run again once the session is loaded */
  size_t n;
  void (*again)(srv_conn *c, const uint8_t *hello, size_t n);
  srv_rpc_call *call;       /* a read: dispatched again once loaded */
  char *method;
  cJSON *params;
  uint64_t since;           /* uv_now() when it started waiting */
} relay_wait;

typedef struct srv_follow {
  struct srv_follow *next;
  srv_cluster *k;
  char *name;
  srv_session *s;            /* the replica in the server's table, or NULL before the first load */
  char epoch[24];
  uint64_t seq;              /* the last stream entry applied */
  int loading;               /* a load is in flight (Redis or the pool) */
  int want_load;             /* load (again) when possible */
  int polling;               /* its meta is being read */
  int catching;              /* loaded: reading what its stream holds after the snapshot */
  int lost;                  /* its primary's lease is gone (viewers were told) */
  int dead;                  /* no longer followed: freed when nothing refers to it */
  uint64_t missing_since;    /* uv_now() since the registry stopped listing it (0: listed) */
  uint64_t loaded_at;        /* uv_now() when a new epoch of it was loaded */
  uint64_t last_used;        /* uv_now() when it last had a viewer or served a read */
  uint64_t applied, reloads;
  relay_wait *waiters;       /* joins and reads waiting for it to load */
  char why[512];             /* why the last load did not succeed */
  char owner[SRV_NODE_ID_MAX];
} srv_follow;

static const char *LUA_LOAD =
    "local s = redis.call('HMGET', KEYS[2], 'epoch', 'seq', 'version', 'state')\n"
    "if not s[1] then return false end\n"
    "return {s[1], s[2], s[3], s[4], redis.call('GET', KEYS[3]) or '', redis.call('HGET', KEYS[1], 'owner') or '',\n"
    "        redis.call('HGET', KEYS[1], 'up') or 'y', redis.call('HGETALL', KEYS[4])}\n"; /* no 'up': Y-up */

static srv_follow *find_follow(srv_cluster *k, const char *name) {
  for (srv_follow *f = k->follows; f; f = f->next)
    if (!f->dead && strcmp(f->name, name) == 0) return f;
  return NULL;
}

int srv_relay_is_replica(const srv_cluster *k, const srv_session *s) {
  for (const srv_follow *f = k->follows; f; f = f->next)
    if (f->s == s) return 1;
  return 0;
}

static void tell(srv_session *s, uint16_t code, const char *msg) {
  for (srv_conn *c = srv_fanout_first(s); c; c = srv_fanout_next(c)) srv_conn_send_error(c, code, 0, msg);
}

static void lost_message(const srv_follow *f, char *buf, size_t len) {
  snprintf(buf, len, "the primary of session '%s' (%s) is lost: this is its last state, version %llu", f->name,
           f->owner[0] ? f->owner : "?", f->s ? (unsigned long long)f->s->version : 0ull);
}

/* The replica's viewers must join again: the history they followed was replaced. */
static void drop_replica(srv_cluster *k, srv_follow *f, uint16_t code, const char *why) {
  srv_session *old = f->s;
  if (!old) return;
  f->s = NULL;
  proto_buf b;
  proto_buf_init(&b);
  proto_encode_bye(&b, code, why);
  srv_frame *bye = srv_frame_from_buf(&b);
  for (srv_conn *c; (c = srv_fanout_first(old));) {
    srv_fanout_unsubscribe(c);
    srv_conn_finish(c, bye);
  }
  srv_frame_unref(bye);
  srv_session_close(k->srv, old, why);
}

static void set_lost(srv_follow *f, int lost);

static void free_follow(srv_follow *f) {
  free(f->name);
  free(f);
}

static void maybe_free(srv_cluster *k, srv_follow *f) {
  if (!f->dead || f->loading || f->polling || f->catching || f->waiters) return;
  srv_follow **pp = &k->follows;
  while (*pp && *pp != f) pp = &(*pp)->next;
  if (*pp) *pp = f->next;
  free_follow(f);
}

/* ---- joins and reads waiting for a load ------------------------------------------------------ */

static void free_wait(relay_wait *w) {
  if (w->call) srv_rpc_call_free(w->call);
  if (w->conn) srv_conn_unref(w->conn);
  free(w->hello);
  free(w->method);
  cJSON_Delete(w->params);
  free(w);
}

/* Answers one waiter: with `why` (it will not load: a join fails with `code`, a read with
 * `srv_code`), or, with why NULL, by running its HELLO or its call again on the loaded replica. */
static void answer(srv_cluster *k, relay_wait *w, const char *why, uint16_t code, int srv_code) {
  if (w->call) {
    srv_rpc_call *call = w->call;
    w->call = NULL;
    if (why) {
      srv_rpc_error(call, srv_code, "%s", why);
    } else {
      srv_methods_dispatch_here(k->srv, call, w->method, w->params);
    }
  } else if (!w->conn->closing) {
    if (why) {
      srv_conn_fail(w->conn, code, why);
    } else {
      k->resuming = w->conn;
      w->again(w->conn, w->hello, w->n);
      k->resuming = NULL;
    }
  }
  free_wait(w);
}

static void answer_all(srv_follow *f, const char *why, uint16_t code, int srv_code) {
  relay_wait *list = f->waiters;
  f->waiters = NULL; /* what an answer does (a join that fails, a connection that closes) finds none */
  if (!why) f->last_used = uv_now(f->k->srv->loop);
  while (list) {
    relay_wait *w = list;
    list = w->next;
    answer(f->k, w, why, code, srv_code);
  }
}

/* The longest a join or a read waits for a load: half the HELLO timeout, so that a viewer hears
 * why before the server closes a connection that has not finished its HELLO. */
static uint64_t wait_limit(const srv_cluster *k) {
  uint64_t ms = k->srv->cfg.hello_timeout_ms / 2;
  return ms < 1000 ? 1000 : ms;
}

static void expire_waiters(srv_follow *f, uint64_t now) {
  srv_cluster *k = f->k;
  for (relay_wait **pp = &f->waiters; *pp;) {
    relay_wait *w = *pp;
    if (now - w->since < wait_limit(k)) {
      pp = &w->next;
      continue;
    }
    *pp = w->next;
    char why[PROTO_MAX_NAME + 640];
    snprintf(why, sizeof(why), "session '%s' did not load on this relay within %llu ms (%s): try again", f->name,
             (unsigned long long)wait_limit(k), f->why[0] ? f->why : "Redis did not answer");
    answer(k, w, why, PROTO_ERR_OVERLOADED, SRV_EBUSY);
  }
}

static void start_load(srv_follow *f);

/* Someone asked for the session: load it unless that is under way. */
static void want(srv_follow *f, relay_wait *w) {
  relay_wait **tail = &f->waiters;
  while (*tail) tail = &(*tail)->next;
  w->since = uv_now(f->k->srv->loop);
  *tail = w;
  if (!f->s && !f->loading) {
    f->want_load = 1;
    start_load(f);
  }
}

int srv_relay_join(srv_cluster *k, srv_conn *c, const char *name, const uint8_t *hello, size_t n,
                   void (*again)(srv_conn *c, const uint8_t *hello, size_t n)) {
  srv_follow *f = find_follow(k, name);
  if (!k->relay || c == k->resuming || !f) return 0;
  for (srv_follow *g = k->follows; g; g = g->next)
    for (relay_wait *w = g->waiters; w; w = w->next)
      if (w->conn == c) {
        srv_conn_fail(c, PROTO_ERR_MALFORMED, "a second HELLO before the first was answered");
        return 1;
      }
  relay_wait *w = calloc(1, sizeof(*w));
  if (!w || !(w->hello = malloc(n ? n : 1))) {
    free(w);
    srv_conn_fail(c, PROTO_ERR_OVERLOADED, "out of memory");
    return 1;
  }
  memcpy(w->hello, hello, n);
  w->n = n;
  w->again = again;
  w->conn = c;
  srv_conn_ref(c);
  srv_log(SRV_LOG_DEBUG, "relay: connection %u waits for session %s to load", c->id, name);
  want(f, w);
  return 1;
}

int srv_relay_read(srv_cluster *k, srv_rpc_call *call, const char *method, const cJSON *params, const char *name) {
  srv_follow *f = find_follow(k, name);
  if (!f) return -1;
  if (f->s && !f->catching && !f->loading) {
    f->last_used = uv_now(k->srv->loop);
    return 0;
  }
  relay_wait *w = calloc(1, sizeof(*w));
  if (!w || !(w->method = strdup(method)) || !(w->params = cJSON_Duplicate(params, 1))) {
    if (w) free(w->method);
    free(w);
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return 1;
  }
  w->call = call;
  want(f, w);
  return 1;
}

void srv_relay_conn_closed(srv_cluster *k, srv_conn *c) {
  for (srv_follow *f = k->follows; f; f = f->next)
    for (relay_wait **pp = &f->waiters; *pp;) {
      relay_wait *w = *pp;
      if (w->conn == c || (w->call && w->call->conn == c)) {
        *pp = w->next;
        free_wait(w); /* nobody to answer */
      } else {
        pp = &w->next;
      }
    }
}

void srv_relay_stop(srv_cluster *k) {
  for (srv_follow *f = k->follows; f; f = f->next)
    answer_all(f, "the server is shutting down", PROTO_ERR_SHUTDOWN, SRV_ESHUTDOWN);
}

/* A replica that has had no viewer (nor a connection joining it, nor a read) for
 * replica_idle_ms is dropped; the next join loads it again. */
static void drop_idle(srv_follow *f, uint64_t now) {
  srv_cluster *k = f->k;
  srv_session *s = f->s;
  uint32_t idle = k->srv->cfg.replica_idle_ms;
  if (!s || !idle || f->loading || f->catching || f->waiters) return;
  int busy = s->subscriber_count > 0;
  for (srv_conn *c = k->srv->conns; c && !busy; c = c->next) busy = srv_fanout_session(c) == s;
  if (busy || !f->last_used) f->last_used = now;
  if (now - f->last_used < idle) return;
  srv_log(SRV_LOG_INFO, "relay: session %s has had no viewer for %u ms: its replica is dropped until one joins", f->name,
          idle);
  f->s = NULL;
  k->stats.replicas_dropped++;
  srv_session_close(k->srv, s, "no viewer");
}

/* ---- reading the streams ------------------------------------------------------------------------ */

static void read_streams(srv_cluster *k);

static void on_unblocked(srv_redis *r, redisReply *reply, void *arg) { (void)r, (void)reply, (void)arg; }

/* A replica became live while an XREAD waits: make it return, so the next one includes it. */
static void unblock(srv_cluster *k) {
  if (!k->reading || !k->block_client_id) return;
  char id[24];
  snprintf(id, sizeof(id), "%llu", (unsigned long long)k->block_client_id);
  const char *argv[] = {"CLIENT", "UNBLOCK", id};
  size_t lens[] = {6, 7, strlen(id)};
  srv_redis_command(k->cmd, k->srv->cfg.redis_timeout_ms, on_unblocked, NULL, 3, argv, lens);
}

static void reload(srv_follow *f, const char *why) {
  srv_log(SRV_LOG_INFO, "relay: session %s loads its snapshot again: %s", f->name, why);
  f->want_load = 1;
  start_load(f);
}

static const redisReply *field(const redisReply *fields, const char *name) {
  if (!fields || fields->type != REDIS_REPLY_ARRAY) return NULL;
  for (size_t i = 0; i + 1 < fields->elements; i += 2)
    if (fields->element[i]->type == REDIS_REPLY_STRING && strcmp(fields->element[i]->str, name) == 0)
      return fields->element[i + 1];
  return NULL;
}

/* A texture entry (srv_publish.c's LUA_TEX): a clip's body or the TEXWEIGHTS frame shown now. */
static int apply_tex(srv_session *s, const redisReply *fields, const redisReply *t, char *err, size_t errlen) {
  const redisReply *n = field(fields, "n"), *b = field(fields, "b");
  if (!n || !b || n->type != REDIS_REPLY_STRING || b->type != REDIS_REPLY_STRING) {
    snprintf(err, errlen, "a texture entry without its fields");
    return SRV_EIO;
  }
  if (strcmp(t->str, "c") == 0) return srv_texclip_follow_clip(s, n->str, (const uint8_t *)b->str, b->len, err, errlen);
  if (strcmp(t->str, "w") == 0) return srv_texclip_follow_weights(s, (const uint8_t *)b->str, b->len, 1, err, errlen);
  snprintf(err, errlen, "a texture entry of kind '%.8s'", t->str);
  return SRV_EIO;
}

/* One stream entry: the next operation of the replica (or texture entry), or a reason to reload. */
static int apply_entry(srv_follow *f, const redisReply *entry) {
  srv_cluster *k = f->k;
  if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 || entry->element[0]->type != REDIS_REPLY_STRING)
    return 0;
  uint64_t seq = strtoull(entry->element[0]->str, NULL, 10);
  if (seq <= f->seq) return 0; /* read twice (a load and a read crossed) */
  const redisReply *e = field(entry->element[1], "e"), *v = field(entry->element[1], "v"),
                   *r = field(entry->element[1], "r"), *t = field(entry->element[1], "t");
  if (t && t->type == REDIS_REPLY_STRING) r = t;
  if (!e || !v || !r || e->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING || r->type != REDIS_REPLY_STRING) {
    reload(f, "a stream entry without its fields");
    return -1;
  }
  if (strcmp(e->str, f->epoch) != 0) {
    reload(f, "a new epoch");
    return -1;
  }
  if (seq != f->seq + 1) {
    k->stats.gaps++;
    char why[96];
    snprintf(why, sizeof(why), "entries %llu to %llu are gone from the stream", (unsigned long long)f->seq + 1,
             (unsigned long long)seq - 1);
    reload(f, why);
    return -1;
  }
  srv_session *s = f->s;
  uint64_t version = strtoull(v->str, NULL, 10);
  srv_record_op rec;
  char err[256];
  int rc = r == t ? apply_tex(s, entry->element[1], t, err, sizeof(err))
                  : srv_record_decode_op(s, (const uint8_t *)r->str, r->len, &rec, err, sizeof(err));
  if (rc == 0 && r != t) {
    rc = srv_session_check(s, &rec.op, err, sizeof(err));
    if (rc == 0 && srv_session_apply(k->srv, s, &rec.op) != version) {
      snprintf(err, sizeof(err), "version %llu applies as %llu", (unsigned long long)version,
               (unsigned long long)s->version);
      rc = SRV_EIO;
    }
    srv_record_op_fini(&rec);
  }
  if (rc) {
    reload(f, err);
    return -1;
  }
  f->seq = seq;
  f->applied++;
  k->stats.applied++;
  return 0;
}

static srv_follow *follow_of_key(srv_cluster *k, const char *key, size_t len) {
  char buf[PROTO_MAX_NAME + 64];
  for (srv_follow *f = k->follows; f; f = f->next) {
    if (f->dead) continue;
    size_t n = srv_cluster_key(buf, sizeof(buf), f->name, "stream");
    if (n == len && memcmp(buf, key, n) == 0) return f;
  }
  return NULL;
}

static void on_read(srv_redis *r, redisReply *reply, void *arg) {
  srv_cluster *k = arg;
  (void)r;
  k->reading = 0;
  if (!reply) return; /* the connection went away: read again once it is back */
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < reply->elements; i++) {
      const redisReply *st = reply->element[i];
      if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 || st->element[0]->type != REDIS_REPLY_STRING) continue;
      srv_follow *f = follow_of_key(k, st->element[0]->str, st->element[0]->len);
      if (!f || !f->s || f->loading) continue;
      const redisReply *entries = st->element[1];
      for (size_t j = 0; entries->type == REDIS_REPLY_ARRAY && j < entries->elements; j++)
        if (apply_entry(f, entries->element[j]) != 0) break;
    }
  } else if (reply->type == REDIS_REPLY_ERROR) {
    srv_log(SRV_LOG_WARN, "relay: XREAD refused: %s", reply->str);
  }
  read_streams(k);
}

static void read_streams(srv_cluster *k) {
  if (k->reading || k->stopping || !srv_redis_ready(k->block)) return;
  uint32_t n = 0;
  for (srv_follow *f = k->follows; f; f = f->next) n += !f->dead && f->s && !f->loading;
  if (n == 0) return;
  size_t cap = 6 + 2 * (size_t)n;
  const char **argv = malloc(sizeof(char *) * cap);
  size_t *lens = malloc(sizeof(size_t) * cap);
  char (*keys)[PROTO_MAX_NAME + 64] = malloc(sizeof(*keys) * n);
  char (*ids)[32] = malloc(sizeof(*ids) * n);
  char block[16], count[16];
  if (!argv || !lens || !keys || !ids) goto out;
  snprintf(block, sizeof(block), "%d", XREAD_BLOCK_MS);
  snprintf(count, sizeof(count), "%d", XREAD_COUNT);
  size_t a = 0;
  argv[a] = "XREAD", lens[a++] = 5;
  argv[a] = "COUNT", lens[a++] = 5;
  argv[a] = count, lens[a++] = strlen(count);
  argv[a] = "BLOCK", lens[a++] = 5;
  argv[a] = block, lens[a++] = strlen(block);
  argv[a] = "STREAMS", lens[a++] = 7;
  uint32_t i = 0;
  for (srv_follow *f = k->follows; f; f = f->next)
    if (!f->dead && f->s && !f->loading) {
      lens[a] = srv_cluster_key(keys[i], sizeof(keys[i]), f->name, "stream");
      argv[a++] = keys[i++];
    }
  i = 0;
  for (srv_follow *f = k->follows; f; f = f->next)
    if (!f->dead && f->s && !f->loading) {
      snprintf(ids[i], sizeof(ids[i]), "%llu-0", (unsigned long long)f->seq);
      lens[a] = strlen(ids[i]);
      argv[a++] = ids[i++];
    }
  if (srv_redis_command(k->block, XREAD_BLOCK_MS + k->srv->cfg.redis_timeout_ms, on_read, k, (int)a, argv, lens) == 0)
    k->reading = 1;
out:
  free(argv);
  free(lens);
  free(keys);
  free(ids);
}

static void on_client_id(srv_redis *r, redisReply *reply, void *arg) {
  srv_cluster *k = arg;
  (void)r;
  if (reply && reply->type == REDIS_REPLY_INTEGER) k->block_client_id = (uint64_t)reply->integer;
}

void srv_relay_redis_state(srv_cluster *k, srv_redis *r, int ready) {
  if (r != k->block) return;
  k->reading = 0;
  k->block_client_id = 0;
  if (!ready) return;
  const char *argv[] = {"CLIENT", "ID"};
  size_t lens[] = {6, 2};
  srv_redis_command(k->block, k->srv->cfg.redis_timeout_ms, on_client_id, k, 2, argv, lens);
  read_streams(k);
}

/* ---- loading a snapshot ------------------------------------------------------------------------- */

/* What the stream holds after the snapshot, applied before the joins and reads that asked for
 * the session are answered (XREAD may bring some of it too: entries apply once). */
static void on_caught_up(srv_redis *r, redisReply *reply, void *arg) {
  srv_follow *f = arg;
  (void)r;
  f->catching = 0;
  if (!f->dead && f->s && !f->loading && reply && reply->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i < reply->elements; i++)
      if (apply_entry(f, reply->element[i]) != 0) break;
  if (!f->dead && f->s && !f->loading) answer_all(f, NULL, 0, 0); /* else after the reload */
  maybe_free(f->k, f);
}

static void catch_up(srv_follow *f) {
  srv_cluster *k = f->k;
  char key[PROTO_MAX_NAME + 64], from[32], count[16];
  snprintf(from, sizeof(from), "%llu-0", (unsigned long long)f->seq + 1);
  snprintf(count, sizeof(count), "%d", XREAD_COUNT);
  const char *argv[] = {"XRANGE", key, from, "+", "COUNT", count};
  size_t lens[] = {6, srv_cluster_key(key, sizeof(key), f->name, "stream"), strlen(from), 1, 5, strlen(count)};
  if (srv_redis_command(k->cmd, k->srv->cfg.redis_timeout_ms, on_caught_up, f, 6, argv, lens) == 0) f->catching = 1;
  else answer_all(f, NULL, 0, 0);
}

typedef struct load_job {
  uv_work_t req;
  srv_follow *f;
  char epoch[24];
  uint64_t seq, version;
  uint8_t *state, *blob;
  size_t state_len, blob_len;
  redisReply *tex;      /* the "tex" hash's HGETALL (a reply taken from hiredis, freed here) */
  uint32_t max_vertices;
  char up;              /* the primary's up axis for the session */
  srv_session *s;
  int rc;
  char err[512];
} load_job;

static void load_work(uv_work_t *req) {
  load_job *j = req->data;
  mesh *m = NULL;
  char why[MESH_ERR_LEN];
  if (mesh_blob_read(j->blob, j->blob_len, j->max_vertices, &m, why, sizeof(why)) != 0) {
    snprintf(j->err, sizeof(j->err), "its mesh does not read: %s", why);
    j->rc = SRV_EIO;
    return;
  }
  if (srv_session_create(j->f->name, m, &j->s, why, sizeof(why)) != 0) {
    snprintf(j->err, sizeof(j->err), "%s", why);
    j->rc = SRV_EIO;
    return;
  }
  j->s->base_targets = j->s->mesh->target_count;
  j->s->up = j->up;
  j->rc = srv_record_load_checkpoint(j->s, j->state, j->state_len, j->err, sizeof(j->err));
  if (j->rc == 0 && j->s->version != j->version) {
    snprintf(j->err, sizeof(j->err), "its snapshot says version %llu and holds %llu", (unsigned long long)j->version,
             (unsigned long long)j->s->version);
    j->rc = SRV_EIO;
  }
  /* Its texture clips and the weights shown (srv_publish.c's "tex" hash: "c:NAME", "w:"). */
  for (size_t i = 0; j->rc == 0 && j->tex && i + 1 < j->tex->elements; i += 2) {
    const redisReply *key = j->tex->element[i], *val = j->tex->element[i + 1];
    if (key->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING) continue;
    if (strncmp(key->str, "c:", 2) == 0)
      j->rc = srv_texclip_load(j->s, key->str + 2, (const uint8_t *)val->str, val->len, j->err, sizeof(j->err));
    else if (strcmp(key->str, "w:") == 0)
      j->rc = srv_texclip_follow_weights(j->s, (const uint8_t *)val->str, val->len, 0, j->err, sizeof(j->err));
  }
}

static void load_done(uv_work_t *req, int status) {
  load_job *j = req->data;
  srv_follow *f = j->f;
  srv_cluster *k = f->k;
  k->srv->pending_jobs--;
  f->loading = 0;
  if (status || j->rc || f->dead || k->stopping) {
    if (!f->dead && !k->stopping) {
      srv_log(SRV_LOG_WARN, "relay: session %s does not load: %s", f->name, status ? "cancelled" : j->err);
      snprintf(f->why, sizeof(f->why), "%s", status ? "cancelled" : j->err);
      f->want_load = 1; /* tried again by the tick */
    }
    srv_session_unref(j->s);
  } else {
    int again = f->s != NULL;
    /* A new epoch comes from a live primary: viewers hear it is back before they are asked to
     * join again, whether or not the registry's survey has seen its lease yet. (Loading the
     * epoch it had, on demand, says nothing about the primary.) */
    int fresh = f->epoch[0] && strcmp(f->epoch, j->epoch) != 0;
    if (fresh && f->lost) set_lost(f, 0);
    if (again) {
      f->reloads++;
      k->stats.reloads++;
      drop_replica(k, f, PROTO_ERR_RESYNC, "the session's history was replaced (a new epoch): join again");
    }
    snprintf(f->epoch, sizeof(f->epoch), "%s", j->epoch);
    if (fresh) f->loaded_at = uv_now(k->srv->loop);
    f->seq = j->seq;
    f->s = j->s;
    f->why[0] = '\0';
    srv_session_add(k->srv, j->s);
    srv_log(SRV_LOG_INFO, "relay: session %s %sloaded at version %llu (epoch %s, stream sequence %llu)", f->name,
            again ? "re" : "", (unsigned long long)j->version, f->epoch, (unsigned long long)f->seq);
    unblock(k);
    read_streams(k);
    catch_up(f);
  }
  free(j->state);
  free(j->blob);
  if (j->tex) freeReplyObject(j->tex);
  free(j);
  maybe_free(k, f);
}

static uint8_t *dup_bytes(const redisReply *r, size_t *len) {
  *len = r->len;
  uint8_t *p = malloc(r->len ? r->len : 1);
  if (p && r->len) memcpy(p, r->str, r->len);
  return p;
}

static void on_loaded(srv_redis *r, redisReply *reply, void *arg) {
  srv_follow *f = arg;
  srv_cluster *k = f->k;
  (void)r;
  if (f->dead || k->stopping || !reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 8) {
    if (reply && reply->type == REDIS_REPLY_ERROR) srv_log(SRV_LOG_WARN, "relay: loading %s: %s", f->name, reply->str);
    snprintf(f->why, sizeof(f->why), "%s", !reply ? "Redis went away" : reply->type == REDIS_REPLY_ERROR ? reply->str
                                                                        : "its primary has published no snapshot yet");
    f->loading = 0;
    if (!f->dead) f->want_load = 1; /* no snapshot yet, or Redis went away: the tick tries again */
    maybe_free(k, f);
    return;
  }
  for (int i = 0; i < 7; i++)
    if (reply->element[i]->type != REDIS_REPLY_STRING) {
      f->loading = 0;
      f->want_load = 1;
      return;
    }
  if (reply->element[7]->type != REDIS_REPLY_ARRAY) {
    f->loading = 0;
    f->want_load = 1;
    return;
  }
  if (reply->element[4]->len == 0) { /* no mesh yet */
    snprintf(f->why, sizeof(f->why), "its primary has published no mesh yet");
    f->loading = 0;
    f->want_load = 1;
    return;
  }
  load_job *j = calloc(1, sizeof(*j));
  if (!j) {
    f->loading = 0;
    f->want_load = 1;
    return;
  }
  j->f = f;
  snprintf(j->epoch, sizeof(j->epoch), "%s", reply->element[0]->str);
  j->seq = strtoull(reply->element[1]->str, NULL, 10);
  j->version = strtoull(reply->element[2]->str, NULL, 10);
  j->state = dup_bytes(reply->element[3], &j->state_len);
  j->blob = dup_bytes(reply->element[4], &j->blob_len);
  snprintf(f->owner, sizeof(f->owner), "%s", reply->element[5]->str);
  j->up = reply->element[6]->str[0] == 'z' ? 'z' : 'y';
  j->tex = reply->element[7]; /* taken: the pool reads it, load_done frees it */
  reply->element[7] = NULL;
  j->max_vertices = k->srv->cfg.max_vertices;
  j->req.data = j;
  if (!j->state || !j->blob || uv_queue_work(k->srv->loop, &j->req, load_work, load_done) != 0) {
    free(j->state);
    free(j->blob);
    free(j);
    f->loading = 0;
    f->want_load = 1;
    return;
  }
  k->srv->pending_jobs++;
}

static void start_load(srv_follow *f) {
  srv_cluster *k = f->k;
  if (f->loading || f->dead || k->stopping || !srv_redis_ready(k->cmd)) return;
  char keys[4][PROTO_MAX_NAME + 64];
  const char *argv[7];
  size_t lens[7];
  argv[0] = "EVAL", lens[0] = 4;
  argv[1] = LUA_LOAD, lens[1] = strlen(LUA_LOAD);
  argv[2] = "4", lens[2] = 1;
  static const char *const what[] = {"meta", "snap", "mesh", "tex"};
  for (int i = 0; i < 4; i++) {
    lens[3 + i] = srv_cluster_key(keys[i], sizeof(keys[i]), f->name, what[i]);
    argv[3 + i] = keys[i];
  }
  if (srv_redis_command(k->cmd, k->srv->cfg.redis_timeout_ms * 4, on_loaded, f, 7, argv, lens) == 0) {
    f->loading = 1;
    f->want_load = 0;
  }
}

/* ---- the registry and the owners' leases ------------------------------------------------------- */

static void set_lost(srv_follow *f, int lost) {
  if (f->lost == lost) return;
  f->lost = lost;
  char msg[512];
  if (lost) {
    lost_message(f, msg, sizeof(msg));
    srv_log(SRV_LOG_WARN, "relay: %s", msg);
  } else {
    snprintf(msg, sizeof(msg), "the primary of session '%s' (%s) is back", f->name, f->owner);
    srv_log(SRV_LOG_INFO, "relay: %s", msg);
  }
  if (f->s) tell(f->s, lost ? PROTO_ERR_PRIMARY_LOST : PROTO_ERR_PRIMARY_BACK, msg);
}

void srv_relay_sync(srv_cluster *k) {
  uint64_t now = uv_now(k->srv->loop);
  for (uint32_t i = 0; i < k->owner_count; i++) {
    const srv_owner *o = &k->owners[i];
    srv_follow *f = find_follow(k, o->session);
    if (!f) {
      f = calloc(1, sizeof(*f));
      if (!f || !(f->name = strdup(o->session))) {
        free(f);
        continue;
      }
      f->k = k;
      f->next = k->follows; /* loaded when a viewer asks for it */
      k->follows = f;
      srv_log(SRV_LOG_INFO, "relay: following session %s (owner %s)", f->name, o->node);
    }
    f->missing_since = 0;
    snprintf(f->owner, sizeof(f->owner), "%s", o->node);
    /* Lost: no lease, and no epoch loaded within a lease (a survey older than a new epoch
     * would otherwise say "lost" again right after the primary came back). */
    const srv_node *n = srv_cluster_node(k, o->node);
    set_lost(f, (!n || !n->alive) && now - f->loaded_at > k->srv->cfg.lease_ms);
    if (f->want_load) start_load(f);
  }
  /* Gone from the registry (without a tombstone, which closes at once) for two leases and
   * two reconnection backoffs while Redis answers — a Redis that restarted empty is refilled
   * by each primary as soon as it reconnects: the replica closes. */
  for (srv_follow *f = k->follows; f; f = f->next) {
    if (f->dead) continue;
    int listed = 0;
    for (uint32_t i = 0; i < k->owner_count && !listed; i++) listed = strcmp(k->owners[i].session, f->name) == 0;
    if (listed) continue;
    if (!f->missing_since) f->missing_since = now;
    if (now - f->missing_since < 2 * (uint64_t)k->srv->cfg.lease_ms + 10000) continue;
    srv_log(SRV_LOG_INFO, "relay: session %s is no longer in the registry: closed", f->name);
    answer_all(f, "the session was closed on its primary", PROTO_ERR_SESSION_CLOSED, SRV_ENOSESSION);
    if (f->s) {
      srv_session *s = f->s;
      f->s = NULL;
      srv_session_close(k->srv, s, "the session was closed on its primary");
    }
    f->dead = 1;
  }
  for (srv_follow *f = k->follows, *next; f; f = next) {
    next = f->next;
    maybe_free(k, f);
  }
}

/* A session's meta: a new epoch (its stream went quiet after one: a restarted primary with
 * nothing new to say) or a tombstone (closed on its primary). */
static void on_meta(srv_redis *r, redisReply *reply, void *arg) {
  srv_follow *f = arg;
  (void)r;
  f->polling = 0;
  if (!f->dead && reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 && f->s && !f->loading) {
    const redisReply *e = reply->element[0], *closed = reply->element[2];
    if (closed->type == REDIS_REPLY_STRING && strcmp(closed->str, "1") == 0) {
      srv_log(SRV_LOG_INFO, "relay: session %s was closed on its primary", f->name);
      answer_all(f, "the session was closed on its primary", PROTO_ERR_SESSION_CLOSED, SRV_ENOSESSION);
      srv_session *s = f->s;
      f->s = NULL;
      srv_session_close(f->k->srv, s, "the session was closed on its primary");
      f->dead = 1;
    } else if (e->type == REDIS_REPLY_STRING && strcmp(e->str, f->epoch) != 0) {
      reload(f, "a new epoch");
    }
  }
  maybe_free(f->k, f);
}

void srv_relay_tick(srv_cluster *k) {
  uint64_t now = uv_now(k->srv->loop);
  for (srv_follow *f = k->follows; f; f = f->next) {
    if (f->dead) continue;
    expire_waiters(f, now);
    if (f->want_load && !f->s && !f->waiters) f->want_load = 0; /* nobody waits for it any more */
    drop_idle(f, now);
  }
  if (!srv_redis_ready(k->cmd)) return;
  for (srv_follow *f = k->follows; f; f = f->next) {
    if (f->dead) continue;
    if (f->want_load) {
      start_load(f);
      continue;
    }
    if (f->polling || !f->s) continue;
    char key[PROTO_MAX_NAME + 64];
    const char *argv[] = {"HMGET", key, "epoch", "seq", "closed"};
    size_t lens[] = {5, srv_cluster_key(key, sizeof(key), f->name, "meta"), 5, 3, 6};
    if (srv_redis_command(k->cmd, k->srv->cfg.redis_timeout_ms, on_meta, f, 5, argv, lens) == 0) f->polling = 1;
  }
  read_streams(k);
}

void srv_relay_joined(srv_cluster *k, srv_conn *c) {
  for (srv_follow *f = k->follows; f; f = f->next)
    if (f->s == srv_fanout_session(c) && f->lost) {
      char msg[512];
      lost_message(f, msg, sizeof(msg));
      srv_conn_send_error(c, PROTO_ERR_PRIMARY_LOST, 0, msg);
    }
}

void srv_relay_fini(srv_cluster *k) {
  while (k->follows) {
    srv_follow *f = k->follows;
    k->follows = f->next;
    while (f->waiters) { /* answered at stop; none are left */
      relay_wait *w = f->waiters;
      f->waiters = w->next;
      free_wait(w);
    }
    free_follow(f);
  }
}

cJSON *srv_relay_stats(const srv_cluster *k) {
  cJSON *a = cJSON_CreateArray();
  for (const srv_follow *f = k->follows; f; f = f->next) {
    if (f->dead) continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "session", f->name);
    cJSON_AddStringToObject(o, "primary", f->owner);
    cJSON_AddBoolToObject(o, "primary_lost", f->lost);
    cJSON_AddStringToObject(o, "epoch", f->epoch);
    cJSON_AddNumberToObject(o, "stream_sequence", (double)f->seq);
    cJSON_AddNumberToObject(o, "version", f->s ? (double)f->s->version : 0);
    cJSON_AddNumberToObject(o, "viewers", f->s ? f->s->subscriber_count : 0);
    cJSON_AddNumberToObject(o, "frames_applied", (double)f->applied);
    cJSON_AddNumberToObject(o, "reloads", (double)f->reloads);
    cJSON_AddBoolToObject(o, "loaded", f->s != NULL);
    uint32_t waiting = 0;
    for (const relay_wait *w = f->waiters; w; w = w->next) waiting++;
    cJSON_AddNumberToObject(o, "waiting", waiting);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}
