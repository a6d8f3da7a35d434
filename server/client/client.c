/*
 * client.c — the blocking deformd client: TCP connections, frame and line reading, HELLO and
 * JSON-RPC calls (see client.h). Every function returns 0 or a negative CLIENT_E* code.
 *
 * DOES NOT keep a session's state (client_replica.c) or use libuv.
 */
#include "client.h"
#include "proto_caps.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t client_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int client_parse_hostport(const char *text, char *host, size_t hostlen, int *port) {
  const char *colon = strrchr(text, ':');
  if (!colon) return CLIENT_EINVAL;
  size_t n = (size_t)(colon - text);
  const char *h = text;
  if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
    h++;
    n -= 2;
  }
  if (n == 0) {
    h = "127.0.0.1";
    n = strlen(h);
  }
  if (n >= hostlen) return CLIENT_EINVAL;
  memcpy(host, h, n);
  host[n] = '\0';
  char *end = NULL;
  long p = strtol(colon + 1, &end, 10);
  if (!end || *end || p <= 0 || p > 65535) return CLIENT_EINVAL;
  *port = (int)p;
  return 0;
}

/* Non-blocking connect, in two steps so a caller polled once per frame never waits for the
 * handshake. An address whose connect fails at once is skipped for the next one; a connect in
 * progress is finished (or failed) by client_connect_finish. */
int client_resolve(const char *host, int port, struct addrinfo **res, char *err, size_t errlen) {
  char service[16];
  snprintf(service, sizeof(service), "%d", port);
  struct addrinfo hints = {0};
  hints.ai_socktype = SOCK_STREAM;
  *res = NULL;
  int rc = getaddrinfo(host, service, &hints, res);
  if (rc) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
    *res = NULL;
    return CLIENT_ERESOLVE;
  }
  return 0;
}

int client_connect_start(client_conn *c, const char *host, int port, char *err, size_t errlen) {
  struct addrinfo *res = NULL;
  int rc = client_resolve(host, port, &res, err, errlen);
  if (rc) {
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    return rc;
  }
  rc = client_connect_start_at(c, res, host, port, err, errlen);
  freeaddrinfo(res);
  return rc;
}

/* The addresses of one name not tried yet: a connect in progress that fails goes on with the
 * next (client_connect_finish). Freed once connected or closed. */
typedef struct client__addrs {
  uint32_t count, next;
  int port;
  char host[256];
  struct {
    struct sockaddr_storage sa;
    socklen_t len;
    int family, type, protocol;
  } a[];
} client__addrs;

static void connected(client_conn *c) { /* blocking again, like client_connect */
  free(c->untried);
  c->untried = NULL;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
}

/* Starts a connect to the next untried address that takes one: 0 (connected), CLIENT_EINPROGRESS,
 * or CLIENT_ECONNECT with the last address's reason once none is left. */
static int try_next(client_conn *c, int why, char *err, size_t errlen) {
  client__addrs *u = c->untried;
  while (u->next < u->count) {
    const int k = (int)u->next++;
    int fd = socket(u->a[k].family, u->a[k].type | SOCK_CLOEXEC | SOCK_NONBLOCK, u->a[k].protocol);
    if (fd < 0) {
      why = errno;
      continue;
    }
    int now = connect(fd, (const struct sockaddr *)&u->a[k].sa, u->a[k].len) == 0;
    if (now || errno == EINPROGRESS) {
      c->fd = fd;
      if (now) connected(c);
      return now ? 0 : CLIENT_EINPROGRESS;
    }
    why = errno;
    close(fd);
  }
  snprintf(err, errlen, "cannot connect to %s:%d: %s", u->host, u->port, strerror(why));
  free(c->untried);
  c->untried = NULL;
  return CLIENT_ECONNECT;
}

