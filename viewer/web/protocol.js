// protocol.js — deformd's binary stream protocol in JavaScript (docs/protocol.md): the frame
// header, decoders of every message a server sends (WELCOME, SNAPSHOT, WEIGHTS, DELTA, ERROR and
// BYE, PING and PONG, TARGET, TARGET_META, and BULK to a client granted "bulk") in versions 1
// and 2, and encoders of every message a client sends (HELLO, EDIT of every kind, PING, BYE, BULK).
//
// It mirrors protocol/proto_frame.c, proto_hello.c, proto_caps.c, proto_msg.c, proto_trav.c,
// proto_snap2.c and proto_bulk.c check for check, in the same order, so that a frame the C
// decoder refuses is refused here with the same PROTO_E* code (ProtoError.code), and an encoder
// writes the C encoder's bytes;
// tests/web/protocol.test.mjs checks both on fixtures the C code writes. Floats are rebuilt in
// float32 arithmetic (Math.fround after each operation, as C does), so a version 2 viewer here
// holds the same bits as one in C.
//
// DOES NOT open sockets (net.js), keep a session's state (replica.js) or draw.

import { bitLength, streamContext, streamModel, trianglesGet, VALUE_SYMBOLS } from './entropy.js';
import { decodeIndexBuffer, decodeVertexBuffer } from './meshopt.js';

export const MAGIC = 0x444d4644;
export const HEADER_SIZE = 20;
export const VERSION_1 = 1;
export const VERSION_2 = 2;
export const MAX_NAME = 255;
export const MAX_TARGETS = 65535;
export const MAX_DRIVERS = 8;
export const MAX_SHIFT = 24;
export const MAX_AUTHOR = 64;
export const MAX_CAPS = 32; // capability names in one list (proto_caps.h)
export const MAX_CAP_NAME = 32;
export const Q_MAX = (1 << 30) - 1;
export const NO_PICK = 0xffffffff;

export const T = {
  HELLO: 1, WELCOME: 2, SNAPSHOT: 3, WEIGHTS: 4, DELTA: 5, EDIT: 6, ERROR: 7, PING: 8, PONG: 9, BYE: 10,
  TARGET: 11, TARGET_META: 12, BULK: 13, PRESENCE: 14, TEXTURE: 15, TEXWEIGHTS: 16, TEXCLIP: 17, MASK: 20,
};
const LAST_TYPE = 17; // the header check (proto_frame.h PROTO_LAST_TYPE), and MASK (20): types past 12 need their capabilities
// HELLO / WELCOME option tags (proto.h PROTO_OPT_*).
export const OPT = { CODEC: 1, MAX_RATE: 2, TOLERANCE: 3, SHIFT: 4, AUTHOR: 5, FORWARD: 6, CAPS: 7, UP: 8 };
// The capabilities this page knows (proto_caps.h's registry; docs/protocol.md §14).
export const CAP = { NOOP: 'noop', UP: 'up', BULK: 'bulk', MASK: 'mask', PRESENCE: 'presence', TEXTURE: 'texture', TEXCLIP: 'texclip', ENTROPY: 'entropy' };
export const FLAG_CATCHUP = 1;
export const FLAG_MORE = 2;
export const ROLE_VIEWER = 1;
export const ROLE_EDITOR = 2;
export const CODEC_QUANTISED = 0;
export const CODEC_LOSSLESS = 1;
export const EDIT = {
  WEIGHTS: 1, OFFSETS: 2, GESTURE_BEGIN: 3, GESTURE_DRAG: 4, GESTURE_END: 5, BRUSH: 6, RESET: 7,
  BLEND_PINS: 8, UNDO: 9, REDO: 10, AUTHOR: 11, MASK: 12,
};
// EDIT MASK's ops and tools (proto_edit.h PROTO_MASK_*; docs/protocol.md §5.6.4).
export const MASK_OP = { STROKE: 0, CLEAR: 1, INVERT: 2, AUTO: 3 };
export const MASK_TOOL = { PAINT: 0, ERASE: 1, SMOOTH: 2 };
// EDIT BRUSH: brush kinds and the flags byte (proto.h PROTO_BRUSH_*).
export const BRUSH = { GRAB: 0, INFLATE: 1, SMOOTH: 2, FLATTEN: 3, PINCH: 4, DRAW: 5, CREASE: 6, LAYER: 7 };
export const BRUSH_MIRROR_X = 0x01;
export const BRUSH_FRONT_ONLY = 0x02;
export const BRUSH_CONTINUE = 0x04;
export const BRUSH_AUTOSMOOTH_SHIFT = 4; // bits 4-7: auto-smoothing n/15
// Byte 8, the mirror plane (proto_edit.h PROTO_BRUSH_AXIS_*; 0 none, or x by BRUSH_MIRROR_X).
export const BRUSH_AXIS = { NONE: 0, X: 1, Y: 2, Z: 3 };
const BRUSH_FLAGS_KNOWN = 0xf7;
export const ERR = {
  NONE: 0, MALFORMED: 1, UNKNOWN_SESSION: 2, FORBIDDEN: 3, INVALID: 4, TOO_SLOW: 5, SHUTDOWN: 6,
  SESSION_CLOSED: 7, OVERLOADED: 8,
};

// The C decoders' codes (protocol/proto.h).
export const E = {
  TRUNCATED: -5001, MAGIC: -5002, VERSION: -5003, TOOBIG: -5004, TYPE: -5005, NONFINITE: -5006,
  INVAL: -5007, TRAILING: -5008, NOMEM: -5009,
};
const E_NAMES = {
  [-5001]: 'frame truncated: a count promises more bytes than are present',
  [-5002]: 'bad magic: not a deformd frame', [-5003]: 'unsupported protocol version',
  [-5004]: 'a length or count is over the limit', [-5005]: 'unknown or misdirected message type',
  [-5006]: 'NaN or infinity in a float field', [-5007]: 'a field has an invalid value',
  [-5008]: 'bytes left over after the message', [-5009]: 'out of memory',
};

export class ProtoError extends Error {
  constructor(code) {
    super(E_NAMES[code] || `protocol error ${code}`);
    this.code = code;
  }
}
const fail = (code) => {
  throw new ProtoError(code);
};

const DEFAULT_LIMITS = { maxFrame: 64 * 1024 * 1024, maxVertices: 5000000, maxTriangles: 20000000, maxTargetEntries: 64000000 };
function limitsOf(l) {
  return {
    maxFrame: (l && l.maxFrame) || DEFAULT_LIMITS.maxFrame,
    maxVertices: (l && l.maxVertices) || DEFAULT_LIMITS.maxVertices,
    maxTriangles: (l && l.maxTriangles) || DEFAULT_LIMITS.maxTriangles,
    maxTargetEntries: (l && l.maxTargetEntries) || DEFAULT_LIMITS.maxTargetEntries,
  };
}

const f32 = Math.fround;
const cvtF = new Float32Array(1);
const cvtU = new Uint32Array(cvtF.buffer);
export function bitsToFloat(u) {
  cvtU[0] = u;
  return cvtF[0];
}
export function floatToBits(f) {
  cvtF[0] = f;
  return cvtU[0];
}
const finite = Number.isFinite;

// ---- reading ------------------------------------------------------------------------------------

// A bounds-checked cursor over bytes (proto_cur).
export class Cursor {
  constructor(bytes, at = 0, end = bytes.length) {
    this.b = bytes;
    this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.at = at;
    this.end = end;
  }
  need(n) {
    if (n > this.end - this.at) fail(E.TRUNCATED);
  }
  bytes(n) {
    this.need(n);
    const s = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return s;
  }
  u8() {
    this.need(1);
    return this.b[this.at++];
  }
  u16() {
    this.need(2);
    const v = this.dv.getUint16(this.at, true);
    this.at += 2;
    return v;
  }
  u32() {
    this.need(4);
    const v = this.dv.getUint32(this.at, true);
    this.at += 4;
    return v;
  }
  u64() {
    this.need(8);
    const lo = this.dv.getUint32(this.at, true);
    const hi = this.dv.getUint32(this.at + 4, true);
    this.at += 8;
    return hi * 4294967296 + lo; // versions and clocks stay below 2^53
  }
  f32raw() {
    this.need(4);
    const v = this.dv.getFloat32(this.at, true);
    this.at += 4;
    return v;
  }
  f32() {
    const v = this.f32raw();
    if (!finite(v)) fail(E.NONFINITE);
    return v;
  }
  str() {
    const n = this.u16();
    if (n > MAX_NAME) fail(E.TOOBIG);
    const p = this.bytes(n);
    if (p.indexOf(0) >= 0) fail(E.INVAL);
    return new TextDecoder().decode(p);
  }
  varint() {
    let out = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const byte = this.u8();
      if (shift === 28 && byte & 0x70) fail(E.INVAL);
      out = (out | ((byte & 0x7f) << shift)) >>> 0;
      if (!(byte & 0x80)) return out;
    }
    fail(E.INVAL);
  }
  finish() {
    if (this.at !== this.end) fail(E.TRAILING);
  }
}

