/*
 * vw_edit.h — the sculpting UI's logic that does not need a window: picking a vertex with a
 * ray. (Undo and redo are the server's per-author history: vw_net_history.)
 *
 * Picking: the nearest triangle a ray hits (Möller–Trumbore on the current morphed positions)
 * and the corner vertex nearest to the hit point.
 *
 * DOES NOT touch GL or read input.
 */
#ifndef DEFORMD_VW_EDIT_H
#define DEFORMD_VW_EDIT_H

#include <stdint.h>


/* Returns 1 with the hit point and its nearest corner vertex, 0 when the ray hits nothing.
 * `positions` has 3 floats per vertex; `dir` need not be normalised. */
int vw_edit_pick(const float *positions, const uint32_t *triangles, uint32_t triangle_count, const float origin[3],
            const float dir[3], float hit[3], uint32_t *vertex);
/* The same hit, with the hit triangle's unit normal on the side the ray came from (a
 * participant's cursor, vw_presence_view.c). */
int vw_edit_pick_surface(const float *positions, const uint32_t *triangles, uint32_t triangle_count,
                         const float origin[3], const float dir[3], float hit[3], float normal[3]);

#endif
