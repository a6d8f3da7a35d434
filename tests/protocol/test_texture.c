/*
 * test_texture.c — TEXTURE frames (docs/protocol.md §17) byte by byte: MATERIALS and IMAGE
 * round trip, the layout the document writes out, and each refusal with its code.
 */
#include <math.h>
#include <string.h>

#include "proto.h"
#include "proto_caps.h"
#include "proto_texture.h"
#include "test.h"

TEST(texture_frames_round_trip_and_materials_have_the_documented_layout) {
  proto_buf b;
  proto_buf_init(&b);
  proto_material m[2] = {{0, 10, 1, 1, {1.0f, 0.5f, 0.25f, 1.0f}}, {10, 5, 0, 0, {1, 1, 1, 1}}};
  ASSERT_OK(proto_encode_texture_materials(&b, 1, 2, m), NULL);
  proto_header h;
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_EQ(h.type, PROTO_TEXTURE);
  ASSERT_EQ(h.session_version, 0);
  ASSERT_EQ(h.length, 9 + 2 * PROTO_TEX_MATERIAL_SIZE);
  static const uint8_t head[] = {1, 1, 0, 0, 0, 2, 0, 0, 0, /* kind, images, submeshes */
                                 0, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0x80, 0x3f};
  ASSERT(memcmp(b.data + PROTO_HEADER_SIZE, head, sizeof(head)) == 0);
  proto_texture_view v;
  ASSERT_OK(proto_decode_texture(b.data + PROTO_HEADER_SIZE, h.length, &v), NULL);
  ASSERT_EQ(v.kind, PROTO_TEX_MATERIALS);
  ASSERT_EQ(v.image_count, 1);
  ASSERT_EQ(v.submesh_count, 2);
  proto_material got;
  proto_texture_material(&v, 1, &got);
  ASSERT_EQ(got.first_triangle, 10);
  ASSERT_EQ(got.triangle_count, 5);
  ASSERT_EQ(got.texture, 0);
  proto_texture_material(&v, 0, &got);
  ASSERT(got.base_color[1] == 0.5f && got.base_color[2] == 0.25f && got.has_color == 1 && got.texture == 1);
  ASSERT_EQ(proto_decode_texture(b.data + PROTO_HEADER_SIZE, h.length - 1, &v), PROTO_ETRUNCATED);
  proto_buf_fini(&b);

  proto_buf_init(&b);
  uint8_t px[3 * 2 * 4];
  for (size_t i = 0; i < sizeof(px); i++) px[i] = (uint8_t)(i * 7);
  ASSERT_OK(proto_encode_texture_image(&b, 0, "skin.png", 3, 2, px), NULL);
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_EQ(h.length, proto_texture_image_size(8, 3, 2));
  ASSERT_OK(proto_decode_texture(b.data + PROTO_HEADER_SIZE, h.length, &v), NULL);
  ASSERT_EQ(v.kind, PROTO_TEX_IMAGE);
  ASSERT(v.width == 3 && v.height == 2 && v.index == 0 && v.encoding == PROTO_TEX_RGBA8);
  ASSERT(v.name.len == 8 && memcmp(v.name.ptr, "skin.png", 8) == 0);
  ASSERT(memcmp(v.pixels, px, sizeof(px)) == 0);
  uint8_t *body = b.data + PROTO_HEADER_SIZE;
  body[13] = 1; /* an encoding this build does not know */
  ASSERT_EQ(proto_decode_texture(body, h.length, &v), PROTO_EINVAL);
  body[13] = 0;
  body[5] = 0; /* width 3 -> 0 */
  ASSERT_EQ(proto_decode_texture(body, h.length, &v), PROTO_EINVAL);
  body[5] = 3;
  ASSERT_EQ(proto_decode_texture(body, h.length + 0, &v), 0);
  body[0] = 3; /* an unknown kind */
  ASSERT_EQ(proto_decode_texture(body, h.length, &v), PROTO_EINVAL);
  proto_buf_fini(&b);
  ASSERT_EQ(proto_cap_of_type(PROTO_TEXTURE), PROTO_CAP_TEXTURE);
  ASSERT_EQ(proto_cap_find("texture", 7), PROTO_CAP_TEXTURE);
}

TEST(texture_encoders_refuse_what_decoders_would_refuse) {
  proto_buf b;
  proto_buf_init(&b);
  proto_material m = {0, 1, 2, 1, {1, 1, 1, 1}};
  ASSERT_EQ(proto_encode_texture_materials(&b, 1, 1, &m), PROTO_EINVAL); /* texture 2 of 1 image */
  m.texture = 1, m.base_color[0] = 1.5f;
  ASSERT_EQ(proto_encode_texture_materials(&b, 1, 1, &m), PROTO_EINVAL);
  m.base_color[0] = NAN;
  ASSERT_EQ(proto_encode_texture_materials(&b, 1, 1, &m), PROTO_ENONFINITE);
  ASSERT_EQ(proto_encode_texture_materials(&b, PROTO_MAX_TEX_IMAGES + 1, 0, NULL), PROTO_EINVAL);
  uint8_t px[4] = {0};
  ASSERT_EQ(proto_encode_texture_image(&b, 0, "x", 0, 1, px), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_texture_image(&b, 0, "x", PROTO_MAX_TEX_SIDE + 1, 1, px), PROTO_EINVAL);
  ASSERT_EQ(proto_encode_texture_image(&b, PROTO_MAX_TEX_IMAGES, "x", 1, 1, px), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0); /* nothing appended */
  /* A lying image count in MATERIALS: the limit before the bytes. */
  static const uint8_t lie[] = {1, 0xff, 0, 0, 0, 0, 0, 0, 0};
  proto_texture_view v;
  ASSERT_EQ(proto_decode_texture(lie, sizeof(lie), &v), PROTO_ETOOBIG);
  static const uint8_t trailing[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(proto_decode_texture(trailing, sizeof(trailing), &v), PROTO_ETRAILING);
  proto_buf_fini(&b);
}
