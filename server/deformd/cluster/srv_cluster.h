/*
 * srv_cluster.h — what deformd's files for many machines share: the Redis link (srv_redis.c),
 * outgoing connections (srv_link.c), lookups in the shared state (srv_cluster.c), a primary's
 * publishing (srv_publish.c), a relay's
 * following (srv_relay.c), forwarding to the owner (srv_forward.c), the cluster's access tokens
 * (srv_cluster_tokens.c), and the node, its lease,
 * the registry and placement (srv_registry.c), in that order of layers: each file calls only
 * into the ones listed before it and into the folders below cluster/; a lower one hands work back up
 * through a callback.
 *
 * Redis keys (prefix "deformd:"; docs/operations.md lists them for operators):
 *   nodes                 set of node ids that ever joined
 *   node:<id>             the node's lease: JSON {stream, rpc, relay, sessions, viewers}, PX lease
 *   sessions              hash: session name -> owning node id
 *   s:<name>:meta         hash: epoch, seq (the stream's last sequence), owner, version
 *   s:<name>:stream       the stream: entries <seq>-0 {e: epoch, v: version, r: operation record}, or
 *                         {e, v, t: "c" a texture clip / "w" texture weights, n: its name, b: bytes}
 *   s:<name>:snap         hash: epoch, seq, version, state (a checkpoint, srv_record.c)
 *   s:<name>:mesh         the session's mesh as imported (mesh_blob), written with each epoch
 *   s:<name>:tex          hash: "c:<clip>" a texture clip's stored body, "w:" the last TEXWEIGHTS
 *   tokens                hash: token id -> its record (JSON: hex SHA-256, role, session, user,
 *                         created; never the token)
 *   tokens:next           the last token id given; tokens:revoked  set of ids taken back
 *   tokens:seq, tokens:log  the tokens' change stream: <seq>-0 {op, id, rec}
 *   presence:<name>       a pub/sub channel (never a key): each node's presence records for
 *                         the session (srv_presence_link.c); nothing of it is stored
 *
 * DOES NOT hold session state: sessions stay srv_session (session/srv_session.h); these files move them.
 */
#ifndef DEFORMD_SRV_CLUSTER_H
#define DEFORMD_SRV_CLUSTER_H

#include "srv_server.h"
#include "srv_conn.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_rpc.h"
typedef struct srv_link srv_link;
typedef struct srv_redis srv_redis;

#include <hiredis/hiredis.h>

/* ---- the Redis link (srv_redis.c) ------------------------------------------------------------- */

typedef struct srv_redis srv_redis;

typedef struct srv_redis_url {
  char host[256];
  int port;
  int db;
  char password[128];
} srv_redis_url;

typedef struct srv_redis_stats {
  uint64_t connects, disconnects, stalls, commands, errors;
} srv_redis_stats;

/* ready: 1 once connected (AUTH and SELECT sent), 0 when the connection is lost. */
typedef void (*srv_redis_state_cb)(srv_redis *r, int ready, void *arg);
/* reply: valid during the call; NULL when the connection went away first. */
typedef void (*srv_redis_reply_cb)(srv_redis *r, redisReply *reply, void *arg);

/* Parses redis://[:PASSWORD@]HOST[:PORT][/DB]. Returns 0 or SRV_EPARAMS with a reason. */
int srv_redis_parse_url(const char *url, srv_redis_url *out, char *err, size_t errlen);
/* Starts connecting (and reconnecting, with backoff, for as long as it lives). `name` is for
 * logs. Returns 0 or SRV_EINTERNAL. */
int srv_redis_create(uv_loop_t *loop, const srv_redis_url *url, const char *name, srv_redis_state_cb cb, void *arg,
                     srv_redis **out);
/* Closes; commands in flight are answered NULL; freed once its handles have closed. */
void srv_redis_destroy(srv_redis *r);
/* Sends a command (argv copied). It must be answered within timeout_ms or the watchdog drops
 * the connection. Returns 0, SRV_EBUSY (not connected) or SRV_ELIMIT / SRV_EINTERNAL. */
