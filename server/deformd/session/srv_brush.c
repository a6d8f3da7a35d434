/*
 * srv_brush.c — brush strokes on a session, on the thread pool.
 *
 * A stroke changes the shape relative to what it is now, so strokes on one session run one
 * after another in the order they arrived (a FIFO per session): each sees the last one's
 * result. A stroke job evaluates the current shape, places the dabs along the stroke's path and
 * applies them on the welded topology (dfm_stroke.c, dfm_brush.c) — here, so that every client
 * that sends the same path gets the same result — and turns the displacement into sculpt
 * offsets; on the loop thread the offsets that changed become one SET_OFFSETS op and one DELTA
 * to every viewer.
 *
 * A stroke may come in pieces as an editor's pointer moves (srv_brush_stroke_piece): the session
 * keeps, per connection, where its last stroke stands (dfm_stroke_state: the path's end, the
 * distance to the next dab, the shape when it began), and a piece continues it, so the pieces
 * place the dabs the whole path would. Pieces are the connection's, not the author's: two
 * windows of one author stroke at once without joining their paths. At most PIECES_KEPT
 * connections are kept per session (the least recently used goes; its next piece starts a new
 * stroke). Each piece is its own SET_OFFSETS operation of the stroke's author, and the pieces
 * of one stroke share an undo step (Ctrl+Z takes back the stroke, not its last frame's piece).
 *
 * DOES NOT parse requests: srv_edit_rpc.c and srv_stream.c call srv_brush_stroke_piece().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "dfm.h"
#include "dfm_brush.h"
#include "dfm_stroke.h"
#include "srv_brush.h"
#include "srv_error.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_state.h"
#include "srv_history.h"
#include "srv_mask.h"
#include "dfm_mask.h"

#define PIECES_KEPT 4

/* Where a connection's last stroke stands, between its pieces. */
typedef struct stroke_piece {
  uint32_t conn;        /* srv_conn id */
  uint64_t step;        /* the undo step its pieces share (srv_history), or 0 */
  dfm_brush_kind kind;
  dfm_stroke_state state;
  struct stroke_piece *next; /* most recently used first */
} stroke_piece;

typedef struct stroke {
  uv_work_t req;
  srv_server *srv;
  srv_session *session; /* referenced */
  dfm_brush brush;
  dfm_brush_sample *samples;
  uint32_t count;
  uint32_t author;      /* srv_authors id: whose operation the result is */
  uint32_t conn;        /* srv_conn id (0: none): whose pieces it continues */
  uint64_t step;        /* the undo step of the whole stroke (0: one of its own) */
  uint64_t max_work;    /* the server's max_brush_work when the stroke arrived */
  srv_reply reply;
  srv_state shape;      /* captured when the job starts, not when the stroke arrived */
  float *mask;          /* the author's mask then (srv_mask_copy; NULL: none): what it holds */
  uint32_t *idx;        /* result: render vertices whose offset the stroke sets, ascending */
  int32_t *q;
  uint32_t n;
  uint32_t dabs;        /* result: dabs placed along the path */
  int piece;            /* continues the connection's stroke (when there is one) */
  dfm_stroke_state path; /* the stroke so far: taken from the session's pieces when the job
                         * starts, given back when it is done */
  int status;
  char err[256];
  struct stroke *next;
} stroke;

static void stroke_free(stroke *k) {
  dfm_stroke_state_fini(&k->path);
  srv_state_release(&k->shape);
  free(k->mask);
  free(k->samples);
  free(k->idx);
  free(k->q);
  free(k);
}

