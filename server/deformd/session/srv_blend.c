/*
 * srv_blend.c — blendshape weight solves on a session (server/blend.h) on the thread pool:
 * direct manipulation (the user drags pinned vertices; the server finds the target weights
 * that put them there) and fitting a whole shape onto the targets.
 *
 * Pins. A session keeps up to SRV_BLEND_CACHE factorised pin systems (blend_pins), keyed by
 * (pinned vertices in request order, solved targets, λ) and evicted least recently used first,
 * so a drag of the same pins is one back-substitution. The life of a request:
 *
 *   arrives -> validated on the loop; becomes the session's pending solve (a newer request
 *              replaces it: the newest pin positions win) and its reply joins the waiting list
 *   starts  -> when no pin job runs: the solved set, ranges, current values, weights and the
 *              sculpt offsets at the pins are copied on the loop (one consistent state), the
 *              cache is looked up, a job is queued with the session referenced
 *   job     -> factorise if the key was not cached; r = pins − (base + sculpt + the unsolved
 *              targets at their weights) at each pin; one blend_pins_solve()
 *   done    -> the solved weights that changed become one SET_WEIGHTS op (one WEIGHTS frame);
 *              every reply that was waiting gets the same result; a newer pending request
 *              starts the next job
 *
 * At most one pin job runs per session, so a cached handle is never used by two threads.
 * Combination targets are never solved; their weight (a product of drivers' weights) is held
 * at its value when the solve starts, like every other unsolved target.
 *
 * Fit. Each blend.fit is a job of its own (at most SRV_BLEND_MAX_FITS running per session): the
 * state is captured on the loop (srv_state_capture); the job imports the shape when it is a
 * file, builds the displacement and runs blend_fit(); with apply, done applies one SET_WEIGHTS.
 *
 * DOES NOT parse requests (srv_blend_rpc.c, srv_stream.c) or solve (blend.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blend.h"
#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "srv_blend.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_import.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_state.h"

#define SRV_BLEND_CACHE 8          /* factorised pin systems kept per session */
#define SRV_BLEND_MAX_WAITING 1024 /* solve requests waiting for the running one, per session */
#define SRV_BLEND_MAX_FITS 4       /* fit jobs running per session */
#define SRV_BLEND_MAX_BYTES (256.0 * 1048576.0) /* the dense matrices of one solve or fit */

/* A pin solve as requested (copied), waiting for its turn. */
typedef struct pin_request {
  uint32_t *vertices;
  double *positions;
  uint32_t pin_count;
  double lambda;
  int keep_close;
  uint32_t *targets; /* explicit solved set, or NULL */
  uint32_t target_count;
  uint32_t author;
} pin_request;

/* A cached factorisation and its key. */
typedef struct pin_entry {
  blend_pins *pins;
  uint32_t *vertices;
  uint32_t pin_count;
  uint32_t *solved;
  uint32_t solved_count;
  double lambda;
  uint64_t used; /* LRU stamp */
  int busy;      /* the running job uses it */
} pin_entry;

typedef struct srv_blend {
  srv_session *session;
  pin_entry cache[SRV_BLEND_CACHE];
  uint32_t cache_count;
  uint64_t clock;
  int running;       /* a pin job is on the pool */
  int has_pending;
  pin_request pending;
  srv_reply *waiting; /* answered by the next pin job that ends */
  uint32_t nwaiting, capwaiting;
  uint32_t fits;     /* fit jobs on the pool */
} srv_blend;

/* ---- helpers ------------------------------------------------------------------------------- */

static void request_free(pin_request *r) {
  free(r->vertices);
  free(r->positions);
  free(r->targets);
  memset(r, 0, sizeof(*r));
}

static void entry_free(pin_entry *e) {
  blend_pins_destroy(e->pins);
  free(e->vertices);
  free(e->solved);
  memset(e, 0, sizeof(*e));
}

static srv_blend *blend_of(srv_session *s) {
  if (!s->blend) {
    s->blend = calloc(1, sizeof(srv_blend));
    if (s->blend) s->blend->session = s;
  }
  return s->blend;
}

/* Frees the session's blend state once no job uses it. */
static void blend_release(srv_session *s) {
  srv_blend *sb = s->blend;
  if (!sb || sb->running || sb->fits) return;
  for (uint32_t i = 0; i < sb->nwaiting; i++)
    srv_reply_error(&sb->waiting[i], SRV_ENOSESSION, "the session was closed");
  free(sb->waiting);
  request_free(&sb->pending);
  for (uint32_t i = 0; i < sb->cache_count; i++) entry_free(&sb->cache[i]);
  free(sb);
  s->blend = NULL;
}

