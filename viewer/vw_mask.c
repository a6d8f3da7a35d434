/*
 * vw_mask.c — the author's mask drawn darker, and the mask tools' edits (vw_mask.h).
 *
 * The replica holds the mask per render vertex (client_replica.c applies MASK frames); this
 * file keeps a GL buffer of it that the draw pass reads as vertex attribute 1, and re-uploads it
 * whole when a MASK frame arrived: a MASK frame is the whole mask (invariant 1), and masks
 * change on a click, not every frame.
 *
 * DOES NOT read input or draw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_gl.h"
#include "vw_mask.h"

int vw_mask_sync(vw_mask *m, const client_replica *r, char *err, size_t errlen) {
  if (!r->have_snapshot || !r->mask) return 0;
  uint32_t n = r->mesh->vertex_count;
  if (m->buffer && m->serial == r->mask_serial && m->count == n) return 0;
  if (!m->buffer) glGenBuffers(1, &m->buffer);
  glBindBuffer(GL_ARRAY_BUFFER, m->buffer);
  glBufferData(GL_ARRAY_BUFFER, (GLsizeiptr)(sizeof(float) * (n ? n : 1)), n ? r->mask : NULL, GL_DYNAMIC_DRAW);
  glBindBuffer(GL_ARRAY_BUFFER, 0);
  m->count = n;
  m->serial = r->mask_serial;
  return vw__gl_check("uploading the mask", err, errlen);
}

unsigned int vw_mask_buffer(const vw_mask *m) { return m->count ? m->buffer : 0; }

void vw_mask_free(vw_mask *m) {
  if (m->buffer) glDeleteBuffers(1, &m->buffer);
  memset(m, 0, sizeof(*m));
}

uint32_t vw_mask_stroke(vw_net *n, const proto_brush_sample *path, uint32_t count, int erase) {
  if (count == 0) return 0;
  float *s = malloc(sizeof(float) * 5 * count);
  if (!s) return 0;
  for (uint32_t i = 0; i < count; i++) {
    memcpy(s + 5 * (size_t)i, path[i].center, sizeof(float) * 3);
    s[5 * (size_t)i + 3] = path[i].radius;
    s[5 * (size_t)i + 4] = 1.0f;
  }
  proto_mask_edit e = {.op = PROTO_MASK_STROKE, .tool = erase ? 1 : 0, .count = count};
  uint32_t id = vw_net_mask(n, &e, s);
  free(s);
  return id;
}

uint32_t vw_mask_clear(vw_net *n) { return vw_net_mask(n, &(proto_mask_edit){.op = PROTO_MASK_CLEAR}, NULL); }

uint32_t vw_mask_invert(vw_net *n) { return vw_net_mask(n, &(proto_mask_edit){.op = PROTO_MASK_INVERT}, NULL); }
