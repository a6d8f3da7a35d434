/*
 * test_proto2.c — version 2 of the wire format (protocol/proto2.h): round trips of every
 * compact body on random and real meshes (the demo head, an MD2, a glTF with targets, a
 * scan), each lossy field against the bound docs/protocol.md §12 states, exact with lossless;
 * HELLO/WELCOME options; and malformed bodies refused with a PROTO_E* code, never a crash.
 *
 * The oracle is the input itself: what went in, and the bound written out from the grid the
 * head declares (half a step plus the float rounding of the rebuilding formula).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "proto2.h"
#include "proto2_mesh.h"
#include "test.h"

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}
static double rnd01(void) { return (rnd() & 0xffffff) / 16777216.0; }

static const uint8_t *one_frame(const proto_buf *b, proto_header *h, proto_type type) {
  ASSERT(!b->failed);
  ASSERT(b->len >= PROTO_HEADER_SIZE);
  ASSERT_OK(proto_header_decode(b->data, NULL, h), NULL);
  ASSERT_EQ(h->type, type);
  ASSERT_EQ(h->version, PROTO_VERSION_2);
  ASSERT_EQ(h->length, b->len - PROTO_HEADER_SIZE);
  return b->data + PROTO_HEADER_SIZE;
}

/* A session-like state: random weights, random non-zero offsets on about a tenth of the mesh. */
typedef struct state {
  float *weights;
  uint32_t count;
  uint32_t *idx;
  int32_t *q;
} state;

static void make_state(const mesh *m, state *st) {
  st->weights = malloc(sizeof(float) * (m->target_count + 1));
  for (uint32_t t = 0; t < m->target_count; t++) st->weights[t] = (float)(rnd01() * 2 - 0.5);
  st->idx = malloc(sizeof(uint32_t) * (m->vertex_count + 1));
  st->q = malloc(sizeof(int32_t) * 3 * (m->vertex_count + 1));
  st->count = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    if (rnd() % 10) continue;
    st->idx[st->count] = v;
    for (int c = 0; c < 3; c++) st->q[3 * st->count + c] = (int32_t)(rnd() % 200001) - 100000;
    st->count++;
  }
}

static void free_state(state *st) {
  free(st->weights);
  free(st->idx);
  free(st->q);
}

static proto_target_desc target_desc(const mesh *m, uint32_t t) {
  const mesh_target *mt = &m->targets[t];
  proto_target_desc d = {mt->name, mt->default_weight, 0.0f, 1.0f, 0, 0, NULL, mt->count, mt->indices, mt->deltas};
  return d;
}

/* The mesh's triangles replaced by their canonical rotation (what a decoder reads), as the
 * server adopts them; `tri_piece` gets the encoded triangles; `t` the traversal of them. Each
 * triangle keeps its corners in cyclic order (checked here against a copy of the input). */
static void adopt_triangles(mesh *m, proto_buf *tri_piece, proto_trav *t) {
  size_t ni = 3 * (size_t)m->triangle_count;
  uint32_t *before = malloc(4 * ni + 4);
  memcpy(before, m->triangles, 4 * ni);
  proto_buf_init(tri_piece);
  ASSERT_OK(proto_snapshot2_triangles(tri_piece, m->triangles, m->triangle_count, m->vertex_count, m->triangles), NULL);
  for (size_t i = 0; i < ni; i += 3) {
    const uint32_t *a = before + i, *b = m->triangles + i;
    int same = 0;
    for (int r = 0; r < 3; r++) same |= a[0] == b[r] && a[1] == b[(r + 1) % 3] && a[2] == b[(r + 2) % 3];
    if (!same) test__fail(__FILE__, __LINE__, "triangle %zu (%u %u %u) came back as (%u %u %u)", i / 3, a[0], a[1], a[2], b[0], b[1], b[2]);
  }
  free(before);
  ASSERT_OK(proto_trav_init(t, m->triangles, m->triangle_count, m->vertex_count), NULL);
}

/* A whole SNAPSHOT v2 frame, built in the pieces the server keeps. */
static void encode_snapshot(const mesh *m, float quantum, uint8_t shift, const state *st, const proto_buf *tri_piece,
                            proto_trav *t, proto_buf *out) {
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, m->target_count, m->positions,
                        m->triangles,   m->uvs,            quantum};
  proto_grid2 g;
  ASSERT_OK(proto_grid2_init(&g, &md, shift), NULL);
  proto_buf mesh_part, state_part;
  proto_buf_init(&mesh_part);
  proto_buf_init(&state_part);
  ASSERT_OK(proto_snapshot2_head(&mesh_part, &md, &g), NULL);
  ASSERT_EQ(mesh_part.len, 48);
  memcpy(proto_buf_append(&mesh_part, tri_piece->len), tri_piece->data, tri_piece->len);
  ASSERT_OK(proto_snapshot2_attributes(&mesh_part, &md, &g, t), NULL);
  for (uint32_t i = 0; i < m->target_count; i++) {
    proto_target_desc d = target_desc(m, i);
    ASSERT_OK(proto_snapshot2_target(&mesh_part, &d, &g, t), NULL);
  }
  ASSERT_OK(proto_snapshot2_state(&state_part, m->target_count, st->weights, st->count, st->idx, st->q, shift, t),
            NULL);
  proto_buf_init(out);
  ASSERT_OK(proto_encode_snapshot2_head(out, 9, mesh_part.len, state_part.len), NULL);
  memcpy(proto_buf_append(out, mesh_part.len), mesh_part.data, mesh_part.len);
  memcpy(proto_buf_append(out, state_part.len), state_part.data, state_part.len);
  proto_buf_fini(&mesh_part);
  proto_buf_fini(&state_part);
}

