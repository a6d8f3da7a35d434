/*
 * deformctl.c — command-line client of deformd.
 *
 *   deformctl [--rpc HOST:PORT] call METHOD 'JSON-PARAMS'
 *   deformctl [--rpc HOST:PORT] METHOD [ARGS]          shortcuts, e.g.
 *       deformctl weights.set demo smile_L=0.8 blink_R=1
 *   deformctl [--stream HOST:PORT] watch SESSION [--count N] [--seconds S] [--max-rate HZ]
 *                                              [--tolerance T | --quantised | --protocol 1] [--dump FILE.obj]
 *   deformctl undo|redo SESSION, history SESSION [--limit N] [--before V], revert SESSION V
 *   deformctl upload FILE [NAME]                     a local mesh into the server's meshes/
 *   deformctl download SESSION FILE.(obj|glb) [--version V]   a session's shape into a local file
 *
 * With --tls (and --tls-ca FILE) every connection is TLS and the server's certificate is
 * verified. A token comes from --token, --token-file FILE or $DEFORMD_TOKEN.
 *
 * Every JSON-RPC call is made as an author (--author, $DEFORMD_AUTHOR, else $USER, else the
 * account's name @ the host): undo and redo
 * act on that author's steps, across runs.
 *
 * Results are printed as one line of JSON (exit 0); errors as the JSON-RPC error object on
 * stdout and a readable line on stderr (exit 1).
 *
 * DOES NOT keep state between runs.
 */
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "client_replica.h"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: deformctl [--rpc HOST:PORT] [--stream HOST:PORT] [--token T | --token-file F]\n"
          "                 [--tls [--tls-ca FILE]] [--author NAME] COMMAND ...\n"
          "\n"
          "  call METHOD 'JSON'              any JSON-RPC method with its params\n"
          "  session.list | server.stats\n"
          "  session.create NAME MESH [UP]   MESH is \"demo\" or a mesh's name in the server's mesh folders\n"
          "                                  (its meshes/, --mesh-dir), e.g. MD2/faerie.md2; UP y (default)\n"
          "                                  or z: the file's axis that points up\n"
          "  session.close NAME\n"
          "  session.export NAME FILE        write the current shape into the server's exports/FILE\n"
          "  upload FILE [NAME]              send a local mesh file to the server's meshes/ (as NAME,\n"
          "                                  default its file name); then session.create S NAME\n"
          "  download SESSION FILE [--version V]\n"
          "                                  the session's shape (or version V) into the local FILE\n"
          "                                  (.obj or .glb)\n"
          "  mesh.info | targets.list | weights.get | state.get | sculpt.get NAME\n"
          "  weights.set NAME TARGET=VALUE ...\n"
          "  undo NAME | redo NAME          undo or redo your newest step (history.undo / history.redo)\n"
          "  history NAME [--limit N] [--before V]\n"
          "                                  the session's steps, newest first (history.list)\n"
          "  revert NAME VERSION            bring the session back to VERSION, as one undoable step\n"
          "  watch SESSION [--count N] [--seconds S] [--max-rate HZ] [--tolerance T | --quantised |\n"
          "                --protocol 1] [--dump FILE.obj]\n"
          "                                  follow a session like a viewer; one line per frame, and\n"
          "                                  last the line \"N frames\" (updates received after the\n"
          "                                  snapshot). --count N ends it after N updates (changes\n"
          "                                  someone makes after the snapshot; 0: the snapshot alone),\n"
          "                                  --seconds S after S seconds; it says on stderr what it\n"
          "                                  waits for. Protocol 2 lossless unless asked otherwise:\n"
          "                                  --quantised (the session's default tolerance) or\n"
          "                                  --tolerance T (mesh units); --max-rate HZ asks the server\n"
          "                                  for at most HZ updates a second\n"
          "\n"
          "Defaults: --rpc 127.0.0.1:7451 --stream 127.0.0.1:7450 (or $DEFORMD_RPC, $DEFORMD_STREAM);\n"
          "each takes several addresses, comma-separated (nodes of a cluster: the first that answers\n"
          "is used, and watch moves to the next when one goes away);\n"
          "--token T, --token-file F (its first line) or $DEFORMD_TOKEN: the access token (both ports);\n"
          "--tls: speak TLS and verify the server's certificate (against --tls-ca FILE, else the\n"
          "system's CAs);\n"
          "--author NAME (or $DEFORMD_AUTHOR, else $USER, else ACCOUNT@HOST) names you in the session's history.\n");
}

