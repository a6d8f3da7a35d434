/*
 * srv_face.c — live face input (srv_face.h): frames of named values merged, rate-limited, mapped
 * onto a session's targets and applied as SET_WEIGHTS operations authored by the input; takes
 * as history steps; takes kept in the store as coalesced runs.
 *
 * Rate. An input applies at most `face_rate` times a second (a token bucket, take_token). A
 * finished frame is merged into the pending one (each name keeps its newest value) and applied
 * at once when a token is there, else when the input's timer fires as the next one comes: a
 * faster source is merged, never dropped, and the newest value of every name always lands.
 *
 * Takes. The first frame after a pause of `face_idle_ms` (or the first ever) opens a take: a
 * history step of its own (srv_history_new_step_id), which every frame of the take joins, so
 * history.list shows one step per take and one history.undo takes the whole take back.
 *
 * The store. A frame is not a record (invariant 5's records still describe every version):
 * each applied frame is marked `live`, srv_history.c writes no record for it, and the take's
 * frames since the last store become one coalesced record here — the targets they touched at
 * their newest values, covering versions first..last (srv_store_op.first_version) — written
 * when the take ends, every `face_flush_ms` during it, before any other operation on the
 * session (srv_face_on_applied, so the store's versions stay contiguous: restore replays such
 * a record as one operation and continues at its last version, srv_restore.c), and at stop.
 * So a 60 Hz take costs one write per flush period instead of 60 a second, and a kill -9 loses
 * at most the last `face_flush_ms` of it (the restored session is at the last stored version).
 *
 * DOES NOT read sockets (ports/srv_face_udp.c) or decode packets (protocol/).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "proto.h"
#include "mesh.h"
#include "srv_face.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_author.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_history.h"
#include "srv_record.h"
#include "srv_store.h"

typedef struct face_values { /* a frame: distinct names, each with its newest value */
  uint32_t n;
  char name[SRV_FACE_MAX_NAMES][SRV_FACE_NAME];
  float value[SRV_FACE_MAX_NAMES];
} face_values;

typedef struct face_entry {
  char source[SRV_FACE_NAME];
  char *target;
  float gain, offset;
} face_entry;

typedef struct srv_face_map { /* one session's mapping (srv_session.face_map) */
  int identity, presets;
  face_entry *e;
  uint32_t n;
} face_map;

typedef struct face_run { /* a take's frames since it was last stored */
  srv_session *s;         /* referenced while the run is open */
  uint64_t first, last;   /* versions */
  double time;            /* of its first frame */
  uint32_t n, cap;        /* targets touched, ascending, with their newest values */
  uint32_t *idx;
  float *val;
} face_run;

struct srv_face_input {
  srv_server *srv;
  srv_face_kind kind;
  int port;
  char listen[64];
  char *session;
  char author_name[32];
  uint32_t author;
  uv_timer_t timer;
  double tokens;            /* applies it may make now (a bucket of bucket_size() filled at face_rate) */
  uint64_t refill_ns;       /* uv_hrtime the bucket was last filled (0: never: it starts full) */
  uint64_t last_frame_ms;   /* uv_now of the last applied frame */
  uint64_t run_started_ms;
  int pending_frames;       /* frames merged into `pending` since the last apply */
  face_values building, pending;
  uint64_t step;            /* the take's history step (0: no take) */
  srv_session *step_session;
  face_run run;
  uint64_t runs_stored;
  uint64_t counts[SRV_FACE_COUNTERS];
  uint64_t received_ns;     /* uv_hrtime the datagram being handed over came (0: none) */
  uint32_t latency_ns[SRV_FACE_LATENCY_SAMPLES]; /* a ring of the newest frames' */
  uint64_t latency_count;
};

struct srv_face {
  srv_face_input **inputs;
  uint32_t count;
  face_map *file_map;       /* --face-map FILE's, for the inputs' sessions without one of their own */
  char *file_sessions[2];
};

/* ---- the default mapping's VRM 1.0 presets (VRMC_vrm-1.0 expressions) onto ARKit names ---------- */

