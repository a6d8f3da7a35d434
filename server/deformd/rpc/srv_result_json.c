/*
 * srv_result_json.c — where the session layer's answers become JSON: each srv_result kind
 * (core/srv_reply.h) encoded as the JSON-RPC result docs/json-api.md shows, for the
 * asynchronous answers (srv_rpc.c's reply) and for history.revert's.
 *
 * Floats the session applies as floats (weights, the pivot) print as srv_json_float does;
 * everything else is a cJSON number as it always was.
 *
 * DOES NOT decide anything or hold an answer until it is committed (srv_rpc.c does), and does
 * not build the clip report anim.compress answers with (the clip keeps it as stored JSON,
 * srv_anim_compress.c).
 */
#include <stdint.h>

#include <cjson/cJSON.h>
#include "dfm.h"
#include "srv_json.h"
#include "srv_author.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"
#include "srv_history.h"
#include "srv_gesture.h"
#include "srv_brush.h"
#include "srv_blend.h"
#include "srv_anim.h"
#include "srv_mask.h"
#include "srv_texclip.h"
#include "srv_result_json.h"

static cJSON *gesture_begun(const srv_gesture_begun *b) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "gesture", b->gesture);
  cJSON_AddStringToObject(r, "mode", dfm_mode_name(b->mode));
  cJSON_AddStringToObject(r, "border", b->smooth_border ? "smooth" : "sharp");
  cJSON_AddNumberToObject(r, "region_vertices", b->region_vertices);
  cJSON_AddNumberToObject(r, "free", b->free);
  cJSON_AddNumberToObject(r, "pinned", b->pinned);
  cJSON_AddNumberToObject(r, "prefactor_ms", b->prefactor_ms);
  cJSON_AddBoolToObject(r, "multires", b->multires);
  if (b->multires) cJSON_AddNumberToObject(r, "proxy_vertices", b->proxy_vertices);
  if (b->multires) cJSON_AddBoolToObject(r, "proxy_reused", b->proxy_reused);
  if (b->mesh_order) cJSON_AddTrueToObject(r, "mesh_order");
  if (b->mesh_analysis) cJSON_AddTrueToObject(r, "mesh_analysis");
  if (b->measure_exact) cJSON_AddTrueToObject(r, "measure_exact");
  cJSON *pivot = cJSON_AddArrayToObject(r, "pivot");
  for (int k = 0; k < 3; k++) cJSON_AddItemToArray(pivot, srv_json_float((float)b->pivot[k]));
  return r;
}

/* {"version", "exact_distance": {...}}: measured, or not with the reason. */
static cJSON *gesture_ended(const srv_gesture_ended *e) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)e->version);
  cJSON *d = cJSON_AddObjectToObject(r, "exact_distance");
  cJSON_AddBoolToObject(d, "measured", e->measured);
  if (!e->measured) {
    cJSON_AddStringToObject(d, "reason", e->reason);
    return r;
  }
  cJSON_AddNumberToObject(d, "drags", e->drags);
  cJSON_AddNumberToObject(d, "max_over_diag", e->max_over_diag);
  cJSON_AddNumberToObject(d, "rms_over_diag", e->rms_over_diag);
  cJSON_AddNumberToObject(d, "max", e->max_distance);
  if (e->drags) {
    cJSON_AddNumberToObject(d, "exact_prefactor_ms", e->exact_prefactor_ms);
    cJSON_AddNumberToObject(d, "exact_replay_ms", e->exact_replay_ms);
  }
  return r;
}

static cJSON *brush_stroked(const srv_brush_stroked *k) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)k->version);
  cJSON_AddNumberToObject(r, "moved_vertices", k->moved_vertices);
  cJSON_AddNumberToObject(r, "dabs", k->dabs);
  return r;
}

/* {name: weight} of the solved targets, as floats (what is applied). */
static cJSON *blend_weights(const srv_blend_weights *w) {
  cJSON *o = cJSON_CreateObject();
  for (uint32_t i = 0; i < w->count; i++)
    cJSON_AddItemToObject(o, w->session->mesh->targets[w->targets[i]].name, srv_json_float((float)w->w[i]));
  return o;
}

static cJSON *blend_solved(const srv_blend_solved *b) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)b->version);
  cJSON_AddItemToObject(r, "weights", blend_weights(&b->weights));
  cJSON_AddNumberToObject(r, "residual", b->residual);
  cJSON_AddNumberToObject(r, "iterations", b->iterations);
  cJSON_AddNumberToObject(r, "active", b->active);
  return r;
}

static cJSON *blend_fitted(const srv_blend_fitted *b) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddItemToObject(r, "weights", blend_weights(&b->weights));
  cJSON_AddNumberToObject(r, "rms", b->rms);
  cJSON_AddNumberToObject(r, "max_error", b->max_error);
  cJSON_AddNumberToObject(r, "max_vertex", b->max_vertex);
  cJSON_AddNumberToObject(r, "iterations", b->iterations);
  cJSON_AddNumberToObject(r, "active", b->active);
  if (b->applied) cJSON_AddNumberToObject(r, "version", (double)b->version);
  return r;
}

static cJSON *history(srv_server *s, const srv_history_result *res, uint32_t author) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)res->version);
  cJSON_AddStringToObject(r, "author", srv_authors_name(&s->authors, author));
  if (res->step) {
    cJSON_AddNumberToObject(r, "step", (double)res->step);
    cJSON_AddStringToObject(r, "kind", srv_history_cause_name(res->cause));
    cJSON_AddNumberToObject(r, "step_first_version", (double)res->step_first_version);
    cJSON_AddNumberToObject(r, "step_last_version", (double)res->step_last_version);
  }
  cJSON_AddNumberToObject(r, "restored", res->restored);
  cJSON_AddNumberToObject(r, "skipped", res->skipped);
  cJSON_AddNumberToObject(r, "overlapped", res->overlapped);
  return r;
}

static cJSON *mask_done(const srv_mask_done *m) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)m->version);
  cJSON_AddNumberToObject(r, "step", (double)m->step);
  cJSON_AddNumberToObject(r, "changed", m->changed);
  cJSON_AddNumberToObject(r, "masked", m->masked);
  if (m->dabs) cJSON_AddNumberToObject(r, "dabs", m->dabs);
  return r;
}

cJSON *srv_result_json(srv_server *s, const srv_result *r) {
  switch (r->kind) {
    case SRV_RESULT_VERSION: {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "version", (double)r->version);
      return o;
    }
    case SRV_RESULT_GESTURE_BEGUN: return gesture_begun(r->gesture_begun);
    case SRV_RESULT_BRUSH_STROKE: return brush_stroked(r->brush_stroked);
    case SRV_RESULT_BLEND_SOLVE: return blend_solved(r->blend_solved);
    case SRV_RESULT_BLEND_FIT: return blend_fitted(r->blend_fitted);
    case SRV_RESULT_ANIM_COMPRESS: return cJSON_Duplicate(r->compressed->report, 1);
    case SRV_RESULT_HISTORY: return history(s, r->history.result, r->history.author);
    case SRV_RESULT_MASK: return mask_done(r->mask);
    case SRV_RESULT_TEXCLIP: return cJSON_Duplicate(r->texclip->report, 1);
    case SRV_RESULT_GESTURE_ENDED: return gesture_ended(r->gesture_ended);
  }
  return NULL;
}
