// protocol.test.mjs — viewer/web/protocol.js and meshopt.js against the C codec: run with node's
// built-in test runner on the fixtures tests/web/write_fixtures.c writes (tests/web/run_node.sh).
//
// Oracles: the C decoders' verdicts (0 or a PROTO_E* code) on the same bytes, valid and
// malformed; the C replica's positions after each frame (float32 bits); the C encoders' bytes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import * as P from '../../viewer/web/protocol.js';
import { Replica } from '../../viewer/web/replica.js';
import * as TC from '../../viewer/web/texclip.js';

const path = process.env.WEB_FIXTURES;
if (!path) throw new Error('WEB_FIXTURES is not set: run tests/web/run_node.sh');
const items = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const bytes = (hex) => Uint8Array.from(hex.match(/../g) || [], (h) => parseInt(h, 16));

const streams = Object.fromEntries(items.filter((i) => i.kind === 'stream').map((s) => [s.name, s]));

// The traversal the C writer decoded version 2 DELTA and TARGET cases against: the small mesh's
// version 2 snapshot on shift 5.
function smallTrav() {
  const f = bytes(streams['small-v2-shift5'].frames[0].frame);
  return P.decodeSnapshot2(P.splitFrame(f).payload).trav;
}

function jsDecode(decoder, p, trav) {
  switch (decoder) {
    case 'header': return P.decodeHeader(p);
    case 'welcome': return P.decodeWelcome(p);
    case 'caps': return P.decodeCaps(p);
    case 'presence': return P.decodePresence(p);
    case 'error': return P.decodeError(p);
    case 'ping': return P.decodePing(p);
    case 'weights': return P.decodeWeights(p);
    case 'delta': return P.decodeDelta(p);
    case 'target_meta': return P.decodeTargetMeta(p);
    case 'target_add': return P.decodeTargetAdd(p);
    case 'snapshot': return P.decodeSnapshot(p);
    case 'snapshot2': return P.decodeSnapshot2(p);
    case 'delta2': return P.decodeDelta2(p, trav);
    case 'target_add2': return P.decodeTargetAdd2(p, trav);
    case 'bulk': return P.decodeBulk(p);
    case 'mask': return P.decodeMask(p);
    case 'texture': return P.decodeTexture(p);
    case 'texclip': return TC.decodeTexclip(p);
    case 'texweights': return TC.decodeTexweights(p);
    default: throw new Error(`no decoder ${decoder}`);
  }
}

const cases = items.filter((i) => i.kind === 'case');
const decoders = [...new Set(cases.map((c) => c.decoder))];

for (const d of decoders) {
  const mine = cases.filter((c) => c.decoder === d);
  const refused = mine.filter((c) => c.expect !== 0).length;
  test(`${d}: every payload the C decoder accepts or refuses (${mine.length}, ${refused} refused) gets the same verdict and code`, () => {
    const trav = smallTrav();
    const wrong = [];
    for (const c of mine) {
      let got = 0;
      try {
        jsDecode(d, bytes(c.hex), trav);
      } catch (e) {
        if (!(e instanceof P.ProtoError)) throw e;
        got = e.code;
      }
      if (got !== c.expect) wrong.push(`${c.hex.slice(0, 80)}…: C says ${c.expect}, JavaScript ${got}`);
    }
    assert.deepEqual(wrong.slice(0, 10), []);
  });
}

// proto_limits.max_target_entries: a SNAPSHOT's targets together (copies counted) are bounded,
// since a rANS stream codes many values in few bytes; at exactly its entries the demo head's
// entropy join decodes, one under it the page refuses it as TOOBIG.
test('a snapshot whose targets hold more entries than maxTargetEntries is refused as too big', () => {
  const { payload } = P.splitFrame(bytes(streams['demo-head-shift5-entropy'].frames[0].frame));
  const s = P.decodeSnapshot2(payload);
  const total = s.targets.reduce((n, t) => n + t.indices.length, 0);
  assert.ok(s.targets.some((t) => t.copyOf), 'the join has copies');
  assert.equal(P.decodeSnapshot2(payload, { maxTargetEntries: total }).targets.length, s.targets.length);
  assert.throws(() => P.decodeSnapshot2(payload, { maxTargetEntries: total - 1 }), (e) => e instanceof P.ProtoError && e.code === P.E.TOOBIG);
});

// A target lists its vertices ascending (docs/protocol.md §12.7): its entries travel in rank
// order and the page sorts them back (sortedOrder). The replica tests above show each vertex
// keeps its delta; this one that the order is the vertices', in both codings of the demo head.
test('the targets of a snapshot list their vertices ascending, each vertex once', () => {
  for (const name of ['demo-head-shift5', 'demo-head-shift5-entropy']) {
    const { payload } = P.splitFrame(bytes(streams[name].frames[0].frame));
    const s = P.decodeSnapshot2(payload);
    assert.ok(s.targets.length > 60 && s.targets.some((t) => t.indices.length > 2048), `${name}: long lists`);
    for (const [i, t] of s.targets.entries())
      for (let k = 1; k < t.indices.length; k++)
        if (!(t.indices[k - 1] < t.indices[k])) assert.fail(`${name}: target ${i}, entries ${k - 1} and ${k}: ${t.indices[k - 1]}, ${t.indices[k]}`);
  }
});

