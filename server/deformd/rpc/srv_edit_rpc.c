/*
 * srv_edit_rpc.c — the JSON-RPC methods that read and change a session's shape: targets.*,
 * weights.*, sculpt.*, deform.* (gestures) and brush.stroke (docs/json-api.md).
 *
 * Each method checks its params with the readers of srv_rpc.c (the same mistake gets the same
 * code everywhere), then builds an operation record (srv_session_check + srv_session_apply) or
 * hands a request to srv_gesture.c / srv_brush.c, which answer through an srv_reply.
 *
 * DOES NOT solve or apply anything itself, or read from sockets.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "proto.h"
#include "mesh.h"
#include "dfm.h"
#include "dfm_brush.h"
#include "srv_error.h"
#include "srv_json_text.h"
#include "srv_json.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_gesture.h"
#include "srv_brush.h"
#include "srv_rpc.h"
#include "srv_methods.h"

/* Checks and applies `op`: the new version, or 0 after answering the call with the reason
 * (-32006) or -32000 when out of memory. */
static uint64_t apply_op(srv_server *s, srv_session *x, srv_rpc_call *call, const srv_op *op) {
  char why[512];
  if (srv_session_check(x, op, why, sizeof(why)) != 0) {
    srv_rpc_error(call, SRV_ERANGE, "%s", why);
    return 0;
  }
  uint64_t version = srv_session_apply(s, x, op);
  if (version == 0) srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
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

static void srv_m_targets_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  cJSON *a = cJSON_CreateArray();
  for (uint32_t t = 0; t < x->mesh->target_count; t++) cJSON_AddItemToArray(a, target_json(x, t));
  srv_rpc_reply(call, a);
}

/* targets.configure {session, target, min?, max?, muted?, drivers?}: what is not given stays. */
static void srv_m_targets_configure(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "target");
  if (!cJSON_IsString(name)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"target\" must be a target name");
    return;
  }
  int t = mesh_find_target(x->mesh, name->valuestring);
  if (t < 0) {
    char q[SRV_QUOTE_BUF];
    srv_rpc_error(call, SRV_ENOTARGET, "unknown target '%s' in session '%s'", srv_json_quote(name->valuestring, q), x->name);
    return;
  }
  srv_target meta = x->targets[t];
  const char *keys[2] = {"min", "max"};
  float *dst[2] = {&meta.min, &meta.max};
  for (int k = 0; k < 2; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, keys[k]);
    if (!v) continue;
    if (!cJSON_IsNumber(v)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be a number", keys[k]);
      return;
    }
    *dst[k] = (float)v->valuedouble;
  }
  const cJSON *muted = cJSON_GetObjectItemCaseSensitive(params, "muted");
  if (muted) {
    if (!cJSON_IsBool(muted)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"muted\" must be true or false");
      return;
    }
    meta.muted = cJSON_IsTrue(muted);
  }
  const cJSON *drivers = cJSON_GetObjectItemCaseSensitive(params, "drivers");
  if (drivers) {
    if (!cJSON_IsArray(drivers) || cJSON_GetArraySize(drivers) > PROTO_MAX_DRIVERS) {
      srv_rpc_error(call, SRV_EPARAMS,
                    "invalid params: \"drivers\" must be an array of at most %d target names ([] for none)",
                    PROTO_MAX_DRIVERS);
      return;
    }
    meta.driver_count = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, drivers) {
      if (!cJSON_IsString(d)) {
        srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"drivers\" must hold target names");
        return;
      }
      int di = mesh_find_target(x->mesh, d->valuestring);
      if (di < 0) {
        char q[SRV_QUOTE_BUF];
        srv_rpc_error(call, SRV_ENOTARGET, "unknown driver '%s' in session '%s'", srv_json_quote(d->valuestring, q), x->name);
        return;
      }
      meta.drivers[meta.driver_count++] = (uint32_t)di;
    }
  }
  uint32_t idx = (uint32_t)t;
  srv_op op = {.kind = SRV_OP_SET_TARGET_META, .author = srv_conn_author(call->conn), .cause = SRV_CAUSE_TARGET_CONFIGURE, .count = 1, .indices = &idx, .meta = &meta};
  uint64_t version = apply_op(s, x, call, &op);
  if (version == 0) return;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)version);
  cJSON_AddItemToObject(r, "target", target_json(x, idx));
  srv_rpc_reply(call, r);
}

