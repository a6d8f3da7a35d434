/*
 * srv_session_wire.h — a session on the wire: SNAPSHOT pieces, catch-ups and frames, per codec.
 */
#ifndef DEFORMD_SRV_SESSION_WIRE_H
#define DEFORMD_SRV_SESSION_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "srv_frame.h"
#include "srv_session.h"

/* Target t as the protocol describes it (name, default, range, flags, drivers, deltas). */
proto_target_desc srv_session_target_desc(const srv_session *s, uint32_t t);
/* Encodes target t's SNAPSHOT part into s->target_parts[t] (grown as needed), and drops its
 * version 2 records (made again when needed): after a target is added or its settings change.
 * Returns 0 or a MESH_E* code. */
int srv_session_encode_target(srv_session *s, uint32_t t);
/* The version 1 pieces, the triangles of version 2 and their traversal, for a new session. */
int srv_session_encode_parts(srv_session *s);
/* Codec `codec`'s grid and pieces: attributes encoded here (any thread: touches only the
 * immutable mesh and the traversal's tables). Returns 0, MESH_EINVAL (that grid does not fit
 * the mesh) or MESH_ENOMEM. */
int srv_session_codec_init(const srv_session *s, uint8_t codec, srv_codec *out);
void srv_session_codec_fini(srv_codec *c);
/* Encodes the frames that bring a receiver from `since` to the current version, in `codec`:
 * new targets, changed settings, a WEIGHTS frame of every target changed since then and a
 * DELTA (version 1: every vertex in a 64-vertex block changed since then; version 2: exactly
 * the vertices changed). Every frame but the last carries MORE. Appends to `b` (nothing when
 * since == version). Returns 0 or a PROTO_E* code. */
int srv_session_encode_since(srv_session *s, uint64_t since, uint8_t flags, uint8_t codec, proto_buf *b);
/* The frames a joining viewer is sent as its SNAPSHOT, in `codec` (whose pieces must exist), in
 * order: a per-join head (frame header and mesh counts), the shared pieces (referenced), a
 * per-join state part; with `entropy` (a join granted that capability) the triangles, attributes
 * and target records in its coding (docs/protocol.md §12.11). *parts is malloc'ed and holds one
 * reference to each frame. Returns 0 or MESH_ENOMEM. */
int srv_session_snapshot_parts(srv_session *s, uint8_t codec, int entropy, srv_frame ***parts, uint32_t *count);
/* The frames a DELTA of these offsets, or a TARGET of target t, is in `codec`. */
int srv_session_encode_delta(srv_session *s, uint8_t codec, uint64_t version, uint8_t flags, uint32_t count,
                             const uint32_t *indices, const int32_t *q, proto_buf *b);
int srv_session_encode_target_add(srv_session *s, uint8_t codec, uint64_t version, uint8_t flags, uint32_t t,
                                  proto_buf *b);

#endif
