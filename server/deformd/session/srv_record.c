/*
 * srv_record.c — operation records and checkpoints as bytes: what the store keeps of a session.
 *
 * An operation record is what srv_session_apply() was given, compact enough for a log that
 * grows with every drag: sculpt offsets are kept as the change of each quantised offset (after
 * minus before: the log is replayed in order, so a record may rely on the state before it), in
 * three planes of zigzag varints after the varint gaps between vertex indices — the protocol's
 * quantised, delta-coded DELTA idea, sized for a log (docs/performance.md has the bytes per
 * changed vertex). Weights keep their exact float32 values, new targets their exact deltas.
 * Every record is replayed through srv_session_check() and srv_session_apply(), the code that
 * applied it the first time, so a replay is bit-identical.
 *
 * A checkpoint is a session's whole state at a version: the targets added since import, every
 * target's settings and weight, every non-zero offset. Restart loads the newest checkpoint and
 * replays the records after it. Loading one is the one write of session state outside
 * srv_session_apply(): into a fresh session nobody sees yet (invariant 5 of docs/architecture.md,
 * its exception; srv_session_op.c says why).
 *
 * A clip record keeps what a session's clip gained after import: a recording's frames, a
 * compression's per-frame weights and report.
 *
 * DOES NOT read or write the store (srv_store.c) or keep undo history (srv_history.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "proto.h"
#include "mesh.h"
#include "srv_record.h"
#include "srv_bytes.h"
#include "srv_error.h"
#include "srv_assert.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_session_wire.h"
#include "srv_anim.h"

#define CHECKPOINT_FORMAT 1

/* ---- bytes: srv_bytes.h's varints and floats, a bounds-checked cursor --------------------------- */

typedef srv_bytes_cur cur;

/* n ascending indices below `limit` as varint gaps. Returns a malloc'ed array or NULL (bad). */
static uint32_t *get_indices(cur *c, uint64_t n, uint32_t limit) {
  if (n > limit || (uint64_t)(c->end - c->p) < n) { /* each gap takes a byte at least */
    c->bad = 1;
    return NULL;
  }
  uint32_t *idx = malloc(sizeof(uint32_t) * (n + 1));
  if (!idx) {
    c->bad = 1;
    return NULL;
  }
  uint64_t at = 0;
  for (uint64_t i = 0; i < n; i++) {
    at += srv_bytes_get_varint(c) + (i ? 1 : 0);
    if (c->bad || at >= limit) {
      c->bad = 1;
      free(idx);
      return NULL;
    }
    idx[i] = (uint32_t)at;
  }
  return idx;
}

static void put_indices(proto_buf *b, const uint32_t *idx, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) srv_bytes_varint(b, i ? (uint64_t)idx[i] - idx[i - 1] - 1 : idx[i]);
}

static void put_target(proto_buf *b, const mesh_target *t) {
  srv_bytes_str(b, t->name);
  srv_bytes_f32(b, t->default_weight);
  srv_bytes_varint(b, t->count);
  put_indices(b, t->indices, t->count);
  for (size_t i = 0; i < 3 * (size_t)t->count; i++) srv_bytes_f32(b, t->deltas[i]);
}

/* ---- operation records ------------------------------------------------------------------------ */

