/*
 * proto_internal.h — byte-level helpers shared by the protocol's .c files. Not public.
 */
#ifndef DEFORMD_PROTO_INTERNAL_H
#define DEFORMD_PROTO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Largest magnitude of a quantised offset component. */
#define PROTO_Q_MAX ((1 << 30) - 1)

static inline void proto__st16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void proto__st32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void proto__st64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t proto__ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint64_t proto__ld64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* proto_frame_begin with the header's `version` set to the layout of the body that follows
 * (PROTO_VERSION_2 for the compact bodies of proto2.h). */
size_t proto__frame_begin_v(proto_buf *b, proto_type type, uint8_t flags, uint64_t session_version,
                            uint16_t layout);

/* Fills defaults for zero fields. */
void proto__limits(const proto_limits *in, proto_limits *out);

/* Appends n bytes to b and returns where they go, or NULL (b->failed set). */
uint8_t *proto__reserve(proto_buf *b, size_t n);
void proto__put_u8(proto_buf *b, uint8_t v);
void proto__put_u16(proto_buf *b, uint16_t v);
void proto__put_u32(proto_buf *b, uint32_t v);
void proto__put_u64(proto_buf *b, uint64_t v);
void proto__put_f32(proto_buf *b, float v);
void proto__put_str(proto_buf *b, const char *s, size_t n);
void proto__put_varint(proto_buf *b, uint32_t v);
/* n 32-bit words (uint32 or the bits of float32), little-endian. */
void proto__put_u32_array(proto_buf *b, const uint32_t *v, size_t n);

/* A bounds-checked read cursor over one payload. */
typedef struct proto_cur {
  const uint8_t *at, *end;
} proto_cur;

int proto__get(proto_cur *c, size_t n, const uint8_t **out);
int proto__get_u8(proto_cur *c, uint8_t *v);
int proto__get_u16(proto_cur *c, uint16_t *v);
int proto__get_u32(proto_cur *c, uint32_t *v);
int proto__get_u64(proto_cur *c, uint64_t *v);
int proto__get_f32(proto_cur *c, float *v); /* PROTO_ENONFINITE for NaN/Inf */
/* An EDIT MASK's body (proto_mask.c), for proto_decode_edit. */
struct proto_mask_edit;
int proto__get_edit_mask(proto_cur *c, uint32_t vertex_limit, struct proto_mask_edit *m);
int proto__get_str(proto_cur *c, proto_str *s);
int proto__get_varint(proto_cur *c, uint32_t *v);

/* Returns from the calling function with any non-zero code. */
#define PROTO__CHECK(expr)   \
  do {                       \
    int rc_ = (expr);        \
    if (rc_) return rc_;     \
  } while (0)

/* A target's range, flags and drivers (proto_msg.c): shared by targets of both versions and
 * TARGET_META. Drivers of target `self` must be below `limit` and not `self`. */
int proto__put_meta(proto_buf *b, float min, float max, uint8_t flags, uint32_t driver_count,
                    const uint32_t *drivers);
int proto__get_meta(proto_cur *c, float *min, float *max, uint8_t *flags, uint32_t *driver_count,
                    const uint8_t **drivers);
int proto__check_drivers(const uint8_t *drivers, uint32_t count, uint32_t self, uint32_t limit);

/* ---- version 2 codecs (proto_trav.c) ---------------------------------------------------------- */

struct proto_trav;
/* A stream of `count` records of `lanes` 32-bit values (val[lanes * i + l]): entry i is vertex
 * list[i] (strictly ascending ranks), or the vertex of rank i when list is NULL (every vertex:
 * then t's scratch is not touched). Written as u32 nbytes, u8 mode, data; read back into val
 * (count * lanes entries, the caller's). `entropy`: mode 2 (rANS, §12.11) may be written, and
 * is where it is the smallest. */
int proto__stream_put(proto_buf *b, struct proto_trav *t, const uint32_t *list, uint32_t count, int lanes,
                      const uint32_t *val, int entropy);
/* The triangles piece of the entropy layout (proto_tri.c): the session's triangles (malloc'ed
 * into *triangles) and their traversal (proto_trav_fini it), or a PROTO_E* code and nothing. */
int proto__triangles_entropy_get(proto_cur *c, uint32_t triangle_count, uint32_t vertex_count, uint32_t **triangles,
                                 struct proto_trav *t);
int proto__stream_get(proto_cur *c, struct proto_trav *t, const uint32_t *list, uint32_t count, int lanes,
                      uint32_t *val);
/* perm[i] = the position in `indices` of the entry with the i-th smallest rank. PROTO_EINVAL for
 * an index out of range or repeated. */
int proto__rank_order(const struct proto_trav *t, const uint32_t *indices, uint32_t count, uint32_t *perm);
/* A key (a vertex, a rank) and where it came from. proto__sort_keys sorts p[0..k) by key, every
 * key below `limit`, stably, through tmp (k entries). */
typedef struct proto_key_at {
  uint32_t key, at;
} proto_key_at;
void proto__sort_keys(proto_key_at *p, proto_key_at *tmp, size_t k, uint32_t limit);
/* A vertex set as runs of ranks; `list` in ascending rank. The reader allocates *list (caller
 * frees) with the vertices in ascending rank. */
int proto__ranks_put(proto_buf *b, const struct proto_trav *t, const uint32_t *list, uint32_t count);
int proto__ranks_get(proto_cur *c, const struct proto_trav *t, uint32_t *count, uint32_t **list);

#endif
