/*
 * vw_pick.h — picking on the GPU (issue 26): the vertex and the surface point under a pixel,
 * read back from an ID render target instead of casting a ray against every triangle on the CPU.
 *
 * A pick draws the morphed mesh (vw_gpu's buffers, as vw_render draws it) into a 1×1 framebuffer
 * through a projection narrowed to the pixel asked for (a pick matrix: the pixel's sliver of the
 * view fills the viewport), so the rasteriser's work is one pixel whatever the window: colour 0
 * (GL_R32UI) takes the triangle's index + 1 (gl_PrimitiveID: the index buffer's order), colour 1
 * (GL_RGBA32F) the interpolated position, depth the nearest. Reading back that pixel and the
 * triangle's three corners (glGetBufferSubData) gives the hit and its nearest corner: what
 * vw_edit_pick gives on the CPU, which stays the tests' oracle.
 *
 * Its two small shaders are here rather than in vw_shaders.c, so that the module is one file.
 *
 * DOES NOT read input or decide when to pick (vw_app.c does); needs the GL context current.
 */
#ifndef DEFORMD_VW_PICK_H
#define DEFORMD_VW_PICK_H

#include <stddef.h>
#include <stdint.h>

#include "vw_camera.h"
#include "vw_gpu.h"

typedef struct vw_pick vw_pick;

/* Returns 0, or a VW_E* code (vw_gl.h) with the reason in err. Destroy with vw_pick_destroy. */
int vw_pick_create(vw_pick **out, char *err, size_t errlen);
void vw_pick_destroy(vw_pick *p);

/* deform-view's choice (--pick): `choice` 2 the GPU, 1 the CPU (*out NULL: vw_edit_pick), 0 the
 * GPU unless `renderer` (GL_RENDERER) names a software rasteriser (llvmpipe, softpipe,
 * SwiftShader), where one pixel of IDs costs a whole draw's vertex work, more than the CPU's ray
 * (docs/performance.md). Returns 0, or vw_pick_create's error (*out NULL). */
int vw_pick_choose(const char *renderer, int choice, vw_pick **out, char *err, size_t errlen);

/* The surface under pixel (px, py) (y down, continuous coordinates as vw_camera_ray takes) of
 * a width × height view through camera c, on g's current shape (after vw_gpu_update).
 * `triangles` are g's render triangles (3 per triangle, as uploaded). Returns 1 with the hit
 * point, the triangle and its corner nearest the hit, 0 when the pixel shows no mesh, or a
 * negative VW_E* code. Leaves GL_FRAMEBUFFER bound to `restore_fb` and the viewport as
 * width × height. */
int vw_pick_at(vw_pick *p, vw_gpu *g, const vw_camera *c, int width, int height, float px, float py,
               const uint32_t *triangles, unsigned restore_fb, float hit[3], uint32_t *triangle, uint32_t *vertex,
               char *err, size_t errlen);

#endif
