/*
 * srv_rpc.c — the JSON-RPC 2.0 port: newline-delimited requests in, one response line out.
 *
 * Bounds: a request line longer than max_request bytes is answered with an error and the rest
 * of it is discarded as it arrives (never buffered whole); a request nested deeper than
 * max_json_depth is refused before cJSON parses it (a pre-scan counts brackets outside
 * strings). Batches are refused with a clear error.
 *
 * DOES NOT implement methods: srv_methods.c does.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

static void send_json(srv_conn *c, cJSON *o) {
  char *text = cJSON_PrintUnformatted(o);
  if (!text) return;
  size_t n = strlen(text);
  char *line = malloc(n + 2);
  if (line) {
    memcpy(line, text, n);
    line[n] = '\n';
    srv_conn_send_copy(c, line, n + 1);
    free(line);
  }
  free(text);
}

static cJSON *error_object(cJSON *id, int code, const char *message) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "jsonrpc", "2.0");
  cJSON_AddItemToObject(o, "id", id ? id : cJSON_CreateNull());
  cJSON *e = cJSON_AddObjectToObject(o, "error");
  cJSON_AddNumberToObject(e, "code", code);
  cJSON_AddStringToObject(e, "message", message);
  return o;
}

static void free_call(srv_rpc_call *call) {
  cJSON_Delete(call->id);
  srv_conn_unref(call->conn);
  free(call);
}

void srv_rpc_reply(srv_rpc_call *call, cJSON *result) {
  srv_conn *c = call->conn;
  if (call->id && !c->closing) { /* notifications (no id) get no answer */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "jsonrpc", "2.0");
    cJSON_AddItemToObject(o, "id", call->id);
    call->id = NULL;
    cJSON_AddItemToObject(o, "result", result ? result : cJSON_CreateNull());
    result = NULL;
    send_json(c, o);
    cJSON_Delete(o);
  }
  cJSON_Delete(result);
  free_call(call);
}

void srv_rpc_error(srv_rpc_call *call, int code, const char *fmt, ...) {
  srv_conn *c = call->conn;
  c->server->stats.rpc_errors++;
  if (call->id && !c->closing) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *o = error_object(call->id, code, msg);
    call->id = NULL;
    send_json(c, o);
    cJSON_Delete(o);
  }
  free_call(call);
}

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

static void reply_now(srv_conn *c, cJSON *id, int code, const char *msg) {
  c->server->stats.rpc_errors++;
  cJSON *o = error_object(id, code, msg);
  send_json(c, o);
  cJSON_Delete(o);
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
    reply_now(c, NULL, -32600, msg);
    return;
  }
  cJSON *req = cJSON_ParseWithLength(line + start, n - start);
  if (!req) {
    reply_now(c, NULL, -32700, "parse error: the request is not valid JSON");
    return;
  }
  if (cJSON_IsArray(req)) {
    reply_now(c, NULL, -32600, "batch requests are not supported: send one request per line");
    cJSON_Delete(req);
    return;
  }
  cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "id");
  cJSON *idcopy = NULL;
  if (id) {
    if (!cJSON_IsString(id) && !cJSON_IsNumber(id) && !cJSON_IsNull(id)) {
      reply_now(c, NULL, -32600, "invalid request: \"id\" must be a string, a number or null");
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
    reply_now(c, idcopy ? idcopy : NULL, -32600, bad);
    cJSON_Delete(req);
    return;
  }
  srv_rpc_call *call = calloc(1, sizeof(*call));
  if (!call) {
    reply_now(c, idcopy, SRV_RPC_INTERNAL, "out of memory");
    cJSON_Delete(req);
    return;
  }
  call->conn = c;
  srv_conn_ref(c);
  call->id = idcopy;
  srv_methods_dispatch(s, call, method->valuestring, params);
  cJSON_Delete(req);
}

void srv_rpc_on_data(srv_conn *c) {
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
        reply_now(c, NULL, -32600, msg);
        c->skipping = 1;
        at = c->rlen;
      }
      break;
    }
    size_t len = (size_t)(nl - (c->rbuf + at));
    if (len > max) {
      char msg[96];
      snprintf(msg, sizeof(msg), "request larger than %zu bytes: refused", max);
      reply_now(c, NULL, -32600, msg);
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
