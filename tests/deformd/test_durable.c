/*
 * test_durable.c — sessions that survive kill -9 (the SQLite store, restart, checkpoints) and
 * per-author undo, redo and revert. The oracle is what a viewer rebuilds from the wire (the CPU
 * replica of server/client/client_replica.c) and what the clients themselves sent: never the
 * store's own code.
 */
#define _GNU_SOURCE /* prlimit */
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "store_rows.h"
#include "mesh_io.h"
#include "mesh_demo_texclip.h"
#include "test.h"

/* ---- what a viewer sees ------------------------------------------------------------------------- */

typedef struct seen {
  uint64_t version;
  uint32_t nv, nt;
  float *pos, *weights;
  client_target_meta *meta;
  char *targets, *sculpt, *clips;
} seen;

static char *json_of(cJSON *o) {
  char *t = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return t;
}

static void look(harness *h, const char *session, seen *out) {
  memset(out, 0, sizeof(*out));
  client_conn c;
  client_replica r;
  harness_join(h, &c, &r, session, PROTO_ROLE_VIEWER, NULL);
  out->version = r.version;
  out->nv = r.mesh->vertex_count;
  out->nt = r.mesh->target_count;
  out->pos = malloc(sizeof(float) * 3 * out->nv);
  ASSERT_OK(client_replica_positions(&r, out->pos), NULL);
  out->weights = malloc(sizeof(float) * (out->nt + 1));
  out->meta = malloc(sizeof(client_target_meta) * (out->nt + 1));
  memcpy(out->weights, r.weights, sizeof(float) * out->nt);
  memcpy(out->meta, r.meta, sizeof(client_target_meta) * out->nt);
  client_replica_fini(&r);
  client_close(&c);
  char p[512];
  snprintf(p, sizeof(p), "{\"session\":\"%s\"}", session);
  out->targets = json_of(harness_rpc_ok(h, "targets.list", p));
  out->sculpt = json_of(harness_rpc_ok(h, "sculpt.get", p));
  cJSON *anim = harness_rpc_ok(h, "anim.list", p);
  out->clips = json_of(cJSON_DetachItemFromObject(anim, "clips"));
  cJSON_Delete(anim);
}

static void seen_fini(seen *s) {
  free(s->pos);
  free(s->weights);
  free(s->meta);
  free(s->targets);
  free(s->sculpt);
  free(s->clips);
}

/* Bit for bit: positions, weights, target settings, and what the methods report. */
static void assert_same(const seen *a, const seen *b) {
  ASSERT_EQ(a->version, b->version);
  ASSERT_EQ(a->nv, b->nv);
  ASSERT_EQ(a->nt, b->nt);
  ASSERT(memcmp(a->pos, b->pos, sizeof(float) * 3 * a->nv) == 0);
  ASSERT(memcmp(a->weights, b->weights, sizeof(float) * a->nt) == 0);
  for (uint32_t t = 0; t < a->nt; t++) {
    ASSERT(memcmp(&a->meta[t].min, &b->meta[t].min, 4) == 0 && memcmp(&a->meta[t].max, &b->meta[t].max, 4) == 0);
    ASSERT_EQ(a->meta[t].flags, b->meta[t].flags);
    ASSERT_EQ(a->meta[t].driver_count, b->meta[t].driver_count);
  }
  ASSERT(strcmp(a->targets, b->targets) == 0);
  ASSERT(strcmp(a->sculpt, b->sculpt) == 0);
  ASSERT(strcmp(a->clips, b->clips) == 0);
}


/* ---- restart -------------------------------------------------------------------------------------- */

TEST(every_kind_of_operation_survives_kill_9_bit_identical_on_the_demo_head) {
  const char *dir = test_tmp_path("durable-demo");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.8,\"jaw_open\":0.3}}");
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"10\":[0.001,0,0],\"20\":[0,-0.002,0.0005]}}");
  harness_rpc_done(&h, "targets.configure", "{\"session\":\"demo\",\"target\":\"jaw_open\",\"min\":-1,\"max\":2}");
  harness_rpc_done(&h, "targets.configure", "{\"session\":\"demo\",\"target\":\"brow_up_L\",\"muted\":true}");
  harness_rpc_done(&h, "targets.configure", "{\"session\":\"demo\",\"target\":\"cheek_puff\",\"drivers\":[\"smile_L\"]}");
  harness_rpc_done(&h, "deform.begin", "{\"session\":\"demo\",\"gesture\":1,\"pick\":20400,\"handle_radius\":0.01,\"roi_radius\":0.05}");
  harness_rpc_done(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":1,\"translate\":[0,0.01,0]}");
  harness_rpc_done(&h, "deform.drag", "{\"session\":\"demo\",\"gesture\":1,\"translate\":[0.002,0.012,0]}");
  harness_rpc_done(&h, "deform.end", "{\"session\":\"demo\",\"gesture\":1}");
  harness_rpc_done(&h, "brush.stroke", "{\"session\":\"demo\",\"brush\":\"inflate\",\"radius\":0.02,\"strength\":0.1,"
                          "\"samples\":[{\"center\":[0.03,0.02,0.09]},{\"center\":[0.035,0.02,0.09]}]}");
  harness_rpc_done(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"nose_long\"}");
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"nose_long\":0.5}}");
  {
    client_conn c;
    client_replica r;
    harness_join(&h, &c, &r, "demo", PROTO_ROLE_VIEWER, NULL);
    const mesh_target *smile = &r.mesh->targets[mesh_find_target(r.mesh, "smile_L")];
    uint32_t v = smile->indices[smile->count / 2];
    char params[512];
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"pins\":[{\"vertex\":%u,\"position\":[%g,%g,%g]}],"
             "\"regularization\":0.01,\"targets\":[\"smile_L\"]}", v, r.mesh->positions[3 * v] + 0.002,
             r.mesh->positions[3 * v + 1] + 0.003, r.mesh->positions[3 * v + 2]);
    harness_rpc_done(&h, "blend.solve", params);
    client_replica_fini(&r);
    client_close(&c);
  }
  seen before, after;
  look(&h, "demo", &before);
  ASSERT(before.version >= 10); /* (the two drags may coalesce into one solve) */
  harness_kill(&h);
  harness_start_on(&h, dir, "demo", "--demo"); /* --demo again: the stored session wins */
  look(&h, "demo", &after);
  assert_same(&before, &after);
  /* The history came back too: ana's newest step (the blend solve was hers) undoes. */
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  cJSON *u = harness_rpc_ok(&h, "history.undo", "{\"session\":\"demo\"}");
  ASSERT(strcmp(cJSON_GetObjectItem(u, "kind")->valuestring, "blend.solve") == 0);
  ASSERT(cJSON_GetObjectItem(u, "restored")->valueint >= 1);
  cJSON_Delete(u);
  harness_stop(&h);
  seen_fini(&before);
  seen_fini(&after);
}

