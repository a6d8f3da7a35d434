/*
 * srv_methods.h — the JSON-RPC method table and the methods.
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
#include "srv_rpc.h"

typedef struct srv_transfer srv_transfer;

typedef void (*srv_method_fn)(srv_server *s, srv_rpc_call *call, cJSON *params);

/* Runs `method` with `params` if the connection's grant allows it (srv_access.c). Either
 * answers now (srv_rpc_reply / srv_rpc_error) or keeps the call for an asynchronous answer.
 * `call` is owned by the callee from here on. */
void srv_methods_dispatch(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params);
/* The method table: names and the role each needs (the tests read it). */
size_t srv_methods_count(void);
const char *srv_methods_name(size_t i);
srv_role srv_methods_role(size_t i);

/* srv_token_rpc.c: auth and the tokens. */
void srv_m_auth(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_token_create(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_token_list(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_token_revoke(srv_server *s, srv_rpc_call *call, cJSON *params);

/* srv_transfer_rpc.c: mesh.upload, session.export (into exports/, or a download in chunks). */
typedef struct srv_transfer srv_transfer;
void srv_m_mesh_upload(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_session_export(srv_server *s, srv_rpc_call *call, cJSON *params);
/* The connection closes: its unfinished upload is discarded, its kept download freed. */
void srv_transfer_release(srv_conn *c);

/* srv_edit_rpc.c: targets, weights, sculpt offsets, gestures and brushes. */
void srv_m_targets_list(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_targets_configure(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_targets_create_from_sculpt(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_weights_set(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_weights_get(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_sculpt_set(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_sculpt_get(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_begin(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_drag(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_end(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_reset(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_brush_stroke(srv_server *s, srv_rpc_call *call, cJSON *params);

/* srv_history_rpc.c */
void srv_m_hello(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_undo(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_redo(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_list(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_revert(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_compact(srv_server *s, srv_rpc_call *call, cJSON *params);

/* srv_blend_rpc.c */
void srv_m_blend_solve(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_blend_fit(srv_server *s, srv_rpc_call *call, cJSON *params);

/* srv_anim_rpc.c */
void srv_m_anim_list(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_compress(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_play(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_pause(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_stop(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_seek(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_speed(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_loop(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_blend(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_record_start(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_record_stop(srv_server *srv, srv_rpc_call *call, cJSON *params);

#endif