/* Whether target t is a copy of an earlier target already in `flags` (mesh_targets_same: the
 * demo head's jawOpen is its jaw_open): solving both could not tell them apart. */
static int copy_of_earlier(const mesh *m, uint32_t t, const uint8_t *flags) {
  for (uint32_t u = 0; u < t; u++)
    if (flags[u] && mesh_targets_same(&m->targets[u], &m->targets[t])) return 1;
  return 0;
}

/* The solved targets: the explicit list, or every target neither muted, a combination, nor a copy
 * of an earlier one.
 * Fills flags (target_count) and, when list is not NULL, the ascending list and its length.
 * Returns 0 or an SRV_E* code with a reason. */
static int solved_set(const srv_session *s, const uint32_t *targets, uint32_t n, uint8_t *flags, uint32_t *list,
                      uint32_t *count, char *err, size_t errlen) {
  const mesh *m = s->mesh;
  uint32_t nt = m->target_count;
  memset(flags, 0, nt);
  if (targets) {
    for (uint32_t i = 0; i < n; i++) {
      uint32_t t = targets[i];
      if (t >= nt) {
        snprintf(err, errlen, "target index %u out of range (the mesh has %u targets)", t, nt);
        return SRV_ENOTARGET;
      }
      if (s->targets[t].driver_count) {
        snprintf(err, errlen, "'%s' is a combination target: its weight follows its drivers', so it cannot be solved",
                 m->targets[t].name);
        return SRV_ERANGE;
      }
      if (s->targets[t].muted) {
        snprintf(err, errlen, "'%s' is muted (its weight is held at 0): unmute it to solve it", m->targets[t].name);
        return SRV_ERANGE;
      }
      flags[t] = 1;
    }
  } else {
    for (uint32_t t = 0; t < nt; t++) flags[t] = !s->targets[t].muted && !s->targets[t].driver_count && !copy_of_earlier(m, t, flags);
  }
  uint32_t k = 0;
  for (uint32_t t = 0; t < nt; t++)
    if (flags[t]) {
      if (list) list[k] = t;
      k++;
    }
  if (k == 0) {
    snprintf(err, errlen, "session '%s' has no target to solve%s", s->name,
             nt ? ": every target is muted or a combination target" : "");
    return SRV_ERANGE;
  }
  if (count) *count = k;
  return 0;
}

/* The dense matrices blend.c builds: pins 3P × S (B) and three S × S (H, its factor, the
 * active-set factor); a fit 3 S × S. Returns 0 or SRV_ELIMIT with a reason. */
static int check_size(uint32_t pins, uint32_t S, char *err, size_t errlen) {
  double bytes = 8.0 * ((pins ? 3.0 * pins * S : 0.0) + 3.0 * S * (double)S);
  if (bytes <= SRV_BLEND_MAX_BYTES) return 0;
  snprintf(err, errlen, "solving %u targets%s would take %.0f MiB (the limit is %.0f MiB): solve fewer targets%s", S,
           pins ? " at these pins" : "", bytes / 1048576.0, SRV_BLEND_MAX_BYTES / 1048576.0, pins ? " or pin fewer vertices" : "");
  return SRV_ELIMIT;
}

static int srv_code(int blend_rc) {
  switch (blend_rc) {
    case BLEND_ENONFINITE: return SRV_ENOTFINITE;
    case BLEND_EINVAL: return SRV_EPARAMS;
    case BLEND_ENOMEM: return SRV_EINTERNAL;
    default: return SRV_ESOLVER; /* unmoved pin, under-determined, LAPACK, iteration cap */
  }
}

/* Applies the solved weights that differ from the current values as one SET_WEIGHTS op. Sets
 * *version (the current one when nothing changed). Returns 0 or an SRV_E* code. */
static int apply_weights(srv_server *srv, srv_session *s, const uint32_t *solved, uint32_t n, const double *w,
                         uint32_t author, uint8_t cause, uint64_t *version, char *err, size_t errlen) {
  uint32_t *idx = malloc(sizeof(uint32_t) * (n + 1));
  float *val = malloc(sizeof(float) * (n + 1));
  int rc = 0;
  if (!idx || !val) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
    goto out;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    float v = (float)w[i]; /* w lies within float bounds, and so does its rounding */
    if (memcmp(&v, &s->targets[solved[i]].value, sizeof(v)) == 0) continue;
    idx[k] = solved[i];
    val[k++] = v;
  }
  *version = s->version;
  if (k == 0) goto out;
  srv_op op = {.kind = SRV_OP_SET_WEIGHTS, .author = author, .cause = cause, .count = k, .indices = idx, .values = val};
  if (srv_session_check(s, &op, err, errlen) != 0) { /* a range or driver changed during the job */
    rc = SRV_ERANGE;
    goto out;
  }
  *version = srv_session_apply(srv, s, &op);
  if (*version == 0) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
  }
