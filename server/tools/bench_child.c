/*
 * bench_child.c — the deformd processes deform-bench measures: spawned with the options a
 * benchmark needs on ports the system chooses, stopped (or killed) and reaped; the throw-away
 * certificate a --tls run gives them.
 *
 * DOES NOT talk to the server: the benchmarks connect with the blocking client.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"

atomic_int g_stop; /* set by deform_bench.c's SIGINT/SIGTERM handler; every bench loop reads it */

/* 1 when the child has exited (it is left for bench_child_stop() to reap and report). */
int bench_child_gone(const bench_child *c) {
  siginfo_t si;
  memset(&si, 0, sizeof(si));
  return waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == c->pid;
}

/* SIGTERM, up to 5 s for a clean exit, then SIGKILL; always reaps. Says on stderr how it ended
 * when that was not a clean exit (a signal before ours means something else killed it). */
void bench_child_stop(bench_child *c) {
  if (c->pid <= 0) return;
  kill(c->pid, SIGTERM);
  int st = 0, killed = 0;
  for (int i = 0;; i++) {
    pid_t r = waitpid(c->pid, &st, i < 500 ? WNOHANG : 0);
    if (r == c->pid || (r < 0 && errno != EINTR)) break;
    if (i == 500) {
      kill(c->pid, SIGKILL);
      killed = 1;
    }
    if (i < 500) usleep(10000);
  }
  if (killed)
    fprintf(stderr, "deform-bench: warning: deformd ignored SIGTERM for 5 s and was killed\n");
  else if (WIFSIGNALED(st) && WTERMSIG(st) != SIGTERM)
    fprintf(stderr, "deform-bench: warning: deformd died of signal %d\n", WTERMSIG(st));
  else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
    fprintf(stderr, "deform-bench: warning: deformd exited with status %d\n", WEXITSTATUS(st));
  c->pid = 0;
}

/* Spawns deformd and reads its "stream_port=N rpc_port=M" line (20 s at most). Returns 0, or -1
 * with a reason (the child, if any, is already reaped). */
