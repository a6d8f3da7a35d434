/*
 * test_mesh_blob.c — a mesh written to a blob and read back is the same mesh bit for bit, and a
 * truncated, corrupted or lying blob is refused with a MESH_E* code and a reason, never a crash.
 *
 * Oracles: the source mesh itself, compared array by array with memcmp (bit patterns, not float
 * equality); a CRC-32 computed here bit by bit (no table) and checked on the standard test
 * vector; and, for mutated blobs the reader accepts, writing the result again must give back the
 * mutated bytes exactly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "test.h"

/* CRC-32 (reflected 0xEDB88320), one bit at a time: a second implementation of the trailer. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

static void put_le32(uint8_t *p, uint32_t x) {
  for (int k = 0; k < 4; k++) p[k] = (uint8_t)(x >> (8 * k));
}

static uint32_t get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Recomputes the trailer so a mutation is judged by the parser, not by the CRC. */
static void fix_crc(uint8_t *b, size_t n) { put_le32(b + n - 4, crc_bitwise(b, n - 4)); }

static void same_bits(const void *a, const void *b, size_t bytes, const char *what) {
  if (bytes == 0) return;
  if ((a == NULL) != (b == NULL)) test__fail(__FILE__, __LINE__, "%s: one side is NULL", what);
  if (memcmp(a, b, bytes) != 0) test__fail(__FILE__, __LINE__, "%s differs", what);
}

static void same_name(const char *a, const char *b, const char *what) {
  if (strcmp(a ? a : "", b ? b : "") != 0)
    test__fail(__FILE__, __LINE__, "%s: '%s' != '%s'", what, a, b);
}

/* Every field of two meshes, floats compared as bit patterns. */
static void assert_same_mesh(const mesh *a, const mesh *b) {
  ASSERT_EQ(a->vertex_count, b->vertex_count);
  ASSERT_EQ(a->triangle_count, b->triangle_count);
  ASSERT_EQ(a->file_up, b->file_up);
  size_t v = a->vertex_count;
  same_bits(a->positions, b->positions, 12 * v, "positions");
  ASSERT((a->normals == NULL) == (b->normals == NULL));
  if (a->normals) same_bits(a->normals, b->normals, 12 * v, "normals");
  ASSERT((a->uvs == NULL) == (b->uvs == NULL));
  if (a->uvs) same_bits(a->uvs, b->uvs, 8 * v, "uvs");
  ASSERT_EQ(a->image_count, b->image_count);
  for (uint32_t i = 0; i < a->image_count; i++) {
    const mesh_image *x = &a->images[i], *y = &b->images[i];
    ASSERT(strcmp(x->name, y->name) == 0 && x->width == y->width && x->height == y->height);
    same_bits(x->rgba, y->rgba, 4 * (size_t)x->width * x->height, "texture pixels");
  }
  ASSERT_EQ(a->submesh_count, b->submesh_count);
  for (uint32_t i = 0; i < a->submesh_count; i++) {
    ASSERT_EQ(a->submeshes[i].has_color, b->submeshes[i].has_color);
    ASSERT_EQ(a->submeshes[i].texture, b->submeshes[i].texture);
    same_bits(a->submeshes[i].base_color, b->submeshes[i].base_color, 16, "base colour");
  }
  same_bits(a->triangles, b->triangles, 12 * (size_t)a->triangle_count, "triangles");
  ASSERT_EQ(a->target_count, b->target_count);
  for (uint32_t i = 0; i < a->target_count; i++) {
    const mesh_target *x = &a->targets[i], *y = &b->targets[i];
    same_name(x->name, y->name, "target name");
    same_bits(&x->default_weight, &y->default_weight, 4, "default weight");
    ASSERT_EQ(x->count, y->count);
    same_bits(x->indices, y->indices, 4 * (size_t)x->count, "target indices");
    same_bits(x->deltas, y->deltas, 12 * (size_t)x->count, "target deltas");
  }
  ASSERT_EQ(a->frame_count, b->frame_count);
  same_bits(&a->frame_rate, &b->frame_rate, 4, "frame rate");
  same_bits(a->frames, b->frames, 12 * v * a->frame_count, "frames");
  ASSERT_EQ(a->clip_count, b->clip_count);
  for (uint32_t i = 0; i < a->clip_count; i++) {
    const mesh_clip *x = &a->clips[i], *y = &b->clips[i];
    same_name(x->name, y->name, "clip name");
    same_bits(&x->fps, &y->fps, 4, "clip fps");
    ASSERT_EQ(x->first_frame, y->first_frame);
    ASSERT_EQ(x->frame_count, y->frame_count);
    ASSERT_EQ(x->key_count, y->key_count);
    ASSERT_EQ(x->target_count, y->target_count);
    ASSERT_EQ(x->loop_frames, y->loop_frames);
    ASSERT_EQ(x->play_once, y->play_once);
    same_bits(x->times, y->times, 4 * (size_t)x->key_count, "clip times");
    same_bits(x->weights, y->weights, 4 * (size_t)x->key_count * x->target_count, "clip weights");
  }
  ASSERT_EQ(a->submesh_count, b->submesh_count);
  for (uint32_t i = 0; i < a->submesh_count; i++) {
    const mesh_submesh *x = &a->submeshes[i], *y = &b->submeshes[i];
    same_name(x->name, y->name, "submesh name");
    ASSERT_EQ(x->first_triangle, y->first_triangle);
    ASSERT_EQ(x->triangle_count, y->triangle_count);
    ASSERT_EQ(x->first_vertex, y->first_vertex);
    ASSERT_EQ(x->vertex_count, y->vertex_count);
  }
  same_bits(a->bbox_min, b->bbox_min, 12, "bbox_min");
  same_bits(a->bbox_max, b->bbox_max, 12, "bbox_max");
}

