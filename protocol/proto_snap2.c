/*
 * proto_snap2.c — version 2's compact bodies (docs/protocol.md §12): the SNAPSHOT mesh part
 * (head, triangles, positions, UVs, targets), its state part, DELTA and TARGET, on the grid of
 * proto_grid2 and the codecs of proto_trav.c.
 *
 * Every lossy field is within half a grid step of the exact value (positions and target
 * deltas: step / 2, plus the float rounding of the formula that rebuilds them; UVs: uv_step / 2;
 * offsets: 2^(shift-1) quanta). Decoders check every count against the bytes present before
 * allocating, every decoded integer against its range, and every float they produce for
 * finiteness.
 *
 * DOES NOT pick the grid a connection gets (the server does) or do I/O.
 */
#include <math.h>
#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>

#include "proto2.h"
#include "proto_internal.h"

#define CHECK PROTO__CHECK
#define SNAP2_HAS_UVS 0x1u
#define SNAP2_LOSSLESS 0x2u
#define SNAP2_ENTROPY 0x4u /* the triangles piece is rANS-coded (§12.11) */
#define SNAP2_HEAD 48
#define GRID_MAX (1u << 24) /* grid integers below this convert to float exactly */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- the grid ---------------------------------------------------------------------------------- */

uint8_t proto_grid2_shift_for(float quantum, float tolerance, uint8_t finest) {
  uint8_t s = finest;
  /* The coarsest shift whose half step, quantum · 2^(s-1), stays within the tolerance. */
  while (s < PROTO_MAX_SHIFT && ldexp((double)quantum, s) <= (double)tolerance) s++;
  return s;
}

int proto_grid2_init(proto_grid2 *g, const proto_mesh_desc *m, uint8_t shift) {
  memset(g, 0, sizeof(*g));
  if (!(m->offset_quantum > 0) || !isfinite(m->offset_quantum) || shift > PROTO_MAX_SHIFT) return PROTO_EINVAL;
  g->quantum = m->offset_quantum;
  g->shift = shift;
  if (shift == 0) return 0;
  g->step = ldexpf(m->offset_quantum, shift);
  if (!isfinite(g->step) || !(g->step > 0)) return PROTO_EINVAL;
  float lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
  for (uint32_t v = 0; v < m->vertex_count; v++)
    for (int c = 0; c < 3; c++) {
      float x = m->positions[3 * (size_t)v + c];
      if (v == 0 || x < lo[c]) lo[c] = x;
      if (v == 0 || x > hi[c]) hi[c] = x;
    }
  for (int c = 0; c < 3; c++) {
    g->origin[c] = lo[c];
    if (!((double)hi[c] - lo[c] < (double)g->step * (GRID_MAX - 2))) return PROTO_EINVAL;
  }
  if (m->uvs) {
    for (int c = 0; c < 2; c++) {
      float ulo = m->uvs[c], uhi = m->uvs[c];
      for (uint32_t v = 1; v < m->vertex_count; v++) {
        float u = m->uvs[2 * (size_t)v + c];
        ulo = u < ulo ? u : ulo;
        uhi = u > uhi ? u : uhi;
      }
      double range = (double)uhi - ulo;
      float st = range > 0 ? (float)(range / 65535.0) : 1.0f;
      while (range / st > 65535.0) st = nextafterf(st, INFINITY); /* q stays within 16 bits */
      if (!isfinite(st) || !(st > 0)) return PROTO_EINVAL;
      g->uv_origin[c] = ulo;
      g->uv_step[c] = st;
    }
  }
  return 0;
}

/* ---- mesh part ------------------------------------------------------------------------------- */

