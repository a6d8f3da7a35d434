/*
 * srv_bytes.h — the bytes stored records are made of: varints, zigzag varints and little-endian
 * float64 appended to a proto_buf, read back through a cursor that checks every bound.
 *
 * DOES NOT know what a record means (srv_record.c's operations and checkpoints and srv_history.c's
 * undo history use it).
 */
#ifndef DEFORMD_SRV_BYTES_H
#define DEFORMD_SRV_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Each appends to b (b->failed when out of memory, as proto_buf_append). */
void srv_bytes_put(proto_buf *b, const void *p, size_t n);
void srv_bytes_varint(proto_buf *b, uint64_t v);
void srv_bytes_zigzag(proto_buf *b, int64_t v);
void srv_bytes_f64(proto_buf *b, double d);
void srv_bytes_u8(proto_buf *b, uint8_t v);
void srv_bytes_f32(proto_buf *b, float f);
void srv_bytes_str(proto_buf *b, const char *s); /* varint length, then the bytes */

/* A reader over [p, end): a getter past the end (or a varint over 64 bits) returns 0 and sets
 * bad, which stays set. */
typedef struct srv_bytes_cur {
  const uint8_t *p, *end;
  int bad;
} srv_bytes_cur;
uint64_t srv_bytes_get_varint(srv_bytes_cur *c);
int64_t srv_bytes_get_zigzag(srv_bytes_cur *c);
double srv_bytes_get_f64(srv_bytes_cur *c);
uint8_t srv_bytes_get_u8(srv_bytes_cur *c);
float srv_bytes_get_f32(srv_bytes_cur *c);
/* A string of at most PROTO_MAX_NAME bytes as a malloc'ed, NUL-terminated copy (the caller frees
 * it); NULL, with bad set, when it is not there whole. */
char *srv_bytes_get_str(srv_bytes_cur *c);

#endif
