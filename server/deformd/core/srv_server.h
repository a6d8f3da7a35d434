/*
 * srv_server.h — the server's state: the struct every layer reaches the loop, the settings, the tables and
 * the hooks through. Its functions are in ../srv_server.c (deformd.h); each hook is how a lower
 * layer hands work up to a higher one.
 */
#ifndef DEFORMD_SRV_SERVER_H
#define DEFORMD_SRV_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <cjson/cJSON.h>

#include "proto.h"
#include "srv_data.h"
#include "srv_import.h"
#include "srv_config.h"
#include "srv_author.h"
#include "srv_grant.h"

typedef struct srv_before srv_before;
typedef struct srv_cluster srv_cluster;
typedef struct srv_conn srv_conn;
typedef struct srv_op srv_op;
typedef struct srv_rpc_call srv_rpc_call;
typedef struct srv_session srv_session;
typedef struct srv_store srv_store;
typedef struct srv_tls_ctx srv_tls_ctx;

typedef struct srv_conn srv_conn;
typedef struct srv_server srv_server;
struct srv_frame;   /* base/srv_frame.h */
struct srv_texclip; /* session/srv_texclip.h */
/* A token stored in (or taken back from) the cluster: status 0 with its id, or an SRV_E* code
 * with the reason. */
typedef void (*srv_token_done_cb)(srv_server *s, void *arg, int status, int64_t id, const char *why);
typedef struct srv_session srv_session;

/* Bytes handed to stream sockets for one kind of viewer: a codec (0: protocol version 1;
 * 1 + shift: version 2 on that grid, shift 0 lossless) at a rate (Hz, 0 = every change). */
typedef struct srv_class_stat {
  uint8_t codec;
  float rate;
  uint32_t viewers;          /* connected now */
  uint64_t bytes, frames;
} srv_class_stat;
#define SRV_CLASS_STATS 64   /* kinds of viewer counted (later ones share the last slot) */

typedef struct srv_stats {
  uint64_t frames_sent, bytes_sent, frames_coalesced, clients_dropped, catchups_sent;
  uint64_t connections_accepted, connections_refused, rpc_requests, rpc_errors;
  uint64_t blend_factorisations, blend_solves, blend_fits; /* srv_blend.c */
  uint64_t presence_updates, presence_skipped; /* srv_presence.c: frames sent, frames not sent to a slow one */
  /* Stream bytes by message type (index = proto_type; a SNAPSHOT counts whole), and by viewer
   * class (srv_conn.c counts them as they are handed to the socket). */
  uint64_t type_bytes[PROTO_LAST_TYPE + 1], type_frames[PROTO_LAST_TYPE + 1];
  srv_class_stat classes[SRV_CLASS_STATS];
  uint32_t class_count;
} srv_stats;

/* A stored session that did not restore (srv_server.c): its rows stay as they are. */
typedef struct srv_damaged {
  char *name, *why; /* why NULL: a name kept from reuse, not damaged (srv_session_reserve_name) */
  int64_t store_id;
  srv_session *readable; /* the state the records before the damage make (referenced), or NULL */
} srv_damaged;