int client_connect_start_at(client_conn *c, const struct addrinfo *res, const char *host, int port, char *err,
                            size_t errlen) {
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  /* A client accepts whatever frame size its server sends (a 5M-vertex SNAPSHOT passes 64 MiB). */
  c->limits.max_frame = UINT32_MAX;
  uint32_t n = 0;
  for (const struct addrinfo *a = res; a; a = a->ai_next)
    if (a->ai_addrlen <= sizeof(struct sockaddr_storage)) n++;
  client__addrs *u = calloc(1, sizeof(*u) + n * sizeof(u->a[0]));
  if (!u) {
    snprintf(err, errlen, "out of memory");
    return CLIENT_ECONNECT;
  }
  u->port = port;
  snprintf(u->host, sizeof(u->host), "%s", host);
  for (const struct addrinfo *a = res; a; a = a->ai_next) {
    if (a->ai_addrlen > sizeof(struct sockaddr_storage)) continue;
    memcpy(&u->a[u->count].sa, a->ai_addr, a->ai_addrlen);
    u->a[u->count].len = a->ai_addrlen;
    u->a[u->count].family = a->ai_family;
    u->a[u->count].type = a->ai_socktype;
    u->a[u->count].protocol = a->ai_protocol;
    u->count++;
  }
  c->untried = u;
  return try_next(c, ECONNREFUSED, err, errlen);
}

int client_connect_finish(client_conn *c, int timeout_ms, char *err, size_t errlen) {
  struct pollfd pfd = {c->fd, POLLOUT, 0};
  int pr = poll(&pfd, 1, timeout_ms);
  if (pr == 0 || (pr < 0 && errno == EINTR)) return CLIENT_EINPROGRESS;
  int soerr = 0;
  socklen_t len = sizeof(soerr);
  if (pr < 0) soerr = errno;
  else if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
  if (soerr) {
    close(c->fd);
    c->fd = -1;
    if (c->untried) return try_next(c, soerr, err, errlen);
    snprintf(err, errlen, "cannot connect: %s", strerror(soerr));
    return CLIENT_ECONNECT;
  }
  connected(c);
  return 0;
}

/* The blocking connect is the two steps with no time limit on the second (a signal does not
 * end it). */
int client_connect(client_conn *c, const char *host, int port, char *err, size_t errlen) {
  int rc = client_connect_start(c, host, port, err, errlen);
  while (rc == CLIENT_EINPROGRESS) rc = client_connect_finish(c, -1, err, errlen);
  if (rc) client_close(c);
  return rc;
}

long client_read_some(client_conn *c, void *buf, size_t cap) {
  if (c->tls) return client__tls_read(c, buf, cap);
  for (;;) {
    ssize_t r = recv(c->fd, buf, cap, MSG_DONTWAIT);
    if (r > 0) return (long)r;
    if (r == 0) return CLIENT_ECLOSED;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : CLIENT_EIO;
  }
}

void client_close(client_conn *c) {
  client__tls_free(c);
  free(c->untried);
  if (c->fd >= 0) close(c->fd);
  free(c->buf);
  memset(c, 0, sizeof(*c));
  c->fd = -1;
}

