/*
 * mesh_blob.c — a whole mesh as one compact, exact byte string and back.
 *
 * Used wherever a mesh crosses a boundary it must survive bit for bit: the import worker sends
 * the mesh it parsed over a pipe, and the session store keeps imported meshes in a database.
 * Floats and integers are copied as their little-endian bit patterns, so a round trip gives
 * back the same mesh, NaN payloads and signed zeros included (and mesh_validate() refuses
 * non-finite values on the way in anyway).
 *
 * Layout (all integers u32, all floats IEEE-754 binary32, little-endian):
 *
 *   "DFMB" version=2 flags(bit0 normals, bit1 uvs, bit2 the file says +Z is up: mesh.file_up,
 *                          bit3 materials: submesh colours and textures follow the submeshes)
 *   vertex_count triangle_count target_count frame_count frame_rate clip_count submesh_count
 *   bbox_min[3] bbox_max[3]
 *   positions[3V] normals[3V]? uvs[2V]? triangles[3T]
 *   target × target_count:  name_len name[name_len] default_weight count indices[count] deltas[3·count]
 *   frames[3V·F]
 *   clip × clip_count:      name_len name fps first_frame frame_count key_count target_count
 *                           loop_frames clip_flags(bit0 play_once)
 *                           times[key_count] weights[key_count·target_count]
 *   submesh × submesh_count: name_len name first_triangle triangle_count first_vertex vertex_count
 *   with flag bit 3 (materials):
 *     material × submesh_count: has_color base_color[4] texture
 *     image_count, image × image_count: name_len name width height rgba[4·width·height] (bytes)
 *   crc32 of every byte before it (the zlib / PNG polynomial)
 *
 * Names carry no NUL and no terminator. The reader checks every count against the bytes that
 * are left before it allocates, so a lying header costs nothing, and finishes with
 * mesh_validate(), so what it returns meets every invariant the rest of the system relies on
 * (input checked at the edge: invariant 11 of docs/architecture.md).
 *
 * Version 1 (stored by builds before clips had loop_frames and play_once) has no loop_frames
 * and clip_flags; it still reads, with both 0. A new layout gets a new version and a reader
 * branch: stores keep old blobs.
 *
 * DOES NOT compress (the store and the pipe see few meshes, and imports dominate their cost),
 * or touch files and sockets; the caller moves the bytes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

#define BLOB_VERSION 2u
#define CLIP_PLAY_ONCE 1u
#define FLAG_NORMALS 1u
#define FLAG_UVS 2u
#define FLAG_Z_UP 4u /* set only for such files: every other blob keeps the bytes it always had */
#define FLAG_MATERIALS 8u /* the same: set only for a mesh with colours or textures */
/* magic, version, flags, 7 counts, 6 bbox floats */
#define HEADER_BYTES (4u + 4u * 2u + 4u * 7u + 4u * 6u)

static const uint8_t blob_magic[4] = {'D', 'F', 'M', 'B'};

/* ---- CRC-32 (reflected 0xEDB88320, as zlib computes it) ---------------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

uint32_t mesh_blob_crc32(const uint8_t *p, size_t n) {
  pthread_once(&crc_once, crc_init);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* ---- writing ----------------------------------------------------------------------------------- */

/* Adds n to *total unless it would pass SIZE_MAX. */
static int add_size(size_t *total, uint64_t n) {
  if (n > SIZE_MAX - *total) return MESH_ETOOBIG;
  *total += (size_t)n;
  return 0;
}

static size_t name_length(const char *s) { return s ? strlen(s) : 0; }

/* Adds a name's bytes plus `fixed`; a name that a u32 length cannot describe is too big. */
static int add_name(size_t *total, const char *s, uint64_t fixed) {
  size_t n = name_length(s);
  if (n > UINT32_MAX) return MESH_ETOOBIG;
  return add_size(total, fixed + n);
}

static int has_materials(const mesh *m) {
  if (m->image_count) return 1;
  for (uint32_t i = 0; i < m->submesh_count; i++)
    if (m->submeshes[i].has_color || m->submeshes[i].texture) return 1;
  return 0;
}

