/*
 * srv_anim.c — a session's animation clips and their playback.
 *
 * Clips come from three places: the keyframes of the session's mesh (MD2/MD3 frames, grouped by
 * the mesh core into named clips), glTF morph-weight animations (keys of target weights), and
 * recordings of the session's own states (anim.record_start / anim.record_stop). A frame clip
 * is streamed after PCA compression (anim.compress, GPU Gems 3 ch. 15): the mean and the kept
 * components become morph targets that every viewer receives once, and each animation frame is
 * then one WEIGHTS frame of K quantised weights (the weights body's quantised run: 31 + K bytes
 * in the frames whose 8-bit weights keep the clip within its error budget, else 31 + 2K; the
 * choice is made once, at compression, by pca_stream_choose).
 * A weight clip streams its own target weights. Playback (anim.play/pause/seek/speed/loop/stop)
 * and crossfades between two clips (anim.blend, the motion-graph transition of the same chapter:
 * a linear mix in weight space is a linear mix of shapes) run on one server-wide timer.
 *
 * Every weight change goes through srv_session_apply() as an operation, like any edit, so
 * versions, catch-ups and late joiners need nothing special.
 *
 * DOES NOT run a decomposition or evaluate shapes on the loop thread: compression (including
 * evaluating recorded or weight clips into frames) runs on the thread pool. A recording copies
 * the session's weights each sample and shares one copy of the sculpt offsets until they change.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pca.h"
#include "pca_stream.h"
#include "srv.h"

#define ANIM_TICK_MS 5
#define ANIM_MAX_FRAME_BYTES ((size_t)1 << 30) /* a clip evaluated for compression: F × 3V floats */

enum { CLIP_KEYFRAMES = 1, CLIP_WEIGHTS = 2, CLIP_RECORDED = 3 };

/* Sculpt offsets shared by consecutive recorded frames while they do not change. */
typedef struct anim_q {
  int refs;
  int32_t q[];
} anim_q;

typedef struct rec_frame {
  uint32_t target_count;
  float *weights;
  anim_q *offsets;
} rec_frame;

typedef struct srv_clip {
  char *name;
  int kind;
  float fps;              /* frames per second (keyframe and recorded clips) */
  uint32_t frame_count;   /* frames, or keys of a weight clip */
  const float *frames;    /* KEYFRAMES: into the mesh's frames */
  const mesh_clip *wclip; /* WEIGHTS: the mesh's clip */
  uint32_t wclip_targets; /* WEIGHTS: how many targets its keys cover */
  rec_frame *rec;         /* RECORDED: frame_count of them */
  mesh_target *rec_targets; /* RECORDED: the targets when the recording stopped (shallow) */
  uint32_t rec_target_count;
  /* After anim.compress: */
  int compressed, busy;
  uint32_t mean_target, first_component, components;
  float *frame_weights;   /* frame_count × components, each in [-1, 1] */
  uint8_t *frame_narrow;  /* frame_count: 1 where the frame streams 8-bit weights */
  cJSON *report;
  struct srv_clip *next;
} srv_clip;

typedef struct anim_track {
  srv_clip *clip;
  double t;          /* seconds into the clip */
  int64_t shown;     /* the frame (or key) last streamed, -1 for none */
} anim_track;

typedef struct srv_anim srv_anim;

struct srv_anim {
  srv_clip *clips;
  int playing;
  anim_track cur, next; /* next.clip is set while crossfading into it */
  double fade_elapsed, fade_duration;
  double speed;
  int loop;
  /* recording */
  int recording;
  char *rec_name;
  double rec_fps, rec_acc;
  uint32_t rec_max, rec_count, rec_cap;
  rec_frame *rec;
  anim_q *rec_q;
  uint64_t rec_q_version; /* the newest block version when rec_q was copied */
};

/* ---- clips --------------------------------------------------------------------------------- */

static void q_unref(anim_q *q) {
  if (q && --q->refs == 0) free(q);
}

static void free_rec(rec_frame *r, uint32_t n) {
  for (uint32_t i = 0; r && i < n; i++) {
    free(r[i].weights);
    q_unref(r[i].offsets);
  }
  free(r);
}

static void clip_free(srv_clip *c) {
  free(c->name);
  free_rec(c->rec, c->kind == CLIP_RECORDED ? c->frame_count : 0);
  free(c->rec_targets);
  free(c->frame_weights);
  free(c->frame_narrow);
  cJSON_Delete(c->report);
  free(c);
}

static srv_clip *find_clip(const srv_anim *a, const char *name) {
  for (srv_clip *c = a->clips; c; c = c->next)
    if (strcmp(c->name, name) == 0) return c;
  return NULL;
}

static void add_clip(srv_anim *a, srv_clip *c) {
  srv_clip **pp = &a->clips;
  while (*pp) pp = &(*pp)->next;
  *pp = c;
}

static double clip_duration(const srv_clip *c) {
  if (c->kind == CLIP_WEIGHTS) return c->frame_count ? c->wclip->times[c->frame_count - 1] : 0.0;
  return c->fps > 0 ? c->frame_count / (double)c->fps : 0.0;
}

