/*
 * mesh_demo_voxel.c — a closed surface as volumetric scanners make them: a bumpy sphere's
 * zero set extracted from a grid of samples by marching tetrahedra (each cube split into the six
 * tetrahedra around its main diagonal), every vertex on an edge of the grid.
 *
 * Why it exists: scans reconstructed from range images on a voxel grid (the Stanford dragon's
 * dragon_vrip.ply among them, made by VRIP and marching cubes) put every vertex on a grid edge, so
 * neighbouring vertices repeat each other's coordinates exactly, which the wire's entropy coding
 * makes use of (docs/protocol.md §12.11). Tests and fixtures need such a mesh that is small,
 * needs no data package and is the same on every run.
 *
 * DOES NOT read files or use random numbers: the same bits come out on every run (given the
 * same libm).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"
#include "mesh_io.h"

#define VOXEL_LO (-1.25)
#define VOXEL_SPAN 2.5

typedef struct voxel_grid {
  uint32_t n;    /* cubes a side */
  double h;      /* spacing */
  double *f;     /* (n + 1)^3 samples of the field, x fastest */
  int32_t *edge; /* 7 per sample: the vertex on the edge to sample + offset (1..7 as bits zyx), or -1 */
  float *pos;
  uint32_t *tri;
  uint32_t nv, nt, cap_v, cap_t;
} voxel_grid;

static double voxel_coord(const voxel_grid *g, uint32_t i) { return VOXEL_LO + g->h * (double)i; }

/* Negative inside: a sphere of radius 1 with bumps, so that the surface is not symmetric. */
static double voxel_field(double x, double y, double z) {
  return sqrt(x * x + y * y + z * z) - (1.0 + 0.08 * sin(5.0 * x) * cos(4.0 * y) + 0.05 * sin(7.0 * z));
}

static size_t voxel_index(const voxel_grid *g, uint32_t i, uint32_t j, uint32_t k) {
  size_t s = g->n + 1;
  return ((size_t)k * s + j) * s + i;
}

/* The vertex where the field crosses zero on the edge between samples a and a + off. */
static int32_t voxel_vertex(voxel_grid *g, const uint32_t a[3], int off) {
  uint32_t b[3] = {a[0] + (off & 1), a[1] + ((off >> 1) & 1), a[2] + ((off >> 2) & 1)};
  size_t ia = voxel_index(g, a[0], a[1], a[2]), ib = voxel_index(g, b[0], b[1], b[2]);
  int32_t *slot = &g->edge[7 * ia + (off - 1)];
  if (*slot >= 0) return *slot;
  if (g->nv == g->cap_v) return -1;
  double t = g->f[ia] / (g->f[ia] - g->f[ib]);
  for (int c = 0; c < 3; c++) {
    double x = voxel_coord(g, a[c]), y = voxel_coord(g, b[c]);
    g->pos[3 * (size_t)g->nv + c] = (float)(a[c] == b[c] ? x : x + t * (y - x)); /* exact on the grid's lines */
  }
  return *slot = (int32_t)g->nv++;
}

/* One triangle over the crossings of edges (p, q) (corner indices of tet), facing from `in` to `out`. */
static void voxel_triangle(voxel_grid *g, const uint32_t corner[4][3], const int e[3][2], int in, int out) {
  int32_t v[3];
  for (int k = 0; k < 3; k++) {
    int p = e[k][0], q = e[k][1], off = 0;
    if (corner[q][0] + corner[q][1] + corner[q][2] < corner[p][0] + corner[p][1] + corner[p][2]) p = q, q = e[k][0];
    for (int c = 0; c < 3; c++) off |= (int)(corner[q][c] - corner[p][c]) << c;
    if ((v[k] = voxel_vertex(g, corner[p], off)) < 0) return;
  }
  /* Which way it faces, from the edges' midpoints (exact in grid units): the crossings lie on
   * the same edges, so they wind the same way unless the triangle is degenerate. */
  double mid[3][3];
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 3; c++) mid[k][c] = (double)corner[e[k][0]][c] + (double)corner[e[k][1]][c];
  double u[3], w[3], d = 0;
  for (int c = 0; c < 3; c++) u[c] = mid[1][c] - mid[0][c], w[c] = mid[2][c] - mid[0][c];
  double nrm[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
  for (int k = 0; k < 3; k++) d += nrm[k] * ((double)corner[out][k] - (double)corner[in][k]);
  if (v[0] == v[1] || v[1] == v[2] || v[0] == v[2] || g->nt == g->cap_t) return;
  uint32_t *t = g->tri + 3 * (size_t)g->nt++;
  t[0] = (uint32_t)v[0];
  t[1] = (uint32_t)(d >= 0 ? v[1] : v[2]);
  t[2] = (uint32_t)(d >= 0 ? v[2] : v[1]);
}

