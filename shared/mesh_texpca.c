/*
 * mesh_texpca.c — the stored form of an animated texture PCA clip and its CPU reconstruction
 * (see mesh_texpca.h).
 *
 * Shelf packing: the windows after window 0, tallest first, put their tiles left to right on a
 * shelf as tall as the first tile on it; a tile that does not fit the shelf's width opens a new
 * shelf below, one that does not fit the layer's height opens a new layer. Every window's tiles
 * are the same size, so a window's K tiles fill shelves without holes; what is lost is the
 * shelf's height above shorter windows, which the tallest-first order keeps small.
 *
 * Quantisation: each component maps its own range over the texels its window owns to 0 .. 255
 * (one scale and offset for R, G and B, so the shader needs one pair per component). The error
 * is at most scale / 510 per channel and weight unit; the server measures the whole stored clip
 * against the frames and adds components while the window's budget is not met.
 *
 * DOES NOT decompose, decode or know GL.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_texpca.h"

static void set_err(char *err, size_t errlen, const char *msg, uint32_t a, uint32_t b) {
  if (err && errlen) snprintf(err, errlen, msg, a, b);
}

int mesh_texclip_owners(uint32_t width, uint32_t height, const mesh_texclip_rect *rects,
                        uint32_t n, uint8_t *owner, char *err, size_t errlen) {
  if (n + 1 > MESH_TEXCLIP_MAX_WINDOWS) {
    set_err(err, errlen, "%u windows: at most %u besides the whole texture", n,
            MESH_TEXCLIP_MAX_WINDOWS - 1);
    return MESH_EINVAL;
  }
  for (uint32_t i = 0; i < n; i++) {
    const mesh_texclip_rect *q = &rects[i];
    if (q->w == 0 || q->h == 0 || q->x >= width || q->y >= height || q->w > width - q->x ||
        q->h > height - q->y) {
      set_err(err, errlen, "window %u is empty or leaves the %u-texel-wide texture", i + 1, width);
      return MESH_EINVAL;
    }
  }
  memset(owner, 0, (size_t)width * height);
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t y = rects[i].y; y < rects[i].y + rects[i].h; y++)
      memset(owner + (size_t)y * width + rects[i].x, (int)(i + 1), rects[i].w);
  return 0;
}

/* Places the tiles of windows 1 .. on shelves; comps' layer/x/y set, returns the layer count or
 * 0 when they need more than MESH_TEXCLIP_MAX_LAYERS. */
static uint32_t pack_shelves(mesh_texclip *c) {
  uint32_t W = c->width, H = c->height, layer = 1 + c->windows[0].count;
  uint32_t order[MESH_TEXCLIP_MAX_WINDOWS], n = 0;
  for (uint32_t r = 1; r < c->window_count; r++) {
    uint32_t i = n++;
    while (i > 0 && c->windows[order[i - 1]].h < c->windows[r].h) {
      order[i] = order[i - 1];
      i--;
    }
    order[i] = r;
  }
  uint32_t sx = 0, sy = 0, sh = 0, used = 0; /* shelf cursor; `used`: the layer has a tile */
  for (uint32_t i = 0; i < n; i++) {
    const mesh_texclip_window *win = &c->windows[order[i]];
    for (uint32_t k = 0; k < win->count; k++) {
      if (sx + win->w > W) { /* next shelf */
        sx = 0;
        sy += sh;
        sh = 0;
      }
      if (sy + win->h > H) { /* next layer */
        layer++;
        sx = sy = sh = 0;
      }
      mesh_texclip_comp *cp = &c->comps[win->first + k];
      cp->layer = layer;
      cp->x = sx;
      cp->y = sy;
      sx += win->w;
      if (win->h > sh) sh = win->h;
      used = 1;
    }
  }
  uint32_t layers = layer + used;
  return layers > MESH_TEXCLIP_MAX_LAYERS ? 0 : layers;
}

