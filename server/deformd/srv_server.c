/*
 * srv_server.c — the top of the service: the listeners and what they accept, the tick that
 * closes silent, unauthenticated, idle and slow connections and idle gestures, the file
 * descriptor limit, signals, start and stop.
 *
 * An accepted connection is handed to its transport (srv_stream_ops, srv_rpc_conn_ops,
 * srv_http_ops for the HTTP port, whose WebSockets become stream or JSON-RPC connections); over
 * max_connections, or while stopping, the transport says why and the connection closes.
 *
 * DOES NOT parse anything or hold session logic: it wires the modules below it together.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "srv_server.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_frame.h"
#include "srv_store.h"
#include "srv_data.h"
#include "srv_import.h"
#include "srv_config.h"
#include "srv_author.h"
#include "srv_grant.h"
#include "srv_tls.h"
#include "srv_conn.h"
#include "srv_access.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_presence.h"
#include "srv_history.h"
#include "srv_restore.h"
#include "srv_gesture.h"
#include "srv_brush.h"
#include "srv_mask.h"
#include "srv_blend.h"
#include "srv_anim.h"
#include "srv_texclip.h"
#include "srv_jobs.h"
#include "srv_methods.h"
#include "srv_ports.h"
#include "srv_http.h"
#include "srv_cluster.h"
#include "srv_face.h"
#include "srv_face_udp.h"
#include "deformd.h"

static void on_connection(uv_stream_t *listener, int status, srv_conn_kind kind) {
  srv_server *s = listener->data;
  if (status < 0) {
    srv_log(SRV_LOG_WARN, "accept: %s", uv_strerror(status));
    return;
  }
  srv_conn *c = srv_conn_create(s, kind, kind == SRV_CONN_STREAM ? &srv_stream_ops
                                         : kind == SRV_CONN_RPC  ? &srv_rpc_conn_ops
                                                                 : &srv_http_ops);
  if (!c) {
    srv_log(SRV_LOG_ERROR, "accept: out of memory");
    return;
  }
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    srv_conn_close(c);
    return;
  }
  c->grant.token = -1;
  /* Every port speaks TLS when the server has a certificate: one layer under each transport. */
  if (s->tls && !(c->tls = srv_tls_create(s->tls))) {
    srv_log(SRV_LOG_ERROR, "accept: out of memory");
    srv_conn_close(c);
    return;
  }
  srv_conn_start(c);
  s->stats.connections_accepted++;
  /* Over the limit: accept, say why, close — never drop silently. */
  if (s->conn_count > s->cfg.max_connections || s->stopping) {
    s->stats.connections_refused++;
    c->ops->refuse(c, s->stopping ? SRV_ESHUTDOWN : SRV_ELIMIT,
                   s->stopping ? "server is shutting down" : "too many connections");
    return;
  }
  srv_log(SRV_LOG_DEBUG, "connection %u from %s (%s)", c->id, c->peer,
          kind == SRV_CONN_STREAM ? "stream" : kind == SRV_CONN_RPC ? "rpc" : "http");
}

static void on_stream_connection(uv_stream_t *l, int status) { on_connection(l, status, SRV_CONN_STREAM); }
static void on_rpc_connection(uv_stream_t *l, int status) { on_connection(l, status, SRV_CONN_RPC); }
static void on_http_connection(uv_stream_t *l, int status) { on_connection(l, status, SRV_CONN_HTTP); }

/* ---- start and stop ------------------------------------------------------------------------------ */

static int make_addr(const char *host, int port, struct sockaddr_storage *out) {
  if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
  /* Numeric addresses only: a name would need a DNS lookup, which has no place on the loop. */
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0) return 0;
  if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0) return 0;
  return UV_EINVAL;
}

/* Every --listen address numeric (or localhost), before anything else looks at the list. */
static int check_listen(const srv_config *cfg, char *err, size_t errlen) {
  char addrs[SRV_MAX_LISTEN][64];
  int optional[SRV_MAX_LISTEN];
  int count = srv_config_listen_addresses(cfg->listen, addrs, optional);
  if (count <= 0) {
    snprintf(err, errlen, "--listen %s: not a list of at most %d numeric addresses", cfg->listen, SRV_MAX_LISTEN);
    return SRV_EPARAMS;
  }
  for (int i = 0; i < count; i++) {
    struct sockaddr_storage a;
    if (make_addr(addrs[i], 0, &a) != 0) {
      snprintf(err, errlen, "--listen %s: '%s' is not a numeric IPv4/IPv6 address", cfg->listen, addrs[i]);
      return SRV_EPARAMS;
    }
  }
  return 0;
}

