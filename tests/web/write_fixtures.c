/*
 * write_fixtures.c — writes the byte fixtures the JavaScript protocol module is tested on
 * (tests/web/protocol.test.mjs): `web-fixtures DIR` writes DIR/fixtures.json.
 *
 *   streams   frames the C encoders wrote (version 1 and 2 SNAPSHOT, WEIGHTS in every mode,
 *             DELTA, TARGET, TARGET_META, on a small mesh and on the demo head), and the
 *             positions the C replica (client_replica, mesh_evaluate) holds after each, as
 *             float32 bits: the JavaScript replica must hold the same bits.
 *   cases     payloads for each decoder, valid and malformed (every truncation, single bytes
 *             replaced, a byte appended), with what the C decoder says: 0 or its PROTO_E* code.
 *             The JavaScript decoder must say the same.
 *   encoders  the C encoders' bytes for given arguments: the JavaScript encoders must write them.
 *
 * The oracle is the C codec itself (protocol/), which tests/protocol checks against the
 * documented byte layouts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_replica.h"
#include "mesh.h"
#include "mesh_io.h"
#include "proto.h"
#include "proto2.h"
#include "proto_bulk.h"
#include "proto_caps.h"
#include "proto_presence.h"
#include "proto_texture.h"
#include "proto_texclip.h"
#include "mesh_texpca.h"

static FILE *out;

static void hex(const uint8_t *p, size_t n) {
  fputc('"', out);
  for (size_t i = 0; i < n; i++) fprintf(out, "%02x", p[i]);
  fputc('"', out);
}

static void item_begin(const char *kind) { fprintf(out, "{\"kind\":\"%s\",", kind); }
static void item_end(void) { fputs("}\n", out); }

/* ---- decoders by name ---------------------------------------------------------------------------- */

static proto_trav small_trav; /* the traversal of the small version 2 snapshot */

static int c_decode(const char *d, const uint8_t *p, size_t n) {
  int rc;
  if (strcmp(d, "header") == 0) {
    proto_header h;
    return n < PROTO_HEADER_SIZE ? PROTO_ETRUNCATED : proto_header_decode(p, NULL, &h);
  }
  if (strcmp(d, "mask") == 0) {
    proto_mask_view m;
    return proto_decode_mask(p, n, &m);
  }
  if (strcmp(d, "texture") == 0) {
    proto_texture_view m;
    return proto_decode_texture(p, n, &m);
  }
  if (strcmp(d, "welcome") == 0) {
    proto_welcome m;
    proto_welcome_opts o;
    return proto_decode_welcome2(p, n, &m, &o);
  }
  if (strcmp(d, "caps") == 0) { /* the caps option's value on its own */
    uint32_t known;
    return proto_caps_get(p, n, &known, NULL);
  }
  if (strcmp(d, "error") == 0) {
    proto_error m;
    return proto_decode_error(p, n, &m);
  }
  if (strcmp(d, "ping") == 0) {
    proto_ping m;
    return proto_decode_ping(p, n, &m);
  }
  if (strcmp(d, "weights") == 0) {
    proto_weights_view m;
    return proto_decode_weights(p, n, NULL, &m);
  }
  if (strcmp(d, "delta") == 0) {
    proto_offsets_view m;
    return proto_decode_delta(p, n, NULL, &m);
  }
  if (strcmp(d, "target_meta") == 0) {
    proto_target_meta m;
    return proto_decode_target_meta(p, n, NULL, &m);
  }
  if (strcmp(d, "target_add") == 0) {
    proto_target_add m;
    return proto_decode_target_add(p, n, NULL, &m);
  }
  if (strcmp(d, "snapshot") == 0) {
    proto_snapshot m;
    return proto_decode_snapshot(p, n, NULL, &m);
  }
  if (strcmp(d, "snapshot2") == 0) {
    proto_snapshot2 s;
    proto_trav t;
    rc = proto_decode_snapshot2(p, n, NULL, &s, &t);
    if (rc == 0) {
      proto_snapshot2_free(&s);
      proto_trav_fini(&t);
    }
    return rc;
  }
  if (strcmp(d, "delta2") == 0) {
    proto_offsets2 o;
    rc = proto_decode_delta2(p, n, &small_trav, &o);
    if (rc == 0) proto_offsets2_free(&o);
    return rc;
  }
  if (strcmp(d, "bulk") == 0) { /* a BULK answer, as a client decodes it */
    proto_bulk_answer a;
    return proto_decode_bulk_answer(p, n, &a);
  }
  if (strcmp(d, "target_add2") == 0) {
    uint32_t index;
    float weight;
    proto_target2 t;
    rc = proto_decode_target_add2(p, n, &small_trav, &index, &weight, &t);
    if (rc == 0) proto_target2_free(&t);
    return rc;
  }
  if (strcmp(d, "presence") == 0) {
    uint32_t count;
    return proto_decode_presence(p, n, &count);
  }
  if (strcmp(d, "texclip") == 0) {
    proto_texclip_window w[PROTO_TEXCLIP_MAX_WINDOWS];
    proto_texclip_comp k[PROTO_TEXCLIP_MAX_COMPONENTS];
    proto_texclip c = {.windows = w, .comps = k};
    return proto_decode_texclip(p, n, &c);
  }
  if (strcmp(d, "texweights") == 0) {
    proto_texweights_entry e[PROTO_TEXWEIGHTS_MAX_CLIPS];
    uint32_t count;
    return proto_decode_texweights(p, n, e, &count);
  }
  fprintf(stderr, "unknown decoder %s\n", d);
  exit(1);
}

static void write_case(const char *d, const uint8_t *p, size_t n) {
  item_begin("case");
  fprintf(out, "\"decoder\":\"%s\",\"expect\":%d,\"hex\":", d, c_decode(d, p, n));
  hex(p, n);
  item_end();
}

