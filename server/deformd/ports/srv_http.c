/*
 * srv_http.c — the HTTP port (deformd --http-port, 7452 by default): the browser viewer's files
 * (viewer/web/, compiled in: srv_web_assets.c) and the two WebSocket endpoints,
 *
 *   /ws/stream   the binary stream protocol, one frame per binary message (srv_stream_ops)
 *   /ws/rpc      JSON-RPC, one request or response per text message (srv_rpc_conn_ops)
 *
 * Requests are parsed by llhttp (the C parser Node uses; Debian ships its sources in
 * node-llhttp). A connection serves GET and HEAD requests one after another (keep-alive) until
 * one of them upgrades it; from then on it is a stream or JSON-RPC connection like those of
 * the TCP ports, with their limits, slow-reader policy and access rules (a stream editor shows
 * the --token in HELLO, a JSON-RPC connection calls `auth`), since the same transports serve it
 * (srv_conn_upgrade).
 *
 * Bounds: a request head (line and headers) over 16 KiB gets 431, a body over 16 KiB 413, and
 * the connection closes; an idle connection closes after --hello-timeout-ms (srv_server.c's
 * tick). A WebSocket upgrade from a page of another site (an Origin whose host is not the Host
 * asked) is refused with 403: otherwise any page a user visits could drive a local deformd.
 *
 * DOES NOT frame WebSocket messages (srv_ws.c), read files (the page is compiled in, so the
 * loop never waits for a disk: invariant 4 of docs/architecture.md) or serve anything but the page.
 */
#include <ctype.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "srv_http.h"
#include "srv_log.h"
#include "srv_ws.h"
#include "srv_conn.h"
#include "srv_ports.h"

#define HEAD_MAX 16384   /* request line and headers */
#define BODY_MAX 16384
#define VALUE_MAX 512    /* a header value we keep (longer ones are cut: only short ones matter) */

/* An HTTP-port connection's request parser (c->http, srv_conn.h's srv_http_conn), until an upgrade. */
typedef struct srv_http_conn {
  llhttp_t parser;
  srv_conn *conn;
  size_t head_bytes, body_bytes;
  char url[2048];
  size_t url_len;
  int url_long;
  char field[64];        /* the header being read (cut at 63 bytes: names we care about are short) */
  size_t field_len;
  char value[VALUE_MAX];
  size_t value_len;
  /* the headers an upgrade needs */
  char upgrade[64], connection[256], key[64], version[16], origin[256], host[256];
  int status;            /* set when the request must be answered with an error and a close */
  const char *why;
} http_state;

static void respond(srv_conn *c, int code, const char *reason, const char *type, const uint8_t *body, size_t len,
                    int head_only, int close_after, const char *extra) {
  char h[768];
  int n = snprintf(h, sizeof(h),
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-cache\r\n"
                   "X-Content-Type-Options: nosniff\r\nServer: deformd\r\n%s%s\r\n",
                   code, reason, type, len, extra ? extra : "", close_after ? "Connection: close\r\n" : "");
  if (n < 0 || (size_t)n >= sizeof(h)) return;
  size_t total = (size_t)n + (head_only ? 0 : len);
  uint8_t *all = malloc(total ? total : 1);
  if (!all) return;
  memcpy(all, h, (size_t)n);
  if (!head_only && len) memcpy(all + n, body, len);
  srv_conn_send_copy(c, all, total);
  free(all);
}

static void respond_error(srv_conn *c, int code, const char *reason, const char *why, int close_after,
                          const char *extra) {
  char body[512];
  int n = snprintf(body, sizeof(body), "%d %s: %s\n", code, reason, why);
  respond(c, code, reason, "text/plain; charset=utf-8", (const uint8_t *)body, n > 0 ? (size_t)n : 0, 0, close_after,
          extra);
}

/* ---- llhttp callbacks ---------------------------------------------------------------------------- */

static int bound_head(http_state *st, size_t n) {
  st->head_bytes += n;
  if (st->head_bytes > HEAD_MAX) {
    st->status = 431;
    st->why = "the request's line and headers are larger than 16 KiB";
    return HPE_USER;
  }
  return 0;
}

static int on_message_begin(llhttp_t *p) {
  http_state *st = p->data;
  st->head_bytes = st->body_bytes = st->url_len = st->field_len = st->value_len = 0;
  st->url_long = 0;
  st->status = 0;
  st->why = NULL;
  st->upgrade[0] = st->connection[0] = st->key[0] = st->version[0] = st->origin[0] = st->host[0] = '\0';
  st->conn->accepted_at = uv_now(st->conn->server->loop); /* the idle timeout counts from here */
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n) {
  http_state *st = p->data;
  if (bound_head(st, n)) return HPE_USER;
  if (st->url_len + n >= sizeof(st->url)) st->url_long = 1;
  else {
    memcpy(st->url + st->url_len, at, n);
    st->url_len += n;
  }
  return 0;
}

