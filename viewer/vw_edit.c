/*
 * vw_edit.c — picking and the viewer's undo/redo (see vw_edit.h).
 */
#include "vw_edit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void sub3(const float *a, const float *b, float *o) { o[0] = a[0] - b[0], o[1] = a[1] - b[1], o[2] = a[2] - b[2]; }
static void cross3(const float *a, const float *b, float *o) {
  o[0] = a[1] * b[2] - a[2] * b[1], o[1] = a[2] * b[0] - a[0] * b[2], o[2] = a[0] * b[1] - a[1] * b[0];
}
static float dot3(const float *a, const float *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

int vw_edit_pick(const float *positions, const uint32_t *triangles, uint32_t triangle_count, const float origin[3],
            const float dir[3], float hit[3], uint32_t *vertex) {
  float best = INFINITY;
  uint32_t best_f = 0;
  for (uint32_t f = 0; f < triangle_count; f++) {
    const float *v0 = positions + 3 * (size_t)triangles[3 * f], *v1 = positions + 3 * (size_t)triangles[3 * f + 1],
                *v2 = positions + 3 * (size_t)triangles[3 * f + 2];
    float e1[3], e2[3], s[3], h[3], q[3];
    sub3(v1, v0, e1);
    sub3(v2, v0, e2);
    sub3(origin, v0, s);
    cross3(dir, e2, h);
    float det = dot3(e1, h);
    if (fabsf(det) < 1e-30f) continue;
    float inv = 1.0f / det, u = inv * dot3(s, h);
    if (u < 0 || u > 1) continue;
    cross3(s, e1, q);
    float v = inv * dot3(dir, q);
    if (v < 0 || u + v > 1) continue;
    float t = inv * dot3(e2, q);
    if (t > 0 && t < best) best = t, best_f = f;
  }
  if (!isfinite(best)) return 0;
  for (int k = 0; k < 3; k++) hit[k] = origin[k] + best * dir[k];
  float bd = INFINITY;
  for (int c = 0; c < 3; c++) {
    uint32_t v = triangles[3 * best_f + c];
    float d[3];
    sub3(hit, positions + 3 * (size_t)v, d);
    float dd = dot3(d, d);
    if (dd < bd) bd = dd, *vertex = v;
  }
  return 1;
}

/* ---- undo --------------------------------------------------------------------------------------- */

static void state_free(vw_edit_undo_state *s) {
  free(s->weights);
  free(s->offsets);
  memset(s, 0, sizeof(*s));
}

static int state_take(const vw_net *n, vw_edit_undo_state *s) {
  const client_replica *r = &n->replica;
  s->target_count = r->mesh->target_count;
  s->vertex_count = r->mesh->vertex_count;
  s->weights = malloc(sizeof(float) * (s->target_count + 1));
  s->offsets = malloc(sizeof(float) * 3 * ((size_t)s->vertex_count + 1));
  if (!s->weights || !s->offsets) {
    state_free(s);
    return -1;
  }
  if (s->target_count) memcpy(s->weights, r->weights, sizeof(float) * s->target_count);
  memcpy(s->offsets, r->offsets, sizeof(float) * 3 * s->vertex_count);
  return 0;
}

static void push(vw_edit_undo_state *stack, int *n, vw_edit_undo_state *s) {
  if (*n == VW_EDIT_UNDO_DEPTH) {
    state_free(&stack[0]);
    memmove(stack, stack + 1, sizeof(*stack) * (VW_EDIT_UNDO_DEPTH - 1));
    (*n)--;
  }
  stack[(*n)++] = *s;
}

void vw_edit_undo_fini(vw_edit_undo *u) {
  for (int i = 0; i < u->nundo; i++) state_free(&u->undo[i]);
  for (int i = 0; i < u->nredo; i++) state_free(&u->redo[i]);
  u->nundo = u->nredo = 0;
}

void vw_edit_undo_remember(vw_edit_undo *u, vw_net *n) {
  if (!vw_net_can_edit(n) || !n->replica.have_snapshot) return;
  vw_edit_undo_state s;
  if (state_take(n, &s) != 0) return;
  push(u->undo, &u->nundo, &s);
  while (u->nredo) state_free(&u->redo[--u->nredo]);
}

/* Sends the edits that bring the replica back to `s` (as far as its targets and vertices still
 * match: a new snapshot of another mesh leaves the offsets alone). */
static void restore(vw_net *n, const vw_edit_undo_state *s) {
  const client_replica *r = &n->replica;
  uint32_t nt = s->target_count < r->mesh->target_count ? s->target_count : r->mesh->target_count;
  uint32_t nv = s->vertex_count == r->mesh->vertex_count ? s->vertex_count : 0;
  uint32_t *idx = malloc(sizeof(uint32_t) * ((nt > nv ? nt : nv) + 1));
  float *val = malloc(sizeof(float) * (nt + 1));
  int32_t *q = malloc(sizeof(int32_t) * 3 * ((size_t)nv + 1));
  if (idx && val && q) {
    uint32_t k = 0;
    for (uint32_t t = 0; t < nt; t++)
      if (r->weights[t] != s->weights[t] && !r->meta[t].driver_count) idx[k] = t, val[k++] = s->weights[t];
    if (k) vw_net_set_weights(n, k, idx, val);
    k = 0;
    for (uint32_t v = 0; v < nv; v++) {
      const float *now = r->offsets + 3 * (size_t)v, *then = s->offsets + 3 * (size_t)v;
      if (now[0] == then[0] && now[1] == then[1] && now[2] == then[2]) continue;
      idx[k] = v;
      for (int c = 0; c < 3; c++) q[3 * (size_t)k + c] = proto_quantize(then[c], r->quantum);
      k++;
    }
    if (k) vw_net_set_offsets(n, k, idx, q);
  }
  free(idx);
  free(val);
  free(q);
}

int vw_edit_undo_step(vw_edit_undo *u, vw_net *n, int redo) {
  vw_edit_undo_state *from = redo ? u->redo : u->undo, *to = redo ? u->undo : u->redo;
  int *nfrom = redo ? &u->nredo : &u->nundo, *nto = redo ? &u->nundo : &u->nredo;
  if (*nfrom == 0 || !vw_net_can_edit(n) || !n->replica.have_snapshot) return 0;
  vw_edit_undo_state now;
  if (state_take(n, &now) != 0) return 0;
  vw_edit_undo_state s = from[--(*nfrom)];
  restore(n, &s);
  state_free(&s);
  push(to, nto, &now);
  return 1;
}
