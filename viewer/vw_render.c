/*
 * vw_render.c — drawing the morphed mesh and the 2D overlay (see vw_render.h).
 *
 * The mesh is lit with a key light, a fill light and a hemispheric ambient term, which shows
 * form without textures; each vertex takes the normal of its welded vertex from the GPU normal
 * pass (a buffer texture lookup through the render→welded map), so UV seams do not crease.
 * The wireframe is drawn in the same pass as the surface by a program with a geometry shader
 * (vw_shaders.c): lines within a pixel of each edge, faded where triangles are under a few
 * pixels on screen, so a dense mesh at the default zoom stays readable instead of turning into
 * solid lines, and one pass costs less than a fill plus a GL_LINE pass on a software rasteriser.
 * Materials (vw_texture.c) make one draw per submesh: its base colour times its image, lit the
 * same way; a mesh without them is one draw in the viewer's grey.
 */
#include "vw_render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stb_easy_font is header-only with static functions; not all of them are used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

#include "vw_gl.h"
#include "vw_shaders.h"

typedef struct ui_vertex {
  float x, y;
  float rgba[4];
} ui_vertex;

/* The uniforms of a program that draws the lit mesh (-1 where it has none). */
typedef struct mesh_uniforms {
  GLint viewproj, eye, color, flat, r2t, normals, line, viewport, tex, textured, unlit, shade, view;
  GLint clip[PROTO_TEXWEIGHTS_MAX_CLIPS], clips;
} mesh_uniforms;

static void find_uniforms(GLuint prog, mesh_uniforms *u) {
  u->viewproj = glGetUniformLocation(prog, "uViewProj");
  u->eye = glGetUniformLocation(prog, "uEye");
  u->color = glGetUniformLocation(prog, "uColor");
  u->flat = glGetUniformLocation(prog, "uFlat");
  u->r2t = glGetUniformLocation(prog, "uRenderToTopo");
  u->normals = glGetUniformLocation(prog, "uNormals");
  u->line = glGetUniformLocation(prog, "uLine");
  u->viewport = glGetUniformLocation(prog, "uViewport");
  u->tex = glGetUniformLocation(prog, "uTex");
  u->textured = glGetUniformLocation(prog, "uTextured");
  u->unlit = glGetUniformLocation(prog, "uUnlit");
  u->shade = glGetUniformLocation(prog, "uShade");
  u->view = glGetUniformLocation(prog, "uView");
  for (int i = 0; i < PROTO_TEXWEIGHTS_MAX_CLIPS; i++) {
    char name[16];
    snprintf(name, sizeof(name), "uClip%d", i);
    u->clip[i] = glGetUniformLocation(prog, name);
  }
  u->clips = glGetUniformLocation(prog, "uClips");
}

struct vw_render {
  vw__gl_program mesh_prog, wire_prog, ui_prog;
  mesh_uniforms mesh_u, wire_u;
  GLint u_size;
  GLuint mesh_vao;
  GLuint mask_buffer;      /* one float per render vertex (vw_mask.c), 0: no mask */
  const vw_textures *textures; /* UVs, images, submesh ranges (vw_texture.c), NULL: none */
  int unlit;               /* base colour × texture without the lights (--unlit) */
  int shading;             /* VW_SHADING_*: lit, or a matcap (--shading) */
  const unsigned int *clips; /* the texture clips' rebuilt frames shown (vw_texshow.c) */
  uint32_t clip_count;
  GLuint ui_vao;
  vw__gl_buffer ui_vbo;    /* re-specified with the queued 2D vertices at each flush */
  ui_vertex *ui;
  size_t ui_len, ui_cap;
};

