/*
 * dfm_roles.c — who moves in a gesture: its parameters checked against the mesh, each vertex's
 * role (free, handle, anchor, outside the region, pinned), the free parts no constraint reaches
 * held still, and the soft constraints' targets.
 *
 * DOES NOT assemble, factorise or solve (dfm_system.c calls in here while it builds a system).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfm_internal.h"

int dfm_mode_parse(const char *name, dfm_mode *out) {
  if (strcmp(name, "laplacian") == 0) *out = DFM_LAPLACIAN;
  else if (strcmp(name, "arap") == 0) *out = DFM_ARAP;
  else if (strcmp(name, "biharmonic") == 0) *out = DFM_BIHARMONIC;
  else return DFM_EINVAL;
  return 0;
}

const char *dfm_mode_name(dfm_mode mode) {
  return mode == DFM_ARAP ? "arap" : mode == DFM_BIHARMONIC ? "biharmonic" : "laplacian";
}

/* Checks a gesture's parameters against a mesh of n vertices: DFM_EINVAL with a reason. */
int dfm__roles_check(const dfm_params *p, uint32_t n, char *err, size_t errlen) {
  static const char *what[3] = {"region", "anchor", "handle"};
  const uint32_t *lists[3] = {p->roi, p->anchors, p->handle};
  uint32_t counts[3] = {p->roi_count, p->anchor_count, p->handle_count};
  for (int l = 0; l < 3; l++)
    for (uint32_t i = 0; i < counts[l]; i++)
      if (lists[l][i] >= n) {
        snprintf(err, errlen, "%s vertex %u is out of range (%u topology vertices)", what[l], lists[l][i], n);
        return DFM_EINVAL;
      }
  for (uint32_t i = 0; i < p->soft_count; i++) {
    if (p->soft[i] >= n || !(p->soft_weight[i] >= 0) || !isfinite(p->soft_weight[i])) {
      snprintf(err, errlen, "soft constraint %u: vertex out of range or weight not a finite number >= 0", i);
      return DFM_EINVAL;
    }
    if (p->soft_position && (!isfinite(p->soft_position[3 * (size_t)i]) || !isfinite(p->soft_position[3 * (size_t)i + 1]) ||
                             !isfinite(p->soft_position[3 * (size_t)i + 2]))) {
      snprintf(err, errlen, "soft constraint %u: position not finite", i);
      return DFM_EINVAL;
    }
  }
  if (p->handle_count == 0 && p->soft_count == 0) {
    snprintf(err, errlen, "a gesture needs at least one handle vertex");
    return DFM_EINVAL;
  }
  return 0;
}

/* Marks roles (the parameters were checked). */
void dfm__roles_assign(dfm_system *s) {
  const dfm_params *p = &s->p;
  memset(s->role, p->roi ? DFM__ROLE_OUTSIDE : DFM__ROLE_FREE, s->n);
  for (uint32_t i = 0; i < p->roi_count; i++) s->role[p->roi[i]] = DFM__ROLE_FREE;
  for (uint32_t i = 0; i < p->anchor_count; i++) s->role[p->anchors[i]] = DFM__ROLE_ANCHOR;
  for (uint32_t i = 0; i < p->handle_count; i++) s->role[p->handle[i]] = DFM__ROLE_HANDLE;
}

/* Holds still every free part of the mesh that no constraint reaches (breadth-first search over
 * free vertices; a part is reached when one of its vertices touches a known vertex or carries a
 * soft constraint). */
int dfm__roles_pin_unconstrained(dfm_system *s, const mesh_adjacency *adj, const uint8_t *is_soft) {
  uint32_t *queue = malloc(sizeof(uint32_t) * (s->n + 1));
  uint32_t *comp = malloc(sizeof(uint32_t) * (s->n + 1));
  uint8_t *seen = calloc(s->n + 1, 1);
  if (!queue || !comp || !seen) {
    free(queue);
    free(comp);
    free(seen);
    return DFM_ENOMEM;
  }
  for (uint32_t start = 0; start < s->n; start++) {
    if (s->role[start] != DFM__ROLE_FREE || seen[start]) continue;
    uint32_t head = 0, tail = 0, nc = 0;
    int reached = 0;
    queue[tail++] = start;
    seen[start] = 1;
    while (head < tail) {
      uint32_t v = queue[head++];
      comp[nc++] = v;
      reached |= is_soft[v];
      for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
        uint32_t u = adj->vv[e];
        if (s->role[u] != DFM__ROLE_FREE) {
          reached = 1;
        } else if (!seen[u]) {
          seen[u] = 1;
          queue[tail++] = u;
        }
      }
    }
    if (!reached) {
      for (uint32_t k = 0; k < nc; k++) s->role[comp[k]] = DFM__ROLE_PINNED;
      s->pinned += nc;
    }
  }
  free(queue);
  free(comp);
  free(seen);
  return 0;
}

/* Soft targets per column, as positions (soft_p) and as displacements from rest (soft_d): the
 * weighted mean of the positions given for its vertex, or its rest position (a vertex listed
 * twice is pulled towards both, which is the same as towards their mean with the summed
 * weight). Fixed for the gesture: a drag moves the handle, never a soft target. */
int dfm__roles_soft_targets(dfm_system *s, double mean_w) {
  s->soft_p = calloc(3 * ((size_t)s->nf + 1), sizeof(double));
  s->soft_d = calloc(3 * ((size_t)s->nf + 1), sizeof(double));
  if (!s->soft_p || !s->soft_d) return DFM_ENOMEM;
  for (uint32_t i = 0; i < s->p.soft_count; i++) {
    uint32_t v = s->p.soft[i];
    int32_t col = s->col[v];
    if (col < 0 || s->soft_w[col] == 0.0) continue;
    double w = s->p.soft_weight[i] * mean_w / s->soft_w[col];
    const double *at = s->p.soft_position ? s->p.soft_position + 3 * (size_t)i : s->rest + 3 * (size_t)v;
    for (int d = 0; d < 3; d++) s->soft_p[3 * (size_t)col + d] += w * at[d];
  }
  for (uint32_t k = 0; k < s->nf; k++)
    for (int d = 0; d < 3; d++)
      s->soft_d[3 * (size_t)k + d] = s->soft_p[3 * (size_t)k + d] - s->rest[3 * (size_t)s->free_vertex[k] + d];
  return 0;
}
