/*
 * vw_context.h — a GLFW window with an OpenGL 3.3 core context (libepoxy resolves the calls).
 *
 * Visible for deform-view, hidden for headless capture and tests (works under Xvfb with Mesa's
 * llvmpipe). One context per process is all deform-view needs.
 *
 * DOES NOT draw or handle input beyond exposing the GLFW window to whoever does.
 */
#ifndef DEFORMD_VW_CONTEXT_H
#define DEFORMD_VW_CONTEXT_H

#include <stddef.h>

typedef struct GLFWwindow GLFWwindow;

typedef struct vw_context {
  GLFWwindow *window;
  int width, height;   /* framebuffer size in pixels */
  int gl_major, gl_minor;
  char renderer[128];  /* GL_RENDERER, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)" */
} vw_context;

/* Creates the window (hidden when `hidden`) and makes its context current. Returns 0, or
 * VW_EGL (vw_gl.h) with a reason (no display — the message names Xvfb —, no GL 3.3 core).
 * Free with vw_context_fini, which also terminates GLFW. */
int vw_context_init(vw_context *c, int width, int height, int hidden, const char *title, char *err, size_t errlen);
void vw_context_fini(vw_context *c);

#endif
