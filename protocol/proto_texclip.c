/*
 * proto_texclip.c — TEXCLIP and TEXWEIGHTS (see proto_texclip.h, docs/protocol.md §18).
 *
 * TEXCLIP body: u32 id, u16 name length + name, u16 width, u16 height, u32 frame_count, f32 fps,
 * u8 windows, u8 components, u8 layers; per window u16 x, y, w, h, u8 first, u8 count; per
 * component u8 layer, u16 x, y, f32 scale, f32 offset; then the texels, layers × height ×
 * width × 3 bytes. At 256 × 256 with 12 components in 7 layers that is 1.4 MB, once per join.
 *
 * TEXWEIGHTS body: u8 entries; per entry u32 id, f32 mean, u8 count, count × f32. One clip of
 * 12 components: 63 bytes with the header, per frame.
 *
 * DOES NOT check more than the bounds: what the bytes mean is shared/mesh_texpca.h's.
 */
#include <string.h>

#include "proto_texclip.h"
#include "proto_internal.h"

static int check_layout(const proto_texclip *c) {
  if (c->width == 0 || c->height == 0 || c->width > PROTO_TEXCLIP_MAX_SIDE ||
      c->height > PROTO_TEXCLIP_MAX_SIDE || c->window_count == 0 ||
      c->window_count > PROTO_TEXCLIP_MAX_WINDOWS || c->component_count > PROTO_TEXCLIP_MAX_COMPONENTS ||
      c->layers == 0 || c->layers > PROTO_TEXCLIP_MAX_LAYERS)
    return PROTO_ETOOBIG;
  uint32_t next = 0;
  for (uint32_t r = 0; r < c->window_count; r++) {
    const proto_texclip_window *w = &c->windows[r];
    if (w->w == 0 || w->h == 0 || w->x + w->w > c->width || w->y + w->h > c->height) return PROTO_EINVAL;
    if (r == 0 && (w->x || w->y || w->w != c->width || w->h != c->height)) return PROTO_EINVAL;
    if (w->first != next || (uint32_t)w->first + w->count > c->component_count) return PROTO_EINVAL;
    next += w->count;
    for (uint32_t k = w->first; k < (uint32_t)w->first + w->count; k++) {
      const proto_texclip_comp *cp = &c->comps[k];
      if (cp->layer == 0 || cp->layer >= c->layers || cp->x + w->w > c->width || cp->y + w->h > c->height)
        return PROTO_EINVAL;
    }
  }
  return next == c->component_count ? 0 : PROTO_EINVAL;
}

int proto_encode_texclip(proto_buf *b, const proto_texclip *c) {
  int rc = check_layout(c);
  if (rc == PROTO_ETOOBIG || c->name.len > PROTO_MAX_NAME) return PROTO_EINVAL;
  if (rc) return rc;
  size_t at = proto_frame_begin(b, PROTO_TEXCLIP, 0, 0);
  proto__put_u32(b, c->id);
  proto__put_str(b, c->name.ptr, c->name.len);
  proto__put_u16(b, c->width);
  proto__put_u16(b, c->height);
  proto__put_u32(b, c->frame_count);
  proto__put_f32(b, c->fps);
  proto__put_u8(b, c->window_count);
  proto__put_u8(b, c->component_count);
  proto__put_u8(b, c->layers);
  for (uint32_t r = 0; r < c->window_count; r++) {
    const proto_texclip_window *w = &c->windows[r];
    proto__put_u16(b, w->x);
    proto__put_u16(b, w->y);
    proto__put_u16(b, w->w);
    proto__put_u16(b, w->h);
    proto__put_u8(b, w->first);
    proto__put_u8(b, w->count);
  }
  for (uint32_t k = 0; k < c->component_count; k++) {
    const proto_texclip_comp *cp = &c->comps[k];
    proto__put_u8(b, cp->layer);
    proto__put_u16(b, cp->x);
    proto__put_u16(b, cp->y);
    proto__put_f32(b, cp->scale);
    proto__put_f32(b, cp->offset);
  }
  size_t n = (size_t)c->layers * c->width * c->height * 3;
  uint8_t *t = proto__reserve(b, n);
  if (t) memcpy(t, c->texels, n);
  if (b->failed) return PROTO_ENOMEM;
  return proto_frame_end(b, at);
}

