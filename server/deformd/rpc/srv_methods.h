/*
 * srv_methods.h — the JSON-RPC methods: dispatch, the table type each method file exports its
 * methods in, and session.create's two steps for the cluster layer.
 */
#ifndef DEFORMD_SRV_METHODS_H
#define DEFORMD_SRV_METHODS_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "srv_grant.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_jobs.h"
#include "srv_rpc.h"

typedef struct srv_transfer srv_transfer;

typedef void (*srv_method_fn)(srv_server *s, srv_rpc_call *call, cJSON *params);

/* What the dispatcher checks before a method runs. PARAMS: it takes an object of params;
 * EDITS: it changes what the store keeps (refused while the store cannot write); SESSION: it
 * acts on the session params.session names (the role is needed on that session). */
enum { SRV_METHOD_PARAMS = 1, SRV_METHOD_EDITS = 2, SRV_METHOD_SESSION = 4 };
#define SRV_METHOD_ON (SRV_METHOD_PARAMS | SRV_METHOD_SESSION)

/* A method: its name on the wire, its handler, the checks above and the role it needs. */
typedef struct srv_method {
  const char *name;
  srv_method_fn fn;
  int flags;
  srv_role role;
} srv_method;

/* The methods of one file (static entries; the file's handlers are static too). */
typedef struct srv_method_table {
  const srv_method *methods;
  size_t count;
} srv_method_table;

/* Runs `method` with `params` if the connection's grant allows it (srv_access.c). Either
 * answers now (srv_rpc_reply / srv_rpc_error) or keeps the call for an asynchronous answer.
 * `call` is owned by the callee from here on. */
void srv_methods_dispatch(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params);
/* The same without the route_rpc hook: the call runs on this node. For a call the cluster
 * layer held back and now answers here (a relay's read once its replica has loaded). */
void srv_methods_dispatch_here(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params);
/* Every method, all tables walked in order: names and the role each needs (the tests read it). */
size_t srv_methods_count(void);
const char *srv_methods_name(size_t i);
srv_role srv_methods_role(size_t i);

/* session.create on a primary of a cluster, which claims the name in Redis first
 * (cluster/srv_registry.c); on a single node the method does both steps at once.
 * srv_methods_create_check: what session.create refuses before opening anything, in the order
 * a client sees it (the store cannot write, params.session or params.mesh invalid, a session
 * of that name here): 0, or an SRV_E* code with the answer in `why`.
 * srv_methods_create_open: those checks again (the store, or the sessions here, may have
 * changed while Redis answered), then the open (srv_job_open_session). Returns 0 when the open
 * began: `done` (may be NULL) runs when it ends, with 0 and the session added or an SRV_E*
 * code, and then `call` is answered. Otherwise returns an SRV_E* code with the answer in `err`
 * (512 bytes hold every answer whole): nothing began, `done` never runs and `call` is still
 * the caller's to answer. */
int srv_methods_create_check(srv_server *s, const cJSON *params, char *why, size_t whylen);
int srv_methods_create_open(srv_server *s, srv_rpc_call *call, const cJSON *params, srv_open_cb done, void *arg,
                            char *err, size_t errlen);

/* Each method file's table (dispatch walks them; srv_methods.c has its own). */
extern const srv_method_table srv_token_rpc_methods;    /* auth, token.* */
extern const srv_method_table srv_transfer_rpc_methods; /* mesh.upload, session.export */
extern const srv_method_table srv_edit_rpc_methods;     /* targets.*, weights.*, sculpt.*, deform.*, brush.stroke */
extern const srv_method_table srv_history_rpc_methods;  /* hello, history.* */
extern const srv_method_table srv_blend_rpc_methods;    /* blend.* */
extern const srv_method_table srv_anim_rpc_methods;     /* anim.* */
extern const srv_method_table srv_mask_rpc_methods;     /* mask.* */
extern const srv_method_table srv_presence_rpc_methods; /* presence.list, presence.set */
extern const srv_method_table srv_face_rpc_methods;     /* face.* */
extern const srv_method_table srv_texclip_rpc_methods;  /* texclip.* */

/* srv_transfer_rpc.c: the connection closes: its unfinished upload is discarded, its kept
 * download freed. */
void srv_transfer_release(srv_conn *c);

#endif
