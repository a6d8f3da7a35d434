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
  CLIENT_ENOMEM = -2010,
  CLIENT_ETLS = -2011          /* the TLS handshake failed, or the server's certificate is not trusted */
};

const char *client_strerror(int code);

typedef struct client_conn {
  int fd;
  uint8_t *buf;
  size_t len, cap, off;
  proto_limits limits;
  void *tls;       /* client_tls.c's state once TLS started, else NULL */
  short tls_wait;  /* TLS: what the socket must become (POLLIN / POLLOUT) before SSL can go on */
  struct client__addrs *untried; /* a connect in progress: the addresses after the one tried */
} client_conn;

/* Connects to HOST:PORT (a name is resolved here; this is a client). Every address the name
 * resolves to is tried in getaddrinfo's order until one accepts ("localhost" is often ::1 first,
 * where a server may listen on 127.0.0.1 only). */
int client_connect(client_conn *c, const char *host, int port, char *err, size_t errlen);
/* The same without waiting for the TCP handshake (the name is still resolved here: give a
 * numeric address to never wait). Returns 0 when connected already, CLIENT_EINPROGRESS when
 * the connect goes on (finish it with client_connect_finish), or an error (call client_close
 * either way). */
int client_connect_start(client_conn *c, const char *host, int port, char *err, size_t errlen);
/* The two halves of client_connect_start, for a caller that must not hold a lock while a name
 * resolves (deform-view's connection thread): client_resolve looks HOST:PORT up (0 with *res,
 * freed by freeaddrinfo, or CLIENT_ERESOLVE with a reason), client_connect_start_at starts the
 * connect to the first of `res` that takes it (host and port name it in messages). */
struct addrinfo;
int client_resolve(const char *host, int port, struct addrinfo **res, char *err, size_t errlen);
int client_connect_start_at(client_conn *c, const struct addrinfo *res, const char *host, int port, char *err,
                            size_t errlen);
/* Waits up to timeout_ms (0 = not at all, < 0 = no limit) for a connect begun by
 * client_connect_start. Returns 0 when connected (the socket is then blocking, with
 * TCP_NODELAY, as after client_connect), CLIENT_EINPROGRESS when still in progress, or
 * CLIENT_ECONNECT (reason in err; call client_close). */
int client_connect_finish(client_conn *c, int timeout_ms, char *err, size_t errlen);
/* What has arrived, without waiting: > 0 bytes (decrypted under TLS), 0 when nothing is there
 * now, CLIENT_ECLOSED or CLIENT_EIO. For a caller with its own event loop over c->fd (deform-bench's
 * viewers); under TLS, read until it returns 0 (SSL may hold bytes the socket no longer shows). */
long client_read_some(client_conn *c, void *buf, size_t cap);
/* Splits "HOST:PORT" (or ":PORT", or "[v6]:PORT"). */
int client_parse_hostport(const char *text, char *host, size_t hostlen, int *port);
void client_close(client_conn *c);
/* Writes all of data. */
int client_send(client_conn *c, const void *data, size_t n);
/* Writes what the socket takes now, without waiting: *sent bytes (0 when it would wait).
 * 0 or CLIENT_EIO / CLIENT_ECLOSED. */
int client_send_nowait(client_conn *c, const void *data, size_t n, size_t *sent);
/* The poll() events to wait for before the connection can go on reading (POLLIN, or what TLS
 * needs), and whether SSL holds decrypted bytes not read yet (then poll() would wait for
 * nothing). */
short client_poll_events(const client_conn *c);
int client_readable_now(const client_conn *c);

/* TLS (client_tls.c) on a connected socket: the server's certificate is verified against the
 * PEM CAs in ca_file (NULL: the system's) and must name `host` (a DNS name, or an IP address).
 * client_tls_start waits up to timeout_ms (< 0: no limit) for the handshake; a poller calls
 * client_tls_begin once, then client_tls_continue (0: done, CLIENT_EINPROGRESS: wait for
 * client_poll_events and call again). Each returns 0 or CLIENT_ETLS / CLIENT_ETIMEDOUT /
 * CLIENT_EIO with a reason. From then on every read and write of the connection is encrypted. */
