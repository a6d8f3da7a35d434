/*
 * test_texpca.c — the stored form of an animated texture clip (shared/mesh_texpca.c): the packed
 * window layout keeps every tile inside its layer and apart from the others, and quantising a
 * component to bytes with its scale and offset costs at most half a step.
 */
#include "mesh.h"
#include "mesh_texpca.h"
#include "test.h"

static int overlap(uint32_t ax, uint32_t aw, uint32_t bx, uint32_t bw) {
  return ax < bx + bw && bx < ax + aw;
}

TEST(texclip_layout_packs_window_tiles_inside_layers_without_overlap) {
  mesh_texclip_rect rects[5] = {{0, 0, 40, 20}, {50, 10, 30, 30}, {10, 60, 64, 8},
                                {100, 100, 28, 28}, {5, 90, 17, 33}};
  uint32_t count[6] = {3, 6, 9, 4, 7, 5};
  mesh_texclip c;
  char err[256] = "";
  ASSERT_OK(mesh_texclip_layout(&c, 128, 128, 10, rects, 5, count, err, sizeof(err)), err);
  ASSERT_EQ(c.component_count, 34);
  for (uint32_t k = 0; k < 3; k++) { /* window 0: whole layers after the mean */
    ASSERT_EQ(c.comps[k].layer, 1 + k);
    ASSERT_EQ(c.comps[k].x + c.comps[k].y, 0);
  }
  uint32_t area = 0;
  for (uint32_t r = 1; r < 6; r++) area += c.windows[r].w * c.windows[r].h * c.windows[r].count;
  for (uint32_t r = 1; r < 6; r++)
    for (uint32_t k = 0; k < c.windows[r].count; k++) {
      const mesh_texclip_comp *a = &c.comps[c.windows[r].first + k];
      ASSERT(a->layer > 3 && a->layer < c.layers);
      ASSERT(a->x + c.windows[r].w <= 128 && a->y + c.windows[r].h <= 128);
      for (uint32_t s = 1; s < 6; s++)
        for (uint32_t j = 0; j < c.windows[s].count; j++) {
          const mesh_texclip_comp *b = &c.comps[c.windows[s].first + j];
          if (a == b || a->layer != b->layer) continue;
          ASSERT(!(overlap(a->x, c.windows[r].w, b->x, c.windows[s].w) &&
                   overlap(a->y, c.windows[r].h, b->y, c.windows[s].h)));
        }
    }
  /* Packed, not one layer per component: the tiles' area in few more layers than it needs. */
  uint32_t need = (area + 128 * 128 - 1) / (128 * 128);
  ASSERT(c.layers - 4 <= need + 1);
  ASSERT(c.layers - 4 < 31);
  mesh_texclip_fini(&c);
}

TEST(texclip_texel_rebuilds_quantised_components_within_half_a_step) {
  const uint32_t W = 32, H = 24, F = 3;
  mesh_texclip_rect rect = {4, 6, 10, 8};
  uint32_t count[2] = {1, 2};
  mesh_texclip c;
  char err[256] = "";
  ASSERT_OK(mesh_texclip_layout(&c, W, H, F, &rect, 1, count, err, sizeof(err)), err);
  float *mean = malloc(sizeof(float) * 3 * W * H), *big = malloc(sizeof(float) * 3 * W * H);
  for (uint32_t i = 0; i < 3 * W * H; i++) {
    mean[i] = (float)(0.5 + 0.2 * sin(i * 0.1));
    big[i] = (float)(0.03 * cos(i * 0.05) - 0.01);
  }
  float small[2][3 * 10 * 8];
  for (uint32_t k = 0; k < 2; k++)
    for (uint32_t i = 0; i < 3 * 10 * 8; i++) small[k][i] = (float)(0.1 * sin(i * 0.3 + k) + k);
  float w0[3] = {1, -2, 0.5f}, w1[3] = {0.5f, 0.25f, -1}, w2[3] = {-1, 1, 2};
  mesh_texclip_set_mean(&c, mean);
  mesh_texclip_set_component(&c, 0, 0, big, w0);
  mesh_texclip_set_component(&c, 1, 0, small[0], w1);
  mesh_texclip_set_component(&c, 1, 1, small[1], w2);
  ASSERT_NEAR(c.comps[2].offset, 0.9, 0.01); /* component 2's range is about 0.9 .. 1.1 */
  ASSERT_NEAR(c.comps[2].scale, 0.2, 0.01);
  for (uint32_t f = 0; f < F; f++)
    for (uint32_t y = 0; y < H; y++)
      for (uint32_t x = 0; x < W; x++) {
        float rgb[3];
        mesh_texclip_texel(&c, c.weights + 3 * f, x, y, rgb);
        int inside = x >= 4 && x < 14 && y >= 6 && y < 14;
        ASSERT_EQ(mesh_texclip_owner(&c, x, y), inside);
        for (int ch = 0; ch < 3; ch++) {
          size_t i = 3 * ((size_t)y * W + x) + ch;
          double want = mean[i], tol = 0.5 / 255;
          if (inside) {
            size_t j = 3 * ((size_t)(y - 6) * 10 + x - 4) + ch;
            want += w1[f] * small[0][j] + w2[f] * small[1][j];
            tol += (fabs(w1[f]) * c.comps[1].scale + fabs(w2[f]) * c.comps[2].scale) * 0.5 / 255;
          } else {
            want += w0[f] * big[i];
            tol += fabs(w0[f]) * c.comps[0].scale * 0.5 / 255;
          }
          want = want < 0 ? 0 : want > 1 ? 1 : want;
          ASSERT_NEAR(rgb[ch], want, tol + 1e-6);
        }
      }
  free(mean);
  free(big);
  mesh_texclip_fini(&c);
}

TEST(texclip_layout_refuses_too_many_components_and_windows_off_the_texture) {
  mesh_texclip c;
  char err[256] = "";
  uint32_t count[2] = {60, 10};
  mesh_texclip_rect rect = {0, 0, 8, 8};
  ASSERT_EQ(mesh_texclip_layout(&c, 64, 64, 5, &rect, 1, count, err, sizeof(err)), MESH_EINVAL);
  ASSERT_STR_CONTAINS(err, "70 components");
  count[0] = 1;
  rect.x = 60;
  ASSERT_EQ(mesh_texclip_layout(&c, 64, 64, 5, &rect, 1, count, err, sizeof(err)), MESH_EINVAL);
  ASSERT_STR_CONTAINS(err, "window 1");
  ASSERT(c.texels == NULL && c.window_count == 0);
}
