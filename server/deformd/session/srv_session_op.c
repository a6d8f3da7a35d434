/*
 * srv_session_op.c — a session's operation records: validated (srv_session_check), then applied
 * (srv_session_apply), the only way a live session's state changes (invariant 5 of
 * docs/architecture.md).
 *
 * Invariants (numbered as in docs/architecture.md):
 *   2 every applied op bumps `version` by one and stamps what it changed (a target's weight,
 *     settings or deltas, a block of 64 vertices) with the new version, so "everything changed
 *     since v" is cheap; versions only grow (asserted in debug builds);
 *   1, 3 each applied op is encoded once per codec into frames carrying absolute values, and the
 *     same bytes go to every subscriber (srv_fanout_publish);
 *   5 srv_session_apply() is the one mutator, with one exception: srv_record_load_checkpoint()
 *     writes a stored checkpoint's state (weights, target settings, added targets, offsets, their
 *     version stamps and `version` itself) directly into a session fresh from
 *     srv_session_create() — version 0, no op applied, no subscribers (asserted), not yet in the
 *     server's table — on the thread that restores it, before anyone can see it. A checkpoint is
 *     the state earlier ops produced, with their stamps. Applied as ops, it would come out at
 *     another version (one per op, where the store's records continue from the checkpoint's)
 *     with every weight and target stamped anew (changing what catch-ups and late joiners are
 *     sent); so it is loaded as it was stored, and every op after it is replayed through
 *     srv_session_apply().
 *
 * DOES NOT parse requests (the transports and methods build ops) or do I/O.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "mesh.h"
#include "srv_error.h"
#include "srv_assert.h"
#include "srv_log.h"
#include "srv_frame.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_session_wire.h"
#include "srv_fanout.h"

/* A target's new range, mute flag and drivers. */
static int check_meta(const srv_session *s, uint32_t t, const srv_target *nm, char *err, size_t errlen) {
  const mesh *m = s->mesh;
  if (t >= m->target_count) {
    snprintf(err, errlen, "target index %u out of range (the mesh has %u targets)", t, m->target_count);
    return SRV_ERANGE;
  }
  const char *name = m->targets[t].name;
  if (!isfinite(nm->min) || !isfinite(nm->max) || nm->min < -SRV_WEIGHT_LIMIT || nm->max > SRV_WEIGHT_LIMIT ||
      !(nm->min < nm->max)) {
    snprintf(err, errlen, "range [%g, %g] of '%s': min must be below max, both within [%g, %g]", (double)nm->min,
             (double)nm->max, name, (double)-SRV_WEIGHT_LIMIT, (double)SRV_WEIGHT_LIMIT);
    return SRV_ERANGE;
  }
  if (nm->driver_count > PROTO_MAX_DRIVERS) {
    snprintf(err, errlen, "'%s' has %u drivers; a combination target has at most %d", name, nm->driver_count,
             PROTO_MAX_DRIVERS);
    return SRV_ERANGE;
  }
  for (uint32_t i = 0; i < nm->driver_count; i++) {
    uint32_t d = nm->drivers[i];
    if (d >= m->target_count || d == t) {
      snprintf(err, errlen, "'%s' cannot be driven by %s", name, d == t ? "itself" : "a target that does not exist");
      return SRV_ERANGE;
    }
    if (s->targets[d].driver_count) {
      snprintf(err, errlen, "'%s' cannot be driven by '%s', which is a combination target itself", name,
               m->targets[d].name);
      return SRV_ERANGE;
    }
    for (uint32_t j = 0; j < i; j++)
      if (nm->drivers[j] == d) {
        snprintf(err, errlen, "'%s' names driver '%s' twice", name, m->targets[d].name);
        return SRV_ERANGE;
      }
  }
  if (nm->driver_count)
    for (uint32_t u = 0; u < m->target_count; u++)
      for (uint32_t i = 0; i < s->targets[u].driver_count; i++)
        if (s->targets[u].drivers[i] == t) {
          snprintf(err, errlen, "'%s' drives the combination target '%s', so it cannot be one itself", name,
                   m->targets[u].name);
          return SRV_ERANGE;
        }
  return 0;
}

/* Targets to append: names new and distinct, ranges valid, vertices ascending and in range,
 * deltas finite, and room for them. */
