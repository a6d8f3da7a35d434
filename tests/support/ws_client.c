/*
 * ws_client.c — see ws_client.h.
 */
#include "ws_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "test.h"

/* Reads until the end of the head ("\r\n\r\n"), one byte at a time so that nothing after it is
 * taken from the socket. */
static int read_head(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t k = recv(fd, buf + n, 1, 0);
    if (k <= 0) return -1;
    n++;
    buf[n] = '\0';
    if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0) return (int)n;
  }
  return -1;
}

int http_request(int port, const char *raw, char **head, uint8_t **body, size_t *body_len) {
  int fd = test_dial(port);
  if (fd < 0 || test_send_all(fd, raw, strlen(raw)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  size_t cap = 65536, len = 0;
  uint8_t *all = malloc(cap + 1);
  for (;;) {
    if (len == cap) all = realloc(all, (cap *= 2) + 1);
    ssize_t k = recv(fd, all + len, cap - len, 0);
    if (k <= 0) break;
    len += (size_t)k;
  }
  close(fd);
  all[len] = '\0';
  int status = -1;
  if (sscanf((char *)all, "HTTP/1.1 %d", &status) != 1) status = -1;
  uint8_t *end = (uint8_t *)strstr((char *)all, "\r\n\r\n");
  size_t hl = end ? (size_t)(end - all) + 4 : len;
  if (head) {
    *head = malloc(hl + 1);
    memcpy(*head, all, hl);
    (*head)[hl] = '\0';
  }
  if (body) {
    *body = malloc(len - hl + 1);
    memcpy(*body, all + hl, len - hl);
    (*body)[len - hl] = '\0';
    *body_len = len - hl;
  }
  free(all);
  return status;
}

/* ---- wslay's frame API on a blocking socket ------------------------------------------------------ */

static ssize_t cb_send(const uint8_t *data, size_t len, int flags, void *user) {
  ws_client *c = user;
  (void)flags;
  return test_send_all(c->fd, data, len) == 0 ? (ssize_t)len : -1;
}

static ssize_t cb_recv(uint8_t *buf, size_t len, int flags, void *user) {
  ws_client *c = user;
  (void)flags;
  ssize_t k = recv(c->fd, buf, len, 0);
  return k > 0 ? k : -1;
}

static int cb_genmask(uint8_t *buf, size_t len, void *user) {
  (void)user;
  for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)rand();
  return 0;
}

int ws_open(ws_client *c, int port, const char *path, const char *extra) {
  memset(c, 0, sizeof(*c));
  c->fd = test_dial(port);
  if (c->fd < 0) return -1;
  char req[2048], head[8192];
  snprintf(req, sizeof(req),
           "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n",
           path, port, extra ? extra : "");
  int status = -1;
  if (test_send_all(c->fd, req, strlen(req)) != 0 || read_head(c->fd, head, sizeof(head)) < 0 ||
      sscanf(head, "HTTP/1.1 %d", &status) != 1)
    return -1;
  if (status != 101) return status;
  /* RFC 6455's own example: this key is answered with this accept value. */
  if (!strstr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n")) return -1;
  struct wslay_frame_callbacks cb = {cb_send, cb_recv, cb_genmask};
  wslay_frame_context_ptr f;
  if (wslay_frame_context_init(&f, &cb, c) != 0) return -1;
  c->frames = f;
  return 101;
}

static int send_frame(ws_client *c, int fin, int opcode, const uint8_t *p, size_t len) {
  struct wslay_frame_iocb io = {(uint8_t)fin, 0, (uint8_t)opcode, len, 1, p, len};
  size_t sent = 0;
  do {
    io.data = p + sent;
    io.data_length = len - sent;
    ssize_t r = wslay_frame_send(c->frames, &io);
    if (r < 0) return -1;
    sent += (size_t)r;
  } while (sent < len);
  return 0;
}

int ws_send(ws_client *c, int opcode, const void *data, size_t len, int fragments) {
  if (fragments < 1) fragments = 1;
  size_t step = (len + (size_t)fragments - 1) / (size_t)fragments;
  if (step == 0) return send_frame(c, 1, opcode, data, 0);
  for (size_t at = 0, i = 0; at < len; at += step, i++) {
    size_t n = len - at < step ? len - at : step;
    if (send_frame(c, at + n == len, i == 0 ? opcode : 0, (const uint8_t *)data + at, n) != 0) return -1;
  }
  return 0;
}

int ws_send_raw(ws_client *c, const void *data, size_t len) { return test_send_all(c->fd, data, len); }

static int append(ws_client *c, const uint8_t *p, size_t n) {
  if (c->msg_len + n > c->msg_cap) {
    size_t cap = c->msg_cap ? c->msg_cap : 65536;
    while (cap < c->msg_len + n) cap *= 2;
    uint8_t *g = realloc(c->msg, cap);
    if (!g) return -1;
    c->msg = g;
    c->msg_cap = cap;
  }
  memcpy(c->msg + c->msg_len, p, n);
  c->msg_len += n;
  return 0;
}

int ws_recv(ws_client *c, int timeout_ms) {
  int opcode = -1;
  uint8_t ctl[128];
  size_t ctl_len = 0;
  int ctl_op = -1;
  c->msg_len = 0;
  for (;;) {
    struct pollfd p = {c->fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return -1;
    struct wslay_frame_iocb io;
    memset(&io, 0, sizeof(io));
    ssize_t r = wslay_frame_recv(c->frames, &io);
    if (r < 0) return -1;
    if (wslay_is_ctrl_frame(io.opcode)) {
      if (ctl_op < 0) ctl_len = 0;
      ctl_op = io.opcode;
      if (ctl_len + io.data_length <= sizeof(ctl)) memcpy(ctl + ctl_len, io.data, io.data_length), ctl_len += io.data_length;
      if (ctl_len < io.payload_length) continue;
      if (ctl_op == WSLAY_CONNECTION_CLOSE) {
        c->close_code = ctl_len >= 2 ? (ctl[0] << 8 | ctl[1]) : 1005;
        size_t rl = ctl_len >= 2 ? ctl_len - 2 : 0;
        if (rl >= sizeof(c->close_reason)) rl = sizeof(c->close_reason) - 1;
        memcpy(c->close_reason, ctl + 2, rl);
        c->close_reason[rl] = '\0';
        return 0;
      }
      if (ctl_op == WSLAY_PING) send_frame(c, 1, WSLAY_PONG, ctl, ctl_len);
      ctl_op = -1;
      continue;
    }
    if (io.opcode != 0) opcode = io.opcode;
    if (append(c, io.data, io.data_length) != 0) return -1;
    /* A frame may come in several reads: io.payload_length is its whole size. */
    c->frame_got += io.data_length;
    if (c->frame_got < io.payload_length) continue;
    c->frame_got = 0;
    if (io.fin) return opcode;
  }
}

void ws_close(ws_client *c) {
  if (c->frames) wslay_frame_context_free(c->frames);
  if (c->fd >= 0) close(c->fd);
  free(c->msg);
  memset(c, 0, sizeof(*c));
  c->fd = -1;
}
