/*
 * srv_rpc_conn.c — the JSON-RPC port: newline-delimited requests in, one response line out.
 *
 * Bounds: a request line longer than max_request bytes is answered with an error and the rest
 * of it is discarded as it arrives (never buffered whole); every line is checked as exact JSON
 * (srv_json_text.c: one value, RFC 8259 numbers, UTF-8, nested at most max_json_depth deep)
 * before cJSON parses it; the id is kept as the text it was sent as. Batches are refused with a
 * clear error.
 *
 * Over a WebSocket (srv_http.c's /ws/rpc) a request is one text message and a response goes out
 * as one (srv_ws.c drops the line's newline).
 *
 * Its state on a connection (c->rpc: where the line reader is) is made at the first bytes read
 * and freed at the close.
 *
 * DOES NOT implement methods (srv_methods.c) or format answers (srv_rpc.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "srv_error.h"
#include "srv_json_text.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_presence.h"
#include "srv_gesture.h"
#include "srv_rpc.h"
#include "srv_methods.h"
#include "srv_ports.h"

/* A JSON-RPC connection's line reader (c->rpc). */
struct srv_rpc_port {
  int skipping;             /* discarding an oversized request up to its newline */
};

static void handle_line(srv_conn *c, const char *line, size_t n) {
  srv_server *s = c->server;
  while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
  size_t start = 0;
  while (start < n && (line[start] == ' ' || line[start] == '\t')) start++;
  if (start == n) return; /* blank line */
  s->stats.rpc_requests++;
  /* Exact JSON first (srv_json_text.c): cJSON would take what RFC 8259 and UTF-8 do not. */
  srv_json_scan scan;
  char why[160], msg[224];
  int rc = srv_json_check(line + start, n - start, s->cfg.max_json_depth, &scan, why, sizeof(why));
  if (rc == SRV_JSON_EDEPTH) {
    snprintf(msg, sizeof(msg), "request nested deeper than %d levels", s->cfg.max_json_depth);
    srv_rpc_send_error(c, NULL, -32600, msg);
    return;
  }
  if (rc) {
    snprintf(msg, sizeof(msg), "parse error: the request is not valid JSON: %s", why);
    srv_rpc_send_error(c, NULL, -32700, msg);
    return;
  }
  cJSON *req = cJSON_ParseWithLength(line + start, n - start);
  if (!req) {
    srv_rpc_send_error(c, NULL, -32000, "out of memory parsing the request");
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
    /* Echoed byte for byte as sent: a number cJSON would round (2^64, 1e400) comes back as
     * written, and the text was checked above, so it is valid JSON. */
    char *raw = malloc(scan.id_len + 1);
    if (raw) {
      memcpy(raw, scan.id, scan.id_len);
      raw[scan.id_len] = '\0';
      idcopy = cJSON_CreateRaw(raw);
      free(raw);
    }
    if (!idcopy) {
      srv_rpc_send_error(c, NULL, -32000, "out of memory");
      cJSON_Delete(req);
      return;
    }
  }
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(req, "jsonrpc");
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(req, "method");
  cJSON *params = cJSON_GetObjectItemCaseSensitive(req, "params");
  const char *bad = NULL;
  int code = -32600;
  if (!cJSON_IsObject(req)) bad = "invalid request: expected a JSON object";
  else if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) bad = "invalid request: \"jsonrpc\" must be \"2.0\"";
  else if (!cJSON_IsString(method)) bad = "invalid request: \"method\" must be a string";
  else if (scan.nul_in_method) bad = "invalid request: \"method\" contains a NUL character (\\u0000)";
  else if (params && !cJSON_IsObject(params) && !cJSON_IsArray(params)) bad = "invalid request: \"params\" must be an object or an array";
  else if (scan.nul_in_params) {
    /* Every string a method takes names something (a session, a target, a file): a NUL would
     * silently cut the name, so it is refused. */
    bad = "invalid params: strings must not contain a NUL character (\\u0000)";
    code = -32602;
  }
  if (bad) {
    srv_rpc_send_error(c, idcopy, code, bad);
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
  if (!c->rpc && !(c->rpc = calloc(1, sizeof(*c->rpc)))) {
    srv_conn_close(c);
    return;
  }
  srv_rpc_port *st = c->rpc;
  size_t max = c->server->cfg.max_request;
  size_t at = 0;
  for (;;) {
    uint8_t *nl = memchr(c->rbuf + at, '\n', c->rlen - at);
    if (st->skipping) {
      if (!nl) {
        at = c->rlen; /* discard everything of the oversized request seen so far */
        break;
      }
      st->skipping = 0;
      at = (size_t)(nl - c->rbuf) + 1;
      continue;
    }
    if (!nl) {
      if (c->rlen - at > max) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request larger than %zu bytes: refused", max);
        srv_rpc_send_error(c, NULL, -32600, msg);
        st->skipping = 1;
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

/* Closing: an upload it left unfinished goes, a download it kept is freed, the gestures it
 * began end (unless they were begun detached); with --redis, its links to other nodes close. */
static void on_close(srv_conn *c) {
  free(c->rpc);
  c->rpc = NULL;
  srv_transfer_release(c);
  for (srv_session *x = c->server->sessions; x; x = x->next) srv_gesture_drop_owner(c->server, x, c->id);
  srv_presence_leave(c->server, c); /* a presence.set client */
  if (c->server->on_conn_closed) c->server->on_conn_closed(c);
}

/* A WebSocket text message (the /ws/rpc endpoint of srv_http.c) is one request, newlines and
 * all; its size was bounded by the connection's input limit before it got here. */
static void on_message(srv_conn *c, const uint8_t *p, size_t n) { handle_line(c, (const char *)p, n); }

const srv_conn_ops srv_rpc_conn_ops = {on_data, NULL, on_close, refuse, on_message, NULL};
