/*
 * srv_stream.c — the binary stream port: HELLO (protocol version 1, or 2 with its options: a
 * codec, a tolerance, a maximum rate), the SNAPSHOT a joining viewer gets in its codec,
 * editors' EDIT frames, BULK requests (capability "bulk"), PING/PONG, the catch-up a lagging
 * viewer gets once its socket drains, and the mapping of the service's SRV_E* codes to
 * PROTO_ERR_* codes.
 *
 * Malformed frames: a bad header (magic, version, length over the limit) closes the connection,
 * since frame boundaries can no longer be trusted; a payload that does not decode, or an edit
 * that does not validate, fails only that request with an ERROR naming it.
 *
 * Its state on a connection (c->stream: what the HELLO was answered) is made at HELLO and
 * freed with the handle; the session a connection joined is the fan-out's (srv_fanout_session).
 *
 * DOES NOT change session state except through srv_session_apply(), fan frames out to viewers
 * (srv_fanout.c), or decide when a viewer lags (srv_conn_deliver does).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "dfm.h"
#include "dfm_brush.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_frame.h"
#include "srv_store.h"
#include "srv_author.h"
#include "srv_grant.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_caps.h"
#include "srv_access.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_session_wire.h"
#include "srv_history.h"
#include "srv_fanout.h"
#include "srv_presence.h"
#include "srv_gesture.h"
#include "srv_brush.h"
#include "srv_blend.h"
#include "srv_bulk.h"
#include "srv_mask.h"
#include "srv_texclip.h"
#include "srv_texture.h"
#include "srv_methods.h"
#include "srv_ports.h"

/* A stream connection's state (c->stream), made at its HELLO. */
struct srv_stream_conn {
  uint8_t role;             /* PROTO_ROLE_* (c->stage says the same to net/) */
  uint16_t protocol;        /* the HELLO's protocol version */
  uint8_t codec;            /* what its frames are encoded with (srv_class_stat.codec) */
  float max_rate;           /* Hz granted, 0 = every change */
  int forward_only;         /* a relay's link for an editor's EDITs: no SNAPSHOT, no frames */
};

static uint64_t now_ns(void) {
  /* uv_hrtime is monotonic; PING/PONG only compare times taken on one side. */
  return uv_hrtime();
}

/* The PROTO_ERR_* code an SRV_E* code is sent as in an ERROR frame. */
static uint16_t stream_code(int srv_code) {
  switch (srv_code) {
    case SRV_EACCES: return PROTO_ERR_FORBIDDEN;
    case SRV_ELIMIT: return PROTO_ERR_OVERLOADED;
    case SRV_ESHUTDOWN: return PROTO_ERR_SHUTDOWN;
    case SRV_EDAMAGED: return PROTO_ERR_SESSION_CLOSED; /* (not served until an owner closes it) */
    default: return PROTO_ERR_INVALID; /* the request, not the connection, failed */
  }
}

/* Answers for binary edits: nothing on success (the result is seen in the frames of what was
 * applied), an ERROR naming the request on failure. */
static void reply_ok(srv_reply *r, const srv_result *result) {
  (void)result;
  srv_conn_unref(r->to);
}
static void reply_error(srv_reply *r, int srv_code, const char *message) {
  srv_conn_send_error(r->to, stream_code(srv_code), r->request_id, message);
  srv_conn_unref(r->to);
}
static const srv_reply_ops stream_reply_ops = {reply_ok, reply_error};

static void on_drained(srv_conn *c) {
  srv_presence_drained(c); /* a presence update it missed while slow: the whole list now */
  srv_session *s = srv_fanout_session(c);
  if (!c->lagging || !s) return;
  if (srv_fanout_paced(c)) { /* paced: it catches up with its class's next update */
    srv_fanout_pace(c);
    return;
  }
  proto_buf b;
  proto_buf_init(&b);
  int rc = srv_session_encode_since(s, c->sent_version, PROTO_FLAG_CATCHUP, c->stream->codec, &b);
  if (rc) {
    proto_buf_fini(&b);
    c->server->stats.clients_dropped++;
    srv_conn_fail(c, PROTO_ERR_TOO_SLOW, "cannot build a catch-up (out of memory)");
    return;
  }
  c->lagging = 0;
  if (b.len == 0) {
    proto_buf_fini(&b);
    return;
  }
  srv_frame *f = srv_frame_from_buf(&b);
  if (!f || srv_conn_send(c, f) != 0) {
    srv_frame_unref(f);
    c->server->stats.clients_dropped++;
    srv_conn_fail(c, PROTO_ERR_TOO_SLOW, "cannot send a catch-up");
    return;
  }
  srv_frame_unref(f);
  c->server->stats.catchups_sent++;
  srv_log(SRV_LOG_DEBUG, "connection %u caught up from version %llu to %llu", c->id,
          (unsigned long long)c->sent_version, (unsigned long long)s->version);
  c->sent_version = s->version;
}

