// render.js — the GPU side of the one formula in WebGL2 (viewer/vw_gpu.c's design):
//
//   morph    base + sculpt + Σ w·Δ over the active targets only, into a float position texture
//            (one texel per render vertex); targets are layers of a float texture array, the
//            active ones (weight ≠ 0) passed as (layer, weight) uniforms, 32 per pass, passes
//            ping-ponging when more are active;
//   normals  one texel per welded vertex: the angle-weighted normals of its welded triangles,
//            computed from the morphed positions (render vertices split at UV seams share one
//            normal, as shared/mesh_normals.c, the CPU reference, does);
//   draw     the triangles, each vertex fetching its position and its welded normal; one draw per
//            submesh when the session has materials (TEXTURE frames): base colour × its image at
//            (u, 1 − v), sRGB and mipmapped, as deform-view draws them.
//
// Why render-to-texture and not transform feedback: each pass needs random access to the
// previous one's output (a normal needs its triangles' corners), which textures give through
// texelFetch; float render targets are WebGL2's EXT_color_buffer_float, which every WebGL2
// implementation here has (SwiftShader included), and the positions read back with one
// readPixels (deformView.positions()). Sculpt offsets go up as the changed span of rows only;
// weights are uniforms; a target created live adds a layer.
//
// DOES NOT decode frames (protocol.js), keep session state (replica.js) or handle input (main.js).

import { TexclipPass } from './texclip.js';

const MAX_ACTIVE = 32; // (layer, weight) pairs per morph pass
const TEX_W = 1024;    // texels per row of every per-vertex texture

const VS_QUAD = `#version 300 es
void main() {
  vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
  gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}`;

const FS_MORPH = `#version 300 es
precision highp float;
precision highp int;
precision highp sampler2DArray;
uniform sampler2D u_prev;     // base + sculpt on the first pass, the previous pass after
uniform sampler2D u_sculpt;
uniform sampler2DArray u_deltas;
uniform int u_first;
uniform int u_count;
uniform int u_layer[${MAX_ACTIVE}];
uniform float u_weight[${MAX_ACTIVE}];
out vec4 o;
void main() {
  ivec2 t = ivec2(gl_FragCoord.xy);
  vec3 p = texelFetch(u_prev, t, 0).xyz;
  if (u_first == 1) p += texelFetch(u_sculpt, t, 0).xyz;
  for (int i = 0; i < ${MAX_ACTIVE}; i++) {
    if (i >= u_count) break;
    p += u_weight[i] * texelFetch(u_deltas, ivec3(t, u_layer[i]), 0).xyz;
  }
  o = vec4(p, 1.0);
}`;

const FS_NORMALS = `#version 300 es
precision highp float;
precision highp int;
precision highp usampler2D;
uniform sampler2D u_pos;      // morphed positions, per render vertex
uniform usampler2D u_span;    // per welded vertex: first incident entry, count
uniform usampler2D u_inc;     // incident entries: welded triangle * 4 + corner
uniform usampler2D u_tri;     // per welded triangle: its corners' render vertices
uniform int u_topo;
out vec4 o;
ivec2 at(uint i) { return ivec2(int(i % ${TEX_W}u), int(i / ${TEX_W}u)); }
void main() {
  ivec2 t = ivec2(gl_FragCoord.xy);
  if (t.y * ${TEX_W} + t.x >= u_topo) { o = vec4(0.0, 0.0, 1.0, 0.0); return; }
  uvec2 span = texelFetch(u_span, t, 0).xy;
  vec3 n = vec3(0.0);
  for (uint k = 0u; k < span.y; k++) {
    uint e = texelFetch(u_inc, at(span.x + k), 0).x;
    uvec4 tri = texelFetch(u_tri, at(e >> 2u), 0);
    uint c = e & 3u;
    vec3 q0 = texelFetch(u_pos, at(tri.x), 0).xyz;
    vec3 q1 = texelFetch(u_pos, at(tri.y), 0).xyz;
    vec3 q2 = texelFetch(u_pos, at(tri.z), 0).xyz;
    vec3 fn = cross(q1 - q0, q2 - q0);
    float len = length(fn);
    if (!(len > 0.0)) continue;
    vec3 a = c == 0u ? q0 : c == 1u ? q1 : q2;
    vec3 b = c == 0u ? q1 : c == 1u ? q2 : q0;
    vec3 d = c == 0u ? q2 : c == 1u ? q0 : q1;
    vec3 u = b - a, v = d - a;
    float w = atan(length(cross(u, v)), dot(u, v));
    n += w * fn / len;
  }
  float l = length(n);
  o = vec4(l > 0.0 ? n / l : vec3(0.0, 0.0, 1.0), 1.0);
}`;

