/*
 * mesh_import.c — reading mesh files through the assimp C API.
 *
 * One file becomes one mesh: every aiMesh instance of the node tree is placed by its node's
 * global transform (mesh_scene.c) and appended as a submesh, morph targets (aiAnimMesh) are
 * matched across submeshes by name, keyframes are added (MD2: one more import per frame,
 * mesh_md2.c; MD3: read from the file, mesh_md3.c), render vertices identical in every attribute
 * and every frame are merged (meshoptimizer), and unreferenced vertices are dropped. Clips come
 * last: a Quake III animation.cfg beside an MD3 (mesh_md3_cfg.c), MD2/MD3 frames grouped by
 * their names (mesh_md2.c, mesh_md3.c, mesh_clip.c), glTF
 * morph-weight animations read from the file's JSON (mesh_gltf_anim.c).
 *
 * assimp accepts some broken files without failing (an out-of-range glTF index is dropped with
 * a warning, an OFF file whose header lies is read anyway, infinities pass through), so its log
 * is captured per import and everything is validated again after it returns.
 *
 * DOES NOT run on any particular thread: the server calls it from its thread pool. It keeps no
 * global state besides the one assimp log stream, attached once.
 */
#include <assimp/cimport.h>
#include <assimp/scene.h>
#include <errno.h>
#include <math.h>
#include <meshoptimizer.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "mesh.h"
#include "mesh_internal.h"

/* ---- assimp log capture -----------------------------------------------------------------------
 * assimp reports problems it tolerates only through its global logger. The stream is attached
 * once; each import points a thread-local context at its own buffers, so concurrent imports on
 * different threads never see each other's messages. */

typedef struct import_log {
  char first_error[MESH_ERR_LEN];   /* first error that concerns geometry */
  char index_warning[MESH_ERR_LEN]; /* assimp dropped faces with out-of-range indices */
  char loss_warning[MESH_ERR_LEN];  /* assimp dropped or skipped other data */
  int errors;
} import_log;

static _Thread_local import_log *tls_log;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void copy_log_line(char *dst, const char *msg) {
  /* Lines look like "Error, T0: message\n": keep the message. */
  const char *colon = strstr(msg, ": ");
  const char *text = colon ? colon + 2 : msg;
  snprintf(dst, MESH_ERR_LEN, "%s", text);
  size_t n = strlen(dst);
  while (n > 0 && (dst[n - 1] == '\n' || dst[n - 1] == '\r')) dst[--n] = '\0';
}

/* assimp logs some harmless conditions as errors (a missing .mtl, a material it had to make
 * up): we ignore materials, so these do not make a mesh unusable. Everything else logged as an
 * error, and warnings that say data was dropped, do. Surveyed over Debian's assimp-testmodels. */
static int harmless_error(const char *msg) {
  return strstr(msg, "material") != NULL || strstr(msg, "No object detected") != NULL;
}

static void on_assimp_log(const char *msg, char *user) {
  (void)user;
  import_log *log = tls_log;
  if (log == NULL) return;
  if (strncmp(msg, "Error", 5) == 0) {
    if (!harmless_error(msg) && log->errors++ == 0) copy_log_line(log->first_error, msg);
  } else if (strncmp(msg, "Warn", 4) == 0) {
    if (log->index_warning[0] == '\0' &&
        (strstr(msg, "out-of-range") || strstr(msg, "out of range") || strstr(msg, "invalid index")))
      copy_log_line(log->index_warning, msg);
    else if (log->loss_warning[0] == '\0' && (strstr(msg, "dropped") || strstr(msg, "Skipping")))
      copy_log_line(log->loss_warning, msg);
  }
}

static void attach_log(void) {
  struct aiLogStream s = {on_assimp_log, NULL};
  aiAttachLogStream(&s);
}

/* ---- small helpers ----------------------------------------------------------------------------- */

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* ---- the import itself --------------------------------------------------------------------------- */

typedef struct raw_target {
  char *name;
  float default_weight;
  float *dense; /* 3 * raw vertex count */
} raw_target;

/* Everything read from the file, before merging identical vertices. */
typedef struct raw_mesh {
  uint32_t vertex_count, triangle_count;
  float *positions, *normals, *uvs;
  uint32_t *triangles;
  uint32_t *vertex_submesh; /* which submesh each raw vertex belongs to */
  uint32_t target_count;
  raw_target *targets;
  uint32_t frame_count;
  float *frames; /* frame_count * 3 * vertex_count */
  uint32_t frame_name_count;
  char (*frame_names)[MESH__FRAME_NAME_LEN]; /* MD2/MD3 frame names, or NULL */
  int morph_animations; /* assimp saw animations of morph-target weights */
  char file_up;         /* the file's own up axis: 'z' or 0 (mesh.file_up) */
  uint32_t submesh_count;
  mesh_submesh *submeshes;
  uint32_t image_count;  /* the submeshes' textures (mesh_material.c) */
  mesh_image *images;
} raw_mesh;

