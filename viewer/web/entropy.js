// entropy.js — the decoders of the `entropy` capability (docs/protocol.md §12.11): rANS with
// per-context tables sent ahead (protocol/proto_rans.c), the value model of mode 2 streams
// (protocol/proto_trav.c) and the triangles piece in rank space (protocol/proto_tri.c).
//
// Plain JavaScript written from the C decoders, with the same checks in the same order, so that
// what the C decoder refuses is refused here with the same code (tests/web/protocol.test.mjs on
// bytes the C encoder wrote). State arithmetic stays below 2^31, exact in doubles and `>>> 0`.
//
// DOES NOT encode, and knows nothing of messages beyond these pieces (protocol.js does).
import { decodeIndexBuffer } from './meshopt.js';

const BITS = 12;
const TOTAL = 1 << BITS;
const LOW = 1 << 15;
export const VALUE_SYMBOLS = 66;
export const CLASSES = 4;
const NO_VERTEX = 0xffffffff;

export const bitLength = (z) => (z ? 32 - Math.clz32(z) : 0);
export function ransClass(len, median) {
  const m = len - median + 2;
  return m < 0 ? 0 : m >= CLASSES ? CLASSES - 1 : m;
}

// One coded block of exactly bytes[at, end): tables, rANS bytes, raw bits. `fail(code)` throws.
export class RansDecoder {
  constructor(bytes, at, end, contexts, symbols, fail, E) {
    this.fail = fail;
    this.E = E;
    this.symbols = symbols;
    this.fs = new Uint32Array(contexts * symbols);
    this.slot = new Uint8Array(contexts << BITS);
    this.used = new Uint8Array(contexts);
    const varint = () => {
      let v = 0;
      for (let i = 0; i < 5; i++) {
        if (at >= end) fail(E.TRUNCATED);
        const b = bytes[at++];
        if (i === 4 && b > 0x0f) fail(E.INVAL);
        v += (b & 0x7f) * 2 ** (7 * i);
        if (!(b & 0x80)) return v;
      }
      return v;
    };
    for (let k = 0; k < contexts; k++) {
      const ns = varint();
      if (ns > symbols) fail(E.INVAL);
      let sum = 0;
      for (let s = 0; s < ns; s++) {
        const f = varint();
        if (f > TOTAL || sum + f > TOTAL) fail(E.INVAL);
        this.fs[k * symbols + s] = f * 65536 + sum;
        this.slot.fill(s, (k << BITS) + sum, (k << BITS) + sum + f);
        sum += f;
      }
      if (ns && sum !== TOTAL) fail(E.INVAL);
      this.used[k] = ns !== 0;
    }
    const m = varint();
    if (m < 8) fail(E.TRUNCATED);
    if (m > end - at) fail(E.TRUNCATED);
    this.b = bytes;
    // Two interleaved states (symbol i uses state i mod 2), state 0 first, each little-endian.
    const state = (q) => (bytes[q] | (bytes[q + 1] << 8) | (bytes[q + 2] << 16) | (bytes[q + 3] << 24)) >>> 0;
    this.x0 = state(at);
    if (this.x0 < LOW || this.x0 >= LOW * 65536) fail(E.INVAL);
    this.x1 = state(at + 4);
    if (this.x1 < LOW || this.x1 >= LOW * 65536) fail(E.INVAL);
    this.at = at + 8;
    this.end = at + m;
    this.bat = at + m;
    this.bend = end;
    this.cur = 0; // the raw bits read ahead (up to 31), and how many there are
    this.left = 0;
  }

  sym(context) {
    if (!this.used[context]) this.fail(this.E.INVAL);
    // The state stays below 2^31: int32 arithmetic throughout (Math.imul, shifts), which keeps
    // V8 from boxing it as a double. freq << 16 | start in one table (one load).
    let x = this.x0 | 0;
    const m = x & (TOTAL - 1);
    const s = this.slot[(context << BITS) | m];
    const fs = this.fs[context * this.symbols + s];
    x = (Math.imul(fs >>> 16, x >>> BITS) + m - (fs & 0xffff)) | 0;
    if (x < LOW) {
      // One u16 at most (x >= 8 after the update); x << 16 stays below 2^31.
      if (this.end - this.at < 2) this.fail(this.E.TRUNCATED);
      const at = this.at;
      x = (x << 16) | this.b[at] | (this.b[at + 1] << 8);
      this.at = at + 2;
    }
    // Rotating, as in C: the next symbol uses x0, this one's new state becomes x1.
    this.x0 = this.x1;
    this.x1 = x;
    return s;
  }

