/*
 * main.c — the deformd command line.
 *
 * Modes that exit at once:
 *   deformd --check-mesh FILE     import FILE, print its mesh_stats as one JSON object
 *   deformd --write-demo OUT.glb  write the bundled demo head
 * (the service itself arrives with the server issue).
 *
 * DOES NOT contain logic of its own: each mode is a call into shared/ or server/.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_info.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: deformd --check-mesh FILE [--max-vertices N]\n"
          "       deformd --write-demo OUT.glb\n"
          "\n"
          "  --check-mesh FILE    import FILE and print its statistics as JSON (exit 2 if refused)\n"
          "  --max-vertices N     refuse meshes with more than N vertices (default 5000000)\n"
          "  --write-demo OUT     write the bundled demo head (GLB or OBJ by extension)\n");
}

/* Prints {"error": why} on stdout and a readable line on stderr; returns exit status 2. */
static int refuse(const char *path, const char *why) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "error", why);
  char *s = cJSON_PrintUnformatted(o);
  if (s) printf("%s\n", s);
  free(s);
  cJSON_Delete(o);
  fprintf(stderr, "deformd: error: %s: %s\n", path, why);
  return 2;
}

static int check_mesh(const char *path, uint32_t max_vertices) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  mesh_import_opts opts = {.max_vertices = max_vertices};
  int rc = mesh_import(path, &opts, &m, err, sizeof(err));
  if (rc) return refuse(path, err);
  mesh_topology t;
  mesh_stats s;
  rc = mesh_topology_init(&t, m, NULL, 0.0);
  if (rc == 0) {
    rc = mesh_compute_stats(m, &t, &s);
    mesh_topology_fini(&t);
  }
  cJSON *o = rc == 0 ? srv_mesh_info_json(m, &s) : NULL;
  char *text = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  mesh_destroy(m);
  if (!text) return refuse(path, mesh_strerror(rc ? rc : MESH_ENOMEM));
  printf("%s\n", text);
  free(text);
  return 0;
}

static int write_demo(const char *path) {
  mesh *m = NULL;
  char err[MESH_ERR_LEN] = "";
  int rc = mesh_demo_head(&m);
  if (rc == 0) rc = mesh_export(m, NULL, path, MESH_FORMAT_AUTO, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "deformd: error: cannot write demo head: %s\n", err[0] ? err : mesh_strerror(rc));
    mesh_destroy(m);
    return 1;
  }
  fprintf(stderr, "deformd: wrote demo head (%u vertices, %u triangles, %u targets) to %s\n",
          m->vertex_count, m->triangle_count, m->target_count, path);
  mesh_destroy(m);
  return 0;
}

int main(int argc, char **argv) {
  const char *check = NULL, *demo_out = NULL;
  uint32_t max_vertices = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_value = i + 1 < argc;
    if (strcmp(a, "--check-mesh") == 0 && has_value) {
      check = argv[++i];
    } else if (strcmp(a, "--write-demo") == 0 && has_value) {
      demo_out = argv[++i];
    } else if (strcmp(a, "--max-vertices") == 0 && has_value) {
      char *end = NULL;
      unsigned long v = strtoul(argv[++i], &end, 10);
      if (!end || *end || v == 0 || v > UINT32_MAX) {
        fprintf(stderr, "deformd: --max-vertices needs a positive integer\n");
        return 1;
      }
      max_vertices = (uint32_t)v;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "deformd: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return 1;
    }
  }
  if (check) return check_mesh(check, max_vertices);
  if (demo_out) return write_demo(demo_out);
  usage(stderr);
  return 1;
}
