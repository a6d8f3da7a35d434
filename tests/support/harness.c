/*
 * harness.c — see harness.h.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static void dump_log(const harness *h) {
  FILE *f = fopen(h->log_path, "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "---- deformd log (%s) ----\n", h->log_path);
  while (fgets(line, sizeof(line), f)) fputs(line, stderr);
  fclose(f);
}

/* Servers still running when the test process exits (a failed assertion exits at once) are
 * killed, and their logs printed, so that no deformd outlives its test. */
static harness *running[8];

static void kill_leftovers(void) {
  for (int i = 0; i < 8; i++) {
    harness *h = running[i];
    if (!h || h->pid <= 0) continue;
    dump_log(h);
    kill(h->pid, SIGKILL);
    waitpid(h->pid, NULL, 0);
    h->pid = 0;
  }
}

static void track(harness *h, int add) {
  static int registered;
  if (!registered) {
    atexit(kill_leftovers);
    registered = 1;
  }
  for (int i = 0; i < 8; i++) {
    if (add && !running[i]) {
      running[i] = h;
      return;
    }
    if (!add && running[i] == h) running[i] = NULL;
  }
}

void harness_start(harness *h, const char *wait_session, const char *const *args) {
  harness_start_token(h, wait_session, args, NULL);
}

void harness_start_token(harness *h, const char *wait_session, const char *const *args, const char *admin_token) {
  harness_start_full(h, wait_session, args, admin_token, NULL);
}

void harness_connect(harness *h, client_conn *c, int port) {
  char err[512];
  if (client_connect(c, "127.0.0.1", port, err, sizeof(err)) != 0) test__fail(__FILE__, __LINE__, "%s", err);
  if (h->tls_ca[0] && client_tls_start(c, "127.0.0.1", h->tls_ca, 30000, err, sizeof(err)) != 0)
    test__fail(__FILE__, __LINE__, "%s", err);
}

const char *harness_certs(void) {
  static char dir[1024];
  if (dir[0]) return dir;
  snprintf(dir, sizeof(dir), "%s/certs", test_tmpdir());
  char cmd[8192];
  /* EC P-256 keys: quick to make and to sign with. */
  snprintf(cmd, sizeof(cmd),
           "(set -e; mkdir -p '%s'; cd '%s'; "
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=test-ca "
           "-keyout ca.key -out ca.pem; "
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=other-ca "
           "-keyout other-ca.key -out other-ca.pem; "
           "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=deformd -keyout key.pem -out req.pem; "
           "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext; "
           "openssl x509 -req -in req.pem -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out cert.pem; "
           "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=example.com -keyout wrong-key.pem "
           "-out wrong.req; "
           "printf 'subjectAltName=DNS:example.com\n' > wrong.ext; "
           "openssl x509 -req -in wrong.req -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile wrong.ext "
           "-out wrong-cert.pem) 2>/dev/null",
           dir, dir);
  if (system(cmd) != 0) test__fail(__FILE__, __LINE__, "cannot make test certificates with openssl (deploy/deps.sh installs it)");
  return dir;
}

const char *harness_cert(const char *file) {
  static char bufs[8][1100];
  static int slot;
  char *p = bufs[slot++ % 8];
  snprintf(p, 1100, "%s/%s", harness_certs(), file);
  return p;
}

