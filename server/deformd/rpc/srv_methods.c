/*
 * srv_methods.c — dispatch over the method tables (each method file exports its own, with the
 * role each method needs), and the session-level methods: session.create/list/close,
 * mesh.info, mesh.topology, state.get and server.stats (docs/json-api.md has each with examples, and the
 * roles in its security section).
 *
 * Dispatch asks srv_access.c whether the connection's grant covers the method's role on the
 * session its params name, before the method looks anything up: a client without rights gets
 * one answer whether the session exists or not. Each method then validates its params
 * (SRV_EPARAMS naming the offending key), finds its session (SRV_ENOSESSION), and either
 * answers at once or starts a job and answers from its callback. The other methods live in
 * srv_edit_rpc.c, srv_blend_rpc.c, srv_anim_rpc.c, srv_history_rpc.c, srv_token_rpc.c and
 * srv_transfer_rpc.c.
 *
 * session.create is two steps, its checks (srv_methods_create_check) and the open
 * (srv_methods_create_open): on a cluster's primary the registry (cluster/srv_registry.c)
 * claims the name in Redis between them and calls the open itself, with a completion that
 * ends the claim; it never dispatches the call again.
 *
 * DOES NOT parse the transport: srv_rpc_conn.c hands it parsed requests.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "srv_methods.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_json_text.h"
#include "srv_json.h"
#include "srv_store.h"
#include "srv_grant.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_access.h"
#include "srv_session.h"
#include "srv_fanout.h"
#include "srv_jobs.h"
#include "srv_rpc.h"

static cJSON *session_summary(const srv_session *x) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "session", x->name);
  cJSON_AddNumberToObject(o, "vertices", x->mesh->vertex_count);
  cJSON_AddNumberToObject(o, "triangles", x->mesh->triangle_count);
  cJSON_AddNumberToObject(o, "targets", x->mesh->target_count);
  cJSON_AddNumberToObject(o, "version", (double)x->version);
  cJSON_AddNumberToObject(o, "viewers", x->subscriber_count);
  cJSON_AddStringToObject(o, "up", x->up == 'z' ? "z" : "y"); /* session.create's answer says what it chose */
  return o;
}

/* ---- sessions ---------------------------------------------------------------------------- */

/* The dispatcher's check for a method that EDITS (and session.create's, srv_methods_create_check). */
static int store_refusal(srv_server *s, char *why, size_t whylen) {
  char failure[256];
  if (!s->store || !srv_store_failed(s->store, failure, sizeof(failure))) return 0;
  snprintf(why, whylen, "the store cannot write (%s): edits are refused until it can; viewers are served", failure);
  return SRV_EIO;
}

/* session.create's params, read: what the method refuses before it opens anything. */
static int create_refusal(srv_server *s, const cJSON *params, char *why, size_t whylen) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  const cJSON *path = cJSON_GetObjectItemCaseSensitive(params, "mesh");
  if (!cJSON_IsString(name) || name->valuestring[0] == '\0' || strlen(name->valuestring) > PROTO_MAX_NAME) {
    snprintf(why, whylen, "invalid params: \"session\" must be a name of 1 to %d bytes", PROTO_MAX_NAME);
    return SRV_EPARAMS;
  }
  if (!cJSON_IsString(path)) {
    snprintf(why, whylen, "invalid params: \"mesh\" must be \"demo\" or the name of a mesh in the mesh "
             "folders (a path relative to the data directory's meshes/ or to a --mesh-dir folder)");
    return SRV_EPARAMS;
  }
  const cJSON *up = cJSON_GetObjectItemCaseSensitive(params, "up");
  if (up && !(cJSON_IsString(up) && (strcmp(up->valuestring, "y") == 0 || strcmp(up->valuestring, "z") == 0))) {
    snprintf(why, whylen, "invalid params: \"up\" must be \"y\" or \"z\" (the file's axis that points up; "
             "default: the file's own where it says (FBX), else \"y\")");
    return SRV_EPARAMS;
  }
  if (srv_session_find(s, name->valuestring)) {
    char q[SRV_QUOTE_BUF];
    snprintf(why, whylen, "a session called '%s' already exists", srv_json_quote(name->valuestring, q));
    return SRV_EEXIST;
  }
  return 0;
}

int srv_methods_create_check(srv_server *s, const cJSON *params, char *why, size_t whylen) {
  int rc = store_refusal(s, why, whylen);
  return rc ? rc : create_refusal(s, params, why, whylen);
}

/* An open that began: the call it answers, and who hears first how it ended. */
typedef struct create_req {
  srv_rpc_call *call;
  srv_open_cb done;
  void *arg;
} create_req;

