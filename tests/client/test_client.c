/*
 * test_client.c — the blocking client (server/client/client.c) against a fake peer on the
 * other end of a socket pair: what each function returns for each thing a peer can do.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "test.h"

TEST(client_parses_host_and_port_forms) {
  char host[64];
  int port = 0;
  ASSERT_OK(client_parse_hostport("example.org:7451", host, sizeof(host), &port), NULL);
  ASSERT(strcmp(host, "example.org") == 0 && port == 7451);
  ASSERT_OK(client_parse_hostport(":7450", host, sizeof(host), &port), NULL);
  ASSERT(strcmp(host, "127.0.0.1") == 0 && port == 7450);
  ASSERT_OK(client_parse_hostport("[::1]:80", host, sizeof(host), &port), NULL);
  ASSERT(strcmp(host, "::1") == 0 && port == 80);
  ASSERT_EQ(client_parse_hostport("noport", host, sizeof(host), &port), CLIENT_EINVAL);
  ASSERT_EQ(client_parse_hostport("h:0", host, sizeof(host), &port), CLIENT_EINVAL);
  ASSERT_EQ(client_parse_hostport("h:65536", host, sizeof(host), &port), CLIENT_EINVAL);
  ASSERT_EQ(client_parse_hostport("h:12x", host, sizeof(host), &port), CLIENT_EINVAL);
  ASSERT_EQ(client_parse_hostport("averyveryverylonghostname:1", host, 8, &port), CLIENT_EINVAL);
}

/* A client connection on one end of a socket pair; *peer is the other end. */
static void pair(client_conn *c, int *peer) {
  int sv[2];
  ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  memset(c, 0, sizeof(*c));
  c->fd = sv[0];
  *peer = sv[1];
}

static void write_all(int fd, const void *p, size_t n) { ASSERT(write(fd, p, n) == (ssize_t)n); }

/* client_read_some never waits: 0 with nothing there, the bytes that are, then the close. */
TEST(client_read_some_returns_what_has_arrived_without_waiting) {
  client_conn c;
  int peer;
  pair(&c, &peer);
  char buf[64];
  ASSERT_EQ(client_read_some(&c, buf, sizeof(buf)), 0);
  write_all(peer, "hello", 5);
  ASSERT_EQ(client_read_some(&c, buf, sizeof(buf)), 5);
  ASSERT(memcmp(buf, "hello", 5) == 0);
  ASSERT_EQ(client_read_some(&c, buf, sizeof(buf)), 0);
  close(peer);
  ASSERT_EQ(client_read_some(&c, buf, sizeof(buf)), CLIENT_ECLOSED);
  client_close(&c);
}

TEST(client_reads_whole_frames_and_names_each_way_a_read_ends) {
  client_conn c;
  int peer;
  pair(&c, &peer);
  proto_buf b;
  proto_buf_init(&b);
  proto_ping pg = {11, 22, 33};
  ASSERT_OK(proto_encode_ping(&b, PROTO_PING, &pg), NULL);
  proto_header h;
  const uint8_t *p;
  char err[256];
  /* Half a frame: not yet, and nothing consumed. */
  write_all(peer, b.data, 10);
  ASSERT_EQ(client_read_frame(&c, 50, &h, &p, err, sizeof(err)), CLIENT_ETIMEDOUT);
  write_all(peer, b.data + 10, b.len - 10);
  ASSERT_EQ(client_read_frame(&c, 1000, &h, &p, err, sizeof(err)), 0);
  ASSERT_EQ(h.type, PROTO_PING);
  proto_ping got;
  ASSERT_OK(proto_decode_ping(p, h.length, &got), NULL);
  ASSERT(got.t0_ns == 11 && got.t1_ns == 22 && got.seq == 33);
  /* A header that is not a deformd frame. */
  uint8_t junk[PROTO_HEADER_SIZE];
  memset(junk, 'x', sizeof(junk));
  write_all(peer, junk, sizeof(junk));
  ASSERT_EQ(client_read_frame(&c, 1000, &h, &p, err, sizeof(err)), CLIENT_EMALFORMED);
  ASSERT_STR_CONTAINS(err, "bad frame header");
  client_close(&c);
  close(peer);
  /* The peer closes: CLIENT_ECLOSED, also inside a frame. */
  pair(&c, &peer);
  write_all(peer, b.data, b.len - 1);
  close(peer);
  ASSERT_EQ(client_read_frame(&c, 1000, &h, &p, err, sizeof(err)), CLIENT_ECLOSED);
  ASSERT_STR_CONTAINS(err, "inside a frame");
  client_close(&c);
  proto_buf_fini(&b);
}

/* The fake JSON-RPC peer: reads one request line, answers first a stray response (another id),
 * then the answer `kind` asks for with the request's id. */
typedef struct fake_rpc {
  int fd;
  const char *kind; /* "result" or "error" */
} fake_rpc;

