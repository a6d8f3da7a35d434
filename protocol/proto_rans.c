/*
 * proto_rans.c — rANS with static per-context tables (proto_rans.h), the coder behind the
 * `entropy` capability (docs/protocol.md §12.11).
 *
 * Why rANS with tables sent ahead rather than an adaptive arithmetic coder: decoding a symbol
 * is one table look-up, a multiply and a shift, with no division and no model update, which is
 * what lets the page decode the dragon's 1.3 M residuals in JavaScript without falling behind
 * meshoptimizer's WebAssembly decoder; the tables cost a few hundred bytes per stream, nothing
 * next to the joins they code (and a stream too small to pay for them keeps its older mode).
 * Draco codes its attributes the same way.
 *
 * DOES NOT choose contexts or symbols (the callers' models do) or do I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "proto_rans.h"

/* ---- encoder --------------------------------------------------------------------------------- */

int proto__rans_enc_init(proto_rans_enc *e, int contexts, int symbols) {
  memset(e, 0, sizeof(*e));
  if (contexts < 1 || contexts > PROTO_RANS_MAX_CONTEXTS || symbols < 1 || symbols > PROTO_RANS_MAX_SYMBOLS)
    return PROTO_EINVAL;
  e->contexts = contexts;
  e->symbols = symbols;
  proto_buf_init(&e->bits);
  return 0;
}

void proto__rans_enc_fini(proto_rans_enc *e) {
  free(e->queue);
  proto_buf_fini(&e->bits);
  memset(e, 0, sizeof(*e));
}

void proto__rans_enc_sym(proto_rans_enc *e, int context, int symbol) {
  if (e->count == e->cap) {
    size_t cap = e->cap ? 2 * e->cap : 4096;
    uint16_t *q = realloc(e->queue, sizeof(*q) * cap);
    if (!q) {
      e->failed = 1;
      return;
    }
    e->queue = q;
    e->cap = cap;
  }
  e->queue[e->count++] = (uint16_t)((unsigned)context << 8 | (unsigned)symbol);
}

void proto__rans_enc_bits(proto_rans_enc *e, uint32_t value, int nbits) {
  if (nbits <= 0) return;
  if (nbits < 32) value &= (1u << nbits) - 1;
  e->acc |= (uint64_t)value << e->nacc;
  e->nacc += nbits;
  while (e->nacc >= 8) {
    proto__put_u8(&e->bits, (uint8_t)e->acc);
    e->acc >>= 8;
    e->nacc -= 8;
  }
}

/* Scales counts to frequencies summing to PROTO_RANS_TOTAL, every used symbol at least 1. */
static void normalise(const uint32_t *count, int n, uint64_t total, uint16_t *freq) {
  uint32_t sum = 0;
  int big = 0;
  for (int s = 0; s < n; s++) {
    freq[s] = 0;
    if (!count[s]) continue;
    uint64_t f = ((uint64_t)count[s] * PROTO_RANS_TOTAL + total / 2) / total;
    freq[s] = (uint16_t)(f ? f : 1);
    sum += freq[s];
    if (count[s] > count[big]) big = s;
  }
  /* Rounding leaves the sum a little off: take it from or give it to the largest frequencies. */
  while (sum > PROTO_RANS_TOTAL) {
    int m = -1;
    for (int s = 0; s < n; s++)
      if (freq[s] > 1 && (m < 0 || freq[s] > freq[m])) m = s;
    uint32_t d = sum - PROTO_RANS_TOTAL, room = freq[m] - 1u;
    if (d > room) d = room;
    if (d > freq[m] / 2u && freq[m] > 2) d = freq[m] / 2u; /* spread the cut over several */
    freq[m] = (uint16_t)(freq[m] - d);
    sum -= d;
  }
  if (sum < PROTO_RANS_TOTAL) freq[big] = (uint16_t)(freq[big] + (PROTO_RANS_TOTAL - sum));
}