static double ulp_bound(double a, double b, double c) { return ldexp(fabs(a) + fabs(b) + fabs(c), -23); }

/* Decodes `b` and checks every field against `m` and `st`: exact at shift 0, within the
 * documented bound otherwise. Returns the payload size. */
static size_t check_snapshot(const mesh *m, float quantum, uint8_t shift, const state *st, const proto_buf *b) {
  proto_header h;
  const uint8_t *p = one_frame(b, &h, PROTO_SNAPSHOT);
  proto_snapshot2 s;
  proto_trav t;
  ASSERT_OK(proto_decode_snapshot2(p, h.length, NULL, &s, &t), NULL);
  ASSERT_EQ(s.vertex_count, m->vertex_count);
  ASSERT_EQ(s.triangle_count, m->triangle_count);
  ASSERT_EQ(s.target_count, m->target_count);
  ASSERT(s.offset_quantum == quantum);
  ASSERT_EQ(s.grid.shift, shift);
  ASSERT(memcmp(s.triangles, m->triangles, 12 * (size_t)m->triangle_count) == 0); /* triangles: always exact */
  double worst = 0, step = s.grid.step;
  for (size_t i = 0; i < 3 * (size_t)m->vertex_count; i++) {
    double x = m->positions[i], y = s.positions[i], o = s.grid.origin[i % 3];
    if (shift == 0) ASSERT(memcmp(&m->positions[i], &s.positions[i], 4) == 0);
    else ASSERT_NEAR(y, x, step / 2 + ulp_bound(x, x - o, step));
    if (fabs(y - x) > worst) worst = fabs(y - x);
  }
  ASSERT((s.uvs != NULL) == (m->uvs != NULL));
  for (size_t i = 0; m->uvs && i < 2 * (size_t)m->vertex_count; i++) {
    double u = m->uvs[i], w = s.uvs[i], us = s.grid.uv_step[i % 2], uo = s.grid.uv_origin[i % 2];
    if (shift == 0) ASSERT(memcmp(&m->uvs[i], &s.uvs[i], 4) == 0);
    else ASSERT_NEAR(w, u, us / 2 + ulp_bound(u, u - uo, us));
  }
  for (uint32_t i = 0; i < m->target_count; i++) {
    const mesh_target *a = &m->targets[i];
    const proto_target2 *d = &s.targets[i];
    ASSERT(d->name.len == strlen(a->name) && memcmp(d->name.ptr, a->name, d->name.len) == 0);
    ASSERT_EQ(d->count, a->count);
    ASSERT(memcmp(d->indices, a->indices, 4 * (size_t)a->count) == 0);
    for (size_t k = 0; k < 3 * (size_t)a->count; k++) {
      if (shift == 0) ASSERT(memcmp(&a->deltas[k], &d->deltas[k], 4) == 0);
      else ASSERT_NEAR(d->deltas[k], a->deltas[k], step / 2 + ulp_bound(a->deltas[k], 0, 0));
    }
    ASSERT(memcmp(s.weights + i, st->weights + i, 4) == 0); /* weights travel exactly */
  }
  /* Offsets: every listed one within 2^(shift-1) quanta; those the grid rounds to 0 left out. */
  int32_t *full = calloc(3 * (size_t)m->vertex_count + 1, sizeof(int32_t));
  uint8_t *seen = calloc(m->vertex_count + 1, 1);
  for (uint32_t k = 0; k < s.offsets.count; k++) {
    ASSERT(s.offsets.indices[k] < m->vertex_count && !seen[s.offsets.indices[k]]);
    seen[s.offsets.indices[k]] = 1;
    memcpy(full + 3 * (size_t)s.offsets.indices[k], s.offsets.q + 3 * (size_t)k, 12);
  }
  int32_t half = shift ? 1 << (shift - 1) : 0;
  uint32_t nonzero = 0;
  for (uint32_t k = 0; k < st->count; k++) {
    const int32_t *want = st->q + 3 * (size_t)k, *got = full + 3 * (size_t)st->idx[k];
    int big = 0;
    for (int c = 0; c < 3; c++) {
      ASSERT_NEAR(got[c], want[c], half);
      big |= abs(want[c]) > half;
      if (got[c] % (1 << shift)) test__fail(__FILE__, __LINE__, "offset %d is not on the grid", got[c]);
    }
    nonzero += big;
  }
  ASSERT(s.offsets.count >= nonzero && s.offsets.count <= st->count);
  fprintf(stderr, "  shift %u: %zu bytes (V %u, T %u, %u targets), worst position error %.3g (step %.3g)\n", shift,
          b->len, m->vertex_count, m->triangle_count, m->target_count, worst, step);
  free(full);
  free(seen);
  proto_snapshot2_free(&s);
  proto_trav_fini(&t);
  return h.length;
}

