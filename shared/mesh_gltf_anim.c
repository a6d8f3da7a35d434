/*
 * mesh_gltf_anim.c — glTF 2.0 morph-weight animations, decoded from the file's own JSON.
 *
 * assimp 5.2.5 reports these animations as aiMeshMorphAnim channels but mangles them
 * (glTF2Importer.cpp, CreateMeshMorphAnim):
 *   - weights below zero are clamped to 0, though glTF allows negative weights;
 *   - a CUBICSPLINE sampler driving n > 1 targets comes back with 3n - 2 "weights" per key, the
 *     in- and out-tangents mixed in (it assumes a stride of n + 2);
 *   - unnamed animations and nodes get made-up names ("", "nodes[0]"), and key times are turned
 *     into milliseconds in single precision (time × 1000.f).
 * So the importer uses assimp's report only to learn that a file has weight animations; the
 * samplers are read here from the accessors, laid out as the glTF 2.0 specification says, and
 * mapped to the mesh's targets by the names the importer gave them (extras.targetNames[j], else
 * "target_<j>": the same rule as mesh_import.c's flatten_targets). Only nodes of the scene the
 * importer read (the "scene" property, else scene 0) are animated.
 *
 * DOES NOT read node (TRS) or skin animations, meshes or materials, and refuses sparse
 * accessors with a reason. Buffer URIs are data: URIs or paths relative to the file, as for
 * assimp; nothing is fetched from anywhere else.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

/* Bounds on what a file may make us allocate. */
#define MAX_JSON_BYTES (256u << 20)   /* the JSON text (data: URIs included) */
#define MAX_SCALARS (1u << 24)        /* elements of one accessor */
#define MAX_SPAN_BYTES (256u << 20)   /* bytes one accessor reads */
#define MAX_WEIGHT_CLIPS 4096u        /* animations that drive weights */

typedef struct gltf_doc {
  const char *path;
  cJSON *root;
  const cJSON *buffers, *buffer_views, *accessors;
  int glb;                      /* binary container */
  uint64_t bin_at, bin_len;     /* GLB BIN chunk: where in the file, how long (0 = none) */
  uint32_t buffer_count;
  unsigned char **decoded;      /* data: URI buffers, decoded on first use */
  size_t *decoded_len;
} gltf_doc;

static uint32_t rd32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* ---- JSON helpers ---------------------------------------------------------------------------- */

/* obj[key] as a non-negative integer below 2^31: 1 and *out when present and valid, 0 when
 * absent, -1 when present but not such an integer. */
static int get_index(const cJSON *obj, const char *key, uint32_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (v == NULL) return 0;
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble >= 2147483648.0 ||
      v->valuedouble != floor(v->valuedouble))
    return -1;
  *out = (uint32_t)v->valuedouble;
  return 1;
}

/* Element i of a JSON array, or NULL. */
static const cJSON *array_item(const cJSON *arr, uint32_t i) {
  if (!cJSON_IsArray(arr) || i >= (uint32_t)cJSON_GetArraySize(arr)) return NULL;
  return cJSON_GetArrayItem(arr, (int)i);
}

static uint32_t array_size(const cJSON *arr) {
  return cJSON_IsArray(arr) ? (uint32_t)cJSON_GetArraySize(arr) : 0;
}

/* ---- loading the JSON ------------------------------------------------------------------------ */

/* Whether `needle` occurs in the first n bytes of `hay`. */
static int contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (const char *p = hay; (size_t)(p - hay) + k <= n; p++) {
    p = memchr(p, needle[0], n - (size_t)(p - hay));
    if (!p || (size_t)(p - hay) + k > n) return 0;
    if (memcmp(p, needle, k) == 0) return 1;
  }
  return 0;
}

static int read_at(FILE *f, uint64_t at, void *dst, size_t n) {
  if (fseeko(f, (off_t)at, SEEK_SET) != 0) return -1;
  return fread(dst, 1, n, f) == n ? 0 : -1;
}

