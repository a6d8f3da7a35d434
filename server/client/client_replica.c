/*
 * client_replica.c — a viewer's copy of a session rebuilt from SNAPSHOT, TARGET, TARGET_META,
 * WEIGHTS and DELTA frames; its positions are base + Σ wᵢ·Δᵢ + sculpt offsets on the CPU
 * (mesh_evaluate), the reference every other client is compared against.
 *
 * DOES NOT do I/O: the caller reads frames (client.c, or its own loop) and hands them here.
 */
#include "client_replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void client_replica_init(client_replica *r) { memset(r, 0, sizeof(*r)); }

void client_replica_fini(client_replica *r) {
  mesh_destroy(r->mesh);
  free(r->weights);
  free(r->offsets);
  free(r->meta);
  memset(r, 0, sizeof(*r));
}

static void set_meta(client_target_meta *m, float min, float max, uint8_t flags, uint32_t driver_count,
                     const uint8_t *drivers) {
  memset(m, 0, sizeof(*m));
  m->min = min, m->max = max, m->flags = flags, m->driver_count = (uint8_t)driver_count;
  for (uint32_t i = 0; i < driver_count; i++) m->drivers[i] = (uint16_t)proto_driver(drivers, i);
}

static int load_snapshot(client_replica *r, const proto_header *h, const uint8_t *p, char *err,
                         size_t errlen) {
  proto_snapshot s;
  int rc = proto_decode_snapshot(p, h->length, NULL, &s);
  if (rc) {
    snprintf(err, errlen, "SNAPSHOT: %s", proto_strerror(rc));
    return rc;
  }
  client_replica_fini(r);
  mesh *m = mesh_create();
  if (!m || mesh_alloc(m, s.vertex_count, s.triangle_count, 0, s.uvs != NULL)) {
    mesh_destroy(m);
    return MESH_ENOMEM;
  }
  memcpy(m->positions, s.positions, 12 * (size_t)s.vertex_count);
  memcpy(m->triangles, s.triangles, 12 * (size_t)s.triangle_count);
  if (s.uvs) memcpy(m->uvs, s.uvs, 8 * (size_t)s.vertex_count);
  proto_iter it;
  proto_target t;
  proto_snapshot_targets_begin(&s, &it);
  uint32_t *idx = NULL;
  float *del = NULL;
  r->meta = calloc(s.target_count + 1, sizeof(*r->meta));
  rc = r->meta ? 0 : MESH_ENOMEM;
  while (rc == 0 && proto_snapshot_target_next(&it, &t)) {
    set_meta(&r->meta[m->target_count], t.min, t.max, t.flags, t.driver_count, t.drivers);
    char name[PROTO_MAX_NAME + 1];
    memcpy(name, t.name.ptr, t.name.len);
    name[t.name.len] = '\0';
    idx = realloc(idx, sizeof(uint32_t) * ((size_t)t.count + 1));
    del = realloc(del, sizeof(float) * 3 * ((size_t)t.count + 1));
    if (!idx || !del) {
      rc = MESH_ENOMEM;
      break;
    }
    memcpy(idx, t.indices, 4 * (size_t)t.count);
    memcpy(del, t.deltas, 12 * (size_t)t.count);
    rc = mesh_add_target_sparse(m, name, t.count, idx, del, t.default_weight);
  }
  free(idx);
  free(del);
  r->weights = calloc(s.target_count + 1, sizeof(float));
  r->offsets = calloc(3 * (size_t)s.vertex_count + 1, sizeof(float));
  if (rc || !r->weights || !r->offsets) {
    mesh_destroy(m);
    snprintf(err, errlen, "SNAPSHOT: cannot rebuild the mesh");
    return rc ? rc : MESH_ENOMEM;
  }
  memcpy(r->weights, s.weights, 4 * (size_t)s.target_count);
  mesh_update_bounds(m);
  r->mesh = m;
  r->quantum = s.offset_quantum;
  uint32_t v;
  int32_t q[3];
  proto_offsets_begin(&s.offsets, &it);
  while (proto_offsets_next(&it, &v, q))
    for (int k = 0; k < 3; k++) r->offsets[3 * (size_t)v + k] = proto_dequantize(q[k], r->quantum);
  r->version = h->session_version;
  r->have_snapshot = 1;
  return 0;
}

/* TARGET: append the target at the given weight (the sculpt layer is untouched: a target made
 * from the sculpt comes with a DELTA that clears it). */
