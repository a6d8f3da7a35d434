/*
 * proto2_mesh.c — meshes for the version 2 tests, as a session holds them (proto2_mesh.h).
 */
#include <math.h>
#include <string.h>

#include "proto2_mesh.h"
#include "test.h"

mesh *proto2_test_load(const char *what) {
  mesh *m = NULL;
  char err[MESH_ERR_LEN] = "";
  if (strcmp(what, "demo") == 0) ASSERT_OK(mesh_demo_head(&m), NULL);
  else ASSERT_OK(mesh_import(what, NULL, &m, err, sizeof(err)), err);
  mesh_update_bounds(m);
  ASSERT_OK(mesh_optimize_triangle_order(m), NULL); /* as a session does */
  return m;
}

float proto2_test_quantum(const mesh *m) {
  double dx = m->bbox_max[0] - m->bbox_min[0], dy = m->bbox_max[1] - m->bbox_min[1],
         dz = m->bbox_max[2] - m->bbox_min[2];
  double diag = sqrt(dx * dx + dy * dy + dz * dz);
  return diag > 0 ? (float)ldexp(diag, -20) : 1e-6f;
}
