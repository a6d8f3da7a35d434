/*
 * test_texclip.c — animated texture clips through a real deformd (texclip.upload, TEXCLIP and
 * TEXWEIGHTS, capability "texclip"): PNG frames made here from a known mean and pattern are
 * uploaded, and the texture a viewer rebuilds from what it was sent — by the formula of
 * docs/protocol.md §18, written again here — is the uploaded frame the player's clock names,
 * within the error the answer reports. A viewer without the capability gets neither frame.
 */
#include <math.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image_write.h>

#include <unistd.h>

#include "harness.h"
#include "mesh_demo_texclip.h"
#include "mesh_io.h"
#include "proto_caps.h"
#include "proto_texclip.h"
#include "test.h"

static const char *const no_args[] = {"--demo", NULL};

#define TW 32
#define TH 24
#define TF 6

static uint32_t shift = 0; /* a second clip's frames: texel(f + shift) */

static float texel(uint32_t f, uint32_t x, uint32_t y, int ch) {
  f += shift;
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
  uint8_t clip[1 << 21]; /* the TEXCLIP payload (the demo's is about 0.5 MB) */
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

/* The texture a viewer rebuilds from the clip and weights seen (docs/protocol.md §18): 3 floats a
 * texel in [0, 1], malloc'ed; *width and *height its size. */
static float *rebuild(const seen *s, uint32_t *width, uint32_t *height) {
  proto_texclip_window w[PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp k[PROTO_TEXCLIP_MAX_COMPONENTS];
  proto_texclip c = {.windows = w, .comps = k};
  ASSERT_OK(proto_decode_texclip(s->clip, s->clip_len, &c), NULL);
  ASSERT_EQ(s->w_count, 1);
  ASSERT_EQ(s->w[0].id, c.id);
  ASSERT_EQ(s->w[0].count, c.component_count);
  size_t plane = (size_t)c.width * c.height;
  float *out = malloc(sizeof(float) * 3 * plane);
  ASSERT(out);
  for (uint32_t y = 0; y < c.height; y++)
    for (uint32_t x = 0; x < c.width; x++) {
      uint32_t o = 0;
      for (uint32_t r = 1; r < c.window_count; r++)
        if (x >= w[r].x && x < w[r].x + w[r].w && y >= w[r].y && y < w[r].y + w[r].h) o = r;
      for (int ch = 0; ch < 3; ch++) {
        double v = s->w[0].mean * c.texels[3 * (y * c.width + x) + ch] / 255.0;
        for (uint32_t i = w[o].first; i < (uint32_t)w[o].first + w[o].count; i++) {
          size_t at = plane * k[i].layer + (size_t)(k[i].y + y - w[o].y) * c.width + k[i].x + x - w[o].x;
          v += s->w[0].weights[i] * (k[i].offset + k[i].scale * c.texels[3 * at + ch] / 255.0);
        }
        out[3 * (y * c.width + x) + ch] = (float)fmin(1, fmax(0, v));
      }
    }
  *width = c.width;
  *height = c.height;
  return out;
}

/* The largest RGB distance between the texture rebuilt from the clip and weights seen and frame f. */
static double rebuilt_error(const seen *s, uint32_t f) {
  uint32_t W, H;
  float *t = rebuild(s, &W, &H);
  double worst = 0;
  for (uint32_t y = 0; y < H; y++)
    for (uint32_t x = 0; x < W; x++) {
      double e = 0;
      for (int ch = 0; ch < 3; ch++) {
        double d = t[3 * (y * W + x) + ch] - texel(f, x, y, ch);
        e += d * d;
      }
      worst = fmax(worst, sqrt(e));
    }
  free(t);
  return worst;
}

static const char *watched = "syd"; /* the session version_now() and join() name */

static uint64_t version_now(harness *h) {
  char p[300];
  snprintf(p, sizeof(p), "{\"session\":\"%s\"}", watched);
  cJSON *r = harness_rpc_ok(h, "state.get", p);
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static void join(harness *h, client_conn *c, uint32_t caps) {
  proto_hello_opts o = {.caps = caps};
  harness_connect(h, c, h->stream_port);
  ASSERT_OK(client_hello2(c, watched, PROTO_ROLE_VIEWER, NULL, &o), NULL);
}

/* Session "syd": sydney.md2, its clip "run" compressed (the clock texture clips follow). */
static void open_syd(harness *h) {
  char p[1200];
  snprintf(p, sizeof(p), "{\"session\":\"syd\",\"mesh\":\"%s\"}", harness_mesh_name(test_assimp_model("MD2/sydney.md2")));
  cJSON_Delete(harness_rpc_ok(h, "session.create", p));
  cJSON_Delete(harness_rpc_ok(h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"run\",\"components\":4}"));
}

TEST(a_texture_clip_plays_on_its_clips_clock_and_viewers_rebuild_each_frame_within_the_bound) {
  harness h;
  harness_start(&h, "demo", no_args);
  char p[1200];
  open_syd(&h);
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
  client_close(&v);
  client_close(&plain);
  client_close(&late);
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

/* The texture one TEXWEIGHTS frame shows (every entry summed, then clamped) against the mix
 * m_a · frame fa of clip a + m_b · frame fb of clip b (shift 0 and 10). */
static double mixed_error(const uint8_t *clip_a, size_t na, const uint8_t *clip_b, size_t nb,
                          const proto_texweights_entry *e, uint32_t count, uint32_t fa, uint32_t fb) {
  proto_texclip_window w[2][PROTO_TEXCLIP_MAX_WINDOWS];
  proto_texclip_comp k[2][PROTO_TEXCLIP_MAX_COMPONENTS];
  proto_texclip c[2] = {{.windows = w[0], .comps = k[0]}, {.windows = w[1], .comps = k[1]}};
  ASSERT_OK(proto_decode_texclip(clip_a, na, &c[0]), NULL);
  ASSERT_OK(proto_decode_texclip(clip_b, nb, &c[1]), NULL);
  double worst = 0;
  size_t plane = (size_t)TW * TH;
  for (uint32_t y = 0; y < TH; y++)
    for (uint32_t x = 0; x < TW; x++) {
      double d2 = 0;
      for (int ch = 0; ch < 3; ch++) {
        double v = 0, want = 0;
        for (uint32_t i = 0; i < count; i++) {
          const proto_texclip *cc = &c[e[i].id == c[0].id ? 0 : 1];
          v += e[i].mean * cc->texels[3 * (y * TW + x) + ch] / 255.0;
          for (uint32_t j = 0; j < cc->component_count; j++) /* window 0 only: no windows here */
            v += e[i].weights[j] *
                 (cc->comps[j].offset + cc->comps[j].scale * cc->texels[3 * (plane * cc->comps[j].layer + y * TW + x) + ch] / 255.0);
          shift = cc == &c[0] ? 0 : 10;
          want += e[i].mean * texel(cc == &c[0] ? fa : fb, x, y, ch);
          shift = 0;
        }
        v = fmin(1, fmax(0, v));
        d2 += (v - want) * (v - want);
      }
      worst = fmax(worst, sqrt(d2));
    }
  return worst;
}

TEST(an_anim_blend_crossfades_the_texture_clips_in_weight_space) {
  harness h;
  harness_start(&h, "demo", no_args);
  open_syd(&h);
  cJSON_Delete(harness_rpc_ok(&h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"stand\",\"components\":4,\"name\":\"idle\"}"));
  char *up = upload_params("a", "run", 10, NULL);
  cJSON_Delete(harness_rpc_ok(&h, "texclip.upload", up));
  free(up);
  shift = 10;
  up = upload_params("b", "stand", 10, NULL);
  shift = 0;
  cJSON_Delete(harness_rpc_ok(&h, "texclip.upload", up));
  free(up);
  client_conn v;
  join(&h, &v, PROTO_CAP_BIT(PROTO_CAP_TEXCLIP));
  uint8_t *clips[2] = {malloc(1 << 16), malloc(1 << 16)};
  size_t lens[2] = {0, 0};
  char err[256];
  proto_header hd;
  const uint8_t *pl;
  for (int got = 0; got < 2;) { /* after the SNAPSHOT: the two clips' TEXCLIP frames, in upload order */
    ASSERT_OK(client_read_frame(&v, 5000, &hd, &pl, err, sizeof(err)), err);
    if (hd.type != PROTO_TEXCLIP) continue;
    memcpy(clips[got], pl, hd.length);
    lens[got++] = hd.length;
  }
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"syd\",\"clip\":\"run\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.blend", "{\"session\":\"syd\",\"clip\":\"stand\",\"duration\":3.0}"));
  /* (3 s: long enough that the player's ticks land inside the fade even on a loaded machine.)
   * Every TEXWEIGHTS until the fade is over: one entry (a, then b) or two whose means sum to 1,
   * and the texture each shows is the mix of one frame of a and one of b. */
  uint32_t mixes = 0, b_alone = 0;
  while (!b_alone) {
    ASSERT_OK(client_read_frame(&v, 5000, &hd, &pl, err, sizeof(err)), err);
    if (hd.type != PROTO_TEXWEIGHTS) continue;
    proto_texweights_entry e[PROTO_TEXWEIGHTS_MAX_CLIPS];
    uint32_t n = 0;
    ASSERT_OK(proto_decode_texweights(pl, hd.length, e, &n), NULL);
    ASSERT(n == 1 || n == 2);
    if (n == 2) {
      ASSERT_NEAR(e[0].mean + e[1].mean, 1, 1e-6);
      ASSERT(e[0].id != e[1].id);
    }
    double best = 1e9;
    for (uint32_t fa = 0; fa < TF; fa++)
      for (uint32_t fb = 0; fb < TF; fb++) best = fmin(best, mixed_error(clips[0], lens[0], clips[1], lens[1], e, n, fa, fb));
    ASSERT(best <= 3.0 / 255);
    mixes += n == 2 && e[0].mean > 0 && e[0].mean < 1;
    b_alone = n == 1 && e[0].mean == 1 && mixes > 0 && e[0].id == proto_load_u32(clips[1]);
  }
  ASSERT(mixes >= 1);
  free(clips[0]);
  free(clips[1]);
  client_close(&v);
  harness_stop(&h);
}

/* The TEXCLIP frame a fresh viewer of "syd" receives after its SNAPSHOT (malloc'ed; *n bytes). */
static uint8_t *joined_texclip(harness *h, size_t *n) {
  client_conn v;
  join(h, &v, PROTO_CAP_BIT(PROTO_CAP_TEXCLIP));
  char err[256];
  for (;;) {
    proto_header hd;
    const uint8_t *pl;
    ASSERT_OK(client_read_frame(&v, 5000, &hd, &pl, err, sizeof(err)), err);
    if (hd.type != PROTO_TEXCLIP) continue;
    uint8_t *out = malloc(hd.length);
    memcpy(out, pl, hd.length);
    *n = hd.length;
    client_close(&v);
    return out;
  }
}

TEST(a_texture_clip_is_stored_with_its_session_and_served_the_same_after_a_restart) {
  const char *dir = test_tmp_path("texclip-store");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  open_syd(&h);
  char *up = upload_params("skin", "run", 10, "[{\"x\":4,\"y\":3,\"w\":10,\"h\":8,\"max_error\":0.0117}]");
  cJSON_Delete(harness_rpc_ok(&h, "texclip.upload", up));
  free(up);
  cJSON *before = harness_rpc_ok(&h, "texclip.list", "{\"session\":\"syd\"}");
  size_t n0 = 0, n1 = 0;
  uint8_t *f0 = joined_texclip(&h, &n0);
  harness_stop(&h);
  harness_start_on(&h, dir, "syd", "--demo");
  cJSON *after = harness_rpc_ok(&h, "texclip.list", "{\"session\":\"syd\"}");
  ASSERT(cJSON_Compare(before, after, 1));
  uint8_t *f1 = joined_texclip(&h, &n1);
  ASSERT_EQ(n1, n0);
  ASSERT(memcmp(f0, f1, n0) == 0);
  /* It still plays: a seek shows the frame the clock names, rebuilt within the bound. */
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"syd\",\"clip\":\"run\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"syd\"}"));
  client_conn v;
  join(&h, &v, PROTO_CAP_BIT(PROTO_CAP_TEXCLIP));
  seen *s = calloc(1, sizeof(seen));
  read_until(&v, version_now(&h), 0, s);
  cJSON_Delete(harness_rpc_ok(&h, "anim.seek", "{\"session\":\"syd\",\"frame\":3}"));
  cJSON *l = harness_rpc_ok(&h, "anim.list", "{\"session\":\"syd\"}");
  double t = cJSON_GetObjectItem(cJSON_GetObjectItem(l, "player"), "time")->valuedouble;
  cJSON_Delete(l);
  read_until(&v, version_now(&h), 1, s);
  ASSERT(rebuilt_error(s, (uint32_t)fmin(TF - 1, floor(t * (double)10.0f))) <= 3.0 / 255 + 1e-6);
  free(s);
  free(f0);
  free(f1);
  cJSON_Delete(before);
  cJSON_Delete(after);
  client_close(&v);
  harness_stop(&h);
}

