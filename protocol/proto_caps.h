/*
 * proto_caps.h — capabilities: optional frame kinds a version 2 client asks for by name in
 * HELLO (option PROTO_OPT_CAPS) and the server grants in WELCOME (docs/protocol.md §14).
 *
 * On the wire a capability is a name (1 to PROTO_MAX_CAP_NAME bytes of a-z 0-9 _ . -), so that
 * experiments and later versions never collide on a number and a server skips names it does not
 * know. In this library each name this build knows has an id (proto_cap), and a set of them is
 * a bit mask (PROTO_CAP_BIT), which is what a server keeps per connection and tests before it
 * sends a frame of an optional kind (proto_cap_of_type).
 *
 * DOES NOT decide what a server grants (server/deformd/net/srv_caps.c does) or do I/O.
 */
#ifndef DEFORMD_PROTO_CAPS_H
#define DEFORMD_PROTO_CAPS_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The registry: every capability this build knows. Ids are this library's own (the wire carries
 * names), at most 32 of them while a set is a uint32_t. A new one gets the next id, its name in
 * proto_caps.c, the message types it unlocks in proto_cap_of_type, and a line in §14's table. */
typedef enum proto_cap {
  PROTO_CAP_NOOP = 0, /* "noop": unlocks no frame; granted to whoever asks, so that the negotiation
                       * itself is exercised end to end before the first real capability exists */
  PROTO_CAP_UP = 1,   /* "up": unlocks no frame; WELCOME carries the session's up axis (option 8) */
  PROTO_CAP_BULK = 2, /* "bulk": BULK frames (proto_bulk.h), vertex arrays as float32 on request */
  PROTO_CAP_MASK = 3, /* "mask": MASK frames, the connection's author's own mask (§14.7) */
  PROTO_CAP_PRESENCE = 4,/* "presence": PRESENCE frames (proto_presence.h), both ways */
  PROTO_CAP_TEXTURE = 5, /* "texture": TEXTURE frames (proto_texture.h), once per join */
  PROTO_CAP_TEXCLIP = 6, /* "texclip": TEXCLIP and TEXWEIGHTS frames (proto_texclip.h) */
  PROTO_CAP_ENTROPY = 7, /* "entropy": unlocks no frame; the SNAPSHOT's pieces rANS-coded (§12.11) */
  PROTO_CAP_COUNT
} proto_cap;

#define PROTO_CAP_BIT(cap) (1u << (unsigned)(cap))
#define PROTO_MAX_CAPS 32     /* names in one list (known or not) */
#define PROTO_MAX_CAP_NAME 32 /* bytes in one name */

/* The wire name of `cap`, or NULL for an id this build does not have. */
const char *proto_cap_name(proto_cap cap);
/* The id of the name (len bytes, not NUL-terminated), or -1 for a name this build does not know. */
int proto_cap_find(const char *name, size_t len);
/* The capability a frame of message type `type` needs, or -1 when every connection may be sent
 * it (every type of versions 1 and 2: 1 to 12). BULK (13) needs PROTO_CAP_BULK, TEXTURE (15)
 * PROTO_CAP_TEXTURE, MASK (20) PROTO_CAP_MASK. */
int proto_cap_of_type(uint8_t type);

/* The caps option's value: for each name, u8 length then the bytes. proto_caps_size is its
 * length for `set`; proto_caps_put appends it (the names of the set bits in id order). Both
 * ignore bits with no name. proto_caps_put returns 0 or PROTO_ENOMEM. */
size_t proto_caps_size(uint32_t set);
int proto_caps_put(proto_buf *b, uint32_t set);
/* Checks a whole caps value and gives the known names' bits in *known (unknown names are
 * skipped: forward compatible). Returns 0, PROTO_ETOOBIG (more than PROTO_MAX_CAPS names),
 * PROTO_EINVAL (an empty name, one over PROTO_MAX_CAP_NAME bytes or with another byte than
 * a-z 0-9 _ . -, a name twice) or PROTO_ETRUNCATED (a name longer than the bytes left); with
 * *why (a static string; may be NULL) saying which. */
int proto_caps_get(const uint8_t *v, size_t n, uint32_t *known, const char **why);
/* For a HELLO payload that proto_decode_hello2 refused: why its caps option is malformed (a
 * static string), or NULL when the caps option is not what is wrong (or there is none). */
const char *proto_hello_caps_why(const uint8_t *p, size_t n);

/* "noop,presence" <-> a set, for command lines and logs. proto_caps_parse: 0, or PROTO_EINVAL
 * for a name this build does not know (its start in *bad when not NULL). proto_caps_format
 * writes the names of the set bits comma-separated ("" for none), cut to fit `cap` bytes. */
int proto_caps_parse(const char *text, uint32_t *set, const char **bad);
void proto_caps_format(uint32_t set, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
