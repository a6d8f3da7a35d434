/*
 * srv_redis.c — one connection to Redis on the loop: hiredis's asynchronous API on a uv_poll_t
 * watching the socket, so no call here ever waits.
 *
 * What it adds to hiredis 0.14:
 *   - the address: redis://[:PASSWORD@]HOST[:PORT][/DB] parsed once; a host name is resolved
 *     with uv_getaddrinfo on the thread pool (hiredis would call getaddrinfo on the loop), then
 *     hiredis connects to the numeric address; AUTH and SELECT go first on every connection;
 *   - reconnection with backoff (100 ms doubling to 5 s) whenever the connection fails or
 *     drops, and a state callback so that its owner can resubscribe and republish;
 *   - its own libuv adapter, hiredis's adapters/libuv.h with one difference: when libuv reports
 *     a socket error (a connection reset by the peer, a refused connect), libuv has stopped the
 *     poll and hiredis's adapter just returns, so the connection sat dead until the watchdog
 *     (seconds: redis_timeout_ms) and a refused connect until the handshake limit (5 s); here
 *     hiredis is told at once (it reads the error or checks the connect) and the connection
 *     is dropped and made again;
 *   - a watchdog: hiredis 0.14 has no command timeouts, so a Redis that stops answering (a
 *     stopped process, a black-holed link) would leave every command waiting forever. Each
 *     command carries a deadline; replies come back in order, so the oldest deadline is the one
 *     to watch, and a timer that finds it past drops the connection (its commands are answered
 *     with NULL) and reconnects.
 *
 * Replies: a callback gets hiredis's redisReply (valid during the call), or NULL when the
 * connection went away before the reply came.
 *
 * DOES NOT know what the commands mean (srv_publish.c, srv_relay.c, srv_registry.c do).
 */
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "srv_error.h"
#include "srv_log.h"
#include "srv_cluster.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define WATCH_MS 250
#define DEADLINES 65536 /* commands in flight at once (a ring of their deadlines) */

struct srv_redis {
  uv_loop_t *loop;
  srv_redis_url url;
  char name[32];             /* for logs: "publish", "read", ... */
  redisAsyncContext *ac;     /* NULL while disconnected */
  int ready;                 /* connected, AUTH/SELECT sent */
  int destroying;
  int resolving;             /* a uv_getaddrinfo is running (its request is freed by its callback) */
  uv_timer_t timer;          /* the watchdog and the reconnection delay */
  int closing_handles, timer_closed;
  uint32_t backoff_ms;
  uint64_t retry_at;         /* uv_now() when the next attempt may start (0: not waiting) */
  uint64_t connect_at;       /* uv_now() when the connection being made began */
  uint64_t *deadlines;       /* ring: one per command in flight, oldest first */
  uint32_t dl_head, dl_count;
  srv_redis_state_cb state_cb;
  void *state_arg;
  srv_redis_message_cb msg_cb; /* srv_redis_psubscribe: a subscribed connection's messages */
  void *msg_arg;
  srv_redis_stats stats;
};

typedef struct pending {
  srv_redis *r;
  srv_redis_reply_cb cb;
  void *arg;
} pending;

int srv_redis_parse_url(const char *url, srv_redis_url *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  out->port = 6379;
  const char *p = url;
  if (strncmp(p, "redis://", 8) != 0) {
    snprintf(err, errlen, "'%s' is not a redis:// address (redis://HOST:PORT[/DB])", url);
    return SRV_EPARAMS;
  }
  p += 8;
  const char *at = strchr(p, '@');
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    const char *pw = colon ? colon + 1 : p;
    if ((size_t)(at - pw) >= sizeof(out->password)) {
      snprintf(err, errlen, "the password in '%s' is too long", url);
      return SRV_EPARAMS;
    }
    memcpy(out->password, pw, (size_t)(at - pw));
    p = at + 1;
  }
  const char *end = p + strcspn(p, "/");
  const char *host_end = end;
  if (*p == '[') { /* [v6]:port */
    const char *rb = memchr(p, ']', (size_t)(end - p));
    if (!rb) goto bad;
    memcpy(out->host, p + 1, (size_t)(rb - p - 1) < sizeof(out->host) ? (size_t)(rb - p - 1) : 0);
    host_end = rb + 1;
    if (host_end < end && *host_end != ':') goto bad;
  } else {
    const char *colon = memchr(p, ':', (size_t)(end - p));
    host_end = colon ? colon : end;
    if ((size_t)(host_end - p) >= sizeof(out->host)) goto bad;
    memcpy(out->host, p, (size_t)(host_end - p));
  }
  if (!out->host[0]) goto bad;
  if (host_end < end && *host_end == ':') {
    char *e = NULL;
    long port = strtol(host_end + 1, &e, 10);
    if (e != end || port < 1 || port > 65535) goto bad;
    out->port = (int)port;
  }
  if (*end == '/' && end[1]) {
    char *e = NULL;
    long db = strtol(end + 1, &e, 10);
    if (*e || db < 0 || db > 1000000) goto bad;
    out->db = (int)db;
  }
  return 0;
