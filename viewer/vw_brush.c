/*
 * vw_brush.c — brush controls without a window (see vw_brush.h).
 */
#include "vw_brush.h"

#include <math.h>

const char *const vw_brush_names[VW_BRUSH_COUNT] = {"draw", "grab", "inflate", "smooth", "flatten", "pinch", "crease", "layer"};
const uint8_t vw_brush_ids[VW_BRUSH_COUNT] = {5, 0, 1, 2, 3, 4, 6, 7};

int vw_brush_modified(int kind, int ctrl, int shift, float strength, float *out_strength) {
  *out_strength = strength;
  if (shift) return VW_BRUSH_SMOOTH;
  /* draw 0, inflate 2, crease 6, layer 7: Ctrl digs */
  if (ctrl && (kind == 0 || kind == 2 || kind == 6 || kind == 7)) *out_strength = -strength;
  return kind;
}

void vw_brush_adjust_begin(vw_brush_adjust *a, double x, double y, float value, double per_px, float lo, float hi) {
  a->per_px = per_px > 0 ? per_px : 1.0;
  a->ax = x - value / a->per_px;
  a->ay = y;
  a->lo = lo, a->hi = hi;
  a->start = value;
}

float vw_brush_adjust_value(const vw_brush_adjust *a, double x, double y) {
  double d = hypot(x - a->ax, y - a->ay), v = d * a->per_px;
  return (float)(v < a->lo ? a->lo : v > a->hi ? a->hi : v);
}

int vw_brush_lazy(double *x, double *y, double px, double py, double length) {
  double dx = px - *x, dy = py - *y, d = hypot(dx, dy);
  if (!(d > length)) return 0;
  double f = (d - length) / d;
  *x += f * dx, *y += f * dy;
  return 1;
}