static int check_new_targets(const srv_session *s, const srv_new_target *nt, uint32_t n, char *err, size_t errlen) {
  const mesh *m = s->mesh;
  if (n > PROTO_MAX_TARGETS - m->target_count) {
    snprintf(err, errlen, "session '%s' has %u targets; %u more would pass the limit of %d", s->name,
             m->target_count, n, PROTO_MAX_TARGETS);
    return SRV_ERANGE;
  }
  for (uint32_t i = 0; i < n; i++) {
    const srv_new_target *t = &nt[i];
    size_t len = t->name ? strlen(t->name) : 0;
    if (len == 0 || len > PROTO_MAX_NAME) {
      snprintf(err, errlen, "a target name must have 1 to %d bytes", PROTO_MAX_NAME);
      return SRV_ERANGE;
    }
    int clash = mesh_find_target(m, t->name) >= 0;
    for (uint32_t j = 0; j < i && !clash; j++) clash = strcmp(nt[j].name, t->name) == 0;
    if (clash) {
      snprintf(err, errlen, "session '%s' already has a target called '%s'", s->name, t->name);
      return SRV_ERANGE;
    }
    if (!isfinite(t->min) || !isfinite(t->max) || !(t->min < t->max) || !(t->weight >= t->min && t->weight <= t->max)) {
      snprintf(err, errlen, "target '%s': weight %g and range [%g, %g] do not fit", t->name, (double)t->weight,
               (double)t->min, (double)t->max);
      return SRV_ERANGE;
    }
    for (uint32_t k = 0; k < t->count; k++) {
      if (t->indices[k] >= m->vertex_count || (k && t->indices[k] <= t->indices[k - 1])) {
        snprintf(err, errlen, "target '%s': vertex indices must ascend below %u", t->name, m->vertex_count);
        return SRV_ERANGE;
      }
      for (int c = 0; c < 3; c++)
        if (!isfinite(t->deltas[3 * (size_t)k + c])) {
          snprintf(err, errlen, "target '%s': a delta is not finite", t->name);
          return SRV_ERANGE;
        }
    }
  }
  return 0;
}

int srv_session_check(const srv_session *s, const srv_op *op, char *err, size_t errlen) {
  const mesh *m = s->mesh;
  if (op->kind == SRV_OP_SET_WEIGHTS) {
    for (uint32_t i = 0; i < op->count; i++) {
      uint32_t t = op->indices[i];
      float v = op->values[i];
      if (t >= m->target_count) {
        snprintf(err, errlen, "target index %u out of range (the mesh has %u targets)", t, m->target_count);
        return SRV_ERANGE;
      }
      if (!isfinite(v)) {
        snprintf(err, errlen, "weight of '%s' is not finite", m->targets[t].name);
        return SRV_ERANGE;
      }
      const srv_target *st = &s->targets[t];
      if (st->driver_count) {
        snprintf(err, errlen, "'%s' is a combination target: its weight is the product of its drivers' (%s%s)",
                 m->targets[t].name, m->targets[st->drivers[0]].name, st->driver_count > 1 ? " × …" : "");
        return SRV_ERANGE;
      }
      if (v < st->min || v > st->max) {
        snprintf(err, errlen, "weight %g of '%s' is outside its range [%g, %g]", (double)v,
                 m->targets[t].name, (double)st->min, (double)st->max);
        return SRV_ERANGE;
      }
    }
    return 0;
  }
  if (op->kind == SRV_OP_SET_TARGET_META) return check_meta(s, op->indices[0], op->meta, err, errlen);
  if (op->kind == SRV_OP_ADD_TARGETS) return check_new_targets(s, op->added, op->count, err, errlen);
  if (op->kind == SRV_OP_SET_WEIGHTS_QRUN) {
    if (op->first > m->target_count || op->count > m->target_count - op->first) {
      snprintf(err, errlen, "targets %u..%u out of range (the mesh has %u targets)", op->first,
               op->first + op->count - 1, m->target_count);
      return SRV_ERANGE;
    }
    if (!isfinite(op->wscale) || op->wscale < 0) {
      snprintf(err, errlen, "weight scale %g is not a finite number >= 0", (double)op->wscale);
      return SRV_ERANGE;
    }
    for (uint32_t i = 0; i < op->count; i++) {
      uint32_t t = op->first + i;
      float v = proto_qweight(op->wq[i], op->wscale);
      const srv_target *st = &s->targets[t];
      if (st->driver_count || v < st->min || v > st->max) {
        snprintf(err, errlen, "weight %g of '%s' is %s", (double)v, m->targets[t].name,
                 st->driver_count ? "for a combination target" : "outside its range");
        return SRV_ERANGE;
      }
    }
    return 0;
  }
  if (op->kind == SRV_OP_SET_OFFSETS) {
    for (uint32_t i = 0; i < op->count; i++) {
      if (op->indices[i] >= m->vertex_count) {
        snprintf(err, errlen, "vertex %u out of range (the mesh has %u vertices)", op->indices[i],
                 m->vertex_count);
        return SRV_ERANGE;
      }
      if (i > 0 && op->indices[i] <= op->indices[i - 1]) {
        snprintf(err, errlen, "vertex indices must be strictly ascending (%u after %u)",
                 op->indices[i], op->indices[i - 1]);
        return SRV_ERANGE;
      }
    }
    return 0;
  }
  if (op->kind == SRV_OP_ADD_TARGET) {
    size_t len = op->name ? strlen(op->name) : 0;
    if (len == 0 || len > PROTO_MAX_NAME) {
      snprintf(err, errlen, "a target name must have 1 to %d bytes", PROTO_MAX_NAME);
      return SRV_ERANGE;
    }
    if (mesh_find_target(m, op->name) >= 0) {
      snprintf(err, errlen, "session '%s' already has a target called '%s'", s->name, op->name);
      return SRV_ERANGE;
    }
    if (m->target_count >= PROTO_MAX_TARGETS) {
      snprintf(err, errlen, "session '%s' has the most targets a session can have (%d)", s->name, PROTO_MAX_TARGETS);
      return SRV_ERANGE;
    }
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      const int32_t *q = s->offsets + 3 * (size_t)v;
      if (q[0] | q[1] | q[2]) return 0;
    }
    snprintf(err, errlen, "the sculpt layer of session '%s' is empty: nothing to make a target from", s->name);
    return SRV_ERANGE;
  }
  snprintf(err, errlen, "unknown operation kind %d", (int)op->kind);
  return SRV_ERANGE;
}