/* Reads the JSON (the whole .gltf, or a GLB's JSON chunk) and notes where a GLB's BIN chunk is.
 * With `needle`, a JSON text that does not contain it is not parsed: returns 1, g->root NULL. */
static int load_doc(gltf_doc *g, const char *path, const char *needle, char *err, size_t errlen) {
  memset(g, 0, sizeof(*g));
  g->path = path;
  char *json = NULL;
  int rc = MESH_EFORMAT;
  FILE *f = mesh__fopen(path);
  if (!f) {
    mesh__set_err(err, errlen, "glTF: cannot open the file: %s", strerror(errno));
    return MESH_ENOENT;
  }
  if (fseeko(f, 0, SEEK_END) != 0) goto io;
  off_t size = ftello(f);
  if (size < 0) goto io;
  unsigned char h[20];
  uint64_t json_at = 0, json_len = (uint64_t)size;
  if (size >= 20 && read_at(f, 0, h, 20) == 0 && memcmp(h, "glTF", 4) == 0) {
    g->glb = 1;
    uint32_t total = rd32(h + 8), len0 = rd32(h + 12);
    if (rd32(h + 4) != 2 || total > (uint64_t)size || rd32(h + 16) != 0x4E4F534Au ||
        20ull + len0 > total) {
      mesh__set_err(err, errlen, "glTF: the GLB header or JSON chunk lies outside the file");
      goto fail;
    }
    json_at = 20;
    json_len = len0;
    unsigned char c[8];
    uint64_t next = 20ull + len0;
    if (next + 8 <= total && read_at(f, next, c, 8) == 0 && rd32(c + 4) == 0x004E4942u) {
      if (next + 8 + rd32(c) > total) {
        mesh__set_err(err, errlen, "glTF: the GLB binary chunk lies outside the file");
        goto fail;
      }
      g->bin_at = next + 8;
      g->bin_len = rd32(c);
    }
  }
  if (json_len > MAX_JSON_BYTES) {
    mesh__set_err(err, errlen, "glTF: %llu bytes of JSON, over the limit of %u",
                  (unsigned long long)json_len, MAX_JSON_BYTES);
    rc = MESH_ETOOBIG;
    goto fail;
  }
  json = malloc(json_len + 1);
  if (!json) {
    rc = MESH_ENOMEM;
    goto fail;
  }
  if (read_at(f, json_at, json, json_len) != 0) goto io;
  if (needle && !contains(json, json_len, needle)) {
    free(json);
    fclose(f);
    return 1;
  }
  g->root = cJSON_ParseWithLength(json, json_len);
  if (!g->root || !cJSON_IsObject(g->root)) {
    mesh__set_err(err, errlen, "glTF: the JSON does not parse");
    goto fail;
  }
  g->buffers = cJSON_GetObjectItemCaseSensitive(g->root, "buffers");
  g->buffer_views = cJSON_GetObjectItemCaseSensitive(g->root, "bufferViews");
  g->accessors = cJSON_GetObjectItemCaseSensitive(g->root, "accessors");
  g->buffer_count = array_size(g->buffers);
  g->decoded = calloc((size_t)g->buffer_count + 1, sizeof(*g->decoded));
  g->decoded_len = calloc((size_t)g->buffer_count + 1, sizeof(*g->decoded_len));
  if (!g->decoded || !g->decoded_len) {
    rc = MESH_ENOMEM;
    goto fail;
  }
  free(json);
  fclose(f);
  return 0;

io:
  mesh__set_err(err, errlen, "glTF: reading the file failed");
fail:
  free(json);
  fclose(f);
  return rc;
}

static void free_doc(gltf_doc *g) {
  for (uint32_t i = 0; g->decoded && i < g->buffer_count; i++) free(g->decoded[i]);
  free(g->decoded);
  free(g->decoded_len);
  cJSON_Delete(g->root);
  memset(g, 0, sizeof(*g));
}

