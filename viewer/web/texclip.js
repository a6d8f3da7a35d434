// texclip.js — animated texture clips in the page (texture PCA, docs/protocol.md §18,
// capability "texclip"): TEXCLIP and TEXWEIGHTS decoded exactly as protocol/proto_texclip.c
// decodes them (same checks, same order, same codes), the CPU rebuild of a texel
// (shared/mesh_texpca.c's formula), and the WebGL2 pass that rebuilds a frame into a texture:
// the mean and the component tiles in one TEXTURE_2D_ARRAY (RGBA8), one full-screen triangle
// whose fragment shader computes mean · m + Σ a_k · component_k + b_r per texel.
//
// Does not draw meshes (render.js samples `out`) or open connections (net.js hands frames here).
import { Cursor, E, ProtoError } from './protocol.js';

export const MAX_WINDOWS = 16;
export const MAX_COMPONENTS = 64;
export const MAX_LAYERS = 64;
export const MAX_SIDE = 2048;
export const MAX_CLIPS = 4;

const fail = (code) => {
  throw new ProtoError(code);
};

// proto_texclip.c check_layout, in its order.
function checkLayout(c) {
  if (c.width === 0 || c.height === 0 || c.width > MAX_SIDE || c.height > MAX_SIDE || c.windows.length === 0 ||
      c.windows.length > MAX_WINDOWS || c.comps.length > MAX_COMPONENTS || c.layers === 0 || c.layers > MAX_LAYERS)
    fail(E.TOOBIG);
  let next = 0;
  c.windows.forEach((w, r) => {
    if (w.w === 0 || w.h === 0 || w.x + w.w > c.width || w.y + w.h > c.height) fail(E.INVAL);
    if (r === 0 && (w.x || w.y || w.w !== c.width || w.h !== c.height)) fail(E.INVAL);
    if (w.first !== next || w.first + w.count > c.comps.length) fail(E.INVAL);
    next += w.count;
    for (let k = w.first; k < w.first + w.count; k++) {
      const t = c.comps[k];
      if (t.layer === 0 || t.layer >= c.layers || t.x + w.w > c.width || t.y + w.h > c.height) fail(E.INVAL);
    }
  });
  if (next !== c.comps.length) fail(E.INVAL);
}

// A TEXCLIP payload: {id, name, width, height, frameCount, fps, layers, windows: [{x, y, w, h, first,
// count}], comps: [{layer, x, y, scale, offset}], texels (RGB8, a view into p)}.
export function decodeTexclip(p) {
  const c = new Cursor(p);
  const clip = { id: c.u32(), name: c.str(), width: c.u16(), height: c.u16(), frameCount: c.u32(), fps: c.f32() };
  const nw = c.u8(), nc = c.u8();
  clip.layers = c.u8();
  if (nw > MAX_WINDOWS || nc > MAX_COMPONENTS) fail(E.TOOBIG);
  clip.windows = [];
  for (let r = 0; r < nw; r++) clip.windows.push({ x: c.u16(), y: c.u16(), w: c.u16(), h: c.u16(), first: c.u8(), count: c.u8() });
  clip.comps = [];
  for (let k = 0; k < nc; k++) clip.comps.push({ layer: c.u8(), x: c.u16(), y: c.u16(), scale: c.f32(), offset: c.f32() });
  checkLayout(clip);
  clip.texels = c.bytes(clip.layers * clip.width * clip.height * 3);
  c.finish();
  return clip;
}

// A TEXWEIGHTS payload: [{id, mean, weights: Float32Array}], at most MAX_CLIPS.
export function decodeTexweights(p) {
  const c = new Cursor(p);
  const n = c.u8();
  if (n > MAX_CLIPS) fail(E.TOOBIG);
  const out = [];
  for (let i = 0; i < n; i++) {
    const e = { id: c.u32(), mean: c.f32() };
    const k = c.u8();
    if (k > MAX_COMPONENTS) fail(E.TOOBIG);
    e.weights = new Float32Array(k);
    for (let j = 0; j < k; j++) e.weights[j] = c.f32();
    out.push(e);
  }
  c.finish();
  return out;
}

