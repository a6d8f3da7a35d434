// main.js — the browser viewer: http://HOST:7452/?session=NAME[&token=T][&readonly=1]
//
// Wires the connection (net.js), the replica it fills (replica.js), the GPU passes (render.js)
// and the camera (camera.js) to the page: a frame is computed and drawn only when something
// changed (a frame, the camera, the canvas size), so an idle tab costs nothing. Input, mouse and
// touch alike through pointer events:
//   view mode   drag orbits (one finger), wheel or two fingers zoom
//   drag mode   drag a vertex: an ARAP gesture on the server (EDIT GESTURE_BEGIN/DRAG/END)
//   brush mode  stroke the surface with the brush, radius, strength, falloff, mirror, front faces
//               only and auto-smoothing chosen (the path goes to the server in pieces)
// Sliders set weights (EDIT WEIGHTS); their range and mute go through targets.configure; undo and
// redo are history.undo / history.redo over JSON-RPC, as the page's author.
//
// window.deformView is the page's API for tests and for scripts that embed it: connected,
// session, version, vertexCount, readOnly, positions() (as the GPU computed them), normals(),
// project(vertex), pickAt(x, y), lastGesture, firstFrameMs, frameStats().
//
// DOES NOT decode frames (protocol.js) or write GL (render.js).

import { Camera, inside, pick } from './camera.js';
import { Net } from './net.js';
import { Presence, applyCamera, drawPresence, showPeople, stateOf } from './presence.js';
import * as P from './protocol.js';
import { GpuPick } from './gpupick.js';
import { Panels } from './panels.js';
import { compile, Renderer } from './render.js';
import { FALLOFF_HALF, STRENGTH_PX, Stabiliser, ValueDrag, drawCircles, keySheetHtml, pressureScale } from './tools.js';

const params = new URLSearchParams(location.search);
const session = params.get('session') || 'demo';
const $ = (id) => document.getElementById(id);
const canvas = $('view');
// The page's author: ?author= if given, else the one this browser made before (localStorage), else
// a new random one kept there, so a reload keeps its undo (undo is per author).
const author = params.get('author') || storedAuthor();

function storedAuthor() {
  const key = 'deformd.author';
  let name = null;
  try { name = window.localStorage.getItem(key); } catch (e) { /* storage off: a new name per load */ }
  if (name) return name;
  name = `web-${Math.random().toString(36).slice(2, 8)}`;
  try { window.localStorage.setItem(key, name); } catch (e) { /* as above */ }
  return name;
}

const camera = new Camera();
let dirty = true;    // draw again
let recompute = true; // morph and normals again
let mode = 'view';
let framed = false;
// Frame times (GPU work included: renderer.sync() after each draw): frameMs for frames that
// recomputed the shape (upload + morph + normals + draw), drawMs for every drawn frame.
const stats = { frames: 0, frameMs: [], drawMs: [], first: null };
const state = { lastGesture: null, gestureSeq: 0, dragging: null, marker: null };

// Who else is here (presence.js): its changes redraw the overlay.
const presence = new Presence(() => {
  overlayDirty = true;
  schedule();
});
let overlayDirty = true;

const net = new Net({
  base: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}`,
  session,
  token: params.get('token') || '',
  readOnly: params.get('readonly') === '1',
  author,
  hello: {
    codec: params.get('lossless') === '1' ? P.CODEC_LOSSLESS : P.CODEC_QUANTISED,
    tolerance: parseFloat(params.get('tolerance')) || 0,
    maxRate: parseFloat(params.get('max_rate')) || 0,
    // WELCOME then says the session's up axis (the camera orbits around it); MASK frames bring
    // this author's own mask, drawn darker; PRESENCE frames say who else is here and where they work;
    // TEXTURE frames bring the materials and images, once per join; ENTROPY makes the join smaller.
    caps: [P.CAP.UP, P.CAP.MASK, P.CAP.PRESENCE, P.CAP.TEXTURE, P.CAP.TEXCLIP, P.CAP.ENTROPY],
  },
  onWelcome: (w) => presence.reset(w.clientId),
  onPresence: (payload) => presence.apply(payload),
  onUpdate: () => {
    recompute = true;
    schedule();
  },
  onStatus: () => showStatus(),
});

// The WebSocket opens first: the snapshot travels while the shaders compile.
let renderer;
try {
  renderer = new Renderer(canvas);
} catch (e) {
  $('status').textContent = `cannot draw: ${e.message}`;
  throw e;
}
if (params.get('unlit') === '1') renderer.shade = -1; // the albedo without the lights (pixel checks)
const picker = new GpuPick(renderer, compile);
$('shade').addEventListener('change', (e) => {
  renderer.shade = parseInt(e.target.value, 10);
  dirty = true;
  schedule();
});

// Sessions, upload, download, a target from the sculpt, the history (panels.js).
let notice = null; // the panels' last word, in the status line
const panels = new Panels({
  net, session, $, params,
  say: (text) => {
    notice = text;
    showStatus();
  },
});
panels.listSessions();

// ---- frame loop ---------------------------------------------------------------------------------

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(frame);
}

function frame() {
  scheduled = false;
  const r = net.replica;
  if (followLeader()) dirty = true;
  const w = canvas.clientWidth * devicePixelRatio;
  const h = canvas.clientHeight * devicePixelRatio;
  if (canvas.width !== Math.round(w) || canvas.height !== Math.round(h)) {
    canvas.width = Math.round(w);
    canvas.height = Math.round(h);
    dirty = true;
  }
  let t0 = null;
  if (r.ready && recompute) {
    t0 = performance.now();
    const c = r.takeChanges();
    if (c.snapshot) {
      renderer.load(r);
      picker.load(r.snapshot.triangles);
      if (net.marks) net.marks.uploaded = performance.now();
      if (!framed) {
        camera.up = net.grant && net.grant.up === 'z' ? 'z' : 'y';
        frameCamera(r.snapshot.positions);
        fitClip.pending = true;
      }
      buildSliders();
    } else {
      if (c.targets) {
        renderer.loadTargets(r);
        buildSliders();
      } else if (c.meta) buildSliders();
      renderer.uploadSculpt(r, c.first, c.end);
    }
    if (c.textures) {
      renderer.uploadTextures(r);
      stats.texturesDrawn = r.textureSerial; // drawn below, in this frame
    }
    if (c.texclips) { // texture clips (capability "texclip"): each TEXWEIGHTS's frames rebuilt
      renderer.uploadTexclips(r);
      stats.texclipsDrawn = r.texclipSerial; // drawn below, in this frame
    }
    if (c.mask) {
      renderer.uploadMask(r);
      stats.maskDrawn = r.maskSerial || 0; // drawn below, in this frame
    }
    renderer.compute(r.snapshot.weights);
    shapeSerial++;
    // The depth range follows the shape once an edit of this page's is over (a stroke would read
    // the shape back on every frame).
    if (!state.stroke && !state.dragging) fitClip.pending = true;
    recompute = false;
    dirty = true;
    updateSliders();
    stats.version = r.version;
    panels.changed(r.version);
  }
  if (fitClip.pending && r.ready) {
    if (!pickChoice.timed) choosePick();
    fitClip.pending = false;
    fitClip();
  }
  if (dirty) {
    const t1 = performance.now();
    camera.update(canvas.width, canvas.height);
    renderer.draw(camera, state.marker);
    dirty = false;
    if (r.ready) {
      renderer.sync();
      const t2 = performance.now();
      stats.drawMs.push(t2 - t1);
      if (t0 !== null) stats.frameMs.push(t2 - t0);
      stats.frames++;
      if (stats.first === null) stats.first = performance.now();
      stats.drawnVersion = r.version;
    }
    overlayDirty = true;
  }
  if (overlayDirty) drawOverlay();
  showStatus();
}

// The bounding box {lo, hi} of positions (x, y, z after one another).
function boxOf(pos) {
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < pos.length; i++) {
    lo[i % 3] = Math.min(lo[i % 3], pos[i]);
    hi[i % 3] = Math.max(hi[i % 3], pos[i]);
  }
  return { lo, hi };
}

function frameCamera(pos) {
  const { lo, hi } = boxOf(pos);
  camera.frame(lo, hi);
  framed = true;
}

new ResizeObserver(() => {
  dirty = true;
  schedule();
}).observe(canvas);
// The panels below the tool bar start where it ends (it wraps on a narrow window).
new ResizeObserver(() => {
  document.body.style.setProperty('--bar-bottom', `${$('bar').getBoundingClientRect().bottom}px`);
}).observe($('bar'));

// ---- status line --------------------------------------------------------------------------------

function human(n) {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} kB` : `${Math.round(n)} B`;
}

