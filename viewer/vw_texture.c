/*
 * vw_texture.c — a session's materials and images uploaded for the draw pass (vw_texture.h).
 *
 * Images are RGBA8 with row 0 the top (as the replica holds them) and go up as they are, as
 * GL_SRGB8_ALPHA8: the sampler then returns linear colour, which the lighting works in before
 * its gamma (vw_shaders.c); the fragment shader samples at (u, 1 − v), so the top row lands at
 * v = 1 as assimp's UVs (OpenGL's convention) expect. Mipmaps and trilinear filtering keep a
 * texture seen small from shimmering. They are uploaded once per join: TEXTURE frames never come
 * again on a connection (docs/protocol.md §17).
 *
 * DOES NOT decode frames or draw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_gl.h"
#include "vw_texture.h"

static unsigned int upload_image(const mesh_image *im) {
  GLuint id = 0;
  glGenTextures(1, &id);
  glBindTexture(GL_TEXTURE_2D, id);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_SRGB8_ALPHA8, (GLsizei)im->width, (GLsizei)im->height, 0, GL_RGBA,
               GL_UNSIGNED_BYTE, im->rgba);
  glGenerateMipmap(GL_TEXTURE_2D);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR_MIPMAP_LINEAR);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_REPEAT);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_REPEAT);
  glBindTexture(GL_TEXTURE_2D, 0);
  return id;
}

/* The draw ranges from the replica's submeshes, each pointing at its image's GL texture. */
static int build_draws(vw_textures *t, const mesh *m) {
  free(t->draws);
  t->draws = calloc((size_t)m->submesh_count + 1, sizeof(*t->draws));
  t->draw_count = 0;
  if (!t->draws) return VW_ENOMEM;
  for (uint32_t i = 0; i < m->submesh_count; i++) {
    const mesh_submesh *s = &m->submeshes[i];
    vw_material *d = &t->draws[t->draw_count++];
    d->first_triangle = s->first_triangle;
    d->triangle_count = s->triangle_count;
    d->has_color = s->has_color;
    memcpy(d->color, s->base_color, sizeof(d->color));
    d->texture = s->texture && s->texture <= t->image_count && t->uv_buffer ? t->images[s->texture - 1] : 0;
  }
  return 0;
}

int vw_textures_sync(vw_textures *t, const client_replica *r, char *err, size_t errlen) {
  if (!r->have_snapshot) return 0;
  const mesh *m = r->mesh;
  if (!t->uploaded_uvs) {
    t->uploaded_uvs = 1;
    if (m->uvs) {
      glGenBuffers(1, &t->uv_buffer);
      glBindBuffer(GL_ARRAY_BUFFER, t->uv_buffer);
      glBufferData(GL_ARRAY_BUFFER, (GLsizeiptr)(8 * (size_t)m->vertex_count), m->uvs, GL_STATIC_DRAW);
      glBindBuffer(GL_ARRAY_BUFFER, 0);
    }
  }
  if (t->serial == r->texture_serial) return 0;
  t->serial = r->texture_serial;
  if (t->image_count != m->image_count) { /* MATERIALS: the slots, once per join */
    free(t->images);
    t->images = calloc((size_t)m->image_count + 1, sizeof(*t->images));
    if (!t->images) return VW_ENOMEM;
    t->image_count = m->image_count;
  }
  for (uint32_t i = 0; i < m->image_count; i++)
    if (!t->images[i] && m->images[i].rgba) t->images[i] = upload_image(&m->images[i]);
  int rc = build_draws(t, m);
  if (rc == 0) rc = vw__gl_check("uploading the textures", err, errlen);
  return rc;
}

void vw_textures_free(vw_textures *t) {
  if (t->uv_buffer) glDeleteBuffers(1, &t->uv_buffer);
  for (uint32_t i = 0; i < t->image_count; i++)
    if (t->images[i]) glDeleteTextures(1, &t->images[i]);
  free(t->images);
  free(t->draws);
  memset(t, 0, sizeof(*t));
}
