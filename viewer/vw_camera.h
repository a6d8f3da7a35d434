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
/* Puts the camera at `eye` looking at `target` with vertical field of view `fov` (another
 * participant's camera, to follow it): vw_camera_eye gives `eye` back within rounding. The up
 * axis stays the camera's; an eye straight above or below the target keeps the current yaw. */
void vw_camera_look(vw_camera *c, const float eye[3], const float target[3], float fov);

#endif