const MASK_DARKEN = '0.6'; // what a mask holds: the colour times 1 − 0.6 × mask

const VS_MESH = `#version 300 es
precision highp float;
precision highp int;
uniform sampler2D u_pos;
uniform sampler2D u_nrm;
uniform mat4 u_mvp;
uniform mat4 u_view;
in uint a_topo;
in float a_mask; // the author's mask (0 without one): drawn darker
in vec2 a_uv;    // the mesh's UVs (0 without): where its texture is sampled
out vec3 v_n;
out vec3 v_p;
out float v_mask;
out vec2 v_uv;
ivec2 at(uint i) { return ivec2(int(i % ${TEX_W}u), int(i / ${TEX_W}u)); }
void main() {
  v_mask = clamp(a_mask, 0.0, 1.0);
  v_uv = a_uv;
  vec3 p = texelFetch(u_pos, at(uint(gl_VertexID)), 0).xyz;
  v_n = mat3(u_view) * texelFetch(u_nrm, at(a_topo), 0).xyz;
  v_p = (u_view * vec4(p, 1.0)).xyz;
  gl_Position = u_mvp * vec4(p, 1.0);
}`;

// The matcaps (clay, red wax, skin): procedural, from the view-space unit normal alone (z towards
// the eye), no image; viewer/README.md has the same formula and colours for deform-view.
// matcap k: 0 clay, 1 red wax, 2 skin. Shaded colour, already for display (no gamma after).
export const MATCAP_GLSL = `
vec3 matcap(int k, vec3 n) {
  vec3 dark[3] = vec3[3](vec3(0.28, 0.24, 0.22), vec3(0.22, 0.02, 0.02), vec3(0.36, 0.18, 0.14));
  vec3 lite[3] = vec3[3](vec3(0.80, 0.74, 0.68), vec3(0.86, 0.18, 0.13), vec3(0.96, 0.75, 0.63));
  vec3 rimc[3] = vec3[3](vec3(0.10, 0.10, 0.12), vec3(0.40, 0.10, 0.06), vec3(0.45, 0.20, 0.15));
  float spec[3] = float[3](0.06, 0.45, 0.12);
  float shin[3] = float[3](8.0, 40.0, 20.0);
  vec3 l = normalize(vec3(-0.4, 0.6, 0.7));
  vec3 h = normalize(l + vec3(0.0, 0.0, 1.0));
  float d = 0.5 + 0.5 * dot(n, l);
  float r = pow(1.0 - max(n.z, 0.0), 3.0);
  float s = pow(max(dot(n, h), 0.0), shin[k]);
  return mix(dark[k], lite[k], d) + rimc[k] * r + vec3(spec[k] * s);
}`;

