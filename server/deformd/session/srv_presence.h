/*
 * srv_presence.h — who is in a session and where each one works: participants (every stream
 * connection that joined, and JSON-RPC clients that said presence.set), their cursors, brush
 * circles, tools and cameras, sent as PRESENCE frames (docs/protocol.md §16) to the
 * connections granted the capability "presence".
 *
 * Presence is ephemeral (docs/architecture.md, "Presence"): it is not an operation, bumps no
 * version, never reaches the store, the history or the durable Redis stream; a late joiner
 * gets the participants as they are now, not a log.
 *
 * DOES NOT encode records (protocol/proto_presence.c), decide capabilities (net/srv_caps.c),
 * or carry presence between nodes (cluster/srv_presence_link.c does, through the hooks here).
 */
#ifndef DEFORMD_SRV_PRESENCE_H
#define DEFORMD_SRV_PRESENCE_H

#include <stddef.h>
#include <stdint.h>

#include "proto_presence.h"
#include "srv_conn.h"

typedef struct srv_session srv_session;
typedef struct srv_presence srv_presence;

/* The newest state of each sender is sent at most this often (Hz): changes in between
 * coalesce, the latest wins. */
#define SRV_PRESENCE_HZ 60
#define SRV_PRESENCE_PERIOD_MS 16

/* One participant as srv_presence_at shows it. */
typedef struct srv_participant_view {
  uint32_t id;          /* its connection's id (WELCOME's client_id), or a remote one (high bit) */
  const char *author;
  uint8_t role, client, flags; /* PROTO_ROLE_*, proto_client_kind, PROTO_PRES_EDITING|PRIVATE|REMOTE */
  uint64_t idle_ms;
  int has_state;        /* `state` holds what it last shared */
  proto_presence_state state;
} srv_participant_view;

/* A stream connection joined `s` as `role`; `wants` when it was granted "presence", and then it
 * is sent the participants now (CLEAR, INFO and STATE of each) and every change after. The
 * others hear of it in the next update. Returns 0 or SRV_EINTERNAL (out of memory: it is not
 * listed). */
int srv_presence_join(srv_session *s, srv_conn *c, uint8_t role, int wants);
/* The connection closed or left: the others hear it left. A no-op for one that is in no list. */
void srv_presence_leave(srv_server *srv, srv_conn *c);
/* A PRESENCE frame's payload from `c` (granted "presence", joined `s`): STATE and ABOUT records.
 * Returns 0, or a PROTO_E* code with the reason in why (the port answers ERROR; nothing of the
 * frame is kept). */
int srv_presence_frame(srv_session *s, srv_conn *c, const uint8_t *p, size_t n, char *why, size_t whylen);
/* presence.set from a JSON-RPC connection: it becomes a participant of `s` (client kind JSON,
 * role from its grant) until it closes or sets on another session; `state` (NULL: keep) and
 * `private_` (-1: keep) as a STATE and an ABOUT would. Returns 0 or SRV_EINTERNAL. */
int srv_presence_set(srv_session *s, srv_conn *c, uint8_t role, const proto_presence_state *state, int private_);
/* `c` is recorded under another author now (EDIT AUTHOR, hello): the others are told. */
void srv_presence_renamed(srv_server *srv, srv_conn *c);
/* `c` edited `s`: its idle time starts again. */
void srv_presence_touch(srv_session *s, const srv_conn *c);
/* `c` drained its output: a frame skipped while it was slow is made good with the whole list. */
void srv_presence_drained(srv_conn *c);
/* The session closes: every participant goes (nothing is sent), the timer closes. */
void srv_presence_close(srv_session *s);

/* The participants of `s`, in the order they joined: 0 <= i < srv_presence_count(s). */
uint32_t srv_presence_count(const srv_session *s);
int srv_presence_at(const srv_session *s, uint32_t i, uint64_t now_ms, srv_participant_view *out);

/* ---- between nodes (cluster/) ---------------------------------------------------------------- */

/* Each update's records about this node's own participants (INFO, LEAVE, STATE; never CLEAR),
 * for the cluster to pass on: `p` is valid during the call. `full` is 1 when the records are
 * the whole list of this node's participants (after srv_presence_publish_all). Set on the
 * server by the cluster layer (srv_server.on_presence). */
typedef void (*srv_presence_out_fn)(srv_server *srv, srv_session *s, const uint8_t *p, size_t n, int full);
/* The next update carries every local participant (INFO and STATE) to the cluster: another
 * node joined the session or lost track. */
void srv_presence_publish_all(srv_session *s);
/* Records from another node (`node` names it; its participants' ids are its own): applied as
 * remote participants, whose ids here get the high bit. `full`: the records are that node's
 * whole list (the others it had are gone). Returns 0 or a PROTO_E* code (nothing applied). */
int srv_presence_remote(srv_server *srv, srv_session *s, const char *node, const uint8_t *p, size_t n, int full);
/* A node is gone: its participants leave. */
void srv_presence_remote_gone(srv_session *s, const char *node);

#endif