int proto_snapshot2_head(proto_buf *b, const proto_mesh_desc *m, const proto_grid2 *g) {
  if (m->target_count > PROTO_MAX_TARGETS || !(g->quantum > 0) || !isfinite(g->quantum) ||
      g->quantum != m->offset_quantum || g->shift > PROTO_MAX_SHIFT)
    return PROTO_EINVAL;
  proto__put_u32(b, m->vertex_count);
  proto__put_u32(b, m->triangle_count);
  proto__put_u32(b, m->target_count);
  proto__put_f32(b, g->quantum);
  proto__put_u8(b, (uint8_t)((m->uvs ? SNAP2_HAS_UVS : 0) | (g->shift ? 0 : SNAP2_LOSSLESS) | (g->entropy ? SNAP2_ENTROPY : 0)));
  proto__put_u8(b, g->shift);
  proto__put_u16(b, 0);
  for (int c = 0; c < 3; c++) proto__put_f32(b, g->origin[c]);
  for (int c = 0; c < 2; c++) proto__put_f32(b, m->uvs ? g->uv_origin[c] : 0.0f);
  for (int c = 0; c < 2; c++) proto__put_f32(b, m->uvs ? g->uv_step[c] : 0.0f);
  return b->failed ? PROTO_ENOMEM : 0;
}

/* Per-vertex attributes in rank order: grid integers, or float bits when lossless. */
static int put_attribute(proto_buf *b, const proto_trav *t, const float *a, int lanes, const float *origin,
                         const float *step, int lossless, int entropy) {
  size_t nv = t->vertex_count;
  uint32_t *val = malloc(sizeof(uint32_t) * (size_t)lanes * (nv + 1));
  if (!val) return PROTO_ENOMEM;
  for (size_t i = 0; i < nv; i++) {
    const float *x = a + (size_t)lanes * t->order[i];
    for (int l = 0; l < lanes; l++)
      val[(size_t)lanes * i + l] =
          lossless ? f32_bits(x[l]) : (uint32_t)lrint(((double)x[l] - origin[l]) / step[l]);
  }
  /* Every vertex in the stream: the codec reads t's tables only (proto_snapshot2_body's promise). */
  int rc = proto__stream_put(b, (proto_trav *)t, NULL, (uint32_t)nv, lanes, val, entropy);
  free(val);
  return rc;
}

int proto_snapshot2_triangles(proto_buf *b, const uint32_t *tri, uint32_t triangle_count, uint32_t vertex_count,
                              uint32_t *canonical) {
  size_t ni = 3 * (size_t)triangle_count;
  for (size_t i = 0; i < ni; i++)
    if (tri[i] >= vertex_count) return PROTO_EINVAL;
  size_t cap = ni ? meshopt_encodeIndexBufferBound(ni, vertex_count) : 0;
  uint8_t *ib = cap ? malloc(cap) : NULL;
  if (cap && !ib) return PROTO_ENOMEM;
  meshopt_encodeIndexVersion(1); /* decodable by meshoptimizer 0.14 and later, JavaScript included */
  size_t ilen = ni ? meshopt_encodeIndexBuffer(ib, cap, tri, ni) : 0;
  int rc = ni && ilen == 0 ? PROTO_ENOMEM : 0;
  if (rc == 0 && ni && meshopt_decodeIndexBuffer(canonical, ni, 4, ib, ilen) != 0) rc = PROTO_EINVAL;
  if (rc == 0) {
    proto__put_u32(b, (uint32_t)ilen);
    uint8_t *d = proto__reserve(b, ilen);
    if (d && ilen) memcpy(d, ib, ilen);
    rc = b->failed ? PROTO_ENOMEM : 0;
  }
  free(ib);
  return rc;
}

int proto_snapshot2_attributes(proto_buf *b, const proto_mesh_desc *m, const proto_grid2 *g, const proto_trav *t) {
  if (t->vertex_count != m->vertex_count) return PROTO_EINVAL;
  float step3[3] = {g->step, g->step, g->step};
  int lossless = g->shift == 0;
  CHECK(put_attribute(b, t, m->positions, 3, g->origin, step3, lossless, g->entropy));
  if (m->uvs) CHECK(put_attribute(b, t, m->uvs, 2, g->uv_origin, g->uv_step, lossless, g->entropy));
  return b->failed ? PROTO_ENOMEM : 0;
}

