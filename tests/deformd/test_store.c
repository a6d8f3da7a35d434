/*
 * test_store.c — the store's file as an operator sees it: the WAL checkpointed while deformd
 * serves (and bounded under steady edits), schema versions (an older store migrated, a newer
 * one refused), a foreign file left alone, a damaged session listed as damaged, and
 * `deformd --check-store`. The oracle is the files themselves (their sizes and bytes, read with
 * stat and the sqlite3 library) and what clients see: never the store's own code.
 */
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

static const char *store_dir(const char *name) {
  static char buf[4][1024];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 1024, "%s/%s", test_tmpdir(), name);
  return p;
}

static const char *db_file(const char *dir, const char *suffix) {
  static char buf[4][1200];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 1200, "%s/deformd.sqlite3%s", dir, suffix);
  return p;
}

static long long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static double now_s(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void start_on(harness *h, const char *dir, const char *wait, const char *extra) {
  const char *args[8] = {"--data", dir, NULL};
  int n = 2;
  if (extra) args[n++] = extra;
  args[n] = NULL;
  harness_start(h, wait, args);
}

static void rpc(harness *h, const char *method, const char *params) { cJSON_Delete(harness_rpc_ok(h, method, params)); }

/* Runs deformd with `args` (ports 0) until it exits (at most 30 s); its stderr goes to *log
 * (malloc'ed, caller frees). Returns its exit status, or -1 when it did not exit. */
static int run_deformd(const char *const *args, char **log) {
  const char *bin = getenv("DEFORMD_BIN");
  ASSERT(bin != NULL);
  static int count;
  char log_path[1200];
  snprintf(log_path, sizeof(log_path), "%s/run-%d.log", test_tmpdir(), count++);
  const char *argv[32];
  int n = 0;
  argv[n++] = bin;
  const char *fixed[] = {"--stream-port", "0", "--rpc-port", "0", "--http-port", "0", NULL};
  for (int i = 0; fixed[i]; i++) argv[n++] = fixed[i];
  for (int i = 0; args[i] && n < 30; i++) argv[n++] = args[i];
  argv[n] = NULL;
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 2), dup2(fd, 1);
    unsetenv("DEFORMD_ADMIN_TOKEN");
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  int status = 0, exited = 0;
  for (int i = 0; i < 300 && !exited; i++) {
    if (waitpid(pid, &status, WNOHANG) == pid) exited = 1;
    else usleep(100000);
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  size_t len = 0;
  *log = (char *)test_read_file(log_path, &len);
  return exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void sql(const char *dir, const char *text) {
  sqlite3 *db = NULL;
  ASSERT(sqlite3_open(db_file(dir, ""), &db) == SQLITE_OK);
  char *msg = NULL;
  int rc = sqlite3_exec(db, text, NULL, NULL, &msg);
  if (rc != SQLITE_OK) test__fail(__FILE__, __LINE__, "%s: %s", text, msg ? msg : "?");
  sqlite3_close(db);
}

static long long sql_int(const char *dir, const char *text) {
  sqlite3 *db = NULL;
  long long v = -1;
  if (sqlite3_open_v2(db_file(dir, ""), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, text, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return v;
}

/* ---- WAL checkpoints ------------------------------------------------------------------------- */

#define WAL_BOUND (16ll << 20) /* four times the size a checkpoint starts at */
#define MAIN_GOAL (24ll << 20) /* the edits go on until the main file holds this much */

TEST(the_wal_is_checkpointed_while_serving_and_stays_bounded_under_steady_edits) {
  const char *dir = store_dir("wal");
  harness h;
  start_on(&h, dir, "demo", "--demo");
  /* Steady edits of 2,000 vertices each (records of some 14 KB): the WAL would pass its bound
   * long before the main file reaches its goal if nothing copied it back. */
  size_t cap = 2000 * 48 + 256;
  char *p = malloc(cap);
  long long wal_max = 0, main_size = 0;
  double t0 = now_s();
  int i = 0;
  for (; now_s() - t0 < 45 && main_size < MAIN_GOAL; i++) {
    size_t k = (size_t)snprintf(p, cap, "{\"session\":\"demo\",\"offsets\":{");
    for (int v = 0; v < 2000; v++)
      k += (size_t)snprintf(p + k, cap - k, "%s\"%d\":[%.6f,0,0]", v ? "," : "", v * 7, 0.0001 * ((i + v) % 97 + 1));
    snprintf(p + k, cap - k, "}}");
    rpc(&h, "sculpt.set", p);
    long long w = file_size(db_file(dir, "-wal"));
    if (w > wal_max) wal_max = w;
    main_size = file_size(db_file(dir, ""));
    if (wal_max > WAL_BOUND) break;
  }
  free(p);
  fprintf(stderr, "%d edits in %.1f s: main file %lld bytes, WAL at most %lld bytes\n", i, now_s() - t0, main_size,
          wal_max);
  ASSERT(wal_max <= WAL_BOUND);
  ASSERT(main_size >= MAIN_GOAL);
  /* Once the edits stop, the next checkpoint leaves the WAL empty or small. */
  for (int k = 0; k < 50 && file_size(db_file(dir, "-wal")) > (4ll << 20); k++) usleep(100000);
  ASSERT(file_size(db_file(dir, "-wal")) <= (4ll << 20));
  harness_stop(&h);
}

/* ---- schema versions --------------------------------------------------------------------------- */

TEST(a_store_of_a_newer_schema_is_refused_naming_both_versions_and_left_byte_identical) {
  const char *dir = store_dir("future");
  harness h;
  start_on(&h, dir, "demo", "--demo");
  rpc(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}");
  harness_stop(&h);
  /* What a later deformd might have made of it. */
  sql(dir, "PRAGMA user_version = 7; CREATE TABLE future(x); ALTER TABLE sessions ADD COLUMN extra TEXT;");
  size_t n0 = 0, n1 = 0;
  uint8_t *before = test_read_file(db_file(dir, ""), &n0);
  char *log = NULL;
  const char *args[] = {"--data", dir, "--demo", NULL};
  int status = run_deformd(args, &log);
  ASSERT(status > 0);
  ASSERT_STR_CONTAINS(log, "schema version 7");
  ASSERT_STR_CONTAINS(log, "this deformd's 2");
  uint8_t *after = test_read_file(db_file(dir, ""), &n1);
  ASSERT_EQ(n0, n1);
  ASSERT(memcmp(before, after, n0) == 0);
  ASSERT_EQ(sql_int(dir, "PRAGMA user_version"), 7);
  free(before), free(after), free(log);
}

TEST(a_foreign_sqlite_file_is_refused_and_left_byte_identical) {
  const char *dir = store_dir("foreign");
  mkdir(dir, 0700);
  sql(dir, "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES ('mine');");
  size_t n0 = 0, n1 = 0;
  uint8_t *before = test_read_file(db_file(dir, ""), &n0);
  char *log = NULL;
  const char *args[] = {"--data", dir, NULL};
  int status = run_deformd(args, &log);
  ASSERT(status > 0);
  ASSERT_STR_CONTAINS(log, "is not a deformd store");
  uint8_t *after = test_read_file(db_file(dir, ""), &n1);
  ASSERT_EQ(n0, n1);
  ASSERT(memcmp(before, after, n0) == 0);
  ASSERT_EQ(file_size(db_file(dir, "-wal")), -1);
  free(before), free(after), free(log);
}

TEST(a_store_of_schema_version_1_is_migrated_and_its_sessions_open_unchanged) {
  const char *dir = store_dir("v1");
  harness h;
  start_on(&h, dir, "demo", "--demo");
  rpc(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.25}}");
  rpc(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"10\":[0.001,0,0]}}");
  cJSON *s0 = harness_rpc_ok(&h, "sculpt.get", "{\"session\":\"demo\"}");
  cJSON *t0 = harness_rpc_ok(&h, "targets.list", "{\"session\":\"demo\"}");
  harness_stop(&h);
  /* Version 1 is the schema before versions: no step rows, checkpoints without history. */
  sql(dir, "DROP TABLE steps; ALTER TABLE checkpoints DROP COLUMN history; PRAGMA user_version = 1;");
  ASSERT_EQ(sql_int(dir, "PRAGMA user_version"), 1);
  start_on(&h, dir, "demo", "--demo");
  cJSON *s1 = harness_rpc_ok(&h, "sculpt.get", "{\"session\":\"demo\"}");
  cJSON *t1 = harness_rpc_ok(&h, "targets.list", "{\"session\":\"demo\"}");
  ASSERT(cJSON_Compare(s0, s1, 1));
  ASSERT(cJSON_Compare(t0, t1, 1));
  /* It takes edits and undoes after the upgrade. */
  rpc(&h, "hello", "{\"author\":\"ana\"}");
  rpc(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.75}}");
  rpc(&h, "history.undo", "{\"session\":\"demo\"}");
  harness_stop(&h);
  ASSERT_EQ(sql_int(dir, "PRAGMA user_version"), 2);
  ASSERT(sql_int(dir, "SELECT count(*) FROM steps") >= 1);
  ASSERT(sql_int(dir, "SELECT count(*) FROM checkpoints WHERE history IS NOT NULL") >= 1);
  cJSON_Delete(s0), cJSON_Delete(s1), cJSON_Delete(t0), cJSON_Delete(t1);
}
