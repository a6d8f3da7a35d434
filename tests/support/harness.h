/*
 * harness.h — running a real deformd for integration tests: start it on port 0, talk to it,
 * stop it and check it exited cleanly.
 */
#ifndef DEFORMD_TEST_HARNESS_H
#define DEFORMD_TEST_HARNESS_H

#include <cjson/cJSON.h>
#include <sys/types.h>

#include "client.h"
#include "client_replica.h"

typedef struct harness {
  pid_t pid;
  int stream_port, rpc_port, http_port;
  char log_path[1024];
  client_conn rpc; /* one JSON-RPC connection kept open */
} harness;

/* Starts `deformd --stream-port 0 --rpc-port 0 ARGS...` (args: NULL-terminated) and waits for
 * its port line. If `wait_session` is not NULL, waits until that session exists. */
void harness_start(harness *h, const char *wait_session, const char *const *args);
/* SIGKILL and wait: a crash, as far as the server can tell. */
void harness_kill(harness *h);
/* SIGTERM, wait, and assert exit status 0 (prints the server log on failure). */
void harness_stop(harness *h);

/* JSON-RPC on the kept connection. params is JSON text (or NULL). _ok asserts success and
 * returns the result (caller frees); _err asserts failure and returns the error code, copying
 * the message into msg when not NULL. */
cJSON *harness_rpc_ok(harness *h, const char *method, const char *params);
int harness_rpc_err(harness *h, const char *method, const char *params, char *msg, size_t msglen);

/* A stream connection that has sent HELLO and read WELCOME + SNAPSHOT into `r`. */
void harness_join(harness *h, client_conn *c, client_replica *r, const char *session, proto_role role,
                  const char *token);
/* The same in protocol version 2 with `opts` (NULL: version 1). */
void harness_join2(harness *h, client_conn *c, client_replica *r, const char *session, proto_role role,
                   const char *token, const proto_hello_opts *opts);
/* Reads frames into `r` until it reaches `version` (asserts within timeout_ms). Returns the
 * number of frames flagged CATCHUP seen on the way. */
int harness_follow(client_conn *c, client_replica *r, uint64_t version, int timeout_ms);
/* Reads until an ERROR or BYE frame arrives (skipping others); returns its code and request id. */
int harness_expect_error(client_conn *c, uint8_t want_type, uint32_t *request_id, int timeout_ms);
/* Whether the peer closed the connection within timeout_ms (skipping any frames). */
int harness_closed(client_conn *c, int timeout_ms);

/* The server's current shape of `session`, read back through session.export to an OBJ file:
 * 3 * vertex_count floats, exact (the OBJ writer prints floats with %.9g). Caller frees. */
float *harness_server_positions(harness *h, const char *session, uint32_t *vertex_count);

/* A loopback port nobody listens on now (bound to port 0, then released). */
int harness_free_port(void);
/* A memory figure of the running server from /proc/PID/status, in bytes: `field` is "VmRSS"
 * (resident now) or "VmHWM" (the most it was resident). Fails the test when it cannot be read. */
uint64_t harness_server_memory(const harness *h, const char *field);

/* Path of a tool built next to deformd (deformctl, deform-bench). Static buffer. */
const char *harness_tool(const char *name);

#endif
