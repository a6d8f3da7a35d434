/*
 * test_entropy.c — the `entropy` capability's coding (docs/protocol.md §12.11): the rANS coder
 * alone, then whole version 2 SNAPSHOTs of real and random meshes in both codings.
 *
 * Oracles: for the coder, the symbols and bits that went in; for the SNAPSHOTs, what today's
 * coding (meshoptimizer's codecs and varints, decoded by the decoder that existed before) gives
 * for the same mesh on the same grid: the entropy coding must decode to the same bits in every
 * field, to the same triangles and to the same traversal. Malformed bodies: a PROTO_E* code.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_io.h"
#include "proto2.h"
#include "proto2_mesh.h"
#include "proto_rans.h"
#include "test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

TEST(the_rans_coder_gives_back_every_symbol_and_raw_bit_in_order) {
  for (int round = 0; round < 30; round++) {
    int contexts = 1 + (int)(rnd() % 8), symbols = 2 + (int)(rnd() % 255);
    size_t n = round == 0 ? 1 : rnd() % 20000;
    int *ctx = malloc(sizeof(int) * (n + 1)), *sym = malloc(sizeof(int) * (n + 1));
    uint32_t *bits = malloc(sizeof(uint32_t) * (n + 1));
    int *nbits = malloc(sizeof(int) * (n + 1));
    proto_rans_enc e;
    ASSERT_OK(proto__rans_enc_init(&e, contexts, symbols), NULL);
    for (size_t i = 0; i < n; i++) {
      ctx[i] = (int)(rnd() % (uint32_t)contexts);
      /* Skewed: mostly small symbols, as residual buckets are. */
      sym[i] = (int)((rnd() % (uint32_t)symbols) >> (rnd() % 6)) % symbols;
      nbits[i] = (int)(rnd() % 33);
      bits[i] = rnd() ^ (rnd() << 21);
      if (nbits[i] < 32) bits[i] &= (1u << nbits[i]) - 1;
      proto__rans_enc_sym(&e, ctx[i], sym[i]);
      proto__rans_enc_bits(&e, bits[i], nbits[i]);
    }
    proto_buf b;
    proto_buf_init(&b);
    ASSERT_OK(proto__rans_enc_finish(&e, &b), NULL);
    proto__rans_enc_fini(&e);
    proto_rans_dec d;
    ASSERT_OK(proto__rans_dec_init(&d, b.data, b.len, contexts, symbols), NULL);
    /* The decoder reads symbols and bits interleaved as they were written. */
    for (size_t i = 0; i < n; i++) {
      ASSERT_EQ(proto__rans_dec_sym(&d, ctx[i]), sym[i]);
      ASSERT_EQ(proto__rans_dec_bits(&d, nbits[i]), bits[i]);
    }
    ASSERT_OK(proto__rans_dec_finish(&d), NULL);
    proto__rans_dec_fini(&d);
    /* One more symbol than was coded is refused; so is a block cut short or with a byte more. */
    if (n > 0) {
      ASSERT_OK(proto__rans_dec_init(&d, b.data, b.len, contexts, symbols), NULL);
      for (size_t i = 0; i <= n && !d.err; i++) proto__rans_dec_sym(&d, ctx[i < n ? i : 0]);
      ASSERT(proto__rans_dec_finish(&d) != 0);
      proto__rans_dec_fini(&d);
    }
    uint8_t *more = malloc(b.len + 1);
    memcpy(more, b.data, b.len);
    more[b.len] = 0x55;
    ASSERT_OK(proto__rans_dec_init(&d, more, b.len + 1, contexts, symbols), NULL);
    for (size_t i = 0; i < n; i++) proto__rans_dec_sym(&d, ctx[i]), proto__rans_dec_bits(&d, nbits[i]);
    ASSERT_EQ(proto__rans_dec_finish(&d), PROTO_ETRAILING);
    proto__rans_dec_fini(&d);
    free(more);
    proto_buf_fini(&b);
    free(ctx), free(sym), free(bits), free(nbits);
  }
}

