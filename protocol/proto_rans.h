/*
 * proto_rans.h — the entropy coder of the `entropy` capability (docs/protocol.md §12.11):
 * rANS with one static frequency table per context, sent ahead of the symbols, and raw bits
 * beside them. Not public: the value streams (proto_trav.c) and the triangles (proto_snap2.c)
 * build their models on it.
 *
 * Layout of a coded block (what proto__rans_enc_finish writes and proto__rans_dec_init reads):
 *   per context: varint n (0 = the context codes nothing), then n varint frequencies of
 *                symbols 0 .. n-1, summing to exactly PROTO_RANS_TOTAL;
 *   varint m, then m bytes of rANS: two interleaved 31-bit states (Giesen's interleaved rANS:
 *                symbol i is coded with state i mod 2), renormalised 16 bits at a time (u16
 *                little-endian, at most one per symbol), both sharing one stream; ryg_rans's
 *                layout: the two final states first (state 0, then state 1, each
 *                little-endian), then the words in the order the decoder reads them;
 *   raw bits to the end of the block, least significant bit first, the last byte padded with 0.
 * The decoder pulls symbols one at a time with the context the caller computes from what it
 * decoded so far, so models may depend on earlier values without the coder knowing them. Two
 * states make the decoding of consecutive symbols independent chains (the state update and the
 * renormalisation of one overlap the table look-up of the next); the renormalisation and the
 * raw bits are taken without branches on the data (docs/performance.md measures what that did).
 *
 * DOES NOT know what symbols mean, or do I/O.
 */
#ifndef DEFORMD_PROTO_RANS_H
#define DEFORMD_PROTO_RANS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto_internal.h"

#define PROTO_RANS_BITS 12 /* frequencies sum to 2^12 */
#define PROTO_RANS_TOTAL (1u << PROTO_RANS_BITS)
#define PROTO_RANS_LOW (1u << 15) /* the state stays in [LOW, LOW << 16) */
#define PROTO_RANS_MAX_SYMBOLS 256
#define PROTO_RANS_MAX_CONTEXTS 64

/* The encoder queues symbols and raw bits, then codes them all at once (rANS runs backwards).
 * Owns its buffers (proto__rans_enc_fini). */
typedef struct proto_rans_enc {
  int contexts, symbols;
  uint16_t *queue; /* context << 8 | symbol, in order */
  size_t count, cap;
  proto_buf bits;
  uint64_t acc;
  int nacc;
  int failed;
} proto_rans_enc;

int proto__rans_enc_init(proto_rans_enc *e, int contexts, int symbols);
void proto__rans_enc_fini(proto_rans_enc *e);
void proto__rans_enc_sym(proto_rans_enc *e, int context, int symbol);
/* Up to 32 raw bits, least significant first. */
void proto__rans_enc_bits(proto_rans_enc *e, uint32_t value, int nbits);
/* Appends the coded block to b. Returns 0 or PROTO_ENOMEM. */
int proto__rans_enc_finish(proto_rans_enc *e, proto_buf *b);

/* The decoder reads one block of exactly `n` bytes. Owns its tables (proto__rans_dec_fini). */
typedef struct proto_rans_dec {
  int contexts, symbols;
  uint8_t *slot;          /* [context << PROTO_RANS_BITS | x mod TOTAL] -> symbol */
  uint32_t *fs;           /* [context * symbols + symbol] -> freq << 16 | start, one load */
  uint8_t *used;          /* per context: its table is not empty */
  const uint8_t *at, *end;   /* rANS bytes */
  const uint8_t *bat, *bend; /* raw bits */
  uint64_t acc;
  int nacc;
  uint32_t x[2]; /* the two states, rotating: the next symbol uses x[0], and its new state
                    becomes x[1] while the other moves to x[0] */
  int err; /* the first failure (PROTO_E*), sticky; symbols read after it are 0 */
} proto_rans_dec;

/* Reads the tables and splits the block. Returns 0, PROTO_ENOMEM, PROTO_ETRUNCATED or
 * PROTO_EINVAL (a table over `symbols` entries or not summing to the total, a bad state). */
int proto__rans_dec_init(proto_rans_dec *d, const uint8_t *p, size_t n, int contexts, int symbols);
void proto__rans_dec_fini(proto_rans_dec *d);

/* The next symbol in `context`: an empty context or rANS bytes running out set d->err. */
static inline int proto__rans_dec_sym(proto_rans_dec *d, int context) {
  if (!d->used[context]) {
    if (!d->err) d->err = PROTO_EINVAL;
    return 0;
  }
  uint32_t x = d->x[0], m = x & (PROTO_RANS_TOTAL - 1);
  int s = d->slot[((size_t)context << PROTO_RANS_BITS) | m];
  uint32_t fs = d->fs[(size_t)context * (size_t)d->symbols + (size_t)s];
  x = (fs >> 16) * (x >> PROTO_RANS_BITS) + m - (fs & 0xffff);
  d->x[0] = d->x[1];
  /* One u16 at most (x >= 8 after the update, so x << 16 >= LOW), taken without a branch on x:
   * whether it is needed is a coin toss the branch predictor would lose. */
  uint32_t need = x < PROTO_RANS_LOW;
  if (d->end - d->at < 2) {
    if (need) {
      if (!d->err) d->err = PROTO_ETRUNCATED;
      d->x[1] = PROTO_RANS_LOW;
      return 0;
    }
  } else {
    uint32_t w = (uint32_t)d->at[0] | (uint32_t)d->at[1] << 8, keep = need - 1; /* all ones when not needed */
    x = (x & keep) | (((x << 16) | w) & ~keep);
    d->at += 2 * need;
  }
  d->x[1] = x;
  return s;
}

