/*
 * srv_registry.c — a node among others: started by `deformd --redis URL` (a primary) or
 * `deformd --relay --redis URL`, it keeps a lease in Redis that says where it listens and how
 * loaded it is, reads the registry (every node's lease, every session's owner) twice a second,
 * and routes what is not its own: JSON-RPC calls for a session another node owns go to that
 * node, session.create goes to the least loaded primary (placement), a relay's editors' EDITs
 * go to the owner (srv_forward.c).
 *
 * Lease: SET deformd:node:<id> {stream, rpc, relay, sessions, viewers} PX lease_ms, renewed
 * every third of it. A node whose lease is gone is lost: its sessions stay registered (a
 * durable primary comes back with them) and relays report "primary lost" to their viewers.
 * Placement reads the leases: the alive primary with the fewest sessions, then the fewest
 * viewers, then the smallest id. The survey may be half a second old, so the primary that opens
 * a session first claims its name in Redis (one script: refused while another live node owns
 * it), then opens it through session.create's open step (srv_methods_create_open, not the
 * dispatcher again); a create that does not open releases it.
 *
 * The hooks it sets on the server (core/srv_server.h) are how the lower layers hand it work; with no
 * --redis none is set and a node behaves as it always did.
 *
 * DOES NOT publish (srv_publish.c), follow streams (srv_relay.c) or forward bytes
 * (srv_forward.c).
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
#include "srv_store.h"
#include "srv_config.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_jobs.h"
#include "srv_fanout.h"
#include "srv_rpc.h"
#include "srv_methods.h"
#include "srv_cluster.h"

#define TICK_MS 250
#define SURVEY_MS 500

/* Every node with its lease, and every session's owner. A node without a lease that owns no
 * session is forgotten (nodes on ephemeral ports would otherwise pile up). */
static const char *LUA_SURVEY =
    "local ids = redis.call('SMEMBERS', KEYS[1])\n"
    "local sessions = redis.call('HGETALL', KEYS[2])\n"
    "local owning = {}\n"
    "for i = 2, #sessions, 2 do owning[sessions[i]] = true end\n"
    "local nodes = {}\n"
    "for _, id in ipairs(ids) do\n"
    "  local lease = redis.call('GET', ARGV[1] .. id)\n"
    "  if lease or owning[id] then\n"
    "    nodes[#nodes + 1] = id\n"
    "    nodes[#nodes + 1] = lease or ''\n"
    "  else\n"
    "    redis.call('SREM', KEYS[1], id)\n"
    "  end\n"
    "end\n"
    "return {nodes, sessions}\n";

static uint32_t local_viewers(const srv_server *s) {
  uint32_t n = 0;
  for (const srv_session *x = s->sessions; x; x = x->next) n += x->subscriber_count;
  return n;
}

/* ---- lease and survey ---------------------------------------------------------------------------- */

static void on_lease(srv_redis *r, redisReply *reply, void *arg) {
  (void)r, (void)arg;
  if (reply && reply->type == REDIS_REPLY_ERROR) srv_log(SRV_LOG_WARN, "registry: lease refused: %s", reply->str);
}

static void renew_lease(srv_cluster *k) {
  srv_server *s = k->srv;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "stream", k->stream_addr);
  cJSON_AddStringToObject(o, "rpc", k->rpc_addr);
  cJSON_AddBoolToObject(o, "relay", k->relay);
  cJSON_AddNumberToObject(o, "sessions", s->session_count);
  cJSON_AddNumberToObject(o, "viewers", local_viewers(s));
  char *json = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!json) return;
  char key[160], px[16];
  size_t kl = srv_cluster_key(key, sizeof(key), NULL, "node:");
  snprintf(key + kl, sizeof(key) - kl, "%s", k->node_id);
  snprintf(px, sizeof(px), "%u", s->cfg.lease_ms);
  const char *set[] = {"SET", key, json, "PX", px};
  size_t setl[] = {3, strlen(key), strlen(json), 2, strlen(px)};
  char nodes[32];
  const char *add[] = {"SADD", nodes, k->node_id};
  size_t addl[] = {4, srv_cluster_key(nodes, sizeof(nodes), NULL, "nodes"), strlen(k->node_id)};
  if (srv_redis_command(k->cmd, s->cfg.redis_timeout_ms, on_lease, k, 5, set, setl) == 0)
    srv_redis_command(k->cmd, s->cfg.redis_timeout_ms, on_lease, k, 3, add, addl);
  free(json);
  k->last_lease = uv_now(s->loop);
}

