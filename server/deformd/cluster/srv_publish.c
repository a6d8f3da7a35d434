/*
 * srv_publish.c — a primary's side of the relays: every applied operation of each session goes
 * once to that session's Redis Stream, and every K frames a snapshot of its state, tagged with
 * the stream sequence and the epoch it belongs to.
 *
 * What goes into the stream is the operation record (srv_record.c, the bytes the SQLite log
 * keeps), not the frames viewers get: a primary encodes its frames per viewer class (protocol
 * version 1, version 2 lossless or on a grid, each at full rate or paced), and a relay has
 * classes of its own. A relay applies each record to its replica of the session through the
 * same srv_session_apply(), so its viewers get exactly the bytes a primary would send them, in
 * every class, and catch-ups and late joins work as on a primary (docs/operations.md).
 *
 * Epochs. A relay may trust the stream only as a continuation of the snapshot it loaded. A new
 * epoch — a random-free, per-primary timestamp in microseconds — starts whenever that may not
 * hold: when a session is first published, whenever this primary (re)connects to Redis (what
 * it sent before may or may not have landed), after any refused XADD, and after a restart (a
 * durable primary resumes from its store, whose last versions may differ from what it had
 * published). Each epoch begins with the session's mesh and a snapshot; relays that see a new
 * epoch reload.
 *
 * Lua, so each step is one atomic command (as Centrifugo does): publish checks the epoch and
 * owner, bumps the sequence and XADDs with a length cap; snapshot checks the epoch and stores
 * the state at the sequence Redis has now — the one of the last XADD, since commands on one
 * connection run in order.
 *
 * Ownership. A new epoch is refused while another node whose lease is alive owns the session
 * (it claimed the name while this node was lost, srv_registry.c): this node then gives its copy
 * up rather than take the session back, so two primaries never fight over one name (each
 * refused XADD would otherwise start an epoch that takes the owner back).
 *
 * Texture clips (srv_publish_texclip) go the same way: each clip's stored body once, and every
 * TEXWEIGHTS frame the player shows, as stream entries between the operations (so a relay's
 * viewers get them in the primary's order, on its clip clock) and in the session's "tex" hash
 * (for a relay that loads the snapshot later); a new epoch sends them all again.
 *
 * DOES NOT read the stream (srv_relay.c) or decide which node owns what (srv_registry.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "srv_log.h"
#include "srv_config.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_record.h"
#include "srv_frame.h"
#include "srv_texclip.h"
#include "srv_cluster.h"

typedef struct srv_pub {
  struct srv_pub *next;
  srv_cluster *k;
  srv_session *s;           /* referenced */
  char epoch[24];           /* "" while none is live */
  int need_epoch;           /* start a new epoch as soon as Redis is there */
  int starting;             /* the mesh blob is being encoded on the pool */
  int dead;                 /* the session closed */
  uint8_t *blob;            /* the session's mesh with its imported targets (kept: it never changes) */
  size_t blob_len;
  uint32_t since_snapshot;
  uint64_t published;
} srv_pub;

/* A new epoch: refused while another live node owns the session (SRV_LUA_OWNED_CHECK), so a
 * primary never takes a session from another that holds it; else the owner, the mesh and a
 * snapshot, the sequence carried on. ARGV: node, session, lease prefix, epoch, version, state,
 * mesh, up axis ("y" or "z": the session's, which relays give their viewers). */
static const char *LUA_EPOCH =
    SRV_LUA_OWNED_CHECK
    "redis.call('HSET', KEYS[1], 'epoch', ARGV[4], 'owner', ARGV[1], 'version', ARGV[5], 'up', ARGV[8])\n"
    "redis.call('HDEL', KEYS[1], 'closed')\n"
    "redis.call('PERSIST', KEYS[1])\n"
    "local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0') or 0\n"
    "local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)\n"
    "if last[1] then\n"
    "  local top = tonumber(string.match(last[1][1], '^(%d+)')) or 0\n"
    "  if top > seq then seq = top end\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'seq', seq)\n"
    "redis.call('SET', KEYS[4], ARGV[7])\n"
    "redis.call('DEL', KEYS[3], KEYS[6])\n"
    "redis.call('HSET', KEYS[3], 'epoch', ARGV[4], 'seq', seq, 'version', ARGV[5], 'state', ARGV[6])\n"
    "redis.call('HSET', KEYS[5], ARGV[2], ARGV[1])\n"
    "return seq\n";

