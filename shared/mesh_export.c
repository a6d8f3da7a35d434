/*
 * mesh_export.c — writing a shape out: OBJ and GLB.
 *
 * GLB goes through assimp's glTF 2 exporter. The C API cannot pass exporter properties, so
 * assimp writes morph targets without their names and without default weights; the JSON chunk
 * of the GLB it produces is patched (cJSON) to add mesh.extras.targetNames and mesh.weights,
 * the keys glTF readers (Blender, three.js, assimp itself) use. For Z-up positions
 * (mesh_export_opts.z_up) the same patch gives the scene's root node the rotation that makes
 * them Y-up, as glTF requires, instead of rotating the vertex data.
 *
 * OBJ is written directly: assimp's OBJ exporter re-indexes vertices in face order and merges
 * equal positions, which would break the promise that OBJ vertex i is mesh vertex i (tests,
 * `deformctl watch --dump` and users' scripts rely on it).
 *
 * Files are written to a temporary name and renamed, so a failed export never leaves half a
 * file where a good one was; mesh_export_mem gives the same bytes in memory (downloads).
 *
 * Materials (mesh_export_mat.c): a GLB embeds its images as PNG with a glTF material per
 * submesh; an OBJ written as files (mesh_export_obj_files, mesh_export) gets an MTL and a PNG per
 * image beside it. A downloaded OBJ (one file) names none.
 *
 * DOES NOT export keyframes.
 */
#include <assimp/cexport.h>
#include <assimp/cimport.h>
#include <assimp/scene.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mesh.h"
#include "mesh_internal.h"

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  if (k > n) return 0;
  for (size_t i = 0; i < k; i++) {
    char a = s[n - k + i], b = suffix[i];
    if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
    if (a != b) return 0;
  }
  return 1;
}

/* Writes `len` bytes to path atomically (temp file + rename). */
static int write_atomically(const char *path, const void *data, size_t len, char *err,
                            size_t errlen) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return MESH_ENOMEM;
  snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    mesh__set_err(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    free(tmp);
    return MESH_EIO;
  }
  int ok = fwrite(data, 1, len, f) == len;
  ok = (fflush(f) == 0) && ok;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    mesh__set_err(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return MESH_EIO;
  }
  free(tmp);
  return 0;
}

/* ---- OBJ ------------------------------------------------------------------------------------- */

typedef struct strbuf {
  char *data;
  size_t len, cap;
  int failed;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) MESH__PRINTF(2, 3);

static void sb_printf(strbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = 1;
      return;
    }
    if (b->data && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 1 << 16;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *g = realloc(b->data, cap);
    if (!g) {
      b->failed = 1;
      return;
    }
    b->data = g;
    b->cap = cap;
  }
}

/* `mtllib` (the MTL's file name beside it) or NULL: without, the OBJ names no materials. */
static int export_obj(const mesh *m, const float *p, const float *normals, const char *mtllib, uint8_t **bytes,
                      size_t *len) {
  strbuf b = {0};
  sb_printf(&b, "# deformd export: %u vertices, %u triangles\n", m->vertex_count, m->triangle_count);
  if (mtllib) sb_printf(&b, "mtllib %s\n", mtllib);
  for (uint32_t v = 0; v < m->vertex_count; v++)
    sb_printf(&b, "v %.9g %.9g %.9g\n", (double)p[3 * v], (double)p[3 * v + 1], (double)p[3 * v + 2]);
  if (m->uvs)
    for (uint32_t v = 0; v < m->vertex_count; v++)
      sb_printf(&b, "vt %.9g %.9g\n", (double)m->uvs[2 * v], (double)m->uvs[2 * v + 1]);
  for (uint32_t v = 0; v < m->vertex_count; v++)
    sb_printf(&b, "vn %.7g %.7g %.7g\n", (double)normals[3 * v], (double)normals[3 * v + 1],
              (double)normals[3 * v + 2]);
  uint32_t sub = 0;
  for (uint32_t f = 0; f < m->triangle_count; f++) {
    while (sub < m->submesh_count && m->submeshes[sub].first_triangle == f) {
      if (m->submeshes[sub].triangle_count > 0) {
        sb_printf(&b, "g %s\n", m->submeshes[sub].name[0] ? m->submeshes[sub].name : "mesh");
        char mat[32];
        mesh__mtl_name(&m->submeshes[sub], sub, mat, sizeof(mat));
        if (mtllib) sb_printf(&b, "usemtl %s\n", mat);
      }
      sub++;
    }
    const uint32_t *t = m->triangles + 3 * (size_t)f;
    if (m->uvs)
      sb_printf(&b, "f %u/%u/%u %u/%u/%u %u/%u/%u\n", t[0] + 1, t[0] + 1, t[0] + 1, t[1] + 1,
                t[1] + 1, t[1] + 1, t[2] + 1, t[2] + 1, t[2] + 1);
    else
      sb_printf(&b, "f %u//%u %u//%u %u//%u\n", t[0] + 1, t[0] + 1, t[1] + 1, t[1] + 1, t[2] + 1,
                t[2] + 1);
  }
  if (b.failed) {
    free(b.data);
    return MESH_ENOMEM;
  }
  *bytes = (uint8_t *)b.data;
  *len = b.len;
  return 0;
}

