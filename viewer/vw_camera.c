/*
 * vw_camera.c — the orbit camera (see vw_camera.h).
 */
#include "vw_camera.h"

#include <math.h>
#include <string.h>

float vw_camera_near(const vw_camera *c) { return c->dist * 0.01f; }

void vw_camera_frame(vw_camera *c, const float lo[3], const float hi[3]) {
  float r = 0;
  for (int k = 0; k < 3; k++) {
    c->target[k] = 0.5f * (lo[k] + hi[k]);
    r += 0.25f * (hi[k] - lo[k]) * (hi[k] - lo[k]);
  }
  r = sqrtf(r);
  if (c->fov <= 0) c->fov = glm_rad(40.0f);
  c->dist = (r > 0 ? r : 1.0f) / sinf(0.5f * c->fov) * 1.05f;
}

/* The world's up direction on screen: the session's up axis. */
static void world_up(const vw_camera *c, vec3 up) {
  up[0] = 0, up[1] = c->up == 'z' ? 0.0f : 1.0f, up[2] = c->up == 'z' ? 1.0f : 0.0f;
}

void vw_camera_eye(const vw_camera *c, vec3 eye) {
  float cp = cosf(c->pitch);
  if (c->up == 'z') {
    eye[0] = c->target[0] + c->dist * cp * sinf(c->yaw);
    eye[1] = c->target[1] - c->dist * cp * cosf(c->yaw);
    eye[2] = c->target[2] + c->dist * sinf(c->pitch);
    return;
  }
  eye[0] = c->target[0] + c->dist * cp * sinf(c->yaw);
  eye[1] = c->target[1] + c->dist * sinf(c->pitch);
  eye[2] = c->target[2] + c->dist * cp * cosf(c->yaw);
}

void vw_camera_matrices(const vw_camera *c, int width, int height, mat4 view, mat4 proj) {
  vec3 eye, up, target;
  world_up(c, up);
  vw_camera_eye(c, eye);
  glm_vec3_copy((float *)c->target, target);
  glm_lookat(eye, target, up, view);
  float aspect = height > 0 ? (float)width / (float)height : 1.0f;
  float nearz = vw_camera_near(c), farz = c->dist * 10.0f;
  glm_perspective(c->fov, aspect, nearz, farz, proj);
}

int vw_camera_project(const vw_camera *c, int width, int height, const float p[3], float *px, float *py) {
  mat4 view, proj, vp;
  vw_camera_matrices(c, width, height, view, proj);
  glm_mat4_mul(proj, view, vp);
  vec4 in = {p[0], p[1], p[2], 1.0f}, clip;
  glm_mat4_mulv(vp, in, clip);
  if (clip[3] <= 0) return 0;
  float nx = clip[0] / clip[3], ny = clip[1] / clip[3];
  *px = (nx * 0.5f + 0.5f) * (float)width;
  *py = (1.0f - (ny * 0.5f + 0.5f)) * (float)height;
  return 1;
}

void vw_camera_ray(const vw_camera *c, int width, int height, float px, float py, vec3 origin, vec3 dir) {
  mat4 view, proj, vp, inv;
  vw_camera_matrices(c, width, height, view, proj);
  glm_mat4_mul(proj, view, vp);
  glm_mat4_inv(vp, inv);
  float nx = 2.0f * px / (float)width - 1.0f, ny = 1.0f - 2.0f * py / (float)height;
  vec4 a = {nx, ny, -1.0f, 1.0f}, b = {nx, ny, 1.0f, 1.0f}, wa, wb;
  glm_mat4_mulv(inv, a, wa);
  glm_mat4_mulv(inv, b, wb);
  for (int k = 0; k < 3; k++) {
    origin[k] = wa[k] / wa[3];
    dir[k] = wb[k] / wb[3] - origin[k];
  }
  glm_vec3_normalize(dir);
}

#define PITCH_LIMIT_DEG 89.0f /* the orbit's, and the top and bottom views' */

int vw_camera_view(vw_camera *c, char view) {
  /* yaw turns about the up axis from the front; pitch raises the eye toward it (vw_camera_eye) */
  static const struct { char view; float yaw_deg, pitch_deg; } views[] = {
      {'f', 0, 0}, {'b', 180, 0}, {'r', 90, 0}, {'l', -90, 0}, {'t', 0, PITCH_LIMIT_DEG}, {'u', 0, -PITCH_LIMIT_DEG},
  };
  for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
    if (views[i].view == view) {
      c->yaw = glm_rad(views[i].yaw_deg);
      c->pitch = glm_rad(views[i].pitch_deg);
      return 0;
    }
  return -1;
}

char vw_camera_view_named(const char *name) {
  static const char *const names[] = {"front", "back", "right", "left", "top", "bottom"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(name, names[i]) == 0) return "fbrltu"[i];
  return 0;
}

void vw_camera_orbit(vw_camera *c, float dyaw, float dpitch) {
  c->yaw += dyaw;
  c->pitch += dpitch;
  const float lim = glm_rad(PITCH_LIMIT_DEG);
  if (c->pitch > lim) c->pitch = lim;
  if (c->pitch < -lim) c->pitch = -lim;
}

