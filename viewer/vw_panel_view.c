/*
 * vw_panel_view.c — the slider panel and the key help, drawn (see vw_panel_view.h).
 */
#include "vw_panel_view.h"

#include <stdio.h>
#include <string.h>

#include "vw_hud.h"

const float vw_ink_white[4] = {0.92f, 0.92f, 0.92f, 1}, vw_ink_grey[4] = {0.6f, 0.6f, 0.62f, 1},
            vw_ink_warn[4] = {1, 0.55f, 0.3f, 1}, vw_ink_good[4] = {0.45f, 0.85f, 0.5f, 1},
            vw_ink_panel[4] = {0.08f, 0.08f, 0.09f, 0.85f}, vw_ink_mark[4] = {1, 0.85f, 0.2f, 1};
static const float bar[4] = {0.35f, 0.55f, 0.85f, 1}, bar_off[4] = {0.4f, 0.4f, 0.42f, 1};

void vw_panel_draw(vw_panel *p, vw_render *r, const client_replica *rep, const float *weights, uint32_t nweights,
                   int editable, int width, int height) {
  float pw = 280, top = 30, h = (float)height - 60;
  vw_panel_layout(p, (float)width - pw, top, pw, h, 22);
  vw_render_rect(r, p->x, p->y, p->w, p->h, vw_ink_panel);
  char line[320];
  uint32_t first, n = vw_panel_visible(p, &first);
  if (p->editing) snprintf(line, sizeof(line), "filter: %s_", p->filter);
  else if (p->filter[0]) snprintf(line, sizeof(line), "filter: %s   (/ to change)", p->filter);
  else snprintf(line, sizeof(line), "/ to filter");
  vw_render_text(r, p->x + 8, p->y + 6, 1.0f, p->editing ? vw_ink_white : vw_ink_grey, line);
  if (p->nrows > n) {
    snprintf(line, sizeof(line), "%u-%u of %u", n ? first + 1 : 0, first + n, p->nrows);
    vw_render_text(r, p->x + p->w - 8 - 6.0f * (float)strlen(line), p->y + 6, 1.0f, vw_ink_grey, line);
  }
  for (uint32_t i = 0; i < n; i++) {
    const vw_panel_row *row = &p->rows[first + i];
    float y = p->y + p->row_h * (float)(1 + i);
    if (row->kind == VW_PANEL_GROUP) {
      snprintf(line, sizeof(line), "%s %s (%u)", p->collapsed[row->index] && !p->filter[0] ? "+" : "-",
               p->group_name[row->index], row->count);
      vw_render_text(r, p->x + 8, y + 5, 1.0f, vw_ink_white, line);
      continue;
    }
    uint32_t t = row->index;
    if (t >= rep->mesh->target_count) continue;
    const client_target_meta *m = &rep->meta[t];
    int fixed = m->driver_count != 0 || !editable;
    float wv = weights && t < nweights ? weights[t] : rep->weights[t];
    float f = m->max > m->min ? (wv - m->min) / (m->max - m->min) : 0;
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    float x0, bw;
    vw_panel_slider(p, first + i, &x0, &bw);
    vw_render_rect(r, x0, y + 12, bw, 4, bar_off);
    vw_render_rect(r, x0, y + 12, bw * f, 4, fixed ? vw_ink_grey : bar);
    snprintf(line, sizeof(line), "%s %.2f%s%s", rep->mesh->targets[t].name, wv,
             (m->flags & PROTO_TARGET_MUTED) ? " (muted)" : "", m->driver_count ? " (combination)" : "");
    vw_render_text(r, x0, y, 1.0f, fixed ? vw_ink_grey : vw_ink_white, line);
  }
}

void vw_help_draw(vw_render *r) {
  float w = 640, h = 36 + 16.0f * (float)vw_hud_key_count, x = 40, y = 40;
  vw_render_rect(r, x, y, w, h, vw_ink_panel);
  vw_render_text(r, x + 12, y + 10, 1.2f, vw_ink_white, "deform-view keys (H or ? to close)");
  for (size_t i = 0; i < vw_hud_key_count; i++) {
    vw_render_text(r, x + 12, y + 32 + 16.0f * (float)i, 1.0f, vw_ink_mark, vw_hud_keys[i].keys);
    vw_render_text(r, x + 200, y + 32 + 16.0f * (float)i, 1.0f, vw_ink_white, vw_hud_keys[i].action);
  }
}
