/*
 * test_json_exact.c — the JSON-RPC port takes exact JSON only (RFC 8259 numbers, UTF-8, one
 * value per line, no NUL in names), echoes ids byte for byte, cuts the user's strings it echoes
 * in errors to 64 bytes, answers every line with valid JSON, and keeps log lines one line.
 *
 * The answers of the session layer's jobs (gestures, strokes, undo and redo, blend solves and
 * fits) keep the keys, their order and the number formatting docs/json-api.md shows.
 *
 * Oracles: a UTF-8 decoder written here (cJSON, which the server uses, takes invalid UTF-8, so
 * it cannot be the judge), the bytes of the request lines themselves (ids must come back as the
 * same bytes), the server's log file, and the key lists of docs/json-api.md written out here.
 */
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "utf8_oracle.h"

typedef struct reply {
  char *line; /* the raw reply line, without its newline (malloc'ed) */
  size_t len;
  cJSON *json;
  int code;   /* error.code, 0 for a result */
  const char *message;
} reply;

static void reply_free(reply *r) {
  cJSON_Delete(r->json);
  free(r->line);
  memset(r, 0, sizeof(*r));
}

/* Sends one raw line (the newline is added) and reads the reply line, which must be UTF-8,
 * parse as JSON and be a JSON-RPC response object. */
static void send_line(client_conn *c, const char *line, size_t n, reply *r) {
  memset(r, 0, sizeof(*r));
  char *buf = malloc(n + 1);
  memcpy(buf, line, n);
  buf[n] = '\n';
  ASSERT_OK(client_send(c, buf, n + 1), "send");
  free(buf);
  size_t cap = 1 << 16;
  r->line = malloc(cap);
  for (;;) {
    char ch;
    ssize_t got = read(c->fd, &ch, 1);
    if (got != 1) test__fail(__FILE__, __LINE__, "connection ended before the reply to %.60s", line);
    if (ch == '\n') break;
    if (r->len + 1 >= cap) r->line = realloc(r->line, cap *= 2);
    r->line[r->len++] = ch;
  }
  r->line[r->len] = '\0';
  if (!oracle_utf8_valid((const unsigned char *)r->line, r->len))
    test__fail(__FILE__, __LINE__, "reply is not UTF-8: %.200s", r->line);
  r->json = cJSON_ParseWithLength(r->line, r->len);
  if (!r->json) test__fail(__FILE__, __LINE__, "reply is not JSON: %.200s", r->line);
  ASSERT(cJSON_IsObject(r->json));
  const cJSON *e = cJSON_GetObjectItem(r->json, "error");
  if (e) {
    r->code = cJSON_GetObjectItem(e, "code")->valueint;
    r->message = cJSON_GetObjectItem(e, "message")->valuestring;
    ASSERT(r->message != NULL);
  } else {
    ASSERT(cJSON_GetObjectItem(r->json, "result") != NULL);
  }
}

/* A server (with the demo session when `demo`) and a raw JSON-RPC connection to it. */
static void start(harness *h, client_conn *c, int demo) {
  static const char *const args[] = {"--demo", NULL};
  harness_start(h, demo ? "demo" : NULL, demo ? args : NULL);
  char err[256];
  ASSERT_OK(client_connect(c, "127.0.0.1", h->rpc_port, err, sizeof(err)), err);
}

static int code_of(client_conn *c, const char *line) {
  reply r;
  send_line(c, line, strlen(line), &r);
  fprintf(stderr, "%.80s -> %.200s\n", line, r.line);
  int code = r.code;
  reply_free(&r);
  return code;
}

