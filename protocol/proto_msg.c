/*
 * proto_msg.c — encoders and decoders of every message (layouts in docs/protocol.md).
 *
 * Decoders validate everything before returning 0: afterwards the iterators over weights,
 * offsets and targets cannot run past the payload or meet a NaN. HELLO and WELCOME are in
 * proto_hello.c, the compact bodies of version 2 in proto_snap2.c.
 *
 * DOES NOT interpret messages (a receiver applies them) or do I/O.
 */
#include <math.h>
#include <string.h>

#include "proto.h"
#include "proto_internal.h"

#define CHECK(expr)            \
  do {                         \
    int rc_ = (expr);          \
    if (rc_) return rc_;       \
  } while (0)

static int finish(proto_cur *c) { return c->at == c->end ? 0 : PROTO_ETRAILING; }

/* Closes the frame started at `at`, or removes everything written since `mark` when the body
 * failed, so that a refused value never leaves half a frame in the buffer. */
static int end_or_undo(proto_buf *b, size_t mark, size_t at, int rc) {
  if (rc) {
    b->len = mark;
    return rc;
  }
  return proto_frame_end(b, at);
}

static uint32_t zigzag(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }
static int32_t unzigzag(uint32_t v) { return (int32_t)(v >> 1) ^ -(int32_t)(v & 1); }

/* ---- small messages ---------------------------------------------------------------------- */

static size_t name_len(const char *s) {
  size_t n = s ? strlen(s) : 0;
  return n;
}

static int encode_error_like(proto_buf *b, proto_type type, uint16_t code, uint32_t request_id,
                             const char *message) {
  size_t len = name_len(message);
  if (len > 1024) len = 1024; /* messages are one line for a human; keep them short */
  size_t at = proto_frame_begin(b, type, 0, 0);
  proto__put_u16(b, code);
  proto__put_u32(b, request_id);
  proto__put_u16(b, (uint16_t)len);
  uint8_t *d = proto__reserve(b, len);
  if (d && len) memcpy(d, message, len);
  return proto_frame_end(b, at);
}

int proto_encode_error(proto_buf *b, uint16_t code, uint32_t request_id, const char *message) {
  return encode_error_like(b, PROTO_ERROR, code, request_id, message);
}

int proto_encode_bye(proto_buf *b, uint16_t code, const char *message) {
  return encode_error_like(b, PROTO_BYE, code, 0, message);
}

int proto_decode_error(const uint8_t *p, size_t n, proto_error *m) {
  proto_cur c = {p, p + n};
  uint16_t len;
  const uint8_t *text;
  CHECK(proto__get_u16(&c, &m->code));
  CHECK(proto__get_u32(&c, &m->request_id));
  CHECK(proto__get_u16(&c, &len));
  if (len > 1024) return PROTO_ETOOBIG;
  CHECK(proto__get(&c, len, &text));
  m->message.ptr = (const char *)text;
  m->message.len = len;
  return finish(&c);
}

int proto_encode_ping(proto_buf *b, proto_type type, const proto_ping *m) {
  if (type != PROTO_PING && type != PROTO_PONG) return PROTO_EINVAL;
  size_t at = proto_frame_begin(b, type, 0, 0);
  proto__put_u32(b, m->seq);
  proto__put_u64(b, m->t0_ns);
  proto__put_u64(b, m->t1_ns);
  return proto_frame_end(b, at);
}

int proto_decode_ping(const uint8_t *p, size_t n, proto_ping *m) {
  proto_cur c = {p, p + n};
  CHECK(proto__get_u32(&c, &m->seq));
  CHECK(proto__get_u64(&c, &m->t0_ns));
  CHECK(proto__get_u64(&c, &m->t1_ns));
  return finish(&c);
}

/* ---- weights ------------------------------------------------------------------------------- */

/* Body: u8 mode (0 dense, 1 sparse), u32 count, then count f32 (dense) or count × (u16 index,
 * f32 value) (sparse). */