static void *fake_rpc_main(void *arg) {
  fake_rpc *f = arg;
  char line[4096];
  size_t n = 0;
  while (n < sizeof(line) - 1) {
    ssize_t r = read(f->fd, line + n, 1);
    if (r <= 0 || line[n] == '\n') break;
    n++;
  }
  line[n] = '\0';
  cJSON *req = cJSON_Parse(line);
  int id = req ? cJSON_GetObjectItem(req, "id")->valueint : -1;
  cJSON_Delete(req);
  char out[512];
  int len = snprintf(out, sizeof(out), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":\"stray\"}\n", id + 1000);
  write_all(f->fd, out, (size_t)len);
  if (strcmp(f->kind, "error") == 0)
    len = snprintf(out, sizeof(out), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"error\":{\"code\":-32001,\"message\":\"no\"}}\n", id);
  else
    len = snprintf(out, sizeof(out), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"ok\":true}}\n", id);
  write_all(f->fd, out, (size_t)len);
  return NULL;
}

TEST(client_rpc_returns_the_answer_to_its_own_request) {
  const char *kinds[2] = {"result", "error"};
  for (int k = 0; k < 2; k++) {
    client_conn c;
    fake_rpc f;
    pair(&c, &f.fd);
    f.kind = kinds[k];
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, fake_rpc_main, &f) == 0);
    cJSON *result = NULL, *error = NULL;
    int rc = client_rpc(&c, "state.get", NULL, 5000, &result, &error);
    pthread_join(th, NULL);
    if (k == 0) {
      ASSERT_EQ(rc, 0);
      ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(result, "ok")) && error == NULL);
    } else {
      ASSERT_EQ(rc, CLIENT_ERPC);
      ASSERT(result == NULL && cJSON_GetObjectItem(error, "code")->valueint == -32001);
    }
    cJSON_Delete(result);
    cJSON_Delete(error);
    close(f.fd);
    /* Nobody answers any more: the next call ends with the connection. */
    rc = client_rpc(&c, "state.get", NULL, 5000, &result, &error);
    ASSERT(rc == CLIENT_ECLOSED || rc == CLIENT_EIO);
    client_close(&c);
  }
}

TEST(client_connect_names_a_refused_port) {
  client_conn c;
  char err[256];
  /* Port 1 on loopback: nothing listens there (a privileged port no test uses). */
  ASSERT_EQ(client_connect(&c, "127.0.0.1", 1, err, sizeof(err)), CLIENT_ECONNECT);
  ASSERT_STR_CONTAINS(err, "cannot connect");
  client_close(&c);
  int rc = client_connect_start(&c, "127.0.0.1", 1, err, sizeof(err));
  if (rc == CLIENT_EINPROGRESS) rc = client_connect_finish(&c, 5000, err, sizeof(err));
  ASSERT_EQ(rc, CLIENT_ECONNECT);
  client_close(&c);
  ASSERT(strcmp(client_strerror(CLIENT_ERPC), "the server answered with an error") == 0);
}

/* A loopback listener on a free port; its port in *port. */
static int listener(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 4) == 0);
  socklen_t len = sizeof(a);
  ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

/* A name that resolves to several addresses ("localhost": ::1 first on Debian 12, where a
 * server may listen on 127.0.0.1 only) is tried address by address, also when the first
 * connect is still in progress when it is refused (as loopback connects are on some kernels):
 * here a refused address (port 1) comes first, the listener second. */
TEST(client_connect_tries_every_address_a_name_resolves_to) {
  int port, lfd = listener(&port);
  struct sockaddr_in refused = {.sin_family = AF_INET, .sin_port = htons(1),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct sockaddr_in open = refused;
  open.sin_port = htons((uint16_t)port);
  struct addrinfo second = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_addrlen = sizeof(open),
                            .ai_addr = (struct sockaddr *)&open};
  struct addrinfo first = second;
  first.ai_addr = (struct sockaddr *)&refused;
  first.ai_next = &second;
  {
    client_conn c;
    char err[256] = "";
    int rc = client_connect_start_at(&c, &first, "twohomed", port, err, sizeof(err));
    while (rc == CLIENT_EINPROGRESS) rc = client_connect_finish(&c, 5000, err, sizeof(err));
    ASSERT_OK(rc, err);
    int peer = accept(lfd, NULL, NULL);
    ASSERT(peer >= 0);
    ASSERT(write(c.fd, "x", 1) == 1);
    char b = 0;
    ASSERT(read(peer, &b, 1) == 1 && b == 'x');
    close(peer);
    client_close(&c);
  }
  first.ai_next = NULL; /* the refused address alone: refused, with a reason */
  client_conn c;
  char err[256] = "";
  int rc = client_connect_start_at(&c, &first, "twohomed", 1, err, sizeof(err));
  while (rc == CLIENT_EINPROGRESS) rc = client_connect_finish(&c, 5000, err, sizeof(err));
  ASSERT_EQ(rc, CLIENT_ECONNECT);
  ASSERT_STR_CONTAINS(err, "cannot connect");
  client_close(&c);
  close(lfd);
}
