/*
 * srv_json.c — JSON views of what the service holds: mesh statistics, and floats written so
 * that they read back as the same float (see srv_json.h).
 */
#include <cjson/cJSON.h>
#include "mesh.h"
#include "srv_json.h"

#include <stdio.h>
#include <stdlib.h>

cJSON *srv_json_float(float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(buf, sizeof(buf), "%.*g", prec, (double)f);
    if ((float)strtod(buf, NULL) == f) break;
  }
  return cJSON_CreateNumber(strtod(buf, NULL));
}

static cJSON *vec3(const float *v) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; a && k < 3; k++) cJSON_AddItemToArray(a, srv_json_float(v[k]));
  return a;
}

cJSON *srv_json_mesh_info(const mesh *m, const mesh_stats *s) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "vertices", s->vertices);
  cJSON_AddNumberToObject(o, "triangles", s->triangles);
  cJSON_AddNumberToObject(o, "topology_vertices", s->topology_vertices);
  cJSON_AddNumberToObject(o, "components", s->components);
  cJSON_AddNumberToObject(o, "boundary_edges", s->boundary_edges);
  cJSON_AddNumberToObject(o, "nonmanifold_edges", s->nonmanifold_edges);
  cJSON_AddNumberToObject(o, "degenerate_triangles", s->degenerate_triangles);
  cJSON *names = cJSON_AddArrayToObject(o, "targets");
  for (uint32_t i = 0; names && i < m->target_count; i++)
    cJSON_AddItemToArray(names, cJSON_CreateString(m->targets[i].name));
  cJSON_AddNumberToObject(o, "frames", s->frames);
  cJSON_AddNumberToObject(o, "submeshes", s->submeshes);
  cJSON *bbox = cJSON_AddObjectToObject(o, "bbox");
  if (bbox) {
    cJSON_AddItemToObject(bbox, "min", vec3(m->bbox_min));
    cJSON_AddItemToObject(bbox, "max", vec3(m->bbox_max));
  }
  /* The base-colour textures the file brought (only when it brought any, so that a mesh without
   * prints what it always printed). */
  cJSON *tex = m->image_count ? cJSON_AddArrayToObject(o, "textures") : NULL;
  for (uint32_t i = 0; tex && i < m->image_count; i++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", m->images[i].name);
    cJSON_AddNumberToObject(t, "width", m->images[i].width);
    cJSON_AddNumberToObject(t, "height", m->images[i].height);
    cJSON_AddItemToArray(tex, t);
  }
  /* One failed allocation anywhere above leaves a key missing: report it as a failure. */
  if (!names || !bbox || cJSON_GetArraySize(o) != 11 + (m->image_count ? 1 : 0)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}
