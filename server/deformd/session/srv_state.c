/*
 * srv_state.c — copies of a session's state for jobs on the thread pool: the weights and sculpt
 * offsets copied on the loop thread, the targets copied shallowly (their arrays never change or
 * move), and the shape they give, base + Σ w·Δ + offsets, evaluated on any thread — or, for a
 * file that keeps the targets (GLB), base + offsets with the weights as the targets' defaults.
 *
 * The copies are why a pool job never reads a session the loop may be changing (invariant 10 of
 * docs/architecture.md).
 *
 * DOES NOT keep a copy alive past its job (the job releases it) or touch the session later.
 */
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "mesh.h"
#include "srv_state.h"
#include "srv_session.h"

int srv_state_capture(const srv_session *s, srv_state *st) {
  memset(st, 0, sizeof(*st));
  const mesh *m = s->mesh;
  st->view = *m;
  st->targets = malloc(sizeof(mesh_target) * (m->target_count + 1));
  st->weights = malloc(sizeof(float) * (m->target_count + 1));
  st->offsets = malloc(sizeof(int32_t) * (3 * (size_t)m->vertex_count + 1));
  if (!st->targets || !st->weights || !st->offsets) {
    srv_state_release(st);
    return MESH_ENOMEM;
  }
  if (m->target_count) { /* (memcpy from a NULL array is undefined even for 0 bytes) */
    memcpy(st->targets, m->targets, sizeof(mesh_target) * m->target_count);
    memcpy(st->weights, s->weights, sizeof(float) * m->target_count);
  }
  memcpy(st->offsets, s->offsets, sizeof(int32_t) * 3 * (size_t)m->vertex_count);
  st->view.targets = st->targets;
  st->quantum = s->offset_quantum;
  return 0;
}

void srv_state_release(srv_state *st) {
  free(st->targets);
  free(st->weights);
  free(st->offsets);
  memset(st, 0, sizeof(*st));
}

int srv_state_shape(const srv_state *st, float *out) {
  size_t n = 3 * (size_t)st->view.vertex_count;
  float *off = malloc(sizeof(float) * (n + 1));
  if (!off) return MESH_ENOMEM;
  for (size_t i = 0; i < n; i++) off[i] = proto_dequantize(st->offsets[i], st->quantum);
  mesh_evaluate(&st->view, st->weights, off, out);
  free(off);
  return 0;
}

int srv_state_base_sculpt(const srv_state *st, float *out) {
  size_t n = 3 * (size_t)st->view.vertex_count;
  for (size_t i = 0; i < n; i++) out[i] = st->view.positions[i] + proto_dequantize(st->offsets[i], st->quantum);
  return 0;
}

void srv_state_weights_as_defaults(srv_state *st) {
  for (uint32_t t = 0; t < st->view.target_count; t++) st->targets[t].default_weight = st->weights[t];
}