// The window owning texel (x, y): the last whose rectangle holds it, else 0.
function owner(clip, x, y) {
  for (let r = clip.windows.length - 1; r > 0; r--) {
    const w = clip.windows[r];
    if (x >= w.x && x < w.x + w.w && y >= w.y && y < w.y + w.h) return r;
  }
  return 0;
}

// The CPU rebuild (mesh_texclip_texel): RGB8 of the whole frame for one TEXWEIGHTS entry.
export function rebuild(clip, entry) {
  const { width: W, height: H } = clip, plane = W * H, out = new Uint8Array(plane * 3);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) {
      const win = clip.windows[owner(clip, x, y)], i = y * W + x;
      for (let ch = 0; ch < 3; ch++) {
        let v = entry.mean * clip.texels[3 * i + ch] / 255;
        for (let k = win.first; k < win.first + win.count; k++) {
          const t = clip.comps[k], at = plane * t.layer + (t.y + y - win.y) * W + t.x + x - win.x;
          v += entry.weights[k] * (t.offset + t.scale * clip.texels[3 * at + ch] / 255);
        }
        out[3 * i + ch] = Math.round(Math.min(1, Math.max(0, v)) * 255);
      }
    }
  return out;
}

const VS = `#version 300 es
void main() { vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
  gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0); }`;

// viewer/vw_shaders.c's texclip_fs, in GLSL ES 3.00.
const FS = `#version 300 es
precision highp float;
precision highp int;
precision highp sampler2DArray;
uniform sampler2DArray uTex;
uniform int uWindows;
uniform ivec4 uRect[16];
uniform ivec2 uRange[16];
uniform ivec3 uTile[64];
uniform float uA[64];
uniform float uB[16];
uniform float uMean;
out vec4 fragColor;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  int r = 0;
  for (int i = 1; i < uWindows; i++)
    if (all(greaterThanEqual(p, uRect[i].xy)) && all(lessThan(p, uRect[i].xy + uRect[i].zw))) r = i;
  vec3 c = uMean * texelFetch(uTex, ivec3(p, 0), 0).rgb + vec3(uB[r]);
  ivec2 local = p - uRect[r].xy;
  for (int k = uRange[r].x; k < uRange[r].x + uRange[r].y; k++)
    c += uA[k] * texelFetch(uTex, ivec3(uTile[k].yz + local, uTile[k].x), 0).rgb;
  fragColor = vec4(clamp(c, 0.0, 1.0), 1.0);
}`;

function shader(gl, type, src) {
  const s = gl.createShader(type);
  gl.shaderSource(s, src);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(`texture clip shader: ${gl.getShaderInfoLog(s)}`);
  return s;
}