TEST(a_rans_table_that_does_not_sum_to_the_total_or_an_unused_context_is_refused) {
  uint8_t bad_sum[] = {2, 0x80, 0x10, 0x01, 4, 0, 0, 0x80, 0}; /* 2048 + 1 */
  proto_rans_dec d;
  ASSERT_EQ(proto__rans_dec_init(&d, bad_sum, sizeof(bad_sum), 1, 4), PROTO_EINVAL);
  uint8_t too_many[] = {5, 0x80, 0x20, 0, 0, 0, 0, 4, 0, 0, 0x80, 0}; /* 5 symbols of an alphabet of 4 */
  ASSERT_EQ(proto__rans_dec_init(&d, too_many, sizeof(too_many), 1, 4), PROTO_EINVAL);
  uint8_t empty_ctx[] = {0, 8, 0, 0x80, 0, 0, 0, 0x80, 0, 0}; /* context 0 codes nothing */
  ASSERT_OK(proto__rans_dec_init(&d, empty_ctx, sizeof(empty_ctx), 1, 4), NULL);
  proto__rans_dec_sym(&d, 0);
  ASSERT_EQ(proto__rans_dec_finish(&d), PROTO_EINVAL);
  proto__rans_dec_fini(&d);
  uint8_t bad_state[] = {1, 0x80, 0x20, 8, 0, 0, 0, 0, 0, 0x80, 0, 0}; /* state 0 is 0, below the coder's range */
  ASSERT_EQ(proto__rans_dec_init(&d, bad_state, sizeof(bad_state), 1, 4), PROTO_EINVAL);
  uint8_t bad_state1[] = {1, 0x80, 0x20, 8, 0, 0x80, 0, 0, 0, 0, 0, 0x80}; /* state 1 is 2^31, above it */
  ASSERT_EQ(proto__rans_dec_init(&d, bad_state1, sizeof(bad_state1), 1, 4), PROTO_EINVAL);
  uint8_t one_state[] = {1, 0x80, 0x20, 4, 0, 0x80, 0, 0}; /* a single state: too short for two */
  ASSERT_EQ(proto__rans_dec_init(&d, one_state, sizeof(one_state), 1, 4), PROTO_ETRUNCATED);
}

/* 20 symbols of 3 raw bits each: 60 bits, so the last of the 8 raw bytes has 4 bits of padding,
 * read with the rest in one 8-byte top-up. A padding bit set is refused; clear, accepted. */
TEST(a_set_padding_bit_after_the_raw_bits_is_refused_as_trailing) {
  proto_rans_enc e;
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto__rans_enc_init(&e, 1, 2), NULL);
  for (int i = 0; i < 20; i++) proto__rans_enc_sym(&e, 0, i & 1), proto__rans_enc_bits(&e, (uint32_t)(i % 8), 3);
  ASSERT_OK(proto__rans_enc_finish(&e, &b), NULL);
  proto__rans_enc_fini(&e);
  for (int flip = 0; flip < 2; flip++) {
    if (flip) b.data[b.len - 1] |= 0x80;
    proto_rans_dec d;
    ASSERT_OK(proto__rans_dec_init(&d, b.data, b.len, 1, 2), NULL);
    for (int i = 0; i < 20; i++) {
      ASSERT_EQ(proto__rans_dec_sym(&d, 0), i & 1);
      ASSERT_EQ(proto__rans_dec_bits(&d, 3), i % 8);
    }
    ASSERT_EQ(proto__rans_dec_finish(&d), flip ? PROTO_ETRAILING : 0);
    proto__rans_dec_fini(&d);
  }
  proto_buf_fini(&b);
}

/* Worked by hand from §12.11's formulas: symbols 1, 0 with frequencies 2048, 2048. Coding runs
 * backwards: symbol 0 (i = 1, state 1) takes 2^15 to (2^15 / 2048) << 12 = 2^16; symbol 1
 * (i = 0, state 0) takes 2^15 to 2^16 + 2048. No renormalisation word. A decoder with one state
 * would read symbol 1, then symbol 0 from 2^15 and run out of bytes. */
TEST(two_interleaved_rans_states_decode_a_block_worked_by_hand) {
  uint8_t block[] = {2, 0x80, 0x10, 0x80, 0x10, 8, 0x00, 0x08, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00};
  proto_rans_dec d;
  ASSERT_OK(proto__rans_dec_init(&d, block, sizeof(block), 1, 2), NULL);
  ASSERT_EQ(proto__rans_dec_sym(&d, 0), 1);
  ASSERT_EQ(proto__rans_dec_sym(&d, 0), 0);
  ASSERT_OK(proto__rans_dec_finish(&d), NULL);
  proto__rans_dec_fini(&d);
  proto_rans_enc e;
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto__rans_enc_init(&e, 1, 2), NULL);
  proto__rans_enc_sym(&e, 0, 1);
  proto__rans_enc_sym(&e, 0, 0);
  ASSERT_OK(proto__rans_enc_finish(&e, &b), NULL);
  proto__rans_enc_fini(&e);
  ASSERT_EQ(b.len, sizeof(block));
  ASSERT(memcmp(b.data, block, sizeof(block)) == 0);
  proto_buf_fini(&b);
}

/* ---- whole SNAPSHOTs ---------------------------------------------------------------------------- */

static void encode_copies(const mesh *m, float quantum, uint8_t shift, int entropy, const proto_buf *tri_piece,
                          proto_trav *t, const int64_t *copies, proto_buf *out);

