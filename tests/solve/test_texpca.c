/*
 * test_texpca.c — animated texture PCA (server/solve/texpca.c, shared/mesh_texpca.c) against
 * clips built here from a known mean and known patterns (so each window's rank is known), with
 * the stored clip reconstructed here again from its bytes, scales and offsets by the formula of
 * mesh_texpca.h — a second implementation of the reference the viewers' shaders are held to.
 */
#include "mesh.h"
#include "mesh_demo_texclip.h"
#include "mesh_texpca.h"
#include "pca.h"
#include "test.h"
#include "texpca.h"

/* A smooth pattern in [-1, 1]: a product of cosines with frequency (a, b) and a channel tilt. */
static double pattern(uint32_t id, uint32_t x, uint32_t y, int ch) {
  double u = x * 0.13 * (1 + id % 3), v = y * 0.09 * (1 + id / 3 % 4);
  return cos(u + 0.7 * id + 0.3 * ch) * sin(v + 1.1 * id + 0.5);
}

/* A texture of W × H whose texels inside `rect` (all when NULL) move along `rank` patterns
 * starting at pattern `first`, amplitude `amp` · 0.75^k, frame weights varied per frame; the
 * mean is a grey ramp in [0.3, 0.7]. Adds into `frames` (F × H × W × 3), set_mean: write it. */
static void add_motion(float *frames, uint32_t F, uint32_t W, uint32_t H,
                       const mesh_texclip_rect *rect, uint32_t first, uint32_t rank, double amp) {
  for (uint32_t f = 0; f < F; f++)
    for (uint32_t y = 0; y < H; y++)
      for (uint32_t x = 0; x < W; x++) {
        if (rect && (x < rect->x || x >= rect->x + rect->w || y < rect->y || y >= rect->y + rect->h))
          continue;
        for (int ch = 0; ch < 3; ch++) {
          double v = 0;
          for (uint32_t k = 0; k < rank; k++)
            v += amp * pow(0.75, k) * sin(0.23 * (f + 1) * (first + k + 1) + first + k) *
                 pattern(first + k, x, y, ch);
          frames[3 * (((size_t)f * H + y) * W + x) + ch] += (float)v;
        }
      }
}

static float *mean_frames(uint32_t F, uint32_t W, uint32_t H) {
  float *fr = malloc(sizeof(float) * 3 * (size_t)F * W * H);
  for (uint32_t f = 0; f < F; f++)
    for (uint32_t y = 0; y < H; y++)
      for (uint32_t x = 0; x < W; x++)
        for (int ch = 0; ch < 3; ch++)
          fr[3 * (((size_t)f * H + y) * W + x) + ch] = (float)(0.3 + 0.4 * (x + y + ch) / (W + H + 2.0));
  return fr;
}

/* The oracle: texel (x, y) of frame f from the stored bytes, by the header's formula, with the
 * owning window found here by scanning the rectangles. Max Euclidean error over window r (all
 * when r == UINT32_MAX). */
static double stored_error(const mesh_texclip *c, const float *frames, uint32_t r) {
  double mx = 0;
  size_t plane = (size_t)c->width * c->height;
  for (uint32_t f = 0; f < c->frame_count; f++)
    for (uint32_t y = 0; y < c->height; y++)
      for (uint32_t x = 0; x < c->width; x++) {
        uint32_t o = 0;
        for (uint32_t i = 1; i < c->window_count; i++) {
          const mesh_texclip_window *w = &c->windows[i];
          if (x >= w->x && x < w->x + w->w && y >= w->y && y < w->y + w->h) o = i;
        }
        if (r != UINT32_MAX && o != r) continue;
        const mesh_texclip_window *w = &c->windows[o];
        double e = 0;
        for (int ch = 0; ch < 3; ch++) {
          double v = c->texels[4 * ((size_t)y * c->width + x) + ch] / 255.0;
          for (uint32_t k = w->first; k < w->first + w->count; k++) {
            const mesh_texclip_comp *cp = &c->comps[k];
            size_t at = plane * cp->layer + (size_t)(cp->y + y - w->y) * c->width + cp->x + x - w->x;
            v += c->weights[(size_t)f * c->component_count + k] *
                 (cp->offset + cp->scale * c->texels[4 * at + ch] / 255.0);
          }
          v = v < 0 ? 0 : v > 1 ? 1 : v;
          double d = v - frames[3 * (plane * f + (size_t)y * c->width + x) + ch];
          e += d * d;
        }
        mx = e > mx ? e : mx;
      }
  return sqrt(mx);
}

