/*
 * proto_texture.c — TEXTURE frames (docs/protocol.md §17): a session's materials and its
 * base-colour images, sent once per join to connections granted the capability "texture".
 *
 * Images travel as RGBA8, not PNG: deformd holds them decoded (the import decoded them once), a
 * PNG encoder on the server would cost a pool job per session and a PNG decoder in deform-view,
 * and for the photographic textures meshes carry (spider.obj's JPEGs) PNG saves little
 * (docs/protocol.md §17 has the sizes). The encoding byte leaves room for another.
 *
 * DOES NOT decide who is sent what, or do I/O.
 */
#include <math.h>
#include <string.h>

#include "proto_texture.h"
#include "proto_internal.h"

#define CHECK(expr)            \
  do {                         \
    int rc_ = (expr);          \
    if (rc_) return rc_;       \
  } while (0)

static int bad_material(const proto_material *m, uint32_t image_count) {
  if (m->texture > image_count || m->has_color > 1) return PROTO_EINVAL;
  for (int k = 0; k < 4; k++) {
    if (!isfinite(m->base_color[k])) return PROTO_ENONFINITE;
    if (!(m->base_color[k] >= 0.0f && m->base_color[k] <= 1.0f)) return PROTO_EINVAL;
  }
  return 0;
}

int proto_encode_texture_materials(proto_buf *b, uint32_t image_count, uint32_t submesh_count,
                                   const proto_material *m) {
  if (image_count > PROTO_MAX_TEX_IMAGES || submesh_count > PROTO_MAX_SUBMESHES) return PROTO_EINVAL;
  for (uint32_t i = 0; i < submesh_count; i++) CHECK(bad_material(&m[i], image_count));
  size_t at = proto_frame_begin(b, PROTO_TEXTURE, 0, 0);
  proto__put_u8(b, PROTO_TEX_MATERIALS);
  proto__put_u32(b, image_count);
  proto__put_u32(b, submesh_count);
  for (uint32_t i = 0; i < submesh_count; i++) {
    proto__put_u32(b, m[i].first_triangle);
    proto__put_u32(b, m[i].triangle_count);
    proto__put_u32(b, m[i].texture);
    proto__put_u8(b, m[i].has_color);
    for (int k = 0; k < 4; k++) proto__put_f32(b, m[i].base_color[k]);
  }
  return proto_frame_end(b, at);
}

int proto_encode_texture_image(proto_buf *b, uint32_t index, const char *name, uint32_t width,
                               uint32_t height, const uint8_t *rgba) {
  if (index >= PROTO_MAX_TEX_IMAGES || width == 0 || height == 0 || width > PROTO_MAX_TEX_SIDE ||
      height > PROTO_MAX_TEX_SIDE)
    return PROTO_EINVAL;
  size_t nl = name ? strlen(name) : 0;
  if (nl > PROTO_MAX_NAME) nl = PROTO_MAX_NAME;
  size_t at = proto_frame_begin(b, PROTO_TEXTURE, 0, 0);
  proto__put_u8(b, PROTO_TEX_IMAGE);
  proto__put_u32(b, index);
  proto__put_u32(b, width);
  proto__put_u32(b, height);
  proto__put_u8(b, PROTO_TEX_RGBA8);
  proto__put_str(b, name ? name : "", nl);
  size_t bytes = 4 * (size_t)width * height;
  uint8_t *p = proto__reserve(b, bytes);
  if (p) memcpy(p, rgba, bytes);
  return proto_frame_end(b, at);
}

static int decode_materials(proto_cur *c, proto_texture_view *v) {
  CHECK(proto__get_u32(c, &v->image_count));
  CHECK(proto__get_u32(c, &v->submesh_count));
  if (v->image_count > PROTO_MAX_TEX_IMAGES || v->submesh_count > PROTO_MAX_SUBMESHES) return PROTO_ETOOBIG;
  CHECK(proto__get(c, (size_t)PROTO_TEX_MATERIAL_SIZE * v->submesh_count, &v->materials));
  for (uint32_t i = 0; i < v->submesh_count; i++) {
    proto_material m;
    proto_texture_material(v, i, &m);
    CHECK(bad_material(&m, v->image_count));
  }
  return 0;
}

static int decode_image(proto_cur *c, proto_texture_view *v) {
  CHECK(proto__get_u32(c, &v->index));
  CHECK(proto__get_u32(c, &v->width));
  CHECK(proto__get_u32(c, &v->height));
  CHECK(proto__get_u8(c, &v->encoding));
  if (v->index >= PROTO_MAX_TEX_IMAGES || v->encoding != PROTO_TEX_RGBA8) return PROTO_EINVAL;
  if (v->width == 0 || v->height == 0 || v->width > PROTO_MAX_TEX_SIDE || v->height > PROTO_MAX_TEX_SIDE)
    return PROTO_EINVAL;
  CHECK(proto__get_str(c, &v->name));
  return proto__get(c, 4 * (size_t)v->width * v->height, &v->pixels);
}

int proto_decode_texture(const uint8_t *p, size_t n, proto_texture_view *v) {
  proto_cur c = {p, p + n};
  memset(v, 0, sizeof(*v));
  CHECK(proto__get_u8(&c, &v->kind));
  if (v->kind == PROTO_TEX_MATERIALS) CHECK(decode_materials(&c, v));
  else if (v->kind == PROTO_TEX_IMAGE) CHECK(decode_image(&c, v));
  else return PROTO_EINVAL;
  return c.at == c.end ? 0 : PROTO_ETRAILING;
}

void proto_texture_material(const proto_texture_view *v, uint32_t i, proto_material *out) {
  const uint8_t *q = v->materials + (size_t)PROTO_TEX_MATERIAL_SIZE * i;
  out->first_triangle = proto_load_u32(q);
  out->triangle_count = proto_load_u32(q + 4);
  out->texture = proto_load_u32(q + 8);
  out->has_color = q[12];
  for (int k = 0; k < 4; k++) out->base_color[k] = proto_load_f32(q + 13 + 4 * k);
}
