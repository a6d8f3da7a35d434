/*
 * srv_anim.c — a session's animation clips: built from its mesh when the session is created
 * (keyframe clips and glTF weight clips), joined by recordings, freed with the session.
 *
 * DOES NOT play, record or compress (srv_anim_play.c, srv_anim_compress.c) or touch the
 * session's state: the session itself calls srv_anim_init and srv_anim_fini.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "mesh.h"
#include "srv_anim.h"
#include "srv_session.h"

void srv_anim_q_unref(anim_q *q) {
  if (q && --q->refs == 0) free(q);
}

static void free_rec(rec_frame *r, uint32_t n) {
  for (uint32_t i = 0; r && i < n; i++) {
    free(r[i].weights);
    srv_anim_q_unref(r[i].offsets);
  }
  free(r);
}

void srv_anim_clip_free(srv_clip *c) {
  free(c->name);
  free_rec(c->rec, c->kind == CLIP_RECORDED ? c->frame_count : 0);
  free(c->rec_targets);
  free(c->frame_weights);
  free(c->frame_narrow);
  cJSON_Delete(c->report);
  free(c);
}

srv_clip *srv_anim_find_clip(const srv_anim *a, const char *name) {
  for (srv_clip *c = a->clips; c; c = c->next)
    if (strcmp(c->name, name) == 0) return c;
  return NULL;
}

void srv_anim_add_clip(srv_anim *a, srv_clip *c) {
  srv_clip **pp = &a->clips;
  while (*pp) pp = &(*pp)->next;
  *pp = c;
}

double srv_anim_clip_duration(const srv_clip *c) {
  if (c->kind == CLIP_WEIGHTS) return c->frame_count ? c->wclip->times[c->frame_count - 1] : 0.0;
  return c->fps > 0 ? c->frame_count / (double)c->fps : 0.0;
}

uint32_t srv_anim_clip_index(const srv_clip *c, double t) {
  if (c->frame_count == 0) return 0;
  if (c->kind == CLIP_WEIGHTS) {
    uint32_t k = 0;
    while (k + 1 < c->frame_count && c->wclip->times[k + 1] <= t) k++;
    return k;
  }
  double f = floor(t * c->fps);
  return f <= 0 ? 0 : f >= c->frame_count ? c->frame_count - 1 : (uint32_t)f;
}

double srv_anim_clip_time(const srv_clip *c, uint32_t frame) {
  return c->kind == CLIP_WEIGHTS ? c->wclip->times[frame] : frame / (double)c->fps;
}

int srv_anim_init(srv_session *s) {
  const mesh *m = s->mesh;
  srv_anim *a = calloc(1, sizeof(*a));
  if (!a) return MESH_ENOMEM;
  a->speed = 1.0;
  a->loop = 1;
  a->cur.shown = a->next.shown = -1;
  s->anim = a;
  for (uint32_t i = 0; i < m->clip_count; i++) {
    const mesh_clip *mc = &m->clips[i];
    srv_clip *c = calloc(1, sizeof(*c));
    if (!c || !(c->name = strdup(mc->name))) {
      free(c);
      return MESH_ENOMEM;
    }
    if (mc->key_count) {
      c->kind = CLIP_WEIGHTS;
      c->frame_count = mc->key_count;
      c->wclip = mc;
      c->wclip_targets = mc->target_count; /* its keys cover the targets it was imported with */
    } else {
      c->kind = CLIP_KEYFRAMES;
      c->fps = mc->fps > 0 ? mc->fps : 10.0f;
      c->frame_count = mc->frame_count;
      c->loop_frames = mc->loop_frames;
      c->play_once = mc->play_once;
      c->frames = m->frames + 3 * (size_t)m->vertex_count * mc->first_frame;
    }
    srv_anim_add_clip(a, c);
  }
  return 0;
}

void srv_anim_fini(srv_session *s) {
  srv_anim *a = s->anim;
  if (!a) return;
  for (srv_clip *c = a->clips, *next; c; c = next) {
    next = c->next;
    srv_anim_clip_free(c);
  }
  free(a->rec_name);
  free_rec(a->rec, a->rec_count);
  srv_anim_q_unref(a->rec_q);
  free(a);
  s->anim = NULL;
}


