/*
 * srv_presence.c — a session's participants and their cursors and cameras, sent as PRESENCE
 * frames (docs/protocol.md §16) beside the session's versioned state, never inside it.
 *
 * How it stays cheap and never slows anyone (docs/architecture.md, "Presence"):
 * - Coalesce, never queue. A sender's STATE overwrites its participant's; a session sends one
 *   update at most every SRV_PRESENCE_PERIOD_MS (60 Hz) from a timer of its own, holding the
 *   newest STATE of each participant that moved, the INFO of those that joined or changed and
 *   the LEAVE of those that left. So a sender that sends 1 000 frames a second costs its
 *   viewers what one at 60 Hz costs, and 50 editors moving at once make one frame per period,
 *   not 50.
 * - Encode once: the update is one srv_frame queued on every connection granted "presence".
 * - Dropped first for a slow viewer: an update goes to a connection only while its queue is
 *   under a quarter of the soft limit and it is not lagging; otherwise it is skipped (counted in
 *   server.stats) and the connection is marked stale, and once it drains it gets the whole list
 *   (CLEAR, then every participant), which makes it exact again because every record carries
 *   absolute values. Presence never makes a viewer lag, so it never delays a DELTA or WEIGHTS.
 * - Not an operation: nothing here calls srv_session_apply, bumps a version, or reaches the
 *   store, the history or the durable stream; the cluster layer gets the local participants'
 *   records through srv_server.on_presence for the other nodes (never through on_applied).
 *
 * DOES NOT decode records (protocol/proto_presence.c) or decide who is granted "presence"
 * (net/srv_caps.c).
 */
#include <stdlib.h>
#include <string.h>

#include <uv.h>
#include "proto.h"
#include "proto_presence.h"
#include "srv_author.h"
#include "srv_error.h"
#include "srv_frame.h"
#include "srv_log.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_presence.h"

#define REMOTE_BIT 0x80000000u
/* What a joiner's first list may find queued before it (its SNAPSHOT), beyond the usual limit. */
#define SRV_PRESENCE_JOIN_ALLOWANCE ((size_t)1 << 30)

typedef struct participant {
  uint32_t id;
  srv_conn *conn;             /* NULL for a remote one */
  char author[PROTO_MAX_AUTHOR + 1];
  char *node;                 /* remote: the node it is on (malloc'ed) */
  uint32_t remote_id;         /* remote: its id there */
  uint8_t role, client, flags;
  int wants;                  /* a stream connection granted "presence": it is sent updates */
  int stale;                  /* an update was skipped for it: the whole list once it drains */
  int info_dirty, state_dirty;
  int has_state;
  int seen;                   /* srv_presence_remote: listed in a node's whole list */
  int joining;                /* its first list is being offered (behind its SNAPSHOT) */
  uint64_t active_ms;         /* uv_now() when it last moved, edited or joined */
  proto_presence_state state;
} participant;

struct srv_presence {
  srv_session *session;       /* NULL once the session closed (the timer is closing) */
  srv_server *srv;
  participant *p;
  uint32_t n, cap;
  uint32_t *leaves;           /* ids that left since the last update */
  uint32_t leave_n, leave_cap;
  uint32_t *local_leaves;     /* ... of those, this node's own (for the cluster) */
  uint32_t local_leave_n, local_leave_cap;
  uint32_t next_remote;
  int publish_all;            /* the next update hands the cluster every local participant */
  uv_timer_t *timer;
  uint64_t last_ms;           /* when the last update went */
};

static void flush(uv_timer_t *t);

static uint64_t now_ms(const srv_presence *pr) { return uv_now(pr->srv->loop); }

static srv_presence *presence_of(srv_session *s, srv_server *srv) {
  if (s->presence) return s->presence;
  srv_presence *pr = calloc(1, sizeof(*pr));
  uv_timer_t *t = malloc(sizeof(*t));
  if (!pr || !t) {
    free(pr);
    free(t);
    return NULL;
  }
  pr->session = s;
  pr->srv = srv;
  pr->timer = t;
  uv_timer_init(srv->loop, t);
  t->data = pr;
  s->presence = pr;
  return pr;
}

