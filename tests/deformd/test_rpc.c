/*
 * test_rpc.c — JSON-RPC against a real deformd: methods, named errors, and malformed input that
 * fails only its own request.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

TEST(rpc_methods_answer_with_results) {
  harness h;
  harness_start(&h, "demo", demo_args);
  cJSON *r = harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.8}}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "version")->valueint, 1);
  cJSON_Delete(r);
  r = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  const cJSON *w = cJSON_GetObjectItem(r, "weights");
  ASSERT((float)cJSON_GetObjectItem(w, "smile_L")->valuedouble == 0.8f);
  ASSERT(cJSON_GetObjectItem(w, "smile_R")->valuedouble == 0.0);
  ASSERT_EQ(cJSON_GetArraySize(w), 68);
  cJSON_Delete(r);

  r = harness_rpc_ok(&h, "targets.list", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(r), 68);
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(r, 0), "name")->valuestring, "jaw_open") == 0);
  cJSON_Delete(r);

  /* mesh.info reports what the mesh core computes for the same mesh. */
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology t;
  mesh_stats want;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_compute_stats(m, &t, &want), NULL);
  r = harness_rpc_ok(&h, "mesh.info", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "vertices")->valueint, want.vertices);
  ASSERT_EQ(cJSON_GetObjectItem(r, "topology_vertices")->valueint, want.topology_vertices);
  ASSERT_EQ(cJSON_GetObjectItem(r, "boundary_edges")->valueint, 0);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "targets")), 68);
  cJSON_Delete(r);
  mesh_topology_fini(&t);
  mesh_destroy(m);

  /* A session from a real file, then closed. */
  char params[1024];
  snprintf(params, sizeof(params), "{\"session\":\"wuson\",\"mesh\":\"%s\"}", harness_mesh_name(test_assimp_model("OFF/Wuson.off")));
  r = harness_rpc_ok(&h, "session.create", params);
  ASSERT_EQ(cJSON_GetObjectItem(r, "triangles")->valueint, 3732);
  cJSON_Delete(r);
  r = harness_rpc_ok(&h, "session.list", NULL);
  ASSERT_EQ(cJSON_GetArraySize(r), 2);
  cJSON_Delete(r);
  r = harness_rpc_ok(&h, "state.get", "{\"session\":\"wuson\"}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "version")->valueint, 0);
  ASSERT_EQ(cJSON_GetObjectItem(r, "targets")->valueint, 0);
  cJSON_Delete(r);
  cJSON_Delete(harness_rpc_ok(&h, "session.close", "{\"session\":\"wuson\"}"));
  ASSERT_EQ(harness_rpc_err(&h, "mesh.info", "{\"session\":\"wuson\"}", NULL, 0), -32001);

  /* Sculpt offsets read back quantised to the session's quantum. */
  r = harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"12\":[0.001,0,-0.002]}}");
  cJSON_Delete(r);
  r = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  double quantum = cJSON_GetObjectItem(r, "offset_quantum")->valuedouble;
  ASSERT_EQ(cJSON_GetObjectItem(r, "sculpted_vertices")->valueint, 1);
  cJSON_Delete(r);
  r = harness_rpc_ok(&h, "sculpt.get", "{\"session\":\"demo\"}");
  const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "offsets"), "12");
  ASSERT_NEAR(cJSON_GetArrayItem(o, 0)->valuedouble, 0.001, quantum);
  ASSERT_NEAR(cJSON_GetArrayItem(o, 2)->valuedouble, -0.002, quantum);
  cJSON_Delete(r);

  r = harness_rpc_ok(&h, "server.stats", NULL);
  ASSERT(cJSON_GetObjectItem(r, "frames_sent") && cJSON_GetObjectItem(r, "clients_dropped") &&
         cJSON_GetObjectItem(r, "frames_coalesced") && cJSON_GetObjectItem(r, "bytes_sent"));
  ASSERT_EQ(cJSON_GetObjectItem(r, "sessions")->valueint, 1);
  cJSON_Delete(r);
  harness_stop(&h);
}

/* Sends raw bytes on a fresh JSON-RPC connection and returns the first response line's error
 * code (0 if it was a result). */
static int raw_request(harness *h, client_conn *c, const char *bytes, size_t n) {
  ASSERT_OK(client_send(c, bytes, n), NULL);
  (void)h;
  /* Read one line. */
  char line[4096];
  size_t len = 0;
  uint64_t deadline = client_now_ns() + 10000000000ull;
  while (len == 0 || line[len - 1] != '\n') {
    ASSERT(client_now_ns() < deadline);
    ssize_t r = recv(c->fd, line + len, 1, 0);
    ASSERT(r == 1);
    len++;
    ASSERT(len < sizeof(line));
  }
  line[len] = '\0';
  cJSON *o = cJSON_Parse(line);
  ASSERT(o != NULL);
  const cJSON *e = cJSON_GetObjectItem(o, "error");
  int code = e ? cJSON_GetObjectItem(e, "code")->valueint : 0;
  if (e) fprintf(stderr, "error %d: %s\n", code, cJSON_GetObjectItem(e, "message")->valuestring);
  cJSON_Delete(o);
  return code;
}

