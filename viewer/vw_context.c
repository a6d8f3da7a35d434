/*
 * vw_context.c — the GLFW window and its OpenGL 3.3 core, forward-compatible context.
 *
 * libepoxy resolves GL entry points lazily against whatever context is current, so nothing
 * needs loading after the context is made; GLFW is included without its own GL header.
 * Headless use (tests, capture) asks for a hidden window: under Xvfb with Mesa this is an
 * llvmpipe context, which supports everything the passes need.
 *
 * DOES NOT draw, poll events or handle input (deform-view's loop does that with c->window).
 */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NODELETE */
#include "vw_context.h"

#include <dlfcn.h>
#include <epoxy/gl.h>
#include <link.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_gl.h"

/* GLFW reports failures through a callback, not the failing call: keep the latest message. */
static char glfw_message[256];

static void on_glfw_error(int code, const char *description) {
  snprintf(glfw_message, sizeof(glfw_message), "%s (GLFW error 0x%x)", description ? description : "?",
           (unsigned)code);
}

static void explain_no_display(char *err, size_t errlen) {
  const char *display = getenv("DISPLAY");
  if (display == NULL || display[0] == '\0')
    snprintf(err, errlen,
             "no X display: DISPLAY is not set, and OpenGL needs one even for a hidden window; "
             "start Xvfb (e.g. `Xvfb :99 -screen 0 1280x1024x24 & export DISPLAY=:99`, or run "
             "under `xvfb-run -a`; tests/run.sh starts one) [%s]",
             glfw_message);
  else
    snprintf(err, errlen,
             "cannot open X display '%s' (is the X server or Xvfb running, and is this user "
             "allowed to connect?) [%s]",
             display, glfw_message);
}

/* Mesa's GL driver is unloaded when the last context goes, before LeakSanitizer runs; a leak it
 * allocated then shows as "<unknown module>", which no suppression can name (tests/lsan.supp
 * names Mesa's libraries). Re-opening the loaded driver with RTLD_NODELETE keeps it mapped until
 * the process exits, as it would stay anyway for a viewer's whole run. */
static int pin_driver(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  const char *name = info->dlpi_name;
  if (name && (strstr(name, "_dri.so") || strstr(name, "libgallium"))) {
    void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    if (h) dlclose(h);
  }
  return 0;
}

int vw_context_init(vw_context *c, int width, int height, int hidden, const char *title, char *err,
                    size_t errlen) {
  memset(c, 0, sizeof(*c));
  glfw_message[0] = '\0';
  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) {
    explain_no_display(err, errlen);
    return VW_EGL;
  }
  glfwDefaultWindowHints();
  glfwWindowHint(GLFW_CLIENT_API, GLFW_OPENGL_API);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_VISIBLE, hidden ? GLFW_FALSE : GLFW_TRUE);
  GLFWwindow *w = glfwCreateWindow(width > 0 ? width : 1, height > 0 ? height : 1,
                                   title ? title : "deform-view", NULL, NULL);
  if (w == NULL) {
    snprintf(err, errlen, "no OpenGL 3.3 core context on this display: %s",
             glfw_message[0] ? glfw_message : "glfwCreateWindow failed");
    glfwTerminate();
    return VW_EGL;
  }
  glfwMakeContextCurrent(w);
  int version = epoxy_gl_version();
  if (version < 33 || !epoxy_is_desktop_gl()) {
    snprintf(err, errlen, "the context is OpenGL %d.%d%s; deform-view needs desktop OpenGL 3.3 core",
             version / 10, version % 10, epoxy_is_desktop_gl() ? "" : " ES");
    glfwDestroyWindow(w);
    glfwTerminate();
    return VW_EGL;
  }
  c->window = w;
  c->gl_major = version / 10;
  c->gl_minor = version % 10;
  glfwGetFramebufferSize(w, &c->width, &c->height);
  const GLubyte *renderer = glGetString(GL_RENDERER);
  snprintf(c->renderer, sizeof(c->renderer), "%s", renderer ? (const char *)renderer : "?");
  while (glGetError() != GL_NO_ERROR) {
  }
  dl_iterate_phdr(pin_driver, NULL);
  return 0;
}

void vw_context_fini(vw_context *c) {
  if (c->window == NULL) return;
  glfwMakeContextCurrent(NULL);
  glfwDestroyWindow(c->window);
  glfwTerminate();
  c->window = NULL;
}
