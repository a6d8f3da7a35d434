/*
 * srv_mask.c — each author's mask on a session (docs/architecture.md, "Masks"): the values, the
 * requests that change them (mask.stroke, .clear, .invert, .auto and their EDITs), their steps,
 * undo and redo, and the store's row of each author's mask.
 *
 * A mask is a constraint of its author's edits, not a change of the shape: it is no operation
 * (srv_op.h), so it never bumps the session's version, reaches no other viewer, and is not in
 * the store's op log. Its steps still take their ids from the session's step counter
 * (srv_history_new_step_id), so an author's mask steps and other steps lie in one order, and
 * history.undo takes back whichever is newest (srv_history_wait.c asks srv_mask_undo_first).
 *
 * Requests run one at a time per session on the pool, in the order they came (a stroke's dabs
 * read the shape; an author's next request sees the last one's mask). The loop thread keeps the
 * values: jobs work on a copy and the step is the difference. Each step rewrites the author's
 * row in the store (srv_store_put_mask: values and undo steps), so a mask and its undo survive
 * restarts; a JSON-RPC answer waits for that commit like every other (invariant 9).
 *
 * The mask lives on topology vertices (what brushes and gestures move); APIs name render vertices.
 *
 * DOES NOT parse requests (rpc/srv_mask_rpc.c), hold vertices itself (srv_brush.c and
 * srv_gesture.c ask srv_mask_copy), or compute masks (server/solve/dfm_mask.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "dfm.h"
#include "dfm_mask.h"
#include "srv_mask.h"
#include "srv_error.h"
#include "srv_bytes.h"
#include "srv_log.h"
#include "srv_store.h"
#include "srv_author.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"
#include "srv_state.h"
#include "srv_history.h"
#include "srv_frame.h"
#include "srv_conn.h"
#include "srv_caps.h"
#include "srv_fanout.h"
#include "srv_brush.h"

#define MAX_DABS 65536
#define MASK_ROW_FORMAT 1

typedef struct mask_step {
  uint64_t id;
  uint64_t undo_seq;  /* the step id taken when it was last undone (orders redo) */
  uint8_t kind;       /* srv_mask_kind */
  uint32_t n;         /* topology vertices, ascending */
  uint32_t *idx;
  float *before, *after;
} mask_step;

typedef struct author_mask {
  uint32_t author;
  float *m;           /* per topology vertex */
  mask_step *steps;   /* oldest first; [0, top) applied, [top, count) undone (redo) */
  uint32_t count, top, cap;
} author_mask;

typedef struct mask_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *s;     /* referenced */
  srv_mask_spec spec; /* samples copied */
  dfm_brush_sample *samples;
  srv_state shape;    /* STROKE and AUTO normal: captured when the job starts */
  int has_shape;
  float *m;           /* the author's mask when the job started, changed by the job */
  uint64_t max_work;  /* the server's max_brush_work when it came: a stroke's scans are bounded too */
  uint32_t dabs;
  int status;
  char err[256];
  srv_reply reply;
  struct mask_job *next;
} mask_job;

struct srv_masks {
  author_mask *a;
  uint32_t n, cap;
  mask_job *queue, *tail;
  uint32_t queued;
  int running;
  uint32_t running_author;
  uint64_t own_next_id; /* step ids of a session without history */
};

/* ---- values ------------------------------------------------------------------------------------ */

static void step_fini(mask_step *st) {
  free(st->idx);
  free(st->before);
  free(st->after);
  memset(st, 0, sizeof(*st));
}

static void masks_fini(srv_session *s) {
  srv_masks *x = s->masks;
  if (!x) return;
  for (uint32_t i = 0; i < x->n; i++) {
    for (uint32_t k = 0; k < x->a[i].count; k++) step_fini(&x->a[i].steps[k]);
    free(x->a[i].steps);
    free(x->a[i].m);
  }
  free(x->a);
  free(x);
  s->masks = NULL;
}

static srv_masks *masks_of(srv_session *s) {
  if (!s->masks) {
    s->masks = calloc(1, sizeof(srv_masks));
    if (s->masks) {
      s->masks->own_next_id = 1;
      s->masks_fini = masks_fini;
    }
  }
  return s->masks;
}