/* ---- GLB through assimp -------------------------------------------------------------------- */

static void set_aistring(struct aiString *s, const char *text) {
  size_t n = strlen(text);
  if (n >= MAXLEN) n = MAXLEN - 1;
  s->length = (ai_uint32)n;
  memcpy(s->data, text, n);
  s->data[n] = '\0';
}

/* Every pointer in the scene below is malloc'ed by us and freed by free_scene(); assimp only
 * reads it (its exporter works on a copy). */
static void free_scene(struct aiScene *sc) {
  if (!sc) return;
  for (unsigned i = 0; i < sc->mNumMeshes; i++) {
    struct aiMesh *am = sc->mMeshes[i];
    if (!am) continue;
    free(am->mVertices);
    free(am->mNormals);
    free(am->mTextureCoords[0]);
    for (unsigned f = 0; am->mFaces && f < am->mNumFaces; f++) free(am->mFaces[f].mIndices);
    free(am->mFaces);
    for (unsigned a = 0; am->mAnimMeshes && a < am->mNumAnimMeshes; a++) {
      if (am->mAnimMeshes[a]) free(am->mAnimMeshes[a]->mVertices);
      free(am->mAnimMeshes[a]);
    }
    free(am->mAnimMeshes);
    free(am);
  }
  free(sc->mMeshes);
  for (unsigned i = 0; i < sc->mNumMaterials; i++) free(sc->mMaterials[i]);
  free(sc->mMaterials);
  if (sc->mRootNode) {
    free(sc->mRootNode->mMeshes);
    free(sc->mRootNode);
  }
  free(sc);
}

/* One aiMesh per submesh when every submesh's triangles stay inside its vertex range (what
 * mesh_import produces); otherwise one aiMesh for everything. */
static int submeshes_are_closed(const mesh *m) {
  if (m->submesh_count == 0) return 0;
  uint64_t tris = 0;
  for (uint32_t s = 0; s < m->submesh_count; s++) {
    const mesh_submesh *sm = &m->submeshes[s];
    tris += sm->triangle_count;
    for (uint32_t f = sm->first_triangle; f < sm->first_triangle + sm->triangle_count; f++)
      for (int c = 0; c < 3; c++) {
        uint32_t v = m->triangles[3 * (size_t)f + c];
        if (v < sm->first_vertex || v >= sm->first_vertex + sm->vertex_count) return 0;
      }
  }
  return tris == m->triangle_count;
}

