/*
 * vw_shaders.c — every GLSL source of deform-view: the three GPU passes, the lit mesh and the
 * 2D overlay, and the benchmark's tutorial program.
 *
 * The passes run with GL_RASTERIZER_DISCARD: each is a vertex shader over GL_POINTS whose
 * outputs are captured by transform feedback, so no fragment shader is attached. Inputs that
 * are indexed rather than streamed (target deltas, corner positions, adjacency) are buffer
 * textures read with texelFetch.
 *
 * DOES NOT call GL: it holds strings and the descriptors naming them. vw_gl.c compiles them;
 * vw_gpu.c, vw_render.c and bench_view.c bind, set uniforms and run.
 */
#include "vw_shaders.h"

#define VW__STR_(x) #x
#define VW__STR(x) VW__STR_(x)

_Static_assert(VW__SHADERS_MAX_ACTIVE % 4 == 0, "the morph uniforms pack 4 targets per vec4");

/* Pass 1: one point per render vertex. position = base + sculpt + Σ w·Δ over this pass's slice
 * of the active list; later slices read the previous slice's result as a_base, with a_offset a
 * constant 0. Deltas are target-major (texel slot·V + v); the half-float slots come first. */
static const char morph_vs[] =
    "#version 330 core\n"
    "layout(location = 0) in vec3 a_base;\n"
    "layout(location = 1) in vec3 a_offset;\n"
    "uniform samplerBuffer u_dhalf;\n"
    "uniform samplerBuffer u_dfull;\n"
    "uniform int u_nhalf;\n"
    "uniform int u_count;\n"
    "uniform ivec4 u_base[" VW__STR(VW__SHADERS_MORPH_VEC4S) "];\n"
    "uniform vec4 u_weight[" VW__STR(VW__SHADERS_MORPH_VEC4S) "];\n"
    "out vec3 v_position;\n"
    "void main() {\n"
    "  vec3 p = a_base + a_offset;\n"
    "  for (int i = 0; i < u_nhalf; i++)\n"
    "    p += u_weight[i >> 2][i & 3] * texelFetch(u_dhalf, u_base[i >> 2][i & 3] + gl_VertexID).xyz;\n"
    "  for (int i = u_nhalf; i < u_count; i++)\n"
    "    p += u_weight[i >> 2][i & 3] * texelFetch(u_dfull, u_base[i >> 2][i & 3] + gl_VertexID).xyz;\n"
    "  v_position = p;\n"
    "}\n";
static const char *const morph_out[] = {"v_position"};

/* Pass 2: one point per welded triangle; a_corners are the render vertices of its source render
 * triangle (as mesh_compute_normals reads them). Writes (unit normal, corner angle) for each
 * corner: texel 3f + c. A triangle whose cross product is zero writes zeros (contributes
 * nothing), like the reference. The cross product is scaled by its largest component before
 * normalising so small triangles do not underflow in float. */
