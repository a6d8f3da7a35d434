/*
 * bench_texclip.c — `deform-view-bench texclip`: the texture clip pass's cost per component
 * (vw_texclip.c), in deform-view's own GL context (Mesa llvmpipe here, on the CPU cores).
 *
 *   deform-view-bench texclip [--size N] [--components K,K,...] [--frames F] [--json]
 *
 * For each K: a clip of N × N texels with K components in window 0 (whole layers, the worst
 * case: every texel fetches every component), F rebuilds each followed by glFinish; the median
 * time per rebuild, and the least-squares slope over K — the cost of one more component.
 */
#include <epoxy/gl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mesh_texpca.h"
#include "vw_context.h"
#include "vw_texclip.h"
#include "bench_texclip.h"

double bench_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median ms of F rebuilds of an N × N clip with K components. */
static double time_k(uint32_t N, uint32_t K, uint32_t F, char *err, size_t errlen) {
  mesh_texclip c;
  uint32_t count[1] = {K};
  if (mesh_texclip_layout(&c, N, N, 1, NULL, 0, count, err, errlen) != 0) return -1;
  for (size_t i = 0; i < (size_t)c.layers * N * N * 4; i++) c.texels[i] = (uint8_t)(i * 2654435761u >> 24);
  for (uint32_t k = 0; k < K; k++) c.weights[k] = 0.01f * (float)(k + 1);
  vw_texclip t;
  double med = -1;
  if (vw_texclip_make(&t, &c, err, errlen) == 0) {
    double *ms = malloc(sizeof(double) * F);
    vw_texclip_draw(&t, c.weights, 1.0f); /* warm-up: the first draw compiles llvmpipe's code */
    glFinish();
    for (uint32_t f = 0; ms && f < F; f++) {
      c.weights[0] += 1e-4f;
      double t0 = bench_now_ms();
      vw_texclip_draw(&t, c.weights, 1.0f);
      glFinish();
      ms[f] = bench_now_ms() - t0;
    }
    if (ms) {
      qsort(ms, F, sizeof(double), bench_cmp_double);
      med = ms[F / 2];
    }
    free(ms);
    vw_texclip_free(&t);
  }
  mesh_texclip_fini(&c);
  return med;
}

int bench_texclip_main(int argc, char **argv, const char *cmdline) {
  uint32_t N = 256, F = 50, ks[32] = {0, 1, 2, 4, 8, 16, 32}, nk = 7;
  int json = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) N = (uint32_t)atoi(argv[++i]);
    else if (strcmp(argv[i], "--frames") == 0 && i + 1 < argc) F = (uint32_t)atoi(argv[++i]);
    else if (strcmp(argv[i], "--components") == 0 && i + 1 < argc) {
      nk = 0;
      for (char *s = argv[++i]; *s && nk < 32;) {
        char *end;
        ks[nk++] = (uint32_t)strtoul(s, &end, 10);
        if (end == s) return 2;
        s = *end == ',' ? end + 1 : end;
      }
    } else {
      fprintf(stderr, "usage: deform-view-bench texclip [--size N] [--components K,K,...] [--frames F] [--json]\n");
      return 2;
    }
  }
  for (uint32_t i = 0; i < nk; i++)
    if (ks[i] > MESH_TEXCLIP_MAX_COMPONENTS - 1) return 2;
  if (N < 8 || N > 2048 || F < 3) return 2;
  char err[1024];
  vw_context ctx;
  if (vw_context_init(&ctx, 64, 64, 1, "deform-view-bench texclip", err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-view-bench: %s (run it under Xvfb when there is no display)\n", err);
    return 1;
  }
  if (!json) printf("# %s\n# renderer: %s\n%6s %10s %14s\n", cmdline, ctx.renderer, "K", "ms/frame", "ns/texel");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (uint32_t i = 0; i < nk; i++) {
    double ms = time_k(N, ks[i], F, err, sizeof(err));
    if (ms < 0) {
      fprintf(stderr, "deform-view-bench texclip: %s\n", err);
      vw_context_fini(&ctx);
      return 1;
    }
    sx += ks[i], sy += ms, sxx += (double)ks[i] * ks[i], sxy += ks[i] * ms;
    if (json)
      printf("{\"bench\":\"view.texclip\",\"command\":\"%s\",\"renderer\":\"%s\",\"size\":%u,\"components\":%u,"
             "\"ms\":%.4f}\n", cmdline, ctx.renderer, N, ks[i], ms);
    else
      printf("%6u %10.3f %14.2f\n", ks[i], ms, ms * 1e6 / ((double)N * N));
  }
  double slope = nk > 1 ? (nk * sxy - sx * sy) / (nk * sxx - sx * sx) : 0;
  if (json)
    printf("{\"bench\":\"view.texclip.slope\",\"command\":\"%s\",\"size\":%u,\"ms_per_component\":%.5f}\n", cmdline, N,
           slope);
  else
    printf("# per component: %.4f ms per %u x %u frame (%.3f ns per texel)\n", slope, N, N,
           slope * 1e6 / ((double)N * N));
  vw_context_fini(&ctx);
  return 0;
}
