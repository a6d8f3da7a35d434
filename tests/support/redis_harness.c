/*
 * redis_harness.c — see redis_harness.h.
 */
#include "redis_harness.h"
#include "harness.h"

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

/* Appends to *out (len, cap) every string in one RESP answer, recursively, each followed by a
 * newline (bulk strings as their raw bytes). */
static void append(char **out, size_t *len, size_t *cap, const char *p, size_t n) {
  if (*len + n + 2 > *cap) {
    *cap = (*len + n + 2) * 2;
    *out = realloc(*out, *cap);
    ASSERT(*out != NULL);
  }
  memcpy(*out + *len, p, n);
  *len += n;
  (*out)[(*len)++] = '\n';
  (*out)[*len] = '\0';
}

static void read_answer(const client_conn *c, char **out, size_t *len, size_t *cap) {
  char line[512];
  read_answer_line(c, line, sizeof(line));
  long n = atol(line + 1);
  if (line[0] == '*') {
    for (long i = 0; i < n; i++) read_answer(c, out, len, cap);
  } else if (line[0] == '$' && n >= 0) {
    char *b = malloc((size_t)n + 2);
    ASSERT(b != NULL);
    size_t got = 0;
    while (got < (size_t)n + 2) { /* the bytes and their CR LF */
      ssize_t k = read(c->fd, b + got, (size_t)n + 2 - got);
      ASSERT(k > 0);
      got += (size_t)k;
    }
    append(out, len, cap, b, (size_t)n);
    free(b);
  } else {
    append(out, len, cap, line, strlen(line));
  }
}

/* One command (arguments as RESP bulk strings) and its whole answer appended to *out. */
static void command_all(const client_conn *c, const char *const *argv, int argc, char **out, size_t *len,
                        size_t *cap) {
  char head[32];
  snprintf(head, sizeof(head), "*%d\r\n", argc);
  ASSERT(client_send((client_conn *)c, head, strlen(head)) == 0);
  for (int i = 0; i < argc; i++) {
    snprintf(head, sizeof(head), "$%zu\r\n", strlen(argv[i]));
    ASSERT(client_send((client_conn *)c, head, strlen(head)) == 0);
    ASSERT(client_send((client_conn *)c, argv[i], strlen(argv[i])) == 0);
    ASSERT(client_send((client_conn *)c, "\r\n", 2) == 0);
  }
  read_answer(c, out, len, cap);
}

char *redis_harness_dump(const redis_harness *r, size_t *out_len) {
  client_conn c;
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", r->port, err, sizeof(err)), err);
  char *keys = NULL, *out = NULL;
  size_t klen = 0, kcap = 0, len = 0, cap = 0;
  const char *const all[] = {"KEYS", "*"};
  command_all(&c, all, 2, &keys, &klen, &kcap);
  append(&out, &len, &cap, "", 0);
  for (char *k = keys, *nl; k && *k && (nl = strchr(k, '\n')); k = nl + 1) {
    *nl = '\0';
    char *type = NULL;
    size_t tlen = 0, tcap = 0;
    const char *const t[] = {"TYPE", k};
    command_all(&c, t, 2, &type, &tlen, &tcap);
    append(&out, &len, &cap, k, strlen(k));
    const char *const hash[] = {"HGETALL", k}, *const set[] = {"SMEMBERS", k}, *const str[] = {"GET", k},
                      *const stream[] = {"XRANGE", k, "-", "+"}, *const list[] = {"LRANGE", k, "0", "-1"},
                      *const zset[] = {"ZRANGE", k, "0", "-1", "WITHSCORES"};
    if (strcmp(type, "+hash\n") == 0) command_all(&c, hash, 2, &out, &len, &cap);
    else if (strcmp(type, "+set\n") == 0) command_all(&c, set, 2, &out, &len, &cap);
    else if (strcmp(type, "+string\n") == 0) command_all(&c, str, 2, &out, &len, &cap);
    else if (strcmp(type, "+stream\n") == 0) command_all(&c, stream, 4, &out, &len, &cap);
    else if (strcmp(type, "+list\n") == 0) command_all(&c, list, 4, &out, &len, &cap);
    else if (strcmp(type, "+zset\n") == 0) command_all(&c, zset, 5, &out, &len, &cap);
    else test__fail(__FILE__, __LINE__, "key %s of an unknown type %s", k, type);
    free(type);
  }
  free(keys);
  client_close(&c);
  *out_len = len;
  return out;
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
  if (r->pid <= 0) return;
  if (paused) harness_stop_process(r->pid); /* stopped for sure, not only signalled */
  else kill(r->pid, SIGCONT);
}