// The 20-byte header (proto_header_decode): magic, version, type, then the length limit.
export function decodeHeader(bytes, limits) {
  if (bytes.length < HEADER_SIZE) fail(E.TRUNCATED);
  const l = limitsOf(limits);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, HEADER_SIZE);
  const h = {
    magic: dv.getUint32(0, true), version: dv.getUint16(4, true), type: bytes[6], flags: bytes[7],
    length: dv.getUint32(8, true),
    sessionVersion: dv.getUint32(16, true) * 4294967296 + dv.getUint32(12, true),
  };
  if (h.magic !== MAGIC) fail(E.MAGIC);
  if (h.version < VERSION_1 || h.version > VERSION_2) fail(E.VERSION);
  if (h.type < T.HELLO || (h.type > LAST_TYPE && h.type !== T.MASK)) fail(E.TYPE); // BULK, PRESENCE, TEXTURE, TEXWEIGHTS, TEXCLIP, MASK: their capabilities
  if (h.length > l.maxFrame) fail(E.TOOBIG);
  return h;
}

// One WebSocket message is one frame: its header, and a payload of exactly header.length bytes.
export function splitFrame(bytes, limits) {
  const h = decodeHeader(bytes, limits);
  if (bytes.length - HEADER_SIZE !== h.length) fail(h.length > bytes.length - HEADER_SIZE ? E.TRUNCATED : E.TRAILING);
  return { header: h, payload: bytes.subarray(HEADER_SIZE) };
}

// ---- HELLO options, WELCOME, ERROR, PING --------------------------------------------------------

const capByte = (ch) => (ch >= 0x61 && ch <= 0x7a) || (ch >= 0x30 && ch <= 0x39) || ch === 0x5f || ch === 0x2e || ch === 0x2d;

// The caps option's value (proto_caps_get): u8 length + name, repeated. Every name, known or
// not, in list order; the checks in the C order, so the codes agree.
export function decodeCaps(v) {
  const names = [];
  let at = 0;
  while (at < v.length) {
    if (names.length === MAX_CAPS) fail(E.TOOBIG);
    const len = v[at];
    if (len === 0 || len > MAX_CAP_NAME) fail(E.INVAL);
    if (len > v.length - at - 1) fail(E.TRUNCATED);
    const name = v.subarray(at + 1, at + 1 + len);
    if (!name.every(capByte)) fail(E.INVAL);
    const s = String.fromCharCode(...name);
    if (names.includes(s)) fail(E.INVAL);
    names.push(s);
    at += 1 + len;
  }
  return names;
}

function encodeCaps(names) {
  const out = [];
  if (names.length > MAX_CAPS) fail(E.INVAL);
  for (const s of names) {
    const b = utf8(s);
    if (b.length === 0 || b.length > MAX_CAP_NAME || !b.every(capByte) || names.indexOf(s) !== names.lastIndexOf(s)) fail(E.INVAL);
    out.push(b.length, ...b);
  }
  return Uint8Array.from(out);
}

function getOpts(c) {
  const o = { codec: 0, shift: 0, maxRate: 0, tolerance: 0, caps: null, up: null };
  const len = c.u16();
  const e = new Cursor(c.b, c.at, c.at + len);
  c.bytes(len);
  let seen = 0;
  while (e.at < e.end) {
    const tag = e.u8();
    const n = e.u16();
    const v = e.bytes(n);
    if (tag < OPT.CODEC || tag > OPT.UP) continue; // a later version's option
    if (seen & (1 << tag)) fail(E.INVAL);
    seen |= 1 << tag;
    if (tag === OPT.AUTHOR) { // HELLO only, but checked as C checks it
      if (n === 0 || n > MAX_AUTHOR || v.indexOf(0) >= 0) fail(E.INVAL);
      continue;
    }
    if (tag === OPT.CAPS) {
      o.caps = decodeCaps(v);
      continue;
    }
    const want = tag === OPT.CODEC || tag === OPT.SHIFT || tag === OPT.FORWARD || tag === OPT.UP ? 1 : 4;
    if (n !== want) fail(E.INVAL);
    if (tag === OPT.UP) { // WELCOME only: the session's up axis, 'y' or 'z'
      if (v[0] !== 0x79 && v[0] !== 0x7a) fail(E.INVAL);
      o.up = String.fromCharCode(v[0]);
    } else if (tag === OPT.FORWARD) {
      if (v[0] > 1) fail(E.INVAL);
    } else if (tag === 1) {
      o.codec = v[0];
      if (o.codec > CODEC_LOSSLESS) fail(E.INVAL);
    } else if (tag === 4) {
      o.shift = v[0];
      if (o.shift > MAX_SHIFT) fail(E.INVAL);
    } else {
      const f = new DataView(v.buffer, v.byteOffset, 4).getFloat32(0, true);
      if (!finite(f)) fail(E.NONFINITE);
      if (f < 0) fail(E.INVAL);
      if (tag === 2) o.maxRate = f;
      else o.tolerance = f;
    }
  }
  return o;
}

export function decodeWelcome(p) {
  const c = new Cursor(p);
  const m = { clientId: c.u32(), role: c.u8() };
  c.u8();
  m.session = c.str();
  m.protocolVersion = VERSION_1;
  m.codec = 0;
  m.shift = 0;
  m.maxRate = 0;
  m.tolerance = 0;
  m.caps = null; // the capabilities granted; null: the server did not answer a caps option
  m.up = null; // 'y' or 'z' when granted the "up" capability; null: not told (Y-up)
  if (c.at === c.end) return m;
  Object.assign(m, getOpts(c));
  m.protocolVersion = VERSION_2;
  c.finish();
  return m;
}

// ERROR and BYE.
export function decodeError(p) {
  const c = new Cursor(p);
  const m = { code: c.u16(), requestId: c.u32() };
  const len = c.u16();
  if (len > 1024) fail(E.TOOBIG);
  m.message = new TextDecoder().decode(c.bytes(len));
  c.finish();
  return m;
}

// PING and PONG.
export function decodePing(p) {
  const c = new Cursor(p);
  const m = { seq: c.u32(), t0: c.u64(), t1: c.u64() };
  c.finish();
  return m;
}

// ---- weights and offsets (version 1 bodies) ------------------------------------------------------

// A weights body: returns {mode, entries: [[target, value], ...]} in the order they apply.
function getWeightsBody(c) {
  const mode = c.u8();
  if (mode > 3) fail(E.INVAL);
  const count = c.u32();
  if (count > MAX_TARGETS) fail(E.TOOBIG);
  const entries = [];
  if (mode === 2 || mode === 3) {
    const first = c.u16();
    const scale = c.f32raw();
    if (!finite(scale)) fail(E.NONFINITE);
    if (scale < 0 || first + count > MAX_TARGETS) fail(E.INVAL);
    if (!finite(f32(scale * 32768))) fail(E.NONFINITE);
    const q = c.bytes((mode === 2 ? 2 : 1) * count);
    const dv = new DataView(q.buffer, q.byteOffset, q.byteLength);
    for (let i = 0; i < count; i++) {
      const qi = mode === 2 ? dv.getInt16(2 * i, true) : dv.getInt8(i);
      entries.push([first + i, f32(qi * scale)]);
    }
    return { mode, first, scale, entries };
  }
  const each = mode === 0 ? 4 : 6;
  const b = c.bytes(each * count);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let i = 0; i < count; i++) {
    const v = dv.getFloat32(each * i + (mode === 0 ? 0 : 2), true);
    if (!finite(v)) fail(E.NONFINITE);
    entries.push([mode === 0 ? i : dv.getUint16(each * i, true), v]);
  }
  return { mode, entries };
}

