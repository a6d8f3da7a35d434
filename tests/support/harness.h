/*
 * harness.h — running a real deformd for integration tests: start it on port 0, talk to it,
 * stop it and check it exited cleanly.
 */
#ifndef DEFORMD_TEST_HARNESS_H
#define DEFORMD_TEST_HARNESS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.h"
#include "client_replica.h"

typedef struct harness {
  pid_t pid;
  int stream_port, rpc_port, http_port;
  char log_path[1024];
  char tls_ca[1024]; /* "" in clear; else the server speaks TLS and clients trust this CA */
  client_conn rpc;   /* one JSON-RPC connection kept open */
} harness;

/* Starts `deformd --stream-port 0 --rpc-port 0 --data none --mesh-dir MODELS --mesh-dir TMP
 * ARGS...` (args: NULL-terminated; MODELS is the assimp test models' folder, TMP test_tmpdir(),
 * so sessions are created from names relative to them) and waits for its port line. If
 * `wait_session` is not NULL, waits until that session exists. */
void harness_start(harness *h, const char *wait_session, const char *const *args);
/* The same with DEFORMD_ADMIN_TOKEN=admin_token in its environment (NULL: none); the kept
 * JSON-RPC connection calls auth with it first. */
void harness_start_token(harness *h, const char *wait_session, const char *const *args, const char *admin_token);
/* The same over TLS (tls_ca not NULL: the server was given a certificate in args that this CA
 * signed; every connection the harness makes then speaks TLS and verifies it). */
void harness_start_full(harness *h, const char *wait_session, const char *const *args, const char *admin_token,
                        const char *tls_ca);
/* A connection to port `port` of the server (TLS when the harness's is). */
void harness_connect(harness *h, client_conn *c, int port);
/* Throw-away certificates (openssl CLI) in test_tmpdir(), made once: ca.pem (the CA),
 * cert.pem/key.pem (127.0.0.1 and localhost, signed by it), other-ca.pem (a CA that signed
 * nothing here), wrong-cert.pem/wrong-key.pem (example.com only, signed by ca.pem). Returns
 * the folder. */
const char *harness_certs(void);
/* harness_certs()/file (a static buffer, one of 8 used in turn). */
const char *harness_cert(const char *file);
/* Sends `head` then 'a's, `total` bytes in all, in 1 MiB non-blocking writes until the server
 * stops taking them (it closed the connection) or timeout_ms pass. Returns the bytes it took: a
 * server that stops reading without closing shows as a stall, not a hang. */
size_t harness_push(int fd, size_t total, const uint8_t *head, size_t head_len, int timeout_ms);
/* SIGKILL and wait: a crash, as far as the server can tell. */
void harness_kill(harness *h);
/* SIGTERM, wait, and assert exit status 0 (prints the server log on failure). */
void harness_stop(harness *h);

/* JSON-RPC on the kept connection. params is JSON text (or NULL). _ok asserts success and
 * returns the result (caller frees); _err asserts failure and returns the error code, copying
 * the message into msg when not NULL. */
cJSON *harness_rpc_ok(harness *h, const char *method, const char *params);
int harness_rpc_err(harness *h, const char *method, const char *params, char *msg, size_t msglen);
/* A call on any connection c: 0 with *result (caller frees; NULL: dropped), or the error's code
 * (its message into msg when not NULL). Fails the test when no answer comes. */
int harness_call(client_conn *c, const char *method, const char *params, cJSON **result, char *msg, size_t msglen);

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
/* A socket listening on 127.0.0.1 at a port the kernel chose (*port): this test plays the server
 * to a client under test. Fails the test if it cannot. */
int harness_listen_loopback(int *port);
/* The next client on that listener, and its first frame, which must be a HELLO (its payload in
 * *payload, valid until the next read). */
client_conn harness_accept_hello(int listener, uint32_t max_frame, int timeout_ms, proto_header *h,
                                 const uint8_t **payload);

/* A session's shape as a file, downloaded in chunks through session.export without a path
 * (format "obj" or "glb"; version < 0: the current one). Returns *len bytes (malloc'ed, one
 * more byte to spare; caller frees). */
uint8_t *harness_download(harness *h, const char *session, const char *format, int64_t version, size_t *len);

/* The same written to the local file `path` (OBJ or GLB by its extension). */
void harness_download_file(harness *h, const char *session, const char *path);
/* The name a client gives for a file in one of the harness's mesh folders (its path relative to
 * the folder); fails the test for a file in neither. */
const char *harness_mesh_name(const char *path);

/* The server's current shape of `session`, downloaded as OBJ (harness_download):
 * 3 * vertex_count floats, exact (the OBJ writer prints floats with %.9g). Caller frees. */
float *harness_server_positions(harness *h, const char *session, uint32_t *vertex_count);

/* harness_start with `--data dir` (and one more argument, `extra`, when not NULL). */
void harness_start_on(harness *h, const char *dir, const char *wait_session, const char *extra);
/* A JSON-RPC call that must succeed, its result dropped. */
void harness_rpc_done(harness *h, const char *method, const char *params);
/* Waits until the operator's --demo session `session` has its texture clip: the server
 * compresses it on the pool after the session opens, and its frames and PCA take tens of MB
 * for a moment, so a test that bounds the server's memory waits for it first. */
void harness_wait_demo_dressed(harness *h, const char *session);
/* Sends SIGSTOP and waits until `pid` is stopped (/proc/PID/stat state T): kill() only queues
 * the signal, and a SIGCONT sent before the stop took effect cancels it. */
void harness_stop_process(pid_t pid);
/* A loopback port nobody listens on now (bound to port 0, then released). */
int harness_free_port(void);
/* A memory figure of the running server from /proc/PID/status, in bytes: `field` is "VmRSS"
 * (resident now) or "VmHWM" (the most it was resident). Fails the test when it cannot be read. */
uint64_t harness_server_memory(const harness *h, const char *field);

/* Path of a tool built next to deformd (deformctl, deform-bench). Static buffer. */
const char *harness_tool(const char *name);

#endif
