/*
 * test_mask.c — masks through a real deformd (issue 25, "Masks"): an author's mask holds its
 * vertices bit for bit under every brush kind and under ARAP and Laplacian gestures, leaves no
 * crease at its edge (the dihedral oracle, tests/support/oracle.c), the topology auto-mask
 * holds another loose part, the mask survives kill -9 and undoes and redoes in one order with
 * its author's other steps, holds nobody else's brush, and bumps no version.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "oracle.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

/* A JSON-RPC connection that said hello as `author`. */
static void connect_as(harness *h, client_conn *c, const char *author) {
  harness_connect(h, c, h->rpc_port);
  char p[128], msg[256];
  cJSON *r = NULL;
  snprintf(p, sizeof(p), "{\"author\":\"%s\"}", author);
  ASSERT_EQ(harness_call(c, "hello", p, &r, msg, sizeof(msg)), 0);
  cJSON_Delete(r);
}

/* A call on `c` that must succeed (params printf-formatted); the caller frees the result. */
static cJSON *ok(client_conn *c, const char *method, const char *fmt, ...) {
  char p[4096], msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p, sizeof(p), fmt, ap);
  va_end(ap);
  cJSON *r = NULL;
  int rc = harness_call(c, method, p, &r, msg, sizeof(msg));
  if (rc) fprintf(stderr, "%s %s: %d %s\n", method, p, rc, msg);
  ASSERT_EQ(rc, 0);
  return r;
}

static uint64_t num(cJSON *r, const char *key) {
  cJSON *v = cJSON_GetObjectItem(r, key);
  ASSERT(v != NULL);
  return (uint64_t)v->valuedouble;
}

static uint64_t version_now(client_conn *c) {
  cJSON *r = ok(c, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = num(r, "version");
  cJSON_Delete(r);
  return v;
}

/* The render vertices the caller's mask holds fully (value 1), and how many hold anything. */
static uint32_t *held_vertices(client_conn *c, const char *session, uint32_t *count, uint32_t *any) {
  cJSON *r = ok(c, "mask.get", "{\"session\":\"%s\"}", session);
  cJSON *vs = cJSON_GetObjectItem(r, "vertices"), *ms = cJSON_GetObjectItem(r, "values");
  uint32_t n = (uint32_t)cJSON_GetArraySize(vs), k = 0;
  uint32_t *out = malloc(sizeof(uint32_t) * (n + 1));
  for (uint32_t i = 0; i < n; i++)
    if (cJSON_GetArrayItem(ms, (int)i)->valuedouble == 1.0) out[k++] = (uint32_t)cJSON_GetArrayItem(vs, (int)i)->valueint;
  cJSON_Delete(r);
  *count = k;
  if (any) *any = n;
  return out;
}

static uint32_t nearest(const client_replica *r, const double at[3]) {
  uint32_t best = 0;
  double bd = INFINITY;
  for (uint32_t v = 0; v < r->mesh->vertex_count; v++) {
    double d = 0;
    for (int c = 0; c < 3; c++) d += (r->mesh->positions[3 * v + c] - at[c]) * (r->mesh->positions[3 * v + c] - at[c]);
    if (d < bd) bd = d, best = v;
  }
  return best;
}

/* The point of the demo head's cheek the tests mask and stroke over (a vertex's position). */
static void cheek(const client_replica *r, double c[3]) {
  const double near[3] = {0.03, 0.02, 0.09};
  uint32_t v = nearest(r, near);
  for (int k = 0; k < 3; k++) c[k] = r->mesh->positions[3 * v + k];
}

/* ana's hard-edged mask: everything within `radius` of c (a constant falloff). */
static void paint_disc(client_conn *ana, const char *session, const double c[3], double radius) {
  cJSON *r = ok(ana, "mask.stroke", "{\"session\":\"%s\",\"tool\":\"paint\",\"radius\":%.9g,\"strength\":1,"
                "\"falloff\":\"constant\",\"samples\":[{\"center\":[%.9g,%.9g,%.9g]}]}", session, radius, c[0], c[1], c[2]);
  ASSERT(num(r, "changed") > 10);
  cJSON_Delete(r);
}

/* Vertices of `held` whose offset differs, bit for bit, between two offset arrays. */
static uint32_t held_moved(const float *before, const float *after, const uint32_t *held, uint32_t n) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) k += memcmp(before + 3 * held[i], after + 3 * held[i], sizeof(float) * 3) != 0;
  return k;
}