static void close_listeners(uv_tcp_t *ls, int *n) {
  for (int i = 0; i < *n; i++) uv_close((uv_handle_t *)&ls[i], NULL);
  *n = 0;
}

/* Listens on every --listen address (localhost: 127.0.0.1 and ::1), the first on `port` (0: any
 * free one) and the others on the port it got, so one port number reaches all of them. An
 * optional address (::1 of localhost) that cannot be bound — no IPv6 here — is left out with a
 * note. Returns 0 with *n listeners open and *bound the port, or a UV error (none left open). */
static int listen_on(srv_server *s, uv_tcp_t *ls, int *n, int port, uv_connection_cb cb, int *bound) {
  char addrs[SRV_MAX_LISTEN][64];
  int optional[SRV_MAX_LISTEN];
  int count = srv_config_listen_addresses(s->cfg.listen, addrs, optional);
  *n = 0;
  if (count <= 0) {
    srv_log(SRV_LOG_ERROR, "--listen %s: not a list of at most %d numeric addresses", s->cfg.listen, SRV_MAX_LISTEN);
    return UV_EINVAL;
  }
  for (int i = 0; i < count; i++) {
    struct sockaddr_storage addr;
    int at = *n ? *bound : port;
    int rc = make_addr(addrs[i], at, &addr);
    if (rc) {
      srv_log(SRV_LOG_ERROR, "--listen %s: '%s' is not a numeric IPv4/IPv6 address", s->cfg.listen, addrs[i]);
      close_listeners(ls, n);
      return rc;
    }
    uv_tcp_t *l = &ls[*n];
    uv_tcp_init(s->loop, l);
    l->data = s;
    /* An IPv6 listener takes IPv6 only: "0.0.0.0,::" are two listeners side by side. */
    rc = uv_tcp_bind(l, (const struct sockaddr *)&addr, addr.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)l, 511, cb);
    if (rc) {
      uv_close((uv_handle_t *)l, NULL);
      if (optional[i]) {
        srv_log(SRV_LOG_INFO, "not listening on %s port %d: %s (no IPv6 loopback here)", addrs[i], at, uv_strerror(rc));
        continue;
      }
      srv_log(SRV_LOG_ERROR, "cannot listen on %s port %d: %s", addrs[i], at, uv_strerror(rc));
      close_listeners(ls, n);
      return rc;
    }
    (*n)++;
    if (*n == 1) {
      struct sockaddr_storage got;
      int len = sizeof(got);
      uv_tcp_getsockname(l, (struct sockaddr *)&got, &len);
      *bound = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                              : ((struct sockaddr_in6 *)&got)->sin6_port);
    }
  }
  return 0;
}

static void close_all_listeners(srv_server *s) {
  close_listeners(s->stream_listener, &s->stream_listeners);
  close_listeners(s->rpc_listener, &s->rpc_listeners);
  close_listeners(s->http_listener, &s->http_listeners);
}

static void on_retained(srv_server *s, void *arg, int status, srv_session *x, const srv_session *old,
                        const char *err) {
  (void)s, (void)arg;
  if (status) srv_log(SRV_LOG_WARN, "session %s: the history older than --history-days stays: %s", x->name, err);
  else srv_log(SRV_LOG_INFO, "session %s: history before version %llu folded into a checkpoint (--history-days)",
               x->name, (unsigned long long)old->version);
}

/* --history-days: operations older than that are folded into a checkpoint, at start and then
 * every minute. */
static void retention_pass(srv_server *s) {
  if (!s->store || s->cfg.history_days <= 0) return;
  s->retention_ms = uv_now(s->loop);
  uv_timeval64_t now;
  uv_gettimeofday(&now);
  double cutoff = (double)now.tv_sec + now.tv_usec / 1e6 - s->cfg.history_days * 86400.0;
  for (srv_session *x = s->sessions; x; x = x->next) {
    uint64_t v = srv_history_version_before(x, cutoff);
    if (v == 0 || v <= x->retained_version) continue;
    char err[256];
    if (srv_job_restore_at(s, x, v, 1, on_retained, NULL, err, sizeof(err)) == 0) x->retained_version = v;
  }
}