/* Writes m, checks the size and the trailer, reads it back and compares; the blob is returned
 * (the caller frees it). */
static uint8_t *round_trip(const mesh *m, size_t *len) {
  uint8_t *b = NULL;
  size_t n = 0, want = 0;
  ASSERT_OK(mesh_blob_size(m, &want), NULL);
  ASSERT_OK(mesh_blob_write(m, &b, &n), NULL);
  ASSERT_EQ(n, want);
  ASSERT(memcmp(b, "DFMB", 4) == 0);
  ASSERT_EQ(get_le32(b + n - 4), crc_bitwise(b, n - 4));
  char err[MESH_ERR_LEN];
  mesh *back = NULL;
  ASSERT_OK(mesh_blob_read(b, n, 0, &back, err, sizeof(err)), err);
  assert_same_mesh(m, back);
  /* Writing what was read gives the same bytes. */
  uint8_t *again = NULL;
  size_t n2 = 0;
  ASSERT_OK(mesh_blob_write(back, &again, &n2), NULL);
  ASSERT_EQ(n2, n);
  ASSERT(memcmp(again, b, n) == 0);
  free(again);
  mesh_destroy(back);
  *len = n;
  return b;
}

static mesh *import_ok(const char *path) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  return m;
}

static const char *morph_cube(void) {
  return test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf");
}

/* Reads b expecting failure with `code`; the reason must be non-empty and *out stays NULL. */
static void refused(const uint8_t *b, size_t n, uint32_t max_vertices, int code) {
  char err[MESH_ERR_LEN] = "";
  mesh *m = (mesh *)1;
  int rc = mesh_blob_read(b, n, max_vertices, &m, err, sizeof(err));
  if (rc != code)
    test__fail(__FILE__, __LINE__, "read of %zu bytes gave %d (%s: %s), expected %d (%s)", n, rc,
               mesh_strerror(rc), err, code, mesh_strerror(code));
  ASSERT(m == NULL);
  ASSERT(err[0] != '\0');
}