static void parse_node(srv_node *n, const char *id, const redisReply *v) {
  memset(n, 0, sizeof(*n));
  snprintf(n->id, sizeof(n->id), "%s", id);
  if (v->type != REDIS_REPLY_STRING || v->len == 0) return;
  cJSON *o = cJSON_ParseWithLength(v->str, v->len);
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stream"), *rpc = cJSON_GetObjectItemCaseSensitive(o, "rpc");
  const cJSON *se = cJSON_GetObjectItemCaseSensitive(o, "sessions"), *vi = cJSON_GetObjectItemCaseSensitive(o, "viewers");
  if (cJSON_IsString(st) && cJSON_IsString(rpc)) {
    n->alive = 1;
    snprintf(n->stream, sizeof(n->stream), "%s", st->valuestring);
    snprintf(n->rpc, sizeof(n->rpc), "%s", rpc->valuestring);
    n->relay = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "relay"));
    n->sessions = cJSON_IsNumber(se) ? (uint32_t)se->valuedouble : 0;
    n->viewers = cJSON_IsNumber(vi) ? (uint32_t)vi->valuedouble : 0;
  }
  cJSON_Delete(o);
}

static void free_owners(srv_cluster *k) {
  for (uint32_t i = 0; i < k->owner_count; i++) free(k->owners[i].session);
  free(k->owners);
  k->owners = NULL;
  k->owner_count = 0;
}

static int claiming(const srv_cluster *k, const char *name);

/* Sessions the registry gives this primary that it neither holds nor is opening: a primary that
 * came back without its data (--data none), or a claim whose session did not open and whose
 * release was lost with Redis. They leave the registry (only while this node still owns them
 * there), and relays close them. */
static void forget_stale(srv_cluster *k) {
  for (uint32_t i = 0; i < k->owner_count; i++) {
    const srv_owner *o = &k->owners[i];
    if (strcmp(o->node, k->node_id) != 0 || srv_session_find(k->srv, o->session) || claiming(k, o->session)) continue;
    srv_log(SRV_LOG_INFO, "registry: session %s was this node's and is gone: removed from the registry", o->session);
    srv_publish_release(k, o->session);
  }
}

static void on_survey(srv_redis *r, redisReply *reply, void *arg) {
  srv_cluster *k = arg;
  (void)r;
  k->survey_in_flight = 0;
  if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || k->stopping) return;
  const redisReply *nodes = reply->element[0], *owners = reply->element[1];
  if (nodes->type != REDIS_REPLY_ARRAY || owners->type != REDIS_REPLY_ARRAY) return;
  srv_node *nn = calloc(nodes->elements / 2 + 1, sizeof(*nn));
  srv_owner *oo = calloc(owners->elements / 2 + 1, sizeof(*oo));
  if (!nn || !oo) {
    free(nn);
    free(oo);
    return;
  }
  uint32_t n = 0, m = 0;
  for (size_t i = 0; i + 1 < nodes->elements; i += 2)
    if (nodes->element[i]->type == REDIS_REPLY_STRING) parse_node(&nn[n++], nodes->element[i]->str, nodes->element[i + 1]);
  for (size_t i = 0; i + 1 < owners->elements; i += 2) {
    const redisReply *a = owners->element[i], *b = owners->element[i + 1];
    if (a->type != REDIS_REPLY_STRING || b->type != REDIS_REPLY_STRING || !(oo[m].session = strdup(a->str))) continue;
    snprintf(oo[m].node, sizeof(oo[m].node), "%s", b->str);
    m++;
  }
  free(k->nodes);
  free_owners(k);
  k->nodes = nn;
  k->node_count = n;
  k->owners = oo;
  k->owner_count = m;
  if (!k->relay) forget_stale(k);
  k->surveyed = 1;
  if (k->relay) srv_relay_sync(k);
}

