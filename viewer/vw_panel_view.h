/*
 * vw_panel_view.h — the overlay's two panels drawn in deform-view: the slider panel (vw_panel.c's
 * rows, one bar per target) and the key help (vw_hud.c's table), and the overlay's colours.
 *
 * DOES NOT lay out rows, filter or hit-test (vw_panel.c), or read input.
 */
#ifndef DEFORMD_VW_PANEL_VIEW_H
#define DEFORMD_VW_PANEL_VIEW_H

#include "client_replica.h"
#include "vw_panel.h"
#include "vw_render.h"

/* The overlay's colours (RGBA). */
extern const float vw_ink_white[4], vw_ink_grey[4], vw_ink_warn[4], vw_ink_good[4], vw_ink_panel[4], vw_ink_mark[4];

/* The slider panel at the window's right edge (width × height): each visible row of p, the
 * targets' weights from `weights` (the replica's with local overrides, nweights of them; NULL: the
 * replica's own), greyed where the weight is fixed (a combination) or !editable. p's rows must
 * match rep's targets (vw_panel_build). */
void vw_panel_draw(vw_panel *p, vw_render *r, const client_replica *rep, const float *weights, uint32_t nweights,
                   int editable, int width, int height);
/* The key help: vw_hud_keys, one line each. */
void vw_help_draw(vw_render *r);

#endif