/* The frame (or key) shown at time t. */
static uint32_t clip_index(const srv_clip *c, double t) {
  if (c->frame_count == 0) return 0;
  if (c->kind == CLIP_WEIGHTS) {
    uint32_t k = 0;
    while (k + 1 < c->frame_count && c->wclip->times[k + 1] <= t) k++;
    return k;
  }
  double f = floor(t * c->fps);
  return f <= 0 ? 0 : f >= c->frame_count ? c->frame_count - 1 : (uint32_t)f;
}

int srv_anim_init(srv_session *s) {
  const mesh *m = s->mesh;
  srv_anim *a = calloc(1, sizeof(*a));
  if (!a) return MESH_ENOMEM;
  a->speed = 1.0;
  a->loop = 1;
  a->cur.shown = a->next.shown = -1;
  s->anim = a;
  for (uint32_t i = 0; i < m->clip_count; i++) {
    const mesh_clip *mc = &m->clips[i];
    srv_clip *c = calloc(1, sizeof(*c));
    if (!c || !(c->name = strdup(mc->name))) {
      free(c);
      return MESH_ENOMEM;
    }
    if (mc->key_count) {
      c->kind = CLIP_WEIGHTS;
      c->frame_count = mc->key_count;
      c->wclip = mc;
      c->wclip_targets = mc->target_count; /* its keys cover the targets it was imported with */
    } else {
      c->kind = CLIP_KEYFRAMES;
      c->fps = mc->fps > 0 ? mc->fps : 10.0f;
      c->frame_count = mc->frame_count;
      c->frames = m->frames + 3 * (size_t)m->vertex_count * mc->first_frame;
    }
    add_clip(a, c);
  }
  return 0;
}

void srv_anim_fini(srv_session *s) {
  srv_anim *a = s->anim;
  if (!a) return;
  for (srv_clip *c = a->clips, *next; c; c = next) {
    next = c->next;
    clip_free(c);
  }
  free(a->rec_name);
  free_rec(a->rec, a->rec_count);
  q_unref(a->rec_q);
  free(a);
  s->anim = NULL;
}

void srv_anim_close(srv_session *s) {
  if (!s->anim) return;
  s->anim->playing = 0;
  s->anim->recording = 0;
}

/* ---- the timer -------------------------------------------------------------------------------- */

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

/* Streams what the player shows now: one op. Returns the new version or 0. */
static uint64_t show(srv_server *srv, srv_session *s) {
  srv_anim *a = s->anim;
  srv_clip *c = a->cur.clip;
  uint32_t i = clip_index(c, a->cur.t);
  a->cur.shown = i;
  if (!a->next.clip && c->kind != CLIP_WEIGHTS) {
    /* One compressed clip: its K weights as a quantised run (the mean stays at 1). */
    int16_t *q = malloc(sizeof(int16_t) * (c->components + 1));
    float scale;
    uint64_t v = 0;
    if (q && pca_stream_quantize(c->frame_weights + (size_t)i * c->components, c->components, c->frame_narrow[i], q,
                                 &scale) == 0) {
      srv_op op = {.kind = SRV_OP_SET_WEIGHTS_QRUN, .count = c->components, .first = c->first_component, .wq = q,
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
      uint32_t j = clip_index(a->next.clip, a->next.t);
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
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .count = pos ? m : 0, .indices = idx, .values = val};
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
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .count = n, .indices = idx, .values = val};
    char why[256];
    if (n && srv_session_check(s, &op, why, sizeof(why)) == 0) v = srv_session_apply(srv, s, &op);
  }
  free(idx);
  free(val);
  return v;
}

