/*
 * test_view.c — deform-view as a user runs it: headless screenshots of a real deformd session
 * (under Xvfb, which tests/run.sh starts). The oracles: the background colour, the projection
 * of the vertices a weight moves (vw_camera, the same math the viewer draws with), a second
 * viewer that joined later, and the server's own state after a restart.
 */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stb/stb_image.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "mesh_io.h"
#include "proto_caps.h"
#include "test.h"
#include "vw_camera.h"

extern char **environ;

static const char *viewer_bin(void) {
  const char *v = getenv("DEFORM_VIEW");
  ASSERT(v != NULL);
  return v;
}

/* Starts deform-view with a screenshot request; returns its pid. */
static pid_t start_view(int port, const char *png, const char *const *extra) {
  char connect[64];
  snprintf(connect, sizeof(connect), "127.0.0.1:%d", port);
  const char *argv[32] = {viewer_bin(), "--connect", connect, "--session", "demo", "--screenshot", png,
                          "--size", "320x240", "--camera", "20,10,0", "--timeout", "60"};
  int n = 13;
  for (int i = 0; extra && extra[i] && n < 30; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ), 0);
  return pid;
}

static void wait_ok(pid_t pid) {
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    test__fail(__FILE__, __LINE__, "deform-view exited with status %d (signal %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
               WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void screenshot(int port, const char *png, const char *const *extra) { wait_ok(start_view(port, png, extra)); }

typedef struct image {
  int w, h;
  unsigned char *px; /* RGBA */
} image;

static image load(const char *png) {
  image im;
  int c;
  im.px = stbi_load(png, &im.w, &im.h, &c, 4);
  if (!im.px) test__fail(__FILE__, __LINE__, "cannot read %s", png);
  return im;
}

static int is_background(const unsigned char *p) {
  /* The clear colour (0.16, 0.17, 0.19) in 8 bits. */
  return abs(p[0] - 41) <= 1 && abs(p[1] - 43) <= 1 && abs(p[2] - 48) <= 1;
}

/* Foreground pixels inside and outside the box [x0, x1] x [y0, y1] (one pixel of slack), and
 * the box's pixels. */
static void cover(const image *im, float x0, float y0, float x1, float y1, uint32_t *inside, uint32_t *outside,
                  uint32_t *box) {
  *inside = *outside = *box = 0;
  for (int y = 0; y < im->h; y++)
    for (int x = 0; x < im->w; x++) {
      int in = x >= x0 - 1 && x <= x1 + 1 && y >= y0 - 1 && y <= y1 + 1;
      *box += in;
      int fg = !is_background(im->px + 4 * ((size_t)y * im->w + x));
      if (fg && in) (*inside)++;
      if (fg && !in) (*outside)++;
    }
}

static char *tmp_png(const char *name) {
  static char buf[4][1024];
  static int k;
  char *b = buf[k++ % 4];
  snprintf(b, 1024, "%s/%s", test_tmpdir(), name);
  return b;
}

/* The camera deform-view uses for --size 320x240 --camera 20,10,0 on mesh m. */
static vw_camera camera_for(const mesh *m) {
  vw_camera c;
  memset(&c, 0, sizeof(c));
  c.fov = glm_rad(40.0f);
  vw_camera_frame(&c, m->bbox_min, m->bbox_max);
  c.yaw = glm_rad(20.0f);
  c.pitch = glm_rad(10.0f);
  return c;
}

TEST(a_screenshot_of_the_demo_head_shows_the_head_where_it_projects) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  char *png = tmp_png("head.png");
  screenshot(h.stream_port, png, NULL);
  image im = load(png);
  ASSERT(im.w == 320 && im.h == 240);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  vw_camera cam = camera_for(m);
  float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    float px, py;
    ASSERT(vw_camera_project(&cam, im.w, im.h, m->positions + 3 * v, &px, &py));
    x0 = fminf(x0, px), y0 = fminf(y0, py), x1 = fmaxf(x1, px), y1 = fmaxf(y1, py);
  }
  uint32_t inside, outside, box;
  cover(&im, x0, y0, x1, y1, &inside, &outside, &box);
  fprintf(stderr, "head covers %u of the %u pixels of its projected box; %u outside\n", inside, box, outside);
  ASSERT(outside == 0);
  ASSERT(inside > box / 3); /* a head fills its box, not a few stray pixels */
  stbi_image_free(im.px);
  mesh_destroy(m);
  harness_stop(&h);
}

/* deformd --demo with a session "man" on a copy of libcgal-demo's man.off (its path in `copy`),
 * opened with up "z". */
static void start_with_man_z_up(harness *h, char copy[1024]) {
  snprintf(copy, 1024, "%s/man.off", test_tmpdir());
  test_copy_file(test_cgal_mesh("man.off"), copy);
  const char *const args[] = {"--demo", NULL};
  harness_start(h, "demo", args);
  cJSON_Delete(harness_rpc_ok(h, "session.create", "{\"session\":\"man\",\"mesh\":\"man.off\",\"up\":\"z\"}"));
}

/* libcgal-demo's man.off stands along +Z (0.42 x 0.30 x 1.0). Opened with up "z", deform-view
 * (which asks for the "up" capability) draws it with Z up: the picture is where a Z-up camera
 * projects it, and the vertex with the largest z projects above the one with the smallest. With
 * a Y-up camera, as before, the same scan would be seen from above and fall outside that box. */
TEST(deform_view_draws_a_z_up_scan_opened_with_up_z_upright) {
  char copy[1024];
  harness h;
  start_with_man_z_up(&h, copy);
  char *png = tmp_png("man-z-up.png");
  const char *const extra[] = {"--session", "man", NULL};
  screenshot(h.stream_port, png, extra);
  image im = load(png);
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(copy, NULL, &m, err, sizeof(err)), err);
  vw_camera cam = camera_for(m);
  cam.up = 'z';
  float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f, ytop = 0, ybottom = 0, ztop = -1e9f, zbottom = 1e9f;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    float px, py;
    const float *p = m->positions + 3 * v;
    ASSERT(vw_camera_project(&cam, im.w, im.h, p, &px, &py));
    x0 = fminf(x0, px), y0 = fminf(y0, py), x1 = fmaxf(x1, px), y1 = fmaxf(y1, py);
    if (p[2] > ztop) ztop = p[2], ytop = py;
    if (p[2] < zbottom) zbottom = p[2], ybottom = py;
  }
  ASSERT(ytop < ybottom);               /* head above feet */
  ASSERT(y1 - y0 > 1.5f * (x1 - x0));   /* a standing figure: taller than wide */
  uint32_t inside, outside, box;
  cover(&im, x0, y0, x1, y1, &inside, &outside, &box);
  fprintf(stderr, "the scan covers %u of the %u pixels of its Z-up projected box; %u outside\n", inside, box, outside);
  ASSERT(outside == 0);
  ASSERT(inside > box / 6); /* a thin figure fills less of its box than a head */
  stbi_image_free(im.px);
  mesh_destroy(m);
  harness_stop(&h);
}

/* Blender's numpad views about each up axis, written out by hand from Blender's conventions (front
 * is -Y for Z-up and +Z for Y-up, right is +X, top looks down the up axis): where the eye sits
 * seen from the point looked at. The top and bottom views stop 1 degree short of the pole. */
