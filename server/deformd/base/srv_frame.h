/*
 * srv_frame.h — frames encoded once and shared by reference (invariant 3 of docs/architecture.md).
 */
#ifndef DEFORMD_SRV_FRAME_H
#define DEFORMD_SRV_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

typedef struct srv_frame {
  int refs;
  size_t len;
  uint8_t *data; /* malloc'ed; freed with the last reference */
} srv_frame;

/* Takes ownership of the bytes of `b` (which is reset). Returns NULL when out of memory or when
 * b->failed. The new frame has one reference. */
srv_frame *srv_frame_from_buf(proto_buf *b);
srv_frame *srv_frame_ref(srv_frame *f);
void srv_frame_unref(srv_frame *f);

#endif
