/*
 * texpca.c — animated texture PCA on the server (see texpca.h).
 *
 * Each window's owned texels are gathered into an F × 3n float clip and handed to pca_build as
 * n "vertices" of three coordinates (R, G, B), so the decomposition, the rank test and the error
 * by count are the vertex PCA's, unchanged: a texel's error is its vertex error. pca_build is
 * asked for every component up to the rank, which costs no more than the error curve it builds
 * anyway, and the count is chosen here from the curve, then checked on the stored clip: the
 * mean and the components are rounded to bytes (mesh_texpca.c), which adds up to half a step
 * per channel on the mean and scale_k / 510 · |w_k| per component, so a window whose stored
 * error misses its bound gets one more component and the clip is laid out again, until it
 * meets the bound or reaches its rank (budget_met = 0 then; not an error).
 *
 * DOES NOT decode images or know threads (pca_build's error pass uses dfm_pool).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfm.h"
#include "mesh_texpca.h"
#include "pca.h"
#include "proto.h"
#include "proto_texclip.h"
#include "texpca.h"

typedef struct window_work {
  uint32_t n;        /* owned texels */
  uint32_t *texels;  /* their indices y·W + x */
  pca_model model;   /* every component up to the rank */
  uint32_t k;        /* chosen so far */
} window_work;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Window r's PCA over its owned texels. */
static int window_pca(const float *frames, uint32_t F, size_t plane, window_work *ww,
                      uint32_t r, char *err, size_t errlen) {
  if (ww->n == 0) return 0;
  float *sub = malloc(sizeof(float) * 3 * (size_t)ww->n * F);
  if (!sub) {
    dfm_set_err(err, errlen, "window %u: out of memory for %u frames of %u texels", r, F, ww->n);
    return PCA_ENOMEM;
  }
  for (uint32_t f = 0; f < F; f++)
    for (uint32_t i = 0; i < ww->n; i++)
      memcpy(sub + 3 * ((size_t)f * ww->n + i), frames + 3 * (plane * f + ww->texels[i]),
             3 * sizeof(float));
  pca_options opt = {.components = F};
  char why[200] = "";
  int rc = pca_build(sub, F, ww->n, &opt, &ww->model, why, sizeof(why));
  free(sub);
  if (rc != 0) dfm_set_err(err, errlen, "window %u: %s", r, why);
  return rc;
}

/* The first count: the budget's, or the fewest whose error (in double, before rounding) meets
 * the bound. */
static uint32_t first_count(const pca_model *m, const texpca_budget *b) {
  if (b->components > 0) return b->components < m->rank ? b->components : m->rank;
  uint32_t k = 0;
  while (k < m->rank && m->max_error_by_count[k] > b->max_error) k++;
  return k;
}

/* Lays the clip out with the current counts and stores the mean and components. */
static int fill(mesh_texclip *c, const window_work *ww, uint32_t nw, uint32_t F, uint32_t W,
                uint32_t H, const mesh_texclip_rect *rects, float *scratch, char *err,
                size_t errlen) {
  uint32_t count[MESH_TEXCLIP_MAX_WINDOWS];
  for (uint32_t r = 0; r < nw; r++) count[r] = ww[r].k;
  int rc = mesh_texclip_layout(c, W, H, F, rects, nw - 1, count, err, errlen);
  if (rc != 0) return PCA_EINVAL;
  size_t plane = (size_t)W * H;
  float *mean = scratch, *tile = scratch + 3 * plane, *wf = tile + 3 * plane;
  memset(mean, 0, sizeof(float) * 3 * plane);
  for (uint32_t r = 0; r < nw; r++)
    for (uint32_t i = 0; i < ww[r].n; i++)
      memcpy(mean + 3 * (size_t)ww[r].texels[i], ww[r].model.mean + 3 * (size_t)i,
             3 * sizeof(float));
  mesh_texclip_set_mean(c, mean);
  for (uint32_t r = 0; r < nw; r++) {
    const mesh_texclip_window *win = &c->windows[r];
    const pca_model *m = &ww[r].model;
    for (uint32_t k = 0; k < ww[r].k; k++) {
      memset(tile, 0, sizeof(float) * 3 * (size_t)win->w * win->h);
      const float *row = m->basis + (size_t)k * 3 * ww[r].n;
      for (uint32_t i = 0; i < ww[r].n; i++) {
        uint32_t x = ww[r].texels[i] % W - win->x, y = ww[r].texels[i] / W - win->y;
        memcpy(tile + 3 * ((size_t)y * win->w + x), row + 3 * (size_t)i, 3 * sizeof(float));
      }
      for (uint32_t f = 0; f < F; f++) wf[f] = m->weights[(size_t)f * m->components + k];
      mesh_texclip_set_component(c, r, k, tile, wf);
    }
  }
  return 0;
}