static int print_outcome(int rc, cJSON *result, cJSON *error) {
  if (rc != 0 && rc != CLIENT_ERPC) {
    fprintf(stderr, "deformctl: no answer from the server (%s)\n", client_strerror(rc));
    return 1;
  }
  if (rc == CLIENT_ERPC) {
    char *text = cJSON_PrintUnformatted(error);
    printf("%s\n", text ? text : "{}");
    free(text);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
    fprintf(stderr, "deformctl: error %d: %s\n", cJSON_IsNumber(code) ? code->valueint : 0,
            cJSON_IsString(msg) ? msg->valuestring : "?");
    cJSON_Delete(error);
    return 1;
  }
  char *text = cJSON_PrintUnformatted(result);
  printf("%s\n", text ? text : "null");
  free(text);
  cJSON_Delete(result);
  return 0;
}

static const char *token, *author, *tls_ca;
static int tls_on;
static char token_buf[300];

/* --rpc and --stream take one address or several, comma-separated (the nodes of a cluster: any
 * of them finds a session's owner). Connects to the first that answers (with TLS when asked),
 * trying them in turn from `*which`; sets *which to the one reached. Returns 0, or 1 after
 * printing why. */
static int connect_any(const char *list, const char *opt, int *which, client_conn *c) {
  char addrs[16][256], err[512] = "";
  int n = 0;
  for (const char *p = list; *p && n < 16;) {
    size_t len = strcspn(p, ",");
    snprintf(addrs[n], sizeof(addrs[n]), "%.*s", (int)(len < 255 ? len : 255), p);
    if (len) n++;
    p += len + (p[len] == ',');
  }
  if (n == 0) {
    fprintf(stderr, "deformctl: %s wants HOST:PORT[,HOST:PORT...]\n", opt);
    return 1;
  }
  for (int k = 0; k < n; k++) {
    int i = (*which + k) % n, port;
    char host[256];
    if (client_parse_hostport(addrs[i], host, sizeof(host), &port)) {
      fprintf(stderr, "deformctl: %s wants HOST:PORT, not '%s'\n", opt, addrs[i]);
      return 1;
    }
    if (client_connect(c, host, port, err, sizeof(err)) == 0) {
      if (!tls_on || client_tls_start(c, host, tls_ca, 30000, err, sizeof(err)) == 0) {
        *which = i;
        return 0;
      }
      client_close(c);
    }
    if (n > 1) fprintf(stderr, "deformctl: %s: %s\n", addrs[i], err);
  }
  fprintf(stderr, "deformctl: %s\n", n > 1 ? "no address answered" : err);
  return 1;
}

static int address_count(const char *list) {
  int n = 1;
  for (const char *p = list; *p; p++) n += *p == ',';
  return n;
}

/* A JSON-RPC connection that has presented the token and named the author. 0, or the exit
 * status after saying why. */
static int rpc_open(const char *hostport, client_conn *c) {
  int which = 0;
  if (connect_any(hostport, "--rpc", &which, c)) return 1;
  cJSON *result, *error;
  int rc;
  if (token) { /* a server with tokens wants one before anything else */
    cJSON *auth = cJSON_CreateObject();
    cJSON_AddStringToObject(auth, "token", token);
    rc = client_rpc(c, "auth", auth, 30000, &result, &error);
    cJSON_Delete(auth);
    if (rc != 0) {
      client_close(c);
      return print_outcome(rc, result, error);
    }
    cJSON_Delete(result);
  }
  if (author && author[0]) { /* who did it: the history's author, undo's owner */
    cJSON *hello = cJSON_CreateObject();
    cJSON_AddStringToObject(hello, "author", author);
    rc = client_rpc(c, "hello", hello, 30000, &result, &error);
    cJSON_Delete(hello);
    cJSON_Delete(result);
    cJSON_Delete(error);
    if (rc != 0 && rc != CLIENT_ERPC) { /* an older server without hello answers an error: go on */
      client_close(c);
      return print_outcome(rc, NULL, NULL);
    }
  }
  return 0;
}

