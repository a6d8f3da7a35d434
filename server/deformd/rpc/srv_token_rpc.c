/*
 * srv_token_rpc.c — the JSON-RPC methods of access (docs/json-api.md §security): auth,
 * token.create, token.list, token.revoke.
 *
 * A caller hands out only what it has: a new token's role is at most the caller's, and its
 * session the caller's own when the caller's token is for one session; an admin token is for
 * every session. The new token is in the answer once, and never again: the server keeps its
 * SHA-256 (srv_access.c), and with a store the answer goes out once the hash is committed.
 * With --redis a token is the cluster's: token.create and token.revoke go through the server's
 * token_create / token_revoke hooks (srv_cluster_tokens.c) and answer once Redis has the
 * change, or with the reason it could not (Redis unreachable: nothing was done).
 *
 * DOES NOT decide anything itself: srv_access.c does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>
#include "srv_error.h"
#include "srv_log.h"
#include "srv_author.h"
#include "srv_grant.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_access.h"
#include "srv_session.h"
#include "srv_rpc.h"
#include "srv_methods.h"

#define USER_MAX 64 /* bytes in a token's user name (an author name) */

/* A wrong token's answer, held back (srv_access_answer_later). */
typedef struct auth_refusal {
  srv_rpc_call *call;
  char why[160];
} auth_refusal;

/* Guessing on one connection ends after a few tries (more come from other connections, and
 * are counted per address). */
static void refuse(srv_rpc_call *call, const char *why) {
  srv_conn *c = call->conn;
  srv_conn_ref(c);
  srv_rpc_error(call, SRV_EACCES, "%s", why);
  if (c->auth_failures >= SRV_AUTH_CONN_FAILURES && !c->closing && !c->finishing) {
    srv_log(SRV_LOG_WARN, "connection %u (%s) closed after %u failed attempts", c->id, c->peer, c->auth_failures);
    srv_conn_finish(c, NULL);
  }
  srv_conn_unref(c);
}

static void refuse_later(srv_conn *c, void *arg, int gone) {
  auth_refusal *r = arg;
  (void)c;
  if (gone) srv_rpc_call_free(r->call);
  else refuse(r->call, r->why);
  free(r);
}

/* auth {token}: the connection's rights become the token's; a wrong token leaves none, and its
 * answer may wait (srv_access.c: never a right one's). */
static void srv_m_auth(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(params, "token");
  srv_conn *c = call->conn;
  if (!cJSON_IsString(t)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"token\" must be a string");
    return;
  }
  char why[160];
  uint32_t delay = 0;
  int rc = srv_access_login(s, c, t->valuestring, strlen(t->valuestring), &delay, why, sizeof(why));
  if (rc == 0) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "role", srv_role_name(c->grant.role));
    if (c->grant.session[0]) cJSON_AddStringToObject(r, "session", c->grant.session);
    if (srv_access_enabled(&s->access)) cJSON_AddStringToObject(r, "user", srv_authors_name(&s->authors, c->author));
    srv_rpc_reply(call, r);
    return;
  }
  auth_refusal *later = delay ? malloc(sizeof(*later)) : NULL;
  if (later) {
    later->call = call;
    snprintf(later->why, sizeof(later->why), "%s", why);
    if (srv_access_answer_later(s, c, delay, refuse_later, later) == 0) return;
    free(later);
  }
  refuse(call, why);
}

/* Whether grant g may hand out (or take back) `role` on `session` (NULL: every session). */
static int may_grant(const srv_server *s, const srv_grant *g, srv_role role, const char *session) {
  if (!srv_access_enabled(&s->access)) return 1;
  if (role > g->role) return 0;
  if (g->session[0]) return session && strcmp(session, g->session) == 0;
  return 1;
}

static int valid_user(const char *u) {
  size_t n = strlen(u);
  if (n == 0 || n > USER_MAX) return 0;
  for (const unsigned char *p = (const unsigned char *)u; *p; p++)
    if (*p < 0x20 || *p == 0x7f) return 0;
  return 1;
}

