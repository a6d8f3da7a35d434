/*
 * bench_texclip.c — `deform-bench texclip`: animated texture PCA against plain image frames.
 *
 *   deform-bench texclip [--size N] [--frames F] [--max-error E[,E...]] [--json]
 *
 * The clip is the demo head's (shared/mesh_demo_texclip.c): N × N texels, F frames at 30 fps of
 * a smile and a frown in turn (blush on the cheeks, furrows on the brow). For each way of sending
 * it, one row: bytes per frame and the error of what a viewer shows against the float frames
 * (largest and RMS Euclidean RGB distance per texel, colours in [0, 1]; 1/255 is one step of one
 * channel):
 *   raw    RGB8 per frame (W·H·3 bytes)
 *   png    each frame as PNG (stb_image_write, its default compression)
 *   jpeg   each frame as JPEG at qualities 95, 90 and 75 (stb_image_write), decoded again
 *   pca    texpca_build to each bound E, one window (the whole texture), then with the clip's
 *          two windows (cheeks, brow; variable PCA): the TEXCLIP frame once (bytes as encoded),
 *          then a TEXWEIGHTS frame per frame (header included), and the mean bytes per frame
 *          over the clip with the TEXCLIP counted once; build time on this machine.
 * In process, no deformd, no GL (the shader's cost is deform-view-bench's).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stb_image.h>
#include <stb_image_write.h>

#include "bench.h"
#include "mesh.h"
#include "mesh_demo_texclip.h"
#include "mesh_texpca.h"
#include "proto.h"
#include "texpca.h"

typedef struct sink {
  uint8_t *data;
  size_t len, cap;
} sink;

static void sink_write(void *ctx, void *data, int size) {
  sink *s = ctx;
  if (s->len + (size_t)size > s->cap) {
    size_t cap = (s->len + (size_t)size) * 2;
    uint8_t *g = realloc(s->data, cap);
    if (!g) return;
    s->data = g;
    s->cap = cap;
  }
  memcpy(s->data + s->len, data, (size_t)size);
  s->len += (size_t)size;
}

static uint8_t byte_of(float v) {
  double x = v * 255.0 + 0.5;
  return x <= 0 ? 0 : x >= 255 ? 255 : (uint8_t)x;
}

/* Max and sum of squared Euclidean errors of RGB8 `img` against float frame `f`. */
static void rgb8_error(const uint8_t *img, const float *f, size_t texels, double *max2, double *sum2) {
  for (size_t i = 0; i < texels; i++) {
    double e = 0;
    for (int ch = 0; ch < 3; ch++) {
      double d = img[3 * i + ch] / 255.0 - f[3 * i + ch];
      e += d * d;
    }
    *max2 = e > *max2 ? e : *max2;
    *sum2 += e;
  }
}

static void row(int json, const char *cmdline, const char *kind, const char *detail, double bytes_frame,
                double once, double per_frame, double max, double rms, uint32_t K, double build_ms, double raw) {
  if (json)
    printf("{\"bench\":\"texclip\",\"command\":\"%s\",\"kind\":\"%s\",\"detail\":\"%s\",\"bytes_per_frame\":%.1f,"
           "\"once_bytes\":%.0f,\"frame_bytes\":%.1f,\"max_error\":%.6f,\"rms_error\":%.6f,\"components\":%u,"
           "\"build_ms\":%.1f,\"ratio\":%.2f}\n",
           cmdline, kind, detail, bytes_frame, once, per_frame, max, rms, K, build_ms, raw / bytes_frame);
  else
    printf("%-6s %-22s %11.1f %10.0f %8.1f %9.2f %9.2f %4u %9.1f %8.1fx\n", kind, detail, bytes_frame, once, per_frame,
           max * 255, rms * 255, K, build_ms, raw / bytes_frame);
}

static int image_rows(const float *fr, uint32_t N, uint32_t F, int json, const char *cmdline) {
  size_t texels = (size_t)N * N, raw = 3 * texels;
  uint8_t *img = malloc(raw);
  if (!img) return 1;
  double max2 = 0, sum2 = 0, png = 0;
  for (uint32_t f = 0; f < F; f++) {
    for (size_t i = 0; i < raw; i++) img[i] = byte_of(fr[raw * f + i]);
    rgb8_error(img, fr + raw * f, texels, &max2, &sum2);
    sink s = {0};
    stbi_write_png_to_func(sink_write, &s, (int)N, (int)N, 3, img, (int)(3 * N));
    png += (double)s.len;
    free(s.data);
  }
  double rms = sqrt(sum2 / ((double)texels * F));
  row(json, cmdline, "raw", "RGB8", (double)raw, 0, (double)raw, sqrt(max2), rms, 0, 0, (double)raw);
  row(json, cmdline, "png", "stb default", png / F, 0, png / F, sqrt(max2), rms, 0, 0, (double)raw);
  static const int qualities[] = {95, 90, 75};
  for (int q = 0; q < 3; q++) {
    double bytes = 0;
    max2 = sum2 = 0;
    for (uint32_t f = 0; f < F; f++) {
      for (size_t i = 0; i < raw; i++) img[i] = byte_of(fr[raw * f + i]);
      sink s = {0};
      stbi_write_jpg_to_func(sink_write, &s, (int)N, (int)N, 3, img, qualities[q]);
      bytes += (double)s.len;
      int w = 0, h = 0, n = 0;
      uint8_t *back = stbi_load_from_memory(s.data, (int)s.len, &w, &h, &n, 3);
      if (back && (uint32_t)w == N && (uint32_t)h == N) rgb8_error(back, fr + raw * f, texels, &max2, &sum2);
      stbi_image_free(back);
      free(s.data);
    }
    char detail[32];
    snprintf(detail, sizeof(detail), "quality %d", qualities[q]);
    row(json, cmdline, "jpeg", detail, bytes / F, 0, bytes / F, sqrt(max2), sqrt(sum2 / ((double)texels * F)), 0, 0,
        (double)raw);
  }
  free(img);
  return 0;
}

