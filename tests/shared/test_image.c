/*
 * test_image.c — base-colour textures: decoding, and what an import takes from materials.
 *
 * Oracles: PCX files written here by a PCX encoder of the test's own (ZSoft's run-length rules)
 * from known pixels; image sizes read from the files' own headers by hand (PNG's IHDR, a JPEG's
 * SOF marker, BMP's info header); the colours an MTL file states, parsed here; and the same PNG
 * reached three ways (a file beside a .gltf, a data URI, a GLB's buffer) decoding to the same
 * bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mesh.h"
#include "test.h"

static mesh *import_ok(const char *path) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  return m;
}


/* ---- a PCX encoder (ZSoft version 5, RLE), the decoder's oracle -------------------------------- */

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf;

static void put(buf *b, uint8_t x) {
  if (b->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 1024;
    b->p = realloc(b->p, b->cap);
  }
  b->p[b->n++] = x;
}

/* One scanline plane of `n` bytes: runs of up to 63, and a lone byte of 0xC0 or more as a run of
 * one (it would read as a count otherwise). With `across`, runs continue into the next line's
 * bytes too, as some encoders write them; the decoder must take both. */
static void rle(buf *b, const uint8_t *row, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t run = 1;
    while (i + run < n && row[i + run] == row[i] && run < 63) run++;
    if (run > 1 || row[i] >= 0xC0) put(b, (uint8_t)(0xC0 | run));
    put(b, row[i]);
    i += run;
  }
}

/* planes 1 (8-bit, palette) or 3/4 (RGB(A) planes). `pixels`: w·h indices, or w·h·planes bytes. */
static buf pcx(uint32_t w, uint32_t h, uint32_t planes, const uint8_t *pixels, const uint8_t palette[768]) {
  buf b = {0};
  uint8_t head[128] = {0x0A, 5, 1, 8};
  uint32_t bpl = w + (w & 1); /* even, as the format asks: the pad byte is not a pixel */
  head[8] = (uint8_t)(w - 1), head[9] = (uint8_t)((w - 1) >> 8);
  head[10] = (uint8_t)(h - 1), head[11] = (uint8_t)((h - 1) >> 8);
  head[65] = (uint8_t)planes;
  head[66] = (uint8_t)bpl, head[67] = (uint8_t)(bpl >> 8);
  for (int i = 0; i < 128; i++) put(&b, head[i]);
  uint8_t *line = malloc(bpl * planes);
  for (uint32_t y = 0; y < h; y++) {
    memset(line, 0x77, bpl * planes);
    for (uint32_t p = 0; p < planes; p++)
      for (uint32_t x = 0; x < w; x++)
        line[p * bpl + x] = planes == 1 ? pixels[y * w + x] : pixels[(y * w + x) * planes + p];
    rle(&b, line, bpl * planes);
  }
  free(line);
  if (planes == 1) {
    put(&b, 0x0C);
    for (int i = 0; i < 768; i++) put(&b, palette[i]);
  }
  return b;
}

TEST(pcx_images_decode_to_the_pixels_a_separate_encoder_wrote) {
  uint8_t palette[768];
  for (int i = 0; i < 256; i++) palette[3 * i] = (uint8_t)i, palette[3 * i + 1] = (uint8_t)(255 - i), palette[3 * i + 2] = (uint8_t)(i * 7);
  /* 8-bit: an odd width (a pad byte per line), long runs (over 63), and indices of 0xC0 and up. */
  const uint32_t w = 101, h = 7;
  uint8_t *idx = malloc(w * h);
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) idx[y * w + x] = (uint8_t)(x < 80 ? (y * 40 + 0xC1) : (x * 13 + y));
  buf f = pcx(w, h, 1, idx, palette);
  mesh_image im;
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_image_decode(f.p, f.n, &im, err, sizeof(err)), err);
  ASSERT(im.width == w && im.height == h);
  for (uint32_t i = 0; i < w * h; i++) {
    const uint8_t *px = im.rgba + 4 * i;
    if (memcmp(px, palette + 3 * idx[i], 3) != 0 || px[3] != 255)
      test__fail(__FILE__, __LINE__, "pixel %u is %d,%d,%d,%d, not palette entry %d", i, px[0], px[1], px[2], px[3], idx[i]);
  }
  free(im.rgba);
  /* Cut anywhere before its end (the palette included), it is refused with a reason. */
  for (size_t cut = 0; cut < f.n; cut += 1 + cut / 7) {
    err[0] = '\0';
    ASSERT_EQ(mesh_image_decode(f.p, cut, &im, err, sizeof(err)), MESH_EFORMAT);
    ASSERT(err[0] != '\0' && im.rgba == NULL);
  }
  free(f.p);
  /* 24-bit (three planes) and 32-bit (four): each channel its plane. */
  for (uint32_t planes = 3; planes <= 4; planes++) {
    const uint32_t w2 = 64, h2 = 5;
    uint8_t *px = malloc(w2 * h2 * planes);
    for (uint32_t i = 0; i < w2 * h2 * planes; i++) px[i] = (uint8_t)(i % 5 == 0 ? 0xF0 : i * 31);
    buf g = pcx(w2, h2, planes, px, NULL);
    ASSERT_OK(mesh_image_decode(g.p, g.n, &im, err, sizeof(err)), err);
    ASSERT(im.width == w2 && im.height == h2);
    for (uint32_t i = 0; i < w2 * h2; i++)
      for (uint32_t c = 0; c < 4; c++) {
        uint8_t want = c < planes ? px[i * planes + c] : 255;
        if (im.rgba[4 * i + c] != want) test__fail(__FILE__, __LINE__, "%u planes: pixel %u channel %u", planes, i, c);
      }
    free(im.rgba), free(g.p), free(px);
  }
  free(idx);
}