static void stroke_work(uv_work_t *req) {
  stroke *k = req->data;
  const srv_session *s = k->session;
  const mesh_topology *t = &s->topo;
  uint32_t nv = s->mesh->vertex_count, nt = t->vertex_count;
  float *shape = malloc(sizeof(float) * (3 * (size_t)nv + 1));
  double *p = malloc(sizeof(double) * (3 * (size_t)nt + 1));
  double *p0 = malloc(sizeof(double) * (3 * (size_t)nt + 1));
  uint8_t *moved = calloc((size_t)nt + 1, 1);
  uint32_t *names = malloc(sizeof(uint32_t) * ((size_t)nt + 1)); /* errors name render vertices */
  k->status = DFM_ENOMEM;
  if (!shape || !p || !p0 || !moved || !names || srv_state_shape(&k->shape, shape) != 0) {
    snprintf(k->err, sizeof(k->err), "out of memory");
    goto out;
  }
  for (uint32_t v = 0; v < nt; v++)
    for (int c = 0; c < 3; c++) p[3 * (size_t)v + c] = shape[3 * (size_t)t->topo_render[t->topo_offsets[v]] + c];
  memcpy(p0, p, sizeof(double) * 3 * nt);
  for (uint32_t v = 0; v < nt; v++) names[v] = t->topo_render[t->topo_offsets[v]];
  /* The work budget first: a stroke whose dabs would touch too much is refused before it moves
   * a vertex, with the figures (srv_brush_budget.c). The dabs, not the points of the path: two
   * points far apart place many dabs, a hundred points on one spot place one. */
  dfm_brush_sample *dabs = NULL;
  uint32_t ndabs = 0;
  k->status = dfm_stroke_dabs(&k->brush, k->samples, k->count, &k->path, &dabs, &ndabs, NULL, k->err, sizeof(k->err));
  if (k->status) goto out;
  srv_brush_cost cost;
  int rc = srv_brush_work(p, nt, dabs, ndabs, dfm_brush_mirror_axis(&k->brush), &cost);
  free(dabs);
  if (rc != 0) {
    k->status = DFM_ENOMEM;
    snprintf(k->err, sizeof(k->err), "out of memory");
    goto out;
  }
  if (cost.work > k->max_work) {
    k->status = SRV_ELIMIT;
    snprintf(k->err, sizeof(k->err),
             "stroke refused: %u dabs along its %u points would touch up to %llu vertices in all (about %llu per dab) "
             "and scan %llu, %llu units of work; the budget is %llu (--max-brush-work): send a shorter stroke or a "
             "smaller radius", ndabs, k->count, (unsigned long long)cost.touched,
             (unsigned long long)(cost.touched / (ndabs ? ndabs : 1)), (unsigned long long)cost.scanned,
             (unsigned long long)cost.work, (unsigned long long)k->max_work);
    goto out;
  }
  k->brush.vertex_names = names;
  /* The smooth brush (and auto-smoothing) smooth what was sculpted, not the mesh itself: they
   * get the shape without the sculpt offsets (dfm_brush.h, rest). */
  double *rest = malloc(sizeof(double) * (3 * (size_t)nt + 1));
  if (!rest) {
    k->status = DFM_ENOMEM;
    snprintf(k->err, sizeof(k->err), "out of memory");
    goto out;
  }
  for (uint32_t v = 0; v < nt; v++) {
    uint32_t r = t->topo_render[t->topo_offsets[v]];
    for (int c = 0; c < 3; c++)
      rest[3 * (size_t)v + c] = p[3 * (size_t)v + c] - proto_dequantize(k->shape.offsets[3 * (size_t)r + c], k->shape.quantum);
  }
  k->brush.rest = rest;
  /* Masks (srv_mask.c): the author's held vertices take none of the stroke, feathered over the
   * brush's radius at the mask's edge (dfm_mask_free). */
  float *take = NULL;
  if (k->mask) {
    take = malloc(sizeof(float) * ((size_t)nt + 1));
    if (!take || dfm_mask_free(&s->adj, p, k->mask, k->samples[0].radius, take) != 0) {
      free(take);
      free(rest);
      k->status = DFM_ENOMEM;
      snprintf(k->err, sizeof(k->err), "out of memory");
      goto out;
    }
    k->brush.take = take;
  }
  k->status = dfm_stroke_apply(&k->brush, &s->adj, t->triangles, t->triangle_count, k->samples, k->count, p, moved,
                               &k->path, &k->dabs, k->err, sizeof(k->err));
  k->brush.vertex_names = NULL;
  k->brush.take = NULL;
  k->brush.rest = NULL;
  free(take);
  free(rest);
  if (k->status) goto out;
  uint32_t count = 0;
  for (uint32_t r = 0; r < nv; r++) count += moved[t->render_to_topo[r]];
  k->idx = malloc(sizeof(uint32_t) * (count + 1));
  k->q = malloc(sizeof(int32_t) * 3 * ((size_t)count + 1));
  if (!k->idx || !k->q) {
    k->status = DFM_ENOMEM;
    snprintf(k->err, sizeof(k->err), "out of memory");
    goto out;
  }
  for (uint32_t r = 0; r < nv; r++) {
    uint32_t v = t->render_to_topo[r];
    if (!moved[v]) continue;
    for (int c = 0; c < 3; c++) {
      size_t i = 3 * (size_t)v + c;
      float off = proto_dequantize(k->shape.offsets[3 * (size_t)r + c], k->shape.quantum) + (float)(p[i] - p0[i]);
      k->q[3 * (size_t)k->n + c] = proto_quantize(off, k->shape.quantum);
    }
    k->idx[k->n++] = r;
  }
out:
  free(shape);
  free(p);
  free(p0);
  free(moved);
  free(names);
}

