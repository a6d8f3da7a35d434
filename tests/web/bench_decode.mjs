// bench_decode.mjs — the page's SNAPSHOT decoder (viewer/web/protocol.js) on the two codings of
// one join, alternating: node tests/web/bench_decode.mjs PREFIX [RUNS]
//
// PREFIX.quantised and PREFIX.entropy are SNAPSHOT payloads that `deform-bench stream
// --save-joins DIR` writes (DIR/demo.*, DIR/dragon.*): the same mesh on the same grid in today's
// coding and in the entropy capability's (docs/protocol.md §12.11). Each run decodes one then the
// other, in turn, so that load and JIT warm-up fall on both; it prints the median, minimum and
// maximum of each, and checks that both decode to the same positions, bit for bit.
// A benchmark, not a test: it judges nothing.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

import * as P from '../../viewer/web/protocol.js';

const prefix = process.argv[2];
const runs = Number(process.argv[3] || 15);
if (!prefix || !(runs > 0)) throw new Error('usage: node tests/web/bench_decode.mjs PREFIX [RUNS]');
const codings = ['quantised', 'entropy'];
const payload = Object.fromEntries(codings.map((c) => [c, new Uint8Array(readFileSync(`${prefix}.${c}`))]));
const ms = { quantised: [], entropy: [] };
const positions = {};
for (let r = 0; r < runs + 2; r++) {
  for (const c of codings) {
    const t0 = performance.now();
    const s = P.decodeSnapshot2(payload[c]);
    const dt = performance.now() - t0;
    if (r >= 2) ms[c].push(dt); // the first two of each warm the JIT up
    positions[c] = s.positions;
  }
}
const same = Buffer.compare(Buffer.from(positions.quantised.buffer), Buffer.from(positions.entropy.buffer)) === 0;
for (const c of codings) {
  const v = ms[c].sort((a, b) => a - b);
  console.log(
    `${prefix} ${c.padEnd(9)} ${String(payload[c].length).padStart(9)} bytes  decode median ${v[v.length >> 1].toFixed(1)} ms ` +
      `(${v[0].toFixed(1)}-${v[v.length - 1].toFixed(1)}, ${runs} runs alternating)`,
  );
}
console.log(same ? 'same positions, bit for bit' : 'POSITIONS DIFFER');
if (!same) process.exitCode = 1;
