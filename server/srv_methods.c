/*
 * srv_methods.c — the JSON-RPC methods (documented with examples in docs/json-api.md).
 *
 * Each method validates its params (-32602 with the offending key), finds its session
 * (-32001), and either answers at once or starts a job and answers from its callback. Changes
 * go through srv_session_check() + srv_session_apply(), like binary edits.
 *
 * DOES NOT parse the transport: srv_rpc.c hands it parsed requests.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh_info.h"
#include "srv.h"

#define INVALID_PARAMS -32602

/* Looks up params.session; answers the call with an error and returns NULL when missing. */
static srv_session *want_session(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  if (!cJSON_IsString(name)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"session\" must be a string");
    return NULL;
  }
  srv_session *x = srv_server_find(s, name->valuestring);
  if (!x) srv_rpc_error(call, SRV_RPC_UNKNOWN_SESSION, "unknown session '%s'", name->valuestring);
  return x;
}

static cJSON *session_summary(const srv_session *x) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "session", x->name);
  cJSON_AddNumberToObject(o, "vertices", x->mesh->vertex_count);
  cJSON_AddNumberToObject(o, "triangles", x->mesh->triangle_count);
  cJSON_AddNumberToObject(o, "targets", x->mesh->target_count);
  cJSON_AddNumberToObject(o, "version", (double)x->version);
  cJSON_AddNumberToObject(o, "viewers", x->subscriber_count);
  return o;
}

/* ---- sessions ---------------------------------------------------------------------------- */

static void on_created(srv_server *s, void *arg, int status, srv_session *session, const char *err) {
  srv_rpc_call *call = arg;
  (void)s;
  if (status == 0) {
    srv_log(SRV_LOG_INFO, "session %s created: %u vertices, %u targets", session->name,
            session->mesh->vertex_count, session->mesh->target_count);
    srv_rpc_reply(call, session_summary(session));
  } else if (status == SRV_RPC_SESSION_EXISTS || status == SRV_RPC_LIMIT) {
    srv_rpc_error(call, status, "%s", err);
  } else {
    srv_rpc_error(call, SRV_RPC_MESH_REFUSED, "mesh refused: %s", err);
  }
}

static void m_session_create(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  const cJSON *path = cJSON_GetObjectItemCaseSensitive(params, "mesh");
  if (!cJSON_IsString(name) || name->valuestring[0] == '\0' || strlen(name->valuestring) > PROTO_MAX_NAME) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"session\" must be a name of 1 to %d bytes", PROTO_MAX_NAME);
    return;
  }
  if (!cJSON_IsString(path)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"mesh\" must be a file path or \"demo\"");
    return;
  }
  if (srv_server_find(s, name->valuestring)) {
    srv_rpc_error(call, SRV_RPC_SESSION_EXISTS, "a session called '%s' already exists", name->valuestring);
    return;
  }
  if (srv_job_open_session(s, name->valuestring, path->valuestring, on_created, call) != 0)
    srv_rpc_error(call, SRV_RPC_INTERNAL, "cannot start the import");
}

static void m_session_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  (void)params;
  cJSON *a = cJSON_CreateArray();
  for (srv_session *x = s->sessions; x; x = x->next) cJSON_AddItemToArray(a, session_summary(x));
  srv_rpc_reply(call, a);
}

static void m_session_close(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "session", x->name);
  cJSON_AddBoolToObject(r, "closed", 1);
  srv_server_close_session(s, x, "closed by a JSON-RPC request");
  srv_rpc_reply(call, r);
}

static void on_exported(srv_server *s, void *arg, int status, const char *err) {
  srv_rpc_call *call = arg;
  (void)s;
  if (status) {
    srv_rpc_error(call, SRV_RPC_IO, "export failed: %s", err);
    return;
  }
  srv_rpc_reply(call, cJSON_CreateTrue());
}

static void m_session_export(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  const cJSON *path = cJSON_GetObjectItemCaseSensitive(params, "path");
  if (!cJSON_IsString(path)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"path\" must be a file path ending in .obj or .glb");
    return;
  }
  if (srv_job_export(s, x, path->valuestring, on_exported, call) != 0)
    srv_rpc_error(call, SRV_RPC_INTERNAL, "cannot start the export");
}

