/*
 * srv_ws.c — WebSocket framing under a connection (RFC 6455), on wslay: messages in, message
 * headers out, and the key of the upgrade handshake.
 *
 * Reading uses wslay's event API: it unmasks, joins fragments, answers PING and CLOSE, and keeps
 * the connection's message limit (max_frame for the stream endpoint, max_request for JSON-RPC:
 * the limits of the TCP ports), closing with 1009 above it. Writing does not go through wslay's
 * message queue, which copies every message: invariant 3 of the architecture (encode once, fan
 * out the same bytes) wants the frame a session encoded once to be the bytes written to every
 * socket. A server's frames are unmasked, so a message is a header of 2 to 10 bytes and the
 * payload as it is; wslay's frame API writes that header (srv_ws_wrap), and the write that
 * carries it references the shared payload. No permessage-deflate: compressing per connection
 * would break encode-once (protocol version 2 compresses once, in the protocol).
 *
 * DOES NOT touch sockets (srv_conn.c writes what cbs->write and srv_ws_wrap hand it), parse HTTP
 * (srv_http.c) or know what a message means (the transports).
 */
#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>

#include <uv.h>
#include "proto.h"
#include "srv_ws.h"
#include "srv_error.h"

struct srv_ws {
  wslay_event_context_ptr ev;
  wslay_frame_context_ptr out; /* writes headers only (header_send) */
  int text;
  srv_ws_cbs cbs;
  void *arg;
  const uint8_t *in; /* bytes srv_ws_feed is reading */
  size_t in_len;
  int closed;        /* a close frame was sent or received, or the protocol broken */
  int broken;        /* wslay_event_recv failed on a malformed frame: the close it queued has no code */
  int in_ctrl;       /* the frame being received is a control frame */
  uint64_t pending;  /* payload bytes of the unfinished data message (wslay holds them) */
  /* header_send's sink */
  uint8_t *hdr;
  size_t hdr_len;
  const uint8_t *payload_mark;
};

/* ---- reading: wslay's event API over the bytes handed to srv_ws_feed ---------------------------- */

static ssize_t ev_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user) {
  srv_ws *ws = user;
  (void)flags;
  if (ws->in_len == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t n = len < ws->in_len ? len : ws->in_len;
  memcpy(buf, ws->in, n);
  ws->in += n;
  ws->in_len -= n;
  return (ssize_t)n;
}

/* wslay 1.1 answers a frame its parser refuses (a fragmented control frame, one over 125 bytes,
 * a bad length) with a close frame without a status code; RFC 6455 §7.4.1 has 1002 for that, so
 * that close is sent as 1002 with a reason instead. */
static const char broken_reason[] = "malformed frame (a control frame must be whole and at most 125 bytes)";

static ssize_t ev_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user) {
  srv_ws *ws = user;
  (void)ctx, (void)flags;
  if (ws->broken && len == 2 && data[0] == 0x88 && data[1] == 0) {
    uint8_t f[4 + sizeof(broken_reason)];
    const size_t n = sizeof(broken_reason) - 1;
    f[0] = 0x88, f[1] = (uint8_t)(2 + n), f[2] = 1002 >> 8, f[3] = 1002 & 0xff;
    memcpy(f + 4, broken_reason, n);
    ws->cbs.write(ws->arg, f, 4 + n);
    return (ssize_t)len;
  }
  ws->cbs.write(ws->arg, data, len);
  return (ssize_t)len;
}

/* What wslay holds of an unfinished message, counted as its frames arrive (srv_ws_pending). */
static void ev_frame_start(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_start_arg *f,
                           void *user) {
  srv_ws *ws = user;
  (void)ctx;
  ws->in_ctrl = wslay_is_ctrl_frame(f->opcode);
}

static void ev_frame_chunk(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_chunk_arg *f,
                           void *user) {
  srv_ws *ws = user;
  (void)ctx;
  if (!ws->in_ctrl) ws->pending += f->data_length;
}

static void ev_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *m, void *user) {
  srv_ws *ws = user;
  if (wslay_is_ctrl_frame(m->opcode)) return; /* PING answered and CLOSE echoed by wslay */
  ws->pending = 0;
  if (ws->closed) return;
  if ((m->opcode == WSLAY_TEXT_FRAME) != ws->text) {
    wslay_event_queue_close(ctx, WSLAY_CODE_UNSUPPORTED_DATA,
                            (const uint8_t *)(ws->text ? "this endpoint takes text messages (JSON-RPC)"
                                                       : "this endpoint takes binary messages (stream frames)"),
                            ws->text ? 44 : 50);
    ws->closed = 1;
    return;
  }
  ws->cbs.message(ws->arg, m->msg, m->msg_length);
}