static const srv_face_preset PRESETS[] = {
    {"happy", {{"mouthSmileLeft", 1}, {"mouthSmileRight", 1}, {"cheekSquintLeft", 0.5f}, {"cheekSquintRight", 0.5f}}},
    {"angry", {{"browDownLeft", 1}, {"browDownRight", 1}, {"noseSneerLeft", 0.5f}, {"noseSneerRight", 0.5f}}},
    {"sad", {{"mouthFrownLeft", 1}, {"mouthFrownRight", 1}, {"browInnerUp", 1}}},
    {"relaxed", {{"mouthSmileLeft", 0.5f}, {"mouthSmileRight", 0.5f}, {"eyeSquintLeft", 0.3f}, {"eyeSquintRight", 0.3f}}},
    {"surprised", {{"eyeWideLeft", 1}, {"eyeWideRight", 1}, {"browInnerUp", 1}, {"jawOpen", 0.5f}}},
    {"aa", {{"jawOpen", 1}}},
    {"ih", {{"jawOpen", 0.3f}, {"mouthStretchLeft", 0.5f}, {"mouthStretchRight", 0.5f}}},
    {"ou", {{"mouthPucker", 1}, {"jawOpen", 0.2f}}},
    {"ee", {{"mouthStretchLeft", 0.7f}, {"mouthStretchRight", 0.7f}, {"jawOpen", 0.2f}}},
    {"oh", {{"mouthFunnel", 1}, {"jawOpen", 0.4f}}},
    {"blink", {{"eyeBlinkLeft", 1}, {"eyeBlinkRight", 1}}},
    {"blinkLeft", {{"eyeBlinkLeft", 1}}},
    {"blinkRight", {{"eyeBlinkRight", 1}}},
    {"lookUp", {{"eyeLookUpLeft", 1}, {"eyeLookUpRight", 1}}},
    {"lookDown", {{"eyeLookDownLeft", 1}, {"eyeLookDownRight", 1}}},
    {"lookLeft", {{"eyeLookOutLeft", 1}, {"eyeLookInRight", 1}}},
    {"lookRight", {{"eyeLookInLeft", 1}, {"eyeLookOutRight", 1}}},
    {"neutral", {{NULL, 0}}},
};
#define PRESET_COUNT (sizeof(PRESETS) / sizeof(PRESETS[0]))

const srv_face_preset *srv_face_preset_at(uint32_t i) { return i < PRESET_COUNT ? &PRESETS[i] : NULL; }

/* ---- lifetime -------------------------------------------------------------------------------------- */

int srv_face_create(srv_server *srv) {
  srv->face = calloc(1, sizeof(srv_face));
  return srv->face ? 0 : UV_ENOMEM;
}

static void run_drop(face_run *r) {
  if (r->s) srv_session_unref(r->s);
  r->s = NULL;
  r->first = r->last = 0;
  r->n = 0;
}

static void free_input(uv_handle_t *h) {
  srv_face_input *in = h->data;
  free(in->run.idx);
  free(in->run.val);
  free(in->session);
  free(in);
}

static void map_fini(face_map *m) {
  for (uint32_t i = 0; i < m->n; i++) free(m->e[i].target);
  free(m->e);
}

static void session_map_fini(srv_session *s) {
  if (s->face_map) map_fini(s->face_map);
  free(s->face_map);
  s->face_map = NULL;
}

static void store_run(srv_face_input *in);

void srv_face_shutdown(srv_server *srv) {
  srv_face *f = srv->face;
  if (!f) return;
  for (uint32_t i = 0; i < f->count; i++) {
    srv_face_input *in = f->inputs[i];
    store_run(in);
    run_drop(&in->run);
    in->step = 0;
    uv_timer_stop(&in->timer);
    uv_close((uv_handle_t *)&in->timer, free_input);
  }
  f->count = 0;
}