/* ---- mesh and targets ----------------------------------------------------------------------- */

static void m_mesh_info(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  cJSON *o = srv_mesh_info_json(x->mesh, &x->stats);
  if (!o) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    return;
  }
  srv_rpc_reply(call, o);
}

static void m_targets_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  cJSON *a = cJSON_CreateArray();
  for (uint32_t t = 0; t < x->mesh->target_count; t++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", t);
    cJSON_AddStringToObject(o, "name", x->mesh->targets[t].name);
    cJSON_AddItemToObject(o, "weight", srv_json_float(x->weights[t]));
    cJSON_AddItemToObject(o, "min", srv_json_float(x->ranges[t].min));
    cJSON_AddItemToObject(o, "max", srv_json_float(x->ranges[t].max));
    cJSON_AddItemToObject(o, "default", srv_json_float(x->mesh->targets[t].default_weight));
    cJSON_AddNumberToObject(o, "vertices", x->mesh->targets[t].count);
    cJSON_AddItemToArray(a, o);
  }
  srv_rpc_reply(call, a);
}

/* ---- weights -------------------------------------------------------------------------------- */

static void m_weights_set(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(params, "weights");
  if (!cJSON_IsObject(w)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"weights\" must be an object of name: number");
    return;
  }
  int n = cJSON_GetArraySize(w);
  uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)(n + 1));
  float *val = malloc(sizeof(float) * (size_t)(n + 1));
  if (!idx || !val) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    goto out;
  }
  uint32_t k = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, w) {
    int t = mesh_find_target(x->mesh, item->string);
    if (t < 0) {
      srv_rpc_error(call, SRV_RPC_UNKNOWN_TARGET, "unknown target '%s' in session '%s'", item->string, x->name);
      goto out;
    }
    if (!cJSON_IsNumber(item)) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: weight of '%s' must be a number", item->string);
      goto out;
    }
    /* cJSON reads 1e999 as inf; a float that overflows is not finite either. */
    float v = (float)item->valuedouble;
    if (!isfinite(item->valuedouble) || !isfinite(v)) {
      srv_rpc_error(call, SRV_RPC_NOT_FINITE, "weight of '%s' is not a finite number", item->string);
      goto out;
    }
    idx[k] = (uint32_t)t;
    val[k++] = v;
  }
  srv_op op = {SRV_OP_SET_WEIGHTS, call->conn->id, k, idx, val, NULL};
  char why[256];
  if (srv_session_check(x, &op, why, sizeof(why)) != 0) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "%s", why);
    goto out;
  }
  uint64_t version = k ? srv_session_apply(s, x, &op) : x->version;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)version);
  srv_rpc_reply(call, r);
out:
  free(idx);
  free(val);
}

static void m_weights_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)x->version);
  cJSON *w = cJSON_AddObjectToObject(r, "weights");
  for (uint32_t t = 0; t < x->mesh->target_count; t++)
    cJSON_AddItemToObject(w, x->mesh->targets[t].name, srv_json_float(x->weights[t]));
  srv_rpc_reply(call, r);
}

/* ---- sculpt offsets --------------------------------------------------------------------------- */

typedef struct vq {
  uint32_t v;
  int32_t q[3];
} vq;

static int cmp_vq(const void *a, const void *b) {
  uint32_t x = ((const vq *)a)->v, y = ((const vq *)b)->v;
  return (x > y) - (x < y);
}