int srv_redis_command(srv_redis *r, uint32_t timeout_ms, srv_redis_reply_cb cb, void *arg, int argc,
                      const char **argv, const size_t *lens);
/* Turns the connection into a subscriber of the channels matching `pattern` (PSUBSCRIBE; it
 * carries no other command from then on): cb gets each message's channel and payload, valid
 * during the call. The subscription goes with the connection: subscribe again when the state
 * callback says ready. No watchdog deadline (a subscription is never "answered"). Returns 0 or
 * SRV_EBUSY (not connected). */
typedef void (*srv_redis_message_cb)(srv_redis *r, const char *channel, size_t clen, const char *msg, size_t mlen,
                                     void *arg);
int srv_redis_psubscribe(srv_redis *r, const char *pattern, srv_redis_message_cb cb, void *arg);
int srv_redis_ready(const srv_redis *r);
uint32_t srv_redis_in_flight(const srv_redis *r);
void srv_redis_get_stats(const srv_redis *r, srv_redis_stats *out);
/* Drops the connection now (it reconnects after the backoff). */
void srv_redis_drop(srv_redis *r);

/* ---- outgoing connections (srv_link.c) -------------------------------------------------------- */

typedef struct srv_link srv_link;

typedef struct srv_link_ops {
  void (*on_data)(srv_link *l, const uint8_t *p, size_t n); /* bytes arrived */
  void (*on_close)(srv_link *l, const char *why);           /* failed or closed; l is freed after */
} srv_link_ops;

/* Connects to a numeric "HOST:PORT" (never a name: no lookup on the loop). Bytes written
 * before the connection is up are queued. Returns NULL when the address does not parse or
 * memory runs out. */
srv_link *srv_link_open(uv_loop_t *loop, const char *hostport, const srv_link_ops *ops, void *data);
int srv_link_write(srv_link *l, const void *p, size_t n); /* copies */
void srv_link_close(srv_link *l);                          /* on_close is not called */
void *srv_link_data(const srv_link *l);

/* ---- the cluster's state (owned by srv_registry.c) ------------------------------------------- */

#define SRV_NODE_ID_MAX 96

typedef struct srv_node {
  char id[SRV_NODE_ID_MAX];
  char stream[96], rpc[96]; /* numeric HOST:PORT */
  int relay;
  uint32_t sessions, viewers;
  int alive;                /* its lease is in Redis */
} srv_node;

typedef struct srv_owner {
  char *session;
  char node[SRV_NODE_ID_MAX];
} srv_owner;

typedef struct srv_cluster_stats {
  uint64_t published, publish_failures, snapshots, epochs, applied, reloads, gaps, forwarded_rpc,
      forwarded_edits, placements, claims_refused, epochs_refused, replicas_dropped;
} srv_cluster_stats;

/* Lua, shared by the claim of a name (srv_registry.c) and a new epoch (srv_publish.c): refuses
 * with "OWNED <node>" when another node owns the session — by its meta's `owner` or the
 * registry — and that node's lease is alive, unless the session is closed (a tombstone).
 * KEYS[1] is the meta, KEYS[5] the registry; ARGV[1] this node, ARGV[2] the session,
 * ARGV[3] the lease keys' prefix ("deformd:node:"). */
#define SRV_LUA_OWNED_CHECK                                                                        \
  "local m = redis.call('HMGET', KEYS[1], 'owner', 'closed')\n"                                   \
  "for _, o in ipairs({m[1], redis.call('HGET', KEYS[5], ARGV[2])}) do\n"                         \
  "  if o and o ~= ARGV[1] and m[2] ~= '1' and redis.call('EXISTS', ARGV[3] .. o) == 1 then\n"    \
  "    return redis.error_reply('OWNED ' .. o)\n"                                                 \
  "  end\n"                                                                                       \
  "end\n"