void srv_face_destroy(srv_server *srv) {
  srv_face *f = srv->face;
  if (!f) return;
  free(f->inputs);
  if (f->file_map) map_fini(f->file_map);
  free(f->file_map);
  for (int k = 0; k < 2; k++) free(f->file_sessions[k]);
  free(f);
  srv->face = NULL;
}

static void on_timer(uv_timer_t *t);

srv_face_input *srv_face_input_add(srv_server *srv, srv_face_kind kind, const char *listen, int port,
                                   const char *session, char *err, size_t errlen) {
  srv_face *f = srv->face;
  srv_face_input **g = realloc(f->inputs, sizeof(*g) * (f->count + 1));
  srv_face_input *in = calloc(1, sizeof(*in));
  if (g) f->inputs = g;
  if (!g || !in || !(in->session = strdup(session))) {
    if (in) free(in->session);
    free(in);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  in->srv = srv;
  in->kind = kind;
  in->port = port;
  snprintf(in->listen, sizeof(in->listen), "%s", listen);
  snprintf(in->author_name, sizeof(in->author_name), "%s:%d", kind == SRV_FACE_VMC ? "vmc" : "livelink", port);
  if (srv_authors_intern(&srv->authors, srv->store, in->author_name, &in->author) != 0) {
    free(in->session);
    free(in);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  uv_timer_init(srv->loop, &in->timer);
  in->timer.data = in;
  f->inputs[f->count++] = in;
  return in;
}

void srv_face_count(srv_face_input *in, srv_face_counter which) { in->counts[which]++; }

void srv_face_received(srv_face_input *in, uint64_t ns) { in->received_ns = ns; }

static int cmp_u32(const void *a, const void *b);

static void latency_info(const srv_face_input *in, srv_face_info *out) {
  uint32_t n = in->latency_count < SRV_FACE_LATENCY_SAMPLES ? (uint32_t)in->latency_count : SRV_FACE_LATENCY_SAMPLES;
  uint32_t sorted[SRV_FACE_LATENCY_SAMPLES];
  if (n == 0) return;
  memcpy(sorted, in->latency_ns, sizeof(uint32_t) * n);
  qsort(sorted, n, sizeof(uint32_t), cmp_u32);
  out->latency_samples = n;
  out->latency_p50_us = sorted[n / 2] / 1e3;
  out->latency_p99_us = sorted[(uint32_t)(0.99 * (n - 1))] / 1e3;
  out->latency_max_us = sorted[n - 1] / 1e3;
}

uint32_t srv_face_input_count(const srv_server *srv) { return srv->face ? srv->face->count : 0; }

void srv_face_input_info(const srv_server *srv, uint32_t i, srv_face_info *out) {
  const srv_face_input *in = srv->face->inputs[i];
  memset(out, 0, sizeof(*out));
  out->kind = in->kind;
  out->port = in->port;
  out->listen = in->listen;
  out->session = in->session;
  out->author = in->author_name;
  out->rate = in->srv->cfg.face_rate;
  memcpy(out->counts, in->counts, sizeof(out->counts));
  out->take_step = in->step;
  out->run_first_version = in->run.s ? in->run.first : 0;
  out->runs_stored = in->runs_stored;
  latency_info(in, out);
}

/* ---- frames ---------------------------------------------------------------------------------------- */

static int values_put(face_values *v, const char *name, size_t len, float value) {
  for (uint32_t i = 0; i < v->n; i++)
    if (strncmp(v->name[i], name, len) == 0 && v->name[i][len] == '\0') {
      v->value[i] = value;
      return 0;
    }
  if (v->n == SRV_FACE_MAX_NAMES) return -1;
  memcpy(v->name[v->n], name, len);
  v->name[v->n][len] = '\0';
  v->value[v->n++] = value;
  return 0;
}

int srv_face_set(srv_face_input *in, const char *name, size_t len, float value) {
  if (len >= SRV_FACE_NAME) len = SRV_FACE_NAME - 1; /* cut: no target is named so (the mapping's cap) */
  return values_put(&in->building, name, len, value);
}

void srv_face_discard(srv_face_input *in) { in->building.n = 0; }

static void apply_pending(srv_face_input *in);

/* The rate is a token bucket refilled at face_rate a second that holds FACE_JITTER_S of applies
 * more than one: a faster source is held to the rate (with that many applies more at most in
 * any second), and a source at the rate whose frames come late and then catch up never waits
 * while it is no later than FACE_JITTER_S. Measured (docs/performance.md, deform-bench face):
 * with a bucket of two (a tolerance of one period, 17 ms at 60 Hz) a 60 Hz sender that was once
 * 30 ms late left every later frame of the take waiting up to 11 ms for its token, because a
 * source exactly at the rate never refills a bucket it has emptied. */
#define FACE_JITTER_S 0.1

static double bucket_size(double rate) { return 1.0 + ceil(rate * FACE_JITTER_S); }

/* Takes a token and returns 0, or returns the milliseconds until one is there. */
static uint64_t take_token(srv_face_input *in) {
  double rate = in->srv->cfg.face_rate, full = bucket_size(rate);
  uint64_t now = uv_hrtime();
  in->tokens = in->refill_ns ? in->tokens + (double)(now - in->refill_ns) * rate / 1e9 : full;
  if (in->tokens > full) in->tokens = full;
  in->refill_ns = now;
  if (in->tokens >= 1.0) {
    in->tokens -= 1.0;
    return 0;
  }
  return (uint64_t)ceil((1.0 - in->tokens) * 1000.0 / rate);
}

void srv_face_commit(srv_face_input *in) {
  in->counts[SRV_FACE_FRAMES]++;
  for (uint32_t i = 0; i < in->building.n; i++)
    if (values_put(&in->pending, in->building.name[i], strlen(in->building.name[i]), in->building.value[i]) != 0)
      break; /* (both hold at most SRV_FACE_MAX_NAMES; a pending one full of other names keeps them) */
  in->building.n = 0;
  if (in->pending_frames++) in->counts[SRV_FACE_MERGED]++;
  if (in->pending_frames > 1) return; /* an apply is already waiting for its token */
  uint64_t wait_ms = take_token(in);
  if (wait_ms == 0) {
    apply_pending(in);
    return;
  }
  in->counts[SRV_FACE_HELD]++;
  if (!uv_is_active((uv_handle_t *)&in->timer) || uv_timer_get_due_in(&in->timer) > wait_ms)
    uv_timer_start(&in->timer, on_timer, wait_ms, 0);
}

/* ---- the mapping ------------------------------------------------------------------------------------ */

/* The mapping that drives s: its own (face.map_set), else --face-map FILE's where s is an input's
 * session, else NULL (the default: identity and presets). */
static const face_map *map_for(const srv_server *srv, const srv_session *s) {
  const srv_face *f = srv->face;
  if (s->face_map) return s->face_map;
  for (int k = 0; f && f->file_map && k < 2; k++)
    if (f->file_sessions[k] && strcmp(f->file_sessions[k], s->name) == 0) return f->file_map;
  return NULL;
}

typedef struct contrib { /* per target of the session: the frame's sum */
  uint32_t n, cap;
  uint32_t *idx;
  float *val;
} contrib;

static int contrib_add(contrib *c, uint32_t t, float v) {
  for (uint32_t i = 0; i < c->n; i++)
    if (c->idx[i] == t) {
      c->val[i] += v;
      return 0;
    }
  if (c->n == c->cap) {
    uint32_t cap = c->cap ? 2 * c->cap : 64;
    uint32_t *gi = realloc(c->idx, sizeof(uint32_t) * cap);
    if (gi) c->idx = gi;
    float *gv = realloc(c->val, sizeof(float) * cap);
    if (gv) c->val = gv;
    if (!gi || !gv) return -1;
    c->cap = cap;
  }
  c->idx[c->n] = t;
  c->val[c->n++] = v;
  return 0;
}

/* What one source value adds to the targets: the map's entries for it, else the same-named
 * target (identity), else a VRM preset's. Returns how many targets it reached, or -1 (memory). */
static int map_value(const face_map *m, const srv_session *s, const char *name, float x, contrib *c) {
  int reached = 0, listed = 0;
  for (uint32_t i = 0; m && i < m->n; i++) {
    if (strcmp(m->e[i].source, name) != 0) continue;
    listed = 1;
    int t = mesh_find_target(s->mesh, m->e[i].target);
    if (t < 0) continue;
    if (contrib_add(c, (uint32_t)t, m->e[i].gain * x + m->e[i].offset)) return -1;
    reached++;
  }
  if (listed) return reached;
  int t = !m || m->identity ? mesh_find_target(s->mesh, name) : -1;
  if (t >= 0) return contrib_add(c, (uint32_t)t, x) ? -1 : 1;
  for (uint32_t p = 0; (!m || m->presets) && p < PRESET_COUNT; p++) {
    if (strcmp(PRESETS[p].name, name) != 0) continue;
    for (int k = 0; k < 4 && PRESETS[p].to[k].target; k++) {
      t = mesh_find_target(s->mesh, PRESETS[p].to[k].target);
      if (t >= 0 && contrib_add(c, (uint32_t)t, PRESETS[p].to[k].gain * x)) return -1;
      reached += t >= 0;
    }
    return reached ? reached : (PRESETS[p].to[0].target ? 0 : 1); /* neutral reaches nothing, knowingly */
  }
  return 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* The pending frame as ascending (target, value) pairs, held to each target's range, without
 * combination targets (their weight is their drivers') and without values that change nothing. */
static int frame_weights(srv_face_input *in, srv_session *s, contrib *c) {
  const face_map *m = map_for(in->srv, s);
  for (uint32_t i = 0; i < in->pending.n; i++) {
    int r = map_value(m, s, in->pending.name[i], in->pending.value[i], c);
    if (r < 0) return -1;
    if (r == 0) in->counts[SRV_FACE_UNKNOWN]++;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < c->n; i++) {
    const srv_target *t = &s->targets[c->idx[i]];
    float v = c->val[i] < t->min ? t->min : c->val[i] > t->max ? t->max : c->val[i];
    if (t->driver_count || !isfinite(v) || v == t->value) continue;
    c->idx[k] = c->idx[i];
    c->val[k++] = v;
  }
  c->n = k;
  /* sort the pairs by target (insertion: a frame reaches tens of targets) */
  for (uint32_t i = 1; i < c->n; i++)
    for (uint32_t j = i; j > 0 && cmp_u32(&c->idx[j - 1], &c->idx[j]) > 0; j--) {
      uint32_t ti = c->idx[j];
      float tv = c->val[j];
      c->idx[j] = c->idx[j - 1], c->val[j] = c->val[j - 1];
      c->idx[j - 1] = ti, c->val[j - 1] = tv;
    }
  return 0;
}

/* ---- runs: a take's frames as one stored record ------------------------------------------------------ */

static double now_s(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int run_merge(face_run *r, const uint32_t *idx, const float *val, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k = 0;
    while (k < r->n && r->idx[k] < idx[i]) k++;
    if (k < r->n && r->idx[k] == idx[i]) {
      r->val[k] = val[i];
      continue;
    }
    if (r->n == r->cap) {
      uint32_t cap = r->cap ? 2 * r->cap : 64;
      uint32_t *gi = realloc(r->idx, sizeof(uint32_t) * cap);
      if (gi) r->idx = gi;
      float *gv = realloc(r->val, sizeof(float) * cap);
      if (gv) r->val = gv;
      if (!gi || !gv) return -1;
      r->cap = cap;
    }
    memmove(r->idx + k + 1, r->idx + k, sizeof(uint32_t) * (r->n - k));
    memmove(r->val + k + 1, r->val + k, sizeof(float) * (r->n - k));
    r->idx[k] = idx[i];
    r->val[k] = val[i];
    r->n++;
  }
  return 0;
}

/* The open run as one record covering its versions, then a new run begins with the next frame. */
static void store_run(srv_face_input *in) {
  face_run *r = &in->run;
  srv_server *srv = in->srv;
  if (!r->s) return;
  srv_session *s = r->s;
  if (srv->store && s->store_id && !s->closed && r->n) {
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = in->author, .cause = SRV_CAUSE_FACE, .step = in->step,
                 .count = r->n, .indices = r->idx, .values = r->val};
    srv_before before = {.target_count = s->mesh->target_count};
    proto_buf rec;
    proto_buf_init(&rec);
    uint32_t changed = 0;
    srv_store_op so = {r->first, r->last, in->step, in->author, r->time, SRV_CAUSE_FACE, 0, NULL, 0};
    if (srv_record_encode_op(s, &op, &before, &rec, &changed) == 0) {
      so.changed = changed, so.body = rec.data, so.len = rec.len;
      if (srv_store_put_op(srv->store, s->store_id, &so) == 0) in->runs_stored++;
      else srv_log(SRV_LOG_ERROR, "session %s: cannot queue %s's run for the store (out of memory)", s->name, in->author_name);
    } else {
      srv_log(SRV_LOG_ERROR, "session %s: cannot encode %s's run (out of memory)", s->name, in->author_name);
    }
    proto_buf_fini(&rec);
  }
  run_drop(r);
}

void srv_face_on_applied(srv_server *srv, srv_session *s, const srv_op *op, uint64_t version) {
  (void)version;
  srv_face *f = srv->face;
  if (!f) return;
  for (uint32_t i = 0; i < f->count; i++) {
    srv_face_input *in = f->inputs[i];
    if (in->run.s == s && !(op->live && op->author == in->author)) store_run(in);
  }
}

/* ---- applying ------------------------------------------------------------------------------------------ */

static void end_take(srv_face_input *in) {
  store_run(in);
  in->step = 0;
  in->step_session = NULL;
}

static void apply_pending(srv_face_input *in) {
  srv_server *srv = in->srv;
  uint64_t now_ms = uv_now(srv->loop);
  in->pending_frames = 0;
  srv_session *s = srv->stopping ? NULL : srv_session_find(srv, in->session);
  if (!s || s->restoring) {
    in->counts[SRV_FACE_NO_SESSION]++;
    in->pending.n = 0;
    end_take(in);
    return;
  }
  if (in->step && (in->step_session != s || now_ms - in->last_frame_ms >= srv->cfg.face_idle_ms)) end_take(in);
  contrib c = {0};
  if (frame_weights(in, s, &c) != 0) {
    srv_log(SRV_LOG_WARN, "session %s: %s's frame dropped (out of memory)", s->name, in->author_name);
  } else if (c.n) {
    if (!in->step) {
      in->step = srv_history_new_step_id(s);
      in->step_session = s;
    }
    srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = in->author, .cause = SRV_CAUSE_FACE, .step = in->step,
                 .live = 1, .count = c.n, .indices = c.idx, .values = c.val};
    char why[256];
    if (srv_session_check(s, &op, why, sizeof(why)) != 0) {
      srv_log(SRV_LOG_WARN, "session %s: %s's frame refused: %s", s->name, in->author_name, why);
    } else {
      int flush = in->run.s && now_ms - in->run_started_ms >= srv->cfg.face_flush_ms;
      uint64_t v = srv_session_apply(srv, s, &op); /* the frame is on every viewer's socket now */
      if (v && in->received_ns) {
        uint64_t took = uv_hrtime() - in->received_ns;
        in->latency_ns[in->latency_count++ % SRV_FACE_LATENCY_SAMPLES] = took > UINT32_MAX ? UINT32_MAX : (uint32_t)took;
      }
      /* The run so far (the frames before this one) is stored after the fan-out, never before
       * it: its record's encoding and queueing are off the datagram's path to the viewers. */
      if (flush) store_run(in);
      if (v) {
        in->counts[SRV_FACE_APPLIED]++;
        if (!in->run.s) {
          srv_session_ref(s);
          in->run.s = s;
          in->run.first = v;
          in->run.time = now_s();
          in->run_started_ms = now_ms;
        }
        in->run.last = v;
        if (run_merge(&in->run, c.idx, c.val, c.n) != 0) store_run(in); /* what merged so far is stored */
      }
    }
  }
  in->last_frame_ms = now_ms;
  free(c.idx);
  free(c.val);
  in->pending.n = 0;
  uv_timer_start(&in->timer, on_timer, srv->cfg.face_idle_ms, 0); /* the end of the take, unless a frame comes */
}

static void on_timer(uv_timer_t *t) {
  srv_face_input *in = t->data;
  if (in->pending_frames) {
    uint64_t wait_ms = take_token(in);
    if (wait_ms) uv_timer_start(&in->timer, on_timer, wait_ms, 0);
    else apply_pending(in);
    return;
  }
  end_take(in); /* idle for face_idle_ms: the take is over */
}

/* ---- mappings as JSON ------------------------------------------------------------------------------------ */

static int parse_entry(face_entry *e, const char *source, const cJSON *v, char *err, size_t errlen) {
  const cJSON *target = cJSON_IsString(v) ? v : cJSON_GetObjectItemCaseSensitive(v, "target");
  const cJSON *gain = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "gain") : NULL;
  const cJSON *offset = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "offset") : NULL;
  if (!cJSON_IsString(target) || !target->valuestring[0] || strlen(target->valuestring) > PROTO_MAX_NAME ||
      (gain && !cJSON_IsNumber(gain)) || (offset && !cJSON_IsNumber(offset))) {
    snprintf(err, errlen, "each entry of \"map\" is a target name or {\"target\": NAME, \"gain\": g, \"offset\": o}");
    return SRV_EPARAMS;
  }
  double g = gain ? gain->valuedouble : 1, o = offset ? offset->valuedouble : 0;
  if (!isfinite(g) || !isfinite(o) || fabs(g) > 1000 || fabs(o) > 1000) {
    snprintf(err, errlen, "a gain and an offset are finite numbers within ±1000");
    return SRV_EPARAMS;
  }
  snprintf(e->source, sizeof(e->source), "%s", source);
  e->gain = (float)g, e->offset = (float)o;
  e->target = strdup(target->valuestring);
  if (!e->target) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  return 0;
}

