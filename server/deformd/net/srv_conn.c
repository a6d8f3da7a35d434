/*
 * srv_conn.c — connections: the accepted socket, its read buffer, its write queue, and the
 * per-connection output policy for slow readers.
 *
 * Connections are handles: freed only in their close callback, after the last reference
 * (jobs answering a request hold one) is gone (invariant 8 of docs/architecture.md). Writes are
 * requests: each owns references to the frames it sends until its callback runs.
 *
 * Output policy (invariants 1, 3 and 7 of docs/architecture.md): frames carry absolute values, so a
 * connection may skip frames as long as it later receives the newest value of everything that
 * changed. A connection whose unwritten bytes would pass the soft limit stops receiving
 * individual frames ("lagging"); once its socket drains, its transport sends one catch-up (the
 * weights and vertex blocks changed since the last version it was sent: srv_stream.c).
 * Lagging longer than the slow timeout, or passing the hard limit, gets an ERROR and a close
 * (the tick in srv_server.c).
 *
 * TLS (srv_tls.c) is a layer here, below every transport: with c->tls, what the socket
 * delivers is decrypted before ops->on_data sees it, and what is sent is encrypted on the way
 * out, per connection (a frame encoded once for many viewers is encrypted once for each).
 *
 * WebSocket connections (upgraded on the HTTP port) are the same connections with srv_ws.c in
 * between: received bytes become whole messages for ops->on_message, and every write becomes
 * WebSocket messages (srv_ws_wrap: a header each, the payload referenced as it is), so the
 * limits, the slow-reader policy and the fan-out above apply to them unchanged.
 *
 * Input policy: a connection holds at most input_limit() bytes of a message it has not received
 * whole (small before HELLO or auth, and for viewers); buffers beyond 64 KiB per connection
 * count against the server's max_input_total; over either, the transport says why and closes.
 *
 * DOES NOT parse anything: bytes go to the transport through c->ops (srv_stream.c,
 * srv_rpc_conn.c, srv_http.c), which also decides what a closing connection lets go of; or look
 * inside the state the layers above hang on a connection (srv_conn.h), or keep a session's
 * subscribers (srv_fanout.c calls srv_conn_deliver for each).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "srv_conn.h"
#include "srv_error.h"
#include "srv_assert.h"
#include "srv_log.h"
#include "srv_frame.h"
#include "srv_config.h"
#include "srv_author.h"
#include "srv_grant.h"
#include "srv_server.h"
#include "srv_tls.h"
#include "srv_ws.h"

typedef struct write_req {
  uv_write_t req;
  srv_conn *conn;
  size_t len;
  int nframes;
  srv_frame **frames; /* the references this write holds (points at inline_frames when few) */
  srv_frame *inline_frames[2];
  uint8_t *copy;      /* for srv_conn_send_copy */
  uint8_t *ws_headers; /* WebSocket connections: the messages' headers (srv_ws_wrap) */
} write_req;

static void write_req_free(write_req *w) {
  for (int i = 0; i < w->nframes; i++) srv_frame_unref(w->frames[i]);
  if (w->frames != w->inline_frames) free(w->frames);
  free(w->copy);
  free(w->ws_headers);
  free(w);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf);

/* ---- lifetime -------------------------------------------------------------------------------- */

srv_conn *srv_conn_create(srv_server *s, srv_conn_kind kind, const srv_conn_ops *ops) {
  srv_conn *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->server = s;
  c->kind = kind;
  c->ops = ops;
  c->id = ++s->next_conn_id;
  c->refs = 1;
  c->stat_slot = -1;
  c->accepted_at = c->last_input_ms = uv_now(s->loop);
  uv_tcp_init(s->loop, &c->tcp);
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->conn_count++;
  return c;
}

static void describe_peer(srv_conn *c) {
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  snprintf(c->peer, sizeof(c->peer), "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return;
  char ip[48] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
    uv_ip4_name(a, ip, sizeof(ip));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
    uv_ip6_name(a, ip, sizeof(ip));
    port = ntohs(a->sin6_port);
  }
  snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
}

