/*
 * srv_session_wire.c — a session as the stream port shows it, per codec: the SNAPSHOT pieces
 * shared by every join (protocol version 1's body and target records; version 2's triangles,
 * and per grid its positions and UVs and target records), the per-join head and state part,
 * catch-ups (everything changed since a version), and the DELTA and TARGET frames of a change.
 *
 * Encode once (invariant 3 of docs/architecture.md; every frame carries absolute values,
 * invariant 1): every piece here is made once per session and codec and shared by reference;
 * what depends on the moment (a head with the current target count, the state part) is small.
 * Version 2's pieces for a grid are made when a viewer first asks for that grid (its positions
 * and UVs on the pool, srv_session_codec_init; its target records on the loop, as each TARGET
 * frame is).
 *
 * DOES NOT decide who gets what (srv_session.c's classes do) or do I/O.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "mesh.h"
#include "srv_session_wire.h"
#include "srv_frame.h"
#include "srv_op.h"
#include "srv_session.h"

_Static_assert(MESH_COPY_WINDOW == PROTO_COPY_WINDOW, "a copy the server names must be one decoders accept");

static proto_mesh_desc mesh_desc(const srv_session *s) {
  const mesh *m = s->mesh;
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, m->target_count, m->positions,
                        m->triangles, m->uvs, s->offset_quantum};
  return md;
}

proto_target_desc srv_session_target_desc(const srv_session *s, uint32_t t) {
  const mesh_target *mt = &s->mesh->targets[t];
  const srv_target *st = &s->targets[t];
  proto_target_desc d = {mt->name,         mt->default_weight, st->min,     st->max,    st->muted ? PROTO_TARGET_MUTED : 0,
                         st->driver_count, st->drivers,        mt->count,   mt->indices, mt->deltas};
  return d;
}

/* Grows a per-target piece array to hold index t. */
static int grow_pieces(srv_frame ***pieces, uint32_t *cap, uint32_t t) {
  if (t < *cap) return 0;
  uint32_t n = *cap ? 2 * *cap : 16;
  while (n <= t) n *= 2;
  srv_frame **g = realloc(*pieces, sizeof(*g) * n);
  if (!g) return MESH_ENOMEM;
  memset(g + *cap, 0, sizeof(*g) * (n - *cap));
  *pieces = g;
  *cap = n;
  return 0;
}

static int mesh_code(int proto_rc) { return proto_rc == PROTO_ENOMEM ? MESH_ENOMEM : MESH_EINVAL; }

int srv_session_encode_target(srv_session *s, uint32_t t) {
  int rc = grow_pieces(&s->target_parts, &s->target_cap, t);
  if (rc) return rc;
  proto_buf b;
  proto_buf_init(&b);
  proto_target_desc d = srv_session_target_desc(s, t);
  rc = proto_snapshot_target(&b, &d);
  if (rc) {
    proto_buf_fini(&b);
    return mesh_code(rc);
  }
  srv_frame *f = srv_frame_from_buf(&b);
  if (!f) return MESH_ENOMEM;
  srv_frame_unref(s->target_parts[t]); /* joins in flight keep their own reference */
  s->target_parts[t] = f;
  for (int c = 0; c < SRV_CODECS; c++) { /* version 2 records are made again when needed */
    srv_codec *k = s->codecs[c];
    if (k && t < k->target_cap) {
      srv_frame_unref(k->targets[t]);
      srv_frame_unref(k->targets_e[t]);
      k->targets[t] = k->targets_e[t] = NULL;
    }
  }
  return 0;
}

/* The SNAPSHOT mesh part of version 1 is kept in pieces shared by every join: the body
 * (positions, triangles, UVs) and one piece per target, so adding a target encodes only that
 * target. Version 2's triangles are encoded once here too, and the session adopts the corner
 * rotation they come back with, so that its traversal is the one every decoder builds. */