  // Up to 30 raw bits, least significant first. The accumulator is topped up with whole bytes
  // while they fit in 31 bits, and most calls take theirs from it at once; the loop below is for
  // the rest (more bits than it holds, or the bytes running out).
  bits(n) {
    if (n > this.left) {
      while (this.left <= 23 && this.bat < this.bend) {
        this.cur |= this.b[this.bat++] << this.left;
        this.left += 8;
      }
    }
    if (n <= this.left) {
      const v = this.cur & ((1 << n) - 1);
      this.cur >>>= n;
      this.left -= n;
      return v >>> 0;
    }
    let v = 0;
    let got = 0;
    while (got < n) {
      if (this.left === 0) {
        if (this.bat === this.bend) this.fail(this.E.TRUNCATED);
        this.cur = this.b[this.bat++];
        this.left = 8;
      }
      const take = this.left < n - got ? this.left : n - got;
      v |= (this.cur & ((1 << take) - 1)) << got;
      this.cur >>>= take;
      this.left -= take;
      got += take;
    }
    return v >>> 0;
  }

  value(context) {
    const s = this.sym(context);
    if (s >= VALUE_SYMBOLS) this.fail(this.E.INVAL);
    return this.valueOf(s);
  }

  // The value of symbol s (below VALUE_SYMBOLS), with its raw bits.
  valueOf(s) {
    if (s < 8) return s;
    const k = 3 + ((s - 8) >> 1); // at most 31: the int32 OR, read unsigned, is the value
    return ((1 << k) | (((s - 8) & 1) << (k - 1)) | this.bits(k - 1)) >>> 0;
  }

  finish() {
    if (this.x0 !== LOW || this.x1 !== LOW || this.at !== this.end) this.fail(this.E.INVAL);
    if (this.bat !== this.bend || this.left >= 8 || this.cur !== 0) this.fail(this.E.TRAILING);
  }
}

const STREAM_COPIES = 0x40;
const STREAM_MEDIAN = 0x3f;
const COPY_SYMBOLS = 3;

// The context of lane `lane` of an entry in a mode 2 stream's model (proto_trav.c rans_context).
export function streamContext(model, lanes, para, lane, copies, prev, median) {
  const cls = ransClass(prev, median);
  if (!model) return (para * lanes + lane) * CLASSES + cls;
  if (lane === 0) return para * CLASSES + cls;
  return CLASSES * (2 + ((lane - 1) * 2 + para) * 3 + (copies < 2 ? copies : 2)) + cls;
}

// A mode 2 stream's model from its header byte and its block's decoder: { d, median, model }
// (model 1: the one with copies, whose symbols after the values say "the same as predictor a, b
// or c in this lane"). The caller pulls each lane's symbol in streamContext(...).
export function streamModel(bytes, lanes, fail, E) {
  if (bytes.length < 1) fail(E.TRUNCATED);
  const median = bytes[0] & STREAM_MEDIAN;
  const model = bytes[0] & STREAM_COPIES ? 1 : 0;
  if (median > 32 || bytes[0] & ~(STREAM_MEDIAN | STREAM_COPIES) || (model && lanes > 3)) fail(E.INVAL);
  const contexts = model ? CLASSES * (2 + 6 * (lanes - 1)) : 2 * CLASSES * lanes;
  const d = new RansDecoder(bytes, 1, bytes.length, contexts, VALUE_SYMBOLS + (model ? COPY_SYMBOLS : 0), fail, E);
  return { d, median, model };
}

// ---- the triangles piece (proto_tri.c) ---------------------------------------------------------

const CTX_ROTATION = 34;
const CTX_ORDER = 36;
const TRI_CONTEXTS = CTX_ORDER + 2 * CLASSES;