static const char faces_vs[] =
    "#version 330 core\n"
    "layout(location = 0) in uvec3 a_corners;\n"
    /* R32F over the morphed positions: GL 3.3 has no RGB32F buffer textures (an RGB32F
     * variant on GL 4.x measured no faster on llvmpipe). */
    "uniform samplerBuffer u_positions;\n"
    "out vec4 f_corner0;\n"
    "out vec4 f_corner1;\n"
    "out vec4 f_corner2;\n"
    "vec3 fetch(uint v) {\n"
    "  int b = 3 * int(v);\n"
    "  return vec3(texelFetch(u_positions, b).r, texelFetch(u_positions, b + 1).r,\n"
    "              texelFetch(u_positions, b + 2).r);\n"
    "}\n"
    "float angle(vec3 p, vec3 a, vec3 b) {\n" /* atan2(|u x v|, u . v), as the reference */
    "  vec3 u = a - p, v = b - p;\n"
    "  vec3 c = cross(u, v);\n"
    "  float s = max(max(abs(c.x), abs(c.y)), abs(c.z));\n"
    "  float d = dot(u, v);\n"
    "  if (s == 0.0) return d < 0.0 ? 3.14159265358979 : 0.0;\n"
    "  return atan(s * length(c / s), d);\n"
    "}\n"
    "void main() {\n"
    "  vec3 q0 = fetch(a_corners.x), q1 = fetch(a_corners.y), q2 = fetch(a_corners.z);\n"
    "  vec3 n = cross(q1 - q0, q2 - q0);\n"
    "  float s = max(max(abs(n.x), abs(n.y)), abs(n.z));\n"
    "  if (!(s > 0.0)) {\n"
    "    f_corner0 = vec4(0.0); f_corner1 = vec4(0.0); f_corner2 = vec4(0.0);\n"
    "    return;\n"
    "  }\n"
    "  n = normalize(n / s);\n"
    "  f_corner0 = vec4(n, angle(q0, q1, q2));\n"
    "  f_corner1 = vec4(n, angle(q1, q2, q0));\n"
    "  f_corner2 = vec4(n, angle(q2, q0, q1));\n"
    "}\n";
static const char *const faces_out[] = {"f_corner0", "f_corner1", "f_corner2"};

/* Pass 3: one point per welded vertex: Σ angle·unit normal over the corners it owns (CSR:
 * u_first[v] .. u_first[v+1] index u_corners, whose entries are 3f + c), normalised; a vertex
 * with nothing to sum (isolated, or only degenerate triangles) gets (0, 0, 0). */
static const char normals_vs[] =
    "#version 330 core\n"
    "uniform usamplerBuffer u_first;\n"
    "uniform usamplerBuffer u_corners;\n"
    "uniform samplerBuffer u_faces;\n"
    "out vec4 v_normal;\n"
    "void main() {\n"
    "  int b = int(texelFetch(u_first, gl_VertexID).r);\n"
    "  int e = int(texelFetch(u_first, gl_VertexID + 1).r);\n"
    "  vec3 acc = vec3(0.0);\n"
    "  for (int i = b; i < e; i++) {\n"
    "    vec4 c = texelFetch(u_faces, int(texelFetch(u_corners, i).r));\n"
    "    acc += c.w * c.xyz;\n"
    "  }\n"
    "  float len = length(acc);\n"
    "  v_normal = len > 0.0 ? vec4(acc / len, 0.0) : vec4(0.0);\n"
    "}\n";
static const char *const normals_out[] = {"v_normal"};

const vw__gl_program_desc vw__shaders_passes[VW__SHADERS_PASS_COUNT] = {
    [VW__SHADERS_MORPH] = {.label = "morph pass", .vs = morph_vs, .feedback = morph_out, .feedback_count = 1},
    [VW__SHADERS_FACES] = {.label = "face normal pass", .vs = faces_vs, .feedback = faces_out, .feedback_count = 3},
    [VW__SHADERS_NORMALS] = {.label = "vertex normal pass", .vs = normals_vs, .feedback = normals_out,
                             .feedback_count = 1},
};

/* ---- drawing (vw_render.c) ----------------------------------------------------------------- */

/* The lit mesh: each vertex takes its welded vertex's normal from the normal pass. */
static const char render_mesh_vs[] =
    "#version 330 core\n"
    "layout(location = 0) in vec3 aPos;\n"
    "layout(location = 1) in float aMask;\n" /* the author's mask (vw_mask.c), 0 without one */
    "layout(location = 2) in vec2 aUV;\n"    /* the mesh's UVs (vw_texture.c), 0 without */
    "uniform mat4 uViewProj;\n"
    "uniform usamplerBuffer uRenderToTopo;\n"
    "uniform samplerBuffer uNormals;\n"
    "out vec3 vNormal;\n"
    "out vec3 vPos;\n"
    "out float vMask;\n"
    "out vec2 vUV;\n"
    "void main() {\n"
    "  int t = int(texelFetch(uRenderToTopo, gl_VertexID).r);\n"
    "  vNormal = texelFetch(uNormals, t).xyz;\n"
    "  vPos = aPos;\n"
    "  vUV = aUV;\n"
    "  vMask = clamp(aMask, 0.0, 1.0);\n"
    "  gl_Position = uViewProj * vec4(aPos, 1.0);\n"
    "}\n";

