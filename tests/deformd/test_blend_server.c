/*
 * test_blend_server.c — blendshape weight solves through a real deformd (blend.solve, blend.fit,
 * EDIT BLEND_PINS), against oracles that never call the solver: weights the test set itself
 * and reads back from a viewer replica, a brute force over every active set of a bounded
 * least-squares problem built here by a linear scan of a fresh demo head, and the error codes
 * a user sees. The factor cache is watched through server.stats.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

static uint64_t version_of(cJSON *r) {
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static double stat_of(harness *h, const char *key) {
  cJSON *r = harness_rpc_ok(h, "server.stats", NULL);
  const cJSON *v = cJSON_GetObjectItem(r, key);
  ASSERT(cJSON_IsNumber(v));
  double d = v->valuedouble;
  cJSON_Delete(r);
  return d;
}

/* Whether target t of the demo head repeats an earlier one exactly (its ARKit jawOpen is its
 * jaw_open): blend.solve and blend.fit leave those out unless asked for, and answer no weight. */
static int is_copy(const mesh *m, uint32_t t) {
  const mesh_target *a = &m->targets[t];
  for (uint32_t u = 0; u < t; u++) {
    const mesh_target *b = &m->targets[u];
    if (b->count == a->count && memcmp(b->indices, a->indices, 4 * a->count) == 0 &&
        memcmp(b->deltas, a->deltas, 12 * a->count) == 0 && !is_copy(m, u))
      return 1;
  }
  return 0;
}

static uint32_t solved_count(const mesh *m) {
  uint32_t n = 0;
  for (uint32_t t = 0; t < m->target_count; t++) n += !is_copy(m, t);
  return n;
}

static double weight_in(const cJSON *result, const char *name) {
  const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(result, "weights"), name);
  if (!cJSON_IsNumber(v)) test__fail(__FILE__, __LINE__, "no weight for '%s' in the result", name);
  return v->valuedouble;
}

/* The render vertex target t moves farthest (the lowest index among equals). */
static uint32_t most_moved(const mesh *m, uint32_t t) {
  const mesh_target *mt = &m->targets[t];
  uint32_t best = 0;
  double far = -1;
  for (uint32_t e = 0; e < mt->count; e++) {
    const float *d = mt->deltas + 3 * (size_t)e;
    double n = (double)d[0] * d[0] + (double)d[1] * d[1] + (double)d[2] * d[2];
    if (n > far) far = n, best = mt->indices[e];
  }
  return best;
}

/* {"session":"demo","pins":[{"vertex":v,"position":[x,y,z]},...]EXTRA} (malloc'ed). */
static char *solve_params(const uint32_t *v, const double *pos, uint32_t n, const char *extra) {
  size_t cap = 128 + (size_t)n * 96 + strlen(extra), len = 0;
  char *s = malloc(cap);
  len += (size_t)snprintf(s + len, cap - len, "{\"session\":\"demo\",\"pins\":[");
  for (uint32_t k = 0; k < n; k++)
    len += (size_t)snprintf(s + len, cap - len, "%s{\"vertex\":%u,\"position\":[%.17g,%.17g,%.17g]}", k ? "," : "", v[k],
                            pos[3 * k], pos[3 * k + 1], pos[3 * k + 2]);
  snprintf(s + len, cap - len, "]%s}", extra);
  return s;
}

/* Reads one JSON-RPC response line from a raw connection. */
static cJSON *read_response(client_conn *c) {
  static char line[1 << 16];
  size_t len = 0;
  for (;;) {
    ASSERT(len + 1 < sizeof(line));
    ASSERT(recv(c->fd, line + len, 1, 0) == 1);
    if (line[len] == '\n') break;
    len++;
  }
  line[len] = '\0';
  cJSON *o = cJSON_Parse(line);
  ASSERT(o != NULL);
  return o;
}

/* Sends one request with its params exactly as written (harness_rpc_err re-encodes them, and
 * cJSON writes 1e999 back as null) and returns the error code, copying the message. */
static int raw_error(harness *h, const char *method, const char *params, char *msg, size_t msglen) {
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h->rpc_port, err, sizeof(err)), err);
  size_t cap = strlen(params) + 128;
  char *line = malloc(cap);
  size_t n = (size_t)snprintf(line, cap, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\",\"params\":%s}\n", method, params);
  ASSERT_OK(client_send(&c, line, n), NULL);
  free(line);
  cJSON *o = read_response(&c);
  const cJSON *e = cJSON_GetObjectItem(o, "error");
  if (!e) test__fail(__FILE__, __LINE__, "%s %s: expected an error", method, params);
  snprintf(msg, msglen, "%s", cJSON_GetObjectItem(e, "message")->valuestring);
  int code = cJSON_GetObjectItem(e, "code")->valueint;
  cJSON_Delete(o);
  client_close(&c);
  return code;
}

