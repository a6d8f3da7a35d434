/*
 * proto_msg.h — the messages between a server and its clients other than EDIT: HELLO and
 * WELCOME (with their version 2 options), SNAPSHOT in its shared parts, WEIGHTS, DELTA, TARGET,
 * TARGET_META, ERROR, BYE, PING and PONG; their encoders, decoders and the iterators over the
 * decoded views.
 *
 * DOES NOT cover EDIT (proto_edit.h) or the version 2 bodies (proto2.h), and does no I/O.
 *
 * Ownership: decoded messages point into the payload they were decoded from (zero-copy) unless
 * a field says otherwise; the payload must outlive the message.
 */
#ifndef DEFORMD_PROTO_MSG_H
#define DEFORMD_PROTO_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "proto_frame.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- messages -------------------------------------------------------------------------------- */

typedef enum proto_role { PROTO_ROLE_VIEWER = 1, PROTO_ROLE_EDITOR = 2 } proto_role;

typedef struct proto_str {
  const char *ptr; /* not NUL-terminated; points into the payload */
  uint16_t len;
} proto_str;

/* HELLO options (version 2): a list of (u8 tag, u16 length, bytes) after the token. Decoders
 * skip tags they do not know, so a later version can add one without breaking older servers; a known tag with the wrong length, or a known tag twice, is
 * PROTO_EINVAL. WELCOME v2 carries the same list with what the server granted. */
enum {
  PROTO_OPT_CODEC = 1,     /* u8: PROTO_CODEC_* */
  PROTO_OPT_MAX_RATE = 2,  /* f32 Hz, finite, >= 0; 0 = every change as it happens */
  PROTO_OPT_TOLERANCE = 3, /* f32 mesh units, finite, >= 0; 0 = the session's default */
  PROTO_OPT_SHIFT = 4,     /* WELCOME only, u8: the grid shift granted (proto_grid2) */
  PROTO_OPT_AUTHOR = 5,    /* HELLO only, 1..PROTO_MAX_AUTHOR bytes, no zero byte: who edits */
  PROTO_OPT_FORWARD = 6,   /* HELLO only, u8 1: a relay forwarding an editor's EDITs; the server
                            * sends WELCOME and ERRORs naming requests, no SNAPSHOT, no frames */
  PROTO_OPT_CAPS = 7,      /* capability names asked (HELLO) or granted (WELCOME): proto_caps.h */
  PROTO_OPT_UP = 8         /* WELCOME only, u8 'y' or 'z': the session's up axis; sent only to a
                            * connection granted the "up" capability */
};
enum {
  PROTO_CODEC_QUANTISED = 0, /* positions, UVs, target deltas and offsets on a grid (default) */
  PROTO_CODEC_LOSSLESS = 1   /* exact floats and offsets, still entropy-coded */
};
#define PROTO_MAX_SHIFT 24 /* the coarsest grid: 2^24 offset quanta */

typedef struct proto_hello {
  uint16_t protocol_version; /* PROTO_VERSION or PROTO_VERSION_2 */
  uint8_t role;              /* proto_role */
  proto_str session;
  proto_str token;
} proto_hello;

/* What a version 2 HELLO asks for (proto_encode_hello2); zeros are the defaults. */
typedef struct proto_hello_opts {
  uint8_t codec;   /* PROTO_CODEC_* */
  float max_rate;  /* Hz; 0 = no limit */
  float tolerance; /* mesh units; 0 = the session's default */
  proto_str author; /* the name this editor's operations are recorded under; len 0 = none */
  uint32_t caps;    /* capabilities asked (PROTO_CAP_BIT); decoders: the known names only */
  uint8_t caps_option; /* encoders: send the caps option even when caps is 0; decoders: it was there */
} proto_hello_opts;

typedef struct proto_welcome {
  uint32_t client_id;
  uint8_t role; /* what the server granted */
  proto_str session;
} proto_welcome;

/* What a version 2 WELCOME grants (proto_encode_welcome2). */
typedef struct proto_welcome_opts {
  uint16_t protocol_version; /* decoders: 1 for a WELCOME without options, 2 with */
  uint8_t codec;             /* PROTO_CODEC_* */
  uint8_t shift;             /* grid shift: offsets travel in units of quantum · 2^shift */
  float max_rate;            /* Hz granted; 0 = every change */
  float tolerance;           /* the bound of every lossy field, mesh units; 0 when lossless */
  uint32_t caps;             /* capabilities granted (PROTO_CAP_BIT); decoders: the known names only */
  uint8_t caps_option;       /* the caps option is there (it answers a HELLO that had one) */
  uint8_t up;                /* 'y' or 'z': the up option is written (encoders) or was there
                              * (decoders); 0: none */
} proto_welcome_opts;

