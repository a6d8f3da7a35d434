// meshopt.js — decoders of meshoptimizer's vertex codec (version 0) and index codec (versions 0
// and 1), the two entropy codecs protocol version 2 uses (docs/protocol.md §12.4, §12.6).
//
// Written from the format of meshoptimizer 0.18's decoders (src/vertexcodec.cpp and
// src/indexcodec.cpp, which the server's Debian package libmeshoptimizer 0.18 builds), with the
// same checks in the same order, so that a body the C decoder refuses is refused here too
// (tests/web/protocol.test.mjs checks it on bytes the C encoder wrote). Plain JavaScript: no
// WebAssembly, nothing fetched.
//
// DOES NOT encode, and knows nothing of deformd's messages (protocol.js does).

const VERTEX_HEADER = 0xa0;
const INDEX_HEADER = 0xe0;
const BLOCK_BYTES = 8192;
const BLOCK_MAX = 256;
const GROUP = 16;
const GROUP_DECODE_LIMIT = 24;
const TAIL_MAX = 32;

function vertexBlockSize(stride) {
  let n = Math.floor(BLOCK_BYTES / stride) & ~(GROUP - 1);
  return n < BLOCK_MAX ? n : BLOCK_MAX;
}

// One group of 16 byte deltas at `at` with 0, 2, 4 or 8 bits each (bitslog2 0..3); returns the
// offset after it.
function decodeGroup(src, at, out, o, bitslog2) {
  if (bitslog2 === 0) {
    out.fill(0, o, o + GROUP);
    return at;
  }
  if (bitslog2 === 3) {
    for (let i = 0; i < GROUP; i++) out[o + i] = src[at + i];
    return at + GROUP;
  }
  const bits = bitslog2 === 1 ? 2 : 4;
  const mask = (1 << bits) - 1;
  let v = at + (GROUP * bits) / 8; // the escaped full bytes follow the packed ones
  for (let i = 0; i < GROUP; i++) {
    const byte = src[at + ((i * bits) >> 3)];
    const enc = (byte >> (8 - bits - ((i * bits) & 7))) & mask;
    if (enc === mask) out[o + i] = src[v++];
    else out[o + i] = enc;
  }
  return v;
}

// decodeBytes: a header of 2 bits per group, then the groups. Returns the new offset or -1.
function decodeBytes(src, at, end, out, size) {
  const header = at;
  const headerSize = ((size / GROUP + 3) >> 2);
  if (end - at < headerSize) return -1;
  at += headerSize;
  for (let i = 0; i < size; i += GROUP) {
    if (end - at < GROUP_DECODE_LIMIT) return -1;
    const g = i / GROUP;
    const bitslog2 = (src[header + (g >> 2)] >> ((g & 3) * 2)) & 3;
    at = decodeGroup(src, at, out, i, bitslog2);
  }
  return at;
}

// Decodes `count` records of `stride` bytes (a multiple of 4, at most 256) into `target` (a
// Uint8Array of count * stride bytes). Returns 0, or meshoptimizer's codes: -1 (not this codec
// or version), -2 (truncated), -3 (bytes left over).
export function decodeVertexBuffer(target, count, stride, src) {
  const end = src.length;
  if (end < 1 + stride) return -2;
  const head = src[0];
  if ((head & 0xf0) !== VERTEX_HEADER) return -1;
  if ((head & 0x0f) > 0) return -1;
  const last = src.slice(end - stride, end);
  const blockSize = vertexBlockSize(stride);
  const buffer = new Uint8Array(BLOCK_MAX);
  let at = 1;
  for (let base = 0; base < count; base += blockSize) {
    const n = base + blockSize < count ? blockSize : count - base;
    const aligned = (n + GROUP - 1) & ~(GROUP - 1);
    for (let k = 0; k < stride; k++) {
      at = decodeBytes(src, at, end, buffer, aligned);
      if (at < 0) return -2;
      let p = last[k];
      let o = base * stride + k;
      for (let i = 0; i < n; i++) {
        const z = buffer[i];
        const v = ((-(z & 1)) ^ (z >> 1)) + p & 0xff;
        target[o] = v;
        p = v;
        o += stride;
      }
      last[k] = p;
    }
  }
  const tail = stride < TAIL_MAX ? TAIL_MAX : stride;
  if (end - at !== tail) return -3;
  return 0;
}

function decodeVByte(src, pos) {
  const lead = src[pos.at++];
  if (lead < 128) return lead;
  let result = lead & 127;
  let shift = 7;
  for (let i = 0; i < 4; i++) {
    const group = src[pos.at++];
    result = (result | ((group & 127) << shift)) >>> 0;
    shift += 7;
    if (group < 128) break;
  }
  return result >>> 0;
}

