/*
 * srv_frame.c — reference-counted encoded frames.
 *
 * A state change is encoded once; every subscriber's write request holds a reference to the
 * same bytes. Only the loop thread touches reference counts.
 *
 * DOES NOT encode anything: protocol/ does.
 */
#include <stdlib.h>

#include "proto.h"
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
  f->refs++;
  return f;
}

void srv_frame_unref(srv_frame *f) {
  if (f && --f->refs == 0) {
    free(f->data);
    free(f);
  }
}