static const char *LUA_PUBLISH =
    "local m = redis.call('HMGET', KEYS[1], 'epoch', 'owner')\n"
    "if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] then\n"
    "  return redis.error_reply('EPOCH the session has another epoch or owner')\n"
    "end\n"
    "local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)\n"
    "redis.call('HSET', KEYS[1], 'version', ARGV[3])\n"
    "redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], seq .. '-0', 'e', ARGV[1], 'v', ARGV[3], 'r', ARGV[4])\n"
    "return seq\n";

/* A texture clip's stored body (kind "c", its name) or the TEXWEIGHTS frame shown now (kind "w",
 * no name): kept in the session's "tex" hash for relays that load later (field KIND:NAME, so a
 * clip once, the weights the latest) and added to the stream, in order with the operations,
 * for those that follow it. Like an operation it bumps the sequence, not the version. ARGV:
 * epoch, node, version, kind, name, bytes, stream length cap. */
static const char *LUA_TEX =
    "local m = redis.call('HMGET', KEYS[1], 'epoch', 'owner')\n"
    "if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] then\n"
    "  return redis.error_reply('EPOCH the session has another epoch or owner')\n"
    "end\n"
    "redis.call('HSET', KEYS[3], ARGV[4] .. ':' .. ARGV[5], ARGV[6])\n"
    "local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)\n"
    "redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], seq .. '-0', 'e', ARGV[1], 'v', ARGV[3], 't', ARGV[4],\n"
    "           'n', ARGV[5], 'b', ARGV[6])\n"
    "return seq\n";

static const char *LUA_SNAPSHOT =
    "local m = redis.call('HMGET', KEYS[1], 'epoch', 'seq')\n"
    "if m[1] ~= ARGV[1] then return redis.error_reply('EPOCH the session has another epoch') end\n"
    "redis.call('HSET', KEYS[2], 'epoch', ARGV[1], 'seq', m[2], 'version', ARGV[2], 'state', ARGV[3])\n"
    "return tonumber(m[2])\n";

/* A closed session leaves a tombstone for a minute, so relays close their replica at once. */
static const char *LUA_CLOSE =
    "local owner = redis.call('HGET', KEYS[1], 'owner')\n"
    "if owner and owner ~= ARGV[1] then return 0 end\n"
    "redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[6])\n"
    "redis.call('HSET', KEYS[1], 'closed', '1')\n"
    "redis.call('PEXPIRE', KEYS[1], 60000)\n"
    "if redis.call('HGET', KEYS[5], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[5], ARGV[2]) end\n"
    "return 1\n";

static uint32_t maxlen(const srv_cluster *k) {
  const srv_config *c = &k->srv->cfg;
  uint32_t n = c->stream_maxlen ? c->stream_maxlen : 10 * c->snapshot_every;
  return n < 1000 ? 1000 : n;
}

static srv_pub *find(srv_cluster *k, const srv_session *s) {
  for (srv_pub *p = k->pubs; p; p = p->next)
    if (p->s == s && !p->dead) return p;
  return NULL;
}

static void free_pub(srv_pub *p) {
  srv_session_unref(p->s);
  free(p->blob);
  free(p);
}

static void unlink_pub(srv_cluster *k, srv_pub *p) {
  srv_pub **pp = &k->pubs;
  while (*pp && *pp != p) pp = &(*pp)->next;
  if (*pp) *pp = p->next;
}

/* EVAL script with keys of the session and binary args. */
static int eval(srv_cluster *k, srv_redis_reply_cb cb, void *arg, const char *script, const char *session,
                const char *const *what, int nkeys, const char *const *args, const size_t *arglens, int nargs) {
  enum { MAXK = 6, MAXA = 8 };
  char keys[MAXK][PROTO_MAX_NAME + 64], nk[8];
  const char *argv[3 + MAXK + MAXA];
  size_t lens[3 + MAXK + MAXA];
  int n = 0;
  argv[n] = "EVAL", lens[n++] = 4;
  argv[n] = script, lens[n++] = strlen(script);
  snprintf(nk, sizeof(nk), "%d", nkeys);
  argv[n] = nk, lens[n++] = strlen(nk);
  for (int i = 0; i < nkeys && i < MAXK; i++) {
    lens[n] = srv_cluster_key(keys[i], sizeof(keys[i]), what[i][0] == '-' ? NULL : session,
                              what[i][0] == '-' ? what[i] + 1 : what[i]);
    argv[n++] = keys[i];
  }
  for (int i = 0; i < nargs && i < MAXA; i++) argv[n] = args[i], lens[n++] = arglens[i];
  return srv_redis_command(k->cmd, k->srv->cfg.redis_timeout_ms, cb, arg, n, argv, lens);
}