static void raw_fini(raw_mesh *r) {
  free(r->positions);
  free(r->normals);
  free(r->uvs);
  free(r->triangles);
  free(r->vertex_submesh);
  for (uint32_t i = 0; i < r->target_count; i++) {
    free(r->targets[i].name);
    free(r->targets[i].dense);
  }
  free(r->targets);
  free(r->frames);
  free(r->frame_names);
  for (uint32_t i = 0; i < r->submesh_count; i++) free(r->submeshes[i].name);
  free(r->submeshes);
  for (uint32_t i = 0; i < r->image_count; i++) free(r->images[i].name), free(r->images[i].rgba);
  free(r->images);
  memset(r, 0, sizeof(*r));
}

static int raw_target_index(raw_mesh *r, const char *name, float weight, int *out) {
  for (uint32_t i = 0; i < r->target_count; i++) {
    if (strcmp(r->targets[i].name, name) == 0) {
      *out = (int)i;
      return 0;
    }
  }
  raw_target *grown = realloc(r->targets, sizeof(*grown) * (r->target_count + 1));
  if (!grown) return MESH_ENOMEM;
  r->targets = grown;
  raw_target *t = &r->targets[r->target_count];
  t->name = mesh__strdup(name);
  t->default_weight = weight;
  t->dense = calloc(3 * (size_t)r->vertex_count + 1, sizeof(float));
  if (!t->name || !t->dense) {
    free(t->name);
    free(t->dense);
    return MESH_ENOMEM;
  }
  *out = (int)r->target_count++;
  return 0;
}

/* Flattens the placed instances into `r`. Positions are checked for NaN/Inf and faces for
 * out-of-range indices here, where the reason can still name the submesh. */
static int flatten(const mesh__scene *g, raw_mesh *r, uint32_t max_vertices, char *err, size_t errlen) {
  uint64_t nv = 0, nt = 0;
  int all_normals = 1, any_uvs = 0;
  for (uint32_t i = 0; i < g->count; i++) {
    const struct aiMesh *am = g->items[i].mesh;
    nv += am->mNumVertices;
    for (unsigned f = 0; f < am->mNumFaces; f++)
      if (am->mFaces[f].mNumIndices == 3) nt++;
    if (!am->mNormals) all_normals = 0;
    if (am->mTextureCoords[0]) any_uvs = 1;
  }
  if (nt == 0) {
    mesh__set_err(err, errlen, "the file contains no triangles");
    return MESH_ENOTRIS;
  }
  if (nv > max_vertices) {
    mesh__set_err(err, errlen, "the file has %llu vertices, over the limit of %u",
                  (unsigned long long)nv, max_vertices);
    return MESH_ETOOBIG;
  }
  if (nt > UINT32_MAX / 3) {
    mesh__set_err(err, errlen, "the file has %llu triangles, too many", (unsigned long long)nt);
    return MESH_ETOOBIG;
  }
  r->vertex_count = (uint32_t)nv;
  r->triangle_count = (uint32_t)nt;
  r->positions = malloc(sizeof(float) * 3 * (nv + 1));
  r->normals = all_normals ? malloc(sizeof(float) * 3 * (nv + 1)) : NULL;
  r->uvs = any_uvs ? calloc(2 * (nv + 1), sizeof(float)) : NULL;
  r->triangles = malloc(sizeof(uint32_t) * 3 * (nt + 1));
  r->vertex_submesh = malloc(sizeof(uint32_t) * (nv + 1));
  r->submeshes = calloc(g->count + 1, sizeof(mesh_submesh));
  if (!r->positions || (all_normals && !r->normals) || (any_uvs && !r->uvs) || !r->triangles ||
      !r->vertex_submesh || !r->submeshes)
    return MESH_ENOMEM;

  uint32_t vbase = 0, tcount = 0;
  for (uint32_t i = 0; i < g->count; i++) {
    const mesh__instance *it = &g->items[i];
    const struct aiMesh *am = it->mesh;
    mesh_submesh *sm = &r->submeshes[r->submesh_count++];
    sm->name = mesh__strdup(it->name);
    if (!sm->name) return MESH_ENOMEM;
    sm->first_vertex = vbase;
    sm->vertex_count = am->mNumVertices;
    sm->first_triangle = tcount;
    double nm[3][3];
    mesh__scene_normal_matrix(&it->xf, nm);
    for (unsigned v = 0; v < am->mNumVertices; v++) {
      double p[3];
      mesh__scene_point(&it->xf, &am->mVertices[v], p);
      for (int k = 0; k < 3; k++) {
        if (!isfinite(p[k])) {
          mesh__set_err(err, errlen, "mesh '%s': vertex %u has a non-finite coordinate (%g)",
                        it->name, v, p[k]);
          return MESH_ENONFINITE;
        }
        r->positions[3 * (size_t)(vbase + v) + k] = (float)p[k];
      }
      r->vertex_submesh[vbase + v] = i;
      if (r->normals) {
        const struct aiVector3D *n = &am->mNormals[v];
        double q[3], len = 0.0;
        for (int k = 0; k < 3; k++) {
          q[k] = nm[k][0] * n->x + nm[k][1] * n->y + nm[k][2] * n->z;
          len += q[k] * q[k];
        }
        len = sqrt(len);
        for (int k = 0; k < 3; k++) {
          double x = len > 0.0 ? q[k] / len : 0.0;
          /* A broken normal is not worth refusing a mesh for: normals are recomputed anyway. */
          r->normals[3 * (size_t)(vbase + v) + k] = isfinite(x) ? (float)x : 0.0f;
        }
      }
      if (r->uvs && am->mTextureCoords[0]) {
        float u = am->mTextureCoords[0][v].x, w = am->mTextureCoords[0][v].y;
        r->uvs[2 * (size_t)(vbase + v)] = isfinite(u) ? u : 0.0f;
        r->uvs[2 * (size_t)(vbase + v) + 1] = isfinite(w) ? w : 0.0f;
      }
    }
    for (unsigned f = 0; f < am->mNumFaces; f++) {
      const struct aiFace *face = &am->mFaces[f];
      if (face->mNumIndices != 3) continue;
      for (int c = 0; c < 3; c++) {
        if (face->mIndices[c] >= am->mNumVertices) {
          mesh__set_err(err, errlen,
                        "mesh '%s': face %u references vertex %u but the mesh has %u vertices",
                        it->name, f, face->mIndices[c], am->mNumVertices);
          return MESH_ERANGE;
        }
        r->triangles[3 * (size_t)tcount + c] = vbase + face->mIndices[c];
      }
      tcount++;
    }
    sm->triangle_count = tcount - sm->first_triangle;
    vbase += am->mNumVertices;
  }
  return 0;
}

