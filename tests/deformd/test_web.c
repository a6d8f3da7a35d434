/*
 * test_web.c — deformd's HTTP port (--http-port): the page's files, and the WebSocket endpoints
 * /ws/stream and /ws/rpc against the TCP ports they mirror.
 *
 * The oracles: the files in viewer/web/ (what the page must be, byte for byte); the TCP stream
 * port (a WebSocket viewer gets the same frames, byte for byte, one per message); the TCP
 * JSON-RPC port's answers and rules (token, auth); RFC 6455's handshake example (the accept
 * value is fixed by the key). The client (tests/support/ws_client.c) frames with wslay too, but
 * through its frame API on a blocking socket, not the server's code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proto_caps.h"
#include "test.h"
#include "ws_client.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_SLACK (256ull << 20) /* shadow memory and quarantine */
#else
#define ASAN_SLACK 0ull
#endif

static const char *const demo_args[] = {"--demo", NULL};

static uint8_t *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ASSERT(f != NULL);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)n + 1);
  ASSERT_EQ(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

static int get(harness *h, const char *method, const char *path, const char *extra, char **head, uint8_t **body,
               size_t *len) {
  size_t cap = strlen(path) + (extra ? strlen(extra) : 0) + 256;
  char *req = malloc(cap);
  snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s\r\n", method, path,
           h->http_port, extra ? extra : "");
  int status = http_request(h->http_port, req, head, body, len);
  free(req);
  return status;
}

/* The page is viewer/web/ compiled in: / is index.html, every module is served with a
 * JavaScript type (browsers refuse modules otherwise), nothing else is found. */
TEST(the_http_port_serves_the_files_of_viewer_web) {
  harness h;
  harness_start(&h, NULL, NULL);
  ASSERT(h.http_port > 0);
  const char *names[] = {"index.html", "main.js", "protocol.js", "meshopt.js"};
  for (int i = 0; i < 4; i++) {
    char path[1024], url[128];
    snprintf(path, sizeof(path), "%s/viewer/web/%s", DEFORMD_SOURCE_DIR, names[i]);
    size_t want_len, got_len;
    uint8_t *want = read_file(path, &want_len), *got;
    char *head;
    snprintf(url, sizeof(url), "/%s", names[i]);
    ASSERT_EQ(get(&h, "GET", i == 0 ? "/?session=demo" : url, NULL, &head, &got, &got_len), 200);
    ASSERT_EQ(got_len, want_len);
    ASSERT(memcmp(got, want, want_len) == 0);
    ASSERT_STR_CONTAINS(head, i == 0 ? "Content-Type: text/html" : "Content-Type: text/javascript");
    free(head);
    free(got);
    free(want);
  }
  char *head;
  uint8_t *body;
  size_t len;
  ASSERT_EQ(get(&h, "GET", "/no-such-file.js", NULL, &head, &body, &len), 404);
  free(head), free(body);
  ASSERT_EQ(get(&h, "GET", "/../CMakeLists.txt", NULL, &head, &body, &len), 404);
  free(head), free(body);
  ASSERT_EQ(get(&h, "POST", "/index.html", NULL, &head, &body, &len), 405);
  ASSERT_STR_CONTAINS(head, "Allow: GET, HEAD");
  free(head), free(body);
  ASSERT_EQ(get(&h, "HEAD", "/index.html", NULL, &head, &body, &len), 200);
  ASSERT_EQ(len, 0u);
  free(head), free(body);
  /* Bounds: a head over 16 KiB is refused, and the server keeps serving. */
  char *big = malloc(20000);
  memset(big, 'a', 19990);
  memcpy(big, "X-Big: ", 7);
  memcpy(big + 19990, "\r\n", 3);
  ASSERT_EQ(get(&h, "GET", "/", big, &head, &body, &len), 431);
  free(head), free(body), free(big);
  ASSERT_EQ(http_request(h.http_port, "BLAH\r\n\r\n", &head, &body, &len), 400);
  ASSERT_STR_CONTAINS((char *)body, "malformed HTTP request");
  free(head), free(body);
  ASSERT_EQ(get(&h, "GET", "/", NULL, NULL, NULL, NULL), 200);
  harness_stop(&h);
}

