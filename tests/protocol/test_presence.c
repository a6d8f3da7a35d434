/*
 * test_presence.c — PRESENCE records (protocol/proto_presence.c): what is encoded decodes to
 * the same values; each check refuses its case with its code; an author's colour is the HSV
 * colour its hash names (a floating-point HSV conversion is the oracle, within rounding).
 */
#include <math.h>
#include <string.h>

#include "proto.h"
#include "proto_presence.h"
#include "test.h"

static size_t frame(proto_buf *b, const proto_presence_state *s, const proto_presence_info *i) {
  b->len = 0;
  size_t at = proto_presence_begin(b);
  if (i) ASSERT_OK(proto_presence_put_info(b, i), NULL);
  if (s) ASSERT_OK(proto_presence_put_state(b, s), NULL);
  ASSERT_OK(proto_presence_end(b, at), NULL);
  return b->len - PROTO_HEADER_SIZE;
}

TEST(presence_records_decode_to_what_was_encoded_and_each_bad_value_is_refused) {
  proto_buf b;
  proto_buf_init(&b);
  proto_presence_state s = {9, PROTO_PRES_CURSOR | PROTO_PRES_CAMERA, PROTO_TOOL_BRUSH0 + 5, {1, 2, 3}, {0, 0, 1}, 0.5f,
                            {4, 5, 6}, {7, 8, 9}, 1.0f};
  proto_presence_info in = {9, PROTO_ROLE_EDITOR, PROTO_CLIENT_TOOL, PROTO_PRES_EDITING, 77, {"ana", 3}};
  size_t n = frame(&b, &s, &in);
  ASSERT_EQ(n, (size_t)(1 + 4 + 3 + 4 + 2 + 3) + PROTO_PRES_STATE_SIZE);
  proto_header h;
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_EQ(h.type, PROTO_PRESENCE);
  ASSERT_EQ(h.session_version, 0);
  proto_presence_iter it;
  proto_presence_rec r;
  proto_presence_iter_init(&it, b.data + PROTO_HEADER_SIZE, n);
  ASSERT_EQ(proto_presence_next(&it, &r), 1);
  ASSERT_EQ(r.kind, PROTO_PRES_INFO);
  ASSERT_EQ(r.u.info.idle_ms, 77);
  ASSERT(r.u.info.author.len == 3 && memcmp(r.u.info.author.ptr, "ana", 3) == 0);
  ASSERT_EQ(proto_presence_next(&it, &r), 1);
  ASSERT_EQ(r.kind, PROTO_PRES_STATE);
  ASSERT(memcmp(&r.u.state, &s, sizeof(s)) == 0);
  ASSERT_EQ(proto_presence_next(&it, &r), 0);
  /* Without the camera flag its fields go as zeros, whatever the struct held. */
  s.flags = PROTO_PRES_CURSOR;
  n = frame(&b, &s, NULL);
  proto_presence_iter_init(&it, b.data + PROTO_HEADER_SIZE, n);
  ASSERT_EQ(proto_presence_next(&it, &r), 1);
  ASSERT(r.u.state.eye[0] == 0 && r.u.state.fov == 0 && r.u.state.radius == 0.5f);
  /* Each check: a fov out of (0, pi), a negative radius, an unknown flag, tool or kind. */
  uint32_t count;
  s.flags = PROTO_PRES_CAMERA, s.fov = 3.2f;
  n = frame(&b, &s, NULL);
  ASSERT_EQ(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n, &count), PROTO_EINVAL);
  s.fov = 1, s.flags = PROTO_PRES_CURSOR, s.radius = -1;
  n = frame(&b, &s, NULL);
  ASSERT_EQ(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n, &count), PROTO_EINVAL);
  s.radius = 0, s.flags = 4;
  n = frame(&b, &s, NULL);
  ASSERT_EQ(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n, &count), PROTO_EINVAL);
  s.flags = PROTO_PRES_CURSOR, s.tool = PROTO_TOOL_MAX + 1;
  n = frame(&b, &s, NULL);
  ASSERT_EQ(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n, &count), PROTO_EINVAL);
  s.tool = 0, s.hit[1] = NAN;
  n = frame(&b, &s, NULL);
  ASSERT_EQ(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n, &count), PROTO_ENONFINITE);
  s.hit[1] = 0;
  n = frame(&b, &s, NULL);
  ASSERT_OK(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n, &count), NULL);
  ASSERT_EQ(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n - 1, &count), PROTO_ETRUNCATED);
  in.author = (proto_str){"a\tb", 3};
  n = frame(&b, NULL, &in);
  ASSERT_EQ(proto_decode_presence(b.data + PROTO_HEADER_SIZE, n, &count), PROTO_EINVAL);
  static const uint8_t unknown_kind[] = {6};
  ASSERT_EQ(proto_decode_presence(unknown_kind, 1, &count), PROTO_EINVAL);
  proto_buf_fini(&b);
  /* 14 is a header like any other (as BULK's 13, TEXTURE's 15, texclip's 16 and 17, and MASK's 20
   * are); 18, 19 and 21 are none. */
  uint8_t hd[PROTO_HEADER_SIZE] = {'D', 'F', 'M', 'D', 1, 0, 14};
  ASSERT_OK(proto_header_decode(hd, NULL, &h), NULL);
  for (int t = 15; t <= 21; t++) {
    hd[6] = (uint8_t)t;
    ASSERT_EQ(proto_header_decode(hd, NULL, &h),
              t == PROTO_MASK || t == PROTO_TEXTURE || t == PROTO_TEXWEIGHTS || t == PROTO_TEXCLIP ? 0 : PROTO_ETYPE);
  }
}

TEST(an_authors_colour_is_the_hsv_colour_of_its_hue_at_value_230_and_saturation_0_7) {
  char name[32];
  int hues[6] = {0};
  for (int i = 0; i < 2000; i++) {
    snprintf(name, sizeof(name), "author-%d", i);
    uint8_t rgb[3];
    proto_presence_colour(name, strlen(name), rgb);
    uint32_t h = 2166136261u;
    for (size_t k = 0; k < strlen(name); k++) h = (h ^ (uint8_t)name[k]) * 16777619u;
    double hue = (double)(h % 360), v = 230, c = 161;
    double x = c * (1 - fabs(fmod(hue / 60.0, 2) - 1)), m = v - c;
    double want[3];
    int s = (int)(hue / 60);
    hues[s]++;
    double t[6][3] = {{c, x, 0}, {x, c, 0}, {0, c, x}, {0, x, c}, {x, 0, c}, {c, 0, x}};
    for (int k = 0; k < 3; k++) want[k] = t[s][k] + m;
    for (int k = 0; k < 3; k++) ASSERT_NEAR((double)rgb[k], want[k], 1.0);
  }
  for (int s = 0; s < 6; s++) ASSERT(hues[s] > 200); /* every sector was tried */
}
