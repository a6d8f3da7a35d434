/*
 * vw_camera.h — the orbit camera: yaw and pitch around a target point at a distance.
 *
 * Pure math (cglm), shared by the renderer, picking and the screenshot tests, so a test can
 * project a vertex exactly where the viewer draws it.
 *
 * DOES NOT touch GL or input.
 */
#ifndef DEFORMD_VW_CAMERA_H
#define DEFORMD_VW_CAMERA_H

#include <cglm/cglm.h>
#include <stdint.h>

typedef struct vw_camera {
  float yaw, pitch;  /* radians; yaw 0 looks along -Z from +Z (the demo head faces +Z) */
  float dist;        /* from the target */
  vec3 target;
  float fov;         /* vertical, radians */
  char up;           /* the session's up axis (WELCOME's up option): 'z', or 'y' (0 counts as 'y').
                      * The camera orbits around it and keeps it up on screen; with 'z', yaw 0
                      * looks along +Y from -Y (Blender's front view) */
} vw_camera;

/* Frames the box [lo, hi]: target at its centre, distance so that its bounding sphere fits. */
void vw_camera_frame(vw_camera *c, const float lo[3], const float hi[3]);
void vw_camera_eye(const vw_camera *c, vec3 eye);
/* View and projection for a viewport of width × height pixels; near/far from the distance. */
void vw_camera_matrices(const vw_camera *c, int width, int height, mat4 view, mat4 proj);
/* Pixel coordinates (x right, y DOWN from the top-left, as in a PNG) of point p. Returns 0
 * when the point is behind the camera. */
int vw_camera_project(const vw_camera *c, int width, int height, const float p[3], float *px, float *py);
/* The ray through pixel (px, py) (y down): origin and unit direction. */
void vw_camera_ray(const vw_camera *c, int width, int height, float px, float py, vec3 origin, vec3 dir);
/* Blender's numpad views, about the session's up axis (c->up): 'f' front (keypad 1), 'b' back
 * (Ctrl+1), 'r' right (3), 'l' left (Ctrl+3), 't' top (7), 'u' under, the bottom (Ctrl+7). Sets
 * yaw and pitch only (target and distance stay). Front looks from +Z at a Y-up mesh and from -Y at
 * a Z-up one; right from +X; top down the up axis with the front at the bottom of the screen (the
 * pitch stops at the orbit's 89°, so the way up on screen stays defined). Returns 0, or -1 (and
 * changes nothing) for another letter. */
int vw_camera_view(vw_camera *c, char view);
/* "front", "back", "right", "left", "top", "bottom": the letter vw_camera_view takes, or 0. */
char vw_camera_view_named(const char *name);
/* Orbit, pan (in pixels of the viewport) and zoom (factor). */
void vw_camera_orbit(vw_camera *c, float dyaw, float dpitch);
void vw_camera_pan(vw_camera *c, int width, int height, float dx_px, float dy_px);
void vw_camera_zoom(vw_camera *c, float factor);

/* Navigation as in Blender (issue 26). */
/* The near plane's distance from the eye (vw_camera_matrices). */
float vw_camera_near(const vw_camera *c);
/* Orbits as vw_camera_orbit does, about `pivot` (the point under the cursor when the drag
 * began) instead of the target: eye and target turn about it, so it stays where it is on
 * screen. */
void vw_camera_orbit_about(vw_camera *c, const float pivot[3], float dyaw, float dpitch);
/* Zooms by `factor` (< 1: closer) toward `at` (the point under the cursor; NULL: the target):
 * eye and target move along their lines to `at`, which stays at its pixel. Closer, the zoom is
 * clamped so that no vertex of `positions` (n, 3 floats each; NULL: no clamp) comes within
 * `min_clearance` of the eye, nor within 1.5 times the distance of the near plane's corners, so
 * the near plane never cuts into the mesh. Returns the factor applied (1: none, the camera is
 * as close as it may be). */
float vw_camera_zoom_at(vw_camera *c, int width, int height, float factor, const float at[3],
                        const float *positions, uint32_t n, float min_clearance);
/* World units a pixel spans at the depth of `at` (NULL: the target), viewport `height` high. */
float vw_camera_pixel_size(const vw_camera *c, int height, const float at[3]);
/* Frames the sphere at `center` of `radius`, keeping the view's direction (numpad period:
 * the region under the cursor). */
void vw_camera_frame_sphere(vw_camera *c, const float center[3], float radius);
/* Puts the camera at `eye` looking at `target` with vertical field of view `fov` (another
 * participant's camera, to follow it): vw_camera_eye gives `eye` back within rounding. The up
 * axis stays the camera's; an eye straight above or below the target keeps the current yaw. */
void vw_camera_look(vw_camera *c, const float eye[3], const float target[3], float fov);

#endif
