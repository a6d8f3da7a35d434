// gpupick.js — picking on the GPU: what lies under one canvas pixel, read back from a render
// target instead of a ray cast over every triangle on the CPU (camera.js pick(), which the tests
// keep as the oracle).
//
// Two passes, each into a 1×1 target through a pick matrix (the pixel's window of the frustum
// blown up to the whole viewport: the target's one sample is the ray through the pixel), with
// RGBA32F colour attachments (EXT_color_buffer_float, which the renderer already needs) and a
// depth buffer:
//   1  the whole mesh, indexed as the frame draws it (each vertex shaded about once): the surface
//      point in the mesh's coordinates, the triangle's provoking vertex (its last corner: GLSL
//      ES 3.00 has no gl_PrimitiveID, but a flat output comes from that corner) and the
//      triangle's unit normal (from the point's screen derivatives; turned towards the eye
//      here: the brush circle's plane);
//   2  only the triangles whose last corner is that vertex (two or three: a table made at load),
//      drawn without an index buffer, each with its own index: which of them it is and the
//      point's barycentric coordinates in it (perspective-correct, so the same (1 − u − v, u, v)
//      as the ray cast's), from which the nearest corner is the vertex.
// Floats hold vertex and triangle indices exactly below 2^24 (16.7 million). Nothing is drawn to
// the canvas, and 48 bytes come back.
//
// DOES NOT morph (render.js) or decide when to pick (main.js).

const TEX_W = 1024; // as render.js

const VS_HIT = `#version 300 es
precision highp float;
precision highp int;
uniform sampler2D u_pos;
uniform mat4 u_mvp;
out vec3 v_world;
flat out float v_vertex;
void main() {
  int v = gl_VertexID; // the index's value in an indexed draw
  vec3 p = texelFetch(u_pos, ivec2(v % ${TEX_W}, v / ${TEX_W}), 0).xyz;
  v_vertex = float(v) + 1.0;
  v_world = p;
  gl_Position = u_mvp * vec4(p, 1.0);
}`;

const FS_HIT = `#version 300 es
precision highp float;
in vec3 v_world;
flat in float v_vertex;
layout(location = 0) out vec4 o_hit;
layout(location = 1) out vec4 o_normal;
void main() {
  o_hit = vec4(v_world, v_vertex);
  vec3 n = cross(dFdx(v_world), dFdy(v_world));
  o_normal = vec4(length(n) > 0.0 ? normalize(n) : vec3(0.0), 1.0);
}`;

const VS_TRI = `#version 300 es
precision highp float;
precision highp int;
uniform sampler2D u_pos;
uniform mat4 u_mvp;
in uint a_vertex;
in float a_tri;
out vec3 v_bary;
flat out float v_tri;
void main() {
  vec3 p = texelFetch(u_pos, ivec2(int(a_vertex % ${TEX_W}u), int(a_vertex / ${TEX_W}u)), 0).xyz;
  int c = gl_VertexID % 3;
  v_bary = vec3(c == 0 ? 1.0 : 0.0, c == 1 ? 1.0 : 0.0, c == 2 ? 1.0 : 0.0);
  v_tri = a_tri + 1.0;
  gl_Position = u_mvp * vec4(p, 1.0);
}`;

const FS_TRI = `#version 300 es
precision highp float;
in vec3 v_bary;
flat in float v_tri;
layout(location = 0) out vec4 o_bary;
void main() { o_bary = vec4(v_bary, v_tri); }`;

const MAX_CANDIDATES = 64; // triangles sharing a last corner drawn by pass 2 (more: the first 64)

