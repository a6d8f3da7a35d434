/*
 * srv_anim_rpc.c — the anim.* JSON-RPC methods (docs/json-api.md): their params checked, then
 * handed to the player (srv_anim_play.c) or the compression job (srv_anim_compress.c).
 *
 * DOES NOT play, record or compress anything itself.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "mesh.h"
#include "srv_error.h"
#include "srv_json_text.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_anim.h"
#include "srv_rpc.h"
#include "srv_methods.h"

static srv_clip *want_clip(srv_session *s, srv_rpc_call *call, cJSON *params, const char *key) {
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!cJSON_IsString(n)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be a clip name", key);
    return NULL;
  }
  srv_clip *c = srv_anim_find_clip(s->anim, n->valuestring);
  char q[SRV_QUOTE_BUF];
  if (!c) srv_rpc_error(call, SRV_ENOCLIP, "unknown clip '%s' in session '%s' (anim.list shows them)",
                        srv_json_quote(n->valuestring, q), s->name);
  return c;
}

/* A clip can be played once it is compressed (frame clips) or at once (weight clips). */
static int playable(srv_rpc_call *call, const srv_clip *c) {
  if (c->kind == CLIP_WEIGHTS || c->compressed) return 1;
  srv_rpc_error(call, SRV_ERANGE, "clip '%s' is not compressed yet: call anim.compress first", c->name);
  return 0;
}

static const char *kind_name(int kind) {
  return kind == CLIP_WEIGHTS ? "weights" : kind == CLIP_RECORDED ? "recorded" : "keyframes";
}

static cJSON *player_json(const srv_session *s) {
  const srv_anim *a = s->anim;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddBoolToObject(o, "playing", a->playing);
  if (a->cur.clip) {
    cJSON_AddStringToObject(o, "clip", a->cur.clip->name);
    cJSON_AddNumberToObject(o, "frame", srv_anim_clip_index(a->cur.clip, a->cur.t));
    cJSON_AddNumberToObject(o, "time", a->cur.t);
  } else {
    cJSON_AddNullToObject(o, "clip");
  }
  if (a->next.clip) {
    cJSON_AddStringToObject(o, "blending_to", a->next.clip->name);
    cJSON_AddNumberToObject(o, "blend", a->fade_duration > 0 ? fmin(1, a->fade_elapsed / a->fade_duration) : 1);
  }
  cJSON_AddNumberToObject(o, "speed", a->speed);
  cJSON_AddBoolToObject(o, "loop", a->loop);
  cJSON_AddBoolToObject(o, "recording", a->recording);
  if (a->recording) {
    cJSON_AddStringToObject(o, "recording_clip", a->rec_name);
    cJSON_AddNumberToObject(o, "recorded_frames", a->rec_count);
  }
  cJSON_AddNumberToObject(o, "version", (double)s->version);
  return o;
}

static void reply_player(srv_rpc_call *call, const srv_session *s) { srv_rpc_reply(call, player_json(s)); }

/* Answers the call with the player's state, or with the error an operation returned. */
static void answer(srv_rpc_call *call, const srv_session *s, int rc, const char *err) {
  if (rc) srv_rpc_error(call, rc, "%s", err);
  else reply_player(call, s);
}

static void srv_m_anim_list(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  cJSON *r = cJSON_CreateObject(), *clips = cJSON_AddArrayToObject(r, "clips");
  for (const srv_clip *c = s->anim->clips; c; c = c->next) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddStringToObject(o, "kind", kind_name(c->kind));
    cJSON_AddNumberToObject(o, c->kind == CLIP_WEIGHTS ? "keys" : "frames", c->frame_count);
    if (c->kind != CLIP_WEIGHTS) cJSON_AddNumberToObject(o, "fps", c->fps);
    if (c->loop_frames) cJSON_AddNumberToObject(o, "loop_frames", c->loop_frames);
    if (c->play_once) cJSON_AddBoolToObject(o, "play_once", 1);
    cJSON_AddNumberToObject(o, "duration", srv_anim_clip_duration(c));
    if (c->report) cJSON_AddItemToObject(o, "compressed", cJSON_Duplicate(c->report, 1));
    else cJSON_AddBoolToObject(o, "compressed", 0);
    cJSON_AddItemToArray(clips, o);
  }
  cJSON_AddItemToObject(r, "player", player_json(s));
  srv_rpc_reply(call, r);
}

/* params.regions: 1 to 64 arrays of vertex indices; vertices in none form one more region.
 * Returns 0 (absent: *out NULL), 1, or -1 after answering. *out is malloc'ed. */
