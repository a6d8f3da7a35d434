/*
 * srv_gesture.c — editing gestures: begin (factorise), drag (solve), end, on the thread pool.
 *
 * A gesture is a handle owned by its session: mode, region, handle set and one factorised
 * dfm_system. Its lifecycle on the loop thread:
 *
 *   begin  -> job: evaluate the current shape, build the region
 *          -> on the loop: estimate the memory, refuse past the session's or the client's budget
 *          -> job: factorise                                                -> READY / FAILED
 *   drag   -> stored as the pending transform; if no job runs, a solve job starts
 *   solve  -> job: back-substitute, turn the result into sculpt offsets
 *          -> on the loop: one SET_OFFSETS op (only vertices whose offset changed), answered to
 *             every drag that was waiting; a newer pending drag starts the next solve
 *   end    -> answered after the last pending drag is applied; the gesture is freed
 *
 * At most one job runs per gesture, so its dfm_system is never shared between threads; drags
 * that arrive meanwhile collapse to the newest (invariant 6). The sculpt layer keeps what the
 * gesture did: new offset = offset at begin + (solved position - position at begin).
 *
 * A gesture ends with the connection that began it unless it was begun detached (JSON-RPC
 * "detached": true), and its memory is then given back to the system (give_back).
 *
 * DOES NOT parse requests: srv_methods.c and srv_stream.c call in here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "dfm.h"
#include "srv_gesture.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_state.h"
#include "srv_history.h"
#include "srv_mask.h"
#include "srv_measure.h"

typedef enum g_state { G_FACTORING, G_READY, G_SOLVING, G_FAILED } g_state;

struct srv_gesture {
  uint32_t id;
  uint32_t owner;         /* the connection it ends with (0: detached, or none) */
  uint32_t client;        /* the connection that began it: whose memory budget it counts in */
  size_t charge;          /* its estimated memory, counted in session->gesture_bytes */
  srv_server *srv;
  uint32_t author;        /* srv_authors id */
  uint64_t step;          /* its operations are one undo step */
  srv_session *session;
  g_state state;
  int ended;              /* end requested: finish the pending drag, then free */
  int dropped;            /* its connection went away */
  int job_running;
  dfm_system *sys;        /* touched by at most one job at a time */
  double *rest;           /* 3 × topology vertices: the shape at begin */
  double *out;            /* 3 × topology vertices: the solver's output, reused by every drag */
  float *mask;            /* the author's mask at begin, per topology vertex (NULL: none): a
                           * value of 1 is an anchor, a partial value scales the displacement */
  uint32_t *region;       /* render vertices that can move, ascending */
  int32_t *region_q0;     /* their quantised offsets at begin (3 each) */
  uint32_t region_count;
  double pivot[3];        /* the handle's centroid at begin: the default pivot */
  uint64_t last_used;     /* uv_now() of the last begin/drag */
  int has_pending;
  dfm_xform pending;
  int pivot_given;
  srv_reply *waiting;     /* drags answered by the next applied solve */
  uint32_t nwaiting, capwaiting;
  srv_reply begin_reply, end_reply;
  int have_end_reply;
  dfm_info info;
  char error[256];
  srv_measure *measure;   /* "measure_exact": its solves, replayed exactly after end (NULL: not asked) */
  int measure_state;      /* M_NONE, M_RUNNING, M_DONE */
  int out_valid;          /* `out` holds the last applied solve's result */
  size_t measure_charge;  /* the replay's estimate, counted in session->gesture_bytes while it runs */
  struct srv_gesture *next;
};

enum { M_NONE, M_RUNNING, M_DONE };

/* ---- lifetime ------------------------------------------------------------------------------ */

/* ---- memory given back ---------------------------------------------------------------------- */

/* Once gestures have freed at least this much, the heap's free pages go back to the system. */
#define TRIM_AFTER ((size_t)32 << 20)

static void trim_work(uv_work_t *req) {
  (void)req;
  dfm_memory_trim();
}

static void trim_done(uv_work_t *req, int status) {
  srv_server *srv = req->data;
  (void)status;
  srv->pending_jobs--;
  srv->trim_running = 0;
  free(req);
}

/* A factorisation's blocks under 32 MiB come from the heap (dfm_memory.c), which keeps them after
 * free: 64 gestures left 5 GB resident once they had ended. malloc_trim hands the free pages back
 * (what the heap reserve keeps stays); it walks the heap, so it runs on the pool, one at a time. */
static void give_back(srv_server *srv, size_t freed) {
  srv->trim_freed += freed;
  if (srv->trim_running || srv->trim_freed < TRIM_AFTER) return;
  uv_work_t *req = malloc(sizeof(*req));
  if (!req) return;
  req->data = srv;
  if (uv_queue_work(srv->loop, req, trim_work, trim_done) != 0) {
    free(req);
    return;
  }
  srv->pending_jobs++;
  srv->trim_running = 1;
  srv->trim_freed = 0;
}

