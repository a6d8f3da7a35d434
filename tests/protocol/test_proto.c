/*
 * test_proto.c — the wire format: round trips, and every kind of malformed input refused with
 * the right code (never a crash, never a read past the payload: ASan runs these too).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "proto.h"
#include "test.h"

/* Splits the single frame in b into header + payload, checking the header. */
static const uint8_t *one_frame(const proto_buf *b, proto_header *h, proto_type type) {
  ASSERT(!b->failed);
  ASSERT(b->len >= PROTO_HEADER_SIZE);
  ASSERT_OK(proto_header_decode(b->data, NULL, h), NULL);
  ASSERT_EQ(h->type, type);
  ASSERT_EQ(h->length, b->len - PROTO_HEADER_SIZE);
  return b->data + PROTO_HEADER_SIZE;
}

TEST(header_round_trips_and_bad_headers_are_named) {
  uint8_t bytes[PROTO_HEADER_SIZE];
  proto_header h = {PROTO_MAGIC, PROTO_VERSION, PROTO_WEIGHTS, PROTO_FLAG_CATCHUP, 1234, 0x0102030405060708ull};
  proto_header_encode(&h, bytes);
  /* The layout is the documented one: magic "DFMD", little-endian fields. */
  ASSERT(memcmp(bytes, "DFMD", 4) == 0);
  ASSERT_EQ(bytes[4], 1);
  ASSERT_EQ(bytes[6], PROTO_WEIGHTS);
  ASSERT_EQ(bytes[8], 1234 & 0xff);
  ASSERT_EQ(bytes[12], 0x08);
  proto_header d;
  ASSERT_OK(proto_header_decode(bytes, NULL, &d), NULL);
  ASSERT_EQ(d.length, 1234);
  ASSERT(d.session_version == 0x0102030405060708ull);
  ASSERT_EQ(d.flags, PROTO_FLAG_CATCHUP);

  uint8_t bad[PROTO_HEADER_SIZE];
  memcpy(bad, bytes, sizeof(bad));
  bad[0] = 'X';
  ASSERT_EQ(proto_header_decode(bad, NULL, &d), PROTO_EMAGIC);
  memcpy(bad, bytes, sizeof(bad));
  bad[4] = 9;
  ASSERT_EQ(proto_header_decode(bad, NULL, &d), PROTO_EVERSION);
  memcpy(bad, bytes, sizeof(bad));
  bad[6] = 200;
  ASSERT_EQ(proto_header_decode(bad, NULL, &d), PROTO_ETYPE);
  proto_limits small = {.max_frame = 1000};
  ASSERT_EQ(proto_header_decode(bytes, &small, &d), PROTO_ETOOBIG);
  h.length = PROTO_DEFAULT_MAX_FRAME + 1;
  proto_header_encode(&h, bytes);
  ASSERT_EQ(proto_header_decode(bytes, NULL, &d), PROTO_ETOOBIG); /* default limit: 64 MiB */
}

TEST(hello_welcome_error_ping_round_trip) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hi = {PROTO_VERSION, PROTO_ROLE_EDITOR, {"demo", 4}, {"secret", 6}};
  ASSERT_OK(proto_encode_hello(&b, &hi), NULL);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_HELLO);
  proto_hello hd;
  ASSERT_OK(proto_decode_hello(p, h.length, &hd), NULL);
  ASSERT_EQ(hd.role, PROTO_ROLE_EDITOR);
  ASSERT(hd.session.len == 4 && memcmp(hd.session.ptr, "demo", 4) == 0);
  ASSERT(hd.token.len == 6 && memcmp(hd.token.ptr, "secret", 6) == 0);

  b.len = 0;
  proto_welcome w = {42, PROTO_ROLE_VIEWER, {"demo", 4}};
  ASSERT_OK(proto_encode_welcome(&b, 7, &w), NULL);
  p = one_frame(&b, &h, PROTO_WELCOME);
  ASSERT_EQ(h.session_version, 7);
  proto_welcome wd;
  ASSERT_OK(proto_decode_welcome(p, h.length, &wd), NULL);
  ASSERT_EQ(wd.client_id, 42);

  b.len = 0;
  ASSERT_OK(proto_encode_error(&b, PROTO_ERR_INVALID, 99, "weight is NaN"), NULL);
  p = one_frame(&b, &h, PROTO_ERROR);
  proto_error e;
  ASSERT_OK(proto_decode_error(p, h.length, &e), NULL);
  ASSERT_EQ(e.code, PROTO_ERR_INVALID);
  ASSERT_EQ(e.request_id, 99);
  ASSERT(e.message.len == 13 && memcmp(e.message.ptr, "weight is NaN", 13) == 0);

  b.len = 0;
  proto_ping ping = {123456789ull, 987654321ull, 5};
  ASSERT_OK(proto_encode_ping(&b, PROTO_PONG, &ping), NULL);
  p = one_frame(&b, &h, PROTO_PONG);
  proto_ping pd;
  ASSERT_OK(proto_decode_ping(p, h.length, &pd), NULL);
  ASSERT(pd.t0_ns == ping.t0_ns && pd.t1_ns == ping.t1_ns && pd.seq == 5);
  proto_buf_fini(&b);
}

TEST(weights_round_trip_dense_and_sparse) {
  proto_buf b;
  proto_buf_init(&b);
  float dense[5] = {0, 0.25f, -1.5f, 1, 0.125f};
  ASSERT_OK(proto_encode_weights(&b, 3, 0, 5, NULL, dense), NULL);
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + 1 + 4 + 5 * 4);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_WEIGHTS);
  proto_weights_view w;
  ASSERT_OK(proto_decode_weights(p, h.length, NULL, &w), NULL);
  proto_iter it;
  uint32_t idx;
  float v;
  proto_weights_begin(&w, &it);
  for (uint32_t i = 0; i < 5; i++) {
    ASSERT(proto_weights_next(&it, &idx, &v));
    ASSERT_EQ(idx, i);
    ASSERT(v == dense[i]);
  }
  ASSERT(!proto_weights_next(&it, &idx, &v));

  b.len = 0;
  uint32_t si[2] = {51, 7};
  float sv[2] = {0.8f, 1.0f};
  ASSERT_OK(proto_encode_weights(&b, 4, 0, 2, si, sv), NULL);
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + 1 + 4 + 2 * 6); /* 6 bytes per changed target */
  p = one_frame(&b, &h, PROTO_WEIGHTS);
  ASSERT_OK(proto_decode_weights(p, h.length, NULL, &w), NULL);
  proto_weights_begin(&w, &it);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 51 && v == 0.8f);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 7 && v == 1.0f);
  proto_buf_fini(&b);
}

