/*
 * srv_fanout.c — the fan-out of a session's changes to the connections that joined it.
 *
 * What it owns: which session each stream connection joined (c->sub, made at HELLO: a relay's
 * editor link and a join waiting for its codec's SNAPSHOT pieces have joined without being
 * sent frames yet), the session's subscribers, and their classes. A class is the subscribers
 * that get the same bytes: one codec (protocol version 1, or version 2 on one grid) and one
 * rate. A class at rate 0 gets each op's frame as it is applied (srv_fanout_publish, called by
 * srv_session_apply); a paced class gets, at most `rate` times a second, one coalesced update
 * per member (everything changed since the version it was last sent: the latest state wins,
 * changed vertex sets merge), from a timer of its own, so a slow link never delays anyone else.
 *
 * DOES NOT do I/O or decide how a slow subscriber is treated (srv_conn_deliver does), encode
 * frames (srv_session_op.c, srv_session_wire.c), or send the SNAPSHOT a join gets (srv_stream.c).
 */
#include <math.h>
#include <stdlib.h>

#include <uv.h>
#include "proto.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_frame.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_session_wire.h"
#include "srv_fanout.h"

/* Subscribers that are sent the same bytes: one codec, one rate. */
typedef struct srv_class {
  struct srv_class *next;
  srv_session *session;      /* NULL once the session let go of it (the timer is closing) */
  uint8_t codec;
  float rate;
  uint32_t members;
  uint64_t last_ms;          /* paced: when members were last sent an update */
  uv_timer_t *timer;         /* paced: runs while a change waits */
} srv_class;

/* A stream connection's place in a session (c->sub). */
struct srv_subscriber {
  srv_session *session;      /* the session it joined; NULL once it left */
  srv_class *cls;            /* the subscribers it shares frames with; NULL when not subscribed */
  uint8_t codec;             /* what its frames are encoded with */
  srv_conn *next;            /* the session's subscribers (srv_session.subscribers) */
};

int srv_fanout_join(srv_conn *c, srv_session *s) {
  if (!c->sub && !(c->sub = calloc(1, sizeof(*c->sub)))) return SRV_EINTERNAL;
  c->sub->session = s;
  return 0;
}

srv_session *srv_fanout_session(const srv_conn *c) { return c->sub ? c->sub->session : NULL; }

void srv_fanout_release(srv_conn *c) {
  free(c->sub);
  c->sub = NULL;
}

srv_conn *srv_fanout_first(const srv_session *s) { return s->subscribers; }

srv_conn *srv_fanout_next(const srv_conn *c) { return c->sub ? c->sub->next : NULL; }

/* ---- classes --------------------------------------------------------------------------------- */

static void class_timer_closed(uv_handle_t *h) {
  srv_class *cls = h->data;
  free(h);
  free(cls);
}

/* The class is empty: out of the session's list; freed once its timer has closed. */
static void class_drop(srv_session *s, srv_class *cls) {
  srv_class **pp = &s->classes;
  while (*pp && *pp != cls) pp = &(*pp)->next;
  if (*pp) *pp = cls->next;
  cls->session = NULL;
  if (cls->timer) {
    uv_timer_stop(cls->timer);
    uv_close((uv_handle_t *)cls->timer, class_timer_closed);
  } else {
    free(cls);
  }
}

static void pace_now(uv_timer_t *t);

/* The class of (codec, rate), made when new. NULL when out of memory. */
static srv_class *class_for(srv_session *s, uv_loop_t *loop, uint8_t codec, float rate) {
  for (srv_class *x = s->classes; x; x = x->next)
    if (x->codec == codec && x->rate == rate) return x;
  srv_class *cls = calloc(1, sizeof(*cls));
  if (!cls) return NULL;
  cls->session = s;
  cls->codec = codec;
  cls->rate = rate;
  if (cls->rate > 0) {
    cls->timer = malloc(sizeof(*cls->timer));
    if (!cls->timer) {
      free(cls);
      return NULL;
    }
    uv_timer_init(loop, cls->timer);
    cls->timer->data = cls;
  }
  cls->next = s->classes;
  s->classes = cls;
  return cls;
}

/* ---- subscribers ----------------------------------------------------------------------------- */