function showStatus() {
  const r = net.replica;
  const parts = [`session ${session}`];
  parts.push(net.connected ? `version ${r.version}` : 'connecting…');
  if (net.latencyMs !== null) parts.push(`latency ${net.latencyMs.toFixed(1)} ms`);
  parts.push(`${human(net.rate)}/s`);
  if (r.ready) parts.push(`${r.vertexCount} vertices, ${renderer.activeCount || 0} active targets, ${pickChoice.mode.toUpperCase()} pick`);
  if (stats.drawMs.length) parts.push(`frame ${stats.drawMs[stats.drawMs.length - 1].toFixed(1)} ms`);
  if (net.connected && net.readOnly) parts.push('read-only');
  if (net.error) parts.push(net.error);
  if (notice) parts.push(notice);
  $('status').textContent = parts.join(' · ');
  document.body.classList.toggle('readonly', net.connected && net.readOnly);
}

// ---- sliders ------------------------------------------------------------------------------------

const sliderEls = [];
let sliderActive = -1;
let pendingWeights = new Map();

function buildSliders() {
  const box = $('sliders');
  box.textContent = '';
  sliderEls.length = 0;
  const s = net.replica.snapshot;
  box.hidden = s.targets.length === 0; // no targets: no panel
  s.targets.forEach((t, i) => {
    const row = document.createElement('div');
    row.className = 'slider';
    const combo = t.drivers.length > 0;
    row.innerHTML = `<label title="${t.name}">${t.name}</label>` +
      `<input type="range" min="${t.min}" max="${t.max}" step="${(t.max - t.min) / 1000}" ${combo ? 'disabled' : ''}>` +
      `<span class="val"></span>` +
      `<input type="checkbox" title="mute" ${t.flags & 1 ? 'checked' : ''}>` +
      `<input type="number" class="lim" title="min" value="${t.min}" step="0.1">` +
      `<input type="number" class="lim" title="max" value="${t.max}" step="0.1">`;
    const [range, mute, lo, hi] = row.querySelectorAll('input');
    range.addEventListener('pointerdown', () => (sliderActive = i));
    range.addEventListener('pointerup', () => (sliderActive = -1));
    range.addEventListener('input', () => setWeight(i, parseFloat(range.value)));
    mute.addEventListener('change', () => configure(i, { muted: mute.checked }));
    const limits = () => configure(i, { min: parseFloat(lo.value), max: parseFloat(hi.value) });
    lo.addEventListener('change', limits);
    hi.addEventListener('change', limits);
    box.appendChild(row);
    sliderEls.push({ range, val: row.querySelector('.val'), mute });
  });
  updateSliders();
}

function updateSliders() {
  const s = net.replica.snapshot;
  if (!s) return;
  sliderEls.forEach((e, i) => {
    const w = s.weights[i];
    if (i !== sliderActive && document.activeElement !== e.range) e.range.value = w;
    e.val.textContent = w.toFixed(2);
  });
}

// One EDIT per animation frame at most while a slider moves; the newest value wins.
function setWeight(target, value) {
  if (net.readOnly) return;
  pendingWeights.set(target, value);
  if (pendingWeights.size === 1) requestAnimationFrame(flushWeights);
}

function flushWeights() {
  if (!pendingWeights.size) return;
  net.sendFrame(P.encodeEditWeights(net.nextRequest(), [...pendingWeights.entries()]));
  pendingWeights = new Map();
}

async function configure(target, opts) {
  const t = net.replica.snapshot.targets[target];
  try {
    await net.call('targets.configure', { session, target: t.name, ...opts });
  } catch (e) {
    net.error = e.message;
    showStatus();
    buildSliders();
  }
}

// ---- undo / redo ----------------------------------------------------------------------------------