out:
  free(idx);
  free(val);
  return rc;
}

/* ---- pins: jobs -------------------------------------------------------------------------------- */

typedef struct pin_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session;  /* referenced */
  pin_request rq;        /* owned */
  mesh view;             /* the session's mesh with `targets` pointing at the copy below */
  mesh_target *targets;  /* the target array when the job started (shallow: arrays never move) */
  float *weights;        /* every target's weight then */
  uint8_t *flags;        /* target_count: solved or not */
  uint32_t *solved;      /* S ascending */
  uint32_t S;
  double *lo, *hi, *w0, *w; /* S each */
  float *pin_offsets;    /* 3 per pin: the sculpt offset then */
  double *r;             /* 3 per pin */
  blend_pins *pins;      /* the cached handle, or the one created here */
  blend_pins *created;
  blend_result res;
  int status;            /* BLEND_E* */
  char err[512];
  srv_reply *answer;     /* the requests this job answers */
  uint32_t nanswer;
} pin_job;

static void pin_job_free(pin_job *j) {
  request_free(&j->rq);
  free(j->targets);
  free(j->weights);
  free(j->flags);
  free(j->solved);
  free(j->lo);
  free(j->pin_offsets);
  free(j->r);
  free(j->answer);
  free(j);
}

static void pins_work(uv_work_t *req) {
  pin_job *j = req->data;
  const pin_request *rq = &j->rq;
  const uint32_t P = rq->pin_count;
  if (!j->pins) {
    j->status = blend_pins_create(&j->view, j->flags, rq->vertices, P, rq->lambda, &j->created, j->err, sizeof(j->err));
    if (j->status) return;
    j->pins = j->created;
  }
  /* Where each pin is without the solved targets: base + sculpt + the others at their weights. */
  const mesh *m = &j->view;
  for (uint32_t k = 0; k < P; k++) {
    uint32_t v = rq->vertices[k];
    double at[3];
    for (int c = 0; c < 3; c++) at[c] = (double)m->positions[3 * (size_t)v + c] + j->pin_offsets[3 * (size_t)k + c];
    for (uint32_t t = 0; t < m->target_count; t++) {
      if (j->flags[t] || j->weights[t] == 0.0f) continue;
      int64_t e = mesh_target_entry(&m->targets[t], v);
      if (e < 0) continue;
      for (int c = 0; c < 3; c++) at[c] += (double)j->weights[t] * m->targets[t].deltas[3 * e + c];
    }
    for (int c = 0; c < 3; c++) j->r[3 * (size_t)k + c] = rq->positions[3 * (size_t)k + c] - at[c];
  }
  j->status = blend_pins_solve(j->pins, j->r, rq->keep_close ? j->w0 : NULL, j->lo, j->hi, j->w, &j->res, j->err,
                               sizeof(j->err));
}

static void start_pins(srv_server *srv, srv_blend *sb);

/* Keeps the handle the job created, evicting the least recently used idle entry when full. */
static void cache_insert(srv_blend *sb, pin_job *j) {
  uint32_t slot = sb->cache_count;
  if (slot == SRV_BLEND_CACHE) {
    slot = SRV_BLEND_CACHE;
    for (uint32_t i = 0; i < SRV_BLEND_CACHE; i++)
      if (!sb->cache[i].busy && (slot == SRV_BLEND_CACHE || sb->cache[i].used < sb->cache[slot].used)) slot = i;
    if (slot == SRV_BLEND_CACHE) {
      blend_pins_destroy(j->created);
      return;
    }
    entry_free(&sb->cache[slot]);
  } else {
    sb->cache_count++;
  }
  pin_entry *e = &sb->cache[slot];
  e->pins = j->created;
  e->vertices = j->rq.vertices; /* the key takes the job's copies */
  e->pin_count = j->rq.pin_count;
  e->solved = j->solved;
  e->solved_count = j->S;
  e->lambda = j->rq.lambda;
  e->used = ++sb->clock;
  j->rq.vertices = NULL;
  j->solved = NULL;
}