TEST(numbers_trailing_values_and_invalid_utf8_are_parse_errors) {
  harness h;
  client_conn c;
  start(&h, &c, 1);
  ASSERT_EQ(code_of(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"}"), 0);
  const char *bad[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":01,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1.,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":.5,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":+1,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1e,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":0x10,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":NaN,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"} {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"}garbage",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\",}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"}}",
      "{'jsonrpc':'2.0'}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"a\tb\",\"method\":\"session.list\"}", /* a raw tab in a string */
      "{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"\\x41\",\"method\":\"session.list\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\\xff\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"s\xc0\xaf\"}",     /* overlong '/' */
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"s\xed\xa0\x80\"}", /* an encoded surrogate */
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"s\xf4\x90\x80\x80\"}", /* past U+10FFFF */
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"s\xe2\x82\"}",     /* cut short */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    reply r;
    send_line(&c, bad[i], strlen(bad[i]), &r);
    fprintf(stderr, "%zu: %.200s\n", i, r.line);
    ASSERT_EQ(r.code, -32700);
    ASSERT_STR_CONTAINS(r.line, "\"id\":null");
    reply_free(&r);
  }
  /* The second object of line 7 was not run either: the next id answered is the next one sent. */
  reply r;
  const char ok[] = "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"session.list\"}";
  send_line(&c, ok, sizeof(ok) - 1, &r);
  ASSERT_STR_CONTAINS(r.line, "\"id\":99,");
  reply_free(&r);
  client_close(&c);
  harness_stop(&h);
}

TEST(ids_are_echoed_byte_for_byte_as_sent) {
  harness h;
  client_conn c;
  start(&h, &c, 0);
  const char *ids[] = {"1e400", "18446744073709551616", "-0", "1.50", "1E+2", "123456789012345678901234567890",
                       "\"\\u0041\\ud83d\\ude00\"", "\"caf\xc3\xa9\"", "\"a\\\"b\\\\c\\/d\"", "null", "-1.0e-400"};
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    char line[256], want[256];
    /* Both a result and an error echo it. */
    for (int method = 0; method < 2; method++) {
      snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\"}", ids[i],
               method ? "no.such" : "session.list");
      reply r;
      send_line(&c, line, strlen(line), &r);
      snprintf(want, sizeof(want), "{\"jsonrpc\":\"2.0\",\"id\":%s,", ids[i]);
      if (strncmp(r.line, want, strlen(want)) != 0)
        test__fail(__FILE__, __LINE__, "id %s came back as %.120s", ids[i], r.line);
      ASSERT_EQ(r.code, method ? -32601 : 0);
      reply_free(&r);
    }
  }
  client_close(&c);
  harness_stop(&h);
}

TEST(names_with_nul_are_refused_not_cut) {
  harness h;
  client_conn c;
  start(&h, &c, 1);
  /* "session.list\u0000x" once ran session.list. */
  ASSERT_EQ(code_of(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\\u0000x\"}"), -32600);
  /* A session "a\u0000b" once became "a"; a target, a clip, a path likewise. */
  ASSERT_EQ(code_of(&c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session.create\",\"params\":{\"session\":\"a\\u0000b\",\"mesh\":\"demo\"}}"), -32602);
  ASSERT_EQ(code_of(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"mesh.info\",\"params\":{\"session\":\"demo\\u0000junk\"}}"), -32602);
  ASSERT_EQ(code_of(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"weights.set\",\"params\":{\"session\":\"demo\",\"weights\":{\"smile_L\\u0000x\":1}}}"), -32602);
  ASSERT_EQ(code_of(&c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session.create\",\"params\":{\"session\":\"f\",\"mesh\":\"demo\\u0000.obj\"}}"), -32602);
  /* Nothing was created or changed. */
  cJSON *list = harness_rpc_ok(&h, "session.list", NULL);
  ASSERT_EQ(cJSON_GetArraySize(list), 1);
  cJSON_Delete(list);
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "version")->valueint, 0);
  cJSON_Delete(st);
  /* A NUL in the id is fine: it names nothing and comes back as sent. */
  reply r;
  const char nul_id[] = "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0000b\",\"method\":\"session.list\"}";
  send_line(&c, nul_id, sizeof(nul_id) - 1, &r);
  ASSERT_STR_CONTAINS(r.line, "\"id\":\"a\\u0000b\",\"result\"");
  reply_free(&r);
  client_close(&c);
  harness_stop(&h);
}