/* Morph targets: assimp stores each aiAnimMesh as absolute positions; we keep deltas, placed by
 * the instance's transform (its linear part acts on the difference). */
static int flatten_targets(const mesh__scene *g, raw_mesh *r, char *err, size_t errlen) {
  uint32_t vbase = 0;
  for (uint32_t i = 0; i < g->count; i++) {
    const mesh__instance *it = &g->items[i];
    const struct aiMesh *am = it->mesh;
    for (unsigned a = 0; a < am->mNumAnimMeshes; a++) {
      const struct aiAnimMesh *anim = am->mAnimMeshes[a];
      if (anim == NULL || anim->mVertices == NULL) continue;
      if (anim->mNumVertices != am->mNumVertices) {
        mesh__set_err(err, errlen, "mesh '%s': morph target %u has %u vertices, the mesh %u",
                      it->name, a, anim->mNumVertices, am->mNumVertices);
        return MESH_EMISMATCH;
      }
      char fallback[32];
      const char *name = anim->mName.data;
      if (anim->mName.length == 0) {
        snprintf(fallback, sizeof(fallback), "target_%u", a);
        name = fallback;
      }
      float weight = isfinite(anim->mWeight) ? anim->mWeight : 0.0f;
      int ti;
      int rc = raw_target_index(r, name, weight, &ti);
      if (rc) return rc;
      float *dense = r->targets[ti].dense;
      for (unsigned v = 0; v < am->mNumVertices; v++) {
        double d[3] = {(double)anim->mVertices[v].x - am->mVertices[v].x,
                       (double)anim->mVertices[v].y - am->mVertices[v].y,
                       (double)anim->mVertices[v].z - am->mVertices[v].z};
        for (int k = 0; k < 3; k++) {
          double x = it->xf.m[k][0] * d[0] + it->xf.m[k][1] * d[1] + it->xf.m[k][2] * d[2];
          if (!isfinite(x)) {
            mesh__set_err(err, errlen, "morph target '%s': vertex %u has a non-finite delta",
                          name, v);
            return MESH_ENONFINITE;
          }
          dense[3 * (size_t)(vbase + v) + k] = (float)x;
        }
      }
    }
    vbase += am->mNumVertices;
  }
  return 0;
}

/* Keyframe formats keep the frame count in their header; assimp hides it. */
typedef enum keyframe_kind { KEYFRAMES_NONE, KEYFRAMES_MD2, KEYFRAMES_MD3 } keyframe_kind;

static keyframe_kind read_keyframe_header(const char *path, uint32_t *frames) {
  unsigned char h[80];
  FILE *f = mesh__fopen(path);
  if (!f) return KEYFRAMES_NONE;
  size_t n = fread(h, 1, sizeof(h), f);
  fclose(f);
  if (n < sizeof(h)) return KEYFRAMES_NONE;
  /* MD2: ident, version, skinwidth, skinheight, framesize, skins, xyz, st, tris, glcmds,
   * frames: the 11th little-endian int32. MD3: ident, version, name[64], flags, frames. */
  if (memcmp(h, "IDP2", 4) == 0) {
    *frames = (uint32_t)h[40] | (uint32_t)h[41] << 8 | (uint32_t)h[42] << 16 | (uint32_t)h[43] << 24;
    return KEYFRAMES_MD2;
  }
  if (memcmp(h, "IDP3", 4) == 0) {
    *frames = (uint32_t)h[76] | (uint32_t)h[77] << 8 | (uint32_t)h[78] << 16 | (uint32_t)h[79] << 24;
    return KEYFRAMES_MD3;
  }
  return KEYFRAMES_NONE;
}

