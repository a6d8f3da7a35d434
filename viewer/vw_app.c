/*
 * vw_app.c — deform-view's loop, input and sculpting UI (see vw_app.h).
 *
 * The keys are vw_hud.c's table (H or ? shows it; --help prints it). The connection runs on
 * its own thread (vw_pump.c): every use of a->net here is between vw_pump_lock and
 * vw_pump_unlock. The slider panel's rows, filter and hit tests are vw_panel.c's, the status
 * line's words vw_hud.c's, picking vw_edit.c's: all tested without a window. Undo and redo
 * are the server's per-author history (vw_net_history: EDIT UNDO/REDO).
 *
 * A brush stroke sends the points of its path as the pointer moves, once per frame, the first
 * batch as a new stroke and the others continuing it (PROTO_BRUSH_CONTINUE): the server places
 * the dabs, so the result is the path's, whatever the frame rate or the rate of mouse events.
 *
 * DOES NOT decode frames, morph, compute normals, or solve.
 */
#include "vw_app.h"

#include <epoxy/gl.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <math.h>
#include <stb/stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_brush.h"
#include "vw_camera.h"
#include "vw_context.h"
#include "vw_edit.h"
#include "vw_gl.h"
#include "vw_gpu.h"
#include "vw_hud.h"
#include "vw_net.h"
#include "vw_panel.h"
#include "vw_panel_view.h"
#include "vw_pick.h"
#include "vw_presence_view.h"
#include "vw_pump.h"
#include "vw_render.h"
#include "proto_caps.h"
#include "vw_mask.h"
#include "vw_texshow.h"
#include "vw_texture.h"

typedef enum { MODE_VIEW = 0, MODE_DRAG = 1, MODE_BRUSH = 2, MODE_MASK = 3 } app_mode;

#define BRUSH_GRAB VW_BRUSH_GRAB
#define PATH_MAX_POINTS 512
#define LAZY_PX 24.0 /* the stabiliser's string (S) */

/* What F / Shift+F adjust while the pointer moves (vw_brush_adjust). */
typedef enum { ADJUST_NONE = 0, ADJUST_RADIUS, ADJUST_STRENGTH, ADJUST_REGION, ADJUST_HANDLE } adjust_what;
static const char *const gesture_modes[3] = {"ARAP", "Laplacian", "biharmonic"};
static const uint8_t gesture_mode_ids[3] = {1, 0, 2}; /* proto_gesture_begin.mode */

typedef struct override {
  char name[256];
  float value;
} override;

typedef struct app {
  const vw_app_opts *o;
  vw_context ctx;
  vw_net net;
  vw_pump pump;
  vw_gpu *gpu;
  vw_render *render;
  vw_pick *gpick;          /* picking on the GPU (vw_pick.c), or NULL: on the CPU (vw_edit.c) */
  unsigned fb_id;          /* the framebuffer drawn into (0: the window's) */
  vw_camera cam;
  int framed;
  char view;               /* a view asked for with the next framing (vw_camera_view's letter), or 0 */
  double diag;
  float *weights;          /* replica weights with local overrides applied */
  uint32_t nweights;       /* ... for this many targets (the replica may have more: its thread
                            * applies frames the loop has not taken yet) */
  override *overrides;
  int noverrides;
  /* input */
  app_mode mode;
  int wireframe, sliders, help, shading;
  double mx, my;
  int lmb, rmb, mmb, shift, ctrl;
  int orbiting, panning;   /* a middle (or, in view mode, left) drag: orbit about pivot, or pan */
  float pivot[3];
  adjust_what adjusting;   /* F / Shift+F: the value follows the pointer until a click or Enter */
  vw_brush_adjust adjust;
  int lazy;                /* S: the stroke stabiliser */
  double lazy_x, lazy_y;
  int gesture_mode;        /* index into gesture_modes (Q cycles) */
  float handle_r, region_r; /* the gesture's handle and region radius, fractions of the diagonal */
  /* drag gesture */
  int dragging;
  uint32_t gesture, next_gesture;
  float grab[3], plane_n[3];
  /* brush */
  int brushing, brush_kind, front_only, autosmooth;
  int mirror;              /* the symmetry plane, PROTO_BRUSH_AXIS_*: 0 none, 1 x, 2 y, 3 z */
  int stroke_kind;         /* the brush of the stroke under way (Shift: smooth) and its strength */
  float stroke_strength;
  int stroke_sent;         /* a batch of this stroke went out: the next ones continue it */
  float brush_radius, brush_strength; /* radius as a fraction of the diagonal */
  float view_dir[3];       /* where the viewer looked when the stroke began */
  int have_hover;
  float hover[3], last_point[3];
  proto_brush_sample path[PATH_MAX_POINTS];
  uint32_t npath;
  /* the author's mask: drawn darker; M paints it (Ctrl erases), sent whole at release */
  vw_mask mask;
  int erasing;
  vw_textures textures;    /* the session's materials and images (capability "texture") */
  vw_texshow texshow;      /* the texture clips shown on it (capability "texclip") */
  /* sliders */
  vw_panel panel;
  int panel_dirty;
  int slider_target;       /* target being dragged, -1 */
  int pending_weight;
  float pending_value;
  /* CPU copy of the morphed positions for picking (read back on demand) */
  float *cpu_pos;
  uint64_t cpu_pos_at;
  vw_hud hud;
  /* presence: the surface under the cursor (any mode), the notices already flashed */
  int have_cursor;
  float cursor[3], cursor_n[3];
  uint32_t notices_seen;
  /* stats */
  double fps, fps_t0;
  int fps_frames;
} app;

/* ---- picking -------------------------------------------------------------------------------- */

static const float *current_positions(app *a) {
  uint32_t n = vw_gpu_vertex_count(a->gpu);
  if (!a->cpu_pos || a->cpu_pos_at != vw_gpu_updates(a->gpu)) {
    float *p = realloc(a->cpu_pos, sizeof(float) * 3 * ((size_t)n + 1));
    if (!p) return NULL;
    a->cpu_pos = p;
    if (vw_gpu_read_positions(a->gpu, p) != 0) return NULL;
    a->cpu_pos_at = vw_gpu_updates(a->gpu);
  }
  return a->cpu_pos;
}

/* Whether the replica's mesh is the one on the GPU: not when the connection's thread took a
 * new SNAPSHOT the loop has not uploaded yet (the next frame does). Needs the lock. */
static int in_sync(app *a) { return a->gpu && a->net.replica.have_snapshot && !vw_pump_snapshot_waiting(&a->pump); }

/* The nearest triangle hit by the ray through the cursor, and its corner nearest the hit.
 * Needs the pump's lock (the replica's triangles, indexing the GPU's positions). */