static participant *find_conn(srv_presence *pr, const srv_conn *c) {
  for (uint32_t i = 0; pr && i < pr->n; i++)
    if (pr->p[i].conn == c) return &pr->p[i];
  return NULL;
}

static participant *find_remote(srv_presence *pr, const char *node, uint32_t id) {
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->p[i].node && pr->p[i].remote_id == id && strcmp(pr->p[i].node, node) == 0) return &pr->p[i];
  return NULL;
}

/* An update is due: at once when a period has passed since the last one, else when it has. */
static void schedule(srv_presence *pr) {
  if (!pr->session || uv_is_active((uv_handle_t *)pr->timer)) return;
  uint64_t now = now_ms(pr), due = pr->last_ms + SRV_PRESENCE_PERIOD_MS;
  uv_timer_start(pr->timer, flush, due > now ? due - now : 0, 0);
}

static int push_id(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t id) {
  if (*n == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 8;
    uint32_t *x = realloc(*a, sizeof(uint32_t) * nc);
    if (!x) return SRV_EINTERNAL;
    *a = x;
    *cap = nc;
  }
  (*a)[(*n)++] = id;
  return 0;
}

/* Its author's name as its edits would record it, without interning one for a viewer that never
 * edits (that would write an author row to the store: presence writes nothing there). */
static void name_of(const srv_conn *c, char *out, size_t len) {
  if (c->author) snprintf(out, len, "%s", srv_authors_name(&c->server->authors, c->author));
  else snprintf(out, len, "anonymous-%u", c->id);
}

static participant *add(srv_presence *pr) {
  if (pr->n == pr->cap) {
    uint32_t nc = pr->cap ? pr->cap * 2 : 8;
    participant *x = realloc(pr->p, sizeof(participant) * nc);
    if (!x) return NULL;
    pr->p = x;
    pr->cap = nc;
  }
  participant *q = &pr->p[pr->n++];
  memset(q, 0, sizeof(*q));
  q->active_ms = now_ms(pr);
  q->info_dirty = 1;
  return q;
}

/* Removes p[i] (order kept: srv_presence_at lists them as they joined); its LEAVE goes out with
 * the next update. */
static void drop(srv_presence *pr, uint32_t i) {
  participant *q = &pr->p[i];
  push_id(&pr->leaves, &pr->leave_n, &pr->leave_cap, q->id);
  if (!q->node) push_id(&pr->local_leaves, &pr->local_leave_n, &pr->local_leave_cap, q->id);
  free(q->node);
  memmove(q, q + 1, sizeof(participant) * (pr->n - i - 1));
  pr->n--;
  schedule(pr);
}

static void put_info(proto_buf *b, const participant *q, uint64_t now) {
  uint64_t idle = now > q->active_ms ? now - q->active_ms : 0;
  proto_presence_info m = {q->id, q->role, q->client, q->flags, idle > UINT32_MAX ? UINT32_MAX : (uint32_t)idle,
                           {q->author, (uint16_t)strlen(q->author)}};
  proto_presence_put_info(b, &m);
}

static void put_state(proto_buf *b, const participant *q) {
  proto_presence_state m = q->state;
  m.id = q->id;
  proto_presence_put_state(b, &m);
}

/* The whole list: CLEAR, then each participant's INFO and (unless private) STATE. */
static srv_frame *whole_list(srv_presence *pr) {
  proto_buf b;
  proto_buf_init(&b);
  size_t at = proto_presence_begin(&b);
  proto_presence_put_clear(&b);
  uint64_t now = now_ms(pr);
  for (uint32_t i = 0; i < pr->n; i++) {
    put_info(&b, &pr->p[i], now);
    if (pr->p[i].has_state && !(pr->p[i].flags & PROTO_PRES_PRIVATE)) put_state(&b, &pr->p[i]);
  }
  if (proto_presence_end(&b, at) != 0) {
    proto_buf_fini(&b);
    return NULL;
  }
  return srv_frame_from_buf(&b);
}

/* Sends `f` to `c` unless it is slow (lagging, or its queue over a quarter of the soft limit):
 * then nothing is queued and it gets the whole list once it drains. */
