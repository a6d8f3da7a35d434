/*
 * vw_app.h — deform-view: the window, the render loop, input and the sculpting UI.
 *
 * Each frame: take what the connection's thread (vw_pump) received, give the GPU only what
 * changed (vw_gpu), run the morph and normal passes if needed, draw (vw_render) and the overlay.
 * Interactive mode shows a window; screenshot mode renders off-screen in a hidden window and
 * writes a PNG.
 *
 * DOES NOT decode frames, morph, or compute normals itself.
 */
#ifndef DEFORMD_VW_APP_H
#define DEFORMD_VW_APP_H

#include "proto.h"

typedef struct vw_app_opts {
  char host[256];
  int port;
  char session[256];
  const char *token;       /* or NULL */
  int tls;                 /* TLS, verifying the server's certificate ... */
  const char *tls_ca;      /* ... against these CAs (NULL: the system's) */
  const char *author;      /* the name edits are recorded (and undone) under, or NULL */
  proto_role role;         /* editor (default) or viewer */
  const char *screenshot;  /* PNG path: headless capture, then exit */
  int width, height;
  int frames;              /* screenshot: frames to render after the state is there (default 3) */
  const char *weights;     /* "name=value,...": local overrides (this viewer only) */
  int has_camera;
  char view;               /* --view: the first view (vw_camera_view's letter), or 0 */
  float yaw_deg, pitch_deg, dist; /* dist <= 0: frame the mesh */
  unsigned long long wait_version; /* screenshot: wait until the session reaches this version */
  unsigned wait_texclips;  /* screenshot: wait for this many texture clips and their TEXWEIGHTS */
  int wireframe;
  int unlit;               /* --unlit: base colour × texture without the lights */
  int shading;             /* --shading lit|clay|wax|skin: VW_SHADING_* (vw_render.h), 0 lit */
  int private_presence;    /* --private: share no cursor or camera (still listed by name) */
  double timeout_s;        /* screenshot: give up after this long (default 60) */
  int overlay;             /* screenshot: draw the status line and the slider panel too */
  int protocol;            /* 1 or 2 (0: 2) */
  proto_hello_opts stream; /* version 2: codec, max rate (Hz), tolerance asked of the server */
  int pick;                /* --pick: 0 auto (the GPU unless GL is a software rasteriser), 1 cpu, 2 gpu */
  int more_count;          /* --connect A,B,...: the addresses after the first (tried in turn) */
  char more_host[7][256];
  int more_port[7];
} vw_app_opts;

/* Runs until the window closes (or the screenshot is written). Returns the exit status:
 * 0, or 1 with the reason on stderr. */
int vw_app_run(const vw_app_opts *o);

#endif