static int put_weights_body(proto_buf *b, uint32_t count, const uint32_t *indices,
                            const float *values) {
  if (count > PROTO_MAX_TARGETS) return PROTO_EINVAL;
  for (uint32_t i = 0; i < count; i++) {
    if (!isfinite(values[i])) return PROTO_ENONFINITE;
    if (indices && indices[i] >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  }
  proto__put_u8(b, indices ? 1 : 0);
  proto__put_u32(b, count);
  for (uint32_t i = 0; i < count; i++) {
    if (indices) proto__put_u16(b, (uint16_t)indices[i]);
    proto__put_f32(b, values[i]);
  }
  return 0;
}

/* QRUN / QRUN8 body: u8 mode, u32 count, u16 first, f32 scale, count × i16 (QRUN) or i8
 * (QRUN8). Exactly one of q16, q8 is given. */
static int put_weights_qrun(proto_buf *b, uint32_t first, uint32_t count, const int16_t *q16, const int8_t *q8,
                            float scale) {
  if (count > PROTO_MAX_TARGETS || first > PROTO_MAX_TARGETS - count) return PROTO_EINVAL;
  if (!isfinite(scale) || !isfinite(scale * 32768.0f)) return PROTO_ENONFINITE;
  if (scale < 0) return PROTO_EINVAL;
  if (q8)
    for (uint32_t i = 0; i < count; i++)
      if (q8[i] == INT8_MIN) return PROTO_EINVAL; /* encoders write -127 ... 127 */
  proto__put_u8(b, q8 ? PROTO_WEIGHTS_QRUN8 : PROTO_WEIGHTS_QRUN);
  proto__put_u32(b, count);
  proto__put_u16(b, (uint16_t)first);
  proto__put_f32(b, scale);
  for (uint32_t i = 0; i < count; i++) {
    if (q8) proto__put_u8(b, (uint8_t)q8[i]);
    else proto__put_u16(b, (uint16_t)q16[i]);
  }
  return 0;
}

static int get_weights_body(proto_cur *c, proto_weights_view *w) {
  uint8_t mode;
  CHECK(proto__get_u8(c, &mode));
  if (mode > PROTO_WEIGHTS_QRUN8) return PROTO_EINVAL;
  CHECK(proto__get_u32(c, &w->count));
  if (w->count > PROTO_MAX_TARGETS) return PROTO_ETOOBIG;
  w->mode = mode;
  w->dense = mode == PROTO_WEIGHTS_DENSE;
  w->first = 0;
  w->scale = 0;
  const uint8_t *bytes;
  if (mode == PROTO_WEIGHTS_QRUN || mode == PROTO_WEIGHTS_QRUN8) {
    uint16_t first;
    CHECK(proto__get_u16(c, &first));
    CHECK(proto__get_f32(c, &w->scale));
    if (!isfinite(w->scale)) return PROTO_ENONFINITE;
    if (w->scale < 0 || (uint32_t)first + w->count > PROTO_MAX_TARGETS) return PROTO_EINVAL;
    if (!isfinite(w->scale * 32768.0f)) return PROTO_ENONFINITE; /* every (float)q · scale is then finite */
    w->first = first;
    CHECK(proto__get(c, (mode == PROTO_WEIGHTS_QRUN ? 2 : 1) * (size_t)w->count, &bytes));
    w->bytes = bytes;
    return 0;
  }
  size_t each = w->dense ? 4 : 6;
  CHECK(proto__get(c, each * w->count, &bytes));
  w->bytes = bytes;
  for (uint32_t i = 0; i < w->count; i++)
    if (!isfinite(proto_load_f32(bytes + each * i + (w->dense ? 0 : 2)))) return PROTO_ENONFINITE;
  return 0;
}

/* scale = big / qmax rounded down, so that |q · scale| never exceeds the largest |w| (a weight at
 * the end of its range stays inside it); q[i] = round(w[i] / scale) clamped to ±qmax. */
static int quantize_run(const float *w, uint32_t count, float qmax, int16_t *q16, int8_t *q8, float *scale) {
  float big = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (!isfinite(w[i])) return PROTO_ENONFINITE;
    if (fabsf(w[i]) > big) big = fabsf(w[i]);
  }
  *scale = big / qmax;
  while (*scale > 0 && (double)*scale * qmax > (double)big) *scale = nextafterf(*scale, 0.0f);
  for (uint32_t i = 0; i < count; i++) {
    float r = *scale > 0 ? rintf(w[i] / *scale) : 0.0f;
    r = r > qmax ? qmax : r < -qmax ? -qmax : r;
    if (q8) q8[i] = (int8_t)r;
    else q16[i] = (int16_t)r;
  }
  return 0;
}

int proto_quantize_weights(const float *w, uint32_t count, int16_t *q, float *scale) {
  return quantize_run(w, count, 32767.0f, q, NULL, scale);
}

int proto_quantize_weights8(const float *w, uint32_t count, int8_t *q, float *scale) {
  return quantize_run(w, count, 127.0f, NULL, q, scale);
}

int proto_encode_weights_qrun(proto_buf *b, uint64_t version, uint8_t flags, uint32_t first, uint32_t count,
                              const int16_t *q, float scale) {
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_WEIGHTS, flags, version);
  return end_or_undo(b, mark, at, put_weights_qrun(b, first, count, q, NULL, scale));
}

int proto_encode_weights_qrun8(proto_buf *b, uint64_t version, uint8_t flags, uint32_t first, uint32_t count,
                               const int8_t *q, float scale) {
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_WEIGHTS, flags, version);
  return end_or_undo(b, mark, at, put_weights_qrun(b, first, count, NULL, q, scale));
}

int proto_encode_weights(proto_buf *b, uint64_t version, uint8_t flags, uint32_t count,
                         const uint32_t *indices, const float *values) {
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_WEIGHTS, flags, version);
  return end_or_undo(b, mark, at, put_weights_body(b, count, indices, values));
}

int proto_decode_weights(const uint8_t *p, size_t n, const proto_limits *limits,
                         proto_weights_view *m) {
  (void)limits;
  proto_cur c = {p, p + n};
  CHECK(get_weights_body(&c, m));
  return finish(&c);
}

void proto_weights_begin(const proto_weights_view *w, proto_iter *it) {
  memset(it, 0, sizeof(*it));
  it->at = w->bytes;
  it->left = w->count;
  it->dense = w->dense;
  it->mode = w->mode;
  it->index = w->first;
  it->scale = w->scale;
}

