/*
 * make_seeds.c — writes the seed corpora of the fuzz targets (tests/fuzz/corpus/NAME/) from
 * the project's own encoders and writers, so that every seed is a valid input the fuzzer
 * mutates from, and the seeds can be made again after a format changes:
 *
 *     build/tests/fuzz-make-seeds tests/fuzz/corpus
 *
 * frames: one payload of every message kind (byte 0 even) and a viewer's stream (byte 0 odd:
 *         SNAPSHOT, WEIGHTS in each mode, DELTA, TARGET, TARGET_META, ERROR, BYE, PING);
 * rpc:    a request line for every JSON-RPC method on the fuzz session "f";
 * config: a config file with every key;
 * import: a small mesh in every format the server reads (byte 0 picks the extension, as in
 *         fuzz_import.c): OFF, OBJ and GLB written by mesh_export, ASCII STL and PLY, an MD3, an
 *         MD2 with two named frames, a glTF with a morph target and a weight animation inline.
 *
 * DOES NOT run anything; the seeds are committed, this only makes them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb/stb_image_write.h>

#include "mesh.h"
#include "proto.h"
#include "proto2.h"
#include "proto_bulk.h"

static const char *root;

static void write_seed(const char *target, const char *name, uint8_t prefix, int with_prefix, const void *data,
                       size_t len) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", root, target);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
  if (with_prefix) fputc(prefix, f);
  fwrite(data, 1, len, f);
  fclose(f);
}

/* Payload of the one frame in b (header skipped), as an even-prefixed frames seed. */
static void payload_seed(const char *name, proto_buf *b) {
  write_seed("frames", name, 0, 1, b->data + PROTO_HEADER_SIZE, b->len - PROTO_HEADER_SIZE);
  b->len = 0;
}

/* Version 2 SNAPSHOTs of a bumpy 24 × 24 grid with UVs and a target, in today's coding and in
 * the entropy one (§12.11: rANS triangles, mode 2 streams), as payloads and as a viewer's stream. */
static void snapshot2_seeds(void) {
  enum { N = 24, V = N * N, T = 2 * (N - 1) * (N - 1) };
  static float pos[3 * V], uv[2 * V], delta[3 * 40];
  static uint32_t tri[3 * T], canon[3 * T], tidx[40];
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) {
      int v = y * N + x;
      pos[3 * v] = 0.01f * (float)x, pos[3 * v + 1] = 0.01f * (float)y;
      pos[3 * v + 2] = 0.002f * (float)(((x * 7 + y * 13) % 11) - 5);
      uv[2 * v] = (float)x / N, uv[2 * v + 1] = (float)y / N;
    }
  int k = 0;
  for (int y = 0; y + 1 < N; y++)
    for (int x = 0; x + 1 < N; x++) {
      uint32_t a = (uint32_t)(y * N + x), b = a + 1, c = a + N, d = c + 1;
      tri[k++] = a, tri[k++] = b, tri[k++] = d, tri[k++] = a, tri[k++] = d, tri[k++] = c;
    }
  for (int i = 0; i < 40; i++) tidx[i] = (uint32_t)(i * 13), delta[3 * i] = 0.001f * (float)i, delta[3 * i + 1] = 0, delta[3 * i + 2] = -0.0005f;
  proto_target_desc tg = {"bump", 0, 0, 1, 0, 0, NULL, 40, tidx, delta};
  proto_mesh_desc md = {V, T, 1, pos, tri, uv, 1e-5f};
  for (int e = 0; e < 2; e++) {
    proto_buf tris, mp, st, f;
    proto_buf_init(&tris), proto_buf_init(&mp), proto_buf_init(&st), proto_buf_init(&f);
    proto_snapshot2_triangles(&tris, tri, T, V, canon);
    md.triangles = canon;
    proto_trav t;
    proto_grid2 g;
    proto_trav_init(&t, canon, T, V);
    proto_grid2_init(&g, &md, 5);
    g.entropy = (uint8_t)e;
    proto_snapshot2_head(&mp, &md, &g);
    if (e) proto_snapshot2_triangles_entropy(&mp, canon, T, &t);
    else memcpy(proto_buf_append(&mp, tris.len), tris.data, tris.len);
    proto_snapshot2_attributes(&mp, &md, &g, &t);
    proto_snapshot2_target(&mp, &tg, &g, &t);
    float w = 0.5f;
    uint32_t oi[2] = {3, 300};
    int32_t oq[6] = {100, -200, 300, 0, 64, -64};
    proto_snapshot2_state(&st, 1, &w, 2, oi, oq, 5, &t);
    proto_encode_snapshot2_head(&f, 2, mp.len, st.len);
    memcpy(proto_buf_append(&f, mp.len), mp.data, mp.len);
    memcpy(proto_buf_append(&f, st.len), st.data, st.len);
    write_seed("frames", e ? "snapshot2_entropy" : "snapshot2", 0, 1, f.data + PROTO_HEADER_SIZE, f.len - PROTO_HEADER_SIZE);
    proto_encode_delta2(&f, 3, 0, 5, 2, oi, oq, &t);
    write_seed("frames", e ? "stream2_entropy" : "stream2", 1, 1, f.data, f.len);
    proto_trav_fini(&t);
    proto_buf_fini(&tris), proto_buf_fini(&mp), proto_buf_fini(&st), proto_buf_fini(&f);
  }
}

