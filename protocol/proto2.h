/*
 * proto2.h — version 2 of the wire format: compact SNAPSHOT, TARGET and DELTA bodies
 * (docs/protocol.md §12). Everything else (WEIGHTS, TARGET_META, EDIT, ERROR, PING, BYE) keeps
 * its version 1 layout; a frame's header `version` says which layout its body has.
 *
 * Three ideas carry the savings, each simple to decode in JavaScript with meshoptimizer's
 * decoder and plain code:
 *   - a traversal of the triangle list (proto_trav) gives every vertex a rank (the order in
 *     which the triangles first use it) and up to three earlier vertices that predict it by the
 *     parallelogram rule p(a) + p(b) − p(c); per-vertex values travel as residuals of that
 *     prediction, in rank order, coded with meshoptimizer's vertex codec (or as varints where
 *     that is smaller), and vertex sets travel as runs of ranks;
 *   - a grid (proto_grid2): positions, target deltas and sculpt offsets on a step S = quantum ·
 *     2^shift, UVs on 16 bits, each within half a step of the exact value; `lossless` keeps the
 *     float bits (predicted as 32-bit integers, exactly invertible);
 *   - triangles with meshoptimizer's index codec (the server puts them in the order of a
 *     walk across their edges when a session opens; vertex order never changes).
 *
 * DOES NOT do I/O or keep state between calls other than a proto_trav's scratch, which makes a
 * proto_trav usable by one thread at a time for the subset codecs (targets, offsets).
 *
 * Ownership: decoders of version 2 write into arrays they allocate (the decoded structs say
 * which, and their *_free functions release them), or into caller arrays where a function says so.
 */
#ifndef DEFORMD_PROTO2_H
#define DEFORMD_PROTO2_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_NO_VERTEX 0xffffffffu

/* The traversal of a triangle list: rank order, and each vertex's predictors. Built identically
 * by both ends from the triangles of the SNAPSHOT. */
typedef struct proto_trav {
  uint32_t vertex_count;
  uint32_t *order; /* rank -> vertex */
  uint32_t *rank;  /* vertex -> rank */
  uint32_t *pred;  /* 3 per rank: the ranks of its vertex's predictors a, b, c (prediction
                    * p(a) + p(b) - p(c)), or PROTO_NO_VERTEX; read in rank order, as streams are */
  uint8_t *para;   /* per rank: 1 where they make a true parallelogram (a != b, c != a) */
  uint32_t *mark, *slot; /* scratch of the subset codecs */
  uint32_t epoch;
  uint32_t used; /* the vertices the triangles use: they hold the first `used` ranks */
} proto_trav;

/* Builds the traversal of `triangle_count` triangles over `vertex_count` vertices (every index
 * must be below it: PROTO_EINVAL). Returns 0, PROTO_EINVAL or PROTO_ENOMEM. */
int proto_trav_init(proto_trav *t, const uint32_t *triangles, uint32_t triangle_count, uint32_t vertex_count);
void proto_trav_fini(proto_trav *t);

/* The grid of a version 2 body. A quantised grid has step = quantum · 2^shift (1 <= shift <=
 * PROTO_MAX_SHIFT); a lossless one has shift 0 and carries floats exactly. */
typedef struct proto_grid2 {
  float quantum;       /* the session's offset quantum (> 0): EDIT offsets are always in it */
  uint8_t shift;       /* 0 = lossless */
  float step;          /* quantum · 2^shift (0 when lossless) */
  float origin[3];     /* positions: x = origin + (float)p · step */
  float uv_origin[2];  /* UVs: u = uv_origin + (float)q · uv_step, q in 0..65535 */
  float uv_step[2];
  uint8_t entropy;     /* the `entropy` capability's codings (§12.11): rANS-coded triangles, and
                        * streams in mode 2 where that is smaller; 0 (proto_grid2_init) = none */
} proto_grid2;