async function history(redo) {
  try {
    state.lastHistory = await net.call(redo ? 'history.redo' : 'history.undo', { session });
    return state.lastHistory;
  } catch (e) {
    net.error = e.message;
    showStatus();
    return null;
  }
}
$('undo').addEventListener('click', () => history(false));
$('redo').addEventListener('click', () => history(true));
// Blender's numpad views (deform-view's keypad 1, 3, 7). Alt, or Ctrl, for the opposite side:
// browsers keep Ctrl+digit for switching tabs, so Alt is the one that always reaches the page.
const NUMPAD_VIEWS = { Numpad1: ['front', 'back'], Numpad3: ['right', 'left'], Numpad7: ['top', 'bottom'] };
addEventListener('keydown', (e) => {
  const v = NUMPAD_VIEWS[e.code];
  if (!v || e.target.tagName === 'INPUT') return;
  camera.setView(v[e.altKey || e.ctrlKey ? 1 : 0]);
  cameraMoved();
  e.preventDefault();
});
addEventListener('keydown', (e) => {
  if (e.target.tagName === 'INPUT') return;
  // Blender's mask keys, as deform-view's: M the mask brush, Alt+M clear, Ctrl+I invert.
  if (e.code === 'KeyM' && !e.ctrlKey && !e.metaKey) {
    if (e.altKey) maskOp(P.MASK_OP.CLEAR);
    else setMode('mask');
    e.preventDefault();
    return;
  }
  if (!(e.ctrlKey || e.metaKey)) return;
  if (e.key === 'z' || e.key === 'y') {
    history(e.key === 'y' || e.shiftKey);
    e.preventDefault();
  } else if (e.key === 'i') {
    maskOp(P.MASK_OP.INVERT);
    e.preventDefault();
  }
});

// ---- modes and input ----------------------------------------------------------------------------

for (const m of ['view', 'drag', 'brush', 'mask']) {
  $(`mode-${m}`).addEventListener('click', () => setMode(m));
}
function setMode(m) {
  mode = m;
  for (const x of ['view', 'drag', 'brush', 'mask']) $(`mode-${x}`).classList.toggle('on', x === m);
  $('brush-panel').hidden = m !== 'brush' && m !== 'mask';
  $('gesture-panel').hidden = m !== 'drag';
  overlayDirty = true;
  schedule();
}

const pointers = new Map();
let pinch = null;
// What the pointer does while a button is held and no tool has it: orbit (about a pivot) or pan.
let nav = null;
const stabiliser = new Stabiliser();
const valueDrag = new ValueDrag();

function pixel(e) {
  const r = canvas.getBoundingClientRect();
  return [(e.clientX - r.left) * devicePixelRatio, (e.clientY - r.top) * devicePixelRatio];
}

// The surface under a canvas pixel, the camera as drawn: the GPU's pick (gpupick.js), or the
// ray cast on the CPU over the positions read back once per change of the shape, whichever was
// faster when the snapshot arrived (timed once each: on a GPU the GPU's wins by far; on a CPU
// implementation of WebGL such as SwiftShader the ray cast does, see docs/performance.md).
// ?pick=gpu or ?pick=cpu decides instead.
const pickChoice = { mode: params.get('pick') === 'cpu' ? 'cpu' : 'gpu', fixed: ['gpu', 'cpu'].includes(params.get('pick')), timed: null };
function pickAt(px, py) {
  const r = net.replica;
  if (!r.ready) return null;
  camera.update(canvas.width, canvas.height);
  if (pickChoice.mode === 'gpu') return picker.at(camera, px, py);
  const ray = camera.ray(px, py);
  const hit = pick(shapePositions(), r.snapshot.triangles, ray);
  if (hit) hit.normal = normalAt(hit, ray.dir);
  return hit;
}

// Times one pick of each kind at the canvas's centre (after a first of each, which compiles).
function choosePick() {
  if (pickChoice.fixed || !net.replica.ready) return;
  const px = canvas.width / 2, py = canvas.height / 2;
  const time = (mode) => {
    pickChoice.mode = mode;
    shapeCache.serial = -1; // the CPU's includes reading the positions back
    const t0 = performance.now();
    pickAt(px, py);
    return performance.now() - t0;
  };
  time('gpu');
  time('cpu');
  const gpu = time('gpu'), cpu = time('cpu');
  pickChoice.timed = { gpu, cpu };
  pickChoice.mode = gpu <= cpu ? 'gpu' : 'cpu';
}

// The same by a ray cast over every triangle on the CPU (camera.js pick): the tests' oracle.
function cpuPickAt(px, py) {
  const r = net.replica;
  if (!r.ready) return null;
  camera.update(canvas.width, canvas.height);
  return pick(renderer.positions(), r.snapshot.triangles, camera.ray(px, py));
}

function diag() {
  return 2 * camera.radius;
}

// World displacement of a screen move at the depth of point p.
function screenToWorld(p, dx, dy) {
  camera.update(canvas.width, canvas.height);
  const [sx, sy, sz] = camera.project(p);
  const q = camera.unproject(sx + dx, sy + dy, sz);
  return [q[0] - p[0], q[1] - p[1], q[2] - p[2]];
}

// ---- navigation: orbit about the point under the cursor, pan, zoom toward the cursor ------------

// The shape's positions as last computed (read back once per change of the shape): the depth
// range and the zoom's clamp need them.
let shapeSerial = 0;
const shapeCache = { serial: -1, positions: null };
// The shape's bounding box, {lo, hi}, computed once per shape.
function shapeBox() {
  const pos = shapePositions();
  if (shapeCache.boxSerial !== shapeSerial) {
    shapeCache.box = boxOf(pos);
    shapeCache.boxSerial = shapeSerial;
  }
  return shapeCache.box;
}

function shapePositions() {
  if (shapeCache.serial !== shapeSerial) {
    shapeCache.positions = renderer.positions();
    shapeCache.serial = shapeSerial;
  }
  return shapeCache.positions;
}

// The view depth of the nearest vertex inside the frustum's sides and of the farthest vertex, for
// the camera as it is (x and y of a projection do not depend on the depth range).
function depthSpan(pos) {
  camera.update(canvas.width, canvas.height);
  const m = camera.mvp, v = camera.view;
  let near = Infinity, far = 0;
  for (let i = 0; i < pos.length; i += 3) {
    const x = pos[i], y = pos[i + 1], z = pos[i + 2];
    const d = -(v[2] * x + v[6] * y + v[10] * z + v[14]);
    if (d > far) far = d;
    if (!(d > 0) || d >= near) continue;
    const w = m[3] * x + m[7] * y + m[11] * z + m[15];
    const cx = (m[0] * x + m[4] * y + m[8] * z + m[12]) / w;
    const cy = (m[1] * x + m[5] * y + m[9] * z + m[13]) / w;
    if (cx >= -1 && cx <= 1 && cy >= -1 && cy <= 1) near = d;
  }
  return { near, far };
}