/* Two requests on one connection (keep-alive) are both answered, in order. */
TEST(the_http_port_answers_requests_one_after_another_on_one_connection) {
  harness h;
  harness_start(&h, NULL, NULL);
  char req[512];
  snprintf(req, sizeof(req),
           "GET /protocol.js HTTP/1.1\r\nHost: x\r\n\r\nGET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  char *head;
  uint8_t *body;
  size_t len;
  ASSERT_EQ(http_request(h.http_port, req, &head, &body, &len), 200);
  ASSERT_STR_CONTAINS((char *)body, "HTTP/1.1 200 OK"); /* the second answer follows the first body */
  ASSERT_STR_CONTAINS((char *)body, "<!doctype html>");
  free(head), free(body);
  harness_stop(&h);
}

/* A handshake that is not a WebSocket's, or comes from another site's page, is refused with a
 * status and a reason; RFC 6455's example key gets its example answer. */
TEST(a_websocket_upgrade_is_checked_and_refused_with_a_reason) {
  harness h;
  harness_start(&h, NULL, NULL);
  ws_client w;
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  ws_close(&w);
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/rpc?x=1", "Origin: http://127.0.0.1:1\r\n"), 403);
  ws_close(&w);
  char origin[128];
  snprintf(origin, sizeof(origin), "Origin: http://127.0.0.1:%d\r\n", h.http_port);
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/rpc", origin), 101);
  ws_close(&w);
  char *head;
  uint8_t *body;
  size_t len;
  ASSERT_EQ(get(&h, "GET", "/ws/stream", NULL, &head, &body, &len), 426);
  free(head), free(body);
  ASSERT_EQ(get(&h, "GET", "/ws/stream", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\n"
                                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", &head, &body, &len), 426);
  ASSERT_STR_CONTAINS(head, "Sec-WebSocket-Version: 13");
  free(head), free(body);
  ASSERT_EQ(get(&h, "GET", "/ws/stream", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                         "Sec-WebSocket-Key: short\r\n", &head, &body, &len), 400);
  ASSERT_STR_CONTAINS((char *)body, "Sec-WebSocket-Key");
  free(head), free(body);
  harness_stop(&h);
}

static void encode_hello2(proto_buf *b, const char *session, proto_role role, const char *token) {
  proto_hello m = {PROTO_VERSION_2, (uint8_t)role, {session, (uint16_t)strlen(session)},
                   {token ? token : "", (uint16_t)(token ? strlen(token) : 0)}};
  proto_hello_opts o = {0};
  ASSERT_OK(proto_encode_hello2(b, &m, &o), NULL);
}

/* Reads the next WebSocket message as one protocol frame (its header is checked). */
static void ws_frame(ws_client *w, proto_header *h) {
  ASSERT_EQ(ws_recv(w, 30000), 2);
  ASSERT(w->msg_len >= PROTO_HEADER_SIZE);
  proto_limits lim = {0xFFFFFFFFu, 5000000, 0, 0};
  ASSERT_OK(proto_header_decode(w->msg, &lim, h), NULL);
  ASSERT_EQ((size_t)h->length + PROTO_HEADER_SIZE, w->msg_len); /* exactly one frame */
}

/* Reads the next TCP frame and returns a copy of its payload. */
static uint8_t *tcp_frame(client_conn *c, proto_header *h) {
  char err[256];
  const uint8_t *p;
  ASSERT_OK(client_read_frame(c, 30000, h, &p, err, sizeof(err)), err);
  uint8_t *copy = malloc(h->length + 1);
  memcpy(copy, p, h->length);
  return copy;
}

/* A browser's stream is the TCP port's stream: the same WELCOME fields, the same SNAPSHOT bytes
 * and the same live frames, each frame one binary message; an edit sent as a message is applied
 * like one sent on the TCP port. */
TEST(a_websocket_stream_carries_the_tcp_ports_frames_one_per_message) {
  harness h;
  harness_start(&h, "demo", demo_args);
  client_conn tcp;
  char err[256];
  ASSERT_OK(client_connect(&tcp, "127.0.0.1", h.stream_port, err, sizeof(err)), err);
  proto_hello_opts o = {0};
  ASSERT_OK(client_hello2(&tcp, "demo", PROTO_ROLE_VIEWER, NULL, &o), NULL);
  ws_client w;
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  proto_buf b;
  proto_buf_init(&b);
  encode_hello2(&b, "demo", PROTO_ROLE_EDITOR, NULL);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 3), NULL); /* fragmented: wslay joins the pieces */
  proto_header th, wh;
  free(tcp_frame(&tcp, &th));
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_WELCOME);
  ASSERT_EQ(wh.version, PROTO_VERSION_2);
  uint8_t *snap = tcp_frame(&tcp, &th);
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_SNAPSHOT);
  ASSERT_EQ(wh.length, th.length);
  ASSERT(memcmp(w.msg + PROTO_HEADER_SIZE, snap, th.length) == 0);
  free(snap);
  /* A weights edit from the WebSocket editor: both viewers get the same WEIGHTS bytes. */
  b.len = 0;
  uint32_t idx[2] = {1, 2};
  float val[2] = {0.25f, 0.75f};
  ASSERT_OK(proto_encode_edit_weights(&b, 7, 2, idx, val), NULL);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
  uint8_t *wt = tcp_frame(&tcp, &th);
  ws_frame(&w, &wh);
  ASSERT_EQ(th.type, PROTO_WEIGHTS);
  ASSERT_EQ(wh.type, PROTO_WEIGHTS);
  ASSERT_EQ(wh.session_version, 1u);
  ASSERT_EQ(wh.length, th.length);
  ASSERT(memcmp(w.msg + PROTO_HEADER_SIZE, wt, th.length) == 0);
  free(wt);
  /* A sculpt from JSON-RPC: the same DELTA on both (version 2 bodies). */
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"100\":[0.001,0,-0.002]}}"));
  uint8_t *d = tcp_frame(&tcp, &th);
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_DELTA);
  ASSERT_EQ(wh.length, th.length);
  ASSERT(memcmp(w.msg + PROTO_HEADER_SIZE, d, th.length) == 0);
  free(d);
  /* PING is answered with a PONG message. */
  b.len = 0;
  proto_ping ping = {123, 0, 9};
  ASSERT_OK(proto_encode_ping(&b, PROTO_PING, &ping), NULL);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_PONG);
  cJSON *st = harness_rpc_ok(&h, "weights.get", "{\"session\":\"demo\"}");
  ASSERT_NEAR(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "weights"), 2)->valuedouble, 0.75, 1e-7);
  cJSON_Delete(st);
  proto_buf_fini(&b);
  ws_close(&w);
  client_close(&tcp);
  harness_stop(&h);
}