void harness_start_full(harness *h, const char *wait_session, const char *const *args, const char *admin_token,
                        const char *tls_ca) {
  memset(h, 0, sizeof(*h));
  if (tls_ca) snprintf(h->tls_ca, sizeof(h->tls_ca), "%s", tls_ca);
  const char *bin = getenv("DEFORMD_BIN");
  ASSERT(bin != NULL);
  static int count;
  snprintf(h->log_path, sizeof(h->log_path), "%s/deformd-%d.log", test_tmpdir(), count++);
  int out[2];
  ASSERT(pipe(out) == 0);
  const char *argv[64];
  int n = 0;
  argv[n++] = bin;
  argv[n++] = "--stream-port";
  argv[n++] = "0";
  argv[n++] = "--rpc-port";
  argv[n++] = "0";
  argv[n++] = "--http-port"; /* a free port too: parallel tests never share 7452 */
  argv[n++] = "0";
  argv[n++] = "--data"; /* memory only, unless the test gives its own --data (the last one counts) */
  argv[n++] = "none";
  /* Clients name meshes relative to these: the packaged test models and the test's own files. */
  const char *models = getenv("DEFORMD_ASSIMP_MODELS");
  argv[n++] = "--mesh-dir";
  argv[n++] = models && models[0] ? models : "/usr/share/assimp/models";
  argv[n++] = "--mesh-dir";
  argv[n++] = test_tmpdir();
  for (int i = 0; args && args[i] && n < 62; i++) argv[n++] = args[i];
  argv[n] = NULL;
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    /* If the test process dies without cleaning up (a sanitizer abort), so does its server. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* The administrator's token comes from the environment, never the command line. */
    if (admin_token) setenv("DEFORMD_ADMIN_TOKEN", admin_token, 1);
    else unsetenv("DEFORMD_ADMIN_TOKEN");
    int log = open(h->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out[1], 1);
    if (log >= 0) dup2(log, 2);
    close(out[0]);
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  close(out[1]);
  h->pid = pid;
  track(h, 1);
  FILE *f = fdopen(out[0], "r");
  char line[256] = "";
  if (!fgets(line, sizeof(line), f) ||
      sscanf(line, "stream_port=%d rpc_port=%d http_port=%d", &h->stream_port, &h->rpc_port, &h->http_port) < 2) {
    dump_log(h);
    test__fail(__FILE__, __LINE__, "deformd did not print its ports (got '%s')", line);
  }
  fclose(f);
  harness_connect(h, &h->rpc, h->rpc_port);
  if (admin_token) { /* a server with tokens wants auth first */
    char params[512];
    snprintf(params, sizeof(params), "{\"token\":\"%s\"}", admin_token);
    cJSON_Delete(harness_rpc_ok(h, "auth", params));
  }
  if (!wait_session) return;
  for (int tries = 0; tries < 600; tries++) {
    cJSON *list = harness_rpc_ok(h, "session.list", NULL);
    cJSON *s;
    int found = 0;
    cJSON_ArrayForEach(s, list) {
      const cJSON *name = cJSON_GetObjectItem(s, "session");
      found |= cJSON_IsString(name) && strcmp(name->valuestring, wait_session) == 0;
    }
    cJSON_Delete(list);
    if (found) return;
    usleep(50000);
  }
  dump_log(h);
  test__fail(__FILE__, __LINE__, "session %s did not appear", wait_session);
}

void harness_kill(harness *h) {
  client_close(&h->rpc);
  if (h->pid <= 0) return;
  kill(h->pid, SIGKILL);
  int status = 0;
  waitpid(h->pid, &status, 0);
  h->pid = 0;
  track(h, 0);
}

void harness_stop(harness *h) {
  client_close(&h->rpc);
  if (h->pid <= 0) return;
  kill(h->pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 200; i++) {
    pid_t r = waitpid(h->pid, &status, WNOHANG);
    if (r == h->pid) {
      h->pid = 0;
      track(h, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        dump_log(h);
        test__fail(__FILE__, __LINE__, "deformd exited with status %d", status);
      }
      return;
    }
    usleep(50000);
  }
  kill(h->pid, SIGKILL);
  waitpid(h->pid, &status, 0);
  h->pid = 0;
  track(h, 0);
  dump_log(h);
  test__fail(__FILE__, __LINE__, "deformd did not stop within 10 s of SIGTERM");
}

static cJSON *parse_params(const char *params) {
  if (!params) return NULL;
  cJSON *p = cJSON_Parse(params);
  if (!p) test__fail(__FILE__, __LINE__, "test bug: bad params %s", params);
  return p;
}

cJSON *harness_rpc_ok(harness *h, const char *method, const char *params) {
  cJSON *p = parse_params(params), *result = NULL, *error = NULL;
  int rc = client_rpc(&h->rpc, method, p, 30000, &result, &error);
  cJSON_Delete(p);
  if (rc != 0) {
    char *e = error ? cJSON_PrintUnformatted(error) : NULL;
    dump_log(h);
    test__fail(__FILE__, __LINE__, "%s %s failed: %s", method, params ? params : "", e ? e : "no answer");
  }
  return result;
}