/* Advances a track by dt seconds; returns 0 when a non-looping track ran off its end. */
static int advance(anim_track *tr, double dt, int loop) {
  double d = clip_duration(tr->clip);
  tr->t += dt;
  if (d <= 0) {
    tr->t = 0;
    return 1;
  }
  if (tr->t < d) return 1;
  if (loop) {
    tr->t = fmod(tr->t, d);
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
    int changed = (int64_t)clip_index(a->cur.clip, a->cur.t) != a->cur.shown;
    if (a->next.clip) {
      advance(&a->next, dt * a->speed, a->loop);
      a->fade_elapsed += dt;
      changed |= (int64_t)clip_index(a->next.clip, a->next.t) != a->next.shown;
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
    q_unref(a->rec_q);
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

/* ---- compression (thread pool) ---------------------------------------------------------------- */

typedef struct compress_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session;
  srv_clip *clip;
  srv_rpc_call *call;
  char *prefix;
  pca_options opt;
  double max_error_rel;
  uint32_t *region_of; /* NULL: one PCA over the whole mesh */
  uint32_t region_count;
  mesh view;           /* the session's mesh with the targets captured now */
  mesh_target *targets;
  /* results */
  int status;
  char err[512];
  float *frames;       /* F × 3V (owned unless it points at the mesh's keyframes) */
  int own_frames;
  pca_model model;
  pca_regions regions;
  uint32_t global_components; /* with regions: what one PCA over every vertex needs for the same budget */
  uint32_t K;
  float *mean;         /* 3V */
  float *deltas;       /* K × 3V: component k scaled by its largest weight */
  uint32_t *vidx;      /* per component: vertex list (regions) or NULL (every vertex) */
  uint32_t *vcount;    /* per component */
  uint32_t **vlist;
  float *fw;           /* F × K in [-1, 1] */
  int weight_bits;     /* 8: 8-bit frames where the budget allows; 16: always 16-bit */
  uint8_t *narrow;     /* F: frame f streams 8-bit weights */
  pca_stream_result sr; /* the error and size of what viewers get */
} compress_job;

/* Fills j->frames: the clip's frames as full positions. */
static int clip_frames(compress_job *j) {
  const srv_clip *c = j->clip;
  const mesh *m = &j->view;
  size_t n3 = 3 * (size_t)m->vertex_count;
  if (c->kind == CLIP_KEYFRAMES) {
    j->frames = (float *)c->frames;
    return 0;
  }
  j->frames = malloc(sizeof(float) * n3 * c->frame_count);
  float *w = calloc(m->target_count + 1, sizeof(float)), *off = malloc(sizeof(float) * (n3 + 1));
  if (!j->frames || !w || !off) {
    free(w);
    free(off);
    return MESH_ENOMEM;
  }
  j->own_frames = 1;
  for (uint32_t f = 0; f < c->frame_count; f++) {
    mesh v = *m;
    if (c->kind == CLIP_WEIGHTS) {
      memset(w, 0, sizeof(float) * m->target_count);
      memcpy(w, c->wclip->weights + (size_t)f * c->wclip_targets, sizeof(float) * c->wclip_targets);
      mesh_evaluate(&v, w, NULL, j->frames + n3 * f);
    } else {
      const rec_frame *r = &c->rec[f];
      v.targets = c->rec_targets;
      v.target_count = r->target_count;
      for (size_t i = 0; i < n3; i++) off[i] = proto_dequantize(r->offsets->q[i], j->session->offset_quantum);
      mesh_evaluate(&v, r->weights, off, j->frames + n3 * f);
    }
  }
  free(w);
  free(off);
  return 0;
}

static void compress_work(uv_work_t *req) {
  compress_job *j = req->data;
  const srv_clip *c = j->clip;
  const mesh *m = &j->view;
  uint32_t V = m->vertex_count, F = c->frame_count;
  size_t n3 = 3 * (size_t)V;
  double diag = mesh_bbox_diagonal(m);
  if (j->opt.components == 0) j->opt.max_error = j->max_error_rel * diag;
  j->status = clip_frames(j);
  if (j->status) {
    snprintf(j->err, sizeof(j->err), "out of memory evaluating the clip's frames");
    return;
  }
  /* The decomposition: one model over every vertex, or one per region. */
  const pca_model **models = NULL;
  uint32_t nmodels = 1;
  if (j->region_of) {
    j->status = pca_build_regions(j->frames, F, V, j->region_of, j->region_count, &j->opt, &j->regions, j->err,
                                  sizeof(j->err));
    nmodels = j->region_count;
    /* The saving is reported against one PCA of the whole mesh at the same budget. */
    pca_model whole;
    if (j->status == 0 && pca_build(j->frames, F, V, &j->opt, &whole, j->err, sizeof(j->err)) == 0) {
      j->global_components = whole.components;
      pca_fini(&whole);
    }
  } else {
    j->status = pca_build(j->frames, F, V, &j->opt, &j->model, j->err, sizeof(j->err));
  }
  if (j->status) return;
  models = malloc(sizeof(*models) * nmodels);
  j->mean = malloc(sizeof(float) * (n3 + 1));
  if (!models || !j->mean) goto oom;
  uint32_t K = 0;
  for (uint32_t r = 0; r < nmodels; r++) {
    models[r] = j->region_of ? &j->regions.regions[r].model : &j->model;
    K += models[r]->components;
  }
  j->K = K;
  j->deltas = malloc(sizeof(float) * n3 * (K ? K : 1));
  j->vcount = calloc(K + 1, sizeof(uint32_t));
  j->vlist = calloc(K + 1, sizeof(uint32_t *));
  j->fw = malloc(sizeof(float) * (size_t)F * (K ? K : 1));
  if (!j->deltas || !j->vcount || !j->vlist || !j->fw) goto oom;
  /* Mean, and each component scaled by its largest |weight| so the streamed weights are in
   * [-1, 1] (what the targets' sliders show); the shape is the same. */
  memcpy(j->mean, m->positions, sizeof(float) * n3);
  memset(j->deltas, 0, sizeof(float) * n3 * K);
  uint32_t k0 = 0;
  for (uint32_t r = 0; r < nmodels; r++) {
    const pca_model *pm = models[r];
    uint32_t nv = j->region_of ? j->regions.regions[r].vertex_count : V;
    const uint32_t *verts = j->region_of ? j->regions.regions[r].vertices : NULL;
    for (uint32_t i = 0; i < nv; i++)
      for (int d = 0; d < 3; d++) j->mean[3 * (size_t)(verts ? verts[i] : i) + d] = pm->mean[3 * (size_t)i + d];
    pca_stream_scale(pm, verts, V, k0, K, j->deltas, j->fw);
    for (uint32_t k = 0; k < pm->components; k++) {
      j->vcount[k0 + k] = nv;
      j->vlist[k0 + k] = (uint32_t *)verts; /* borrowed from the regions (freed with them) */
    }
    k0 += pm->components;
  }
  /* The error viewers see: each frame rebuilt from its quantised weights, as they rebuild it;
   * 8-bit weights for the frames where that stays within the budget (the one asked for, or with
   * a component count, the largest error the unquantised components already have). */
  double budget = j->opt.components == 0 ? j->opt.max_error
                  : j->region_of         ? j->regions.max_error
                                         : j->model.max_error;
  j->narrow = malloc(F + 1);
  if (!j->narrow ||
      pca_stream_choose(j->frames, F, V, j->mean, j->deltas, j->fw, K, budget, j->weight_bits == 8, j->narrow, &j->sr))
    goto oom;
  free(models);
  return;
oom:
  free(models);
  j->status = MESH_ENOMEM;
  snprintf(j->err, sizeof(j->err), "out of memory building the compressed clip");
}

static void compress_job_free(compress_job *j) {
  if (j->own_frames) free(j->frames);
  if (j->region_of) pca_regions_fini(&j->regions);
  else pca_fini(&j->model);
  free(j->region_of);
  free(j->targets);
  free(j->mean);
  free(j->deltas);
  free(j->vcount);
  free(j->vlist);
  free(j->fw);
  free(j->narrow);
  free(j->prefix);
  free(j);
}

/* The targets a compressed clip adds: "<prefix>.mean", then "<prefix>.pc1" ... */
static int add_basis_targets(srv_server *srv, compress_job *j, uint64_t *version, char *why, size_t whylen) {
  srv_session *s = j->session;
  uint32_t V = s->mesh->vertex_count, K = j->K;
  size_t n3 = 3 * (size_t)V;
  srv_new_target *nt = calloc(K + 1, sizeof(*nt));
  char **names = calloc(K + 1, sizeof(char *));
  uint32_t **idx = calloc(K + 1, sizeof(uint32_t *));
  float **del = calloc(K + 1, sizeof(float *));
  int rc = nt && names && idx && del ? 0 : -1;
  for (uint32_t k = 0; rc == 0 && k <= K; k++) {
    /* k = 0: the mean's offset from the base; k ≥ 1: component k. Only non-zero vertices. */
    const float *src = k == 0 ? NULL : j->deltas + n3 * (k - 1);
    idx[k] = malloc(sizeof(uint32_t) * (V + 1));
    del[k] = malloc(sizeof(float) * (n3 + 1));
    names[k] = malloc(PROTO_MAX_NAME + 1);
    if (!idx[k] || !del[k] || !names[k]) {
      rc = -1;
      break;
    }
    uint32_t n = 0;
    for (uint32_t v = 0; v < V; v++) {
      float d[3];
      for (int c = 0; c < 3; c++)
        d[c] = k == 0 ? j->mean[3 * (size_t)v + c] - s->mesh->positions[3 * (size_t)v + c] : src[3 * (size_t)v + c];
      if (d[0] == 0 && d[1] == 0 && d[2] == 0) continue;
      idx[k][n] = v;
      memcpy(del[k] + 3 * (size_t)n, d, sizeof(d));
      n++;
    }
    if (k == 0) snprintf(names[k], PROTO_MAX_NAME + 1, "%s.mean", j->prefix);
    else snprintf(names[k], PROTO_MAX_NAME + 1, "%s.pc%u", j->prefix, k);
    nt[k] = (srv_new_target){names[k], n, idx[k], del[k], 0.0f, k == 0 ? 0.0f : -1.0f, 1.0f};
  }
  if (rc) snprintf(why, whylen, "out of memory");
  srv_op op = {.kind = SRV_OP_ADD_TARGETS, .count = K + 1, .added = nt};
  if (rc == 0 && srv_session_check(s, &op, why, whylen) != 0) rc = -2;
  if (rc == 0) {
    j->clip->mean_target = s->mesh->target_count;
    *version = srv_session_apply(srv, s, &op);
    if (*version == 0) {
      rc = -1;
      snprintf(why, whylen, "out of memory");
    }
  }
  for (uint32_t k = 0; k <= K && idx && del && names; k++) {
    free(idx[k]);
    free(del[k]);
    free(names[k]);
  }
  free(nt);
  free(names);
  free(idx);
  free(del);
  return rc;
}

static void compress_done(uv_work_t *req, int status) {
  compress_job *j = req->data;
  srv_server *srv = j->srv;
  srv_session *s = j->session;
  srv_clip *c = j->clip;
  srv->pending_jobs--;
  c->busy = 0;
  if (status == UV_ECANCELED && !j->status) {
    j->status = -1;
    snprintf(j->err, sizeof(j->err), "cancelled");
  }
  if (s->closed) {
    srv_rpc_error(j->call, SRV_RPC_UNKNOWN_SESSION, "session '%s' was closed during the compression", s->name);
  } else if (j->status) {
    srv_rpc_error(j->call, j->status == MESH_ENOMEM || j->status == PCA_ENOMEM ? SRV_RPC_INTERNAL : SRV_RPC_SOLVER,
                  "compressing clip '%s': %s", c->name, j->err);
  } else {
    char why[512];
    uint64_t version = 0;
    int rc = add_basis_targets(srv, j, &version, why, sizeof(why));
    if (rc) {
      srv_rpc_error(j->call, rc == -2 ? SRV_RPC_OUT_OF_RANGE : SRV_RPC_INTERNAL, "%s", why);
    } else {
      uint32_t V = s->mesh->vertex_count, F = c->frame_count;
      double diag = mesh_bbox_diagonal(s->mesh);
      free(c->frame_weights);
      free(c->frame_narrow);
      c->frame_weights = j->fw;
      c->frame_narrow = j->narrow;
      j->fw = NULL;
      j->narrow = NULL;
      c->first_component = c->mean_target + 1;
      c->components = j->K;
      c->compressed = 1;
      const pca_model *pm = j->region_of ? NULL : &j->model;
      cJSON *r = cJSON_CreateObject();
      cJSON_AddNumberToObject(r, "version", (double)version);
      cJSON_AddStringToObject(r, "clip", c->name);
      cJSON_AddNumberToObject(r, "frames", F);
      cJSON_AddNumberToObject(r, "components", j->K);
      if (pm) cJSON_AddNumberToObject(r, "rank", pm->rank);
      cJSON_AddBoolToObject(r, "budget_met", pm ? pm->budget_met : j->regions.budget_met);
      double rms = pm ? pm->rms_error : j->regions.rms_error, mx = pm ? pm->max_error : j->regions.max_error;
      cJSON_AddNumberToObject(r, "rms_error", rms);
      cJSON_AddNumberToObject(r, "max_error", mx);
      cJSON_AddNumberToObject(r, "max_error_relative", diag > 0 ? mx / diag : 0);
      cJSON_AddNumberToObject(r, "streamed_rms_error", j->sr.rms_error);
      cJSON_AddNumberToObject(r, "streamed_max_error", j->sr.max_error);
      cJSON_AddNumberToObject(r, "streamed_max_error_relative", diag > 0 ? j->sr.max_error / diag : 0);
      /* A frame: header 20, weights body: mode 1, count 4, first 2, scale 4, then 1 or 2 per weight. */
      double bytes = j->sr.bytes_per_frame, raw = 12.0 * V;
      cJSON_AddNumberToObject(r, "bytes_per_frame", bytes);
      cJSON_AddNumberToObject(r, "bytes_per_frame_max", (double)j->sr.bytes_max);
      cJSON_AddNumberToObject(r, "frames_8bit", j->sr.narrow_frames);
      cJSON_AddNumberToObject(r, "raw_bytes_per_frame", raw);
      cJSON_AddNumberToObject(r, "ratio", raw / bytes);
      cJSON_AddNumberToObject(r, "build_ms", pm ? pm->build_ms : j->regions.build_ms);
      cJSON_AddNumberToObject(r, "mean_target", c->mean_target);
      cJSON_AddNumberToObject(r, "first_component", c->first_component);
      if (j->region_of) {
        cJSON_AddNumberToObject(r, "global_components", j->global_components);
        /* At this clip's mean bytes per weight (1 in 8-bit frames, 2 in 16-bit ones). */
        double per_weight = j->K ? (bytes - (double)proto_weights_qrun_size(0, 1)) / j->K : 2.0;
        cJSON_AddNumberToObject(r, "saving_bytes_per_frame", per_weight * ((double)j->global_components - j->K));
        cJSON *regs = cJSON_AddArrayToObject(r, "regions");
        for (uint32_t g = 0; g < j->region_count; g++) {
          cJSON *o = cJSON_CreateObject();
          cJSON_AddNumberToObject(o, "vertices", j->regions.regions[g].vertex_count);
          cJSON_AddNumberToObject(o, "components", j->regions.regions[g].model.components);
          cJSON_AddNumberToObject(o, "max_error", j->regions.regions[g].model.max_error);
          cJSON_AddItemToArray(regs, o);
        }
      }
      cJSON_Delete(c->report);
      c->report = cJSON_Duplicate(r, 1);
      srv_log(SRV_LOG_INFO, "session %s: clip %s compressed to %u components (max error %.3g, %.1f× smaller)",
              s->name, c->name, j->K, j->sr.max_error, raw / bytes);
      srv_rpc_reply(j->call, r);
    }
  }
  srv_session_unref(s);
  compress_job_free(j);
}

/* ---- JSON-RPC ------------------------------------------------------------------------------------ */

static srv_clip *want_clip(srv_session *s, srv_rpc_call *call, cJSON *params, const char *key) {
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!cJSON_IsString(n)) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"%s\" must be a clip name", key);
    return NULL;
  }
  srv_clip *c = find_clip(s->anim, n->valuestring);
  if (!c) srv_rpc_error(call, SRV_RPC_UNKNOWN_CLIP, "unknown clip '%s' in session '%s' (anim.list shows them)",
                        n->valuestring, s->name);
  return c;
}