/* A target in a snapshot: name, slider range, sparse deltas. */
/* Target flags. */
#define PROTO_TARGET_MUTED 0x01 /* its weight is held at 0 until unmuted */
#define PROTO_MAX_DRIVERS 8     /* a combination target is driven by at most this many targets */

typedef struct proto_target {
  proto_str name;
  float default_weight;
  float min, max;
  uint8_t flags;          /* PROTO_TARGET_* */
  uint32_t driver_count;  /* > 0: a combination target, weight = product of the drivers' weights */
  const uint8_t *drivers; /* driver_count little-endian uint16 target indices */
  uint32_t count;
  const uint8_t *indices; /* count little-endian uint32 */
  const uint8_t *deltas;  /* 3 * count little-endian float32 */
} proto_target;

/* Sparse sculpt offsets are quantised: offset = q · quantum, q a signed integer per component.
 * The session's state *is* the quantised value, so every receiver rebuilds it exactly. */
typedef struct proto_offsets_view {
  uint32_t count;
  const uint8_t *bytes; /* the encoded entries (see proto_offsets_next) */
  size_t len;
} proto_offsets_view;

typedef struct proto_snapshot {
  uint32_t vertex_count, triangle_count, target_count;
  float offset_quantum;
  const uint8_t *positions; /* 3 * vertex_count float32 */
  const uint8_t *triangles; /* 3 * triangle_count uint32, each < vertex_count */
  const uint8_t *uvs;       /* 2 * vertex_count float32, or NULL */
  const uint8_t *weights;   /* target_count float32: the current weights */
  proto_offsets_view offsets; /* current non-zero sculpt offsets */
  /* Targets are decoded one by one with proto_snapshot_target(), from target_bytes. */
  const uint8_t *target_bytes;
  size_t target_len;
} proto_snapshot;

/* Weights body modes. */
enum {
  PROTO_WEIGHTS_DENSE = 0,  /* f32 values for targets 0..count-1 */
  PROTO_WEIGHTS_SPARSE = 1, /* (u16 index, f32 value) pairs */
  PROTO_WEIGHTS_QRUN = 2,   /* targets first..first+count-1, i16 q each: value = (float)q · scale */
  PROTO_WEIGHTS_QRUN8 = 3   /* the same run with one i8 q per target (PCA playback, 1 byte each) */
};

typedef struct proto_weights_view {
  uint32_t count;     /* entries */
  int dense;          /* mode == PROTO_WEIGHTS_DENSE (kept for older callers) */
  int mode;           /* PROTO_WEIGHTS_* */
  uint32_t first;     /* QRUN, QRUN8: the first target */
  float scale;        /* QRUN, QRUN8: finite, >= 0 */
  const uint8_t *bytes;
} proto_weights_view;

/* A new target announced to viewers: append it with index `index` (= the current target count)
 * and weight `weight`, and set the sculpt offsets of its vertices to zero. */
typedef struct proto_target_add {
  uint32_t index;
  float weight;
  proto_target target;
} proto_target_add;

typedef struct proto_error {
  uint16_t code;       /* PROTO_ERR_* below */
  uint32_t request_id; /* 0 when not about a request */
  proto_str message;
} proto_error;

/* Error codes carried in ERROR and BYE frames. */
enum {
  PROTO_ERR_NONE = 0,
  PROTO_ERR_MALFORMED = 1,     /* the frame could not be decoded */
  PROTO_ERR_UNKNOWN_SESSION = 2,
  PROTO_ERR_FORBIDDEN = 3,     /* a viewer sent an edit, or a bad token */
  PROTO_ERR_INVALID = 4,       /* a value out of range (index, NaN, ...) */
  PROTO_ERR_TOO_SLOW = 5,      /* the connection did not keep up and is closed */
  PROTO_ERR_SHUTDOWN = 6,      /* the server is stopping */
  PROTO_ERR_SESSION_CLOSED = 7,
  PROTO_ERR_OVERLOADED = 8,    /* too many connections */
  /* Relays (docs/protocol.md §13). A status, not a failure: the connection stays open. */
  PROTO_ERR_PRIMARY_LOST = 9,  /* ERROR: the session's primary is gone; this is its last state */
  PROTO_ERR_PRIMARY_BACK = 10, /* ERROR: the primary is back; live frames resume */
  PROTO_ERR_RESYNC = 11        /* BYE: the session's history was replaced (a new epoch): join
                                * again for a new SNAPSHOT */
};

typedef struct proto_ping {
  uint64_t t0_ns; /* sender's clock when sent */
  uint64_t t1_ns; /* PONG: the responder's clock when it answered (0 in PING) */
  uint32_t seq;
} proto_ping;