// Fits the depth range to the shape in view: the near plane at 90 % of the nearest vertex's
// depth (so it never cuts the surface), the far plane past the farthest.
function fitClip() {
  if (!net.replica.ready) return;
  camera.clip = null;
  const s = depthSpan(shapePositions());
  const far = Math.max(s.far * 1.05, camera.radius * 0.01);
  const near = Number.isFinite(s.near) ? Math.max(0.9 * s.near, far * 1e-5) : Math.max(far / 1000, 1e-6);
  camera.clip = { near, far };
}

// The wheel: zoom toward the point under the cursor (or the ray's point at the centre's depth
// where it misses), never so far that the nearest vertex in view would come closer than 1 % of
// the shape's radius: the near plane stays outside the mesh.
function zoomAt(px, py, k) {
  const hit = pickAt(px, py);
  let p = hit && hit.point;
  if (!p) {
    const r = camera.ray(px, py), e = camera.eye();
    const d = Math.hypot(...[0, 1, 2].map((i) => camera.center[i] - e[i]));
    p = r.origin.map((o, i) => o + d * r.dir[i]);
  }
  const before = { center: [...camera.center], distance: camera.distance };
  camera.zoomAbout(p, k);
  if (k < 1 && net.replica.ready) {
    const gap = 0.01 * camera.radius;
    const s = depthSpan(shapePositions());
    if (s.near < gap || (hit && Math.hypot(...[0, 1, 2].map((i) => camera.eye()[i] - p[i])) < gap)) {
      camera.center = before.center; // a step that would pass the clamp is not taken
      camera.distance = before.distance;
      state.zoomClamped = (state.zoomClamped || 0) + 1;
    }
  }
  cameraMoved();
}

function cameraMoved() {
  presence.follow(0); // moving the camera takes it back from a followed participant
  fitClip();
  dirty = true;
  overlayDirty = true;
  schedule();
}

function startNav(x, y, pan) {
  const hit = pan ? null : pickAt(x, y);
  nav = { pan, pivot: hit ? hit.point : null, depthAt: hit ? hit.point : [...camera.center] };
  if (pan) {
    const h = pickAt(x, y);
    if (h) nav.depthAt = h.point;
  }
}

// Orbit and pan keep the camera out of the mesh as the wheel does: a step that would bring the
// nearest vertex in view closer than 1 % of the shape's radius, or put the eye inside the
// surface, is not taken (deformView.navClamped counts them).
function moveNav(dx, dy) {
  const before = { center: [...camera.center], yaw: camera.yaw, pitch: camera.pitch };
  if (nav.pan) {
    const w = screenToWorld(nav.depthAt, dx, dy);
    camera.center = camera.center.map((c, i) => c - w[i]);
  } else {
    camera.orbit(-dx * 0.008, dy * 0.008, nav.pivot);
  }
  if (net.replica.ready) {
    const pos = shapePositions(), e = camera.eye(), box = shapeBox();
    // The ray cast (every triangle) only where the eye could be inside: within the bounding box.
    const inBox = [0, 1, 2].every((k) => e[k] >= box.lo[k] && e[k] <= box.hi[k]);
    if (depthSpan(pos).near < 0.01 * camera.radius || (inBox && inside(pos, net.replica.snapshot.triangles, e))) {
      Object.assign(camera, before);
      state.navClamped = (state.navClamped || 0) + 1;
    }
  }
  cameraMoved();
}

// Home: everything; numpad-period: the region under the cursor (the gesture's region in drag
// mode, twice the brush radius otherwise), else the last picked point.
function frameAll() {
  frameCamera(shapePositions());
  cameraMoved();
}

function framePicked() {
  const hit = hoverPx ? pickAt(hoverPx[0], hoverPx[1]) : null;
  const p = hit ? hit.point : state.lastPick;
  if (!p) return;
  state.lastPick = p;
  const r = mode === 'drag' ? gestureSettings().roiRadius : 2 * brushRadius();
  camera.frame(p.map((c) => c - r), p.map((c) => c + r), true);
  cameraMoved();
}

canvas.addEventListener('contextmenu', (e) => e.preventDefault());
canvas.addEventListener('pointerdown', (e) => {
  canvas.setPointerCapture(e.pointerId);
  const [x, y] = pixel(e);
  hoverPx = [x, y];
  if (valueDrag.kind) {
    finishValueDrag(e.button !== 2);
    return;
  }
  pointers.set(e.pointerId, { x, y, x0: x, y0: y });
  if (pointers.size === 2) {
    const [a, b] = [...pointers.values()];
    pinch = { d: Math.hypot(a.x - b.x, a.y - b.y), mid: [(a.x + b.x) / 2, (a.y + b.y) / 2] };
    nav = null;
    endGesture();
    endStroke();
    return;
  }
  // Blender's mapping: middle orbits about the point under the cursor, Shift+middle pans; in
  // view mode the left button does the same; the right button (and a drag off the mesh in an
  // edit mode) orbits.
  if (e.button === 1 || e.button === 2 || mode === 'view' || net.readOnly) {
    startNav(x, y, e.shiftKey && e.button !== 2);
    e.preventDefault();
    return;
  }
  const hit = pickAt(x, y);
  if (!hit) {
    startNav(x, y, e.shiftKey);
    return;
  }
  state.lastPick = hit.point;
  if (mode === 'drag') beginGesture(hit, x, y);
  else if (mode === 'mask') beginMaskStroke(hit, e.ctrlKey || e.metaKey);
  else beginStroke(hit, x, y, e);
});