static void srv_m_targets_create_from_sculpt(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
  if (!cJSON_IsString(name)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"name\" must be the new target's name");
    return;
  }
  /* An open gesture keeps adding its drag to the sculpt it saw at begin; baking that sculpt into
   * a target under it would count the same offsets twice. */
  if (x->gesture_count) {
    srv_rpc_error(call, SRV_EBUSY, "session '%s' has %u gesture(s) in progress; end them first (deform.end)",
                  x->name, x->gesture_count);
    return;
  }
  srv_op op = {.kind = SRV_OP_ADD_TARGET, .author = srv_conn_author(call->conn), .cause = SRV_CAUSE_TARGET_CREATE, .name = name->valuestring};
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

static void srv_m_weights_set(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(params, "weights");
  if (!cJSON_IsObject(w)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"weights\" must be an object of name: number");
    return;
  }
  int n = cJSON_GetArraySize(w);
  uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)(n + 1));
  float *val = malloc(sizeof(float) * (size_t)(n + 1));
  if (!idx || !val) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    goto out;
  }
  uint32_t k = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, w) {
    int t = mesh_find_target(x->mesh, item->string);
    if (t < 0) {
      char q[SRV_QUOTE_BUF];
      srv_rpc_error(call, SRV_ENOTARGET, "unknown target '%s' in session '%s'", srv_json_quote(item->string, q), x->name);
      goto out;
    }
    if (!cJSON_IsNumber(item)) {
      char q[SRV_QUOTE_BUF];
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: weight of '%s' must be a number", srv_json_quote(item->string, q));
      goto out;
    }
    /* cJSON reads 1e999 as inf; a float that overflows is not finite either. */
    float v = (float)item->valuedouble;
    if (!isfinite(item->valuedouble) || !isfinite(v)) {
      char q[SRV_QUOTE_BUF];
      srv_rpc_error(call, SRV_ENOTFINITE, "weight of '%s' is not a finite number", srv_json_quote(item->string, q));
      goto out;
    }
    idx[k] = (uint32_t)t;
    val[k++] = v;
  }
  srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = srv_conn_author(call->conn), .cause = SRV_CAUSE_WEIGHTS_SET, .count = k, .indices = idx, .values = val};
  char why[256];
  if (srv_session_check(x, &op, why, sizeof(why)) != 0) {
    srv_rpc_error(call, SRV_ERANGE, "%s", why);
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

static void srv_m_weights_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
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

static void srv_m_sculpt_set(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(params, "offsets");
  if (!cJSON_IsObject(o)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"offsets\" must be an object of \"vertex\": [x, y, z]");
    return;
  }
  int n = cJSON_GetArraySize(o);
  vq *e = malloc(sizeof(vq) * (size_t)(n + 1));
  uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)(n + 1));
  int32_t *q = malloc(sizeof(int32_t) * 3 * (size_t)(n + 1));
  if (!e || !idx || !q) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
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
      char kq[SRV_QUOTE_BUF];
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: offset keys are vertex indices, not '%s'", srv_json_quote(key, kq));
      goto out;
    }
    unsigned long v = strtoul(key, NULL, 10);
    if (v >= x->mesh->vertex_count) {
      srv_rpc_error(call, SRV_ERANGE, "vertex %lu out of range (the mesh has %u vertices)", v,
                    x->mesh->vertex_count);
      goto out;
    }
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 3) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: offset of vertex %lu must be [x, y, z]", v);
      goto out;
    }
    e[k].v = (uint32_t)v;
    for (int c = 0; c < 3; c++) {
      const cJSON *num = cJSON_GetArrayItem(item, c);
      if (!cJSON_IsNumber(num)) {
        srv_rpc_error(call, SRV_EPARAMS, "invalid params: offset of vertex %lu must hold numbers", v);
        goto out;
      }
      float f = (float)num->valuedouble;
      if (!isfinite(num->valuedouble) || !isfinite(f)) {
        srv_rpc_error(call, SRV_ENOTFINITE, "offset of vertex %lu is not finite", v);
        goto out;
      }
      double limit = (double)((1 << 30) - 1) * x->offset_quantum;
      if (fabs(num->valuedouble) > limit) {
        srv_rpc_error(call, SRV_ERANGE, "offset %g of vertex %lu is beyond the largest allowed (±%g)",
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
  srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = srv_conn_author(call->conn), .cause = SRV_CAUSE_SCULPT_SET, .count = m, .indices = idx, .q = q};
  char why[256];
  if (srv_session_check(x, &op, why, sizeof(why)) != 0) {
    srv_rpc_error(call, SRV_ERANGE, "%s", why);
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

static void srv_m_sculpt_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
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

static int gesture_id(srv_rpc_call *call, cJSON *params, uint32_t *id) {
  double v = 0;
  int r = srv_rpc_number(call, params, "gesture", &v);
  if (r < 0) return -1;
  if (r == 0 || v < 1 || v > 4294967295.0 || v != (double)(uint32_t)v) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"gesture\" must be the id deform.begin returned");
    return -1;
  }
  *id = (uint32_t)v;
  return 0;
}

/* "soft": [{"vertex", "weight", "position"?}, ...] into three arrays (malloc'ed; NAN positions
 * where none is given). Returns 0 (absent), 1, or -1 (answered). */
static int soft_constraints(srv_rpc_call *call, const cJSON *params, uint32_t limit, uint32_t **vertex, double **weight,
                            double **position, uint32_t *count) {
  *vertex = NULL, *weight = *position = NULL, *count = 0;
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(params, "soft");
  if (!list) return 0;
  int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
  if (n < 0) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"soft\" must be an array of {\"vertex\", \"weight\", \"position\"?}");
    return -1;
  }
  if ((uint32_t)n > limit) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: %d soft constraints for %u vertices", n, limit);
    return -1;
  }
  *vertex = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  *weight = malloc(sizeof(double) * ((size_t)n + 1));
  *position = malloc(sizeof(double) * 3 * ((size_t)n + 1));
  if (!*vertex || !*weight || !*position) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return -1;
  }
  const cJSON *c;
  cJSON_ArrayForEach(c, list) {
    uint32_t i = (*count)++;
    double v = -1, w = -1, *at = *position + 3 * (size_t)i;
    int r = cJSON_IsObject(c) ? srv_rpc_number(call, c, "vertex", &v) : 0;
    if (r < 0) return -1;
    if (r == 0 || v < 0 || v > 4294967295.0 || v != (double)(uint32_t)v) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: soft constraint %u needs \"vertex\": a vertex index", i);
      return -1;
    }
    if ((r = srv_rpc_number(call, c, "weight", &w)) < 0) return -1;
    if (r == 0 || w < 0) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: soft constraint %u needs \"weight\": a number >= 0", i);
      return -1;
    }
    if ((r = srv_rpc_numbers(call, c, "position", 3, at)) < 0) return -1;
    if (r == 0) at[0] = at[1] = at[2] = NAN;
    (*vertex)[i] = (uint32_t)v;
    (*weight)[i] = w;
  }
  return 1;
}

