/*
 * srv_anim_play.c — a session's animation player and recorder, on one server-wide timer.
 *
 * Playback (play, pause, seek, stop) streams what the player shows: for one compressed clip its
 * K weights as a quantised run (31 + K bytes in the frames whose 8-bit weights keep the clip
 * within its error budget, else 31 + 2K; chosen once, at compression, by pca_stream_choose);
 * for a weight clip, or during a crossfade between two clips (the motion-graph transition of
 * GPU Gems 3 ch. 15: a linear mix in weight space is a linear mix of shapes), plain weights.
 * A recording copies the session's weights each sample and shares one copy of the sculpt
 * offsets until they change.
 *
 * DOES NOT evaluate shapes or decompose anything on the loop thread (srv_anim_compress.c does,
 * on the pool), or parse requests (srv_anim_rpc.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pca_stream.h"
#include <uv.h>
#include "mesh.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_author.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_history.h"
#include "srv_anim.h"
#include "srv_texclip.h"

/* ---- the timer -------------------------------------------------------------------------------- */


/* The history step of the playback now running: taken when its first operation applies, so
 * that step ids follow the versions (a step reserved earlier would sort before steps applied
 * in between). */
static uint64_t play_step(srv_session *s) {
  if (!s->anim->play_step && s->history) s->anim->play_step = srv_history_new_step_id(s);
  return s->anim->play_step;
}
static void on_anim_tick(uv_timer_t *t);

static void kick(srv_server *srv) {
  if (srv->anim_timer_on || srv->stopping) return;
  if (!srv->anim_timer_init) {
    uv_timer_init(srv->loop, &srv->anim_timer);
    srv->anim_timer.data = srv;
    srv->anim_timer_init = 1;
  }
  srv->anim_last_ms = uv_now(srv->loop);
  uv_timer_start(&srv->anim_timer, on_anim_tick, ANIM_TICK_MS, ANIM_TICK_MS);
  srv->anim_timer_on = 1;
}

void srv_anim_shutdown(srv_server *srv) {
  if (!srv->anim_timer_init) return;
  uv_timer_stop(&srv->anim_timer);
  uv_close((uv_handle_t *)&srv->anim_timer, NULL);
  srv->anim_timer_init = srv->anim_timer_on = 0;
}

/* ---- streaming a frame -------------------------------------------------------------------------- */

/* Adds the weights of `c` at index `i`, scaled by `mix`, to (idx, val). */
static void clip_weights(const srv_session *s, const srv_clip *c, uint32_t i, float mix, uint32_t *idx, float *val,
                         uint32_t *n) {
  if (c->kind == CLIP_WEIGHTS) {
    const float *w = c->wclip->weights + (size_t)i * c->wclip_targets;
    for (uint32_t t = 0; t < c->wclip_targets; t++) {
      if (s->targets[t].driver_count) continue; /* driven by others: not ours to set */
      idx[*n] = t, val[(*n)++] = mix * w[t];
    }
    return;
  }
  idx[*n] = c->mean_target, val[(*n)++] = mix;
  const float *w = c->frame_weights + (size_t)i * c->components;
  for (uint32_t k = 0; k < c->components; k++) idx[*n] = c->first_component + k, val[(*n)++] = mix * w[k];
}

static uint32_t clip_width(const srv_clip *c) {
  return c->kind == CLIP_WEIGHTS ? c->wclip_targets : c->components + 1;
}

static uint64_t show_weights(srv_server *srv, srv_session *s);

/* Streams what the player shows now: one op, and the texture clips that follow its clips.
 * Returns the new version or 0. */
static uint64_t show(srv_server *srv, srv_session *s) {
  uint64_t v = show_weights(srv, s);
  srv_texclip_show(srv, s);
  return v;
}