TEST(compressed_clips_and_gltf_targets_survive_kill_9_bit_identical) {
  const char *dir = test_tmp_path("durable-clips");
  char create[2048];
  harness h;
  harness_start_on(&h, dir, NULL, NULL);
  snprintf(create, sizeof(create), "{\"session\":\"faerie\",\"mesh\":\"%s\"}",
           harness_mesh_name(test_assimp_model("MD2/faerie.md2")));
  harness_rpc_done(&h, "session.create", create);
  snprintf(create, sizeof(create), "{\"session\":\"cube\",\"mesh\":\"%s\"}",
           harness_mesh_name(test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf")));
  harness_rpc_done(&h, "session.create", create);
  cJSON *t = harness_rpc_ok(&h, "targets.list", "{\"session\":\"cube\"}");
  ASSERT(cJSON_GetArraySize(t) >= 2);
  char params[512];
  snprintf(params, sizeof(params), "{\"session\":\"cube\",\"weights\":{\"%s\":0.25,\"%s\":0.75}}",
           cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "name")->valuestring,
           cJSON_GetObjectItem(cJSON_GetArrayItem(t, 1), "name")->valuestring);
  harness_rpc_done(&h, "weights.set", params);
  cJSON_Delete(t);
  harness_rpc_done(&h, "anim.compress", "{\"session\":\"faerie\",\"clip\":\"stand\",\"max_error\":0.005}");
  harness_rpc_done(&h, "anim.play", "{\"session\":\"faerie\",\"clip\":\"stand\",\"frame\":3}");
  harness_rpc_done(&h, "anim.pause", "{\"session\":\"faerie\"}");
  harness_rpc_done(&h, "anim.record_start", "{\"session\":\"cube\",\"clip\":\"rec\",\"fps\":30,\"max_frames\":5}");
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"cube\",\"offsets\":{\"1\":[0.01,0,0]}}");
  usleep(300000); /* the recording stops itself at its 5 frames */
  harness_rpc_done(&h, "anim.record_stop", "{\"session\":\"cube\"}");
  seen f0, c0, f1, c1;
  look(&h, "faerie", &f0);
  look(&h, "cube", &c0);
  harness_kill(&h);
  harness_start_on(&h, dir, "faerie", NULL);
  look(&h, "faerie", &f1);
  look(&h, "cube", &c1);
  assert_same(&f0, &f1);
  assert_same(&c0, &c1);
  /* The compressed clip plays again from where it was: the same weights at frame 3. */
  harness_rpc_done(&h, "anim.play", "{\"session\":\"faerie\",\"clip\":\"stand\",\"frame\":3}");
  harness_rpc_done(&h, "anim.pause", "{\"session\":\"faerie\"}");
  seen f2;
  look(&h, "faerie", &f2);
  ASSERT(memcmp(f2.weights, f1.weights, sizeof(float) * f1.nt) == 0);
  harness_stop(&h);
  seen_fini(&f0), seen_fini(&c0), seen_fini(&f1), seen_fini(&c1), seen_fini(&f2);
}

/* ---- kill -9 under load ------------------------------------------------------------------------- */

#define EDITORS 3
#define MAX_SENT 4096

typedef struct editor {
  int rpc_port, index;
  float sent[MAX_SENT]; /* the values this editor set, in order */
  int nsent;
  int acked;            /* how many of them were answered OK */
  uint64_t acked_version;
  volatile int *stop;
} editor;

/* Editor k sets target k (weights.set) to a new value per request, as fast as answers come. */
static void *editor_main(void *arg) {
  editor *e = arg;
  client_conn c;
  char err[256];
  if (client_connect(&c, "127.0.0.1", e->rpc_port, err, sizeof(err)) != 0) return NULL;
  static const char *const names[EDITORS] = {"smile_L", "smile_R", "jaw_open"};
  while (!*e->stop && e->nsent < MAX_SENT) {
    float v = (float)(e->nsent + 1) / 8192.0f; /* distinct, exact in float */
    e->sent[e->nsent++] = v;
    cJSON *p = cJSON_CreateObject(), *w;
    cJSON_AddStringToObject(p, "session", "demo");
    w = cJSON_AddObjectToObject(p, "weights");
    cJSON_AddNumberToObject(w, names[e->index], v);
    cJSON *result = NULL, *error = NULL;
    int rc = client_rpc(&c, "weights.set", p, 10000, &result, &error);
    cJSON_Delete(p);
    if (rc == 0) {
      e->acked = e->nsent;
      e->acked_version = (uint64_t)cJSON_GetObjectItem(result, "version")->valuedouble;
    }
    cJSON_Delete(result);
    cJSON_Delete(error);
    if (rc != 0) break; /* the server is gone */
  }
  client_close(&c);
  return NULL;
}

static int integrity_ok(const char *dir) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/deformd.sqlite3", dir);
  sqlite3 *db = NULL;
  int ok = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      ok = strcmp((const char *)sqlite3_column_text(s, 0), "ok") == 0;
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return ok;
}

static void copy_dir(const char *from, const char *to) {
  static char cmd[8192];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
  ASSERT(system(cmd) == 0);
}

TEST(twenty_kill_9_during_steady_edits_lose_nothing_acknowledged) {
  const char *dir = test_tmp_path("durable-kill");
  static const char *const names[EDITORS] = {"smile_L", "smile_R", "jaw_open"};
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  /* The editors' records run across rounds: a round that gets no answer leaves the value of an
   * earlier one. */
  editor *ed = calloc(EDITORS, sizeof(editor));
  for (int round = 0; round < 20; round++) {
    volatile int stop = 0;
    pthread_t th[EDITORS];
    for (int k = 0; k < EDITORS; k++) {
      ed[k].rpc_port = h.rpc_port;
      ed[k].index = k;
      ed[k].stop = &stop;
      ASSERT(pthread_create(&th[k], NULL, editor_main, &ed[k]) == 0);
    }
    /* Let some answers come, a different number each round, then pull the plug mid-stream. */
    int total0 = 0;
    for (int k = 0; k < EDITORS; k++) total0 += ed[k].acked;
    int want = total0 + 5 + (round * 7) % 40;
    for (int spins = 0; spins < 2000; spins++) {
      int total = 0;
      for (int k = 0; k < EDITORS; k++) total += ed[k].acked;
      if (total >= want) break;
      usleep(1000);
    }
    harness_kill(&h);
    stop = 1;
    for (int k = 0; k < EDITORS; k++) pthread_join(th[k], NULL);
    ASSERT(integrity_ok(dir));
    harness_start_on(&h, dir, "demo", "--demo");
    cJSON *st = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
    uint64_t version = (uint64_t)cJSON_GetObjectItem(st, "version")->valuedouble;
    cJSON_Delete(st);
    cJSON *w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
    for (int k = 0; k < EDITORS; k++) {
      ASSERT(version >= ed[k].acked_version);
      if (ed[k].nsent == 0) continue;
      /* The value is one this editor sent, no older than its last acknowledged one. */
      float v = (float)cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), names[k])->valuedouble;
      int found = -1;
      for (int i = 0; i < ed[k].nsent; i++)
        if (ed[k].sent[i] == v) found = i;
      if ((found < 0 && ed[k].acked > 0) || found + 1 < ed[k].acked)
        test__fail(__FILE__, __LINE__, "round %d editor %d: weight %g is not one it sent at or after its last "
                   "acknowledged (%d acknowledged of %d sent)", round, k, (double)v, ed[k].acked, ed[k].nsent);
    }
    cJSON_Delete(w);
  }
  free(ed);
  /* The log replayed by a fresh process gives the state the restarted one has. */
  seen a, b;
  look(&h, "demo", &a);
  char copy[1200];
  snprintf(copy, sizeof(copy), "%s-copy", dir);
  harness_stop(&h); /* writes a checkpoint: the copy starts from it and from the log alike */
  copy_dir(dir, copy);
  harness h2;
  harness_start_on(&h2, copy, "demo", NULL);
  look(&h2, "demo", &b);
  assert_same(&a, &b);
  harness_stop(&h2);
  seen_fini(&a), seen_fini(&b);
}

/* ---- undo, redo, revert ---------------------------------------------------------------------------- */

static double offset_x(harness *h, const char *vertex) {
  cJSON *r = harness_rpc_ok(h, "sculpt.get", "{\"session\":\"demo\"}");
  cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "offsets"), vertex);
  double x = o ? cJSON_GetArrayItem(o, 0)->valuedouble : 0.0;
  cJSON_Delete(r);
  return x;
}

/* A second connection named `author`, for the second person. */
static void as_author(harness *h, client_conn *c, const char *author) {
  char err[256];
  ASSERT_OK(client_connect(c, "127.0.0.1", h->rpc_port, err, sizeof(err)), err);
  cJSON *p = cJSON_CreateObject(), *r = NULL, *e = NULL;
  cJSON_AddStringToObject(p, "author", author);
  ASSERT_OK(client_rpc(c, "hello", p, 10000, &r, &e), NULL);
  cJSON_Delete(p), cJSON_Delete(r);
}

static cJSON *call(client_conn *c, const char *method, const char *params, int *code) {
  cJSON *p = cJSON_Parse(params), *r = NULL, *e = NULL;
  int rc = client_rpc(c, method, p, 10000, &r, &e);
  cJSON_Delete(p);
  *code = rc == CLIENT_ERPC ? cJSON_GetObjectItem(e, "code")->valueint : rc;
  cJSON_Delete(e);
  return r;
}