/* ---- buffers ---------------------------------------------------------------------------------- */

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Decodes the base64 payload of a data: URI into a new array. 0 or -1 (not base64). */
static int decode_data_uri(const char *uri, unsigned char **out, size_t *len) {
  const char *comma = strchr(uri, ',');
  if (!comma || comma - uri < 7 || strncmp(comma - 7, ";base64", 7) != 0) return -1;
  const char *p = comma + 1;
  size_t n = strlen(p);
  unsigned char *d = malloc(n / 4 * 3 + 3);
  if (!d) return -2;
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '=') break;
    int v = b64_value((unsigned char)p[i]);
    if (v < 0) {
      free(d);
      return -1;
    }
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      d[o++] = (unsigned char)(acc >> bits);
    }
  }
  *out = d;
  *len = o;
  return 0;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A relative URI with %XX escapes decoded, joined to the directory of `path`. */
static char *buffer_path(const char *path, const char *uri) {
  const char *slash = strrchr(path, '/');
  size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
  char *out = malloc(dir + strlen(uri) + 1);
  if (!out) return NULL;
  memcpy(out, path, dir);
  size_t o = dir;
  for (const char *s = uri; *s; s++) {
    int hi = s[0] == '%' ? hex_value(s[1]) : -1, lo = hi >= 0 ? hex_value(s[2]) : -1;
    if (hi >= 0 && lo >= 0) {
      out[o++] = (char)(hi * 16 + lo);
      s += 2;
    } else {
      out[o++] = *s;
    }
  }
  out[o] = '\0';
  return out;
}

/* Copies bytes [off, off + len) of buffer `b` into dst. */
static int buffer_bytes(gltf_doc *g, uint32_t b, uint64_t off, uint64_t len, unsigned char *dst,
                        char *err, size_t errlen) {
  const cJSON *buf = array_item(g->buffers, b);
  if (!cJSON_IsObject(buf)) {
    mesh__set_err(err, errlen, "buffer %u does not exist", b);
    return MESH_EFORMAT;
  }
  const cJSON *uri = cJSON_GetObjectItemCaseSensitive(buf, "uri");
  if (uri == NULL) {
    if (!g->glb || b != 0 || g->bin_len == 0 || off + len > g->bin_len) {
      mesh__set_err(err, errlen, "buffer %u: no uri and no GLB binary chunk that long", b);
      return MESH_EFORMAT;
    }
    FILE *f = mesh__fopen(g->path);
    int bad = !f || read_at(f, g->bin_at + off, dst, len) != 0;
    if (f) fclose(f);
    if (bad) {
      mesh__set_err(err, errlen, "buffer %u: reading the GLB binary chunk failed", b);
      return MESH_EFORMAT;
    }
    return 0;
  }
  if (!cJSON_IsString(uri)) {
    mesh__set_err(err, errlen, "buffer %u: uri is not a string", b);
    return MESH_EFORMAT;
  }
  if (strncmp(uri->valuestring, "data:", 5) == 0) {
    if (g->decoded[b] == NULL) {
      int r = decode_data_uri(uri->valuestring, &g->decoded[b], &g->decoded_len[b]);
      if (r == -2) return MESH_ENOMEM;
      if (r != 0) {
        mesh__set_err(err, errlen, "buffer %u: the data URI is not base64", b);
        return MESH_EFORMAT;
      }
    }
    if (off + len > g->decoded_len[b]) {
      mesh__set_err(err, errlen, "buffer %u holds %zu bytes, a view needs %llu", b,
                    g->decoded_len[b], (unsigned long long)(off + len));
      return MESH_EFORMAT;
    }
    memcpy(dst, g->decoded[b] + off, len);
    return 0;
  }
  char *file = buffer_path(g->path, uri->valuestring);
  if (!file) return MESH_ENOMEM;
  FILE *f = mesh__fopen(file);
  int bad = !f || read_at(f, off, dst, len) != 0;
  if (f) fclose(f);
  free(file);
  if (bad) {
    mesh__set_err(err, errlen, "buffer %u ('%s') is missing or shorter than %llu bytes", b,
                  uri->valuestring, (unsigned long long)(off + len));
    return MESH_EFORMAT;
  }
  return 0;
}

