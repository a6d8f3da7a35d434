/*
 * mesh_normals.c — reference vertex normals on the CPU.
 *
 * Normals are accumulated per topology vertex, so render vertices split at a UV seam receive the
 * same normal and the shading does not crease there; each render vertex then takes its topology
 * vertex's normal. This is the oracle the viewer's GPU normal pass is tested against, and what
 * exports write.
 *
 * DOES NOT keep hard edges: a mesh that wants creases must not be welded across them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"

void mesh_compute_normals(const mesh *m, const mesh_topology *t, const float *positions,
                          mesh_normal_mode mode, float *normals) {
  const float *p = positions ? positions : m->positions;
  double *acc = calloc(3 * ((size_t)t->vertex_count + 1), sizeof(double));
  if (acc == NULL) {
    memset(normals, 0, sizeof(float) * 3 * m->vertex_count);
    return;
  }
  for (uint32_t f = 0; f < t->triangle_count; f++) {
    /* Corner positions from the source render triangle, so a new shape needs no re-weld. */
    const uint32_t *rt = m->triangles + 3 * (size_t)t->triangle_source[f];
    const uint32_t *tt = t->triangles + 3 * (size_t)f;
    double q[3][3];
    for (int c = 0; c < 3; c++)
      for (int k = 0; k < 3; k++) q[c][k] = p[3 * (size_t)rt[c] + k];
    double e1[3], e2[3], n[3];
    for (int k = 0; k < 3; k++) {
      e1[k] = q[1][k] - q[0][k];
      e2[k] = q[2][k] - q[0][k];
    }
    n[0] = e1[1] * e2[2] - e1[2] * e2[1];
    n[1] = e1[2] * e2[0] - e1[0] * e2[2];
    n[2] = e1[0] * e2[1] - e1[1] * e2[0];
    double len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    if (!(len > 0.0)) continue;
    for (int c = 0; c < 3; c++) {
      double w;
      if (mode == MESH_NORMALS_AREA) {
        w = 0.5 * len; /* face area */
      } else {
        double u[3], v[3];
        for (int k = 0; k < 3; k++) {
          u[k] = q[(c + 1) % 3][k] - q[c][k];
          v[k] = q[(c + 2) % 3][k] - q[c][k];
        }
        double cx = u[1] * v[2] - u[2] * v[1], cy = u[2] * v[0] - u[0] * v[2],
               cz = u[0] * v[1] - u[1] * v[0];
        w = atan2(sqrt(cx * cx + cy * cy + cz * cz), u[0] * v[0] + u[1] * v[1] + u[2] * v[2]);
      }
      for (int k = 0; k < 3; k++) acc[3 * (size_t)tt[c] + k] += w * n[k] / len;
    }
  }
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const double *a = acc + 3 * (size_t)t->render_to_topo[v];
    double len = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
    for (int k = 0; k < 3; k++) normals[3 * (size_t)v + k] = len > 0.0 ? (float)(a[k] / len) : 0.0f;
  }
  free(acc);
}
