/*
 * redis_harness.c — see redis_harness.h.
 */
#include "redis_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "harness.h"
#include "test.h"

static redis_harness *running;

static void kill_left(void) {
  if (running && running->pid > 0) {
    kill(running->pid, SIGCONT);
    kill(running->pid, SIGKILL);
    waitpid(running->pid, NULL, 0);
    running->pid = 0;
  }
}

/* One line of an answer, without its CR LF. */
static void read_answer_line(const client_conn *c, char *buf, size_t cap) {
  size_t n = 0;
  while (n < cap - 1) {
    ssize_t k = read(c->fd, buf + n, 1);
    if (k <= 0 || buf[n] == '\n') break;
    n++;
  }
  buf[n] = '\0';
  if (n && buf[n - 1] == '\r') buf[n - 1] = '\0';
}

void redis_harness_command(const redis_harness *r, const char *command, char *out, size_t outlen) {
  client_conn c;
  char err[256];
  out[0] = '\0';
  if (client_connect(&c, "127.0.0.1", r->port, err, sizeof(err)) != 0) return;
  char line[512];
  snprintf(line, sizeof(line), "%s\r\n", command);
  if (client_send(&c, line, strlen(line)) == 0) {
    char buf[512];
    read_answer_line(&c, buf, sizeof(buf));
    if (buf[0] == '$' && atoi(buf + 1) >= 0) read_answer_line(&c, buf, sizeof(buf)); /* a bulk string's value */
    snprintf(out, outlen, "%s", buf);
  }
  client_close(&c);
}

void redis_harness_start(redis_harness *r, int port) {
  static int count;
  const char *bin = getenv("REDIS_SERVER");
  if (!bin) bin = "redis-server";
  for (int attempt = 0; attempt < 5; attempt++) {
    int p = port ? port : harness_free_port();
    memset(r, 0, sizeof(*r));
    r->port = p;
    snprintf(r->dir, sizeof(r->dir), "%s/redis-%d", test_tmpdir(), count++);
    mkdir(r->dir, 0755);
    snprintf(r->url, sizeof(r->url), "redis://127.0.0.1:%d", p);
    char portarg[16], log[1100];
    snprintf(portarg, sizeof(portarg), "%d", p);
    snprintf(log, sizeof(log), "%s/redis.log", r->dir);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execlp(bin, bin, "--port", portarg, "--bind", "127.0.0.1", "--dir", r->dir, "--save", "", "--appendonly", "no",
             "--daemonize", "no", (char *)NULL);
      _exit(127);
    }
    r->pid = pid;
    running = r;
    static int registered;
    if (!registered) {
      atexit(kill_left);
      registered = 1;
    }
    for (int i = 0; i < 200; i++) {
      char answer[64];
      redis_harness_command(r, "PING", answer, sizeof(answer));
      if (strcmp(answer, "+PONG") == 0) return;
      if (waitpid(pid, NULL, WNOHANG) == pid) break; /* the port was taken meanwhile: another */
      usleep(25000);
    }
    redis_harness_kill(r);
    if (port) break;
  }
  test__fail(__FILE__, __LINE__, "redis-server did not start (is it installed? deploy/deps.sh installs it)");
}

void redis_harness_kill(redis_harness *r) {
  if (r->pid <= 0) return;
  kill(r->pid, SIGCONT);
  kill(r->pid, SIGKILL);
  waitpid(r->pid, NULL, 0);
  r->pid = 0;
}

void redis_harness_pause(redis_harness *r, int paused) {
  if (r->pid > 0) kill(r->pid, paused ? SIGSTOP : SIGCONT);
}