static int pick_at(app *a, double x, double y, float hit[3], uint32_t *vertex) {
  if (!in_sync(a)) return 0;
  char err[256];
  uint32_t tri; /* on the GPU: one pixel of IDs drawn and read back; the CPU's ray if GL fails */
  int rc = a->gpick ? vw_pick_at(a->gpick, a->gpu, &a->cam, a->ctx.width, a->ctx.height, (float)x, (float)y,
                                 a->net.replica.mesh->triangles, a->fb_id, hit, &tri, vertex, err, sizeof(err)) : -1;
  if (rc >= 0) return rc;
  const float *p = current_positions(a);
  if (!p) return 0;
  vec3 o, d;
  vw_camera_ray(&a->cam, a->ctx.width, a->ctx.height, (float)x, (float)y, o, d);
  const mesh *m = a->net.replica.mesh;
  return vw_edit_pick(p, m->triangles, m->triangle_count, o, d, hit, vertex);
}

/* The pick under the stroke's point: the stabilised one while a stroke is lazy. */
static int pick(app *a, float hit[3], uint32_t *vertex) {
  int lazy = a->lazy && a->brushing;
  return pick_at(a, lazy ? a->lazy_x : a->mx, lazy ? a->lazy_y : a->my, hit, vertex);
}

/* Where the cursor ray meets the plane through the grab point facing the camera. */
static int on_drag_plane(app *a, float out[3]) {
  vec3 o, d;
  vw_camera_ray(&a->cam, a->ctx.width, a->ctx.height, (float)a->mx, (float)a->my, o, d);
  float den = glm_vec3_dot(d, a->plane_n);
  if (fabsf(den) < 1e-9f) return 0;
  float diff[3] = {a->grab[0] - o[0], a->grab[1] - o[1], a->grab[2] - o[2]};
  float t = glm_vec3_dot(diff, a->plane_n) / den;
  for (int k = 0; k < 3; k++) out[k] = o[k] + t * d[k];
  return 1;
}

static void face_camera_plane(app *a, const float p[3]) {
  memcpy(a->grab, p, sizeof(a->grab));
  vec3 eye;
  vw_camera_eye(&a->cam, eye);
  glm_vec3_sub(eye, a->grab, a->plane_n);
  glm_vec3_normalize(a->plane_n);
}

/* Whether an edit can go out now; if not, says why on the overlay. Needs the lock. */
static int may_edit(app *a) {
  const char *why = vw_hud_why_no_edit(&a->net);
  if (why) vw_hud_flash(&a->hud, vw_net_now_ms(), "%s", why);
  return why == NULL;
}

/* ---- brush strokes --------------------------------------------------------------------------- */

/* A mask stroke goes out whole when the button is released (one step of the author's mask, one
 * undo), unlike a brush's pieces: painting a mask moves nothing to watch meanwhile. Needs the lock. */
static void send_mask_path(app *a) {
  if (a->npath && vw_mask_stroke(&a->net, a->path, a->npath, a->erasing) == 0) {
    const char *why = vw_hud_why_no_edit(&a->net);
    vw_hud_flash(&a->hud, vw_net_now_ms(), "mask stroke not sent: %s", why ? why : a->net.last_error);
  }
  a->npath = 0;
}

/* Adds the point under the cursor to the stroke's path: on the surface, or for grab on the
 * plane through the stroke's start facing the camera (the surface under grab moves away). */
static void add_path_point(app *a) {
  float p[3];
  uint32_t vertex;
  if (a->stroke_kind == BRUSH_GRAB && a->mode == MODE_BRUSH ? !on_drag_plane(a, p) : !pick(a, p, &vertex)) return;
  if (a->npath == PATH_MAX_POINTS && a->mode == MODE_MASK) send_mask_path(a); /* a long stroke: in steps */
  if (a->npath == PATH_MAX_POINTS) return; /* sent each frame: only a very slow frame fills it */
  float dx = p[0] - a->last_point[0], dy = p[1] - a->last_point[1], dz = p[2] - a->last_point[2];
  if (a->npath + a->stroke_sent > 0 && dx * dx + dy * dy + dz * dz < 1e-14f * (float)(a->diag * a->diag)) return;
  proto_brush_sample *s = &a->path[a->npath++];
  memcpy(s->center, p, sizeof(p));
  memcpy(s->direction, a->view_dir, sizeof(s->direction)); /* the view, for front faces only */
  s->radius = (float)(a->brush_radius * a->diag);
  s->strength = a->stroke_strength;
  memcpy(a->last_point, p, sizeof(p));
}

/* Sends the points gathered since the last batch. Needs the lock. */
static void send_path(app *a) {
  if (a->npath == 0) return;
  uint8_t flags = (uint8_t)((a->front_only ? PROTO_BRUSH_FRONT_ONLY : 0) |
                            (a->stroke_sent ? PROTO_BRUSH_CONTINUE : 0) |
                            (a->autosmooth ? 8 << PROTO_BRUSH_AUTOSMOOTH_SHIFT : 0));
  if (vw_net_brush(&a->net, vw_brush_ids[a->stroke_kind], 0, flags, (uint8_t)a->mirror, a->npath, a->path) == 0) {
    const char *why = vw_hud_why_no_edit(&a->net);
    vw_hud_flash(&a->hud, vw_net_now_ms(), "stroke not sent: %s", why ? why : a->net.last_error);
  }
  a->stroke_sent = 1;
  a->npath = 0;
}

/* ---- GLFW callbacks ---------------------------------------------------------------------------- */

static app *app_of(GLFWwindow *w) { return glfwGetWindowUserPointer(w); }

static void set_mode(app *a, app_mode m) {
  /* A read-only viewer stays in view mode and says why, rather than dropping edits silently. */
  if (m != MODE_VIEW && !may_edit(a)) return;
  a->mode = m;
}

static void on_char(GLFWwindow *w, unsigned int codepoint) {
  app *a = app_of(w);
  if (a->panel.editing && vw_panel_edit_char(&a->panel, codepoint)) a->panel_dirty = 1;
}

static void filter_key(app *a, int key) {
  if (key == GLFW_KEY_BACKSPACE && vw_panel_edit_backspace(&a->panel)) a->panel_dirty = 1;
  if (key == GLFW_KEY_ENTER || key == GLFW_KEY_KP_ENTER || key == GLFW_KEY_ESCAPE) vw_panel_edit_end(&a->panel);
}

/* F (radius) and Shift+F (strength) in the brush and mask modes, and the gesture's region (F)
 * and handle (Shift+F) in drag mode: the value follows the pointer until a click or Enter;
 * Esc or a right click put it back. */