int srv_session_encode_parts(srv_session *s) {
  mesh *m = s->mesh;
  proto_buf b;
  proto_buf_init(&b);
  int rc = proto_snapshot2_triangles(&b, m->triangles, m->triangle_count, m->vertex_count, m->triangles);
  if (rc == 0) s->triangles2 = srv_frame_from_buf(&b);
  if (rc || !s->triangles2) {
    proto_buf_fini(&b);
    return rc ? mesh_code(rc) : MESH_ENOMEM;
  }
  rc = proto_trav_init(&s->trav, m->triangles, m->triangle_count, m->vertex_count);
  if (rc) return mesh_code(rc);
  rc = proto_snapshot2_triangles_entropy(&b, m->triangles, m->triangle_count, &s->trav);
  if (rc == 0) s->triangles2e = srv_frame_from_buf(&b);
  if (rc || !s->triangles2e) {
    proto_buf_fini(&b);
    return rc ? mesh_code(rc) : MESH_ENOMEM;
  }
  proto_mesh_desc md = mesh_desc(s);
  rc = proto_snapshot_mesh_body(&b, &md);
  if (rc) {
    proto_buf_fini(&b);
    return MESH_ENOMEM;
  }
  s->mesh_body = srv_frame_from_buf(&b);
  if (!s->mesh_body) return MESH_ENOMEM;
  for (uint32_t t = 0; t < m->target_count; t++) {
    rc = srv_session_encode_target(s, t);
    if (rc) return rc;
  }
  return 0;
}

/* ---- version 2 codecs ------------------------------------------------------------------------- */

int srv_session_codec_init(const srv_session *s, uint8_t codec, srv_codec *out) {
  memset(out, 0, sizeof(*out));
  proto_mesh_desc md = mesh_desc(s);
  int rc = proto_grid2_init(&out->grid, &md, srv_codec_shift(codec));
  if (rc) return mesh_code(rc);
  proto_buf b;
  proto_buf_init(&b);
  /* Both codings of the grid's attributes: the entropy one (§12.11) for joins granted it. */
  proto_grid2 ge = out->grid;
  ge.entropy = 1;
  for (int e = 0; e < 2; e++) {
    rc = proto_snapshot2_attributes(&b, &md, e ? &ge : &out->grid, &s->trav);
    srv_frame **to = e ? &out->attributes_e : &out->attributes;
    if (rc == 0) *to = srv_frame_from_buf(&b);
    if (rc || !*to) {
      proto_buf_fini(&b);
      srv_session_codec_fini(out);
      return rc ? mesh_code(rc) : MESH_ENOMEM;
    }
  }
  return 0;
}

void srv_session_codec_fini(srv_codec *c) {
  srv_frame_unref(c->attributes);
  srv_frame_unref(c->attributes_e);
  for (uint32_t t = 0; t < c->target_cap; t++) {
    srv_frame_unref(c->targets[t]);
    srv_frame_unref(c->targets_e[t]);
  }
  free(c->targets);
  free(c->targets_e);
  memset(c, 0, sizeof(*c));
}

/* Grows both per-target record arrays of a codec to hold index t. */
static int grow_records(srv_codec *k, uint32_t t) {
  uint32_t cap = k->target_cap;
  if (grow_pieces(&k->targets_e, &cap, t)) return MESH_ENOMEM;
  return grow_pieces(&k->targets, &k->target_cap, t);
}

/* Target t's version 2 record in `codec`, in the entropy coding when `entropy` (made now if
 * needed). NULL when out of memory. */
static srv_frame *target_record(srv_session *s, uint8_t codec, uint32_t t, int entropy) {
  srv_codec *k = s->codecs[codec];
  if (!k || grow_records(k, t)) return NULL;
  srv_frame **rec = entropy ? &k->targets_e[t] : &k->targets[t];
  if (*rec) return *rec;
  proto_buf b;
  proto_buf_init(&b);
  proto_target_desc d = srv_session_target_desc(s, t);
  proto_grid2 g = k->grid;
  g.entropy = (uint8_t)(entropy != 0);
  /* A join in the entropy coding names an earlier twin instead of coding the same data again
   * (the demo head's ARKit shapes that are its own: 13 of its 68). */
  int64_t of = entropy ? mesh_target_copy_of(s->mesh, t) : -1;
  if ((of >= 0 ? proto_snapshot2_target_copy(&b, &d, &g, (uint32_t)of) : proto_snapshot2_target(&b, &d, &g, &s->trav)) != 0) {
    proto_buf_fini(&b);
    return NULL;
  }
  *rec = srv_frame_from_buf(&b);
  return *rec;
}