export function decodeWeights(p) {
  const c = new Cursor(p);
  const w = getWeightsBody(c);
  c.finish();
  return w;
}

const unzigzag = (z) => (z >>> 1) ^ -(z & 1);

// An offsets body (version 1): {indices: Uint32Array, q: Int32Array (3 per entry)}.
function getOffsetsBody(c, vertexLimit) {
  const count = c.u32();
  const len = c.u32();
  if (count > vertexLimit) fail(E.TOOBIG);
  const bytes = c.bytes(len);
  const e = new Cursor(bytes);
  const indices = new Uint32Array(count);
  const q = new Int32Array(3 * count);
  let index = 0;
  for (let i = 0; i < count; i++) {
    const gap = e.varint();
    index = i === 0 ? gap : index + 1 + gap;
    if (index >= vertexLimit) fail(E.INVAL);
    indices[i] = index;
    for (let k = 0; k < 3; k++) {
      const v = unzigzag(e.varint());
      if (v > Q_MAX || v < -Q_MAX) fail(E.INVAL);
      q[3 * i + k] = v;
    }
  }
  if (e.at !== e.end) fail(E.TRAILING);
  return { shift: 0, indices, q };
}

export function decodeDelta(p, limits) {
  const c = new Cursor(p);
  const o = getOffsetsBody(c, limitsOf(limits).maxVertices);
  c.finish();
  return o;
}

// ---- targets (version 1) and TARGET_META ---------------------------------------------------------

function getMeta(c) {
  const m = { min: c.f32(), max: c.f32() };
  if (m.min > m.max) fail(E.INVAL);
  m.flags = c.u8();
  if (m.flags & ~1) fail(E.INVAL);
  const nd = c.u16();
  if (nd > MAX_DRIVERS) fail(E.INVAL);
  const d = c.bytes(2 * nd);
  m.drivers = [];
  for (let i = 0; i < nd; i++) m.drivers.push(d[2 * i] | (d[2 * i + 1] << 8));
  return m;
}

function checkDrivers(drivers, self, limit) {
  for (const d of drivers) if (d >= limit || d === self) fail(E.INVAL);
}

function getTarget1(c, vertexCount) {
  const t = { name: c.str(), defaultWeight: c.f32() };
  Object.assign(t, getMeta(c));
  const count = c.u32();
  if (count > vertexCount) fail(E.INVAL);
  const ib = c.bytes(4 * count);
  const db = c.bytes(12 * count);
  t.indices = new Uint32Array(count);
  t.deltas = new Float32Array(3 * count);
  const idv = new DataView(ib.buffer, ib.byteOffset, ib.byteLength);
  const ddv = new DataView(db.buffer, db.byteOffset, db.byteLength);
  for (let i = 0; i < count; i++) t.indices[i] = idv.getUint32(4 * i, true);
  for (let i = 0; i < 3 * count; i++) t.deltas[i] = ddv.getFloat32(4 * i, true);
  return t;
}

function checkTarget1(t, vertexLimit) {
  for (let k = 0; k < t.indices.length; k++) {
    const v = t.indices[k];
    if (v >= vertexLimit || (k > 0 && v <= t.indices[k - 1])) fail(E.INVAL);
  }
  for (let i = 0; i < t.deltas.length; i++) if (!finite(t.deltas[i])) fail(E.NONFINITE);
}

export function decodeTargetMeta(p) {
  const c = new Cursor(p);
  const index = c.u32();
  if (index >= MAX_TARGETS) fail(E.INVAL);
  const m = getMeta(c);
  checkDrivers(m.drivers, index, MAX_TARGETS);
  c.finish();
  m.index = index;
  return m;
}

// MASK (20, capability "mask"): the author's whole mask, the vertices above 0 and their values
// (docs/protocol.md §14.7); checked as proto_decode_mask checks it.
export function decodeMask(p) {
  const c = new Cursor(p);
  const vertexCount = c.u32();
  const count = c.u32();
  if (count > vertexCount) fail(E.INVAL);
  c.need(8 * count);
  const vertices = new Uint32Array(count);
  const values = new Float32Array(count);
  for (let i = 0; i < count; i++) vertices[i] = c.u32();
  for (let i = 0; i < count; i++) values[i] = c.f32raw();
  c.finish();
  for (let i = 0; i < count; i++) {
    if (vertices[i] >= vertexCount || (i && vertices[i] <= vertices[i - 1])) fail(E.INVAL);
    if (!finite(values[i])) fail(E.NONFINITE);
    if (!(values[i] > 0 && values[i] <= 1)) fail(E.INVAL);
  }
  return { vertexCount, vertices, values };
}

// TEXTURE (type 15, capability "texture"; docs/protocol.md §17, proto_texture.c): MATERIALS
// ({kind: 1, imageCount, materials: [{firstTriangle, triangleCount, texture, hasColor, baseColor}]})
// or IMAGE ({kind: 2, index, width, height, encoding, name, pixels: RGBA8, row 0 the top}), the
// checks in the C decoder's order.
export const TEX = { MATERIALS: 1, IMAGE: 2, RGBA8: 0, MAX_IMAGES: 64, MAX_SIDE: 8192, MAX_SUBMESHES: 65535 };
export function decodeTexture(p) {
  const c = new Cursor(p);
  const kind = c.u8();
  if (kind === TEX.MATERIALS) {
    const imageCount = c.u32();
    const n = c.u32();
    if (imageCount > TEX.MAX_IMAGES || n > TEX.MAX_SUBMESHES) fail(E.TOOBIG);
    c.need(29 * n);
    const materials = [];
    for (let i = 0; i < n; i++) {
      const m = { firstTriangle: c.u32(), triangleCount: c.u32(), texture: c.u32(), hasColor: c.u8(), baseColor: [] };
      for (let k = 0; k < 4; k++) m.baseColor.push(c.f32raw());
      materials.push(m);
    }
    for (const m of materials) {
      if (m.texture > imageCount || m.hasColor > 1) fail(E.INVAL);
      for (const x of m.baseColor) {
        if (!finite(x)) fail(E.NONFINITE);
        if (!(x >= 0 && x <= 1)) fail(E.INVAL);
      }
    }
    c.finish();
    return { kind, imageCount, materials };
  }
  if (kind !== TEX.IMAGE) fail(E.INVAL);
  const index = c.u32();
  const width = c.u32();
  const height = c.u32();
  const encoding = c.u8();
  if (index >= TEX.MAX_IMAGES || encoding !== TEX.RGBA8) fail(E.INVAL);
  if (width === 0 || height === 0 || width > TEX.MAX_SIDE || height > TEX.MAX_SIDE) fail(E.INVAL);
  const name = c.str();
  const pixels = c.bytes(4 * width * height);
  c.finish();
  return { kind, index, width, height, encoding, name, pixels };
}

export function decodeTargetAdd(p, limits) {
  const l = limitsOf(limits);
  const c = new Cursor(p);
  const index = c.u32();
  const weight = c.f32();
  if (index >= MAX_TARGETS) fail(E.INVAL);
  const t = getTarget1(c, l.maxVertices);
  checkDrivers(t.drivers, index, index);
  checkTarget1(t, l.maxVertices);
  c.finish();
  return { index, weight, target: t };
}