static void begin_adjust(app *a) {
  /* a pixel at the depth of the point under the cursor, as a fraction of the diagonal */
  double f = vw_camera_pixel_size(&a->cam, a->ctx.height, a->have_hover ? a->hover : NULL) / (a->diag > 0 ? a->diag : 1);
  if (a->mode == MODE_BRUSH && a->shift) {
    a->adjusting = ADJUST_STRENGTH;
    vw_brush_adjust_begin(&a->adjust, a->mx, a->my, a->brush_strength, 1.0 / 200.0, 0.01f, 1.0f);
  } else if (a->mode == MODE_BRUSH || a->mode == MODE_MASK) {
    a->adjusting = ADJUST_RADIUS;
    vw_brush_adjust_begin(&a->adjust, a->mx, a->my, a->brush_radius, f, 0.002f, 0.5f);
  } else if (a->mode == MODE_DRAG) {
    a->adjusting = a->shift ? ADJUST_HANDLE : ADJUST_REGION;
    vw_brush_adjust_begin(&a->adjust, a->mx, a->my, a->shift ? a->handle_r : a->region_r, f, 0.002f, 0.5f);
  } else {
    vw_hud_flash(&a->hud, vw_net_now_ms(), "F sets the brush radius (brush mode) or the region (drag mode); Home frames the mesh");
  }
}

static float *adjusted(app *a) {
  float *const v[5] = {NULL, &a->brush_radius, &a->brush_strength, &a->region_r, &a->handle_r};
  return v[a->adjusting];
}

static void end_adjust(app *a, int keep) {
  float *v = adjusted(a);
  if (v && !keep) *v = a->adjust.start;
  a->adjusting = ADJUST_NONE;
}

/* Numpad period: frames the region under the cursor (the brush's radius twice over in the brush
 * and mask modes, the gesture's region otherwise). Needs the lock. */
static void frame_picked(app *a) {
  float hit[3];
  uint32_t vertex;
  if (!pick_at(a, a->mx, a->my, hit, &vertex)) {
    vw_hud_flash(&a->hud, vw_net_now_ms(), "nothing under the cursor to frame (Home frames the whole mesh)");
    return;
  }
  float r = a->mode == MODE_BRUSH || a->mode == MODE_MASK ? 2.0f * a->brush_radius : a->region_r;
  vw_camera_frame_sphere(&a->cam, hit, (float)(r * a->diag));
  a->net.presence.following = 0;
}

static void on_key(GLFWwindow *w, int key, int scancode, int action, int mods) {
  (void)scancode;
  app *a = app_of(w);
  a->shift = (mods & GLFW_MOD_SHIFT) != 0;
  a->ctrl = (mods & GLFW_MOD_CONTROL) != 0;
  if (action != GLFW_PRESS && action != GLFW_REPEAT) return;
  if (a->panel.editing) { /* typing a filter: letters are text, not commands */
    filter_key(a, key);
    return;
  }
  if (a->adjusting) { /* F / Shift+F under way: Enter keeps, Esc puts back, other keys wait */
    if (key == GLFW_KEY_ENTER || key == GLFW_KEY_KP_ENTER || key == GLFW_KEY_ESCAPE) end_adjust(a, key != GLFW_KEY_ESCAPE);
    return;
  }
  vw_pump_lock(&a->pump);
  switch (key) {
    case GLFW_KEY_ESCAPE:
      if (a->help) a->help = 0;
      else glfwSetWindowShouldClose(w, 1);
      break;
    case GLFW_KEY_H: a->help = !a->help; break;
    case GLFW_KEY_SLASH:
      if (a->shift) { /* '?' */
        a->help = !a->help;
      } else {
        a->sliders = 1;
        vw_panel_edit_begin(&a->panel, '/');
      }
      break;
    case GLFW_KEY_W: a->wireframe = !a->wireframe; break;
    case GLFW_KEY_C: /* lit, clay, red wax, skin (vw_render.h) */
      vw_render_set_shading(a->render, a->shading = (a->shading + 1) % VW_SHADING_COUNT);
      vw_hud_flash(&a->hud, vw_net_now_ms(), "shading: %s", vw_render_shading_name(a->shading));
      break;
    case GLFW_KEY_F: begin_adjust(a); break;
    case GLFW_KEY_HOME: a->framed = 0; break;
    case GLFW_KEY_KP_DECIMAL: frame_picked(a); break;
    case GLFW_KEY_S:
      a->lazy = !a->lazy;
      vw_hud_flash(&a->hud, vw_net_now_ms(), "stroke stabiliser %s (the stroke trails the pointer by %.0f pixels)",
                   a->lazy ? "on" : "off", LAZY_PX);
      break;
    case GLFW_KEY_Q:
      a->gesture_mode = (a->gesture_mode + 1) % 3;
      vw_hud_flash(&a->hud, vw_net_now_ms(), "gestures: %s", gesture_modes[a->gesture_mode]);
      break;
    /* Blender's numpad views about the session's up axis; Ctrl for the opposite side. They turn
     * the camera only: the zoom and the point looked at stay, as in Blender. */
    case GLFW_KEY_KP_1: vw_camera_view(&a->cam, a->ctrl ? 'b' : 'f'); break;
    case GLFW_KEY_KP_3: vw_camera_view(&a->cam, a->ctrl ? 'l' : 'r'); break;
    case GLFW_KEY_KP_7: vw_camera_view(&a->cam, a->ctrl ? 'u' : 't'); break;
    case GLFW_KEY_T: a->sliders = !a->sliders; break;
    case GLFW_KEY_V: set_mode(a, MODE_VIEW); break;
    case GLFW_KEY_G: set_mode(a, MODE_DRAG); break;
    case GLFW_KEY_B: set_mode(a, MODE_BRUSH); break;
    case GLFW_KEY_X: case GLFW_KEY_Y: case GLFW_KEY_Z: /* symmetry (one plane); Ctrl+Y, Z: the history */
      if (!a->ctrl) {
        int axis = key == GLFW_KEY_X ? PROTO_BRUSH_AXIS_X : key == GLFW_KEY_Y ? PROTO_BRUSH_AXIS_Y : PROTO_BRUSH_AXIS_Z;
        a->mirror = a->mirror == axis ? 0 : axis;
      } else if (key != GLFW_KEY_X && may_edit(a) && vw_net_history(&a->net, key == GLFW_KEY_Y || a->shift))
        vw_hud_flash(&a->hud, vw_net_now_ms(), key == GLFW_KEY_Z && !a->shift ? "undo" : "redo");
      break;
    case GLFW_KEY_M: /* Blender's mask keys: M the mask brush, Alt+M clear */
      if (!(mods & GLFW_MOD_ALT)) set_mode(a, MODE_MASK);
      else if (may_edit(a) && vw_mask_clear(&a->net)) vw_hud_flash(&a->hud, vw_net_now_ms(), "mask cleared");
      break;
    case GLFW_KEY_I:
      if (a->ctrl && may_edit(a) && vw_mask_invert(&a->net)) vw_hud_flash(&a->hud, vw_net_now_ms(), "mask inverted");
      break;
    case GLFW_KEY_A: a->autosmooth = !a->autosmooth; break;
    case GLFW_KEY_N: a->front_only = !a->front_only; break;
    case GLFW_KEY_1: case GLFW_KEY_2: case GLFW_KEY_3: case GLFW_KEY_4:
    case GLFW_KEY_5: case GLFW_KEY_6: case GLFW_KEY_7: case GLFW_KEY_8:
      a->brush_kind = key - GLFW_KEY_1;
      set_mode(a, MODE_BRUSH);
      break;
    case GLFW_KEY_LEFT_BRACKET: a->brush_radius *= 0.8f; break;
    case GLFW_KEY_RIGHT_BRACKET: a->brush_radius *= 1.25f; break;
    case GLFW_KEY_MINUS: a->brush_strength *= 0.8f; break;
    case GLFW_KEY_EQUAL: a->brush_strength = fminf(1.0f, a->brush_strength * 1.25f); break;
    case GLFW_KEY_P: { /* follow another participant's camera (vw_presence.c) */
      uint32_t id = vw_presence_follow_next(&a->net.presence);
      const vw_participant *q = vw_presence_find(&a->net.presence, id);
      vw_hud_flash(&a->hud, vw_net_now_ms(), q ? "following %s's camera (P: next, orbit: stop)" : "%s",
                   q ? q->author : "following nobody");
      break;
    }
    default: break;
  }
  vw_pump_unlock(&a->pump);
}

