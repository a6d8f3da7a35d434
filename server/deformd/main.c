/*
 * main.c — the deformd command line.
 *
 *   deformd [options]              run the service (see usage())
 *   deformd --check-mesh FILE      import FILE, print its mesh_stats as one JSON object
 *                                  (--isolate: in the import worker, with its limits)
 *   deformd --write-demo OUT.glb   write the bundled demo head
 *   deformd --check-store DIR      check DIR's store read-only: every session restored, exit 0/1/2
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
#include "srv_server.h"
#include "srv_restore.h"
#include "deformd.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: deformd [options]            run the server\n"
          "       deformd --check-mesh FILE [--isolate]  print a mesh's statistics as JSON (exit 2\n"
          "                             if refused); --isolate parses it in the import worker\n"
          "       deformd --write-demo OUT.glb  write the bundled demo head (GLB or OBJ)\n"
          "       deformd --check-store DIR  check a data directory's store, writing nothing (exit 0\n"
          "                             sound, 1 not a store it can read, 2 damaged)\n"
          "\n"
          "server options:\n"
          "  --listen ADDR          numeric address to listen on (default 127.0.0.1)\n"
          "  --stream-port N        binary stream port (default 7450; 0 = any free port)\n"
          "  --rpc-port N           JSON-RPC port (default 7451; 0 = any free port)\n"
          "  --http-port N|off      the browser viewer (http://ADDR:N/?session=NAME) and its\n"
          "                         WebSockets /ws/stream and /ws/rpc (default 7452; 0 = any\n"
          "                         free port; off: none)\n"
          "  --config FILE          JSON config file (options given after it override it)\n"
          "  --demo                 open a session named 'demo' on the bundled demo head\n"
          "  --mesh FILE --session NAME   open a session on FILE at start (repeatable)\n"
          "  --data DIR|none        where sessions and their history are kept (default\n"
          "                         $XDG_DATA_HOME/deformd, else ~/.local/share/deformd); none:\n"
          "                         memory only, nothing survives a restart\n"
          "  --durability normal|full  normal (default): a killed process loses nothing it\n"
          "                         acknowledged; full: neither does a power loss (an fsync per\n"
          "                         commit)\n"
          "  --history-days N       fold operations older than N days into a checkpoint (0: keep all)\n"
          "  --undo-depth N         steps per author and session that stay undoable (default 100)\n"
          "\n"
          "access (docs/json-api.md, Security):\n"
          "  $DEFORMD_ADMIN_TOKEN   the first administrator's token (read, then removed from the\n"
          "                         environment); once any token exists, both ports require one\n"
          "  --admin-token-file F   the same from the first line of file F\n"
          "  --insecure             listen on another address than loopback without any token\n"
          "  --tls-cert F --tls-key F   TLS on both ports (PEM certificate chain and key)\n"
          "\n"
          "files clients may name (the data directory, see --data):\n"
          "  --mesh-dir PATH        a read-only folder session.create also reads (repeatable)\n"
          "  --max-upload-mb N      largest mesh.upload (512)\n"
          "\n"
          "  --token T              editors (HELLO) and JSON-RPC clients (auth) must present it\n"
          "\n"
          "many machines (docs/operations.md):\n"
          "  --redis redis://HOST:PORT[/DB]  publish every session's frames to a Redis Stream and\n"
          "                         join the registry (a primary), or with --relay follow them\n"
          "  --relay                own no session: serve viewers from Redis, forward edits and\n"
          "                         JSON-RPC calls to each session's primary (needs --redis)\n"
          "  --node-id ID           this node's name in the registry (default ADVERTISE:STREAM_PORT)\n"
          "  --advertise ADDR       the numeric address other nodes and clients reach this one at\n"
          "                         (default: the --listen address)\n"
          "  --snapshot-every K     store a session's snapshot after every K frames (100)\n"
          "  --stream-maxlen N      stream entries kept per session, about (10 x K, at least 1000)\n"
          "  --lease-ms N           the node's lease in the registry (3000): a primary silent this\n"
          "                         long is 'lost' to relays\n"
          "  --redis-timeout-ms N   a Redis command unanswered this long means Redis stalled: the\n"
          "                         connection is dropped and made again (5000)\n"
          "  --replica-idle-ms N    a relay loads a session when a viewer (or, with its primary\n"
          "                         lost, a read) first asks for it, and drops it once it has\n"
          "                         had no viewer this long (60000; 0: keeps it)\n"
          "  --log-level L          error, warn, info (default) or debug\n"
          "  --soft-limit BYTES     per-connection unsent bytes before frames coalesce (1 MiB)\n"
          "  --hard-limit BYTES     per-connection unsent bytes before a drop (256 MiB)\n"
          "  --slow-timeout-ms N    a connection lagging this long is dropped (10000)\n"
          "  --hello-timeout-ms N   a stream connection must send HELLO within this, and a JSON-RPC\n"
          "                         one pass auth when there is a token (10000)\n"
          "  --idle-timeout-ms N    close connections silent this long with nothing in flight\n"
          "                         (600000; 0: never)\n"
          "  --max-unauth-input BYTES  unfinished input held before HELLO/auth, and for viewers (65536)\n"
          "  --max-input-mb N       unfinished input held for all connections together (256)\n"
          "  --max-connections N    further connections are refused with a reason (4096)\n"
          "  --max-request BYTES    largest JSON-RPC request line (64 MiB)\n"
          "  --max-frame BYTES      largest incoming binary frame (64 MiB)\n"
          "  --max-vertices N       refuse meshes with more vertices (5000000)\n"
          "  --session-memory-mb N  gestures' estimated memory per session; deform.begin past it\n"
          "                         is refused (2048)\n"
          "  --client-memory-mb N   the same per connection that began them (1024)\n"
          "  --max-brush-work N     a brush stroke's work in touched vertices (samples x vertices\n"
          "                         each moves, + samples x vertices / 100 for the scans); more is\n"
          "                         refused (50000000: 5 to 13 s of one core here)\n"
          "  --max-file-mb N        refuse mesh files larger than this (1024; 0: no limit)\n"
          "  --import-memory-mb N   memory the import worker may add to what it maps at start (4096)\n"
          "  --import-seconds N     CPU and wall-clock seconds the import worker may take (60)\n"
          "  --import-workers N     import workers running at once; later imports wait (4)\n"
          "  --import-worker-path P the program run as the import worker (default: this deformd)\n"
          "  --reserve-mb N|auto    heap kept written for gestures, so that a gesture's first\n"
          "                         touch of memory does not fault (auto: ~2.5 KiB per vertex of\n"
          "                         the largest session, at most 1 GiB; 0: none)\n"
          "\n"
          "The chosen ports are printed on stdout as one line, stream_port=N rpc_port=M http_port=H\n"
          "(without http_port when it is off), once the sessions named by --demo and --session are\n"
          "open (or have failed to open).\n");
}

static int parse_size(const char *opt, const char *text, double max, double *out) {
  char *end = NULL;
  double v = strtod(text, &end);
  if (!end || *end || !(v >= 0) || v > max || v != (double)(long long)v) {
    fprintf(stderr, "deformd: %s needs an integer between 0 and %.0f, not '%s'\n", opt, max, text);
    return -1;
  }
  *out = v;
  return 0;
}

static int run_server(srv_config *cfg) {
  /* A peer that closes while we write must not kill the process: writes report EPIPE. */
  signal(SIGPIPE, SIG_IGN);
  srv_log_set_level(cfg->log_level);
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

