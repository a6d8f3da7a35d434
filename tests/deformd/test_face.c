/*
 * test_face.c — live face input (--vmc-port, --livelink-port): a standard-library Python sender
 * (tests/deformd/face_sender.py, OSC and Live Link Face frames encoded with struct from the
 * published layouts) drives a real deformd at 60 Hz for 5 s.
 *
 * The oracles: the values the sender logged for each frame (its own closed form), pushed
 * through the mapping here (gain · value + offset, summed per target, held to [0, 1]); the
 * frames a viewer receives (every WEIGHTS state must be one sent frame's, in order, and the last
 * the last); the sender's own count of the malformed datagrams it sent; the store's SQLite file
 * read directly after the server stopped.
 *
 * DOES NOT time anything: the latency budget is deform-bench face's (docs/performance.md).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "srv_op.h"
#include "test.h"

/* ---- the mapping the tests set, and the same computed here ---------------------------------------- */

typedef struct map_row {
  const char *source, *target;
  float gain, offset;
} map_row;

/* One input driving several targets (browInnerUp), several inputs one target (cheek_puff), a
 * gain and an offset (eyeBlinkLeft), a plain rename (jawOpen). */
static const map_row MAP[] = {
    {"jawOpen", "jaw_open", 1, 0},
    {"eyeBlinkLeft", "blink_L", 0.5f, 0.25f},
    {"browInnerUp", "brow_up_L", 1, 0},
    {"browInnerUp", "brow_up_R", 0.5f, 0},
    {"cheekPuff", "cheek_puff", 1, 0},
    {"mouthPucker", "cheek_puff", 0.25f, 0},
};
#define MAP_ROWS (sizeof(MAP) / sizeof(MAP[0]))
static const char *const MAPPED[] = {"jaw_open", "blink_L", "brow_up_L", "brow_up_R", "cheek_puff"};
#define MAPPED_N 5
static const char MAP_JSON[] =
    "{\"session\":\"demo\",\"mapping\":{\"map\":{\"jawOpen\":\"jaw_open\","
    "\"eyeBlinkLeft\":[{\"target\":\"blink_L\",\"gain\":0.5,\"offset\":0.25}],"
    "\"browInnerUp\":[{\"target\":\"brow_up_L\"},{\"target\":\"brow_up_R\",\"gain\":0.5}],"
    "\"cheekPuff\":\"cheek_puff\",\"mouthPucker\":[{\"target\":\"cheek_puff\",\"gain\":0.25}]}}}";

typedef struct sent_frame {
  float expect[MAPPED_N]; /* the mapped targets' weights this frame gives */
} sent_frame;

static float clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

/* The sender's log: one JSON line per frame. Returns the frames (caller frees). */
static sent_frame *read_log(const char *path, uint32_t *count) {
  size_t len;
  char *text = (char *)test_read_file(path, &len), *at = text, *end = text + len, *line;
  sent_frame *out = calloc(1000, sizeof(sent_frame));
  uint32_t n = 0;
  while ((line = test_next_line(&at, end)) != NULL && n < 1000) {
    cJSON *j = cJSON_Parse(line);
    ASSERT(j != NULL);
    const cJSON *v = cJSON_GetObjectItem(j, "values");
    for (int t = 0; t < MAPPED_N; t++) {
      float sum = 0;
      int reached = 0;
      for (size_t r = 0; r < MAP_ROWS; r++) {
        if (strcmp(MAP[r].target, MAPPED[t]) != 0) continue;
        const cJSON *x = cJSON_GetObjectItem(v, MAP[r].source);
        if (!x) continue;
        sum += MAP[r].gain * (float)x->valuedouble + MAP[r].offset;
        reached = 1;
      }
      ASSERT(reached);
      out[n].expect[t] = clamp01(sum);
    }
    cJSON_Delete(j);
    n++;
  }
  free(text);
  *count = n;
  return out;
}

/* ---- the sender ---------------------------------------------------------------------------------------- */

static pid_t spawn_sender(const char *const *args) {
  char script[1200];
  snprintf(script, sizeof(script), "%s/tests/deformd/face_sender.py", getenv("DEFORMD_SOURCE_DIR"));
  const char *argv[16] = {"python3", script};
  int n = 2;
  for (; args[n - 2] && n < 15; n++) argv[n] = args[n - 2];
  argv[n] = NULL;
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    execvp("python3", (char *const *)argv);
    _exit(127);
  }
  return pid;
}

