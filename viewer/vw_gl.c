/*
 * vw_gl.c — the viewer's GL layer (see vw_gl.h): error codes and GL error checks, and making
 * and freeing the typed handles — buffers, buffer textures, programs (compile + link with the
 * info log), off-screen framebuffers.
 *
 * Every other viewer file that owns a GL object makes it here, so that a failure is reported
 * the same way everywhere: a VW_E* code and a sentence naming the object (its descriptor's
 * label) and the GL error or info log.
 *
 * DOES NOT know the passes, the shaders' sources (vw_shaders.c) or what is drawn; it calls no
 * other viewer file.
 */
#include "vw_gl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors --------------------------------------------------------------------------------- */

const char *vw_strerror(int code) {
  switch (code) {
    case 0: return "ok";
    case VW_EGL: return "OpenGL call failed or context lacks a needed feature";
    case VW_ESHADER: return "shader did not compile or link";
    case VW_ENOMEM: return "out of memory";
    case VW_EINVAL: return "invalid argument";
    case VW_ETOOBIG: return "mesh too large for a GL limit";
    default: return "unknown viewer error";
  }
}

static const char *gl_error_name(GLenum e) {
  switch (e) {
    case GL_NO_ERROR: return "GL_NO_ERROR";
    case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
    case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
    case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
    default: return "unknown GL error";
  }
}

int vw__gl_check(const char *what, char *err, size_t errlen) {
  GLenum first = glGetError();
  if (first == GL_NO_ERROR) return 0;
  /* Drain the queue so a later check reports only its own errors. */
  for (int i = 0; i < 16 && glGetError() != GL_NO_ERROR; i++) {
  }
  snprintf(err, errlen, "GL error %s (0x%04x) after %s", gl_error_name(first), (unsigned)first, what);
  return first == GL_OUT_OF_MEMORY ? VW_ENOMEM : VW_EGL;
}

#ifndef NDEBUG
void vw__gl_check_debug(const char *file, int line) {
  GLenum e = glGetError();
  if (e != GL_NO_ERROR) {
    fprintf(stderr, "%s:%d: GL error %s (0x%04x)\n", file, line, gl_error_name(e), (unsigned)e);
    abort();
  }
}
#endif

/* ---- buffers and buffer textures ------------------------------------------------------------ */

int vw__gl_buffer_make(vw__gl_buffer *b, const vw__gl_buffer_desc *d, char *err, size_t errlen) {
  const char *label = d->label ? d->label : "buffer";
  memset(b, 0, sizeof(*b));
  if (d->size > (size_t)PTRDIFF_MAX) {
    snprintf(err, errlen, "%s: %zu bytes is too large", label, d->size);
    return VW_ETOOBIG;
  }
  GLuint id = 0;
  glGenBuffers(1, &id);
  /* Buffers are typeless: COPY_WRITE keeps uploads away from VAO and feedback bindings. */
  glBindBuffer(GL_COPY_WRITE_BUFFER, id);
  /* Zero-sized buffers are legal but some paths dislike them; keep every buffer bindable. */
  size_t size = d->size > 0 ? d->size : 16;
  glBufferData(GL_COPY_WRITE_BUFFER, (GLsizeiptr)size, d->size > 0 ? d->data : NULL,
               d->usage ? d->usage : GL_STATIC_DRAW);
  glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
  char what[96];
  snprintf(what, sizeof(what), "allocating the %s (%zu bytes)", label, size);
  int rc = vw__gl_check(what, err, errlen);
  if (rc != 0) {
    glDeleteBuffers(1, &id);
    return rc;
  }
  b->id = id;
  b->size = d->size;
  return 0;
}

void vw__gl_buffer_free(vw__gl_buffer *b) {
  if (b->id) glDeleteBuffers(1, &b->id);
  memset(b, 0, sizeof(*b));
}

