/*
 * proto_osc.c — OSC 1.0 packets walked message by message (proto_osc.h). Every read goes through
 * a cursor over the bytes present; nothing is copied and nothing is allocated.
 *
 * DOES NOT interpret addresses: VMC's meaning is the face input's (srv_face_udp.c).
 */
#include <string.h>

#include "proto_frame.h"
#include "proto_osc.h"

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t be64(const uint8_t *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

/* An OSC string at p[*at..n): NUL-terminated, padded with NULs to a multiple of 4. */
static int read_string(const uint8_t *p, size_t n, size_t *at, const char **out, uint32_t *len) {
  const uint8_t *nul = *at < n ? memchr(p + *at, 0, n - *at) : NULL;
  if (!nul) return *at < n ? PROTO_EINVAL : PROTO_ETRUNCATED;
  size_t l = (size_t)(nul - (p + *at)), padded = (l + 4) & ~(size_t)3;
  if (padded > n - *at) return PROTO_ETRUNCATED;
  for (size_t k = l; k < padded; k++)
    if (p[*at + k] != 0) return PROTO_EINVAL;
  *out = (const char *)(p + *at);
  if (len) *len = (uint32_t)l;
  *at += padded;
  return 0;
}

static int read_arg(const uint8_t *p, size_t n, size_t *at, char type, proto_osc_arg *a) {
  memset(a, 0, sizeof(*a));
  a->type = type;
  size_t need = 0;
  switch (type) {
  case 'i': case 'f': need = 4; break;
  case 'h': case 'd': case 't': need = 8; break;
  case 'T': case 'F': case 'N': case 'I': return 0;
  case 's': return read_string(p, n, at, &a->s, &a->len);
  case 'b':
    if (n - *at < 4) return PROTO_ETRUNCATED;
    a->len = be32(p + *at);
    if (a->len > n - *at - 4 || ((size_t)a->len + 3) / 4 * 4 > n - *at - 4) return PROTO_ETRUNCATED;
    a->s = (const char *)(p + *at + 4);
    *at += 4 + ((size_t)a->len + 3) / 4 * 4;
    return 0;
  default: return PROTO_ETYPE;
  }
  if (n - *at < need) return PROTO_ETRUNCATED;
  uint32_t w = be32(p + *at);
  uint64_t q = need == 8 ? be64(p + *at) : 0;
  if (type == 'i') a->i = (int32_t)w;
  if (type == 'f') memcpy(&a->f, &w, 4);
  if (type == 'd') memcpy(&a->d, &q, 8);
  if (type == 'h' || type == 't') a->h = (int64_t)q;
  *at += need;
  return 0;
}

static int walk_message(const uint8_t *p, size_t n, proto_osc_cb cb, void *arg) {
  proto_osc_msg m;
  size_t at = 0;
  uint32_t tlen = 0;
  int rc = read_string(p, n, &at, &m.address, NULL);
  if (rc) return rc;
  if (m.address[0] != '/') return PROTO_EINVAL;
  if (at == n) { /* OSC 1.0 lets old senders omit the type tag string: no arguments */
    m.types = "";
    m.argc = 0;
    return cb(arg, &m);
  }
  rc = read_string(p, n, &at, &m.types, &tlen);
  if (rc) return rc;
  if (m.types[0] != ',') return PROTO_EINVAL;
  m.types++, tlen--;
  if (tlen > PROTO_OSC_MAX_ARGS) return PROTO_ETOOBIG;
  m.argc = tlen;
  for (uint32_t k = 0; k < tlen; k++)
    if ((rc = read_arg(p, n, &at, m.types[k], &m.args[k])) != 0) return rc;
  if (at != n) return PROTO_ETRAILING;
  return cb(arg, &m);
}

static int walk(const uint8_t *p, size_t n, proto_osc_cb cb, void *arg, int depth) {
  if (n == 0) return PROTO_ETRUNCATED;
  if (p[0] != '#') return walk_message(p, n, cb, arg);
  if (n < 16 || memcmp(p, "#bundle\0", 8) != 0) return n < 16 ? PROTO_ETRUNCATED : PROTO_EINVAL;
  if (depth >= PROTO_OSC_MAX_DEPTH) return PROTO_ETOOBIG;
  for (size_t at = 16; at < n;) {
    if (n - at < 4) return PROTO_ETRUNCATED;
    uint32_t size = be32(p + at);
    at += 4;
    if (size > n - at) return PROTO_ETRUNCATED;
    if (size % 4) return PROTO_EINVAL;
    int rc = walk(p + at, size, cb, arg, depth + 1);
    if (rc) return rc;
    at += size;
  }
  return 0;
}

int proto_osc_walk(const uint8_t *p, size_t n, proto_osc_cb cb, void *arg) {
  if (n % 4) return PROTO_EINVAL; /* every OSC packet is a multiple of 4 bytes */
  return walk(p, n, cb, arg, 0);
}