static void on_created(srv_server *s, void *arg, int status, srv_session *session, const char *err) {
  create_req *req = arg;
  srv_rpc_call *call = req->call;
  if (req->done) req->done(s, req->arg, status, session, err); /* a claim ends before the client hears */
  free(req);
  if (status == 0) {
    srv_log(SRV_LOG_INFO, "session %s created: %u vertices, %u targets", session->name,
            session->mesh->vertex_count, session->mesh->target_count);
    srv_rpc_reply(call, session_summary(session));
  } else if (status == SRV_EEXIST || status == SRV_ELIMIT || status == SRV_ESHUTDOWN) {
    srv_rpc_error(call, status, "%s", err);
  } else {
    srv_rpc_error(call, SRV_EMESH, "mesh refused: %s", err);
  }
}

int srv_methods_create_open(srv_server *s, srv_rpc_call *call, const cJSON *params, srv_open_cb done, void *arg,
                            char *err, size_t errlen) {
  int rc = srv_methods_create_check(s, params, err, errlen);
  if (rc) return rc;
  create_req *req = malloc(sizeof(*req));
  if (!req) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  *req = (create_req){call, done, arg};
  const char *name = cJSON_GetObjectItemCaseSensitive(params, "session")->valuestring;
  const char *path = cJSON_GetObjectItemCaseSensitive(params, "mesh")->valuestring;
  const cJSON *up = cJSON_GetObjectItemCaseSensitive(params, "up"); /* checked: absent, "y" or "z" */
  char why[256]; /* the open's reasons, as long as they have always been */
  rc = srv_job_open_session(s, name, path, 1, up ? up->valuestring[0] : 0, on_created, req, why, sizeof(why));
  if (rc) {
    free(req);
    snprintf(err, errlen, "%s", why);
  }
  return rc;
}

/* On a single node; on a cluster's primary the registry claims the name first and then calls
 * srv_methods_create_open itself (route_rpc takes session.create before it gets here). */
static void m_session_create(srv_server *s, srv_rpc_call *call, cJSON *params) {
  char err[512];
  int rc = srv_methods_create_open(s, call, params, NULL, NULL, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

/* The sessions this connection may view (a token for one session sees that one). */
static void m_session_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  (void)params;
  cJSON *a = cJSON_CreateArray();
  for (srv_session *x = s->sessions; x; x = x->next)
    if (srv_access_allows(s, &call->conn->grant, SRV_ROLE_VIEWER, x->name)) cJSON_AddItemToArray(a, session_summary(x));
  for (uint32_t i = 0; i < s->damaged_count; i++) { /* stored, not restored: listed so that nobody wonders */
    const srv_damaged *d = &s->damaged[i];
    if (!d->why || !srv_access_allows(s, &call->conn->grant, SRV_ROLE_VIEWER, d->name)) continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "session", d->name);
    cJSON_AddBoolToObject(o, "damaged", 1);
    cJSON_AddStringToObject(o, "reason", d->why);
    cJSON_AddItemToArray(a, o);
  }
  srv_rpc_reply(call, a);
}

static void m_session_close(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "session");
  const srv_damaged *d = cJSON_IsString(name) ? srv_session_find_damaged(s, name->valuestring) : NULL;
  if (d) { /* its rows go; the name is free again */
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "session", d->name);
    cJSON_AddBoolToObject(r, "closed", 1);
    if (s->store) srv_store_delete_session(s->store, d->store_id);
    srv_access_session_closed(s, d->name);
    srv_log(SRV_LOG_INFO, "damaged session %s closed and deleted from the store", d->name);
    srv_session_forget_damaged(s, name->valuestring);
    srv_rpc_reply(call, r);
    return;
  }
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "session", x->name);
  cJSON_AddBoolToObject(r, "closed", 1);
  if (s->store && x->store_id) srv_store_delete_session(s->store, x->store_id);
  srv_access_session_closed(s, x->name);
  srv_session_close(s, x, "closed by a JSON-RPC request");
  srv_rpc_reply(call, r);
}

/* ---- mesh, state and server ---------------------------------------------------------------- */

static void m_mesh_info(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  cJSON *o = srv_json_mesh_info(x->mesh, &x->stats);
  if (!o) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  cJSON_AddStringToObject(o, "up", x->up == 'z' ? "z" : "y"); /* the session's, not the mesh's */
  srv_rpc_reply(call, o);
}

