/*
 * mesh_material.c — what a file says each submesh looks like: its material's base colour and
 * base-colour texture.
 *
 * glTF's PBR base colour (AI_MATKEY_BASE_COLOR, aiTextureType_BASE_COLOR) comes first, then the
 * diffuse colour and texture that every other format gives (an MTL's Kd and map_Kd, FBX, COLLADA,
 * MD2 and MD3 skins). The materials assimp makes up for files that have none (unnamed, or
 * "DefaultMaterial": PLY, OFF, STL) give no colour. A texture named "*N", or whose name is an embedded texture's file
 * name, is the file's own (GLB, glTF data URIs, FBX with embedded media): compressed bytes go to
 * mesh_image_decode, raw ARGB8888 texels are converted. Any other name is a file beside the
 * mesh: the name as given (a Windows path's backslashes read as slashes, leading "./" dropped),
 * else its last component (MD2 skins name Quake's paths). An MD2 or MD3 file that names no skin
 * (assimp's "$texture_dummy.bmp") gets the image beside it with its own name: sydney.md2's
 * sydney.pcx, .png, .tga, .jpg or .bmp, the first that decodes. Each texture is decoded once,
 * however many submeshes name it.
 *
 * A texture the file names that is missing, or in a format deformd does not decode (DDS, TIFF…:
 * its name says so), leaves its submeshes untextured, as viewers would show a file that names
 * images it does not ship; so does one past 64 textures. One deformd should decode — embedded,
 * or named .png, .jpg, .jpeg, .bmp, .tga or .pcx — that does not (not an image, truncated, over
 * MESH_MAX_IMAGE_SIDE a side or 64 MiB of file), or that takes the mesh's decoded textures past
 * 256 MiB, fails the import with the texture's name and the reason: the user sent it to be seen.
 * (An MD2 or MD3 skin guessed beside the file is only a guess: a failed one is skipped.)
 */
#include <assimp/material.h>
#include <assimp/scene.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mesh.h"
#include "mesh_internal.h"

#define MAX_IMAGE_FILE_BYTES ((size_t)64 << 20)
#define NAME_LEN 1024
#define MAX_TEXTURE_BYTES ((uint64_t)256 << 20) /* decoded, all of a mesh's textures together */

/* '\' to '/', leading "./" dropped. */
static void normalise(const char *in, char *out, size_t len) {
  size_t n = 0;
  for (; *in && n + 1 < len; in++) out[n++] = *in == '\\' ? '/' : *in;
  out[n] = '\0';
  while (out[0] == '.' && out[1] == '/') memmove(out, out + 2, strlen(out + 2) + 1);
}

static const char *last_part(const char *s) {
  const char *slash = strrchr(s, '/');
  return slash ? slash + 1 : s;
}

/* The embedded texture a name means, or NULL. */
static const struct aiTexture *embedded(const struct aiScene *sc, const char *name) {
  if (name[0] == '*') {
    char *end = NULL;
    long i = strtol(name + 1, &end, 10);
    return end != name + 1 && *end == '\0' && i >= 0 && (unsigned long)i < sc->mNumTextures ? sc->mTextures[i] : NULL;
  }
  for (unsigned i = 0; i < sc->mNumTextures; i++) {
    char own[NAME_LEN];
    normalise(sc->mTextures[i]->mFilename.data, own, sizeof(own));
    if (own[0] && (strcmp(own, name) == 0 || strcmp(last_part(own), last_part(name)) == 0)) return sc->mTextures[i];
  }
  return NULL;
}

static int decode_embedded(const struct aiTexture *t, mesh_image *im, char *why, size_t wl) {
  if (t->mHeight == 0) return mesh_image_decode((const uint8_t *)t->pcData, t->mWidth, im, why, wl);
  memset(im, 0, sizeof(*im));
  if (t->mWidth == 0 || t->mWidth > MESH_MAX_IMAGE_SIDE || t->mHeight > MESH_MAX_IMAGE_SIDE) {
    mesh__set_err(why, wl, "embedded texels of %u x %u (at most %u a side)", t->mWidth, t->mHeight, MESH_MAX_IMAGE_SIDE);
    return MESH_EFORMAT;
  }
  size_t n = (size_t)t->mWidth * t->mHeight;
  im->rgba = malloc(4 * n);
  if (!im->rgba) return MESH_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    const struct aiTexel *x = &t->pcData[i];
    im->rgba[4 * i] = x->r, im->rgba[4 * i + 1] = x->g, im->rgba[4 * i + 2] = x->b, im->rgba[4 * i + 3] = x->a;
  }
  im->width = t->mWidth, im->height = t->mHeight;
  return 0;
}