/* Appends what fits of a header name or value piece (llhttp may hand one over in several). */
static void append_capped(char *buf, size_t cap, size_t *len, const char *at, size_t n) {
  size_t k = *len + n < cap - 1 ? n : cap - 1 - *len;
  memcpy(buf + *len, at, k);
  *len += k;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n) {
  http_state *st = p->data;
  if (bound_head(st, n)) return HPE_USER;
  append_capped(st->field, sizeof(st->field), &st->field_len, at, n);
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
  http_state *st = p->data;
  if (bound_head(st, n)) return HPE_USER;
  append_capped(st->value, sizeof(st->value), &st->value_len, at, n);
  return 0;
}

static void keep(char *dst, size_t cap, const char *v, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, v, n);
  dst[n] = '\0';
}

static int on_header_value_complete(llhttp_t *p) {
  http_state *st = p->data;
  st->field[st->field_len] = '\0';
  const char *f = st->field, *v = st->value;
  size_t n = st->value_len;
  if (strcasecmp(f, "upgrade") == 0) keep(st->upgrade, sizeof(st->upgrade), v, n);
  else if (strcasecmp(f, "connection") == 0) keep(st->connection, sizeof(st->connection), v, n);
  else if (strcasecmp(f, "sec-websocket-key") == 0) keep(st->key, sizeof(st->key), v, n);
  else if (strcasecmp(f, "sec-websocket-version") == 0) keep(st->version, sizeof(st->version), v, n);
  else if (strcasecmp(f, "origin") == 0) keep(st->origin, sizeof(st->origin), v, n);
  else if (strcasecmp(f, "host") == 0) keep(st->host, sizeof(st->host), v, n);
  st->field_len = st->value_len = 0;
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
  http_state *st = p->data;
  (void)at;
  st->body_bytes += n;
  if (st->body_bytes > BODY_MAX) {
    st->status = 413;
    st->why = "a request body larger than 16 KiB";
    return HPE_USER;
  }
  return 0;
}

/* Whether a comma-separated header value lists `token` (case-insensitive). */
static int has_token(const char *list, const char *token) {
  size_t tl = strlen(token);
  for (const char *s = list; *s;) {
    while (*s == ' ' || *s == '\t' || *s == ',') s++;
    const char *e = s;
    while (*e && *e != ',') e++;
    const char *t = e;
    while (t > s && (t[-1] == ' ' || t[-1] == '\t')) t--;
    if ((size_t)(t - s) == tl && strncasecmp(s, token, tl) == 0) return 1;
    s = e;
  }
  return 0;
}

/* A browser sends Origin with every WebSocket; its host[:port] must be the Host it asked. */
static int same_origin(const http_state *st) {
  if (!st->origin[0]) return 1; /* not a browser: the token rules are what protect the server */
  const char *o = strstr(st->origin, "://");
  if (!o) return 0;
  o += 3;
  return strcasecmp(o, st->host) == 0;
}

/* The WebSocket endpoints: checks the handshake, answers 101 and hands the connection over. */
static int upgrade(http_state *st, srv_conn_kind kind) {
  srv_conn *c = st->conn;
  char accept[29];
  if (llhttp_get_method(&st->parser) != HTTP_GET || st->parser.http_major != 1 || st->parser.http_minor < 1 ||
      strcasecmp(st->upgrade, "websocket") != 0 || !has_token(st->connection, "upgrade")) {
    respond_error(c, 426, "Upgrade Required", "this endpoint is a WebSocket: GET with Upgrade: websocket", 1,
                  "Upgrade: websocket\r\n");
    return -1;
  }
  if (strcmp(st->version, "13") != 0) {
    respond_error(c, 426, "Upgrade Required", "WebSocket version 13 only", 1, "Sec-WebSocket-Version: 13\r\n");
    return -1;
  }
  if (srv_ws_accept_key(st->key, strlen(st->key), accept) != 0) {
    respond_error(c, 400, "Bad Request", "Sec-WebSocket-Key must be 16 bytes in base64", 1, NULL);
    return -1;
  }
  if (!same_origin(st)) {
    respond_error(c, 403, "Forbidden", "a page from another origin may not open this server's WebSockets", 1, NULL);
    return -1;
  }
  char h[256];
  int n = snprintf(h, sizeof(h),
                   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: %s\r\n\r\n",
                   accept);
  srv_conn_send_copy(c, h, (size_t)n);
  return kind;
}

/* Answers a complete request. Returns HPE_OK to go on with the next one, HPE_PAUSED to stop
 * (close after the answer, or an upgrade: st->status says which). */
