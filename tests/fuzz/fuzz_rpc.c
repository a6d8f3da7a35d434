/*
 * fuzz_rpc.c — libFuzzer target: the JSON-RPC line handler through the real dispatch, every
 * method, on a real session, with a fake connection.
 *
 * The server is deformd's own structures on a libuv loop without listeners: one session "f"
 * (an icosphere with two morph targets, four keyframes, a keyframe clip "bounce" and a weight
 * clip "wave") built fresh for every input, and a
 * connection whose socket is one end of a socketpair. The input is what the client sends on
 * that connection (a newline is added); the loop then runs until every job the requests
 * started (gestures, brushes, solves, compression, imports) has answered, and everything the
 * server wrote back is read from the other end.
 *
 * What it checks besides memory safety: every line the server writes is UTF-8, parses as JSON,
 * and is a JSON-RPC response (an object with "jsonrpc":"2.0" and a result or an error).
 * Imports go through the import worker path, pointed at a program that does not exist: the
 * spawn fails and the request is answered, with no process per input.
 *
 * DOES NOT fuzz the binary port (fuzz_frames.c covers its decoders).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>
#include "mesh.h"
#include "srv_log.h"
#include "srv_import.h"
#include "srv_config.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_gesture.h"
#include "srv_brush.h"
#include "srv_blend.h"
#include "srv_anim.h"
#include "srv_ports.h"
#include "utf8_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static srv_server srv;
static uv_loop_t *loop;
static mesh *base;

static void close_session_work(srv_session *x) {
  srv_gesture_close_all(x);
  srv_brush_close_all(x);
  srv_blend_close_all(x);
  srv_anim_close(x);
}

/* The session's mesh: an icosphere (162 vertices) with two targets, keyframes and two clips. */
static mesh *make_base(void) {
  mesh *m = NULL;
  if (mesh_demo_icosphere(2, 1.0, &m) != 0) abort();
  float *d = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  for (uint32_t v = 0; v < m->vertex_count; v++) d[3 * v + 1] = 0.1f * m->positions[3 * v + 1];
  if (mesh_add_target_dense(m, "stretch", d, 0.0f) != 0) abort();
  for (uint32_t v = 0; v < m->vertex_count; v++) d[3 * v] = m->positions[3 * v] > 0 ? 0.05f : 0.0f;
  if (mesh_add_target_dense(m, "side", d, 0.25f) != 0) abort();
  free(d);
  /* Four keyframes (a growing sphere) and a keyframe clip over them, beside the weight clip. */
  m->frame_count = 4;
  m->frame_rate = 10.0f;
  m->frames = malloc(sizeof(float) * 3 * m->vertex_count * 4);
  for (uint32_t f = 0; f < 4; f++)
    for (uint32_t i = 0; i < 3 * m->vertex_count; i++) m->frames[3 * m->vertex_count * f + i] = m->positions[i] * (1.0f + 0.1f * (float)f);
  m->clips = calloc(2, sizeof(mesh_clip));
  m->clip_count = 2;
  m->clips[1].name = strdup("bounce");
  m->clips[1].fps = 10.0f;
  m->clips[1].frame_count = 4;
  mesh_clip *c = &m->clips[0];
  c->name = strdup("wave");
  c->key_count = 3;
  c->target_count = 2;
  c->times = malloc(3 * sizeof(float));
  c->weights = malloc(6 * sizeof(float));
  for (int k = 0; k < 3; k++) {
    c->times[k] = 0.5f * (float)k;
    c->weights[2 * k] = 0.5f * (float)k;
    c->weights[2 * k + 1] = 1.0f - 0.5f * (float)k;
  }
  mesh_update_bounds(m);
  char err[MESH_ERR_LEN];
  if (mesh_validate(m, err, sizeof(err)) != 0) abort();
  return m;
}