static struct aiMesh *build_aimesh(const mesh *m, const float *p, const float *normals,
                                   const char *name, uint32_t v0, uint32_t nv, uint32_t f0,
                                   uint32_t nf) {
  struct aiMesh *am = calloc(1, sizeof(*am));
  if (!am) return NULL;
  set_aistring(&am->mName, name[0] ? name : "mesh");
  am->mPrimitiveTypes = aiPrimitiveType_TRIANGLE;
  am->mNumVertices = nv;
  am->mVertices = malloc(sizeof(struct aiVector3D) * (nv + 1));
  am->mNormals = malloc(sizeof(struct aiVector3D) * (nv + 1));
  am->mFaces = calloc(nf + 1, sizeof(struct aiFace));
  am->mNumFaces = nf;
  if (m->uvs) {
    am->mTextureCoords[0] = malloc(sizeof(struct aiVector3D) * (nv + 1));
    am->mNumUVComponents[0] = 2;
  }
  if (m->target_count) {
    am->mAnimMeshes = calloc(m->target_count, sizeof(struct aiAnimMesh *));
    am->mNumAnimMeshes = m->target_count;
  }
  if (!am->mVertices || !am->mNormals || !am->mFaces || (m->uvs && !am->mTextureCoords[0]) ||
      (m->target_count && !am->mAnimMeshes))
    return am; /* caller checks with mesh_ok() */
  for (uint32_t i = 0; i < nv; i++) {
    const float *q = p + 3 * (size_t)(v0 + i), *n = normals + 3 * (size_t)(v0 + i);
    am->mVertices[i] = (struct aiVector3D){q[0], q[1], q[2]};
    am->mNormals[i] = (struct aiVector3D){n[0], n[1], n[2]};
    if (m->uvs) am->mTextureCoords[0][i] = (struct aiVector3D){m->uvs[2 * (v0 + i)], m->uvs[2 * (v0 + i) + 1], 0};
  }
  for (uint32_t f = 0; f < nf; f++) {
    struct aiFace *face = &am->mFaces[f];
    face->mIndices = malloc(sizeof(unsigned) * 3);
    if (!face->mIndices) return am;
    face->mNumIndices = 3;
    for (int c = 0; c < 3; c++) face->mIndices[c] = m->triangles[3 * (size_t)(f0 + f) + c] - v0;
  }
  for (uint32_t t = 0; t < m->target_count; t++) {
    struct aiAnimMesh *a = calloc(1, sizeof(*a));
    am->mAnimMeshes[t] = a;
    if (!a) return am;
    set_aistring(&a->mName, m->targets[t].name);
    a->mWeight = m->targets[t].default_weight;
    a->mNumVertices = nv;
    a->mVertices = malloc(sizeof(struct aiVector3D) * (nv + 1));
    if (!a->mVertices) return am;
    /* assimp's morph targets are absolute positions; its exporter writes the difference. */
    memcpy(a->mVertices, am->mVertices, sizeof(struct aiVector3D) * nv);
    const mesh_target *tg = &m->targets[t];
    for (uint32_t k = 0; k < tg->count; k++) {
      uint32_t v = tg->indices[k];
      if (v < v0 || v >= v0 + nv) continue;
      a->mVertices[v - v0].x += tg->deltas[3 * (size_t)k];
      a->mVertices[v - v0].y += tg->deltas[3 * (size_t)k + 1];
      a->mVertices[v - v0].z += tg->deltas[3 * (size_t)k + 2];
    }
  }
  return am;
}

static int mesh_ok(const mesh *m, const struct aiMesh *am) {
  if (!am || !am->mVertices || !am->mNormals || !am->mFaces) return 0;
  if (m->uvs && !am->mTextureCoords[0]) return 0;
  for (unsigned f = 0; f < am->mNumFaces; f++)
    if (!am->mFaces[f].mIndices) return 0;
  if (m->target_count && !am->mAnimMeshes) return 0;
  for (unsigned t = 0; t < am->mNumAnimMeshes; t++)
    if (!am->mAnimMeshes[t] || !am->mAnimMeshes[t]->mVertices) return 0;
  return 1;
}

/* With z_up, gives the scene's root nodes the rotation -90° about X (glTF is Y-up; +Z then
 * points up) as a quaternion (x, y, z, w). The root node assimp writes has the identity
 * transform, so it has no matrix or rotation of its own to combine with. */
