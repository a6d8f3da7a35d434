/*
 * test_tls.c — TLS on both ports (--tls-cert/--tls-key): the same session gives the same frames
 * over TLS and in clear, clients verify the certificate, and a handshake that stalls or a
 * client that speaks clear text holds up no one.
 *
 * Oracles: a second server in clear given the same requests (frames compared byte for byte),
 * throw-away certificates made by the openssl command line (harness_certs), and a client that
 * keeps being served while another stalls.
 */
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

typedef struct frames {
  uint8_t *data;
  size_t len, cap;
  uint32_t count;
} frames;

static void keep(frames *f, const proto_header *h, const uint8_t *payload) {
  size_t n = PROTO_HEADER_SIZE + h->length;
  if (f->len + n > f->cap) {
    f->cap = (f->len + n) * 2;
    f->data = realloc(f->data, f->cap);
  }
  memcpy(f->data + f->len, payload - PROTO_HEADER_SIZE, n);
  f->len += n;
  f->count++;
}

/* Joins `session` (protocol 2 lossless when v2), applies the same requests, and keeps every
 * frame the viewer receives until the session's last version. */
static void watch_the_same_requests(harness *h, int v2, frames *out) {
  client_conn c;
  char err[256];
  harness_connect(h, &c, h->stream_port);
  proto_hello_opts o = {.codec = PROTO_CODEC_LOSSLESS};
  ASSERT_OK(client_hello2(&c, "demo", PROTO_ROLE_VIEWER, NULL, v2 ? &o : NULL), NULL);
  uint64_t version = 0;
  int snapshot = 0;
  while (!snapshot) {
    proto_header hd;
    const uint8_t *p;
    ASSERT_OK(client_read_frame(&c, 30000, &hd, &p, err, sizeof(err)), err);
    keep(out, &hd, p);
    snapshot = hd.type == PROTO_SNAPSHOT;
  }
  static const char *const requests[][2] = {
      {"weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5,\"smile_L\":0.25}}"},
      {"sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"100\":[0.001,0.002,-0.003],\"4000\":[0,0.004,0]}}"},
      {"targets.configure", "{\"session\":\"demo\",\"target\":\"smile_R\",\"muted\":true}"},
      {"targets.create_from_sculpt", "{\"session\":\"demo\",\"name\":\"bump\"}"},
      {"weights.set", "{\"session\":\"demo\",\"weights\":{\"bump\":0.5}}"},
      {"deform.reset", "{\"session\":\"demo\"}"},
  };
  for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++)
    cJSON_Delete(harness_rpc_ok(h, requests[i][0], requests[i][1]));
  cJSON *st = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  version = (uint64_t)cJSON_GetObjectItem(st, "version")->valuedouble;
  cJSON_Delete(st);
  ASSERT(version >= 5);
  for (uint64_t seen = 0; seen < version;) {
    proto_header hd;
    const uint8_t *p;
    ASSERT_OK(client_read_frame(&c, 30000, &hd, &p, err, sizeof(err)), err);
    keep(out, &hd, p);
    if (hd.session_version > seen && !(hd.flags & PROTO_FLAG_MORE)) seen = hd.session_version;
  }
  client_close(&c);
}

TEST(the_same_session_over_tls_and_in_clear_gives_identical_frames) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem");
  const char *const clear_args[] = {"--demo", NULL};
  const char *const tls_args[] = {"--demo", "--tls-cert", cert, "--tls-key", key, NULL};
  for (int v2 = 0; v2 <= 1; v2++) {
    harness a, b;
    frames fa = {0}, fb = {0};
    harness_start(&a, "demo", clear_args);
    watch_the_same_requests(&a, v2, &fa);
    harness_stop(&a);
    harness_start_full(&b, "demo", tls_args, NULL, ca);
    watch_the_same_requests(&b, v2, &fb);
    harness_stop(&b);
    fprintf(stderr, "protocol %d: %u frames, %zu bytes in clear; %u frames, %zu bytes over TLS\n", v2 ? 2 : 1, fa.count,
            fa.len, fb.count, fb.len);
    ASSERT(fa.count >= 8);
    ASSERT_EQ(fa.count, fb.count);
    ASSERT_EQ(fa.len, fb.len);
    ASSERT(memcmp(fa.data, fb.data, fa.len) == 0);
    free(fa.data);
    free(fb.data);
  }
}

