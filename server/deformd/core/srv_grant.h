/*
 * srv_grant.h — roles, grants and tokens: what a connection may do and the table that says so. The
 * decisions (login, allows, revoke) are access/srv_access.c's.
 */
#ifndef DEFORMD_SRV_GRANT_H
#define DEFORMD_SRV_GRANT_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Each role may do everything the ones before it may (docs/json-api.md §security). */
typedef enum srv_role {
  SRV_ROLE_NONE = 0,   /* nothing: a server with tokens, before a token was presented */
  SRV_ROLE_VIEWER = 1, /* watch, read methods */
  SRV_ROLE_EDITOR = 2, /* + edits, its own undo and redo */
  SRV_ROLE_OWNER = 3,  /* + target configuration, revert, export, close, the session's tokens */
  SRV_ROLE_ADMIN = 4   /* everything: session.create, mesh.upload, server.stats, every session */
} srv_role;

#define SRV_TOKEN_HASH 32              /* SHA-256 */
#define SRV_AUTH_CONN_FAILURES 3       /* failed attempts before a connection is closed */
#define SRV_AUTH_FREE_FAILURES 5       /* wrong tokens from one address in a window answered at once */
#define SRV_AUTH_DELAY_MS 100          /* ... then each wrong answer waits this, doubling per failure */
#define SRV_AUTH_DELAY_MAX_MS 5000     /* ... up to this; a right token is never delayed */
#define SRV_AUTH_WINDOW_MS 60000       /* the window failures are counted in */
#define SRV_AUTH_ADDRESSES 256         /* addresses remembered */

/* What a connection may do: a role on one session or on every one. */
typedef struct srv_grant {
  srv_role role;
  char session[PROTO_MAX_NAME + 1]; /* "" = every session */
  int64_t token;                    /* the token's id (0: the configured administrator's), -1 none */
} srv_grant;

typedef struct srv_token {
  int64_t id;                       /* 0: the configured administrator's token (not stored) */
  uint8_t hash[SRV_TOKEN_HASH];
  srv_role role;
  char *session;                    /* NULL: every session */
  char *user;                       /* the author of what is done with it */
  double created;                   /* seconds since the epoch */
} srv_token;

typedef struct srv_addr_failures {
  char addr[64];
  uint32_t count;                   /* failures in the window */
  uint64_t window_start;            /* uv_now() */
  int logged_delay;                 /* the window's first delayed answer was logged */
} srv_addr_failures;

struct srv_auth_hold;

typedef struct srv_access {
  srv_token *tokens;
  uint32_t count, cap;
  int64_t next_id;
  int enabled;                      /* a token existed at some point: both ports require one */
  srv_addr_failures addrs[SRV_AUTH_ADDRESSES];
  struct srv_auth_hold *holds;      /* wrong answers waiting (srv_access_answer_later) */
  uint64_t failures, refused;       /* counters for server.stats: wrong tokens; of them, answers held back */
} srv_access;

#endif
