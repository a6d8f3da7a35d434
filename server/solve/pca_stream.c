/*
 * pca_stream.c — the streamed layout of a compressed clip and the choice of 8- or 16-bit weights
 * per frame (see pca_stream.h).
 */
#include "pca_stream.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dfm.h"
#include "proto.h"

void pca_stream_scale(const pca_model *m, const uint32_t *verts, uint32_t mesh_vertices, uint32_t k0,
                      uint32_t k_total, float *deltas, float *fw) {
  uint32_t K = m->components, F = m->frame_count, nv = m->vertex_count;
  size_t n3 = 3 * (size_t)mesh_vertices;
  for (uint32_t k = 0; k < K; k++) {
    double big = 0;
    for (uint32_t f = 0; f < F; f++) big = fmax(big, fabs(m->weights[(size_t)f * K + k]));
    if (!(big > 0)) big = 1;
    float *dk = deltas + n3 * (k0 + k);
    const float *bk = m->basis + (size_t)k * 3 * nv;
    for (uint32_t i = 0; i < nv; i++) {
      size_t v = verts ? verts[i] : i;
      for (int d = 0; d < 3; d++) dk[3 * v + d] = (float)(bk[3 * (size_t)i + d] * big);
    }
    for (uint32_t f = 0; f < F; f++) fw[(size_t)f * k_total + k0 + k] = (float)(m->weights[(size_t)f * K + k] / big);
  }
}

int pca_stream_quantize(const float *w, uint32_t K, int narrow, int16_t *q, float *scale) {
  if (!narrow) return proto_quantize_weights(w, K, q, scale);
  int8_t q8[256];
  int8_t *buf = K <= 256 ? q8 : malloc(K);
  if (!buf) return PROTO_ENOMEM;
  int rc = proto_quantize_weights8(w, K, buf, scale);
  for (uint32_t k = 0; rc == 0 && k < K; k++) q[k] = buf[k];
  if (buf != q8) free(buf);
  return rc;
}

/* The largest squared vertex error and the summed squared error of one frame rebuilt from
 * quantised weights; acc is 3V doubles of scratch. */
static void frame_error(const float *frame, uint32_t V, const float *mean, const float *deltas, uint32_t K,
                        const int16_t *q, float scale, double *acc, double *max2, double *sum2) {
  size_t n3 = 3 * (size_t)V;
  for (size_t i = 0; i < n3; i++) acc[i] = mean[i];
  for (uint32_t k = 0; k < K; k++) {
    double w = proto_qweight(q[k], scale);
    if (w == 0) continue;
    const float *dk = deltas + n3 * k;
    for (size_t i = 0; i < n3; i++) acc[i] += w * dk[i];
  }
  double m2 = 0, s2 = 0;
  for (uint32_t v = 0; v < V; v++) {
    double e2 = 0;
    for (int d = 0; d < 3; d++) {
      double e = acc[3 * (size_t)v + d] - frame[3 * (size_t)v + d];
      e2 += e * e;
    }
    s2 += e2;
    if (e2 > m2) m2 = e2;
  }
  *max2 = m2;
  *sum2 = s2;
}

/* Frames are independent: they are spread over dfm_pool's threads, each with its own buffers,
 * and each frame's squared errors kept so that the sums are added in frame order (the same
 * result on any number of threads). */
typedef struct choose_job {
  const float *frames, *mean, *deltas, *fw;
  uint32_t V, K;
  double budget;
  int allow_narrow;
  uint8_t *narrow;
  double *max2, *sum2; /* per frame */
  atomic_int failed;   /* a thread could not get its buffers */
} choose_job;

static void choose_range(void *ctx, size_t lo, size_t hi) {
  choose_job *j = ctx;
  size_t n3 = 3 * (size_t)j->V;
  uint32_t K = j->K;
  int16_t *q = malloc(sizeof(int16_t) * (K + 1));
  double *acc = malloc(sizeof(double) * (n3 + 1));
  if (!q || !acc) {
    free(q);
    free(acc);
    atomic_store(&j->failed, 1);
    return;
  }
  for (size_t f = lo; f < hi; f++) {
    const float *fr = j->frames + n3 * f;
    float scale;
    double m2 = 0, s2 = 0;
    int use8 = 0;
    if (j->allow_narrow && pca_stream_quantize(j->fw + f * K, K, 1, q, &scale) == 0) {
      frame_error(fr, j->V, j->mean, j->deltas, K, q, scale, acc, &m2, &s2);
      use8 = sqrt(m2) <= j->budget;
    }
    if (!use8) {
      pca_stream_quantize(j->fw + f * K, K, 0, q, &scale);
      frame_error(fr, j->V, j->mean, j->deltas, K, q, scale, acc, &m2, &s2);
    }
    j->narrow[f] = (uint8_t)use8;
    j->max2[f] = m2;
    j->sum2[f] = s2;
  }
  free(q);
  free(acc);
}

int pca_stream_choose(const float *frames, uint32_t F, uint32_t V, const float *mean, const float *deltas,
                      const float *fw, uint32_t K, double budget, int allow_narrow, uint8_t *narrow,
                      pca_stream_result *out) {
  double *max2 = malloc(sizeof(double) * ((size_t)F + 1)), *sum2 = malloc(sizeof(double) * ((size_t)F + 1));
  if (!max2 || !sum2) {
    free(max2);
    free(sum2);
    return PCA_ENOMEM;
  }
  choose_job job = {frames, mean, deltas, fw, V, K, budget, allow_narrow, narrow, max2, sum2, 0};
  dfm_parallel_for(F, 1, choose_range, &job);
  if (atomic_load(&job.failed)) {
    free(max2);
    free(sum2);
    return PCA_ENOMEM;
  }
  pca_stream_result r = {0, 0, 0, 0, 0};
  double total2 = 0, worst2 = 0, bytes = 0;
  for (uint32_t f = 0; f < F; f++) {
    r.narrow_frames += narrow[f];
    total2 += sum2[f];
    if (max2[f] > worst2) worst2 = max2[f];
    size_t b = proto_weights_qrun_size(K, narrow[f]);
    bytes += (double)b;
    if (b > r.bytes_max) r.bytes_max = b;
  }
  r.max_error = sqrt(worst2);
  r.rms_error = F && V ? sqrt(total2 / ((double)F * V)) : 0;
  r.bytes_per_frame = F ? bytes / F : 0;
  *out = r;
  free(max2);
  free(sum2);
  return 0;
}
