/*
 * proto_hello.c — HELLO and WELCOME, in both versions (docs/protocol.md §5.1, §5.2, §12.1).
 *
 * Version 2 appends an option list to both: u16 byte length, then (u8 tag, u16 length, bytes)
 * entries. Tags a decoder does not know are skipped, so the list can grow without a version 3
 * (the author name, tag 5, came that way); a known tag twice or with the wrong length is
 * PROTO_EINVAL.
 *
 * The caps option (tag 7, proto_caps.c) is written only when asked for, so a HELLO or WELCOME
 * without capabilities is byte for byte what it was before capabilities existed.
 *
 * DOES NOT decide what the server grants (srv_stream.c does) or do I/O.
 */
#include <math.h>
#include <string.h>

#include "proto.h"
#include "proto_caps.h"
#include "proto_internal.h"

/* Names travel as length + bytes and are C strings on every side: no zero bytes inside. */
static int valid_name(proto_str s) {
  return s.len <= PROTO_MAX_NAME && (s.len == 0 || memchr(s.ptr, 0, s.len) == NULL);
}

static int finish(proto_cur *c) { return c->at == c->end ? 0 : PROTO_ETRAILING; }

/* ---- the option list ------------------------------------------------------------------------ */

typedef struct opts {
  uint8_t codec, shift, forward;
  float max_rate, tolerance;
  proto_str author; /* HELLO only */
  uint32_t caps;    /* PROTO_CAP_BIT of the known names */
  uint8_t caps_option; /* write / was there */
  uint8_t up;       /* WELCOME only: 'y' or 'z', 0 for none */
  unsigned seen;    /* bit per known tag */
} opts;

static void put_opt_hdr(proto_buf *b, uint8_t tag, uint16_t len) {
  proto__put_u8(b, tag);
  proto__put_u16(b, len);
}

static int valid_rate(float v) { return isfinite(v) && v >= 0; }

static int valid_author(proto_str s) {
  return s.len <= PROTO_MAX_AUTHOR && (s.len == 0 || memchr(s.ptr, 0, s.len) == NULL);
}

/* Writes the option list; `with_shift` for WELCOME. */
static int put_opts(proto_buf *b, const opts *o, int with_shift) {
  if (o->codec > PROTO_CODEC_LOSSLESS || !valid_rate(o->max_rate) || !valid_rate(o->tolerance) ||
      o->shift > PROTO_MAX_SHIFT || !valid_author(o->author) || (o->up && o->up != 'y' && o->up != 'z'))
    return PROTO_EINVAL;
  int with_caps = o->caps_option || o->caps;
  uint16_t len = (uint16_t)(4 + 7 + 7 + (with_shift ? 4 : 0) + (o->author.len ? 3 + o->author.len : 0) +
                            (o->forward ? 4 : 0) + (with_caps ? 3 + proto_caps_size(o->caps) : 0) + (o->up ? 4 : 0));
  proto__put_u16(b, len);
  put_opt_hdr(b, PROTO_OPT_CODEC, 1);
  proto__put_u8(b, o->codec);
  put_opt_hdr(b, PROTO_OPT_MAX_RATE, 4);
  proto__put_f32(b, o->max_rate);
  put_opt_hdr(b, PROTO_OPT_TOLERANCE, 4);
  proto__put_f32(b, o->tolerance);
  if (with_shift) {
    put_opt_hdr(b, PROTO_OPT_SHIFT, 1);
    proto__put_u8(b, o->shift);
  }
  if (o->author.len) {
    proto__put_u8(b, PROTO_OPT_AUTHOR);
    proto__put_str(b, o->author.ptr, o->author.len); /* u16 length + bytes: the entry's layout */
  }
  if (o->forward) {
    put_opt_hdr(b, PROTO_OPT_FORWARD, 1);
    proto__put_u8(b, 1);
  }
  if (with_caps) {
    put_opt_hdr(b, PROTO_OPT_CAPS, (uint16_t)proto_caps_size(o->caps));
    proto_caps_put(b, o->caps);
  }
  if (o->up) { /* last, so that a WELCOME without it is the bytes it always was */
    put_opt_hdr(b, PROTO_OPT_UP, 1);
    proto__put_u8(b, o->up);
  }
  return b->failed ? PROTO_ENOMEM : 0;
}

