/*
 * proto_texclip.h — animated texture PCA on the wire (docs/protocol.md §18, capability
 * "texclip"): TEXCLIP (17) carries one compressed texture clip — its windows, its components'
 * tiles, scales and offsets, and the texture array's bytes — once per join; TEXWEIGHTS (16)
 * carries what every texture clip shows now: per clip the mean's weight and the components'
 * weights. Both go server -> client only.
 *
 * TEXWEIGHTS is absolute (invariant 1): a clip it does not list shows nothing (weight 0), so a
 * viewer that drops or merges frames is exact again at the next one. During a crossfade it lists
 * two clips, their mean weights 1 − α and α and their components' weights already multiplied by
 * them, so a viewer draws Σ_clips (m · mean + Σ w · component) — the mix in weight space.
 *
 * The texels are RGB8, layer by layer, row 0 first (layer 0 the mean; the layout of
 * shared/mesh_texpca.h); a viewer adds A = 255 when it uploads RGBA8.
 *
 * DOES NOT know the layout's meaning beyond its bounds (shared/mesh_texpca.c) or do I/O.
 */
#ifndef DEFORMD_PROTO_TEXCLIP_H
#define DEFORMD_PROTO_TEXCLIP_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_TEXCLIP_MAX_WINDOWS 16
#define PROTO_TEXCLIP_MAX_COMPONENTS 64
#define PROTO_TEXCLIP_MAX_LAYERS 64
#define PROTO_TEXCLIP_MAX_SIDE 2048
#define PROTO_TEXWEIGHTS_MAX_CLIPS 4

typedef struct proto_texclip_window {
  uint16_t x, y, w, h;
  uint8_t first, count; /* its components */
} proto_texclip_window;

typedef struct proto_texclip_comp {
  uint8_t layer;        /* 1 .. layers − 1 */
  uint16_t x, y;        /* the tile's corner in its layer (the tile is its window's size) */
  float scale, offset;  /* value = offset + scale · byte / 255 */
} proto_texclip_comp;

/* One clip. Decoding points `texels` into the payload (valid while it is); the window and
 * component arrays are the caller's, of the maximum sizes. */
typedef struct proto_texclip {
  uint32_t id;          /* the session's number for the clip, which TEXWEIGHTS names */
  proto_str name;
  uint16_t width, height;
  uint32_t frame_count; /* for information: the frames the clip was made from */
  float fps;
  uint8_t window_count, component_count, layers;
  proto_texclip_window *windows;
  proto_texclip_comp *comps;
  const uint8_t *texels; /* layers × height × width × 3 */
} proto_texclip;

/* Appends a whole TEXCLIP frame. Returns 0, PROTO_EINVAL (a count or bound outside the limits
 * above, a tile off its layer) or PROTO_ENOMEM. */
int proto_encode_texclip(proto_buf *b, const proto_texclip *c);
/* Decodes a TEXCLIP payload: every count against the limits and the bytes present, every window
 * inside the texture, every tile inside its layer, the components' windows consecutive.
 * windows/comps must hold the maximum counts. Returns 0 or PROTO_ETRUNCATED, PROTO_ETOOBIG,
 * PROTO_EINVAL, PROTO_ENONFINITE, PROTO_ETRAILING. */
int proto_decode_texclip(const uint8_t *p, size_t n, proto_texclip *c);

typedef struct proto_texweights_entry {
  uint32_t id;
  float mean;            /* the mean's weight: 1, or the crossfade's share */
  uint8_t count;
  float weights[PROTO_TEXCLIP_MAX_COMPONENTS];
} proto_texweights_entry;

/* Appends a TEXWEIGHTS frame of `count` (0 .. PROTO_TEXWEIGHTS_MAX_CLIPS) entries. Returns 0,
 * PROTO_EINVAL or PROTO_ENOMEM. */
int proto_encode_texweights(proto_buf *b, const proto_texweights_entry *e, uint32_t count);
/* Decodes into e[PROTO_TEXWEIGHTS_MAX_CLIPS]; *count gets the entries. Returns 0 or a PROTO_E*
 * code (as proto_decode_texclip). */
int proto_decode_texweights(const uint8_t *p, size_t n, proto_texweights_entry *e, uint32_t *count);

#ifdef __cplusplus
}
#endif

#endif