TEST(quantised_weight_runs_decode_byte_by_byte_and_round_within_half_a_step) {
  proto_buf b;
  proto_buf_init(&b);
  int16_t q[3] = {1, -2, 32767};
  ASSERT_OK(proto_encode_weights_qrun(&b, 9, 0, 3, 3, q, 0.5f), NULL);
  /* Written out by hand: mode 2, count 3, first 3, scale 0.5f, three i16. */
  static const uint8_t want[] = {0x02, 0x03, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x3f,
                                 0x01, 0x00, 0xfe, 0xff, 0xff, 0x7f};
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + sizeof(want));
  ASSERT(memcmp(b.data + PROTO_HEADER_SIZE, want, sizeof(want)) == 0);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_WEIGHTS);
  proto_weights_view w;
  ASSERT_OK(proto_decode_weights(p, h.length, NULL, &w), NULL);
  ASSERT_EQ(w.mode, PROTO_WEIGHTS_QRUN);
  proto_iter it;
  uint32_t idx;
  float v;
  proto_weights_begin(&w, &it);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 3 && v == 0.5f);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 4 && v == -1.0f);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 5 && v == 16383.5f);
  ASSERT(!proto_weights_next(&it, &idx, &v));
  /* A run past the last target, a negative or NaN scale: refused both ways. */
  b.len = 0;
  ASSERT_EQ(proto_encode_weights_qrun(&b, 9, 0, 65534, 3, q, 0.5f), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_weights_qrun(&b, 9, 0, 0, 3, q, -0.5f), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_weights_qrun(&b, 9, 0, 0, 3, q, NAN), PROTO_ENONFINITE);
  ASSERT_EQ(b.len, 0);
  uint8_t bad[sizeof(want)];
  memcpy(bad, want, sizeof(want));
  bad[5] = 0xfe, bad[6] = 0xff; /* first 65534 + 3 targets */
  ASSERT_EQ(proto_decode_weights(bad, sizeof(bad), NULL, &w), PROTO_EINVAL);
  memcpy(bad, want, sizeof(want));
  bad[10] = 0xbf; /* scale -0.5 */
  ASSERT_EQ(proto_decode_weights(bad, sizeof(bad), NULL, &w), PROTO_EINVAL);
  ASSERT_EQ(proto_decode_weights(want, sizeof(want) - 1, NULL, &w), PROTO_ETRUNCATED);
  /* Quantising: the largest magnitude maps to ±32767, every value is within half a step, and
   * all zeros give scale 0. */
  float in[5] = {0.5f, -1.0f, 0.25f, 1e-7f, 0.0f};
  int16_t out[5];
  float scale;
  ASSERT_OK(proto_quantize_weights(in, 5, out, &scale), NULL);
  ASSERT((double)scale * 32767.0 <= 1.0 && scale >= nextafterf(1.0f / 32767.0f, 0.0f)); /* rounded down */
  ASSERT_EQ(out[1], -32767);
  ASSERT(fabsf(proto_qweight(out[1], scale)) <= 1.0f); /* the largest stays inside its range */
  for (int i = 0; i < 5; i++) ASSERT(fabsf(proto_qweight(out[i], scale) - in[i]) <= 0.5f * scale * (1 + 1e-4f) + 1e-7f);
  float zeros[2] = {0, 0};
  ASSERT_OK(proto_quantize_weights(zeros, 2, out, &scale), NULL);
  ASSERT(scale == 0.0f && out[0] == 0 && out[1] == 0);
  float nan[1] = {NAN};
  ASSERT_EQ(proto_quantize_weights(nan, 1, out, &scale), PROTO_ENONFINITE);
  proto_buf_fini(&b);
}

TEST(eight_bit_weight_runs_decode_byte_by_byte_and_round_within_half_a_step) {
  proto_buf b;
  proto_buf_init(&b);
  int8_t q[4] = {1, -2, 127, -127};
  ASSERT_OK(proto_encode_weights_qrun8(&b, 9, 0, 3, 4, q, 0.5f), NULL);
  /* Written out by hand: mode 3, count 4, first 3, scale 0.5f, four i8. */
  static const uint8_t want[] = {0x03, 0x04, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
                                 0x00, 0x3f, 0x01, 0xfe, 0x7f, 0x81};
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + sizeof(want));
  ASSERT_EQ(b.len, proto_weights_qrun_size(4, 1));
  ASSERT(memcmp(b.data + PROTO_HEADER_SIZE, want, sizeof(want)) == 0);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_WEIGHTS);
  proto_weights_view w;
  ASSERT_OK(proto_decode_weights(p, h.length, NULL, &w), NULL);
  ASSERT_EQ(w.mode, PROTO_WEIGHTS_QRUN8);
  ASSERT_EQ(w.first, 3);
  proto_iter it;
  uint32_t idx;
  float v;
  proto_weights_begin(&w, &it);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 3 && v == 0.5f);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 4 && v == -1.0f);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 5 && v == 63.5f);
  ASSERT(proto_weights_next(&it, &idx, &v) && idx == 6 && v == -63.5f);
  ASSERT(!proto_weights_next(&it, &idx, &v));
  /* Decoders accept -128 (encoders never write it); a run past the last target, a negative or
   * NaN scale, -128 from an encoder: refused. */
  uint8_t bad[sizeof(want)];
  memcpy(bad, want, sizeof(want));
  bad[14] = 0x80;
  ASSERT_OK(proto_decode_weights(bad, sizeof(bad), NULL, &w), NULL);
  proto_weights_begin(&w, &it);
  for (int i = 0; i < 4; i++) ASSERT(proto_weights_next(&it, &idx, &v));
  ASSERT(v == -64.0f);
  bad[5] = 0xfe, bad[6] = 0xff; /* first 65534 + 4 targets */
  ASSERT_EQ(proto_decode_weights(bad, sizeof(bad), NULL, &w), PROTO_EINVAL);
  memcpy(bad, want, sizeof(want));
  bad[10] = 0xbf; /* scale -0.5 */
  ASSERT_EQ(proto_decode_weights(bad, sizeof(bad), NULL, &w), PROTO_EINVAL);
  bad[10] = 0x7f, bad[9] = 0xc0; /* scale NaN (0x7fc00000) */
  bad[7] = 0x00, bad[8] = 0x00;
  ASSERT_EQ(proto_decode_weights(bad, sizeof(bad), NULL, &w), PROTO_ENONFINITE);
  ASSERT_EQ(proto_decode_weights(want, sizeof(want) - 1, NULL, &w), PROTO_ETRUNCATED);
  memcpy(bad, want, sizeof(want));
  bad[0] = 0x04; /* no mode 4 */
  ASSERT_EQ(proto_decode_weights(bad, sizeof(bad), NULL, &w), PROTO_EINVAL);
  b.len = 0;
  int8_t low[1] = {INT8_MIN};
  ASSERT_EQ(proto_encode_weights_qrun8(&b, 9, 0, 0, 1, low, 0.5f), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_weights_qrun8(&b, 9, 0, 65534, 4, q, 0.5f), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_weights_qrun8(&b, 9, 0, 0, 4, q, -0.5f), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_weights_qrun8(&b, 9, 0, 0, 4, q, INFINITY), PROTO_ENONFINITE);
  ASSERT_EQ(b.len, 0);
  /* Quantising to 8 bits: the largest magnitude maps to ±127 and stays inside its range, every
   * value is within half a step of its input, all zeros give scale 0, NaN is refused. */
  float in[6] = {0.5f, -1.0f, 0.25f, 1e-7f, 0.0f, 0.0039f};
  int8_t out[6];
  float scale;
  ASSERT_OK(proto_quantize_weights8(in, 6, out, &scale), NULL);
  ASSERT((double)scale * 127.0 <= 1.0 && scale >= nextafterf(1.0f / 127.0f, 0.0f));
  ASSERT_EQ(out[1], -127);
  ASSERT_EQ(out[3], 0);
  ASSERT_EQ(out[5], 0); /* below half a step (1/254) */
  ASSERT(fabsf(proto_qweight(out[1], scale)) <= 1.0f);
  for (int i = 0; i < 6; i++) ASSERT(fabsf(proto_qweight(out[i], scale) - in[i]) <= 0.5f * scale * (1 + 1e-4f));
  float zeros[2] = {0, 0};
  ASSERT_OK(proto_quantize_weights8(zeros, 2, out, &scale), NULL);
  ASSERT(scale == 0.0f && out[0] == 0 && out[1] == 0);
  float nan[1] = {NAN};
  ASSERT_EQ(proto_quantize_weights8(nan, 1, out, &scale), PROTO_ENONFINITE);
  proto_buf_fini(&b);
}

