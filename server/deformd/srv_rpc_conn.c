/*
 * srv_rpc_conn.c — the JSON-RPC port: newline-delimited requests in, one response line out.
 *
 * Bounds: a request line longer than max_request bytes is answered with an error and the rest
 * of it is discarded as it arrives (never buffered whole); a request nested deeper than
 * max_json_depth is refused before cJSON parses it (a pre-scan counts brackets outside
 * strings). Batches are refused with a clear error.
 *
 * Over a WebSocket (srv_http.c's /ws/rpc) a request is one text message and a response goes out
 * as one (srv_ws.c drops the line's newline).
 *
 * DOES NOT implement methods (srv_methods.c) or format answers (srv_rpc.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

/* Deepest nesting of [ and { outside strings. */
static int json_depth(const char *s, size_t n) {
  int depth = 0, worst = 0, in_str = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (in_str) {
      if (ch == '\\') i++;
      else if (ch == '"') in_str = 0;
      continue;
    }
    if (ch == '"') in_str = 1;
    else if (ch == '[' || ch == '{') {
      if (++depth > worst) worst = depth;
    } else if (ch == ']' || ch == '}') depth--;
  }
  return worst;
}

static void handle_line(srv_conn *c, const char *line, size_t n) {
  srv_server *s = c->server;
  while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
  size_t start = 0;
  while (start < n && (line[start] == ' ' || line[start] == '\t')) start++;
  if (start == n) return; /* blank line */
  s->stats.rpc_requests++;
  if (json_depth(line + start, n - start) > s->cfg.max_json_depth) {
    char msg[96];
    snprintf(msg, sizeof(msg), "request nested deeper than %d levels", s->cfg.max_json_depth);
    srv_rpc_send_error(c, NULL, -32600, msg);
    return;
  }
  cJSON *req = cJSON_ParseWithLength(line + start, n - start);
  if (!req) {
    srv_rpc_send_error(c, NULL, -32700, "parse error: the request is not valid JSON");
    return;
  }
  if (cJSON_IsArray(req)) {
    srv_rpc_send_error(c, NULL, -32600, "batch requests are not supported: send one request per line");
    cJSON_Delete(req);
    return;
  }
  cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "id");
  cJSON *idcopy = NULL;
  if (id) {
    if (!cJSON_IsString(id) && !cJSON_IsNumber(id) && !cJSON_IsNull(id)) {
      srv_rpc_send_error(c, NULL, -32600, "invalid request: \"id\" must be a string, a number or null");
      cJSON_Delete(req);
      return;
    }
    idcopy = cJSON_Duplicate(id, 1);
  }
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(req, "jsonrpc");
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(req, "method");
  cJSON *params = cJSON_GetObjectItemCaseSensitive(req, "params");
  const char *bad = NULL;
  if (!cJSON_IsObject(req)) bad = "invalid request: expected a JSON object";
  else if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) bad = "invalid request: \"jsonrpc\" must be \"2.0\"";
  else if (!cJSON_IsString(method)) bad = "invalid request: \"method\" must be a string";
  else if (params && !cJSON_IsObject(params) && !cJSON_IsArray(params)) bad = "invalid request: \"params\" must be an object or an array";
  if (bad) {
    srv_rpc_send_error(c, idcopy, -32600, bad);
    cJSON_Delete(req);
    return;
  }
  srv_rpc_call *call = calloc(1, sizeof(*call));
  if (!call) {
    srv_rpc_send_error(c, idcopy, srv_rpc_code(SRV_EINTERNAL), "out of memory");
    cJSON_Delete(req);
    return;
  }
  call->conn = c;
  srv_conn_ref(c);
  call->id = idcopy;
  srv_methods_dispatch(s, call, method->valuestring, params);
  cJSON_Delete(req);
}

static void on_data(srv_conn *c) {
  size_t max = c->server->cfg.max_request;
  size_t at = 0;
  for (;;) {
    uint8_t *nl = memchr(c->rbuf + at, '\n', c->rlen - at);
    if (c->skipping) {
      if (!nl) {
        at = c->rlen; /* discard everything of the oversized request seen so far */
        break;
      }
      c->skipping = 0;
      at = (size_t)(nl - c->rbuf) + 1;
      continue;
    }
    if (!nl) {
      if (c->rlen - at > max) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request larger than %zu bytes: refused", max);
        srv_rpc_send_error(c, NULL, -32600, msg);
        c->skipping = 1;
        at = c->rlen;
      }
      break;
    }
    size_t len = (size_t)(nl - (c->rbuf + at));
    if (len > max) {
      char msg[96];
      snprintf(msg, sizeof(msg), "request larger than %zu bytes: refused", max);
      srv_rpc_send_error(c, NULL, -32600, msg);
    } else {
      handle_line(c, (const char *)c->rbuf + at, len);
    }
    at += len + 1;
    if (c->closing) return;
  }
  if (at > 0) {
    memmove(c->rbuf, c->rbuf + at, c->rlen - at);
    c->rlen -= at;
  }
}

static void refuse(srv_conn *c, int srv_code, const char *why) {
  srv_rpc_send_error(c, NULL, srv_rpc_code(srv_code), why);
  srv_conn_finish(c, NULL);
}

static void on_close(srv_conn *c) {
  if (c->server->on_conn_closed) c->server->on_conn_closed(c); /* its links to other nodes */
}

/* A WebSocket text message (the /ws/rpc endpoint of srv_http.c) is one request, newlines and
 * all; its size was bounded by max_request before it got here. */
static void on_message(srv_conn *c, const uint8_t *p, size_t n) { handle_line(c, (const char *)p, n); }

const srv_conn_ops srv_rpc_conn_ops = {on_data, NULL, on_close, refuse, on_message};
