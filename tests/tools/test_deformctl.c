/*
 * test_deformctl.c — deformctl as a user runs it: shortcuts, call, exit codes, watch --dump.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

/* Runs deformctl with `args` (a shell fragment); stdout into out. Returns the exit status. */
static int run_ctl(const char *args, char *out, size_t outlen) {
  char cmd[10000];
  snprintf(cmd, sizeof(cmd), "'%s' %s", harness_tool("deformctl"), args);
  FILE *p = popen(cmd, "r");
  ASSERT(p != NULL);
  size_t n = fread(out, 1, outlen - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(deformctl_shortcuts_and_call_print_json_and_exit_codes) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char args[512], out[65536];
  snprintf(args, sizeof(args), "--rpc 127.0.0.1:%d weights.set demo smile_L=0.8 blink_R=1", h.rpc_port);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "\"version\":1");
  snprintf(args, sizeof(args), "--rpc 127.0.0.1:%d call weights.get '{\"session\":\"demo\"}'", h.rpc_port);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "\"smile_L\":0.8");
  ASSERT_STR_CONTAINS(out, "\"blink_R\":1");
  snprintf(args, sizeof(args), "--rpc 127.0.0.1:%d weights.set demo grin=1 2>/dev/null", h.rpc_port);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 1);
  ASSERT_STR_CONTAINS(out, "-32002");
  snprintf(args, sizeof(args), "--rpc 127.0.0.1:%d mesh.info demo", h.rpc_port);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "\"topology_vertices\":40962");
  snprintf(args, sizeof(args), "--rpc 127.0.0.1:%d call session.list", h.rpc_port);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "\"session\":\"demo\"");
  snprintf(args, sizeof(args), "--rpc 127.0.0.1:1 session.list 2>/dev/null");
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 1); /* nobody listens there */
  harness_stop(&h);
}

/* The v lines of an OBJ file, as text. */
static char *v_lines(const char *path) {
  FILE *f = fopen(path, "r");
  ASSERT(f != NULL);
  size_t cap = 1 << 20, len = 0;
  char *all = malloc(cap), line[256];
  while (fgets(line, sizeof(line), f)) {
    if (line[0] != 'v' || line[1] != ' ') continue;
    size_t n = strlen(line);
    if (len + n + 1 > cap) all = realloc(all, cap *= 2);
    memcpy(all + len, line, n);
    len += n;
  }
  all[len] = '\0';
  fclose(f);
  return all;
}

TEST(deformctl_watch_dumps_the_shape_the_server_has) {
  harness h;
  harness_start(&h, "demo", demo_args);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.7,\"smile_R\":0.3}}"));
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"100\":[0.003,0.001,-0.002]}}"));
  char args[2048], out[65536], dump[1024], server[1024];
  snprintf(dump, sizeof(dump), "%s/watch.obj", test_tmpdir());
  snprintf(server, sizeof(server), "%s/server.obj", test_tmpdir());
  /* --count 0: exit right after the snapshot. */
  snprintf(args, sizeof(args), "--stream 127.0.0.1:%d watch demo --count 0 --dump '%s'", h.stream_port, dump);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "version=2 type=SNAPSHOT");
  harness_download_file(&h, "demo", server);
  char *a = v_lines(dump), *b = v_lines(server);
  ASSERT(strlen(a) > 1000000);
  ASSERT(strcmp(a, b) == 0);
  free(a);
  free(b);
  /* --count 2 in the background: it exits after two live frames. */
  snprintf(args, sizeof(args), "'%s' --stream 127.0.0.1:%d watch demo --count 2 > '%s/lines.txt'",
           harness_tool("deformctl"), h.stream_port, test_tmpdir());
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", args, (char *)NULL);
    _exit(127);
  }
  usleep(500000);
  for (int i = 0; i < 3; i++)
    cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.1}}"));
  int status;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char path[1024];
  snprintf(path, sizeof(path), "%s/lines.txt", test_tmpdir());
  FILE *f = fopen(path, "r");
  int lines = 0;
  char line[256], last[256] = "";
  while (f && fgets(line, sizeof(line), f)) {
    lines++;
    snprintf(last, sizeof(last), "%s", line);
  }
  if (f) fclose(f);
  ASSERT_EQ(lines, 4); /* the snapshot, two live frames, and the count */
  ASSERT(strcmp(last, "2 frames\n") == 0);
  harness_stop(&h);
}