int proto__rans_enc_finish(proto_rans_enc *e, proto_buf *b) {
  if (e->failed || e->bits.failed) return PROTO_ENOMEM;
  int nc = e->contexts, ns = e->symbols;
  uint32_t *count = calloc((size_t)nc * (size_t)ns, sizeof(uint32_t));
  uint16_t *freq = calloc((size_t)nc * (size_t)ns, sizeof(uint16_t));
  uint32_t *start = calloc((size_t)nc * (size_t)ns, sizeof(uint32_t));
  uint8_t *out = malloc(2 * e->count + 16); /* at most a u16 a symbol, and the states */
  int rc = count && freq && start && out ? 0 : PROTO_ENOMEM;
  for (size_t i = 0; rc == 0 && i < e->count; i++) count[(size_t)(e->queue[i] >> 8) * (size_t)ns + (e->queue[i] & 0xff)]++;
  for (int c = 0; rc == 0 && c < nc; c++) {
    uint64_t total = 0;
    int n = 0;
    for (int s = 0; s < ns; s++)
      if (count[(size_t)c * ns + s]) total += count[(size_t)c * ns + s], n = s + 1;
    proto__put_varint(b, (uint32_t)n);
    if (!n) continue;
    normalise(count + (size_t)c * ns, n, total, freq + (size_t)c * ns);
    uint32_t acc = 0;
    for (int s = 0; s < n; s++) {
      start[(size_t)c * ns + s] = acc;
      acc += freq[(size_t)c * ns + s];
      proto__put_varint(b, freq[(size_t)c * ns + s]);
    }
  }
  /* rANS codes backwards: the bytes come out last first, and the decoder reads them forward.
   * Symbol i goes with state i mod 2; both states share the byte stream. */
  size_t at = 2 * e->count + 16;
  uint32_t xs[2] = {PROTO_RANS_LOW, PROTO_RANS_LOW};
  for (size_t i = e->count; rc == 0 && i-- > 0;) {
    size_t k = (size_t)(e->queue[i] >> 8) * (size_t)ns + (e->queue[i] & 0xff);
    uint32_t f = freq[k], x = xs[i & 1];
    uint32_t xmax = ((PROTO_RANS_LOW >> PROTO_RANS_BITS) << 16) * f;
    if (x >= xmax) { /* once at most: x < 2^31, and xmax >= 2^19 */
      out[--at] = (uint8_t)(x >> 8);
      out[--at] = (uint8_t)x;
      x >>= 16;
    }
    xs[i & 1] = ((x / f) << PROTO_RANS_BITS) + (x % f) + start[k];
  }
  if (rc == 0) {
    for (int s = 1; s >= 0; s--) /* the states first, state 0 then 1, each little-endian */
      for (int i = 3; i >= 0; i--) out[--at] = (uint8_t)(xs[s] >> (8 * i));
    size_t m = 2 * e->count + 16 - at;
    proto__put_varint(b, (uint32_t)m);
    uint8_t *d = proto__reserve(b, m);
    if (d) memcpy(d, out + at, m);
    if (e->nacc > 0) proto__rans_enc_bits(e, 0, 8 - e->nacc); /* pad the last byte */
    d = e->bits.len ? proto__reserve(b, e->bits.len) : NULL;
    if (d) memcpy(d, e->bits.data, e->bits.len);
    rc = b->failed || e->bits.failed ? PROTO_ENOMEM : 0;
  }
  free(count);
  free(freq);
  free(start);
  free(out);
  return rc;
}

/* ---- decoder --------------------------------------------------------------------------------- */

void proto__rans_dec_fini(proto_rans_dec *d) {
  free(d->fs);
  free(d->slot);
  free(d->used);
  memset(d, 0, sizeof(*d));
}

int proto__rans_dec_init(proto_rans_dec *d, const uint8_t *p, size_t n, int contexts, int symbols) {
  memset(d, 0, sizeof(*d));
  if (contexts < 1 || contexts > PROTO_RANS_MAX_CONTEXTS || symbols < 1 || symbols > PROTO_RANS_MAX_SYMBOLS)
    return PROTO_EINVAL;
  d->contexts = contexts;
  d->symbols = symbols;
  d->fs = calloc((size_t)contexts * (size_t)symbols, sizeof(uint32_t));
  d->used = calloc((size_t)contexts, 1);
  d->slot = calloc((size_t)contexts << PROTO_RANS_BITS, 1);
  if (!d->fs || !d->used || !d->slot) {
    proto__rans_dec_fini(d);
    return PROTO_ENOMEM;
  }
  proto_cur c = {p, p + n};
  int rc = 0;
  for (int k = 0; rc == 0 && k < contexts; k++) {
    uint32_t ns, sum = 0;
    rc = proto__get_varint(&c, &ns);
    if (rc == 0 && ns > (uint32_t)symbols) rc = PROTO_EINVAL;
    for (uint32_t s = 0; rc == 0 && s < ns; s++) {
      uint32_t f;
      rc = proto__get_varint(&c, &f);
      if (rc == 0 && (f > PROTO_RANS_TOTAL || sum + f > PROTO_RANS_TOTAL)) rc = PROTO_EINVAL;
      if (rc) break;
      size_t at = (size_t)k * (size_t)symbols + s;
      d->fs[at] = f << 16 | sum;
      memset(d->slot + ((size_t)k << PROTO_RANS_BITS) + sum, (int)s, f);
      sum += f;
    }
    if (rc == 0 && ns && sum != PROTO_RANS_TOTAL) rc = PROTO_EINVAL;
    d->used[k] = ns != 0;
  }
  uint32_t m = 0;
  const uint8_t *r = NULL;
  if (rc == 0) rc = proto__get_varint(&c, &m);
  if (rc == 0 && m < 8) rc = PROTO_ETRUNCATED;
  if (rc == 0) rc = proto__get(&c, m, &r);
  for (int s = 0; rc == 0 && s < 2; s++) {
    const uint8_t *q = r + 4 * s;
    d->x[s] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    if (d->x[s] < PROTO_RANS_LOW || d->x[s] >= PROTO_RANS_LOW << 16) rc = PROTO_EINVAL;
  }
  if (rc == 0) {
    d->at = r + 8;
    d->end = r + m;
    d->bat = c.at;
    d->bend = c.end;
  }
  if (rc) proto__rans_dec_fini(d);
  return rc;
}

int proto__rans_dec_finish(proto_rans_dec *d) {
  if (d->err) return d->err;
  if (d->x[0] != PROTO_RANS_LOW || d->x[1] != PROTO_RANS_LOW || d->at != d->end) return PROTO_EINVAL;
  /* Only the padding of the last byte may be left (the accumulator may hold more bits than nacc). */
  if (d->bat != d->bend || d->nacc >= 8 || (d->acc & ((1ull << d->nacc) - 1)) != 0) return PROTO_ETRAILING;
  return 0;
}