bad:
  snprintf(err, errlen, "'%s' is not a valid Redis address (redis://[:PASSWORD@]HOST[:PORT][/DB])", url);
  return SRV_EPARAMS;
}

static void start_connect(srv_redis *r, const char *ip);

/* ---- the libuv adapter (hiredis's adapters/libuv.h, but a socket error is not ignored) -------- */

typedef struct uv_events {
  redisAsyncContext *ac; /* NULL once hiredis let go (cleanup): the handle is closing */
  uv_poll_t handle;
  int events;
} uv_events;

static void on_poll(uv_poll_t *h, int status, int events) {
  uv_events *p = h->data;
  if (!p->ac) return;
  if (status != 0) {
    /* libuv stopped polling on a socket error. hiredis learns it now: a connect in progress
     * is checked (a refused one fails through on_connect), an established connection reads
     * the error and disconnects (on_disconnect). */
    srv_redis *r = p->ac->data;
    if (p->ac->c.flags & REDIS_CONNECTED) redisAsyncHandleRead(p->ac);
    else redisAsyncHandleWrite(p->ac);
    if (p->ac && r) {
      /* hiredis saw nothing wrong (the error is gone): the poll is stopped, so drop it. */
      srv_log(SRV_LOG_WARN, "redis (%s): %s:%d: the socket failed (%s): reconnecting", r->name, r->url.host,
              r->url.port, uv_strerror(status));
      srv_redis_drop(r);
    }
    return;
  }
  if (events & UV_READABLE) redisAsyncHandleRead(p->ac);
  if (p->ac && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->ac);
}

static void set_events(uv_events *p, int events) {
  p->events = events;
  if (events) uv_poll_start(&p->handle, events, on_poll);
  else uv_poll_stop(&p->handle);
}

static void add_read(void *privdata) {
  uv_events *p = privdata;
  set_events(p, p->events | UV_READABLE);
}

static void del_read(void *privdata) {
  uv_events *p = privdata;
  set_events(p, p->events & ~UV_READABLE);
}

static void add_write(void *privdata) {
  uv_events *p = privdata;
  set_events(p, p->events | UV_WRITABLE);
}

static void del_write(void *privdata) {
  uv_events *p = privdata;
  set_events(p, p->events & ~UV_WRITABLE);
}

static void on_events_closed(uv_handle_t *h) { free(h->data); }

static void cleanup(void *privdata) {
  uv_events *p = privdata;
  p->ac = NULL;
  uv_close((uv_handle_t *)&p->handle, on_events_closed);
}

static int attach(redisAsyncContext *ac, uv_loop_t *loop) {
  if (ac->ev.data) return REDIS_ERR;
  uv_events *p = calloc(1, sizeof(*p));
  if (!p) return REDIS_ERR;
  if (uv_poll_init_socket(loop, &p->handle, ac->c.fd) != 0) {
    free(p);
    return REDIS_ERR;
  }
  p->handle.data = p;
  p->ac = ac;
  ac->ev.addRead = add_read;
  ac->ev.delRead = del_read;
  ac->ev.addWrite = add_write;
  ac->ev.delWrite = del_write;
  ac->ev.cleanup = cleanup;
  ac->ev.data = p;
  return REDIS_OK;
}