canvas.addEventListener('pointermove', (e) => {
  const [x, y] = pixel(e);
  hoverPx = [x, y];
  if (valueDrag.kind) {
    moveValueDrag(x, y);
    return;
  }
  const p = pointers.get(e.pointerId);
  if (!p) {
    overlayDirty = true; // the brush circle follows the pointer
    schedule();
    return;
  }
  const dx = x - p.x;
  const dy = y - p.y;
  p.x = x;
  p.y = y;
  if (pinch && pointers.size === 2) {
    const [a, b] = [...pointers.values()];
    const d = Math.max(Math.hypot(a.x - b.x, a.y - b.y), 1);
    const mid = [(a.x + b.x) / 2, (a.y + b.y) / 2];
    nav = { pan: true, depthAt: [...camera.center] };
    moveNav(mid[0] - pinch.mid[0], mid[1] - pinch.mid[1]);
    nav = null;
    zoomAt(mid[0], mid[1], pinch.d / d); // fingers apart: closer, about the point between them
    pinch.d = d;
    pinch.mid = mid;
    return;
  }
  if (state.dragging) moveGesture(x, y);
  else if (state.stroke) moveStroke(x, y, e);
  else if (state.mask) moveMaskStroke(x, y);
  else if (nav) moveNav(dx, dy);
  overlayDirty = true;
  schedule();
});

function release(e) {
  pointers.delete(e.pointerId);
  if (pointers.size < 2) pinch = null;
  nav = null;
  endGesture();
  endStroke();
}
canvas.addEventListener('pointerup', release);
canvas.addEventListener('pointercancel', release);
canvas.addEventListener('wheel', (e) => {
  const [x, y] = pixel(e);
  zoomAt(x, y, Math.exp(Math.max(-0.5, Math.min(0.5, e.deltaY * 0.001))));
  e.preventDefault();
}, { passive: false });

// ---- F / Shift+F: radius and strength on the pointer ---------------------------------------------

// The brush radius in world units and in canvas pixels at the surface under the cursor.
function brushRadius() {
  return parseFloat($('radius').value) * diag();
}

function worldPerPixel(p) {
  const w = screenToWorld(p, 1, 0);
  return Math.hypot(...w) || 1;
}

function startValueDrag(kind) {
  if (!hoverPx) return;
  const hit = pickAt(hoverPx[0], hoverPx[1]);
  const p = hit ? hit.point : camera.center;
  state.valueAt = { point: p, hit };
  const px = kind === 'radius' ? brushRadius() / worldPerPixel(p) : parseFloat($('strength').value) * STRENGTH_PX * devicePixelRatio;
  valueDrag.start(kind, hoverPx[0], hoverPx[1], px, $(kind).value);
}

function moveValueDrag(x, y) {
  const px = valueDrag.pixels(x, y);
  const el = $(valueDrag.kind);
  if (valueDrag.kind === 'radius') el.value = (px * worldPerPixel(state.valueAt.point)) / diag();
  else el.value = px / (STRENGTH_PX * devicePixelRatio);
  showValues();
  overlayDirty = true;
  schedule();
}

function finishValueDrag(keep) {
  const el = $(valueDrag.kind);
  if (!keep) el.value = valueDrag.old;
  valueDrag.end();
  state.valueAt = null;
  showValues();
  overlayDirty = true;
  schedule();
}

// Every slider of the tool panels shows its value beside it.
function showValues() {
  for (const el of document.querySelectorAll('input[type=range][data-show]')) {
    const out = $(el.dataset.show);
    if (out) out.textContent = parseFloat(el.value).toFixed(el.step && parseFloat(el.step) < 0.01 ? 3 : 2);
  }
}
for (const el of document.querySelectorAll('input[type=range][data-show]')) el.addEventListener('input', () => {
  showValues();
  overlayDirty = true;
  schedule();
});
showValues();

// ---- keys -----------------------------------------------------------------------------------------

function toggleKeySheet(show) {
  const el = $('keys');
  el.hidden = show === undefined ? !el.hidden : !show;
}
$('keys').innerHTML = keySheetHtml();
$('keys-button').addEventListener('click', () => toggleKeySheet());