/* The mean redness, R − (G + B) / 2, of a texture's texels in rectangle r (3 floats a texel). */
static double redness(const float *t, uint32_t width, mesh_texclip_rect r) {
  double sum = 0;
  for (uint32_t y = r.y; y < r.y + r.h; y++)
    for (uint32_t x = r.x; x < r.x + r.w; x++) {
      const float *p = t + 3 * ((size_t)y * width + x);
      sum += p[0] - 0.5 * (p[1] + p[2]);
    }
  return sum / ((double)r.w * r.h);
}

/* --demo's session (mesh_demo_dress, srv_texclip_demo): a viewer granted "texclip" gets the texture
 * clip "blush-wrinkles" following "smile-frown", and what it rebuilds at the smile is redder in
 * the cheeks than at neutral by what mesh_demo_texclip's frames themselves say (the CPU
 * reference, made again here from the head), within the clip's error bound. */
TEST(the_demo_sessions_texture_clip_blushes_its_cheeks_with_the_smile_by_the_references_amount) {
  harness h;
  harness_start(&h, "demo", no_args);
  watched = "demo";
  cJSON *list = NULL;
  for (int i = 0; i < 3000; i++) { /* compressed on the pool after the session opened */
    cJSON_Delete(list);
    list = harness_rpc_ok(&h, "texclip.list", "{\"session\":\"demo\"}");
    if (cJSON_GetArraySize(cJSON_GetObjectItem(list, "texclips")) > 0) break;
    usleep(10000);
  }
  const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(list, "texclips"), 0);
  ASSERT(tc);
  ASSERT(strcmp(cJSON_GetObjectItem(tc, "name")->valuestring, "blush-wrinkles") == 0);
  ASSERT(strcmp(cJSON_GetObjectItem(tc, "clip")->valuestring, "smile-frown") == 0);
  ASSERT_EQ(cJSON_GetObjectItem(tc, "frames")->valueint, (int)MESH_DEMO_CLIP_KEYS);
  ASSERT_EQ(cJSON_GetObjectItem(tc, "width")->valueint, (int)MESH_DEMO_SKIN_W);
  double bound = cJSON_GetObjectItem(tc, "max_error")->valuedouble;
  ASSERT(bound <= 2.0 / 255 + 1e-9);
  client_conn v;
  join(&h, &v, PROTO_CAP_BIT(PROTO_CAP_TEXCLIP));
  seen *s = calloc(1, sizeof(seen));
  read_until(&v, version_now(&h), 0, s);
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"demo\",\"clip\":\"smile-frown\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"demo\"}"));
  /* The reference: the head's frames at neutral and at the smile (1 s: smile 1, frown 0). */
  mesh *head = NULL;
  ASSERT_OK(mesh_demo_head(&head), NULL);
  float smile[2], frown[2], *ref = NULL;
  mesh_texclip_rect rects[2];
  double red[2];
  uint32_t keys[2] = {0, 10}; /* neutral, the smile; seen in the other order (a seek to where the
                               * paused player already is would send no TEXWEIGHTS) */
  for (int i = 0; i < 2; i++) mesh_demo_smile_frown(keys[i], &smile[i], &frown[i]);
  ASSERT(smile[1] == 1.0f && frown[1] == 0.0f && smile[0] == 0.0f);
  ASSERT_OK(mesh_demo_texclip(head, MESH_DEMO_SKIN_W, MESH_DEMO_SKIN_H, smile, frown, 2, &ref, rects), NULL);
  size_t plane = (size_t)MESH_DEMO_SKIN_W * MESH_DEMO_SKIN_H;
  double ref_red = redness(ref + 3 * plane, MESH_DEMO_SKIN_W, rects[0]) - redness(ref, MESH_DEMO_SKIN_W, rects[0]);
  ASSERT(ref_red > 0.03); /* the smile's blush is there to see (and more than the tolerance below) */
  for (int i = 1; i >= 0; i--) {
    char p[200];
    snprintf(p, sizeof(p), "{\"session\":\"demo\",\"time\":%.3f}", keys[i] * (double)MESH_DEMO_CLIP_STEP);
    cJSON_Delete(harness_rpc_ok(&h, "anim.seek", p));
    read_until(&v, version_now(&h), 1, s);
    ASSERT_EQ(s->texclips, 1);
    uint32_t W, H;
    float *t = rebuild(s, &W, &H);
    ASSERT(W == MESH_DEMO_SKIN_W && H == MESH_DEMO_SKIN_H);
    red[i] = redness(t, W, rects[0]);
    free(t);
  }
  /* Each texel within the bound (an RGB distance d): its redness R − (G + B)/2 moves at most
   * √1.5 · d, so a difference of two within 2.5 · bound (measured: 0.0345 both, bound 1.24/255). */
  ASSERT(fabs((red[1] - red[0]) - ref_red) <= 2.5 * bound + 1e-6);
  /* server.stats names the texture frames it counted (it read past its table before) */
  cJSON *st = harness_rpc_ok(&h, "server.stats", "{}");
  const cJSON *by = cJSON_GetObjectItem(st, "bytes_by_type");
  ASSERT(cJSON_GetObjectItem(by, "TEXCLIP") && cJSON_GetObjectItem(by, "TEXWEIGHTS"));
  ASSERT_EQ(cJSON_GetObjectItem(by, "TEXCLIP")->valueint, cJSON_GetObjectItem(tc, "texclip_bytes")->valueint);
  cJSON_Delete(st);
  free(ref);
  mesh_destroy(head);
  free(s);
  cJSON_Delete(list);
  client_close(&v);
  harness_stop(&h);
}
