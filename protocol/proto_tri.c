/*
 * proto_tri.c — the triangles piece in the `entropy` capability's layout (docs/protocol.md
 * §12.11): connectivity in rank space, and the vertex order as a value stream.
 *
 * Why: meshoptimizer's index codec is cheap only where a new vertex is the next index; the
 * session's order is the file's (a scan's is the scanner's), so on the dragon nearly every new
 * vertex went out as an explicit varint: 1.83 MB of 3.18, 2.1 bytes a triangle. Renamed to
 * their ranks (the order the triangles first use them) the triangles code as a run of "next"
 * vertices and edge-FIFO hits, and the order itself, rank → vertex, is predicted from the
 * vertices of the edge each vertex is first seen across (the larger of their indices): about
 * 10 bits a vertex instead of 19, since a scan numbers neighbours close together.
 *
 * Piece: u32 nbytes; u32 ilen; u8 median; one rANS block (proto_rans.h) holding, in order,
 *   ilen bytes of meshoptimizer's index codec (format 1) for the triangles in rank space;
 *   the triangles the codec rotated (2.4 % of the dragon's): their count, then per triangle the
 *   gap since the previous one and its rotation − 1 (0 or 1), that turn them back into the
 *   session's corner order;
 *   V vertices, in traversal order of the rank-space triangles, each as the value
 *   zigzag(vertex − prediction).
 * The decoder builds the traversal of §12.3 from the rank-space triangles and renames it,
 * which is the traversal of the session's triangles (§12.3 depends on the triangles' structure
 * only, and the vertices used by no triangle are checked to come ascending).
 *
 * DOES NOT decode anything but the triangles piece, or do I/O.
 */
#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>

#include "proto2.h"
#include "proto_internal.h"
#include "proto_rans.h"

#define CHECK PROTO__CHECK

/* Contexts: 0 the header, data and tail bytes of the index codec, 1 their varint
 * continuations, 2–33 a code byte after one with that high nibble (which FIFO edge it reused,
 * or none: strips and fans repeat it) and whether that one's third vertex was the next new one,
 * 34 the rotated triangles' count and gaps, 35 their rotations, 36–43 the order: whether the
 * vertex has a two-vertex prediction, and the size class of the previous value. */
#define CTX_ROTATION 34
#define CTX_ORDER 36
#define TRI_CONTEXTS (CTX_ORDER + 2 * PROTO_RANS_CLASSES)

static int byte_context(uint32_t j, uint32_t triangle_count, const uint8_t *bytes) {
  if (j >= 1 && j <= triangle_count) return 2 + (j > 1 ? (bytes[j - 1] >> 4) * 2 + ((bytes[j - 1] & 15) == 0) : 0);
  return j > triangle_count + 1 && (bytes[j - 1] & 0x80) ? 1 : 0;
}

static uint32_t zigzag(uint32_t r) { return (r << 1) ^ (uint32_t)-(int32_t)(r >> 31); }
static uint32_t unzigzag(uint32_t z) { return (z >> 1) ^ (uint32_t)-(int32_t)(z & 1); }

/* The prediction of the vertex at traversal position i (rank-space vertex u, predictors p[3] in
 * rank space), from the vertices of those already known: the larger of the two edge vertices, or
 * the one vertex, or the previous position's vertex. *two says which kind it was. */
static uint32_t predict_vertex(const uint32_t *vertex, const uint32_t *p, uint32_t prev, int *two) {
  *two = 0;
  if (p[0] == PROTO_NO_VERTEX) return prev;
  uint32_t a = vertex[p[0]], b = vertex[p[1]];
  *two = p[0] != p[1];
  return a > b ? a : b;
}

static void rotate(uint32_t *t, int r) {
  uint32_t x[3] = {t[0], t[1], t[2]};
  for (int k = 0; k < 3; k++) t[k] = x[(k + r) % 3];
}

