/*
 * main.c — deform-view: watch and sculpt a deformd session.
 *
 *   deform-view [--connect HOST:PORT[,HOST:PORT...]] [--session NAME | --open FILE [--rpc HOST:PORT]]
 *               [--token T | --token-file F] [--tls [--tls-ca FILE]] [--role editor|viewer]
 *               [--author NAME]
 *               [--max-rate HZ] [--tolerance T | --lossless | --protocol 1]
 *               [--screenshot out.png [--size WxH] [--frames N] [--wait-version V] [--wait-texclips N] [--timeout S]
 *                [--overlay]]
 *               [--weights name=value,...] [--camera yaw,pitch,dist | --view front|back|right|left|top|bottom]
 *               [--wireframe] [--unlit] [--shading lit|clay|wax|skin]
 *
 * It speaks protocol version 2 at the session's default tolerance unless told otherwise:
 * --max-rate asks the server for at most HZ updates a second, --tolerance for a coarser grid
 * (mesh units), --lossless for exact floats, --protocol 1 for the first version.
 * Defaults: 127.0.0.1:7450 (or $DEFORMD_STREAM), session "demo", editor role, token from
 * $DEFORMD_TOKEN. --open uploads a local mesh to the server (its JSON-RPC port: --rpc, default
 * the stream port + 1 on the same host) and opens a session on it. --tls speaks TLS on both
 * and verifies the server's certificate. --screenshot renders off-screen (no window appears; works under Xvfb), writes
 * the PNG and exits 0. --weights overrides weights in this viewer only (the session is not
 * edited). --camera takes degrees and a distance in mesh units (0: frame the mesh); --view one of
 * Blender's numpad views about the session's up axis (vw_camera_view); the last of the two wins. --help also
 * lists every key (vw_hud.c's table, the one the H overlay shows).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "vw_app.h"
#include "vw_open.h"
#include "vw_hud.h"
#include "vw_camera.h"
#include "vw_render.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: deform-view [--connect HOST:PORT[,HOST:PORT...]] [--session NAME | --open FILE [--rpc HOST:PORT]]\n"
          "                   [--token T | --token-file F] [--tls [--tls-ca FILE]] [--role editor|viewer]\n"
          "                   [--author NAME]  (default $DEFORMD_AUTHOR, else $USER: undo is per author)\n"
          "                   [--max-rate HZ] [--tolerance T | --lossless | --protocol 1]\n"
          "                   [--screenshot out.png [--size WxH] [--frames N] [--wait-version V] [--wait-texclips N]\n"
          "                   [--timeout S]\n"
          "                    [--overlay]]\n"
          "                   [--weights name=value,...] [--wireframe] [--unlit]\n"
          "                   [--shading lit|clay|wax|skin]  (lit, or a matcap: C cycles them)\n"
          "                   [--camera yaw,pitch,dist | --view front|back|right|left|top|bottom]\n"
          "                   [--private]  (share no cursor or camera with the session's other participants)\n"
          "                   [--pick auto|gpu|cpu]  (auto: on the GPU unless GL is a software rasteriser)\n");
}

static void keys(FILE *out) {
  fprintf(out, "\nkeys and mouse (H or ? shows them in the window):\n");
  for (size_t i = 0; i < vw_hud_key_count; i++) fprintf(out, "  %-32s %s\n", vw_hud_keys[i].keys, vw_hud_keys[i].action);
}

static int parse_one(const char *s, size_t len, char *host, size_t hostlen, int *port) {
  const char *colon = NULL;
  for (size_t i = 0; i < len; i++)
    if (s[i] == ':') colon = s + i;
  if (!colon || colon == s || (size_t)(colon - s) >= hostlen) return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  char digits[8];
  size_t dl = len - (size_t)(colon + 1 - s);
  if (dl == 0 || dl >= sizeof(digits)) return -1;
  memcpy(digits, colon + 1, dl);
  digits[dl] = '\0';
  char *end;
  long p = strtol(digits, &end, 10);
  if (*end || p < 1 || p > 65535) return -1;
  *port = (int)p;
  return 0;
}

/* HOST:PORT, or several comma-separated (nodes of a cluster: a lost connection tries the next). */
static int parse_hostport(const char *s, vw_app_opts *o) {
  o->more_count = 0;
  for (int k = 0; *s; k++) {
    size_t len = strcspn(s, ",");
    int rc = k == 0 ? parse_one(s, len, o->host, sizeof(o->host), &o->port)
             : k <= 7 ? parse_one(s, len, o->more_host[k - 1], sizeof(o->more_host[0]), &o->more_port[k - 1])
                      : -1;
    if (rc) return -1;
    if (k > 0) o->more_count = k;
    s += len + (s[len] == ',');
  }
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
  o.author = getenv("DEFORMD_AUTHOR") ? getenv("DEFORMD_AUTHOR") : getenv("USER");
  const char *env = getenv("DEFORMD_STREAM");
  if (env && parse_hostport(env, &o) != 0) {
    fprintf(stderr, "deform-view: DEFORMD_STREAM must be HOST:PORT\n");
    return 2;
  }
  const char *open_file = NULL, *rpc = NULL;
  static char token_buf[300];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      keys(stdout);
      return 0;
    } else if (strcmp(a, "--wireframe") == 0) {
      o.wireframe = 1;
      continue;
    } else if (strcmp(a, "--unlit") == 0) {
      o.unlit = 1;
      continue;
    } else if (strcmp(a, "--private") == 0) {
      o.private_presence = 1;
      continue;
    } else if (strcmp(a, "--tls") == 0) {
      o.tls = 1;
      continue;
    } else if (strcmp(a, "--overlay") == 0) {
      o.overlay = 1;
      continue;
    } else if (strcmp(a, "--lossless") == 0) {
      o.stream.codec = PROTO_CODEC_LOSSLESS;
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
    } else if (strcmp(a, "--shading") == 0 && vw_render_shading_parse(v) >= 0) {
      o.shading = vw_render_shading_parse(v);
    } else if (strcmp(a, "--pick") == 0 && (!strcmp(v, "auto") || !strcmp(v, "gpu") || !strcmp(v, "cpu"))) {
      o.pick = v[0] == 'g' ? 2 : v[0] == 'c' ? 1 : 0;
    } else if (strcmp(a, "--session") == 0 && strlen(v) < sizeof(o.session)) {
      snprintf(o.session, sizeof(o.session), "%s", v);
    } else if (strcmp(a, "--token") == 0) {
      o.token = v;
    } else if (strcmp(a, "--token-file") == 0) {
      FILE *f = fopen(v, "r");
      if (!f || !fgets(token_buf, sizeof(token_buf), f)) {
        fprintf(stderr, "deform-view: cannot read a token from %s\n", v);
        if (f) fclose(f);
        return 2;
      }
      fclose(f);
      token_buf[strcspn(token_buf, "\r\n")] = '\0';
      o.token = token_buf;
    } else if (strcmp(a, "--tls-ca") == 0) {
      o.tls = 1;
      o.tls_ca = v;
    } else if (strcmp(a, "--open") == 0) {
      open_file = v;
    } else if (strcmp(a, "--rpc") == 0) {
      rpc = v;
    } else if (strcmp(a, "--author") == 0) {
      o.author = v;
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
    } else if (strcmp(a, "--wait-texclips") == 0 && atoi(v) >= 0) {
      o.wait_texclips = (unsigned)atoi(v);
    } else if (strcmp(a, "--timeout") == 0 && atof(v) > 0) {
      o.timeout_s = atof(v);
    } else if (strcmp(a, "--weights") == 0) {
      o.weights = v;
    } else if (strcmp(a, "--view") == 0 && vw_camera_view_named(v)) {
      o.view = vw_camera_view_named(v), o.has_camera = 0; /* the last of --view and --camera wins */
    } else if (strcmp(a, "--camera") == 0 && sscanf(v, "%f,%f,%f", &o.yaw_deg, &o.pitch_deg, &o.dist) == 3) {
      o.has_camera = 1, o.view = 0;
    } else if (strcmp(a, "--max-rate") == 0 && atof(v) > 0 && atof(v) <= 1e6) {
      o.stream.max_rate = (float)atof(v);
    } else if (strcmp(a, "--tolerance") == 0 && atof(v) > 0 && atof(v) < 1e30) {
      o.stream.tolerance = (float)atof(v);
    } else if (strcmp(a, "--protocol") == 0 && (strcmp(v, "1") == 0 || strcmp(v, "2") == 0)) {
      o.protocol = atoi(v);
    } else {
      fprintf(stderr, "deform-view: bad option %s %s\n", a, v);
      usage(stderr);
      return 2;
    }
  }
  if (open_file) { /* upload, open a session on it, and watch that */
    vw_open_opts vo = {.file = open_file, .port = o.port + 1, .token = o.token, .tls = o.tls, .tls_ca = o.tls_ca};
    snprintf(vo.host, sizeof(vo.host), "%s", o.host);
    if (rpc && client_parse_hostport(rpc, vo.host, sizeof(vo.host), &vo.port) != 0) {
      fprintf(stderr, "deform-view: --rpc needs HOST:PORT\n");
      return 2;
    }
    char err[512];
    if (vw_open_file(&vo, o.session, sizeof(o.session), err, sizeof(err)) != 0) {
      fprintf(stderr, "deform-view: --open %s: %s\n", open_file, err);
      return 1;
    }
    fprintf(stderr, "deform-view: %s opened as session %s\n", open_file, o.session);
  }
  return vw_app_run(&o);
}
