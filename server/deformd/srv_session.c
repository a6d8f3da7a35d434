/*
 * srv_session.c — a session: one mesh, its live state (weights, sculpt offsets), its version,
 * and the viewers subscribed to it.
 *
 * Invariants:
 *   - state changes only through srv_session_apply() with an operation record;
 *   - every applied op bumps `version` by one and stamps what it changed (a target's weight, a
 *     block of 64 vertices) with the new version, so "everything changed since v" is cheap;
 *   - each applied op is encoded once into one frame carrying absolute values, and the same
 *     bytes go to every subscriber.
 *
 * DOES NOT do I/O or decide how a slow subscriber is treated (srv_stream.c does).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

static void free_parts(srv_session *s) {
  free(s->name);
  mesh_adjacency_fini(&s->adj);
  mesh_topology_fini(&s->topo);
  mesh_destroy(s->mesh);
  free(s->targets);
  free(s->weights);
  free(s->weight_version);
  free(s->offsets);
  free(s->block_version);
  srv_frame_unref(s->mesh_body);
  for (uint32_t t = 0; t < s->target_cap; t++) srv_frame_unref(s->target_parts[t]);
  free(s->target_parts);
  free(s->target_version);
  srv_anim_fini(s);
}

void srv_session_destroy(srv_session *s) {
  if (!s) return;
  free_parts(s);
  free(s);
}

void srv_session_ref(srv_session *s) { s->refs++; }

void srv_session_unref(srv_session *s) {
  if (s && --s->refs == 0) srv_session_destroy(s);
}

static proto_mesh_desc mesh_desc(const srv_session *s) {
  const mesh *m = s->mesh;
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, m->target_count, m->positions,
                        m->triangles, m->uvs, s->offset_quantum};
  return md;
}

static proto_target_desc target_desc(const srv_session *s, uint32_t t) {
  const mesh_target *mt = &s->mesh->targets[t];
  const srv_target *st = &s->targets[t];
  proto_target_desc d = {mt->name,         mt->default_weight, st->min,     st->max,    st->muted ? PROTO_TARGET_MUTED : 0,
                         st->driver_count, st->drivers,        mt->count,   mt->indices, mt->deltas};
  return d;
}

/* Encodes target t's SNAPSHOT part into s->target_parts[t] (grown as needed). */
static int encode_target_part(srv_session *s, uint32_t t) {
  if (t >= s->target_cap) {
    uint32_t cap = s->target_cap ? 2 * s->target_cap : 16;
    while (cap <= t) cap *= 2;
    srv_frame **g = realloc(s->target_parts, sizeof(*g) * cap);
    if (!g) return MESH_ENOMEM;
    memset(g + s->target_cap, 0, sizeof(*g) * (cap - s->target_cap));
    s->target_parts = g;
    s->target_cap = cap;
  }
  proto_buf b;
  proto_buf_init(&b);
  proto_target_desc d = target_desc(s, t);
  int rc = proto_snapshot_target(&b, &d);
  if (rc) {
    proto_buf_fini(&b);
    return rc == PROTO_ENOMEM ? MESH_ENOMEM : MESH_EINVAL;
  }
  srv_frame *f = srv_frame_from_buf(&b);
  if (!f) return MESH_ENOMEM;
  srv_frame_unref(s->target_parts[t]); /* joins in flight keep their own reference */
  s->target_parts[t] = f;
  return 0;
}

/* The SNAPSHOT mesh part is kept in pieces shared by every join: the body (positions,
 * triangles, UVs) and one piece per target, so adding a target encodes only that target. */
static int encode_mesh_parts(srv_session *s) {
  proto_buf b;
  proto_buf_init(&b);
  proto_mesh_desc md = mesh_desc(s);
  int rc = proto_snapshot_mesh_body(&b, &md);
  if (rc) {
    proto_buf_fini(&b);
    return MESH_ENOMEM;
  }
  s->mesh_body = srv_frame_from_buf(&b);
  if (!s->mesh_body) return MESH_ENOMEM;
  for (uint32_t t = 0; t < s->mesh->target_count; t++) {
    rc = encode_target_part(s, t);
    if (rc) return rc;
  }
  return 0;
}