export class GpuPick {
  constructor(renderer, compile) {
    this.r = renderer;
    const gl = (this.gl = renderer.gl);
    this.hitProg = compile(gl, VS_HIT, FS_HIT);
    this.triProg = compile(gl, VS_TRI, FS_TRI);
    const colour = () => {
      const t = gl.createTexture();
      gl.bindTexture(gl.TEXTURE_2D, t);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
      gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA32F, 1, 1, 0, gl.RGBA, gl.FLOAT, null);
      return t;
    };
    this.tex = [colour(), colour(), colour()];
    this.depth = gl.createRenderbuffer();
    gl.bindRenderbuffer(gl.RENDERBUFFER, this.depth);
    gl.renderbufferStorage(gl.RENDERBUFFER, gl.DEPTH_COMPONENT24, 1, 1);
    const target = (texs) => {
      const fb = gl.createFramebuffer();
      gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
      texs.forEach((t, k) => gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0 + k, gl.TEXTURE_2D, t, 0));
      gl.framebufferRenderbuffer(gl.FRAMEBUFFER, gl.DEPTH_ATTACHMENT, gl.RENDERBUFFER, this.depth);
      gl.drawBuffers(texs.map((t, k) => gl.COLOR_ATTACHMENT0 + k));
      if (gl.checkFramebufferStatus(gl.FRAMEBUFFER) !== gl.FRAMEBUFFER_COMPLETE) throw new Error('pick target incomplete');
      return fb;
    };
    this.hitFb = target([this.tex[0], this.tex[1]]);
    this.triFb = target([this.tex[2]]);
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    this.hitVao = gl.createVertexArray();
    this.triVao = gl.createVertexArray();
    gl.bindVertexArray(this.triVao);
    this.triVerts = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, this.triVerts);
    gl.bufferData(gl.ARRAY_BUFFER, 4 * 3 * MAX_CANDIDATES, gl.DYNAMIC_DRAW);
    const lv = gl.getAttribLocation(this.triProg.p, 'a_vertex');
    gl.enableVertexAttribArray(lv);
    gl.vertexAttribIPointer(lv, 1, gl.UNSIGNED_INT, 0, 0);
    this.triIds = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, this.triIds);
    gl.bufferData(gl.ARRAY_BUFFER, 4 * 3 * MAX_CANDIDATES, gl.DYNAMIC_DRAW);
    const lt = gl.getAttribLocation(this.triProg.p, 'a_tri');
    gl.enableVertexAttribArray(lt);
    gl.vertexAttribPointer(lt, 1, gl.FLOAT, false, 0, 0);
    gl.bindVertexArray(null);
    gl.bindBuffer(gl.ARRAY_BUFFER, null);
    this.triangles = null;
  }

  // A new snapshot (after renderer.load): pass 1 draws with the renderer's index buffer; pass 2's
  // table lists, for each vertex, the triangles whose last corner it is.
  load(triangles) {
    const gl = this.gl;
    this.triangles = triangles;
    gl.bindVertexArray(this.hitVao);
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, this.r.indexBuf);
    gl.bindVertexArray(null);
    const V = this.r.V, T = triangles.length / 3;
    const first = new Uint32Array(V + 1);
    for (let t = 0; t < T; t++) first[triangles[3 * t + 2] + 1]++;
    for (let v = 0; v < V; v++) first[v + 1] += first[v];
    const fill = first.slice(0, V);
    const list = new Uint32Array(T);
    for (let t = 0; t < T; t++) list[fill[triangles[3 * t + 2]]++] = t;
    this.lastFirst = first;
    this.lastList = list;
  }

  // Draws with the pick matrix into a 1×1 target and reads its attachments back.
  pass(fb, prog, vao, draw, reads) {
    const gl = this.gl;
    gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
    gl.viewport(0, 0, 1, 1);
    for (let k = 0; k < reads.length; k++) gl.clearBufferfv(gl.COLOR, k, [0, 0, 0, 0]);
    gl.clearBufferfv(gl.DEPTH, 0, [1]);
    gl.enable(gl.DEPTH_TEST);
    gl.disable(gl.BLEND);
    gl.useProgram(prog.p);
    gl.activeTexture(gl.TEXTURE0);
    gl.bindTexture(gl.TEXTURE_2D, this.r.pos[this.r.current]);
    gl.uniform1i(prog.u.u_pos, 0);
    gl.uniformMatrix4fv(prog.u.u_mvp, false, this.pm);
    gl.bindVertexArray(vao);
    draw();
    gl.bindVertexArray(null);
    reads.forEach((out, k) => {
      gl.readBuffer(gl.COLOR_ATTACHMENT0 + k);
      gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, out);
    });
    gl.readBuffer(gl.COLOR_ATTACHMENT0);
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
  }

  // The surface under canvas pixel (px, py) (continuous pixel coordinates, as camera.ray takes
  // them) with the camera as updated: {triangle, vertex, point, t, normal, bary} (camera.js
  // pick()'s answer and more), or null where the pixel shows no surface.
  at(camera, px, py) {
    const r = this.r;
    if (!r.V || !this.triangles) return null;
    const gl = this.gl;
    const W = camera.width, H = camera.height;
    // NDC of the pixel, as camera.unproject reads it, and the matrix that maps its one-pixel
    // window onto the whole 1×1 viewport.
    const cx = (px / W) * 2 - 1, cy = 1 - (py / H) * 2;
    const sx = W / 2, sy = H / 2;
    const m = camera.mvp, pm = (this.pm = new Float32Array(16));
    for (let c = 0; c < 4; c++) {
      pm[4 * c] = (m[4 * c] - cx * m[4 * c + 3]) * sx;
      pm[4 * c + 1] = (m[4 * c + 1] - cy * m[4 * c + 3]) * sy;
      pm[4 * c + 2] = m[4 * c + 2];
      pm[4 * c + 3] = m[4 * c + 3];
    }
    const hit = new Float32Array(4), nrm = new Float32Array(4), bary = new Float32Array(4);
    this.pass(this.hitFb, this.hitProg, this.hitVao, () => gl.drawElements(gl.TRIANGLES, this.triangles.length, gl.UNSIGNED_INT, 0), [hit, nrm]);
    if (!(hit[3] >= 1)) return null;
    const last = Math.round(hit[3]) - 1;
    const f = this.lastFirst, n = Math.min(f[last + 1] - f[last], MAX_CANDIDATES);
    const verts = new Uint32Array(3 * n), ids = new Float32Array(3 * n);
    for (let i = 0; i < n; i++) {
      const t = this.lastList[f[last] + i];
      verts.set(this.triangles.subarray(3 * t, 3 * t + 3), 3 * i);
      ids.fill(t, 3 * i, 3 * i + 3);
    }
    gl.bindBuffer(gl.ARRAY_BUFFER, this.triVerts);
    gl.bufferSubData(gl.ARRAY_BUFFER, 0, verts);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.triIds);
    gl.bufferSubData(gl.ARRAY_BUFFER, 0, ids);
    gl.bindBuffer(gl.ARRAY_BUFFER, null);
    this.pass(this.triFb, this.triProg, this.triVao, () => gl.drawArrays(gl.TRIANGLES, 0, 3 * n), [bary]);
    // Pass 2 draws the same triangles with the same matrix, so it covers the same sample; should
    // rounding say otherwise, the first candidate and its last corner stand.
    const triangle = bary[3] >= 1 ? Math.round(bary[3]) - 1 : this.lastList[f[last]];
    const w = bary[3] >= 1 ? [bary[0], bary[1], bary[2]] : [0, 0, 1];
    const k = w.indexOf(Math.max(...w));
    const point = [hit[0], hit[1], hit[2]];
    const ray = camera.ray(px, py);
    const t = Math.hypot(point[0] - ray.origin[0], point[1] - ray.origin[1], point[2] - ray.origin[2]);
    let normal = [nrm[0], nrm[1], nrm[2]];
    if (normal[0] * ray.dir[0] + normal[1] * ray.dir[1] + normal[2] * ray.dir[2] > 0) normal = normal.map((x) => -x);
    return { t, triangle, vertex: this.triangles[3 * triangle + k], point, bary: w, normal };
  }
}