static int parse_map(face_map *m, const cJSON *j, char *err, size_t errlen) {
  const cJSON *identity = cJSON_GetObjectItemCaseSensitive(j, "identity");
  const cJSON *presets = cJSON_GetObjectItemCaseSensitive(j, "presets");
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(j, "map"), *src;
  if (!cJSON_IsObject(j) || (identity && !cJSON_IsBool(identity)) || (presets && !cJSON_IsBool(presets)) ||
      (map && !cJSON_IsObject(map))) {
    snprintf(err, errlen, "a mapping is {\"identity\": bool, \"presets\": bool, \"map\": {SOURCE: entries}}");
    return SRV_EPARAMS;
  }
  m->identity = !identity || cJSON_IsTrue(identity);
  m->presets = !presets || cJSON_IsTrue(presets);
  uint32_t total = 0;
  cJSON_ArrayForEach(src, map) total += cJSON_IsArray(src) ? (uint32_t)cJSON_GetArraySize(src) : 1;
  if (total > SRV_FACE_MAX_ENTRIES) {
    snprintf(err, errlen, "a mapping has at most %d entries, not %u", SRV_FACE_MAX_ENTRIES, total);
    return SRV_EPARAMS;
  }
  m->e = calloc(total ? total : 1, sizeof(face_entry));
  if (!m->e) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  cJSON_ArrayForEach(src, map) {
    if (!src->string[0] || strlen(src->string) >= SRV_FACE_NAME) {
      snprintf(err, errlen, "a source name in \"map\" has 1 to %d bytes", SRV_FACE_NAME - 1);
      return SRV_EPARAMS;
    }
    const cJSON *one = src;
    int array = cJSON_IsArray(src);
    if (array) one = src->child;
    for (; one; one = array ? one->next : NULL) {
      int rc = parse_entry(&m->e[m->n], src->string, one, err, errlen);
      if (rc) return rc;
      m->n++;
    }
  }
  return 0;
}

