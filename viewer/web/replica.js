// replica.js — a session as a viewer holds it (server/client/client_replica.c in JavaScript): the
// SNAPSHOT's mesh and targets, the weights, the sculpt offsets in session quanta, the version,
// and what changed since the renderer last looked (weights, the span of vertices a DELTA touched,
// targets added), so that the GPU is given only that.
//
// Frames apply as docs/protocol.md says: WEIGHTS and DELTA carry absolute values; a frame with
// MORE does not advance the version (its update is half applied until the last frame); TARGET
// appends (its index must be the target count); TARGET_META replaces a target's settings.
//
// DOES NOT touch the GPU (render.js) or the socket (net.js); evaluate() is the CPU form of the
// formula (docs/protocol.md §8.2, double accumulation), for tests and for picking without a GPU.

import * as P from './protocol.js';
import { decodeTexclip, decodeTexweights } from './texclip.js';

export class ReplicaError extends Error {}

export class Replica {
  constructor() {
    this.snapshot = null;
    this.version = 0;
    this.changes = null;
  }

  get ready() {
    return this.snapshot !== null;
  }

  get vertexCount() {
    return this.snapshot ? this.snapshot.vertexCount : 0;
  }

  // Applies one frame (its header and payload). Returns the header type.
  apply(h, p) {
    if (h.type === P.T.SNAPSHOT) {
      const s = h.version === P.VERSION_2 ? P.decodeSnapshot2(p) : P.decodeSnapshot(p);
      this.load(s);
      this.version = h.sessionVersion;
      return h.type;
    }
    if (h.type === P.T.MASK) {
      // The author's own mask (capability "mask"): the whole of it, every vertex not listed 0.
      if (!this.snapshot) throw new ReplicaError('MASK before the snapshot');
      const m = P.decodeMask(p);
      if (m.vertexCount !== this.vertexCount) throw new ReplicaError(`MASK: ${m.vertexCount} vertices, the mesh ${this.vertexCount}`);
      const mask = new Float32Array(this.vertexCount);
      for (let i = 0; i < m.vertices.length; i++) mask[m.vertices[i]] = m.values[i];
      this.mask = mask;
      this.maskSerial = (this.maskSerial || 0) + 1; // MASK frames applied
      this.changes.mask = true;
      return h.type;
    }
    if (h.type === P.T.TEXTURE) return this.applyTexture(p);
    if (h.type === P.T.TEXCLIP || h.type === P.T.TEXWEIGHTS) return this.applyTexclip(h, p);
    if (h.type !== P.T.WEIGHTS && h.type !== P.T.DELTA && h.type !== P.T.TARGET && h.type !== P.T.TARGET_META) return h.type;
    if (!this.snapshot) throw new ReplicaError(`a state frame (type ${h.type}) before the snapshot`);
    const s = this.snapshot;
    if (h.type === P.T.WEIGHTS) {
      const w = P.decodeWeights(p);
      for (const [t] of w.entries) if (t >= s.targets.length) throw new ReplicaError(`WEIGHTS: target ${t} of ${s.targets.length}`);
      for (const [t, v] of w.entries) s.weights[t] = v;
      this.changes.weights = true;
    } else if (h.type === P.T.DELTA) {
      const o = h.version === P.VERSION_2 ? P.decodeDelta2(p, this.requireTrav()) : P.decodeDelta(p);
      for (const v of o.indices) if (v >= s.vertexCount) throw new ReplicaError(`DELTA: vertex ${v} of ${s.vertexCount}`);
      this.setOffsets(o);
    } else if (h.type === P.T.TARGET) {
      const a = h.version === P.VERSION_2 ? P.decodeTargetAdd2(p, this.requireTrav()) : P.decodeTargetAdd(p);
      if (a.index !== s.targets.length) throw new ReplicaError(`TARGET ${a.index}: this replica has ${s.targets.length}`);
      for (const v of a.target.indices) if (v >= s.vertexCount) throw new ReplicaError(`TARGET: vertex ${v} of ${s.vertexCount}`);
      s.targets.push(a.target);
      const w = new Float32Array(s.targets.length);
      w.set(s.weights);
      w[a.index] = a.weight;
      s.weights = w;
      this.changes.targets = true;
      this.changes.weights = true;
    } else {
      const m = P.decodeTargetMeta(p);
      if (m.index >= s.targets.length || m.drivers.some((d) => d >= s.targets.length))
        throw new ReplicaError(`TARGET_META: target ${m.index} of ${s.targets.length}`);
      Object.assign(s.targets[m.index], { min: m.min, max: m.max, flags: m.flags, drivers: m.drivers });
      this.changes.meta = true;
    }
    if (!(h.flags & P.FLAG_MORE)) this.version = h.sessionVersion;
    return h.type;
  }