/* Every target's most-moved vertex: enough pins to determine all weights of the demo head. */
static uint32_t *all_pins(const mesh *m) {
  uint32_t *v = malloc(sizeof(uint32_t) * m->target_count);
  for (uint32_t t = 0; t < m->target_count; t++) v[t] = most_moved(m, t);
  return v;
}

static double *positions_at(const float *shape, const uint32_t *v, uint32_t n) {
  double *p = malloc(sizeof(double) * 3 * n);
  for (uint32_t k = 0; k < n; k++)
    for (int c = 0; c < 3; c++) p[3 * k + c] = shape[3 * (size_t)v[k] + c];
  return p;
}

TEST(blend_solve_recovers_known_weights_from_pinned_positions) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  const mesh *m = r.mesh;
  uint32_t T = m->target_count;
  /* The shape of known weights, as a viewer shows it. */
  uint64_t ver = version_of(harness_rpc_ok(&h, "weights.set",
                                           "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.7,\"jaw_open\":0.35,"
                                           "\"brow_up_R\":0.6,\"blink_L\":0.25}}"));
  harness_follow(&v, &r, ver, 10000);
  float *shape = malloc(sizeof(float) * 3 * m->vertex_count);
  ASSERT_OK(client_replica_positions(&r, shape), NULL);
  uint32_t *pins = all_pins(m);
  double *pos = positions_at(shape, pins, T);
  ver = version_of(harness_rpc_ok(&h, "weights.set",
                                  "{\"session\":\"demo\",\"weights\":{\"smile_L\":0,\"jaw_open\":0,\"brow_up_R\":0,"
                                  "\"blink_L\":0}}"));
  harness_follow(&v, &r, ver, 10000);
  for (uint32_t t = 0; t < T; t++) ASSERT(r.weights[t] == 0.0f);

  char *params = solve_params(pins, pos, T, ",\"regularization\":0");
  cJSON *res = harness_rpc_ok(&h, "blend.solve", params);
  uint64_t solved = (uint64_t)cJSON_GetObjectItem(res, "version")->valuedouble;
  ASSERT(solved == ver + 1); /* one change */
  ASSERT(cJSON_GetObjectItem(res, "residual")->valuedouble < 1e-5);
  ASSERT_EQ(cJSON_GetObjectItem(res, "iterations")->valueint >= 0, 1);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(res, "weights")), solved_count(m));
  for (uint32_t t = 0; t < T; t++) {
    const char *name = m->targets[t].name;
    if (is_copy(m, t)) continue;
    double want = strcmp(name, "smile_L") == 0 ? 0.7
                  : strcmp(name, "jaw_open") == 0 ? 0.35
                  : strcmp(name, "brow_up_R") == 0 ? 0.6
                  : strcmp(name, "blink_L") == 0 ? 0.25 : 0.0;
    ASSERT_NEAR(weight_in(res, name), want, 1e-4);
  }
  /* The viewer gets exactly the weights the answer names, in one WEIGHTS frame. */
  harness_follow(&v, &r, solved, 10000);
  for (uint32_t t = 0; t < T; t++) ASSERT(is_copy(m, t) ? r.weights[t] == 0.0f : r.weights[t] == (float)weight_in(res, m->targets[t].name));
  cJSON_Delete(res);
  free(params);
  free(pos);
  free(pins);
  free(shape);
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
}

/* ---- the bounded optimum, by brute force ------------------------------------------------------ */

/* Solves the n × n system A x = b in place (Gaussian elimination, partial pivoting). */
static int dense_solve(double *A, double *b, uint32_t n) {
  for (uint32_t c = 0; c < n; c++) {
    uint32_t p = c;
    for (uint32_t i = c + 1; i < n; i++)
      if (fabs(A[i * n + c]) > fabs(A[p * n + c])) p = i;
    if (fabs(A[p * n + c]) < 1e-300) return -1;
    for (uint32_t j = 0; j < n; j++) {
      double t = A[c * n + j];
      A[c * n + j] = A[p * n + j];
      A[p * n + j] = t;
    }
    double t = b[c];
    b[c] = b[p];
    b[p] = t;
    for (uint32_t i = c + 1; i < n; i++) {
      double f = A[i * n + c] / A[c * n + c];
      for (uint32_t j = c; j < n; j++) A[i * n + j] -= f * A[c * n + j];
      b[i] -= f * b[c];
    }
  }
  for (uint32_t c = n; c-- > 0;) {
    for (uint32_t j = c + 1; j < n; j++) b[c] -= A[c * n + j] * b[j];
    b[c] /= A[c * n + c];
  }
  return 0;
}

