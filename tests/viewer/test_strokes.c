/*
 * test_strokes.c — deform-view's brush controls (vw_brush.c, issue 26): Ctrl digs and Shift
 * smooths, checked on a real deformd (the stroke deform-view would send with Ctrl held moves
 * the cheek against its normals, computed here from the triangles, and the same stroke without
 * it moves the cheek along them); F's value follows the pointer; the stabiliser trails it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test.h"
#include "vw_brush.h"
#include "vw_net.h"

/* Area-weighted vertex normals of the rest mesh (the oracle of "along the normal"). */
static float *rest_normals(const mesh *m) {
  float *n = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  for (uint32_t t = 0; t < m->triangle_count; t++) {
    const uint32_t *v = m->triangles + 3 * t;
    const float *a = m->positions + 3 * v[0], *b = m->positions + 3 * v[1], *c = m->positions + 3 * v[2];
    float e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    float x[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    for (int k = 0; k < 3; k++)
      for (int c3 = 0; c3 < 3; c3++) n[3 * v[k] + c3] += x[c3];
  }
  return n;
}

static void poll_until(vw_net *n, uint64_t version) {
  vw_net_changes ch;
  for (int i = 0; i < 3000; i++) {
    vw_net_poll(n, 10, &ch);
    if (n->state == VW_NET_LIVE && n->replica.version >= version) return;
  }
  test__fail(__FILE__, __LINE__, "the viewer did not reach version %llu (%s)", (unsigned long long)version, n->last_error);
}

/* Sends deform-view's stroke of brush key `kind` across the cheek with the modifiers given, and
 * returns the sum over moved vertices of offset · normal, with how many moved. */
static double stroke_along_normal(vw_net *n, int kind, int ctrl, int shift, uint64_t *version, uint32_t *moved) {
  float strength;
  int k = vw_brush_modified(kind, ctrl, shift, 0.5f, &strength);
  proto_brush_sample pts[20];
  for (int i = 0; i < 20; i++) {
    float f = (float)i / 19;
    pts[i] = (proto_brush_sample){{0.03f + 0.025f * f, -0.03f + 0.02f * f, 0.082f - 0.006f * f}, {0, 0, -1}, 0.02f, strength};
  }
  const mesh *m = n->replica.mesh;
  float *before = malloc(sizeof(float) * 3 * m->vertex_count);
  memcpy(before, n->replica.offsets, sizeof(float) * 3 * m->vertex_count);
  ASSERT(vw_net_brush(n, vw_brush_ids[k], 0, 0, 20, pts) != 0);
  poll_until(n, ++*version);
  float *nrm = rest_normals(m);
  double sum = 0;
  *moved = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    double d = 0, len = 0;
    for (int c = 0; c < 3; c++) {
      double o = (double)n->replica.offsets[3 * v + c] - before[3 * v + c];
      d += o * nrm[3 * v + c];
      len += o * o;
    }
    if (len > 0) (*moved)++, sum += d / sqrt(fmax(1e-30, nrm[3 * v] * nrm[3 * v] + nrm[3 * v + 1] * nrm[3 * v + 1] +
                                                        nrm[3 * v + 2] * nrm[3 * v + 2]));
  }
  free(nrm);
  free(before);
  return sum;
}

TEST(ctrl_digs_with_draw_inflate_crease_and_layer_and_shift_smooths) {
  /* The rule, for every brush. */
  for (int k = 0; k < VW_BRUSH_COUNT; k++) {
    float s;
    int dig = k == 0 || k == 2 || k == 6 || k == 7;
    ASSERT_EQ(vw_brush_modified(k, 1, 0, 0.5f, &s), k);
    ASSERT(s == (dig ? -0.5f : 0.5f));
    ASSERT_EQ(vw_brush_modified(k, 0, 1, 0.5f, &s), VW_BRUSH_SMOOTH);
    ASSERT(s == 0.5f);
    ASSERT_EQ(vw_brush_modified(k, 0, 0, 0.5f, &s), k);
  }
  ASSERT(strcmp(vw_brush_names[VW_BRUSH_SMOOTH], "smooth") == 0 && vw_brush_ids[VW_BRUSH_SMOOTH] == 2);
  /* On the server: draw raises the cheek, Ctrl+draw digs it, Shift smooths the dig back. */
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_EDITOR);
  vw_net_set_author(&n, "ana");
  poll_until(&n, 0);
  uint64_t version = 0;
  uint32_t moved;
  double raise = stroke_along_normal(&n, VW_BRUSH_DRAW, 0, 0, &version, &moved);
  fprintf(stderr, "draw: %u vertices, Σ offset·n̂ %+.4f\n", moved, raise);
  ASSERT(moved > 100 && raise > 0);
  ASSERT(vw_net_history(&n, 0) != 0); /* undo it */
  poll_until(&n, ++version);
  double dig = stroke_along_normal(&n, VW_BRUSH_DRAW, 1, 0, &version, &moved);
  fprintf(stderr, "Ctrl+draw: %u vertices, Σ offset·n̂ %+.4f\n", moved, dig);
  ASSERT(moved > 100 && dig < 0);
  ASSERT_NEAR(dig, -raise, 0.2 * raise); /* the same stroke, the other way */
  double smooth = stroke_along_normal(&n, VW_BRUSH_DRAW, 0, 1, &version, &moved);
  fprintf(stderr, "Shift: %u vertices, Σ offset·n̂ %+.4f (lifts the dig back)\n", moved, smooth);
  ASSERT(smooth > 0);
  vw_net_fini(&n);
  harness_stop(&h);
}

TEST(f_then_move_sets_the_value_by_the_pointers_distance_and_the_stabiliser_trails_the_pointer) {
  vw_brush_adjust a;
  vw_brush_adjust_begin(&a, 500, 300, 0.04f, 0.001, 0.002f, 0.5f);
  ASSERT_NEAR(vw_brush_adjust_value(&a, 500, 300), 0.04, 1e-6); /* where F was pressed: as it was */
  ASSERT_NEAR(vw_brush_adjust_value(&a, 520, 300), 0.06, 1e-6); /* 20 px farther: +0.02 */
  ASSERT_NEAR(vw_brush_adjust_value(&a, 460, 330), 0.03, 1e-6); /* 30 px from the anchor (460, 300) */
  ASSERT_NEAR(vw_brush_adjust_value(&a, 460, 300), 0.002, 1e-6); /* at the anchor: the least */
  ASSERT_NEAR(vw_brush_adjust_value(&a, 2000, 300), 0.5, 1e-6);  /* clamped */
  double x = 0, y = 0;
  ASSERT(!vw_brush_lazy(&x, &y, 10, 0, 24)); /* within the string: stays */
  ASSERT(x == 0 && y == 0);
  ASSERT(vw_brush_lazy(&x, &y, 30, 40, 24)); /* 50 px away: pulled to 24 px behind */
  ASSERT_NEAR(hypot(30 - x, 40 - y), 24, 1e-9);
  ASSERT_NEAR(x, 0.52 * 30, 1e-9);
}