static int get_opts(proto_cur *c, opts *o) {
  uint16_t len;
  const uint8_t *bytes;
  memset(o, 0, sizeof(*o));
  PROTO__CHECK(proto__get_u16(c, &len));
  PROTO__CHECK(proto__get(c, len, &bytes));
  proto_cur e = {bytes, bytes + len};
  while (e.at < e.end) {
    uint8_t tag;
    uint16_t n;
    const uint8_t *v;
    PROTO__CHECK(proto__get_u8(&e, &tag));
    PROTO__CHECK(proto__get_u16(&e, &n));
    PROTO__CHECK(proto__get(&e, n, &v));
    if (tag < PROTO_OPT_CODEC || tag > PROTO_OPT_UP) continue; /* a later version's option */
    if (o->seen & (1u << tag)) return PROTO_EINVAL;
    o->seen |= 1u << tag;
    if (tag == PROTO_OPT_AUTHOR) {
      o->author = (proto_str){(const char *)v, n};
      if (n == 0 || !valid_author(o->author)) return PROTO_EINVAL;
      continue;
    }
    if (tag == PROTO_OPT_CAPS) {
      o->caps_option = 1;
      PROTO__CHECK(proto_caps_get(v, n, &o->caps, NULL));
      continue;
    }
    size_t want = tag == PROTO_OPT_CODEC || tag == PROTO_OPT_SHIFT || tag == PROTO_OPT_FORWARD || tag == PROTO_OPT_UP
                      ? 1
                      : 4;
    if (n != want) return PROTO_EINVAL;
    if (tag == PROTO_OPT_UP) {
      if (v[0] != 'y' && v[0] != 'z') return PROTO_EINVAL;
      o->up = v[0];
    } else if (tag == PROTO_OPT_FORWARD) {
      if (v[0] > 1) return PROTO_EINVAL;
      o->forward = v[0];
    } else if (tag == PROTO_OPT_CODEC) {
      o->codec = v[0];
      if (o->codec > PROTO_CODEC_LOSSLESS) return PROTO_EINVAL;
    } else if (tag == PROTO_OPT_SHIFT) {
      o->shift = v[0];
      if (o->shift > PROTO_MAX_SHIFT) return PROTO_EINVAL;
    } else {
      float f = proto_load_f32(v);
      if (!isfinite(f)) return PROTO_ENONFINITE;
      if (f < 0) return PROTO_EINVAL;
      if (tag == PROTO_OPT_MAX_RATE) o->max_rate = f;
      else o->tolerance = f;
    }
  }
  return 0;
}

/* ---- HELLO ----------------------------------------------------------------------------------- */

static int encode_hello(proto_buf *b, const proto_hello *m, uint16_t version, const proto_hello_opts *o,
                        uint8_t forward) {
  if (!valid_name(m->session) || !valid_name(m->token)) return PROTO_EINVAL;
  if (version != PROTO_VERSION && version != PROTO_VERSION_2) return PROTO_EINVAL;
  size_t mark = b->len;
  size_t at = proto__frame_begin_v(b, PROTO_HELLO, 0, 0, version);
  proto__put_u16(b, version);
  proto__put_u8(b, m->role);
  proto__put_u8(b, 0);
  proto__put_str(b, m->session.ptr, m->session.len);
  proto__put_str(b, m->token.ptr, m->token.len);
  if (version == PROTO_VERSION_2) {
    opts x = {.codec = o ? o->codec : 0, .forward = forward, .max_rate = o ? o->max_rate : 0,
              .tolerance = o ? o->tolerance : 0, .author = o ? o->author : (proto_str){0},
              .caps = o ? o->caps : 0, .caps_option = o ? o->caps_option : 0};
    int rc = put_opts(b, &x, 0);
    if (rc) {
      b->len = mark;
      return rc;
    }
  }
  return proto_frame_end(b, at);
}

int proto_encode_hello(proto_buf *b, const proto_hello *m) { return encode_hello(b, m, m->protocol_version, NULL, 0); }

int proto_encode_hello2(proto_buf *b, const proto_hello *m, const proto_hello_opts *o) {
  return encode_hello(b, m, PROTO_VERSION_2, o, 0);
}

int proto_encode_hello_forward(proto_buf *b, const proto_hello *m, const proto_hello_opts *o) {
  return encode_hello(b, m, PROTO_VERSION_2, o, 1);
}

/* A HELLO whose protocol_version is not one this build knows is PROTO_EVERSION with that field
 * set (its layout is unknown; the server answers with the versions it speaks). */