static void init(void) {
  srv_log_set_level(SRV_LOG_ERROR); /* the log is not what is fuzzed, and slows it down */
  loop = uv_default_loop();
  memset(&srv, 0, sizeof(srv));
  srv.loop = loop;
  srv.on_session_close = close_session_work;
  srv_config_init(&srv.cfg);
  srv.cfg.max_sessions = 4;
  srv.cfg.max_request = 1 << 20;
  srv.limits.max_frame = srv.cfg.max_frame;
  srv.limits.max_vertices = srv.cfg.max_vertices;
  srv_import_limits il = {"/nonexistent/deformd-fuzz-worker", 64, 5, 20000, 1, 1, 4};
  srv_importer_init(&srv.importer, loop, &il);
  base = make_base();
}

static void run_until_quiet(void) {
  /* Jobs answer on the loop; each turn of UV_RUN_ONCE handles at least one event. */
  for (int i = 0; i < 100000 && (srv.pending_jobs > 0 || srv.importer.running_count > 0); i++) uv_run(loop, UV_RUN_ONCE);
  for (int i = 0; i < 8; i++) uv_run(loop, UV_RUN_NOWAIT);
}

static void check_line(const char *line, size_t n) {
  if (!oracle_utf8_valid((const unsigned char *)line, n)) abort();
  cJSON *o = cJSON_ParseWithLength(line, n);
  if (!o || !cJSON_IsObject(o)) abort();
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "jsonrpc");
  if (!cJSON_IsString(v) || strcmp(v->valuestring, "2.0") != 0) abort();
  if (!cJSON_GetObjectItemCaseSensitive(o, "result") == !cJSON_GetObjectItemCaseSensitive(o, "error")) abort();
  cJSON_Delete(o);
}

/* Reads what the server wrote (non-blocking) and checks it line by line. */
static void drain(int fd, char **acc, size_t *len, size_t *cap) {
  for (;;) {
    if (*cap - *len < 65536) {
      *cap = *cap ? 2 * *cap : 1 << 17;
      *acc = realloc(*acc, *cap);
    }
    ssize_t r = recv(fd, *acc + *len, *cap - *len, MSG_DONTWAIT);
    if (r <= 0) break;
    *len += (size_t)r;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!loop) init();
  if (size > (1u << 20)) return 0;
  /* A fresh session for each input, from the same mesh. */
  mesh *m = NULL;
  uint8_t *blob = NULL;
  size_t blen = 0;
  char err[MESH_ERR_LEN];
  if (mesh_blob_write(base, &blob, &blen) != 0 || mesh_blob_read(blob, blen, 0, &m, err, sizeof(err)) != 0) abort();
  free(blob);
  srv_session *x = NULL;
  if (srv_session_create("f", m, &x, err, sizeof(err)) != 0) abort();
  srv_session_add(&srv, x);

  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) abort();
  int big = 8 << 20;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  srv_conn *c = srv_conn_create(&srv, SRV_CONN_RPC, &srv_rpc_conn_ops);
  if (!c || uv_tcp_open(&c->tcp, fds[0]) != 0) abort();
  srv_conn_ref(c); /* ours, so that it outlives its own close below */
  /* The input as received bytes, the way the connection's read path hands them on. */
  c->rbuf = malloc(size + 1);
  memcpy(c->rbuf, data, size);
  c->rbuf[size] = '\n';
  c->rlen = c->rcap = size + 1;
  c->ops->on_data(c);

  char *out = NULL;
  size_t len = 0, cap = 0;
  run_until_quiet();
  drain(fds[1], &out, &len, &cap);
  /* The session goes; what still runs on it answers; the connection closes. */
  while (srv.sessions) srv_session_close(&srv, srv.sessions, "fuzz input done");
  run_until_quiet();
  srv_conn_close(c);
  srv_anim_shutdown(&srv);
  run_until_quiet();
  drain(fds[1], &out, &len, &cap);
  srv_conn_unref(c);
  close(fds[1]);

  static int echo = -1;
  if (echo < 0) echo = getenv("FUZZ_RPC_ECHO") != NULL; /* to see what the server answered */
  if (echo) fwrite(out, 1, len, stderr);
  size_t start = 0;
  for (size_t i = 0; i < len; i++) {
    if (out[i] != '\n') continue;
    check_line(out + start, i - start);
    start = i + 1;
  }
  if (start != len) abort(); /* a reply that is not a whole line */
  free(out);
  return 0;
}