static void pins_done(uv_work_t *req, int status) {
  pin_job *j = req->data;
  srv_server *srv = j->srv;
  srv_session *s = j->session;
  srv_blend *sb = s->blend;
  srv->pending_jobs--;
  sb->running = 0;
  if (status == UV_ECANCELED && !j->status) {
    j->status = BLEND_ENOMEM;
    snprintf(j->err, sizeof(j->err), "cancelled");
  }
  if (j->created) srv->stats.blend_factorisations++;
  for (uint32_t i = 0; i < sb->cache_count; i++)
    if (sb->cache[i].pins == j->pins) sb->cache[i].busy = 0;
  int code = j->status ? srv_code(j->status) : 0;
  uint64_t version = s->version;
  char why[512];
  snprintf(why, sizeof(why), "%s", j->err);
  if (s->closed) {
    code = SRV_ENOSESSION;
    snprintf(why, sizeof(why), "session '%s' was closed before the solve was applied", s->name);
  } else if (!j->status) {
    srv->stats.blend_solves++;
    code = apply_weights(srv, s, j->solved, j->S, j->w, j->rq.author, SRV_CAUSE_BLEND_SOLVE, &version, why, sizeof(why));
  }
  if (code && code != SRV_ENOSESSION) srv_log(SRV_LOG_INFO, "session %s: blend solve failed: %s", s->name, why);
  srv_blend_solved solved = {version, {s, j->solved, j->w, j->S}, j->res.residual, j->res.iterations, j->res.active};
  srv_result result = {.kind = SRV_RESULT_BLEND_SOLVE, .blend_solved = &solved};
  for (uint32_t i = 0; i < j->nanswer; i++) {
    if (code) srv_reply_error(&j->answer[i], code, why);
    else srv_reply_ok(&j->answer[i], &result);
  }
  /* A created handle is kept even when the solve failed: it is valid for the next drag. */
  if (j->created && !s->closed) cache_insert(sb, j);
  else blend_pins_destroy(j->created);
  pin_job_free(j);
  if (s->closed) blend_release(s);
  else if (sb->has_pending) start_pins(srv, sb);
  srv_session_unref(s);
}

/* Copies what the job needs from the session now, so that the job sees one consistent state.
 * Returns 0 or an SRV_E* code with a reason. */
static int capture_pins(const srv_session *s, pin_job *j, char *err, size_t errlen) {
  const mesh *m = s->mesh;
  uint32_t nt = m->target_count, P = j->rq.pin_count;
  j->targets = malloc(sizeof(mesh_target) * (nt + 1));
  j->weights = malloc(sizeof(float) * (nt + 1));
  j->flags = malloc(nt + 1);
  j->solved = malloc(sizeof(uint32_t) * (nt + 1));
  j->lo = malloc(sizeof(double) * 4 * ((size_t)nt + 1));
  j->pin_offsets = malloc(sizeof(float) * 3 * (size_t)P);
  j->r = malloc(sizeof(double) * 3 * (size_t)P);
  if (!j->targets || !j->weights || !j->flags || !j->solved || !j->lo || !j->pin_offsets || !j->r) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  int rc = solved_set(s, j->rq.targets, j->rq.target_count, j->flags, j->solved, &j->S, err, errlen);
  if (rc == 0) rc = check_size(P, j->S, err, errlen);
  if (rc) return rc;
  j->hi = j->lo + j->S;
  j->w0 = j->hi + j->S;
  j->w = j->w0 + j->S;
  for (uint32_t i = 0; i < j->S; i++) {
    const srv_target *st = &s->targets[j->solved[i]];
    j->lo[i] = st->min;
    j->hi[i] = st->max;
    j->w0[i] = st->value;
  }
  memcpy(j->targets, m->targets, sizeof(mesh_target) * nt);
  memcpy(j->weights, s->weights, sizeof(float) * nt);
  for (uint32_t k = 0; k < P; k++)
    for (int c = 0; c < 3; c++)
      j->pin_offsets[3 * (size_t)k + c] = proto_dequantize(s->offsets[3 * (size_t)j->rq.vertices[k] + c], s->offset_quantum);
  j->view = *m;
  j->view.targets = j->targets;
  return 0;
}