int vw__gl_texture_make(vw__gl_texture *t, const vw__gl_texture_desc *d, char *err, size_t errlen) {
  memset(t, 0, sizeof(*t));
  GLuint id = 0;
  glGenTextures(1, &id);
  glBindTexture(GL_TEXTURE_BUFFER, id);
  glTexBuffer(GL_TEXTURE_BUFFER, d->format, d->buffer);
  glBindTexture(GL_TEXTURE_BUFFER, 0);
  char what[96];
  snprintf(what, sizeof(what), "creating the %s buffer texture", d->label ? d->label : "");
  int rc = vw__gl_check(what, err, errlen);
  if (rc != 0) {
    glDeleteTextures(1, &id);
    return rc;
  }
  t->id = id;
  t->format = d->format;
  return 0;
}

void vw__gl_texture_attach(vw__gl_texture *t, GLuint buffer) {
  glBindTexture(GL_TEXTURE_BUFFER, t->id);
  glTexBuffer(GL_TEXTURE_BUFFER, t->format, buffer);
  glBindTexture(GL_TEXTURE_BUFFER, 0);
  VW_GL_CHECK();
}

void vw__gl_texture_free(vw__gl_texture *t) {
  if (t->id) glDeleteTextures(1, &t->id);
  memset(t, 0, sizeof(*t));
}

/* ---- programs ------------------------------------------------------------------------------- */

/* Compiles one stage. A stage that does not compile is reported with its info log, trailing
 * newlines trimmed, in `err` and on stderr: the log is the only place GLSL errors show. */
static int compile(GLenum type, const char *src, const char *label, GLuint *out, char *err, size_t errlen) {
  GLuint s = glCreateShader(type);
  if (s == 0) {
    snprintf(err, errlen, "%s: glCreateShader failed", label);
    return VW_EGL;
  }
  glShaderSource(s, 1, &src, NULL);
  glCompileShader(s);
  GLint ok = GL_FALSE;
  glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    char log[1024] = "";
    glGetShaderInfoLog(s, sizeof(log), NULL, log);
    size_t n = strlen(log);
    while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' ')) log[--n] = '\0';
    snprintf(err, errlen, "%s %s shader did not compile: %s", label,
             type == GL_VERTEX_SHADER ? "vertex" : type == GL_GEOMETRY_SHADER ? "geometry" : "fragment", n ? log : "(empty info log)");
    fprintf(stderr, "deform-view: %s\n", err);
    glDeleteShader(s);
    return VW_ESHADER;
  }
  *out = s;
  return 0;
}

int vw__gl_program_make(vw__gl_program *p, const vw__gl_program_desc *d, char *err, size_t errlen) {
  const char *label = d->label ? d->label : "program";
  GLuint vs = 0, fs = 0, gs = 0, prog = 0;
  int rc;
  memset(p, 0, sizeof(*p));
  if (d->vs == NULL) {
    snprintf(err, errlen, "%s: no vertex shader source", label);
    return VW_EINVAL;
  }
  if ((rc = compile(GL_VERTEX_SHADER, d->vs, label, &vs, err, errlen)) != 0) goto fail_vs;
  if (d->fs && (rc = compile(GL_FRAGMENT_SHADER, d->fs, label, &fs, err, errlen)) != 0) goto fail_fs;
  if (d->gs && (rc = compile(GL_GEOMETRY_SHADER, d->gs, label, &gs, err, errlen)) != 0) goto fail_gs;
  prog = glCreateProgram();
  if (prog == 0) {
    snprintf(err, errlen, "%s: glCreateProgram failed", label);
    rc = VW_EGL;
    goto fail_prog;
  }
  glAttachShader(prog, vs);
  if (fs) glAttachShader(prog, fs);
  if (gs) glAttachShader(prog, gs);
  if (d->feedback_count > 0)
    glTransformFeedbackVaryings(prog, d->feedback_count, (const GLchar *const *)d->feedback,
                                GL_INTERLEAVED_ATTRIBS);
  glLinkProgram(prog);
  GLint ok = GL_FALSE;
  glGetProgramiv(prog, GL_LINK_STATUS, &ok);
  if (!ok) {
    char log[1024] = "";
    glGetProgramInfoLog(prog, sizeof(log), NULL, log);
    size_t n = strlen(log);
    while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' ')) log[--n] = '\0';
    snprintf(err, errlen, "%s did not link: %s", label, n ? log : "(empty info log)");
    fprintf(stderr, "deform-view: %s\n", err);
    rc = VW_ESHADER;
    goto fail_link;
  }
  if ((rc = vw__gl_check(label, err, errlen)) != 0) goto fail_link;
  /* The program keeps what it needs; the shader objects can go now. */
  glDetachShader(prog, vs);
  if (fs) glDetachShader(prog, fs);
  if (gs) glDetachShader(prog, gs);
  if (fs) glDeleteShader(fs);
  if (gs) glDeleteShader(gs);
  glDeleteShader(vs);
  p->id = prog;
  return 0;

