/*
 * proto_trav.c — the codecs version 2 bodies are built from (proto2.h): the traversal of a
 * triangle list (ranks and parallelogram predictors), per-vertex value streams coded as
 * prediction residuals, and vertex sets as runs of ranks.
 *
 * Why a traversal: the meshoptimizer vertex codec predicts each record from the one before it,
 * which only pays when neighbours in the stream are neighbours on the surface. The mesh's
 * vertex order is a contract (every index clients see), so instead of reordering vertices the
 * values travel in the order the triangles first use them, each as its residual from the
 * parallelogram rule over triangles already seen. On the demo head at the default grid this
 * takes positions from 170 KB (contract order, meshopt alone) to 84 KB, UVs from 124 KB to 61
 * KB, target deltas from 106 KB to 56 KB, and a drag's DELTA from 3.3 to 1.9 bytes per vertex
 * (measurements in docs/performance.md, "deform-bench stream").
 *
 * DOES NOT know message layouts (proto_snap2.c does) or do I/O.
 */
#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>

#include "proto2.h"
#include "proto_internal.h"
#include "proto_rans.h"

#define CHECK_RC PROTO__CHECK

/* Triangles remembered to find the neighbour across an edge: the session's walk order
 * (shared/mesh_order.c) meets a vertex's neighbours within a few triangles, so 16 finds it for
 * 99.99 % of the demo head's vertices while keeping the search a constant cost (no edge map on
 * either side). */
#define TRAV_FIFO 16

void proto_trav_fini(proto_trav *t) {
  free(t->order);
  free(t->rank);
  free(t->pred);
  free(t->para);
  free(t->mark);
  free(t->slot);
  memset(t, 0, sizeof(*t));
}

static void set_pred(uint32_t *p, uint32_t a, uint32_t b, uint32_t c) {
  p[0] = a;
  p[1] = b;
  p[2] = c;
}

/* Rank k's predictors (vertices that all have ranks already) as ranks, and whether they make a
 * true parallelogram. */
static void set_entry(proto_trav *t, uint32_t k, const uint32_t p[3]) {
  for (int e = 0; e < 3; e++) t->pred[3 * (size_t)k + e] = p[e] == PROTO_NO_VERTEX ? p[e] : t->rank[p[e]];
  t->para[k] = p[0] != PROTO_NO_VERTEX && p[0] != p[1] && p[2] != p[0];
}