/* The up axis an FBX file declares, read from its text (ASCII FBX: `P: "UpAxis", "int", "Integer",
 * "",2`): the oracle for what assimp's metadata gave mesh_import. -1 when the file has no such line. */
static int fbx_text_up_axis(const char *path) {
  FILE *f = fopen(path, "rb");
  ASSERT(f != NULL);
  char line[512];
  int axis = -1;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, "P: \"UpAxis\",")) {
      const char *comma = strrchr(line, ',');
      axis = comma ? atoi(comma + 1) : -1;
      break;
    }
  fclose(f);
  return axis;
}

/* An FBX file that says Z is up (assimp leaves its geometry as it is and reports the axis):
 * mesh.file_up is 'z', and the blob carries it in flag bit 2. A file that says Y, and one that says
 * nothing, keep 0 and blobs without the bit: the bytes every earlier blob had. */
TEST(an_fbx_file_that_says_z_is_up_is_marked_and_the_blob_keeps_it) {
  const char *z_fbx = test_assimp_model("FBX/embedded_ascii/box.FBX");
  ASSERT_EQ(fbx_text_up_axis(z_fbx), 2);
  mesh *m = import_ok(z_fbx);
  ASSERT_EQ(m->file_up, 'z');
  size_t n;
  uint8_t *b = round_trip(m, &n);
  ASSERT_EQ(get_le32(b + 8) & 7u, 4u | (m->normals ? 1u : 0u) | (m->uvs ? 2u : 0u));
  free(b);
  mesh_destroy(m);
  const char *others[] = {"FBX/box.fbx", "PLY/cube.ply", "OFF/Wuson.off"};
  for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
    m = import_ok(test_assimp_model(others[i]));
    ASSERT_EQ(m->file_up, 0);
    b = round_trip(m, &n);
    ASSERT_EQ(get_le32(b + 8) & 4u, 0u);
    free(b);
    mesh_destroy(m);
  }
}

/* Colours and textures ride in the blob (flag bit 3) — so the store keeps them with the mesh —
 * and come back bit for bit; a mesh with neither keeps the bytes blobs always had (no bit 3). */
TEST(blob_round_trip_keeps_submesh_colours_and_decoded_textures) {
  const char *with[] = {"OBJ/spider.obj", "glTF2/BoxTextured-glTF-Binary/BoxTextured.glb", "MD2/sydney.md2"};
  for (size_t i = 0; i < sizeof(with) / sizeof(with[0]); i++) {
    mesh *m = import_ok(test_assimp_model(with[i]));
    ASSERT(m->image_count > 0);
    size_t n;
    uint8_t *b = round_trip(m, &n);
    ASSERT(get_le32(b + 8) & 8u);
    free(b);
    mesh_destroy(m);
  }
  mesh *m = import_ok(test_assimp_model("PLY/cube.ply"));
  ASSERT(m->image_count == 0 && !m->submeshes[0].has_color && m->submeshes[0].texture == 0);
  size_t n;
  uint8_t *b = round_trip(m, &n);
  ASSERT_EQ(get_le32(b + 8) & 8u, 0u);
  free(b);
  mesh_destroy(m);
}

TEST(blob_crc_is_the_standard_crc32) {
  ASSERT_EQ(mesh_blob_crc32((const uint8_t *)"123456789", 9), 0xCBF43926u);
  ASSERT_EQ(crc_bitwise((const uint8_t *)"123456789", 9), 0xCBF43926u);
}

TEST(blob_round_trip_of_the_demo_head_is_bit_exact) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  ASSERT(m->normals && m->uvs && m->target_count == 68);
  size_t n;
  uint8_t *b = round_trip(m, &n);
  fprintf(stderr, "demo head: %u vertices, %u targets -> %zu bytes\n", m->vertex_count,
          m->target_count, n);
  free(b);
  mesh_destroy(m);
}