TEST(weights_with_nan_are_refused_by_encoder_and_decoder) {
  proto_buf b;
  proto_buf_init(&b);
  float bad[2] = {0.5f, NAN};
  ASSERT_EQ(proto_encode_weights(&b, 1, 0, 2, NULL, bad), PROTO_ENONFINITE);
  ASSERT_EQ(b.len, 0); /* nothing half-written */
  float good[2] = {0.5f, 0.25f};
  ASSERT_OK(proto_encode_weights(&b, 1, 0, 2, NULL, good), NULL);
  /* Patch an infinity into the payload by hand, as a hostile client would. */
  float inf = INFINITY;
  memcpy(b.data + PROTO_HEADER_SIZE + 5 + 4, &inf, 4);
  proto_weights_view w;
  ASSERT_EQ(proto_decode_weights(b.data + PROTO_HEADER_SIZE, b.len - PROTO_HEADER_SIZE, NULL, &w), PROTO_ENONFINITE);
  proto_buf_fini(&b);
}

TEST(delta_round_trips_sparse_quantised_offsets) {
  proto_buf b;
  proto_buf_init(&b);
  uint32_t idx[4] = {0, 1, 1000, 4000000};
  int32_t q[12] = {0, 0, 0, 1, -1, 63, -64, 8191, -8192, (1 << 30) - 1, -((1 << 30) - 1), 12345};
  ASSERT_OK(proto_encode_delta(&b, 9, 0, 4, idx, q), NULL);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_DELTA);
  proto_offsets_view o;
  ASSERT_OK(proto_decode_delta(p, h.length, NULL, &o), NULL);
  ASSERT_EQ(o.count, 4);
  proto_iter it;
  proto_offsets_begin(&o, &it);
  uint32_t v;
  int32_t got[3];
  for (int i = 0; i < 4; i++) {
    ASSERT(proto_offsets_next(&it, &v, got));
    ASSERT_EQ(v, idx[i]);
    for (int k = 0; k < 3; k++) ASSERT_EQ(got[k], q[3 * i + k]);
  }
  ASSERT(!proto_offsets_next(&it, &v, got));
  /* Small offsets of neighbouring vertices take a few bytes, not 16. */
  b.len = 0;
  uint32_t near[3] = {10, 11, 12};
  int32_t small[9] = {3, -2, 1, 4, 0, -1, 2, 2, 2};
  ASSERT_OK(proto_encode_delta(&b, 10, 0, 3, near, small), NULL);
  ASSERT(b.len - PROTO_HEADER_SIZE <= 8 + 3 * 4);
  /* Unsorted indices or out-of-range quanta are refused by the encoder. */
  uint32_t unsorted[2] = {5, 5};
  ASSERT_EQ(proto_encode_delta(&b, 1, 0, 2, unsorted, small), PROTO_EINVAL);
  int32_t huge[3] = {1 << 30, 0, 0};
  ASSERT_EQ(proto_encode_delta(&b, 1, 0, 1, near, huge), PROTO_EINVAL);
  proto_buf_fini(&b);
}

TEST(quantisation_error_is_at_most_half_a_quantum) {
  const float quantum = 2.9e-7f;
  uint32_t state = 12345;
  for (int i = 0; i < 100000; i++) {
    state = state * 1664525u + 1013904223u;
    float x = ((float)(state >> 8) / 16777216.0f - 0.5f) * 0.05f; /* ±2.5 cm */
    int32_t q = proto_quantize(x, quantum);
    float back = proto_dequantize(q, quantum);
    /* half a quantum, plus the rounding of the one float multiply that dequantises */
    ASSERT(fabs((double)back - x) <= 0.5 * quantum + fabs(back) * 0x1p-24);
    ASSERT_EQ(proto_quantize(back, quantum), q); /* and it is a fixed point */
  }
  ASSERT_EQ(proto_quantize(NAN, quantum), 0);
  ASSERT_EQ(proto_quantize(1e30f, quantum), (1 << 30) - 1);
}

TEST(edit_round_trips_and_unknown_kind_is_refused) {
  proto_buf b;
  proto_buf_init(&b);
  uint32_t ti[1] = {3};
  float tv[1] = {0.5f};
  ASSERT_OK(proto_encode_edit_weights(&b, 77, 1, ti, tv), NULL);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_EDIT);
  proto_edit e;
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT_EQ(e.request_id, 77);
  ASSERT_EQ(e.kind, PROTO_EDIT_WEIGHTS);
  ASSERT_EQ(e.weights.count, 1);
  b.data[PROTO_HEADER_SIZE + 4] = 13; /* kind: past MASK (12), the last one */
  ASSERT_EQ(proto_decode_edit(p, h.length, NULL, &e), PROTO_EINVAL);
  proto_buf_fini(&b);
}

TEST(target_meta_round_trips_byte_by_byte_and_bad_drivers_are_refused) {
  proto_buf b;
  proto_buf_init(&b);
  uint32_t drivers[2] = {1, 2};
  ASSERT_OK(proto_encode_target_meta(&b, 5, 0, 7, -2.0f, 10.0f, PROTO_TARGET_MUTED, 2, drivers), NULL);
  /* u32 index 7, f32 -2, f32 10, u8 flags 1, u16 count 2, u16 1, u16 2 */
  static const uint8_t want[] = {0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x20, 0x41,
                                 0x01, 0x02, 0x00, 0x01, 0x00, 0x02, 0x00};
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + sizeof(want));
  ASSERT(memcmp(b.data + PROTO_HEADER_SIZE, want, sizeof(want)) == 0);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_TARGET_META);
  proto_target_meta m;
  ASSERT_OK(proto_decode_target_meta(p, h.length, NULL, &m), NULL);
  ASSERT(m.index == 7 && m.min == -2.0f && m.max == 10.0f && m.flags == PROTO_TARGET_MUTED);
  ASSERT(m.driver_count == 2 && proto_driver(m.drivers, 0) == 1 && proto_driver(m.drivers, 1) == 2);
  /* A target driving itself, min > max, unknown flags, too many drivers: refused both ways. */
  b.len = 0;
  uint32_t self[1] = {7}, many[9] = {0, 1, 2, 3, 4, 5, 6, 8, 9};
  ASSERT_EQ(proto_encode_target_meta(&b, 5, 0, 7, 0, 1, 0, 1, self), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_target_meta(&b, 5, 0, 7, 1, 0, 0, 0, NULL), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_target_meta(&b, 5, 0, 7, 0, 1, 0x80, 0, NULL), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_target_meta(&b, 5, 0, 7, 0, 1, 0, 9, many), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0);
  uint8_t bad[sizeof(want)];
  memcpy(bad, want, sizeof(want));
  bad[15] = 0x07; /* first driver = itself */
  ASSERT_EQ(proto_decode_target_meta(bad, sizeof(bad), NULL, &m), PROTO_EINVAL);
  memcpy(bad, want, sizeof(want));
  bad[12] = 0x04; /* unknown flag */
  ASSERT_EQ(proto_decode_target_meta(bad, sizeof(bad), NULL, &m), PROTO_EINVAL);
  ASSERT_EQ(proto_decode_target_meta(want, sizeof(want) - 1, NULL, &m), PROTO_ETRUNCATED);
  proto_buf_fini(&b);
}