/* What the author's mask holds is drawn darker: the base colour times 1 − MASK_DARKEN × mask. */
#define MASK_DARKEN "0.6"
/* Key, fill and hemispheric light, linear colour (the mesh and the wireframe share it). */
#define SHADE_FN                                                                      \
  "vec3 shade(vec3 normal, vec3 pos, vec3 eye, vec3 base) {\n"                        \
  "  vec3 n = normalize(normal);\n"                                                   \
  "  vec3 v = normalize(eye - pos);\n"                                                \
  "  if (dot(n, v) < 0.0) n = -n;\n"                                                  \
  "  vec3 key = normalize(vec3(0.5, 0.8, 0.6)), fill = normalize(vec3(-0.7, 0.2, 0.4));\n" \
  "  float hemi = 0.5 + 0.5 * n.y;\n"                                                 \
  "  vec3 c = base * (0.18 + 0.12 * hemi);\n"                                         \
  "  c += base * 0.75 * max(dot(n, key), 0.0);\n"                                     \
  "  c += base * 0.25 * max(dot(n, fill), 0.0);\n"                                    \
  "  vec3 h = normalize(key + v);\n"                                                  \
  "  c += vec3(0.25) * pow(max(dot(n, h), 0.0), 48.0);\n"                             \
  "  c += vec3(0.08) * pow(1.0 - max(dot(n, v), 0.0), 3.0);\n"                        \
  "  return c;\n"                                                                     \
  "}\n"
/* The matcaps (issue 26), exactly the page's MATCAP_GLSL (viewer/web/render.js; the formula is in
 * viewer/README.md): k 0 clay, 1 red wax, 2 skin, of n the unit normal in view space (z toward
 * the eye). Not gamma-corrected: these are the colours written. */
#define MATCAP_FN                                                                                             \
  "vec3 matcap(int k, vec3 n) {\n"                                                                            \
  "  vec3 dark[3] = vec3[3](vec3(0.28, 0.24, 0.22), vec3(0.22, 0.02, 0.02), vec3(0.36, 0.18, 0.14));\n"      \
  "  vec3 lite[3] = vec3[3](vec3(0.80, 0.74, 0.68), vec3(0.86, 0.18, 0.13), vec3(0.96, 0.75, 0.63));\n"      \
  "  vec3 rimc[3] = vec3[3](vec3(0.10, 0.10, 0.12), vec3(0.40, 0.10, 0.06), vec3(0.45, 0.20, 0.15));\n"      \
  "  float spec[3] = float[3](0.06, 0.45, 0.12);\n"                                                          \
  "  float shin[3] = float[3](8.0, 40.0, 20.0);\n"                                                           \
  "  vec3 l = normalize(vec3(-0.4, 0.6, 0.7));\n"                                                            \
  "  vec3 h = normalize(l + vec3(0.0, 0.0, 1.0));\n"                                                         \
  "  float d = 0.5 + 0.5 * dot(n, l);\n"                                                                     \
  "  float r = pow(1.0 - max(n.z, 0.0), 3.0);\n"                                                             \
  "  float s = pow(max(dot(n, h), 0.0), shin[k]);\n"                                                         \
  "  return mix(dark[k], lite[k], d) + rimc[k] * r + vec3(spec[k] * s);\n"                                   \
  "}\n"                                                                                                      \
  /* uShade 1 + k: matcap k of the world normal turned into view space (facing the eye, as shade's). */       \
  "uniform int uShade;\n"                                                                                    \
  "uniform mat3 uView;\n"                                                                                    \
  "vec3 matcap_of(vec3 normal, vec3 pos, vec3 eye) {\n"                                                      \
  "  vec3 n = normalize(normal);\n"                                                                          \
  "  if (dot(n, eye - pos) < 0.0) n = -n;\n"                                                                 \
  "  return clamp(matcap(uShade - 1, normalize(uView * n)), 0.0, 1.0);\n"                                    \
  "}\n"