/* The SNAPSHOT payload of m (triangles already canonical, t their traversal) on `shift`, in
 * today's coding or the entropy one, with a few sculpt offsets and weights; in the entropy
 * coding a target names its earlier twin as the server does (mesh_target_copy_of). */
static void encode(const mesh *m, float quantum, uint8_t shift, int entropy, const proto_buf *tri_piece, proto_trav *t,
                   proto_buf *out) {
  encode_copies(m, quantum, shift, entropy, tri_piece, t, NULL, out);
}

/* The same with each target's copy chosen by the caller (`copies[i]` < 0: coded in full). */
static void encode_copies(const mesh *m, float quantum, uint8_t shift, int entropy, const proto_buf *tri_piece,
                          proto_trav *t, const int64_t *copies, proto_buf *out) {
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, m->target_count, m->positions, m->triangles, m->uvs, quantum};
  proto_grid2 g;
  ASSERT_OK(proto_grid2_init(&g, &md, shift), NULL);
  g.entropy = (uint8_t)entropy;
  proto_buf_init(out);
  ASSERT_OK(proto_snapshot2_head(out, &md, &g), NULL);
  if (entropy) ASSERT_OK(proto_snapshot2_triangles_entropy(out, m->triangles, m->triangle_count, t), NULL);
  else memcpy(proto_buf_append(out, tri_piece->len), tri_piece->data, tri_piece->len);
  ASSERT_OK(proto_snapshot2_attributes(out, &md, &g, t), NULL);
  for (uint32_t i = 0; i < m->target_count; i++) {
    const mesh_target *mt = &m->targets[i];
    proto_target_desc d = {mt->name, mt->default_weight, 0, 1, 0, 0, NULL, mt->count, mt->indices, mt->deltas};
    int64_t of = !entropy ? -1 : copies ? copies[i] : mesh_target_copy_of(m, i);
    if (of >= 0) ASSERT_OK(proto_snapshot2_target_copy(out, &d, &g, (uint32_t)of), NULL);
    else ASSERT_OK(proto_snapshot2_target(out, &d, &g, t), NULL);
  }
  float *w = calloc(m->target_count + 1, sizeof(float));
  for (uint32_t i = 0; i < m->target_count; i++) w[i] = 0.125f * (float)(i % 8);
  uint32_t idx[3] = {0, m->vertex_count / 2, m->vertex_count - 1};
  int32_t q[9] = {1000, -2000, 37, 5, 6, 7, -40000, 0, 99};
  ASSERT_OK(proto_snapshot2_state(out, m->target_count, w, m->vertex_count >= 3 ? 3 : 0, idx, q, shift, t), NULL);
  free(w);
}

#define SAME(a, b, n) ASSERT(((a) == NULL && (b) == NULL) || memcmp((a), (b), (n)) == 0)

/* m's triangles made canonical (the codec's rotation adopted, as a session does), their piece in
 * today's coding, and their traversal. */
static void canonical(mesh *m, proto_buf *tri, proto_trav *t) {
  proto_buf_init(tri);
  ASSERT_OK(proto_snapshot2_triangles(tri, m->triangles, m->triangle_count, m->vertex_count, m->triangles), NULL);
  ASSERT_OK(proto_trav_init(t, m->triangles, m->triangle_count, m->vertex_count), NULL);
}

/* Both codings of m on `shift`: the same bits everywhere. Returns the two payload sizes. */
static void both_codings(mesh *m, uint8_t shift, size_t sizes[2]) {
  float quantum = proto2_test_quantum(m);
  proto_buf tri;
  proto_trav t;
  canonical(m, &tri, &t);
  proto_buf b[2];
  proto_snapshot2 s[2];
  proto_trav tr[2];
  for (int e = 0; e < 2; e++) {
    encode(m, quantum, shift, e, &tri, &t, &b[e]);
    ASSERT_OK(proto_decode_snapshot2(b[e].data, b[e].len, NULL, &s[e], &tr[e]), e ? "entropy" : "plain");
    sizes[e] = b[e].len;
  }
  uint32_t nv = m->vertex_count, nt = m->triangle_count;
  ASSERT_EQ(s[1].grid.entropy, 1);
  SAME(s[0].triangles, s[1].triangles, 12 * (size_t)nt);
  SAME(s[0].triangles, m->triangles, 12 * (size_t)nt); /* the session's own triangles */
  SAME(s[0].positions, s[1].positions, 12 * (size_t)nv);
  SAME(s[0].uvs, s[1].uvs, 8 * (size_t)nv);
  SAME(tr[0].order, tr[1].order, 4 * (size_t)nv);
  SAME(tr[0].rank, tr[1].rank, 4 * (size_t)nv);
  SAME(tr[0].pred, tr[1].pred, 12 * (size_t)nv);
  SAME(tr[0].order, t.order, 4 * (size_t)nv);
  ASSERT_EQ(s[0].target_count, s[1].target_count);
  for (uint32_t i = 0; i < m->target_count; i++) {
    ASSERT_EQ(s[0].targets[i].count, s[1].targets[i].count);
    SAME(s[0].targets[i].indices, s[1].targets[i].indices, 4 * (size_t)s[0].targets[i].count);
    SAME(s[0].targets[i].deltas, s[1].targets[i].deltas, 12 * (size_t)s[0].targets[i].count);
    ASSERT_EQ(s[0].targets[i].copy_of, 0u);
    ASSERT_EQ((int64_t)s[1].targets[i].copy_of, mesh_target_copy_of(m, i) + 1);
  }
  SAME(s[0].weights, s[1].weights, 4 * (size_t)m->target_count);
  ASSERT_EQ(s[0].offsets.count, s[1].offsets.count);
  SAME(s[0].offsets.q, s[1].offsets.q, 12 * (size_t)s[0].offsets.count);
  fprintf(stderr, "  shift %u: %zu bytes today, %zu entropy-coded (V %u, T %u, %u targets)\n", shift, sizes[0], sizes[1],
          nv, nt, m->target_count);
  for (int e = 0; e < 2; e++) {
    proto_snapshot2_free(&s[e]);
    proto_trav_fini(&tr[e]);
    proto_buf_fini(&b[e]);
  }
  proto_trav_fini(&t);
  proto_buf_fini(&tri);
}

