/*
 * proto_edit.h — EDIT, what an editor sends: weights, offsets, gestures, brush strokes, reset,
 * blend pins, undo, redo and the author name; their encoders, the one decoder (proto_decode_edit)
 * and the accessors for entries of a decoded edit.
 *
 * DOES NOT say what the server does with an edit (server/deformd/session/) and does no I/O.
 *
 * Ownership: a decoded proto_edit points into the payload it was decoded from; the payload
 * must outlive it.
 */
#ifndef DEFORMD_PROTO_EDIT_H
#define DEFORMD_PROTO_EDIT_H

#include <stddef.h>
#include <stdint.h>

#include "proto_msg.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum proto_edit_kind {
  PROTO_EDIT_WEIGHTS = 1, /* absolute weights, sparse */
  PROTO_EDIT_OFFSETS = 2,       /* absolute sculpt offsets of some vertices, quantised like DELTA */
  PROTO_EDIT_GESTURE_BEGIN = 3, /* start a Laplacian / ARAP / biharmonic drag gesture */
  PROTO_EDIT_GESTURE_DRAG = 4,  /* move a gesture's handle (rigid transform) */
  PROTO_EDIT_GESTURE_END = 5,
  PROTO_EDIT_BRUSH = 6,         /* a brush stroke: the points of its path (the server places the dabs) */
  PROTO_EDIT_RESET = 7,         /* sculpt offsets back to zero (listed vertices, or all) */
  PROTO_EDIT_BLEND_PINS = 8,    /* direct manipulation: target weights that put pinned vertices where asked */
  PROTO_EDIT_UNDO = 9,          /* undo this editor's author's newest step (history.undo) */
  PROTO_EDIT_REDO = 10,         /* redo the step it undid last (history.redo) */
  PROTO_EDIT_AUTHOR = 11,       /* the author name this connection's edits are recorded under */
  PROTO_EDIT_MASK = 12          /* a step of the author's mask: stroke, clear, invert, auto (§4.12) */
} proto_edit_kind;

/* A list of u32 vertex indices inside a payload (count, then count little-endian u32). */
typedef struct proto_index_list {
  uint32_t count;
  const uint8_t *bytes;
} proto_index_list;

#define PROTO_NO_PICK 0xffffffffu

typedef struct proto_gesture_begin {
  uint32_t gesture;       /* chosen by the client, != 0 */
  uint8_t mode;           /* 0 laplacian, 1 arap, 2 biharmonic */
  uint16_t iterations;    /* 1..100 */
  uint32_t pick;          /* render vertex, or PROTO_NO_PICK */
  float handle_radius, roi_radius;
  proto_index_list handle, roi, anchors;
} proto_gesture_begin;

typedef struct proto_gesture_drag {
  uint32_t gesture;
  float translate[3];
  float rotate[4];        /* quaternion x, y, z, w */
  uint8_t has_pivot;
  float pivot[3];
} proto_gesture_drag;

typedef struct proto_brush_sample {
  float center[3], direction[3], radius, strength;
} proto_brush_sample;

typedef struct proto_brush {
  uint8_t brush;          /* 0 grab, 1 inflate, 2 smooth, 3 flatten, 4 pinch, 5 draw, 6 crease, 7 layer */
  uint8_t falloff;        /* 0 smoothstep, 1 linear, 2 gaussian, 3 constant */
  uint8_t flags;          /* PROTO_BRUSH_*; other bits must be 0 */
  uint8_t mirror;         /* byte 8: PROTO_BRUSH_AXIS_* (0: none, or x by flags bit 0) */
  uint32_t count;
  const uint8_t *samples; /* count × 8 float32: center, direction, radius, strength */
} proto_brush;

#define PROTO_BRUSH_MIRROR_X 0x01      /* also apply the stroke mirrored across x = 0 */
#define PROTO_BRUSH_FRONT_ONLY 0x02    /* leave vertices facing away: each sample's direction
                                        * is then the direction the viewer looks in */