/* A small mesh's snapshot, built the way the server builds it. */
static void build_snapshot(proto_buf *b) {
  float pos[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  uint32_t tri[12] = {0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3};
  uint32_t ti[2] = {1, 3};
  float td[6] = {0.1f, 0, 0, 0, 0, -0.2f};
  proto_target_desc t = {"smile", 0.0f, 0.0f, 1.0f, 0, 0, NULL, 2, ti, td};
  proto_mesh_desc m = {4, 4, 1, pos, tri, NULL, 1e-6f};
  proto_buf mesh_part, state;
  proto_buf_init(&mesh_part);
  proto_buf_init(&state);
  ASSERT_OK(proto_snapshot_mesh_part(&mesh_part, &m, &t), NULL);
  float w[1] = {0.75f};
  uint32_t oi[1] = {2};
  int32_t oq[3] = {100, -200, 300};
  ASSERT_OK(proto_snapshot_state_part(&state, 1, w, 1, oi, oq), NULL);
  ASSERT_OK(proto_encode_snapshot_head(b, 12, mesh_part.len, state.len), NULL);
  memcpy(proto_buf_append(b, mesh_part.len), mesh_part.data, mesh_part.len);
  memcpy(proto_buf_append(b, state.len), state.data, state.len);
  proto_buf_fini(&mesh_part);
  proto_buf_fini(&state);
}

TEST(snapshot_round_trips_mesh_targets_and_state) {
  proto_buf b;
  proto_buf_init(&b);
  build_snapshot(&b);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_SNAPSHOT);
  proto_snapshot s;
  ASSERT_OK(proto_decode_snapshot(p, h.length, NULL, &s), NULL);
  ASSERT_EQ(s.vertex_count, 4);
  ASSERT_EQ(s.triangle_count, 4);
  ASSERT_EQ(s.target_count, 1);
  ASSERT(proto_load_f32(s.positions + 4 * 3) == 1.0f);
  ASSERT_EQ(proto_load_u32(s.triangles + 4 * 1), 2);
  ASSERT(proto_load_f32(s.weights) == 0.75f);
  proto_iter it;
  proto_target t;
  proto_snapshot_targets_begin(&s, &it);
  ASSERT(proto_snapshot_target_next(&it, &t));
  ASSERT(t.name.len == 5 && memcmp(t.name.ptr, "smile", 5) == 0);
  ASSERT_EQ(t.count, 2);
  ASSERT(proto_load_f32(t.deltas + 4 * 5) == -0.2f);
  ASSERT(!proto_snapshot_target_next(&it, &t));
  uint32_t v;
  int32_t q[3];
  proto_offsets_begin(&s.offsets, &it);
  ASSERT(proto_offsets_next(&it, &v, q) && v == 2 && q[1] == -200);
  proto_buf_fini(&b);
}

TEST(snapshot_with_bad_contents_is_refused) {
  proto_buf b;
  proto_buf_init(&b);
  build_snapshot(&b);
  uint8_t *p = b.data + PROTO_HEADER_SIZE;
  size_t n = b.len - PROTO_HEADER_SIZE;
  proto_snapshot s;
  /* Triangle index 0 of triangle 0 -> 4 (vertex count is 4). */
  uint8_t saved[4];
  size_t tri_at = 20 + 12 * 4;
  memcpy(saved, p + tri_at, 4);
  p[tri_at] = 4;
  ASSERT_EQ(proto_decode_snapshot(p, n, NULL, &s), PROTO_EINVAL);
  memcpy(p + tri_at, saved, 4);
  /* A NaN position. */
  float nan = NAN;
  memcpy(saved, p + 20, 4);
  memcpy(p + 20, &nan, 4);
  ASSERT_EQ(proto_decode_snapshot(p, n, NULL, &s), PROTO_ENONFINITE);
  memcpy(p + 20, saved, 4);
  /* A vertex count that promises far more than the payload holds. */
  memcpy(saved, p, 4);
  p[0] = 0xff, p[1] = 0xff, p[2] = 0x3f, p[3] = 0;
  ASSERT_EQ(proto_decode_snapshot(p, n, NULL, &s), PROTO_ETRUNCATED);
  p[0] = 0xff, p[1] = 0xff, p[2] = 0xff, p[3] = 0xff;
  ASSERT_EQ(proto_decode_snapshot(p, n, NULL, &s), PROTO_ETOOBIG);
  memcpy(p, saved, 4);
  ASSERT_OK(proto_decode_snapshot(p, n, NULL, &s), NULL);
  /* Trailing garbage. */
  ASSERT_EQ(proto_decode_snapshot(p, n - 1, NULL, &s) == 0, 0);
  proto_buf_fini(&b);
}

/* Every strict prefix of every message's payload is refused (and read no further than n). */
TEST(every_truncated_payload_is_refused) {
  proto_buf frames[7];
  for (int i = 0; i < 7; i++) proto_buf_init(&frames[i]);
  proto_hello hi = {PROTO_VERSION, PROTO_ROLE_VIEWER, {"session", 7}, {"", 0}};
  proto_encode_hello(&frames[0], &hi);
  proto_encode_error(&frames[1], 1, 2, "message");
  proto_ping ping = {1, 2, 3};
  proto_encode_ping(&frames[2], PROTO_PING, &ping);
  uint32_t ti[2] = {0, 4};
  float tv[2] = {1, 0.5f};
  proto_encode_weights(&frames[3], 1, 0, 2, ti, tv);
  int32_t q[6] = {1, 2, 3, -4, -5, -6};
  proto_encode_delta(&frames[4], 1, 0, 2, ti, q);
  proto_encode_edit_offsets(&frames[5], 5, 2, ti, q);
  build_snapshot(&frames[6]);
  for (int i = 0; i < 7; i++) {
    proto_header h;
    ASSERT_OK(proto_header_decode(frames[i].data, NULL, &h), NULL);
    size_t n = h.length;
    for (size_t cut = 0; cut < n; cut++) {
      /* Copy the prefix into an exact-size heap block so ASan catches any over-read. */
      uint8_t *p = malloc(cut ? cut : 1);
      memcpy(p, frames[i].data + PROTO_HEADER_SIZE, cut);
      int rc;
      union {
        proto_hello hello;
        proto_error error;
        proto_ping ping;
        proto_weights_view w;
        proto_offsets_view o;
        proto_edit e;
        proto_snapshot s;
      } out;
      switch (h.type) {
        case PROTO_HELLO: rc = proto_decode_hello(p, cut, &out.hello); break;
        case PROTO_ERROR: rc = proto_decode_error(p, cut, &out.error); break;
        case PROTO_PING: rc = proto_decode_ping(p, cut, &out.ping); break;
        case PROTO_WEIGHTS: rc = proto_decode_weights(p, cut, NULL, &out.w); break;
        case PROTO_DELTA: rc = proto_decode_delta(p, cut, NULL, &out.o); break;
        case PROTO_EDIT: rc = proto_decode_edit(p, cut, NULL, &out.e); break;
        default: rc = proto_decode_snapshot(p, cut, NULL, &out.s); break;
      }
      free(p);
      if (rc == 0) test__fail(__FILE__, __LINE__, "type %u: prefix of %zu/%zu bytes accepted", h.type, cut, n);
    }
    proto_buf_fini(&frames[i]);
  }
}

TEST(counts_that_overflow_the_payload_are_refused) {
  /* WEIGHTS: dense, count 65535, but only 8 bytes of values. */
  uint8_t w[13] = {0, 0xff, 0xff, 0, 0};
  proto_weights_view wv;
  ASSERT_EQ(proto_decode_weights(w, sizeof(w), NULL, &wv), PROTO_ETRUNCATED);
  w[1] = w[2] = w[3] = w[4] = 0xff; /* count 2^32 - 1 */
  ASSERT_EQ(proto_decode_weights(w, sizeof(w), NULL, &wv), PROTO_ETOOBIG);
  /* DELTA: count 2 but the entry bytes describe one vertex. */
  uint8_t d[12] = {2, 0, 0, 0, 4, 0, 0, 0, 5, 2, 2, 2};
  proto_offsets_view ov;
  ASSERT(proto_decode_delta(d, sizeof(d), NULL, &ov) != 0);
  /* DELTA: a byte length beyond the payload. */
  uint8_t d2[12] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 5, 2, 2, 2};
  ASSERT_EQ(proto_decode_delta(d2, sizeof(d2), NULL, &ov), PROTO_ETRUNCATED);
  /* A varint longer than five bytes. */
  uint8_t d3[14] = {1, 0, 0, 0, 6, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  ASSERT_EQ(proto_decode_delta(d3, sizeof(d3), NULL, &ov), PROTO_EINVAL);
  /* A vertex index past the configured limit. */
  proto_limits lim = {.max_vertices = 10};
  uint8_t d4[12] = {1, 0, 0, 0, 4, 0, 0, 0, 10, 0, 0, 0};
  ASSERT_EQ(proto_decode_delta(d4, sizeof(d4), &lim, &ov), PROTO_EINVAL);
  /* Session names longer than the limit. */
  uint8_t hello[4 + 2 + 300 + 2] = {1, 0, 1, 0, 0x2c, 0x01};
  memset(hello + 6, 'a', 300);
  proto_hello hv;
  ASSERT_EQ(proto_decode_hello(hello, sizeof(hello), &hv), PROTO_ETOOBIG);
}