TEST(the_numpad_views_look_along_the_sessions_axes_as_blenders_do) {
  static const struct { char up, view; float eye[3]; } want[] = {
      {'z', 'f', {0, -1, 0}}, {'z', 'b', {0, 1, 0}}, {'z', 'r', {1, 0, 0}}, {'z', 'l', {-1, 0, 0}},
      {'z', 't', {0, 0, 1}},  {'z', 'u', {0, 0, -1}}, {'y', 'f', {0, 0, 1}}, {'y', 'b', {0, 0, -1}},
      {'y', 'r', {1, 0, 0}},  {'y', 'l', {-1, 0, 0}}, {'y', 't', {0, 1, 0}}, {'y', 'u', {0, -1, 0}},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    vw_camera c;
    memset(&c, 0, sizeof(c));
    c.up = want[i].up, c.dist = 2, c.fov = glm_rad(40.0f);
    c.target[0] = 0.5f, c.target[1] = -1, c.target[2] = 3;
    c.yaw = 1.234f, c.pitch = -0.3f; /* wherever the user had turned */
    ASSERT_EQ(vw_camera_view(&c, want[i].view), 0);
    vec3 eye;
    vw_camera_eye(&c, eye);
    float dot = 0;
    for (int k = 0; k < 3; k++) dot += (eye[k] - c.target[k]) / c.dist * want[i].eye[k];
    if (dot < 0.9998f) test__fail(__FILE__, __LINE__, "up %c view %c: eye direction . expected = %f", want[i].up, want[i].view, dot);
    ASSERT(c.dist == 2 && c.target[1] == -1); /* a view turns; it neither zooms nor moves */
  }
  vw_camera c = {.yaw = 0.5f};
  ASSERT_EQ(vw_camera_view(&c, 'x'), -1);
  ASSERT(c.yaw == 0.5f);
  ASSERT_EQ(vw_camera_view_named("top"), 't');
  ASSERT_EQ(vw_camera_view_named("bottom"), 'u');
  ASSERT_EQ(vw_camera_view_named("Top"), 0);
}

/* deform-view --view right and --view top of the Z-up man.off (0.42 x 0.30 x 1.0): the picture
 * lies within the box a camera at yaw 90 (right), and at pitch 89 (top), projects — cameras set
 * here by angle, not through vw_camera_view. From the right the figure stands (taller than
 * wide); from the top it is its 0.42 x 0.30 footprint, the front (-Y) at the bottom. */
TEST(deform_view_shows_a_z_up_scan_from_the_right_and_from_the_top_about_its_up_axis) {
  char copy[1024];
  harness h;
  start_with_man_z_up(&h, copy);
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(copy, NULL, &m, err, sizeof(err)), err);
  for (int top = 0; top <= 1; top++) {
    char *png = tmp_png(top ? "man-top.png" : "man-right.png");
    const char *const extra[] = {"--session", "man", "--view", top ? "top" : "right", NULL};
    screenshot(h.stream_port, png, extra);
    image im = load(png);
    vw_camera cam = camera_for(m);
    cam.up = 'z';
    cam.yaw = top ? 0 : glm_rad(90.0f);
    cam.pitch = top ? glm_rad(89.0f) : 0;
    float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f, yfront = 0, yback = 0, ymin = 1e9f, ymax = -1e9f;
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      float px, py;
      const float *p = m->positions + 3 * v;
      ASSERT(vw_camera_project(&cam, im.w, im.h, p, &px, &py));
      x0 = fminf(x0, px), y0 = fminf(y0, py), x1 = fmaxf(x1, px), y1 = fmaxf(y1, py);
      if (p[1] < ymin) ymin = p[1], yfront = py;
      if (p[1] > ymax) ymax = p[1], yback = py;
    }
    if (top) {
      ASSERT(y1 - y0 < 1.2f * (x1 - x0)); /* a footprint, not a standing figure */
      ASSERT(yfront > yback);            /* the front at the bottom of the screen */
    } else {
      ASSERT(y1 - y0 > 1.5f * (x1 - x0));
    }
    uint32_t inside, outside, box;
    cover(&im, x0, y0, x1, y1, &inside, &outside, &box);
    fprintf(stderr, "%s view: the scan covers %u of the %u pixels of its projected box; %u outside\n",
            top ? "top" : "right", inside, box, outside);
    ASSERT(outside == 0);
    ASSERT(inside > box / 8);
    stbi_image_free(im.px);
  }
  mesh_destroy(m);
  harness_stop(&h);
}

TEST(a_weight_changes_the_picture_only_where_the_mesh_moves) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  char *a = tmp_png("neutral.png"), *b = tmp_png("jaw.png");
  screenshot(h.stream_port, a, NULL);
  const char *const jaw[] = {"--weights", "jaw_open=1", NULL};
  screenshot(h.stream_port, b, jaw);
  image ia = load(a), ib = load(b);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology t;
  mesh_adjacency adj;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&adj, t.vertex_count, t.triangles, t.triangle_count), NULL);
  /* The moved vertices, and their neighbours (whose normals change), at rest and moved. */
  const mesh_target *jt = &m->targets[mesh_find_target(m, "jaw_open")];
  uint8_t *moved = calloc(t.vertex_count, 1);
  for (uint32_t k = 0; k < jt->count; k++) moved[t.render_to_topo[jt->indices[k]]] = 1;
  uint8_t *near = calloc(t.vertex_count, 1);
  for (uint32_t v = 0; v < t.vertex_count; v++)
    if (moved[v]) {
      near[v] = 1;
      for (uint32_t e = adj.vv_offsets[v]; e < adj.vv_offsets[v + 1]; e++) near[adj.vv[e]] = 1;
    }
  float *w = calloc(m->target_count, sizeof(float)), *opened = malloc(sizeof(float) * 3 * m->vertex_count);
  w[mesh_find_target(m, "jaw_open")] = 1;
  mesh_evaluate(m, w, NULL, opened);
  vw_camera cam = camera_for(m);
  float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
  for (uint32_t r = 0; r < m->vertex_count; r++) {
    if (!near[t.render_to_topo[r]]) continue;
    const float *ps[2] = {m->positions + 3 * r, opened + 3 * r};
    for (int k = 0; k < 2; k++) {
      float px, py;
      ASSERT(vw_camera_project(&cam, ia.w, ia.h, ps[k], &px, &py));
      x0 = fminf(x0, px), y0 = fminf(y0, py), x1 = fmaxf(x1, px), y1 = fmaxf(y1, py);
    }
  }
  uint32_t changed = 0, stray = 0;
  for (int y = 0; y < ia.h; y++)
    for (int x = 0; x < ia.w; x++) {
      size_t i = 4 * ((size_t)y * ia.w + x);
      if (memcmp(ia.px + i, ib.px + i, 3) == 0) continue;
      changed++;
      if (x < x0 - 2 || x > x1 + 2 || y < y0 - 2 || y > y1 + 2) stray++;
    }
  fprintf(stderr, "jaw_open changed %u pixels, all inside [%.0f, %.0f] x [%.0f, %.0f] but %u\n", changed, x0, x1, y0, y1,
          stray);
  ASSERT(changed > 100);
  ASSERT(stray == 0);
  free(w), free(opened), free(moved), free(near);
  stbi_image_free(ia.px);
  stbi_image_free(ib.px);
  mesh_adjacency_fini(&adj);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  harness_stop(&h);
}