static int file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

TEST(ten_deformctl_watchers_and_two_editors_end_with_the_server_shape) {
  harness h;
  harness_start(&h, "demo", demo_args);
  enum { WATCHERS = 10 };
  pid_t pids[WATCHERS];
  char dumps[WATCHERS][1024], logs[WATCHERS][1024];
  for (int i = 0; i < WATCHERS; i++) {
    snprintf(dumps[i], sizeof(dumps[i]), "%s/watch%d.obj", test_tmpdir(), i);
    snprintf(logs[i], sizeof(logs[i]), "%s/watch%d.txt", test_tmpdir(), i);
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "exec '%.1000s' --stream 127.0.0.1:%d watch demo --dump '%.1000s' > '%.1000s'",
             harness_tool("deformctl"), h.stream_port, dumps[i], logs[i]);
    pids[i] = fork();
    if (pids[i] == 0) {
      execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
      _exit(127);
    }
  }
  for (int i = 0; i < WATCHERS; i++) /* every watcher has its snapshot before the edits start */
    for (int t = 0; t < 200 && !file_has(logs[i], "type=SNAPSHOT"); t++) usleep(50000);
  /* Two editors: one on the binary port, one through JSON-RPC. */
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  proto_buf b;
  proto_buf_init(&b);
  for (int e = 0; e < 40; e++) {
    uint32_t vi[32];
    int32_t q[96];
    for (int k = 0; k < 32; k++) {
      vi[k] = (uint32_t)(e * 997 + k * 31) % 1000 + (uint32_t)k * 1000;
      for (int c = 0; c < 3; c++) q[3 * k + c] = (e * 37 + k * 11 + c * 5) % 4001 - 2000;
    }
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e, 32, vi, q), NULL);
    ASSERT_OK(client_send_buf(&ed, &b), NULL);
    char params[256];
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"weights\":{\"jaw_open\":%g,\"cheek_puff\":%g}}",
             (e % 10) / 10.0, ((e * 3) % 10) / 10.0);
    cJSON_Delete(harness_rpc_ok(&h, "weights.set", params));
  }
  proto_buf_fini(&b);
  /* Wait for the binary editor's last edit to be applied: 80 changes in all. */
  harness_follow(&ed, &er, 80, 10000);
  char want[64];
  snprintf(want, sizeof(want), "version=80 ");
  for (int i = 0; i < WATCHERS; i++) {
    for (int t = 0; t < 200 && !file_has(logs[i], want); t++) usleep(50000);
    ASSERT(file_has(logs[i], want));
    kill(pids[i], SIGINT); /* watch writes its dump when it exits */
  }
  char server[1024];
  snprintf(server, sizeof(server), "%s/server.obj", test_tmpdir());
  harness_download_file(&h, "demo", server);
  char *expect = v_lines(server);
  for (int i = 0; i < WATCHERS; i++) {
    int status;
    ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *got = v_lines(dumps[i]);
    if (strcmp(got, expect) != 0) test__fail(__FILE__, __LINE__, "watcher %d's shape differs from the server's", i);
    free(got);
  }
  free(expect);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

/* `deformctl watch SESSION --max-rate HZ --seconds S`, as the issue names it: beside an editor
 * at 60 Hz it stops after S seconds, its last line says how many updates came (at most 10 a
 * second, with room for the last), and its dump is the server's shape. */