/* A submesh's base colour: its material's (uColor: linear) times its image (sRGB texture, so
 * sampled linear) at (u, 1 - v), row 0 of the image being its top (vw_texture.c). While texture
 * clips show (uClips > 0, vw_texshow.c), their rebuilt frames, summed (a crossfade) and clamped,
 * replace both: a clip's frames are the whole albedo (docs/protocol.md §18). They are RGBA8
 * holding the frames' bytes, so they are linearised with the 2.2 the output applies: --unlit
 * shows a clip's rebuilt bytes exactly. */
#define ALBEDO_FN                                                                     \
  "uniform sampler2D uTex;\n"                                                         \
  "uniform int uTextured;\n"                                                          \
  "uniform sampler2D uClip0, uClip1, uClip2, uClip3;\n"                               \
  "uniform int uClips;\n"                                                             \
  "vec3 albedo(vec2 uv) {\n"                                                          \
  "  vec2 st = vec2(uv.x, 1.0 - uv.y);\n"                                             \
  "  if (uClips > 0) {\n"                                                             \
  "    vec3 s = texture(uClip0, st).rgb;\n"                                           \
  "    if (uClips > 1) s += texture(uClip1, st).rgb;\n"                               \
  "    if (uClips > 2) s += texture(uClip2, st).rgb;\n"                               \
  "    if (uClips > 3) s += texture(uClip3, st).rgb;\n"                               \
  "    return pow(clamp(s, 0.0, 1.0), vec3(2.2));\n"                                  \
  "  }\n"                                                                             \
  "  vec3 c = uColor.rgb;\n"                                                          \
  "  if (uTextured != 0) c *= texture(uTex, st).rgb;\n"                               \
  "  return c;\n"                                                                     \
  "}\n"

static const char render_mesh_fs[] =
    "#version 330 core\n"
    "in vec3 vNormal;\n"
    "in vec3 vPos;\n"
    "in float vMask;\n"
    "in vec2 vUV;\n"
    "uniform vec3 uEye;\n"
    "uniform vec4 uColor;\n"
    "uniform int uFlat;\n"
    "uniform int uUnlit;\n"
    "out vec4 fragColor;\n"
    SHADE_FN
    ALBEDO_FN
    MATCAP_FN
    "void main() {\n"
    "  if (uFlat != 0) { fragColor = uColor; return; }\n"
    "  vec3 base = albedo(vUV) * (1.0 - " MASK_DARKEN " * vMask);\n"
    "  if (uUnlit != 0) { fragColor = vec4(pow(base, vec3(1.0 / 2.2)), 1.0); return; }\n"
    "  if (uShade > 0) { fragColor = vec4(matcap_of(vNormal, vPos, uEye) * (1.0 - " MASK_DARKEN " * vMask), 1.0); return; }\n"
    "  fragColor = vec4(pow(shade(vNormal, vPos, uEye, base), vec3(1.0 / 2.2)), 1.0);\n"
    "}\n";

/* The wireframe, drawn in the same pass as the surface: each triangle carries barycentric
 * coordinates (interpolated in screen space) and how many pixels its shortest altitude spans
 * on screen. A fragment within about a pixel of an edge takes the line colour, faded out where
 * triangles are under a few pixels tall: at the default zoom a dense mesh would otherwise be
 * solid lines (a black blob), where now the lines show only where they can be told apart. */