/* A glTF 2.0 file: GLB by its magic, JSON glTF by its extension (as assimp decides). */
static int is_gltf(const char *path) {
  char h[4] = {0};
  FILE *f = mesh__fopen(path);
  if (!f) return 0;
  size_t n = fread(h, 1, 4, f);
  fclose(f);
  if (n == 4 && memcmp(h, "glTF", 4) == 0) return 1;
  const char *dot = strrchr(base_name(path), '.');
  return dot && strcasecmp(dot, ".gltf") == 0;
}

/* A PLY file by its magic, or by its extension: assimp reads a .ply whatever its first line
 * says (a file starting "ply;" made it loop forever; found by fuzzing), so the check must see
 * it too. */
static int is_ply(const char *path) {
  char h[4] = {0};
  FILE *f = mesh__fopen(path);
  if (!f) return 0;
  size_t n = fread(h, 1, 4, f);
  fclose(f);
  const char *dot = strrchr(base_name(path), '.');
  return (n == 4 && memcmp(h, "ply", 3) == 0 && (h[3] == '\n' || h[3] == '\r')) ||
         (dot && strcasecmp(dot, ".ply") == 0);
}

/* FNV-1a over the bytes of one raw vertex's per-frame positions and target deltas, so that the
 * vertex merge below only merges vertices that agree in every frame and every target too. */
static void hash_extras(const raw_mesh *r, uint64_t *hashes) {
  for (uint32_t v = 0; v < r->vertex_count; v++) {
    uint64_t h = 1469598103934665603ULL;
    for (uint32_t f = 0; f < r->frame_count; f++) {
      const unsigned char *b = (const unsigned char *)(r->frames + 3 * ((size_t)f * r->vertex_count + v));
      for (int i = 0; i < 12; i++) h = (h ^ b[i]) * 1099511628211ULL;
    }
    for (uint32_t t = 0; t < r->target_count; t++) {
      const unsigned char *b = (const unsigned char *)(r->targets[t].dense + 3 * (size_t)v);
      for (int i = 0; i < 12; i++) h = (h ^ b[i]) * 1099511628211ULL;
    }
    hashes[v] = h;
  }
}

/* Builds the final mesh from the raw arrays: merges identical vertices within each submesh,
 * drops unreferenced ones, and keeps the file's vertex order otherwise. */
static int compact(raw_mesh *r, mesh *m) {
  uint32_t n = r->vertex_count;
  uint64_t *hashes = malloc(sizeof(uint64_t) * (n + 1));
  uint32_t *remap = malloc(sizeof(uint32_t) * (n + 1));
  uint32_t *cls_new = malloc(sizeof(uint32_t) * (n + 1));
  uint32_t *old_of_new = malloc(sizeof(uint32_t) * (n + 1));
  int rc = MESH_ENOMEM;
  if (!hashes || !remap || !cls_new || !old_of_new) goto out;
  hash_extras(r, hashes);

  struct meshopt_Stream streams[5];
  size_t ns = 0;
  streams[ns++] = (struct meshopt_Stream){r->positions, sizeof(float) * 3, sizeof(float) * 3};
  streams[ns++] = (struct meshopt_Stream){r->vertex_submesh, sizeof(uint32_t), sizeof(uint32_t)};
  streams[ns++] = (struct meshopt_Stream){hashes, sizeof(uint64_t), sizeof(uint64_t)};
  if (r->normals) streams[ns++] = (struct meshopt_Stream){r->normals, sizeof(float) * 3, sizeof(float) * 3};
  if (r->uvs) streams[ns++] = (struct meshopt_Stream){r->uvs, sizeof(float) * 2, sizeof(float) * 2};
  /* remap[v] = class id in order of first use by the index buffer, ~0u when unreferenced. */
  meshopt_generateVertexRemapMulti(remap, r->triangles, 3 * (size_t)r->triangle_count, n, streams, ns);

  /* Renumber classes by their smallest member so the file's vertex order survives. */
  memset(cls_new, 0xff, sizeof(uint32_t) * (n + 1));
  uint32_t count = 0;
  for (uint32_t v = 0; v < n; v++) {
    if (remap[v] == ~0u) continue;
    if (cls_new[remap[v]] == ~0u) {
      cls_new[remap[v]] = count;
      old_of_new[count++] = v;
    }
  }

  rc = mesh_alloc(m, count, r->triangle_count, r->normals != NULL, r->uvs != NULL);
  if (rc) goto out;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t o = old_of_new[i];
    memcpy(m->positions + 3 * (size_t)i, r->positions + 3 * (size_t)o, sizeof(float) * 3);
    if (r->normals) memcpy(m->normals + 3 * (size_t)i, r->normals + 3 * (size_t)o, sizeof(float) * 3);
    if (r->uvs) memcpy(m->uvs + 2 * (size_t)i, r->uvs + 2 * (size_t)o, sizeof(float) * 2);
  }
  for (size_t c = 0; c < 3 * (size_t)r->triangle_count; c++)
    m->triangles[c] = cls_new[remap[r->triangles[c]]];

  /* Submesh vertex ranges: vertices never merge across submeshes and keep their order, so each
   * submesh's survivors are contiguous. */
  m->submeshes = calloc(r->submesh_count + 1, sizeof(mesh_submesh));
  if (!m->submeshes) {
    rc = MESH_ENOMEM;
    goto out;
  }
  m->submesh_count = r->submesh_count;
  for (uint32_t s = 0; s < r->submesh_count; s++) {
    m->submeshes[s] = r->submeshes[s];
    r->submeshes[s].name = NULL;
    m->submeshes[s].vertex_count = 0;
    m->submeshes[s].first_vertex = UINT32_MAX;
  }
  for (uint32_t i = 0; i < count; i++) {
    mesh_submesh *sm = &m->submeshes[r->vertex_submesh[old_of_new[i]]];
    if (sm->first_vertex == UINT32_MAX) sm->first_vertex = i;
    sm->vertex_count++;
  }
  for (uint32_t s = 0; s < m->submesh_count; s++)
    if (m->submeshes[s].first_vertex == UINT32_MAX) m->submeshes[s].first_vertex = 0;

  if (r->frame_count > 1) {
    size_t per = 3 * (size_t)count;
    m->frames = malloc(sizeof(float) * (per * r->frame_count + 1));
    if (!m->frames) {
      rc = MESH_ENOMEM;
      goto out;
    }
    for (uint32_t f = 0; f < r->frame_count; f++)
      for (uint32_t i = 0; i < count; i++)
        memcpy(m->frames + per * f + 3 * (size_t)i,
               r->frames + 3 * ((size_t)f * r->vertex_count + old_of_new[i]), sizeof(float) * 3);
    m->frame_count = r->frame_count;
  }

  float *dense = malloc(sizeof(float) * 3 * ((size_t)count + 1));
  if (!dense) {
    rc = MESH_ENOMEM;
    goto out;
  }
  for (uint32_t t = 0; t < r->target_count; t++) {
    for (uint32_t i = 0; i < count; i++)
      memcpy(dense + 3 * (size_t)i, r->targets[t].dense + 3 * (size_t)old_of_new[i], sizeof(float) * 3);
    rc = mesh_add_target_dense(m, r->targets[t].name, dense, r->targets[t].default_weight);
    if (rc) break;
  }
  free(dense);