/* A click on the slider panel: a group folds or unfolds, a slider starts a weight drag.
 * Returns 1 when the click was the panel's (including on its empty part). Needs the lock. */
/* Whether the slider panel is on screen: shown (T), and the session has targets (a mesh without
 * any gets no empty panel). Needs the lock. */
static int panel_shown(app *a) { return a->sliders && in_sync(a) && a->net.replica.mesh->target_count > 0; }

static int panel_click(app *a) {
  if (!panel_shown(a) || !vw_panel_contains(&a->panel, a->mx, a->my)) return 0;
  uint32_t index;
  double f;
  vw_panel_hit_kind k = vw_panel_hit(&a->panel, a->mx, a->my, &index, &f);
  if (k == VW_PANEL_HIT_GROUP) {
    vw_panel_toggle(&a->panel, index);
    a->panel_dirty = 1;
  } else if (k == VW_PANEL_HIT_TARGET && index < a->net.replica.mesh->target_count) {
    const client_target_meta *m = &a->net.replica.meta[index];
    if (m->driver_count) {
      vw_hud_flash(&a->hud, vw_net_now_ms(), "'%s' is a combination target: its weight follows its drivers'",
                   a->net.replica.mesh->targets[index].name);
    } else if (may_edit(a)) {
      a->slider_target = (int)index;
      a->pending_weight = 1, a->pending_value = (float)(m->min + f * (m->max - m->min));
    }
  }
  return 1;
}

static void press(app *a) {
  if (!may_edit(a)) return;
  float hit[3];
  uint32_t vertex;
  if (!pick(a, hit, &vertex)) {
    vw_hud_flash(&a->hud, vw_net_now_ms(), "nothing under the cursor: click on the mesh to %s",
                 a->mode == MODE_DRAG ? "grab a handle" : "start a stroke");
    return;
  }
  if (a->mode == MODE_DRAG) {
    proto_gesture_begin g;
    memset(&g, 0, sizeof(g));
    g.gesture = a->gesture = a->next_gesture++;
    g.mode = gesture_mode_ids[a->gesture_mode]; /* Q: ARAP, Laplacian, biharmonic */
    g.iterations = 1;
    g.pick = vertex;
    g.handle_radius = (float)(a->handle_r * a->diag);
    g.roi_radius = (float)(a->region_r * a->diag);
    if (vw_net_gesture_begin(&a->net, &g, NULL, NULL, NULL)) {
      a->dragging = 1;
      face_camera_plane(a, hit);
    }
    return;
  }
  /* A stroke: its path starts here. */
  vec3 o, d;
  vw_camera_ray(&a->cam, a->ctx.width, a->ctx.height, (float)a->mx, (float)a->my, o, d);
  memcpy(a->view_dir, d, sizeof(a->view_dir));
  face_camera_plane(a, hit);
  a->brushing = 1;
  a->stroke_sent = 0;
  a->npath = 0;
  a->erasing = a->ctrl; /* Ctrl-drag erases the mask */
  /* Blender's modifiers, as held now: Ctrl inverts (digs), Shift smooths. */
  a->stroke_kind = vw_brush_modified(a->brush_kind, a->ctrl, a->shift, a->brush_strength, &a->stroke_strength);
  a->lazy_x = a->mx, a->lazy_y = a->my;
  add_path_point(a);
}

/* A navigation drag begins: orbit about the point under the cursor (the target when there is
 * none), or with Shift pan. Needs the lock. */
static void begin_navigation(app *a) {
  uint32_t vertex;
  if (!pick_at(a, a->mx, a->my, a->pivot, &vertex)) glm_vec3_copy(a->cam.target, a->pivot);
  a->panning = a->shift;
  a->orbiting = !a->shift;
}

static void on_button(GLFWwindow *w, int button, int action, int mods) {
  app *a = app_of(w);
  a->shift = (mods & GLFW_MOD_SHIFT) != 0;
  a->ctrl = (mods & GLFW_MOD_CONTROL) != 0;
  int down = action == GLFW_PRESS;
  if (button == GLFW_MOUSE_BUTTON_RIGHT) a->rmb = down;
  if (button == GLFW_MOUSE_BUTTON_MIDDLE) a->mmb = down;
  if (a->adjusting) { /* F / Shift+F: a click keeps the value, a right click puts it back */
    if (down && (button == GLFW_MOUSE_BUTTON_LEFT || button == GLFW_MOUSE_BUTTON_RIGHT))
      end_adjust(a, button == GLFW_MOUSE_BUTTON_LEFT);
    return;
  }
  vw_pump_lock(&a->pump);
  if (button == GLFW_MOUSE_BUTTON_MIDDLE) { /* Blender: orbit, Shift pans, in every mode */
    if (down) begin_navigation(a);
    else a->orbiting = a->panning = 0;
  }
  if (button != GLFW_MOUSE_BUTTON_LEFT) {
    vw_pump_unlock(&a->pump);
    return;
  }
  a->lmb = down;
  if (down) {
    /* View mode: a left drag orbits (Shift: pans), for a mouse or trackpad with no middle button. */
    if (!panel_click(a) && a->mode == MODE_VIEW) begin_navigation(a);
    else if (a->mode != MODE_VIEW && !(panel_shown(a) && vw_panel_contains(&a->panel, a->mx, a->my))) press(a);
  } else {
    a->orbiting = a->panning = 0;
    if (a->dragging) vw_net_gesture_end(&a->net, a->gesture);
    if (a->brushing) a->mode == MODE_MASK ? send_mask_path(a) : send_path(a);
    a->dragging = 0;
    a->brushing = 0;
    a->slider_target = -1;
  }
  vw_pump_unlock(&a->pump);
}