/* Decodes the texture `name` (normalised) into im: embedded, else beside the mesh (`dir`). */
static int load(const struct aiScene *sc, const char *dir, const char *name, mesh_image *im, char *why, size_t wl) {
  const struct aiTexture *t = embedded(sc, name);
  if (t) return decode_embedded(t, im, why, wl);
  char path[2 * NAME_LEN];
  snprintf(path, sizeof(path), "%s%s", dir, name);
  int rc = mesh__image_read(path, MAX_IMAGE_FILE_BYTES, im, why, wl);
  if (rc == MESH_ENOENT && strchr(name, '/')) {
    snprintf(path, sizeof(path), "%s%s", dir, last_part(name));
    rc = mesh__image_read(path, MAX_IMAGE_FILE_BYTES, im, why, wl);
  }
  return rc;
}

/* The texture's 1-based index in *images (decoding it the first time), 0 when it has none. A
 * failure is remembered as an entry of *tried with index 0, so it is tried once. */
typedef struct tried {
  char name[NAME_LEN];
  uint32_t texture;
} tried;

/* A name whose extension is a format mesh_image_decode reads. */
static int decodable_name(const char *name) {
  static const char *const exts[] = {"png", "jpg", "jpeg", "bmp", "tga", "pcx"};
  const char *dot = strrchr(last_part(name), '.');
  for (size_t i = 0; dot && i < sizeof(exts) / sizeof(exts[0]); i++)
    if (strcasecmp(dot + 1, exts[i]) == 0) return 1;
  return 0;
}

/* `strict`: a texture the file names (not a guess), whose failure to decode fails the import. */
static int texture_of(const struct aiScene *sc, const char *dir, const char *raw_name, int strict, mesh_image **images,
                      uint32_t *count, tried **seen, uint32_t *seen_count, uint32_t *out, char *err, size_t errlen) {
  char name[NAME_LEN];
  normalise(raw_name, name, sizeof(name));
  *out = 0;
  if (!name[0] || name[0] == '$') return 0; /* assimp's placeholders ("$texture_dummy.bmp") */
  for (uint32_t i = 0; i < *seen_count; i++)
    if (strcmp((*seen)[i].name, name) == 0) {
      *out = (*seen)[i].texture;
      return 0;
    }
  tried *grown = realloc(*seen, sizeof(**seen) * (*seen_count + 1));
  if (!grown) return MESH_ENOMEM;
  *seen = grown;
  tried *entry = &grown[(*seen_count)++];
  snprintf(entry->name, sizeof(entry->name), "%s", name);
  entry->texture = 0;
  if (*count >= MESH_MAX_IMAGES) return 0;
  mesh_image im;
  char why[MESH_ERR_LEN] = "";
  int rc = load(sc, dir, name, &im, why, sizeof(why));
  if (rc == MESH_ENOMEM) return rc;
  if (rc) {
    if (!strict || rc == MESH_ENOENT || (!embedded(sc, name) && !decodable_name(name))) return 0;
    mesh__set_err(err, errlen, "texture '%s' does not decode: %s", name, why[0] ? why : mesh_strerror(rc));
    return MESH_EFORMAT;
  }
  uint64_t total = 4 * (uint64_t)im.width * im.height;
  for (uint32_t i = 0; i < *count; i++) total += 4 * (uint64_t)(*images)[i].width * (*images)[i].height;
  if (total > MAX_TEXTURE_BYTES) { /* a session is not a texture archive */
    free(im.rgba);
    if (!strict) return 0;
    mesh__set_err(err, errlen, "texture '%s' (%u x %u) takes the mesh's decoded textures past %llu MiB", name,
                  im.width, im.height, (unsigned long long)(MAX_TEXTURE_BYTES >> 20));
    return MESH_ETOOBIG;
  }
  mesh_image *more = realloc(*images, sizeof(**images) * (*count + 1));
  im.name = mesh__strdup(name);
  if (!more || !im.name) {
    if (more) *images = more;
    free(im.rgba), free(im.name);
    return MESH_ENOMEM;
  }
  *images = more;
  more[(*count)++] = im;
  entry->texture = *out = *count;
  return 0;
}