/* ---- small helpers ------------------------------------------------------------------------------------- */

static int face_port(harness *h, const char *kind) {
  cJSON *r = harness_rpc_ok(h, "face.list", "{}");
  const cJSON *in;
  int port = -1;
  cJSON_ArrayForEach(in, cJSON_GetObjectItem(r, "inputs"))
    if (strcmp(cJSON_GetObjectItem(in, "kind")->valuestring, kind) == 0) port = cJSON_GetObjectItem(in, "port")->valueint;
  cJSON_Delete(r);
  ASSERT(port > 0);
  return port;
}

/* An input's counter from face.list. */
static double face_counter(harness *h, const char *kind, const char *counter) {
  cJSON *r = harness_rpc_ok(h, "face.list", "{}");
  const cJSON *in;
  double v = -1;
  cJSON_ArrayForEach(in, cJSON_GetObjectItem(r, "inputs"))
    if (strcmp(cJSON_GetObjectItem(in, "kind")->valuestring, kind) == 0) v = cJSON_GetObjectItem(in, counter)->valuedouble;
  cJSON_Delete(r);
  return v;
}

static int target_index(const client_replica *r, const char *name) {
  for (uint32_t t = 0; t < r->mesh->target_count; t++)
    if (strcmp(r->mesh->targets[t].name, name) == 0) return (int)t;
  test__fail(__FILE__, __LINE__, "no target %s", name);
  return -1;
}