#define PROTO_BRUSH_CONTINUE 0x04      /* the next piece of this connection's last stroke */
#define PROTO_BRUSH_AUTOSMOOTH_SHIFT 4 /* bits 4–7: auto-smoothing n/15 */
#define PROTO_BRUSH_FLAGS_KNOWN 0xF7
#define PROTO_MAX_BRUSH_KIND 7
/* The mirror plane (byte 8, issue 26; it was reserved, sent 0, so older clients mirror as flags
 * bit 0 says): 1 x = 0 (the same as PROTO_BRUSH_MIRROR_X, which may be set with it), 2 y = 0,
 * 3 z = 0. Above 3, or 2 or 3 with PROTO_BRUSH_MIRROR_X, is PROTO_EINVAL. */
#define PROTO_BRUSH_AXIS_X 1
#define PROTO_BRUSH_AXIS_Y 2
#define PROTO_BRUSH_AXIS_Z 3

#define PROTO_MAX_BRUSH_SAMPLES 65536

/* BLEND_PINS: each pin asks for render vertex `vertex` at `position`; the server solves the
 * weights of every target that is neither muted nor a combination target (server/blend.h). */
typedef struct proto_blend_pin {
  uint32_t vertex;
  float position[3];
} proto_blend_pin;

#define PROTO_BLEND_KEEP_CLOSE 0x01 /* regularise towards the current weights (else towards 0) */
#define PROTO_MAX_BLEND_PINS 10000

typedef struct proto_blend_pins {
  uint8_t flags;          /* PROTO_BLEND_KEEP_CLOSE; other bits must be 0 */
  float regularization;   /* λ: finite, >= 0 */
  uint32_t count;         /* 1..PROTO_MAX_BLEND_PINS */
  const uint8_t *pins;    /* count × (u32 vertex, 3 × f32 position), 16 bytes each */
} proto_blend_pins;

/* MASK edits (proto_mask.c): what `op` does, and its body. */
enum { PROTO_MASK_STROKE = 0, PROTO_MASK_CLEAR = 1, PROTO_MASK_INVERT = 2, PROTO_MASK_AUTO = 3 };
#define PROTO_MAX_MASK_SAMPLES 65536
typedef struct proto_mask_edit {
  uint8_t op;             /* PROTO_MASK_* */
  uint8_t tool;           /* STROKE: 0 paint, 1 erase, 2 smooth */
  uint8_t falloff;        /* STROKE: as a brush's */
  uint32_t count;         /* STROKE: 1..PROTO_MAX_MASK_SAMPLES */
  const uint8_t *samples; /* STROKE: count × 5 float32: center, radius (> 0), strength (0..1) */
  uint8_t mode;           /* AUTO: 0 topology, 1 normal, 2 boundary */
  uint8_t combine;        /* AUTO: 0 replace, 1 add */
  uint32_t vertex;        /* AUTO topology and normal: the picked render vertex */
  float angle;            /* AUTO normal: degrees, 0..180 */
  uint16_t rings;         /* AUTO boundary: >= 1 */
} proto_mask_edit;
/* Sample i of a decoded stroke: center[3], radius, strength. */
void proto_mask_sample_at(const proto_mask_edit *m, uint32_t i, float out[5]);
int proto_encode_edit_mask(proto_buf *b, uint32_t request_id, const proto_mask_edit *m, const float *samples);
/* The MASK frame (server -> client): an author's whole mask at the session's version — the
 * vertices above 0 (ascending) and their values in (0, 1]. */
typedef struct proto_mask_view {
  uint32_t vertex_count;  /* the mesh's render vertices */
  uint32_t count;
  const uint8_t *vertices, *values; /* count × u32, count × f32 */
} proto_mask_view;
int proto_encode_mask(proto_buf *b, uint64_t version, uint32_t vertex_count, uint32_t count, const uint32_t *vertices,
                      const float *values);
/* Checks counts against the bytes, indices ascending below vertex_count, values in (0, 1]. */
int proto_decode_mask(const uint8_t *p, size_t n, proto_mask_view *m);

