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
srv_session *srv_rpc_want_session(srv_server *s, srv_rpc_call *call, cJSON *params) {
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
  srv_session *x = srv_rpc_want_session(s, call, params);
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
  srv_session *x = srv_rpc_want_session(s, call, params);
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
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  cJSON *o = srv_mesh_info_json(x->mesh, &x->stats);
  if (!o) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    return;
  }
  srv_rpc_reply(call, o);
}

/* Checks and applies `op`: the new version, or 0 after answering the call with the reason
 * (-32006) or -32000 when out of memory. */
static uint64_t apply_op(srv_server *s, srv_session *x, srv_rpc_call *call, const srv_op *op) {
  char why[512];
  if (srv_session_check(x, op, why, sizeof(why)) != 0) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "%s", why);
    return 0;
  }
  uint64_t version = srv_session_apply(s, x, op);
  if (version == 0) srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
  return version;
}

/* One target as targets.list and targets.configure show it. */
static cJSON *target_json(const srv_session *x, uint32_t t) {
  const srv_target *st = &x->targets[t];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "index", t);
  cJSON_AddStringToObject(o, "name", x->mesh->targets[t].name);
  cJSON_AddItemToObject(o, "weight", srv_json_float(x->weights[t]));
  cJSON_AddItemToObject(o, "value", srv_json_float(st->value));
  cJSON_AddItemToObject(o, "min", srv_json_float(st->min));
  cJSON_AddItemToObject(o, "max", srv_json_float(st->max));
  cJSON_AddBoolToObject(o, "muted", st->muted);
  cJSON *d = cJSON_AddArrayToObject(o, "drivers");
  for (uint32_t i = 0; i < st->driver_count; i++)
    cJSON_AddItemToArray(d, cJSON_CreateString(x->mesh->targets[st->drivers[i]].name));
  cJSON_AddItemToObject(o, "default", srv_json_float(x->mesh->targets[t].default_weight));
  cJSON_AddNumberToObject(o, "vertices", x->mesh->targets[t].count);
  return o;
}

static void m_targets_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  cJSON *a = cJSON_CreateArray();
  for (uint32_t t = 0; t < x->mesh->target_count; t++) cJSON_AddItemToArray(a, target_json(x, t));
  srv_rpc_reply(call, a);
}

/* targets.configure {session, target, min?, max?, muted?, drivers?}: what is not given stays. */
static void m_targets_configure(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "target");
  if (!cJSON_IsString(name)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"target\" must be a target name");
    return;
  }
  int t = mesh_find_target(x->mesh, name->valuestring);
  if (t < 0) {
    srv_rpc_error(call, SRV_RPC_UNKNOWN_TARGET, "unknown target '%s' in session '%s'", name->valuestring, x->name);
    return;
  }
  srv_target meta = x->targets[t];
  const char *keys[2] = {"min", "max"};
  float *dst[2] = {&meta.min, &meta.max};
  for (int k = 0; k < 2; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, keys[k]);
    if (!v) continue;
    if (!cJSON_IsNumber(v)) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"%s\" must be a number", keys[k]);
      return;
    }
    *dst[k] = (float)v->valuedouble;
  }
  const cJSON *muted = cJSON_GetObjectItemCaseSensitive(params, "muted");
  if (muted) {
    if (!cJSON_IsBool(muted)) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"muted\" must be true or false");
      return;
    }
    meta.muted = cJSON_IsTrue(muted);
  }
  const cJSON *drivers = cJSON_GetObjectItemCaseSensitive(params, "drivers");
  if (drivers) {
    if (!cJSON_IsArray(drivers) || cJSON_GetArraySize(drivers) > PROTO_MAX_DRIVERS) {
      srv_rpc_error(call, INVALID_PARAMS,
                    "invalid params: \"drivers\" must be an array of at most %d target names ([] for none)",
                    PROTO_MAX_DRIVERS);
      return;
    }
    meta.driver_count = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, drivers) {
      if (!cJSON_IsString(d)) {
        srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"drivers\" must hold target names");
        return;
      }
      int di = mesh_find_target(x->mesh, d->valuestring);
      if (di < 0) {
        srv_rpc_error(call, SRV_RPC_UNKNOWN_TARGET, "unknown driver '%s' in session '%s'", d->valuestring, x->name);
        return;
      }
      meta.drivers[meta.driver_count++] = (uint32_t)di;
    }
  }
  uint32_t idx = (uint32_t)t;
  srv_op op = {.kind = SRV_OP_SET_TARGET_META, .author = call->conn->id, .count = 1, .indices = &idx, .meta = &meta};
  uint64_t version = apply_op(s, x, call, &op);
  if (version == 0) return;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)version);
  cJSON_AddItemToObject(r, "target", target_json(x, idx));
  srv_rpc_reply(call, r);
}