/* Starts a job for the pending request, answering the waiting replies if it cannot start. */
static void start_pins(srv_server *srv, srv_blend *sb) {
  srv_session *s = sb->session;
  char err[512];
  int code = SRV_EINTERNAL;
  snprintf(err, sizeof(err), "cannot start the solve (out of memory)");
  pin_job *j = calloc(1, sizeof(*j));
  if (j) {
    j->rq = sb->pending;
    j->answer = sb->waiting;
    j->nanswer = sb->nwaiting;
    memset(&sb->pending, 0, sizeof(sb->pending));
    sb->has_pending = 0;
    sb->waiting = NULL;
    sb->nwaiting = sb->capwaiting = 0;
    j->srv = srv;
    j->session = s;
    j->req.data = j;
    code = capture_pins(s, j, err, sizeof(err));
  }
  if (!code) {
    for (uint32_t i = 0; i < sb->cache_count && !j->pins; i++) {
      pin_entry *e = &sb->cache[i];
      if (e->pin_count == j->rq.pin_count && e->solved_count == j->S && e->lambda == j->rq.lambda &&
          memcmp(e->vertices, j->rq.vertices, sizeof(uint32_t) * e->pin_count) == 0 &&
          memcmp(e->solved, j->solved, sizeof(uint32_t) * j->S) == 0) {
        j->pins = e->pins;
        e->busy = 1;
        e->used = ++sb->clock;
      }
    }
    if (uv_queue_work(srv->loop, &j->req, pins_work, pins_done) == 0) {
      srv->pending_jobs++;
      sb->running = 1;
      srv_session_ref(s);
      return;
    }
    for (uint32_t i = 0; i < sb->cache_count; i++)
      if (sb->cache[i].pins == j->pins) sb->cache[i].busy = 0;
    code = SRV_EINTERNAL;
    snprintf(err, sizeof(err), "cannot start the solve");
  }
  if (!j) { /* the request stays with the session: answer what waits and drop it */
    for (uint32_t i = 0; i < sb->nwaiting; i++) srv_reply_error(&sb->waiting[i], code, err);
    sb->nwaiting = 0;
    request_free(&sb->pending);
    sb->has_pending = 0;
    return;
  }
  for (uint32_t i = 0; i < j->nanswer; i++) srv_reply_error(&j->answer[i], code, err);
  pin_job_free(j);
}

/* ---- pins: requests ------------------------------------------------------------------------------ */

static void *copy_of(const void *p, size_t n) {
  void *c = malloc(n ? n : 1);
  if (c && n) memcpy(c, p, n);
  return c;
}