TEST(images_that_lie_or_are_too_large_are_refused_before_anything_is_allocated) {
  mesh_image im;
  char err[MESH_ERR_LEN];
  /* A PCX header claiming 65,536 x 65,536 pixels, and one claiming 8,000 x 8,000 in 200 bytes. */
  uint8_t head[200] = {0x0A, 5, 1, 8};
  head[8] = head[9] = head[10] = head[11] = 0xFF;
  head[65] = 1, head[66] = 0, head[67] = 1;
  ASSERT_EQ(mesh_image_decode(head, sizeof(head), &im, err, sizeof(err)), MESH_EFORMAT);
  ASSERT_STR_CONTAINS(err, "at most 8192 a side");
  head[8] = 0x3F, head[9] = 0x1F, head[10] = 0x3F, head[11] = 0x1F, head[66] = 0x40, head[67] = 0x1F, head[65] = 3;
  ASSERT_EQ(mesh_image_decode(head, sizeof(head), &im, err, sizeof(err)), MESH_EFORMAT);
  ASSERT_STR_CONTAINS(err, "ends before");
  /* A PNG whose IHDR says 100,000 pixels wide: stb_image reads the size, the decoder refuses. */
  size_t n;
  uint8_t *png = test_read_file(test_assimp_model("glTF2/BoxTextured-glTF/CesiumLogoFlat.png"), &n);
  png[16] = 0, png[17] = 1, png[18] = 0x86, png[19] = 0xA0; /* width 100,000 (the CRC is not checked for size) */
  int rc = mesh_image_decode(png, n, &im, err, sizeof(err));
  ASSERT_EQ(rc, MESH_EFORMAT);
  free(png);
  /* Bytes that are no image. */
  const char text[] = "just some text, not an image";
  ASSERT_EQ(mesh_image_decode((const uint8_t *)text, sizeof(text), &im, err, sizeof(err)), MESH_EFORMAT);
  ASSERT_STR_CONTAINS(err, "not an image");
}

/* ---- materials ------------------------------------------------------------------------------ */

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* A JPEG's size from its first SOFn marker. */
static void jpeg_size(const char *path, uint32_t *w, uint32_t *h) {
  size_t n;
  uint8_t *b = test_read_file(path, &n);
  *w = *h = 0;
  for (size_t i = 2; i + 9 < n;) {
    ASSERT(b[i] == 0xFF);
    uint8_t m = b[i + 1];
    size_t len = (size_t)b[i + 2] << 8 | b[i + 3];
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      *h = (uint32_t)b[i + 5] << 8 | b[i + 6];
      *w = (uint32_t)b[i + 7] << 8 | b[i + 8];
      break;
    }
    i += 2 + len;
  }
  free(b);
  ASSERT(*w > 0 && *h > 0);
}

/* spider.mtl's materials: Kd and map_Kd, read here. */
typedef struct mtl {
  char name[64], map[128];
  float kd[3];
} mtl;

