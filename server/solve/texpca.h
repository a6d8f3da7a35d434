/*
 * texpca.h — animated texture PCA on the server: F frames of W × H RGB texels become the stored
 * clip of shared/mesh_texpca.h (a mean, K_r components per UV window packed into an RGBA8
 * texture array with a scale and offset each, and Σ K_r weights per frame).
 *
 * This module DOES:    split the texels by window (window 0 the whole texture, later windows
 *                      over earlier ones), run one PCA per window through pca_build (the same
 *                      LAPACK route as the vertex PCA: dsyevr on the F × F Gram matrix when
 *                      F <= 3 · texels, which a texture clip always is in practice), choose each
 *                      window's count from its own budget (a component count or an error bound),
 *                      and check the bound again on the quantised bytes as the viewers will read
 *                      them, adding a component while the stored clip misses it.
 * This module DOES NOT: decode images, stream, or know sessions and threads: texpca_build is
 *                      synchronous and takes a while (seconds for 256² × 60), so the server runs
 *                      it on its thread pool.
 *
 * Errors: 0 or a negative PCA_E* code (pca.h); `err` (may be NULL) gets a reason.
 * "Error" is the Euclidean RGB distance of a texel to its frame's texel, colours in [0, 1]
 * (1/255 is one step of one channel of an 8-bit image).
 */
#ifndef DEFORMD_TEXPCA_H
#define DEFORMD_TEXPCA_H

#include <stddef.h>
#include <stdint.h>

#include "mesh_texpca.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One window's budget: components > 0 keeps that many (clamped to the window's rank), else the
 * fewest whose largest texel error over all frames, stored, is <= max_error (> 0). */
typedef struct texpca_budget {
  uint32_t components;
  double max_error;
} texpca_budget;

/* What texpca_build reports per window (index 0 = the whole texture minus the others). */
typedef struct texpca_window_report {
  uint32_t texels;      /* texels the window owns */
  uint32_t rank;        /* numerical rank of its centred frames */
  uint32_t components;  /* kept */
  double max_error, rms_error; /* of the stored clip, over its texels and all frames */
  int budget_met;       /* max_error <= its bound (1 when a count was asked) */
} texpca_window_report;

typedef struct texpca_report {
  texpca_window_report windows[MESH_TEXCLIP_MAX_WINDOWS];
  double max_error, rms_error; /* over the whole texture */
  int budget_met;              /* every window met its bound */
  double build_ms;
} texpca_report;

/* Compresses `frames` (F × H × W × 3 floats in [0, 1], row 0 first, not kept) into *out: window
 * 0 is the whole texture with budget[0], rects[i] is window i + 1 with budget[i + 1]. When the
 * counts that meet the budgets would pass MESH_TEXCLIP_MAX_COMPONENTS or the layer limit, fails
 * with PCA_EINVAL and says which. Returns 0, PCA_EINVAL, PCA_ENONFINITE, PCA_ENOMEM,
 * PCA_ELAPACK or PCA_ETOOBIG; on success the caller frees *out with mesh_texclip_fini(); on
 * failure *out is zeroed. `report` may be NULL. */
int texpca_build(const float *frames, uint32_t frame_count, uint32_t width, uint32_t height,
                 const mesh_texclip_rect *rects, uint32_t rect_count, const texpca_budget *budget,
                 mesh_texclip *out, texpca_report *report, char *err, size_t errlen);

/* Appends the TEXCLIP frame of `c` (docs/protocol.md §18: RGB texels, the tables) with `id`, `name`
 * and `fps` to b. Returns 0, PROTO_EINVAL (a name over 255 bytes, a layout the frame cannot carry)
 * or PROTO_ENOMEM. */
struct proto_buf;
int texpca_encode_texclip(const mesh_texclip *c, uint32_t id, const char *name, float fps, struct proto_buf *b);

#ifdef __cplusplus
}
#endif

#endif /* DEFORMD_TEXPCA_H */