static void start_next(srv_server *srv, srv_session *s);

/* Removes and returns the connection's piece (NULL when there is none). */
static stroke_piece *unlink_piece(srv_session *s, uint32_t conn) {
  for (stroke_piece **pp = &s->pieces; *pp; pp = &(*pp)->next)
    if ((*pp)->conn == conn) {
      stroke_piece *x = *pp;
      *pp = x->next;
      return x;
    }
  return NULL;
}

static void free_piece(stroke_piece *x) {
  dfm_stroke_state_fini(&x->state);
  free(x);
}

/* Before a stroke's job: a piece continues where its connection's stroke of the same brush
 * stands; anything else starts afresh (and ends the connection's previous stroke). A stroke
 * with no connection neither continues nor is kept. */
static void take_piece(srv_session *s, stroke *k) {
  if (!k->conn) return;
  stroke_piece *x = unlink_piece(s, k->conn);
  if (x && k->piece && x->kind == k->brush.kind) {
    k->path = x->state;
    k->step = x->step;
    memset(&x->state, 0, sizeof(x->state));
  }
  if (x) free_piece(x);
}

/* After a stroke applied: where it stands is kept for the connection's next piece (the least
 * recently used connection beyond PIECES_KEPT goes). */
static void keep_piece(srv_session *s, stroke *k) {
  if (!k->conn) return;
  stroke_piece *x = calloc(1, sizeof(*x));
  if (!x) return; /* the next piece starts a new stroke */
  x->conn = k->conn;
  x->step = k->step;
  x->kind = k->brush.kind;
  x->state = k->path;
  memset(&k->path, 0, sizeof(k->path));
  x->next = s->pieces;
  s->pieces = x;
  uint32_t n = 0;
  for (stroke_piece **pp = &s->pieces; *pp; n++) {
    if (n < PIECES_KEPT) {
      pp = &(*pp)->next;
      continue;
    }
    stroke_piece *old = *pp;
    *pp = old->next;
    free_piece(old);
  }
}

static void stroke_done(uv_work_t *req, int status) {
  stroke *k = req->data;
  srv_server *srv = k->srv;
  srv_session *s = k->session;
  srv->pending_jobs--;
  s->brush_running = 0;
  if (status == UV_ECANCELED && !k->status) {
    k->status = DFM_ESOLVER;
    snprintf(k->err, sizeof(k->err), "cancelled");
  }
  if (k->status) {
    srv_reply_error(&k->reply, k->status == SRV_ELIMIT ? SRV_ELIMIT : k->status == DFM_EINVAL ? SRV_EPARAMS : SRV_ESOLVER,
                    k->err);
  } else if (s->closed) {
    srv_reply_error(&k->reply, SRV_ENOSESSION, "the session was closed");
  } else {
    /* Keep only the vertices whose offset really changes. */
    uint32_t m = 0;
    for (uint32_t i = 0; i < k->n; i++) {
      if (memcmp(s->offsets + 3 * (size_t)k->idx[i], k->q + 3 * (size_t)i, sizeof(int32_t) * 3) == 0) continue;
      k->idx[m] = k->idx[i];
      memmove(k->q + 3 * (size_t)m, k->q + 3 * (size_t)i, sizeof(int32_t) * 3);
      m++;
    }
    /* The pieces of one stroke are one undo step, as a gesture's drags are. The step id is taken
     * as its first operation applies, so steps stay in the ascending order history looks
     * them up by. */
    if (m && k->conn && !k->step && s->history) k->step = srv_history_new_step_id(s);
    srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = k->author, .cause = SRV_CAUSE_BRUSH, .step = k->step,
                 .count = m, .indices = k->idx, .q = k->q};
    uint64_t version = m ? srv_session_apply(srv, s, &op) : s->version;
    srv_brush_stroked done = {version, m, k->dabs};
    srv_reply_ok(&k->reply, &(srv_result){.kind = SRV_RESULT_BRUSH_STROKE, .brush_stroked = &done});
    keep_piece(s, k);
  }
  stroke_free(k);
  if (!s->closed) start_next(srv, s);
  if (!s->closed && srv->on_edits_settled) srv->on_edits_settled(srv, s);
  srv_session_unref(s);
}