static void frames(void) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hello = {PROTO_VERSION, PROTO_ROLE_EDITOR, {"f", 1}, {"token", 5}};
  proto_encode_hello(&b, &hello);
  payload_seed("hello", &b);
  proto_welcome welcome = {7, PROTO_ROLE_VIEWER, {"f", 1}};
  proto_encode_welcome(&b, 3, &welcome);
  payload_seed("welcome", &b);
  proto_encode_error(&b, PROTO_ERR_INVALID, 9, "weight out of range");
  payload_seed("error", &b);
  proto_ping ping = {1, 2, 3};
  proto_encode_ping(&b, PROTO_PING, &ping);
  payload_seed("ping", &b);
  uint32_t idx[3] = {0, 2, 5};
  float w[3] = {0.5f, -1.0f, 0.25f};
  proto_encode_weights(&b, 4, 0, 3, idx, w);
  payload_seed("weights_sparse", &b);
  proto_encode_weights(&b, 4, 0, 3, NULL, w);
  payload_seed("weights_dense", &b);
  int16_t q16[3] = {100, -200, 300};
  proto_encode_weights_qrun(&b, 4, 0, 1, 3, q16, 0.001f);
  payload_seed("weights_qrun", &b);
  int8_t q8[3] = {10, -20, 30};
  proto_encode_weights_qrun8(&b, 4, 0, 1, 3, q8, 0.01f);
  payload_seed("weights_qrun8", &b);
  int32_t q[9] = {1, 2, 3, -4, 5, -6, 1000, 0, -1};
  proto_encode_delta(&b, 5, 0, 3, idx, q);
  payload_seed("delta", &b);
  proto_encode_edit_weights(&b, 11, 3, idx, w);
  payload_seed("edit_weights", &b);
  proto_encode_edit_offsets(&b, 12, 3, idx, q);
  payload_seed("edit_offsets", &b);
  proto_gesture_begin gb = {0};
  gb.gesture = 3, gb.mode = 1, gb.iterations = 2, gb.pick = PROTO_NO_PICK, gb.roi_radius = 0.5f;
  gb.handle.count = 2;
  uint32_t handle[2] = {1, 4}, anchors[1] = {9};
  gb.anchors.count = 1;
  proto_encode_edit_gesture_begin(&b, 13, &gb, handle, NULL, anchors);
  payload_seed("edit_gesture_begin", &b);
  proto_gesture_drag gd = {3, {0.1f, 0, 0}, {0, 0, 0, 1}, 1, {0, 0, 0}};
  proto_encode_edit_gesture_drag(&b, 14, &gd);
  payload_seed("edit_gesture_drag", &b);
  proto_encode_edit_gesture_end(&b, 15, 3);
  payload_seed("edit_gesture_end", &b);
  proto_brush_sample smp[2] = {{{0, 1, 0}, {0, 0.1f, 0}, 0.5f, 0.2f}, {{0.1f, 1, 0}, {0, 0.1f, 0}, 0.5f, 0.2f}};
  proto_encode_edit_brush(&b, 16, 1, 2, 1, 2, smp);
  payload_seed("edit_brush", &b);
  proto_encode_edit_reset(&b, 17, 2, handle);
  payload_seed("edit_reset", &b);
  proto_blend_pin pins[2] = {{1, {0, 1.1f, 0}}, {4, {0.2f, 0, 1}}};
  proto_encode_edit_blend_pins(&b, 18, PROTO_BLEND_KEEP_CLOSE, 0.01f, 2, pins);
  payload_seed("edit_blend_pins", &b);
  uint32_t drivers[2] = {0, 1};
  proto_encode_target_meta(&b, 6, 0, 2, -1.0f, 2.0f, PROTO_TARGET_MUTED, 2, drivers);
  payload_seed("target_meta", &b);
  static const float bulk[6] = {0.001f, 0, -0.002f, 0.5f, 1, -1};
  proto_encode_bulk_set(&b, 19, PROTO_BULK_WELDED, 2, 2, bulk);
  payload_seed("bulk_set", &b);
  proto_bulk_answer ba = {20, PROTO_BULK_GET, PROTO_BULK_POSITIONS, 0, 0, 1, 2, 4, NULL};
  proto_encode_bulk_answer(&b, 3, &ba, bulk);
  payload_seed("bulk_answer", &b);

  /* A viewer's stream: a snapshot of a tetrahedron with two targets, then live frames. */
  static const float pos[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  static const uint32_t tri[12] = {0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3};
  static const uint32_t ti[2] = {1, 3};
  static const float td[6] = {0.1f, 0, 0, 0, 0, 0.2f};
  proto_target_desc targets[2] = {{"lift", 0, 0, 1, 0, 0, NULL, 2, ti, td},
                                  {"combo", 0, 0, 1, 0, 1, drivers, 2, ti, td}};
  proto_mesh_desc md = {4, 4, 2, pos, tri, NULL, 0.001f};
  proto_buf mesh_part, state;
  proto_buf_init(&mesh_part);
  proto_buf_init(&state);
  proto_snapshot_mesh_part(&mesh_part, &md, targets);
  float sw[2] = {0.5f, 0};
  int32_t sq[3] = {5, -5, 7};
  uint32_t si[1] = {2};
  proto_snapshot_state_part(&state, 2, sw, 1, si, sq);
  proto_buf s;
  proto_buf_init(&s);
  proto_encode_snapshot_head(&s, 1, mesh_part.len, state.len);
  memcpy(proto_buf_append(&s, mesh_part.len), mesh_part.data, mesh_part.len);
  memcpy(proto_buf_append(&s, state.len), state.data, state.len);
  write_seed("frames", "snapshot", 0, 1, s.data + PROTO_HEADER_SIZE, s.len - PROTO_HEADER_SIZE);
  proto_encode_weights(&s, 2, 0, 2, NULL, w);
  uint32_t di[2] = {0, 3};
  proto_encode_delta(&s, 3, 0, 2, di, q);
  proto_target_desc added = {"new", 0, -1, 1, 0, 0, NULL, 2, ti, td};
  proto_encode_target_add(&s, 4, 2, 1.0f, &added);
  uint32_t d0[1] = {0};
  proto_encode_target_meta(&s, 5, 0, 1, -2.0f, 2.0f, 0, 1, d0);
  proto_encode_weights_qrun(&s, 6, PROTO_FLAG_CATCHUP, 0, 3, q16, 0.001f);
  proto_encode_error(&s, PROTO_ERR_INVALID, 3, "no");
  proto_encode_ping(&s, PROTO_PONG, &ping);
  proto_encode_bye(&s, PROTO_ERR_SHUTDOWN, "bye");
  write_seed("frames", "stream", 1, 1, s.data, s.len);
  snapshot2_seeds();
  proto_buf_fini(&s);
  proto_buf_fini(&mesh_part);
  proto_buf_fini(&state);
  proto_buf_fini(&b);
}