int proto_weights_next(proto_iter *it, uint32_t *index, float *value) {
  if (it->left == 0) return 0;
  if (it->mode == PROTO_WEIGHTS_QRUN) {
    *index = it->index++;
    *value = proto_qweight((int16_t)proto__ld16(it->at), it->scale);
    it->at += 2;
  } else if (it->mode == PROTO_WEIGHTS_QRUN8) {
    *index = it->index++;
    *value = proto_qweight((int8_t)it->at[0], it->scale);
    it->at += 1;
  } else if (it->dense) {
    *index = it->index++;
    *value = proto_load_f32(it->at);
    it->at += 4;
  } else {
    *index = proto__ld16(it->at);
    *value = proto_load_f32(it->at + 2);
    it->at += 6;
  }
  it->left--;
  return 1;
}

/* ---- offsets (DELTA, EDIT offsets, snapshot state) ----------------------------------------- */

/* Body: u32 count, u32 byte length, then per entry varint(index gap), zigzag varint q[3].
 * The gap is index - (previous + 1), or the index itself for the first entry, so indices are
 * strictly ascending by construction. */
static int put_offsets_body(proto_buf *b, uint32_t count, const uint32_t *indices,
                            const int32_t *q) {
  for (uint32_t i = 0; i < count; i++) {
    if (i > 0 && indices[i] <= indices[i - 1]) return PROTO_EINVAL;
    for (int k = 0; k < 3; k++)
      if (q[3 * (size_t)i + k] > PROTO_Q_MAX || q[3 * (size_t)i + k] < -PROTO_Q_MAX) return PROTO_EINVAL;
  }
  proto__put_u32(b, count);
  size_t len_at = b->len;
  proto__put_u32(b, 0);
  size_t start = b->len;
  for (uint32_t i = 0; i < count; i++) {
    proto__put_varint(b, i == 0 ? indices[0] : indices[i] - indices[i - 1] - 1);
    for (int k = 0; k < 3; k++) proto__put_varint(b, zigzag(q[3 * (size_t)i + k]));
  }
  if (b->failed) return PROTO_ENOMEM;
  size_t len = b->len - start;
  if (len > UINT32_MAX) return PROTO_ETOOBIG;
  proto__st32(b->data + len_at, (uint32_t)len);
  return 0;
}

/* Reads and fully validates an offsets body; vertex indices must be < vertex_limit. */
static int get_offsets_body(proto_cur *c, uint32_t vertex_limit, proto_offsets_view *o) {
  uint32_t len;
  CHECK(proto__get_u32(c, &o->count));
  CHECK(proto__get_u32(c, &len));
  if (o->count > vertex_limit) return PROTO_ETOOBIG;
  const uint8_t *bytes;
  CHECK(proto__get(c, len, &bytes));
  o->bytes = bytes;
  o->len = len;
  proto_cur e = {bytes, bytes + len};
  uint64_t index = 0;
  for (uint32_t i = 0; i < o->count; i++) {
    uint32_t gap, z;
    CHECK(proto__get_varint(&e, &gap));
    index = (i == 0) ? gap : index + 1 + gap;
    if (index >= vertex_limit) return PROTO_EINVAL;
    for (int k = 0; k < 3; k++) {
      CHECK(proto__get_varint(&e, &z));
      int32_t q = unzigzag(z);
      if (q > PROTO_Q_MAX || q < -PROTO_Q_MAX) return PROTO_EINVAL;
    }
  }
  return e.at == e.end ? 0 : PROTO_ETRAILING;
}

void proto_offsets_begin(const proto_offsets_view *o, proto_iter *it) {
  memset(it, 0, sizeof(*it));
  it->at = o->bytes;
  it->left = o->count;
}

static uint32_t read_varint_unchecked(const uint8_t **p) {
  uint32_t v = 0;
  int shift = 0;
  for (;;) {
    uint8_t byte = *(*p)++;
    v |= (uint32_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
    shift += 7;
  }
}

int proto_offsets_next(proto_iter *it, uint32_t *index, int32_t q[3]) {
  if (it->left == 0) return 0;
  uint32_t gap = read_varint_unchecked(&it->at);
  it->index = it->started ? it->index + 1 + gap : gap;
  it->started = 1;
  *index = it->index;
  for (int k = 0; k < 3; k++) q[k] = unzigzag(read_varint_unchecked(&it->at));
  it->left--;
  return 1;
}

int proto_encode_delta(proto_buf *b, uint64_t version, uint8_t flags, uint32_t count,
                       const uint32_t *indices, const int32_t *q) {
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_DELTA, flags, version);
  return end_or_undo(b, mark, at, put_offsets_body(b, count, indices, q));
}

int proto_decode_delta(const uint8_t *p, size_t n, const proto_limits *limits,
                       proto_offsets_view *m) {
  proto_limits l;
  proto__limits(limits, &l);
  proto_cur c = {p, p + n};
  CHECK(get_offsets_body(&c, l.max_vertices, m));
  return finish(&c);
}

/* ---- EDIT ------------------------------------------------------------------------------------ */

/* Payload: u32 request_id, u8 kind, then a weights body or an offsets body. */
int proto_encode_edit_weights(proto_buf *b, uint32_t request_id, uint32_t count,
                              const uint32_t *indices, const float *values) {
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_WEIGHTS);
  return end_or_undo(b, mark, at, put_weights_body(b, count, indices, values));
}

int proto_encode_edit_offsets(proto_buf *b, uint32_t request_id, uint32_t count,
                              const uint32_t *indices, const int32_t *q) {
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_OFFSETS);
  return end_or_undo(b, mark, at, put_offsets_body(b, count, indices, q));
}