static int on_message_complete(llhttp_t *p) {
  http_state *st = p->data;
  srv_conn *c = st->conn;
  int method = llhttp_get_method(p);
  int close_after = !llhttp_should_keep_alive(p);
  if (st->url_long) {
    respond_error(c, 414, "URI Too Long", "a URL of 2 KiB at most", 1, NULL);
    st->status = -1;
    return HPE_PAUSED;
  }
  st->url[st->url_len] = '\0';
  size_t path_len = strcspn(st->url, "?#");
  const char *path = st->url;
  if ((path_len == 10 && strncmp(path, "/ws/stream", 10) == 0) || (path_len == 7 && strncmp(path, "/ws/rpc", 7) == 0)) {
    st->status = upgrade(st, path_len == 10 ? SRV_CONN_STREAM : SRV_CONN_RPC) < 0 ? -1 : (path_len == 10 ? 1 : 2);
    return HPE_PAUSED;
  }
  if (method != HTTP_GET && method != HTTP_HEAD) {
    respond_error(c, 405, "Method Not Allowed", "only GET and HEAD", close_after, "Allow: GET, HEAD\r\n");
    if (close_after) st->status = -1;
    return close_after ? HPE_PAUSED : HPE_OK;
  }
  if (path_len == 1) path = "/index.html", path_len = 11;
  const srv_web_asset *a = path[0] == '/' ? srv_web_asset_find(path + 1, path_len - 1) : NULL;
  if (!a) respond_error(c, 404, "Not Found", "no such file (the viewer is at /?session=NAME)", close_after, NULL);
  else respond(c, 200, "OK", a->content_type, a->data, a->len, method == HTTP_HEAD, close_after, NULL);
  if (close_after) {
    st->status = -1;
    return HPE_PAUSED;
  }
  return HPE_OK;
}

static const llhttp_settings_t *settings(void) {
  static llhttp_settings_t s;
  static int ready;
  if (!ready) {
    llhttp_settings_init(&s);
    s.on_message_begin = on_message_begin;
    s.on_url = on_url;
    s.on_header_field = on_header_field;
    s.on_header_value = on_header_value;
    s.on_header_value_complete = on_header_value_complete;
    s.on_body = on_body;
    s.on_message_complete = on_message_complete;
    ready = 1;
  }
  return &s;
}

/* ---- the transport ------------------------------------------------------------------------------ */

static void on_data(srv_conn *c) {
  http_state *st = c->http;
  if (!st) {
    st = calloc(1, sizeof(*st));
    if (!st) {
      srv_conn_close(c);
      return;
    }
    llhttp_init(&st->parser, HTTP_REQUEST, settings());
    st->parser.data = st;
    st->conn = c;
    c->http = st;
  }
  llhttp_errno_t err = llhttp_execute(&st->parser, (const char *)c->rbuf, c->rlen);
  size_t used = c->rlen;
  if (err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE)
    used = (size_t)((const uint8_t *)llhttp_get_error_pos(&st->parser) - c->rbuf);
  memmove(c->rbuf, c->rbuf + used, c->rlen - used);
  c->rlen -= used;
  if (err == HPE_OK) return;
  int status = st->status;
  if (err != HPE_PAUSED || (status != 1 && status != 2)) {
    /* Answered and closing, a bound passed, a malformed request, or another protocol's upgrade. */
    if (err == HPE_USER && status >= 400) {
      respond_error(c, status, status == 431 ? "Request Header Fields Too Large" : "Payload Too Large", st->why, 1, NULL);
    } else if (err != HPE_PAUSED && err != HPE_PAUSED_UPGRADE) {
      char why[160];
      snprintf(why, sizeof(why), "malformed HTTP request: %s", llhttp_get_error_reason(&st->parser));
      respond_error(c, 400, "Bad Request", why, 1, NULL);
    }
    srv_conn_finish(c, NULL);
    return;
  }
  /* An upgrade: the parser's work is done, the transport takes the bytes after the request. */
  free(st);
  c->http = NULL;
  if (srv_conn_upgrade(c, status == 1 ? SRV_CONN_STREAM : SRV_CONN_RPC, status == 1 ? &srv_stream_ops : &srv_rpc_conn_ops) != 0)
    srv_conn_close(c);
  else
    srv_log(SRV_LOG_DEBUG, "connection %u (%s) upgraded to a WebSocket (%s)", c->id, c->peer,
            status == 1 ? "stream" : "rpc");
}

static void on_close(srv_conn *c) {
  free(c->http);
  c->http = NULL;
}

static void refuse(srv_conn *c, int srv_code, const char *why) {
  (void)srv_code;
  respond_error(c, 503, "Service Unavailable", why, 1, NULL);
  srv_conn_finish(c, NULL);
}

const srv_conn_ops srv_http_ops = {on_data, NULL, on_close, refuse, NULL, NULL};