static void m_targets_create_from_sculpt(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
  if (!cJSON_IsString(name)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"name\" must be the new target's name");
    return;
  }
  /* An open gesture keeps adding its drag to the sculpt it saw at begin; baking that sculpt into
   * a target under it would count the same offsets twice. */
  if (x->gesture_count) {
    srv_rpc_error(call, SRV_RPC_BUSY, "session '%s' has %u gesture(s) in progress; end them first (deform.end)",
                  x->name, x->gesture_count);
    return;
  }
  srv_op op = {.kind = SRV_OP_ADD_TARGET, .author = call->conn->id, .name = name->valuestring};
  uint64_t version = apply_op(s, x, call, &op);
  if (version == 0) return;
  uint32_t t = x->mesh->target_count - 1;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)version);
  cJSON_AddNumberToObject(r, "index", t);
  cJSON_AddStringToObject(r, "name", x->mesh->targets[t].name);
  cJSON_AddNumberToObject(r, "vertices", x->mesh->targets[t].count);
  srv_rpc_reply(call, r);
}

/* ---- weights -------------------------------------------------------------------------------- */

static void m_weights_set(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
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
  srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = call->conn->id, .count = k, .indices = idx, .values = val};
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
  srv_session *x = srv_rpc_want_session(s, call, params);
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
  srv_session *x = srv_rpc_want_session(s, call, params);
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
  srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = call->conn->id, .count = m, .indices = idx, .q = q};
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
  srv_session *x = srv_rpc_want_session(s, call, params);
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

/* ---- deformation gestures ------------------------------------------------------------------------- */

/* Reads an optional array of vertex indices. Returns 0 (absent: *out NULL), 1, or -1 after
 * answering the call with -32602. */
static int vertex_list(srv_rpc_call *call, cJSON *params, const char *key, uint32_t **out, uint32_t *count) {
  *out = NULL;
  *count = 0;
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!a) return 0;
  if (!cJSON_IsArray(a)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"%s\" must be an array of vertex indices", key);
    return -1;
  }
  int n = cJSON_GetArraySize(a);
  *out = malloc(sizeof(uint32_t) * (size_t)(n + 1));
  if (!*out) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    return -1;
  }
  const cJSON *v;
  cJSON_ArrayForEach(v, a) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 4294967295.0 ||
        v->valuedouble != (double)(uint32_t)v->valuedouble) {
      free(*out);
      *out = NULL;
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"%s\" must hold vertex indices (integers >= 0)", key);
      return -1;
    }
    (*out)[(*count)++] = (uint32_t)v->valuedouble;
  }
  return 1;
}

/* Reads an optional array of n numbers into out. 0 absent, 1 read, -1 answered with an error. */
static int number_array(srv_rpc_call *call, cJSON *params, const char *key, int n, double *out) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!a) return 0;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"%s\" must be an array of %d numbers", key, n);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const cJSON *v = cJSON_GetArrayItem(a, i);
    if (!cJSON_IsNumber(v)) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"%s\" must be an array of %d numbers", key, n);
      return -1;
    }
    if (!isfinite(v->valuedouble)) {
      srv_rpc_error(call, SRV_RPC_NOT_FINITE, "\"%s\" has a non-finite value", key);
      return -1;
    }
    out[i] = v->valuedouble;
  }
  return 1;
}

/* Reads an optional number; 0 absent, 1 read, -1 answered. */
static int number(srv_rpc_call *call, cJSON *params, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"%s\" must be a number", key);
    return -1;
  }
  if (!isfinite(v->valuedouble)) {
    srv_rpc_error(call, SRV_RPC_NOT_FINITE, "\"%s\" is not finite", key);
    return -1;
  }
  *out = v->valuedouble;
  return 1;
}

static int gesture_id(srv_rpc_call *call, cJSON *params, uint32_t *id) {
  double v = 0;
  int r = number(call, params, "gesture", &v);
  if (r < 0) return -1;
  if (r == 0 || v < 1 || v > 4294967295.0 || v != (double)(uint32_t)v) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"gesture\" must be the id deform.begin returned");
    return -1;
  }
  *id = (uint32_t)v;
  return 0;
}