/* mesh.topology: which welded (topology) vertex each render vertex is, a range at a time, so a
 * client that keeps one vertex per surface point (the Blender add-on) can open the session's
 * mesh on welded vertices: render triangles and per-corner UVs come with the stream's SNAPSHOT,
 * and welded vertex i's representative is the first render vertex that names it. */
#define TOPOLOGY_MAX_COUNT 1048576u

static int topology_range(srv_rpc_call *call, const cJSON *params, const char *key, double dflt, double *out) {
  int r = srv_rpc_number(call, params, key, out);
  if (r < 0) return -1;
  if (r == 0) *out = dflt;
  if (*out < 0 || *out != (double)(uint64_t)*out) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be an integer >= 0", key);
    return -1;
  }
  return 0;
}

static void m_mesh_topology(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  const mesh_topology *t = &x->topo;
  double first = 0, count = 0;
  if (topology_range(call, params, "first", 0, &first) < 0 ||
      topology_range(call, params, "count", TOPOLOGY_MAX_COUNT, &count) < 0)
    return;
  if (first > t->render_count) {
    srv_rpc_error(call, SRV_ERANGE, "first %.0f is past the last render vertex (the mesh has %u)", first,
                  t->render_count);
    return;
  }
  if (count > TOPOLOGY_MAX_COUNT) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"count\" is at most %u a call: ask for ranges",
                  TOPOLOGY_MAX_COUNT);
    return;
  }
  uint32_t from = (uint32_t)first, n = t->render_count - from < count ? t->render_count - from : (uint32_t)count;
  cJSON *r = cJSON_CreateObject();
  cJSON *welded = cJSON_AddArrayToObject(r, "welded");
  if (!r || !welded) {
    cJSON_Delete(r);
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  for (uint32_t i = 0; i < n; i++) cJSON_AddItemToArray(welded, cJSON_CreateNumber(t->render_to_topo[from + i]));
  cJSON_AddNumberToObject(r, "first", from);
  cJSON_AddNumberToObject(r, "count", n);
  cJSON_AddNumberToObject(r, "vertices", t->render_count);
  cJSON_AddNumberToObject(r, "topology_vertices", t->vertex_count);
  srv_rpc_reply(call, r);
}

static void m_state_get(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint32_t sculpted = 0, editors = 0;
  for (uint32_t v = 0; v < x->mesh->vertex_count; v++) {
    const int32_t *q = x->offsets + 3 * (size_t)v;
    sculpted += (q[0] | q[1] | q[2]) != 0;
  }
  for (srv_conn *c = srv_fanout_first(x); c; c = srv_fanout_next(c)) editors += c->stage == SRV_STAGE_EDITOR;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "session", x->name);
  cJSON_AddNumberToObject(r, "version", (double)x->version);
  cJSON_AddNumberToObject(r, "vertices", x->mesh->vertex_count);
  cJSON_AddNumberToObject(r, "targets", x->mesh->target_count);
  cJSON_AddNumberToObject(r, "sculpted_vertices", sculpted);
  cJSON_AddItemToObject(r, "offset_quantum", srv_json_float(x->offset_quantum));
  cJSON_AddNumberToObject(r, "viewers", x->subscriber_count);
  cJSON_AddNumberToObject(r, "editors", editors);
  cJSON_AddNumberToObject(r, "operations", (double)x->ops_applied);
  cJSON_AddNumberToObject(r, "gestures", x->gesture_count); /* in progress, from any client */
  cJSON_AddStringToObject(r, "up", x->up == 'z' ? "z" : "y");
  srv_rpc_reply(call, r);
}

/* Stream bytes by message type and by kind of viewer (srv_stats, counted in srv_conn.c). */
static void add_stream_stats(cJSON *r, const srv_stats *st) {
  static const char *const names[] = {"?", "HELLO", "WELCOME", "SNAPSHOT", "WEIGHTS", "DELTA", "EDIT",
                                      "ERROR", "PING", "PONG", "BYE", "TARGET", "TARGET_META", "BULK", "PRESENCE", "TEXTURE",
                                      "TEXWEIGHTS", "TEXCLIP"};
  _Static_assert(sizeof(names) / sizeof(names[0]) == PROTO_LAST_TYPE + 1, "a name for every frame type");
  cJSON *types = cJSON_AddObjectToObject(r, "bytes_by_type");
  cJSON *frames = cJSON_AddObjectToObject(r, "frames_by_type");
  for (int t = 1; t <= PROTO_LAST_TYPE; t++) {
    if (!st->type_frames[t]) continue;
    cJSON_AddNumberToObject(types, names[t], (double)st->type_bytes[t]);
    cJSON_AddNumberToObject(frames, names[t], (double)st->type_frames[t]);
  }
  cJSON *classes = cJSON_AddArrayToObject(r, "viewer_classes");
  for (uint32_t i = 0; i < st->class_count; i++) {
    const srv_class_stat *c = &st->classes[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "protocol", c->codec == SRV_CODEC_V1 ? 1 : 2);
    cJSON_AddStringToObject(o, "codec", c->codec == SRV_CODEC_V1 ? "raw" : c->codec == SRV_CODEC_LOSSLESS ? "lossless"
                                                                                                         : "quantised");
    if (c->codec > SRV_CODEC_LOSSLESS) cJSON_AddNumberToObject(o, "grid_shift", srv_codec_shift(c->codec));
    cJSON_AddItemToObject(o, "max_rate", srv_json_float(c->rate));
    cJSON_AddNumberToObject(o, "viewers", c->viewers);
    cJSON_AddNumberToObject(o, "bytes_sent", (double)c->bytes);
    cJSON_AddNumberToObject(o, "writes", (double)c->frames);
    cJSON_AddItemToArray(classes, o);
  }
}