TEST(two_authors_undo_and_redo_only_their_own_steps) {
  harness h;
  const char *const args[] = {"--demo", NULL}; /* memory only: undo needs no store */
  harness_start(&h, "demo", args);
  client_conn ana, bob;
  as_author(&h, &ana, "ana");
  as_author(&h, &bob, "bob");
  int code;
  /* ana moves 5 and 6; bob then moves 6 and 7. */
  cJSON_Delete(call(&ana, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"5\":[0.001,0,0],\"6\":[0.002,0,0]}}", &code));
  ASSERT_EQ(code, 0);
  cJSON_Delete(call(&bob, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"6\":[0.003,0,0],\"7\":[0.004,0,0]}}", &code));
  ASSERT_EQ(code, 0);
  double q5 = offset_x(&h, "5"), q6b = offset_x(&h, "6"), q7 = offset_x(&h, "7");
  /* ana's undo takes her own change back: 5 goes back; 6 keeps bob's change on top of it (0.003
   * - 0.002: overlapped, not skipped); 7 is bob's alone. */
  cJSON *r = call(&ana, "history.undo", "{\"session\":\"demo\"}", &code);
  ASSERT_EQ(code, 0);
  ASSERT_EQ(cJSON_GetObjectItem(r, "restored")->valueint, 2);
  ASSERT_EQ(cJSON_GetObjectItem(r, "skipped")->valueint, 0);
  ASSERT_EQ(cJSON_GetObjectItem(r, "overlapped")->valueint, 1);
  cJSON_Delete(r);
  ASSERT(offset_x(&h, "5") == 0.0 && fabs(offset_x(&h, "6") - 0.001) < 1e-6 && offset_x(&h, "7") == q7);
  /* Nothing older of ana's: a clear error. */
  r = call(&ana, "history.undo", "{\"session\":\"demo\"}", &code);
  ASSERT_EQ(code, -32006);
  /* ana's redo: 5 comes back; 6 is bob's value again, bit for bit. */
  cJSON_Delete(call(&ana, "history.redo", "{\"session\":\"demo\"}", &code));
  ASSERT_EQ(code, 0);
  ASSERT(offset_x(&h, "5") == q5 && offset_x(&h, "6") == q6b);
  /* bob's undo: 6 goes back to what it was before bob (ana's value), 7 to zero. */
  cJSON_Delete(call(&bob, "history.undo", "{\"session\":\"demo\"}", &code));
  ASSERT_EQ(code, 0);
  ASSERT(offset_x(&h, "7") == 0.0);
  double q6a = offset_x(&h, "6");
  ASSERT(q6a != q6b && q6a > 0.0019 && q6a < 0.0021);
  /* A new step of bob's ends his redo. */
  cJSON_Delete(call(&bob, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}", &code));
  ASSERT_EQ(code, 0);
  cJSON_Delete(call(&bob, "history.redo", "{\"session\":\"demo\"}", &code));
  ASSERT_EQ(code, -32006);
  /* history.list shows who did what, newest first. */
  cJSON *list = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\",\"limit\":3}");
  cJSON *steps = cJSON_GetObjectItem(list, "steps");
  ASSERT_EQ(cJSON_GetArraySize(steps), 3);
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 0), "author")->valuestring, "bob") == 0);
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 0), "kind")->valuestring, "weights.set") == 0);
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 1), "kind")->valuestring, "undo") == 0);
  cJSON_Delete(list);
  client_close(&ana);
  client_close(&bob);
  harness_stop(&h);
}

/* history.list as text, and the answer of an undo or redo (its "kind" and "step"). */
static char *history_text(harness *h) {
  return json_of(harness_rpc_ok(h, "history.list", "{\"session\":\"demo\",\"limit\":100}"));
}

static void undo_redo(harness *h, const char *method, const char *kind, int restored, double *step) {
  cJSON *r = harness_rpc_ok(h, method, "{\"session\":\"demo\"}");
  if (strcmp(cJSON_GetObjectItem(r, "kind")->valuestring, kind) != 0 ||
      cJSON_GetObjectItem(r, "restored")->valueint != restored)
    test__fail(__FILE__, __LINE__, "%s: %s", method, cJSON_PrintUnformatted(r));
  if (step) *step = cJSON_GetObjectItem(r, "step")->valuedouble;
  cJSON_Delete(r);
}

static double newest_step(harness *h) {
  cJSON *l = harness_rpc_ok(h, "history.list", "{\"session\":\"demo\",\"limit\":1}");
  double v = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "steps"), 0), "step")->valuedouble;
  cJSON_Delete(l);
  return v;
}

TEST(undo_and_redo_survive_kill_9_and_sigterm_and_history_list_reads_the_same) {
  const char *dir = test_tmp_path("durable-undo");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"5\":[0.001,0,0]}}");      /* A */
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}");        /* B */
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"6\":[0.002,0,0]}}");      /* C */
  double c_step, b_step, s;
  undo_redo(&h, "history.undo", "sculpt.set", 1, &c_step);
  undo_redo(&h, "history.undo", "weights.set", 1, &b_step);
  undo_redo(&h, "history.redo", "weights.set", 1, &s);
  ASSERT(s == b_step);
  harness_rpc_done(&h, "history.revert", "{\"session\":\"demo\",\"version\":1}"); /* (ends ana's redo of C) */
  double r_step;
  undo_redo(&h, "history.undo", "revert", 1, &r_step); /* smile_L back at 0.5 */
  char *l0 = history_text(&h);
  ASSERT_STR_CONTAINS(l0, "undo of step 3");
  ASSERT_STR_CONTAINS(l0, "revert to version 1");
  double last0 = newest_step(&h);
  seen before, after;
  look(&h, "demo", &before);
  /* kill -9: nothing was checkpointed; the log and the step rows hold it all. */
  harness_kill(&h);
  harness_start_on(&h, dir, "demo", "--demo");
  look(&h, "demo", &after);
  assert_same(&before, &after);
  char *l1 = history_text(&h);
  if (strcmp(l0, l1) != 0) test__fail(__FILE__, __LINE__, "history.list changed:\n%s\n%s", l0, l1);
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  /* ana's redo stack holds the revert she undid: redo makes it again, under a new step number. */
  undo_redo(&h, "history.redo", "revert", 1, &s);
  ASSERT(s == r_step);
  ASSERT(newest_step(&h) > last0);
  undo_redo(&h, "history.undo", "revert", 1, &s);
  ASSERT(s == r_step);
  char *l2 = history_text(&h);
  seen_fini(&before);
  look(&h, "demo", &before);
  /* SIGTERM: everything is in the checkpoint the stop writes. */
  harness_stop(&h);
  harness_start_on(&h, dir, "demo", "--demo");
  seen_fini(&after);
  look(&h, "demo", &after);
  assert_same(&before, &after);
  char *l3 = history_text(&h);
  if (strcmp(l2, l3) != 0) test__fail(__FILE__, __LINE__, "history.list changed:\n%s\n%s", l2, l3);
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  undo_redo(&h, "history.redo", "revert", 1, &s);
  ASSERT(s == r_step);
  undo_redo(&h, "history.undo", "revert", 1, &s);
  undo_redo(&h, "history.undo", "weights.set", 1, &s); /* (C stays undone) */
  ASSERT(s == b_step);
  undo_redo(&h, "history.undo", "sculpt.set", 1, &s); /* A */
  ASSERT(harness_rpc_err(&h, "history.undo", "{\"session\":\"demo\"}", NULL, 0) == -32006);
  harness_stop(&h);
  seen_fini(&before), seen_fini(&after);
  free(l0), free(l1), free(l2), free(l3);
}