static const char render_wire_gs[] =
    "#version 330 core\n"
    "layout(triangles) in;\n"
    "layout(triangle_strip, max_vertices = 3) out;\n"
    "in vec3 vNormal[];\n"
    "in vec3 vPos[];\n"
    "in float vMask[];\n"
    "in vec2 vUV[];\n"
    "uniform vec2 uViewport;\n"
    "out vec3 gNormal;\n"
    "out vec3 gPos;\n"
    "out float gMask;\n"
    "out vec2 gUV;\n"
    "noperspective out vec3 gBary;\n"
    "flat out float gFade;\n"
    "void main() {\n"
    "  vec2 s[3];\n"
    "  for (int i = 0; i < 3; i++) s[i] = gl_in[i].gl_Position.xy / max(gl_in[i].gl_Position.w, 1e-6) * 0.5 * uViewport;\n"
    "  vec2 e0 = s[1] - s[0], e1 = s[2] - s[1], e2 = s[0] - s[2];\n"
    "  float area2 = abs(e0.x * e2.y - e0.y * e2.x);\n"
    "  float longest = max(max(length(e0), length(e1)), length(e2));\n"
    "  float altitude = longest > 0.0 ? area2 / longest : 0.0;\n"
    "  float fade = smoothstep(2.5, 8.0, altitude);\n"
    "  for (int i = 0; i < 3; i++) {\n"
    "    gNormal = vNormal[i];\n"
    "    gPos = vPos[i];\n"
    "    gMask = vMask[i];\n"
    "    gUV = vUV[i];\n"
    "    gBary = vec3(i == 0, i == 1, i == 2);\n"
    "    gFade = fade;\n"
    "    gl_Position = gl_in[i].gl_Position;\n"
    "    EmitVertex();\n"
    "  }\n"
    "  EndPrimitive();\n"
    "}\n";

static const char render_wire_fs[] =
    "#version 330 core\n"
    "in vec3 gNormal;\n"
    "in vec3 gPos;\n"
    "in float gMask;\n"
    "in vec2 gUV;\n"
    "noperspective in vec3 gBary;\n"
    "flat in float gFade;\n"
    "uniform vec3 uEye;\n"
    "uniform vec4 uColor;\n"
    "uniform vec4 uLine;\n"
    "out vec4 fragColor;\n"
    SHADE_FN
    ALBEDO_FN
    MATCAP_FN
    "void main() {\n"
    "  vec3 c = shade(gNormal, gPos, uEye, albedo(gUV) * (1.0 - " MASK_DARKEN " * gMask));\n"
    /* a matcap's colour is already what is written: linearised here for the gamma below */
    "  if (uShade > 0) c = pow(matcap_of(gNormal, gPos, uEye) * (1.0 - " MASK_DARKEN " * gMask), vec3(2.2));\n"
    "  vec3 px = gBary / max(fwidth(gBary), vec3(1e-6));\n" /* distance to each edge in pixels */
    "  float edge = 1.0 - smoothstep(0.4, 1.4, min(min(px.x, px.y), px.z));\n"
    "  c = mix(c, uLine.rgb, edge * gFade * uLine.a);\n"
    "  fragColor = vec4(pow(c, vec3(1.0 / 2.2)), 1.0);\n"
    "}\n";

/* The 2D overlay: coloured triangles in pixels, y down. */
static const char render_ui_vs[] =
    "#version 330 core\n"
    "layout(location = 0) in vec2 aPos;\n"
    "layout(location = 1) in vec4 aColor;\n"
    "uniform vec2 uSize;\n"
    "out vec4 vColor;\n"
    "void main() {\n"
    "  vColor = aColor;\n"
    "  gl_Position = vec4(aPos.x / uSize.x * 2.0 - 1.0, 1.0 - aPos.y / uSize.y * 2.0, 0.0, 1.0);\n"
    "}\n";

static const char render_ui_fs[] =
    "#version 330 core\n"
    "in vec4 vColor;\n"
    "out vec4 fragColor;\n"
    "void main() { fragColor = vColor; }\n";

