/*
 * test_texclip.c — animated texture clips through a real deformd (texclip.upload, TEXCLIP and
 * TEXWEIGHTS, capability "texclip"): PNG frames made here from a known mean and pattern are
 * uploaded, and the texture a viewer rebuilds from what it was sent — by the formula of
 * docs/protocol.md §17, written again here — is the uploaded frame the player's clock names,
 * within the error the answer reports. A viewer without the capability gets neither frame.
 */
#include <math.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image_write.h>

#include "harness.h"
#include "proto_caps.h"
#include "proto_texclip.h"
#include "test.h"

static const char *const no_args[] = {"--demo", NULL};

#define TW 32
#define TH 24
#define TF 6

static float texel(uint32_t f, uint32_t x, uint32_t y, int ch) {
  double mean = 0.3 + 0.4 * (x + 2 * y + ch) / (TW + 2 * TH + 2.0);
  double a = 0.15 * sin(1.3 * f + 0.4), b = 0.08 * cos(0.7 * f);
  return (float)(mean + a * sin(0.4 * x + ch) * cos(0.3 * y) + b * cos(0.2 * x * y / 8.0 + ch));
}

static void sink(void *ctx, void *data, int size) {
  proto_buf *b = ctx;
  uint8_t *p = proto_buf_append(b, (size_t)size);
  if (p) memcpy(p, data, (size_t)size);
}

/* texclip.upload's params: TF PNG frames of texel(), base64. */
static char *upload_params(const char *name, const char *clip, double fps, const char *extra) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "session", "syd");
  cJSON_AddStringToObject(p, "name", name);
  cJSON_AddStringToObject(p, "clip", clip);
  cJSON_AddNumberToObject(p, "fps", fps);
  cJSON_AddNumberToObject(p, "max_error", 3.0 / 255);
  cJSON *frames = cJSON_AddArrayToObject(p, "frames");
  for (uint32_t f = 0; f < TF; f++) {
    uint8_t rgb[TW * TH * 3];
    for (uint32_t y = 0; y < TH; y++)
      for (uint32_t x = 0; x < TW; x++)
        for (int ch = 0; ch < 3; ch++) rgb[3 * (y * TW + x) + ch] = (uint8_t)lround(255 * texel(f, x, y, ch));
    proto_buf png;
    proto_buf_init(&png);
    stbi_write_png_to_func(sink, &png, TW, TH, 3, rgb, TW * 3);
    char *b64 = malloc(png.len / 3 * 4 + 8);
    EVP_EncodeBlock((unsigned char *)b64, png.data, (int)png.len);
    cJSON_AddItemToArray(frames, cJSON_CreateString(b64));
    free(b64);
    proto_buf_fini(&png);
  }
  if (extra) cJSON_AddItemToObject(p, "windows", cJSON_Parse(extra));
  char *s = cJSON_PrintUnformatted(p);
  cJSON_Delete(p);
  return s;
}

typedef struct seen {
  uint8_t clip[1 << 16]; /* the TEXCLIP payload */
  size_t clip_len;
  proto_texweights_entry w[PROTO_TEXWEIGHTS_MAX_CLIPS];
  uint32_t w_count, texclips, texweights;
} seen;

/* Reads frames until a WEIGHTS (or DELTA...) frame of version >= v has come, then one more when
 * `then_one` (the TEXWEIGHTS the same show() queued after it). Keeps the texture frames seen. */
static void read_until(client_conn *c, uint64_t v, int then_one, seen *s) {
  char err[256];
  int more = then_one;
  for (;;) {
    proto_header h;
    const uint8_t *p;
    ASSERT_OK(client_read_frame(c, 5000, &h, &p, err, sizeof(err)), err);
    if (h.type == PROTO_TEXCLIP) {
      ASSERT(h.length <= sizeof(s->clip));
      memcpy(s->clip, p, h.length);
      s->clip_len = h.length;
      s->texclips++;
    } else if (h.type == PROTO_TEXWEIGHTS) {
      ASSERT_OK(proto_decode_texweights(p, h.length, s->w, &s->w_count), NULL);
      s->texweights++;
    }
    if (h.session_version >= v && (h.type == PROTO_WEIGHTS || h.type == PROTO_SNAPSHOT)) {
      if (!more) return;
      more = 0;
      v = UINT64_MAX; /* the next frame ends it */
      ASSERT_OK(client_read_frame(c, 5000, &h, &p, err, sizeof(err)), err);
      ASSERT_EQ(h.type, PROTO_TEXWEIGHTS);
      ASSERT_OK(proto_decode_texweights(p, h.length, s->w, &s->w_count), NULL);
      s->texweights++;
      return;
    }
  }
}

