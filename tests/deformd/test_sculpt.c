/*
 * test_sculpt.c — sculpting through a real deformd, as issue 18 asks of it: the README's drag
 * with the server's defaults measured by the dihedral-angle oracle (tests/support/oracle.c) on
 * the shape a viewer receives; soft constraints; brush strokes sent in pieces over the binary
 * port against the same path sent at once over JSON-RPC; the new stroke parameters and their
 * refusals.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfm_stroke.h"
#include "harness.h"
#include "oracle.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

static uint64_t version_of(cJSON *r) {
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

/* The welded positions of what a replica shows (base + offsets: no weights are set here). */
static double *welded_shape(const client_replica *r, const mesh_topology *t) {
  double *p = malloc(sizeof(double) * 3 * t->vertex_count);
  for (uint32_t v = 0; v < t->vertex_count; v++) {
    uint32_t k = t->topo_render[t->topo_offsets[v]];
    for (int c = 0; c < 3; c++) p[3 * v + c] = (double)r->mesh->positions[3 * k + c] + (double)r->offsets[3 * k + c];
  }
  return p;
}

/* The README's drag with the server's defaults (ARAP, smooth border) through JSON-RPC, and the
 * same with "border": "sharp", each on a fresh session: what the viewer receives turns no edge
 * by more than 10° with the default, and creases with the sharp border. */
TEST(the_readme_drag_reaches_viewers_without_a_crease_by_default) {
  harness h;
  harness_start(&h, "demo", demo_args);
  for (int sharp = 0; sharp < 2; sharp++) {
    if (sharp) {
      cJSON_Delete(harness_rpc_ok(&h, "session.close", "{\"session\":\"demo\"}"));
      cJSON_Delete(harness_rpc_ok(&h, "session.create", "{\"session\":\"demo\",\"mesh\":\"demo\"}"));
    }
    client_conn v;
    client_replica r;
    harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
    char params[256];
    snprintf(params, sizeof(params),
             "{\"session\":\"demo\",\"gesture\":1,\"pick\":20400,\"handle_radius\":0.01,\"roi_radius\":0.05%s}",
             sharp ? ",\"border\":\"sharp\"" : "");
    cJSON *b = harness_rpc_ok(&h, "deform.begin", params);
    ASSERT_STR_CONTAINS(cJSON_GetObjectItem(b, "border")->valuestring, sharp ? "sharp" : "smooth");
    cJSON_Delete(b);
    uint64_t ver = version_of(harness_rpc_ok(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":1,\"translate\":[0,0.01,0]}"));
    cJSON_Delete(harness_rpc_ok(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":1}"));
    harness_follow(&v, &r, ver, 20000);
    mesh_topology t;
    ASSERT_OK(mesh_topology_init(&t, r.mesh, NULL, 0), NULL);
    double *rest = malloc(sizeof(double) * 3 * t.vertex_count), *now = welded_shape(&r, &t);
    for (uint32_t i = 0; i < 3 * t.vertex_count; i++) rest[i] = t.positions[i];
    oracle_crease c;
    oracle_dihedral_change(t.triangles, t.triangle_count, rest, now, 10.0, 0.0, &c);
    fprintf(stderr, "%s border: worst edge turn %.2f°, %u edges over 10°\n", sharp ? "sharp" : "smooth", c.max_deg, c.over);
    if (sharp) {
      ASSERT(c.over > 10);
    } else {
      ASSERT_EQ(c.over, 0);
    }
    free(rest);
    free(now);
    mesh_topology_fini(&t);
    client_replica_fini(&r);
    client_close(&v);
  }
  harness_stop(&h);
}

/* A soft constraint with a large weight and no position holds its vertex where it was while
 * the handle moves; given a position, it takes its vertex there. */