/* min ‖B w − r‖² + λ‖w − w0‖² over lo ≤ w ≤ hi (B rows × S, row-major, S ≤ 6): every
 * assignment of each weight to free / lower / upper, the free ones solved exactly; the lowest
 * objective among the feasible ones is the optimum (it is the minimiser of its own face). */
static void brute_force(const double *B, uint32_t rows, uint32_t S, const double *r, double lambda, const double *w0,
                        const double *lo, const double *hi, double *best) {
  double best_f = INFINITY;
  uint32_t cases = 1;
  for (uint32_t i = 0; i < S; i++) cases *= 3;
  for (uint32_t code = 0; code < cases; code++) {
    int state[6];
    double w[6] = {0}, A[36], b[6]; /* every w[j] is set below; GCC -O3 cannot see it */
    uint32_t fi[6], nf = 0, k = code;
    for (uint32_t i = 0; i < S; i++, k /= 3) {
      state[i] = (int)(k % 3);
      if (state[i] == 0) fi[nf++] = i;
      else w[i] = state[i] == 1 ? lo[i] : hi[i];
    }
    for (uint32_t a = 0; a < nf; a++) {
      b[a] = lambda * w0[fi[a]];
      for (uint32_t q = 0; q < rows; q++) {
        double rr = r[q];
        for (uint32_t j = 0; j < S; j++)
          if (state[j]) rr -= B[q * S + j] * w[j];
        b[a] += B[q * S + fi[a]] * rr;
      }
      for (uint32_t c = 0; c < nf; c++) {
        double s = a == c ? lambda : 0.0;
        for (uint32_t q = 0; q < rows; q++) s += B[q * S + fi[a]] * B[q * S + fi[c]];
        A[a * nf + c] = s;
      }
    }
    if (nf && dense_solve(A, b, nf) != 0) continue;
    int ok = 1;
    for (uint32_t a = 0; a < nf; a++) {
      w[fi[a]] = b[a];
      ok &= b[a] >= lo[fi[a]] - 1e-12 && b[a] <= hi[fi[a]] + 1e-12;
    }
    if (!ok) continue;
    double f = 0;
    for (uint32_t q = 0; q < rows; q++) {
      double e = -r[q];
      for (uint32_t j = 0; j < S; j++) e += B[q * S + j] * w[j];
      f += e * e;
    }
    for (uint32_t j = 0; j < S; j++) f += lambda * (w[j] - w0[j]) * (w[j] - w0[j]);
    if (f < best_f) {
      best_f = f;
      memcpy(best, w, sizeof(double) * S);
    }
  }
  ASSERT(best_f < INFINITY);
}

TEST(blend_solve_keeps_weights_in_their_ranges_and_matches_a_brute_force) {
  harness h;
  harness_start(&h, "demo", demo_args);
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure",
                              "{\"session\":\"demo\",\"target\":\"smile_L\",\"min\":-0.2,\"max\":0.7}"));
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  const char *names[3] = {"smile_L", "jaw_open", "brow_up_L"};
  const double lo[3] = {-0.2, 0, 0}, hi[3] = {0.7, 1, 1};
  const double asked[3] = {1.3, -0.4, 0.5}; /* two of them outside their ranges */
  uint32_t t[3], pins[6];
  for (int s = 0; s < 3; s++) {
    t[s] = (uint32_t)mesh_find_target(m, names[s]);
    pins[s] = most_moved(m, t[s]);
    /* and a vertex half-way down the target's list, so there are more equations than weights */
    pins[3 + s] = m->targets[t[s]].indices[m->targets[t[s]].count / 2];
  }
  /* B by a linear scan of the targets; where the pins should go: base + B · asked. */
  const uint32_t P = 6, rows = 18;
  double B[18 * 3] = {0}, rr[18], pos[18];
  for (uint32_t s = 0; s < 3; s++) {
    const mesh_target *mt = &m->targets[t[s]];
    for (uint32_t e = 0; e < mt->count; e++)
      for (uint32_t k = 0; k < P; k++)
        if (mt->indices[e] == pins[k])
          for (int c = 0; c < 3; c++) B[(3 * k + c) * 3 + s] = mt->deltas[3 * e + c];
  }
  for (uint32_t q = 0; q < rows; q++) {
    rr[q] = 0;
    for (int s = 0; s < 3; s++) rr[q] += B[q * 3 + s] * asked[s];
    pos[q] = m->positions[3 * (size_t)pins[q / 3] + q % 3] + rr[q];
    rr[q] = pos[q] - m->positions[3 * (size_t)pins[q / 3] + q % 3];
  }
  const char *extras[3] = {",\"targets\":[\"smile_L\",\"jaw_open\",\"brow_up_L\"]",
                           (",\"targets\":[\"smile_L\",\"jaw_open\",\"brow_up_L\"],\"regularization\":1e-4,"
                            "\"keep_close_to_current\":false"),
                           ",\"targets\":[\"smile_L\",\"jaw_open\",\"brow_up_L\"],\"regularization\":1e-4"};
  const double lambdas[3] = {0, 1e-4, 1e-4};
  double w0[3] = {0, 0, 0};
  for (int c = 0; c < 3; c++) {
    if (c == 2) { /* keep close to what the previous solve applied */
      cJSON *g = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
      for (int s = 0; s < 3; s++) w0[s] = weight_in(g, names[s]);
      cJSON_Delete(g);
    }
    char *params = solve_params(pins, pos, P, extras[c]);
    cJSON *res = harness_rpc_ok(&h, "blend.solve", params);
    double want[3];
    brute_force(B, rows, 3, rr, lambdas[c], w0, lo, hi, want);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(res, "weights")), 3);
    for (int s = 0; s < 3; s++) {
      double got = weight_in(res, names[s]);
      fprintf(stderr, "case %d: %s = %.9g (brute force %.9g)\n", c, names[s], got, want[s]);
      ASSERT((float)got >= (float)lo[s] && (float)got <= (float)hi[s]); /* exactly inside */
      ASSERT_NEAR(got, want[s], 1e-6);
    }
    if (c == 0) ASSERT(cJSON_GetObjectItem(res, "active")->valueint >= 1);
    cJSON_Delete(res);
    free(params);
  }
  mesh_destroy(m);
  harness_stop(&h);
}