static int same_pixels(const char *pa, const char *pb) {
  image a = load(pa), b = load(pb);
  int same = a.w == b.w && a.h == b.h && memcmp(a.px, b.px, (size_t)a.w * a.h * 4) == 0;
  stbi_image_free(a.px);
  stbi_image_free(b.px);
  return same;
}

TEST(a_viewer_that_lived_through_1000_frames_draws_what_a_fresh_one_draws) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  char *lived = tmp_png("lived.png"), *fresh = tmp_png("fresh.png");
  const char *const wait[] = {"--wait-version", "1000", NULL};
  pid_t pid = start_view(h.stream_port, lived, wait);
  /* Let it join before the edits start. */
  for (int i = 0; i < 200; i++) {
    cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
    int viewers = cJSON_GetObjectItem(st, "viewers")->valueint;
    cJSON_Delete(st);
    if (viewers >= 1) break;
    usleep(50000);
  }
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_buf b;
  proto_buf_init(&b);
  for (uint32_t e = 1; e <= 1000; e++) {
    if (e % 2) {
      uint32_t t = e % er.mesh->target_count;
      float v = (float)((e * 37) % 100) / 100.0f;
      ASSERT_OK(proto_encode_edit_weights(&b, e, 1, &t, &v), NULL);
    } else {
      uint32_t vtx = (e * 7919) % er.mesh->vertex_count;
      int32_t q[3] = {(int32_t)(e % 4000) - 2000, 500, -300};
      ASSERT_OK(proto_encode_edit_offsets(&b, e, 1, &vtx, q), NULL);
    }
    if (b.len > 60000 || e == 1000) {
      ASSERT_OK(client_send_buf(&ed, &b), NULL);
      b.len = 0;
    }
  }
  harness_follow(&ed, &er, 1000, 20000);
  wait_ok(pid);
  screenshot(h.stream_port, fresh, wait);
  ASSERT(same_pixels(lived, fresh));
  proto_buf_fini(&b);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

/* SIGKILL: no BYE, the socket just ends. */
static void kill_server(harness *h) {
  client_close(&h->rpc);
  kill(h->pid, SIGKILL);
  waitpid(h->pid, NULL, 0);
  h->pid = 0;
}

static int wait_viewers(harness *h, int n) {
  for (int i = 0; i < 400; i++) {
    cJSON *st = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
    int viewers = cJSON_GetObjectItem(st, "viewers")->valueint;
    cJSON_Delete(st);
    if (viewers >= n) return 1;
    usleep(25000);
  }
  return 0;
}

TEST(the_viewer_survives_its_server_dying_and_resynchronises_from_the_next) {
  static harness a, b; /* the harness keeps pointers to them until they stop */
  const char *const args[] = {"--demo", NULL};
  harness_start(&a, "demo", args);
  int port = a.stream_port;
  char *after = tmp_png("after.png"), *fresh = tmp_png("fresh2.png");
  const char *const wait[] = {"--wait-version", "3", NULL};
  pid_t pid = start_view(port, after, wait);
  ASSERT(wait_viewers(&a, 1));
  kill_server(&a);
  usleep(300000); /* the viewer notices and starts its backoff */
  char p[16];
  snprintf(p, sizeof(p), "%d", port);
  const char *const again[] = {"--demo", "--stream-port", p, NULL};
  harness_start(&b, "demo", again);
  ASSERT_EQ(b.stream_port, port);
  ASSERT(wait_viewers(&b, 1)); /* it came back by itself */
  for (int i = 1; i <= 3; i++) {
    char w[128];
    snprintf(w, sizeof(w), "{\"session\":\"demo\",\"weights\":{\"smile_L\":%.1f}}", 0.3 * i);
    cJSON_Delete(harness_rpc_ok(&b, "weights.set", w));
  }
  wait_ok(pid); /* it wrote its picture of the new server's session */
  screenshot(port, fresh, wait);
  ASSERT(same_pixels(after, fresh));
  harness_stop(&b);
}

/* What a user sees through every stream option: the first protocol version and lossless
 * draw the same pixels; the default grid (half a step 6.3 µm on this 41 cm head) draws a
 * picture within a couple of levels of it; a coarse grid a viewer asked for (0.2 mm, paced at
 * 10 Hz) puts the head in the same place (its shading shows the grid as a faint grain). */
TEST(screenshots_through_every_stream_option_look_like_the_exact_one) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  /* The bare head (session.create's "demo"): --demo's skin reaches the viewers that ask
   * "texture", which protocol 1 cannot, and this compares shapes */
  cJSON_Delete(harness_rpc_ok(&h, "session.close", "{\"session\":\"demo\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "session.create", "{\"session\":\"demo\",\"mesh\":\"demo\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":1,\"jaw_open\":0.4}}"));
  cJSON_Delete(harness_rpc_ok(&h, "deform.begin",
                              "{\"session\":\"demo\",\"gesture\":1,\"pick\":20400,\"handle_radius\":0.01,\"roi_radius\":0.05}"));
  cJSON_Delete(harness_rpc_ok(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":1,\"translate\":[0,0.01,0.02]}"));
  cJSON_Delete(harness_rpc_ok(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":1}"));
  const char *const v1[] = {"--protocol", "1", NULL}, *const exact[] = {"--lossless", NULL},
                    *const coarse[] = {"--max-rate", "10", "--tolerance", "0.0002", NULL};
  char *p1 = tmp_png("v1.png"), *pl = tmp_png("lossless.png"), *pq = tmp_png("quantised.png"),
       *pc = tmp_png("coarse.png");
  screenshot(h.stream_port, p1, v1);
  screenshot(h.stream_port, pl, exact);
  screenshot(h.stream_port, pq, NULL);
  screenshot(h.stream_port, pc, coarse);
  ASSERT(same_pixels(p1, pl));
  image a = load(pl), q = load(pq), c = load(pc);
  ASSERT(a.w == q.w && a.h == q.h && a.w == c.w && a.h == c.h);
  uint32_t shade = 0, worst = 0, outline = 0;
  for (size_t i = 0; i < (size_t)a.w * a.h; i++) {
    for (int k = 0; k < 3; k++) {
      uint32_t d = (uint32_t)abs(a.px[4 * i + k] - q.px[4 * i + k]);
      shade += d > 2;
      worst = d > worst ? d : worst;
    }
    outline += is_background(a.px + 4 * i) != is_background(c.px + 4 * i);
  }
  fprintf(stderr, "default grid: %u channel values differ by more than 2 levels (worst %u); coarse grid: %u pixels "
                  "change between head and background, of %d\n", shade, worst, outline, a.w * a.h);
  ASSERT(shade <= (uint32_t)(a.w * a.h * 3) / 1000);
  ASSERT(outline <= (uint32_t)(a.w * a.h) / 200);
  stbi_image_free(a.px);
  stbi_image_free(q.px);
  stbi_image_free(c.px);
  harness_stop(&h);
}

