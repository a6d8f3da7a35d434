/*
 * vw_render.h — drawing: the morphed mesh (lit, normals from the GPU pass), an optional
 * wireframe overlay, markers, and a 2D overlay of text (stb_easy_font) and rectangles in pixels.
 *
 * DOES NOT morph or compute normals (vw_gpu.c does), read input, or own the window.
 * Every function needs the GL context current.
 */
#ifndef DEFORMD_VW_RENDER_H
#define DEFORMD_VW_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "vw_camera.h"
#include "vw_gpu.h"
#include "vw_texture.h"

typedef struct vw_render vw_render;

int vw_render_create(vw_render **out, char *err, size_t errlen);
void vw_render_destroy(vw_render *r);

/* Clears to the background and draws the mesh of `g` (may be NULL: background only). */
void vw_render_scene(vw_render *r, vw_gpu *g, const vw_camera *cam, int width, int height, int wireframe);
/* The author's mask to darken the mesh by: a GL buffer of one float per render vertex of the
 * mesh drawn (vw_mask.h), or 0 for none. Borrowed: the caller keeps it alive while set. */
void vw_render_set_mask(vw_render *r, unsigned int buffer);
/* The materials to draw with (vw_texture.h): UVs, images, submesh ranges and colours, or NULL
 * for the viewer's grey. Borrowed, like the mask. */
void vw_render_set_textures(vw_render *r, const vw_textures *t);
/* 1: base colour × texture as it is, without the lights (deform-view --unlit: what the texture
 * holds, and what pixel checks compare against). */
void vw_render_set_unlit(vw_render *r, int unlit);
/* Lit (the default), or a matcap of the view-space normal, the page's formula (viewer/README.md). */
enum { VW_SHADING_LIT = 0, VW_SHADING_CLAY, VW_SHADING_WAX, VW_SHADING_SKIN, VW_SHADING_COUNT };
void vw_render_set_shading(vw_render *r, int shading);
/* "lit", "clay", "wax", "skin" (NULL for another value), and back (-1 for another name). */
const char *vw_render_shading_name(int shading);
int vw_render_shading_parse(const char *name);
/* The texture clips shown (vw_texshow.h): `count` GL 2D textures (at most 4) whose sum replaces
 * the albedo of the textured submeshes; 0 for none. Borrowed, like the mask. */
void vw_render_set_texclips(vw_render *r, const unsigned int *textures, uint32_t count);
/* A 3D point marker (e.g. the picked vertex or the brush centre), `size` pixels, and a circle of
 * world radius `radius` around it facing the camera (0 for none). */
void vw_render_marker(vw_render *r, const vw_camera *cam, int width, int height, const float p[3], float radius,
                      const float rgba[4]);

/* 2D, queued and drawn by vw_render_flush_2d (y down, pixels). Text scale 1 = 7 px glyphs. */
void vw_render_rect(vw_render *r, float x, float y, float w, float h, const float rgba[4]);
void vw_render_text(vw_render *r, float x, float y, float scale, const float rgba[4], const char *text);
void vw_render_flush_2d(vw_render *r, int width, int height);

#endif