int mesh_blob_size(const mesh *m, size_t *len) {
  if (m == NULL || len == NULL) return MESH_EINVAL;
  if ((m->vertex_count && !m->positions) || (m->triangle_count && !m->triangles) ||
      (m->frame_count && !m->frames) || (m->target_count && !m->targets) ||
      (m->clip_count && !m->clips) || (m->submesh_count && !m->submeshes))
    return MESH_EINVAL;
  size_t t = 0;
  uint64_t v = m->vertex_count;
  int rc = add_size(&t, HEADER_BYTES);
  rc = rc ? rc : add_size(&t, 12 * v);
  if (m->normals) rc = rc ? rc : add_size(&t, 12 * v);
  if (m->uvs) rc = rc ? rc : add_size(&t, 8 * v);
  rc = rc ? rc : add_size(&t, 12 * (uint64_t)m->triangle_count);
  for (uint32_t i = 0; i < m->target_count && !rc; i++) {
    const mesh_target *tg = &m->targets[i];
    if (tg->count && (!tg->indices || !tg->deltas)) return MESH_EINVAL;
    rc = add_name(&t, tg->name, 12 + 16 * (uint64_t)tg->count);
  }
  /* 3·V·F floats: V and F are 32-bit, so 12·V·F fits in 64 bits only up to 2^64; check. */
  if (m->frame_count && v && (uint64_t)m->frame_count > UINT64_MAX / (12 * v)) return MESH_ETOOBIG;
  rc = rc ? rc : add_size(&t, 12 * v * m->frame_count);
  for (uint32_t i = 0; i < m->clip_count && !rc; i++) {
    const mesh_clip *c = &m->clips[i];
    uint64_t w = (uint64_t)c->key_count * c->target_count;
    if ((c->key_count && !c->times) || (w && !c->weights)) return MESH_EINVAL;
    rc = add_name(&t, c->name, 32 + 4 * (uint64_t)c->key_count);
    rc = rc ? rc : add_size(&t, 4 * w);
  }
  for (uint32_t i = 0; i < m->submesh_count && !rc; i++)
    rc = add_name(&t, m->submeshes[i].name, 20);
  if (has_materials(m)) {
    if (m->image_count && !m->images) return MESH_EINVAL;
    rc = rc ? rc : add_size(&t, 24 * (uint64_t)m->submesh_count + 4);
    for (uint32_t i = 0; i < m->image_count && !rc; i++) {
      const mesh_image *im = &m->images[i];
      if (!im->rgba && im->width && im->height) return MESH_EINVAL;
      rc = add_name(&t, im->name, 12 + 4 * (uint64_t)im->width * im->height);
    }
  }
  rc = rc ? rc : add_size(&t, 4);
  if (rc == 0) *len = t;
  return rc;
}

typedef struct writer {
  uint8_t *p, *end;
} writer;

