/*
 * client.h — a small blocking client for deformd, shared by deformctl, deform-bench and the
 * integration tests.
 *
 * Two parts:
 *   - dfc_conn: a TCP connection with frame reading (binary port) and line reading (JSON-RPC);
 *   - dfc_replica: a viewer's copy of a session rebuilt from SNAPSHOT / WEIGHTS / DELTA frames,
 *     whose positions are base + Σ wᵢ·Δᵢ + sculpt offsets computed on the CPU with the mesh
 *     core's mesh_evaluate() — the reference every other client is compared against.
 *
 * This module DOES NOT use libuv: it is for tools and tests, one connection at a time per
 * thread. The server never links it.
 */
#ifndef DEFORMD_CLIENT_H
#define DEFORMD_CLIENT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "mesh.h"
#include "proto.h"

typedef struct dfc_conn {
  int fd;
  uint8_t *buf;
  size_t len, cap, off;
  proto_limits limits;
} dfc_conn;

/* Connects to HOST:PORT (a name is resolved here; this is a client). Returns 0 or -1 with a
 * reason. */
int dfc_connect(dfc_conn *c, const char *host, int port, char *err, size_t errlen);
/* The same without waiting for the TCP handshake (the name is still resolved here: give a
 * numeric address to never wait). Returns 0 when connected already, 1 when the connect is in
 * progress (finish it with dfc_connect_finish), -1 with a reason (call dfc_close either way). */
int dfc_connect_start(dfc_conn *c, const char *host, int port, char *err, size_t errlen);
/* Waits up to timeout_ms (0 = not at all) for a connect begun by dfc_connect_start. Returns 1
 * when connected (the socket is then blocking, with TCP_NODELAY, as after dfc_connect), 0 when
 * still in progress, -1 when it failed (reason in err; call dfc_close). */
int dfc_connect_finish(dfc_conn *c, int timeout_ms, char *err, size_t errlen);
/* Splits "HOST:PORT" (or ":PORT", or "[v6]:PORT"). Returns 0 or -1. */
int dfc_parse_hostport(const char *text, char *host, size_t hostlen, int *port);
void dfc_close(dfc_conn *c);
/* Writes all of data. Returns 0 or -1. */
int dfc_send(dfc_conn *c, const void *data, size_t n);
int dfc_send_buf(dfc_conn *c, proto_buf *b); /* sends and empties b */

/* Reads one frame. Returns 1 with *h and *payload (valid until the next read), 0 when no whole
 * frame arrived within timeout_ms (0 = only what is already there; < 0 = wait forever; a
 * signal also ends the wait), -1 on EOF or error (reason in err), -2 on a malformed header. */
int dfc_read_frame(dfc_conn *c, int timeout_ms, proto_header *h, const uint8_t **payload,
                   char *err, size_t errlen);

/* Sends HELLO for `session` with `role`. */
int dfc_hello(dfc_conn *c, const char *session, proto_role role, const char *token);

/* JSON-RPC: sends one request (params may be NULL; not taken) and waits for its response.
 * Returns 0 with *result (caller frees), 1 with *error (caller frees), -1 on I/O error. */
int dfc_rpc(dfc_conn *c, const char *method, const cJSON *params, int timeout_ms, cJSON **result,
            cJSON **error);

/* ---- the replica ---------------------------------------------------------------------------- */

/* A target's slider settings as the server last sent them (SNAPSHOT, TARGET, TARGET_META). */
typedef struct dfc_target_meta {
  float min, max;
  uint8_t flags;         /* PROTO_TARGET_* */
  uint8_t driver_count;  /* > 0: a combination target */
  uint16_t drivers[PROTO_MAX_DRIVERS];
} dfc_target_meta;

typedef struct dfc_replica {
  mesh *mesh;        /* base positions, triangles, targets (from the SNAPSHOT) */
  float quantum;
  float *weights;    /* target_count */
  dfc_target_meta *meta; /* target_count */
  float *offsets;    /* 3 * vertex_count, dequantised */
  uint64_t version;
  int have_snapshot;
} dfc_replica;

void dfc_replica_init(dfc_replica *r);
void dfc_replica_fini(dfc_replica *r);
/* Applies a SNAPSHOT, TARGET, TARGET_META, WEIGHTS or DELTA frame. Other frames are ignored (returns 0). Returns 0,
 * or a PROTO_E* / MESH_E* code with a reason when the frame does not decode or does not fit
 * the mesh (an index beyond it, a frame before the snapshot). */
int dfc_replica_apply(dfc_replica *r, const proto_header *h, const uint8_t *payload, char *err,
                      size_t errlen);
/* Current positions (3 * vertex_count floats). Returns 0 or MESH_ENOMEM. */
int dfc_replica_positions(const dfc_replica *r, float *out);

uint64_t dfc_now_ns(void);

#endif