static author_mask *find_author(const srv_session *s, uint32_t author) {
  const srv_masks *x = s->masks;
  for (uint32_t i = 0; x && i < x->n; i++)
    if (x->a[i].author == author) return &x->a[i];
  return NULL;
}

static author_mask *author_of(srv_session *s, uint32_t author) {
  author_mask *a = find_author(s, author);
  if (a) return a;
  srv_masks *x = masks_of(s);
  if (!x) return NULL;
  if (x->n == x->cap) {
    uint32_t cap = x->cap ? 2 * x->cap : 4;
    author_mask *g = realloc(x->a, sizeof(*g) * cap);
    if (!g) return NULL;
    x->a = g, x->cap = cap;
  }
  float *m = calloc((size_t)s->topo.vertex_count + 1, sizeof(float));
  if (!m) return NULL;
  a = &x->a[x->n++];
  memset(a, 0, sizeof(*a));
  a->author = author;
  a->m = m;
  return a;
}

float *srv_mask_copy(const srv_session *s, uint32_t author) {
  const author_mask *a = find_author(s, author);
  uint32_t nt = s->topo.vertex_count, any = 0;
  for (uint32_t v = 0; a && v < nt && !any; v++) any = a->m[v] > 0.0f;
  if (!any) return NULL;
  float *c = malloc(sizeof(float) * ((size_t)nt + 1));
  if (c) memcpy(c, a->m, sizeof(float) * nt);
  return c;
}

float srv_mask_value(const srv_session *s, uint32_t author, uint32_t r) {
  const author_mask *a = find_author(s, author);
  return a && r < s->topo.render_count ? a->m[s->topo.render_to_topo[r]] : 0.0f;
}

static uint32_t render_copies(const srv_session *s, uint32_t v) {
  return s->topo.topo_offsets[v + 1] - s->topo.topo_offsets[v];
}

static uint32_t masked_render(const srv_session *s, const author_mask *a) {
  uint32_t k = 0;
  for (uint32_t v = 0; a && v < s->topo.vertex_count; v++)
    if (a->m[v] > 0.0f) k += render_copies(s, v);
  return k;
}

static uint64_t new_step_id(srv_session *s) {
  if (s->history) return srv_history_new_step_id(s);
  srv_masks *x = masks_of(s);
  return x ? x->own_next_id++ : 0;
}

/* ---- the store's row ------------------------------------------------------------------------------ */

/* Ascending indices as deltas, then values: what a row is made of. */
static void put_values(proto_buf *b, const uint32_t *idx, const float *const *vals, int nvals, uint32_t n) {
  srv_bytes_varint(b, n);
  for (uint32_t i = 0, prev = 0; i < n; i++) {
    srv_bytes_varint(b, idx[i] - prev);
    prev = idx[i];
    for (int k = 0; k < nvals; k++) srv_bytes_f32(b, vals[k][i]);
  }
}

int srv_mask_encode(const srv_session *s, uint32_t author, proto_buf *b) {
  const author_mask *a = find_author(s, author);
  if (!a) return SRV_EINTERNAL;
  uint32_t nt = s->topo.vertex_count, n = 0;
  for (uint32_t v = 0; v < nt; v++) n += a->m[v] > 0.0f;
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  float *val = malloc(sizeof(float) * ((size_t)n + 1));
  if (!idx || !val) {
    free(idx);
    free(val);
    return SRV_EINTERNAL;
  }
  n = 0;
  for (uint32_t v = 0; v < nt; v++)
    if (a->m[v] > 0.0f) idx[n] = v, val[n++] = a->m[v];
  srv_bytes_u8(b, MASK_ROW_FORMAT);
  srv_bytes_varint(b, nt);
  put_values(b, idx, (const float *const[]){val}, 1, n);
  free(idx);
  free(val);
  srv_bytes_varint(b, a->count);
  srv_bytes_varint(b, a->top);
  for (uint32_t k = 0; k < a->count; k++) {
    const mask_step *st = &a->steps[k];
    srv_bytes_varint(b, st->id);
    srv_bytes_varint(b, st->undo_seq);
    srv_bytes_u8(b, st->kind);
    put_values(b, st->idx, (const float *const[]){st->before, st->after}, 2, st->n);
  }
  return 0;
}