/* WELCOME, then the SNAPSHOT (srv_session_snapshot_parts) as one write. */
static int send_join(srv_conn *c, srv_session *s) {
  const srv_stream_conn *st = c->stream;
  proto_buf b;
  proto_buf_init(&b);
  proto_welcome w = {c->id, st->role, {s->name, (uint16_t)strlen(s->name)}};
  if (st->protocol == PROTO_VERSION_2) {
    const srv_codec *k = s->codecs[st->codec];
    proto_welcome_opts o = {PROTO_VERSION_2, st->codec == SRV_CODEC_LOSSLESS ? PROTO_CODEC_LOSSLESS : PROTO_CODEC_QUANTISED,
                            srv_codec_shift(st->codec), st->max_rate, k ? proto_grid2_tolerance(&k->grid) : 0.0f,
                            0, 0, 0};
    srv_caps_welcome(&c->caps, &o);
    if (srv_caps_has(c, PROTO_CAP_UP)) o.up = (uint8_t)s->up; /* only those who asked: others get today's bytes */
    proto_encode_welcome2(&b, s->version, &w, &o);
  } else {
    proto_encode_welcome(&b, s->version, &w);
  }
  srv_frame *welcome = srv_frame_from_buf(&b);
  srv_frame **parts = NULL;
  uint32_t n = 0;
  int rc = -1;
  if (welcome && srv_session_snapshot_parts(s, st->codec, srv_caps_has(c, PROTO_CAP_ENTROPY), &parts, &n) == 0) {
    if (srv_conn_send(c, welcome) == 0 && srv_conn_send_parts(c, parts, (int)n) == 0) rc = 0;
    for (uint32_t i = 0; i < n; i++) srv_frame_unref(parts[i]);
    free(parts);
  }
  srv_frame_unref(welcome);
  return rc;
}

/* Rates a viewer may be paced at: a few classes, each encoded once, rather than one per
 * number asked. A request gets the largest at or below it (0.1 Hz at least). */
static const float rate_ladder[] = {0.1f, 0.2f, 0.5f, 1, 2, 5, 10, 15, 20, 24, 25, 30, 50, 60, 72, 90, 100, 120, 144, 240};

static float granted_rate(float asked) {
  if (asked <= 0) return 0;
  float r = rate_ladder[0];
  for (size_t i = 0; i < sizeof(rate_ladder) / sizeof(rate_ladder[0]); i++)
    if (rate_ladder[i] <= asked) r = rate_ladder[i];
  return r;
}

/* The codec a HELLO gets: version 1; lossless; or the grid whose half step is the largest
 * within the tolerance asked, never finer than the default. */
static uint8_t codec_for(const srv_session *s, const proto_hello *h, const proto_hello_opts *o) {
  if (h->protocol_version == PROTO_VERSION) return SRV_CODEC_V1;
  if (o->codec == PROTO_CODEC_LOSSLESS) return SRV_CODEC_LOSSLESS;
  uint8_t shift = SRV_DEFAULT_SHIFT;
  if (o->tolerance > 0) shift = proto_grid2_shift_for(s->offset_quantum, o->tolerance, SRV_DEFAULT_SHIFT);
  return (uint8_t)(1 + shift);
}

/* The codec's pieces are ready (or could not be made): the join goes on. */
static void join_ready(srv_conn *c, int status) {
  srv_stream_conn *st = c->stream;
  srv_session *s = srv_fanout_session(c);
  if (status == SRV_ERANGE && s && st->codec != SRV_CODEC_LOSSLESS) {
    /* A grid this mesh does not fit: lossless instead, as WELCOME says. */
    st->codec = SRV_CODEC_LOSSLESS;
    srv_session_codec_wait(c->server, s, st->codec, c, join_ready);
    return;
  }
  if (status || !s || s->closed) {
    srv_fanout_unsubscribe(c); /* leaves it: it was not sent frames yet */
    if (status == SRV_ENOSESSION || (s && s->closed)) srv_conn_fail(c, PROTO_ERR_SESSION_CLOSED, "the session is closed");
    else srv_conn_fail(c, PROTO_ERR_OVERLOADED, "out of memory preparing the snapshot");
    return;
  }
  c->stat_slot = srv_conn_stat_slot(c->server, st->codec, st->max_rate);
  if (send_join(c, s) != 0) {
    srv_fanout_unsubscribe(c);
    srv_conn_fail(c, PROTO_ERR_OVERLOADED, "out of memory building the snapshot");
    return;
  }
  c->sent_version = s->version;
  st->max_rate = srv_fanout_subscribe(s, c, st->codec, st->max_rate);
  c->server->stats.classes[c->stat_slot].viewers++;
  srv_texture_send(s, c); /* its materials and images, once (capability "texture") */
  /* After its SNAPSHOT: the participants as they are now, when it asked for presence. */
  if (srv_presence_join(s, c, st->role, srv_caps_has(c, PROTO_CAP_PRESENCE)) != 0)
    srv_log(SRV_LOG_WARN, "connection %u: out of memory for presence: it is not listed", c->id);
  if (c->server->on_joined) c->server->on_joined(c);
  srv_mask_send(s, c);
  if (srv_texclip_join(s, c) != 0) srv_log(SRV_LOG_WARN, "connection %u: its texture clips were not queued", c->id);
  srv_log(SRV_LOG_INFO, "connection %u (%s) joined session %s as %s at version %llu (protocol %u, codec %u, %g Hz)",
          c->id, c->peer, s->name, st->role == PROTO_ROLE_EDITOR ? "editor" : "viewer",
          (unsigned long long)s->version, st->protocol, st->codec, (double)st->max_rate);
}

