/*
 * srv_face_udp.c — the face inputs' sockets: a uv_udp_t per input on the loop, each datagram
 * checked against the allowed sources, decoded (protocol/proto_osc.h, proto_livelink.h) and
 * handed to session/srv_face.c value by value.
 *
 * A datagram is taken whole or not at all: VMC's is walked twice, first to check it (type tags,
 * finite values, at most SRV_FACE_MAX_NAMES names in the frame being built), then to hand its
 * values over; a Live Link datagram is decoded before any value is handed over. A dropped
 * datagram is counted under its reason and touches nothing else: the session, its viewers and
 * other inputs never see it.
 *
 * Why inside deformd and not a bridge process: the budget from a datagram to the WEIGHTS frame
 * on the wire is 2 ms at the 99th percentile (docs/performance.md), and a bridge adds a second
 * hop, a JSON encode and decode and a second process to run; parsing a datagram of at most a
 * few kilobytes costs microseconds on the loop.
 *
 * DOES NOT write anything to disk or wait on anything.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "proto_osc.h"
#include "proto_livelink.h"
#include "srv_face.h"
#include "srv_face_udp.h"
#include "srv_log.h"

typedef struct face_sock {
  uv_udp_t udp;
  srv_face_input *in;
  srv_server *srv;
  int kind, port;
  uint8_t buf[65536]; /* one datagram at a time (the loop handles them one by one) */
} face_sock;

struct srv_face_udp {
  face_sock *socks[2];
  int count;
};

/* ---- VMC ------------------------------------------------------------------------------------------------ */

typedef struct vmc_check {
  uint32_t names;   /* Val messages since the last Apply, at most (an upper bound: names may repeat) */
  int why;          /* 0, or the counter the datagram is dropped under */
} vmc_check;

static int vmc_is(const proto_osc_msg *m, const char *address) { return strcmp(m->address, address) == 0; }

static int vmc_check_msg(void *arg, const proto_osc_msg *m) {
  vmc_check *c = arg;
  if (vmc_is(m, PROTO_VMC_BLEND_VAL)) {
    if (m->argc != 2 || m->args[0].type != 's' || m->args[1].type != 'f') return c->why = SRV_FACE_MALFORMED;
    if (!isfinite(m->args[1].f)) return c->why = SRV_FACE_NONFINITE;
    if (++c->names > SRV_FACE_MAX_NAMES) return c->why = SRV_FACE_TOO_MANY;
  } else if (vmc_is(m, PROTO_VMC_BLEND_APPLY)) {
    c->names = 0;
  }
  return 0;
}

static int vmc_take_msg(void *arg, const proto_osc_msg *m) {
  srv_face_input *in = arg;
  if (vmc_is(m, PROTO_VMC_BLEND_VAL)) {
    /* a frame built from many datagrams may still pass the limit: the names past it are counted */
    if (srv_face_set(in, m->args[0].s, m->args[0].len, m->args[1].f) != 0) srv_face_count(in, SRV_FACE_TOO_MANY);
  }
  else if (vmc_is(m, PROTO_VMC_BLEND_APPLY)) srv_face_commit(in);
  else srv_face_count(in, SRV_FACE_IGNORED);
  return 0;
}

int srv_face_udp_vmc(srv_face_input *in, const unsigned char *p, size_t n) {
  /* The frame being built may already hold names from earlier datagrams (one message per
   * datagram is allowed): they count against the limit, as an upper bound. */
  vmc_check c = {0, 0};
  int rc = proto_osc_walk(p, n, vmc_check_msg, &c);
  int why = c.why ? c.why : rc ? SRV_FACE_MALFORMED : 0;
  if (why) {
    srv_face_count(in, (srv_face_counter)why);
    return why;
  }
  srv_face_count(in, SRV_FACE_PACKETS);
  proto_osc_walk(p, n, vmc_take_msg, in); /* checked: it walks to the end */
  return 0;
}

/* ---- Live Link Face --------------------------------------------------------------------------------------- */

int srv_face_udp_livelink(srv_face_input *in, const unsigned char *p, size_t n) {
  proto_livelink_frame f;
  int why = proto_livelink_decode(p, n, &f) ? SRV_FACE_MALFORMED : 0;
  for (uint32_t i = 0; !why && i < PROTO_LIVELINK_VALUES; i++)
    if (!isfinite(f.values[i])) why = SRV_FACE_NONFINITE;
  if (why) {
    srv_face_count(in, (srv_face_counter)why);
    return why;
  }
  srv_face_count(in, SRV_FACE_PACKETS);
  srv_face_discard(in);
  for (uint32_t i = 0; i < PROTO_LIVELINK_VALUES; i++) {
    const char *name = proto_livelink_name(i);
    srv_face_set(in, name, strlen(name), f.values[i]);
  }
  srv_face_commit(in);
  return 0;
}

/* ---- sockets ------------------------------------------------------------------------------------------------- */