TEST(blend_solve_errors_name_the_problem) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  const mesh *m = r.mesh;
  uint8_t *moved = calloc(m->vertex_count, 1);
  for (uint32_t t = 0; t < m->target_count; t++)
    for (uint32_t e = 0; e < m->targets[t].count; e++) moved[m->targets[t].indices[e]] = 1;
  uint32_t still = 0;
  while (moved[still]) still++;
  free(moved);
  uint32_t *pins = all_pins(m);
  pins[0] = still;
  double *pos = positions_at(m->positions, pins, m->target_count);
  char msg[512], *p;
  /* A pin on a vertex no target moves. */
  p = solve_params(pins, pos, m->target_count, "");
  ASSERT_EQ(harness_rpc_err(&h, "blend.solve", p, msg, sizeof(msg)), -32011);
  ASSERT_STR_CONTAINS(msg, "target moves this vertex");
  free(p);
  pins[0] = most_moved(m, 0);
  /* One pin cannot determine 16 weights without regularization. */
  p = solve_params(pins, pos, 1, "");
  ASSERT_EQ(harness_rpc_err(&h, "blend.solve", p, msg, sizeof(msg)), -32011);
  ASSERT_STR_CONTAINS(msg, "do not determine its weight");
  free(p);
  p = solve_params(pins, pos, 1, ",\"regularization\":1e-4"); /* ... but it can with it */
  cJSON_Delete(harness_rpc_ok(&h, "blend.solve", p));
  free(p);
  /* Not finite (JSON's 1e999 reads as infinity), out of range, wrong types. */
  const struct {
    const char *params;
    int code;
    const char *says;
  } cases[] = {
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":1,\"position\":[1e999,0,0]}]}", -32003, "not finite"},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":99999999,\"position\":[0,0,0]}]}", -32006, "out of range"},
      {"{\"session\":\"demo\",\"pins\":[]}", -32602, "\"pins\""},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":-1,\"position\":[0,0,0]}]}", -32602, "vertex"},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":1,\"position\":[0,0]}]}", -32602, "position"},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":1,\"position\":[0,0,0]}],\"regularization\":-1}", -32602,
       "regularization"},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":1,\"position\":[0,0,0]}],\"regularization\":1e999}", -32003,
       "regularization"},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":1,\"position\":[0,0,0]}],\"keep_close_to_current\":1}", -32602,
       "keep_close_to_current"},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":1,\"position\":[0,0,0]}],\"targets\":[\"grin\"]}", -32002, "grin"},
      {"{\"session\":\"demo\",\"pins\":[{\"vertex\":1,\"position\":[0,0,0]}],\"targets\":[]}", -32602, "targets"},
      {"{\"session\":\"nope\",\"pins\":[{\"vertex\":1,\"position\":[0,0,0]}]}", -32001, "nope"},
      {"{\"session\":\"demo\",\"shape\":3}", -32602, "shape"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *method = strstr(cases[i].params, "\"shape\"") ? "blend.fit" : "blend.solve";
    int code = raw_error(&h, method, cases[i].params, msg, sizeof(msg));
    if (code != cases[i].code) test__fail(__FILE__, __LINE__, "case %zu: %d (%s), want %d", i, code, msg, cases[i].code);
    ASSERT_STR_CONTAINS(msg, cases[i].says);
  }
  /* Combination and muted targets are never solved. */
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure",
                              "{\"session\":\"demo\",\"target\":\"cheek_puff\",\"drivers\":[\"smile_L\",\"smile_R\"]}"));
  cJSON_Delete(harness_rpc_ok(&h, "targets.configure", "{\"session\":\"demo\",\"target\":\"nose_wide\",\"muted\":true}"));
  p = solve_params(pins, pos, 1, ",\"targets\":[\"cheek_puff\"]");
  ASSERT_EQ(harness_rpc_err(&h, "blend.solve", p, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "combination target");
  free(p);
  p = solve_params(pins, pos, 1, ",\"targets\":[\"nose_wide\"]");
  ASSERT_EQ(harness_rpc_err(&h, "blend.solve", p, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "muted");
  free(p);
  /* Without a target list they are left out: 14 weights come back, nothing for those two. */
  uint32_t *pins14 = malloc(sizeof(uint32_t) * m->target_count), n14 = 0;
  for (uint32_t t = 0; t < m->target_count; t++)
    if (strcmp(m->targets[t].name, "cheek_puff") != 0 && strcmp(m->targets[t].name, "nose_wide") != 0)
      pins14[n14++] = most_moved(m, t);
  ASSERT_EQ(n14, m->target_count - 2);
  double *pos14 = positions_at(m->positions, pins14, n14);
  p = solve_params(pins14, pos14, n14, "");
  cJSON *res = harness_rpc_ok(&h, "blend.solve", p);
  /* the distinct targets less those two, and cheekPuff, cheek_puff's copy, solved in its place */
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(res, "weights")), solved_count(m) - 2 + 1);
  ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "weights"), "cheek_puff") == NULL);
  ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "weights"), "nose_wide") == NULL);
  cJSON_Delete(res);
  free(p);
  free(pins14);
  free(pos14);
  /* Too many pins. */
  uint32_t n = 10001;
  uint32_t *many = malloc(sizeof(uint32_t) * n);
  double *mpos = calloc(3 * (size_t)n, sizeof(double));
  for (uint32_t k = 0; k < n; k++) many[k] = k;
  p = solve_params(many, mpos, n, "");
  ASSERT_EQ(harness_rpc_err(&h, "blend.solve", p, msg, sizeof(msg)), -32007);
  ASSERT_STR_CONTAINS(msg, "at most 10000");
  free(p);
  free(many);
  free(mpos);
  free(pins);
  free(pos);
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
}

