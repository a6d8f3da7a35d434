/*
 * mesh_scene.c — reading a file through assimp, and placing what it returns.
 *
 * Every assimp read of a mesh file goes through mesh__scene_read, so the base import
 * (mesh_import.c) and the extra per-keyframe imports of an MD2 file (mesh_md2.c) see the file
 * the same way: triangulated, points and lines dropped, one file per asset. mesh__scene_gather
 * walks the node tree into a flat list of placed instances (an aiMesh and its node's global
 * transform); mesh__scene_point and mesh__scene_normal_matrix apply such a transform.
 *
 * DOES NOT capture assimp's log or judge what assimp returned (mesh_import.c does both), and
 * copies no vertex data: instances borrow the scene's meshes.
 */
#include <assimp/cimport.h>
#include <assimp/config.h>
#include <assimp/postprocess.h>
#include <assimp/scene.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

/* ---- reading ------------------------------------------------------------------------------------ */

static const unsigned IMPORT_FLAGS = aiProcess_Triangulate | aiProcess_SortByPType |
                                     aiProcess_ValidateDataStructure;

static struct aiPropertyStore *make_props(int md2_keyframe) {
  struct aiPropertyStore *props = aiCreatePropertyStore();
  if (!props) return NULL;
  aiSetImportPropertyInteger(props, AI_CONFIG_PP_SBP_REMOVE,
                             aiPrimitiveType_POINT | aiPrimitiveType_LINE);
  /* One file is one asset: do not go looking for lower/upper/head siblings. */
  aiSetImportPropertyInteger(props, AI_CONFIG_IMPORT_MD3_HANDLE_MULTIPART, 0);
  if (md2_keyframe >= 0) aiSetImportPropertyInteger(props, AI_CONFIG_IMPORT_MD2_KEYFRAME, md2_keyframe);
  return props;
}

int mesh__scene_read(const char *path, int md2_keyframe, const struct aiScene **out) {
  *out = NULL;
  struct aiPropertyStore *props = make_props(md2_keyframe);
  if (!props) return MESH_ENOMEM;
  /* Confined (mesh_file.c): assimp opens the file and what it names beneath one folder. */
  *out = aiImportFileExWithProperties(path, IMPORT_FLAGS, mesh__ai_file_io(), props);
  aiReleasePropertyStore(props);
  return 0;
}

/* FBX files say which axis is up in their GlobalSettings, and assimp's FBX reader passes it on
 * as scene metadata (integers: 0 X, 1 Y, 2 Z; sign 1 or -1) without turning the geometry.
 * Only +Z is reported: Y is everyone's default, and X-up or downward axes are rare enough that a
 * user names the axis (session.create's up) rather than us guessing a rotation. */
char mesh__scene_up_axis(const struct aiScene *sc) {
  const struct aiMetadata *md = sc ? sc->mMetaData : NULL;
  if (!md) return 0;
  int axis = -1, sign = 1;
  for (unsigned i = 0; i < md->mNumProperties; i++) {
    const struct aiMetadataEntry *e = &md->mValues[i];
    if (e->mType != AI_INT32 || !e->mData) continue;
    int v;
    memcpy(&v, e->mData, sizeof(v));
    if (strcmp(md->mKeys[i].data, "UpAxis") == 0) axis = v;
    else if (strcmp(md->mKeys[i].data, "UpAxisSign") == 0) sign = v;
  }
  return axis == 2 && sign == 1 ? 'z' : 0;
}

/* ---- transforms --------------------------------------------------------------------------------- */

static mesh__mat4d mat_from_ai(const struct aiMatrix4x4 *a) {
  mesh__mat4d r;
  const ai_real *src = &a->a1;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) r.m[i][j] = src[4 * i + j];
  return r;
}

static mesh__mat4d mat_mul(const mesh__mat4d *a, const mesh__mat4d *b) {
  mesh__mat4d r;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double s = 0.0;
      for (int k = 0; k < 4; k++) s += a->m[i][k] * b->m[k][j];
      r.m[i][j] = s;
    }
  return r;
}

void mesh__scene_normal_matrix(const mesh__mat4d *a, double n[3][3]) {
  double m[3][3];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) m[i][j] = a->m[i][j];
  double c[3][3];
  c[0][0] = m[1][1] * m[2][2] - m[1][2] * m[2][1];
  c[0][1] = m[1][2] * m[2][0] - m[1][0] * m[2][2];
  c[0][2] = m[1][0] * m[2][1] - m[1][1] * m[2][0];
  c[1][0] = m[0][2] * m[2][1] - m[0][1] * m[2][2];
  c[1][1] = m[0][0] * m[2][2] - m[0][2] * m[2][0];
  c[1][2] = m[0][1] * m[2][0] - m[0][0] * m[2][1];
  c[2][0] = m[0][1] * m[1][2] - m[0][2] * m[1][1];
  c[2][1] = m[0][2] * m[1][0] - m[0][0] * m[1][2];
  c[2][2] = m[0][0] * m[1][1] - m[0][1] * m[1][0];
  double det = m[0][0] * c[0][0] + m[0][1] * c[0][1] + m[0][2] * c[0][2];
  /* The cofactor matrix is det · inverse-transpose; only the direction matters for normals. */
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) n[i][j] = det != 0.0 ? c[i][j] * (det > 0 ? 1.0 : -1.0) : m[i][j];
}

void mesh__scene_point(const mesh__mat4d *a, const struct aiVector3D *v, double out[3]) {
  for (int i = 0; i < 3; i++)
    out[i] = a->m[i][0] * v->x + a->m[i][1] * v->y + a->m[i][2] * v->z + a->m[i][3];
}

/* ---- gathering the node tree into flat arrays -------------------------------------------------- */

static int collect_instances(const struct aiScene *sc, const struct aiNode *node,
                             const mesh__mat4d *parent, mesh__scene *g, int depth) {
  if (depth > 256) return MESH_EFORMAT; /* a cycle or an absurd hierarchy */
  mesh__mat4d local = mat_from_ai(&node->mTransformation);
  mesh__mat4d xf = mat_mul(parent, &local);
  for (unsigned i = 0; i < node->mNumMeshes; i++) {
    unsigned mi = node->mMeshes[i];
    if (mi >= sc->mNumMeshes) return MESH_ERANGE;
    const struct aiMesh *am = sc->mMeshes[mi];
    if (!(am->mPrimitiveTypes & aiPrimitiveType_TRIANGLE) || am->mNumFaces == 0) continue;
    if (g->count == g->cap) {
      uint32_t cap = g->cap ? 2 * g->cap : 8;
      mesh__instance *grown = realloc(g->items, sizeof(*grown) * cap);
      if (!grown) return MESH_ENOMEM;
      g->items = grown;
      g->cap = cap;
    }
    mesh__instance *it = &g->items[g->count++];
    it->mesh = am;
    it->xf = xf;
    it->name = am->mName.length ? am->mName.data : node->mName.data;
  }
  for (unsigned c = 0; c < node->mNumChildren; c++) {
    int rc = collect_instances(sc, node->mChildren[c], &xf, g, depth + 1);
    if (rc) return rc;
  }
  return 0;
}

int mesh__scene_gather(const struct aiScene *sc, mesh__scene *g) {
  mesh__mat4d id = {{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}};
  memset(g, 0, sizeof(*g));
  if (sc->mRootNode == NULL) return 0;
  return collect_instances(sc, sc->mRootNode, &id, g, 0);
}

void mesh__scene_fini(mesh__scene *g) {
  free(g->items);
  memset(g, 0, sizeof(*g));
}
