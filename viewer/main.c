/*
 * main.c — deform-view: watch and sculpt a deformd session.
 *
 *   deform-view [--connect HOST:PORT] [--session NAME] [--token T] [--role editor|viewer]
 *               [--screenshot out.png [--size WxH] [--frames N] [--wait-version V] [--timeout S]
 *                [--overlay]]
 *               [--weights name=value,...] [--camera yaw,pitch,dist] [--wireframe]
 *
 * Defaults: 127.0.0.1:7450 (or $DEFORMD_STREAM), session "demo", editor role, token from
 * $DEFORMD_TOKEN. --screenshot renders off-screen (no window appears; works under Xvfb), writes
 * the PNG and exits 0. --weights overrides weights in this viewer only (the session is not
 * edited). --camera takes degrees and a distance in mesh units (0: frame the mesh). --help also
 * lists every key (vw_hud.c's table, the one the H overlay shows).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_app.h"
#include "vw_hud.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: deform-view [--connect HOST:PORT] [--session NAME] [--token T] [--role editor|viewer]\n"
          "                   [--screenshot out.png [--size WxH] [--frames N] [--wait-version V] [--timeout S]\n"
          "                    [--overlay]]\n"
          "                   [--weights name=value,...] [--camera yaw,pitch,dist] [--wireframe]\n");
}

static void keys(FILE *out) {
  fprintf(out, "\nkeys and mouse (H or ? shows them in the window):\n");
  for (size_t i = 0; i < vw_hud_key_count; i++) fprintf(out, "  %-32s %s\n", vw_hud_keys[i].keys, vw_hud_keys[i].action);
}

static int parse_hostport(const char *s, vw_app_opts *o) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s || (size_t)(colon - s) >= sizeof(o->host)) return -1;
  memcpy(o->host, s, (size_t)(colon - s));
  o->host[colon - s] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port < 1 || port > 65535) return -1;
  o->port = (int)port;
  return 0;
}

int main(int argc, char **argv) {
  vw_app_opts o;
  memset(&o, 0, sizeof(o));
  snprintf(o.host, sizeof(o.host), "127.0.0.1");
  o.port = 7450;
  snprintf(o.session, sizeof(o.session), "demo");
  o.role = PROTO_ROLE_EDITOR;
  o.token = getenv("DEFORMD_TOKEN");
  const char *env = getenv("DEFORMD_STREAM");
  if (env && parse_hostport(env, &o) != 0) {
    fprintf(stderr, "deform-view: DEFORMD_STREAM must be HOST:PORT\n");
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      keys(stdout);
      return 0;
    } else if (strcmp(a, "--wireframe") == 0) {
      o.wireframe = 1;
      continue;
    } else if (strcmp(a, "--overlay") == 0) {
      o.overlay = 1;
      continue;
    }
    if (!v) {
      usage(stderr);
      return 2;
    }
    i++;
    if (strcmp(a, "--connect") == 0) {
      if (parse_hostport(v, &o) != 0) {
        fprintf(stderr, "deform-view: --connect needs HOST:PORT\n");
        return 2;
      }
    } else if (strcmp(a, "--session") == 0 && strlen(v) < sizeof(o.session)) {
      snprintf(o.session, sizeof(o.session), "%s", v);
    } else if (strcmp(a, "--token") == 0) {
      o.token = v;
    } else if (strcmp(a, "--role") == 0 && (strcmp(v, "editor") == 0 || strcmp(v, "viewer") == 0)) {
      o.role = strcmp(v, "editor") == 0 ? PROTO_ROLE_EDITOR : PROTO_ROLE_VIEWER;
    } else if (strcmp(a, "--screenshot") == 0) {
      o.screenshot = v;
    } else if (strcmp(a, "--size") == 0 && sscanf(v, "%dx%d", &o.width, &o.height) == 2 && o.width > 0 &&
               o.height > 0 && o.width <= 8192 && o.height <= 8192) {
    } else if (strcmp(a, "--frames") == 0 && atoi(v) > 0) {
      o.frames = atoi(v);
    } else if (strcmp(a, "--wait-version") == 0) {
      o.wait_version = strtoull(v, NULL, 10);
    } else if (strcmp(a, "--timeout") == 0 && atof(v) > 0) {
      o.timeout_s = atof(v);
    } else if (strcmp(a, "--weights") == 0) {
      o.weights = v;
    } else if (strcmp(a, "--camera") == 0 && sscanf(v, "%f,%f,%f", &o.yaw_deg, &o.pitch_deg, &o.dist) == 3) {
      o.has_camera = 1;
    } else {
      fprintf(stderr, "deform-view: bad option %s %s\n", a, v);
      usage(stderr);
      return 2;
    }
  }
  return vw_app_run(&o);
}