TEST(an_undo_that_changed_nothing_still_counts_after_kill_9) {
  const char *dir = test_tmp_path("durable-undo-nothing");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  client_conn ana, bob;
  as_author(&h, &ana, "ana");
  as_author(&h, &bob, "bob");
  int code;
  cJSON_Delete(call(&ana, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.25}}", &code));
  cJSON_Delete(call(&bob, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.75}}", &code));
  /* ana's undo finds smile_L changed by bob (weights keep the rule "left as others set them";
   * sculpt offsets would take her change back under bob's): nothing changes, yet her step is
   * undone. */
  cJSON *r = call(&ana, "history.undo", "{\"session\":\"demo\"}", &code);
  ASSERT_EQ(code, 0);
  ASSERT_EQ(cJSON_GetObjectItem(r, "restored")->valueint, 0);
  ASSERT_EQ(cJSON_GetObjectItem(r, "skipped")->valueint, 1);
  cJSON_Delete(r);
  client_close(&ana), client_close(&bob);
  harness_kill(&h);
  harness_start_on(&h, dir, "demo", "--demo");
  as_author(&h, &ana, "ana");
  r = call(&ana, "history.undo", "{\"session\":\"demo\"}", &code);
  ASSERT_EQ(code, -32006); /* her one step is undone already */
  cJSON_Delete(r);
  r = call(&ana, "history.redo", "{\"session\":\"demo\"}", &code);
  ASSERT_EQ(code, 0);
  ASSERT(strcmp(cJSON_GetObjectItem(r, "kind")->valuestring, "weights.set") == 0);
  cJSON_Delete(r);
  client_close(&ana);
  harness_stop(&h);
}

TEST(more_steps_than_a_checkpoint_holds_stay_undoable_after_a_restart_up_to_undo_depth) {
  const char *dir = test_tmp_path("durable-depth");
  harness h;
  const char *const args[] = {"--data", dir, "--demo", "--undo-depth", "150", NULL};
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  /* 1,100 steps: past a checkpoint (every 1,000 operations), then a clean stop (another). */
  char p[160];
  for (int i = 1; i <= 1100; i++) {
    snprintf(p, sizeof(p), "{\"session\":\"demo\",\"weights\":{\"jaw_open\":%.9g}}", i / 2048.0);
    harness_rpc_done(&h, "weights.set", p);
  }
  harness_stop(&h);
  harness_start(&h, "demo", args);
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  for (int i = 0; i < 150; i++) undo_redo(&h, "history.undo", "weights.set", 1, NULL);
  char msg[256];
  ASSERT(harness_rpc_err(&h, "history.undo", "{\"session\":\"demo\"}", msg, sizeof(msg)) == -32006);
  ASSERT_STR_CONTAINS(msg, "no longer kept for undo");
  cJSON *t = harness_rpc_ok(&h, "targets.list", "{\"session\":\"demo\"}");
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "name")->valuestring, "jaw_open") == 0);
  /* jaw_open is back at step 950's value (a float32 of it) */
  ASSERT_NEAR(cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "weight")->valuedouble, 950 / 2048.0, 1e-6);
  cJSON_Delete(t);
  harness_stop(&h);
}

TEST(revert_to_an_old_version_then_undo_the_revert) {
  const char *dir = test_tmp_path("durable-revert");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.8}}");
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"10\":[0.001,0,0]}}");
  seen at2;
  look(&h, "demo", &at2);
  ASSERT_EQ(at2.version, 2);
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.1,\"jaw_open\":0.6}}");
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"10\":[0.005,0,0],\"11\":[0,0.002,0]}}");
  harness_rpc_done(&h, "targets.configure", "{\"session\":\"demo\",\"target\":\"jaw_open\",\"muted\":true}");
  harness_rpc_done(&h, "targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"extra\"}");
  seen now;
  look(&h, "demo", &now);
  /* An export of version 2 is the shape viewers saw then. */
  char params[1400];
  harness_rpc_done(&h, "session.export", "{\"session\":\"demo\",\"path\":\"v2.obj\",\"version\":2}"); /* into exports/ */
  cJSON *r = harness_rpc_ok(&h, "history.revert", "{\"session\":\"demo\",\"version\":2}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "reverted_to")->valueint, 2);
  cJSON_Delete(r);
  seen back;
  look(&h, "demo", &back);
  /* The shape of version 2 (the new target stays, at weight 0), every weight as it was. */
  ASSERT(memcmp(back.pos, at2.pos, sizeof(float) * 3 * at2.nv) == 0);
  ASSERT(memcmp(back.weights, at2.weights, sizeof(float) * at2.nt) == 0);
  ASSERT_EQ(back.nt, at2.nt + 1);
  ASSERT(back.weights[at2.nt] == 0.0f);
  ASSERT_EQ(back.meta[1].flags & PROTO_TARGET_MUTED, 0); /* jaw_open unmuted as at version 2 */
  /* Undo the revert: the state before it, bit for bit. */
  cJSON_Delete(harness_rpc_ok(&h, "history.undo", "{\"session\":\"demo\"}"));
  seen again;
  look(&h, "demo", &again);
  ASSERT(memcmp(again.pos, now.pos, sizeof(float) * 3 * now.nv) == 0);
  ASSERT(memcmp(again.weights, now.weights, sizeof(float) * now.nt) == 0);
  ASSERT(strcmp(again.targets, now.targets) == 0);
  /* The exported version-2 file holds version 2's positions. */
  snprintf(params, sizeof(params), "%s/exports/v2.obj", dir);
  FILE *f = fopen(params, "r");
  ASSERT(f != NULL);
  char line[256];
  uint32_t v = 0;
  int bad = 0;
  while (fgets(line, sizeof(line), f) && v < at2.nv) {
    float x, y, z;
    if (sscanf(line, "v %f %f %f", &x, &y, &z) != 3) continue;
    bad += x != at2.pos[3 * v] || y != at2.pos[3 * v + 1] || z != at2.pos[3 * v + 2];
    v++;
  }
  fclose(f);
  ASSERT_EQ(v, at2.nv);
  ASSERT_EQ(bad, 0);
  harness_stop(&h);
  seen_fini(&at2), seen_fini(&now), seen_fini(&back), seen_fini(&again);
}

/* ---- a disk that fills up, or is read-only ---------------------------------------------------- */

/* A mount namespace of its own with a small tmpfs at `mnt`, held open by a sleeping process
 * (unshare -m: the suite runs as root, as CI does). deformd runs inside it through a wrapper
 * (nsenter), so it can be restarted on the same tmpfs; the test reaches the files through
 * /proc/HOLDER/root. */
typedef struct tmpfs_ns {
  pid_t holder;
  char mnt[1024], wrapper[1200], view[1400]; /* view: the mount as this process sees it */
} tmpfs_ns;

/* 0, or -1 when no mount namespace with a tmpfs can be made here (not root, a chroot). */
static int tmpfs_ns_start(tmpfs_ns *t, const char *size) {
  snprintf(t->mnt, sizeof(t->mnt), "%s/tmpfs", test_tmpdir());
  ASSERT(mkdir(t->mnt, 0700) == 0 || access(t->mnt, F_OK) == 0);
  static char sh[4096];
  snprintf(sh, sizeof(sh), "mount -t tmpfs -o size=%s tmpfs '%s' && touch '%s/.ready' && exec sleep 600", size, t->mnt,
           t->mnt);
  t->holder = fork();
  ASSERT(t->holder >= 0);
  if (t->holder == 0) {
    execlp("unshare", "unshare", "-m", "sh", "-c", sh, (char *)NULL);
    _exit(127);
  }
  snprintf(t->view, sizeof(t->view), "/proc/%d/root%s", (int)t->holder, t->mnt);
  char ready[1500];
  snprintf(ready, sizeof(ready), "%s/.ready", t->view);
  for (int i = 0; i < 200 && access(ready, F_OK) != 0; i++) {
    if (waitpid(t->holder, NULL, WNOHANG) == t->holder) return -1; /* unshare or mount refused */
    usleep(25000);
  }
  if (access(ready, F_OK) != 0) {
    kill(t->holder, SIGKILL);
    waitpid(t->holder, NULL, 0);
    return -1;
  }
  snprintf(t->wrapper, sizeof(t->wrapper), "%s/deformd-in-ns.sh", test_tmpdir());
  char script[2048];
  snprintf(script, sizeof(script), "#!/bin/sh\nexec nsenter -t %d -m '%s' \"$@\"\n", (int)t->holder, getenv("DEFORMD_BIN"));
  FILE *f = fopen(t->wrapper, "w");
  ASSERT(f && fputs(script, f) >= 0 && fclose(f) == 0);
  ASSERT(chmod(t->wrapper, 0755) == 0);
  return 0;
}