static uint32_t any_moved(const float *before, const float *after, uint32_t n) {
  uint32_t k = 0;
  for (uint32_t v = 0; v < n; v++) k += memcmp(before + 3 * v, after + 3 * v, sizeof(float) * 3) != 0;
  return k;
}

/* The welded positions a replica shows (base + offsets). */
static double *welded_shape(const client_replica *r, const mesh_topology *t, int with_offsets) {
  double *p = malloc(sizeof(double) * 3 * t->vertex_count);
  for (uint32_t v = 0; v < t->vertex_count; v++) {
    uint32_t k = t->topo_render[t->topo_offsets[v]];
    for (int c = 0; c < 3; c++)
      p[3 * v + c] = (double)r->mesh->positions[3 * k + c] + (with_offsets ? (double)r->offsets[3 * k + c] : 0.0);
  }
  return p;
}

static oracle_crease crease_of(const client_replica *r) {
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, r->mesh, NULL, 0), NULL);
  double *rest = welded_shape(r, &t, 0), *now = welded_shape(r, &t, 1);
  oracle_crease c;
  oracle_dihedral_change(t.triangles, t.triangle_count, rest, now, 10.0, 0.0, &c);
  free(rest);
  free(now);
  mesh_topology_fini(&t);
  return c;
}

/* The demo head with ana's hard-edged disc of radius 0.012 on the cheek, a viewer following it,
 * and the vertices the disc holds. */
typedef struct scene {
  harness h;
  client_conn ana, v;
  client_replica r;
  double c[3];
  uint32_t *held, nheld;
} scene;

static void scene_start(scene *x) {
  harness_start(&x->h, "demo", demo_args);
  connect_as(&x->h, &x->ana, "ana");
  harness_join(&x->h, &x->v, &x->r, "demo", PROTO_ROLE_VIEWER, NULL);
  cheek(&x->r, x->c);
  paint_disc(&x->ana, "demo", x->c, 0.012);
  x->held = held_vertices(&x->ana, "demo", &x->nheld, NULL);
  ASSERT(x->nheld > 20);
}

static void scene_stop(scene *x) {
  free(x->held);
  client_replica_fini(&x->r);
  client_close(&x->v);
  client_close(&x->ana);
  harness_stop(&x->h);
}

TEST(masked_vertices_stay_bit_for_bit_still_under_every_brush_kind) {
  scene x;
  scene_start(&x);
  client_conn *ana = &x.ana, *v = &x.v;
  client_replica *r = &x.r;
  const double *c = x.c;
  uint32_t nv = r->mesh->vertex_count;
  float *before = malloc(sizeof(float) * 3 * nv);
  static const char *const kinds[] = {"grab", "inflate", "smooth", "flatten", "pinch", "draw", "crease", "layer"};
  for (int k = 0; k < 8; k++) {
    memcpy(before, r->offsets, sizeof(float) * 3 * nv);
    cJSON *s = ok(ana, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"%s\",\"radius\":0.03,\"strength\":0.5,"
                  "\"samples\":[{\"center\":[%.9g,%.9g,%.9g],\"direction\":[0,0.004,0.002]},"
                  "{\"center\":[%.9g,%.9g,%.9g],\"direction\":[0,0.004,0.002]}]}", kinds[k], c[0] - 0.01, c[1], c[2],
                  c[0] + 0.01, c[1] + 0.002, c[2]);
    uint64_t ver = num(s, "version");
    cJSON_Delete(s);
    harness_follow(v, r, ver, 20000);
    uint32_t moved = any_moved(before, r->offsets, nv), held_now = held_moved(before, r->offsets, x.held, x.nheld);
    fprintf(stderr, "%-8s moved %u vertices, %u of the %u held\n", kinds[k], moved, held_now, x.nheld);
    ASSERT(moved > 50);
    ASSERT_EQ(held_now, 0);
  }
  free(before);
  scene_stop(&x);
}