/* The payload as it is, cut at every length, each byte replaced by a few values, one more byte. */
static void write_cases(const char *d, const uint8_t *p, size_t n, size_t stride) {
  uint8_t *m = malloc(n + 1);
  write_case(d, p, n);
  for (size_t k = 0; k < n; k += (k < 64 ? 1 : stride)) write_case(d, p, k);
  static const uint8_t repl[] = {0x00, 0xff, 0x7f, 0x80};
  for (size_t i = 0; i < n; i += (i < 96 ? 1 : stride)) {
    for (size_t r = 0; r < sizeof(repl) + 2; r++) {
      memcpy(m, p, n);
      m[i] = r < sizeof(repl) ? repl[r] : (uint8_t)(p[i] ^ (r == sizeof(repl) ? 0x01 : 0x10));
      if (m[i] == p[i]) continue;
      write_case(d, m, n);
    }
  }
  memcpy(m, p, n);
  m[n] = 0;
  write_case(d, m, n + 1);
  free(m);
}

/* ---- the small mesh: a 5 × 4 grid with UVs and three targets -------------------------------------- */

#define GW 5
#define GH 4
#define SV (GW * GH)
#define ST (2 * (GW - 1) * (GH - 1))

static float spos[3 * SV], suv[2 * SV];
static uint32_t stri[3 * ST], scanon[3 * ST];
static const uint32_t t0_idx[4] = {1, 6, 7, 12}, t1_idx[3] = {0, 9, 19}, t2_idx[2] = {3, 4};
static const float t0_d[12] = {0.01f, 0, 0.02f, 0, -0.03f, 0.001f, 0.5f, 0.25f, -0.125f, 0, 0, 1e-4f};
static const float t1_d[9] = {1, 2, 3, -1, -2, -3, 0.3f, 0.2f, 0.1f};
static const float t2_d[6] = {1e6f, 0, 0, 0, 0, -2e-7f}; /* too large for 2^24 steps: float bits */
static const uint32_t t1_drivers[1] = {0};

static void small_mesh(void) {
  for (int y = 0; y < GH; y++)
    for (int x = 0; x < GW; x++) {
      int v = y * GW + x;
      spos[3 * v] = 0.1f * (float)x;
      spos[3 * v + 1] = 0.13f * (float)y;
      spos[3 * v + 2] = 0.01f * (float)((x * 7 + y * 3) % 5);
      suv[2 * v] = (float)x / (GW - 1);
      suv[2 * v + 1] = (float)y / (GH - 1);
    }
  int k = 0;
  for (int y = 0; y + 1 < GH; y++)
    for (int x = 0; x + 1 < GW; x++) {
      uint32_t a = (uint32_t)(y * GW + x), b = a + 1, c = a + GW, d = c + 1;
      stri[k++] = a, stri[k++] = b, stri[k++] = d;
      stri[k++] = a, stri[k++] = d, stri[k++] = c;
    }
}

static proto_target_desc small_target(int i) {
  proto_target_desc d = {0};
  if (i == 0) d = (proto_target_desc){"smile", 0, 0, 1, 0, 0, NULL, 4, t0_idx, t0_d};
  if (i == 1) d = (proto_target_desc){"combo", 0.5f, -1, 2, 0, 1, t1_drivers, 3, t1_idx, t1_d};
  if (i == 2) d = (proto_target_desc){"far", 0, -10, 10, 1, 0, NULL, 2, t2_idx, t2_d};
  return d;
}

/* A whole SNAPSHOT frame of a mesh (version 1, or 2 at `shift`, 0 lossless); for version 2 the
 * canonical triangles go to `canon` and the traversal to `t`. In the entropy coding target i
 * names target copies[i] as its twin where that is >= 0 (copies NULL: none does). */
static void snapshot_frame(proto_buf *f, int v2, uint8_t shift, const proto_mesh_desc *md0, const proto_target_desc *tg,
                           const float *weights, uint32_t noff, const uint32_t *oidx, const int32_t *oq, uint32_t *canon,
                           proto_trav *t, uint64_t version, int entropy, const int64_t *copies) {
  proto_buf mpart, state;
  proto_buf_init(&mpart);
  proto_buf_init(&state);
  proto_mesh_desc md = *md0;
  if (v2) {
    proto_grid2 g;
    if (proto_grid2_init(&g, &md, shift)) exit(2);
    proto_buf tris;
    proto_buf_init(&tris);
    if (proto_snapshot2_triangles(&tris, md.triangles, md.triangle_count, md.vertex_count, canon)) exit(2);
    md.triangles = canon;
    if (proto_trav_init(t, canon, md.triangle_count, md.vertex_count)) exit(2);
    g.entropy = (uint8_t)entropy; /* the capability's coding (§12.11) */
    proto_snapshot2_head(&mpart, &md, &g);
    if (entropy && proto_snapshot2_triangles_entropy(&mpart, canon, md.triangle_count, t)) exit(2);
    if (!entropy) memcpy(proto_buf_append(&mpart, tris.len), tris.data, tris.len);
    proto_buf_fini(&tris);
    if (proto_snapshot2_attributes(&mpart, &md, &g, t)) exit(2);
    for (uint32_t i = 0; i < md.target_count; i++) {
      int64_t of = entropy && copies ? copies[i] : -1;
      if (of >= 0 ? proto_snapshot2_target_copy(&mpart, &tg[i], &g, (uint32_t)of) : proto_snapshot2_target(&mpart, &tg[i], &g, t))
        exit(2);
    }
    if (proto_snapshot2_state(&state, md.target_count, weights, noff, oidx, oq, shift, t)) exit(2);
    proto_encode_snapshot2_head(f, version, mpart.len, state.len);
  } else {
    if (proto_snapshot_mesh_part(&mpart, &md, tg)) exit(2);
    if (proto_snapshot_state_part(&state, md.target_count, weights, noff, oidx, oq)) exit(2);
    proto_encode_snapshot_head(f, version, mpart.len, state.len);
  }
  memcpy(proto_buf_append(f, mpart.len), mpart.data, mpart.len);
  memcpy(proto_buf_append(f, state.len), state.data, state.len);
  proto_buf_fini(&mpart);
  proto_buf_fini(&state);
}