static void on_tick(uv_timer_t *t) {
  srv_server *s = t->data;
  uint64_t now = uv_now(s->loop);
  if (s->stopping && s->conns == NULL && s->pending_jobs == 0) {
    /* Signal handlers stay until here: a second SIGTERM during the goodbyes is absorbed. */
    uv_timer_stop(&s->tick);
    uv_close((uv_handle_t *)&s->tick, NULL);
    srv_anim_shutdown(s);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    if (s->store) { /* a checkpoint per session makes the next start quick; then the last commit */
      for (srv_session *x = s->sessions; x; x = x->next) srv_history_checkpoint(s, x);
      srv_store_close(s->store);
      s->store = NULL;
    }
    return;
  }
  if (now % 1000 < 100) /* about once a second */
    for (srv_session *x = s->sessions; x; x = x->next) srv_gesture_expire(s, x, s->cfg.gesture_idle_ms);
  if (now - s->retention_ms >= 60000) retention_pass(s);
  for (srv_conn *c = s->conns, *next; c; c = next) {
    next = c->next;
    if (c->closing) continue;
    if (c->finishing) {
      if (now > c->finish_deadline) srv_conn_close(c);
      continue;
    }
    if (c->kind == SRV_CONN_HTTP && c->queued == 0 && now - c->accepted_at > s->cfg.hello_timeout_ms) {
      srv_conn_close(c); /* an idle HTTP connection (no request for that long) */
      continue;
    }
    if (c->kind == SRV_CONN_STREAM && c->stage == SRV_STAGE_GREETING && now - c->accepted_at > s->cfg.hello_timeout_ms) {
      srv_conn_fail(c, PROTO_ERR_MALFORMED, "no HELLO within the time allowed");
      continue;
    }
    if (c->kind == SRV_CONN_RPC && s->access.enabled && c->grant.role == SRV_ROLE_NONE && now - c->accepted_at > s->cfg.hello_timeout_ms) {
      char why[96];
      snprintf(why, sizeof(why), "no auth within %u ms: closing", s->cfg.hello_timeout_ms);
      srv_log(SRV_LOG_INFO, "connection %u (%s) closed: %s", c->id, c->peer, why);
      c->ops->refuse(c, SRV_EACCES, why);
      continue;
    }
    /* Silent, with nothing queued and no request in flight (a job's reference): gone. */
    if (s->cfg.idle_timeout_ms && now - c->last_input_ms > s->cfg.idle_timeout_ms && c->queued == 0 && c->refs == 1) {
      char why[96];
      snprintf(why, sizeof(why), "idle for more than %u ms: closing", s->cfg.idle_timeout_ms);
      srv_log(SRV_LOG_INFO, "connection %u (%s) closed: %s", c->id, c->peer, why);
      c->ops->refuse(c, SRV_ELIMIT, why);
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

/* One line on stdout for scripts and tests that asked for port 0, printed once every session
 * named on the command line is open (or has failed): whoever reads it can use them at once. */
static void announce_ports(srv_server *s) {
  char face[64] = "";
  int vmc = srv_face_udp_port(s, SRV_FACE_VMC), ll = srv_face_udp_port(s, SRV_FACE_LIVELINK);
  if (vmc >= 0) snprintf(face, sizeof(face), " vmc_port=%d", vmc);
  if (ll >= 0) snprintf(face + strlen(face), sizeof(face) - strlen(face), " livelink_port=%d", ll);
  if (s->cfg.http_port >= 0)
    printf("stream_port=%d rpc_port=%d http_port=%d%s\n", s->stream_port, s->rpc_port, s->http_port, face);
  else
    printf("stream_port=%d rpc_port=%d%s\n", s->stream_port, s->rpc_port, face);
  fflush(stdout);
}

/* An operator's session on the demo head (--demo) is dressed (mesh_demo_dress, in srv_jobs.c): its
 * texture clip is compressed on the pool from here. `make demo` plays "smile-frown" (deploy/demo.sh);
 * the server does not, so a session's version moves only when somebody asks. */
static void on_session_opened(srv_server *s, void *arg, int status, srv_session *session,
                              const char *err) {
  const srv_session_spec *spec = arg;
  if (status) {
    srv_log(SRV_LOG_ERROR, "cannot open session: %s", err);
  } else {
    srv_log(SRV_LOG_INFO, "session %s: %u vertices, %u triangles, %u targets", session->name,
            session->mesh->vertex_count, session->mesh->triangle_count, session->mesh->target_count);
    char why[256];
    if (strcmp(spec->mesh, "demo") == 0 && srv_texclip_demo(s, session, why, sizeof(why)) != 0)
      srv_log(SRV_LOG_ERROR, "session %s: no texture clip: %s", session->name, why);
  }
  if (s->opening && --s->opening == 0) announce_ports(s);
}

/* Every applied operation: the history (and the store), then, with --redis, the stream. */
static void on_applied(srv_server *s, srv_session *x, const srv_op *op, uint64_t version, const srv_before *before) {
  srv_face_on_applied(s, x, op, version); /* a face take's open run is stored before this op's record */
  srv_history_on_applied(s, x, op, version, before);
  if (s->cluster && !s->cluster->stopping) srv_publish_applied(s->cluster, x, op, version, before);
}

/* What a closing session stops besides its viewers (srv_session_close). */
static void close_session_work(srv_session *x) {
  srv_history_close_waiting(x);
  srv_gesture_close_all(x);
  srv_brush_close_all(x);
  srv_mask_close_all(x);
  srv_blend_close_all(x);
  srv_anim_close(x);
  srv_presence_close(x);
}

/* The face inputs (--vmc-port, --livelink-port) and the mapping file of their sessions, read
 * here at start, before the loop serves anyone. */
static int start_face(srv_server *s) {
  char err[512];
  int rc = srv_face_create(s);
  if (rc == 0 && s->cfg.face_map) {
    size_t n = 0;
    char *text = NULL;
    FILE *f = fopen(s->cfg.face_map, "rb");
    if (f && (text = malloc((1u << 20) + 1)) != NULL) n = fread(text, 1, 1u << 20, f);
    cJSON *j = text ? cJSON_ParseWithLength(text, n) : NULL;
    if (!j) {
      snprintf(err, sizeof(err), "--face-map %s: %s", s->cfg.face_map, f ? "not a JSON object of at most 1 MiB"
                                                                            : "cannot open the file");
      rc = UV_EINVAL;
    }
    const char *names[2] = {s->cfg.vmc_session ? s->cfg.vmc_session : "demo",
                            s->cfg.livelink_session ? s->cfg.livelink_session : "demo"};
    if (rc == 0 && srv_face_map_file(s, j, names, err, sizeof(err)) != 0) rc = UV_EINVAL;
    cJSON_Delete(j);
    free(text);
    if (f) fclose(f);
  }
  if (rc == 0) rc = srv_face_udp_start(s, err, sizeof(err));
  if (rc) srv_log(SRV_LOG_ERROR, "%s", err);
  return rc;
}

/* Every stored session, rebuilt before the server listens (nobody can ask for one that is not
 * back yet). This is start-up work on the loop thread while it serves no one; a session that
 * does not rebuild is reported and its name kept from reuse, and its rows stay untouched. */
static int author_row(const srv_store_row *row, void *arg) {
  return srv_authors_set(&((srv_server *)arg)->authors, row->op.author, row->name) != 0;
}

typedef struct restore_list {
  int64_t *ids;
  char **names;
  uint32_t n;
} restore_list;

static int session_row(const srv_store_row *row, void *arg) {
  restore_list *l = arg;
  int64_t *ids = realloc(l->ids, sizeof(int64_t) * (l->n + 1));
  if (ids) l->ids = ids;
  char **names = realloc(l->names, sizeof(char *) * (l->n + 1));
  if (names) l->names = names;
  if (!ids || !names || !(l->names[l->n] = strdup(row->name))) return 1;
  l->ids[l->n++] = row->session;
  return 0;
}

static int token_row(const srv_store_row *row, void *arg) {
  srv_role role = (srv_role)row->op.kind;
  if (role < SRV_ROLE_VIEWER || role > SRV_ROLE_ADMIN) return 0; /* grants nothing */
  return srv_access_add(&((srv_server *)arg)->access, row->session, row->op.body, role, row->scope, row->name,
                        row->time) != 0;
}

/* Who may do what: the stored tokens, then the administrator's from the configuration
 * (hashed; the copy is wiped), then whether listening where the configuration says is safe. */
static int start_access(srv_server *s, srv_config *cfg, char *err, size_t errlen) {
  srv_access_init(&s->access);
  if (s->store) {
    srv_store_reader *r = NULL;
    int rc = srv_store_reader_open(srv_store_path(s->store), &r, err, errlen);
    if (rc == 0) rc = srv_store_read_tokens(r, token_row, s, err, errlen);
    srv_store_reader_close(r);
    if (rc) return rc;
  }
  if (cfg->admin_token && cfg->admin_token[0]) {
    uint8_t h[SRV_TOKEN_HASH];
    srv_access_hash(cfg->admin_token, strlen(cfg->admin_token), h);
    /* A node of a cluster presents it to the others when it forwards their clients' requests. */
    if (cfg->redis && !(s->node_token = strdup(cfg->admin_token))) return SRV_EINTERNAL;
    explicit_bzero(cfg->admin_token, strlen(cfg->admin_token)); /* main frees the (now empty) copy */
    if (srv_access_add(&s->access, 0, h, SRV_ROLE_ADMIN, NULL, "admin", 0) != 0) return SRV_EINTERNAL;
  }
  uint32_t stored = s->access.count - (srv_access_find(&s->access, 0) != NULL);
  if (srv_access_enabled(&s->access)) {
    srv_log(SRV_LOG_INFO, "access: both ports require a token (%s%u stored)",
            srv_access_find(&s->access, 0) ? "the administrator's, " : "", stored);
    if (!s->tls && !srv_config_is_loopback(cfg->listen))
      srv_log(SRV_LOG_WARN, "tokens and meshes cross the network in clear on %s: give --tls-cert and --tls-key",
              cfg->listen);
    return 0;
  }
  if (!srv_config_is_loopback(cfg->listen) && !cfg->insecure) {
    snprintf(err, errlen, "refusing to listen on %s without access tokens: anyone who can reach it could do "
             "anything. Give the administrator's token in DEFORMD_ADMIN_TOKEN (or --admin-token-file FILE), or "
             "pass --insecure", cfg->listen);
    return SRV_EACCES;
  }
  srv_log(SRV_LOG_WARN, "access: no tokens: %s; anyone who can connect may use every method%s",
          srv_config_is_loopback(cfg->listen) ? "listening on loopback only" : "--insecure",
          srv_config_is_loopback(cfg->listen) ? " (set DEFORMD_ADMIN_TOKEN to require tokens)" : "");
  return 0;
}

static int restore_sessions(srv_server *s, char *err, size_t errlen) {
  srv_store_reader *r = NULL;
  restore_list l = {0};
  int rc = srv_store_reader_open(srv_store_path(s->store), &r, err, errlen);
  char damage[512];
  if (rc == 0 && !srv_store_quick_check(r, damage, sizeof(damage)))
    srv_log(SRV_LOG_ERROR, "store %s is damaged (%s): the sessions that read are served; deformd --check-store "
            "DIR says which do not", srv_store_path(s->store), damage);
  if (rc == 0) rc = srv_store_read_authors(r, author_row, s, err, errlen);
  if (rc == 0) rc = srv_store_read_sessions(r, session_row, &l, err, errlen);
  srv_store_reader_close(r);
  for (uint32_t i = 0; rc == 0 && i < l.n; i++) {
    if (l.ids[i] >= s->next_session_id) s->next_session_id = l.ids[i] + 1;
    srv_session *x = NULL;
    char why[512];
    uint64_t t0 = uv_hrtime();
    int r2 = srv_restore_session(srv_store_path(s->store), l.ids[i], UINT64_MAX, 1, s->cfg.max_vertices, &x, why,
                                 sizeof(why));
    if (r2) {
      srv_log(SRV_LOG_ERROR, "session %s was not restored: %s; its stored data is left as it is (session.list "
              "shows it damaged; an owner may session.close it)", l.names[i], why);
      srv_session_mark_damaged(s, l.names[i], l.ids[i], why);
      /* What reads of it (the records before the damage) is kept for session.export. */
      if (srv_restore_readable(srv_store_path(s->store), l.ids[i], s->cfg.max_vertices, &x, why, sizeof(why)) == 0) {
        srv_log(SRV_LOG_INFO, "session %s: its state at version %llu reads; session.export exports it", l.names[i],
                (unsigned long long)x->version);
        srv_session_damaged_readable(s, l.names[i], x);
      }
      continue;
    }
    srv_session_add(s, x);
    srv_job_gesture_prep(s, x);
    srv_log(SRV_LOG_INFO, "session %s restored at version %llu in %.0f ms", x->name, (unsigned long long)x->version,
            (double)(uv_hrtime() - t0) / 1e6);
  }
  for (uint32_t i = 0; i < l.n; i++) free(l.names[i]);
  free(l.names);
  free(l.ids);
  return rc;
}

/* Every connection is a file descriptor: raise the soft RLIMIT_NOFILE to the hard one, and
 * hold max_connections to what it allows after what the server needs besides (listeners, the
 * loop's own, import workers' pipes, files), so that a connection over the limit is refused
 * with a reason instead of failing to be accepted. */
static void fit_fd_limit(srv_server *s) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  rlim_t was = r.rlim_cur;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) r.rlim_cur = was;
  }
  uint64_t reserve = 32 + 2 * (uint64_t)s->cfg.import_workers;
  uint64_t fds = r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_cur;
  uint64_t allowed = fds > reserve + 1 ? fds - reserve : 1;
  if (r.rlim_cur != was)
    srv_log(SRV_LOG_INFO, "file descriptors: soft limit raised from %llu to %llu", (unsigned long long)was,
            (unsigned long long)fds);
  if (s->cfg.max_connections > allowed) {
    srv_log(SRV_LOG_WARN, "max_connections %u lowered to %llu: the file descriptor limit is %llu (%llu kept for "
            "the server itself)", s->cfg.max_connections, (unsigned long long)allowed, (unsigned long long)fds,
            (unsigned long long)reserve);
    s->cfg.max_connections = (uint32_t)allowed;
  }
}

