/*
 * test_weld.c — welding render vertices into topology vertices, and the stats built on it.
 */
#include "oracle.h"
#include "test.h"

/* A unit cube whose faces each have their own UV square: 24 render vertices, 8 corners. */
static const char cube_obj[] =
    "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\nv 1 1 1\nv 0 1 1\n"
    /* an atlas: face k gets the UV square [k/6, (k+1)/6] x [0, 1] */
    "vt 0 0\nvt 0.16 0\nvt 0.16 1\nvt 0 1\nvt 0.17 0\nvt 0.33 0\nvt 0.33 1\nvt 0.17 1\n"
    "vt 0.34 0\nvt 0.5 0\nvt 0.5 1\nvt 0.34 1\nvt 0.51 0\nvt 0.66 0\nvt 0.66 1\nvt 0.51 1\n"
    "vt 0.67 0\nvt 0.83 0\nvt 0.83 1\nvt 0.67 1\nvt 0.84 0\nvt 1 0\nvt 1 1\nvt 0.84 1\n"
    "f 1/1 4/2 3/3 2/4\n"      /* z = 0 */
    "f 5/5 6/6 7/7 8/8\n"      /* z = 1 */
    "f 1/9 2/10 6/11 5/12\n"   /* y = 0 */
    "f 4/13 8/14 7/15 3/16\n"  /* y = 1 */
    "f 1/17 5/18 8/19 4/20\n"  /* x = 0 */
    "f 2/21 3/22 7/23 6/24\n"; /* x = 1 */

TEST(weld_merges_vertices_split_at_uv_seams) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_write_file("cube.obj", cube_obj, sizeof(cube_obj) - 1), NULL, &m, err,
                        sizeof(err)), err);
  ASSERT_EQ(m->vertex_count, 24);
  ASSERT_EQ(m->triangle_count, 12);
  ASSERT(m->uvs != NULL);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_EQ(t.vertex_count, 8);
  ASSERT_EQ(t.triangle_count, 12);
  /* Both maps agree: every render vertex is listed under its topology vertex, three each. */
  for (uint32_t i = 0; i < t.vertex_count; i++) {
    ASSERT_EQ(t.topo_offsets[i + 1] - t.topo_offsets[i], 3);
    for (uint32_t k = t.topo_offsets[i]; k < t.topo_offsets[i + 1]; k++) {
      uint32_t r = t.topo_render[k];
      ASSERT_EQ(t.render_to_topo[r], i);
      ASSERT(memcmp(m->positions + 3 * r, m->positions + 3 * t.topo_render[t.topo_offsets[i]],
                    sizeof(float) * 3) == 0);
    }
  }
  mesh_stats s;
  ASSERT_OK(mesh_compute_stats(m, &t, &s), NULL);
  ASSERT_EQ(s.vertices, 24);
  ASSERT_EQ(s.topology_vertices, 8);
  ASSERT_EQ(s.components, 1);
  ASSERT_EQ(s.boundary_edges, 0); /* the seams are not holes */
  ASSERT_EQ(s.nonmanifold_edges, 0);
  ASSERT_EQ(s.degenerate_triangles, 0);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}

TEST(weld_tolerance_is_relative_to_the_bounding_box_diagonal) {
  /* Two triangles sharing an edge whose copies are 0.5e-6 and 3e-6 diagonals apart. */
  mesh *m = mesh_create();
  ASSERT_OK(mesh_alloc(m, 6, 2, 0, 0), NULL);
  const double diag = sqrt(2.0) * 1000.0; /* box 1000 × 1000 × 0 */
  float p[18] = {0, 0, 0, 1000, 0, 0, 0, 1000, 0,
                 1000, 1000, 0, 0, 1000, 0, 1000, 0, 0};
  p[3 * 4 + 0] += (float)(0.5e-6 * diag); /* within the default tolerance of 1e-6 */
  p[3 * 5 + 1] += (float)(3e-6 * diag);   /* outside it */
  memcpy(m->positions, p, sizeof(p));
  uint32_t tri[6] = {0, 1, 2, 3, 4, 5};
  memcpy(m->triangles, tri, sizeof(tri));
  mesh_update_bounds(m);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_EQ(t.vertex_count, 5);
  ASSERT_EQ(t.render_to_topo[4], t.render_to_topo[2]);
  ASSERT(t.render_to_topo[5] != t.render_to_topo[1]);
  mesh_topology_fini(&t);
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 1e-5), NULL); /* a looser weld takes both */
  ASSERT_EQ(t.vertex_count, 4);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}

TEST(import_drops_unreferenced_vertices_and_merges_identical_ones) {
  /* 7 positions, two unused; faces repeat vertices with identical attributes. */
  const char obj[] = "v 0 0 0\nv 9 9 9\nv 1 0 0\nv 0 1 0\nv 8 8 8\nv 1 1 0\nv 0 0 0\n"
                     "f 1 3 4\nf 3 6 4\nf 7 3 1\n";
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_write_file("unref.obj", obj, sizeof(obj) - 1), NULL, &m, err,
                        sizeof(err)), err);
  ASSERT_EQ(m->vertex_count, 4); /* 9,9,9 and 8,8,8 dropped; the second 0,0,0 merged */
  ASSERT_EQ(m->triangle_count, 3);
  for (uint32_t v = 0; v < m->vertex_count; v++) ASSERT(m->positions[3 * v] < 2.0f);
  mesh_topology t;
  mesh_stats s;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_compute_stats(m, &t, &s), NULL);
  ASSERT_EQ(s.degenerate_triangles, 1); /* 7 3 1 uses (0,0,0) twice */
  ASSERT_EQ(t.collapsed_count, 1);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}

TEST(adjacency_lists_are_sorted_and_symmetric) {
  mesh *m = oracle_icosphere(3, 1.0);
  mesh_topology t;
  mesh_adjacency a;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&a, t.vertex_count, t.triangles, t.triangle_count), NULL);
  /* Euler: V - E + F = 2 on a sphere, E counted from the CSR. */
  uint32_t e2 = a.vv_offsets[a.vertex_count];
  ASSERT_EQ((int64_t)t.vertex_count - e2 / 2 + t.triangle_count, 2);
  for (uint32_t v = 0; v < a.vertex_count; v++) {
    for (uint32_t k = a.vv_offsets[v]; k < a.vv_offsets[v + 1]; k++) {
      if (k > a.vv_offsets[v]) ASSERT(a.vv[k] > a.vv[k - 1]);
      ASSERT(mesh_adjacency_edge(&a, a.vv[k], v) >= 0);
    }
    /* vertex -> triangle: each listed triangle contains v, and there are as many as edges. */
    ASSERT_EQ(a.vt_offsets[v + 1] - a.vt_offsets[v], a.vv_offsets[v + 1] - a.vv_offsets[v]);
    for (uint32_t k = a.vt_offsets[v]; k < a.vt_offsets[v + 1]; k++) {
      const uint32_t *tri = t.triangles + 3 * a.vt[k];
      ASSERT(tri[0] == v || tri[1] == v || tri[2] == v);
    }
  }
  mesh_adjacency_fini(&a);
  ASSERT_EQ(mesh_adjacency_init(&a, 3, t.triangles, t.triangle_count), MESH_ERANGE);
  mesh_topology_fini(&t);
  mesh_destroy(m);
}
