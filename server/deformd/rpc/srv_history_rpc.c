/*
 * srv_history_rpc.c — the JSON-RPC methods of history and authorship (docs/json-api.md):
 * hello, history.undo, history.redo, history.list, history.revert, history.compact.
 *
 * An author is the name a connection gives with `hello` (else anonymous-<connection id>);
 * undo and redo act on the caller's own steps (srv_history.c says how).
 *
 * DOES NOT undo anything itself (srv_history.c), keep undos in order with edits
 * (srv_history_wait.c) or read the store (srv_jobs.c, srv_restore.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "proto.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_author.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_history.h"
#include "srv_jobs.h"
#include "srv_rpc.h"
#include "srv_result_json.h"
#include "srv_methods.h"

#define AUTHOR_MAX 64 /* bytes in an author name */

/* hello {author}: names what this connection changes from now on (on a server without tokens;
 * with one, the answer names the token's user, who stays the author). */
static void srv_m_hello(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(params, "author");
  if (!cJSON_IsString(a) || !a->valuestring[0] || strlen(a->valuestring) > AUTHOR_MAX) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"author\" must be a name of 1 to %d bytes", AUTHOR_MAX);
    return;
  }
  for (const unsigned char *p = (const unsigned char *)a->valuestring; *p; p++)
    if (*p < 0x20 || *p == 0x7f) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"author\" may not hold control characters");
      return;
    }
  uint32_t id = call->conn->author;
  /* With a token the token's user is the author: the name asked for is not taken. */
  if (!call->conn->author_from_token && srv_authors_intern(&s->authors, s->store, a->valuestring, &id) != 0) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  call->conn->author = id;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "author", srv_authors_name(&s->authors, id));
  cJSON_AddNumberToObject(r, "connection", call->conn->id);
  srv_rpc_reply(call, r);
}

/* ---- undo and redo, in order with the author's edits (srv_history_wait.c) -------------------- */

static void undo_or_redo(srv_server *s, srv_rpc_call *call, cJSON *params, int redo) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  srv_history_ask(s, x, srv_conn_author(call->conn), redo, srv_rpc_reply_to(call));
}

static void srv_m_history_undo(srv_server *s, srv_rpc_call *call, cJSON *params) { undo_or_redo(s, call, params, 0); }
static void srv_m_history_redo(srv_server *s, srv_rpc_call *call, cJSON *params) { undo_or_redo(s, call, params, 1); }

typedef struct list_ctx {
  srv_server *srv;
  cJSON *steps;
} list_ctx;

static int list_entry(const srv_history_entry *e, void *arg) {
  list_ctx *c = arg;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)e->step);
  cJSON_AddNumberToObject(o, "version", (double)e->last_version);
  cJSON_AddNumberToObject(o, "first_version", (double)e->first_version);
  cJSON_AddStringToObject(o, "author", srv_authors_name(&c->srv->authors, e->author));
  cJSON_AddNumberToObject(o, "time", e->time);
  cJSON_AddStringToObject(o, "kind", srv_history_cause_name(e->cause));
  char summary[160];
  if (e->cause == SRV_CAUSE_UNDO || e->cause == SRV_CAUSE_REDO)
    snprintf(summary, sizeof(summary), "%s of step %llu%s%s%s: %u vert%s, %u target%s (%u left as others changed them)",
             srv_history_cause_name(e->cause), (unsigned long long)e->undo_of, e->undo_of_cause ? " (" : "",
             e->undo_of_cause ? srv_history_cause_name(e->undo_of_cause) : "", e->undo_of_cause ? ")" : "",
             e->vertices, e->vertices == 1 ? "ex" : "ices", e->targets, e->targets == 1 ? "" : "s", e->skipped);
  else if (e->cause == SRV_CAUSE_REVERT)
    snprintf(summary, sizeof(summary), "revert to version %llu", (unsigned long long)e->undo_of);
  else if (e->targets_added)
    snprintf(summary, sizeof(summary), "%s: %u new target(s)", srv_history_cause_name(e->cause), e->targets_added);
  else if (e->vertices || e->targets)
    snprintf(summary, sizeof(summary), "%s: %u vert%s, %u target%s", srv_history_cause_name(e->cause), e->vertices,
             e->vertices == 1 ? "ex" : "ices", e->targets, e->targets == 1 ? "" : "s");
  else
    snprintf(summary, sizeof(summary), "%s: %u change%s in %u operation%s", srv_history_cause_name(e->cause),
             e->changed, e->changed == 1 ? "" : "s", e->ops, e->ops == 1 ? "" : "s");
  if (e->cause == SRV_CAUSE_UNDO || e->cause == SRV_CAUSE_REDO) { /* what it took back, or put back */
    cJSON_AddNumberToObject(o, "of_step", (double)e->undo_of);
    if (e->undo_of_cause) cJSON_AddStringToObject(o, "of_kind", srv_history_cause_name(e->undo_of_cause));
  }
  cJSON_AddNumberToObject(o, "vertices", e->vertices);
  cJSON_AddNumberToObject(o, "targets", e->targets);
  cJSON_AddNumberToObject(o, "operations", e->ops);
  cJSON_AddStringToObject(o, "summary", summary);
  cJSON_AddBoolToObject(o, "undone", e->undone);
  cJSON_AddBoolToObject(o, "undoable", e->undoable && !e->undone);
  cJSON_AddItemToArray(c->steps, o);
  return 0;
}

