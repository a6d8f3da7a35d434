/*
 * srv_caps.h — the capabilities a stream connection was granted (docs/protocol.md §14): what
 * the server grants for a HELLO's caps option, the WELCOME's answer, and the one test every
 * sender of an optional frame kind makes (srv_caps_has), which srv_conn_send backs up for
 * every frame.
 *
 * DOES NOT parse or encode the option (protocol/proto_caps.c does) or send anything.
 */
#ifndef DEFORMD_SRV_CAPS_H
#define DEFORMD_SRV_CAPS_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "proto_caps.h"

typedef struct srv_conn srv_conn;

/* Per stream connection, set once by its HELLO; zero (nothing granted, no answer) by default. */
typedef struct srv_caps {
  uint32_t granted; /* PROTO_CAP_BIT of each capability granted */
  uint8_t answer;   /* its HELLO had a caps option: WELCOME answers with one (maybe empty) */
} srv_caps;

/* What this server grants a HELLO of protocol version `version`, role `role` and options `o`:
 * the capabilities it asked for that this build serves (unknown names were skipped by the
 * decoder); a version 1 HELLO has none. */
srv_caps srv_caps_grant(uint16_t version, uint8_t role, const proto_hello_opts *o);
/* Puts the answer into a version 2 WELCOME's options. */
void srv_caps_welcome(const srv_caps *k, proto_welcome_opts *o);
/* Whether `c` was granted `cap`: the test a sender of an optional frame kind makes first. */
int srv_caps_has(const srv_conn *c, proto_cap cap);
/* Whether the frame `data` (len bytes; anything but a stream frame passes) may go to a
 * connection granted `k`: its message type needs no capability, or one granted. */
int srv_caps_allow_frame(const srv_caps *k, const uint8_t *data, size_t len);

#endif