test('every message type the server sends has decoder cases, refused ones included', () => {
  for (const d of ['header', 'welcome', 'caps', 'presence', 'error', 'ping', 'weights', 'delta', 'delta2', 'target_meta', 'target_add',
    'target_add2', 'snapshot', 'snapshot2', 'bulk', 'mask', 'texture', 'texclip', 'texweights']) {
    assert.ok(cases.some((c) => c.decoder === d && c.expect === 0), `${d}: a valid case`);
    assert.ok(cases.some((c) => c.decoder === d && c.expect !== 0), `${d}: a refused case`);
  }
});

for (const s of Object.values(streams)) {
  test(`${s.name}: after each of its ${s.frames.length} frames the replica holds the C replica's positions bit for bit`, () => {
    const r = new Replica();
    for (const [i, f] of s.frames.entries()) {
      const { header, payload } = P.splitFrame(bytes(f.frame));
      r.apply(header, payload);
      assert.equal(r.version, f.version, `frame ${i}: version`);
      const want = new Uint32Array(bytes(f.positions).buffer);
      const got = new Uint32Array(r.evaluate().buffer);
      assert.equal(got.length, want.length);
      let diff = 0;
      for (let k = 0; k < want.length; k++) if (got[k] !== want[k]) diff++;
      assert.equal(diff, 0, `frame ${i}: ${diff} of ${want.length} components differ`);
    }
  });
}

const encoders = {
  hello: (a) => P.encodeHello(a),
  editWeights: ([id, entries]) => P.encodeEditWeights(id, entries),
  editOffsets: ([id, idx, q]) => P.encodeEditOffsets(id, idx, q),
  gestureBegin: ([id, g]) => P.encodeGestureBegin(id, g),
  gestureDrag: ([id, g]) => P.encodeGestureDrag(id, g),
  gestureEnd: ([id, g]) => P.encodeGestureEnd(id, g),
  brush: ([id, b, f, m, s, axis]) => P.encodeBrush(id, b, f, m, s, axis),
  reset: ([id, v]) => P.encodeReset(id, v),
  blendPins: ([id, f, l, pins]) => P.encodeBlendPins(id, f, l, pins),
  history: ([id, redo]) => P.encodeHistory(id, redo),
  author: ([id, a]) => P.encodeAuthor(id, a),
  editMask: ([id, m]) => P.encodeEditMask(id, m),
  ping: ([type, p]) => P.encodePing(type, p),
  bye: ([code, m]) => P.encodeBye(code, m),
  bulkGet: ([id, what, flags, target, first, count]) => P.encodeBulkGet(id, what, flags, target, first, count),
  bulkSet: ([id, flags, first, count, v]) => P.encodeBulkSet(id, flags, first, count, v),
  presence: ([state, about]) => P.encodePresence(state, about),
};

for (const e of items.filter((i) => i.kind === 'encoder')) {
  test(`${e.fn}(${JSON.stringify(e.args).slice(0, 60)}) writes the C encoder's bytes`, () => {
    assert.deepEqual(Buffer.from(encoders[e.fn](e.args)).toString('hex'), e.hex);
  });
}

test('every message a client sends has an encoder checked against C', () => {
  const fns = new Set(items.filter((i) => i.kind === 'encoder').map((e) => e.fn));
  for (const f of Object.keys(encoders)) assert.ok(fns.has(f), f);
});

test('encoders refuse what the C encoders refuse', () => {
  const code = (f) => {
    try {
      f();
    } catch (e) {
      return e.code;
    }
    return 0;
  };
  assert.equal(code(() => P.encodeHello({ session: 'a\0b', role: 1 })), P.E.INVAL);
  assert.equal(code(() => P.encodeHello({ session: 'x'.repeat(256), role: 1 })), P.E.INVAL);
  assert.equal(code(() => P.encodeHello({ session: 'demo', role: 1, caps: ['noop', 'noop'] })), P.E.INVAL);
  assert.equal(code(() => P.encodeHello({ session: 'demo', role: 1, caps: ['No'] })), P.E.INVAL);
  assert.equal(code(() => P.encodeHello({ session: 'demo', role: 1, caps: [''] })), P.E.INVAL);
  assert.equal(code(() => P.encodeHello({ session: 'demo', role: 1, caps: ['x'.repeat(33)] })), P.E.INVAL);
  assert.equal(code(() => P.encodeEditWeights(1, [[0, NaN]])), P.E.NONFINITE);
  assert.equal(code(() => P.encodeEditWeights(1, [[0, 1e39]])), P.E.NONFINITE);
  assert.equal(code(() => P.encodeEditOffsets(1, [3, 3], [0, 0, 0, 0, 0, 0])), P.E.INVAL);
  assert.equal(code(() => P.encodeEditOffsets(1, [3], [1 << 30, 0, 0])), P.E.INVAL);
  assert.equal(code(() => P.encodeGestureBegin(1, { gesture: 0, mode: 1, iterations: 2, pick: 1 })), P.E.INVAL);
  assert.equal(code(() => P.encodeGestureBegin(1, { gesture: 1, mode: 1, iterations: 101, pick: 1 })), P.E.INVAL);
  assert.equal(code(() => P.encodeGestureDrag(1, { gesture: 1, translate: [0, Infinity, 0] })), P.E.NONFINITE);
  assert.equal(code(() => P.encodeBrush(1, 8, 0, 0, [])), P.E.INVAL); /* kinds 0-7 */
  assert.equal(code(() => P.encodeBrush(1, 5, 0, 0x08, [])), P.E.INVAL); /* flag bit 3 */
  assert.equal(code(() => P.encodeBrush(1, 5, 0, 256, [])), P.E.INVAL);
  assert.equal(code(() => P.encodeBrush(1, 5, 0, 0, [], 4)), P.E.INVAL); /* mirror planes 0-3 */
  assert.equal(code(() => P.encodeBrush(1, 5, 0, P.BRUSH_MIRROR_X, [], P.BRUSH_AXIS.Z)), P.E.INVAL); /* one plane */
  assert.equal(code(() => P.encodeAuthor(1, '')), P.E.INVAL);
  assert.equal(code(() => P.encodeAuthor(1, 'x'.repeat(65))), P.E.INVAL);
  assert.equal(code(() => P.encodeBlendPins(1, 2, 0, [{ vertex: 0, position: [0, 0, 0] }])), P.E.INVAL);
});

