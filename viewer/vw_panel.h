/*
 * vw_panel.h — the blendshape slider panel's logic, without a window: which rows there are
 * (targets grouped by the prefix before their first '.', so `run.pc1` … sit under `run`),
 * which of them a typed filter keeps, which are scrolled into view, and what a click or the
 * wheel at a point of the panel means. Only rows that are drawn take a click.
 *
 * Rows: a group header for each prefix that two or more targets share (collapsible), then its
 * targets indented; every other target on its own, in target order (a group sits where its
 * first target is). A filter keeps the targets whose name contains it (ASCII case ignored) and
 * the headers of the groups that keep one, expanded whatever their state.
 *
 * DOES NOT draw (vw_app.c draws what vw_panel_visible gives), read input devices, or touch the
 * network: names come in as an array, and a hit says which target and what value.
 */
#ifndef DEFORMD_VW_PANEL_H
#define DEFORMD_VW_PANEL_H

#include <stddef.h>
#include <stdint.h>

#define VW_PANEL_FILTER_MAX 63

typedef enum vw_panel_row_kind { VW_PANEL_GROUP = 0, VW_PANEL_TARGET = 1 } vw_panel_row_kind;

typedef struct vw_panel_row {
  vw_panel_row_kind kind;
  uint32_t index;   /* GROUP: the group; TARGET: the target */
  uint32_t count;   /* GROUP: its targets (all of them, filtered or not) */
  int indent;       /* TARGET: 1 under a group header */
} vw_panel_row;

typedef struct vw_panel {
  /* what the user set */
  char filter[VW_PANEL_FILTER_MAX + 1];
  int editing;          /* typing into the filter */
  uint32_t opener;      /* the character of the key that began editing, until the first one typed */
  uint32_t scroll;      /* the first row drawn */
  /* groups: name (the prefix) and whether collapsed; kept across rebuilds by name */
  char (*group_name)[64];
  uint8_t *collapsed;
  uint32_t ngroups, group_cap;
  /* the rows of the last vw_panel_build */
  vw_panel_row *rows;
  uint32_t nrows, row_cap;
  /* geometry of the last vw_panel_layout, in pixels (y down) */
  float x, y, w, h, row_h;
} vw_panel;

void vw_panel_init(vw_panel *p);
void vw_panel_fini(vw_panel *p);

/* Rebuilds the rows from the targets' names (names[i] for target i; NULL counts as ""), the
 * filter and the groups' states, and clamps the scroll. Returns 0 or -1 (out of memory: the
 * panel then has no rows). */
int vw_panel_build(vw_panel *p, const char *const *names, uint32_t count);

/* Where the panel is: its rectangle and the height of a row. */
void vw_panel_layout(vw_panel *p, float x, float y, float w, float h, float row_h);
/* Rows the rectangle holds (at least 0). */
uint32_t vw_panel_capacity(const vw_panel *p);
/* The rows drawn: rows[*first .. *first + return). */
uint32_t vw_panel_visible(const vw_panel *p, uint32_t *first);
/* Whether (mx, my) is over the panel (then the wheel scrolls it, not the camera). */
int vw_panel_contains(const vw_panel *p, double mx, double my);
/* Scrolls by `rows` (negative: up), held to the rows there are. */
void vw_panel_scroll(vw_panel *p, int rows);

/* What a click at (mx, my) hits: VW_PANEL_HIT_NONE (outside, or below the last row drawn),
 * a group header (*index: the group; vw_panel_hit toggles nothing itself), or a target's
 * slider (*index: the target, *fraction: where along the slider, 0..1, held to it). The
 * slider of a target row spans [slider_x0, slider_x0 + slider_w] (vw_panel_slider). */
typedef enum vw_panel_hit_kind { VW_PANEL_HIT_NONE = 0, VW_PANEL_HIT_GROUP, VW_PANEL_HIT_TARGET } vw_panel_hit_kind;
vw_panel_hit_kind vw_panel_hit(const vw_panel *p, double mx, double my, uint32_t *index, double *fraction);
/* The slider of visible row r (an index into rows): its left end and width in pixels. */
void vw_panel_slider(const vw_panel *p, uint32_t r, float *x0, float *w);
/* Where along target t's slider x falls (0..1, held), for a drag that leaves the row. Returns
 * -1 when t has no row drawn. */
double vw_panel_fraction(const vw_panel *p, uint32_t t, double mx);

/* Collapses or expands group g (then rebuild). */
void vw_panel_toggle(vw_panel *p, uint32_t g);

/* Filter editing: start, a typed character (printable ASCII only; others are ignored),
 * backspace, stop. Each returns 1 when the filter changed (then rebuild). */
/* `opener` is the character of the key that began it ('/', 0: none): GLFW sends that key's
 * character event right after its key event, and it is not text of the filter. */
void vw_panel_edit_begin(vw_panel *p, uint32_t opener);
int vw_panel_edit_char(vw_panel *p, uint32_t codepoint);
int vw_panel_edit_backspace(vw_panel *p);
void vw_panel_edit_end(vw_panel *p);

#endif
