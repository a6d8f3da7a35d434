/*
 * test_face_decoders.c — the face inputs' decoders (protocol/proto_osc.c, proto_livelink.c) on
 * bytes written here by hand from the published layouts: OSC 1.0's strings, type tags and
 * bundles with VMC's /VMC/Ext/Blend/Val; Live Link Face's version 6 datagram as PyLiveLinkFace
 * decodes it. Every prefix and every other size is refused with a code, never read past.
 *
 * DOES NOT open sockets (tests/deformd/test_face.c drives the server over UDP).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_livelink.h"
#include "proto_osc.h"
#include "test.h"

/* /VMC/Ext/Blend/Val ,sf "jawOpen" 0.5 — 20 + 4 + 8 + 4 bytes, written out */
static const uint8_t VAL[] = {
    '/', 'V', 'M', 'C', '/', 'E', 'x', 't', '/', 'B', 'l', 'e', 'n', 'd', '/', 'V', 'a', 'l', 0, 0,
    ',', 's', 'f', 0,
    'j', 'a', 'w', 'O', 'p', 'e', 'n', 0,
    0x3f, 0x00, 0x00, 0x00, /* 0.5f big-endian */
};
/* /VMC/Ext/Blend/Apply , — 24 + 4 bytes */
static const uint8_t APPLY[] = {'/', 'V', 'M', 'C', '/', 'E', 'x', 't', '/', 'B', 'l', 'e', 'n', 'd', '/', 'A',
                                'p', 'p', 'l', 'y', 0, 0, 0, 0, ',', 0, 0, 0};

typedef struct seen {
  int n, vals, applies;
  char name[64];
  float value;
} seen;

static int on_msg(void *arg, const proto_osc_msg *m) {
  seen *s = arg;
  s->n++;
  if (strcmp(m->address, PROTO_VMC_BLEND_VAL) == 0 && m->argc == 2 && m->args[0].type == 's' && m->args[1].type == 'f') {
    s->vals++;
    snprintf(s->name, sizeof(s->name), "%s", m->args[0].s);
    s->value = m->args[1].f;
  }
  if (strcmp(m->address, PROTO_VMC_BLEND_APPLY) == 0 && m->argc == 0) s->applies++;
  return 0;
}

static size_t put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
  return 4;
}

/* #bundle, time tag 1, then each element with its size. */
static size_t bundle(uint8_t *out, const uint8_t *const *el, const size_t *len, int n) {
  memcpy(out, "#bundle\0\0\0\0\0\0\0\0\1", 16);
  size_t at = 16;
  for (int i = 0; i < n; i++) {
    at += put_be32(out + at, (uint32_t)len[i]);
    memcpy(out + at, el[i], len[i]);
    at += len[i];
  }
  return at;
}

TEST(osc_reads_vmc_blend_val_and_apply_as_written_by_the_spec) {
  seen s = {0};
  ASSERT_EQ(proto_osc_walk(VAL, sizeof(VAL), on_msg, &s), 0);
  ASSERT(s.vals == 1 && strcmp(s.name, "jawOpen") == 0 && s.value == 0.5f);
  memset(&s, 0, sizeof(s));
  ASSERT_EQ(proto_osc_walk(APPLY, sizeof(APPLY), on_msg, &s), 0);
  ASSERT_EQ(s.applies, 1);
}

TEST(osc_walks_a_bundle_and_a_bundle_inside_it_in_order) {
  uint8_t inner[256], outer[512];
  const uint8_t *el[] = {VAL, APPLY};
  size_t len[] = {sizeof(VAL), sizeof(APPLY)};
  size_t ni = bundle(inner, el, len, 2);
  const uint8_t *el2[] = {VAL, inner};
  size_t len2[] = {sizeof(VAL), ni};
  size_t no = bundle(outer, el2, len2, 2);
  seen s = {0};
  ASSERT_EQ(proto_osc_walk(outer, no, on_msg, &s), 0);
  ASSERT(s.n == 3 && s.vals == 2 && s.applies == 1);
}

TEST(osc_refuses_every_truncation_of_a_bundle_with_a_code) {
  uint8_t b[256];
  const uint8_t *el[] = {VAL, APPLY};
  size_t len[] = {sizeof(VAL), sizeof(APPLY)};
  size_t n = bundle(b, el, len, 2);
  for (size_t k = 0; k < n; k++) {
    uint8_t *copy = malloc(k ? k : 1); /* exactly k bytes: ASan sees a read past them */
    memcpy(copy, b, k);
    seen s = {0};
    int rc = proto_osc_walk(copy, k, on_msg, &s);
    /* cut between elements it is a shorter bundle (OSC allows an empty one) */
    size_t whole = k == 16 ? 0 : k == 16 + 4 + sizeof(VAL) ? 1 : 9;
    if (whole < 9) {
      ASSERT_EQ(rc, 0);
      ASSERT_EQ(s.n, whole);
    } else if (rc == 0) {
      test__fail(__FILE__, __LINE__, "a bundle cut at %zu of %zu bytes walked", k, n);
    } else {
      ASSERT(rc == PROTO_ETRUNCATED || rc == PROTO_EINVAL);
    }
    free(copy);
  }
}