static void round_trip_mesh(const char *what) {
  mesh *m = proto2_test_load(what);
  float quantum = proto2_test_quantum(m);
  state st;
  make_state(m, &st);
  proto_trav t;
  proto_buf tri;
  adopt_triangles(m, &tri, &t);
  fprintf(stderr, "%s:\n", what);
  size_t sizes[3];
  uint8_t shifts[3] = {0, 5, 9};
  for (int i = 0; i < 3; i++) {
    proto_buf b;
    encode_snapshot(m, quantum, shifts[i], &st, &tri, &t, &b);
    sizes[i] = check_snapshot(m, quantum, shifts[i], &st, &b);
    proto_buf_fini(&b);
  }
  ASSERT(sizes[2] < sizes[1] && sizes[1] < sizes[0]); /* a coarser grid costs fewer bytes */
  proto_buf_fini(&tri);
  proto_trav_fini(&t);
  free_state(&st);
  mesh_destroy(m);
}

TEST(traversal_ranks_every_vertex_once_and_predicts_from_earlier_ranks) {
  mesh *m = proto2_test_load("demo");
  proto_trav t;
  ASSERT_OK(proto_trav_init(&t, m->triangles, m->triangle_count, m->vertex_count), NULL);
  uint8_t *seen = calloc(m->vertex_count, 1);
  uint32_t parallelograms = 0;
  for (uint32_t r = 0; r < m->vertex_count; r++) {
    uint32_t v = t.order[r];
    ASSERT(v < m->vertex_count && !seen[v]);
    seen[v] = 1;
    ASSERT_EQ(t.rank[v], r);
    const uint32_t *p = t.pred + 3 * (size_t)r; /* the predictors' ranks */
    if (r == 0) {
      ASSERT(p[0] == PROTO_NO_VERTEX);
      continue;
    }
    for (int k = 0; k < 3; k++) ASSERT(p[k] < r);
    ASSERT_EQ(t.para[r], p[0] != p[1] && p[2] != p[0]);
    parallelograms += p[0] != p[2] && p[1] != p[2];
  }
  /* On a closed surface in cache order, nearly every vertex finds the triangle across an edge. */
  fprintf(stderr, "%u of %u vertices predicted by a parallelogram\n", parallelograms, m->vertex_count);
  ASSERT(parallelograms > m->vertex_count * 99 / 100);
  /* An index out of range is refused. */
  proto_trav bad;
  uint32_t tri[3] = {0, 1, 7};
  ASSERT_EQ(proto_trav_init(&bad, tri, 1, 7), PROTO_EINVAL);
  free(seen);
  proto_trav_fini(&t);
  mesh_destroy(m);
}

TEST(lossless_and_quantised_snapshots_of_the_demo_head_round_trip_within_their_bounds) { round_trip_mesh("demo"); }

TEST(lossless_and_quantised_snapshots_of_an_md2_round_trip_within_their_bounds) {
  round_trip_mesh(test_assimp_model("MD2/faerie.md2"));
}