static int rpc_call(const char *hostport, const char *method, cJSON *params) {
  client_conn c;
  int status = rpc_open(hostport, &c);
  if (status) {
    cJSON_Delete(params);
    return status;
  }
  cJSON *result, *error;
  int rc = client_rpc(&c, method, params, 600000, &result, &error);
  cJSON_Delete(params);
  client_close(&c);
  return print_outcome(rc, result, error);
}

/* Shortcut arguments -> params. Returns NULL (after printing why) on bad arguments. */
static cJSON *shortcut_params(const char *method, int argc, char **argv, int *ok) {
  *ok = 1;
  cJSON *p = cJSON_CreateObject();
  if (strcmp(method, "session.list") == 0 || strcmp(method, "server.stats") == 0) {
    if (argc == 0) return p;
  } else if (strcmp(method, "session.create") == 0) {
    if (argc == 2 || argc == 3) {
      cJSON_AddStringToObject(p, "session", argv[0]);
      cJSON_AddStringToObject(p, "mesh", argv[1]);
      if (argc == 3) cJSON_AddStringToObject(p, "up", argv[2]); /* the server checks it: y or z */
      return p;
    }
  } else if (strcmp(method, "session.export") == 0) {
    if (argc == 2) {
      cJSON_AddStringToObject(p, "session", argv[0]);
      cJSON_AddStringToObject(p, "path", argv[1]);
      return p;
    }
  } else if (strcmp(method, "weights.set") == 0) {
    if (argc >= 2) {
      cJSON_AddStringToObject(p, "session", argv[0]);
      cJSON *w = cJSON_AddObjectToObject(p, "weights");
      for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        char *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : 0;
        if (!eq || eq == argv[i] || !end || *end || end == eq + 1) {
          fprintf(stderr, "deformctl: weights.set wants TARGET=VALUE, not '%s'\n", argv[i]);
          *ok = 0;
          cJSON_Delete(p);
          return NULL;
        }
        *eq = '\0';
        cJSON_AddNumberToObject(w, argv[i], v);
      }
      return p;
    }
  } else if (argc == 1) { /* every other shortcut takes just the session */
    cJSON_AddStringToObject(p, "session", argv[0]);
    return p;
  } else if (argc == 0) {
    return p;
  }
  fprintf(stderr, "deformctl: wrong arguments for %s (see deformctl --help)\n", method);
  *ok = 0;
  cJSON_Delete(p);
  return NULL;
}

/* undo|redo SESSION, history SESSION [--limit N] [--before V], revert SESSION VERSION */
static int history_command(const char *rpc, const char *cmd, int argc, char **argv) {
  cJSON *p = cJSON_CreateObject();
  const char *method = NULL;
  int ok = argc >= 1;
  if (ok) cJSON_AddStringToObject(p, "session", argv[0]);
  if (strcmp(cmd, "undo") == 0 || strcmp(cmd, "redo") == 0) {
    method = cmd[0] == 'u' ? "history.undo" : "history.redo";
    ok = ok && argc == 1;
  } else if (strcmp(cmd, "revert") == 0) {
    method = "history.revert";
    char *end = NULL;
    double v = ok && argc == 2 ? strtod(argv[1], &end) : -1;
    ok = ok && argc == 2 && end && !*end && v >= 0;
    if (ok) cJSON_AddNumberToObject(p, "version", v);
  } else {
    method = "history.list";
    for (int i = 1; ok && i < argc; i += 2) {
      char *end = NULL;
      double v = i + 1 < argc ? strtod(argv[i + 1], &end) : -1;
      ok = i + 1 < argc && end && !*end && v >= 0;
      if (ok && strcmp(argv[i], "--limit") == 0) cJSON_AddNumberToObject(p, "limit", v);
      else if (ok && strcmp(argv[i], "--before") == 0) cJSON_AddNumberToObject(p, "before_version", v);
      else ok = 0;
    }
  }
  if (!ok) {
    fprintf(stderr, "deformctl: %s SESSION%s\n", cmd,
            strcmp(cmd, "revert") == 0 ? " VERSION" : strcmp(cmd, "history") == 0 ? " [--limit N] [--before V]" : "");
    cJSON_Delete(p);
    return 1;
  }
  return rpc_call(rpc, method, p);
}