/* The name this connection's operations are recorded under (HELLO option or EDIT AUTHOR).
 * -1 for a name with control characters; a name the store cannot intern leaves the old one. */
static int adopt_author(srv_conn *c, proto_str author) {
  char name[PROTO_MAX_AUTHOR + 1];
  if (author.len == 0 || author.len > PROTO_MAX_AUTHOR) return -1;
  if (c->author_from_token) return 0; /* a token's user is its author, whatever a name says */
  memcpy(name, author.ptr, author.len);
  name[author.len] = '\0';
  for (uint32_t i = 0; i < author.len; i++)
    if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) return -1;
  uint32_t id;
  if (srv_authors_intern(&c->server->authors, c->server->store, name, &id) == 0) c->author = id;
  return 0;
}
/* A HELLO with a wrong token: the ERROR and the close, after the delay srv_access_login asked
 * for (guessing is slowed; a right token never waits). */
typedef struct hello_refusal {
  char why[PROTO_MAX_NAME + 160];
} hello_refusal;

static void refuse_hello_now(srv_conn *c, void *arg, int gone) {
  hello_refusal *r = arg;
  if (!gone) srv_conn_fail(c, PROTO_ERR_FORBIDDEN, r->why);
  free(r);
}

static void refuse_hello(srv_server *srv, srv_conn *c, uint32_t delay, const char *why) {
  hello_refusal *r = delay ? malloc(sizeof(*r)) : NULL;
  if (r) {
    snprintf(r->why, sizeof(r->why), "%s", why);
    if (srv_access_answer_later(srv, c, delay, refuse_hello_now, r) == 0) return;
    free(r);
  }
  srv_conn_fail(c, PROTO_ERR_FORBIDDEN, why);
}