int proto_trav_init(proto_trav *t, const uint32_t *tri, uint32_t triangle_count, uint32_t vertex_count) {
  memset(t, 0, sizeof(*t));
  size_t nv = vertex_count;
  t->vertex_count = vertex_count;
  t->order = malloc(sizeof(uint32_t) * (nv + 1));
  t->rank = malloc(sizeof(uint32_t) * (nv + 1));
  t->pred = malloc(sizeof(uint32_t) * 3 * (nv + 1));
  t->mark = calloc(nv + 1, sizeof(uint32_t));
  t->slot = malloc(sizeof(uint32_t) * (nv + 1));
  t->para = malloc(nv + 1);
  if (!t->order || !t->rank || !t->pred || !t->mark || !t->slot || !t->para) {
    proto_trav_fini(t);
    return PROTO_ENOMEM;
  }
  for (size_t v = 0; v < nv; v++) t->rank[v] = PROTO_NO_VERTEX;
  const uint32_t *fifo[TRAV_FIFO];
  uint32_t nfifo = 0, head = 0, k = 0, prev = PROTO_NO_VERTEX;
  for (size_t i = 0; i < triangle_count; i++) {
    const uint32_t *tr = tri + 3 * i;
    if (tr[0] >= vertex_count || tr[1] >= vertex_count || tr[2] >= vertex_count) { /* checked as it goes: one pass */
      proto_trav_fini(t);
      return PROTO_EINVAL;
    }
    for (int j = 0; j < 3; j++) {
      uint32_t v = tr[j], a = tr[(j + 1) % 3], b = tr[(j + 2) % 3];
      if (t->rank[v] != PROTO_NO_VERTEX) continue;
      uint32_t p[3];
      int seen_a = t->rank[a] != PROTO_NO_VERTEX, seen_b = t->rank[b] != PROTO_NO_VERTEX;
      if (seen_a && seen_b) {
        /* The most recent triangle with the directed edge b -> a lies across edge a -> b. */
        uint32_t c = a;
        for (uint32_t f = 0; f < nfifo && c == a; f++) {
          const uint32_t *u = fifo[(head + TRAV_FIFO - 1 - f) % TRAV_FIFO];
          for (int e = 0; e < 3; e++)
            if (u[e] == b && u[(e + 1) % 3] == a) {
              c = u[(e + 2) % 3];
              break;
            }
        }
        set_pred(p, a, b, c); /* c == a when none was found: the prediction is p(b) */
      } else if (seen_a) {
        set_pred(p, a, a, a);
      } else if (seen_b) {
        set_pred(p, b, b, b);
      } else {
        set_pred(p, prev, prev, prev);
      }
      set_entry(t, k, p);
      t->rank[v] = k;
      t->order[k++] = v;
      prev = v;
    }
    fifo[head] = tr;
    head = (head + 1) % TRAV_FIFO;
    if (nfifo < TRAV_FIFO) nfifo++;
  }
  t->used = k;
  for (uint32_t v = 0; v < vertex_count; v++) { /* used by no triangle: last, ascending */
    if (t->rank[v] != PROTO_NO_VERTEX) continue;
    uint32_t p[3];
    set_pred(p, prev, prev, prev);
    set_entry(t, k, p);
    t->rank[v] = k;
    t->order[k++] = v;
    prev = v;
  }
  return 0;
}

/* ---- subsets: membership by epoch stamps ------------------------------------------------------ */

/* Marks `list` as the current subset, entry i at slot i. */
static void mark_subset(proto_trav *t, const uint32_t *list, uint32_t count) {
  if (++t->epoch == 0) { /* wrapped: old stamps could alias the new epoch */
    memset(t->mark, 0, sizeof(uint32_t) * t->vertex_count);
    t->epoch = 1;
  }
  for (uint32_t i = 0; i < count; i++) {
    t->mark[list[i]] = t->epoch;
    t->slot[list[i]] = i;
  }
}

/* Entry i's rank: a full stream's entries are the ranks themselves. */
static uint32_t entry_rank(const proto_trav *t, const uint32_t *list, uint32_t i) { return list ? t->rank[list[i]] : i; }

/* The entry indices of the values that predict entry i, for the three predictors; 0 where it
 * has none (it is predicted from the previous entry, or 0). Full streams (list NULL) hold every
 * vertex at its rank, so theirs are the traversal's own, read in order; a list's come from its
 * marks. */
static int predictors(const proto_trav *t, const uint32_t *list, uint32_t i, uint32_t s[3]) {
  const uint32_t *e = t->pred + 3 * (size_t)entry_rank(t, list, i);
  if (e[0] == PROTO_NO_VERTEX) return 0;
  if (!list) {
    s[0] = e[0], s[1] = e[1], s[2] = e[2];
    return 1;
  }
  for (int k = 0; k < 3; k++) {
    uint32_t u = t->order[e[k]];
    if (t->mark[u] != t->epoch) return 0;
    s[k] = t->slot[u];
  }
  return 1;
}

static uint32_t zigzag32(uint32_t r) { return (r << 1) ^ (uint32_t)-(int32_t)(r >> 31); }
static uint32_t unzigzag32(uint32_t z) { return (z >> 1) ^ (uint32_t)-(int32_t)(z & 1); }

/* Residual of entry i, or value from residual, lane by lane, in 32-bit wrapping arithmetic
 * (exactly invertible, so float bits survive it too). */