/* ---- gestures, brushes, reset ---------------------------------------------------------- */

static void put_index_list(proto_buf *b, uint32_t count, const uint32_t *v) {
  proto__put_u32(b, count);
  proto__put_u32_array(b, v, count);
}

static int get_index_list(proto_cur *c, uint32_t vertex_limit, proto_index_list *l) {
  CHECK(proto__get_u32(c, &l->count));
  if (l->count > vertex_limit) return PROTO_ETOOBIG;
  CHECK(proto__get(c, 4 * (size_t)l->count, &l->bytes));
  for (uint32_t i = 0; i < l->count; i++)
    if (proto_load_u32(l->bytes + 4 * (size_t)i) >= vertex_limit) return PROTO_EINVAL;
  return 0;
}

static int all_finite_f(const float *v, int n) {
  for (int i = 0; i < n; i++)
    if (!isfinite(v[i])) return 0;
  return 1;
}

int proto_encode_edit_gesture_begin(proto_buf *b, uint32_t request_id, const proto_gesture_begin *m,
                                    const uint32_t *handle, const uint32_t *roi, const uint32_t *anchors) {
  if (m->gesture == 0 || m->mode > 2 || m->iterations < 1 || m->iterations > 100 ||
      !isfinite(m->handle_radius) || !isfinite(m->roi_radius) || m->handle_radius < 0 || m->roi_radius < 0)
    return PROTO_EINVAL;
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_GESTURE_BEGIN);
  proto__put_u32(b, m->gesture);
  proto__put_u8(b, m->mode);
  proto__put_u8(b, 0);
  proto__put_u16(b, m->iterations);
  proto__put_u32(b, m->pick);
  proto__put_f32(b, m->handle_radius);
  proto__put_f32(b, m->roi_radius);
  put_index_list(b, m->handle.count, handle);
  put_index_list(b, m->roi.count, roi);
  put_index_list(b, m->anchors.count, anchors);
  return proto_frame_end(b, at);
}

int proto_encode_edit_gesture_drag(proto_buf *b, uint32_t request_id, const proto_gesture_drag *m) {
  if (!all_finite_f(m->translate, 3) || !all_finite_f(m->rotate, 4) || !all_finite_f(m->pivot, 3))
    return PROTO_ENONFINITE;
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_GESTURE_DRAG);
  proto__put_u32(b, m->gesture);
  for (int k = 0; k < 3; k++) proto__put_f32(b, m->translate[k]);
  for (int k = 0; k < 4; k++) proto__put_f32(b, m->rotate[k]);
  proto__put_u8(b, m->has_pivot ? 1 : 0);
  for (int k = 0; k < 3; k++) proto__put_f32(b, m->pivot[k]);
  return proto_frame_end(b, at);
}

int proto_encode_edit_gesture_end(proto_buf *b, uint32_t request_id, uint32_t gesture) {
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_GESTURE_END);
  proto__put_u32(b, gesture);
  return proto_frame_end(b, at);
}

int proto_encode_edit_brush(proto_buf *b, uint32_t request_id, uint8_t brush, uint8_t falloff,
                            uint8_t flags, uint32_t count, const proto_brush_sample *samples) {
  return proto_encode_edit_brush_mirror(b, request_id, brush, falloff, flags, 0, count, samples);
}

/* A mirror plane the decoder takes: at most z, and only x beside flags bit 0. */
static int brush_mirror_ok(uint8_t flags, uint8_t mirror) {
  return mirror <= PROTO_BRUSH_AXIS_Z && !((flags & PROTO_BRUSH_MIRROR_X) && mirror > PROTO_BRUSH_AXIS_X);
}

int proto_encode_edit_brush_mirror(proto_buf *b, uint32_t request_id, uint8_t brush, uint8_t falloff,
                                   uint8_t flags, uint8_t mirror, uint32_t count, const proto_brush_sample *samples) {
  if (mirror == PROTO_BRUSH_AXIS_X) flags |= PROTO_BRUSH_MIRROR_X;
  if (brush > PROTO_MAX_BRUSH_KIND || falloff > 3 || (flags & ~PROTO_BRUSH_FLAGS_KNOWN) || count > PROTO_MAX_BRUSH_SAMPLES ||
      !brush_mirror_ok(flags, mirror))
    return PROTO_EINVAL;
  for (uint32_t i = 0; i < count; i++) {
    const proto_brush_sample *x = &samples[i];
    if (!all_finite_f(x->center, 3) || !all_finite_f(x->direction, 3) || !isfinite(x->radius) ||
        !isfinite(x->strength))
      return PROTO_ENONFINITE;
  }
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_BRUSH);
  proto__put_u8(b, brush);
  proto__put_u8(b, falloff);
  proto__put_u8(b, flags);
  proto__put_u8(b, mirror);
  proto__put_u32(b, count);
  for (uint32_t i = 0; i < count; i++) {
    const proto_brush_sample *x = &samples[i];
    for (int k = 0; k < 3; k++) proto__put_f32(b, x->center[k]);
    for (int k = 0; k < 3; k++) proto__put_f32(b, x->direction[k]);
    proto__put_f32(b, x->radius);
    proto__put_f32(b, x->strength);
  }
  return proto_frame_end(b, at);
}

