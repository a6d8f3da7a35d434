/*
 * test_budget.c — one client cannot take the server's memory or a pool thread with edits:
 * gestures count their estimated memory against per-session and per-client budgets and are
 * refused past them with the figures, end with their connection unless detached, and give their
 * memory back; a brush stroke whose work is over budget is refused before it moves anything.
 *
 * Oracles: the estimate's documented formula (2560 bytes per unknown + 48 per topology vertex,
 * docs/json-api.md) applied to mesh.info's topology_vertices, the server's resident memory from
 * /proc, and for brushes a brute-force count of the vertices within each sample's radius (the
 * budget's figure must bound it from above).
 */
#include <unistd.h>

#include "harness.h"
#include "test.h"

/* A raw JSON-RPC connection with pipelined requests: replies are read back in any order. */
static int begin_many(harness *h, client_conn *c, int first_id, int n, int *ok, char *last_refusal, size_t len) {
  char err[256];
  ASSERT_OK(client_connect(c, "127.0.0.1", h->rpc_port, err, sizeof(err)), err);
  for (int i = 0; i < n; i++) {
    char line[512];
    int k = snprintf(line, sizeof(line),
                     "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"deform.begin\",\"params\":{\"session\":\"demo\","
                     "\"gesture\":%d,\"mode\":\"biharmonic\",\"pick\":20400,\"handle_radius\":0.01}}\n",
                     first_id + i, first_id + i);
    ASSERT_OK(client_send(c, line, (size_t)k), NULL);
  }
  int refused = 0;
  *ok = 0;
  /* Each reply is one line; read them with a small line reader over the socket. */
  char buf[8192];
  size_t have = 0;
  int replies = 0;
  uint64_t deadline = client_now_ns() + 120000000000ull;
  while (replies < n) {
    if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "only %d of %d replies", replies, n);
    char *nl = memchr(buf, '\n', have);
    if (!nl) {
      ssize_t r = read(c->fd, buf + have, sizeof(buf) - have);
      if (r <= 0) test__fail(__FILE__, __LINE__, "connection ended after %d replies", replies);
      have += (size_t)r;
      continue;
    }
    *nl = '\0';
    cJSON *o = cJSON_Parse(buf);
    ASSERT(o != NULL);
    const cJSON *e = cJSON_GetObjectItem(o, "error");
    if (e) {
      ASSERT_EQ(cJSON_GetObjectItem(e, "code")->valueint, -32007);
      snprintf(last_refusal, len, "%s", cJSON_GetObjectItem(e, "message")->valuestring);
      refused++;
    } else {
      (*ok)++;
    }
    cJSON_Delete(o);
    replies++;
    size_t used = (size_t)(nl - buf) + 1;
    memmove(buf, buf + used, have - used);
    have -= used;
  }
  return refused;
}

static double stat_of(harness *h, const char *key) {
  cJSON *r = harness_rpc_ok(h, "server.stats", NULL);
  double v = cJSON_GetObjectItem(r, key)->valuedouble;
  cJSON_Delete(r);
  return v;
}