struct srv_server {
  uv_loop_t *loop;
  srv_config cfg;
  uv_tcp_t stream_listener[SRV_MAX_LISTEN], rpc_listener[SRV_MAX_LISTEN];
  uv_tcp_t http_listener[SRV_MAX_LISTEN]; /* when cfg.http_port >= 0 */
  int stream_listeners, rpc_listeners, http_listeners; /* open: one per --listen address bound */
  int stream_port, rpc_port, http_port; /* as bound (the ports asked for may be 0) */
  uint32_t opening;          /* command-line sessions not open yet: the ports line waits for them */
  uv_signal_t sigint, sigterm;
  uv_timer_t tick; /* slow-connection checks */
  srv_session *sessions;
  uint32_t session_count;
  srv_conn *conns;
  uint32_t conn_count;
  uint32_t next_conn_id;
  int pending_jobs;
  int stopping;
  size_t input_bytes;        /* connections' read buffers beyond 64 KiB each (max_input_total) */
  size_t trim_freed;         /* gesture memory freed since the heap was last trimmed (srv_gesture.c) */
  int trim_running;
  int prep_running;          /* a session's gesture preparation is on the pool (srv_job_gesture_prep): one at a time */
  uint64_t started_ms;
  srv_stats stats;
  proto_limits limits;
  srv_importer importer;     /* import workers (srv_import.c) */
  uv_timer_t anim_timer;     /* playback and recording (srv_anim_play.c), running only while needed */
  int anim_timer_init, anim_timer_on;
  uint64_t anim_last_ms;
  /* What else a closing session must stop (its gestures, strokes, solves, player): set by
   * srv_server.c, called by srv_session_close. */
  void (*on_session_close)(srv_session *s);
  /* Every applied operation, with what it changed as it was before (srv_history.c records it
   * for undo and the store): set by srv_server.c, called by srv_session_apply. */
  void (*on_applied)(srv_server *srv, srv_session *s, const srv_op *op, uint64_t version,
                     const srv_before *before);
  /* A stroke or a drag of the session was applied (or failed): undo and redo that waited for
   * their author's edits may run now (srv_history_wait.c). Set by srv_server.c. */
  void (*on_edits_settled)(srv_server *srv, srv_session *s);
  srv_store *store;          /* NULL: memory only (--data none) */
  srv_authors authors;
  int64_t next_session_id;   /* the store's session ids */
  uint64_t retention_ms;     /* uv_now() of the last --history-days pass */
  srv_damaged *damaged;      /* stored sessions that did not restore: listed, not served, names kept */
  uint32_t damaged_count;
  srv_access access;         /* tokens and who may do what (srv_access.c) */
  srv_data data;             /* the folders clients name files in (srv_data.c) */
  srv_tls_ctx *tls;          /* TLS on every port (NULL: none) */
  char *node_token;          /* --redis: the administrator's token, kept to reach other nodes
                              * (srv_forward.c); NULL otherwise (it is wiped once hashed) */
  /* Many machines (--redis, srv_registry.c). The hooks below are NULL on a single node; each is
   * how a lower layer hands a request up to the cluster layer. */
  struct srv_cluster *cluster;
  struct srv_face *face;     /* live face inputs and mappings (session/srv_face.c) */
  struct srv_face_udp *face_udp; /* their sockets (ports/srv_face_udp.c); NULL when none is on */
  /* srv_methods_dispatch, after the access check: nonzero when the call was taken (sent to
   * the session's owner, or placed on another node). */
  int (*route_rpc)(srv_server *s, struct srv_rpc_call *call, const char *method, cJSON *params);
  /* srv_stream.c: an EDIT frame (header included) on a connection whose session this node
   * does not own; nonzero when taken. */
  int (*route_edit)(srv_conn *c, const uint8_t *frame, size_t len);
  /* srv_stream.c: a HELLO for a session this node does not hold; nonzero when taken (a relay
   * loads the session, then calls `again` with the same HELLO, or fails the connection). */
  int (*route_join)(srv_conn *c, const char *session, const uint8_t *hello, size_t n,
                    void (*again)(srv_conn *c, const uint8_t *hello, size_t n));
  void (*on_session_added)(srv_server *s, srv_session *x); /* srv_session_add */
  void (*on_session_removed)(srv_server *s, srv_session *x); /* srv_session_close */
  void (*on_conn_closed)(srv_conn *c);  /* both transports' on_close */
  void (*on_joined)(srv_conn *c);       /* a viewer got its SNAPSHOT */
  void (*stats_extra)(srv_server *s, cJSON *r); /* server.stats */
  /* srv_presence.c: each update's records about this node's own participants, for the other
   * nodes of the session (cluster/srv_presence_link.c); `full` when they are the whole list. */
  void (*on_presence)(srv_server *s, srv_session *x, const uint8_t *p, size_t n, int full);
  /* srv_texclip.c: a texture clip joined the session (`clip`), or what the texture clips show
   * changed (`weights`, the TEXWEIGHTS frame sent): for the relays (cluster/srv_publish.c). */
  void (*on_texclip)(srv_server *s, srv_session *x, const struct srv_texclip *clip, const struct srv_frame *weights);
  /* srv_token_rpc.c, srv_access.c: with --redis tokens are the cluster's (srv_cluster_tokens.c).
   * token_create stores a new token's record (never the token) in Redis and calls done with
   * its id, unique in the cluster; token_revoke takes a token back on every node (done may be
   * NULL: nobody waits). Each returns 0 (done runs later) or SRV_EBUSY with the reason in why
   * (done never runs). */
  int (*token_create)(srv_server *s, const srv_token *record, srv_token_done_cb done, void *arg, char *why,
                      size_t whylen);
  int (*token_revoke)(srv_server *s, int64_t id, srv_token_done_cb done, void *arg, char *why, size_t whylen);
};

#endif