static void store_author(srv_server *srv, srv_session *s, uint32_t author) {
  if (!srv->store || !s->store_id || s->restoring) return;
  proto_buf b;
  proto_buf_init(&b);
  if (srv_mask_encode(s, author, &b) != 0 || srv_store_put_mask(srv->store, s->store_id, author, b.data, b.len) != 0)
    srv_log(SRV_LOG_ERROR, "session %s: the mask of %s could not be queued for the store", s->name,
            srv_authors_name(&srv->authors, author));
  proto_buf_fini(&b);
}

/* Reads n (index, values) entries: indices ascending below nt, values finite in [0, 1]. */
static int get_values(srv_bytes_cur *c, uint32_t nt, uint32_t n, uint32_t *idx, float *const *vals, int nvals) {
  uint64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t d = srv_bytes_get_varint(c);
    at = i ? at + d : d;
    if (c->bad || (i && d == 0) || at >= nt) return -1;
    idx[i] = (uint32_t)at;
    for (int k = 0; k < nvals; k++) {
      float f = srv_bytes_get_f32(c);
      if (c->bad || !(f >= 0.0f && f <= 1.0f)) return -1;
      vals[k][i] = f;
    }
  }
  return 0;
}

int srv_mask_load(srv_session *s, uint32_t author, const uint8_t *p, size_t len, char *err, size_t errlen) {
  uint32_t nt = s->topo.vertex_count;
  srv_bytes_cur c = {p, p + len, 0};
  author_mask *a = author_of(s, author);
  if (!a) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  uint8_t format = srv_bytes_get_u8(&c);
  uint64_t count_nt = srv_bytes_get_varint(&c), n = srv_bytes_get_varint(&c);
  if (c.bad || format != MASK_ROW_FORMAT || count_nt != nt || n > nt) goto bad;
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  float *val = malloc(sizeof(float) * ((size_t)n + 1));
  int rc = idx && val ? get_values(&c, nt, (uint32_t)n, idx, (float *const[]){val}, 1) : -1;
  for (uint32_t i = 0; rc == 0 && i < n; i++) a->m[idx[i]] = val[i];
  free(idx);
  free(val);
  if (rc) goto bad;
  uint64_t count = srv_bytes_get_varint(&c), top = srv_bytes_get_varint(&c);
  if (c.bad || count > SRV_MASK_UNDO_DEPTH || top > count) goto bad;
  a->steps = calloc((size_t)count + 1, sizeof(mask_step));
  if (!a->steps) goto bad;
  a->cap = (uint32_t)count + 1;
  for (uint32_t k = 0; k < count; k++) {
    mask_step *st = &a->steps[k];
    st->id = srv_bytes_get_varint(&c);
    st->undo_seq = srv_bytes_get_varint(&c);
    st->kind = srv_bytes_get_u8(&c);
    uint64_t sn = srv_bytes_get_varint(&c);
    if (c.bad || sn > nt || (k && st->id <= a->steps[k - 1].id)) goto bad;
    st->n = (uint32_t)sn;
    st->idx = malloc(sizeof(uint32_t) * (sn + 1));
    st->before = malloc(sizeof(float) * (sn + 1));
    st->after = malloc(sizeof(float) * (sn + 1));
    a->count = k + 1;
    if (!st->idx || !st->before || !st->after ||
        get_values(&c, nt, st->n, st->idx, (float *const[]){st->before, st->after}, 2) != 0)
      goto bad;
  }
  a->top = (uint32_t)top;
  if (c.p != c.end) goto bad;
  return 0;
bad:
  snprintf(err, errlen, "session '%s': a stored mask (author %u) does not read", s->name, author);
  return SRV_EIO;
}

void srv_mask_restore_done(srv_session *s) {
  srv_masks *x = s->masks;
  uint64_t top = 0;
  for (uint32_t i = 0; x && i < x->n; i++)
    for (uint32_t k = 0; k < x->a[i].count; k++) {
      if (x->a[i].steps[k].id > top) top = x->a[i].steps[k].id;
      if (x->a[i].steps[k].undo_seq > top) top = x->a[i].steps[k].undo_seq;
    }
  if (x && top >= x->own_next_id) x->own_next_id = top + 1;
  if (s->history) srv_history_reserve_step_ids(s, top);
}

/* ---- MASK frames: to the author's own connections granted "mask" ---------------------------------- */

