/*
 * srv_bulk.h — the stream port's bulk arrays (capability "bulk", docs/protocol.md §15): a GET of
 * the current positions, the sculpt offsets or a target's deltas, evaluated on the thread pool
 * from a copy of the state; a SET of sculpt offsets, turned into one SET_OFFSETS operation.
 */
#ifndef DEFORMD_SRV_BULK_H
#define DEFORMD_SRV_BULK_H

#include <stddef.h>
#include <stdint.h>

#include "proto_bulk.h"
#include "srv_server.h"
#include "srv_session.h"

/* Called on the loop thread with 0, the answer's fields and its 3 · a->count floats (borrowed
 * for the call) at `version`, or an SRV_E* code and a reason. */
typedef void (*srv_bulk_cb)(srv_server *srv, void *arg, int status, const proto_bulk_answer *a, const float *values,
                            uint64_t version, const char *err);

/* Checks the range and the target now (SRV_ERANGE, SRV_ELIMIT for an answer over the frame
 * limit: an error and a reason, `done` not called), captures the state, and evaluates on the
 * pool; `done` gets the array of the version captured. Returns 0 or an SRV_E* code. */
int srv_bulk_get(srv_server *srv, srv_session *s, const proto_bulk_request *r, srv_bulk_cb done, void *arg,
                 char *err, size_t errlen);

/* Sets the sculpt offsets of the request's range (welded: every render vertex of each welded
 * vertex) as one operation of `author`, as sculpt.set does; *version is the version after it
 * (the current one for an empty range). Returns 0, SRV_ERANGE (a range past the mesh, an offset
 * beyond the largest), SRV_ENOTFINITE or SRV_EINTERNAL, with a reason. */
int srv_bulk_set(srv_server *srv, srv_session *s, const proto_bulk_request *r, uint32_t author, uint64_t *version,
                 char *err, size_t errlen);

#endif