TEST(lossless_and_quantised_snapshots_of_a_gltf_with_targets_round_trip_within_their_bounds) {
  round_trip_mesh(test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf"));
}

TEST(lossless_and_quantised_snapshots_of_a_scan_round_trip_within_their_bounds) {
  round_trip_mesh(test_dragon("dragon_vrip_res3.ply"));
}

/* Random triangle soups (vertices used in any order, some unused, degenerate triangles) with
 * random positions, UVs and sparse targets far off the grid. */
TEST(snapshots_of_random_meshes_round_trip_within_their_bounds) {
  for (int round = 0; round < 20; round++) {
    mesh *m = mesh_create();
    uint32_t nv = 1 + rnd() % 300, nt = 1 + rnd() % 400;
    ASSERT_OK(mesh_alloc(m, nv, nt, 0, (int)(rnd() & 1)), NULL);
    double scale = ldexp(1.0, (int)(rnd() % 20) - 10);
    for (uint32_t i = 0; i < 3 * nv; i++) m->positions[i] = (float)((rnd01() - 0.3) * scale);
    for (uint32_t i = 0; m->uvs && i < 2 * nv; i++) m->uvs[i] = (float)(rnd01() * 3 - 1);
    for (uint32_t i = 0; i < 3 * nt; i++) m->triangles[i] = rnd() % nv;
    for (int k = 0; k < 3; k++) {
      float *dense = calloc(3 * (size_t)nv, sizeof(float));
      for (uint32_t i = 0; i < 3 * nv; i++)
        if (rnd() % 3 == 0) dense[i] = (float)((rnd01() - 0.5) * scale * (k == 2 ? 1e9 : 0.1));
      char name[16];
      snprintf(name, sizeof(name), "t%d", k);
      ASSERT_OK(mesh_add_target_dense(m, name, dense, 0.25f), NULL);
      free(dense);
    }
    mesh_update_bounds(m);
    float quantum = proto2_test_quantum(m);
    state st;
    make_state(m, &st);
    proto_trav t;
    proto_buf tri;
    adopt_triangles(m, &tri, &t);
    uint8_t shifts[3] = {0, 4, (uint8_t)(1 + rnd() % PROTO_MAX_SHIFT)};
    for (int i = 0; i < 3; i++) {
      proto_buf b;
      encode_snapshot(m, quantum, shifts[i], &st, &tri, &t, &b);
      check_snapshot(m, quantum, shifts[i], &st, &b);
      proto_buf_fini(&b);
    }
    proto_buf_fini(&tri);
    proto_trav_fini(&t);
    free_state(&st);
    mesh_destroy(m);
  }
}

TEST(value_streams_round_trip_in_both_codings_for_every_vertex_and_for_subsets) {
  mesh *m = proto2_test_load("demo");
  proto_trav t;
  ASSERT_OK(proto_trav_init(&t, m->triangles, m->triangle_count, m->vertex_count), NULL);
  uint32_t nv = m->vertex_count;
  int32_t *q = malloc(sizeof(int32_t) * 3 * nv);
  uint32_t *idx = malloc(sizeof(uint32_t) * nv);
  int modes[2] = {0, 0};
  for (int round = 0; round < 40; round++) {
    /* Small sets favour varints, large smooth ones meshoptimizer: both must come out. */
    uint32_t n = round % 2 ? 1 + rnd() % 8 : 1000 + rnd() % (nv - 1000);
    uint32_t start = rnd() % (nv - n + 1);
    for (uint32_t i = 0; i < n; i++) {
      idx[i] = (start + i * 7u) % nv; /* distinct: 7 is prime to the count */
      for (int c = 0; c < 3; c++)
        q[3 * i + c] = round % 4 == 2 ? (int32_t)(rnd() % 2000001) - 1000000
                                      : (int32_t)(1000 * sin(m->positions[3 * idx[i] + c] * 40));
    }
    if (n > 1 && nv % 7 == 0) continue;
    uint8_t shift = (uint8_t)(round % 7);
    proto_buf b;
    proto_buf_init(&b);
    ASSERT_OK(proto_encode_delta2(&b, 5, PROTO_FLAG_CATCHUP, shift, n, idx, q, &t), NULL);
    proto_header h;
    const uint8_t *p = one_frame(&b, &h, PROTO_DELTA);
    ASSERT_EQ(h.flags, PROTO_FLAG_CATCHUP);
    /* The stream's mode byte follows the rank list. */
    uint32_t rl = p[5] | p[6] << 8 | p[7] << 16 | (uint32_t)p[8] << 24;
    modes[p[9 + rl + 4]]++;
    proto_offsets2 o;
    ASSERT_OK(proto_decode_delta2(p, h.length, &t, &o), NULL);
    ASSERT_EQ(o.count, n);
    ASSERT_EQ(o.shift, shift);
    for (uint32_t k = 0; k < n; k++) { /* decoded in rank order: find each entry */
      uint32_t i = 0;
      while (idx[i] != o.indices[k]) i++;
      if (k) ASSERT(t.rank[o.indices[k]] > t.rank[o.indices[k - 1]]);
      for (int c = 0; c < 3; c++) {
        if (shift == 0) ASSERT_EQ(o.q[3 * k + c], q[3 * i + c]);
        else ASSERT_NEAR(o.q[3 * k + c], q[3 * i + c], 1 << (shift - 1));
      }
    }
    proto_offsets2_free(&o);
    proto_buf_fini(&b);
  }
  ASSERT(modes[0] > 0 && modes[1] > 0);
  /* A repeated vertex is refused by the encoder. */
  proto_buf b;
  proto_buf_init(&b);
  uint32_t twice[2] = {5, 5};
  int32_t zq[6] = {0};
  ASSERT_EQ(proto_encode_delta2(&b, 1, 0, 0, 2, twice, zq, &t), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0);
  proto_buf_fini(&b);
  free(q);
  free(idx);
  proto_trav_fini(&t);
  mesh_destroy(m);
}

TEST(target_frames_round_trip_quantised_and_as_float_bits) {
  mesh *m = proto2_test_load("demo");
  proto_trav t;
  ASSERT_OK(proto_trav_init(&t, m->triangles, m->triangle_count, m->vertex_count), NULL);
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, 0, m->positions, m->triangles, m->uvs, proto2_test_quantum(m)};
  for (uint8_t shift = 0; shift <= 6; shift += 6) {
    proto_grid2 g;
    ASSERT_OK(proto_grid2_init(&g, &md, shift), NULL);
    proto_target_desc d = target_desc(m, 3);
    uint32_t drivers[1] = {2};
    d.driver_count = 1;
    d.drivers = drivers;
    d.min = -1;
    proto_buf b;
    proto_buf_init(&b);
    ASSERT_OK(proto_encode_target_add2(&b, 12, PROTO_FLAG_MORE, 16, 0.75f, &d, &g, &t), NULL);
    proto_header h;
    const uint8_t *p = one_frame(&b, &h, PROTO_TARGET);
    ASSERT_EQ(h.flags, PROTO_FLAG_MORE);
    uint32_t index;
    float w;
    proto_target2 tg;
    ASSERT_OK(proto_decode_target_add2(p, h.length, &t, &index, &w, &tg), NULL);
    ASSERT_EQ(index, 16);
    ASSERT(w == 0.75f && tg.min == -1 && tg.max == 1 && tg.driver_count == 1 && proto_driver(tg.drivers, 0) == 2);
    ASSERT_EQ(tg.count, d.count);
    ASSERT(memcmp(tg.indices, d.indices, 4 * (size_t)d.count) == 0);
    for (size_t k = 0; k < 3 * (size_t)d.count; k++)
      ASSERT_NEAR(tg.deltas[k], d.deltas[k], shift ? g.step / 2 + ulp_bound(d.deltas[k], 0, 0) : 0);
    proto_target2_free(&tg);
    /* A driver that is not below the new target's index is refused (as in version 1). */
    drivers[0] = 16;
    b.len = 0;
    ASSERT_OK(proto_encode_target_add2(&b, 12, 0, 16, 0.75f, &d, &g, &t), NULL);
    p = one_frame(&b, &h, PROTO_TARGET);
    ASSERT_EQ(proto_decode_target_add2(p, h.length, &t, &index, &w, &tg), PROTO_EINVAL);
    proto_buf_fini(&b);
  }
  proto_trav_fini(&t);
  mesh_destroy(m);
}