static void rpc(void) {
  static const char *const lines[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server.stats\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"mesh.info\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"state.get\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"targets.list\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"weights.set\",\"params\":{\"session\":\"f\",\"weights\":{\"stretch\":0.5,\"side\":-1}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"weights.get\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"targets.configure\",\"params\":{\"session\":\"f\",\"target\":\"side\",\"min\":-2,\"max\":2,\"muted\":false,\"drivers\":[\"stretch\"]}}",
      "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"sculpt.set\",\"params\":{\"session\":\"f\",\"offsets\":{\"3\":[0,0.01,0],\"40\":[0.1,0,0]}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"sculpt.get\",\"params\":{\"session\":\"f\",\"vertices\":[3,40]}}",
      "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"targets.create_from_sculpt\",\"params\":{\"session\":\"f\",\"name\":\"bump\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"deform.begin\",\"params\":{\"session\":\"f\",\"gesture\":1,\"mode\":\"arap\",\"pick\":0,\"handle_radius\":0.2,\"roi_radius\":0.8}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"deform.drag\",\"params\":{\"session\":\"f\",\"gesture\":1,\"translate\":[0,0.1,0],\"rotate\":[0,0,0,1]}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"deform.end\",\"params\":{\"session\":\"f\",\"gesture\":1}}",
      "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"deform.begin\",\"params\":{\"session\":\"f\",\"mode\":\"biharmonic\",\"handle\":[0,1],\"anchors\":[100],\"roi\":[0,1,2,3,4,5,6,7,8,9,10,11,12],\"detached\":true}}",
      "{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"deform.reset\",\"params\":{\"session\":\"f\",\"vertices\":[1,2]}}",
      "{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"brush.stroke\",\"params\":{\"session\":\"f\",\"brush\":\"grab\",\"falloff\":\"gaussian\",\"mirror_x\":true,\"radius\":0.3,\"strength\":1,\"samples\":[{\"center\":[0,1,0],\"direction\":[0,0.1,0]},{\"center\":[0.1,0.9,0],\"radius\":0.2}]}}",
      "{\"jsonrpc\":\"2.0\",\"id\":18,\"method\":\"blend.solve\",\"params\":{\"session\":\"f\",\"pins\":[{\"vertex\":0,\"position\":[0,1.05,0]}],\"regularization\":0.01,\"keep_close\":true}}",
      "{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":\"blend.fit\",\"params\":{\"session\":\"f\",\"shape\":\"sculpt\",\"apply\":true}}",
      "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"anim.list\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"anim.compress\",\"params\":{\"session\":\"f\",\"clip\":\"bounce\",\"max_error\":0.01}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":35,\"method\":\"anim.play\",\"params\":{\"session\":\"f\",\"clip\":\"bounce\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"anim.play\",\"params\":{\"session\":\"f\",\"clip\":\"wave\",\"loop\":true}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":23,\"method\":\"anim.speed\",\"params\":{\"session\":\"f\",\"speed\":2}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":24,\"method\":\"anim.seek\",\"params\":{\"session\":\"f\",\"time\":0.3}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":25,\"method\":\"anim.pause\",\"params\":{\"session\":\"f\"}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":26,\"method\":\"anim.stop\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":27,\"method\":\"anim.record_start\",\"params\":{\"session\":\"f\",\"clip\":\"rec\",\"fps\":30}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":28,\"method\":\"weights.set\",\"params\":{\"session\":\"f\",\"weights\":{\"stretch\":1}}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":29,\"method\":\"anim.record_stop\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"anim.loop\",\"params\":{\"session\":\"f\",\"loop\":false}}",
      "{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"anim.blend\",\"params\":{\"session\":\"f\",\"clip\":\"wave\",\"duration\":0.5}}",
      "{\"jsonrpc\":\"2.0\",\"id\":32,\"method\":\"session.create\",\"params\":{\"session\":\"g\",\"mesh\":\"/nonexistent.obj\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":33,\"method\":\"session.export\",\"params\":{\"session\":\"f\",\"path\":\"/nonexistent/x.obj\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":34,\"method\":\"auth\",\"params\":{\"token\":\"x\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"\\u0041\",\"method\":\"session.close\",\"params\":{\"session\":\"f\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"no.such\",\"params\":[1,2.5e-3,true,null,{\"a\":[]}]}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"weights.set\",\"params\":{\"session\":\"f\",\"weights\":{\"side\":0.1}}}",
  };
  for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
    char name[32];
    snprintf(name, sizeof(name), "request%02zu", i);
    write_seed("rpc", name, 0, 0, lines[i], strlen(lines[i]));
  }
}