/* The largest RGB distance between the texture rebuilt from the clip and weights seen and frame f. */
static double rebuilt_error(const seen *s, uint32_t f) {
  proto_texclip_window w[PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp k[PROTO_TEXCLIP_MAX_COMPONENTS];
  proto_texclip c = {.windows = w, .comps = k};
  ASSERT_OK(proto_decode_texclip(s->clip, s->clip_len, &c), NULL);
  ASSERT_EQ(s->w_count, 1);
  ASSERT_EQ(s->w[0].id, c.id);
  ASSERT_EQ(s->w[0].count, c.component_count);
  double worst = 0;
  size_t plane = (size_t)c.width * c.height;
  for (uint32_t y = 0; y < c.height; y++)
    for (uint32_t x = 0; x < c.width; x++) {
      uint32_t o = 0;
      for (uint32_t r = 1; r < c.window_count; r++)
        if (x >= w[r].x && x < w[r].x + w[r].w && y >= w[r].y && y < w[r].y + w[r].h) o = r;
      double e = 0;
      for (int ch = 0; ch < 3; ch++) {
        double v = s->w[0].mean * c.texels[3 * (y * c.width + x) + ch] / 255.0;
        for (uint32_t i = w[o].first; i < (uint32_t)w[o].first + w[o].count; i++) {
          size_t at = plane * k[i].layer + (size_t)(k[i].y + y - w[o].y) * c.width + k[i].x + x - w[o].x;
          v += s->w[0].weights[i] * (k[i].offset + k[i].scale * c.texels[3 * at + ch] / 255.0);
        }
        v = fmin(1, fmax(0, v));
        double d = v - texel(f, x, y, ch);
        e += d * d;
      }
      worst = fmax(worst, sqrt(e));
    }
  return worst;
}

static uint64_t version_now(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"syd\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static void join(harness *h, client_conn *c, uint32_t caps) {
  proto_hello_opts o = {.caps = caps};
  harness_connect(h, c, h->stream_port);
  ASSERT_OK(client_hello2(c, "syd", PROTO_ROLE_VIEWER, NULL, &o), NULL);
}

TEST(a_texture_clip_plays_on_its_clips_clock_and_viewers_rebuild_each_frame_within_the_bound) {
  harness h;
  harness_start(&h, "demo", no_args);
  char p[1200];
  snprintf(p, sizeof(p), "{\"session\":\"syd\",\"mesh\":\"%s\"}", harness_mesh_name(test_assimp_model("MD2/sydney.md2")));
  cJSON_Delete(harness_rpc_ok(&h, "session.create", p));
  cJSON_Delete(harness_rpc_ok(&h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"run\",\"components\":4}"));
  client_conn v, plain;
  join(&h, &v, PROTO_CAP_BIT(PROTO_CAP_TEXCLIP));
  join(&h, &plain, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  seen *s = calloc(1, sizeof(seen)), *sp = calloc(1, sizeof(seen));
  read_until(&v, version_now(&h), 0, s);
  read_until(&plain, version_now(&h), 0, sp);
  ASSERT_EQ(s->texclips, 0);
  /* Uploaded while the viewer watches: its TEXCLIP comes at once. */
  char *up = upload_params("skin", "run", 10, NULL);
  cJSON *r = harness_rpc_ok(&h, "texclip.upload", up);
  free(up);
  double bound = cJSON_GetObjectItem(r, "max_error")->valuedouble;
  ASSERT(bound <= 3.0 / 255);
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(r, "budget_met")));
  ASSERT_EQ(cJSON_GetObjectItem(r, "components")->valueint, 2); /* two moving patterns */
  ASSERT_EQ(cJSON_GetObjectItem(r, "width")->valueint, TW);
  cJSON_Delete(r);
  /* Seek through the vertex clip: each seek shows texture frame floor(time · fps). */
  for (uint32_t i = 1; i <= 4; i++) {
    snprintf(p, sizeof(p), "{\"session\":\"syd\",\"clip\":\"run\"}");
    if (i == 1) {
      cJSON_Delete(harness_rpc_ok(&h, "anim.play", p));
      cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"syd\"}"));
    }
    snprintf(p, sizeof(p), "{\"session\":\"syd\",\"frame\":%u}", i);
    cJSON_Delete(harness_rpc_ok(&h, "anim.seek", p));
    cJSON *l = harness_rpc_ok(&h, "anim.list", "{\"session\":\"syd\"}");
    double t = cJSON_GetObjectItem(cJSON_GetObjectItem(l, "player"), "time")->valuedouble;
    cJSON_Delete(l);
    uint32_t f = (uint32_t)fmin(TF - 1, floor(t * (double)10.0f));
    read_until(&v, version_now(&h), 1, s);
    ASSERT_EQ(s->texclips, 1);
    ASSERT(rebuilt_error(s, f) <= bound + 1e-6);
    ASSERT(f == 0 || rebuilt_error(s, f - 1) > 4 * bound); /* and not its neighbour */
  }
  /* A late joiner gets the clip and the latest weights right after its SNAPSHOT. */
  client_conn late;
  join(&h, &late, PROTO_CAP_BIT(PROTO_CAP_TEXCLIP));
  seen *sl = calloc(1, sizeof(seen));
  read_until(&late, version_now(&h), 0, sl);
  char err[256];
  proto_header hd;
  const uint8_t *pl;
  ASSERT_OK(client_read_frame(&late, 5000, &hd, &pl, err, sizeof(err)), err);
  ASSERT_EQ(hd.type, PROTO_TEXCLIP);
  ASSERT_OK(client_read_frame(&late, 5000, &hd, &pl, err, sizeof(err)), err);
  ASSERT_EQ(hd.type, PROTO_TEXWEIGHTS);
  ASSERT_OK(proto_decode_texweights(pl, hd.length, sl->w, &sl->w_count), NULL);
  ASSERT(memcmp(sl->w, s->w, sizeof(s->w[0])) == 0);
  /* The viewer without the capability saw neither kind. */
  read_until(&plain, version_now(&h), 0, sp);
  ASSERT_EQ(sp->texclips + sp->texweights, 0);
  /* Stopped: an empty TEXWEIGHTS (nothing shown). */
  cJSON_Delete(harness_rpc_ok(&h, "anim.stop", "{\"session\":\"syd\"}"));
  read_until(&v, version_now(&h), 1, s);
  ASSERT_EQ(s->w_count, 0);
  cJSON *list = harness_rpc_ok(&h, "texclip.list", "{\"session\":\"syd\"}");
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(list, "texclips")), 1);
  cJSON_Delete(list);
  free(s);
  free(sp);
  free(sl);
  harness_stop(&h);
}

