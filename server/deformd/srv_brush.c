/*
 * srv_brush.c — brush strokes on a session, on the thread pool.
 *
 * A stroke changes the shape relative to what it is now, so strokes on one session run one
 * after another in the order they arrived (a FIFO per session): each sees the last one's
 * result. A stroke job evaluates the current shape, applies the samples on the welded topology
 * (dfm_brush.c), and turns the displacement into sculpt offsets; on the loop thread the offsets
 * that changed become one SET_OFFSETS op and one DELTA to every viewer.
 *
 * DOES NOT parse requests: srv_methods.c and srv_stream.c call srv_brush_stroke().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

typedef struct stroke {
  uv_work_t req;
  srv_server *srv;
  srv_session *session; /* referenced */
  dfm_brush brush;
  dfm_brush_sample *samples;
  uint32_t count;
  uint32_t author;
  uint64_t max_work;    /* the server's max_brush_work when the stroke arrived */
  srv_reply reply;
  srv_state state;      /* captured when the job starts, not when the stroke arrived */
  uint32_t *idx;        /* result: render vertices whose offset the stroke sets, ascending */
  int32_t *q;
  uint32_t n;
  int status;
  char err[256];
  struct stroke *next;
} stroke;

static void stroke_free(stroke *k) {
  srv_state_release(&k->state);
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
  if (!shape || !p || !p0 || !moved || !names || srv_state_shape(&k->state, shape) != 0) {
    snprintf(k->err, sizeof(k->err), "out of memory");
    goto out;
  }
  for (uint32_t v = 0; v < nt; v++)
    for (int c = 0; c < 3; c++) p[3 * (size_t)v + c] = shape[3 * (size_t)t->topo_render[t->topo_offsets[v]] + c];
  memcpy(p0, p, sizeof(double) * 3 * nt);
  for (uint32_t v = 0; v < nt; v++) names[v] = t->topo_render[t->topo_offsets[v]];
  /* The work budget first: a stroke whose samples would touch too much is refused before it
   * moves a vertex, with the figures (srv_brush_budget.c). */
  srv_brush_cost cost;
  if (srv_brush_work(p, nt, k->samples, k->count, k->brush.mirror_x, &cost) != 0) {
    snprintf(k->err, sizeof(k->err), "out of memory");
    goto out;
  }
  if (cost.work > k->max_work) {
    k->status = SRV_ELIMIT;
    snprintf(k->err, sizeof(k->err),
             "stroke refused: %u samples would touch up to %llu vertices in all (about %llu per sample) and scan "
             "%llu, %llu units of work; the budget is %llu (--max-brush-work): send fewer samples or a smaller "
             "radius", k->count, (unsigned long long)cost.touched,
             (unsigned long long)(cost.touched / (k->count ? k->count : 1)), (unsigned long long)cost.scanned,
             (unsigned long long)cost.work, (unsigned long long)k->max_work);
    goto out;
  }
  k->brush.vertex_names = names;
  k->status = dfm_brush_apply(&k->brush, &s->adj, t->triangles, t->triangle_count, k->samples, k->count, p,
                              moved, k->err, sizeof(k->err));
  k->brush.vertex_names = NULL;
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
      float off = proto_dequantize(k->state.offsets[3 * (size_t)r + c], k->state.quantum) + (float)(p[i] - p0[i]);
      k->q[3 * (size_t)k->n + c] = proto_quantize(off, k->state.quantum);
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
    srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = k->author, .cause = SRV_CAUSE_BRUSH, .count = m, .indices = k->idx, .q = k->q};
    uint64_t version = m ? srv_session_apply(srv, s, &op) : s->version;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "version", (double)version);
    cJSON_AddNumberToObject(r, "moved_vertices", m);
    srv_reply_ok(&k->reply, r);
  }
  stroke_free(k);
  if (!s->closed) start_next(srv, s);
  srv_session_unref(s);
}

static void start_next(srv_server *srv, srv_session *s) {
  while (!s->brush_running && s->strokes) {
    stroke *k = s->strokes;
    s->strokes = k->next;
    if (!s->strokes) s->strokes_tail = NULL;
    s->stroke_count--;
    k->req.data = k;
    if (srv_state_capture(s, &k->state) != 0 || uv_queue_work(srv->loop, &k->req, stroke_work, stroke_done) != 0) {
      srv_reply_error(&k->reply, SRV_EINTERNAL, "cannot start the stroke");
      srv_session_unref(s);
      stroke_free(k);
      continue;
    }
    srv->pending_jobs++;
    s->brush_running = 1;
  }
}

int srv_brush_stroke(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                     uint32_t count, uint32_t author, srv_reply reply, char *err, size_t errlen) {
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
  k->max_work = srv->cfg.max_brush_work;
  k->brush = *brush;
  k->author = author;
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
}