int client_send(client_conn *c, const void *data, size_t n) {
  const uint8_t *p = data;
  while (c->tls && n > 0) { /* the socket is non-blocking under TLS: wait as SSL asks */
    long w = client__tls_write(c, p, n);
    if (w < 0) return (int)w;
    if (w == 0) {
      struct pollfd pfd = {c->fd, c->tls_wait, 0};
      if (poll(&pfd, 1, -1) < 0 && errno != EINTR) return CLIENT_EIO;
      continue;
    }
    p += w;
    n -= (size_t)w;
  }
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return CLIENT_EIO;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int client_send_nowait(client_conn *c, const void *data, size_t n, size_t *sent) {
  *sent = 0;
  if (c->tls) {
    long w = client__tls_write(c, data, n);
    if (w < 0) return (int)w;
    *sent = (size_t)w;
    return 0;
  }
  for (;;) {
    ssize_t w = send(c->fd, data, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w >= 0) {
      *sent = (size_t)w;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return errno == EPIPE || errno == ECONNRESET ? CLIENT_ECLOSED : CLIENT_EIO;
  }
}

short client_poll_events(const client_conn *c) { return c->tls && c->tls_wait ? c->tls_wait : POLLIN; }

/* Bytes buffered here are a partial frame the socket must complete: only what SSL holds decrypted
 * and not yet taken counts. */
int client_readable_now(const client_conn *c) { return client_tls_pending(c); }

int client_send_buf(client_conn *c, proto_buf *b) {
  int rc = b->failed ? CLIENT_ENOMEM : client_send(c, b->data, b->len);
  b->len = 0;
  return rc;
}

/* Makes sure at least `need` unread bytes are buffered, reading what the socket has. Returns 0
 * when they are, CLIENT_ETIMEDOUT when not within timeout_ms (0: only what is available now;
 * a signal also ends the wait), CLIENT_ECLOSED at EOF, CLIENT_EIO or CLIENT_ENOMEM. */
static int fill(client_conn *c, size_t need, int timeout_ms) {
  uint64_t deadline = timeout_ms >= 0 ? client_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  for (;;) {
    if (c->len - c->off >= need) return 0;
    if (c->off > 0) { /* keep unread bytes at the front */
      memmove(c->buf, c->buf + c->off, c->len - c->off);
      c->len -= c->off;
      c->off = 0;
    }
    if (c->cap - c->len < 65536 || c->cap < need) {
      size_t cap = c->cap ? c->cap : 65536;
      while (cap - c->len < 65536 || cap < need) cap *= 2;
      uint8_t *g = realloc(c->buf, cap);
      if (!g) return CLIENT_ENOMEM;
      c->buf = g;
      c->cap = cap;
    }
    if (c->tls) { /* what SSL has decrypted (or can, from what arrived) first */
      long r = client__tls_read(c, c->buf + c->len, c->cap - c->len);
      if (r < 0) return (int)r;
      if (r > 0) {
        c->len += (size_t)r;
        continue;
      }
    }
    int wait = -1;
    if (timeout_ms >= 0) {
      uint64_t now = client_now_ns();
      wait = now >= deadline ? 0 : (int)((deadline - now + 999999ull) / 1000000ull);
    }
    struct pollfd pfd = {c->fd, c->tls ? c->tls_wait : POLLIN, 0};
    int pr = poll(&pfd, 1, wait);
    if (pr < 0 && errno == EINTR) return CLIENT_ETIMEDOUT;
    if (pr < 0) return CLIENT_EIO;
    if (pr == 0) return CLIENT_ETIMEDOUT;
    if (c->tls) continue;
    ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r == 0) return CLIENT_ECLOSED;
    if (r < 0) return CLIENT_EIO;
    c->len += (size_t)r;
  }
}

int client_read_frame(client_conn *c, int timeout_ms, proto_header *h, const uint8_t **payload, char *err,
                      size_t errlen) {
  int rc = fill(c, PROTO_HEADER_SIZE, timeout_ms);
  if (rc) {
    if (rc != CLIENT_ETIMEDOUT) snprintf(err, errlen, "connection closed (%s)", client_strerror(rc));
    return rc;
  }
  int hr = proto_header_decode(c->buf + c->off, &c->limits, h);
  if (hr) {
    snprintf(err, errlen, "bad frame header: %s", proto_strerror(hr));
    return CLIENT_EMALFORMED;
  }
  /* Nothing is consumed until the whole frame is here: a timeout leaves it for the next call. */
  rc = fill(c, PROTO_HEADER_SIZE + (size_t)h->length, timeout_ms);
  if (rc) {
    if (rc != CLIENT_ETIMEDOUT) snprintf(err, errlen, "connection closed inside a frame (%s)", client_strerror(rc));
    return rc;
  }
  *payload = c->buf + c->off + PROTO_HEADER_SIZE;
  c->off += PROTO_HEADER_SIZE + h->length;
  return 0;
}

int client_hello2(client_conn *c, const char *session, proto_role role, const char *token,
                  const proto_hello_opts *opts) {
  proto_buf b;
  proto_buf_init(&b);
  size_t ns = strlen(session), nt = token ? strlen(token) : 0;
  if (ns > PROTO_MAX_NAME || nt > PROTO_MAX_NAME) return CLIENT_EINVAL;
  proto_hello h = {PROTO_VERSION, (uint8_t)role, {session, (uint16_t)ns}, {token ? token : "", (uint16_t)nt}};
  int rc = (opts ? proto_encode_hello2(&b, &h, opts) : proto_encode_hello(&b, &h)) == 0 ? client_send_buf(c, &b)
                                                                                     : CLIENT_EINVAL;
  proto_buf_fini(&b);
  return rc;
}

int client_hello(client_conn *c, const char *session, proto_role role, const char *token) {
  return client_hello2(c, session, role, token, NULL);
}

int client_read_welcome(client_conn *c, int timeout_ms, proto_welcome *w, proto_welcome_opts *o, char *err,
                        size_t errlen) {
  proto_header h;
  const uint8_t *p;
  int rc = client_read_frame(c, timeout_ms, &h, &p, err, errlen);
  if (rc) return rc;
  if (h.type == PROTO_ERROR) {
    proto_error e;
    if (proto_decode_error(p, h.length, &e) == 0)
      snprintf(err, errlen, "refused (error %u): %.*s", e.code, (int)e.message.len, e.message.ptr);
    else
      snprintf(err, errlen, "refused with an ERROR that does not decode");
    return CLIENT_EMALFORMED;
  }
  if (h.type != PROTO_WELCOME) {
    snprintf(err, errlen, "expected WELCOME, got a frame of type %u", h.type);
    return CLIENT_EMALFORMED;
  }
  rc = proto_decode_welcome2(p, h.length, w, o);
  if (rc) {
    snprintf(err, errlen, "malformed WELCOME: %s", proto_strerror(rc));
    return CLIENT_EMALFORMED;
  }
  return 0;
}

int client_caps_parse(const char *list, proto_hello_opts *opts, char *err, size_t errlen) {
  const char *bad = NULL;
  uint32_t set;
  if (proto_caps_parse(list, &set, &bad) != 0) {
    char known[256];
    proto_caps_format(~0u, known, sizeof(known));
    snprintf(err, errlen, "unknown capability '%.*s' (this build knows: %s)", (int)strcspn(bad, ","), bad, known);
    return CLIENT_EINVAL;
  }
  opts->caps = set;
  opts->caps_option = 1;
  return 0;
}

int client_rpc(client_conn *c, const char *method, const cJSON *params, int timeout_ms, cJSON **result,
            cJSON **error) {
  static int next_id = 1;
  int id = next_id++;
  *result = *error = NULL;
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "jsonrpc", "2.0");
  cJSON_AddNumberToObject(req, "id", id);
  cJSON_AddStringToObject(req, "method", method);
  if (params) cJSON_AddItemToObject(req, "params", cJSON_Duplicate(params, 1));
  char *text = cJSON_PrintUnformatted(req);
  cJSON_Delete(req);
  if (!text) return CLIENT_ENOMEM;
  size_t n = strlen(text);
  text[n] = '\n'; /* replaces the terminator; n + 1 bytes are sent */
  int rc = client_send(c, text, n + 1);
  free(text);
  if (rc) return rc;
  for (;;) {
    /* Find a complete line. */
    uint8_t *nl;
    size_t need = 1;
    while (!(nl = c->len > c->off ? memchr(c->buf + c->off, '\n', c->len - c->off) : NULL)) {
      need = c->len - c->off + 1;
      if ((rc = fill(c, need, timeout_ms)) != 0) return rc;
    }
    size_t len = (size_t)(nl - (c->buf + c->off));
    cJSON *resp = cJSON_ParseWithLength((const char *)c->buf + c->off, len);
    c->off += len + 1;
    if (!resp) return CLIENT_EMALFORMED;
    cJSON *rid = cJSON_GetObjectItemCaseSensitive(resp, "id");
    if (cJSON_IsNumber(rid) && rid->valueint != id) { /* a stray answer: skip it */
      cJSON_Delete(resp);
      continue;
    }
    cJSON *e = cJSON_DetachItemFromObjectCaseSensitive(resp, "error");
    if (e) {
      *error = e;
      cJSON_Delete(resp);
      return CLIENT_ERPC;
    }
    *result = cJSON_DetachItemFromObjectCaseSensitive(resp, "result");
    cJSON_Delete(resp);
    return 0;
  }
}


const char *client_strerror(int code) {
  switch (code) {
    case 0: return "ok";
    case CLIENT_EINVAL: return "invalid argument";
    case CLIENT_ERESOLVE: return "cannot resolve the host name";
    case CLIENT_ECONNECT: return "cannot connect";
    case CLIENT_EINPROGRESS: return "connect in progress";
    case CLIENT_ETIMEDOUT: return "timed out";
    case CLIENT_ECLOSED: return "connection closed by the peer";
    case CLIENT_EIO: return "i/o error";
    case CLIENT_EMALFORMED: return "malformed frame or response";
    case CLIENT_ERPC: return "the server answered with an error";
    case CLIENT_ENOMEM: return "out of memory";
    case CLIENT_ETLS: return "TLS failed (handshake, or an untrusted certificate)";
    default: return "unknown error";
  }
}
