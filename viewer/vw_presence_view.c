/*
 * vw_presence_view.c — drawing the other participants, and this viewer's own presence state
 * (see vw_presence_view.h).
 */
#include "vw_presence_view.h"

#include <stdio.h>
#include <string.h>

static void colour_of(const vw_participant *q, float rgba[4]) {
  for (int k = 0; k < 3; k++) rgba[k] = (float)q->rgb[k] / 255.0f;
  rgba[3] = 1;
}

static const char *tool_name(uint8_t tool) {
  static const char *const names[PROTO_TOOL_MAX + 1] = {"", "deform", "grab", "inflate", "smooth", "flatten",
                                                        "pinch", "draw", "crease", "layer"};
  return tool <= PROTO_TOOL_MAX ? names[tool] : "";
}

void vw_presence_draw(vw_render *r, const vw_presence *pr, const vw_camera *cam, int width, int height,
                      uint64_t now_ms) {
  char line[160];
  float y = 52;
  for (int i = 0; i < pr->n; i++) {
    const vw_participant *q = &pr->p[i];
    float rgba[4];
    colour_of(q, rgba);
    snprintf(line, sizeof(line), "%s%s  %s%s%s", pr->following == q->id ? "> " : "", q->author,
             q->flags & PROTO_PRES_EDITING ? "editing" : "watching", q->id == pr->self ? " (you)" : "",
             q->flags & PROTO_PRES_PRIVATE ? " (private)" : "");
    uint64_t idle = now_ms > q->active_ms ? now_ms - q->active_ms : 0;
    if (idle >= 10000 && q->id != pr->self)
      snprintf(line + strlen(line), sizeof(line) - strlen(line), "  idle %llu s", (unsigned long long)(idle / 1000));
    vw_render_text(r, 8, y, 1.2f, rgba, line);
    y += 14;
    if (q->id == pr->self || !q->has_state) continue;
    float px, py;
    if ((q->state.flags & PROTO_PRES_CURSOR) && vw_camera_project(cam, width, height, q->state.hit, &px, &py)) {
      vw_render_marker(r, cam, width, height, q->state.hit, q->state.radius, rgba);
      snprintf(line, sizeof(line), "%s %s", q->author, tool_name(q->state.tool));
      vw_render_text(r, px + 8, py - 14, 1.2f, rgba, line);
    }
    if ((q->state.flags & PROTO_PRES_CAMERA) && pr->following != q->id &&
        vw_camera_project(cam, width, height, q->state.eye, &px, &py)) {
      vw_render_rect(r, px - 5, py - 5, 10, 10, rgba);
      snprintf(line, sizeof(line), "%s's view", q->author);
      vw_render_text(r, px + 8, py - 4, 1.0f, rgba, line);
    }
  }
}

void vw_presence_state_of(proto_presence_state *out, const vw_camera *cam, int have_hit, const float hit[3],
                          const float normal[3], float radius, uint8_t tool) {
  memset(out, 0, sizeof(*out));
  vec3 eye;
  vw_camera_eye(cam, eye);
  out->flags = PROTO_PRES_CAMERA;
  memcpy(out->eye, eye, sizeof(out->eye));
  memcpy(out->target, cam->target, sizeof(out->target));
  out->fov = cam->fov;
  if (!have_hit) return;
  out->flags |= PROTO_PRES_CURSOR;
  memcpy(out->hit, hit, sizeof(out->hit));
  memcpy(out->normal, normal, sizeof(out->normal));
  out->radius = radius;
  out->tool = tool;
}
