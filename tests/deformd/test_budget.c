/*
 * test_budget.c — one client cannot take the server's memory or a pool thread with edits:
 * gestures count their estimated memory against per-session and per-client budgets and are
 * refused past them with the figures, end with their connection unless detached, and give their
 * memory back; a brush stroke whose work is over budget is refused before it moves anything.
 *
 * Oracles: the estimate's documented formula (2560 bytes per unknown + 48 per topology vertex,
 * docs/json-api.md) applied to mesh.info's topology_vertices, the server's resident memory from
 * /proc, and for brushes a brute-force count of the vertices within the radius of each dab the
 * stroke's path places, at places known in closed form (the budget's figure must bound it from
 * above).
 */
#include <stdlib.h>
#include <string.h>
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
  harness_wait_demo_dressed(&h, "demo"); /* its texture clip's compression is not counted against the bound */
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

static int cmp_point(const void *x, const void *y) { return memcmp(x, y, 12); }

/* The points of `pos` (n render vertices) with duplicates merged by exact position: the welded
 * vertices the server counts. Returns a new array of *m points. */
static float *unique_points(const float *pos, uint32_t n, uint32_t *m) {
  float *u = malloc(12 * (size_t)n + 12);
  memcpy(u, pos, 12 * (size_t)n);
  qsort(u, n, 12, cmp_point);
  uint32_t k = 0;
  for (uint32_t v = 0; v < n; v++)
    if (k == 0 || memcmp(u + 3 * (k - 1), u + 3 * v, 12) != 0) memmove(u + 3 * k++, u + 3 * v, 12);
  *m = k;
  return u;
}

/* Points of `u` (m of them) within r of c. */
static uint64_t touched(const float *u, uint32_t m, const double c[3], double r) {
  uint64_t k = 0;
  for (uint32_t v = 0; v < m; v++) {
    double d2 = 0;
    for (int a = 0; a < 3; a++) d2 += ((double)u[3 * v + a] - c[a]) * ((double)u[3 * v + a] - c[a]);
    k += d2 < r * r;
  }
  return k;
}

/* A stroke's work is that of the dabs its path places (one every tenth of the radius), not of
 * its points. Ten points going back and forth across the nose, 0.0605 apart, with radius 0.03:
 * the dabs sit every 0.003 of the 0.5445 of path, 182 of them, at places known in closed form.
 * The refusal names that many dabs and a figure that bounds from above the brute-force count of
 * the vertices within each dab's radius. Two hundred points on one spot place one dab: that
 * stroke is within the budget and applied. */
TEST(a_brush_stroke_over_the_work_budget_is_refused_with_the_figures) {
  harness h;
  const char *const args[] = {"--demo", "--max-brush-work", "100000", NULL};
  harness_start(&h, "demo", args);
  uint32_t n, m;
  float *pos = harness_server_positions(&h, "demo", &n);
  float *u = unique_points(pos, n, &m);
  const double x0 = -0.03025, x1 = 0.03025, len = x1 - x0, y = 0.05, z = 0.09, r = 0.03, step = 0.1 * r;
  char params[65536];
  int k = snprintf(params, sizeof(params), "{\"session\":\"demo\",\"brush\":\"inflate\",\"radius\":%g,\"strength\":0.001,\"samples\":[", r);
  for (int i = 0; i < 10; i++)
    k += snprintf(params + k, sizeof(params) - (size_t)k, "%s{\"center\":[%.17g,%g,%g]}", i ? "," : "", i % 2 ? x1 : x0, y, z);
  snprintf(params + k, sizeof(params) - (size_t)k, "]}");
  /* The oracle: the dabs along the path and the vertices within each. */
  uint32_t dabs = 0;
  uint64_t exact = 0;
  for (double s = 0; s <= 9 * len; s += step, dabs++) {
    int seg = (int)(s / len);
    double off = s - seg * len, c[3] = {seg % 2 ? x1 - off : x0 + off, y, z};
    exact += touched(u, m, c, r);
  }
  ASSERT_EQ(dabs, 182);
  ASSERT(exact > 100 * dabs);
  char msg[512];
  ASSERT_EQ(harness_rpc_err(&h, "brush.stroke", params, msg, sizeof(msg)), -32007);
  fprintf(stderr, "%llu vertices within the dabs' radius; refused: %s\n", (unsigned long long)exact, msg);
  ASSERT_STR_CONTAINS(msg, "182 dabs along its 10 points");
  ASSERT_STR_CONTAINS(msg, "the budget is 100000 (--max-brush-work)");
  unsigned long long up_to = 0, per = 0;
  const char *at = strstr(msg, "touch up to ");
  ASSERT(at && sscanf(at, "touch up to %llu vertices in all (about %llu per dab)", &up_to, &per) == 2);
  /* The figure bounds the real work from above, and not by more than the grid's coarseness. */
  ASSERT(up_to >= exact);
  ASSERT(up_to <= 27 * exact + 64 * dabs);
  ASSERT_EQ(per, up_to / dabs);
  /* Nothing moved; two hundred points on one spot are one dab, and applied. */
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "version")->valueint, 0);
  cJSON_Delete(st);
  k = snprintf(params, sizeof(params), "{\"session\":\"demo\",\"brush\":\"inflate\",\"radius\":0.03,\"strength\":0.001,\"samples\":[");
  for (int i = 0; i < 200; i++)
    k += snprintf(params + k, sizeof(params) - (size_t)k, "%s{\"center\":[0,0.05,0.09]}", i ? "," : "");
  snprintf(params + k, sizeof(params) - (size_t)k, "]}");
  cJSON *res = harness_rpc_ok(&h, "brush.stroke", params);
  ASSERT_EQ(cJSON_GetObjectItem(res, "dabs")->valueint, 1);
  ASSERT(cJSON_GetObjectItem(res, "moved_vertices")->valueint > 100);
  cJSON_Delete(res);
  free(u);
  free(pos);
  harness_stop(&h);
}
