/*
 * test_texclip.c — the viewer's texture clip pass (vw_texclip.c, GL_TEXTURE_2D_ARRAY and a
 * fragment shader) against the CPU reference, shared/mesh_texpca.c's mesh_texclip_frame_rgb8:
 * the same stored clip and weights, read back from the GPU, equal within 1/255 per channel.
 *
 * Needs an X display (tests/run.sh starts Xvfb; llvmpipe here).
 */
#include "test.h"
#include "mesh_texpca.h"
#include "vw_context.h"
#include "vw_texclip.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double rnd(void) { /* [0, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-53;
}

TEST(gpu_texclip_rebuilds_every_texel_as_the_cpu_reference_within_1_255) {
  vw_context ctx;
  char err[1024] = "";
  int rc = vw_context_init(&ctx, 64, 64, 1, "test-viewer-texclip", err, sizeof(err));
  if (rc != 0) test__fail(__FILE__, __LINE__, "no GL context (%d): %s", rc, err);
  const uint32_t W = 61, H = 47, F = 2;
  mesh_texclip_rect rects[2] = {{5, 4, 20, 13}, {30, 20, 25, 21}};
  uint32_t count[3] = {3, 4, 2};
  mesh_texclip c;
  ASSERT_OK(mesh_texclip_layout(&c, W, H, F, rects, 2, count, err, sizeof(err)), err);
  float *mean = malloc(sizeof(float) * 3 * W * H), *vals = malloc(sizeof(float) * 3 * W * H);
  for (uint32_t i = 0; i < 3 * W * H; i++) mean[i] = (float)(0.2 + 0.6 * rnd());
  mesh_texclip_set_mean(&c, mean);
  for (uint32_t r = 0; r < 3; r++)
    for (uint32_t k = 0; k < count[r]; k++) {
      for (uint32_t i = 0; i < 3 * c.windows[r].w * c.windows[r].h; i++) vals[i] = (float)(rnd() - 0.3);
      float w[2] = {(float)(0.6 * rnd() - 0.3), (float)(0.8 * rnd() - 0.4)}; /* some texels clamp */
      mesh_texclip_set_component(&c, r, k, vals, w);
    }
  ASSERT(c.layers >= 5);
  vw_texclip t;
  ASSERT_OK(vw_texclip_make(&t, &c, err, sizeof(err)), err);
  uint8_t *cpu = malloc(3 * W * H), *gpu = malloc(4 * W * H);
  for (uint32_t f = 0; f < F; f++) {
    const float *w = c.weights + (size_t)f * c.component_count;
    mesh_texclip_frame_rgb8(&c, w, cpu);
    vw_texclip_draw(&t, w, 1.0f);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, t.fbo);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, (GLsizei)W, (GLsizei)H, GL_RGBA, GL_UNSIGNED_BYTE, gpu);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, 0);
    int worst = 0, clamped = 0, exact = 0;
    for (uint32_t i = 0; i < W * H; i++)
      for (int ch = 0; ch < 3; ch++) {
        int d = abs((int)gpu[4 * i + ch] - (int)cpu[3 * i + ch]);
        worst = d > worst ? d : worst;
        clamped += cpu[3 * i + ch] == 0 || cpu[3 * i + ch] == 255;
        exact += d == 0;
      }
    fprintf(stderr, "  frame %u: worst %d/255, %d of %u channels exact, %d clamped\n", f, worst, exact, 3 * W * H,
            clamped);
    ASSERT(worst <= 1);
    ASSERT(exact > (int)(2 * W * H)); /* not merely close: nearly every channel equal */
  }
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  free(cpu);
  free(gpu);
  free(mean);
  free(vals);
  vw_texclip_free(&t);
  mesh_texclip_fini(&c);
  vw_context_fini(&ctx);
}