static const char *type_name(uint8_t t) {
  static const char *names[] = {"?", "HELLO", "WELCOME", "SNAPSHOT", "WEIGHTS", "DELTA",
                                "EDIT", "ERROR", "PING", "PONG", "BYE", "TARGET", "TARGET_META", "BULK", "PRESENCE", "TEXTURE"};
  return t <= PROTO_LAST_TYPE ? names[t] : t == PROTO_MASK ? "MASK" : "?";
}

typedef struct watch_opts {
  long count;       /* updates to wait for, < 0: no limit */
  double seconds;   /* stop after this long, <= 0: no limit */
  int protocol;     /* 1 or 2 */
  proto_hello_opts hello;
  const char *dump;
} watch_opts;

/* Follows a session; with several addresses, a connection that ends (a relay that died, a
 * shutdown, too slow) moves to the next one, and a BYE RESYNC (a relay reloaded the session)
 * joins again: each time from a new SNAPSHOT. */
static int watch(const char *hostport, const char *session, const watch_opts *wo) {
  long count = wo->count;
  const char *dump = wo->dump;
  char err[256];
  client_conn c;
  int which = 0, rejoins = 0, several = address_count(hostport) > 1;
  if (connect_any(hostport, "--stream", &which, &c)) return 1;
  signal(SIGINT, on_sigint);
  signal(SIGTERM, on_sigint);
  client_replica r;
  client_replica_init(&r);
  int status = 1;
  long live = 0;
  double latency_ms = -1;
  uint64_t last_ping = 0;
  uint32_t ping_seq = 0;
  proto_buf out;
  proto_buf_init(&out);
  uint64_t stop_at = 0;
  int said_waiting = 0;
join:
  if (client_hello2(&c, session, PROTO_ROLE_VIEWER, token, wo->protocol == 2 ? &wo->hello : NULL)) {
    fprintf(stderr, "deformctl: cannot send HELLO\n");
    goto done;
  }
  if (!stop_at) stop_at = wo->seconds > 0 ? client_now_ns() + (uint64_t)(wo->seconds * 1e9) : 0;
  for (;;) {
    if (interrupted || (stop_at && client_now_ns() >= stop_at)) {
      status = 0;
      break;
    }
    if (r.have_snapshot && client_now_ns() - last_ping > 200000000ull) {
      proto_ping p = {client_now_ns(), 0, ++ping_seq};
      proto_encode_ping(&out, PROTO_PING, &p);
      client_send_buf(&c, &out);
      last_ping = p.t0_ns;
    }
    proto_header h;
    const uint8_t *payload;
    int wait = 200;
    if (stop_at) {
      uint64_t now = client_now_ns();
      wait = now >= stop_at ? 0 : (stop_at - now) / 1000000 < 200 ? (int)((stop_at - now) / 1000000) + 1 : 200;
    }
    int rc = client_read_frame(&c, wait, &h, &payload, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) continue;
    int again = 0; /* join again: on the same address (RESYNC) or the next */
    if (rc) {
      fprintf(stderr, "deformctl: %s\n", err);
      if (!several) break;
      again = 2;
    }
    if (!again && h.type == PROTO_ERROR) {
      proto_error e;
      if (proto_decode_error(payload, h.length, &e) == 0 && e.request_id == 0 &&
          (e.code == PROTO_ERR_PRIMARY_LOST || e.code == PROTO_ERR_PRIMARY_BACK)) {
        /* A relay's status: the connection stays, so does the last state. */
        fprintf(stderr, "deformctl: status: %.*s\n", (int)e.message.len, e.message.ptr);
        continue;
      }
    }
    if (!again && h.type == PROTO_BYE) {
      proto_error e;
      if (proto_decode_error(payload, h.length, &e) == 0 &&
          (e.code == PROTO_ERR_RESYNC || (several && e.code != PROTO_ERR_SESSION_CLOSED))) {
        fprintf(stderr, "deformctl: BYE %u: %.*s\n", e.code, (int)e.message.len, e.message.ptr);
        again = e.code == PROTO_ERR_RESYNC ? 1 : 2;
      }
    }
    if (again) {
      client_close(&c);
      client_replica_fini(&r);
      client_replica_init(&r);
      latency_ms = -1;
      for (;;) {
        if (++rejoins > 100 || interrupted || (stop_at && client_now_ns() >= stop_at)) goto done;
        if (again == 2) which++;
        if (connect_any(hostport, "--stream", &which, &c) == 0) break;
        usleep(250000);
      }
      fprintf(stderr, "deformctl: joining again through address %d\n", which + 1);
      goto join;
    }
    if (h.type == PROTO_PONG) {
      proto_ping p;
      if (proto_decode_ping(payload, h.length, &p) == 0) latency_ms = (double)(client_now_ns() - p.t0_ns) / 2e6;
      continue;
    }
    if (h.type == PROTO_ERROR || h.type == PROTO_BYE) {
      proto_error e;
      if (proto_decode_error(payload, h.length, &e) == 0)
        fprintf(stderr, "deformctl: %s %u: %.*s\n", type_name(h.type), e.code, (int)e.message.len, e.message.ptr);
      status = h.type == PROTO_BYE ? 0 : 1;
      break;
    }
    if (h.type == PROTO_WELCOME) continue;
    if (client_replica_apply(&r, &h, payload, err, sizeof(err)) != 0) {
      fprintf(stderr, "deformctl: %s\n", err);
      break;
    }
    int is_live = h.type == PROTO_WEIGHTS || h.type == PROTO_DELTA || h.type == PROTO_TARGET ||
                  h.type == PROTO_TARGET_META;
    if (h.type == PROTO_SNAPSHOT || is_live) {
      if (latency_ms >= 0)
        printf("version=%llu type=%s bytes=%u%s latency_ms=%.3f\n", (unsigned long long)h.session_version,
               type_name(h.type), PROTO_HEADER_SIZE + h.length, h.flags & PROTO_FLAG_CATCHUP ? " catchup" : "",
               latency_ms);
      else
        printf("version=%llu type=%s bytes=%u%s latency_ms=-\n", (unsigned long long)h.session_version,
               type_name(h.type), PROTO_HEADER_SIZE + h.length, h.flags & PROTO_FLAG_CATCHUP ? " catchup" : "");
      fflush(stdout);
    }
    /* A catch-up is one update: only its last frame (without MORE) counts, so --dump never
     * writes a half-applied catch-up. */
    if (is_live && !(h.flags & PROTO_FLAG_MORE)) live++;
    if (r.have_snapshot && count >= 0 && live >= count) {
      status = 0;
      break;
    }
    if (h.type == PROTO_SNAPSHOT && !(h.flags & PROTO_FLAG_MORE) && !said_waiting) {
      /* On an idle session nothing more comes until someone edits: say what it waits for. */
      said_waiting = 1;
      if (count > 0)
        fprintf(stderr, "deformctl: joined %s at version %llu; waiting for %ld update%s (--count counts changes "
                "after the snapshot)%s\n", session, (unsigned long long)h.session_version, count - live,
                count - live == 1 ? "" : "s", stop_at ? "" : "; Ctrl-C stops");
      else if (count < 0)
        fprintf(stderr, "deformctl: joined %s at version %llu; following its updates%s\n", session,
                (unsigned long long)h.session_version, stop_at ? "" : " until Ctrl-C");
    }
  }
done:
  printf("%ld frames\n", live);
  fflush(stdout);
  if (dump && r.have_snapshot) {
    float *pos = malloc(sizeof(float) * 3 * ((size_t)r.mesh->vertex_count + 1));
    char merr[MESH_ERR_LEN] = "";
    if (!pos || client_replica_positions(&r, pos) != 0 ||
        mesh_export(r.mesh, pos, dump, MESH_FORMAT_AUTO, merr, sizeof(merr)) != 0) {
      fprintf(stderr, "deformctl: cannot write %s: %s\n", dump, merr);
      status = 1;
    }
    free(pos);
  }
  proto_buf_fini(&out);
  client_replica_fini(&r);
  client_close(&c);
  return status;
}

