/*
 * proto_bulk.h — BULK (type 13, capability "bulk"): vertex arrays as plain little-endian float32
 * on request, on the stream port (docs/protocol.md §15). A client granted "bulk" sends a BULK
 * request — GET the current positions, the sculpt offsets or a target's deltas of a range of
 * render or welded vertices, or SET the sculpt offsets of such a range — and the server answers
 * it with a BULK answer of the same request id (or an ERROR naming it).
 *
 * DOES NOT decide who may ask, evaluate shapes or apply offsets (server/deformd/session/srv_bulk.c
 * and ports/srv_stream.c do), or do I/O.
 */
#ifndef DEFORMD_PROTO_BULK_H
#define DEFORMD_PROTO_BULK_H

#include <stddef.h>
#include <stdint.h>

#include "proto_frame.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_BULK_GET 1 /* op: send me the array */
#define PROTO_BULK_SET 2 /* op: set the sculpt offsets from this array */

#define PROTO_BULK_POSITIONS 1 /* what: base + sculpt + Σ w·Δ (docs/protocol.md §8.2) */
#define PROTO_BULK_SCULPT 2    /* what: the sculpt offsets, (float)q · quantum */
#define PROTO_BULK_TARGET 3    /* what: a target's delta of every vertex (0 where it moves none) */

#define PROTO_BULK_WELDED 0x01     /* flags: vertices are welded (topology) vertices, not render ones */
#define PROTO_BULK_TO_END 0xffffffffu /* count (GET): from `first` to the last vertex */

#define PROTO_BULK_REQUEST_SIZE 20 /* the fixed part of a request */
#define PROTO_BULK_ANSWER_SIZE 24  /* ... and of an answer */

/* A request as decoded: `values` points into the payload (SET: 3 · count little-endian f32,
 * unchecked: the server says which one is not finite or too large). */
typedef struct proto_bulk_request {
  uint32_t request_id;
  uint8_t op, what, flags;
  uint32_t target; /* PROTO_BULK_TARGET: the target's index; 0 otherwise */
  uint32_t first, count;
  const uint8_t *values;
} proto_bulk_request;

/* An answer: what was asked, the range answered (count resolved when PROTO_BULK_TO_END was
 * asked) and `total`, the vertices there are in that numbering. GET carries 3 · count f32. */
typedef struct proto_bulk_answer {
  uint32_t request_id;
  uint8_t op, what, flags;
  uint32_t target, first, count, total;
  const uint8_t *values; /* decoded GET answers: into the payload */
} proto_bulk_answer;

/* Client side: a whole BULK frame (header version 1). `values` are 3 · count floats. Return 0,
 * PROTO_EINVAL (an op, what or flag this layout does not have) or PROTO_ENOMEM. */
int proto_encode_bulk_get(proto_buf *b, uint32_t request_id, uint8_t what, uint8_t flags, uint32_t target,
                          uint32_t first, uint32_t count);
int proto_encode_bulk_set(proto_buf *b, uint32_t request_id, uint8_t flags, uint32_t first, uint32_t count,
                          const float *values);
/* Server side. Checks, in order: the fixed part is there (PROTO_ETRUNCATED), op, what (SET only
 * of PROTO_BULK_SCULPT), flags and the reserved byte, `target` 0 unless what is a target
 * (PROTO_EINVAL), then the length: a GET ends after the fixed part, a SET after 12 · count
 * bytes (PROTO_ETRUNCATED, PROTO_ETRAILING); a SET's count is not PROTO_BULK_TO_END. */
int proto_decode_bulk_request(const uint8_t *p, size_t n, proto_bulk_request *r);
/* The answer frame at `session_version` (the version the array shows, or the version after a
 * SET); `values` 3 · a->count floats for GET, NULL for SET. Returns 0, PROTO_EINVAL or PROTO_ENOMEM. */
int proto_encode_bulk_answer(proto_buf *b, uint64_t session_version, const proto_bulk_answer *a, const float *values);
/* Client side: checks op, what, flags, reserved, first + count <= total and the length. */
int proto_decode_bulk_answer(const uint8_t *p, size_t n, proto_bulk_answer *a);

#ifdef __cplusplus
}
#endif

#endif