float srv_fanout_subscribe(srv_session *s, srv_conn *c, uint8_t codec, float rate) {
  if (srv_fanout_join(c, s) != 0) return rate; /* out of memory (never after srv_fanout_join) */
  srv_subscriber *sub = c->sub;
  uv_loop_t *loop = c->server->loop;
  sub->codec = codec;
  sub->cls = class_for(s, loop, codec, rate);
  if (!sub->cls) rate = 0; /* out of memory for a timer: every change, like a version 1 viewer */
  if (!sub->cls) sub->cls = class_for(s, loop, codec, rate);
  if (sub->cls) sub->cls->members++;
  sub->next = s->subscribers;
  s->subscribers = c;
  s->subscriber_count++;
  return rate;
}

void srv_fanout_unsubscribe(srv_conn *c) {
  srv_subscriber *sub = c->sub;
  srv_session *s = sub ? sub->session : NULL;
  if (!s) return;
  srv_conn **pp = &s->subscribers;
  while (*pp && *pp != c) pp = &(*pp)->sub->next;
  if (*pp) {
    *pp = sub->next;
    s->subscriber_count--;
    if (sub->cls && --sub->cls->members == 0) class_drop(s, sub->cls);
  }
  sub->cls = NULL;
  sub->next = NULL;
  sub->session = NULL;
}

uint32_t srv_fanout_live_codecs(const srv_session *s) {
  uint32_t live = 0;
  for (const srv_class *x = s->classes; x; x = x->next)
    if (x->rate == 0) live |= 1u << x->codec;
  return live;
}

/* ---- delivery -------------------------------------------------------------------------------- */

/* A paced class has a change waiting: its timer fires when a period has passed since its last
 * update (at once when it has). */
static void pace(srv_class *cls) {
  if (!cls->timer || uv_is_active((uv_handle_t *)cls->timer)) return;
  uint64_t now = uv_now(cls->timer->loop), period = (uint64_t)ceil(1000.0 / cls->rate);
  uint64_t due = cls->last_ms + period;
  uv_timer_start(cls->timer, pace_now, due > now ? due - now : 0, 0);
}

void srv_fanout_publish(srv_session *s, srv_frame *const *frames, uint64_t version) {
  for (srv_class *x = s->classes; x; x = x->next)
    if (x->rate > 0) pace(x);
  for (srv_conn *c = s->subscribers, *next; c; c = next) {
    srv_subscriber *sub = c->sub;
    next = sub->next; /* delivering may close c, which unsubscribes it */
    if (!sub->cls || sub->cls->rate == 0) srv_conn_deliver(c, frames[sub->codec], version);
  }
}

int srv_fanout_paced(const srv_conn *c) { return c->sub && c->sub->cls && c->sub->cls->rate > 0; }

void srv_fanout_pace(srv_conn *c) {
  c->lagging = 0;
  if (c->sub && c->sub->cls) pace(c->sub->cls);
}

/* A paced class's update: each member not lagging gets everything changed since the version it
 * was sent last, in one write. Members at the same version share the bytes (normally all of
 * them; a member that joined or caught up since the last update is at another). */
static void pace_now(uv_timer_t *t) {
  srv_class *cls = t->data;
  srv_session *s = cls->session;
  if (!s) return;
  cls->last_ms = uv_now(t->loop);
  srv_frame *f = NULL;
  uint64_t f_since = 0;
  int sent = 0;
  for (srv_conn *c = s->subscribers, *next; c; c = next) {
    next = c->sub->next;
    if (c->sub->cls != cls || c->lagging || c->sent_version >= s->version) continue;
    if (!f || f_since != c->sent_version) {
      srv_frame_unref(f);
      proto_buf b;
      proto_buf_init(&b);
      f = NULL;
      f_since = c->sent_version;
      if (srv_session_encode_since(s, f_since, 0, cls->codec, &b) == 0) f = srv_frame_from_buf(&b);
      else proto_buf_fini(&b);
    }
    srv_conn_deliver(c, f, s->version); /* NULL: it lags, and catches up once drained */
    sent = 1;
  }
  srv_frame_unref(f);
  if (sent) srv_log(SRV_LOG_DEBUG, "session %s: paced update at %.3g Hz to version %llu", s->name,
                    (double)cls->rate, (unsigned long long)s->version);
}