int srv_session_snapshot_parts(const srv_session *s, srv_frame ***parts, uint32_t *count) {
  uint32_t nt = s->mesh->target_count;
  srv_frame **p = malloc(sizeof(*p) * (nt + 3));
  proto_buf b, st;
  proto_buf_init(&b);
  proto_buf_init(&st);
  int rc = srv_session_encode_state(s, &st);
  srv_frame *state = rc == 0 ? srv_frame_from_buf(&st) : NULL;
  if (rc) proto_buf_fini(&st);
  size_t mesh_len = 20 + s->mesh_body->len;
  for (uint32_t t = 0; t < nt; t++) mesh_len += s->target_parts[t]->len;
  proto_mesh_desc md = mesh_desc(s);
  srv_frame *head = NULL;
  if (p && state && proto_encode_snapshot_head(&b, s->version, mesh_len, state->len) == 0 &&
      proto_snapshot_mesh_head(&b, &md) == 0)
    head = srv_frame_from_buf(&b);
  else
    proto_buf_fini(&b);
  if (!p || !state || !head) {
    free(p);
    srv_frame_unref(state);
    srv_frame_unref(head);
    return MESH_ENOMEM;
  }
  uint32_t k = 0;
  p[k++] = head;
  p[k++] = srv_frame_ref(s->mesh_body);
  for (uint32_t t = 0; t < nt; t++) p[k++] = srv_frame_ref(s->target_parts[t]);
  p[k++] = state;
  *parts = p;
  *count = k;
  return 0;
}