test('one WebSocket message is one frame: a message with more or fewer bytes is refused', () => {
  const f = bytes(streams['small-v1-shift5'].frames[1].frame);
  assert.equal(P.splitFrame(f).header.type, P.T.DELTA);
  const longer = new Uint8Array(f.length + 20);
  longer.set(f);
  longer.set(f.subarray(0, 20), f.length);
  assert.throws(() => P.splitFrame(longer), (e) => e.code === P.E.TRAILING);
  assert.throws(() => P.splitFrame(f.subarray(0, f.length - 1)), (e) => e.code === P.E.TRUNCATED);
});

test('a WELCOME names the capabilities granted, and says nothing of them when the HELLO asked for none', () => {
  const welcomes = cases.filter((c) => c.decoder === 'welcome' && c.expect === 0).map((c) => P.decodeWelcome(bytes(c.hex)));
  const answered = welcomes.filter((w) => w.caps !== null);
  assert.ok(answered.some((w) => w.caps.length === 1 && w.caps[0] === P.CAP.NOOP));
  assert.ok(welcomes.some((w) => w.protocolVersion === P.VERSION_2 && w.caps === null));
  assert.ok(answered.some((w) => w.caps.length === 1 && w.caps[0] === P.CAP.UP && w.up === 'z'));
  assert.deepEqual(P.decodeCaps(Uint8Array.from([4, 0x6e, 0x6f, 0x6f, 0x70, 2, 0x7a, 0x7a])), ['noop', 'zz']);
});

test('an author has the same colour here as in C (proto_presence_colour), for every name the C writer tried', () => {
  const colours = items.filter((i) => i.kind === 'colour');
  assert.ok(colours.length >= 5);
  for (const c of colours) assert.deepEqual(P.presenceColour(c.name), c.rgb, c.name);
});

test('a PRESENCE update decodes to its records: the list, who they are, where they look, who left', () => {
  const valid = cases.filter((c) => c.decoder === 'presence' && c.expect === 0).map((c) => P.decodePresence(bytes(c.hex)));
  const update = valid.find((r) => r.length === 5);
  assert.deepEqual(update.map((r) => r.kind), [P.PRES.CLEAR, P.PRES.INFO, P.PRES.INFO, P.PRES.STATE, P.PRES.LEAVE]);
  assert.equal(update[1].author, 'ana');
  assert.equal(update[2].flags, P.PRES_PRIVATE | P.PRES_REMOTE);
  assert.equal(update[3].id, 3);
  assert.equal(update[3].fov, Math.fround(0.785398));
  assert.deepEqual(update[3].hit, [0.1, 0.2, 0.3].map(Math.fround));
  assert.equal(update[4].id, 7);
});

test('texclip.js rebuilds a texture clip frame as the C reference (shared/mesh_texpca.c) does', () => {
  const fx = items.find((i) => i.kind === 'texclip_rebuild');
  assert.ok(fx, 'the fixture');
  const clip = TC.decodeTexclip(P.splitFrame(bytes(fx.clip)).payload);
  const [entry] = TC.decodeTexweights(P.splitFrame(bytes(fx.weights)).payload);
  assert.equal(clip.windows.length, 3);
  assert.equal(entry.id, clip.id);
  const got = TC.rebuild(clip, entry), want = bytes(fx.rgb);
  assert.equal(got.length, want.length);
  let worst = 0, exact = 0;
  for (let i = 0; i < got.length; i++) {
    worst = Math.max(worst, Math.abs(got[i] - want[i]));
    exact += got[i] === want[i];
  }
  assert.ok(worst <= 1, `worst ${worst}/255`);
  assert.ok(exact >= got.length - 3, `${exact} of ${got.length} exact`);
});