/* ---- accessors -------------------------------------------------------------------------------- */

/* Reads SCALAR accessor `a` into a new float array of *count elements. Times must be float;
 * weights may also be normalized integers, which the specification allows for them. */
static int read_scalars(gltf_doc *g, uint32_t a, int allow_normalized, float **out,
                        uint32_t *count, char *err, size_t errlen) {
  *out = NULL;
  const cJSON *acc = array_item(g->accessors, a);
  if (!cJSON_IsObject(acc)) {
    mesh__set_err(err, errlen, "accessor %u does not exist", a);
    return MESH_EFORMAT;
  }
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(acc, "type");
  uint32_t n = 0, ctype = 0, view = 0, acc_off = 0;
  if (!cJSON_IsString(type) || strcmp(type->valuestring, "SCALAR") != 0 ||
      get_index(acc, "count", &n) != 1 || n == 0 || get_index(acc, "componentType", &ctype) != 1 ||
      get_index(acc, "byteOffset", &acc_off) < 0) {
    mesh__set_err(err, errlen, "accessor %u is not a SCALAR accessor with a count and a type", a);
    return MESH_EFORMAT;
  }
  if (cJSON_GetObjectItemCaseSensitive(acc, "sparse") != NULL) {
    mesh__set_err(err, errlen, "accessor %u is sparse; sparse accessors are not supported", a);
    return MESH_EFORMAT;
  }
  if (n > MAX_SCALARS) {
    mesh__set_err(err, errlen, "accessor %u has %u elements, over the limit of %u", a, n,
                  MAX_SCALARS);
    return MESH_ETOOBIG;
  }
  size_t esize;
  switch (ctype) {
    case 5126: esize = 4; break;
    case 5120: case 5121: esize = 1; break;
    case 5122: case 5123: esize = 2; break;
    default: esize = 0; break;
  }
  const cJSON *norm = cJSON_GetObjectItemCaseSensitive(acc, "normalized");
  if (esize == 0 || (ctype != 5126 && (!allow_normalized || !cJSON_IsTrue(norm)))) {
    mesh__set_err(err, errlen, "accessor %u: component type %u is not allowed here (%s)", a,
                  ctype, allow_normalized ? "float or normalized integers" : "float");
    return MESH_EFORMAT;
  }
  float *vals = calloc((size_t)n + 1, sizeof(float));
  if (!vals) return MESH_ENOMEM;
  int has_view = get_index(acc, "bufferView", &view);
  if (has_view < 0) {
    free(vals);
    mesh__set_err(err, errlen, "accessor %u: bufferView is not an index", a);
    return MESH_EFORMAT;
  }
  if (has_view == 0) { /* no view: all zeros, as the specification says */
    *out = vals;
    *count = n;
    return 0;
  }
  const cJSON *bv = array_item(g->buffer_views, view);
  uint32_t buf = 0, bv_off = 0, bv_len = 0, stride = 0;
  if (!cJSON_IsObject(bv) || get_index(bv, "buffer", &buf) != 1 ||
      get_index(bv, "byteLength", &bv_len) != 1 || get_index(bv, "byteOffset", &bv_off) < 0 ||
      get_index(bv, "byteStride", &stride) < 0) {
    free(vals);
    mesh__set_err(err, errlen, "accessor %u: bufferView %u is missing or malformed", a, view);
    return MESH_EFORMAT;
  }
  if (stride == 0) stride = (uint32_t)esize;
  uint64_t span = (uint64_t)acc_off + (uint64_t)stride * (n - 1) + esize;
  if (stride < esize || span > bv_len) {
    free(vals);
    mesh__set_err(err, errlen, "accessor %u reads %llu bytes of bufferView %u, which has %u", a,
                  (unsigned long long)span, view, bv_len);
    return MESH_EFORMAT;
  }
  if (span > MAX_SPAN_BYTES) {
    free(vals);
    mesh__set_err(err, errlen, "accessor %u spans %llu bytes, over the limit", a,
                  (unsigned long long)span);
    return MESH_ETOOBIG;
  }
  unsigned char *bytes = malloc(span);
  if (!bytes) {
    free(vals);
    return MESH_ENOMEM;
  }
  int rc = buffer_bytes(g, buf, (uint64_t)bv_off + acc_off, span - acc_off, bytes + acc_off, err,
                        errlen);
  if (rc) {
    free(bytes);
    free(vals);
    return rc;
  }
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *e = bytes + acc_off + (size_t)stride * i;
    switch (ctype) {
      case 5126: {
        uint32_t u = rd32(e);
        memcpy(&vals[i], &u, 4);
        break;
      }
      case 5120: vals[i] = (float)fmax((int8_t)e[0] / 127.0, -1.0); break;
      case 5121: vals[i] = (float)(e[0] / 255.0); break;
      case 5122: vals[i] = (float)fmax((int16_t)(uint16_t)(e[0] | e[1] << 8) / 32767.0, -1.0); break;
      default: vals[i] = (float)((uint16_t)(e[0] | e[1] << 8) / 65535.0); break;
    }
  }
  free(bytes);
  *out = vals;
  *count = n;
  return 0;
}