static void gesture_free(srv_gesture *g) {
  for (uint32_t i = 0; i < g->nwaiting; i++) srv_reply_error(&g->waiting[i], SRV_ENOGESTURE, "the gesture ended");
  free(g->waiting);
  srv_reply_error(&g->begin_reply, SRV_ENOGESTURE, "the gesture ended");
  if (g->have_end_reply && g->measure) {
    g->measure->result.version = g->session->version;
    srv_reply_ok(&g->end_reply, &(srv_result){.kind = SRV_RESULT_GESTURE_ENDED, .gesture_ended = &g->measure->result});
  } else if (g->have_end_reply)
    srv_reply_ok(&g->end_reply, &(srv_result){.kind = SRV_RESULT_VERSION, .version = g->session->version});
  if (g->measure) srv_measure_fini(g->measure);
  free(g->measure);
  dfm_system_destroy(g->sys);
  free(g->rest);
  free(g->out);
  free(g->region);
  free(g->region_q0);
  free(g->mask);
  g->session->gesture_bytes -= g->charge;
  give_back(g->srv, g->charge);
  free(g);
}

static void unlink_gesture(srv_gesture *g) {
  srv_session *s = g->session;
  srv_gesture **pp = &s->gestures;
  while (*pp && *pp != g) pp = &(*pp)->next;
  if (*pp) {
    *pp = g->next;
    s->gesture_count--;
  }
}

static int start_measure(srv_gesture *g);

/* Frees an ended gesture once no job uses it and nothing is pending (and, with measure_exact,
 * once its drags have been replayed through the exact solve). */
static void maybe_finish(srv_gesture *g) {
  if (!g->ended || g->job_running || (g->has_pending && g->state == G_READY)) return;
  if (g->measure && g->measure_state == M_NONE && start_measure(g)) return;
  unlink_gesture(g);
  srv_session *s = g->session;
  gesture_free(g);
  srv_session_unref(s);
}

static srv_gesture *find(srv_session *s, uint32_t id) {
  for (srv_gesture *g = s->gestures; g; g = g->next)
    if (g->id == id && !g->ended) return g;
  return NULL;
}

/* ---- begin ----------------------------------------------------------------------------------- */

typedef struct begin_job {
  uv_work_t req;
  srv_server *srv;
  srv_gesture *g;
  srv_state state;
  dfm_params params;  /* owns the index arrays below (render indices until the job maps them) */
  uint32_t *handle, *roi, *anchors, *soft;
  double *soft_weight, *soft_position; /* per soft constraint; positions NAN: where it is at begin */
  int64_t pick;
  double handle_radius, roi_radius;
  /* The region step's result, in topology vertices (the factorisation step reads them); the
   * soft constraints' vertices and where they pull (given, or where the vertex is at begin). */
  uint32_t *h, nh, *troi, nr, *an, na, *tsoft;
  double *tsoft_position;
  dfm_proxy *made_proxy; /* a multiresolution proxy the factorisation made: the session keeps the first */
  int region_done;      /* the first step ran: the second factorises */
  int status;
  char err[256];
} begin_job;

static void begin_job_free(begin_job *j) {
  srv_state_release(&j->state);
  free(j->handle);
  free(j->roi);
  free(j->anchors);
  free(j->soft);
  free(j->soft_weight);
  free(j->soft_position);
  free(j->h);
  free(j->troi);
  free(j->an);
  free(j->tsoft);
  free(j->tsoft_position);
  dfm_proxy_free(j->made_proxy);
  free(j);
}

/* Render vertex indices -> distinct topology vertices. */
static uint32_t *to_topo(const mesh_topology *t, const uint32_t *render, uint32_t count, uint32_t *out_count) {
  uint32_t *out = malloc(sizeof(uint32_t) * (count + 1));
  uint8_t *seen = calloc(t->vertex_count + 1, 1);
  uint32_t k = 0;
  if (out && seen)
    for (uint32_t i = 0; i < count; i++) {
      uint32_t v = t->render_to_topo[render[i]];
      if (!seen[v]) seen[v] = 1, out[k++] = v;
    }
  free(seen);
  *out_count = k;
  return out;
}

/* The author's mask (srv_mask.c): the vertices it holds fully leave the handle and become
 * anchors, in the region (or anywhere, with none), so the solve meets them with the smooth
 * border's zero slope (dfm_border.c) where the mask ends. Returns 0, DFM_EINVAL or DFM_ENOMEM. */
static int hold_masked(begin_job *j, srv_gesture *g, const mesh_topology *t) {
  uint32_t nt = t->vertex_count, keep = 0;
  for (uint32_t i = 0; i < j->nh; i++)
    if (g->mask[j->h[i]] < 1.0f) j->h[keep++] = j->h[i];
  j->nh = keep;
  if (!keep && j->params.soft_count == 0) {
    snprintf(j->err, sizeof(j->err), "every handle vertex is held by your mask: pick a vertex it does not hold");
    return DFM_EINVAL;
  }
  uint8_t *in = calloc((size_t)nt + 1, 1);
  uint32_t *an = malloc(sizeof(uint32_t) * ((size_t)j->na + nt + 1));
  if (!in || !an) {
    free(in);
    free(an);
    return DFM_ENOMEM;
  }
  if (j->troi)
    for (uint32_t i = 0; i < j->nr; i++) in[j->troi[i]] = 1;
  else
    memset(in, 1, nt);
  uint32_t na = 0;
  for (uint32_t i = 0; i < j->na; i++) an[na++] = j->an[i], in[j->an[i]] = 0; /* given anchors once */
  for (uint32_t v = 0; v < nt; v++)
    if (in[v] && g->mask[v] >= 1.0f) an[na++] = v;
  free(in);
  free(j->an);
  j->an = an;
  j->na = na;
  return 0;
}

