/*
 * srv_session.c — a session: one mesh, its live state (weights, sculpt offsets), its version,
 * the viewers subscribed to it, and the server's table of sessions.
 *
 * What it owns: creation from an imported mesh (the welded topology, the SNAPSHOT pieces that
 * every join shares), the table (find, add, close), subscriptions and the fan-out of applied
 * ops, the catch-up frames for a receiver that fell behind, and copies of the state for jobs.
 * Changes themselves are operation records applied in srv_op.c.
 *
 * DOES NOT do I/O or decide how a slow subscriber is treated (srv_conn_deliver does).
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
  if (s->history_fini) s->history_fini(s);
}

void srv_session_destroy(srv_session *s) {
  if (!s) return;
  free_parts(s);
  free(s);
}

void srv_session_ref(srv_session *s) { s->refs++; }

/* ---- the server's table ---------------------------------------------------------------------- */

srv_session *srv_session_find(srv_server *srv, const char *name) {
  for (srv_session *x = srv->sessions; x; x = x->next)
    if (strcmp(x->name, name) == 0) return x;
  return NULL;
}

void srv_session_add(srv_server *srv, srv_session *s) {
  s->next = srv->sessions;
  srv->sessions = s;
  srv->session_count++;
}

void srv_session_close(srv_server *srv, srv_session *s, const char *why) {
  srv_session **pp = &srv->sessions;
  while (*pp && *pp != s) pp = &(*pp)->next;
  if (*pp) {
    *pp = s->next;
    srv->session_count--;
  }
  proto_buf b;
  proto_buf_init(&b);
  proto_encode_bye(&b, PROTO_ERR_SESSION_CLOSED, why);
  srv_frame *bye = srv_frame_from_buf(&b);
  while (s->subscribers) {
    srv_conn *c = s->subscribers;
    srv_session_unsubscribe(c);
    srv_conn_finish(c, bye);
  }
  srv_frame_unref(bye);
  s->closed = 1;
  if (srv->on_session_close) srv->on_session_close(s);
  srv_log(SRV_LOG_INFO, "session %s closed: %s", s->name, why);
  srv_session_unref(s);
}

void srv_session_reserve_name(srv_server *s, const char *name) {
  char **g = realloc(s->reserved, sizeof(char *) * (s->reserved_count + 1));
  if (!g) return;
  s->reserved = g;
  if ((g[s->reserved_count] = strdup(name))) s->reserved_count++;
}

int srv_session_name_taken(const srv_server *s, const char *name) {
  for (uint32_t i = 0; i < s->reserved_count; i++)
    if (strcmp(s->reserved[i], name) == 0) return 1;
  return 0;
}

/* ---- subscribers ----------------------------------------------------------------------------- */

void srv_session_subscribe(srv_session *s, srv_conn *c) {
  c->session = s;
  c->sub_next = s->subscribers;
  s->subscribers = c;
  s->subscriber_count++;
}

void srv_session_unsubscribe(srv_conn *c) {
  srv_session *s = c->session;
  if (!s) return;
  srv_conn **pp = &s->subscribers;
  while (*pp && *pp != c) pp = &(*pp)->sub_next;
  if (*pp) {
    *pp = c->sub_next;
    s->subscriber_count--;
  }
  c->sub_next = NULL;
  c->session = NULL;
}

void srv_session_publish(srv_session *s, srv_frame *f, uint64_t version) {
  for (srv_conn *c = s->subscribers, *next; c; c = next) {
    next = c->sub_next; /* delivering may close c, which unsubscribes it */
    srv_conn_deliver(c, f, version);
  }
}

/* ---- snapshot pieces ------------------------------------------------------------------------- */

void srv_session_unref(srv_session *s) {
  if (s && --s->refs == 0) srv_session_destroy(s);
}

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

int srv_session_encode_target(srv_session *s, uint32_t t) {
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
  proto_target_desc d = srv_session_target_desc(s, t);
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
    rc = srv_session_encode_target(s, t);
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
    proto_target_desc d = srv_session_target_desc(s, t);
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
