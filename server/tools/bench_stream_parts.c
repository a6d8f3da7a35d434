/*
 * bench_stream_parts.c — the part of `deform-bench stream` that splits a version 2 join into
 * its pieces (triangles, positions, UVs, targets) on the session's default grid, in today's
 * coding and in the `entropy` capability's (docs/protocol.md §12.11), and races the two
 * SNAPSHOT decoders against each other in process, in alternating runs.
 *
 * The mesh is the session's as a lossless viewer holds it (its triangles are the session's
 * canonical ones), so every piece here is byte for byte what deformd sends.
 *
 * DOES NOT talk to a server or judge the numbers (bench_stream.c reports the goals).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stream.h"
#include "client.h"
#include "proto2.h"

/* One full SNAPSHOT payload of `m` on grid shift 5 (the default), in the plain or the entropy
 * coding, with the sizes of its pieces. */
static int build(const mesh *m, float quantum, int entropy, proto_buf *out, bench_parts *sz) {
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, m->target_count, m->positions, m->triangles, m->uvs, quantum};
  proto_grid2 g;
  proto_trav tr;
  proto_buf tb, pb;
  proto_buf_init(&tb);
  proto_buf_init(&pb);
  uint32_t *tri = malloc(sizeof(uint32_t) * 3 * ((size_t)m->triangle_count + 1));
  int rc = tri ? proto_snapshot2_triangles(&tb, m->triangles, m->triangle_count, m->vertex_count, tri) : -1;
  if (rc == 0) rc = proto_trav_init(&tr, tri, m->triangle_count, m->vertex_count);
  if (rc == 0 && (rc = proto_grid2_init(&g, &md, 5)) != 0) proto_trav_fini(&tr);
  if (rc) {
    free(tri);
    proto_buf_fini(&tb);
    return -1;
  }
  g.entropy = (uint8_t)entropy;
  proto_buf_init(out);
  rc = proto_snapshot2_head(out, &md, &g);
  size_t at = out->len;
  if (rc == 0 && entropy) rc = proto_snapshot2_triangles_entropy(out, tri, m->triangle_count, &tr);
  else if (rc == 0 && proto_buf_append(out, tb.len)) memcpy(out->data + at, tb.data, tb.len);
  sz->triangles = out->len - at;
  proto_mesh_desc positions_only = md;
  positions_only.uvs = NULL;
  if (rc == 0) rc = proto_snapshot2_attributes(&pb, &positions_only, &g, &tr); /* the positions' size alone */
  sz->positions = pb.len;
  at = out->len;
  if (rc == 0) rc = proto_snapshot2_attributes(out, &md, &g, &tr);
  sz->uvs = out->len - at - sz->positions;
  at = out->len;
  for (uint32_t t = 0; rc == 0 && t < m->target_count; t++) {
    const mesh_target *mt = &m->targets[t];
    proto_target_desc d = {mt->name, 0, 0, 1, 0, 0, NULL, mt->count, mt->indices, mt->deltas};
    int64_t of = entropy ? mesh_target_copy_of(m, t) : -1; /* as deformd's entropy joins */
    rc = of >= 0 ? proto_snapshot2_target_copy(out, &d, &g, (uint32_t)of) : proto_snapshot2_target(out, &d, &g, &tr);
  }
  sz->targets = out->len - at;
  float *w = calloc((size_t)m->target_count + 1, sizeof(float));
  if (rc == 0) rc = w ? proto_snapshot2_state(out, m->target_count, w, 0, NULL, NULL, 5, &tr) : -1;
  sz->total = out->len;
  free(w);
  free(tri);
  proto_trav_fini(&tr);
  proto_buf_fini(&tb);
  proto_buf_fini(&pb);
  return rc || out->failed ? -1 : 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Decodes `p` once; -1 on failure, else the time in ms. `check` (may be NULL) receives the
 * positions, to compare the two codings. */
static double decode_once(const proto_buf *p, float *check, uint32_t nv) {
  proto_snapshot2 s;
  proto_trav t;
  proto_limits l = {0};
  uint64_t t0 = client_now_ns();
  if (proto_decode_snapshot2(p->data, p->len, &l, &s, &t) != 0) return -1;
  double ms = (double)(client_now_ns() - t0) / 1e6;
  if (check) memcpy(check, s.positions, sizeof(float) * 3 * nv);
  proto_snapshot2_free(&s);
  proto_trav_fini(&t);
  return ms;
}

int bench_stream_save(const mesh *m, float quantum, const char *prefix) {
  int rc = 0;
  for (int e = 0; e < 2 && rc == 0; e++) {
    proto_buf p;
    bench_parts sz;
    if (build(m, quantum, e, &p, &sz) != 0) return -1;
    char path[4200];
    snprintf(path, sizeof(path), "%s.%s", prefix, e ? "entropy" : "quantised");
    FILE *f = fopen(path, "wb");
    rc = f && fwrite(p.data, 1, p.len, f) == p.len ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    proto_buf_fini(&p);
  }
  return rc;
}

int bench_stream_parts(const mesh *m, float quantum, int runs, bench_parts out[2]) {
  proto_buf p[2];
  for (int e = 0; e < 2; e++) {
    memset(&out[e], 0, sizeof(out[e]));
    if (build(m, quantum, e, &p[e], &out[e]) != 0) {
      if (e) proto_buf_fini(&p[0]);
      proto_buf_fini(&p[e]);
      return -1;
    }
  }
  size_t nv = m->vertex_count;
  float *a = malloc(sizeof(float) * 3 * (nv + 1)), *b = malloc(sizeof(float) * 3 * (nv + 1));
  double *ms[2] = {malloc(sizeof(double) * (size_t)runs), malloc(sizeof(double) * (size_t)runs)};
  int rc = a && b && ms[0] && ms[1] ? 0 : -1;
  /* Alternating: plain, entropy, plain, entropy, ... so that load and clock changes hit both. */
  for (int r = 0; rc == 0 && r < runs; r++)
    for (int e = 0; e < 2 && rc == 0; e++)
      if ((ms[e][r] = decode_once(&p[e], r == 0 ? (e ? b : a) : NULL, m->vertex_count)) < 0) rc = -1;
  if (rc == 0) {
    out[0].same_positions = out[1].same_positions = memcmp(a, b, sizeof(float) * 3 * nv) == 0;
    for (int e = 0; e < 2; e++) {
      qsort(ms[e], (size_t)runs, sizeof(double), cmp_double);
      out[e].decode_ms_median = ms[e][runs / 2];
      out[e].decode_ms_min = ms[e][0];
      out[e].decode_ms_max = ms[e][runs - 1];
    }
  }
  free(a);
  free(b);
  free(ms[0]);
  free(ms[1]);
  proto_buf_fini(&p[0]);
  proto_buf_fini(&p[1]);
  return rc;
}