static srv_frame *mask_frame(const srv_session *s, uint32_t author) {
  const author_mask *a = find_author(s, author);
  uint32_t nv = s->mesh->vertex_count, n = 0;
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)nv + 1));
  float *val = malloc(sizeof(float) * ((size_t)nv + 1));
  srv_frame *f = NULL;
  if (idx && val) {
    for (uint32_t r = 0; a && r < nv; r++) {
      float m = a->m[s->topo.render_to_topo[r]];
      if (m > 0.0f) idx[n] = r, val[n++] = m;
    }
    proto_buf b;
    proto_buf_init(&b);
    if (proto_encode_mask(&b, s->version, nv, n, idx, val) == 0) f = srv_frame_from_buf(&b);
    proto_buf_fini(&b);
  }
  free(idx);
  free(val);
  return f;
}

void srv_mask_send(srv_session *s, struct srv_conn *c) {
  if (!srv_caps_has(c, PROTO_CAP_MASK)) return;
  srv_frame *f = mask_frame(s, srv_conn_author(c));
  if (f) srv_conn_send(c, f);
  srv_frame_unref(f);
}

/* After a change of `author`'s mask: one frame, encoded once, to each of the author's granted
 * connections in the session. */
static void send_to_author(srv_session *s, uint32_t author) {
  srv_frame *f = NULL;
  for (srv_conn *c = srv_fanout_first(s); c; c = srv_fanout_next(c)) {
    if (srv_conn_author(c) != author || !srv_caps_has(c, PROTO_CAP_MASK)) continue;
    if (!f && !(f = mask_frame(s, author))) return;
    srv_conn_send(c, f);
  }
  srv_frame_unref(f);
}

/* ---- steps ----------------------------------------------------------------------------------------- */

/* The difference between the author's mask and `next` becomes a step (newer undone steps go).
 * Returns the render vertices that changed (0: no step), or -1 when out of memory. */
static int64_t make_step(srv_session *s, author_mask *a, const float *next, uint8_t kind, uint64_t *id) {
  uint32_t nt = s->topo.vertex_count, n = 0;
  *id = 0;
  for (uint32_t v = 0; v < nt; v++) n += a->m[v] != next[v];
  if (!n) return 0;
  mask_step st = {.kind = kind, .n = n};
  st.idx = malloc(sizeof(uint32_t) * n);
  st.before = malloc(sizeof(float) * n);
  st.after = malloc(sizeof(float) * n);
  if (!st.idx || !st.before || !st.after) {
    step_fini(&st);
    return -1;
  }
  int64_t changed = 0;
  for (uint32_t v = 0, k = 0; v < nt; v++) {
    if (a->m[v] == next[v]) continue;
    st.idx[k] = v, st.before[k] = a->m[v], st.after[k++] = next[v];
    changed += render_copies(s, v);
  }
  while (a->count > a->top) step_fini(&a->steps[--a->count]);
  /* The oldest go first: past the depth, or past the bytes an author's steps may keep. */
  size_t bytes = 12 * (size_t)n;
  for (uint32_t k = 0; k < a->count; k++) bytes += 12 * (size_t)a->steps[k].n;
  while (a->count && (a->count >= SRV_MASK_UNDO_DEPTH || bytes > SRV_MASK_STEP_BYTES)) {
    bytes -= 12 * (size_t)a->steps[0].n;
    step_fini(&a->steps[0]);
    memmove(a->steps, a->steps + 1, sizeof(mask_step) * (a->count - 1));
    a->count--;
  }
  if (a->count == a->cap) {
    uint32_t cap = a->cap ? 2 * a->cap : 8;
    mask_step *g = realloc(a->steps, sizeof(*g) * cap);
    if (!g) {
      step_fini(&st);
      return -1;
    }
    a->steps = g, a->cap = cap;
  }
  st.id = *id = new_step_id(s);
  a->steps[a->count++] = st;
  a->top = a->count;
  memcpy(a->m, next, sizeof(float) * nt);
  return changed;
}

/* ---- requests on the pool ------------------------------------------------------------------------ */

static void job_free(mask_job *j) {
  if (j->has_shape) srv_state_release(&j->shape);
  free(j->samples);
  free(j->m);
  free(j);
}

