/*
 * srv_frame.c — reference-counted encoded frames.
 *
 * A state change is encoded once; every subscriber's write request holds a reference to the
 * same bytes (invariant 3 of docs/architecture.md). Only the loop thread touches reference
 * counts (invariant 10), and a frame is freed with its last reference, never before (invariant 8).
 *
 * DOES NOT encode anything: protocol/ does.
 */
#include <stdlib.h>

#include "proto.h"
#include "srv_assert.h"
#include "srv_frame.h"

srv_frame *srv_frame_from_buf(proto_buf *b) {
  if (b->failed) {
    proto_buf_fini(b);
    return NULL;
  }
  srv_frame *f = malloc(sizeof(*f));
  if (!f) {
    proto_buf_fini(b);
    return NULL;
  }
  f->refs = 1;
  f->data = proto_buf_detach(b, &f->len);
  return f;
}

srv_frame *srv_frame_ref(srv_frame *f) {
  SRV_ASSERT(f->refs > 0); /* invariant 8: a freed frame is never referenced again */
  f->refs++;
  return f;
}

void srv_frame_unref(srv_frame *f) {
  SRV_ASSERT(!f || f->refs > 0); /* invariant 8 */
  if (f && --f->refs == 0) {
    free(f->data);
    free(f);
  }
}
