// camera.js — the orbit camera: yaw, pitch and distance around a centre, its matrices
// (column-major, as WebGL takes them), the projection of a point to canvas pixels and the ray
// through a pixel (picking). `up` is the session's up axis ('y' or 'z', WELCOME's up option):
// the camera orbits around it and keeps it pointing up on screen; yaw 0, pitch 0 looks at the
// front (from +Z when Y is up, from -Y when Z is up, as Blender's front view does). Everything
// stays in the mesh's own coordinates: only the view matrix changes.
//
// DOES NOT read input (main.js) or draw (render.js).

export function mul(a, b) {
  const o = new Float32Array(16);
  for (let c = 0; c < 4; c++)
    for (let r = 0; r < 4; r++) {
      let s = 0;
      for (let k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
      o[c * 4 + r] = s;
    }
  return o;
}

function invert(m) {
  // 4×4 inverse by cofactors (column-major in and out).
  const a = Array.from(m);
  const inv = new Float64Array(16);
  inv[0] = a[5] * a[10] * a[15] - a[5] * a[11] * a[14] - a[9] * a[6] * a[15] + a[9] * a[7] * a[14] + a[13] * a[6] * a[11] - a[13] * a[7] * a[10];
  inv[4] = -a[4] * a[10] * a[15] + a[4] * a[11] * a[14] + a[8] * a[6] * a[15] - a[8] * a[7] * a[14] - a[12] * a[6] * a[11] + a[12] * a[7] * a[10];
  inv[8] = a[4] * a[9] * a[15] - a[4] * a[11] * a[13] - a[8] * a[5] * a[15] + a[8] * a[7] * a[13] + a[12] * a[5] * a[11] - a[12] * a[7] * a[9];
  inv[12] = -a[4] * a[9] * a[14] + a[4] * a[10] * a[13] + a[8] * a[5] * a[14] - a[8] * a[6] * a[13] - a[12] * a[5] * a[10] + a[12] * a[6] * a[9];
  inv[1] = -a[1] * a[10] * a[15] + a[1] * a[11] * a[14] + a[9] * a[2] * a[15] - a[9] * a[3] * a[14] - a[13] * a[2] * a[11] + a[13] * a[3] * a[10];
  inv[5] = a[0] * a[10] * a[15] - a[0] * a[11] * a[14] - a[8] * a[2] * a[15] + a[8] * a[3] * a[14] + a[12] * a[2] * a[11] - a[12] * a[3] * a[10];
  inv[9] = -a[0] * a[9] * a[15] + a[0] * a[11] * a[13] + a[8] * a[1] * a[15] - a[8] * a[3] * a[13] - a[12] * a[1] * a[11] + a[12] * a[3] * a[9];
  inv[13] = a[0] * a[9] * a[14] - a[0] * a[10] * a[13] - a[8] * a[1] * a[14] + a[8] * a[2] * a[13] + a[12] * a[1] * a[10] - a[12] * a[2] * a[9];
  inv[2] = a[1] * a[6] * a[15] - a[1] * a[7] * a[14] - a[5] * a[2] * a[15] + a[5] * a[3] * a[14] + a[13] * a[2] * a[7] - a[13] * a[3] * a[6];
  inv[6] = -a[0] * a[6] * a[15] + a[0] * a[7] * a[14] + a[4] * a[2] * a[15] - a[4] * a[3] * a[14] - a[12] * a[2] * a[7] + a[12] * a[3] * a[6];
  inv[10] = a[0] * a[5] * a[15] - a[0] * a[7] * a[13] - a[4] * a[1] * a[15] + a[4] * a[3] * a[13] + a[12] * a[1] * a[7] - a[12] * a[3] * a[5];
  inv[14] = -a[0] * a[5] * a[14] + a[0] * a[6] * a[13] + a[4] * a[1] * a[14] - a[4] * a[2] * a[13] - a[12] * a[1] * a[6] + a[12] * a[2] * a[5];
  inv[3] = -a[1] * a[6] * a[11] + a[1] * a[7] * a[10] + a[5] * a[2] * a[11] - a[5] * a[3] * a[10] - a[9] * a[2] * a[7] + a[9] * a[3] * a[6];
  inv[7] = a[0] * a[6] * a[11] - a[0] * a[7] * a[10] - a[4] * a[2] * a[11] + a[4] * a[3] * a[10] + a[8] * a[2] * a[7] - a[8] * a[3] * a[6];
  inv[11] = -a[0] * a[5] * a[11] + a[0] * a[7] * a[9] + a[4] * a[1] * a[11] - a[4] * a[3] * a[9] - a[8] * a[1] * a[7] + a[8] * a[3] * a[5];
  inv[15] = a[0] * a[5] * a[10] - a[0] * a[6] * a[9] - a[4] * a[1] * a[10] + a[4] * a[2] * a[9] + a[8] * a[1] * a[6] - a[8] * a[2] * a[5];
  const det = a[0] * inv[0] + a[1] * inv[4] + a[2] * inv[8] + a[3] * inv[12];
  return inv.map((x) => x / det);
}

// How far the orbit raises or lowers the eye, and where the top and bottom views stop (as
// deform-view's: the way up on screen stays defined).
export const PITCH_LIMIT = (89 * Math.PI) / 180;

// Blender's numpad views about the session's up axis, as yaw and pitch (deform-view's
// vw_camera_view has the same table): front looks from +Z at a Y-up mesh and from -Y at a Z-up
// one, right from +X, top down the up axis with the front at the bottom of the screen.
const VIEWS = {
  front: [0, 0], back: [Math.PI, 0], right: [Math.PI / 2, 0], left: [-Math.PI / 2, 0],
  top: [0, PITCH_LIMIT], bottom: [0, -PITCH_LIMIT],
};

export class Camera {
  constructor() {
    this.center = [0, 0, 0];
    this.radius = 1;
    this.yaw = 0;
    this.pitch = 0;
    this.distance = 2.6;
    this.width = 1;
    this.height = 1;
    this.fov = (35 * Math.PI) / 180;
    this.up = 'y';
    this.clip = null; // {near, far} when main.js fits the depth range to the shape (fitClip)
  }

  // The unit vector from the centre to the eye, and the screen's right and up in the world, for a
  // yaw and pitch (the camera's frame, as update() builds it).
  basis(yaw = this.yaw, pitch = this.pitch) {
    const cp = Math.cos(pitch);
    const o = this.up === 'z'
      ? [cp * Math.sin(yaw), -cp * Math.cos(yaw), Math.sin(pitch)]
      : [cp * Math.sin(yaw), Math.sin(pitch), cp * Math.cos(yaw)];
    const up = this.up === 'z' ? [0, 0, 1] : [0, 1, 0];
    let s = [up[1] * o[2] - up[2] * o[1], up[2] * o[0] - up[0] * o[2], up[0] * o[1] - up[1] * o[0]]; // up × o
    const l = Math.hypot(...s) || 1;
    s = s.map((x) => x / l);
    const u = [o[1] * s[2] - o[2] * s[1], o[2] * s[0] - o[0] * s[2], o[0] * s[1] - o[1] * s[0]]; // o × s
    return { o, s, u };
  }

  // Turns the camera by (dyaw, dpitch) about a point (Blender's orbit around the point under the
  // cursor): the eye and the centre turn about the pivot rigidly, so the pivot stays where it is
  // on screen. Without a pivot, about the centre. The pitch stops at ±PITCH_LIMIT.
  orbit(dyaw, dpitch, pivot = null) {
    const yaw = this.yaw + dyaw;
    const pitch = Math.max(-PITCH_LIMIT, Math.min(PITCH_LIMIT, this.pitch + dpitch));
    if (pivot) {
      const b0 = this.basis();
      const b1 = this.basis(yaw, pitch);
      const e = this.eye();
      const v = [0, 1, 2].map((k) => e[k] - pivot[k]);
      const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
      const [a, b, c] = [dot(v, b0.s), dot(v, b0.u), dot(v, b0.o)];
      const e1 = [0, 1, 2].map((k) => pivot[k] + a * b1.s[k] + b * b1.u[k] + c * b1.o[k]);
      this.center = [0, 1, 2].map((k) => e1[k] - this.distance * b1.o[k]);
    }
    this.yaw = yaw;
    this.pitch = pitch;
  }

  // Scales the eye's and the centre's distance to a point by k (k < 1 zooms in): the point keeps
  // its pixel, the way the camera looks stays.
  zoomAbout(point, k) {
    this.center = [0, 1, 2].map((i) => point[i] + k * (this.center[i] - point[i]));
    this.distance *= k;
  }

  // Turns to one of VIEWS (the zoom and the point looked at stay). False for another name.
  // (Not `view`: that is the view matrix update() computes.)
  setView(name) {
    const v = VIEWS[name];
    if (!v) return false;
    [this.yaw, this.pitch] = v;
    return true;
  }

  // Looks at a bounding box: centre, radius = half the diagonal (the shape's, kept as `radius`
  // for the depth range and the clamps; framing a part passes keepRadius).
  frame(lo, hi, keepRadius = false) {
    const r = Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]) / 2 || 1;
    this.center = [0, 1, 2].map((i) => (lo[i] + hi[i]) / 2);
    this.distance = r / Math.sin(this.fov / 2) * 1.05;
    if (!keepRadius) this.radius = r;
  }

  eye() {
    const cp = Math.cos(this.pitch);
    if (this.up === 'z')
      return [
        this.center[0] + this.distance * cp * Math.sin(this.yaw),
        this.center[1] - this.distance * cp * Math.cos(this.yaw),
        this.center[2] + this.distance * Math.sin(this.pitch),
      ];
    return [
      this.center[0] + this.distance * cp * Math.sin(this.yaw),
      this.center[1] + this.distance * Math.sin(this.pitch),
      this.center[2] + this.distance * cp * Math.cos(this.yaw),
    ];
  }

  update(width, height) {
    this.width = width;
    this.height = height;
    const e = this.eye();
    const c = this.center;
    let f = [c[0] - e[0], c[1] - e[1], c[2] - e[2]];
    const fl = Math.hypot(...f);
    f = f.map((x) => x / fl);
    const up = this.up === 'z' ? [0, 0, 1] : [0, 1, 0];
    let s = [f[1] * up[2] - f[2] * up[1], f[2] * up[0] - f[0] * up[2], f[0] * up[1] - f[1] * up[0]]; // f × up
    const sl = Math.hypot(...s) || 1;
    s = s.map((x) => x / sl);
    const u = [s[1] * f[2] - s[2] * f[1], s[2] * f[0] - s[0] * f[2], s[0] * f[1] - s[1] * f[0]];
    const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    this.view = new Float32Array([s[0], u[0], -f[0], 0, s[1], u[1], -f[1], 0, s[2], u[2], -f[2], 0, -dot(s, e), -dot(u, e), dot(f, e), 1]);
    // The depth range: the one main.js fitted to the shape in view (clip), else the frame's.
    const near = this.clip ? this.clip.near : Math.max(this.distance - 2 * this.radius, this.radius * 0.01);
    const far = this.clip ? this.clip.far : this.distance + 2 * this.radius;
    const t = 1 / Math.tan(this.fov / 2);
    const a = width / height;
    this.proj = new Float32Array([t / a, 0, 0, 0, 0, t, 0, 0, 0, 0, (far + near) / (near - far), -1, 0, 0, (2 * far * near) / (near - far), 0]);
    this.mvp = mul(this.proj, this.view);
    this.inverse = invert(this.mvp);
  }

  // Canvas pixel (x right, y down) and depth (NDC z) of a point.
  project(p) {
    const m = this.mvp;
    const x = m[0] * p[0] + m[4] * p[1] + m[8] * p[2] + m[12];
    const y = m[1] * p[0] + m[5] * p[1] + m[9] * p[2] + m[13];
    const z = m[2] * p[0] + m[6] * p[1] + m[10] * p[2] + m[14];
    const w = m[3] * p[0] + m[7] * p[1] + m[11] * p[2] + m[15];
    return [((x / w + 1) / 2) * this.width, ((1 - y / w) / 2) * this.height, z / w];
  }

  unproject(px, py, ndcZ) {
    const x = (px / this.width) * 2 - 1;
    const y = 1 - (py / this.height) * 2;
    const m = this.inverse;
    const v = [0, 1, 2, 3].map((r) => m[r] * x + m[4 + r] * y + m[8 + r] * ndcZ + m[12 + r]);
    return [v[0] / v[3], v[1] / v[3], v[2] / v[3]];
  }

  // The ray through a pixel: origin and unit direction.
  ray(px, py) {
    const a = this.unproject(px, py, -1);
    const b = this.unproject(px, py, 1);
    const d = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
    const l = Math.hypot(...d);
    return { origin: a, dir: d.map((x) => x / l) };
  }
}

