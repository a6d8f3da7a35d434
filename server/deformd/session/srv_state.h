/*
 * srv_state.h — a copy of a session's state that a thread-pool job can evaluate while the loop goes on.
 */
#ifndef DEFORMD_SRV_STATE_H
#define DEFORMD_SRV_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"
#include "srv_session.h"

/* A copy of a session's state that a thread-pool job can evaluate while the loop goes on:
 * weights and offsets copied, targets copied shallowly (their arrays never change or move). */
typedef struct srv_state {
  mesh view;          /* the session's mesh with `targets` pointing at the copy below */
  mesh_target *targets;
  float *weights;
  int32_t *offsets;
  float quantum;
} srv_state;

/* srv_state.c: captures on the loop thread (two memcpy and a small copy). Returns 0 or
 * MESH_ENOMEM. */
int srv_state_capture(const srv_session *s, srv_state *st);
void srv_state_release(srv_state *st);
/* base + Σ w·Δ + offsets per render vertex (3 × vertices floats), on any thread. */
int srv_state_shape(const srv_state *st, float *out);
/* base + offsets only (3 × vertices floats), for a file that carries the targets and the weights
 * beside it; and the copy's targets' default weights made the current weights (the copy's own
 * target array: the session's are untouched). */
int srv_state_base_sculpt(const srv_state *st, float *out);
void srv_state_weights_as_defaults(srv_state *st);

#endif