static void tmpfs_ns_stop(tmpfs_ns *t) {
  kill(t->holder, SIGKILL);
  waitpid(t->holder, NULL, 0);
}

/* Runs a shell command inside the namespace (mount -o remount,...). */
static void in_ns(const tmpfs_ns *t, const char *cmd) {
  char full[2048];
  snprintf(full, sizeof(full), "nsenter -t %d -m sh -c \"%s\"", (int)t->holder, cmd);
  ASSERT(system(full) == 0);
}

static void start_in_ns(harness *h, const tmpfs_ns *t) {
  char *real = strdup(getenv("DEFORMD_BIN")), data[1100];
  setenv("DEFORMD_BIN", t->wrapper, 1);
  snprintf(data, sizeof(data), "%s/data", t->mnt);
  const char *const args[] = {"--data", data, "--demo", NULL};
  harness_start(h, "demo", args);
  setenv("DEFORMD_BIN", real, 1);
  free(real);
}

/* weights.set smile_L=v on a connection of its own: 0 or the JSON-RPC error code (its message
 * in msg). */
static int set_smile(harness *h, float v, char *msg, size_t msglen) {
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h->rpc_port, err, sizeof(err)), err);
  cJSON *p = cJSON_CreateObject(), *w = NULL, *r = NULL, *e = NULL;
  cJSON_AddStringToObject(p, "session", "demo");
  w = cJSON_AddObjectToObject(p, "weights");
  cJSON_AddNumberToObject(w, "smile_L", v);
  int rc = client_rpc(&c, "weights.set", p, 10000, &r, &e);
  int code = rc == CLIENT_ERPC ? cJSON_GetObjectItem(e, "code")->valueint : rc;
  snprintf(msg, msglen, "%s", e ? cJSON_GetObjectItem(e, "message")->valuestring : "");
  cJSON_Delete(p), cJSON_Delete(r), cJSON_Delete(e);
  client_close(&c);
  return code;
}

static float smile_now(harness *h) {
  cJSON *w = harness_rpc_ok(h, "weights.get", "{\"session\":\"demo\"}");
  float v = (float)cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), "smile_L")->valuedouble;
  cJSON_Delete(w);
  return v;
}

/* Keeps sending the edit until it is accepted (the store retries every second). */
static int wait_writable(harness *h, float v) {
  char msg[512];
  for (int i = 0; i < 100; i++) {
    if (set_smile(h, v, msg, sizeof(msg)) == 0) return 1;
    usleep(100000);
  }
  return 0;
}

static void viewers_are_served(harness *h) {
  client_conn v;
  client_replica r;
  harness_join(h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  client_replica_fini(&r);
  client_close(&v);
  cJSON_Delete(harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}"));
}

static void full_disk_by_file_size_limit(void);

/* With root (as CI runs) the disk is a small tmpfs in a mount namespace of its own, filled up,
 * then remounted read-only. Where no mount can be made (a plain user, a chroot) the full disk is
 * a file-size limit on deformd instead (full_disk_by_file_size_limit); the read-only half needs
 * the mount and is left out there, as the output says. */
TEST(a_full_or_read_only_disk_refuses_edits_clearly_keeps_viewers_and_loses_nothing_committed) {
  tmpfs_ns ns;
  if (tmpfs_ns_start(&ns, "12m") != 0) {
    printf("no mount namespace here (unshare -m needs root outside a chroot): the full disk is a file-size "
           "limit, and the read-only file system is not tried\n");
    full_disk_by_file_size_limit();
    return;
  }
  harness h;
  start_in_ns(&h, &ns);
  char msg[512];
  ASSERT_EQ(set_smile(&h, 0.25f, msg, sizeof(msg)), 0);
  /* Fill the disk. */
  char filler[1600];
  snprintf(filler, sizeof(filler), "%s/filler", ns.view);
  FILE *f = fopen(filler, "w");
  ASSERT(f != NULL);
  static char block[65536];
  while (fwrite(block, 1, sizeof(block), f) == sizeof(block)) {
  }
  fclose(f);
  /* Edits now fail with a reason, and after the first failure every edit is refused. */
  int code = 0;
  float last_ok = 0.25f;
  for (int i = 1; i <= 200 && code == 0; i++) {
    code = set_smile(&h, 0.25f + (float)i / 1024.0f, msg, sizeof(msg));
    if (code == 0) last_ok = 0.25f + (float)i / 1024.0f;
  }
  ASSERT_EQ(code, -32008);
  ASSERT(strstr(msg, "could not be saved") || strstr(msg, "cannot write"));
  ASSERT_EQ(set_smile(&h, 0.9f, msg, sizeof(msg)), -32008);
  ASSERT_STR_CONTAINS(msg, "edits are refused");
  viewers_are_served(&h);
  /* Room again: the store catches up and edits are accepted. */
  ASSERT(unlink(filler) == 0);
  ASSERT(wait_writable(&h, 0.5f));
  ASSERT(smile_now(&h) == 0.5f);
  /* Nothing committed was damaged: after kill -9 the store is intact and has the last value. */
  harness_kill(&h);
  char data_view[1500];
  snprintf(data_view, sizeof(data_view), "%s/data", ns.view);
  start_in_ns(&h, &ns);
  ASSERT(smile_now(&h) == 0.5f);
  ASSERT(last_ok >= 0.25f);
  harness_stop(&h);
  /* (SQLite resolves the /proc/PID/root link to this namespace's view: check a copy.) */
  char copy[1300];
  snprintf(copy, sizeof(copy), "%s/ns-copy", test_tmpdir());
  copy_dir(data_view, copy);
  ASSERT(integrity_ok(copy));
  /* A read-only file system: what is stored is served, edits are refused, until it is writable. */
  char cmd[1200];
  snprintf(cmd, sizeof(cmd), "mount -o remount,ro '%s'", ns.mnt);
  in_ns(&ns, cmd);
  start_in_ns(&h, &ns);
  ASSERT(smile_now(&h) == 0.5f);
  ASSERT_EQ(set_smile(&h, 0.6f, msg, sizeof(msg)), -32008);
  ASSERT_STR_CONTAINS(msg, "read-only");
  viewers_are_served(&h);
  snprintf(cmd, sizeof(cmd), "mount -o remount,rw '%s'", ns.mnt);
  in_ns(&ns, cmd);
  ASSERT(wait_writable(&h, 0.75f));
  harness_kill(&h);
  start_in_ns(&h, &ns);
  ASSERT(smile_now(&h) == 0.75f);
  harness_stop(&h);
  tmpfs_ns_stop(&ns);
}

/* A sculpt.set of `count` vertices from 0 (values differ with `round`, so every call writes a
 * large record): 0 or the JSON-RPC error code, its message in msg. */
static int set_many(harness *h, int round, uint32_t count, char *msg, size_t msglen) {
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h->rpc_port, err, sizeof(err)), err);
  cJSON *p = cJSON_CreateObject(), *r = NULL, *e = NULL;
  cJSON_AddStringToObject(p, "session", "demo");
  cJSON *o = cJSON_AddObjectToObject(p, "offsets");
  for (uint32_t v = 0; v < count; v++) {
    char key[16];
    snprintf(key, sizeof(key), "%u", v);
    double d[3] = {1e-4 * ((round + v) % 7), 1e-4 * ((round * 3 + v) % 5), 0};
    cJSON_AddItemToObject(o, key, cJSON_CreateDoubleArray(d, 3));
  }
  int rc = client_rpc(&c, "sculpt.set", p, 30000, &r, &e);
  int code = rc == CLIENT_ERPC ? cJSON_GetObjectItem(e, "code")->valueint : rc;
  snprintf(msg, msglen, "%s", e ? cJSON_GetObjectItem(e, "message")->valuestring : "");
  cJSON_Delete(p), cJSON_Delete(r), cJSON_Delete(e);
  client_close(&c);
  return code;
}

/* The full disk without a mount: deformd runs with SIGXFSZ ignored (a wrapper's trap), and once it
 * serves, its RLIMIT_FSIZE is lowered to 0 from here (prlimit), so a write that would grow a file
 * fails with EFBIG as one past a full disk fails with ENOSPC; raising it again is the room that
 * comes back. */