int srv_record_encode_op(const srv_session *s, const srv_op *op, const srv_before *before, proto_buf *b,
                         uint32_t *changed) {
  srv_bytes_u8(b, (uint8_t)op->kind);
  *changed = op->count;
  switch (op->kind) {
    case SRV_OP_SET_WEIGHTS:
      srv_bytes_varint(b, op->count);
      for (uint32_t i = 0; i < op->count; i++) {
        srv_bytes_varint(b, op->indices[i]);
        srv_bytes_f32(b, op->values[i]);
      }
      break;
    case SRV_OP_SET_WEIGHTS_QRUN:
      srv_bytes_varint(b, op->first);
      srv_bytes_varint(b, op->count);
      srv_bytes_f32(b, op->wscale);
      for (uint32_t i = 0; i < op->count; i++) srv_bytes_zigzag(b, op->wq[i]);
      break;
    case SRV_OP_SET_OFFSETS:
      srv_bytes_varint(b, op->count);
      put_indices(b, op->indices, op->count);
      /* Planes: every x change, then every y, then every z (neighbours move alike). */
      for (int c = 0; c < 3; c++)
        for (uint32_t i = 0; i < op->count; i++)
          srv_bytes_zigzag(b, (int64_t)op->q[3 * (size_t)i + c] - before->q[3 * (size_t)i + c]);
      break;
    case SRV_OP_ADD_TARGET:
      srv_bytes_str(b, op->name);
      *changed = s->mesh->target_count ? s->mesh->targets[s->mesh->target_count - 1].count : 0;
      break;
    case SRV_OP_SET_TARGET_META: {
      const srv_target *m = op->meta;
      srv_bytes_varint(b, op->indices[0]);
      srv_bytes_f32(b, m->min);
      srv_bytes_f32(b, m->max);
      srv_bytes_u8(b, m->muted ? 1 : 0);
      srv_bytes_u8(b, m->driver_count);
      for (uint32_t i = 0; i < m->driver_count; i++) srv_bytes_varint(b, m->drivers[i]);
      break;
    }
    case SRV_OP_ADD_TARGETS:
      srv_bytes_varint(b, op->count);
      for (uint32_t i = 0; i < op->count; i++) {
        const srv_new_target *t = &op->added[i];
        mesh_target mt = {(char *)t->name, 0.0f, t->count, (uint32_t *)t->indices, (float *)t->deltas};
        put_target(b, &mt);
        srv_bytes_f32(b, t->weight);
        srv_bytes_f32(b, t->min);
        srv_bytes_f32(b, t->max);
      }
      break;
  }
  return b->failed ? SRV_EINTERNAL : 0;
}

void srv_record_op_fini(srv_record_op *r) {
  free(r->indices);
  free(r->values);
  free(r->q);
  free(r->wq);
  free(r->name);
  for (uint32_t i = 0; r->added && i < r->op.count; i++) {
    free((char *)r->added[i].name);
    free((uint32_t *)r->added[i].indices);
    free((float *)r->added[i].deltas);
  }
  free(r->added);
  memset(r, 0, sizeof(*r));
}

