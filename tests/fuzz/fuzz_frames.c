/*
 * fuzz_frames.c — libFuzzer target: every decoder of the binary stream protocol, and the CPU
 * replica (the viewers' decode path) fed a whole stream of frames.
 *
 * Input: byte 0 chooses what is fuzzed, the rest is the data.
 *   even: the rest is one payload, given to every message decoder in turn (version 2 SNAPSHOTs,
 *         in both codings, too); what decodes is then
 *         walked to its end (weights, offsets, snapshot targets, index lists, samples, pins, BULK
 *         values), so a count the decoder let through but the bytes do not hold shows as an
 *         overflow.
 *   odd:  the rest is a stream of frames (20-byte headers and payloads) applied in order to a
 *         fresh client_replica, as a viewer applies what the server sends.
 * Limits are small (4096 vertices, 1 MiB frames) so that large counts stay cheap to refuse.
 *
 * DOES NOT talk to a server: the JSON-RPC side is fuzz_rpc.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client_replica.h"
#include "proto.h"
#include "proto2.h"
#include "proto_bulk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const proto_limits limits = {1u << 20, 4096, 16384, 1u << 20}; /* small, so that no input can ask much memory */

/* Folds what a walk reads into one value the compiler cannot drop. */
static volatile uint64_t sink;

static void walk_weights(const proto_weights_view *w) {
  proto_iter it;
  uint32_t i;
  float v;
  proto_weights_begin(w, &it);
  while (proto_weights_next(&it, &i, &v)) sink += i + (uint64_t)(v != v);
}

static void walk_offsets(const proto_offsets_view *o) {
  proto_iter it;
  uint32_t i;
  int32_t q[3];
  proto_offsets_begin(o, &it);
  while (proto_offsets_next(&it, &i, q)) sink += i + (uint32_t)q[0] + (uint32_t)q[1] + (uint32_t)q[2];
}

static void walk_indices(const proto_index_list *l) {
  for (uint32_t i = 0; i < l->count; i++) sink += proto_index_at(l, i);
}

static void walk_target(const proto_target *t) {
  sink += t->name.len;
  if (t->name.len) sink += (uint8_t)t->name.ptr[t->name.len - 1];
  for (uint32_t d = 0; d < t->driver_count; d++) sink += proto_driver(t->drivers, d);
  for (uint32_t i = 0; i < t->count; i++)
    sink += proto_load_u32(t->indices + 4 * (size_t)i) + (uint64_t)(proto_load_f32(t->deltas + 12 * (size_t)i) != 0);
}