TEST(sixty_four_gestures_are_refused_past_the_session_and_client_budgets) {
  harness h;
  const char *const args[] = {"--demo", "--reserve-mb", "0", "--session-memory-mb", "900", "--client-memory-mb", "400", NULL};
  harness_start(&h, "demo", args);
  cJSON *info = harness_rpc_ok(&h, "mesh.info", "{\"session\":\"demo\"}");
  double nt = cJSON_GetObjectItem(info, "topology_vertices")->valuedouble;
  cJSON_Delete(info);
  /* The documented estimate of a whole-mesh gesture, and what each budget admits. */
  double est = nt * 2560 + nt * 48;
  int per_client = (int)((400.0 * 1048576) / est);
  int per_session = (int)((900.0 * 1048576) / est);
  fprintf(stderr, "%.0f topology vertices: %.1f MiB a gesture; %d per client, %d per session\n", nt, est / 1048576,
          per_client, per_session);
  /* Two clients fill their own budgets; the third meets the session's. */
  ASSERT(per_client >= 2 && per_session > 2 * per_client && per_session < 3 * per_client);
  uint64_t before = harness_server_memory(&h, "VmRSS");

  client_conn a, b, c;
  int ok;
  char why[512] = "";
  int refused = begin_many(&h, &a, 1, 64, &ok, why, sizeof(why));
  fprintf(stderr, "client a: %d begun, %d refused: %s\n", ok, refused, why);
  ASSERT_EQ(ok, per_client);
  ASSERT_EQ(refused, 64 - per_client);
  ASSERT_STR_CONTAINS(why, "--client-memory-mb");
  ASSERT_STR_CONTAINS(why, "may hold 400 MiB");
  refused = begin_many(&h, &b, 101, 64, &ok, why, sizeof(why));
  fprintf(stderr, "client b: %d begun, %d refused: %s\n", ok, refused, why);
  ASSERT_EQ(ok, per_client);
  refused = begin_many(&h, &c, 201, 64, &ok, why, sizeof(why));
  fprintf(stderr, "client c: %d begun, %d refused: %s\n", ok, refused, why);
  ASSERT_EQ(ok, per_session - 2 * per_client);
  ASSERT_STR_CONTAINS(why, "session 'demo' already holds");
  ASSERT_STR_CONTAINS(why, "--session-memory-mb");
  ASSERT_EQ(stat_of(&h, "gestures"), per_session);
  ASSERT_NEAR(stat_of(&h, "gesture_memory_bytes"), per_session * (nt * 2608), 1.0);
  uint64_t peak = harness_server_memory(&h, "VmHWM");
  fprintf(stderr, "resident %.0f MB before, peak %.0f MB with %d gestures\n", (double)before / 1e6, (double)peak / 1e6,
          per_session);
#ifdef __SANITIZE_ADDRESS__
  /* ASan's shadow (an eighth more) and its 256 MiB quarantine of freed blocks. */
  ASSERT(peak < before + ((900ull + 128) << 20) * 9 / 8 + (256ull << 20));
#else
  ASSERT(peak < before + (900ull << 20) + (128ull << 20));
#endif

  /* The connections go: their gestures end, the budget is free again, and the memory goes back
   * to the system. */
  client_close(&a);
  client_close(&b);
  client_close(&c);
  for (int i = 0; i < 400 && stat_of(&h, "gestures") > 0; i++) usleep(50000);
  ASSERT_EQ(stat_of(&h, "gestures"), 0);
  ASSERT_EQ(stat_of(&h, "gesture_memory_bytes"), 0);
#ifndef __SANITIZE_ADDRESS__
  /* malloc_trim runs on the pool once the gestures are freed; ASan's allocator keeps its own. */
  uint64_t now = harness_server_memory(&h, "VmRSS");
  for (int i = 0; i < 200 && now > before + (peak - before) / 4; i++) {
    usleep(50000);
    now = harness_server_memory(&h, "VmRSS");
  }
  fprintf(stderr, "resident after the gestures ended: %.0f MB\n", (double)now / 1e6);
  ASSERT(now <= before + (peak - before) / 4);
#endif
  refused = begin_many(&h, &a, 301, 1, &ok, why, sizeof(why));
  ASSERT_EQ(ok, 1);
  client_close(&a);
  harness_stop(&h);
}

