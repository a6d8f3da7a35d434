/*
 * srv_conn.h — connections: sockets, writes, backpressure, TLS and WebSocket below, and delivery of shared
 * frames to one subscriber.
 */
#ifndef DEFORMD_SRV_CONN_H
#define DEFORMD_SRV_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "srv_caps.h"
#include "srv_frame.h"
#include "srv_grant.h"
#include "srv_server.h"

typedef struct srv_class srv_class;
typedef struct srv_session srv_session;
typedef struct srv_tls srv_tls;
typedef struct srv_transfer srv_transfer;
typedef struct srv_ws srv_ws;

/* SRV_CONN_HTTP: a connection on the HTTP port until it upgrades to a WebSocket, when it becomes
 * a stream or JSON-RPC connection like those of the TCP ports. */
typedef enum srv_conn_kind { SRV_CONN_STREAM = 1, SRV_CONN_RPC = 2, SRV_CONN_HTTP = 3 } srv_conn_kind;

/* What the transport that owns a connection does with it (srv_stream.c, srv_rpc_conn.c,
 * srv_http.c). */
typedef struct srv_conn_ops {
  void (*on_data)(srv_conn *c);    /* bytes were appended to c->rbuf */
  void (*on_drained)(srv_conn *c); /* everything queued was written (may be NULL) */
  void (*on_close)(srv_conn *c);   /* closing: let go of what refers to it (may be NULL) */
  /* Accepted over a limit or while stopping: say why in the transport's terms, then finish. */
  void (*refuse)(srv_conn *c, int srv_code, const char *why);
  /* One whole WebSocket message (a stream frame, a JSON-RPC request), on WebSocket connections,
   * instead of on_data (NULL: the transport has no WebSocket endpoint). */
  void (*on_message)(srv_conn *c, const uint8_t *p, size_t n);
} srv_conn_ops;

struct srv_conn {
  uv_tcp_t tcp; /* first: the handle's address is the connection's */
  srv_server *server;
  srv_conn_kind kind;
  const srv_conn_ops *ops;
  uint32_t id;
  int refs;     /* the handle holds one; jobs answering this connection hold one each */
  int closing;
  int finishing;            /* saying goodbye: no more reads, closed when written */
  int read_paused;          /* output over the soft limit: input waits (backpressure) */
  srv_tls *tls;             /* TLS below the transport (srv_tls.c), NULL in clear */
  uint8_t *tls_in;          /* ciphertext read, before decryption */
  srv_grant grant;          /* what it may do (srv_access.c) */
  srv_caps caps;            /* stream: the optional frame kinds it may be sent (srv_caps.c) */
  uint32_t auth_failures;   /* failed token attempts on this connection */
  int author_from_token;    /* its author is its token's user: hello and HELLO names are ignored */
  struct srv_transfer *transfer; /* rpc: an upload or download in progress (srv_transfer_rpc.c) */
  uint32_t author;          /* srv_authors id; 0 until named (srv_conn_author) */
  uint64_t accepted_at;     /* uv_now() at accept, at its latest HTTP request, or at its upgrade */
  uint64_t finish_deadline;
  char peer[64];

  uint8_t *rbuf; /* bytes received and not yet consumed */
  size_t rlen, rcap;
  size_t rcounted;          /* the part of rcap counted in srv_server.input_bytes */
  size_t wscounted;         /* ... and of the WebSocket message wslay is assembling */
  int input_full;           /* the server's input budget ran out while reading this one */
  uint64_t last_input_ms;   /* uv_now() when bytes last arrived (idle timeout) */

  /* stream connections */
  int hello_done;
  uint8_t role;
  uint16_t protocol;        /* the HELLO's protocol version */
  uint8_t codec;            /* what its frames are encoded with (srv_class_stat.codec) */
  float max_rate;           /* Hz granted, 0 = every change */
  int forward_only;         /* a relay's link for an editor's EDITs: no SNAPSHOT, no frames */
  int stat_slot;            /* its srv_stats.classes entry, -1 before HELLO */
  struct srv_class *cls;    /* the subscribers it shares frames with (srv_session.c) */
  srv_conn *join_next;      /* waiting for its codec's SNAPSHOT pieces (srv_session.c) */
  srv_session *session;
  srv_conn *sub_next;
  uint64_t sent_version;    /* the state version the queued frames bring the viewer to */
  size_t queued;            /* bytes handed to uv_write and not yet written */
  int lagging;              /* over the soft limit: frames are coalesced into a catch-up */
  uint64_t lagging_since;   /* uv_now() when it started lagging */

  /* rpc connections */
  int skipping;             /* discarding an oversized request up to its newline */

  /* HTTP-port connections */
  void *http;               /* the request parser until the upgrade (srv_http.c owns it) */
  srv_ws *ws;               /* after the upgrade: reads and writes are WebSocket messages */

  srv_conn *next, *prev;    /* the server's connection list */
};

/* A new connection handle in the server's list (not yet accepted: the listener calls uv_accept
 * on c->tcp, then srv_conn_start). Returns NULL when out of memory. */
srv_conn *srv_conn_create(srv_server *s, srv_conn_kind kind, const srv_conn_ops *ops);
/* Reads from the accepted socket; bytes go to ops->on_data. */
void srv_conn_start(srv_conn *c);
/* An HTTP connection whose upgrade was answered becomes a WebSocket of `kind` served by `ops`
 * (the same transports as the TCP ports, messages to ops->on_message); bytes already read after
 * the request (c->rbuf) are its first. Returns 0 or SRV_EINTERNAL (the caller fails it). */
int srv_conn_upgrade(srv_conn *c, srv_conn_kind kind, const srv_conn_ops *ops);
/* The author of what the connection changes: the name it gave (hello), else
 * anonymous-<connection id> (interned on first use). */
uint32_t srv_conn_author(srv_conn *c);
/* Queues `f` on the connection (takes a new reference). Returns 0 or a negative errno
 * (UV_EPERM: a frame of a kind whose capability it was not granted, srv_caps.h). */
int srv_conn_send(srv_conn *c, srv_frame *f);
/* Queues raw bytes that are copied (replies, errors). */
int srv_conn_send_copy(srv_conn *c, const void *data, size_t len);
/* Sends several frames as one write (SNAPSHOT head + shared mesh part + state part). */
int srv_conn_send_parts(srv_conn *c, srv_frame **parts, int n);
/* Sends an ERROR frame (code PROTO_ERR_*, naming request_id or 0) on a stream connection. The
 * one place ERROR frames are built. */
void srv_conn_send_error(srv_conn *c, uint16_t code, uint32_t request_id, const char *message);
/* Sends an ERROR (stream connections; best effort, never waits for a slow peer) and closes the
 * connection. */
void srv_conn_fail(srv_conn *c, uint16_t code, const char *message);
/* Sends `last` (may be NULL), stops reading, and closes once it is written (or after 2 s). */
void srv_conn_finish(srv_conn *c, srv_frame *last);
void srv_conn_close(srv_conn *c);
void srv_conn_ref(srv_conn *c);
void srv_conn_unref(srv_conn *c);
/* Fan-out to one subscriber (invariants 1, 3 and 7 of docs/architecture.md: `version` is never
 * behind the version it was sent last): queues `f`, which brings it to `version`, or
 * marks it lagging (f NULL, or over the soft limit) so that it is caught up once drained; over
 * the hard limit it is dropped with an ERROR. */
void srv_conn_deliver(srv_conn *c, srv_frame *f, uint64_t version);
/* The srv_stats.classes slot for (codec, rate), made when new. */
int srv_conn_stat_slot(srv_server *s, uint8_t codec, float rate);

#endif
