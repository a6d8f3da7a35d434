/*
 * srv_conn.h — connections: sockets, writes, backpressure, TLS and WebSocket below, and delivery of shared
 * frames to one subscriber.
 *
 * What every connection has is here: its socket, server, kind and transport (ops), references,
 * closing and finishing, its read buffer and input accounting, TLS, WebSocket, grant and author,
 * peer, and its output (queued bytes, the class its bytes are counted in, the lagging state
 * srv_conn_deliver decides with).
 *
 * State of the layers above net/ hangs off typed opaque pointers, one per module that keeps
 * some on a connection: net/ declares each type and never looks inside, and that module alone
 * makes, reads and frees it (NULL until it made one):
 *   stream    ports/srv_stream.c      HELLO's answer: role, protocol, codec, rate, relay link
 *   rpc       ports/srv_rpc_conn.c    the request-line reader
 *   http      ports/srv_http.c        the request parser, until an upgrade
 *   sub       session/srv_fanout.c    the session it joined and its place in the fan-out
 *   transfer  rpc/srv_transfer_rpc.c  an upload or download in progress
 * Each is freed by its owner at the close (ops->on_close: the HTTP parser, the line reader, a
 * transfer) or with the handle (ops->on_free, after the last reference: the stream port's and
 * the fan-out's, kept past the close so that nothing still holding a reference to a closed
 * connection finds them gone). Neither this header nor net/ includes an owner's header: other
 * modules reach a pointer only through its owner's functions (srv_fanout_session(c), ...).
 *
 * The other way round, the layers above write a few of net/'s fields: `stage` (how far HELLO
 * let the connection in) and `stat_slot` (which class its bytes are counted in) by the stream
 * port; `sent_version` and `lagging` once a lagging viewer caught up (srv_stream.c,
 * srv_fanout.c).
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

typedef struct srv_tls srv_tls;
typedef struct srv_ws srv_ws;
typedef struct srv_stream_conn srv_stream_conn; /* ports/srv_stream.c */
typedef struct srv_rpc_port srv_rpc_port;       /* ports/srv_rpc_conn.c */
typedef struct srv_http_conn srv_http_conn;     /* ports/srv_http.c */
typedef struct srv_subscriber srv_subscriber;   /* session/srv_fanout.c */
typedef struct srv_transfer srv_transfer;       /* rpc/srv_transfer_rpc.c */

/* SRV_CONN_HTTP: a connection on the HTTP port until it upgrades to a WebSocket, when it becomes
 * a stream or JSON-RPC connection like those of the TCP ports. */
typedef enum srv_conn_kind { SRV_CONN_STREAM = 1, SRV_CONN_RPC = 2, SRV_CONN_HTTP = 3 } srv_conn_kind;

/* How far a stream connection's transport has let it in (srv_stream.c sets it at HELLO), for
 * what net/, access/ and the tick apply to it: the input limit (max_unauth_input until it is
 * an editor), the hello timeout, the BYE at shutdown, the close when its token is revoked.
 * JSON-RPC connections stay at SRV_STAGE_GREETING: their trust is their grant. */
typedef enum srv_conn_stage {
  SRV_STAGE_GREETING = 0, /* before HELLO */
  SRV_STAGE_VIEWER = 1,   /* joined (or joining) as a viewer: sends only small frames */
  SRV_STAGE_EDITOR = 2    /* ... as an editor: may send whole frames */
} srv_conn_stage;

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
  /* The handle is being freed (its last reference went): free the state the transport hung on
   * it (may be NULL). */
  void (*on_free)(srv_conn *c);
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
  srv_conn_stage stage;     /* set by the transport (stream connections) */
  srv_tls *tls;             /* TLS below the transport (srv_tls.c), NULL in clear */
  uint8_t *tls_in;          /* ciphertext read, before decryption */
  srv_grant grant;          /* what it may do (srv_access.c) */
  srv_caps caps;            /* stream: the optional frame kinds it may be sent (srv_caps.c) */
  uint32_t auth_failures;   /* failed token attempts on this connection */
  int author_from_token;    /* its author is its token's user: hello and HELLO names are ignored */
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

  /* output */
  size_t queued;            /* bytes handed to uv_write and not yet written */
  int stat_slot;            /* stream connections: its srv_stats.classes entry, -1 before it joined */
  uint64_t sent_version;    /* the state version the queued frames bring the viewer to */
  int lagging;              /* over the soft limit: frames are coalesced into a catch-up */
  uint64_t lagging_since;   /* uv_now() when it started lagging */

  srv_ws *ws;               /* after an upgrade: reads and writes are WebSocket messages */

  /* the layers above (see the top of this file) */
  srv_stream_conn *stream;
  srv_rpc_port *rpc;
  srv_http_conn *http;
  srv_subscriber *sub;
  srv_transfer *transfer;

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