int main(int argc, char **argv) {
  /* The import worker is a child of the server: it needs none of the server's set-up. */
  if (argc > 1 && strcmp(argv[1], "--import-worker") == 0) return srv_import_worker_main(argc, argv);
  dfm_init(); /* before any thread: one heap that keeps the gestures' pages, BLAS on one thread */
  const char *check = NULL, *demo_out = NULL, *pending_mesh = NULL, *check_store = NULL;
  int isolate = 0;
  srv_config cfg;
  srv_config_init(&cfg);
  int rc = 1;
  /* The administrator's token from the environment, which then forgets it: the import workers
   * and anything else started later do not inherit it. A file or the config file read below
   * replaces it. */
  const char *env_token = getenv("DEFORMD_ADMIN_TOKEN");
  if (env_token && env_token[0]) {
    char err[256];
    if (srv_config_set_admin_token(&cfg, env_token, err, sizeof(err))) {
      fprintf(stderr, "deformd: DEFORMD_ADMIN_TOKEN: %s\n", err);
      goto out;
    }
  }
  if (env_token) explicit_bzero((char *)env_token, strlen(env_token)); /* /proc/PID/environ too */
  unsetenv("DEFORMD_ADMIN_TOKEN");
  /* The worker is this program unless the command line or the config names another. */
  char exe[4096];
  size_t exe_len = sizeof(exe);
  if (uv_exepath(exe, &exe_len) == 0) cfg.import_worker_path = strdup(exe);
  /* --config first, so that the other options override what it says. */
  for (int i = 1; i + 1 < argc; i++) {
    if (strcmp(argv[i], "--config") == 0) {
      char err[256];
      if (srv_config_load(&cfg, argv[i + 1], err, sizeof(err)) != 0) {
        fprintf(stderr, "deformd: %s\n", err);
        goto out;
      }
    }
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    double v;
    if (strcmp(a, "--check-mesh") == 0 && val) {
      check = argv[++i];
    } else if (strcmp(a, "--check-store") == 0 && val) {
      check_store = argv[++i];
    } else if (strcmp(a, "--write-demo") == 0 && val) {
      demo_out = argv[++i];
    } else if (strcmp(a, "--config") == 0 && val) {
      i++;
    } else if (strcmp(a, "--listen") == 0 && val) {
      snprintf(cfg.listen, sizeof(cfg.listen), "%s", argv[++i]);
    } else if (strcmp(a, "--stream-port") == 0 && val) {
      if (parse_size(a, argv[++i], 65535, &v)) goto out;
      cfg.stream_port = (int)v;
    } else if (strcmp(a, "--rpc-port") == 0 && val) {
      if (parse_size(a, argv[++i], 65535, &v)) goto out;
      cfg.rpc_port = (int)v;
    } else if (strcmp(a, "--http-port") == 0 && val) {
      if (strcmp(argv[++i], "off") == 0) cfg.http_port = -1;
      else if (parse_size(a, argv[i], 65535, &v)) goto out;
      else cfg.http_port = (int)v;
    } else if (strcmp(a, "--demo") == 0) {
      if (srv_config_add_session(&cfg, "demo", "demo")) goto out;
    } else if (strcmp(a, "--mesh") == 0 && val) {
      pending_mesh = argv[++i];
    } else if (strcmp(a, "--session") == 0 && val) {
      if (!pending_mesh) {
        fprintf(stderr, "deformd: --session NAME must follow --mesh FILE\n");
        goto out;
      }
      if (srv_config_add_session(&cfg, argv[++i], pending_mesh)) goto out;
      pending_mesh = NULL;
    } else if (strcmp(a, "--data") == 0 && val) {
      if (srv_config_set_data(&cfg, argv[++i])) goto out;
    } else if (strcmp(a, "--durability") == 0 && val) {
      if (srv_config_set_durability(&cfg, argv[++i])) {
        fprintf(stderr, "deformd: --durability takes normal or full\n");
        goto out;
      }
    } else if (strcmp(a, "--history-days") == 0 && val) {
      char *end = NULL;
      cfg.history_days = strtod(argv[++i], &end);
      if (!end || *end || !(cfg.history_days >= 0) || cfg.history_days > 1e6) {
        fprintf(stderr, "deformd: --history-days needs a number of days >= 0, not '%s'\n", argv[i]);
        goto out;
      }
    } else if (strcmp(a, "--undo-depth") == 0 && val) {
      if (parse_size(a, argv[++i], 100000, &v)) goto out; /* (0 counts as 1) */
      cfg.undo_depth = (uint32_t)v;
    } else if (strcmp(a, "--token") == 0) {
      fprintf(stderr, "deformd: --token is not accepted: a token on the command line is visible to every user of "
                      "this machine (/proc/PID/cmdline). Give the administrator's token in the environment "
                      "(DEFORMD_ADMIN_TOKEN) or in a file (--admin-token-file FILE)\n");
      goto out;
    } else if (strcmp(a, "--admin-token-file") == 0 && val) {
      char err[512];
      if (srv_config_read_admin_token(&cfg, argv[++i], err, sizeof(err))) {
        fprintf(stderr, "deformd: %s\n", err);
        goto out;
      }
    } else if (strcmp(a, "--insecure") == 0) {
      cfg.insecure = 1;
    } else if ((strcmp(a, "--tls-cert") == 0 || strcmp(a, "--tls-key") == 0) && val) {
      char **slot = a[6] == 'c' ? &cfg.tls_cert : &cfg.tls_key;
      free(*slot);
      *slot = strdup(argv[++i]);
    } else if (strcmp(a, "--mesh-dir") == 0 && val) {
      if (srv_config_add_mesh_dir(&cfg, argv[++i])) goto out;
    } else if (strcmp(a, "--max-upload-mb") == 0 && val) {
      if (parse_size(a, argv[++i], 1048576, &v) || v == 0) goto out;
      cfg.max_upload_mb = (uint32_t)v;
    } else if (strcmp(a, "--redis") == 0 && val) {
      if (strncmp(argv[i + 1], "redis://", 8) != 0) {
        fprintf(stderr, "deformd: --redis takes redis://HOST:PORT[/DB], not '%s'\n", argv[i + 1]);
        goto out;
      }
      if (srv_config_set_string(&cfg.redis, argv[++i])) goto out;
    } else if (strcmp(a, "--relay") == 0) {
      cfg.relay = 1;
    } else if (strcmp(a, "--node-id") == 0 && val) {
      if (!argv[i + 1][0] || strlen(argv[i + 1]) > 80) {
        fprintf(stderr, "deformd: --node-id takes a name of 1 to 80 bytes\n");
        goto out;
      }
      if (srv_config_set_string(&cfg.node_id, argv[++i])) goto out;
    } else if (strcmp(a, "--advertise") == 0 && val) {
      snprintf(cfg.advertise, sizeof(cfg.advertise), "%s", argv[++i]);
    } else if (strcmp(a, "--snapshot-every") == 0 && val) {
      if (parse_size(a, argv[++i], 1e6, &v) || v < 1) goto out;
      cfg.snapshot_every = (uint32_t)v;
    } else if (strcmp(a, "--stream-maxlen") == 0 && val) {
      if (parse_size(a, argv[++i], 1e9, &v)) goto out;
      cfg.stream_maxlen = (uint32_t)v;
    } else if (strcmp(a, "--lease-ms") == 0 && val) {
      if (parse_size(a, argv[++i], 3600000, &v) || v < 300) goto out;
      cfg.lease_ms = (uint32_t)v;
    } else if (strcmp(a, "--replica-idle-ms") == 0 && val) {
      if (parse_size(a, argv[++i], 86400000, &v)) goto out;
      cfg.replica_idle_ms = (uint32_t)v;
    } else if (strcmp(a, "--redis-timeout-ms") == 0 && val) {
      if (parse_size(a, argv[++i], 3600000, &v) || v < 100) goto out;
      cfg.redis_timeout_ms = (uint32_t)v;
    } else if (strcmp(a, "--log-level") == 0 && val) {
      if (srv_log_parse_level(argv[++i], &cfg.log_level)) {
        fprintf(stderr, "deformd: --log-level takes error, warn, info or debug\n");
        goto out;
      }
    } else if (strcmp(a, "--soft-limit") == 0 && val) {
      if (parse_size(a, argv[++i], 1e12, &v)) goto out;
      cfg.soft_limit = (size_t)v;
    } else if (strcmp(a, "--hard-limit") == 0 && val) {
      if (parse_size(a, argv[++i], 1e12, &v)) goto out;
      cfg.hard_limit = (size_t)v;
    } else if (strcmp(a, "--slow-timeout-ms") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v)) goto out;
      cfg.slow_timeout_ms = (uint32_t)v;
    } else if (strcmp(a, "--hello-timeout-ms") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v)) goto out;
      cfg.hello_timeout_ms = (uint32_t)v;
    } else if (strcmp(a, "--idle-timeout-ms") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v)) goto out;
      cfg.idle_timeout_ms = (uint32_t)v;
    } else if (strcmp(a, "--max-unauth-input") == 0 && val) {
      if (parse_size(a, argv[++i], 1e12, &v)) goto out;
      cfg.max_unauth_input = (size_t)v;
    } else if (strcmp(a, "--max-input-mb") == 0 && val) {
      if (parse_size(a, argv[++i], 1048576, &v)) goto out;
      cfg.max_input_total = (size_t)v << 20;
    } else if (strcmp(a, "--max-connections") == 0 && val) {
      if (parse_size(a, argv[++i], 1e6, &v)) goto out;
      cfg.max_connections = (uint32_t)v;
    } else if (strcmp(a, "--max-request") == 0 && val) {
      if (parse_size(a, argv[++i], 1e12, &v)) goto out;
      cfg.max_request = (size_t)v;
    } else if (strcmp(a, "--max-frame") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v)) goto out;
      cfg.max_frame = (uint32_t)v;
    } else if (strcmp(a, "--max-vertices") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v) || v == 0) goto out;
      cfg.max_vertices = (uint32_t)v;
    } else if (strcmp(a, "--isolate") == 0) {
      isolate = 1;
    } else if (strcmp(a, "--session-memory-mb") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v)) goto out;
      cfg.session_memory_mb = (uint32_t)v;
    } else if (strcmp(a, "--client-memory-mb") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v)) goto out;
      cfg.client_memory_mb = (uint32_t)v;
    } else if (strcmp(a, "--max-brush-work") == 0 && val) {
      if (parse_size(a, argv[++i], 1e15, &v)) goto out;
      cfg.max_brush_work = (uint64_t)v;
    } else if (strcmp(a, "--max-file-mb") == 0 && val) {
      if (parse_size(a, argv[++i], 4294967295.0, &v)) goto out;
      cfg.max_file_mb = (uint32_t)v;
    } else if (strcmp(a, "--import-memory-mb") == 0 && val) {
      if (parse_size(a, argv[++i], 1048576, &v) || v == 0) goto out;
      cfg.import_memory_mb = (uint32_t)v;
    } else if (strcmp(a, "--import-seconds") == 0 && val) {
      if (parse_size(a, argv[++i], 86400, &v) || v == 0) goto out;
      cfg.import_seconds = (uint32_t)v;
    } else if (strcmp(a, "--import-workers") == 0 && val) {
      if (parse_size(a, argv[++i], 1024, &v) || v == 0) goto out;
      cfg.import_workers = (uint32_t)v;
    } else if (strcmp(a, "--import-worker-path") == 0 && val) {
      free(cfg.import_worker_path);
      cfg.import_worker_path = strdup(argv[++i]);
    } else if (strcmp(a, "--reserve-mb") == 0 && val) {
      if (strcmp(argv[++i], "auto") == 0) cfg.reserve_mb = -1;
      else if (parse_size(a, argv[i], 1048576, &v)) goto out;
      else cfg.reserve_mb = (int64_t)v;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      rc = 0;
      goto out;
    } else {
      fprintf(stderr, "deformd: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      goto out;
    }
  }
  if (pending_mesh) {
    fprintf(stderr, "deformd: --mesh %s needs --session NAME\n", pending_mesh);
    goto out;
  }
  if (cfg.relay && !cfg.redis) {
    fprintf(stderr, "deformd: --relay needs --redis redis://HOST:PORT[/DB] (what it relays)\n");
    goto out;
  }
  if (cfg.relay && cfg.session_count) {
    fprintf(stderr, "deformd: a relay owns no session: --demo, --mesh and \"sessions\" belong on a primary\n");
    goto out;
  }
  if (!cfg.tls_cert != !cfg.tls_key) {
    fprintf(stderr, "deformd: --tls-cert and --tls-key go together\n");
    goto out;
  }
  if (check) rc = check_mesh(check, &cfg, isolate);
  else if (check_store) rc = srv_check_store_main(check_store, cfg.max_vertices);
  else if (demo_out) rc = write_demo(demo_out);
  else if (cfg.admin_token && strncmp(cfg.admin_token, "change-me", 9) == 0)
    /* The example configs' placeholder is printed in every copy of them: never a secret. */
    fprintf(stderr, "deformd: the administrator's token is still the example's placeholder (\"change-me...\"): "
                    "give your own (openssl rand -hex 24) in DEFORMD_ADMIN_TOKEN, --admin-token-file or the config's "
                    "\"token\"\n");
  else rc = run_server(&cfg);
out:
  srv_config_fini(&cfg);
  return rc;
}