void vw_camera_pan(vw_camera *c, int width, int height, float dx_px, float dy_px) {
  (void)width;
  /* One pixel at the target's depth spans 2·dist·tan(fov/2)/height world units. */
  float s = 2.0f * c->dist * tanf(0.5f * c->fov) / (float)(height > 0 ? height : 1);
  vec3 eye, fwd, right, up, wup;
  world_up(c, wup);
  vw_camera_eye(c, eye);
  glm_vec3_sub(c->target, eye, fwd);
  glm_vec3_normalize(fwd);
  glm_vec3_cross(fwd, wup, right);
  glm_vec3_normalize(right);
  glm_vec3_cross(right, fwd, up);
  for (int k = 0; k < 3; k++) c->target[k] += (-dx_px * right[k] + dy_px * up[k]) * s;
}

void vw_camera_zoom(vw_camera *c, float factor) {
  c->dist *= factor;
  if (c->dist < 1e-6f) c->dist = 1e-6f;
}

void vw_camera_look(vw_camera *c, const float eye[3], const float target[3], float fov) {
  float d[3] = {eye[0] - target[0], eye[1] - target[1], eye[2] - target[2]};
  float dist = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (!(dist > 0)) return;
  float along_up = c->up == 'z' ? d[2] : d[1];
  float across = c->up == 'z' ? -d[1] : d[2]; /* the yaw 0 direction (see vw_camera_eye) */
  c->pitch = asinf(fmaxf(-1.0f, fminf(1.0f, along_up / dist)));
  if (fabsf(d[0]) + fabsf(across) > 1e-12f * dist) c->yaw = atan2f(d[0], across);
  c->dist = dist;
  glm_vec3_copy((float *)target, c->target);
  c->fov = fov;
}

/* The camera's forward, right and up directions. */
static void basis(const vw_camera *c, vec3 fwd, vec3 right, vec3 up) {
  vec3 eye, wup;
  world_up(c, wup);
  vw_camera_eye(c, eye);
  glm_vec3_sub((float *)c->target, eye, fwd);
  glm_vec3_normalize(fwd);
  glm_vec3_cross(fwd, wup, right);
  glm_vec3_normalize(right);
  glm_vec3_cross(right, fwd, up);
}

void vw_camera_orbit_about(vw_camera *c, const float pivot[3], float dyaw, float dpitch) {
  vec3 f0, r0, u0, f1, r1, u1, eye;
  basis(c, f0, r0, u0);
  vw_camera_eye(c, eye);
  /* The eye in the camera's frame about the pivot, before and after the turn. */
  float e[3] = {eye[0] - pivot[0], eye[1] - pivot[1], eye[2] - pivot[2]};
  float ef = glm_vec3_dot(e, f0), er = glm_vec3_dot(e, r0), eu = glm_vec3_dot(e, u0);
  vw_camera_orbit(c, dyaw, dpitch);
  basis(c, f1, r1, u1);
  for (int k = 0; k < 3; k++) c->target[k] = pivot[k] + ef * f1[k] + er * r1[k] + eu * u1[k] + c->dist * f1[k];
}

/* Whether every vertex is farther from the eye than `least` and than 1.5 times the near
 * plane's corners. */
static int clear_of(const vw_camera *c, int width, int height, const float *p, uint32_t n, float least) {
  vec3 eye;
  vw_camera_eye(c, eye);
  float t = tanf(0.5f * c->fov), aspect = height > 0 ? (float)width / (float)height : 1.0f;
  float corner = vw_camera_near(c) * sqrtf(1.0f + t * t * (1.0f + aspect * aspect)), lim = fmaxf(2.25f * corner * corner, least * least);
  for (uint32_t v = 0; v < n; v++) {
    const float *q = p + 3 * (size_t)v;
    float dx = q[0] - eye[0], dy = q[1] - eye[1], dz = q[2] - eye[2];
    if (dx * dx + dy * dy + dz * dz < lim) return 0;
  }
  return 1;
}

/* Scales the eye and the target about `at` by f. */
static void scale_about(vw_camera *c, const float at[3], float f) {
  for (int k = 0; k < 3; k++) c->target[k] = at[k] + f * (c->target[k] - at[k]);
  c->dist *= f;
  if (c->dist < 1e-6f) c->dist = 1e-6f;
}

float vw_camera_zoom_at(vw_camera *c, int width, int height, float factor, const float at[3],
                        const float *positions, uint32_t n, float min_clearance) {
  if (!(factor > 0)) return 1.0f;
  float centre[3] = {c->target[0], c->target[1], c->target[2]};
  const float *o = at ? at : centre;
  vw_camera before = *c;
  scale_about(c, o, factor);
  if (factor >= 1.0f || !positions || clear_of(c, width, height, positions, n, min_clearance)) return factor;
  /* Too close: the largest step toward `at` that keeps clear (bisection on the factor). */
  float lo = factor, hi = 1.0f;
  for (int i = 0; i < 12; i++) {
    float mid = 0.5f * (lo + hi);
    *c = before;
    scale_about(c, o, mid);
    if (clear_of(c, width, height, positions, n, min_clearance)) hi = mid;
    else lo = mid;
  }
  *c = before;
  if (hi >= 1.0f) return 1.0f;
  scale_about(c, o, hi);
  return hi;
}

void vw_camera_frame_sphere(vw_camera *c, const float center[3], float radius) {
  if (c->fov <= 0) c->fov = glm_rad(40.0f);
  glm_vec3_copy((float *)center, c->target);
  c->dist = (radius > 0 ? radius : 1.0f) / sinf(0.5f * c->fov) * 1.05f;
}

float vw_camera_pixel_size(const vw_camera *c, int height, const float at[3]) {
  vec3 eye;
  vw_camera_eye(c, eye);
  float depth = at ? glm_vec3_distance(eye, (float *)at) : c->dist;
  return 2.0f * depth * tanf(0.5f * c->fov) / (float)(height > 0 ? height : 1);
}