/* The first step of a begin, on the pool: the shape at begin, the handle, the region and the
 * anchors in topology vertices. Cheap next to the factorisation, and what the memory estimate
 * needs (srv_gesture_begin's budget check runs between the two steps, on the loop). */
static void region_work(uv_work_t *req) {
  begin_job *j = req->data;
  srv_gesture *g = j->g;
  const srv_session *s = g->session;
  const mesh_topology *t = &s->topo;
  uint32_t nv = s->mesh->vertex_count, nt = t->vertex_count;
  float *shape = malloc(sizeof(float) * (3 * (size_t)nv + 1));
  g->rest = malloc(sizeof(double) * (3 * (size_t)nt + 1));
  g->out = malloc(sizeof(double) * (3 * (size_t)nt + 1));
  j->status = DFM_ENOMEM;
  if (!shape || !g->rest || !g->out || srv_state_shape(&j->state, shape) != 0) goto out;
  for (uint32_t v = 0; v < nt; v++)
    for (int k = 0; k < 3; k++) g->rest[3 * (size_t)v + k] = shape[3 * (size_t)t->topo_render[t->topo_offsets[v]] + k];
  /* Handle: the given vertices, or the picked one and what lies within handle_radius of it. */
  if (j->pick >= 0) {
    uint32_t seed = t->render_to_topo[(uint32_t)j->pick];
    if (dfm_geodesic_region(&s->adj, g->rest, &seed, 1, j->handle_radius, 0, &j->h, &j->nh) != 0) goto out;
  } else {
    j->h = to_topo(t, j->handle, j->params.handle_count, &j->nh);
    if (!j->h) goto out;
  }
  if (j->roi) {
    j->troi = to_topo(t, j->roi, j->params.roi_count, &j->nr);
    if (!j->troi) goto out;
  } else if (j->roi_radius > 0) {
    if (dfm_geodesic_region(&s->adj, g->rest, j->h, j->nh, j->roi_radius, 0, &j->troi, &j->nr) != 0) goto out;
  }
  if (j->anchors) {
    j->an = to_topo(t, j->anchors, j->params.anchor_count, &j->na);
    if (!j->an) goto out;
  }
  /* Soft constraints on the welded vertices (every seam copy of a vertex pulls it), at the
   * position given or where the vertex is now. */
  uint32_t ns = j->params.soft_count;
  j->tsoft = malloc(sizeof(uint32_t) * ((size_t)ns + 1));
  j->tsoft_position = malloc(sizeof(double) * 3 * ((size_t)ns + 1));
  if (!j->tsoft || !j->tsoft_position) goto out;
  for (uint32_t i = 0; i < ns; i++) {
    uint32_t v = j->tsoft[i] = t->render_to_topo[j->soft[i]];
    for (int k = 0; k < 3; k++) {
      double at = j->soft_position[3 * (size_t)i + k];
      j->tsoft_position[3 * (size_t)i + k] = isnan(at) ? g->rest[3 * (size_t)v + k] : at;
    }
  }
  if (g->mask && (j->status = hold_masked(j, g, t)) != 0) goto out;
  j->status = 0;
out:
  if (j->status == DFM_ENOMEM && !j->err[0]) snprintf(j->err, sizeof(j->err), "out of memory");
  free(shape);
}

/* The second step, on the pool: the factorised system and the render vertices it moves. */
static void factor_work(uv_work_t *req) {
  begin_job *j = req->data;
  srv_gesture *g = j->g;
  const srv_session *s = g->session;
  const mesh_topology *t = &s->topo;
  uint32_t nv = s->mesh->vertex_count, nt = t->vertex_count;
  uint32_t *h = j->h, nh = j->nh, *roi = j->troi, nr = j->nr;
  for (int k = 0; k < 3; k++) g->pivot[k] = 0;
  for (uint32_t i = 0; i < nh; i++)
    for (int k = 0; k < 3; k++) g->pivot[k] += g->rest[3 * (size_t)h[i] + k] / nh;
  dfm_params p = j->params;
  p.handle = h, p.handle_count = nh;
  p.roi = roi, p.roi_count = roi ? nr : 0;
  p.anchors = j->an, p.anchor_count = j->na;
  p.soft = j->tsoft, p.soft_weight = j->soft_weight, p.soft_position = j->tsoft_position;
  if (!p.proxy && dfm_multires_gesture_bytes(&p, nt) > 0 &&
      dfm_proxy_build(t, &s->adj, g->rest, p.multires_proxy, &j->made_proxy, j->err, sizeof(j->err)) == 0)
    p.proxy = j->made_proxy; /* else dfm_system_create tries again, and says why it cannot */
  j->status = dfm_system_create(t, &s->adj, g->rest, &p, &g->sys, j->err, sizeof(j->err));
  if (j->status) return;
  dfm_system_info(g->sys, &g->info);
  if (g->measure && srv_measure_init(g->measure, &p) != 0) { /* the exact replay's parameters */
    g->measure->lost = 1;
    snprintf(g->measure->result.reason, sizeof(g->measure->result.reason), "out of memory");
  }
  /* The render vertices that can move: those of region topology vertices. */
  uint8_t *in = calloc(nt + 1, 1);
  if (!in) {
    j->status = DFM_ENOMEM;
    snprintf(j->err, sizeof(j->err), "out of memory");
    return;
  }
  if (roi)
    for (uint32_t i = 0; i < nr; i++) in[roi[i]] = 1;
  else
    memset(in, 1, nt);
  for (uint32_t i = 0; i < nh; i++) in[h[i]] = 1;
  uint32_t count = 0;
  for (uint32_t r = 0; r < nv; r++) count += in[t->render_to_topo[r]];
  g->region = malloc(sizeof(uint32_t) * (count + 1));
  g->region_q0 = malloc(sizeof(int32_t) * 3 * ((size_t)count + 1));
  if (!g->region || !g->region_q0) {
    free(in);
    j->status = DFM_ENOMEM;
    snprintf(j->err, sizeof(j->err), "out of memory");
    return;
  }
  for (uint32_t r = 0; r < nv; r++) {
    if (!in[t->render_to_topo[r]]) continue;
    g->region[g->region_count] = r;
    memcpy(g->region_q0 + 3 * (size_t)g->region_count, j->state.offsets + 3 * (size_t)r, sizeof(int32_t) * 3);
    g->region_count++;
  }
  free(in);
  j->status = 0;
}