// SNAPSHOT, version 1.
export function decodeSnapshot(p, limits) {
  const l = limitsOf(limits);
  const c = new Cursor(p);
  const s = { vertexCount: c.u32(), triangleCount: c.u32(), targetCount: c.u32(), offsetQuantum: c.f32() };
  const flags = c.u32();
  if (s.vertexCount > l.maxVertices || s.triangleCount > l.maxTriangles || s.targetCount > MAX_TARGETS) fail(E.TOOBIG);
  if (!(s.offsetQuantum > 0) || flags & ~1) fail(E.INVAL);
  const read = (bytes, n, Type, getter) => {
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const a = new Type(n);
    for (let i = 0; i < n; i++) a[i] = dv[getter](4 * i, true);
    return a;
  };
  const V = s.vertexCount;
  s.positions = read(c.bytes(12 * V), 3 * V, Float32Array, 'getFloat32');
  for (const x of s.positions) if (!finite(x)) fail(E.NONFINITE);
  s.triangles = read(c.bytes(12 * s.triangleCount), 3 * s.triangleCount, Uint32Array, 'getUint32');
  for (const v of s.triangles) if (v >= V) fail(E.INVAL);
  s.uvs = null;
  if (flags & 1) {
    s.uvs = read(c.bytes(8 * V), 2 * V, Float32Array, 'getFloat32');
    for (const x of s.uvs) if (!finite(x)) fail(E.NONFINITE);
  }
  s.targets = [];
  for (let t = 0; t < s.targetCount; t++) {
    const tg = getTarget1(c, V);
    checkDrivers(tg.drivers, t, s.targetCount);
    checkTarget1(tg, V);
    s.targets.push(tg);
  }
  s.weights = read(c.bytes(4 * s.targetCount), s.targetCount, Float32Array, 'getFloat32');
  for (const w of s.weights) if (!finite(w)) fail(E.NONFINITE);
  s.offsets = getOffsetsBody(c, V);
  c.finish();
  s.protocol = VERSION_1;
  return s;
}

// ---- version 2: the traversal, value streams, rank lists ----------------------------------------

const NO_VERTEX = 0xffffffff;
const TRAV_FIFO = 16;

// proto_trav: ranks and parallelogram predictors from the triangle list (docs/protocol.md §12.3).
export class Trav {
  constructor(tri, triangleCount, vertexCount) {
    const nv = vertexCount;
    this.vertexCount = nv;
    this.order = new Uint32Array(nv);
    this.rank = new Uint32Array(nv).fill(NO_VERTEX);
    // By rank, as streams read them: the ranks of its vertex's predictors a, b, c, and whether
    // they make a true parallelogram (proto2.h proto_trav).
    this.pred = new Uint32Array(3 * nv);
    this.para = new Uint8Array(nv);
    this.mark = new Uint32Array(nv);
    this.slot = new Uint32Array(nv);
    this.ps = new Uint32Array(3); // scratch of slots()
    this.epoch = 0;
    const rank = this.rank;
    const pred = this.pred;
    const para = this.para;
    const fifo = new Int32Array(TRAV_FIFO); // triangle indices
    let nfifo = 0;
    let head = 0;
    let k = 0;
    let prev = NO_VERTEX;
    // Rank k's predictors, vertices that all have ranks already (NO_VERTEX for none).
    const set = (k, a, b, c) => {
      const none = a === NO_VERTEX;
      pred[3 * k] = none ? a : rank[a];
      pred[3 * k + 1] = none ? b : rank[b];
      pred[3 * k + 2] = none ? c : rank[c];
      para[k] = !none && a !== b && c !== a ? 1 : 0;
    };
    for (let i = 0; i < triangleCount; i++) {
      const o = 3 * i;
      if (tri[o] >= nv || tri[o + 1] >= nv || tri[o + 2] >= nv) fail(E.INVAL); // checked as it goes: one pass
      for (let j = 0; j < 3; j++) {
        const v = tri[o + j];
        const a = tri[o + ((j + 1) % 3)];
        const b = tri[o + ((j + 2) % 3)];
        if (rank[v] !== NO_VERTEX) continue;
        const seenA = rank[a] !== NO_VERTEX;
        const seenB = rank[b] !== NO_VERTEX;
        if (seenA && seenB) {
          let c = a;
          for (let f = 0; f < nfifo && c === a; f++) {
            const u = 3 * fifo[(head + TRAV_FIFO - 1 - f) % TRAV_FIFO];
            for (let e = 0; e < 3; e++) {
              if (tri[u + e] === b && tri[u + ((e + 1) % 3)] === a) {
                c = tri[u + ((e + 2) % 3)];
                break;
              }
            }
          }
          set(k, a, b, c);
        } else if (seenA) set(k, a, a, a);
        else if (seenB) set(k, b, b, b);
        else set(k, prev, prev, prev);
        rank[v] = k;
        this.order[k++] = v;
        prev = v;
      }
      fifo[head] = i;
      head = (head + 1) % TRAV_FIFO;
      if (nfifo < TRAV_FIFO) nfifo++;
    }
    this.used = k; // the vertices the triangles use hold the first ranks
    for (let v = 0; v < nv; v++) {
      if (rank[v] !== NO_VERTEX) continue;
      set(k, prev, prev, prev);
      rank[v] = k;
      this.order[k++] = v;
      prev = v;
    }
  }

  markSubset(list, count) {
    if (++this.epoch > 0xffffffff) {
      this.mark.fill(0);
      this.epoch = 1;
    }
    for (let i = 0; i < count; i++) {
      this.mark[list[i]] = this.epoch;
      this.slot[list[i]] = i;
    }
  }

  // The entries of entry i's predictors a, b, c into ps (proto_trav.c predictors): true when it
  // has them all among the listed entries (every vertex is listed, at its rank, when list is
  // null: the predictors' ranks are their entries).
  slots(list, i, ps) {
    const pred = this.pred;
    const r = list ? this.rank[list[i]] : i;
    if (pred[3 * r] === NO_VERTEX) return false;
    if (!list) {
      ps[0] = pred[3 * r];
      ps[1] = pred[3 * r + 1];
      ps[2] = pred[3 * r + 2];
      return true;
    }
    const a = this.order[pred[3 * r]];
    const b = this.order[pred[3 * r + 1]];
    const c = this.order[pred[3 * r + 2]];
    if (this.mark[a] !== this.epoch || this.mark[b] !== this.epoch || this.mark[c] !== this.epoch) return false;
    ps[0] = this.slot[a];
    ps[1] = this.slot[b];
    ps[2] = this.slot[c];
    return true;
  }

  // A mode 2 stream's values (proto_trav.c rans_get), each entry predicted as its lanes are
  // decoded, so that a lane coded as a copy takes its predictor's value at once.
  streamRans(bytes, list, count, lanes) {
    const { d, median, model } = streamModel(bytes, lanes, fail, E);
    const val = new Uint32Array(count * lanes);
    const ps = this.ps;
    let prev0 = median;
    for (let i = 0; i < count; i++) {
      const has = this.slots(list, i, ps);
      const para = has && this.para[list ? this.rank[list[i]] : i] ? 1 : 0;
      const o = lanes * i;
      let prev = prev0;
      let copies = 0;
      for (let l = 0; l < lanes; l++) {
        const sym = d.sym(streamContext(model, lanes, para, l, copies, prev, median));
        if (sym >= VALUE_SYMBOLS) { // only the model with copies has these symbols
          if (!para) fail(E.INVAL); // a copy needs the predictors
          val[o + l] = val[lanes * ps[sym - VALUE_SYMBOLS] + l];
          prev = 0;
          copies++;
        } else {
          const z = d.valueOf(sym);
          const p = has ? val[lanes * ps[0] + l] + val[lanes * ps[1] + l] - val[lanes * ps[2] + l] : i ? val[o - lanes + l] : 0;
          val[o + l] = (p + unzigzag(z)) >>> 0;
          prev = bitLength(z);
        }
        if (l === 0) prev0 = prev;
      }
    }
    d.finish();
    return val;
  }