static void m_deform_begin(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  srv_gesture_spec spec = {0};
  spec.mode = DFM_ARAP;
  spec.iterations = 2;
  spec.pick = -1;
  uint32_t *handle = NULL, *roi = NULL, *anchors = NULL;
  const cJSON *mode = cJSON_GetObjectItemCaseSensitive(params, "mode");
  if (mode && (!cJSON_IsString(mode) || dfm_mode_parse(mode->valuestring, &spec.mode) != 0)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"mode\" must be \"laplacian\", \"arap\" or \"biharmonic\"");
    return;
  }
  double v;
  int r;
  if ((r = number(call, params, "iterations", &v)) < 0) return;
  if (r) {
    if (v < 1 || v > 100 || v != (double)(int)v) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"iterations\" must be an integer from 1 to 100");
      return;
    }
    spec.iterations = (int)v;
  }
  if ((r = number(call, params, "gesture", &v)) < 0) return;
  if (r) {
    if (v < 1 || v > 4294967295.0 || v != (double)(uint32_t)v) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"gesture\" must be an integer id >= 1");
      return;
    }
    spec.id = (uint32_t)v;
  }
  if ((r = number(call, params, "pick", &v)) < 0) return;
  if (r) {
    if (v < 0 || v != (double)(int64_t)v) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"pick\" must be a vertex index");
      return;
    }
    spec.pick = (int64_t)v;
  }
  if (number(call, params, "handle_radius", &spec.handle_radius) < 0) return;
  if (number(call, params, "roi_radius", &spec.roi_radius) < 0) return;
  if (vertex_list(call, params, "handle", &handle, &spec.handle_count) < 0) return;
  if (vertex_list(call, params, "roi", &roi, &spec.roi_count) < 0) goto out;
  if (vertex_list(call, params, "anchors", &anchors, &spec.anchor_count) < 0) goto out;
  if (roi && spec.roi_count == 0) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"roi\" is empty; omit it to deform the whole mesh");
    goto out;
  }
  spec.handle = handle, spec.roi = roi, spec.anchors = anchors;
  char err[256];
  srv_reply reply = {call, NULL, 0};
  /* Owner 0: a JSON-RPC gesture outlives the connection that began it (deformctl opens one
   * per call); it ends with deform.end, the session, or after being idle too long. */
  int rc = srv_gesture_begin(s, x, &spec, 0, reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
out:
  free(handle);
  free(roi);
  free(anchors);
}

