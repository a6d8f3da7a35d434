/*
 * srv_rpc.c — JSON-RPC 2.0 messages: answering a call (now or from a job's callback), the
 * mapping of the service's SRV_E* codes to JSON-RPC error codes, and the readers every method
 * uses for its params, so that the same mistake gets the same code from every method.
 *
 * Error codes (docs/json-api.md): JSON-RPC's own -32700 (parse error), -32600 (invalid
 * request), -32601 (method not found), -32602 (invalid params), and the application's
 * -32000..-32013 below.
 *
 * DOES NOT read from sockets (srv_rpc_conn.c) or implement methods (srv_methods.c and the
 * srv_*_rpc.c files).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "dfm_brush.h"
#include "srv_rpc.h"
#include "srv_result_json.h"
#include "srv_error.h"
#include "srv_json_text.h"
#include "srv_store.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"

int srv_rpc_code(int srv_code) {
  switch (srv_code) {
    case SRV_EPARAMS: return -32602;
    case SRV_ENOMETHOD: return -32601;
    case SRV_ENOSESSION: return -32001;
    case SRV_ENOTARGET: return -32002;
    case SRV_ENOTFINITE: return -32003;
    case SRV_EMESH: return -32004;
    case SRV_EEXIST: return -32005;
    case SRV_ERANGE: return -32006;
    case SRV_ELIMIT: return -32007;
    case SRV_EIO: return -32008;
    case SRV_EACCES: return -32009;
    case SRV_ENOGESTURE: return -32010;
    case SRV_ESOLVER: return -32011;
    case SRV_EBUSY: return -32012;
    case SRV_ENOCLIP: return -32013;
    case SRV_EDAMAGED: return -32014;
    default: return -32000; /* SRV_EINTERNAL, SRV_ESHUTDOWN */
  }
}

static void send_json(srv_conn *c, cJSON *o) {
  char *text = cJSON_PrintUnformatted(o);
  if (!text) return;
  size_t n = strlen(text);
  /* cJSON copies a string's bytes as they are: a name read from a file, or a message cut at
   * its buffer's end inside a character, would make the line invalid JSON. */
  if (!srv_utf8_valid(text, n)) {
    char *fixed = srv_json_utf8_fix(text, n, &n);
    free(text);
    if (!fixed) return;
    text = fixed;
  }
  char *line = malloc(n + 2);
  if (line) {
    memcpy(line, text, n);
    line[n] = '\n';
    srv_conn_send_copy(c, line, n + 1);
    free(line);
  }
  free(text);
}

void srv_rpc_send_error(srv_conn *c, cJSON *id, int code, const char *message) {
  c->server->stats.rpc_errors++;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "jsonrpc", "2.0");
  cJSON_AddItemToObject(o, "id", id ? id : cJSON_CreateNull());
  cJSON *e = cJSON_AddObjectToObject(o, "error");
  cJSON_AddNumberToObject(e, "code", code);
  cJSON_AddStringToObject(e, "message", message);
  send_json(c, o);
  cJSON_Delete(o);
}

static void free_call(srv_rpc_call *call) {
  cJSON_Delete(call->id);
  srv_conn_unref(call->conn);
  free(call);
}

void srv_rpc_call_free(srv_rpc_call *call) { free_call(call); }

static void send_reply(srv_rpc_call *call, cJSON *result) {
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

/* An answer waiting for the store to commit what was applied before it. */
typedef struct held_reply {
  srv_rpc_call *call;
  cJSON *result;
} held_reply;

static void on_committed(void *arg, int status, const char *err) {
  held_reply *h = arg;
  if (status == 0) {
    send_reply(h->call, h->result);
  } else {
    cJSON_Delete(h->result);
    srv_rpc_error(h->call, SRV_EIO, "the change is applied but could not be saved: %s; edits are refused until the "
                  "store can write again", err);
  }
  free(h);
}

/* Holds the answer until what was applied before it is committed; an edit's answer is held
 * even while the store fails (it then hears the failure). */
static void hold(srv_rpc_call *call, cJSON *result, int edit) {
  srv_store *st = call->conn->server->store;
  char why[8];
  if (!st || (!edit && srv_store_failed(st, why, sizeof(why)))) {
    send_reply(call, result);
    return;
  }
  held_reply *h = malloc(sizeof(*h));
  if (h) *h = (held_reply){call, result};
  if (!h || srv_store_after_commit(st, on_committed, h) != 0) {
    free(h);
    cJSON_Delete(result);
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
  }
}

/* With a store, an answer goes out once everything applied before it is committed: nothing a
 * client is told is done can be lost (invariant 9 of docs/architecture.md). Answers keep their order on each connection. While the
 * store fails, edits are refused, so a direct answer then is a read's and goes out at once. */
void srv_rpc_reply(srv_rpc_call *call, cJSON *result) { hold(call, result, 0); }

void srv_rpc_error(srv_rpc_call *call, int srv_code, const char *fmt, ...) {
  srv_conn *c = call->conn;
  if (call->id && !c->closing) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    srv_rpc_send_error(c, call->id, srv_rpc_code(srv_code), msg);
    call->id = NULL;
  } else {
    c->server->stats.rpc_errors++;
  }
  free_call(call);
}

/* ---- asynchronous answers -------------------------------------------------------------------- */

/* The answer of a gesture, stroke, solve or compression that applied something: encoded now,
 * since `result` is borrowed, and held until what it applied is committed. */