static void offer(srv_presence *pr, participant *q, srv_frame *f) {
  srv_conn *c = q->conn;
  if (c->closing || c->finishing) return;
  if (!f || c->lagging || c->queued + f->len > pr->srv->cfg.soft_limit / 4 + SRV_PRESENCE_JOIN_ALLOWANCE * q->joining) {
    q->stale = 1;
    pr->srv->stats.presence_skipped++;
    return;
  }
  if (srv_conn_send(c, f) == 0) pr->srv->stats.presence_updates++;
}

/* The cluster's copy of an update: the local participants' records only. */
static void publish(srv_presence *pr, uint64_t now) {
  srv_server *srv = pr->srv;
  if (!srv->on_presence) {
    pr->local_leave_n = 0;
    pr->publish_all = 0;
    return;
  }
  int all = pr->publish_all;
  proto_buf b;
  proto_buf_init(&b);
  for (uint32_t i = 0; i < pr->n; i++) {
    const participant *q = &pr->p[i];
    if (q->node) continue;
    if (all || q->info_dirty) put_info(&b, q, now);
    if ((all && q->has_state) || q->state_dirty)
      if (!(q->flags & PROTO_PRES_PRIVATE)) put_state(&b, q);
  }
  for (uint32_t i = 0; i < pr->local_leave_n; i++) proto_presence_put_leave(&b, pr->local_leaves[i]);
  pr->local_leave_n = 0;
  pr->publish_all = 0;
  if (!b.failed && (b.len || all)) srv->on_presence(srv, pr->session, b.data, b.len, all);
  proto_buf_fini(&b);
}

/* One update: what changed since the last, encoded once, offered to every connection granted
 * "presence"; then the same records of this node's own participants to the cluster. */
static void flush(uv_timer_t *t) {
  srv_presence *pr = t->data;
  if (!pr->session) return;
  uint64_t now = now_ms(pr);
  pr->last_ms = now;
  proto_buf b;
  proto_buf_init(&b);
  size_t at = proto_presence_begin(&b);
  size_t empty = b.len;
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->p[i].info_dirty) put_info(&b, &pr->p[i], now);
  for (uint32_t i = 0; i < pr->leave_n; i++) proto_presence_put_leave(&b, pr->leaves[i]);
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->p[i].state_dirty && !(pr->p[i].flags & PROTO_PRES_PRIVATE)) put_state(&b, &pr->p[i]);
  srv_frame *f = NULL;
  int any = b.len > empty;
  if (any && proto_presence_end(&b, at) == 0) f = srv_frame_from_buf(&b);
  else proto_buf_fini(&b);
  publish(pr, now);
  pr->leave_n = 0;
  for (uint32_t i = 0; i < pr->n; i++) pr->p[i].info_dirty = pr->p[i].state_dirty = 0;
  if (any)
    for (uint32_t i = 0; i < pr->n; i++)
      if (pr->p[i].conn && pr->p[i].wants) offer(pr, &pr->p[i], f);
  srv_frame_unref(f);
}

int srv_presence_join(srv_session *s, srv_conn *c, uint8_t role, int wants) {
  srv_presence *pr = presence_of(s, c->server);
  if (!pr) return SRV_EINTERNAL;
  participant *q = find_conn(pr, c);
  if (!q && !(q = add(pr))) return SRV_EINTERNAL;
  q->id = c->id;
  q->conn = c;
  q->role = role;
  q->flags = role == PROTO_ROLE_EDITOR ? PROTO_PRES_EDITING : 0;
  q->client = c->ws ? PROTO_CLIENT_PAGE : PROTO_CLIENT_TOOL;
  q->wants = wants;
  name_of(c, q->author, sizeof(q->author));
  if (wants) {
    /* Right behind its SNAPSHOT, which may be megabytes still queued: that is no slow reader. */
    srv_frame *f = whole_list(pr);
    q->joining = 1;
    offer(pr, q, f);
    q->joining = 0;
    srv_frame_unref(f);
  }
  schedule(pr);
  return 0;
}

void srv_presence_leave(srv_server *srv, srv_conn *c) {
  for (srv_session *s = srv->sessions; s; s = s->next) {
    srv_presence *pr = s->presence;
    participant *q = find_conn(pr, c);
    if (q) drop(pr, (uint32_t)(q - pr->p));
  }
}

