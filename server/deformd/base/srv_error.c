/*
 * srv_error.c — names of the service's error codes (SRV_E*, srv_error.h), for logs.
 *
 * DOES NOT map codes to a wire format: srv_rpc.c maps them to JSON-RPC codes and srv_stream.c
 * to PROTO_ERR_* codes, each in one place.
 */
#include "mesh.h"
#include "srv_error.h"

const char *srv_strerror(int code) {
  switch (code) {
    case 0: return "ok";
    case SRV_EPARAMS: return "invalid params";
    case SRV_ENOSESSION: return "unknown session";
    case SRV_ENOTARGET: return "unknown target";
    case SRV_ENOTFINITE: return "not a finite number";
    case SRV_EMESH: return "mesh refused";
    case SRV_EEXIST: return "session exists";
    case SRV_ERANGE: return "out of range";
    case SRV_ELIMIT: return "over a limit";
    case SRV_EIO: return "i/o error";
    case SRV_EACCES: return "not allowed";
    case SRV_ENOGESTURE: return "unknown gesture";
    case SRV_ESOLVER: return "solver failed";
    case SRV_EBUSY: return "busy";
    case SRV_ENOCLIP: return "unknown clip";
    case SRV_ENOMETHOD: return "unknown method";
    case SRV_ESHUTDOWN: return "shutting down";
    case SRV_EINTERNAL: return "internal error";
    case SRV_EDAMAGED: return "damaged session";
    default: return "unknown error";
  }
}