/* history.list {session, before_version?, limit?}: steps, newest first. */
static void srv_m_history_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  double before = 0, limit = 100;
  int has_before = srv_rpc_number(call, params, "before_version", &before), r;
  if (has_before < 0) return;
  if (has_before && (before < 0 || before != (double)(uint64_t)before)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"before_version\" must be a version (an integer >= 0)");
    return;
  }
  if ((r = srv_rpc_integer_in(call, params, "limit", 1, 10000, &limit)) < 0) return;
  cJSON *res = cJSON_CreateObject();
  cJSON_AddNumberToObject(res, "version", (double)x->version);
  list_ctx c = {s, cJSON_AddArrayToObject(res, "steps")};
  if (x->history) srv_history_list(x, has_before ? (uint64_t)before : UINT64_MAX, (uint32_t)limit, list_entry, &c);
  srv_rpc_reply(call, res);
}

/* ---- revert, compact (after a job rebuilt the older state) ---------------------------------- */

typedef struct revert_ctx {
  srv_rpc_call *call;
  uint32_t author;
} revert_ctx;

static void on_reverted(srv_server *s, void *arg, int status, srv_session *x, const srv_session *old,
                        const char *err) {
  revert_ctx *c = arg;
  srv_rpc_call *call = c->call;
  uint32_t author = c->author;
  free(c);
  if (status) {
    srv_rpc_error(call, status, "%s", err);
    return;
  }
  srv_history_result res;
  char why[512];
  int rc = srv_history_revert(s, x, old, author, &res, why, sizeof(why));
  if (rc) {
    srv_rpc_error(call, rc, "%s", why);
    return;
  }
  cJSON *r = srv_result_json(s, &(srv_result){.kind = SRV_RESULT_HISTORY, .history = {&res, author}});
  cJSON_AddNumberToObject(r, "reverted_to", (double)old->version);
  srv_rpc_reply(call, r);
}

/* Reads params.version as a version of session x (1..x->version, or 0). -1 when answered. */
static int want_version(srv_rpc_call *call, cJSON *params, const char *key, int required, uint64_t *out) {
  double v = 0;
  int r = srv_rpc_number(call, params, key, &v);
  if (r < 0) return -1;
  if ((!r && required) || (r && (v < 0 || v != (double)(uint64_t)v))) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"%s\" must be a version (an integer >= 0)", key);
    return -1;
  }
  *out = (uint64_t)v;
  return r;
}

/* history.revert {session, version}: the state of that version, as one new (undoable) step. */
static void srv_m_history_revert(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint64_t version;
  if (want_version(call, params, "version", 1, &version) < 0) return;
  if (x->gesture_count) {
    srv_rpc_error(call, SRV_EBUSY, "session '%s' has %u gesture(s) in progress; end them first (deform.end)", x->name,
                  x->gesture_count);
    return;
  }
  revert_ctx *c = malloc(sizeof(*c));
  if (!c) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  *c = (revert_ctx){call, srv_conn_author(call->conn)};
  char err[512];
  int rc = srv_job_restore_at(s, x, version, 0, on_reverted, c, err, sizeof(err));
  if (rc) {
    free(c);
    srv_rpc_error(call, rc, "%s", err);
  }
}

static void on_compacted(srv_server *s, void *arg, int status, srv_session *x, const srv_session *old,
                         const char *err) {
  srv_rpc_call *call = arg;
  (void)x;
  if (status) {
    srv_rpc_error(call, status, "%s", err);
    return;
  }
  srv_log(SRV_LOG_INFO, "session %s: history before version %llu folded into a checkpoint", x->name,
          (unsigned long long)old->version);
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "version", (double)x->version);
  cJSON_AddNumberToObject(r, "kept_from_version", (double)old->version);
  srv_rpc_reply(call, r); /* after the compaction is committed */
  (void)s;
}

/* history.compact {session, keep_versions}: operations older than the newest keep_versions are
 * folded into a checkpoint (their steps can no longer be reverted to one by one). */
static void srv_m_history_compact(srv_server *s, srv_rpc_call *call, cJSON *params) {
  srv_session *x = srv_rpc_want_session(s, call, params);
  if (!x) return;
  uint64_t keep;
  if (want_version(call, params, "keep_versions", 1, &keep) < 0) return;
  uint64_t cut = x->version > keep ? x->version - keep : 0;
  char err[512];
  int rc = srv_job_restore_at(s, x, cut, 1, on_compacted, call, err, sizeof(err));
  if (rc) srv_rpc_error(call, rc, "%s", err);
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). */
static const srv_method methods[] = {
    {"hello", srv_m_hello, SRV_METHOD_PARAMS, SRV_ROLE_VIEWER},
    {"history.list", srv_m_history_list, SRV_METHOD_ON, SRV_ROLE_VIEWER},
    {"history.undo", srv_m_history_undo, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"history.redo", srv_m_history_redo, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_EDITOR},
    {"history.revert", srv_m_history_revert, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
    {"history.compact", srv_m_history_compact, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
};
const srv_method_table srv_history_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