/* Messages that are not exactly one frame, of the wrong kind, or over the limit close the
 * WebSocket with a reason; the server goes on serving. */
TEST(a_websocket_message_that_is_not_one_frame_closes_with_a_reason) {
  harness h;
  const char *const args[] = {"--demo", "--max-frame", "4096", NULL};
  harness_start(&h, "demo", args);
  proto_buf b;
  proto_buf_init(&b);
  proto_ping ping = {1, 0, 1};
  ASSERT_OK(proto_encode_ping(&b, PROTO_PING, &ping), NULL);
  ASSERT_OK(proto_encode_ping(&b, PROTO_PING, &ping), NULL); /* two frames in one message */
  ws_client w;
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
  proto_header wh;
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_ERROR);
  proto_error e;
  ASSERT_OK(proto_decode_error(w.msg + PROTO_HEADER_SIZE, wh.length, &e), NULL);
  ASSERT_EQ(e.code, PROTO_ERR_MALFORMED);
  ASSERT_EQ(ws_recv(&w, 10000), 0);
  ASSERT_EQ(w.close_code, 4000 + PROTO_ERR_MALFORMED);
  ASSERT_STR_CONTAINS(w.close_reason, "exactly one frame");
  ws_close(&w);
  /* Text on the stream endpoint: 1003. */
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  ASSERT_OK(ws_send(&w, 1, "{}", 2, 1), NULL);
  ASSERT_EQ(ws_recv(&w, 10000), 0);
  ASSERT_EQ(w.close_code, 1003);
  ws_close(&w);
  /* Over --max-frame (plus a header): 1009, as wslay keeps the limit. */
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  uint8_t *big = calloc(1, 8192);
  ASSERT_OK(ws_send(&w, 2, big, 8192, 4), NULL);
  free(big);
  ASSERT_EQ(ws_recv(&w, 10000), 0);
  ASSERT_EQ(w.close_code, 1009);
  ws_close(&w);
  /* A HELLO for a session that does not exist: ERROR, then the close says why. */
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  b.len = 0;
  encode_hello2(&b, "nope", PROTO_ROLE_VIEWER, NULL);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_ERROR);
  ASSERT_EQ(ws_recv(&w, 10000), 0);
  ASSERT_EQ(w.close_code, 4000 + PROTO_ERR_UNKNOWN_SESSION);
  ASSERT_STR_CONTAINS(w.close_reason, "unknown session 'nope'");
  ws_close(&w);
  proto_buf_fini(&b);
  cJSON_Delete(harness_rpc_ok(&h, "session.list", NULL));
  harness_stop(&h);
}

