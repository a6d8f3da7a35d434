/*
 * srv_texture.c — TEXTURE frames (docs/protocol.md §17): each submesh's material and each image
 * the import decoded, encoded once when the session is built (on the pool, beside the SNAPSHOT
 * pieces) and queued once per join, right after the SNAPSHOT, on connections granted "texture".
 *
 * MATERIALS goes to every granted join, even for a mesh without a colour or an image (it then
 * says so), so that a client knows when it has everything: after MATERIALS and its images.
 * They never change: materials belong to the imported mesh, which no operation touches, so they
 * are sent at a join and never again on that connection (a relay's replica is built from the
 * same mesh blob, images included, and sends the same frames). The frames hold a second copy of
 * the pixels (the mesh keeps its own for exports and the store): a join is then a reference
 * count, not a copy of megabytes on the loop.
 *
 * DOES NOT decode images (shared/mesh_image.c) or grant the capability (srv_caps.c).
 */
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "proto.h"
#include "proto_caps.h"
#include "proto_texture.h"
#include "srv_caps.h"
#include "srv_conn.h"
#include "srv_frame.h"
#include "srv_log.h"
#include "srv_texture.h"

static float unit(float x) { return x >= 0.0f ? (x <= 1.0f ? x : 1.0f) : 0.0f; } /* NaN -> 0 */

/* The box-filtered half of `src` (w × h RGBA8) into *out (malloc'ed), each side at least 1. */
static uint8_t *halve(const uint8_t *src, uint32_t w, uint32_t h, uint32_t *ow, uint32_t *oh) {
  uint32_t nw = w > 1 ? w / 2 : 1, nh = h > 1 ? h / 2 : 1;
  uint8_t *dst = malloc(4 * (size_t)nw * nh);
  if (!dst) return NULL;
  for (uint32_t y = 0; y < nh; y++)
    for (uint32_t x = 0; x < nw; x++)
      for (int k = 0; k < 4; k++) {
        uint32_t x0 = w > 1 ? 2 * x : x, y0 = h > 1 ? 2 * y : y;
        uint32_t x1 = w > 1 ? x0 + 1 : x0, y1 = h > 1 ? y0 + 1 : y0;
        unsigned sum = src[4 * ((size_t)y0 * w + x0) + k] + src[4 * ((size_t)y0 * w + x1) + k] +
                       src[4 * ((size_t)y1 * w + x0) + k] + src[4 * ((size_t)y1 * w + x1) + k];
        dst[4 * ((size_t)y * nw + x) + k] = (uint8_t)((sum + 2) / 4);
      }
  *ow = nw, *oh = nh;
  return dst;
}

static srv_frame *image_frame(uint32_t index, const mesh_image *im) {
  uint32_t w = im->width, h = im->height;
  const uint8_t *px = im->rgba;
  uint8_t *owned = NULL;
  size_t nl = strlen(im->name) > PROTO_MAX_NAME ? PROTO_MAX_NAME : strlen(im->name);
  while (proto_texture_image_size(nl, w, h) > PROTO_DEFAULT_MAX_FRAME) {
    uint8_t *half = halve(px, w, h, &w, &h);
    free(owned);
    if (!(owned = half)) return NULL;
    px = owned;
  }
  if (w != im->width || h != im->height)
    srv_log(SRV_LOG_INFO, "texture '%s' (%u x %u) travels as %u x %u: over the frame limit", im->name, im->width,
            im->height, w, h);
  proto_buf b;
  proto_buf_init(&b);
  srv_frame *f = NULL;
  if (proto_encode_texture_image(&b, index, im->name, w, h, px) == 0) f = srv_frame_from_buf(&b);
  proto_buf_fini(&b);
  free(owned);
  return f;
}

static srv_frame *materials_frame(const mesh *m) {
  proto_material *mat = calloc((size_t)m->submesh_count + 1, sizeof(*mat));
  if (!mat) return NULL;
  for (uint32_t i = 0; i < m->submesh_count; i++) {
    const mesh_submesh *sm = &m->submeshes[i];
    mat[i].first_triangle = sm->first_triangle;
    mat[i].triangle_count = sm->triangle_count;
    mat[i].texture = sm->texture <= m->image_count ? sm->texture : 0;
    mat[i].has_color = sm->has_color != 0;
    for (int k = 0; k < 4; k++) mat[i].base_color[k] = sm->has_color ? unit(sm->base_color[k]) : 1.0f;
  }
  proto_buf b;
  proto_buf_init(&b);
  srv_frame *f = NULL;
  if (proto_encode_texture_materials(&b, m->image_count, m->submesh_count, mat) == 0) f = srv_frame_from_buf(&b);
  proto_buf_fini(&b);
  free(mat);
  return f;
}

int srv_texture_encode(srv_session *s) {
  mesh plain = *s->mesh; /* more than the frame may list (never from the importers): no materials */
  if (plain.submesh_count > PROTO_MAX_SUBMESHES || plain.image_count > PROTO_MAX_TEX_IMAGES)
    plain.submesh_count = plain.image_count = 0;
  const mesh *m = &plain;
  s->textures = calloc((size_t)m->image_count + 1, sizeof(*s->textures));
  if (!s->textures) return MESH_ENOMEM;
  if (!(s->textures[0] = materials_frame(m))) return MESH_ENOMEM;
  s->texture_count = 1;
  for (uint32_t i = 0; i < m->image_count; i++) {
    if (!(s->textures[1 + i] = image_frame(i, &m->images[i]))) return MESH_ENOMEM;
    s->texture_count++;
  }
  return 0;
}

void srv_texture_send(const srv_session *s, struct srv_conn *c) {
  if (!s->texture_count || !srv_caps_has(c, PROTO_CAP_TEXTURE)) return;
  for (uint32_t i = 0; i < s->texture_count; i++) srv_conn_send(c, s->textures[i]);
}

size_t srv_texture_bytes(const srv_session *s) {
  size_t n = 0;
  for (uint32_t i = 0; i < s->texture_count; i++) n += s->textures[i]->len;
  return n;
}

void srv_texture_fini(srv_session *s) {
  for (uint32_t i = 0; i < s->texture_count; i++) srv_frame_unref(s->textures[i]);
  free(s->textures);
  s->textures = NULL;
  s->texture_count = 0;
}