static int read_mtl(const char *path, mtl *out, int max) {
  FILE *f = fopen(path, "r");
  ASSERT(f != NULL);
  char line[512];
  int n = -1;
  while (fgets(line, sizeof(line), f)) {
    char *s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (strncmp(s, "newmtl ", 7) == 0 && n + 1 < max) {
      n++;
      memset(&out[n], 0, sizeof(out[n]));
      sscanf(s + 7, "%63s", out[n].name);
    } else if (n >= 0 && strncmp(s, "Kd ", 3) == 0) {
      sscanf(s + 3, "%f %f %f", &out[n].kd[0], &out[n].kd[1], &out[n].kd[2]);
    } else if (n >= 0 && strncmp(s, "map_Kd ", 7) == 0) {
      sscanf(s + 7, "%127s", out[n].map);
      for (char *c = out[n].map; *c; c++)
        if (*c == '\\') *c = '/';
      if (strncmp(out[n].map, "./", 2) == 0) memmove(out[n].map, out[n].map + 2, strlen(out[n].map) - 1);
    }
  }
  fclose(f);
  return n + 1;
}

TEST(an_obj_takes_its_mtl_colours_and_textures_from_beside_it_each_decoded_once) {
  mtl mats[16];
  int nm = read_mtl(test_assimp_model("OBJ/spider.mtl"), mats, 16);
  ASSERT(nm >= 4);
  mesh *m = import_ok(test_assimp_model("OBJ/spider.obj"));
  ASSERT(m->submesh_count == 19 && m->image_count == 4);
  for (uint32_t i = 0; i < m->image_count; i++)
    for (uint32_t j = 0; j < i; j++) ASSERT(strcmp(m->images[i].name, m->images[j].name) != 0); /* once each */
  for (uint32_t s = 0; s < m->submesh_count; s++) {
    const mesh_submesh *sm = &m->submeshes[s];
    ASSERT(sm->has_color && sm->texture >= 1 && sm->texture <= m->image_count);
    const mesh_image *im = &m->images[sm->texture - 1];
    /* The material it came from: the one whose map_Kd is this image and whose Kd is its colour. */
    int found = 0;
    for (int k = 0; k < nm && !found; k++)
      found = strcmp(mats[k].map, im->name) == 0 && fabsf(mats[k].kd[0] - sm->base_color[0]) < 1e-6f &&
              fabsf(mats[k].kd[1] - sm->base_color[1]) < 1e-6f && fabsf(mats[k].kd[2] - sm->base_color[2]) < 1e-6f;
    if (!found) test__fail(__FILE__, __LINE__, "submesh %u: no material of spider.mtl has map_Kd %s and Kd %g %g %g", s,
                           im->name, sm->base_color[0], sm->base_color[1], sm->base_color[2]);
    ASSERT(sm->base_color[3] == 1.0f);
  }
  for (uint32_t i = 0; i < m->image_count; i++) {
    char rel[256];
    snprintf(rel, sizeof(rel), "OBJ/%s", m->images[i].name);
    uint32_t w, h;
    jpeg_size(test_assimp_model(rel), &w, &h);
    ASSERT(m->images[i].width == w && m->images[i].height == h);
  }
  mesh_destroy(m);
}

TEST(a_gltf_texture_decodes_the_same_from_a_file_a_data_uri_and_a_glb_buffer) {
  const char *paths[] = {"glTF2/BoxTextured-glTF/BoxTextured.gltf", "glTF2/BoxTextured-glTF-Embedded/BoxTextured.gltf",
                         "glTF2/BoxTextured-glTF-Binary/BoxTextured.glb"};
  size_t n;
  uint8_t *png = test_read_file(test_assimp_model("glTF2/BoxTextured-glTF/CesiumLogoFlat.png"), &n);
  ASSERT(n > 24 && memcmp(png + 12, "IHDR", 4) == 0);
  uint32_t w = be32(png + 16), h = be32(png + 20);
  free(png);
  mesh *first = NULL;
  for (size_t i = 0; i < 3; i++) {
    mesh *m = import_ok(test_assimp_model(paths[i]));
    ASSERT(m->image_count == 1 && m->submesh_count == 1 && m->submeshes[0].texture == 1);
    ASSERT(m->submeshes[0].has_color);
    for (int k = 0; k < 4; k++) ASSERT(m->submeshes[0].base_color[k] == 1.0f); /* baseColorFactor's default */
    ASSERT(m->images[0].width == w && m->images[0].height == h);
    if (i == 0) {
      ASSERT(strcmp(m->images[0].name, "CesiumLogoFlat.png") == 0);
      first = m;
      continue;
    }
    ASSERT(m->images[0].name[0] == '*'); /* the file's own */
    ASSERT(memcmp(m->images[0].rgba, first->images[0].rgba, 4 * (size_t)w * h) == 0);
    mesh_destroy(m);
  }
  mesh_destroy(first);
}