int proto_encode_edit_history(proto_buf *b, uint32_t request_id, int redo) {
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, redo ? PROTO_EDIT_REDO : PROTO_EDIT_UNDO);
  return proto_frame_end(b, at);
}

int proto_encode_edit_author(proto_buf *b, uint32_t request_id, const char *author) {
  size_t n = author ? strlen(author) : 0;
  if (n == 0 || n > PROTO_MAX_AUTHOR) return PROTO_EINVAL;
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_AUTHOR);
  proto__put_str(b, author, n);
  return proto_frame_end(b, at);
}

int proto_encode_edit_reset(proto_buf *b, uint32_t request_id, uint32_t count, const uint32_t *vertices) {
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_RESET);
  put_index_list(b, count, vertices);
  return proto_frame_end(b, at);
}

/* Payload after the kind: u8 flags, f32 regularization, u32 count, count × (u32 vertex, 3 × f32). */
int proto_encode_edit_blend_pins(proto_buf *b, uint32_t request_id, uint8_t flags, float regularization,
                                 uint32_t count, const proto_blend_pin *pins) {
  if (!isfinite(regularization)) return PROTO_ENONFINITE;
  if ((flags & ~PROTO_BLEND_KEEP_CLOSE) || regularization < 0 || count == 0 || count > PROTO_MAX_BLEND_PINS)
    return PROTO_EINVAL;
  for (uint32_t i = 0; i < count; i++)
    if (!all_finite_f(pins[i].position, 3)) return PROTO_ENONFINITE;
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_BLEND_PINS);
  proto__put_u8(b, flags);
  proto__put_f32(b, regularization);
  proto__put_u32(b, count);
  for (uint32_t i = 0; i < count; i++) {
    proto__put_u32(b, pins[i].vertex);
    for (int k = 0; k < 3; k++) proto__put_f32(b, pins[i].position[k]);
  }
  return proto_frame_end(b, at);
}

void proto_blend_pin_at(const proto_blend_pins *p, uint32_t i, proto_blend_pin *out) {
  const uint8_t *q = p->pins + 16 * (size_t)i;
  out->vertex = proto_load_u32(q);
  for (int k = 0; k < 3; k++) out->position[k] = proto_load_f32(q + 4 + 4 * k);
}

void proto_brush_sample_at(const proto_brush *b, uint32_t i, proto_brush_sample *out) {
  const uint8_t *p = b->samples + 32 * (size_t)i;
  for (int k = 0; k < 3; k++) out->center[k] = proto_load_f32(p + 4 * k);
  for (int k = 0; k < 3; k++) out->direction[k] = proto_load_f32(p + 12 + 4 * k);
  out->radius = proto_load_f32(p + 24);
  out->strength = proto_load_f32(p + 28);
}

static int get_f32s(proto_cur *c, float *v, int n) {
  for (int i = 0; i < n; i++) CHECK(proto__get_f32(c, &v[i]));
  return 0;
}

static int get_gesture_begin(proto_cur *c, uint32_t vertex_limit, proto_gesture_begin *m) {
  uint8_t reserved;
  CHECK(proto__get_u32(c, &m->gesture));
  CHECK(proto__get_u8(c, &m->mode));
  CHECK(proto__get_u8(c, &reserved));
  CHECK(proto__get_u16(c, &m->iterations));
  CHECK(proto__get_u32(c, &m->pick));
  CHECK(proto__get_f32(c, &m->handle_radius));
  CHECK(proto__get_f32(c, &m->roi_radius));
  if (m->gesture == 0 || m->mode > 2 || m->iterations < 1 || m->iterations > 100 || m->handle_radius < 0 ||
      m->roi_radius < 0 || (m->pick != PROTO_NO_PICK && m->pick >= vertex_limit))
    return PROTO_EINVAL;
  CHECK(get_index_list(c, vertex_limit, &m->handle));
  CHECK(get_index_list(c, vertex_limit, &m->roi));
  CHECK(get_index_list(c, vertex_limit, &m->anchors));
  return 0;
}

static int get_brush(proto_cur *c, proto_brush *m) {
  CHECK(proto__get_u8(c, &m->brush));
  CHECK(proto__get_u8(c, &m->falloff));
  CHECK(proto__get_u8(c, &m->flags));
  CHECK(proto__get_u8(c, &m->mirror));
  CHECK(proto__get_u32(c, &m->count));
  if (m->brush > PROTO_MAX_BRUSH_KIND || m->falloff > 3 || (m->flags & ~PROTO_BRUSH_FLAGS_KNOWN) ||
      !brush_mirror_ok(m->flags, m->mirror))
    return PROTO_EINVAL;
  if (m->count > PROTO_MAX_BRUSH_SAMPLES) return PROTO_ETOOBIG;
  CHECK(proto__get(c, 32 * (size_t)m->count, &m->samples));
  for (size_t i = 0; i < 8 * (size_t)m->count; i++)
    if (!isfinite(proto_load_f32(m->samples + 4 * i))) return PROTO_ENONFINITE;
  return 0;
}

