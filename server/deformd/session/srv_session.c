/*
 * srv_session.c — a session: one mesh, its live state (weights, sculpt offsets), its version,
 * and the server's table of sessions.
 *
 * What it owns: creation from an imported mesh (the welded topology, the SNAPSHOT pieces that
 * every join shares: srv_session_wire.c encodes them), references and lifetime, the table
 * (find, add, close: its viewers get BYE), and the jobs that make a version 2 codec's SNAPSHOT
 * pieces on the pool while joins wait. Changes themselves are operation records applied in
 * srv_session_op.c.
 *
 * DOES NOT fan changes out to viewers or keep their classes (srv_fanout.c), do I/O, or decide
 * how a slow subscriber is treated (srv_conn_deliver does).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "dfm.h"
#include "srv_session.h"
#include "srv_error.h"
#include "srv_assert.h"
#include "srv_log.h"
#include "srv_frame.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_op.h"
#include "srv_session_wire.h"
#include "srv_fanout.h"
#include "srv_anim.h"
#include "srv_texture.h"

static void free_parts(srv_session *s) {
  free(s->name);
  mesh_adjacency_fini(&s->adj);
  free(s->mesh_order);
  dfm_mesh_symbolic_free(s->mesh_symbolic);
  dfm_proxy_free(s->proxy);
  mesh_topology_fini(&s->topo);
  mesh_destroy(s->mesh);
  free(s->targets);
  free(s->weights);
  free(s->weight_version);
  free(s->offsets);
  free(s->block_version);
  free(s->vertex_version);
  proto_trav_fini(&s->trav);
  srv_frame_unref(s->triangles2);
  srv_frame_unref(s->triangles2e);
  for (int c = 0; c < SRV_CODECS; c++) {
    if (!s->codecs[c]) continue;
    srv_session_codec_fini(s->codecs[c]);
    free(s->codecs[c]);
  }
  srv_frame_unref(s->mesh_body);
  for (uint32_t t = 0; t < s->target_cap; t++) srv_frame_unref(s->target_parts[t]);
  free(s->target_parts);
  srv_texture_fini(s);
  free(s->target_version);
  srv_anim_fini(s);
  if (s->history_fini) s->history_fini(s);
  if (s->masks_fini) s->masks_fini(s);
  if (s->face_map_fini) s->face_map_fini(s);
  if (s->texclips_fini) s->texclips_fini(s);
}

void srv_session_destroy(srv_session *s) {
  if (!s) return;
  free_parts(s);
  free(s);
}

void srv_session_ref(srv_session *s) {
  SRV_ASSERT(s->refs > 0); /* invariant 8: never below zero, never revived */
  s->refs++;
}

void srv_session_unref(srv_session *s) {
  SRV_ASSERT(!s || s->refs > 0); /* invariant 8 */
  if (s && --s->refs == 0) srv_session_destroy(s);
}

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
  if (srv->on_session_added) srv->on_session_added(srv, s);
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
  for (srv_conn *c; (c = srv_fanout_first(s));) {
    srv_fanout_unsubscribe(c);
    srv_conn_finish(c, bye);
  }
  /* Connections that joined without being sent frames (a relay's link for an editor's EDITs)
   * leave too: none may keep pointing at the session once its last reference goes. */
  for (srv_conn *c = srv->conns, *next; c; c = next) {
    next = c->next;
    if (srv_fanout_session(c) != s) continue;
    srv_fanout_unsubscribe(c);
    srv_conn_finish(c, bye);
  }
  srv_frame_unref(bye);
  s->closed = 1;
  if (srv->on_session_close) srv->on_session_close(s);
  if (srv->on_session_removed) srv->on_session_removed(srv, s);
  srv_log(SRV_LOG_INFO, "session %s closed: %s", s->name, why);
  srv_session_unref(s);
}

void srv_session_mark_damaged(srv_server *s, const char *name, int64_t store_id, const char *why) {
  srv_damaged *g = realloc(s->damaged, sizeof(*g) * (s->damaged_count + 1));
  if (!g) return;
  s->damaged = g;
  srv_damaged d = {strdup(name), why ? strdup(why) : NULL, store_id, NULL};
  if (d.name && (d.why || !why)) g[s->damaged_count++] = d;
  else free(d.name), free(d.why);
}

void srv_session_damaged_readable(srv_server *s, const char *name, srv_session *readable) {
  srv_damaged *d = (srv_damaged *)srv_session_find_damaged(s, name);
  if (!d) {
    srv_session_unref(readable);
    return;
  }
  srv_session_unref(d->readable);
  d->readable = readable;
}

void srv_session_reserve_name(srv_server *s, const char *name) { srv_session_mark_damaged(s, name, 0, NULL); }

static const srv_damaged *find_name(const srv_server *s, const char *name) {
  for (uint32_t i = 0; i < s->damaged_count; i++)
    if (strcmp(s->damaged[i].name, name) == 0) return &s->damaged[i];
  return NULL;
}

const srv_damaged *srv_session_find_damaged(const srv_server *s, const char *name) {
  const srv_damaged *d = find_name(s, name);
  return d && d->why ? d : NULL;
}

void srv_session_forget_damaged(srv_server *s, const char *name) {
  for (uint32_t i = 0; i < s->damaged_count; i++)
    if (strcmp(s->damaged[i].name, name) == 0) {
      free(s->damaged[i].name);
      free(s->damaged[i].why);
      srv_session_unref(s->damaged[i].readable);
      s->damaged[i] = s->damaged[--s->damaged_count];
      return;
    }
}