/* The session's mapping becomes m (moved: m's entries are the session's now). */
static int map_install(srv_session *s, face_map *m) {
  face_map *to = s->face_map ? s->face_map : calloc(1, sizeof(*to));
  if (!to) return SRV_EINTERNAL;
  if (s->face_map) map_fini(to);
  *to = *m;
  s->face_map = to;
  s->face_map_fini = session_map_fini;
  return 0;
}

int srv_face_map_set(srv_server *srv, srv_session *s, const cJSON *mapping, char *err, size_t errlen) {
  face_map m = {0};
  int rc = parse_map(&m, mapping, err, errlen);
  char *text = NULL;
  if (rc == 0 && srv->store && s->store_id) {
    /* Stored as face.map_get writes it (one form whatever the caller wrote), queued before the
     * session takes it: a mapping that cannot be kept is not taken. */
    face_map *old = s->face_map;
    s->face_map = &m;
    cJSON *j = srv_face_map_get(srv, s);
    s->face_map = old;
    text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text || srv_store_put_face_map(srv->store, s->store_id, text, strlen(text)) != 0) rc = SRV_EINTERNAL;
  }
  if (rc == 0) rc = map_install(s, &m);
  free(text);
  if (rc) {
    if (rc == SRV_EINTERNAL) snprintf(err, errlen, "out of memory");
    map_fini(&m);
  }
  return rc;
}

