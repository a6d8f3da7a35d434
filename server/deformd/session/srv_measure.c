/*
 * srv_measure.c — a multiresolution gesture's drags replayed through the exact solve (see
 * srv_measure.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "mesh.h"
#include "dfm.h"
#include "srv_measure.h"

static uint32_t *copy_list(const uint32_t *a, uint32_t n, int *fail) {
  if (!a) return NULL;
  uint32_t *c = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  if (!c) *fail = 1;
  else memcpy(c, a, sizeof(uint32_t) * n);
  return c;
}

int srv_measure_init(srv_measure *m, const dfm_params *gesture) {
  int fail = 0;
  m->params = *gesture;
  m->params.multires = DFM_MULTIRES_OFF;
  m->params.proxy = NULL;
  m->params.soft = NULL, m->params.soft_weight = NULL, m->params.soft_position = NULL, m->params.soft_count = 0;
  m->handle = copy_list(gesture->handle, gesture->handle_count, &fail);
  m->roi = copy_list(gesture->roi, gesture->roi_count, &fail);
  m->anchors = copy_list(gesture->anchors, gesture->anchor_count, &fail);
  m->params.handle = m->handle, m->params.roi = m->roi, m->params.anchors = m->anchors;
  if (!gesture->roi) m->params.roi_count = 0;
  if (!gesture->anchors) m->params.anchor_count = 0;
  return fail ? DFM_ENOMEM : 0;
}

void srv_measure_fini(srv_measure *m) {
  free(m->handle);
  free(m->roi);
  free(m->anchors);
  free(m->drags);
  m->handle = m->roi = m->anchors = NULL;
  m->drags = NULL;
  m->count = m->cap = 0;
}

void srv_measure_record(srv_measure *m, const dfm_xform *xf) {
  if (m->lost) return;
  if (m->count == m->cap) {
    uint32_t cap = m->cap ? 2 * m->cap : 64;
    if (cap > SRV_MEASURE_MAX_DRAGS) cap = SRV_MEASURE_MAX_DRAGS;
    dfm_xform *d = m->count < cap ? realloc(m->drags, sizeof(*d) * cap) : NULL;
    if (!d) {
      m->lost = 1;
      if (m->count < cap) snprintf(m->result.reason, sizeof(m->result.reason), "out of memory recording its drags");
      else snprintf(m->result.reason, sizeof(m->result.reason), "it solved more than %u drags, the most a replay records", SRV_MEASURE_MAX_DRAGS);
      return;
    }
    m->drags = d;
    m->cap = cap;
  }
  m->drags[m->count++] = *xf;
}

size_t srv_measure_bytes(const srv_measure *m, uint32_t vertices, uint64_t *unknowns) {
  uint64_t u = m->params.roi ? (uint64_t)m->params.roi_count + m->params.handle_count : vertices;
  if (u > vertices) u = vertices;
  *unknowns = u;
  return dfm_memory_gesture_bytes((uint32_t)u) + 24 * (size_t)vertices;
}

void srv_measure_run(srv_measure *m, const mesh_topology *t, const mesh_adjacency *adj, const double *rest,
                     const double *solved, double diag) {
  srv_gesture_ended *r = &m->result;
  uint32_t n = t->vertex_count;
  char err[256] = "";
  dfm_system *sys = NULL;
  double *out = malloc(sizeof(double) * (3 * (size_t)n + 1));
  int rc = out ? dfm_system_create(t, adj, rest, &m->params, &sys, err, sizeof(err)) : DFM_ENOMEM;
  if (rc) {
    snprintf(r->reason, sizeof(r->reason), "the exact solve could not be factorised: %.200s", err[0] ? err : "out of memory");
    free(out);
    return;
  }
  dfm_info info;
  dfm_system_info(sys, &info);
  r->exact_prefactor_ms = info.analyze_ms + info.factor_ms;
  uint64_t t1 = uv_hrtime();
  uint32_t d = 0;
  for (; d < m->count && !atomic_load(&m->stop); d++)
    if ((rc = dfm_system_solve(sys, &m->drags[d], out, err, sizeof(err))) != 0) break;
  r->exact_replay_ms = (double)(uv_hrtime() - t1) / 1e6;
  if (rc) snprintf(r->reason, sizeof(r->reason), "the exact solve of drag %u failed: %.200s", d + 1, err);
  else if (d < m->count) snprintf(r->reason, sizeof(r->reason), "stopped after %u of %u drags: the gesture's session or connection went away", d, m->count);
  else {
    if (!(diag > 0)) diag = 1;
    dfm_distance(solved, out, n, diag, &r->max_over_diag, &r->rms_over_diag);
    r->max_distance = r->max_over_diag * diag;
    r->drags = m->count;
    r->measured = 1;
  }
  dfm_system_destroy(sys);
  free(out);
}