static void rotate_roots_z_up(cJSON *root) {
  const cJSON *scene = cJSON_GetObjectItemCaseSensitive(root, "scene");
  cJSON *scenes = cJSON_GetObjectItemCaseSensitive(root, "scenes");
  cJSON *sc = cJSON_GetArrayItem(scenes, cJSON_IsNumber(scene) ? scene->valueint : 0);
  cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  const cJSON *index;
  cJSON_ArrayForEach(index, cJSON_GetObjectItemCaseSensitive(sc, "nodes")) {
    cJSON *node = cJSON_IsNumber(index) ? cJSON_GetArrayItem(nodes, index->valueint) : NULL;
    if (!node) continue;
    cJSON_DeleteItemFromObjectCaseSensitive(node, "matrix");
    cJSON_DeleteItemFromObjectCaseSensitive(node, "rotation");
    const double h = 0.70710678118654752; /* sin 45° = cos 45° */
    const double q[4] = {-h, 0.0, 0.0, h};
    cJSON_AddItemToObject(node, "rotation", cJSON_CreateDoubleArray(q, 4));
  }
}

/* The images a GLB embeds (mesh_export_mat.c): their PNGs, appended after the binary chunk's
 * `bin_len` bytes. */
typedef struct mesh__glb_images {
  int with, per_mesh;
  size_t bin_len;
  uint8_t **pngs;
  size_t *lens;
  uint32_t count;
} mesh__glb_images;

static void glb_images_fini(mesh__glb_images *im) {
  for (uint32_t i = 0; im->pngs && i < im->count; i++) free(im->pngs[i]);
  free(im->pngs);
  free(im->lens);
}

/* Adds extras.targetNames and weights to every glTF mesh whose primitives have targets, and
 * drops extensionsUsed entries nothing uses; with z_up, rotates the root nodes
 * (rotate_roots_z_up); with im->with, the materials and images (mesh__gltf_add_materials).
 * `json` is the GLB's JSON chunk. Returns a new malloc'ed string (caller frees) or NULL. */
static char *patch_gltf_json(const mesh *m, const char *json, size_t len, int z_up, mesh__glb_images *im) {
  cJSON *root = cJSON_ParseWithLength(json, len);
  if (!root) return NULL;
  if (z_up) rotate_roots_z_up(root);
  if (im->with && mesh__gltf_add_materials(m, root, im->per_mesh, im->bin_len, &im->pngs, &im->lens) != 0) {
    cJSON_Delete(root);
    return NULL;
  }
  cJSON *meshes = cJSON_GetObjectItemCaseSensitive(root, "meshes");
  cJSON *gm;
  cJSON_ArrayForEach(gm, meshes) {
    cJSON *prims = cJSON_GetObjectItemCaseSensitive(gm, "primitives");
    cJSON *prim0 = cJSON_GetArrayItem(prims, 0);
    cJSON *targets = prim0 ? cJSON_GetObjectItemCaseSensitive(prim0, "targets") : NULL;
    if (!cJSON_IsArray(targets) || cJSON_GetArraySize(targets) != (int)m->target_count) continue;
    cJSON *names = cJSON_CreateArray();
    cJSON *weights = cJSON_CreateArray();
    for (uint32_t t = 0; t < m->target_count; t++) {
      cJSON_AddItemToArray(names, cJSON_CreateString(m->targets[t].name));
      cJSON_AddItemToArray(weights, cJSON_CreateNumber(m->targets[t].default_weight));
    }
    cJSON *extras = cJSON_GetObjectItemCaseSensitive(gm, "extras");
    if (!extras) extras = cJSON_AddObjectToObject(gm, "extras");
    cJSON_DeleteItemFromObjectCaseSensitive(extras, "targetNames");
    cJSON_AddItemToObject(extras, "targetNames", names);
    cJSON_DeleteItemFromObjectCaseSensitive(gm, "weights");
    cJSON_AddItemToObject(gm, "weights", weights);
  }
  /* assimp 5.2 lists extensions it did not use; strict validators warn about them. */
  cJSON *used = cJSON_DetachItemFromObjectCaseSensitive(root, "extensionsUsed");
  if (used) {
    char *rest = cJSON_PrintUnformatted(root);
    cJSON *keep = cJSON_CreateArray();
    cJSON *ext;
    cJSON_ArrayForEach(ext, used) {
      if (!cJSON_IsString(ext)) continue;
      char key[256];
      snprintf(key, sizeof(key), "\"%s\":", ext->valuestring);
      if (rest && strstr(rest, key)) cJSON_AddItemToArray(keep, cJSON_CreateString(ext->valuestring));
    }
    free(rest);
    cJSON_Delete(used);
    if (cJSON_GetArraySize(keep) > 0)
      cJSON_AddItemToObject(root, "extensionsUsed", keep);
    else
      cJSON_Delete(keep);
  }
  char *out = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return out;
}