// One clip on the GPU: `out` is a TEXTURE_2D (RGBA8, the clip's size) holding the frame drawn last.
export class TexclipPass {
  constructor(gl, clip) {
    this.gl = gl;
    this.clip = clip;
    const p = gl.createProgram();
    gl.attachShader(p, shader(gl, gl.VERTEX_SHADER, VS));
    gl.attachShader(p, shader(gl, gl.FRAGMENT_SHADER, FS));
    gl.linkProgram(p);
    if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error(`texture clip program: ${gl.getProgramInfoLog(p)}`);
    this.prog = p;
    const { width: W, height: H, layers } = clip, n = W * H * layers, rgba = new Uint8Array(4 * n);
    for (let i = 0; i < n; i++) {
      rgba[4 * i] = clip.texels[3 * i];
      rgba[4 * i + 1] = clip.texels[3 * i + 1];
      rgba[4 * i + 2] = clip.texels[3 * i + 2];
      rgba[4 * i + 3] = 255;
    }
    this.array = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D_ARRAY, this.array);
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
    gl.texImage3D(gl.TEXTURE_2D_ARRAY, 0, gl.RGBA8, W, H, layers, 0, gl.RGBA, gl.UNSIGNED_BYTE, rgba);
    gl.texParameteri(gl.TEXTURE_2D_ARRAY, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
    gl.texParameteri(gl.TEXTURE_2D_ARRAY, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    this.out = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D, this.out);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA8, W, H, 0, gl.RGBA, gl.UNSIGNED_BYTE, null);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.LINEAR);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.LINEAR);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
    this.fbo = gl.createFramebuffer();
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.fbo);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, this.out, 0);
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    this.vao = gl.createVertexArray();
    this.u = {};
    for (const k of ['uTex', 'uWindows', 'uRect', 'uRange', 'uTile', 'uA', 'uB', 'uMean']) this.u[k] = gl.getUniformLocation(p, k);
    this.rect = new Int32Array(4 * clip.windows.length);
    this.range = new Int32Array(2 * clip.windows.length);
    clip.windows.forEach((w, r) => {
      this.rect.set([w.x, w.y, w.w, w.h], 4 * r);
      this.range.set([w.first, w.count], 2 * r);
    });
    this.tile = new Int32Array(3 * Math.max(1, clip.comps.length));
    clip.comps.forEach((t, k) => this.tile.set([t.layer, t.x, t.y], 3 * k));
  }

  // Rebuilds the frame of one TEXWEIGHTS entry ({mean, weights}) into `out`.
  draw(entry) {
    const { gl, clip } = this, K = clip.comps.length;
    const a = new Float32Array(Math.max(1, K)), b = new Float32Array(clip.windows.length);
    clip.windows.forEach((w, r) => {
      let sum = 0;
      for (let k = w.first; k < w.first + w.count; k++) {
        a[k] = entry.weights[k] * clip.comps[k].scale;
        sum += entry.weights[k] * clip.comps[k].offset;
      }
      b[r] = sum;
    });
    const vp = gl.getParameter(gl.VIEWPORT), fb = gl.getParameter(gl.FRAMEBUFFER_BINDING);
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.fbo);
    gl.viewport(0, 0, clip.width, clip.height);
    gl.disable(gl.DEPTH_TEST);
    gl.disable(gl.BLEND);
    gl.useProgram(this.prog);
    gl.activeTexture(gl.TEXTURE0);
    gl.bindTexture(gl.TEXTURE_2D_ARRAY, this.array);
    gl.uniform1i(this.u.uTex, 0);
    gl.uniform1i(this.u.uWindows, clip.windows.length);
    gl.uniform4iv(this.u.uRect, this.rect);
    gl.uniform2iv(this.u.uRange, this.range);
    if (K) {
      gl.uniform3iv(this.u.uTile, this.tile);
      gl.uniform1fv(this.u.uA, a);
    }
    gl.uniform1fv(this.u.uB, b);
    gl.uniform1f(this.u.uMean, entry.mean);
    gl.bindVertexArray(this.vao);
    gl.drawArrays(gl.TRIANGLES, 0, 3);
    gl.bindVertexArray(null);
    gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
    gl.viewport(vp[0], vp[1], vp[2], vp[3]);
  }

  // The frame drawn last, RGBA8 rows from texel row 0 (for tests).
  read() {
    const { gl, clip } = this, px = new Uint8Array(4 * clip.width * clip.height);
    const fb = gl.getParameter(gl.FRAMEBUFFER_BINDING);
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.fbo);
    gl.readPixels(0, 0, clip.width, clip.height, gl.RGBA, gl.UNSIGNED_BYTE, px);
    gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
    return px;
  }

  dispose() {
    const { gl } = this;
    gl.deleteTexture(this.array);
    gl.deleteTexture(this.out);
    gl.deleteFramebuffer(this.fbo);
    gl.deleteVertexArray(this.vao);
    gl.deleteProgram(this.prog);
  }
}
