/*
 * test_replica.c — the CPU replica (server/client/client_replica.c) rebuilt from frames the
 * protocol's encoders write, against the formula written out by hand here:
 * base + Σ w·Δ + (float)q · quantum per vertex.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client_replica.h"
#include "test.h"

/* A 4-vertex, 2-triangle square with one target moving vertices 1 and 3. */
static const float base[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0};
static const uint32_t tris[6] = {0, 1, 2, 1, 3, 2};
static const uint32_t t_idx[2] = {1, 3};
static const float t_del[6] = {0, 0, 0.5f, 0.25f, 0, -1};
static const float quantum = 1.0f / 1024;

/* Applies every frame in b to r; returns the first error. */
static int apply_all(client_replica *r, const proto_buf *b, char *err, size_t errlen) {
  size_t at = 0;
  while (at < b->len) {
    proto_header h;
    ASSERT_OK(proto_header_decode(b->data + at, NULL, &h), NULL);
    int rc = client_replica_apply(r, &h, b->data + at + PROTO_HEADER_SIZE, err, errlen);
    if (rc) return rc;
    at += PROTO_HEADER_SIZE + h.length;
  }
  return 0;
}

static void encode_snapshot(proto_buf *b, uint64_t version, float w, uint32_t noff, const uint32_t *oidx,
                            const int32_t *oq) {
  proto_target_desc t = {"lift", 0.0f, 0, 1, 0, 0, NULL, 2, t_idx, t_del};
  proto_mesh_desc md = {4, 2, 1, base, tris, NULL, quantum};
  proto_buf mp, sp;
  proto_buf_init(&mp);
  proto_buf_init(&sp);
  ASSERT_OK(proto_snapshot_mesh_part(&mp, &md, &t), NULL);
  ASSERT_OK(proto_snapshot_state_part(&sp, 1, &w, noff, oidx, oq), NULL);
  ASSERT_OK(proto_encode_snapshot_head(b, version, mp.len, sp.len), NULL);
  memcpy(proto_buf_append(b, mp.len), mp.data, mp.len);
  memcpy(proto_buf_append(b, sp.len), sp.data, sp.len);
  proto_buf_fini(&mp);
  proto_buf_fini(&sp);
}

/* The expected shape, written out: base + w·Δ + q·quantum. */
static void expected(float w, const int32_t q[12], float out[12]) {
  memcpy(out, base, sizeof(base));
  for (int k = 0; k < 2; k++)
    for (int c = 0; c < 3; c++) out[3 * t_idx[k] + c] += w * t_del[3 * k + c];
  for (int i = 0; i < 12; i++) out[i] += (float)q[i] * quantum;
}

TEST(replica_rebuilds_snapshot_weights_and_deltas_exactly) {
  client_replica r;
  client_replica_init(&r);
  char err[256];
  proto_buf b;
  proto_buf_init(&b);
  uint32_t oidx[1] = {2};
  int32_t oq[3] = {10, -20, 30};
  encode_snapshot(&b, 5, 0.5f, 1, oidx, oq);
  ASSERT_OK(apply_all(&r, &b, err, sizeof(err)), err);
  ASSERT_EQ(r.version, 5);
  ASSERT_EQ(r.mesh->vertex_count, 4);
  int32_t q[12] = {0};
  q[6] = 10, q[7] = -20, q[8] = 30;
  float want[12], got[12];
  expected(0.5f, q, want);
  ASSERT_OK(client_replica_positions(&r, got), NULL);
  ASSERT(memcmp(want, got, sizeof(got)) == 0);
  /* A weight and two offsets change (absolute values: vertex 2 goes back to zero). */
  b.len = 0;
  float w = 0.75f;
  uint32_t ti = 0, di[2] = {2, 3};
  int32_t dq[6] = {0, 0, 0, 7, 8, 9};
  ASSERT_OK(proto_encode_weights(&b, 6, 0, 1, &ti, &w), NULL);
  ASSERT_OK(proto_encode_delta(&b, 7, 0, 2, di, dq), NULL);
  ASSERT_OK(apply_all(&r, &b, err, sizeof(err)), err);
  ASSERT_EQ(r.version, 7);
  memset(q, 0, sizeof(q));
  q[9] = 7, q[10] = 8, q[11] = 9;
  expected(0.75f, q, want);
  ASSERT_OK(client_replica_positions(&r, got), NULL);
  ASSERT(memcmp(want, got, sizeof(got)) == 0);
  proto_buf_fini(&b);
  client_replica_fini(&r);
}

TEST(replica_refuses_frames_that_do_not_fit_its_mesh) {
  client_replica r;
  client_replica_init(&r);
  char err[256];
  proto_buf b;
  proto_buf_init(&b);
  float w = 1;
  uint32_t ti = 0;
  ASSERT_OK(proto_encode_weights(&b, 1, 0, 1, &ti, &w), NULL);
  ASSERT_EQ(apply_all(&r, &b, err, sizeof(err)), PROTO_ETYPE); /* before the snapshot */
  float out[12];
  ASSERT_EQ(client_replica_positions(&r, out), MESH_EINVAL);
  b.len = 0;
  encode_snapshot(&b, 1, 0, 0, NULL, NULL);
  ASSERT_OK(apply_all(&r, &b, err, sizeof(err)), err);
  b.len = 0;
  ti = 1; /* the mesh has one target */
  ASSERT_OK(proto_encode_weights(&b, 2, 0, 1, &ti, &w), NULL);
  ASSERT_EQ(apply_all(&r, &b, err, sizeof(err)), PROTO_EINVAL);
  ASSERT_STR_CONTAINS(err, "target 1 of 1");
  b.len = 0;
  uint32_t v = 4;
  int32_t q[3] = {1, 1, 1};
  ASSERT_OK(proto_encode_delta(&b, 3, 0, 1, &v, q), NULL);
  ASSERT_EQ(apply_all(&r, &b, err, sizeof(err)), PROTO_EINVAL);
  ASSERT_STR_CONTAINS(err, "vertex 4 of 4");
  ASSERT_EQ(r.version, 1); /* nothing refused moved it */
  proto_buf_fini(&b);
  client_replica_fini(&r);
}