// Reads the piece at cursor c. Returns { triangles, trav } with the traversal of the session's
// triangles, built as a Trav of the rank-space ones renamed. `makeTrav(tri, T, V)` builds a
// protocol.js Trav (which checks every index against V).
export function trianglesGet(c, triangleCount, vertexCount, makeTrav, fail, E) {
  const n = c.u32();
  const body = c.bytes(n);
  if (n < 5) fail(E.TRUNCATED);
  const ilen = (body[0] | (body[1] << 8) | (body[2] << 16) | (body[3] << 24)) >>> 0;
  const median = body[4];
  if (triangleCount ? ilen < triangleCount + 17 : ilen !== 0) fail(E.TRUNCATED);
  if (ilen > 64 * n + 64 || median > 32) fail(E.INVAL);
  if (vertexCount > 64 * n + 64) fail(E.TRUNCATED);
  const d = new RansDecoder(body, 5, body.length, TRI_CONTEXTS, 256, fail, E);
  const ni = 3 * triangleCount;
  const ib = new Uint8Array(ilen);
  // proto_tri.c byte_context's cases, each a loop of its own: 0 the header byte, 2 the first code
  // byte, then 2 + the previous code byte's high nibble · 2 + (its low nibble is 0), 0 the byte
  // after the codes, then 1 after a data byte with its top bit set (a varint continuing), else 0.
  const codeEnd = triangleCount + 1 < ilen ? triangleCount + 1 : ilen;
  let j = 1;
  if (ilen) ib[0] = d.sym(0);
  if (j < codeEnd) ib[j++] = d.sym(2);
  for (; j < codeEnd; j++) {
    const b = ib[j - 1];
    ib[j] = d.sym(2 + (b >> 4) * 2 + ((b & 15) === 0 ? 1 : 0));
  }
  if (j < ilen) ib[j++] = d.sym(0);
  for (; j < ilen; j++) ib[j] = d.sym(ib[j - 1] >> 7);
  const tri = new Uint32Array(ni);
  if (ni && decodeIndexBuffer(tri, ni, ib) !== 0) fail(E.INVAL);
  const rotated = d.value(CTX_ROTATION);
  if (rotated > triangleCount) fail(E.INVAL);
  for (let k = 0, at = 0; k < rotated; k++) {
    at += d.value(CTX_ROTATION);
    const r = d.sym(CTX_ROTATION + 1);
    if (at >= triangleCount || r > 1) fail(E.INVAL);
    const o = 3 * at++;
    const x0 = tri[o];
    const x1 = tri[o + 1];
    const x2 = tri[o + 2];
    if (r === 0) (tri[o] = x1), (tri[o + 1] = x2), (tri[o + 2] = x0);
    else (tri[o] = x2), (tri[o + 1] = x0), (tri[o + 2] = x1);
  }
  const rs = makeTrav(tri, triangleCount, vertexCount);
  // The vertices the triangles use come first in the traversal; the rest must come ascending.
  const used = rs.used;
  const vertex = new Uint32Array(vertexCount);
  const seen = new Uint8Array(vertexCount);
  let prev = 0;
  let prevLen = median;
  for (let i = 0; i < vertexCount; i++) {
    const u = rs.order[i];
    const ra = rs.pred[3 * i]; // ranks: their vertices are rs's order
    const pa = ra === NO_VERTEX ? ra : rs.order[ra];
    const pb = ra === NO_VERTEX ? ra : rs.order[rs.pred[3 * i + 1]];
    let guess = prev;
    let two = 0;
    if (pa !== NO_VERTEX) {
      const a = vertex[pa];
      const b = vertex[pb];
      two = pa !== pb ? 1 : 0;
      guess = a > b ? a : b;
    }
    const zv = d.value(CTX_ORDER + (two ? 0 : CLASSES) + ransClass(prevLen, median));
    const v = (guess + ((zv >>> 1) ^ -(zv & 1))) >>> 0;
    if (v >= vertexCount || seen[v] || (i > used && v < prev)) fail(E.INVAL);
    seen[v] = 1;
    vertex[u] = v;
    prev = v;
    prevLen = bitLength(zv);
  }
  d.finish();
  // Rename: the triangles, then the traversal's order (same structure, the session's vertices;
  // pred and para are by rank, and the ranks stay).
  for (let i = 0; i < ni; i++) tri[i] = vertex[tri[i]];
  const order = new Uint32Array(vertexCount);
  const rank = new Uint32Array(vertexCount);
  for (let i = 0; i < vertexCount; i++) {
    const v = vertex[rs.order[i]];
    order[i] = v;
    rank[v] = i;
  }
  rs.order = order;
  rs.rank = rank;
  return { triangles: tri, trav: rs };
}
