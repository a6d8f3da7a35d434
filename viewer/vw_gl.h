/*
 * vw_gl.h — internal to viewer/: small typed handles for the GL objects the GPU passes own,
 * each made from a zero-initialised descriptor, and the GL error checks.
 *
 *   vw__buffer   a buffer object and its size in bytes
 *   vw__texture  a buffer texture: a typed view (GL_R32F, GL_RGBA16F, ...) of a vw__buffer
 *   vw__program  a linked program (vw_shaders.h makes them from the sources kept there)
 *
 * A make function returns 0, or a negative VW_E* code with the reason in `err`, and leaves the
 * handle zeroed; a free function accepts a zeroed handle and zeroes it again.
 *
 * DOES NOT include GLFW or make a context: every function needs one current.
 */
#ifndef DEFORMD_VW_GL_H
#define DEFORMD_VW_GL_H

#include <epoxy/gl.h>
#include <stddef.h>

#include "vw_gpu.h"

typedef struct vw__buffer {
  GLuint id;
  size_t size; /* bytes */
} vw__buffer;

typedef struct vw__buffer_desc {
  size_t size;        /* bytes; 0 is allowed (a minimal buffer is made so it can be bound) */
  const void *data;   /* NULL: contents undefined */
  GLenum usage;       /* 0 = GL_STATIC_DRAW */
  const char *label;  /* names the buffer in error messages */
} vw__buffer_desc;

int vw__buffer_make(vw__buffer *b, const vw__buffer_desc *d, char *err, size_t errlen);
void vw__buffer_free(vw__buffer *b);

typedef struct vw__texture {
  GLuint id;
  GLenum format;
} vw__texture;

typedef struct vw__texture_desc {
  GLuint buffer;      /* the buffer the texture views (may be replaced by vw__texture_attach) */
  GLenum format;      /* GL_R32F, GL_R32UI, GL_RGBA16F, GL_RGBA32F */
  const char *label;
} vw__texture_desc;

int vw__texture_make(vw__texture *t, const vw__texture_desc *d, char *err, size_t errlen);
/* Points the texture at another buffer (after a buffer was re-allocated). */
void vw__texture_attach(vw__texture *t, GLuint buffer);
void vw__texture_free(vw__texture *t);

/* Drains the GL error queue. Returns 0 when it was empty, else VW_EGL (VW_ENOMEM for
 * GL_OUT_OF_MEMORY) with "GL error GL_INVALID_VALUE after <what>" in `err`. */
int vw__gl_check(const char *what, char *err, size_t errlen);
const char *vw__gl_error_name(GLenum e);

/* Debug builds check for a GL error after the call it follows and abort naming the place;
 * release builds check only where vw__gl_check is called (creation steps, end of an update). */
#ifdef NDEBUG
#define VW_GL_CHECK() ((void)0)
#else
#define VW_GL_CHECK() vw__gl_check_debug(__FILE__, __LINE__)
void vw__gl_check_debug(const char *file, int line);
#endif

/* Tests only: pretend GL_MAX_TEXTURE_BUFFER_SIZE is `texels` (0 = the context's own value), so
 * the "does not fit" path can be exercised on a GL whose real limit is large. */
void vw__gpu_limit_texels(long long texels);

#endif