static void srv_m_deform_begin(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  srv_gesture_spec spec = {0};
  spec.author = srv_conn_author(call->conn);
  spec.mode = DFM_ARAP;
  spec.iterations = 2;
  spec.pick = -1;
  uint32_t *handle = NULL, *roi = NULL, *anchors = NULL, *soft = NULL;
  double *soft_w = NULL, *soft_p = NULL;
  const cJSON *border = cJSON_GetObjectItemCaseSensitive(params, "border");
  if (border && (!cJSON_IsString(border) || (strcmp(border->valuestring, "smooth") && strcmp(border->valuestring, "sharp")))) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"border\" must be \"smooth\" or \"sharp\"");
    return;
  }
  spec.sharp_border = border && strcmp(border->valuestring, "sharp") == 0;
  const cJSON *mode = cJSON_GetObjectItemCaseSensitive(params, "mode");
  if (mode && (!cJSON_IsString(mode) || dfm_mode_parse(mode->valuestring, &spec.mode) != 0)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"mode\" must be \"laplacian\", \"arap\" or \"biharmonic\"");
    return;
  }
  double v;
  int r;
  if ((r = srv_rpc_integer_in(call, params, "iterations", 1, 100, &v)) < 0) return;
  if (r) spec.iterations = (int)v;
  if ((r = srv_rpc_number(call, params, "gesture", &v)) < 0) return;
  if (r) {
    if (v < 1 || v > 4294967295.0 || v != (double)(uint32_t)v) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"gesture\" must be an integer id >= 1");
      return;
    }
    spec.id = (uint32_t)v;
  }
  if ((r = srv_rpc_number(call, params, "pick", &v)) < 0) return;
  if (r) {
    if (v < 0 || v != (double)(int64_t)v) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"pick\" must be a vertex index");
      return;
    }
    spec.pick = (int64_t)v;
  }
  if ((r = srv_rpc_integer_in(call, params, "proxy_vertices", 100, 10000000, &v)) < 0) return;
  if (r) spec.proxy_vertices = (uint32_t)v;
  if (srv_rpc_number(call, params, "handle_radius", &spec.handle_radius) < 0) return;
  if (srv_rpc_number(call, params, "roi_radius", &spec.roi_radius) < 0) return;
  if (srv_rpc_vertices(call, params, "handle", &handle, &spec.handle_count) < 0) return;
  if (srv_rpc_vertices(call, params, "roi", &roi, &spec.roi_count) < 0) goto out;
  if (srv_rpc_vertices(call, params, "anchors", &anchors, &spec.anchor_count) < 0) goto out;
  if (soft_constraints(call, params, x->mesh->vertex_count, &soft, &soft_w, &soft_p, &spec.soft_count) < 0) goto out;
  spec.soft = soft, spec.soft_weight = soft_w, spec.soft_position = soft_p;
  if (roi && spec.roi_count == 0) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"roi\" is empty; omit it to deform the whole mesh");
    goto out;
  }
  if (srv_rpc_bool(call, params, "detached", &spec.detached) < 0) goto out;
  int multires = 0, has_multires = srv_rpc_bool(call, params, "multires", &multires);
  if (has_multires < 0) goto out;
  if (has_multires) spec.multires = multires ? DFM_MULTIRES_ON : DFM_MULTIRES_OFF;
  if (srv_rpc_bool(call, params, "measure_exact", &spec.measure_exact) < 0) goto out;
  spec.handle = handle, spec.roi = roi, spec.anchors = anchors;
  char err[256];
  srv_reply reply = srv_rpc_reply_to(call);
  /* The gesture ends with this connection unless it is detached ("detached": true, for tools
   * like deformctl that open a connection per call): then with deform.end, the session, or
   * after being idle too long. Its memory counts against this connection's budget either way. */
  int rc = srv_gesture_begin(s, x, &spec, call->conn->id, reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
out:
  free(handle);
  free(roi);
  free(anchors);
  free(soft);
  free(soft_w);
  free(soft_p);
}