  // A value stream (proto__stream_get): `count` entries of `lanes` u32 (Uint32Array), entry i
  // being vertex list[i], or the vertex of rank i when list is null.
  streamGet(c, list, count, lanes) {
    const len = c.u32();
    if (len < 1) fail(E.INVAL);
    const bytes = c.bytes(len);
    const mode = bytes[0];
    const n = count * lanes;
    const val = new Uint32Array(n);
    if (list) this.markSubset(list, count);
    if (mode === 2) {
      return this.streamRans(bytes.subarray(1), list, count, lanes);
    } else if (mode === 1) {
      if (count === 0 || len - 1 < Math.floor((n * 4) / 64) + 1) fail(E.TRUNCATED);
      const raw = new Uint8Array(val.buffer);
      // Records are little-endian u32 lanes, which a Uint32Array reads as such on every browser
      // host (all little-endian).
      if (decodeVertexBuffer(raw, count, 4 * lanes, bytes.subarray(1)) !== 0) fail(E.INVAL);
    } else if (mode === 0) {
      const e = new Cursor(bytes, 1, len);
      for (let i = 0; i < n; i++) val[i] = e.varint();
      if (e.at !== e.end) fail(E.TRAILING);
    } else {
      fail(E.INVAL);
    }
    const ps = this.ps;
    for (let i = 0; i < count; i++) {
      const o = lanes * i;
      const has = this.slots(list, i, ps);
      for (let l = 0; l < lanes; l++) {
        const p = has ? val[lanes * ps[0] + l] + val[lanes * ps[1] + l] - val[lanes * ps[2] + l] : i ? val[o - lanes + l] : 0;
        val[o + l] = (unzigzag(val[o + l]) + p) >>> 0;
      }
    }
    return val;
  }

  // A vertex set as runs of ranks (proto__ranks_get): the vertices in ascending rank.
  ranksGet(c) {
    const count = c.u32();
    const len = c.u32();
    if (count > this.vertexCount) fail(E.TOOBIG);
    const bytes = c.bytes(len);
    const e = new Cursor(bytes);
    const runs = e.varint();
    if (runs > count || (runs === 0) !== (count === 0)) fail(E.INVAL);
    const l = new Uint32Array(count);
    let end = 0;
    let k = 0;
    for (let r = 0; r < runs; r++) {
      const gap = e.varint();
      const more = e.varint();
      const first = end + gap;
      const n = more + 1;
      if (first + n > this.vertexCount || k + n > count) fail(E.INVAL);
      for (let i = 0; i < n; i++) l[k++] = this.order[first + i];
      end = first + n;
    }
    if (k !== count) fail(E.INVAL);
    if (e.at !== e.end) fail(E.TRAILING);
    return l;
  }
}

const GRID_MAX = 1 << 24;

function getOffsets2(c, t) {
  const shift = c.u8();
  if (shift > MAX_SHIFT) fail(E.INVAL);
  const indices = t.ranksGet(c);
  const raw = t.streamGet(c, indices, indices.length, 3);
  const q = new Int32Array(raw.buffer);
  const lim = Q_MAX + (shift ? 2 ** (shift - 1) : 0);
  const mul = 2 ** shift;
  for (let i = 0; i < q.length; i++) {
    const v = q[i] * mul;
    if (v > lim || v < -lim) fail(E.INVAL);
    q[i] = v;
  }
  return { shift, indices, q };
}

// The indices of `keys` (each below `limit`) in ascending order of key, ties in order: an LSD
// radix sort, 11 bits a pass and as many passes as `limit` needs (proto__sort_keys in
// protocol/proto_trav.c). Array.prototype.sort with a comparison was most of the demo head's
// target decoding.
function sortedOrder(keys, limit) {
  const k = keys.length;
  let order = new Uint32Array(k);
  let tmp = new Uint32Array(k);
  for (let i = 0; i < k; i++) order[i] = i;
  const count = new Uint32Array(2048);
  for (let shift = 0; shift < 32 && (limit - 1) >>> shift !== 0; shift += 11) {
    count.fill(0);
    for (let i = 0; i < k; i++) count[(keys[i] >>> shift) & 2047]++;
    for (let d = 0, at = 0; d < 2048; d++) {
      const n = count[d];
      count[d] = at;
      at += n;
    }
    for (let i = 0; i < k; i++) {
      const o = order[i];
      tmp[count[(keys[o] >>> shift) & 2047]++] = o;
    }
    [order, tmp] = [tmp, order];
  }
  return order;
}

// How far back an entropy join's target record may name the target it copies (§12.11).
const COPY_WINDOW = 64;

// A target record; `earlier` (the targets before `index` of the same SNAPSHOT) is given exactly
// when the record has the entropy layout's `copy` field.
// `budget.left`: the entries the SNAPSHOT may still decode (proto_limits.max_target_entries),
// taken before anything of their size is allocated.
function getTarget2(c, t, earlier, index, budget) {
  const tg = { name: c.str(), defaultWeight: c.f32() };
  Object.assign(tg, getMeta(c));
  tg.copyOf = 0;
  if (earlier) {
    const copy = c.varint();
    if (copy) {
      // A copy of target j: one of the COPY_WINDOW before, coded in full itself.
      const j = copy - 1;
      if (j >= index || index - j > COPY_WINDOW || earlier[j].copyOf) fail(E.INVAL);
      const o = earlier[j];
      if (o.indices.length > budget.left) fail(E.TOOBIG);
      budget.left -= o.indices.length;
      tg.indices = o.indices.slice();
      tg.deltas = o.deltas.slice();
      tg.step = o.step;
      tg.copyOf = copy;
      return tg;
    }
  }
  const step = c.f32();
  if (step < 0) fail(E.INVAL);
  const list = t.ranksGet(c);
  const k = list.length;
  if (k > budget.left) fail(E.TOOBIG);
  budget.left -= k;
  const val = t.streamGet(c, list, k, 3);
  const sval = new Int32Array(val.buffer);
  const order = sortedOrder(list, t.vertexCount); // ranks order the stream; a target lists its vertices ascending
  tg.indices = new Uint32Array(k);
  tg.deltas = new Float32Array(3 * k);
  for (let i = 0; i < k; i++) {
    const at = order[i];
    tg.indices[i] = list[at];
    for (let a = 0; a < 3; a++) {
      const d = sval[3 * at + a];
      if (step > 0 && (d >= GRID_MAX || d <= -GRID_MAX)) fail(E.INVAL);
      const x = step > 0 ? f32(d * step) : bitsToFloat(val[3 * at + a]);
      if (!finite(x)) fail(E.NONFINITE);
      tg.deltas[3 * i + a] = x;
    }
  }
  tg.step = step;
  return tg;
}

function getAttribute(c, t, lanes, origin, step, lossless, qmax) {
  const nv = t.vertexCount;
  const val = t.streamGet(c, null, nv, lanes);
  const a = new Float32Array(lanes * nv);
  for (let i = 0; i < nv; i++) {
    const v = t.order[i];
    for (let l = 0; l < lanes; l++) {
      const u = val[lanes * i + l];
      if (!lossless && u > qmax) fail(E.INVAL);
      const x = lossless ? bitsToFloat(u) : f32(origin[l] + f32(u * step[l]));
      if (!finite(x)) fail(E.NONFINITE);
      a[lanes * v + l] = x;
    }
  }
  return a;
}

function getHead2(c, l) {
  const s = { vertexCount: c.u32(), triangleCount: c.u32(), targetCount: c.u32(), offsetQuantum: c.f32() };
  const flags = c.u8();
  const shift = c.u8();
  const reserved = c.u16();
  const origin = [c.f32(), c.f32(), c.f32()];
  const uvOrigin = [c.f32(), c.f32()];
  const uvStep = [c.f32(), c.f32()];
  if (s.vertexCount > l.maxVertices || s.triangleCount > l.maxTriangles || s.targetCount > MAX_TARGETS) fail(E.TOOBIG);
  const lossless = (flags & 2) !== 0;
  s.hasUvs = (flags & 1) !== 0;
  s.entropy = (flags & 4) !== 0; // the triangles piece in the entropy layout (§12.11)
  if (!(s.offsetQuantum > 0) || flags & ~7 || reserved || shift > MAX_SHIFT || lossless !== (shift === 0)) fail(E.INVAL);
  const step = shift ? f32(s.offsetQuantum * 2 ** shift) : 0;
  if (shift && !finite(step)) fail(E.NONFINITE);
  const uvGrid = s.hasUvs && !lossless;
  for (let i = 0; i < 3; i++) if (lossless && origin[i] !== 0) fail(E.INVAL);
  for (let i = 0; i < 2; i++) {
    if (uvGrid ? !(uvStep[i] > 0) : uvStep[i] !== 0 || uvOrigin[i] !== 0) fail(E.INVAL);
  }
  s.grid = { quantum: s.offsetQuantum, shift, step, origin, uvOrigin, uvStep };
  return s;
}

