/*
 * client_replica.c — a viewer's copy of a session rebuilt from SNAPSHOT, TARGET, TARGET_META,
 * WEIGHTS and DELTA frames of either protocol version; its positions are base + Σ wᵢ·Δᵢ +
 * sculpt offsets on the CPU (mesh_evaluate), the reference every other client is compared
 * against.
 *
 * DOES NOT do I/O: the caller reads frames (client.c, or its own loop) and hands them here.
 */
#include "client_replica.h"

#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void client_replica_init(client_replica *r) { memset(r, 0, sizeof(*r)); }

void client_replica_fini(client_replica *r) {
  proto_trav_fini(&r->trav);
  mesh_destroy(r->mesh);
  free(r->weights);
  free(r->offsets);
  free(r->meta);
  free(r->mask);
  client__replica_texclips_free(r);
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
  r->protocol = PROTO_VERSION;
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

/* A version 2 SNAPSHOT: decoded into arrays (positions, triangles, UVs, targets with ascending
 * indices, offsets in session quanta), then the same mesh a version 1 SNAPSHOT builds. */
static int load_snapshot2(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen) {
  uint64_t t0 = client_now_ns();
  proto_snapshot2 s;
  proto_trav t;
  int rc = proto_decode_snapshot2(p, h->length, NULL, &s, &t);
  if (rc) {
    snprintf(err, errlen, "SNAPSHOT: %s", proto_strerror(rc));
    return rc;
  }
  client_replica_fini(r);
  mesh *m = mesh_create();
  rc = !m || mesh_alloc(m, s.vertex_count, s.triangle_count, 0, s.uvs != NULL) ? MESH_ENOMEM : 0;
  if (rc == 0) {
    memcpy(m->positions, s.positions, 12 * (size_t)s.vertex_count);
    memcpy(m->triangles, s.triangles, 12 * (size_t)s.triangle_count);
    if (s.uvs) memcpy(m->uvs, s.uvs, 8 * (size_t)s.vertex_count);
  }
  r->meta = calloc(s.target_count + 1, sizeof(*r->meta));
  r->weights = calloc(s.target_count + 1, sizeof(float));
  r->offsets = calloc(3 * (size_t)s.vertex_count + 1, sizeof(float));
  if (!r->meta || !r->weights || !r->offsets) rc = MESH_ENOMEM;
  for (uint32_t i = 0; rc == 0 && i < s.target_count; i++) {
    const proto_target2 *tg = &s.targets[i];
    set_meta(&r->meta[i], tg->min, tg->max, tg->flags, tg->driver_count, tg->drivers);
    char name[PROTO_MAX_NAME + 1];
    memcpy(name, tg->name.ptr, tg->name.len);
    name[tg->name.len] = '\0';
    rc = mesh_add_target_sparse(m, name, tg->count, tg->indices, tg->deltas, tg->default_weight);
  }
  if (rc) {
    mesh_destroy(m);
    proto_snapshot2_free(&s);
    proto_trav_fini(&t);
    client_replica_fini(r);
    snprintf(err, errlen, "SNAPSHOT: cannot rebuild the mesh");
    return rc;
  }
  memcpy(r->weights, s.weights, 4 * (size_t)s.target_count);
  r->quantum = s.offset_quantum;
  for (uint32_t k = 0; k < s.offsets.count; k++)
    for (int c = 0; c < 3; c++)
      r->offsets[3 * (size_t)s.offsets.indices[k] + c] = proto_dequantize(s.offsets.q[3 * (size_t)k + c], r->quantum);
  mesh_update_bounds(m);
  r->mesh = m;
  r->grid = s.grid;
  r->trav = t;
  r->protocol = PROTO_VERSION_2;
  r->version = h->session_version;
  r->have_snapshot = 1;
  proto_snapshot2_free(&s);
  r->decode_ms = (double)(client_now_ns() - t0) / 1e6;
  return 0;
}

/* TARGET: append the target at the given weight (the sculpt layer is untouched: a target made
 * from the sculpt comes with a DELTA that clears it). */
static int add_target(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen) {
  proto_target_add t1;
  proto_target2 t2;
  memset(&t2, 0, sizeof(t2));
  uint32_t index, n;
  float weight, default_weight;
  const uint8_t *idx_bytes = NULL, *del_bytes = NULL;
  proto_str pname;
  uint8_t tflags;
  float tmin, tmax;
  uint32_t ndrivers;
  const uint8_t *drivers;
  int rc;
  if (h->version == PROTO_VERSION_2) {
    rc = r->protocol == PROTO_VERSION_2 ? proto_decode_target_add2(p, h->length, &r->trav, &index, &weight, &t2)
                                         : PROTO_EVERSION; /* version 2 frames follow a version 2 SNAPSHOT */
    n = t2.count, default_weight = t2.default_weight, pname = t2.name;
    tflags = t2.flags, tmin = t2.min, tmax = t2.max, ndrivers = t2.driver_count, drivers = t2.drivers;
  } else {
    rc = proto_decode_target_add(p, h->length, NULL, &t1);
    index = t1.index, weight = t1.weight, n = t1.target.count, default_weight = t1.target.default_weight;
    pname = t1.target.name, idx_bytes = t1.target.indices, del_bytes = t1.target.deltas;
    tflags = t1.target.flags, tmin = t1.target.min, tmax = t1.target.max;
    ndrivers = t1.target.driver_count, drivers = t1.target.drivers;
  }
  if (rc) {
    snprintf(err, errlen, "TARGET: %s", proto_strerror(rc));
    return rc;
  }
  mesh *m = r->mesh;
  if (index != m->target_count) {
    snprintf(err, errlen, "TARGET: index %u, but the mesh has %u targets", index, m->target_count);
    proto_target2_free(&t2);
    return PROTO_EINVAL;
  }
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  float *del = malloc(sizeof(float) * 3 * ((size_t)n + 1));
  float *w = realloc(r->weights, sizeof(float) * (m->target_count + 1));
  if (w) r->weights = w;
  client_target_meta *meta = realloc(r->meta, sizeof(*meta) * (m->target_count + 1));
  if (meta) r->meta = meta;
  if (!idx || !del || !w || !meta) {
    free(idx);
    free(del);
    proto_target2_free(&t2);
    return MESH_ENOMEM;
  }
  memcpy(idx, t2.indices ? (const void *)t2.indices : (const void *)idx_bytes, 4 * (size_t)n);
  memcpy(del, t2.deltas ? (const void *)t2.deltas : (const void *)del_bytes, 12 * (size_t)n);
  char name[PROTO_MAX_NAME + 1];
  memcpy(name, pname.ptr, pname.len);
  name[pname.len] = '\0';
  rc = mesh_add_target_sparse(m, name, n, idx, del, default_weight);
  if (rc == 0) {
    r->weights[index] = weight;
    set_meta(&r->meta[index], tmin, tmax, tflags, ndrivers, drivers);
    if (!(h->flags & PROTO_FLAG_MORE)) r->version = h->session_version;
  } else {
    snprintf(err, errlen, "TARGET: %s", mesh_strerror(rc));
  }
  proto_target2_free(&t2);
  free(idx);
  free(del);
  return rc;
}

/* Sets offsets of the listed vertices, remembering their span. */
static int set_offsets(client_replica *r, uint32_t v, const int32_t q[3]) {
  if (v >= r->mesh->vertex_count) return PROTO_EINVAL;
  for (int k = 0; k < 3; k++) r->offsets[3 * (size_t)v + k] = proto_dequantize(q[k], r->quantum);
  if (r->delta_first == r->delta_end) {
    r->delta_first = v;
    r->delta_end = v + 1;
  } else {
    if (v < r->delta_first) r->delta_first = v;
    if (v + 1 > r->delta_end) r->delta_end = v + 1;
  }
  return 0;
}

/* A MASK frame: the whole mask, so every value not listed is 0. It carries no new version. */
static int apply_mask(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen) {
  proto_mask_view m;
  int rc = r->have_snapshot ? proto_decode_mask(p, h->length, &m) : PROTO_ETYPE;
  if (rc == 0 && m.vertex_count != r->mesh->vertex_count) rc = PROTO_EINVAL;
  if (rc) {
    snprintf(err, errlen, "MASK: %s", r->have_snapshot ? proto_strerror(rc) : "before the snapshot");
    return rc;
  }
  if (!r->mask && !(r->mask = malloc(sizeof(float) * ((size_t)m.vertex_count + 1)))) {
    snprintf(err, errlen, "out of memory");
    return PROTO_ENOMEM;
  }
  memset(r->mask, 0, sizeof(float) * m.vertex_count);
  for (uint32_t i = 0; i < m.count; i++)
    r->mask[proto_load_u32(m.vertices + 4 * (size_t)i)] = proto_load_f32(m.values + 4 * (size_t)i);
  r->mask_serial++;
  return 0;
}

int client_replica_apply(client_replica *r, const proto_header *h, const uint8_t *p, char *err,
                      size_t errlen) {
  if (h->type == PROTO_SNAPSHOT)
    return h->version == PROTO_VERSION_2 ? load_snapshot2(r, h, p, err, errlen) : load_snapshot(r, h, p, err, errlen);
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
  if (h->type == PROTO_MASK) return apply_mask(r, h, p, err, errlen);
  if (h->type == PROTO_TEXTURE) return client__replica_texture(r, h, p, err, errlen);
  if (h->type == PROTO_TEXCLIP || h->type == PROTO_TEXWEIGHTS) return client__replica_texclip(r, h, p, err, errlen);
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
  } else if (h->version == PROTO_VERSION_2) {
    proto_offsets2 o;
    int rc = r->protocol == PROTO_VERSION_2 ? proto_decode_delta2(p, h->length, &r->trav, &o) : PROTO_EVERSION;
    if (rc) {
      snprintf(err, errlen, "DELTA: %s", proto_strerror(rc));
      return rc;
    }
    r->delta_first = r->delta_end = 0;
    for (uint32_t k = 0; k < o.count && rc == 0; k++) rc = set_offsets(r, o.indices[k], o.q + 3 * (size_t)k);
    proto_offsets2_free(&o);
    if (rc) { /* the traversal knows the mesh: an index out of range cannot decode */
      snprintf(err, errlen, "DELTA: a vertex beyond the mesh");
      return rc;
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
    r->delta_first = r->delta_end = 0;
    proto_offsets_begin(&o, &it);
    while (proto_offsets_next(&it, &v, q)) {
      if (set_offsets(r, v, q) != 0) {
        snprintf(err, errlen, "DELTA: vertex %u of %u", v, r->mesh->vertex_count);
        return PROTO_EINVAL;
      }
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
