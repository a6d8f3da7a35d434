/*
 * presence_client.c — a test's presence client: see presence_client.h.
 */
#include <string.h>

#include "presence_client.h"
#include "proto_caps.h"
#include "test.h"


int heard_find(heard *w, uint32_t id) {
  for (int i = 0; i < w->n; i++)
    if (w->p[i].id == id) return i;
  ASSERT(w->n < 16);
  memset(&w->p[w->n], 0, sizeof(w->p[0]));
  w->p[w->n].id = id;
  return w->n++;
}

/* Applies one PRESENCE payload (every record must decode). */
void heard_apply(heard *w, const uint8_t *p, size_t n) {
  proto_presence_iter it;
  proto_presence_rec r;
  int rc;
  w->frames++;
  proto_presence_iter_init(&it, p, n);
  while ((rc = proto_presence_next(&it, &r)) == 1) {
    if (r.kind == PROTO_PRES_CLEAR) {
      w->n = 0;
    } else if (r.kind == PROTO_PRES_INFO) {
      int i = heard_find(w, r.u.info.id);
      snprintf(w->p[i].author, sizeof(w->p[i].author), "%.*s", (int)r.u.info.author.len, r.u.info.author.ptr);
      w->p[i].role = r.u.info.role;
      w->p[i].flags = r.u.info.flags;
      w->p[i].client = r.u.info.client;
      w->p[i].left = 0;
    } else if (r.kind == PROTO_PRES_LEAVE) {
      w->p[heard_find(w, r.u.id)].left = 1;
    } else if (r.kind == PROTO_PRES_STATE) {
      int i = heard_find(w, r.u.state.id);
      w->p[i].state = r.u.state;
      w->p[i].has_state = 1;
    } else {
      test__fail(__FILE__, __LINE__, "the server sent a record of kind %u", r.kind);
    }
  }
  ASSERT_OK(rc, "a PRESENCE frame the server sent decodes");
}

/* Reads frames (PRESENCE into w, the others into the replica) until `done(w, arg)` or 10 s. */
void heard_until(client_conn *c, client_replica *r, heard *w, int (*done)(heard *, const void *),
                       const void *arg) {
  char err[256];
  uint64_t deadline = client_now_ns() + 20000000000ull;
  while (!done(w, arg)) {
    ASSERT(client_now_ns() < deadline);
    proto_header h;
    const uint8_t *p;
    int rc = client_read_frame(c, 200, &h, &p, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) continue;
    ASSERT_OK(rc, err);
    ASSERT(h.type != PROTO_ERROR);
    if (h.type == PROTO_PRESENCE) {
      ASSERT_EQ(h.session_version, 0);
      heard_apply(w, p, h.length);
    } else if (r) {
      ASSERT_OK(client_replica_apply(r, &h, p, err, sizeof(err)), err);
    }
  }
}

int heard_author(heard *w, const void *arg) {
  for (int i = 0; i < w->n; i++)
    if (!w->p[i].left && strcmp(w->p[i].author, arg) == 0) return 1;
  return 0;
}


int presence_same_state(const proto_presence_state *a, const proto_presence_state *b) {
  return a->flags == b->flags && a->tool == b->tool && memcmp(a->hit, b->hit, sizeof(a->hit)) == 0 &&
         memcmp(a->normal, b->normal, sizeof(a->normal)) == 0 && a->radius == b->radius &&
         memcmp(a->eye, b->eye, sizeof(a->eye)) == 0 && memcmp(a->target, b->target, sizeof(a->target)) == 0 &&
         a->fov == b->fov;
}

int heard_state(heard *w, const void *arg) {
  const want_state *x = arg;
  for (int i = 0; i < w->n; i++)
    if (w->p[i].id == x->id && w->p[i].has_state && presence_same_state(&w->p[i].state, x->s)) return 1;
  return 0;
}

int heard_left(heard *w, const void *arg) {
  uint32_t id = *(const uint32_t *)arg;
  for (int i = 0; i < w->n; i++)
    if (w->p[i].id == id) return w->p[i].left;
  return 0;
}

/* Joins `session` with the capability "presence" as `author`; the WELCOME's client id in w->self. */
void presence_join(harness *h, const char *session, client_conn *c, client_replica *r, heard *w, proto_role role, const char *author) {
  proto_hello_opts o = {.caps = PROTO_CAP_BIT(PROTO_CAP_PRESENCE), .author = {author, (uint16_t)strlen(author)}};
  char err[256];
  harness_connect(h, c, h->stream_port);
  ASSERT_OK(client_hello2(c, session, role, NULL, &o), NULL);
  client_replica_init(r);
  memset(w, 0, sizeof(*w));
  for (;;) {
    proto_header hd;
    const uint8_t *p;
    ASSERT_OK(client_read_frame(c, 30000, &hd, &p, err, sizeof(err)), err);
    if (hd.type == PROTO_WELCOME) {
      proto_welcome wm;
      proto_welcome_opts wo;
      ASSERT_OK(proto_decode_welcome2(p, hd.length, &wm, &wo), NULL);
      ASSERT_EQ(wo.caps, PROTO_CAP_BIT(PROTO_CAP_PRESENCE));
      w->self = wm.client_id;
    }
    ASSERT(hd.type != PROTO_PRESENCE); /* the list comes after the SNAPSHOT */
    ASSERT_OK(client_replica_apply(r, &hd, p, err, sizeof(err)), err);
    if (hd.type == PROTO_SNAPSHOT) break;
  }
  heard_until(c, r, w, heard_author, author); /* the whole list, itself in it */
}

void presence_send_state(client_conn *c, const proto_presence_state *s) {
  proto_buf b;
  proto_buf_init(&b);
  size_t at = proto_presence_begin(&b);
  ASSERT_OK(proto_presence_put_state(&b, s), NULL);
  ASSERT_OK(proto_presence_end(&b, at), NULL);
  ASSERT_OK(client_send_buf(c, &b), NULL);
  proto_buf_fini(&b);
}

proto_presence_state presence_sample(float t) {
  proto_presence_state s = {.flags = PROTO_PRES_CURSOR | PROTO_PRES_CAMERA, .tool = PROTO_TOOL_BRUSH0 + 1, /* inflate */
                            .hit = {0.01f * t, 0.125f, -0.3f}, .normal = {0, 0.6f, 0.8f}, .radius = 0.02f,
                            .eye = {0.1f, 0.2f, 1.5f + t}, .target = {0, 0.1f, 0}, .fov = 0.7853982f};
  return s;
}