/* `nbits` (0 to 32) raw bits; running out sets d->err. Inline: every value of 8 or more reads
 * some. While 8 bytes are left the accumulator is topped up to at least 56 bits without a branch
 * on how many it holds (F. Giesen's refill: the bits above nacc are the next bytes, ORed again in
 * the same place by the next refill); the last 7 come a byte at a time, as needed. */
static inline uint32_t proto__rans_dec_bits(proto_rans_dec *d, int nbits) {
  if (d->bend - d->bat >= 8) {
    uint64_t w;
    memcpy(&w, d->bat, 8); /* one load, read little-endian */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    d->acc |= w << d->nacc;
    d->bat += (63 - d->nacc) >> 3;
    d->nacc |= 56;
  } else {
    while (d->nacc < nbits) {
      if (d->bat == d->bend) {
        if (!d->err) d->err = PROTO_ETRUNCATED;
        return 0;
      }
      d->acc |= (uint64_t)*d->bat++ << d->nacc;
      d->nacc += 8;
    }
  }
  uint32_t v = (uint32_t)(d->acc & ((1ull << nbits) - 1));
  d->acc >>= nbits;
  d->nacc -= nbits;
  return v;
}

/* ---- the value model both the streams and the triangles use (§12.11) ------------------------
 * A u32 z is a symbol, its bucket: z itself below 8, else 8 + 2·(k − 3) + the bit below the top
 * one, k = the top bit's position (so 66 symbols), followed by the k − 1 bits under those two as
 * raw bits. Contexts often say how large the previous value was against the stream's median. */
#define PROTO_RANS_VALUE_SYMBOLS 66
#define PROTO_RANS_CLASSES 4

static inline int proto__bit_length(uint32_t z) { return z ? 32 - __builtin_clz(z) : 0; }

/* The size class (0 .. PROTO_RANS_CLASSES − 1) of a value of bit length `len`. */
static inline int proto__rans_class(int len, int median) {
  int m = len - median + 2;
  return m < 0 ? 0 : m >= PROTO_RANS_CLASSES ? PROTO_RANS_CLASSES - 1 : m;
}

/* The median bit length of n values (what the classes are relative to). */
static inline int proto__rans_median(const uint32_t *z, size_t n) {
  size_t hist[33] = {0}, seen = 0;
  for (size_t i = 0; i < n; i++) hist[proto__bit_length(z[i])]++;
  int median = 0;
  while (median < 32 && (seen += hist[median]) * 2 < n) median++;
  return median;
}

static inline void proto__rans_put_value(proto_rans_enc *e, int context, uint32_t z) {
  if (z < 8) {
    proto__rans_enc_sym(e, context, (int)z);
    return;
  }
  int k = proto__bit_length(z) - 1;
  proto__rans_enc_sym(e, context, 8 + 2 * (k - 3) + (int)((z >> (k - 1)) & 1));
  proto__rans_enc_bits(e, z, k - 1);
}

/* The value of symbol s: without a branch on the symbol, its top bits and its raw bit count from
 * a table (symbols below 8 read 0 raw bits). The four symbols after the values (a model's own,
 * such as a stream's copies) read none either, and their value means nothing. */
static inline uint32_t proto__rans_value_of(proto_rans_dec *d, int s) {
  static const uint8_t raw[PROTO_RANS_VALUE_SYMBOLS + 4] = {
      0,  0,  0,  0,  0,  0,  0,  0,  2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,  8,  8,  9,  9,
      10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21,
      22, 22, 23, 23, 24, 24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 0,  0,  0,  0};
  int n = raw[s];
  uint32_t big = 0u - (uint32_t)(s >= 8); /* by mask: gcc makes a branch of a ternary here */
  uint32_t top = ((uint32_t)s & ~big) | (((2u | (uint32_t)(s & 1)) << n) & big); /* the bit under the top one: s's low bit */
  return top | proto__rans_dec_bits(d, n);
}

/* The bit length of symbol s's value, from the symbol alone (0 for the symbols after the
 * values): a model whose next context depends on it need not wait for the raw bits. */
static inline int proto__rans_len_of(int s) {
  static const uint8_t len[PROTO_RANS_VALUE_SYMBOLS + 4] = {
      0,  1,  2,  2,  3,  3,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,  8,  8,  9,  9,  10, 10, 11, 11,
      12, 12, 13, 13, 14, 14, 15, 15, 16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23,
      24, 24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 31, 32, 32, 0,  0,  0,  0};
  return len[s];
}

static inline uint32_t proto__rans_get_value(proto_rans_dec *d, int context) {
  int s = proto__rans_dec_sym(d, context);
  if (s >= PROTO_RANS_VALUE_SYMBOLS) {
    if (!d->err) d->err = PROTO_EINVAL;
    return 0;
  }
  return proto__rans_value_of(d, s);
}
/* After the last symbol: both states must be back at their start, every rANS byte read and at most
 * the padding of the last byte of raw bits left (all zero). Returns d->err or PROTO_EINVAL /
 * PROTO_ETRAILING. */
int proto__rans_dec_finish(proto_rans_dec *d);

#endif
