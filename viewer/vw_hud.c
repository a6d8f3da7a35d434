/*
 * vw_hud.c — the overlay's words: connection status, flashing messages, the key table (see
 * vw_hud.h).
 *
 * DOES NOT draw or read input.
 */
#include "vw_hud.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const vw_hud_key vw_hud_keys[] = {
    /* Blender's mapping (issue 26); the browser page's key sheet lists the same. */
    {"middle drag", "orbit about the point under the cursor"},
    {"Shift+middle drag", "pan"},
    {"wheel", "zoom toward the cursor (never into the mesh); over the slider panel, scroll it"},
    {"left drag", "orbit (view mode; Shift: pan), drag a handle (drag mode), brush (brush mode)"},
    {"Home", "frame the whole mesh"},
    {"keypad .", "frame the region under the cursor"},
    {"keypad 1, 3, 7", "front, right, top view about the session's up axis (Ctrl: back, left, bottom)"},
    {"W", "wireframe"},
    {"C", "shading: lit, then the matcaps clay, red wax, skin (cycles; --shading)"},
    {"T", "blendshape slider panel (none when the session has no targets)"},
    {"/", "filter the sliders by name: type, Backspace, Enter or Esc to finish"},
    {"click a group", "fold or unfold the targets under it (run.pc1 ... under run)"},
    {"V, G, B", "view mode, drag mode (a gesture on the server), brush mode"},
    {"Q", "drag mode: gesture mode ARAP, Laplacian, biharmonic (cycles)"},
    {"1-8", "brush: draw, grab, inflate, smooth, flatten, pinch, crease, layer"},
    {"Ctrl (held)", "invert the brush: draw, inflate, crease and layer dig"},
    {"Shift (held)", "smooth while held (any brush)"},
    {"F, then move", "brush radius (drag mode: region radius); click or Enter keeps, Esc or right click cancels"},
    {"Shift+F, then move", "brush strength (drag mode: handle size)"},
    {"[ ]", "brush radius smaller, larger"},
    {"- =", "brush strength lower, higher"},
    {"S", "stroke stabiliser (lazy mouse, 24 pixels) on or off"},
    {"X, Y, Z", "symmetry: mirror brushes across x = 0, y = 0 or z = 0 (one plane; the same key again: off)"},
    {"M", "mask brush: drag paints your mask (held vertices, drawn darker), Ctrl+drag erases it"},
    {"Alt+M", "clear your mask"},
    {"Ctrl+I", "invert your mask"},
    {"A", "auto-smoothing on or off"},
    {"N", "front faces only on or off"},
    {"Ctrl+Z, Ctrl+Y or Ctrl+Shift+Z", "undo, redo"},
    {"P", "follow the next participant's camera (after the last: nobody); orbiting stops it"},
    {"H, ?", "this help"},
    {"Esc", "close the help, stop filtering, or quit"},
};
const size_t vw_hud_key_count = sizeof(vw_hud_keys) / sizeof(vw_hud_keys[0]);

const char *vw_hud_state_name(vw_hud_state s) {
  switch (s) {
    case VW_HUD_DISCONNECTED: return "DISCONNECTED";
    case VW_HUD_CONNECTING: return "CONNECTING";
    case VW_HUD_READ_ONLY: return "READ-ONLY";
    case VW_HUD_EDITOR: return "EDITOR";
  }
  return "?";
}

/* Why a live connection is read-only. */
static const char *read_only_reason(const vw_net *n) {
  if (n->want_role == PROTO_ROLE_EDITOR)
    return "read-only: the server wants a token with the editor role to edit (--token-file or $DEFORMD_TOKEN); "
           "watching instead";
  return "read-only: joined as a viewer (--role viewer)";
}

/* A relay whose primary is lost shows the primary's last state and refuses edits until it is
 * back (docs/protocol.md §13.2): read-only for now, whatever the role. */
#define PRIMARY_LOST_REASON "primary lost: this relay shows its last state; edits are refused until it is back"

vw_hud_state vw_hud_status(const vw_net *n, uint64_t now_ms, char *why, size_t len) {
  why[0] = '\0';
  if (n->state == VW_NET_LIVE) {
    if (n->primary_lost) {
      snprintf(why, len, "%s", PRIMARY_LOST_REASON);
      return VW_HUD_READ_ONLY;
    }
    if (vw_net_can_edit(n)) return VW_HUD_EDITOR;
    snprintf(why, len, "%s", read_only_reason(n));
    return VW_HUD_READ_ONLY;
  }
  if (n->state == VW_NET_CONNECTING) {
    snprintf(why, len, "connecting to %s:%d, session '%s' ...", n->host, n->port, n->session);
    return VW_HUD_CONNECTING;
  }
  double left = n->retry_at_ms > now_ms ? (double)(n->retry_at_ms - now_ms) / 1000.0 : 0.0;
  char next[300] = ""; /* with several addresses the next try is another node's */
  if (n->address_count > 1) snprintf(next, sizeof(next), " %s:%d", n->host, n->port);
  snprintf(why, len, "%s; retrying%s in %.1f s%s", n->last_error[0] ? n->last_error : "connection lost", next, left,
           n->replica.have_snapshot ? "; showing the last shape" : "");
  return VW_HUD_DISCONNECTED;
}

const char *vw_hud_why_no_edit(const vw_net *n) {
  if (n->state != VW_NET_LIVE) return "not connected: the edit was not sent";
  if (n->primary_lost) return PRIMARY_LOST_REASON;
  if (!vw_net_can_edit(n)) return read_only_reason(n);
  return NULL;
}

void vw_hud_flash(vw_hud *h, uint64_t now_ms, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->flash, sizeof(h->flash), fmt, ap);
  va_end(ap);
  h->flash_until = now_ms + VW_HUD_FLASH_MS;
}

const char *vw_hud_message(const vw_hud *h, uint64_t now_ms) {
  return h->flash[0] && now_ms < h->flash_until ? h->flash : NULL;
}

void vw_hud_watch(vw_hud *h, const vw_net *n, uint64_t now_ms) {
  if (n->errors == h->errors_seen) return;
  h->errors_seen = n->errors;
  /* An ERROR naming a request refused one of our edits; one without comes with a lost
   * connection, which the status shows for as long as it holds. */
  if (n->last_error_request) vw_hud_flash(h, now_ms, "edit refused: %s", n->last_error);
}