TEST(masked_vertices_stay_bit_for_bit_still_under_arap_and_laplacian_gestures) {
  scene x;
  scene_start(&x);
  client_conn *ana = &x.ana, *v = &x.v;
  client_replica *r = &x.r;
  const double beside[3] = {x.c[0] + 0.035, x.c[1], x.c[2]};
  uint32_t pick = nearest(r, beside), nv = r->mesh->vertex_count;
  float *before = malloc(sizeof(float) * 3 * nv);
  static const char *const modes[] = {"arap", "laplacian"};
  for (int m = 0; m < 2; m++) {
    memcpy(before, r->offsets, sizeof(float) * 3 * nv);
    cJSON_Delete(ok(ana, "deform.begin", "{\"session\":\"demo\",\"gesture\":%d,\"mode\":\"%s\",\"pick\":%u,"
                    "\"handle_radius\":0.006,\"roi_radius\":0.06}", m + 1, modes[m], pick));
    cJSON *d = ok(ana, "deform.drag", "{\"session\":\"demo\",\"gesture\":%d,\"translate\":[0,0.006,0.004]}", m + 1);
    uint64_t ver = num(d, "version");
    cJSON_Delete(d);
    cJSON_Delete(ok(ana, "deform.end", "{\"session\":\"demo\",\"gesture\":%d}", m + 1));
    harness_follow(v, r, ver, 20000);
    uint32_t moved = any_moved(before, r->offsets, nv), held_now = held_moved(before, r->offsets, x.held, x.nheld);
    fprintf(stderr, "%-9s moved %u vertices, %u of the %u held\n", modes[m], moved, held_now, x.nheld);
    ASSERT(moved > 50);
    ASSERT_EQ(held_now, 0);
    cJSON_Delete(ok(ana, "deform.reset", "{\"session\":\"demo\"}"));
    harness_follow(v, r, version_now(ana), 20000);
  }
  free(before);
  scene_stop(&x);
}

/* The same hard-edged disc (values 1 inside, 0 outside) under an ARAP drag beside it and a draw
 * stroke across it: the surface turns no edge by more than 10° against the rest shape — the
 * gesture meets the held vertices with the smooth border's zero slope (they are its anchors),
 * the brush fades out over its radius before them (dfm_mask_free) — while the same stroke
 * without the feather would step at the disc's rim (the last check: bob's stroke, unmasked,
 * moves the rim's vertices by far more than ana's). */
TEST(no_crease_over_10_degrees_at_the_masks_edge_under_a_gesture_or_a_brush) {
  scene x;
  scene_start(&x);
  client_conn *ana = &x.ana, *v = &x.v, bob;
  client_replica *r = &x.r;
  const double *c = x.c;
  connect_as(&x.h, &bob, "bob");
  const double beside[3] = {c[0] + 0.04, c[1], c[2]};
  uint32_t pick = nearest(r, beside);
  cJSON_Delete(ok(ana, "deform.begin", "{\"session\":\"demo\",\"gesture\":1,\"pick\":%u,\"handle_radius\":0.006,"
                  "\"roi_radius\":0.06}", pick));
  cJSON *d = ok(ana, "deform.drag", "{\"session\":\"demo\",\"gesture\":1,\"translate\":[0,0.005,0.003]}");
  uint64_t ver = num(d, "version");
  cJSON_Delete(d);
  cJSON_Delete(ok(ana, "deform.end", "{\"session\":\"demo\",\"gesture\":1}"));
  harness_follow(v, r, ver, 20000);
  oracle_crease g = crease_of(r);
  fprintf(stderr, "ARAP drag beside the mask: worst edge turn %.2f°, %u edges over 10°\n", g.max_deg, g.over);
  ASSERT(g.max_deg > 0.5);
  ASSERT_EQ(g.over, 0);
  float rim[2][3];
  const double at_rim[3] = {c[0] + 0.0125, c[1], c[2]};
  uint32_t rv = nearest(r, at_rim);
  for (int who = 0; who < 2; who++) {
    cJSON_Delete(ok(ana, "deform.reset", "{\"session\":\"demo\"}"));
    float zero[3];
    cJSON *s = ok(ana, "state.get", "{\"session\":\"demo\"}");
    harness_follow(v, r, num(s, "version"), 20000);
    cJSON_Delete(s);
    memcpy(zero, r->offsets + 3 * rv, sizeof(zero));
    s = ok(who ? &bob : ana, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"draw\",\"radius\":0.03,\"strength\":0.3,"
           "\"samples\":[{\"center\":[%.9g,%.9g,%.9g]},{\"center\":[%.9g,%.9g,%.9g]}]}", c[0] - 0.01, c[1], c[2],
           c[0] + 0.01, c[1], c[2]);
    harness_follow(v, r, num(s, "version"), 20000);
    cJSON_Delete(s);
    oracle_crease b = crease_of(r);
    for (int k = 0; k < 3; k++) rim[who][k] = r->offsets[3 * rv + k] - zero[k];
    fprintf(stderr, "draw stroke by %s: worst edge turn %.2f°, %u edges over 10°; rim vertex moved %.3g\n",
            who ? "bob (no mask)" : "ana (masked)", b.max_deg, b.over,
            sqrt(rim[who][0] * rim[who][0] + rim[who][1] * rim[who][1] + rim[who][2] * rim[who][2]));
    if (!who) ASSERT_EQ(b.over, 0);
  }
  double na = sqrt(rim[0][0] * rim[0][0] + rim[0][1] * rim[0][1] + rim[0][2] * rim[0][2]);
  double nb = sqrt(rim[1][0] * rim[1][0] + rim[1][1] * rim[1][1] + rim[1][2] * rim[1][2]);
  ASSERT(nb > 0 && na < 0.2 * nb);
  client_close(&bob);
  scene_stop(&x);
}

