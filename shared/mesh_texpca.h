/*
 * mesh_texpca.h — animated texture PCA (GPU Gems 3, ch. 15, "Playable Universal Capture"): the
 * stored form of a clip of per-frame RGB textures and its CPU reconstruction, the reference that
 * the viewers' fragment shaders are compared with.
 *
 * A clip is W × H texels and F frames. The texture is split into windows (UV rectangles in
 * texels); window 0 is the whole texture, and a texel belongs to the last window that contains
 * it ("variable PCA": the eyes and lips get windows of their own with more components). Window r
 * keeps K_r components; frame f carries Σ K_r weights, window 0's first. A texel of window r is
 *
 *     color = mean + Σ_{k of r} w_k · (offset_k + scale_k · t_k)          (RGB, in [0, 1])
 *
 * where t_k is the component's stored byte / 255 (the same affine map on R, G and B), read at the
 * texel's place in the component's tile. The result is clamped to [0, 1].
 *
 * Packed layout (the texture array both viewers upload, RGBA8, A = 255): layer 0 is the mean;
 * window 0's components are whole layers 1 .. K_0; the other windows' components are tiles of
 * their rectangle's size, packed on shelves (tallest first) into the layers after those, so a
 * small window with many components costs its own area per component, not the texture's.
 * Each component knows its layer and the tile's corner; the shader fetches texels with
 * texelFetch at (corner + texel - window corner), which never crosses into a neighbour tile.
 *
 * This module DOES:   the layout (windows → tiles → layers), quantising float components to
 *                     RGBA8 with a scale and offset each, reconstructing a texel or a frame from
 *                     the stored bytes, and measuring a reconstruction against the frames.
 * This module DOES NOT: decompose (server/solve/texpca.c runs the PCA on the server's thread pool
 *                     and fills a clip through mesh_texclip_pack), decode images, encode frames,
 *                     or know about GL; every function is synchronous and allocation-free except
 *                     where it says so.
 *
 * Errors: 0 or a negative MESH_E* code (mesh_core.h); `err` (may be NULL) gets a reason.
 */
#ifndef DEFORMD_MESH_TEXPCA_H
#define DEFORMD_MESH_TEXPCA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MESH_TEXCLIP_MAX_WINDOWS 16u    /* the viewers' shaders hold the window table in uniforms */
#define MESH_TEXCLIP_MAX_COMPONENTS 64u /* Σ K_r: the weights of one frame, also uniforms */
#define MESH_TEXCLIP_MAX_SIDE 2048u     /* W and H */
#define MESH_TEXCLIP_MAX_LAYERS 64u     /* the texture array's depth (GL 3.3 guarantees 256) */

typedef struct mesh_texclip_window {
  uint32_t x, y, w, h;       /* texel rectangle inside the texture; window 0 is 0, 0, W, H */
  uint32_t first, count;     /* its components: comps[first .. first + count) */
} mesh_texclip_window;

typedef struct mesh_texclip_comp {
  uint32_t layer;            /* 1 .. layers - 1 (layer 0 is the mean) */
  uint32_t x, y;             /* the tile's corner in that layer; the tile has its window's size */
  float scale, offset;       /* value = offset + scale · byte / 255 */
} mesh_texclip_comp;

/* A stored clip. Owned arrays, freed by mesh_texclip_fini(). */
typedef struct mesh_texclip {
  uint32_t width, height, frame_count;
  uint32_t window_count;       /* 1 .. MESH_TEXCLIP_MAX_WINDOWS */
  mesh_texclip_window *windows;
  uint32_t component_count;    /* Σ K_r */
  mesh_texclip_comp *comps;    /* component_count, window 0's first */
  uint32_t layers;             /* 1 + the component layers */
  uint8_t *texels;             /* layers × H × W × 4 (RGBA8, row 0 = texel row 0, A = 255) */
  float *weights;              /* frame_count × component_count */
} mesh_texclip;

/* Window rectangles as asked for (window 0, the whole texture, is implicit and not listed). */
typedef struct mesh_texclip_rect {
  uint32_t x, y, w, h;
} mesh_texclip_rect;

/* Which window owns each texel: owner[y·W + x] (W·H bytes, caller's buffer): the last of
 * rects[0 .. n) containing it, numbered from 1, else 0. Returns 0 or MESH_EINVAL (a rectangle
 * empty or outside W × H, too many). */
int mesh_texclip_owners(uint32_t width, uint32_t height, const mesh_texclip_rect *rects,
                        uint32_t n, uint8_t *owner, char *err, size_t errlen);

/* Lays out a clip: sets width, height, frame_count, the windows (rects[i] becomes window i + 1)
 * with count[r] components each, and places every component's tile (layer and corner; scale 1,
 * offset 0); allocates comps, windows, zeroed texels and weights. Returns 0, MESH_EINVAL (too many
 * components or layers, bad rectangles) or MESH_ENOMEM; on success free with mesh_texclip_fini,
 * on failure *c is zeroed. */
int mesh_texclip_layout(mesh_texclip *c, uint32_t width, uint32_t height, uint32_t frame_count,
                        const mesh_texclip_rect *rects, uint32_t rect_count, const uint32_t *count,
                        char *err, size_t errlen);

/* Stores the mean (W·H RGB floats, [0, 1], rounded to bytes). */
void mesh_texclip_set_mean(mesh_texclip *c, const float *mean_rgb);

/* Stores component `k` of window `r`: `values` are its RGB floats over the window's rectangle
 * (w·h·3, row by row; texels the window does not own may hold anything, they are never read),
 * quantised to bytes with the scale and offset that span their range; `weights` are its F
 * per-frame weights. */
void mesh_texclip_set_component(mesh_texclip *c, uint32_t r, uint32_t k, const float *values,
                                const float *weights);

/* Frees what the clip owns and zeroes it; a zeroed clip is allowed. */
void mesh_texclip_fini(mesh_texclip *c);

/* The window owning texel (x, y): the last containing it (windows 1 ..), else 0. */
uint32_t mesh_texclip_owner(const mesh_texclip *c, uint32_t x, uint32_t y);

/* One texel of the frame whose weights are `w` (component_count floats): rgb[3] in [0, 1],
 * computed in double from the stored bytes, then clamped — the shader's formula. */
void mesh_texclip_texel(const mesh_texclip *c, const float *w, uint32_t x, uint32_t y,
                        float rgb[3]);

/* The whole frame as RGB8 (W·H·3 bytes, caller's buffer), rounding the texels to bytes. */
void mesh_texclip_frame_rgb8(const mesh_texclip *c, const float *w, uint8_t *out);

/* The error of the stored clip against the frames (F × W·H·3 floats in [0, 1]): the largest and
 * the RMS Euclidean RGB distance per texel, over window `r`'s texels only (r < window_count) or
 * over all (r == UINT32_MAX). Either output may be NULL. */
void mesh_texclip_error(const mesh_texclip *c, const float *frames, uint32_t r, double *max,
                        double *rms);

/* Bytes the clip costs: `once` for the texture array (layers × W × H × 4) and the tables,
 * `per_frame` for one weights frame's payload (component_count float32). */
void mesh_texclip_bytes(const mesh_texclip *c, size_t *once, size_t *per_frame);

#ifdef __cplusplus
}
#endif

#endif /* DEFORMD_MESH_TEXPCA_H */