static void decode_all(const uint8_t *p, size_t n) {
  proto_hello hello;
  if (proto_decode_hello(p, n, &hello) == 0) sink += hello.session.len + hello.token.len;
  proto_welcome welcome;
  if (proto_decode_welcome(p, n, &welcome) == 0) sink += welcome.session.len;
  proto_error error;
  if (proto_decode_error(p, n, &error) == 0) sink += error.message.len;
  proto_ping ping;
  if (proto_decode_ping(p, n, &ping) == 0) sink += ping.seq;
  proto_weights_view w;
  if (proto_decode_weights(p, n, &limits, &w) == 0) walk_weights(&w);
  proto_offsets_view o;
  if (proto_decode_delta(p, n, &limits, &o) == 0) walk_offsets(&o);
  proto_snapshot s;
  if (proto_decode_snapshot(p, n, &limits, &s) == 0) {
    walk_offsets(&s.offsets);
    for (uint32_t i = 0; i < 3 * s.vertex_count; i++) sink += s.positions[4 * (size_t)i];
    for (uint32_t i = 0; i < 3 * s.triangle_count; i++) sink += proto_load_u32(s.triangles + 4 * (size_t)i);
    proto_iter it;
    proto_target t;
    proto_snapshot_targets_begin(&s, &it);
    while (proto_snapshot_target_next(&it, &t)) walk_target(&t);
  }
  proto_snapshot2 s2; /* version 2, today's coding or the entropy one (§12.11) */
  proto_trav t2;
  if (proto_decode_snapshot2(p, n, &limits, &s2, &t2) == 0) {
    for (uint32_t i = 0; i < 3 * s2.vertex_count; i++) sink += (uint64_t)(s2.positions[i] != 0) + t2.pred[i];
    for (uint32_t i = 0; i < 3 * s2.triangle_count; i++) sink += s2.triangles[i] + t2.rank[s2.triangles[i]];
    proto_snapshot2_free(&s2);
    proto_trav_fini(&t2);
  }
  proto_target_add ta;
  if (proto_decode_target_add(p, n, &limits, &ta) == 0) walk_target(&ta.target);
  proto_target_meta tm;
  if (proto_decode_target_meta(p, n, &limits, &tm) == 0)
    for (uint32_t d = 0; d < tm.driver_count; d++) sink += proto_driver(tm.drivers, d);
  proto_edit e;
  if (proto_decode_edit(p, n, &limits, &e) == 0) {
    switch (e.kind) {
      case PROTO_EDIT_WEIGHTS: walk_weights(&e.weights); break;
      case PROTO_EDIT_OFFSETS: walk_offsets(&e.offsets); break;
      case PROTO_EDIT_GESTURE_BEGIN:
        walk_indices(&e.begin.handle);
        walk_indices(&e.begin.roi);
        walk_indices(&e.begin.anchors);
        break;
      case PROTO_EDIT_RESET: walk_indices(&e.reset); break;
      case PROTO_EDIT_BRUSH:
        for (uint32_t i = 0; i < e.brush.count; i++) {
          proto_brush_sample b;
          proto_brush_sample_at(&e.brush, i, &b);
          sink += (uint64_t)(b.radius > 0);
        }
        break;
      case PROTO_EDIT_BLEND_PINS:
        for (uint32_t i = 0; i < e.blend_pins.count; i++) {
          proto_blend_pin pin;
          proto_blend_pin_at(&e.blend_pins, i, &pin);
          sink += pin.vertex;
        }
        break;
      default: break;
    }
  }
  proto_bulk_request bq;
  if (proto_decode_bulk_request(p, n, &bq) == 0 && bq.op == PROTO_BULK_SET)
    for (uint32_t i = 0; i < 3 * bq.count; i++) sink += (uint64_t)(proto_load_f32(bq.values + 4 * (size_t)i) != 0);
  proto_bulk_answer ba;
  if (proto_decode_bulk_answer(p, n, &ba) == 0 && ba.op == PROTO_BULK_GET)
    for (uint32_t i = 0; i < 3 * ba.count; i++) sink += (uint64_t)(proto_load_f32(ba.values + 4 * (size_t)i) != 0);
}

static void replay(const uint8_t *p, size_t n) {
  client_replica r;
  client_replica_init(&r);
  char err[256];
  size_t at = 0;
  while (n - at >= PROTO_HEADER_SIZE) {
    proto_header h;
    if (proto_header_decode(p + at, &limits, &h) != 0) break;
    if (n - at - PROTO_HEADER_SIZE < h.length) break;
    /* A copy of exactly the payload: a read past it is a read past the allocation. */
    uint8_t *payload = malloc(h.length ? h.length : 1);
    if (!payload) break;
    memcpy(payload, p + at + PROTO_HEADER_SIZE, h.length);
    int rc = client_replica_apply(&r, &h, payload, err, sizeof(err));
    free(payload);
    at += PROTO_HEADER_SIZE + h.length;
    if (rc != 0) break;
  }
  client_replica_fini(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  /* A copy of exactly the input's bytes, for the same reason. */
  size_t n = size - 1;
  uint8_t *p = malloc(n ? n : 1);
  if (!p) return 0;
  memcpy(p, data + 1, n);
  if (data[0] & 1) replay(p, n);
  else decode_all(p, n);
  free(p);
  return 0;
}