/* A stream: frames back to back in `b`; each is applied to a C replica and written with the
 * replica's positions after it. */
static void write_stream(const char *name, const proto_buf *b) {
  item_begin("stream");
  fprintf(out, "\"name\":\"%s\",\"frames\":[", name);
  client_replica r;
  client_replica_init(&r);
  char err[256];
  int n = 0;
  for (size_t at = 0; at < b->len; n++) {
    proto_header h;
    if (proto_header_decode(b->data + at, NULL, &h)) exit(3);
    if (client_replica_apply(&r, &h, b->data + at + PROTO_HEADER_SIZE, err, sizeof(err))) {
      fprintf(stderr, "%s frame %d: %s\n", name, n, err);
      exit(3);
    }
    float *pos = malloc(sizeof(float) * 3 * (r.mesh->vertex_count + 1));
    client_replica_positions(&r, pos);
    fprintf(out, "%s{\"frame\":", n ? "," : "");
    hex(b->data + at, PROTO_HEADER_SIZE + h.length);
    fprintf(out, ",\"version\":%llu,\"positions\":", (unsigned long long)r.version);
    hex((const uint8_t *)pos, 12 * (size_t)r.mesh->vertex_count);
    fputc('}', out);
    free(pos);
    at += PROTO_HEADER_SIZE + h.length;
  }
  fputs("]", out);
  item_end();
  client_replica_fini(&r);
}

/* The payload of the frame at `at` of b (with the frame's header type). */
static const uint8_t *payload(const proto_buf *b, size_t at, uint32_t *len) {
  *len = proto_load_u32(b->data + at + 8);
  return b->data + at + PROTO_HEADER_SIZE;
}

static void small_streams(void) {
  small_mesh();
  proto_mesh_desc md = {SV, ST, 3, spos, stri, suv, 1.0f / 4096};
  proto_target_desc tg[3] = {small_target(0), small_target(1), small_target(2)};
  float w[3] = {0.25f, 0.125f, 0};
  uint32_t oidx[3] = {2, 7, 18};
  int32_t oq[9] = {1000, -2000, 37, 1, 2, 3, -40000, 5, 0};
  for (int v2 = 0; v2 < 3; v2++) /* 2: version 2 in the entropy coding */
    for (int shift = v2 ? 0 : 5; shift <= 5; shift += 5) {
      int entropy = v2 == 2;
      proto_buf b;
      proto_buf_init(&b);
      proto_trav t;
      memset(&t, 0, sizeof(t));
      /* Two targets in the snapshot; the third arrives as TARGET. */
      md.target_count = 2;
      snapshot_frame(&b, v2, (uint8_t)shift, &md, tg, w, 3, oidx, oq, scanon, &t, 4, entropy, NULL);
      size_t snap_at = 0, delta_at = b.len;
      uint32_t didx[4] = {0, 7, 11, 19};
      int32_t dq[12] = {5, 6, 7, 0, 0, 0, 100000, -100000, 3, -1, -1, -1};
      if (v2) proto_encode_delta2(&b, 5, 0, (uint8_t)shift, 4, didx, dq, &t);
      else proto_encode_delta(&b, 5, 0, 4, didx, dq);
      size_t target_at = b.len;
      if (v2) {
        proto_grid2 g;
        proto_mesh_desc m2 = md;
        m2.triangles = scanon;
        proto_grid2_init(&g, &m2, (uint8_t)shift);
        g.entropy = (uint8_t)entropy;
        proto_encode_target_add2(&b, 6, PROTO_FLAG_MORE, 2, 0.5f, &tg[2], &g, &t);
      } else {
        proto_encode_target_add(&b, 6, 2, 0.5f, &tg[2]);
      }
      size_t weights_at = b.len;
      uint32_t widx[2] = {2, 0};
      float wv[2] = {-3.5f, 0.75f};
      proto_encode_weights(&b, 6, 0, 2, widx, wv);
      size_t meta_at = b.len;
      uint32_t drv[2] = {0, 2};
      proto_encode_target_meta(&b, 7, 0, 1, -2, 2, 1, 2, drv);
      float dense[3] = {0.5f, -1, 2};
      proto_encode_weights(&b, 8, 0, 3, NULL, dense);
      int16_t q16[2] = {32767, -16384};
      proto_encode_weights_qrun(&b, 9, 0, 1, 2, q16, 3.05185094e-05f);
      int8_t q8[3] = {1, -2, 127};
      proto_encode_weights_qrun8(&b, 10, 0, 0, 3, q8, 0.5f);
      char name[64];
      snprintf(name, sizeof(name), "small-v%d-shift%d%s", entropy ? 2 : v2 + 1, shift, entropy ? "-entropy" : "");
      write_stream(name, &b);
      if (v2 == 1 && shift == 5) small_trav = t; /* the traversal the version 2 cases decode against */
      if (entropy && shift == 5) { /* the entropy SNAPSHOT: every cut and damage gets the C verdict */
        uint32_t n;
        const uint8_t *p = payload(&b, snap_at, &n);
        write_cases("snapshot2", p, n, 7);
      }
      if (!entropy && (shift == 5 || !v2)) {
        /* Decoder cases from these frames (the shift-5 version 2 traversal is the one kept). */
        uint32_t n;
        const uint8_t *p = payload(&b, snap_at, &n);
        write_cases(v2 ? "snapshot2" : "snapshot", p, n, 3);
        p = payload(&b, delta_at, &n);
        write_cases(v2 ? "delta2" : "delta", p, n, 1);
        p = payload(&b, target_at, &n);
        write_cases(v2 ? "target_add2" : "target_add", p, n, 1);
        if (!v2) {
          p = payload(&b, weights_at, &n);
          write_cases("weights", p, n, 1);
          p = payload(&b, meta_at, &n);
          write_cases("target_meta", p, n, 1);
          size_t at = meta_at + PROTO_HEADER_SIZE + n; /* dense, then the two runs */
          for (int k = 0; k < 3; k++) {
            p = payload(&b, at, &n);
            write_cases("weights", p, n, 1);
            at += PROTO_HEADER_SIZE + n;
          }
          for (size_t a = 0; a < b.len;) { /* every header */
            uint32_t len = proto_load_u32(b.data + a + 8);
            write_cases("header", b.data + a, PROTO_HEADER_SIZE, 1);
            a += PROTO_HEADER_SIZE + len;
          }
        }
      }
      if (!(v2 == 1 && shift == 5)) proto_trav_fini(&t);
      proto_buf_fini(&b);
    }
}

