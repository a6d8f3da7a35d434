/*
 * srv_access.c — who may do what: access tokens, the role and scope each grants, and the one
 * decision every transport asks (a JSON-RPC method, a binary HELLO, the HTTP port later).
 *
 * Roles, each with everything of the ones before it:
 *   viewer  watch a session, read methods
 *   editor  edits, its own undo and redo
 *   owner   target configuration, revert, export, close, tokens for that session
 *   admin   everything: session.create, mesh.upload, server.stats, every session
 * A token grants one role on one session or on all of them; its user is the author of every
 * operation made with it (an admin token may name another author with hello: a relay forwards
 * its clients' names that way).
 *
 * Tokens are 32 random bytes (getrandom) shown once as "dfm_" + base64url, kept only as their
 * SHA-256 (libcrypto), in the store's tokens table (with --data none in memory only). A
 * presented token is hashed and compared with every stored hash in constant time
 * (CRYPTO_memcmp over all of them, no early exit). A token holding a NUL byte is refused (a C
 * string would stop there). The first administrator's token comes from the environment
 * (DEFORMD_ADMIN_TOKEN) or a file (--admin-token-file), never from the command line. With
 * --redis the tokens here are the cluster's: srv_cluster_tokens.c puts and revokes them as
 * Redis says (srv_access_put), and the server's token_revoke hook takes a closed session's
 * tokens back everywhere; the decision still reads only this memory.
 *
 * Guessing is slowed, never turned into a lockout: a connection is closed after
 * SRV_AUTH_CONN_FAILURES failures, and past SRV_AUTH_FREE_FAILURES wrong tokens from one address
 * within SRV_AUTH_WINDOW_MS each wrong answer is held back (SRV_AUTH_DELAY_MS, doubling per
 * failure, at most SRV_AUTH_DELAY_MAX_MS) by the transport that asked. Every token is checked
 * and a right one is accepted at once, so an attacker at the same address (a NAT, a shared host)
 * cannot shut the real users out, and a guess at 256 random bits stays hopeless however fast it
 * is answered. Tokens carry no id, so the address is the only thing a wrong guess is counted
 * against. Every failure is logged with its address. A failed attempt drops the rights the
 * connection had.
 *
 * Once any token exists both ports require one (and keep requiring one when the last is
 * revoked, until a restart). The decision never looks at whether a session exists: a client
 * whose token does not cover a session gets the same answer for one that exists and one that
 * does not.
 *
 * DOES NOT parse requests or frames (the transports do) or keep connections (srv_conn.c).
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <uv.h>
#include "proto.h"
#include "dfm.h"
#include "srv_access.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_store.h"
#include "srv_author.h"
#include "srv_grant.h"
#include "srv_server.h"
#include "srv_conn.h"

static const char *const role_names[] = {"none", "viewer", "editor", "owner", "admin"};

const char *srv_role_name(srv_role r) { return (unsigned)r <= SRV_ROLE_ADMIN ? role_names[r] : "?"; }

int srv_role_parse(const char *name, srv_role *out) {
  for (int r = SRV_ROLE_VIEWER; r <= SRV_ROLE_ADMIN; r++)
    if (name && strcmp(name, role_names[r]) == 0) {
      *out = (srv_role)r;
      return 0;
    }
  return SRV_EPARAMS;
}

int srv_access_init(srv_access *a) {
  memset(a, 0, sizeof(*a));
  a->next_id = 1;
  return 0;
}

static void token_fini(srv_token *t) {
  free(t->session);
  free(t->user);
  OPENSSL_cleanse(t->hash, sizeof(t->hash));
}

void srv_access_fini(srv_access *a) {
  for (uint32_t i = 0; i < a->count; i++) token_fini(&a->tokens[i]);
  free(a->tokens);
  memset(a, 0, sizeof(*a));
}

int srv_access_enabled(const srv_access *a) { return a->enabled; }

void srv_access_hash(const void *token, size_t len, uint8_t out[SRV_TOKEN_HASH]) {
  unsigned int n = SRV_TOKEN_HASH;
  EVP_Digest(token, len, out, &n, EVP_sha256(), NULL);
}

int srv_access_make_token(char *out, size_t len) {
  uint8_t raw[32];
  size_t got = 0;
  while (got < sizeof(raw)) {
    ssize_t r = getrandom(raw + got, sizeof(raw) - got, 0);
    if (r < 0) return SRV_EINTERNAL;
    got += (size_t)r;
  }
  /* base64 of 32 bytes is 44 characters with one '='; url-safe and unpadded: 43. */
  unsigned char b64[48];
  int n = EVP_EncodeBlock(b64, raw, sizeof(raw));
  OPENSSL_cleanse(raw, sizeof(raw));
  if (n != 44 || len < 4 + 43 + 1) return SRV_EINTERNAL;
  for (int i = 0; i < 43; i++) b64[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
  snprintf(out, len, "dfm_%.43s", (const char *)b64);
  OPENSSL_cleanse(b64, sizeof(b64));
  return 0;
}