static void real_mesh(const char *what) {
  mesh *m = proto2_test_load(what);
  fprintf(stderr, "%s:\n", what);
  for (uint8_t shift = 0; shift <= 5; shift += 5) {
    size_t sizes[2];
    both_codings(m, shift, sizes);
    if (m->vertex_count > 1000) ASSERT(sizes[1] < sizes[0]); /* tables do not pay on a cube */
  }
  mesh_destroy(m);
}

TEST(entropy_snapshots_of_the_demo_head_decode_to_the_bits_of_todays_coding) {
  real_mesh("demo");
  /* Its ARKit shapes that are its own (eyeBlinkLeft is blink_L, ...) travel as copies. */
  mesh *m = proto2_test_load("demo");
  const char *twins[][2] = {{"eyeBlinkLeft", "blink_L"},    {"eyeBlinkRight", "blink_R"},   {"jawOpen", "jaw_open"},
                            {"mouthPucker", "lip_pucker"},  {"mouthLeft", "mouth_left"},    {"mouthRight", "mouth_right"},
                            {"mouthSmileLeft", "smile_L"},  {"mouthSmileRight", "smile_R"}, {"mouthFrownLeft", "frown_L"},
                            {"mouthFrownRight", "frown_R"}, {"browDownLeft", "brow_down_L"}, {"browDownRight", "brow_down_R"},
                            {"cheekPuff", "cheek_puff"},    {"mouthClose", NULL}};
  uint32_t copies = 0;
  for (uint32_t i = 0; i < m->target_count; i++) copies += mesh_target_copy_of(m, i) >= 0;
  ASSERT_EQ(copies, 13u);
  for (size_t k = 0; k < sizeof(twins) / sizeof(twins[0]); k++) {
    int t = mesh_find_target(m, twins[k][0]);
    ASSERT(t >= 0);
    ASSERT_EQ(mesh_target_copy_of(m, (uint32_t)t), twins[k][1] ? (int64_t)mesh_find_target(m, twins[k][1]) : -1);
  }
  mesh_destroy(m);
}