static double now_s(void) {
  uv_timeval64_t now;
  uv_gettimeofday(&now);
  return (double)now.tv_sec + now.tv_usec / 1e6;
}

/* A token.create between its checks and its answer: the token itself stays here, in memory
 * (wiped when freed); the cluster's hook sees only `rec`. */
typedef struct created {
  srv_rpc_call *call;
  char token[64];
  srv_token rec;
} created;

/* The token is stored (in the cluster first with --redis, id from there) or refused: the
 * answer, the only time the token is shown. */
static void on_created(srv_server *s, void *arg, int status, int64_t id, const char *why) {
  created *p = arg;
  const srv_token *t = &p->rec;
  if (status == 0 && srv_access_put(s, id, t->hash, t->role, t->session, t->user, t->created) != 0) {
    status = SRV_EINTERNAL;
    why = "out of memory";
  }
  if (status != 0) {
    srv_rpc_error(p->call, status, "%s", why);
  } else {
    srv_log(SRV_LOG_INFO, "token %lld created by connection %u: %s for %s%s, user %s", (long long)id, p->call->conn->id,
            srv_role_name(t->role), t->session ? "session " : "every session", t->session ? t->session : "", t->user);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "token", p->token);
    cJSON_AddNumberToObject(o, "id", (double)id);
    cJSON_AddStringToObject(o, "role", srv_role_name(t->role));
    if (t->session) cJSON_AddStringToObject(o, "session", t->session);
    cJSON_AddStringToObject(o, "user", t->user);
    srv_rpc_reply(p->call, o);
  }
  explicit_bzero(p->token, sizeof(p->token));
  explicit_bzero(p->rec.hash, sizeof(p->rec.hash));
  free(p->rec.session);
  free(p->rec.user);
  free(p);
}

/* token.create {role, session?, user} */
static void srv_m_token_create(srv_server *s, srv_rpc_call *call, cJSON *params) {
  if (!srv_access_enabled(&s->access)) {
    srv_rpc_error(call, SRV_EACCES, "this server has no tokens: start it with DEFORMD_ADMIN_TOKEN (or "
                  "--admin-token-file FILE) to require them, then create more with that token");
    return;
  }
  const cJSON *role = cJSON_GetObjectItemCaseSensitive(params, "role");
  const cJSON *session = cJSON_GetObjectItemCaseSensitive(params, "session");
  const cJSON *user = cJSON_GetObjectItemCaseSensitive(params, "user");
  srv_role r;
  if (!cJSON_IsString(role) || srv_role_parse(role->valuestring, &r) != 0) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"role\" must be viewer, editor, owner or admin");
    return;
  }
  if (session && (!cJSON_IsString(session) || !session->valuestring[0])) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"session\" must be a session name (or absent: every session)");
    return;
  }
  if (!cJSON_IsString(user) || !valid_user(user->valuestring)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"user\" must be a name of 1 to %d bytes without control "
                  "characters (the author of what is done with the token)", USER_MAX);
    return;
  }
  const char *scope = session ? session->valuestring : NULL;
  if (r == SRV_ROLE_ADMIN && scope) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: an admin token is for every session: leave \"session\" out");
    return;
  }
  if (!may_grant(s, &call->conn->grant, r, scope)) {
    srv_rpc_error(call, SRV_EACCES, "a token can only hand out its own role or less, on its own session");
    return;
  }
  if (scope && !srv_session_find(s, scope)) {
    srv_rpc_error(call, SRV_ENOSESSION, "unknown session '%s'", scope);
    return;
  }
  created *p = calloc(1, sizeof(*p));
  if (!p || srv_access_make_token(p->token, sizeof(p->token)) != 0) {
    free(p);
    srv_rpc_error(call, SRV_EINTERNAL, "cannot draw random bytes for a token");
    return;
  }
  p->call = call;
  p->rec.role = r;
  p->rec.session = scope ? strdup(scope) : NULL;
  p->rec.user = strdup(user->valuestring);
  p->rec.created = now_s();
  srv_access_hash(p->token, strlen(p->token), p->rec.hash);
  if ((scope && !p->rec.session) || !p->rec.user) {
    on_created(s, p, SRV_EINTERNAL, 0, "out of memory");
    return;
  }
  if (!s->token_create) { /* one node: the token is this node's */
    on_created(s, p, 0, s->access.next_id, "");
    return;
  }
  char why[256];
  int rc = s->token_create(s, &p->rec, on_created, p, why, sizeof(why));
  if (rc != 0) on_created(s, p, rc, 0, why);
}