/* Hostile strings: each is put where a name goes, in valid JSON (escaped as needed), and every
 * reply must be valid JSON that echoes at most 64 bytes of it. */
TEST(replies_are_valid_json_for_every_string_thrown_at_them) {
  harness h;
  client_conn c;
  start(&h, &c, 1);
  size_t big = 10u << 20;
  char *huge = malloc(big + 1);
  for (size_t i = 0; i < big; i++) huge[i] = (char)('a' + i % 26);
  huge[big] = '\0';
  char *huge_multibyte = malloc(3 * 100000 + 1); /* "€" × 100000: a cut must not split one */
  for (size_t i = 0; i < 100000; i++) memcpy(huge_multibyte + 3 * i, "\xe2\x82\xac", 3);
  huge_multibyte[300000] = '\0';
  const char *strings[] = {
      "x", "", "caf\xc3\xa9", "\xf0\x9f\x98\x80", "a\\nb", "a\\r\\nFAKE LOG LINE", "\\u0007bell", "\\u001b[31mred",
      "quote\\\"inside", "back\\\\slash", "\\ud83d\\ude00", "\\u2028\\u2029", "'single'", "%s%s%n%x",
      "\\u00ff\\u00fe", huge, huge_multibyte,
  };
  const char *templates[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"mesh.info\",\"params\":{\"session\":\"%s\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"%s\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"weights.set\",\"params\":{\"session\":\"demo\",\"weights\":{\"%s\":0.5}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"anim.play\",\"params\":{\"session\":\"demo\",\"clip\":\"%s\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"targets.configure\",\"params\":{\"session\":\"demo\",\"target\":\"%s\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"sculpt.set\",\"params\":{\"session\":\"demo\",\"offsets\":{\"%s\":[0,0,0]}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session.create\",\"params\":{\"session\":\"demo\",\"mesh\":\"%s\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"blend.fit\",\"params\":{\"session\":\"demo\",\"shape\":\"/nonexistent/%s.obj\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"auth\",\"params\":{\"token\":\"%s\"}}",
  };
  size_t cap = big + 4096;
  char *line = malloc(cap);
  int answered = 0;
  for (size_t t = 0; t < sizeof(templates) / sizeof(templates[0]); t++) {
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
      int n = snprintf(line, cap, templates[t], strings[i]);
      reply r;
      send_line(&c, line, (size_t)n, &r);
      answered++;
      if (r.message && strlen(strings[i]) > 64) {
        /* The message quotes at most 64 bytes of the string (plus "…"). */
        ASSERT(strlen(r.message) < 64 + 200);
        ASSERT(strstr(r.message, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz") == NULL);
      }
      reply_free(&r);
    }
  }
  fprintf(stderr, "%d replies, all valid JSON\n", answered);
  /* Nothing above changed the demo session or made a new one, and session.list is still JSON. */
  reply r;
  const char list[] = "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"session.list\"}";
  send_line(&c, list, sizeof(list) - 1, &r);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "result")), 1);
  reply_free(&r);
  free(line);
  free(huge);
  free(huge_multibyte);
  client_close(&c);
  harness_stop(&h);
}

TEST(a_session_name_with_a_newline_cannot_forge_a_log_line) {
  harness h;
  const char *const args[] = {"--log-level", "debug", NULL};
  harness_start(&h, NULL, args);
  cJSON_Delete(harness_rpc_ok(&h, "session.create",
                              "{\"session\":\"evil\\n1999-01-01T00:00:00.000Z deformd[1] error FORGED\",\"mesh\":\"demo\"}"));
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "mesh.info", "{\"session\":\"x\\ny\\u001b[2J\"}", msg, sizeof(msg)), -32001);
  harness_stop(&h);
  FILE *f = fopen(h.log_path, "r");
  ASSERT(f != NULL);
  char line[4096];
  int escaped = 0;
  while (fgets(line, sizeof(line), f)) {
    /* Every line is the server's own: it starts with a timestamp and "deformd[". */
    if (strncmp(line, "1999-01-01", 10) == 0 || !strstr(line, " deformd["))
      test__fail(__FILE__, __LINE__, "forged or broken log line: %s", line);
    ASSERT(strchr(line, '\x1b') == NULL);
    escaped |= strstr(line, "evil\\n1999-01-01T00:00:00.000Z deformd[1] error FORGED") != NULL;
  }
  fclose(f);
  ASSERT(escaped);
}