TEST(hello_and_welcome_version_2_carry_their_options_and_skip_unknown_ones) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hi = {PROTO_VERSION_2, PROTO_ROLE_VIEWER, {"demo", 4}, {"", 0}};
  proto_hello_opts ho = {.codec = PROTO_CODEC_LOSSLESS, .max_rate = 10.0f, .tolerance = 0.001f}, d2;
  ASSERT_OK(proto_encode_hello2(&b, &hi, &ho), NULL);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_HELLO);
  proto_hello d;
  ASSERT_OK(proto_decode_hello2(p, h.length, &d, &d2), NULL);
  ASSERT(d.protocol_version == 2 && d2.codec == PROTO_CODEC_LOSSLESS && d2.max_rate == 10.0f && d2.tolerance == 0.001f);
  ASSERT(d.session.len == 4 && memcmp(d.session.ptr, "demo", 4) == 0);
  /* An option this build does not know (tag 99) is skipped. */
  uint8_t buf[256];
  size_t n = h.length;
  memcpy(buf, p, n);
  size_t opt_at = 2 + 1 + 1 + 2 + 4 + 2; /* version, role, reserved, "demo", empty token */
  uint16_t olen = (uint16_t)(buf[opt_at] | buf[opt_at + 1] << 8);
  uint8_t extra[8] = {99, 5, 0, 'a', 'l', 'i', 'c', 'e'};
  memcpy(buf + n, extra, sizeof(extra));
  n += sizeof(extra);
  buf[opt_at] = (uint8_t)(olen + sizeof(extra));
  ASSERT_OK(proto_decode_hello2(buf, n, &d, &d2), NULL);
  ASSERT(d2.max_rate == 10.0f);
  /* A known tag twice, or with the wrong length, is refused. */
  uint8_t dup[7] = {PROTO_OPT_CODEC, 1, 0, 1};
  memcpy(buf + h.length, dup, 4);
  buf[opt_at] = (uint8_t)(olen + 4);
  ASSERT_EQ(proto_decode_hello(buf, h.length + 4, &d), PROTO_EINVAL);
  buf[opt_at] = (uint8_t)olen;
  buf[opt_at + 2 + 1] = 2; /* the codec option says it has 2 bytes */
  ASSERT(proto_decode_hello(buf, h.length, &d) != 0);
  /* The author option (tag 5): carried exactly; empty-on-the-wire, a zero byte, too long or
   * twice is refused; a version 1 HELLO has no options. */
  ho.author = (proto_str){"ana", 3};
  b.len = 0;
  ASSERT_OK(proto_encode_hello2(&b, &hi, &ho), NULL);
  p = one_frame(&b, &h, PROTO_HELLO);
  ASSERT_OK(proto_decode_hello2(p, h.length, &d, &d2), NULL);
  ASSERT(d2.author.len == 3 && memcmp(d2.author.ptr, "ana", 3) == 0 && d2.codec == PROTO_CODEC_LOSSLESS);
  static const uint8_t author_tlv[6] = {PROTO_OPT_AUTHOR, 3, 0, 'a', 'n', 'a'};
  ASSERT(memcmp(p + h.length - sizeof(author_tlv), author_tlv, sizeof(author_tlv)) == 0);
  memcpy(buf, p, h.length);
  olen = (uint16_t)(buf[opt_at] | buf[opt_at + 1] << 8);
  buf[h.length - 2] = 0; /* "a\0a" */
  ASSERT_EQ(proto_decode_hello(buf, h.length, &d), PROTO_EINVAL);
  buf[h.length - 2] = 'n';
  static const uint8_t empty_author[3] = {PROTO_OPT_AUTHOR, 0, 0};
  memcpy(buf + h.length, empty_author, 3);
  buf[opt_at] = (uint8_t)(olen + 3);
  ASSERT_EQ(proto_decode_hello(buf, h.length + 3, &d), PROTO_EINVAL);
  memcpy(buf + h.length, author_tlv, sizeof(author_tlv));
  buf[opt_at] = (uint8_t)(olen + sizeof(author_tlv));
  ASSERT_EQ(proto_decode_hello(buf, h.length + sizeof(author_tlv), &d), PROTO_EINVAL);
  char long_name[PROTO_MAX_AUTHOR + 2];
  memset(long_name, 'x', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = 0;
  ho.author = (proto_str){long_name, PROTO_MAX_AUTHOR + 1};
  b.len = 0;
  ASSERT_EQ(proto_encode_hello2(&b, &hi, &ho), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0);
  ho.author = (proto_str){long_name, PROTO_MAX_AUTHOR};
  ASSERT_OK(proto_encode_hello2(&b, &hi, &ho), NULL);
  ho.author = (proto_str){0};
  /* A non-finite or negative rate is refused by both sides. */
  ho.max_rate = NAN;
  b.len = 0;
  ASSERT_EQ(proto_encode_hello2(&b, &hi, &ho), PROTO_EINVAL);
  ASSERT_EQ(b.len, 0);
  /* A version this build does not know is named as such. */
  uint8_t v9[8] = {9, 0, 1, 0, 0, 0, 0, 0};
  ASSERT_EQ(proto_decode_hello(v9, sizeof(v9), &d), PROTO_EVERSION);
  ASSERT_EQ(d.protocol_version, 9);
  /* WELCOME v2 reports what was granted; a version 1 WELCOME decodes as version 1. */
  b.len = 0;
  proto_welcome w = {7, PROTO_ROLE_EDITOR, {"demo", 4}};
  proto_welcome_opts wo = {PROTO_VERSION_2, PROTO_CODEC_QUANTISED, 5, 10.0f, 6.25e-6f, 0, 0, 0}, wdo;
  ASSERT_OK(proto_encode_welcome2(&b, 3, &w, &wo), NULL);
  p = one_frame(&b, &h, PROTO_WELCOME);
  proto_welcome wd;
  ASSERT_OK(proto_decode_welcome2(p, h.length, &wd, &wdo), NULL);
  ASSERT(wdo.protocol_version == 2 && wd.client_id == 7 && wdo.shift == 5 && wdo.max_rate == 10.0f &&
         wdo.tolerance == 6.25e-6f && wdo.codec == PROTO_CODEC_QUANTISED);
  b.len = 0;
  ASSERT_OK(proto_encode_welcome(&b, 3, &w), NULL);
  ASSERT_OK(proto_header_decode(b.data, NULL, &h), NULL);
  ASSERT_EQ(h.version, 1);
  ASSERT_OK(proto_decode_welcome2(b.data + PROTO_HEADER_SIZE, h.length, &wd, &wdo), NULL);
  ASSERT_EQ(wdo.protocol_version, 1);
  proto_buf_fini(&b);
}