int proto_snapshot2_triangles_entropy(proto_buf *b, const uint32_t *canonical, uint32_t triangle_count,
                                      const proto_trav *t) {
  size_t ni = 3 * (size_t)triangle_count, nv = t->vertex_count;
  uint32_t *rt = malloc(sizeof(uint32_t) * (ni + 1)), *back = malloc(sizeof(uint32_t) * (ni + 1));
  uint32_t *z = malloc(sizeof(uint32_t) * (nv + 1));
  size_t cap = ni ? meshopt_encodeIndexBufferBound(ni, nv) : 1;
  uint8_t *ib = malloc(cap);
  int rc = rt && back && z && ib ? 0 : PROTO_ENOMEM;
  for (size_t i = 0; rc == 0 && i < ni; i++) {
    if (canonical[i] >= nv) rc = PROTO_EINVAL;
    else rt[i] = t->rank[canonical[i]];
  }
  size_t ilen = 0;
  if (rc == 0 && ni) {
    meshopt_encodeIndexVersion(1);
    ilen = meshopt_encodeIndexBuffer(ib, cap, rt, ni);
    if (!ilen || meshopt_decodeIndexBuffer(back, ni, 4, ib, ilen) != 0) rc = PROTO_EINVAL;
  }
  /* The order: in rank space the traversal visits vertex r at position r. */
  uint32_t prev = 0;
  for (size_t r = 0; rc == 0 && r < nv; r++) {
    int two;
    z[r] = zigzag(t->order[r] - predict_vertex(t->order, t->pred + 3 * r, prev, &two));
    prev = t->order[r];
  }
  int median = rc == 0 ? proto__rans_median(z, nv) : 0;
  proto_rans_enc e;
  if (rc == 0) rc = proto__rans_enc_init(&e, TRI_CONTEXTS, PROTO_RANS_MAX_SYMBOLS);
  if (rc) goto done;
  for (size_t j = 0; j < ilen; j++) proto__rans_enc_sym(&e, byte_context((uint32_t)j, triangle_count, ib), ib[j]);
  /* Rotations: the rotated triangles as (gap, rotation − 1); back[] keeps each one's rotation. */
  uint32_t rotated = 0;
  for (size_t i = 0; i < triangle_count && rc == 0; i++) {
    int r = 0;
    while (r < 3 && !(back[3 * i + (size_t)r] == rt[3 * i] && back[3 * i + (size_t)(r + 1) % 3] == rt[3 * i + 1] &&
                      back[3 * i + (size_t)(r + 2) % 3] == rt[3 * i + 2]))
      r++;
    if (r == 3) rc = PROTO_EINVAL; /* the codec changed a triangle beyond a rotation */
    back[i] = (uint32_t)r;         /* entries below 3i+3 are read no more */
    rotated += r != 0;
  }
  if (rc == 0) proto__rans_put_value(&e, CTX_ROTATION, rotated);
  for (size_t i = 0, last = 0; i < triangle_count && rc == 0; i++) {
    if (!back[i]) continue;
    proto__rans_put_value(&e, CTX_ROTATION, (uint32_t)(i - last));
    proto__rans_enc_sym(&e, CTX_ROTATION + 1, (int)back[i] - 1);
    last = i + 1;
  }
  int prev_len = median;
  for (size_t r = 0; r < nv && rc == 0; r++) {
    int two = t->pred[3 * r] != PROTO_NO_VERTEX && t->pred[3 * r] != t->pred[3 * r + 1];
    proto__rans_put_value(&e, CTX_ORDER + (two ? 0 : PROTO_RANS_CLASSES) + proto__rans_class(prev_len, median), z[r]);
    prev_len = proto__bit_length(z[r]);
  }
  size_t at = b->len;
  proto__put_u32(b, 0);
  proto__put_u32(b, (uint32_t)ilen);
  proto__put_u8(b, (uint8_t)median);
  if (rc == 0) rc = proto__rans_enc_finish(&e, b);
  proto__rans_enc_fini(&e);
  if (rc == 0 && b->len - at - 4 > UINT32_MAX) rc = PROTO_ETOOBIG;
  if (rc == 0 && !b->failed) proto__st32(b->data + at, (uint32_t)(b->len - at - 4));
  if (rc) b->len = at;
done:
  free(rt);
  free(back);
  free(z);
  free(ib);
  return rc ? rc : b->failed ? PROTO_ENOMEM : 0;
}

