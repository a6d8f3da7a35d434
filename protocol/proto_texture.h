/*
 * proto_texture.h — TEXTURE (message type 15): a session's materials and base-colour images
 * (docs/protocol.md §17). A frame of the capability "texture" (proto_caps.h): only connections
 * granted it are sent one.
 *
 * A TEXTURE payload starts with a u8 kind. MATERIALS lists every submesh (its triangle range, its
 * base colour, the image it samples) and how many images follow; IMAGE carries one of them, its
 * pixels as RGBA8 rows, row 0 the top of the image (as mesh_image holds them; a viewer samples
 * it at (u, 1 - v)). The server sends MATERIALS and then each IMAGE once per join, right after
 * the SNAPSHOT; they never change with the session's version, so they are never sent again on
 * that connection (materials are part of the imported mesh, which never changes). The header's
 * session_version is always 0: like PRESENCE, TEXTURE is not part of the versioned state.
 *
 * DOES NOT decide who is sent what (server/deformd/session/srv_texture.c) or decode PNG/JPEG
 * (images travel decoded: see §17 for why).
 */
#ifndef DEFORMD_PROTO_TEXTURE_H
#define DEFORMD_PROTO_TEXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum proto_texture_kind {
  PROTO_TEX_MATERIALS = 1, /* submesh ranges, base colours, image indices; the image count */
  PROTO_TEX_IMAGE = 2      /* one image's pixels */
} proto_texture_kind;

enum {
  PROTO_TEX_RGBA8 = 0 /* the one pixel encoding today: width · height · 4 bytes */
};

#define PROTO_MAX_TEX_IMAGES 64u    /* images per session (= MESH_MAX_IMAGES) */
#define PROTO_MAX_TEX_SIDE 8192u    /* pixels per side (= MESH_MAX_IMAGE_SIDE) */
#define PROTO_MAX_SUBMESHES 65535u  /* submeshes in one MATERIALS record */
#define PROTO_TEX_MATERIAL_SIZE 29u /* bytes per submesh in MATERIALS */

/* One submesh's material as MATERIALS carries it. */
typedef struct proto_material {
  uint32_t first_triangle, triangle_count;
  uint32_t texture;   /* 1 + an image index; 0: none */
  uint8_t has_color;  /* 0: the file gives no colour (viewers draw their own grey) */
  float base_color[4]; /* RGBA in [0, 1] */
} proto_material;

/* A decoded TEXTURE payload: `kind` says which half is filled. Pointers go into the payload. */
typedef struct proto_texture_view {
  uint8_t kind;
  /* MATERIALS */
  uint32_t image_count;
  uint32_t submesh_count;
  const uint8_t *materials; /* submesh_count records; read with proto_texture_material() */
  /* IMAGE */
  uint32_t index;           /* < the image count MATERIALS gave */
  uint32_t width, height;   /* 1 to PROTO_MAX_TEX_SIDE each */
  uint8_t encoding;         /* PROTO_TEX_RGBA8 */
  proto_str name;           /* the material's name for it (at most PROTO_MAX_NAME bytes) */
  const uint8_t *pixels;    /* width · height · 4 bytes */
} proto_texture_view;

/* MATERIALS. Refuses (PROTO_EINVAL, nothing appended) a texture index beyond image_count, a
 * colour outside [0, 1] (PROTO_ENONFINITE for NaN), more than the limits above. */
int proto_encode_texture_materials(proto_buf *b, uint32_t image_count, uint32_t submesh_count,
                                   const proto_material *m);
/* IMAGE: `rgba` is width · height · 4 bytes; a name over PROTO_MAX_NAME bytes is cut. */
int proto_encode_texture_image(proto_buf *b, uint32_t index, const char *name, uint32_t width,
                               uint32_t height, const uint8_t *rgba);
/* The payload bytes of an IMAGE frame (without the 20-byte header). */
static inline size_t proto_texture_image_size(size_t name_len, uint32_t width, uint32_t height) {
  return 1 + 4 + 4 + 4 + 1 + 2 + name_len + 4 * (size_t)width * height;
}
/* Checks every field and the length. Returns 0, PROTO_ETRUNCATED, PROTO_ETRAILING, PROTO_EINVAL
 * (an unknown kind or encoding, a size or index outside its range), PROTO_ETOOBIG or
 * PROTO_ENONFINITE. An IMAGE's index is checked against the MATERIALS count by the receiver. */
int proto_decode_texture(const uint8_t *p, size_t n, proto_texture_view *v);
/* Submesh i of a decoded MATERIALS. */
void proto_texture_material(const proto_texture_view *v, uint32_t i, proto_material *out);

#ifdef __cplusplus
}
#endif

#endif