static uint64_t version_of(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

/* ---- 60 Hz for 5 s, seen by a viewer ------------------------------------------------------------------- */

typedef struct follow_result {
  uint32_t states;     /* WEIGHTS states seen, each matched to a sent frame */
  uint32_t last_frame; /* the sent frame the last state is */
} follow_result;

/* Runs the sender for `kind` while a viewer follows the session; every state it sees must be a
 * sent frame's, in order. */
static follow_result drive_and_follow(harness *h, const char *kind, const char *log, int loose) {
  harness_rpc_done(h, "face.map_set", MAP_JSON);
  client_conn c;
  client_replica r;
  harness_join(h, &c, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  int idx[MAPPED_N];
  for (int t = 0; t < MAPPED_N; t++) idx[t] = target_index(&r, MAPPED[t]);
  char port[16];
  snprintf(port, sizeof(port), "%d", face_port(h, kind));
  /* the mapped names, one the default mapping takes by name where the head has it, one nobody takes */
  const char *names = "jawOpen,eyeBlinkLeft,browInnerUp,cheekPuff,mouthPucker,mouthSmileLeft,noSuchShape";
  const char *args[] = {kind, port, "--hz", "60", "--seconds", "5", "--names", names, "--log", log,
                        loose ? "--loose" : NULL, NULL};
  pid_t pid = spawn_sender(args);
  /* what the viewer saw: the mapped weights after each WEIGHTS frame */
  float (*seen)[MAPPED_N] = calloc(4000, sizeof(*seen));
  uint32_t nseen = 0;
  int done = 0, st;
  for (int quiet = 0; quiet < 1500;) {
    proto_header hd;
    const uint8_t *p;
    char err[256];
    int rc = client_read_frame(&c, 50, &hd, &p, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) {
      if (!done && waitpid(pid, &st, WNOHANG) == pid) {
        ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        done = 1;
      }
      quiet += done ? 50 : 0;
      continue;
    }
    ASSERT_OK(rc, err);
    ASSERT_OK(client_replica_apply(&r, &hd, p, err, sizeof(err)), err);
    if (hd.type == PROTO_WEIGHTS && nseen < 4000) {
      for (int t = 0; t < MAPPED_N; t++) seen[nseen][t] = r.weights[idx[t]];
      nseen++;
    }
    quiet = 0;
  }
  ASSERT(done);
  uint32_t nsent;
  sent_frame *sent = read_log(log, &nsent);
  ASSERT_EQ(nsent, 300);
  follow_result fr = {0, 0};
  uint32_t j = 0;
  for (uint32_t k = 0; k < nseen; k++) {
    while (j < nsent) {
      int same = 1;
      for (int t = 0; t < MAPPED_N; t++) same = same && fabsf(sent[j].expect[t] - seen[k][t]) < 1e-6f;
      if (same) break;
      j++;
    }
    if (j == nsent) test__fail(__FILE__, __LINE__, "state %u seen by the viewer is no sent frame's after frame %u", k, fr.last_frame);
    fr.last_frame = j;
  }
  fr.states = nseen;
  ASSERT_EQ(fr.last_frame, nsent - 1); /* the newest frame always lands */
  free(seen);
  free(sent);
  client_replica_fini(&r);
  client_close(&c);
  return fr;
}

static void expect_sixty_hz(harness *h, const char *kind, const follow_result *fr) {
  /* every frame was received and applied or merged into a newer one: none was lost */
  ASSERT_EQ(face_counter(h, kind, "packets") >= 300, 1);
  ASSERT_EQ(face_counter(h, kind, "frames"), 300);
  ASSERT_EQ(face_counter(h, kind, "applied") + face_counter(h, kind, "merged"), 300);
  ASSERT_EQ(face_counter(h, kind, "applied"), fr->states);
  ASSERT_EQ(face_counter(h, kind, "malformed"), 0);
}

/* deformd --demo with one input on, a 60 Hz sender for 5 s, then the counters checked. */
static follow_result sixty_hz_run(const char *kind, const char *flag, const char *log, int loose) {
  harness h;
  const char *args[] = {"--demo", flag, "0", NULL};
  harness_start(&h, "demo", args);
  follow_result fr = drive_and_follow(&h, kind, test_tmp_path(log), loose);
  expect_sixty_hz(&h, kind, &fr);
  harness_stop(&h);
  return fr;
}

TEST(a_vmc_sender_at_60_hz_for_5_s_drives_the_session_through_the_mapping_and_no_frame_is_lost) {
  follow_result fr = sixty_hz_run("vmc", "--vmc-port", "vmc.log", 0);
  ASSERT(fr.states >= 150); /* most frames were applied on their own (60 Hz against --face-rate 60) */
}

TEST(a_vmc_sender_of_one_message_per_datagram_is_the_same_as_bundles) {
  sixty_hz_run("vmc", "--vmc-port", "loose.log", 1);
}

TEST(a_live_link_face_sender_at_60_hz_for_5_s_drives_the_session_through_the_mapping) {
  sixty_hz_run("livelink", "--livelink-port", "livelink.log", 0);
}

TEST(a_faster_source_is_merged_at_the_rate_and_its_newest_frame_lands) {
  harness h;
  const char *args[] = {"--demo", "--vmc-port", "0", "--face-rate", "10", NULL};
  harness_start(&h, "demo", args);
  follow_result fr = drive_and_follow(&h, "vmc", test_tmp_path("fast.log"), 0);
  /* 300 frames in 5 s at 10 applies a second: about 50 applies, the rest merged, none lost */
  ASSERT_EQ(face_counter(&h, "vmc", "applied") + face_counter(&h, "vmc", "merged"), 300);
  ASSERT(face_counter(&h, "vmc", "applied") <= 5 * 10 + 2);
  ASSERT(fr.states <= 5 * 10 + 2);
  harness_stop(&h);
}

/* ---- the demo head with no mapping ------------------------------------------------------------------ */

TEST(a_phone_drives_the_demo_heads_arkit_targets_and_vrm_presets_with_no_mapping) {
  harness h;
  const char *args[] = {"--demo", "--livelink-port", "0", "--vmc-port", "0", NULL};
  harness_start(&h, "demo", args);
  char port[16];
  snprintf(port, sizeof(port), "%d", face_port(&h, "livelink"));
  const char *log = test_tmp_path("phone.log");
  const char *ll[] = {"livelink", port, "--hz", "60", "--seconds", "1", "--log", log, NULL};
  int st;
  pid_t pid = spawn_sender(ll);
  ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int tries = 0; tries < 300 && face_counter(&h, "livelink", "frames") < 60; tries++) usleep(10000);
  ASSERT_EQ(face_counter(&h, "livelink", "frames"), 60);
  usleep(100000); /* the last frame's period */
  /* the last frame's 52 values, each on the target of its name (the log has them by name) */
  size_t len;
  char *text = (char *)test_read_file(log, &len), *at = text, *end = text + len, *line, *last = NULL;
  while ((line = test_next_line(&at, end)) != NULL) last = line;
  cJSON *frame = cJSON_Parse(last), *w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  const cJSON *v;
  int checked = 0;
  cJSON_ArrayForEach(v, cJSON_GetObjectItem(frame, "values")) {
    const cJSON *got = cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), v->string);
    if (!got) test__fail(__FILE__, __LINE__, "the demo head has no target %s", v->string);
    ASSERT_NEAR(got->valuedouble, v->valuedouble, 1e-6);
    checked++;
  }
  ASSERT_EQ(checked, 52);
  cJSON_Delete(frame);
  cJSON_Delete(w);
  free(text);
  /* VRM 1.0's blink (VMC) closes both ARKit eyes */
  snprintf(port, sizeof(port), "%d", face_port(&h, "vmc"));
  const char *vmc[] = {"vmc", port, "--hz", "10", "--seconds", "0.1", "--names", "blink", "--log",
                       test_tmp_path("blink.log"), NULL};
  pid = spawn_sender(vmc);
  ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int tries = 0; tries < 300 && face_counter(&h, "vmc", "applied") < 1; tries++) usleep(10000);
  w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  double blink = 1.0 / 1024; /* face_sender.py's value(0, 0) */
  ASSERT_NEAR(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), "eyeBlinkLeft")->valuedouble, blink, 1e-7);
  ASSERT_NEAR(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), "eyeBlinkRight")->valuedouble, blink, 1e-7);
  cJSON_Delete(w);
  harness_stop(&h);
}

