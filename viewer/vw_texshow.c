/*
 * vw_texshow.c — texture clips shown on the mesh (see vw_texshow.h).
 *
 * A clip's frame is rebuilt once per TEXWEIGHTS (W·H·K fetches), not per drawn pixel; the mesh
 * pass then samples the rebuilt textures like a base-colour image. Each entry carries its mean's
 * weight (1, or a crossfade's share) and its weights already multiplied by it, so the sum of the
 * entries' textures is the crossfade.
 *
 * DOES NOT decode frames or draw the mesh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_texshow.h"

static void drop_clips(vw_texshow *s) {
  for (uint32_t i = 0; i < s->clip_count; i++) vw_texclip_free(&s->clips[i]);
  free(s->clips);
  free(s->ids);
  s->clips = NULL, s->ids = NULL, s->clip_count = s->shown_count = 0;
}

static int upload_clips(vw_texshow *s, const client_replica *r, char *err, size_t errlen) {
  drop_clips(s);
  if (r->texclip_count == 0) return 0;
  s->clips = calloc(r->texclip_count, sizeof(*s->clips));
  s->ids = calloc(r->texclip_count, sizeof(*s->ids));
  if (!s->clips || !s->ids) {
    snprintf(err, errlen, "texture clips: %s", vw_strerror(VW_ENOMEM));
    return VW_ENOMEM;
  }
  for (uint32_t i = 0; i < r->texclip_count; i++) {
    int rc = vw_texclip_make(&s->clips[i], &r->texclips[i].clip, err, errlen);
    if (rc) return rc;
    s->ids[i] = r->texclips[i].id;
    s->clip_count = i + 1;
  }
  return 0;
}

int vw_texshow_sync(vw_texshow *s, const client_replica *r, char *err, size_t errlen) {
  if (s->clip_serial == r->texclip_serial && s->weights_serial == r->texweights_serial) return 0;
  if (s->clip_serial != r->texclip_serial) {
    int rc = upload_clips(s, r, err, errlen);
    s->clip_serial = r->texclip_serial;
    if (rc) return rc;
  }
  s->weights_serial = r->texweights_serial;
  s->shown_count = 0;
  for (uint32_t e = 0; e < r->texweights_count; e++) {
    const proto_texweights_entry *w = &r->texweights[e];
    for (uint32_t i = 0; i < s->clip_count; i++) {
      if (s->ids[i] != w->id || w->count != s->clips[i].component_count) continue;
      vw_texclip_draw(&s->clips[i], w->weights, w->mean);
      s->shown[s->shown_count++] = s->clips[i].out;
      break;
    }
  }
  return vw__gl_check("rebuilding the texture clips", err, errlen);
}

void vw_texshow_free(vw_texshow *s) {
  drop_clips(s);
  memset(s, 0, sizeof(*s));
}