static int add_target(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen) {
  proto_target_add t;
  int rc = proto_decode_target_add(p, h->length, NULL, &t);
  if (rc) {
    snprintf(err, errlen, "TARGET: %s", proto_strerror(rc));
    return rc;
  }
  mesh *m = r->mesh;
  if (t.index != m->target_count) {
    snprintf(err, errlen, "TARGET: index %u, but the mesh has %u targets", t.index, m->target_count);
    return PROTO_EINVAL;
  }
  uint32_t n = t.target.count;
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  float *del = malloc(sizeof(float) * 3 * ((size_t)n + 1));
  float *w = realloc(r->weights, sizeof(float) * (m->target_count + 1));
  if (w) r->weights = w;
  client_target_meta *meta = realloc(r->meta, sizeof(*meta) * (m->target_count + 1));
  if (meta) r->meta = meta;
  if (!idx || !del || !w || !meta) {
    free(idx);
    free(del);
    return MESH_ENOMEM;
  }
  memcpy(idx, t.target.indices, 4 * (size_t)n);
  memcpy(del, t.target.deltas, 12 * (size_t)n);
  char name[PROTO_MAX_NAME + 1];
  memcpy(name, t.target.name.ptr, t.target.name.len);
  name[t.target.name.len] = '\0';
  rc = mesh_add_target_sparse(m, name, n, idx, del, t.target.default_weight);
  if (rc == 0) {
    r->weights[t.index] = t.weight;
    set_meta(&r->meta[t.index], t.target.min, t.target.max, t.target.flags, t.target.driver_count,
             t.target.drivers);
    if (!(h->flags & PROTO_FLAG_MORE)) r->version = h->session_version;
  } else {
    snprintf(err, errlen, "TARGET: %s", mesh_strerror(rc));
  }
  free(idx);
  free(del);
  return rc;
}

int client_replica_apply(client_replica *r, const proto_header *h, const uint8_t *p, char *err,
                      size_t errlen) {
  if (h->type == PROTO_SNAPSHOT) return load_snapshot(r, h, p, err, errlen);
  if (h->type == PROTO_TARGET) {
    if (!r->have_snapshot) {
      snprintf(err, errlen, "TARGET before the snapshot");
      return PROTO_ETYPE;
    }
    return add_target(r, h, p, err, errlen);
  }
  if (h->type == PROTO_TARGET_META) {
    proto_target_meta tm;
    int rc = r->have_snapshot ? proto_decode_target_meta(p, h->length, NULL, &tm) : PROTO_ETYPE;
    if (rc == 0 && tm.index >= r->mesh->target_count) rc = PROTO_EINVAL;
    for (uint32_t i = 0; rc == 0 && i < tm.driver_count; i++)
      if (proto_driver(tm.drivers, i) >= r->mesh->target_count) rc = PROTO_EINVAL;
    if (rc) {
      snprintf(err, errlen, "TARGET_META: %s", r->have_snapshot ? proto_strerror(rc) : "before the snapshot");
      return rc;
    }
    set_meta(&r->meta[tm.index], tm.min, tm.max, tm.flags, tm.driver_count, tm.drivers);
    if (!(h->flags & PROTO_FLAG_MORE)) r->version = h->session_version;
    return 0;
  }
  if (h->type != PROTO_WEIGHTS && h->type != PROTO_DELTA) return 0;
  if (!r->have_snapshot) {
    snprintf(err, errlen, "state frame before the snapshot");
    return PROTO_ETYPE;
  }
  proto_iter it;
  if (h->type == PROTO_WEIGHTS) {
    proto_weights_view w;
    int rc = proto_decode_weights(p, h->length, NULL, &w);
    if (rc) {
      snprintf(err, errlen, "WEIGHTS: %s", proto_strerror(rc));
      return rc;
    }
    uint32_t t;
    float value;
    proto_weights_begin(&w, &it);
    while (proto_weights_next(&it, &t, &value)) {
      if (t >= r->mesh->target_count) {
        snprintf(err, errlen, "WEIGHTS: target %u of %u", t, r->mesh->target_count);
        return PROTO_EINVAL;
      }
      r->weights[t] = value;
    }
  } else {
    proto_offsets_view o;
    int rc = proto_decode_delta(p, h->length, NULL, &o);
    if (rc) {
      snprintf(err, errlen, "DELTA: %s", proto_strerror(rc));
      return rc;
    }
    uint32_t v;
    int32_t q[3];
    proto_offsets_begin(&o, &it);
    while (proto_offsets_next(&it, &v, q)) {
      if (v >= r->mesh->vertex_count) {
        snprintf(err, errlen, "DELTA: vertex %u of %u", v, r->mesh->vertex_count);
        return PROTO_EINVAL;
      }
      for (int k = 0; k < 3; k++) r->offsets[3 * (size_t)v + k] = proto_dequantize(q[k], r->quantum);
    }
  }
  if (!(h->flags & PROTO_FLAG_MORE)) r->version = h->session_version;
  return 0;
}

int client_replica_positions(const client_replica *r, float *out) {
  if (!r->have_snapshot) return MESH_EINVAL;
  mesh_evaluate(r->mesh, r->weights, r->offsets, out);
  return 0;
}