int srv_record_decode_op(const srv_session *s, const uint8_t *p, size_t n, srv_record_op *r, char *err,
                         size_t errlen) {
  memset(r, 0, sizeof(*r));
  cur c = {p, p + n, 0};
  srv_op *op = &r->op;
  op->kind = (srv_op_kind)srv_bytes_get_u8(&c);
  uint32_t nv = s->mesh->vertex_count, nt = s->mesh->target_count;
  switch (op->kind) {
    case SRV_OP_SET_WEIGHTS: {
      uint64_t k = srv_bytes_get_varint(&c);
      if (c.bad || k > nt) goto bad;
      op->count = (uint32_t)k;
      r->indices = malloc(sizeof(uint32_t) * (k + 1));
      r->values = malloc(sizeof(float) * (k + 1));
      if (!r->indices || !r->values) goto bad;
      for (uint32_t i = 0; i < op->count; i++) {
        uint64_t t = srv_bytes_get_varint(&c);
        r->indices[i] = t < nt ? (uint32_t)t : 0;
        if (t >= nt) c.bad = 1;
        r->values[i] = srv_bytes_get_f32(&c);
      }
      op->indices = r->indices;
      op->values = r->values;
      break;
    }
    case SRV_OP_SET_WEIGHTS_QRUN: {
      uint64_t first = srv_bytes_get_varint(&c), k = srv_bytes_get_varint(&c);
      if (c.bad || first > nt || k > nt - first) goto bad;
      op->first = (uint32_t)first;
      op->count = (uint32_t)k;
      op->wscale = srv_bytes_get_f32(&c);
      r->wq = malloc(sizeof(int16_t) * (k + 1));
      if (!r->wq) goto bad;
      for (uint32_t i = 0; i < op->count; i++) {
        int64_t q = srv_bytes_get_zigzag(&c);
        if (q < INT16_MIN || q > INT16_MAX) c.bad = 1;
        r->wq[i] = (int16_t)q;
      }
      op->wq = r->wq;
      break;
    }
    case SRV_OP_SET_OFFSETS: {
      uint64_t k = srv_bytes_get_varint(&c);
      if (c.bad) goto bad;
      r->indices = get_indices(&c, k, nv);
      r->q = malloc(sizeof(int32_t) * 3 * (k + 1));
      if (c.bad || !r->indices || !r->q) goto bad;
      op->count = (uint32_t)k;
      for (int d = 0; d < 3; d++)
        for (uint32_t i = 0; i < op->count; i++) {
          int64_t v = (int64_t)s->offsets[3 * (size_t)r->indices[i] + d] + srv_bytes_get_zigzag(&c);
          if (v < -(1 << 30) || v > (1 << 30)) c.bad = 1;
          r->q[3 * (size_t)i + d] = (int32_t)v;
        }
      op->indices = r->indices;
      op->q = r->q;
      break;
    }
    case SRV_OP_ADD_TARGET:
      r->name = srv_bytes_get_str(&c);
      op->name = r->name;
      break;
    case SRV_OP_SET_TARGET_META: {
      uint64_t t = srv_bytes_get_varint(&c);
      if (c.bad || t >= nt) goto bad;
      r->one_index = (uint32_t)t;
      r->meta = s->targets[t];
      r->meta.min = srv_bytes_get_f32(&c);
      r->meta.max = srv_bytes_get_f32(&c);
      r->meta.muted = srv_bytes_get_u8(&c);
      r->meta.driver_count = srv_bytes_get_u8(&c);
      if (r->meta.driver_count > PROTO_MAX_DRIVERS) goto bad;
      memset(r->meta.drivers, 0, sizeof(r->meta.drivers));
      for (uint32_t i = 0; i < r->meta.driver_count; i++) {
        uint64_t d = srv_bytes_get_varint(&c);
        if (d >= nt) c.bad = 1;
        r->meta.drivers[i] = (uint32_t)d;
      }
      op->count = 1;
      op->indices = &r->one_index;
      op->meta = &r->meta;
      break;
    }
    case SRV_OP_ADD_TARGETS: {
      uint64_t k = srv_bytes_get_varint(&c);
      if (c.bad || k > PROTO_MAX_TARGETS || (uint64_t)(c.end - c.p) < k) goto bad;
      r->added = calloc(k + 1, sizeof(srv_new_target));
      if (!r->added) goto bad;
      op->count = (uint32_t)k;
      for (uint32_t i = 0; i < op->count && !c.bad; i++) {
        srv_new_target *t = &r->added[i];
        t->name = srv_bytes_get_str(&c);
        srv_bytes_get_f32(&c); /* default weight: new targets have 0 */
        uint64_t m = srv_bytes_get_varint(&c);
        if (c.bad) break;
        t->indices = get_indices(&c, m, nv);
        float *d = c.bad || (uint64_t)(c.end - c.p) < 12 * m ? NULL : malloc(sizeof(float) * 3 * (m + 1));
        if (!d) c.bad = 1;
        for (uint64_t j = 0; d && j < 3 * m; j++) d[j] = srv_bytes_get_f32(&c);
        t->deltas = d;
        t->count = (uint32_t)m;
        t->weight = srv_bytes_get_f32(&c);
        t->min = srv_bytes_get_f32(&c);
        t->max = srv_bytes_get_f32(&c);
      }
      op->added = r->added;
      break;
    }
    default:
      goto bad;
  }
  if (c.bad || c.p != c.end) goto bad;
  return 0;
bad:
  snprintf(err, errlen, "a stored operation record does not decode (kind %d, %zu bytes)", (int)op->kind, n);
  srv_record_op_fini(r);
  return SRV_EIO;
}

