/*
 * bench_durable.c — `deform-bench durable`: what the durable store costs editors, and what it
 * keeps.
 *
 *   deform-bench durable [--editors N] [--rate HZ] [--seconds S] [--ops N] [--modes none,normal,full]
 *                        [--json] [--deformd PATH]
 *
 * For each mode (--data none, --durability normal, --durability full) a fresh deformd --demo
 * serves N editors (default 10), each on its own JSON-RPC connection at HZ requests a second
 * (default 60): a third set weights (weights.set), a third drag an ARAP gesture of their own
 * (deform.drag, one deform.begin each), a third brush (brush.stroke, 3 samples). Each request is
 * timed from send to answer — the answer comes once its operation is committed — and the run
 * reports p50/p99 per kind, the operations committed per second, and from the store file the
 * bytes of the log per operation and per changed vertex (offset records).
 *
 * Then (--ops N, default 100000, 0 to skip) a session gets N small operations from 16
 * connections as fast as they are answered, deformd is killed (SIGKILL) and started again: the
 * restart time is from exec to the ports line, which deformd prints once every session is back.
 *
 * DOES NOT compare against a goal: docs/performance.md states the goals beside the figures.
 */
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"

#define MAX_SAMPLES 100000

typedef struct editor {
  int rpc_port, index, kind; /* kind: 0 weights, 1 drag, 2 brush */
  double rate, seconds;
  double *lat_ms;
  uint32_t n;
  uint32_t errors;
  char err[256];
} editor;

static const char *const kind_names[3] = {"weights", "drag", "brush"};

/* Vertices of the demo head that each ARAP editor drags (spread over the face and the head). */
static const uint32_t picks[] = {20400, 12000, 30000, 5000, 25000, 35000, 8000, 16000, 40000, 1000};

static cJSON *params_for(const editor *e, uint32_t i) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "session", "demo");
  double t = i / e->rate;
  if (e->kind == 0) {
    static const char *const targets[] = {"jaw_open", "smile_L", "smile_R", "blink_L", "blink_R", "brow_up_L"};
    cJSON *w = cJSON_AddObjectToObject(p, "weights");
    cJSON_AddNumberToObject(w, targets[(e->index + i) % 6], 0.5 + 0.5 * sin(t * 3 + e->index));
  } else if (e->kind == 1) {
    cJSON_AddNumberToObject(p, "gesture", 100 + e->index);
    double tr[3] = {0.004 * sin(t * 2), 0.004 * cos(t * 2), 0.0};
    cJSON_AddItemToObject(p, "translate", cJSON_CreateDoubleArray(tr, 3));
  } else {
    cJSON_AddStringToObject(p, "brush", "smooth");
    cJSON_AddNumberToObject(p, "radius", 0.015);
    cJSON_AddNumberToObject(p, "strength", 0.2);
    cJSON *a = cJSON_AddArrayToObject(p, "samples");
    for (int k = 0; k < 3; k++) {
      double c[3] = {0.02 * sin(t + e->index) + 0.002 * k, 0.02 * cos(t + e->index), 0.1};
      cJSON *smp = cJSON_CreateObject();
      cJSON_AddItemToObject(smp, "center", cJSON_CreateDoubleArray(c, 3));
      cJSON_AddItemToArray(a, smp);
    }
  }
  return p;
}

static uint64_t now_ns(void) { return client_now_ns(); }