/* Appends one target with its state (weight, range) and SNAPSHOT piece. Returns 0 or
 * MESH_ENOMEM with the state unchanged (the arrays may have grown). */
int srv_session_append_target(srv_session *s, const srv_new_target *t, uint64_t version) {
  mesh *m = s->mesh;
  uint32_t nt = m->target_count;
  srv_target *tg = realloc(s->targets, sizeof(*tg) * (nt + 1));
  if (tg) s->targets = tg;
  float *weights = realloc(s->weights, sizeof(float) * (nt + 1));
  if (weights) s->weights = weights;
  uint64_t *wv = realloc(s->weight_version, sizeof(uint64_t) * (nt + 1));
  if (wv) s->weight_version = wv;
  uint64_t *tv = realloc(s->target_version, sizeof(uint64_t) * (nt + 1));
  if (tv) s->target_version = tv;
  if (!tg || !weights || !wv || !tv) return MESH_ENOMEM;
  int rc = mesh_add_target_sparse(m, t->name, t->count, t->indices, t->deltas, 0.0f);
  if (rc) return rc;
  memset(&s->targets[nt], 0, sizeof(s->targets[nt]));
  s->targets[nt].min = t->min;
  s->targets[nt].max = t->max;
  s->targets[nt].value = t->weight;
  s->weights[nt] = t->weight;
  s->weight_version[nt] = version;
  s->target_version[nt] = version;
  rc = srv_session_encode_target(s, nt);
  if (rc) mesh_remove_last_target(m); /* without its snapshot piece it cannot be served */
  return rc;
}

/* ADD_TARGET's state change: the target from the (non-zero) sculpt offsets, appended with
 * weight 1, and those offsets cleared. Returns 0 or MESH_ENOMEM with the state unchanged. */
