/*
 * vw_texclip.h — an animated texture clip on the GPU (texture PCA, docs/protocol.md §18): the
 * stored clip's mean and component tiles in one GL_TEXTURE_2D_ARRAY (RGBA8), and a fragment
 * pass that rebuilds the frame a TEXWEIGHTS frame names into an RGBA8 texture of the clip's
 * size, which the mesh pass samples like any base-colour texture.
 *
 * Rebuilding once per weights change into a texture (not per mesh fragment) costs W·H·K
 * fetches per change instead of per drawn pixel, and leaves filtering and mipmaps to the mesh's
 * own sampler. shared/mesh_texpca.h is the reference the test compares against (within 1/255).
 *
 * DOES NOT decode frames (vw_net.c / protocol/proto_texclip.c) or draw meshes (vw_render.c
 * binds `out`).
 */
#ifndef DEFORMD_VW_TEXCLIP_H
#define DEFORMD_VW_TEXCLIP_H

#include <stddef.h>
#include <stdint.h>

#include "mesh_texpca.h"
#include "vw_gl.h"

typedef struct vw_texclip {
  GLuint array;     /* GL_TEXTURE_2D_ARRAY, layers × H × W RGBA8 */
  GLuint out;       /* GL_TEXTURE_2D, H × W RGBA8: the frame rebuilt last */
  GLuint fbo, vao;
  vw__gl_program prog;
  uint32_t width, height, window_count, component_count;
  int rect[MESH_TEXCLIP_MAX_WINDOWS][4];
  int range[MESH_TEXCLIP_MAX_WINDOWS][2];
  int tile[MESH_TEXCLIP_MAX_COMPONENTS][3];
  float scale[MESH_TEXCLIP_MAX_COMPONENTS], offset[MESH_TEXCLIP_MAX_COMPONENTS];
  GLint u_tex, u_windows, u_rect, u_range, u_tile, u_a, u_b, u_mean;
} vw_texclip;

/* Uploads clip `c` (its texels, windows and components; the weights are not kept). Returns 0
 * or VW_EGL / VW_ESHADER / VW_ETOOBIG with a reason; *t is zeroed on failure. Needs a current
 * GL 3.3 context; free with vw_texclip_free. */
int vw_texclip_make(vw_texclip *t, const mesh_texclip *c, char *err, size_t errlen);

/* Rebuilds the frame of `weights` (component_count floats) with the mean weighted by `mean`
 * (1, or a crossfade's share) into t->out. Restores the framebuffer and viewport it found. */
void vw_texclip_draw(vw_texclip *t, const float *weights, float mean);

/* Frees the GL objects; a zeroed clip is allowed. */
void vw_texclip_free(vw_texclip *t);

#endif