TEST(texpca_recovers_an_image_sequence_of_known_rank_within_the_bound) {
  const uint32_t F = 24, W = 64, H = 48;
  float *fr = mean_frames(F, W, H);
  add_motion(fr, F, W, H, NULL, 0, 3, 0.08);
  const double bound = 3.0 / 255;
  texpca_budget b = {.max_error = bound};
  mesh_texclip c;
  texpca_report rep;
  char err[256] = "";
  ASSERT_OK(texpca_build(fr, F, W, H, NULL, 0, &b, &c, &rep, err, sizeof(err)), err);
  ASSERT_EQ(rep.windows[0].rank, 3);
  ASSERT_EQ(c.component_count, 3);
  ASSERT_EQ(c.layers, 4);
  ASSERT(rep.budget_met);
  double e = stored_error(&c, fr, UINT32_MAX);
  ASSERT(e <= bound);
  ASSERT_NEAR(e, rep.max_error, 1e-6);
  /* Without the motion's smallest direction the bound is missed by far. */
  mesh_texclip two;
  b = (texpca_budget){.components = 2};
  ASSERT_OK(texpca_build(fr, F, W, H, NULL, 0, &b, &two, &rep, err, sizeof(err)), err);
  ASSERT_EQ(two.component_count, 2);
  ASSERT(stored_error(&two, fr, UINT32_MAX) > 4 * bound);
  /* A count over the rank is clamped to it. */
  mesh_texclip many;
  b = (texpca_budget){.components = 9};
  ASSERT_OK(texpca_build(fr, F, W, H, NULL, 0, &b, &many, &rep, err, sizeof(err)), err);
  ASSERT_EQ(many.component_count, 3);
  mesh_texclip_fini(&many);
  mesh_texclip_fini(&two);
  mesh_texclip_fini(&c);
  free(fr);
}

TEST(texpca_windows_each_meet_their_own_bound_with_the_components_they_need) {
  const uint32_t F = 30, W = 96, H = 64;
  mesh_texclip_rect rects[2] = {{8, 8, 30, 14}, {40, 40, 36, 16}}; /* "eyes", "mouth" */
  float *fr = mean_frames(F, W, H);
  add_motion(fr, F, W, H, NULL, 0, 1, 0.05);      /* the whole face: one direction */
  add_motion(fr, F, W, H, &rects[0], 3, 4, 0.1);  /* the eyes: four more */
  add_motion(fr, F, W, H, &rects[1], 7, 2, 0.1);  /* the mouth: two more */
  texpca_budget b[3] = {{.max_error = 3.0 / 255}, {.max_error = 3.0 / 255}, {.max_error = 4.0 / 255}};
  mesh_texclip c;
  texpca_report rep;
  char err[256] = "";
  ASSERT_OK(texpca_build(fr, F, W, H, rects, 2, b, &c, &rep, err, sizeof(err)), err);
  ASSERT_EQ(c.window_count, 3);
  ASSERT_EQ(rep.windows[0].rank, 1);
  ASSERT_EQ(rep.windows[1].rank, 5);
  ASSERT_EQ(rep.windows[2].rank, 3);
  ASSERT_EQ(rep.windows[0].texels, W * H - 30 * 14 - 36 * 16);
  for (uint32_t r = 0; r < 3; r++) {
    ASSERT(rep.windows[r].budget_met);
    ASSERT(stored_error(&c, fr, r) <= b[r].max_error);
    ASSERT_NEAR(stored_error(&c, fr, r), rep.windows[r].max_error, 1e-6);
    ASSERT_EQ(c.windows[r].count, rep.windows[r].rank); /* every direction is far over 3/255 */
  }
  /* Packed: 1 whole layer for window 0, then 5 + 3 small tiles fit in one more layer. */
  ASSERT_EQ(c.layers, 3);
  /* A looser bound on the eyes alone drops their smaller directions. */
  b[1].max_error = 0.2;
  mesh_texclip loose;
  ASSERT_OK(texpca_build(fr, F, W, H, rects, 2, b, &loose, &rep, err, sizeof(err)), err);
  ASSERT(loose.windows[1].count < c.windows[1].count);
  ASSERT(stored_error(&loose, fr, 1) <= 0.2);
  ASSERT_EQ(loose.windows[2].count, c.windows[2].count);
  mesh_texclip_fini(&loose);
  mesh_texclip_fini(&c);
  free(fr);
}