static void put_u32(writer *w, uint32_t x) {
  uint8_t b[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
  memcpy(w->p, b, 4);
  w->p += 4;
}

static void put_f32(writer *w, float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  put_u32(w, x);
}

static void put_u32s(writer *w, const uint32_t *a, size_t n) {
  for (size_t i = 0; i < n; i++) put_u32(w, a[i]);
}

static void put_f32s(writer *w, const float *a, size_t n) {
  for (size_t i = 0; i < n; i++) put_f32(w, a[i]);
}

static void put_name(writer *w, const char *s) {
  size_t n = name_length(s);
  put_u32(w, (uint32_t)n);
  if (n) memcpy(w->p, s, n);
  w->p += n;
}

int mesh_blob_encode(const mesh *m, uint8_t *dst, size_t len) {
  size_t need;
  int rc = mesh_blob_size(m, &need);
  if (rc) return rc;
  if (dst == NULL || len != need) return MESH_EINVAL;
  writer w = {dst, dst + len};
  uint64_t v = m->vertex_count;
  memcpy(w.p, blob_magic, 4);
  w.p += 4;
  put_u32(&w, BLOB_VERSION);
  put_u32(&w, (m->normals ? FLAG_NORMALS : 0u) | (m->uvs ? FLAG_UVS : 0u) | (m->file_up == 'z' ? FLAG_Z_UP : 0u) |
                 (has_materials(m) ? FLAG_MATERIALS : 0u));
  put_u32(&w, m->vertex_count);
  put_u32(&w, m->triangle_count);
  put_u32(&w, m->target_count);
  put_u32(&w, m->frame_count);
  put_f32(&w, m->frame_rate);
  put_u32(&w, m->clip_count);
  put_u32(&w, m->submesh_count);
  put_f32s(&w, m->bbox_min, 3);
  put_f32s(&w, m->bbox_max, 3);
  put_f32s(&w, m->positions, 3 * v);
  if (m->normals) put_f32s(&w, m->normals, 3 * v);
  if (m->uvs) put_f32s(&w, m->uvs, 2 * v);
  put_u32s(&w, m->triangles, 3 * (size_t)m->triangle_count);
  for (uint32_t i = 0; i < m->target_count; i++) {
    const mesh_target *tg = &m->targets[i];
    put_name(&w, tg->name);
    put_f32(&w, tg->default_weight);
    put_u32(&w, tg->count);
    put_u32s(&w, tg->indices, tg->count);
    put_f32s(&w, tg->deltas, 3 * (size_t)tg->count);
  }
  put_f32s(&w, m->frames, 3 * v * m->frame_count);
  for (uint32_t i = 0; i < m->clip_count; i++) {
    const mesh_clip *c = &m->clips[i];
    put_name(&w, c->name);
    put_f32(&w, c->fps);
    put_u32(&w, c->first_frame);
    put_u32(&w, c->frame_count);
    put_u32(&w, c->key_count);
    put_u32(&w, c->target_count);
    put_u32(&w, c->loop_frames);
    put_u32(&w, c->play_once ? CLIP_PLAY_ONCE : 0);
    put_f32s(&w, c->times, c->key_count);
    put_f32s(&w, c->weights, (size_t)c->key_count * c->target_count);
  }
  for (uint32_t i = 0; i < m->submesh_count; i++) {
    const mesh_submesh *s = &m->submeshes[i];
    put_name(&w, s->name);
    put_u32(&w, s->first_triangle);
    put_u32(&w, s->triangle_count);
    put_u32(&w, s->first_vertex);
    put_u32(&w, s->vertex_count);
  }
  if (has_materials(m)) {
    for (uint32_t i = 0; i < m->submesh_count; i++) {
      const mesh_submesh *s = &m->submeshes[i];
      put_u32(&w, s->has_color ? 1u : 0u);
      put_f32s(&w, s->base_color, 4);
      put_u32(&w, s->texture);
    }
    put_u32(&w, m->image_count);
    for (uint32_t i = 0; i < m->image_count; i++) {
      const mesh_image *im = &m->images[i];
      size_t n = 4 * (size_t)im->width * im->height;
      put_name(&w, im->name);
      put_u32(&w, im->width);
      put_u32(&w, im->height);
      if (n) memcpy(w.p, im->rgba, n);
      w.p += n;
    }
  }
  put_u32(&w, mesh_blob_crc32(dst, (size_t)(w.p - dst)));
  return w.p == w.end ? 0 : MESH_EINVAL;
}

int mesh_blob_write(const mesh *m, uint8_t **out, size_t *len) {
  if (out == NULL || len == NULL) return MESH_EINVAL;
  *out = NULL;
  *len = 0;
  size_t n;
  int rc = mesh_blob_size(m, &n);
  if (rc) return rc;
  uint8_t *b = malloc(n);
  if (b == NULL) return MESH_ENOMEM;
  rc = mesh_blob_encode(m, b, n);
  if (rc) {
    free(b);
    return rc;
  }
  *out = b;
  *len = n;
  return 0;
}

/* ---- reading ----------------------------------------------------------------------------------- */

typedef struct reader {
  const uint8_t *p;
  size_t left;      /* bytes before the CRC */
  char *err;
  size_t errlen;
  uint32_t version; /* the blob's layout (1 or 2) */
} reader;

static uint32_t get_u32(reader *r) {
  const uint8_t *b = r->p;
  r->p += 4;
  r->left -= 4;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static float get_f32(reader *r) {
  uint32_t x = get_u32(r);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* Refuses (MESH_EFORMAT, naming `what`) unless `count` items of `size` bytes are left. */
static int need(reader *r, uint64_t count, uint32_t size, const char *what) {
  if (count > r->left / size) {
    mesh__set_err(r->err, r->errlen, "blob truncated: %s needs %llu × %u bytes, %zu left", what,
                  (unsigned long long)count, size, r->left);
    return MESH_EFORMAT;
  }
  return 0;
}

/* Reads `n` u32 or f32 values into a fresh array (at least one element, so 0 is not NULL). */
static int get_array(reader *r, uint64_t n, int is_float, void **out, const char *what) {
  int rc = need(r, n, 4, what);
  if (rc) return rc;
  void *a = malloc(4 * (size_t)n + 4);
  if (a == NULL) {
    mesh__set_err(r->err, r->errlen, "out of memory reading %s (%llu values)", what,
                  (unsigned long long)n);
    return MESH_ENOMEM;
  }
  for (size_t i = 0; i < (size_t)n; i++) {
    if (is_float) ((float *)a)[i] = get_f32(r);
    else ((uint32_t *)a)[i] = get_u32(r);
  }
  *out = a;
  return 0;
}

static int get_floats(reader *r, uint64_t n, float **out, const char *what) {
  return get_array(r, n, 1, (void **)out, what);
}

static int get_u32s(reader *r, uint64_t n, uint32_t **out, const char *what) {
  return get_array(r, n, 0, (void **)out, what);
}

/* A name: u32 length then that many bytes, none of them NUL. */
static int get_name(reader *r, char **out, const char *what, uint32_t index) {
  int rc = need(r, 1, 4, what);
  if (rc) return rc;
  uint32_t n = get_u32(r);
  if ((rc = need(r, n, 1, what))) return rc;
  if (memchr(r->p, '\0', n) != NULL) {
    mesh__set_err(r->err, r->errlen, "%s %u: name contains a NUL byte", what, index);
    return MESH_EFORMAT;
  }
  char *s = malloc((size_t)n + 1);
  if (s == NULL) {
    mesh__set_err(r->err, r->errlen, "out of memory reading a name of %u bytes", n);
    return MESH_ENOMEM;
  }
  memcpy(s, r->p, n);
  s[n] = '\0';
  r->p += n;
  r->left -= n;
  *out = s;
  return 0;
}

static int read_targets(reader *r, mesh *m, uint32_t count) {
  /* Each target takes at least 12 bytes: refuse a count the bytes cannot hold before calloc. */
  int rc = need(r, count, 12, "targets");
  if (rc) return rc;
  m->targets = calloc((size_t)count + 1, sizeof(*m->targets));
  if (m->targets == NULL) return MESH_ENOMEM;
  for (uint32_t i = 0; i < count; i++) {
    mesh_target *t = &m->targets[i];
    m->target_count = i + 1; /* so mesh_destroy frees what this one got */
    if ((rc = get_name(r, &t->name, "target", i))) return rc;
    if ((rc = need(r, 2, 4, "target header"))) return rc;
    t->default_weight = get_f32(r);
    t->count = get_u32(r);
    if ((rc = need(r, t->count, 16, "target deltas"))) return rc;
    if ((rc = get_u32s(r, t->count, &t->indices, "target indices"))) return rc;
    if ((rc = get_floats(r, 3 * (uint64_t)t->count, &t->deltas, "target deltas"))) return rc;
  }
  return 0;
}

static int read_clips(reader *r, mesh *m, uint32_t count) {
  uint32_t header = r->version >= 2 ? 7 : 5; /* u32 fields after the name */
  int rc = need(r, count, 4 + 4 * header, "clips");
  if (rc) return rc;
  m->clips = calloc((size_t)count + 1, sizeof(*m->clips));
  if (m->clips == NULL) return MESH_ENOMEM;
  for (uint32_t i = 0; i < count; i++) {
    mesh_clip *c = &m->clips[i];
    m->clip_count = i + 1;
    if ((rc = get_name(r, &c->name, "clip", i))) return rc;
    if ((rc = need(r, header, 4, "clip header"))) return rc;
    c->fps = get_f32(r);
    c->first_frame = get_u32(r);
    c->frame_count = get_u32(r);
    c->key_count = get_u32(r);
    c->target_count = get_u32(r);
    if (r->version >= 2) {
      c->loop_frames = get_u32(r);
      uint32_t flags = get_u32(r);
      if (flags & ~CLIP_PLAY_ONCE) {
        mesh__set_err(r->err, r->errlen, "clip %u of the mesh blob has unknown flags 0x%x", i, flags);
        return MESH_EFORMAT;
      }
      c->play_once = (flags & CLIP_PLAY_ONCE) != 0;
    }
    uint64_t w = (uint64_t)c->key_count * c->target_count;
    if (c->key_count > 0) {
      if ((rc = get_floats(r, c->key_count, &c->times, "clip times"))) return rc;
      if ((rc = get_floats(r, w, &c->weights, "clip weights"))) return rc;
    }
  }
  return 0;
}

static int read_submeshes(reader *r, mesh *m, uint32_t count) {
  int rc = need(r, count, 20, "submeshes");
  if (rc) return rc;
  m->submeshes = calloc((size_t)count + 1, sizeof(*m->submeshes));
  if (m->submeshes == NULL) return MESH_ENOMEM;
  for (uint32_t i = 0; i < count; i++) {
    mesh_submesh *s = &m->submeshes[i];
    m->submesh_count = i + 1;
    if ((rc = get_name(r, &s->name, "submesh", i))) return rc;
    if ((rc = need(r, 4, 4, "submesh range"))) return rc;
    s->first_triangle = get_u32(r);
    s->triangle_count = get_u32(r);
    s->first_vertex = get_u32(r);
    s->vertex_count = get_u32(r);
  }
  return 0;
}

static int read_materials(reader *r, mesh *m) {
  int rc = need(r, m->submesh_count, 24, "submesh materials");
  if (rc) return rc;
  for (uint32_t i = 0; i < m->submesh_count; i++) {
    mesh_submesh *s = &m->submeshes[i];
    uint32_t has = get_u32(r);
    if (has > 1) {
      mesh__set_err(r->err, r->errlen, "submesh %u of the mesh blob has colour flag %u", i, has);
      return MESH_EFORMAT;
    }
    s->has_color = (int)has;
    for (int k = 0; k < 4; k++) s->base_color[k] = get_f32(r);
    s->texture = get_u32(r);
  }
  if ((rc = need(r, 1, 4, "image count"))) return rc;
  uint32_t count = get_u32(r);
  if ((rc = need(r, count, 12, "images"))) return rc;
  m->images = calloc((size_t)count + 1, sizeof(*m->images));
  if (m->images == NULL) return MESH_ENOMEM;
  for (uint32_t i = 0; i < count; i++) {
    mesh_image *im = &m->images[i];
    m->image_count = i + 1;
    if ((rc = get_name(r, &im->name, "image", i))) return rc;
    if ((rc = need(r, 2, 4, "image size"))) return rc;
    im->width = get_u32(r);
    im->height = get_u32(r);
    if (im->width > MESH_MAX_IMAGE_SIDE || im->height > MESH_MAX_IMAGE_SIDE) {
      mesh__set_err(r->err, r->errlen, "image %u of the mesh blob is %u x %u pixels", i, im->width, im->height);
      return MESH_EFORMAT;
    }
    uint64_t n = 4 * (uint64_t)im->width * im->height;
    if ((rc = need(r, n, 1, "image pixels"))) return rc;
    im->rgba = malloc((size_t)n + 1);
    if (!im->rgba) return MESH_ENOMEM;
    memcpy(im->rgba, r->p, (size_t)n);
    r->p += n;
    r->left -= (size_t)n;
  }
  if (!has_materials(m)) { /* written only when there is something: one mesh, one blob */
    mesh__set_err(r->err, r->errlen, "mesh blob marks materials but has no colour and no texture");
    return MESH_EFORMAT;
  }
  return 0;
}

/* Everything after the header, into `m` (whose counts are filled in as arrays arrive, so that
 * mesh_destroy frees a half-read mesh correctly). */
static int read_body(reader *r, mesh *m, uint32_t flags, uint32_t v, uint32_t t, uint32_t targets,
                     uint32_t frames, uint32_t clips, uint32_t submeshes) {
  int rc;
  /* Check the fixed-size arrays' total first: a header that lies about V or T fails here,
   * before the first allocation. */
  uint64_t fixed = 3 * (uint64_t)v + 3 * (uint64_t)t + ((flags & FLAG_NORMALS) ? 3 * (uint64_t)v : 0) +
                   ((flags & FLAG_UVS) ? 2 * (uint64_t)v : 0);
  if ((rc = need(r, fixed, 4, "vertex and triangle arrays"))) return rc;
  if (frames && v && (rc = need(r, (uint64_t)frames * v, 12, "keyframes"))) return rc;
  m->vertex_count = v;
  m->triangle_count = t;
  if ((rc = get_floats(r, 3 * (uint64_t)v, &m->positions, "positions"))) return rc;
  if ((flags & FLAG_NORMALS) && (rc = get_floats(r, 3 * (uint64_t)v, &m->normals, "normals"))) return rc;
  if ((flags & FLAG_UVS) && (rc = get_floats(r, 2 * (uint64_t)v, &m->uvs, "uvs"))) return rc;
  if ((rc = get_u32s(r, 3 * (uint64_t)t, &m->triangles, "triangles"))) return rc;
  if ((rc = read_targets(r, m, targets))) return rc;
  if (frames) {
    if ((rc = get_floats(r, 3 * (uint64_t)v * frames, &m->frames, "keyframes"))) return rc;
    m->frame_count = frames;
  }
  if ((rc = read_clips(r, m, clips))) return rc;
  if ((rc = read_submeshes(r, m, submeshes))) return rc;
  if ((flags & FLAG_MATERIALS) && (rc = read_materials(r, m))) return rc;
  if (r->left != 0) {
    mesh__set_err(r->err, r->errlen, "blob has %zu bytes after its last submesh", r->left);
    return MESH_EFORMAT;
  }
  return 0;
}

int mesh_blob_read(const uint8_t *p, size_t n, uint32_t max_vertices, mesh **out, char *err,
                   size_t errlen) {
  if (out == NULL) return MESH_EINVAL;
  *out = NULL;
  if (err && errlen) err[0] = '\0';
  if (p == NULL && n > 0) return MESH_EINVAL;
  if (n < HEADER_BYTES + 4) {
    mesh__set_err(err, errlen, "blob of %zu bytes is shorter than a header (%u)", n,
                  HEADER_BYTES + 4);
    return MESH_EFORMAT;
  }
  if (memcmp(p, blob_magic, 4) != 0) {
    mesh__set_err(err, errlen, "not a mesh blob (bad magic)");
    return MESH_EFORMAT;
  }
  reader r = {p + 4, n - 8, err, errlen, 0};
  uint32_t stored = (uint32_t)p[n - 4] | (uint32_t)p[n - 3] << 8 | (uint32_t)p[n - 2] << 16 |
                    (uint32_t)p[n - 1] << 24;
  uint32_t version = get_u32(&r);
  r.version = version;
  if (version != 1 && version != BLOB_VERSION) {
    mesh__set_err(err, errlen, "mesh blob version %u; this build reads versions 1 to %u", version,
                  BLOB_VERSION);
    return MESH_EFORMAT;
  }
  uint32_t crc = mesh_blob_crc32(p, n - 4);
  if (crc != stored) {
    mesh__set_err(err, errlen, "mesh blob is corrupt (CRC %08x, stored %08x)", crc, stored);
    return MESH_EFORMAT;
  }
  uint32_t flags = get_u32(&r);
  if (flags & ~(FLAG_NORMALS | FLAG_UVS | FLAG_Z_UP | FLAG_MATERIALS)) {
    mesh__set_err(err, errlen, "mesh blob has unknown flags 0x%x", flags);
    return MESH_EFORMAT;
  }
  uint32_t v = get_u32(&r), t = get_u32(&r), targets = get_u32(&r), frames = get_u32(&r);
  float rate = get_f32(&r);
  uint32_t clips = get_u32(&r), submeshes = get_u32(&r);
  uint32_t limit = max_vertices ? max_vertices : MESH_DEFAULT_MAX_VERTICES;
  if (v > limit) {
    mesh__set_err(err, errlen, "mesh has %u vertices, more than the limit of %u", v, limit);
    return MESH_ETOOBIG;
  }
  mesh *m = mesh_create();
  if (m == NULL) return MESH_ENOMEM;
  m->frame_rate = rate;
  m->file_up = (flags & FLAG_Z_UP) ? 'z' : 0;
  for (int k = 0; k < 3; k++) m->bbox_min[k] = get_f32(&r);
  for (int k = 0; k < 3; k++) m->bbox_max[k] = get_f32(&r);
  int rc = read_body(&r, m, flags, v, t, targets, frames, clips, submeshes);
  if (rc == 0) rc = mesh_validate(m, err, errlen);
  if (rc) {
    if (rc == MESH_ENOMEM && err && errlen && err[0] == '\0')
      mesh__set_err(err, errlen, "out of memory reading a mesh blob of %zu bytes", n);
    mesh_destroy(m);
    return rc;
  }
  *out = m;
  return 0;
}