out:
  free(hashes);
  free(remap);
  free(cls_new);
  free(old_of_new);
  return rc;
}


/* What a confined import says when assimp refuses a file: the format (by its extension) and
 * a verdict chosen from assimp's message, never the message. Returns the MESH_E* code. */
static int redacted_refusal(const char *path, const char *why, const import_log *log, char *err, size_t errlen) {
  char format[16] = "this";
  const char *dot = strrchr(base_name(path), '.');
  if (dot && dot[1] && strlen(dot + 1) < sizeof(format) - 1) {
    size_t i = 0;
    for (const char *c = dot + 1; *c && i + 1 < sizeof(format); c++)
      format[i++] = (char)((*c >= 'a' && *c <= 'z') ? *c - 'a' + 'A' : (*c >= 0x20 && *c < 0x7f ? *c : '?'));
    format[i] = '\0';
  }
  int rc = MESH_EFORMAT;
  const char *verdict = "malformed data";
  if (log->index_warning[0] || strstr(why, "out of range")) {
    rc = MESH_ERANGE;
    verdict = "an index out of range";
  } else if (strstr(why, "No suitable reader")) {
    verdict = "unknown or unsupported format";
  } else if (strstr(why, "no faces") || strstr(why, "No meshes remaining") || strstr(why, "mNumMeshes is 0") ||
             strstr(why, "contains no vertices")) {
    rc = MESH_ENOTRIS;
    verdict = "no triangles";
  } else if (strstr(why, "nexpected end") || strstr(why, "EOF") || strstr(why, "truncated") ||
             strstr(why, "too small")) {
    verdict = "the file ends early";
  }
  if (strcmp(verdict, "unknown or unsupported format") == 0)
    mesh__set_err(err, errlen, "'%s': unknown or unsupported format", base_name(path));
  else
    mesh__set_err(err, errlen, "'%s': %s (assimp's %s reader refused it)", base_name(path), verdict, format);
  return rc;
}

/* Reads `path` through assimp into `r` (frame 0; MD3 frames too, while assimp's meshes are
 * still alive to match them against). */