static void on_cursor(GLFWwindow *w, double x, double y) {
  app *a = app_of(w);
  double dx = x - a->mx, dy = y - a->my;
  a->mx = x, a->my = y;
  float *adj = adjusted(a);
  if (adj) { /* F / Shift+F: the value follows the pointer */
    *adj = vw_brush_adjust_value(&a->adjust, x, y);
    return;
  }
  int orbit = a->orbiting, pan = a->panning;
  if (orbit) vw_camera_orbit_about(&a->cam, a->pivot, (float)(-dx * 0.008), (float)(dy * 0.008));
  if (pan) vw_camera_pan(&a->cam, a->ctx.width, a->ctx.height, (float)dx, (float)dy);
  vw_pump_lock(&a->pump);
  if (a->slider_target >= 0 && a->net.replica.have_snapshot &&
      (uint32_t)a->slider_target < a->net.replica.mesh->target_count) {
    double f = vw_panel_fraction(&a->panel, (uint32_t)a->slider_target, x);
    if (f >= 0) {
      const client_target_meta *m = &a->net.replica.meta[a->slider_target];
      a->pending_weight = 1, a->pending_value = (float)(m->min + f * (m->max - m->min));
    }
  }
  if (a->dragging) {
    float now[3];
    if (on_drag_plane(a, now)) {
      proto_gesture_drag d;
      memset(&d, 0, sizeof(d));
      d.gesture = a->gesture;
      for (int k = 0; k < 3; k++) d.translate[k] = now[k] - a->grab[k];
      d.rotate[3] = 1;
      vw_net_gesture_drag(&a->net, &d);
    }
  }
  if (a->mode != MODE_VIEW) {
    uint32_t vertex;
    float hit[3];
    /* The stabiliser: the stroke's point trails the pointer, and moves only when pulled. */
    int moved = !(a->brushing && a->lazy) || vw_brush_lazy(&a->lazy_x, &a->lazy_y, x, y, LAZY_PX);
    if (moved) {
      a->have_hover = pick(a, hit, &vertex);
      if (a->have_hover) memcpy(a->hover, hit, sizeof(hit));
      if (a->brushing) add_path_point(a);
    }
  }
  if (orbit || pan) a->net.presence.following = 0; /* the user takes the camera back */
  if (vw_net_has_presence(&a->net) && in_sync(a)) { /* the cursor the others see */
    const float *p = current_positions(a);
    vec3 o, d;
    vw_camera_ray(&a->cam, a->ctx.width, a->ctx.height, (float)x, (float)y, o, d);
    const mesh *m = a->net.replica.mesh;
    a->have_cursor = p && vw_edit_pick_surface(p, m->triangles, m->triangle_count, o, d, a->cursor, a->cursor_n);
  }
  vw_pump_unlock(&a->pump);
}

static void on_scroll(GLFWwindow *w, double dx, double dy) {
  (void)dx;
  app *a = app_of(w);
  vw_pump_lock(&a->pump);
  /* Over the panel the wheel scrolls its rows; elsewhere it zooms toward the point under the
   * cursor, never closer than 1 % of the diagonal to the mesh (vw_camera_zoom_at). */
  if (panel_shown(a) && vw_panel_contains(&a->panel, a->mx, a->my)) {
    vw_panel_scroll(&a->panel, dy > 0 ? -3 : 3);
  } else {
    float hit[3];
    uint32_t vertex;
    int at = pick_at(a, a->mx, a->my, hit, &vertex);
    const float *p = in_sync(a) ? current_positions(a) : NULL;
    vw_camera_zoom_at(&a->cam, a->ctx.width, a->ctx.height, (float)pow(0.9, dy), at ? hit : NULL, p,
                      p ? vw_gpu_vertex_count(a->gpu) : 0, (float)(0.01 * a->diag));
    a->net.presence.following = 0;
  }
  vw_pump_unlock(&a->pump);
}

/* ---- applying what the network changed -------------------------------------------------------- */

static void parse_overrides(app *a) {
  if (!a->o->weights) return;
  const char *s = a->o->weights;
  while (*s) {
    const char *comma = strchr(s, ','), *end = comma ? comma : s + strlen(s), *eq = memchr(s, '=', (size_t)(end - s));
    if (eq && eq - s < 255) {
      override *g = realloc(a->overrides, sizeof(*g) * (size_t)(a->noverrides + 1));
      if (!g) return;
      a->overrides = g;
      memcpy(g[a->noverrides].name, s, (size_t)(eq - s));
      g[a->noverrides].name[eq - s] = '\0';
      g[a->noverrides].value = (float)atof(eq + 1);
      a->noverrides++;
    }
    s = comma ? comma + 1 : end;
  }
}

static void upload_weights(app *a) {
  const mesh *m = a->net.replica.mesh;
  float *w = realloc(a->weights, sizeof(float) * (m->target_count + 1));
  if (!w) return;
  a->weights = w;
  a->nweights = m->target_count;
  memcpy(w, a->net.replica.weights, sizeof(float) * m->target_count);
  for (int i = 0; i < a->noverrides; i++) {
    int t = mesh_find_target(m, a->overrides[i].name);
    if (t >= 0) w[t] = a->overrides[i].value;
  }
  vw_gpu_set_weights(a->gpu, w, m->target_count);
}

/* The panel's rows from the replica's target names. Needs the lock. */
static void rebuild_panel(app *a) {
  const mesh *m = a->net.replica.mesh;
  const char **names = malloc(sizeof(char *) * (m->target_count + 1));
  if (!names) return;
  for (uint32_t t = 0; t < m->target_count; t++) names[t] = m->targets[t].name;
  vw_panel_build(&a->panel, names, m->target_count);
  free(names);
  a->panel_dirty = 0;
}