/* ---- the demo head: a real mesh, sculpted, on the default grid and lossless ------------------- */

static void demo_streams(void) {
  mesh *m = NULL;
  if (mesh_demo_head(&m)) exit(4);
  proto_target_desc *tg = calloc(m->target_count, sizeof(*tg));
  float *w = calloc(m->target_count, sizeof(float));
  for (uint32_t i = 0; i < m->target_count; i++) {
    const mesh_target *x = &m->targets[i];
    tg[i] = (proto_target_desc){x->name, 0, 0, 1, 0, 0, NULL, x->count, x->indices, x->deltas};
    w[i] = (float)(i % 4) * 0.25f;
  }
  uint32_t *canon = malloc(sizeof(uint32_t) * 3 * m->triangle_count);
  uint32_t nsc = 500, *sidx = malloc(sizeof(uint32_t) * nsc);
  int32_t *sq = malloc(sizeof(int32_t) * 3 * nsc);
  for (uint32_t i = 0; i < nsc; i++) {
    sidx[i] = 20000 + 3 * i;
    for (int c = 0; c < 3; c++) sq[3 * i + c] = (int32_t)((i * 7919u + (uint32_t)c * 104729u) % 20001u) - 10000;
  }
  /* The server's quantum: float(bbox diagonal · 2^-20) (srv_session.c). */
  double lo[3], hi[3];
  for (int c = 0; c < 3; c++) lo[c] = hi[c] = m->positions[c];
  for (uint32_t v = 0; v < m->vertex_count; v++)
    for (int c = 0; c < 3; c++) {
      double x = m->positions[3 * (size_t)v + c];
      lo[c] = x < lo[c] ? x : lo[c];
      hi[c] = x > hi[c] ? x : hi[c];
    }
  double diag = sqrt((hi[0] - lo[0]) * (hi[0] - lo[0]) + (hi[1] - lo[1]) * (hi[1] - lo[1]) + (hi[2] - lo[2]) * (hi[2] - lo[2]));
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, m->target_count, m->positions, m->triangles, m->uvs,
                        (float)ldexp(diag, -20)};
  int64_t *copies = malloc(sizeof(int64_t) * (m->target_count + 1)); /* the twins deformd names */
  for (uint32_t i = 0; i < m->target_count; i++) copies[i] = mesh_target_copy_of(m, i);
  for (int k = 0; k < 4; k++) { /* shift 0 and 5, today's coding and the entropy one */
    int shift = k & 1 ? 5 : 0, entropy = k >= 2;
    proto_buf b;
    proto_buf_init(&b);
    proto_trav t;
    for (uint32_t i = 0; i < nsc; i++)
      for (int c = 0; c < 3; c++) sq[3 * i + c] = (int32_t)((i * 7919u + (uint32_t)c * 104729u) % 20001u) - 10000;
    snapshot_frame(&b, 1, (uint8_t)shift, &md, tg, w, nsc, sidx, sq, canon, &t, 12, entropy, copies);
    for (uint32_t i = 0; i < nsc; i++) sq[3 * i] += 977;
    proto_encode_delta2(&b, 13, 0, (uint8_t)shift, nsc, sidx, sq, &t);
    char name[64];
    snprintf(name, sizeof(name), "demo-head-shift%d%s", shift, entropy ? "-entropy" : "");
    write_stream(name, &b);
    proto_trav_fini(&t);
    proto_buf_fini(&b);
  }
  free(tg), free(w), free(canon), free(sidx), free(sq), free(copies);
  mesh_destroy(m);
}

/* ---- a surface off a voxel grid: lanes that repeat a neighbour's value (§12.11) ------------------ */

/* The mesh of test_entropy.c's voxel test (whose positions it checks take the model with copies
 * at shift 5), as a session orders it, in the entropy coding on the default grid and lossless. */
static void voxel_streams(void) {
  mesh *m = NULL;
  if (mesh_demo_voxel_sphere(40, &m) || mesh_optimize_triangle_order(m)) exit(4);
  double diag = 0;
  for (int c = 0; c < 3; c++) diag += (double)(m->bbox_max[c] - m->bbox_min[c]) * (m->bbox_max[c] - m->bbox_min[c]);
  proto_mesh_desc md = {m->vertex_count, m->triangle_count, 0, m->positions, m->triangles, NULL,
                        (float)ldexp(sqrt(diag), -20)};
  uint32_t *canon = malloc(sizeof(uint32_t) * 3 * m->triangle_count);
  for (int shift = 0; shift <= 5; shift += 5) {
    proto_buf b;
    proto_buf_init(&b);
    proto_trav t;
    snapshot_frame(&b, 1, (uint8_t)shift, &md, NULL, NULL, 0, NULL, NULL, canon, &t, 3, 1, NULL);
    char name[64];
    snprintf(name, sizeof(name), "voxel-sphere-shift%d-entropy", shift);
    write_stream(name, &b);
    proto_trav_fini(&t);
    proto_buf_fini(&b);
  }
  free(canon);
  mesh_destroy(m);
}

/* ---- capability lists: known and unknown names, and each limit ----------------------------------- */

static size_t caps_list(uint8_t *p, const char *const *names, int count) {
  size_t n = 0;
  for (int i = 0; i < count; i++) {
    p[n++] = (uint8_t)strlen(names[i]);
    memcpy(p + n, names[i], strlen(names[i]));
    n += strlen(names[i]);
  }
  return n;
}