/* Dabs along the path: every sample, and between two samples one every quarter of the radius. */
static int place_dabs(const mask_job *j, dfm_brush_sample **out, uint32_t *count) {
  const dfm_brush_sample *p = j->samples;
  uint32_t n = j->spec.count, total = 1;
  for (uint32_t i = 1; i < n; i++) {
    double d = 0;
    for (int k = 0; k < 3; k++) d += (p[i].center[k] - p[i - 1].center[k]) * (p[i].center[k] - p[i - 1].center[k]);
    double step = 0.25 * fmin(p[i].radius, p[i - 1].radius);
    double steps = step > 0 ? ceil(sqrt(d) / step) : 1;
    if (!(steps >= 1)) steps = 1;
    if (steps > MAX_DABS || (total += (uint32_t)steps) > MAX_DABS) return -1;
  }
  dfm_brush_sample *d = malloc(sizeof(*d) * total);
  if (!d) return -2;
  uint32_t k = 0;
  d[k++] = p[0];
  for (uint32_t i = 1; i < n; i++) {
    double dd = 0;
    for (int c = 0; c < 3; c++) dd += (p[i].center[c] - p[i - 1].center[c]) * (p[i].center[c] - p[i - 1].center[c]);
    double step = 0.25 * fmin(p[i].radius, p[i - 1].radius);
    uint32_t steps = step > 0 ? (uint32_t)fmax(1, ceil(sqrt(dd) / step)) : 1;
    for (uint32_t s = 1; s <= steps; s++) {
      double t = (double)s / steps;
      dfm_brush_sample *x = &d[k++];
      *x = p[i];
      for (int c = 0; c < 3; c++) x->center[c] = p[i - 1].center[c] + t * (p[i].center[c] - p[i - 1].center[c]);
      x->radius = p[i - 1].radius + t * (p[i].radius - p[i - 1].radius);
      x->strength = p[i - 1].strength + t * (p[i].strength - p[i - 1].strength);
    }
  }
  *out = d;
  *count = k;
  return 0;
}

/* The shape now, on the welded topology (3 doubles per vertex; caller frees), or NULL. */
static double *topo_shape(const srv_session *s, const srv_state *st) {
  const mesh_topology *t = &s->topo;
  float *shape = malloc(sizeof(float) * (3 * (size_t)s->mesh->vertex_count + 1));
  double *p = malloc(sizeof(double) * (3 * (size_t)t->vertex_count + 1));
  if (!shape || !p || srv_state_shape(st, shape) != 0) {
    free(shape);
    free(p);
    return NULL;
  }
  for (uint32_t v = 0; v < t->vertex_count; v++)
    for (int c = 0; c < 3; c++) p[3 * (size_t)v + c] = shape[3 * (size_t)t->topo_render[t->topo_offsets[v]] + c];
  free(shape);
  return p;
}

static void auto_mask(mask_job *j, const double *p) {
  const srv_session *s = j->s;
  uint32_t nt = s->topo.vertex_count, seed = s->topo.render_to_topo[j->spec.vertex];
  float *a = malloc(sizeof(float) * ((size_t)nt + 1));
  if (!a) return;
  switch (j->spec.mode) {
    case SRV_MASK_AUTO_TOPOLOGY: j->status = dfm_mask_topology(&s->adj, seed, a); break;
    case SRV_MASK_AUTO_NORMAL: j->status = dfm_mask_normal(&s->adj, s->topo.triangles, p, seed, j->spec.angle, a); break;
    case SRV_MASK_AUTO_BOUNDARY: j->status = dfm_mask_boundary(&s->adj, s->topo.triangles, j->spec.rings, a); break;
  }
  for (uint32_t v = 0; j->status == 0 && v < nt; v++) j->m[v] = j->spec.add && j->m[v] > a[v] ? j->m[v] : a[v];
  if (j->status) snprintf(j->err, sizeof(j->err), "the auto-mask could not be computed");
  free(a);
}