static void m_sculpt_set(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(params, "offsets");
  if (!cJSON_IsObject(o)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"offsets\" must be an object of \"vertex\": [x, y, z]");
    return;
  }
  int n = cJSON_GetArraySize(o);
  vq *e = malloc(sizeof(vq) * (size_t)(n + 1));
  uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)(n + 1));
  int32_t *q = malloc(sizeof(int32_t) * 3 * (size_t)(n + 1));
  if (!e || !idx || !q) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    goto out;
  }
  uint32_t k = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, o) {
    const char *key = item->string;
    size_t klen = strlen(key);
    int digits = klen > 0 && klen <= 10;
    for (size_t i = 0; digits && i < klen; i++) digits = key[i] >= '0' && key[i] <= '9';
    if (!digits) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: offset keys are vertex indices, not '%s'", key);
      goto out;
    }
    unsigned long v = strtoul(key, NULL, 10);
    if (v >= x->mesh->vertex_count) {
      srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "vertex %lu out of range (the mesh has %u vertices)", v,
                    x->mesh->vertex_count);
      goto out;
    }
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 3) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: offset of vertex %lu must be [x, y, z]", v);
      goto out;
    }
    e[k].v = (uint32_t)v;
    for (int c = 0; c < 3; c++) {
      const cJSON *num = cJSON_GetArrayItem(item, c);
      if (!cJSON_IsNumber(num)) {
        srv_rpc_error(call, INVALID_PARAMS, "invalid params: offset of vertex %lu must hold numbers", v);
        goto out;
      }
      float f = (float)num->valuedouble;
      if (!isfinite(num->valuedouble) || !isfinite(f)) {
        srv_rpc_error(call, SRV_RPC_NOT_FINITE, "offset of vertex %lu is not finite", v);
        goto out;
      }
      double limit = (double)((1 << 30) - 1) * x->offset_quantum;
      if (fabs(num->valuedouble) > limit) {
        srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "offset %g of vertex %lu is beyond the largest allowed (±%g)",
                      num->valuedouble, v, limit);
        goto out;
      }
      e[k].q[c] = proto_quantize(f, x->offset_quantum);
    }
    k++;
  }
  qsort(e, k, sizeof(vq), cmp_vq);
  uint32_t m = 0;
  for (uint32_t i = 0; i < k; i++) {
    if (m > 0 && idx[m - 1] == e[i].v) m--; /* a repeated key: the later one wins */
    idx[m] = e[i].v;
    memcpy(q + 3 * (size_t)m, e[i].q, sizeof(e[i].q));
    m++;
  }
  srv_op op = {SRV_OP_SET_OFFSETS, call->conn->id, m, idx, NULL, q};
  char why[256];
  if (srv_session_check(x, &op, why, sizeof(why)) != 0) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "%s", why);
    goto out;
  }
  uint64_t version = m ? srv_session_apply(s, x, &op) : x->version;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)version);
  srv_rpc_reply(call, r);
out:
  free(e);
  free(idx);
  free(q);
}

static void m_sculpt_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)x->version);
  cJSON *o = cJSON_AddObjectToObject(r, "offsets");
  for (uint32_t v = 0; v < x->mesh->vertex_count; v++) {
    const int32_t *q = x->offsets + 3 * (size_t)v;
    if ((q[0] | q[1] | q[2]) == 0) continue;
    char key[16];
    snprintf(key, sizeof(key), "%u", v);
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int c = 0; c < 3; c++)
      cJSON_AddItemToArray(a, srv_json_float(proto_dequantize(q[c], x->offset_quantum)));
  }
  srv_rpc_reply(call, r);
}

/* ---- state and server --------------------------------------------------------------------------- */

static void m_state_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = want_session(s, call, params);
  if (!x) return;
  uint32_t sculpted = 0, editors = 0;
  for (uint32_t v = 0; v < x->mesh->vertex_count; v++) {
    const int32_t *q = x->offsets + 3 * (size_t)v;
    sculpted += (q[0] | q[1] | q[2]) != 0;
  }
  for (srv_conn *c = x->subscribers; c; c = c->sub_next) editors += c->role == PROTO_ROLE_EDITOR;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "session", x->name);
  cJSON_AddNumberToObject(r, "version", (double)x->version);
  cJSON_AddNumberToObject(r, "vertices", x->mesh->vertex_count);
  cJSON_AddNumberToObject(r, "targets", x->mesh->target_count);
  cJSON_AddNumberToObject(r, "sculpted_vertices", sculpted);
  cJSON_AddItemToObject(r, "offset_quantum", srv_json_float(x->offset_quantum));
  cJSON_AddNumberToObject(r, "viewers", x->subscriber_count);
  cJSON_AddNumberToObject(r, "editors", editors);
  cJSON_AddNumberToObject(r, "operations", (double)x->ops_applied);
  srv_rpc_reply(call, r);
}