/* Counts checked against the limit before the bytes, the bytes against what is present. */
static int get_blend_pins(proto_cur *c, uint32_t vertex_limit, proto_blend_pins *m) {
  CHECK(proto__get_u8(c, &m->flags));
  CHECK(proto__get_f32(c, &m->regularization));
  CHECK(proto__get_u32(c, &m->count));
  if ((m->flags & ~PROTO_BLEND_KEEP_CLOSE) || m->regularization < 0 || m->count == 0) return PROTO_EINVAL;
  if (m->count > PROTO_MAX_BLEND_PINS) return PROTO_ETOOBIG;
  CHECK(proto__get(c, 16 * (size_t)m->count, &m->pins));
  for (uint32_t i = 0; i < m->count; i++) {
    const uint8_t *q = m->pins + 16 * (size_t)i;
    if (proto_load_u32(q) >= vertex_limit) return PROTO_EINVAL;
    for (int k = 0; k < 3; k++)
      if (!isfinite(proto_load_f32(q + 4 + 4 * k))) return PROTO_ENONFINITE;
  }
  return 0;
}

int proto_decode_edit(const uint8_t *p, size_t n, const proto_limits *limits, proto_edit *m) {
  proto_limits l;
  proto__limits(limits, &l);
  proto_cur c = {p, p + n};
  memset(m, 0, sizeof(*m));
  CHECK(proto__get_u32(&c, &m->request_id));
  CHECK(proto__get_u8(&c, &m->kind));
  if (m->kind == PROTO_EDIT_WEIGHTS)
    CHECK(get_weights_body(&c, &m->weights));
  else if (m->kind == PROTO_EDIT_OFFSETS)
    CHECK(get_offsets_body(&c, l.max_vertices, &m->offsets));
  else if (m->kind == PROTO_EDIT_GESTURE_BEGIN)
    CHECK(get_gesture_begin(&c, l.max_vertices, &m->begin));
  else if (m->kind == PROTO_EDIT_GESTURE_DRAG) {
    CHECK(proto__get_u32(&c, &m->drag.gesture));
    CHECK(get_f32s(&c, m->drag.translate, 3));
    CHECK(get_f32s(&c, m->drag.rotate, 4));
    CHECK(proto__get_u8(&c, &m->drag.has_pivot));
    CHECK(get_f32s(&c, m->drag.pivot, 3));
    if (m->drag.has_pivot > 1) return PROTO_EINVAL;
  } else if (m->kind == PROTO_EDIT_GESTURE_END)
    CHECK(proto__get_u32(&c, &m->gesture));
  else if (m->kind == PROTO_EDIT_BRUSH)
    CHECK(get_brush(&c, &m->brush));
  else if (m->kind == PROTO_EDIT_RESET)
    CHECK(get_index_list(&c, l.max_vertices, &m->reset));
  else if (m->kind == PROTO_EDIT_BLEND_PINS)
    CHECK(get_blend_pins(&c, l.max_vertices, &m->blend_pins));
  else if (m->kind == PROTO_EDIT_AUTHOR) {
    CHECK(proto__get_str(&c, &m->author));
    if (m->author.len == 0 || m->author.len > PROTO_MAX_AUTHOR) return PROTO_EINVAL;
  } else if (m->kind == PROTO_EDIT_MASK)
    CHECK(proto__get_edit_mask(&c, l.max_vertices, &m->mask));
  else if (m->kind != PROTO_EDIT_UNDO && m->kind != PROTO_EDIT_REDO)
    return PROTO_EINVAL;
  return finish(&c);
}

/* ---- SNAPSHOT -------------------------------------------------------------------------------- */

#define SNAP_HAS_UVS 0x1u

int proto_snapshot_mesh_head(proto_buf *b, const proto_mesh_desc *mesh) {
  if (mesh->target_count > PROTO_MAX_TARGETS || !(mesh->offset_quantum > 0) ||
      !isfinite(mesh->offset_quantum))
    return PROTO_EINVAL;
  proto__put_u32(b, mesh->vertex_count);
  proto__put_u32(b, mesh->triangle_count);
  proto__put_u32(b, mesh->target_count);
  proto__put_f32(b, mesh->offset_quantum);
  proto__put_u32(b, mesh->uvs ? SNAP_HAS_UVS : 0);
  return b->failed ? PROTO_ENOMEM : 0;
}

int proto_snapshot_mesh_body(proto_buf *b, const proto_mesh_desc *mesh) {
  proto__put_u32_array(b, (const uint32_t *)(const void *)mesh->positions, 3 * (size_t)mesh->vertex_count);
  proto__put_u32_array(b, mesh->triangles, 3 * (size_t)mesh->triangle_count);
  if (mesh->uvs) proto__put_u32_array(b, (const uint32_t *)(const void *)mesh->uvs, 2 * (size_t)mesh->vertex_count);
  return b->failed ? PROTO_ENOMEM : 0;
}