static uint64_t show_weights(srv_server *srv, srv_session *s) {
  srv_anim *a = s->anim;
  srv_clip *c = a->cur.clip;
  uint32_t i = srv_anim_clip_index(c, a->cur.t);
  a->cur.shown = i;
  if (!a->next.clip && c->kind != CLIP_WEIGHTS) {
    /* One compressed clip: its K weights as a quantised run (the mean stays at 1). */
    int16_t *q = malloc(sizeof(int16_t) * (c->components + 1));
    float scale;
    uint64_t v = 0;
    if (q && pca_stream_quantize(c->frame_weights + (size_t)i * c->components, c->components, c->frame_narrow[i], q,
                                 &scale) == 0) {
      srv_op op = {.kind = SRV_OP_SET_WEIGHTS_QRUN, .author = SRV_AUTHOR_PLAYER, .cause = SRV_CAUSE_ANIM_PLAY,
                   .step = play_step(s), .count = c->components, .first = c->first_component, .wq = q,
                   .wscale = scale};
      char why[256];
      if (srv_session_check(s, &op, why, sizeof(why)) == 0) v = srv_session_apply(srv, s, &op);
      else srv_log(SRV_LOG_WARN, "session %s: clip %s frame %u: %s", s->name, c->name, i, why);
    }
    free(q);
    return v;
  }
  /* A weight clip, or a crossfade: plain weights (both clips' targets, mixed). */
  uint32_t cap = clip_width(c) + (a->next.clip ? clip_width(a->next.clip) : 0) + 1, n = 0;
  uint32_t *idx = malloc(sizeof(uint32_t) * cap);
  float *val = malloc(sizeof(float) * cap);
  uint64_t v = 0;
  if (idx && val) {
    double alpha = a->next.clip ? (a->fade_duration > 0 ? a->fade_elapsed / a->fade_duration : 1.0) : 0.0;
    if (alpha > 1) alpha = 1;
    clip_weights(s, c, i, (float)(1.0 - alpha), idx, val, &n);
    if (a->next.clip) {
      uint32_t j = srv_anim_clip_index(a->next.clip, a->next.t);
      a->next.shown = j;
      clip_weights(s, a->next.clip, j, (float)alpha, idx, val, &n);
    }
    /* Two clips on the same targets (two weight clips) mix: one entry per target, the sum,
     * held to the target's range. */
    int32_t *pos = malloc(sizeof(int32_t) * (s->mesh->target_count + 1));
    uint32_t m = 0;
    if (pos) {
      memset(pos, 0xff, sizeof(int32_t) * s->mesh->target_count);
      for (uint32_t e = 0; e < n; e++) {
        uint32_t t = idx[e];
        if (pos[t] < 0) pos[t] = (int32_t)m, idx[m] = t, val[m++] = val[e];
        else val[pos[t]] += val[e];
      }
      for (uint32_t e = 0; e < m; e++) {
        const srv_target *st = &s->targets[idx[e]];
        val[e] = val[e] < st->min ? st->min : val[e] > st->max ? st->max : val[e];
      }
      free(pos);
    }
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = SRV_AUTHOR_PLAYER, .cause = SRV_CAUSE_ANIM_PLAY,
                 .step = play_step(s), .count = pos ? m : 0, .indices = idx, .values = val};
    char why[256];
    if (srv_session_check(s, &op, why, sizeof(why)) == 0) v = srv_session_apply(srv, s, &op);
    else srv_log(SRV_LOG_WARN, "session %s: clip %s frame %u: %s", s->name, c->name, i, why);
  }
  free(idx);
  free(val);
  return v;
}

/* Sets every target of `c` to 0 (the mean too): the clip's contribution leaves the shape. */
static uint64_t clear_clip(srv_server *srv, srv_session *s, const srv_clip *c) {
  uint32_t n = 0, cap = clip_width(c) + 1;
  uint32_t *idx = malloc(sizeof(uint32_t) * cap);
  float *val = malloc(sizeof(float) * cap);
  uint64_t v = 0;
  if (idx && val) {
    if (c->kind == CLIP_WEIGHTS) {
      for (uint32_t t = 0; t < c->wclip_targets; t++)
        if (!s->targets[t].driver_count && s->targets[t].min <= 0 && s->targets[t].max >= 0) idx[n] = t, val[n++] = 0;
    } else {
      idx[n] = c->mean_target, val[n++] = 0;
      for (uint32_t k = 0; k < c->components; k++) idx[n] = c->first_component + k, val[n++] = 0;
    }
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = SRV_AUTHOR_PLAYER, .cause = SRV_CAUSE_ANIM_PLAY,
                 .step = play_step(s), .count = n, .indices = idx, .values = val};
    char why[256];
    if (n && srv_session_check(s, &op, why, sizeof(why)) == 0) v = srv_session_apply(srv, s, &op);
  }
  free(idx);
  free(val);
  return v;
}

/* Advances a track by dt seconds; returns 0 when a non-looping track ran off its end. */
static int advance(anim_track *tr, double dt, int loop) {
  double d = srv_anim_clip_duration(tr->clip);
  tr->t += dt;
  if (d <= 0) {
    tr->t = 0;
    return 1;
  }
  if (tr->t < d) return 1;
  if (loop && !tr->clip->play_once) {
    /* A clip whose animation.cfg loops only its last frames starts them again, not itself. */
    double from = tr->clip->loop_frames ? (tr->clip->frame_count - tr->clip->loop_frames) / (double)tr->clip->fps : 0;
    tr->t = from + fmod(tr->t - from, d - from);
    return 1;
  }
  tr->t = d;
  return 0;
}

