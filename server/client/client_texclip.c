/*
 * client_texclip.c — TEXCLIP and TEXWEIGHTS frames into a replica (docs/protocol.md §18): each
 * TEXCLIP becomes a mesh_texclip (shared/mesh_texpca.h, RGB8 texels widened to RGBA8 with
 * A = 255, as both viewers upload them), replacing a clip of the same id; each TEXWEIGHTS
 * replaces what shows (absolute, invariant 1). The rebuilt texel of a replica's clip is then
 * mesh_texclip_texel's, the reference the viewers' shaders are compared against.
 *
 * DOES NOT draw or upload anything (viewer/vw_texshow.c does, from the replica).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_replica.h"

void client__replica_texclips_free(client_replica *r) {
  for (uint32_t i = 0; i < r->texclip_count; i++) mesh_texclip_fini(&r->texclips[i].clip);
  free(r->texclips);
  r->texclips = NULL, r->texclip_count = 0;
}

const mesh_texclip *client_replica_texclip(const client_replica *r, uint32_t id) {
  for (uint32_t i = 0; i < r->texclip_count; i++)
    if (r->texclips[i].id == id) return &r->texclips[i].clip;
  return NULL;
}

/* The decoded frame as a stored clip (owned arrays). */
static int to_clip(const proto_texclip *p, mesh_texclip *c) {
  memset(c, 0, sizeof(*c));
  size_t texels = (size_t)p->width * p->height * p->layers;
  c->windows = calloc(p->window_count, sizeof(*c->windows));
  c->comps = calloc((size_t)p->component_count + 1, sizeof(*c->comps));
  c->texels = malloc(4 * texels);
  if (!c->windows || !c->comps || !c->texels) {
    mesh_texclip_fini(c);
    return PROTO_ENOMEM;
  }
  c->width = p->width, c->height = p->height, c->frame_count = p->frame_count;
  c->window_count = p->window_count, c->component_count = p->component_count, c->layers = p->layers;
  for (uint32_t i = 0; i < p->window_count; i++) {
    const proto_texclip_window *w = &p->windows[i];
    c->windows[i] = (mesh_texclip_window){w->x, w->y, w->w, w->h, w->first, w->count};
  }
  for (uint32_t k = 0; k < p->component_count; k++) {
    const proto_texclip_comp *q = &p->comps[k];
    c->comps[k] = (mesh_texclip_comp){q->layer, q->x, q->y, q->scale, q->offset};
  }
  for (size_t i = 0; i < texels; i++) {
    memcpy(c->texels + 4 * i, p->texels + 3 * i, 3);
    c->texels[4 * i + 3] = 255;
  }
  return 0;
}

static int take_clip(client_replica *r, const uint8_t *p, size_t n, char *err, size_t errlen) {
  proto_texclip_window windows[PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp comps[PROTO_TEXCLIP_MAX_COMPONENTS];
  proto_texclip pc = {.windows = windows, .comps = comps};
  int rc = proto_decode_texclip(p, n, &pc);
  mesh_texclip c;
  if (rc == 0) rc = to_clip(&pc, &c);
  if (rc) {
    snprintf(err, errlen, "TEXCLIP: %s", proto_strerror(rc));
    return rc;
  }
  client_texclip *slot = NULL;
  for (uint32_t i = 0; i < r->texclip_count; i++)
    if (r->texclips[i].id == pc.id) slot = &r->texclips[i];
  if (!slot) {
    client_texclip *g = realloc(r->texclips, sizeof(*g) * (r->texclip_count + 1));
    if (!g) {
      mesh_texclip_fini(&c);
      snprintf(err, errlen, "TEXCLIP: out of memory");
      return PROTO_ENOMEM;
    }
    r->texclips = g;
    slot = &g[r->texclip_count++];
    memset(slot, 0, sizeof(*slot));
  }
  mesh_texclip_fini(&slot->clip);
  slot->id = pc.id, slot->clip = c;
  r->texclip_serial++;
  return 0;
}

int client__replica_texclip(client_replica *r, const proto_header *h, const uint8_t *p, char *err, size_t errlen) {
  if (h->type == PROTO_TEXCLIP) return take_clip(r, p, h->length, err, errlen);
  proto_texweights_entry e[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t count = 0;
  int rc = proto_decode_texweights(p, h->length, e, &count);
  if (rc) {
    snprintf(err, errlen, "TEXWEIGHTS: %s", proto_strerror(rc));
    return rc;
  }
  memcpy(r->texweights, e, sizeof(e[0]) * count);
  r->texweights_count = count;
  r->texweights_serial++;
  return 0;
}