static void on_hello(srv_conn *c, const uint8_t *p, size_t n) {
  srv_server *srv = c->server;
  proto_hello h;
  proto_hello_opts opt;
  int rc = proto_decode_hello2(p, n, &h, &opt);
  if (rc == PROTO_EVERSION) {
    char why[128];
    snprintf(why, sizeof(why), "protocol version %u is not supported (this server speaks %d to %d)",
             h.protocol_version, PROTO_VERSION, PROTO_VERSION_MAX);
    srv_conn_fail(c, PROTO_ERR_MALFORMED, why);
    return;
  }
  if (rc) {
    char why[128];
    const char *caps_why = proto_hello_caps_why(p, n);
    snprintf(why, sizeof(why), "malformed HELLO: %s", caps_why ? caps_why : proto_strerror(rc));
    srv_conn_fail(c, PROTO_ERR_MALFORMED, why);
    return;
  }
  /* Decided from the HELLO alone; it counts only once the join is accepted (WELCOME says it). */
  c->caps = srv_caps_grant(h.protocol_version, h.role, &opt);
  char name[PROTO_MAX_NAME + 1];
  memcpy(name, h.session.ptr, h.session.len);
  name[h.session.len] = '\0';
  /* Who may, before anything is looked up (srv_access.c): with tokens, a viewer needs one too,
   * and a refusal reads the same whether the session exists or not. */
  char why[PROTO_MAX_NAME + 160];
  if (srv_access_enabled(&srv->access)) {
    if (h.token.len == 0) {
      srv_conn_fail(c, PROTO_ERR_FORBIDDEN, "this server needs a token: send it in HELLO");
      return;
    }
    uint32_t delay = 0;
    if (srv_access_login(srv, c, h.token.ptr, h.token.len, &delay, why, sizeof(why)) != 0) {
      refuse_hello(srv, c, delay, why);
      return;
    }
  }
  srv_role need = h.role == PROTO_ROLE_EDITOR ? SRV_ROLE_EDITOR : SRV_ROLE_VIEWER;
  if (srv_access_refusal(srv, &c->grant, need, name, h.role == PROTO_ROLE_EDITOR ? "editing" : "watching", why,
                         sizeof(why)) != 0) {
    srv_conn_fail(c, PROTO_ERR_FORBIDDEN, why);
    return;
  }
  srv_session *s = srv_session_find(srv, name);
  if (!s && srv->route_join && srv->route_join(c, name, p, n, on_hello)) return; /* a relay loads it */
  const srv_damaged *damaged = s ? NULL : srv_session_find_damaged(srv, name);
  if (damaged) {
    char msg[1000];
    snprintf(msg, sizeof(msg), "session '%s' is damaged in the store: %s", name, damaged->why);
    srv_conn_fail(c, stream_code(SRV_EDAMAGED), msg);
    return;
  }
  if (!s) {
    /* Name the sessions there are that this connection may watch, so that a viewer can say what
     * to join instead (the ERROR message holds 1024 bytes: what does not fit is counted). */
    char list[1000];
    size_t len = (size_t)snprintf(list, sizeof(list), "unknown session '%s'; this server has ", name);
    uint32_t listed = 0, left = 0;
    for (srv_session *x = srv->sessions; x; x = x->next) {
      if (x->closed || !srv_access_allows(srv, &c->grant, SRV_ROLE_VIEWER, x->name)) continue;
      if (len + strlen(x->name) + 40 < sizeof(list))
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s'%s'", listed++ ? ", " : "", x->name);
      else
        left++;
    }
    if (!listed && !left) snprintf(list + len, sizeof(list) - len, "no session");
    else if (left) snprintf(list + len, sizeof(list) - len, " and %u more", left);
    srv_conn_fail(c, PROTO_ERR_UNKNOWN_SESSION, list);
    return;
  }
  if (opt.author.len && adopt_author(c, opt.author) != 0) {
    srv_conn_fail(c, PROTO_ERR_MALFORMED, "malformed HELLO: an author name may not hold control characters");
    return;
  }
  if (!c->stream) c->stream = calloc(1, sizeof(*c->stream));
  if (!c->stream || srv_fanout_join(c, s) != 0) {
    srv_conn_fail(c, PROTO_ERR_OVERLOADED, "out of memory");
    return;
  }
  srv_stream_conn *st = c->stream;
  st->role = h.role;
  c->stage = h.role == PROTO_ROLE_EDITOR ? SRV_STAGE_EDITOR : SRV_STAGE_VIEWER;
  st->protocol = h.protocol_version;
  if (h.role == PROTO_ROLE_EDITOR && proto_hello_forward(p, n)) {
    /* A relay forwards an editor's EDITs here: WELCOME, and nothing else but ERRORs naming
     * its requests (its viewers get the frames from the relay). */
    proto_buf b;
    proto_buf_init(&b);
    proto_welcome w = {c->id, st->role, {s->name, (uint16_t)strlen(s->name)}};
    proto_encode_welcome(&b, s->version, &w);
    srv_frame *f = srv_frame_from_buf(&b);
    if (f) srv_conn_send(c, f);
    srv_frame_unref(f);
    st->forward_only = 1;
    srv_log(SRV_LOG_INFO, "connection %u (%s) forwards edits of session %s from a relay", c->id, c->peer, s->name);
    return;
  }
  st->codec = codec_for(s, &h, &opt);
  st->max_rate = granted_rate(opt.max_rate);
  srv_session_codec_wait(srv, s, st->codec, c, join_ready);
}

/* Copies a decoded index list into a malloc'ed array (NULL for an empty list). */
static uint32_t *index_array(const proto_index_list *l, int *oom) {
  if (l->count == 0) return NULL;
  uint32_t *a = malloc(sizeof(uint32_t) * l->count);
  if (!a) {
    *oom = 1;
    return NULL;
  }
  for (uint32_t i = 0; i < l->count; i++) a[i] = proto_index_at(l, i);
  return a;
}

