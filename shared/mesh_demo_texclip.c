/*
 * mesh_demo_texclip.c — the demo head's animated texture clip: blush that follows its smile and
 * wrinkles that follow its frown, made procedurally, as F frames of RGB texels for texture PCA
 * (mesh_texpca.h, server/solve/texpca.h).
 *
 * The texture is in the demo head's UVs (mesh_demo.c): u = 0.5 + atan2(x, z) / 2π around the
 * head (the face looks at u = 0.5), v = the height between the head's lowest and highest
 * vertex; texel row 0 is the top (v = 1), as in image files and mesh_image. A feature of the face is placed by mapping its 3D point with the same formula, so the
 * blush lands on the cheeks the smile lifts and the wrinkles on the brow the frown lowers.
 *
 * Frame f: skin + smile[f] · blush (two Gaussian patches, redder and darker in G and B) + frown[f]
 * · wrinkles (horizontal furrows across the forehead and two vertical ones between the brows,
 * darker, fading out at the patch's edge). The clip has rank 2 at most (two weights), and the
 * windows it suggests (cheeks, brow) hold everything that moves: window 0 needs no component.
 *
 * DOES NOT compress or upload anything.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_demo_texclip.h"

#define PI 3.14159265358979323846

typedef struct uvmap {
  double y0, y1;
} uvmap;

static void to_uv(const uvmap *m, double x, double y, double z, double *u, double *v) {
  *u = 0.5 + atan2(x, z) / (2 * PI);
  *v = (y - m->y0) / (m->y1 - m->y0);
}

static double bell(double du, double dv, double su, double sv) {
  return exp(-0.5 * (du * du / (su * su) + dv * dv / (sv * sv)));
}

/* The skin: warm, with a little low-frequency mottling so the mean is not flat. */
static void skin(double u, double v, double rgb[3]) {
  double n = 0.03 * sin(41 * u + 3 * v) * cos(29 * v - 2 * u);
  rgb[0] = 0.86 + n;
  rgb[1] = 0.67 + 0.8 * n;
  rgb[2] = 0.57 + 0.6 * n;
}

/* Clamps a rectangle in [0, 1]² of UV to texels (row 0 at v = 1). */
static mesh_texclip_rect rect_of(double u0, double v0, double u1, double v1, uint32_t W, uint32_t H) {
  uint32_t x0 = (uint32_t)fmax(0, floor(u0 * W)), y0 = (uint32_t)fmax(0, floor((1 - v1) * H));
  uint32_t x1 = (uint32_t)fmin(W, ceil(u1 * W)), y1 = (uint32_t)fmin(H, ceil((1 - v0) * H));
  return (mesh_texclip_rect){x0, y0, x1 > x0 ? x1 - x0 : 1, y1 > y0 ? y1 - y0 : 1};
}

int mesh_demo_texclip(const mesh *head, uint32_t width, uint32_t height, const float *smile,
                      const float *frown, uint32_t frame_count, float **frames_out,
                      mesh_texclip_rect rects[2]) {
  *frames_out = NULL;
  if (width < 8 || height < 8 || width > 2048 || height > 2048 || frame_count == 0)
    return MESH_EINVAL;
  uvmap m = {head->bbox_min[1], head->bbox_max[1]};
  if (!(m.y1 > m.y0)) return MESH_EINVAL;
  size_t plane = (size_t)width * height;
  float *fr = malloc(sizeof(float) * 3 * plane * frame_count);
  float *blush = malloc(sizeof(float) * plane), *wrinkle = malloc(sizeof(float) * plane);
  if (!fr || !blush || !wrinkle) {
    free(fr);
    free(blush);
    free(wrinkle);
    return MESH_ENOMEM;
  }
  /* Feature places on the head (metres, mesh_demo.c's face): cheeks, brow centre. */
  double cu[2], cv, bu, bv, tmp;
  to_uv(&m, 0.038, -0.030, 0.070, &cu[0], &cv);
  to_uv(&m, -0.038, -0.030, 0.070, &cu[1], &tmp);
  to_uv(&m, 0.0, 0.040, 0.095, &bu, &bv);
  double su = 0.035, sv = 1.3 * su * width / height; /* round-ish patches on the texture */
  for (uint32_t y = 0; y < height; y++)
    for (uint32_t x = 0; x < width; x++) {
      double u = (x + 0.5) / width, v = 1.0 - (y + 0.5) / height; /* row 0 is the top (v = 1) */
      size_t i = (size_t)y * width + x;
      blush[i] = (float)(bell(u - cu[0], v - cv, su, sv) + bell(u - cu[1], v - cv, su, sv));
      double fade = bell(u - bu, v - bv, 0.07, 0.05);
      double furrows = 0.5 + 0.5 * cos(2 * PI * (v - bv) / 0.012);
      double glabella = bell(fabs(u - bu) - 0.008, v - (bv - 0.015), 0.003, 0.02);
      wrinkle[i] = (float)(fade * furrows * furrows + glabella);
    }
  for (uint32_t f = 0; f < frame_count; f++)
    for (uint32_t y = 0; y < height; y++)
      for (uint32_t x = 0; x < width; x++) {
        size_t i = (size_t)y * width + x;
        double rgb[3];
        skin((x + 0.5) / width, 1.0 - (y + 0.5) / height, rgb);
        double b = smile[f] * blush[i], w = frown[f] * wrinkle[i];
        rgb[0] += 0.10 * b - 0.22 * w;
        rgb[1] += -0.10 * b - 0.24 * w;
        rgb[2] += -0.06 * b - 0.22 * w;
        for (int ch = 0; ch < 3; ch++)
          fr[3 * (plane * f + i) + ch] = (float)(rgb[ch] < 0 ? 0 : rgb[ch] > 1 ? 1 : rgb[ch]);
      }
  free(blush);
  free(wrinkle);
  /* The cheeks' rectangle (both, 3σ) and the brow's (the furrows' fade, 3σ). */
  rects[0] = rect_of(fmin(cu[0], cu[1]) - 3 * su, cv - 3 * sv, fmax(cu[0], cu[1]) + 3 * su, cv + 3 * sv,
                     width, height);
  rects[1] = rect_of(bu - 0.21, bv - 0.15, bu + 0.21, bv + 0.15, width, height);
  *frames_out = fr;
  return 0;
}