/* Loopback, or an address the config's "face_allow" names. */
static int source_allowed(const srv_server *srv, const struct sockaddr *addr) {
  char name[64] = "";
  if (addr->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
    if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) return 1;
    uv_ip4_name(a, name, sizeof(name));
  } else if (addr->sa_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
    static const unsigned char loop6[16] = {[15] = 1};
    if (memcmp(&a->sin6_addr, loop6, 16) == 0) return 1;
    uv_ip6_name(a, name, sizeof(name));
  } else {
    return 0;
  }
  for (uint32_t i = 0; i < srv->cfg.face_allow_count; i++)
    if (strcmp(srv->cfg.face_allow[i], name) == 0) return 1;
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  face_sock *fs = h->data;
  *buf = uv_buf_init((char *)fs->buf, sizeof(fs->buf));
}

static void on_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr, unsigned flags) {
  uint64_t received = uv_hrtime(); /* where the server's part of a frame's latency starts */
  face_sock *fs = h->data;
  (void)buf;
  if (nread < 0) {
    srv_log(SRV_LOG_WARN, "face input %s:%d: %s", fs->kind == SRV_FACE_VMC ? "vmc" : "livelink", fs->port,
            uv_strerror((int)nread));
    return;
  }
  if (!addr) return; /* nothing more to read now */
  if (!source_allowed(fs->srv, addr)) {
    srv_face_count(fs->in, SRV_FACE_REFUSED);
    return;
  }
  if (flags & UV_UDP_PARTIAL) {
    srv_face_count(fs->in, SRV_FACE_MALFORMED);
    return;
  }
  srv_face_received(fs->in, received);
  if (fs->kind == SRV_FACE_VMC) srv_face_udp_vmc(fs->in, fs->buf, (size_t)nread);
  else srv_face_udp_livelink(fs->in, fs->buf, (size_t)nread);
  srv_face_received(fs->in, 0);
}

static void free_sock(uv_handle_t *h) { free(h->data); }

static int bind_one(srv_server *srv, int kind, const char *listen, int port, const char *session, char *err,
                    size_t errlen) {
  struct sockaddr_storage ss;
  if (uv_ip4_addr(listen, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(listen, port, (struct sockaddr_in6 *)&ss) != 0) {
    snprintf(err, errlen, "%s %s: not a numeric IPv4/IPv6 address", kind == SRV_FACE_VMC ? "--vmc-listen" : "--livelink-listen",
             listen);
    return UV_EINVAL;
  }
  face_sock *fs = calloc(1, sizeof(*fs));
  if (!fs) return UV_ENOMEM;
  fs->srv = srv;
  fs->kind = kind;
  uv_udp_init(srv->loop, &fs->udp);
  fs->udp.data = fs;
  int rc = uv_udp_bind(&fs->udp, (const struct sockaddr *)&ss, 0);
  if (rc == 0) {
    int len = sizeof(ss);
    rc = uv_udp_getsockname(&fs->udp, (struct sockaddr *)&ss, &len);
    fs->port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                       : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  if (rc == 0 && !(fs->in = srv_face_input_add(srv, kind, listen, fs->port, session, err, errlen))) rc = UV_ENOMEM;
  else if (rc) snprintf(err, errlen, "face input on %s port %d: %s", listen, port, uv_strerror(rc));
  if (rc == 0) {
    /* Room for bursts (a sender of one message per datagram sends 50 a frame): 1 MiB asked,
     * what the kernel grants (net.core.rmem_max) taken. */
    int want = 1 << 20;
    uv_recv_buffer_size((uv_handle_t *)&fs->udp, &want);
    rc = uv_udp_recv_start(&fs->udp, on_alloc, on_recv);
  }
  if (rc) {
    uv_close((uv_handle_t *)&fs->udp, free_sock);
    return rc;
  }
  srv->face_udp->socks[srv->face_udp->count++] = fs;
  srv_log(SRV_LOG_INFO, "face input: %s on udp %s:%d drives session %s (unauthenticated: loopback%s)",
          kind == SRV_FACE_VMC ? "VMC" : "Live Link Face", listen, fs->port, session,
          srv->cfg.face_allow_count ? " and face_allow" : " only");
  return 0;
}

int srv_face_udp_start(srv_server *srv, char *err, size_t errlen) {
  const srv_config *c = &srv->cfg;
  if (c->vmc_port < 0 && c->livelink_port < 0) return 0;
  if (!(srv->face_udp = calloc(1, sizeof(*srv->face_udp)))) return UV_ENOMEM;
  int rc = 0;
  if (c->vmc_port >= 0)
    rc = bind_one(srv, SRV_FACE_VMC, c->vmc_listen, c->vmc_port, c->vmc_session ? c->vmc_session : "demo", err, errlen);
  if (rc == 0 && c->livelink_port >= 0)
    rc = bind_one(srv, SRV_FACE_LIVELINK, c->livelink_listen, c->livelink_port,
                  c->livelink_session ? c->livelink_session : "demo", err, errlen);
  return rc;
}

void srv_face_udp_stop(srv_server *srv) {
  struct srv_face_udp *u = srv->face_udp;
  if (!u) return;
  for (int i = 0; i < u->count; i++) uv_close((uv_handle_t *)&u->socks[i]->udp, free_sock);
  free(u);
  srv->face_udp = NULL;
}

int srv_face_udp_port(const srv_server *srv, int kind) {
  const struct srv_face_udp *u = srv->face_udp;
  for (int i = 0; u && i < u->count; i++)
    if (u->socks[i]->kind == kind) return u->socks[i]->port;
  return -1;
}