int proto_decode_texclip(const uint8_t *p, size_t n, proto_texclip *c) {
  proto_cur cur = {p, p + n};
  proto_texclip_window *windows = c->windows;
  proto_texclip_comp *comps = c->comps;
  int rc = 0;
  if ((rc = proto__get_u32(&cur, &c->id)) || (rc = proto__get_str(&cur, &c->name)) ||
      (rc = proto__get_u16(&cur, &c->width)) || (rc = proto__get_u16(&cur, &c->height)) ||
      (rc = proto__get_u32(&cur, &c->frame_count)) || (rc = proto__get_f32(&cur, &c->fps)) ||
      (rc = proto__get_u8(&cur, &c->window_count)) || (rc = proto__get_u8(&cur, &c->component_count)) ||
      (rc = proto__get_u8(&cur, &c->layers)))
    return rc;
  if (c->window_count > PROTO_TEXCLIP_MAX_WINDOWS || c->component_count > PROTO_TEXCLIP_MAX_COMPONENTS)
    return PROTO_ETOOBIG;
  for (uint32_t r = 0; r < c->window_count; r++) {
    proto_texclip_window *w = &windows[r];
    if ((rc = proto__get_u16(&cur, &w->x)) || (rc = proto__get_u16(&cur, &w->y)) ||
        (rc = proto__get_u16(&cur, &w->w)) || (rc = proto__get_u16(&cur, &w->h)) ||
        (rc = proto__get_u8(&cur, &w->first)) || (rc = proto__get_u8(&cur, &w->count)))
      return rc;
  }
  for (uint32_t k = 0; k < c->component_count; k++) {
    proto_texclip_comp *cp = &comps[k];
    if ((rc = proto__get_u8(&cur, &cp->layer)) || (rc = proto__get_u16(&cur, &cp->x)) ||
        (rc = proto__get_u16(&cur, &cp->y)) || (rc = proto__get_f32(&cur, &cp->scale)) ||
        (rc = proto__get_f32(&cur, &cp->offset)))
      return rc;
  }
  if ((rc = check_layout(c))) return rc;
  size_t bytes = (size_t)c->layers * c->width * c->height * 3;
  if ((rc = proto__get(&cur, bytes, &c->texels))) return rc;
  return cur.at != cur.end ? PROTO_ETRAILING : 0;
}

int proto_encode_texweights(proto_buf *b, const proto_texweights_entry *e, uint32_t count) {
  if (count > PROTO_TEXWEIGHTS_MAX_CLIPS) return PROTO_EINVAL;
  for (uint32_t i = 0; i < count; i++)
    if (e[i].count > PROTO_TEXCLIP_MAX_COMPONENTS) return PROTO_EINVAL;
  size_t at = proto_frame_begin(b, PROTO_TEXWEIGHTS, 0, 0);
  proto__put_u8(b, (uint8_t)count);
  for (uint32_t i = 0; i < count; i++) {
    proto__put_u32(b, e[i].id);
    proto__put_f32(b, e[i].mean);
    proto__put_u8(b, e[i].count);
    for (uint32_t k = 0; k < e[i].count; k++) proto__put_f32(b, e[i].weights[k]);
  }
  if (b->failed) return PROTO_ENOMEM;
  return proto_frame_end(b, at);
}

int proto_decode_texweights(const uint8_t *p, size_t n, proto_texweights_entry *e, uint32_t *count) {
  proto_cur cur = {p, p + n};
  uint8_t m = 0;
  int rc = proto__get_u8(&cur, &m);
  if (rc) return rc;
  if (m > PROTO_TEXWEIGHTS_MAX_CLIPS) return PROTO_ETOOBIG;
  for (uint32_t i = 0; i < m; i++) {
    if ((rc = proto__get_u32(&cur, &e[i].id)) || (rc = proto__get_f32(&cur, &e[i].mean)) ||
        (rc = proto__get_u8(&cur, &e[i].count)))
      return rc;
    if (e[i].count > PROTO_TEXCLIP_MAX_COMPONENTS) return PROTO_ETOOBIG;
    for (uint32_t k = 0; k < e[i].count; k++)
      if ((rc = proto__get_f32(&cur, &e[i].weights[k]))) return rc;
  }
  *count = m;
  return cur.at != cur.end ? PROTO_ETRAILING : 0;
}