int srv_server_start(srv_server *s, uv_loop_t *loop, const srv_config *cfg) {
  memset(s, 0, sizeof(*s));
  s->data.meshes = s->data.exports = -1; /* nothing open yet (srv_server_fini may run after a failed start) */
  s->on_session_close = close_session_work;
  s->on_applied = on_applied;
  s->on_edits_settled = srv_history_settled;
  s->loop = loop;
  s->cfg = *cfg;
  s->limits.max_frame = cfg->max_frame;
  s->limits.max_vertices = cfg->max_vertices;
  s->started_ms = uv_now(loop);
  s->next_session_id = 1;
  srv_history_set_undo_depth(cfg->undo_depth);
  if (srv_authors_init(&s->authors)) return UV_ENOMEM;
  char dirbuf[1024], err[1024];
  const char *dir = cfg->relay ? NULL : srv_config_data_dir(cfg, dirbuf, sizeof(dirbuf));
  if (cfg->relay) {
    srv_log(SRV_LOG_INFO, "relay: no data directory (it owns no session)");
  } else if (dir) {
    int rc = srv_data_make_dir(dir, err, sizeof(err));
    if (rc == 0) rc = srv_store_open(loop, dir, cfg->durability_full, &s->store, err, sizeof(err));
    if (rc == 0) rc = restore_sessions(s, err, sizeof(err));
    if (rc) {
      srv_log(SRV_LOG_ERROR, "%s", err);
      return rc;
    }
  } else {
    srv_log(SRV_LOG_INFO, "no data directory (--data none): sessions and tokens live in memory only; clients may "
            "read meshes from --mesh-dir folders only and write no files");
  }
  int rc = srv_data_open(&s->data, dir, cfg->mesh_dirs, cfg->mesh_dir_count, err, sizeof(err));
  if (rc == 0 && cfg->tls_cert) rc = srv_tls_ctx_create(cfg->tls_cert, cfg->tls_key, &s->tls, err, sizeof(err));
  if (rc == 0) rc = check_listen(&s->cfg, err, sizeof(err));
  if (rc == 0) rc = start_access(s, &s->cfg, err, sizeof(err));
  if (rc) {
    srv_log(SRV_LOG_ERROR, "%s", err);
    return rc;
  }
  fit_fd_limit(s);
  rc = listen_on(s, s->stream_listener, &s->stream_listeners, cfg->stream_port, on_stream_connection, &s->stream_port);
  if (rc) return rc;
  rc = listen_on(s, s->rpc_listener, &s->rpc_listeners, cfg->rpc_port, on_rpc_connection, &s->rpc_port);
  if (rc == 0 && cfg->http_port >= 0)
    rc = listen_on(s, s->http_listener, &s->http_listeners, cfg->http_port, on_http_connection, &s->http_port);
  if (rc) {
    close_all_listeners(s);
    return rc;
  }
  srv_log(SRV_LOG_INFO, "listening on %s: stream port %d, JSON-RPC port %d%s", cfg->listen, s->stream_port,
          s->rpc_port, s->tls ? " (TLS)" : "");
  if (cfg->http_port >= 0)
    srv_log(SRV_LOG_INFO, "the browser viewer is at %s://%s:%d/?session=NAME", s->tls ? "https" : "http",
            strcmp(cfg->listen, "localhost") == 0 || strchr(cfg->listen, ',') ? "localhost" : cfg->listen, s->http_port);
  if (cfg->redis && (rc = srv_cluster_start(s, s->stream_port, s->rpc_port)) != 0) {
    close_all_listeners(s);
    return rc;
  }
  if ((rc = start_face(s)) != 0) {
    close_all_listeners(s);
    return rc;
  }
  uv_timer_init(loop, &s->tick);
  s->tick.data = s;
  uv_timer_start(&s->tick, on_tick, 100, 100);
  uv_signal_init(loop, &s->sigint);
  uv_signal_init(loop, &s->sigterm);
  s->sigint.data = s->sigterm.data = s;
  uv_signal_start(&s->sigint, on_signal, SIGINT);
  uv_signal_start(&s->sigterm, on_signal, SIGTERM);
  retention_pass(s);
  srv_import_limits il = {cfg->import_worker_path, cfg->import_memory_mb, cfg->import_seconds,
                          cfg->max_vertices, cfg->max_file_mb, cfg->import_workers, 0};
  srv_importer_init(&s->importer, loop, &il);
  for (uint32_t i = 0; i < cfg->session_count; i++) {
    char why[256];
    if (srv_session_find(s, cfg->sessions[i].name)) continue; /* restored: its history wins */
    if (srv_session_name_taken(s, cfg->sessions[i].name)) { /* damaged: its rows stay, so does the name */
      srv_log(SRV_LOG_WARN, "session %s is not opened from its mesh: the stored one is damaged (session.close it to "
              "start over)", cfg->sessions[i].name);
      continue;
    }
    if (srv_job_open_session(s, cfg->sessions[i].name, cfg->sessions[i].mesh, 0, cfg->sessions[i].up, on_session_opened, &s->cfg.sessions[i], why,
                             sizeof(why)) == 0)
      s->opening++;
    else
      srv_log(SRV_LOG_ERROR, "cannot open session %s: %s", cfg->sessions[i].name, why);
  }
  if (s->opening == 0) announce_ports(s);
  return 0;
}

