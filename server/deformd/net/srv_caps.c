/*
 * srv_caps.c — granting capabilities to stream connections, and the test before an optional
 * frame kind is sent (docs/protocol.md §14).
 *
 * A capability is granted when the client asked for it by a name this build knows and the
 * server serves it (served_caps). Today that is "noop" and "up" (WELCOME then carries the
 * session's up axis; the port fills it in), which unlock no frame, "bulk" (BULK frames:
 * viewers and editors alike; a BULK SET needs an editor, which the port checks per request),
 * "presence" (PRESENCE frames both ways, for viewers and editors alike: anyone who may watch a
 * session sees who is in it), "mask" (MASK frames, the author's own mask), "texture"
 * (TEXTURE frames, the session's materials and images once per join, for anyone), "texclip" (TEXCLIP
 * and TEXWEIGHTS frames: animated texture clips, viewers and editors alike) and "entropy" (no frame:
 * the SNAPSHOT's pieces in the rANS coding of docs/protocol.md §12.11); a later capability
 * that only some connections may have decides it here, from the role.
 *
 * DOES NOT parse the option (protocol/proto_caps.c), send frames, or keep anything but the
 * srv_caps a connection holds.
 */
#include "srv_caps.h"
#include "srv_conn.h"

/* What this build serves. */
static const uint32_t served_caps = PROTO_CAP_BIT(PROTO_CAP_NOOP) | PROTO_CAP_BIT(PROTO_CAP_UP) | PROTO_CAP_BIT(PROTO_CAP_BULK) |
                                    PROTO_CAP_BIT(PROTO_CAP_MASK) | PROTO_CAP_BIT(PROTO_CAP_PRESENCE) |
                                    PROTO_CAP_BIT(PROTO_CAP_TEXTURE) | PROTO_CAP_BIT(PROTO_CAP_TEXCLIP) |
                                    PROTO_CAP_BIT(PROTO_CAP_ENTROPY);

srv_caps srv_caps_grant(uint16_t version, uint8_t role, const proto_hello_opts *o) {
  (void)role;
  srv_caps k = {0, 0};
  if (version != PROTO_VERSION_2 || !o->caps_option) return k;
  k.granted = o->caps & served_caps;
  k.answer = 1;
  return k;
}

void srv_caps_welcome(const srv_caps *k, proto_welcome_opts *o) {
  o->caps = k->granted;
  o->caps_option = k->answer;
}

int srv_caps_has(const srv_conn *c, proto_cap cap) {
  return (unsigned)cap < PROTO_CAP_COUNT && (c->caps.granted & PROTO_CAP_BIT(cap)) != 0;
}

int srv_caps_allow_frame(const srv_caps *k, const uint8_t *data, size_t len) {
  if (len < PROTO_HEADER_SIZE || proto_load_u32(data) != PROTO_MAGIC) return 1;
  int cap = proto_cap_of_type(data[6]);
  return cap < 0 || (k->granted & PROTO_CAP_BIT(cap)) != 0;
}