static void start_solve(srv_server *srv, srv_gesture *g);

/* Bytes of gestures begun by connection `client`, in every session. */
static size_t client_bytes(const srv_server *srv, uint32_t client) {
  size_t sum = 0;
  for (const srv_session *x = srv->sessions; x; x = x->next)
    for (const srv_gesture *g = x->gestures; g; g = g->next)
      if (g->client == client) sum += g->charge + g->measure_charge;
  return sum;
}

/* 1 when `bytes` more (for `what`, of `unknowns`) would take the session's or the client's
 * gestures past their budget, with the figures in err. */
static int over_budget(const srv_server *srv, const srv_gesture *g, size_t bytes, uint64_t unknowns, const char *what,
                       char *err, size_t errlen) {
  const srv_session *s = g->session;
  size_t session_budget = (size_t)srv->cfg.session_memory_mb << 20, client_budget = (size_t)srv->cfg.client_memory_mb << 20;
  size_t held = client_bytes(srv, g->client);
  if (s->gesture_bytes + bytes > session_budget) {
    snprintf(err, errlen,
             "%s needs about %zu MiB (%llu unknowns); session '%s' already holds %zu MiB of gestures and "
             "may hold %u MiB (--session-memory-mb): end a gesture or use a smaller region",
             what, bytes >> 20, (unsigned long long)unknowns, s->name, s->gesture_bytes >> 20, srv->cfg.session_memory_mb);
    return 1;
  }
  if (held + bytes > client_budget) {
    snprintf(err, errlen,
             "%s needs about %zu MiB (%llu unknowns); this client's gestures already hold %zu MiB and may "
             "hold %u MiB (--client-memory-mb): end a gesture or use a smaller region",
             what, bytes >> 20, (unsigned long long)unknowns, held >> 20, srv->cfg.client_memory_mb);
    return 1;
  }
  return 0;
}

/* Charges the gesture's estimated memory to its session, or refuses it (SRV_ELIMIT with the
 * figures in j->err) when the session's or the client's gestures would pass their budget. The
 * estimate: the factorisation's measured ~2.5 KiB per unknown (dfm_memory_gesture_bytes; the
 * region, or the whole mesh without one, is the most the system can have) and the gesture's
 * own arrays (the shape at begin and the solver's output, 48 bytes per topology vertex). */
static int charge(srv_server *srv, srv_gesture *g, begin_job *j) {
  srv_session *s = g->session;
  uint32_t nt = s->topo.vertex_count;
  uint64_t unknowns = j->troi ? (uint64_t)j->nr + j->nh : nt;
  if (unknowns > nt) unknowns = nt;
  dfm_params p = j->params; /* the multiresolution path counts its proxy instead */
  p.roi = j->troi, p.roi_count = j->troi ? j->nr : 0;
  size_t multires = dfm_multires_gesture_bytes(&p, nt);
  size_t bytes = (multires ? multires : dfm_memory_gesture_bytes((uint32_t)unknowns)) + 48 * (size_t)nt;
  if (over_budget(srv, g, bytes, unknowns, "this gesture", j->err, sizeof(j->err))) return SRV_ELIMIT;
  g->charge = bytes;
  s->gesture_bytes += bytes;
  return 0;
}

/* ---- measured against the exact solve ("measure_exact") ------------------------------------- */

static void measure_work(uv_work_t *req) {
  srv_gesture *g = req->data;
  const srv_session *s = g->session;
  srv_measure_run(g->measure, &s->topo, &s->adj, g->rest, g->out, mesh_bbox_diagonal(s->mesh));
}

static void measure_done(uv_work_t *req, int status) {
  srv_gesture *g = req->data;
  srv_session *s = g->session;
  free(req);
  g->srv->pending_jobs--;
  g->job_running = 0;
  g->measure_state = M_DONE;
  s->gesture_bytes -= g->measure_charge;
  give_back(g->srv, g->measure_charge);
  g->measure_charge = 0;
  srv_gesture_ended *r = &g->measure->result;
  if (status == UV_ECANCELED && !r->measured && !r->reason[0]) snprintf(r->reason, sizeof(r->reason), "cancelled");
  if (r->measured)
    srv_log(SRV_LOG_INFO, "session %s: gesture %u against the exact solve over %u drags: max %.3g, RMS %.3g of the diagonal",
            s->name, g->id, r->drags, r->max_over_diag, r->rms_over_diag);
  else
    srv_log(SRV_LOG_INFO, "session %s: gesture %u not measured against the exact solve: %s", s->name, g->id, r->reason);
  srv_session_ref(s);
  maybe_finish(g);
  srv_session_unref(s);
}