/* ---- decoder ---------------------------------------------------------------------------------- */

/* The rank-space triangles: index bytes, the codec, the rotations. */
static int get_rank_triangles(proto_rans_dec *d, uint32_t ilen, uint32_t triangle_count, uint32_t *rt) {
  size_t ni = 3 * (size_t)triangle_count;
  uint8_t *ib = malloc((size_t)ilen + 1);
  if (!ib) return PROTO_ENOMEM;
  /* byte_context's cases as loops of their own (the encoder keeps the one function). */
  proto_rans_dec w = *d; /* a copy whose address goes nowhere: its states stay in registers */
  uint32_t code_end = triangle_count + 1 < ilen ? triangle_count + 1 : ilen, j = 1;
  if (ilen) ib[0] = (uint8_t)proto__rans_dec_sym(&w, 0);
  if (j < code_end) ib[j++] = (uint8_t)proto__rans_dec_sym(&w, 2);
  for (; j < code_end && !w.err; j++) ib[j] = (uint8_t)proto__rans_dec_sym(&w, 2 + (ib[j - 1] >> 4) * 2 + ((ib[j - 1] & 15) == 0));
  if (j < ilen) ib[j++] = (uint8_t)proto__rans_dec_sym(&w, 0);
  for (; j < ilen && !w.err; j++) ib[j] = (uint8_t)proto__rans_dec_sym(&w, ib[j - 1] >> 7);
  *d = w;
  int rc = d->err;
  if (rc == 0 && ni && meshopt_decodeIndexBuffer(rt, ni, 4, ib, ilen) != 0) rc = PROTO_EINVAL;
  free(ib);
  /* A coder failure decides before what the garbage it returned would (as in JavaScript). */
  uint32_t rotated = rc == 0 ? proto__rans_get_value(d, CTX_ROTATION) : 0;
  if (rc == 0 && !d->err && rotated > triangle_count) rc = PROTO_EINVAL;
  for (uint64_t k = 0, at = 0; rc == 0 && k < rotated && !d->err; k++) {
    at += proto__rans_get_value(d, CTX_ROTATION);
    int r = d->err ? 0 : proto__rans_dec_sym(d, CTX_ROTATION + 1);
    if (d->err) break;
    if (at >= triangle_count || r > 1) rc = PROTO_EINVAL;
    else rotate(rt + 3 * at++, r + 1);
  }
  return rc ? rc : d->err;
}

/* The order, rank-space vertex -> vertex, in traversal order of `rs`; every vertex once, those
 * used by no triangle ascending (so that renaming rs is §12.3's traversal of the result). */
