/*
 * srv_face_rpc.c — the face.* JSON-RPC methods (docs/json-api.md, Live face input): the inputs
 * and their counters (face.list), a session's mapping read and replaced while live
 * (face.map_get, face.map_set; the session keeps it, durable with a store).
 *
 * DOES NOT receive or apply frames (ports/srv_face_udp.c, session/srv_face.c).
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "srv_error.h"
#include "srv_server.h"
#include "srv_session.h"
#include "srv_face.h"
#include "srv_rpc.h"
#include "srv_methods.h"

static const char *const COUNTER[SRV_FACE_COUNTERS] = {
    [SRV_FACE_PACKETS] = "packets",     [SRV_FACE_FRAMES] = "frames",       [SRV_FACE_APPLIED] = "applied",
    [SRV_FACE_MERGED] = "merged",       [SRV_FACE_HELD] = "held",       [SRV_FACE_MALFORMED] = "malformed", [SRV_FACE_NONFINITE] = "nonfinite",
    [SRV_FACE_TOO_MANY] = "too_many_names", [SRV_FACE_REFUSED] = "refused_source",
    [SRV_FACE_IGNORED] = "ignored_messages", [SRV_FACE_UNKNOWN] = "unknown_names",
    [SRV_FACE_NO_SESSION] = "no_session",
};

static void srv_m_face_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  (void)params;
  cJSON *r = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(r, "inputs");
  for (uint32_t i = 0; i < srv_face_input_count(s); i++) {
    srv_face_info in;
    srv_face_input_info(s, i, &in);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", in.kind == SRV_FACE_VMC ? "vmc" : "livelink");
    cJSON_AddStringToObject(o, "listen", in.listen);
    cJSON_AddNumberToObject(o, "port", in.port);
    cJSON_AddStringToObject(o, "session", in.session);
    cJSON_AddStringToObject(o, "author", in.author);
    cJSON_AddNumberToObject(o, "rate", in.rate);
    for (int k = 0; k < SRV_FACE_COUNTERS; k++) cJSON_AddNumberToObject(o, COUNTER[k], (double)in.counts[k]);
    if (in.take_step) cJSON_AddNumberToObject(o, "take_step", (double)in.take_step);
    else cJSON_AddNullToObject(o, "take_step");
    cJSON_AddNumberToObject(o, "runs_stored", (double)in.runs_stored);
    if (in.latency_samples) {
      cJSON *lat = cJSON_AddObjectToObject(o, "latency_us");
      cJSON_AddNumberToObject(lat, "frames", in.latency_samples);
      cJSON_AddNumberToObject(lat, "p50", in.latency_p50_us);
      cJSON_AddNumberToObject(lat, "p99", in.latency_p99_us);
      cJSON_AddNumberToObject(lat, "max", in.latency_max_us);
    } else {
      cJSON_AddNullToObject(o, "latency_us");
    }
    cJSON_AddItemToArray(list, o);
  }
  srv_rpc_reply(call, r);
}

/* The session's mapping as the answer of both map methods. */
static void reply_map(srv_server *s, srv_rpc_call *call, const srv_session *x) {
  cJSON *r = srv_face_map_get(s, x);
  if (!r) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  cJSON_AddStringToObject(r, "session", x->name);
  srv_rpc_reply(call, r);
}

static void srv_m_face_map_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  reply_map(s, call, x);
}

static void srv_m_face_map_set(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(params, "mapping");
  char why[256];
  if (!cJSON_IsObject(m)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"mapping\" must be an object (docs/json-api.md face.map_set)");
    return;
  }
  int rc = srv_face_map_set(s, x, m, why, sizeof(why));
  if (rc) {
    srv_rpc_error(call, rc, rc == SRV_EPARAMS ? "invalid params: %s" : "%s", why);
    return;
  }
  reply_map(s, call, x);
}

static const srv_method methods[] = {
    {"face.list", srv_m_face_list, 0, SRV_ROLE_ADMIN},
    {"face.map_get", srv_m_face_map_get, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"face.map_set", srv_m_face_map_set, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
};

const srv_method_table srv_face_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