/* A PING the protocol forbids — fragmented, or with more than 125 bytes — is a protocol error:
 * the close says 1002 and why (RFC 6455 §5.5, §7.4.1), and the server goes on serving. */
TEST(a_fragmented_or_oversized_websocket_ping_closes_with_1002) {
  harness h;
  harness_start(&h, "demo", demo_args);
  for (int oversized = 0; oversized < 2; oversized++) {
    ws_client w;
    ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
    /* Masked client frames: FIN=0 PING of 4 bytes, or FIN=1 PING of 126 bytes (16-bit length). */
    uint8_t f[8 + 126] = {0};
    size_t n;
    if (oversized) {
      f[0] = 0x89, f[1] = 0x80 | 126, f[2] = 0, f[3] = 126; /* mask key f[4..8) zero: payload as is */
      n = 8 + 126;
    } else {
      f[0] = 0x09, f[1] = 0x80 | 4; /* mask key f[2..6) zero, payload f[6..10) */
      n = 10;
    }
    ASSERT_OK(ws_send_raw(&w, f, n), NULL);
    ASSERT_EQ(ws_recv(&w, 10000), 0);
    ASSERT_EQ(w.close_code, 1002);
    ASSERT_STR_CONTAINS(w.close_reason, "malformed frame");
    ws_close(&w);
  }
  cJSON_Delete(harness_rpc_ok(&h, "session.list", NULL));
  harness_stop(&h);
}

/* JSON-RPC over a WebSocket: one request per text message (newlines inside are whitespace), one
 * response per message, the same answers and errors as the TCP port. */
TEST(json_rpc_over_a_websocket_answers_one_message_per_request) {
  harness h;
  harness_start(&h, "demo", demo_args);
  ws_client w;
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/rpc", ""), 101);
  const char *req = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 5,\n  \"method\": \"weights.set\",\n"
                    "  \"params\": {\"session\": \"demo\", \"weights\": {\"jaw_open\": 0.5}}\n}";
  ASSERT_OK(ws_send(&w, 1, req, strlen(req), 2), NULL);
  ASSERT_EQ(ws_recv(&w, 30000), 1);
  cJSON *r = cJSON_ParseWithLength((const char *)w.msg, w.msg_len);
  ASSERT(r != NULL);
  ASSERT_EQ(cJSON_GetObjectItem(r, "id")->valueint, 5);
  ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "version")->valueint, 1);
  ASSERT(w.msg[w.msg_len - 1] == '}'); /* the line's newline is not part of the message */
  cJSON_Delete(r);
  const char *bad = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"weights.set\",\"params\":{\"session\":\"demo\","
                    "\"weights\":{\"jaw_open\":7}}}";
  ASSERT_OK(ws_send(&w, 1, bad, strlen(bad), 1), NULL);
  ASSERT_EQ(ws_recv(&w, 30000), 1);
  char msg[256];
  int code = harness_rpc_err(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":7}}", msg, sizeof(msg));
  r = cJSON_ParseWithLength((const char *)w.msg, w.msg_len);
  ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "error"), "code")->valueint, code);
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "error"), "message")->valuestring, msg);
  cJSON_Delete(r);
  ASSERT_OK(ws_send(&w, 1, "not json", 8, 1), NULL);
  ASSERT_EQ(ws_recv(&w, 30000), 1);
  ASSERT_STR_CONTAINS((char *)w.msg, "-32700");
  ws_close(&w);
  harness_stop(&h);
}

/* The access rules of the TCP ports (srv_access.c): with tokens, every stream HELLO shows one
 * (a viewer's too) and a JSON-RPC connection must call auth first. */
