/*
 * srv_link.c — an outgoing TCP connection on the loop: how a relay or a primary reaches the
 * node that owns a session to forward a request to it (srv_forward.c).
 *
 * A link is a handle: srv_link_close (or a failure, reported once through ops->on_close)
 * closes it and it is freed in its close callback (invariant 8 of docs/architecture.md). Writes
 * are copied and queued; what is written before the connection is up waits for it. Addresses are numeric (the registry holds
 * what each node advertises), so nothing here resolves a name on the loop.
 *
 * DOES NOT parse what arrives: bytes go to ops->on_data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "srv_cluster.h"

#define LINK_MAX_QUEUED (256u << 20) /* bytes waiting to be written before the link gives up */

struct srv_link {
  uv_tcp_t tcp; /* first: the handle's address is the link's */
  uv_connect_t connect;
  const srv_link_ops *ops;
  void *data;
  int connected, closing;
  uint8_t *pending; /* written before the connection was up */
  size_t pending_len;
  size_t queued;
  uint8_t rbuf[65536];
};

typedef struct link_write {
  uv_write_t req;
  srv_link *l;
  size_t len;
  uint8_t bytes[];
} link_write;

static void on_closed(uv_handle_t *h) {
  srv_link *l = (srv_link *)h;
  free(l->pending);
  free(l);
}

static void link_fail(srv_link *l, const char *why) {
  if (l->closing) return;
  l->closing = 1;
  if (l->ops->on_close) l->ops->on_close(l, why);
  uv_close((uv_handle_t *)&l->tcp, on_closed);
}

void srv_link_close(srv_link *l) {
  if (!l || l->closing) return;
  l->closing = 1;
  uv_close((uv_handle_t *)&l->tcp, on_closed);
}

void *srv_link_data(const srv_link *l) { return l->data; }

static void on_write(uv_write_t *req, int status) {
  link_write *w = (link_write *)req;
  srv_link *l = w->l;
  l->queued -= w->len;
  free(w);
  if (status && status != UV_ECANCELED) link_fail(l, uv_strerror(status));
}

static int submit(srv_link *l, const void *p, size_t n) {
  if (l->queued + n > LINK_MAX_QUEUED) return UV_ENOBUFS;
  link_write *w = malloc(sizeof(*w) + n);
  if (!w) return UV_ENOMEM;
  w->l = l;
  w->len = n;
  memcpy(w->bytes, p, n);
  uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)n);
  int rc = uv_write(&w->req, (uv_stream_t *)&l->tcp, &b, 1, on_write);
  if (rc) {
    free(w);
    return rc;
  }
  l->queued += n;
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  srv_link *l = (srv_link *)h;
  (void)suggested;
  *buf = uv_buf_init((char *)l->rbuf, sizeof(l->rbuf));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  srv_link *l = (srv_link *)st;
  (void)buf;
  if (n < 0) {
    link_fail(l, n == UV_EOF ? "closed by the peer" : uv_strerror((int)n));
    return;
  }
  if (n > 0 && !l->closing && l->ops->on_data) l->ops->on_data(l, l->rbuf, (size_t)n);
}

static void on_connect(uv_connect_t *req, int status) {
  srv_link *l = req->data;
  if (l->closing) return;
  if (status) {
    link_fail(l, uv_strerror(status));
    return;
  }
  l->connected = 1;
  uv_tcp_nodelay(&l->tcp, 1);
  uv_read_start((uv_stream_t *)&l->tcp, on_alloc, on_read);
  if (l->pending_len) {
    int rc = submit(l, l->pending, l->pending_len);
    free(l->pending);
    l->pending = NULL;
    l->pending_len = 0;
    if (rc) link_fail(l, uv_strerror(rc));
  }
}

srv_link *srv_link_open(uv_loop_t *loop, const char *hostport, const srv_link_ops *ops, void *data) {
  char host[96];
  const char *colon = strrchr(hostport, ':');
  if (!colon || (size_t)(colon - hostport) >= sizeof(host)) return NULL;
  const char *h = hostport;
  size_t hl = (size_t)(colon - hostport);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [v6]:port */
    h++;
    hl -= 2;
  }
  memcpy(host, h, hl);
  host[hl] = '\0';
  int port = atoi(colon + 1);
  struct sockaddr_storage addr;
  if (port <= 0 || port > 65535) return NULL;
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr) != 0)
    return NULL;
  srv_link *l = calloc(1, sizeof(*l));
  if (!l) return NULL;
  l->ops = ops;
  l->data = data;
  uv_tcp_init(loop, &l->tcp);
  l->connect.data = l;
  if (uv_tcp_connect(&l->connect, &l->tcp, (const struct sockaddr *)&addr, on_connect) != 0) {
    l->closing = 1;
    uv_close((uv_handle_t *)&l->tcp, on_closed);
    return NULL;
  }
  return l;
}

int srv_link_write(srv_link *l, const void *p, size_t n) {
  if (l->closing) return UV_ECANCELED;
  if (l->connected) return submit(l, p, n);
  if (l->pending_len + n > LINK_MAX_QUEUED) return UV_ENOBUFS;
  uint8_t *g = realloc(l->pending, l->pending_len + n);
  if (!g) return UV_ENOMEM;
  memcpy(g + l->pending_len, p, n);
  l->pending = g;
  l->pending_len += n;
  return 0;
}