TEST(blob_round_trip_of_an_md2_keeps_every_frame_and_clip) {
  mesh *m = import_ok(test_assimp_model("MD2/faerie.md2"));
  ASSERT_EQ(m->frame_count, 198);
  ASSERT(m->clip_count > 1);
  size_t n;
  free(round_trip(m, &n));
  mesh_destroy(m);
}

TEST(blob_round_trip_keeps_looping_frames_and_clips_that_play_once) {
  mesh *m = import_ok(test_assimp_model("MD2/faerie.md2"));
  ASSERT(m->clip_count > 2 && m->clips[0].frame_count > 3);
  m->clips[0].loop_frames = 3; /* as a Quake III animation.cfg says */
  m->clips[1].play_once = 1;
  size_t n;
  free(round_trip(m, &n));
  mesh_destroy(m);
}

/* A version 1 blob (what stores written before loop_frames and play_once hold), assembled here
 * byte by byte from the layout: a triangle, one frame, one clip. It reads, with both fields 0;
 * the same bytes called version 2 are refused (the clip header is two fields short). */
TEST(blob_of_version_1_still_reads) {
  uint8_t b[512];
  size_t n = 0;
#define U32(x) (put_le32(b + n, (uint32_t)(x)), n += 4)
#define F32(x) do { float f_ = (x); uint32_t u_; memcpy(&u_, &f_, 4); U32(u_); } while (0)
  memcpy(b, "DFMB", 4);
  n = 4;
  U32(1); U32(0);                                   /* version, flags */
  U32(3); U32(1); U32(0); U32(1); F32(10.0f); U32(1); U32(1); /* V T targets frames rate clips submeshes */
  F32(0); F32(0); F32(0); F32(1); F32(1); F32(0);   /* bbox */
  const float pos[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  for (int k = 0; k < 9; k++) F32(pos[k]);
  U32(0); U32(1); U32(2);                           /* the triangle */
  for (int k = 0; k < 9; k++) F32(pos[k]);          /* frame 0 */
  U32(4); memcpy(b + n, "idle", 4); n += 4;         /* clip: name, fps, first, count, keys, targets */
  F32(10.0f); U32(0); U32(1); U32(0); U32(0);
  U32(0); U32(0); U32(1); U32(0); U32(3);           /* submesh "": triangles 0+1, vertices 0+3 */
  U32(0);
  fix_crc(b, n);
#undef U32
#undef F32
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_blob_read(b, n, 0, &m, err, sizeof(err)), err);
  ASSERT(m->vertex_count == 3 && m->triangle_count == 1 && m->frame_count == 1 && m->clip_count == 1);
  ASSERT(strcmp(m->clips[0].name, "idle") == 0 && m->clips[0].frame_count == 1);
  ASSERT(m->clips[0].loop_frames == 0 && m->clips[0].play_once == 0);
  ASSERT(memcmp(m->positions, pos, sizeof(pos)) == 0);
  mesh_destroy(m);
  put_le32(b + 4, 2); /* the version field */
  fix_crc(b, n);
  refused(b, n, 0, MESH_EFORMAT);
}

TEST(blob_round_trip_of_a_gltf_keeps_targets_and_weight_clips) {
  mesh *m = import_ok(morph_cube());
  ASSERT_EQ(m->target_count, 2);
  ASSERT_EQ(m->clip_count, 1);
  ASSERT(m->clips[0].key_count > 0);
  m->targets[1].default_weight = -0.0f; /* a signed zero must survive too */
  size_t n;
  free(round_trip(m, &n));
  mesh_destroy(m);
}

TEST(blob_round_trip_of_an_empty_mesh) {
  mesh *m = mesh_create();
  size_t n;
  free(round_trip(m, &n));
  mesh_destroy(m);
}