/* Every decoder's answer to bytes it was not built for: OK with a message that is consistent
 * (every pointer it hands out lies inside the input, every count fits the bytes and limits it
 * was checked against, every float it promises finite is finite), or a PROTO_E* code — never
 * anything else. */
static int is_proto_error(int rc) { return rc <= PROTO_ETRUNCATED && rc >= PROTO_ENOMEM; }

static int inside(const uint8_t *p, size_t n, const void *at, size_t len) {
  const uint8_t *a = at;
  return a >= p && len <= n && (size_t)(a - p) <= n - len;
}

#define ASSERT_DECODED(rc) ASSERT((rc) == 0 || is_proto_error(rc))

static void check_offsets(const proto_offsets_view *o, const uint8_t *p, size_t n, uint32_t max_index) {
  ASSERT(inside(p, n, o->bytes, o->len));
  proto_iter it;
  uint32_t i, k = 0, last = 0;
  int32_t q[3];
  proto_offsets_begin(o, &it);
  while (proto_offsets_next(&it, &i, q)) {
    ASSERT(k == 0 || i > last); /* delta-coded indices strictly ascend */
    ASSERT(i < max_index);
    last = i;
    k++;
  }
  ASSERT_EQ(k, o->count);
}

static void check_weights(const proto_weights_view *w, const uint8_t *p, size_t n) {
  ASSERT(w->mode >= PROTO_WEIGHTS_DENSE && w->mode <= PROTO_WEIGHTS_QRUN8);
  ASSERT(isfinite(w->scale) && w->scale >= 0);
  size_t per = w->mode == PROTO_WEIGHTS_DENSE ? 4 : w->mode == PROTO_WEIGHTS_SPARSE ? 6 : w->mode == PROTO_WEIGHTS_QRUN ? 2 : 1;
  ASSERT(inside(p, n, w->bytes, per * w->count));
  proto_iter it;
  uint32_t i, k = 0;
  float v;
  proto_weights_begin(w, &it);
  while (proto_weights_next(&it, &i, &v)) {
    ASSERT(isfinite(v));
    ASSERT(i <= 0xffff || w->mode >= PROTO_WEIGHTS_QRUN);
    k++;
  }
  ASSERT_EQ(k, w->count);
}

static void check_edit(const proto_edit *e, const uint8_t *p, size_t n) {
  ASSERT(e->kind >= PROTO_EDIT_WEIGHTS && e->kind <= PROTO_EDIT_AUTHOR);
  if (e->kind == PROTO_EDIT_AUTHOR)
    ASSERT(e->author.len >= 1 && e->author.len <= PROTO_MAX_AUTHOR && inside(p, n, e->author.ptr, e->author.len));
  switch (e->kind) {
    case PROTO_EDIT_WEIGHTS: check_weights(&e->weights, p, n); break;
    case PROTO_EDIT_OFFSETS: check_offsets(&e->offsets, p, n, 0xffffffffu); break;
    case PROTO_EDIT_GESTURE_BEGIN: {
      const proto_gesture_begin *g = &e->begin;
      ASSERT(g->gesture != 0 && g->mode <= 2 && g->iterations >= 1 && g->iterations <= 100);
      ASSERT(isfinite(g->handle_radius) && isfinite(g->roi_radius));
      const proto_index_list *l[3] = {&g->handle, &g->roi, &g->anchors};
      for (int k = 0; k < 3; k++) ASSERT(l[k]->count == 0 || inside(p, n, l[k]->bytes, 4 * (size_t)l[k]->count));
      break;
    }
    case PROTO_EDIT_GESTURE_DRAG:
      for (int k = 0; k < 3; k++) ASSERT(isfinite(e->drag.translate[k]) && isfinite(e->drag.pivot[k]));
      for (int k = 0; k < 4; k++) ASSERT(isfinite(e->drag.rotate[k]));
      break;
    case PROTO_EDIT_BRUSH: {
      ASSERT(e->brush.count >= 1 && e->brush.count <= PROTO_MAX_BRUSH_SAMPLES);
      ASSERT(inside(p, n, e->brush.samples, 32 * (size_t)e->brush.count));
      for (uint32_t i = 0; i < e->brush.count; i++) {
        proto_brush_sample b;
        proto_brush_sample_at(&e->brush, i, &b);
        ASSERT(isfinite(b.radius) && isfinite(b.strength) && isfinite(b.center[0]) && isfinite(b.direction[2]));
      }
      break;
    }
    case PROTO_EDIT_RESET: ASSERT(e->reset.count == 0 || inside(p, n, e->reset.bytes, 4 * (size_t)e->reset.count)); break;
    case PROTO_EDIT_BLEND_PINS: {
      const proto_blend_pins *b = &e->blend_pins;
      ASSERT(b->count >= 1 && b->count <= PROTO_MAX_BLEND_PINS && (b->flags & ~PROTO_BLEND_KEEP_CLOSE) == 0);
      ASSERT(isfinite(b->regularization) && b->regularization >= 0);
      ASSERT(inside(p, n, b->pins, 16 * (size_t)b->count));
      break;
    }
    default: break;
  }
}

static void check_snapshot(const proto_snapshot *s, const uint8_t *p, size_t n) {
  ASSERT(isfinite(s->offset_quantum) && s->offset_quantum > 0);
  ASSERT(inside(p, n, s->positions, 12 * (size_t)s->vertex_count));
  ASSERT(inside(p, n, s->triangles, 12 * (size_t)s->triangle_count));
  for (uint32_t t = 0; t < 3 * s->triangle_count; t++) ASSERT(proto_load_u32(s->triangles + 4 * (size_t)t) < s->vertex_count);
  if (s->uvs) ASSERT(inside(p, n, s->uvs, 8 * (size_t)s->vertex_count));
  ASSERT(inside(p, n, s->weights, 4 * (size_t)s->target_count));
  check_offsets(&s->offsets, p, n, s->vertex_count);
  proto_iter it;
  proto_target t;
  uint32_t k = 0;
  proto_snapshot_targets_begin(s, &it);
  while (proto_snapshot_target_next(&it, &t)) {
    ASSERT(inside(p, n, t.name.ptr, t.name.len) && t.name.len <= PROTO_MAX_NAME);
    ASSERT(inside(p, n, t.indices, 4 * (size_t)t.count) && inside(p, n, t.deltas, 12 * (size_t)t.count));
    for (uint32_t i = 0; i < t.count; i++) ASSERT(proto_load_u32(t.indices + 4 * (size_t)i) < s->vertex_count);
    k++;
  }
  ASSERT_EQ(k, s->target_count);
}