int mesh_texclip_layout(mesh_texclip *c, uint32_t width, uint32_t height, uint32_t frame_count,
                        const mesh_texclip_rect *rects, uint32_t rect_count, const uint32_t *count,
                        char *err, size_t errlen) {
  memset(c, 0, sizeof(*c));
  if (width == 0 || height == 0 || width > MESH_TEXCLIP_MAX_SIDE ||
      height > MESH_TEXCLIP_MAX_SIDE || frame_count == 0) {
    set_err(err, errlen, "a %u × %u texture clip: each side must be 1 .. 2048 and frames > 0",
            width, height);
    return MESH_EINVAL;
  }
  if (rect_count + 1 > MESH_TEXCLIP_MAX_WINDOWS) {
    set_err(err, errlen, "%u windows: at most %u besides the whole texture", rect_count,
            MESH_TEXCLIP_MAX_WINDOWS - 1);
    return MESH_EINVAL;
  }
  uint32_t total = 0;
  for (uint32_t r = 0; r <= rect_count; r++) total += count[r];
  if (total > MESH_TEXCLIP_MAX_COMPONENTS) {
    set_err(err, errlen, "%u components: at most %u in all windows", total,
            MESH_TEXCLIP_MAX_COMPONENTS);
    return MESH_EINVAL;
  }
  c->width = width;
  c->height = height;
  c->frame_count = frame_count;
  c->window_count = rect_count + 1;
  c->component_count = total;
  c->windows = calloc(c->window_count, sizeof(*c->windows));
  c->comps = calloc(total ? total : 1, sizeof(*c->comps));
  c->weights = calloc((size_t)frame_count * (total ? total : 1), sizeof(float));
  if (!c->windows || !c->comps || !c->weights) goto nomem;
  uint32_t first = 0;
  for (uint32_t r = 0; r < c->window_count; r++) {
    mesh_texclip_window *win = &c->windows[r];
    if (r == 0) {
      win->w = width;
      win->h = height;
    } else {
      const mesh_texclip_rect *q = &rects[r - 1];
      if (q->w == 0 || q->h == 0 || q->x >= width || q->y >= height || q->w > width - q->x ||
          q->h > height - q->y) {
        set_err(err, errlen, "window %u is empty or leaves the %u-texel-wide texture", r, width);
        mesh_texclip_fini(c);
        return MESH_EINVAL;
      }
      win->x = q->x;
      win->y = q->y;
      win->w = q->w;
      win->h = q->h;
    }
    win->first = first;
    win->count = count[r];
    first += count[r];
  }
  for (uint32_t k = 0; k < c->windows[0].count; k++) c->comps[k].layer = 1 + k;
  for (uint32_t k = 0; k < total; k++) c->comps[k].scale = 1;
  c->layers = pack_shelves(c);
  if (c->layers == 0) {
    set_err(err, errlen, "the %u components need more than %u texture layers", total,
            MESH_TEXCLIP_MAX_LAYERS);
    mesh_texclip_fini(c);
    return MESH_EINVAL;
  }
  c->texels = calloc((size_t)c->layers * width * height * 4, 1);
  if (!c->texels) goto nomem;
  for (size_t i = 0; i < (size_t)c->layers * width * height; i++) c->texels[4 * i + 3] = 255;
  return 0;
nomem:
  set_err(err, errlen, "out of memory for a %u × %u texture clip", width, height);
  mesh_texclip_fini(c);
  return MESH_ENOMEM;
}