TEST(blob_truncated_at_any_length_is_refused) {
  mesh *m = import_ok(morph_cube());
  size_t n;
  uint8_t *b = round_trip(m, &n);
  for (size_t k = 0; k < n; k++) {
    /* A prefix, and the same prefix with a trailer that matches it: the first fails on the CRC
     * or the header, the second in the parser, on the count that no longer fits. */
    uint8_t *cut = malloc(k + 1);
    memcpy(cut, b, k);
    refused(cut, k, 0, MESH_EFORMAT);
    if (k >= 8) {
      fix_crc(cut, k);
      refused(cut, k, 0, MESH_EFORMAT);
    }
    free(cut);
  }
  refused(NULL, 0, 0, MESH_EFORMAT);
  free(b);
  mesh_destroy(m);
}

TEST(blob_with_any_byte_flipped_is_refused) {
  mesh *m = import_ok(morph_cube());
  size_t n;
  uint8_t *b = round_trip(m, &n);
  for (size_t k = 0; k < n; k++) {
    b[k] ^= 0x5A;
    refused(b, n, 0, MESH_EFORMAT);
    b[k] ^= 0x5A;
  }
  free(b);
  mesh_destroy(m);
}

/* Offsets of the header fields (see mesh_blob.c's layout). */
enum { OFF_VERSION = 4, OFF_FLAGS = 8, OFF_V = 12, OFF_T = 16, OFF_TARGETS = 20, OFF_FRAMES = 24,
       OFF_CLIPS = 32, OFF_SUBMESHES = 36, HEADER = 64 };

/* Sets the u32 at `off`, fixes the CRC, expects `code`, restores. */
static void lie(uint8_t *b, size_t n, size_t off, uint32_t value, uint32_t max_vertices, int code) {
  uint32_t old = get_le32(b + off);
  put_le32(b + off, value);
  fix_crc(b, n);
  refused(b, n, max_vertices, code);
  put_le32(b + off, old);
  fix_crc(b, n);
}

TEST(blob_whose_counts_lie_is_refused_before_allocating) {
  mesh *m = import_ok(test_assimp_model("MD2/faerie.md2"));
  size_t n;
  uint8_t *b = round_trip(m, &n);
  ASSERT_EQ(get_le32(b + OFF_V), m->vertex_count);
  ASSERT_EQ(get_le32(b + OFF_FRAMES), 198);
  lie(b, n, OFF_VERSION, 3, 0, MESH_EFORMAT);
  lie(b, n, OFF_FLAGS, 4, 0, MESH_EFORMAT);
  lie(b, n, OFF_V, 0xFFFFFFFFu, 0, MESH_ETOOBIG);
  lie(b, n, OFF_V, m->vertex_count, m->vertex_count - 1, MESH_ETOOBIG);
  lie(b, n, OFF_V, 4000000, 0, MESH_EFORMAT);          /* 48 MB of positions in a small blob */
  lie(b, n, OFF_T, 0xFFFFFFFFu, 0, MESH_EFORMAT);
  lie(b, n, OFF_TARGETS, 0xFFFFFFFFu, 0, MESH_EFORMAT);
  lie(b, n, OFF_FRAMES, 0xFFFFFFFFu, 0, MESH_EFORMAT); /* 2^32 × V × 12 bytes */
  lie(b, n, OFF_CLIPS, 0xFFFFFFFFu, 0, MESH_EFORMAT);
  lie(b, n, OFF_SUBMESHES, 0xFFFFFFFFu, 0, MESH_EFORMAT);
  lie(b, n, OFF_V, m->vertex_count - 1, 0, MESH_EFORMAT); /* everything after shifts */
  /* The blob itself is intact again. */
  mesh *back = NULL;
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_blob_read(b, n, m->vertex_count, &back, err, sizeof(err)), err);
  mesh_destroy(back);
  free(b);
  mesh_destroy(m);
}