/* ---- malformed datagrams ---------------------------------------------------------------------------------- */

TEST(malformed_face_datagrams_are_counted_and_dropped_without_disturbing_the_session_or_other_clients) {
  harness h;
  const char *args[] = {"--demo", "--vmc-port", "0", "--livelink-port", "0", NULL};
  harness_start(&h, "demo", args);
  client_conn c;
  client_replica r;
  harness_join(&h, &c, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  uint64_t v0 = version_of(&h);
  const char *kinds[] = {"vmc", "livelink"};
  for (int k = 0; k < 2; k++) {
    char port[16], out[4096];
    snprintf(port, sizeof(port), "%d", face_port(&h, kinds[k]));
    char script[1200], cmd[1400];
    snprintf(script, sizeof(script), "%s/tests/deformd/face_sender.py", getenv("DEFORMD_SOURCE_DIR"));
    snprintf(cmd, sizeof(cmd), "python3 %s malformed %s %s", script, kinds[k], port);
    FILE *f = popen(cmd, "r");
    ASSERT(f != NULL);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    ASSERT_EQ(pclose(f), 0);
    cJSON *sent = cJSON_Parse(out);
    ASSERT(sent != NULL);
    /* UDP on loopback delivers them; wait until the server has counted every one */
    const char *reasons[] = {"malformed", "nonfinite", "too_many_names"};
    for (int q = 0; q < 3; q++) {
      const cJSON *want = cJSON_GetObjectItem(sent, reasons[q]);
      double w = want ? want->valuedouble : 0;
      for (int tries = 0; tries < 200 && face_counter(&h, kinds[k], reasons[q]) < w; tries++) usleep(10000);
      if (face_counter(&h, kinds[k], reasons[q]) != w)
        test__fail(__FILE__, __LINE__, "%s %s: counted %.0f, sent %.0f", kinds[k], reasons[q],
                   face_counter(&h, kinds[k], reasons[q]), w);
    }
    cJSON_Delete(sent);
  }
  /* the one well-formed frame named only an unknown name: counted, nothing applied */
  for (int tries = 0; tries < 200 && face_counter(&h, "vmc", "unknown_names") < 1; tries++) usleep(10000);
  ASSERT_EQ(face_counter(&h, "vmc", "unknown_names"), 1);
  ASSERT_EQ(face_counter(&h, "vmc", "applied"), 0);
  ASSERT_EQ(face_counter(&h, "livelink", "applied"), 0);
  ASSERT_EQ(version_of(&h), v0);
  /* the viewer is still served and an editor still edits */
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5}}");
  harness_follow(&c, &r, v0 + 1, 5000);
  ASSERT_NEAR(r.weights[target_index(&r, "jaw_open")], 0.5, 0);
  client_replica_fini(&r);
  client_close(&c);
  harness_stop(&h);
}