/* Marching tetrahedra on one tetrahedron: one triangle where one corner differs from the
 * others, two where two and two do. */
static void voxel_tet(voxel_grid *g, const uint32_t corner[4][3]) {
  int inside[4], nin = 0;
  for (int k = 0; k < 4; k++) nin += inside[k] = g->f[voxel_index(g, corner[k][0], corner[k][1], corner[k][2])] < 0;
  if (nin == 0 || nin == 4) return;
  if (nin == 1 || nin == 3) {
    int lone = 0;
    while (inside[lone] != (nin == 1)) lone++;
    int o[3], k = 0;
    for (int c = 0; c < 4; c++)
      if (c != lone) o[k++] = c;
    int e[3][2] = {{lone, o[0]}, {lone, o[1]}, {lone, o[2]}};
    voxel_triangle(g, corner, e, nin == 1 ? lone : o[0], nin == 1 ? o[0] : lone);
    return;
  }
  int in[2], out[2], a = 0, b = 0;
  for (int c = 0; c < 4; c++) {
    if (inside[c]) in[a++] = c;
    else out[b++] = c;
  }
  int e1[3][2] = {{in[0], out[0]}, {in[0], out[1]}, {in[1], out[1]}};
  int e2[3][2] = {{in[0], out[0]}, {in[1], out[1]}, {in[1], out[0]}};
  voxel_triangle(g, corner, e1, in[0], out[0]);
  voxel_triangle(g, corner, e2, in[1], out[1]);
}

static void voxel_cube(voxel_grid *g, uint32_t i, uint32_t j, uint32_t k) {
  static const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int t = 0; t < 6; t++) {
    uint32_t corner[4][3] = {{i, j, k}};
    for (int s = 1; s < 4; s++) {
      memcpy(corner[s], corner[s - 1], sizeof(corner[s]));
      corner[s][perm[t][s - 1]]++;
    }
    voxel_tet(g, corner);
  }
}

int mesh_demo_voxel_sphere(uint32_t n, mesh **out) {
  *out = NULL;
  if (n < 4 || n > 256) return MESH_EINVAL;
  voxel_grid g = {n, VOXEL_SPAN / n, NULL, NULL, NULL, NULL, 0, 0, 0, 0};
  size_t samples = (size_t)(n + 1) * (n + 1) * (n + 1);
  g.cap_v = (uint32_t)(7 * samples < UINT32_MAX ? 7 * samples : UINT32_MAX);
  g.cap_t = (uint32_t)(12 * (size_t)n * n * n < UINT32_MAX ? 12 * (size_t)n * n * n : UINT32_MAX);
  g.f = malloc(sizeof(double) * samples);
  g.edge = malloc(sizeof(int32_t) * 7 * samples);
  g.pos = malloc(sizeof(float) * 3 * (size_t)g.cap_v);
  g.tri = malloc(sizeof(uint32_t) * 3 * (size_t)g.cap_t);
  int rc = g.f && g.edge && g.pos && g.tri ? 0 : MESH_ENOMEM;
  for (uint32_t k = 0; rc == 0 && k <= n; k++)
    for (uint32_t j = 0; j <= n; j++)
      for (uint32_t i = 0; i <= n; i++)
        g.f[voxel_index(&g, i, j, k)] = voxel_field(voxel_coord(&g, i), voxel_coord(&g, j), voxel_coord(&g, k));
  if (rc == 0) memset(g.edge, 0xff, sizeof(int32_t) * 7 * samples);
  for (uint32_t k = 0; rc == 0 && k < n; k++)
    for (uint32_t j = 0; j < n; j++)
      for (uint32_t i = 0; i < n; i++) voxel_cube(&g, i, j, k);
  mesh *m = rc == 0 ? mesh_create() : NULL;
  if (rc == 0 && (!m || mesh_alloc(m, g.nv, g.nt, 0, 0) != 0)) rc = MESH_ENOMEM;
  if (rc == 0) {
    memcpy(m->positions, g.pos, sizeof(float) * 3 * (size_t)g.nv);
    memcpy(m->triangles, g.tri, sizeof(uint32_t) * 3 * (size_t)g.nt);
    m->submeshes = calloc(1, sizeof(mesh_submesh));
    if (!m->submeshes || !(m->submeshes[0].name = mesh__strdup("voxel sphere"))) rc = MESH_ENOMEM;
  }
  if (rc == 0) {
    m->submesh_count = 1;
    m->submeshes[0].vertex_count = m->vertex_count;
    m->submeshes[0].triangle_count = m->triangle_count;
    mesh_update_bounds(m);
    *out = m;
  } else {
    mesh_destroy(m);
  }
  free(g.f), free(g.edge), free(g.pos), free(g.tri);
  return rc;
}
