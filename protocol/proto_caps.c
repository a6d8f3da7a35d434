/*
 * proto_caps.c — the capability registry and the caps option's value (docs/protocol.md §14).
 *
 * The value is a list of names, each a u8 length and its bytes: a few bytes once per
 * connection buy names that no two experiments fight over, and a server skips what it does
 * not know instead of refusing the client.
 *
 * DOES NOT decide what is granted or do I/O.
 */
#include <string.h>

#include "proto_caps.h"
#include "proto_internal.h"

static const char *const cap_names[PROTO_CAP_COUNT] = {
    [PROTO_CAP_NOOP] = "noop",
    [PROTO_CAP_UP] = "up",
    [PROTO_CAP_BULK] = "bulk",
    [PROTO_CAP_MASK] = "mask",
    [PROTO_CAP_PRESENCE] = "presence",
    [PROTO_CAP_TEXTURE] = "texture",
    [PROTO_CAP_TEXCLIP] = "texclip",
    [PROTO_CAP_ENTROPY] = "entropy",
};

const char *proto_cap_name(proto_cap cap) {
  return (unsigned)cap < PROTO_CAP_COUNT ? cap_names[cap] : NULL; /* NULL for a gap in the ids too */
}

int proto_cap_find(const char *name, size_t len) {
  for (int i = 0; i < PROTO_CAP_COUNT; i++)
    if (cap_names[i] && strlen(cap_names[i]) == len && memcmp(cap_names[i], name, len) == 0) return i;
  return -1;
}

int proto_cap_of_type(uint8_t type) {
  switch (type) {
    case PROTO_BULK: return PROTO_CAP_BULK;
    case PROTO_PRESENCE: return PROTO_CAP_PRESENCE;
    case PROTO_TEXTURE: return PROTO_CAP_TEXTURE;
    case PROTO_MASK: return PROTO_CAP_MASK;
    case PROTO_TEXWEIGHTS:
    case PROTO_TEXCLIP: return PROTO_CAP_TEXCLIP;
    default: return -1; /* every type of versions 1 and 2 */
  }
}

size_t proto_caps_size(uint32_t set) {
  size_t n = 0;
  for (int i = 0; i < PROTO_CAP_COUNT; i++)
    if ((set & PROTO_CAP_BIT(i)) && cap_names[i]) n += 1 + strlen(cap_names[i]);
  return n;
}

int proto_caps_put(proto_buf *b, uint32_t set) {
  for (int i = 0; i < PROTO_CAP_COUNT; i++) {
    if (!(set & PROTO_CAP_BIT(i)) || !cap_names[i]) continue;
    size_t len = strlen(cap_names[i]);
    proto__put_u8(b, (uint8_t)len);
    uint8_t *p = proto__reserve(b, len);
    if (p) memcpy(p, cap_names[i], len);
  }
  return b->failed ? PROTO_ENOMEM : 0;
}

static int name_byte(uint8_t ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
}

/* The checks in this order, so that every decoder (viewer/web/protocol.js too) gives the same
 * code for the same bytes: count, length, bytes present, characters, repeats. */
int proto_caps_get(const uint8_t *v, size_t n, uint32_t *known, const char **why) {
  const char *unused;
  if (!why) why = &unused;
  *known = 0;
  size_t at = 0, starts[PROTO_MAX_CAPS];
  uint32_t count = 0;
  while (at < n) {
    if (count == PROTO_MAX_CAPS) {
      *why = "more than 32 capabilities";
      return PROTO_ETOOBIG;
    }
    size_t len = v[at];
    if (len == 0 || len > PROTO_MAX_CAP_NAME) {
      *why = len ? "a capability name over 32 bytes" : "an empty capability name";
      return PROTO_EINVAL;
    }
    if (len > n - at - 1) {
      *why = "a capability name runs past the end of the list";
      return PROTO_ETRUNCATED;
    }
    const uint8_t *name = v + at + 1;
    for (size_t i = 0; i < len; i++)
      if (!name_byte(name[i])) {
        *why = "a capability name holds a byte other than a-z 0-9 _ . -";
        return PROTO_EINVAL;
      }
    for (uint32_t k = 0; k < count; k++)
      if (v[starts[k]] == len && memcmp(v + starts[k] + 1, name, len) == 0) {
        *why = "a capability named twice";
        return PROTO_EINVAL;
      }
    int id = proto_cap_find((const char *)name, len);
    if (id >= 0) *known |= PROTO_CAP_BIT(id);
    starts[count++] = at;
    at += 1 + len;
  }
  return 0;
}

/* Walks the HELLO's option list the way proto_hello.c does, as far as the caps option. */
const char *proto_hello_caps_why(const uint8_t *p, size_t n) {
  proto_cur c = {p, p + n};
  uint16_t version, len;
  uint8_t role, reserved;
  proto_str session, token;
  const uint8_t *bytes;
  if (proto__get_u16(&c, &version) || version != PROTO_VERSION_2 || proto__get_u8(&c, &role) ||
      proto__get_u8(&c, &reserved) || proto__get_str(&c, &session) || proto__get_str(&c, &token) ||
      proto__get_u16(&c, &len) || proto__get(&c, len, &bytes))
    return NULL;
  proto_cur e = {bytes, bytes + len};
  while (e.at < e.end) {
    uint8_t tag;
    uint16_t vn;
    const uint8_t *v;
    if (proto__get_u8(&e, &tag) || proto__get_u16(&e, &vn) || proto__get(&e, vn, &v)) return NULL;
    if (tag != PROTO_OPT_CAPS) continue;
    uint32_t known;
    const char *why = NULL;
    return proto_caps_get(v, vn, &known, &why) ? why : NULL;
  }
  return NULL;
}

int proto_caps_parse(const char *text, uint32_t *set, const char **bad) {
  *set = 0;
  const char *at = text;
  while (*at) {
    const char *end = strchr(at, ',');
    size_t len = end ? (size_t)(end - at) : strlen(at);
    int id = proto_cap_find(at, len);
    if (id < 0) {
      if (bad) *bad = at;
      return PROTO_EINVAL;
    }
    *set |= PROTO_CAP_BIT(id);
    at += len + (end ? 1 : 0);
  }
  return 0;
}

void proto_caps_format(uint32_t set, char *out, size_t cap) {
  size_t len = 0;
  if (cap == 0) return;
  out[0] = '\0';
  for (int i = 0; i < PROTO_CAP_COUNT; i++) {
    if (!(set & PROTO_CAP_BIT(i)) || !cap_names[i]) continue;
    size_t need = strlen(cap_names[i]) + (len ? 1 : 0);
    if (len + need >= cap) return;
    if (len) out[len++] = ',';
    memcpy(out + len, cap_names[i], strlen(cap_names[i]) + 1);
    len += strlen(cap_names[i]);
  }
}