static int apply_changes(app *a, const vw_net_changes *ch, char *err, size_t errlen) {
  const client_replica *r = &a->net.replica;
  if (ch->snapshot || ch->new_targets) a->panel_dirty = 1;
  if (ch->snapshot) {
    /* A new snapshot: everything is uploaded again (the mesh may be another one). */
    vw_gpu_destroy(a->gpu);
    a->gpu = NULL;
    vw_textures_free(&a->textures); /* its TEXTURE frames follow it */
    vw_texshow_free(&a->texshow);   /* and its TEXCLIP frames */
    /* A SNAPSHOT refused before any was shown leaves no mesh: nothing is drawn until the next
     * join, and the status line says why (vw_net's last_error). */
    if (!r->mesh) return 0;
    mesh_topology topo;
    int rc = mesh_topology_init(&topo, r->mesh, NULL, 0);
    if (rc) {
      snprintf(err, errlen, "welding the mesh: %s", mesh_strerror(rc));
      return rc;
    }
    a->diag = mesh_bbox_diagonal(r->mesh);
    rc = vw_gpu_create(r->mesh, &topo, 1e-6 * a->diag, &a->gpu, err, errlen);
    mesh_topology_fini(&topo);
    if (rc) return rc;
    vw_gpu_set_offsets(a->gpu, 0, r->mesh->vertex_count, r->offsets);
    upload_weights(a);
    if (!a->framed || !a->o->has_camera) a->framed = 0;
    return 0;
  }
  if (!a->gpu) return 0;
  for (uint32_t i = 0; i < ch->new_targets; i++) {
    int rc = vw_gpu_add_target(a->gpu, &r->mesh->targets[r->mesh->target_count - ch->new_targets + i], err, errlen);
    if (rc) return rc;
  }
  if (ch->weights || ch->new_targets) upload_weights(a);
  if (ch->offsets_end > ch->offsets_first)
    vw_gpu_set_offsets(a->gpu, ch->offsets_first, ch->offsets_end - ch->offsets_first,
                       r->offsets + 3 * (size_t)ch->offsets_first);
  return 0;
}

/* ---- overlay ------------------------------------------------------------------------------------ */

/* The overlay; needs the lock (it reads the connection and the replica). */
static void draw_overlay(app *a) {
  vw_render *r = a->render;
  const client_replica *rep = &a->net.replica;
  uint64_t now = vw_net_now_ms();
  vw_hud_watch(&a->hud, &a->net, now);
  char line[640], why[400], rtt[32] = "-";
  vw_hud_state st = vw_hud_status(&a->net, now, why, sizeof(why));
  const char *modes[4] = {"view", "drag", "brush", "mask"};
  if (a->net.latency_ms >= 0) snprintf(rtt, sizeof(rtt), "%.2f ms", 2.0 * a->net.latency_ms);
  snprintf(line, sizeof(line), "%s  v%llu  %.0f fps  %.1f KB/s  round trip %s  mode: %s", a->net.session,
           (unsigned long long)rep->version, a->fps, a->net.bytes_per_s / 1024.0, rtt, modes[a->mode]);
  vw_render_rect(r, 0, 0, (float)a->ctx.width, 24, vw_ink_panel);
  const float *state_colour = st == VW_HUD_EDITOR ? vw_ink_good : st == VW_HUD_READ_ONLY ? vw_ink_grey : vw_ink_warn;
  vw_render_text(r, 8, 6, 1.5f, state_colour, vw_hud_state_name(st));
  vw_render_text(r, 8 + 9.0f * (float)strlen(vw_hud_state_name(st)) + 12, 6, 1.5f, vw_ink_white, line);
  if (a->mode == MODE_BRUSH) {
    static const char *const mirror_names[4] = {"", "  mirror x", "  mirror y", "  mirror z"};
    snprintf(line, sizeof(line), "brush %s  radius %.3f  strength %.2f%s%s%s%s  (Ctrl digs, Shift smooths, F radius, "
             "Shift+F strength, H for help)",
             vw_brush_names[a->brush_kind], a->brush_radius, a->brush_strength, mirror_names[a->mirror & 3],
             a->front_only ? "  front faces" : "  all faces", a->autosmooth ? "  autosmooth" : "",
             a->lazy ? "  stabiliser" : "");
    vw_render_text(r, 8, 30, 1.5f, vw_ink_grey, line);
    if (a->have_hover)
      vw_render_marker(r, &a->cam, a->ctx.width, a->ctx.height, a->hover, (float)(a->brush_radius * a->diag), vw_ink_mark);
  }
  if (a->mode == MODE_MASK) {
    snprintf(line, sizeof(line), "mask %s  radius %.3f  (drag paints, Ctrl+drag erases, Alt+M clear, Ctrl+I invert)",
             a->brushing && a->erasing ? "erase" : "paint", a->brush_radius);
    vw_render_text(r, 8, 30, 1.5f, vw_ink_grey, line);
    if (a->have_hover)
      vw_render_marker(r, &a->cam, a->ctx.width, a->ctx.height, a->hover, (float)(a->brush_radius * a->diag), vw_ink_mark);
  }
  if (a->mode == MODE_DRAG) {
    snprintf(line, sizeof(line), "gesture %s  handle %.3f  region %.3f  (Q mode, F region, Shift+F handle)",
             gesture_modes[a->gesture_mode], a->handle_r, a->region_r);
    vw_render_text(r, 8, 30, 1.5f, vw_ink_grey, line);
    const float *at = a->dragging ? a->grab : a->have_hover ? a->hover : NULL;
    if (at) { /* the region and the handle it would take, on the surface */
      vw_render_marker(r, &a->cam, a->ctx.width, a->ctx.height, at, (float)(a->region_r * a->diag), vw_ink_grey);
      vw_render_marker(r, &a->cam, a->ctx.width, a->ctx.height, at, (float)(a->handle_r * a->diag), vw_ink_mark);
    }
  }
  if (a->adjusting) {
    static const char *const what[5] = {"", "radius", "strength", "region", "handle"};
    snprintf(line, sizeof(line), "%s %.3f: move, then click or Enter; Esc or right click cancels", what[a->adjusting],
             *adjusted(a));
    vw_render_text(r, 8, 48, 1.5f, vw_ink_white, line);
  }
  if (a->dragging) vw_render_marker(r, &a->cam, a->ctx.width, a->ctx.height, a->grab, 0, vw_ink_mark);
  /* The bottom line: why the status is what it is, else a flashing message. */
  const char *flash = vw_hud_message(&a->hud, now);
  int urgent = why[0] && (st != VW_HUD_READ_ONLY || a->net.primary_lost);
  if (urgent) vw_render_text(r, 8, (float)a->ctx.height - 24, 1.5f, vw_ink_warn, why);
  else if (flash) vw_render_text(r, 8, (float)a->ctx.height - 24, 1.5f, vw_ink_warn, flash);
  else if (why[0]) vw_render_text(r, 8, (float)a->ctx.height - 24, 1.5f, vw_ink_grey, why);
  else vw_render_text(r, 8, (float)a->ctx.height - 24, 1.2f, vw_ink_grey, "H or ? for keys");
  vw_presence_draw(r, &a->net.presence, &a->cam, a->ctx.width, a->ctx.height, now);
  if (a->net.presence.notice_count != a->notices_seen) { /* "ana joined", "bob left" */
    a->notices_seen = a->net.presence.notice_count;
    vw_hud_flash(&a->hud, now, "%s", vw_presence_notice(&a->net.presence));
  }
  if (panel_shown(a)) {
    if (a->panel_dirty) rebuild_panel(a);
    vw_panel_draw(&a->panel, r, rep, a->weights, a->nweights, vw_net_can_edit(&a->net) && !a->net.primary_lost,
                  a->ctx.width, a->ctx.height);
  }
  if (a->help) vw_help_draw(r);
  vw_render_flush_2d(r, a->ctx.width, a->ctx.height);
}