static void start_next(srv_server *srv, srv_session *s) {
  while (!s->brush_running && s->strokes) {
    stroke *k = s->strokes;
    s->strokes = k->next;
    if (!s->strokes) s->strokes_tail = NULL;
    s->stroke_count--;
    k->req.data = k;
    take_piece(s, k);
    k->mask = srv_mask_copy(s, k->author);
    if (srv_state_capture(s, &k->shape) != 0 || uv_queue_work(srv->loop, &k->req, stroke_work, stroke_done) != 0) {
      srv_reply_error(&k->reply, SRV_EINTERNAL, "cannot start the stroke");
      srv_session_unref(s);
      stroke_free(k);
      if (srv->on_edits_settled) srv->on_edits_settled(srv, s);
      continue;
    }
    srv->pending_jobs++;
    s->brush_running = 1;
    s->brush_author = k->author;
  }
}

int srv_brush_busy(const srv_session *s, uint32_t author) {
  if (s->brush_running && s->brush_author == author) return 1;
  for (const stroke *k = s->strokes; k; k = k->next)
    if (k->author == author) return 1;
  return 0;
}

int srv_brush_stroke(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                     uint32_t count, uint32_t author, srv_reply reply, char *err, size_t errlen) {
  return srv_brush_stroke_piece(srv, s, brush, samples, count, author, 0, 0, reply, err, errlen);
}

int srv_brush_stroke_piece(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                           uint32_t count, uint32_t author, uint32_t conn, int piece, srv_reply reply, char *err,
                           size_t errlen) {
  if (count == 0) {
    snprintf(err, errlen, "a stroke needs at least one sample");
    return SRV_EPARAMS;
  }
  if (s->stroke_count >= 256) {
    snprintf(err, errlen, "session '%s' already has 256 strokes waiting", s->name);
    return SRV_ELIMIT;
  }
  stroke *k = calloc(1, sizeof(*k));
  if (k) k->samples = malloc(sizeof(dfm_brush_sample) * count);
  if (!k || !k->samples) {
    free(k);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  memcpy(k->samples, samples, sizeof(dfm_brush_sample) * count);
  k->count = count;
  k->piece = piece;
  k->max_work = srv->cfg.max_brush_work;
  k->brush = *brush;
  k->author = author;
  k->conn = conn;
  k->reply = reply;
  k->srv = srv;
  k->session = s;
  srv_session_ref(s);
  if (s->strokes_tail) s->strokes_tail->next = k;
  else s->strokes = k;
  s->strokes_tail = k;
  s->stroke_count++;
  start_next(srv, s);
  return 0;
}

void srv_brush_close_all(srv_session *s) {
  while (s->strokes) {
    stroke *k = s->strokes;
    s->strokes = k->next;
    s->stroke_count--;
    srv_reply_error(&k->reply, SRV_ENOSESSION, "the session was closed");
    srv_session_unref(s);
    stroke_free(k);
  }
  s->strokes_tail = NULL;
  while (s->pieces) {
    stroke_piece *x = s->pieces;
    s->pieces = x->next;
    free_piece(x);
  }
}