TEST(texclip_upload_refuses_unknown_clips_bad_images_and_frames_of_two_sizes_with_reasons) {
  harness h;
  harness_start(&h, "demo", no_args);
  char p[1200], msg[512];
  snprintf(p, sizeof(p), "{\"session\":\"syd\",\"mesh\":\"%s\"}", harness_mesh_name(test_assimp_model("MD2/sydney.md2")));
  cJSON_Delete(harness_rpc_ok(&h, "session.create", p));
  char *up = upload_params("skin", "nope", 10, NULL);
  ASSERT_EQ(harness_rpc_err(&h, "texclip.upload", up, msg, sizeof(msg)), -32013);
  ASSERT_STR_CONTAINS(msg, "no clip 'nope'");
  free(up);
  ASSERT_EQ(harness_rpc_err(&h, "texclip.upload",
                            "{\"session\":\"syd\",\"name\":\"x\",\"clip\":\"run\",\"frames\":[\"iVBORw0K\",\"AAAA\"]}", msg,
                            sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "frame 0");
  up = upload_params("skin", "run", 10, "[{\"x\":30,\"y\":0,\"w\":8,\"h\":4}]");
  ASSERT_EQ(harness_rpc_err(&h, "texclip.upload", up, msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "window 1");
  free(up);
  /* Two sizes: frame 1 replaced by a 2 × 2 PNG. */
  up = upload_params("skin", "run", 10, NULL);
  cJSON *j = cJSON_Parse(up);
  free(up);
  uint8_t px[12] = {0};
  proto_buf png;
  proto_buf_init(&png);
  stbi_write_png_to_func(sink, &png, 2, 2, 3, px, 6);
  char b64[256];
  EVP_EncodeBlock((unsigned char *)b64, png.data, (int)png.len);
  proto_buf_fini(&png);
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(j, "frames"), 1, cJSON_CreateString(b64));
  up = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  ASSERT_EQ(harness_rpc_err(&h, "texclip.upload", up, msg, sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "frame 1 is 2 × 2");
  free(up);
  harness_stop(&h);
}
