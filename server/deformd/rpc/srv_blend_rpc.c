/*
 * srv_blend_rpc.c — the JSON-RPC methods blend.solve and blend.fit (docs/json-api.md): their
 * params checked and turned into srv_blend_*_spec requests for srv_blend.c.
 *
 * Type errors answer SRV_EPARAMS naming the key; unknown target names -32002; non-finite numbers
 * -32003; too many pins -32007. What needs the session's state (vertex ranges, muted and
 * combination targets) is checked by srv_blend.c, on both ports alike.
 *
 * DOES NOT run solves or touch session state.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "mesh.h"
#include "srv_error.h"
#include "srv_json_text.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_blend.h"
#include "srv_rpc.h"
#include "srv_methods.h"

/* Reads params.regularization (default 0). 0 or -1 (answered). */
static int regularization(srv_rpc_call *call, cJSON *params, double *out) {
  *out = 0;
  if (srv_rpc_number(call, params, "regularization", out) < 0) return -1;
  if (*out < 0) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"regularization\" must be >= 0 (got %g)", *out);
    return -1;
  }
  return 0;
}

/* An optional boolean with a default. 0 or -1 (answered). */
static int boolean(srv_rpc_call *call, cJSON *params, const char *key, int dflt, int *out) {
  *out = dflt;
  return srv_rpc_bool(call, params, key, out) < 0 ? -1 : 0;
}

/* Reads params.targets: absent (NULL, 0) or a non-empty array of target names, as indices
 * (a name given twice counts once). 0 or -1 (answered). *out is malloc'ed. */
static int target_list(srv_rpc_call *call, const srv_session *x, cJSON *params, uint32_t **out, uint32_t *count) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(params, "targets");
  *out = NULL;
  *count = 0;
  if (!a) return 0;
  int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
  if (n < 1) {
    srv_rpc_error(call, SRV_EPARAMS,
                  "invalid params: \"targets\" must be a non-empty array of target names (omit it for every target)");
    return -1;
  }
  uint8_t *seen = calloc(x->mesh->target_count + 1, 1);
  *out = malloc(sizeof(uint32_t) * (size_t)n);
  if (!seen || !*out) {
    free(seen);
    free(*out);
    *out = NULL;
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return -1;
  }
  const cJSON *t;
  cJSON_ArrayForEach(t, a) {
    if (!cJSON_IsString(t)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"targets\" must hold target names");
      goto fail;
    }
    int i = mesh_find_target(x->mesh, t->valuestring);
    if (i < 0) {
      char q[SRV_QUOTE_BUF];
      srv_rpc_error(call, SRV_ENOTARGET, "unknown target '%s' in session '%s'", srv_json_quote(t->valuestring, q), x->name);
      goto fail;
    }
    if (!seen[i]) (*out)[(*count)++] = (uint32_t)i;
    seen[i] = 1;
  }
  free(seen);
  return 0;
fail:
  free(seen);
  free(*out);
  *out = NULL;
  return -1;
}

/* blend.solve {session, pins: [{vertex, position: [x, y, z]}], regularization?,
 * keep_close_to_current?, targets?} */
static void srv_m_blend_solve(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(params, "pins");
  int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
  if (n < 1) {
    srv_rpc_error(call, SRV_EPARAMS,
                  "invalid params: \"pins\" must be a non-empty array of {\"vertex\": index, \"position\": [x, y, z]}");
    return;
  }
  if (n > SRV_BLEND_MAX_PINS) {
    srv_rpc_error(call, SRV_ELIMIT, "%d pins: at most %d per solve", n, SRV_BLEND_MAX_PINS);
    return;
  }
  srv_blend_pins_spec spec = {0};
  spec.keep_close = 1;
  uint32_t *vertices = malloc(sizeof(uint32_t) * (size_t)n), *targets = NULL;
  double *positions = malloc(sizeof(double) * 3 * (size_t)n);
  if (!vertices || !positions) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    goto out;
  }
  int k = 0;
  const cJSON *pin;
  cJSON_ArrayForEach(pin, list) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(pin, "vertex");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(pin, "position");
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 4294967295.0 ||
        v->valuedouble != (double)(uint32_t)v->valuedouble) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: pin %d needs \"vertex\": a vertex index", k);
      goto out;
    }
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 3) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: pin %d needs \"position\": [x, y, z]", k);
      goto out;
    }
    for (int c = 0; c < 3; c++) {
      const cJSON *e = cJSON_GetArrayItem(p, c);
      if (!cJSON_IsNumber(e)) {
        srv_rpc_error(call, SRV_EPARAMS, "invalid params: pin %d needs \"position\": [x, y, z]", k);
        goto out;
      }
      positions[3 * (size_t)k + c] = e->valuedouble; /* non-finite ones are refused with -32003 below */
    }
    vertices[k++] = (uint32_t)v->valuedouble;
  }
  if (regularization(call, params, &spec.lambda) < 0) goto out;
  if (boolean(call, params, "keep_close_to_current", 1, &spec.keep_close) < 0) goto out;
  if (target_list(call, x, params, &targets, &spec.target_count) < 0) goto out;
  spec.vertices = vertices;
  spec.positions = positions;
  spec.pin_count = (uint32_t)n;
  spec.targets = targets;
  char err[512];
  srv_reply reply = srv_rpc_reply_to(call);
  int rc = srv_blend_solve(s, x, &spec, srv_conn_author(call->conn), reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
out:
  free(vertices);
  free(positions);
  free(targets);
}

/* blend.fit {session, shape: "sculpt" | path, regularization?, keep_close_to_current?, targets?,
 * apply?} */
static void srv_m_blend_fit(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(params, "shape");
  if (!cJSON_IsString(shape) || !shape->valuestring[0]) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"shape\" must be \"sculpt\" or a mesh file path");
    return;
  }
  srv_blend_fit_spec spec = {0};
  spec.shape = shape->valuestring;
  uint32_t *targets = NULL;
  if (regularization(call, params, &spec.lambda) < 0) return;
  if (boolean(call, params, "keep_close_to_current", 1, &spec.keep_close) < 0) return;
  if (boolean(call, params, "apply", 0, &spec.apply) < 0) return;
  if (target_list(call, x, params, &targets, &spec.target_count) < 0) return;
  spec.targets = targets;
  char err[512];
  srv_reply reply = srv_rpc_reply_to(call);
  int rc = srv_blend_fit(s, x, &spec, srv_conn_author(call->conn), reply, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
  free(targets);
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). */
static const srv_method methods[] = {
    {"blend.solve", srv_m_blend_solve, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"blend.fit", srv_m_blend_fit, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
};
const srv_method_table srv_blend_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
