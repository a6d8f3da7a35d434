/*
 * client.c — blocking deformd client and the CPU replica of a session (see client.h).
 */
#include "client.h"

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

uint64_t dfc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int dfc_parse_hostport(const char *text, char *host, size_t hostlen, int *port) {
  const char *colon = strrchr(text, ':');
  if (!colon) return -1;
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
  if (n >= hostlen) return -1;
  memcpy(host, h, n);
  host[n] = '\0';
  char *end = NULL;
  long p = strtol(colon + 1, &end, 10);
  if (!end || *end || p <= 0 || p > 65535) return -1;
  *port = (int)p;
  return 0;
}

int dfc_connect(dfc_conn *c, const char *host, int port, char *err, size_t errlen) {
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  /* A client accepts whatever frame size its server sends (a 5M-vertex SNAPSHOT passes 64 MiB). */
  c->limits.max_frame = UINT32_MAX;
  char service[16];
  snprintf(service, sizeof(service), "%d", port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      c->fd = fd;
      break;
    }
    close(fd);
  }
  freeaddrinfo(res);
  if (c->fd < 0) {
    snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port, strerror(errno));
    return -1;
  }
  return 0;
}

/* Non-blocking connect, in two steps so a caller polled once per frame never waits for the
 * handshake. An address whose connect fails at once is skipped for the next one; a connect in
 * progress is finished (or failed) by dfc_connect_finish. */
int dfc_connect_start(dfc_conn *c, const char *host, int port, char *err, size_t errlen) {
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  c->limits.max_frame = UINT32_MAX; /* as dfc_connect */
  char service[16];
  snprintf(service, sizeof(service), "%d", port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  int result = -1, why = ECONNREFUSED;
  for (struct addrinfo *a = res; a && result < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = errno;
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      result = 0;
    } else if (errno == EINPROGRESS) {
      result = 1;
    } else {
      why = errno;
      close(fd);
      continue;
    }
    c->fd = fd;
  }
  freeaddrinfo(res);
  if (result < 0) {
    snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port, strerror(why));
    return -1;
  }
  if (result == 0) { /* connected at once: blocking again, like dfc_connect */
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
  }
  return result;
}

int dfc_connect_finish(dfc_conn *c, int timeout_ms, char *err, size_t errlen) {
  struct pollfd pfd = {c->fd, POLLOUT, 0};
  int pr = poll(&pfd, 1, timeout_ms);
  if (pr == 0 || (pr < 0 && errno == EINTR)) return 0;
  int soerr = 0;
  socklen_t len = sizeof(soerr);
  if (pr < 0) soerr = errno;
  else if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
  if (soerr) {
    snprintf(err, errlen, "cannot connect: %s", strerror(soerr));
    return -1;
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
  return 1;
}

void dfc_close(dfc_conn *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->buf);
  memset(c, 0, sizeof(*c));
  c->fd = -1;
}