static int add_target_from_sculpt(srv_session *s, const char *name, uint64_t version) {
  mesh *m = s->mesh;
  uint32_t nv = m->vertex_count, count = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *q = s->offsets + 3 * (size_t)v;
    count += (q[0] | q[1] | q[2]) != 0;
  }
  uint32_t *idx = malloc(sizeof(uint32_t) * (count + 1));
  float *d = malloc(sizeof(float) * 3 * ((size_t)count + 1));
  if (!idx || !d) {
    free(idx);
    free(d);
    return MESH_ENOMEM;
  }
  uint32_t k = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *q = s->offsets + 3 * (size_t)v;
    if ((q[0] | q[1] | q[2]) == 0) continue;
    idx[k] = v;
    for (int c = 0; c < 3; c++) d[3 * (size_t)k + c] = proto_dequantize(q[c], s->offset_quantum);
    k++;
  }
  srv_new_target t = {name, k, idx, d, 1.0f, 0.0f, 1.0f};
  int rc = srv_session_append_target(s, &t, version);
  free(d);
  if (rc == 0)
    for (uint32_t i = 0; i < k; i++) {
      memset(s->offsets + 3 * (size_t)idx[i], 0, sizeof(int32_t) * 3);
      s->block_version[idx[i] >> SRV_BLOCK_SHIFT] = version;
      s->vertex_version[idx[i]] = version;
    }
  free(idx);
  return rc;
}

/* The weight viewers apply for target t (see srv_target). */
static float effective_weight(const srv_session *s, uint32_t t) {
  const srv_target *st = &s->targets[t];
  if (st->muted) return 0.0f;
  if (!st->driver_count) return st->value;
  float w = 1.0f;
  for (uint32_t i = 0; i < st->driver_count; i++) {
    const srv_target *d = &s->targets[st->drivers[i]];
    w *= d->muted ? 0.0f : d->value;
  }
  return w < st->min ? st->min : w > st->max ? st->max : w; /* a product is held to its range too */
}

/* The weights an op changed, in the order a frame lists them: the op's own targets first (in
 * the op's order), then every other target whose weight moved with them (combination targets
 * of changed drivers). Stamps each with `version`. */
typedef struct weight_changes {
  uint32_t count;
  uint32_t *idx;
  float *val;
} weight_changes;

static int settle_weights(srv_session *s, const uint32_t *first, uint32_t nfirst, uint64_t version,
                          weight_changes *wc) {
  uint32_t nt = s->mesh->target_count;
  wc->count = 0;
  wc->idx = malloc(sizeof(uint32_t) * ((size_t)nt + nfirst + 1));
  wc->val = malloc(sizeof(float) * ((size_t)nt + nfirst + 1));
  if (!wc->idx || !wc->val) {
    free(wc->idx);
    free(wc->val);
    return MESH_ENOMEM;
  }
  for (uint32_t i = 0; i < nfirst; i++) {
    uint32_t t = first[i];
    s->weights[t] = effective_weight(s, t);
    s->weight_version[t] = version;
    wc->idx[wc->count] = t;
    wc->val[wc->count++] = s->weights[t];
  }
  for (uint32_t t = 0; t < nt; t++) {
    if (!s->targets[t].driver_count) continue;
    float w = effective_weight(s, t);
    if (memcmp(&w, &s->weights[t], sizeof(w)) == 0) continue;
    s->weights[t] = w;
    s->weight_version[t] = version;
    wc->idx[wc->count] = t;
    wc->val[wc->count++] = w;
  }
  return 0;
}

/* Whether the frames of `op` differ between codecs (offsets and target deltas do; weights and
 * settings travel the same way in every version). */
static int codec_dependent(const srv_op *op) {
  return op->kind == SRV_OP_SET_OFFSETS || op->kind == SRV_OP_ADD_TARGET || op->kind == SRV_OP_ADD_TARGETS;
}