/* upload FILE [NAME] */
static int upload(const char *rpc, int argc, char **argv) {
  if (argc < 1 || argc > 2) {
    fprintf(stderr, "deformctl: upload FILE [NAME]\n");
    return 1;
  }
  const char *slash = strrchr(argv[0], '/');
  const char *name = argc == 2 ? argv[1] : slash ? slash + 1 : argv[0];
  client_conn c;
  int status = rpc_open(rpc, &c);
  if (status) return status;
  cJSON *last = NULL, *error = NULL;
  char err[512];
  int rc = client_upload_file(&c, argv[0], name, &last, &error, err, sizeof(err));
  client_close(&c);
  if (rc && rc != CLIENT_ERPC) {
    fprintf(stderr, "deformctl: upload %s: %s\n", argv[0], err);
    return 1;
  }
  return print_outcome(rc, last, error);
}

/* download SESSION FILE.(obj|glb) [--version V] */
static int download(const char *rpc, int argc, char **argv) {
  int64_t version = -1;
  char *end = NULL;
  if (argc == 4 && strcmp(argv[2], "--version") == 0) {
    double v = strtod(argv[3], &end);
    if (!end || *end || v < 0) argc = 0;
    else version = (int64_t)v;
  }
  if (argc != 2 && argc != 4) {
    fprintf(stderr, "deformctl: download SESSION FILE.(obj|glb) [--version V]\n");
    return 1;
  }
  client_conn c;
  int status = rpc_open(rpc, &c);
  if (status) return status;
  cJSON *info = NULL, *error = NULL;
  char err[512];
  int rc = client_download_file(&c, argv[0], argv[1], version, &info, &error, err, sizeof(err));
  client_close(&c);
  if (rc && rc != CLIENT_ERPC) {
    fprintf(stderr, "deformctl: download %s: %s\n", argv[0], err);
    return 1;
  }
  return print_outcome(rc, info, error);
}