/* An ended gesture asked to measure_exact, once its last drag is applied: 1 when the replay
 * started on the pool (the gesture stays until it is done), 0 when there is nothing to replay
 * or nobody to tell, with the reason in the result deform.end answers. */
static int start_measure(srv_gesture *g) {
  srv_gesture_ended *r = &g->measure->result;
  srv_session *s = g->session;
  srv_server *srv = g->srv;
  g->measure_state = M_DONE;
  if (!g->have_end_reply || g->dropped || s->closed || g->state == G_FAILED) return 0;
  if (g->measure->lost) return 0; /* the reason is set */
  if (!g->info.multires) {
    snprintf(r->reason, sizeof(r->reason),
             "the gesture was solved exactly (\"multires\" false, or by size: below %u vertices), so it is its own exact solve",
             DFM_MULTIRES_MIN);
    return 0;
  }
  if (g->measure->count == 0 || !g->out_valid) { /* no drag applied: both are the shape at begin */
    r->measured = 1;
    return 0;
  }
  uint64_t unknowns;
  size_t bytes = srv_measure_bytes(g->measure, s->topo.vertex_count, &unknowns);
  if (over_budget(srv, g, bytes, unknowns, "the exact replay", r->reason, sizeof(r->reason))) return 0;
  uv_work_t *req = malloc(sizeof(*req));
  if (!req) {
    snprintf(r->reason, sizeof(r->reason), "out of memory");
    return 0;
  }
  req->data = g;
  /* The proxy's system has done its work (`out` holds its last shape): its memory goes to the
   * replay. The gesture stays charged for it until it is freed. */
  dfm_system_destroy(g->sys);
  g->sys = NULL;
  if (uv_queue_work(srv->loop, req, measure_work, measure_done) != 0) {
    free(req);
    snprintf(r->reason, sizeof(r->reason), "cannot start the exact replay");
    return 0;
  }
  g->measure_state = M_RUNNING;
  g->measure_charge = bytes;
  s->gesture_bytes += bytes;
  srv->pending_jobs++;
  g->job_running = 1;
  return 1;
}

static void begin_done(uv_work_t *req, int status) {
  begin_job *j = req->data;
  srv_gesture *g = j->g;
  srv_server *srv = j->srv;
  srv->pending_jobs--;
  g->job_running = 0;
  int code = SRV_ESOLVER;
  if (status == UV_ECANCELED && !j->status) {
    j->status = DFM_ESOLVER;
    snprintf(j->err, sizeof(j->err), "cancelled");
  }
  if (!j->status && !j->region_done) {
    /* Between the two steps, on the loop: the memory the factorisation will take, against the
     * session's and the client's budgets; then the factorisation. */
    if (g->session->closed || (g->dropped && !g->has_pending)) {
      /* Nobody is left to drag it: no factorisation. */
      j->status = DFM_ESOLVER;
      snprintf(j->err, sizeof(j->err), "the gesture ended before it was factorised");
    } else if ((code = charge(srv, g, j)) != 0) {
      j->status = DFM_EINVAL;
    } else {
      j->region_done = 1;
      /* What the session has made for its gestures by now (set once, freed with the session,
       * which the gesture references): read on the pool during the factorisation only. */
      j->params.mesh_order = g->session->mesh_order;
      j->params.mesh_symbolic = g->session->mesh_symbolic;
      j->params.proxy = g->session->proxy;
      if (uv_queue_work(srv->loop, &j->req, factor_work, begin_done) == 0) {
        srv->pending_jobs++;
        g->job_running = 1;
        return;
      }
      code = SRV_EINTERNAL;
      j->status = DFM_ESOLVER;
      snprintf(j->err, sizeof(j->err), "cannot start the factorisation");
    }
  }
  if (j->status) {
    g->state = G_FAILED;
    snprintf(g->error, sizeof(g->error), "%s", j->err);
    srv_log(SRV_LOG_INFO, "session %s: gesture %u failed: %s", g->session->name, g->id, j->err);
    srv_reply_error(&g->begin_reply, code, j->err);
    for (uint32_t i = 0; i < g->nwaiting; i++) srv_reply_error(&g->waiting[i], code, j->err);
    g->nwaiting = 0;
    g->has_pending = 0;
    g->ended = 1;
  } else {
    g->state = G_READY;
    srv_log(SRV_LOG_DEBUG, "session %s: gesture %u ready: %u free of %u, factor %.1f ms", g->session->name,
            g->id, g->info.free, g->info.vertices, g->info.factor_ms);
    srv_gesture_begun b = {g->id, j->params.mode, j->params.smooth_border || j->params.mode == DFM_BIHARMONIC,
                           g->region_count, g->info.free, g->info.pinned, g->info.analyze_ms + g->info.factor_ms,
                           {g->pivot[0], g->pivot[1], g->pivot[2]}, g->info.multires, g->info.proxy_vertices,
                           g->info.order_from_mesh, g->info.proxy_reused && !j->made_proxy, g->info.symbolic_from_mesh,
                           g->measure != NULL};
    srv_reply_ok(&g->begin_reply, &(srv_result){.kind = SRV_RESULT_GESTURE_BEGUN, .gesture_begun = &b});
  }
  if (j->made_proxy && !g->session->closed && !g->session->proxy) { /* the next gestures on the path bind to it */
    g->session->proxy = j->made_proxy;
    j->made_proxy = NULL;
  }
  begin_job_free(j);
  srv_session *s = g->session;
  if (g->state == G_READY && g->has_pending && !s->closed) start_solve(srv, g);
  srv_session_ref(s); /* maybe_finish may let go of the gesture's reference */
  maybe_finish(g);
  if (!s->closed && srv->on_edits_settled) srv->on_edits_settled(srv, s); /* a failed begin drops its drags */
  srv_session_unref(s);
}