/* Gesture, brush, reset and blend-pin edits: answered asynchronously, failures as ERROR frames. */
static void on_gesture_edit(srv_conn *c, srv_session *s, const proto_edit *e) {
  srv_server *srv = c->server;
  char why[256];
  int rc = 0;
  srv_conn_ref(c);
  srv_reply reply = {&stream_reply_ops, c, e->request_id};
  if (e->kind == PROTO_EDIT_GESTURE_BEGIN) {
    const proto_gesture_begin *b = &e->begin;
    int oom = 0;
    uint32_t *h = index_array(&b->handle, &oom), *roi = index_array(&b->roi, &oom), *an = index_array(&b->anchors, &oom);
    srv_gesture_spec spec = {.id = b->gesture, .author = srv_conn_author(c), .mode = (dfm_mode)b->mode,
                             .iterations = b->iterations, .handle = h, .handle_count = b->handle.count,
                             .pick = b->pick == PROTO_NO_PICK ? -1 : (int64_t)b->pick,
                             .handle_radius = b->handle_radius, .roi = roi, .roi_count = b->roi.count,
                             .roi_radius = b->roi_radius, .anchors = an, .anchor_count = b->anchors.count};
    if (oom) {
      snprintf(why, sizeof(why), "out of memory");
      rc = SRV_EINTERNAL;
    } else {
      rc = srv_gesture_begin(srv, s, &spec, c->id, reply, why, sizeof(why));
    }
    free(h);
    free(roi);
    free(an);
  } else if (e->kind == PROTO_EDIT_GESTURE_DRAG) {
    dfm_xform xf;
    for (int k = 0; k < 3; k++) {
      xf.translate[k] = e->drag.translate[k];
      xf.pivot[k] = e->drag.pivot[k];
    }
    for (int k = 0; k < 4; k++) xf.rotation[k] = e->drag.rotate[k];
    rc = srv_gesture_drag(srv, s, e->drag.gesture, &xf, e->drag.has_pivot, reply, why, sizeof(why));
  } else if (e->kind == PROTO_EDIT_GESTURE_END) {
    rc = srv_gesture_end(srv, s, e->gesture, reply, why, sizeof(why));
  } else if (e->kind == PROTO_EDIT_RESET) {
    int oom = 0;
    uint32_t *list = index_array(&e->reset, &oom), n = 0;
    uint64_t version;
    if (oom) {
      snprintf(why, sizeof(why), "out of memory");
      rc = SRV_EINTERNAL;
    } else {
      rc = srv_session_reset(srv, s, srv_conn_author(c), list, e->reset.count, &version, &n, why, sizeof(why));
    }
    free(list);
    if (rc == 0) srv_conn_unref(c); /* answered: nothing to say on success */
  } else if (e->kind == PROTO_EDIT_BRUSH) {
    dfm_brush brush = {.kind = (dfm_brush_kind)e->brush.brush, .falloff = (dfm_falloff)e->brush.falloff,
                       .mirror_x = (e->brush.flags & PROTO_BRUSH_MIRROR_X) != 0, .mirror_axis = e->brush.mirror};
    brush.front_only = (e->brush.flags & PROTO_BRUSH_FRONT_ONLY) != 0;
    brush.autosmooth = (double)(e->brush.flags >> PROTO_BRUSH_AUTOSMOOTH_SHIFT) / 15.0;
    dfm_brush_sample *smp = malloc(sizeof(*smp) * ((size_t)e->brush.count + 1));
    if (!smp) {
      snprintf(why, sizeof(why), "out of memory");
      rc = SRV_EINTERNAL;
    } else {
      for (uint32_t i = 0; i < e->brush.count; i++) {
        proto_brush_sample b;
        proto_brush_sample_at(&e->brush, i, &b);
        for (int k = 0; k < 3; k++) smp[i].center[k] = b.center[k], smp[i].direction[k] = b.direction[k];
        smp[i].radius = b.radius;
        smp[i].strength = b.strength;
        /* With FRONT_ONLY the directions are the viewer's: the first one is the stroke's view,
         * and grab drags along the path alone. */
        if (brush.front_only) {
          if (i == 0)
            for (int k = 0; k < 3; k++) brush.view[k] = smp[0].direction[k];
          smp[i].direction[0] = smp[i].direction[1] = smp[i].direction[2] = 0;
        }
      }
      rc = srv_brush_stroke_piece(srv, s, &brush, smp, e->brush.count, srv_conn_author(c), c->id,
                                  (e->brush.flags & PROTO_BRUSH_CONTINUE) != 0, reply, why, sizeof(why));
      free(smp);
    }
  } else if (e->kind == PROTO_EDIT_MASK) {
    rc = srv_mask_edit(srv, s, &e->mask, srv_conn_author(c), reply, why, sizeof(why));
  } else if (e->kind == PROTO_EDIT_BLEND_PINS) {
    rc = srv_blend_solve_edit(srv, s, &e->blend_pins, srv_conn_author(c), reply, why, sizeof(why));
  } else {
    snprintf(why, sizeof(why), "edit kind %u is not supported", e->kind);
    rc = SRV_EPARAMS;
  }
  if (rc) srv_reply_error(&reply, rc, why);
}

/* UNDO, REDO and AUTHOR: the history of this editor's author (srv_history_wait.c), in order with
 * the strokes and drags it sent before. Success is seen in the frames of what was applied;
 * failures are ERRORs naming the request. */
static void on_history_edit(srv_conn *c, srv_session *s, const proto_edit *e) {
  srv_server *srv = c->server;
  if (e->kind == PROTO_EDIT_AUTHOR) {
    if (adopt_author(c, e->author) != 0)
      srv_conn_send_error(c, PROTO_ERR_INVALID, e->request_id, "an author name may not hold control characters");
    else {
      srv_mask_send(s, c); /* the mask of the author it now edits as (capability "mask") */
      srv_presence_renamed(srv, c);
    }
    return;
  }
  srv_conn_ref(c);
  srv_reply reply = {&stream_reply_ops, c, e->request_id};
  srv_history_ask(srv, s, srv_conn_author(c), e->kind == PROTO_EDIT_REDO, reply);
}