int srv_access_add(srv_access *a, int64_t id, const uint8_t hash[SRV_TOKEN_HASH], srv_role role, const char *session,
                   const char *user, double created) {
  if (a->count == a->cap) {
    uint32_t cap = a->cap ? 2 * a->cap : 8;
    srv_token *g = realloc(a->tokens, sizeof(*g) * cap);
    if (!g) return SRV_EINTERNAL;
    a->tokens = g;
    a->cap = cap;
  }
  srv_token *t = &a->tokens[a->count];
  memset(t, 0, sizeof(*t));
  t->id = id;
  memcpy(t->hash, hash, SRV_TOKEN_HASH);
  t->role = role;
  t->session = session && session[0] ? strdup(session) : NULL;
  t->user = strdup(user);
  t->created = created;
  if ((session && session[0] && !t->session) || !t->user) {
    token_fini(t);
    return SRV_EINTERNAL;
  }
  a->count++;
  a->enabled = 1;
  if (id >= a->next_id) a->next_id = id + 1;
  return 0;
}

const srv_token *srv_access_find(const srv_access *a, int64_t id) {
  for (uint32_t i = 0; i < a->count; i++)
    if (a->tokens[i].id == id) return &a->tokens[i];
  return NULL;
}

/* ---- the decision ------------------------------------------------------------------------------ */

int srv_access_allows(const srv_server *s, const srv_grant *g, srv_role need, const char *session) {
  if (!s->access.enabled || need == SRV_ROLE_NONE) return 1;
  if (g->role < need) return 0;
  if (!g->session[0]) return 1;           /* every session */
  if (need == SRV_ROLE_ADMIN) return 0;   /* the server's business: never a one-session token */
  if (!session) return 1;                 /* about no one session (session.list, hello) */
  return strcmp(session, g->session) == 0; /* its own session, by name */
}

int srv_access_refusal(const srv_server *s, const srv_grant *g, srv_role need, const char *session, const char *what,
                       char *why, size_t whylen) {
  if (srv_access_allows(s, g, need, session)) return 0;
  if (g->role == SRV_ROLE_NONE)
    snprintf(why, whylen, "this server needs a token: call auth {\"token\": ...} (JSON-RPC) or send it in HELLO");
  else if (need == SRV_ROLE_ADMIN && g->session[0])
    snprintf(why, whylen, "%s needs an admin token for every session; this one is for one session", what);
  else if (session && g->session[0] && strcmp(session, g->session) != 0)
    snprintf(why, whylen, "no such session, or this token may not use it");
  else
    snprintf(why, whylen, "%s needs the %s role; this token grants %s", what, srv_role_name(need),
             srv_role_name(g->role));
  return SRV_EACCES;
}

/* ---- guessing ------------------------------------------------------------------------------------ */

/* The address part of "ip:port" (or "[v6]:port"). */
static void peer_address(const char *peer, char *out, size_t len) {
  snprintf(out, len, "%s", peer);
  char *colon = strrchr(out, ':');
  if (colon) *colon = '\0';
}