/* ---- the scene and animations ----------------------------------------------------------------- */

/* Marks the nodes reachable from the scene assimp imports ("scene", else scene 0). Children
 * indices are checked; cycles end at already visited nodes. */
static int reachable_nodes(const gltf_doc *g, const cJSON *nodes, uint32_t nnodes, uint8_t *seen,
                           char *err, size_t errlen) {
  uint32_t scene_index = 0;
  if (get_index(g->root, "scene", &scene_index) < 0) {
    mesh__set_err(err, errlen, "glTF: 'scene' is not an index");
    return MESH_EFORMAT;
  }
  const cJSON *scene = array_item(cJSON_GetObjectItemCaseSensitive(g->root, "scenes"), scene_index);
  if (!scene) return 0;
  uint32_t *stack = malloc(sizeof(uint32_t) * ((size_t)nnodes + 1));
  if (!stack) return MESH_ENOMEM;
  uint32_t top = 0;
  const cJSON *roots = cJSON_GetObjectItemCaseSensitive(scene, "nodes");
  if (!cJSON_IsArray(roots)) roots = NULL;
  const cJSON *it;
  cJSON_ArrayForEach(it, roots) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= nnodes) continue;
    uint32_t k = (uint32_t)it->valuedouble;
    if (!seen[k]) {
      seen[k] = 1;
      stack[top++] = k;
    }
    while (top > 0) {
      const cJSON *node = array_item(nodes, stack[--top]);
      const cJSON *children = cJSON_GetObjectItemCaseSensitive(node, "children");
      if (!cJSON_IsArray(children)) children = NULL;
      const cJSON *ch;
      cJSON_ArrayForEach(ch, children) {
        if (!cJSON_IsNumber(ch) || ch->valuedouble < 0 || ch->valuedouble >= nnodes) continue;
        uint32_t c = (uint32_t)ch->valuedouble;
        if (!seen[c]) {
          seen[c] = 1;
          stack[top++] = c;
        }
      }
    }
  }
  free(stack);
  return 0;
}

/* A channel being built, with the arrays it owns. */
typedef struct owned_channel {
  mesh__weight_channel ch;
  float *times, *values;
  int *target_of;
} owned_channel;

