/*
 * vw_net.h — the viewer's connection to a deformd stream port, polled once per rendered frame.
 *
 * It keeps a replica of the session (server/client.h client_replica: mesh, weights, sculpt
 * offsets, target settings) and tells the renderer what changed since the last poll, so the GPU
 * gets only that: new weights, the vertex range of sculpt offsets that moved, new targets, or a
 * whole new snapshot (after a reconnect). It measures bytes/s and the round trip of PING/PONG,
 * and sends the edits of the sculpting UI (only when the server granted the editor role).
 *
 * When the server goes away the replica stays (the viewer keeps showing the last shape) and the
 * connection is retried with exponential backoff (0.25 s doubling to 8 s); a successful HELLO
 * brings a fresh SNAPSHOT, reported as `snapshot` in the changes.
 *
 * DOES NOT block: vw_net_poll reads what the socket has and returns. DOES NOT touch GL.
 */
#ifndef DEFORMD_VW_NET_H
#define DEFORMD_VW_NET_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "client_replica.h"
#include "proto.h"
#include "vw_presence.h"

typedef enum vw_net_state {
  VW_NET_CONNECTING = 0, /* connecting or waiting for WELCOME + SNAPSHOT */
  VW_NET_LIVE = 1,       /* following the session */
  VW_NET_DOWN = 2        /* lost; retrying at `retry_at_ms` */
} vw_net_state;

/* What changed in the replica since the previous poll. */
typedef struct vw_net_changes {
  int snapshot;             /* a new SNAPSHOT replaced everything (upload it all) */
  int weights;              /* some weight changed */
  uint32_t new_targets;     /* targets appended at the end (TARGET frames) */
  int target_meta;          /* a target's range, mute or drivers changed */
  uint32_t offsets_first;   /* sculpt offsets changed in [offsets_first, offsets_end): the span
                             * of the DELTA entries (a catch-up DELTA lists whole 64-vertex
                             * blocks, changed or not) */
  uint32_t offsets_end;     /* == offsets_first when none */
  uint32_t frames;          /* frames applied to the replica (SNAPSHOT and state frames) */
  int partial;              /* the last frame applied carried MORE: the replica is between two
                             * versions until the rest of that update arrives (docs/protocol.md §2) */
  int presence;             /* a PRESENCE frame changed `presence` (participants, cursors) */
} vw_net_changes;