static int owners_and_texels(uint32_t W, uint32_t H, const mesh_texclip_rect *rects,
                             uint32_t nr, window_work *ww, char *err, size_t errlen) {
  size_t plane = (size_t)W * H;
  uint8_t *owner = malloc(plane);
  if (!owner) return PCA_ENOMEM;
  int rc = mesh_texclip_owners(W, H, rects, nr, owner, err, errlen);
  if (rc != 0) {
    free(owner);
    return PCA_EINVAL;
  }
  for (size_t i = 0; i < plane; i++) ww[owner[i]].n++;
  for (uint32_t r = 0; r <= nr; r++) {
    ww[r].texels = malloc(sizeof(uint32_t) * (ww[r].n ? ww[r].n : 1));
    if (!ww[r].texels) rc = PCA_ENOMEM;
    ww[r].n = 0;
  }
  if (rc == 0)
    for (size_t i = 0; i < plane; i++) ww[owner[i]].texels[ww[owner[i]].n++] = (uint32_t)i;
  free(owner);
  return rc;
}

static int check_budgets(uint32_t nw, const texpca_budget *budget, char *err, size_t errlen) {
  for (uint32_t r = 0; r < nw; r++)
    if (budget[r].components == 0 && !(budget[r].max_error > 0)) {
      dfm_set_err(err, errlen, "window %u: give components (> 0) or max_error (> 0)", r);
      return PCA_EINVAL;
    }
  return 0;
}