/* Encodes the frames that carry what `op` changed, at `version`, in `codec`. */
static int encode_op(srv_session *s, const srv_op *op, uint64_t version, const weight_changes *wc, uint8_t codec,
                     proto_buf *b) {
  if (op->kind == SRV_OP_ADD_TARGET || op->kind == SRV_OP_ADD_TARGETS) {
    uint32_t n = op->kind == SRV_OP_ADD_TARGET ? 1 : op->count, nt = s->mesh->target_count;
    for (uint32_t t = nt - n; t < nt; t++) {
      /* One change: the version comes with the last frame. */
      int more = t + 1 < nt || op->kind == SRV_OP_ADD_TARGET;
      int rc = srv_session_encode_target_add(s, codec, version, more ? PROTO_FLAG_MORE : 0, t, b);
      if (rc) return rc;
    }
    if (op->kind == SRV_OP_ADD_TARGET) {
      /* The sculpt offsets that moved into the target are now zero: a DELTA says so (a TARGET
       * only adds a target; it never touches the sculpt layer). */
      const mesh_target *tg = &s->mesh->targets[nt - 1];
      int32_t *zero = calloc(3 * ((size_t)tg->count + 1), sizeof(int32_t));
      if (!zero) return PROTO_ENOMEM;
      int rc = srv_session_encode_delta(s, codec, version, 0, tg->count, tg->indices, zero, b);
      free(zero);
      return rc;
    }
    return 0;
  }
  if (op->kind == SRV_OP_SET_WEIGHTS_QRUN && wc->count == op->count) {
    /* Nothing muted or driven moved with the run: the compact form carries it exactly. */
    int plain = 1;
    for (uint32_t i = 0; i < op->count && plain; i++) plain = s->targets[op->first + i].muted == 0;
    /* Every q within -127..127 (an 8-bit quantised frame): one byte each carries it exactly. */
    int narrow = 1;
    for (uint32_t i = 0; i < op->count && narrow; i++) narrow = op->wq[i] >= -127 && op->wq[i] <= 127;
    if (plain && narrow) {
      int8_t *q8 = malloc(op->count + 1);
      if (!q8) return PROTO_ENOMEM;
      for (uint32_t i = 0; i < op->count; i++) q8[i] = (int8_t)op->wq[i];
      int rc = proto_encode_weights_qrun8(b, version, 0, op->first, op->count, q8, op->wscale);
      free(q8);
      return rc;
    }
    if (plain) return proto_encode_weights_qrun(b, version, 0, op->first, op->count, op->wq, op->wscale);
  }
  if (op->kind == SRV_OP_SET_TARGET_META) {
    uint32_t t = op->indices[0];
    const srv_target *st = &s->targets[t];
    int rc = proto_encode_target_meta(b, version, wc->count ? PROTO_FLAG_MORE : 0, t, st->min, st->max,
                                      st->muted ? PROTO_TARGET_MUTED : 0, st->driver_count, st->drivers);
    if (rc || !wc->count) return rc;
  }
  if (op->kind == SRV_OP_SET_WEIGHTS || op->kind == SRV_OP_SET_TARGET_META || op->kind == SRV_OP_SET_WEIGHTS_QRUN) {
    uint32_t nt = s->mesh->target_count;
    /* Dense when most targets changed: 4 bytes each instead of 6. */
    if (wc->count > nt / 2) return proto_encode_weights(b, version, 0, nt, NULL, s->weights);
    return proto_encode_weights(b, version, 0, wc->count, wc->idx, wc->val);
  }
  return srv_session_encode_delta(s, codec, version, 0, op->count, op->indices, op->q, b);
}