static int import_with_assimp(const char *path, keyframe_kind kind, uint32_t nframes,
                              uint32_t max_vertices, import_log *logp, raw_mesh *r, char *err,
                              size_t errlen) {
  import_log *log = logp;
  mesh__scene g = {0};
  const struct aiScene *sc = NULL;
  int rc = mesh__scene_read(path, kind == KEYFRAMES_MD2 ? 0 : -1, &sc);
  if (rc) goto out;
  if (sc == NULL || log->errors > 0) {
    const char *why = log->first_error[0] ? log->first_error : aiGetErrorString();
    if (mesh__redacting()) {
      /* assimp's messages may quote the file (an OGEX reader shown /etc/passwd quoted 50 bytes
       * of it): only its verdict is kept. */
      rc = redacted_refusal(path, why, log, err, errlen);
    } else if (log->index_warning[0]) {
      mesh__set_err(err, errlen, "'%s': index out of range (%s)", base_name(path), log->index_warning);
      rc = MESH_ERANGE;
    } else if (strstr(why, "No suitable reader")) {
      mesh__set_err(err, errlen, "'%s': unknown or unsupported format", base_name(path));
      rc = MESH_EFORMAT;
    } else if (strstr(why, "out of range")) {
      mesh__set_err(err, errlen, "'%s': index out of range (%s)", base_name(path), why);
      rc = MESH_ERANGE;
    } else if (strstr(why, "no faces") || strstr(why, "No meshes remaining") ||
               strstr(why, "mNumMeshes is 0") || strstr(why, "contains no vertices")) {
      mesh__set_err(err, errlen, "'%s': the file contains no triangles (%s)", base_name(path), why);
      rc = MESH_ENOTRIS;
    } else {
      mesh__set_err(err, errlen, "'%s': %s", base_name(path), why[0] ? why : "assimp could not read it");
      rc = MESH_EFORMAT;
    }
    if (sc) aiReleaseImport(sc);
    goto out;
  }
  if (log->index_warning[0] || log->loss_warning[0]) {
    int idx = log->index_warning[0] != '\0';
    mesh__set_err(err, errlen, "'%s': %s (%s)", base_name(path),
                  idx ? "index out of range" : "malformed data",
                  mesh__redacting() ? "assimp's reader dropped part of it" : idx ? log->index_warning : log->loss_warning);
    rc = idx ? MESH_ERANGE : MESH_EFORMAT;
    aiReleaseImport(sc);
    goto out;
  }

  for (unsigned a = 0; a < sc->mNumAnimations; a++)
    if (sc->mAnimations[a] && sc->mAnimations[a]->mNumMorphMeshChannels > 0) r->morph_animations = 1;
  r->file_up = mesh__scene_up_axis(sc);
  rc = mesh__scene_gather(sc, &g);
  if (rc == 0) rc = flatten(&g, r, max_vertices, err, errlen);
  if (rc == 0) rc = mesh__scene_materials(sc, &g, path, r->submeshes, &r->images, &r->image_count, err, errlen);
  if (rc == 0) rc = flatten_targets(&g, r, err, errlen);
  if (rc == 0 && kind == KEYFRAMES_MD3) {
    rc = mesh__md3_read_frames(path, &g, nframes, r->vertex_count, &r->frames, &r->frame_names, &r->frame_count,
                               err, errlen);
    r->frame_name_count = r->frame_count;
  }
  aiReleaseImport(sc);

out:
  mesh__scene_fini(&g);
  return rc;
}

/* A PLY file with triangle strips, read entirely by mesh_ply.c. Takes its arrays. */
static int raw_from_ply(const char *path, mesh__ply_info *ply, uint32_t max_vertices, raw_mesh *r,
                        char *err, size_t errlen) {
  if (ply->vertex_count > max_vertices) {
    mesh__set_err(err, errlen, "'%s': the file has %llu vertices, over the limit of %u",
                  base_name(path), (unsigned long long)ply->vertex_count, max_vertices);
    return MESH_ETOOBIG;
  }
  if (ply->strip_triangle_count == 0) {
    mesh__set_err(err, errlen, "'%s': the triangle strips contain no triangles", base_name(path));
    return MESH_ENOTRIS;
  }
  uint32_t nv = (uint32_t)ply->vertex_count;
  for (size_t i = 0; i < 3 * (size_t)nv; i++) {
    if (!isfinite(ply->positions[i])) {
      mesh__set_err(err, errlen, "'%s': vertex %zu has a non-finite coordinate", base_name(path), i / 3);
      return MESH_ENONFINITE;
    }
  }
  r->vertex_count = nv;
  r->triangle_count = ply->strip_triangle_count;
  r->positions = ply->positions;
  r->normals = ply->normals;
  r->uvs = ply->uvs;
  r->triangles = ply->strip_triangles;
  ply->positions = ply->normals = ply->uvs = NULL;
  ply->strip_triangles = NULL;
  r->vertex_submesh = calloc((size_t)nv + 1, sizeof(uint32_t));
  r->submeshes = calloc(1, sizeof(mesh_submesh));
  if (!r->vertex_submesh || !r->submeshes) return MESH_ENOMEM;
  r->submesh_count = 1;
  r->submeshes[0].name = mesh__strdup("");
  if (!r->submeshes[0].name) return MESH_ENOMEM;
  r->submeshes[0].vertex_count = nv;
  r->submeshes[0].triangle_count = r->triangle_count;
  return 0;
}