TEST(face_map_set_refuses_a_bad_mapping_with_a_reason_and_keeps_the_old_one) {
  harness h;
  const char *args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "face.map_set", MAP_JSON);
  char msg[512];
  const char *bad[] = {
      "{\"session\":\"demo\",\"mapping\":{\"map\":{\"jawOpen\":[{\"gain\":2}]}}}",
      "{\"session\":\"demo\",\"mapping\":{\"map\":{\"jawOpen\":{\"target\":\"jaw_open\",\"gain\":\"x\"}}}}",
      "{\"session\":\"demo\",\"mapping\":{\"identity\":1}}",
      "{\"session\":\"demo\",\"mapping\":[]}",
      "{\"session\":\"demo\",\"mapping\":{\"map\":{\"jawOpen\":{\"target\":\"jaw_open\",\"offset\":1e9}}}}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ASSERT_EQ(harness_rpc_err(&h, "face.map_set", bad[i], msg, sizeof(msg)), -32602);
    ASSERT_STR_CONTAINS(msg, "invalid params");
  }
  cJSON *m = harness_rpc_ok(&h, "face.map_get", "{\"session\":\"demo\"}");
  const cJSON *brow = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "map"), "browInnerUp");
  ASSERT_EQ(cJSON_GetArraySize(brow), 2);
  ASSERT_NEAR(cJSON_GetObjectItem(cJSON_GetArrayItem(brow, 1), "gain")->valuedouble, 0.5, 0);
  cJSON_Delete(m);
  harness_stop(&h);
}

/* ---- live input is not history ------------------------------------------------------------------------------ */

static int count_rows(const char *db, const char *sql) {
  sqlite3 *d;
  ASSERT_EQ(sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st;
  ASSERT_EQ(sqlite3_prepare_v2(d, sql, -1, &st, NULL), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  int n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(d);
  return n;
}

TEST(five_seconds_of_live_input_leave_one_history_step_and_a_few_stored_runs_that_restore) {
  harness h;
  const char *dir = test_tmp_path("face-store");
  const char *args[] = {"--data", dir, "--demo", "--vmc-port", "0", NULL};
  harness_start(&h, "demo", args);
  const char *log = test_tmp_path("store.log");
  follow_result fr = drive_and_follow(&h, "vmc", log, 0);
  ASSERT(fr.states > 0);
  /* The take ended (idle for 1 s: drive_and_follow waited 1.5 s after the sender): one step. */
  cJSON *l = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\"}");
  const cJSON *steps = cJSON_GetObjectItem(l, "steps");
  ASSERT_EQ(cJSON_GetArraySize(steps), 1);
  const cJSON *st = cJSON_GetArrayItem(steps, 0);
  ASSERT(strcmp(cJSON_GetObjectItem(st, "kind")->valuestring, "face") == 0);
  ASSERT(strncmp(cJSON_GetObjectItem(st, "author")->valuestring, "vmc:", 4) == 0);
  ASSERT_EQ(cJSON_GetObjectItem(st, "operations")->valuedouble, fr.states);
  cJSON_Delete(l);
  uint64_t v = version_of(&h);
  ASSERT_EQ(v, fr.states);
  /* an answer that waits for the store's commit (an empty weights.set applies nothing), then
   * kill -9: what the store holds is what restarts */
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{}}");
  harness_kill(&h);
  char db[1200];
  snprintf(db, sizeof(db), "%s/deformd.sqlite3", dir);
  int rows = count_rows(db, "SELECT count(*) FROM ops");
  /* a run per --face-flush-ms (5 s) of the take and one at its end: not one per frame */
  if (rows < 1 || rows > 3) test__fail(__FILE__, __LINE__, "%d stored records for %u frames", rows, fr.states);
  char by_face[96];
  snprintf(by_face, sizeof(by_face), "SELECT count(*) FROM ops WHERE kind = %d", (int)SRV_CAUSE_FACE);
  ASSERT_EQ(count_rows(db, by_face), rows);
  ASSERT_EQ(count_rows(db, "SELECT max(version) FROM ops"), (int)v);
  ASSERT_EQ(count_rows(db, "SELECT min(first_version) FROM ops"), 1);
  const char *again[] = {"--data", dir, "--demo", NULL};
  harness_start(&h, "demo", again);
  ASSERT_EQ(version_of(&h), v);
  uint32_t nsent;
  sent_frame *sent = read_log(log, &nsent);
  cJSON *w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  for (int t = 0; t < MAPPED_N; t++)
    ASSERT_NEAR(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), MAPPED[t])->valuedouble,
                sent[nsent - 1].expect[t], 1e-6);
  cJSON_Delete(w);
  free(sent);
  l = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\"}");
  steps = cJSON_GetObjectItem(l, "steps");
  ASSERT_EQ(cJSON_GetArraySize(steps), 1);
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 0), "kind")->valuestring, "face") == 0);
  cJSON_Delete(l);
  /* the take is one undo: its author's history.undo takes every target back to 0 */
  harness_stop(&h);
}

