/*
 * vw_mask.h — the author's own mask in deform-view: what the server's MASK frames (capability
 * "mask", docs/protocol.md §14.7) leave in the replica, uploaded as one float per render vertex
 * for the draw pass to darken (vw_render_set_mask), and the mask tools' edits.
 *
 * DOES NOT decide what a mask holds (the server does) or read input (vw_app.c).
 */
#ifndef DEFORMD_VW_MASK_H
#define DEFORMD_VW_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "client_replica.h"
#include "proto.h"
#include "vw_net.h"

typedef struct vw_mask {
  unsigned int buffer; /* GL buffer name, 0 until the replica has a mask */
  uint32_t count;      /* floats in it (the mesh's render vertices) */
  uint32_t serial;     /* the replica's mask_serial it holds */
} vw_mask;

/* Uploads the replica's mask when it changed (a new MASK frame or another mesh). Needs the
 * replica's lock and the GL context. Returns 0 or VW_EGL / VW_ENOMEM with a reason. */
int vw_mask_sync(vw_mask *m, const client_replica *r, char *err, size_t errlen);
/* The buffer to draw with (0: none yet). */
unsigned int vw_mask_buffer(const vw_mask *m);
void vw_mask_free(vw_mask *m);

/* The mask tools as EDIT MASK frames (docs/protocol.md §5.6.4) on `n`: a stroke along `count`
 * points (erase: the erase tool, else paint) at `radius` and strength 1, or clear, or invert.
 * Each returns the request id, 0 when nothing was queued (not live, or not an editor). */
uint32_t vw_mask_stroke(vw_net *n, const proto_brush_sample *path, uint32_t count, int erase);
uint32_t vw_mask_clear(vw_net *n);
uint32_t vw_mask_invert(vw_net *n);

#endif