TEST(entropy_snapshots_of_an_md2_and_a_gltf_with_targets_decode_to_the_bits_of_todays_coding) {
  real_mesh(test_assimp_model("MD2/faerie.md2"));
  real_mesh(test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf"));
}

TEST(entropy_snapshots_of_a_scan_decode_to_the_bits_of_todays_coding) { real_mesh(test_dragon("dragon_vrip_res3.ply")); }

/* Triangle soups: vertices used in any order, some unused (they must come ascending), degenerate
 * triangles (which the index codec may rotate), tiny meshes. */
TEST(entropy_snapshots_of_random_meshes_decode_to_the_bits_of_todays_coding) {
  for (int round = 0; round < 40; round++) {
    mesh *m = mesh_create();
    uint32_t nv = 1 + rnd() % 300, nt = round == 0 ? 0 : 1 + rnd() % 400;
    ASSERT_OK(mesh_alloc(m, nv, nt, 0, (int)(rnd() & 1)), NULL);
    for (uint32_t i = 0; i < 3 * nv; i++) m->positions[i] = (float)(rnd() % 1000) * 0.001f;
    for (uint32_t i = 0; m->uvs && i < 2 * nv; i++) m->uvs[i] = (float)(rnd() % 1000) * 0.002f;
    for (uint32_t i = 0; i < 3 * nt; i++) m->triangles[i] = rnd() % nv;
    float *dense = calloc(3 * (size_t)nv, sizeof(float));
    for (uint32_t i = 0; i < 3 * nv; i++)
      if (rnd() % 3 == 0) dense[i] = (float)(rnd() % 100) * 1e-3f;
    ASSERT_OK(mesh_add_target_dense(m, "t", dense, 0.25f), NULL);
    free(dense);
    mesh_update_bounds(m);
    size_t sizes[2];
    both_codings(m, (uint8_t)(rnd() % 2 ? 0 : 1 + rnd() % PROTO_MAX_SHIFT), sizes);
    mesh_destroy(m);
  }
}

TEST(malformed_entropy_snapshots_are_refused_with_a_proto_code) {
  mesh *m = proto2_test_load("demo");
  float quantum = proto2_test_quantum(m);
  proto_buf tri, b;
  proto_trav t;
  canonical(m, &tri, &t);
  encode(m, quantum, 5, 1, &tri, &t, &b);
  proto_snapshot2 s;
  proto_trav tr;
  /* Cut anywhere: refused (never a crash, never a partial snapshot). */
  for (size_t n = 0; n < b.len; n += 1 + n / 64) {
    int rc = proto_decode_snapshot2(b.data, n, NULL, &s, &tr);
    if (rc == 0) test__fail(__FILE__, __LINE__, "a snapshot cut at %zu of %zu bytes was accepted", n, b.len);
    ASSERT(rc <= PROTO_ETRUNCATED && rc >= PROTO_ENOMEM);
  }
  /* A byte more at the end of the triangles piece's block: the block must end where its length says. */
  uint32_t piece = proto_load_u32(b.data + 48);
  proto_buf grown;
  proto_buf_init(&grown);
  memcpy(proto_buf_append(&grown, 52 + piece), b.data, 52 + piece);
  *proto_buf_append(&grown, 1) = 0x80;
  memcpy(proto_buf_append(&grown, b.len - 52 - piece), b.data + 52 + piece, b.len - 52 - piece);
  proto__st32(grown.data + 48, piece + 1);
  ASSERT_EQ(proto_decode_snapshot2(grown.data, grown.len, NULL, &s, &tr), PROTO_ETRAILING);
  /* Damage every few bytes: a PROTO_E* code or, where the damage only moved a value, a snapshot
   * that still holds together; never a crash (ASan builds check the reads). */
  uint8_t *d = malloc(b.len);
  int refused = 0, tries = 0;
  for (size_t i = 48; i < b.len; i += 1 + i / 32, tries++) {
    memcpy(d, b.data, b.len);
    d[i] ^= (uint8_t)(1u << (rnd() % 8));
    int rc = proto_decode_snapshot2(d, b.len, NULL, &s, &tr);
    if (rc == 0) {
      proto_snapshot2_free(&s);
      proto_trav_fini(&tr);
    } else {
      refused++;
    }
  }
  fprintf(stderr, "%d of %d damaged snapshots refused\n", refused, tries);
  ASSERT(refused > tries / 2);
  /* A head that says entropy in front of today's triangles piece is refused. */
  proto_buf plain;
  encode(m, quantum, 5, 0, &tri, &t, &plain);
  plain.data[16] |= 0x4;
  ASSERT(proto_decode_snapshot2(plain.data, plain.len, NULL, &s, &tr) != 0);
  proto_buf_fini(&plain);
  free(d);
  proto_buf_fini(&grown);
  proto_buf_fini(&b);
  proto_buf_fini(&tri);
  proto_trav_fini(&t);
  mesh_destroy(m);
}

/* An icosphere with 70 targets: 0 = A, 3 = A (A's copy), 4 = C, 5 = C (C's copy), 66 = A again
 * (its first twin in the window, 3, is a copy itself, so it is coded in full), the rest distinct. */
static mesh *copies_mesh(void) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_icosphere(2, 1.0, &m), NULL);
  uint32_t nv = m->vertex_count;
  float *a = malloc(sizeof(float) * 3 * nv), *c = malloc(sizeof(float) * 3 * nv), *x = malloc(sizeof(float) * 3 * nv);
  for (uint32_t i = 0; i < 3 * nv; i++) a[i] = (float)(rnd() % 200) * 1e-3f, c[i] = (float)(rnd() % 200) * 1e-3f;
  for (uint32_t t = 0; t < 70; t++) {
    char name[16];
    snprintf(name, sizeof(name), "t%u", t);
    for (uint32_t i = 0; i < 3 * nv; i++) x[i] = i % 7 == t % 7 ? (float)(rnd() % 200) * 1e-3f : 0.0f;
    const float *d = t == 0 || t == 3 || t == 66 ? a : t == 4 || t == 5 ? c : x;
    ASSERT_OK(mesh_add_target_dense(m, name, d, 0.0f), NULL);
  }
  free(a), free(c), free(x);
  return m;
}