static void survey(srv_cluster *k) {
  if (k->survey_in_flight) return;
  char nodes[32], sessions[32], prefix[32];
  srv_cluster_key(prefix, sizeof(prefix), NULL, "node:");
  const char *argv[] = {"EVAL", LUA_SURVEY, "2", nodes, sessions, prefix};
  size_t lens[] = {4, strlen(LUA_SURVEY), 1, srv_cluster_key(nodes, sizeof(nodes), NULL, "nodes"),
                   srv_cluster_key(sessions, sizeof(sessions), NULL, "sessions"), strlen(prefix)};
  if (srv_redis_command(k->cmd, k->srv->cfg.redis_timeout_ms, on_survey, k, 6, argv, lens) == 0)
    k->survey_in_flight = 1;
  k->last_survey = uv_now(k->srv->loop);
}

static void on_tick(uv_timer_t *t) {
  srv_cluster *k = t->data;
  if (!k->stopping) srv_cluster_tokens_tick(k);
  if (k->stopping || !srv_redis_ready(k->cmd)) return;
  uint64_t now = uv_now(k->srv->loop);
  if (now - k->last_lease >= k->srv->cfg.lease_ms / 3) renew_lease(k);
  if (now - k->last_survey >= SURVEY_MS) survey(k);
  srv_presence_link_tick(k);
  if (k->relay) srv_relay_tick(k);
  else srv_publish_tick(k);
}

static void on_redis_state(srv_redis *r, int ready, void *arg) {
  srv_cluster *k = arg;
  if (k->stopping) return;
  if (k->relay) {
    srv_relay_redis_state(k, r, ready);
  } else if (r == k->cmd) {
    srv_publish_redis_state(k, ready);
  }
  if (ready && r == k->cmd) {
    k->survey_in_flight = 0;
    renew_lease(k);
    survey(k);
  }
  if (!ready && r == k->cmd) {
    k->survey_in_flight = 0;
    srv_cluster_tokens_redis_lost(k);
  }
}

/* ---- claims: a name is this node's in Redis before it opens a session of that name ------------ */

/* Placement reads a survey up to half a second old, so two nodes may both decide to open the
 * same name; the claim settles it in one atomic step. What a previous owner (gone, or closed)
 * left under the name is removed, so relays never load it as the new session. KEYS: meta,
 * stream, snap, mesh, registry; ARGV: node, session, lease prefix. */
static const char *LUA_CLAIM =
    SRV_LUA_OWNED_CHECK
    "redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])\n"
    "redis.call('HDEL', KEYS[1], 'epoch', 'closed')\n"
    "redis.call('HSET', KEYS[1], 'owner', ARGV[1])\n"
    "redis.call('PERSIST', KEYS[1])\n"
    "redis.call('HSET', KEYS[5], ARGV[2], ARGV[1])\n"
    "return 1\n";

typedef struct srv_claim {
  struct srv_claim *next;
  srv_cluster *k;
  char *name;
  srv_rpc_call *call; /* until Redis answers the claim; then srv_methods_create_open has it */
  cJSON *params;
} srv_claim;

static srv_claim *find_claim(const srv_cluster *k, const char *name) {
  for (srv_claim *c = k->claims; c; c = c->next)
    if (strcmp(c->name, name) == 0) return c;
  return NULL;
}

static int claiming(const srv_cluster *k, const char *name) { return find_claim(k, name) != NULL; }

static void free_claim(srv_cluster *k, srv_claim *c) {
  srv_claim **pp = &k->claims;
  while (*pp && *pp != c) pp = &(*pp)->next;
  if (*pp) *pp = c->next;
  if (c->call) srv_rpc_call_free(c->call);
  cJSON_Delete(c->params);
  free(c->name);
  free(c);
}

/* A claimed name whose session did not open goes back, unless a session of that name is open
 * here after all (one of the command line's opened meanwhile: the name is rightly this node's),
 * or the node is stopping (its Redis connection goes with it; the next start's survey releases
 * a name left over). */
static void give_back(srv_cluster *k, const char *name) {
  if (!k->stopping && !srv_session_find(k->srv, name)) srv_publish_release(k, name);
}

/* The open of a claimed create ended (srv_methods_create_open's `done`, before the client is
 * answered): the claim is over. Claims are freed by srv_cluster_free only once the loop has run
 * out, so every open has ended by then. */
static void on_open_ended(srv_server *s, void *arg, int status, srv_session *session, const char *err) {
  srv_claim *c = arg;
  (void)s, (void)session, (void)err;
  if (status) give_back(c->k, c->name);
  free_claim(c->k, c);
}

