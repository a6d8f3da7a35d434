/*
 * test_order.c — the session's triangle order (shared/mesh_order.c): a depth-first walk across
 * shared edges that keeps every triangle, its winding and its submesh.
 *
 * Oracles: the triangles before the call (the same ones after it, as multisets of corner
 * rotations, per submesh range), and the walk's definition checked on the result: a triangle
 * either starts a walk or its first edge is the reverse of an edge of a triangle before it; a
 * walk starts only where no triangle before it shares an edge with it (where every directed
 * edge has one triangle), so a connected surface is one walk.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "test.h"

/* A triangle as its smallest rotation (the winding stays; ties in degenerate ones included). */
typedef struct tri3 {
  uint32_t v[3];
} tri3;

static int less3(const uint32_t *a, const uint32_t *b) {
  for (int k = 0; k < 3; k++)
    if (a[k] != b[k]) return a[k] < b[k];
  return 0;
}

static tri3 canonical(const uint32_t *t) {
  tri3 best = {{t[0], t[1], t[2]}};
  for (int r = 1; r < 3; r++) {
    tri3 c = {{t[r], t[(r + 1) % 3], t[(r + 2) % 3]}};
    if (less3(c.v, best.v)) best = c;
  }
  return best;
}

static int cmp_tri(const void *a, const void *b) { return memcmp(a, b, sizeof(tri3)); }

/* Directed edges, sorted, to ask whether one is held by a triangle before position `before`. */
typedef struct dedge {
  uint32_t a, b, at;
} dedge;

static int cmp_edge(const void *x, const void *y) {
  const dedge *p = x, *q = y;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  if (p->b != q->b) return p->b < q->b ? -1 : 1;
  return (p->at > q->at) - (p->at < q->at);
}

/* Whether a triangle in [first, before) holds the directed edge a -> b. */
static int held_before(const dedge *e, size_t n, uint32_t a, uint32_t b, uint32_t first, uint32_t before) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (e[mid].a < a || (e[mid].a == a && e[mid].b < b)) lo = mid + 1;
    else hi = mid;
  }
  for (; lo < n && e[lo].a == a && e[lo].b == b; lo++)
    if (e[lo].at >= first && e[lo].at < before) return 1;
  return 0;
}

/* Orders m's triangles and checks both oracles. Returns the number of walks. */
static uint32_t check_order(mesh *m) {
  size_t nt = m->triangle_count;
  tri3 *before = malloc(sizeof(tri3) * (nt + 1)), *after = malloc(sizeof(tri3) * (nt + 1));
  for (size_t i = 0; i < nt; i++) before[i] = canonical(m->triangles + 3 * i);
  ASSERT_OK(mesh_optimize_triangle_order(m), NULL);
  for (size_t i = 0; i < nt; i++) after[i] = canonical(m->triangles + 3 * i);
  dedge *e = malloc(sizeof(dedge) * (3 * nt + 1));
  for (size_t i = 0; i < nt; i++)
    for (int j = 0; j < 3; j++)
      e[3 * i + (size_t)j] = (dedge){m->triangles[3 * i + (size_t)j], m->triangles[3 * i + (size_t)(j + 1) % 3], (uint32_t)i};
  qsort(e, 3 * nt, sizeof(dedge), cmp_edge);
  /* Where two triangles hold one directed edge (an edge of three, a repeated triangle) a walk
   * crosses to one of them only: the start rule holds where every directed edge has one owner. */
  int single = 1;
  for (size_t i = 1; i < 3 * nt; i++) single &= e[i].a != e[i - 1].a || e[i].b != e[i - 1].b;
  uint32_t walks = 0;
  for (uint32_t s = 0; s < m->submesh_count; s++) {
    const mesh_submesh *sm = &m->submeshes[s];
    size_t f = sm->first_triangle, n = sm->triangle_count;
    qsort(before + f, n, sizeof(tri3), cmp_tri);
    qsort(after + f, n, sizeof(tri3), cmp_tri);
    ASSERT(memcmp(before + f, after + f, sizeof(tri3) * n) == 0); /* the same triangles, windings, range */
    for (size_t i = f; i < f + n; i++) {
      const uint32_t *t = m->triangles + 3 * i;
      if (held_before(e, 3 * nt, t[1], t[0], (uint32_t)f, (uint32_t)i)) continue; /* entered across t0 -> t1 */
      walks++;
      for (int j = 0; j < 3 && single; j++) /* a walk's first triangle: nothing before it shares an edge with it */
        ASSERT(!held_before(e, 3 * nt, t[(j + 1) % 3], t[j], (uint32_t)f, (uint32_t)i));
    }
  }
  fprintf(stderr, "  %u triangles in %u submeshes: %u walks\n", (unsigned)nt, m->submesh_count, walks);
  free(e);
  free(before);
  free(after);
  return walks;
}

