/*
 * vw_texclip.c — an animated texture clip on the GPU (see vw_texclip.h).
 *
 * The per-frame work on the CPU is folding each component's scale and offset into its weight:
 * a_k = w_k · scale_k, and per window b_r = Σ_k w_k · offset_k, so the shader does one
 * multiply-add per component and texel. The array is nearest-filtered and read with texelFetch.
 *
 * DOES NOT decode frames or draw meshes.
 */
#include <stdio.h>
#include <string.h>

#include "vw_shaders.h"
#include "vw_texclip.h"

int vw_texclip_make(vw_texclip *t, const mesh_texclip *c, char *err, size_t errlen) {
  memset(t, 0, sizeof(*t));
  GLint max_layers = 0, max_side = 0;
  glGetIntegerv(GL_MAX_ARRAY_TEXTURE_LAYERS, &max_layers);
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &max_side);
  if ((GLint)c->layers > max_layers || (GLint)c->width > max_side || (GLint)c->height > max_side ||
      c->window_count > MESH_TEXCLIP_MAX_WINDOWS || c->component_count > MESH_TEXCLIP_MAX_COMPONENTS) {
    snprintf(err, errlen, "texture clip of %u × %u × %u layers exceeds this GL (%d layers, %d texels a side)",
             c->width, c->height, c->layers, max_layers, max_side);
    return VW_ETOOBIG;
  }
  int rc = vw__gl_program_make(&t->prog, &vw__shaders_texclip, err, errlen);
  if (rc) return rc;
  t->width = c->width;
  t->height = c->height;
  t->window_count = c->window_count;
  t->component_count = c->component_count;
  for (uint32_t r = 0; r < c->window_count; r++) {
    const mesh_texclip_window *w = &c->windows[r];
    t->rect[r][0] = (int)w->x, t->rect[r][1] = (int)w->y, t->rect[r][2] = (int)w->w, t->rect[r][3] = (int)w->h;
    t->range[r][0] = (int)w->first, t->range[r][1] = (int)w->count;
  }
  for (uint32_t k = 0; k < c->component_count; k++) {
    t->tile[k][0] = (int)c->comps[k].layer, t->tile[k][1] = (int)c->comps[k].x, t->tile[k][2] = (int)c->comps[k].y;
    t->scale[k] = c->comps[k].scale;
    t->offset[k] = c->comps[k].offset;
  }
  glGenTextures(1, &t->array);
  glBindTexture(GL_TEXTURE_2D_ARRAY, t->array);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glTexImage3D(GL_TEXTURE_2D_ARRAY, 0, GL_RGBA8, (GLsizei)c->width, (GLsizei)c->height, (GLsizei)c->layers, 0,
               GL_RGBA, GL_UNSIGNED_BYTE, c->texels);
  glTexParameteri(GL_TEXTURE_2D_ARRAY, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D_ARRAY, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D_ARRAY, GL_TEXTURE_MAX_LEVEL, 0);
  glBindTexture(GL_TEXTURE_2D_ARRAY, 0);
  glGenTextures(1, &t->out);
  glBindTexture(GL_TEXTURE_2D, t->out);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, (GLsizei)c->width, (GLsizei)c->height, 0, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAX_LEVEL, 0);
  glBindTexture(GL_TEXTURE_2D, 0);
  GLint bound = 0;
  glGetIntegerv(GL_FRAMEBUFFER_BINDING, &bound);
  glGenFramebuffers(1, &t->fbo);
  glBindFramebuffer(GL_FRAMEBUFFER, t->fbo);
  glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, t->out, 0);
  GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  glBindFramebuffer(GL_FRAMEBUFFER, (GLuint)bound);
  glGenVertexArrays(1, &t->vao);
  GLuint p = t->prog.id;
  t->u_tex = glGetUniformLocation(p, "uTex");
  t->u_windows = glGetUniformLocation(p, "uWindows");
  t->u_rect = glGetUniformLocation(p, "uRect");
  t->u_range = glGetUniformLocation(p, "uRange");
  t->u_tile = glGetUniformLocation(p, "uTile");
  t->u_a = glGetUniformLocation(p, "uA");
  t->u_b = glGetUniformLocation(p, "uB");
  t->u_mean = glGetUniformLocation(p, "uMean");
  rc = vw__gl_check("uploading a texture clip", err, errlen);
  if (rc == 0 && status != GL_FRAMEBUFFER_COMPLETE) {
    snprintf(err, errlen, "the texture clip's %u × %u target is incomplete (status 0x%04x)", c->width, c->height,
             (unsigned)status);
    rc = VW_EGL;
  }
  if (rc) vw_texclip_free(t);
  return rc;
}

void vw_texclip_draw(vw_texclip *t, const float *weights, float mean) {
  float a[MESH_TEXCLIP_MAX_COMPONENTS], b[MESH_TEXCLIP_MAX_WINDOWS];
  for (uint32_t r = 0; r < t->window_count; r++) {
    double sum = 0;
    for (int k = t->range[r][0]; k < t->range[r][0] + t->range[r][1]; k++) {
      a[k] = weights[k] * t->scale[k];
      sum += (double)weights[k] * t->offset[k];
    }
    b[r] = (float)sum;
  }
  GLint bound = 0, vp[4];
  glGetIntegerv(GL_FRAMEBUFFER_BINDING, &bound);
  glGetIntegerv(GL_VIEWPORT, vp);
  glBindFramebuffer(GL_FRAMEBUFFER, t->fbo);
  glViewport(0, 0, (GLsizei)t->width, (GLsizei)t->height);
  glDisable(GL_DEPTH_TEST);
  glDisable(GL_BLEND);
  glUseProgram(t->prog.id);
  glActiveTexture(GL_TEXTURE0);
  glBindTexture(GL_TEXTURE_2D_ARRAY, t->array);
  glUniform1i(t->u_tex, 0);
  glUniform1i(t->u_windows, (GLint)t->window_count);
  glUniform4iv(t->u_rect, (GLsizei)t->window_count, &t->rect[0][0]);
  glUniform2iv(t->u_range, (GLsizei)t->window_count, &t->range[0][0]);
  if (t->component_count) {
    glUniform3iv(t->u_tile, (GLsizei)t->component_count, &t->tile[0][0]);
    glUniform1fv(t->u_a, (GLsizei)t->component_count, a);
  }
  glUniform1fv(t->u_b, (GLsizei)t->window_count, b);
  glUniform1f(t->u_mean, mean);
  glBindVertexArray(t->vao);
  glDrawArrays(GL_TRIANGLES, 0, 3);
  VW_GL_CHECK();
  glBindVertexArray(0);
  glBindTexture(GL_TEXTURE_2D_ARRAY, 0);
  glUseProgram(0);
  glBindFramebuffer(GL_FRAMEBUFFER, (GLuint)bound);
  glViewport(vp[0], vp[1], vp[2], vp[3]);
}

void vw_texclip_free(vw_texclip *t) {
  if (t->vao) glDeleteVertexArrays(1, &t->vao);
  if (t->fbo) glDeleteFramebuffers(1, &t->fbo);
  if (t->out) glDeleteTextures(1, &t->out);
  if (t->array) glDeleteTextures(1, &t->array);
  vw__gl_program_free(&t->prog);
  memset(t, 0, sizeof(*t));
}