/* ---- checkpoints ------------------------------------------------------------------------------ */

int srv_record_encode_checkpoint(const srv_session *s, proto_buf *b) {
  const mesh *m = s->mesh;
  srv_bytes_put(b, "DFCK", 4);
  srv_bytes_u8(b, CHECKPOINT_FORMAT);
  srv_bytes_varint(b, s->version);
  srv_bytes_varint(b, s->ops_applied);
  srv_bytes_varint(b, s->base_targets);
  srv_bytes_varint(b, m->target_count);
  for (uint32_t t = s->base_targets; t < m->target_count; t++) {
    put_target(b, &m->targets[t]);
    srv_bytes_varint(b, s->target_version[t]);
  }
  for (uint32_t t = 0; t < m->target_count; t++) {
    const srv_target *st = &s->targets[t];
    srv_bytes_f32(b, st->min);
    srv_bytes_f32(b, st->max);
    srv_bytes_f32(b, st->value);
    srv_bytes_u8(b, st->muted);
    srv_bytes_u8(b, st->driver_count);
    for (uint32_t i = 0; i < st->driver_count; i++) srv_bytes_varint(b, st->drivers[i]);
    srv_bytes_varint(b, st->meta_version);
    srv_bytes_f32(b, s->weights[t]);
    srv_bytes_varint(b, s->weight_version[t]);
  }
  uint32_t n = 0, nv = m->vertex_count;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *q = s->offsets + 3 * (size_t)v;
    n += (q[0] | q[1] | q[2]) != 0;
  }
  srv_bytes_varint(b, n);
  uint32_t last = 0, k = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *q = s->offsets + 3 * (size_t)v;
    if ((q[0] | q[1] | q[2]) == 0) continue;
    srv_bytes_varint(b, k++ ? v - last - 1 : v);
    last = v;
  }
  for (int c = 0; c < 3; c++)
    for (uint32_t v = 0; v < nv; v++) {
      const int32_t *q = s->offsets + 3 * (size_t)v;
      if ((q[0] | q[1] | q[2]) != 0) srv_bytes_zigzag(b, q[c]);
    }
  return b->failed ? SRV_EINTERNAL : 0;
}