/* Range, flags and drivers: shared by targets and TARGET_META. */
int proto__put_meta(proto_buf *b, float min, float max, uint8_t flags, uint32_t driver_count,
                    const uint32_t *drivers) {
  if (!isfinite(min) || !isfinite(max)) return PROTO_ENONFINITE;
  if (min > max || (flags & ~PROTO_TARGET_MUTED) || driver_count > PROTO_MAX_DRIVERS) return PROTO_EINVAL;
  for (uint32_t i = 0; i < driver_count; i++)
    if (drivers[i] >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  proto__put_f32(b, min);
  proto__put_f32(b, max);
  proto__put_u8(b, flags);
  proto__put_u16(b, (uint16_t)driver_count);
  for (uint32_t i = 0; i < driver_count; i++) proto__put_u16(b, (uint16_t)drivers[i]);
  return 0;
}

int proto__get_meta(proto_cur *c, float *min, float *max, uint8_t *flags, uint32_t *driver_count,
                    const uint8_t **drivers) {
  uint16_t nd;
  CHECK(proto__get_f32(c, min));
  CHECK(proto__get_f32(c, max));
  if (*min > *max) return PROTO_EINVAL;
  CHECK(proto__get_u8(c, flags));
  if (*flags & ~PROTO_TARGET_MUTED) return PROTO_EINVAL;
  CHECK(proto__get_u16(c, &nd));
  if (nd > PROTO_MAX_DRIVERS) return PROTO_EINVAL;
  *driver_count = nd;
  CHECK(proto__get(c, 2 * (size_t)nd, drivers));
  return 0;
}

/* Drivers of target `self` must name other existing targets (below `limit`). */
int proto__check_drivers(const uint8_t *drivers, uint32_t count, uint32_t self, uint32_t limit) {
  for (uint32_t i = 0; i < count; i++) {
    uint32_t d = proto_driver(drivers, i);
    if (d >= limit || d == self) return PROTO_EINVAL;
  }
  return 0;
}

/* One target as it appears in a SNAPSHOT and in a TARGET message. */
static int put_target(proto_buf *b, const proto_target_desc *d) {
  size_t nl = name_len(d->name);
  if (nl > PROTO_MAX_NAME) return PROTO_EINVAL;
  proto__put_str(b, d->name, nl);
  proto__put_f32(b, d->default_weight);
  CHECK(proto__put_meta(b, d->min, d->max, d->flags, d->driver_count, d->drivers));
  proto__put_u32(b, d->count);
  proto__put_u32_array(b, d->indices, d->count);
  proto__put_u32_array(b, (const uint32_t *)(const void *)d->deltas, 3 * (size_t)d->count);
  return b->failed ? PROTO_ENOMEM : 0;
}

int proto_snapshot_target(proto_buf *b, const proto_target_desc *target) { return put_target(b, target); }

int proto_snapshot_mesh_part(proto_buf *b, const proto_mesh_desc *mesh,
                             const proto_target_desc *targets) {
  CHECK(proto_snapshot_mesh_head(b, mesh));
  CHECK(proto_snapshot_mesh_body(b, mesh));
  for (uint32_t t = 0; t < mesh->target_count; t++) CHECK(put_target(b, &targets[t]));
  return 0;
}

int proto_snapshot_state_part(proto_buf *b, uint32_t target_count, const float *weights,
                              uint32_t offset_count, const uint32_t *indices, const int32_t *q) {
  for (uint32_t t = 0; t < target_count; t++) {
    if (!isfinite(weights[t])) return PROTO_ENONFINITE;
    proto__put_f32(b, weights[t]);
  }
  int rc = put_offsets_body(b, offset_count, indices, q);
  if (rc) return rc;
  return b->failed ? PROTO_ENOMEM : 0;
}

int proto_encode_snapshot_head(proto_buf *b, uint64_t version, size_t mesh_part_len,
                               size_t state_part_len) {
  if (mesh_part_len + state_part_len > UINT32_MAX) return PROTO_ETOOBIG;
  size_t at = proto_frame_begin(b, PROTO_SNAPSHOT, 0, version);
  if (b->failed) return PROTO_ENOMEM;
  proto__st32(b->data + at + 8, (uint32_t)(mesh_part_len + state_part_len));
  return 0;
}

/* Checks n floats at p are finite. */
static int all_finite(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(proto_load_f32(p + 4 * i))) return 0;
  return 1;
}

static int get_target(proto_cur *c, uint32_t vertex_count, proto_target *t) {
  CHECK(proto__get_str(c, &t->name));
  CHECK(proto__get_f32(c, &t->default_weight));
  CHECK(proto__get_meta(c, &t->min, &t->max, &t->flags, &t->driver_count, &t->drivers));
  CHECK(proto__get_u32(c, &t->count));
  if (t->count > vertex_count) return PROTO_EINVAL;
  CHECK(proto__get(c, 4 * (size_t)t->count, &t->indices));
  CHECK(proto__get(c, 12 * (size_t)t->count, &t->deltas));
  return 0;
}