static void on_edit(srv_conn *c, const uint8_t *p, size_t n) {
  srv_server *srv = c->server;
  proto_edit e;
  int rc = proto_decode_edit(p, n, &srv->limits, &e);
  uint32_t rid = n >= 4 ? proto_load_u32(p) : 0;
  char why[256];
  if (rc) {
    snprintf(why, sizeof(why), "malformed EDIT: %s", proto_strerror(rc));
    srv_conn_send_error(c, rc == PROTO_ENONFINITE ? PROTO_ERR_INVALID : PROTO_ERR_MALFORMED, rid, why);
    return;
  }
  if (c->stream->role != PROTO_ROLE_EDITOR) {
    srv_conn_send_error(c, PROTO_ERR_FORBIDDEN, rid, "this connection joined as a viewer: edits are refused");
    return;
  }
  srv_session *s = srv_fanout_session(c);
  if (!s) {
    srv_conn_send_error(c, PROTO_ERR_SESSION_CLOSED, rid, "the session is closed");
    return;
  }
  char failed[160];
  if (srv->store && e.kind != PROTO_EDIT_GESTURE_END && e.kind != PROTO_EDIT_AUTHOR &&
      srv_store_failed(srv->store, failed, sizeof(failed))) {
    snprintf(why, sizeof(why), "the store cannot write (%s): edits are refused until it can", failed);
    srv_conn_send_error(c, PROTO_ERR_INVALID, rid, why);
    return;
  }
  srv_presence_touch(s, c); /* not idle */
  if (e.kind == PROTO_EDIT_UNDO || e.kind == PROTO_EDIT_REDO || e.kind == PROTO_EDIT_AUTHOR) {
    on_history_edit(c, s, &e);
    return;
  }
  if (e.kind >= PROTO_EDIT_GESTURE_BEGIN) {
    on_gesture_edit(c, s, &e);
    return;
  }
  uint32_t count = e.kind == PROTO_EDIT_WEIGHTS ? e.weights.count : e.offsets.count;
  uint32_t *idx = malloc(sizeof(uint32_t) * (count + 1));
  float *val = e.kind == PROTO_EDIT_WEIGHTS ? malloc(sizeof(float) * (count + 1)) : NULL;
  int32_t *q = e.kind == PROTO_EDIT_OFFSETS ? malloc(sizeof(int32_t) * 3 * ((size_t)count + 1)) : NULL;
  if (!idx || (e.kind == PROTO_EDIT_WEIGHTS && !val) || (e.kind == PROTO_EDIT_OFFSETS && !q)) {
    srv_conn_send_error(c, PROTO_ERR_INVALID, rid, "out of memory");
    goto out;
  }
  proto_iter it;
  uint32_t k = 0;
  if (e.kind == PROTO_EDIT_WEIGHTS) {
    proto_weights_begin(&e.weights, &it);
    while (proto_weights_next(&it, &idx[k], &val[k])) k++;
  } else {
    proto_offsets_begin(&e.offsets, &it);
    while (proto_offsets_next(&it, &idx[k], q + 3 * (size_t)k)) k++;
  }
  srv_op op = {.kind = e.kind == PROTO_EDIT_WEIGHTS ? SRV_OP_SET_WEIGHTS : SRV_OP_SET_OFFSETS, .author = srv_conn_author(c), .cause = SRV_CAUSE_EDIT, .count = k, .indices = idx, .values = val, .q = q};
  if (srv_session_check(s, &op, why, sizeof(why)) != 0) {
    srv_conn_send_error(c, PROTO_ERR_INVALID, rid, why);
    goto out;
  }
  srv_session_apply(srv, s, &op);
out:
  free(idx);
  free(val);
  free(q);
}

/* A BULK answer (GET: the array; SET: the version after it), or the ERROR naming the request. */
static void send_bulk(srv_conn *c, uint64_t version, const proto_bulk_answer *a, const float *values) {
  proto_buf b;
  proto_buf_init(&b);
  srv_frame *f = proto_encode_bulk_answer(&b, version, a, values) == 0 ? srv_frame_from_buf(&b) : NULL;
  if (!f) {
    proto_buf_fini(&b);
    srv_conn_send_error(c, PROTO_ERR_OVERLOADED, a->request_id, "out of memory building the BULK answer");
    return;
  }
  srv_conn_send(c, f);
  srv_frame_unref(f);
}

static void bulk_answered(srv_server *srv, void *arg, int status, const proto_bulk_answer *a, const float *values,
                          uint64_t version, const char *err) {
  (void)srv;
  srv_conn *c = arg;
  if (status) srv_conn_send_error(c, stream_code(status), a->request_id, err);
  else send_bulk(c, version, a, values);
  srv_conn_unref(c);
}