int srv_session_create(const char *name, mesh *m, srv_session **out, char *err, size_t errlen) {
  *out = NULL;
  if (m->target_count > PROTO_MAX_TARGETS) {
    snprintf(err, errlen, "the mesh has %u morph targets, more than %d", m->target_count,
             PROTO_MAX_TARGETS);
    mesh_destroy(m);
    return MESH_ETOOBIG;
  }
  for (uint32_t t = 0; t < m->target_count; t++) {
    if (strlen(m->targets[t].name) > PROTO_MAX_NAME) {
      snprintf(err, errlen, "morph target %u has a name longer than %d bytes", t, PROTO_MAX_NAME);
      mesh_destroy(m);
      return MESH_EINVAL;
    }
    for (uint32_t u = 0; u < t; u++) {
      if (strcmp(m->targets[t].name, m->targets[u].name) == 0) {
        snprintf(err, errlen, "two morph targets are called '%s'", m->targets[t].name);
        mesh_destroy(m);
        return MESH_EINVAL;
      }
    }
  }
  srv_session *s = calloc(1, sizeof(*s));
  if (!s) {
    mesh_destroy(m);
    return MESH_ENOMEM;
  }
  s->refs = 1;
  s->mesh = m;
  s->name = strdup(name);
  uint32_t nt = m->target_count, nv = m->vertex_count;
  uint32_t nblocks = (nv >> SRV_BLOCK_SHIFT) + 1;
  s->targets = calloc(nt + 1, sizeof(*s->targets));
  s->weights = calloc(nt + 1, sizeof(float));
  s->weight_version = calloc(nt + 1, sizeof(uint64_t));
  s->offsets = calloc(3 * (size_t)nv + 1, sizeof(int32_t));
  s->block_version = calloc(nblocks, sizeof(uint64_t));
  s->target_version = calloc(nt + 1, sizeof(uint64_t));
  if (!s->name || !s->targets || !s->weights || !s->weight_version || !s->offsets || !s->block_version ||
      !s->target_version) {
    srv_session_destroy(s);
    return MESH_ENOMEM;
  }
  for (uint32_t t = 0; t < nt; t++) {
    /* Slider range as in Blender: [0, 1] unless the file's default weight lies outside it. */
    float w = m->targets[t].default_weight;
    s->weights[t] = w;
    s->targets[t].value = w;
    if (w < -SRV_WEIGHT_LIMIT || w > SRV_WEIGHT_LIMIT) { /* a file's default beyond the limit: held to it */
      w = w < 0 ? -SRV_WEIGHT_LIMIT : SRV_WEIGHT_LIMIT;
      s->weights[t] = s->targets[t].value = w;
    }
    s->targets[t].min = w < 0.0f ? w : 0.0f;
    s->targets[t].max = w > 1.0f ? w : 1.0f;
  }
  /* Offsets are stored quantised to 2^-20 of the bounding-box diagonal (0.3 µm on a 30 cm
   * head): far below what anyone can see, and exactly what every receiver rebuilds. */
  double diag = mesh_bbox_diagonal(m);
  s->offset_quantum = diag > 0.0 ? (float)ldexp(diag, -20) : 1e-6f;
  /* The welded topology and its adjacency are kept: every solve and brush needs them. */
  int rc = mesh_topology_init(&s->topo, m, NULL, 0.0);
  if (rc == 0) rc = mesh_compute_stats(m, &s->topo, &s->stats);
  if (rc == 0) rc = mesh_adjacency_init(&s->adj, s->topo.vertex_count, s->topo.triangles, s->topo.triangle_count);
  if (rc == 0) rc = encode_mesh_parts(s);
  if (rc == 0) rc = srv_anim_init(s);
  if (rc) {
    snprintf(err, errlen, "%s", mesh_strerror(rc));
    srv_session_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* A target's new range, mute flag and drivers. */
static int check_meta(const srv_session *s, uint32_t t, const srv_target *nm, char *err, size_t errlen) {
  const mesh *m = s->mesh;
  if (t >= m->target_count) {
    snprintf(err, errlen, "target index %u out of range (the mesh has %u targets)", t, m->target_count);
    return -1;
  }
  const char *name = m->targets[t].name;
  if (!isfinite(nm->min) || !isfinite(nm->max) || nm->min < -SRV_WEIGHT_LIMIT || nm->max > SRV_WEIGHT_LIMIT ||
      !(nm->min < nm->max)) {
    snprintf(err, errlen, "range [%g, %g] of '%s': min must be below max, both within [%g, %g]", (double)nm->min,
             (double)nm->max, name, (double)-SRV_WEIGHT_LIMIT, (double)SRV_WEIGHT_LIMIT);
    return -1;
  }
  if (nm->driver_count > PROTO_MAX_DRIVERS) {
    snprintf(err, errlen, "'%s' has %u drivers; a combination target has at most %d", name, nm->driver_count,
             PROTO_MAX_DRIVERS);
    return -1;
  }
  for (uint32_t i = 0; i < nm->driver_count; i++) {
    uint32_t d = nm->drivers[i];
    if (d >= m->target_count || d == t) {
      snprintf(err, errlen, "'%s' cannot be driven by %s", name, d == t ? "itself" : "a target that does not exist");
      return -1;
    }
    if (s->targets[d].driver_count) {
      snprintf(err, errlen, "'%s' cannot be driven by '%s', which is a combination target itself", name,
               m->targets[d].name);
      return -1;
    }
    for (uint32_t j = 0; j < i; j++)
      if (nm->drivers[j] == d) {
        snprintf(err, errlen, "'%s' names driver '%s' twice", name, m->targets[d].name);
        return -1;
      }
  }
  if (nm->driver_count)
    for (uint32_t u = 0; u < m->target_count; u++)
      for (uint32_t i = 0; i < s->targets[u].driver_count; i++)
        if (s->targets[u].drivers[i] == t) {
          snprintf(err, errlen, "'%s' drives the combination target '%s', so it cannot be one itself", name,
                   m->targets[u].name);
          return -1;
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
    return -1;
  }
  for (uint32_t i = 0; i < n; i++) {
    const srv_new_target *t = &nt[i];
    size_t len = t->name ? strlen(t->name) : 0;
    if (len == 0 || len > PROTO_MAX_NAME) {
      snprintf(err, errlen, "a target name must have 1 to %d bytes", PROTO_MAX_NAME);
      return -1;
    }
    int clash = mesh_find_target(m, t->name) >= 0;
    for (uint32_t j = 0; j < i && !clash; j++) clash = strcmp(nt[j].name, t->name) == 0;
    if (clash) {
      snprintf(err, errlen, "session '%s' already has a target called '%s'", s->name, t->name);
      return -1;
    }
    if (!isfinite(t->min) || !isfinite(t->max) || !(t->min < t->max) || !(t->weight >= t->min && t->weight <= t->max)) {
      snprintf(err, errlen, "target '%s': weight %g and range [%g, %g] do not fit", t->name, (double)t->weight,
               (double)t->min, (double)t->max);
      return -1;
    }
    for (uint32_t k = 0; k < t->count; k++) {
      if (t->indices[k] >= m->vertex_count || (k && t->indices[k] <= t->indices[k - 1])) {
        snprintf(err, errlen, "target '%s': vertex indices must ascend below %u", t->name, m->vertex_count);
        return -1;
      }
      for (int c = 0; c < 3; c++)
        if (!isfinite(t->deltas[3 * (size_t)k + c])) {
          snprintf(err, errlen, "target '%s': a delta is not finite", t->name);
          return -1;
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
        return -1;
      }
      if (!isfinite(v)) {
        snprintf(err, errlen, "weight of '%s' is not finite", m->targets[t].name);
        return -1;
      }
      const srv_target *st = &s->targets[t];
      if (st->driver_count) {
        snprintf(err, errlen, "'%s' is a combination target: its weight is the product of its drivers' (%s%s)",
                 m->targets[t].name, m->targets[st->drivers[0]].name, st->driver_count > 1 ? " × …" : "");
        return -1;
      }
      if (v < st->min || v > st->max) {
        snprintf(err, errlen, "weight %g of '%s' is outside its range [%g, %g]", (double)v,
                 m->targets[t].name, (double)st->min, (double)st->max);
        return -1;
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
      return -1;
    }
    if (!isfinite(op->wscale) || op->wscale < 0) {
      snprintf(err, errlen, "weight scale %g is not a finite number >= 0", (double)op->wscale);
      return -1;
    }
    for (uint32_t i = 0; i < op->count; i++) {
      uint32_t t = op->first + i;
      float v = proto_qweight(op->wq[i], op->wscale);
      const srv_target *st = &s->targets[t];
      if (st->driver_count || v < st->min || v > st->max) {
        snprintf(err, errlen, "weight %g of '%s' is %s", (double)v, m->targets[t].name,
                 st->driver_count ? "for a combination target" : "outside its range");
        return -1;
      }
    }
    return 0;
  }
  if (op->kind == SRV_OP_SET_OFFSETS) {
    for (uint32_t i = 0; i < op->count; i++) {
      if (op->indices[i] >= m->vertex_count) {
        snprintf(err, errlen, "vertex %u out of range (the mesh has %u vertices)", op->indices[i],
                 m->vertex_count);
        return -1;
      }
      if (i > 0 && op->indices[i] <= op->indices[i - 1]) {
        snprintf(err, errlen, "vertex indices must be strictly ascending (%u after %u)",
                 op->indices[i], op->indices[i - 1]);
        return -1;
      }
    }
    return 0;
  }
  if (op->kind == SRV_OP_ADD_TARGET) {
    size_t len = op->name ? strlen(op->name) : 0;
    if (len == 0 || len > PROTO_MAX_NAME) {
      snprintf(err, errlen, "a target name must have 1 to %d bytes", PROTO_MAX_NAME);
      return -1;
    }
    if (mesh_find_target(m, op->name) >= 0) {
      snprintf(err, errlen, "session '%s' already has a target called '%s'", s->name, op->name);
      return -1;
    }
    if (m->target_count >= PROTO_MAX_TARGETS) {
      snprintf(err, errlen, "session '%s' has the most targets a session can have (%d)", s->name, PROTO_MAX_TARGETS);
      return -1;
    }
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      const int32_t *q = s->offsets + 3 * (size_t)v;
      if (q[0] | q[1] | q[2]) return 0;
    }
    snprintf(err, errlen, "the sculpt layer of session '%s' is empty: nothing to make a target from", s->name);
    return -1;
  }
  snprintf(err, errlen, "unknown operation kind %d", (int)op->kind);
  return -1;
}

/* Appends one target with its state (weight, range) and SNAPSHOT piece. Returns 0 or
 * MESH_ENOMEM with the state unchanged (the arrays may have grown). */
static int append_target(srv_session *s, const srv_new_target *t, uint64_t version) {
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
  rc = encode_target_part(s, nt);
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
  int rc = append_target(s, &t, version);
  free(d);
  if (rc == 0)
    for (uint32_t i = 0; i < k; i++) {
      memset(s->offsets + 3 * (size_t)idx[i], 0, sizeof(int32_t) * 3);
      s->block_version[idx[i] >> SRV_BLOCK_SHIFT] = version;
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

/* Encodes the frames that carry what `op` changed, at `version`. */
static int encode_op(const srv_session *s, const srv_op *op, uint64_t version, const weight_changes *wc,
                     proto_buf *b) {
  if (op->kind == SRV_OP_ADD_TARGET || op->kind == SRV_OP_ADD_TARGETS) {
    uint32_t n = op->kind == SRV_OP_ADD_TARGET ? 1 : op->count, nt = s->mesh->target_count;
    for (uint32_t t = nt - n; t < nt; t++) {
      proto_target_desc d = target_desc(s, t);
      size_t at = b->len;
      int rc = proto_encode_target_add(b, version, t, s->weights[t], &d);
      if (rc) return rc;
      /* One change: the version comes with the last frame. */
      if (t + 1 < nt || op->kind == SRV_OP_ADD_TARGET) b->data[at + 7] |= PROTO_FLAG_MORE;
    }
    if (op->kind == SRV_OP_ADD_TARGET) {
      /* The sculpt offsets that moved into the target are now zero: a DELTA says so (a TARGET
       * only adds a target; it never touches the sculpt layer). */
      const mesh_target *tg = &s->mesh->targets[nt - 1];
      int32_t *zero = calloc(3 * ((size_t)tg->count + 1), sizeof(int32_t));
      if (!zero) return PROTO_ENOMEM;
      int rc = proto_encode_delta(b, version, 0, tg->count, tg->indices, zero);
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
  return proto_encode_delta(b, version, 0, op->count, op->indices, op->q);
}

uint64_t srv_session_apply(srv_server *srv, srv_session *s, const srv_op *op) {
  uint64_t version = s->version + 1;
  weight_changes wc = {0, NULL, NULL};
  if (op->kind == SRV_OP_ADD_TARGET) {
    if (add_target_from_sculpt(s, op->name, version) != 0) return 0;
  } else if (op->kind == SRV_OP_ADD_TARGETS) {
    uint32_t before = s->mesh->target_count;
    for (uint32_t i = 0; i < op->count; i++)
      if (append_target(s, &op->added[i], version) != 0) {
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
    if (settle_weights(s, NULL, 0, version, &wc) != 0 || encode_target_part(s, t) != 0) {
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
    }
  }
  s->version = version;
  s->ops_applied++;
  if (s->subscriber_count == 0) {
    free(wc.idx);
    free(wc.val);
    return version;
  }
  proto_buf b;
  proto_buf_init(&b);
  int rc = encode_op(s, op, version, &wc, &b);
  free(wc.idx);
  free(wc.val);
  srv_frame *f = rc == 0 ? srv_frame_from_buf(&b) : NULL;
  if (!f) {
    /* The state changed but the frame could not be built: subscribers fall behind and are
     * caught up from the versions, exactly like a slow reader. */
    proto_buf_fini(&b);
    srv_log(SRV_LOG_WARN, "session %s: cannot encode version %llu (%s); viewers will catch up",
            s->name, (unsigned long long)version, proto_strerror(rc ? rc : PROTO_ENOMEM));
    for (srv_conn *c = s->subscribers; c; c = c->sub_next) srv_stream_deliver(c, NULL, version);
    return version;
  }
  for (srv_conn *c = s->subscribers; c; c = c->sub_next) srv_stream_deliver(c, f, version);
  srv_frame_unref(f);
  (void)srv;
  return version;
}

static int encode_since_frames(const srv_session *s, uint64_t since, uint8_t flags, proto_buf *b);

int srv_session_encode_since(const srv_session *s, uint64_t since, uint8_t flags, proto_buf *b) {
  size_t start = b->len;
  int rc = encode_since_frames(s, since, flags, b);
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

static int encode_since_frames(const srv_session *s, uint64_t since, uint8_t flags, proto_buf *b) {
  if (since >= s->version) return 0;
  const mesh *m = s->mesh;
  uint32_t nt = m->target_count, changed = 0;
  int rc = 0;
  /* Targets created since then come first: the weights and offsets below refer to them. Their
   * drivers come in the TARGET_META frames below, once every target exists (a driver may be a
   * target created after the one it drives). */
  for (uint32_t t = 0; t < nt && rc == 0; t++) {
    if (s->target_version[t] <= since) continue;
    proto_target_desc d = target_desc(s, t);
    d.driver_count = 0;
    size_t at = b->len;
    rc = proto_encode_target_add(b, s->version, t, s->weights[t], &d);
    if (rc == 0) b->data[at + 7] |= flags; /* the header's flags byte */
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
  /* Every vertex of every block stamped after `since`, with its current (absolute) offset,
   * zero included: a vertex that went back to rest must be sent too. */
  uint32_t nv = m->vertex_count, nblocks = (nv >> SRV_BLOCK_SHIFT) + 1, count = 0;
  for (uint32_t bl = 0; bl < nblocks; bl++) {
    if (s->block_version[bl] <= since) continue;
    uint32_t lo = bl << SRV_BLOCK_SHIFT, hi = lo + (1u << SRV_BLOCK_SHIFT);
    count += (hi > nv ? nv : hi) - lo;
  }
  if (count == 0) return 0;
  uint32_t *idx = malloc(sizeof(uint32_t) * count);
  int32_t *q = malloc(sizeof(int32_t) * 3 * (size_t)count);
  if (!idx || !q) {
    free(idx);
    free(q);
    return PROTO_ENOMEM;
  }
  uint32_t k = 0;
  for (uint32_t bl = 0; bl < nblocks; bl++) {
    if (s->block_version[bl] <= since) continue;
    uint32_t lo = bl << SRV_BLOCK_SHIFT, hi = lo + (1u << SRV_BLOCK_SHIFT);
    for (uint32_t v = lo; v < hi && v < nv; v++) {
      idx[k] = v;
      memcpy(q + 3 * (size_t)k, s->offsets + 3 * (size_t)v, sizeof(int32_t) * 3);
      k++;
    }
  }
  rc = proto_encode_delta(b, s->version, flags, k, idx, q);
  free(idx);
  free(q);
  return rc;
}

int srv_session_encode_state(const srv_session *s, proto_buf *b) {
  uint32_t nv = s->mesh->vertex_count, count = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *q = s->offsets + 3 * (size_t)v;
    count += (q[0] | q[1] | q[2]) != 0;
  }
  uint32_t *idx = malloc(sizeof(uint32_t) * (count + 1));
  int32_t *q = malloc(sizeof(int32_t) * 3 * ((size_t)count + 1));
  if (!idx || !q) {
    free(idx);
    free(q);
    return PROTO_ENOMEM;
  }
  uint32_t k = 0;
  for (uint32_t v = 0; v < nv; v++) {
    const int32_t *o = s->offsets + 3 * (size_t)v;
    if ((o[0] | o[1] | o[2]) == 0) continue;
    idx[k] = v;
    memcpy(q + 3 * (size_t)k, o, sizeof(int32_t) * 3);
    k++;
  }
  int rc = proto_snapshot_state_part(b, s->mesh->target_count, s->weights, k, idx, q);
  free(idx);
  free(q);
  return rc;
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
    rc = SRV_RPC_INTERNAL;
    goto out;
  }
  for (uint32_t i = 0; vertices && i < count; i++) {
    if (vertices[i] >= nv) {
      snprintf(err, errlen, "vertex %u out of range (the mesh has %u vertices)", vertices[i], nv);
      rc = SRV_RPC_OUT_OF_RANGE;
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
  srv_op op = {.kind = SRV_OP_SET_OFFSETS, .author = author, .count = k, .indices = idx, .q = q};
  *version = k ? srv_session_apply(srv, s, &op) : s->version;
  *reset = k;
out:
  free(pick);
  free(idx);
  free(q);
  return rc;
}

int srv_state_capture(const srv_session *s, srv_state *st) {
  memset(st, 0, sizeof(*st));
  const mesh *m = s->mesh;
  st->view = *m;
  st->targets = malloc(sizeof(mesh_target) * (m->target_count + 1));
  st->weights = malloc(sizeof(float) * (m->target_count + 1));
  st->offsets = malloc(sizeof(int32_t) * (3 * (size_t)m->vertex_count + 1));
  if (!st->targets || !st->weights || !st->offsets) {
    srv_state_release(st);
    return MESH_ENOMEM;
  }
  if (m->target_count) { /* (memcpy from a NULL array is undefined even for 0 bytes) */
    memcpy(st->targets, m->targets, sizeof(mesh_target) * m->target_count);
    memcpy(st->weights, s->weights, sizeof(float) * m->target_count);
  }
  memcpy(st->offsets, s->offsets, sizeof(int32_t) * 3 * (size_t)m->vertex_count);
  st->view.targets = st->targets;
  st->quantum = s->offset_quantum;
  return 0;
}

void srv_state_release(srv_state *st) {
  free(st->targets);
  free(st->weights);
  free(st->offsets);
  memset(st, 0, sizeof(*st));
}

int srv_state_shape(const srv_state *st, float *out) {
  size_t n = 3 * (size_t)st->view.vertex_count;
  float *off = malloc(sizeof(float) * (n + 1));
  if (!off) return MESH_ENOMEM;
  for (size_t i = 0; i < n; i++) off[i] = proto_dequantize(st->offsets[i], st->quantum);
  mesh_evaluate(&st->view, st->weights, off, out);
  free(off);
  return 0;
}