static void on_claimed(srv_redis *r, redisReply *reply, void *arg) {
  srv_claim *c = arg;
  srv_cluster *k = c->k;
  srv_rpc_call *call = c->call;
  (void)r;
  c->call = NULL;
  if (k->stopping) {
    srv_rpc_error(call, SRV_ESHUTDOWN, "the server is shutting down");
  } else if (!reply) {
    /* It may have landed: the next survey releases a name this node holds and is not opening. */
    srv_rpc_error(call, SRV_EBUSY, "Redis went away before the name '%s' was claimed: try again", c->name);
  } else if (reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "OWNED ", 6) == 0) {
    k->stats.claims_refused++;
    srv_rpc_error(call, SRV_EEXIST, "a session called '%s' already exists (on node %s)", c->name, reply->str + 6);
  } else if (reply->type == REDIS_REPLY_ERROR) {
    srv_rpc_error(call, SRV_EBUSY, "Redis refused the claim of '%s': %s", c->name, reply->str);
  } else {
    /* The name is this node's: the session opens under it (srv_methods.c answers the call),
     * and on_open_ended ends the claim. An open refused before it began gives the name back. */
    char err[512];
    int rc = srv_methods_create_open(k->srv, call, c->params, on_open_ended, c, err, sizeof(err));
    if (rc == 0) return;
    give_back(k, c->name);
    srv_rpc_error(call, rc, "%s", err);
  }
  free_claim(k, c);
}

/* session.create, to be opened here: the name is claimed first, then srv_methods_create_open
 * opens the session. Returns 1: the call is taken (answered, or kept until it is). */