int dfc_send(dfc_conn *c, const void *data, size_t n) {
  const uint8_t *p = data;
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int dfc_send_buf(dfc_conn *c, proto_buf *b) {
  int rc = b->failed ? -1 : dfc_send(c, b->data, b->len);
  b->len = 0;
  return rc;
}

/* Makes sure at least `need` unread bytes are buffered, reading what the socket has. 1 = yes,
 * 0 = not within timeout_ms (0: only what is available now), -1 = EOF or error. */
static int fill(dfc_conn *c, size_t need, int timeout_ms) {
  uint64_t deadline = timeout_ms >= 0 ? dfc_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  for (;;) {
    if (c->len - c->off >= need) return 1;
    if (c->off > 0) { /* keep unread bytes at the front */
      memmove(c->buf, c->buf + c->off, c->len - c->off);
      c->len -= c->off;
      c->off = 0;
    }
    if (c->cap - c->len < 65536 || c->cap < need) {
      size_t cap = c->cap ? c->cap : 65536;
      while (cap - c->len < 65536 || cap < need) cap *= 2;
      uint8_t *g = realloc(c->buf, cap);
      if (!g) return -1;
      c->buf = g;
      c->cap = cap;
    }
    int wait = -1;
    if (timeout_ms >= 0) {
      uint64_t now = dfc_now_ns();
      wait = now >= deadline ? 0 : (int)((deadline - now + 999999ull) / 1000000ull);
    }
    struct pollfd pfd = {c->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, wait);
    if (pr < 0 && errno == EINTR) return 0;
    if (pr < 0) return -1;
    if (pr == 0) return 0;
    ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return -1;
    c->len += (size_t)r;
  }
}

int dfc_read_frame(dfc_conn *c, int timeout_ms, proto_header *h, const uint8_t **payload,
                   char *err, size_t errlen) {
  int rc = fill(c, PROTO_HEADER_SIZE, timeout_ms);
  if (rc <= 0) {
    if (rc < 0) snprintf(err, errlen, "connection closed");
    return rc;
  }
  int hr = proto_header_decode(c->buf + c->off, &c->limits, h);
  if (hr) {
    snprintf(err, errlen, "bad frame header: %s", proto_strerror(hr));
    return -2;
  }
  /* Nothing is consumed until the whole frame is here: a timeout leaves it for the next call. */
  rc = fill(c, PROTO_HEADER_SIZE + (size_t)h->length, timeout_ms);
  if (rc <= 0) {
    if (rc < 0) snprintf(err, errlen, "connection closed inside a frame");
    return rc;
  }
  *payload = c->buf + c->off + PROTO_HEADER_SIZE;
  c->off += PROTO_HEADER_SIZE + h->length;
  return 1;
}

int dfc_hello(dfc_conn *c, const char *session, proto_role role, const char *token) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello h = {PROTO_VERSION, (uint8_t)role, {session, (uint16_t)strlen(session)},
                   {token ? token : "", (uint16_t)(token ? strlen(token) : 0)}};
  int rc = proto_encode_hello(&b, &h);
  if (rc == 0) rc = dfc_send_buf(c, &b);
  proto_buf_fini(&b);
  return rc;
}

int dfc_rpc(dfc_conn *c, const char *method, const cJSON *params, int timeout_ms, cJSON **result,
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
  if (!text) return -1;
  size_t n = strlen(text);
  text[n] = '\n'; /* replaces the terminator; n + 1 bytes are sent */
  int rc = dfc_send(c, text, n + 1);
  free(text);
  if (rc) return -1;
  for (;;) {
    /* Find a complete line. */
    uint8_t *nl;
    size_t need = 1;
    while (!(nl = c->len > c->off ? memchr(c->buf + c->off, '\n', c->len - c->off) : NULL)) {
      need = c->len - c->off + 1;
      if (fill(c, need, timeout_ms) <= 0) return -1;
    }
    size_t len = (size_t)(nl - (c->buf + c->off));
    cJSON *resp = cJSON_ParseWithLength((const char *)c->buf + c->off, len);
    c->off += len + 1;
    if (!resp) return -1;
    cJSON *rid = cJSON_GetObjectItemCaseSensitive(resp, "id");
    if (cJSON_IsNumber(rid) && rid->valueint != id) { /* a stray answer: skip it */
      cJSON_Delete(resp);
      continue;
    }
    cJSON *e = cJSON_DetachItemFromObjectCaseSensitive(resp, "error");
    if (e) {
      *error = e;
      cJSON_Delete(resp);
      return 1;
    }
    *result = cJSON_DetachItemFromObjectCaseSensitive(resp, "result");
    cJSON_Delete(resp);
    return 0;
  }
}

/* ---- replica -------------------------------------------------------------------------------- */

void dfc_replica_init(dfc_replica *r) { memset(r, 0, sizeof(*r)); }

void dfc_replica_fini(dfc_replica *r) {
  mesh_destroy(r->mesh);
  free(r->weights);
  free(r->offsets);
  free(r->meta);
  memset(r, 0, sizeof(*r));
}

static void set_meta(dfc_target_meta *m, float min, float max, uint8_t flags, uint32_t driver_count,
                     const uint8_t *drivers) {
  memset(m, 0, sizeof(*m));
  m->min = min, m->max = max, m->flags = flags, m->driver_count = (uint8_t)driver_count;
  for (uint32_t i = 0; i < driver_count; i++) m->drivers[i] = (uint16_t)proto_driver(drivers, i);
}

