/*
 * proto_mask.c — masks on the wire (docs/protocol.md §4.12 and §14.7): the EDIT MASK body an
 * editor sends (a stroke, clear, invert or auto-mask of its author's mask) and the MASK frame
 * the server sends back to that author's connections granted the capability "mask".
 *
 * A MASK frame carries the whole mask (invariant 1: absolute values), the vertices above 0 as
 * two planes, so the newest frame alone makes a viewer exact; masks are small next to a mesh.
 *
 * DOES NOT apply a mask or decide who is sent one.
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

static int bad_sample(const float *s) {
  for (int k = 0; k < 5; k++)
    if (!isfinite(s[k])) return PROTO_ENONFINITE;
  return s[3] > 0.0f && s[4] >= 0.0f && s[4] <= 1.0f ? 0 : PROTO_EINVAL;
}

static int bad_fields(const proto_mask_edit *m) {
  if (m->op > PROTO_MASK_AUTO) return PROTO_EINVAL;
  if (m->op == PROTO_MASK_STROKE && (m->tool > 2 || m->falloff > 3 || m->count == 0)) return PROTO_EINVAL;
  if (m->op == PROTO_MASK_STROKE && m->count > PROTO_MAX_MASK_SAMPLES) return PROTO_ETOOBIG;
  if (m->op == PROTO_MASK_AUTO) {
    if (!isfinite(m->angle)) return PROTO_ENONFINITE;
    if (m->mode > 2 || m->combine > 1 || !(m->angle >= 0.0f && m->angle <= 180.0f) || m->rings == 0) return PROTO_EINVAL;
  }
  return 0;
}

int proto_encode_edit_mask(proto_buf *b, uint32_t request_id, const proto_mask_edit *m, const float *samples) {
  int rc = bad_fields(m);
  for (uint32_t i = 0; !rc && m->op == PROTO_MASK_STROKE && i < m->count; i++) rc = bad_sample(samples + 5 * (size_t)i);
  if (rc) return rc;
  size_t at = proto_frame_begin(b, PROTO_EDIT, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, PROTO_EDIT_MASK);
  proto__put_u8(b, m->op);
  if (m->op == PROTO_MASK_STROKE) {
    proto__put_u8(b, m->tool);
    proto__put_u8(b, m->falloff);
    proto__put_u32(b, m->count);
    for (size_t i = 0; i < 5 * (size_t)m->count; i++) proto__put_f32(b, samples[i]);
  } else if (m->op == PROTO_MASK_AUTO) {
    proto__put_u8(b, m->mode);
    proto__put_u8(b, m->combine);
    proto__put_u32(b, m->vertex);
    proto__put_f32(b, m->angle);
    proto__put_u16(b, m->rings);
  }
  return proto_frame_end(b, at);
}

int proto__get_edit_mask(proto_cur *c, uint32_t vertex_limit, proto_mask_edit *m) {
  CHECK(proto__get_u8(c, &m->op));
  if (m->op == PROTO_MASK_STROKE) {
    CHECK(proto__get_u8(c, &m->tool));
    CHECK(proto__get_u8(c, &m->falloff));
    CHECK(proto__get_u32(c, &m->count));
    CHECK(bad_fields(m)); /* the count against its limit before the bytes */
    CHECK(proto__get(c, 20 * (size_t)m->count, &m->samples));
    for (uint32_t i = 0; i < m->count; i++) {
      float s[5];
      proto_mask_sample_at(m, i, s);
      CHECK(bad_sample(s));
    }
    return 0;
  }
  if (m->op == PROTO_MASK_AUTO) {
    CHECK(proto__get_u8(c, &m->mode));
    CHECK(proto__get_u8(c, &m->combine));
    CHECK(proto__get_u32(c, &m->vertex));
    const uint8_t *a;
    CHECK(proto__get(c, 4, &a)); /* NaN is refused by bad_fields, as PROTO_ENONFINITE */
    m->angle = proto_load_f32(a);
    CHECK(proto__get_u16(c, &m->rings));
    if (m->mode != 2 && m->vertex >= vertex_limit) return PROTO_EINVAL;
  }
  return bad_fields(m);
}

void proto_mask_sample_at(const proto_mask_edit *m, uint32_t i, float out[5]) {
  for (int k = 0; k < 5; k++) out[k] = proto_load_f32(m->samples + 20 * (size_t)i + 4 * k);
}

int proto_encode_mask(proto_buf *b, uint64_t version, uint32_t vertex_count, uint32_t count, const uint32_t *vertices,
                      const float *values) {
  if (count > vertex_count) return PROTO_EINVAL;
  for (uint32_t i = 0; i < count; i++)
    if (vertices[i] >= vertex_count || (i && vertices[i] <= vertices[i - 1]) || !(values[i] > 0.0f && values[i] <= 1.0f))
      return PROTO_EINVAL;
  size_t at = proto_frame_begin(b, PROTO_MASK, 0, version);
  proto__put_u32(b, vertex_count);
  proto__put_u32(b, count);
  for (uint32_t i = 0; i < count; i++) proto__put_u32(b, vertices[i]);
  for (uint32_t i = 0; i < count; i++) proto__put_f32(b, values[i]);
  return proto_frame_end(b, at);
}

int proto_decode_mask(const uint8_t *p, size_t n, proto_mask_view *m) {
  proto_cur c = {p, p + n};
  memset(m, 0, sizeof(*m));
  CHECK(proto__get_u32(&c, &m->vertex_count));
  CHECK(proto__get_u32(&c, &m->count));
  if (m->count > m->vertex_count) return PROTO_EINVAL;
  CHECK(proto__get(&c, 4 * (size_t)m->count, &m->vertices));
  CHECK(proto__get(&c, 4 * (size_t)m->count, &m->values));
  if (c.at != c.end) return PROTO_ETRAILING;
  for (uint32_t i = 0; i < m->count; i++) {
    uint32_t v = proto_load_u32(m->vertices + 4 * (size_t)i);
    float f = proto_load_f32(m->values + 4 * (size_t)i);
    if (v >= m->vertex_count || (i && v <= proto_load_u32(m->vertices + 4 * (size_t)i - 4))) return PROTO_EINVAL;
    if (!isfinite(f)) return PROTO_ENONFINITE;
    if (!(f > 0.0f && f <= 1.0f)) return PROTO_EINVAL;
  }
  return 0;
}