TEST(soft_constraints_in_deform_begin_hold_or_move_their_vertex) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  /* Vertex 20368 lies within a centimetre of the nose tip: it follows a 1 cm drag freely. */
  const uint32_t vx = 20368;
  float at[3];
  memcpy(at, r.mesh->positions + 3 * vx, sizeof(at));
  uint64_t ver = 0;
  const char *soft[3] = {"", ",\"soft\":[{\"vertex\":20368,\"weight\":1e6}]",
                         ",\"soft\":[{\"vertex\":20368,\"weight\":1e6,\"position\":[%.9g,%.9g,%.9g]}]"};
  float moved[3][3];
  for (int k = 0; k < 3; k++) {
    char extra[256], params[512];
    snprintf(extra, sizeof(extra), soft[k], at[0] + 0.003, at[1], at[2]);
    snprintf(params, sizeof(params),
             "{\"session\":\"demo\",\"gesture\":%d,\"mode\":\"laplacian\",\"pick\":20400,\"handle_radius\":0.004,"
             "\"roi_radius\":0.05%s}",
             k + 1, extra);
    cJSON_Delete(harness_rpc_ok(&h, "deform.begin", params));
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%d,\"translate\":[0,0.01,0]}", k + 1);
    ver = version_of(harness_rpc_ok(&h, "deform.drag", params));
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"gesture\":%d}", k + 1);
    cJSON_Delete(harness_rpc_ok(&h, "deform.end", params));
    harness_follow(&v, &r, ver, 20000);
    memcpy(moved[k], r.offsets + 3 * vx, sizeof(moved[k]));
    cJSON_Delete(harness_rpc_ok(&h, "deform.reset", "{\"session\":\"demo\"}"));
  }
  ASSERT(moved[0][1] > 0.003);                                       /* free: it follows the handle up */
  for (int c = 0; c < 3; c++) ASSERT_NEAR(moved[1][c], 0.0, 1e-4);    /* held where it was */
  ASSERT_NEAR(moved[2][0], 0.003, 1e-4);                             /* taken to its position */
  ASSERT_NEAR(moved[2][1], 0.0, 1e-4);
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"soft\":[{\"vertex\":1}]}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "weight");
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"soft\":[{\"vertex\":99999999,\"weight\":1}]}", msg,
                            sizeof(msg)),
            -32006);
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"border\":\"soft\"}", msg, sizeof(msg)), -32602);
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
}

/* A stroke path along the demo head's cheek, 40 points. */
static void cheek_path(proto_brush_sample *s, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    double f = (double)i / (n - 1);
    s[i] = (proto_brush_sample){{(float)(0.03 + 0.025 * f), (float)(-0.03 + 0.02 * f), (float)(0.082 - 0.006 * f)},
                                {0, 0, -1},
                                0.02f,
                                0.5f};
  }
}

/* A binary editor sends a layer stroke as its pointer moves: four pieces, the later ones with
 * PROTO_BRUSH_CONTINUE, front faces only and auto-smoothing on. Another session gets the same
 * path in one JSON-RPC call with the same settings. Both end in the same offsets, which are the
 * ones dfm_stroke_apply gives for the whole path (the oracle of what placing dabs means). */