static int claim(srv_cluster *k, srv_rpc_call *call, cJSON *params) {
  srv_server *srv = k->srv;
  char why[512];
  int rc = srv_methods_create_check(srv, params, why, sizeof(why)); /* what the method refuses, refused here */
  if (rc) {
    srv_rpc_error(call, rc, "%s", why);
    return 1;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  if (find_claim(k, name->valuestring) || srv_session_name_taken(srv, name->valuestring)) {
    srv_rpc_error(call, SRV_EEXIST, "a session called '%s' is being created or kept on this node (%s)",
                  name->valuestring, k->node_id);
    return 1;
  }
  srv_claim *c = calloc(1, sizeof(*c));
  if (!c || !(c->name = strdup(name->valuestring)) || !(c->params = cJSON_Duplicate(params, 1))) {
    if (c) free(c->name);
    free(c);
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return 1;
  }
  c->k = k;
  char keys[5][PROTO_MAX_NAME + 64], prefix[32];
  static const char *const what[] = {"meta", "stream", "snap", "mesh"};
  const char *argv[11] = {"EVAL", LUA_CLAIM, "5"};
  size_t lens[11] = {4, strlen(LUA_CLAIM), 1};
  for (int i = 0; i < 5; i++) {
    lens[3 + i] = i < 4 ? srv_cluster_key(keys[i], sizeof(keys[i]), c->name, what[i])
                        : srv_cluster_key(keys[i], sizeof(keys[i]), NULL, "sessions");
    argv[3 + i] = keys[i];
  }
  argv[8] = k->node_id, lens[8] = strlen(k->node_id);
  argv[9] = c->name, lens[9] = strlen(c->name);
  argv[10] = prefix, lens[10] = srv_cluster_key(prefix, sizeof(prefix), NULL, "node:");
  if (srv_redis_command(k->cmd, srv->cfg.redis_timeout_ms, on_claimed, c, 11, argv, lens) != 0) {
    free_claim(k, c);
    srv_rpc_error(call, SRV_EBUSY, "Redis is not reachable: a session's name is claimed there before the session is "
                  "opened; try again");
    return 1;
  }
  c->call = call;
  c->next = k->claims;
  k->claims = c;
  return 1;
}

/* ---- routing ------------------------------------------------------------------------------------- */

static void rpc_refuse(srv_rpc_call *call, int code, const char *fmt, const char *a, const char *b) {
  srv_rpc_error(call, code, fmt, a, b);
}

/* session.create: on the least loaded primary (this one included), unless params.node names
 * one (what placement chose when it sent the call here). */
static int place(srv_cluster *k, srv_rpc_call *call, cJSON *params) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  const cJSON *node = cJSON_GetObjectItemCaseSensitive(params, "node");
  if (!cJSON_IsString(name)) return 0; /* the method's own checks answer */
  if (node) {
    if (!cJSON_IsString(node)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"node\" must be a node id");
      return 1;
    }
    if (strcmp(node->valuestring, k->node_id) == 0) {
      if (!k->relay) return claim(k, call, params);
      srv_rpc_error(call, SRV_EPARAMS, "node %s is a relay: it owns no session", k->node_id);
      return 1;
    }
    const srv_node *n = srv_cluster_node(k, node->valuestring);
    if (!n || !n->alive || n->relay) {
      rpc_refuse(call, SRV_EPARAMS, "node %s is not a live primary%s", node->valuestring, "");
      return 1;
    }
    srv_forward_rpc(k, n, call, "session.create", params);
    return 1;
  }
  /* What the last survey knows (the claim decides): a name whose owner is lost may be taken. */
  const srv_node *owner = srv_cluster_owner(k, name->valuestring);
  if (owner && owner->alive && strcmp(owner->id, k->node_id) != 0) {
    rpc_refuse(call, SRV_EEXIST, "a session called '%s' already exists (on node %s)", name->valuestring, owner->id);
    return 1;
  }
  const srv_node *best = NULL;
  uint32_t best_sessions = 0, best_viewers = 0;
  int mine = 0;
  if (!k->relay) {
    best_sessions = k->srv->session_count;
    best_viewers = local_viewers(k->srv);
    mine = 1;
  }
  for (uint32_t i = 0; i < k->node_count; i++) {
    const srv_node *n = &k->nodes[i];
    if (!n->alive || n->relay || strcmp(n->id, k->node_id) == 0) continue;
    int better = !mine && !best;
    if (!better) {
      uint32_t s = n->sessions, v = n->viewers;
      better = s < best_sessions || (s == best_sessions && v < best_viewers) ||
               (s == best_sessions && v == best_viewers && strcmp(n->id, best ? best->id : k->node_id) < 0);
    }
    if (better) {
      best = n;
      mine = 0;
      best_sessions = n->sessions;
      best_viewers = n->viewers;
    }
  }
  if (mine) return claim(k, call, params);
  if (!best) {
    srv_rpc_error(call, SRV_ELIMIT, "no primary is alive to place session '%s' on", name->valuestring);
    return 1;
  }
  k->stats.placements++;
  cJSON *p = cJSON_Duplicate(params, 1);
  cJSON_AddStringToObject(p, "node", best->id);
  srv_log(SRV_LOG_INFO, "registry: session %s placed on %s", name->valuestring, best->id);
  srv_forward_rpc(k, best, call, "session.create", p);
  cJSON_Delete(p);
  return 1;
}

/* Calls a relay answers from its replica when the session's primary cannot answer (its lease is
 * gone, or the registry does not list it now): what they read is the session's state, which the
 * replica holds at the primary's versions (operation records and snapshots carry all of it), so
 * the answer is the primary's last one. While the primary is alive they go to it, so that a
 * client reads its own writes at once. Not here: history.list (steps, authors and times live in
 * the primary's store), anim.list (clips recorded or compressed after import, and the player,
 * are not in the records), session.export (a file on the primary's disk, or a version from its
 * store). */
static int replica_read(const char *method) {
  static const char *const reads[] = {"state.get", "weights.get", "targets.list", "mesh.info", "sculpt.get"};
  for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
    if (strcmp(method, reads[i]) == 0) return 1;
  return 0;
}