int srv_record_load_checkpoint(srv_session *s, const uint8_t *p, size_t n, char *err, size_t errlen) {
  /* Invariant 5's exception holds only for a session fresh from srv_session_create(). */
  SRV_ASSERT(s->version == 0 && s->ops_applied == 0 && s->subscriber_count == 0);
  cur c = {p, p + n, 0};
  int magic_ok = n >= 4 && memcmp(p, "DFCK", 4) == 0;
  c.p += magic_ok ? 4 : 0;
  if (!magic_ok || srv_bytes_get_u8(&c) != CHECKPOINT_FORMAT) {
    snprintf(err, errlen, "a stored checkpoint has an unknown format");
    return SRV_EIO;
  }
  mesh *m = s->mesh;
  uint64_t version = srv_bytes_get_varint(&c), ops = srv_bytes_get_varint(&c), base = srv_bytes_get_varint(&c), count = srv_bytes_get_varint(&c);
  if (c.bad || base != s->base_targets || base != m->target_count || count < base || count > PROTO_MAX_TARGETS)
    goto bad;
  for (uint64_t t = base; t < count && !c.bad; t++) {
    char *name = srv_bytes_get_str(&c);
    srv_bytes_get_f32(&c); /* added targets start at default 0 */
    uint64_t k = srv_bytes_get_varint(&c);
    uint32_t *idx = c.bad ? NULL : get_indices(&c, k, m->vertex_count);
    float *d = c.bad || (uint64_t)(c.end - c.p) < 12 * k ? NULL : malloc(sizeof(float) * 3 * (k + 1));
    for (uint64_t j = 0; d && j < 3 * k; j++) d[j] = srv_bytes_get_f32(&c);
    uint64_t tv = srv_bytes_get_varint(&c);
    srv_new_target nt = {name, (uint32_t)k, idx, d, 0.0f, 0.0f, 1.0f};
    if (!name || !idx || !d || c.bad || srv_session_append_target(s, &nt, tv) != 0) c.bad = 1;
    free(name);
    free(idx);
    free(d);
  }
  for (uint32_t t = 0; t < count && !c.bad; t++) {
    srv_target *st = &s->targets[t];
    st->min = srv_bytes_get_f32(&c);
    st->max = srv_bytes_get_f32(&c);
    st->value = srv_bytes_get_f32(&c);
    st->muted = srv_bytes_get_u8(&c);
    st->driver_count = srv_bytes_get_u8(&c);
    if (st->driver_count > PROTO_MAX_DRIVERS) c.bad = 1;
    for (uint32_t i = 0; i < st->driver_count && !c.bad; i++) {
      uint64_t d = srv_bytes_get_varint(&c);
      if (d >= count) c.bad = 1;
      st->drivers[i] = (uint32_t)d;
    }
    st->meta_version = srv_bytes_get_varint(&c);
    s->weights[t] = srv_bytes_get_f32(&c);
    s->weight_version[t] = srv_bytes_get_varint(&c);
    if (s->weight_version[t] > version || st->meta_version > version) c.bad = 1;
  }
  uint64_t k = srv_bytes_get_varint(&c);
  uint32_t *idx = c.bad ? NULL : get_indices(&c, k, m->vertex_count);
  if (!idx) goto bad;
  memset(s->offsets, 0, sizeof(int32_t) * 3 * (size_t)m->vertex_count);
  for (int d = 0; d < 3; d++)
    for (uint64_t i = 0; i < k; i++) {
      int64_t q = srv_bytes_get_zigzag(&c);
      if (q < -(1 << 30) || q > (1 << 30)) c.bad = 1;
      s->offsets[3 * (size_t)idx[i] + d] = (int32_t)q;
    }
  free(idx);
  if (c.bad || c.p != c.end) goto bad;
  /* Changes before the checkpoint are as old as it: nobody who joins now was sent less. */
  for (uint32_t blk = 0; blk <= (m->vertex_count >> SRV_BLOCK_SHIFT); blk++) s->block_version[blk] = version;
  for (uint32_t v = 0; v < m->vertex_count; v++) s->vertex_version[v] = version;
  for (uint32_t t = base; t < count; t++)
    if (s->target_version[t] > version) goto bad;
  s->version = version;
  s->ops_applied = ops;
  for (uint32_t t = 0; t < count; t++)
    if (srv_session_encode_target(s, t) != 0) goto bad; /* settings changed the pieces */
  return 0;
bad:
  snprintf(err, errlen, "a stored checkpoint does not decode (%zu bytes)", n);
  return SRV_EIO;
}

/* ---- clips -------------------------------------------------------------------------------------- */

static void put_offsets_sparse(proto_buf *b, const int32_t *q, uint32_t nv) {
  uint32_t n = 0, last = 0, k = 0;
  for (uint32_t v = 0; v < nv; v++) n += (q[3 * (size_t)v] | q[3 * (size_t)v + 1] | q[3 * (size_t)v + 2]) != 0;
  srv_bytes_varint(b, n);
  for (uint32_t v = 0; v < nv; v++) {
    if ((q[3 * (size_t)v] | q[3 * (size_t)v + 1] | q[3 * (size_t)v + 2]) == 0) continue;
    srv_bytes_varint(b, k++ ? v - last - 1 : v);
    last = v;
  }
  for (int c = 0; c < 3; c++)
    for (uint32_t v = 0; v < nv; v++)
      if ((q[3 * (size_t)v] | q[3 * (size_t)v + 1] | q[3 * (size_t)v + 2]) != 0) srv_bytes_zigzag(b, q[3 * (size_t)v + c]);
}