TEST(blend_drags_with_the_same_pins_reuse_one_factorisation) {
  harness h;
  harness_start(&h, "demo", demo_args);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  uint32_t T = m->target_count, *pins = malloc(sizeof(uint32_t) * (T + 1));
  for (uint32_t t = 0; t < T; t++) pins[t] = most_moved(m, t);
  double *pos = positions_at(m->positions, pins, T), *pos1 = malloc(sizeof(double) * 3 * (T + 1));
  double f0 = stat_of(&h, "blend_factorisations"), s0 = stat_of(&h, "blend_solves");
  /* A drag: the same pins, moving. */
  for (int d = 0; d < 6; d++) {
    for (uint32_t k = 0; k < T; k++) pos[3 * k + 1] += 0.0005;
    char *p = solve_params(pins, pos, T, "");
    cJSON_Delete(harness_rpc_ok(&h, "blend.solve", p));
    free(p);
    ASSERT_EQ(stat_of(&h, "blend_factorisations"), f0 + 1);
  }
  ASSERT_EQ(stat_of(&h, "blend_solves"), s0 + 6);
  /* Another λ is another system; back to λ = 0 is the cached one. */
  char *p = solve_params(pins, pos, T, ",\"regularization\":1e-6");
  cJSON_Delete(harness_rpc_ok(&h, "blend.solve", p));
  free(p);
  ASSERT_EQ(stat_of(&h, "blend_factorisations"), f0 + 2);
  p = solve_params(pins, pos, T, "");
  cJSON_Delete(harness_rpc_ok(&h, "blend.solve", p));
  free(p);
  ASSERT_EQ(stat_of(&h, "blend_factorisations"), f0 + 2);
  /* Seven more pin sets (each with one extra pin): the cache holds 8, so the least recently used
   * (the λ = 1e-6 one) goes, and the λ = 0 one stays. */
  memcpy(pos1, pos, sizeof(double) * 3 * T);
  for (uint32_t k = 1; k <= 7; k++) {
    pins[T] = pins[k];
    memcpy(pos1 + 3 * T, pos + 3 * k, sizeof(double) * 3);
    p = solve_params(pins, pos1, T + 1, "");
    cJSON_Delete(harness_rpc_ok(&h, "blend.solve", p));
    free(p);
  }
  ASSERT_EQ(stat_of(&h, "blend_factorisations"), f0 + 9);
  p = solve_params(pins, pos, T, "");
  cJSON_Delete(harness_rpc_ok(&h, "blend.solve", p));
  free(p);
  ASSERT_EQ(stat_of(&h, "blend_factorisations"), f0 + 9);
  p = solve_params(pins, pos, T, ",\"regularization\":1e-6");
  cJSON_Delete(harness_rpc_ok(&h, "blend.solve", p));
  free(p);
  ASSERT_EQ(stat_of(&h, "blend_factorisations"), f0 + 10);
  free(pins);
  free(pos);
  free(pos1);
  mesh_destroy(m);
  harness_stop(&h);
}

