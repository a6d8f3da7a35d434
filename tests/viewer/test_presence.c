/*
 * test_presence.c — deform-view's presence (viewer/vw_presence.c, vw_net.c, vw_camera_look)
 * against a real deformd: two viewer connections in one session see each other's author,
 * colour and camera as sent, are told who joined and left, and "follow" puts the follower's
 * camera on the leader's the first frame after the leader's STATE arrived (vw_camera_eye of the
 * followed camera is the leader's eye, within float rounding; target and field of view exact).
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "proto_caps.h"
#include "test.h"
#include "vw_camera.h"
#include "vw_net.h"
#include "vw_presence.h"

static const char *const demo_args[] = {"--demo", NULL};

static void open_net(harness *h, vw_net *n, proto_role role, const char *author) {
  vw_net_init(n, "127.0.0.1", h->stream_port, "demo", NULL, role);
  vw_net_set_author(n, author);
  proto_hello_opts o = {.caps = PROTO_CAP_BIT(PROTO_CAP_PRESENCE)};
  vw_net_set_protocol(n, PROTO_VERSION_2, &o);
}

/* Polls both until cond(arg) holds (20 s at most). */
static void poll_until(vw_net *a, vw_net *b, int (*cond)(const void *), const void *arg) {
  uint64_t deadline = vw_net_now_ms() + 20000;
  while (!cond(arg)) {
    ASSERT(vw_net_now_ms() < deadline);
    vw_net_changes ch;
    vw_net_poll(a, 10, &ch);
    if (b) vw_net_poll(b, 10, &ch);
  }
}

static int live_with_presence(const void *arg) { return vw_net_has_presence(arg); }

typedef struct seen {
  const vw_net *n;
  const char *author;
  const proto_presence_state *state; /* NULL: listed is enough */
} seen;

static int sees(const void *arg) {
  const seen *s = arg;
  const vw_presence *pr = &s->n->presence;
  for (int i = 0; i < pr->n; i++) {
    const vw_participant *q = &pr->p[i];
    if (strcmp(q->author, s->author) != 0) continue;
    if (!s->state) return 1;
    return q->has_state && memcmp(q->state.eye, s->state->eye, sizeof(q->state.eye)) == 0 &&
           memcmp(q->state.target, s->state->target, sizeof(q->state.target)) == 0 && q->state.fov == s->state->fov;
  }
  return 0;
}

typedef struct told {
  const vw_net *n;
  const char *text;
} told;

static int has_notice(const void *arg) {
  const told *t = arg;
  const char *s = vw_presence_notice(&t->n->presence);
  return s && strcmp(s, t->text) == 0;
}

TEST(two_viewers_see_each_other_and_follow_puts_the_camera_on_the_leaders_within_one_frame) {
  harness h;
  harness_start(&h, "demo", demo_args);
  vw_net a, b;
  open_net(&h, &a, PROTO_ROLE_EDITOR, "ana");
  poll_until(&a, NULL, live_with_presence, &a);
  open_net(&h, &b, PROTO_ROLE_VIEWER, "bob");
  poll_until(&a, &b, live_with_presence, &b);
  seen ana_in_b = {&b, "ana", NULL}, bob_in_a = {&a, "bob", NULL};
  poll_until(&a, &b, sees, &ana_in_b);
  poll_until(&a, &b, sees, &bob_in_a);
  /* ana was there when bob came: bob is told nothing of her; ana is told bob joined. */
  ASSERT(vw_presence_notice(&b.presence) == NULL);
  told joined = {&a, "bob joined (watching)"};
  poll_until(&a, &b, has_notice, &joined);
  /* Colours are the author's, whoever draws them. */
  const vw_participant *q = NULL;
  for (int i = 0; i < b.presence.n; i++)
    if (strcmp(b.presence.p[i].author, "ana") == 0) q = &b.presence.p[i];
  ASSERT(q != NULL);
  uint8_t rgb[3];
  proto_presence_colour("ana", 3, rgb);
  ASSERT(memcmp(q->rgb, rgb, 3) == 0);
  /* ana's camera: a view from up and to the side. */
  vw_camera leader = {.yaw = 0.7f, .pitch = 0.3f, .dist = 0.9f, .target = {0.01f, 0.05f, -0.02f}, .fov = 0.61f};
  proto_presence_state s;
  memset(&s, 0, sizeof(s));
  s.flags = PROTO_PRES_CAMERA;
  vw_camera_eye(&leader, s.eye);
  memcpy(s.target, leader.target, sizeof(s.target));
  s.fov = leader.fov;
  ASSERT_EQ(vw_net_send_presence(&a, &s, PROTO_CLIENT_VIEW, 0), 1);
  seen state_in_b = {&b, "ana", &s};
  poll_until(&a, &b, sees, &state_in_b);
  /* bob follows: P once gives ana (bob himself and those without a camera are skipped). */
  ASSERT_EQ(vw_presence_follow_next(&b.presence), a.client_id);
  vw_camera cam = {.yaw = -2, .pitch = -0.5f, .dist = 3, .target = {1, 1, 1}, .fov = 1.2f};
  float eye[3], target[3], fov;
  ASSERT(vw_presence_leader(&b.presence, eye, target, &fov));
  vw_camera_look(&cam, eye, target, fov); /* what deform-view does each frame */
  vec3 got;
  vw_camera_eye(&cam, got);
  for (int k = 0; k < 3; k++) ASSERT_NEAR(got[k], s.eye[k], 1e-6);
  ASSERT(memcmp(cam.target, s.target, sizeof(s.target)) == 0);
  ASSERT_EQ(cam.fov, s.fov);
  ASSERT_NEAR(cam.yaw, leader.yaw, 1e-5);
  ASSERT_NEAR(cam.pitch, leader.pitch, 1e-5);
  /* P again: nobody else has a camera, so bob follows nobody. */
  ASSERT_EQ(vw_presence_follow_next(&b.presence), 0);
  /* bob leaves: ana is told. */
  vw_net_fini(&b);
  told left = {&a, "bob left"};
  poll_until(&a, NULL, has_notice, &left);
  vw_net_fini(&a);
  harness_stop(&h);
}

TEST(a_z_up_camera_looked_from_an_eye_gives_that_eye_back) {
  vw_camera c = {.up = 'z', .yaw = 1.1f, .pitch = -0.4f, .dist = 2.5f, .target = {0.5f, -1, 2}, .fov = 0.9f};
  vec3 eye;
  vw_camera_eye(&c, eye);
  vw_camera d = {.up = 'z'};
  vw_camera_look(&d, eye, c.target, c.fov);
  vec3 back;
  vw_camera_eye(&d, back);
  for (int k = 0; k < 3; k++) ASSERT_NEAR(back[k], eye[k], 1e-5);
  ASSERT_NEAR(d.yaw, c.yaw, 1e-5);
  ASSERT_NEAR(d.pitch, c.pitch, 1e-5);
}
