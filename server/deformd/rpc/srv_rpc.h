/*
 * srv_rpc.h — JSON-RPC messages: a call being answered, errors, and the param readers.
 */
#ifndef DEFORMD_SRV_RPC_H
#define DEFORMD_SRV_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"

/* A request being answered, possibly later (after a job). */
typedef struct srv_rpc_call {
  srv_conn *conn; /* referenced */
  cJSON *id;      /* owned copy of the request id */
} srv_rpc_call;

/* The JSON-RPC code an SRV_E* code is answered with (docs/json-api.md §errors). */
int srv_rpc_code(int srv_code);
/* Sends {"jsonrpc":"2.0","id":...,"result":result} (takes `result`) and frees the call. */
void srv_rpc_reply(srv_rpc_call *call, cJSON *result);
/* Sends an error object for an SRV_E* code and frees the call. */
void srv_rpc_error(srv_rpc_call *call, int srv_code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Frees a call without answering it (someone else answers: a forwarded request). */
void srv_rpc_call_free(srv_rpc_call *call);
/* A reply that answers `call` (for the domain modules' asynchronous answers). */
srv_reply srv_rpc_reply_to(srv_rpc_call *call);
/* Writes one error response line with a JSON-RPC `code` (the transport's own -32700/-32600,
 * or srv_rpc_code of an SRV_E*) to `c`; takes `id` (NULL: null). */
void srv_rpc_send_error(srv_conn *c, cJSON *id, int code, const char *message);

/* Param readers. Each returns 0 when the key is absent, 1 when it was read, and -1 after
 * answering the call with SRV_EPARAMS (wrong type) or SRV_ENOTFINITE (a number that is not
 * finite). */
int srv_rpc_number(srv_rpc_call *call, const cJSON *params, const char *key, double *out);
int srv_rpc_numbers(srv_rpc_call *call, const cJSON *params, const char *key, int n, double *out);
int srv_rpc_bool(srv_rpc_call *call, const cJSON *params, const char *key, int *out);
/* A number that must lie in [lo, hi] (answers SRV_EPARAMS naming the range otherwise). */
int srv_rpc_number_in(srv_rpc_call *call, const cJSON *params, const char *key, double lo, double hi, double *out);
/* An integer in [lo, hi] (answers SRV_EPARAMS: "\"key\" must be an integer from lo to hi"). */
int srv_rpc_integer_in(srv_rpc_call *call, const cJSON *params, const char *key, double lo, double hi, double *out);
/* A stroke's path (brush.stroke, mask.stroke): "samples", 1 to 65536 objects with "center"
 * [x, y, z], optional "direction" (when `direction`), "radius" (default `radius`) and "strength"
 * (default `strength`, within [lo, hi]). Returns the count with *out malloc'ed (caller frees), or
 * -1 after answering the call. */
struct dfm_brush_sample;
int srv_rpc_samples(srv_rpc_call *call, const cJSON *params, double radius, double strength, double lo, double hi,
                    int direction, struct dfm_brush_sample **out);
/* An array of vertex indices (integers >= 0); *out is malloc'ed (caller frees; NULL when
 * absent). */
int srv_rpc_vertices(srv_rpc_call *call, const cJSON *params, const char *key, uint32_t **out, uint32_t *count);
/* The session named by params.session, or NULL after answering the call with SRV_EPARAMS (not a
 * string) or SRV_ENOSESSION. */
srv_session *srv_rpc_want_session(srv_server *s, srv_rpc_call *call, const cJSON *params);

#endif