/* The step a target's deltas travel on: the grid's, or 0 (float bits) when the grid is
 * lossless or a delta needs more than 2^24 steps. */
static float target_step(const proto_target_desc *d, const proto_grid2 *g) {
  if (g->shift == 0) return 0.0f;
  for (size_t i = 0; i < 3 * (size_t)d->count; i++)
    if (!(fabs((double)d->deltas[i] / g->step) < GRID_MAX - 2)) return 0.0f;
  return g->step;
}

/* A target record; `copy_field`: a SNAPSHOT's in the entropy layout, with its `copy` field. */
static int put_target2(proto_buf *b, const proto_target_desc *d, const proto_grid2 *g, proto_trav *t, int copy_field) {
  size_t nl = d->name ? strlen(d->name) : 0;
  if (nl > PROTO_MAX_NAME || d->count > t->vertex_count) return PROTO_EINVAL;
  if (!isfinite(d->default_weight)) return PROTO_ENONFINITE;
  for (size_t i = 0; i < 3 * (size_t)d->count; i++)
    if (!isfinite(d->deltas[i])) return PROTO_ENONFINITE;
  uint32_t *perm = malloc(sizeof(uint32_t) * ((size_t)d->count + 1));
  uint32_t *list = malloc(sizeof(uint32_t) * ((size_t)d->count + 1));
  uint32_t *val = malloc(sizeof(uint32_t) * 3 * ((size_t)d->count + 1));
  int rc = perm && list && val ? proto__rank_order(t, d->indices, d->count, perm) : PROTO_ENOMEM;
  float step = target_step(d, g);
  if (rc == 0) {
    for (uint32_t i = 0; i < d->count; i++) {
      list[i] = d->indices[perm[i]];
      for (int c = 0; c < 3; c++) {
        float x = d->deltas[3 * (size_t)perm[i] + c];
        val[3 * (size_t)i + c] = step > 0 ? (uint32_t)lrint((double)x / step) : f32_bits(x);
      }
    }
    proto__put_str(b, d->name, nl);
    proto__put_f32(b, d->default_weight);
    rc = proto__put_meta(b, d->min, d->max, d->flags, d->driver_count, d->drivers);
  }
  if (rc == 0) {
    if (copy_field) proto__put_varint(b, 0); /* copy: none, the data follow */
    proto__put_f32(b, step);
    rc = proto__ranks_put(b, t, list, d->count);
  }
  if (rc == 0) rc = proto__stream_put(b, t, list, d->count, 3, val, g->entropy);
  free(perm);
  free(list);
  free(val);
  return rc ? rc : b->failed ? PROTO_ENOMEM : 0;
}

int proto_snapshot2_target(proto_buf *b, const proto_target_desc *d, const proto_grid2 *g, proto_trav *t) {
  return put_target2(b, d, g, t, g->entropy);
}