int srv_session_name_taken(const srv_server *s, const char *name) { return find_name(s, name) != NULL; }

/* ---- version 2 codecs made on the pool ----------------------------------------------------- */

typedef struct codec_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session; /* referenced */
  uint8_t codec;
  srv_codec made;
  int status;
} codec_job;

static void codec_work(uv_work_t *req) {
  codec_job *j = req->data;
  j->status = srv_session_codec_init(j->session, j->codec, &j->made);
}

static void codec_done(uv_work_t *req, int status) {
  codec_job *j = req->data;
  srv_session *s = j->session;
  srv_codec *k = s->codecs[j->codec];
  j->srv->pending_jobs--;
  /* A grid the mesh does not fit (SRV_ERANGE): the transport offers lossless instead. */
  int rc = status ? SRV_EINTERNAL : j->status == MESH_EINVAL ? SRV_ERANGE : j->status ? SRV_EINTERNAL
                                                             : s->closed ? SRV_ENOSESSION : 0;
  k->job = 0;
  if (j->status == 0) {
    srv_codec keep = *k;
    *k = j->made;
    k->waiting = keep.waiting;
    k->waiting_count = keep.waiting_count;
    k->waiting_cap = keep.waiting_cap;
    k->ready = keep.ready;
  } else {
    srv_session_codec_fini(&j->made);
  }
  srv_log(rc ? SRV_LOG_WARN : SRV_LOG_DEBUG, "session %s: codec %u %s", s->name, j->codec,
          rc ? "could not be prepared" : "prepared");
  while (k->waiting_count) { /* the last to ask first */
    srv_conn *c = k->waiting[--k->waiting_count];
    if (!c->closing) k->ready(c, rc);
    srv_conn_unref(c);
  }
  free(k->waiting);
  k->waiting = NULL;
  k->waiting_cap = 0;
  if (rc && !s->closed) { /* nothing kept: a later join tries again */
    srv_session_codec_fini(k);
    free(k);
    s->codecs[j->codec] = NULL;
  }
  srv_session_unref(s);
  free(j);
}

void srv_session_codec_wait(srv_server *srv, srv_session *s, uint8_t codec, srv_conn *c,
                            void (*ready)(srv_conn *c, int status)) {
  srv_codec *k = s->codecs[codec];
  if (codec == SRV_CODEC_V1 || (k && k->attributes)) {
    ready(c, 0);
    return;
  }
  if (!k) {
    k = calloc(1, sizeof(*k));
    codec_job *j = k ? calloc(1, sizeof(*j)) : NULL;
    if (!j) {
      free(k);
      ready(c, SRV_EINTERNAL);
      return;
    }
    j->srv = srv;
    j->session = s;
    j->codec = codec;
    j->req.data = j;
    srv_session_ref(s);
    if (uv_queue_work(srv->loop, &j->req, codec_work, codec_done) != 0) {
      srv_session_unref(s);
      free(j);
      free(k);
      ready(c, SRV_EINTERNAL);
      return;
    }
    srv->pending_jobs++;
    k->job = 1;
    s->codecs[codec] = k;
  }
  if (k->waiting_count == k->waiting_cap) {
    uint32_t cap = k->waiting_cap ? 2 * k->waiting_cap : 4;
    srv_conn **g = realloc(k->waiting, sizeof(*g) * cap);
    if (!g) {
      ready(c, SRV_EINTERNAL);
      return;
    }
    k->waiting = g;
    k->waiting_cap = cap;
  }
  k->ready = ready;
  srv_conn_ref(c);
  k->waiting[k->waiting_count++] = c;
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
  s->vertex_version = calloc(nv + 1, sizeof(uint64_t));
  s->target_version = calloc(nt + 1, sizeof(uint64_t));
  if (!s->name || !s->targets || !s->weights || !s->weight_version || !s->offsets || !s->block_version ||
      !s->vertex_version || !s->target_version) {
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
  s->up = 'y'; /* the file's frame unless session.create or the store says z (srv_jobs.c) */
  /* Triangles in walk order (mesh_order.c), what protocol version 2's triangle coding codes
   * best (the vertices keep their order: every index clients see is the file's), rotated the
   * way that codec gives them back; everything that numbers triangles is built after this. */
  int rc = mesh_optimize_triangle_order(m);
  if (rc == 0) rc = srv_session_encode_parts(s);
  if (rc == 0) rc = srv_texture_encode(s);
  /* The welded topology and its adjacency are kept: every solve and brush needs them. */
  if (rc == 0) rc = mesh_topology_init(&s->topo, m, NULL, 0.0);
  if (rc == 0) rc = mesh_compute_stats(m, &s->topo, &s->stats);
  if (rc == 0) rc = mesh_adjacency_init(&s->adj, s->topo.vertex_count, s->topo.triangles, s->topo.triangle_count);
  /* The two version 2 codecs most joins ask for are ready before the first one. */
  uint8_t ready[2] = {SRV_CODEC_LOSSLESS, 1 + SRV_DEFAULT_SHIFT};
  for (int i = 0; i < 2 && rc == 0; i++) {
    srv_codec *k = calloc(1, sizeof(*k));
    rc = k ? srv_session_codec_init(s, ready[i], k) : MESH_ENOMEM;
    if (rc == MESH_EINVAL) rc = 0; /* a grid this mesh does not fit: such joins get lossless */
    if (k && k->attributes) s->codecs[ready[i]] = k;
    else free(k);
  }
  if (rc == 0) rc = srv_anim_init(s);
  if (rc) {
    snprintf(err, errlen, "%s", mesh_strerror(rc));
    srv_session_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