/* An MD2 or MD3 path: its skins are, by custom, images of the same name beside it. */
static int keyframe_file(const char *path) {
  size_t n = strlen(path);
  return n > 4 && path[n - 4] == '.' && (path[n - 3] | 0x20) == 'm' && (path[n - 2] | 0x20) == 'd' &&
         (path[n - 1] == '2' || path[n - 1] == '3');
}

static int skin_beside(const struct aiScene *sc, const char *dir, const char *mesh_path, mesh_image **images,
                       uint32_t *count, tried **seen, uint32_t *seen_count, uint32_t *out) {
  static const char *const exts[] = {"pcx", "png", "tga", "jpg", "bmp"};
  const char *base = last_part(mesh_path);
  for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]) && *out == 0; i++) {
    char name[NAME_LEN];
    snprintf(name, sizeof(name), "%.*s.%s", (int)(strlen(base) - 4), base, exts[i]);
    int rc = texture_of(sc, dir, name, 0, images, count, seen, seen_count, out, NULL, 0);
    if (rc) return rc;
  }
  return 0;
}

static int get_texture(const struct aiMaterial *mt, enum aiTextureType type, struct aiString *path) {
  return aiGetMaterialTextureCount(mt, type) > 0 &&
         aiGetMaterialTexture(mt, type, 0, path, NULL, NULL, NULL, NULL, NULL, NULL) == aiReturn_SUCCESS;
}

static void colour_of(const struct aiMaterial *mt, mesh_submesh *sm) {
  struct aiColor4D c;
  if (aiGetMaterialColor(mt, AI_MATKEY_BASE_COLOR, &c) != aiReturn_SUCCESS) {
    /* A diffuse colour is the file's only on a material the file named: assimp gives formats
     * without materials (PLY, OFF, STL) an unnamed or "DefaultMaterial" one with a made-up grey. */
    struct aiString mname;
    if (aiGetMaterialString(mt, AI_MATKEY_NAME, &mname) != aiReturn_SUCCESS || mname.data[0] == '\0' ||
        strcmp(mname.data, AI_DEFAULT_MATERIAL_NAME) == 0 || aiGetMaterialColor(mt, AI_MATKEY_COLOR_DIFFUSE, &c) != aiReturn_SUCCESS)
      return;
  }
  const float v[4] = {c.r, c.g, c.b, c.a};
  for (int k = 0; k < 4; k++) sm->base_color[k] = v[k] >= 0.0f ? (v[k] <= 1.0f ? v[k] : 1.0f) : 0.0f; /* NaN: 0 */
  sm->has_color = 1;
}

int mesh__scene_materials(const struct aiScene *sc, const mesh__scene *g, const char *mesh_path,
                          mesh_submesh *submeshes, mesh_image **images, uint32_t *image_count, char *err,
                          size_t errlen) {
  char dir[NAME_LEN] = "";
  const char *slash = strrchr(mesh_path, '/');
  if (slash && (size_t)(slash - mesh_path) + 2 <= sizeof(dir)) snprintf(dir, sizeof(dir), "%.*s/", (int)(slash - mesh_path), mesh_path);
  tried *seen = NULL;
  uint32_t seen_count = 0;
  int rc = 0;
  for (uint32_t i = 0; i < g->count && rc == 0; i++) {
    unsigned mi = g->items[i].mesh->mMaterialIndex;
    if (mi >= sc->mNumMaterials || !sc->mMaterials[mi]) continue;
    const struct aiMaterial *mt = sc->mMaterials[mi];
    colour_of(mt, &submeshes[i]);
    struct aiString path;
    if (get_texture(mt, aiTextureType_BASE_COLOR, &path) || get_texture(mt, aiTextureType_DIFFUSE, &path))
      rc = texture_of(sc, dir, path.data, 1, images, image_count, &seen, &seen_count, &submeshes[i].texture, err, errlen);
    if (rc == 0 && submeshes[i].texture == 0 && keyframe_file(mesh_path))
      rc = skin_beside(sc, dir, mesh_path, images, image_count, &seen, &seen_count, &submeshes[i].texture);
  }
  free(seen);
  return rc;
}