/* ---- malformed bodies ---------------------------------------------------------------------- */

/* A small but complete quantised snapshot (UVs, two targets, offsets) to break. */
static void small_snapshot(proto_buf *out, mesh **mm) {
  mesh *m = proto2_test_load(test_assimp_model("MD2/faerie.md2"));
  float dense[3 * 4000] = {0};
  for (uint32_t i = 0; i < 3 * m->vertex_count && i < 3 * 4000; i += 7) dense[i] = 0.01f * (float)(i % 13);
  ASSERT_OK(mesh_add_target_dense(m, "a", dense, 0), NULL);
  state st;
  make_state(m, &st);
  proto_trav t;
  proto_buf tri;
  adopt_triangles(m, &tri, &t);
  encode_snapshot(m, proto2_test_quantum(m), 5, &st, &tri, &t, out);
  proto_buf_fini(&tri);
  proto_trav_fini(&t);
  free_state(&st);
  *mm = m;
}

static int decode_snapshot_bytes(const uint8_t *p, size_t n) {
  proto_snapshot2 s;
  proto_trav t;
  int rc = proto_decode_snapshot2(p, n, NULL, &s, &t);
  if (rc == 0) {
    proto_snapshot2_free(&s);
    proto_trav_fini(&t);
  }
  return rc;
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void putf(uint8_t *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put32(p, u);
}

TEST(malformed_version_2_snapshots_are_refused_with_a_proto_code) {
  proto_buf b;
  mesh *m;
  small_snapshot(&b, &m);
  const uint8_t *p = b.data + PROTO_HEADER_SIZE;
  size_t n = b.len - PROTO_HEADER_SIZE;
  ASSERT_OK(decode_snapshot_bytes(p, n), NULL);
  uint8_t *c = malloc(n);
  /* Every cut: truncated heads, meshopt streams, rank lists, weights. */
  for (size_t cut = 0; cut < n; cut += 1 + cut / 64) {
    int rc = decode_snapshot_bytes(p, cut);
    if (rc != PROTO_ETRUNCATED && rc != PROTO_EINVAL && rc != PROTO_ETRAILING && rc != PROTO_ENONFINITE)
      test__fail(__FILE__, __LINE__, "cut at %zu: %d", cut, rc);
  }
  /* Trailing bytes. */
  uint8_t *longer = malloc(n + 1);
  memcpy(longer, p, n);
  longer[n] = 0;
  ASSERT_EQ(decode_snapshot_bytes(longer, n + 1), PROTO_ETRAILING);
  free(longer);
  struct {
    size_t at;
    int kind; /* 0 u32, 1 f32, 2 u8 */
    double value;
    int want;
  } cases[] = {
      {0, 0, 6000000, PROTO_ETOOBIG},        /* more vertices than the limit */
      {0, 0, 1u << 20, PROTO_ETRUNCATED},    /* more vertices than the streams hold */
      {4, 0, 30000000, PROTO_ETOOBIG},       /* more triangles than the limit */
      {4, 0, 100000, PROTO_ETRUNCATED},      /* more triangles than the index codec's bytes */
      {8, 0, 70000, PROTO_ETOOBIG},          /* targets */
      {12, 1, 0, PROTO_EINVAL},              /* zero quantum */
      {12, 1, NAN, PROTO_ENONFINITE},        /* non-finite quantum */
      {12, 1, 1e38, PROTO_ENONFINITE},       /* a step quantum · 2^shift that overflows */
      {16, 2, 0x81, PROTO_EINVAL},           /* unknown flags */
      {16, 2, 0x03, PROTO_EINVAL},           /* lossless flag with a shift */
      {17, 2, 0, PROTO_EINVAL},              /* no shift without the lossless flag */
      {17, 2, 25, PROTO_EINVAL},             /* shift over the limit */
      {18, 2, 1, PROTO_EINVAL},              /* reserved */
      {20, 1, INFINITY, PROTO_ENONFINITE},   /* non-finite origin */
      {40, 1, 0, PROTO_EINVAL},              /* zero UV step */
      {44, 1, -1, PROTO_EINVAL},             /* negative UV step */
      {44, 1, NAN, PROTO_ENONFINITE},        /* non-finite UV step */
      {48, 0, 3, PROTO_ETRUNCATED},          /* an index body too short for the triangles */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    memcpy(c, p, n);
    if (cases[i].kind == 0) put32(c + cases[i].at, (uint32_t)cases[i].value);
    else if (cases[i].kind == 1) putf(c + cases[i].at, (float)cases[i].value);
    else c[cases[i].at] = (uint8_t)cases[i].value;
    int rc = decode_snapshot_bytes(c, n);
    if (rc != cases[i].want) test__fail(__FILE__, __LINE__, "case %zu (byte %zu): %d, want %d", i, cases[i].at, rc, cases[i].want);
  }
  /* Garbage inside the meshopt index stream: refused, or indices out of range refused. */
  for (int k = 0; k < 200; k++) {
    memcpy(c, p, n);
    size_t at = 52 + rnd() % 200;
    c[at] ^= (uint8_t)(1 + rnd() % 255);
    int rc = decode_snapshot_bytes(c, n);
    ASSERT(rc == 0 || (rc <= PROTO_ETRUNCATED && rc >= PROTO_ENOMEM));
  }
  free(c);
  proto_buf_fini(&b);
  mesh_destroy(m);
}

/* Random damage anywhere in SNAPSHOT, DELTA and TARGET bodies: every decoder answers 0 with a
 * consistent result or a PROTO_E* code (ASan and UBSan watch for everything else). */
TEST(random_damage_to_version_2_bodies_never_crashes_a_decoder) {
  proto_buf snap;
  mesh *m;
  small_snapshot(&snap, &m);
  proto_trav t;
  ASSERT_OK(proto_trav_init(&t, m->triangles, m->triangle_count, m->vertex_count), NULL);
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, 0, m->positions, m->triangles, m->uvs, proto2_test_quantum(m)};
  proto_grid2 g;
  ASSERT_OK(proto_grid2_init(&g, &md, 5), NULL);
  proto_buf delta, target;
  proto_buf_init(&delta);
  proto_buf_init(&target);
  uint32_t idx[300];
  int32_t q[900];
  ASSERT(m->vertex_count >= 300);
  for (uint32_t i = 0; i < 300; i++) {
    idx[i] = i * (m->vertex_count / 300);
    for (int c = 0; c < 3; c++) q[3 * i + c] = (int32_t)(rnd() % 4001) - 2000;
  }
  ASSERT_OK(proto_encode_delta2(&delta, 4, 0, 5, 300, idx, q, &t), NULL);
  proto_target_desc d = target_desc(m, 0);
  ASSERT_OK(proto_encode_target_add2(&target, 4, 0, 1, 1.0f, &d, &g, &t), NULL);
  proto_buf *frames[3] = {&snap, &delta, &target};
  uint32_t accepted = 0;
  for (int f = 0; f < 3; f++) {
    size_t n = frames[f]->len - PROTO_HEADER_SIZE;
    uint8_t *c = malloc(n);
    for (int k = 0; k < 1500; k++) {
      memcpy(c, frames[f]->data + PROTO_HEADER_SIZE, n);
      int flips = 1 + (int)(rnd() % 4);
      for (int j = 0; j < flips; j++) c[rnd() % n] = (uint8_t)rnd();
      size_t len = rnd() % 8 ? n : rnd() % n;
      int rc;
      if (f == 0) {
        rc = decode_snapshot_bytes(c, len);
      } else if (f == 1) {
        proto_offsets2 o;
        rc = proto_decode_delta2(c, len, &t, &o);
        if (rc == 0) {
          for (uint32_t i = 0; i < o.count; i++) ASSERT(o.indices[i] < m->vertex_count);
          proto_offsets2_free(&o);
        }
      } else {
        uint32_t index;
        float w;
        proto_target2 tg;
        rc = proto_decode_target_add2(c, len, &t, &index, &w, &tg);
        if (rc == 0) {
          for (uint32_t i = 0; i < tg.count; i++) ASSERT(tg.indices[i] < m->vertex_count && isfinite(tg.deltas[3 * i]));
          proto_target2_free(&tg);
        }
      }
      accepted += rc == 0;
      if (rc > 0 || (rc != 0 && (rc > PROTO_ETRUNCATED || rc < PROTO_ENOMEM)))
        test__fail(__FILE__, __LINE__, "frame %d: unexpected answer %d", f, rc);
    }
    free(c);
  }
  fprintf(stderr, "%u of 4500 damaged bodies still decoded (consistently)\n", accepted);
  proto_buf_fini(&snap);
  proto_buf_fini(&delta);
  proto_buf_fini(&target);
  proto_trav_fini(&t);
  mesh_destroy(m);
}