static uint32_t *copy_u32(const uint32_t *a, uint32_t n) {
  if (!a) return NULL;
  uint32_t *c = malloc(sizeof(uint32_t) * (n + 1));
  if (c) memcpy(c, a, sizeof(uint32_t) * n);
  return c;
}

int srv_gesture_begin(srv_server *srv, srv_session *s, const srv_gesture_spec *spec, uint32_t owner,
                      srv_reply reply, char *err, size_t errlen) {
  uint32_t nv = s->mesh->vertex_count;
  const struct {
    const uint32_t *v;
    uint32_t n;
    const char *what;
  } lists[] = {{spec->handle, spec->handle_count, "handle"}, {spec->roi, spec->roi_count, "region"},
               {spec->anchors, spec->anchor_count, "anchor"}, {spec->soft, spec->soft_count, "soft constraint"}};
  for (size_t l = 0; l < 4; l++)
    for (uint32_t i = 0; i < lists[l].n; i++)
      if (lists[l].v[i] >= nv) {
        snprintf(err, errlen, "%s vertex %u is out of range (the mesh has %u vertices)", lists[l].what, lists[l].v[i], nv);
        return SRV_ERANGE;
      }
  if (spec->pick >= (int64_t)nv) {
    snprintf(err, errlen, "picked vertex %lld is out of range (the mesh has %u vertices)", (long long)spec->pick, nv);
    return SRV_ERANGE;
  }
  if (spec->pick < 0 && spec->handle_count == 0) {
    snprintf(err, errlen, "a gesture needs \"handle\" vertices or a \"pick\" vertex");
    return SRV_EPARAMS;
  }
  if (!(spec->handle_radius >= 0) || !(spec->roi_radius >= 0) || !isfinite(spec->handle_radius) ||
      !isfinite(spec->roi_radius)) {
    snprintf(err, errlen, "radii must be finite and >= 0");
    return SRV_EPARAMS;
  }
  if (spec->iterations < 1 || spec->iterations > 100) {
    snprintf(err, errlen, "iterations must be between 1 and 100");
    return SRV_EPARAMS;
  }
  if (s->gesture_count >= 64) {
    snprintf(err, errlen, "session '%s' already has 64 gestures in progress", s->name);
    return SRV_ELIMIT;
  }
  uint32_t id = spec->id;
  if (id == 0) {
    /* Server-chosen ids count up from 2^31 so they stay clear of ids clients pick. */
    static uint32_t next = 0x80000000u;
    do id = next++, next = next ? next : 0x80000000u; while (id == 0 || find(s, id));
  } else if (find(s, id)) {
    snprintf(err, errlen, "gesture %u is already in progress", id);
    return SRV_EPARAMS;
  }
  srv_gesture *g = calloc(1, sizeof(*g));
  begin_job *j = calloc(1, sizeof(*j));
  if (!g || !j || srv_state_capture(s, &j->state) != 0) {
    free(g);
    free(j);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  g->id = id;
  g->owner = spec->detached ? 0 : owner;
  g->client = owner;
  g->srv = srv;
  g->author = spec->author;
  g->mask = srv_mask_copy(s, spec->author);
  if (spec->measure_exact && !(g->measure = calloc(1, sizeof(*g->measure)))) {
    free(g->mask);
    free(g);
    begin_job_free(j);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  g->step = 0; /* taken when its first drag applies: step ids follow the versions */
  g->session = s;
  g->state = G_FACTORING;
  g->begin_reply = reply;
  g->last_used = uv_now(srv->loop);
  j->srv = srv;
  j->g = g;
  j->params.mode = spec->mode;
  j->params.iterations = spec->iterations;
  j->params.handle_count = spec->handle_count;
  j->params.roi_count = spec->roi_count;
  j->params.anchor_count = spec->anchor_count;
  j->params.soft_count = spec->soft_count;
  j->params.smooth_border = !spec->sharp_border;
  j->params.multires = spec->multires;
  j->params.multires_proxy = spec->proxy_vertices;
  j->handle = copy_u32(spec->handle, spec->handle_count);
  j->roi = copy_u32(spec->roi, spec->roi_count);
  j->anchors = copy_u32(spec->anchors, spec->anchor_count);
  j->soft = copy_u32(spec->soft, spec->soft_count);
  j->soft_weight = malloc(sizeof(double) * ((size_t)spec->soft_count + 1));
  j->soft_position = malloc(sizeof(double) * 3 * ((size_t)spec->soft_count + 1));
  for (uint32_t i = 0; j->soft_weight && j->soft_position && i < spec->soft_count; i++) {
    j->soft_weight[i] = spec->soft_weight[i];
    for (int k = 0; k < 3; k++)
      j->soft_position[3 * (size_t)i + k] = spec->soft_position ? spec->soft_position[3 * (size_t)i + k] : NAN;
  }
  j->pick = spec->pick;
  j->handle_radius = spec->handle_radius;
  j->roi_radius = spec->roi_radius;
  j->req.data = j;
  if ((spec->handle && !j->handle) || (spec->roi && !j->roi) || (spec->anchors && !j->anchors) ||
      (spec->soft && !j->soft) || !j->soft_weight || !j->soft_position ||
      uv_queue_work(srv->loop, &j->req, region_work, begin_done) != 0) {
    begin_job_free(j);
    free(g->mask);
    free(g->measure);
    free(g);
    snprintf(err, errlen, "cannot start the factorisation");
    return SRV_EINTERNAL;
  }
  srv->pending_jobs++;
  g->job_running = 1;
  g->next = s->gestures;
  s->gestures = g;
  s->gesture_count++;
  srv_session_ref(s); /* the gesture keeps its session (and mesh) alive */
  return 0;
}

/* ---- solve ----------------------------------------------------------------------------------- */

typedef struct solve_job {
  uv_work_t req;
  srv_server *srv;
  srv_gesture *g;
  dfm_xform xf;
  float quantum;
  int32_t *q;       /* 3 per region vertex: the new quantised offsets */
  int status;
  char err[256];
  srv_reply *answer; /* the drags this solve answers */
  uint32_t nanswer;
} solve_job;

static void solve_work(uv_work_t *req) {
  solve_job *j = req->data;
  srv_gesture *g = j->g;
  const srv_session *s = g->session;
  const mesh_topology *t = &s->topo;
  double *out = g->out; /* one solve at a time per gesture */
  j->q = malloc(sizeof(int32_t) * 3 * ((size_t)g->region_count + 1));
  if (!j->q) {
    j->status = DFM_ENOMEM;
    snprintf(j->err, sizeof(j->err), "out of memory");
    return;
  }
  j->status = dfm_system_solve(g->sys, &j->xf, out, j->err, sizeof(j->err));
  if (j->status == 0) {
    for (uint32_t i = 0; i < g->region_count; i++) {
      uint32_t r = g->region[i], v = t->render_to_topo[r];
      float held = g->mask ? g->mask[v] : 0.0f;
      if (held >= 1.0f) { /* masked: exactly as it was at begin */
        memcpy(j->q + 3 * (size_t)i, g->region_q0 + 3 * (size_t)i, sizeof(int32_t) * 3);
        continue;
      }
      for (int k = 0; k < 3; k++) {
        double d = (out[3 * (size_t)v + k] - g->rest[3 * (size_t)v + k]) * (1.0 - (double)held);
        float off = proto_dequantize(g->region_q0[3 * (size_t)i + k], j->quantum) + (float)d;
        j->q[3 * (size_t)i + k] = proto_quantize(off, j->quantum);
      }
    }
  }
}

static void solve_done(uv_work_t *req, int status) {
  solve_job *j = req->data;
  srv_gesture *g = j->g;
  srv_server *srv = j->srv;
  srv_session *s = g->session;
  srv->pending_jobs--;
  g->job_running = 0;
  g->state = G_READY;
  if (status == UV_ECANCELED && !j->status) {
    j->status = DFM_ESOLVER;
    snprintf(j->err, sizeof(j->err), "cancelled");
  }
  uint64_t version = s->version;
  if (j->status == 0 && !s->closed) {
    /* Only the vertices whose offset changes make the DELTA. */
    uint32_t *idx = malloc(sizeof(uint32_t) * (g->region_count + 1));
    int32_t *q = malloc(sizeof(int32_t) * 3 * ((size_t)g->region_count + 1));
    uint32_t k = 0;
    if (idx && q) {
      for (uint32_t i = 0; i < g->region_count; i++) {
        uint32_t r = g->region[i];
        if (memcmp(s->offsets + 3 * (size_t)r, j->q + 3 * (size_t)i, sizeof(int32_t) * 3) == 0) continue;
        idx[k] = r;
        memcpy(q + 3 * (size_t)k, j->q + 3 * (size_t)i, sizeof(int32_t) * 3);
        k++;
      }
      if (k) {
        if (!g->step && s->history) g->step = srv_history_new_step_id(s);
        srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = g->author, .cause = SRV_CAUSE_GESTURE, .step = g->step,
                     .count = k, .indices = idx, .q = q};
        version = srv_session_apply(srv, s, &op);
      }
      g->out_valid = 1;
      if (g->measure) srv_measure_record(g->measure, &j->xf);
    } else {
      j->status = DFM_ENOMEM;
      snprintf(j->err, sizeof(j->err), "out of memory");
    }
    free(idx);
    free(q);
  }
  for (uint32_t i = 0; i < j->nanswer; i++) {
    if (j->status == 0 && s->closed) {
      char why[256];
      snprintf(why, sizeof(why), "session '%s' was closed before the drag was applied", s->name);
      srv_reply_error(&j->answer[i], SRV_ENOSESSION, why);
    } else if (j->status) srv_reply_error(&j->answer[i], SRV_ESOLVER, j->err);
    else srv_reply_ok(&j->answer[i], &(srv_result){.kind = SRV_RESULT_VERSION, .version = version});
  }
  if (j->status) srv_log(SRV_LOG_INFO, "session %s: gesture %u drag failed: %s", s->name, g->id, j->err);
  if (j->status && g->measure && !g->measure->lost) { /* the system may have moved on: no faithful replay */
    g->measure->lost = 1;
    snprintf(g->measure->result.reason, sizeof(g->measure->result.reason),
             "drag %u failed, so a replay would not be the gesture's: %.160s", g->measure->count + 1, j->err);
  }
  free(j->answer);
  free(j->q);
  free(j);
  if (g->has_pending && !s->closed) start_solve(srv, g);
  srv_session_ref(s); /* maybe_finish may let go of the gesture's reference */
  maybe_finish(g);
  if (!s->closed && srv->on_edits_settled) srv->on_edits_settled(srv, s);
  srv_session_unref(s);
}

int srv_gesture_busy(const srv_session *s, uint32_t author) {
  for (const srv_gesture *g = s->gestures; g; g = g->next)
    if (g->author == author && (g->state == G_SOLVING || g->has_pending)) return 1;
  return 0;
}

static void start_solve(srv_server *srv, srv_gesture *g) {
  solve_job *j = calloc(1, sizeof(*j));
  if (!j) return; /* the drag stays pending; the next drag or end retries */
  j->srv = srv;
  j->g = g;
  j->xf = g->pending;
  if (!g->pivot_given) memcpy(j->xf.pivot, g->pivot, sizeof(g->pivot));
  j->quantum = g->session->offset_quantum;
  j->answer = g->waiting;
  j->nanswer = g->nwaiting;
  j->req.data = j;
  if (uv_queue_work(srv->loop, &j->req, solve_work, solve_done) != 0) {
    free(j);
    return;
  }
  srv->pending_jobs++;
  g->waiting = NULL;
  g->nwaiting = g->capwaiting = 0;
  g->has_pending = 0;
  g->job_running = 1;
  g->state = G_SOLVING;
}

int srv_gesture_drag(srv_server *srv, srv_session *s, uint32_t id, const dfm_xform *xf, int pivot_given,
                     srv_reply reply, char *err, size_t errlen) {
  srv_gesture *g = find(s, id);
  if (!g) {
    snprintf(err, errlen, "no gesture %u in progress in session '%s'", id, s->name);
    return SRV_ENOGESTURE;
  }
  for (int k = 0; k < 4; k++)
    if (!isfinite(xf->rotation[k])) goto nonfinite;
  for (int k = 0; k < 3; k++)
    if (!isfinite(xf->translate[k]) || !isfinite(xf->pivot[k])) goto nonfinite;
  /* The same rule on both ports: a rotation is a non-zero quaternion (normalised by the solver). */
  if (!(xf->rotation[0] * xf->rotation[0] + xf->rotation[1] * xf->rotation[1] + xf->rotation[2] * xf->rotation[2] +
            xf->rotation[3] * xf->rotation[3] > 1e-24)) {
    snprintf(err, errlen, "\"rotate\" must be a non-zero quaternion [x, y, z, w]");
    return SRV_EPARAMS;
  }
  if (g->nwaiting == g->capwaiting) {
    uint32_t cap = g->capwaiting ? 2 * g->capwaiting : 4;
    srv_reply *w = realloc(g->waiting, sizeof(*w) * cap);
    if (!w) {
      snprintf(err, errlen, "out of memory");
      return SRV_EINTERNAL;
    }
    g->waiting = w;
    g->capwaiting = cap;
  }
  /* The newest drag wins: earlier pending ones are answered by the solve that uses this one. */
  g->pending = *xf;
  g->pivot_given = pivot_given;
  g->has_pending = 1;
  g->waiting[g->nwaiting++] = reply;
  g->last_used = uv_now(srv->loop);
  if (g->state == G_READY && !g->job_running) start_solve(srv, g);
  return 0;
nonfinite:
  snprintf(err, errlen, "the drag transform has a non-finite value");
  return SRV_ENOTFINITE;
}

int srv_gesture_end(srv_server *srv, srv_session *s, uint32_t id, srv_reply reply, char *err, size_t errlen) {
  (void)srv;
  srv_gesture *g = find(s, id);
  if (!g) {
    snprintf(err, errlen, "no gesture %u in progress in session '%s'", id, s->name);
    return SRV_ENOGESTURE;
  }
  g->ended = 1;
  g->end_reply = reply;
  g->have_end_reply = 1;
  maybe_finish(g);
  return 0;
}

void srv_gesture_drop_owner(srv_server *srv, srv_session *s, uint32_t owner) {
  (void)srv;
  for (srv_gesture *g = s->gestures, *next; g; g = next) {
    next = g->next;
    if (owner != 0 && g->owner == owner && g->measure) atomic_store(&g->measure->stop, 1); /* nobody to tell */
    if (owner == 0 || g->owner != owner || g->ended) continue;
    g->ended = 1;
    g->dropped = 1;
    maybe_finish(g);
  }
}

void srv_gesture_expire(srv_server *srv, srv_session *s, uint64_t idle_ms) {
  uint64_t now = uv_now(srv->loop);
  for (srv_gesture *g = s->gestures, *next; g; g = next) {
    next = g->next;
    if (g->ended || g->job_running || now - g->last_used < idle_ms) continue;
    srv_log(SRV_LOG_INFO, "session %s: gesture %u ended after %llu ms without a drag", s->name, g->id,
            (unsigned long long)(now - g->last_used));
    g->ended = 1;
    maybe_finish(g);
  }
}

void srv_gesture_close_all(srv_session *s) {
  for (srv_gesture *g = s->gestures, *next; g; g = next) {
    next = g->next;
    g->ended = 1;
    g->has_pending = 0;
    if (g->measure) atomic_store(&g->measure->stop, 1);
    maybe_finish(g);
  }
}
