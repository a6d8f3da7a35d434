/*
 * srv_bulk.c — BULK GET and SET (docs/protocol.md §15). A GET copies the state on the loop
 * (srv_state_capture: two memcpy) and evaluates on the thread pool, as exports do, so a large
 * mesh never holds the loop; the welded numbering is the session's topology (mesh_topology:
 * each welded vertex answers its representative render vertex, the first of its cluster). A SET
 * quantises the floats as sculpt.set does and applies one SET_OFFSETS operation, undoable by its
 * author.
 *
 * DOES NOT decode frames or decide who may ask (ports/srv_stream.c does).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "srv_bulk.h"
#include "srv_error.h"
#include "srv_op.h"
#include "srv_state.h"

/* The vertices a request counts: welded (topology) or render ones. */
static uint32_t numbering(const srv_session *s, uint8_t flags) {
  return (flags & PROTO_BULK_WELDED) ? s->topo.vertex_count : s->mesh->vertex_count;
}

static const char *numbering_name(uint8_t flags) { return (flags & PROTO_BULK_WELDED) ? "welded" : "render"; }

/* The render vertex that answers for vertex i of the request's numbering. */
static uint32_t render_vertex(const srv_session *s, uint8_t flags, uint32_t i) {
  return (flags & PROTO_BULK_WELDED) ? s->topo.topo_render[s->topo.topo_offsets[i]] : i;
}

/* first + count within total (count resolved for PROTO_BULK_TO_END). */
static int check_range(const srv_session *s, const proto_bulk_request *r, uint32_t *count, char *err, size_t errlen) {
  uint32_t total = numbering(s, r->flags);
  uint32_t n = r->count == PROTO_BULK_TO_END && r->first <= total ? total - r->first : r->count;
  if (r->first > total || n > total - r->first) {
    snprintf(err, errlen, "vertices %u to %llu are out of range (the mesh has %u %s vertices)", r->first,
             (unsigned long long)r->first + n - (n ? 1 : 0), total, numbering_name(r->flags));
    return SRV_ERANGE;
  }
  *count = n;
  return 0;
}

typedef struct bulk_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session; /* referenced: its topology and targets stay while the job runs */
  srv_state state;
  proto_bulk_answer a;
  uint64_t version;
  float *values;
  int status;
  srv_bulk_cb done;
  void *arg;
} bulk_job;

static void bulk_work(uv_work_t *req) {
  bulk_job *j = req->data;
  const srv_session *s = j->session;
  size_t nv = 3 * (size_t)j->state.view.vertex_count;
  float *all = malloc(sizeof(float) * (nv + 1));
  j->values = malloc(sizeof(float) * (3 * (size_t)j->a.count + 1));
  if (!all || !j->values) {
    j->status = SRV_EINTERNAL;
    free(all);
    return;
  }
  if (j->a.what == PROTO_BULK_POSITIONS) {
    if (srv_state_shape(&j->state, all) != 0) j->status = SRV_EINTERNAL;
  } else if (j->a.what == PROTO_BULK_SCULPT) {
    for (size_t i = 0; i < nv; i++) all[i] = proto_dequantize(j->state.offsets[i], j->state.quantum);
  } else {
    const mesh_target *t = &j->state.targets[j->a.target];
    memset(all, 0, sizeof(float) * nv);
    for (uint32_t k = 0; k < t->count; k++) memcpy(all + 3 * (size_t)t->indices[k], t->deltas + 3 * (size_t)k, 12);
  }
  for (uint32_t i = 0; i < j->a.count && !j->status; i++)
    memcpy(j->values + 3 * (size_t)i, all + 3 * (size_t)render_vertex(s, j->a.flags, j->a.first + i), 12);
  free(all);
}

static void bulk_done(uv_work_t *req, int status) {
  bulk_job *j = req->data;
  j->srv->pending_jobs--;
  if (status == UV_ECANCELED) j->status = SRV_ESHUTDOWN;
  j->done(j->srv, j->arg, j->status, &j->a, j->status ? NULL : j->values, j->version,
          j->status == SRV_ESHUTDOWN ? "the server is shutting down" : j->status ? "out of memory" : NULL);
  free(j->values);
  srv_state_release(&j->state);
  srv_session_unref(j->session);
  free(j);
}

