/*
 * test_texture_upload.c — textured meshes a client brings (mesh.upload, several files each by its
 * name), end to end: session.create, a viewer's TEXTURE frames, a kill -9 and the restore, and
 * session.export's GLB. The oracle is stb_image's own decode of the source image files (and, for
 * a GLB, of the PNG bytes in its binary chunk); a replica's image must equal it texel for texel.
 * And bad texture files — not an image, truncated, over the side limit — fail that
 * session.create with a reason naming the texture, while the server keeps serving.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>
#include <stb_image_write.h>

#include "harness.h"
#include "proto_caps.h"
#include "test.h"

static const proto_hello_opts with_texture = {.caps = PROTO_CAP_BIT(PROTO_CAP_TEXTURE)};

/* mesh.upload of `n` bytes as `name`, in one chunk. */
static void upload(harness *h, const char *name, const uint8_t *bytes, size_t n) {
  char *b64 = malloc(n / 3 * 4 + 8);
  EVP_EncodeBlock((unsigned char *)b64, bytes, (int)n);
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "name", name);
  cJSON_AddStringToObject(p, "data", b64);
  cJSON_AddNumberToObject(p, "offset", 0);
  cJSON_AddBoolToObject(p, "final", 1);
  char *params = cJSON_PrintUnformatted(p);
  harness_rpc_done(h, "mesh.upload", params);
  free(params);
  cJSON_Delete(p);
  free(b64);
}

static void upload_file(harness *h, const char *name, const char *path) {
  size_t n = 0;
  uint8_t *bytes = test_read_file(path, &n);
  ASSERT(bytes != NULL);
  upload(h, name, bytes, n);
  free(bytes);
}

static void upload_text(harness *h, const char *name, const char *text) {
  upload(h, name, (const uint8_t *)text, strlen(text));
}

/* A viewer's replica of `session` once MATERIALS and every image have come. */
static void join_textured(harness *h, const char *session, client_conn *c, client_replica *r) {
  harness_join2(h, c, r, session, PROTO_ROLE_VIEWER, NULL, &with_texture);
  char err[256];
  while (r->texture_serial == 0 || r->texture_serial < 1 + r->mesh->image_count) {
    proto_header hd;
    const uint8_t *p;
    ASSERT_OK(client_read_frame(c, 20000, &hd, &p, err, sizeof(err)), err);
    ASSERT_OK(client_replica_apply(r, &hd, p, err, sizeof(err)), err);
  }
}

/* The image named `name` (a suffix of its name) in m, or NULL. */
static const mesh_image *image_named(const mesh *m, const char *name) {
  for (uint32_t i = 0; i < m->image_count; i++) {
    size_t a = strlen(m->images[i].name), b = strlen(name);
    if (a >= b && strcmp(m->images[i].name + a - b, name) == 0) return &m->images[i];
  }
  return NULL;
}

/* im's texels against stb_image's decode of `bytes` (RGBA). */
static void assert_pixels(const mesh_image *im, const uint8_t *bytes, size_t n) {
  int w = 0, hgt = 0, ch = 0;
  uint8_t *want = stbi_load_from_memory(bytes, (int)n, &w, &hgt, &ch, 4);
  ASSERT(want != NULL && im != NULL && im->rgba != NULL);
  ASSERT_EQ(im->width, (uint32_t)w);
  ASSERT_EQ(im->height, (uint32_t)hgt);
  ASSERT(memcmp(im->rgba, want, 4 * (size_t)w * hgt) == 0);
  stbi_image_free(want);
}

static void assert_file_pixels(const mesh_image *im, const char *path) {
  size_t n = 0;
  uint8_t *bytes = test_read_file(path, &n);
  assert_pixels(im, bytes, n);
  free(bytes);
}

static const char *const spider_images[] = {"wal67ar_small.jpg", "wal69ar_small.jpg", "SpiderTex.jpg", "drkwood2.jpg",
                                            "engineflare1.jpg"};
#define SPIDER_IMAGES (sizeof(spider_images) / sizeof(spider_images[0]))