int srv_blend_solve(srv_server *srv, srv_session *s, const srv_blend_pins_spec *spec, uint32_t author,
                    srv_reply reply, char *err, size_t errlen) {
  uint32_t nv = s->mesh->vertex_count, P = spec->pin_count;
  if (P == 0) {
    snprintf(err, errlen, "no pins: pin at least one vertex");
    return SRV_EPARAMS;
  }
  if (P > SRV_BLEND_MAX_PINS) {
    snprintf(err, errlen, "%u pins: at most %d per solve", P, SRV_BLEND_MAX_PINS);
    return SRV_ELIMIT;
  }
  for (uint32_t k = 0; k < P; k++) {
    if (spec->vertices[k] >= nv) {
      snprintf(err, errlen, "pin %u: vertex %u is out of range (the mesh has %u vertices)", k, spec->vertices[k], nv);
      return SRV_ERANGE;
    }
    for (int c = 0; c < 3; c++)
      if (!isfinite(spec->positions[3 * (size_t)k + c])) {
        snprintf(err, errlen, "pin %u (vertex %u): the position is not finite", k, spec->vertices[k]);
        return SRV_ENOTFINITE;
      }
  }
  if (!isfinite(spec->lambda)) {
    snprintf(err, errlen, "\"regularization\" is not finite");
    return SRV_ENOTFINITE;
  }
  if (spec->lambda < 0) {
    snprintf(err, errlen, "\"regularization\" must be >= 0 (got %g)", spec->lambda);
    return SRV_EPARAMS;
  }
  { /* refused now if the solved set is already wrong; checked again when the job starts */
    uint8_t *flags = malloc(s->mesh->target_count + 1);
    uint32_t S = 0;
    int rc = flags ? solved_set(s, spec->targets, spec->target_count, flags, NULL, &S, err, errlen) : SRV_EINTERNAL;
    free(flags);
    if (rc == SRV_EINTERNAL) snprintf(err, errlen, "out of memory");
    if (rc == 0) rc = check_size(P, S, err, errlen);
    if (rc) return rc;
  }
  srv_blend *sb = blend_of(s);
  if (!sb) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  if (sb->nwaiting >= SRV_BLEND_MAX_WAITING) {
    snprintf(err, errlen, "session '%s' already has %d solves waiting", s->name, SRV_BLEND_MAX_WAITING);
    return SRV_ELIMIT;
  }
  pin_request rq = {0};
  rq.vertices = copy_of(spec->vertices, sizeof(uint32_t) * P);
  rq.positions = copy_of(spec->positions, sizeof(double) * 3 * (size_t)P);
  rq.targets = spec->targets ? copy_of(spec->targets, sizeof(uint32_t) * spec->target_count) : NULL;
  rq.pin_count = P;
  rq.target_count = spec->targets ? spec->target_count : 0;
  rq.lambda = spec->lambda;
  rq.keep_close = spec->keep_close;
  rq.author = author;
  if (sb->nwaiting == sb->capwaiting) {
    uint32_t cap = sb->capwaiting ? 2 * sb->capwaiting : 4;
    srv_reply *w = realloc(sb->waiting, sizeof(*w) * cap);
    if (w) sb->waiting = w, sb->capwaiting = cap;
  }
  if (!rq.vertices || !rq.positions || (spec->targets && !rq.targets) || sb->nwaiting == sb->capwaiting) {
    request_free(&rq);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  /* The newest request wins: the one waiting is dropped, its reply answered with this one's. */
  request_free(&sb->pending);
  sb->pending = rq;
  sb->has_pending = 1;
  sb->waiting[sb->nwaiting++] = reply;
  if (!sb->running) start_pins(srv, sb);
  return 0;
}

int srv_blend_solve_edit(srv_server *srv, srv_session *s, const proto_blend_pins *pins, uint32_t author,
                         srv_reply reply, char *err, size_t errlen) {
  uint32_t *v = malloc(sizeof(uint32_t) * ((size_t)pins->count + 1));
  double *p = malloc(sizeof(double) * 3 * ((size_t)pins->count + 1));
  int rc;
  if (!v || !p) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
  } else {
    for (uint32_t i = 0; i < pins->count; i++) {
      proto_blend_pin pin;
      proto_blend_pin_at(pins, i, &pin);
      v[i] = pin.vertex;
      for (int c = 0; c < 3; c++) p[3 * (size_t)i + c] = pin.position[c];
    }
    srv_blend_pins_spec spec = {v, p, pins->count, pins->regularization, (pins->flags & PROTO_BLEND_KEEP_CLOSE) != 0,
                                NULL, 0};
    rc = srv_blend_solve(srv, s, &spec, author, reply, err, errlen);
  }
  free(v);
  free(p);
  return rc;
}

/* ---- fit --------------------------------------------------------------------------------------- */

typedef struct fit_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session;  /* referenced */
  srv_state state;       /* weights, offsets and targets when the request arrived */
  char *path;            /* NULL: the session's own shape ("sculpt"); else a name beneath the mesh folders */
  uint8_t *blob;         /* the file's mesh as the import worker sent it (srv_import.c) */
  size_t blob_len;
  uint32_t max_vertices;
  uint8_t *flags;
  uint32_t *solved;
  uint32_t S;
  double lambda;
  int keep_close, apply;
  uint32_t author;
  double *lo, *hi, *w0, *w;
  blend_fit_result res;
  int code;              /* SRV_E* */
  char err[MESH_ERR_LEN + 256];
  srv_reply reply;
} fit_job;

static void fit_job_free(fit_job *j) {
  srv_state_release(&j->state);
  free(j->path);
  free(j->blob);
  free(j->flags);
  free(j->solved);
  free(j->lo);
  free(j);
}

/* The displacement blend_fit() matches: shape − base − sculpt − the unsolved targets. For
 * "sculpt" the shape is the current look, which is to be reproduced without the sculpt layer:
 * that leaves the sculpt plus the solved targets at their current weights. */