static void caps_cases(void) {
  uint8_t p[2048];
  static const char *const mixed[] = {"presence.v2", "noop", "zz-9_a"};
  size_t n = caps_list(p, mixed, 3);
  write_cases("caps", p, n, 1);
  write_case("caps", p, 0);
  char names[34][40];
  const char *ptrs[34];
  for (int i = 0; i < 34; i++) {
    snprintf(names[i], sizeof(names[i]), "cap%d", i);
    ptrs[i] = names[i];
  }
  write_case("caps", p, caps_list(p, ptrs, 32)); /* the most names */
  write_case("caps", p, caps_list(p, ptrs, 33)); /* one too many */
  static const char *const longest[] = {"abcdefghijklmnopqrstuvwxyz012345"};
  write_case("caps", p, caps_list(p, longest, 1));
  static const char *const too_long[] = {"abcdefghijklmnopqrstuvwxyz0123456"};
  write_case("caps", p, caps_list(p, too_long, 1));
  static const char *const twice[] = {"noop", "x", "noop"};
  write_case("caps", p, caps_list(p, twice, 3));
  static const char *const upper[] = {"Noop"};
  write_case("caps", p, caps_list(p, upper, 1));
  static const char *const space[] = {"no op"};
  write_case("caps", p, caps_list(p, space, 1));
}

/* ---- PRESENCE: a server's update, records that are refused, and authors' colours ---------------- */

/* TEXCLIP and TEXWEIGHTS (docs/protocol.md §18): a clip laid out and filled by the C reference
 * (shared/mesh_texpca.c), its frames as decoder cases, and the reference's RGB8 rebuild of one
 * frame, which the JavaScript rebuild must give (texclip.js). */
static void texclip_cases(void) {
  mesh_texclip_rect rects[2] = {{1, 1, 4, 3}, {6, 2, 5, 4}};
  uint32_t count[3] = {2, 3, 1};
  mesh_texclip c;
  if (mesh_texclip_layout(&c, 12, 9, 2, rects, 2, count, NULL, 0) != 0) exit(1);
  float vals[3 * 12 * 9];
  for (int i = 0; i < 3 * 12 * 9; i++) vals[i] = (float)(0.3 + 0.4 * sin(i * 0.37));
  mesh_texclip_set_mean(&c, vals);
  for (uint32_t r = 0; r < 3; r++)
    for (uint32_t k = 0; k < count[r]; k++) {
      for (int i = 0; i < 3 * 12 * 9; i++) vals[i] = (float)(sin(i * 0.11 + r + 2.0 * k) - 0.2);
      float w[2] = {(float)(0.2 - 0.07 * k), (float)(-0.15 + 0.05 * r)};
      mesh_texclip_set_component(&c, r, k, vals, w);
    }
  proto_texclip_window w[3];
  proto_texclip_comp k[6];
  uint8_t rgb[3 * 12 * 9 * 8];
  for (size_t i = 0; i < (size_t)c.layers * 12 * 9; i++) memcpy(rgb + 3 * i, c.texels + 4 * i, 3);
  for (uint32_t r = 0; r < 3; r++)
    w[r] = (proto_texclip_window){(uint16_t)c.windows[r].x, (uint16_t)c.windows[r].y, (uint16_t)c.windows[r].w,
                                  (uint16_t)c.windows[r].h, (uint8_t)c.windows[r].first, (uint8_t)c.windows[r].count};
  for (uint32_t i = 0; i < 6; i++)
    k[i] = (proto_texclip_comp){(uint8_t)c.comps[i].layer, (uint16_t)c.comps[i].x, (uint16_t)c.comps[i].y,
                                c.comps[i].scale, c.comps[i].offset};
  proto_texclip pc = {.id = 3, .name = {"blush", 5}, .width = 12, .height = 9, .frame_count = 2, .fps = 30,
                      .window_count = 3, .component_count = 6, .layers = (uint8_t)c.layers, .windows = w, .comps = k,
                      .texels = rgb};
  proto_buf b;
  proto_buf_init(&b);
  if (c.layers > 8 || proto_encode_texclip(&b, &pc) != 0) exit(1);
  write_cases("texclip", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 7);
  proto_buf wb;
  proto_buf_init(&wb);
  proto_texweights_entry e = {.id = 3, .mean = 1, .count = 6};
  memcpy(e.weights, c.weights + 6, sizeof(float) * 6); /* frame 1 */
  proto_encode_texweights(&wb, &e, 1);
  write_cases("texweights", wb.data + PROTO_HEADER_SIZE, proto_load_u32(wb.data + 8), 1);
  uint8_t frame[3 * 12 * 9];
  mesh_texclip_frame_rgb8(&c, c.weights + 6, frame);
  item_begin("texclip_rebuild");
  fputs("\"clip\":", out);
  hex(b.data, b.len);
  fputs(",\"weights\":", out);
  hex(wb.data, wb.len);
  fputs(",\"rgb\":", out);
  hex(frame, sizeof(frame));
  item_end();
  proto_buf_fini(&wb);
  proto_buf_fini(&b);
  mesh_texclip_fini(&c);
}