TEST(a_target_the_same_as_an_earlier_one_travels_as_its_copy_and_copies_outside_the_rule_are_refused) {
  mesh *m = copies_mesh();
  for (uint32_t t = 0; t < m->target_count; t++)
    ASSERT_EQ(mesh_target_copy_of(m, t), t == 3 ? 0 : t == 5 ? 4 : -1);
  size_t sizes[2];
  both_codings(m, 5, sizes); /* the same bits as today's coding, copies marked as the rule says */
  float quantum = proto2_test_quantum(m);
  proto_buf tri;
  proto_trav t;
  canonical(m, &tri, &t);
  int64_t copies[70];
  /* {target, the target it names, the decoder's answer}: itself, a later one, a copy, one 65
   * back (outside the window), and 64 back (its edge, accepted). */
  const int64_t cases[][3] = {{3, 3, PROTO_EINVAL}, {3, 4, PROTO_EINVAL}, {66, 3, PROTO_EINVAL},
                              {66, 1, PROTO_EINVAL}, {65, 0, PROTO_EINVAL}, {64, 0, 0}};
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    for (uint32_t i = 0; i < 70; i++) copies[i] = mesh_target_copy_of(m, i);
    copies[cases[k][0]] = cases[k][1];
    proto_buf b;
    encode_copies(m, quantum, 5, 1, &tri, &t, copies, &b);
    proto_snapshot2 s;
    proto_trav tr;
    int rc = proto_decode_snapshot2(b.data, b.len, NULL, &s, &tr);
    ASSERT_EQ(rc, (int)cases[k][2]);
    if (rc == 0) {
      /* Accepted: a copy of what it names, whatever its own data were. */
      ASSERT_EQ(s.targets[64].copy_of, 1u);
      ASSERT_EQ(s.targets[64].count, s.targets[0].count);
      SAME(s.targets[64].deltas, s.targets[0].deltas, 12 * (size_t)s.targets[0].count);
      proto_snapshot2_free(&s);
      proto_trav_fini(&tr);
    }
    proto_buf_fini(&b);
  }
  proto_trav_fini(&t);
  proto_buf_fini(&tri);
  mesh_destroy(m);
}

/* ---- lanes that repeat a neighbour's value (the second model of mode 2 streams) ----------------- */

/* The header byte of m's positions stream on the default grid in the entropy coding (bit 6: the
 * model with copies), after checking that the stream is in mode 2. */
/* The header byte (median, model) of m's positions stream in the entropy coding on shift 5, and
 * in *uv_header its UVs' (-1 where it has none, or they are not in mode 2). */
static int attribute_models(mesh *m, int *uv_header) {
  proto_buf tri, b;
  proto_trav t;
  canonical(m, &tri, &t);
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, 0, m->positions, m->triangles, m->uvs, proto2_test_quantum(m)};
  proto_grid2 g;
  ASSERT_OK(proto_grid2_init(&g, &md, 5), NULL);
  g.entropy = 1;
  proto_buf_init(&b);
  ASSERT_OK(proto_snapshot2_attributes(&b, &md, &g, &t), NULL); /* positions, then UVs */
  ASSERT(b.len > 6);
  ASSERT_EQ(b.data[4], 2); /* mode 2 */
  int header = b.data[5];
  size_t uv = 4 + (size_t)proto_load_u32(b.data);
  *uv_header = m->uvs && b.len > uv + 6 && b.data[uv + 4] == 2 ? b.data[uv + 5] : -1;
  proto_buf_fini(&b);
  proto_buf_fini(&tri);
  proto_trav_fini(&t);
  return header;
}

static int positions_model(mesh *m) {
  int uv;
  return attribute_models(m, &uv);
}

/* A surface extracted from a voxel grid (mesh_demo_voxel_sphere: marching tetrahedra, as the
 * Stanford dragon's dragon_vrip.ply was made by marching cubes) has its vertices on the grid's
 * edges, so most of their lanes repeat a neighbour's value: its positions take the model with
 * copies, and decode to today's bits on every grid (both_codings: the oracle is today's coding).
 * The demo head, a smooth surface with no such lanes, keeps the first model. */
TEST(a_scan_on_a_voxel_grid_sends_lanes_that_repeat_a_neighbours_value_as_copies) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_voxel_sphere(40, &m), NULL);
  ASSERT_OK(mesh_optimize_triangle_order(m), NULL); /* as a session does */
  ASSERT((positions_model(m) & 0x40) != 0);
  for (uint8_t shift = 0; shift <= 9; shift += 3) {
    size_t sizes[2];
    both_codings(m, shift, sizes);
  }
  mesh_destroy(m);
  mesh *head = proto2_test_load("demo");
  ASSERT_EQ(positions_model(head) & 0x40, 0);
  mesh_destroy(head);
}

