/*
 * srv_ws.h — WebSocket framing of one connection (wslay): messages in, message headers out.
 *
 * DOES NOT own the socket: the connection (srv_conn.c) feeds bytes and writes what comes out.
 */
#ifndef DEFORMD_SRV_WS_H
#define DEFORMD_SRV_WS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct srv_ws srv_ws;

/* One WebSocket connection's framing: wslay's event API reads messages (fragments joined,
 * control frames answered, the size limit kept), wslay's frame API writes message headers. */
typedef struct srv_ws srv_ws;

/* Where a WebSocket hands things back up (the connection, srv_conn.c). */
typedef struct srv_ws_cbs {
  void (*message)(void *arg, const uint8_t *p, size_t n); /* a whole message of the kind expected */
  void (*write)(void *arg, const uint8_t *p, size_t n);   /* control bytes to send (copied) */
} srv_ws_cbs;

#define SRV_WS_HEADER_MAX 10 /* bytes of a server's (unmasked) frame header */

/* text: the endpoint takes text messages (JSON-RPC), else binary ones (the stream protocol); a
 * message of the other kind, or over max_message bytes, closes it. Returns 0 or SRV_EINTERNAL. */
int srv_ws_create(srv_ws **out, int text, uint64_t max_message, const srv_ws_cbs *cbs, void *arg);
void srv_ws_destroy(srv_ws *ws);
/* Reads `n` received bytes (all of them). Returns 0, or SRV_EPARAMS once the peer closed or broke
 * the protocol (the close frame that answers it has gone to cbs->write): finish the connection. */
int srv_ws_feed(srv_ws *ws, const uint8_t *p, size_t n);
/* Sends a close frame (once) with a code and a reason (cut to 123 bytes). */
void srv_ws_close(srv_ws *ws, uint16_t code, const char *reason);
/* The most an unfinished message may hold from now on (the connection's input limit, which
 * grows once HELLO or auth has been accepted). */
void srv_ws_set_max_message(srv_ws *ws, uint64_t max_message);
/* Payload bytes of the data message being received that wslay holds (0 between messages). */
uint64_t srv_ws_pending(const srv_ws *ws);
/* Rewrites one write of `n` buffers as WebSocket messages without copying them: binary, one
 * message per protocol frame (a buffer may hold several frames, a frame span several buffers);
 * text, one message of everything less a trailing newline. *out and *headers are malloc'ed (the
 * caller frees both once written). Returns 0, or SRV_EPARAMS when the bytes are not whole
 * frames, SRV_EINTERNAL when out of memory. */
int srv_ws_wrap(srv_ws *ws, const uv_buf_t *in, unsigned n, uv_buf_t **out, unsigned *outn, uint8_t **headers);
/* Sec-WebSocket-Accept for a Sec-WebSocket-Key (SHA-1 and base64, nettle). Returns 0, or
 * SRV_EPARAMS when the key is not 16 bytes in base64. */
int srv_ws_accept_key(const char *key, size_t len, char out[29]);

#endif