void srv_conn_start(srv_conn *c) {
  describe_peer(c);
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

uint32_t srv_conn_author(srv_conn *c) {
  if (c->author) return c->author; /* a token's user, or a name given with hello */
  char name[48];
  snprintf(name, sizeof(name), "anonymous-%u", c->id);
  uint32_t id = SRV_AUTHOR_SERVER;
  if (srv_authors_intern(&c->server->authors, c->server->store, name, &id) == 0) c->author = id;
  return id;
}

void srv_conn_ref(srv_conn *c) {
  SRV_ASSERT(c->refs > 0); /* invariant 8: never below zero, never revived */
  c->refs++;
}

/* Frees the read buffer and gives its share of the server's input budget back. */
static void drop_input(srv_conn *c) {
  c->server->input_bytes -= c->rcounted + c->wscounted;
  c->rcounted = c->wscounted = 0;
  free(c->rbuf);
  c->rbuf = NULL;
  c->rlen = c->rcap = 0;
}

static void conn_free(srv_conn *c) {
  if (c->ops && c->ops->on_free) c->ops->on_free(c);
  srv_ws_destroy(c->ws);
  drop_input(c);
  free(c->tls_in);
  srv_tls_destroy(c->tls);
  free(c);
}

void srv_conn_unref(srv_conn *c) {
  SRV_ASSERT(c->refs > 0); /* invariant 8 */
  if (--c->refs == 0) conn_free(c);
}

static void on_conn_closed(uv_handle_t *h) {
  srv_conn *c = (srv_conn *)h;
  srv_server *s = c->server;
  /* No read comes after the close: the buffer goes now, not when the last job lets go. */
  drop_input(c);
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->conn_count--;
  srv_conn_unref(c);
}

void srv_conn_close(srv_conn *c) {
  if (c->closing) return;
  c->closing = 1;
  if (c->ops && c->ops->on_close) c->ops->on_close(c);
  srv_log(SRV_LOG_DEBUG, "connection %u (%s) closed", c->id, c->peer);
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_finished(uv_shutdown_t *req, int status) {
  srv_conn *c = req->data;
  (void)status;
  free(req);
  srv_conn_close(c);
  srv_conn_unref(c);
}

static void flush_tls(srv_conn *c);

void srv_conn_finish(srv_conn *c, srv_frame *last) {
  if (c->closing || c->finishing) return;
  if (last) srv_conn_send(c, last);
  if (c->ws) srv_ws_close(c->ws, 1000, NULL); /* a no-op after a close already sent */
  if (c->tls) { /* TLS's own goodbye, behind the last frame */
    srv_tls_close_notify(c->tls);
    flush_tls(c);
  }
  c->finishing = 1;
  c->finish_deadline = uv_now(c->server->loop) + 2000;
  uv_read_stop((uv_stream_t *)&c->tcp);
  /* uv_shutdown runs after the queued writes, so the last frame goes out before the close;
   * a peer that never reads is closed by the tick at finish_deadline. */
  uv_shutdown_t *sh = malloc(sizeof(*sh));
  if (!sh) {
    srv_conn_close(c);
    return;
  }
  sh->data = c;
  srv_conn_ref(c);
  if (uv_shutdown(sh, (uv_stream_t *)&c->tcp, on_finished) != 0) {
    free(sh);
    srv_conn_unref(c);
    srv_conn_close(c);
  }
}

/* ---- writes ---------------------------------------------------------------------------------- */

static void on_write(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  srv_conn *c = w->conn;
  c->queued -= w->len;
  if (status == 0) {
    c->server->stats.bytes_sent += w->len;
  } else if (!c->closing) {
    srv_log(SRV_LOG_DEBUG, "connection %u: write failed: %s", c->id, uv_strerror(status));
    srv_conn_close(c);
  }
  /* Backpressure: reading resumes once the peer has taken most of what it was sent. */
  if (c->read_paused && !c->closing && !c->finishing && c->queued <= c->server->cfg.soft_limit / 2) {
    c->read_paused = 0;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  }
  if (!c->closing && c->queued == 0 && c->ops && c->ops->on_drained) c->ops->on_drained(c);
  write_req_free(w);
  srv_conn_unref(c);
}

/* Hands a write to the socket as it is (ciphertext on a TLS connection). */
static int submit_sock(srv_conn *c, write_req *w, uv_buf_t *bufs, unsigned n) {
  srv_server *s = c->server;
  if (c->queued + w->len > s->cfg.hard_limit) {
    /* The pipe is full: nothing more can be said to this peer, not even why. */
    write_req_free(w);
    s->stats.clients_dropped++;
    srv_log(SRV_LOG_INFO, "connection %u (%s) closed: %zu bytes unread, over the hard limit", c->id,
            c->peer, c->queued);
    srv_conn_close(c);
    return UV_ENOBUFS;
  }
  w->conn = c;
  srv_conn_ref(c);
  c->queued += w->len;
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, n, on_write);
  if (rc) {
    c->queued -= w->len;
    write_req_free(w);
    srv_conn_unref(c);
    return rc;
  }
  /* A peer that does not read what it asked for stops being read: its requests (PINGs, edits,
   * JSON-RPC calls) cannot pile up replies here. */
  if (!c->read_paused && !c->finishing && c->queued > s->cfg.soft_limit) {
    c->read_paused = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
  }
  return 0;
}

/* Sends what TLS has produced (handshake records, a close_notify) as one write. */
static void flush_tls(srv_conn *c) {
  uint8_t *out;
  size_t len;
  if (c->closing || srv_tls_take_output(c->tls, &out, &len) != 0 || len == 0) return;
  write_req *w = calloc(1, sizeof(*w));
  if (!w) {
    free(out);
    srv_conn_close(c);
    return;
  }
  w->frames = w->inline_frames;
  w->copy = out;
  w->len = len;
  uv_buf_t buf = uv_buf_init((char *)out, (unsigned)len);
  submit_sock(c, w, &buf, 1);
}

/* A write of plaintext (WebSocket messages already framed): as it is, or encrypted for this
 * connection, the frames it referenced then let go (the ciphertext is this connection's own
 * copy). */
static int submit_raw(srv_conn *c, write_req *w, uv_buf_t *bufs, unsigned n) {
  if (!c->tls) return submit_sock(c, w, bufs, n);
  for (unsigned i = 0; i < n; i++) {
    if (srv_tls_write(c->tls, bufs[i].base, bufs[i].len) != 0) {
      srv_log(SRV_LOG_DEBUG, "connection %u: %s", c->id, srv_tls_error(c->tls));
      write_req_free(w);
      srv_conn_close(c);
      return UV_EPROTO;
    }
  }
  for (int i = 0; i < w->nframes; i++) srv_frame_unref(w->frames[i]);
  w->nframes = 0;
  free(w->copy);
  w->copy = NULL;
  w->len = 0;
  if (srv_tls_take_output(c->tls, &w->copy, &w->len) != 0 || w->len == 0) {
    /* Nothing yet (the handshake goes on: the plaintext waits in srv_tls), or no memory. */
    write_req_free(w);
    return 0;
  }
  uv_buf_t buf = uv_buf_init((char *)w->copy, (unsigned)w->len);
  return submit_sock(c, w, &buf, 1);
}

/* Queues a write; on a WebSocket connection its bytes go out as messages (srv_ws_wrap), then
 * through TLS when the connection has it. */
static int submit(srv_conn *c, write_req *w, uv_buf_t *bufs, unsigned n) {
  if (!c->ws) return submit_raw(c, w, bufs, n);
  uv_buf_t *msgs = NULL;
  unsigned k = 0;
  int rc = srv_ws_wrap(c->ws, bufs, n, &msgs, &k, &w->ws_headers);
  if (rc) {
    write_req_free(w);
    srv_log(SRV_LOG_ERROR, "connection %u: cannot frame a write as WebSocket messages (%s)", c->id, srv_strerror(rc));
    srv_conn_close(c);
    return UV_EINVAL;
  }
  w->len = 0;
  for (unsigned i = 0; i < k; i++) w->len += msgs[i].len;
  rc = submit_raw(c, w, msgs, k); /* libuv copies the buffer array */
  free(msgs);
  return rc;
}

/* ---- what the stream bytes are: by message type and by viewer class ---------------------------- */

int srv_conn_stat_slot(srv_server *s, uint8_t codec, float rate) {
  srv_stats *st = &s->stats;
  for (uint32_t i = 0; i < st->class_count; i++)
    if (st->classes[i].codec == codec && st->classes[i].rate == rate) return (int)i;
  if (st->class_count == SRV_CLASS_STATS) return SRV_CLASS_STATS - 1; /* bounded: the last slot is shared */
  srv_class_stat *x = &st->classes[st->class_count];
  memset(x, 0, sizeof(*x));
  x->codec = codec;
  x->rate = rate;
  return (int)st->class_count++;
}

/* Counts `n` bytes of whole frames (their headers say their types) queued on a stream
 * connection; a SNAPSHOT, sent in pieces, counts whole as its first header's type. */
static void count_out(srv_conn *c, const uint8_t *p, size_t n, int pieces) {
  srv_stats *st = &c->server->stats;
  if (c->kind != SRV_CONN_STREAM) return;
  if (c->stat_slot >= 0) {
    st->classes[c->stat_slot].bytes += n;
    st->classes[c->stat_slot].frames++;
  }
  for (size_t at = 0; at + PROTO_HEADER_SIZE <= n;) {
    uint8_t type = p[at + 6];
    size_t len = pieces ? n : PROTO_HEADER_SIZE + (size_t)proto_load_u32(p + at + 8);
    if (type <= PROTO_LAST_TYPE) {
      st->type_bytes[type] += len < n - at ? len : n - at;
      st->type_frames[type]++;
    }
    at += len;
  }
}

int srv_conn_send(srv_conn *c, srv_frame *f) {
  if (c->closing) return UV_ECANCELED;
  if (!srv_caps_allow_frame(&c->caps, f->data, f->len)) { /* a sender forgot srv_caps_has */
    srv_log(SRV_LOG_ERROR, "connection %u: not sending a type %u frame it has no capability for", c->id, f->data[6]);
    return UV_EPERM;
  }
  count_out(c, f->data, f->len, 0);
  write_req *w = calloc(1, sizeof(*w));
  if (!w) return UV_ENOMEM;
  w->frames = w->inline_frames;
  w->frames[w->nframes++] = srv_frame_ref(f);
  w->len = f->len;
  uv_buf_t buf = uv_buf_init((char *)f->data, (unsigned)f->len);
  c->server->stats.frames_sent++;
  return submit(c, w, &buf, 1);
}

/* Sends several frames as one write (a snapshot is a small head, the session's shared mesh
 * body and target parts, and the state part). */
int srv_conn_send_parts(srv_conn *c, srv_frame **parts, int n) {
  if (c->closing) return UV_ECANCELED;
  write_req *w = calloc(1, sizeof(*w));
  uv_buf_t *bufs = malloc(sizeof(uv_buf_t) * (size_t)(n + 1));
  if (w) w->frames = n <= 2 ? w->inline_frames : malloc(sizeof(srv_frame *) * (size_t)n);
  if (!w || !bufs || !w->frames) {
    if (w && w->frames != w->inline_frames) free(w->frames);
    free(w);
    free(bufs);
    return UV_ENOMEM;
  }
  for (int i = 0; i < n; i++) {
    w->frames[w->nframes++] = srv_frame_ref(parts[i]);
    bufs[i] = uv_buf_init((char *)parts[i]->data, (unsigned)parts[i]->len);
    w->len += parts[i]->len;
  }
  if (n > 0) count_out(c, parts[0]->data, w->len, 1);
  c->server->stats.frames_sent++;
  int rc = submit(c, w, bufs, (unsigned)n); /* libuv copies the buffer array */
  free(bufs);
  return rc;
}

/* A copy of `data`, written as it is (raw) or as a WebSocket message. */
static int send_copy(srv_conn *c, const void *data, size_t len, int raw) {
  if (c->closing) return UV_ECANCELED;
  write_req *w = calloc(1, sizeof(*w));
  if (!w) return UV_ENOMEM;
  w->frames = w->inline_frames;
  w->copy = malloc(len ? len : 1);
  if (!w->copy) {
    free(w);
    return UV_ENOMEM;
  }
  memcpy(w->copy, data, len);
  w->len = len;
  uv_buf_t buf = uv_buf_init((char *)w->copy, (unsigned)len);
  return raw ? submit_raw(c, w, &buf, 1) : submit(c, w, &buf, 1);
}

int srv_conn_send_copy(srv_conn *c, const void *data, size_t len) { return send_copy(c, data, len, 0); }

static srv_frame *error_frame(uint16_t code, uint32_t request_id, const char *message) {
  proto_buf b;
  proto_buf_init(&b);
  proto_encode_error(&b, code, request_id, message);
  return srv_frame_from_buf(&b);
}

void srv_conn_send_error(srv_conn *c, uint16_t code, uint32_t request_id, const char *message) {
  srv_frame *f = error_frame(code, request_id, message);
  if (f) srv_conn_send(c, f);
  srv_frame_unref(f);
}

void srv_conn_fail(srv_conn *c, uint16_t code, const char *message) {
  if (c->closing || c->finishing) return;
  srv_log(SRV_LOG_INFO, "connection %u (%s) closed: %s", c->id, c->peer, message);
  srv_frame *f = c->kind == SRV_CONN_STREAM ? error_frame(code, 0, message) : NULL;
  if (c->ws) { /* the close frame says it too: 4000 + the PROTO_ERR_* code, and why */
    if (f) srv_conn_send(c, f);
    srv_ws_close(c->ws, (uint16_t)(4000 + code), message);
    srv_frame_unref(f);
    f = NULL;
  }
  /* Queued behind what the peer has not read yet; a peer that never reads is closed by the
   * tick two seconds later without ever seeing it. */
  srv_conn_finish(c, f);
  srv_frame_unref(f);
}

/* ---- fan-out --------------------------------------------------------------------------------- */

static void start_lagging(srv_conn *c) {
  if (c->lagging) return;
  c->lagging = 1;
  c->lagging_since = uv_now(c->server->loop);
  srv_log(SRV_LOG_DEBUG, "connection %u lagging at version %llu (%zu bytes queued)", c->id,
          (unsigned long long)c->sent_version, c->queued);
}

void srv_conn_deliver(srv_conn *c, srv_frame *f, uint64_t version) {
  SRV_ASSERT(version >= c->sent_version); /* invariant 7: a subscriber only moves forward */
  srv_server *s = c->server;
  if (c->closing || c->finishing) return;
  if (c->lagging || f == NULL) {
    s->stats.frames_coalesced++;
    start_lagging(c);
    return;
  }
  if (c->queued > 0 && c->queued + f->len > s->cfg.soft_limit) {
    s->stats.frames_coalesced++;
    start_lagging(c);
    return;
  }
  if (c->queued + f->len > s->cfg.hard_limit) {
    s->stats.clients_dropped++;
    srv_conn_fail(c, PROTO_ERR_TOO_SLOW, "output over the hard limit");
    return;
  }
  if (srv_conn_send(c, f) == 0) c->sent_version = version;
}

/* ---- WebSocket connections -------------------------------------------------------------------- */

static void ws_message(void *arg, const uint8_t *p, size_t n) {
  srv_conn *c = arg;
  if (c->closing || c->finishing) return;
  c->ops->on_message(c, p, n);
}

static void ws_write(void *arg, const uint8_t *p, size_t n) { send_copy(arg, p, n, 1); }

/* Every connection reads into a buffer of its own; the first 64 KiB of it are not counted
 * against the server's input budget (max_connections bounds them), what grows beyond is. */
#define READ_STEP ((size_t)65536)

static void refuse_input_full(srv_conn *c);

/* Everything read goes through the WebSocket framing; a close or a broken frame ends it. What
 * wslay holds of an unfinished message counts against the server's input budget (max_input_mb)
 * as a TCP connection's read buffer does, past the same first 64 KiB. */
static void feed_ws(srv_conn *c) {
  int rc = srv_ws_feed(c->ws, c->rbuf, c->rlen);
  c->rlen = 0;
  if (rc) {
    if (!c->closing) srv_conn_finish(c, NULL);
    return;
  }
  srv_server *s = c->server;
  uint64_t pending = srv_ws_pending(c->ws);
  size_t counted = pending > READ_STEP ? (size_t)(pending - READ_STEP) : 0;
  if (counted > c->wscounted && s->input_bytes + (counted - c->wscounted) > s->cfg.max_input_total) {
    if (!c->closing && !c->finishing) refuse_input_full(c);
    return;
  }
  s->input_bytes = s->input_bytes - c->wscounted + counted;
  c->wscounted = counted;
}

int srv_conn_upgrade(srv_conn *c, srv_conn_kind kind, const srv_conn_ops *ops) {
  static const srv_ws_cbs cbs = {ws_message, ws_write};
  const srv_config *cfg = &c->server->cfg;
  uint64_t max = kind == SRV_CONN_STREAM ? (uint64_t)cfg->max_frame + PROTO_HEADER_SIZE : (uint64_t)cfg->max_request;
  if (!ops->on_message || srv_ws_create(&c->ws, kind == SRV_CONN_RPC, max, &cbs, c) != 0) return SRV_EINTERNAL;
  c->kind = kind;
  c->ops = ops;
  c->accepted_at = uv_now(c->server->loop); /* a stream's HELLO timeout counts from here */
  if (c->rlen > 0) feed_ws(c);
  return 0;
}

/* ---- reads ----------------------------------------------------------------------------------- */


static int resize_input(srv_conn *c, size_t cap) {
  srv_server *s = c->server;
  size_t counted = cap > READ_STEP ? cap - READ_STEP : 0;
  if (counted > c->rcounted && s->input_bytes + (counted - c->rcounted) > s->cfg.max_input_total) {
    c->input_full = 1;
    return -1;
  }
  uint8_t *g = realloc(c->rbuf, cap);
  if (!g) return -1;
  s->input_bytes = s->input_bytes - c->rcounted + counted;
  c->rcounted = counted;
  c->rbuf = g;
  c->rcap = cap;
  return 0;
}

/* The most a connection may hold of a message it has not received whole: a frame or a request
 * line once it is trusted (an editor after HELLO; a JSON-RPC connection after auth, or on a
 * server without a token), and max_unauth_input before that, or ever for a stream viewer, which
 * sends only small frames. */
static size_t input_limit(const srv_conn *c) {
  const srv_config *cfg = &c->server->cfg;
  if (c->kind == SRV_CONN_STREAM)
    return c->stage == SRV_STAGE_EDITOR ? (size_t)PROTO_HEADER_SIZE + cfg->max_frame : cfg->max_unauth_input;
  int trusted = !c->server->access.enabled || c->grant.role != SRV_ROLE_NONE;
  return trusted ? cfg->max_request : cfg->max_unauth_input;
}

/* Room for 64 KiB more in the read buffer (grown in 64 KiB steps). 0, or -1 (out of memory,
 * or the server's input budget is spent: c->input_full). */
static int grow_rbuf(srv_conn *c) {
  if (c->rcap - c->rlen >= READ_STEP) return 0;
  size_t cap = c->rcap ? c->rcap : READ_STEP;
  while (cap - c->rlen < READ_STEP) cap *= 2;
  return resize_input(c, cap);
}

#define TLS_IN 65536 /* ciphertext read per callback on a TLS connection */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  srv_conn *c = (srv_conn *)h;
  (void)suggested;
  if (c->tls) { /* ciphertext lands beside, plaintext in rbuf after decryption */
    if (!c->tls_in) c->tls_in = malloc(TLS_IN);
    *buf = c->tls_in ? uv_buf_init((char *)c->tls_in, TLS_IN) : uv_buf_init(NULL, 0);
    return;
  }
  /* Read straight into the connection's buffer. */
  if (grow_rbuf(c) != 0) {
    *buf = uv_buf_init(NULL, 0); /* on_read gets UV_ENOBUFS */
    return;
  }
  *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void refuse_input(srv_conn *c, const char *why) {
  srv_log(SRV_LOG_INFO, "connection %u (%s) closed: %s", c->id, c->peer, why);
  c->ops->refuse(c, SRV_ELIMIT, why);
}

/* The server's budget for unfinished requests (max_input_mb) is spent. */
static void refuse_input_full(srv_conn *c) {
  char why[160];
  snprintf(why, sizeof(why), "the server holds %zu MiB of unfinished requests, its limit: closing",
           c->server->cfg.max_input_total >> 20);
  refuse_input(c, why);
}

/* Ciphertext in, plaintext appended to rbuf; what TLS wants to say (handshake) goes out.
 * Returns 0, or nonzero after closing the connection. */
static int decrypt_in(srv_conn *c, size_t n) {
  int rc = srv_tls_feed(c->tls, c->tls_in, n);
  for (size_t got = 1; rc == 0 && got > 0;) {
    if ((rc = grow_rbuf(c)) != 0) break;
    rc = srv_tls_read(c->tls, c->rbuf + c->rlen, c->rcap - c->rlen, &got);
    c->rlen += got;
  }
  flush_tls(c);
  if (rc == 0) return 0;
  if (rc == -1 && c->input_full) {
    refuse_input_full(c);
    return rc;
  }
  if (rc != SRV_ESHUTDOWN)
    srv_log(SRV_LOG_INFO, "connection %u (%s) closed: %s", c->id, c->peer,
            rc == -1 ? "out of memory" : srv_tls_error(c->tls));
  srv_conn_close(c);
  return rc;
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  srv_conn *c = (srv_conn *)stream;
  (void)buf;
  if (n == UV_ENOBUFS && c->input_full && !c->closing && !c->finishing) {
    refuse_input_full(c);
    return;
  }
  if (n < 0) {
    if (n != UV_EOF) srv_log(SRV_LOG_DEBUG, "connection %u: read: %s", c->id, uv_strerror((int)n));
    srv_conn_close(c);
    return;
  }
  if (n == 0) return;
  if (c->closing) return;
  if (c->tls) {
    size_t before = c->rlen;
    if (decrypt_in(c, (size_t)n) != 0 || c->rlen == before) return;
  } else {
    c->rlen += (size_t)n;
  }
  c->last_input_ms = uv_now(c->server->loop);
  if (c->ws) {
    /* The same bound on an unfinished message as on a plain connection, kept by wslay (a
     * message past it closes the WebSocket with 1009). */
    const srv_config *cfg = &c->server->cfg;
    size_t most = c->kind == SRV_CONN_STREAM ? (size_t)cfg->max_frame + PROTO_HEADER_SIZE : cfg->max_request;
    size_t limit = input_limit(c);
    srv_ws_set_max_message(c->ws, limit < most ? limit : most);
    feed_ws(c);
  } else {
    c->ops->on_data(c);
  }
  if (c->closing || c->finishing) return;
  size_t limit = input_limit(c);
  if (c->rlen > limit) {
    char why[160];
    snprintf(why, sizeof(why), "more than %zu bytes of an unfinished %s%s: closing", limit,
             c->kind == SRV_CONN_STREAM ? "frame" : "request",
             limit == c->server->cfg.max_unauth_input
                 ? (c->kind == SRV_CONN_STREAM && c->stage != SRV_STAGE_GREETING ? " from a viewer" : " before HELLO or auth")
                 : "");
    refuse_input(c, why);
    return;
  }
  /* A large message has gone: keep at most four times what is left (and 64 KiB). */
  if (c->rcap > 4 * READ_STEP && c->rlen < c->rcap / 4) {
    size_t cap = READ_STEP;
    while (cap < 2 * c->rlen) cap *= 2;
    if (cap < c->rcap) resize_input(c, cap);
  }
}