int vw_render_create(vw_render **out, char *err, size_t errlen) {
  *out = NULL;
  vw_render *r = calloc(1, sizeof(*r));
  if (!r) {
    snprintf(err, errlen, "render: %s", vw_strerror(VW_ENOMEM));
    return VW_ENOMEM;
  }
  int rc;
  const vw__gl_buffer_desc ui_desc = {.usage = GL_STREAM_DRAW, .label = "overlay vertices"};
  if ((rc = vw__gl_program_make(&r->mesh_prog, &vw__shaders_mesh, err, errlen)) != 0 ||
      (rc = vw__gl_program_make(&r->wire_prog, &vw__shaders_wire, err, errlen)) != 0 ||
      (rc = vw__gl_program_make(&r->ui_prog, &vw__shaders_overlay, err, errlen)) != 0 ||
      (rc = vw__gl_buffer_make(&r->ui_vbo, &ui_desc, err, errlen)) != 0) {
    vw_render_destroy(r);
    return rc;
  }
  find_uniforms(r->mesh_prog.id, &r->mesh_u);
  find_uniforms(r->wire_prog.id, &r->wire_u);
  r->u_size = glGetUniformLocation(r->ui_prog.id, "uSize");
  glGenVertexArrays(1, &r->mesh_vao);
  glGenVertexArrays(1, &r->ui_vao);
  glBindVertexArray(r->ui_vao);
  glBindBuffer(GL_ARRAY_BUFFER, r->ui_vbo.id);
  glEnableVertexAttribArray(0);
  glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, sizeof(ui_vertex), (void *)0);
  glEnableVertexAttribArray(1);
  glVertexAttribPointer(1, 4, GL_FLOAT, GL_FALSE, sizeof(ui_vertex), (void *)(2 * sizeof(float)));
  glBindVertexArray(0);
  if ((rc = vw__gl_check("creating the renderer's vertex arrays", err, errlen)) != 0) {
    vw_render_destroy(r);
    return rc;
  }
  *out = r;
  return 0;
}

void vw_render_destroy(vw_render *r) {
  if (!r) return;
  vw__gl_program_free(&r->mesh_prog);
  vw__gl_program_free(&r->wire_prog);
  vw__gl_program_free(&r->ui_prog);
  if (r->mesh_vao) glDeleteVertexArrays(1, &r->mesh_vao);
  if (r->ui_vao) glDeleteVertexArrays(1, &r->ui_vao);
  vw__gl_buffer_free(&r->ui_vbo);
  free(r->ui);
  free(r);
}

/* The mesh VAO points at the handle's buffers, set again each frame: a new snapshot brings new
 * buffers, which may reuse the old GL names. */
static void bind_mesh(vw_render *r, vw_gpu *g) {
  glBindVertexArray(r->mesh_vao);
  glBindBuffer(GL_ARRAY_BUFFER, vw_gpu_positions_buffer(g));
  glEnableVertexAttribArray(0);
  glVertexAttribPointer(0, 3, GL_FLOAT, GL_FALSE, 3 * sizeof(float), (void *)0);
  glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, vw_gpu_index_buffer(g));
  if (r->mask_buffer) {
    glBindBuffer(GL_ARRAY_BUFFER, r->mask_buffer);
    glEnableVertexAttribArray(1);
    glVertexAttribPointer(1, 1, GL_FLOAT, GL_FALSE, sizeof(float), (void *)0);
  } else {
    glDisableVertexAttribArray(1);
    glVertexAttrib1f(1, 0.0f); /* nothing held: the plain colour */
  }
  if (r->textures && r->textures->uv_buffer) {
    glBindBuffer(GL_ARRAY_BUFFER, r->textures->uv_buffer);
    glEnableVertexAttribArray(2);
    glVertexAttribPointer(2, 2, GL_FLOAT, GL_FALSE, 2 * sizeof(float), (void *)0);
  } else {
    glDisableVertexAttribArray(2);
    glVertexAttrib2f(2, 0.0f, 0.0f);
  }
}

void vw_render_set_textures(vw_render *r, const vw_textures *t) { r->textures = t; }
void vw_render_set_unlit(vw_render *r, int unlit) { r->unlit = unlit; }
void vw_render_set_shading(vw_render *r, int shading) { r->shading = shading; }

static const char *const shading_names[VW_SHADING_COUNT] = {"lit", "clay", "wax", "skin"};

const char *vw_render_shading_name(int shading) {
  return shading >= 0 && shading < VW_SHADING_COUNT ? shading_names[shading] : NULL;
}

int vw_render_shading_parse(const char *name) {
  for (int k = 0; k < VW_SHADING_COUNT; k++)
    if (strcmp(name, shading_names[k]) == 0) return k;
  return -1;
}

void vw_render_set_texclips(vw_render *r, const unsigned int *textures, uint32_t count) {
  r->clips = textures;
  r->clip_count = count < PROTO_TEXWEIGHTS_MAX_CLIPS ? count : PROTO_TEXWEIGHTS_MAX_CLIPS;
}

/* Binds the texture clips shown to units 3 ..; their samplers always name those units (a sampler
 * left on unit 0, a buffer texture, would clash with it). */