static uint32_t rd32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void wr32(unsigned char *b, uint32_t v) {
  b[0] = (unsigned char)v;
  b[1] = (unsigned char)(v >> 8);
  b[2] = (unsigned char)(v >> 16);
  b[3] = (unsigned char)(v >> 24);
}

static int export_glb(const mesh *m, const float *p, const float *normals, int z_up, uint8_t **bytes,
                      size_t *len, char *err, size_t errlen) {
  int rc = MESH_ENOMEM;
  int split = submeshes_are_closed(m);
  unsigned nmeshes = split ? m->submesh_count : 1;
  const struct aiExportDataBlob *blob = NULL;
  mesh__glb_images images = {0};
  char *json = NULL;
  unsigned char *out = NULL;
  struct aiScene *sc = calloc(1, sizeof(*sc));
  if (!sc) return MESH_ENOMEM;
  sc->mMeshes = calloc(nmeshes, sizeof(struct aiMesh *));
  sc->mMaterials = calloc(1, sizeof(struct aiMaterial *));
  sc->mRootNode = calloc(1, sizeof(struct aiNode));
  if (!sc->mMeshes || !sc->mMaterials || !sc->mRootNode) goto out;
  sc->mNumMeshes = nmeshes;
  /* The glTF exporter requires a material; an empty one becomes glTF's default material. */
  sc->mMaterials[0] = calloc(1, sizeof(struct aiMaterial));
  if (!sc->mMaterials[0]) goto out;
  sc->mNumMaterials = 1;
  for (unsigned i = 0; i < nmeshes; i++) {
    if (split) {
      const mesh_submesh *sm = &m->submeshes[i];
      sc->mMeshes[i] = build_aimesh(m, p, normals, sm->name, sm->first_vertex, sm->vertex_count,
                                    sm->first_triangle, sm->triangle_count);
    } else {
      sc->mMeshes[i] = build_aimesh(m, p, normals, m->submesh_count ? m->submeshes[0].name : "mesh",
                                    0, m->vertex_count, 0, m->triangle_count);
    }
    if (!mesh_ok(m, sc->mMeshes[i])) goto out;
  }
  struct aiNode *root = sc->mRootNode;
  set_aistring(&root->mName, "deformd");
  root->mTransformation.a1 = root->mTransformation.b2 = 1;
  root->mTransformation.c3 = root->mTransformation.d4 = 1;
  root->mMeshes = malloc(sizeof(unsigned) * nmeshes);
  if (!root->mMeshes) goto out;
  root->mNumMeshes = nmeshes;
  for (unsigned i = 0; i < nmeshes; i++) root->mMeshes[i] = i;

  blob = aiExportSceneToBlob(sc, "glb2", 0);
  if (!blob || blob->size < 20) {
    mesh__set_err(err, errlen, "assimp could not export GLB: %s", aiGetErrorString());
    rc = MESH_EIO;
    goto out;
  }
  const unsigned char *b = blob->data;
  uint32_t json_len = rd32(b + 12);
  if (memcmp(b, "glTF", 4) != 0 || memcmp(b + 16, "JSON", 4) != 0 || 20 + (size_t)json_len > blob->size) {
    mesh__set_err(err, errlen, "assimp produced a GLB this version cannot patch");
    rc = MESH_EIO;
    goto out;
  }
  /* The binary chunk: its 8-byte header, then the data the JSON's buffer 0 is. */
  const unsigned char *bin = b + 20 + json_len;
  size_t bin_len = blob->size - 20 - json_len;
  if (bin_len < 8 || memcmp(bin + 4, "BIN", 4) != 0 || 8 + (size_t)rd32(bin) > bin_len) {
    mesh__set_err(err, errlen, "assimp produced a GLB without the binary chunk this version expects");
    rc = MESH_EIO;
    goto out;
  }
  images.with = mesh__has_materials(m);
  images.per_mesh = split;
  images.bin_len = rd32(bin);
  images.count = m->image_count;
  json = patch_gltf_json(m, (const char *)b + 20, json_len, z_up, &images);
  if (!json) goto out;
  size_t data = images.bin_len, jl = strlen(json), jpad = (jl + 3) & ~(size_t)3;
  for (uint32_t i = 0; images.with && i < images.count; i++) data = ((data + 3) & ~(size_t)3) + images.lens[i];
  data = (data + 3) & ~(size_t)3;
  size_t total = 12 + 8 + jpad + 8 + data;
  if (total > UINT32_MAX) {
    mesh__set_err(err, errlen, "mesh too large for a GLB file (%zu bytes)", total);
    rc = MESH_ETOOBIG;
    goto out;
  }
  out = malloc(total);
  if (!out) goto out;
  memcpy(out, "glTF", 4);
  wr32(out + 4, 2);
  wr32(out + 8, (uint32_t)total);
  wr32(out + 12, (uint32_t)jpad);
  memcpy(out + 16, "JSON", 4);
  memcpy(out + 20, json, jl);
  memset(out + 20 + jl, ' ', jpad - jl); /* the spec pads the JSON chunk with spaces */
  unsigned char *o = out + 20 + jpad;
  memset(o, 0, 8 + data); /* the binary chunk pads with zeros */
  wr32(o, (uint32_t)data);
  memcpy(o + 4, "BIN", 4);
  memcpy(o + 8, bin + 8, images.bin_len);
  for (size_t i = 0, at = (images.bin_len + 3) & ~(size_t)3; images.with && i < images.count; i++) {
    memcpy(o + 8 + at, images.pngs[i], images.lens[i]);
    at = (at + images.lens[i] + 3) & ~(size_t)3;
  }
  *bytes = out;
  *len = total;
  out = NULL;
  rc = 0;

out:
  if (blob) aiReleaseExportBlob(blob);
  glb_images_fini(&images);
  free(json);
  free(out);
  free_scene(sc);
  return rc;
}