static void config(void) {
  static const char full[] =
      "{\"listen\":\"127.0.0.1\",\"stream_port\":7450,\"rpc_port\":7451,\"log_level\":\"debug\",\"token\":\"secret\","
      "\"reserve_mb\":-1,\"import_worker_path\":\"/usr/bin/deformd\",\"limits\":{\"max_frame\":67108864,"
      "\"max_request\":67108864,\"max_json_depth\":64,\"soft_limit\":1048576,\"hard_limit\":268435456,"
      "\"slow_timeout_ms\":10000,\"hello_timeout_ms\":10000,\"gesture_idle_ms\":600000,\"idle_timeout_ms\":600000,"
      "\"max_unauth_input\":65536,\"max_input_mb\":256,\"max_connections\":4096,\"max_vertices\":5000000,"
      "\"max_sessions\":64,\"session_memory_mb\":2048,\"client_memory_mb\":1024,\"max_brush_work\":50000000,"
      "\"max_file_mb\":1024,\"import_memory_mb\":4096,\"import_seconds\":60,\"import_workers\":4},"
      "\"sessions\":[{\"session\":\"demo\",\"mesh\":\"demo\"},{\"session\":\"w\",\"mesh\":\"/x/Wuson.off\"}]}";
  write_seed("config", "full", 0, 0, full, sizeof(full) - 1);
  static const char small[] = "{\"limits\":{\"max_sessions\":2},\"sessions\":[]}";
  write_seed("config", "small", 0, 0, small, sizeof(small) - 1);
}