/* ---- the mapping is durable ------------------------------------------------------------------------------------ */

TEST(a_face_mapping_set_before_a_kill_9_comes_back_and_drives_the_restarted_session) {
  harness h;
  const char *dir = test_tmp_path("face-map-store");
  const char *args[] = {"--data", dir, "--demo", "--vmc-port", "0", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "face.map_set", MAP_JSON); /* answered once the store has committed it */
  cJSON *before = harness_rpc_ok(&h, "face.map_get", "{\"session\":\"demo\"}");
  harness_kill(&h);
  char db[1200];
  snprintf(db, sizeof(db), "%s/deformd.sqlite3", dir);
  ASSERT_EQ(count_rows(db, "SELECT count(*) FROM face_maps"), 1);
  harness_start(&h, "demo", args);
  cJSON *after = harness_rpc_ok(&h, "face.map_get", "{\"session\":\"demo\"}");
  ASSERT(cJSON_Compare(before, after, 1));
  /* the entries as MAP sets them, not only the same as before */
  const cJSON *map = cJSON_GetObjectItem(after, "map");
  ASSERT_EQ(cJSON_GetArraySize(map), 5);
  const cJSON *blink = cJSON_GetArrayItem(cJSON_GetObjectItem(map, "eyeBlinkLeft"), 0);
  ASSERT(strcmp(cJSON_GetObjectItem(blink, "target")->valuestring, "blink_L") == 0);
  ASSERT_NEAR(cJSON_GetObjectItem(blink, "gain")->valuedouble, 0.5, 0);
  ASSERT_NEAR(cJSON_GetObjectItem(blink, "offset")->valuedouble, 0.25, 0);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(map, "browInnerUp")), 2);
  cJSON_Delete(before);
  cJSON_Delete(after);
  /* datagrams drive the mapped targets: the last frame sent, through MAP, is the session's */
  char port[16];
  snprintf(port, sizeof(port), "%d", face_port(&h, "vmc"));
  const char *log = test_tmp_path("face-map-store.log");
  const char *send[] = {"vmc", port, "--hz", "60", "--seconds", "0.5", "--names",
                        "jawOpen,eyeBlinkLeft,browInnerUp,cheekPuff,mouthPucker", "--log", log, NULL};
  pid_t pid = spawn_sender(send);
  int st;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  uint32_t nsent;
  sent_frame *sent = read_log(log, &nsent);
  ASSERT(nsent > 1);
  /* the newest frame lands at once or at the rate's next token: a bounded wait for it */
  int same = 0;
  for (int tries = 0; tries < 100 && !same; tries++) {
    cJSON *w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
    same = 1;
    for (int t = 0; t < MAPPED_N; t++)
      same = same && fabs(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), MAPPED[t])->valuedouble -
                          sent[nsent - 1].expect[t]) < 1e-6;
    cJSON_Delete(w);
    if (!same) usleep(50000);
  }
  ASSERT(same);
  ASSERT_EQ(face_counter(&h, "vmc", "frames"), nsent);
  free(sent);
  /* the session's row goes with it */
  harness_rpc_done(&h, "session.close", "{\"session\":\"demo\"}");
  harness_stop(&h);
  ASSERT_EQ(count_rows(db, "SELECT count(*) FROM face_maps"), 0);
}

/* ---- capture to playback -------------------------------------------------------------------------------------- */

/* The largest distance between the same vertex of two shapes. */
static double farthest(const float *a, const float *b, uint32_t n) {
  double worst = 0;
  for (uint32_t v = 0; v < n; v++) {
    double dx = a[3 * v] - b[3 * v], dy = a[3 * v + 1] - b[3 * v + 1], dz = a[3 * v + 2] - b[3 * v + 2];
    worst = fmax(worst, sqrt(dx * dx + dy * dy + dz * dz));
  }
  return worst;
}