static void new_epoch_name(char *buf, size_t len) {
  uv_timeval64_t t;
  uv_gettimeofday(&t);
  static uint64_t last;
  uint64_t us = (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_usec;
  if (us <= last) us = last + 1; /* two epochs in one microsecond stay distinct */
  last = us;
  snprintf(buf, len, "%llu", (unsigned long long)us);
}

/* ---- epochs -------------------------------------------------------------------------------------- */

/* Another node whose lease is alive owns the session in Redis: it claimed the name while this
 * node was lost to the cluster (or Redis came back empty and it was first). The registry is the
 * cluster's one answer to "who owns it", so this node does not fight it: it stops publishing
 * the session and closes its copy — its viewers get BYE SESSION_CLOSED naming the owner, and
 * calls for the name go to the owner from now on. A durable copy's history stays in this node's
 * store, under a name this node keeps from reuse (as for a session that does not restore). */
static void give_up(srv_pub *p, const char *owner) {
  srv_cluster *k = p->k;
  srv_session *s = p->s;
  char why[PROTO_MAX_NAME + SRV_NODE_ID_MAX + 96];
  snprintf(why, sizeof(why), "node %s owns session '%s' in the cluster now: this node's copy is closed", owner,
           s->name);
  srv_log(SRV_LOG_ERROR, "session %s: node %s owns it now (its lease is alive): this node stops publishing it and "
          "closes its copy%s", s->name, owner, k->srv->store && s->store_id ? "; its history stays in the store" : "");
  k->stats.epochs_refused++;
  if (k->srv->store && s->store_id) srv_session_reserve_name(k->srv, s->name);
  srv_session_close(k->srv, s, why); /* detaches p (srv_publish_detach frees it) */
}

static void on_epoch_reply(srv_redis *r, redisReply *reply, void *arg) {
  srv_pub *p = arg;
  (void)r;
  if (p->dead) {
    free_pub(p);
    return;
  }
  p->starting = 0;
  if (reply && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "OWNED ", 6) == 0) {
    give_up(p, reply->str + 6);
    return;
  }
  if (!reply || reply->type == REDIS_REPLY_ERROR) {
    srv_log(SRV_LOG_WARN, "session %s: a new epoch was not stored in Redis: %s", p->s->name,
            reply ? reply->str : "the connection went away");
    p->epoch[0] = '\0';
    p->need_epoch = 1;
    return;
  }
  p->k->stats.epochs++;
  srv_log(SRV_LOG_INFO, "session %s: epoch %s published at version %llu (stream sequence %lld)", p->s->name, p->epoch,
          (unsigned long long)p->s->version, reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1);
}

/* Sends the epoch: mesh and snapshot of the state now. From here on, operations are published
 * with the new epoch, behind this command. */
static void send_epoch(srv_pub *p) {
  srv_cluster *k = p->k;
  srv_session *s = p->s;
  proto_buf cp;
  proto_buf_init(&cp);
  if (srv_record_encode_checkpoint(s, &cp) != 0) {
    proto_buf_fini(&cp);
    return;
  }
  char epoch[24], version[24];
  new_epoch_name(epoch, sizeof(epoch));
  snprintf(version, sizeof(version), "%llu", (unsigned long long)s->version);
  static const char *const what[] = {"meta", "stream", "snap", "mesh", "-sessions", "tex"};
  char prefix[32];
  const char *up = s->up == 'z' ? "z" : "y";
  const char *args[] = {k->node_id, s->name, prefix, epoch, version, (const char *)cp.data, (const char *)p->blob, up};
  size_t lens[] = {strlen(k->node_id), strlen(s->name), srv_cluster_key(prefix, sizeof(prefix), NULL, "node:"),
                   strlen(epoch), strlen(version), cp.len, p->blob_len, 1};
  p->starting = 1;
  if (eval(k, on_epoch_reply, p, LUA_EPOCH, s->name, what, 6, args, lens, 8) == 0) {
    snprintf(p->epoch, sizeof(p->epoch), "%s", epoch);
    p->need_epoch = 0;
    p->since_snapshot = 0;
    for (const srv_texclip *t = srv_texclip_first(s); t; t = t->next) srv_publish_texclip(k->srv, s, t, NULL);
    if (srv_texclip_weights(s)) srv_publish_texclip(k->srv, s, NULL, srv_texclip_weights(s));
  } else {
    p->starting = 0;
  }
  proto_buf_fini(&cp);
}

typedef struct blob_job {
  uv_work_t req;
  srv_pub *p;
  mesh view;            /* the session's mesh with only its imported targets */
  mesh_target *targets; /* a shallow copy: target arrays never change */
  uint8_t *blob;
  size_t len;
  int rc;
} blob_job;