/* The first of opts->roots that holds `path` as a regular file (its fstat in *st), or -1. */
static int find_root(const char *path, const mesh_import_opts *opts, struct stat *st) {
  if (!mesh_name_ok(path, 1024)) return -1;
  for (uint32_t i = 0; i < opts->root_count; i++) {
    int fd = mesh_open_beneath(opts->roots[i], path, O_RDONLY, 0);
    if (fd < 0) continue;
    int ok = fstat(fd, st) == 0 && S_ISREG(st->st_mode);
    close(fd);
    if (ok) return opts->roots[i];
  }
  return -1;
}

/* One message for every name a confined import cannot open, whatever the reason (missing,
 * outside, a symlink out, a folder, unreadable): it tells nothing about the file system. The
 * name is echoed as given, control characters as '?', at most 128 bytes. */
static void unfound(const char *path, char *err, size_t errlen) {
  char shown[132];
  size_t i = 0;
  for (const char *c = path ? path : ""; *c && i < 128; c++) shown[i++] = (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c;
  shown[i] = '\0';
  mesh__set_err(err, errlen, "no mesh called '%s' in the mesh folders (a mesh is named by its path relative to "
                "one of them)", shown);
}

/* Prefixes a check's reason with the file's name ("'x.off': ..."), or names the code when the
 * check gave no reason (out of memory). */
static void name_reason(const char *path, int rc, char *err, size_t errlen) {
  char why[MESH_ERR_LEN];
  snprintf(why, sizeof(why), "%s", err && err[0] ? err : mesh_strerror(rc));
  mesh__set_err(err, errlen, "'%s': %s", base_name(path), why);
}

/* Finds `path` (beneath one of opts->roots when there are any, else as given), checks that it is
 * a regular file within opts->max_file_bytes, and begins the confinement every later open of
 * this import goes through (mesh__confine_begin). Returns 0, after which the caller ends the
 * confinement, or MESH_ENOENT / MESH_ETOOBIG with a reason in `err` and no confinement begun. */
static int open_confined(const char *path, const mesh_import_opts *opts, char *err, size_t errlen) {
  struct stat st;
  if (opts->root_count > 0) {
    int root = find_root(path, opts, &st);
    if (root < 0) {
      unfound(path, err, errlen);
      return MESH_ENOENT;
    }
    mesh__confine_begin(root, opts->redact);
  } else {
    if (path == NULL || stat(path, &st) != 0) {
      mesh__set_err(err, errlen, "cannot open '%s': %s", path ? path : "(null)",
                    path ? strerror(errno) : "no path");
      return MESH_ENOENT;
    }
    if (!S_ISREG(st.st_mode)) {
      mesh__set_err(err, errlen, "'%s' is not a regular file", path);
      return MESH_ENOENT;
    }
    mesh__confine_begin(-1, opts->redact);
  }
  if (opts->max_file_bytes && (uint64_t)st.st_size > opts->max_file_bytes) {
    mesh__set_err(err, errlen, "'%s' has %llu bytes, more than the limit of %llu", base_name(path),
                  (unsigned long long)st.st_size, (unsigned long long)opts->max_file_bytes);
    mesh__confine_end();
    return MESH_ETOOBIG;
  }
  return 0;
}

/* The checks that run before assimp reads the file, each failure's reason prefixed with the
 * file's name: MD2 frame names (kept in `r`), header counts, PLY (its reading kept in `ply`),
 * glTF weight animations. Returns 0 or the first check's MESH_E* code. */
static int check_before_assimp(const char *path, keyframe_kind kind, raw_mesh *r, mesh__ply_info *ply,
                               char *err, size_t errlen) {
  int rc = 0;
  /* MD2 frame names, read before assimp so that a truncated file gets a precise reason. */
  if (kind == KEYFRAMES_MD2) rc = mesh__md2_frame_names(path, &r->frame_names, &r->frame_name_count, err, errlen);

  /* Header counts against the file size: assimp believes them (mesh_off.c, mesh_md3.c). */
  if (rc == 0 && (kind == KEYFRAMES_MD3 || mesh__off_is_off(path)))
    rc = kind == KEYFRAMES_MD3 ? mesh__md3_check(path, err, errlen) : mesh__off_check(path, err, errlen);

  /* assimp hangs or aborts on some truncated PLY files: check them before it reads them. */
  if (rc == 0 && is_ply(path)) rc = mesh__ply_check(path, ply, err, errlen);

  /* assimp 5.2.5 crashes on some broken glTF weight animations: check them first. */
  if (rc == 0 && is_gltf(path)) rc = mesh__gltf_precheck(path, err, errlen);

  if (rc) name_reason(path, rc, err, errlen);
  return rc;
}

/* A keyframe file's animation on the compacted mesh `m`: a single keyframe kept as a one-frame
 * animation, the rate, and the clips (an MD3 player's animation.cfg first, then the runs of
 * frame names in `r`). Returns 0 or a MESH_E* code, with a reason in `err` where there is one. */
static int keyframe_clips(const char *path, keyframe_kind kind, const raw_mesh *r, mesh *m, char *err,
                          size_t errlen) {
  if (m->frame_count == 0) {
    /* A single keyframe: keep it as a one-frame animation so the frame count is reported. */
    m->frames = malloc(sizeof(float) * (3 * (size_t)m->vertex_count + 1));
    if (!m->frames) return MESH_ENOMEM;
    memcpy(m->frames, m->positions, sizeof(float) * 3 * m->vertex_count);
    m->frame_count = 1;
  }
  /* Neither format stores a rate: Quake II ran its models at 10 frames per second, and MD3
   * rates live in a separate animation.cfg; 10 is the common default for both. */
  m->frame_rate = 10.0f;
  /* Clips play at that same rate. Frames beyond max_frames were not read: clips stop there. */
  uint32_t named = r->frame_name_count < m->frame_count ? r->frame_name_count : m->frame_count;
  /* A Quake III player's animations come first, as its animation.cfg defines them. */
  if (kind == KEYFRAMES_MD3) {
    char why[MESH_ERR_LEN];
    int rc = mesh__md3_cfg_clips(path, m, why, sizeof(why));
    if (rc) {
      mesh__set_err(err, errlen, "'%s': %s", base_name(path), why);
      return rc;
    }
  }
  return mesh__clip_from_frame_names(m, r->frame_names, named, m->frame_rate);
}

int mesh_import(const char *path, const mesh_import_opts *opts, mesh **out, char *err,
                size_t errlen) {
  mesh_import_opts defaults = {0};
  if (opts == NULL) opts = &defaults;
  uint32_t max_vertices = opts->max_vertices ? opts->max_vertices : MESH_DEFAULT_MAX_VERTICES;
  *out = NULL;
  if (err && errlen) err[0] = '\0';

  int rc = open_confined(path, opts, err, errlen);
  if (rc) return rc;

  pthread_once(&log_once, attach_log);
  import_log log;
  memset(&log, 0, sizeof(log));
  tls_log = &log;

  raw_mesh r;
  memset(&r, 0, sizeof(r));
  mesh__ply_info ply;
  memset(&ply, 0, sizeof(ply));
  mesh *m = NULL;
  uint32_t nframes = 0;
  keyframe_kind kind = read_keyframe_header(path, &nframes);
  if (kind != KEYFRAMES_NONE && nframes == 0) {
    mesh__set_err(err, errlen, "'%s': keyframe file declares no frames", base_name(path));
    rc = MESH_EFORMAT;
    goto done;
  }
  if (opts->max_frames && nframes > opts->max_frames) nframes = opts->max_frames;

  rc = check_before_assimp(path, kind, &r, &ply, err, errlen);
  if (rc) goto done;

  if (ply.has_strips)
    rc = raw_from_ply(path, &ply, max_vertices, &r, err, errlen);
  else
    rc = import_with_assimp(path, kind, nframes, max_vertices, &log, &r, err, errlen);
  if (rc) goto done;

  if (kind == KEYFRAMES_MD2 && nframes > 1) {
    rc = mesh__md2_read_frames(path, nframes, r.positions, r.vertex_count, log.first_error, &r.frames, err,
                               errlen);
    if (rc) goto done;
    r.frame_count = nframes;
  } else if (kind != KEYFRAMES_NONE && r.frame_count == 0) {
    r.frame_count = 1;
    r.frames = malloc(sizeof(float) * (3 * (size_t)r.vertex_count + 1));
    if (!r.frames) {
      rc = MESH_ENOMEM;
      goto done;
    }
    memcpy(r.frames, r.positions, sizeof(float) * 3 * r.vertex_count);
  }

  m = mesh_create();
  if (!m) {
    rc = MESH_ENOMEM;
    goto done;
  }
  rc = compact(&r, m);
  if (rc) goto done;
  m->file_up = r.file_up;
  m->images = r.images, m->image_count = r.image_count;
  r.images = NULL, r.image_count = 0;
  if (kind != KEYFRAMES_NONE) {
    rc = keyframe_clips(path, kind, &r, m, err, errlen);
    if (rc) goto done;
  }
  char why[MESH_ERR_LEN];
  /* Only glTF weight animations become clips. Morph animations assimp may report for other
   * formats (FBX, Collada) are not read: none of Debian's assimp-testmodels has one to test. */
  if (r.morph_animations && is_gltf(path)) {
    rc = mesh__gltf_weight_clips(path, m, why, sizeof(why));
    if (rc) {
      mesh__set_err(err, errlen, "'%s': %s", base_name(path), why);
      goto done;
    }
  }
  mesh_update_bounds(m);
  rc = mesh_validate(m, why, sizeof(why));
  if (rc) mesh__set_err(err, errlen, "'%s': %s", base_name(path), why);

done:
  tls_log = NULL;
  mesh__confine_end();
  mesh__ply_info_fini(&ply);
  raw_fini(&r);
  if (rc) {
    mesh_destroy(m);
    if (err && errlen && err[0] == '\0') mesh__set_err(err, errlen, "'%s': %s", base_name(path), mesh_strerror(rc));
    if (opts->redact) mesh__redact(err, errlen, 1);
    return rc;
  }
  *out = m;
  return 0;
}