/* The grid for `mesh` at `shift` (0: lossless): origin at the bounding box's minimum, UV steps
 * that span each UV range in 65535 steps. Returns 0 or PROTO_EINVAL (shift over the limit, a
 * step that is not finite, a mesh whose extent does not fit 2^24 steps). */
int proto_grid2_init(proto_grid2 *g, const proto_mesh_desc *mesh, uint8_t shift);

/* The shift that gives a grid whose half step is at most `tolerance` (in mesh units), but no
 * finer than `finest`, no coarser than PROTO_MAX_SHIFT. */
uint8_t proto_grid2_shift_for(float quantum, float tolerance, uint8_t finest);
/* The bound of every lossy field on this grid: half a step (0 when lossless). */
static inline float proto_grid2_tolerance(const proto_grid2 *g) { return g->shift ? g->step * 0.5f : 0.0f; }

/* Offsets on a grid: a session offset q (in quanta) travels as round(q / 2^shift) and comes
 * back as that times 2^shift, within 2^(shift-1) quanta of q. */
static inline int32_t proto_shift_round(int32_t q, uint8_t shift) {
  return shift ? (int32_t)(((int64_t)q + ((int64_t)1 << (shift - 1))) >> shift) : q;
}

/* ---- encoders (the server) ------------------------------------------------------------------ */

/* The 48-byte head of a version 2 SNAPSHOT mesh part (counts, quantum, grid). */
int proto_snapshot2_head(proto_buf *b, const proto_mesh_desc *mesh, const proto_grid2 *g);
/* The triangles (u32 nbytes, then meshoptimizer's index codec), the same for every grid. The
 * codec may rotate a triangle's corners (never its winding): `canonical` (3 per triangle; may
 * be `tri` itself) receives the triangles exactly as a decoder reads them. A sender adopts
 * those as its own, builds its proto_trav from them, and sends these very bytes every time
 * (encoding the rotated triangles again is not always byte-identical around degenerate ones).
 * Returns 0, PROTO_EINVAL (an index out of range) or PROTO_ENOMEM. */
int proto_snapshot2_triangles(proto_buf *b, const uint32_t *tri, uint32_t triangle_count, uint32_t vertex_count,
                              uint32_t *canonical);
/* The triangles piece in the entropy layout (§12.11, proto_tri.c) of the canonical triangles
 * (what proto_snapshot2_triangles gave back) and their traversal `t`: it decodes to exactly
 * these triangles and this traversal. Sent, with a head whose grid has `entropy` set, only to
 * connections granted the `entropy` capability. Reads only t's tables (any thread). Returns 0,
 * PROTO_EINVAL (an index out of range) or PROTO_ENOMEM. */
int proto_snapshot2_triangles_entropy(proto_buf *b, const uint32_t *canonical, uint32_t triangle_count,
                                      const proto_trav *t);
/* Positions and UVs on the grid, after the triangles: the part every join of one grid
 * shares. `t` must be the traversal of the canonical triangles. Touches no scratch of `t`, so
 * it may run on another thread while the owner encodes targets or offsets with the same `t`. */
int proto_snapshot2_attributes(proto_buf *b, const proto_mesh_desc *mesh, const proto_grid2 *g, const proto_trav *t);
/* One target record (the same bytes in SNAPSHOT and TARGET). Deltas go on the grid's step, or
 * as float bits when the grid is lossless or a delta is too large for 2^24 steps. With
 * g->entropy (a SNAPSHOT to a connection granted `entropy` only) the record carries its `copy`
 * field, 0 here. */
int proto_snapshot2_target(proto_buf *b, const proto_target_desc *d, const proto_grid2 *g, proto_trav *t);
/* How far back an entropy join's target record may name the target it copies (§12.11). */
#define PROTO_COPY_WINDOW 64u
/* The record of a target that moves exactly the vertices of target `of` by exactly its deltas,
 * in an entropy join (g->entropy must be set): d's settings, and `of` instead of its data. `of`
 * must be below this target's index by at most PROTO_COPY_WINDOW and be coded in full itself;
 * the caller checks that the data are the same. Returns 0, PROTO_EINVAL or PROTO_ENOMEM. */