/* Both strings, printed, when they differ. */
#define EXPECT_STR_EQ(got, want)                                                                  \
  do {                                                                                            \
    const char *g_ = (got), *w_ = (want);                                                         \
    if (strcmp(g_, w_) != 0) test__fail(__FILE__, __LINE__, "got '%s', expected '%s'", g_, w_); \
  } while (0)

/* The result's keys in the order the reply line has them (cJSON keeps a parsed object's
 * order), joined by commas. */
static void result_keys(const reply *r, char *out, size_t cap) {
  const cJSON *res = cJSON_GetObjectItem(r->json, "result");
  ASSERT(cJSON_IsObject(res));
  size_t n = 0;
  out[0] = '\0';
  for (const cJSON *k = res->child; k; k = k->next)
    n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? "," : "", k->string);
}

/* Sends a call and checks its result's keys against `keys` (docs/json-api.md). */
static void expect_keys(client_conn *c, const char *line, const char *keys, reply *r) {
  send_line(c, line, strlen(line), r);
  fprintf(stderr, "%.80s -> %.300s\n", line, r->line);
  ASSERT_EQ(r->code, 0);
  char got[1024];
  result_keys(r, got, sizeof(got));
  EXPECT_STR_EQ(got, keys);
}

/* Significant digits of the number text at `at` (up to its exponent or the end of the value). */
static size_t significant_digits(const char *at) {
  size_t digits = 0, len = strcspn(at, ",]}");
  int leading = 1;
  for (size_t i = 0; i < len && at[i] != 'e' && at[i] != 'E'; i++) {
    if (at[i] < '0' || at[i] > '9') continue;
    if (leading && at[i] == '0') continue;
    leading = 0;
    digits++;
  }
  return digits;
}

/* A float32 written as one (what is applied is a float): the shortest text that reads back as
 * that float has at most 9 significant digits, where the double it widens to takes up to 17. */
static void expect_float_text(const char *at) {
  float f = strtof(at, NULL);
  char shortest[32];
  snprintf(shortest, sizeof(shortest), "%.9g", (double)f);
  ASSERT(strtof(shortest, NULL) == f);
  if (significant_digits(at) > 9) test__fail(__FILE__, __LINE__, "not written as a float: %.30s", at);
}

/* Every weight of an answer's "weights" object is written as a float. */
static void expect_float_weights(const reply *r) {
  const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(r->json, "result"), "weights");
  ASSERT(cJSON_IsObject(w) && w->child != NULL);
  for (const cJSON *k = w->child; k; k = k->next) {
    char key[160];
    snprintf(key, sizeof(key), "\"%s\":", k->string);
    const char *at = strstr(strstr(r->line, "\"weights\":"), key);
    ASSERT(at != NULL);
    expect_float_text(at + strlen(key));
  }
}

