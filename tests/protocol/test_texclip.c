/*
 * test_texclip.c — TEXCLIP and TEXWEIGHTS (protocol/proto_texclip.c): round trips field by
 * field, every truncation refused, and layouts that would make a viewer read outside its
 * texture array refused before any texel is touched.
 */
#include "proto.h"
#include "proto_caps.h"
#include "proto_texclip.h"
#include "test.h"

static proto_texclip_window wins[2] = {{0, 0, 8, 6, 0, 1}, {2, 1, 3, 2, 1, 2}};
static proto_texclip_comp comps[3] = {{1, 0, 0, 0.5f, -0.25f}, {2, 0, 0, 0.1f, 0}, {2, 3, 0, 2, -1}};

static proto_texclip sample(uint8_t *texels) {
  proto_texclip c = {.id = 7, .name = {"blush", 5}, .width = 8, .height = 6, .frame_count = 30,
                     .fps = 30, .window_count = 2, .component_count = 3, .layers = 3,
                     .windows = wins, .comps = comps, .texels = texels};
  for (size_t i = 0; i < 3 * 8 * 6 * 3; i++) texels[i] = (uint8_t)(i * 7 + 3);
  return c;
}

TEST(texclip_frame_round_trips_windows_components_and_texels) {
  uint8_t tex[3 * 8 * 6 * 3];
  proto_texclip c = sample(tex);
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_texclip(&b, &c), NULL);
  proto_header h;
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_EQ(h.type, PROTO_TEXCLIP);
  ASSERT_EQ(proto_cap_of_type(h.type), PROTO_CAP_TEXCLIP);
  ASSERT_EQ(h.length, b.len - PROTO_HEADER_SIZE);
  proto_texclip_window dw[PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp dc[PROTO_TEXCLIP_MAX_COMPONENTS];
  proto_texclip d = {.windows = dw, .comps = dc};
  ASSERT_OK(proto_decode_texclip(b.data + PROTO_HEADER_SIZE, h.length, &d), NULL);
  ASSERT_EQ(d.id, 7);
  ASSERT_EQ(d.name.len, 5);
  ASSERT(memcmp(d.name.ptr, "blush", 5) == 0);
  ASSERT_EQ(d.width, 8);
  ASSERT_EQ(d.height, 6);
  ASSERT_EQ(d.frame_count, 30);
  ASSERT_EQ(d.layers, 3);
  ASSERT_EQ(dw[1].x, 2);
  ASSERT_EQ(dw[1].count, 2);
  ASSERT_EQ(dc[2].x, 3);
  ASSERT_NEAR(dc[2].offset, -1, 0);
  ASSERT_NEAR(dc[0].scale, 0.5, 0);
  ASSERT(memcmp(d.texels, tex, sizeof(tex)) == 0);
  /* Every shorter payload is refused. */
  for (size_t n = 0; n < h.length; n++)
    ASSERT(proto_decode_texclip(b.data + PROTO_HEADER_SIZE, n, &d) != 0);
  proto_buf_fini(&b);
}

TEST(texclip_frame_refuses_a_tile_off_its_layer_and_components_outside_their_window) {
  uint8_t tex[3 * 8 * 6 * 3];
  proto_texclip c = sample(tex);
  proto_buf b;
  proto_buf_init(&b);
  comps[2].x = 6; /* 6 + 3 > 8 */
  ASSERT_EQ(proto_encode_texclip(&b, &c), PROTO_EINVAL);
  comps[2].x = 3;
  ASSERT_OK(proto_encode_texclip(&b, &c), NULL);
  proto_texclip_window dw[PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp dc[PROTO_TEXCLIP_MAX_COMPONENTS];
  proto_texclip d = {.windows = dw, .comps = dc};
  uint8_t *p = b.data + PROTO_HEADER_SIZE;
  size_t n = b.len - PROTO_HEADER_SIZE;
  size_t head = 4 + 2 + 5 + 2 + 2 + 4 + 4, win1 = head + 3 + 10; /* window 1's fields */
  p[win1 + 8] = 2;                                  /* its first component: 2, not 1 */
  ASSERT_EQ(proto_decode_texclip(p, n, &d), PROTO_EINVAL);
  p[win1 + 8] = 1;
  p[win1 + 10] = 3;                                 /* component 0 (window 0) in layer 3 of 3 */
  ASSERT_EQ(proto_decode_texclip(p, n, &d), PROTO_EINVAL);
  p[win1 + 10] = 1;
  ASSERT_OK(proto_decode_texclip(p, n, &d), NULL);
  p[head + 1] = 65;                             /* 65 components */
  ASSERT_EQ(proto_decode_texclip(p, n, &d), PROTO_ETOOBIG);
  proto_buf_fini(&b);
}

TEST(texweights_frame_round_trips_a_crossfade_of_two_clips) {
  proto_texweights_entry e[2] = {{.id = 1, .mean = 0.25f, .count = 2, .weights = {0.5f, -1}},
                                 {.id = 4, .mean = 0.75f, .count = 3, .weights = {1, 2, 3}}};
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_texweights(&b, e, 2), NULL);
  ASSERT_EQ(b.len, PROTO_HEADER_SIZE + 1 + 2 * 9 + 5 * 4);
  proto_header h;
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_EQ(h.type, PROTO_TEXWEIGHTS);
  proto_texweights_entry d[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t count = 0;
  ASSERT_OK(proto_decode_texweights(b.data + PROTO_HEADER_SIZE, h.length, d, &count), NULL);
  ASSERT_EQ(count, 2);
  ASSERT_EQ(d[1].id, 4);
  ASSERT_NEAR(d[0].mean, 0.25, 0);
  ASSERT_NEAR(d[1].weights[2], 3, 0);
  for (size_t n = 0; n < h.length; n++)
    ASSERT(proto_decode_texweights(b.data + PROTO_HEADER_SIZE, n, d, &count) != 0);
  b.data[PROTO_HEADER_SIZE] = 5; /* more clips than a frame may carry */
  ASSERT_EQ(proto_decode_texweights(b.data + PROTO_HEADER_SIZE, h.length, d, &count), PROTO_ETOOBIG);
  proto_buf_fini(&b);
}
