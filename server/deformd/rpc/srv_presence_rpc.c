/*
 * srv_presence_rpc.c — presence over JSON-RPC (docs/json-api.md, "presence.list" and
 * "presence.set"): who is in a session, and a JSON client's own cursor and camera.
 *
 * presence.list needs only the viewer role: anyone who may watch a session sees its
 * participants' author names. presence.set makes the calling connection a participant (client
 * kind "json") until it closes; it changes no state of the session, bumps no version and is
 * not stored, so it is not an EDITS method (it works while the store cannot write).
 *
 * DOES NOT keep participants (session/srv_presence.c) or send frames.
 */
#include <stdio.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "proto.h"
#include "proto_presence.h"
#include "srv_error.h"
#include "srv_json.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_access.h"
#include "srv_session.h"
#include "srv_presence.h"
#include "srv_rpc.h"
#include "srv_methods.h"

static const char *const client_names[PROTO_CLIENT_KIND_COUNT] = {"unknown", "view", "page", "tool", "json"};
/* Tool names, PROTO_TOOL_* order: none, deform, then the brushes of EDIT BRUSH in its numbering
 * (grab 0, inflate 1, smooth 2, flatten 3, pinch 4, draw 5, crease 6, layer 7). */
static const char *const tool_names[PROTO_TOOL_MAX + 1] = {"none", "deform", "grab", "inflate", "smooth", "flatten",
                                                           "pinch", "draw", "crease", "layer"};

static cJSON *vec3(const float *v) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; k < 3; k++) cJSON_AddItemToArray(a, srv_json_float(v[k]));
  return a;
}

static cJSON *participant_json(const srv_participant_view *v) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", v->id);
  cJSON_AddStringToObject(o, "author", v->author);
  cJSON_AddStringToObject(o, "role", v->role == PROTO_ROLE_EDITOR ? "editor" : "viewer");
  cJSON_AddStringToObject(o, "client", client_names[v->client < PROTO_CLIENT_KIND_COUNT ? v->client : 0]);
  cJSON_AddBoolToObject(o, "editing", (v->flags & PROTO_PRES_EDITING) != 0);
  cJSON_AddBoolToObject(o, "private", (v->flags & PROTO_PRES_PRIVATE) != 0);
  cJSON_AddBoolToObject(o, "remote", (v->flags & PROTO_PRES_REMOTE) != 0);
  cJSON_AddNumberToObject(o, "idle_ms", (double)v->idle_ms);
  if (v->has_state && (v->state.flags & PROTO_PRES_CURSOR)) {
    cJSON *c = cJSON_AddObjectToObject(o, "cursor");
    cJSON_AddItemToObject(c, "hit", vec3(v->state.hit));
    cJSON_AddItemToObject(c, "normal", vec3(v->state.normal));
    cJSON_AddItemToObject(c, "radius", srv_json_float(v->state.radius));
    cJSON_AddStringToObject(c, "tool", tool_names[v->state.tool <= PROTO_TOOL_MAX ? v->state.tool : 0]);
  }
  if (v->has_state && (v->state.flags & PROTO_PRES_CAMERA)) {
    cJSON *c = cJSON_AddObjectToObject(o, "camera");
    cJSON_AddItemToObject(c, "eye", vec3(v->state.eye));
    cJSON_AddItemToObject(c, "target", vec3(v->state.target));
    cJSON_AddItemToObject(c, "fov", srv_json_float(v->state.fov));
  }
  return o;
}

static void m_presence_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  cJSON *res = cJSON_CreateObject();
  cJSON_AddStringToObject(res, "session", x->name);
  cJSON *list = cJSON_AddArrayToObject(res, "participants");
  uint64_t now = uv_now(s->loop);
  srv_participant_view v;
  for (uint32_t i = 0; srv_presence_at(x, i, now, &v) == 0; i++) cJSON_AddItemToArray(list, participant_json(&v));
  srv_rpc_reply(call, res);
}