static void take_state(participant *q, const proto_presence_state *st, uint64_t now) {
  q->state = *st;
  q->state.id = q->id;
  q->has_state = 1;
  q->state_dirty = 1;
  q->active_ms = now;
}

int srv_presence_frame(srv_session *s, srv_conn *c, const uint8_t *p, size_t n, char *why, size_t whylen) {
  srv_presence *pr = s->presence;
  participant *q = find_conn(pr, c);
  if (!q) {
    snprintf(why, whylen, "this connection is not in the session's presence");
    return PROTO_EINVAL;
  }
  /* Checked whole before anything is kept: a frame is taken or refused as one. */
  proto_presence_iter it;
  proto_presence_rec r;
  int rc;
  proto_presence_iter_init(&it, p, n);
  while ((rc = proto_presence_next(&it, &r)) == 1)
    if (r.kind != PROTO_PRES_STATE && r.kind != PROTO_PRES_ABOUT) {
      snprintf(why, whylen, "malformed PRESENCE: a client sends only STATE and ABOUT records (record %u is kind %u)",
               it.count, r.kind);
      return PROTO_EINVAL;
    }
  if (rc < 0) {
    snprintf(why, whylen, "malformed PRESENCE: record %u: %s", it.count + 1, proto_strerror(rc));
    return rc;
  }
  uint64_t now = now_ms(pr);
  proto_presence_iter_init(&it, p, n);
  while (proto_presence_next(&it, &r) == 1) {
    if (r.kind == PROTO_PRES_STATE) {
      take_state(q, &r.u.state, now);
    } else {
      uint8_t flags = (uint8_t)((q->flags & ~PROTO_PRES_PRIVATE) | (r.u.about.flags & PROTO_PRES_PRIVATE));
      if (flags != q->flags || r.u.about.client != q->client) q->info_dirty = 1;
      q->flags = flags;
      q->client = r.u.about.client;
    }
  }
  schedule(pr);
  return 0;
}

int srv_presence_set(srv_session *s, srv_conn *c, uint8_t role, const proto_presence_state *state, int private_) {
  srv_presence *pr = presence_of(s, c->server);
  if (!pr) return SRV_EINTERNAL;
  participant *q = find_conn(pr, c);
  if (!q) {
    /* One session at a time, like a stream connection. */
    srv_presence_leave(c->server, c);
    if (!(q = add(pr))) return SRV_EINTERNAL;
    q->id = c->id;
    q->conn = c;
    q->client = PROTO_CLIENT_JSON;
  }
  q->role = role;
  uint8_t flags = role == PROTO_ROLE_EDITOR ? PROTO_PRES_EDITING : 0;
  if (private_ > 0 || (private_ < 0 && (q->flags & PROTO_PRES_PRIVATE))) flags |= PROTO_PRES_PRIVATE;
  if (flags != q->flags) q->info_dirty = 1;
  q->flags = flags;
  name_of(c, q->author, sizeof(q->author));
  if (state) take_state(q, state, now_ms(pr));
  schedule(pr);
  return 0;
}

void srv_presence_renamed(srv_server *srv, srv_conn *c) {
  for (srv_session *s = srv->sessions; s; s = s->next) {
    participant *q = find_conn(s->presence, c);
    if (!q) continue;
    char name[PROTO_MAX_AUTHOR + 1];
    name_of(c, name, sizeof(name));
    if (strcmp(name, q->author) == 0) continue;
    memcpy(q->author, name, sizeof(name));
    q->info_dirty = 1;
    schedule(s->presence);
  }
}

void srv_presence_touch(srv_session *s, const srv_conn *c) {
  participant *q = find_conn(s->presence, c);
  if (q) q->active_ms = now_ms(s->presence);
}

void srv_presence_drained(srv_conn *c) {
  for (srv_session *s = c->server->sessions; s; s = s->next) {
    srv_presence *pr = s->presence;
    participant *q = find_conn(pr, c);
    if (!q || !q->stale || c->lagging) continue;
    q->stale = 0;
    srv_frame *f = whole_list(pr);
    offer(pr, q, f);
    srv_frame_unref(f);
  }
}

static void timer_closed(uv_handle_t *h) {
  srv_presence *pr = h->data;
  free(h);
  free(pr);
}