static int load_snapshot(dfc_replica *r, const proto_header *h, const uint8_t *p, char *err,
                         size_t errlen) {
  proto_snapshot s;
  int rc = proto_decode_snapshot(p, h->length, NULL, &s);
  if (rc) {
    snprintf(err, errlen, "SNAPSHOT: %s", proto_strerror(rc));
    return rc;
  }
  dfc_replica_fini(r);
  mesh *m = mesh_create();
  if (!m || mesh_alloc(m, s.vertex_count, s.triangle_count, 0, s.uvs != NULL)) {
    mesh_destroy(m);
    return MESH_ENOMEM;
  }
  memcpy(m->positions, s.positions, 12 * (size_t)s.vertex_count);
  memcpy(m->triangles, s.triangles, 12 * (size_t)s.triangle_count);
  if (s.uvs) memcpy(m->uvs, s.uvs, 8 * (size_t)s.vertex_count);
  proto_iter it;
  proto_target t;
  proto_snapshot_targets_begin(&s, &it);
  uint32_t *idx = NULL;
  float *del = NULL;
  r->meta = calloc(s.target_count + 1, sizeof(*r->meta));
  rc = r->meta ? 0 : MESH_ENOMEM;
  while (rc == 0 && proto_snapshot_target_next(&it, &t)) {
    set_meta(&r->meta[m->target_count], t.min, t.max, t.flags, t.driver_count, t.drivers);
    char name[PROTO_MAX_NAME + 1];
    memcpy(name, t.name.ptr, t.name.len);
    name[t.name.len] = '\0';
    idx = realloc(idx, sizeof(uint32_t) * ((size_t)t.count + 1));
    del = realloc(del, sizeof(float) * 3 * ((size_t)t.count + 1));
    if (!idx || !del) {
      rc = MESH_ENOMEM;
      break;
    }
    memcpy(idx, t.indices, 4 * (size_t)t.count);
    memcpy(del, t.deltas, 12 * (size_t)t.count);
    rc = mesh_add_target_sparse(m, name, t.count, idx, del, t.default_weight);
  }
  free(idx);
  free(del);
  r->weights = calloc(s.target_count + 1, sizeof(float));
  r->offsets = calloc(3 * (size_t)s.vertex_count + 1, sizeof(float));
  if (rc || !r->weights || !r->offsets) {
    mesh_destroy(m);
    snprintf(err, errlen, "SNAPSHOT: cannot rebuild the mesh");
    return rc ? rc : MESH_ENOMEM;
  }
  memcpy(r->weights, s.weights, 4 * (size_t)s.target_count);
  mesh_update_bounds(m);
  r->mesh = m;
  r->quantum = s.offset_quantum;
  uint32_t v;
  int32_t q[3];
  proto_offsets_begin(&s.offsets, &it);
  while (proto_offsets_next(&it, &v, q))
    for (int k = 0; k < 3; k++) r->offsets[3 * (size_t)v + k] = proto_dequantize(q[k], r->quantum);
  r->version = h->session_version;
  r->have_snapshot = 1;
  return 0;
}

/* TARGET: append the target at the given weight (the sculpt layer is untouched: a target made
 * from the sculpt comes with a DELTA that clears it). */
static int add_target(dfc_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen) {
  proto_target_add t;
  int rc = proto_decode_target_add(p, h->length, NULL, &t);
  if (rc) {
    snprintf(err, errlen, "TARGET: %s", proto_strerror(rc));
    return rc;
  }
  mesh *m = r->mesh;
  if (t.index != m->target_count) {
    snprintf(err, errlen, "TARGET: index %u, but the mesh has %u targets", t.index, m->target_count);
    return PROTO_EINVAL;
  }
  uint32_t n = t.target.count;
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  float *del = malloc(sizeof(float) * 3 * ((size_t)n + 1));
  float *w = realloc(r->weights, sizeof(float) * (m->target_count + 1));
  if (w) r->weights = w;
  dfc_target_meta *meta = realloc(r->meta, sizeof(*meta) * (m->target_count + 1));
  if (meta) r->meta = meta;
  if (!idx || !del || !w || !meta) {
    free(idx);
    free(del);
    return MESH_ENOMEM;
  }
  memcpy(idx, t.target.indices, 4 * (size_t)n);
  memcpy(del, t.target.deltas, 12 * (size_t)n);
  char name[PROTO_MAX_NAME + 1];
  memcpy(name, t.target.name.ptr, t.target.name.len);
  name[t.target.name.len] = '\0';
  rc = mesh_add_target_sparse(m, name, n, idx, del, t.target.default_weight);
  if (rc == 0) {
    r->weights[t.index] = t.weight;
    set_meta(&r->meta[t.index], t.target.min, t.target.max, t.target.flags, t.target.driver_count,
             t.target.drivers);
    if (!(h->flags & PROTO_FLAG_MORE)) r->version = h->session_version;
  } else {
    snprintf(err, errlen, "TARGET: %s", mesh_strerror(rc));
  }
  free(idx);
  free(del);
  return rc;
}