static void full_disk_by_file_size_limit(void) {
  const char *dir = test_tmp_path("durable-fsize");
  char wrapper[1200], script[2048];
  snprintf(wrapper, sizeof(wrapper), "%s/deformd-fsize.sh", test_tmpdir());
  snprintf(script, sizeof(script), "#!/bin/sh\ntrap '' XFSZ\nexec '%s' \"$@\"\n", getenv("DEFORMD_BIN"));
  FILE *f = fopen(wrapper, "w");
  ASSERT(f && fputs(script, f) >= 0 && fclose(f) == 0);
  ASSERT(chmod(wrapper, 0755) == 0);
  char *real = strdup(getenv("DEFORMD_BIN"));
  setenv("DEFORMD_BIN", wrapper, 1);
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  setenv("DEFORMD_BIN", real, 1);
  char msg[512];
  ASSERT_EQ(set_smile(&h, 0.25f, msg, sizeof(msg)), 0);
  struct rlimit none = {0, RLIM_INFINITY}, room = {RLIM_INFINITY, RLIM_INFINITY};
  ASSERT(prlimit(h.pid, RLIMIT_FSIZE, &none, NULL) == 0);
  /* Edits now fail with a reason, and after the first failure every edit is refused. */
  int code = 0;
  for (int i = 1; i <= 200 && code == 0; i++) code = set_many(&h, i, 20000, msg, sizeof(msg));
  ASSERT_EQ(code, -32008);
  ASSERT(strstr(msg, "could not be saved") || strstr(msg, "cannot write"));
  ASSERT_EQ(set_smile(&h, 0.9f, msg, sizeof(msg)), -32008);
  ASSERT_STR_CONTAINS(msg, "edits are refused");
  viewers_are_served(&h);
  /* Room again: the store catches up and edits are accepted. */
  ASSERT(prlimit(h.pid, RLIMIT_FSIZE, &room, NULL) == 0);
  ASSERT(wait_writable(&h, 0.5f));
  ASSERT(smile_now(&h) == 0.5f);
  /* Nothing committed was damaged: after kill -9 the store is intact and has the last value. */
  harness_kill(&h);
  ASSERT(integrity_ok(dir));
  harness_start_on(&h, dir, "demo", "--demo");
  ASSERT(smile_now(&h) == 0.5f);
  harness_stop(&h);
  free(real);
}

/* The file-size route on its own, wherever the suite runs (as root it is the mount's twin). */
TEST(a_full_disk_reached_by_a_file_size_limit_refuses_edits_and_recovers) { full_disk_by_file_size_limit(); }

/* ---- checkpoints and compaction ---------------------------------------------------------------- */