addEventListener('keydown', (e) => {
  if (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') return;
  if (valueDrag.kind) {
    if (e.key === 'Enter' || e.key === 'Escape') finishValueDrag(e.key === 'Enter');
    e.preventDefault();
    return;
  }
  if (e.key === 'Escape') toggleKeySheet(false);
  else if (e.code === 'KeyH' && !e.ctrlKey && !e.metaKey && !e.altKey || e.key === '?') toggleKeySheet();
  else if (e.code === 'Home') frameAll();
  else if (e.code === 'NumpadDecimal') framePicked();
  else if (e.code === 'KeyF' && !e.ctrlKey && !e.metaKey && !e.altKey) startValueDrag(e.shiftKey ? 'strength' : 'radius');
  else if (e.code === 'KeyC' && !e.ctrlKey && !e.metaKey && !e.altKey) {
    const s = $('shade'); // lit, clay, red wax, skin, as deform-view's C
    s.value = String((parseInt(s.value, 10) + 1) % s.options.length);
    s.dispatchEvent(new Event('change'));
  } else if (['KeyX', 'KeyY', 'KeyZ'].includes(e.code) && !e.ctrlKey && !e.metaKey && !e.altKey) {
    const box = $(`sym-${e.code[3].toLowerCase()}`); // one plane at a time, as deform-view's X, Y, Z
    box.checked = !box.checked;
    box.dispatchEvent(new Event('change'));
  } else return;
  e.preventDefault();
});

// ---- vertex drags: ARAP gestures --------------------------------------------------------------------

// The gesture panel: mode (EDIT GESTURE_BEGIN's 0 Laplacian, 1 ARAP, 2 biharmonic), the handle
// (every vertex within that geodesic distance of the picked one) and the region of interest,
// both as fractions of the shape's diagonal, drawn as circles about the cursor.
function gestureSettings() {
  return {
    mode: parseInt($('gesture-mode').value, 10),
    handleRadius: Math.fround(parseFloat($('handle').value) * diag()),
    roiRadius: Math.fround(parseFloat($('region').value) * diag()),
  };
}

function beginGesture(hit, x, y) {
  const id = ((net.clientId & 0xfffff) << 12 | (++state.gestureSeq & 0xfff)) >>> 0 || 1;
  const s = gestureSettings();
  const g = { gesture: id, mode: s.mode, iterations: 2, pick: hit.vertex, handleRadius: s.handleRadius, roiRadius: s.roiRadius };
  net.sendFrame(P.encodeGestureBegin(net.nextRequest(), g));
  const positions = shapePositions();
  const at = Array.from(positions.subarray(3 * hit.vertex, 3 * hit.vertex + 3));
  state.dragging = { g, at, x0: x, y0: y, translate: [0, 0, 0], sent: null, queued: false };
  state.lastGesture = { ...g, translate: [0, 0, 0], drags: 0, ended: false };
  state.marker = { at, size: 12 };
  dirty = true;
  schedule();
}

function moveGesture(x, y) {
  const d = state.dragging;
  d.translate = screenToWorld(d.at, x - d.x0, y - d.y0).map(Math.fround);
  if (d.queued) return;
  d.queued = true;
  requestAnimationFrame(() => {
    d.queued = false;
    if (state.dragging !== d) return;
    sendDrag(d);
    state.marker = { at: d.at.map((v, i) => v + d.translate[i]), size: 12 };
    dirty = true;
    schedule();
  });
}

// A drag the server has not been sent yet: ARAP warm-starts each solve from the one before, so
// sending the same translate twice would move the result.
function sendDrag(d) {
  if (d.sent && d.sent.every((v, i) => v === d.translate[i])) return;
  net.sendFrame(P.encodeGestureDrag(net.nextRequest(), { gesture: d.g.gesture, translate: d.translate }));
  d.sent = d.translate.slice();
  state.lastGesture.translate = d.sent.slice();
  state.lastGesture.drags++;
}

function endGesture() {
  const d = state.dragging;
  if (!d) return;
  state.dragging = null;
  sendDrag(d);
  net.sendFrame(P.encodeGestureEnd(net.nextRequest(), d.g.gesture));
  state.lastGesture.ended = true;
  state.marker = null;
  dirty = true;
  schedule();
}

// ---- brush strokes ------------------------------------------------------------------------------

// A stroke sends the points of its path as the pointer moves: the first as a new stroke, the
// others continuing it (BRUSH_CONTINUE), and the server places the dabs along the path, so the
// result does not depend on how many pointer events the browser delivered (docs/protocol.md,
// EDIT BRUSH), and the whole stroke is one undo step. Grab's points lie on the plane through the
// stroke's start facing the camera, as deform-view's do, since the surface under the pointer
// moves away: the server drags along that path.
//
// Modifiers as Blender's, read when the stroke starts: Ctrl inverts (a negative strength: draw,
// inflate, crease and layer dig instead of raising), Shift smooths (the smooth brush). A pen's
// pressure scales each point's radius and/or strength (the pressure menu); the stabiliser (lazy
// mouse) holds the brush back by its string's length in CSS pixels. Symmetry goes with the
// stroke: the server mirrors it across x = 0, y = 0 or z = 0 (the BRUSH frame's mirror plane,
// one at a time: the X, Y and Z boxes exclude each other), in the same undo step.
const INVERTIBLE = new Set([P.BRUSH.DRAW, P.BRUSH.INFLATE, P.BRUSH.CREASE, P.BRUSH.LAYER]);
function brushSettings(e = null) {
  let brush = parseInt($('brush').value, 10);
  if (e && e.shiftKey) brush = P.BRUSH.SMOOTH;
  const invert = !!(e && (e.ctrlKey || e.metaKey)) && INVERTIBLE.has(brush);
  const front = $('front').checked && brush !== P.BRUSH.GRAB;
  return {
    brush,
    invert,
    falloff: parseInt($('falloff').value, 10),
    flags: (front ? P.BRUSH_FRONT_ONLY : 0) | ($('autosmooth').checked ? 8 << P.BRUSH_AUTOSMOOTH_SHIFT : 0),
    mirror: $('sym-x').checked ? P.BRUSH_AXIS.X : $('sym-y').checked ? P.BRUSH_AXIS.Y :
      $('sym-z').checked ? P.BRUSH_AXIS.Z : P.BRUSH_AXIS.NONE,
    radius: brushRadius(),
    strength: (invert ? -1 : 1) * parseFloat($('strength').value),
  };
}

function beginStroke(hit, x, y, e) {
  const b = brushSettings(e);
  // With front faces only every point carries the direction the viewer looks in.
  const view = b.flags & P.BRUSH_FRONT_ONLY ? camera.ray(x, y).dir : [0, 0, 0];
  const eye = camera.eye();
  const n = [0, 1, 2].map((i) => eye[i] - hit.point[i]);
  const l = Math.hypot(...n) || 1;
  state.stroke = { start: hit.point, normal: n.map((v) => v / l), b, view, sent: false, path: [] };
  stabiliser.start(x, y);
  sendSample(hit.point, view, e);
}

// Where the ray through a pixel meets the grab plane (null when it runs along it).
function onGrabPlane(st, x, y) {
  const r = camera.ray(x, y);
  const den = r.dir[0] * st.normal[0] + r.dir[1] * st.normal[1] + r.dir[2] * st.normal[2];
  if (Math.abs(den) < 1e-9) return null;
  const t = [0, 1, 2].reduce((acc, i) => acc + (st.start[i] - r.origin[i]) * st.normal[i], 0) / den;
  return r.origin.map((o, i) => o + t * r.dir[i]);
}

function moveStroke(x, y, e) {
  const st = state.stroke;
  const at = stabiliser.move(x, y, parseFloat($('lazy').value) * devicePixelRatio);
  if (!at) return;
  [x, y] = at;
  camera.update(canvas.width, canvas.height);
  const point = st.b.brush === P.BRUSH.GRAB ? onGrabPlane(st, x, y) : pickAt(x, y)?.point;
  if (!point) return;
  sendSample(point, st.view, e);
}

function sendSample(center, direction, e) {
  const st = state.stroke;
  const b = st.b;
  const flags = b.flags | (st.sent ? P.BRUSH_CONTINUE : 0);
  const ps = pressureScale($('pressure').value, e);
  const sample = {
    center: center.map(Math.fround), direction: direction.map(Math.fround),
    radius: Math.fround(Math.max(b.radius * ps.radius, 1e-6 * diag())), strength: Math.fround(b.strength * ps.strength),
  };
  net.sendFrame(P.encodeBrush(net.nextRequest(), b.brush, b.falloff, flags, [sample], b.mirror));
  if (st.path.length < 65536) st.path.push(sample);
  state.lastStroke = { brush: b.brush, invert: b.invert, samples: st.path.length, last: sample };
  st.sent = true;
}

// One symmetry plane at a time, as the server mirrors (and deform-view's X, Y, Z keys).
for (const a of ['x', 'y', 'z'])
  $(`sym-${a}`).addEventListener('change', (e) => {
    if (!e.target.checked) return;
    for (const b of ['x', 'y', 'z']) if (b !== a) $(`sym-${b}`).checked = false;
  });

function endStroke() {
  state.stroke = null;
  endMaskStroke();
}

// ---- the author's mask --------------------------------------------------------------------------

// A mask stroke gathers its path and goes out whole when the pointer is released: one EDIT MASK,
// one step of the author's mask (one undo). Ctrl-drag erases. The server answers with a MASK
// frame (capability "mask") that the replica keeps and the renderer darkens.
function beginMaskStroke(hit, erase) {
  const radius = Math.fround(parseFloat($('radius').value) * diag());
  state.mask = { erase, radius, points: [hit.point] };
}

function moveMaskStroke(x, y) {
  const point = pickAt(x, y)?.point;
  if (point && state.mask.points.length < 65536) state.mask.points.push(point);
}

function endMaskStroke() {
  const m = state.mask;
  state.mask = null;
  if (!m) return;
  const samples = m.points.map((c) => ({ center: c.map(Math.fround), radius: m.radius, strength: 1 }));
  net.sendFrame(P.encodeEditMask(net.nextRequest(), { op: P.MASK_OP.STROKE, tool: m.erase ? P.MASK_TOOL.ERASE : P.MASK_TOOL.PAINT, samples }));
}

function maskOp(op) {
  if (net.readOnly || !net.connected) return;
  net.sendFrame(P.encodeEditMask(net.nextRequest(), { op }));
}

// ---- the page's API ---------------------------------------------------------------------------------

function median(a) {
  if (!a.length) return null;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)];
}