TEST(the_demo_head_is_one_walk_across_its_edges_with_every_triangle_kept) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  /* Its UV seam splits render vertices, so the walk crosses only the edges the triangles share by
   * index: the head cut open along its seam, still one connected surface. */
  ASSERT_EQ(check_order(m), 1u);
  mesh_destroy(m);
}

TEST(a_closed_icosphere_is_a_single_walk) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_icosphere(4, 1.0, &m), NULL);
  ASSERT_EQ(check_order(m), 1u);
  mesh_destroy(m);
}

/* Open: the icosphere with its top cut off and holes punched in it, one connected surface with
 * boundaries (where a walk's first triangle has a neighbour across the edge it starts from). */
TEST(an_open_surface_with_holes_is_a_single_walk) {
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_icosphere(4, 1.0, &m), NULL);
  uint32_t kept = 0;
  for (uint32_t t = 0; t < m->triangle_count; t++) {
    const uint32_t *c = m->triangles + 3 * (size_t)t;
    double y = 0, x = 0;
    for (int k = 0; k < 3; k++) y += m->positions[3 * (size_t)c[k] + 1], x += m->positions[3 * (size_t)c[k]];
    if (y / 3 > 0.6 || (t % 97 == 5 && fabs(x / 3) < 0.5)) continue;
    memmove(m->triangles + 3 * (size_t)kept++, c, sizeof(uint32_t) * 3);
  }
  ASSERT(kept < m->triangle_count);
  m->triangle_count = kept;
  m->submeshes[0].triangle_count = kept;
  ASSERT_EQ(check_order(m), 1u);
  mesh_destroy(m);
}

TEST(files_with_several_submeshes_keep_every_triangle_in_its_own_range) {
  const char *files[] = {"MD2/faerie.md2", "OBJ/spider.obj", "glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf"};
  for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
    mesh *m = NULL;
    char err[MESH_ERR_LEN];
    ASSERT_OK(mesh_import(test_assimp_model(files[k]), NULL, &m, err, sizeof(err)), err);
    ASSERT(check_order(m) >= 1);
    mesh_destroy(m);
  }
}

/* Soups: repeated and reversed triangles, edges held by three, degenerate corners, loose ones. */
TEST(triangle_soups_keep_every_triangle_and_their_walks_follow_the_definition) {
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (int round = 0; round < 30; round++) {
    mesh *m = mesh_create();
    uint32_t nv = 3 + (uint32_t)(round * 7 % 50), nt = (uint32_t)(1 + round * 13 % 200);
    ASSERT_OK(mesh_alloc(m, nv, nt, 0, 0), NULL);
    for (uint32_t i = 0; i < 3 * nt; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      m->triangles[i] = (uint32_t)(x % nv);
    }
    /* Two submeshes: each keeps its own range. */
    m->submeshes = calloc(2, sizeof(mesh_submesh));
    m->submesh_count = 2;
    m->submeshes[0] = (mesh_submesh){.first_triangle = 0, .triangle_count = nt / 2, .vertex_count = nv};
    m->submeshes[1] = (mesh_submesh){.first_triangle = nt / 2, .triangle_count = nt - nt / 2, .vertex_count = nv};
    check_order(m);
    mesh_destroy(m);
  }
}