static void m_server_stats(srv_server *s, srv_rpc_call *call, cJSON *params) {
  (void)params;
  uint32_t streams = 0, rpcs = 0, lagging = 0;
  size_t queued = 0;
  for (srv_conn *c = s->conns; c; c = c->next) {
    if (c->closing) continue;
    if (c->kind == SRV_CONN_STREAM) streams++;
    else rpcs++;
    lagging += c->lagging;
    queued += c->queued;
  }
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "connections", streams + rpcs);
  cJSON_AddNumberToObject(r, "stream_connections", streams);
  cJSON_AddNumberToObject(r, "rpc_connections", rpcs);
  cJSON_AddNumberToObject(r, "sessions", s->session_count);
  cJSON_AddNumberToObject(r, "frames_sent", (double)s->stats.frames_sent);
  cJSON_AddNumberToObject(r, "bytes_sent", (double)s->stats.bytes_sent);
  cJSON_AddNumberToObject(r, "frames_coalesced", (double)s->stats.frames_coalesced);
  cJSON_AddNumberToObject(r, "catchups_sent", (double)s->stats.catchups_sent);
  cJSON_AddNumberToObject(r, "clients_dropped", (double)s->stats.clients_dropped);
  cJSON_AddNumberToObject(r, "connections_refused", (double)s->stats.connections_refused);
  cJSON_AddNumberToObject(r, "lagging_connections", lagging);
  cJSON *presence = cJSON_AddObjectToObject(r, "presence"); /* srv_presence.c */
  cJSON_AddNumberToObject(presence, "updates", (double)s->stats.presence_updates);
  cJSON_AddNumberToObject(presence, "skipped", (double)s->stats.presence_skipped);
  cJSON_AddNumberToObject(r, "queued_bytes", (double)queued);
  cJSON_AddNumberToObject(r, "rpc_requests", (double)s->stats.rpc_requests);
  cJSON_AddNumberToObject(r, "rpc_errors", (double)s->stats.rpc_errors);
  cJSON_AddNumberToObject(r, "blend_factorisations", (double)s->stats.blend_factorisations);
  cJSON_AddNumberToObject(r, "blend_solves", (double)s->stats.blend_solves);
  cJSON_AddNumberToObject(r, "blend_fits", (double)s->stats.blend_fits);
  cJSON_AddNumberToObject(r, "auth_failures", (double)s->access.failures);
  cJSON_AddNumberToObject(r, "auth_refused", (double)s->access.refused);
  size_t gesture_bytes = 0;
  uint32_t gestures = 0;
  for (srv_session *x = s->sessions; x; x = x->next) gesture_bytes += x->gesture_bytes, gestures += x->gesture_count;
  cJSON_AddNumberToObject(r, "gestures", gestures);
  cJSON_AddNumberToObject(r, "gesture_memory_bytes", (double)gesture_bytes);
  cJSON_AddNumberToObject(r, "imports_started", (double)s->importer.started);
  cJSON_AddNumberToObject(r, "imports_failed", (double)s->importer.failed);
  cJSON_AddNumberToObject(r, "input_buffered_bytes", (double)s->input_bytes);
  cJSON_AddNumberToObject(r, "uptime_s", (double)(uv_now(s->loop) - s->started_ms) / 1000.0);
  add_stream_stats(r, &s->stats);
  if (s->stats_extra) s->stats_extra(s, r); /* --redis: the node, Redis, publishing or relaying */
  srv_rpc_reply(call, r);
}

/* ---- dispatch ------------------------------------------------------------------------------------- */