TEST(blend_solves_sent_at_once_coalesce_and_are_all_answered) {
  harness h;
  harness_start(&h, "demo", demo_args);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  uint32_t T = m->target_count, *pins = all_pins(m);
  double *pos = positions_at(m->positions, pins, T);
  client_conn rpc;
  char err[256];
  ASSERT_OK(client_connect(&rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  const int N = 30;
  size_t cap = (size_t)N * 16384, n = 0; /* a request pins one vertex per target: 68 on the demo head */
  char *batch = malloc(cap), *last = NULL;
  for (int d = 1; d <= N; d++) {
    for (uint32_t k = 0; k < T; k++) pos[3 * k + 1] += 0.0002;
    char *p = solve_params(pins, pos, T, "");
    n += (size_t)snprintf(batch + n, cap - n, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"blend.solve\",\"params\":%s}\n",
                          d, p);
    if (d == N) last = p;
    else free(p);
  }
  ASSERT_OK(client_send(&rpc, batch, n), NULL);
  uint64_t prev = 0;
  cJSON *final = NULL;
  for (int i = 0; i < N; i++) {
    cJSON *o = read_response(&rpc);
    const cJSON *res = cJSON_GetObjectItem(o, "result");
    ASSERT(res != NULL);
    uint64_t ver = (uint64_t)cJSON_GetObjectItem(res, "version")->valuedouble;
    ASSERT(ver >= prev);
    prev = ver;
    if (cJSON_GetObjectItem(o, "id")->valueint == N) final = cJSON_Duplicate(res, 1);
    cJSON_Delete(o);
  }
  ASSERT(final != NULL);
  double solves = stat_of(&h, "blend_solves");
  fprintf(stderr, "%d requests, %.0f solves\n", N, solves);
  ASSERT(solves >= 1 && solves < N); /* coalesced: all 30 arrive in one read */
  /* The last answer is the state now, and is what the last request alone gives. */
  cJSON *now = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  for (uint32_t t = 0; t < T; t++)
    ASSERT(is_copy(m, t) || (float)weight_in(now, m->targets[t].name) == (float)weight_in(final, m->targets[t].name));
  cJSON_Delete(now);
  cJSON *again = harness_rpc_ok(&h, "blend.solve", last);
  ASSERT_EQ(cJSON_GetObjectItem(again, "version")->valuedouble, prev); /* nothing changed */
  for (uint32_t t = 0; t < T; t++)
    ASSERT(is_copy(m, t) || weight_in(again, m->targets[t].name) == weight_in(final, m->targets[t].name));
  cJSON_Delete(again);
  cJSON_Delete(final);
  free(last);
  free(batch);
  free(pins);
  free(pos);
  mesh_destroy(m);
  client_close(&rpc);
  harness_stop(&h);
}

TEST(a_solve_whose_session_closes_before_it_ends_is_answered_unknown_session) {
  harness h;
  harness_start(&h, "demo", demo_args);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  uint32_t T = m->target_count, *pins = all_pins(m);
  double *pos = positions_at(m->positions, pins, T);
  char *p = solve_params(pins, pos, T, "");
  client_conn rpc;
  char err[256];
  ASSERT_OK(client_connect(&rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  /* Both lines in one write: the close is handled before the solve job can end. */
  size_t cap = strlen(p) + 512;
  char *batch = malloc(cap);
  size_t n = (size_t)snprintf(batch, cap,
                              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"blend.solve\",\"params\":%s}\n"
                              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"blend.fit\",\"params\":{\"session\":\"demo\",\"shape\":\"sculpt\"}}\n"
                              "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session.close\",\"params\":{\"session\":\"demo\"}}\n",
                              p);
  ASSERT_OK(client_send(&rpc, batch, n), NULL);
  for (int i = 0; i < 3; i++) {
    cJSON *o = read_response(&rpc);
    int id = cJSON_GetObjectItem(o, "id")->valueint;
    const cJSON *e = cJSON_GetObjectItem(o, "error");
    if (id == 3) {
      ASSERT(cJSON_GetObjectItem(o, "result") != NULL);
    } else {
      ASSERT(e != NULL);
      ASSERT_EQ(cJSON_GetObjectItem(e, "code")->valueint, -32001);
      ASSERT_STR_CONTAINS(cJSON_GetObjectItem(e, "message")->valuestring, "closed");
    }
    cJSON_Delete(o);
  }
  free(batch);
  free(p);
  free(pins);
  free(pos);
  mesh_destroy(m);
  client_close(&rpc);
  harness_stop(&h); /* exits cleanly: the factor and the jobs' state are freed (ASan checks) */
}

/* ---- fit ---------------------------------------------------------------------------------- */

TEST(blend_fit_of_a_sculpt_made_from_a_target_returns_its_weight) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  const mesh *m = r.mesh;
  uint32_t T = m->target_count;
  /* The sculpt layer holds exactly 0.6 × cheek_puff's deltas; smile_R is at 0.3. */
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_R\":0.3}}"));
  const mesh_target *mt = &m->targets[mesh_find_target(m, "cheek_puff")];
  size_t cap = 64 + (size_t)mt->count * 80, len = 0;
  char *p = malloc(cap);
  len += (size_t)snprintf(p + len, cap - len, "{\"session\":\"demo\",\"offsets\":{");
  for (uint32_t e = 0; e < mt->count; e++)
    len += (size_t)snprintf(p + len, cap - len, "%s\"%u\":[%.9g,%.9g,%.9g]", e ? "," : "", mt->indices[e],
                            0.6 * mt->deltas[3 * e], 0.6 * mt->deltas[3 * e + 1], 0.6 * mt->deltas[3 * e + 2]);
  snprintf(p + len, cap - len, "}}");
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", p));
  free(p);
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  int sculpted = cJSON_GetObjectItem(st, "sculpted_vertices")->valueint;
  uint64_t before = (uint64_t)cJSON_GetObjectItem(st, "version")->valuedouble;
  cJSON_Delete(st);
  ASSERT(sculpted > 100);

  cJSON *res = harness_rpc_ok(&h, "blend.fit", "{\"session\":\"demo\",\"shape\":\"sculpt\"}");
  ASSERT(cJSON_GetObjectItem(res, "version") == NULL); /* not applied */
  for (uint32_t t = 0; t < T; t++) {
    const char *name = m->targets[t].name;
    if (is_copy(m, t)) continue;
    double want = strcmp(name, "cheek_puff") == 0 ? 0.6 : strcmp(name, "smile_R") == 0 ? 0.3 : 0.0;
    ASSERT_NEAR(weight_in(res, name), want, 1e-4);
  }
  ASSERT(cJSON_GetObjectItem(res, "rms")->valuedouble < 1e-6);
  ASSERT(cJSON_GetObjectItem(res, "max_error")->valuedouble < 1e-5);
  cJSON_Delete(res);
  /* Applied: one change of weights; the sculpt layer stays as it was. */
  res = harness_rpc_ok(&h, "blend.fit", "{\"session\":\"demo\",\"shape\":\"sculpt\",\"apply\":true}");
  uint64_t applied = (uint64_t)cJSON_GetObjectItem(res, "version")->valuedouble;
  ASSERT_EQ(applied, before + 1);
  harness_follow(&v, &r, applied, 10000);
  for (uint32_t t = 0; t < T; t++) ASSERT(is_copy(m, t) ? r.weights[t] == 0.0f : r.weights[t] == (float)weight_in(res, m->targets[t].name));
  cJSON_Delete(res);
  st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "sculpted_vertices")->valueint, sculpted);
  cJSON_Delete(st);
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
}

