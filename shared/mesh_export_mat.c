/*
 * mesh_export_mat.c — a mesh's materials in the files mesh_export.c writes: each image as PNG
 * (Debian's libstb: stb_image_write), an MTL beside an OBJ (Kd and map_Kd per submesh), and the
 * glTF materials, textures and embedded images of a GLB (baseColorFactor and baseColorTexture,
 * the PNGs appended to its binary chunk).
 *
 * PNG because it is lossless: an export read back gives the very pixels the session holds (the
 * tests compare them), whatever the file they came from; an opaque image is written as RGB.
 * Images keep their rows (row 0 the top, as glTF and every image format have them), and UVs stay
 * as the exporters write them, so the round trip puts every texel back under the same vertex.
 *
 * DOES NOT write files (mesh_export.c does) or resample.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image_write.h>

#include "mesh.h"
#include "mesh_internal.h"

int mesh__has_materials(const mesh *m) {
  for (uint32_t i = 0; i < m->submesh_count; i++)
    if (m->submeshes[i].has_color || m->submeshes[i].texture) return 1;
  return 0;
}

/* Where stb_image_write's callback puts the PNG (its to_mem function is not in the header). */
typedef struct png_sink {
  uint8_t *data;
  size_t len, cap;
  int failed;
} png_sink;

static void png_put(void *ctx, void *data, int size) {
  png_sink *s = ctx;
  if (s->failed || size <= 0) return;
  if (s->len + (size_t)size > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 1 << 16;
    while (cap < s->len + (size_t)size) cap *= 2;
    uint8_t *g = realloc(s->data, cap);
    if (!g) {
      s->failed = 1;
      return;
    }
    s->data = g, s->cap = cap;
  }
  memcpy(s->data + s->len, data, (size_t)size);
  s->len += (size_t)size;
}

int mesh_image_png(const mesh_image *im, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  size_t n = (size_t)im->width * im->height;
  int opaque = 1;
  for (size_t i = 0; i < n && opaque; i++) opaque = im->rgba[4 * i + 3] == 255;
  uint8_t *rgb = NULL;
  const uint8_t *px = im->rgba;
  if (opaque) {
    if (!(rgb = malloc(3 * n + 1))) return MESH_ENOMEM;
    for (size_t i = 0; i < n; i++) memcpy(rgb + 3 * i, im->rgba + 4 * i, 3);
    px = rgb;
  }
  int comp = opaque ? 3 : 4;
  png_sink sink = {0};
  int ok = stbi_write_png_to_func(png_put, &sink, (int)im->width, (int)im->height, comp, px, (int)im->width * comp);
  free(rgb);
  if (!ok || sink.failed) {
    free(sink.data);
    return MESH_ENOMEM;
  }
  *out = sink.data;
  *len = sink.len;
  return 0;
}

void mesh__mtl_name(const mesh_submesh *s, uint32_t i, char *out, size_t cap) {
  (void)s;
  snprintf(out, cap, "material%u", i);
}

char *mesh__mtl_text(const mesh *m, const char *stem) {
  size_t cap = 256 + (size_t)m->submesh_count * (160 + strlen(stem));
  char *t = malloc(cap), *at = t;
  if (!t) return NULL;
  at += snprintf(at, cap, "# deformd export: the materials of %s.obj\n", stem);
  for (uint32_t i = 0; i < m->submesh_count; i++) {
    const mesh_submesh *s = &m->submeshes[i];
    char name[32];
    mesh__mtl_name(s, i, name, sizeof(name));
    at += snprintf(at, cap - (size_t)(at - t), "\nnewmtl %s\n", name);
    if (s->has_color)
      at += snprintf(at, cap - (size_t)(at - t), "Kd %.9g %.9g %.9g\nd %.9g\n", (double)s->base_color[0],
                     (double)s->base_color[1], (double)s->base_color[2], (double)s->base_color[3]);
    else if (s->texture)
      at += snprintf(at, cap - (size_t)(at - t), "Kd 1 1 1\n"); /* the texture as it is */
    if (s->texture && s->texture <= m->image_count)
      at += snprintf(at, cap - (size_t)(at - t), "map_Kd %s_%u.png\n", stem, s->texture - 1);
  }
  return t;
}

/* ---- GLB ------------------------------------------------------------------------------------- */

static int add_number(cJSON *o, const char *key, double v) { return cJSON_AddNumberToObject(o, key, v) != NULL; }

