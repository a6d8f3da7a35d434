/*
 * test_navigate.c — deform-view's navigation (issue 26) without a window, on the demo head:
 * zooming toward the ear never lets the near plane cut into the mesh (every vertex tested in
 * clip space, the projection's own test of what the near plane clips), the point under the
 * cursor stays under it while zooming and while orbiting about it, and a pan moves the view by
 * the pixels dragged while the mesh and the direction looked in stay as they were.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "test.h"
#include "vw_camera.h"
#include "vw_edit.h"

#define W 1280
#define H 720

static float *head_positions(mesh **m) {
  ASSERT_OK(mesh_demo_head(m), NULL);
  float *p = malloc(sizeof(float) * 3 * (*m)->vertex_count);
  memcpy(p, (*m)->positions, sizeof(float) * 3 * (*m)->vertex_count);
  return p;
}

/* Vertices the near plane clips while they lie within the frustum's sides: in front of the
 * eye (clip w > 0), nearer than the near plane (z < -w) and |x|, |y| <= w. */
static uint32_t clipped_by_near(const vw_camera *c, const float *p, uint32_t n) {
  mat4 view, proj, vp;
  vw_camera_matrices(c, W, H, view, proj);
  glm_mat4_mul(proj, view, vp);
  uint32_t bad = 0;
  for (uint32_t v = 0; v < n; v++) {
    vec4 in = {p[3 * v], p[3 * v + 1], p[3 * v + 2], 1.0f}, q;
    glm_mat4_mulv(vp, in, q);
    if (q[3] > 0 && q[2] < -q[3] && fabsf(q[0]) <= q[3] && fabsf(q[1]) <= q[3]) bad++;
  }
  return bad;
}