static srv_addr_failures *address_slot(srv_access *a, const char *addr, uint64_t now) {
  srv_addr_failures *oldest = &a->addrs[0];
  for (uint32_t i = 0; i < SRV_AUTH_ADDRESSES; i++) {
    srv_addr_failures *f = &a->addrs[i];
    if (f->count && strcmp(f->addr, addr) == 0) {
      if (now - f->window_start >= SRV_AUTH_WINDOW_MS) { /* a new window */
        f->count = 0;
        f->window_start = now;
        f->logged_delay = 0;
      }
      return f;
    }
    if (f->window_start < oldest->window_start || !f->count) oldest = f;
  }
  /* Unknown (or forgotten): the slot least recently started, a bounded table. */
  memset(oldest, 0, sizeof(*oldest));
  snprintf(oldest->addr, sizeof(oldest->addr), "%s", addr);
  oldest->window_start = now;
  return oldest;
}

static void forget_rights(srv_conn *c) {
  memset(&c->grant, 0, sizeof(c->grant));
  c->grant.token = -1;
  c->author = 0;
}

int srv_access_login(srv_server *s, srv_conn *c, const char *token, size_t len, uint32_t *delay_ms, char *why,
                     size_t whylen) {
  srv_access *a = &s->access;
  *delay_ms = 0;
  if (!a->enabled) { /* an open server: every connection may do everything already */
    c->grant.role = SRV_ROLE_ADMIN;
    return 0;
  }
  uint64_t now = uv_now(s->loop);
  char addr[64];
  peer_address(c->peer, addr, sizeof(addr));
  srv_addr_failures *f = address_slot(a, addr, now);
  forget_rights(c); /* a failed attempt leaves nothing of what this connection had */
  if (c->auth_failures >= SRV_AUTH_CONN_FAILURES) { /* this connection had its tries: it closes */
    snprintf(why, whylen, "too many failed attempts on this connection");
    return SRV_EACCES;
  }
  int found = -1;
  if (len > 0 && len <= PROTO_MAX_NAME && !memchr(token, '\0', len)) {
    uint8_t h[SRV_TOKEN_HASH];
    srv_access_hash(token, len, h);
    for (uint32_t i = 0; i < a->count; i++) /* every one, whatever matched: constant time */
      if (CRYPTO_memcmp(h, a->tokens[i].hash, SRV_TOKEN_HASH) == 0) found = (int)i;
    OPENSSL_cleanse(h, sizeof(h));
  }
  if (found < 0) {
    f->count++;
    c->auth_failures++;
    a->failures++;
    snprintf(why, whylen, "%s", len && memchr(token, '\0', len) ? "a token never holds a NUL character" : "wrong token");
    srv_log(SRV_LOG_WARN, "auth: wrong token from %s (connection %u; %u failures from there in this minute)", c->peer,
            c->id, f->count);
    if (f->count > SRV_AUTH_FREE_FAILURES) {
      uint32_t k = f->count - SRV_AUTH_FREE_FAILURES - 1;
      uint64_t d = k >= 16 ? SRV_AUTH_DELAY_MAX_MS : (uint64_t)SRV_AUTH_DELAY_MS << k;
      *delay_ms = d > SRV_AUTH_DELAY_MAX_MS ? SRV_AUTH_DELAY_MAX_MS : (uint32_t)d;
      a->refused++;
      if (!f->logged_delay) {
        f->logged_delay = 1;
        srv_log(SRV_LOG_WARN, "auth: %u wrong tokens from %s in this minute: its wrong answers wait up to %u ms "
                "(right tokens are never delayed)", f->count, addr, SRV_AUTH_DELAY_MAX_MS);
      }
    }
    return SRV_EACCES;
  }
  const srv_token *t = &a->tokens[found];
  c->grant.role = t->role;
  c->grant.token = t->id;
  snprintf(c->grant.session, sizeof(c->grant.session), "%s", t->session ? t->session : "");
  uint32_t id;
  if (srv_authors_intern(&s->authors, s->store, t->user, &id) == 0) c->author = id;
  /* An administrator may name the author (a relay forwarding its clients' edits does); any
   * other token's user is the author, whatever a name says. */
  c->author_from_token = t->role != SRV_ROLE_ADMIN;
  srv_log(SRV_LOG_INFO, "connection %u (%s) authenticated as %s (%s%s%s)", c->id, c->peer, t->user,
          srv_role_name(t->role), t->session ? " of " : "", t->session ? t->session : "");
  return 0;
}