/* The names the importer gave glTF mesh `mesh_json`'s targets, looked up in m. */
static int map_targets(const mesh *m, const cJSON *mesh_json, uint32_t n, int *target_of) {
  const cJSON *names =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(mesh_json, "extras"),
                                       "targetNames");
  for (uint32_t j = 0; j < n; j++) {
    const cJSON *nm = array_item(names, j);
    char fallback[32];
    const char *name = fallback;
    if (cJSON_IsString(nm) && nm->valuestring[0] != '\0')
      name = nm->valuestring;
    else
      snprintf(fallback, sizeof(fallback), "target_%u", j);
    target_of[j] = mesh_find_target(m, name);
  }
  return 0;
}

/* Reads weight channel `c` of animation `anim` into *oc. *used is 0 when the channel drives
 * nothing of this mesh (node outside the scene, no mesh, no targets). */
static int read_channel(gltf_doc *g, const mesh *m, const cJSON *anim, const cJSON *chan,
                        const cJSON *nodes, uint32_t nnodes, const uint8_t *seen,
                        owned_channel *oc, int *used, char *err, size_t errlen) {
  memset(oc, 0, sizeof(*oc));
  *used = 0;
  const cJSON *target = cJSON_GetObjectItemCaseSensitive(chan, "target");
  uint32_t node_index = 0, sampler_index = 0, mesh_index = 0, input = 0, output = 0;
  if (get_index(target, "node", &node_index) != 1) return 0; /* no node: nothing to animate */
  if (node_index >= nnodes || get_index(chan, "sampler", &sampler_index) != 1) {
    mesh__set_err(err, errlen, "a channel names node %u of %u or has no sampler", node_index,
                  nnodes);
    return MESH_EFORMAT;
  }
  if (!seen[node_index]) return 0;
  const cJSON *node = array_item(nodes, node_index);
  int has_mesh = get_index(node, "mesh", &mesh_index);
  if (has_mesh == 0) return 0; /* weights of a node without a mesh drive nothing */
  const cJSON *mesh_json = array_item(cJSON_GetObjectItemCaseSensitive(g->root, "meshes"), mesh_index);
  if (has_mesh < 0 || mesh_json == NULL) {
    mesh__set_err(err, errlen, "node %u names a mesh that does not exist", node_index);
    return MESH_EFORMAT;
  }
  const cJSON *prim0 = array_item(cJSON_GetObjectItemCaseSensitive(mesh_json, "primitives"), 0);
  uint32_t ntargets = array_size(cJSON_GetObjectItemCaseSensitive(prim0, "targets"));
  if (ntargets == 0) return 0;

  const cJSON *sampler =
      array_item(cJSON_GetObjectItemCaseSensitive(anim, "samplers"), sampler_index);
  if (!cJSON_IsObject(sampler) || get_index(sampler, "input", &input) != 1 ||
      get_index(sampler, "output", &output) != 1) {
    mesh__set_err(err, errlen, "sampler %u is missing or has no input and output", sampler_index);
    return MESH_EFORMAT;
  }
  const cJSON *interp = cJSON_GetObjectItemCaseSensitive(sampler, "interpolation");
  oc->ch.interp = MESH__INTERP_LINEAR;
  if (cJSON_IsString(interp) && strcmp(interp->valuestring, "STEP") == 0) {
    oc->ch.interp = MESH__INTERP_STEP;
  } else if (cJSON_IsString(interp) && strcmp(interp->valuestring, "CUBICSPLINE") == 0) {
    oc->ch.interp = MESH__INTERP_CUBIC;
  } else if (interp != NULL && !(cJSON_IsString(interp) && strcmp(interp->valuestring, "LINEAR") == 0)) {
    mesh__set_err(err, errlen, "sampler %u: unknown interpolation", sampler_index);
    return MESH_EFORMAT;
  }
  uint32_t nkeys = 0, nout = 0;
  int rc = read_scalars(g, input, 0, &oc->times, &nkeys, err, errlen);
  if (rc == 0) rc = read_scalars(g, output, 1, &oc->values, &nout, err, errlen);
  if (rc) return rc;
  uint64_t want = (uint64_t)nkeys * ntargets * (oc->ch.interp == MESH__INTERP_CUBIC ? 3 : 1);
  if (nout != want) {
    mesh__set_err(err, errlen, "sampler %u has %u outputs for %u keys and %u targets (%s)",
                  sampler_index, nout, nkeys, ntargets,
                  oc->ch.interp == MESH__INTERP_CUBIC ? "cubic: 3 per key and target" : "1 per key and target");
    return MESH_EFORMAT;
  }
  oc->target_of = malloc(sizeof(int) * ntargets);
  if (!oc->target_of) return MESH_ENOMEM;
  map_targets(m, mesh_json, ntargets, oc->target_of);
  oc->ch.key_count = nkeys;
  oc->ch.times = oc->times;
  oc->ch.values = oc->values;
  oc->ch.value_count = ntargets;
  oc->ch.target_of = oc->target_of;
  *used = 1;
  return 0;
}