/* Reads what put_offsets_sparse wrote into q (3 × nv, zeroed first). */
static void get_offsets_sparse(cur *c, int32_t *q, uint32_t nv) {
  uint64_t n = srv_bytes_get_varint(c);
  uint32_t *idx = c->bad ? NULL : get_indices(c, n, nv);
  if (!idx) {
    c->bad = 1;
    return;
  }
  memset(q, 0, sizeof(int32_t) * 3 * (size_t)nv);
  for (int d = 0; d < 3; d++)
    for (uint64_t i = 0; i < n; i++) {
      int64_t v = srv_bytes_get_zigzag(c);
      if (v < -(1 << 30) || v > (1 << 30)) c->bad = 1;
      q[3 * (size_t)idx[i] + d] = (int32_t)v;
    }
  free(idx);
}

int srv_record_encode_clip(const srv_session *s, const srv_clip *c, proto_buf *b) {
  uint32_t nv = s->mesh->vertex_count;
  srv_bytes_u8(b, 1);
  srv_bytes_u8(b, (uint8_t)c->kind);
  srv_bytes_f32(b, c->fps);
  srv_bytes_varint(b, c->frame_count);
  if (c->kind == CLIP_RECORDED) {
    srv_bytes_varint(b, c->rec_target_count);
    for (uint32_t f = 0; f < c->frame_count; f++) {
      const rec_frame *r = &c->rec[f];
      srv_bytes_varint(b, r->target_count);
      for (uint32_t t = 0; t < r->target_count; t++) srv_bytes_f32(b, r->weights[t]);
      int same = f > 0 && c->rec[f - 1].offsets == r->offsets; /* shared until they changed */
      srv_bytes_u8(b, (uint8_t)same);
      if (!same) put_offsets_sparse(b, r->offsets->q, nv);
    }
  }
  srv_bytes_u8(b, (uint8_t)c->compressed);
  if (c->compressed) {
    srv_bytes_varint(b, c->mean_target);
    srv_bytes_varint(b, c->first_component);
    srv_bytes_varint(b, c->components);
    for (size_t i = 0; i < (size_t)c->frame_count * c->components; i++) srv_bytes_f32(b, c->frame_weights[i]);
    srv_bytes_put(b, c->frame_narrow, c->frame_count);
    char *report = c->report ? cJSON_PrintUnformatted(c->report) : NULL;
    srv_bytes_varint(b, report ? strlen(report) : 0);
    if (report) srv_bytes_put(b, report, strlen(report));
    free(report);
  }
  return b->failed ? SRV_EINTERNAL : 0;
}