static void record_sample(srv_session *s);

static void on_anim_tick(uv_timer_t *timer) {
  srv_server *srv = timer->data;
  uint64_t now = uv_now(srv->loop);
  double dt = (double)(now - srv->anim_last_ms) / 1000.0;
  srv->anim_last_ms = now;
  int active = 0;
  for (srv_session *s = srv->sessions; s; s = s->next) {
    srv_anim *a = s->anim;
    if (!a || s->closed) continue;
    if (a->recording) {
      active = 1;
      a->rec_acc += dt;
      while (a->recording && a->rec_acc >= 1.0 / a->rec_fps) {
        a->rec_acc -= 1.0 / a->rec_fps;
        record_sample(s);
      }
    }
    if (!a->playing) continue;
    active = 1;
    int running = advance(&a->cur, dt * a->speed, a->loop);
    int changed = (int64_t)srv_anim_clip_index(a->cur.clip, a->cur.t) != a->cur.shown;
    if (a->next.clip) {
      advance(&a->next, dt * a->speed, a->loop);
      a->fade_elapsed += dt;
      changed |= (int64_t)srv_anim_clip_index(a->next.clip, a->next.t) != a->next.shown;
      if (a->fade_elapsed >= a->fade_duration) {
        show(srv, s); /* the fade's last frame: the old clip at 0, the new one at 1 */
        a->cur = a->next;
        a->next.clip = NULL;
        a->next.shown = -1;
        continue; /* from the next frame on, the new clip alone */
      }
    }
    if (changed || a->cur.shown < 0) show(srv, s);
    if (!running) a->playing = 0;
  }
  if (!active) {
    uv_timer_stop(&srv->anim_timer);
    srv->anim_timer_on = 0;
  }
}

/* ---- recording ---------------------------------------------------------------------------------- */

static uint64_t newest_block(const srv_session *s) {
  uint32_t nblocks = (s->mesh->vertex_count >> SRV_BLOCK_SHIFT) + 1;
  uint64_t v = 0;
  for (uint32_t b = 0; b < nblocks; b++)
    if (s->block_version[b] > v) v = s->block_version[b];
  return v;
}

static void record_sample(srv_session *s) {
  srv_anim *a = s->anim;
  if (a->rec_count == a->rec_max) {
    a->recording = 0;
    srv_log(SRV_LOG_INFO, "session %s: recording '%s' stopped at its %u frames", s->name, a->rec_name, a->rec_max);
    return;
  }
  if (a->rec_count == a->rec_cap) {
    uint32_t cap = a->rec_cap ? 2 * a->rec_cap : 64;
    rec_frame *g = realloc(a->rec, sizeof(*g) * cap);
    if (!g) goto oom;
    a->rec = g;
    a->rec_cap = cap;
  }
  uint64_t nb = newest_block(s);
  if (!a->rec_q || nb > a->rec_q_version) {
    size_t n = 3 * (size_t)s->mesh->vertex_count;
    anim_q *q = malloc(sizeof(anim_q) + sizeof(int32_t) * n);
    if (!q) goto oom;
    q->refs = 1;
    memcpy(q->q, s->offsets, sizeof(int32_t) * n);
    srv_anim_q_unref(a->rec_q);
    a->rec_q = q;
    a->rec_q_version = nb;
  }
  rec_frame *f = &a->rec[a->rec_count];
  f->target_count = s->mesh->target_count;
  f->weights = malloc(sizeof(float) * (f->target_count + 1));
  if (!f->weights) goto oom;
  if (f->target_count) memcpy(f->weights, s->weights, sizeof(float) * f->target_count);
  f->offsets = a->rec_q;
  a->rec_q->refs++;
  a->rec_count++;
  return;
oom:
  a->recording = 0;
  srv_log(SRV_LOG_WARN, "session %s: recording '%s' stopped: out of memory after %u frames", s->name, a->rec_name,
          a->rec_count);
}


/* ---- the player's controls ------------------------------------------------------------------- */

void srv_anim_close(srv_session *s) {
  if (!s->anim) return;
  s->anim->playing = 0;
  s->anim->recording = 0;
}

