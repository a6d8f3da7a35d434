/*
 * main.c — the deformd command line.
 *
 *   deformd [options]              run the service (the options: core/srv_options.c)
 *   deformd --check-mesh FILE      import FILE, print its mesh_stats as one JSON object
 *                                  (--isolate: in the import worker, with its limits)
 *   deformd --check-store DIR      check DIR's store read-only: every session restored, exit 0/1/2
 *   deformd --write-demo OUT.glb   write the bundled demo head
 *   deformd --import-worker ...    the child the server parses untrusted files in (srv_import.c)
 *
 * DOES NOT contain logic of its own: each mode is a call into shared/ or server/.
 */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfm.h"
#include "mesh.h"
#include <uv.h>
#include "srv_error.h"
#include "srv_log.h"
#include "srv_json.h"
#include "srv_import.h"
#include "srv_config.h"
#include "srv_options.h"
#include "srv_server.h"
#include "srv_restore.h"
#include "deformd.h"

static int run_server(srv_config *cfg) {
  /* A peer that closes while we write must not kill the process: writes report EPIPE. */
  signal(SIGPIPE, SIG_IGN);
  srv_log_set_level(cfg->log_level);
  srv_log(SRV_LOG_INFO, "OpenBLAS kernels: %s%s", dfm_blas_core(), getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE)" : "");
  uv_loop_t loop;
  uv_loop_init(&loop);
  srv_server *srv = calloc(1, sizeof(*srv));
  int started = srv && srv_server_start(srv, &loop, cfg) == 0;
  if (started) uv_run(&loop, UV_RUN_DEFAULT);
  if (srv) srv_server_fini(srv);
  uv_run(&loop, UV_RUN_DEFAULT); /* the close callbacks of what fini closed */
  free(srv);
  if (uv_loop_close(&loop) != 0) srv_log(SRV_LOG_WARN, "loop closed with handles still open");
  if (started) srv_log(SRV_LOG_INFO, "stopped");
  return started ? 0 : 1;
}

/* Prints {"error": why} on stdout and a readable line on stderr; returns exit status 2. */
static int refuse(const char *path, const char *why) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "error", why);
  char *s = cJSON_PrintUnformatted(o);
  if (s) printf("%s\n", s);
  free(s);
  cJSON_Delete(o);
  fprintf(stderr, "deformd: error: %s: %s\n", path, why);
  return 2;
}

/* What an isolated --check-mesh got back from its import worker. */
typedef struct checked {
  int status;
  uint8_t *blob;
  size_t len;
  char why[MESH_ERR_LEN + 128];
} checked;

static void on_checked(void *arg, int status, uint8_t *blob, size_t len, const char *why) {
  checked *c = arg;
  c->status = status;
  c->blob = blob;
  c->len = len;
  snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
}

/* Imports `path` in an import worker (srv_import.c) on a private loop. 0 with *out, or exit 2. */
static int import_isolated(const char *path, const srv_config *cfg, mesh **out) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  srv_importer im;
  srv_import_limits il = {cfg->import_worker_path, cfg->import_memory_mb, cfg->import_seconds, cfg->max_vertices,
                          cfg->max_file_mb, 1, 1};
  srv_importer_init(&im, &loop, &il);
  checked c = {SRV_EINTERNAL, NULL, 0, ""};
  int rc = srv_import_start(&im, path, NULL, 0, on_checked, &c, c.why, sizeof(c.why));
  if (rc == 0) uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (rc || c.status) {
    free(c.blob);
    return refuse(path, c.why);
  }
  char err[MESH_ERR_LEN];
  rc = mesh_blob_read(c.blob, c.len, cfg->max_vertices, out, err, sizeof(err));
  free(c.blob);
  return rc ? refuse(path, err) : 0;
}

static int check_mesh(const char *path, const srv_config *cfg, int isolate) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  mesh_import_opts opts = {.max_vertices = cfg->max_vertices, .max_file_bytes = (uint64_t)cfg->max_file_mb << 20};
  int rc = isolate ? import_isolated(path, cfg, &m) : mesh_import(path, &opts, &m, err, sizeof(err));
  if (rc) return isolate ? rc : refuse(path, err);
  mesh_topology t;
  mesh_stats s;
  rc = mesh_topology_init(&t, m, NULL, 0.0);
  if (rc == 0) {
    rc = mesh_compute_stats(m, &t, &s);
    mesh_topology_fini(&t);
  }
  cJSON *o = rc == 0 ? srv_json_mesh_info(m, &s) : NULL;
  char *text = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  mesh_destroy(m);
  if (!text) return refuse(path, mesh_strerror(rc ? rc : MESH_ENOMEM));
  printf("%s\n", text);
  free(text);
  return 0;
}