static void set_ready(srv_redis *r, int ready) {
  if (r->ready == ready) return;
  r->ready = ready;
  if (r->state_cb) r->state_cb(r, ready, r->state_arg);
}

/* After a failure: try again after the backoff, which doubles up to its ceiling. */
static void schedule_retry(srv_redis *r) {
  if (r->destroying) return;
  r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : BACKOFF_MIN_MS;
  if (r->backoff_ms > BACKOFF_MAX_MS) r->backoff_ms = BACKOFF_MAX_MS;
  r->retry_at = uv_now(r->loop) + r->backoff_ms;
}

static void finish_destroy(srv_redis *r);

static void on_disconnect(const redisAsyncContext *ac, int status) {
  srv_redis *r = ac->data;
  (void)status;
  if (!r) return;
  r->ac = NULL;
  r->dl_count = 0;
  r->stats.disconnects++;
  if (!r->destroying)
    srv_log(SRV_LOG_WARN, "redis (%s): connection to %s:%d lost: %s", r->name, r->url.host, r->url.port,
            ac->errstr[0] ? ac->errstr : "closed");
  set_ready(r, 0);
  if (r->destroying) finish_destroy(r);
  else schedule_retry(r);
}

static void on_auth_or_select(redisAsyncContext *ac, void *reply, void *privdata) {
  srv_redis *r = privdata;
  redisReply *rep = reply;
  (void)ac;
  if (r->dl_count) {
    r->dl_head = (r->dl_head + 1) % DEADLINES;
    r->dl_count--;
  }
  if (rep && rep->type == REDIS_REPLY_ERROR)
    srv_log(SRV_LOG_ERROR, "redis (%s): %s refused: %s", r->name, r->url.password[0] ? "AUTH or SELECT" : "SELECT",
            rep->str);
}

static void push_deadline(srv_redis *r, uint32_t timeout_ms) {
  if (r->dl_count == DEADLINES) return; /* bounded by srv_redis_command */
  r->deadlines[(r->dl_head + r->dl_count) % DEADLINES] = uv_now(r->loop) + timeout_ms;
  r->dl_count++;
}

static void on_connect(const redisAsyncContext *ac, int status) {
  srv_redis *r = ac->data;
  if (!r) return;
  if (status != REDIS_OK) {
    /* hiredis frees the context itself after this callback. */
    srv_log(r->stats.connects ? SRV_LOG_DEBUG : SRV_LOG_WARN, "redis (%s): cannot connect to %s:%d: %s", r->name,
            r->url.host, r->url.port, ac->errstr);
    r->ac = NULL;
    schedule_retry(r);
    return;
  }
  r->stats.connects++;
  r->backoff_ms = 0;
  srv_log(SRV_LOG_INFO, "redis (%s): connected to %s:%d", r->name, r->url.host, r->url.port);
  redisAsyncContext *c = (redisAsyncContext *)ac;
  if (r->url.password[0]) {
    push_deadline(r, 5000);
    redisAsyncCommand(c, on_auth_or_select, r, "AUTH %s", r->url.password);
  }
  if (r->url.db) {
    push_deadline(r, 5000);
    redisAsyncCommand(c, on_auth_or_select, r, "SELECT %d", r->url.db);
  }
  set_ready(r, 1);
}

static void start_connect(srv_redis *r, const char *ip) {
  redisAsyncContext *ac = redisAsyncConnect(ip, r->url.port);
  if (!ac) {
    schedule_retry(r);
    return;
  }
  if (ac->err) {
    srv_log(SRV_LOG_DEBUG, "redis (%s): cannot connect to %s:%d: %s", r->name, ip, r->url.port, ac->errstr);
    redisAsyncFree(ac);
    schedule_retry(r);
    return;
  }
  ac->data = r;
  if (attach(ac, r->loop) != REDIS_OK) {
    redisAsyncFree(ac);
    schedule_retry(r);
    return;
  }
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  r->ac = ac;
  r->connect_at = uv_now(r->loop);
}

typedef struct resolve_req {
  uv_getaddrinfo_t req;
  srv_redis *r;
} resolve_req;