int srv_session_encode_target_add(srv_session *s, uint8_t codec, uint64_t version, uint8_t flags, uint32_t t,
                                  proto_buf *b) {
  if (codec == SRV_CODEC_V1) {
    proto_target_desc d = srv_session_target_desc(s, t);
    size_t at = b->len;
    int rc = proto_encode_target_add(b, version, t, s->weights[t], &d);
    if (rc == 0) b->data[at + 7] |= flags; /* the header's flags byte */
    return rc;
  }
  /* The record is the one joins share: the frame is a header, index, weight and that record. */
  srv_frame *rec = target_record(s, codec, t, 0);
  if (!rec) return PROTO_ENOMEM;
  size_t at = b->len;
  uint8_t *p = proto_buf_append(b, PROTO_HEADER_SIZE + 8 + rec->len);
  if (!p) return PROTO_ENOMEM;
  proto_header h = {PROTO_MAGIC, PROTO_VERSION_2, PROTO_TARGET, flags, (uint32_t)(8 + rec->len), version};
  proto_header_encode(&h, p);
  float w = s->weights[t];
  uint32_t wbits;
  memcpy(&wbits, &w, 4);
  for (int i = 0; i < 4; i++) {
    p[PROTO_HEADER_SIZE + i] = (uint8_t)(t >> (8 * i));
    p[PROTO_HEADER_SIZE + 4 + i] = (uint8_t)(wbits >> (8 * i));
  }
  memcpy(b->data + at + PROTO_HEADER_SIZE + 8, rec->data, rec->len);
  return 0;
}

int srv_session_encode_delta(srv_session *s, uint8_t codec, uint64_t version, uint8_t flags, uint32_t count,
                             const uint32_t *indices, const int32_t *q, proto_buf *b) {
  if (codec == SRV_CODEC_V1) return proto_encode_delta(b, version, flags, count, indices, q);
  return proto_encode_delta2(b, version, flags, srv_codec_shift(codec), count, indices, q, &s->trav);
}

/* ---- SNAPSHOT --------------------------------------------------------------------------------- */

/* The non-zero offsets: vertex list and values (malloc'ed, caller frees). */
static int nonzero_offsets(const srv_session *s, uint32_t *count, uint32_t **idx, int32_t **q) {
  uint32_t nv = s->mesh->vertex_count, n = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *o = s->offsets + 3 * (size_t)v;
    n += (o[0] | o[1] | o[2]) != 0;
  }
  *idx = malloc(sizeof(uint32_t) * (n + 1));
  *q = malloc(sizeof(int32_t) * 3 * ((size_t)n + 1));
  if (!*idx || !*q) {
    free(*idx);
    free(*q);
    return PROTO_ENOMEM;
  }
  uint32_t k = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *o = s->offsets + 3 * (size_t)v;
    if ((o[0] | o[1] | o[2]) == 0) continue;
    (*idx)[k] = v;
    memcpy(*q + 3 * (size_t)k, o, sizeof(int32_t) * 3);
    k++;
  }
  *count = k;
  return 0;
}

/* The state part of a SNAPSHOT in `codec`: current weights, non-zero offsets. */
static int encode_state(srv_session *s, uint8_t codec, proto_buf *b) {
  uint32_t count;
  uint32_t *idx;
  int32_t *q;
  int rc = nonzero_offsets(s, &count, &idx, &q);
  if (rc) return rc;
  uint32_t nt = s->mesh->target_count;
  if (codec == SRV_CODEC_V1) rc = proto_snapshot_state_part(b, nt, s->weights, count, idx, q);
  else rc = proto_snapshot2_state(b, nt, s->weights, count, idx, q, srv_codec_shift(codec), &s->trav);
  free(idx);
  free(q);
  return rc;
}