TEST(a_long_history_restarts_from_its_checkpoint_and_compacts) {
  const char *dir = test_tmp_path("durable-long");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  /* 1,200 operations: past the checkpoint interval (SRV_CHECKPOINT_OPS, 1000). */
  char p[256];
  for (int i = 1; i <= 1200; i++) {
    if (i % 2) snprintf(p, sizeof(p), "{\"session\":\"demo\",\"weights\":{\"jaw_open\":%.9g}}", i / 2048.0);
    else snprintf(p, sizeof(p), "{\"session\":\"demo\",\"offsets\":{\"%d\":[%.9g,0,0]}}", 100 + i % 50, i / 1e6);
    harness_rpc_done(&h, i % 2 ? "weights.set" : "sculpt.set", p);
  }
  seen before, after;
  look(&h, "demo", &before);
  ASSERT_EQ(before.version, 1200);
  harness_kill(&h);
  ASSERT(count_rows(dir, "SELECT count(*) FROM checkpoints") >= 1);
  ASSERT(count_rows(dir, "SELECT max(version) FROM checkpoints") >= 1000);
  harness_start_on(&h, dir, "demo", "--demo");
  look(&h, "demo", &after);
  assert_same(&before, &after);
  /* Undo reaches a step replayed after the checkpoint; older ones are listed. */
  harness_rpc_done(&h, "hello", "{\"author\":\"ana\"}");
  cJSON_Delete(harness_rpc_ok(&h, "history.undo", "{\"session\":\"demo\"}"));
  cJSON *list = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\",\"limit\":5000}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(list, "steps")), 1201);
  cJSON_Delete(list);
  /* Compaction keeps the newest 100 versions; the state and a restart are unchanged, and a
   * version before them is no longer there to revert to. */
  seen c0, c1;
  look(&h, "demo", &c0);
  cJSON *r = harness_rpc_ok(&h, "history.compact", "{\"session\":\"demo\",\"keep_versions\":100}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "kept_from_version")->valueint, 1101);
  cJSON_Delete(r);
  ASSERT(count_rows(dir, "SELECT min(version) FROM ops") > 1101);
  ASSERT(harness_rpc_err(&h, "history.revert", "{\"session\":\"demo\",\"version\":500}", NULL, 0) == -32006);
  cJSON_Delete(harness_rpc_ok(&h, "history.revert", "{\"session\":\"demo\",\"version\":1150}"));
  cJSON_Delete(harness_rpc_ok(&h, "history.undo", "{\"session\":\"demo\"}")); /* the revert */
  seen c2;
  look(&h, "demo", &c2);
  ASSERT(memcmp(c2.pos, c0.pos, sizeof(float) * 3 * c0.nv) == 0);
  ASSERT(memcmp(c2.weights, c0.weights, sizeof(float) * c0.nt) == 0);
  seen_fini(&c0);
  c0 = c2;
  harness_kill(&h);
  harness_start_on(&h, dir, "demo", "--demo");
  look(&h, "demo", &c1);
  assert_same(&c0, &c1);
  harness_stop(&h);
  seen_fini(&before), seen_fini(&after), seen_fini(&c0), seen_fini(&c1);
}

TEST(history_older_than_history_days_is_folded_into_a_checkpoint) {
  const char *dir = test_tmp_path("durable-days");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  for (int i = 1; i <= 20; i++) {
    char p[160];
    snprintf(p, sizeof(p), "{\"session\":\"demo\",\"weights\":{\"jaw_open\":%.9g}}", i / 64.0);
    harness_rpc_done(&h, "weights.set", p);
  }
  seen before, after;
  look(&h, "demo", &before);
  harness_stop(&h);
  ASSERT_EQ(count_rows(dir, "SELECT count(*) FROM ops"), 20);
  sleep(2); /* every operation is now older than 0.00001 days (0.86 s) */
  const char *const args[] = {"--data", dir, "--demo", "--history-days", "0.00001", NULL};
  harness_start(&h, "demo", args);
  int64_t left = 20;
  for (int i = 0; i < 100 && left != 0; i++, usleep(50000)) left = count_rows(dir, "SELECT count(*) FROM ops");
  ASSERT_EQ(left, 0);
  ASSERT_EQ(count_rows(dir, "SELECT max(version) FROM checkpoints"), 20);
  harness_kill(&h);
  harness_start_on(&h, dir, "demo", "--demo");
  look(&h, "demo", &after);
  assert_same(&before, &after);
  harness_stop(&h);
  seen_fini(&before), seen_fini(&after);
}

/* A gesture begun before someone else's step and dragged after it: its step comes after that
 * one (steps follow the versions), it is one step however many drags, and undo takes it back
 * whole. Step ids used to be taken at begin, which sorted the gesture's step out of place and
 * split it in two. */
TEST(a_gesture_dragged_after_another_authors_step_is_one_step_in_version_order) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  client_conn ana, bob;
  as_author(&h, &ana, "ana");
  as_author(&h, &bob, "bob");
  int code;
  cJSON_Delete(call(&ana, "deform.begin",
                    "{\"session\":\"demo\",\"gesture\":1,\"pick\":20400,\"handle_radius\":0.01,\"roi_radius\":0.05}", &code));
  ASSERT_EQ(code, 0);
  cJSON_Delete(call(&bob, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}", &code));
  ASSERT_EQ(code, 0);
  cJSON_Delete(call(&ana, "deform.drag", "{\"session\":\"demo\",\"gesture\":1,\"translate\":[0,0.01,0]}", &code));
  ASSERT_EQ(code, 0);
  cJSON_Delete(call(&ana, "deform.drag", "{\"session\":\"demo\",\"gesture\":1,\"translate\":[0.002,0.012,0]}", &code));
  ASSERT_EQ(code, 0);
  cJSON_Delete(call(&ana, "deform.end", "{\"session\":\"demo\",\"gesture\":1}", &code));
  ASSERT_EQ(code, 0);
  cJSON *list = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\"}");
  const cJSON *steps = cJSON_GetObjectItem(list, "steps");
  ASSERT_EQ(cJSON_GetArraySize(steps), 2);
  const cJSON *newest = cJSON_GetArrayItem(steps, 0), *older = cJSON_GetArrayItem(steps, 1);
  ASSERT(strcmp(cJSON_GetObjectItem(newest, "author")->valuestring, "ana") == 0);
  ASSERT_EQ(cJSON_GetObjectItem(newest, "operations")->valueint, 2);
  ASSERT(strcmp(cJSON_GetObjectItem(older, "author")->valuestring, "bob") == 0);
  ASSERT(cJSON_GetObjectItem(newest, "first_version")->valuedouble > cJSON_GetObjectItem(older, "version")->valuedouble);
  ASSERT(cJSON_GetObjectItem(newest, "step")->valuedouble > cJSON_GetObjectItem(older, "step")->valuedouble);
  cJSON_Delete(list);
  /* ana's undo takes the whole gesture back: no offsets left, bob's weight stays. */
  cJSON_Delete(call(&ana, "history.undo", "{\"session\":\"demo\"}", &code));
  ASSERT_EQ(code, 0);
  cJSON *sc = harness_rpc_ok(&h, "sculpt.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(sc, "offsets")), 0);
  cJSON_Delete(sc);
  cJSON *w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  ASSERT((float)cJSON_GetObjectItem(cJSON_GetObjectItem(w, "weights"), "smile_L")->valuedouble == 0.5f);
  cJSON_Delete(w);
  client_close(&ana);
  client_close(&bob);
  harness_stop(&h);
}

/* One JSON-RPC answer line from a raw connection (parsed; the caller deletes it). */
static cJSON *read_answer(client_conn *c) {
  char line[65536];
  size_t n = 0;
  for (;;) {
    char ch;
    if (read(c->fd, &ch, 1) != 1) test__fail(__FILE__, __LINE__, "the connection ended before an answer");
    if (ch == '\n') break;
    ASSERT(n + 1 < sizeof(line));
    line[n++] = ch;
  }
  line[n] = '\0';
  cJSON *j = cJSON_Parse(line);
  ASSERT(j != NULL);
  return j;
}

/* An undo sent right behind a stroke (the stroke still queued or running on the pool) waits for
 * it and takes it back: the author's requests apply in the order they were sent. It used to run
 * at once and find nothing to undo, and the stroke then applied after it. */
TEST(an_undo_sent_right_behind_a_stroke_waits_for_it_and_takes_it_back) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  uint32_t count;
  float *pos = harness_server_positions(&h, "demo", &count);
  const float *p = pos + 3 * 20400;
  char req[1024];
  int len = snprintf(req, sizeof(req),
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"brush.stroke\",\"params\":{\"session\":\"demo\","
                     "\"brush\":\"inflate\",\"samples\":[{\"center\":[%.9g,%.9g,%.9g],\"radius\":0.05,\"strength\":0.5}]}}\n"
                     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"history.undo\",\"params\":{\"session\":\"demo\"}}\n",
                     p[0], p[1], p[2]);
  free(pos);
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  ASSERT_OK(client_send(&c, req, (size_t)len), "send"); /* both in one write: one read on the server */
  cJSON *a = read_answer(&c), *b = read_answer(&c);
  if (cJSON_GetObjectItem(a, "id")->valueint == 2) {
    cJSON *t = a;
    a = b, b = t;
  }
  const cJSON *stroke = cJSON_GetObjectItem(a, "result"), *undo = cJSON_GetObjectItem(b, "result");
  if (!undo) test__fail(__FILE__, __LINE__, "the undo failed: %s", cJSON_PrintUnformatted(b));
  ASSERT(stroke && cJSON_GetObjectItem(stroke, "moved_vertices")->valueint > 0);
  if (strcmp(cJSON_GetObjectItem(undo, "kind")->valuestring, "brush") != 0) test__fail(__FILE__, __LINE__, "%s", cJSON_PrintUnformatted(undo));
  ASSERT(cJSON_GetObjectItem(undo, "step_last_version")->valuedouble == cJSON_GetObjectItem(stroke, "version")->valuedouble);
  ASSERT(cJSON_GetObjectItem(undo, "version")->valuedouble > cJSON_GetObjectItem(stroke, "version")->valuedouble);
  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON *sc = harness_rpc_ok(&h, "sculpt.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(sc, "offsets")), 0);
  cJSON_Delete(sc);
  client_close(&c);
  harness_stop(&h);
}

/* ---- the up axis -------------------------------------------------------------------------------- */

#define ASSERT_UP(got, want) ASSERT(strcmp((got), (want)) == 0)

static const char *info_up(harness *h, const char *method, const char *session, char *buf) {
  char params[256];
  snprintf(params, sizeof(params), "{\"session\":\"%s\"}", session);
  cJSON *r = harness_rpc_ok(h, method, params);
  const cJSON *up = cJSON_GetObjectItem(r, "up");
  snprintf(buf, 8, "%s", cJSON_IsString(up) ? up->valuestring : "(none)");
  cJSON_Delete(r);
  return buf;
}

/* The rotation of the GLB's root node (the first of its scene), or NULL: a copy the caller frees. */
static cJSON *glb_root_rotation(const uint8_t *glb, size_t n) {
  ASSERT(n > 20 && memcmp(glb, "glTF", 4) == 0 && memcmp(glb + 16, "JSON", 4) == 0);
  uint32_t jl = (uint32_t)glb[12] | (uint32_t)glb[13] << 8 | (uint32_t)glb[14] << 16 | (uint32_t)glb[15] << 24;
  ASSERT(20 + (size_t)jl <= n);
  cJSON *j = cJSON_ParseWithLength((const char *)glb + 20, jl);
  ASSERT(j != NULL);
  const cJSON *scene = cJSON_GetObjectItem(j, "scene");
  const cJSON *sc = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "scenes"), scene ? scene->valueint : 0);
  const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(sc, "nodes"), 0);
  ASSERT(cJSON_IsNumber(first));
  const cJSON *node = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "nodes"), first->valueint);
  ASSERT(node != NULL);
  ASSERT(cJSON_GetObjectItem(node, "matrix") == NULL);
  const cJSON *rot = cJSON_GetObjectItem(node, "rotation");
  cJSON *copy = rot ? cJSON_Duplicate(rot, 1) : NULL;
  cJSON_Delete(j);
  return copy;
}