int bench_child_start(const char *path, const char *const *args, bench_child *c, char *err, size_t errlen) {
  memset(c, 0, sizeof(*c));
  if (access(path, X_OK) != 0) {
    snprintf(err, errlen, "cannot run deformd at %.200s: %s (build it, or pass --deformd PATH)", path,
             strerror(errno));
    return -1;
  }
  int p[2];
  if (pipe(p) != 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a killed bench must not leave a server behind */
    setpgid(0, 0);                    /* ^C reaches the bench, which stops the server itself */
    dup2(p[1], STDOUT_FILENO);
    close(p[0]);
    close(p[1]);
    const char *argv[64];
    int n = 0;
    argv[n++] = path;
    for (int i = 0; args && args[i] && n < 56; i++) argv[n++] = args[i];
    argv[n++] = "--stream-port", argv[n++] = "0", argv[n++] = "--rpc-port", argv[n++] = "0";
    argv[n++] = "--http-port", argv[n++] = "0";
    argv[n++] = "--log-level", argv[n++] = "warn";
    argv[n] = NULL;
    execv(path, (char *const *)argv);
    fprintf(stderr, "deform-bench: exec %s: %s\n", path, strerror(errno));
    _exit(127);
  }
  close(p[1]);
  c->pid = pid;
  char line[256];
  size_t len = 0;
  uint64_t deadline = client_now_ns() + 20000000000ull;
  int rc = -1;
  snprintf(err, errlen, "deformd did not print its ports within 20 s");
  while (!g_stop && client_now_ns() < deadline && len + 1 < sizeof(line)) {
    struct pollfd pfd = {p[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    ssize_t r = read(p[0], line + len, sizeof(line) - 1 - len);
    if (r <= 0) {
      int st = 0;
      waitpid(pid, &st, 0);
      c->pid = 0;
      if (WIFEXITED(st))
        snprintf(err, errlen, "deformd exited with status %d before printing its ports (see its stderr above)",
                 WEXITSTATUS(st));
      else
        snprintf(err, errlen, "deformd died of signal %d before printing its ports", WTERMSIG(st));
      break;
    }
    len += (size_t)r;
    line[len] = '\0';
    if (strchr(line, '\n')) {
      if (sscanf(line, "stream_port=%d rpc_port=%d", &c->stream_port, &c->rpc_port) == 2) rc = 0;
      else snprintf(err, errlen, "unexpected first line from deformd: %.100s", line);
      break;
    }
  }
  close(p[0]);
  if (rc != 0) bench_child_stop(c);
  return rc;
}

/* utime + stime of `pid` in seconds, or -1. */
double bench_proc_cpu_s(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the command name may contain spaces */
  unsigned long ut, st;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}


/* SIGKILL and reap: a crash, as far as the server can tell. */
void bench_child_kill(bench_child *c) {
  if (c->pid <= 0) return;
  kill(c->pid, SIGKILL);
  waitpid(c->pid, NULL, 0);
  c->pid = 0;
}

int bench_wait_session(int rpc_port, const char *session) {
  client_conn c;
  char err[256];
  if (client_connect(&c, "127.0.0.1", rpc_port, err, sizeof(err)) != 0) return -1;
  int found = 0;
  for (int tries = 0; tries < 600 && !found && !g_stop; tries++) {
    cJSON *r = NULL, *e = NULL, *x;
    if (client_rpc(&c, "session.list", NULL, 10000, &r, &e) == 0)
      cJSON_ArrayForEach(x, r) found |= strcmp(cJSON_GetObjectItem(x, "session")->valuestring, session) == 0;
    cJSON_Delete(r), cJSON_Delete(e);
    if (!found) usleep(50000);
  }
  client_close(&c);
  return found ? 0 : -1;
}

void bench_default_deformd(char *out, size_t len) {
  char self[4000];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  out[0] = '\0';
  if (n <= 0) return;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  snprintf(out, len, "%s/deformd", self);
}

/* cert.pem and key.pem (EC P-256, for 127.0.0.1) in a new folder under $TMPDIR, made with the
 * openssl command (Debian's openssl, which deploy/deps.sh installs). 0, or -1 with a message. */
int bench_make_certificate(char *dir, size_t len) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, len, "%s/deform-bench-XXXXXX", tmp && tmp[0] && strlen(tmp) < len - 24 ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "deform-bench: --tls: cannot make a folder for the certificate: %s\n", strerror(errno));
    dir[0] = '\0';
    return -1;
  }
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 "
           "-addext subjectAltName=IP:127.0.0.1 -keyout '%s/key.pem' -out '%s/cert.pem' >/dev/null 2>&1",
           dir, dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "deform-bench: --tls: the openssl command could not make a certificate (deploy/deps.sh installs "
                    "openssl)\n");
    return -1;
  }
  return 0;
}

void bench_remove_certificate(const char *dir) {
  char path[128];
  snprintf(path, sizeof(path), "%s/cert.pem", dir);
  unlink(path);
  snprintf(path, sizeof(path), "%s/key.pem", dir);
  unlink(path);
  rmdir(dir);
}

void bench_machine(FILE *out) {
  char line[256], model[128] = "unknown CPU", family[16] = "?", number[16] = "?";
  FILE *f = fopen("/proc/cpuinfo", "r");
  int seen = 0;
  while (f && fgets(line, sizeof(line), f) && seen < 3) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    char *value = colon + 1 + (colon[1] == ' ');
    value[strcspn(value, "\n")] = 0;
    if (strncmp(line, "model name", 10) == 0) snprintf(model, sizeof(model), "%s", value), seen++;
    else if (strncmp(line, "cpu family", 10) == 0) snprintf(family, sizeof(family), "%s", value), seen++;
    else if (strncmp(line, "model\t", 6) == 0) snprintf(number, sizeof(number), "%s", value), seen++;
  }
  if (f) fclose(f);
  double load[1] = {-1};
  if (getloadavg(load, 1) != 1) load[0] = -1;
  fprintf(out, "deform-bench: on %s (family %s, model %s), %ld CPUs online, load average %.2f\n", model, family, number,
          sysconf(_SC_NPROCESSORS_ONLN), load[0]);
}