static void presence_cases(void) {
  proto_buf b;
  proto_buf_init(&b);
  size_t at = proto_presence_begin(&b);
  proto_presence_put_clear(&b);
  proto_presence_info ana = {3, PROTO_ROLE_EDITOR, PROTO_CLIENT_VIEW, PROTO_PRES_EDITING, 1500, {"ana", 3}};
  proto_presence_info bob = {0x80000001u, PROTO_ROLE_VIEWER, PROTO_CLIENT_PAGE, PROTO_PRES_PRIVATE | PROTO_PRES_REMOTE, 0,
                             {"bob", 3}};
  proto_presence_put_info(&b, &ana);
  proto_presence_put_info(&b, &bob);
  proto_presence_state st = {3, PROTO_PRES_CURSOR | PROTO_PRES_CAMERA, PROTO_TOOL_BRUSH0 + 1, {0.1f, 0.2f, 0.3f},
                             {0, 0.6f, 0.8f}, 0.02f, {0, 0.1f, 1.5f}, {0, 0.1f, 0}, 0.785398f};
  proto_presence_put_state(&b, &st);
  proto_presence_put_leave(&b, 7);
  proto_presence_end(&b, at);
  write_cases("presence", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  b.len = 0;
  at = proto_presence_begin(&b); /* a client's: ABOUT, then a STATE with the cursor only */
  proto_presence_put_about(&b, PROTO_CLIENT_PAGE, PROTO_PRES_PRIVATE);
  st.id = 0;
  st.flags = PROTO_PRES_CURSOR;
  proto_presence_put_state(&b, &st);
  proto_presence_end(&b, at);
  write_cases("presence", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  b.len = 0;
  write_case("presence", NULL, 0); /* no records */
  uint8_t many[PROTO_MAX_PRESENCE_RECORDS + 1];
  memset(many, PROTO_PRES_CLEAR, sizeof(many));
  write_case("presence", many, PROTO_MAX_PRESENCE_RECORDS);     /* the most records */
  write_case("presence", many, PROTO_MAX_PRESENCE_RECORDS + 1); /* one too many */
  proto_buf_fini(&b);
  static const char *const names[] = {"ana", "bob", "anonymous-7", "Zoë", "a", "x"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    uint8_t rgb[3];
    proto_presence_colour(names[i], strlen(names[i]), rgb);
    item_begin("colour");
    fprintf(out, "\"name\":\"%s\",\"rgb\":[%u,%u,%u]", names[i], rgb[0], rgb[1], rgb[2]);
    item_end();
  }
}

/* ---- messages a client receives besides the session's: WELCOME, ERROR, BYE, PONG ---------------- */

static void other_cases(void) {
  proto_buf b;
  proto_buf_init(&b);
  proto_welcome wm = {9, 1, {"demo", 4}};
  proto_welcome_opts wo = {2, 0, 5, 10.0f, 6.30575e-06f, 0, 0, 0};
  proto_encode_welcome2(&b, 0, &wm, &wo);
  uint32_t n = proto_load_u32(b.data + 8);
  write_cases("welcome", b.data + PROTO_HEADER_SIZE, n, 1);
  b.len = 0;
  wo.caps = PROTO_CAP_BIT(PROTO_CAP_NOOP); /* a WELCOME that answers a caps option */
  wo.caps_option = 1;
  proto_encode_welcome2(&b, 0, &wm, &wo);
  write_cases("welcome", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  b.len = 0;
  wo.caps = PROTO_CAP_BIT(PROTO_CAP_UP); /* granted "up": the session's up axis follows (option 8) */
  wo.up = 'z';
  proto_encode_welcome2(&b, 0, &wm, &wo);
  write_cases("welcome", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  wo.up = 0;
  b.len = 0;
  proto_encode_welcome(&b, 3, &wm);
  write_cases("welcome", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  caps_cases();
  presence_cases();
  texclip_cases();
  b.len = 0;
  proto_encode_error(&b, PROTO_ERR_FORBIDDEN, 7, "editing needs the server's token");
  write_cases("error", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  b.len = 0;
  proto_ping pg = {123456789012345ull, 987654321ull, 42};
  proto_encode_ping(&b, PROTO_PONG, &pg);
  write_cases("ping", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  /* BULK answers: a GET of 2 of 5 welded vertices' positions, a target's, and a SET's. */
  static const float vals[6] = {0.5f, -1, 2.25f, 1e-7f, 0, -3};
  proto_bulk_answer ba = {77, PROTO_BULK_GET, PROTO_BULK_POSITIONS, PROTO_BULK_WELDED, 0, 3, 2, 5, NULL};
  b.len = 0;
  proto_encode_bulk_answer(&b, 9, &ba, vals);
  write_cases("bulk", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  ba = (proto_bulk_answer){78, PROTO_BULK_GET, PROTO_BULK_TARGET, 0, 4, 0, 1, 1, NULL};
  b.len = 0;
  proto_encode_bulk_answer(&b, 9, &ba, vals);
  write_cases("bulk", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  ba = (proto_bulk_answer){79, PROTO_BULK_SET, PROTO_BULK_SCULPT, 0, 0, 10, 2, 41077, NULL};
  b.len = 0;
  proto_encode_bulk_answer(&b, 10, &ba, NULL);
  write_cases("bulk", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  b.len = 0; /* MASK (capability "mask"): its bytes, and each byte changed, against the JS decoder */
  const uint32_t mv[3] = {2, 5, 9};
  const float mm[3] = {0.25f, 1.0f, 0.5f};
  proto_encode_mask(&b, 42, 10, 3, mv, mm);
  write_cases("mask", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  write_case("header", b.data, PROTO_HEADER_SIZE); /* type 20 is a header a granted client reads */
  b.len = 0; /* TEXTURE (capability "texture"): MATERIALS and a small IMAGE, each byte changed */
  const proto_material mat[2] = {{0, 10, 1, 1, {1.0f, 0.5f, 0.25f, 1.0f}}, {10, 5, 0, 0, {1, 1, 1, 1}}};
  proto_encode_texture_materials(&b, 1, 2, mat);
  write_cases("texture", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  write_case("header", b.data, PROTO_HEADER_SIZE);
  b.len = 0;
  uint8_t px[2 * 3 * 4];
  for (size_t i = 0; i < sizeof(px); i++) px[i] = (uint8_t)(17 * i);
  proto_encode_texture_image(&b, 0, "skin.png", 2, 3, px);
  write_cases("texture", b.data + PROTO_HEADER_SIZE, proto_load_u32(b.data + 8), 1);
  proto_buf_fini(&b);
}

/* ---- encoders: the C bytes for given arguments ----------------------------------------------------- */

static void enc(const char *fn, const char *args, proto_buf *b) {
  item_begin("encoder");
  fprintf(out, "\"fn\":\"%s\",\"args\":%s,\"hex\":", fn, args);
  hex(b->data, b->len);
  item_end();
  b->len = 0;
}

static void encoder_cases(void) {
  proto_buf b;
  proto_buf_init(&b);
  proto_hello h = {1, 2, {"demo", 4}, {"s3cret", 6}};
  proto_encode_hello(&b, &h);
  enc("hello", "{\"session\":\"demo\",\"role\":2,\"token\":\"s3cret\",\"protocol\":1}", &b);
  proto_hello_opts ho = {.codec = 1, .max_rate = 10.0f, .tolerance = 0.001f};
  proto_encode_hello2(&b, &h, &ho);
  enc("hello", "{\"session\":\"demo\",\"role\":2,\"token\":\"s3cret\",\"protocol\":2,\"codec\":1,\"maxRate\":10,\"tolerance\":0.001}", &b);
  ho.author = (proto_str){"ana", 3};
  proto_encode_hello2(&b, &h, &ho);
  enc("hello", "{\"session\":\"demo\",\"role\":2,\"token\":\"s3cret\",\"protocol\":2,\"codec\":1,\"maxRate\":10,\"tolerance\":0.001,\"author\":\"ana\"}", &b);
  ho.caps = PROTO_CAP_BIT(PROTO_CAP_NOOP);
  proto_encode_hello2(&b, &h, &ho);
  enc("hello", "{\"session\":\"demo\",\"role\":2,\"token\":\"s3cret\",\"protocol\":2,\"codec\":1,\"maxRate\":10,\"tolerance\":0.001,\"author\":\"ana\",\"caps\":[\"noop\"]}", &b);
  ho.author = (proto_str){NULL, 0};
  ho.caps = 0;
  ho.caps_option = 1; /* asks for nothing, but asks whether the server knows capabilities */
  proto_encode_hello2(&b, &h, &ho);
  enc("hello", "{\"session\":\"demo\",\"role\":2,\"token\":\"s3cret\",\"protocol\":2,\"codec\":1,\"maxRate\":10,\"tolerance\":0.001,\"caps\":[]}", &b);
  uint32_t wi[2] = {0, 11};
  float wv[2] = {0.5f, 0.2f};
  proto_encode_edit_weights(&b, 7, 2, wi, wv);
  enc("editWeights", "[7,[[0,0.5],[11,0.2]]]", &b);
  uint32_t oi[2] = {12, 300};
  int32_t oq[6] = {10, 0, -10, -1, 200, 64};
  proto_encode_edit_offsets(&b, 8, 2, oi, oq);
  enc("editOffsets", "[8,[12,300],[10,0,-10,-1,200,64]]", &b);
  uint32_t handle[2] = {12, 13}, anchors[1] = {40};
  proto_gesture_begin gb = {2, 0, 1, PROTO_NO_PICK, 0, 0, {2, NULL}, {0, NULL}, {1, NULL}};
  proto_encode_edit_gesture_begin(&b, 30, &gb, handle, NULL, anchors);
  enc("gestureBegin", "[30,{\"gesture\":2,\"mode\":0,\"iterations\":1,\"handle\":[12,13],\"anchors\":[40]}]", &b);
  proto_gesture_begin gp = {1, 1, 2, 20400, 0.01f, 0.04f, {0, NULL}, {0, NULL}, {0, NULL}};
  proto_encode_edit_gesture_begin(&b, 20, &gp, NULL, NULL, NULL);
  enc("gestureBegin", "[20,{\"gesture\":1,\"mode\":1,\"iterations\":2,\"pick\":20400,\"handleRadius\":0.01,\"roiRadius\":0.04}]", &b);
  proto_gesture_drag gd = {1, {0, 0.005f, 0.01f}, {0, 0, 0.0871557f, 0.9961947f}, 1, {0, -0.0156f, 0.1138f}};
  proto_encode_edit_gesture_drag(&b, 22, &gd);
  enc("gestureDrag", "[22,{\"gesture\":1,\"translate\":[0,0.005,0.01],\"rotate\":[0,0,0.0871557,0.9961947],\"pivot\":[0,-0.0156,0.1138]}]", &b);
  proto_gesture_drag gd2 = {1, {0, 0, 0.01f}, {0, 0, 0, 1}, 0, {0, 0, 0}};
  proto_encode_edit_gesture_drag(&b, 21, &gd2);
  enc("gestureDrag", "[21,{\"gesture\":1,\"translate\":[0,0,0.01]}]", &b);
  proto_encode_edit_gesture_end(&b, 23, 1);
  enc("gestureEnd", "[23,1]", &b);
  proto_brush_sample bs[2] = {{{0, 0.1f, 0.2f}, {0, 0, 0.001f}, 0.02f, 0.5f}, {{0.01f, 0.1f, 0.2f}, {0, 0, 0}, 0.03f, 0.25f}};
  proto_encode_edit_brush(&b, 40, 1, 2, 1, 2, bs);
  enc("brush", "[40,1,2,1,[{\"center\":[0,0.1,0.2],\"direction\":[0,0,0.001],\"radius\":0.02,\"strength\":0.5},"
               "{\"center\":[0.01,0.1,0.2],\"direction\":[0,0,0],\"radius\":0.03,\"strength\":0.25}]]", &b);
  /* Brush kind 7 (layer) with every flag: mirror, front faces only, continue, auto-smoothing 9/15. */
  proto_encode_edit_brush(&b, 47, 7, 0,
                          PROTO_BRUSH_MIRROR_X | PROTO_BRUSH_FRONT_ONLY | PROTO_BRUSH_CONTINUE | (9 << PROTO_BRUSH_AUTOSMOOTH_SHIFT),
                          1, bs);
  enc("brush", "[47,7,0,151,[{\"center\":[0,0.1,0.2],\"direction\":[0,0,0.001],\"radius\":0.02,\"strength\":0.5}]]", &b);
  /* Symmetry across y = 0 (byte 8, issue 26), and across x = 0 by byte 8, which also sets flag bit 0. */
  proto_encode_edit_brush_mirror(&b, 48, 5, 0, PROTO_BRUSH_CONTINUE, PROTO_BRUSH_AXIS_Y, 1, bs);
  enc("brush", "[48,5,0,4,[{\"center\":[0,0.1,0.2],\"direction\":[0,0,0.001],\"radius\":0.02,\"strength\":0.5}],2]", &b);
  proto_encode_edit_brush_mirror(&b, 49, 5, 0, 0, PROTO_BRUSH_AXIS_X, 1, bs);
  enc("brush", "[49,5,0,0,[{\"center\":[0,0.1,0.2],\"direction\":[0,0,0.001],\"radius\":0.02,\"strength\":0.5}],1]", &b);
  uint32_t rv[3] = {5, 1, 5};
  proto_encode_edit_reset(&b, 41, 3, rv);
  enc("reset", "[41,[5,1,5]]", &b);
  proto_encode_edit_reset(&b, 42, 0, NULL);
  enc("reset", "[42,[]]", &b);
  proto_blend_pin pins[2] = {{100, {0.1f, 0.2f, 0.3f}}, {7, {-1, 0, 1}}};
  proto_encode_edit_blend_pins(&b, 43, PROTO_BLEND_KEEP_CLOSE, 0.01f, 2, pins);
  enc("blendPins", "[43,1,0.01,[{\"vertex\":100,\"position\":[0.1,0.2,0.3]},{\"vertex\":7,\"position\":[-1,0,1]}]]", &b);
  proto_encode_edit_history(&b, 44, 0);
  enc("history", "[44,false]", &b);
  proto_encode_edit_history(&b, 45, 1);
  enc("history", "[45,true]", &b);
  proto_encode_edit_author(&b, 46, "ana");
  enc("author", "[46,\"ana\"]", &b);
  const float ms[5] = {0, 0.1f, 0.2f, 0.02f, 0.5f};
  proto_encode_edit_mask(&b, 48, &(proto_mask_edit){.op = PROTO_MASK_STROKE, .tool = 1, .falloff = 3, .count = 1}, ms);
  enc("editMask", "[48,{\"op\":0,\"tool\":1,\"falloff\":3,\"samples\":[{\"center\":[0,0.1,0.2],\"radius\":0.02,\"strength\":0.5}]}]", &b);
  proto_encode_edit_mask(&b, 49, &(proto_mask_edit){.op = PROTO_MASK_AUTO, .mode = 1, .combine = 1, .vertex = 77, .angle = 45, .rings = 3}, NULL);
  enc("editMask", "[49,{\"op\":3,\"mode\":1,\"combine\":1,\"vertex\":77,\"angle\":45,\"rings\":3}]", &b);
  proto_encode_edit_mask(&b, 50, &(proto_mask_edit){.op = PROTO_MASK_INVERT}, NULL);
  enc("editMask", "[50,{\"op\":2}]", &b);
  proto_ping pg = {123456789012345ull, 0, 42};
  proto_encode_ping(&b, PROTO_PING, &pg);
  enc("ping", "[8,{\"seq\":42,\"t0\":123456789012345}]", &b);
  proto_encode_bye(&b, PROTO_ERR_NONE, "bye");
  enc("bye", "[0,\"bye\"]", &b);
  proto_encode_bulk_get(&b, 7, PROTO_BULK_SCULPT, 0, 0, 100, 1);
  enc("bulkGet", "[7,2,0,0,100,1]", &b);
  proto_encode_bulk_get(&b, 8, PROTO_BULK_TARGET, PROTO_BULK_WELDED, 3, 0, PROTO_BULK_TO_END);
  enc("bulkGet", "[8,3,1,3,0,4294967295]", &b);
  static const float set[6] = {0.001f, 0, -0.002f, 0.25f, -0.5f, 1e-6f};
  proto_encode_bulk_set(&b, 9, PROTO_BULK_WELDED, 12, 2, set);
  enc("bulkSet", "[9,1,12,2,[0.001,0,-0.002,0.25,-0.5,0.000001]]", &b);
  size_t pat = proto_presence_begin(&b);
  proto_presence_state ps = {0, PROTO_PRES_CURSOR | PROTO_PRES_CAMERA, PROTO_TOOL_DEFORM, {0.1f, 0.2f, 0.3f},
                             {0, 0, 1}, 0.05f, {0, 0, 2}, {0, 0.1f, 0}, 0.8f};
  proto_presence_put_state(&b, &ps);
  proto_presence_end(&b, pat);
  enc("presence", "[{\"flags\":3,\"tool\":1,\"hit\":[0.1,0.2,0.3],\"normal\":[0,0,1],\"radius\":0.05,"
                  "\"eye\":[0,0,2],\"target\":[0,0.1,0],\"fov\":0.8},null]", &b);
  pat = proto_presence_begin(&b);
  proto_presence_put_about(&b, PROTO_CLIENT_PAGE, PROTO_PRES_PRIVATE);
  ps.flags = PROTO_PRES_CAMERA; /* the camera only: the cursor's fields go as zeros */
  proto_presence_put_state(&b, &ps);
  proto_presence_end(&b, pat);
  enc("presence", "[{\"flags\":2,\"tool\":1,\"hit\":[0.1,0.2,0.3],\"normal\":[0,0,1],\"radius\":0.05,"
                  "\"eye\":[0,0,2],\"target\":[0,0.1,0],\"fov\":0.8},{\"client\":2,\"flags\":2}]", &b);
  proto_buf_fini(&b);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: web-fixtures DIR\n");
    return 1;
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s/fixtures.jsonl", argv[1]);
  out = fopen(path, "w");
  if (!out) {
    perror(path);
    return 1;
  }
  small_streams();
  demo_streams();
  voxel_streams();
  other_cases();
  encoder_cases();
  proto_trav_fini(&small_trav);
  fclose(out);
  return 0;
}