/* Two icospheres of radius 0.1, one at the origin and one at x = 0.3, as an OBJ in the test's
 * mesh folder; returns its path. */
static const char *two_spheres(void) {
  mesh *m = oracle_icosphere(3, 0.1);
  size_t cap = 200 * (size_t)m->vertex_count + 100 * (size_t)m->triangle_count + 64, n = 0;
  char *text = malloc(2 * cap);
  for (int part = 0; part < 2; part++)
    for (uint32_t v = 0; v < m->vertex_count; v++)
      n += (size_t)snprintf(text + n, 2 * cap - n, "v %.9g %.9g %.9g\n", m->positions[3 * v] + 0.3 * part,
                            m->positions[3 * v + 1], m->positions[3 * v + 2]);
  for (int part = 0; part < 2; part++)
    for (uint32_t t = 0; t < m->triangle_count; t++) {
      const uint32_t *k = m->triangles + 3 * t, o = part * m->vertex_count + 1;
      n += (size_t)snprintf(text + n, 2 * cap - n, "f %u %u %u\n", k[0] + o, k[1] + o, k[2] + o);
    }
  const char *path = test_write_file("two_spheres.obj", text, n);
  free(text);
  mesh_destroy(m);
  return path;
}

static float mask_at(client_conn *c, const char *session, uint32_t vertex) {
  cJSON *r = ok(c, "mask.get", "{\"session\":\"%s\"}", session);
  cJSON *vs = cJSON_GetObjectItem(r, "vertices"), *ms = cJSON_GetObjectItem(r, "values");
  float m = 0.0f;
  for (int i = 0; i < cJSON_GetArraySize(vs); i++)
    if ((uint32_t)cJSON_GetArrayItem(vs, i)->valueint == vertex) m = (float)cJSON_GetArrayItem(ms, i)->valuedouble;
  cJSON_Delete(r);
  return m;
}

/* mask.auto by topology from a pick on one sphere holds the whole other sphere: a brush wide
 * enough to reach both leaves the other bit for bit still. By normal, the far side of the
 * picked sphere is held and the picked side is not; by boundary, a closed mesh holds nothing. */