static void bind_clips(const vw_render *r, const mesh_uniforms *u) {
  for (int i = 0; i < PROTO_TEXWEIGHTS_MAX_CLIPS; i++) {
    glUniform1i(u->clip[i], 3 + i);
    glActiveTexture((GLenum)(GL_TEXTURE3 + i));
    glBindTexture(GL_TEXTURE_2D, (uint32_t)i < r->clip_count ? r->clips[i] : 0);
  }
}

/* The untextured mesh's colour, and each submesh's: its base colour (else that grey) times its
 * image (else white). One draw per submesh; a mesh without materials is one draw. */
static const float grey[4] = {0.78f, 0.72f, 0.66f, 1.0f};

static void draw_materials(const vw_render *r, const mesh_uniforms *u, uint32_t triangle_count) {
  const vw_textures *t = r->textures;
  glUniform1i(u->tex, 2);
  glUniform1i(u->unlit, r->unlit);
  bind_clips(r, u);
  glActiveTexture(GL_TEXTURE2);
  /* A clip shows on the textured submeshes (their UVs map into an image), or on the whole mesh
   * when it has UVs but no materials. */
  if (!t || t->draw_count == 0) {
    glUniform4fv(u->color, 1, grey);
    glUniform1i(u->textured, 0);
    glUniform1i(u->clips, t && t->uv_buffer ? (GLint)r->clip_count : 0);
    glDrawElements(GL_TRIANGLES, (GLsizei)(3 * triangle_count), GL_UNSIGNED_INT, (void *)0);
    return;
  }
  for (uint32_t i = 0; i < t->draw_count; i++) {
    const vw_material *d = &t->draws[i];
    if (d->first_triangle >= triangle_count || d->triangle_count == 0) continue;
    uint32_t n = d->triangle_count < triangle_count - d->first_triangle ? d->triangle_count : triangle_count - d->first_triangle;
    glUniform4fv(u->color, 1, d->has_color ? d->color : grey);
    glUniform1i(u->textured, d->texture != 0);
    glUniform1i(u->clips, d->texture ? (GLint)r->clip_count : 0);
    glBindTexture(GL_TEXTURE_2D, d->texture);
    glDrawElements(GL_TRIANGLES, (GLsizei)(3 * n), GL_UNSIGNED_INT, (void *)(sizeof(uint32_t) * 3 * (size_t)d->first_triangle));
  }
  glBindTexture(GL_TEXTURE_2D, 0);
}

void vw_render_set_mask(vw_render *r, unsigned int buffer) { r->mask_buffer = buffer; }