static void free_channel(owned_channel *oc) {
  free(oc->times);
  free(oc->values);
  free(oc->target_of);
  memset(oc, 0, sizeof(*oc));
}

/* Count of accessor `a`, or -1 when it has none. */
static int64_t accessor_count(const gltf_doc *g, uint32_t a) {
  uint32_t n;
  return get_index(array_item(g->accessors, a), "count", &n) == 1 ? (int64_t)n : -1;
}

int mesh__gltf_precheck(const char *path, char *err, size_t errlen) {
  gltf_doc g;
  if (err && errlen) err[0] = '\0';
  int rc = load_doc(&g, path, "\"weights\"", err, errlen);
  if (rc == 1) return 0; /* no weight channel can be in there */
  if (rc) goto out;
  const cJSON *anims = cJSON_GetObjectItemCaseSensitive(g.root, "animations");
  if (!cJSON_IsArray(anims)) anims = NULL;
  const cJSON *anim;
  uint32_t index = 0;
  cJSON_ArrayForEach(anim, anims) {
    const cJSON *channels = cJSON_GetObjectItemCaseSensitive(anim, "channels");
    if (!cJSON_IsArray(channels)) channels = NULL;
    const cJSON *chan;
    cJSON_ArrayForEach(chan, channels) {
      const cJSON *p =
          cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(chan, "target"), "path");
      uint32_t si, in, out;
      if (!cJSON_IsString(p) || strcmp(p->valuestring, "weights") != 0 ||
          get_index(chan, "sampler", &si) != 1)
        continue;
      const cJSON *sampler = array_item(cJSON_GetObjectItemCaseSensitive(anim, "samplers"), si);
      if (get_index(sampler, "input", &in) != 1 || get_index(sampler, "output", &out) != 1) continue;
      int64_t nin = accessor_count(&g, in), nout = accessor_count(&g, out);
      const cJSON *interp = cJSON_GetObjectItemCaseSensitive(sampler, "interpolation");
      int cubic = cJSON_IsString(interp) && strcmp(interp->valuestring, "CUBICSPLINE") == 0;
      if (nin == 0 || (cubic && nout >= 0 && nout < 3 * nin)) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(anim, "name");
        char shown[32];
        snprintf(shown, sizeof(shown), "animation%u", index);
        mesh__set_err(err, errlen, "animation '%s': weight sampler %u has %lld keys and %lld "
                      "outputs (%s)",
                      cJSON_IsString(name) && name->valuestring[0] ? name->valuestring : shown, si,
                      (long long)nin, (long long)nout,
                      nin == 0 ? "no keys" : "CUBICSPLINE needs 3 outputs per key and target");
        rc = MESH_EFORMAT;
        goto out;
      }
    }
    index++;
  }

out:
  free_doc(&g);
  return rc;
}