/* An optional number param: 0 absent, 1 read, -1 answered with an error. */
static int opt_number(srv_rpc_call *call, cJSON *params, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"%s\" must be a finite number", key);
    return -1;
  }
  *out = v->valuedouble;
  return 1;
}

static int opt_bool(srv_rpc_call *call, cJSON *params, const char *key, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
  if (!v) return 0;
  if (!cJSON_IsBool(v)) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"%s\" must be true or false", key);
    return -1;
  }
  *out = cJSON_IsTrue(v);
  return 1;
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
    cJSON_AddNumberToObject(o, "frame", clip_index(a->cur.clip, a->cur.t));
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

void srv_anim_m_list(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  cJSON *r = cJSON_CreateObject(), *clips = cJSON_AddArrayToObject(r, "clips");
  for (const srv_clip *c = s->anim->clips; c; c = c->next) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddStringToObject(o, "kind", kind_name(c->kind));
    cJSON_AddNumberToObject(o, c->kind == CLIP_WEIGHTS ? "keys" : "frames", c->frame_count);
    if (c->kind != CLIP_WEIGHTS) cJSON_AddNumberToObject(o, "fps", c->fps);
    cJSON_AddNumberToObject(o, "duration", clip_duration(c));
    if (c->report) cJSON_AddItemToObject(o, "compressed", cJSON_Duplicate(c->report, 1));
    else cJSON_AddBoolToObject(o, "compressed", 0);
    cJSON_AddItemToArray(clips, o);
  }
  cJSON_AddItemToObject(r, "player", player_json(s));
  srv_rpc_reply(call, r);
}