int harness_rpc_err(harness *h, const char *method, const char *params, char *msg, size_t msglen) {
  cJSON *p = parse_params(params), *result = NULL, *error = NULL;
  int rc = client_rpc(&h->rpc, method, p, 30000, &result, &error);
  cJSON_Delete(p);
  cJSON_Delete(result);
  if (rc != CLIENT_ERPC) test__fail(__FILE__, __LINE__, "%s %s: expected an error, got rc %d", method, params ? params : "", rc);
  const cJSON *code = cJSON_GetObjectItem(error, "code"), *m = cJSON_GetObjectItem(error, "message");
  ASSERT(cJSON_IsNumber(code) && cJSON_IsString(m));
  if (msg) snprintf(msg, msglen, "%s", m->valuestring);
  int c = code->valueint;
  cJSON_Delete(error);
  return c;
}

int harness_call(client_conn *c, const char *method, const char *params, cJSON **result, char *msg, size_t msglen) {
  cJSON *p = params ? cJSON_Parse(params) : NULL, *r = NULL, *e = NULL;
  if (params && !p) test__fail(__FILE__, __LINE__, "test bug: bad params %s", params);
  int rc = client_rpc(c, method, p, 30000, &r, &e);
  cJSON_Delete(p);
  if (rc == 0) {
    if (result) *result = r;
    else cJSON_Delete(r);
    return 0;
  }
  if (rc != CLIENT_ERPC) test__fail(__FILE__, __LINE__, "%s: no answer (%s)", method, client_strerror(rc));
  const cJSON *code = cJSON_GetObjectItem(e, "code"), *m = cJSON_GetObjectItem(e, "message");
  if (msg) snprintf(msg, msglen, "%s", cJSON_IsString(m) ? m->valuestring : "");
  int k = cJSON_IsNumber(code) ? code->valueint : 0;
  cJSON_Delete(e);
  if (result) *result = NULL;
  return k;
}

void harness_join(harness *h, client_conn *c, client_replica *r, const char *session, proto_role role,
                  const char *token) {
  harness_join2(h, c, r, session, role, token, NULL);
}

void harness_join2(harness *h, client_conn *c, client_replica *r, const char *session, proto_role role,
                   const char *token, const proto_hello_opts *opts) {
  char err[256];
  harness_connect(h, c, h->stream_port);
  ASSERT_OK(client_hello2(c, session, role, token, opts), NULL);
  client_replica_init(r);
  for (;;) {
    proto_header hd;
    const uint8_t *p;
    int rc = client_read_frame(c, 30000, &hd, &p, err, sizeof(err));
    if (rc != 0) test__fail(__FILE__, __LINE__, "join %s: %s", session, rc == CLIENT_ETIMEDOUT ? "timeout" : err);
    if (hd.type == PROTO_ERROR || hd.type == PROTO_BYE) test__fail(__FILE__, __LINE__, "join %s refused", session);
    ASSERT_OK(client_replica_apply(r, &hd, p, err, sizeof(err)), err);
    if (hd.type == PROTO_SNAPSHOT) return;
  }
}

int harness_follow(client_conn *c, client_replica *r, uint64_t version, int timeout_ms) {
  char err[256];
  int catchups = 0;
  uint64_t deadline = client_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (r->version < version) {
    if (client_now_ns() > deadline) test__fail(__FILE__, __LINE__, "stuck at version %llu, want %llu",
                                            (unsigned long long)r->version, (unsigned long long)version);
    proto_header hd;
    const uint8_t *p;
    int rc = client_read_frame(c, 1000, &hd, &p, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) continue;
    if (rc) test__fail(__FILE__, __LINE__, "follow: %s", err);
    ASSERT_OK(client_replica_apply(r, &hd, p, err, sizeof(err)), err);
    if (getenv("HARNESS_TRACE")) fprintf(stderr, "frame type %u flags %u version %llu len %u\n", hd.type, hd.flags, (unsigned long long)hd.session_version, hd.length);
    if (hd.flags & PROTO_FLAG_CATCHUP) catchups++;
  }
  ASSERT_EQ(r->version, version);
  return catchups;
}