/* fuzz_import.c's extension table: obj ply off stl gltf glb md2 md3. */
enum { EXT_OBJ = 0, EXT_PLY, EXT_OFF, EXT_STL, EXT_GLTF, EXT_GLB, EXT_MD2, EXT_MD3 };

static void import_file_seed(const char *name, uint8_t ext, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) exit(1);
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  write_seed("import", name, ext, 1, buf, n);
}

static void put32(uint8_t *b, size_t at, uint32_t x) {
  for (int k = 0; k < 4; k++) b[at + (size_t)k] = (uint8_t)(x >> (8 * k));
}

static void import(const char *tmp) {
  static const char off[] = "OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 2 1\n3 0 1 3\n3 0 3 2\n3 1 2 3\n";
  write_seed("import", "tetra.off", EXT_OFF, 1, off, sizeof(off) - 1);
  static const char stl[] = "solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\n"
                            "endloop\nendfacet\nendsolid t\n";
  write_seed("import", "tri.stl", EXT_STL, 1, stl, sizeof(stl) - 1);
  static const char ply[] = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                            "property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
                            "0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  write_seed("import", "tri.ply", EXT_PLY, 1, ply, sizeof(ply) - 1);
  /* OBJ and GLB (with a morph target) through the project's own writer. */
  mesh *m = NULL;
  if (mesh_demo_icosphere(1, 1.0, &m) != 0) exit(1);
  float *d = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  for (uint32_t v = 0; v < m->vertex_count; v++) d[3 * v + 1] = 0.1f;
  mesh_add_target_dense(m, "up", d, 0.5f);
  free(d);
  mesh_update_bounds(m);
  char path[4096], err[MESH_ERR_LEN];
  snprintf(path, sizeof(path), "%s/seed.obj", tmp);
  if (mesh_export(m, NULL, path, MESH_FORMAT_OBJ, err, sizeof(err)) == 0) import_file_seed("ico.obj", EXT_OBJ, path);
  snprintf(path, sizeof(path), "%s/seed.glb", tmp);
  if (mesh_export(m, NULL, path, MESH_FORMAT_GLB, err, sizeof(err)) == 0) import_file_seed("ico.glb", EXT_GLB, path);
  mesh_destroy(m);
  /* An MD3: header, two frames, one surface (a triangle). */
  static uint8_t b[1024];
  memset(b, 0, sizeof(b));
  memcpy(b, "IDP3", 4);
  put32(b, 4, 15);
  put32(b, 76, 2);  /* frames */
  put32(b, 84, 1);  /* surfaces */
  put32(b, 92, 108);
  put32(b, 96, 108 + 2 * 56);
  put32(b, 100, 108 + 2 * 56);
  memcpy(b + 108 + 40, "run1", 4);
  memcpy(b + 108 + 56 + 40, "run2", 4);
  size_t sh = 108 + 2 * 56;
  memcpy(b + sh, "IDP3", 4);
  put32(b, sh + 72, 2), put32(b, sh + 76, 1), put32(b, sh + 80, 3), put32(b, sh + 84, 1);
  put32(b, sh + 88, 176), put32(b, sh + 92, 108), put32(b, sh + 96, 188), put32(b, sh + 100, 212);
  put32(b, sh + 104, 212 + 2 * 3 * 8);
  put32(b, sh + 176, 0), put32(b, sh + 180, 1), put32(b, sh + 184, 2);
  for (int f = 0; f < 2; f++) {
    uint8_t *x = b + sh + 212 + (size_t)f * 24;
    x[0] = 0, x[8] = 64, x[16 + 2] = 64, x[16 + 3] = 0;
    x[2] = (uint8_t)(16 * f);
  }
  size_t end = sh + 212 + 2 * 3 * 8;
  put32(b, 104, (uint32_t)end);
  write_seed("import", "tri.md3", EXT_MD3, 1, b, end);
}