static int get_order(proto_rans_dec *d, const proto_trav *rs, uint32_t used, int median, uint32_t *vertex) {
  uint32_t nv = rs->vertex_count, prev = 0;
  uint8_t *seen = calloc((size_t)nv + 1, 1);
  if (!seen) return PROTO_ENOMEM;
  int rc = 0, prev_len = median;
  proto_rans_dec w = *d, *dd = d; /* a copy whose address goes nowhere: its states stay in registers */
  d = &w;
  if (nv) vertex[rs->order[0]] = 0; /* what the first position, which has no predictors, reads */
  for (uint32_t i = 0; i < nv && rc == 0; i++) {
    uint32_t u = rs->order[i];
    const uint32_t *e = rs->pred + 3 * (size_t)i; /* ranks: their vertices are rs's order */
    /* predict_vertex's rule, without a branch on whether there are predictors (a traversal
     * gives all three or none) or on which vertex is larger. */
    int none = e[0] == PROTO_NO_VERTEX, two = !none && e[0] != e[1];
    uint32_t a = vertex[rs->order[none ? 0 : e[0]]], b = vertex[rs->order[none ? 0 : e[1]]];
    uint32_t guess = none ? prev : a > b ? a : b;
    int sym = proto__rans_dec_sym(d, CTX_ORDER + (two ? 0 : PROTO_RANS_CLASSES) + proto__rans_class(prev_len, median));
    if (sym >= PROTO_RANS_VALUE_SYMBOLS && !d->err) d->err = PROTO_EINVAL; /* proto__rans_get_value's check */
    uint32_t zv = sym < PROTO_RANS_VALUE_SYMBOLS ? proto__rans_value_of(d, sym) : 0;
    uint32_t v = guess + unzigzag(zv);
    if (d->err) rc = d->err;
    else if (v >= nv || seen[v] || (i > used && v < prev)) rc = PROTO_EINVAL; /* not an order, or a tail not ascending */
    seen[v < nv ? v : 0] = 1;
    vertex[u] = v;
    prev = v;
    prev_len = sym < PROTO_RANS_VALUE_SYMBOLS ? proto__rans_len_of(sym) : 0; /* from the symbol: no wait on the raw bits */
  }
  *dd = w;
  free(seen);
  return rc;
}

int proto__triangles_entropy_get(proto_cur *c, uint32_t triangle_count, uint32_t vertex_count, uint32_t **triangles,
                                 proto_trav *t) {
  uint32_t n, ilen;
  uint8_t median;
  const uint8_t *body;
  *triangles = NULL;
  memset(t, 0, sizeof(*t));
  CHECK(proto__get_u32(c, &n));
  CHECK(proto__get(c, n, &body));
  proto_cur e = {body, body + n};
  CHECK(proto__get_u32(&e, &ilen));
  CHECK(proto__get_u8(&e, &median));
  /* The codec spends a byte a triangle plus 17; no index stream compresses 64 to 1 here, so a
   * longer claim is refused before anything is allocated. */
  if (triangle_count ? ilen < triangle_count + 17u : ilen != 0) return PROTO_ETRUNCATED;
  if ((uint64_t)ilen > 64 * (uint64_t)n + 64 || median > 32) return PROTO_EINVAL;
  if ((uint64_t)vertex_count > 64 * (uint64_t)n + 64) return PROTO_ETRUNCATED; /* the order costs bits too */
  proto_rans_dec d;
  CHECK(proto__rans_dec_init(&d, e.at, (size_t)(e.end - e.at), TRI_CONTEXTS, PROTO_RANS_MAX_SYMBOLS));
  size_t ni = 3 * (size_t)triangle_count;
  uint32_t *tri = malloc(sizeof(uint32_t) * (ni + 1)), *vertex = malloc(sizeof(uint32_t) * ((size_t)vertex_count + 1));
  proto_trav rs;
  memset(&rs, 0, sizeof(rs));
  int rc = tri && vertex ? get_rank_triangles(&d, ilen, triangle_count, tri) : PROTO_ENOMEM;
  if (rc == 0) rc = proto_trav_init(&rs, tri, triangle_count, vertex_count); /* checks indices < V */
  if (rc == 0) rc = get_order(&d, &rs, rs.used, median, vertex);
  if (rc == 0) rc = proto__rans_dec_finish(&d);
  proto__rans_dec_fini(&d);
  if (rc == 0) {
    /* Rename: the triangles, and the traversal's order (same structure, the session's
     * vertices). */
    for (size_t i = 0; i < ni; i++) tri[i] = vertex[tri[i]];
    for (uint32_t i = 0; i < vertex_count; i++) {
      uint32_t v = vertex[rs.order[i]];
      rs.order[i] = v;
      rs.rank[v] = i;
    }
    /* rs.pred and rs.para are by rank, and the ranks stay. */
  }
  free(vertex);
  if (rc) {
    free(tri);
    proto_trav_fini(&rs);
    return rc;
  }
  *triangles = tri;
  *t = rs;
  return 0;
}