int harness_expect_error(client_conn *c, uint8_t want_type, uint32_t *request_id, int timeout_ms) {
  char err[256];
  uint64_t deadline = client_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (client_now_ns() < deadline) {
    proto_header hd;
    const uint8_t *p;
    int rc = client_read_frame(c, 200, &hd, &p, err, sizeof(err));
    if (rc == CLIENT_ETIMEDOUT) continue;
    if (rc) test__fail(__FILE__, __LINE__, "connection ended before an error frame: %s", err);
    if (hd.type != want_type) continue;
    proto_error e;
    ASSERT_OK(proto_decode_error(p, hd.length, &e), NULL);
    fprintf(stderr, "got %s %u: %.*s\n", want_type == PROTO_ERROR ? "ERROR" : "BYE", e.code,
            (int)e.message.len, e.message.ptr);
    if (request_id) *request_id = e.request_id;
    return e.code;
  }
  test__fail(__FILE__, __LINE__, "no error frame within %d ms", timeout_ms);
}

int harness_closed(client_conn *c, int timeout_ms) {
  char err[256];
  uint64_t deadline = client_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (client_now_ns() < deadline) {
    proto_header hd;
    const uint8_t *p;
    int rc = client_read_frame(c, 200, &hd, &p, err, sizeof(err));
    if (rc == CLIENT_ECLOSED || rc == CLIENT_EIO) return 1;
  }
  return 0;
}

int harness_listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT(fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 4) == 0);
  socklen_t len = sizeof(a);
  ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

client_conn harness_accept_hello(int listener, uint32_t max_frame, int timeout_ms, proto_header *h,
                                 const uint8_t **payload) {
  int fd = accept(listener, NULL, NULL);
  ASSERT(fd >= 0);
  client_conn c = {.fd = fd, .limits = {.max_frame = max_frame}};
  char err[256];
  ASSERT_EQ(client_read_frame(&c, timeout_ms, h, payload, err, sizeof(err)), 0);
  ASSERT_EQ(h->type, PROTO_HELLO);
  return c;
}

uint8_t *harness_download(harness *h, const char *session, const char *format, int64_t version, size_t *len) {
  uint8_t *out = NULL;
  size_t total = 0, have = 0;
  uint64_t at_version = 0;
  do {
    char params[600];
    if (version >= 0 || have > 0)
      snprintf(params, sizeof(params), "{\"session\":\"%s\",\"format\":\"%s\",\"offset\":%zu,\"version\":%llu}", session,
               format, have, (unsigned long long)(version >= 0 ? (uint64_t)version : at_version));
    else
      snprintf(params, sizeof(params), "{\"session\":\"%s\",\"format\":\"%s\"}", session, format);
    cJSON *r = harness_rpc_ok(h, "session.export", params);
    const cJSON *data = cJSON_GetObjectItem(r, "data"), *t = cJSON_GetObjectItem(r, "total");
    const cJSON *off = cJSON_GetObjectItem(r, "offset"), *v = cJSON_GetObjectItem(r, "version");
    ASSERT(cJSON_IsString(data) && cJSON_IsNumber(t) && cJSON_IsNumber(off) && cJSON_IsNumber(v));
    ASSERT_EQ(off->valuedouble, have);
    total = (size_t)t->valuedouble;
    at_version = (uint64_t)v->valuedouble;
    if (!out) out = malloc(total + 1);
    size_t n = 0;
    ASSERT_OK(test_base64_decode(data->valuestring, out + have, total - have, &n), "base64");
    ASSERT(n > 0 || total == 0);
    have += n;
    cJSON_Delete(r);
  } while (have < total);
  *len = total;
  return out;
}

void harness_download_file(harness *h, const char *session, const char *path) {
  size_t n = 0, k = strlen(path);
  uint8_t *bytes = harness_download(h, session, k > 4 && strcmp(path + k - 4, ".obj") == 0 ? "obj" : "glb", -1, &n);
  FILE *f = fopen(path, "wb");
  ASSERT(f != NULL);
  ASSERT_EQ(fwrite(bytes, 1, n, f), n);
  ASSERT_EQ(fclose(f), 0);
  free(bytes);
}

const char *harness_mesh_name(const char *path) {
  const char *models = getenv("DEFORMD_ASSIMP_MODELS");
  const char *roots[2] = {models && models[0] ? models : "/usr/share/assimp/models", test_tmpdir()};
  for (int i = 0; i < 2; i++) {
    size_t n = strlen(roots[i]);
    if (strncmp(path, roots[i], n) == 0 && path[n] == '/') return path + n + 1;
  }
  test__fail(__FILE__, __LINE__, "test bug: %s is in no mesh folder of the harness", path);
}