TEST(blob_with_trailing_bytes_a_nul_in_a_name_or_an_index_out_of_range_is_refused) {
  mesh *m = import_ok(morph_cube());
  size_t n;
  uint8_t *b = round_trip(m, &n);
  /* Four extra bytes before the trailer. */
  uint8_t *longer = malloc(n + 4);
  memcpy(longer, b, n - 4);
  memset(longer + n - 4, 0, 4);
  fix_crc(longer, n + 4);
  refused(longer, n + 4, 0, MESH_EFORMAT);
  free(longer);
  /* The first target's name: after the header, the vertex arrays and the triangles. */
  size_t off = HEADER + 12 * (size_t)m->vertex_count + (m->normals ? 12 * (size_t)m->vertex_count : 0) +
               (m->uvs ? 8 * (size_t)m->vertex_count : 0) + 12 * (size_t)m->triangle_count;
  uint32_t len = get_le32(b + off);
  ASSERT_EQ(len, strlen(m->targets[0].name));
  ASSERT(len >= 2);
  b[off + 4 + 1] = 0;
  fix_crc(b, n);
  refused(b, n, 0, MESH_EFORMAT);
  b[off + 4 + 1] = (uint8_t)m->targets[0].name[1];
  /* The first triangle's first corner, pointed past the vertices: mesh_validate's check. */
  size_t tri = HEADER + 12 * (size_t)m->vertex_count + (m->normals ? 12 * (size_t)m->vertex_count : 0) +
               (m->uvs ? 8 * (size_t)m->vertex_count : 0);
  put_le32(b + tri, m->vertex_count);
  fix_crc(b, n);
  refused(b, n, 0, MESH_ERANGE);
  free(b);
  mesh_destroy(m);
}

/* A small xorshift generator: the mutations are the same on every run. */
static uint32_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (uint32_t)(*s >> 11);
}

TEST(blob_mutated_with_a_valid_crc_is_refused_or_read_back_exactly) {
  mesh *m = import_ok(morph_cube());
  size_t n;
  uint8_t *b = round_trip(m, &n);
  uint8_t *mut = malloc(n);
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  int accepted = 0;
  for (int i = 0; i < 20000; i++) {
    memcpy(mut, b, n);
    int edits = 1 + (int)(next_random(&seed) % 4);
    for (int e = 0; e < edits; e++) {
      size_t at = next_random(&seed) % (n - 4);
      uint32_t r = next_random(&seed);
      /* Flip a bit, set a byte, or write an interesting u32 (0, 1, max, a large count). */
      if (r % 3 == 0) mut[at] ^= (uint8_t)(1u << (r >> 8 & 7));
      else if (r % 3 == 1) mut[at] = (uint8_t)(r >> 8);
      else if (at + 4 <= n - 4) {
        static const uint32_t special[] = {0, 1, 0xFFFFFFFFu, 0x7FFFFFFFu, 0x10000000u, 3};
        put_le32(mut + at, special[(r >> 8) % 6]);
      }
    }
    fix_crc(mut, n);
    char err[MESH_ERR_LEN] = "";
    mesh *got = NULL;
    int rc = mesh_blob_read(mut, n, 0, &got, err, sizeof(err));
    if (rc == 0) {
      uint8_t *again = NULL;
      size_t n2 = 0;
      ASSERT_OK(mesh_blob_write(got, &again, &n2), NULL);
      ASSERT_EQ(n2, n);
      ASSERT(memcmp(again, mut, n) == 0);
      free(again);
      mesh_destroy(got);
      accepted++;
    } else {
      ASSERT(rc <= MESH_ENOENT && rc >= MESH_EMISMATCH);
      ASSERT(got == NULL);
      ASSERT(err[0] != '\0');
    }
  }
  fprintf(stderr, "%d of 20000 mutated blobs were valid meshes and read back exactly\n", accepted);
  ASSERT(accepted > 0); /* mutations of float payloads are valid meshes */
  free(mut);
  free(b);
  mesh_destroy(m);
}