static size_t base64(const uint8_t *in, size_t n, char *out) {
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    out[o++] = t[v >> 18 & 63];
    out[o++] = t[v >> 12 & 63];
    out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? t[v & 63] : '=';
  }
  out[o] = '\0';
  return o;
}

/* A glTF with its buffer inline: a triangle, one morph target, a weight animation "bob". */
static void gltf_seed(void) {
  uint8_t buf[96];
  memset(buf, 0, sizeof(buf));
  const float pos[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, dpos[9] = {0, 0, 0.5f, 0, 0, 0.5f, 0, 0, 0.5f};
  const uint16_t idx[3] = {0, 1, 2};
  const float times[2] = {0, 1}, w[2] = {0, 1};
  memcpy(buf, pos, 36);
  memcpy(buf + 36, idx, 6);
  memcpy(buf + 44, dpos, 36);
  memcpy(buf + 80, times, 8);
  memcpy(buf + 88, w, 8);
  char b64[160], json[4096];
  base64(buf, sizeof(buf), b64);
  int n = snprintf(json, sizeof(json),
      "{\"asset\":{\"version\":\"2.0\"},\"scene\":0,\"scenes\":[{\"nodes\":[0]}],\"nodes\":[{\"mesh\":0}],"
      "\"meshes\":[{\"primitives\":[{\"attributes\":{\"POSITION\":0},\"indices\":1,\"targets\":[{\"POSITION\":2}]}],"
      "\"weights\":[0.5],\"extras\":{\"targetNames\":[\"up\"]}}],"
      "\"animations\":[{\"name\":\"bob\",\"channels\":[{\"sampler\":0,\"target\":{\"node\":0,\"path\":\"weights\"}}],"
      "\"samplers\":[{\"input\":3,\"output\":4,\"interpolation\":\"LINEAR\"}]}],"
      "\"buffers\":[{\"byteLength\":96,\"uri\":\"data:application/octet-stream;base64,%s\"}],"
      "\"bufferViews\":[{\"buffer\":0,\"byteOffset\":0,\"byteLength\":36},{\"buffer\":0,\"byteOffset\":36,\"byteLength\":6},"
      "{\"buffer\":0,\"byteOffset\":44,\"byteLength\":36},{\"buffer\":0,\"byteOffset\":80,\"byteLength\":8},"
      "{\"buffer\":0,\"byteOffset\":88,\"byteLength\":8}],"
      "\"accessors\":[{\"bufferView\":0,\"componentType\":5126,\"count\":3,\"type\":\"VEC3\",\"min\":[0,0,0],\"max\":[1,1,0]},"
      "{\"bufferView\":1,\"componentType\":5123,\"count\":3,\"type\":\"SCALAR\"},"
      "{\"bufferView\":2,\"componentType\":5126,\"count\":3,\"type\":\"VEC3\",\"min\":[0,0,0.5],\"max\":[0,0,0.5]},"
      "{\"bufferView\":3,\"componentType\":5126,\"count\":2,\"type\":\"SCALAR\",\"min\":[0],\"max\":[1]},"
      "{\"bufferView\":4,\"componentType\":5126,\"count\":2,\"type\":\"SCALAR\"}]}",
      b64);
  write_seed("import", "bob.gltf", EXT_GLTF, 1, json, (size_t)n);
}

/* An MD2: a triangle, two named frames. */
static void md2_seed(void) {
  static uint8_t b[200];
  memset(b, 0, sizeof(b));
  memcpy(b, "IDP2", 4);
  const uint32_t h[17] = {0, 8, 8, 8, 52, 0, 3, 3, 1, 1, 2, 68, 68, 80, 92, 196, 200};
  for (int i = 1; i < 17; i++) put32(b, 4 * (size_t)i, h[i]);
  const int16_t st[6] = {0, 0, 8, 0, 0, 8};
  memcpy(b + 68, st, 12);
  const uint16_t tri[6] = {0, 1, 2, 0, 1, 2};
  memcpy(b + 80, tri, 12);
  for (int f = 0; f < 2; f++) {
    uint8_t *fr = b + 92 + 52 * f;
    const float scale[3] = {0.1f, 0.1f, 0.1f}, tr[3] = {0, 0, 0};
    memcpy(fr, scale, 12);
    memcpy(fr + 12, tr, 12);
    snprintf((char *)fr + 24, 16, "walk%d", f + 1);
    const uint8_t v[12] = {0, 0, 0, 0, 10, 0, (uint8_t)f, 0, 0, 10, 0, 0};
    memcpy(fr + 40, v, 12);
  }
  write_seed("import", "walk.md2", EXT_MD2, 1, b, sizeof(b));
}

/* Images as textures come: small PNG, JPEG, BMP and TGA files (stb_image_write), and PCX files
 * in 8-bit paletted and 24-bit RGB form, written here (ZSoft RLE, a run of 5 and literals). */
static void image_seeds(void) {
  uint8_t px[8 * 6 * 3];
  for (int i = 0; i < 8 * 6 * 3; i++) px[i] = (uint8_t)(i * 37);
  char tmp[] = "/tmp/deformd-image-seed-XXXXXX";
  int fd = mkstemp(tmp);
  if (fd >= 0) close(fd);
  const struct { const char *name; int kind; } files[] = {{"rgb.png", 3}, {"rgb.jpg", 0}, {"rgb.bmp", 1}, {"rgb.tga", 2}};
  for (size_t k = 0; k < 4; k++) {
    int ok = files[k].kind == 0   ? stbi_write_jpg(tmp, 8, 6, 3, px, 80)
             : files[k].kind == 1 ? stbi_write_bmp(tmp, 8, 6, 3, px)
             : files[k].kind == 2 ? stbi_write_tga(tmp, 8, 6, 3, px)
                                  : stbi_write_png(tmp, 8, 6, 3, px, 8 * 3);
    FILE *f = ok ? fopen(tmp, "rb") : NULL;
    uint8_t b[4096];
    size_t n = f ? fread(b, 1, sizeof(b), f) : 0;
    if (f) fclose(f);
    if (n) write_seed("image", files[k].name, 0, 0, b, n);
  }
  unlink(tmp);
  /* PCX: 8 x 2 pixels, 8-bit with its palette, and 24-bit in three planes. */
  uint8_t pcx[128 + 3 * 2 * 12 + 769];
  for (int planes = 1; planes <= 3; planes += 2) {
    memset(pcx, 0, sizeof(pcx));
    pcx[0] = 0x0A, pcx[1] = 5, pcx[2] = 1, pcx[3] = 8, pcx[8] = 7, pcx[10] = 1, pcx[65] = (uint8_t)planes, pcx[66] = 8;
    size_t at = 128;
    for (int line = 0; line < 2 * planes; line++) {
      pcx[at++] = 0xC5, pcx[at++] = (uint8_t)(line * 40); /* a run of five */
      pcx[at++] = 0xC1, pcx[at++] = 0xC7;                 /* a literal that looks like a count */
      pcx[at++] = 0x11, pcx[at++] = 0x22;
    }
    if (planes == 1) {
      pcx[at++] = 0x0C;
      for (int i = 0; i < 768; i++) pcx[at++] = (uint8_t)(i * 3);
    }
    write_seed("image", planes == 1 ? "pal8.pcx" : "rgb24.pcx", 0, 0, pcx, at);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz-make-seeds CORPUS_DIR\n");
    return 2;
  }
  root = argv[1];
  mkdir(root, 0755);
  frames();
  rpc();
  config();
  char tmp[] = "/tmp/deformd-seeds-XXXXXX";
  if (!mkdtemp(tmp)) return 1;
  import(tmp);
  gltf_seed();
  md2_seed();
  image_seeds();
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  if (system(cmd) != 0) return 1;
  return 0;
}