static void predict(const proto_trav *t, const uint32_t *list, uint32_t i, int lanes, const uint32_t *val,
                    uint32_t *out) {
  uint32_t s[3];
  if (predictors(t, list, i, s)) {
    for (int l = 0; l < lanes; l++)
      out[l] = val[(size_t)lanes * s[0] + l] + val[(size_t)lanes * s[1] + l] - val[(size_t)lanes * s[2] + l];
  } else {
    for (int l = 0; l < lanes; l++) out[l] = i ? val[(size_t)lanes * (i - 1) + l] : 0;
  }
}

/* ---- value streams ------------------------------------------------------------------------------ */

enum { STREAM_VARINT = 0, STREAM_MESHOPT = 1, STREAM_RANS = 2 };

/* The entropy mode's models (docs/protocol.md §12.11). Each residual is a value of
 * proto_rans.h's model, coded in a context: whether the entry had a true parallelogram
 * prediction (its residuals are several times smaller than those of a one-vertex or
 * previous-entry one) and the size class of the value coded just before (the previous lane of
 * this entry, or lane 0 of the previous entry for lane 0): residual sizes go together across the
 * lanes of a vertex and along the traversal.
 *
 * The second model (STREAM_COPIES in the header byte) adds three symbols after the values: "this
 * lane is the same as predictor a, b or c's", taken where the entry has a true parallelogram
 * prediction and the residual is not 0. Scans made by marching cubes (the Stanford dragon among
 * them) put every vertex on an edge of a voxel grid, so most lanes of most vertices repeat a
 * neighbour's value exactly, which a parallelogram of three such values rarely lands on. A copy
 * counts as size 0, and lanes after the first are also told apart by how many lanes of the entry
 * were copies (0, 1, 2 or more): on a voxel grid's edges two lanes of three repeat and the third
 * does not. Smooth surfaces have no such lanes and keep the first model, whose tables are smaller. */
#define STREAM_COPIES 0x40
#define STREAM_MEDIAN 0x3f
#define STREAM_COPY_SYMBOLS 3
#define STREAM_MAX_COPY_LANES 3
static int rans_contexts(int model, int lanes) {
  return model ? PROTO_RANS_CLASSES * (2 + 6 * (lanes - 1)) : 2 * PROTO_RANS_CLASSES * lanes;
}
static int rans_symbols(int model) { return PROTO_RANS_VALUE_SYMBOLS + (model ? STREAM_COPY_SYMBOLS : 0); }
static int rans_context(int model, int lanes, int para, int lane, int copies, int prev_len, int median) {
  int cls = proto__rans_class(prev_len, median);
  if (!model) return ((para * lanes) + lane) * PROTO_RANS_CLASSES + cls;
  if (lane == 0) return para * PROTO_RANS_CLASSES + cls;
  return PROTO_RANS_CLASSES * (2 + ((lane - 1) * 2 + para) * 3 + (copies < 2 ? copies : 2)) + cls;
}

/* Whether entry i has a true parallelogram prediction: three predictors in the list, the first
 * two different (a == b is a one-vertex prediction, c == a predicts p(b)); its predictors'
 * entries in s. */
static int has_parallelogram(const proto_trav *t, const uint32_t *list, uint32_t i, uint32_t s[3]) {
  return t->para[entry_rank(t, list, i)] && predictors(t, list, i, s);
}

/* The predictor (0, 1, 2) whose value lane l of entry i repeats, where the model may code it so,
 * else 3. */
static int copy_of(const uint32_t *z, const uint32_t *val, const uint32_t s[3], uint32_t i, int lanes, int l) {
  size_t at = (size_t)lanes * i + l;
  if (z[at] == 0) return 3; /* a residual of 0 is the cheaper symbol */
  int k = 0;
  while (k < 3 && val[at] != val[(size_t)lanes * s[k] + l]) k++;
  return k;
}