/* mesh.topology against the demo head's own positions: every render vertex names a welded
 * vertex whose first render vertex (its representative) lies within the weld tolerance of it;
 * welded vertices are numbered in the order their first render vertex comes; render vertices
 * at exactly one position (seam copies, found here by sorting, not by the weld's grid) share
 * one; ranges put together are the whole map; bad ranges are refused with a reason. */
static const float *sort_positions;
static int by_position(const void *a, const void *b) {
  const float *p = sort_positions + 3 * (size_t)*(const uint32_t *)a, *q = sort_positions + 3 * (size_t)*(const uint32_t *)b;
  return memcmp(p, q, 12);
}

TEST(mesh_topology_names_the_welded_vertex_of_each_render_vertex) {
  harness h;
  harness_start(&h, "demo", demo_args);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  uint32_t n = m->vertex_count;
  uint32_t *welded = malloc(sizeof(uint32_t) * n), *rep = malloc(sizeof(uint32_t) * n);
  uint32_t got = 0;
  while (got < n) { /* three calls: 20000 at a time */
    char params[128];
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"first\":%u,\"count\":20000}", got);
    cJSON *r = harness_rpc_ok(&h, "mesh.topology", params);
    const cJSON *a = cJSON_GetObjectItem(r, "welded");
    ASSERT_EQ(cJSON_GetObjectItem(r, "first")->valueint, (int)got);
    ASSERT_EQ(cJSON_GetObjectItem(r, "vertices")->valueint, (int)n);
    ASSERT_EQ(cJSON_GetObjectItem(r, "topology_vertices")->valueint, 40962);
    ASSERT_EQ(cJSON_GetArraySize(a), cJSON_GetObjectItem(r, "count")->valueint);
    ASSERT(cJSON_GetArraySize(a) == (int)(n - got < 20000 ? n - got : 20000));
    uint32_t k = got;
    for (const cJSON *e = a->child; e; e = e->next) welded[k++] = (uint32_t)e->valueint;
    got = k;
    cJSON_Delete(r);
  }
  cJSON *all = harness_rpc_ok(&h, "mesh.topology", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(all, "welded")), (int)n);
  uint32_t r0 = 0;
  for (const cJSON *e = cJSON_GetObjectItem(all, "welded")->child; e; e = e->next) ASSERT_EQ(e->valueint, (int)welded[r0++]);
  cJSON_Delete(all);

  double diag = 0;
  for (int k = 0; k < 3; k++) diag += ((double)m->bbox_max[k] - m->bbox_min[k]) * ((double)m->bbox_max[k] - m->bbox_min[k]);
  double tol = 1e-6 * sqrt(diag);
  uint32_t next = 0;
  for (uint32_t r = 0; r < n; r++) {
    ASSERT(welded[r] <= next);
    if (welded[r] == next) rep[next++] = r;
    const float *p = m->positions + 3 * (size_t)r, *q = m->positions + 3 * (size_t)rep[welded[r]];
    double d2 = 0;
    for (int k = 0; k < 3; k++) d2 += ((double)p[k] - q[k]) * ((double)p[k] - q[k]);
    ASSERT(sqrt(d2) <= tol);
  }
  ASSERT_EQ(next, 40962u);
  uint32_t *order = malloc(sizeof(uint32_t) * n);
  for (uint32_t r = 0; r < n; r++) order[r] = r;
  sort_positions = m->positions;
  qsort(order, n, sizeof(uint32_t), by_position);
  uint32_t seams = 0;
  for (uint32_t i = 1; i < n; i++)
    if (memcmp(m->positions + 3 * (size_t)order[i], m->positions + 3 * (size_t)order[i - 1], 12) == 0) {
      ASSERT_EQ(welded[order[i]], welded[order[i - 1]]);
      seams++;
    }
  ASSERT_EQ(seams, n - 40962u); /* the demo head's seam copies are exact copies */

  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "mesh.topology", "{\"session\":\"demo\",\"first\":41078}", msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "past the last render vertex (the mesh has 41077)");
  ASSERT_EQ(harness_rpc_err(&h, "mesh.topology", "{\"session\":\"demo\",\"count\":1048577}", msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "at most 1048576 a call");
  ASSERT_EQ(harness_rpc_err(&h, "mesh.topology", "{\"session\":\"demo\",\"first\":-1}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "mesh.topology", "{\"session\":\"demo\",\"count\":1.5}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "mesh.topology", "{\"session\":\"nope\"}", msg, sizeof(msg)), -32001);
  cJSON *empty = harness_rpc_ok(&h, "mesh.topology", "{\"session\":\"demo\",\"first\":41077}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(empty, "welded")), 0);
  cJSON_Delete(empty);
  free(order);
  free(welded);
  free(rep);
  mesh_destroy(m);
  harness_stop(&h);
}

TEST(rpc_errors_have_codes_and_reasons) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char msg[512];
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", "{\"session\":\"nope\",\"weights\":{}}", msg, sizeof(msg)), -32001);
  ASSERT_STR_CONTAINS(msg, "unknown session 'nope'");
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"grin\":1}}", msg, sizeof(msg)), -32002);
  ASSERT_STR_CONTAINS(msg, "unknown target 'grin'");
  /* 1e999 overflows to infinity: sent as raw text, since cJSON on this side would print null. */
  client_conn raw;
  char err[256];
  ASSERT_OK(client_connect(&raw, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  const char inf[] = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"weights.set\",\"params\":{\"session\":\"demo\",\"weights\":{\"smile_L\":1e999}}}\n";
  ASSERT_EQ(raw_request(&h, &raw, inf, sizeof(inf) - 1), -32003);
  const char inf_offset[] = "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"sculpt.set\",\"params\":{\"session\":\"demo\",\"offsets\":{\"3\":[0,-1e999,0]}}}\n";
  ASSERT_EQ(raw_request(&h, &raw, inf_offset, sizeof(inf_offset) - 1), -32003);
  client_close(&raw);
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":1.5}}", msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "outside its range");
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":\"high\"}}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", "{\"session\":\"demo\",\"weights\":[1,2]}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "weights.set", "{\"session\":7}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "weights.get", NULL, msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"99999999\":[0,0,0]}}", msg, sizeof(msg)), -32006);
  ASSERT_EQ(harness_rpc_err(&h, "frobnicate", NULL, msg, sizeof(msg)), -32601);
  ASSERT_STR_CONTAINS(msg, "frobnicate");
  ASSERT_EQ(harness_rpc_err(&h, "session.create", "{\"session\":\"demo\",\"mesh\":\"demo\"}", msg, sizeof(msg)), -32005);
  char params[1024];
  snprintf(params, sizeof(params), "{\"session\":\"bad\",\"mesh\":\"%s\"}",
           harness_mesh_name(test_assimp_model("glTF2/BoxWithInfinites-glTF-Binary/BoxWithInfinites.glb")));
  ASSERT_EQ(harness_rpc_err(&h, "session.create", params, msg, sizeof(msg)), -32004);
  ASSERT_STR_CONTAINS(msg, "non-finite");
  ASSERT_EQ(harness_rpc_err(&h, "session.create", "{\"session\":\"x\",\"mesh\":\"/no/such.obj\"}", msg, sizeof(msg)), -32004);
  ASSERT_STR_CONTAINS(msg, "no mesh called '/no/such.obj' in the mesh folders");
  /* Nothing above changed the state. */
  cJSON *r = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "version")->valueint, 0);
  cJSON_Delete(r);
  harness_stop(&h);
}