int proto_decode_snapshot(const uint8_t *p, size_t n, const proto_limits *limits,
                          proto_snapshot *m) {
  proto_limits l;
  proto__limits(limits, &l);
  proto_cur c = {p, p + n};
  uint32_t flags;
  memset(m, 0, sizeof(*m));
  CHECK(proto__get_u32(&c, &m->vertex_count));
  CHECK(proto__get_u32(&c, &m->triangle_count));
  CHECK(proto__get_u32(&c, &m->target_count));
  CHECK(proto__get_f32(&c, &m->offset_quantum));
  CHECK(proto__get_u32(&c, &flags));
  if (m->vertex_count > l.max_vertices || m->triangle_count > l.max_triangles ||
      m->target_count > PROTO_MAX_TARGETS)
    return PROTO_ETOOBIG;
  if (!(m->offset_quantum > 0) || (flags & ~SNAP_HAS_UVS)) return PROTO_EINVAL;
  CHECK(proto__get(&c, 12 * (size_t)m->vertex_count, &m->positions));
  if (!all_finite(m->positions, 3 * (size_t)m->vertex_count)) return PROTO_ENONFINITE;
  CHECK(proto__get(&c, 12 * (size_t)m->triangle_count, &m->triangles));
  for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++)
    if (proto_load_u32(m->triangles + 4 * i) >= m->vertex_count) return PROTO_EINVAL;
  if (flags & SNAP_HAS_UVS) {
    CHECK(proto__get(&c, 8 * (size_t)m->vertex_count, &m->uvs));
    if (!all_finite(m->uvs, 2 * (size_t)m->vertex_count)) return PROTO_ENONFINITE;
  }
  m->target_bytes = c.at;
  for (uint32_t t = 0; t < m->target_count; t++) {
    proto_target tg;
    CHECK(get_target(&c, m->vertex_count, &tg));
    CHECK(proto__check_drivers(tg.drivers, tg.driver_count, t, m->target_count));
    for (uint32_t k = 0; k < tg.count; k++) {
      uint32_t v = proto_load_u32(tg.indices + 4 * (size_t)k);
      if (v >= m->vertex_count || (k > 0 && v <= proto_load_u32(tg.indices + 4 * (size_t)(k - 1))))
        return PROTO_EINVAL;
    }
    if (!all_finite(tg.deltas, 3 * (size_t)tg.count)) return PROTO_ENONFINITE;
  }
  m->target_len = (size_t)(c.at - m->target_bytes);
  CHECK(proto__get(&c, 4 * (size_t)m->target_count, &m->weights));
  if (!all_finite(m->weights, m->target_count)) return PROTO_ENONFINITE;
  CHECK(get_offsets_body(&c, m->vertex_count, &m->offsets));
  return finish(&c);
}

/* ---- TARGET ------------------------------------------------------------------------------------- */

int proto_encode_target_add(proto_buf *b, uint64_t version, uint32_t index, float weight,
                            const proto_target_desc *d) {
  size_t nl = name_len(d->name);
  if (!isfinite(weight) || !isfinite(d->default_weight) || !isfinite(d->min) || !isfinite(d->max))
    return PROTO_ENONFINITE;
  if (nl > PROTO_MAX_NAME || d->min > d->max) return PROTO_EINVAL;
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_TARGET, 0, version);
  proto__put_u32(b, index);
  proto__put_f32(b, weight);
  return end_or_undo(b, mark, at, put_target(b, d));
}

int proto_decode_target_add(const uint8_t *p, size_t n, const proto_limits *limits, proto_target_add *m) {
  proto_limits l;
  proto__limits(limits, &l);
  proto_cur c = {p, p + n};
  CHECK(proto__get_u32(&c, &m->index));
  CHECK(proto__get_f32(&c, &m->weight));
  if (m->index >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  CHECK(get_target(&c, l.max_vertices, &m->target));
  CHECK(proto__check_drivers(m->target.drivers, m->target.driver_count, m->index, m->index)); /* drivers exist already */
  for (uint32_t k = 0; k < m->target.count; k++) {
    uint32_t v = proto_load_u32(m->target.indices + 4 * (size_t)k);
    if (v >= l.max_vertices || (k > 0 && v <= proto_load_u32(m->target.indices + 4 * (size_t)(k - 1))))
      return PROTO_EINVAL;
  }
  if (!all_finite(m->target.deltas, 3 * (size_t)m->target.count)) return PROTO_ENONFINITE;
  return finish(&c);
}

/* ---- TARGET_META -------------------------------------------------------------------------------- */

/* Payload: u32 index, then the meta fields of a target (min, max, flags, drivers). */
int proto_encode_target_meta(proto_buf *b, uint64_t version, uint8_t flags, uint32_t index, float min, float max,
                             uint8_t target_flags, uint32_t driver_count, const uint32_t *drivers) {
  if (index >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  for (uint32_t i = 0; i < driver_count; i++)
    if (drivers[i] == index) return PROTO_EINVAL;
  size_t mark = b->len;
  size_t at = proto_frame_begin(b, PROTO_TARGET_META, flags, version);
  proto__put_u32(b, index);
  return end_or_undo(b, mark, at, proto__put_meta(b, min, max, target_flags, driver_count, drivers));
}

int proto_decode_target_meta(const uint8_t *p, size_t n, const proto_limits *limits, proto_target_meta *m) {
  (void)limits;
  proto_cur c = {p, p + n};
  CHECK(proto__get_u32(&c, &m->index));
  if (m->index >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  CHECK(proto__get_meta(&c, &m->min, &m->max, &m->flags, &m->driver_count, &m->drivers));
  CHECK(proto__check_drivers(m->drivers, m->driver_count, m->index, PROTO_MAX_TARGETS));
  return finish(&c);
}

void proto_snapshot_targets_begin(const proto_snapshot *s, proto_iter *it) {
  memset(it, 0, sizeof(*it));
  it->at = s->target_bytes;
  it->end = s->target_bytes + s->target_len;
  it->left = s->target_count;
  it->index = s->vertex_count;
}

int proto_snapshot_target_next(proto_iter *it, proto_target *t) {
  if (it->left == 0) return 0;
  proto_cur c = {it->at, it->end}; /* validated by the decoder already */
  if (get_target(&c, it->index, t)) return 0;
  it->at = c.at;
  it->left--;
  return 1;
}
