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
  mesh_destroy(s->mesh);
  free(s->ranges);
  free(s->weights);
  free(s->weight_version);
  free(s->offsets);
  free(s->block_version);
  srv_frame_unref(s->mesh_part);
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

static int encode_mesh_part(srv_session *s) {
  const mesh *m = s->mesh;
  proto_target_desc *td = calloc(m->target_count + 1, sizeof(*td));
  if (!td) return MESH_ENOMEM;
  for (uint32_t t = 0; t < m->target_count; t++) {
    td[t].name = m->targets[t].name;
    td[t].default_weight = m->targets[t].default_weight;
    td[t].min = s->ranges[t].min;
    td[t].max = s->ranges[t].max;
    td[t].count = m->targets[t].count;
    td[t].indices = m->targets[t].indices;
    td[t].deltas = m->targets[t].deltas;
  }
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, m->target_count, m->positions,
                        m->triangles, m->uvs, s->offset_quantum};
  proto_buf b;
  proto_buf_init(&b);
  int rc = proto_snapshot_mesh_part(&b, &md, td);
  free(td);
  if (rc) {
    proto_buf_fini(&b);
    return rc == PROTO_ENOMEM ? MESH_ENOMEM : MESH_EINVAL;
  }
  s->mesh_part = srv_frame_from_buf(&b);
  return s->mesh_part ? 0 : MESH_ENOMEM;
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
  s->ranges = calloc(nt + 1, sizeof(*s->ranges));
  s->weights = calloc(nt + 1, sizeof(float));
  s->weight_version = calloc(nt + 1, sizeof(uint64_t));
  s->offsets = calloc(3 * (size_t)nv + 1, sizeof(int32_t));
  s->block_version = calloc(nblocks, sizeof(uint64_t));
  if (!s->name || !s->ranges || !s->weights || !s->weight_version || !s->offsets || !s->block_version) {
    srv_session_destroy(s);
    return MESH_ENOMEM;
  }
  for (uint32_t t = 0; t < nt; t++) {
    /* Slider range as in Blender: [0, 1] unless the file's default weight lies outside it. */
    float w = m->targets[t].default_weight;
    s->weights[t] = w;
    s->ranges[t].min = w < 0.0f ? w : 0.0f;
    s->ranges[t].max = w > 1.0f ? w : 1.0f;
  }
  /* Offsets are stored quantised to 2^-20 of the bounding-box diagonal (0.3 µm on a 30 cm
   * head): far below what anyone can see, and exactly what every receiver rebuilds. */
  double diag = mesh_bbox_diagonal(m);
  s->offset_quantum = diag > 0.0 ? (float)ldexp(diag, -20) : 1e-6f;
  mesh_topology t;
  int rc = mesh_topology_init(&t, m, NULL, 0.0);
  if (rc == 0) {
    rc = mesh_compute_stats(m, &t, &s->stats);
    mesh_topology_fini(&t);
  }
  if (rc == 0) rc = encode_mesh_part(s);
  if (rc) {
    snprintf(err, errlen, "%s", mesh_strerror(rc));
    srv_session_destroy(s);
    return rc;
  }
  *out = s;
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
      if (v < s->ranges[t].min || v > s->ranges[t].max) {
        snprintf(err, errlen, "weight %g of '%s' is outside its range [%g, %g]", (double)v,
                 m->targets[t].name, (double)s->ranges[t].min, (double)s->ranges[t].max);
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
  snprintf(err, errlen, "unknown operation kind %d", (int)op->kind);
  return -1;
}

/* Encodes the frame that carries what `op` changed, at `version`. */
static int encode_op(const srv_session *s, const srv_op *op, uint64_t version, proto_buf *b) {
  if (op->kind == SRV_OP_SET_WEIGHTS) {
    uint32_t nt = s->mesh->target_count;
    /* Dense when most targets changed: 4 bytes each instead of 6. */
    if (op->count > nt / 2) return proto_encode_weights(b, version, 0, nt, NULL, s->weights);
    return proto_encode_weights(b, version, 0, op->count, op->indices, op->values);
  }
  return proto_encode_delta(b, version, 0, op->count, op->indices, op->q);
}

uint64_t srv_session_apply(srv_server *srv, srv_session *s, const srv_op *op) {
  uint64_t version = s->version + 1;
  if (op->kind == SRV_OP_SET_WEIGHTS) {
    for (uint32_t i = 0; i < op->count; i++) {
      s->weights[op->indices[i]] = op->values[i];
      s->weight_version[op->indices[i]] = version;
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
  if (s->subscriber_count == 0) return version;
  proto_buf b;
  proto_buf_init(&b);
  int rc = encode_op(s, op, version, &b);
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

int srv_session_encode_since(const srv_session *s, uint64_t since, uint8_t flags, proto_buf *b) {
  if (since >= s->version) return 0;
  const mesh *m = s->mesh;
  uint32_t nt = m->target_count, changed = 0;
  for (uint32_t t = 0; t < nt; t++) changed += s->weight_version[t] > since;
  int rc = 0;
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

int srv_session_shape(const mesh *m, const float *weights, const int32_t *offsets, float quantum,
                      float *out) {
  size_t n = 3 * (size_t)m->vertex_count;
  float *off = malloc(sizeof(float) * (n + 1));
  if (!off) return MESH_ENOMEM;
  for (size_t i = 0; i < n; i++) off[i] = proto_dequantize(offsets[i], quantum);
  mesh_evaluate(m, weights, off, out);
  free(off);
  return 0;
}