TEST(an_md2_without_skins_takes_the_image_beside_it_that_has_its_name) {
  size_t n;
  uint8_t *bmp = test_read_file(test_assimp_model("MD2/sydney.bmp"), &n);
  ASSERT(n > 26 && bmp[0] == 'B' && bmp[1] == 'M');
  int32_t w = (int32_t)(bmp[18] | bmp[19] << 8 | bmp[20] << 16 | (uint32_t)bmp[21] << 24);
  int32_t h = (int32_t)(bmp[22] | bmp[23] << 8 | bmp[24] << 16 | (uint32_t)bmp[25] << 24);
  free(bmp);
  mesh *m = import_ok(test_assimp_model("MD2/sydney.md2"));
  ASSERT(m->image_count == 1 && strcmp(m->images[0].name, "sydney.bmp") == 0);
  ASSERT(m->images[0].width == (uint32_t)w && m->images[0].height == (uint32_t)(h < 0 ? -h : h));
  ASSERT(m->submeshes[0].texture == 1 && !m->submeshes[0].has_color); /* assimp's default material: no colour */
  mesh_destroy(m);
  /* faerie.md2 names no skin and nothing beside it has its name (its skin is faerie2.bmp). */
  m = import_ok(test_assimp_model("MD2/faerie.md2"));
  ASSERT(m->image_count == 0 && m->submeshes[0].texture == 0);
  mesh_destroy(m);
}

/* A confined import (a server's) finds textures beneath the mesh's folder, and no further: a
 * map_Kd that climbs out of it is as absent as a missing file. */
TEST(a_confined_import_reads_textures_only_beneath_its_folder) {
  const char *dir = test_tmp_path("tex-confined");
  char sub[1100], path[1200];
  snprintf(sub, sizeof(sub), "%s/inside", dir);
  ASSERT(mkdir(dir, 0700) == 0 || errno == EEXIST);
  ASSERT(mkdir(sub, 0700) == 0 || errno == EEXIST);
  size_t n;
  uint8_t *jpg = test_read_file(test_assimp_model("OBJ/engineflare1.jpg"), &n);
  snprintf(path, sizeof(path), "%s/outside.jpg", dir);
  FILE *f = fopen(path, "wb");
  fwrite(jpg, 1, n, f), fclose(f);
  snprintf(path, sizeof(path), "%s/near.jpg", sub);
  f = fopen(path, "wb");
  fwrite(jpg, 1, n, f), fclose(f);
  free(jpg);
  const char *obj = "mtllib t.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nvt 1 0\nvt 0 1\n"
                    "usemtl near\nf 1/1 2/2 3/3\nusemtl far\nf 1/1 3/3 2/2\n";
  const char *mtl_text = "newmtl near\nKd 0.5 0.25 1\nmap_Kd near.jpg\nnewmtl far\nKd 1 1 1\nmap_Kd ../outside.jpg\n";
  snprintf(path, sizeof(path), "%s/t.obj", sub);
  f = fopen(path, "w");
  fputs(obj, f), fclose(f);
  snprintf(path, sizeof(path), "%s/t.mtl", sub);
  f = fopen(path, "w");
  fputs(mtl_text, f), fclose(f);
  int root = open(sub, O_RDONLY | O_DIRECTORY);
  ASSERT(root >= 0);
  mesh_import_opts o = {.roots = &root, .root_count = 1};
  mesh *m = NULL;
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_import("t.obj", &o, &m, err, sizeof(err)), err);
  ASSERT(m->image_count == 1 && strcmp(m->images[0].name, "near.jpg") == 0);
  uint32_t textured = 0;
  for (uint32_t s = 0; s < m->submesh_count; s++) textured += m->submeshes[s].texture != 0;
  ASSERT_EQ(textured, 1);
  mesh_destroy(m);
  /* The same file unconfined (a local tool) reads both. */
  snprintf(path, sizeof(path), "%s/t.obj", sub);
  m = import_ok(path);
  ASSERT(m->image_count == 2);
  mesh_destroy(m);
  close(root);
}