TEST(websockets_follow_the_token_rules_of_the_tcp_ports) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start_token(&h, "demo", args, "s3cret");
  proto_buf b;
  proto_buf_init(&b);
  ws_client w;
  proto_header wh;
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  encode_hello2(&b, "demo", PROTO_ROLE_EDITOR, NULL);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_ERROR);
  ASSERT_EQ(ws_recv(&w, 10000), 0);
  ASSERT_EQ(w.close_code, 4000 + PROTO_ERR_FORBIDDEN);
  ws_close(&w);
  const char *roles[] = {"viewer", "editor"};
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
    b.len = 0;
    encode_hello2(&b, "demo", PROTO_ROLE_VIEWER, NULL); /* no token: refused, a viewer too */
    ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
    ws_frame(&w, &wh);
    ASSERT_EQ(wh.type, PROTO_ERROR);
    ws_close(&w);
    ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
    b.len = 0;
    encode_hello2(&b, "demo", i == 0 ? PROTO_ROLE_VIEWER : PROTO_ROLE_EDITOR, "s3cret");
    ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
    ws_frame(&w, &wh);
    fprintf(stderr, "%s: WELCOME\n", roles[i]);
    ASSERT_EQ(wh.type, PROTO_WELCOME);
    ASSERT_EQ(w.msg[PROTO_HEADER_SIZE + 4], i == 0 ? PROTO_ROLE_VIEWER : PROTO_ROLE_EDITOR);
    ws_close(&w);
  }
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/rpc", ""), 101);
  const char *list = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"}";
  ASSERT_OK(ws_send(&w, 1, list, strlen(list), 1), NULL);
  ASSERT_EQ(ws_recv(&w, 30000), 1);
  ASSERT_STR_CONTAINS((char *)w.msg, "needs a token");
  const char *auth = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"auth\",\"params\":{\"token\":\"s3cret\"}}";
  ASSERT_OK(ws_send(&w, 1, auth, strlen(auth), 1), NULL);
  ASSERT_EQ(ws_recv(&w, 30000), 1);
  ASSERT_STR_CONTAINS((char *)w.msg, "\"role\":\"admin\"");
  ASSERT_OK(ws_send(&w, 1, list, strlen(list), 1), NULL);
  ASSERT_EQ(ws_recv(&w, 30000), 1);
  ASSERT_STR_CONTAINS((char *)w.msg, "\"session\":\"demo\"");
  ws_close(&w);
  proto_buf_fini(&b);
  harness_stop(&h);
}

/* A WebSocket viewer that stops reading is a slow reader like a TCP one: it is dropped after the
 * slow timeout (server.stats counts it) and the others keep up. */
TEST(a_websocket_viewer_that_stops_reading_is_dropped_like_a_tcp_one) {
  harness h;
  const char *const args[] = {"--demo", "--soft-limit", "65536", "--slow-timeout-ms", "1000", "--reserve-mb", "0", NULL};
  harness_start(&h, "demo", args);
  ws_client w;
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  proto_buf b;
  proto_buf_init(&b);
  encode_hello2(&b, "demo", PROTO_ROLE_VIEWER, NULL);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL); /* and never reads: not even the snapshot */
  proto_buf_fini(&b);
  client_conn live;
  client_replica r;
  harness_join(&h, &live, &r, "demo", PROTO_ROLE_EDITOR, NULL);
  /* Every vertex moves in each edit: DELTAs of a few hundred kilobytes fill the socket soon. */
  uint32_t nv = r.mesh->vertex_count;
  uint32_t *idx = malloc(sizeof(uint32_t) * nv);
  int32_t *q = malloc(sizeof(int32_t) * 3 * nv);
  for (uint32_t v = 0; v < nv; v++) idx[v] = v;
  proto_buf_init(&b);
  int dropped = 0;
  for (int e = 1; e <= 2000 && !dropped; e++) {
    for (uint32_t v = 0; v < 3 * nv; v++) q[v] = (int32_t)((v * 7919u + (uint32_t)e * 104729u) % 2001u) - 1000;
    ASSERT_OK(proto_encode_edit_offsets(&b, (uint32_t)e, nv, idx, q), NULL);
    ASSERT_OK(client_send_buf(&live, &b), NULL);
    harness_follow(&live, &r, (uint64_t)e, 10000); /* the live one keeps up throughout */
    cJSON *st = harness_rpc_ok(&h, "server.stats", NULL);
    dropped = cJSON_GetObjectItem(st, "clients_dropped")->valueint;
    cJSON_Delete(st);
    if (!dropped && e > 20) usleep(20000); /* the slow timeout is what is waited for */
  }
  proto_buf_fini(&b);
  free(idx);
  free(q);
  ASSERT_EQ(dropped, 1);
  client_replica_fini(&r);
  client_close(&live);
  ws_close(&w);
  harness_stop(&h);
}

/* Sends a masked client frame header declaring a `len`-byte text message, then `send_len`
 * payload bytes, without ever blocking (harness_push). Returns the bytes sent. */