int srv_record_load_clip(srv_session *s, const char *name, const uint8_t *p, size_t n, char *err, size_t errlen) {
  cur c = {p, p + n, 0};
  const mesh *m = s->mesh;
  uint32_t nv = m->vertex_count;
  srv_anim *a = s->anim;
  srv_clip *clip = NULL, *made = NULL;
  if (srv_bytes_get_u8(&c) != 1) goto bad;
  int kind = srv_bytes_get_u8(&c);
  float fps = srv_bytes_get_f32(&c);
  uint64_t frames = srv_bytes_get_varint(&c);
  if (c.bad || frames > 100000000u) goto bad;
  if (kind == CLIP_RECORDED) {
    made = calloc(1, sizeof(*made));
    if (!made || !(made->name = strdup(name))) goto bad;
    made->kind = CLIP_RECORDED;
    made->fps = fps;
    uint64_t tc = srv_bytes_get_varint(&c);
    if (c.bad || tc > m->target_count || (uint64_t)(c.end - c.p) < frames) goto bad;
    made->rec_target_count = (uint32_t)tc;
    made->rec_targets = malloc(sizeof(mesh_target) * (tc + 1));
    made->rec = calloc(frames + 1, sizeof(rec_frame));
    if (!made->rec_targets || !made->rec) goto bad;
    if (tc) memcpy(made->rec_targets, m->targets, sizeof(mesh_target) * tc); /* shallow: they never change */
    for (uint64_t f = 0; f < frames && !c.bad; f++) {
      rec_frame *r = &made->rec[f];
      uint64_t wt = srv_bytes_get_varint(&c);
      if (c.bad || wt > tc || (uint64_t)(c.end - c.p) < 4 * wt) goto bad;
      r->target_count = (uint32_t)wt;
      r->weights = malloc(sizeof(float) * (wt + 1));
      if (!r->weights) goto bad;
      made->frame_count = (uint32_t)f + 1; /* frames so far are freed with the clip on failure */
      for (uint64_t t = 0; t < wt; t++) r->weights[t] = srv_bytes_get_f32(&c);
      int same = srv_bytes_get_u8(&c);
      if (same && f > 0) {
        r->offsets = made->rec[f - 1].offsets;
        r->offsets->refs++;
      } else {
        anim_q *q = malloc(sizeof(anim_q) + sizeof(int32_t) * 3 * (size_t)nv);
        if (!q) goto bad;
        q->refs = 1;
        r->offsets = q;
        get_offsets_sparse(&c, q->q, nv);
      }
    }
    clip = made;
  } else {
    clip = srv_anim_find_clip(a, name);
    if (!clip || clip->kind != kind || clip->frame_count != frames) {
      snprintf(err, errlen, "stored clip '%s' does not match the session's clip of that name", name);
      return SRV_EIO;
    }
  }
  int compressed = srv_bytes_get_u8(&c);
  if (compressed) {
    uint64_t mean = srv_bytes_get_varint(&c), first = srv_bytes_get_varint(&c), k = srv_bytes_get_varint(&c);
    if (c.bad || mean >= m->target_count || first > m->target_count || k > m->target_count - first ||
        (uint64_t)(c.end - c.p) / 4 < frames * k)
      goto bad;
    float *fw = malloc(sizeof(float) * (frames * k + 1));
    uint8_t *narrow = malloc(frames + 1);
    if (!fw || !narrow || (uint64_t)(c.end - c.p) < frames) {
      free(fw);
      free(narrow);
      goto bad;
    }
    for (uint64_t i = 0; i < frames * k; i++) fw[i] = srv_bytes_get_f32(&c);
    memcpy(narrow, c.p, frames);
    c.p += frames;
    uint64_t rl = srv_bytes_get_varint(&c);
    cJSON *report = NULL;
    if (!c.bad && rl <= (uint64_t)(c.end - c.p)) {
      report = cJSON_ParseWithLength((const char *)c.p, rl);
      c.p += rl;
    }
    if (c.bad || !report) {
      free(fw);
      free(narrow);
      cJSON_Delete(report);
      goto bad;
    }
    free(clip->frame_weights);
    free(clip->frame_narrow);
    cJSON_Delete(clip->report);
    clip->frame_weights = fw;
    clip->frame_narrow = narrow;
    clip->report = report;
    clip->mean_target = (uint32_t)mean;
    clip->first_component = (uint32_t)first;
    clip->components = (uint32_t)k;
    clip->compressed = 1;
  }
  if (c.bad || c.p != c.end) goto bad;
  if (made) srv_anim_add_clip(a, made);
  return 0;
bad:
  if (made) srv_anim_clip_free(made);
  snprintf(err, errlen, "stored clip '%s' does not decode (%zu bytes)", name, n);
  return SRV_EIO;
}