#define PARAMS SRV_METHOD_PARAMS
#define EDITS SRV_METHOD_EDITS
#define SESSION SRV_METHOD_SESSION
#define ON SRV_METHOD_ON

/* The session-level methods and the role each needs. Each method file has a table like it;
 * together they are the one place the access rules of the JSON-RPC port are written
 * (tests/deformd/test_access.c checks each against each role, and against docs/json-api.md's
 * table). */
static const srv_method session_methods[] = {
    {"session.list", m_session_list, 0, SRV_ROLE_VIEWER}, /* lists what the token may view */
    {"mesh.info", m_mesh_info, ON, SRV_ROLE_VIEWER},
    {"mesh.topology", m_mesh_topology, ON, SRV_ROLE_VIEWER},
    {"state.get", m_state_get, ON, SRV_ROLE_VIEWER},
    {"session.close", m_session_close, ON | EDITS, SRV_ROLE_OWNER},
    {"session.create", m_session_create, PARAMS | EDITS, SRV_ROLE_ADMIN},
    {"server.stats", m_server_stats, 0, SRV_ROLE_ADMIN},
};
static const srv_method_table own_methods = {session_methods, sizeof(session_methods) / sizeof(session_methods[0])};

/* Every table; a name is in one of them only (the tests count them against the spec). */
static const srv_method_table *const tables[] = {
    &srv_token_rpc_methods, &own_methods,          &srv_edit_rpc_methods,     &srv_history_rpc_methods,
    &srv_blend_rpc_methods, &srv_anim_rpc_methods, &srv_transfer_rpc_methods, &srv_mask_rpc_methods,
    &srv_presence_rpc_methods,
    &srv_face_rpc_methods,   &srv_texclip_rpc_methods,
};
#define TABLE_COUNT (sizeof(tables) / sizeof(tables[0]))

static const srv_method *method_at(size_t i) {
  for (size_t t = 0; t < TABLE_COUNT; t++) {
    if (i < tables[t]->count) return &tables[t]->methods[i];
    i -= tables[t]->count;
  }
  return NULL;
}

static const srv_method *find_method(const char *name) {
  for (size_t t = 0; t < TABLE_COUNT; t++)
    for (size_t i = 0; i < tables[t]->count; i++)
      if (strcmp(tables[t]->methods[i].name, name) == 0) return &tables[t]->methods[i];
  return NULL;
}

size_t srv_methods_count(void) {
  size_t n = 0;
  for (size_t t = 0; t < TABLE_COUNT; t++) n += tables[t]->count;
  return n;
}
const char *srv_methods_name(size_t i) { return method_at(i) ? method_at(i)->name : NULL; }
srv_role srv_methods_role(size_t i) { return method_at(i) ? method_at(i)->role : SRV_ROLE_NONE; }

static void dispatch(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params, int route) {
  const srv_method *m = find_method(method);
  if (m) {
    /* Who may, first, from the name alone: nothing looked up yet, so a refusal says the same
     * whether the session exists or not. */
    const cJSON *session = (m->flags & SESSION) ? cJSON_GetObjectItemCaseSensitive(params, "session") : NULL;
    char why[256];
    const char *named = !(m->flags & SESSION) ? NULL : cJSON_IsString(session) ? session->valuestring : "";
    int rc = srv_access_refusal(s, &call->conn->grant, m->role, named, method, why, sizeof(why));
    if (rc) {
      srv_rpc_error(call, rc, "%s", why);
      return;
    }
    if (route && s->route_rpc && s->route_rpc(s, call, method, params)) return; /* another node's (--redis) */
    if ((m->flags & PARAMS) && !cJSON_IsObject(params)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: %s takes an object of named params, not an array", method);
      return;
    }
    char refused[512];
    if ((m->flags & EDITS) && (rc = store_refusal(s, refused, sizeof(refused))) != 0) {
      srv_rpc_error(call, rc, "%s", refused);
      return;
    }
    m->fn(s, call, params);
    return;
  }
  /* A client without a token learns nothing, not even which methods exist. */
  if (!srv_access_allows(s, &call->conn->grant, SRV_ROLE_VIEWER, NULL)) {
    srv_rpc_error(call, SRV_EACCES, "this server needs a token: call auth {\"token\": ...} first");
    return;
  }
  char q[SRV_QUOTE_BUF];
  srv_rpc_error(call, SRV_ENOMETHOD, "unknown method '%s'", srv_json_quote(method, q));
}

void srv_methods_dispatch(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params) {
  dispatch(s, call, method, params, 1);
}

void srv_methods_dispatch_here(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params) {
  dispatch(s, call, method, params, 0);
}