static int write_demo(const char *path) {
  mesh *m = NULL;
  char err[MESH_ERR_LEN] = "";
  int rc = mesh_demo_head(&m);
  if (rc == 0) rc = mesh_export(m, NULL, path, MESH_FORMAT_AUTO, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "deformd: error: cannot write demo head: %s\n", err[0] ? err : mesh_strerror(rc));
    mesh_destroy(m);
    return 1;
  }
  fprintf(stderr, "deformd: wrote demo head (%u vertices, %u triangles, %u targets) to %s\n",
          m->vertex_count, m->triangle_count, m->target_count, path);
  mesh_destroy(m);
  return 0;
}

/* The administrator's token from the environment, which then forgets it: the import workers and
 * anything else started later do not inherit it. A file or the config file read later replaces
 * it. Returns 0, or 1 (exit status) after saying why. */
static int take_env_token(srv_config *cfg) {
  const char *env_token = getenv("DEFORMD_ADMIN_TOKEN");
  int rc = 0;
  if (env_token && env_token[0]) {
    char err[256];
    if (srv_config_set_admin_token(cfg, env_token, err, sizeof(err))) {
      fprintf(stderr, "deformd: DEFORMD_ADMIN_TOKEN: %s\n", err);
      rc = 1;
    }
  }
  if (env_token) explicit_bzero((char *)env_token, strlen(env_token)); /* /proc/PID/environ too */
  unsetenv("DEFORMD_ADMIN_TOKEN");
  return rc;
}

/* Serves, unless the administrator's token is the example configs' placeholder: it is printed in
 * every copy of them, never a secret. */
static int serve(srv_config *cfg) {
  if (cfg->admin_token && strncmp(cfg->admin_token, "change-me", 9) == 0) {
    fprintf(stderr, "deformd: the administrator's token is still the example's placeholder (\"change-me...\"): "
                    "give your own (openssl rand -hex 24) in DEFORMD_ADMIN_TOKEN, --admin-token-file or the config's "
                    "\"token\"\n");
    return 1;
  }
  return run_server(cfg);
}

int main(int argc, char **argv) {
  dfm_blas_kernels(argv); /* may start deformd again: before the token leaves the environment */
  /* The import worker is a child of the server: it needs none of the server's set-up, and the
   * rest of its command line is its own (srv_import.c reads it). */
  if (argc > 1 && strcmp(argv[1], "--import-worker") == 0) return srv_import_worker_main(argc, argv);
  dfm_init(); /* before any thread: one heap that keeps the gestures' pages, BLAS on one thread */
  srv_config cfg;
  srv_config_init(&cfg);
  int rc = take_env_token(&cfg);
  /* The worker is this program unless the command line or the config names another. */
  char exe[4096];
  size_t exe_len = sizeof(exe);
  if (uv_exepath(exe, &exe_len) == 0) cfg.import_worker_path = strdup(exe);
  srv_cli cli = {.cfg = &cfg};
  char err[1024];
  int usage = 0;
  int parsed = rc ? 0 : srv_options_parse_argv(&cli, argc, argv, &usage, err, sizeof(err));
  if (rc) {
    /* the environment's token was refused: said above */
  } else if (parsed == 1) {
    srv_options_usage(stdout);
  } else if (parsed) {
    fprintf(stderr, "deformd: %s\n", err);
    if (usage) srv_options_usage(stderr);
    rc = 1;
  } else if (cli.check_mesh) {
    rc = check_mesh(cli.check_mesh, &cfg, cli.isolate);
  } else if (cli.check_store) {
    rc = srv_check_store_main(cli.check_store, cfg.max_vertices);
  } else if (cli.write_demo) {
    rc = write_demo(cli.write_demo);
  } else {
    rc = serve(&cfg);
  }
  srv_config_fini(&cfg);
  return rc;
}
