/*
 * bench_blend.c — `deform-bench blend`: the blendshape solves and the PCA compression.
 *
 *   deform-bench blend [--targets T] [--pins P] [--drags D] [--frames F] [--vertices V]
 *                      [--max-error E] [--clips FILE...] [--json]
 *
 * Three measurements, each printed with the command line:
 *   solve  direct manipulation with T targets and P pins on an icosphere of about V vertices
 *          (random smooth bumps as targets): the pin factorisation once, then D drags, each one
 *          blend_pins_solve with the cached factor (time per drag p50 / p95 / max);
 *   pca    pca_build on F frames of V vertices (a synthetic animation: a few travelling waves
 *          plus a small per-frame wobble) to E times the bounding-box diagonal;
 *   clips  every clip of each MD2/MD3 FILE (default: Debian assimp-testmodels' faerie.md2 and
 *          sydney.md2), and "all" frames: components for E, the frames as deformd streams them
 *          (pca_stream.h: 8-bit weights where the rebuilt frame stays within E, else 16-bit),
 *          the error of what a viewer rebuilds from them, and the mean bytes of a streamed frame
 *          (20-byte header + quantised run: 11 + K or 11 + 2K) against raw float positions (12 V).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "blend.h"
#include "mesh.h"
#include "pca.h"
#include "pca_stream.h"
#include "proto.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The smallest icosphere with at least v vertices (levels up to 7). */
static mesh *sphere_for(uint32_t v) {
  uint32_t level = 0;
  while (level < 7 && 10u * (1u << (2 * level)) + 2 < v) level++;
  mesh *m = NULL;
  return mesh_demo_icosphere(level, 1.0, &m) == 0 ? m : NULL;
}

static int bench_solve_part(uint32_t T, uint32_t P, uint32_t D, uint32_t V, int json, const char *cmdline) {
  mesh *m = sphere_for(V);
  if (!m) return 1;
  uint32_t n = m->vertex_count;
  /* Targets: smooth bumps along the normal around random centres (radius ~0.6 rad). */
  float *dense = malloc(sizeof(float) * 3 * n);
  for (uint32_t t = 0; t < T; t++) {
    double c[3] = {urand() - 0.5, urand() - 0.5, urand() - 0.5}, cn = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
    for (int k = 0; k < 3; k++) c[k] /= cn;
    double amp = 0.05 + 0.1 * urand();
    for (uint32_t v = 0; v < n; v++) {
      const float *p = m->positions + 3 * (size_t)v;
      double d = acos(fmax(-1.0, fmin(1.0, p[0] * c[0] + p[1] * c[1] + p[2] * c[2])));
      double f = d < 0.6 ? amp * 0.5 * (1 + cos(M_PI * d / 0.6)) : 0.0;
      for (int k = 0; k < 3; k++) dense[3 * (size_t)v + k] = (float)(f * p[k]);
    }
    char name[32];
    snprintf(name, sizeof(name), "t%u", t);
    mesh_add_target_dense(m, name, dense, 0.0f);
  }
  free(dense);
  /* Pins: random vertices that some target moves. */
  uint32_t *pins = malloc(sizeof(uint32_t) * P);
  for (uint32_t i = 0; i < P; i++) {
    for (;;) {
      uint32_t v = (uint32_t)(urand() * n);
      int moved = 0;
      for (uint32_t t = 0; t < T && !moved; t++)
        for (uint32_t k = 0; k < m->targets[t].count && !moved; k++) moved = m->targets[t].indices[k] == v;
      if (moved) {
        pins[i] = v;
        break;
      }
    }
  }
  char err[512];
  blend_pins *bp = NULL;
  double t0 = now_ms();
  int rc = blend_pins_create(m, NULL, pins, P, 1e-3, &bp, err, sizeof(err));
  double create_ms = now_ms() - t0;
  if (rc) {
    fprintf(stderr, "deform-bench blend: %s\n", err);
    return 1;
  }
  uint32_t S = blend_pins_solved_count(bp);
  double *r = malloc(sizeof(double) * 3 * P), *w = malloc(sizeof(double) * S), *w0 = calloc(S, sizeof(double));
  double *lo = malloc(sizeof(double) * S), *hi = malloc(sizeof(double) * S), *us = malloc(sizeof(double) * D);
  for (uint32_t s = 0; s < S; s++) lo[s] = 0, hi[s] = 1;
  uint32_t bounded = 0;
  for (uint32_t d = 0; d < D; d++) {
    /* A drag: every pin pulled along its normal by a smoothly varying amount. */
    for (uint32_t i = 0; i < P; i++)
      for (int k = 0; k < 3; k++)
        r[3 * i + k] = 0.08 * sin(0.01 * d + i) * m->positions[3 * (size_t)pins[i] + k];
    blend_result res;
    if (blend_pins_solve(bp, r, w0, lo, hi, w, &res, err, sizeof(err)) != 0) {
      fprintf(stderr, "deform-bench blend: drag %u: %s\n", d, err);
      return 1;
    }
    us[d] = res.solve_us;
    bounded += res.active > 0;
    memcpy(w0, w, sizeof(double) * S);
  }
  qsort(us, D, sizeof(double), cmp_double);
  double p50 = us[D / 2], p95 = us[(size_t)(D * 0.95)], mx = us[D - 1];
  if (json)
    printf("{\"bench\":\"blend.solve\",\"command\":\"%s\",\"vertices\":%u,\"targets\":%u,\"pins\":%u,\"drags\":%u,"
           "\"factor_ms\":%.3f,\"solve_p50_us\":%.2f,\"solve_p95_us\":%.2f,\"solve_max_us\":%.2f,"
           "\"drags_with_bounds\":%u}\n",
           cmdline, n, T, P, D, create_ms, p50, p95, mx, bounded);
  else
    printf("solve: %u vertices, %u targets, %u pins: factor %.2f ms; %u drags: p50 %.1f µs, p95 %.1f µs, max %.1f µs "
           "(%u drags hit a bound)\n",
           n, T, P, create_ms, D, p50, p95, mx, bounded);
  blend_pins_destroy(bp);
  free(r), free(w), free(w0), free(lo), free(hi), free(us), free(pins);
  mesh_destroy(m);
  return 0;
}