TEST(deformctl_watch_at_a_max_rate_counts_its_frames_and_ends_with_the_server_shape) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char dump[1024], log[1024], cmd[4096];
  snprintf(dump, sizeof(dump), "%s/paced.obj", test_tmpdir());
  snprintf(log, sizeof(log), "%s/paced.txt", test_tmpdir());
  snprintf(cmd, sizeof(cmd), "exec '%s' --stream 127.0.0.1:%d watch demo --max-rate 10 --seconds 3 --dump '%s' > '%s'",
           harness_tool("deformctl"), h.stream_port, dump, log);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  client_conn ed;
  client_replica er;
  harness_join(&h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  for (int t = 0; t < 200 && !file_has(log, "type=SNAPSHOT"); t++) usleep(50000); /* it has joined */
  proto_buf b;
  proto_buf_init(&b);
  uint64_t start = client_now_ns();
  for (int e = 0; e < 90; e++) { /* 1.5 s at 60 Hz, well inside the watch's 3 s */
    uint32_t t = (uint32_t)e % 5, v = 1000u + (uint32_t)e;
    float w = (float)(e % 10) / 10.0f;
    int32_t q[3] = {e * 7, -e * 3, e};
    ASSERT_OK(proto_encode_edit_weights(&b, (uint32_t)e + 1, 1, &t, &w), NULL);
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e + 500, 1, &v, q), NULL);
    ASSERT_OK(client_send_buf(&ed, &b), NULL);
    while (client_now_ns() < start + (uint64_t)(e + 1) * 16666667ull) usleep(1000);
  }
  proto_buf_fini(&b);
  harness_follow(&ed, &er, 180, 10000);
  int status;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FILE *f = fopen(log, "r");
  ASSERT(f != NULL);
  char line[256], last[256] = "";
  while (fgets(line, sizeof(line), f)) snprintf(last, sizeof(last), "%s", line);
  fclose(f);
  long frames = -1;
  ASSERT(sscanf(last, "%ld frames", &frames) == 1);
  fprintf(stderr, "deformctl watch --max-rate 10 --seconds 3 beside 180 changes: \"%s\"\n", strtok(last, "\n"));
  ASSERT(frames >= 3 && frames <= 36);
  char server[1024];
  snprintf(server, sizeof(server), "%s/server.obj", test_tmpdir());
  harness_download_file(&h, "demo", server);
  char *a = v_lines(dump), *s = v_lines(server);
  ASSERT(strcmp(a, s) == 0);
  free(a);
  free(s);
  client_replica_fini(&er);
  client_close(&ed);
  harness_stop(&h);
}