static void reply_ok(srv_reply *r, const srv_result *result) {
  srv_rpc_call *call = r->to;
  hold(call, srv_result_json(call->conn->server, result), 1);
}
static void reply_error(srv_reply *r, int srv_code, const char *message) {
  srv_rpc_error(r->to, srv_code, "%s", message);
}
static const srv_reply_ops rpc_reply_ops = {reply_ok, reply_error};

srv_reply srv_rpc_reply_to(srv_rpc_call *call) {
  srv_reply r = {&rpc_reply_ops, call, 0};
  return r;
}

/* ---- params ---------------------------------------------------------------------------------- */

srv_session *srv_rpc_want_session(srv_server *s, srv_rpc_call *call, const cJSON *params) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  if (!cJSON_IsString(name)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"session\" must be a string");
    return NULL;
  }
  srv_session *x = srv_session_find(s, name->valuestring);
  char q[SRV_QUOTE_BUF];
  const srv_damaged *d = x ? NULL : srv_session_find_damaged(s, name->valuestring);
  if (d)
    srv_rpc_error(call, SRV_EDAMAGED, "session '%s' is damaged in the store: %s (an owner may session.close it)",
                  srv_json_quote(name->valuestring, q), d->why);
  else if (!x)
    srv_rpc_error(call, SRV_ENOSESSION, "unknown session '%s'", srv_json_quote(name->valuestring, q));
  return x;
}

int srv_rpc_number(srv_rpc_call *call, const cJSON *params, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be a number", key);
    return -1;
  }
  if (!isfinite(v->valuedouble)) {
    srv_rpc_error(call, SRV_ENOTFINITE, "\"%s\" is not finite", key);
    return -1;
  }
  *out = v->valuedouble;
  return 1;
}

int srv_rpc_numbers(srv_rpc_call *call, const cJSON *params, const char *key, int n, double *out) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!a) return 0;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be an array of %d numbers", key, n);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const cJSON *v = cJSON_GetArrayItem(a, i);
    if (!cJSON_IsNumber(v)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be an array of %d numbers", key, n);
      return -1;
    }
    if (!isfinite(v->valuedouble)) {
      srv_rpc_error(call, SRV_ENOTFINITE, "\"%s\" has a non-finite value", key);
      return -1;
    }
    out[i] = v->valuedouble;
  }
  return 1;
}

int srv_rpc_number_in(srv_rpc_call *call, const cJSON *params, const char *key, double lo, double hi, double *out) {
  int r = srv_rpc_number(call, params, key, out);
  if (r > 0 && !(*out >= lo && *out <= hi)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be between %g and %g (got %g)", key, lo, hi, *out);
    return -1;
  }
  return r;
}

int srv_rpc_integer_in(srv_rpc_call *call, const cJSON *params, const char *key, double lo, double hi, double *out) {
  int r = srv_rpc_number(call, params, key, out);
  if (r > 0 && !(*out >= lo && *out <= hi && *out == floor(*out))) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be an integer from %.0f to %.0f", key, lo, hi);
    return -1;
  }
  return r;
}

int srv_rpc_samples(srv_rpc_call *call, const cJSON *params, double radius, double strength, double lo, double hi,
                    int direction, dfm_brush_sample **out) {
  *out = NULL;
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(params, "samples");
  int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
  if (n < 1 || n > 65536) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"samples\" must be an array of 1 to 65536 points of the stroke's path");
    return -1;
  }
  dfm_brush_sample *samples = calloc((size_t)n, sizeof(*samples));
  if (!samples) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return -1;
  }
  int i = 0;
  cJSON *smp;
  cJSON_ArrayForEach(smp, list) {
    dfm_brush_sample *d = &samples[i++];
    d->radius = radius;
    d->strength = strength;
    if (!cJSON_IsObject(smp) || srv_rpc_numbers(call, smp, "center", 3, d->center) != 1) {
      if (!(cJSON_IsObject(smp) && cJSON_GetObjectItemCaseSensitive(smp, "center"))) /* else answered */
        srv_rpc_error(call, SRV_EPARAMS, "invalid params: sample %d needs \"center\": [x, y, z]", i - 1);
      goto bad;
    }
    if ((direction && srv_rpc_numbers(call, smp, "direction", 3, d->direction) < 0) ||
        srv_rpc_number(call, smp, "radius", &d->radius) < 0 ||
        srv_rpc_number_in(call, smp, "strength", lo, hi, &d->strength) < 0)
      goto bad;
    if (!(d->radius > 0)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: sample %d has no positive \"radius\" (give one per stroke or per sample)", i - 1);
      goto bad;
    }
  }
  *out = samples;
  return n;
bad:
  free(samples);
  return -1;
}

int srv_rpc_bool(srv_rpc_call *call, const cJSON *params, const char *key, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!v) return 0;
  if (!cJSON_IsBool(v)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be true or false", key);
    return -1;
  }
  *out = cJSON_IsTrue(v);
  return 1;
}

int srv_rpc_vertices(srv_rpc_call *call, const cJSON *params, const char *key, uint32_t **out, uint32_t *count) {
  *out = NULL;
  *count = 0;
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!a) return 0;
  if (!cJSON_IsArray(a)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be an array of vertex indices", key);
    return -1;
  }
  int n = cJSON_GetArraySize(a);
  *out = malloc(sizeof(uint32_t) * (size_t)(n + 1));
  if (!*out) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return -1;
  }
  const cJSON *v;
  cJSON_ArrayForEach(v, a) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 4294967295.0 ||
        v->valuedouble != (double)(uint32_t)v->valuedouble) {
      free(*out);
      *out = NULL;
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must hold vertex indices (integers >= 0)", key);
      return -1;
    }
    (*out)[(*count)++] = (uint32_t)v->valuedouble;
  }
  return 1;
}
