/*
 * pca_stream.h — how a compressed clip goes on the wire, and the error a viewer then sees.
 *
 * A viewer rebuilds frame f as mean + Σ_k w'_fk · d_k. deformd streams the components scaled:
 * d_k = s_k · basis_k and w'_fk = w_fk / s_k with s_k = max_f |w_fk| (1 when every w_fk is 0), so
 * every streamed weight lies in [-1, 1] (what the targets' sliders show) and each component uses
 * the whole quantisation range. Each frame's K weights then go out as one quantised run
 * (docs/protocol.md §4.1): 8-bit (QRUN8, 31 + K bytes) when the frame rebuilt from those weights
 * stays within the clip's error budget, else 16-bit (QRUN, 31 + 2K bytes).
 *
 * This module DOES:     scale a pca_model into that layout (per region, scattered into the whole
 *                       mesh), choose the width of every frame by measuring the frame a viewer
 *                       rebuilds, and quantise a frame's weights the one way both the choice and
 *                       playback use.
 * This module DOES NOT: decompose (pca.h), encode frames or know about sessions (the server).
 * pca_stream_choose is O(F · K · 3V), spread over dfm_pool's threads by frame, and runs on the
 * server's thread pool; the others are cheap.
 */
#ifndef DEFORMD_PCA_STREAM_H
#define DEFORMD_PCA_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "pca.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the model's components as rows k0 .. k0+K-1 of `deltas` (k_total rows of
 * 3·mesh_vertices floats; this function writes the model's vertices only, so the caller zeroes
 * the rows first when the model covers a region) and their weights as columns k0 .. k0+K-1 of
 * `fw` (frame_count rows of k_total). `verts` maps the model's vertex i to mesh vertex verts[i];
 * NULL when the model covers every vertex in order. */
void pca_stream_scale(const pca_model *m, const uint32_t *verts, uint32_t mesh_vertices, uint32_t k0,
                      uint32_t k_total, float *deltas, float *fw);

/* Quantises one frame's K weights as they are streamed: proto_quantize_weights8 when `narrow`
 * (q within -127..127), else proto_quantize_weights. The weights a viewer gets are
 * proto_qweight(q[k], *scale). Returns 0, PROTO_ENONFINITE or PROTO_ENOMEM (K > 256, narrow). */
int pca_stream_quantize(const float *w, uint32_t K, int narrow, int16_t *q, float *scale);

typedef struct pca_stream_result {
  double max_error;        /* the largest vertex error of any streamed frame (positions' units) */
  double rms_error;        /* RMS vertex error over all frames and vertices */
  uint32_t narrow_frames;  /* frames sent 8-bit */
  double bytes_per_frame;  /* mean WEIGHTS frame size over the clip (proto_weights_qrun_size) */
  size_t bytes_max;        /* the largest */
} pca_stream_result;

/* For every frame f of `frames` (F × 3V floats, the clip as it should look): quantise row f of
 * `fw` 8-bit, rebuild mean + Σ_k proto_qweight(q_k, scale) · deltas_k in double and measure the
 * largest vertex error; if allow_narrow and it is <= budget, narrow[f] = 1; otherwise
 * narrow[f] = 0 and the frame is measured again with 16-bit weights. `out` gets the errors of
 * what is streamed. Returns 0 or PCA_ENOMEM (nothing written to `out`). */
int pca_stream_choose(const float *frames, uint32_t F, uint32_t V, const float *mean, const float *deltas,
                      const float *fw, uint32_t K, double budget, int allow_narrow, uint8_t *narrow,
                      pca_stream_result *out);

#ifdef __cplusplus
}
#endif

#endif