const vw__gl_program_desc vw__shaders_mesh = {.label = "mesh", .vs = render_mesh_vs, .fs = render_mesh_fs};
const vw__gl_program_desc vw__shaders_wire = {
    .label = "wireframe mesh", .vs = render_mesh_vs, .gs = render_wire_gs, .fs = render_wire_fs};
const vw__gl_program_desc vw__shaders_overlay = {.label = "overlay", .vs = render_ui_vs, .fs = render_ui_fs};

/* ---- the benchmark's tutorial path (bench_view.c) ------------------------------------------ */

/* What tutorials draw with: positions and normals morphed on the CPU and uploaded every frame,
 * one directional light. Only deform-view-bench uses it, as the baseline it measures against. */
static const char tutorial_vs[] =
    "#version 330 core\n"
    "layout(location = 0) in vec3 aPos;\n"
    "layout(location = 1) in vec3 aNormal;\n"
    "uniform mat4 uViewProj;\n"
    "out vec3 vNormal;\n"
    "void main() { vNormal = aNormal; gl_Position = uViewProj * vec4(aPos, 1.0); }\n";

static const char tutorial_fs[] =
    "#version 330 core\n"
    "in vec3 vNormal;\n"
    "out vec4 fragColor;\n"
    "void main() { float l = max(dot(normalize(vNormal), normalize(vec3(0.5, 0.8, 0.6))), 0.0);\n"
    "  fragColor = vec4(vec3(0.2 + 0.7 * l), 1.0); }\n";

const vw__gl_program_desc vw__shaders_tutorial = {.label = "tutorial", .vs = tutorial_vs, .fs = tutorial_fs};

/* ---- animated texture clips (vw_texclip.c) ------------------------------------------------- */

/* One full-screen triangle over the clip's W × H target: each fragment is one texel, rebuilt as
 * mean · u_mean + Σ a_k · component_k + b_r (docs/protocol.md §18; a_k = w_k · scale_k and
 * b_r = Σ w_k · offset_k over window r, folded on the CPU per frame). The window is the last
 * whose rectangle holds the texel; texelFetch reads the component's tile without filtering, so
 * a tile never bleeds into its neighbour. shared/mesh_texpca.c's mesh_texclip_texel is the
 * reference. */
static const char texclip_vs[] =
    "#version 330 core\n"
    "void main() { vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));\n"
    "  gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0); }\n";

static const char texclip_fs[] =
    "#version 330 core\n"
    "uniform sampler2DArray uTex;\n"
    "uniform int uWindows;\n"
    "uniform ivec4 uRect[16];\n"
    "uniform ivec2 uRange[16];\n"
    "uniform ivec3 uTile[64];\n"
    "uniform float uA[64];\n"
    "uniform float uB[16];\n"
    "uniform float uMean;\n"
    "out vec4 fragColor;\n"
    "void main() {\n"
    "  ivec2 p = ivec2(gl_FragCoord.xy);\n"
    "  int r = 0;\n"
    "  for (int i = 1; i < uWindows; i++)\n"
    "    if (all(greaterThanEqual(p, uRect[i].xy)) && all(lessThan(p, uRect[i].xy + uRect[i].zw))) r = i;\n"
    "  vec3 c = uMean * texelFetch(uTex, ivec3(p, 0), 0).rgb + vec3(uB[r]);\n"
    "  ivec2 local = p - uRect[r].xy;\n"
    "  for (int k = uRange[r].x; k < uRange[r].x + uRange[r].y; k++)\n"
    "    c += uA[k] * texelFetch(uTex, ivec3(uTile[k].yz + local, uTile[k].x), 0).rgb;\n"
    "  fragColor = vec4(clamp(c, 0.0, 1.0), 1.0);\n"
    "}\n";

const vw__gl_program_desc vw__shaders_texclip = {.label = "texture clip", .vs = texclip_vs, .fs = texclip_fs};