static void *editor_main(void *arg) {
  editor *e = arg;
  client_conn c;
  if (client_connect(&c, "127.0.0.1", e->rpc_port, e->err, sizeof(e->err)) != 0) return NULL;
  cJSON *r = NULL, *er = NULL;
  char name[32];
  snprintf(name, sizeof(name), "editor%d", e->index);
  cJSON *h = cJSON_CreateObject();
  cJSON_AddStringToObject(h, "author", name);
  client_rpc(&c, "hello", h, 10000, &r, &er);
  cJSON_Delete(h), cJSON_Delete(r), cJSON_Delete(er);
  if (e->kind == 1) {
    char begin[256];
    snprintf(begin, sizeof(begin), "{\"session\":\"demo\",\"gesture\":%d,\"pick\":%u,\"handle_radius\":0.005,"
             "\"roi_radius\":0.03}", 100 + e->index, picks[e->index % 10]);
    cJSON *p = cJSON_Parse(begin);
    if (client_rpc(&c, "deform.begin", p, 60000, &r, &er) != 0) e->errors++;
    cJSON_Delete(p), cJSON_Delete(r), cJSON_Delete(er);
  }
  uint64_t start = now_ns(), period = (uint64_t)(1e9 / e->rate);
  uint32_t total = (uint32_t)(e->seconds * e->rate);
  for (uint32_t i = 0; i < total && !g_stop && e->n < MAX_SAMPLES; i++) {
    uint64_t due = start + i * period, t = now_ns();
    if (t < due) {
      struct timespec ts = {(time_t)((due - t) / 1000000000ull), (long)((due - t) % 1000000000ull)};
      nanosleep(&ts, NULL);
    }
    cJSON *p = params_for(e, i);
    uint64_t t0 = now_ns();
    int rc = client_rpc(&c, e->kind == 0 ? "weights.set" : e->kind == 1 ? "deform.drag" : "brush.stroke", p, 60000,
                        &r, &er);
    uint64_t t1 = now_ns();
    cJSON_Delete(p), cJSON_Delete(r), cJSON_Delete(er);
    if (rc) {
      e->errors++;
      if (rc != CLIENT_ERPC) break;
      continue;
    }
    e->lat_ms[e->n++] = (double)(t1 - t0) / 1e6;
  }
  if (e->kind == 1) {
    char end[128];
    snprintf(end, sizeof(end), "{\"session\":\"demo\",\"gesture\":%d}", 100 + e->index);
    cJSON *p = cJSON_Parse(end);
    client_rpc(&c, "deform.end", p, 60000, &r, &er);
    cJSON_Delete(p), cJSON_Delete(r), cJSON_Delete(er);
  }
  client_close(&c);
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(double *v, uint32_t n, double p) {
  if (!n) return NAN;
  qsort(v, n, sizeof(double), cmp_double);
  return v[(uint32_t)fmin(n - 1, floor(p * n))];
}

/* Figures from the store file: operations, body bytes, and for offset records (their first
 * byte is the op kind 2, SET_OFFSETS) bytes and changed vertices. */
typedef struct log_figures {
  double ops, bytes, offset_bytes, offset_vertices, file_bytes;
} log_figures;

static int read_log(const char *dir, log_figures *f) {
  memset(f, 0, sizeof(*f));
  char path[1200];
  snprintf(path, sizeof(path), "%s/deformd.sqlite3", dir);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return -1;
  sqlite3_stmt *s = NULL;
  int ok = sqlite3_prepare_v2(db,
                              "SELECT count(*), total(length(body)), total(CASE WHEN substr(body, 1, 1) = x'02' THEN "
                              "length(body) END), total(CASE WHEN substr(body, 1, 1) = x'02' THEN changed END) FROM ops",
                              -1, &s, NULL) == SQLITE_OK &&
           sqlite3_step(s) == SQLITE_ROW;
  if (ok) {
    f->ops = sqlite3_column_double(s, 0);
    f->bytes = sqlite3_column_double(s, 1);
    f->offset_bytes = sqlite3_column_double(s, 2);
    f->offset_vertices = sqlite3_column_double(s, 3);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  struct stat st;
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof(path), "%s/deformd.sqlite3%s", dir, k ? "-wal" : "");
    if (stat(path, &st) == 0) f->file_bytes += (double)st.st_size;
  }
  return ok ? 0 : -1;
}

typedef struct opts {
  int editors, json;
  double rate, seconds;
  long ops;
  char modes[64];
  char deformd[4096];
} opts;