/* BULK (docs/protocol.md §15): only from connections granted "bulk" (others get what any type
 * a client may not send gets); a SET needs an editor, like EDIT, and the primary's loop. */
static void on_bulk(srv_conn *c, const uint8_t *p, size_t n) {
  srv_server *srv = c->server;
  char why[256];
  if (!srv_caps_has(c, PROTO_CAP_BULK) || c->stream->forward_only) {
    srv_conn_send_error(c, PROTO_ERR_MALFORMED, 0,
                        "message type 13 is not accepted from clients (BULK needs the \"bulk\" capability in HELLO)");
    return;
  }
  proto_bulk_request r;
  int rc = proto_decode_bulk_request(p, n, &r);
  uint32_t rid = n >= 4 ? proto_load_u32(p) : 0;
  if (rc) {
    snprintf(why, sizeof(why), "malformed BULK: %s", proto_strerror(rc));
    srv_conn_send_error(c, PROTO_ERR_MALFORMED, rid, why);
    return;
  }
  srv_session *s = srv_fanout_session(c);
  if (!s) {
    srv_conn_send_error(c, PROTO_ERR_SESSION_CLOSED, rid, "the session is closed");
    return;
  }
  if (r.op == PROTO_BULK_GET) {
    srv_conn_ref(c);
    rc = srv_bulk_get(srv, s, &r, bulk_answered, c, why, sizeof(why));
    if (rc) {
      srv_conn_send_error(c, stream_code(rc), rid, why);
      srv_conn_unref(c);
    }
    return;
  }
  char failed[160];
  if (c->stream->role != PROTO_ROLE_EDITOR) {
    srv_conn_send_error(c, PROTO_ERR_FORBIDDEN, rid, "this connection joined as a viewer: BULK SET needs an editor");
    return;
  }
  if (srv->route_edit) { /* in a cluster the session's primary applies edits (srv_forward.c): not forwarded yet */
    srv_conn_send_error(c, PROTO_ERR_INVALID, rid, "BULK SET is not served in a cluster (--redis): use sculpt.set");
    return;
  }
  if (srv->store && srv_store_failed(srv->store, failed, sizeof(failed))) {
    snprintf(why, sizeof(why), "the store cannot write (%s): edits are refused until it can", failed);
    srv_conn_send_error(c, PROTO_ERR_INVALID, rid, why);
    return;
  }
  uint64_t version = 0;
  rc = srv_bulk_set(srv, s, &r, srv_conn_author(c), &version, why, sizeof(why));
  if (rc) {
    srv_conn_send_error(c, stream_code(rc), rid, why);
    return;
  }
  proto_bulk_answer a = {r.request_id, PROTO_BULK_SET, PROTO_BULK_SCULPT, r.flags, 0, r.first, r.count,
                         (r.flags & PROTO_BULK_WELDED) ? s->topo.vertex_count : s->mesh->vertex_count, NULL};
  send_bulk(c, version, &a, NULL);
}

/* A forwarded EDIT AUTHOR: the name is adopted here as well, for this node's presence list. */
static void author_here(srv_conn *c, const uint8_t *p, size_t n) {
  proto_edit e;
  if (n < 5 || p[4] != PROTO_EDIT_AUTHOR || proto_decode_edit(p, n, &c->server->limits, &e) != 0) return;
  if (adopt_author(c, e.author) == 0) srv_presence_renamed(c->server, c);
}

/* PRESENCE from a connection granted "presence" (docs/protocol.md §16): its cursor, camera and
 * ABOUT; from any other, the answer every type it may not send gets. */
static void on_presence(srv_conn *c, const uint8_t *p, size_t n) {
  srv_session *s = srv_fanout_session(c);
  char why[160];
  if (!srv_caps_has(c, PROTO_CAP_PRESENCE) || c->stream->forward_only) {
    snprintf(why, sizeof(why), "message type %u is not accepted from clients not granted \"presence\"", PROTO_PRESENCE);
    srv_conn_send_error(c, PROTO_ERR_MALFORMED, 0, why);
    return;
  }
  if (!s) return; /* its session closed: nothing to tell anyone */
  int rc = srv_presence_frame(s, c, p, n, why, sizeof(why));
  if (rc) srv_conn_send_error(c, rc == PROTO_ENONFINITE || rc == PROTO_EINVAL ? PROTO_ERR_INVALID : PROTO_ERR_MALFORMED, 0, why);
}