/* Server frames are never masked: wslay asks for no mask key. */
static int ev_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user) {
  (void)ctx, (void)user;
  memset(buf, 0, len);
  return 0;
}

/* ---- writing headers: wslay's frame API with a sink that keeps the header and skips the payload - */

static ssize_t header_send(const uint8_t *data, size_t len, int flags, void *user) {
  srv_ws *ws = user;
  (void)flags;
  if (data == ws->payload_mark) return (ssize_t)len; /* the payload: referenced, never copied */
  if (ws->hdr_len + len > SRV_WS_HEADER_MAX) return -1;
  memcpy(ws->hdr + ws->hdr_len, data, len);
  ws->hdr_len += len;
  return (ssize_t)len;
}

static ssize_t header_recv(uint8_t *buf, size_t len, int flags, void *user) {
  (void)buf, (void)len, (void)flags, (void)user;
  return -1; /* this context only writes */
}

static int header_genmask(uint8_t *buf, size_t len, void *user) {
  (void)user;
  memset(buf, 0, len);
  return 0;
}

/* Writes into `out` the header of an unmasked final frame of `len` payload bytes; returns its
 * size, or 0 on failure. */
static size_t make_header(srv_ws *ws, uint64_t len, uint8_t *out) {
  static const uint8_t mark = 0;
  ws->hdr = out;
  ws->hdr_len = 0;
  ws->payload_mark = &mark;
  struct wslay_frame_iocb io = {1, WSLAY_RSV_NONE, ws->text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME, len, 0,
                                &mark, (size_t)len};
  ssize_t r = wslay_frame_send(ws->out, &io);
  if (r != (ssize_t)len || ws->hdr_len < 2) return 0;
  return ws->hdr_len;
}

/* ---- lifetime ---------------------------------------------------------------------------------- */

int srv_ws_create(srv_ws **out, int text, uint64_t max_message, const srv_ws_cbs *cbs, void *arg) {
  srv_ws *ws = calloc(1, sizeof(*ws));
  if (!ws) return SRV_EINTERNAL;
  ws->text = text;
  ws->cbs = *cbs;
  ws->arg = arg;
  struct wslay_event_callbacks ecb = {ev_recv, ev_send, ev_genmask, ev_frame_start, ev_frame_chunk, NULL, ev_message};
  struct wslay_frame_callbacks fcb = {header_send, header_recv, header_genmask};
  if (wslay_event_context_server_init(&ws->ev, &ecb, ws) != 0) goto fail_ev;
  if (wslay_frame_context_init(&ws->out, &fcb, ws) != 0) goto fail_out;
  wslay_event_config_set_max_recv_msg_length(ws->ev, max_message);
  *out = ws;
  return 0;
fail_out:
  wslay_event_context_free(ws->ev);
fail_ev:
  free(ws);
  return SRV_EINTERNAL;
}

void srv_ws_set_max_message(srv_ws *ws, uint64_t max_message) {
  wslay_event_config_set_max_recv_msg_length(ws->ev, max_message);
}

uint64_t srv_ws_pending(const srv_ws *ws) { return ws->pending; }

void srv_ws_destroy(srv_ws *ws) {
  if (!ws) return;
  wslay_frame_context_free(ws->out);
  wslay_event_context_free(ws->ev);
  free(ws);
}

int srv_ws_feed(srv_ws *ws, const uint8_t *p, size_t n) {
  ws->in = p;
  ws->in_len = n;
  int rc = wslay_event_recv(ws->ev);
  ws->in = NULL;
  ws->in_len = 0;
  ws->broken = rc != 0;
  wslay_event_send(ws->ev); /* PONGs and the CLOSE that answers a close or a broken frame */
  ws->broken = 0;
  if (rc != 0 || ws->closed || !wslay_event_get_read_enabled(ws->ev)) {
    ws->closed = 1;
    return SRV_EPARAMS;
  }
  return 0;
}

void srv_ws_close(srv_ws *ws, uint16_t code, const char *reason) {
  size_t len = reason ? strlen(reason) : 0;
  if (len > 123) len = 123; /* a control frame holds 125 bytes: the code and 123 of reason */
  /* After a close sent or received wslay refuses another: nothing to do then. */
  if (wslay_event_queue_close(ws->ev, code, (const uint8_t *)reason, len) == 0) wslay_event_send(ws->ev);
  ws->closed = 1;
}