static int route_rpc(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params) {
  srv_cluster *k = s->cluster;
  if (!cJSON_IsObject(params)) return 0;
  if (strcmp(method, "session.create") == 0) return place(k, call, params);
  if (strcmp(method, "hello") == 0 || strcmp(method, "auth") == 0) return 0;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  if (!cJSON_IsString(name)) return 0;
  srv_session *x = srv_session_find(s, name->valuestring);
  if (x && !k->relay) return 0; /* this primary's own */
  const srv_node *owner = srv_cluster_owner(k, name->valuestring);
  if (k->relay && replica_read(method) && (!owner || !owner->alive)) {
    int r = srv_relay_read(k, call, method, params, name->valuestring); /* the primary's last state */
    if (r >= 0) return r;
  }
  if (!owner) {
    if (!k->relay) return 0; /* unknown: the method says so */
    if (x) /* a replica the registry does not list now: Redis lost it and its primary is re-registering */
      rpc_refuse(call, SRV_EBUSY, "the registry does not list session '%s' now (Redis came back empty?): try again%s",
                 name->valuestring, "");
    else
      srv_rpc_error(call, SRV_ENOSESSION, "unknown session '%s'", name->valuestring);
    return 1;
  }
  if (strcmp(owner->id, k->node_id) == 0) return 0;
  if (!owner->alive) {
    rpc_refuse(call, SRV_EBUSY, "the primary of session '%s' (%s) is lost: try again when it is back",
               name->valuestring, owner->id);
    return 1;
  }
  srv_forward_rpc(k, owner, call, method, params);
  return 1;
}

static int route_edit(srv_conn *c, const uint8_t *frame, size_t len) {
  srv_cluster *k = c->server->cluster;
  const srv_session *s = srv_fanout_session(c);
  if (!k->relay || !s) return 0;
  const srv_node *owner = srv_cluster_owner(k, s->name);
  if (!owner || !owner->alive) {
    uint32_t rid = len >= PROTO_HEADER_SIZE + 4 ? proto_load_u32(frame + PROTO_HEADER_SIZE) : 0;
    char msg[256];
    snprintf(msg, sizeof(msg), "the primary of session '%s' is lost: edits are refused until it is back",
             s->name);
    srv_conn_send_error(c, PROTO_ERR_INVALID, rid, msg);
    return 1;
  }
  srv_forward_edit(k, owner, c, frame, len);
  return 1;
}

/* A session more or less: the lease says so at the next tick (placement reads it). */
static void on_session_added(srv_server *s, srv_session *x) {
  if (!s->cluster->relay) srv_publish_attach(s->cluster, x);
  s->cluster->last_lease = 0;
}

static void on_session_removed(srv_server *s, srv_session *x) {
  if (!s->cluster->relay) srv_publish_detach(s->cluster, x);
  s->cluster->last_lease = 0;
}

static void on_conn_closed(srv_conn *c) {
  srv_forward_conn_closed(c->server->cluster, c);
  if (c->server->cluster->relay) srv_relay_conn_closed(c->server->cluster, c);
}

static int route_join(srv_conn *c, const char *session, const uint8_t *hello, size_t n,
                      void (*again)(srv_conn *c, const uint8_t *hello, size_t n)) {
  return srv_relay_join(c->server->cluster, c, session, hello, n, again);
}

static void on_joined(srv_conn *c) {
  if (c->server->cluster->relay) srv_relay_joined(c->server->cluster, c);
}