TEST(session_job_answers_keep_their_documented_keys_and_order) {
  harness h;
  client_conn c;
  start(&h, &c, 1);
  reply r;
  expect_keys(&c,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"deform.begin\",\"params\":{\"session\":\"demo\",\"mode\":\"arap\","
              "\"pick\":2000,\"handle_radius\":0.01,\"roi_radius\":0.05,\"iterations\":2}}",
              "gesture,mode,border,region_vertices,free,pinned,prefactor_ms,multires,pivot", &r);
  const cJSON *res = cJSON_GetObjectItem(r.json, "result");
  uint32_t gesture = (uint32_t)cJSON_GetObjectItem(res, "gesture")->valuedouble;
  ASSERT_STR_CONTAINS(r.line, "\"mode\":\"arap\",\"border\":\"smooth\"");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(res, "pivot")), 3);
  const char *pivot = strstr(r.line, "\"pivot\":[") + strlen("\"pivot\":[");
  for (int k = 0; k < 3; k++, pivot = strchr(pivot, ',') + 1) expect_float_text(pivot);
  reply_free(&r);
  char line[512];
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"deform.drag\",\"params\":{\"session\":\"demo\",\"gesture\":%u,"
           "\"translate\":[0,0.004,0]}}",
           gesture);
  send_line(&c, line, strlen(line), &r);
  EXPECT_STR_EQ(r.line, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"version\":1}}");
  reply_free(&r);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"deform.end\",\"params\":{\"session\":\"demo\",\"gesture\":%u}}",
           gesture);
  send_line(&c, line, strlen(line), &r);
  EXPECT_STR_EQ(r.line, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"version\":1}}");
  reply_free(&r);

  expect_keys(&c,
              "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"brush.stroke\",\"params\":{\"session\":\"demo\",\"brush\":\"draw\","
              "\"samples\":[{\"center\":[0.0275,-0.0565,0.076],\"radius\":0.02,\"strength\":0.5}]}}",
              "version,moved_vertices,dabs", &r);
  ASSERT_STR_CONTAINS(r.line, "\"result\":{\"version\":2,\"moved_vertices\":");
  reply_free(&r);
  /* A stroke far from the mesh moves nothing and makes no version. */
  const char far[] = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"brush.stroke\",\"params\":{\"session\":\"demo\","
                     "\"brush\":\"draw\",\"samples\":[{\"center\":[5,5,5],\"radius\":0.02,\"strength\":0.5}]}}";
  send_line(&c, far, sizeof(far) - 1, &r);
  EXPECT_STR_EQ(r.line, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"version\":2,\"moved_vertices\":0,\"dabs\":1}}");
  reply_free(&r);

  expect_keys(&c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"history.undo\",\"params\":{\"session\":\"demo\"}}",
              "version,author,step,kind,step_first_version,step_last_version,restored,skipped,overlapped", &r);
  ASSERT_STR_CONTAINS(r.line, "\"result\":{\"version\":3,\"author\":\"anonymous-");
  ASSERT_STR_CONTAINS(r.line, "\"kind\":\"brush\",\"step_first_version\":2,\"step_last_version\":2,");
  reply_free(&r);
  expect_keys(&c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"history.redo\",\"params\":{\"session\":\"demo\"}}",
              "version,author,step,kind,step_first_version,step_last_version,restored,skipped,overlapped", &r);
  ASSERT_STR_CONTAINS(r.line, "\"result\":{\"version\":4,");
  reply_free(&r);

  expect_keys(&c,
              "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"blend.solve\",\"params\":{\"session\":\"demo\",\"pins\":[{\"vertex\":6862,"
              "\"position\":[0.0275,-0.0565,0.076]},{\"vertex\":9083,\"position\":[-0.0247250684,-0.0577387363,0.080651477]},"
              "{\"vertex\":477,\"position\":[0,-0.101161905,0.0837104246]}],"
              "\"targets\":[\"smile_L\",\"smile_R\",\"jaw_open\"]}}",
              "version,weights,residual,iterations,active", &r);
  ASSERT_STR_CONTAINS(r.line, "\"result\":{\"version\":5,\"weights\":{\"jaw_open\":");
  expect_float_weights(&r);
  reply_free(&r);
  expect_keys(&c,
              "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"blend.fit\",\"params\":{\"session\":\"demo\",\"shape\":\"sculpt\"}}",
              "weights,rms,max_error,max_vertex,iterations,active", &r);
  expect_float_weights(&r);
  reply_free(&r);
  expect_keys(&c,
              "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"blend.fit\",\"params\":{\"session\":\"demo\",\"shape\":\"sculpt\","
              "\"targets\":[\"smile_L\",\"cheek_puff\"],\"apply\":true}}",
              "weights,rms,max_error,max_vertex,iterations,active,version", &r);
  ASSERT_STR_CONTAINS(r.line, "\"weights\":{\"smile_L\":");
  expect_float_weights(&r);
  reply_free(&r);
  client_close(&c);
  harness_stop(&h);
}
