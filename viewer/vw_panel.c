/*
 * vw_panel.c — the slider panel's rows, filter, scrolling and hit tests (see vw_panel.h).
 *
 * The panel's rectangle holds a filter line at the top, then whole rows only: a row is drawn
 * when all of it fits, and a click is matched against the rows drawn, never against the target
 * count, so the strip below the last row takes nothing.
 *
 * DOES NOT draw or read input devices.
 */
#include "vw_panel.h"

#include <stdlib.h>
#include <string.h>

#define INDENT_PX 12.0f
#define MARGIN_PX 8.0f

void vw_panel_init(vw_panel *p) { memset(p, 0, sizeof(*p)); }

void vw_panel_fini(vw_panel *p) {
  free(p->group_name);
  free(p->collapsed);
  free(p->rows);
  memset(p, 0, sizeof(*p));
}

/* The prefix of a name before its first '.', or 0 when it has none (or it is empty). */
static size_t prefix_len(const char *name) {
  const char *dot = strchr(name, '.');
  return dot && dot > name ? (size_t)(dot - name) : 0;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

/* Whether `name` contains `needle`, ASCII case ignored. */
static int contains(const char *name, const char *needle) {
  size_t n = strlen(needle);
  if (n == 0) return 1;
  for (const char *s = name; *s; s++) {
    size_t i = 0;
    while (i < n && s[i] && lower((unsigned char)s[i]) == lower((unsigned char)needle[i])) i++;
    if (i == n) return 1;
  }
  return 0;
}

/* The group called name[0..len), created (expanded) when new. Returns its index, or -1. */
static int64_t find_group(vw_panel *p, const char *name, size_t len) {
  if (len >= sizeof(p->group_name[0])) len = sizeof(p->group_name[0]) - 1;
  for (uint32_t g = 0; g < p->ngroups; g++)
    if (strlen(p->group_name[g]) == len && memcmp(p->group_name[g], name, len) == 0) return g;
  if (p->ngroups == p->group_cap) {
    uint32_t cap = p->group_cap ? 2 * p->group_cap : 16;
    char(*gn)[64] = realloc(p->group_name, sizeof(*gn) * cap);
    if (!gn) return -1;
    p->group_name = gn;
    uint8_t *c = realloc(p->collapsed, cap);
    if (!c) return -1;
    p->collapsed = c;
    p->group_cap = cap;
  }
  memcpy(p->group_name[p->ngroups], name, len);
  p->group_name[p->ngroups][len] = '\0';
  p->collapsed[p->ngroups] = 0;
  return p->ngroups++;
}

static int push_row(vw_panel *p, vw_panel_row r) {
  if (p->nrows == p->row_cap) {
    uint32_t cap = p->row_cap ? 2 * p->row_cap : 64;
    vw_panel_row *g = realloc(p->rows, sizeof(*g) * cap);
    if (!g) return -1;
    p->rows = g;
    p->row_cap = cap;
  }
  p->rows[p->nrows++] = r;
  return 0;
}

int vw_panel_build(vw_panel *p, const char *const *names, uint32_t count) {
  p->nrows = 0;
  /* Each target's group (or -1), and how many targets each group has. */
  int64_t *group = malloc(sizeof(int64_t) * ((size_t)count + 1));
  uint32_t *members = NULL;
  uint8_t *placed = NULL;
  int rc = -1;
  if (!group) goto out;
  for (uint32_t t = 0; t < count; t++) {
    const char *name = names[t] ? names[t] : "";
    size_t len = prefix_len(name);
    group[t] = len ? find_group(p, name, len) : -1;
    if (len && group[t] < 0) goto out;
  }
  members = calloc((size_t)p->ngroups + 1, sizeof(uint32_t));
  placed = calloc((size_t)p->ngroups + 1, 1);
  if (!members || !placed) goto out;
  for (uint32_t t = 0; t < count; t++)
    if (group[t] >= 0) members[group[t]]++;
  /* A prefix only one target has is no group: that target stands alone. */
  for (uint32_t t = 0; t < count; t++)
    if (group[t] >= 0 && members[group[t]] < 2) group[t] = -1;
  int filtering = p->filter[0] != '\0';
  for (uint32_t t = 0; t < count; t++) {
    const char *name = names[t] ? names[t] : "";
    if (group[t] < 0) {
      if (contains(name, p->filter) && push_row(p, (vw_panel_row){VW_PANEL_TARGET, t, 0, 0}) != 0) goto out;
      continue;
    }
    uint32_t g = (uint32_t)group[t];
    if (placed[g]) continue;
    placed[g] = 1;
    /* The group's header and, unless collapsed (or a filter is on), its kept members. */
    uint32_t kept = 0;
    for (uint32_t u = t; u < count; u++)
      if (group[u] == (int64_t)g && contains(names[u] ? names[u] : "", p->filter)) kept++;
    if (kept == 0) continue;
    if (push_row(p, (vw_panel_row){VW_PANEL_GROUP, g, members[g], 0}) != 0) goto out;
    if (p->collapsed[g] && !filtering) continue;
    for (uint32_t u = t; u < count; u++)
      if (group[u] == (int64_t)g && contains(names[u] ? names[u] : "", p->filter) &&
          push_row(p, (vw_panel_row){VW_PANEL_TARGET, u, 0, 1}) != 0)
        goto out;
  }
  rc = 0;
out:
  if (rc) p->nrows = 0;
  free(group);
  free(members);
  free(placed);
  vw_panel_scroll(p, 0); /* clamp */
  return rc;
}

void vw_panel_layout(vw_panel *p, float x, float y, float w, float h, float row_h) {
  p->x = x, p->y = y, p->w = w, p->h = h, p->row_h = row_h > 1 ? row_h : 1;
  vw_panel_scroll(p, 0);
}

uint32_t vw_panel_capacity(const vw_panel *p) {
  if (!(p->row_h > 0) || p->h <= p->row_h) return 0;
  return (uint32_t)((p->h - p->row_h) / p->row_h); /* the first row height is the filter line */
}

uint32_t vw_panel_visible(const vw_panel *p, uint32_t *first) {
  *first = p->scroll;
  uint32_t cap = vw_panel_capacity(p);
  uint32_t left = p->nrows > p->scroll ? p->nrows - p->scroll : 0;
  return left < cap ? left : cap;
}

int vw_panel_contains(const vw_panel *p, double mx, double my) {
  return mx >= p->x && mx < p->x + p->w && my >= p->y && my < p->y + p->h;
}

void vw_panel_scroll(vw_panel *p, int rows) {
  uint32_t cap = vw_panel_capacity(p), max = p->nrows > cap ? p->nrows - cap : 0;
  int64_t s = (int64_t)p->scroll + rows;
  p->scroll = s < 0 ? 0 : s > (int64_t)max ? max : (uint32_t)s;
}

void vw_panel_slider(const vw_panel *p, uint32_t r, float *x0, float *w) {
  float indent = r < p->nrows && p->rows[r].indent ? INDENT_PX : 0.0f;
  *x0 = p->x + MARGIN_PX + indent;
  *w = p->w - 2 * MARGIN_PX - indent;
  if (*w < 1) *w = 1;
}

static double along(const vw_panel *p, uint32_t r, double mx) {
  float x0, w;
  vw_panel_slider(p, r, &x0, &w);
  double f = (mx - x0) / w;
  return f < 0 ? 0 : f > 1 ? 1 : f;
}

vw_panel_hit_kind vw_panel_hit(const vw_panel *p, double mx, double my, uint32_t *index, double *fraction) {
  if (!vw_panel_contains(p, mx, my)) return VW_PANEL_HIT_NONE;
  double row = (my - p->y) / p->row_h - 1.0; /* below the filter line */
  if (row < 0) return VW_PANEL_HIT_NONE;
  uint32_t first, n = vw_panel_visible(p, &first), i = (uint32_t)row;
  if (i >= n) return VW_PANEL_HIT_NONE; /* below the last row drawn */
  const vw_panel_row *r = &p->rows[first + i];
  *index = r->index;
  if (r->kind == VW_PANEL_GROUP) return VW_PANEL_HIT_GROUP;
  if (fraction) *fraction = along(p, first + i, mx);
  return VW_PANEL_HIT_TARGET;
}

double vw_panel_fraction(const vw_panel *p, uint32_t t, double mx) {
  uint32_t first, n = vw_panel_visible(p, &first);
  for (uint32_t r = first; r < first + n; r++)
    if (p->rows[r].kind == VW_PANEL_TARGET && p->rows[r].index == t) return along(p, r, mx);
  return -1;
}

void vw_panel_toggle(vw_panel *p, uint32_t g) {
  if (g < p->ngroups) p->collapsed[g] = !p->collapsed[g];
}

void vw_panel_edit_begin(vw_panel *p, uint32_t opener) {
  p->editing = 1;
  p->opener = opener;
}
void vw_panel_edit_end(vw_panel *p) { p->editing = 0; }

int vw_panel_edit_char(vw_panel *p, uint32_t codepoint) {
  size_t n = strlen(p->filter);
  uint32_t opener = p->opener;
  p->opener = 0;
  if (p->editing && opener && codepoint == opener) return 0; /* the '/' that opened it */
  if (!p->editing || codepoint < 0x20 || codepoint > 0x7e || n >= VW_PANEL_FILTER_MAX) return 0;
  p->filter[n] = (char)codepoint;
  p->filter[n + 1] = '\0';
  p->scroll = 0;
  return 1;
}

int vw_panel_edit_backspace(vw_panel *p) {
  size_t n = strlen(p->filter);
  if (!p->editing || n == 0) return 0;
  p->filter[n - 1] = '\0';
  return 1;
}