int proto_snapshot2_target_copy(proto_buf *b, const proto_target_desc *d, const proto_grid2 *g, uint32_t of);
/* The state part: weights, then the non-zero offsets (session quanta, any vertex order) on the
 * grid's shift. */
int proto_snapshot2_state(proto_buf *b, uint32_t target_count, const float *weights, uint32_t count,
                          const uint32_t *indices, const int32_t *q, uint8_t shift, proto_trav *t);
/* A SNAPSHOT header for a version 2 body (header version 2). */
int proto_encode_snapshot2_head(proto_buf *b, uint64_t version, size_t mesh_part_len, size_t state_part_len);
/* DELTA (header version 2): vertices in any order (no repeats), offsets in session quanta. */
int proto_encode_delta2(proto_buf *b, uint64_t version, uint8_t flags, uint8_t shift, uint32_t count,
                        const uint32_t *indices, const int32_t *q, proto_trav *t);
/* TARGET (header version 2): index, weight, target record. */
int proto_encode_target_add2(proto_buf *b, uint64_t version, uint8_t flags, uint32_t index, float weight,
                             const proto_target_desc *d, const proto_grid2 *g, proto_trav *t);

/* ---- decoders (the clients) ------------------------------------------------------------------ */

/* A decoded target: deltas dequantised, indices ascending. `name` points into the payload;
 * indices and deltas are malloc'ed (proto_target2_free). */
typedef struct proto_target2 {
  proto_str name;
  float default_weight, min, max;
  uint8_t flags;
  uint32_t driver_count;
  const uint8_t *drivers; /* driver_count little-endian u16, in the payload */
  uint32_t count;
  uint32_t *indices;
  float *deltas;
  uint32_t copy_of; /* entropy joins: j + 1 when the record named target j as its copy (its own
                     * indices and deltas are then a copy of j's), else 0 */
} proto_target2;
void proto_target2_free(proto_target2 *t);

/* Decoded offsets: vertices (in rank order) and their offsets in session quanta. */
typedef struct proto_offsets2 {
  uint8_t shift;
  uint32_t count;
  uint32_t *indices; /* malloc'ed */
  int32_t *q;        /* malloc'ed, 3 per entry */
} proto_offsets2;
void proto_offsets2_free(proto_offsets2 *o);

/* A decoded version 2 SNAPSHOT: every array malloc'ed (proto_snapshot2_free). */
typedef struct proto_snapshot2 {
  uint32_t vertex_count, triangle_count, target_count;
  float offset_quantum;
  proto_grid2 grid;
  int has_uvs;
  float *positions;       /* 3 per vertex */
  uint32_t *triangles;    /* 3 per triangle */
  float *uvs;             /* 2 per vertex, or NULL */
  proto_target2 *targets; /* target_count */
  float *weights;         /* target_count */
  proto_offsets2 offsets; /* the non-zero sculpt offsets */
} proto_snapshot2;
void proto_snapshot2_free(proto_snapshot2 *s);

/* Decodes a version 2 SNAPSHOT payload and builds `t` (the traversal later DELTA and TARGET
 * frames of this session need; proto_trav_fini it). Returns 0 or a PROTO_E* code, with
 * nothing to free on failure. */
int proto_decode_snapshot2(const uint8_t *p, size_t n, const proto_limits *limits, proto_snapshot2 *s,
                           proto_trav *t);
/* DELTA (header version 2), against the traversal of the receiver's SNAPSHOT. */
int proto_decode_delta2(const uint8_t *p, size_t n, proto_trav *t, proto_offsets2 *o);
/* TARGET (header version 2). */
int proto_decode_target_add2(const uint8_t *p, size_t n, proto_trav *t, uint32_t *index, float *weight,
                             proto_target2 *target);

#ifdef __cplusplus
}
#endif

#endif