TEST(deform_view_open_uploads_a_local_mesh_over_tls_opens_a_session_and_draws_it) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem");
  char dir[1200], rpc[64];
  snprintf(dir, sizeof(dir), "%s/view-data", test_tmpdir());
  const char *const args[] = {"--data", dir, "--tls-cert", cert, "--tls-key", key, NULL};
  harness h;
  harness_start_full(&h, NULL, args, "view-admin", ca);
  snprintf(rpc, sizeof(rpc), "127.0.0.1:%d", h.rpc_port);
  const char *file = test_assimp_model("OFF/Wuson.off");
  char *png = tmp_png("opened.png");
  const char *const extra[] = {"--open", file, "--rpc", rpc, "--token", "view-admin", "--tls", "--tls-ca", ca, NULL};
  screenshot(h.stream_port, png, extra);
  /* The server has the file, byte for byte, and a session named after it with its mesh. */
  char stored[1400];
  snprintf(stored, sizeof(stored), "%s/meshes/Wuson.off", dir);
  FILE *a = fopen(file, "rb"), *b = fopen(stored, "rb");
  ASSERT(a && b);
  int ca_, cb_;
  do {
    ca_ = fgetc(a);
    cb_ = fgetc(b);
    ASSERT_EQ(ca_, cb_);
  } while (ca_ != EOF);
  fclose(a);
  fclose(b);
  mesh *m = NULL;
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_import(file, NULL, &m, err, sizeof(err)), err);
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"Wuson\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "vertices")->valueint, m->vertex_count);
  cJSON_Delete(st);
  mesh_destroy(m);
  /* And the picture shows something. */
  image im = load(png);
  uint32_t fg = 0;
  for (int i = 0; i < im.w * im.h; i++) fg += !is_background(im.px + 4 * (size_t)i);
  fprintf(stderr, "the opened mesh covers %u pixels\n", fg);
  ASSERT(fg > 1000);
  stbi_image_free(im.px);
  harness_stop(&h);
}

/* ana's mask (a disc around the nose tip, painted over JSON-RPC) in deform-view as ana: the
 * picture darkens only where the held vertices project, and only there, against the same view
 * as bob (whose mask is empty). The server sends each author's mask to that author alone
 * (capability "mask"), so bob's picture is the plain head. */
TEST(deform_view_darkens_what_its_authors_mask_holds_and_nothing_else) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  client_conn ana;
  harness_connect(&h, &ana, h.rpc_port);
  cJSON *r = NULL;
  char msg[256];
  ASSERT_EQ(harness_call(&ana, "hello", "{\"author\":\"ana\"}", &r, msg, sizeof(msg)), 0);
  cJSON_Delete(r);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  const float *tip = m->positions + 3 * 20400;
  char p[512];
  snprintf(p, sizeof(p), "{\"session\":\"demo\",\"radius\":0.02,\"falloff\":\"constant\",\"samples\":[{\"center\":[%.9g,%.9g,%.9g]}]}",
           tip[0], tip[1], tip[2]);
  ASSERT_EQ(harness_call(&ana, "mask.stroke", p, &r, msg, sizeof(msg)), 0);
  cJSON_Delete(r);
  char *pa = tmp_png("mask_ana.png"), *pb = tmp_png("mask_bob.png");
  const char *const as_ana[] = {"--author", "ana", NULL}, *const as_bob[] = {"--author", "bob", NULL};
  screenshot(h.stream_port, pa, as_ana);
  screenshot(h.stream_port, pb, as_bob);
  image ia = load(pa), ib = load(pb);
  /* Where the held vertices project (the disc within 0.02 of the tip), one pixel around. */
  vw_camera cam = camera_for(m);
  float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *q = m->positions + 3 * v;
    float d2 = (q[0] - tip[0]) * (q[0] - tip[0]) + (q[1] - tip[1]) * (q[1] - tip[1]) + (q[2] - tip[2]) * (q[2] - tip[2]);
    if (d2 >= 0.02f * 0.02f) continue;
    float px, py;
    ASSERT(vw_camera_project(&cam, ia.w, ia.h, q, &px, &py));
    x0 = fminf(x0, px), y0 = fminf(y0, py), x1 = fmaxf(x1, px), y1 = fmaxf(y1, py);
  }
  uint32_t changed = 0, stray = 0, darker = 0;
  for (int y = 0; y < ia.h; y++)
    for (int x = 0; x < ia.w; x++) {
      size_t i = 4 * ((size_t)y * ia.w + x);
      if (memcmp(ia.px + i, ib.px + i, 3) == 0) continue;
      changed++;
      if (x < x0 - 2 || x > x1 + 2 || y < y0 - 2 || y > y1 + 2) stray++;
      int sa = ia.px[i] + ia.px[i + 1] + ia.px[i + 2], sb = ib.px[i] + ib.px[i + 1] + ib.px[i + 2];
      darker += 10 * sa < 8 * sb; /* at least a fifth darker */
    }
  fprintf(stderr, "ana's mask changed %u pixels (%u a fifth darker or more), inside [%.0f, %.0f] x [%.0f, %.0f] but %u\n",
          changed, darker, x0, x1, y0, y1, stray);
  ASSERT(changed > 50);
  ASSERT_EQ(stray, 0);
  ASSERT(darker > changed * 8 / 10);
  stbi_image_free(ia.px);
  stbi_image_free(ib.px);
  mesh_destroy(m);
  client_close(&ana);
  harness_stop(&h);
}

/* ---- textures (docs/protocol.md §17): drawn where the UVs put them --------------------------------- */

/* A square of side 2 facing +Z, UVs 0..1 across it, its MTL's map_Kd a 64 × 64 TGA of four
 * quadrants (the image's top left red, top right green, bottom left blue, bottom right yellow),
 * all written into the test's folder, which the harness's server reads meshes from. */
static void write_quadrant_quad(void) {
  uint8_t tga[18 + 64 * 64 * 4] = {0, 0, 2};
  tga[12] = 64, tga[14] = 64, tga[16] = 32, tga[17] = 0x28; /* 32 bits, row 0 the top */
  for (int y = 0; y < 64; y++)
    for (int x = 0; x < 64; x++) {
      static const uint8_t rgb[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 0}};
      const uint8_t *c = rgb[(y >= 32) * 2 + (x >= 32)];
      uint8_t *p = tga + 18 + 4 * (64 * y + x);
      p[0] = c[2], p[1] = c[1], p[2] = c[0], p[3] = 255; /* BGRA */
    }
  test_write_file("quadrants.tga", tga, sizeof(tga));
  static const char mtl[] = "newmtl quad\nKd 1 1 1\nmap_Kd quadrants.tga\n";
  test_write_file("quad.mtl", mtl, strlen(mtl));
  static const char obj[] = "mtllib quad.mtl\nv -1 -1 0\nv 1 -1 0\nv 1 1 0\nv -1 1 0\n"
                            "vt 0 0\nvt 1 0\nvt 1 1\nvt 0 1\nvn 0 0 1\nusemtl quad\n"
                            "f 1/1/1 2/2/1 3/3/1\nf 1/1/1 3/3/1 4/4/1\n";
  test_write_file("quad.obj", obj, strlen(obj));
}

