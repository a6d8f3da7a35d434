/*
 * srv_token_rpc.c — the JSON-RPC methods of access (docs/json-api.md §security): auth,
 * token.create, token.list, token.revoke.
 *
 * A caller hands out only what it has: a new token's role is at most the caller's, and its
 * session the caller's own when the caller's token is for one session; an admin token is for
 * every session. The new token is in the answer once, and never again: the server keeps its
 * SHA-256 (srv_access.c), and with a store the answer goes out once the hash is committed.
 *
 * DOES NOT decide anything itself: srv_access.c does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define USER_MAX 64 /* bytes in a token's user name (an author name) */

/* auth {token}: the connection's rights become the token's; a wrong token leaves none. */
void srv_m_auth(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(params, "token");
  srv_conn *c = call->conn;
  if (!cJSON_IsString(t)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"token\" must be a string");
    return;
  }
  char why[160];
  int rc = srv_access_login(s, c, t->valuestring, strlen(t->valuestring), why, sizeof(why));
  if (rc == 0) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "role", srv_role_name(c->grant.role));
    if (c->grant.session[0]) cJSON_AddStringToObject(r, "session", c->grant.session);
    if (srv_access_enabled(&s->access)) cJSON_AddStringToObject(r, "user", srv_authors_name(&s->authors, c->author));
    srv_rpc_reply(call, r);
    return;
  }
  srv_rpc_error(call, rc, "%s", why);
  /* Guessing on one connection ends after a few tries (more come from other connections, and
   * are counted per address). */
  if (c->auth_failures >= SRV_AUTH_CONN_FAILURES) {
    srv_log(SRV_LOG_WARN, "connection %u (%s) closed after %u failed attempts", c->id, c->peer, c->auth_failures);
    srv_conn_finish(c, NULL);
  }
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

/* token.create {role, session?, user} */
void srv_m_token_create(srv_server *s, srv_rpc_call *call, cJSON *params) {
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
  char token[64];
  uint8_t h[SRV_TOKEN_HASH];
  if (srv_access_make_token(token, sizeof(token)) != 0) {
    srv_rpc_error(call, SRV_EINTERNAL, "cannot draw random bytes for a token");
    return;
  }
  srv_access_hash(token, strlen(token), h);
  int64_t id = s->access.next_id;
  double created = now_s();
  if (srv_access_add(&s->access, id, h, r, scope, user->valuestring, created) != 0 ||
      (s->store && srv_store_put_token(s->store, id, h, r, scope, user->valuestring, created) != 0)) {
    if (srv_access_find(&s->access, id)) srv_access_revoke(s, id);
    explicit_bzero(token, sizeof(token));
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  srv_log(SRV_LOG_INFO, "token %lld created by connection %u: %s for %s%s, user %s", (long long)id, call->conn->id,
          srv_role_name(r), scope ? "session " : "every session", scope ? scope : "", user->valuestring);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "token", token);
  cJSON_AddNumberToObject(o, "id", (double)id);
  cJSON_AddStringToObject(o, "role", srv_role_name(r));
  if (scope) cJSON_AddStringToObject(o, "session", scope);
  cJSON_AddStringToObject(o, "user", user->valuestring);
  explicit_bzero(token, sizeof(token));
  srv_rpc_reply(call, o);
}

/* token.list {session?}: the tokens the caller could have made (never the tokens themselves). */
void srv_m_token_list(srv_server *s, srv_rpc_call *call, cJSON *params) {
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

/* token.revoke {id}: the token goes; connections using it lose their rights at once. */
void srv_m_token_revoke(srv_server *s, srv_rpc_call *call, cJSON *params) {
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
  srv_log(SRV_LOG_INFO, "token %lld (%s, user %s) revoked by connection %u", (long long)t->id, srv_role_name(t->role),
          t->user, call->conn->id);
  srv_access_revoke(s, (int64_t)v);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", v);
  cJSON_AddBoolToObject(o, "revoked", 1);
  srv_rpc_reply(call, o);
}
