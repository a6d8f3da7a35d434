/*
 * client.h — a small blocking client for deformd, shared by deformctl, deform-bench, the
 * viewer's connection and the integration tests: a TCP connection with frame reading (binary
 * port) and line reading (JSON-RPC). client_replica.h keeps a session's state from the frames.
 *
 * Every function returns 0 or a negative CLIENT_E* code (client_strerror names it); where a
 * reason helps, it is written to `err`.
 *
 * This module DOES NOT use libuv: it is for tools and tests, one connection at a time per
 * thread. The server never links it.
 */
#ifndef DEFORMD_CLIENT_H
#define DEFORMD_CLIENT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

enum {
  CLIENT_EINVAL = -2001,      /* a bad argument (an address that does not parse, a name too long) */
  CLIENT_ERESOLVE = -2002,    /* the host name does not resolve */
  CLIENT_ECONNECT = -2003,    /* the connection was refused or failed */
  CLIENT_EINPROGRESS = -2004, /* client_connect_start / _finish: the handshake goes on */
  CLIENT_ETIMEDOUT = -2005,   /* nothing (whole) arrived within the time given */
  CLIENT_ECLOSED = -2006,     /* the peer closed the connection */
  CLIENT_EIO = -2007,         /* a socket error */
  CLIENT_EMALFORMED = -2008,  /* a frame header or a JSON-RPC response that does not parse */
  CLIENT_ERPC = -2009,        /* the server answered a JSON-RPC call with an error (*error) */
  CLIENT_ENOMEM = -2010
};

const char *client_strerror(int code);

typedef struct client_conn {
  int fd;
  uint8_t *buf;
  size_t len, cap, off;
  proto_limits limits;
} client_conn;

/* Connects to HOST:PORT (a name is resolved here; this is a client). */
int client_connect(client_conn *c, const char *host, int port, char *err, size_t errlen);
/* The same without waiting for the TCP handshake (the name is still resolved here: give a
 * numeric address to never wait). Returns 0 when connected already, CLIENT_EINPROGRESS when
 * the connect goes on (finish it with client_connect_finish), or an error (call client_close
 * either way). */
int client_connect_start(client_conn *c, const char *host, int port, char *err, size_t errlen);
/* Waits up to timeout_ms (0 = not at all, < 0 = no limit) for a connect begun by
 * client_connect_start. Returns 0 when connected (the socket is then blocking, with
 * TCP_NODELAY, as after client_connect), CLIENT_EINPROGRESS when still in progress, or
 * CLIENT_ECONNECT (reason in err; call client_close). */
int client_connect_finish(client_conn *c, int timeout_ms, char *err, size_t errlen);
/* Splits "HOST:PORT" (or ":PORT", or "[v6]:PORT"). */
int client_parse_hostport(const char *text, char *host, size_t hostlen, int *port);
void client_close(client_conn *c);
/* Writes all of data. */
int client_send(client_conn *c, const void *data, size_t n);
int client_send_buf(client_conn *c, proto_buf *b); /* sends and empties b */

/* Reads one frame: 0 with *h and *payload (valid until the next read); CLIENT_ETIMEDOUT when
 * no whole frame arrived within timeout_ms (0 = only what is already there; < 0 = wait
 * forever; a signal also ends the wait); CLIENT_ECLOSED, CLIENT_EIO or CLIENT_EMALFORMED (a
 * bad header) with a reason. */
int client_read_frame(client_conn *c, int timeout_ms, proto_header *h, const uint8_t **payload, char *err,
                      size_t errlen);

/* Sends HELLO for `session` with `role` (protocol version 1). */
int client_hello(client_conn *c, const char *session, proto_role role, const char *token);
/* The same in protocol version 2 with `opts` (codec, max rate, tolerance); NULL: version 1. */
int client_hello2(client_conn *c, const char *session, proto_role role, const char *token,
                  const proto_hello_opts *opts);

/* JSON-RPC: sends one request (params may be NULL; not taken) and waits for its response.
 * Returns 0 with *result (caller frees), CLIENT_ERPC with *error (caller frees), or an I/O
 * code. */
int client_rpc(client_conn *c, const char *method, const cJSON *params, int timeout_ms, cJSON **result,
               cJSON **error);

/* A monotonic clock in nanoseconds (latencies, deadlines). */
uint64_t client_now_ns(void);

#endif