TEST(a_stroke_sent_in_pieces_over_the_binary_port_ends_as_the_whole_path_sent_at_once) {
  harness h;
  harness_start(&h, "demo", demo_args);
  cJSON_Delete(harness_rpc_ok(&h, "session.create", "{\"session\":\"other\",\"mesh\":\"demo\"}"));
  const uint32_t n = 40;
  proto_brush_sample pts[40];
  cheek_path(pts, n);
  /* Pieces over the binary port, the view (0, 0, -1) in each direction. */
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_buf b;
  proto_buf_init(&b);
  const uint32_t cut[5] = {0, 7, 19, 20, 40};
  uint8_t autosmooth = 6; /* 6/15 */
  for (int k = 0; k < 4; k++) {
    uint8_t flags = PROTO_BRUSH_FRONT_ONLY | (uint8_t)(autosmooth << PROTO_BRUSH_AUTOSMOOTH_SHIFT) | (k ? PROTO_BRUSH_CONTINUE : 0);
    ASSERT_OK(proto_encode_edit_brush(&b, 100 + (uint32_t)k, 7 /* layer */, 0, flags, cut[k + 1] - cut[k], pts + cut[k]), NULL);
  }
  /* Strokes run in order: a refused one after them answers once they are all applied. */
  proto_brush_sample broken = pts[0];
  broken.radius = -1;
  ASSERT_OK(proto_encode_edit_brush(&b, 200, 7, 0, 0, 1, &broken), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  uint32_t rid = 0;
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 20000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 200);
  client_replica_fini(&er);
  client_close(&ed);
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_VIEWER, NULL);
  ASSERT(er.version >= 2);
  /* The same path at once over JSON-RPC. */
  char *json = malloc(65536);
  size_t len = (size_t)snprintf(json, 65536,
                                "{\"session\":\"other\",\"brush\":\"layer\",\"front_faces_only\":true,\"view\":[0,0,-1],"
                                "\"autosmooth\":%.17g,\"samples\":[",
                                autosmooth / 15.0);
  for (uint32_t i = 0; i < n; i++)
    len += (size_t)snprintf(json + len, 65536 - len, "%s{\"center\":[%.9g,%.9g,%.9g],\"radius\":%.9g,\"strength\":%.9g}", i ? "," : "",
                            pts[i].center[0], pts[i].center[1], pts[i].center[2], pts[i].radius, pts[i].strength);
  snprintf(json + len, 65536 - len, "]}");
  cJSON *res = harness_rpc_ok(&h, "brush.stroke", json);
  ASSERT(cJSON_GetObjectItem(res, "dabs")->valueint > 10);
  cJSON_Delete(res);
  free(json);
  client_conn ov;
  client_replica orr;
  harness_join(&h, &ov, &orr, "other", PROTO_ROLE_VIEWER, NULL);
  ASSERT_EQ(orr.version, 1);
  /* The oracle: the whole path through dfm_stroke_apply on the welded demo head. */
  mesh_topology t;
  mesh_adjacency a;
  ASSERT_OK(mesh_topology_init(&t, er.mesh, NULL, 0), NULL);
  ASSERT_OK(mesh_adjacency_init(&a, t.vertex_count, t.triangles, t.triangle_count), NULL);
  dfm_brush_sample ds[40];
  for (uint32_t i = 0; i < n; i++) {
    memset(&ds[i], 0, sizeof(ds[i]));
    for (int c = 0; c < 3; c++) ds[i].center[c] = pts[i].center[c];
    ds[i].radius = pts[i].radius, ds[i].strength = pts[i].strength;
  }
  double *p = malloc(sizeof(double) * 3 * t.vertex_count), *rest = malloc(sizeof(double) * 3 * t.vertex_count);
  for (uint32_t i = 0; i < 3 * t.vertex_count; i++) rest[i] = p[i] = (float)t.positions[i];
  /* deformd's auto-smoothing smooths what was sculpted: the shape before it is the rest. */
  dfm_brush brush = {.kind = DFM_BRUSH_LAYER, .front_only = 1, .view = {0, 0, -1}, .autosmooth = autosmooth / 15.0,
                     .rest = rest};
  char err[256];
  ASSERT_OK(dfm_stroke_apply(&brush, &a, t.triangles, t.triangle_count, ds, n, p, NULL, NULL, NULL, err, sizeof(err)), err);
  uint32_t moved = 0;
  for (uint32_t k = 0; k < er.mesh->vertex_count; k++) {
    uint32_t v = t.render_to_topo[k];
    for (int c = 0; c < 3; c++) {
      float want = proto_dequantize(proto_quantize((float)(p[3 * v + c] - (float)t.positions[3 * v + c]), er.quantum), er.quantum);
      ASSERT_NEAR(er.offsets[3 * k + c], want, 1.5 * er.quantum);
      ASSERT_NEAR(orr.offsets[3 * k + c], want, 1.5 * er.quantum);
      moved += want != 0.0f;
    }
  }
  ASSERT(moved > 300);
  free(p);
  free(rest);
  mesh_adjacency_fini(&a);
  mesh_topology_fini(&t);
  proto_buf_fini(&b);
  client_replica_fini(&orr);
  client_close(&ov);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

/* Sends `count` points of a draw stroke on `c` (CONTINUE when `more`), then on `sync` a stroke
 * the server refuses: strokes run in the order they arrive, so its ERROR says the first one was
 * applied. (Sent on `c` it would end c's stroke: any stroke but a continuing piece does.) */
static void stroke_piece_and_wait(client_conn *c, client_conn *sync, const proto_brush_sample *pts, uint32_t count,
                                  int more, uint32_t request) {
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_edit_brush(&b, request, 5 /* draw */, 0, more ? PROTO_BRUSH_CONTINUE : 0, count, pts), NULL);
  ASSERT_OK(client_send_buf(c, &b), NULL);
  b.len = 0;
  proto_brush_sample broken = pts[0];
  broken.radius = -1;
  ASSERT_OK(proto_encode_edit_brush(&b, request + 1, 5, 0, 0, 1, &broken), NULL);
  ASSERT_OK(client_send_buf(sync, &b), NULL);
  uint32_t rid = 0;
  ASSERT_EQ(harness_expect_error(sync, PROTO_ERROR, &rid, 20000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, request + 1);
  proto_buf_fini(&b);
}

static int sculpted_vertices(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  int n = cJSON_GetObjectItem(r, "sculpted_vertices")->valueint;
  cJSON_Delete(r);
  return n;
}

/* A stroke sent in pieces is one step of its author's history: history.list shows it once, each
 * piece an operation, and one history.undo takes the whole stroke back, to the offsets before it
 * (none: the oracle is the untouched session). Pieces are the connection's, not the author's: a
 * "continue" piece from a second connection of the same author starts a stroke, and a step, of
 * its own, which the author's first undo takes back alone. */
