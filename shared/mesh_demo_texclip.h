/*
 * mesh_demo_texclip.h — the demo head's animated texture clip (mesh_demo_texclip.c): blush that
 * follows its smile and wrinkles that follow its frown, made procedurally in its UVs.
 *
 * DOES NOT compress (server/solve/texpca.h) or draw anything.
 */
#ifndef DEFORMD_MESH_DEMO_TEXCLIP_H
#define DEFORMD_MESH_DEMO_TEXCLIP_H

#include <stdint.h>

#include "mesh_core.h"
#include "mesh_texpca.h"

#ifdef __cplusplus
extern "C" {
#endif

/* F frames of width × height RGB texels in [0, 1] (F × H × W × 3 floats, row 0 = v 1) for the
 * head `head` (its bounds place the features; mesh_demo_head's UVs), frame f showing smile[f]
 * and frown[f] (each 0 .. 1, the smile_L/R and frown_L/R weights). rects[0] gets the cheeks'
 * window and rects[1] the brow's: everything that moves lies in them. Returns 0, MESH_EINVAL
 * (a side outside 8 .. 2048, no frames, a flat head) or MESH_ENOMEM; *frames_out is the
 * caller's (free). */
int mesh_demo_texclip(const mesh *head, uint32_t width, uint32_t height, const float *smile,
                      const float *frown, uint32_t frame_count, float **frames_out,
                      mesh_texclip_rect rects[2]);

#ifdef __cplusplus
}
#endif

#endif /* DEFORMD_MESH_DEMO_TEXCLIP_H */