static int rans_put(proto_buf *b, proto_trav *t, const uint32_t *list, uint32_t count, int lanes, const uint32_t *z,
                    const uint32_t *val, int model) {
  int median = proto__rans_median(z, (size_t)count * (size_t)lanes);
  proto_rans_enc e;
  int rc = proto__rans_enc_init(&e, rans_contexts(model, lanes), rans_symbols(model));
  int prev0 = median;
  for (uint32_t i = 0; rc == 0 && i < count; i++) {
    uint32_t s[3];
    int para = has_parallelogram(t, list, i, s), prev = prev0, copies = 0;
    for (int l = 0; l < lanes; l++) {
      size_t at = (size_t)lanes * i + l;
      int ctx = rans_context(model, lanes, para, l, copies, prev, median);
      int k = model && para ? copy_of(z, val, s, i, lanes, l) : 3;
      if (k < 3) {
        proto__rans_enc_sym(&e, ctx, PROTO_RANS_VALUE_SYMBOLS + k);
        prev = 0;
        copies++;
      } else {
        proto__rans_put_value(&e, ctx, z[at]);
        prev = proto__bit_length(z[at]);
      }
      if (l == 0) prev0 = prev;
    }
  }
  proto__put_u8(b, (uint8_t)(median | (model ? STREAM_COPIES : 0)));
  if (rc == 0) rc = proto__rans_enc_finish(&e, b);
  proto__rans_enc_fini(&e);
  return rc;
}

/* How many lanes the second model would code as copies. */
static size_t count_copies(proto_trav *t, const uint32_t *list, uint32_t count, int lanes, const uint32_t *z,
                           const uint32_t *val) {
  size_t n = 0;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t s[3];
    if (has_parallelogram(t, list, i, s))
      for (int l = 0; l < lanes; l++) n += copy_of(z, val, s, i, lanes, l) < 3;
  }
  return n;
}

/* One entry of a mode 2 stream (rans_get's loop body; `lanes` and `model` are constants where
 * it is inlined, so the lanes unroll and the first model has no copies to work out). A copy and
 * a value are both worked out and one kept by mask: whether a lane is a copy is a coin toss on a
 * voxel grid's scans, which a branch would lose (cachegrind's model of a predictor: 0.36 M of the
 * dragon join's 3.07 M mispredicted branches were that one). A copy symbol reads no raw bits
 * (proto__rans_value_of), and its predictors' entries are s (all 0 where the entry has none: then
 * a copy is refused). Returns 0, or 1 where a copy without a parallelogram prediction came before
 * any other failure. */
static inline __attribute__((always_inline)) int rans_entry(proto_rans_dec *w, const proto_trav *t,
                                                            const uint32_t *list, uint32_t i, const int lanes,
                                                            const int model, int median, int *prev0, uint32_t *val) {
  uint32_t s[3] = {0, 0, 0};
  int has = predictors(t, list, i, s), para = has && t->para[entry_rank(t, list, i)];
  int prev = *prev0, copies = 0, bad = 0;
  uint32_t *out = val + (size_t)lanes * i;
#pragma GCC unroll 4
  for (int l = 0; l < lanes; l++) {
    uint32_t pred = has ? val[(size_t)lanes * s[0] + l] + val[(size_t)lanes * s[1] + l] - val[(size_t)lanes * s[2] + l]
                        : i ? out[l - lanes] : 0;
    int sym = proto__rans_dec_sym(w, rans_context(model, lanes, para, l, copies, prev, median));
    int copy = model && sym >= PROTO_RANS_VALUE_SYMBOLS; /* only the model with copies has these symbols */
    /* A copy needs the predictors: the first such lane, where nothing failed before it, fails
     * the stream after this entry with EINVAL (what the later lanes then do is not kept). */
    bad |= copy & !para & (w->err == 0);
    uint32_t from = val[(size_t)lanes * s[copy ? sym - PROTO_RANS_VALUE_SYMBOLS : 0] + l];
    uint32_t coded = pred + unzigzag32(proto__rans_value_of(w, sym)), keep = 0u - (uint32_t)copy;
    out[l] = (from & keep) | (coded & ~keep);
    copies += copy;
    /* The next context's size class from the symbol (a copy counts as 0), not from the value:
     * it need not wait for the raw bits. */
    prev = proto__rans_len_of(sym);
    if (l == 0) *prev0 = prev;
  }
  return bad;
}