TEST(a_stroke_in_pieces_is_one_undo_step_of_its_author_and_another_connection_does_not_continue_it) {
  harness h;
  harness_start(&h, "demo", demo_args);
  proto_hello_opts ana = {.author = {"ana", 3}};
  client_conn ed, ed2, sync;
  client_replica er, er2, sr;
  harness_join2(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL, &ana);
  harness_join2(&h, &ed2, &er2, "demo", PROTO_ROLE_EDITOR, NULL, &ana);
  harness_join(&h, &sync, &sr, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_brush_sample pts[30];
  cheek_path(pts, 30);
  stroke_piece_and_wait(&ed, &sync, pts, 10, 0, 100);
  stroke_piece_and_wait(&ed, &sync, pts + 10, 10, 1, 110);
  stroke_piece_and_wait(&ed, &sync, pts + 20, 10, 1, 120);
  int after_first = sculpted_vertices(&h);
  ASSERT(after_first > 100);
  /* The second connection "continues": there is nothing of its own to continue. */
  proto_brush_sample far[2] = {pts[0], pts[0]};
  for (int k = 0; k < 2; k++) far[k].center[0] = -0.03f - 0.01f * (float)k; /* the other cheek */
  stroke_piece_and_wait(&ed2, &sync, far, 2, 1, 200);
  ASSERT(sculpted_vertices(&h) > after_first);
  cJSON *list = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\"}");
  cJSON *steps = cJSON_GetObjectItem(list, "steps");
  ASSERT_EQ(cJSON_GetArraySize(steps), 2);
  const int ops[2] = {1, 3}; /* newest first: the second connection's stroke, then the three pieces */
  for (int i = 0; i < 2; i++) {
    cJSON *st = cJSON_GetArrayItem(steps, i);
    ASSERT(strcmp(cJSON_GetObjectItem(st, "author")->valuestring, "ana") == 0);
    ASSERT(strcmp(cJSON_GetObjectItem(st, "kind")->valuestring, "brush") == 0);
    ASSERT_EQ(cJSON_GetObjectItem(st, "operations")->valueint, ops[i]);
  }
  cJSON_Delete(list);
  cJSON_Delete(harness_rpc_ok(&h, "hello", "{\"author\":\"ana\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "history.undo", "{\"session\":\"demo\"}"));
  ASSERT_EQ(sculpted_vertices(&h), after_first);
  cJSON_Delete(harness_rpc_ok(&h, "history.undo", "{\"session\":\"demo\"}"));
  ASSERT_EQ(sculpted_vertices(&h), 0);
  client_replica_fini(&sr);
  client_close(&sync);
  client_replica_fini(&er2);
  client_close(&ed2);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

TEST(brush_stroke_refuses_out_of_range_strength_spacing_autosmooth_and_a_blind_front_faces_only) {
  harness h;
  harness_start(&h, "demo", demo_args);
  const struct {
    const char *extra, *why;
  } bad[] = {
      {"\"strength\":1.5", "strength"},
      {"\"spacing\":0", "spacing"},
      {"\"spacing\":2", "spacing"},
      {"\"autosmooth\":-0.1", "autosmooth"},
      {"\"height\":-1", "height"},
      {"\"front_faces_only\":true", "view"},
      {"\"front_faces_only\":true,\"view\":[0,0,0]", "view"},
      {"\"continue\":1", "continue"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char params[256], msg[256];
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"brush\":\"draw\",\"radius\":0.02,%s,\"samples\":[{\"center\":[0,0,0.1]}]}",
             bad[i].extra);
    ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", params, msg, sizeof(msg)), -32602);
    ASSERT_STR_CONTAINS(msg, bad[i].why);
  }
  /* Every new brush is accepted and answers with its dabs. */
  const char *kinds[3] = {"draw", "crease", "layer"};
  for (int k = 0; k < 3; k++) {
    char params[256];
    snprintf(params, sizeof(params),
             "{\"session\":\"demo\",\"brush\":\"%s\",\"radius\":0.02,\"samples\":[{\"center\":[0.03,-0.03,0.082]},{\"center\":[0.05,-0.01,0.078]}]}",
             kinds[k]);
    cJSON *r = harness_rpc_ok(&h, "brush.stroke", params);
    ASSERT(cJSON_GetObjectItem(r, "moved_vertices")->valueint > 100);
    ASSERT(cJSON_GetObjectItem(r, "dabs")->valueint >= 14);
    cJSON_Delete(r);
  }
  harness_stop(&h);
}