/* The stream of a TLS connection read with client_read_some (deform-bench's viewers do): bytes
 * decrypted as they come, 0 when there are none, never a wait; the SNAPSHOT in them equals the
 * one client_read_frame reads on a second TLS connection. */
TEST(client_read_some_reads_a_tls_stream_without_waiting) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem");
  const char *const args[] = {"--demo", "--tls-cert", cert, "--tls-key", key, NULL};
  harness h;
  harness_start_full(&h, "demo", args, NULL, ca);
  client_conn a, b;
  char err[256];
  harness_connect(&h, &a, h.stream_port);
  harness_connect(&h, &b, h.stream_port);
  ASSERT(a.tls != NULL);
  ASSERT_OK(client_hello(&a, "demo", PROTO_ROLE_VIEWER, NULL), NULL);
  ASSERT_OK(client_hello(&b, "demo", PROTO_ROLE_VIEWER, NULL), NULL);
  /* b: the oracle, whole frames. */
  uint8_t *want = NULL;
  size_t want_len = 0;
  for (int done = 0; !done;) {
    proto_header hd;
    const uint8_t *p;
    ASSERT_OK(client_read_frame(&b, 30000, &hd, &p, err, sizeof(err)), err);
    if (hd.type == PROTO_SNAPSHOT) {
      want = malloc(hd.length + 1);
      memcpy(want, p, hd.length);
      want_len = hd.length;
      done = 1;
    }
  }
  /* a: bytes as they come, frames cut from them here. */
  size_t cap = want_len + (1u << 20), len = 0, at = 0;
  uint8_t *got = malloc(cap);
  int snapshot = 0;
  uint64_t deadline = client_now_ns() + 30000000000ull;
  while (!snapshot) {
    long r = client_read_some(&a, got + len, cap - len);
    ASSERT(r >= 0);
    if (r == 0) {
      ASSERT(client_now_ns() < deadline);
      struct pollfd pf = {a.fd, POLLIN, 0};
      poll(&pf, 1, 100);
      continue;
    }
    len += (size_t)r;
    for (proto_header hd; !snapshot && len - at >= PROTO_HEADER_SIZE;) {
      ASSERT_OK(proto_header_decode(got + at, NULL, &hd), NULL);
      if (len - at < PROTO_HEADER_SIZE + hd.length) break;
      if (hd.type == PROTO_SNAPSHOT) {
        ASSERT_EQ(hd.length, want_len);
        ASSERT(memcmp(got + at + PROTO_HEADER_SIZE, want, want_len) == 0);
        snapshot = 1;
      }
      at += PROTO_HEADER_SIZE + hd.length;
    }
  }
  /* Nothing more is coming: 0, not a wait (one would hang here until ctest's timeout). */
  while (client_read_some(&a, got, cap) > 0) {
  }
  ASSERT_EQ(client_read_some(&a, got, cap), 0);
  free(got);
  free(want);
  client_close(&a);
  client_close(&b);
  harness_stop(&h);
}

TEST(clients_refuse_a_certificate_from_another_ca_or_for_another_name) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem"), *other = harness_cert("other-ca.pem"), *wcert = harness_cert("wrong-cert.pem"), *wkey = harness_cert("wrong-key.pem");
  const char *const args[] = {"--demo", "--tls-cert", cert, "--tls-key", key, NULL};
  harness h;
  harness_start_full(&h, "demo", args, NULL, ca);
  char err[512];
  client_conn c;
  /* Another CA: not trusted. */
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  ASSERT_EQ(client_tls_start(&c, "127.0.0.1", other, 10000, err, sizeof(err)), CLIENT_ETLS);
  ASSERT_STR_CONTAINS(err, "not trusted");
  client_close(&c);
  /* The right CA, by the name the certificate also holds. */
  ASSERT_OK(client_connect(&c, "localhost", h.rpc_port, err, sizeof(err)), err);
  ASSERT_OK(client_tls_start(&c, "localhost", ca, 10000, err, sizeof(err)), err);
  cJSON *r = NULL, *e = NULL;
  ASSERT_OK(client_rpc(&c, "session.list", NULL, 10000, &r, &e), NULL);
  cJSON_Delete(r);
  client_close(&c);
  harness_stop(&h);
  /* A certificate for example.com, from the trusted CA, on 127.0.0.1: the name does not match. */
  const char *const wrong[] = {"--demo", "--tls-cert", wcert, "--tls-key", wkey, NULL};
  harness_start_full(&h, NULL, wrong, NULL, NULL); /* the harness's own connection: clear text, closed */
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_EQ(client_tls_start(&c, "127.0.0.1", ca, 10000, err, sizeof(err)), CLIENT_ETLS);
  ASSERT_STR_CONTAINS(err, "not trusted");
  client_close(&c);
  harness_kill(&h);
  /* A key that is not the certificate's: the server refuses to start. */
  char cmd[4000];
  snprintf(cmd, sizeof(cmd), "'%s' --data none --stream-port 0 --rpc-port 0 --tls-cert '%s' --tls-key '%s' 2>&1",
           getenv("DEFORMD_BIN"), cert, wkey);
  FILE *p = popen(cmd, "r");
  char out[2048] = "";
  size_t got = fread(out, 1, sizeof(out) - 1, p);
  out[got] = '\0';
  ASSERT(pclose(p) != 0);
  ASSERT_STR_CONTAINS(out, "--tls-key");
}