static void free_if_done(srv_redis *r);

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  resolve_req *q = (resolve_req *)req;
  srv_redis *r = q->r;
  r->resolving = 0;
  char ip[64] = "";
  if (status == 0 && res) {
    if (res->ai_family == AF_INET) uv_ip4_name((struct sockaddr_in *)res->ai_addr, ip, sizeof(ip));
    else if (res->ai_family == AF_INET6) uv_ip6_name((struct sockaddr_in6 *)res->ai_addr, ip, sizeof(ip));
  }
  uv_freeaddrinfo(res);
  free(q);
  if (r->destroying) {
    free_if_done(r);
    return;
  }
  if (!ip[0]) {
    srv_log(SRV_LOG_WARN, "redis (%s): cannot resolve %s: %s", r->name, r->url.host,
            status ? uv_strerror(status) : "no address");
    schedule_retry(r);
    return;
  }
  start_connect(r, ip);
}

/* A numeric address connects at once; a name is resolved on the pool first. */
static void attempt(srv_redis *r) {
  r->retry_at = 0;
  struct sockaddr_in6 a6;
  struct sockaddr_in a4;
  if (uv_ip4_addr(r->url.host, r->url.port, &a4) == 0 || uv_ip6_addr(r->url.host, r->url.port, &a6) == 0) {
    start_connect(r, r->url.host);
    return;
  }
  resolve_req *q = calloc(1, sizeof(*q));
  if (!q) {
    schedule_retry(r);
    return;
  }
  q->r = r;
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  r->resolving = 1;
  if (uv_getaddrinfo(r->loop, &q->req, on_resolved, r->url.host, NULL, &hints) != 0) {
    r->resolving = 0;
    free(q);
    schedule_retry(r);
  }
}

/* The watchdog: a command past its deadline means Redis stopped answering. */
static void on_timer(uv_timer_t *t) {
  srv_redis *r = t->data;
  uint64_t now = uv_now(r->loop);
  if (r->ac && r->dl_count && now > r->deadlines[r->dl_head]) {
    if (!r->destroying) { /* (closing: what was still unanswered is not waited for any longer) */
      r->stats.stalls++;
      srv_log(SRV_LOG_WARN, "redis (%s): %s:%d left a command unanswered past its deadline: reconnecting", r->name,
              r->url.host, r->url.port);
    }
    redisAsyncContext *ac = r->ac;
    /* Outside hiredis's callbacks, so freed at once: every pending command is answered NULL
     * and on_disconnect schedules the reconnection. */
    redisAsyncFree(ac);
    return;
  }
  if (r->ac && !r->ready && now - r->connect_at > 5000) { /* a handshake that never ends */
    srv_log(SRV_LOG_WARN, "redis (%s): connecting to %s:%d timed out", r->name, r->url.host, r->url.port);
    srv_redis_drop(r);
    return;
  }
  if (!r->ac && !r->resolving && r->retry_at && now >= r->retry_at) attempt(r);
}

int srv_redis_create(uv_loop_t *loop, const srv_redis_url *url, const char *name, srv_redis_state_cb cb, void *arg,
                     srv_redis **out) {
  srv_redis *r = calloc(1, sizeof(*r));
  if (!r) return SRV_EINTERNAL;
  r->deadlines = malloc(sizeof(uint64_t) * DEADLINES);
  if (!r->deadlines) {
    free(r);
    return SRV_EINTERNAL;
  }
  r->loop = loop;
  r->url = *url;
  snprintf(r->name, sizeof(r->name), "%s", name);
  r->state_cb = cb;
  r->state_arg = arg;
  uv_timer_init(loop, &r->timer);
  r->timer.data = r;
  uv_timer_start(&r->timer, on_timer, WATCH_MS, WATCH_MS);
  attempt(r);
  *out = r;
  return 0;
}

static void free_if_done(srv_redis *r) {
  if (!r->timer_closed || r->resolving) return;
  free(r->deadlines);
  free(r);
}

static void on_timer_closed(uv_handle_t *h) {
  srv_redis *r = h->data;
  r->timer_closed = 1;
  free_if_done(r);
}