TEST(gestures_end_with_their_connection_unless_begun_detached) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  client_conn d;
  char err[256];
  ASSERT_OK(client_connect(&d, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  cJSON *p = cJSON_Parse("{\"session\":\"demo\",\"gesture\":100,\"pick\":20400,\"handle_radius\":0.01,\"roi_radius\":0.04,"
                         "\"detached\":true}");
  cJSON *res = NULL, *e = NULL;
  ASSERT_OK(client_rpc(&d, "deform.begin", p, 30000, &res, &e), NULL);
  cJSON_Delete(res);
  cJSON_Delete(p);
  p = cJSON_Parse("{\"session\":\"demo\",\"gesture\":101,\"pick\":20400,\"handle_radius\":0.01,\"roi_radius\":0.04}");
  ASSERT_OK(client_rpc(&d, "deform.begin", p, 30000, &res, &e), NULL);
  cJSON_Delete(res);
  cJSON_Delete(p);
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "deform.begin", "{\"session\":\"demo\",\"pick\":1,\"detached\":1}", msg, sizeof(msg)), -32602);
  client_close(&d);
  /* 101 ended with its connection; 100, detached, goes on from another one. */
  for (int i = 0; i < 400 && stat_of(&h, "gestures") > 1; i++) usleep(50000);
  ASSERT_EQ(stat_of(&h, "gestures"), 1);
  ASSERT_EQ(harness_rpc_err(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":101,\"translate\":[0,0.01,0]}", msg,
                            sizeof(msg)), -32010);
  cJSON *r = harness_rpc_ok(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":100,\"translate\":[0,0.01,0]}");
  ASSERT(cJSON_GetObjectItem(r, "version")->valueint >= 1);
  cJSON_Delete(r);
  cJSON_Delete(harness_rpc_ok(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":100}"));
  ASSERT_EQ(stat_of(&h, "gestures"), 0);
  harness_stop(&h);
}

/* Vertices of `pos` (n points, duplicates merged by exact position) within r of c. */
static uint64_t touched(const float *pos, uint32_t n, const double c[3], double r) {
  uint64_t k = 0;
  for (uint32_t v = 0; v < n; v++) {
    int dup = 0;
    double d2 = 0;
    for (int a = 0; a < 3; a++) d2 += ((double)pos[3 * v + a] - c[a]) * ((double)pos[3 * v + a] - c[a]);
    if (d2 >= r * r) continue;
    for (uint32_t u = 0; u < v && !dup; u++) dup = memcmp(pos + 3 * u, pos + 3 * v, 12) == 0;
    k += !dup;
  }
  return k;
}

TEST(a_brush_stroke_over_the_work_budget_is_refused_with_the_figures) {
  harness h;
  const char *const args[] = {"--demo", "--max-brush-work", "100000", NULL};
  harness_start(&h, "demo", args);
  uint32_t n;
  float *pos = harness_server_positions(&h, "demo", &n);
  /* 200 samples of radius 0.03 at the nose, and the same stroke with 2 samples. */
  double c[3] = {0.0, 0.05, 0.09};
  uint64_t exact = touched(pos, n, c, 0.03);
  ASSERT(exact > 100);
  char params[65536];
  int k = snprintf(params, sizeof(params), "{\"session\":\"demo\",\"brush\":\"inflate\",\"radius\":0.03,\"strength\":0.001,\"samples\":[");
  for (int i = 0; i < 200; i++)
    k += snprintf(params + k, sizeof(params) - (size_t)k, "%s{\"center\":[0,0.05,0.09]}", i ? "," : "");
  snprintf(params + k, sizeof(params) - (size_t)k, "]}");
  char msg[512];
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", params, msg, sizeof(msg)), -32007);
  fprintf(stderr, "%llu vertices within the radius; refused: %s\n", (unsigned long long)exact, msg);
  ASSERT_STR_CONTAINS(msg, "200 samples");
  ASSERT_STR_CONTAINS(msg, "the budget is 100000 (--max-brush-work)");
  unsigned long long up_to = 0, per = 0;
  const char *at = strstr(msg, "touch up to ");
  ASSERT(at && sscanf(at, "touch up to %llu vertices in all (about %llu per sample)", &up_to, &per) == 2);
  /* The figure bounds the real work from above, and not by more than the grid's coarseness. */
  ASSERT(per >= exact);
  ASSERT(per <= 27 * exact + 64);
  ASSERT_EQ(up_to, per * 200);
  /* Nothing moved; a short stroke of the same kind is applied. */
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "version")->valueint, 0);
  cJSON_Delete(st);
  cJSON *r = harness_rpc_ok(&h, "brush.stroke",
                            "{\"session\":\"demo\",\"brush\":\"inflate\",\"radius\":0.03,\"strength\":0.001,"
                            "\"samples\":[{\"center\":[0,0.05,0.09]},{\"center\":[0,0.05,0.09]}]}");
  ASSERT(cJSON_GetObjectItem(r, "moved_vertices")->valueint > 100);
  cJSON_Delete(r);
  free(pos);
  harness_stop(&h);
}