/* spider.obj's UVs repeat a neighbour's value across its seams and its parts' edges, so its
 * UV stream (two lanes) takes the model with copies too, and decodes to today's bits. */
TEST(uvs_that_repeat_a_neighbours_value_take_the_model_with_copies_in_two_lanes) {
  mesh *m = proto2_test_load(test_assimp_model("OBJ/spider.obj"));
  int uv = -1;
  attribute_models(m, &uv);
  ASSERT(uv >= 0 && (uv & 0x40) != 0);
  mesh_destroy(m);
  real_mesh(test_assimp_model("OBJ/spider.obj"));
}

/* A mode 2 stream of the model with copies whose first lane is a copy, in an entry with no
 * parallelogram prediction (the first vertex of a triangle has no predictors). */
TEST(a_copy_in_an_entry_without_a_parallelogram_prediction_is_refused) {
  uint32_t tri[3] = {0, 1, 2};
  proto_trav t;
  ASSERT_OK(proto_trav_init(&t, tri, 1, 3), NULL);
  for (int model = 0; model < 2; model++) {
    proto_rans_enc e;
    /* Contexts and symbols of the model with copies: lane 0 in context class(0, 0) = 2. */
    ASSERT_OK(proto__rans_enc_init(&e, 56, PROTO_RANS_VALUE_SYMBOLS + 3), NULL);
    proto__rans_enc_sym(&e, 2, PROTO_RANS_VALUE_SYMBOLS);
    proto_buf block, s;
    proto_buf_init(&block);
    ASSERT_OK(proto__rans_enc_finish(&e, &block), NULL);
    proto__rans_enc_fini(&e);
    proto_buf_init(&s);
    proto__put_u32(&s, (uint32_t)(2 + block.len));
    proto__put_u8(&s, 2);                  /* mode 2 */
    proto__put_u8(&s, model ? 0x40 : 0); /* median 0 */
    memcpy(proto_buf_append(&s, block.len), block.data, block.len);
    uint32_t val[9];
    proto_cur c = {s.data, s.data + s.len};
    /* The first model has no copy symbols: its 66-symbol tables refuse the block. */
    ASSERT_EQ(proto__stream_get(&c, &t, NULL, 3, 3, val), PROTO_EINVAL);
    proto_buf_fini(&s);
    proto_buf_fini(&block);
  }
  proto_trav_fini(&t);
}

/* A position whose grid integer is past 2^24 − 1 (the most a float holds exactly), or below 0,
 * cannot come from the grid the head states: the SNAPSHOT is refused with PROTO_EINVAL in both
 * codings, wherever the vertex sits in the stream. The same mesh on its own grid decodes, each
 * position within half a step of the mesh's (the oracle: the mesh itself). */
TEST(a_position_off_its_grid_is_refused_in_both_codings) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_voxel_sphere(12, &m), NULL);
  ASSERT_OK(mesh_optimize_triangle_order(m), NULL);
  proto_buf tri;
  proto_trav t;
  canonical(m, &tri, &t);
  uint32_t nv = m->vertex_count, at[3] = {0, nv / 2, nv - 1};
  proto_mesh_desc md = {nv, m->triangle_count, 0, m->positions, m->triangles, NULL, proto2_test_quantum(m)};
  proto_grid2 g;
  ASSERT_OK(proto_grid2_init(&g, &md, 6), NULL);
  float *moved = malloc(sizeof(float) * 3 * nv);
  for (int e = 0; e < 2; e++) {
    g.entropy = (uint8_t)e;
    for (int k = -1; k < 6; k++) { /* k = -1: on the grid; else vertex at[k / 2], over or under */
      memcpy(moved, m->positions, sizeof(float) * 3 * nv);
      if (k >= 0) moved[3 * at[k / 2] + 1] = g.origin[1] + (k & 1 ? -3.0f : 33554432.0f) * g.step; /* 2^25 steps */
      proto_mesh_desc mv = md;
      mv.positions = moved;
      proto_buf b;
      proto_buf_init(&b);
      ASSERT_OK(proto_snapshot2_head(&b, &md, &g), NULL);
      if (e) ASSERT_OK(proto_snapshot2_triangles_entropy(&b, m->triangles, m->triangle_count, &t), NULL);
      else memcpy(proto_buf_append(&b, tri.len), tri.data, tri.len);
      ASSERT_OK(proto_snapshot2_attributes(&b, &mv, &g, &t), NULL);
      ASSERT_OK(proto_snapshot2_state(&b, 0, NULL, 0, NULL, NULL, 6, &t), NULL);
      proto_snapshot2 s;
      proto_trav tr;
      int rc = proto_decode_snapshot2(b.data, b.len, NULL, &s, &tr);
      if (k >= 0) {
        if (rc != PROTO_EINVAL) test__fail(__FILE__, __LINE__, "coding %d, case %d: %d, not PROTO_EINVAL", e, k, rc);
      } else {
        ASSERT_OK(rc, e ? "entropy" : "plain");
        for (size_t i = 0; i < 3 * (size_t)nv; i++)
          if (!(fabsf(s.positions[i] - m->positions[i]) <= 0.5f * g.step * 1.0001f))
            test__fail(__FILE__, __LINE__, "coding %d: lane %zu off by %g (step %g)", e, i,
                       (double)(s.positions[i] - m->positions[i]), (double)g.step);
        proto_snapshot2_free(&s);
        proto_trav_fini(&tr);
      }
      proto_buf_fini(&b);
    }
  }
  free(moved);
  proto_buf_fini(&tri);
  proto_trav_fini(&t);
  mesh_destroy(m);
}

