/*
 * proto_frame.c — frame header, the growable output buffer, primitive encodings, error names.
 *
 * The assert()s here check the callers' own mistakes (a name the encoder was not meant to get, a
 * frame ended that was not begun, a cursor moved past its end), never input: bad bytes are
 * always an error code. They run in the Debug build (`make test-asan`) and NDEBUG compiles them
 * out of RelWithDebInfo and Release.
 *
 * DOES NOT know any message layout beyond the header: see proto_msg.c.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_internal.h"

const char *proto_strerror(int code) {
  switch (code) {
    case 0: return "success";
    case PROTO_ETRUNCATED: return "frame truncated: a count promises more bytes than are present";
    case PROTO_EMAGIC: return "bad magic: not a deformd frame";
    case PROTO_EVERSION: return "unsupported protocol version";
    case PROTO_ETOOBIG: return "frame or count over the configured limit";
    case PROTO_ETYPE: return "unknown or unexpected message type";
    case PROTO_ENONFINITE: return "non-finite value (NaN or Inf)";
    case PROTO_EINVAL: return "field value out of range";
    case PROTO_ETRAILING: return "bytes left over after the message";
    case PROTO_ENOMEM: return "out of memory";
    default: return "unknown error";
  }
}

void proto__limits(const proto_limits *in, proto_limits *out) {
  proto_limits d = {0};
  if (in) d = *in;
  if (d.max_frame == 0) d.max_frame = PROTO_DEFAULT_MAX_FRAME;
  if (d.max_vertices == 0) d.max_vertices = 5000000u;
  if (d.max_triangles == 0) d.max_triangles = 20000000u;
  if (d.max_target_entries == 0) d.max_target_entries = 64000000u;
  *out = d;
}

void proto_header_encode(const proto_header *h, uint8_t *b) {
  proto__st32(b, h->magic);
  proto__st16(b + 4, h->version);
  b[6] = h->type;
  b[7] = h->flags;
  proto__st32(b + 8, h->length);
  proto__st64(b + 12, h->session_version);
}

int proto_header_decode(const uint8_t *b, const proto_limits *limits, proto_header *h) {
  proto_limits l;
  proto__limits(limits, &l);
  h->magic = proto_load_u32(b);
  h->version = proto__ld16(b + 4);
  h->type = b[6];
  h->flags = b[7];
  h->length = proto_load_u32(b + 8);
  h->session_version = proto__ld64(b + 12);
  if (h->magic != PROTO_MAGIC) return PROTO_EMAGIC;
  if (h->version < PROTO_VERSION || h->version > PROTO_VERSION_MAX) return PROTO_EVERSION;
  /* Types 1-12, and those a capability unlocks (proto_cap_of_type's: BULK 13, PRESENCE 14, TEXTURE 15,
   * TEXWEIGHTS 16, TEXCLIP 17, MASK 20). */
  if (h->type < PROTO_HELLO || (h->type > PROTO_LAST_TYPE && h->type != PROTO_MASK)) return PROTO_ETYPE;
  if (h->length > l.max_frame) return PROTO_ETOOBIG;
  return 0;
}

/* ---- output buffer ------------------------------------------------------------------------- */

void proto_buf_init(proto_buf *b) { memset(b, 0, sizeof(*b)); }

void proto_buf_fini(proto_buf *b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

uint8_t *proto_buf_detach(proto_buf *b, size_t *len) {
  uint8_t *d = b->data;
  if (len) *len = b->len;
  memset(b, 0, sizeof(*b));
  return d;
}

uint8_t *proto__reserve(proto_buf *b, size_t n) {
  if (b->failed) return NULL;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) {
        b->failed = 1;
        return NULL;
      }
      cap *= 2;
    }
    uint8_t *g = realloc(b->data, cap);
    if (!g) {
      b->failed = 1;
      return NULL;
    }
    b->data = g;
    b->cap = cap;
  }
  uint8_t *p = b->data + b->len;
  b->len += n;
  return p;
}

uint8_t *proto_buf_append(proto_buf *b, size_t n) { return proto__reserve(b, n); }

void proto__put_u8(proto_buf *b, uint8_t v) {
  uint8_t *p = proto__reserve(b, 1);
  if (p) *p = v;
}

void proto__put_u16(proto_buf *b, uint16_t v) {
  uint8_t *p = proto__reserve(b, 2);
  if (p) proto__st16(p, v);
}

void proto__put_u32(proto_buf *b, uint32_t v) {
  uint8_t *p = proto__reserve(b, 4);
  if (p) proto__st32(p, v);
}

void proto__put_u64(proto_buf *b, uint64_t v) {
  uint8_t *p = proto__reserve(b, 8);
  if (p) proto__st64(p, v);
}

void proto__put_f32(proto_buf *b, float v) {
  union {
    float f;
    uint32_t u;
  } c = {.f = v};
  proto__put_u32(b, c.u);
}

