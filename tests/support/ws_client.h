/*
 * ws_client.h — a blocking HTTP and WebSocket client for the tests of deformd's HTTP port
 * (tests/deformd/test_web.c): plain GETs, the upgrade handshake, and messages framed by wslay's
 * frame API (client frames masked, as RFC 6455 asks).
 *
 * DOES NOT check what deformd's answers mean: the tests do.
 */
#ifndef DEFORMD_WS_CLIENT_H
#define DEFORMD_WS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct ws_client {
  int fd;
  void *frames;        /* wslay_frame_context_ptr */
  uint8_t *msg;        /* the message ws_recv returned last (malloc'ed, reused) */
  size_t msg_len, msg_cap;
  size_t frame_got;    /* payload bytes of the current data frame read so far */
  int close_code;      /* the close frame's code once one arrived (1005 when it had none), else 0 */
  char close_reason[128];
} ws_client;

/* One HTTP/1.1 request on a new connection (Connection: close); returns the status code, or -1.
 * The head and body (NUL-terminated, malloc'ed: the caller frees) are returned when asked. */
int http_request(int port, const char *raw_request, char **head, uint8_t **body, size_t *body_len);

/* Connects to 127.0.0.1:port and asks to upgrade `path`; `extra` adds header lines ("" for none;
 * each ending in \r\n). Returns the HTTP status (101 on success: the client is ready), or -1. */
int ws_open(ws_client *c, int port, const char *path, const char *extra);
/* Sends one message (opcode 1 text, 2 binary) as one frame, or in `fragments` frames. */
int ws_send(ws_client *c, int opcode, const void *data, size_t len, int fragments);
/* Sends raw bytes (to break the protocol on purpose). */
int ws_send_raw(ws_client *c, const void *data, size_t len);
/* The next data message (fragments joined; PINGs answered): returns its opcode, 0 when the server
 * closed (c->close_code says how), -1 on a timeout or an error. c->msg / c->msg_len hold it. */
int ws_recv(ws_client *c, int timeout_ms);
void ws_close(ws_client *c);

#endif