static int regions_param(srv_rpc_call *call, const srv_session *s, cJSON *params, uint32_t **out, uint32_t *count) {
  const cJSON *regions = cJSON_GetObjectItemCaseSensitive(params, "regions");
  *out = NULL;
  if (!regions) return 0;
  uint32_t V = s->mesh->vertex_count, nr = (uint32_t)cJSON_GetArraySize(regions);
  uint32_t *region_of = malloc(sizeof(uint32_t) * (V + 1));
  if (!cJSON_IsArray(regions) || nr == 0 || nr > 64 || !region_of) {
    free(region_of);
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"regions\" must be 1 to 64 arrays of vertex indices");
    return -1;
  }
  for (uint32_t v = 0; v < V; v++) region_of[v] = nr;
  uint32_t g = 0;
  const cJSON *reg;
  cJSON_ArrayForEach(reg, regions) {
    const cJSON *v;
    if (!cJSON_IsArray(reg)) goto bad_region;
    cJSON_ArrayForEach(v, reg) {
      if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= V || v->valuedouble != floor(v->valuedouble))
        goto bad_region;
      if (region_of[(uint32_t)v->valuedouble] != nr) {
        srv_rpc_error(call, SRV_EPARAMS, "invalid params: vertex %u is in two regions", (uint32_t)v->valuedouble);
        free(region_of);
        return -1;
      }
      region_of[(uint32_t)v->valuedouble] = g;
    }
    g++;
  }
  *out = region_of;
  *count = nr + 1;
  return 1;
bad_region:
  srv_rpc_error(call, SRV_EPARAMS, "invalid params: a region must be an array of vertex indices below %u", V);
  free(region_of);
  return -1;
}

static void srv_m_anim_compress(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_clip *c = want_clip(s, call, params, "clip");
  if (!c) return;
  double comps = 0, maxerr = 0;
  int hc = srv_rpc_number(call, params, "components", &comps), he = 0;
  if (hc < 0 || (he = srv_rpc_number(call, params, "max_error", &maxerr)) < 0) return;
  if ((hc && he) || (hc && (comps < 1 || comps > 65000 || comps != floor(comps))) || (he && !(maxerr > 0))) {
    srv_rpc_error(call, SRV_EPARAMS,
                  "invalid params: give either \"components\" (an integer >= 1) or \"max_error\" (> 0, relative to the "
                  "bounding-box diagonal), not both");
    return;
  }
  if (!hc && !he) maxerr = 0.005; /* half a percent of the diagonal */
  double bits = 8;
  if (srv_rpc_number(call, params, "weight_bits", &bits) < 0) return;
  if (bits != 8 && bits != 16) {
    srv_rpc_error(call, SRV_EPARAMS,
                  "invalid params: \"weight_bits\" must be 8 (8-bit weights in the frames that stay within the error "
                  "budget, the default) or 16 (16-bit weights in every frame)");
    return;
  }
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(params, "name");
  if (prefix && (!cJSON_IsString(prefix) || !prefix->valuestring[0] || strlen(prefix->valuestring) > 200)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"name\" must be a target name prefix of 1 to 200 bytes");
    return;
  }
  srv_anim_compress_spec spec = {(uint32_t)comps, maxerr, (int)bits, prefix ? prefix->valuestring : c->name, NULL, 0,
                                 srv_conn_author(call->conn)};
  if (regions_param(call, s, params, &spec.region_of, &spec.region_count) < 0) return;
  char err[512];
  int rc = srv_anim_compress(srv, s, c, &spec, srv_rpc_reply_to(call), err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

static void srv_m_anim_play(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_clip *c = want_clip(s, call, params, "clip");
  if (!c || !playable(call, c)) return;
  double speed = s->anim->speed, frame = 0;
  int loop = s->anim->loop;
  if (srv_rpc_number(call, params, "speed", &speed) < 0 || srv_rpc_bool(call, params, "loop", &loop) < 0 ||
      srv_rpc_number(call, params, "frame", &frame) < 0)
    return;
  if (!(speed > 0 && speed <= 100) || frame < 0 || frame >= c->frame_count) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: speed must be in (0, 100] and frame in [0, %u)",
                  c->frame_count);
    return;
  }
  char err[256];
  int rc = srv_anim_play(srv, s, c, speed, loop, (uint32_t)frame, err, sizeof(err));
  answer(call, s, rc, err);
}

static void srv_m_anim_pause(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim_pause(s);
  reply_player(call, s);
}