/* token.list {session?}: the tokens the caller could have made (never the tokens themselves). */
static void srv_m_token_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *session = cJSON_GetObjectItemCaseSensitive(params, "session");
  const char *only = cJSON_IsString(session) ? session->valuestring : NULL;
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; i < s->access.count; i++) {
    const srv_token *t = &s->access.tokens[i];
    if (!may_grant(s, &call->conn->grant, t->role, t->session)) continue;
    if (only && (!t->session || strcmp(t->session, only) != 0)) continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)t->id);
    cJSON_AddStringToObject(o, "role", srv_role_name(t->role));
    if (t->session) cJSON_AddStringToObject(o, "session", t->session);
    cJSON_AddStringToObject(o, "user", t->user);
    if (t->id == 0) cJSON_AddBoolToObject(o, "configured", 1);
    else cJSON_AddNumberToObject(o, "created", t->created);
    cJSON_AddItemToArray(a, o);
  }
  srv_rpc_reply(call, a);
}

/* The token is taken back (from the cluster first with --redis) or refused: the answer. The
 * token may be gone here already (the cluster's change stream came first). */
static void on_revoked(srv_server *s, void *arg, int status, int64_t id, const char *why) {
  srv_rpc_call *call = arg;
  if (status != 0) {
    srv_rpc_error(call, status, "%s", why);
    return;
  }
  const srv_token *t = srv_access_find(&s->access, id);
  if (t)
    srv_log(SRV_LOG_INFO, "token %lld (%s, user %s) revoked by connection %u", (long long)id, srv_role_name(t->role),
            t->user, call->conn->id);
  srv_access_revoke(s, id);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", (double)id);
  cJSON_AddBoolToObject(o, "revoked", 1);
  srv_rpc_reply(call, o);
}

/* token.revoke {id}: the token goes; connections using it lose their rights at once. */
static void srv_m_token_revoke(srv_server *s, srv_rpc_call *call, cJSON *params) {
  double v = -1;
  int r = srv_rpc_number(call, params, "id", &v);
  if (r < 0) return;
  if (r == 0 || v < 0 || v != (double)(int64_t)v) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"id\" must be a token id (token.list gives them)");
    return;
  }
  const srv_token *t = srv_access_find(&s->access, (int64_t)v);
  if (!t || !may_grant(s, &call->conn->grant, t->role, t->session)) {
    srv_rpc_error(call, SRV_ERANGE, "no token %lld that this connection may revoke", (long long)v);
    return;
  }
  if (t->id == 0) {
    srv_rpc_error(call, SRV_EPARAMS, "the administrator's token comes from the configuration "
                  "(DEFORMD_ADMIN_TOKEN or --admin-token-file): change it there and restart");
    return;
  }
  if (!s->token_revoke) {
    on_revoked(s, call, 0, t->id, "");
    return;
  }
  char why[256];
  int rc = s->token_revoke(s, t->id, on_revoked, call, why, sizeof(why));
  if (rc != 0) on_revoked(s, call, rc, t->id, why);
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). */
static const srv_method methods[] = {
    {"auth", srv_m_auth, SRV_METHOD_PARAMS, SRV_ROLE_NONE},
    /* A token for every session needs one for every session; token.create also holds the new
     * token to the caller's role and scope. */
    {"token.create", srv_m_token_create, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
    {"token.list", srv_m_token_list, SRV_METHOD_SESSION, SRV_ROLE_OWNER}, /* params optional: every token it may see */
    {"token.revoke", srv_m_token_revoke, SRV_METHOD_ON | SRV_METHOD_EDITS, SRV_ROLE_OWNER},
};
const srv_method_table srv_token_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