static void m_deform_drag(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t id;
  if (gesture_id(call, params, &id) < 0) return;
  dfm_xform xf;
  dfm_xform_identity(&xf);
  int r;
  if (number_array(call, params, "translate", 3, xf.translate) < 0) return;
  if ((r = number_array(call, params, "rotate", 4, xf.rotation)) < 0) return;
  int pivot = number_array(call, params, "pivot", 3, xf.pivot);
  if (pivot < 0) return;
  char err[256];
  srv_reply reply = {call, NULL, 0};
  int rc = srv_gesture_drag(s, x, id, &xf, pivot, reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

static void m_deform_end(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t id;
  if (gesture_id(call, params, &id) < 0) return;
  char err[256];
  srv_reply reply = {call, NULL, 0};
  int rc = srv_gesture_end(s, x, id, reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

static void m_deform_reset(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t *list = NULL, count = 0;
  int r = vertex_list(call, params, "vertices", &list, &count);
  if (r < 0) return;
  if (r && count == 0) {
    free(list);
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"vertices\" is empty; omit it to reset every vertex");
    return;
  }
  uint64_t version;
  uint32_t reset;
  char err[256];
  int rc = srv_session_reset(s, x, call->conn->id, r ? list : NULL, count, &version, &reset, err, sizeof(err));
  free(list);
  if (rc) {
    srv_rpc_error(call, rc, "%s", err);
    return;
  }
  cJSON *res = cJSON_CreateObject();
  cJSON_AddNumberToObject(res, "version", (double)version);
  cJSON_AddNumberToObject(res, "reset_vertices", reset);
  srv_rpc_reply(call, res);
}

static void m_brush_stroke(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  dfm_brush brush = {DFM_BRUSH_GRAB, DFM_FALLOFF_SMOOTHSTEP, 0, NULL};
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(params, "brush");
  if (!cJSON_IsString(kind) || dfm_brush_parse(kind->valuestring, &brush.kind) != 0) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"brush\" must be grab, inflate, smooth, flatten or pinch");
    return;
  }
  const cJSON *falloff = cJSON_GetObjectItemCaseSensitive(params, "falloff");
  if (falloff && (!cJSON_IsString(falloff) || dfm_falloff_parse(falloff->valuestring, &brush.falloff) != 0)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"falloff\" must be smoothstep, linear, gaussian or constant");
    return;
  }
  const cJSON *mirror = cJSON_GetObjectItemCaseSensitive(params, "mirror_x");
  if (mirror && !cJSON_IsBool(mirror)) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"mirror_x\" must be true or false");
    return;
  }
  brush.mirror_x = cJSON_IsTrue(mirror);
  double radius = -1, strength = 0.5;
  if (number(call, params, "radius", &radius) < 0 || number(call, params, "strength", &strength) < 0) return;
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(params, "samples");
  int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
  if (n < 1 || n > 65536) {
    srv_rpc_error(call, INVALID_PARAMS, "invalid params: \"samples\" must be an array of 1 to 65536 samples");
    return;
  }
  dfm_brush_sample *samples = calloc((size_t)n, sizeof(*samples));
  if (!samples) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    return;
  }
  int i = 0;
  cJSON *smp;
  cJSON_ArrayForEach(smp, list) {
    dfm_brush_sample *d = &samples[i++];
    d->radius = radius;
    d->strength = strength;
    if (!cJSON_IsObject(smp) || number_array(call, smp, "center", 3, d->center) != 1) {
      if (cJSON_IsObject(smp) && cJSON_GetObjectItemCaseSensitive(smp, "center")) goto out; /* answered */
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: sample %d needs \"center\": [x, y, z]", i - 1);
      goto out;
    }
    if (number_array(call, smp, "direction", 3, d->direction) < 0) goto out;
    if (number(call, smp, "radius", &d->radius) < 0 || number(call, smp, "strength", &d->strength) < 0) goto out;
    if (!(d->radius > 0)) {
      srv_rpc_error(call, INVALID_PARAMS, "invalid params: sample %d has no positive \"radius\" (give one per stroke or per sample)", i - 1);
      goto out;
    }
  }
  char err[256];
  srv_reply reply = {call, NULL, 0};
  int rc = srv_brush_stroke(s, x, &brush, samples, (uint32_t)n, call->conn->id, reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
out:
  free(samples);
}

/* ---- state and server --------------------------------------------------------------------------- */

static void m_state_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
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
  cJSON_AddNumberToObject(r, "blend_factorisations", (double)s->stats.blend_factorisations);
  cJSON_AddNumberToObject(r, "blend_solves", (double)s->stats.blend_solves);
  cJSON_AddNumberToObject(r, "blend_fits", (double)s->stats.blend_fits);
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
    {"targets.configure", m_targets_configure, 1},
    {"sculpt.set", m_sculpt_set, 1},         {"sculpt.get", m_sculpt_get, 1},
    {"state.get", m_state_get, 1},           {"server.stats", m_server_stats, 0},
    {"auth", m_auth, 1},
    {"targets.create_from_sculpt", m_targets_create_from_sculpt, 1},
    {"deform.begin", m_deform_begin, 1},     {"deform.drag", m_deform_drag, 1},
    {"deform.end", m_deform_end, 1},         {"deform.reset", m_deform_reset, 1},
    {"brush.stroke", m_brush_stroke, 1},
    {"blend.solve", srv_blend_method_solve, 1}, {"blend.fit", srv_blend_method_fit, 1},
    {"anim.list", srv_anim_m_list, 1},       {"anim.compress", srv_anim_m_compress, 1},
    {"anim.play", srv_anim_m_play, 1},       {"anim.pause", srv_anim_m_pause, 1},
    {"anim.stop", srv_anim_m_stop, 1},       {"anim.seek", srv_anim_m_seek, 1},
    {"anim.speed", srv_anim_m_speed, 1},     {"anim.loop", srv_anim_m_loop, 1},
    {"anim.blend", srv_anim_m_blend, 1},     {"anim.record_start", srv_anim_m_record_start, 1},
    {"anim.record_stop", srv_anim_m_record_stop, 1},
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