TEST(malformed_json_rpc_fails_only_that_request) {
  harness h;
  const char *const args[] = {"--demo", "--max-request", "1048576", NULL};
  harness_start(&h, "demo", args);
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  const char ok[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"}\n";
  const char bad_json[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\n";
  ASSERT_EQ(raw_request(&h, &c, bad_json, sizeof(bad_json) - 1), -32700);
  ASSERT_EQ(raw_request(&h, &c, ok, sizeof(ok) - 1), 0); /* the connection goes on */
  const char no_method[] = "{\"jsonrpc\":\"2.0\",\"id\":2}\n";
  ASSERT_EQ(raw_request(&h, &c, no_method, sizeof(no_method) - 1), -32600);
  const char not_2[] = "{\"jsonrpc\":\"1.0\",\"id\":2,\"method\":\"session.list\"}\n";
  ASSERT_EQ(raw_request(&h, &c, not_2, sizeof(not_2) - 1), -32600);
  const char batch[] = "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session.list\"}]\n";
  ASSERT_EQ(raw_request(&h, &c, batch, sizeof(batch) - 1), -32600);
  const char bad_params[] = "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"mesh.info\",\"params\":\"demo\"}\n";
  ASSERT_EQ(raw_request(&h, &c, bad_params, sizeof(bad_params) - 1), -32600);
  /* Nested 200 deep: refused before parsing. */
  char deep[512];
  size_t n = (size_t)snprintf(deep, sizeof(deep), "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session.list\",\"params\":");
  for (int i = 0; i < 200; i++) deep[n++] = '[';
  for (int i = 0; i < 200; i++) deep[n++] = ']';
  deep[n++] = '}';
  deep[n++] = '\n';
  ASSERT_EQ(raw_request(&h, &c, deep, n), -32600);
  /* 10 MB of garbage with no newline: refused once it passes the 1 MiB limit, discarded up to
   * its newline, and the next request is answered. */
  size_t big = 10u << 20;
  char *garbage = malloc(big + 1);
  for (size_t i = 0; i < big; i++) garbage[i] = (char)('a' + i % 26);
  garbage[big] = '\n';
  ASSERT_EQ(raw_request(&h, &c, garbage, big + 1), -32600);
  free(garbage);
  ASSERT_EQ(raw_request(&h, &c, ok, sizeof(ok) - 1), 0);
  client_close(&c);
  cJSON *r = harness_rpc_ok(&h, "server.stats", NULL);
  ASSERT(cJSON_GetObjectItem(r, "rpc_errors")->valueint >= 7);
  cJSON_Delete(r);
  harness_stop(&h);
}

TEST(config_file_sets_ports_limits_and_sessions) {
  char cfg[2048];
  snprintf(cfg, sizeof(cfg),
           "{\"log_level\":\"debug\",\"reserve_mb\":24,\"limits\":{\"max_sessions\":2,\"soft_limit\":65536},"
           "\"sessions\":[{\"session\":\"head\",\"mesh\":\"demo\"},{\"session\":\"wuson\",\"mesh\":\"%s\"}]}",
           test_assimp_model("OFF/Wuson.off"));
  const char *path = test_write_file("deformd.json", cfg, strlen(cfg));
  const char *const args[] = {"--config", path, NULL};
  harness h;
  harness_start(&h, "wuson", args);
  /* reserve_mb 24: once the first session is open, the pool writes 24 MiB of heap for its
   * gestures, and says so in the debug log. */
  int reserved = 0;
  for (int i = 0; i < 200 && !reserved; i++) {
    FILE *lf = fopen(h.log_path, "r");
    char line[512];
    while (lf && fgets(line, sizeof(line), lf))
      if (strstr(line, "heap kept for gestures 24 MiB")) reserved = 1;
    if (lf) fclose(lf);
    if (!reserved) usleep(50000);
  }
  ASSERT(reserved);
  for (int i = 0; i < 100; i++) { /* both sessions load in parallel on the pool */
    cJSON *r = harness_rpc_ok(&h, "session.list", NULL);
    int n = cJSON_GetArraySize(r);
    cJSON_Delete(r);
    if (n == 2) break;
    usleep(50000);
  }
  char msg[256];
  /* max_sessions 2: a third is refused with a reason. */
  ASSERT_EQ(harness_rpc_err(&h, "session.create", "{\"session\":\"third\",\"mesh\":\"demo\"}", msg, sizeof(msg)), -32007);
  harness_stop(&h);
  const char bad[] = "{\"stream_port\":\"seven\"}";
  const char *bad_path = test_write_file("bad.json", bad, sizeof(bad) - 1);
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s' --data none --config '%s' 2>&1", getenv("DEFORMD_BIN"), bad_path);
  FILE *p = popen(cmd, "r");
  char out[512] = "";
  size_t got = fread(out, 1, sizeof(out) - 1, p);
  out[got] = '\0';
  int status = pclose(p);
  ASSERT(status != 0);
  ASSERT_STR_CONTAINS(out, "stream_port");
}

TEST(the_ports_line_comes_once_the_command_line_sessions_are_open_or_failed) {
  char cfg[2048];
  snprintf(cfg, sizeof(cfg),
           "{\"sessions\":[{\"session\":\"head\",\"mesh\":\"demo\"},{\"session\":\"wuson\",\"mesh\":\"%s\"},"
           "{\"session\":\"gone\",\"mesh\":\"/nonexistent/none.obj\"}]}",
           test_assimp_model("OFF/Wuson.off"));
  const char *path = test_write_file("sessions.json", cfg, strlen(cfg));
  const char *const args[] = {"--config", path, NULL};
  harness h;
  harness_start(&h, NULL, args); /* returns as soon as the ports line is read: no polling */
  cJSON *r = harness_rpc_ok(&h, "session.list", NULL);
  ASSERT_EQ(cJSON_GetArraySize(r), 2); /* the two that open; the third failed (and said why in the log) */
  cJSON_Delete(r);
  cJSON_Delete(harness_rpc_ok(&h, "weights.get", "{\"session\":\"head\"}"));
  harness_stop(&h);
}