int client_tls_start(client_conn *c, const char *host, const char *ca_file, int timeout_ms, char *err, size_t errlen);
int client_tls_begin(client_conn *c, const char *host, const char *ca_file, char *err, size_t errlen);
int client_tls_continue(client_conn *c, int timeout_ms, char *err, size_t errlen);
/* Internal to client.c and client_tls.c. */
void client__tls_free(client_conn *c);
long client__tls_read(client_conn *c, void *buf, size_t cap);
long client__tls_write(client_conn *c, const void *data, size_t n);
int client_tls_pending(const client_conn *c);
int client_send_buf(client_conn *c, proto_buf *b); /* sends and empties b */

/* Reads one frame: 0 with *h and *payload (valid until the next read); CLIENT_ETIMEDOUT when
 * no whole frame arrived within timeout_ms (0 = only what is already there; < 0 = wait
 * forever; a signal also ends the wait); CLIENT_ECLOSED, CLIENT_EIO or CLIENT_EMALFORMED (a
 * bad header) with a reason. */
int client_read_frame(client_conn *c, int timeout_ms, proto_header *h, const uint8_t **payload, char *err,
                      size_t errlen);

/* Sends HELLO for `session` with `role` (protocol version 1). */
int client_hello(client_conn *c, const char *session, proto_role role, const char *token);
/* The same in protocol version 2 with `opts` (codec, max rate, tolerance, capabilities:
 * opts->caps, from client_caps_parse); NULL: version 1. */
int client_hello2(client_conn *c, const char *session, proto_role role, const char *token,
                  const proto_hello_opts *opts);
/* Reads the answer to HELLO: 0 with the WELCOME in *w and what it grants in *o (o->caps: the
 * capabilities granted; o->caps_option: the server answered the caps option, so it knows
 * capabilities). w's session name points into the connection's buffer, valid until the next
 * read. An ERROR instead is CLIENT_EMALFORMED with its message in err; other frames and bad
 * payloads are CLIENT_EMALFORMED too; or a read error. */
int client_read_welcome(client_conn *c, int timeout_ms, proto_welcome *w, proto_welcome_opts *o, char *err,
                        size_t errlen);
/* "noop,presence" into opts->caps (docs/protocol.md §14): 0, or CLIENT_EINVAL naming a
 * capability this build does not know in err. */
int client_caps_parse(const char *list, proto_hello_opts *opts, char *err, size_t errlen);

/* JSON-RPC: sends one request (params may be NULL; not taken) and waits for its response.
 * Returns 0 with *result (caller frees), CLIENT_ERPC with *error (caller frees), or an I/O
 * code. */
int client_rpc(client_conn *c, const char *method, const cJSON *params, int timeout_ms, cJSON **result,
               cJSON **error);

/* Files over JSON-RPC (client_transfer.c). client_upload_file sends the local file `path` as
 * meshes/NAME (mesh.upload, 8 MiB chunks): 0 with the last answer in *last. client_download_file
 * writes a session's shape (OBJ or GLB by path's extension; version < 0: the current one) to
 * `path` through session.export chunks, every chunk of one version: 0 with
 * {"session","file","bytes","version","format"} in *info. Both: the caller frees what they
 * give; CLIENT_ERPC with the server's error in *error (when error is not NULL), or another code,
 * with a reason in err. */
int client_upload_file(client_conn *c, const char *path, const char *name, cJSON **last, cJSON **error, char *err,
                       size_t errlen);
int client_download_file(client_conn *c, const char *session, const char *path, int64_t version, cJSON **info,
                         cJSON **error, char *err, size_t errlen);

/* A monotonic clock in nanoseconds (latencies, deadlines). */
uint64_t client_now_ns(void);

#endif