TEST(a_relays_forward_hello_carries_its_option_and_decodes_as_a_plain_version_2_hello) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello hi = {PROTO_VERSION_2, PROTO_ROLE_EDITOR, {"demo", 4}, {"s3cret", 6}};
  proto_hello_opts ho = {.codec = PROTO_CODEC_QUANTISED}, d2;
  ASSERT_OK(proto_encode_hello_forward(&b, &hi, &ho), NULL);
  proto_header h;
  const uint8_t *p = one_frame(&b, &h, PROTO_HELLO);
  ASSERT(proto_hello_forward(p, h.length));
  proto_hello d;
  ASSERT_OK(proto_decode_hello2(p, h.length, &d, &d2), NULL); /* what a server before relays reads */
  ASSERT(d.role == PROTO_ROLE_EDITOR && d.token.len == 6 && d2.codec == PROTO_CODEC_QUANTISED);
  /* A plain HELLO is not a forwarding one; the option is 4 bytes more. */
  proto_buf c;
  proto_buf_init(&c);
  ASSERT_OK(proto_encode_hello2(&c, &hi, &ho), NULL);
  proto_header h2;
  const uint8_t *q = one_frame(&c, &h2, PROTO_HELLO);
  ASSERT(!proto_hello_forward(q, h2.length));
  ASSERT_EQ(h.length, h2.length + 4);
  /* The option's value is 0 or 1. */
  uint8_t buf[256];
  memcpy(buf, p, h.length);
  buf[h.length - 1] = 2;
  ASSERT(!proto_hello_forward(buf, h.length));
  /* The forwarding HELLO carries the editor's author beside it (tags 5 and 6). */
  ho.author = (proto_str){"ana", 3};
  b.len = 0;
  ASSERT_OK(proto_encode_hello_forward(&b, &hi, &ho), NULL);
  p = one_frame(&b, &h, PROTO_HELLO);
  ASSERT(proto_hello_forward(p, h.length));
  ASSERT_OK(proto_decode_hello2(p, h.length, &d, &d2), NULL);
  ASSERT(d2.author.len == 3 && memcmp(d2.author.ptr, "ana", 3) == 0);
  ASSERT_EQ(p[h.length - 4], PROTO_OPT_FORWARD);
  ASSERT_EQ(PROTO_OPT_FORWARD, 6);
  proto_buf_fini(&b);
  proto_buf_fini(&c);
}