static void job_work(uv_work_t *req) {
  mask_job *j = req->data;
  const srv_session *s = j->s;
  uint32_t nt = s->topo.vertex_count;
  double *p = NULL;
  j->status = DFM_ENOMEM;
  snprintf(j->err, sizeof(j->err), "out of memory");
  if (j->has_shape && !(p = topo_shape(s, &j->shape))) return;
  j->status = 0;
  j->err[0] = '\0';
  switch (j->spec.kind) {
    case SRV_MASK_STROKE: {
      dfm_brush_sample *dabs = NULL;
      int rc = place_dabs(j, &dabs, &j->dabs);
      if (rc) {
        j->status = rc == -1 ? SRV_ELIMIT : DFM_ENOMEM;
        snprintf(j->err, sizeof(j->err), rc == -1 ? "the stroke's path would place over %u dabs: send it in pieces"
                                                  : "out of memory", MAX_DABS);
        break;
      }
      /* Each dab scans every vertex: the same budget as a brush's scans (srv_brush_budget.c). */
      uint64_t work = (uint64_t)j->dabs * nt / SRV_BRUSH_SCAN_RATIO;
      if (work > j->max_work) {
        free(dabs);
        j->status = SRV_ELIMIT;
        snprintf(j->err, sizeof(j->err), "mask stroke refused: %u dabs over %u vertices are %llu units of work; the budget is "
                 "%llu (--max-brush-work): send a shorter stroke", j->dabs, nt, (unsigned long long)work,
                 (unsigned long long)j->max_work);
        break;
      }
      j->status = dfm_mask_dabs(j->spec.tool, j->spec.falloff, &s->adj, p, dabs, j->dabs, j->m, NULL, j->err,
                                sizeof(j->err));
      free(dabs);
      break;
    }
    case SRV_MASK_CLEAR: memset(j->m, 0, sizeof(float) * nt); break;
    case SRV_MASK_INVERT:
      for (uint32_t v = 0; v < nt; v++) j->m[v] = 1.0f - j->m[v];
      break;
    case SRV_MASK_AUTO: auto_mask(j, p); break;
  }
  free(p);
}

static void start_next(srv_server *srv, srv_session *s);

static void job_done(uv_work_t *req, int status) {
  mask_job *j = req->data;
  srv_server *srv = j->srv;
  srv_session *s = j->s;
  srv_masks *x = s->masks;
  srv->pending_jobs--;
  x->running = 0;
  if (status == UV_ECANCELED && !j->status) j->status = SRV_EINTERNAL, snprintf(j->err, sizeof(j->err), "cancelled");
  if (j->status) {
    int code = j->status == SRV_ELIMIT ? SRV_ELIMIT : j->status == DFM_EINVAL ? SRV_EPARAMS : SRV_EINTERNAL;
    srv_reply_error(&j->reply, code, j->err);
  } else if (s->closed) {
    srv_reply_error(&j->reply, SRV_ENOSESSION, "the session was closed");
  } else {
    author_mask *a = author_of(s, j->spec.author);
    uint64_t id = 0;
    int64_t changed = a ? make_step(s, a, j->m, (uint8_t)j->spec.kind, &id) : -1;
    if (changed < 0) {
      srv_reply_error(&j->reply, SRV_EINTERNAL, "out of memory");
    } else {
      if (id) store_author(srv, s, j->spec.author), send_to_author(s, j->spec.author);
      srv_mask_done done = {s->version, id, (uint32_t)changed, masked_render(s, a), j->dabs};
      srv_reply_ok(&j->reply, &(srv_result){.kind = SRV_RESULT_MASK, .mask = &done});
    }
  }
  job_free(j);
  if (!s->closed) start_next(srv, s);
  if (!s->closed && srv->on_edits_settled) srv->on_edits_settled(srv, s);
  srv_session_unref(s);
}

static void start_next(srv_server *srv, srv_session *s) {
  srv_masks *x = s->masks;
  while (x && !x->running && x->queue) {
    mask_job *j = x->queue;
    x->queue = j->next;
    if (!x->queue) x->tail = NULL;
    x->queued--;
    const author_mask *a = find_author(s, j->spec.author);
    uint32_t nt = s->topo.vertex_count;
    j->m = calloc((size_t)nt + 1, sizeof(float));
    if (j->m && a) memcpy(j->m, a->m, sizeof(float) * nt);
    j->has_shape = j->spec.kind == SRV_MASK_STROKE || (j->spec.kind == SRV_MASK_AUTO && j->spec.mode == SRV_MASK_AUTO_NORMAL);
    if (j->has_shape && srv_state_capture(s, &j->shape) != 0) j->has_shape = 0, free(j->m), j->m = NULL;
    j->req.data = j;
    if (!j->m || uv_queue_work(srv->loop, &j->req, job_work, job_done) != 0) {
      srv_reply_error(&j->reply, SRV_EINTERNAL, "cannot start the mask request");
      srv_session_unref(s);
      job_free(j);
      continue;
    }
    srv->pending_jobs++;
    x->running = 1;
    x->running_author = j->spec.author;
  }
}

