/*
 * test_caps.c — the caps option of HELLO and WELCOME (docs/protocol.md §14): a HELLO or WELCOME
 * that carries none is the documented bytes of §12.1 unchanged; names round-trip, unknown ones
 * are skipped; each limit of a list has its code and its reason.
 *
 * The oracles: the byte dumps written out in docs/protocol.md (§12.1 and §14), and lists built
 * here byte by byte.
 */
#include "proto.h"
#include "proto_caps.h"
#include "test.h"

/* Hex of b's bytes, for comparing with the documented dumps. */
static const char *hex_of(const proto_buf *b) {
  static char out[4096];
  ASSERT(!b->failed && b->len * 2 < sizeof(out));
  for (size_t i = 0; i < b->len; i++) snprintf(out + 2 * i, 3, "%02x", b->data[i]);
  return out;
}

/* The tolerance the documented WELCOME carries, by its bits (6.30575e-06 prints shorter than it is). */
static float doc_tolerance(void) {
  uint32_t bits = 0x36d395feu;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

#define ASSERT_HEX(b, want)                                                                          \
  do {                                                                                               \
    const char *g_ = hex_of(b);                                                                      \
    if (strcmp(g_, (want)) != 0) test__fail(__FILE__, __LINE__, "bytes:\n  got  %s\n  want %s", g_, (want)); \
  } while (0)

TEST(a_hello_and_a_welcome_without_capabilities_are_the_documented_bytes) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hi = {PROTO_VERSION_2, PROTO_ROLE_VIEWER, {"demo", 4}, {"", 0}};
  proto_hello_opts ho = {.codec = PROTO_CODEC_QUANTISED, .max_rate = 10.0f};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &ho), NULL);
  /* docs/protocol.md §12.1, "a viewer joins demo ... at most 10 updates a second". */
  ASSERT_HEX(&b, "44464d44020001002000000000000000000000000200010004006465" "6d6f0000"
                 "1200" "01010000" "02040000002041" "03040000000000");
  b.len = 0;
  proto_welcome w = {9, PROTO_ROLE_VIEWER, {"demo", 4}};
  proto_welcome_opts wo = {.protocol_version = PROTO_VERSION_2, .shift = 5, .max_rate = 10.0f,
                           .tolerance = doc_tolerance()};
  ASSERT_OK(proto_encode_welcome2(&b, 0, &w, &wo), NULL);
  ASSERT_HEX(&b, "44464d4402000200240000000000000000000000" "0900000001000400" "64656d6f"
                 "1600" "01010000" "02040000002041" "030400fe95d336" "04010005");
  proto_buf_fini(&b);
}

TEST(capabilities_asked_in_hello_and_granted_in_welcome_round_trip_by_name) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hi = {PROTO_VERSION_2, PROTO_ROLE_VIEWER, {"demo", 4}, {"", 0}};
  proto_hello_opts ho = {.max_rate = 10.0f, .caps = PROTO_CAP_BIT(PROTO_CAP_NOOP)};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &ho), NULL);
  /* docs/protocol.md §14: the §12.1 HELLO with the caps option last. */
  ASSERT_HEX(&b, "44464d44020001002800000000000000000000000200010004006465" "6d6f0000"
                 "1a00" "01010000" "02040000002041" "03040000000000" "070500046e6f6f70");
  proto_header h;
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  proto_hello d;
  proto_hello_opts dop;
  ASSERT_OK(proto_decode_hello2(b.data + PROTO_HEADER_SIZE, h.length, &d, &dop), NULL);
  ASSERT_EQ(dop.caps, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  ASSERT_EQ(dop.caps_option, 1);
  ASSERT(dop.max_rate == 10.0f);
  /* Asking for nothing but whether the server knows capabilities: an empty option. */
  b.len = 0;
  proto_hello_opts empty = {.caps_option = 1};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &empty), NULL);
  ASSERT_EQ(b.len, 52 + 3);
  ASSERT(memcmp(b.data + b.len - 3, "\x07\x00\x00", 3) == 0);
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_OK(proto_decode_hello2(b.data + PROTO_HEADER_SIZE, h.length, &d, &dop), NULL);
  ASSERT_EQ(dop.caps, 0);
  ASSERT_EQ(dop.caps_option, 1);
  /* Without the option, a decoder says so. */
  b.len = 0;
  proto_hello_opts plain = {0};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &plain), NULL);
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_OK(proto_decode_hello2(b.data + PROTO_HEADER_SIZE, h.length, &d, &dop), NULL);
  ASSERT_EQ(dop.caps_option, 0);
  /* WELCOME: the grant, after the shift. */
  b.len = 0;
  proto_welcome w = {9, PROTO_ROLE_VIEWER, {"demo", 4}};
  proto_welcome_opts wo = {.protocol_version = PROTO_VERSION_2, .shift = 5, .max_rate = 10.0f,
                           .tolerance = doc_tolerance(), .caps = PROTO_CAP_BIT(PROTO_CAP_NOOP), .caps_option = 1};
  ASSERT_OK(proto_encode_welcome2(&b, 0, &w, &wo), NULL);
  ASSERT_HEX(&b, "44464d44020002002c0000000000000000000000" "0900000001000400" "64656d6f"
                 "1e00" "01010000" "02040000002041" "030400fe95d336" "04010005" "070500046e6f6f70");
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  proto_welcome wd;
  proto_welcome_opts wdo;
  ASSERT_OK(proto_decode_welcome2(b.data + PROTO_HEADER_SIZE, h.length, &wd, &wdo), NULL);
  ASSERT_EQ(wdo.caps, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  ASSERT_EQ(wdo.caps_option, 1);
  ASSERT_EQ(wdo.shift, 5);
  proto_buf_fini(&b);
}