static int run_mode(const opts *o, const char *mode, const char *dir, const char *cmdline) {
  char err[512];
  const char *args[10] = {"--demo", "--data", strcmp(mode, "none") == 0 ? "none" : dir, "--reserve-mb", "0", NULL};
  int n = 5;
  if (strcmp(mode, "none") != 0) args[n++] = "--durability", args[n++] = mode;
  args[n] = NULL;
  bench_child child;
  if (bench_child_start(o->deformd, args, &child, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench durable: %s\n", err);
    return 1;
  }
  if (bench_wait_session(child.rpc_port, "demo") != 0) {
    fprintf(stderr, "deform-bench durable: the demo session did not open\n");
    bench_child_stop(&child);
    return 1;
  }
  editor *ed = calloc((size_t)o->editors, sizeof(editor));
  pthread_t *th = calloc((size_t)o->editors, sizeof(pthread_t));
  for (int i = 0; i < o->editors; i++) {
    ed[i] = (editor){child.rpc_port, i, i % 3, o->rate, o->seconds, malloc(sizeof(double) * MAX_SAMPLES), 0, 0, ""};
    pthread_create(&th[i], NULL, editor_main, &ed[i]);
  }
  for (int i = 0; i < o->editors; i++) pthread_join(th[i], NULL);
  bench_child_stop(&child); /* commits what is left, writes a checkpoint */
  double *all[3];
  uint32_t cnt[3] = {0, 0, 0}, errors = 0;
  for (int k = 0; k < 3; k++) all[k] = malloc(sizeof(double) * MAX_SAMPLES * (size_t)o->editors);
  for (int i = 0; i < o->editors; i++) {
    memcpy(all[ed[i].kind] + cnt[ed[i].kind], ed[i].lat_ms, sizeof(double) * ed[i].n);
    cnt[ed[i].kind] += ed[i].n;
    errors += ed[i].errors;
  }
  log_figures lf = {0};
  if (strcmp(mode, "none") != 0) read_log(dir, &lf);
  double p50[3], p99[3];
  for (int k = 0; k < 3; k++) p50[k] = pct(all[k], cnt[k], 0.5), p99[k] = pct(all[k], cnt[k], 0.99);
  if (o->json) {
    printf("{\"command\":\"%s\",\"mode\":\"%s\",\"editors\":%d,\"rate\":%g,\"seconds\":%g,\"errors\":%u", cmdline, mode,
           o->editors, o->rate, o->seconds, errors);
    for (int k = 0; k < 3; k++)
      printf(",\"%s\":{\"answers\":%u,\"p50_ms\":%.3f,\"p99_ms\":%.3f}", kind_names[k], cnt[k], p50[k], p99[k]);
    if (strcmp(mode, "none") != 0)
      printf(",\"ops\":%.0f,\"ops_per_s\":%.1f,\"log_bytes_per_op\":%.1f,\"bytes_per_changed_vertex\":%.2f,"
             "\"file_bytes\":%.0f",
             lf.ops, lf.ops / o->seconds, lf.ops ? lf.bytes / lf.ops : 0,
             lf.offset_vertices ? lf.offset_bytes / lf.offset_vertices : 0, lf.file_bytes);
    printf("}\n");
  } else {
    printf("%-7s", mode);
    for (int k = 0; k < 3; k++) printf("  %-7s p50 %7.2f p99 %7.2f ms (%u)", kind_names[k], p50[k], p99[k], cnt[k]);
    if (strcmp(mode, "none") != 0)
      printf("\n         %.0f ops (%.0f/s), %.1f log bytes/op, %.2f bytes/changed vertex, file %.1f MB", lf.ops,
             lf.ops / o->seconds, lf.ops ? lf.bytes / lf.ops : 0,
             lf.offset_vertices ? lf.offset_bytes / lf.offset_vertices : 0, lf.file_bytes / 1048576.0);
    printf("%s\n", errors ? "  (some requests failed)" : "");
  }
  for (int i = 0; i < o->editors; i++) free(ed[i].lat_ms);
  for (int k = 0; k < 3; k++) free(all[k]);
  free(ed);
  free(th);
  return 0;
}

/* ---- restart of a long history ------------------------------------------------------------------- */

typedef struct filler {
  int rpc_port, index;
  long todo;
} filler;

static void *filler_main(void *arg) {
  filler *f = arg;
  client_conn c;
  char err[256];
  if (client_connect(&c, "127.0.0.1", f->rpc_port, err, sizeof(err)) != 0) return NULL;
  for (long i = 0; i < f->todo && !g_stop; i++) {
    char p[160];
    if (i % 2) snprintf(p, sizeof(p), "{\"session\":\"demo\",\"weights\":{\"jaw_open\":%.6f}}", (double)(i % 1000) / 1000);
    else snprintf(p, sizeof(p), "{\"session\":\"demo\",\"offsets\":{\"%ld\":[%.6f,0,0]}}", (f->index * 997 + i) % 40000,
                  (double)(i % 500) * 1e-6);
    cJSON *params = cJSON_Parse(p), *r = NULL, *e = NULL;
    int rc = client_rpc(&c, i % 2 ? "weights.set" : "sculpt.set", params, 60000, &r, &e);
    cJSON_Delete(params), cJSON_Delete(r), cJSON_Delete(e);
    if (rc) break;
  }
  client_close(&c);
  return NULL;
}

static double time_start(const opts *o, const char *dir, bench_child *c) {
  const char *args[] = {"--demo", "--data", dir, "--reserve-mb", "0", NULL};
  char err[512];
  uint64_t t0 = client_now_ns();
  if (bench_child_start(o->deformd, args, c, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench durable: %s\n", err);
    return -1;
  }
  return (double)(client_now_ns() - t0) / 1e6;
}

static int run_restart(const opts *o, const char *dir, const char *cmdline) {
  bench_child child;
  if (time_start(o, dir, &child) < 0 || bench_wait_session(child.rpc_port, "demo") != 0) return 1;
  enum { FILLERS = 16 };
  filler f[FILLERS];
  pthread_t th[FILLERS];
  uint64_t t0 = client_now_ns();
  for (int i = 0; i < FILLERS; i++) {
    f[i] = (filler){child.rpc_port, i, o->ops / FILLERS + (i < o->ops % FILLERS)};
    pthread_create(&th[i], NULL, filler_main, &f[i]);
  }
  for (int i = 0; i < FILLERS; i++) pthread_join(th[i], NULL);
  double fill_s = (double)(client_now_ns() - t0) / 1e9;
  bench_child_kill(&child);
  log_figures lf;
  read_log(dir, &lf);
  double killed_ms = time_start(o, dir, &child);
  bench_child_stop(&child);
  double clean_ms = time_start(o, dir, &child);
  bench_child_stop(&child);
  if (o->json)
    printf("{\"command\":\"%s\",\"restart\":{\"ops\":%ld,\"fill_ops_per_s\":%.0f,\"after_kill_ms\":%.1f,"
           "\"after_stop_ms\":%.1f,\"file_bytes\":%.0f}}\n",
           cmdline, o->ops, o->ops / fill_s, killed_ms, clean_ms, lf.file_bytes);
  else
    printf("restart of a session with %ld operations (%.0f ops/s to write them): %.1f ms after kill -9, %.1f ms "
           "after a clean stop; store %.1f MB\n",
           o->ops, o->ops / fill_s, killed_ms, clean_ms, lf.file_bytes / 1048576.0);
  return killed_ms < 0 || clean_ms < 0;
}

int bench_durable_main(int argc, char **argv, const char *cmdline) {
  opts o = {10, 0, 60.0, 10.0, 100000, "none,normal,full", ""};
  snprintf(o.deformd, sizeof(o.deformd), "%s", argv[0]);
  char *slash = strrchr(o.deformd, '/');
  if (slash) snprintf(slash + 1, sizeof(o.deformd) - (size_t)(slash + 1 - o.deformd), "deformd");
  else snprintf(o.deformd, sizeof(o.deformd), "deformd");
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) o.json = 1;
    else if (strcmp(a, "--editors") == 0 && v) o.editors = atoi(argv[++i]);
    else if (strcmp(a, "--rate") == 0 && v) o.rate = atof(argv[++i]);
    else if (strcmp(a, "--seconds") == 0 && v) o.seconds = atof(argv[++i]);
    else if (strcmp(a, "--ops") == 0 && v) o.ops = atol(argv[++i]);
    else if (strcmp(a, "--modes") == 0 && v) snprintf(o.modes, sizeof(o.modes), "%s", argv[++i]);
    else if (strcmp(a, "--deformd") == 0 && v) snprintf(o.deformd, sizeof(o.deformd), "%s", argv[++i]);
    else {
      fprintf(stderr, "usage: deform-bench durable [--editors N] [--rate HZ] [--seconds S] [--ops N] "
                      "[--modes none,normal,full] [--json] [--deformd PATH]\n");
      return 2;
    }
  }
  if (o.editors < 1 || o.editors > 64 || !(o.rate > 0) || !(o.seconds > 0) || o.ops < 0) {
    fprintf(stderr, "deform-bench durable: need 1..64 editors, a positive rate and duration, ops >= 0\n");
    return 2;
  }
  char base[] = "/tmp/deform-bench-durable-XXXXXX";
  if (!mkdtemp(base)) {
    perror("deform-bench durable: mkdtemp");
    return 1;
  }
  if (!o.json) printf("# %s\n", cmdline);
  int rc = 0;
  char modes[64];
  snprintf(modes, sizeof(modes), "%s", o.modes);
  for (char *m = strtok(modes, ","); m && !rc && !g_stop; m = strtok(NULL, ",")) {
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/%s", base, m);
    rc = run_mode(&o, m, dir, cmdline);
  }
  if (!rc && o.ops > 0 && !g_stop) {
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/restart", base);
    rc = run_restart(&o, dir, cmdline);
  }
  char cmd[1200];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
  if (system(cmd) != 0) fprintf(stderr, "deform-bench durable: could not remove %s\n", base);
  return rc;
}