int srv_mask_request(srv_server *srv, srv_session *s, const srv_mask_spec *spec, srv_reply reply, char *err,
                     size_t errlen) {
  if (spec->kind == SRV_MASK_STROKE && (spec->count == 0 || spec->count > MAX_DABS)) {
    snprintf(err, errlen, "a mask stroke needs 1 to %u samples", MAX_DABS);
    return SRV_EPARAMS;
  }
  if (spec->kind == SRV_MASK_AUTO && spec->mode != SRV_MASK_AUTO_BOUNDARY && spec->vertex >= s->mesh->vertex_count) {
    snprintf(err, errlen, "vertex %u is out of range (%u vertices)", spec->vertex, s->mesh->vertex_count);
    return SRV_EPARAMS;
  }
  if (spec->kind == SRV_MASK_AUTO && spec->mode == SRV_MASK_AUTO_BOUNDARY && spec->rings < 1) {
    snprintf(err, errlen, "rings must be at least 1");
    return SRV_EPARAMS;
  }
  srv_masks *x = masks_of(s);
  if (x && x->queued >= 256) {
    snprintf(err, errlen, "session '%s' already has 256 mask requests waiting", s->name);
    return SRV_ELIMIT;
  }
  mask_job *j = x ? calloc(1, sizeof(*j)) : NULL;
  if (j && spec->kind == SRV_MASK_STROKE) {
    j->samples = malloc(sizeof(dfm_brush_sample) * spec->count);
    if (j->samples) memcpy(j->samples, spec->samples, sizeof(dfm_brush_sample) * spec->count);
  }
  if (!j || (spec->kind == SRV_MASK_STROKE && !j->samples)) {
    if (j) job_free(j);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  j->spec = *spec;
  j->spec.samples = NULL;
  j->max_work = srv->cfg.max_brush_work;
  j->srv = srv;
  j->s = s;
  j->reply = reply;
  srv_session_ref(s);
  if (x->tail) x->tail->next = j;
  else x->queue = j;
  x->tail = j;
  x->queued++;
  start_next(srv, s);
  return 0;
}

int srv_mask_edit(srv_server *srv, srv_session *s, const proto_mask_edit *e, uint32_t author, srv_reply reply,
                  char *err, size_t errlen) {
  static const srv_mask_kind kinds[] = {SRV_MASK_STROKE, SRV_MASK_CLEAR, SRV_MASK_INVERT, SRV_MASK_AUTO};
  srv_mask_spec spec = {.kind = kinds[e->op & 3], .author = author, .tool = (dfm_mask_tool)e->tool,
                        .falloff = (dfm_falloff)e->falloff, .mode = (srv_mask_auto)e->mode, .vertex = e->vertex,
                        .angle = (double)e->angle * M_PI / 180.0, .rings = e->rings, .add = e->combine == 1};
  dfm_brush_sample *smp = NULL;
  if (e->op == PROTO_MASK_STROKE) {
    smp = calloc((size_t)e->count + 1, sizeof(*smp));
    if (!smp) {
      snprintf(err, errlen, "out of memory");
      return SRV_EINTERNAL;
    }
    for (uint32_t i = 0; i < e->count; i++) {
      float f[5];
      proto_mask_sample_at(e, i, f);
      for (int k = 0; k < 3; k++) smp[i].center[k] = f[k];
      smp[i].radius = f[3];
      smp[i].strength = f[4];
    }
    spec.samples = smp;
    spec.count = e->count;
  }
  int rc = srv_mask_request(srv, s, &spec, reply, err, errlen);
  free(smp);
  return rc;
}

int srv_mask_busy(const srv_session *s, uint32_t author) {
  const srv_masks *x = s->masks;
  if (!x) return 0;
  if (x->running && x->running_author == author) return 1;
  for (const mask_job *j = x->queue; j; j = j->next)
    if (j->spec.author == author) return 1;
  return 0;
}

void srv_mask_close_all(srv_session *s) {
  srv_masks *x = s->masks;
  while (x && x->queue) {
    mask_job *j = x->queue;
    x->queue = j->next;
    x->queued--;
    srv_reply_error(&j->reply, SRV_ENOSESSION, "the session was closed");
    srv_session_unref(s);
    job_free(j);
  }
  if (x) x->tail = NULL;
}

/* ---- undo and redo, in one order with history's steps ----------------------------------------------- */

typedef struct newest_ctx {
  uint32_t author;
  uint64_t undoable;  /* the author's newest step undo would take (not undone), 0: none */
  uint64_t made;      /* the author's newest step that is no undo or redo */
  uint64_t undo;      /* the author's newest UNDO step whose target is still undone ... */
  uint64_t undo_of;   /* ... and that target */
} newest_ctx;

static int skipped_cause(int cause) {
  return cause == SRV_CAUSE_UNDO || cause == SRV_CAUSE_REDO || cause == SRV_CAUSE_ANIM_PLAY ||
         cause == SRV_CAUSE_ANIM_COMPRESS;
}

static int newest_cb(const srv_history_entry *e, void *arg) {
  newest_ctx *c = arg;
  if (e->author != c->author) return 0;
  if (!skipped_cause(e->cause) && e->step > c->made) c->made = e->step;
  if (!skipped_cause(e->cause) && !e->undone && e->step > c->undoable) c->undoable = e->step;
  if (e->cause == SRV_CAUSE_UNDO && e->step > c->undo) c->undo = e->step, c->undo_of = e->undo_of;
  return 0;
}

typedef struct undone_ctx {
  uint64_t step;
  int undone;
} undone_ctx;

static int undone_cb(const srv_history_entry *e, void *arg) {
  undone_ctx *c = arg;
  if (e->step != c->step) return 0;
  c->undone = e->undone;
  return 1;
}

static newest_ctx newest(const srv_session *s, uint32_t author) {
  newest_ctx c = {author, 0, 0, 0, 0};
  if (s->history) srv_history_list(s, UINT64_MAX, SRV_HISTORY_STEPS, newest_cb, &c);
  if (c.undo && s->history) {
    undone_ctx u = {c.undo_of, 0};
    srv_history_list(s, UINT64_MAX, SRV_HISTORY_STEPS, undone_cb, &u);
    if (!u.undone) c.undo = 0;
  }
  return c;
}

int srv_mask_undo_first(srv_session *s, uint32_t author) {
  const author_mask *a = find_author(s, author);
  if (!a || a->top == 0) return 0;
  return a->steps[a->top - 1].id > newest(s, author).undoable;
}

int srv_mask_redo_first(srv_session *s, uint32_t author) {
  author_mask *a = find_author(s, author);
  if (!a || a->top == a->count) return 0;
  newest_ctx c = newest(s, author);
  uint64_t seq = a->steps[a->top].undo_seq;
  if (c.made > seq) { /* a new step since that undo: nothing of the mask to redo any more */
    while (a->count > a->top) step_fini(&a->steps[--a->count]);
    return 0;
  }
  return seq > c.undo;
}

int srv_mask_undo(srv_server *srv, srv_session *s, uint32_t author, int redo, srv_history_result *out, char *err,
                  size_t errlen) {
  author_mask *a = find_author(s, author);
  if (!a || (redo ? a->top == a->count : a->top == 0)) {
    snprintf(err, errlen, "%s has no mask step to %s in session '%s'", srv_authors_name(&srv->authors, author),
             redo ? "redo" : "undo", s->name);
    return SRV_ERANGE;
  }
  mask_step *st = redo ? &a->steps[a->top] : &a->steps[a->top - 1];
  uint32_t restored = 0;
  for (uint32_t i = 0; i < st->n; i++) {
    a->m[st->idx[i]] = redo ? st->after[i] : st->before[i];
    restored += render_copies(s, st->idx[i]);
  }
  if (redo) a->top++;
  else a->top--, st->undo_seq = new_step_id(s);
  store_author(srv, s, author);
  send_to_author(s, author);
  memset(out, 0, sizeof(*out));
  out->version = s->version;
  out->step = st->id;
  out->cause = SRV_CAUSE_MASK;
  out->restored = restored;
  return 0;
}