int proto_snapshot2_target_copy(proto_buf *b, const proto_target_desc *d, const proto_grid2 *g, uint32_t of) {
  size_t nl = d->name ? strlen(d->name) : 0;
  if (nl > PROTO_MAX_NAME || !g->entropy || of >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  if (!isfinite(d->default_weight)) return PROTO_ENONFINITE;
  size_t at = b->len;
  proto__put_str(b, d->name, nl);
  proto__put_f32(b, d->default_weight);
  int rc = proto__put_meta(b, d->min, d->max, d->flags, d->driver_count, d->drivers);
  if (rc) {
    b->len = at;
    return rc;
  }
  proto__put_varint(b, of + 1);
  return b->failed ? PROTO_ENOMEM : 0;
}

/* ---- offsets: state part and DELTA ---------------------------------------------------------- */

/* u8 shift, the vertices as runs of ranks, their offsets on the shift's grid. Entries that the
 * grid rounds to zero are left out when `drop_zero` (a snapshot lists non-zero offsets only). */
static int put_offsets2(proto_buf *b, uint8_t shift, uint32_t count, const uint32_t *indices, const int32_t *q,
                        int drop_zero, proto_trav *t) {
  if (shift > PROTO_MAX_SHIFT) return PROTO_EINVAL;
  for (size_t i = 0; i < 3 * (size_t)count; i++)
    if (q[i] > PROTO_Q_MAX || q[i] < -PROTO_Q_MAX) return PROTO_EINVAL;
  uint32_t *perm = malloc(sizeof(uint32_t) * ((size_t)count + 1));
  uint32_t *list = malloc(sizeof(uint32_t) * ((size_t)count + 1));
  uint32_t *val = malloc(sizeof(uint32_t) * 3 * ((size_t)count + 1));
  int rc = perm && list && val ? proto__rank_order(t, indices, count, perm) : PROTO_ENOMEM;
  uint32_t k = 0;
  for (uint32_t i = 0; rc == 0 && i < count; i++) {
    int32_t r[3];
    for (int c = 0; c < 3; c++) r[c] = proto_shift_round(q[3 * (size_t)perm[i] + c], shift);
    if (drop_zero && (r[0] | r[1] | r[2]) == 0) continue;
    list[k] = indices[perm[i]];
    for (int c = 0; c < 3; c++) val[3 * (size_t)k + c] = (uint32_t)r[c];
    k++;
  }
  if (rc == 0) {
    proto__put_u8(b, shift);
    rc = proto__ranks_put(b, t, list, k);
  }
  if (rc == 0) rc = proto__stream_put(b, t, list, k, 3, val, 0);
  free(perm);
  free(list);
  free(val);
  return rc ? rc : b->failed ? PROTO_ENOMEM : 0;
}

int proto_snapshot2_state(proto_buf *b, uint32_t target_count, const float *weights, uint32_t count,
                          const uint32_t *indices, const int32_t *q, uint8_t shift, proto_trav *t) {
  for (uint32_t i = 0; i < target_count; i++) {
    if (!isfinite(weights[i])) return PROTO_ENONFINITE;
    proto__put_f32(b, weights[i]);
  }
  return put_offsets2(b, shift, count, indices, q, 1, t);
}

int proto_encode_snapshot2_head(proto_buf *b, uint64_t version, size_t mesh_part_len, size_t state_part_len) {
  if (mesh_part_len + state_part_len > UINT32_MAX) return PROTO_ETOOBIG;
  size_t at = proto__frame_begin_v(b, PROTO_SNAPSHOT, 0, version, PROTO_VERSION_2);
  if (b->failed) return PROTO_ENOMEM;
  proto__st32(b->data + at + 8, (uint32_t)(mesh_part_len + state_part_len));
  return 0;
}

/* Closes the frame at `at`, or takes back everything since `mark` when the body failed. */
static int end_or_undo(proto_buf *b, size_t mark, size_t at, int rc) {
  if (rc) {
    b->len = mark;
    return rc;
  }
  return proto_frame_end(b, at);
}

int proto_encode_delta2(proto_buf *b, uint64_t version, uint8_t flags, uint8_t shift, uint32_t count,
                        const uint32_t *indices, const int32_t *q, proto_trav *t) {
  size_t mark = b->len;
  size_t at = proto__frame_begin_v(b, PROTO_DELTA, flags, version, PROTO_VERSION_2);
  return end_or_undo(b, mark, at, put_offsets2(b, shift, count, indices, q, 0, t));
}

int proto_encode_target_add2(proto_buf *b, uint64_t version, uint8_t flags, uint32_t index, float weight,
                             const proto_target_desc *d, const proto_grid2 *g, proto_trav *t) {
  if (!isfinite(weight)) return PROTO_ENONFINITE;
  if (index >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  size_t mark = b->len;
  size_t at = proto__frame_begin_v(b, PROTO_TARGET, flags, version, PROTO_VERSION_2);
  proto__put_u32(b, index);
  proto__put_f32(b, weight);
  return end_or_undo(b, mark, at, put_target2(b, d, g, t, 0)); /* TARGET: never a copy field */
}

/* ---- decoders -------------------------------------------------------------------------------- */

void proto_target2_free(proto_target2 *t) {
  free(t->indices);
  free(t->deltas);
  t->indices = NULL;
  t->deltas = NULL;
}

void proto_offsets2_free(proto_offsets2 *o) {
  free(o->indices);
  free(o->q);
  memset(o, 0, sizeof(*o));
}

void proto_snapshot2_free(proto_snapshot2 *s) {
  free(s->positions);
  free(s->triangles);
  free(s->uvs);
  for (uint32_t i = 0; s->targets && i < s->target_count; i++) proto_target2_free(&s->targets[i]);
  free(s->targets);
  free(s->weights);
  proto_offsets2_free(&s->offsets);
  memset(s, 0, sizeof(*s));
}

static int get_offsets2(proto_cur *c, proto_trav *t, proto_offsets2 *o) {
  memset(o, 0, sizeof(*o));
  CHECK(proto__get_u8(c, &o->shift));
  if (o->shift > PROTO_MAX_SHIFT) return PROTO_EINVAL;
  CHECK(proto__ranks_get(c, t, &o->count, &o->indices));
  o->q = malloc(sizeof(int32_t) * 3 * ((size_t)o->count + 1));
  int rc = o->q ? proto__stream_get(c, t, o->indices, o->count, 3, (uint32_t *)o->q) : PROTO_ENOMEM;
  /* Whatever the grid rounded stays within the range the encoder accepts, plus half a step. */
  int64_t lim = PROTO_Q_MAX + (o->shift ? (int64_t)1 << (o->shift - 1) : 0);
  for (size_t i = 0; rc == 0 && i < 3 * (size_t)o->count; i++) {
    int64_t v = (int64_t)o->q[i] * ((int64_t)1 << o->shift);
    if (v > lim || v < -lim) rc = PROTO_EINVAL;
    else o->q[i] = (int32_t)v;
  }
  if (rc) proto_offsets2_free(o);
  return rc;
}

/* A copy's data: target j's, which must be one of the PROTO_COPY_WINDOW before `index` and
 * coded in full itself (so that a join holds at most PROTO_COPY_WINDOW + 1 times the entries it
 * codes). */
static int copy_target2(proto_target2 *tg, const proto_target2 *earlier, uint32_t index, uint32_t j,
                        uint64_t *budget) {
  if (j >= index || index - j > PROTO_COPY_WINDOW || earlier[j].copy_of) return PROTO_EINVAL;
  const proto_target2 *o = &earlier[j];
  size_t k = o->count;
  if (k > *budget) return PROTO_ETOOBIG;
  *budget -= k;
  tg->indices = malloc(sizeof(uint32_t) * (k + 1));
  tg->deltas = malloc(sizeof(float) * 3 * (k + 1));
  if (!tg->indices || !tg->deltas) return PROTO_ENOMEM;
  memcpy(tg->indices, o->indices, sizeof(uint32_t) * k);
  memcpy(tg->deltas, o->deltas, sizeof(float) * 3 * k);
  tg->count = o->count;
  tg->copy_of = j + 1;
  return 0;
}

/* A target record; `earlier` (the targets before `index` of the same SNAPSHOT) is not NULL
 * exactly when the record has the entropy layout's `copy` field. Its entries are taken from
 * *budget before anything of their size is allocated (PROTO_ETOOBIG past it). */
static int get_target2(proto_cur *c, proto_trav *t, proto_target2 *tg, const proto_target2 *earlier, uint32_t index,
                       uint64_t *budget) {
  memset(tg, 0, sizeof(*tg));
  float step;
  uint32_t *list = NULL, *val = NULL;
  proto_key_at *pairs = NULL;
  CHECK(proto__get_str(c, &tg->name));
  CHECK(proto__get_f32(c, &tg->default_weight));
  CHECK(proto__get_meta(c, &tg->min, &tg->max, &tg->flags, &tg->driver_count, &tg->drivers));
  if (earlier) {
    uint32_t copy;
    CHECK(proto__get_varint(c, &copy));
    if (copy) {
      int rc = copy_target2(tg, earlier, index, copy - 1, budget);
      if (rc) proto_target2_free(tg);
      return rc;
    }
  }
  CHECK(proto__get_f32(c, &step));
  if (step < 0) return PROTO_EINVAL;
  CHECK(proto__ranks_get(c, t, &tg->count, &list));
  size_t k = tg->count;
  if (k > *budget) {
    free(list);
    return PROTO_ETOOBIG;
  }
  *budget -= k;
  val = malloc(sizeof(uint32_t) * 3 * (k + 1));
  pairs = malloc(sizeof(*pairs) * (2 * k + 1)); /* and the sort's scratch */
  tg->indices = malloc(sizeof(uint32_t) * (k + 1));
  tg->deltas = malloc(sizeof(float) * 3 * (k + 1));
  int rc = val && pairs && tg->indices && tg->deltas ? proto__stream_get(c, t, list, tg->count, 3, val) : PROTO_ENOMEM;
  if (rc == 0) {
    /* Ranks order the stream; a target lists its vertices ascending. */
    for (size_t i = 0; i < k; i++) pairs[i] = (proto_key_at){list[i], (uint32_t)i};
    proto__sort_keys(pairs, pairs + k, k, t->vertex_count);
    for (size_t i = 0; i < k && rc == 0; i++) {
      tg->indices[i] = pairs[i].key;
      for (int a = 0; a < 3; a++) {
        uint32_t u = val[3 * (size_t)pairs[i].at + a];
        int32_t d = (int32_t)u;
        if (step > 0 && (d >= (int32_t)GRID_MAX || d <= -(int32_t)GRID_MAX)) rc = PROTO_EINVAL;
        float x = step > 0 ? (float)d * step : bits_f32(u);
        if (rc == 0 && !isfinite(x)) rc = PROTO_ENONFINITE;
        tg->deltas[3 * i + a] = x;
      }
    }
  }
  free(list);
  free(val);
  free(pairs);
  if (rc) proto_target2_free(tg);
  return rc;
}

/* Positions or UVs from their stream: p < 2^24 on a grid (UVs below 65536), finite either way. */
static int get_attribute(proto_cur *c, proto_trav *t, int lanes, const float *origin, const float *step, int lossless,
                         uint32_t qmax, float **out) {
  size_t nv = t->vertex_count;
  uint32_t *val = malloc(sizeof(uint32_t) * (size_t)lanes * (nv + 1));
  float *a = malloc(sizeof(float) * (size_t)lanes * (nv + 1));
  int rc = val && a ? proto__stream_get(c, t, NULL, (uint32_t)nv, lanes, val) : PROTO_ENOMEM;
  int done = 0;
  if (rc == 0 && !lossless && lanes == 3) {
    /* The common case (positions on a grid) with its lanes unrolled and its checks as flags
     * (the loop below takes a branch per lane); where one fails, the loop below finds the first
     * failure, as it would alone. */
    uint32_t over = 0, finite = 1;
    for (size_t i = 0; i < nv; i++) {
      const uint32_t *u = val + 3 * i;
      float *x = a + 3 * (size_t)t->order[i];
      over |= (u[0] > qmax) | (u[1] > qmax) | (u[2] > qmax);
      x[0] = origin[0] + (float)u[0] * step[0], x[1] = origin[1] + (float)u[1] * step[1];
      x[2] = origin[2] + (float)u[2] * step[2];
      finite &= isfinite(x[0]) & isfinite(x[1]) & isfinite(x[2]);
    }
    done = !over && finite;
  }
  for (size_t i = 0; rc == 0 && !done && i < nv; i++)
    for (int l = 0; l < lanes && rc == 0; l++) {
      uint32_t u = val[(size_t)lanes * i + l];
      if (!lossless && u > qmax) rc = PROTO_EINVAL;
      float x = lossless ? bits_f32(u) : origin[l] + (float)u * step[l];
      if (rc == 0 && !isfinite(x)) rc = PROTO_ENONFINITE;
      a[(size_t)lanes * t->order[i] + l] = x;
    }
  free(val);
  if (rc) {
    free(a);
    return rc;
  }
  *out = a;
  return 0;
}

static int get_head(proto_cur *c, const proto_limits *l, proto_snapshot2 *s) {
  uint8_t flags, shift;
  uint16_t reserved;
  CHECK(proto__get_u32(c, &s->vertex_count));
  CHECK(proto__get_u32(c, &s->triangle_count));
  CHECK(proto__get_u32(c, &s->target_count));
  CHECK(proto__get_f32(c, &s->offset_quantum));
  CHECK(proto__get_u8(c, &flags));
  CHECK(proto__get_u8(c, &shift));
  CHECK(proto__get_u16(c, &reserved));
  proto_grid2 *g = &s->grid;
  for (int i = 0; i < 3; i++) CHECK(proto__get_f32(c, &g->origin[i]));
  for (int i = 0; i < 2; i++) CHECK(proto__get_f32(c, &g->uv_origin[i]));
  for (int i = 0; i < 2; i++) CHECK(proto__get_f32(c, &g->uv_step[i]));
  if (s->vertex_count > l->max_vertices || s->triangle_count > l->max_triangles ||
      s->target_count > PROTO_MAX_TARGETS)
    return PROTO_ETOOBIG;
  int lossless = (flags & SNAP2_LOSSLESS) != 0;
  s->has_uvs = (flags & SNAP2_HAS_UVS) != 0;
  g->entropy = (flags & SNAP2_ENTROPY) != 0;
  if (!(s->offset_quantum > 0) || (flags & ~(SNAP2_HAS_UVS | SNAP2_LOSSLESS | SNAP2_ENTROPY)) || reserved ||
      shift > PROTO_MAX_SHIFT || lossless != (shift == 0))
    return PROTO_EINVAL;
  g->quantum = s->offset_quantum;
  g->shift = shift;
  g->step = shift ? ldexpf(s->offset_quantum, shift) : 0.0f;
  if (shift && !isfinite(g->step)) return PROTO_ENONFINITE;
  int uv_grid = s->has_uvs && !lossless;
  for (int i = 0; i < 3; i++)
    if (lossless && g->origin[i] != 0) return PROTO_EINVAL;
  for (int i = 0; i < 2; i++) {
    if (uv_grid ? !(g->uv_step[i] > 0) : (g->uv_step[i] != 0 || g->uv_origin[i] != 0)) return PROTO_EINVAL;
  }
  return 0;
}

int proto_decode_snapshot2(const uint8_t *p, size_t n, const proto_limits *limits, proto_snapshot2 *s,
                           proto_trav *t) {
  proto_limits l;
  proto__limits(limits, &l);
  proto_cur c = {p, p + n};
  memset(s, 0, sizeof(*s));
  memset(t, 0, sizeof(*t));
  int rc = get_head(&c, &l, s);
  uint32_t ilen = 0;
  const uint8_t *ib = NULL;
  size_t ni = 3 * (size_t)s->triangle_count;
  if (rc == 0 && s->grid.entropy) {
    /* The triangles and the traversal together (proto_tri.c). */
    rc = proto__triangles_entropy_get(&c, s->triangle_count, s->vertex_count, &s->triangles, t);
  } else if (rc == 0) {
    rc = proto__get_u32(&c, &ilen);
    if (rc == 0) rc = proto__get(&c, ilen, &ib);
    /* meshoptimizer's index codec spends a byte per triangle plus 17: check before allocating. */
    if (rc == 0 && (ni ? ilen < s->triangle_count + 17u : ilen != 0)) rc = PROTO_ETRUNCATED;
    if (rc == 0) {
      s->triangles = malloc(sizeof(uint32_t) * (ni + 1));
      rc = !s->triangles ? PROTO_ENOMEM : ni && meshopt_decodeIndexBuffer(s->triangles, ni, 4, ib, ilen) ? PROTO_EINVAL : 0;
    }
    if (rc == 0) rc = proto_trav_init(t, s->triangles, s->triangle_count, s->vertex_count); /* checks indices < V */
  }
  int lossless = s->grid.shift == 0;
  float step3[3] = {s->grid.step, s->grid.step, s->grid.step};
  if (rc == 0) rc = get_attribute(&c, t, 3, s->grid.origin, step3, lossless, GRID_MAX - 1, &s->positions);
  if (rc == 0 && s->has_uvs) rc = get_attribute(&c, t, 2, s->grid.uv_origin, s->grid.uv_step, lossless, 65535, &s->uvs);
  if (rc == 0) {
    s->targets = calloc((size_t)s->target_count + 1, sizeof(*s->targets));
    if (!s->targets) rc = PROTO_ENOMEM;
  }
  uint64_t budget = l.max_target_entries;
  for (uint32_t i = 0; rc == 0 && i < s->target_count; i++) {
    rc = get_target2(&c, t, &s->targets[i], s->grid.entropy ? s->targets : NULL, i, &budget);
    if (rc == 0) rc = proto__check_drivers(s->targets[i].drivers, s->targets[i].driver_count, i, s->target_count);
  }
  const uint8_t *w = NULL;
  if (rc == 0) rc = proto__get(&c, 4 * (size_t)s->target_count, &w);
  if (rc == 0) {
    s->weights = malloc(sizeof(float) * ((size_t)s->target_count + 1));
    if (!s->weights) rc = PROTO_ENOMEM;
  }
  for (uint32_t i = 0; rc == 0 && i < s->target_count; i++) {
    s->weights[i] = proto_load_f32(w + 4 * (size_t)i);
    if (!isfinite(s->weights[i])) rc = PROTO_ENONFINITE;
  }
  if (rc == 0) rc = get_offsets2(&c, t, &s->offsets);
  if (rc == 0 && c.at != c.end) rc = PROTO_ETRAILING;
  if (rc) {
    proto_snapshot2_free(s);
    proto_trav_fini(t);
  }
  return rc;
}

int proto_decode_delta2(const uint8_t *p, size_t n, proto_trav *t, proto_offsets2 *o) {
  proto_cur c = {p, p + n};
  CHECK(get_offsets2(&c, t, o));
  if (c.at != c.end) {
    proto_offsets2_free(o);
    return PROTO_ETRAILING;
  }
  return 0;
}

int proto_decode_target_add2(const uint8_t *p, size_t n, proto_trav *t, uint32_t *index, float *weight,
                             proto_target2 *target) {
  proto_cur c = {p, p + n};
  memset(target, 0, sizeof(*target));
  CHECK(proto__get_u32(&c, index));
  CHECK(proto__get_f32(&c, weight));
  if (*index >= PROTO_MAX_TARGETS) return PROTO_EINVAL;
  uint64_t budget = t->vertex_count; /* one target: at most every vertex */
  CHECK(get_target2(&c, t, target, NULL, *index, &budget));
  int rc = proto__check_drivers(target->drivers, target->driver_count, *index, *index);
  if (rc == 0 && c.at != c.end) rc = PROTO_ETRAILING;
  if (rc) proto_target2_free(target);
  return rc;
}