/* Encoders append one complete frame to `b`. They never fail except for memory (b->failed)
 * and values a decoder would refuse (PROTO_EINVAL / PROTO_ENONFINITE, nothing appended). */
/* HELLO in m->protocol_version's layout (version 2 with default options). */
int proto_encode_hello(proto_buf *b, const proto_hello *m);
/* HELLO version 2 with options (m->protocol_version is ignored). */
int proto_encode_hello2(proto_buf *b, const proto_hello *m, const proto_hello_opts *o);
/* A relay's HELLO version 2 for forwarding an editor's EDITs: `o` plus PROTO_OPT_FORWARD. */
int proto_encode_hello_forward(proto_buf *b, const proto_hello *m, const proto_hello_opts *o);
int proto_encode_welcome(proto_buf *b, uint64_t version, const proto_welcome *m);
/* WELCOME version 2 (header version 2, the option list after the session name). */
int proto_encode_welcome2(proto_buf *b, uint64_t version, const proto_welcome *m, const proto_welcome_opts *o);
int proto_encode_error(proto_buf *b, uint16_t code, uint32_t request_id, const char *message);
int proto_encode_bye(proto_buf *b, uint16_t code, const char *message);
int proto_encode_ping(proto_buf *b, proto_type type, const proto_ping *m);

/* WEIGHTS: `indices` NULL means dense (values for targets 0..count-1). */
int proto_encode_weights(proto_buf *b, uint64_t version, uint8_t flags, uint32_t count,
                         const uint32_t *indices, const float *values);

/* Quantised weights for a run of consecutive targets (PCA playback: a handful of components
 * change every frame). proto_quantize_weights picks scale = max|w| / 32767 (rounded down, so
 * |q · scale| <= max|w|; 0 when all are 0) and rounds each w / scale to the nearest i16; the weights a receiver gets are exactly
 * proto_qweight(q, scale), so a sender that keeps those values stays identical to its
 * receivers. Returns 0, or PROTO_ENONFINITE for a non-finite weight. */
int proto_quantize_weights(const float *w, uint32_t count, int16_t *q, float *scale);
static inline float proto_qweight(int16_t q, float scale) { return (float)q * scale; }
/* WEIGHTS in QRUN mode: targets first..first+count-1 (first + count <= PROTO_MAX_TARGETS). */
int proto_encode_weights_qrun(proto_buf *b, uint64_t version, uint8_t flags, uint32_t first, uint32_t count,
                              const int16_t *q, float scale);
/* The same with 8-bit q (mode QRUN8, 31 + count bytes): proto_quantize_weights8 picks
 * scale = max|w| / 127 (rounded down the same way) and rounds to the nearest i8 in -127..127, so
 * each value comes within scale / 2 of w; the receiver's value is proto_qweight(q, scale) again.
 * A sender uses it where that coarser step is small enough (deformd: where the rebuilt frame
 * stays within the clip's error budget). */
int proto_quantize_weights8(const float *w, uint32_t count, int8_t *q, float *scale);
int proto_encode_weights_qrun8(proto_buf *b, uint64_t version, uint8_t flags, uint32_t first, uint32_t count,
                               const int8_t *q, float scale);
/* The bytes of a quantised-run WEIGHTS frame of `count` targets: header, 11, 1 or 2 per target. */
static inline size_t proto_weights_qrun_size(uint32_t count, int narrow) {
  return PROTO_HEADER_SIZE + 11 + (narrow ? 1 : 2) * (size_t)count;
}

/* DELTA / offsets: `indices` ascending; `q` holds 3 quantised components per entry. */
int proto_encode_delta(proto_buf *b, uint64_t version, uint8_t flags, uint32_t count,
                       const uint32_t *indices, const int32_t *q);

/* SNAPSHOT is written in two parts so the mesh part (large, fixed until the targets change) is
 * encoded once per session and shared by every joining client:
 *   proto_snapshot_mesh_part(): positions, triangles, UVs, targets (no frame header);
 *   proto_encode_snapshot_head(): the frame header and fixed fields, given both part lengths;
 *   proto_snapshot_state_part(): current weights and offsets.
 * A frame is head + mesh part + state part, sent back to back. */
typedef struct proto_mesh_desc {
  uint32_t vertex_count, triangle_count, target_count;
  const float *positions;
  const uint32_t *triangles;
  const float *uvs; /* or NULL */
  float offset_quantum;
} proto_mesh_desc;

typedef struct proto_target_desc {
  const char *name;
  float default_weight, min, max;
  uint8_t flags;
  uint32_t driver_count;
  const uint32_t *drivers;
  uint32_t count;
  const uint32_t *indices;
  const float *deltas;
} proto_target_desc;