static float dist3f(const float *a, const float *b) {
  return sqrtf((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
}

/* Whether the eye went through the surface on its way from `from` (outside) to `to`. */
static int passed_through(const mesh *m, const float *p, const float from[3], const float to[3]) {
  float d[3] = {to[0] - from[0], to[1] - from[1], to[2] - from[2]}, hit[3];
  uint32_t vertex;
  return vw_edit_pick(p, m->triangles, m->triangle_count, from, d, hit, &vertex) && dist3f(from, hit) < dist3f(from, to);
}

/* The ear: the vertex farthest along +x (the head faces +Z, Y up), seen from the right. */
static uint32_t ear_vertex(const mesh *m) {
  uint32_t best = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++)
    if (m->positions[3 * v] > m->positions[3 * best]) best = v;
  return best;
}

TEST(zooming_toward_the_ear_never_puts_the_near_plane_inside_the_mesh) {
  mesh *m = NULL;
  float *p = head_positions(&m);
  float diag = (float)mesh_bbox_diagonal(m); /* deform-view keeps 1 % of it between eye and mesh */
  for (int side = 0; side < 2; side++) {
    vw_camera c = {.fov = glm_rad(40.0f), .up = 'y'};
    vw_camera_frame(&c, m->bbox_min, m->bbox_max);
    vw_camera_view(&c, side ? 'f' : 'r'); /* from the right, and from the front (the ear at the side) */
    float px, py, hit[3];
    uint32_t vertex;
    ASSERT(vw_camera_project(&c, W, H, m->positions + 3 * ear_vertex(m), &px, &py));
    vec3 o, d;
    vw_camera_ray(&c, W, H, px, py, o, d);
    ASSERT(vw_edit_pick(p, m->triangles, m->triangle_count, o, d, hit, &vertex));
    vec3 eye0, eye;
    vw_camera_eye(&c, eye0);
    float start = dist3f(eye0, hit), applied = 1;
    int notches = 0;
    for (; notches < 60 && applied < 1.0f + 1e-6f; notches++) {
      applied = vw_camera_zoom_at(&c, W, H, 0.9f, hit, p, m->vertex_count, 0.01f * diag);
      ASSERT_EQ(clipped_by_near(&c, p, m->vertex_count), 0);
      vw_camera_eye(&c, eye);
      ASSERT(!passed_through(m, p, eye0, eye));
      float qx, qy;
      ASSERT(vw_camera_project(&c, W, H, hit, &qx, &qy));
      ASSERT_NEAR(qx, px, 0.5);
      ASSERT_NEAR(qy, py, 0.5);
      if (applied >= 1.0f) break;
    }
    vw_camera_eye(&c, eye);
    fprintf(stderr, "%s: %d notches, eye %.4f from the ear point (%.4f at first), near plane %.5f\n",
            side ? "front" : "right", notches, dist3f(eye, hit), start, vw_camera_near(&c));
    ASSERT(dist3f(eye, hit) < 0.1f * start); /* it did come close */
    ASSERT(dist3f(eye, hit) >= 0.01f * diag * 0.999f);
    ASSERT(notches < 60);                     /* and stopped */
    /* Today's wheel (toward the head's centre, no clamp) flies into the head in as many notches. */
    vw_camera free_cam = {.fov = glm_rad(40.0f), .up = 'y'};
    vw_camera_frame(&free_cam, m->bbox_min, m->bbox_max);
    vw_camera_view(&free_cam, side ? 'f' : 'r');
    int inside = 0;
    for (int i = 0; i < notches && !inside; i++) {
      vw_camera_zoom(&free_cam, 0.9f);
      vw_camera_eye(&free_cam, eye);
      inside = passed_through(m, p, eye0, eye) || clipped_by_near(&free_cam, p, m->vertex_count) > 0;
    }
    ASSERT(inside);
  }
  free(p);
  mesh_destroy(m);
}

TEST(orbiting_about_the_point_under_the_cursor_keeps_it_at_its_pixel) {
  mesh *m = NULL;
  float *p = head_positions(&m);
  vw_camera c = {.fov = glm_rad(40.0f), .up = 'y'};
  vw_camera_frame(&c, m->bbox_min, m->bbox_max);
  float hit[3], px = 0.5f * W + 40, py = 0.45f * H;
  uint32_t vertex;
  vec3 o, d;
  vw_camera_ray(&c, W, H, px, py, o, d);
  ASSERT(vw_edit_pick(p, m->triangles, m->triangle_count, o, d, hit, &vertex));
  for (int i = 0; i < 20; i++) {
    vw_camera_orbit_about(&c, hit, 0.05f, i < 10 ? 0.03f : -0.04f);
    float qx, qy;
    ASSERT(vw_camera_project(&c, W, H, hit, &qx, &qy));
    ASSERT_NEAR(qx, px, 0.5);
    ASSERT_NEAR(qy, py, 0.5);
  }
  ASSERT(fabsf(c.yaw - 1.0f) < 1e-4f); /* it did turn: 20 × 0.05 rad */
  free(p);
  mesh_destroy(m);
}

TEST(pan_moves_the_view_by_the_pixels_dragged_not_the_shape) {
  mesh *m = NULL;
  float *p = head_positions(&m);
  vw_camera c = {.fov = glm_rad(40.0f), .up = 'z'};
  vw_camera_frame(&c, m->bbox_min, m->bbox_max);
  vw_camera_view(&c, 'r');
  vec3 eye0, eye1;
  vw_camera_eye(&c, eye0);
  float x0, y0, x1, y1, dir0[3], dir1[3];
  ASSERT(vw_camera_project(&c, W, H, c.target, &x0, &y0));
  float before_target[3] = {c.target[0], c.target[1], c.target[2]};
  for (int k = 0; k < 3; k++) dir0[k] = c.target[k] - eye0[k];
  vw_camera_pan(&c, W, H, 40.0f, -25.0f);
  vw_camera_eye(&c, eye1);
  for (int k = 0; k < 3; k++) dir1[k] = c.target[k] - eye1[k];
  /* The point that was at the centre (the old target, at the target's depth) follows the drag. */
  ASSERT(vw_camera_project(&c, W, H, before_target, &x1, &y1));
  ASSERT_NEAR(x1 - x0, 40.0, 0.05);
  ASSERT_NEAR(y1 - y0, -25.0, 0.05);
  for (int k = 0; k < 3; k++) ASSERT_NEAR(dir1[k], dir0[k], 1e-5); /* the same direction and distance */
  ASSERT(dist3f(eye0, eye1) > 0);                                    /* the eye moved */
  ASSERT(memcmp(p, m->positions, sizeof(float) * 3 * m->vertex_count) == 0); /* the shape did not */
  free(p);
  mesh_destroy(m);
}