TEST(deform_view_draws_a_texture_where_its_uvs_put_it_the_images_top_row_at_v_1) {
  write_quadrant_quad();
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "session.create", "{\"session\":\"quad\",\"mesh\":\"quad.obj\"}");
  char *png = tmp_png("quad.png"), *lit = tmp_png("quad_lit.png");
  const char *const unlit[] = {"--session", "quad", "--camera", "0,0,0", "--unlit", NULL};
  const char *const lights[] = {"--session", "quad", "--camera", "0,0,0", NULL};
  screenshot(h.stream_port, png, unlit);
  screenshot(h.stream_port, lit, lights);
  image im = load(png), il = load(lit);
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_tmp_path("quad.obj"), NULL, &m, err, sizeof(err)), err);
  ASSERT_EQ(m->image_count, 1);
  vw_camera cam = camera_for(m);
  cam.yaw = cam.pitch = 0;
  /* Each quadrant's centre, (u, v) = (0.25 or 0.75, 0.25 or 0.75), where it projects. */
  static const struct {
    float u, v;
    uint8_t rgb[3];
  } at[4] = {{0.25f, 0.75f, {255, 0, 0}}, {0.75f, 0.75f, {0, 255, 0}}, {0.25f, 0.25f, {0, 0, 255}}, {0.75f, 0.25f, {255, 255, 0}}};
  for (int k = 0; k < 4; k++) {
    float p[3] = {2 * at[k].u - 1, 2 * at[k].v - 1, 0}, px, py;
    ASSERT(vw_camera_project(&cam, im.w, im.h, p, &px, &py));
    const uint8_t *got = im.px + 4 * ((size_t)(int)py * im.w + (int)px), *shade = il.px + 4 * ((size_t)(int)py * il.w + (int)px);
    fprintf(stderr, "uv (%.2f, %.2f) at pixel (%.0f, %.0f): unlit %u %u %u, lit %u %u %u\n", at[k].u, at[k].v, px, py, got[0],
            got[1], got[2], shade[0], shade[1], shade[2]);
    for (int c = 0; c < 3; c++) {
      ASSERT(abs(got[c] - at[k].rgb[c]) <= 2); /* exactly the texel: 0 and 255 survive sRGB and gamma */
      ASSERT(at[k].rgb[c] ? shade[c] > 60 : shade[c] < 40); /* lit: the same hue, shaded */
    }
  }
  stbi_image_free(im.px);
  stbi_image_free(il.px);
  mesh_destroy(m);
  harness_stop(&h);
}

/* ---- matcaps (issue 26): the page's formula, on the CPU ------------------------------------------ */

/* viewer/README.md's matcap k (0 clay, 1 red wax, 2 skin) of the view-space unit normal n, as
 * both viewers' shaders compute it (render.js MATCAP_GLSL, vw_shaders.c MATCAP_FN), clamped. */
static void matcap_expect(int k, const float n[3], float out[3]) {
  static const float dark[3][3] = {{0.28f, 0.24f, 0.22f}, {0.22f, 0.02f, 0.02f}, {0.36f, 0.18f, 0.14f}};
  static const float lite[3][3] = {{0.80f, 0.74f, 0.68f}, {0.86f, 0.18f, 0.13f}, {0.96f, 0.75f, 0.63f}};
  static const float rimc[3][3] = {{0.10f, 0.10f, 0.12f}, {0.40f, 0.10f, 0.06f}, {0.45f, 0.20f, 0.15f}};
  static const float spec[3] = {0.06f, 0.45f, 0.12f}, shin[3] = {8.0f, 40.0f, 20.0f};
  vec3 l = {-0.4f, 0.6f, 0.7f}, h;
  glm_vec3_normalize(l);
  glm_vec3_copy(l, h);
  h[2] += 1.0f;
  glm_vec3_normalize(h);
  float d = 0.5f + 0.5f * glm_vec3_dot((float *)n, l), r = powf(1.0f - fmaxf(n[2], 0.0f), 3.0f);
  float sp = powf(fmaxf(glm_vec3_dot((float *)n, h), 0.0f), shin[k]);
  for (int c = 0; c < 3; c++)
    out[c] = 255.0f * fminf(fmaxf(dark[k][c] + (lite[k][c] - dark[k][c]) * d + rimc[k][c] * r + spec[k] * sp, 0.0f), 1.0f);
}

/* Three flat unit squares apart, each its own normal: +z, turned 40° about y, turned −35° about x.
 * Every pixel inside one has that square's normal (flat: the welded normals are the plane's). */
static const float matcap_normals[3][3] = {{0, 0, 1}, {0.64278761f, 0, 0.76604444f}, {0, -0.57357644f, 0.81915204f}};

static void write_matcap_squares(float centres[3][3]) {
  char obj[2048];
  size_t len = 0;
  for (int q = 0; q < 3; q++) {
    const float *n = matcap_normals[q];
    float u[3] = {n[2], 0, -n[0]}, v[3]; /* u ⟂ n in the xz plane, v = n × u */
    float ul = sqrtf(u[0] * u[0] + u[2] * u[2]);
    if (ul < 1e-6f) u[0] = 1, u[2] = 0, ul = 1;
    for (int c = 0; c < 3; c++) u[c] /= ul;
    glm_vec3_cross((float *)n, u, v);
    float o[3] = {1.5f * (float)(q - 1), 0, 0};
    glm_vec3_copy(o, centres[q]);
    static const float corner[4][2] = {{-0.5f, -0.5f}, {0.5f, -0.5f}, {0.5f, 0.5f}, {-0.5f, 0.5f}};
    for (int k = 0; k < 4; k++)
      len += (size_t)snprintf(obj + len, sizeof(obj) - len, "v %.7f %.7f %.7f\n", o[0] + corner[k][0] * u[0] + corner[k][1] * v[0],
                              o[1] + corner[k][0] * u[1] + corner[k][1] * v[1], o[2] + corner[k][0] * u[2] + corner[k][1] * v[2]);
  }
  for (int q = 0; q < 3; q++)
    len += (size_t)snprintf(obj + len, sizeof(obj) - len, "f %d %d %d\nf %d %d %d\n", 4 * q + 1, 4 * q + 2, 4 * q + 3,
                            4 * q + 1, 4 * q + 3, 4 * q + 4);
  test_write_file("squares.obj", obj, len);
}

TEST(deform_view_shading_clay_wax_and_skin_draws_the_matcap_formula_of_each_pixels_view_normal) {
  float centres[3][3];
  write_matcap_squares(centres);
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "session.create", "{\"session\":\"squares\",\"mesh\":\"squares.obj\"}");
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_tmp_path("squares.obj"), NULL, &m, err, sizeof(err)), err);
  vw_camera cam = camera_for(m);
  cam.yaw = glm_rad(25.0f), cam.pitch = glm_rad(-15.0f);
  mat4 view, proj;
  vw_camera_matrices(&cam, 320, 240, view, proj);
  static const char *const names[3] = {"clay", "wax", "skin"};
  float lit_first[3] = {0, 0, 0}, first_want[3] = {0, 0, 0};
  for (int k = -1; k < 3; k++) {
    char *png = tmp_png("matcap.png");
    const char *const extra[] = {"--session", "squares", "--camera", "25,-15,0", "--shading", k < 0 ? "lit" : names[k], NULL};
    screenshot(h.stream_port, png, extra);
    image im = load(png);
    for (int q = 0; q < 3; q++) {
      float px, py, nv[3], want[3];
      ASSERT(vw_camera_project(&cam, im.w, im.h, centres[q], &px, &py));
      glm_mat4_mulv3(view, (float *)matcap_normals[q], 0.0f, nv);
      glm_vec3_normalize(nv);
      const uint8_t *got = im.px + 4 * ((size_t)(int)py * im.w + (int)px);
      if (k < 0) {
        if (q == 0) for (int c = 0; c < 3; c++) lit_first[c] = got[c];
        continue;
      }
      matcap_expect(k, nv, want);
      if (q == 0 && k == 0) glm_vec3_copy(want, first_want);
      fprintf(stderr, "%s, square %d (view normal %.3f %.3f %.3f) at (%.0f, %.0f): %u %u %u, the formula %.1f %.1f %.1f\n",
              names[k], q, nv[0], nv[1], nv[2], px, py, got[0], got[1], got[2], want[0], want[1], want[2]);
      for (int c = 0; c < 3; c++) ASSERT(fabsf(got[c] - want[c]) <= 2.0f);
    }
    stbi_image_free(im.px);
  }
  /* and lit is not clay */
  ASSERT(fabsf(lit_first[0] - first_want[0]) + fabsf(lit_first[1] - first_want[1]) + fabsf(lit_first[2] - first_want[2]) > 12.0f);
  mesh_destroy(m);
  harness_stop(&h);
}