int proto_snapshot_mesh_part(proto_buf *b, const proto_mesh_desc *mesh,
                             const proto_target_desc *targets);
/* The mesh part in pieces, for a sender that keeps them apart (the server shares the body and
 * each target between joins, and re-encodes only the 20-byte head when a target is added):
 * head + body + every target in order is exactly proto_snapshot_mesh_part(). */
int proto_snapshot_mesh_head(proto_buf *b, const proto_mesh_desc *mesh);
int proto_snapshot_mesh_body(proto_buf *b, const proto_mesh_desc *mesh);
int proto_snapshot_target(proto_buf *b, const proto_target_desc *target);
int proto_snapshot_state_part(proto_buf *b, uint32_t target_count, const float *weights,
                              uint32_t offset_count, const uint32_t *indices, const int32_t *q);
int proto_encode_snapshot_head(proto_buf *b, uint64_t version, size_t mesh_part_len,
                               size_t state_part_len);

int proto_encode_target_add(proto_buf *b, uint64_t version, uint32_t index, float weight,
                            const proto_target_desc *target);

/* Decoders take the payload of one frame (h->length bytes). */
int proto_decode_hello(const uint8_t *p, size_t n, proto_hello *m);
int proto_decode_welcome(const uint8_t *p, size_t n, proto_welcome *m);
/* Both layouts: a version 2 HELLO's options into *o (defaults for version 1; PROTO_EVERSION
 * with m->protocol_version set for a version this build does not know). proto_decode_hello is
 * this without the options. */
int proto_decode_hello2(const uint8_t *p, size_t n, proto_hello *m, proto_hello_opts *o);
/* Whether a HELLO that decodes carries PROTO_OPT_FORWARD = 1. */
int proto_hello_forward(const uint8_t *p, size_t n);
/* Both layouts: o->protocol_version says which arrived. */
int proto_decode_welcome2(const uint8_t *p, size_t n, proto_welcome *m, proto_welcome_opts *o);
int proto_decode_error(const uint8_t *p, size_t n, proto_error *m); /* ERROR and BYE */
int proto_decode_ping(const uint8_t *p, size_t n, proto_ping *m);   /* PING and PONG */
int proto_decode_weights(const uint8_t *p, size_t n, const proto_limits *limits,
                         proto_weights_view *m);
int proto_decode_delta(const uint8_t *p, size_t n, const proto_limits *limits,
                       proto_offsets_view *m);
int proto_decode_snapshot(const uint8_t *p, size_t n, const proto_limits *limits,
                          proto_snapshot *m);
int proto_decode_target_add(const uint8_t *p, size_t n, const proto_limits *limits, proto_target_add *m);

/* TARGET_META: target `index` now has this range, these flags and these drivers. */
typedef struct proto_target_meta {
  uint32_t index;
  float min, max;
  uint8_t flags;
  uint32_t driver_count;
  const uint8_t *drivers; /* decoded view: driver_count little-endian uint16 */
} proto_target_meta;
int proto_encode_target_meta(proto_buf *b, uint64_t version, uint8_t flags, uint32_t index, float min, float max,
                             uint8_t target_flags, uint32_t driver_count, const uint32_t *drivers);
int proto_decode_target_meta(const uint8_t *p, size_t n, const proto_limits *limits, proto_target_meta *m);
/* The i-th driver of a decoded target or meta view. */
static inline uint32_t proto_driver(const uint8_t *drivers, uint32_t i) {
  return (uint32_t)(drivers[2 * i] | drivers[2 * i + 1] << 8);
}

/* Iterators over decoded views. Each returns 1 with the next entry, 0 at the end. The views
 * were fully validated by the decoder, so iteration cannot fail. */
typedef struct proto_iter {
  const uint8_t *at, *end;
  uint32_t left;
  uint32_t index; /* running index for dense/QRUN weights / delta-coded vertex indices */
  int dense;
  int mode;       /* weights: PROTO_WEIGHTS_* */
  float scale;    /* weights, QRUN and QRUN8 */
  int started;
} proto_iter;

void proto_weights_begin(const proto_weights_view *w, proto_iter *it);
int proto_weights_next(proto_iter *it, uint32_t *index, float *value);
void proto_offsets_begin(const proto_offsets_view *o, proto_iter *it);
int proto_offsets_next(proto_iter *it, uint32_t *index, int32_t q[3]);
/* The i-th target of a snapshot, decoding sequentially: call with it from
 * proto_snapshot_targets_begin(). */
void proto_snapshot_targets_begin(const proto_snapshot *s, proto_iter *it);
int proto_snapshot_target_next(proto_iter *it, proto_target *t);

#ifdef __cplusplus
}
#endif

#endif