TEST(a_live_take_recorded_and_compressed_plays_back_within_its_error_bound) {
  harness h;
  const char *args[] = {"--demo", "--vmc-port", "0", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "anim.record_start", "{\"session\":\"demo\",\"clip\":\"take\",\"fps\":30}");
  char port[16];
  snprintf(port, sizeof(port), "%d", face_port(&h, "vmc"));
  /* ARKit names on the head's targets of the same names (the default mapping) */
  const char *send[] = {"vmc", port, "--hz", "60", "--seconds", "2", "--names",
                        "jawOpen,mouthSmileLeft,eyeBlinkLeft,browInnerUp", "--log", test_tmp_path("take.log"), NULL};
  int st;
  pid_t pid = spawn_sender(send);
  ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int tries = 0; tries < 300 && face_counter(&h, "vmc", "frames") < 120; tries++) usleep(10000);
  ASSERT_EQ(face_counter(&h, "vmc", "frames"), 120);
  usleep(300000); /* the last frame applied and sampled a few times */
  uint32_t nv;
  float *live = harness_server_positions(&h, "demo", &nv); /* the take's last shape, live */
  cJSON *r = harness_rpc_ok(&h, "anim.record_stop", "{\"session\":\"demo\"}");
  int frames = cJSON_GetObjectItem(r, "frames")->valueint;
  ASSERT(frames >= 60); /* 2 s and more at 30 fps: the take frame by frame, as recorded */
  cJSON_Delete(r);
  r = harness_rpc_ok(&h, "anim.compress", "{\"session\":\"demo\",\"clip\":\"take\",\"max_error\":0.002}");
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(r, "budget_met")));
  ASSERT(cJSON_GetObjectItem(r, "max_error_relative")->valuedouble <= 0.002);
  double streamed = cJSON_GetObjectItem(r, "streamed_max_error")->valuedouble;
  ASSERT(cJSON_GetObjectItem(r, "streamed_max_error_relative")->valuedouble <= 0.002);
  ASSERT(cJSON_GetObjectItem(r, "components")->valueint < frames);
  cJSON_Delete(r);
  /* the live weights off, then the clip's last frame: the shape is the live one within the bound */
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jawOpen\":0,\"mouthSmileLeft\":0,"
                                      "\"eyeBlinkLeft\":0,\"browInnerUp\":0}}");
  harness_rpc_done(&h, "anim.play", "{\"session\":\"demo\",\"clip\":\"take\",\"loop\":false}");
  harness_rpc_done(&h, "anim.pause", "{\"session\":\"demo\"}");
  char seek[128];
  snprintf(seek, sizeof(seek), "{\"session\":\"demo\",\"frame\":%d}", frames - 1);
  harness_rpc_done(&h, "anim.seek", seek);
  uint32_t np;
  float *played = harness_server_positions(&h, "demo", &np);
  ASSERT_EQ(np, nv);
  double worst = farthest(played, live, nv), moved;
  float *base = NULL;
  /* and the take did move the head: the played frame is not the rest shape */
  harness_rpc_done(&h, "anim.stop", "{\"session\":\"demo\"}");
  base = harness_server_positions(&h, "demo", &np);
  moved = farthest(played, base, nv);
  fprintf(stderr, "take: %d frames, played last frame within %.3g of live (bound %.3g), moved %.3g\n", frames, worst,
          streamed, moved);
  ASSERT(worst <= streamed + 1e-6);
  ASSERT(moved > 10 * streamed);
  /* a second take (a still one), and a crossfade from the first into it */
  harness_rpc_done(&h, "anim.record_start", "{\"session\":\"demo\",\"clip\":\"take2\",\"fps\":30}");
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jawOpen\":0.5}}");
  usleep(200000);
  cJSON_Delete(harness_rpc_ok(&h, "anim.record_stop", "{\"session\":\"demo\"}"));
  harness_rpc_done(&h, "anim.compress", "{\"session\":\"demo\",\"clip\":\"take2\",\"components\":1}");
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jawOpen\":0}}");
  harness_rpc_done(&h, "anim.play", "{\"session\":\"demo\",\"clip\":\"take\"}");
  harness_rpc_done(&h, "anim.blend", "{\"session\":\"demo\",\"clip\":\"take2\",\"duration\":0.2}");
  usleep(600000);
  r = harness_rpc_ok(&h, "anim.list", "{\"session\":\"demo\"}");
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "player"), "clip")->valuestring, "take2") == 0);
  cJSON_Delete(r);
  free(base);
  free(played);
  free(live);
  harness_stop(&h);
}