static int bench_pca_part(uint32_t F, uint32_t V, double max_err, int json, const char *cmdline) {
  mesh *m = sphere_for(V);
  if (!m) return 1;
  uint32_t n = m->vertex_count;
  size_t n3 = 3 * (size_t)n;
  float *frames = malloc(sizeof(float) * n3 * F);
  if (!frames) return 1;
  for (uint32_t f = 0; f < F; f++)
    for (uint32_t v = 0; v < n; v++) {
      const float *p = m->positions + 3 * (size_t)v;
      double ph = 2 * M_PI * f / F;
      double s = 1 + 0.05 * sin(3 * p[0] + ph) + 0.03 * sin(5 * p[1] - 2 * ph) + 0.02 * cos(7 * p[2] + 3 * ph) +
                 0.002 * sin(40 * p[0] + 17 * f);
      for (int k = 0; k < 3; k++) frames[n3 * f + 3 * (size_t)v + k] = (float)(s * p[k]);
    }
  pca_options opt = {0, max_err * mesh_bbox_diagonal(m), 0};
  pca_model pm;
  char err[512];
  if (pca_build(frames, F, n, &opt, &pm, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench blend: pca: %s\n", err);
    return 1;
  }
  if (json)
    printf("{\"bench\":\"blend.pca\",\"command\":\"%s\",\"frames\":%u,\"vertices\":%u,\"components\":%u,\"rank\":%u,"
           "\"method\":\"%s\",\"build_ms\":%.2f,\"max_error_relative\":%.5g}\n",
           cmdline, F, n, pm.components, pm.rank, pm.method == PCA_GRAM ? "gram" : "svd", pm.build_ms,
           pm.max_error / mesh_bbox_diagonal(m));
  else
    printf("pca: %u frames x %u vertices -> %u components (rank %u, %s) in %.1f ms, max error %.3g%% of the diagonal\n",
           F, n, pm.components, pm.rank, pm.method == PCA_GRAM ? "Gram" : "SVD", pm.build_ms,
           100 * pm.max_error / mesh_bbox_diagonal(m));
  pca_fini(&pm);
  free(frames);
  mesh_destroy(m);
  return 0;
}

/* One clip: components for the budget, then the frames as deformd streams them (pca_stream.h:
 * components scaled to weights in [-1, 1], 8-bit weights where the rebuilt frame stays within the
 * budget, else 16-bit) and the error of what a viewer rebuilds from them. */
static void clip_row(const char *file, const char *clip, const mesh *m, uint32_t first, uint32_t count, double max_err,
                     int json, const char *cmdline) {
  uint32_t n = m->vertex_count;
  size_t n3 = 3 * (size_t)n;
  double diag = mesh_bbox_diagonal(m);
  if (count < 2) return;
  pca_options opt = {0, max_err * diag, 0};
  pca_model pm;
  char err[512];
  if (pca_build(m->frames + n3 * first, count, n, &opt, &pm, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench blend: %s/%s: %s\n", file, clip, err);
    return;
  }
  uint32_t K = pm.components;
  float *deltas = malloc(sizeof(float) * n3 * (K + 1)), *fw = malloc(sizeof(float) * (size_t)count * (K + 1));
  uint8_t *narrow = malloc(count);
  pca_stream_result sr;
  if (!deltas || !fw || !narrow) {
    fprintf(stderr, "deform-bench blend: out of memory\n");
    goto done;
  }
  pca_stream_scale(&pm, NULL, n, 0, K, deltas, fw);
  if (pca_stream_choose(m->frames + n3 * first, count, n, pm.mean, deltas, fw, K, opt.max_error, 1, narrow, &sr)) {
    fprintf(stderr, "deform-bench blend: out of memory\n");
    goto done;
  }
  double raw = 12.0 * n, bytes = sr.bytes_per_frame;
  int met = sr.max_error <= opt.max_error;
  const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  if (json)
    printf("{\"bench\":\"blend.clip\",\"command\":\"%s\",\"file\":\"%s\",\"clip\":\"%s\",\"frames\":%u,\"vertices\":%u,"
           "\"components\":%u,\"budget_met\":%s,\"streamed_max_error_relative\":%.5g,\"frames_8bit\":%u,"
           "\"bytes_per_frame\":%.1f,\"bytes_per_frame_max\":%zu,\"raw_bytes_per_frame\":%.0f,\"ratio\":%.1f,"
           "\"ratio_worst_frame\":%.1f,\"build_ms\":%.2f}\n",
           cmdline, base, clip, count, n, K, met ? "true" : "false", sr.max_error / diag, sr.narrow_frames, bytes,
           sr.bytes_max, raw, raw / bytes, raw / (double)sr.bytes_max, pm.build_ms);
  else
    printf("%-14s %-10s %6u %6u %5u %11.3f%% %6u %7.1f %7.0f %7.1fx %s\n", base, clip, count, n, K,
           100 * sr.max_error / diag, sr.narrow_frames, bytes, raw, raw / bytes, met ? "" : "(budget not met)");
done:
  free(deltas);
  free(fw);
  free(narrow);
  pca_fini(&pm);
}

int bench_blend_main(int argc, char **argv, const char *cmdline) {
  uint32_t T = 52, P = 20, D = 2000, F = 200, V = 10000;
  double max_err = 0.005;
  int json = 0;
  const char *clips[16];
  int nclips = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) json = 1;
    else if (strcmp(a, "--targets") == 0 && i + 1 < argc) T = (uint32_t)atoi(argv[++i]);
    else if (strcmp(a, "--pins") == 0 && i + 1 < argc) P = (uint32_t)atoi(argv[++i]);
    else if (strcmp(a, "--drags") == 0 && i + 1 < argc) D = (uint32_t)atoi(argv[++i]);
    else if (strcmp(a, "--frames") == 0 && i + 1 < argc) F = (uint32_t)atoi(argv[++i]);
    else if (strcmp(a, "--vertices") == 0 && i + 1 < argc) V = (uint32_t)atoi(argv[++i]);
    else if (strcmp(a, "--max-error") == 0 && i + 1 < argc) max_err = atof(argv[++i]);
    else if (strcmp(a, "--clips") == 0) {
      while (i + 1 < argc && argv[i + 1][0] != '-' && nclips < 16) clips[nclips++] = argv[++i];
    } else {
      fprintf(stderr, "usage: deform-bench blend [--targets T] [--pins P] [--drags D] [--frames F] [--vertices V] "
                      "[--max-error E] [--clips FILE...] [--json]\n");
      return 2;
    }
  }
  if (T < 1 || P < 1 || D < 1 || F < 2 || V < 12 || !(max_err > 0)) {
    fprintf(stderr, "deform-bench blend: counts must be positive and --max-error > 0\n");
    return 2;
  }
  if (nclips == 0) {
    clips[nclips++] = "/usr/share/assimp/models/MD2/faerie.md2";
    clips[nclips++] = "/usr/share/assimp/models/MD2/sydney.md2";
  }
  if (!json) printf("# %s\n", cmdline);
  if (bench_solve_part(T, P, D, V, json, cmdline) || bench_pca_part(F, V, max_err, json, cmdline)) return 1;
  if (!json)
    printf("%-14s %-10s %6s %6s %5s %12s %6s %7s %7s %8s\n", "file", "clip", "frames", "verts", "K", "max error",
           "8-bit", "B/frame", "raw B", "ratio");
  for (int c = 0; c < nclips; c++) {
    mesh *m = NULL;
    char err[MESH_ERR_LEN];
    if (mesh_import(clips[c], NULL, &m, err, sizeof(err)) != 0) {
      fprintf(stderr, "deform-bench blend: %s: %s\n", clips[c], err);
      return 1;
    }
    for (uint32_t k = 0; k < m->clip_count; k++)
      if (m->clips[k].frame_count)
        clip_row(clips[c], m->clips[k].name, m, m->clips[k].first_frame, m->clips[k].frame_count, max_err, json, cmdline);
    if (mesh_find_clip(m, "all") < 0) /* files with several clips have one called "all" already */
      clip_row(clips[c], "(all)", m, 0, m->frame_count, max_err, json, cmdline);
    mesh_destroy(m);
  }
  return 0;
}