int srv_anim_play(srv_server *srv, srv_session *s, srv_clip *c, double speed, int loop, uint32_t frame, char *err,
                  size_t errlen) {
  srv_anim *a = s->anim;
  a->play_step = 0; /* taken by the first operation the playback applies (play_step()) */
  if (a->cur.clip && a->cur.clip != c) clear_clip(srv, s, a->cur.clip);
  if (a->next.clip && a->next.clip != c) clear_clip(srv, s, a->next.clip);
  a->next.clip = NULL;
  a->cur.clip = c;
  a->cur.t = srv_anim_clip_time(c, frame);
  a->speed = speed;
  a->loop = loop;
  if (c->kind != CLIP_WEIGHTS) { /* the mean at 1, once */
    float one = 1.0f;
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = SRV_AUTHOR_PLAYER, .cause = SRV_CAUSE_ANIM_PLAY,
                 .step = play_step(s), .count = 1, .indices = &c->mean_target, .values = &one};
    int rc = srv_session_check(s, &op, err, errlen);
    if (rc) return rc;
    srv_session_apply(srv, s, &op);
  }
  show(srv, s);
  a->playing = 1;
  kick(srv);
  return 0;
}

void srv_anim_pause(srv_session *s) { s->anim->playing = 0; }

void srv_anim_stop(srv_server *srv, srv_session *s) {
  srv_anim *a = s->anim;
  a->playing = 0;
  if (a->cur.clip) clear_clip(srv, s, a->cur.clip);
  if (a->next.clip) clear_clip(srv, s, a->next.clip);
  a->cur.clip = a->next.clip = NULL;
  srv_texclip_show(srv, s); /* no clip: no texture clip shown */
}

int srv_anim_seek(srv_server *srv, srv_session *s, double t, char *err, size_t errlen) {
  srv_anim *a = s->anim;
  if (!a->cur.clip) {
    snprintf(err, errlen, "nothing to seek in: no clip is playing or paused (anim.play)");
    return SRV_ERANGE;
  }
  a->cur.t = t;
  show(srv, s);
  return 0;
}

int srv_anim_crossfade(srv_server *srv, srv_session *s, srv_clip *c, double duration, char *err, size_t errlen) {
  srv_anim *a = s->anim;
  if (!a->cur.clip || !a->playing) {
    snprintf(err, errlen, "anim.blend crossfades from the clip playing now, and none is (anim.play)");
    return SRV_ERANGE;
  }
  if (c == a->cur.clip || a->next.clip) {
    snprintf(err, errlen, "%s", c == a->cur.clip ? "that clip is the one playing" : "a crossfade is already running");
    return SRV_ERANGE;
  }
  a->next.clip = c;
  a->next.t = 0;
  a->next.shown = -1;
  a->fade_elapsed = 0;
  a->fade_duration = duration;
  show(srv, s);
  return 0;
}

int srv_anim_record_start(srv_server *srv, srv_session *s, const char *name, double fps, uint32_t max_frames,
                          char *err, size_t errlen) {
  srv_anim *a = s->anim;
  if (a->recording || a->rec_name) {
    if (a->recording)
      snprintf(err, errlen, "session '%s' is recording '%s' already (anim.record_stop first)", s->name, a->rec_name);
    else
      snprintf(err, errlen, "recording '%s' stopped at %u frames and waits to be saved: anim.record_stop",
               a->rec_name, a->rec_count);
    return SRV_EBUSY;
  }
  if (srv_anim_find_clip(a, name)) {
    snprintf(err, errlen, "session '%s' already has a clip called '%s'", s->name, name);
    return SRV_EEXIST;
  }
  a->rec_name = strdup(name);
  if (!a->rec_name) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  a->rec_fps = fps;
  a->rec_max = max_frames;
  a->rec_acc = 0;
  a->rec_count = 0;
  a->recording = 1;
  record_sample(s); /* the state at the start is frame 0 */
  kick(srv);
  return 0;
}

int srv_anim_record_stop(srv_session *s, srv_clip **out, char *err, size_t errlen) {
  srv_anim *a = s->anim;
  if (!a->rec_name) {
    snprintf(err, errlen, "session '%s' is not recording (anim.record_start)", s->name);
    return SRV_ERANGE;
  }
  srv_clip *c = calloc(1, sizeof(*c));
  mesh_target *tg = malloc(sizeof(mesh_target) * (s->mesh->target_count + 1));
  if (!c || !tg) {
    free(c);
    free(tg);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  if (s->mesh->target_count) memcpy(tg, s->mesh->targets, sizeof(mesh_target) * s->mesh->target_count);
  c->name = a->rec_name;
  c->kind = CLIP_RECORDED;
  c->fps = (float)a->rec_fps;
  c->frame_count = a->rec_count;
  c->rec = a->rec;
  c->rec_targets = tg;
  c->rec_target_count = s->mesh->target_count;
  srv_anim_add_clip(a, c);
  a->rec_name = NULL;
  a->rec = NULL;
  a->rec_count = a->rec_cap = 0;
  a->recording = 0;
  srv_anim_q_unref(a->rec_q);
  a->rec_q = NULL;
  *out = c;
  return 0;
}