/* ---- texture clips (docs/protocol.md §18): the rebuilt frame is the albedo --------------------------- */

#define CW 48
#define CH 40
#define CF 3

/* Frame f of the test's texture clip: smooth, inside [0.15, 0.85] (nothing clamps), and each
 * frame differing from the others by up to about 0.2. */
static double clip_texel(uint32_t f, uint32_t x, uint32_t y, int ch) {
  if (f >= CF) return 0.85 - clip_texel(f - CF, CW - 1 - x, y, 2 - ch); /* a second clip's frames */
  double mean = 0.35 + 0.25 * (x + y + 7.0 * ch) / (CW + CH + 14.0);
  return mean + 0.12 * sin(0.9 * f + 0.3 * ch) * cos(0.15 * x) + 0.08 * (f == 2) * sin(0.2 * y + ch);
}

/* texclip.upload `name` of CF uncompressed TGA frames (row 0 the top), clip_texel's frames
 * first .. first + CF - 1, following clip `follows`. */
static char *clip_upload_params(const char *session, const char *follows, const char *name, uint32_t first) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "session", session);
  cJSON_AddStringToObject(p, "name", name);
  cJSON_AddStringToObject(p, "clip", follows);
  cJSON_AddNumberToObject(p, "fps", 10);
  cJSON_AddNumberToObject(p, "max_error", 2.0 / 255);
  cJSON *frames = cJSON_AddArrayToObject(p, "frames");
  static uint8_t tga[18 + CW * CH * 3];
  for (uint32_t f = 0; f < CF; f++) {
    memset(tga, 0, 18);
    tga[2] = 2, tga[12] = CW, tga[14] = CH, tga[16] = 24, tga[17] = 0x20; /* 24 bits, row 0 the top */
    for (uint32_t y = 0; y < CH; y++)
      for (uint32_t x = 0; x < CW; x++)
        for (int ch = 0; ch < 3; ch++) tga[18 + 3 * (CW * y + x) + 2 - ch] = (uint8_t)lround(255 * clip_texel(first + f, x, y, ch));
    char *b64 = test_base64_encode(tga, sizeof(tga));
    cJSON_AddItemToArray(frames, cJSON_CreateString(b64));
    free(b64);
  }
  char *out = cJSON_PrintUnformatted(p);
  cJSON_Delete(p);
  return out;
}

/* The replica of a viewer granted "texclip" once the session's clips and TEXWEIGHTS have come. */
static void join_for_texclips(harness *h, const char *session, client_conn *c, client_replica *r) {
  const proto_hello_opts o = {.caps = PROTO_CAP_BIT(PROTO_CAP_TEXCLIP)};
  harness_join2(h, c, r, session, PROTO_ROLE_VIEWER, NULL, &o);
  char err[256];
  while (r->texweights_serial == 0) {
    proto_header hd;
    const uint8_t *pl;
    ASSERT_OK(client_read_frame(c, 5000, &hd, &pl, err, sizeof(err)), err);
    ASSERT_OK(client_replica_apply(r, &hd, pl, err, sizeof(err)), err);
  }
}

/* What --unlit shows at texture coordinates (s, t) (t = 1 − v, row 0 at t = 0): the sum of the
 * entries' frames, each texel as the rebuild pass stores it (mesh_texclip_texel with the mean
 * weighted, rounded to a byte), filtered bilinearly as the clip's texture is sampled. */
static void clip_expect(const client_replica *r, double s, double t, float out[3]) {
  double acc[3] = {0, 0, 0};
  for (uint32_t e = 0; e < r->texweights_count; e++) {
    const proto_texweights_entry *w = &r->texweights[e];
    const mesh_texclip *c = client_replica_texclip(r, w->id);
    ASSERT(c && w->count == c->component_count);
    float zero[PROTO_TEXCLIP_MAX_COMPONENTS] = {0};
    double fx = s * c->width - 0.5, fy = t * c->height - 0.5;
    int x0 = (int)floor(fx), y0 = (int)floor(fy);
    for (int j = 0; j < 4; j++) {
      int x = x0 + (j & 1), y = y0 + (j >> 1);
      double wt = ((j & 1) ? fx - x0 : 1 - (fx - x0)) * ((j >> 1) ? fy - y0 : 1 - (fy - y0));
      x = x < 0 ? 0 : x >= (int)c->width ? (int)c->width - 1 : x;
      y = y < 0 ? 0 : y >= (int)c->height ? (int)c->height - 1 : y;
      float full[3], mean[3];
      mesh_texclip_texel(c, w->weights, (uint32_t)x, (uint32_t)y, full);
      mesh_texclip_texel(c, zero, (uint32_t)x, (uint32_t)y, mean);
      for (int k = 0; k < 3; k++) acc[k] += wt * round(255.0 * (full[k] - (1.0 - w->mean) * mean[k]));
    }
  }
  for (int k = 0; k < 3; k++) out[k] = (float)fmin(255, fmax(0, acc[k]));
}

/* A clip of the quad standing still, recorded and compressed: a clock for texture clips. */
static void record_still(harness *h, const char *clip) {
  char p[256];
  snprintf(p, sizeof(p), "{\"session\":\"quad\",\"clip\":\"%s\",\"fps\":10,\"max_frames\":3}", clip);
  cJSON_Delete(harness_rpc_ok(h, "anim.record_start", p));
  usleep(400 * 1000);
  cJSON_Delete(harness_rpc_ok(h, "anim.record_stop", "{\"session\":\"quad\"}"));
  snprintf(p, sizeof(p), "{\"session\":\"quad\",\"clip\":\"%s\",\"components\":1}", clip);
  cJSON_Delete(harness_rpc_ok(h, "anim.compress", p));
}