// ---- presence: others' cursors and cameras, following, this page's own -------------------------

const overlay = $('overlay');
const overlayCtx = overlay.getContext('2d');
let hoverPx = null; // the pointer over the canvas (canvas pixels), for this page's cursor

function followLeader() {
  const pose = presence.leader();
  if (!pose) return false;
  applyCamera(camera, pose);
  return true;
}

function drawOverlay() {
  overlayDirty = false;
  if (overlay.width !== canvas.width || overlay.height !== canvas.height) {
    overlay.width = canvas.width;
    overlay.height = canvas.height;
  }
  camera.update(canvas.width, canvas.height);
  drawPresence(overlayCtx, presence, camera);
  showPeople($('people'), $('follow'), presence);
  drawToolCircles();
}

// The brush's circles (its radius, and where its falloff is at half) or the gesture's (handle
// and region) on the surface under the cursor; during F / Shift+F, where the value is set.
function drawToolCircles() {
  if (!net.replica.ready || mode === 'view') return;
  const at = state.valueAt ? state.valueAt.hit : hoverPx && !nav && !pinch ? pickAt(hoverPx[0], hoverPx[1]) : null;
  state.circleHit = at;
  if (!at) return;
  if (mode === 'drag') {
    const g = gestureSettings();
    drawCircles(overlayCtx, camera, at, [{ r: g.handleRadius, colour: '#ffb347' }, { r: g.roiRadius, colour: '#7fb2ff', dash: true }]);
    return;
  }
  const r = brushRadius();
  const half = FALLOFF_HALF[parseInt($('falloff').value, 10)];
  const s = parseFloat($('strength').value);
  const colour = `rgba(255, 255, 255, ${0.45 + 0.55 * s})`;
  drawCircles(overlayCtx, camera, at, [{ r, colour }, ...(half && mode === 'brush' ? [{ r: r * half, colour, dash: true }] : [])]);
}

// The unit normal of the triangle a pick hit, on the side the ray came from.
function normalAt(hit, dir) {
  const p = shapePositions(), t = net.replica.snapshot.triangles;
  const [a, b, c] = [0, 1, 2].map((k) => 3 * t[3 * hit.triangle + k]);
  const e1 = [0, 1, 2].map((k) => p[b + k] - p[a + k]), e2 = [0, 1, 2].map((k) => p[c + k] - p[a + k]);
  let n = [e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]];
  if (n[0] * dir[0] + n[1] * dir[1] + n[2] * dir[2] > 0) n = n.map((v) => -v);
  const l = Math.hypot(...n) || 1;
  return n.map((v) => v / l);
}

// This page's cursor and camera, sent when they changed (Presence.due: at most 30 Hz); with
// ?private=1 only an ABOUT saying it shares neither (it is still listed by name).
const sharesNothing = params.get('private') === '1';
function sharePresence(force = false) {
  if (!net.connected || !net.grant || !(net.grant.caps || []).includes(P.CAP.PRESENCE) || !net.replica.ready) return null;
  if (sharesNothing) {
    if (presence.sent === null) net.sendFrame(P.encodePresence(null, { client: P.CLIENT.PAGE, flags: P.PRES_PRIVATE }));
    presence.sent = 'private';
    return null;
  }
  let hit = null;
  if (hoverPx) {
    const h = pickAt(hoverPx[0], hoverPx[1]);
    if (h) hit = { point: h.point, normal: h.normal };
  }
  const tool = mode === 'drag' ? P.TOOL.DEFORM : mode === 'brush' ? P.TOOL.BRUSH0 + parseInt($('brush').value, 10) : P.TOOL.NONE;
  const radius = mode === 'brush' ? Math.fround(parseFloat($('radius').value) * diag()) : 0;
  const s = stateOf(camera, hit, tool, radius);
  if (force) presence.sent = null;
  const f = presence.due(s, { client: P.CLIENT.PAGE, flags: 0 });
  if (f) net.sendFrame(f);
  return f ? s : null;
}
canvas.addEventListener('pointermove', (e) => (hoverPx = pixel(e)));
canvas.addEventListener('pointerleave', () => (hoverPx = null));
setInterval(() => sharePresence(), 1000 / 30);
setInterval(() => { overlayDirty = true; schedule(); }, 1000); // idle times and notices age
$('follow').addEventListener('change', (e) => {
  presence.follow(parseInt(e.target.value, 10));
  dirty = true;
  schedule();
});

