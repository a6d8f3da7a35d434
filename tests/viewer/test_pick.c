/*
 * test_pick.c — GPU picking (vw_pick.c) against the CPU pick (vw_edit_pick, itself tested
 * against a double-precision ray cast in test_edit.c): at a grid of pixels over the demo head,
 * morphed by two targets and a sculpt offset so the shape picked is the GPU's current one, the
 * GPU says "nothing" exactly where the CPU ray misses, and elsewhere names the same vertex (or,
 * where the hit lies equally near two corners, one as near), at the same point.
 * A hidden window under Xvfb with Mesa's llvmpipe (tests/run.sh starts Xvfb).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "test.h"
#include "vw_camera.h"
#include "vw_context.h"
#include "vw_edit.h"
#include "vw_gpu.h"
#include "vw_pick.h"

static float d2(const float *a, const float *b) {
  return (a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]);
}

TEST(the_gpu_pick_at_a_pixel_names_the_cpu_picks_vertex) {
  vw_context ctx;
  char err[1024];
  int rc = vw_context_init(&ctx, 64, 64, 1, "test-pick", err, sizeof(err));
  if (rc != 0) test__fail(__FILE__, __LINE__, "no GL context (%d): %s", rc, err);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  float *w = calloc(m->target_count + 1, sizeof(float));
  w[0] = 1.0f, w[3] = 0.7f;
  vw_gpu_set_weights(g, w, m->target_count);
  float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  for (uint32_t v = 0; v < m->vertex_count; v++) off[3 * v + 2] = 0.004f * sinf(40.0f * m->positions[3 * v + 1]);
  vw_gpu_set_offsets(g, 0, m->vertex_count, off);
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  float *p = malloc(sizeof(float) * 3 * m->vertex_count);
  ASSERT_OK(vw_gpu_read_positions(g, p), NULL);
  vw_pick *pk = NULL;
  ASSERT_OK(vw_pick_create(&pk, err, sizeof(err)), err);
  const int W = 640, H = 480;
  float diag = (float)mesh_bbox_diagonal(m);
  uint32_t hits = 0, misses = 0, ties = 0;
  for (int view = 0; view < 2; view++) {
    vw_camera c = {.fov = glm_rad(40.0f), .up = 'y'};
    vw_camera_frame(&c, m->bbox_min, m->bbox_max);
    vw_camera_view(&c, view ? 'r' : 'f');
    if (!view) vw_camera_orbit(&c, 0.4f, 0.2f);
    for (int j = 0; j < 12; j++)
      for (int i = 0; i < 16; i++) {
        float px = W * (0.25f + 0.5f * (i + 0.37f) / 16), py = H * (0.05f + 0.9f * (j + 0.61f) / 12), hc[3], hg[3];
        uint32_t vc = 0, vg = 0, tri = 0;
        vec3 o, d;
        vw_camera_ray(&c, W, H, px, py, o, d);
        int cpu = vw_edit_pick(p, m->triangles, m->triangle_count, o, d, hc, &vc);
        int gpu = vw_pick_at(pk, g, &c, W, H, px, py, m->triangles, 0, hg, &tri, &vg, err, sizeof(err));
        ASSERT(gpu >= 0);
        ASSERT_EQ(gpu, cpu);
        if (!cpu) {
          misses++;
          continue;
        }
        hits++;
        ASSERT(d2(hc, hg) < (1e-4f * diag) * (1e-4f * diag));
        if (vg != vc) { /* a hit as near two corners: either is right */
          ties++;
          ASSERT_NEAR(sqrtf(d2(hc, p + 3 * vg)), sqrtf(d2(hc, p + 3 * vc)), 1e-4 * diag);
        }
      }
  }
  fprintf(stderr, "%u hits (%u ties between corners), %u misses: the GPU pick named the CPU's vertex\n", hits, ties, misses);
  ASSERT(hits > 100 && misses > 10);
  ASSERT(ties <= hits / 20);
  vw_pick_destroy(pk);
  vw_gpu_destroy(g);
  free(p);
  free(off);
  free(w);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  vw_context_fini(&ctx);
}