/* Runs every decoder on p[0..n) and checks each answer; counts the ones that decoded. */
static void check_all_decoders(const uint8_t *p, size_t n, int *accepted) {
  proto_hello h;
  proto_error e;
  proto_ping pg;
  proto_weights_view w;
  proto_offsets_view o;
  proto_edit ed;
  proto_snapshot s;
  proto_target_meta tm;
  proto_target_add ta;
  int rc = proto_decode_hello(p, n, &h);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    ASSERT(h.role == PROTO_ROLE_VIEWER || h.role == PROTO_ROLE_EDITOR);
    ASSERT(inside(p, n, h.session.ptr, h.session.len) && h.session.len <= PROTO_MAX_NAME);
    ASSERT(h.token.len == 0 || inside(p, n, h.token.ptr, h.token.len));
  }
  rc = proto_decode_error(p, n, &e);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    ASSERT(e.message.len == 0 || inside(p, n, e.message.ptr, e.message.len));
  }
  rc = proto_decode_ping(p, n, &pg);
  ASSERT_DECODED(rc);
  *accepted += rc == 0;
  rc = proto_decode_weights(p, n, NULL, &w);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    check_weights(&w, p, n);
  }
  rc = proto_decode_delta(p, n, NULL, &o);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    check_offsets(&o, p, n, 0xffffffffu);
  }
  rc = proto_decode_edit(p, n, NULL, &ed);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    check_edit(&ed, p, n);
  }
  rc = proto_decode_snapshot(p, n, NULL, &s);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    check_snapshot(&s, p, n);
  }
  rc = proto_decode_target_meta(p, n, NULL, &tm);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    ASSERT(tm.driver_count <= PROTO_MAX_DRIVERS && isfinite(tm.min) && isfinite(tm.max));
    ASSERT(tm.driver_count == 0 || inside(p, n, tm.drivers, 2 * (size_t)tm.driver_count));
  }
  rc = proto_decode_target_add(p, n, NULL, &ta);
  ASSERT_DECODED(rc);
  if (rc == 0) {
    ++*accepted;
    ASSERT(inside(p, n, ta.target.name.ptr, ta.target.name.len) && isfinite(ta.weight));
    ASSERT(ta.target.count == 0 || inside(p, n, ta.target.indices, 4 * (size_t)ta.target.count));
    ASSERT(ta.target.count == 0 || inside(p, n, ta.target.deltas, 12 * (size_t)ta.target.count));
  }
}

/* One valid frame of every message kind, for the mutation loop below. */
static void seed_frames(proto_buf *b) {
  proto_hello h = {PROTO_VERSION, PROTO_ROLE_EDITOR, {"demo", 4}, {"tok", 3}};
  ASSERT_OK(proto_encode_hello(b, &h), NULL);
  ASSERT_OK(proto_encode_error(b, PROTO_ERR_INVALID, 7, "bad value"), NULL);
  proto_ping pg = {1, 2, 3};
  ASSERT_OK(proto_encode_ping(b, PROTO_PING, &pg), NULL);
  uint32_t idx[3] = {1, 5, 9};
  float val[3] = {0.5f, -1.0f, 2.0f};
  ASSERT_OK(proto_encode_weights(b, 3, 0, 3, idx, val), NULL);
  ASSERT_OK(proto_encode_weights(b, 3, 0, 3, NULL, val), NULL);
  int16_t q16[3] = {100, -200, 32767};
  ASSERT_OK(proto_encode_weights_qrun(b, 4, 0, 2, 3, q16, 0.001f), NULL);
  int8_t q8[3] = {1, -127, 64};
  ASSERT_OK(proto_encode_weights_qrun8(b, 5, 0, 2, 3, q8, 0.01f), NULL);
  int32_t q[9] = {1, 2, 3, -4, 5, -6, 7, 8, 1 << 20};
  ASSERT_OK(proto_encode_delta(b, 6, 0, 3, idx, q), NULL);
  ASSERT_OK(proto_encode_edit_weights(b, 11, 3, idx, val), NULL);
  ASSERT_OK(proto_encode_edit_offsets(b, 12, 3, idx, q), NULL);
  proto_gesture_begin gb = {3, 1, 2, 5, 0.01f, 0.05f, {0, NULL}, {0, NULL}, {0, NULL}};
  uint32_t handle[2] = {4, 6}, roi[3] = {1, 2, 3};
  gb.handle.count = 2;
  gb.roi.count = 3;
  ASSERT_OK(proto_encode_edit_gesture_begin(b, 13, &gb, handle, roi, NULL), NULL);
  proto_gesture_drag gd = {3, {0.1f, 0, 0}, {0, 0, 0, 1}, 1, {1, 2, 3}};
  ASSERT_OK(proto_encode_edit_gesture_drag(b, 14, &gd), NULL);
  ASSERT_OK(proto_encode_edit_gesture_end(b, 15, 3), NULL);
  proto_brush_sample bs[2] = {{{0, 0, 0}, {0, 1, 0}, 0.1f, 0.5f}, {{1, 0, 0}, {0, 1, 0}, 0.1f, 0.5f}};
  ASSERT_OK(proto_encode_edit_brush(b, 16, 1, 0, 1, 2, bs), NULL);
  ASSERT_OK(proto_encode_edit_reset(b, 17, 3, idx), NULL);
  proto_blend_pin pins[2] = {{7, {1.0f, -2.0f, 0.25f}}, {300, {0, 0, 0}}};
  ASSERT_OK(proto_encode_edit_blend_pins(b, 18, PROTO_BLEND_KEEP_CLOSE, 0.5f, 2, pins), NULL);
  float pos[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}, uv[8] = {0, 0, 1, 0, 0, 1, 1, 1};
  uint32_t tri[6] = {0, 1, 2, 0, 2, 3}, ti[2] = {1, 3};
  float td[6] = {0.1f, 0, 0, 0, 0.2f, 0};
  uint32_t drivers[1] = {0};
  proto_target_desc t = {"smile", 0.25f, 0, 1, 0, 1, drivers, 2, ti, td};
  proto_mesh_desc md = {4, 2, 1, pos, tri, uv, 1e-6f};
  proto_buf mp, sp;
  proto_buf_init(&mp);
  proto_buf_init(&sp);
  float w1[1] = {0.25f};
  ASSERT_OK(proto_snapshot_mesh_part(&mp, &md, &t), NULL);
  ASSERT_OK(proto_snapshot_state_part(&sp, 1, w1, 2, ti, q), NULL);
  ASSERT_OK(proto_encode_snapshot_head(b, 9, mp.len, sp.len), NULL);
  memcpy(proto_buf_append(b, mp.len), mp.data, mp.len);
  memcpy(proto_buf_append(b, sp.len), sp.data, sp.len);
  proto_buf_fini(&mp);
  proto_buf_fini(&sp);
  ASSERT_OK(proto_encode_target_add(b, 10, 1, 0.5f, &t), NULL);
  ASSERT_OK(proto_encode_target_meta(b, 11, 0, 1, -1, 1, PROTO_TARGET_MUTED, 1, drivers), NULL);
  ASSERT(!b->failed);
}

static uint32_t next_rand(uint32_t *state) {
  *state = *state * 1103515245u + 12345u;
  return *state >> 16;
}