fail_link:
  glDeleteProgram(prog);
fail_prog:
  if (gs) glDeleteShader(gs);
fail_gs:
  if (fs) glDeleteShader(fs);
fail_fs:
  glDeleteShader(vs);
fail_vs:
  return rc;
}

void vw__gl_program_free(vw__gl_program *p) {
  if (p->id) glDeleteProgram(p->id);
  p->id = 0;
}

/* ---- off-screen framebuffers ---------------------------------------------------------------- */

int vw__gl_framebuffer_make(vw__gl_framebuffer *f, const vw__gl_framebuffer_desc *d, char *err, size_t errlen) {
  const char *label = d->label ? d->label : "framebuffer";
  memset(f, 0, sizeof(*f));
  glGenFramebuffers(1, &f->id);
  glGenRenderbuffers(1, &f->color);
  glGenRenderbuffers(1, &f->depth);
  glBindRenderbuffer(GL_RENDERBUFFER, f->color);
  glRenderbufferStorage(GL_RENDERBUFFER, d->color_format ? d->color_format : GL_RGBA8, d->width, d->height);
  if (d->color2_format) {
    glGenRenderbuffers(1, &f->color2);
    glBindRenderbuffer(GL_RENDERBUFFER, f->color2);
    glRenderbufferStorage(GL_RENDERBUFFER, d->color2_format, d->width, d->height);
  }
  glBindRenderbuffer(GL_RENDERBUFFER, f->depth);
  glRenderbufferStorage(GL_RENDERBUFFER, GL_DEPTH_COMPONENT24, d->width, d->height);
  glBindRenderbuffer(GL_RENDERBUFFER, 0);
  glBindFramebuffer(GL_FRAMEBUFFER, f->id);
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, f->color);
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_DEPTH_ATTACHMENT, GL_RENDERBUFFER, f->depth);
  if (f->color2) {
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT1, GL_RENDERBUFFER, f->color2);
    const GLenum both[2] = {GL_COLOR_ATTACHMENT0, GL_COLOR_ATTACHMENT1};
    glDrawBuffers(2, both);
  }
  GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  char what[96];
  snprintf(what, sizeof(what), "creating the %s (%dx%d)", label, d->width, d->height);
  int rc = vw__gl_check(what, err, errlen);
  if (rc == 0 && status != GL_FRAMEBUFFER_COMPLETE) {
    snprintf(err, errlen, "cannot create the %s (%dx%d): framebuffer status 0x%04x", label, d->width,
             d->height, (unsigned)status);
    rc = VW_EGL;
  }
  if (rc != 0) {
    vw__gl_framebuffer_free(f);
    return rc;
  }
  f->width = d->width;
  f->height = d->height;
  return 0;
}

void vw__gl_framebuffer_free(vw__gl_framebuffer *f) {
  if (f->id) glDeleteFramebuffers(1, &f->id);
  if (f->color) glDeleteRenderbuffers(1, &f->color);
  if (f->depth) glDeleteRenderbuffers(1, &f->depth);
  if (f->color2) glDeleteRenderbuffers(1, &f->color2);
  memset(f, 0, sizeof(*f));
}