void srv_presence_close(srv_session *s) {
  srv_presence *pr = s->presence;
  if (!pr) return;
  s->presence = NULL;
  pr->session = NULL;
  for (uint32_t i = 0; i < pr->n; i++) free(pr->p[i].node);
  free(pr->p);
  free(pr->leaves);
  free(pr->local_leaves);
  uv_timer_stop(pr->timer);
  uv_close((uv_handle_t *)pr->timer, timer_closed);
}

uint32_t srv_presence_count(const srv_session *s) { return s->presence ? s->presence->n : 0; }

int srv_presence_at(const srv_session *s, uint32_t i, uint64_t now, srv_participant_view *out) {
  if (!s->presence || i >= s->presence->n) return -1;
  const participant *q = &s->presence->p[i];
  out->id = q->id;
  out->author = q->author;
  out->role = q->role;
  out->client = q->client;
  out->flags = q->flags;
  out->idle_ms = now > q->active_ms ? now - q->active_ms : 0;
  out->has_state = q->has_state && !(q->flags & PROTO_PRES_PRIVATE);
  out->state = q->state;
  return 0;
}

/* ---- between nodes ------------------------------------------------------------------------- */

void srv_presence_publish_all(srv_session *s) {
  if (!s->presence) return;
  s->presence->publish_all = 1;
  schedule(s->presence);
}

/* A remote INFO: its participant, made when new (NULL when out of memory). */
static participant *remote_info(srv_presence *pr, const char *node, const proto_presence_info *m) {
  participant *q = find_remote(pr, node, m->id);
  if (!q) {
    char *copy = strdup(node);
    if (!copy || !(q = add(pr))) {
      free(copy);
      return NULL;
    }
    q->node = copy;
    q->remote_id = m->id;
    q->id = REMOTE_BIT | (++pr->next_remote & ~REMOTE_BIT);
  }
  q->role = m->role;
  q->client = m->client;
  q->flags = (uint8_t)(m->flags | PROTO_PRES_REMOTE);
  q->active_ms = now_ms(pr) - m->idle_ms;
  snprintf(q->author, sizeof(q->author), "%.*s", (int)m->author.len, m->author.ptr);
  q->info_dirty = 1;
  return q;
}

int srv_presence_remote(srv_server *srv, srv_session *s, const char *node, const uint8_t *p, size_t n, int full) {
  proto_presence_iter it;
  proto_presence_rec r;
  int rc;
  proto_presence_iter_init(&it, p, n);
  while ((rc = proto_presence_next(&it, &r)) == 1)
    if (r.kind == PROTO_PRES_CLEAR || r.kind == PROTO_PRES_ABOUT) return PROTO_EINVAL;
  if (rc < 0) return rc;
  srv_presence *pr = presence_of(s, srv);
  if (!pr) return PROTO_ENOMEM;
  /* A whole list: those of that node it no longer holds have left. */
  for (uint32_t i = 0; i < pr->n; i++) pr->p[i].seen = !full || !pr->p[i].node || strcmp(pr->p[i].node, node) != 0;
  uint64_t now = now_ms(pr);
  proto_presence_iter_init(&it, p, n);
  while (proto_presence_next(&it, &r) == 1) {
    participant *q;
    if (r.kind == PROTO_PRES_INFO) {
      if ((q = remote_info(pr, node, &r.u.info))) q->seen = 1;
    } else if (r.kind == PROTO_PRES_LEAVE) {
      if ((q = find_remote(pr, node, r.u.id))) drop(pr, (uint32_t)(q - pr->p));
    } else if ((q = find_remote(pr, node, r.u.state.id))) {
      take_state(q, &r.u.state, now);
    }
  }
  for (uint32_t i = 0; i < pr->n;) {
    if (!pr->p[i].seen) drop(pr, i);
    else i++;
  }
  schedule(pr);
  return 0;
}

void srv_presence_remote_gone(srv_session *s, const char *node) {
  srv_presence *pr = s->presence;
  for (uint32_t i = 0; pr && i < pr->n;) {
    if (pr->p[i].node && strcmp(pr->p[i].node, node) == 0) drop(pr, i);
    else i++;
  }
}