static void stats_extra(srv_server *s, cJSON *r) {
  srv_cluster *k = s->cluster;
  cJSON *o = cJSON_AddObjectToObject(r, "cluster");
  cJSON_AddStringToObject(o, "role", k->relay ? "relay" : "primary");
  cJSON_AddStringToObject(o, "node", k->node_id);
  cJSON_AddItemToObject(o, "presence", srv_presence_link_stats(k));
  cJSON *rd = cJSON_AddObjectToObject(o, "redis");
  char where[300];
  snprintf(where, sizeof(where), "%s:%d/%d", k->url.host, k->url.port, k->url.db);
  cJSON_AddStringToObject(rd, "address", where);
  cJSON_AddBoolToObject(rd, "connected", srv_redis_ready(k->cmd) && (!k->relay || srv_redis_ready(k->block)));
  srv_redis_stats a, b;
  srv_redis_get_stats(k->cmd, &a);
  srv_redis_get_stats(k->block, &b);
  cJSON_AddNumberToObject(rd, "connects", (double)(a.connects + b.connects));
  cJSON_AddNumberToObject(rd, "disconnects", (double)(a.disconnects + b.disconnects));
  cJSON_AddNumberToObject(rd, "stalls", (double)(a.stalls + b.stalls));
  cJSON_AddNumberToObject(rd, "commands", (double)(a.commands + b.commands));
  cJSON_AddNumberToObject(rd, "errors", (double)(a.errors + b.errors));
  cJSON_AddNumberToObject(rd, "in_flight", srv_redis_in_flight(k->cmd) + srv_redis_in_flight(k->block));
  const srv_cluster_stats *st = &k->stats;
  cJSON_AddNumberToObject(o, "frames_published", (double)st->published);
  cJSON_AddNumberToObject(o, "publish_failures", (double)st->publish_failures);
  cJSON_AddNumberToObject(o, "snapshots", (double)st->snapshots);
  cJSON_AddNumberToObject(o, "epochs", (double)st->epochs);
  cJSON_AddNumberToObject(o, "frames_applied", (double)st->applied);
  cJSON_AddNumberToObject(o, "reloads", (double)st->reloads);
  cJSON_AddNumberToObject(o, "gaps", (double)st->gaps);
  cJSON_AddNumberToObject(o, "forwarded_rpc", (double)st->forwarded_rpc);
  cJSON_AddNumberToObject(o, "forwarded_edits", (double)st->forwarded_edits);
  cJSON_AddNumberToObject(o, "placements", (double)st->placements);
  cJSON_AddNumberToObject(o, "claims_refused", (double)st->claims_refused);
  cJSON_AddNumberToObject(o, "epochs_refused", (double)st->epochs_refused);
  cJSON_AddNumberToObject(o, "replicas_dropped", (double)st->replicas_dropped);
  uint32_t lost = 0, loaded = 0;
  cJSON *sessions = k->relay ? srv_relay_stats(k) : srv_publish_stats(k);
  const cJSON *e;
  cJSON_ArrayForEach(e, sessions) {
    lost += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "primary_lost"));
    loaded += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "loaded"));
  }
  cJSON_AddNumberToObject(o, "primary_lost", lost);
  if (k->relay) cJSON_AddNumberToObject(o, "replicas_loaded", loaded);
  cJSON_AddItemToObject(o, "sessions", sessions);
  cJSON_AddItemToObject(o, "tokens", srv_cluster_tokens_stats(k));
  cJSON *nodes = cJSON_AddArrayToObject(o, "nodes");
  for (uint32_t i = 0; i < k->node_count; i++) {
    const srv_node *n = &k->nodes[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "node", n->id);
    cJSON_AddBoolToObject(x, "alive", n->alive);
    cJSON_AddStringToObject(x, "role", n->relay ? "relay" : "primary");
    cJSON_AddStringToObject(x, "stream", n->stream);
    cJSON_AddStringToObject(x, "rpc", n->rpc);
    cJSON_AddNumberToObject(x, "sessions", n->sessions);
    cJSON_AddNumberToObject(x, "viewers", n->viewers);
    cJSON_AddItemToArray(nodes, x);
  }
}

/* ---- start and stop ------------------------------------------------------------------------------ */

static int address(const char *host, int port, char *out, size_t len) {
  if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  if (uv_ip4_addr(host, port, &a4) == 0) {
    if (strcmp(host, "0.0.0.0") == 0) return -1;
    snprintf(out, len, "%s:%d", host, port);
    return 0;
  }
  if (uv_ip6_addr(host, port, &a6) == 0) {
    if (strcmp(host, "::") == 0) return -1;
    snprintf(out, len, "[%s]:%d", host, port);
    return 0;
  }
  return -1;
}