int srv_session_snapshot_parts(srv_session *s, uint8_t codec, int entropy, srv_frame ***parts, uint32_t *count) {
  uint32_t nt = s->mesh->target_count;
  srv_codec *k = codec == SRV_CODEC_V1 ? NULL : s->codecs[codec];
  if (codec != SRV_CODEC_V1 && (!k || !k->attributes)) return MESH_EINVAL;
  /* The entropy coding where it is the smaller (its tables do not pay on a tiny mesh). */
  entropy = entropy && k && s->triangles2e->len + k->attributes_e->len < s->triangles2->len + k->attributes->len;
  srv_frame **p = calloc(nt + 4, sizeof(*p));
  uint32_t n = 1; /* p[0]: the head, made last (it needs the lengths) */
  size_t mesh_len = 0;
  int rc = p ? 0 : MESH_ENOMEM;
  if (rc == 0 && !k) p[n++] = srv_frame_ref(s->mesh_body);
  if (rc == 0 && k) {
    p[n++] = srv_frame_ref(entropy ? s->triangles2e : s->triangles2);
    p[n++] = srv_frame_ref(entropy ? k->attributes_e : k->attributes);
  }
  for (uint32_t t = 0; rc == 0 && t < nt; t++) {
    srv_frame *rec = k ? target_record(s, codec, t, entropy) : s->target_parts[t];
    if (rec) p[n++] = srv_frame_ref(rec);
    else rc = MESH_ENOMEM;
  }
  for (uint32_t i = 1; rc == 0 && i < n; i++) mesh_len += p[i]->len;
  proto_buf hb, sb;
  proto_buf_init(&hb);
  proto_buf_init(&sb);
  srv_frame *state = NULL;
  if (rc == 0 && encode_state(s, codec, &sb) == 0) state = srv_frame_from_buf(&sb);
  else proto_buf_fini(&sb);
  proto_mesh_desc md = mesh_desc(s);
  if (state) {
    mesh_len += k ? 48 : 20;
    int hr = k ? proto_encode_snapshot2_head(&hb, s->version, mesh_len, state->len)
               : proto_encode_snapshot_head(&hb, s->version, mesh_len, state->len);
    proto_grid2 g = k ? k->grid : (proto_grid2){0};
    g.entropy = (uint8_t)entropy;
    if (hr == 0) hr = k ? proto_snapshot2_head(&hb, &md, &g) : proto_snapshot_mesh_head(&hb, &md);
    if (hr == 0) p[0] = srv_frame_from_buf(&hb);
  }
  proto_buf_fini(&hb);
  if (!state || !p || !p[0]) {
    for (uint32_t i = 0; p && i < n; i++) srv_frame_unref(p[i]);
    free(p);
    srv_frame_unref(state);
    return MESH_ENOMEM;
  }
  p[n++] = state;
  *parts = p;
  *count = n;
  return 0;
}

/* ---- catch-ups -------------------------------------------------------------------------------- */

/* Every vertex changed since `since`: version 1 takes whole 64-vertex blocks (what its
 * documentation promises), version 2 exactly the vertices stamped after it (their current,
 * absolute offsets, zero included: a vertex back at rest must be sent too). */
static int changed_vertices(const srv_session *s, uint64_t since, int exact, uint32_t *count, uint32_t **idx,
                            int32_t **q) {
  uint32_t nv = s->mesh->vertex_count, nblocks = (nv >> SRV_BLOCK_SHIFT) + 1, n = 0;
  for (uint32_t bl = 0; bl < nblocks; bl++) {
    if (s->block_version[bl] <= since) continue;
    uint32_t lo = bl << SRV_BLOCK_SHIFT, hi = lo + (1u << SRV_BLOCK_SHIFT);
    n += (hi > nv ? nv : hi) - lo;
  }
  *count = 0;
  if (n == 0) return 0;
  *idx = malloc(sizeof(uint32_t) * n);
  *q = malloc(sizeof(int32_t) * 3 * (size_t)n);
  if (!*idx || !*q) {
    free(*idx);
    free(*q);
    *idx = NULL;
    *q = NULL;
    return PROTO_ENOMEM;
  }
  uint32_t k = 0;
  for (uint32_t bl = 0; bl < nblocks; bl++) {
    if (s->block_version[bl] <= since) continue;
    uint32_t lo = bl << SRV_BLOCK_SHIFT, hi = lo + (1u << SRV_BLOCK_SHIFT);
    for (uint32_t v = lo; v < hi && v < nv; v++) {
      if (exact && s->vertex_version[v] <= since) continue;
      (*idx)[k] = v;
      memcpy(*q + 3 * (size_t)k, s->offsets + 3 * (size_t)v, sizeof(int32_t) * 3);
      k++;
    }
  }
  *count = k;
  return 0;
}