static void srv_m_anim_stop(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim_stop(srv, s);
  reply_player(call, s);
}

static void srv_m_anim_seek(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim *a = s->anim;
  if (!a->cur.clip) {
    srv_rpc_error(call, SRV_ERANGE, "nothing to seek in: no clip is playing or paused (anim.play)");
    return;
  }
  double frame = 0, time = 0;
  int hf = srv_rpc_number(call, params, "frame", &frame);
  int ht = hf < 0 ? -1 : srv_rpc_number(call, params, "time", &time);
  if (hf < 0 || ht < 0) return;
  const srv_clip *c = a->cur.clip;
  double d = srv_anim_clip_duration(c);
  if (hf == ht || (hf && (frame < 0 || frame >= c->frame_count)) || (ht && (time < 0 || time > d))) {
    srv_rpc_error(call, SRV_EPARAMS,
                  "invalid params: give \"frame\" in [0, %u) or \"time\" in [0, %g] seconds, one of them", c->frame_count,
                  d);
    return;
  }
  char err[256];
  int rc = srv_anim_seek(srv, s, hf ? srv_anim_clip_time(c, (uint32_t)frame) : time, err, sizeof(err));
  answer(call, s, rc, err);
}

static void srv_m_anim_speed(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  double speed = 0;
  int r = srv_rpc_number(call, params, "speed", &speed);
  if (r < 0) return;
  if (r == 0 || !(speed > 0 && speed <= 100)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"speed\" must be a number in (0, 100]");
    return;
  }
  s->anim->speed = speed;
  reply_player(call, s);
}

static void srv_m_anim_loop(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  int loop = 0, r = srv_rpc_bool(call, params, "loop", &loop);
  if (r < 0) return;
  if (r == 0) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"loop\" must be true or false");
    return;
  }
  s->anim->loop = loop;
  reply_player(call, s);
}

static void srv_m_anim_blend(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_clip *c = want_clip(s, call, params, "clip");
  if (!c || !playable(call, c)) return;
  double duration = 0.5;
  if (srv_rpc_number(call, params, "duration", &duration) < 0) return;
  if (!(duration >= 0 && duration <= 3600)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"duration\" must be in [0, 3600] seconds");
    return;
  }
  char err[256];
  int rc = srv_anim_crossfade(srv, s, c, duration, err, sizeof(err));
  answer(call, s, rc, err);
}

static void srv_m_anim_record_start(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "clip");
  double fps = 30, max_frames = 1800;
  if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > 200) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"clip\" must be the new clip's name (1 to 200 bytes)");
    return;
  }
  if (srv_rpc_number(call, params, "fps", &fps) < 0 || srv_rpc_number(call, params, "max_frames", &max_frames) < 0)
    return;
  if (!(fps >= 1 && fps <= 120) || !(max_frames >= 2 && max_frames <= 100000)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: fps must be in [1, 120] and max_frames in [2, 100000]");
    return;
  }
  char err[512];
  int rc = srv_anim_record_start(srv, s, name->valuestring, fps, (uint32_t)max_frames, err, sizeof(err));
  answer(call, s, rc, err);
}

static void srv_m_anim_record_stop(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_clip *c = NULL;
  char err[256];
  int rc = srv_anim_record_stop(s, &c, err, sizeof(err));
  if (rc) {
    srv_rpc_error(call, rc, "%s", err);
    return;
  }
  srv_anim_store_clip(srv, s, c);
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "clip", c->name);
  cJSON_AddNumberToObject(r, "frames", c->frame_count);
  cJSON_AddNumberToObject(r, "fps", c->fps);
  srv_rpc_reply(call, r);
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). */
static const srv_method methods[] = {
    {"anim.list", srv_m_anim_list, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"anim.play", srv_m_anim_play, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"anim.pause", srv_m_anim_pause, SRV_METHOD_ON, SRV_ROLE_EDITOR},
    {"anim.stop", srv_m_anim_stop, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"anim.seek", srv_m_anim_seek, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"anim.speed", srv_m_anim_speed, SRV_METHOD_ON, SRV_ROLE_EDITOR},
    {"anim.loop", srv_m_anim_loop, SRV_METHOD_ON, SRV_ROLE_EDITOR},
    {"anim.blend", srv_m_anim_blend, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"anim.record_start", srv_m_anim_record_start, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"anim.record_stop", srv_m_anim_record_stop, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"anim.compress", srv_m_anim_compress, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
};
const srv_method_table srv_anim_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