void srv_anim_m_compress(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_clip *c = want_clip(s, call, params, "clip");
  if (!c) return;
  double comps = 0, maxerr = 0;
  int hc = opt_number(call, params, "components", &comps), he = 0;
  if (hc < 0 || (he = opt_number(call, params, "max_error", &maxerr)) < 0) return;
  if ((hc && he) || (hc && (comps < 1 || comps > 65000 || comps != floor(comps))) || (he && !(maxerr > 0))) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS,
                  "invalid params: give either \"components\" (an integer >= 1) or \"max_error\" (> 0, relative to the "
                  "bounding-box diagonal), not both");
    return;
  }
  if (!hc && !he) maxerr = 0.005; /* half a percent of the diagonal */
  double bits = 8;
  if (opt_number(call, params, "weight_bits", &bits) < 0) return;
  if (bits != 8 && bits != 16) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS,
                  "invalid params: \"weight_bits\" must be 8 (8-bit weights in the frames that stay within the error "
                  "budget, the default) or 16 (16-bit weights in every frame)");
    return;
  }
  if (c->kind == CLIP_WEIGHTS) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "clip '%s' animates target weights: it plays as it is (anim.play)",
                  c->name);
    return;
  }
  if (c->busy) {
    srv_rpc_error(call, SRV_RPC_BUSY, "clip '%s' is being compressed already", c->name);
    return;
  }
  if (c->frame_count < 2) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "clip '%s' has %u frame(s): nothing to compress", c->name, c->frame_count);
    return;
  }
  size_t bytes = sizeof(float) * 3 * (size_t)s->mesh->vertex_count * c->frame_count;
  if (c->kind != CLIP_KEYFRAMES && bytes > ANIM_MAX_FRAME_BYTES) {
    srv_rpc_error(call, SRV_RPC_LIMIT, "clip '%s' would take %zu MB as frames; the limit is %zu MB", c->name,
                  bytes >> 20, ANIM_MAX_FRAME_BYTES >> 20);
    return;
  }
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(params, "name");
  if (prefix && (!cJSON_IsString(prefix) || !prefix->valuestring[0] || strlen(prefix->valuestring) > 200)) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"name\" must be a target name prefix of 1 to 200 bytes");
    return;
  }
  compress_job *j = calloc(1, sizeof(*j));
  if (!j) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    return;
  }
  j->prefix = strdup(prefix ? prefix->valuestring : c->name);
  /* Regions: arrays of vertex indices; vertices in none form one more region. */
  const cJSON *regions = cJSON_GetObjectItemCaseSensitive(params, "regions");
  if (regions) {
    uint32_t V = s->mesh->vertex_count, nr = (uint32_t)cJSON_GetArraySize(regions);
    j->region_of = malloc(sizeof(uint32_t) * (V + 1));
    if (!cJSON_IsArray(regions) || nr == 0 || nr > 64 || !j->region_of) {
      srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"regions\" must be 1 to 64 arrays of vertex indices");
      compress_job_free(j);
      return;
    }
    for (uint32_t v = 0; v < V; v++) j->region_of[v] = nr;
    uint32_t g = 0;
    const cJSON *reg;
    cJSON_ArrayForEach(reg, regions) {
      const cJSON *v;
      if (!cJSON_IsArray(reg)) goto bad_region;
      cJSON_ArrayForEach(v, reg) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= V || v->valuedouble != floor(v->valuedouble))
          goto bad_region;
        if (j->region_of[(uint32_t)v->valuedouble] != nr) {
          srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: vertex %u is in two regions",
                        (uint32_t)v->valuedouble);
          compress_job_free(j);
          return;
        }
        j->region_of[(uint32_t)v->valuedouble] = g;
      }
      g++;
    }
    j->region_count = nr + 1;
  }
  j->srv = srv;
  j->session = s;
  j->clip = c;
  j->call = call;
  j->opt.components = (uint32_t)comps;
  j->max_error_rel = maxerr;
  j->weight_bits = (int)bits;
  /* The targets as they are now (recorded clips bring their own). */
  j->view = *s->mesh;
  j->targets = malloc(sizeof(mesh_target) * (s->mesh->target_count + 1));
  if (!j->prefix || !j->targets) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    compress_job_free(j);
    return;
  }
  if (s->mesh->target_count) /* (memcpy from a NULL array is undefined even for 0 bytes) */
    memcpy(j->targets, s->mesh->targets, sizeof(mesh_target) * s->mesh->target_count);
  j->view.targets = j->targets;
  j->req.data = j;
  if (uv_queue_work(srv->loop, &j->req, compress_work, compress_done) != 0) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "cannot start the compression");
    compress_job_free(j);
    return;
  }
  srv->pending_jobs++;
  c->busy = 1;
  srv_session_ref(s);
  return;