// SNAPSHOT, version 2 (docs/protocol.md §12.6). Returns the snapshot with its traversal
// (s.trav), which later DELTA and TARGET frames of the session need.
export function decodeSnapshot2(p, limits) {
  const l = limitsOf(limits);
  const c = new Cursor(p);
  const s = getHead2(c, l);
  let t;
  if (s.entropy) {
    const got = trianglesGet(c, s.triangleCount, s.vertexCount, (tri, tc, vc) => new Trav(tri, tc, vc), fail, E);
    s.triangles = got.triangles;
    t = got.trav;
  } else {
    const ilen = c.u32();
    const ib = c.bytes(ilen);
    const ni = 3 * s.triangleCount;
    if (ni ? ilen < s.triangleCount + 17 : ilen !== 0) fail(E.TRUNCATED);
    s.triangles = new Uint32Array(ni);
    if (ni && decodeIndexBuffer(s.triangles, ni, ib) !== 0) fail(E.INVAL);
    t = new Trav(s.triangles, s.triangleCount, s.vertexCount);
  }
  const g = s.grid;
  const lossless = g.shift === 0;
  s.positions = getAttribute(c, t, 3, g.origin, [g.step, g.step, g.step], lossless, GRID_MAX - 1);
  s.uvs = s.hasUvs ? getAttribute(c, t, 2, g.uvOrigin, g.uvStep, lossless, 65535) : null;
  s.targets = [];
  const budget = { left: l.maxTargetEntries };
  for (let i = 0; i < s.targetCount; i++) {
    const tg = getTarget2(c, t, s.entropy ? s.targets : null, i, budget);
    checkDrivers(tg.drivers, i, s.targetCount);
    s.targets.push(tg);
  }
  const wb = c.bytes(4 * s.targetCount);
  const dv = new DataView(wb.buffer, wb.byteOffset, wb.byteLength);
  s.weights = new Float32Array(s.targetCount);
  for (let i = 0; i < s.targetCount; i++) {
    s.weights[i] = dv.getFloat32(4 * i, true);
    if (!finite(s.weights[i])) fail(E.NONFINITE);
  }
  s.offsets = getOffsets2(c, t);
  c.finish();
  s.trav = t;
  s.protocol = VERSION_2;
  return s;
}

export function decodeDelta2(p, trav) {
  const c = new Cursor(p);
  const o = getOffsets2(c, trav);
  c.finish();
  return o;
}

export function decodeTargetAdd2(p, trav) {
  const c = new Cursor(p);
  const index = c.u32();
  const weight = c.f32();
  if (index >= MAX_TARGETS) fail(E.INVAL);
  const t = getTarget2(c, trav, null, index, { left: trav.vertexCount }); // one target: at most every vertex
  checkDrivers(t.drivers, index, index);
  c.finish();
  return { index, weight, target: t };
}

// ---- BULK (capability "bulk", docs/protocol.md §15) ----------------------------------------------

export const BULK = { GET: 1, SET: 2, POSITIONS: 1, SCULPT: 2, TARGET: 3, WELDED: 1, TO_END: 0xffffffff };
const bulkWhatOk = (op, what) => (op === BULK.SET ? what === BULK.SCULPT : op === BULK.GET && what >= 1 && what <= 3);

// A BULK answer (proto_decode_bulk_answer): {requestId, op, what, flags, target, first, count,
// total, values (Float32Array of 3 · count for GET, null for SET)}.
export function decodeBulk(p) {
  if (p.length < 24) fail(E.TRUNCATED);
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const a = {
    requestId: dv.getUint32(0, true), op: p[4], what: p[5], flags: p[6], target: dv.getUint32(8, true),
    first: dv.getUint32(12, true), count: dv.getUint32(16, true), total: dv.getUint32(20, true), values: null,
  };
  if (!bulkWhatOk(a.op, a.what) || a.flags & ~BULK.WELDED || p[7] !== 0 || (a.what !== BULK.TARGET && a.target !== 0))
    fail(E.INVAL);
  if (a.first > a.total || a.count > a.total - a.first) fail(E.INVAL);
  const n = a.op === BULK.GET ? a.count : 0;
  if (p.length < 24 + 12 * n) fail(E.TRUNCATED);
  if (p.length > 24 + 12 * n) fail(E.TRAILING);
  if (a.op === BULK.GET) {
    a.values = new Float32Array(3 * n);
    for (let i = 0; i < 3 * n; i++) a.values[i] = dv.getFloat32(24 + 4 * i, true);
  }
  return a;
}

function bulkRequest(requestId, op, what, flags, target, first, count, values) {
  if (!bulkWhatOk(op, what) || flags & ~BULK.WELDED || (what !== BULK.TARGET && target !== 0) ||
      (op === BULK.SET && count === BULK.TO_END))
    fail(E.INVAL);
  const w = new Writer().begin(T.BULK);
  w.u32(requestId);
  w.u8(op);
  w.u8(what);
  w.u8(flags);
  w.u8(0);
  w.u32(target);
  w.u32(first);
  w.u32(count);
  if (op === BULK.SET) for (let i = 0; i < 3 * count; i++) w.f32(values[i]);
  return w.end();
}

// BULK GET: the current positions, the sculpt offsets or a target's deltas of vertices first …
// first + count − 1 (BULK.TO_END: to the last), render or welded (flags BULK.WELDED).
export function encodeBulkGet(requestId, what, flags, target, first, count) {
  return bulkRequest(requestId, BULK.GET, what, flags, target, first, count, null);
}

// BULK SET: the sculpt offsets of vertices first … first + count − 1 from 3 · count floats.
export function encodeBulkSet(requestId, flags, first, count, values) {
  return bulkRequest(requestId, BULK.SET, BULK.SCULPT, flags, 0, first, count, values);
}

// ---- writing --------------------------------------------------------------------------------------

// A growable little-endian byte writer (proto_buf).
export class Writer {
  constructor(cap = 256) {
    this.b = new Uint8Array(cap);
    this.dv = new DataView(this.b.buffer);
    this.len = 0;
  }
  room(n) {
    if (this.len + n <= this.b.length) return;
    let cap = this.b.length * 2;
    while (cap < this.len + n) cap *= 2;
    const g = new Uint8Array(cap);
    g.set(this.b.subarray(0, this.len));
    this.b = g;
    this.dv = new DataView(g.buffer);
  }
  u8(v) {
    this.room(1);
    this.b[this.len++] = v & 0xff;
  }
  u16(v) {
    this.room(2);
    this.dv.setUint16(this.len, v, true);
    this.len += 2;
  }
  u32(v) {
    this.room(4);
    this.dv.setUint32(this.len, v >>> 0, true);
    this.len += 4;
  }
  u64(v) {
    this.u32(v % 4294967296);
    this.u32(Math.floor(v / 4294967296));
  }
  f32(v) {
    this.room(4);
    this.dv.setFloat32(this.len, v, true);
    this.len += 4;
  }
  str(bytes) {
    this.u16(bytes.length);
    this.room(bytes.length);
    this.b.set(bytes, this.len);
    this.len += bytes.length;
  }
  varint(v) {
    v >>>= 0;
    do {
      const byte = v & 0x7f;
      v >>>= 7;
      this.u8(byte | (v ? 0x80 : 0));
    } while (v);
  }
  // A frame: header (length patched by end()), then the body.
  begin(type, flags = 0, sessionVersion = 0, version = VERSION_1) {
    this.frameAt = this.len;
    this.u32(MAGIC);
    this.u16(version);
    this.u8(type);
    this.u8(flags);
    this.u32(0);
    this.u64(sessionVersion);
    return this;
  }
  end() {
    this.dv.setUint32(this.frameAt + 8, this.len - this.frameAt - HEADER_SIZE, true);
    return this.b.slice(0, this.len);
  }
}

const utf8 = (s) => new TextEncoder().encode(s || '');
function validName(bytes) {
  return bytes.length <= MAX_NAME && bytes.indexOf(0) < 0;
}
const allFinite = (a) => a.every((x) => finite(x));

