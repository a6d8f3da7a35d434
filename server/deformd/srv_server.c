/*
 * srv_server.c — the loop's handles: listeners, accepted connections, writes, the slow-client
 * timer, signals, and the session table.
 *
 * Connections are handles: freed only in their close callback, after the last reference
 * (jobs answering a request hold one) is gone. Writes are requests: each owns references to the
 * frames it sends until its callback runs.
 *
 * DOES NOT parse anything: bytes go to srv_stream.c or srv_rpc.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

/* ---- connections ------------------------------------------------------------------------------ */

typedef struct write_req {
  uv_write_t req;
  srv_conn *conn;
  size_t len;
  int nframes;
  srv_frame **frames; /* the references this write holds (points at inline_frames when few) */
  srv_frame *inline_frames[2];
  uint8_t *copy;      /* for srv_conn_send_copy */
} write_req;

static void write_req_free(write_req *w) {
  for (int i = 0; i < w->nframes; i++) srv_frame_unref(w->frames[i]);
  if (w->frames != w->inline_frames) free(w->frames);
  free(w->copy);
  free(w);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf);

void srv_conn_ref(srv_conn *c) { c->refs++; }

static void conn_free(srv_conn *c) {
  free(c->rbuf);
  free(c);
}

void srv_conn_unref(srv_conn *c) {
  if (--c->refs == 0) conn_free(c);
}

static void on_conn_closed(uv_handle_t *h) {
  srv_conn *c = (srv_conn *)h;
  srv_server *s = c->server;
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->conn_count--;
  srv_conn_unref(c);
}

void srv_conn_close(srv_conn *c) {
  if (c->closing) return;
  c->closing = 1;
  if (c->kind == SRV_CONN_STREAM) srv_stream_detach(c);
  for (srv_session *x = c->server->sessions; x; x = x->next) srv_gesture_drop_owner(c->server, x, c->id);
  srv_log(SRV_LOG_DEBUG, "connection %u (%s) closed", c->id, c->peer);
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

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
  if (!c->closing && c->queued == 0 && c->kind == SRV_CONN_STREAM) srv_stream_on_drained(c);
  write_req_free(w);
  srv_conn_unref(c);
}

static int submit(srv_conn *c, write_req *w, uv_buf_t *bufs, unsigned n) {
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

int srv_conn_send(srv_conn *c, srv_frame *f) {
  if (c->closing) return UV_ECANCELED;
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
  c->server->stats.frames_sent++;
  int rc = submit(c, w, bufs, (unsigned)n); /* libuv copies the buffer array */
  free(bufs);
  return rc;
}

int srv_conn_send_copy(srv_conn *c, const void *data, size_t len) {
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
  return submit(c, w, &buf, 1);
}

void srv_conn_fail(srv_conn *c, uint16_t code, const char *message) {
  if (c->closing || c->finishing) return;
  srv_log(SRV_LOG_INFO, "connection %u (%s) closed: %s", c->id, c->peer, message);
  srv_frame *f = NULL;
  if (c->kind == SRV_CONN_STREAM) {
    proto_buf b;
    proto_buf_init(&b);
    proto_encode_error(&b, code, 0, message);
    f = srv_frame_from_buf(&b);
  }
  /* Queued behind what the peer has not read yet; a peer that never reads is closed by the
   * tick two seconds later without ever seeing it. */
  srv_conn_finish(c, f);
  srv_frame_unref(f);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  srv_conn *c = (srv_conn *)h;
  (void)suggested;
  /* Read straight into the connection's buffer; grow it in 64 KiB steps. */
  if (c->rcap - c->rlen < 65536) {
    size_t cap = c->rcap ? c->rcap : 65536;
    while (cap - c->rlen < 65536) cap *= 2;
    uint8_t *g = realloc(c->rbuf, cap);
    if (!g) {
      *buf = uv_buf_init(NULL, 0);
      return;
    }
    c->rbuf = g;
    c->rcap = cap;
  }
  *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  srv_conn *c = (srv_conn *)stream;
  (void)buf;
  if (n < 0) {
    if (n != UV_EOF) srv_log(SRV_LOG_DEBUG, "connection %u: read: %s", c->id, uv_strerror((int)n));
    srv_conn_close(c);
    return;
  }
  if (n == 0) return;
  if (c->closing) return;
  c->rlen += (size_t)n;
  if (c->kind == SRV_CONN_STREAM)
    srv_stream_on_data(c);
  else
    srv_rpc_on_data(c);
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

static void on_connection(uv_stream_t *listener, int status, srv_conn_kind kind) {
  srv_server *s = listener->data;
  if (status < 0) {
    srv_log(SRV_LOG_WARN, "accept: %s", uv_strerror(status));
    return;
  }
  srv_conn *c = calloc(1, sizeof(*c));
  if (!c) {
    srv_log(SRV_LOG_ERROR, "accept: out of memory");
    return;
  }
  c->server = s;
  c->kind = kind;
  c->id = ++s->next_conn_id;
  c->refs = 1;
  c->accepted_at = uv_now(s->loop);
  uv_tcp_init(s->loop, &c->tcp);
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->conn_count++;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    srv_conn_close(c);
    return;
  }
  describe_peer(c);
  uv_tcp_nodelay(&c->tcp, 1);
  s->stats.connections_accepted++;
  /* Over the limit: accept, say why, close — never drop silently. */
  if (s->conn_count > s->cfg.max_connections || s->stopping) {
    s->stats.connections_refused++;
    if (kind == SRV_CONN_RPC) {
      const char *msg = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32007,\"message\":\"too many connections\"}}\n";
      srv_conn_send_copy(c, msg, strlen(msg));
      srv_conn_finish(c, NULL);
    } else {
      srv_conn_fail(c, s->stopping ? PROTO_ERR_SHUTDOWN : PROTO_ERR_OVERLOADED,
                    s->stopping ? "server is shutting down" : "too many connections");
    }
    return;
  }
  srv_log(SRV_LOG_DEBUG, "connection %u from %s (%s)", c->id, c->peer,
          kind == SRV_CONN_STREAM ? "stream" : "rpc");
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_stream_connection(uv_stream_t *l, int status) { on_connection(l, status, SRV_CONN_STREAM); }
static void on_rpc_connection(uv_stream_t *l, int status) { on_connection(l, status, SRV_CONN_RPC); }

/* ---- start and stop ------------------------------------------------------------------------------ */

static int make_addr(const char *host, int port, struct sockaddr_storage *out) {
  if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
  /* Numeric addresses only: a name would need a DNS lookup, which has no place on the loop. */
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0) return 0;
  if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0) return 0;
  return UV_EINVAL;
}

