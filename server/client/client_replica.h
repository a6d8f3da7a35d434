/*
 * client_replica.h — a viewer's copy of a session rebuilt from SNAPSHOT / TARGET / TARGET_META
 * / WEIGHTS / DELTA frames, whose positions are base + Σ wᵢ·Δᵢ + sculpt offsets computed on
 * the CPU with the mesh core's mesh_evaluate() — the reference every other client is compared
 * against (deformctl watch, the tests, the viewer's CPU side). Frames of both protocol versions
 * are read (a frame header's version says which layout its body has).
 *
 * DOES NOT read sockets: frames come from client_read_frame or any other reader.
 */
#ifndef DEFORMD_CLIENT_REPLICA_H
#define DEFORMD_CLIENT_REPLICA_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"
#include "proto.h"
#include "proto2.h"
#include "mesh_texpca.h"
#include "proto_texclip.h"

/* A target's slider settings as the server last sent them (SNAPSHOT, TARGET, TARGET_META). */
typedef struct client_target_meta {
  float min, max;
  uint8_t flags;         /* PROTO_TARGET_* */
  uint8_t driver_count;  /* > 0: a combination target */
  uint16_t drivers[PROTO_MAX_DRIVERS];
} client_target_meta;

typedef struct client_replica {
  mesh *mesh;        /* base positions, triangles, targets (from the SNAPSHOT) */
  float quantum;     /* the session's: what EDIT offsets are in, whatever grid frames use */
  float *weights;    /* target_count */
  client_target_meta *meta; /* target_count */
  float *offsets;    /* 3 * vertex_count, dequantised */
  uint64_t version;
  int have_snapshot;
  /* Version 2 (a SNAPSHOT whose header says 2): the grid and the traversal DELTA and TARGET
   * frames of this session are decoded against. */
  int protocol;      /* 1 or 2: the layout of the last SNAPSHOT */
  proto_grid2 grid;  /* shift 0 = lossless */
  proto_trav trav;
  /* The vertex span [delta_first, delta_end) of the last DELTA applied (empty when equal). */
  uint32_t delta_first, delta_end;
  double decode_ms;  /* how long the last SNAPSHOT took to decode and rebuild */
  /* The connection's author's mask (MASK frames, capability "mask"): vertex_count values in
   * [0, 1], NULL until the first MASK frame; mask_serial counts the frames applied. */
  float *mask;
  uint32_t mask_serial;
  /* TEXTURE frames (capability "texture", client_texture.c) fill mesh->submeshes (ranges, base
   * colours, texture indices) and mesh->images (an image's rgba stays NULL until its IMAGE);
   * texture_serial counts the frames applied. */
  uint32_t texture_serial;
  /* TEXCLIP and TEXWEIGHTS frames (capability "texclip", client_texclip.c): the clips by the
   * session's id (a clip's weights are not kept: texweights says what shows now), and the latest
   * TEXWEIGHTS entries; each serial counts the frames of its kind applied. */
  struct client_texclip *texclips;
  uint32_t texclip_count, texclip_serial;
  proto_texweights_entry texweights[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t texweights_count, texweights_serial;
} client_replica;

/* One texture clip of the replica. */
typedef struct client_texclip {
  uint32_t id;
  mesh_texclip clip;      /* texels RGBA8 (A = 255), weights NULL */
} client_texclip;

void client_replica_init(client_replica *r);
void client_replica_fini(client_replica *r);
/* Applies a SNAPSHOT, TARGET, TARGET_META, WEIGHTS, DELTA, MASK, TEXTURE, TEXCLIP or TEXWEIGHTS frame. Other frames are ignored
 * (returns 0). Returns 0, or a PROTO_E* / MESH_E* code with a reason when the frame does not
 * decode or does not fit the mesh (an index beyond it, a frame before the snapshot). */
int client_replica_apply(client_replica *r, const proto_header *h, const uint8_t *payload, char *err,
                         size_t errlen);
/* Current positions (3 * vertex_count floats). Returns 0 or MESH_EINVAL before a snapshot. */
int client_replica_positions(const client_replica *r, float *out);
/* Whether the replica holds every TEXTURE frame its join brings: MATERIALS and each image it
 * announced (client_texture.c). */
int client_replica_textures_ready(const client_replica *r);
/* A TEXTURE frame (client_texture.c; client_replica_apply calls it). */
int client__replica_texture(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen);
/* A TEXCLIP or TEXWEIGHTS frame (client_texclip.c), and freeing the clips (client_replica_fini). */
int client__replica_texclip(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen);
void client__replica_texclips_free(client_replica *r);
/* The clip of the session's id `id`, NULL when none has come. */
const mesh_texclip *client_replica_texclip(const client_replica *r, uint32_t id);

#endif