static size_t push_text_message(int fd, uint64_t len, size_t send_len, int timeout_ms) {
  uint8_t head[14] = {0x81, 0x80 | 127};
  for (int k = 0; k < 8; k++) head[2 + k] = (uint8_t)(len >> (56 - 8 * k));
  memcpy(head + 10, "\x11\x22\x33\x44", 4); /* the mask: the bytes are arbitrary anyway */
  return harness_push(fd, sizeof(head) + send_len, head, sizeof(head), timeout_ms);
}

/* A WebSocket message being assembled counts against max_input_mb as a TCP request line does:
 * six JSON-RPC messages of 30 MiB, each sent but for its end, do not fit in 64 MiB together. */
TEST(unfinished_websocket_messages_together_hold_at_most_max_input_mb) {
  harness h;
  const char *const args[] = {"--max-input-mb", "64", "--reserve-mb", "0", NULL};
  harness_start(&h, NULL, args);
  uint64_t before = harness_server_memory(&h, "VmRSS");
  ws_client w[6];
  for (int i = 0; i < 6; i++) {
    ASSERT_EQ(ws_open(&w[i], h.http_port, "/ws/rpc", ""), 101);
    push_text_message(w[i].fd, (30u << 20) + 100, 30u << 20, 20000); /* all but its last 100 bytes */
  }
  int closed = 0;
  for (int i = 0; i < 6; i++) {
    int op;
    char said[512] = "";
    while ((op = ws_recv(&w[i], 1000)) > 0)
      if (op == 1) snprintf(said, sizeof(said), "%.*s", (int)w[i].msg_len, (const char *)w[i].msg);
    if (op == 0) {
      fprintf(stderr, "websocket %d closed (%d): %s\n", i, w[i].close_code, said);
      ASSERT_STR_CONTAINS(said, "unfinished requests");
      closed++;
    }
    ws_close(&w[i]);
  }
  uint64_t peak = harness_server_memory(&h, "VmHWM");
  fprintf(stderr, "%d of 6 websockets closed; resident %.1f MB before, peak %.1f MB\n", closed, (double)before / 1e6,
          (double)peak / 1e6);
  ASSERT(closed >= 4);
  ASSERT(peak < before + (100ull << 20) + ASAN_SLACK);
  cJSON_Delete(harness_rpc_ok(&h, "session.list", NULL));
  harness_stop(&h);
}

/* --http-port off: no HTTP listener, and the ports line has no http_port. */
TEST(http_port_off_opens_no_http_listener) {
  harness h;
  const char *const args[] = {"--http-port", "off", NULL};
  harness_start(&h, NULL, args);
  ASSERT_EQ(h.http_port, 0);
  cJSON_Delete(harness_rpc_ok(&h, "session.list", NULL));
  harness_stop(&h);
}

/* Capabilities over the WebSocket: the same HELLO option and the same grant in WELCOME as on the
 * TCP port (docs/protocol.md §14), then the SNAPSHOT. */
TEST(a_websocket_viewer_is_granted_capabilities_as_a_tcp_one) {
  harness h;
  harness_start(&h, "demo", demo_args);
  ws_client w;
  ASSERT_EQ(ws_open(&w, h.http_port, "/ws/stream", ""), 101);
  proto_buf b;
  proto_buf_init(&b);
  proto_hello m = {PROTO_VERSION_2, PROTO_ROLE_VIEWER, {"demo", 4}, {"", 0}};
  proto_hello_opts o = {.caps = PROTO_CAP_BIT(PROTO_CAP_NOOP)};
  ASSERT_OK(proto_encode_hello2(&b, &m, &o), NULL);
  ASSERT_OK(ws_send(&w, 2, b.data, b.len, 1), NULL);
  proto_buf_fini(&b);
  proto_header wh;
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_WELCOME);
  proto_welcome wm;
  proto_welcome_opts wo;
  ASSERT_OK(proto_decode_welcome2(w.msg + PROTO_HEADER_SIZE, wh.length, &wm, &wo), NULL);
  ASSERT_EQ(wo.caps_option, 1);
  ASSERT_EQ(wo.caps, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  static const uint8_t tail[] = {PROTO_OPT_CAPS, 5, 0, 4, 'n', 'o', 'o', 'p'};
  ASSERT(memcmp(w.msg + w.msg_len - sizeof(tail), tail, sizeof(tail)) == 0);
  ws_frame(&w, &wh);
  ASSERT_EQ(wh.type, PROTO_SNAPSHOT);
  ws_close(&w);
  harness_stop(&h);
}
