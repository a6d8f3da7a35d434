/*
 * vw_app.c — deform-view's loop, input and sculpting UI (see vw_app.h).
 *
 * Keys: W wireframe · F frame the mesh · T blendshape sliders · V view · G drag (grab a handle
 * and move it: an ARAP gesture on the server) · B brush (1 grab, 2 inflate, 3 smooth, 4 flatten,
 * 5 pinch; [ ] radius, - = strength, Shift reverses, M mirror) · Ctrl+Z undo · Ctrl+Y redo ·
 * Esc quit. Mouse: left drag orbits in view mode (acts in drag and brush modes), right drag
 * orbits, middle drag (or Shift+right) pans, wheel zooms.
 *
 * Picking lives in vw_edit.c (tested without a window); undo/redo is the server's history.
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

#include "vw_camera.h"
#include "vw_context.h"
#include "vw_edit.h"
#include "vw_gl.h"
#include "vw_gpu.h"
#include "vw_net.h"
#include "vw_render.h"

typedef enum { MODE_VIEW = 0, MODE_DRAG = 1, MODE_BRUSH = 2 } app_mode;

typedef struct override {
  char name[256];
  float value;
} override;

typedef struct app {
  const vw_app_opts *o;
  vw_context ctx;
  vw_net net;
  vw_gpu *gpu;
  vw_render *render;
  vw_camera cam;
  int framed;
  mesh_topology topo;
  int have_topo;
  double diag;
  float *weights;          /* replica weights with local overrides applied */
  override *overrides;
  int noverrides;
  /* input */
  app_mode mode;
  int wireframe, sliders;
  double mx, my, press_x, press_y;
  int lmb, rmb, mmb, shift, ctrl;
  /* drag gesture */
  int dragging;
  uint32_t gesture, next_gesture;
  float grab[3], plane_n[3];
  /* brush */
  int brushing, brush_kind, mirror;
  float brush_radius, brush_strength; /* radius as a fraction of the diagonal */
  float last_hit[3];
  int have_hover;
  float hover[3];
  proto_brush_sample pending[256];
  uint32_t npending;
  /* sliders */
  int slider_target;       /* target being dragged, -1 */
  float panel_x, row_h;
  int pending_weight;
  float pending_value;
  /* CPU copy of the morphed positions for picking (read back on demand) */
  float *cpu_pos;
  uint64_t cpu_pos_at;
  /* stats */
  double fps, fps_t0;
  int fps_frames;
  char status[256];
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