TEST(a_stalled_handshake_or_a_clear_text_client_holds_up_no_one) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem");
  const char *const args[] = {"--demo", "--tls-cert", cert, "--tls-key", key, NULL};
  harness h;
  harness_start_full(&h, "demo", args, NULL, ca);
  char err[256];
  /* A client that sends the first 5 bytes of a TLS record and nothing more. */
  client_conn stalled;
  ASSERT_OK(client_connect(&stalled, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  static const uint8_t partial[] = {0x16, 0x03, 0x01, 0x02, 0x00};
  ASSERT_OK(client_send(&stalled, partial, sizeof(partial)), NULL);
  /* A client speaking clear text: closed, without an answer it could read. */
  client_conn plain;
  ASSERT_OK(client_connect(&plain, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  ASSERT_OK(client_hello(&plain, "demo", PROTO_ROLE_VIEWER, NULL), NULL);
  ASSERT(harness_closed(&plain, 10000));
  client_close(&plain);
  /* Meanwhile a TLS viewer joins and follows an edit. */
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":1}}"));
  harness_follow(&v, &r, 1, 10000);
  ASSERT(r.weights[mesh_find_target(r.mesh, "jaw_open")] == 1.0f);
  client_replica_fini(&r);
  client_close(&v);
  /* The stalled one is still connected (the server waits for the rest on its own time). */
  ASSERT(!harness_closed(&stalled, 300));
  client_close(&stalled);
  harness_stop(&h);
}

TEST(the_http_port_speaks_tls_with_the_same_flag) {
  const char *cert = harness_cert("cert.pem"), *key = harness_cert("key.pem"), *ca = harness_cert("ca.pem");
  const char *const args[] = {"--demo", "--http-port", "0", "--tls-cert", cert, "--tls-key", key, NULL};
  harness h;
  harness_start_full(&h, "demo", args, NULL, ca);
  ASSERT(h.http_port > 0);
  client_conn c;
  harness_connect(&h, &c, h.http_port); /* verified against the test CA, or the test fails */
  const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ASSERT_OK(client_send(&c, req, sizeof(req) - 1), NULL);
  char page[65536];
  size_t n = 0;
  for (int i = 0; i < 500 && n + 1 < sizeof(page); i++) {
    long r = client__tls_read(&c, page + n, sizeof(page) - 1 - n);
    if (r < 0) break; /* closed after the answer */
    if (r == 0) {
      struct pollfd p = {c.fd, c.tls_wait, 0};
      poll(&p, 1, 100);
      continue;
    }
    n += (size_t)r;
  }
  page[n] = '\0';
  ASSERT(strncmp(page, "HTTP/1.1 200", 12) == 0);
  ASSERT_STR_CONTAINS(page, "<html");
  client_close(&c);
  /* In clear text, the HTTP port answers nothing a browser could read. */
  char err[256];
  ASSERT_OK(client_connect(&c, "127.0.0.1", h.http_port, err, sizeof(err)), err);
  ASSERT_OK(client_send(&c, req, sizeof(req) - 1), NULL);
  ASSERT(harness_closed(&c, 10000));
  client_close(&c);
  harness_stop(&h);
}
