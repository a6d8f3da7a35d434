/*
 * vw_edit.h — the sculpting UI's logic that does not need a window: picking a vertex with a
 * ray, and the viewer's own undo/redo.
 *
 * Picking: the nearest triangle a ray hits (Möller–Trumbore on the current morphed positions)
 * and the corner vertex nearest to the hit point.
 *
 * Undo: before an edit the viewer keeps the replica's weights and sculpt offsets; undoing sends
 * the edits that restore them (weights of targets that are not combination targets, offsets of
 * the vertices that differ, quantised exactly as the server stores them), and keeps the state it
 * leaves, for redo. The server has no undo: two editors undo each other's edits too.
 *
 * DOES NOT touch GL or read input.
 */
#ifndef DEFORMD_VW_EDIT_H
#define DEFORMD_VW_EDIT_H

#include <stdint.h>

#include "vw_net.h"

/* Returns 1 with the hit point and its nearest corner vertex, 0 when the ray hits nothing.
 * `positions` has 3 floats per vertex; `dir` need not be normalised. */
int vw_edit_pick(const float *positions, const uint32_t *triangles, uint32_t triangle_count, const float origin[3],
            const float dir[3], float hit[3], uint32_t *vertex);

#define VW_EDIT_UNDO_DEPTH 32

typedef struct vw_edit_undo_state {
  uint32_t target_count, vertex_count;
  float *weights;
  float *offsets;
} vw_edit_undo_state;

typedef struct vw_edit_undo {
  vw_edit_undo_state undo[VW_EDIT_UNDO_DEPTH], redo[VW_EDIT_UNDO_DEPTH];
  int nundo, nredo;
} vw_edit_undo;

void vw_edit_undo_fini(vw_edit_undo *u);
/* Before an edit: keeps the replica's state (the oldest is dropped past VW_EDIT_UNDO_DEPTH) and
 * forgets what could be redone. Nothing when the connection cannot edit. */
void vw_edit_undo_remember(vw_edit_undo *u, vw_net *n);
/* Sends the edits back to the last remembered state (undo) or forward again (redo). Returns 1
 * when something was sent, 0 when there was nothing to undo/redo or the connection cannot edit. */
int vw_edit_undo_step(vw_edit_undo *u, vw_net *n, int redo);

#endif