int srv_face_map_load(srv_session *s, const uint8_t *json, size_t len, char *err, size_t errlen) {
  cJSON *j = cJSON_ParseWithLength((const char *)json, len);
  face_map m = {0};
  char why[256] = "not JSON";
  int rc = j ? parse_map(&m, j, why, sizeof(why)) : SRV_EPARAMS;
  cJSON_Delete(j);
  if (rc == 0) rc = map_install(s, &m);
  if (rc) {
    map_fini(&m);
    snprintf(err, errlen, "session '%s': its stored face mapping does not read: %s", s->name,
             rc == SRV_EINTERNAL ? "out of memory" : why);
    return SRV_EIO;
  }
  return 0;
}

int srv_face_map_file(srv_server *srv, const cJSON *mapping, const char *const sessions[2], char *err, size_t errlen) {
  srv_face *f = srv->face;
  face_map *m = calloc(1, sizeof(*m));
  int rc = m ? parse_map(m, mapping, err, errlen) : SRV_EINTERNAL;
  for (int k = 0; rc == 0 && k < 2; k++)
    if (!(f->file_sessions[k] = strdup(sessions[k]))) rc = SRV_EINTERNAL;
  if (rc == SRV_EINTERNAL) snprintf(err, errlen, "out of memory");
  if (rc && m) map_fini(m);
  if (rc) free(m);
  else f->file_map = m;
  return rc;
}

cJSON *srv_face_map_get(const srv_server *srv, const srv_session *s) {
  const face_map *m = map_for(srv, s);
  cJSON *r = cJSON_CreateObject(), *map = cJSON_CreateObject();
  if (!r || !map) {
    cJSON_Delete(r);
    cJSON_Delete(map);
    return NULL;
  }
  cJSON_AddBoolToObject(r, "identity", !m || m->identity);
  cJSON_AddBoolToObject(r, "presets", !m || m->presets);
  for (uint32_t i = 0; m && i < m->n; i++) {
    cJSON *list = cJSON_GetObjectItemCaseSensitive(map, m->e[i].source);
    if (!list) list = cJSON_AddArrayToObject(map, m->e[i].source);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "target", m->e[i].target);
    cJSON_AddNumberToObject(e, "gain", m->e[i].gain);
    cJSON_AddNumberToObject(e, "offset", m->e[i].offset);
    cJSON_AddItemToArray(list, e);
  }
  cJSON_AddItemToObject(r, "map", map);
  return r;
}