const FS_MESH = `#version 300 es
precision highp float;
in vec3 v_n;
in vec3 v_p;
in float v_mask;
in vec2 v_uv;
uniform vec3 u_color;
uniform sampler2D u_tex; // the submesh's image (sRGB: sampled linear), row 0 its top
uniform int u_textured;
uniform int u_shade; // 0 lit, 1 + k the matcap k, -1 unlit (?unlit=1: the albedo as it is)
uniform sampler2D u_clip0, u_clip1, u_clip2, u_clip3; // texture clips' rebuilt frames (texclip.js)
uniform int u_clips; // how many show on this draw
out vec4 o;
${MATCAP_GLSL}
void main() {
  vec2 st = vec2(v_uv.x, 1.0 - v_uv.y);
  vec3 albedo = u_color;
  if (u_textured != 0) albedo *= texture(u_tex, st).rgb; // as deform-view's
  if (u_clips > 0) { // the clips' sum replaces the albedo, linearised as deform-view's (vw_shaders.c)
    vec3 s = texture(u_clip0, st).rgb;
    if (u_clips > 1) s += texture(u_clip1, st).rgb;
    if (u_clips > 2) s += texture(u_clip2, st).rgb;
    if (u_clips > 3) s += texture(u_clip3, st).rgb;
    albedo = pow(clamp(s, 0.0, 1.0), vec3(2.2));
  }
  vec3 base = albedo * (1.0 - ${MASK_DARKEN} * v_mask); // as deform-view's (vw_shaders.c)
  if (u_shade < 0) {
    o = vec4(pow(base, vec3(1.0 / 2.2)), 1.0);
    return;
  }
  vec3 n = normalize(v_n);
  if (!gl_FrontFacing) n = -n;
  if (u_shade > 0) {
    o = vec4(clamp(matcap(u_shade - 1, n), 0.0, 1.0) * (1.0 - ${MASK_DARKEN} * v_mask), 1.0);
    return;
  }
  vec3 l = normalize(vec3(0.4, 0.6, 1.0));
  vec3 e = normalize(-v_p);
  float diff = max(dot(n, l), 0.0);
  float spec = pow(max(dot(reflect(-l, n), e), 0.0), 32.0);
  vec3 c = base * (0.22 + 0.78 * diff) + vec3(0.18) * spec;
  o = vec4(pow(c, vec3(1.0 / 2.2)), 1.0);
}`;

const VS_MARK = `#version 300 es
uniform mat4 u_mvp;
uniform vec3 u_at;
uniform float u_size;
void main() { gl_Position = u_mvp * vec4(u_at, 1.0); gl_PointSize = u_size; }`;
const FS_MARK = `#version 300 es
precision mediump float;
uniform vec3 u_color;
out vec4 o;
void main() { vec2 d = gl_PointCoord - 0.5; if (dot(d, d) > 0.25) discard; o = vec4(u_color, 1.0); }`;

export class RenderError extends Error {}

export function compile(gl, vs, fs) {
  const p = gl.createProgram();
  for (const [type, src] of [[gl.VERTEX_SHADER, vs], [gl.FRAGMENT_SHADER, fs]]) {
    const s = gl.createShader(type);
    gl.shaderSource(s, src);
    gl.compileShader(s);
    if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new RenderError(`shader: ${gl.getShaderInfoLog(s)}`);
    gl.attachShader(p, s);
  }
  gl.linkProgram(p);
  if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new RenderError(`program: ${gl.getProgramInfoLog(p)}`);
  const u = {};
  const n = gl.getProgramParameter(p, gl.ACTIVE_UNIFORMS);
  for (let i = 0; i < n; i++) {
    const info = gl.getActiveUniform(p, i);
    const name = info.name.replace(/\[0\]$/, '');
    u[name] = gl.getUniformLocation(p, info.name);
  }
  return { p, u };
}