int dfc_replica_apply(dfc_replica *r, const proto_header *h, const uint8_t *p, char *err,
                      size_t errlen) {
  if (h->type == PROTO_SNAPSHOT) return load_snapshot(r, h, p, err, errlen);
  if (h->type == PROTO_TARGET) {
    if (!r->have_snapshot) {
      snprintf(err, errlen, "TARGET before the snapshot");
      return PROTO_ETYPE;
    }
    return add_target(r, h, p, err, errlen);
  }
  if (h->type == PROTO_TARGET_META) {
    proto_target_meta tm;
    int rc = r->have_snapshot ? proto_decode_target_meta(p, h->length, NULL, &tm) : PROTO_ETYPE;
    if (rc == 0 && tm.index >= r->mesh->target_count) rc = PROTO_EINVAL;
    for (uint32_t i = 0; rc == 0 && i < tm.driver_count; i++)
      if (proto_driver(tm.drivers, i) >= r->mesh->target_count) rc = PROTO_EINVAL;
    if (rc) {
      snprintf(err, errlen, "TARGET_META: %s", r->have_snapshot ? proto_strerror(rc) : "before the snapshot");
      return rc;
    }
    set_meta(&r->meta[tm.index], tm.min, tm.max, tm.flags, tm.driver_count, tm.drivers);
    if (!(h->flags & PROTO_FLAG_MORE)) r->version = h->session_version;
    return 0;
  }
  if (h->type != PROTO_WEIGHTS && h->type != PROTO_DELTA) return 0;
  if (!r->have_snapshot) {
    snprintf(err, errlen, "state frame before the snapshot");
    return PROTO_ETYPE;
  }
  proto_iter it;
  if (h->type == PROTO_WEIGHTS) {
    proto_weights_view w;
    int rc = proto_decode_weights(p, h->length, NULL, &w);
    if (rc) {
      snprintf(err, errlen, "WEIGHTS: %s", proto_strerror(rc));
      return rc;
    }
    uint32_t t;
    float value;
    proto_weights_begin(&w, &it);
    while (proto_weights_next(&it, &t, &value)) {
      if (t >= r->mesh->target_count) {
        snprintf(err, errlen, "WEIGHTS: target %u of %u", t, r->mesh->target_count);
        return PROTO_EINVAL;
      }
      r->weights[t] = value;
    }
  } else {
    proto_offsets_view o;
    int rc = proto_decode_delta(p, h->length, NULL, &o);
    if (rc) {
      snprintf(err, errlen, "DELTA: %s", proto_strerror(rc));
      return rc;
    }
    uint32_t v;
    int32_t q[3];
    proto_offsets_begin(&o, &it);
    while (proto_offsets_next(&it, &v, q)) {
      if (v >= r->mesh->vertex_count) {
        snprintf(err, errlen, "DELTA: vertex %u of %u", v, r->mesh->vertex_count);
        return PROTO_EINVAL;
      }
      for (int k = 0; k < 3; k++) r->offsets[3 * (size_t)v + k] = proto_dequantize(q[k], r->quantum);
    }
  }
  if (!(h->flags & PROTO_FLAG_MORE)) r->version = h->session_version;
  return 0;
}

int dfc_replica_positions(const dfc_replica *r, float *out) {
  if (!r->have_snapshot) return MESH_EINVAL;
  mesh_evaluate(r->mesh, r->weights, r->offsets, out);
  return 0;
}