TEST(random_bytes_never_crash_a_decoder) {
  uint32_t state = 2166136261u;
  uint8_t buf[512];
  int accepted = 0;
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = next_rand(&state) % sizeof(buf);
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)next_rand(&state);
    /* Bias some inputs towards plausible small counts so decoding gets deep. */
    if (n > 8 && (iter & 1)) buf[1] = buf[2] = buf[3] = 0, buf[4] &= 7;
    uint8_t *p = malloc(n ? n : 1); /* exactly n bytes: ASan sees a read past the payload */
    memcpy(p, buf, n);
    check_all_decoders(p, n, &accepted);
    free(p);
  }
  /* Valid frames of every kind with a few bytes changed, or cut short: these decode often, so
   * the consistency checks run on real answers. */
  proto_buf seeds;
  proto_buf_init(&seeds);
  seed_frames(&seeds);
  size_t starts[64];
  int nseeds = 0;
  for (size_t at = 0; at < seeds.len && nseeds < 64;) {
    starts[nseeds++] = at;
    at += PROTO_HEADER_SIZE + proto_load_u32(seeds.data + at + 8);
  }
  ASSERT_EQ(nseeds, 19);
  int mutated_accepted = 0;
  for (int iter = 0; iter < 20000; iter++) {
    size_t at = starts[iter % nseeds];
    size_t n = proto_load_u32(seeds.data + at + 8);
    const uint8_t *src = seeds.data + at + PROTO_HEADER_SIZE;
    uint8_t *p = malloc(n ? n : 1);
    memcpy(p, src, n);
    int flips = 1 + (int)(next_rand(&state) % 4);
    for (int k = 0; k < flips && n; k++) p[next_rand(&state) % n] = (uint8_t)next_rand(&state);
    if (next_rand(&state) % 8 == 0 && n) n = next_rand(&state) % n; /* cut short */
    check_all_decoders(p, n, &mutated_accepted);
    free(p);
  }
  proto_buf_fini(&seeds);
  /* The checks above ran on many real answers, not only on refusals. */
  ASSERT(mutated_accepted > 5000);
}

TEST(blend_pins_edit_round_trips_byte_by_byte_and_bad_values_are_refused) {
  proto_buf b;
  proto_buf_init(&b);
  proto_blend_pin pins[2] = {{7, {1.0f, -2.0f, 0.25f}}, {300, {0, 0, 0}}};
  ASSERT_OK(proto_encode_edit_blend_pins(&b, 0x01020304, PROTO_BLEND_KEEP_CLOSE, 0.5f, 2, pins), NULL);
  /* u32 request id, u8 kind 8, u8 flags 1, f32 0.5, u32 count 2, then (u32 vertex, 3 × f32) per pin */
  static const uint8_t want[] = {0x04, 0x03, 0x02, 0x01, 0x08, 0x01, 0x00, 0x00, 0x00, 0x3f, 0x02, 0x00,
                                 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00,
                                 0x00, 0xc0, 0x00, 0x00, 0x80, 0x3e, 0x2c, 0x01, 0x00, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + sizeof(want));
  ASSERT(memcmp(b.data + PROTO_HEADER_SIZE, want, sizeof(want)) == 0);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_EDIT);
  proto_edit e;
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT_EQ(e.request_id, 0x01020304);
  ASSERT_EQ(e.kind, PROTO_EDIT_BLEND_PINS);
  ASSERT(e.blend_pins.flags == PROTO_BLEND_KEEP_CLOSE && e.blend_pins.regularization == 0.5f);
  ASSERT_EQ(e.blend_pins.count, 2);
  for (uint32_t i = 0; i < 2; i++) {
    proto_blend_pin got;
    proto_blend_pin_at(&e.blend_pins, i, &got);
    ASSERT_EQ(got.vertex, pins[i].vertex);
    ASSERT(memcmp(got.position, pins[i].position, sizeof(got.position)) == 0);
  }

  /* Every prefix is refused (each copied to an exact-size block so ASan sees any over-read),
   * and so is a trailing byte. */
  for (size_t cut = 0; cut < sizeof(want); cut++) {
    uint8_t *q = malloc(cut ? cut : 1);
    memcpy(q, want, cut);
    if (proto_decode_edit(q, cut, NULL, &e) == 0) test__fail(__FILE__, __LINE__, "prefix of %zu bytes accepted", cut);
    free(q);
  }
  uint8_t bad[sizeof(want) + 1];
  memcpy(bad, want, sizeof(want));
  bad[sizeof(want)] = 0;
  ASSERT_EQ(proto_decode_edit(bad, sizeof(want) + 1, NULL, &e), PROTO_ETRAILING);

  /* Values a decoder refuses: NaN and Inf, negative λ, unknown flags, no pins, too many pins,
   * a count the bytes do not hold, a vertex past the configured limit. */
  const struct {
    size_t at;
    uint8_t bytes[4];
    int rc;
  } cases[] = {
      {18, {0x00, 0x00, 0xc0, 0x7f}, PROTO_ENONFINITE}, /* first pin's x = NaN */
      {42, {0x00, 0x00, 0x80, 0x7f}, PROTO_ENONFINITE}, /* second pin's z = +Inf */
      {6, {0x00, 0x00, 0xc0, 0x7f}, PROTO_ENONFINITE},  /* λ = NaN */
      {6, {0x00, 0x00, 0x00, 0xbf}, PROTO_EINVAL},      /* λ = -0.5 */
      {10, {0x00, 0x00, 0x00, 0x00}, PROTO_EINVAL},     /* count 0 */
      {10, {0x11, 0x27, 0x00, 0x00}, PROTO_ETOOBIG},    /* count 10001 */
      {10, {0x03, 0x00, 0x00, 0x00}, PROTO_ETRUNCATED}, /* count 3, two pins' bytes */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    memcpy(bad, want, sizeof(want));
    memcpy(bad + cases[i].at, cases[i].bytes, 4);
    int rc = proto_decode_edit(bad, sizeof(want), NULL, &e);
    if (rc != cases[i].rc) test__fail(__FILE__, __LINE__, "case %zu: %d, want %d", i, rc, cases[i].rc);
  }
  memcpy(bad, want, sizeof(want));
  bad[5] = 0x02; /* unknown flag */
  ASSERT_EQ(proto_decode_edit(bad, sizeof(want), NULL, &e), PROTO_EINVAL);
  proto_limits lim = {.max_vertices = 300}; /* the second pin's vertex 300 is not below it */
  ASSERT_EQ(proto_decode_edit(want, sizeof(want), &lim, &e), PROTO_EINVAL);
  lim.max_vertices = 301;
  ASSERT_OK(proto_decode_edit(want, sizeof(want), &lim, &e), NULL);

  /* The encoder refuses the same, appending nothing. */
  b.len = 0;
  proto_blend_pin nan_pin = {1, {0, NAN, 0}}, ok_pin = {1, {0, 0, 0}};
  ASSERT_EQ(proto_encode_edit_blend_pins(&b, 1, 0, 0, 1, &nan_pin), PROTO_ENONFINITE);
  ASSERT_EQ(proto_encode_edit_blend_pins(&b, 1, 0, NAN, 1, &ok_pin), PROTO_ENONFINITE);
  ASSERT_EQ(proto_encode_edit_blend_pins(&b, 1, 0, INFINITY, 1, &ok_pin), PROTO_ENONFINITE);
  ASSERT_EQ(proto_encode_edit_blend_pins(&b, 1, 0, -1.0f, 1, &ok_pin), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_blend_pins(&b, 1, 0x02, 0, 1, &ok_pin), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_blend_pins(&b, 1, 0, 0, 0, &ok_pin), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_blend_pins(&b, 1, 0, 0, PROTO_MAX_BLEND_PINS + 1, &ok_pin), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0);
  proto_buf_fini(&b);
}