/* Three finite numbers at obj[key] into out; -1 after answering the call. */
static int read_vec3(srv_rpc_call *call, const cJSON *obj, const char *where, const char *key, float *out) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s.%s\" must be an array of 3 numbers", where, key);
    return -1;
  }
  for (int k = 0; k < 3; k++) {
    const cJSON *e = cJSON_GetArrayItem(a, k);
    if (!cJSON_IsNumber(e) || !(e->valuedouble > -1e30 && e->valuedouble < 1e30)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s.%s\" must be an array of 3 finite numbers", where, key);
      return -1;
    }
    out[k] = (float)e->valuedouble;
  }
  return 0;
}

static int read_cursor(srv_rpc_call *call, const cJSON *c, proto_presence_state *st) {
  if (!cJSON_IsObject(c)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"cursor\" must be an object {hit, normal, radius, tool}");
    return -1;
  }
  if (read_vec3(call, c, "cursor", "hit", st->hit) || read_vec3(call, c, "cursor", "normal", st->normal)) return -1;
  double r = 0;
  int has = srv_rpc_number(call, c, "radius", &r);
  if (has < 0) return -1;
  if (r < 0 || r > 1e30) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"cursor.radius\" must be a number >= 0");
    return -1;
  }
  st->radius = (float)r;
  const cJSON *tool = cJSON_GetObjectItemCaseSensitive(c, "tool");
  st->tool = PROTO_TOOL_NONE;
  if (tool) {
    int found = -1;
    for (int i = 0; cJSON_IsString(tool) && i <= PROTO_TOOL_MAX; i++)
      if (strcmp(tool->valuestring, tool_names[i]) == 0) found = i;
    if (found < 0) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"cursor.tool\" must be one of none, deform, grab, inflate, "
                                       "smooth, flatten, pinch, draw, crease, layer");
      return -1;
    }
    st->tool = (uint8_t)found;
  }
  st->flags |= PROTO_PRES_CURSOR;
  return 0;
}

static int read_camera(srv_rpc_call *call, const cJSON *c, proto_presence_state *st) {
  if (!cJSON_IsObject(c)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"camera\" must be an object {eye, target, fov}");
    return -1;
  }
  if (read_vec3(call, c, "camera", "eye", st->eye) || read_vec3(call, c, "camera", "target", st->target)) return -1;
  double fov = 0;
  int has = srv_rpc_number(call, c, "fov", &fov);
  if (has < 0) return -1;
  if (!has || !(fov > 0 && fov < 3.14159)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"camera.fov\" must be a vertical field of view in radians, "
                                     "between 0 and pi");
    return -1;
  }
  st->fov = (float)fov;
  st->flags |= PROTO_PRES_CAMERA;
  return 0;
}

static void m_presence_set(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  proto_presence_state st;
  memset(&st, 0, sizeof(st));
  const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(params, "cursor");
  const cJSON *camera = cJSON_GetObjectItemCaseSensitive(params, "camera");
  if (cursor && !cJSON_IsNull(cursor) && read_cursor(call, cursor, &st)) return;
  if (camera && !cJSON_IsNull(camera) && read_camera(call, camera, &st)) return;
  int priv = -1, r = srv_rpc_bool(call, params, "private", &priv);
  if (r < 0) return;
  if (!r) priv = -1;
  srv_conn *c = call->conn;
  uint8_t role = srv_access_allows(s, &c->grant, SRV_ROLE_EDITOR, x->name) ? PROTO_ROLE_EDITOR : PROTO_ROLE_VIEWER;
  /* Without cursor and camera, the state is kept unless both were given as null (shared nothing). */
  int clear = cursor && camera && cJSON_IsNull(cursor) && cJSON_IsNull(camera);
  int give = st.flags != 0 || clear;
  if (srv_presence_set(x, c, role, give ? &st : NULL, priv) != 0) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  cJSON *res = cJSON_CreateObject();
  cJSON_AddNumberToObject(res, "id", c->id);
  srv_rpc_reply(call, res);
}

static const srv_method methods[] = {
    {"presence.list", m_presence_list, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"presence.set", m_presence_set, SRV_METHOD_ON, SRV_ROLE_VIEWER},
};
const srv_method_table srv_presence_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