/* A list of names, each u8 length + bytes. */
static size_t list(uint8_t *p, const char *const *names, int count) {
  size_t n = 0;
  for (int i = 0; i < count; i++) {
    size_t len = strlen(names[i]);
    p[n++] = (uint8_t)len;
    memcpy(p + n, names[i], len);
    n += len;
  }
  return n;
}

static void expect(const uint8_t *p, size_t n, int code, const char *why, uint32_t known) {
  uint32_t got = 0xdead;
  const char *w = NULL;
  ASSERT_EQ(proto_caps_get(p, n, &got, &w), code);
  if (why) ASSERT_STR_CONTAINS(w, why);
  if (code == 0) ASSERT_EQ(got, known);
}

TEST(a_capability_list_is_checked_for_each_limit_and_unknown_names_are_skipped) {
  uint8_t p[2048];
  static const char *const mixed[] = {"presence.v2", "noop", "zz-9_a"};
  expect(p, list(p, mixed, 3), 0, NULL, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  static const char *const unknown[] = {"textures", "bulk.v9"};
  expect(p, list(p, unknown, 2), 0, NULL, 0);
  expect(p, 0, 0, NULL, 0);
  char names[33][8];
  const char *ptrs[33];
  for (int i = 0; i < 33; i++) {
    snprintf(names[i], sizeof(names[i]), "c%d", i);
    ptrs[i] = names[i];
  }
  expect(p, list(p, ptrs, PROTO_MAX_CAPS), 0, NULL, 0);
  expect(p, list(p, ptrs, PROTO_MAX_CAPS + 1), PROTO_ETOOBIG, "more than 32 capabilities", 0);
  static const char *const longest[] = {"abcdefghijklmnopqrstuvwxyz012345"};
  expect(p, list(p, longest, 1), 0, NULL, 0);
  static const char *const too_long[] = {"abcdefghijklmnopqrstuvwxyz0123456"};
  expect(p, list(p, too_long, 1), PROTO_EINVAL, "over 32 bytes", 0);
  static const char *const twice[] = {"noop", "x", "noop"};
  expect(p, list(p, twice, 3), PROTO_EINVAL, "named twice", 0);
  static const char *const upper[] = {"Noop"};
  expect(p, list(p, upper, 1), PROTO_EINVAL, "a-z 0-9 _ . -", 0);
  p[0] = 0;
  expect(p, 1, PROTO_EINVAL, "an empty capability name", 0);
  static const uint8_t cut[] = {5, 'n', 'o', 'o', 'p'};
  expect(cut, sizeof(cut), PROTO_ETRUNCATED, "runs past the end", 0);
  /* The same refusals reach a HELLO decoder, and proto_hello_caps_why names them. */
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hi = {PROTO_VERSION_2, PROTO_ROLE_VIEWER, {"demo", 4}, {"", 0}};
  proto_hello_opts ho = {.caps = PROTO_CAP_BIT(PROTO_CAP_NOOP)};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &ho), NULL);
  b.data[b.len - 1] = 'P'; /* "nooP" */
  const uint8_t *payload = b.data + PROTO_HEADER_SIZE;
  size_t n = b.len - PROTO_HEADER_SIZE;
  proto_hello d;
  proto_hello_opts dop;
  ASSERT_EQ(proto_decode_hello2(payload, n, &d, &dop), PROTO_EINVAL);
  ASSERT_STR_CONTAINS(proto_hello_caps_why(payload, n), "a-z 0-9 _ . -");
  b.data[b.len - 1] = 'p';
  ASSERT(proto_hello_caps_why(payload, n) == NULL);
  /* A HELLO refused for another option: the caps list is not blamed. */
  b.len = 0;
  proto_hello_opts neg = {.tolerance = 1.0f, .caps = PROTO_CAP_BIT(PROTO_CAP_NOOP)};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &neg), NULL);
  float minus = -1.0f;
  memcpy(b.data + b.len - 8 - 4, &minus, 4); /* the tolerance, before the 8-byte caps option */
  ASSERT_EQ(proto_decode_hello2(b.data + PROTO_HEADER_SIZE, b.len - PROTO_HEADER_SIZE, &d, &dop), PROTO_EINVAL);
  ASSERT(proto_hello_caps_why(b.data + PROTO_HEADER_SIZE, b.len - PROTO_HEADER_SIZE) == NULL);
  proto_buf_fini(&b);
}