/* Decodes the values themselves: each entry's prediction is made as its lanes are decoded (the
 * predictors are earlier entries), so the values take one pass and copies need no second one. */
static int rans_get(const uint8_t *p, size_t len, proto_trav *t, const uint32_t *list, uint32_t count, int lanes,
                    uint32_t *val) {
  if (len < 1) return PROTO_ETRUNCATED;
  int median = p[0] & STREAM_MEDIAN, model = (p[0] & STREAM_COPIES) != 0;
  if (median > 32 || (p[0] & ~(STREAM_MEDIAN | STREAM_COPIES)) || (model && lanes > STREAM_MAX_COPY_LANES))
    return PROTO_EINVAL;
  proto_rans_dec d;
  CHECK_RC(proto__rans_dec_init(&d, p + 1, len - 1, rans_contexts(model, lanes), rans_symbols(model)));
  int prev0 = median, bad = 0;
  /* An entry without predictors that is refused as a copy still reads val at entry 0 first. */
  if (count) memset(val, 0, sizeof(uint32_t) * (size_t)lanes);
  /* A copy whose address goes nowhere: the compiler keeps the states in registers instead of
   * reloading them after every store to val (which could alias d, whose address escapes). */
  proto_rans_dec w = d;
#define RANS_ENTRIES(LANES, MODEL) \
  for (uint32_t i = 0; i < count && !w.err && !bad; i++) bad = rans_entry(&w, t, list, i, LANES, MODEL, median, &prev0, val)
  if (lanes == 3 && model)
    RANS_ENTRIES(3, 1); /* a scan's positions */
  else if (lanes == 3)
    RANS_ENTRIES(3, 0); /* positions, targets */
  else if (lanes == 2 && !model)
    RANS_ENTRIES(2, 0); /* UVs */
  else
    RANS_ENTRIES(lanes, model);
#undef RANS_ENTRIES
  if (bad) w.err = PROTO_EINVAL; /* the copy failed first (rans_entry) */
  d = w;
  int rc = proto__rans_dec_finish(&d);
  proto__rans_dec_fini(&d);
  return rc;
}

static size_t varint_len(uint32_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

int proto__stream_put(proto_buf *b, proto_trav *t, const uint32_t *list, uint32_t count, int lanes,
                      const uint32_t *val, int entropy) {
  size_t n = (size_t)count * (size_t)lanes;
  uint32_t *z = malloc(sizeof(uint32_t) * (n + 1));
  if (!z) return PROTO_ENOMEM;
  if (list) mark_subset(t, list, count);
  size_t vbytes = 0;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t p[4];
    predict(t, list, i, lanes, val, p);
    for (int l = 0; l < lanes; l++) {
      z[(size_t)lanes * i + l] = zigzag32(val[(size_t)lanes * i + l] - p[l]);
      vbytes += varint_len(z[(size_t)lanes * i + l]);
    }
  }
  size_t stride = 4 * (size_t)lanes, cap = meshopt_encodeVertexBufferBound(count, stride);
  uint8_t *mo = count ? malloc(cap) : NULL;
  size_t mbytes = mo ? meshopt_encodeVertexBuffer(mo, cap, z, count, stride) : 0;
  int use_meshopt = mbytes > 0 && mbytes < vbytes;
  size_t len = 1 + (use_meshopt ? mbytes : vbytes);
  int rc = 0;
  if (entropy && count) {
    /* The entropy mode when it is the smallest (its tables do not pay on short lists), in the
     * model with copies when that is smaller still (tried where 1 lane in 64 would be one). */
    proto_buf r;
    proto_buf_init(&r);
    rc = rans_put(&r, t, list, count, lanes, z, val, 0);
    if (rc == 0 && lanes <= STREAM_MAX_COPY_LANES && count_copies(t, list, count, lanes, z, val) >= n / 64 + 1) {
      proto_buf r2;
      proto_buf_init(&r2);
      rc = rans_put(&r2, t, list, count, lanes, z, val, 1);
      if (rc == 0 && r2.len < r.len) {
        proto_buf k = r;
        r = r2;
        r2 = k;
      }
      proto_buf_fini(&r2);
    }
    if (rc == 0 && 1 + r.len < len) {
      proto__put_u32(b, (uint32_t)(1 + r.len));
      proto__put_u8(b, STREAM_RANS);
      uint8_t *d = proto__reserve(b, r.len);
      if (d) memcpy(d, r.data, r.len);
      proto_buf_fini(&r);
      free(mo);
      free(z);
      return b->failed ? PROTO_ENOMEM : 0;
    }
    proto_buf_fini(&r);
  }
  if (rc == 0 && len > UINT32_MAX) rc = PROTO_ETOOBIG;
  if (rc == 0) {
    proto__put_u32(b, (uint32_t)len);
    proto__put_u8(b, use_meshopt ? STREAM_MESHOPT : STREAM_VARINT);
    if (use_meshopt) {
      uint8_t *d = proto__reserve(b, mbytes);
      if (d) memcpy(d, mo, mbytes);
    } else {
      for (size_t i = 0; i < n; i++) proto__put_varint(b, z[i]);
    }
    rc = b->failed ? PROTO_ENOMEM : 0;
  }
  free(mo);
  free(z);
  return rc;
}