static int listen_on(srv_server *s, uv_tcp_t *l, int port, uv_connection_cb cb, int *bound) {
  struct sockaddr_storage addr;
  int rc = make_addr(s->cfg.listen, port, &addr);
  if (rc) {
    srv_log(SRV_LOG_ERROR, "--listen %s: not a numeric IPv4/IPv6 address", s->cfg.listen);
    return rc;
  }
  uv_tcp_init(s->loop, l);
  l->data = s;
  rc = uv_tcp_bind(l, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)l, 511, cb);
  if (rc) {
    srv_log(SRV_LOG_ERROR, "cannot listen on %s port %d: %s", s->cfg.listen, port, uv_strerror(rc));
    return rc;
  }
  struct sockaddr_storage got;
  int len = sizeof(got);
  uv_tcp_getsockname(l, (struct sockaddr *)&got, &len);
  *bound = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                          : ((struct sockaddr_in6 *)&got)->sin6_port);
  return 0;
}

static void on_tick(uv_timer_t *t) {
  srv_server *s = t->data;
  uint64_t now = uv_now(s->loop);
  if (s->stopping && s->conns == NULL) {
    /* Signal handlers stay until here: a second SIGTERM during the goodbyes is absorbed. */
    uv_timer_stop(&s->tick);
    uv_close((uv_handle_t *)&s->tick, NULL);
    srv_anim_shutdown(s);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    return;
  }
  if (now % 1000 < 100) /* about once a second */
    for (srv_session *x = s->sessions; x; x = x->next) srv_gesture_expire(s, x, s->cfg.gesture_idle_ms);
  for (srv_conn *c = s->conns, *next; c; c = next) {
    next = c->next;
    if (c->closing) continue;
    if (c->finishing) {
      if (now > c->finish_deadline) srv_conn_close(c);
      continue;
    }
    if (c->kind == SRV_CONN_STREAM && !c->hello_done && now - c->accepted_at > s->cfg.hello_timeout_ms) {
      srv_conn_fail(c, PROTO_ERR_MALFORMED, "no HELLO within the time allowed");
      continue;
    }
    if (c->kind != SRV_CONN_STREAM || !c->lagging) continue;
    if (now - c->lagging_since > s->cfg.slow_timeout_ms) {
      s->stats.clients_dropped++;
      char why[160];
      snprintf(why, sizeof(why), "too slow: %zu bytes unread for more than %u ms", c->queued,
               s->cfg.slow_timeout_ms);
      srv_conn_fail(c, PROTO_ERR_TOO_SLOW, why);
    }
  }
}

static void on_signal(uv_signal_t *h, int signum) {
  srv_server *s = h->data;
  if (s->stopping) return;
  srv_log(SRV_LOG_INFO, "received %s, shutting down", signum == SIGINT ? "SIGINT" : "SIGTERM");
  srv_server_stop(s, "server is shutting down");
}

