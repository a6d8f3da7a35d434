/*
 * srv_bytes.c — varints, zigzag varints and little-endian float64 for stored records.
 *
 * DOES NOT allocate beyond the proto_buf it appends to, or read past the cursor's end.
 */
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "srv_bytes.h"

void srv_bytes_put(proto_buf *b, const void *p, size_t n) {
  uint8_t *d = proto_buf_append(b, n);
  if (d && n) memcpy(d, p, n);
}

void srv_bytes_varint(proto_buf *b, uint64_t v) {
  uint8_t tmp[10];
  int n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) tmp[n] |= 0x80;
    n++;
  } while (v);
  srv_bytes_put(b, tmp, (size_t)n);
}

void srv_bytes_zigzag(proto_buf *b, int64_t v) { srv_bytes_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); }

void srv_bytes_f64(proto_buf *b, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(u >> (8 * i));
  srv_bytes_put(b, le, 8);
}

uint64_t srv_bytes_get_varint(srv_bytes_cur *c) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (c->p >= c->end) break;
    uint8_t byte = *c->p++;
    v |= (uint64_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
  c->bad = 1;
  return 0;
}

int64_t srv_bytes_get_zigzag(srv_bytes_cur *c) {
  uint64_t u = srv_bytes_get_varint(c);
  return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

double srv_bytes_get_f64(srv_bytes_cur *c) {
  if (c->end - c->p < 8) {
    c->bad = 1;
    return 0;
  }
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u |= (uint64_t)c->p[i] << (8 * i);
  c->p += 8;
  double d;
  memcpy(&d, &u, 8);
  return d;
}

void srv_bytes_u8(proto_buf *b, uint8_t v) { srv_bytes_put(b, &v, 1); }

void srv_bytes_f32(proto_buf *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
  srv_bytes_put(b, le, 4);
}

void srv_bytes_str(proto_buf *b, const char *s) {
  size_t n = strlen(s);
  srv_bytes_varint(b, n);
  srv_bytes_put(b, s, n);
}

uint8_t srv_bytes_get_u8(srv_bytes_cur *c) {
  if (c->p >= c->end) {
    c->bad = 1;
    return 0;
  }
  return *c->p++;
}

float srv_bytes_get_f32(srv_bytes_cur *c) {
  if (c->end - c->p < 4) {
    c->bad = 1;
    return 0;
  }
  uint32_t u = (uint32_t)c->p[0] | (uint32_t)c->p[1] << 8 | (uint32_t)c->p[2] << 16 | (uint32_t)c->p[3] << 24;
  c->p += 4;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

char *srv_bytes_get_str(srv_bytes_cur *c) {
  uint64_t n = srv_bytes_get_varint(c);
  if (c->bad || n > PROTO_MAX_NAME || (uint64_t)(c->end - c->p) < n) {
    c->bad = 1;
    return NULL;
  }
  char *s = malloc(n + 1);
  if (!s) {
    c->bad = 1;
    return NULL;
  }
  memcpy(s, c->p, n);
  s[n] = '\0';
  c->p += n;
  return s;
}
