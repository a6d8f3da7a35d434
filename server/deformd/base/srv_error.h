/*
 * srv_error.h — the service's error vocabulary: SRV_E* codes (negative, like libuv's UV_E*) and their
 * short names. Only the transports turn them into JSON-RPC or PROTO_ERR_* codes.
 */
#ifndef DEFORMD_SRV_ERROR_H
#define DEFORMD_SRV_ERROR_H

#include <stddef.h>
#include <stdint.h>

/* What a request can fail with. The transports map each to a JSON-RPC code (docs/json-api.md
 * lists them) and to a PROTO_ERR_* code for binary connections. */
typedef enum srv_error {
  SRV_EPARAMS = -3001,    /* a parameter is missing, of the wrong type or malformed */
  SRV_ENOSESSION = -3002, /* no session by that name (or it closed meanwhile) */
  SRV_ENOTARGET = -3003,  /* no target by that name */
  SRV_ENOTFINITE = -3004, /* a number is NaN or infinite (or overflows float32) */
  SRV_EMESH = -3005,      /* a mesh file was refused */
  SRV_EEXIST = -3006,     /* a session by that name exists */
  SRV_ERANGE = -3007,     /* a value or index outside what the session allows */
  SRV_ELIMIT = -3008,     /* a server limit (sessions, gestures, pins, memory) */
  SRV_EIO = -3009,        /* writing a file failed */
  SRV_EACCES = -3010,     /* not authenticated, or not allowed */
  SRV_ENOGESTURE = -3011, /* no gesture by that id */
  SRV_ESOLVER = -3012,    /* a solver failed (the reason says why) */
  SRV_EBUSY = -3013,      /* the session is busy with something that must end first */
  SRV_ENOCLIP = -3014,    /* no clip by that name */
  SRV_ENOMETHOD = -3015,  /* no such JSON-RPC method */
  SRV_ESHUTDOWN = -3016,  /* the server is stopping */
  SRV_EINTERNAL = -3017,  /* out of memory, or a job that could not start */
  SRV_EDAMAGED = -3018    /* a stored session that did not restore: listed, not served */
} srv_error;

/* A short name for an SRV_E* code ("unknown session"), for logs. */
const char *srv_strerror(int code);

#endif
