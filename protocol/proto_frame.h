/*
 * proto_frame.h — the deformd frame: magic, versions, size limits, PROTO_E* error codes, the
 * message types, the 20-byte header, the growable output buffer and the little-endian loads
 * and offset quantisation every message uses.
 *
 * DOES NOT describe any message body (proto_msg.h, proto_edit.h, proto2.h) or do I/O. Most
 * callers include proto.h, which includes this.
 */
#ifndef DEFORMD_PROTO_FRAME_H
#define DEFORMD_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_MAGIC 0x444d4644u /* "DFMD" as little-endian bytes 'D' 'F' 'M' 'D' */
#define PROTO_VERSION 1   /* the first version: raw SNAPSHOT, varint DELTA; every server accepts it */
#define PROTO_VERSION_2 2 /* compact SNAPSHOT / TARGET / DELTA bodies, HELLO options (proto_hello) */
#define PROTO_VERSION_MAX PROTO_VERSION_2
#define PROTO_HEADER_SIZE 20
#define PROTO_DEFAULT_MAX_FRAME (64u << 20)
#define PROTO_MAX_NAME 255 /* session, target and token names, in bytes */
#define PROTO_MAX_TARGETS 65535

/* Error codes: their own range, below -5000. */
enum {
  PROTO_ETRUNCATED = -5001, /* fewer bytes than the header or a count promises */
  PROTO_EMAGIC = -5002,     /* not a deformd frame */
  PROTO_EVERSION = -5003,   /* protocol version this build does not speak */
  PROTO_ETOOBIG = -5004,    /* payload length or a count over the configured limit */
  PROTO_ETYPE = -5005,      /* unknown message type, or a message sent the wrong way */
  PROTO_ENONFINITE = -5006, /* NaN or Inf in a float field */
  PROTO_EINVAL = -5007,     /* a field has a value outside its domain */
  PROTO_ETRAILING = -5008,  /* bytes left over after the message */
  PROTO_ENOMEM = -5009
};

const char *proto_strerror(int code);

typedef enum proto_type {
  PROTO_HELLO = 1,    /* client -> server */
  PROTO_WELCOME = 2,  /* server -> client */
  PROTO_SNAPSHOT = 3, /* server -> client: mesh + current state */
  PROTO_WEIGHTS = 4,  /* server -> client: absolute weights of changed targets */
  PROTO_DELTA = 5,    /* server -> client: absolute sculpt offsets of changed vertices */
  PROTO_EDIT = 6,     /* editor -> server */
  PROTO_ERROR = 7,    /* either way */
  PROTO_PING = 8,     /* either way */
  PROTO_PONG = 9,     /* either way */
  PROTO_BYE = 10,     /* either way */
  PROTO_TARGET = 11,  /* server -> client: a new morph target (made from the sculpt layer) */
  PROTO_TARGET_META = 12, /* server -> client: a target's range, mute flag or drivers changed */
  /* Types from here on belong to a capability (proto_caps.h): only connections granted it send or
   * receive them. */
  PROTO_BULK = 13,        /* either way, capability "bulk" only: vertex arrays as float32 (proto_bulk.h) */
  PROTO_PRESENCE = 14,    /* either way, capability "presence": participants, cursors, cameras */
  PROTO_TEXTURE = 15,     /* server -> client, capability "texture": materials and images (proto_texture.h) */
  PROTO_TEXWEIGHTS = 16,  /* server -> client, capability "texclip": texture clip weights (proto_texclip.h) */
  PROTO_TEXCLIP = 17,     /* server -> client, capability "texclip": one texture PCA clip, once per join */
  PROTO_MASK = 20         /* server -> one editor: its author's mask (capability "mask", §14.7) */
} proto_type;
#define PROTO_LAST_TYPE PROTO_TEXCLIP /* the header check: types 1 to this, and PROTO_MASK */

/* Header flags. */
#define PROTO_FLAG_CATCHUP 0x01 /* part of a catch-up for a connection that fell behind */
#define PROTO_FLAG_MORE 0x02    /* more frames of the same change follow: the header's version is
                                 * reached after the last of them (the one without this flag) */

typedef struct proto_header {
  uint32_t magic;
  uint16_t version;
  uint8_t type;
  uint8_t flags;
  uint32_t length;          /* payload bytes after the header */
  uint64_t session_version; /* state version this frame brings the receiver to (0 if none) */
} proto_header;

typedef struct proto_limits {
  uint32_t max_frame;    /* payload bytes; 0 = PROTO_DEFAULT_MAX_FRAME */
  uint32_t max_vertices; /* in a snapshot or delta; 0 = 5,000,000 */
  uint32_t max_triangles; /* 0 = 20,000,000 */
  uint32_t max_target_entries; /* of all the targets of one version 2 SNAPSHOT together, copies
                                * counted (a rANS stream can code many values in few bytes);
                                * 0 = 64,000,000 */
} proto_limits;

/* Decodes the 20-byte header at `bytes` (which must hold PROTO_HEADER_SIZE bytes) and checks
 * magic, version and the payload length against `limits` (NULL = defaults). */
int proto_header_decode(const uint8_t *bytes, const proto_limits *limits, proto_header *h);
void proto_header_encode(const proto_header *h, uint8_t *bytes);

/* ---- growable output buffer ---------------------------------------------------------------- */

typedef struct proto_buf {
  uint8_t *data;
  size_t len, cap;
  int failed; /* set when an allocation failed; later writes are ignored */
} proto_buf;

void proto_buf_init(proto_buf *b);
void proto_buf_fini(proto_buf *b);
/* Appends n bytes and returns where to write them, or NULL when out of memory (b->failed). */
uint8_t *proto_buf_append(proto_buf *b, size_t n);
/* Hands the bytes to the caller (who frees them with free()) and resets the buffer. */
uint8_t *proto_buf_detach(proto_buf *b, size_t *len);

/* Starts a frame: writes a header with a placeholder length. Returns the frame's offset. */
size_t proto_frame_begin(proto_buf *b, proto_type type, uint8_t flags, uint64_t session_version);
/* Patches the payload length of the frame started at `offset`. Returns 0, PROTO_ENOMEM or
 * PROTO_ETOOBIG (payload over 4 GiB). */
int proto_frame_end(proto_buf *b, size_t offset);

/* Little-endian loads used by receivers of the zero-copy arrays above. */
static inline float proto_load_f32(const uint8_t *p) {
  union {
    uint32_t u;
    float f;
  } v;
  v.u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  return v.f;
}
static inline uint32_t proto_load_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Offsets are quantised as round(offset / quantum), clamped to ±(2^30 - 1); dequantised as
 * (float)q * quantum, a single float multiply, so every side gets the same bits. */
int32_t proto_quantize(float offset, float quantum);
static inline float proto_dequantize(int32_t q, float quantum) { return (float)q * quantum; }

#ifdef __cplusplus
}
#endif

#endif
