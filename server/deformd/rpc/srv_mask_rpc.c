/*
 * srv_mask_rpc.c — the JSON-RPC methods of the caller's own mask (docs/json-api.md §3d):
 * mask.stroke, mask.clear, mask.invert, mask.auto and mask.get.
 *
 * Each method checks its params with the readers of srv_rpc.c and hands one request to
 * srv_mask.c, which answers through an srv_reply once the step is made (and, with a store,
 * committed). A mask is the caller's: the author the connection named (hello or its token).
 *
 * DOES NOT compute masks (server/solve/dfm_mask.c) or keep them (session/srv_mask.c).
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
#include "dfm_mask.h"
#include "srv_error.h"
#include "srv_json.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_mask.h"
#include "srv_rpc.h"
#include "srv_methods.h"

static void ask(srv_server *s, srv_rpc_call *call, srv_session *x, srv_mask_spec *spec) {
  char err[256];
  spec->author = srv_conn_author(call->conn);
  int rc = srv_mask_request(s, x, spec, srv_rpc_reply_to(call), err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

static void srv_m_mask_stroke(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  srv_mask_spec spec = {.kind = SRV_MASK_STROKE, .tool = DFM_MASK_PAINT, .falloff = DFM_FALLOFF_SMOOTHSTEP};
  const cJSON *tool = cJSON_GetObjectItemCaseSensitive(params, "tool");
  if (tool && (!cJSON_IsString(tool) || dfm_mask_tool_parse(tool->valuestring, &spec.tool) != 0)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"tool\" must be paint, erase or smooth");
    return;
  }
  const cJSON *falloff = cJSON_GetObjectItemCaseSensitive(params, "falloff");
  if (falloff && (!cJSON_IsString(falloff) || dfm_falloff_parse(falloff->valuestring, &spec.falloff) != 0)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"falloff\" must be smoothstep, linear, gaussian or constant");
    return;
  }
  double radius = -1, strength = 1.0;
  if (srv_rpc_number(call, params, "radius", &radius) < 0 || srv_rpc_number_in(call, params, "strength", 0.0, 1.0, &strength) < 0)
    return;
  dfm_brush_sample *samples = NULL;
  int n = srv_rpc_samples(call, params, radius, strength, 0.0, 1.0, 0, &samples);
  if (n < 0) return;
  spec.samples = samples;
  spec.count = (uint32_t)n;
  ask(s, call, x, &spec);
  free(samples);
}

static void srv_m_mask_clear(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  ask(s, call, x, &(srv_mask_spec){.kind = SRV_MASK_CLEAR});
}

static void srv_m_mask_invert(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  ask(s, call, x, &(srv_mask_spec){.kind = SRV_MASK_INVERT});
}

static void srv_m_mask_auto(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  srv_mask_spec spec = {.kind = SRV_MASK_AUTO, .angle = 60.0 * M_PI / 180.0, .rings = 1};
  const cJSON *mode = cJSON_GetObjectItemCaseSensitive(params, "mode");
  static const char *const modes[] = {"topology", "normal", "boundary"};
  int m = -1;
  for (int k = 0; k < 3 && cJSON_IsString(mode); k++)
    if (strcmp(mode->valuestring, modes[k]) == 0) m = k;
  if (m < 0) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"mode\" must be topology, normal or boundary");
    return;
  }
  spec.mode = (srv_mask_auto)m;
  const cJSON *combine = cJSON_GetObjectItemCaseSensitive(params, "combine");
  if (combine && (!cJSON_IsString(combine) ||
                  (strcmp(combine->valuestring, "replace") != 0 && strcmp(combine->valuestring, "add") != 0))) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"combine\" must be replace or add");
    return;
  }
  spec.add = combine && strcmp(combine->valuestring, "add") == 0;
  double vertex = -1, angle = 60.0, rings = 1;
  if (srv_rpc_number_in(call, params, "vertex", 0, 4294967295.0, &vertex) < 0 || srv_rpc_number_in(call, params, "angle", 0, 180, &angle) < 0 ||
      srv_rpc_number_in(call, params, "rings", 1, 1000, &rings) < 0)
    return;
  if (spec.mode != SRV_MASK_AUTO_BOUNDARY && (vertex < 0 || vertex != floor(vertex))) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: mode %s needs \"vertex\": the picked vertex", modes[m]);
    return;
  }
  if (rings != floor(rings)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"rings\" must be a whole number");
    return;
  }
  spec.vertex = vertex < 0 ? 0 : (uint32_t)vertex;
  spec.angle = angle * M_PI / 180.0;
  spec.rings = (uint32_t)rings;
  ask(s, call, x, &spec);
}

/* The caller's own mask: every render vertex with a value above 0. */
static void srv_m_mask_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t author = srv_conn_author(call->conn);
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)x->version);
  cJSON *vs = cJSON_AddArrayToObject(r, "vertices"), *ms = cJSON_AddArrayToObject(r, "values");
  for (uint32_t v = 0; v < x->mesh->vertex_count; v++) {
    float m = srv_mask_value(x, author, v);
    if (!(m > 0.0f)) continue;
    cJSON_AddItemToArray(vs, cJSON_CreateNumber(v));
    cJSON_AddItemToArray(ms, srv_json_float(m));
  }
  srv_rpc_reply(call, r);
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). A mask changes
 * no shape, but it is an editor's tool: viewers may only read their own (empty) mask. */
static const srv_method methods[] = {
    {"mask.get", srv_m_mask_get, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"mask.stroke", srv_m_mask_stroke, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"mask.clear", srv_m_mask_clear, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"mask.invert", srv_m_mask_invert, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"mask.auto", srv_m_mask_auto, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
};
const srv_method_table srv_mask_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
