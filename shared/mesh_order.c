/*
 * mesh_order.c — the session's triangle order: each submesh's triangles in the order a
 * depth-first walk across their edges meets them, the order protocol version 2 codes best.
 *
 * Why this walk. Every version 2 join codes the triangles in the session's order, renamed to
 * the order they first use the vertices (docs/protocol.md §12.3, §12.11). meshoptimizer's
 * index codec spends least on a triangle that shares an edge with the one just before it and
 * whose third vertex is the next new one; a walk that always steps across an edge of the last
 * triangle (Edgebreaker's order, Rossignac 1999: the left neighbour first, the right one kept
 * for later, the latest kept one when both are taken) makes almost every triangle so. Measured
 * on the dragon scan (docs/performance.md, "The session's triangle order"): the entropy join's
 * triangles 1,225 KB in vertex-cache order, 800 KB in this one.
 *
 * The walk keeps every triangle's corners and winding (it only rotates the corners so that the
 * edge it entered by comes first, which the codec's own rotation may change again), every
 * submesh's range and the vertices' order.
 *
 * DOES NOT code anything (protocol/ does) or weld (the walk crosses the edges the triangles
 * share by index).
 */
#include <stdlib.h>
#include <string.h>

#include "mesh.h"

/* The triangle of `a`'s list holding the directed edge x -> y, not yet walked; -1 if none. */
static int64_t across(const mesh_adjacency *a, const uint32_t *tri, const uint8_t *seen, uint32_t x, uint32_t y) {
  for (uint32_t k = a->vt_offsets[x]; k < a->vt_offsets[x + 1]; k++) {
    uint32_t t = a->vt[k];
    const uint32_t *c = tri + 3 * (size_t)t;
    if (seen[t]) continue;
    for (int j = 0; j < 3; j++)
      if (c[j] == x && c[(j + 1) % 3] == y) return t;
  }
  return -1;
}

/* A step of the walk: triangle `t`, entered by the edge that starts at its vertex `from`. */
typedef struct step {
  uint32_t t, from;
} step;

/* Writes the `count` triangles of `tri` in walk order into `out`. */
static int walk(const uint32_t *tri, uint32_t count, uint32_t vertex_count, uint32_t *out) {
  mesh_adjacency a;
  int rc = mesh_adjacency_init(&a, vertex_count, tri, count);
  if (rc) return rc;
  uint8_t *seen = calloc((size_t)count + 1, 1);
  step *stack = malloc(sizeof(step) * ((size_t)count + 1));
  if (!seen || !stack) {
    rc = MESH_ENOMEM;
    goto done;
  }
  size_t n = 0, top = 0;
  for (uint32_t s = 0; s < count; s++) {
    if (seen[s]) continue;
    step at = {s, tri[3 * (size_t)s]};
    seen[s] = 1;
    /* The first triangle's own first edge is the one edge no step enters it by: its neighbour
     * there waits on the stack, so an open surface is one walk too. */
    const uint32_t *c0 = tri + 3 * (size_t)s;
    int64_t back = across(&a, tri, seen, c0[1], c0[0]);
    if (back >= 0) stack[top++] = (step){(uint32_t)back, c0[1]};
    for (;;) {
      const uint32_t *c = tri + 3 * (size_t)at.t;
      int g = c[1] == at.from ? 1 : c[2] == at.from ? 2 : 0;
      uint32_t x = c[g], y = c[(g + 1) % 3], z = c[(g + 2) % 3]; /* entered by x -> y */
      out[3 * n] = x, out[3 * n + 1] = y, out[3 * n + 2] = z, n++;
      /* The neighbours across z -> x (left) and y -> z (right) hold x -> z and z -> y. */
      int64_t left = across(&a, tri, seen, x, z), right = across(&a, tri, seen, z, y);
      if (left >= 0 && right >= 0) stack[top++] = (step){(uint32_t)right, z};
      if (left >= 0) at = (step){(uint32_t)left, x};
      else if (right >= 0) at = (step){(uint32_t)right, z};
      else {
        while (top && seen[stack[top - 1].t]) top--;
        if (!top) break;
        at = stack[--top];
      }
      seen[at.t] = 1;
    }
  }
done:
  free(seen);
  free(stack);
  mesh_adjacency_fini(&a);
  return rc;
}

int mesh_optimize_triangle_order(mesh *m) {
  size_t most = 0;
  for (uint32_t i = 0; i < m->submesh_count; i++)
    if (m->submeshes[i].triangle_count > most) most = m->submeshes[i].triangle_count;
  uint32_t *scratch = malloc(sizeof(uint32_t) * 3 * (most + 1));
  if (!scratch) return MESH_ENOMEM;
  int rc = 0;
  for (uint32_t i = 0; i < m->submesh_count && rc == 0; i++) {
    const mesh_submesh *sm = &m->submeshes[i];
    uint32_t *tri = m->triangles + 3 * (size_t)sm->first_triangle;
    rc = walk(tri, sm->triangle_count, m->vertex_count, scratch);
    if (rc == 0) memcpy(tri, scratch, sizeof(uint32_t) * 3 * (size_t)sm->triangle_count);
  }
  free(scratch);
  return rc;
}