static void blob_work(uv_work_t *req) {
  blob_job *j = req->data;
  j->rc = mesh_blob_write(&j->view, &j->blob, &j->len);
}

static void blob_done(uv_work_t *req, int status) {
  blob_job *j = req->data;
  srv_pub *p = j->p;
  srv_server *srv = p->k->srv;
  srv->pending_jobs--;
  free(j->targets);
  if (p->dead) {
    free(j->blob);
    free(j);
    free_pub(p);
    return;
  }
  p->starting = 0;
  if (status || j->rc) {
    srv_log(SRV_LOG_ERROR, "session %s: its mesh cannot be encoded for Redis: %s", p->s->name,
            mesh_strerror(j->rc ? j->rc : MESH_ENOMEM));
    free(j->blob);
  } else {
    p->blob = j->blob;
    p->blob_len = j->len;
    if (srv_redis_ready(p->k->cmd) && !p->k->stopping) send_epoch(p);
  }
  free(j);
}

/* The mesh blob once (on the pool), then the epoch. */
static void start_epoch(srv_pub *p) {
  if (p->starting || p->dead || !srv_redis_ready(p->k->cmd) || p->k->stopping) return;
  if (p->blob) {
    send_epoch(p);
    return;
  }
  srv_session *s = p->s;
  blob_job *j = calloc(1, sizeof(*j));
  uint32_t nt = s->base_targets <= s->mesh->target_count ? s->base_targets : s->mesh->target_count;
  if (j && nt) j->targets = malloc(sizeof(mesh_target) * nt);
  if (!j || (nt && !j->targets)) {
    if (j) free(j->targets);
    free(j);
    return;
  }
  j->p = p;
  j->view = *s->mesh;
  if (nt) memcpy(j->targets, s->mesh->targets, sizeof(mesh_target) * nt);
  j->view.targets = j->targets;
  j->view.target_count = nt;
  j->req.data = j;
  if (uv_queue_work(p->k->srv->loop, &j->req, blob_work, blob_done) != 0) {
    free(j->targets);
    free(j);
    return;
  }
  p->starting = 1;
  p->k->srv->pending_jobs++;
}

/* ---- the hooks --------------------------------------------------------------------------------- */

void srv_publish_attach(srv_cluster *k, srv_session *s) {
  if (find(k, s)) return;
  srv_pub *p = calloc(1, sizeof(*p));
  if (!p) {
    srv_log(SRV_LOG_ERROR, "session %s: cannot publish it (out of memory)", s->name);
    return;
  }
  p->k = k;
  p->s = s;
  srv_session_ref(s);
  p->need_epoch = 1;
  p->next = k->pubs;
  k->pubs = p;
  start_epoch(p);
}

static void on_closed_reply(srv_redis *r, redisReply *reply, void *arg) {
  (void)r, (void)arg;
  if (!reply || reply->type == REDIS_REPLY_ERROR)
    srv_log(SRV_LOG_WARN, "a closed session's keys stay in Redis: %s", reply ? reply->str : "the connection went away");
}

void srv_publish_release(srv_cluster *k, const char *name) {
  static const char *const what[] = {"meta", "stream", "snap", "mesh", "-sessions", "tex"};
  const char *args[] = {k->node_id, name};
  size_t lens[] = {strlen(k->node_id), strlen(name)};
  eval(k, on_closed_reply, NULL, LUA_CLOSE, name, what, 6, args, lens, 2);
}

void srv_publish_detach(srv_cluster *k, srv_session *s) {
  srv_pub *p = find(k, s);
  if (!p) return;
  unlink_pub(k, p);
  srv_publish_release(k, s->name);
  p->dead = 1;
  if (!p->starting) free_pub(p); /* else the job or the reply frees it */
}

static void on_published(srv_redis *r, redisReply *reply, void *arg) {
  srv_cluster *k = arg;
  (void)r;
  if (reply && reply->type != REDIS_REPLY_ERROR) return;
  k->stats.publish_failures++;
  /* Refused (another epoch or owner: the keys were lost or taken) or lost with the connection:
   * relays can no longer trust the stream, so every session starts a new epoch. */
  if (reply) srv_log(SRV_LOG_WARN, "redis refused a frame: %s; new epochs follow", reply->str);
  for (srv_pub *p = k->pubs; p; p = p->next) p->need_epoch = 1;
}

static void on_snapshot(srv_redis *r, redisReply *reply, void *arg) {
  srv_cluster *k = arg;
  (void)r;
  if (reply && reply->type != REDIS_REPLY_ERROR) k->stats.snapshots++;
}

