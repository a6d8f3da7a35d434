/*
 * mesh_demo_texclip.h — the demo head's animated texture clip (mesh_demo_texclip.c): blush that
 * follows its smile and wrinkles that follow its frown, made procedurally in its UVs.
 *
 * Also the demo session's dressing (`deformd --demo`, srv_jobs.c): the skin as the head's material
 * image and the "smile-frown" weight clip the texture clip follows.
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

/* The demo session's dressing, in metres and seconds: "smile-frown" is MESH_DEMO_CLIP_KEYS keys
 * MESH_DEMO_CLIP_STEP s apart (4 s, looping: neutral, smile at 1 s, neutral at 2 s, frown at 3 s,
 * neutral again at 4 s, each a sin² ease), and the skin is MESH_DEMO_SKIN_W × MESH_DEMO_SKIN_H. */
#define MESH_DEMO_CLIP_KEYS 41u
#define MESH_DEMO_CLIP_STEP 0.1f
#define MESH_DEMO_SKIN_W 256u
#define MESH_DEMO_SKIN_H 128u

/* The smile and frown weights of "smile-frown"'s key k (each 0 .. 1). */
void mesh_demo_smile_frown(uint32_t k, float *smile, float *frown);

/* Dresses mesh_demo_head's head `head` for the demo session: its submesh 0 gets the skin
 * (mesh_demo_texclip's frame at smile 0 and frown 0, as RGBA8, opaque) as image "demo-skin.png",
 * and the head gets the weight clip "smile-frown" over its smile_L/R and frown_L/R targets.
 * Returns 0, MESH_EINVAL (no such targets, or dressed already) or MESH_ENOMEM (the head as it was). */
int mesh_demo_dress(mesh *head);

#ifdef __cplusplus
}
#endif

#endif /* DEFORMD_MESH_DEMO_TEXCLIP_H */