// Welds render vertices that share a base position (a UV seam splits them) and lists each welded
// vertex's welded triangles: what the normal pass reads.
export function weld(positions, triangles) {
  const V = positions.length / 3;
  const bits = new Uint32Array(positions.buffer, positions.byteOffset, positions.length);
  const map = new Map();
  const topo = new Uint32Array(V);
  const rep = [];
  for (let v = 0; v < V; v++) {
    const key = `${bits[3 * v]},${bits[3 * v + 1]},${bits[3 * v + 2]}`;
    let t = map.get(key);
    if (t === undefined) {
      t = rep.length;
      map.set(key, t);
      rep.push(v);
    }
    topo[v] = t;
  }
  const nt = rep.length;
  const tris = [];
  for (let i = 0; i < triangles.length; i += 3) {
    const a = topo[triangles[i]];
    const b = topo[triangles[i + 1]];
    const c = topo[triangles[i + 2]];
    if (a !== b && b !== c && a !== c) tris.push(a, b, c);
  }
  const count = new Uint32Array(nt);
  for (const t of tris) count[t]++;
  const first = new Uint32Array(nt);
  for (let t = 1; t < nt; t++) first[t] = first[t - 1] + count[t - 1];
  const inc = new Uint32Array(tris.length);
  const fill = first.slice();
  for (let i = 0; i < tris.length; i++) inc[fill[tris[i]]++] = (Math.floor(i / 3) << 2) | (i % 3);
  const triRep = new Uint32Array((tris.length / 3) * 4);
  for (let f = 0; f < tris.length / 3; f++)
    for (let c = 0; c < 3; c++) triRep[4 * f + c] = rep[tris[3 * f + c]];
  return { topo, topoCount: nt, first, count, inc, triRep, triCount: tris.length / 3 };
}

const rows = (n) => Math.max(1, Math.ceil(n / TEX_W));

export class Renderer {
  constructor(canvas) {
    const gl = canvas.getContext('webgl2', { preserveDrawingBuffer: true, antialias: false, alpha: false });
    if (!gl) throw new RenderError('this browser has no WebGL2');
    if (!gl.getExtension('EXT_color_buffer_float')) throw new RenderError('WebGL2 without EXT_color_buffer_float');
    this.gl = gl;
    this.canvas = canvas;
    this.morph = compile(gl, VS_QUAD, FS_MORPH);
    this.normals = compile(gl, VS_QUAD, FS_NORMALS);
    this.mesh = compile(gl, VS_MESH, FS_MESH);
    this.mark = compile(gl, VS_MARK, FS_MARK);
    this.vao = gl.createVertexArray();
    this.empty = gl.createVertexArray();
    this.V = 0;
    this.layers = 0;
  }