void proto__put_str(proto_buf *b, const char *s, size_t n) {
  assert(n <= PROTO_MAX_NAME); /* every encoder checks its names; a decoder refuses longer ones */
  proto__put_u16(b, (uint16_t)n);
  uint8_t *p = proto__reserve(b, n);
  if (p && n) memcpy(p, s, n);
}

void proto__put_varint(proto_buf *b, uint32_t v) {
  uint8_t tmp[5];
  int n = 0;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    tmp[n++] = byte | (v ? 0x80 : 0);
  } while (v);
  uint8_t *p = proto__reserve(b, (size_t)n);
  if (p) memcpy(p, tmp, (size_t)n);
}

void proto__put_u32_array(proto_buf *b, const uint32_t *v, size_t n) {
  if (n == 0) return; /* v may be NULL then */
  if (n > SIZE_MAX / 4) {
    b->failed = 1;
    return;
  }
  uint8_t *p = proto__reserve(b, 4 * n);
  if (!p) return;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, v, 4 * n);
#else
  for (size_t i = 0; i < n; i++) proto__st32(p + 4 * i, v[i]);
#endif
}

size_t proto__frame_begin_v(proto_buf *b, proto_type type, uint8_t flags, uint64_t session_version,
                            uint16_t layout) {
  size_t at = b->len;
  uint8_t *p = proto__reserve(b, PROTO_HEADER_SIZE);
  if (p) {
    proto_header h = {PROTO_MAGIC, layout, (uint8_t)type, flags, 0, session_version};
    proto_header_encode(&h, p);
  }
  return at;
}

size_t proto_frame_begin(proto_buf *b, proto_type type, uint8_t flags, uint64_t session_version) {
  return proto__frame_begin_v(b, type, flags, session_version, PROTO_VERSION);
}

int proto_frame_end(proto_buf *b, size_t offset) {
  if (b->failed) return PROTO_ENOMEM;
  assert(offset <= b->len && b->len - offset >= PROTO_HEADER_SIZE); /* from proto_frame_begin on b */
  size_t payload = b->len - offset - PROTO_HEADER_SIZE;
  if (payload > UINT32_MAX) return PROTO_ETOOBIG;
  proto__st32(b->data + offset + 8, (uint32_t)payload);
  return 0;
}

/* ---- input cursor ---------------------------------------------------------------------------- */

int proto__get(proto_cur *c, size_t n, const uint8_t **out) {
  assert(c->at <= c->end); /* only proto__get moves the cursor, and never past its end */
  if ((size_t)(c->end - c->at) < n) return PROTO_ETRUNCATED;
  *out = c->at;
  c->at += n;
  return 0;
}

int proto__get_u8(proto_cur *c, uint8_t *v) {
  const uint8_t *p;
  int rc = proto__get(c, 1, &p);
  if (!rc) *v = *p;
  return rc;
}

int proto__get_u16(proto_cur *c, uint16_t *v) {
  const uint8_t *p;
  int rc = proto__get(c, 2, &p);
  if (!rc) *v = proto__ld16(p);
  return rc;
}

int proto__get_u32(proto_cur *c, uint32_t *v) {
  const uint8_t *p;
  int rc = proto__get(c, 4, &p);
  if (!rc) *v = proto_load_u32(p);
  return rc;
}

int proto__get_u64(proto_cur *c, uint64_t *v) {
  const uint8_t *p;
  int rc = proto__get(c, 8, &p);
  if (!rc) *v = proto__ld64(p);
  return rc;
}

int proto__get_f32(proto_cur *c, float *v) {
  const uint8_t *p;
  int rc = proto__get(c, 4, &p);
  if (rc) return rc;
  *v = proto_load_f32(p);
  return isfinite(*v) ? 0 : PROTO_ENONFINITE;
}

int proto__get_str(proto_cur *c, proto_str *s) {
  uint16_t n;
  int rc = proto__get_u16(c, &n);
  if (rc) return rc;
  if (n > PROTO_MAX_NAME) return PROTO_ETOOBIG;
  const uint8_t *p;
  rc = proto__get(c, n, &p);
  if (rc) return rc;
  for (uint16_t i = 0; i < n; i++)
    if (p[i] == 0) return PROTO_EINVAL; /* names are C strings on every side */
  s->ptr = (const char *)p;
  s->len = n;
  return 0;
}

int proto__get_varint(proto_cur *c, uint32_t *v) {
  uint32_t out = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    uint8_t byte;
    int rc = proto__get_u8(c, &byte);
    if (rc) return rc;
    if (shift == 28 && (byte & 0x70)) return PROTO_EINVAL; /* would overflow 32 bits */
    out |= (uint32_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *v = out;
      return 0;
    }
  }
  return PROTO_EINVAL;
}

int32_t proto_quantize(float offset, float quantum) {
  assert(quantum > 0); /* a session's or a grid's own quantum, checked when it was set */
  double q = (double)offset / (double)quantum;
  if (!(q == q)) return 0;
  if (q > PROTO_Q_MAX) return PROTO_Q_MAX;
  if (q < -PROTO_Q_MAX) return -PROTO_Q_MAX;
  return (int32_t)lrint(q);
}