TEST(a_session_created_with_up_z_keeps_it_through_kill_9_and_its_glb_is_rotated_upright) {
  const char *dir = test_tmp_path("durable-up");
  harness h;
  char b[8];
  harness_start_on(&h, dir, "demo", "--demo");
  harness_rpc_done(&h, "session.create", "{\"session\":\"scan\",\"mesh\":\"demo\",\"up\":\"z\"}");
  ASSERT_UP(info_up(&h, "mesh.info", "scan", b), "z");
  ASSERT_UP(info_up(&h, "state.get", "scan", b), "z");
  ASSERT_UP(info_up(&h, "mesh.info", "demo", b), "y"); /* not asked: Y-up, as always */
  /* Anything else is refused, with a reason, and opens nothing. */
  static const char *const bad[] = {"\"x\"", "\"Z\"", "\"-z\"", "1", "null", "\"\""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char params[256], err[512];
    snprintf(params, sizeof(params), "{\"session\":\"bad\",\"mesh\":\"demo\",\"up\":%s}", bad[i]);
    ASSERT_EQ(harness_rpc_err(&h, "session.create", params, err, sizeof(err)), -32602);
    ASSERT_STR_CONTAINS(err, "\"up\" must be \"y\" or \"z\"");
  }
  harness_rpc_done(&h, "sculpt.set", "{\"session\":\"scan\",\"offsets\":{\"10\":[0.001,0,0]}}");
  seen s0, s1;
  look(&h, "scan", &s0);
  harness_kill(&h);
  harness_start_on(&h, dir, "scan", NULL);
  ASSERT_UP(info_up(&h, "mesh.info", "scan", b), "z");
  ASSERT_UP(info_up(&h, "mesh.info", "demo", b), "y");
  look(&h, "scan", &s1);
  assert_same(&s0, &s1); /* the file's coordinates: nothing was rotated in the session */
  /* GLB is Y-up by the spec: the Z-up session's root node turns -90° about X (x, y, z, w); the
   * Y-up one has no rotation. The vertex data is the session's either way. */
  size_t n = 0;
  uint8_t *glb = harness_download(&h, "scan", "glb", -1, &n);
  cJSON *rot = glb_root_rotation(glb, n);
  ASSERT(cJSON_GetArraySize(rot) == 4);
  const double want[4] = {-0.70710678, 0, 0, 0.70710678};
  for (int k = 0; k < 4; k++) ASSERT(fabs(cJSON_GetArrayItem(rot, k)->valuedouble - want[k]) < 1e-6);
  cJSON_Delete(rot);
  /* An importer that honours node transforms (assimp, as Blender does) sees it upright: its Y
   * range is the session's Z range, its Z range the session's Y range mirrored. */
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_write_file("scan-z.glb", glb, n), NULL, &m, err, sizeof(err)), err);
  cJSON *info = harness_rpc_ok(&h, "mesh.info", "{\"session\":\"scan\"}");
  const cJSON *bb = cJSON_GetObjectItem(info, "bbox");
  const cJSON *lo = cJSON_GetObjectItem(bb, "min"), *hi = cJSON_GetObjectItem(bb, "max");
  double eps = 1e-5;
  ASSERT(fabs(m->bbox_min[1] - cJSON_GetArrayItem(lo, 2)->valuedouble) < eps);
  ASSERT(fabs(m->bbox_max[1] - cJSON_GetArrayItem(hi, 2)->valuedouble) < eps);
  ASSERT(fabs(m->bbox_min[2] + cJSON_GetArrayItem(hi, 1)->valuedouble) < eps);
  ASSERT(fabs(m->bbox_max[2] + cJSON_GetArrayItem(lo, 1)->valuedouble) < eps);
  cJSON_Delete(info);
  mesh_destroy(m);
  free(glb);
  glb = harness_download(&h, "demo", "glb", -1, &n);
  ASSERT(glb_root_rotation(glb, n) == NULL);
  free(glb);
  harness_stop(&h);
  seen_fini(&s0), seen_fini(&s1);
}

/* "Automatic where the format says": an FBX file whose GlobalSettings say UpAxis 2 opens Z-up
 * when session.create names no axis (test_mesh_blob.c checks the file says so); one that says Y,
 * and a PLY that says nothing, open Y-up; a given `up` wins. The axis is the session's, stored:
 * kill -9 and a restart keep it. --up and a config entry's "up" name it for the operator's
 * sessions. */
TEST(an_fbx_file_that_says_z_is_up_opens_z_up_unless_told_otherwise_and_keeps_it_through_kill_9) {
  const char *dir = test_tmp_path("durable-fbx-up");
  harness h;
  char b[8];
  harness_start_on(&h, dir, "demo", "--demo");
  cJSON *r = harness_rpc_ok(&h, "session.create", "{\"session\":\"zfbx\",\"mesh\":\"FBX/embedded_ascii/box.FBX\"}");
  ASSERT_UP(cJSON_GetObjectItem(r, "up")->valuestring, "z"); /* the answer says it too */
  cJSON_Delete(r);
  harness_rpc_done(&h, "session.create", "{\"session\":\"yfbx\",\"mesh\":\"FBX/box.fbx\"}");
  harness_rpc_done(&h, "session.create", "{\"session\":\"told\",\"mesh\":\"FBX/embedded_ascii/box.FBX\",\"up\":\"y\"}");
  harness_rpc_done(&h, "session.create", "{\"session\":\"ply\",\"mesh\":\"PLY/cube.ply\"}");
  ASSERT_UP(info_up(&h, "mesh.info", "zfbx", b), "z");
  ASSERT_UP(info_up(&h, "state.get", "zfbx", b), "z");
  ASSERT_UP(info_up(&h, "mesh.info", "yfbx", b), "y");
  ASSERT_UP(info_up(&h, "mesh.info", "told", b), "y");
  ASSERT_UP(info_up(&h, "mesh.info", "ply", b), "y");
  harness_kill(&h);
  harness_start_on(&h, dir, "zfbx", NULL);
  ASSERT_UP(info_up(&h, "mesh.info", "zfbx", b), "z");
  ASSERT_UP(info_up(&h, "mesh.info", "told", b), "y");
  harness_stop(&h);

  const char *const cli[] = {"--mesh", test_assimp_model("PLY/cube.ply"), "--up", "z", "--session", "cli",
                             "--mesh", test_assimp_model("FBX/embedded_ascii/box.FBX"), "--session", "auto", NULL};
  harness_start(&h, "auto", cli);
  ASSERT_UP(info_up(&h, "mesh.info", "cli", b), "z");
  ASSERT_UP(info_up(&h, "mesh.info", "auto", b), "z");
  harness_stop(&h);

  char cfg[1600];
  snprintf(cfg, sizeof(cfg), "{\"sessions\": [{\"session\": \"conf\", \"mesh\": \"%s\", \"up\": \"z\"}, "
           "{\"session\": \"plain\", \"mesh\": \"%s\"}]}", test_assimp_model("PLY/cube.ply"),
           test_assimp_model("PLY/cube.ply"));
  const char *const conf[] = {"--config", test_write_file("up.json", cfg, strlen(cfg)), NULL};
  harness_start(&h, "plain", conf);
  ASSERT_UP(info_up(&h, "mesh.info", "conf", b), "z");
  ASSERT_UP(info_up(&h, "mesh.info", "plain", b), "y");
  harness_stop(&h);
}

/* A session keeps the textures its file brought: imported by the worker (a separate process,
 * confined to the mesh folder), listed by mesh.info with the sizes the in-process import gives,
 * and back after kill -9 from the store's copy of the mesh, not the file. */
TEST(a_sessions_textures_come_from_the_import_worker_and_survive_kill_9) {
  const char *dir = test_tmp_path("durable-textures");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  harness_rpc_done(&h, "session.create", "{\"session\":\"spider\",\"mesh\":\"OBJ/spider.obj\"}");
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_assimp_model("OBJ/spider.obj"), NULL, &m, err, sizeof(err)), err);
  ASSERT(m->image_count == 4);
  for (int pass = 0; pass < 2; pass++) {
    cJSON *info = harness_rpc_ok(&h, "mesh.info", "{\"session\":\"spider\"}");
    const cJSON *tex = cJSON_GetObjectItem(info, "textures");
    ASSERT_EQ(cJSON_GetArraySize(tex), (int)m->image_count);
    for (uint32_t i = 0; i < m->image_count; i++) {
      const cJSON *t = cJSON_GetArrayItem(tex, (int)i);
      ASSERT(strcmp(cJSON_GetObjectItem(t, "name")->valuestring, m->images[i].name) == 0);
      ASSERT_EQ(cJSON_GetObjectItem(t, "width")->valueint, (int)m->images[i].width);
      ASSERT_EQ(cJSON_GetObjectItem(t, "height")->valueint, (int)m->images[i].height);
    }
    cJSON_Delete(info);
    /* --demo dresses the head (mesh_demo_dress): its skin is stored with it, like a file's */
    info = harness_rpc_ok(&h, "mesh.info", "{\"session\":\"demo\"}");
    tex = cJSON_GetObjectItem(info, "textures");
    ASSERT_EQ(cJSON_GetArraySize(tex), 1);
    ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(tex, 0), "name")->valuestring, "demo-skin.png") == 0);
    ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tex, 0), "width")->valueint, (int)MESH_DEMO_SKIN_W);
    ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(tex, 0), "height")->valueint, (int)MESH_DEMO_SKIN_H);
    cJSON_Delete(info);
    if (pass == 0) {
      harness_kill(&h);
      harness_start_on(&h, dir, "spider", NULL);
    }
  }
  harness_stop(&h);
  mesh_destroy(m);
}