static void finish_destroy(srv_redis *r) {
  if (r->closing_handles) return;
  r->closing_handles = 1;
  uv_timer_stop(&r->timer);
  uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}

/* A graceful close: what was sent is flushed and answered (the lease's DEL on a clean stop),
 * within a second; then the handles close and the struct is freed. */
void srv_redis_destroy(srv_redis *r) {
  if (!r) return;
  r->destroying = 1;
  r->state_cb = NULL;
  r->msg_cb = NULL;
  r->retry_at = 0;
  if (r->ac && r->ready) {
    r->dl_count = 0;
    push_deadline(r, 1000);
    redisAsyncDisconnect(r->ac); /* on_disconnect finishes */
    return;
  }
  if (r->ac) srv_redis_drop(r);
  finish_destroy(r);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
  pending *p = privdata;
  srv_redis *r = p->r;
  (void)ac;
  if (r->dl_count) {
    r->dl_head = (r->dl_head + 1) % DEADLINES;
    r->dl_count--;
  }
  redisReply *rep = reply;
  if (rep && rep->type == REDIS_REPLY_ERROR) r->stats.errors++;
  if (p->cb) p->cb(r, rep, p->arg);
  free(p);
}

int srv_redis_command(srv_redis *r, uint32_t timeout_ms, srv_redis_reply_cb cb, void *arg, int argc,
                      const char **argv, const size_t *lens) {
  if (!r->ac || !r->ready || r->destroying) return SRV_EBUSY;
  if (r->dl_count >= DEADLINES - 4) return SRV_ELIMIT;
  pending *p = malloc(sizeof(*p));
  if (!p) return SRV_EINTERNAL;
  p->r = r;
  p->cb = cb;
  p->arg = arg;
  if (redisAsyncCommandArgv(r->ac, on_reply, p, argc, argv, lens) != REDIS_OK) {
    free(p);
    return SRV_EBUSY;
  }
  push_deadline(r, timeout_ms);
  r->stats.commands++;
  return 0;
}

/* A subscribed connection's replies: the PSUBSCRIBE's confirmation, then each message as
 * ["pmessage", pattern, channel, payload]. hiredis keeps calling this with the same privdata
 * for as long as the subscription lasts; NULL when the connection goes. */
static void on_pmessage(redisAsyncContext *ac, void *reply, void *privdata) {
  srv_redis *r = privdata;
  redisReply *rep = reply;
  (void)ac;
  if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 4 || !r->msg_cb) return;
  redisReply *kind = rep->element[0], *chan = rep->element[2], *msg = rep->element[3];
  if (kind->type != REDIS_REPLY_STRING || strcmp(kind->str, "pmessage") != 0 || chan->type != REDIS_REPLY_STRING ||
      msg->type != REDIS_REPLY_STRING)
    return;
  r->msg_cb(r, chan->str, chan->len, msg->str, msg->len, r->msg_arg);
}

int srv_redis_psubscribe(srv_redis *r, const char *pattern, srv_redis_message_cb cb, void *arg) {
  if (!r->ac || !r->ready || r->destroying) return SRV_EBUSY;
  r->msg_cb = cb;
  r->msg_arg = arg;
  if (redisAsyncCommand(r->ac, on_pmessage, r, "PSUBSCRIBE %s", pattern) != REDIS_OK) return SRV_EBUSY;
  r->stats.commands++;
  return 0;
}

int srv_redis_ready(const srv_redis *r) { return r && r->ac && r->ready; }

uint32_t srv_redis_in_flight(const srv_redis *r) { return r ? r->dl_count : 0; }

void srv_redis_get_stats(const srv_redis *r, srv_redis_stats *out) {
  if (r) *out = r->stats;
  else memset(out, 0, sizeof(*out));
}

void srv_redis_drop(srv_redis *r) {
  if (!r || !r->ac) return;
  redisAsyncContext *ac = r->ac;
  if (!r->ready) { /* never connected: hiredis calls no disconnect callback */
    ac->data = NULL;
    r->ac = NULL;
    redisAsyncFree(ac);
    schedule_retry(r);
    return;
  }
  redisAsyncFree(ac);
}
