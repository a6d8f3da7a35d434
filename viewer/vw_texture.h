/*
 * vw_texture.h — a session's materials in deform-view: what the server's TEXTURE frames
 * (capability "texture", docs/protocol.md §17) leave in the replica, uploaded once per join — a
 * UV buffer (vertex attribute 2), one 2D texture per image (sRGB, mipmapped) and a draw range
 * per submesh with its base colour — for the draw pass (vw_render_set_textures).
 *
 * DOES NOT decode frames (client_texture.c) or draw (vw_render.c).
 */
#ifndef DEFORMD_VW_TEXTURE_H
#define DEFORMD_VW_TEXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "client_replica.h"

/* One submesh as the draw pass takes it. */
typedef struct vw_material {
  uint32_t first_triangle, triangle_count;
  int has_color;         /* 0: the viewer's own grey */
  float color[4];        /* the base colour (linear), when has_color */
  unsigned int texture;  /* GL 2D texture name, 0: none */
} vw_material;

typedef struct vw_textures {
  unsigned int uv_buffer;   /* 2 floats per render vertex; 0: the mesh has no UVs */
  unsigned int *images;     /* image_count GL texture names (0: not arrived yet) */
  uint32_t image_count;
  vw_material *draws;       /* draw_count submeshes; none: the mesh is drawn in one grey call */
  uint32_t draw_count;
  uint32_t serial;          /* the replica's texture_serial it holds */
  int uploaded_uvs;
} vw_textures;

/* Uploads what arrived since the last call (UVs once per join, materials and images as their
 * frames come). Needs the replica's lock and the GL context. Returns 0 or VW_EGL / VW_ENOMEM with
 * a reason. */
int vw_textures_sync(vw_textures *t, const client_replica *r, char *err, size_t errlen);
/* Frees every GL object (a new SNAPSHOT: everything comes again). */
void vw_textures_free(vw_textures *t);

#endif