static int decode_hello(const uint8_t *p, size_t n, proto_hello *m, proto_hello_opts *o, uint8_t *forward) {
  proto_cur c = {p, p + n};
  uint8_t reserved;
  memset(m, 0, sizeof(*m));
  memset(o, 0, sizeof(*o));
  *forward = 0;
  PROTO__CHECK(proto__get_u16(&c, &m->protocol_version));
  if (m->protocol_version != PROTO_VERSION && m->protocol_version != PROTO_VERSION_2) return PROTO_EVERSION;
  PROTO__CHECK(proto__get_u8(&c, &m->role));
  PROTO__CHECK(proto__get_u8(&c, &reserved));
  PROTO__CHECK(proto__get_str(&c, &m->session));
  PROTO__CHECK(proto__get_str(&c, &m->token));
  if (m->role != PROTO_ROLE_VIEWER && m->role != PROTO_ROLE_EDITOR) return PROTO_EINVAL;
  if (m->protocol_version == PROTO_VERSION_2) {
    opts x;
    PROTO__CHECK(get_opts(&c, &x));
    o->codec = x.codec;
    o->max_rate = x.max_rate;
    o->tolerance = x.tolerance;
    o->author = x.author;
    o->caps = x.caps;
    o->caps_option = x.caps_option;
    *forward = x.forward;
  }
  return finish(&c);
}

int proto_decode_hello2(const uint8_t *p, size_t n, proto_hello *m, proto_hello_opts *o) {
  uint8_t forward = 0;
  return decode_hello(p, n, m, o, &forward);
}

int proto_hello_forward(const uint8_t *p, size_t n) {
  proto_hello m;
  proto_hello_opts o;
  uint8_t forward = 0;
  return decode_hello(p, n, &m, &o, &forward) == 0 && forward == 1;
}

int proto_decode_hello(const uint8_t *p, size_t n, proto_hello *m) {
  proto_hello_opts o;
  return proto_decode_hello2(p, n, m, &o);
}

/* ---- WELCOME --------------------------------------------------------------------------------- */

static int encode_welcome(proto_buf *b, uint64_t version, const proto_welcome *m, const proto_welcome_opts *o) {
  if (!valid_name(m->session)) return PROTO_EINVAL;
  size_t mark = b->len;
  size_t at = proto__frame_begin_v(b, PROTO_WELCOME, 0, version, o ? PROTO_VERSION_2 : PROTO_VERSION);
  proto__put_u32(b, m->client_id);
  proto__put_u8(b, m->role);
  proto__put_u8(b, 0);
  proto__put_str(b, m->session.ptr, m->session.len);
  if (o) {
    opts x = {.codec = o->codec, .shift = o->shift, .max_rate = o->max_rate, .tolerance = o->tolerance,
              .caps = o->caps, .caps_option = o->caps_option, .up = o->up};
    int rc = put_opts(b, &x, 1);
    if (rc) {
      b->len = mark;
      return rc;
    }
  }
  return proto_frame_end(b, at);
}

int proto_encode_welcome(proto_buf *b, uint64_t version, const proto_welcome *m) {
  return encode_welcome(b, version, m, NULL);
}

int proto_encode_welcome2(proto_buf *b, uint64_t version, const proto_welcome *m, const proto_welcome_opts *o) {
  return encode_welcome(b, version, m, o);
}

/* Version 1's fields, then, when bytes follow (a WELCOME v2), the option list. */
int proto_decode_welcome2(const uint8_t *p, size_t n, proto_welcome *m, proto_welcome_opts *o) {
  proto_cur c = {p, p + n};
  uint8_t reserved;
  memset(m, 0, sizeof(*m));
  memset(o, 0, sizeof(*o));
  PROTO__CHECK(proto__get_u32(&c, &m->client_id));
  PROTO__CHECK(proto__get_u8(&c, &m->role));
  PROTO__CHECK(proto__get_u8(&c, &reserved));
  PROTO__CHECK(proto__get_str(&c, &m->session));
  o->protocol_version = PROTO_VERSION;
  if (c.at == c.end) return 0;
  opts x;
  PROTO__CHECK(get_opts(&c, &x));
  o->protocol_version = PROTO_VERSION_2;
  o->codec = x.codec;
  o->shift = x.shift;
  o->max_rate = x.max_rate;
  o->tolerance = x.tolerance;
  o->caps = x.caps;
  o->caps_option = x.caps_option;
  o->up = x.up;
  return finish(&c);
}

int proto_decode_welcome(const uint8_t *p, size_t n, proto_welcome *m) {
  proto_welcome_opts o;
  return proto_decode_welcome2(p, n, m, &o);
}