typedef struct vw_net {
  /* settings */
  char host[256];
  int port;
  char session[256];
  char token[256];
  proto_role want_role;     /* PROTO_ROLE_EDITOR to sculpt, PROTO_ROLE_VIEWER to watch */
  char author[PROTO_MAX_AUTHOR + 1]; /* the name edits are recorded under ("" = anonymous) */
  int protocol;             /* 1 (vw_net_init's default) or 2 (vw_net_set_protocol) */
  proto_hello_opts hello;   /* version 2: codec, max rate, tolerance asked for */
  int tls;                  /* speak TLS, verifying the server's certificate (vw_net_set_tls) */
  char tls_ca[1024];        /* ... against these CAs (PEM file); "": the system's */
  /* Other nodes serving the same session (a cluster's relays): a lost connection tries the
   * next one (vw_net_add_address); host/port above is the one in use. */
  struct { char host[256]; int port; } addresses[8];
  int address_count, address_at;
  int primary_lost;         /* this connection's relay said the session's primary is lost
                             * (ERROR PRIMARY_LOST; cleared by PRIMARY_BACK or a lost connection) */
  /* state */
  vw_net_state state;
  client_conn conn;
  client_replica replica;      /* kept while DOWN; replaced by the SNAPSHOT of the next connection */
  vw_presence presence;     /* the session's participants (PRESENCE frames, when granted
                             * "presence": ask for it in the HELLO's caps), reset at each WELCOME */
  proto_role role;          /* what the server granted (WELCOME); 0 before the first WELCOME */
  uint32_t client_id;       /* the server's id for this connection (WELCOME) */
  proto_welcome_opts granted; /* version 2: codec, rate and tolerance the server granted */
  uint64_t retry_at_ms;     /* DOWN: when the next attempt starts (vw_net_now_ms clock) */
  uint32_t backoff_ms;      /* the wait before the current retry: 250 after the first failure,
                             * doubling to 8000; 0 once a SNAPSHOT arrived */
  uint32_t reconnects;      /* connection attempts after the first one */
  uint32_t joins;           /* SNAPSHOTs received, one per successful connection */
  char last_error[256];     /* why the connection was lost or an edit refused (ERROR frames) */
  uint16_t last_error_code; /* PROTO_ERR_* of the last ERROR/BYE frame, 0 for a socket error */
  uint32_t last_error_request; /* the request id an ERROR refused, 0 when none */
  uint32_t errors;          /* ERROR frames received */
  uint32_t next_request;    /* request ids for EDIT frames */
  /* measurements */
  double latency_ms;        /* last PING round trip / 2, < 0 before the first */
  double bytes_per_s;       /* received, over the last second */
  uint64_t bytes_total;
  /* private */
  uint64_t last_ping_ms, rate_t0_ms, rate_bytes;
  int phase;                /* vw_net.c: idle, TCP connect, waiting WELCOME, waiting SNAPSHOT, live */
  proto_role ask_role;      /* the role the next HELLO asks for (viewer after a FORBIDDEN) */
  uint64_t phase_ms;        /* when the current connection phase began */
  uint64_t heard_ms;        /* when bytes last arrived */
  size_t heard_buffered;    /* unread bytes in conn at that time (progress inside a frame) */
  uint64_t ping_sent_ns;    /* t0 of the PING waiting for its PONG, 0 when none */
  uint32_t ping_seq;
  proto_buf out;            /* frames not yet written (the socket is never waited on) */
  size_t out_off;
  int in_update;            /* the last state frame carried MORE */
  /* An address looked up ahead for the next connect (vw_net_give_address), by host and port;
   * `resolve_rc` CLIENT_ERESOLVE with its reason when the name did not resolve. */
  struct addrinfo *resolved;
  char resolved_host[256];
  int resolved_port, resolve_rc, have_resolved;
  char resolve_err[200];
} vw_net;

/* Sets up (no I/O yet; the first poll connects). `token` may be NULL. The strings are copied. */
void vw_net_init(vw_net *n, const char *host, int port, const char *session, const char *token, proto_role role);
/* Adds an address to try when the current one is lost (several nodes of a cluster: relays and
 * primaries serve the same sessions). The first is the one vw_net_init was given. Returns 0, or
 * -1 when the list (8) is full. */
int vw_net_add_address(vw_net *n, const char *host, int port);
/* Speak protocol `protocol` (1 or 2) from the next connection on, asking with `opts` (version
 * 2: NULL for the defaults, the session's tolerance at every change). */
void vw_net_set_protocol(vw_net *n, int protocol, const proto_hello_opts *opts);
/* Speak TLS from the next connection on, verifying the server's certificate against the CAs
 * in ca_file (NULL: the system's) and the host name or address connected to. */
void vw_net_set_tls(vw_net *n, int on, const char *ca_file);
/* Says BYE if it can without waiting, closes, and frees the replica and the buffers. */
void vw_net_fini(vw_net *n);

/* Connects if it is time to, reads every frame available now into the replica, pings once a
 * second, and fills *ch with what changed (ch may be NULL). Never blocks longer than `wait_ms`
 * (0 = not at all): with wait_ms > 0 it returns as soon as a frame arrived or the state
 * changed. Host names are resolved when connecting, unless vw_net_give_address gave the answer
 * already: give a numeric address to never wait on DNS. Returns the state after the poll. */
vw_net_state vw_net_poll(vw_net *n, int wait_ms, vw_net_changes *ch);