/* The first line of a file (a token kept out of the command line and the environment). */
static const char *read_token_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f || !fgets(token_buf, sizeof(token_buf), f)) {
    if (f) fclose(f);
    return NULL;
  }
  fclose(f);
  token_buf[strcspn(token_buf, "\r\n")] = '\0';
  return token_buf;
}

/* The author calls are made as when neither --author nor $DEFORMD_AUTHOR names one: $USER, else
 * the account's name and the host (root in a container, cron and CI often have no $USER, and
 * without a name every call would be the server's anonymous-<connection>, so `deformctl undo`
 * would never find the edit just made). */
static const char *default_author(void) {
  static char buf[320];
  const char *user = getenv("USER");
  if (user && user[0]) return user;
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0 || !host[0]) snprintf(host, sizeof(host), "localhost");
  const struct passwd *pw = getpwuid(geteuid());
  if (pw && pw->pw_name && pw->pw_name[0]) snprintf(buf, sizeof(buf), "%s@%s", pw->pw_name, host);
  else snprintf(buf, sizeof(buf), "uid%u@%s", (unsigned)geteuid(), host);
  return buf;
}

int main(int argc, char **argv) {
  const char *rpc = getenv("DEFORMD_RPC") ? getenv("DEFORMD_RPC") : "127.0.0.1:7451";
  const char *stream = getenv("DEFORMD_STREAM") ? getenv("DEFORMD_STREAM") : "127.0.0.1:7450";
  token = getenv("DEFORMD_TOKEN");
  author = getenv("DEFORMD_AUTHOR") && getenv("DEFORMD_AUTHOR")[0] ? getenv("DEFORMD_AUTHOR") : default_author();
  int i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
    if (strcmp(argv[i], "--rpc") == 0 && i + 1 < argc) rpc = argv[++i];
    else if (strcmp(argv[i], "--stream") == 0 && i + 1 < argc) stream = argv[++i];
    else if (strcmp(argv[i], "--token") == 0 && i + 1 < argc) token = argv[++i];
    else if (strcmp(argv[i], "--token-file") == 0 && i + 1 < argc) {
      if (!(token = read_token_file(argv[++i]))) {
        fprintf(stderr, "deformctl: cannot read a token from %s\n", argv[i]);
        return 1;
      }
    } else if (strcmp(argv[i], "--tls") == 0) tls_on = 1;
    else if (strcmp(argv[i], "--tls-ca") == 0 && i + 1 < argc) tls_ca = argv[++i], tls_on = 1;
    else if (strcmp(argv[i], "--author") == 0 && i + 1 < argc) author = argv[++i];
    else if (strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "deformctl: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 1;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return 1;
  }
  const char *cmd = argv[i++];
  if (strcmp(cmd, "call") == 0) {
    if (i >= argc || i + 2 < argc) {
      fprintf(stderr, "deformctl: call METHOD ['JSON-PARAMS']\n");
      return 1;
    }
    cJSON *params = NULL;
    if (i + 1 < argc) {
      params = cJSON_Parse(argv[i + 1]);
      if (!params) {
        fprintf(stderr, "deformctl: the params are not valid JSON: %s\n", argv[i + 1]);
        return 1;
      }
    }
    return rpc_call(rpc, argv[i], params);
  }
  if (strcmp(cmd, "watch") == 0) {
    if (i >= argc) {
      fprintf(stderr, "deformctl: watch SESSION [--count N] [--seconds S] [--max-rate HZ] [--tolerance T | "
                      "--quantised | --protocol 1] [--dump FILE.obj]\n");
      return 1;
    }
    const char *session = argv[i++];
    watch_opts wo = {-1, 0, 2, {.codec = PROTO_CODEC_LOSSLESS}, NULL};
    for (; i < argc; i++) {
      const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
      char *end = NULL;
      if (strcmp(a, "--count") == 0 && v) {
        wo.count = strtol(argv[++i], &end, 10);
        if (!end || *end || wo.count < 0) {
          fprintf(stderr, "deformctl: --count needs a number >= 0\n");
          return 1;
        }
      } else if (strcmp(a, "--seconds") == 0 && v) {
        wo.seconds = strtod(argv[++i], &end);
        if (!end || *end || !(wo.seconds > 0 && wo.seconds <= 1e6)) {
          fprintf(stderr, "deformctl: --seconds needs a number of seconds > 0\n");
          return 1;
        }
      } else if (strcmp(a, "--max-rate") == 0 && v) {
        wo.hello.max_rate = strtof(argv[++i], &end);
        if (!end || *end || !(wo.hello.max_rate > 0 && wo.hello.max_rate <= 1e6)) {
          fprintf(stderr, "deformctl: --max-rate needs a rate in Hz > 0\n");
          return 1;
        }
      } else if (strcmp(a, "--tolerance") == 0 && v) {
        wo.hello.codec = PROTO_CODEC_QUANTISED;
        wo.hello.tolerance = strtof(argv[++i], &end);
        if (!end || *end || !(wo.hello.tolerance >= 0 && wo.hello.tolerance < 1e30f)) {
          fprintf(stderr, "deformctl: --tolerance needs a distance >= 0 in mesh units\n");
          return 1;
        }
      } else if (strcmp(a, "--quantised") == 0) {
        wo.hello.codec = PROTO_CODEC_QUANTISED;
      } else if (strcmp(a, "--lossless") == 0) {
        wo.hello.codec = PROTO_CODEC_LOSSLESS;
      } else if (strcmp(a, "--protocol") == 0 && v && (strcmp(v, "1") == 0 || strcmp(v, "2") == 0)) {
        wo.protocol = atoi(argv[++i]);
      } else if (strcmp(a, "--dump") == 0 && v) {
        wo.dump = argv[++i];
      } else {
        fprintf(stderr, "deformctl: unknown watch option '%s'\n", a);
        return 1;
      }
    }
    if (wo.protocol == 1 && (wo.hello.max_rate > 0 || wo.hello.codec != PROTO_CODEC_LOSSLESS)) {
      fprintf(stderr, "deformctl: --max-rate, --tolerance and --quantised need protocol 2\n");
      return 1;
    }
    return watch(stream, session, &wo);
  }
  if (strcmp(cmd, "upload") == 0) return upload(rpc, argc - i, argv + i);
  if (strcmp(cmd, "download") == 0) return download(rpc, argc - i, argv + i);
  if (strcmp(cmd, "undo") == 0 || strcmp(cmd, "redo") == 0 || strcmp(cmd, "history") == 0 ||
      strcmp(cmd, "revert") == 0)
    return history_command(rpc, cmd, argc - i, argv + i);
  int ok;
  cJSON *params = shortcut_params(cmd, argc - i, argv + i, &ok);
  if (!ok) return 1;
  return rpc_call(rpc, cmd, params);
}