  tex(w, h, internal, format, type, data, layers = 0) {
    const gl = this.gl;
    const t = gl.createTexture();
    const target = layers ? gl.TEXTURE_2D_ARRAY : gl.TEXTURE_2D;
    gl.bindTexture(target, t);
    gl.texParameteri(target, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
    gl.texParameteri(target, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    if (layers) gl.texImage3D(target, 0, internal, w, h, layers, 0, format, type, data);
    else gl.texImage2D(target, 0, internal, w, h, 0, format, type, data);
    return t;
  }

  target(tex) {
    const gl = this.gl;
    const fb = gl.createFramebuffer();
    gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, tex, 0);
    if (gl.checkFramebufferStatus(gl.FRAMEBUFFER) !== gl.FRAMEBUFFER_COMPLETE) throw new RenderError('float render target incomplete');
    return fb;
  }

  // A new snapshot: every buffer and texture made again.
  load(replica) {
    const gl = this.gl;
    const s = replica.snapshot;
    this.release();
    const V = (this.V = s.vertexCount);
    this.H = rows(V);
    const rgba = (xyz, n) => {
      const a = new Float32Array(4 * TEX_W * rows(n));
      for (let i = 0; i < n; i++) {
        a[4 * i] = xyz[3 * i];
        a[4 * i + 1] = xyz[3 * i + 1];
        a[4 * i + 2] = xyz[3 * i + 2];
      }
      return a;
    };
    this.rgba = rgba;
    this.base = this.tex(TEX_W, this.H, gl.RGBA32F, gl.RGBA, gl.FLOAT, rgba(s.positions, V));
    this.sculpt = this.tex(TEX_W, this.H, gl.RGBA32F, gl.RGBA, gl.FLOAT, rgba(replica.offsetsFloat(), V));
    this.pos = [0, 1].map(() => this.tex(TEX_W, this.H, gl.RGBA32F, gl.RGBA, gl.FLOAT, null));
    this.posFb = this.pos.map((t) => this.target(t));
    const w = weld(s.positions, s.triangles);
    this.weldInfo = w;
    const span = new Uint32Array(2 * TEX_W * rows(w.topoCount));
    for (let t = 0; t < w.topoCount; t++) {
      span[2 * t] = w.first[t];
      span[2 * t + 1] = w.count[t];
    }
    this.span = this.tex(TEX_W, rows(w.topoCount), gl.RG32UI, gl.RG_INTEGER, gl.UNSIGNED_INT, span);
    const inc = new Uint32Array(TEX_W * rows(w.inc.length));
    inc.set(w.inc);
    this.inc = this.tex(TEX_W, rows(w.inc.length), gl.R32UI, gl.RED_INTEGER, gl.UNSIGNED_INT, inc);
    const tri = new Uint32Array(4 * TEX_W * rows(w.triCount));
    tri.set(w.triRep);
    this.tri = this.tex(TEX_W, rows(w.triCount), gl.RGBA32UI, gl.RGBA_INTEGER, gl.UNSIGNED_INT, tri);
    this.nrm = this.tex(TEX_W, rows(w.topoCount), gl.RGBA32F, gl.RGBA, gl.FLOAT, null);
    this.nrmFb = this.target(this.nrm);
    gl.bindVertexArray(this.vao);
    this.topoBuf = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, this.topoBuf);
    gl.bufferData(gl.ARRAY_BUFFER, w.topo, gl.STATIC_DRAW);
    const loc = gl.getAttribLocation(this.mesh.p, 'a_topo');
    gl.enableVertexAttribArray(loc);
    gl.vertexAttribIPointer(loc, 1, gl.UNSIGNED_INT, 0, 0);
    this.maskBuf = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, this.maskBuf);
    gl.bufferData(gl.ARRAY_BUFFER, replica.mask || new Float32Array(V), gl.DYNAMIC_DRAW);
    const mloc = gl.getAttribLocation(this.mesh.p, 'a_mask');
    gl.enableVertexAttribArray(mloc);
    gl.vertexAttribPointer(mloc, 1, gl.FLOAT, false, 0, 0);
    const uloc = gl.getAttribLocation(this.mesh.p, 'a_uv');
    if (s.uvs) {
      this.uvBuf = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, this.uvBuf);
      gl.bufferData(gl.ARRAY_BUFFER, s.uvs, gl.STATIC_DRAW);
      gl.enableVertexAttribArray(uloc);
      gl.vertexAttribPointer(uloc, 2, gl.FLOAT, false, 0, 0);
    } else {
      gl.disableVertexAttribArray(uloc);
      gl.vertexAttrib2f(uloc, 0, 0);
    }
    this.images = [];
    this.indexBuf = gl.createBuffer();
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, this.indexBuf);
    gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, s.triangles, gl.STATIC_DRAW);
    this.indexCount = s.triangles.length;
    gl.bindVertexArray(null);
    this.loadTargets(replica);
    this.current = 0;
  }

  // The author's mask (replica.mask, one float per render vertex; null: nothing held).
  uploadMask(replica) {
    if (!this.V) return;
    const gl = this.gl;
    gl.bindBuffer(gl.ARRAY_BUFFER, this.maskBuf);
    gl.bufferSubData(gl.ARRAY_BUFFER, 0, replica.mask || new Float32Array(this.V));
    gl.bindBuffer(gl.ARRAY_BUFFER, null);
  }

  // The session's images (replica.materials, TEXTURE frames): each uploaded once, as it arrives,
  // sRGB and mipmapped (as deform-view's vw_texture.c).
  uploadTextures(replica) {
    const gl = this.gl;
    const m = replica.materials;
    if (!this.V || !m) return;
    m.images.forEach((im, i) => {
      if (!im || this.images[i]) return;
      const t = gl.createTexture();
      gl.bindTexture(gl.TEXTURE_2D, t);
      gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
      gl.texImage2D(gl.TEXTURE_2D, 0, gl.SRGB8_ALPHA8, im.width, im.height, 0, gl.RGBA, gl.UNSIGNED_BYTE, im.pixels);
      gl.generateMipmap(gl.TEXTURE_2D);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.LINEAR_MIPMAP_LINEAR);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.LINEAR);
      this.images[i] = t;
    });
    this.submeshes = m.submeshes;
  }

  // The triangles: one draw per submesh, its base colour (else the page's grey) × its image;
  // one grey draw for a mesh without materials.
  drawSubmeshes(u) {
    const gl = this.gl;
    const grey = [0.78, 0.66, 0.58];
    const clips = this.clipShown || [];
    for (let i = 0; i < 4; i++) { // units 3 .. 6, always named (a sampler left on unit 0 would clash)
      gl.uniform1i(u[`u_clip${i}`], 3 + i);
      gl.activeTexture(gl.TEXTURE3 + i);
      gl.bindTexture(gl.TEXTURE_2D, clips[i] || null);
    }
    gl.uniform1i(u.u_tex, 2);
    gl.activeTexture(gl.TEXTURE2);
    // A clip shows on the textured submeshes, or on the whole mesh when it has UVs but no materials.
    if (!this.submeshes || !this.submeshes.length) {
      gl.uniform3fv(u.u_color, grey);
      gl.uniform1i(u.u_textured, 0);
      gl.uniform1i(u.u_clips, this.uvBuf ? clips.length : 0);
      gl.drawElements(gl.TRIANGLES, this.indexCount, gl.UNSIGNED_INT, 0);
      return;
    }
    for (const sm of this.submeshes) {
      if (!sm.triangleCount) continue;
      const tex = sm.texture && this.uvBuf ? this.images[sm.texture - 1] : null;
      gl.uniform3fv(u.u_color, sm.hasColor ? sm.baseColor.slice(0, 3) : grey);
      gl.uniform1i(u.u_textured, tex ? 1 : 0);
      gl.uniform1i(u.u_clips, tex ? clips.length : 0);
      gl.bindTexture(gl.TEXTURE_2D, tex || null);
      gl.drawElements(gl.TRIANGLES, 3 * sm.triangleCount, gl.UNSIGNED_INT, 12 * sm.firstTriangle);
    }
    gl.bindTexture(gl.TEXTURE_2D, null);
  }

  // The texture clips (replica.texclips, TEXCLIP frames) each uploaded once, and the frame each
  // TEXWEIGHTS entry names rebuilt into its clip's texture (texclip.js), as deform-view's
  // vw_texshow.c: an entry of a clip not here, or of another weight count, is skipped.
  uploadTexclips(replica) {
    this.clipPasses = this.clipPasses || new Map();
    for (const c of replica.texclips) {
      const had = this.clipPasses.get(c.id);
      if (had && had.clip === c) continue;
      if (had) had.dispose();
      this.clipPasses.set(c.id, new TexclipPass(this.gl, c));
    }
    this.clipShown = [];
    for (const e of replica.texweights) {
      const pass = this.clipPasses.get(e.id);
      if (!pass || e.weights.length !== pass.clip.comps.length || this.clipShown.length >= 4) continue;
      pass.draw(e);
      this.clipShown.push(pass.out);
    }
  }

  // Target deltas as layers (all of them again: a target is created rarely).
  loadTargets(replica) {
    const gl = this.gl;
    const s = replica.snapshot;
    if (this.deltas) gl.deleteTexture(this.deltas);
    const n = Math.max(1, s.targets.length);
    const layer = 4 * TEX_W * this.H;
    const all = new Float32Array(layer * n);
    s.targets.forEach((t, i) => {
      for (let k = 0; k < t.indices.length; k++) {
        const o = i * layer + 4 * t.indices[k];
        all[o] = t.deltas[3 * k];
        all[o + 1] = t.deltas[3 * k + 1];
        all[o + 2] = t.deltas[3 * k + 2];
      }
    });
    this.deltas = this.tex(TEX_W, this.H, gl.RGBA32F, gl.RGBA, gl.FLOAT, all, n);
    this.layers = s.targets.length;
  }

  // The sculpt rows a DELTA touched (vertices first .. end-1).
  uploadSculpt(replica, first, end) {
    if (end <= first) return;
    const gl = this.gl;
    const r0 = Math.floor(first / TEX_W);
    const r1 = Math.floor((end - 1) / TEX_W) + 1;
    const v0 = r0 * TEX_W;
    const v1 = Math.min(r1 * TEX_W, this.V);
    const data = new Float32Array(4 * TEX_W * (r1 - r0));
    const f = replica.offsetsFloat(v0, v1);
    for (let i = 0; i < v1 - v0; i++) {
      data[4 * i] = f[3 * i];
      data[4 * i + 1] = f[3 * i + 1];
      data[4 * i + 2] = f[3 * i + 2];
    }
    gl.bindTexture(gl.TEXTURE_2D, this.sculpt);
    gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, r0, TEX_W, r1 - r0, gl.RGBA, gl.FLOAT, data);
    this.uploadedBytes = (this.uploadedBytes || 0) + data.byteLength;
  }

  // Morph and normal passes (after any change of weights, sculpt or targets).
  compute(weights) {
    const gl = this.gl;
    const active = [];
    for (let i = 0; i < this.layers; i++) if (weights[i] !== 0) active.push(i);
    this.activeCount = active.length;
    gl.disable(gl.DEPTH_TEST);
    gl.disable(gl.BLEND);
    gl.bindVertexArray(this.empty);
    gl.useProgram(this.morph.p);
    const u = this.morph.u;
    gl.uniform1i(u.u_prev, 0);
    gl.uniform1i(u.u_sculpt, 1);
    gl.uniform1i(u.u_deltas, 2);
    gl.activeTexture(gl.TEXTURE1);
    gl.bindTexture(gl.TEXTURE_2D, this.sculpt);
    gl.activeTexture(gl.TEXTURE2);
    gl.bindTexture(gl.TEXTURE_2D_ARRAY, this.deltas);
    let src = this.base;
    let dst = 0;
    for (let at = 0, pass = 0; pass === 0 || at < active.length; pass++) {
      const chunk = active.slice(at, at + MAX_ACTIVE);
      at += chunk.length;
      gl.bindFramebuffer(gl.FRAMEBUFFER, this.posFb[dst]);
      gl.viewport(0, 0, TEX_W, this.H);
      gl.activeTexture(gl.TEXTURE0);
      gl.bindTexture(gl.TEXTURE_2D, src);
      gl.uniform1i(u.u_first, pass === 0 ? 1 : 0);
      gl.uniform1i(u.u_count, chunk.length);
      const layers = new Int32Array(MAX_ACTIVE);
      const ws = new Float32Array(MAX_ACTIVE);
      chunk.forEach((t, i) => {
        layers[i] = t;
        ws[i] = weights[t];
      });
      gl.uniform1iv(u.u_layer, layers);
      gl.uniform1fv(u.u_weight, ws);
      gl.drawArrays(gl.TRIANGLES, 0, 3);
      src = this.pos[dst];
      this.current = dst;
      dst = 1 - dst;
    }
    const w = this.weldInfo;
    gl.useProgram(this.normals.p);
    const n = this.normals.u;
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.nrmFb);
    gl.viewport(0, 0, TEX_W, rows(w.topoCount));
    const bind = (unit, tex, loc) => {
      gl.activeTexture(gl.TEXTURE0 + unit);
      gl.bindTexture(gl.TEXTURE_2D, tex);
      gl.uniform1i(loc, unit);
    };
    bind(0, this.pos[this.current], n.u_pos);
    bind(1, this.span, n.u_span);
    bind(2, this.inc, n.u_inc);
    bind(3, this.tri, n.u_tri);
    gl.uniform1i(n.u_topo, w.topoCount);
    gl.drawArrays(gl.TRIANGLES, 0, 3);
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
  }

  draw(camera, marker) {
    const gl = this.gl;
    const c = this.canvas;
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    gl.viewport(0, 0, c.width, c.height);
    gl.clearColor(0.16, 0.17, 0.2, 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    if (!this.V) return;
    gl.enable(gl.DEPTH_TEST);
    gl.useProgram(this.mesh.p);
    const u = this.mesh.u;
    gl.activeTexture(gl.TEXTURE0);
    gl.bindTexture(gl.TEXTURE_2D, this.pos[this.current]);
    gl.uniform1i(u.u_pos, 0);
    gl.activeTexture(gl.TEXTURE1);
    gl.bindTexture(gl.TEXTURE_2D, this.nrm);
    gl.uniform1i(u.u_nrm, 1);
    gl.uniformMatrix4fv(u.u_mvp, false, camera.mvp);
    gl.uniformMatrix4fv(u.u_view, false, camera.view);
    gl.uniform1i(u.u_shade, this.shade || 0);
    gl.bindVertexArray(this.vao);
    this.drawSubmeshes(u);
    gl.bindVertexArray(null);
    if (marker) {
      gl.disable(gl.DEPTH_TEST);
      gl.useProgram(this.mark.p);
      gl.bindVertexArray(this.empty);
      gl.uniformMatrix4fv(this.mark.u.u_mvp, false, camera.mvp);
      gl.uniform3fv(this.mark.u.u_at, marker.at);
      gl.uniform1f(this.mark.u.u_size, marker.size || 10);
      gl.uniform3fv(this.mark.u.u_color, marker.color || [1, 0.35, 0.2]);
      gl.drawArrays(gl.POINTS, 0, 1);
    }
  }

  // Waits until the GPU has done everything asked so far: a one-pixel read (WebGL's finish() does
  // not wait for Chromium's GPU process), so that frame times are the GPU's work too.
  sync() {
    const gl = this.gl;
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, this.pixel || (this.pixel = new Uint8Array(4)));
  }

  readTexture(fb, n) {
    const gl = this.gl;
    const h = rows(n);
    const all = new Float32Array(4 * TEX_W * h);
    gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
    gl.readPixels(0, 0, TEX_W, h, gl.RGBA, gl.FLOAT, all);
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    const out = new Float32Array(3 * n);
    for (let i = 0; i < n; i++) {
      out[3 * i] = all[4 * i];
      out[3 * i + 1] = all[4 * i + 1];
      out[3 * i + 2] = all[4 * i + 2];
    }
    return out;
  }

  // The morphed positions as the GPU computed them (3 floats per render vertex).
  positions() {
    return this.V ? this.readTexture(this.posFb[this.current], this.V) : new Float32Array(0);
  }

  // The GPU's normal of each render vertex (its welded vertex's).
  normals3() {
    if (!this.V) return new Float32Array(0);
    const w = this.weldInfo;
    const t = this.readTexture(this.nrmFb, w.topoCount);
    const out = new Float32Array(3 * this.V);
    for (let v = 0; v < this.V; v++) out.set(t.subarray(3 * w.topo[v], 3 * w.topo[v] + 3), 3 * v);
    return out;
  }

  release() {
    const gl = this.gl;
    for (const t of [this.base, this.sculpt, this.deltas, this.span, this.inc, this.tri, this.nrm, ...(this.pos || [])])
      if (t) gl.deleteTexture(t);
    for (const f of [this.nrmFb, ...(this.posFb || [])]) if (f) gl.deleteFramebuffer(f);
    for (const t of this.images || []) if (t) gl.deleteTexture(t);
    for (const pass of (this.clipPasses || new Map()).values()) pass.dispose();
    this.clipPasses = new Map();
    this.clipShown = [];
    for (const b of [this.topoBuf, this.indexBuf, this.maskBuf, this.uvBuf]) if (b) gl.deleteBuffer(b);
    this.images = [];
    this.submeshes = null;
    this.uvBuf = null;
    this.deltas = null;
    this.V = 0;
  }
}