// HELLO: version 1, or version 2 with options {codec, maxRate, tolerance, author, caps}
// (proto_encode_hello2). caps: capability names to ask for (CAP.*; names this page does not
// know are sent too); null or undefined sends no caps option, [] an empty one.
export function encodeHello({ session, role, token = '', protocol = VERSION_2, codec = 0, maxRate = 0, tolerance = 0, author = '', caps = null }) {
  const s = utf8(session);
  const k = utf8(token);
  const a = utf8(author);
  if (!validName(s) || !validName(k) || a.length > MAX_AUTHOR || a.indexOf(0) >= 0) fail(E.INVAL);
  if (protocol !== VERSION_1 && protocol !== VERSION_2) fail(E.INVAL);
  if (protocol === VERSION_2 && (codec > CODEC_LOSSLESS || !(finite(maxRate) && maxRate >= 0) || !(finite(tolerance) && tolerance >= 0)))
    fail(E.INVAL);
  const cv = caps ? encodeCaps(caps) : null;
  const w = new Writer().begin(T.HELLO, 0, 0, protocol);
  w.u16(protocol);
  w.u8(role);
  w.u8(0);
  w.str(s);
  w.str(k);
  if (protocol === VERSION_2) {
    w.u16(18 + (a.length ? 3 + a.length : 0) + (cv ? 3 + cv.length : 0));
    w.u8(1), w.u16(1), w.u8(codec);
    w.u8(2), w.u16(4), w.f32(maxRate);
    w.u8(3), w.u16(4), w.f32(tolerance);
    if (a.length) w.u8(5), w.str(a); // the author: u16 length + bytes, the entry's own layout
    if (cv) w.u8(OPT.CAPS), w.str(cv); // the same layout: u16 length + the list
  }
  return w.end();
}

export function encodePing(type, { seq, t0 = 0, t1 = 0 }) {
  if (type !== T.PING && type !== T.PONG) fail(E.INVAL);
  const w = new Writer().begin(type);
  w.u32(seq);
  w.u64(t0);
  w.u64(t1);
  return w.end();
}

export function encodeBye(code, message) {
  let m = utf8(message);
  if (m.length > 1024) m = m.subarray(0, 1024);
  const w = new Writer().begin(T.BYE);
  w.u16(code);
  w.u32(0);
  w.str(m);
  return w.end();
}

function editBegin(requestId, kind) {
  const w = new Writer().begin(T.EDIT);
  w.u32(requestId);
  w.u8(kind);
  return w;
}

// EDIT kind 1: `entries` [[target, value], ...] (sparse), or dense when `dense` is set.
export function encodeEditWeights(requestId, entries, dense = false) {
  if (entries.length > MAX_TARGETS) fail(E.INVAL);
  for (const [t, v] of entries) {
    if (!finite(v) || !finite(f32(v))) fail(E.NONFINITE);
    if (!dense && t >= MAX_TARGETS) fail(E.INVAL);
  }
  const w = editBegin(requestId, EDIT.WEIGHTS);
  w.u8(dense ? 0 : 1);
  w.u32(entries.length);
  for (const [t, v] of entries) {
    if (!dense) w.u16(t);
    w.f32(v);
  }
  return w.end();
}

// EDIT kind 2: ascending `indices`, `q` 3 per vertex (session quanta).
export function encodeEditOffsets(requestId, indices, q) {
  for (let i = 0; i < indices.length; i++) {
    if (i > 0 && indices[i] <= indices[i - 1]) fail(E.INVAL);
    for (let k = 0; k < 3; k++) if (q[3 * i + k] > Q_MAX || q[3 * i + k] < -Q_MAX) fail(E.INVAL);
  }
  const w = editBegin(requestId, EDIT.OFFSETS);
  w.u32(indices.length);
  const at = w.len;
  w.u32(0);
  for (let i = 0; i < indices.length; i++) {
    w.varint(i === 0 ? indices[0] : indices[i] - indices[i - 1] - 1);
    for (let k = 0; k < 3; k++) {
      const v = q[3 * i + k] | 0;
      w.varint(((v << 1) ^ (v >> 31)) >>> 0);
    }
  }
  w.dv.setUint32(at, w.len - at - 4, true);
  return w.end();
}

// EDIT kind 3: {gesture, mode (0 laplacian, 1 arap, 2 biharmonic), iterations, pick, handleRadius,
// roiRadius, handle, roi, anchors}.
export function encodeGestureBegin(requestId, g) {
  const handle = g.handle || [];
  const roi = g.roi || [];
  const anchors = g.anchors || [];
  const pick = g.pick === undefined || g.pick === null ? NO_PICK : g.pick;
  const hr = g.handleRadius || 0;
  const rr = g.roiRadius || 0;
  if (!g.gesture || g.mode > 2 || g.iterations < 1 || g.iterations > 100 || !finite(hr) || !finite(rr) || hr < 0 || rr < 0)
    fail(E.INVAL);
  const w = editBegin(requestId, EDIT.GESTURE_BEGIN);
  w.u32(g.gesture);
  w.u8(g.mode);
  w.u8(0);
  w.u16(g.iterations);
  w.u32(pick);
  w.f32(hr);
  w.f32(rr);
  for (const list of [handle, roi, anchors]) {
    w.u32(list.length);
    for (const v of list) w.u32(v);
  }
  return w.end();
}

// EDIT kind 4: {gesture, translate[3], rotate[4] (quaternion x y z w), pivot[3] or null}.
export function encodeGestureDrag(requestId, { gesture, translate, rotate = [0, 0, 0, 1], pivot = null }) {
  const pv = pivot || [0, 0, 0];
  if (!allFinite(translate) || !allFinite(rotate) || !allFinite(pv)) fail(E.NONFINITE);
  const w = editBegin(requestId, EDIT.GESTURE_DRAG);
  w.u32(gesture);
  for (const x of translate) w.f32(x);
  for (const x of rotate) w.f32(x);
  w.u8(pivot ? 1 : 0);
  for (const x of pv) w.f32(x);
  return w.end();
}

export function encodeGestureEnd(requestId, gesture) {
  const w = editBegin(requestId, EDIT.GESTURE_END);
  w.u32(gesture);
  return w.end();
}

// EDIT kind 6: brush 0 grab … 7 layer (BRUSH), falloff 0 smoothstep … 3 constant, flags
// BRUSH_* (mirror x, front faces only, continue, auto-smoothing), the points of the stroke's path
// [{center, direction, radius, strength}]: the server places the dabs along them; `mirror` the
// symmetry plane (BRUSH_AXIS; X also sets BRUSH_MIRROR_X, so that an older server mirrors it).
export function encodeBrush(requestId, brush, falloff, flags, samples, mirror = 0) {
  if (mirror === BRUSH_AXIS.X) flags |= BRUSH_MIRROR_X;
  if (!(brush >= 0 && brush <= 7) || !(falloff >= 0 && falloff <= 3) || !(flags >= 0 && flags <= 255) ||
      flags & ~BRUSH_FLAGS_KNOWN || samples.length > 65536 || !(mirror >= 0 && mirror <= 3) ||
      (flags & BRUSH_MIRROR_X && mirror > BRUSH_AXIS.X))
    fail(E.INVAL);
  for (const s of samples)
    if (!allFinite(s.center) || !allFinite(s.direction) || !finite(s.radius) || !finite(s.strength)) fail(E.NONFINITE);
  const w = editBegin(requestId, EDIT.BRUSH);
  w.u8(brush);
  w.u8(falloff);
  w.u8(flags);
  w.u8(mirror);
  w.u32(samples.length);
  for (const s of samples) {
    for (const x of s.center) w.f32(x);
    for (const x of s.direction) w.f32(x);
    w.f32(s.radius);
    w.f32(s.strength);
  }
  return w.end();
}

// EDIT kind 7: the vertices to reset ([] = every vertex).
export function encodeReset(requestId, vertices) {
  const w = editBegin(requestId, EDIT.RESET);
  w.u32(vertices.length);
  for (const v of vertices) w.u32(v);
  return w.end();
}

// EDIT kind 8: pins [{vertex, position[3]}], flags 1 = keep close to the current weights.
export function encodeBlendPins(requestId, flags, regularization, pins) {
  if (flags & ~1 || !(regularization >= 0) || pins.length === 0 || pins.length > 10000) {
    if (!finite(regularization)) fail(E.NONFINITE);
    fail(E.INVAL);
  }
  for (const p of pins) if (!allFinite(p.position)) fail(E.NONFINITE);
  const w = editBegin(requestId, EDIT.BLEND_PINS);
  w.u8(flags);
  w.f32(regularization);
  w.u32(pins.length);
  for (const p of pins) {
    w.u32(p.vertex);
    for (const x of p.position) w.f32(x);
  }
  return w.end();
}

