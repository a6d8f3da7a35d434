/*
 * dfm_mask.h — masks on the welded topology: a value per vertex in [0, 1] (1: fully held) that
 * brushes and gestures respect. Painting, erasing and smoothing a mask with dabs (the radius,
 * strength and falloff of sculpt brushes), the auto-masks (the part connected to a pick, the
 * surface turned away from a normal, the mesh's boundary) and the hold a mask gives brushes:
 * its own values, feathered at the edge of what it holds fully so that the surface leaves a
 * held part with zero slope (the smooth border rule of dfm_border.c, for brushes).
 *
 * This module DOES NOT: keep masks per author or between calls, undo (the service does), move
 * any vertex, or know sessions. The caller owns every array.
 *
 * Errors: 0 or a negative DFM_E* code (dfm.h), with a reason in `err` where one is taken.
 */
#ifndef DEFORMD_DFM_MASK_H
#define DEFORMD_DFM_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "dfm.h"
#include "dfm_brush.h"
#include "mesh.h"

typedef enum dfm_mask_tool {
  DFM_MASK_PAINT = 0, /* m += strength · falloff, up to 1 */
  DFM_MASK_ERASE,     /* m -= strength · falloff, down to 0 */
  DFM_MASK_SMOOTH     /* m += strength · falloff · (mean of the neighbours' m - m) */
} dfm_mask_tool;

/* Parses "paint", "erase", "smooth". Returns 0 or DFM_EINVAL (also for NULL). */
int dfm_mask_tool_parse(const char *name, dfm_mask_tool *out);
const char *dfm_mask_tool_name(dfm_mask_tool t);

/* Applies `count` dabs in order to `mask` (adj->vertex_count values in [0, 1]), each at its
 * sample's centre with its radius and strength (in [0, 1]; `direction` is ignored), weighted by
 * dfm_falloff_eval(falloff, distance / radius) of the straight-line distance in `positions`
 * (3 doubles per vertex). A vertex outside every dab keeps its value bit for bit. `changed`
 * (may be NULL; adj->vertex_count bytes) gets 1 for every vertex whose value changed. Returns 0
 * or DFM_EINVAL with a reason (bad tool, falloff or sample), DFM_ENOMEM. */
int dfm_mask_dabs(dfm_mask_tool tool, dfm_falloff falloff, const mesh_adjacency *adj, const double *positions,
                  const dfm_brush_sample *samples, uint32_t count, float *mask, uint8_t *changed, char *err,
                  size_t errlen);

/* The auto-masks. Each writes `out` (adj->vertex_count values, 0 or 1):
 *   topology  1 on every vertex not connected to `seed` by edges (another loose part), 0 on its part
 *   normal    1 where the angle between a vertex's normal and `seed`'s (area-weighted, in
 *             `positions`) exceeds `angle` radians, else 0
 *   boundary  1 on the vertices of boundary edges (used by one triangle) and `rings` - 1 rings of
 *             neighbours around them, else 0 (rings >= 1)
 * Returns 0, DFM_EINVAL (seed out of range) or DFM_ENOMEM. */
int dfm_mask_topology(const mesh_adjacency *adj, uint32_t seed, float *out);
int dfm_mask_normal(const mesh_adjacency *adj, const uint32_t *triangles, const double *positions, uint32_t seed,
                    double angle, float *out);
int dfm_mask_boundary(const mesh_adjacency *adj, const uint32_t *triangles, uint32_t rings, float *out);

/* How much of a brush's displacement each vertex takes under `mask` (may be NULL: all of it):
 *   free[v] = (1 - mask[v]) · s(min(d(v) / band, 1)),   s(t) = 3t² - 2t³
 * where d(v) is the geodesic distance over edges (in `positions`) to the nearest vertex the
 * mask holds fully (mask 1); with none, or band <= 0, s is 1. A held vertex gets exactly 0 and
 * the displacement leaves the held part with zero slope over `band`. Writes adj->vertex_count
 * values into `out`. Returns 0 or DFM_ENOMEM. */
int dfm_mask_free(const mesh_adjacency *adj, const double *positions, const float *mask, double band, float *out);

#endif