TEST(deformctl_uploads_opens_and_downloads_over_tls_with_a_token_file) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem");
  char dir[1200];
  snprintf(dir, sizeof(dir), "%s/ctl-data", test_tmpdir());
  const char *const args[] = {"--data", dir, "--tls-cert", cert, "--tls-key", key, NULL};
  harness h;
  harness_start_full(&h, NULL, args, "ctl-admin-token", ca);
  const char *token_file = test_write_file("ctl.token", "ctl-admin-token\n", 16);
  char common[3000], a[8000], out[65536];
  snprintf(common, sizeof(common), "--rpc 127.0.0.1:%d --stream 127.0.0.1:%d --tls --tls-ca '%s' --token-file '%s'",
           h.rpc_port, h.stream_port, ca, token_file);
  /* upload a local file under another name, open a session on it, download it back */
  snprintf(a, sizeof(a), "%s upload '%s' wuson.off", common, test_assimp_model("OFF/Wuson.off"));
  ASSERT_EQ(run_ctl(a, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "\"final\":true");
  snprintf(a, sizeof(a), "%s session.create w wuson.off", common);
  ASSERT_EQ(run_ctl(a, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "\"vertices\":2117");
  /* An up axis as a third word; a wrong one is the server's -32602. */
  snprintf(a, sizeof(a), "%s session.create wz wuson.off z", common);
  ASSERT_EQ(run_ctl(a, out, sizeof(out)), 0);
  cJSON *info = harness_rpc_ok(&h, "mesh.info", "{\"session\":\"wz\"}");
  ASSERT(strcmp(cJSON_GetObjectItem(info, "up")->valuestring, "z") == 0);
  cJSON_Delete(info);
  snprintf(a, sizeof(a), "%s session.create wx wuson.off x 2>&1", common);
  ASSERT(run_ctl(a, out, sizeof(out)) != 0);
  ASSERT_STR_CONTAINS(out, "\"up\" must be \"y\" or \"z\"");
  snprintf(a, sizeof(a), "%s weights.set w 2>/dev/null", common); /* nothing to set: a usage error, not a crash */
  run_ctl(a, out, sizeof(out));
  char file[1200];
  snprintf(file, sizeof(file), "%s/w.glb", test_tmpdir());
  snprintf(a, sizeof(a), "%s download w '%s'", common, file);
  ASSERT_EQ(run_ctl(a, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "\"format\":\"glb\"");
  /* The file is the server's download, byte for byte (the harness reads it its own way). */
  size_t n = 0, m = 0;
  uint8_t *got = test_read_file(file, &n);
  uint8_t *want = harness_download(&h, "w", "glb", -1, &m);
  ASSERT_EQ(n, m);
  ASSERT(memcmp(got, want, n) == 0);
  free(got);
  free(want);
  /* --version of a session without history, past: the server says why. */
  snprintf(a, sizeof(a), "%s download w '%s' --version 7 2>/dev/null", common, file);
  ASSERT_EQ(run_ctl(a, out, sizeof(out)), 1);
  ASSERT_STR_CONTAINS(out, "-32006");
  /* watch over TLS with the token */
  snprintf(a, sizeof(a), "%s watch w --count 0", common);
  ASSERT_EQ(run_ctl(a, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "type=SNAPSHOT");
  /* without --tls-ca the system's CAs do not know the test CA: refused, exit 1 */
  snprintf(a, sizeof(a), "--rpc 127.0.0.1:%d --tls --token-file '%s' session.list 2>&1", h.rpc_port, token_file);
  ASSERT_EQ(run_ctl(a, out, sizeof(out)), 1);
  ASSERT_STR_CONTAINS(out, "not trusted");
  harness_stop(&h);
}

/* With neither $USER nor $DEFORMD_AUTHOR (root in a container, cron, CI), deformctl still names
 * one stable author, the account's name at the host, so its undo finds the edit it just made. */
TEST(deformctl_without_user_in_the_environment_undoes_its_own_edit) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char args[512], out[65536];
  snprintf(args, sizeof(args), "-u USER -u DEFORMD_AUTHOR '%s' --rpc 127.0.0.1:%d weights.set demo smile_L=0.9",
           harness_tool("deformctl"), h.rpc_port);
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "env %s", args);
  FILE *p = popen(cmd, "r");
  ASSERT(p != NULL);
  out[fread(out, 1, sizeof(out) - 1, p)] = '\0';
  ASSERT_EQ(pclose(p), 0);
  snprintf(cmd, sizeof(cmd), "env -u USER -u DEFORMD_AUTHOR '%s' --rpc 127.0.0.1:%d undo demo",
           harness_tool("deformctl"), h.rpc_port);
  p = popen(cmd, "r");
  ASSERT(p != NULL);
  out[fread(out, 1, sizeof(out) - 1, p)] = '\0';
  ASSERT_EQ(pclose(p), 0);
  ASSERT_STR_CONTAINS(out, "@"); /* the author it answers for: ACCOUNT@HOST */
  snprintf(args, sizeof(args), "--rpc 127.0.0.1:%d call weights.get '{\"session\":\"demo\"}'", h.rpc_port);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 0);
  ASSERT(strstr(out, "\"smile_L\":0.9") == NULL);
  ASSERT_STR_CONTAINS(out, "\"smile_L\":0");
  harness_stop(&h);
}

/* On an idle session `watch --count N` waits for changes that may never come: it says so (on
 * stderr, so the frame lines on stdout stay as they are), and --seconds ends it. */
TEST(deformctl_watch_says_what_it_waits_for_on_an_idle_session) {
  harness h;
  harness_start(&h, "demo", demo_args);
  char args[512], out[65536];
  snprintf(args, sizeof(args), "--stream 127.0.0.1:%d watch demo --count 3 --seconds 1 2>&1", h.stream_port);
  ASSERT_EQ(run_ctl(args, out, sizeof(out)), 0);
  ASSERT_STR_CONTAINS(out, "joined demo at version 0; waiting for 3 updates (--count counts changes");
  ASSERT_STR_CONTAINS(out, "0 frames");
  harness_stop(&h);
}