TEST(deform_view_draws_a_texture_clips_rebuilt_frame_at_the_uvs_as_the_cpu_reference_for_two_frames_and_a_crossfade) {
  write_quadrant_quad();
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "session.create", "{\"session\":\"quad\",\"mesh\":\"quad.obj\"}");
  record_still(&h, "still");
  record_still(&h, "other");
  char *up = clip_upload_params("quad", "still", "tint", 0);
  cJSON_Delete(harness_rpc_ok(&h, "texclip.upload", up));
  free(up);
  up = clip_upload_params("quad", "other", "shade", CF);
  cJSON_Delete(harness_rpc_ok(&h, "texclip.upload", up));
  free(up);
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"quad\",\"clip\":\"still\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"quad\"}"));
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_tmp_path("quad.obj"), NULL, &m, err, sizeof(err)), err);
  vw_camera cam = camera_for(m);
  cam.yaw = cam.pitch = 0;
  float first[5][5][3];
  for (int shot = 0; shot < 3; shot++) {
    if (shot < 2)
      cJSON_Delete(harness_rpc_ok(&h, "anim.seek", shot ? "{\"session\":\"quad\",\"frame\":2}" : "{\"session\":\"quad\",\"frame\":0}"));
    else { /* a crossfade into "other", held part of the way: both clips listed, summed. The sleep
            * is a lower bound on the fade's time: α ≥ 0.1 at the pause whatever the load (0.05
            * asked: the last frame streamed may be a tick old); α < 0.95 unless the sleep and
            * the pause take 19 s. */
      cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"quad\",\"clip\":\"still\"}"));
      cJSON_Delete(harness_rpc_ok(&h, "anim.blend", "{\"session\":\"quad\",\"clip\":\"other\",\"duration\":20.0}"));
      usleep(2000 * 1000);
      cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"quad\"}"));
    }
    client_conn c;
    client_replica r;
    join_for_texclips(&h, "quad", &c, &r);
    ASSERT_EQ(r.texclip_count, 2);
    ASSERT_EQ(r.texweights_count, shot < 2 ? 1u : 2u);
    if (shot == 2) ASSERT(r.texweights[0].mean > 0.05f && r.texweights[1].mean > 0.05f);
    char *png = tmp_png(shot == 2 ? "clipmix.png" : shot ? "clip2.png" : "clip0.png");
    const char *const unlit[] = {"--session", "quad", "--camera", "0,0,0", "--unlit", "--wait-texclips", "2", NULL};
    screenshot(h.stream_port, png, unlit);
    image im = load(png);
    double worst = 0, moved = 0;
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++) {
        float p[3] = {2 * (0.1f + 0.2f * i) - 1, 2 * (0.1f + 0.2f * j) - 1, 0}, px, py;
        ASSERT(vw_camera_project(&cam, im.w, im.h, p, &px, &py));
        /* The pixel's centre back onto the quad (z = 0): its own UV. */
        vec3 o, d;
        vw_camera_ray(&cam, im.w, im.h, floorf(px) + 0.5f, floorf(py) + 0.5f, o, d);
        float k = -o[2] / d[2], u = (o[0] + k * d[0] + 1) / 2, v = (o[1] + k * d[1] + 1) / 2;
        float want[3];
        clip_expect(&r, u, 1.0 - v, want);
        const uint8_t *got = im.px + 4 * ((size_t)(int)py * im.w + (int)px);
        for (int ch = 0; ch < 3; ch++) {
          worst = fmax(worst, fabs(got[ch] - want[ch]));
          if (shot == 1) moved = fmax(moved, fabs(want[ch] - first[i][j][ch]));
          else if (shot == 0) first[i][j][ch] = want[ch];
        }
      }
    fprintf(stderr, "texture clip shot %d (%u entries, means %.3f %.3f): worst |pixel - CPU reference| %.2f / 255 over 25 UVs; "
            "%.1f / 255 from frame 0's\n", shot, r.texweights_count, r.texweights[0].mean,
            r.texweights_count > 1 ? r.texweights[1].mean : 0.0, worst, moved);
    ASSERT(worst <= 2.0); /* the byte the pass stores, filtered: llvmpipe's 8-bit bilinear weights */
    if (shot == 1) ASSERT(moved > 20); /* two different weight sets */
    stbi_image_free(im.px);
    client_close(&c);
    client_replica_fini(&r);
  }
  mesh_destroy(m);
  harness_stop(&h);
}

/* The nearest triangle the ray hits (Möller–Trumbore), -1 for none; its barycentrics in b. */
static int64_t ray_hit(const mesh *m, const float o[3], const float d[3], float b[2]) {
  int64_t best = -1;
  float best_t = 1e30f;
  for (uint32_t t = 0; t < m->triangle_count; t++) {
    const float *p0 = m->positions + 3 * m->triangles[3 * t], *p1 = m->positions + 3 * m->triangles[3 * t + 1],
                *p2 = m->positions + 3 * m->triangles[3 * t + 2];
    float e1[3], e2[3], s[3], pv[3], qv[3];
    for (int k = 0; k < 3; k++) e1[k] = p1[k] - p0[k], e2[k] = p2[k] - p0[k], s[k] = o[k] - p0[k];
    glm_vec3_cross((float *)d, e2, pv);
    float det = glm_vec3_dot(e1, pv);
    if (fabsf(det) < 1e-12f) continue;
    float u = glm_vec3_dot(s, pv) / det;
    glm_vec3_cross(s, e1, qv);
    float v = glm_vec3_dot((float *)d, qv) / det, tt = glm_vec3_dot(e2, qv) / det;
    if (u < 0 || v < 0 || u + v > 1 || tt <= 0 || tt >= best_t) continue;
    best_t = tt, best = t, b[0] = u, b[1] = v;
  }
  return best;
}

static float srgb_to_linear(float c) { return c <= 0.04045f ? c / 12.92f : powf((c + 0.055f) / 1.055f, 2.4f); }

/* What --unlit draws for base colour × image at (u, v), on the CPU: the linear texels averaged
 * over a box of `side` texels (the pixel's footprint: what a mip level holds) around (u, 1 − v)
 * (flip = 0), or around (u, v) (flip = 1: the mistake this test would catch), or the base colour
 * alone (im NULL). */
static void unlit_expect(const mesh_submesh *s, const mesh_image *im, float u, float v, float side, int flip,
                         float out[3]) {
  float tex[3] = {1, 1, 1};
  if (im) {
    int r = side > 1 ? (int)(side / 2) : 0;
    long cx = (long)floorf(u * (float)im->width), cy = (long)floorf((flip ? v : 1.0f - v) * (float)im->height);
    double sum[3] = {0, 0, 0};
    for (long y = cy - r; y <= cy + r; y++)
      for (long x = cx - r; x <= cx + r; x++) {
        long xi = ((x % (long)im->width) + (long)im->width) % (long)im->width;
        long yi = ((y % (long)im->height) + (long)im->height) % (long)im->height;
        for (int c = 0; c < 3; c++) sum[c] += srgb_to_linear(im->rgba[4 * ((size_t)yi * im->width + (size_t)xi) + (size_t)c] / 255.0f);
      }
    for (int c = 0; c < 3; c++) tex[c] = (float)(sum[c] / ((2.0 * r + 1) * (2.0 * r + 1)));
  }
  for (int c = 0; c < 3; c++) out[c] = 255.0f * powf((s->has_color ? s->base_color[c] : 1.0f) * tex[c], 1.0f / 2.2f);
}

/* The UV where the ray through pixel (x, y) hits triangle t of m, or 0 when it hits another. */
static int uv_at(const mesh *m, const vw_camera *cam, int w, int h, float x, float y, int64_t t, float uv[2]) {
  vec3 o, d;
  float b[2];
  vw_camera_ray(cam, w, h, x, y, o, d);
  if (ray_hit(m, o, d, b) != t) return 0;
  const uint32_t *tri = m->triangles + 3 * t;
  for (int c = 0; c < 2; c++)
    uv[c] = (1 - b[0] - b[1]) * m->uvs[2 * tri[0] + c] + b[0] * m->uvs[2 * tri[1] + c] + b[1] * m->uvs[2 * tri[2] + c];
  return 1;
}