function decodeIndex(src, pos, last) {
  const v = decodeVByte(src, pos);
  const d = (v >>> 1) ^ -(v & 1);
  return (last + d) >>> 0;
}

// Decodes `indexCount` indices (a multiple of 3) into `target` (a Uint32Array). Returns 0 or
// -1 / -2 / -3 as decodeVertexBuffer.
export function decodeIndexBuffer(target, indexCount, src) {
  const size = src.length;
  if (size < 1 + indexCount / 3 + 16) return -2;
  if ((src[0] & 0xf0) !== INDEX_HEADER) return -1;
  const version = src[0] & 0x0f;
  if (version > 1) return -1;
  const edge = new Uint32Array(32).fill(0xffffffff); // 16 (a, b) pairs
  const vfifo = new Uint32Array(16).fill(0xffffffff);
  let eo = 0;
  let vo = 0;
  let next = 0;
  let last = 0;
  const fecmax = version >= 1 ? 13 : 15;
  let code = 1;
  const pos = { at: 1 + indexCount / 3 };
  const safeEnd = size - 16;
  const aux = safeEnd;
  const pushV = (v, cond) => {
    vfifo[vo] = v;
    vo = (vo + cond) & 15;
  };
  const pushE = (a, b) => {
    edge[2 * eo] = a;
    edge[2 * eo + 1] = b;
    eo = (eo + 1) & 15;
  };
  for (let i = 0; i < indexCount; i += 3) {
    if (pos.at > safeEnd) return -2;
    const codetri = src[code++];
    let a;
    let b;
    let c;
    if (codetri < 0xf0) {
      const fe = codetri >> 4;
      const e = (eo - 1 - fe) & 15;
      a = edge[2 * e];
      b = edge[2 * e + 1];
      const fec = codetri & 15;
      if (fec < fecmax) {
        const cf = vfifo[(vo - 1 - fec) & 15];
        c = fec === 0 ? next : cf;
        const fec0 = fec === 0 ? 1 : 0;
        next = (next + fec0) >>> 0;
        pushV(c, fec0);
      } else {
        c = fec !== 15 ? (last + (fec - (fec ^ 3))) >>> 0 : decodeIndex(src, pos, last);
        last = c;
        pushV(c, 1);
      }
      target[i] = a;
      target[i + 1] = b;
      target[i + 2] = c;
      pushE(c, b);
      pushE(a, c);
    } else if (codetri < 0xfe) {
      const codeaux = src[aux + (codetri & 15)];
      const feb = codeaux >> 4;
      const fec = codeaux & 15;
      a = next;
      next = (next + 1) >>> 0;
      const bf = vfifo[(vo - feb) & 15];
      b = feb === 0 ? next : bf;
      const feb0 = feb === 0 ? 1 : 0;
      next = (next + feb0) >>> 0;
      const cf = vfifo[(vo - fec) & 15];
      c = fec === 0 ? next : cf;
      const fec0 = fec === 0 ? 1 : 0;
      next = (next + fec0) >>> 0;
      target[i] = a;
      target[i + 1] = b;
      target[i + 2] = c;
      pushV(a, 1);
      pushV(b, feb0);
      pushV(c, fec0);
      pushE(b, a);
      pushE(c, b);
      pushE(a, c);
    } else {
      const codeaux = src[pos.at++];
      const fea = codetri === 0xfe ? 0 : 15;
      const feb = codeaux >> 4;
      const fec = codeaux & 15;
      if (codeaux === 0) next = 0;
      if (fea === 0) {
        a = next;
        next = (next + 1) >>> 0;
      } else a = 0;
      if (feb === 0) {
        b = next;
        next = (next + 1) >>> 0;
      } else b = vfifo[(vo - feb) & 15];
      if (fec === 0) {
        c = next;
        next = (next + 1) >>> 0;
      } else c = vfifo[(vo - fec) & 15];
      if (fea === 15) last = a = decodeIndex(src, pos, last);
      if (feb === 15) last = b = decodeIndex(src, pos, last);
      if (fec === 15) last = c = decodeIndex(src, pos, last);
      target[i] = a;
      target[i + 1] = b;
      target[i + 2] = c;
      pushV(a, 1);
      pushV(b, feb === 0 || feb === 15 ? 1 : 0);
      pushV(c, fec === 0 || fec === 15 ? 1 : 0);
      pushE(b, a);
      pushE(c, b);
      pushE(a, c);
    }
  }
  if (pos.at !== safeEnd) return -3;
  return 0;
}
