/*
 * test_conn_limits.c — one client cannot take the server's memory or its connection slots:
 * unauthenticated connections hold only a small unfinished input and are closed after the
 * auth/HELLO timeout, all connections together hold at most max_input_mb, silent ones are
 * closed, and max_connections is held to the file descriptor limit.
 *
 * Oracles: the server's peak resident memory from /proc (VmHWM), what each socket reads back
 * (an error line or frame, then the end of the stream), and the server's log.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

/* ASan keeps freed blocks in a 256 MiB quarantine (and the old block of every realloc with
 * them): resident-memory bounds allow for it in that build. */
#ifdef __SANITIZE_ADDRESS__
#define ASAN_SLACK (256ull << 20)
#else
#define ASAN_SLACK 0ull
#endif

/* Reads until the peer closes (within timeout_ms); returns what it sent (NUL-terminated,
 * static), or NULL when it did not close. */
static const char *read_until_closed(client_conn *c, int timeout_ms) {
  static char buf[65536];
  size_t len = 0;
  uint64_t deadline = client_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (client_now_ns() < deadline) {
    struct pollfd p = {c->fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char tmp[4096];
    ssize_t r = recv(c->fd, tmp, sizeof(tmp), 0);
    if (r <= 0) {
      buf[len] = '\0';
      return buf;
    }
    if (len + (size_t)r < sizeof(buf) - 1) {
      memcpy(buf + len, tmp, (size_t)r);
      len += (size_t)r;
    }
  }
  return NULL;
}

/* One line from the peer (without its newline) into buf, within timeout_ms: 0, or -1. */
static int read_line(client_conn *c, int timeout_ms, char *buf, size_t cap) {
  size_t len = 0;
  uint64_t deadline = client_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (client_now_ns() < deadline) {
    struct pollfd p = {c->fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char ch;
    if (recv(c->fd, &ch, 1, 0) != 1) return -1;
    if (ch == '\n') {
      buf[len] = '\0';
      return 0;
    }
    if (len + 1 < cap) buf[len++] = ch;
  }
  return -1;
}

TEST(twenty_half_sent_50_mib_lines_without_auth_are_closed) {
  harness h;
  const char *const args[] = {"--demo", "--reserve-mb", "0", NULL};
  harness_start_token(&h, "demo", args, "s3cret");
  harness_wait_demo_dressed(&h, "demo"); /* its texture clip's compression is not counted against the bound */
  uint64_t before = harness_server_memory(&h, "VmRSS");
  client_conn c[20];
  char err[256];
  size_t total = 0;
  for (int i = 0; i < 20; i++) {
    ASSERT_OK(client_connect(&c[i], "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
    total += harness_push(c[i].fd, 50u << 20, (const uint8_t *)"{\"jsonrpc\":\"2.0\",\"method\":\"auth\",\"params\":{\"token\":\"", 50, 20000);
  }
  for (int i = 0; i < 20; i++) {
    const char *got = read_until_closed(&c[i], 20000);
    if (!got) test__fail(__FILE__, __LINE__, "connection %d was not closed", i);
    ASSERT_STR_CONTAINS(got, "\"code\":-32007");
    ASSERT_STR_CONTAINS(got, "before HELLO or auth");
    client_close(&c[i]);
  }
  /* The same on the stream port: frames declared at 50 MiB before HELLO. */
  for (int i = 0; i < 20; i++) {
    ASSERT_OK(client_connect(&c[i], "127.0.0.1", h.stream_port, err, sizeof(err)), err);
    proto_buf b;
    proto_buf_init(&b);
    proto_hello hello = {PROTO_VERSION, PROTO_ROLE_EDITOR, {"demo", 4}, {"s3cret", 6}};
    proto_encode_hello(&b, &hello);
    /* A valid header whose length says 50 MiB: the payload never ends. */
    uint8_t head[PROTO_HEADER_SIZE];
    proto_header hd;
    ASSERT_OK(proto_header_decode(b.data, NULL, &hd), NULL);
    hd.length = 50u << 20;
    proto_header_encode(&hd, head);
    total += harness_push(c[i].fd, 25u << 20, head, sizeof(head), 20000);
    proto_buf_fini(&b);
  }
  for (int i = 0; i < 20; i++) {
    if (!harness_closed(&c[i], 20000)) test__fail(__FILE__, __LINE__, "stream connection %d was not closed", i);
    client_close(&c[i]);
  }
  uint64_t peak = harness_server_memory(&h, "VmHWM");
  fprintf(stderr, "pushed %.0f MB in all; server resident %.1f MB before, peak %.1f MB\n", (double)total / 1e6,
          (double)before / 1e6, (double)peak / 1e6);
  ASSERT(peak < before + 100000000ull);
  /* An authenticated connection may still send large requests. */
  cJSON_Delete(harness_rpc_ok(&h, "session.list", NULL));
  harness_stop(&h);
}

TEST(connections_together_hold_at_most_max_input_mb_of_unfinished_requests) {
  harness h;
  const char *const args[] = {"--max-input-mb", "64", "--reserve-mb", "0", NULL};
  harness_start(&h, NULL, args);
  uint64_t before = harness_server_memory(&h, "VmRSS");
  client_conn c[6];
  char err[256];
  int closed = 0;
  for (int i = 0; i < 6; i++) {
    ASSERT_OK(client_connect(&c[i], "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
    harness_push(c[i].fd, 30u << 20, (const uint8_t *)"{\"x\":\"", 6, 20000);
  }
  for (int i = 0; i < 6; i++) {
    const char *got = read_until_closed(&c[i], 1000);
    if (got) {
      ASSERT_STR_CONTAINS(got, "unfinished requests");
      closed++;
    }
    client_close(&c[i]);
  }
  uint64_t peak = harness_server_memory(&h, "VmHWM");
  fprintf(stderr, "%d of 6 connections closed; resident %.1f MB before, peak %.1f MB\n", closed, (double)before / 1e6,
          (double)peak / 1e6);
  /* 6 × 30 MiB do not fit in 64 MiB: at least four were closed, and the server held about 64. */
  ASSERT(closed >= 4);
  ASSERT(peak < before + (100ull << 20) + ASAN_SLACK);
  cJSON_Delete(harness_rpc_ok(&h, "session.list", NULL));
  harness_stop(&h);
}

TEST(connections_that_never_authenticate_or_go_silent_are_closed) {
  harness h;
  const char *const args[] = {"--hello-timeout-ms", "300", NULL};
  harness_start_token(&h, NULL, args, "t");
  client_conn rpc, stream;
  char err[256];
  ASSERT_OK(client_connect(&rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  ASSERT_OK(client_connect(&stream, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  const char *got = read_until_closed(&rpc, 20000);
  ASSERT(got != NULL);
  ASSERT_STR_CONTAINS(got, "\"code\":-32009");
  ASSERT_STR_CONTAINS(got, "no auth within 300 ms");
  ASSERT(harness_closed(&stream, 20000));
  client_close(&rpc);
  client_close(&stream);
  harness_stop(&h);

  const char *const idle_args[] = {"--idle-timeout-ms", "300", NULL};
  harness_start(&h, NULL, idle_args);
  ASSERT_OK(client_connect(&rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  got = read_until_closed(&rpc, 20000);
  ASSERT(got != NULL);
  ASSERT_STR_CONTAINS(got, "idle for more than 300 ms");
  client_close(&rpc);
  harness_stop(&h);
}

TEST(max_connections_is_held_to_the_file_descriptor_limit_and_the_soft_limit_raised) {
  /* The server inherits these limits: soft 64, hard 200. */
  struct rlimit r = {64, 200};
  ASSERT(setrlimit(RLIMIT_NOFILE, &r) == 0);
  harness h;
  const char *const args[] = {"--import-workers", "4", NULL};
  harness_start(&h, NULL, args);
  r.rlim_cur = 200;
  ASSERT(setrlimit(RLIMIT_NOFILE, &r) == 0); /* the test needs its own sockets */
  /* 200 descriptors, 32 + 2 per import worker kept: 160 connections. The harness holds one. */
  enum { N = 165 };
  static client_conn c[N];
  char err[256];
  int refused = 0, served = 0;
  for (int i = 0; i < N; i++) {
    ASSERT_OK(client_connect(&c[i], "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
    const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.stats\"}\n";
    ASSERT_OK(client_send(&c[i], line, sizeof(line) - 1), NULL);
    char reply[4096];
    int rc = read_line(&c[i], 20000, reply, sizeof(reply));
    if (rc != 0) test__fail(__FILE__, __LINE__, "connection %d: no answer (%d): the connection was reset", i, rc);
    if (strstr(reply, "too many connections")) refused++;
    else served++;
  }
  fprintf(stderr, "%d served, %d refused with a reason\n", served, refused);
  ASSERT_EQ(served, 159);
  ASSERT_EQ(refused, N - 159);
  for (int i = 0; i < N; i++) client_close(&c[i]);
  harness_stop(&h);
  FILE *f = fopen(h.log_path, "r");
  char line[1024];
  int raised = 0, lowered = 0;
  while (fgets(line, sizeof(line), f)) {
    raised |= strstr(line, "soft limit raised from 64 to 200") != NULL;
    lowered |= strstr(line, "max_connections 4096 lowered to 160") != NULL;
  }
  fclose(f);
  ASSERT(raised);
  ASSERT(lowered);
}

/* Whether this machine can bind the IPv6 loopback (a container may have no IPv6). */
static int have_ipv6_loopback(void) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

/* One JSON-RPC call to HOST:PORT on a connection of its own: 0 when it is answered. */
static int answered_at(const char *host, int port) {
  client_conn c;
  char err[256];
  if (client_connect(&c, host, port, err, sizeof(err)) != 0) return -1;
  cJSON *r = NULL, *e = NULL;
  int rc = client_rpc(&c, "session.list", NULL, 10000, &r, &e);
  cJSON_Delete(r), cJSON_Delete(e);
  client_close(&c);
  return rc;
}

/* The default --listen is loopback on both families (clients that resolve "localhost" to ::1
 * first, as Debian 12 does, reach it), the same port on each; --listen takes a list; an address
 * that is not one is refused at start, naming it. */
TEST(listen_takes_several_addresses_and_the_default_covers_both_loopbacks) {
  int v6 = have_ipv6_loopback();
  harness h;
  harness_start(&h, NULL, NULL);
  ASSERT_EQ(answered_at("127.0.0.1", h.rpc_port), 0);
  if (v6) ASSERT_EQ(answered_at("::1", h.rpc_port), 0);
  else printf("no IPv6 loopback on this machine: only 127.0.0.1 is checked\n");
  ASSERT_EQ(answered_at("localhost", h.rpc_port), 0);
  harness_stop(&h);
  const char *const two[] = {"--listen", v6 ? "::1,127.0.0.1" : "127.0.0.1", NULL};
  harness_start(&h, NULL, two);
  ASSERT_EQ(answered_at("127.0.0.1", h.rpc_port), 0);
  if (v6) ASSERT_EQ(answered_at("::1", h.rpc_port), 0);
  harness_stop(&h);
  char cmd[2048], out[2048] = "";
  snprintf(cmd, sizeof(cmd), "'%s' --data none --listen 127.0.0.1,not-an-address --stream-port 0 --rpc-port 0 "
           "--http-port off 2>&1", getenv("DEFORMD_BIN"));
  FILE *p = popen(cmd, "r");
  out[fread(out, 1, sizeof(out) - 1, p)] = '\0';
  ASSERT(pclose(p) != 0);
  ASSERT_STR_CONTAINS(out, "'not-an-address' is not a numeric IPv4/IPv6 address");
}
