/*
 * vw_texshow.h — the texture clips a session shows, drawn on the mesh (docs/protocol.md §18):
 * the replica's TEXCLIP frames uploaded as vw_texclip objects, and at each TEXWEIGHTS each listed
 * clip's frame rebuilt into its own texture; the draw pass (vw_render_set_texclips) samples them
 * at the mesh's UVs and sums them (a crossfade's two clips, weighted in weight space by the
 * server) as the textured submeshes' albedo.
 *
 * DOES NOT decode frames (client_texclip.c), rebuild texels itself (vw_texclip.c) or draw the
 * mesh (vw_render.c).
 */
#ifndef DEFORMD_VW_TEXSHOW_H
#define DEFORMD_VW_TEXSHOW_H

#include <stddef.h>
#include <stdint.h>

#include "client_replica.h"
#include "vw_texclip.h"

typedef struct vw_texshow {
  vw_texclip *clips;       /* clip_count, in the replica's order */
  uint32_t *ids;           /* the session's ids of those clips */
  uint32_t clip_count;
  uint32_t clip_serial, weights_serial; /* the replica's serials they hold */
  unsigned int shown[PROTO_TEXWEIGHTS_MAX_CLIPS]; /* GL 2D textures of the clips shown now */
  uint32_t shown_count;
} vw_texshow;

/* Uploads the clips that arrived and rebuilds the frames the latest TEXWEIGHTS names (an entry
 * of an unknown clip, or whose weight count is not the clip's, is skipped). Needs the replica's
 * lock and the GL context. Returns 0 or a VW_E* code with a reason. */
int vw_texshow_sync(vw_texshow *s, const client_replica *r, char *err, size_t errlen);
/* Frees every GL object (a new SNAPSHOT: the clips come again). A zeroed one is allowed. */
void vw_texshow_free(vw_texshow *s);

#endif