typedef struct srv_cluster {
  srv_server *srv;
  int relay;
  char node_id[SRV_NODE_ID_MAX];
  char stream_addr[96], rpc_addr[96]; /* what other nodes connect to */
  srv_redis_url url;
  srv_redis *cmd;            /* commands: publishing, registry, lease, loads */
  srv_redis *block;          /* relays: XREAD BLOCK */
  uv_timer_t timer;          /* every 250 ms: lease, registry survey, relay checks */
  uint64_t last_lease, last_survey;
  int survey_in_flight;
  int surveyed;              /* a survey has answered since start */
  srv_node *nodes;
  uint32_t node_count;
  srv_owner *owners;
  uint32_t owner_count;
  struct srv_pub *pubs;      /* srv_publish.c */
  struct srv_follow *follows;/* srv_relay.c */
  uint64_t block_client_id;  /* CLIENT ID of `block` (to unblock its XREAD) */
  int reading;               /* an XREAD is in flight */
  struct srv_fwd *fwds;      /* srv_forward.c */
  struct srv_ctokens *tokens;/* srv_cluster_tokens.c */
  struct srv_claim *claims;  /* srv_registry.c: names claimed for a session.create not open yet */
  struct srv_plink *plink;   /* srv_presence_link.c */
  srv_conn *resuming;        /* srv_relay.c: its HELLO runs again now that the session is loaded */
  srv_cluster_stats stats;
  int stopping;
} srv_cluster;

/* srv_cluster.c. Keys: "deformd:s:<session>:<what>", or "deformd:<what>" without a session,
 * into buf. Returns its length. */
size_t srv_cluster_key(char *buf, size_t len, const char *session, const char *what);
/* The node that owns `session` by the last survey, or NULL. */
const srv_node *srv_cluster_owner(const srv_cluster *k, const char *session);
const srv_node *srv_cluster_node(const srv_cluster *k, const char *id);

/* ---- a primary's publishing (srv_publish.c) --------------------------------------------------- */

/* A session of this primary starts being published: a new epoch (its mesh and a snapshot)
 * once Redis is there, then every applied operation. */
void srv_publish_attach(srv_cluster *k, srv_session *s);
/* The session closed: its keys go and the registry forgets it. */
void srv_publish_detach(srv_cluster *k, srv_session *s);
/* `name` leaves Redis if this node owns it there: its stream, snapshot and mesh go, the registry
 * forgets it, and its meta is a tombstone for a minute (relays close their replica). Nothing
 * happens when another node owns it. */
void srv_publish_release(srv_cluster *k, const char *name);
/* srv_server.on_applied (after the history's): the operation's record to the stream. */
void srv_publish_applied(srv_cluster *k, srv_session *s, const srv_op *op, uint64_t version,
                         const srv_before *before);
/* srv_server.on_texclip on a primary: a new texture clip (its stored body) or the TEXWEIGHTS
 * frame shown now, to the session's "tex" hash and its stream. */
void srv_publish_texclip(srv_server *srv, srv_session *s, const struct srv_texclip *clip,
                         const struct srv_frame *weights);
/* Redis came back (or went): every session starts a new epoch when it is back. */
void srv_publish_redis_state(srv_cluster *k, int ready);
void srv_publish_tick(srv_cluster *k);
void srv_publish_fini(srv_cluster *k);
cJSON *srv_publish_stats(const srv_cluster *k);

/* ---- a relay's following (srv_relay.c) -------------------------------------------------------- */

/* After a survey: know every session the registry lists (a replica is loaded when a viewer asks
 * for it), let go of those it no longer does, and tell viewers when an owner's lease is gone
 * ("primary lost") or back. */
void srv_relay_sync(srv_cluster *k);
void srv_relay_redis_state(srv_cluster *k, srv_redis *r, int ready);
void srv_relay_tick(srv_cluster *k);
/* A viewer joined a replica: told at once when its primary is lost. */
void srv_relay_joined(srv_cluster *k, srv_conn *c);
/* srv_server.route_join on a relay: a HELLO for a session the registry lists and this relay
 * has not loaded waits while it loads and catches up with its stream, then runs again through
 * `again`; or the connection is failed with the reason. Returns 0 for a session the relay does
 * not know (the HELLO answers "unknown session"). */
