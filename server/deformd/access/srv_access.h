/*
 * srv_access.h — access: tokens, roles, and the decision every transport and method asks.
 */
#ifndef DEFORMD_SRV_ACCESS_H
#define DEFORMD_SRV_ACCESS_H

#include <stddef.h>
#include <stdint.h>

#include "srv_grant.h"
#include "srv_server.h"
#include "srv_conn.h"

const char *srv_role_name(srv_role r);
int srv_role_parse(const char *name, srv_role *out); /* 0 or SRV_EPARAMS */
int srv_access_init(srv_access *a);
void srv_access_fini(srv_access *a);
/* Whether tokens are required (any token existed since start). */
int srv_access_enabled(const srv_access *a);
void srv_access_hash(const void *token, size_t len, uint8_t out[SRV_TOKEN_HASH]);
/* A new random token, "dfm_" + 43 base64url characters, into out (at least 48 bytes). */
int srv_access_make_token(char *out, size_t len);
/* Adds a token (strings copied; session NULL or "": every session). 0 or SRV_EINTERNAL. */
int srv_access_add(srv_access *a, int64_t id, const uint8_t hash[SRV_TOKEN_HASH], srv_role role, const char *session,
                   const char *user, double created);
const srv_token *srv_access_find(const srv_access *a, int64_t id);
/* Whether grant g may do what needs role `need` on `session`: NULL for what concerns no one
 * session (session.list, hello), "" for a method that names none. Never looks at whether the
 * session exists. */
int srv_access_allows(const srv_server *s, const srv_grant *g, srv_role need, const char *session);
/* The same, as 0 or SRV_EACCES with the one answer a refused client gets (`what` names the
 * method or the kind of connection). */
int srv_access_refusal(const srv_server *s, const srv_grant *g, srv_role need, const char *session, const char *what,
                       char *why, size_t whylen);
/* A token presented on connection c (len bytes, may hold anything): on success c's grant and
 * author become the token's, at once, however many wrong ones came before from anywhere;
 * otherwise c keeps no rights, the failure is counted (per connection and per address) and
 * logged, and *delay_ms says how long the transport holds the answer back (0: none; it grows
 * with the address's failures in the window, srv_access_answer_later). Returns 0, or
 * SRV_EACCES with a reason (wrong, a NUL in it, or a connection past SRV_AUTH_CONN_FAILURES:
 * then not even checked, and *delay_ms is 0: close it). */
int srv_access_login(srv_server *s, srv_conn *c, const char *token, size_t len, uint32_t *delay_ms, char *why,
                     size_t whylen);
/* Calls cb(c, arg, 0) once delay_ms have passed (cb(c, arg, 1) instead when c closed or the
 * server stopped meanwhile), holding a reference to c. 0, or SRV_EINTERNAL (cb never runs). */
typedef void (*srv_access_later_cb)(srv_conn *c, void *arg, int gone);
int srv_access_answer_later(srv_server *s, srv_conn *c, uint32_t delay_ms, srv_access_later_cb cb, void *arg);
/* The server is stopping: answers still held back run now, as gone. */
void srv_access_stop(srv_server *s);
/* Knows a token from now on, and keeps it in the store when there is one: a new one, or one
 * another node of the cluster made. A token already known under `id` with the same hash stays
 * as it is; with another hash the old one is revoked first. 0 or SRV_EINTERNAL (nothing kept). */
int srv_access_put(srv_server *s, int64_t id, const uint8_t hash[SRV_TOKEN_HASH], srv_role role, const char *session,
                   const char *user, double created);
/* Removes a token (stored ones from the store too); connections using it lose their rights and
 * stream connections close. 0 or SRV_ERANGE (no such token). */
int srv_access_revoke(srv_server *s, int64_t id);
/* session.close: the tokens for that session go (in the cluster too, through token_revoke). */
void srv_access_session_closed(srv_server *s, const char *name);

#endif