window.deformView = {
  get connected() { return net.connected; },
  get session() { return session; },
  get version() { return net.replica.version; },
  get drawnVersion() { return stats.drawnVersion || 0; },
  get vertexCount() { return net.replica.vertexCount; },
  get readOnly() { return net.connected && net.readOnly; },
  get author() { return author; },
  get lastGesture() { return state.lastGesture; },
  get firstFrameMs() { return stats.first; },
  get grant() { return net.grant; },
  get up() { return camera.up; }, // the axis the camera keeps up: the session's (WELCOME's up option)
  // The unit direction from the point looked at to the eye (the way the view looks, reversed).
  get eyeDirection() {
    const e = camera.eye(), c = camera.center, l = Math.hypot(e[0] - c[0], e[1] - c[1], e[2] - c[2]);
    return [0, 1, 2].map((k) => (e[k] - c[k]) / l);
  },
  get bytesIn() { return net.bytesIn; },
  get marks() { return { ...net.marks, firstFrame: stats.first }; },
  positions: () => renderer.positions(),
  normals: () => renderer.normals3(),
  // Canvas pixel (CSS pixels from the canvas's top left) of a vertex as drawn now.
  project(v) {
    camera.update(canvas.width, canvas.height);
    const p = shapePositions(); // read back once per change of the shape
    const [x, y, z] = camera.project([p[3 * v], p[3 * v + 1], p[3 * v + 2]]);
    return { x: x / devicePixelRatio, y: y / devicePixelRatio, depth: z };
  },
  camera: () => ({ mvp: Array.from(camera.mvp), width: canvas.width, height: canvas.height, ratio: devicePixelRatio }),
  // The surface under CSS pixel (x, y): pickAt the GPU's, cpuPickAt the ray cast over every
  // triangle with the positions read back (the oracle); pickMs(x, y, n, cpu) times n of one or
  // the other; pickMode the one the page uses ('gpu' or 'cpu') and pickTimes what it timed.
  pickAt: (x, y) => { camera.update(canvas.width, canvas.height); return net.replica.ready ? picker.at(camera, x * devicePixelRatio, y * devicePixelRatio) : null; },
  cpuPickAt: (x, y) => cpuPickAt(x * devicePixelRatio, y * devicePixelRatio),
  get pickMode() { return pickChoice.mode; },
  get pickTimes() { return pickChoice.timed; },
  pickMs(x, y, n = 20, cpu = false) {
    const f = cpu ? cpuPickAt : (px, py) => { camera.update(canvas.width, canvas.height); return picker.at(camera, px, py); };
    f(x * devicePixelRatio, y * devicePixelRatio);
    const t = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      f(x * devicePixelRatio, y * devicePixelRatio);
      t.push(performance.now() - t0);
    }
    return median(t);
  },
  // The depth range as drawn ({near, far}), the view matrix, how many wheel steps the clamp
  // refused; the brush's last sample; the circles' hit.
  get clip() { return camera.clip && { ...camera.clip }; },
  get view() { return camera.view ? Array.from(camera.view) : null; },
  get zoomClamped() { return state.zoomClamped || 0; },
  get navClamped() { return state.navClamped || 0; }, // orbit and pan steps not taken (moveNav)
  get lastStroke() { return state.lastStroke || null; },
  get circleHit() { return state.circleHit || null; },
  get mode() { return mode; },
  panels,
  setMode,
  // The author's mask as the page holds it (null before the first MASK frame), how many MASK
  // frames it applied, and how many of them the canvas shows (equal once drawn); maskHeld: the
  // vertices above 0.
  get mask() { return net.replica.mask || null; },
  get maskFrames() { return net.replica.maskSerial || 0; },
  // TEXTURE frames applied this join, how many of them the canvas shows, and whether the join's
  // materials and images are all here.
  get textureFrames() { return net.replica.textureSerial || 0; },
  get texturesDrawn() { return stats.texturesDrawn || 0; },
  get texturesReady() { return !!net.replica.texturesReady; },
  // TEXCLIP and TEXWEIGHTS frames applied this join, how many the canvas shows, the clips shown now.
  get texclipFrames() { return net.replica.texclipSerial || 0; },
  get texclipsDrawn() { return stats.texclipsDrawn || 0; },
  get texclipsShown() { return renderer && renderer.clipShown ? renderer.clipShown.length : 0; },
  get maskDrawn() { return stats.maskDrawn || 0; },
  get maskHeld() { return net.replica.mask ? net.replica.mask.reduce((n, m) => n + (m > 0), 0) : 0; },
  maskInvert: () => maskOp(P.MASK_OP.INVERT),
  maskClear: () => maskOp(P.MASK_OP.CLEAR),
  undo: () => history(false),
  redo: () => history(true),
  call: (method, p) => net.call(method, p),
  // A PING on the stream connection (its sequence number); lastPong is the newest answered: once
  // it reaches the number, the server has read every EDIT the page sent before.
  ping: () => net.ping(),
  get lastPong() { return net.lastPong || 0; },
  // Presence: everyone this page knows of ({id, author, flags, rgb, state}), its own id, whom it
  // follows; follow(id) (0: nobody); the camera as {eye, target, fov}; presenceMove(x, y) puts
  // this page's cursor over CSS pixel (x, y) and sends it now (the state sent, or null).
  get presence() { return { self: presence.self, following: presence.following, notices: presence.notices.map((n) => n.text), people: presence.list() }; },
  follow(id) {
    presence.follow(id);
    dirty = true;
    schedule();
  },
  cameraPose: () => ({ eye: camera.eye(), target: [...camera.center], fov: camera.fov }),
  presenceMove(x, y) {
    hoverPx = [x * devicePixelRatio, y * devicePixelRatio];
    return sharePresence(true);
  },
  // The overlay's RGBA at CSS pixel (x, y): where others' cursors are drawn.
  overlayPixel(x, y) {
    return Array.from(overlayCtx.getImageData(Math.round(x * devicePixelRatio), Math.round(y * devicePixelRatio), 1, 1).data);
  },
  // The answer to the page's last undo or redo (null before one, or after one that failed).
  get lastHistory() { return state.lastHistory || null; },
  clearHistory() { state.lastHistory = null; },
  frameStats() {
    return { frames: stats.frames, frameMs: median(stats.frameMs), drawMs: median(stats.drawMs), samples: stats.frameMs.length };
  },
  resetStats() {
    stats.frameMs = [];
    stats.drawMs = [];
  },
  // Draws again now and returns the time of the morph + normal passes and the draw (ms): the
  // benchmark's frame.
  redraw() {
    const t0 = performance.now();
    renderer.compute(net.replica.snapshot.weights);
    camera.update(canvas.width, canvas.height);
    renderer.draw(camera, state.marker);
    renderer.sync();
    return performance.now() - t0;
  },
};
setMode('view');
schedule();