TEST(blend_fit_of_a_file_recovers_its_weights_and_refuses_another_vertex_count) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char path[1024], params[1400], msg[512];
  /* GLB keeps the vertex order through export and import (assimp reorders an OBJ's vertices). */
  snprintf(path, sizeof(path), "%s/expression.glb", test_tmpdir());
  cJSON_Delete(harness_rpc_ok(&h, "weights.set",
                              "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5,\"brow_down_L\":0.8,\"mouth_left\":0.2}}"));
  harness_download_file(&h, "demo", path); /* into a mesh folder of the server's */
  cJSON_Delete(harness_rpc_ok(&h, "weights.set",
                              "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0,\"brow_down_L\":0,\"mouth_left\":0}}"));
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"shape\":\"%s\",\"apply\":true}", harness_mesh_name(path));
  cJSON *res = harness_rpc_ok(&h, "blend.fit", params);
  cJSON *list = harness_rpc_ok(&h, "targets.list", "{\"session\":\"demo\"}");
  const cJSON *t;
  cJSON_ArrayForEach(t, list) {
    const char *name = cJSON_GetObjectItem(t, "name")->valuestring;
    if (!cJSON_GetObjectItem(cJSON_GetObjectItem(res, "weights"), name)) continue; /* a copy (is_copy), left out */
    double want = strcmp(name, "jaw_open") == 0 ? 0.5 : strcmp(name, "brow_down_L") == 0 ? 0.8
                  : strcmp(name, "mouth_left") == 0 ? 0.2 : 0.0;
    ASSERT_NEAR(weight_in(res, name), want, 1e-4);
    ASSERT((float)cJSON_GetObjectItem(t, "weight")->valuedouble == (float)weight_in(res, name)); /* applied */
  }
  cJSON_Delete(list);
  cJSON_Delete(res);
  /* A mesh of another vertex count, and a file that does not exist. */
  static const char tri[] = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";
  const char *small = test_write_file("triangle.obj", tri, sizeof(tri) - 1);
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"shape\":\"%s\"}", harness_mesh_name(small));
  ASSERT_EQ(harness_rpc_err(&h, "blend.fit", params, msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "has 3 vertices");
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"shape\":\"none.obj\"}");
  ASSERT_EQ(harness_rpc_err(&h, "blend.fit", params, msg, sizeof(msg)), -32004);
  harness_stop(&h);
}