int mesh__gltf_weight_clips(const char *path, mesh *m, char *err, size_t errlen) {
  gltf_doc g;
  uint8_t *seen = NULL;
  owned_channel *chans = NULL;
  uint32_t nchans = 0, clips = 0;
  char why[MESH_ERR_LEN];
  if (err && errlen) err[0] = '\0';
  int rc = load_doc(&g, path, NULL, err, errlen); /* g is zeroed first: free_doc() is safe */
  if (rc) goto out;

  /* glTF 1.0 has no morph targets: nothing to read. */
  const cJSON *version =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g.root, "asset"), "version");
  if (!cJSON_IsString(version) || version->valuestring[0] != '2') goto out;

  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(g.root, "nodes");
  uint32_t nnodes = array_size(nodes);
  seen = calloc((size_t)nnodes + 1, 1);
  if (!seen) {
    rc = MESH_ENOMEM;
    goto out;
  }
  rc = reachable_nodes(&g, nodes, nnodes, seen, err, errlen);
  if (rc) goto out;

  const cJSON *anims = cJSON_GetObjectItemCaseSensitive(g.root, "animations");
  if (!cJSON_IsArray(anims)) anims = NULL;
  uint32_t index = 0;
  const cJSON *anim;
  cJSON_ArrayForEach(anim, anims) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(anim, "name");
    const char *anim_name = cJSON_IsString(name) ? name->valuestring : "";
    char shown[32];
    snprintf(shown, sizeof(shown), "animation%u", index);
    const cJSON *channels = cJSON_GetObjectItemCaseSensitive(anim, "channels");
    if (!cJSON_IsArray(channels)) channels = NULL;
    uint32_t n = array_size(channels);
    chans = calloc((size_t)n + 1, sizeof(*chans));
    if (!chans) {
      rc = MESH_ENOMEM;
      goto out;
    }
    nchans = 0;
    const cJSON *chan;
    cJSON_ArrayForEach(chan, channels) {
      const cJSON *path_json =
          cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(chan, "target"), "path");
      if (!cJSON_IsString(path_json) || strcmp(path_json->valuestring, "weights") != 0) continue;
      int used = 0;
      why[0] = '\0';
      rc = read_channel(&g, m, anim, chan, nodes, nnodes, seen, &chans[nchans], &used, why,
                        sizeof(why));
      if (rc) {
        mesh__set_err(err, errlen, "animation '%s': %s", anim_name[0] ? anim_name : shown,
                      why[0] ? why : mesh_strerror(rc));
        goto out;
      }
      if (used) nchans++;
    }
    if (nchans > 0) {
      if (++clips > MAX_WEIGHT_CLIPS) {
        mesh__set_err(err, errlen, "more than %u animations drive morph-target weights",
                      MAX_WEIGHT_CLIPS);
        rc = MESH_ETOOBIG;
        goto out;
      }
      mesh__weight_channel *list = malloc(sizeof(*list) * nchans);
      if (!list) {
        rc = MESH_ENOMEM;
        goto out;
      }
      for (uint32_t c = 0; c < nchans; c++) list[c] = chans[c].ch;
      rc = mesh__clip_from_weight_channels(m, anim_name, index, list, nchans, err, errlen);
      free(list);
      if (rc) goto out;
    }
    for (uint32_t c = 0; c < nchans; c++) free_channel(&chans[c]);
    free(chans);
    chans = NULL;
    nchans = 0;
    index++;
  }

out:
  for (uint32_t c = 0; chans && c < nchans; c++) free_channel(&chans[c]);
  /* A channel that failed half-way owns arrays too. */
  if (chans) free_channel(&chans[nchans]);
  free(chans);
  free(seen);
  free_doc(&g);
  if (rc == MESH_ENOMEM && err && errlen && err[0] == '\0')
    mesh__set_err(err, errlen, "out of memory reading the animations");
  return rc;
}