void mesh_demo_smile_frown(uint32_t k, float *smile, float *frown) {
  double t = k * (double)MESH_DEMO_CLIP_STEP, e = sin(PI * t / 2);
  *smile = t < 2 ? (float)(e * e) : 0.0f;
  *frown = t >= 2 && t < 4 ? (float)(e * e) : 0.0f;
}

static int add_skin(mesh *head) {
  float zero = 0, *fr = NULL;
  mesh_texclip_rect rects[2];
  int rc = mesh_demo_texclip(head, MESH_DEMO_SKIN_W, MESH_DEMO_SKIN_H, &zero, &zero, 1, &fr, rects);
  if (rc) return rc;
  size_t plane = (size_t)MESH_DEMO_SKIN_W * MESH_DEMO_SKIN_H;
  mesh_image *im = malloc(sizeof(*im));
  uint8_t *rgba = malloc(4 * plane);
  char *name = malloc(sizeof("demo-skin.png"));
  if (!im || !rgba || !name) {
    free(fr);
    free(im);
    free(rgba);
    free(name);
    return MESH_ENOMEM;
  }
  for (size_t i = 0; i < plane; i++) {
    for (int ch = 0; ch < 3; ch++) rgba[4 * i + ch] = (uint8_t)lrintf(fr[3 * i + ch] * 255.0f);
    rgba[4 * i + 3] = 255;
  }
  free(fr);
  memcpy(name, "demo-skin.png", sizeof("demo-skin.png"));
  *im = (mesh_image){.name = name, .width = MESH_DEMO_SKIN_W, .height = MESH_DEMO_SKIN_H, .rgba = rgba};
  head->images = im;
  head->image_count = 1;
  head->submeshes[0].texture = 1;
  return 0;
}

static int add_clip(mesh *head) {
  const char *names[4] = {"smile_L", "smile_R", "frown_L", "frown_R"};
  int idx[4];
  for (int i = 0; i < 4; i++)
    if ((idx[i] = mesh_find_target(head, names[i])) < 0) return MESH_EINVAL;
  uint32_t T = head->target_count, K = MESH_DEMO_CLIP_KEYS;
  mesh_clip *clips = realloc(head->clips, sizeof(*clips) * (head->clip_count + 1));
  if (!clips) return MESH_ENOMEM;
  head->clips = clips;
  mesh_clip *c = &clips[head->clip_count];
  *c = (mesh_clip){.key_count = K, .target_count = T};
  c->name = malloc(sizeof("smile-frown"));
  c->times = malloc(sizeof(float) * K);
  c->weights = calloc((size_t)K * T, sizeof(float));
  if (!c->name || !c->times || !c->weights) {
    free(c->name);
    free(c->times);
    free(c->weights);
    return MESH_ENOMEM;
  }
  memcpy(c->name, "smile-frown", sizeof("smile-frown"));
  for (uint32_t k = 0; k < K; k++) {
    float smile, frown;
    mesh_demo_smile_frown(k, &smile, &frown);
    c->times[k] = k * MESH_DEMO_CLIP_STEP;
    float *w = c->weights + (size_t)k * T;
    w[idx[0]] = w[idx[1]] = smile;
    w[idx[2]] = w[idx[3]] = frown;
  }
  head->clip_count++;
  return 0;
}

int mesh_demo_dress(mesh *head) {
  if (head->image_count || head->submesh_count == 0 || !head->uvs) return MESH_EINVAL;
  for (uint32_t i = 0; i < head->clip_count; i++)
    if (strcmp(head->clips[i].name, "smile-frown") == 0) return MESH_EINVAL;
  int rc = add_clip(head);
  if (rc) return rc;
  if ((rc = add_skin(head)) != 0) { /* the clip goes again: the head as it was */
    mesh_clip *c = &head->clips[--head->clip_count];
    free(c->name);
    free(c->times);
    free(c->weights);
  }
  return rc;
}