bad_region:
  srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: a region must be an array of vertex indices below %u",
                s->mesh->vertex_count);
  compress_job_free(j);
}

/* A clip can be played once it is compressed (frame clips) or at once (weight clips). */
static int playable(srv_rpc_call *call, const srv_clip *c) {
  if (c->kind == CLIP_WEIGHTS || c->compressed) return 1;
  srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "clip '%s' is not compressed yet: call anim.compress first", c->name);
  return 0;
}

static void reply_player(srv_rpc_call *call, const srv_session *s) { srv_rpc_reply(call, player_json(s)); }

void srv_anim_m_play(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_clip *c = want_clip(s, call, params, "clip");
  if (!c || !playable(call, c)) return;
  double speed = s->anim->speed, frame = 0;
  int loop = s->anim->loop, hf;
  if (opt_number(call, params, "speed", &speed) < 0 || opt_bool(call, params, "loop", &loop) < 0 ||
      (hf = opt_number(call, params, "frame", &frame)) < 0)
    return;
  if (!(speed > 0 && speed <= 100) || frame < 0 || frame >= c->frame_count) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: speed must be in (0, 100] and frame in [0, %u)",
                  c->frame_count);
    return;
  }
  srv_anim *a = s->anim;
  if (a->cur.clip && a->cur.clip != c) clear_clip(srv, s, a->cur.clip);
  if (a->next.clip && a->next.clip != c) clear_clip(srv, s, a->next.clip);
  a->next.clip = NULL;
  a->cur.clip = c;
  a->cur.t = c->kind == CLIP_WEIGHTS ? c->wclip->times[(uint32_t)frame] : floor(frame) / c->fps;
  a->speed = speed;
  a->loop = loop;
  if (c->kind != CLIP_WEIGHTS) { /* the mean at 1, once */
    float one = 1.0f;
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .count = 1, .indices = &c->mean_target, .values = &one};
    char why[256];
    if (srv_session_check(s, &op, why, sizeof(why)) != 0) {
      srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "%s", why);
      return;
    }
    srv_session_apply(srv, s, &op);
  }
  show(srv, s);
  a->playing = 1;
  kick(srv);
  reply_player(call, s);
}