/* Every spider image the replica (or a file read back) holds is its source JPEG's decode. */
static void assert_spider(const mesh *m) {
  ASSERT(m->image_count >= 4);
  uint32_t found = 0;
  for (size_t i = 0; i < SPIDER_IMAGES; i++) {
    const mesh_image *im = image_named(m, spider_images[i]);
    if (!im) continue;
    char rel[128];
    snprintf(rel, sizeof(rel), "OBJ/%s", spider_images[i]);
    assert_file_pixels(im, test_assimp_model(rel));
    found++;
  }
  ASSERT_EQ(found, m->image_count);
}

/* A GLB read back: every image in it equals the replica's image of the same index. */
static void assert_glb_images(const uint8_t *glb, size_t n, const mesh *want) {
  mesh *r = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_write_file("texture-upload-export.glb", glb, n), NULL, &r, err, sizeof(err)), err);
  ASSERT_EQ(r->image_count, want->image_count);
  for (uint32_t i = 0; i < r->image_count; i++) {
    ASSERT_EQ(r->images[i].width, want->images[i].width);
    ASSERT_EQ(r->images[i].height, want->images[i].height);
    ASSERT(memcmp(r->images[i].rgba, want->images[i].rgba, 4 * (size_t)want->images[i].width * want->images[i].height) == 0);
  }
  mesh_destroy(r);
}

TEST(an_uploaded_obj_with_its_mtl_and_jpegs_and_a_glb_are_textured_end_to_end_and_after_kill_9) {
  const char *dir = test_tmp_path("texture-upload");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  upload_file(&h, "spider.obj", test_assimp_model("OBJ/spider.obj"));
  upload_file(&h, "spider.mtl", test_assimp_model("OBJ/spider.mtl"));
  for (size_t i = 0; i < SPIDER_IMAGES; i++) {
    char rel[128];
    snprintf(rel, sizeof(rel), "OBJ/%s", spider_images[i]);
    upload_file(&h, spider_images[i], test_assimp_model(rel));
  }
  upload_file(&h, "box.glb", test_assimp_model("glTF2/BoxTextured-glTF-Binary/BoxTextured.glb"));
  harness_rpc_done(&h, "session.create", "{\"session\":\"spider\",\"mesh\":\"spider.obj\"}");
  harness_rpc_done(&h, "session.create", "{\"session\":\"box\",\"mesh\":\"box.glb\"}");
  /* The GLB's oracle: the PNG its own import hands stb_image (the in-process import of the file). */
  mesh *box = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_assimp_model("glTF2/BoxTextured-glTF-Binary/BoxTextured.glb"), NULL, &box, err,
                        sizeof(err)), err);
  ASSERT_EQ(box->image_count, 1);
  for (int pass = 0; pass < 2; pass++) {
    client_conn a, b;
    client_replica ra, rb;
    join_textured(&h, "spider", &a, &ra);
    assert_spider(ra.mesh);
    join_textured(&h, "box", &b, &rb);
    ASSERT_EQ(rb.mesh->image_count, 1);
    ASSERT_EQ(rb.mesh->images[0].width, box->images[0].width);
    ASSERT(memcmp(rb.mesh->images[0].rgba, box->images[0].rgba, 4 * (size_t)box->images[0].width * box->images[0].height) == 0);
    /* session.export's GLB carries the same pixels (PNG, decoded again by the import). */
    size_t n = 0;
    uint8_t *glb = harness_download(&h, "spider", "glb", -1, &n);
    assert_glb_images(glb, n, ra.mesh);
    free(glb);
    glb = harness_download(&h, "box", "glb", -1, &n);
    assert_glb_images(glb, n, rb.mesh);
    free(glb);
    client_close(&a), client_replica_fini(&ra);
    client_close(&b), client_replica_fini(&rb);
    if (pass == 0) { /* a crash: the images come back from the store, not the files */
      harness_kill(&h);
      char path[1024];
      snprintf(path, sizeof(path), "%s/meshes/SpiderTex.jpg", dir);
      ASSERT_EQ(remove(path), 0);
      harness_start_on(&h, dir, "spider", NULL);
    }
  }
  mesh_destroy(box);
  harness_stop(&h);
}

static void png_sink(void *ctx, void *data, int size) {
  proto_buf *b = ctx;
  uint8_t *p = proto_buf_append(b, (size_t)size);
  if (p) memcpy(p, data, (size_t)size);
}

