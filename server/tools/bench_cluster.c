/*
 * bench_cluster.c — the cluster `deform-bench fanout --relays R` measures: a redis-server on a
 * free loopback port (its own directory, no persistence), a primary (`deformd --demo --data
 * none --redis URL`) and R relays (`deformd --relay --redis URL`), each a child that dies with
 * the bench; ready once every relay has loaded the demo session.
 *
 * DOES NOT measure anything itself (deform_bench.c does) or touch a Redis it did not start.
 */
#include <arpa/inet.h>
#include <errno.h>
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

#include "bench.h"
#include "client.h"

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static int redis_answers(int port) {
  client_conn c;
  char err[128];
  if (client_connect(&c, "127.0.0.1", port, err, sizeof(err)) != 0) return 0;
  char buf[16] = "";
  int ok = client_send(&c, "PING\r\n", 6) == 0 && read(c.fd, buf, 7) == 7 && memcmp(buf, "+PONG\r\n", 7) == 0;
  client_close(&c);
  return ok;
}

static int start_redis(const char *bin, bench_cluster *c, char *err, size_t errlen) {
  snprintf(c->dir, sizeof(c->dir), "/tmp/deform-bench-redis-XXXXXX");
  if (!mkdtemp(c->dir)) {
    snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
    return -1;
  }
  for (int attempt = 0; attempt < 5; attempt++) {
    int port = free_port();
    if (port < 0) break;
    char portarg[16];
    snprintf(portarg, sizeof(portarg), "%d", port);
    pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      setpgid(0, 0);
      int fd = open("/dev/null", O_WRONLY);
      if (fd >= 0) dup2(fd, STDOUT_FILENO);
      execlp(bin, bin, "--port", portarg, "--bind", "127.0.0.1", "--dir", c->dir, "--save", "", "--appendonly", "no",
             "--daemonize", "no", (char *)NULL);
      fprintf(stderr, "deform-bench: exec %s: %s (install redis-server, or pass --redis-server PATH)\n", bin,
              strerror(errno));
      _exit(127);
    }
    c->redis_pid = pid;
    c->redis_port = port;
    for (int i = 0; i < 200 && !g_stop; i++) {
      if (redis_answers(port)) {
        snprintf(c->url, sizeof(c->url), "redis://127.0.0.1:%d", port);
        return 0;
      }
      if (waitpid(pid, NULL, WNOHANG) == pid) break;
      usleep(25000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    c->redis_pid = 0;
  }
  snprintf(err, errlen, "redis-server did not start (%s)", bin);
  return -1;
}

/* Waits until the relay knows the demo session from the registry (it loads it when the first
 * viewer joins). */
static int relay_ready(const bench_child *r, char *err, size_t errlen) {
  client_conn rpc;
  if (client_connect(&rpc, "127.0.0.1", r->rpc_port, err, errlen) != 0) return -1;
  uint64_t deadline = client_now_ns() + 60000000000ull;
  int rc = -1;
  while (!g_stop && client_now_ns() < deadline) {
    cJSON *result = NULL, *error = NULL;
    if (client_rpc(&rpc, "server.stats", NULL, 30000, &result, &error) == 0 &&
        cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(result, "cluster"), "sessions")) > 0)
      rc = 0;
    cJSON_Delete(result);
    cJSON_Delete(error);
    if (rc == 0) break;
    usleep(50000);
  }
  client_close(&rpc);
  if (rc) snprintf(err, errlen, "a relay did not learn of the demo session within 60 s");
  return rc;
}

int bench_cluster_start(const char *deformd, const char *redis_server, int relays, bench_cluster *c, char *err,
                        size_t errlen) {
  memset(c, 0, sizeof(*c));
  if (relays > BENCH_MAX_RELAYS) relays = BENCH_MAX_RELAYS;
  if (start_redis(redis_server, c, err, errlen) != 0) goto fail;
  const char *pargs[] = {"--demo", "--data", "none", "--redis", c->url, NULL};
  if (bench_child_start(deformd, pargs, &c->primary, err, errlen) != 0) goto fail;
  const char *rargs[] = {"--relay", "--redis", c->url, NULL};
  for (int i = 0; i < relays; i++) {
    if (bench_child_start(deformd, rargs, &c->relays[i], err, errlen) != 0) goto fail;
    c->relay_count++;
  }
  for (int i = 0; i < relays; i++)
    if (relay_ready(&c->relays[i], err, errlen) != 0) goto fail;
  return 0;
fail:
  bench_cluster_stop(c);
  return -1;
}

void bench_cluster_stop(bench_cluster *c) {
  for (int i = 0; i < c->relay_count; i++) bench_child_stop(&c->relays[i]);
  c->relay_count = 0;
  if (c->primary.pid > 0) bench_child_stop(&c->primary);
  if (c->redis_pid > 0) {
    kill(c->redis_pid, SIGTERM);
    waitpid(c->redis_pid, NULL, 0);
    c->redis_pid = 0;
  }
  if (c->dir[0]) {
    char dump[300];
    snprintf(dump, sizeof(dump), "%s/dump.rdb", c->dir);
    unlink(dump);
    rmdir(c->dir);
    c->dir[0] = '\0';
  }
}