float *harness_server_positions(harness *h, const char *session, uint32_t *vertex_count) {
  size_t n = 0;
  uint8_t *obj = harness_download(h, session, "obj", -1, &n);
  obj[n] = '\0';
  size_t cap = 1024, len = 0;
  float *p = malloc(sizeof(float) * cap);
  char *at = (char *)obj, *line;
  while ((line = test_next_line(&at, (char *)obj + n)) != NULL) {
    float v[3];
    if (sscanf(line, "v %f %f %f", &v[0], &v[1], &v[2]) == 3) {
      if (len + 3 > cap) p = realloc(p, sizeof(float) * (cap *= 2));
      memcpy(p + len, v, sizeof(v));
      len += 3;
    }
  }
  free(obj);
  *vertex_count = (uint32_t)(len / 3);
  return p;
}

const char *harness_tool(const char *name) {
  static char buf[1024];
  const char *bin = getenv("DEFORMD_BIN");
  ASSERT(bin != NULL);
  snprintf(buf, sizeof(buf), "%s", bin);
  char *slash = strrchr(buf, '/');
  ASSERT(slash != NULL);
  snprintf(slash + 1, sizeof(buf) - (size_t)(slash + 1 - buf), "%s", name);
  return buf;
}

int harness_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

uint64_t harness_server_memory(const harness *h, const char *field) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)h->pid);
  FILE *f = fopen(path, "r");
  ASSERT(f != NULL);
  size_t flen = strlen(field);
  unsigned long long kb = 0;
  int found = 0;
  while (!found && fgets(line, sizeof(line), f))
    found = strncmp(line, field, flen) == 0 && line[flen] == ':' && sscanf(line + flen + 1, "%llu", &kb) == 1;
  fclose(f);
  if (!found) test__fail(__FILE__, __LINE__, "no %s in %s", field, path);
  return (uint64_t)kb * 1024;
}

size_t harness_push(int fd, size_t total, const uint8_t *head, size_t head_len, int timeout_ms) {
  static uint8_t chunk[1 << 20];
  memset(chunk, 'a', sizeof(chunk));
  size_t sent = 0;
  uint64_t deadline = client_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (sent < total && client_now_ns() < deadline) {
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (p.revents & (POLLERR | POLLHUP)) break;
    const uint8_t *src = chunk;
    size_t n = total - sent < sizeof(chunk) ? total - sent : sizeof(chunk);
    if (sent < head_len) src = head + sent, n = head_len - sent;
    ssize_t w = send(fd, src, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (w <= 0) break;
    sent += (size_t)w;
  }
  return sent;
}

/* Stops `pid` and waits until it is stopped (state T in /proc/PID/stat): kill() only queues
 * SIGSTOP, and a stop that has not taken effect yet is cancelled by the SIGCONT that follows —
 * the relay then reads the stream all along, and no gap is ever seen (this test failed so,
 * now and then, under load). */
void harness_stop_process(pid_t pid) {
  ASSERT(kill(pid, SIGSTOP) == 0);
  char path[64], stat[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  for (int i = 0; i < 1000; i++) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(stat, 1, sizeof(stat) - 1, f) : 0;
    if (f) fclose(f);
    stat[n] = '\0';
    const char *close = strrchr(stat, ')'); /* the state follows the command name's parenthesis */
    if (close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't')) return;
    usleep(10000);
  }
  test__fail(__FILE__, __LINE__, "process %d did not stop within 10 s of SIGSTOP", (int)pid);
}

void harness_start_on(harness *h, const char *dir, const char *wait_session, const char *extra) {
  const char *args[4] = {"--data", dir, extra, NULL};
  harness_start(h, wait_session, args);
}

void harness_wait_demo_dressed(harness *h, const char *session) {
  char params[256];
  snprintf(params, sizeof(params), "{\"session\":\"%s\"}", session);
  for (int i = 0; i < 1200; i++) { /* a bound by count: 2 min of polls */
    cJSON *l = harness_rpc_ok(h, "texclip.list", params);
    int n = cJSON_GetArraySize(cJSON_GetObjectItem(l, "texclips"));
    cJSON_Delete(l);
    if (n > 0) return;
    usleep(100 * 1000);
  }
  test__fail(__FILE__, __LINE__, "session %s's texture clip was not compressed in 1200 polls", session);
}

void harness_rpc_done(harness *h, const char *method, const char *params) {
  cJSON_Delete(harness_rpc_ok(h, method, params));
}