static uint64_t apply_state(srv_server *srv, srv_session *s, const srv_op *op) {
  uint64_t version = s->version + 1;
  weight_changes wc = {0, NULL, NULL};
  if (op->kind == SRV_OP_ADD_TARGET) {
    if (add_target_from_sculpt(s, op->name, version) != 0) return 0;
  } else if (op->kind == SRV_OP_ADD_TARGETS) {
    uint32_t before = s->mesh->target_count;
    for (uint32_t i = 0; i < op->count; i++)
      if (srv_session_append_target(s, &op->added[i], version) != 0) {
        while (s->mesh->target_count > before) { /* all or nothing */
          uint32_t t = s->mesh->target_count - 1;
          srv_frame_unref(s->target_parts[t]);
          s->target_parts[t] = NULL;
          mesh_remove_last_target(s->mesh);
        }
        return 0;
      }
  } else if (op->kind == SRV_OP_SET_WEIGHTS_QRUN) {
    uint32_t *idx = malloc(sizeof(uint32_t) * (op->count + 1));
    float *old = malloc(sizeof(float) * (op->count + 1));
    int rc = idx && old ? 0 : MESH_ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < op->count; i++) {
      idx[i] = op->first + i;
      old[i] = s->targets[idx[i]].value;
      s->targets[idx[i]].value = proto_qweight(op->wq[i], op->wscale);
    }
    if (rc == 0) rc = settle_weights(s, idx, op->count, version, &wc);
    if (rc && idx && old)
      for (uint32_t i = 0; i < op->count; i++) s->targets[op->first + i].value = old[i];
    free(idx);
    free(old);
    if (rc) return 0;
  } else if (op->kind == SRV_OP_SET_WEIGHTS) {
    srv_target *saved = malloc(sizeof(*saved) * (op->count + 1));
    if (!saved) return 0;
    for (uint32_t i = 0; i < op->count; i++) {
      saved[i] = s->targets[op->indices[i]];
      s->targets[op->indices[i]].value = op->values[i];
    }
    if (settle_weights(s, op->indices, op->count, version, &wc) != 0) {
      for (uint32_t i = op->count; i-- > 0;) s->targets[op->indices[i]] = saved[i];
      free(saved);
      return 0;
    }
    free(saved);
  } else if (op->kind == SRV_OP_SET_TARGET_META) {
    uint32_t t = op->indices[0];
    srv_target old = s->targets[t], *st = &s->targets[t];
    st->min = op->meta->min;
    st->max = op->meta->max;
    st->muted = op->meta->muted ? 1 : 0;
    st->driver_count = op->meta->driver_count;
    memcpy(st->drivers, op->meta->drivers, sizeof(st->drivers));
    st->meta_version = version;
    /* A value outside the new range moves to its nearest end. */
    st->value = st->value < st->min ? st->min : st->value > st->max ? st->max : st->value;
    float before = s->weights[t];
    if (settle_weights(s, NULL, 0, version, &wc) != 0 || srv_session_encode_target(s, t) != 0) {
      /* Out of memory: the old settings back, and the weights settled again from them. */
      *st = old;
      free(wc.idx);
      free(wc.val);
      if (settle_weights(s, NULL, 0, version, &wc) == 0) free(wc.idx), free(wc.val);
      return 0;
    }
    float after = effective_weight(s, t);
    /* t itself, listed first (a combination target was settled, and listed, already). */
    if (!st->driver_count && memcmp(&before, &after, sizeof(after)) != 0) {
      s->weights[t] = after;
      s->weight_version[t] = version;
      memmove(wc.idx + 1, wc.idx, sizeof(uint32_t) * wc.count);
      memmove(wc.val + 1, wc.val, sizeof(float) * wc.count);
      wc.idx[0] = t;
      wc.val[0] = after;
      wc.count++;
    }
  } else {
    for (uint32_t i = 0; i < op->count; i++) {
      uint32_t v = op->indices[i];
      memcpy(s->offsets + 3 * (size_t)v, op->q + 3 * (size_t)i, sizeof(int32_t) * 3);
      s->block_version[v >> SRV_BLOCK_SHIFT] = version;
      s->vertex_version[v] = version;
    }
  }
  SRV_ASSERT(version == s->version + 1 && version > 0); /* invariant 2: one step up per op */
  s->version = version;
  s->ops_applied++;
  if (s->subscriber_count == 0) {
    free(wc.idx);
    free(wc.val);
    return version;
  }
  /* One frame per codec a class at full rate uses (invariant 3, per class); weights and
   * settings are the same bytes in every codec. Paced classes encode their own updates. */
  srv_frame *frames[SRV_CODECS] = {NULL};
  uint32_t live = srv_fanout_live_codecs(s);
  int rc = 0;
  for (uint8_t c = 0; c < SRV_CODECS && rc == 0; c++) {
    if (!(live & (1u << c))) continue;
    if (!codec_dependent(op)) {
      for (uint8_t d = 0; d < c && !frames[c]; d++)
        if (frames[d]) frames[c] = srv_frame_ref(frames[d]);
      if (frames[c]) continue;
    }
    proto_buf b;
    proto_buf_init(&b);
    rc = encode_op(s, op, version, &wc, c, &b);
    frames[c] = rc == 0 ? srv_frame_from_buf(&b) : NULL;
    if (!frames[c]) {
      proto_buf_fini(&b);
      /* The state changed but the frame could not be built: subscribers fall behind and are
       * caught up from the versions, exactly like a slow reader. */
      srv_log(SRV_LOG_WARN, "session %s: cannot encode version %llu (%s); viewers will catch up",
              s->name, (unsigned long long)version, proto_strerror(rc ? rc : PROTO_ENOMEM));
      rc = 0;
    }
  }
  free(wc.idx);
  free(wc.val);
  srv_fanout_publish(s, frames, version);
  for (uint8_t c = 0; c < SRV_CODECS; c++) srv_frame_unref(frames[c]);
  (void)srv;
  return version;
}