TEST(auto_mask_by_topology_leaves_another_loose_part_untouched) {
  harness h;
  harness_start(&h, "demo", demo_args);
  const char *path = two_spheres();
  char p[1024];
  snprintf(p, sizeof(p), "{\"session\":\"two\",\"mesh\":\"%s\"}", harness_mesh_name(path));
  cJSON_Delete(harness_rpc_ok(&h, "session.create", p));
  client_conn ana, v;
  client_replica r;
  connect_as(&h, &ana, "ana");
  harness_join(&h, &v, &r, "two", PROTO_ROLE_VIEWER, NULL);
  const double tip[3] = {0.1, 0, 0}, back[3] = {-0.1, 0, 0};
  uint32_t a = nearest(&r, tip), far = nearest(&r, back), nv = r.mesh->vertex_count, other = 0;
  for (uint32_t k = 0; k < nv; k++) other += r.mesh->positions[3 * k] > 0.15f;
  ASSERT(other > 100 && other < nv);
  cJSON *m = ok(&ana, "mask.auto", "{\"session\":\"two\",\"mode\":\"topology\",\"vertex\":%u}", a);
  ASSERT_EQ(num(m, "changed"), other);
  ASSERT_EQ(num(m, "masked"), other);
  cJSON_Delete(m);
  cJSON *s = ok(&ana, "brush.stroke", "{\"session\":\"two\",\"brush\":\"inflate\",\"radius\":0.5,\"strength\":0.2,"
                "\"samples\":[{\"center\":[0.15,0,0]}]}");
  harness_follow(&v, &r, num(s, "version"), 20000);
  cJSON_Delete(s);
  uint32_t still = 0, moved = 0;
  for (uint32_t k = 0; k < nv; k++) {
    int zero = r.offsets[3 * k] == 0.0f && r.offsets[3 * k + 1] == 0.0f && r.offsets[3 * k + 2] == 0.0f;
    if (r.mesh->positions[3 * k] > 0.15f) still += zero;
    else moved += !zero;
  }
  fprintf(stderr, "inflate over both spheres: %u of %u vertices of the other sphere still, %u of the picked one moved\n",
          still, other, moved);
  ASSERT_EQ(still, other);
  ASSERT_EQ(moved, nv - other);
  /* By normal: the side facing away from the pick's normal is held, the pick's own side is not. */
  cJSON_Delete(ok(&ana, "mask.auto", "{\"session\":\"two\",\"mode\":\"normal\",\"vertex\":%u,\"angle\":60}", a));
  ASSERT(mask_at(&ana, "two", far) == 1.0f);
  ASSERT(mask_at(&ana, "two", a) == 0.0f);
  /* By boundary: two closed spheres have none; replacing the mask clears it. */
  m = ok(&ana, "mask.auto", "{\"session\":\"two\",\"mode\":\"boundary\"}");
  ASSERT_EQ(num(m, "masked"), 0);
  cJSON_Delete(m);
  char msg[256];
  cJSON *res = NULL;
  ASSERT_EQ(harness_call(&ana, "mask.auto", "{\"session\":\"two\",\"mode\":\"topology\"}", &res, msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "vertex");
  ASSERT_EQ(harness_call(&ana, "mask.auto", "{\"session\":\"two\",\"mode\":\"sideways\",\"vertex\":1}", &res, msg, sizeof(msg)),
            -32602);
  client_replica_fini(&r);
  client_close(&v);
  client_close(&ana);
  harness_stop(&h);
}

static char *mask_text(client_conn *c) {
  cJSON *r = ok(c, "mask.get", "{\"session\":\"demo\"}");
  cJSON_DeleteItemFromObject(r, "version"); /* the values only: the shape's version moves on */
  char *t = cJSON_PrintUnformatted(r);
  cJSON_Delete(r);
  return t;
}

static void expect_step(client_conn *c, const char *method, const char *kind) {
  cJSON *r = ok(c, method, "{\"session\":\"demo\"}");
  ASSERT(strcmp(cJSON_GetObjectItem(r, "kind")->valuestring, kind) == 0);
  cJSON_Delete(r);
}

/* ana's mask survives kill -9 bit for bit; it changes no version; bob's brush is not held by
 * it; ana's history.undo takes back her newest step, mask or stroke, and redo puts them back in
 * the reverse order, also across another kill -9. */
TEST(a_mask_survives_kill_9_undoes_in_order_with_its_authors_steps_holds_nobody_else_and_bumps_no_version) {
  const char *dir = test_tmp_path("mask-durable");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  client_conn ana, bob, v;
  client_replica r;
  connect_as(&h, &ana, "ana");
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  double c[3];
  cheek(&r, c);
  cJSON_Delete(ok(&ana, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"inflate\",\"radius\":0.02,\"strength\":0.1,"
                  "\"samples\":[{\"center\":[%.9g,%.9g,%.9g]}]}", c[0] + 0.03, c[1], c[2]));
  uint64_t v0 = version_now(&ana);
  cJSON *m = ok(&ana, "mask.stroke", "{\"session\":\"demo\",\"radius\":0.012,\"falloff\":\"linear\","
                "\"samples\":[{\"center\":[%.9g,%.9g,%.9g]},{\"center\":[%.9g,%.9g,%.9g]}]}", c[0], c[1], c[2],
                c[0] + 0.005, c[1], c[2]);
  ASSERT_EQ(num(m, "version"), v0);
  ASSERT(num(m, "step") > 0 && num(m, "dabs") >= 2);
  cJSON_Delete(m);
  char *m0 = mask_text(&ana);
  cJSON_Delete(ok(&ana, "mask.invert", "{\"session\":\"demo\"}"));
  cJSON_Delete(ok(&ana, "mask.invert", "{\"session\":\"demo\"}"));
  ASSERT_EQ(version_now(&ana), v0); /* three mask steps: no version for anyone */
  char *m1 = mask_text(&ana);
  uint32_t nheld, nany;
  free(held_vertices(&ana, "demo", &nheld, &nany));
  ASSERT(nany > 100 && nheld > 5);
  client_replica_fini(&r);
  client_close(&v);
  client_close(&ana);
  harness_kill(&h);

  harness_start_on(&h, dir, "demo", "--demo");
  connect_as(&h, &ana, "ana");
  connect_as(&h, &bob, "bob");
  char *m2 = mask_text(&ana);
  ASSERT(strcmp(m1, m2) == 0);
  free(m2);
  ASSERT_EQ(version_now(&ana), v0);
  /* bob's mask is his own (empty), and ana's does not hold his stroke. */
  cJSON *bm = ok(&bob, "mask.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(bm, "vertices")), 0);
  cJSON_Delete(bm);
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  uint32_t *held = held_vertices(&ana, "demo", &nheld, NULL);
  uint32_t nv = r.mesh->vertex_count;
  float *before = malloc(sizeof(float) * 3 * nv);
  memcpy(before, r.offsets, sizeof(float) * 3 * nv);
  cJSON *s = ok(&bob, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"draw\",\"radius\":0.03,\"strength\":0.3,"
                "\"samples\":[{\"center\":[%.9g,%.9g,%.9g]}]}", c[0], c[1], c[2]);
  harness_follow(&v, &r, num(s, "version"), 20000);
  cJSON_Delete(s);
  ASSERT_EQ(held_moved(before, r.offsets, held, nheld), nheld);
  free(before);
  free(held);
  /* ana: undo the mask steps (newest first: invert, invert, stroke), then her inflate; redo all back. */
  uint64_t v1 = version_now(&ana);
  expect_step(&ana, "history.undo", "mask");
  expect_step(&ana, "history.undo", "mask");
  char *mid = mask_text(&ana);
  ASSERT(strcmp(mid, m0) == 0); /* as the stroke left it (1 - (1 - m) need not be m in floats) */
  free(mid);
  free(m0);
  expect_step(&ana, "history.undo", "mask");
  ASSERT_EQ(version_now(&ana), v1);
  free(held_vertices(&ana, "demo", &nheld, &nany));
  ASSERT_EQ(nany, 0);
  expect_step(&ana, "history.undo", "brush");
  ASSERT(version_now(&ana) == v1 + 1);
  expect_step(&ana, "history.redo", "brush");
  expect_step(&ana, "history.redo", "mask");
  client_replica_fini(&r);
  client_close(&v);
  client_close(&ana);
  client_close(&bob);
  harness_kill(&h);

  harness_start_on(&h, dir, "demo", "--demo");
  connect_as(&h, &ana, "ana");
  expect_step(&ana, "history.redo", "mask");
  expect_step(&ana, "history.redo", "mask");
  m2 = mask_text(&ana);
  ASSERT(strcmp(m1, m2) == 0);
  free(m2);
  char msg[256];
  cJSON *res = NULL;
  ASSERT_EQ(harness_call(&ana, "history.redo", "{\"session\":\"demo\"}", &res, msg, sizeof(msg)), -32006);
  /* A new step ends the redo: clear, undo it, paint, and the cleared mask cannot come back. */
  cJSON_Delete(ok(&ana, "mask.clear", "{\"session\":\"demo\"}"));
  free(held_vertices(&ana, "demo", &nheld, &nany));
  ASSERT_EQ(nany, 0);
  expect_step(&ana, "history.undo", "mask");
  m2 = mask_text(&ana);
  ASSERT(strcmp(m1, m2) == 0);
  free(m2);
  free(m1);
  client_close(&ana);
  harness_stop(&h);
}