/* A wrong answer held back: a timer, the connection (referenced) and what to do then. */
typedef struct srv_auth_hold {
  uv_timer_t timer;
  srv_server *server;
  srv_conn *conn;
  srv_access_later_cb cb;
  void *arg;
  struct srv_auth_hold *next;
} srv_auth_hold;

static void hold_closed(uv_handle_t *h) { free(h->data); }

static void hold_run(srv_auth_hold *h, int gone) {
  srv_access *a = &h->server->access;
  for (srv_auth_hold **p = &a->holds; *p; p = &(*p)->next)
    if (*p == h) {
      *p = h->next;
      break;
    }
  srv_conn *c = h->conn;
  h->cb(c, h->arg, gone || c->closing || c->finishing);
  srv_conn_unref(c);
  uv_close((uv_handle_t *)&h->timer, hold_closed);
}

static void hold_due(uv_timer_t *t) { hold_run(t->data, 0); }

int srv_access_answer_later(srv_server *s, srv_conn *c, uint32_t delay_ms, srv_access_later_cb cb, void *arg) {
  srv_auth_hold *h = calloc(1, sizeof(*h));
  if (!h) return SRV_EINTERNAL;
  h->server = s, h->conn = c, h->cb = cb, h->arg = arg;
  uv_timer_init(s->loop, &h->timer);
  h->timer.data = h;
  srv_conn_ref(c);
  h->next = s->access.holds;
  s->access.holds = h;
  uv_timer_start(&h->timer, hold_due, delay_ms, 0);
  return 0;
}

void srv_access_stop(srv_server *s) {
  while (s->access.holds) hold_run(s->access.holds, 1);
}

/* ---- tokens that go ---------------------------------------------------------------------------- */

/* Removes token i; connections holding its rights lose them (stream viewers are closed). */
static void drop(srv_server *s, uint32_t i, const char *why) {
  srv_access *a = &s->access;
  int64_t id = a->tokens[i].id;
  if (s->store && id > 0) srv_store_delete_token(s->store, id);
  token_fini(&a->tokens[i]);
  a->tokens[i] = a->tokens[--a->count];
  for (srv_conn *c = s->conns; c; c = c->next) {
    if (c->closing || c->grant.token != id || c->grant.role == SRV_ROLE_NONE) continue;
    forget_rights(c);
    if (c->kind == SRV_CONN_STREAM && c->stage != SRV_STAGE_GREETING) srv_conn_fail(c, PROTO_ERR_FORBIDDEN, why);
  }
}

int srv_access_revoke(srv_server *s, int64_t id) {
  srv_access *a = &s->access;
  for (uint32_t i = 0; i < a->count; i++)
    if (a->tokens[i].id == id) {
      drop(s, i, "the token this connection used was revoked");
      return 0;
    }
  return SRV_ERANGE;
}

void srv_access_session_closed(srv_server *s, const char *name) {
  srv_access *a = &s->access;
  for (uint32_t i = 0; i < a->count;) {
    if (!a->tokens[i].session || strcmp(a->tokens[i].session, name) != 0) {
      i++;
      continue;
    }
    char why[200];
    /* The other nodes drop it too; without Redis it stays there, granting nothing here. */
    if (s->token_revoke && s->token_revoke(s, a->tokens[i].id, NULL, NULL, why, sizeof(why)) != 0)
      srv_log(SRV_LOG_WARN, "token %lld of closed session '%s' stays on the other nodes: %s",
              (long long)a->tokens[i].id, name, why);
    drop(s, i, "the session is closed");
  }
}

int srv_access_put(srv_server *s, int64_t id, const uint8_t hash[SRV_TOKEN_HASH], srv_role role, const char *session,
                   const char *user, double created) {
  const srv_token *known = srv_access_find(&s->access, id);
  if (known && CRYPTO_memcmp(known->hash, hash, SRV_TOKEN_HASH) == 0) return 0;
  if (known) srv_access_revoke(s, id); /* the cluster gave the id to another token */
  if (srv_access_add(&s->access, id, hash, role, session, user, created) != 0) return SRV_EINTERNAL;
  if (s->store && srv_store_put_token(s->store, id, hash, role, session, user, created) != 0) {
    srv_access_revoke(s, id);
    return SRV_EINTERNAL;
  }
  return 0;
}