typedef struct proto_edit {
  uint32_t request_id; /* echoed in an ERROR that refuses it */
  uint8_t kind;        /* proto_edit_kind */
  proto_weights_view weights;
  proto_offsets_view offsets;
  proto_gesture_begin begin;
  proto_gesture_drag drag;
  uint32_t gesture;    /* GESTURE_END */
  proto_brush brush;
  proto_index_list reset; /* RESET: count 0 = every vertex */
  proto_blend_pins blend_pins; /* BLEND_PINS */
  proto_str author;            /* AUTHOR: 1 to PROTO_MAX_AUTHOR bytes */
  proto_mask_edit mask;        /* MASK */
} proto_edit;

/* Encoders append one complete frame to `b` (see proto_msg.h): they fail only for memory
 * (b->failed) and for values a decoder would refuse (nothing appended). */
/* EDIT: weights (indices may be NULL for dense) or offsets. */
int proto_encode_edit_weights(proto_buf *b, uint32_t request_id, uint32_t count,
                              const uint32_t *indices, const float *values);
int proto_encode_edit_offsets(proto_buf *b, uint32_t request_id, uint32_t count,
                              const uint32_t *indices, const int32_t *q);

int proto_encode_edit_gesture_begin(proto_buf *b, uint32_t request_id, const proto_gesture_begin *m,
                                    const uint32_t *handle, const uint32_t *roi, const uint32_t *anchors);
int proto_encode_edit_gesture_drag(proto_buf *b, uint32_t request_id, const proto_gesture_drag *m);
int proto_encode_edit_gesture_end(proto_buf *b, uint32_t request_id, uint32_t gesture);
/* BRUSH: `flags` PROTO_BRUSH_* (1 alone is mirror_x, as before). */
int proto_encode_edit_brush(proto_buf *b, uint32_t request_id, uint8_t brush, uint8_t falloff,
                            uint8_t flags, uint32_t count, const proto_brush_sample *samples);
/* The same with a mirror plane (PROTO_BRUSH_AXIS_*, 0 none; sets flags bit 0 with x, so that an
 * older server mirrors an x stroke too). */
int proto_encode_edit_brush_mirror(proto_buf *b, uint32_t request_id, uint8_t brush, uint8_t falloff,
                                   uint8_t flags, uint8_t mirror, uint32_t count, const proto_brush_sample *samples);
int proto_encode_edit_reset(proto_buf *b, uint32_t request_id, uint32_t count, const uint32_t *vertices);
/* UNDO / REDO (no body) and AUTHOR (a name of 1 to PROTO_MAX_AUTHOR bytes; PROTO_EINVAL
 * otherwise, nothing appended). */
#define PROTO_MAX_AUTHOR 64
int proto_encode_edit_history(proto_buf *b, uint32_t request_id, int redo);
int proto_encode_edit_author(proto_buf *b, uint32_t request_id, const char *author);
/* BLEND_PINS: PROTO_EINVAL for unknown flags, λ < 0, or a count of 0 or over the limit;
 * PROTO_ENONFINITE for NaN/Inf in λ or a position (nothing appended either way). */
int proto_encode_edit_blend_pins(proto_buf *b, uint32_t request_id, uint8_t flags, float regularization,
                                 uint32_t count, const proto_blend_pin *pins);

int proto_decode_edit(const uint8_t *p, size_t n, const proto_limits *limits, proto_edit *m);

/* Brush sample i of a decoded brush edit. */
void proto_brush_sample_at(const proto_brush *b, uint32_t i, proto_brush_sample *out);
/* Pin i of a decoded BLEND_PINS edit. */
void proto_blend_pin_at(const proto_blend_pins *p, uint32_t i, proto_blend_pin *out);

/* Element i of a decoded index list. */
static inline uint32_t proto_index_at(const proto_index_list *l, uint32_t i) {
  return proto_load_u32(l->bytes + 4 * (size_t)i);
}

#ifdef __cplusplus
}
#endif

#endif
