/*
 * presence_client.h — a test's presence client (docs/protocol.md §16): joins a session granted
 * "presence", keeps what it heard of each participant, waits for a condition on it, sends its
 * own STATE. Used by tests/deformd/test_presence.c and test_presence_relay.c.
 */
#ifndef DEFORMD_TEST_PRESENCE_CLIENT_H
#define DEFORMD_TEST_PRESENCE_CLIENT_H

#include "harness.h"
#include "proto_presence.h"

/* What one presence client has heard: participants by id. */
typedef struct heard {
  uint32_t self; /* its own id (WELCOME's client_id) */
  struct {
    uint32_t id;
    char author[PROTO_MAX_AUTHOR + 1];
    uint8_t role, flags, client;
    int has_state, left;
    proto_presence_state state;
  } p[16];
  int n;
  uint32_t frames;
} heard;

typedef struct want_state {
  uint32_t id;
  const proto_presence_state *s;
} want_state;

/* The index of participant `id` in w (added when new). */
int heard_find(heard *w, uint32_t id);
/* Applies one PRESENCE payload (every record must decode). */
void heard_apply(heard *w, const uint8_t *p, size_t n);
/* Reads frames (PRESENCE into w, the others into the replica r, NULL: dropped) until
 * done(w, arg) holds, for at most 20 s. */
void heard_until(client_conn *c, client_replica *r, heard *w, int (*done)(heard *, const void *), const void *arg);
/* Conditions: a participant of that author is there (arg: the name); participant x->id's state
 * is exactly *x->s (arg: want_state); participant *(uint32_t *)arg left. */
int heard_author(heard *w, const void *arg);
int heard_state(heard *w, const void *arg);
int heard_left(heard *w, const void *arg);
int presence_same_state(const proto_presence_state *a, const proto_presence_state *b);
/* Joins `session` on h's stream port with "presence" as `author` and reads until its own name
 * is in its list. */
void presence_join(harness *h, const char *session, client_conn *c, client_replica *r, heard *w, proto_role role,
                   const char *author);
void presence_send_state(client_conn *c, const proto_presence_state *s);
/* A cursor and camera that differ with t. */
proto_presence_state presence_sample(float t);

#endif