int srv_bulk_get(srv_server *srv, srv_session *s, const proto_bulk_request *r, srv_bulk_cb done, void *arg,
                 char *err, size_t errlen) {
  uint32_t count;
  int rc = check_range(s, r, &count, err, errlen);
  if (rc) return rc;
  if (r->what == PROTO_BULK_TARGET && r->target >= s->mesh->target_count) {
    snprintf(err, errlen, "no target %u: the session has %u", r->target, s->mesh->target_count);
    return SRV_ERANGE;
  }
  uint64_t bytes = PROTO_BULK_ANSWER_SIZE + 12u * (uint64_t)count;
  uint32_t max_frame = srv->limits.max_frame ? srv->limits.max_frame : PROTO_DEFAULT_MAX_FRAME;
  if (bytes > max_frame) {
    snprintf(err, errlen, "the answer would have %llu bytes, more than a frame may (%u): ask for a range",
             (unsigned long long)bytes, max_frame);
    return SRV_ELIMIT;
  }
  bulk_job *j = calloc(1, sizeof(*j));
  if (!j || srv_state_capture(s, &j->state) != 0) {
    free(j);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  j->a = (proto_bulk_answer){r->request_id, PROTO_BULK_GET, r->what, r->flags, r->target, r->first, count,
                             numbering(s, r->flags), NULL};
  j->version = s->version;
  j->srv = srv;
  j->session = s;
  j->done = done;
  j->arg = arg;
  j->req.data = j;
  srv_session_ref(s);
  if (uv_queue_work(srv->loop, &j->req, bulk_work, bulk_done) != 0) {
    srv_session_unref(s);
    srv_state_release(&j->state);
    free(j);
    snprintf(err, errlen, "the job could not be started");
    return SRV_EINTERNAL;
  }
  srv->pending_jobs++;
  return 0;
}

/* The request's floats checked and quantised into q (3 per vertex of the request), in the order
 * of the checks: not finite, then beyond the largest offset. */
static int quantise(const srv_session *s, const proto_bulk_request *r, int32_t *q, char *err, size_t errlen) {
  double limit = (double)((1 << 30) - 1) * s->offset_quantum;
  for (uint32_t i = 0; i < r->count; i++)
    for (int c = 0; c < 3; c++) {
      float f = proto_load_f32(r->values + 12 * (size_t)i + 4 * (size_t)c);
      if (!isfinite(f)) {
        snprintf(err, errlen, "the offset of %s vertex %u is not finite", numbering_name(r->flags), r->first + i);
        return SRV_ENOTFINITE;
      }
      if (fabs((double)f) > limit) {
        snprintf(err, errlen, "offset %g of %s vertex %u is beyond the largest allowed (±%g)", (double)f,
                 numbering_name(r->flags), r->first + i, limit);
        return SRV_ERANGE;
      }
      q[3 * (size_t)i + (size_t)c] = proto_quantize(f, s->offset_quantum);
    }
  return 0;
}

int srv_bulk_set(srv_server *srv, srv_session *s, const proto_bulk_request *r, uint32_t author, uint64_t *version,
                 char *err, size_t errlen) {
  uint32_t count, n = 0, nv = s->mesh->vertex_count;
  int welded = (r->flags & PROTO_BULK_WELDED) != 0;
  int rc = check_range(s, r, &count, err, errlen);
  if (rc) return rc;
  int32_t *given = malloc(sizeof(int32_t) * 3 * ((size_t)count + 1));
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)(welded ? nv : count) + 1));
  int32_t *q = malloc(sizeof(int32_t) * 3 * ((size_t)(welded ? nv : count) + 1));
  if (!given || !idx || !q) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
    goto out;
  }
  if ((rc = quantise(s, r, given, err, errlen)) != 0) goto out;
  /* Ascending render vertices, as SET_OFFSETS wants: welded, every render vertex whose welded
   * vertex is in the range (all copies of a seam vertex), in render order. */
  for (uint32_t v = 0; v < (welded ? nv : count); v++) {
    uint32_t i = welded ? s->topo.render_to_topo[v] - r->first : v;
    if (welded && (s->topo.render_to_topo[v] < r->first || i >= count)) continue;
    idx[n] = welded ? v : r->first + v;
    memcpy(q + 3 * (size_t)n, given + 3 * (size_t)i, 3 * sizeof(int32_t));
    n++;
  }
  srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = author, .cause = SRV_CAUSE_SCULPT_SET, .count = n, .indices = idx,
               .q = q};
  if (srv_session_check(s, &op, err, errlen) != 0) {
    rc = SRV_ERANGE;
    goto out;
  }
  *version = n ? srv_session_apply(srv, s, &op) : s->version;
  if (*version == 0 && n) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
  }
out:
  free(given);
  free(idx);
  free(q);
  return rc;
}