int mesh_export_mem(const mesh *m, const float *positions, mesh_format fmt, uint8_t **out, size_t *len,
                    char *err, size_t errlen) {
  return mesh_export_mem_opts(m, positions, fmt, NULL, out, len, err, errlen);
}

int mesh_export_mem_opts(const mesh *m, const float *positions, mesh_format fmt, const mesh_export_opts *opts,
                         uint8_t **out, size_t *len, char *err, size_t errlen) {
  int z_up = opts && opts->z_up;
  *out = NULL;
  *len = 0;
  if (m == NULL || (fmt != MESH_FORMAT_OBJ && fmt != MESH_FORMAT_GLB)) return MESH_EINVAL;
  const float *p = positions ? positions : m->positions;
  float *normals = malloc(sizeof(float) * (3 * (size_t)m->vertex_count + 1));
  if (!normals) return MESH_ENOMEM;
  mesh_topology t;
  int rc = mesh_topology_init(&t, m, p, 0.0);
  if (rc) {
    free(normals);
    return rc;
  }
  mesh_compute_normals(m, &t, p, MESH_NORMALS_ANGLE, normals);
  mesh_topology_fini(&t);
  rc = fmt == MESH_FORMAT_OBJ ? export_obj(m, p, normals, opts ? opts->mtllib : NULL, out, len)
                               : export_glb(m, p, normals, z_up, out, len, err, errlen);
  free(normals);
  return rc;
}

void mesh_export_files_free(mesh_export_file *files, uint32_t count) {
  for (uint32_t i = 0; files && i < count; i++) free(files[i].name), free(files[i].bytes);
  free(files);
}