/* ---- the binary port ------------------------------------------------------------------------ */

TEST(a_binary_blend_pins_edit_streams_weights_and_a_bad_pin_names_its_request) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn ed, v;
  client_replica er, vr;
  harness_join(&h, &v, &vr, "demo", PROTO_ROLE_VIEWER, NULL);
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  const mesh *m = vr.mesh;
  uint32_t T = m->target_count, *pins = all_pins(m);
  /* Where the pins are at smile_R 0.4 and brow_up_L 0.9, by the CPU reference. */
  float *w = calloc(T, sizeof(float)), *shape = malloc(sizeof(float) * 3 * m->vertex_count);
  w[mesh_find_target(m, "smile_R")] = 0.4f;
  w[mesh_find_target(m, "brow_up_L")] = 0.9f;
  mesh_evaluate(m, w, NULL, shape);
  proto_blend_pin *bp = malloc(sizeof(*bp) * T);
  for (uint32_t k = 0; k < T; k++) {
    bp[k].vertex = pins[k];
    memcpy(bp[k].position, shape + 3 * (size_t)pins[k], sizeof(bp[k].position));
  }
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_edit_blend_pins(&b, 51, PROTO_BLEND_KEEP_CLOSE, 0.0f, T, bp), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  /* Success is silent; the viewer gets one WEIGHTS frame. */
  char err[256];
  proto_header hd;
  const uint8_t *payload;
  ASSERT_EQ(client_read_frame(&v, 20000, &hd, &payload, err, sizeof(err)), 0);
  ASSERT_EQ(hd.type, PROTO_WEIGHTS);
  ASSERT_EQ(hd.session_version, 1);
  ASSERT_OK(client_replica_apply(&vr, &hd, payload, err, sizeof(err)), err);
  for (uint32_t t = 0; t < T; t++) ASSERT_NEAR(vr.weights[t], w[t], 1e-4);
  /* A pin on a vertex no target moves, a vertex past the mesh, a NaN: ERROR naming the request. */
  uint8_t *moved = calloc(m->vertex_count, 1);
  for (uint32_t t = 0; t < T; t++)
    for (uint32_t e = 0; e < m->targets[t].count; e++) moved[m->targets[t].indices[e]] = 1;
  uint32_t still = 0;
  while (moved[still]) still++;
  free(moved);
  uint32_t rid;
  bp[3].vertex = still;
  ASSERT_OK(proto_encode_edit_blend_pins(&b, 52, 0, 0.0f, T, bp), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 10000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 52);
  bp[3].vertex = m->vertex_count;
  ASSERT_OK(proto_encode_edit_blend_pins(&b, 53, 0, 0.0f, T, bp), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 10000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 53);
  bp[3].vertex = pins[3];
  ASSERT_OK(proto_encode_edit_blend_pins(&b, 54, 0, 0.0f, T, bp), NULL);
  uint32_t nan_bits = 0x7fc00000u; /* the first pin's x, written over after encoding */
  memcpy(b.data + PROTO_HEADER_SIZE + 18, &nan_bits, 4);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  ASSERT_EQ(harness_expect_error(&ed, PROTO_ERROR, &rid, 10000), PROTO_ERR_INVALID);
  ASSERT_EQ(rid, 54);
  /* Nothing of the refused edits reached the session. */
  cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(st, "version")->valueint, 1);
  cJSON_Delete(st);
  proto_buf_fini(&b);
  free(bp);
  free(w);
  free(shape);
  free(pins);
  client_replica_fini(&er);
  client_replica_fini(&vr);
  client_close(&ed);
  client_close(&v);
  harness_stop(&h);
}