int proto__stream_get(proto_cur *c, proto_trav *t, const uint32_t *list, uint32_t count, int lanes, uint32_t *val) {
  uint32_t len;
  uint8_t mode;
  const uint8_t *bytes;
  PROTO__CHECK(proto__get_u32(c, &len));
  if (len < 1) return PROTO_EINVAL;
  PROTO__CHECK(proto__get(c, len, &bytes));
  mode = bytes[0];
  size_t n = (size_t)count * (size_t)lanes, stride = 4 * (size_t)lanes;
  if (list) mark_subset(t, list, count);
  if (mode == STREAM_RANS) {
    return rans_get(bytes + 1, len - 1, t, list, count, lanes, val); /* the values, predicted as they come */
  } else if (mode == STREAM_MESHOPT) {
    /* The codec spends at least 2 bits per 16 records per byte lane: a body shorter than that
     * cannot hold `count` records, so it is refused before anything is decoded. */
    if (count == 0 || (size_t)(len - 1) < (n * 4) / 64 + 1) return PROTO_ETRUNCATED;
    if (meshopt_decodeVertexBuffer(val, count, stride, bytes + 1, len - 1) != 0) return PROTO_EINVAL;
  } else if (mode == STREAM_VARINT) {
    proto_cur e = {bytes + 1, bytes + len};
    for (size_t i = 0; i < n; i++) PROTO__CHECK(proto__get_varint(&e, &val[i]));
    if (e.at != e.end) return PROTO_ETRAILING;
  } else {
    return PROTO_EINVAL;
  }
  for (uint32_t i = 0; i < count; i++) {
    uint32_t p[4];
    for (int l = 0; l < lanes; l++) val[(size_t)lanes * i + l] = unzigzag32(val[(size_t)lanes * i + l]);
    predict(t, list, i, lanes, val, p);
    for (int l = 0; l < lanes; l++) val[(size_t)lanes * i + l] += p[l];
  }
  return 0;
}

/* ---- vertex sets as runs of ranks ---------------------------------------------------------- */

/* An LSD radix sort, 11 bits a pass and only as many passes as `limit` needs (two below 4 M).
 * qsort with a comparison function was 14 % of the demo head's SNAPSHOT decode (its 68 targets'
 * lists), and its comparisons the decode's most mispredicted branch; a DELTA of a whole-mesh
 * drag sorts every vertex. */
void proto__sort_keys(proto_key_at *p, proto_key_at *tmp, size_t k, uint32_t limit) {
  for (int shift = 0; shift < 32 && (limit - 1) >> shift; shift += 11) {
    size_t count[2048] = {0};
    for (size_t i = 0; i < k; i++) count[(p[i].key >> shift) & 2047]++;
    for (size_t d = 0, at = 0; d < 2048; d++) {
      size_t n = count[d];
      count[d] = at;
      at += n;
    }
    for (size_t i = 0; i < k; i++) tmp[count[(p[i].key >> shift) & 2047]++] = p[i];
    memcpy(p, tmp, sizeof(*p) * k);
  }
}