int texpca_build(const float *frames, uint32_t frame_count, uint32_t width, uint32_t height,
                 const mesh_texclip_rect *rects, uint32_t rect_count, const texpca_budget *budget,
                 mesh_texclip *out, texpca_report *report, char *err, size_t errlen) {
  double t0 = now_ms();
  memset(out, 0, sizeof(*out));
  if (report) memset(report, 0, sizeof(*report));
  if (!frames || frame_count == 0 || width == 0 || height == 0 ||
      width > MESH_TEXCLIP_MAX_SIDE || height > MESH_TEXCLIP_MAX_SIDE) {
    dfm_set_err(err, errlen, "%u frames of %u × %u texels: need frames and sides 1 .. %u",
                frame_count, width, height, MESH_TEXCLIP_MAX_SIDE);
    return PCA_EINVAL;
  }
  if (rect_count + 1 > MESH_TEXCLIP_MAX_WINDOWS) {
    dfm_set_err(err, errlen, "%u windows: at most %u besides the whole texture", rect_count,
                MESH_TEXCLIP_MAX_WINDOWS - 1);
    return PCA_EINVAL;
  }
  uint32_t nw = rect_count + 1;
  int rc = check_budgets(nw, budget, err, errlen);
  if (rc != 0) return rc;
  window_work ww[MESH_TEXCLIP_MAX_WINDOWS];
  memset(ww, 0, sizeof(ww));
  size_t plane = (size_t)width * height;
  float *scratch = malloc(sizeof(float) * (6 * plane + frame_count));
  rc = scratch ? owners_and_texels(width, height, rects, rect_count, ww, err, errlen) : PCA_ENOMEM;
  if (rc == PCA_ENOMEM)
    dfm_set_err(err, errlen, "out of memory for a %u × %u texture's window tables", width, height);
  for (uint32_t r = 0; rc == 0 && r < nw; r++) {
    rc = window_pca(frames, frame_count, plane, &ww[r], r, err, errlen);
    if (rc == 0 && ww[r].n) ww[r].k = first_count(&ww[r].model, &budget[r]);
  }
  /* Store, measure, add a component where the stored clip misses a bound. */
  for (int grown = 1; rc == 0 && grown;) {
    mesh_texclip_fini(out);
    rc = fill(out, ww, nw, frame_count, width, height, rects, scratch, err, errlen);
    grown = 0;
    for (uint32_t r = 0; rc == 0 && r < nw; r++) {
      texpca_window_report wr = {.texels = ww[r].n, .rank = ww[r].model.rank, .components = ww[r].k};
      mesh_texclip_error(out, frames, r, &wr.max_error, &wr.rms_error);
      wr.budget_met = budget[r].components > 0 || wr.max_error <= budget[r].max_error;
      if (!wr.budget_met && ww[r].k < ww[r].model.rank) {
        ww[r].k++;
        grown = 1;
      }
      if (report) report->windows[r] = wr;
    }
  }
  if (rc == 0 && report) {
    report->budget_met = 1;
    for (uint32_t r = 0; r < nw; r++) report->budget_met &= report->windows[r].budget_met;
    mesh_texclip_error(out, frames, UINT32_MAX, &report->max_error, &report->rms_error);
    report->build_ms = now_ms() - t0;
  }

  if (rc != 0) mesh_texclip_fini(out);
  for (uint32_t r = 0; r < nw; r++) {
    pca_fini(&ww[r].model);
    free(ww[r].texels);
  }
  free(scratch);
  return rc;
}

int texpca_encode_texclip(const mesh_texclip *c, uint32_t id, const char *name, float fps, proto_buf *b) {
  proto_texclip_window w[PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp k[PROTO_TEXCLIP_MAX_COMPONENTS];
  size_t len = strlen(name), n = (size_t)c->layers * c->width * c->height;
  if (len > PROTO_MAX_NAME || c->window_count > PROTO_TEXCLIP_MAX_WINDOWS ||
      c->component_count > PROTO_TEXCLIP_MAX_COMPONENTS)
    return PROTO_EINVAL;
  uint8_t *rgb = malloc(3 * n + 1);
  if (!rgb) return PROTO_ENOMEM;
  for (size_t i = 0; i < n; i++) memcpy(rgb + 3 * i, c->texels + 4 * i, 3);
  for (uint32_t r = 0; r < c->window_count; r++)
    w[r] = (proto_texclip_window){(uint16_t)c->windows[r].x, (uint16_t)c->windows[r].y, (uint16_t)c->windows[r].w,
                                  (uint16_t)c->windows[r].h, (uint8_t)c->windows[r].first, (uint8_t)c->windows[r].count};
  for (uint32_t i = 0; i < c->component_count; i++)
    k[i] = (proto_texclip_comp){(uint8_t)c->comps[i].layer, (uint16_t)c->comps[i].x, (uint16_t)c->comps[i].y,
                                c->comps[i].scale, c->comps[i].offset};
  proto_texclip pc = {.id = id, .name = {name, (uint16_t)len}, .width = (uint16_t)c->width,
                      .height = (uint16_t)c->height, .frame_count = c->frame_count, .fps = fps,
                      .window_count = (uint8_t)c->window_count, .component_count = (uint8_t)c->component_count,
                      .layers = (uint8_t)c->layers, .windows = w, .comps = k, .texels = rgb};
  int rc = proto_encode_texclip(b, &pc);
  free(rgb);
  return rc;
}