void vw_render_scene(vw_render *r, vw_gpu *g, const vw_camera *cam, int width, int height, int wireframe) {
  glViewport(0, 0, width, height);
  glClearColor(0.16f, 0.17f, 0.19f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
  if (!g || vw_gpu_triangle_count(g) == 0) return;
  mat4 view, proj, vp;
  vw_camera_matrices(cam, width, height, view, proj);
  glm_mat4_mul(proj, view, vp);
  vec3 eye;
  vw_camera_eye(cam, eye);
  glEnable(GL_DEPTH_TEST);
  const mesh_uniforms *u = wireframe ? &r->wire_u : &r->mesh_u;
  glUseProgram(wireframe ? r->wire_prog.id : r->mesh_prog.id);
  glUniformMatrix4fv(u->viewproj, 1, GL_FALSE, (const float *)vp);
  glUniform3fv(u->eye, 1, eye);
  glUniform1i(u->r2t, 0);
  glUniform1i(u->normals, 1);
  glUniform1i(u->flat, 0); /* (-1 locations are ignored by GL) */
  mat3 view3;
  glm_mat4_pick3(view, view3);
  glUniformMatrix3fv(u->view, 1, GL_FALSE, (const float *)view3);
  glUniform1i(u->shade, r->shading);
  glUniform4f(u->line, 0.08f, 0.09f, 0.12f, 0.85f);
  glUniform2f(u->viewport, (float)width, (float)height);
  glActiveTexture(GL_TEXTURE0);
  glBindTexture(GL_TEXTURE_BUFFER, vw_gpu_render_to_topo_texture(g));
  glActiveTexture(GL_TEXTURE1);
  glBindTexture(GL_TEXTURE_BUFFER, vw_gpu_normals_texture(g));
  bind_mesh(r, g);
  draw_materials(r, u, vw_gpu_triangle_count(g));
  glBindVertexArray(0);
  glDisable(GL_DEPTH_TEST);
}

/* ---- 2D ------------------------------------------------------------------------------------- */

static ui_vertex *ui_reserve(vw_render *r, size_t n) {
  if (r->ui_len + n > r->ui_cap) {
    size_t cap = r->ui_cap ? 2 * r->ui_cap : 4096;
    while (cap < r->ui_len + n) cap *= 2;
    ui_vertex *g = realloc(r->ui, sizeof(*g) * cap);
    if (!g) return NULL;
    r->ui = g;
    r->ui_cap = cap;
  }
  ui_vertex *v = r->ui + r->ui_len;
  r->ui_len += n;
  return v;
}

static void quad(vw_render *r, float x0, float y0, float x1, float y1, const float rgba[4]) {
  ui_vertex *v = ui_reserve(r, 6);
  if (!v) return;
  const float xs[6] = {x0, x1, x1, x0, x1, x0}, ys[6] = {y0, y0, y1, y0, y1, y1};
  for (int i = 0; i < 6; i++) {
    v[i].x = xs[i], v[i].y = ys[i];
    memcpy(v[i].rgba, rgba, sizeof(v[i].rgba));
  }
}

void vw_render_rect(vw_render *r, float x, float y, float w, float h, const float rgba[4]) {
  quad(r, x, y, x + w, y + h, rgba);
}

void vw_render_text(vw_render *r, float x, float y, float scale, const float rgba[4], const char *text) {
  /* stb_easy_font writes quads of 4 vertices (x, y, z, packed colour: 16 bytes each). */
  static char buf[65536];
  int nq = stb_easy_font_print(0, 0, (char *)text, NULL, buf, sizeof(buf));
  for (int q = 0; q < nq; q++) {
    const float *v0 = (const float *)(buf + 64 * q), *v2 = (const float *)(buf + 64 * q + 32);
    quad(r, x + v0[0] * scale, y + v0[1] * scale, x + v2[0] * scale, y + v2[1] * scale, rgba);
  }
}

void vw_render_marker(vw_render *r, const vw_camera *cam, int width, int height, const float p[3], float radius,
                      const float rgba[4]) {
  float px, py;
  if (!vw_camera_project(cam, width, height, p, &px, &py)) return;
  quad(r, px - 3, py - 3, px + 3, py + 3, rgba);
  if (radius <= 0) return;
  /* The circle's screen radius: the projection of a point `radius` away along the view's right. */
  vec3 eye, fwd, right, up = {0, 1, 0};
  vw_camera_eye(cam, eye);
  glm_vec3_sub((float *)p, eye, fwd);
  glm_vec3_normalize(fwd);
  glm_vec3_cross(fwd, up, right);
  glm_vec3_normalize(right);
  float q[3] = {p[0] + right[0] * radius, p[1] + right[1] * radius, p[2] + right[2] * radius}, qx, qy;
  if (!vw_camera_project(cam, width, height, q, &qx, &qy)) return;
  float rr = sqrtf((qx - px) * (qx - px) + (qy - py) * (qy - py));
  for (int i = 0; i < 48; i++) {
    float a = 2.0f * (float)GLM_PI * (float)i / 48.0f;
    float cx = px + rr * cosf(a), cy = py + rr * sinf(a);
    quad(r, cx - 1, cy - 1, cx + 1, cy + 1, rgba);
  }
}

void vw_render_flush_2d(vw_render *r, int width, int height) {
  if (r->ui_len == 0) return;
  glViewport(0, 0, width, height);
  glDisable(GL_DEPTH_TEST);
  glEnable(GL_BLEND);
  glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA);
  glUseProgram(r->ui_prog.id);
  glUniform2f(r->u_size, (float)width, (float)height);
  glBindVertexArray(r->ui_vao);
  glBindBuffer(GL_ARRAY_BUFFER, r->ui_vbo.id);
  glBufferData(GL_ARRAY_BUFFER, (GLsizeiptr)(sizeof(ui_vertex) * r->ui_len), r->ui, GL_STREAM_DRAW);
  glDrawArrays(GL_TRIANGLES, 0, (GLsizei)r->ui_len);
  glBindVertexArray(0);
  glDisable(GL_BLEND);
  r->ui_len = 0;
}
