/*
 * vw_brush.h — deform-view's brush controls that need no window (issue 26, Blender's keys):
 * the brushes on keys 1-8, the modifiers held when a stroke begins (Ctrl inverts, Shift
 * smooths), F / Shift+F to set the radius or the strength by moving the pointer, and the
 * stroke stabiliser (lazy mouse).
 *
 * DOES NOT read input, draw or send anything (vw_app.c does).
 */
#ifndef DEFORMD_VW_BRUSH_H
#define DEFORMD_VW_BRUSH_H

#include <stdint.h>

/* Keys 1-8: draw, grab, inflate, smooth, flatten, pinch, crease, layer; and each one's number
 * in the protocol (proto_brush.brush). */
#define VW_BRUSH_COUNT 8
#define VW_BRUSH_DRAW 0
#define VW_BRUSH_GRAB 1
#define VW_BRUSH_SMOOTH 3
extern const char *const vw_brush_names[VW_BRUSH_COUNT];
extern const uint8_t vw_brush_ids[VW_BRUSH_COUNT];

/* The brush (key index) and strength a stroke of brush `kind` at `strength` takes with Ctrl and
 * Shift as held when it began: Shift smooths (at the same strength), whatever the brush; Ctrl
 * inverts draw, inflate, crease and layer (they dig: offsets against the normal). */
int vw_brush_modified(int kind, int ctrl, int shift, float strength, float *out_strength);

/* F or Shift+F, then move: the value follows the pointer's distance from an anchor placed so
 * that the value when the key was pressed is under the pointer. */
typedef struct vw_brush_adjust {
  double ax, ay;       /* the anchor, in pixels */
  double per_px;       /* value per pixel of distance */
  float lo, hi;        /* the value's range */
  float start;         /* the value when the key was pressed (Esc or a right click restore it) */
} vw_brush_adjust;
void vw_brush_adjust_begin(vw_brush_adjust *a, double x, double y, float value, double per_px, float lo, float hi);
float vw_brush_adjust_value(const vw_brush_adjust *a, double x, double y);

/* The stabiliser: the stroke's point (*x, *y) trails the pointer (px, py) on a string of
 * `length` pixels, moving only when the pointer is farther than that. Returns 1 when it moved. */
int vw_brush_lazy(double *x, double *y, double px, double py, double length);

#endif
