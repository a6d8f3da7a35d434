/*
 * vw_hud.h — what deform-view's overlay says, without a window: the connection's state as one
 * of four words (DISCONNECTED, CONNECTING, READ-ONLY, EDITOR) with the reason, messages that
 * flash for a few seconds (an edit the server refused, an edit that cannot be sent, a pick
 * that missed), and the table of keys that the help overlay and `deform-view --help` print.
 *
 * Errors clear when they no longer hold: a connection error is part of the DISCONNECTED or
 * CONNECTING status, so it goes when the connection comes back; a refused edit flashes and
 * goes.
 *
 * DOES NOT draw or read input: vw_app.c draws the strings.
 */
#ifndef DEFORMD_VW_HUD_H
#define DEFORMD_VW_HUD_H

#include <stddef.h>
#include <stdint.h>

#include "vw_net.h"

typedef enum vw_hud_state {
  VW_HUD_DISCONNECTED = 0, /* no connection: retrying, showing the last shape if any */
  VW_HUD_CONNECTING,       /* connecting, or waiting for WELCOME and the SNAPSHOT */
  VW_HUD_READ_ONLY,        /* following the session as a viewer, or on a relay whose primary is
                            * lost (PRIMARY_LOST): edits are not sent */
  VW_HUD_EDITOR            /* following the session as an editor */
} vw_hud_state;

const char *vw_hud_state_name(vw_hud_state s);

/* The state of `n` and, in `why`, the sentence that explains it (the server's reason for a
 * lost or refused connection, with the sessions it has when the session is unknown; why the
 * connection is read-only, a relay's lost primary included; the retry countdown, naming the
 * address tried next when there are several). `now_ms` is vw_net_now_ms(). */
vw_hud_state vw_hud_status(const vw_net *n, uint64_t now_ms, char *why, size_t len);

/* Why an edit cannot be sent now (read-only, not connected, the primary lost), or NULL when
 * it can (vw_net_can_edit, and no lost primary). */
const char *vw_hud_why_no_edit(const vw_net *n);

#define VW_HUD_FLASH_MS 5000u

typedef struct vw_hud {
  char flash[320];
  uint64_t flash_until;
  uint32_t errors_seen;  /* n->errors already flashed */
} vw_hud;

/* Shows a message until now + VW_HUD_FLASH_MS. */
void vw_hud_flash(vw_hud *h, uint64_t now_ms, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The message showing now, or NULL. */
const char *vw_hud_message(const vw_hud *h, uint64_t now_ms);
/* Flashes each ERROR the server sent about one of our edits since the last call ("edit
 * refused: ..."); errors about the connection itself are the status's, not flashed. */
void vw_hud_watch(vw_hud *h, const vw_net *n, uint64_t now_ms);

/* Every key and mouse action of the viewer, for the help overlay and --help. */
typedef struct vw_hud_key {
  const char *keys, *action;
} vw_hud_key;
extern const vw_hud_key vw_hud_keys[];
extern const size_t vw_hud_key_count;

#endif
