/*
 * vw_presence.h — who else is in the session, as deform-view knows it from PRESENCE frames
 * (docs/protocol.md §16): participants with their author, colour (proto_presence_colour, the
 * same in the page), cursor and camera; join and leave notices for the HUD; which one this
 * viewer follows; and this viewer's own cursor and camera, sent when they change (at most
 * VW_PRESENCE_HZ times a second; the server coalesces to 60 Hz anyway).
 *
 * vw_net.c feeds it (the connection's thread, under the pump's lock); vw_app.c reads it to draw
 * and to follow. No window, no GL: tested on its own and against a real deformd.
 *
 * DOES NOT decode the frame's records itself (protocol/proto_presence.c) or move a camera
 * (vw_camera_look does, from vw_presence_leader's pose).
 */
#ifndef DEFORMD_VW_PRESENCE_H
#define DEFORMD_VW_PRESENCE_H

#include <stddef.h>
#include <stdint.h>

#include "proto_presence.h"

#define VW_PRESENCE_MAX 64     /* participants kept (more are not shown) */
#define VW_PRESENCE_HZ 30      /* own cursor and camera sent at most this often */
#define VW_PRESENCE_NOTICES 4

typedef struct vw_participant {
  uint32_t id;
  char author[PROTO_MAX_AUTHOR + 1];
  uint8_t role, client, flags;     /* PROTO_ROLE_*, proto_client_kind, PROTO_PRES_* */
  uint8_t rgb[3];                  /* its author's colour */
  uint64_t active_ms;              /* when it was last active, on vw_net_now_ms's clock: the
                                    * last INFO's idle time back from its arrival, or its last STATE */
  int has_state;
  proto_presence_state state;
} vw_participant;

typedef struct vw_presence {
  uint32_t self;                   /* this connection's id (WELCOME): not drawn, not followed */
  vw_participant p[VW_PRESENCE_MAX];
  int n;
  int listed;                      /* the first list since the connection arrived: joins after
                                    * it are notices, the participants in it are not */
  uint32_t following;              /* the participant whose camera this viewer takes; 0: none */
  char notices[VW_PRESENCE_NOTICES][PROTO_MAX_AUTHOR + 48];
  uint32_t notice_count;           /* notices ever made (the newest is notices[(count-1) % N]) */
  /* this viewer's own */
  proto_presence_state mine, sent;
  uint64_t sent_ms;
  int ever_sent;
} vw_presence;

/* A new connection (WELCOME gave `self`): nobody known yet, following nobody. */
void vw_presence_reset(vw_presence *pr, uint32_t self);
/* Applies a PRESENCE payload from the server. Returns 0 or a PROTO_E* code (nothing applied). */
int vw_presence_apply(vw_presence *pr, const uint8_t *p, size_t n, uint64_t now_ms);
const vw_participant *vw_presence_find(const vw_presence *pr, uint32_t id);
/* The newest notice ("ana joined", "bob left") and its number (notice_count): the HUD flashes
 * one it has not shown. NULL when there is none. */
const char *vw_presence_notice(const vw_presence *pr);

/* Follows the next participant sharing a camera after the one followed now (in the order they
 * joined; from the first when following nobody), or nobody after the last. Returns the id (0:
 * nobody). */
uint32_t vw_presence_follow_next(vw_presence *pr);
/* The followed participant's camera: 1 with eye, target and fov; 0 when following nobody or
 * it shares no camera (now). */
int vw_presence_leader(const vw_presence *pr, float eye[3], float target[3], float *fov);

/* This viewer's cursor and camera now (flags: PROTO_PRES_CURSOR and/or CAMERA). Returns 1 when
 * they should be sent now (changed since last sent, and the last was at least 1/VW_PRESENCE_HZ s
 * ago; then they count as sent), 0 otherwise. */
int vw_presence_due(vw_presence *pr, const proto_presence_state *mine, uint64_t now_ms);

#endif