  // TEXTURE (capability "texture", docs/protocol.md §17): MATERIALS gives each submesh's triangle
  // range, base colour and image index and the image slots, each IMAGE fills one; they come once
  // per join, right after the SNAPSHOT (client_texture.c in JavaScript).
  applyTexture(p) {
    if (!this.snapshot) throw new ReplicaError('TEXTURE before the snapshot');
    const t = P.decodeTexture(p);
    if (t.kind === P.TEX.MATERIALS) {
      const nt = this.snapshot.triangles.length / 3;
      for (const m of t.materials)
        if (m.firstTriangle > nt || m.triangleCount > nt - m.firstTriangle) throw new ReplicaError('TEXTURE: a submesh outside the mesh');
      this.materials = { submeshes: t.materials, images: new Array(t.imageCount).fill(null) };
    } else {
      if (!this.materials || t.index >= this.materials.images.length) throw new ReplicaError(`TEXTURE: image ${t.index} not announced`);
      this.materials.images[t.index] = { name: t.name, width: t.width, height: t.height, pixels: t.pixels.slice() };
    }
    this.textureSerial++;
    this.changes.textures = true;
    return P.T.TEXTURE;
  }

  // TEXCLIP and TEXWEIGHTS (capability "texclip", docs/protocol.md §18), as client_texclip.c: a
  // clip replaces one of its id; TEXWEIGHTS is absolute, the entries shown now.
  applyTexclip(h, p) {
    if (!this.snapshot) throw new ReplicaError('a texture clip frame before the snapshot');
    if (h.type === P.T.TEXCLIP) {
      const c = decodeTexclip(p);
      c.texels = c.texels.slice(); // a view into the frame: kept apart from it
      this.texclips = this.texclips.filter((o) => o.id !== c.id).concat([c]);
    } else this.texweights = decodeTexweights(p);
    this.texclipSerial++;
    this.changes.texclips = true;
    return h.type;
  }

  // Every TEXTURE frame of this join is here: MATERIALS and each image it announced.
  get texturesReady() {
    return !!this.materials && this.materials.images.every((i) => i !== null);
  }

  requireTrav() {
    if (!this.snapshot.trav) throw new ReplicaError('a version 2 frame on a version 1 session');
    return this.snapshot.trav;
  }

  load(s) {
    const V = s.vertexCount;
    s.q = new Int32Array(3 * V);
    this.snapshot = s;
    this.mask = null; // a new mesh: the next MASK frame brings its mask
    this.materials = null; // ... and its TEXTURE frames its materials
    this.textureSerial = 0;
    this.texclips = []; // ... and its TEXCLIP frames its texture clips
    this.texweights = [];
    this.texclipSerial = 0;
    this.changes = { snapshot: true, weights: true, targets: true, meta: true, mask: true, textures: true, texclips: true, first: V, end: 0 };
    this.setOffsets(s.offsets);
  }

  setOffsets(o) {
    const q = this.snapshot.q;
    const c = this.changes;
    for (let i = 0; i < o.indices.length; i++) {
      const v = o.indices[i];
      q[3 * v] = o.q[3 * i];
      q[3 * v + 1] = o.q[3 * i + 1];
      q[3 * v + 2] = o.q[3 * i + 2];
      if (v < c.first) c.first = v;
      if (v + 1 > c.end) c.end = v + 1;
    }
  }

  // What changed since the last call (and forgets it).
  takeChanges() {
    const c = this.changes;
    this.changes = { snapshot: false, weights: false, targets: false, meta: false, mask: false, textures: false, texclips: false, first: this.vertexCount, end: 0 };
    return c;
  }

  // The sculpt offset of every vertex in mesh units, float32 (docs/protocol.md §8.1).
  offsetsFloat(first = 0, end = this.vertexCount) {
    const s = this.snapshot;
    const out = new Float32Array(3 * (end - first));
    for (let i = 3 * first, k = 0; i < 3 * end; i++, k++) out[k] = P.dequantise(s.q[i], s.offsetQuantum);
    return out;
  }

  // base + sculpt + Σ w·Δ on the CPU, accumulated in double and rounded once (§8.2).
  evaluate() {
    const s = this.snapshot;
    const n = 3 * s.vertexCount;
    const acc = new Float64Array(n);
    for (let i = 0; i < n; i++) acc[i] = s.positions[i] + P.dequantise(s.q[i], s.offsetQuantum);
    s.targets.forEach((t, ti) => {
      const w = s.weights[ti];
      if (w === 0) return;
      for (let k = 0; k < t.indices.length; k++) {
        const o = 3 * t.indices[k];
        acc[o] += w * t.deltas[3 * k];
        acc[o + 1] += w * t.deltas[3 * k + 1];
        acc[o + 2] += w * t.deltas[3 * k + 2];
      }
    });
    return Float32Array.from(acc);
  }
}