/* The materials array: one per submesh (glTF's default white where it gives none). */
static cJSON *gltf_materials(const mesh *m) {
  cJSON *mats = cJSON_CreateArray();
  for (uint32_t i = 0; mats && i < m->submesh_count; i++) {
    const mesh_submesh *s = &m->submeshes[i];
    cJSON *mat = cJSON_CreateObject(), *pbr = cJSON_AddObjectToObject(mat, "pbrMetallicRoughness");
    char name[32];
    mesh__mtl_name(s, i, name, sizeof(name));
    cJSON_AddStringToObject(mat, "name", s->name && s->name[0] ? s->name : name);
    if (s->has_color) {
      double c[4] = {s->base_color[0], s->base_color[1], s->base_color[2], s->base_color[3]};
      cJSON_AddItemToObject(pbr, "baseColorFactor", cJSON_CreateDoubleArray(c, 4));
    }
    if (s->texture && s->texture <= m->image_count) {
      cJSON *t = cJSON_AddObjectToObject(pbr, "baseColorTexture");
      add_number(t, "index", s->texture - 1);
    }
    add_number(pbr, "metallicFactor", 0);
    cJSON_AddItemToArray(mats, mat);
  }
  return mats;
}

int mesh__gltf_add_materials(const mesh *m, cJSON *root, int per_mesh, size_t bin_len, uint8_t ***pngs,
                             size_t **png_lens) {
  *pngs = calloc((size_t)m->image_count + 1, sizeof(**pngs));
  *png_lens = calloc((size_t)m->image_count + 1, sizeof(**png_lens));
  if (!*pngs || !*png_lens) return MESH_ENOMEM;
  cJSON *views = cJSON_GetObjectItemCaseSensitive(root, "bufferViews");
  if (!views) views = cJSON_AddArrayToObject(root, "bufferViews");
  cJSON *images = cJSON_CreateArray(), *textures = cJSON_CreateArray(), *samplers = cJSON_CreateArray();
  cJSON_AddItemToObject(root, "images", images);
  cJSON_AddItemToObject(root, "textures", textures);
  cJSON_AddItemToObject(root, "samplers", samplers);
  cJSON *smp = cJSON_CreateObject();
  add_number(smp, "magFilter", 9729);  /* LINEAR */
  add_number(smp, "minFilter", 9987);  /* LINEAR_MIPMAP_LINEAR */
  cJSON_AddItemToArray(samplers, smp);
  size_t at = (bin_len + 3) & ~(size_t)3;
  for (uint32_t i = 0; i < m->image_count; i++) {
    int rc = mesh_image_png(&m->images[i], &(*pngs)[i], &(*png_lens)[i]);
    if (rc) return rc;
    cJSON *v = cJSON_CreateObject(), *im = cJSON_CreateObject(), *tx = cJSON_CreateObject();
    add_number(v, "buffer", 0);
    add_number(v, "byteOffset", (double)at);
    add_number(v, "byteLength", (double)(*png_lens)[i]);
    cJSON_AddItemToArray(views, v);
    add_number(im, "bufferView", cJSON_GetArraySize(views) - 1);
    cJSON_AddStringToObject(im, "mimeType", "image/png");
    cJSON_AddItemToArray(images, im);
    add_number(tx, "sampler", 0);
    add_number(tx, "source", i);
    cJSON_AddItemToArray(textures, tx);
    at = (at + (*png_lens)[i] + 3) & ~(size_t)3;
  }
  cJSON *buffer = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "buffers"), 0);
  if (!buffer) return MESH_EINVAL;
  cJSON_DeleteItemFromObjectCaseSensitive(buffer, "byteLength");
  add_number(buffer, "byteLength", (double)at);
  cJSON_DeleteItemFromObjectCaseSensitive(root, "materials");
  cJSON_AddItemToObject(root, "materials", gltf_materials(m));
  /* The exporter writes one primitive per aiMesh, in order (assimp 5.2 puts the aiMeshes of one
   * node into one glTF mesh): primitive i, counted across meshes, is submesh i when they were
   * split; one primitive for everything takes submesh 0's material. */
  cJSON *gm;
  int i = 0;
  cJSON_ArrayForEach(gm, cJSON_GetObjectItemCaseSensitive(root, "meshes")) {
    cJSON *prim;
    cJSON_ArrayForEach(prim, cJSON_GetObjectItemCaseSensitive(gm, "primitives")) {
      cJSON_DeleteItemFromObjectCaseSensitive(prim, "material");
      add_number(prim, "material", per_mesh && (uint32_t)i < m->submesh_count ? i : 0);
      i++;
    }
  }
  return 0;
}