static void on_session_opened(srv_server *s, void *arg, int status, srv_session *session,
                              const char *err) {
  (void)arg;
  (void)s;
  if (status) {
    srv_log(SRV_LOG_ERROR, "cannot open session: %s", err);
    return;
  }
  srv_log(SRV_LOG_INFO, "session %s: %u vertices, %u triangles, %u targets", session->name,
          session->mesh->vertex_count, session->mesh->triangle_count, session->mesh->target_count);
}

int srv_server_start(srv_server *s, uv_loop_t *loop, const srv_config *cfg) {
  memset(s, 0, sizeof(*s));
  s->loop = loop;
  s->cfg = *cfg;
  s->limits.max_frame = cfg->max_frame;
  s->limits.max_vertices = cfg->max_vertices;
  s->started_ms = uv_now(loop);
  int sp = 0, rp = 0;
  int rc = listen_on(s, &s->stream_listener, cfg->stream_port, on_stream_connection, &sp);
  if (rc) return rc;
  rc = listen_on(s, &s->rpc_listener, cfg->rpc_port, on_rpc_connection, &rp);
  if (rc) {
    uv_close((uv_handle_t *)&s->stream_listener, NULL);
    return rc;
  }
  /* One line on stdout for scripts and tests that asked for port 0. */
  printf("stream_port=%d rpc_port=%d\n", sp, rp);
  fflush(stdout);
  srv_log(SRV_LOG_INFO, "listening on %s: stream port %d, JSON-RPC port %d", cfg->listen, sp, rp);
  uv_timer_init(loop, &s->tick);
  s->tick.data = s;
  uv_timer_start(&s->tick, on_tick, 100, 100);
  uv_signal_init(loop, &s->sigint);
  uv_signal_init(loop, &s->sigterm);
  s->sigint.data = s->sigterm.data = s;
  uv_signal_start(&s->sigint, on_signal, SIGINT);
  uv_signal_start(&s->sigterm, on_signal, SIGTERM);
  for (uint32_t i = 0; i < cfg->session_count; i++)
    srv_job_open_session(s, cfg->sessions[i].name, cfg->sessions[i].mesh, on_session_opened, NULL);
  return 0;
}

static void on_finished(uv_shutdown_t *req, int status) {
  srv_conn *c = req->data;
  (void)status;
  free(req);
  srv_conn_close(c);
  srv_conn_unref(c);
}

void srv_conn_finish(srv_conn *c, srv_frame *last) {
  if (c->closing || c->finishing) return;
  if (last) srv_conn_send(c, last);
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

void srv_server_stop(srv_server *s, const char *why) {
  if (s->stopping) return;
  s->stopping = 1;
  uv_close((uv_handle_t *)&s->stream_listener, NULL);
  uv_close((uv_handle_t *)&s->rpc_listener, NULL);
  proto_buf b;
  proto_buf_init(&b);
  proto_encode_bye(&b, PROTO_ERR_SHUTDOWN, why);
  srv_frame *bye = srv_frame_from_buf(&b);
  for (srv_conn *c = s->conns, *next; c; c = next) {
    next = c->next;
    srv_conn_finish(c, c->kind == SRV_CONN_STREAM && c->hello_done ? bye : NULL);
  }
  srv_frame_unref(bye);
  /* The tick keeps running until the last connection is gone, then closes itself. */
}

void srv_server_fini(srv_server *s) {
  for (srv_session *x = s->sessions, *next; x; x = next) {
    next = x->next;
    x->closed = 1;
    srv_gesture_close_all(x);
    srv_brush_close_all(x);
    srv_blend_close_all(x);
    srv_anim_close(x);
    srv_session_unref(x);
  }
  s->sessions = NULL;
}

srv_session *srv_server_find(srv_server *s, const char *name) {
  for (srv_session *x = s->sessions; x; x = x->next)
    if (strcmp(x->name, name) == 0) return x;
  return NULL;
}

void srv_server_add_session(srv_server *s, srv_session *session) {
  session->next = s->sessions;
  s->sessions = session;
  s->session_count++;
}

void srv_server_close_session(srv_server *s, srv_session *session, const char *why) {
  srv_session **pp = &s->sessions;
  while (*pp && *pp != session) pp = &(*pp)->next;
  if (*pp) {
    *pp = session->next;
    s->session_count--;
  }
  proto_buf b;
  proto_buf_init(&b);
  proto_encode_bye(&b, PROTO_ERR_SESSION_CLOSED, why);
  srv_frame *bye = srv_frame_from_buf(&b);
  while (session->subscribers) {
    srv_conn *c = session->subscribers;
    srv_stream_detach(c);
    srv_conn_finish(c, bye);
  }
  srv_frame_unref(bye);
  session->closed = 1;
  srv_gesture_close_all(session);
  srv_brush_close_all(session);
  srv_blend_close_all(session);
  srv_anim_close(session);
  srv_log(SRV_LOG_INFO, "session %s closed: %s", session->name, why);
  srv_session_unref(session);
}