static void on_frame(srv_conn *c, const proto_header *h, const uint8_t *p) {
  if (c->stage == SRV_STAGE_GREETING) {
    if (h->type == PROTO_HELLO)
      on_hello(c, p, h->length);
    else
      srv_conn_fail(c, PROTO_ERR_MALFORMED, "the first frame must be HELLO");
    return;
  }
  switch (h->type) {
    case PROTO_EDIT:
      /* An editor on a relay: the session's owner applies it (srv_forward.c). */
      if (c->stream->role == PROTO_ROLE_EDITOR && c->server->route_edit &&
          c->server->route_edit(c, p - PROTO_HEADER_SIZE, PROTO_HEADER_SIZE + (size_t)h->length)) {
        author_here(c, p, h->length); /* the owner records it; this node's presence names it too */
        break;
      }
      on_edit(c, p, h->length);
      break;
    case PROTO_PING: {
      proto_ping ping;
      if (proto_decode_ping(p, h->length, &ping) != 0) {
        srv_conn_send_error(c, PROTO_ERR_MALFORMED, 0, "malformed PING");
        break;
      }
      ping.t1_ns = now_ns();
      proto_buf b;
      proto_buf_init(&b);
      proto_encode_ping(&b, PROTO_PONG, &ping);
      srv_frame *f = srv_frame_from_buf(&b);
      if (f) {
        srv_conn_send(c, f);
        srv_frame_unref(f);
      }
      break;
    }
    case PROTO_PONG:
      break;
    case PROTO_BULK:
      on_bulk(c, p, h->length);
      break;
    case PROTO_PRESENCE:
      on_presence(c, p, h->length);
      break;
    case PROTO_BYE:
      srv_conn_finish(c, NULL);
      break;
    case PROTO_ERROR: {
      proto_error e;
      if (proto_decode_error(p, h->length, &e) == 0)
        srv_log(SRV_LOG_INFO, "connection %u reports error %u: %.*s", c->id, e.code, (int)e.message.len,
                e.message.ptr);
      break;
    }
    default: {
      char why[64];
      snprintf(why, sizeof(why), "message type %u is not accepted from clients", h->type);
      srv_conn_send_error(c, PROTO_ERR_MALFORMED, 0, why);
      break;
    }
  }
}

static void on_data(srv_conn *c) {
  size_t at = 0;
  while (!c->closing && !c->finishing && c->rlen - at >= PROTO_HEADER_SIZE) {
    proto_header h;
    int rc = proto_header_decode(c->rbuf + at, &c->server->limits, &h);
    if (rc) {
      char why[128];
      snprintf(why, sizeof(why), "bad frame header: %s", proto_strerror(rc));
      srv_conn_fail(c, PROTO_ERR_MALFORMED, why);
      return;
    }
    if (c->rlen - at - PROTO_HEADER_SIZE < h.length) break; /* wait for the rest */
    on_frame(c, &h, c->rbuf + at + PROTO_HEADER_SIZE);
    at += PROTO_HEADER_SIZE + h.length;
  }
  if (c->closing) return;
  if (at > 0) {
    memmove(c->rbuf, c->rbuf + at, c->rlen - at);
    c->rlen -= at;
  }
}

/* Closing: the viewer leaves its session and the gestures it began end. */
static void on_close(srv_conn *c) {
  if (c->stat_slot >= 0) c->server->stats.classes[c->stat_slot].viewers--;
  c->stat_slot = -1;
  srv_fanout_unsubscribe(c);
  srv_presence_leave(c->server, c);
  for (srv_session *x = c->server->sessions; x; x = x->next) srv_gesture_drop_owner(c->server, x, c->id);
  if (c->server->on_conn_closed) c->server->on_conn_closed(c);
}

static void refuse(srv_conn *c, int srv_code, const char *why) { srv_conn_fail(c, stream_code(srv_code), why); }

/* The handle goes, and what HELLO made on it with it: not at the close, so that nothing that
 * still holds a reference to a closed connection (an answer on its way) finds it gone. */
static void on_free(srv_conn *c) {
  srv_fanout_release(c);
  free(c->stream);
  c->stream = NULL;
}

/* A WebSocket message (the /ws/stream endpoint of srv_http.c) is exactly one frame: its header is
 * checked as on the TCP port, and its length must be the message's. */
static void on_message(srv_conn *c, const uint8_t *p, size_t n) {
  proto_header h;
  char why[160];
  int rc = n >= PROTO_HEADER_SIZE ? proto_header_decode(p, &c->server->limits, &h) : PROTO_ETRUNCATED;
  if (rc) {
    snprintf(why, sizeof(why), "bad frame header: %s", proto_strerror(rc));
    srv_conn_fail(c, PROTO_ERR_MALFORMED, why);
    return;
  }
  if ((size_t)h.length != n - PROTO_HEADER_SIZE) {
    snprintf(why, sizeof(why), "a WebSocket message holds exactly one frame: this one has %zu bytes, its header says %u",
             n, (unsigned)(PROTO_HEADER_SIZE + h.length));
    srv_conn_fail(c, PROTO_ERR_MALFORMED, why);
    return;
  }
  on_frame(c, &h, p + PROTO_HEADER_SIZE);
}

const srv_conn_ops srv_stream_ops = {on_data, on_drained, on_close, refuse, on_message, on_free};
