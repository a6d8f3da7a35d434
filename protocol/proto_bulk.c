/*
 * proto_bulk.c — BULK requests and answers (docs/protocol.md §15): a fixed part, then plain
 * little-endian float32, 3 per vertex. No varints, no grid: a script or an add-on reads the array
 * straight into its own buffer.
 *
 * DOES NOT check ranges against a session (the server does) or do I/O.
 */
#include <string.h>

#include "proto_bulk.h"
#include "proto_internal.h"

static int valid_what(uint8_t op, uint8_t what) {
  if (op == PROTO_BULK_SET) return what == PROTO_BULK_SCULPT;
  return op == PROTO_BULK_GET && what >= PROTO_BULK_POSITIONS && what <= PROTO_BULK_TARGET;
}

static int put_request(proto_buf *b, uint32_t request_id, uint8_t op, uint8_t what, uint8_t flags, uint32_t target,
                       uint32_t first, uint32_t count, const float *values) {
  if (!valid_what(op, what) || (flags & ~PROTO_BULK_WELDED) || (what != PROTO_BULK_TARGET && target != 0) ||
      (op == PROTO_BULK_SET && count == PROTO_BULK_TO_END))
    return PROTO_EINVAL;
  size_t at = proto_frame_begin(b, PROTO_BULK, 0, 0);
  proto__put_u32(b, request_id);
  proto__put_u8(b, op);
  proto__put_u8(b, what);
  proto__put_u8(b, flags);
  proto__put_u8(b, 0);
  proto__put_u32(b, target);
  proto__put_u32(b, first);
  proto__put_u32(b, count);
  if (op == PROTO_BULK_SET) proto__put_u32_array(b, (const uint32_t *)(const void *)values, 3 * (size_t)count);
  return proto_frame_end(b, at);
}

int proto_encode_bulk_get(proto_buf *b, uint32_t request_id, uint8_t what, uint8_t flags, uint32_t target,
                          uint32_t first, uint32_t count) {
  return put_request(b, request_id, PROTO_BULK_GET, what, flags, target, first, count, NULL);
}

int proto_encode_bulk_set(proto_buf *b, uint32_t request_id, uint8_t flags, uint32_t first, uint32_t count,
                          const float *values) {
  return put_request(b, request_id, PROTO_BULK_SET, PROTO_BULK_SCULPT, flags, 0, first, count, values);
}

/* The fields both layouts share, in the order of the checks. */
static int get_fixed(const uint8_t *p, size_t n, size_t size, uint32_t *rid, uint8_t *op, uint8_t *what,
                     uint8_t *flags, uint32_t *target) {
  if (n < size) return PROTO_ETRUNCATED;
  *rid = proto_load_u32(p);
  *op = p[4];
  *what = p[5];
  *flags = p[6];
  if (!valid_what(*op, *what) || (*flags & ~PROTO_BULK_WELDED) || p[7] != 0) return PROTO_EINVAL;
  *target = proto_load_u32(p + 8);
  if (*what != PROTO_BULK_TARGET && *target != 0) return PROTO_EINVAL;
  return 0;
}

/* A body of `count` vertices of 12 bytes after the fixed part: exactly that many bytes. */
static int check_length(size_t n, size_t size, uint32_t count) {
  uint64_t need = (uint64_t)size + 12u * (uint64_t)count;
  if (n < need) return PROTO_ETRUNCATED;
  return n > need ? PROTO_ETRAILING : 0;
}

int proto_decode_bulk_request(const uint8_t *p, size_t n, proto_bulk_request *r) {
  memset(r, 0, sizeof(*r));
  int rc = get_fixed(p, n, PROTO_BULK_REQUEST_SIZE, &r->request_id, &r->op, &r->what, &r->flags, &r->target);
  if (rc) return rc;
  r->first = proto_load_u32(p + 12);
  r->count = proto_load_u32(p + 16);
  if (r->op == PROTO_BULK_GET) return n > PROTO_BULK_REQUEST_SIZE ? PROTO_ETRAILING : 0;
  if (r->count == PROTO_BULK_TO_END) return PROTO_EINVAL;
  rc = check_length(n, PROTO_BULK_REQUEST_SIZE, r->count);
  r->values = p + PROTO_BULK_REQUEST_SIZE;
  return rc;
}

int proto_encode_bulk_answer(proto_buf *b, uint64_t session_version, const proto_bulk_answer *a, const float *values) {
  if (!valid_what(a->op, a->what) || (a->flags & ~PROTO_BULK_WELDED) || a->first > a->total ||
      a->count > a->total - a->first || (a->op == PROTO_BULK_GET && a->count && !values))
    return PROTO_EINVAL;
  size_t at = proto_frame_begin(b, PROTO_BULK, 0, session_version);
  proto__put_u32(b, a->request_id);
  proto__put_u8(b, a->op);
  proto__put_u8(b, a->what);
  proto__put_u8(b, a->flags);
  proto__put_u8(b, 0);
  proto__put_u32(b, a->target);
  proto__put_u32(b, a->first);
  proto__put_u32(b, a->count);
  proto__put_u32(b, a->total);
  if (a->op == PROTO_BULK_GET) proto__put_u32_array(b, (const uint32_t *)(const void *)values, 3 * (size_t)a->count);
  return proto_frame_end(b, at);
}

int proto_decode_bulk_answer(const uint8_t *p, size_t n, proto_bulk_answer *a) {
  memset(a, 0, sizeof(*a));
  int rc = get_fixed(p, n, PROTO_BULK_ANSWER_SIZE, &a->request_id, &a->op, &a->what, &a->flags, &a->target);
  if (rc) return rc;
  a->first = proto_load_u32(p + 12);
  a->count = proto_load_u32(p + 16);
  a->total = proto_load_u32(p + 20);
  if (a->first > a->total || a->count > a->total - a->first) return PROTO_EINVAL;
  a->values = p + PROTO_BULK_ANSWER_SIZE;
  return check_length(n, PROTO_BULK_ANSWER_SIZE, a->op == PROTO_BULK_GET ? a->count : 0);
}