TEST(osc_refuses_bad_type_tags_missing_padding_and_extra_bytes) {
  uint8_t m[64];
  seen s = {0};
  memcpy(m, VAL, sizeof(VAL));
  m[22] = 'Q'; /* ,sQ: no such type tag in OSC 1.0 */
  ASSERT_EQ(proto_osc_walk(m, sizeof(VAL), on_msg, &s), PROTO_ETYPE);
  memcpy(m, VAL, sizeof(VAL));
  m[20] = 'x'; /* type tag string without its comma */
  ASSERT_EQ(proto_osc_walk(m, sizeof(VAL), on_msg, &s), PROTO_EINVAL);
  memcpy(m, VAL, sizeof(VAL));
  m[19] = 'x'; /* the address's padding is not NUL */
  ASSERT_EQ(proto_osc_walk(m, sizeof(VAL), on_msg, &s), PROTO_EINVAL);
  memcpy(m, VAL, sizeof(VAL));
  memset(m + sizeof(VAL), 0, 4); /* four bytes after the last argument */
  ASSERT_EQ(proto_osc_walk(m, sizeof(VAL) + 4, on_msg, &s), PROTO_ETRAILING);
  memcpy(m, VAL, sizeof(VAL));
  m[0] = 'V'; /* an address starts with '/' */
  ASSERT_EQ(proto_osc_walk(m, sizeof(VAL), on_msg, &s), PROTO_EINVAL);
  ASSERT_EQ(s.n, 0);
}

TEST(osc_walks_a_ten_thousand_name_bundle_and_bounds_nesting) {
  size_t cap = 16 + 10001 * (4 + sizeof(VAL));
  uint8_t *b = malloc(cap);
  memcpy(b, "#bundle\0\0\0\0\0\0\0\0\1", 16);
  size_t at = 16;
  for (int i = 0; i < 10000; i++) {
    at += put_be32(b + at, sizeof(VAL));
    memcpy(b + at, VAL, sizeof(VAL));
    at += sizeof(VAL);
  }
  at += put_be32(b + at, sizeof(APPLY));
  memcpy(b + at, APPLY, sizeof(APPLY));
  at += sizeof(APPLY);
  seen s = {0};
  ASSERT_EQ(proto_osc_walk(b, at, on_msg, &s), 0);
  ASSERT(s.vals == 10000 && s.applies == 1);
  free(b);
  /* nine bundles deep: one more than PROTO_OSC_MAX_DEPTH */
  uint8_t nest[2][1024];
  size_t n = sizeof(VAL);
  memcpy(nest[0], VAL, n);
  for (int d = 0; d < 9; d++) {
    const uint8_t *el[] = {nest[d % 2]};
    n = bundle(nest[(d + 1) % 2], el, &n, 1);
  }
  ASSERT_EQ(proto_osc_walk(nest[1], n, on_msg, &s), PROTO_ETOOBIG);
}

/* A Live Link Face datagram, byte by byte from the layout in proto_livelink.h. */
static size_t livelink(uint8_t *p, const char *subject, float base) {
  size_t at = 0, L = strlen(subject);
  p[at++] = 6, p[at++] = 0, p[at++] = 0, p[at++] = 0;
  memset(p + at, '0', 37);
  p[at] = '$';
  at += 37;
  at += put_be32(p + at, (uint32_t)L);
  memcpy(p + at, subject, L);
  at += L;
  at += put_be32(p + at, 1234); /* frame */
  float sub = 0.25f;
  uint32_t w;
  memcpy(&w, &sub, 4);
  at += put_be32(p + at, w);
  at += put_be32(p + at, 60);
  at += put_be32(p + at, 1);
  p[at++] = 61;
  for (int i = 0; i < 61; i++) {
    float v = base + (float)i / 64;
    memcpy(&w, &v, 4);
    at += put_be32(p + at, w);
  }
  return at;
}

TEST(live_link_face_frames_decode_as_the_published_layout_says) {
  uint8_t p[512];
  size_t n = livelink(p, "iPhone", 0.125f);
  ASSERT_EQ(n, 306 + 6);
  proto_livelink_frame f;
  ASSERT_EQ(proto_livelink_decode(p, n, &f), 0);
  ASSERT(f.subject_len == 6 && memcmp(f.subject, "iPhone", 6) == 0);
  ASSERT(f.frame_number == 1234 && f.subframe == 0.25f && f.rate_num == 60 && f.rate_den == 1);
  for (int i = 0; i < 61; i++) ASSERT(f.values[i] == 0.125f + (float)i / 64);
  ASSERT(strcmp(proto_livelink_name(0), "eyeBlinkLeft") == 0);
  ASSERT(strcmp(proto_livelink_name(17), "jawOpen") == 0);
  ASSERT(strcmp(proto_livelink_name(51), "tongueOut") == 0);
  ASSERT(strcmp(proto_livelink_name(60), "rightEyeRoll") == 0);
  ASSERT(proto_livelink_name(61) == NULL);
}

TEST(live_link_face_refuses_every_other_size_version_and_count) {
  uint8_t p[600];
  size_t n = livelink(p, "", 0);
  proto_livelink_frame f;
  for (size_t k = 0; k < 600; k++) {
    if (k == n) continue;
    uint8_t *copy = malloc(k ? k : 1);
    memcpy(copy, p, k < n ? k : n);
    if (k > n) memset(copy + n, 0, k - n);
    int rc = proto_livelink_decode(copy, k, &f);
    ASSERT(rc == PROTO_ETRUNCATED || rc == PROTO_ETRAILING);
    free(copy);
  }
  p[0] = 5;
  ASSERT_EQ(proto_livelink_decode(p, n, &f), PROTO_EVERSION);
  p[0] = 6;
  p[45 + 16] = 60;
  ASSERT_EQ(proto_livelink_decode(p, n, &f), PROTO_EINVAL);
  p[45 + 16] = 61;
  put_be32(p + 41, 0xffffffffu); /* a negative name length */
  ASSERT_EQ(proto_livelink_decode(p, n, &f), PROTO_EINVAL);
}