TEST(texpca_refuses_a_window_outside_the_texture_and_a_missing_budget) {
  const uint32_t F = 4, W = 16, H = 16;
  float *fr = mean_frames(F, W, H);
  mesh_texclip c;
  char err[256] = "";
  mesh_texclip_rect out = {10, 10, 8, 4};
  texpca_budget b[2] = {{.components = 1}, {.components = 1}};
  ASSERT_EQ(texpca_build(fr, F, W, H, &out, 1, b, &c, NULL, err, sizeof(err)), PCA_EINVAL);
  ASSERT_STR_CONTAINS(err, "window 1");
  ASSERT_EQ(c.texels == NULL, 1);
  b[0].components = 0;
  ASSERT_EQ(texpca_build(fr, F, W, H, NULL, 0, b, &c, NULL, err, sizeof(err)), PCA_EINVAL);
  ASSERT_STR_CONTAINS(err, "max_error");
  free(fr);
}

/* ---- the demo head's clip (shared/mesh_demo_texclip.c) ---------------------------------------- */

static uint32_t texel_at(const mesh *head, double x, double y, double z, uint32_t W, uint32_t H) {
  double u = 0.5 + atan2(x, z) / (2 * M_PI), v = (y - head->bbox_min[1]) / (head->bbox_max[1] - head->bbox_min[1]);
  return (uint32_t)((1 - v) * H) * W + (uint32_t)(u * W); /* row 0 is the top */
}

TEST(demo_texclip_blushes_the_cheeks_with_the_smile_and_furrows_the_brow_with_the_frown) {
  mesh *head = NULL;
  ASSERT_OK(mesh_demo_head(&head), NULL);
  const uint32_t W = 256, H = 256, F = 3;
  float smile[3] = {0, 1, 0}, frown[3] = {0, 0, 1}, *fr = NULL;
  mesh_texclip_rect rects[2];
  ASSERT_OK(mesh_demo_texclip(head, W, H, smile, frown, F, &fr, rects), NULL);
  size_t plane = (size_t)W * H;
  uint32_t cheek = texel_at(head, 0.038, -0.030, 0.070, W, H), back = texel_at(head, 0, 0, -0.1, W, H);
  const float *f0 = fr, *f1 = fr + 3 * plane, *f2 = fr + 6 * plane;
  ASSERT(f1[3 * cheek] - f0[3 * cheek] > 0.08);         /* redder */
  ASSERT(f1[3 * cheek + 1] - f0[3 * cheek + 1] < -0.08); /* less green */
  ASSERT_NEAR(f2[3 * cheek], f0[3 * cheek], 2e-3);      /* the frown leaves the cheek */
  for (int ch = 0; ch < 3; ch++) ASSERT_NEAR(f1[3 * back + ch], f0[3 * back + ch], 0);
  /* The brow: somewhere on it the frown darkens by a lot, and the cheek window holds the cheek. */
  double darkest = 0;
  for (uint32_t y = rects[1].y; y < rects[1].y + rects[1].h; y++)
    for (uint32_t x = rects[1].x; x < rects[1].x + rects[1].w; x++) {
      size_t i = 3 * ((size_t)y * W + x);
      darkest = fmin(darkest, f2[i] - f0[i]);
    }
  ASSERT(darkest < -0.15);
  ASSERT(cheek % W >= rects[0].x && cheek % W < rects[0].x + rects[0].w);
  ASSERT(cheek / W >= rects[0].y && cheek / W < rects[0].y + rects[0].h);
  free(fr);
  /* Thirty frames of smile and frown: each window needs at most the two weights' components and
   * the rest of the head none, within 2/255. */
  float sm[30], fw[30];
  for (int f = 0; f < 30; f++) {
    sm[f] = (float)fmax(0, sin(2 * M_PI * f / 30));
    fw[f] = (float)fmax(0, -sin(2 * M_PI * f / 30 + 0.3));
  }
  ASSERT_OK(mesh_demo_texclip(head, 128, 128, sm, fw, 30, &fr, rects), NULL);
  texpca_budget b[3] = {{.max_error = 2.0 / 255}, {.max_error = 2.0 / 255}, {.max_error = 2.0 / 255}};
  mesh_texclip c;
  texpca_report rep;
  char err[256] = "";
  ASSERT_OK(texpca_build(fr, 30, 128, 128, rects, 2, b, &c, &rep, err, sizeof(err)), err);
  ASSERT(rep.budget_met);
  ASSERT_EQ(c.windows[0].count, 0);
  ASSERT(c.windows[1].count >= 1 && c.windows[1].count <= 2);
  ASSERT(c.windows[2].count >= 1 && c.windows[2].count <= 2);
  ASSERT(stored_error(&c, fr, UINT32_MAX) <= 2.0 / 255);
  mesh_texclip_fini(&c);
  free(fr);
  mesh_destroy(head);
}
