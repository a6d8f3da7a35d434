/*
 * srv_brush_budget.c — what a brush stroke will cost, known before it runs.
 *
 * A dab scans every vertex for its distance and then moves those within its radius, so a
 * stroke's time is dabs × vertices distance checks (~1 ns each here) plus the vertices moved,
 * summed over its dabs (100-270 ns each with their normals). The dabs are those the stroke's
 * path places (dfm_stroke_dabs: one every spacing × radius of its length), which srv_brush.c
 * passes here as the samples. Measured on the 41k-vertex demo head, one dab per sample (inflate;
 * docs/performance.md has the command): 1000 whole-head dabs 11.3 s, 65,536 dabs of radius
 * 1e-4 2.6 s, 20,000 dabs of radius 0.02 3.4 s. One 65,536-dab stroke with a whole-head radius
 * would take minutes of a pool thread. The work counted here, in touched-vertex units, is
 *
 *     Σ over dabs (and their mirror images) of the vertices within the dab's bounding box
 *     + dabs × vertices / SRV_BRUSH_SCAN_RATIO
 *
 * The first term is an upper bound found without touching a vertex per dab: the vertices are
 * counted once into a uniform grid (at most 64 cells a side, about two vertices a cell), the
 * counts turned into 3-D prefix sums, and a dab's box reads eight of them. The whole estimate
 * costs O(vertices + cells + dabs).
 *
 * DOES NOT apply brushes (server/solve/dfm_brush.c) or decide the budget (srv_brush.c compares).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dfm_brush.h"
#include "srv_error.h"
#include "srv_brush.h"

#define MAX_CELLS 64

typedef struct grid {
  int g;               /* cells a side */
  double lo[3], inv[3]; /* cell of x: (x - lo) * inv */
  uint32_t *sum;       /* (g+1)^3 prefix sums: sum[i][j][k] = vertices in cells < i, < j, < k */
} grid;

static size_t at(int g, int i, int j, int k) {
  return ((size_t)i * (size_t)(g + 1) + (size_t)j) * (size_t)(g + 1) + (size_t)k;
}

static int cell_of(const grid *gr, int axis, double x) {
  double c = floor((x - gr->lo[axis]) * gr->inv[axis]);
  if (!(c >= 0)) return 0; /* NaN too */
  if (c >= gr->g) return gr->g - 1;
  return (int)c;
}

static int grid_build(grid *gr, const double *p, uint32_t n) {
  int g = (int)cbrt((double)n / 2.0);
  if (g < 1) g = 1;
  if (g > MAX_CELLS) g = MAX_CELLS;
  gr->g = g;
  double hi[3];
  for (int a = 0; a < 3; a++) gr->lo[a] = hi[a] = n ? p[a] : 0.0;
  for (uint32_t v = 0; v < n; v++)
    for (int a = 0; a < 3; a++) {
      double x = p[3 * (size_t)v + a];
      if (x < gr->lo[a]) gr->lo[a] = x;
      if (x > hi[a]) hi[a] = x;
    }
  for (int a = 0; a < 3; a++) {
    double span = hi[a] - gr->lo[a];
    gr->inv[a] = span > 0 && isfinite(span) ? g / span : 0.0;
  }
  size_t cells = (size_t)(g + 1) * (size_t)(g + 1) * (size_t)(g + 1);
  gr->sum = calloc(cells, sizeof(uint32_t));
  if (!gr->sum) return -1;
  /* Counts into sum[i+1][j+1][k+1], then prefix sums along each axis in turn. */
  for (uint32_t v = 0; v < n; v++) {
    const double *x = p + 3 * (size_t)v;
    gr->sum[at(g, cell_of(gr, 0, x[0]) + 1, cell_of(gr, 1, x[1]) + 1, cell_of(gr, 2, x[2]) + 1)]++;
  }
  for (int i = 1; i <= g; i++)
    for (int j = 0; j <= g; j++)
      for (int k = 0; k <= g; k++) gr->sum[at(g, i, j, k)] += gr->sum[at(g, i - 1, j, k)];
  for (int i = 0; i <= g; i++)
    for (int j = 1; j <= g; j++)
      for (int k = 0; k <= g; k++) gr->sum[at(g, i, j, k)] += gr->sum[at(g, i, j - 1, k)];
  for (int i = 0; i <= g; i++)
    for (int j = 0; j <= g; j++)
      for (int k = 1; k <= g; k++) gr->sum[at(g, i, j, k)] += gr->sum[at(g, i, j, k - 1)];
  return 0;
}

/* Vertices in the cells the box [c - r, c + r] overlaps. */
static uint64_t box_count(const grid *gr, const double c[3], double r) {
  int lo[3], hi[3];
  for (int a = 0; a < 3; a++) {
    lo[a] = cell_of(gr, a, c[a] - r);
    hi[a] = cell_of(gr, a, c[a] + r) + 1;
  }
  int g = gr->g;
  const uint32_t *S = gr->sum;
  int64_t v = (int64_t)S[at(g, hi[0], hi[1], hi[2])] - S[at(g, lo[0], hi[1], hi[2])] - S[at(g, hi[0], lo[1], hi[2])] -
              S[at(g, hi[0], hi[1], lo[2])] + S[at(g, lo[0], lo[1], hi[2])] + S[at(g, lo[0], hi[1], lo[2])] +
              S[at(g, hi[0], lo[1], lo[2])] - S[at(g, lo[0], lo[1], lo[2])];
  return v > 0 ? (uint64_t)v : 0;
}

int srv_brush_work(const double *positions, uint32_t n, const dfm_brush_sample *samples, uint32_t count,
                   int mirror_axis, srv_brush_cost *out) {
  memset(out, 0, sizeof(*out));
  grid gr;
  if (grid_build(&gr, positions, n) != 0) return SRV_EINTERNAL;
  for (uint32_t i = 0; i < count; i++) {
    const dfm_brush_sample *s = &samples[i];
    out->touched += box_count(&gr, s->center, s->radius);
    if (mirror_axis >= 0) {
      double m[3] = {s->center[0], s->center[1], s->center[2]};
      m[mirror_axis] = -m[mirror_axis];
      out->touched += box_count(&gr, m, s->radius);
    }
  }
  free(gr.sum);
  out->scanned = (uint64_t)count * (mirror_axis >= 0 ? 2 : 1) * n;
  out->work = out->touched + out->scanned / SRV_BRUSH_SCAN_RATIO;
  return 0;
}