void srv_anim_m_pause(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  s->anim->playing = 0;
  reply_player(call, s);
}

void srv_anim_m_stop(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim *a = s->anim;
  a->playing = 0;
  if (a->cur.clip) clear_clip(srv, s, a->cur.clip);
  if (a->next.clip) clear_clip(srv, s, a->next.clip);
  a->cur.clip = a->next.clip = NULL;
  reply_player(call, s);
}

void srv_anim_m_seek(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim *a = s->anim;
  if (!a->cur.clip) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "nothing to seek in: no clip is playing or paused (anim.play)");
    return;
  }
  double frame = 0, time = 0;
  int hf = opt_number(call, params, "frame", &frame), ht = hf < 0 ? -1 : opt_number(call, params, "time", &time);
  if (hf < 0 || ht < 0) return;
  const srv_clip *c = a->cur.clip;
  if (hf == ht || (hf && (frame < 0 || frame >= c->frame_count)) || (ht && (time < 0 || time > clip_duration(c)))) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS,
                  "invalid params: give \"frame\" in [0, %u) or \"time\" in [0, %g] seconds, one of them", c->frame_count,
                  clip_duration(c));
    return;
  }
  a->cur.t = hf ? (c->kind == CLIP_WEIGHTS ? c->wclip->times[(uint32_t)frame] : floor(frame) / c->fps) : time;
  show(srv, s);
  reply_player(call, s);
}