static void fit_work(uv_work_t *req) {
  fit_job *j = req->data;
  const mesh *m = &j->state.view;
  const uint32_t V = m->vertex_count;
  double *acc = calloc(3 * (size_t)V + 1, sizeof(double));
  float *d = malloc(sizeof(float) * (3 * (size_t)V + 1));
  mesh *file = NULL;
  if (!acc || !d) {
    j->code = SRV_EINTERNAL;
    snprintf(j->err, sizeof(j->err), "out of memory");
    goto out;
  }
  for (size_t i = 0; i < 3 * (size_t)V; i++) acc[i] = proto_dequantize(j->state.offsets[i], j->state.quantum);
  if (j->path) {
    char why[MESH_ERR_LEN];
    if (mesh_blob_read(j->blob, j->blob_len, j->max_vertices, &file, why, sizeof(why)) != 0) {
      j->code = SRV_EMESH;
      snprintf(j->err, sizeof(j->err), "mesh refused: the importer's mesh is invalid: %s", why);
      goto out;
    }
    if (file->vertex_count != V) {
      j->code = SRV_ERANGE;
      snprintf(j->err, sizeof(j->err),
               "'%s' has %u vertices but session '%s' has %u: a fitted shape needs the session mesh's vertices, in "
               "the same order", j->path, file->vertex_count, j->session->name, V);
      goto out;
    }
    /* The file's shape is what it shows: its positions with its own morph targets at their default
     * weights (a GLB deformd exported is base + sculpt with the weights as defaults). */
    float *fw = calloc(file->target_count + 1, sizeof(float));
    float *shown = malloc(sizeof(float) * (3 * (size_t)V + 1));
    if (!fw || !shown) {
      free(fw), free(shown);
      j->code = SRV_EINTERNAL;
      snprintf(j->err, sizeof(j->err), "out of memory");
      goto out;
    }
    for (uint32_t t = 0; t < file->target_count; t++) fw[t] = file->targets[t].default_weight;
    mesh_evaluate(file, fw, NULL, shown);
    for (size_t i = 0; i < 3 * (size_t)V; i++) acc[i] = (double)shown[i] - m->positions[i] - acc[i];
    free(fw), free(shown);
  }
  for (uint32_t t = 0; t < m->target_count; t++) {
    const mesh_target *mt = &m->targets[t];
    double wt = j->state.weights[t];
    int wanted = j->path ? !j->flags[t] : j->flags[t]; /* file: the unsolved out; sculpt: the solved in */
    if (wt == 0.0 || !wanted) continue;
    double sign = j->path ? -1.0 : 1.0;
    for (uint32_t e = 0; e < mt->count; e++)
      for (int c = 0; c < 3; c++) acc[3 * (size_t)mt->indices[e] + c] += sign * wt * mt->deltas[3 * (size_t)e + c];
  }
  for (size_t i = 0; i < 3 * (size_t)V; i++) d[i] = (float)acc[i];
  int rc = blend_fit(m, j->flags, d, j->lambda, j->keep_close ? j->w0 : NULL, j->lo, j->hi, j->w, &j->res, j->err,
                     sizeof(j->err));
  if (rc) j->code = srv_code(rc);
out:
  mesh_destroy(file);
  free(acc);
  free(d);
}

static void fit_done(uv_work_t *req, int status) {
  fit_job *j = req->data;
  srv_server *srv = j->srv;
  srv_session *s = j->session;
  srv->pending_jobs--;
  s->blend->fits--;
  if (status == UV_ECANCELED && !j->code) {
    j->code = SRV_EINTERNAL;
    snprintf(j->err, sizeof(j->err), "cancelled");
  }
  uint64_t version = 0;
  if (s->closed) {
    j->code = SRV_ENOSESSION;
    snprintf(j->err, sizeof(j->err), "session '%s' was closed before the fit ended", s->name);
  } else if (!j->code) {
    srv->stats.blend_fits++;
    if (j->apply)
      j->code = apply_weights(srv, s, j->solved, j->S, j->w, j->author, SRV_CAUSE_BLEND_FIT, &version, j->err,
                              sizeof(j->err));
  }
  if (j->code) {
    srv_reply_error(&j->reply, j->code, j->err);
  } else {
    srv_blend_fitted fitted = {{s, j->solved, j->w, j->S}, j->res.rms, j->res.max_error, j->res.max_vertex,
                               j->res.iterations, j->res.active, j->apply, version};
    srv_reply_ok(&j->reply, &(srv_result){.kind = SRV_RESULT_BLEND_FIT, .blend_fitted = &fitted});
  }
  fit_job_free(j);
  if (s->closed) blend_release(s);
  srv_session_unref(s);
}

/* The import worker is done with the fit's file: fit on the pool, or answer why not. */
static void fit_imported(void *arg, int status, uint8_t *blob, size_t len, const char *why) {
  fit_job *j = arg;
  if (status == 0) {
    j->blob = blob;
    j->blob_len = len;
    if (uv_queue_work(j->srv->loop, &j->req, fit_work, fit_done) == 0) return;
    status = SRV_EINTERNAL;
    why = "cannot start the fit";
  }
  j->code = status;
  snprintf(j->err, sizeof(j->err), "%s%s", status == SRV_EMESH ? "mesh refused: " : "", why);
  fit_done(&j->req, 0);
}