static uint8_t to_byte(double v) {
  v = v * 255.0 + 0.5;
  return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

void mesh_texclip_set_mean(mesh_texclip *c, const float *mean_rgb) {
  size_t n = (size_t)c->width * c->height;
  for (size_t i = 0; i < n; i++)
    for (int ch = 0; ch < 3; ch++) c->texels[4 * i + ch] = to_byte(mean_rgb[3 * i + ch]);
}

uint32_t mesh_texclip_owner(const mesh_texclip *c, uint32_t x, uint32_t y) {
  for (uint32_t r = c->window_count; r-- > 1;) {
    const mesh_texclip_window *w = &c->windows[r];
    if (x >= w->x && x - w->x < w->w && y >= w->y && y - w->y < w->h) return r;
  }
  return 0;
}

void mesh_texclip_set_component(mesh_texclip *c, uint32_t r, uint32_t k, const float *values,
                                const float *weights) {
  const mesh_texclip_window *win = &c->windows[r];
  mesh_texclip_comp *cp = &c->comps[win->first + k];
  float lo = INFINITY, hi = -INFINITY;
  for (uint32_t y = 0; y < win->h; y++)
    for (uint32_t x = 0; x < win->w; x++) {
      if (mesh_texclip_owner(c, win->x + x, win->y + y) != r) continue;
      for (int ch = 0; ch < 3; ch++) {
        float v = values[3 * ((size_t)y * win->w + x) + ch];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      }
    }
  if (!(lo <= hi)) lo = hi = 0; /* the window owns no texel */
  cp->offset = lo;
  cp->scale = hi > lo ? hi - lo : 1;
  size_t layer = (size_t)cp->layer * c->width * c->height;
  for (uint32_t y = 0; y < win->h; y++)
    for (uint32_t x = 0; x < win->w; x++) {
      uint8_t *t = c->texels + 4 * (layer + (size_t)(cp->y + y) * c->width + cp->x + x);
      for (int ch = 0; ch < 3; ch++)
        t[ch] = to_byte(((double)values[3 * ((size_t)y * win->w + x) + ch] - cp->offset) /
                        cp->scale);
    }
  for (uint32_t f = 0; f < c->frame_count; f++)
    c->weights[(size_t)f * c->component_count + win->first + k] = weights[f];
}

void mesh_texclip_fini(mesh_texclip *c) {
  free(c->windows);
  free(c->comps);
  free(c->texels);
  free(c->weights);
  memset(c, 0, sizeof(*c));
}

void mesh_texclip_texel(const mesh_texclip *c, const float *w, uint32_t x, uint32_t y,
                        float rgb[3]) {
  const mesh_texclip_window *win = &c->windows[mesh_texclip_owner(c, x, y)];
  size_t plane = (size_t)c->width * c->height;
  const uint8_t *m = c->texels + 4 * ((size_t)y * c->width + x);
  double acc[3] = {m[0] / 255.0, m[1] / 255.0, m[2] / 255.0};
  for (uint32_t k = 0; k < win->count; k++) {
    const mesh_texclip_comp *cp = &c->comps[win->first + k];
    double wk = w[win->first + k];
    const uint8_t *t = c->texels +
                       4 * (plane * cp->layer + (size_t)(cp->y + y - win->y) * c->width + cp->x +
                            x - win->x);
    for (int ch = 0; ch < 3; ch++) acc[ch] += wk * (cp->offset + cp->scale * (t[ch] / 255.0));
  }
  for (int ch = 0; ch < 3; ch++) rgb[ch] = (float)(acc[ch] < 0 ? 0 : acc[ch] > 1 ? 1 : acc[ch]);
}

void mesh_texclip_frame_rgb8(const mesh_texclip *c, const float *w, uint8_t *out) {
  for (uint32_t y = 0; y < c->height; y++)
    for (uint32_t x = 0; x < c->width; x++) {
      float rgb[3];
      mesh_texclip_texel(c, w, x, y, rgb);
      uint8_t *o = out + 3 * ((size_t)y * c->width + x);
      for (int ch = 0; ch < 3; ch++) o[ch] = to_byte(rgb[ch]);
    }
}

void mesh_texclip_error(const mesh_texclip *c, const float *frames, uint32_t r, double *max,
                        double *rms) {
  double mx = 0, sum = 0;
  size_t n = 0, plane = (size_t)c->width * c->height;
  for (uint32_t f = 0; f < c->frame_count; f++) {
    const float *w = c->weights + (size_t)f * c->component_count;
    for (uint32_t y = 0; y < c->height; y++)
      for (uint32_t x = 0; x < c->width; x++) {
        if (r != UINT32_MAX && mesh_texclip_owner(c, x, y) != r) continue;
        float rgb[3];
        mesh_texclip_texel(c, w, x, y, rgb);
        const float *p = frames + 3 * (plane * f + (size_t)y * c->width + x);
        double e = 0;
        for (int ch = 0; ch < 3; ch++) e += ((double)rgb[ch] - p[ch]) * ((double)rgb[ch] - p[ch]);
        mx = e > mx ? e : mx;
        sum += e;
        n++;
      }
  }
  if (max) *max = sqrt(mx);
  if (rms) *rms = n ? sqrt(sum / (double)n) : 0;
}

void mesh_texclip_bytes(const mesh_texclip *c, size_t *once, size_t *per_frame) {
  if (once)
    *once = (size_t)c->layers * c->width * c->height * 4 +
            c->window_count * sizeof(mesh_texclip_window) +
            c->component_count * sizeof(mesh_texclip_comp);
  if (per_frame) *per_frame = (size_t)c->component_count * sizeof(float);
}