/* files[i] named `dir``stem``suffix`. */
static int name_file(mesh_export_file *f, const char *dir, size_t dir_len, const char *stem, const char *suffix) {
  size_t n = dir_len + strlen(stem) + strlen(suffix) + 1;
  if (!(f->name = malloc(n))) return MESH_ENOMEM;
  snprintf(f->name, n, "%.*s%s%s", (int)dir_len, dir, stem, suffix);
  return 0;
}

int mesh_export_obj_files(const mesh *m, const float *positions, const char *obj_name, mesh_export_file **files,
                          uint32_t *count, char *err, size_t errlen) {
  *files = NULL;
  *count = 0;
  const char *slash = strrchr(obj_name, '/'), *base = slash ? slash + 1 : obj_name;
  size_t dir_len = (size_t)(base - obj_name), bl = strlen(base);
  char *stem = strndup(base, ends_with(base, ".obj") ? bl - 4 : bl);
  int with = mesh__has_materials(m);
  uint32_t n = with ? m->image_count + 2 : 1;
  mesh_export_file *f = calloc(n, sizeof(*f));
  if (!stem || !f) {
    free(stem), free(f);
    return MESH_ENOMEM;
  }
  int rc = 0;
  for (uint32_t i = 0; with && rc == 0 && i < m->image_count; i++) {
    char suffix[32];
    snprintf(suffix, sizeof(suffix), "_%u.png", i);
    rc = name_file(&f[i], obj_name, dir_len, stem, suffix);
    if (rc == 0) rc = mesh_image_png(&m->images[i], &f[i].bytes, &f[i].len);
  }
  char mtllib[PATH_MAX];
  snprintf(mtllib, sizeof(mtllib), "%s.mtl", stem);
  if (with && rc == 0 && (rc = name_file(&f[n - 2], obj_name, dir_len, stem, ".mtl")) == 0) {
    char *text = mesh__mtl_text(m, stem);
    f[n - 2].bytes = (uint8_t *)text;
    f[n - 2].len = text ? strlen(text) : 0;
    if (!text) rc = MESH_ENOMEM;
  }
  if (rc == 0 && !(f[n - 1].name = strdup(obj_name))) rc = MESH_ENOMEM;
  mesh_export_opts o = {.mtllib = with ? mtllib : NULL};
  if (rc == 0) rc = mesh_export_mem_opts(m, positions, MESH_FORMAT_OBJ, &o, &f[n - 1].bytes, &f[n - 1].len, err, errlen);
  free(stem);
  if (rc) {
    if (rc == MESH_ENOMEM) mesh__set_err(err, errlen, "out of memory");
    mesh_export_files_free(f, n);
    return rc;
  }
  *files = f;
  *count = n;
  return 0;
}

int mesh_export(const mesh *m, const float *positions, const char *path, mesh_format fmt,
                char *err, size_t errlen) {
  if (m == NULL || path == NULL) return MESH_EINVAL;
  if (fmt == MESH_FORMAT_AUTO) {
    if (ends_with(path, ".obj"))
      fmt = MESH_FORMAT_OBJ;
    else if (ends_with(path, ".glb"))
      fmt = MESH_FORMAT_GLB;
    else {
      mesh__set_err(err, errlen, "cannot tell the format of '%s': use .obj or .glb", path);
      return MESH_EINVAL;
    }
  }
  if (fmt == MESH_FORMAT_OBJ) {
    mesh_export_file *files;
    uint32_t n;
    int rc = mesh_export_obj_files(m, positions, path, &files, &n, err, errlen);
    for (uint32_t i = 0; rc == 0 && i < n; i++) rc = write_atomically(files[i].name, files[i].bytes, files[i].len, err, errlen);
    mesh_export_files_free(files, n); /* NULL and 0 when the export failed */
    return rc;
  }
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = mesh_export_mem(m, positions, fmt, &bytes, &len, err, errlen);
  if (rc == 0) rc = write_atomically(path, bytes, len, err, errlen);
  free(bytes);
  return rc;
}
