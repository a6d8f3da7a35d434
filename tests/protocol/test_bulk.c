/*
 * test_bulk.c — BULK requests and answers (protocol/proto_bulk.c) against docs/protocol.md §15:
 * the documented request bytes, round trips of every kind, and each refusal in the documented
 * order with its code; the header accepts type 13 and nothing above.
 */
#include <string.h>

#include "proto.h"
#include "proto_bulk.h"
#include "test.h"

static const uint8_t *payload_of(const proto_buf *b, uint32_t *n) {
  *n = proto_load_u32(b->data + 8);
  return b->data + PROTO_HEADER_SIZE;
}

TEST(a_bulk_request_is_the_documented_bytes_and_the_header_accepts_type_13_only_up_to_it) {
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_bulk_get(&b, 7, PROTO_BULK_SCULPT, 0, 0, 100, 1), NULL);
  static const uint8_t doc[] = {0x44, 0x46, 0x4d, 0x44, 0x01, 0x00, 0x0d, 0x00, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                0x07, 0, 0, 0, 0x01, 0x02, 0x00, 0x00, 0, 0, 0, 0, 0x64, 0, 0, 0, 0x01, 0, 0, 0};
  ASSERT_EQ(b.len, sizeof(doc));
  ASSERT(memcmp(b.data, doc, sizeof(doc)) == 0);
  proto_header h;
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_EQ(h.type, PROTO_BULK);
  b.data[6] = 18; /* past TEXCLIP (17), the last type but MASK (20) */
  ASSERT_EQ(proto_header_decode(b.data, NULL, &h), PROTO_ETYPE);
  proto_buf_fini(&b);
}

TEST(bulk_requests_and_answers_round_trip_and_each_refusal_has_its_documented_code) {
  proto_buf b;
  proto_buf_init(&b);
  const float v[6] = {0.001f, 0, -0.002f, 0.25f, -0.5f, 1e-6f};
  ASSERT_OK(proto_encode_bulk_set(&b, 9, PROTO_BULK_WELDED, 12, 2, v), NULL);
  uint32_t n;
  const uint8_t *p = payload_of(&b, &n);
  ASSERT_EQ(n, (uint32_t)(PROTO_BULK_REQUEST_SIZE + 24));
  proto_bulk_request r;
  ASSERT_OK(proto_decode_bulk_request(p, n, &r), NULL);
  ASSERT(r.request_id == 9 && r.op == PROTO_BULK_SET && r.what == PROTO_BULK_SCULPT && r.flags == PROTO_BULK_WELDED);
  ASSERT(r.first == 12 && r.count == 2 && r.target == 0);
  for (int i = 0; i < 6; i++) ASSERT_EQ(proto_load_f32(r.values + 4 * i), v[i]);
  /* Every cut of the fixed part is truncated, a cut of the values too, one byte more trails. */
  uint8_t m[64];
  for (uint32_t k = 0; k < PROTO_BULK_REQUEST_SIZE; k++) ASSERT_EQ(proto_decode_bulk_request(p, k, &r), PROTO_ETRUNCATED);
  ASSERT_EQ(proto_decode_bulk_request(p, n - 1, &r), PROTO_ETRUNCATED);
  memcpy(m, p, n);
  m[n] = 0;
  ASSERT_EQ(proto_decode_bulk_request(m, n + 1, &r), PROTO_ETRAILING);
  /* op, what (a SET sets sculpt offsets only), flags, reserved, target: invalid. */
  static const struct { int at; uint8_t value; } bad[] = {{4, 0}, {4, 3}, {5, 1}, {5, 3}, {6, 2}, {7, 1}, {8, 1}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    memcpy(m, p, n);
    m[bad[i].at] = bad[i].value;
    ASSERT_EQ(proto_decode_bulk_request(m, n, &r), PROTO_EINVAL);
  }
  memcpy(m, p, n);
  memset(m + 16, 0xff, 4); /* a SET to the end */
  ASSERT_EQ(proto_decode_bulk_request(m, n, &r), PROTO_EINVAL);
  /* A GET ends after the fixed part; its target is there only for a target. */
  b.len = 0;
  ASSERT_OK(proto_encode_bulk_get(&b, 3, PROTO_BULK_TARGET, 0, 5, 0, PROTO_BULK_TO_END), NULL);
  p = payload_of(&b, &n);
  ASSERT_OK(proto_decode_bulk_request(p, n, &r), NULL);
  ASSERT(r.op == PROTO_BULK_GET && r.what == PROTO_BULK_TARGET && r.target == 5 && r.count == PROTO_BULK_TO_END);
  memcpy(m, p, n);
  m[n] = 0;
  ASSERT_EQ(proto_decode_bulk_request(m, n + 1, &r), PROTO_ETRAILING);
  m[5] = PROTO_BULK_POSITIONS;
  ASSERT_EQ(proto_decode_bulk_request(m, n, &r), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_bulk_get(&b, 3, 4, 0, 0, 0, 1), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_bulk_get(&b, 3, PROTO_BULK_SCULPT, 0, 1, 0, 1), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_bulk_set(&b, 3, 0, 0, PROTO_BULK_TO_END, v), PROTO_EINVAL);
  /* Answers: the values after the fixed part, the range within the total. */
  b.len = 0;
  proto_bulk_answer a = {77, PROTO_BULK_GET, PROTO_BULK_POSITIONS, PROTO_BULK_WELDED, 0, 3, 2, 5, NULL};
  ASSERT_OK(proto_encode_bulk_answer(&b, 9, &a, v), NULL);
  ASSERT_EQ(proto_load_u32(b.data + 12), 9u); /* the version the array shows */
  p = payload_of(&b, &n);
  proto_bulk_answer d;
  ASSERT_OK(proto_decode_bulk_answer(p, n, &d), NULL);
  ASSERT(d.request_id == 77 && d.first == 3 && d.count == 2 && d.total == 5 && d.flags == PROTO_BULK_WELDED);
  for (int i = 0; i < 6; i++) ASSERT_EQ(proto_load_f32(d.values + 4 * i), v[i]);
  ASSERT_EQ(proto_decode_bulk_answer(p, n - 1, &d), PROTO_ETRUNCATED);
  memcpy(m, p, n);
  m[20] = 4; /* total 4 < first + count */
  ASSERT_EQ(proto_decode_bulk_answer(m, n, &d), PROTO_EINVAL);
  a.count = 3; /* past the total: not encoded */
  ASSERT_EQ(proto_encode_bulk_answer(&b, 9, &a, v), PROTO_EINVAL);
  b.len = 0;
  proto_bulk_answer s = {79, PROTO_BULK_SET, PROTO_BULK_SCULPT, 0, 0, 10, 2, 41077, NULL};
  ASSERT_OK(proto_encode_bulk_answer(&b, 10, &s, NULL), NULL);
  p = payload_of(&b, &n);
  ASSERT_EQ(n, (uint32_t)PROTO_BULK_ANSWER_SIZE); /* a SET's answer carries no values */
  ASSERT_OK(proto_decode_bulk_answer(p, n, &d), NULL);
  proto_buf_fini(&b);
}