/* ---- screenshots ---------------------------------------------------------------------------------- */

static int write_png(app *a, const char *path) {
  int w = a->ctx.width, h = a->ctx.height;
  unsigned char *px = malloc((size_t)w * h * 4), *flip = malloc((size_t)w * h * 4);
  if (!px || !flip) {
    free(px);
    free(flip);
    return -1;
  }
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px);
  for (int y = 0; y < h; y++) memcpy(flip + (size_t)y * w * 4, px + (size_t)(h - 1 - y) * w * 4, (size_t)w * 4);
  int ok = stbi_write_png(path, w, h, 4, flip, w * 4);
  free(px);
  free(flip);
  return ok ? 0 : -1;
}

/* ---- the loop ------------------------------------------------------------------------------------ */

/* A failed call's reason, or the code's own sentence when the call had none to give. */
static void report(int rc, const char *err) {
  fprintf(stderr, "deform-view: %s\n", err[0] ? err : vw_strerror(rc));
}

/* Presence, once a frame: the followed participant's camera becomes this one's (so it is on
 * the leader's within the frame after its STATE arrived), and this viewer's cursor and camera
 * go out when they changed (vw_presence_due: at most 30 times a second). Under the lock. */
static void frame_presence(app *a) {
  vw_presence *pr = &a->net.presence;
  float eye[3], target[3], fov;
  if (vw_presence_leader(pr, eye, target, &fov)) vw_camera_look(&a->cam, eye, target, fov);
  if (!vw_net_has_presence(&a->net)) return;
  if (!pr->ever_sent && a->o->private_presence) { /* said once: listed by name, nothing else */
    pr->ever_sent = vw_net_send_presence(&a->net, NULL, PROTO_CLIENT_VIEW, 1);
    return;
  }
  if (a->o->private_presence) return;
  uint8_t tool = a->mode == MODE_DRAG ? PROTO_TOOL_DEFORM
                 : a->mode == MODE_BRUSH ? (uint8_t)(PROTO_TOOL_BRUSH0 + vw_brush_ids[a->brush_kind])
                                         : PROTO_TOOL_NONE;
  float radius = a->mode == MODE_BRUSH ? (float)(a->brush_radius * a->diag) : 0.0f;
  proto_presence_state s;
  vw_presence_state_of(&s, &a->cam, a->have_cursor, a->cursor, a->cursor_n, radius, tool);
  int first = !pr->ever_sent;
  if (vw_presence_due(pr, &s, vw_net_now_ms())) vw_net_send_presence(&a->net, &s, first ? PROTO_CLIENT_VIEW : 0, 0);
}

/* One frame's work with the connection: what changed goes to the GPU, a dragged slider's value
 * and the stroke's new points go out, the camera is framed on a new mesh. Under the lock. */
static int frame_net(app *a, int shot, char *err, size_t errlen) {
  vw_net_changes ch;
  if (a->pump.running) vw_pump_take(&a->pump, &ch);
  else vw_net_poll(&a->net, a->gpu ? 0 : 10, &ch);
  int rc = apply_changes(a, &ch, err, errlen);
  if (rc) return rc;
  if (a->pending_weight && a->slider_target >= 0) {
    uint32_t t = (uint32_t)a->slider_target;
    vw_net_set_weights(&a->net, 1, &t, &a->pending_value);
    a->pending_weight = 0;
  }
  if (a->brushing && a->mode != MODE_MASK) send_path(a);
  if ((rc = vw_mask_sync(&a->mask, &a->net.replica, err, errlen)) != 0) return rc;
  vw_render_set_mask(a->render, a->gpu ? vw_mask_buffer(&a->mask) : 0);
  if ((rc = vw_textures_sync(&a->textures, &a->net.replica, err, errlen)) != 0) return rc;
  vw_render_set_textures(a->render, a->gpu ? &a->textures : NULL);
  if ((rc = vw_texshow_sync(&a->texshow, &a->net.replica, err, errlen)) != 0) return rc;
  vw_render_set_texclips(a->render, a->texshow.shown, a->gpu ? a->texshow.shown_count : 0);
  frame_presence(a);
  if (!shot) glfwGetFramebufferSize(a->ctx.window, &a->ctx.width, &a->ctx.height);
  if (a->gpu && !a->framed) {
    a->cam.up = a->net.granted.up == 'z' ? 'z' : 'y'; /* a server that does not say: Y-up */
    vw_camera_frame(&a->cam, a->net.replica.mesh->bbox_min, a->net.replica.mesh->bbox_max);
    if (a->view) vw_camera_view(&a->cam, a->view), a->view = 0;
    else if (a->o->has_camera) {
      a->cam.yaw = glm_rad(a->o->yaw_deg);
      a->cam.pitch = glm_rad(a->o->pitch_deg);
      if (a->o->dist > 0) a->cam.dist = a->o->dist;
    }
    a->framed = 1;
  }
  return 0;
}

