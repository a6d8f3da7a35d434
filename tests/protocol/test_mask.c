/*
 * test_mask.c — the mask's bytes (docs/protocol.md §4.12, §14.7): EDIT MASK in each of its four
 * forms and the MASK frame round trip field by field, and every refusal the decoders promise.
 */
#include <math.h>
#include <string.h>

#include "proto.h"
#include "proto_caps.h"
#include "test.h"

static const uint8_t *payload_of(const proto_buf *b, uint8_t type, proto_header *h) {
  ASSERT_OK(proto_header_decode(b->data, NULL, h), NULL);
  ASSERT_EQ(h->type, type);
  ASSERT_EQ(b->len, PROTO_HEADER_SIZE + h->length);
  return b->data + PROTO_HEADER_SIZE;
}

TEST(edit_mask_round_trips_each_form_and_refuses_bad_fields) {
  proto_buf b;
  proto_buf_init(&b);
  const float smp[10] = {0.1f, 0.2f, 0.3f, 0.05f, 1.0f, 0.2f, 0.2f, 0.3f, 0.04f, 0.5f};
  proto_mask_edit m = {.op = PROTO_MASK_STROKE, .tool = 2, .falloff = 3, .count = 2};
  ASSERT_OK(proto_encode_edit_mask(&b, 9, &m, smp), NULL);
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + 4 + 1 + 1 + 2 + 4 + 40);
  proto_header h;
  const uint8_t *p = payload_of(&b, PROTO_EDIT, &h);
  proto_edit e;
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT_EQ(e.kind, PROTO_EDIT_MASK);
  ASSERT_EQ(e.request_id, 9);
  ASSERT_EQ(e.mask.op, PROTO_MASK_STROKE);
  ASSERT_EQ(e.mask.tool, 2);
  ASSERT_EQ(e.mask.falloff, 3);
  ASSERT_EQ(e.mask.count, 2);
  float s[5];
  proto_mask_sample_at(&e.mask, 1, s);
  ASSERT(memcmp(s, smp + 5, sizeof(s)) == 0);
  /* A strength over 1, a radius of 0, a NaN: refused by the encoder, and by the decoder. */
  uint8_t *strength = b.data + b.len - 4;
  float two = 2.0f, nan = NAN;
  memcpy(strength, &two, 4);
  ASSERT_EQ(proto_decode_edit(p, h.length, NULL, &e), PROTO_EINVAL);
  memcpy(strength, &nan, 4);
  ASSERT_EQ(proto_decode_edit(p, h.length, NULL, &e), PROTO_ENONFINITE);
  ASSERT_EQ(proto_decode_edit(p, h.length - 1, NULL, &e), PROTO_ETRUNCATED);
  proto_buf_fini(&b);
  proto_buf_init(&b);
  float bad[5] = {0, 0, 0, 0, 1};
  ASSERT_EQ(proto_encode_edit_mask(&b, 1, &(proto_mask_edit){.op = 0, .count = 1}, bad), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_mask(&b, 1, &(proto_mask_edit){.op = 0, .tool = 3, .count = 1}, smp), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_mask(&b, 1, &(proto_mask_edit){.op = 0, .count = 0}, smp), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_mask(&b, 1, &(proto_mask_edit){.op = 4}, NULL), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0);
  /* AUTO: every field back; an angle past 180, rings 0, a vertex past the mesh refused. */
  m = (proto_mask_edit){.op = PROTO_MASK_AUTO, .mode = 1, .combine = 1, .vertex = 77, .angle = 45.0f, .rings = 3};
  ASSERT_OK(proto_encode_edit_mask(&b, 2, &m, NULL), NULL);
  p = payload_of(&b, PROTO_EDIT, &h);
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT(e.mask.op == PROTO_MASK_AUTO && e.mask.mode == 1 && e.mask.combine == 1 && e.mask.vertex == 77 &&
         e.mask.angle == 45.0f && e.mask.rings == 3);
  proto_limits small = {.max_vertices = 50};
  ASSERT_EQ(proto_decode_edit(p, h.length, &small, &e), PROTO_EINVAL);
  proto_buf_fini(&b);
  proto_buf_init(&b);
  m.angle = 181.0f;
  ASSERT_EQ(proto_encode_edit_mask(&b, 2, &m, NULL), PROTO_EINVAL);
  m.angle = 10.0f, m.rings = 0;
  ASSERT_EQ(proto_encode_edit_mask(&b, 2, &m, NULL), PROTO_EINVAL);
  /* CLEAR and INVERT: the op alone. */
  ASSERT_OK(proto_encode_edit_mask(&b, 3, &(proto_mask_edit){.op = PROTO_MASK_INVERT}, NULL), NULL);
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + 6);
  p = payload_of(&b, PROTO_EDIT, &h);
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT_EQ(e.mask.op, PROTO_MASK_INVERT);
  proto_buf_fini(&b);
}

TEST(the_mask_frame_round_trips_needs_the_mask_capability_and_refuses_bad_lists) {
  proto_buf b;
  proto_buf_init(&b);
  const uint32_t v[3] = {2, 5, 9};
  const float m[3] = {0.25f, 1.0f, 0.5f};
  ASSERT_OK(proto_encode_mask(&b, 42, 10, 3, v, m), NULL);
  proto_header h;
  const uint8_t *p = payload_of(&b, PROTO_MASK, &h);
  ASSERT_EQ(h.session_version, 42);
  ASSERT_EQ(h.length, 8 + 24);
  ASSERT_EQ(proto_cap_of_type(PROTO_MASK), PROTO_CAP_MASK);
  ASSERT_STR_CONTAINS(proto_cap_name(PROTO_CAP_MASK), "mask");
  proto_mask_view x;
  ASSERT_OK(proto_decode_mask(p, h.length, &x), NULL);
  ASSERT(x.vertex_count == 10 && x.count == 3 && proto_load_u32(x.vertices + 8) == 9 && proto_load_f32(x.values + 4) == 1.0f);
  ASSERT_EQ(proto_decode_mask(p, h.length - 1, &x), PROTO_ETRUNCATED);
  uint8_t copy[64];
  memcpy(copy, p, h.length);
  copy[h.length] = 0;
  ASSERT_EQ(proto_decode_mask(copy, h.length + 1, &x), PROTO_ETRAILING);
  memcpy(copy + 8 + 4, "\x02\x00\x00\x00", 4); /* 2, 2: not ascending */
  ASSERT_EQ(proto_decode_mask(copy, h.length, &x), PROTO_EINVAL);
  memcpy(copy, p, h.length);
  memset(copy + 8 + 12, 0, 4); /* a value of 0 is not listed */
  ASSERT_EQ(proto_decode_mask(copy, h.length, &x), PROTO_EINVAL);
  memcpy(copy, p, h.length);
  copy[0] = 2; /* more entries than vertices */
  ASSERT_EQ(proto_decode_mask(copy, h.length, &x), PROTO_EINVAL);
  proto_buf_fini(&b);
  proto_buf_init(&b);
  const float over[1] = {1.5f};
  ASSERT_EQ(proto_encode_mask(&b, 1, 10, 1, v, over), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_mask(&b, 1, 5, 3, v, m), PROTO_EINVAL);
  ASSERT_OK(proto_encode_mask(&b, 1, 5, 0, NULL, NULL), NULL); /* an empty mask */
  proto_buf_fini(&b);
}
