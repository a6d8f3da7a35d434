// tools.test.mjs — viewer/web/tools.js's stroke stabiliser (lazy mouse) with node's test runner
// (tests/web/run_node.sh). The oracle: the string's geometry written out here — the brush stays
// put while the pointer is within the string's length, and once pulled it sits on the segment
// to the pointer, exactly that length behind it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Stabiliser } from '../../viewer/web/tools.js';

const close = (a, b, eps = 1e-9) => Math.abs(a - b) <= eps;

test('the lazy point stays within the string and then trails the pointer by its length', () => {
  const s = new Stabiliser();
  const L = 24;
  s.start(100, 100);
  assert.equal(s.move(110, 100, L), null); // slack: the brush does not move
  assert.equal(s.move(100, 123.9, L), null);
  // A pointer path that wanders: after every pull the brush is L behind the pointer, on the
  // line from where it was, and it only ever moves toward the pointer.
  let at = [100, 100];
  for (let i = 1; i <= 200; i++) {
    const p = [100 + 3 * i + 10 * Math.sin(i / 7), 100 + 20 * Math.cos(i / 11) + i];
    const d = Math.hypot(p[0] - at[0], p[1] - at[1]);
    const got = s.move(p[0], p[1], L);
    if (d <= L) {
      assert.equal(got, null, `move ${i}: within the string, yet the brush moved`);
      continue;
    }
    assert.ok(got, `move ${i}: the string is taut, yet the brush stayed`);
    assert.ok(close(Math.hypot(p[0] - got[0], p[1] - got[1]), L), `move ${i}: not ${L} px behind the pointer`);
    const k = (d - L) / d; // on the segment from the old point to the pointer
    assert.ok(close(got[0], at[0] + k * (p[0] - at[0])) && close(got[1], at[1] + k * (p[1] - at[1])), `move ${i}: off the string's line`);
    at = got.slice();
  }
});

test('a string of length 0 (stabiliser off) follows the pointer exactly', () => {
  const s = new Stabiliser();
  s.start(5, 5);
  assert.deepEqual(s.move(7, 9, 0), [7, 9]);
  assert.deepEqual(s.move(8, 9, 0), [8, 9]);
});