int srv_blend_fit(srv_server *srv, srv_session *s, const srv_blend_fit_spec *spec, uint32_t author,
                  srv_reply reply, char *err, size_t errlen) {
  if (!spec->shape || !spec->shape[0]) {
    snprintf(err, errlen, "\"shape\" must be \"sculpt\" or the name of a mesh in the mesh folders");
    return SRV_EPARAMS;
  }
  if (!isfinite(spec->lambda)) {
    snprintf(err, errlen, "\"regularization\" is not finite");
    return SRV_ENOTFINITE;
  }
  if (spec->lambda < 0) {
    snprintf(err, errlen, "\"regularization\" must be >= 0 (got %g)", spec->lambda);
    return SRV_EPARAMS;
  }
  srv_blend *sb = blend_of(s);
  if (!sb) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  if (sb->fits >= SRV_BLEND_MAX_FITS) {
    snprintf(err, errlen, "session '%s' already has %d fits running", s->name, SRV_BLEND_MAX_FITS);
    return SRV_ELIMIT;
  }
  uint32_t nt = s->mesh->target_count;
  fit_job *j = calloc(1, sizeof(*j));
  if (!j) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  j->flags = malloc(nt + 1);
  j->solved = malloc(sizeof(uint32_t) * (nt + 1));
  j->lo = malloc(sizeof(double) * 4 * ((size_t)nt + 1));
  j->path = strcmp(spec->shape, "sculpt") == 0 ? NULL : strdup(spec->shape);
  int rc = SRV_EINTERNAL;
  snprintf(err, errlen, "out of memory");
  if (!j->flags || !j->solved || !j->lo || (strcmp(spec->shape, "sculpt") != 0 && !j->path)) goto fail;
  rc = solved_set(s, spec->targets, spec->target_count, j->flags, j->solved, &j->S, err, errlen);
  if (rc == 0) rc = check_size(0, j->S, err, errlen);
  if (rc) goto fail;
  rc = SRV_EINTERNAL;
  snprintf(err, errlen, "out of memory");
  if (srv_state_capture(s, &j->state) != 0) goto fail;
  j->hi = j->lo + j->S;
  j->w0 = j->hi + j->S;
  j->w = j->w0 + j->S;
  for (uint32_t i = 0; i < j->S; i++) {
    const srv_target *st = &s->targets[j->solved[i]];
    j->lo[i] = st->min;
    j->hi[i] = st->max;
    j->w0[i] = st->value;
  }
  j->srv = srv;
  j->session = s;
  j->max_vertices = srv->cfg.max_vertices;
  j->lambda = spec->lambda;
  j->keep_close = spec->keep_close;
  j->apply = spec->apply;
  j->author = author;
  j->reply = reply;
  j->req.data = j;
  snprintf(err, errlen, "cannot start the fit");
  /* A file is read by the import worker first; "sculpt" goes straight to the pool. */
  if (j->path && srv->data.root_count == 0) {
    rc = SRV_EMESH;
    snprintf(err, errlen, "mesh refused: this server has no mesh folders (--data none and no --mesh-dir)");
  } else if (j->path) {
    /* A client's name: looked up beneath the mesh folders, nothing of the file quoted. */
    rc = srv_import_start(&srv->importer, j->path, srv->data.roots, srv->data.root_count, fit_imported, j, err,
                          errlen);
  } else rc = uv_queue_work(srv->loop, &j->req, fit_work, fit_done) == 0 ? 0 : SRV_EINTERNAL;
  if (rc) goto fail;
  srv->pending_jobs++;
  sb->fits++;
  srv_session_ref(s);
  return 0;
fail:
  fit_job_free(j);
  return rc;
}

/* ---- closing ----------------------------------------------------------------------------------- */

void srv_blend_close_all(srv_session *s) {
  srv_blend *sb = s->blend;
  if (!sb) return;
  for (uint32_t i = 0; i < sb->nwaiting; i++)
    srv_reply_error(&sb->waiting[i], SRV_ENOSESSION, "the session was closed");
  sb->nwaiting = 0;
  request_free(&sb->pending);
  sb->has_pending = 0;
  /* Idle factors go now; the one a running job uses goes when it ends (blend_release). */
  uint32_t k = 0;
  for (uint32_t i = 0; i < sb->cache_count; i++) {
    if (sb->cache[i].busy) sb->cache[k++] = sb->cache[i];
    else entry_free(&sb->cache[i]);
  }
  sb->cache_count = k;
  blend_release(s);
}