/* The TEXCLIP frame's bytes as deformd would send it (RGB texels). */
static double texclip_frame_bytes(const mesh_texclip *c) {
  proto_buf b;
  proto_buf_init(&b);
  double len = texpca_encode_texclip(c, 0, "demo", 30, &b) == 0 ? (double)b.len : 0;
  proto_buf_fini(&b);
  return len;
}

static int pca_rows(const float *fr, uint32_t N, uint32_t F, const mesh_texclip_rect *rects, const double *bounds,
                    int nb, int json, const char *cmdline) {
  double raw = 3.0 * N * N;
  for (int windows = 0; windows < 2; windows++)
    for (int i = 0; i < nb; i++) {
      texpca_budget b[3] = {{.max_error = bounds[i]}, {.max_error = bounds[i]}, {.max_error = bounds[i]}};
      mesh_texclip c;
      texpca_report rep;
      char err[256] = "";
      int rc = texpca_build(fr, F, N, N, windows ? rects : NULL, windows ? 2 : 0, b, &c, &rep, err, sizeof(err));
      if (rc) {
        fprintf(stderr, "deform-bench texclip: %s\n", err);
        return 1;
      }
      double once = texclip_frame_bytes(&c);
      double per = PROTO_HEADER_SIZE + 1 + 9 + 4.0 * c.component_count;
      char detail[64];
      if (windows)
        snprintf(detail, sizeof(detail), "%.0f/255 K=%u+%u+%u L%u", bounds[i] * 255, c.windows[0].count,
                 c.windows[1].count, c.windows[2].count, c.layers);
      else
        snprintf(detail, sizeof(detail), "%.0f/255 whole L%u", bounds[i] * 255, c.layers);
      row(json, cmdline, "pca", detail, (once + F * per) / F, once, per, rep.max_error, rep.rms_error,
          c.component_count, rep.build_ms, raw);
      mesh_texclip_fini(&c);
    }
  return 0;
}

int bench_texclip_main(int argc, char **argv, const char *cmdline) {
  uint32_t N = 256, F = 60;
  double bounds[8] = {2.0 / 255, 4.0 / 255, 8.0 / 255};
  int nb = 3, json = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) json = 1;
    else if (strcmp(a, "--size") == 0 && i + 1 < argc) N = (uint32_t)atoi(argv[++i]);
    else if (strcmp(a, "--frames") == 0 && i + 1 < argc) F = (uint32_t)atoi(argv[++i]);
    else if (strcmp(a, "--max-error") == 0 && i + 1 < argc) {
      nb = 0;
      for (char *s = argv[++i]; *s && nb < 8;) {
        char *end;
        bounds[nb++] = strtod(s, &end);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s) break;
      }
    } else {
      fprintf(stderr, "usage: deform-bench texclip [--size N] [--frames F] [--max-error E[,E...]] [--json]\n");
      return 2;
    }
  }
  for (int i = 0; i < nb; i++)
    if (!(bounds[i] > 0)) nb = 0;
  if (N < 8 || N > 2048 || F < 2 || F > 1000 || nb == 0) {
    fprintf(stderr, "deform-bench texclip: --size 8..2048, --frames 2..1000, --max-error > 0 (colour units, 1/255 a step)\n");
    return 2;
  }
  mesh *head = NULL;
  if (mesh_demo_head(&head) != 0) return 1;
  float *smile = malloc(sizeof(float) * F), *frown = malloc(sizeof(float) * F), *fr = NULL;
  mesh_texclip_rect rects[2];
  int rc = 1;
  if (smile && frown) {
    for (uint32_t f = 0; f < F; f++) { /* a smile, then a frown, once over the clip */
      double s = sin(2 * M_PI * f / F);
      smile[f] = (float)(s > 0 ? s : 0);
      frown[f] = (float)(s < 0 ? -s : 0);
    }
    rc = mesh_demo_texclip(head, N, N, smile, frown, F, &fr, rects) != 0;
  }
  if (!rc) {
    if (!json) {
      printf("# %s\n# demo head clip: %u x %u texels, %u frames; errors in 1/255 (Euclidean RGB per texel)\n", cmdline,
             N, N, F);
      printf("%-6s %-22s %11s %10s %8s %9s %9s %4s %9s %9s\n", "kind", "detail", "B/frame", "once B", "frame B",
             "max err", "rms err", "K", "build ms", "vs raw");
    }
    rc = image_rows(fr, N, F, json, cmdline) || pca_rows(fr, N, F, rects, bounds, nb, json, cmdline);
  }
  free(fr);
  free(smile);
  free(frown);
  mesh_destroy(head);
  return rc;
}