/* proto__sort_keys (targets' and DELTAs' lists by vertex or rank) against qsort on (key, at):
 * the same order, stable, for limits that take no pass, one, two and three, with keys drawn
 * near the limit and ties. */
static int cmp_key_at(const void *x, const void *y) {
  const proto_key_at *a = x, *b = y;
  return a->key != b->key ? (a->key > b->key) - (a->key < b->key) : (a->at > b->at) - (a->at < b->at);
}

TEST(the_lists_radix_sort_orders_keys_as_qsort_does_and_keeps_ties_in_order) {
  uint32_t limits[] = {1, 2, 2047, 2048, 2049, 1u << 22, (1u << 22) + 1, 1u << 31, UINT32_MAX};
  uint64_t r = 88172645463325252ull;
  for (size_t li = 0; li < sizeof(limits) / sizeof(limits[0]); li++) {
    for (size_t k = 0; k <= 3000; k += 1 + k) {
      proto_key_at *p = malloc(sizeof(*p) * (2 * k + 1)), *want = malloc(sizeof(*p) * (k + 1));
      for (size_t i = 0; i < k; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        uint32_t key = (uint32_t)(r >> 32) % limits[li];
        if (i % 5 == 4) key = limits[li] - 1 - (key & 3) % limits[li]; /* the top of the range */
        if (i % 7 == 6) key = p[i / 2].key;                            /* a tie */
        p[i] = want[i] = (proto_key_at){key, (uint32_t)i};
      }
      qsort(want, k, sizeof(*want), cmp_key_at);
      proto__sort_keys(p, p + k, k, limits[li]);
      for (size_t i = 0; i < k; i++)
        if (p[i].key != want[i].key || p[i].at != want[i].at)
          test__fail(__FILE__, __LINE__, "limit %u, %zu keys: entry %zu is (%u, %u), not (%u, %u)", limits[li], k, i,
                     p[i].key, p[i].at, want[i].key, want[i].at);
      free(p);
      free(want);
    }
  }
}

/* ---- the decoder's bound on target entries ------------------------------------------------------ */

/* A rANS stream can code thousands of values a byte, so a SNAPSHOT's targets are bounded by
 * proto_limits.max_target_entries (all of them together, copies counted), not by its size: the
 * join of the mesh with copies decodes with the limit at exactly its entries (the sum of its
 * targets' counts, from the mesh) and is PROTO_ETOOBIG one entry under it, in both codings. */
TEST(a_snapshot_whose_targets_hold_more_entries_than_the_limit_is_refused_as_too_big) {
  mesh *m = copies_mesh();
  uint64_t total = 0;
  for (uint32_t i = 0; i < m->target_count; i++) total += m->targets[i].count;
  ASSERT(total < UINT32_MAX);
  proto_buf tri;
  proto_trav t;
  canonical(m, &tri, &t);
  for (int e = 0; e < 2; e++) {
    proto_buf b;
    encode(m, proto2_test_quantum(m), 5, e, &tri, &t, &b);
    for (int under = 0; under < 2; under++) {
      proto_limits l = {0};
      l.max_target_entries = (uint32_t)total - (uint32_t)under;
      proto_snapshot2 s;
      proto_trav tr;
      int rc = proto_decode_snapshot2(b.data, b.len, &l, &s, &tr);
      ASSERT_EQ(rc, under ? PROTO_ETOOBIG : 0);
      if (rc == 0) {
        ASSERT_EQ(s.target_count, m->target_count);
        proto_snapshot2_free(&s);
        proto_trav_fini(&tr);
      }
    }
    proto_buf_fini(&b);
  }
  proto_buf_fini(&tri);
  proto_trav_fini(&t);
  mesh_destroy(m);
}