static void m_auth(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(params, "token");
  if (!cJSON_IsString(t)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"token\" must be a string");
    return;
  }
  if (s->cfg.token && strcmp(t->valuestring, s->cfg.token) != 0) {
    srv_rpc_error(call, SRV_RPC_UNAUTHORIZED, "wrong token");
    return;
  }
  call->conn->authed = 1;
  srv_rpc_reply(call, cJSON_CreateTrue());
}

static void m_server_stats(srv_server *s, srv_rpc_call *call, cJSON *params) {
  (void)params;
  uint32_t streams = 0, rpcs = 0, lagging = 0;
  size_t queued = 0;
  for (srv_conn *c = s->conns; c; c = c->next) {
    if (c->closing) continue;
    if (c->kind == SRV_CONN_STREAM) streams++;
    else rpcs++;
    lagging += c->lagging;
    queued += c->queued;
  }
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "connections", streams + rpcs);
  cJSON_AddNumberToObject(r, "stream_connections", streams);
  cJSON_AddNumberToObject(r, "rpc_connections", rpcs);
  cJSON_AddNumberToObject(r, "sessions", s->session_count);
  cJSON_AddNumberToObject(r, "frames_sent", (double)s->stats.frames_sent);
  cJSON_AddNumberToObject(r, "bytes_sent", (double)s->stats.bytes_sent);
  cJSON_AddNumberToObject(r, "frames_coalesced", (double)s->stats.frames_coalesced);
  cJSON_AddNumberToObject(r, "catchups_sent", (double)s->stats.catchups_sent);
  cJSON_AddNumberToObject(r, "clients_dropped", (double)s->stats.clients_dropped);
  cJSON_AddNumberToObject(r, "connections_refused", (double)s->stats.connections_refused);
  cJSON_AddNumberToObject(r, "lagging_connections", lagging);
  cJSON_AddNumberToObject(r, "queued_bytes", (double)queued);
  cJSON_AddNumberToObject(r, "rpc_requests", (double)s->stats.rpc_requests);
  cJSON_AddNumberToObject(r, "rpc_errors", (double)s->stats.rpc_errors);
  cJSON_AddNumberToObject(r, "uptime_s", (double)(uv_now(s->loop) - s->started_ms) / 1000.0);
  srv_rpc_reply(call, r);
}

/* ---- dispatch ------------------------------------------------------------------------------------- */

typedef void (*method_fn)(srv_server *, srv_rpc_call *, cJSON *);

static const struct {
  const char *name;
  method_fn fn;
  int needs_params;
} methods[] = {
    {"session.create", m_session_create, 1}, {"session.list", m_session_list, 0},
    {"session.close", m_session_close, 1},   {"session.export", m_session_export, 1},
    {"mesh.info", m_mesh_info, 1},           {"targets.list", m_targets_list, 1},
    {"weights.set", m_weights_set, 1},       {"weights.get", m_weights_get, 1},
    {"sculpt.set", m_sculpt_set, 1},         {"sculpt.get", m_sculpt_get, 1},
    {"state.get", m_state_get, 1},           {"server.stats", m_server_stats, 0},
    {"auth", m_auth, 1},
};

void srv_methods_dispatch(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params) {
  if (s->cfg.token && !call->conn->authed && strcmp(method, "auth") != 0) {
    srv_rpc_error(call, SRV_RPC_UNAUTHORIZED, "this server needs a token: call auth {\"token\": ...} first");
    return;
  }
  for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
    if (strcmp(methods[i].name, method) != 0) continue;
    if (methods[i].needs_params && !cJSON_IsObject(params)) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: %s takes an object of named params, not an array", method);
      return;
    }
    methods[i].fn(s, call, params);
    return;
  }
  srv_rpc_error(call, -32601, "unknown method '%s'", method);
}