/* Looking a host name up without holding anything (deform-view's connection thread, vw_pump.c):
 * vw_net_wants_address says whether the next connect needs HOST:PORT looked up (1, with them
 * copied out: the connection is waiting to connect and has no answer for them yet); the caller
 * resolves it with no lock held and hands the answer (client_resolve's: rc, res, err) to
 * vw_net_give_address, which keeps it for the next connect (or frees it when the address in use
 * changed meanwhile). Without them, vw_net_poll resolves as it connects. */
int vw_net_wants_address(const vw_net *n, char *host, size_t hostlen, int *port);
void vw_net_give_address(vw_net *n, const char *host, int port, int rc, struct addrinfo *res, const char *err);

/* Edits (binary EDIT frames). Each returns the request id, or 0 when not sent (not live,
 * read-only: role viewer, a value the encoder refuses, or over 16 MiB still unsent because the
 * server is not reading; the last three say why in last_error). Sending never waits: what the
 * socket does not take now goes out on later polls. Results come back as frames (WEIGHTS,
 * DELTA), failures as ERROR frames (last_error, last_error_request, errors). The arrays are
 * only read during the call. */
uint32_t vw_net_set_weights(vw_net *n, uint32_t count, const uint32_t *targets, const float *values);
uint32_t vw_net_set_offsets(vw_net *n, uint32_t count, const uint32_t *vertices, const int32_t *q);
/* The lists' counts are g->handle.count, g->roi.count and g->anchors.count (their `bytes` are
 * not read); each array may be NULL when its count is 0. */
uint32_t vw_net_gesture_begin(vw_net *n, const proto_gesture_begin *g, const uint32_t *handle,
                              const uint32_t *roi, const uint32_t *anchors);
uint32_t vw_net_gesture_drag(vw_net *n, const proto_gesture_drag *d);
uint32_t vw_net_gesture_end(vw_net *n, uint32_t gesture);
/* A brush stroke or a piece of one: `flags` PROTO_BRUSH_* (front faces only, continue,
 * auto-smooth) and `mirror` its symmetry plane (PROTO_BRUSH_AXIS_*, 0 none), as in
 * proto_encode_edit_brush_mirror. */
/* A step of the author's mask (EDIT MASK, proto_encode_edit_mask; samples: 5 floats each). */
uint32_t vw_net_mask(vw_net *n, const proto_mask_edit *m, const float *samples);
uint32_t vw_net_brush(vw_net *n, uint8_t brush, uint8_t falloff, uint8_t flags, uint8_t mirror, uint32_t count,
                      const proto_brush_sample *samples);
uint32_t vw_net_reset(vw_net *n, uint32_t count, const uint32_t *vertices); /* count 0: every vertex */
/* Undo (or redo) this author's newest step on the server (its history: survives reconnects and
 * is the same one deformctl undo and history.undo use). */
uint32_t vw_net_history(vw_net *n, int redo);
/* The author name sent after every WELCOME as an editor (1 to PROTO_MAX_AUTHOR bytes; longer is
 * cut); "" keeps the server's anonymous-<connection id>. */
void vw_net_set_author(vw_net *n, const char *author);
int vw_net_can_edit(const vw_net *n);
/* This viewer's cursor and camera (and with about_client > 0 an ABOUT saying what it is and,
 * private_ set, that it shares neither) as a PRESENCE frame, when the server granted "presence"
 * and the connection is live; watching is enough. Returns 1 when queued, 0 when not. */
int vw_net_send_presence(vw_net *n, const proto_presence_state *s, uint8_t about_client, int private_);
/* Whether this connection was granted "presence". */
int vw_net_has_presence(const vw_net *n);

/* Names of vw_net_state values ("connecting", "live", "down"), for the HUD. */
const char *vw_net_state_name(vw_net_state s);

/* Monotonic milliseconds (the clock of retry_at_ms). */
uint64_t vw_net_now_ms(void);

#endif