void srv_server_stop(srv_server *s, const char *why) {
  if (s->stopping) return;
  s->stopping = 1;
  srv_cluster_stop(s);
  srv_import_shutdown(&s->importer);
  srv_access_stop(s);
  close_all_listeners(s);
  srv_face_udp_stop(s);
  srv_face_shutdown(s); /* takes end: their runs go to the store before its last commit */
  proto_buf b;
  proto_buf_init(&b);
  proto_encode_bye(&b, PROTO_ERR_SHUTDOWN, why);
  srv_frame *bye = srv_frame_from_buf(&b);
  for (srv_conn *c = s->conns, *next; c; c = next) {
    next = c->next;
    srv_conn_finish(c, c->kind == SRV_CONN_STREAM && c->stage != SRV_STAGE_GREETING ? bye : NULL);
  }
  srv_frame_unref(bye);
  /* The tick keeps running until the last connection is gone, then closes itself. */
}

void srv_server_fini(srv_server *s) {
  if (s->store) { /* the loop never ran to the end (a failed start) */
    srv_store_close(s->store);
    s->store = NULL;
  }
  srv_cluster_stop(s); /* a failed start: nothing ran */
  while (s->sessions) srv_session_close(s, s->sessions, "the server stopped");
  srv_cluster_free(s);
  for (uint32_t i = 0; i < s->damaged_count; i++) {
    free(s->damaged[i].name), free(s->damaged[i].why);
    srv_session_unref(s->damaged[i].readable);
  }
  free(s->damaged);
  srv_face_udp_stop(s); /* a failed start */
  srv_face_shutdown(s);
  srv_face_destroy(s);
  srv_authors_fini(&s->authors);
  srv_access_fini(&s->access);
  if (s->node_token) explicit_bzero(s->node_token, strlen(s->node_token));
  free(s->node_token);
  s->node_token = NULL;
  srv_data_close(&s->data);
  srv_tls_ctx_destroy(s->tls);
  s->tls = NULL;
}