static int encode_since_frames(srv_session *s, uint64_t since, uint8_t flags, uint8_t codec, proto_buf *b) {
  if (since >= s->version) return 0;
  const mesh *m = s->mesh;
  uint32_t nt = m->target_count, changed = 0;
  int rc = 0;
  /* Targets created since then come first: the weights and offsets below refer to them. Their
   * drivers come in the TARGET_META frames below, once every target exists (a driver may be a
   * target created after the one it drives). */
  for (uint32_t t = 0; t < nt && rc == 0; t++) {
    if (s->target_version[t] <= since) continue;
    if (codec == SRV_CODEC_V1) {
      proto_target_desc d = srv_session_target_desc(s, t);
      d.driver_count = 0;
      size_t at = b->len;
      rc = proto_encode_target_add(b, s->version, t, s->weights[t], &d);
      if (rc == 0) b->data[at + 7] |= flags;
    } else {
      /* The shared record carries the current drivers: a TARGET that names a driver created
       * later would be refused, so such a target goes out without them, encoded here. */
      proto_target_desc d = srv_session_target_desc(s, t);
      int later = 0;
      for (uint32_t i = 0; i < d.driver_count; i++) later |= d.drivers[i] >= t;
      if (!later) {
        rc = srv_session_encode_target_add(s, codec, s->version, flags, t, b);
      } else {
        d.driver_count = 0;
        rc = proto_encode_target_add2(b, s->version, flags, t, s->weights[t], &d, &s->codecs[codec]->grid, &s->trav);
      }
    }
  }
  if (rc) return rc;
  /* Range, mute or drivers changed since then (targets created since then carried theirs). */
  for (uint32_t t = 0; t < nt && rc == 0; t++) {
    const srv_target *st = &s->targets[t];
    int created = s->target_version[t] > since; /* its TARGET frame carried all but the drivers */
    if (created ? st->driver_count == 0 : st->meta_version <= since) continue;
    rc = proto_encode_target_meta(b, s->version, flags, t, st->min, st->max, st->muted ? PROTO_TARGET_MUTED : 0,
                                  st->driver_count, st->drivers);
  }
  if (rc) return rc;
  for (uint32_t t = 0; t < nt; t++) changed += s->weight_version[t] > since;
  if (changed > nt / 2) {
    rc = proto_encode_weights(b, s->version, flags, nt, NULL, s->weights);
  } else if (changed > 0) {
    uint32_t *idx = malloc(sizeof(uint32_t) * changed);
    float *val = malloc(sizeof(float) * changed);
    if (!idx || !val) rc = PROTO_ENOMEM;
    uint32_t k = 0;
    for (uint32_t t = 0; rc == 0 && t < nt; t++) {
      if (s->weight_version[t] <= since) continue;
      idx[k] = t;
      val[k++] = s->weights[t];
    }
    if (rc == 0) rc = proto_encode_weights(b, s->version, flags, k, idx, val);
    free(idx);
    free(val);
  }
  if (rc) return rc;
  uint32_t count;
  uint32_t *idx = NULL;
  int32_t *q = NULL;
  rc = changed_vertices(s, since, codec != SRV_CODEC_V1, &count, &idx, &q);
  if (rc == 0 && count > 0) rc = srv_session_encode_delta(s, codec, s->version, flags, count, idx, q, b);
  free(idx);
  free(q);
  return rc;
}

int srv_session_encode_since(srv_session *s, uint64_t since, uint8_t flags, uint8_t codec, proto_buf *b) {
  size_t start = b->len;
  int rc = encode_since_frames(s, since, flags, codec, b);
  if (rc || b->failed) return rc ? rc : PROTO_ENOMEM;
  /* Every frame but the last says "more follow": a receiver reaches the version only with the
   * last one, and never shows a half-applied catch-up as complete. */
  size_t at = start, last = (size_t)-1;
  while (at < b->len) {
    if (last != (size_t)-1) b->data[last + 7] |= PROTO_FLAG_MORE;
    last = at;
    at += PROTO_HEADER_SIZE + proto_load_u32(b->data + at + 8);
  }
  return 0;
}