int srv_cluster_start(srv_server *srv, int stream_port, int rpc_port) {
  const srv_config *cfg = &srv->cfg;
  srv_cluster *k = calloc(1, sizeof(*k));
  if (!k) return SRV_EINTERNAL;
  k->srv = srv;
  k->relay = cfg->relay;
  char err[512];
  if (srv_redis_parse_url(cfg->redis, &k->url, err, sizeof(err)) != 0) {
    srv_log(SRV_LOG_ERROR, "--redis: %s", err);
    free(k);
    return SRV_EPARAMS;
  }
  char listen[SRV_MAX_LISTEN][64];
  int optional[SRV_MAX_LISTEN];
  const char *adv = cfg->advertise[0] ? cfg->advertise
                    : srv_config_listen_addresses(cfg->listen, listen, optional) > 0 ? listen[0]
                                                                                     : cfg->listen;
  if (address(adv, stream_port, k->stream_addr, sizeof(k->stream_addr)) != 0 ||
      address(adv, rpc_port, k->rpc_addr, sizeof(k->rpc_addr)) != 0) {
    srv_log(SRV_LOG_ERROR, "--advertise: '%s' is not a numeric address other nodes can reach (listening on every "
            "address needs --advertise ADDR)", adv);
    free(k);
    return SRV_EPARAMS;
  }
  snprintf(k->node_id, sizeof(k->node_id), "%s", cfg->node_id ? cfg->node_id : k->stream_addr);
  srv->cluster = k;
  if (srv_redis_create(srv->loop, &k->url, "commands", on_redis_state, k, &k->cmd) != 0 ||
      (k->relay && srv_redis_create(srv->loop, &k->url, "reads", on_redis_state, k, &k->block) != 0) ||
      srv_cluster_tokens_start(k) != 0 || srv_presence_link_start(k) != 0) {
    srv_cluster_stop(srv);
    return SRV_EINTERNAL;
  }
  uv_timer_init(srv->loop, &k->timer);
  k->timer.data = k;
  uv_timer_start(&k->timer, on_tick, TICK_MS, TICK_MS);
  srv->route_rpc = route_rpc;
  srv->route_edit = route_edit;
  if (k->relay) srv->route_join = route_join;
  srv->on_session_added = on_session_added;
  srv->on_session_removed = on_session_removed;
  srv->on_conn_closed = on_conn_closed;
  srv->on_joined = on_joined;
  srv->stats_extra = stats_extra;
  if (!k->relay) srv->on_texclip = srv_publish_texclip;
  if (!k->relay)
    for (srv_session *x = srv->sessions; x; x = x->next) srv_publish_attach(k, x); /* restored ones */
  srv_log(SRV_LOG_INFO, "node %s: %s on redis %s:%d/%d, reached at stream %s, JSON-RPC %s", k->node_id,
          k->relay ? "relay" : "primary", k->url.host, k->url.port, k->url.db, k->stream_addr, k->rpc_addr);
  return 0;
}

static void on_lease_deleted(srv_redis *r, redisReply *reply, void *arg) { (void)r, (void)reply, (void)arg; }

void srv_cluster_stop(srv_server *srv) {
  srv_cluster *k = srv->cluster;
  if (!k || k->stopping) return;
  /* A primary without a store takes its sessions with it: they leave the registry (relays
   * close them). A durable one keeps them: it comes back with them. */
  if (!k->relay && !srv->store)
    for (srv_session *x = srv->sessions; x; x = x->next) srv_publish_detach(k, x);
  if (srv_redis_ready(k->cmd)) { /* gone now, not a lease later */
    char key[160];
    size_t kl = srv_cluster_key(key, sizeof(key), NULL, "node:");
    snprintf(key + kl, sizeof(key) - kl, "%s", k->node_id);
    const char *argv[] = {"DEL", key};
    size_t lens[] = {3, strlen(key)};
    srv_redis_command(k->cmd, srv->cfg.redis_timeout_ms, on_lease_deleted, NULL, 2, argv, lens);
  }
  k->stopping = 1;
  srv->route_rpc = NULL;
  srv->route_edit = NULL;
  srv->route_join = NULL;
  srv->on_session_added = NULL;
  srv->on_session_removed = NULL;
  srv->on_joined = NULL;
  srv->on_texclip = NULL;
  srv_relay_stop(k);
  srv_cluster_tokens_stop(k);
  srv_presence_link_stop(k);
  srv_forward_fini(k);
  srv->on_conn_closed = NULL;
  if (uv_is_active((uv_handle_t *)&k->timer) || k->timer.data) {
    uv_timer_stop(&k->timer);
    uv_close((uv_handle_t *)&k->timer, NULL);
  }
  srv_redis_destroy(k->cmd);
  srv_redis_destroy(k->block);
  k->cmd = k->block = NULL;
  srv_publish_fini(k);
}

void srv_cluster_free(srv_server *srv) {
  srv_cluster *k = srv->cluster;
  if (!k) return;
  srv_cluster_stop(srv);
  srv_relay_fini(k);
  srv_cluster_tokens_fini(k);
  while (k->claims) free_claim(k, k->claims); /* opening when the server stopped */
  free(k->nodes);
  free_owners(k);
  srv->stats_extra = NULL;
  srv->cluster = NULL;
  free(k);
}