int proto__rank_order(const proto_trav *t, const uint32_t *indices, uint32_t count, uint32_t *perm) {
  proto_key_at *k = malloc(sizeof(*k) * (2 * (size_t)count + 1)); /* and the sort's scratch */
  if (!k) return PROTO_ENOMEM;
  for (uint32_t i = 0; i < count; i++) {
    if (indices[i] >= t->vertex_count) {
      free(k);
      return PROTO_EINVAL;
    }
    k[i].key = t->rank[indices[i]];
    k[i].at = i;
  }
  proto__sort_keys(k, k + count, count, t->vertex_count);
  int rc = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (i && k[i].key == k[i - 1].key) rc = PROTO_EINVAL; /* a vertex twice */
    perm[i] = k[i].at;
  }
  free(k);
  return rc;
}

/* Body: u32 count, u32 nbytes, then varint run count and per run varint gap, varint length - 1.
 * A run starts `gap` ranks after the end of the previous one (the first at rank `gap`). */
int proto__ranks_put(proto_buf *b, const proto_trav *t, const uint32_t *list, uint32_t count) {
  proto__put_u32(b, count);
  size_t len_at = b->len;
  proto__put_u32(b, 0);
  size_t start = b->len;
  uint32_t runs = 0;
  for (uint32_t i = 0; i < count; i++)
    if (i == 0 || t->rank[list[i]] != t->rank[list[i - 1]] + 1) runs++;
  proto__put_varint(b, runs);
  uint32_t end = 0;
  for (uint32_t i = 0; i < count;) {
    uint32_t j = i, r0 = t->rank[list[i]];
    while (j + 1 < count && t->rank[list[j + 1]] == t->rank[list[j]] + 1) j++;
    proto__put_varint(b, r0 - end);
    proto__put_varint(b, j - i);
    end = r0 + (j - i) + 1;
    i = j + 1;
  }
  if (b->failed) return PROTO_ENOMEM;
  if (b->len - start > UINT32_MAX) return PROTO_ETOOBIG;
  proto__st32(b->data + len_at, (uint32_t)(b->len - start));
  return 0;
}

int proto__ranks_get(proto_cur *c, const proto_trav *t, uint32_t *count, uint32_t **list) {
  uint32_t len, runs;
  const uint8_t *bytes;
  *list = NULL;
  PROTO__CHECK(proto__get_u32(c, count));
  PROTO__CHECK(proto__get_u32(c, &len));
  if (*count > t->vertex_count) return PROTO_ETOOBIG;
  PROTO__CHECK(proto__get(c, len, &bytes));
  proto_cur e = {bytes, bytes + len};
  PROTO__CHECK(proto__get_varint(&e, &runs));
  if (runs > *count || (runs == 0) != (*count == 0)) return PROTO_EINVAL;
  uint32_t *l = malloc(sizeof(uint32_t) * ((size_t)*count + 1));
  if (!l) return PROTO_ENOMEM;
  uint64_t end = 0;
  uint32_t k = 0;
  int rc = 0;
  for (uint32_t r = 0; r < runs && rc == 0; r++) {
    uint32_t gap = 0, more = 0;
    rc = proto__get_varint(&e, &gap);
    if (rc == 0) rc = proto__get_varint(&e, &more);
    uint64_t first = end + gap, n = (uint64_t)more + 1;
    if (rc == 0 && (first + n > t->vertex_count || k + n > *count)) rc = PROTO_EINVAL;
    for (uint64_t i = 0; rc == 0 && i < n; i++) l[k++] = t->order[first + i];
    end = first + n;
  }
  if (rc == 0 && k != *count) rc = PROTO_EINVAL;
  if (rc == 0 && e.at != e.end) rc = PROTO_ETRAILING;
  if (rc) {
    free(l);
    return rc;
  }
  *list = l;
  return 0;
}
