/*
 * vw_presence.c — deform-view's view of the session's participants (see vw_presence.h).
 *
 * Every record carries absolute values, so applying them is overwriting: an INFO replaces a
 * participant's description, a STATE its cursor and camera, a CLEAR empties the list (the
 * records after it are the whole list). A participant that was known before a CLEAR and is in
 * the list after it neither joined nor left; one that is not has left; one that is new has
 * joined (notices only after the connection's first list, so joining a busy session does not
 * announce everyone already there).
 *
 * DOES NOT draw or take the lock: its caller holds the pump's lock.
 */
#include <stdio.h>
#include <string.h>

#include "vw_presence.h"

void vw_presence_reset(vw_presence *pr, uint32_t self) {
  memset(pr, 0, sizeof(*pr));
  pr->self = self;
}

const vw_participant *vw_presence_find(const vw_presence *pr, uint32_t id) {
  for (int i = 0; i < pr->n; i++)
    if (pr->p[i].id == id) return &pr->p[i];
  return NULL;
}

static void notice(vw_presence *pr, const char *author, const char *what) {
  char name[PROTO_MAX_AUTHOR + 1]; /* (author may be a participant's, inside *pr) */
  snprintf(name, sizeof(name), "%s", author);
  snprintf(pr->notices[pr->notice_count % VW_PRESENCE_NOTICES], sizeof(pr->notices[0]), "%s %s", name, what);
  pr->notice_count++;
}

const char *vw_presence_notice(const vw_presence *pr) {
  return pr->notice_count ? pr->notices[(pr->notice_count - 1) % VW_PRESENCE_NOTICES] : NULL;
}

static void drop(vw_presence *pr, int i, int announce) {
  if (announce && pr->p[i].id != pr->self) notice(pr, pr->p[i].author, "left");
  if (pr->following == pr->p[i].id) pr->following = 0;
  memmove(&pr->p[i], &pr->p[i + 1], sizeof(pr->p[0]) * (size_t)(pr->n - i - 1));
  pr->n--;
}

/* A CLEAR and the list after it, against the participants known before it. */
typedef struct before {
  uint32_t ids[VW_PRESENCE_MAX];
  char authors[VW_PRESENCE_MAX][PROTO_MAX_AUTHOR + 1];
  int n;
} before;

static void on_info(vw_presence *pr, const proto_presence_info *m, const before *was, uint64_t now) {
  vw_participant *q = (vw_participant *)vw_presence_find(pr, m->id);
  int joined = 0;
  if (!q) {
    if (pr->n == VW_PRESENCE_MAX) return;
    q = &pr->p[pr->n++];
    memset(q, 0, sizeof(*q));
    q->id = m->id;
    int known = 0;
    for (int i = 0; was && i < was->n; i++) known |= was->ids[i] == m->id;
    joined = pr->listed && !known && m->id != pr->self;
  }
  snprintf(q->author, sizeof(q->author), "%.*s", (int)m->author.len, m->author.ptr);
  q->role = m->role;
  q->client = m->client;
  q->flags = m->flags;
  q->active_ms = now > m->idle_ms ? now - m->idle_ms : 0;
  proto_presence_colour(q->author, strlen(q->author), q->rgb);
  if (q->flags & PROTO_PRES_PRIVATE) q->has_state = 0;
  if (joined) notice(pr, q->author, m->flags & PROTO_PRES_EDITING ? "joined (editing)" : "joined (watching)");
}

int vw_presence_apply(vw_presence *pr, const uint8_t *p, size_t n, uint64_t now) {
  if (proto_decode_presence(p, n, NULL) != 0) return PROTO_EINVAL;
  proto_presence_iter it;
  proto_presence_rec r;
  proto_presence_iter_init(&it, p, n);
  before was = {.n = 0};
  int cleared = 0;
  while (proto_presence_next(&it, &r) == 1) {
    if (r.kind == PROTO_PRES_CLEAR) {
      for (int i = 0; i < pr->n; i++) {
        was.ids[was.n] = pr->p[i].id;
        snprintf(was.authors[was.n++], sizeof(was.authors[0]), "%s", pr->p[i].author);
      }
      uint32_t following = pr->following;
      pr->n = 0;
      pr->following = following; /* kept if the leader is in the new list (checked below) */
      cleared = 1;
    } else if (r.kind == PROTO_PRES_INFO) {
      on_info(pr, &r.u.info, cleared ? &was : NULL, now);
    } else if (r.kind == PROTO_PRES_LEAVE) {
      for (int i = 0; i < pr->n; i++)
        if (pr->p[i].id == r.u.id) {
          drop(pr, i, pr->listed);
          break;
        }
    } else if (r.kind == PROTO_PRES_STATE) {
      vw_participant *q = (vw_participant *)vw_presence_find(pr, r.u.state.id);
      if (q && !(q->flags & PROTO_PRES_PRIVATE)) {
        q->state = r.u.state;
        q->has_state = 1;
        q->active_ms = now;
      }
    }
  }
  if (cleared) {
    for (int i = 0; i < was.n; i++)
      if (!vw_presence_find(pr, was.ids[i]) && pr->listed && was.ids[i] != pr->self) notice(pr, was.authors[i], "left");
    if (pr->following && !vw_presence_find(pr, pr->following)) pr->following = 0;
    pr->listed = 1;
  }
  return 0;
}

static int has_camera(const vw_participant *q) { return q->has_state && (q->state.flags & PROTO_PRES_CAMERA); }

uint32_t vw_presence_follow_next(vw_presence *pr) {
  int start = 0;
  for (int i = 0; pr->following && i < pr->n; i++)
    if (pr->p[i].id == pr->following) start = i + 1;
  pr->following = 0;
  for (int i = start; i < pr->n; i++)
    if (pr->p[i].id != pr->self && has_camera(&pr->p[i])) return pr->following = pr->p[i].id;
  return 0;
}

int vw_presence_leader(const vw_presence *pr, float eye[3], float target[3], float *fov) {
  const vw_participant *q = pr->following ? vw_presence_find(pr, pr->following) : NULL;
  if (!q || !has_camera(q)) return 0;
  memcpy(eye, q->state.eye, sizeof(float) * 3);
  memcpy(target, q->state.target, sizeof(float) * 3);
  *fov = q->state.fov;
  return 1;
}

static int same(const proto_presence_state *a, const proto_presence_state *b) {
  return a->flags == b->flags && a->tool == b->tool && memcmp(a->hit, b->hit, sizeof(a->hit)) == 0 &&
         memcmp(a->normal, b->normal, sizeof(a->normal)) == 0 && a->radius == b->radius &&
         memcmp(a->eye, b->eye, sizeof(a->eye)) == 0 && memcmp(a->target, b->target, sizeof(a->target)) == 0 &&
         a->fov == b->fov;
}

int vw_presence_due(vw_presence *pr, const proto_presence_state *mine, uint64_t now_ms) {
  pr->mine = *mine;
  if (pr->ever_sent && same(mine, &pr->sent)) return 0;
  if (pr->ever_sent && now_ms - pr->sent_ms < 1000 / VW_PRESENCE_HZ) return 0;
  pr->sent = *mine;
  pr->sent_ms = now_ms;
  pr->ever_sent = 1;
  return 1;
}