TEST(brush_edit_flags_and_kinds_round_trip_byte_by_byte_and_unknown_ones_are_refused) {
  proto_buf b;
  proto_buf_init(&b);
  proto_brush_sample s = {{0.5f, 0, 0}, {0, 0, -1}, 0.25f, -0.5f};
  uint8_t flags = PROTO_BRUSH_MIRROR_X | PROTO_BRUSH_FRONT_ONLY | PROTO_BRUSH_CONTINUE | (9 << PROTO_BRUSH_AUTOSMOOTH_SHIFT);
  ASSERT_OK(proto_encode_edit_brush(&b, 7, 7 /* layer */, 2 /* gaussian */, flags, 1, &s), NULL);
  /* u32 request id, u8 kind 6, u8 brush, u8 falloff, u8 flags, u8 reserved, u32 count, 8 × f32 */
  static const uint8_t head[] = {0x07, 0x00, 0x00, 0x00, 0x06, 0x07, 0x02, 0x97, 0x00, 0x01, 0x00, 0x00, 0x00};
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + sizeof(head) + 32);
  ASSERT(memcmp(b.data + PROTO_HEADER_SIZE, head, sizeof(head)) == 0);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_EDIT);
  proto_edit e;
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT_EQ(e.brush.brush, 7);
  ASSERT_EQ(e.brush.falloff, 2);
  ASSERT_EQ(e.brush.flags, flags);
  ASSERT_EQ(e.brush.flags >> PROTO_BRUSH_AUTOSMOOTH_SHIFT, 9);
  proto_brush_sample got;
  proto_brush_sample_at(&e.brush, 0, &got);
  ASSERT(memcmp(&got, &s, sizeof(s)) == 0);
  /* Brush 8 and flag bit 3 are refused by both ends. */
  uint8_t bad[sizeof(head) + 32];
  memcpy(bad, p, sizeof(bad));
  bad[5] = 8;
  ASSERT_EQ(proto_decode_edit(bad, sizeof(bad), NULL, &e), PROTO_EINVAL);
  bad[5] = 7, bad[7] = 0x08;
  ASSERT_EQ(proto_decode_edit(bad, sizeof(bad), NULL, &e), PROTO_EINVAL);
  size_t len = b.len;
  ASSERT_EQ(proto_encode_edit_brush(&b, 8, 8, 0, 0, 1, &s), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_brush(&b, 8, 0, 0, 0x08, 1, &s), PROTO_EINVAL);
  ASSERT_EQ(b.len, len); /* nothing appended */
  proto_buf_fini(&b);
}

TEST(brush_edit_mirror_plane_is_byte_8_x_y_or_z_and_one_plane_only) {
  proto_buf b;
  proto_buf_init(&b);
  proto_brush_sample s = {{0.5f, 0, 0}, {0, 0, -1}, 0.25f, 0.5f};
  proto_header h;
  proto_edit e;
  /* y: byte 8 is 2, flags as given */
  ASSERT_OK(proto_encode_edit_brush_mirror(&b, 7, 5, 0, PROTO_BRUSH_CONTINUE, PROTO_BRUSH_AXIS_Y, 1, &s), NULL);
  ASSERT_EQ(b.data[PROTO_HEADER_SIZE + 7], PROTO_BRUSH_CONTINUE);
  ASSERT_EQ(b.data[PROTO_HEADER_SIZE + 8], 2);
  const uint8_t *p = one_frame(&b, &h, PROTO_EDIT);
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT_EQ(e.brush.mirror, PROTO_BRUSH_AXIS_Y);
  ASSERT_EQ(e.brush.flags, PROTO_BRUSH_CONTINUE);
  /* x: byte 8 is 1 and flags bit 0 is set, for a server that reads only the flag */
  b.len = 0;
  ASSERT_OK(proto_encode_edit_brush_mirror(&b, 7, 5, 0, 0, PROTO_BRUSH_AXIS_X, 1, &s), NULL);
  ASSERT_EQ(b.data[PROTO_HEADER_SIZE + 7], PROTO_BRUSH_MIRROR_X);
  ASSERT_EQ(b.data[PROTO_HEADER_SIZE + 8], 1);
  /* an older editor's frame: byte 8 zero, mirror as flags bit 0 says */
  b.len = 0;
  ASSERT_OK(proto_encode_edit_brush(&b, 7, 5, 0, PROTO_BRUSH_MIRROR_X, 1, &s), NULL);
  p = one_frame(&b, &h, PROTO_EDIT);
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT_EQ(e.brush.mirror, 0);
  ASSERT_EQ(e.brush.flags, PROTO_BRUSH_MIRROR_X);
  /* refused: plane 4, and y or z beside flags bit 0, by both ends */
  uint8_t bad[13 + 32];
  memcpy(bad, p, sizeof(bad));
  bad[8] = 4;
  ASSERT_EQ(proto_decode_edit(bad, sizeof(bad), NULL, &e), PROTO_EINVAL);
  bad[8] = 3; /* flags bit 0 is set */
  ASSERT_EQ(proto_decode_edit(bad, sizeof(bad), NULL, &e), PROTO_EINVAL);
  bad[7] = 0;
  ASSERT_OK(proto_decode_edit(bad, sizeof(bad), NULL, &e), NULL);
  ASSERT_EQ(e.brush.mirror, PROTO_BRUSH_AXIS_Z);
  size_t len = b.len;
  ASSERT_EQ(proto_encode_edit_brush_mirror(&b, 8, 5, 0, 0, 4, 1, &s), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_brush_mirror(&b, 8, 5, 0, PROTO_BRUSH_MIRROR_X, PROTO_BRUSH_AXIS_Y, 1, &s), PROTO_EINVAL);
  ASSERT_EQ(b.len, len);
  proto_buf_fini(&b);
}

TEST(undo_redo_and_author_edits_round_trip_byte_by_byte_and_bad_names_are_refused) {
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_edit_history(&b, 7, 0), NULL);
  static const uint8_t undo[] = {0x07, 0x00, 0x00, 0x00, 0x09};
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + sizeof(undo));
  ASSERT(memcmp(b.data + PROTO_HEADER_SIZE, undo, sizeof(undo)) == 0);
  proto_header h;
  proto_edit e;
  const uint8_t *p;
  p = one_frame(&b, &h, PROTO_EDIT); /* (before h.length is read) */
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT(e.request_id == 7 && e.kind == PROTO_EDIT_UNDO);
  b.len = 0;
  ASSERT_OK(proto_encode_edit_history(&b, 9, 1), NULL);
  p = one_frame(&b, &h, PROTO_EDIT); /* (before h.length is read) */
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT(e.kind == PROTO_EDIT_REDO);
  b.len = 0;
  ASSERT_OK(proto_encode_edit_author(&b, 8, "ana"), NULL);
  static const uint8_t author[] = {0x08, 0x00, 0x00, 0x00, 0x0b, 0x03, 0x00, 'a', 'n', 'a'};
  ASSERT(b.len == PROTO_HEADER_SIZE + sizeof(author) && memcmp(b.data + PROTO_HEADER_SIZE, author, sizeof(author)) == 0);
  p = one_frame(&b, &h, PROTO_EDIT); /* (before h.length is read) */
  ASSERT_OK(proto_decode_edit(p, h.length, NULL, &e), NULL);
  ASSERT(e.kind == PROTO_EDIT_AUTHOR && e.author.len == 3 && memcmp(e.author.ptr, "ana", 3) == 0);
  /* Names of 0 or more than 64 bytes are refused both ways; a body after UNDO is trailing. */
  b.len = 0;
  char long_name[80];
  memset(long_name, 'x', sizeof(long_name) - 1);
  long_name[79] = '\0';
  ASSERT_EQ(proto_encode_edit_author(&b, 1, ""), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_edit_author(&b, 1, long_name), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0);
  uint8_t empty[] = {1, 0, 0, 0, 0x0b, 0x00, 0x00};
  ASSERT_EQ(proto_decode_edit(empty, sizeof(empty), NULL, &e), PROTO_EINVAL);
  uint8_t trailing[] = {1, 0, 0, 0, 0x09, 0x00};
  ASSERT_EQ(proto_decode_edit(trailing, sizeof(trailing), NULL, &e), PROTO_ETRAILING);
  uint8_t unknown[] = {1, 0, 0, 0, 0x0d};
  ASSERT_EQ(proto_decode_edit(unknown, sizeof(unknown), NULL, &e), PROTO_EINVAL);
  proto_buf_fini(&b);
}