void srv_anim_m_speed(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  double speed = 0;
  int r = opt_number(call, params, "speed", &speed);
  if (r < 0) return;
  if (r == 0 || !(speed > 0 && speed <= 100)) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"speed\" must be a number in (0, 100]");
    return;
  }
  s->anim->speed = speed;
  reply_player(call, s);
}

void srv_anim_m_loop(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  int loop = 0, r = opt_bool(call, params, "loop", &loop);
  if (r < 0) return;
  if (r == 0) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"loop\" must be true or false");
    return;
  }
  s->anim->loop = loop;
  reply_player(call, s);
}

void srv_anim_m_blend(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim *a = s->anim;
  srv_clip *c = want_clip(s, call, params, "clip");
  if (!c || !playable(call, c)) return;
  double duration = 0.5;
  if (opt_number(call, params, "duration", &duration) < 0) return;
  if (!(duration >= 0 && duration <= 3600)) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"duration\" must be in [0, 3600] seconds");
    return;
  }
  if (!a->cur.clip || !a->playing) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "anim.blend crossfades from the clip playing now, and none is (anim.play)");
    return;
  }
  if (c == a->cur.clip || a->next.clip) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "%s", c == a->cur.clip ? "that clip is the one playing"
                                                                     : "a crossfade is already running");
    return;
  }
  a->next.clip = c;
  a->next.t = 0;
  a->next.shown = -1;
  a->fade_elapsed = 0;
  a->fade_duration = duration;
  show(srv, s);
  reply_player(call, s);
}

void srv_anim_m_record_start(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim *a = s->anim;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "clip");
  double fps = 30, max_frames = 1800;
  if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > 200) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: \"clip\" must be the new clip's name (1 to 200 bytes)");
    return;
  }
  if (opt_number(call, params, "fps", &fps) < 0 || opt_number(call, params, "max_frames", &max_frames) < 0) return;
  if (!(fps >= 1 && fps <= 120) || !(max_frames >= 2 && max_frames <= 100000)) {
    srv_rpc_error(call, SRV_RPC_INVALID_PARAMS, "invalid params: fps must be in [1, 120] and max_frames in [2, 100000]");
    return;
  }
  if (a->recording || a->rec_name) {
    if (a->recording)
      srv_rpc_error(call, SRV_RPC_BUSY, "session '%s' is recording '%s' already (anim.record_stop first)", s->name,
                    a->rec_name);
    else
      srv_rpc_error(call, SRV_RPC_BUSY, "recording '%s' stopped at %u frames and waits to be saved: anim.record_stop",
                    a->rec_name, a->rec_count);
    return;
  }
  if (find_clip(a, name->valuestring)) {
    srv_rpc_error(call, SRV_RPC_SESSION_EXISTS, "session '%s' already has a clip called '%s'", s->name,
                  name->valuestring);
    return;
  }
  a->rec_name = strdup(name->valuestring);
  if (!a->rec_name) {
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    return;
  }
  a->rec_fps = fps;
  a->rec_max = (uint32_t)max_frames;
  a->rec_acc = 0;
  a->rec_count = 0;
  a->recording = 1;
  record_sample(s); /* the state at the start is frame 0 */
  kick(srv);
  reply_player(call, s);
}

void srv_anim_m_record_stop(srv_server *srv, srv_rpc_call *call, cJSON *params) {
  srv_session *s = srv_rpc_want_session(srv, call, params);
  if (!s) return;
  srv_anim *a = s->anim;
  if (!a->rec_name) {
    srv_rpc_error(call, SRV_RPC_OUT_OF_RANGE, "session '%s' is not recording (anim.record_start)", s->name);
    return;
  }
  srv_clip *c = calloc(1, sizeof(*c));
  mesh_target *tg = malloc(sizeof(mesh_target) * (s->mesh->target_count + 1));
  if (!c || !tg) {
    free(c);
    free(tg);
    srv_rpc_error(call, SRV_RPC_INTERNAL, "out of memory");
    return;
  }
  if (s->mesh->target_count) memcpy(tg, s->mesh->targets, sizeof(mesh_target) * s->mesh->target_count);
  c->name = a->rec_name;
  c->kind = CLIP_RECORDED;
  c->fps = (float)a->rec_fps;
  c->frame_count = a->rec_count;
  c->rec = a->rec;
  c->rec_targets = tg;
  c->rec_target_count = s->mesh->target_count;
  add_clip(a, c);
  a->rec_name = NULL;
  a->rec = NULL;
  a->rec_count = a->rec_cap = 0;
  a->recording = 0;
  q_unref(a->rec_q);
  a->rec_q = NULL;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "clip", c->name);
  cJSON_AddNumberToObject(r, "frames", c->frame_count);
  cJSON_AddNumberToObject(r, "fps", c->fps);
  srv_rpc_reply(call, r);
}
