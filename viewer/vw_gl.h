/*
 * vw_gl.h — the viewer's GL layer: its error codes, small typed handles for the GL objects the
 * viewer owns, each made from a zero-initialised descriptor, and the GL error checks.
 *
 *   vw__gl_buffer       a buffer object and its size in bytes
 *   vw__gl_texture      a buffer texture: a typed view (GL_R32F, GL_RGBA16F, ...) of a buffer
 *   vw__gl_program      a linked program, compiled from a descriptor of vw_shaders.h
 *   vw__gl_framebuffer  an off-screen colour + depth target (screenshots, the benchmark)
 *
 * A make function returns 0, or a negative VW_E* code with the reason in `err`, and leaves the
 * handle zeroed; a free function accepts a zeroed handle and zeroes it again. The error codes
 * and vw_strerror are the viewer's one error vocabulary: vw_gpu, vw_render and vw_context
 * return them too.
 *
 * DOES NOT include GLFW, make a context (vw_context.c does) or hold any GLSL (vw_shaders.c
 * does): every function but vw_strerror needs a context current.
 */
#ifndef DEFORMD_VW_GL_H
#define DEFORMD_VW_GL_H

#include <epoxy/gl.h>
#include <stddef.h>

enum {
  VW_EGL = -8001,      /* a GL call failed, or the context lacks what is needed (GL 3.3 core) */
  VW_ESHADER = -8002,  /* a shader did not compile or link (err holds the info log) */
  VW_ENOMEM = -8003,
  VW_EINVAL = -8004,
  VW_ETOOBIG = -8005   /* the mesh (× its targets) exceeds a GL limit (GL_MAX_TEXTURE_BUFFER_SIZE) */
};
/* A sentence for a VW_E* code (static storage): what to print when a call left no reason. */
const char *vw_strerror(int code);

typedef struct vw__gl_buffer {
  GLuint id;
  size_t size; /* bytes */
} vw__gl_buffer;

typedef struct vw__gl_buffer_desc {
  size_t size;        /* bytes; 0 is allowed (a minimal buffer is made so it can be bound) */
  const void *data;   /* NULL: contents undefined */
  GLenum usage;       /* 0 = GL_STATIC_DRAW */
  const char *label;  /* names the buffer in error messages */
} vw__gl_buffer_desc;

int vw__gl_buffer_make(vw__gl_buffer *b, const vw__gl_buffer_desc *d, char *err, size_t errlen);
void vw__gl_buffer_free(vw__gl_buffer *b);

typedef struct vw__gl_texture {
  GLuint id;
  GLenum format;
} vw__gl_texture;

typedef struct vw__gl_texture_desc {
  GLuint buffer;      /* the buffer the texture views (may be replaced by vw__gl_texture_attach) */
  GLenum format;      /* GL_R32F, GL_R32UI, GL_RGBA16F, GL_RGBA32F */
  const char *label;
} vw__gl_texture_desc;

int vw__gl_texture_make(vw__gl_texture *t, const vw__gl_texture_desc *d, char *err, size_t errlen);
/* Points the texture at another buffer (after a buffer was re-allocated). */
void vw__gl_texture_attach(vw__gl_texture *t, GLuint buffer);
void vw__gl_texture_free(vw__gl_texture *t);

typedef struct vw__gl_program {
  GLuint id;
} vw__gl_program;

typedef struct vw__gl_program_desc {
  const char *label;              /* names the program in error messages */
  const char *vs;                 /* vertex shader source (required) */
  const char *fs;                 /* fragment shader source; NULL for transform-feedback-only */
  const char *gs;                 /* geometry shader source, or NULL */
  const char *const *feedback;    /* transform feedback varyings, interleaved into buffer 0 */
  int feedback_count;
} vw__gl_program_desc;

/* Compiles and links `d`. Returns 0, or VW_ESHADER with "<label> vertex shader did not compile:
 * <info log>" (or "<label> did not link: <log>") in `err`, also written to stderr, or VW_EGL /
 * VW_EINVAL. *p is zeroed on failure; nothing else is affected. */
int vw__gl_program_make(vw__gl_program *p, const vw__gl_program_desc *d, char *err, size_t errlen);
void vw__gl_program_free(vw__gl_program *p);

typedef struct vw__gl_framebuffer {
  GLuint id, color, depth; /* the framebuffer and its renderbuffers */
  GLuint color2;           /* the second colour attachment, or 0 */
  int width, height;
} vw__gl_framebuffer;

typedef struct vw__gl_framebuffer_desc {
  int width, height;  /* pixels */
  GLenum color_format;  /* 0: GL_RGBA8; e.g. GL_R32UI for IDs (picking) */
  GLenum color2_format; /* a second colour attachment (GL_COLOR_ATTACHMENT1), or 0 for none */
  const char *label;
} vw__gl_framebuffer_desc;

/* A colour (RGBA8 unless the descriptor says otherwise), an optional second colour and a 24-bit
 * depth renderbuffer attached to a new framebuffer. Returns 0, or VW_EGL when GL calls it
 * incomplete. Nothing stays bound: bind f->id to draw into it. */
int vw__gl_framebuffer_make(vw__gl_framebuffer *f, const vw__gl_framebuffer_desc *d, char *err, size_t errlen);
void vw__gl_framebuffer_free(vw__gl_framebuffer *f);

/* Drains the GL error queue. Returns 0 when it was empty, else VW_EGL (VW_ENOMEM for
 * GL_OUT_OF_MEMORY) with "GL error GL_INVALID_VALUE after <what>" in `err`. */
int vw__gl_check(const char *what, char *err, size_t errlen);

/* Debug builds check for a GL error after the call it follows and abort naming the place;
 * release builds check only where vw__gl_check is called (creation steps, end of an update). */
#ifdef NDEBUG
#define VW_GL_CHECK() ((void)0)
#else
#define VW_GL_CHECK() vw__gl_check_debug(__FILE__, __LINE__)
void vw__gl_check_debug(const char *file, int line);
#endif

#endif