// EDIT kinds 9 and 10.
export function encodeHistory(requestId, redo) {
  return editBegin(requestId, redo ? EDIT.REDO : EDIT.UNDO).end();
}

// EDIT kind 11: the author this connection's edits are recorded under.
export function encodeAuthor(requestId, author) {
  const a = utf8(author);
  if (a.length === 0 || a.length > MAX_AUTHOR) fail(E.INVAL);
  const w = editBegin(requestId, EDIT.AUTHOR);
  w.str(a);
  return w.end();
}

// EDIT kind 12: a step of the author's mask. op MASK_OP.*; a stroke: tool, falloff, samples
// [{center, radius, strength}]; auto: mode (0 topology, 1 normal, 2 boundary), combine (0
// replace, 1 add), vertex, angle (degrees), rings.
export function encodeEditMask(requestId, { op, tool = 0, falloff = 0, samples = [], mode = 0, combine = 0, vertex = 0, angle = 60, rings = 1 }) {
  if (!(op >= 0 && op <= 3)) fail(E.INVAL);
  if (op === MASK_OP.STROKE) {
    if (!(tool >= 0 && tool <= 2) || !(falloff >= 0 && falloff <= 3) || samples.length === 0 || samples.length > 65536) fail(E.INVAL);
    for (const s of samples) {
      if (!allFinite(s.center) || !finite(s.radius) || !finite(s.strength)) fail(E.NONFINITE);
      if (!(s.radius > 0) || !(s.strength >= 0 && s.strength <= 1)) fail(E.INVAL);
    }
  }
  if (op === MASK_OP.AUTO) {
    if (!finite(angle)) fail(E.NONFINITE);
    if (!(mode >= 0 && mode <= 2) || !(combine === 0 || combine === 1) || !(angle >= 0 && angle <= 180) || !(rings >= 1 && rings <= 65535))
      fail(E.INVAL);
  }
  const w = editBegin(requestId, EDIT.MASK);
  w.u8(op);
  if (op === MASK_OP.STROKE) {
    w.u8(tool);
    w.u8(falloff);
    w.u32(samples.length);
    for (const s of samples) {
      for (const x of s.center) w.f32(x);
      w.f32(s.radius);
      w.f32(s.strength);
    }
  } else if (op === MASK_OP.AUTO) {
    w.u8(mode);
    w.u8(combine);
    w.u32(vertex);
    w.f32(angle);
    w.u16(rings);
  }
  return w.end();
}

// Offsets in mesh units from session quanta: (float)q · quantum, in float32 (docs/protocol.md §8.1).
export function dequantise(q, quantum) {
  return f32(f32(q) * quantum);
}

// ---- PRESENCE (type 14, capability "presence"; docs/protocol.md §16, proto_presence.h) ---------

export const PRES = { INFO: 1, LEAVE: 2, STATE: 3, CLEAR: 4, ABOUT: 5 };
export const CLIENT = { UNKNOWN: 0, VIEW: 1, PAGE: 2, TOOL: 3, JSON: 4 };
export const PRES_EDITING = 1;
export const PRES_PRIVATE = 2;
export const PRES_REMOTE = 4;
export const PRES_CURSOR = 1;
export const PRES_CAMERA = 2;
export const TOOL = { NONE: 0, DEFORM: 1, BRUSH0: 2, MAX: 9 };
export const MAX_PRESENCE_RECORDS = 4096;

const vec3 = (c) => [c.f32(), c.f32(), c.f32()];

function getInfo(c) {
  const r = { kind: PRES.INFO, id: c.u32(), role: c.u8(), client: c.u8(), flags: c.u8(), idleMs: c.u32() };
  const n = c.u16();
  if (n > MAX_NAME) fail(E.TOOBIG);
  const a = c.bytes(n);
  if (a.indexOf(0) >= 0) fail(E.INVAL);
  if (r.role !== ROLE_VIEWER && r.role !== ROLE_EDITOR) fail(E.INVAL);
  if (r.client > CLIENT.JSON || r.flags & ~7) fail(E.INVAL);
  if (a.length === 0 || a.length > MAX_AUTHOR || a.some((b) => b < 0x20 || b === 0x7f)) fail(E.INVAL);
  r.author = new TextDecoder().decode(a);
  return r;
}

function getState(c) {
  const r = { kind: PRES.STATE, id: c.u32(), flags: c.u8(), tool: c.u8() };
  r.hit = vec3(c);
  r.normal = vec3(c);
  r.radius = c.f32();
  r.eye = vec3(c);
  r.target = vec3(c);
  r.fov = c.f32();
  if (r.flags & ~3 || r.tool > TOOL.MAX || r.radius < 0) fail(E.INVAL);
  if (r.flags & PRES_CAMERA && !(r.fov > 0 && r.fov < Math.fround(Math.PI))) fail(E.INVAL);
  return r;
}

// A PRESENCE payload: its records, in order (proto_presence_next, check for check).
export function decodePresence(p) {
  const c = new Cursor(p);
  const out = [];
  while (c.at < c.end) {
    if (out.length === MAX_PRESENCE_RECORDS) fail(E.TOOBIG);
    const kind = c.u8();
    if (kind === PRES.INFO) out.push(getInfo(c));
    else if (kind === PRES.LEAVE) out.push({ kind, id: c.u32() });
    else if (kind === PRES.STATE) out.push(getState(c));
    else if (kind === PRES.CLEAR) out.push({ kind });
    else if (kind === PRES.ABOUT) {
      const r = { kind, client: c.u8(), flags: c.u8() };
      if (r.client > CLIENT.JSON || r.flags & ~PRES_PRIVATE) fail(E.INVAL);
      out.push(r);
    } else fail(E.INVAL);
  }
  return out;
}

// A client's PRESENCE frame: its STATE ({flags, tool, hit, normal, radius, eye, target, fov};
// the parts its flags leave out are sent as zeros), with an ABOUT ({client, flags}) first when
// `about` is given (proto_presence_put_about / put_state).
export function encodePresence(state, about = null) {
  const w = new Writer().begin(T.PRESENCE);
  if (about) {
    if (about.client > CLIENT.JSON || about.flags & ~PRES_PRIVATE) fail(E.INVAL);
    w.u8(PRES.ABOUT), w.u8(about.client), w.u8(about.flags);
  }
  if (state) {
    const cursor = state.flags & PRES_CURSOR, camera = state.flags & PRES_CAMERA;
    const z = [0, 0, 0];
    const vals = [...(cursor ? state.hit : z), ...(cursor ? state.normal : z), cursor ? state.radius : 0,
      ...(camera ? state.eye : z), ...(camera ? state.target : z), camera ? state.fov : 0];
    if (!allFinite(vals) || !allFinite(vals.map(f32))) fail(E.NONFINITE);
    w.u8(PRES.STATE), w.u32(0), w.u8(state.flags), w.u8(cursor ? state.tool : 0);
    for (const v of vals) w.f32(v);
  }
  return w.end();
}

// An author's colour, the same bytes as proto_presence_colour: FNV-1a 32 of the name's UTF-8,
// mod 360 a hue, RGB at value 230 and chroma 161 in integers (docs/protocol.md §15.4).
export function presenceColour(name) {
  let h = 2166136261;
  for (const b of utf8(name)) h = Math.imul(h ^ b, 16777619) >>> 0;
  const hue = h % 360, sector = Math.floor(hue / 60), f = hue % 60;
  const chroma = 161, base = 230 - chroma;
  const mid = sector % 2 === 0 ? base + Math.floor((chroma * f) / 60) : base + Math.floor((chroma * (60 - f)) / 60);
  const order = [[0, 1, 2], [1, 0, 2], [1, 2, 0], [2, 1, 0], [2, 0, 1], [0, 2, 1]][sector];
  const rgb = [0, 0, 0];
  rgb[order[0]] = base + chroma;
  rgb[order[1]] = mid;
  rgb[order[2]] = base;
  return rgb;
}