/* "NAME.obj" (a textured quad) and "NAME.mtl" naming NAME.png, uploaded. */
static void upload_quad(harness *h, const char *name) {
  char obj[512], mtl[256], file[128];
  snprintf(obj, sizeof(obj),
           "mtllib %s.mtl\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvt 0 0\nvt 1 0\nvt 1 1\nvt 0 1\nusemtl skin\n"
           "f 1/1 2/2 3/3\nf 1/1 3/3 4/4\n", name);
  snprintf(mtl, sizeof(mtl), "newmtl skin\nKd 1 1 1\nmap_Kd %s.png\n", name);
  snprintf(file, sizeof(file), "%s.obj", name);
  upload_text(h, file, obj);
  snprintf(file, sizeof(file), "%s.mtl", name);
  upload_text(h, file, mtl);
}

/* A PNG of w × h texels (a gradient), encoded here. */
static void png_of(int w, int hgt, proto_buf *png) {
  uint8_t *rgb = malloc(3 * (size_t)w * hgt);
  for (size_t i = 0; i < 3 * (size_t)w * hgt; i++) rgb[i] = (uint8_t)(i * 7);
  proto_buf_init(png);
  stbi_write_png_to_func(png_sink, png, w, hgt, 3, rgb, 3 * w);
  free(rgb);
}

static void create_fails(harness *h, const char *name, const char *reason) {
  char params[256], msg[1024] = "", want[128];
  snprintf(params, sizeof(params), "{\"session\":\"%s\",\"mesh\":\"%s.obj\"}", name, name);
  int code = harness_rpc_err(h, "session.create", params, msg, sizeof(msg));
  ASSERT_EQ(code, -32004); /* the mesh refused, docs/json-api.md §3 */
  snprintf(want, sizeof(want), "texture '%s.png'", name);
  ASSERT_STR_CONTAINS(msg, want);
  ASSERT_STR_CONTAINS(msg, reason);
}

TEST(a_texture_that_is_not_an_image_truncated_or_too_large_fails_its_session_create_and_the_server_keeps_serving) {
  const char *dir = test_tmp_path("texture-bad");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  proto_buf good, huge;
  png_of(4, 2, &good);
  png_of(8193, 1, &huge); /* one texel over MESH_MAX_IMAGE_SIDE */
  upload_quad(&h, "text");
  upload_text(&h, "text.png", "this is not a PNG\n");
  upload_quad(&h, "cut");
  upload(&h, "cut.png", good.data, good.len / 2);
  upload_quad(&h, "huge");
  upload(&h, "huge.png", huge.data, huge.len);
  upload_quad(&h, "fine");
  upload(&h, "fine.png", good.data, good.len);
  create_fails(&h, "text", "does not decode");
  create_fails(&h, "cut", "does not decode");
  create_fails(&h, "huge", "8192");
  /* Still serving: the good quad opens, textured with its PNG's texels; the demo still edits. */
  harness_rpc_done(&h, "session.create", "{\"session\":\"fine\",\"mesh\":\"fine.obj\"}");
  client_conn c;
  client_replica r;
  join_textured(&h, "fine", &c, &r);
  ASSERT_EQ(r.mesh->image_count, 1);
  assert_pixels(&r.mesh->images[0], good.data, good.len);
  client_close(&c), client_replica_fini(&r);
  harness_rpc_done(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.5}}");
  /* A name the server does not decode (DDS) is not a failure: the quad is untextured. */
  upload_text(&h, "dds.obj", "mtllib dds.mtl\nv 0 0 0\nv 1 0 0\nv 1 1 0\nvt 0 0\nvt 1 0\nvt 1 1\nusemtl s\nf 1/1 2/2 3/3\n");
  upload_text(&h, "dds.mtl", "newmtl s\nmap_Kd dds.dds\n");
  upload_text(&h, "dds.dds", "DDS not really\n");
  harness_rpc_done(&h, "session.create", "{\"session\":\"dds\",\"mesh\":\"dds.obj\"}");
  proto_buf_fini(&good);
  proto_buf_fini(&huge);
  harness_stop(&h);
}