int vw_app_run(const vw_app_opts *o) {
  app *a = calloc(1, sizeof(*a));
  if (!a) return 1;
  a->o = o;
  a->slider_target = -1;
  a->sliders = 1;
  a->wireframe = o->wireframe;
  a->brush_radius = 0.04f;
  a->brush_strength = 0.5f;
  a->handle_r = 0.02f, a->region_r = 0.15f; /* the gesture's, as before they could be chosen */
  a->front_only = 1;
  a->next_gesture = 1;
  a->cam.fov = glm_rad(40.0f);
  a->view = o->view;
  vw_panel_init(&a->panel);
  parse_overrides(a);
  int shot = o->screenshot != NULL, status = 1, rc;
  char err[1024] = "";
  if ((rc = vw_context_init(&a->ctx, o->width > 0 ? o->width : 1280, o->height > 0 ? o->height : 720, shot,
                            "deform-view", err, sizeof(err))) != 0) {
    report(rc, err);
    free(a);
    return 1;
  }
  vw__gl_framebuffer fb = {0};
  if ((rc = vw_render_create(&a->render, err, sizeof(err))) != 0) {
    report(rc, err);
    goto out;
  }
  vw_render_set_unlit(a->render, o->unlit);
  vw_render_set_shading(a->render, a->shading = o->shading);
  if (shot) {
    /* Off-screen: a framebuffer of our own, so no window system decides what gets drawn. The
     * overlay only with --overlay. */
    a->sliders = o->overlay;
    const vw__gl_framebuffer_desc fd = {
        .width = a->ctx.width, .height = a->ctx.height, .label = "off-screen framebuffer"};
    if ((rc = vw__gl_framebuffer_make(&fb, &fd, err, sizeof(err))) != 0) {
      report(rc, err);
      goto out;
    }
    glBindFramebuffer(GL_FRAMEBUFFER, fb.id);
    a->fb_id = fb.id;
  }
  if (vw_pick_choose(a->ctx.renderer, o->pick, &a->gpick, err, sizeof(err)) != 0) /* --pick */
    fprintf(stderr, "deform-view: picking on the CPU: %s\n", err);
  glfwSetWindowUserPointer(a->ctx.window, a);
  glfwSetKeyCallback(a->ctx.window, on_key);
  glfwSetCharCallback(a->ctx.window, on_char);
  glfwSetMouseButtonCallback(a->ctx.window, on_button);
  glfwSetCursorPosCallback(a->ctx.window, on_cursor);
  glfwSetScrollCallback(a->ctx.window, on_scroll);
  vw_net_init(&a->net, o->host, o->port, o->session, o->token, o->role);
  if (o->tls) vw_net_set_tls(&a->net, 1, o->tls_ca);
  if (o->author) vw_net_set_author(&a->net, o->author);
  proto_hello_opts stream = o->stream;
  stream.caps |= PROTO_CAP_BIT(PROTO_CAP_UP); /* WELCOME says the session's up axis (the camera's) */
  stream.caps |= PROTO_CAP_BIT(PROTO_CAP_MASK); /* MASK frames: this author's own mask, drawn darker */
  stream.caps |= PROTO_CAP_BIT(PROTO_CAP_PRESENCE); /* who else is here, their cursors and cameras */
  stream.caps |= PROTO_CAP_BIT(PROTO_CAP_TEXTURE); /* the materials and images, once per join */
  stream.caps |= PROTO_CAP_BIT(PROTO_CAP_TEXCLIP); /* texture clips drawn as the albedo (§18) */
  stream.caps |= PROTO_CAP_BIT(PROTO_CAP_ENTROPY); /* the SNAPSHOT rANS-coded: a smaller join (§12.11) */
  vw_net_set_protocol(&a->net, o->protocol ? o->protocol : PROTO_VERSION_2, &stream);
  for (int i = 0; i < o->more_count; i++) vw_net_add_address(&a->net, o->more_host[i], o->more_port[i]);
  /* The settings above are made before the connection's thread starts: from here on every use
   * of a->net is under the pump's lock. */
  if (vw_pump_start(&a->pump, &a->net) != 0)
    fprintf(stderr, "deform-view: no thread for the connection; it is polled once per frame\n");
  uint64_t start = vw_net_now_ms();
  int frames_ready = 0;
  a->fps_t0 = glfwGetTime();
  while (!glfwWindowShouldClose(a->ctx.window)) {
    vw_pump_lock(&a->pump);
    rc = frame_net(a, shot, err, sizeof(err));
    int live = a->net.state == VW_NET_LIVE, ready = a->gpu && live && a->net.replica.version >= o->wait_version;
    /* Granted "mask": the server sends the author's mask right after the snapshot. */
    if ((a->net.granted.caps & PROTO_CAP_BIT(PROTO_CAP_MASK)) && !a->net.replica.mask) ready = 0;
    /* Granted "texture": MATERIALS and its images follow the snapshot (docs/protocol.md §17). */
    if ((a->net.granted.caps & PROTO_CAP_BIT(PROTO_CAP_TEXTURE)) && !client_replica_textures_ready(&a->net.replica))
      ready = 0;
    if (a->net.replica.texclip_count < o->wait_texclips || (o->wait_texclips && !a->net.replica.texweights_serial)) ready = 0;
    vw_pump_unlock(&a->pump);
    if (rc == 0 && a->gpu) rc = vw_gpu_update(a->gpu, err, sizeof(err)); /* the passes need no lock */
    if (rc) {
      report(rc, err);
      goto out;
    }
    if (!a->gpu && a->pump.running) glfwWaitEventsTimeout(0.01); /* nothing to draw yet */
    vw_render_scene(a->render, a->gpu, &a->cam, a->ctx.width, a->ctx.height, a->wireframe);
    if (!shot || o->overlay) {
      vw_pump_lock(&a->pump);
      draw_overlay(a);
      vw_pump_unlock(&a->pump);
    }
    a->fps_frames++;
    double now = glfwGetTime();
    if (now - a->fps_t0 >= 0.5) {
      a->fps = a->fps_frames / (now - a->fps_t0);
      a->fps_frames = 0;
      a->fps_t0 = now;
    }
    if (shot) {
      /* Off-screen: the picture is taken once the state is there and a few frames have run. */
      frames_ready = ready ? frames_ready + 1 : 0;
      if (frames_ready >= (o->frames > 0 ? o->frames : 3)) {
        glFinish();
        if (write_png(a, o->screenshot) != 0) {
          fprintf(stderr, "deform-view: cannot write %s\n", o->screenshot);
          goto out;
        }
        status = 0;
        break;
      }
      if ((double)(vw_net_now_ms() - start) > (o->timeout_s > 0 ? o->timeout_s : 60.0) * 1000.0) {
        vw_pump_lock(&a->pump);
        fprintf(stderr, "deform-view: no screenshot after %.0f s: %s\n", o->timeout_s > 0 ? o->timeout_s : 60.0,
                a->net.state == VW_NET_LIVE ? "the session did not reach the version asked for"
                : a->net.last_error[0]      ? a->net.last_error
                                            : "cannot reach the server");
        vw_pump_unlock(&a->pump);
        goto out;
      }
    } else {
      glfwSwapBuffers(a->ctx.window);
    }
    glfwPollEvents();
  }
  if (!shot) status = 0;
out:
  vw_pump_stop(&a->pump);
  vw__gl_framebuffer_free(&fb);
  vw_net_fini(&a->net);
  vw_gpu_destroy(a->gpu);
  vw_mask_free(&a->mask);
  vw_textures_free(&a->textures);
  vw_texshow_free(&a->texshow);
  vw_render_destroy(a->render);
  vw_pick_destroy(a->gpick);
  vw_context_fini(&a->ctx);
  vw_panel_fini(&a->panel);
  free(a->weights);
  free(a->overrides);
  free(a->cpu_pos);
  free(a);
  return status;
}