/* Counts an entry sent (rc 0: returns 1) or not (the stream has a hole, so a new epoch: 0). */
static int counted(srv_cluster *k, srv_pub *p, int rc) {
  if (rc) {
    k->stats.publish_failures++;
    p->need_epoch = 1;
    return 0;
  }
  k->stats.published++;
  p->published++;
  return 1;
}

void srv_publish_applied(srv_cluster *k, srv_session *s, const srv_op *op, uint64_t version,
                         const srv_before *before) {
  srv_pub *p = find(k, s);
  if (!p || !p->epoch[0] || p->need_epoch) return; /* the next epoch's snapshot holds it */
  proto_buf rec;
  proto_buf_init(&rec);
  uint32_t changed = 0;
  char v[24], ml[16];
  snprintf(v, sizeof(v), "%llu", (unsigned long long)version);
  snprintf(ml, sizeof(ml), "%u", maxlen(k));
  static const char *const what[] = {"meta", "stream"};
  int rc = srv_record_encode_op(s, op, before, &rec, &changed);
  if (rc == 0) {
    const char *args[] = {p->epoch, k->node_id, v, (const char *)rec.data, ml};
    size_t lens[] = {strlen(p->epoch), strlen(k->node_id), strlen(v), rec.len, strlen(ml)};
    rc = eval(k, on_published, k, LUA_PUBLISH, s->name, what, 2, args, lens, 5);
  }
  proto_buf_fini(&rec);
  if (!counted(k, p, rc)) return;
  if (++p->since_snapshot < k->srv->cfg.snapshot_every) return;
  proto_buf cp;
  proto_buf_init(&cp);
  if (srv_record_encode_checkpoint(s, &cp) == 0) {
    static const char *const swhat[] = {"meta", "snap"};
    const char *args[] = {p->epoch, v, (const char *)cp.data};
    size_t lens[] = {strlen(p->epoch), strlen(v), cp.len};
    if (eval(k, on_snapshot, k, LUA_SNAPSHOT, s->name, swhat, 2, args, lens, 3) == 0) p->since_snapshot = 0;
  }
  proto_buf_fini(&cp);
}

void srv_publish_texclip(srv_server *srv, srv_session *s, const srv_texclip *clip, const srv_frame *weights) {
  srv_cluster *k = srv->cluster;
  srv_pub *p = k ? find(k, s) : NULL;
  if (!p || !p->epoch[0] || p->need_epoch || k->stopping) return; /* the next epoch sends them all */
  proto_buf body;
  proto_buf_init(&body);
  int rc = clip ? srv_texclip_encode(clip, &body) : 0;
  char v[24], ml[16];
  snprintf(v, sizeof(v), "%llu", (unsigned long long)s->version);
  snprintf(ml, sizeof(ml), "%u", maxlen(k));
  const char *name = clip ? clip->name : "";
  const uint8_t *bytes = clip ? body.data : weights->data;
  size_t n = clip ? body.len : weights->len;
  static const char *const what[] = {"meta", "stream", "tex"};
  if (rc == 0) {
    const char *args[] = {p->epoch, k->node_id, v, clip ? "c" : "w", name, (const char *)bytes, ml};
    size_t lens[] = {strlen(p->epoch), strlen(k->node_id), strlen(v), 1, strlen(name), n, strlen(ml)};
    rc = eval(k, on_published, k, LUA_TEX, s->name, what, 3, args, lens, 7);
  }
  proto_buf_fini(&body);
  counted(k, p, rc);
}

void srv_publish_redis_state(srv_cluster *k, int ready) {
  for (srv_pub *p = k->pubs; p; p = p->next) {
    p->need_epoch = 1; /* what was sent before the drop may or may not have landed */
    if (!ready) p->epoch[0] = '\0';
  }
  if (ready) srv_publish_tick(k);
}

void srv_publish_tick(srv_cluster *k) {
  for (srv_pub *p = k->pubs; p; p = p->next)
    if (p->need_epoch) start_epoch(p);
}

void srv_publish_fini(srv_cluster *k) {
  while (k->pubs) {
    srv_pub *p = k->pubs;
    k->pubs = p->next;
    p->dead = 1;
    if (!p->starting) free_pub(p);
  }
}

cJSON *srv_publish_stats(const srv_cluster *k) {
  cJSON *a = cJSON_CreateArray();
  for (const srv_pub *p = k->pubs; p; p = p->next) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "session", p->s->name);
    cJSON_AddStringToObject(o, "epoch", p->epoch);
    cJSON_AddNumberToObject(o, "version", (double)p->s->version);
    cJSON_AddNumberToObject(o, "frames_published", (double)p->published);
    cJSON_AddBoolToObject(o, "live", p->epoch[0] && !p->need_epoch);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}