int srv_relay_join(srv_cluster *k, srv_conn *c, const char *name, const uint8_t *hello, size_t n,
                   void (*again)(srv_conn *c, const uint8_t *hello, size_t n));
/* A read for a session whose primary cannot answer it: 0 when the replica answers now (the
 * caller lets the method run), 1 when the call waits for the replica to load (it is taken and
 * dispatched again once loaded, or answered with the reason), -1 when the relay does not follow
 * the session. */
int srv_relay_read(srv_cluster *k, srv_rpc_call *call, const char *method, const cJSON *params, const char *name);
/* A connection closed: the join or reads it was waiting for are let go. */
void srv_relay_conn_closed(srv_cluster *k, srv_conn *c);
/* Stopping: every waiting join and read is answered. */
void srv_relay_stop(srv_cluster *k);
void srv_relay_fini(srv_cluster *k);
cJSON *srv_relay_stats(const srv_cluster *k);
int srv_relay_is_replica(const srv_cluster *k, const srv_session *s);

/* ---- forwarding to the owner (srv_forward.c) ------------------------------------------------- */

/* A JSON-RPC request for `node`: sent over this connection's own link to that node (opened
 * with auth and the connection's author first); its answer comes back verbatim. Takes `call`. */
void srv_forward_rpc(srv_cluster *k, const srv_node *node, srv_rpc_call *call, const char *method,
                     const cJSON *params);
/* A binary EDIT frame (header included) from an editor on a replica, to the session's owner. */
void srv_forward_edit(srv_cluster *k, const srv_node *node, srv_conn *c, const uint8_t *frame, size_t len);
/* The connection closed: its links close. */
void srv_forward_conn_closed(srv_cluster *k, srv_conn *c);
/* The author name a connection gave (hello): replayed on its links. */
void srv_forward_fini(srv_cluster *k);

/* ---- the cluster's access tokens (srv_cluster_tokens.c) --------------------------------------- */

/* Its own Redis connection (a sync when it comes up, then the change stream), and the server's
 * token_create / token_revoke hooks. Returns 0 or SRV_EINTERNAL. */
int srv_cluster_tokens_start(srv_cluster *k);
/* The command connection lost Redis: the tokens' connection is dropped too (and syncs again
 * when it is back), whether or not it noticed itself (a blocked read may not, until its
 * deadline). */
void srv_cluster_tokens_redis_lost(srv_cluster *k);
/* Every tick: a sync that failed runs again; reading resumes. */
void srv_cluster_tokens_tick(srv_cluster *k);
/* Stopping: the hooks go, the connection closes (changes in flight are answered). */
void srv_cluster_tokens_stop(srv_cluster *k);
void srv_cluster_tokens_fini(srv_cluster *k);
cJSON *srv_cluster_tokens_stats(const srv_cluster *k); /* server.stats cluster.tokens (caller frees) */

/* ---- presence between nodes (srv_presence_link.c) --------------------------------------------- */

/* Its own Redis connection, subscribed to every session's presence channel, and the server's
 * on_presence hook (this node's participants' records PUBLISHed on the command connection).
 * Returns 0 or SRV_EINTERNAL. */
int srv_presence_link_start(srv_cluster *k);
/* Every tick: each session's whole list of this node's participants once a second (a node
 * that joined or missed a message is made exact by it), and the participants of a node not
 * heard from in 5 s dropped. */
void srv_presence_link_tick(srv_cluster *k);
void srv_presence_link_stop(srv_cluster *k);
cJSON *srv_presence_link_stats(const srv_cluster *k); /* server.stats cluster.presence (caller frees) */

/* ---- the node, the registry, placement (srv_registry.c) --------------------------------------- */

/* Starts the cluster side of a server started with --redis (after its listeners). Returns 0 or
 * an SRV_E* code with a reason logged. */
int srv_cluster_start(srv_server *srv, int stream_port, int rpc_port);
/* Stops: the lease goes, links and Redis connections close (gracefully: what was sent is
 * flushed). The state is freed by srv_cluster_free once the loop has ended. */
void srv_cluster_stop(srv_server *srv);
void srv_cluster_free(srv_server *srv);

#endif