/* The nearest triangle hit by the ray through the cursor, and its corner nearest the hit. */
static int pick(app *a, float hit[3], uint32_t *vertex) {
  if (!a->gpu) return 0;
  const float *p = current_positions(a);
  if (!p) return 0;
  vec3 o, d;
  vw_camera_ray(&a->cam, a->ctx.width, a->ctx.height, (float)a->mx, (float)a->my, o, d);
  const mesh *m = a->net.replica.mesh;
  return vw_edit_pick(p, m->triangles, m->triangle_count, o, d, hit, vertex);
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

/* ---- sliders --------------------------------------------------------------------------------- */

static int slider_at(app *a, double x, double y, float *value) {
  const client_replica *r = &a->net.replica;
  if (!a->sliders || !r->have_snapshot || x < a->panel_x) return -1;
  int row = (int)((y - 40.0) / a->row_h);
  if (row < 0 || (uint32_t)row >= r->mesh->target_count) return -1;
  const client_target_meta *m = &r->meta[row];
  float x0 = a->panel_x + 8, w = (float)a->ctx.width - a->panel_x - 16;
  float f = (float)((x - x0) / w);
  f = f < 0 ? 0 : f > 1 ? 1 : f;
  *value = m->min + f * (m->max - m->min);
  return row;
}

/* ---- GLFW callbacks ---------------------------------------------------------------------------- */

static app *app_of(GLFWwindow *w) { return glfwGetWindowUserPointer(w); }

static void on_key(GLFWwindow *w, int key, int scancode, int action, int mods) {
  (void)scancode;
  app *a = app_of(w);
  a->shift = (mods & GLFW_MOD_SHIFT) != 0;
  a->ctrl = (mods & GLFW_MOD_CONTROL) != 0;
  if (action != GLFW_PRESS && action != GLFW_REPEAT) return;
  switch (key) {
    case GLFW_KEY_ESCAPE: glfwSetWindowShouldClose(w, 1); break;
    case GLFW_KEY_W: a->wireframe = !a->wireframe; break;
    case GLFW_KEY_F: a->framed = 0; break;
    case GLFW_KEY_T: a->sliders = !a->sliders; break;
    case GLFW_KEY_V: a->mode = MODE_VIEW; break;
    case GLFW_KEY_G: a->mode = MODE_DRAG; break;
    case GLFW_KEY_B: a->mode = MODE_BRUSH; break;
    case GLFW_KEY_M: a->mirror = !a->mirror; break;
    case GLFW_KEY_1: case GLFW_KEY_2: case GLFW_KEY_3: case GLFW_KEY_4: case GLFW_KEY_5:
      a->brush_kind = key - GLFW_KEY_1;
      a->mode = MODE_BRUSH;
      break;
    case GLFW_KEY_LEFT_BRACKET: a->brush_radius *= 0.8f; break;
    case GLFW_KEY_RIGHT_BRACKET: a->brush_radius *= 1.25f; break;
    case GLFW_KEY_MINUS: a->brush_strength *= 0.8f; break;
    case GLFW_KEY_EQUAL: a->brush_strength *= 1.25f; break;
    case GLFW_KEY_Z: /* the server's history: per author, across reconnects and clients */
      if (a->ctrl && vw_net_history(&a->net, a->shift)) snprintf(a->status, sizeof(a->status), a->shift ? "redo" : "undo");
      break;
    case GLFW_KEY_Y:
      if (a->ctrl && vw_net_history(&a->net, 1)) snprintf(a->status, sizeof(a->status), "redo");
      break;
    default: break;
  }
}

static void on_button(GLFWwindow *w, int button, int action, int mods) {
  app *a = app_of(w);
  a->shift = (mods & GLFW_MOD_SHIFT) != 0;
  int down = action == GLFW_PRESS;
  if (button == GLFW_MOUSE_BUTTON_RIGHT) a->rmb = down;
  if (button == GLFW_MOUSE_BUTTON_MIDDLE) a->mmb = down;
  if (button != GLFW_MOUSE_BUTTON_LEFT) return;
  a->lmb = down;
  a->press_x = a->mx, a->press_y = a->my;
  if (down) {
    float v;
    int t = slider_at(a, a->mx, a->my, &v);
    if (t >= 0) {
      if (vw_net_can_edit(&a->net) && !a->net.replica.meta[t].driver_count) {
        a->slider_target = t;
        a->pending_weight = 1, a->pending_value = v;
      }
      return;
    }
    float hit[3];
    uint32_t vertex;
    if (a->mode == MODE_DRAG && vw_net_can_edit(&a->net) && pick(a, hit, &vertex)) {
      proto_gesture_begin g;
      memset(&g, 0, sizeof(g));
      g.gesture = a->gesture = a->next_gesture++;
      g.mode = 1; /* arap */
      g.iterations = 1;
      g.pick = vertex;
      g.handle_radius = (float)(0.02 * a->diag);
      g.roi_radius = (float)(0.15 * a->diag);
      if (vw_net_gesture_begin(&a->net, &g, NULL, NULL, NULL)) {
        a->dragging = 1;
        memcpy(a->grab, hit, sizeof(hit));
        vec3 eye;
        vw_camera_eye(&a->cam, eye);
        glm_vec3_sub(eye, a->grab, a->plane_n);
        glm_vec3_normalize(a->plane_n);
      }
    } else if (a->mode == MODE_BRUSH && vw_net_can_edit(&a->net) && pick(a, hit, &vertex)) {
      a->brushing = 1;
      memcpy(a->last_hit, hit, sizeof(hit));
    }
  } else {
    if (a->dragging) vw_net_gesture_end(&a->net, a->gesture);
    a->dragging = 0;
    a->brushing = 0;
    a->slider_target = -1;
  }
}

static void on_cursor(GLFWwindow *w, double x, double y) {
  app *a = app_of(w);
  double dx = x - a->mx, dy = y - a->my;
  a->mx = x, a->my = y;
  int orbit = a->rmb && !a->shift, pan = a->mmb || (a->rmb && a->shift);
  if (a->lmb && a->mode == MODE_VIEW && a->slider_target < 0) orbit = 1;
  if (orbit) vw_camera_orbit(&a->cam, (float)(-dx * 0.008), (float)(dy * 0.008));
  if (pan) vw_camera_pan(&a->cam, a->ctx.width, a->ctx.height, (float)dx, (float)dy);
  if (a->slider_target >= 0) {
    float v;
    double sx = x < a->panel_x + 8 ? a->panel_x + 8 : x;
    if (slider_at(a, sx, 40.0 + (a->slider_target + 0.5) * a->row_h, &v) == a->slider_target)
      a->pending_weight = 1, a->pending_value = v;
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
  if (a->mode == MODE_BRUSH) {
    uint32_t vertex;
    float hit[3];
    a->have_hover = pick(a, hit, &vertex);
    if (a->have_hover) memcpy(a->hover, hit, sizeof(hit));
    if (a->brushing && a->have_hover && a->npending < 256) {
      proto_brush_sample *s = &a->pending[a->npending++];
      memcpy(s->center, hit, sizeof(hit));
      for (int k = 0; k < 3; k++) s->direction[k] = hit[k] - a->last_hit[k];
      s->radius = (float)(a->brush_radius * a->diag);
      s->strength = a->shift ? -a->brush_strength : a->brush_strength;
      memcpy(a->last_hit, hit, sizeof(hit));
    }
  }
}

static void on_scroll(GLFWwindow *w, double dx, double dy) {
  (void)dx;
  vw_camera_zoom(&app_of(w)->cam, (float)pow(0.9, dy));
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
  memcpy(w, a->net.replica.weights, sizeof(float) * m->target_count);
  for (int i = 0; i < a->noverrides; i++) {
    int t = mesh_find_target(m, a->overrides[i].name);
    if (t >= 0) w[t] = a->overrides[i].value;
  }
  vw_gpu_set_weights(a->gpu, w, m->target_count);
}

static int apply_changes(app *a, const vw_net_changes *ch, char *err, size_t errlen) {
  const client_replica *r = &a->net.replica;
  if (ch->snapshot) {
    /* A new snapshot: everything is uploaded again (the mesh may be another one). */
    vw_gpu_destroy(a->gpu);
    a->gpu = NULL;
    if (a->have_topo) mesh_topology_fini(&a->topo);
    a->have_topo = 0;
    int rc = mesh_topology_init(&a->topo, r->mesh, NULL, 0);
    if (rc) {
      snprintf(err, errlen, "welding the mesh: %s", mesh_strerror(rc));
      return rc;
    }
    a->have_topo = 1;
    a->diag = mesh_bbox_diagonal(r->mesh);
    rc = vw_gpu_create(r->mesh, &a->topo, 1e-6 * a->diag, &a->gpu, err, errlen);
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

static void draw_overlay(app *a) {
  vw_render *r = a->render;
  const client_replica *rep = &a->net.replica;
  static const float white[4] = {0.92f, 0.92f, 0.92f, 1}, grey[4] = {0.6f, 0.6f, 0.62f, 1},
                     warn[4] = {1, 0.55f, 0.3f, 1}, panel[4] = {0.08f, 0.08f, 0.09f, 0.8f},
                     bar[4] = {0.35f, 0.55f, 0.85f, 1}, bar_off[4] = {0.4f, 0.4f, 0.42f, 1},
                     mark[4] = {1, 0.85f, 0.2f, 1};
  char line[512];
  const char *modes[3] = {"view", "drag", "brush"}, *brushes[5] = {"grab", "inflate", "smooth", "flatten", "pinch"};
  snprintf(line, sizeof(line), "%s  v%llu  %.0f fps  %.1f KB/s  latency %s  %s  mode: %s", a->net.session,
           (unsigned long long)rep->version, a->fps, a->net.bytes_per_s / 1024.0,
           a->net.latency_ms >= 0 ? "" : "-", vw_net_can_edit(&a->net) ? "editor" : "READ-ONLY", modes[a->mode]);
  if (a->net.latency_ms >= 0) {
    char lat[32];
    snprintf(lat, sizeof(lat), "%.2f ms", a->net.latency_ms);
    char *at = strstr(line, "latency ");
    if (at) {
      char rest[512];
      snprintf(rest, sizeof(rest), "%s", at + 8);
      snprintf(at + 8, sizeof(line) - (size_t)(at + 8 - line), "%s%s", lat, rest);
    }
  }
  vw_render_rect(r, 0, 0, (float)a->ctx.width, 24, panel);
  vw_render_text(r, 8, 6, 1.5f, white, line);
  if (a->mode == MODE_BRUSH) {
    snprintf(line, sizeof(line), "brush %s  radius %.3f  strength %.3f%s  (1-5 [ ] - = M)", brushes[a->brush_kind],
             a->brush_radius, a->brush_strength, a->mirror ? "  mirror x" : "");
    vw_render_text(r, 8, 30, 1.5f, grey, line);
    if (a->have_hover)
      vw_render_marker(r, &a->cam, a->ctx.width, a->ctx.height, a->hover, (float)(a->brush_radius * a->diag), mark);
  }
  if (a->dragging) vw_render_marker(r, &a->cam, a->ctx.width, a->ctx.height, a->grab, 0, mark);
  if (a->net.state != VW_NET_LIVE) {
    if (a->net.state == VW_NET_DOWN) {
      double left = ((double)a->net.retry_at_ms - (double)vw_net_now_ms()) / 1000.0;
      snprintf(line, sizeof(line), "server gone (%s): showing the last shape, reconnecting in %.1f s",
               a->net.last_error[0] ? a->net.last_error : "connection lost", left > 0 ? left : 0);
    } else {
      snprintf(line, sizeof(line), "connecting to %s:%d ...", a->net.host, a->net.port);
    }
    vw_render_text(r, 8, (float)a->ctx.height - 24, 1.5f, warn, line);
  } else if (a->net.primary_lost) { /* a relay keeps the last shape while the primary is away */
    vw_render_text(r, 8, (float)a->ctx.height - 24, 1.5f, warn, "primary lost: showing its last state (edits refused)");
  } else if (a->net.last_error[0]) {
    vw_render_text(r, 8, (float)a->ctx.height - 24, 1.5f, warn, a->net.last_error);
  } else if (a->status[0]) {
    vw_render_text(r, 8, (float)a->ctx.height - 24, 1.5f, grey, a->status);
  }
  if (a->sliders && rep->have_snapshot) {
    a->panel_x = (float)a->ctx.width - 260;
    a->row_h = 22;
    vw_render_rect(r, a->panel_x, 30, 260, (float)(a->ctx.height - 60), panel);
    for (uint32_t t = 0; t < rep->mesh->target_count; t++) {
      float y = 40 + (float)t * a->row_h;
      if (y + a->row_h > (float)a->ctx.height - 30) break;
      const client_target_meta *m = &rep->meta[t];
      int fixed = m->driver_count != 0 || !vw_net_can_edit(&a->net);
      float w = a->weights ? a->weights[t] : rep->weights[t];
      float f = m->max > m->min ? (w - m->min) / (m->max - m->min) : 0;
      f = f < 0 ? 0 : f > 1 ? 1 : f;
      float x0 = a->panel_x + 8, bw = 260 - 16;
      vw_render_rect(r, x0, y + 12, bw, 4, bar_off);
      vw_render_rect(r, x0, y + 12, bw * f, 4, fixed ? grey : bar);
      snprintf(line, sizeof(line), "%s %.2f%s%s", rep->mesh->targets[t].name, w,
               (m->flags & PROTO_TARGET_MUTED) ? " (muted)" : "", m->driver_count ? " (combination)" : "");
      vw_render_text(r, x0, y, 1.0f, fixed ? grey : white, line);
    }
  }
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

int vw_app_run(const vw_app_opts *o) {
  app *a = calloc(1, sizeof(*a));
  if (!a) return 1;
  a->o = o;
  a->slider_target = -1;
  a->sliders = 1;
  a->wireframe = o->wireframe;
  a->brush_radius = 0.04f;
  a->brush_strength = 0.3f;
  a->next_gesture = 1;
  a->cam.fov = glm_rad(40.0f);
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
  if (shot) {
    /* Off-screen: a framebuffer of our own, so no window system decides what gets drawn. */
    a->sliders = 0;
    const vw__gl_framebuffer_desc fd = {
        .width = a->ctx.width, .height = a->ctx.height, .label = "off-screen framebuffer"};
    if ((rc = vw__gl_framebuffer_make(&fb, &fd, err, sizeof(err))) != 0) {
      report(rc, err);
      goto out;
    }
    glBindFramebuffer(GL_FRAMEBUFFER, fb.id);
  }
  glfwSetWindowUserPointer(a->ctx.window, a);
  glfwSetKeyCallback(a->ctx.window, on_key);
  glfwSetMouseButtonCallback(a->ctx.window, on_button);
  glfwSetCursorPosCallback(a->ctx.window, on_cursor);
  glfwSetScrollCallback(a->ctx.window, on_scroll);
  vw_net_init(&a->net, o->host, o->port, o->session, o->token, o->role);
  if (o->tls) vw_net_set_tls(&a->net, 1, o->tls_ca);
  if (o->author) vw_net_set_author(&a->net, o->author);
  vw_net_set_protocol(&a->net, o->protocol ? o->protocol : PROTO_VERSION_2, &o->stream);
  for (int i = 0; i < o->more_count; i++) vw_net_add_address(&a->net, o->more_host[i], o->more_port[i]);
  uint64_t start = vw_net_now_ms();
  int frames_ready = 0;
  a->fps_t0 = glfwGetTime();
  while (!glfwWindowShouldClose(a->ctx.window)) {
    vw_net_changes ch;
    vw_net_poll(&a->net, a->gpu ? 0 : 10, &ch);
    if ((rc = apply_changes(a, &ch, err, sizeof(err))) != 0) {
      report(rc, err);
      goto out;
    }
    if (a->pending_weight && a->slider_target >= 0) {
      uint32_t t = (uint32_t)a->slider_target;
      vw_net_set_weights(&a->net, 1, &t, &a->pending_value);
      a->pending_weight = 0;
    }
    if (a->npending) {
      vw_net_brush(&a->net, (uint8_t)a->brush_kind, 0, (uint8_t)a->mirror, a->npending, a->pending);
      a->npending = 0;
    }
    if (!shot) glfwGetFramebufferSize(a->ctx.window, &a->ctx.width, &a->ctx.height);
    if (a->gpu) {
      if ((rc = vw_gpu_update(a->gpu, err, sizeof(err))) != 0) {
        report(rc, err);
        goto out;
      }
      if (!a->framed) {
        vw_camera_frame(&a->cam, a->net.replica.mesh->bbox_min, a->net.replica.mesh->bbox_max);
        if (o->has_camera) {
          a->cam.yaw = glm_rad(o->yaw_deg);
          a->cam.pitch = glm_rad(o->pitch_deg);
          if (o->dist > 0) a->cam.dist = o->dist;
        }
        a->framed = 1;
      }
    }
    vw_render_scene(a->render, a->gpu, &a->cam, a->ctx.width, a->ctx.height, a->wireframe);
    if (!shot) draw_overlay(a);
    a->fps_frames++;
    double now = glfwGetTime();
    if (now - a->fps_t0 >= 0.5) {
      a->fps = a->fps_frames / (now - a->fps_t0);
      a->fps_frames = 0;
      a->fps_t0 = now;
    }
    if (shot) {
      /* Off-screen: the picture is taken once the state is there and a few frames have run. */
      int ready = a->gpu && a->net.state == VW_NET_LIVE && a->net.replica.version >= o->wait_version;
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
        fprintf(stderr, "deform-view: no screenshot after %.0f s: %s\n", o->timeout_s > 0 ? o->timeout_s : 60.0,
                a->net.state == VW_NET_LIVE ? "the session did not reach the version asked for"
                : a->net.last_error[0]      ? a->net.last_error
                                            : "cannot reach the server");
        goto out;
      }
    } else {
      glfwSwapBuffers(a->ctx.window);
    }
    glfwPollEvents();
  }
  if (!shot) status = 0;
out:
  vw__gl_framebuffer_free(&fb);
  vw_net_fini(&a->net);
  vw_gpu_destroy(a->gpu);
  vw_render_destroy(a->render);
  if (a->have_topo) mesh_topology_fini(&a->topo);
  vw_context_fini(&a->ctx);
  free(a->weights);
  free(a->overrides);
  free(a->cpu_pos);
  free(a);
  return status;
}