static void srv_m_deform_drag(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t id;
  if (gesture_id(call, params, &id) < 0) return;
  dfm_xform xf;
  dfm_xform_identity(&xf);
  int r;
  if (srv_rpc_numbers(call, params, "translate", 3, xf.translate) < 0) return;
  if ((r = srv_rpc_numbers(call, params, "rotate", 4, xf.rotation)) < 0) return;
  int pivot = srv_rpc_numbers(call, params, "pivot", 3, xf.pivot);
  if (pivot < 0) return;
  char err[256];
  srv_reply reply = srv_rpc_reply_to(call);
  int rc = srv_gesture_drag(s, x, id, &xf, pivot, reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

static void srv_m_deform_end(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t id;
  if (gesture_id(call, params, &id) < 0) return;
  char err[256];
  srv_reply reply = srv_rpc_reply_to(call);
  int rc = srv_gesture_end(s, x, id, reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

static void srv_m_deform_reset(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t *list = NULL, count = 0;
  int r = srv_rpc_vertices(call, params, "vertices", &list, &count);
  if (r < 0) return;
  if (r && count == 0) {
    free(list);
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"vertices\" is empty; omit it to reset every vertex");
    return;
  }
  uint64_t version;
  uint32_t reset;
  char err[256];
  int rc = srv_session_reset(s, x, srv_conn_author(call->conn), r ? list : NULL, count, &version, &reset, err, sizeof(err));
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

static void srv_m_brush_stroke(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  dfm_brush brush = {.kind = DFM_BRUSH_GRAB, .falloff = DFM_FALLOFF_SMOOTHSTEP};
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(params, "brush");
  if (!cJSON_IsString(kind) || dfm_brush_parse(kind->valuestring, &brush.kind) != 0) {
    srv_rpc_error(call, SRV_EPARAMS,
                  "invalid params: \"brush\" must be draw, grab, inflate, smooth, flatten, pinch, crease or layer");
    return;
  }
  const cJSON *falloff = cJSON_GetObjectItemCaseSensitive(params, "falloff");
  if (falloff && (!cJSON_IsString(falloff) || dfm_falloff_parse(falloff->valuestring, &brush.falloff) != 0)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"falloff\" must be smoothstep, linear, gaussian or constant");
    return;
  }
  int piece = 0;
  if (srv_rpc_bool(call, params, "mirror_x", &brush.mirror_x) < 0 || srv_rpc_bool(call, params, "continue", &piece) < 0 ||
      srv_rpc_bool(call, params, "front_faces_only", &brush.front_only) < 0 ||
      srv_rpc_number_in(call, params, "spacing", 0.01, 1.0, &brush.spacing) < 0 ||
      srv_rpc_number_in(call, params, "autosmooth", 0.0, 1.0, &brush.autosmooth) < 0 ||
      srv_rpc_number_in(call, params, "height", 0.0, 1e30, &brush.height) < 0)
    return;
  const cJSON *mirror = cJSON_GetObjectItemCaseSensitive(params, "mirror");
  if (mirror) {
    const char *m = cJSON_IsString(mirror) ? mirror->valuestring : "";
    brush.mirror_axis = !strcmp(m, "none") ? 0 : !strcmp(m, "x") ? 1 : !strcmp(m, "y") ? 2 : !strcmp(m, "z") ? 3 : -1;
    if (brush.mirror_axis < 0 || (brush.mirror_x && brush.mirror_axis > 1)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"mirror\" must be \"none\", \"x\", \"y\" or \"z\" (one plane; "
                    "\"mirror_x\": true is \"x\")");
      return;
    }
  }
  int view = srv_rpc_numbers(call, params, "view", 3, brush.view);
  if (view < 0) return;
  if (brush.front_only && (!view || (brush.view[0] == 0 && brush.view[1] == 0 && brush.view[2] == 0))) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"front_faces_only\" needs \"view\": [x, y, z], the direction the viewer looks in");
    return;
  }
  /* Grab's strength is how much of the path the surface follows: all of it by default. */
  double radius = -1, strength = brush.kind == DFM_BRUSH_GRAB ? 1.0 : 0.5;
  if (srv_rpc_number(call, params, "radius", &radius) < 0 || srv_rpc_number_in(call, params, "strength", -1.0, 1.0, &strength) < 0)
    return;
  dfm_brush_sample *samples = NULL;
  int n = srv_rpc_samples(call, params, radius, strength, -1.0, 1.0, 1, &samples);
  if (n < 0) return;
  char err[256];
  srv_reply reply = srv_rpc_reply_to(call);
  int rc = srv_brush_stroke_piece(s, x, &brush, samples, (uint32_t)n, srv_conn_author(call->conn), call->conn->id, piece,
                                  reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
  free(samples);
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). */
static const srv_method methods[] = {
    {"targets.list", srv_m_targets_list, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"weights.get", srv_m_weights_get, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"sculpt.get", srv_m_sculpt_get, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"weights.set", srv_m_weights_set, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"sculpt.set", srv_m_sculpt_set, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"deform.begin", srv_m_deform_begin, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"deform.drag", srv_m_deform_drag, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"deform.end", srv_m_deform_end, SRV_METHOD_ON, SRV_ROLE_EDITOR}, /* even while the store fails: it lets go */
    {"deform.reset", srv_m_deform_reset, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"brush.stroke", srv_m_brush_stroke, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"targets.configure", srv_m_targets_configure, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
    {"targets.create_from_sculpt", srv_m_targets_create_from_sculpt, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
};
const srv_method_table srv_edit_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
