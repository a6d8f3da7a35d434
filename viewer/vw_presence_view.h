/*
 * vw_presence_view.h — the session's other participants drawn in deform-view, and this
 * viewer's own cursor and camera as a presence STATE.
 *
 * Each participant is drawn in its author's colour (vw_participant.rgb): its cursor as a
 * marker with its brush circle, its name beside it, its camera as a small square where its
 * eye is with "NAME's view"; the list of who is here (role, watching or editing, idle time)
 * under the status line, the one followed marked.
 *
 * DOES NOT keep participants (vw_presence.c) or read input.
 */
#ifndef DEFORMD_VW_PRESENCE_VIEW_H
#define DEFORMD_VW_PRESENCE_VIEW_H

#include "vw_camera.h"
#include "vw_presence.h"
#include "vw_render.h"

void vw_presence_draw(vw_render *r, const vw_presence *pr, const vw_camera *cam, int width, int height,
                      uint64_t now_ms);
/* This viewer's STATE: its camera always; its cursor when have_hit (hit, unit normal, brush
 * radius in mesh units, PROTO_TOOL_*). */
void vw_presence_state_of(proto_presence_state *out, const vw_camera *cam, int have_hit, const float hit[3],
                          const float normal[3], float radius, uint8_t tool);

#endif