int srv_session_reset(srv_server *srv, srv_session *s, uint32_t author, const uint32_t *vertices,
                      uint32_t count, uint64_t *version, uint32_t *reset, char *err, size_t errlen) {
  uint32_t nv = s->mesh->vertex_count;
  uint8_t *pick = vertices ? calloc(nv + 1, 1) : NULL;
  uint32_t *idx = malloc(sizeof(uint32_t) * (nv + 1));
  int32_t *q = calloc(3 * ((size_t)nv + 1), sizeof(int32_t)); /* zeros */
  int rc = 0;
  if ((vertices && !pick) || !idx || !q) {
    snprintf(err, errlen, "out of memory");
    rc = SRV_EINTERNAL;
    goto out;
  }
  for (uint32_t i = 0; vertices && i < count; i++) {
    if (vertices[i] >= nv) {
      snprintf(err, errlen, "vertex %u out of range (the mesh has %u vertices)", vertices[i], nv);
      rc = SRV_ERANGE;
      goto out;
    }
    pick[vertices[i]] = 1;
  }
  uint32_t k = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *o = s->offsets + 3 * (size_t)v;
    if ((pick && !pick[v]) || (o[0] | o[1] | o[2]) == 0) continue;
    idx[k++] = v;
  }
  srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = author, .cause = SRV_CAUSE_RESET, .count = k, .indices = idx, .q = q};
  *version = k ? srv_session_apply(srv, s, &op) : s->version;
  *reset = k;
out:
  free(pick);
  free(idx);
  free(q);
  return rc;
}


/* What `op` is about to change, as it is now (see srv_before). The arrays live in *mem (one
 * allocation, freed by the caller). Returns 0 or MESH_ENOMEM. */
static int capture_before(const srv_session *s, const srv_op *op, srv_before *b, void **mem) {
  memset(b, 0, sizeof(*b));
  *mem = NULL;
  b->target_count = s->mesh->target_count;
  if (op->kind == SRV_OP_SET_OFFSETS || op->kind == SRV_OP_ADD_TARGET) {
    uint32_t n = op->count;
    if (op->kind == SRV_OP_ADD_TARGET) { /* the vertices whose offsets move into the target */
      n = 0;
      for (uint32_t v = 0; v < s->mesh->vertex_count; v++) {
        const int32_t *q = s->offsets + 3 * (size_t)v;
        n += (q[0] | q[1] | q[2]) != 0;
      }
    }
    int32_t *q = malloc(sizeof(int32_t) * 3 * ((size_t)n + 1));
    if (!q) return MESH_ENOMEM;
    if (op->kind == SRV_OP_SET_OFFSETS) {
      for (uint32_t i = 0; i < n; i++) memcpy(q + 3 * (size_t)i, s->offsets + 3 * (size_t)op->indices[i], sizeof(int32_t) * 3);
    } else {
      uint32_t k = 0;
      for (uint32_t v = 0; v < s->mesh->vertex_count; v++) {
        const int32_t *o = s->offsets + 3 * (size_t)v;
        if ((o[0] | o[1] | o[2]) != 0) memcpy(q + 3 * (size_t)k++, o, sizeof(int32_t) * 3);
      }
    }
    b->q = q;
    *mem = q;
  } else if (op->kind == SRV_OP_SET_WEIGHTS || op->kind == SRV_OP_SET_WEIGHTS_QRUN) {
    float *v = malloc(sizeof(float) * ((size_t)op->count + 1));
    if (!v) return MESH_ENOMEM;
    for (uint32_t i = 0; i < op->count; i++)
      v[i] = s->targets[op->kind == SRV_OP_SET_WEIGHTS ? op->indices[i] : op->first + i].value;
    b->values = v;
    *mem = v;
  } else if (op->kind == SRV_OP_SET_TARGET_META) {
    srv_target *m = malloc(sizeof(*m));
    if (!m) return MESH_ENOMEM;
    *m = s->targets[op->indices[0]];
    b->meta = m;
    *mem = m;
  }
  return 0;
}

uint64_t srv_session_apply(srv_server *srv, srv_session *s, const srv_op *op) {
  int tell = srv && srv->on_applied;
  srv_before before;
  void *mem = NULL;
  if (tell && capture_before(s, op, &before, &mem) != 0) return 0;
  uint64_t version = apply_state(srv, s, op);
  if (version && tell) srv->on_applied(srv, s, op, version, &before);
  free(mem);
  return version;
}
