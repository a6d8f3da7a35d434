// tools.js — the sculptor's helpers around the brush, as Blender's sculpt mode has them: the
// circles drawn on the surface under the cursor (the brush's radius and where its falloff has
// fallen to half; a gesture's handle and region), pen pressure mapped to radius and strength,
// the lazy-mouse stabiliser, F / Shift+F radius and strength on the pointer, and the key sheet.
// Pure functions and small state objects: main.js owns the page and the connection.
//
// DOES NOT send anything (main.js) or draw the mesh (render.js).

// Where a falloff (docs/json-api.md brush.stroke; server/solve/dfm_brush.c dfm_falloff_eval) has
// fallen to half, as a fraction of the radius: smoothstep and linear at 0.5, the shifted Gaussian
// (exp(−4.5 t²) − e^−4.5) / (1 − e^−4.5) at 0.389; constant never (the inner circle is left out).
export const FALLOFF_HALF = [0.5, 0.5, Math.sqrt(-Math.log(0.5 * (1 + Math.exp(-4.5))) / 4.5), null];

// A circle of world radius r about p in the plane facing n, projected to canvas pixels.
export function circlePath(camera, p, n, r, steps = 48) {
  const a0 = Math.abs(n[0]) < 0.9 ? [1, 0, 0] : [0, 1, 0];
  let a = [n[1] * a0[2] - n[2] * a0[1], n[2] * a0[0] - n[0] * a0[2], n[0] * a0[1] - n[1] * a0[0]];
  const la = Math.hypot(...a) || 1;
  a = a.map((x) => x / la);
  const b = [n[1] * a[2] - n[2] * a[1], n[2] * a[0] - n[0] * a[2], n[0] * a[1] - n[1] * a[0]];
  const out = [];
  for (let i = 0; i <= steps; i++) {
    const t = (2 * Math.PI * i) / steps;
    const q = [0, 1, 2].map((k) => p[k] + r * (Math.cos(t) * a[k] + Math.sin(t) * b[k]));
    out.push(camera.project(q));
  }
  return out;
}

// Draws the circles: [{r, colour, dash}] about the hit's point in its plane.
export function drawCircles(ctx, camera, hit, circles) {
  if (!hit || !hit.normal) return;
  ctx.save();
  ctx.lineWidth = Math.max(1, devicePixelRatio * 1.5);
  for (const c of circles) {
    if (!(c.r > 0)) continue;
    const path = circlePath(camera, hit.point, hit.normal, c.r);
    ctx.strokeStyle = c.colour;
    ctx.setLineDash(c.dash ? [4 * devicePixelRatio, 4 * devicePixelRatio] : []);
    ctx.beginPath();
    path.forEach(([x, y], i) => (i ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
    ctx.stroke();
  }
  ctx.restore();
}

// Pen pressure (PointerEvent.pressure, 0..1) applied as the user picked: 'none', 'radius',
// 'strength' or 'both' scale by the pressure. A mouse or a finger has no pressure to give (a
// mouse reports 0.5 while a button is down): only a pen's counts.
export function pressureScale(mapping, e) {
  if (!e || e.pointerType !== 'pen' || mapping === 'none') return { radius: 1, strength: 1 };
  const p = Math.max(0, Math.min(1, e.pressure));
  return { radius: mapping === 'radius' || mapping === 'both' ? p : 1, strength: mapping === 'strength' || mapping === 'both' ? p : 1 };
}

// The lazy mouse: the brush hangs from the pointer on a string `length` pixels long and moves
// only when the string is taut, so a shaky hand draws a smooth line. Returns the brush's pixel,
// or null while it stays where it is. length 0: the pointer itself.
export class Stabiliser {
  constructor() {
    this.at = null;
  }

  start(x, y) {
    this.at = [x, y];
  }

  move(x, y, length) {
    if (!this.at || !(length > 0)) {
      this.at = [x, y];
      return this.at;
    }
    const dx = x - this.at[0], dy = y - this.at[1], d = Math.hypot(dx, dy);
    if (d <= length) return null;
    const k = (d - length) / d;
    this.at = [this.at[0] + k * dx, this.at[1] + k * dy];
    return this.at;
  }
}

// F (radius) and Shift+F (strength) then move, as Blender: the value follows the pointer's
// distance from an anchor (placed so that the value does not jump when it starts); a click or
// Enter keeps it, Esc or a right click puts the old one back. The radius is in canvas pixels
// here (main.js converts), the strength is the distance over `STRENGTH_PX` pixels.
export const STRENGTH_PX = 200;
export class ValueDrag {
  constructor() {
    this.kind = null;
  }

  start(kind, x, y, pixels, old) {
    this.kind = kind;
    this.old = old;
    this.anchor = [x - pixels, y];
  }

  // The value's pixels for the pointer at (x, y).
  pixels(x, y) {
    return Math.hypot(x - this.anchor[0], y - this.anchor[1]);
  }

  end() {
    const k = this.kind;
    this.kind = null;
    return k;
  }
}

// The key sheet (H or ?): every binding of the page, the same table as viewer/README.md's.
export const KEYS = [
  ['middle drag', 'orbit about the point under the cursor'],
  ['Shift + middle drag', 'pan'],
  ['wheel', 'zoom toward the cursor (never into the mesh)'],
  ['left drag (View mode)', 'orbit; Shift + left drag pans'],
  ['right drag, or a drag off the mesh', 'orbit (edit modes)'],
  ['two fingers', 'pan and pinch zoom'],
  ['Home', 'frame all'],
  ['numpad .', 'frame the picked region (under the cursor)'],
  ['numpad 1 / 3 / 7', 'front / right / top view (with Ctrl or Alt: the opposite)'],
  ['Ctrl (held, brush)', 'invert: dig for draw, inflate, crease, layer'],
  ['Shift (held, brush)', 'smooth'],
  ['F, then move', 'brush radius (click or Enter keeps, Esc or right click cancels)'],
  ['Shift + F, then move', 'brush strength (as F)'],
  ['pen pressure', 'radius and/or strength (the pressure menu)'],
  ['X, Y, Z', 'symmetry across x = 0, y = 0 or z = 0 (one plane; again: off)'],
  ['C', 'shading: lit, clay, red wax, skin (cycles)'],
  ['M', 'mask brush; Alt + M clears, Ctrl + I inverts, Ctrl + drag erases'],
  ['Ctrl + Z / Ctrl + Y', 'undo / redo'],
  ['H or ?', 'this sheet'],
];

export function keySheetHtml() {
  return `<h3>Keys</h3><table>${KEYS.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join('')}</table>` +
    '<p>Esc or H closes.</p>';
}