/* ---- a write as messages --------------------------------------------------------------------------- */

/* Copies `n` bytes at virtual offset `at` of the buffers into out; returns 0 when they exist. */
static int read_at(const uv_buf_t *in, unsigned n, size_t at, uint8_t *out, size_t len) {
  for (unsigned i = 0; i < n && len > 0; i++) {
    if (at >= in[i].len) {
      at -= in[i].len;
      continue;
    }
    size_t k = in[i].len - at < len ? in[i].len - at : len;
    memcpy(out, in[i].base + at, k);
    out += k;
    len -= k;
    at = 0;
  }
  return len == 0 ? 0 : -1;
}

int srv_ws_wrap(srv_ws *ws, const uv_buf_t *in, unsigned n, uv_buf_t **out, unsigned *outn, uint8_t **headers) {
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += in[i].len;
  if (ws->text && total > 0) {
    uint8_t last = 0;
    if (read_at(in, n, total - 1, &last, 1) == 0 && last == '\n') total--; /* a JSON-RPC line: the message is the line */
  }
  /* The messages' lengths: one for text, each protocol frame's for binary. */
  size_t count = 0, cap = 4;
  uint64_t *lens = malloc(sizeof(uint64_t) * cap);
  if (!lens) return SRV_EINTERNAL;
  int rc = 0;
  if (ws->text) {
    lens[count++] = total;
  } else {
    for (size_t at = 0; at < total;) {
      uint8_t h[PROTO_HEADER_SIZE];
      if (read_at(in, n, at, h, sizeof(h)) != 0) {
        rc = SRV_EPARAMS;
        break;
      }
      uint64_t len = PROTO_HEADER_SIZE + (uint64_t)proto_load_u32(h + 8);
      if (at + len > total) {
        rc = SRV_EPARAMS;
        break;
      }
      if (count == cap) {
        uint64_t *g = realloc(lens, sizeof(uint64_t) * (cap *= 2));
        if (!g) {
          rc = SRV_EINTERNAL;
          break;
        }
        lens = g;
      }
      lens[count++] = len;
      at += len;
    }
  }
  uv_buf_t *o = rc ? NULL : malloc(sizeof(uv_buf_t) * (2 * count + n + 1));
  uint8_t *hd = rc ? NULL : malloc(SRV_WS_HEADER_MAX * (count ? count : 1));
  if (!rc && (!o || !hd)) rc = SRV_EINTERNAL;
  /* Each message: its header, then the slices of the buffers it covers. */
  unsigned k = 0, bi = 0;
  size_t boff = 0;
  for (size_t m = 0; rc == 0 && m < count; m++) {
    size_t hl = make_header(ws, lens[m], hd + SRV_WS_HEADER_MAX * m);
    if (hl == 0) {
      rc = SRV_EINTERNAL;
      break;
    }
    o[k++] = uv_buf_init((char *)hd + SRV_WS_HEADER_MAX * m, (unsigned)hl);
    for (uint64_t left = lens[m]; left > 0;) {
      while (bi < n && boff == in[bi].len) bi++, boff = 0;
      size_t take = in[bi].len - boff < left ? in[bi].len - boff : (size_t)left;
      o[k++] = uv_buf_init(in[bi].base + boff, (unsigned)take);
      boff += take;
      left -= take;
    }
  }
  free(lens);
  if (rc) {
    free(o);
    free(hd);
    return rc;
  }
  *out = o;
  *outn = k;
  *headers = hd;
  return 0;
}

/* ---- the handshake's key ----------------------------------------------------------------------- */

int srv_ws_accept_key(const char *key, size_t len, char out[29]) {
  static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  uint8_t raw[BASE64_DECODE_LENGTH(24) + 1];
  size_t got = sizeof(raw);
  struct base64_decode_ctx b;
  base64_decode_init(&b);
  if (len != 24 || !base64_decode_update(&b, &got, raw, len, key) || !base64_decode_final(&b) || got != 16)
    return SRV_EPARAMS;
  struct sha1_ctx s;
  uint8_t digest[SHA1_DIGEST_SIZE];
  sha1_init(&s);
  sha1_update(&s, len, (const uint8_t *)key);
  sha1_update(&s, sizeof(guid) - 1, (const uint8_t *)guid);
  sha1_digest(&s, sizeof(digest), digest);
  base64_encode_raw(out, sizeof(digest), digest);
  out[BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE)] = '\0';
  return 0;
}