// Where the ray o + t·d crosses triangle (a, b, c) (vertex indices × 3): [t, u, v], or null
// (Möller–Trumbore; t may be negative).
function crossing(positions, a, b, c, o, d) {
  const e1x = positions[b] - positions[a], e1y = positions[b + 1] - positions[a + 1], e1z = positions[b + 2] - positions[a + 2];
  const e2x = positions[c] - positions[a], e2y = positions[c + 1] - positions[a + 1], e2z = positions[c + 2] - positions[a + 2];
  const px = d[1] * e2z - d[2] * e2y, py = d[2] * e2x - d[0] * e2z, pz = d[0] * e2y - d[1] * e2x;
  const det = e1x * px + e1y * py + e1z * pz;
  if (Math.abs(det) < 1e-12) return null;
  const inv = 1 / det;
  const tx = o[0] - positions[a], ty = o[1] - positions[a + 1], tz = o[2] - positions[a + 2];
  const u = (tx * px + ty * py + tz * pz) * inv;
  if (u < 0 || u > 1) return null;
  const qx = ty * e1z - tz * e1y, qy = tz * e1x - tx * e1z, qz = tx * e1y - ty * e1x;
  const v = (d[0] * qx + d[1] * qy + d[2] * qz) * inv;
  if (v < 0 || u + v > 1) return null;
  return [(e2x * qx + e2y * qy + e2z * qz) * inv, u, v];
}

// The nearest triangle a ray hits, with the hit point and its nearest corner.
export function pick(positions, triangles, ray) {
  const o = ray.origin;
  const d = ray.dir;
  let best = Infinity;
  let hit = null;
  for (let i = 0; i < triangles.length; i += 3) {
    const x = crossing(positions, 3 * triangles[i], 3 * triangles[i + 1], 3 * triangles[i + 2], o, d);
    if (!x) continue;
    const [t, u, v] = x;
    if (t <= 0 || t >= best) continue;
    best = t;
    const w = [1 - u - v, u, v];
    const k = w.indexOf(Math.max(...w));
    hit = { t, triangle: i / 3, vertex: triangles[i + k], point: [o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2]] };
  }
  return hit;
}

// Whether point p is inside the closed surface: an odd number of its triangles crossed by a
// ray from p (in a direction no axis-aligned mesh lines up with).
export function inside(positions, triangles, p) {
  const d = [0.5234, 0.6012, 0.6038];
  let n = 0;
  for (let i = 0; i < triangles.length; i += 3) {
    const x = crossing(positions, 3 * triangles[i], 3 * triangles[i + 1], 3 * triangles[i + 2], p, d);
    if (x && x[0] > 0) n++;
  }
  return n % 2 === 1;
}