TEST(deform_view_draws_spider_obj_with_its_jpeg_textures_at_the_uvs_a_cpu_ray_cast_finds) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "session.create", "{\"session\":\"spider\",\"mesh\":\"OBJ/spider.obj\"}");
  char *png = tmp_png("spider.png");
  const char *const extra[] = {"--session", "spider", "--unlit", "--camera", "60,20,0", "--size", "640x480", NULL};
  screenshot(h.stream_port, png, extra);
  image im = load(png);
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_assimp_model("OBJ/spider.obj"), NULL, &m, err, sizeof(err)), err);
  vw_camera cam = camera_for(m);
  cam.yaw = glm_rad(60.0f), cam.pitch = glm_rad(20.0f);
  /* Pixels whose centre and the centres of the next pixels right and down hit one triangle:
   * inside it, away from edges and silhouettes. Their colour against the ray cast's UV (the
   * neighbours give the footprint in texels), three ways. */
  double err_ok = 0, err_flip = 0, err_plain = 0;
  uint32_t n = 0;
  for (int y = 2; y < im.h - 2; y += 2)
    for (int x = 2; x < im.w - 2; x += 2) {
      vec3 o, d;
      float b[2], uv[2], ux[2], uy[2];
      vw_camera_ray(&cam, im.w, im.h, x + 0.5f, y + 0.5f, o, d);
      int64_t t = ray_hit(m, o, d, b);
      if (t < 0 || !uv_at(m, &cam, im.w, im.h, x + 0.5f, y + 0.5f, t, uv) ||
          !uv_at(m, &cam, im.w, im.h, x + 1.5f, y + 0.5f, t, ux) || !uv_at(m, &cam, im.w, im.h, x + 0.5f, y + 1.5f, t, uy) ||
          !uv_at(m, &cam, im.w, im.h, x - 0.5f, y - 0.5f, t, b))
        continue;
      const mesh_submesh *s = NULL;
      for (uint32_t i = 0; i < m->submesh_count; i++)
        if (t >= m->submeshes[i].first_triangle && t < m->submeshes[i].first_triangle + m->submeshes[i].triangle_count)
          s = &m->submeshes[i];
      if (!s || !s->texture) continue;
      const mesh_image *img = &m->images[s->texture - 1];
      float side = fmaxf(hypotf((ux[0] - uv[0]) * (float)img->width, (ux[1] - uv[1]) * (float)img->height),
                         hypotf((uy[0] - uv[0]) * (float)img->width, (uy[1] - uv[1]) * (float)img->height));
      float want[3], flip[3], plain[3];
      unlit_expect(s, img, uv[0], uv[1], side, 0, want);
      unlit_expect(s, img, uv[0], uv[1], side, 1, flip);
      unlit_expect(s, NULL, 0, 0, 0, 0, plain);
      const uint8_t *got = im.px + 4 * ((size_t)y * im.w + x);
      for (int c = 0; c < 3; c++) {
        err_ok += fabsf(got[c] - want[c]), err_flip += fabsf(got[c] - flip[c]), err_plain += fabsf(got[c] - plain[c]);
      }
      n++;
    }
  ASSERT(n > 200);
  err_ok /= 3.0 * n, err_flip /= 3.0 * n, err_plain /= 3.0 * n;
  fprintf(stderr, "spider: %u pixels inside textured triangles; mean |error| %.1f / 255 against the texture at the ray's UV, "
          "%.1f with v flipped, %.1f untextured\n", n, err_ok, err_flip, err_plain);
  ASSERT(err_ok < 6.0);            /* 2.8 on llvmpipe: the box is not quite GL's trilinear mip */
  ASSERT(err_ok * 4 < err_flip);   /* the right way up (22.5) */
  ASSERT(err_ok * 10 < err_plain); /* and textured at all (153) */
  stbi_image_free(im.px);
  mesh_destroy(m);
  harness_stop(&h);
}

/* Background pixels in the band where the slider panel goes (the right 280 pixels, below the
 * status line and above the bottom line), as a fraction of the band. */
static double panel_band_background(const image *im) {
  uint32_t bg = 0, n = 0;
  for (int y = 40; y < im->h - 40; y++)
    for (int x = im->w - 270; x < im->w - 10; x++, n++) bg += is_background(im->px + 4 * ((size_t)y * im->w + x));
  return n ? (double)bg / n : 0;
}

/* Issue 26: a session without targets gets no slider panel (it took 22 % of the window, empty);
 * the demo head, with its 68 targets, still does. With --overlay, as the window draws it. */
TEST(a_session_without_targets_shows_no_empty_slider_panel) {
  char copy[1024];
  harness h;
  start_with_man_z_up(&h, copy);
  char *man = tmp_png("panel-man.png"), *demo = tmp_png("panel-demo.png");
  const char *const man_args[] = {"--session", "man", "--size", "800x480", "--overlay", NULL};
  const char *const demo_args[] = {"--size", "800x480", "--overlay", NULL};
  screenshot(h.stream_port, man, man_args);
  screenshot(h.stream_port, demo, demo_args);
  image a = load(man), b = load(demo);
  ASSERT_EQ(a.w, 800);
  double without = panel_band_background(&a), with = panel_band_background(&b);
  fprintf(stderr, "background in the panel's band: %.0f %% without targets, %.0f %% with them\n", 100 * without, 100 * with);
  ASSERT(without > 0.9);
  ASSERT(with < 0.2);
  stbi_image_free(a.px);
  stbi_image_free(b.px);
  harness_stop(&h);
}

/* A server whose SNAPSHOT does not decode (here: a listener in this test that answers HELLO with a
 * WELCOME, then a SNAPSHOT of junk) is refused, and deform-view lives on: it shows nothing, says
 * why and, when its --timeout passes without a screenshot, exits with status 1 and the reason —
 * it does not crash on the mesh it never got. */
TEST(deform_view_refuses_a_snapshot_that_does_not_decode_and_says_why) {
  int port;
  int lfd = harness_listen_loopback(&port);
  char connect[64], log[1024];
  snprintf(connect, sizeof(connect), "127.0.0.1:%d", port);
  snprintf(log, sizeof(log), "%s/refused-view.log", test_tmpdir());
  const char *argv[] = {viewer_bin(), "--connect", connect, "--session", "demo", "--screenshot",
                        test_tmp_path("refused.png"), "--size", "160x120", "--timeout", "3", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  proto_header h;
  const uint8_t *p;
  client_conn peer = harness_accept_hello(lfd, 1 << 20, 10000, &h, &p);
  int fd = peer.fd;
  proto_buf b;
  proto_buf_init(&b);
  proto_welcome w = {7, PROTO_ROLE_VIEWER, {"demo", 4}};
  ASSERT_OK(proto_encode_welcome(&b, 1, &w), NULL);
  ASSERT_OK(proto_encode_snapshot2_head(&b, 1, 40, 0), NULL); /* a version 2 SNAPSHOT's frame... */
  memset(proto_buf_append(&b, 40), 0xa5, 40);                  /* ...whose body is junk */
  ASSERT(write(fd, b.data, b.len) == (ssize_t)b.len);
  proto_buf_fini(&b);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  client_close(&peer);
  close(lfd);
  if (!WIFEXITED(st)) test__fail(__FILE__, __LINE__, "deform-view died of signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  ASSERT_EQ(WEXITSTATUS(st), 1);
  FILE *f = fopen(log, "r");
  ASSERT(f != NULL);
  char text[4096] = "";
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  ASSERT_STR_CONTAINS(text, "SNAPSHOT refused");
}
