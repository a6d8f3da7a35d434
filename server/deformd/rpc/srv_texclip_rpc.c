/*
 * srv_texclip_rpc.c — texclip.upload and texclip.list (docs/json-api.md "Animated texture
 * clips"): their params checked, then handed to the session's texture clips (srv_texclip.c),
 * whose job decodes and compresses on the pool.
 *
 * DOES NOT decode images or base64 here (the loop only copies the strings).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "srv_error.h"
#include "srv_server.h"
#include "srv_session.h"
#include "srv_texclip.h"
#include "srv_rpc.h"
#include "srv_methods.h"

/* {"components": n} or {"max_error": e} (colour units, 1/255 a step) into b; neither: `dflt`. */
static int budget_param(srv_rpc_call *call, const cJSON *o, const char *what, texpca_budget *b, double dflt) {
  double comps = 0, err = 0;
  int hc = srv_rpc_number(call, o, "components", &comps), he = 0;
  if (hc < 0 || (he = srv_rpc_number(call, o, "max_error", &err)) < 0) return -1;
  if ((hc && he) || (hc && (comps < 1 || comps > MESH_TEXCLIP_MAX_COMPONENTS || comps != floor(comps))) ||
      (he && !(err > 0 && err <= 2))) {
    srv_rpc_error(call, SRV_EPARAMS,
                  "invalid params: %s: give \"components\" (an integer 1 to %u) or \"max_error\" (> 0, the largest RGB "
                  "distance of a texel, colours in [0, 1]: 1/255 is one step), not both",
                  what, MESH_TEXCLIP_MAX_COMPONENTS);
    return -1;
  }
  *b = (texpca_budget){.components = hc ? (uint32_t)comps : 0, .max_error = hc ? 0 : he ? err : dflt};
  return 0;
}

static int windows_param(srv_rpc_call *call, const cJSON *params, srv_texclip_spec *spec) {
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(params, "windows");
  if (!ws) return 0;
  if (!cJSON_IsArray(ws) || cJSON_GetArraySize(ws) > (int)MESH_TEXCLIP_MAX_WINDOWS - 1) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"windows\" must be an array of at most %u objects",
                  MESH_TEXCLIP_MAX_WINDOWS - 1);
    return -1;
  }
  const cJSON *w;
  cJSON_ArrayForEach(w, ws) {
    uint32_t i = spec->rect_count;
    double r[4];
    static const char *const keys[4] = {"x", "y", "w", "h"};
    char what[32];
    snprintf(what, sizeof(what), "windows[%u]", i);
    for (int k = 0; k < 4; k++)
      if (srv_rpc_number_in(call, w, keys[k], 0, MESH_TEXCLIP_MAX_SIDE, &r[k]) != 1 || r[k] != floor(r[k])) {
        if (r[k] != floor(r[k]) || !cJSON_GetObjectItemCaseSensitive(w, keys[k]))
          srv_rpc_error(call, SRV_EPARAMS, "invalid params: %s needs integer \"x\", \"y\", \"w\", \"h\" in texels", what);
        return -1;
      }
    spec->rects[i] = (mesh_texclip_rect){(uint32_t)r[0], (uint32_t)r[1], (uint32_t)r[2], (uint32_t)r[3]};
    if (budget_param(call, w, what, &spec->budget[i + 1], spec->budget[0].max_error ? spec->budget[0].max_error : 2.0 / 255))
      return -1;
    spec->rect_count++;
  }
  return 0;
}

static int frames_param(srv_rpc_call *call, const cJSON *params, srv_texclip_spec *spec) {
  const cJSON *fr = cJSON_GetObjectItemCaseSensitive(params, "frames");
  int n = cJSON_IsArray(fr) ? cJSON_GetArraySize(fr) : -1;
  if (n < 2 || n > (int)SRV_TEXCLIP_MAX_FRAMES) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"frames\" must be an array of 2 to %u base64 PNG or JPEG files",
                  SRV_TEXCLIP_MAX_FRAMES);
    return -1;
  }
  spec->frames = calloc((size_t)n, sizeof(char *));
  if (!spec->frames) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return -1;
  }
  spec->frame_count = (uint32_t)n;
  const cJSON *f;
  uint32_t i = 0;
  cJSON_ArrayForEach(f, fr) {
    if (!cJSON_IsString(f)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: frames[%u] must be a base64 string", i);
      return -1;
    }
    spec->frames[i] = strdup(f->valuestring);
    if (!spec->frames[i++]) {
      srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
      return -1;
    }
  }
  return 0;
}

static void srv_m_texclip_upload(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
  const cJSON *clip = cJSON_GetObjectItemCaseSensitive(params, "clip");
  if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > PROTO_MAX_NAME ||
      !cJSON_IsString(clip)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"name\" (1 to %d bytes) and \"clip\" (the clip it follows, "
                  "anim.list) must be strings", PROTO_MAX_NAME);
    return;
  }
  srv_texclip_spec spec = {0};
  double fps = 30;
  if (srv_rpc_number_in(call, params, "fps", 0.1, 1000, &fps) < 0 ||
      budget_param(call, params, "the whole texture", &spec.budget[0], 2.0 / 255) || windows_param(call, params, &spec) ||
      frames_param(call, params, &spec)) {
    srv_texclip_spec_fini(&spec);
    return;
  }
  spec.fps = (float)fps;
  spec.name = strdup(name->valuestring);
  spec.follows = strdup(clip->valuestring);
  char err[512];
  int rc = spec.name && spec.follows ? srv_texclip_upload(srv, s, &spec, srv_rpc_reply_to(call), err, sizeof(err))
                                     : (snprintf(err, sizeof(err), "out of memory"), SRV_EINTERNAL);
  srv_texclip_spec_fini(&spec);
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

static void srv_m_texclip_list(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  cJSON *r = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(r, "texclips");
  for (const srv_texclip *t = srv_texclip_first(s); t; t = t->next) cJSON_AddItemToArray(a, cJSON_Duplicate(t->report, 1));
  srv_rpc_reply(call, r);
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). */
static const srv_method methods[] = {
    {"texclip.list", srv_m_texclip_list, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"texclip.upload", srv_m_texclip_upload, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
};
const srv_method_table srv_texclip_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
