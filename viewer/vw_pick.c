/*
 * vw_pick.c — picking on the GPU (see vw_pick.h).
 */
#include "vw_pick.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_gl.h"

static const char pick_vs[] =
    "#version 330 core\n"
    "layout(location = 0) in vec3 a_position;\n"
    "uniform mat4 u_viewproj;\n"
    "out vec3 v_position;\n"
    "void main() {\n"
    "  v_position = a_position;\n"
    "  gl_Position = u_viewproj * vec4(a_position, 1.0);\n"
    "}\n";

static const char pick_fs[] =
    "#version 330 core\n"
    "in vec3 v_position;\n"
    "layout(location = 0) out uint o_id;\n"
    "layout(location = 1) out vec4 o_position;\n"
    "void main() {\n"
    "  o_id = uint(gl_PrimitiveID) + 1u;\n"
    "  o_position = vec4(v_position, 1.0);\n"
    "}\n";

static const vw__gl_program_desc pick_program = {.label = "pick program", .vs = pick_vs, .fs = pick_fs};

struct vw_pick {
  vw__gl_program prog;
  GLint u_viewproj;
  GLuint vao;
  vw__gl_framebuffer fb; /* 1×1: R32UI triangle + 1, RGBA32F position, depth */
};

void vw_pick_destroy(vw_pick *p) {
  if (!p) return;
  vw__gl_program_free(&p->prog);
  if (p->vao) glDeleteVertexArrays(1, &p->vao);
  vw__gl_framebuffer_free(&p->fb);
  free(p);
}

int vw_pick_create(vw_pick **out, char *err, size_t errlen) {
  *out = NULL;
  vw_pick *p = calloc(1, sizeof(*p));
  if (!p) {
    snprintf(err, errlen, "pick: %s", vw_strerror(VW_ENOMEM));
    return VW_ENOMEM;
  }
  const vw__gl_framebuffer_desc fd = {
      .width = 1, .height = 1, .color_format = GL_R32UI, .color2_format = GL_RGBA32F, .label = "pick framebuffer"};
  int rc;
  if ((rc = vw__gl_program_make(&p->prog, &pick_program, err, errlen)) != 0 ||
      (rc = vw__gl_framebuffer_make(&p->fb, &fd, err, errlen)) != 0) {
    vw_pick_destroy(p);
    return rc;
  }
  p->u_viewproj = glGetUniformLocation(p->prog.id, "u_viewproj");
  glGenVertexArrays(1, &p->vao);
  if ((rc = vw__gl_check("creating the pick's vertex array", err, errlen)) != 0) {
    vw_pick_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int vw_pick_choose(const char *renderer, int choice, vw_pick **out, char *err, size_t errlen) {
  *out = NULL;
  int soft = strstr(renderer, "llvmpipe") || strstr(renderer, "softpipe") || strstr(renderer, "SwiftShader");
  if (choice == 1 || (choice == 0 && soft)) return 0;
  return vw_pick_create(out, err, errlen);
}

/* The view-projection narrowed to pixel (px, py): its sliver of the view fills a 1×1 viewport,
 * whose one sample (at the viewport's centre) lies on the ray vw_camera_ray casts there. */
static void pick_matrix(const vw_camera *c, int width, int height, float px, float py, mat4 out) {
  mat4 view, proj, vp, narrow;
  vw_camera_matrices(c, width, height, view, proj);
  glm_mat4_mul(proj, view, vp);
  float nx = 2.0f * px / (float)width - 1.0f, ny = 1.0f - 2.0f * py / (float)height;
  glm_mat4_identity(narrow);
  narrow[0][0] = (float)width, narrow[1][1] = (float)height;
  narrow[3][0] = -(float)width * nx, narrow[3][1] = -(float)height * ny;
  glm_mat4_mul(narrow, vp, out);
}

int vw_pick_at(vw_pick *p, vw_gpu *g, const vw_camera *c, int width, int height, float px, float py,
               const uint32_t *triangles, unsigned restore_fb, float hit[3], uint32_t *triangle, uint32_t *vertex,
               char *err, size_t errlen) {
  if (!g || width <= 0 || height <= 0) return 0;
  mat4 vp;
  pick_matrix(c, width, height, px, py, vp);
  glBindFramebuffer(GL_FRAMEBUFFER, p->fb.id);
  glViewport(0, 0, 1, 1);
  const GLuint zero[4] = {0, 0, 0, 0};
  const GLfloat none[4] = {0, 0, 0, 0};
  glClearBufferuiv(GL_COLOR, 0, zero);
  glClearBufferfv(GL_COLOR, 1, none);
  glClear(GL_DEPTH_BUFFER_BIT);
  glEnable(GL_DEPTH_TEST);
  glDisable(GL_BLEND);
  glDisable(GL_CULL_FACE);
  glUseProgram(p->prog.id);
  glUniformMatrix4fv(p->u_viewproj, 1, GL_FALSE, (const float *)vp);
  glBindVertexArray(p->vao);
  glBindBuffer(GL_ARRAY_BUFFER, vw_gpu_positions_buffer(g));
  glEnableVertexAttribArray(0);
  glVertexAttribPointer(0, 3, GL_FLOAT, GL_FALSE, 3 * sizeof(float), (void *)0);
  glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, vw_gpu_index_buffer(g));
  glDrawElements(GL_TRIANGLES, (GLsizei)(3 * vw_gpu_triangle_count(g)), GL_UNSIGNED_INT, (void *)0);
  GLuint id = 0;
  GLfloat at[4] = {0, 0, 0, 0};
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_COLOR_ATTACHMENT0);
  glReadPixels(0, 0, 1, 1, GL_RED_INTEGER, GL_UNSIGNED_INT, &id);
  glReadBuffer(GL_COLOR_ATTACHMENT1);
  glReadPixels(0, 0, 1, 1, GL_RGBA, GL_FLOAT, at);
  glBindVertexArray(0);
  glBindFramebuffer(GL_FRAMEBUFFER, restore_fb);
  glViewport(0, 0, width, height);
  int rc = vw__gl_check("picking", err, errlen);
  if (rc) return rc;
  if (id == 0 || id > vw_gpu_triangle_count(g)) return 0;
  /* The corner nearest the hit: the triangle's three morphed positions, read back alone. */
  uint32_t t = id - 1, best = triangles[3 * (size_t)t];
  float bestd = -1;
  glBindBuffer(GL_ARRAY_BUFFER, vw_gpu_positions_buffer(g));
  for (int k = 0; k < 3; k++) {
    uint32_t v = triangles[3 * (size_t)t + k];
    float q[3];
    glGetBufferSubData(GL_ARRAY_BUFFER, (GLintptr)(3 * sizeof(float) * (size_t)v), sizeof(q), q);
    float d = (q[0] - at[0]) * (q[0] - at[0]) + (q[1] - at[1]) * (q[1] - at[1]) + (q[2] - at[2]) * (q[2] - at[2]);
    if (bestd < 0 || d < bestd) bestd = d, best = v;
  }
  glBindBuffer(GL_ARRAY_BUFFER, 0);
  memcpy(hit, at, 3 * sizeof(float));
  *triangle = t;
  *vertex = best;
  return 1;
}