TEST(the_capability_registry_names_its_ids_and_no_frame_of_versions_1_and_2_needs_one) {
  ASSERT_STR_CONTAINS(proto_cap_name(PROTO_CAP_NOOP), "noop");
  ASSERT(proto_cap_name(PROTO_CAP_COUNT) == NULL);
  ASSERT_EQ(proto_cap_find("noop", 4), PROTO_CAP_NOOP);
  ASSERT_EQ(proto_cap_find("noo", 3), -1);
  ASSERT_EQ(proto_cap_find("noopy", 5), -1);
  ASSERT(PROTO_CAP_COUNT <= 32); /* a set is a uint32_t */
  for (int t = 0; t < 256; t++) /* versions 1 and 2 (1-12) need none; BULK needs "bulk", PRESENCE "presence", TEXTURE "texture", MASK "mask" */
    ASSERT_EQ(proto_cap_of_type((uint8_t)t), t == PROTO_BULK       ? (int)PROTO_CAP_BULK
                                             : t == PROTO_PRESENCE ? (int)PROTO_CAP_PRESENCE
                                             : t == PROTO_TEXTURE  ? (int)PROTO_CAP_TEXTURE
                                             : t == PROTO_MASK     ? (int)PROTO_CAP_MASK
                                             : t == PROTO_TEXWEIGHTS || t == PROTO_TEXCLIP ? (int)PROTO_CAP_TEXCLIP
                                                                   : -1);
  for (int i = 0; i < PROTO_CAP_COUNT; i++) {
    const char *name = proto_cap_name((proto_cap)i);
    if (!name) continue; /* an id with no name (none today; a capability retired would leave one) */
    uint8_t v[40];
    v[0] = (uint8_t)strlen(name);
    memcpy(v + 1, name, strlen(name));
    uint32_t known;
    ASSERT_OK(proto_caps_get(v, 1 + strlen(name), &known, NULL), name); /* every name is a valid one */
    ASSERT_EQ(known, PROTO_CAP_BIT(i));
  }
  uint32_t set;
  const char *bad = NULL;
  ASSERT_OK(proto_caps_parse("noop", &set, &bad), NULL);
  ASSERT_EQ(set, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  ASSERT_OK(proto_caps_parse("", &set, &bad), NULL);
  ASSERT_EQ(set, 0);
  ASSERT_EQ(proto_caps_parse("noop,textures", &set, &bad), PROTO_EINVAL);
  ASSERT_STR_CONTAINS(bad, "textures");
  ASSERT_OK(proto_caps_parse("noop,presence", &set, &bad), NULL);
  ASSERT_EQ(set, PROTO_CAP_BIT(PROTO_CAP_NOOP) | PROTO_CAP_BIT(PROTO_CAP_PRESENCE));
  char text[64];
  proto_caps_format(PROTO_CAP_BIT(PROTO_CAP_NOOP), text, sizeof(text));
  ASSERT_STR_CONTAINS(text, "noop");
  ASSERT_EQ(strlen(text), 4);
  proto_caps_format(0, text, sizeof(text));
  ASSERT_EQ(strlen(text), 0);
}
