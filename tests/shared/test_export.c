/*
 * test_export.c — OBJ and GLB export, read back by other readers.
 */
#include <cjson/cJSON.h>

#include "oracle.h"
#include "test.h"

/* A UV sphere (seam duplicates) with two targets and default weights. */
static mesh *sphere_with_targets(void) {
  mesh *m = oracle_uv_sphere(16, 24, 1.5);
  float *d = calloc(3 * m->vertex_count, sizeof(float));
  for (uint32_t v = 0; v < m->vertex_count; v++)
    if (m->positions[3 * v + 1] > 0.5f) d[3 * v + 1] = 0.25f * m->positions[3 * v + 1];
  ASSERT_OK(mesh_add_target_dense(m, "stretch_up", d, 0.0f), NULL);
  memset(d, 0, sizeof(float) * 3 * m->vertex_count);
  for (uint32_t v = 0; v < m->vertex_count; v++)
    if (m->positions[3 * v] < -0.5f) d[3 * v] = -0.125f;
  ASSERT_OK(mesh_add_target_dense(m, "bulge_left", d, 0.75f), NULL);
  free(d);
  return m;
}

TEST(obj_export_keeps_vertex_order_and_exact_positions) {
  mesh *m = sphere_with_targets();
  float w[2] = {1.0f, 0.5f};
  float *shape = malloc(sizeof(float) * 3 * m->vertex_count);
  mesh_evaluate(m, w, NULL, shape);
  char path[1024], err[MESH_ERR_LEN] = "";
  snprintf(path, sizeof(path), "%s/shape.obj", test_tmpdir());
  ASSERT_OK(mesh_export(m, shape, path, MESH_FORMAT_AUTO, err, sizeof(err)), err);
  /* Read it back with nothing but sscanf: v lines in order, f lines with 1-based indices. */
  FILE *f = fopen(path, "r");
  ASSERT(f != NULL);
  char line[256];
  uint32_t nv = 0, nf = 0;
  while (fgets(line, sizeof(line), f)) {
    float p[3];
    unsigned a[3];
    if (sscanf(line, "v %f %f %f", &p[0], &p[1], &p[2]) == 3) {
      ASSERT(nv < m->vertex_count);
      ASSERT(memcmp(p, shape + 3 * nv, sizeof(p)) == 0); /* %.9g round-trips a float */
      nv++;
    } else if (sscanf(line, "f %u/%*u/%*u %u/%*u/%*u %u/%*u/%*u", &a[0], &a[1], &a[2]) == 3) {
      for (int c = 0; c < 3; c++) ASSERT_EQ(a[c] - 1, m->triangles[3 * nf + c]);
      nf++;
    }
  }
  fclose(f);
  ASSERT_EQ(nv, m->vertex_count);
  ASSERT_EQ(nf, m->triangle_count);
  free(shape);
  mesh_destroy(m);
}

/* The JSON chunk of a GLB file, parsed by cJSON (not by assimp). */
static cJSON *glb_json(const char *path) {
  FILE *f = fopen(path, "rb");
  ASSERT(f != NULL);
  unsigned char h[20];
  ASSERT(fread(h, 1, 20, f) == 20);
  ASSERT(memcmp(h, "glTF", 4) == 0 && memcmp(h + 16, "JSON", 4) == 0);
  uint32_t len = (uint32_t)h[12] | (uint32_t)h[13] << 8 | (uint32_t)h[14] << 16 | (uint32_t)h[15] << 24;
  ASSERT(len % 4 == 0);
  char *json = malloc(len + 1);
  ASSERT(fread(json, 1, len, f) == len);
  json[len] = '\0';
  fclose(f);
  cJSON *root = cJSON_Parse(json);
  free(json);
  ASSERT(root != NULL);
  return root;
}

TEST(glb_export_carries_target_names_and_default_weights) {
  mesh *m = sphere_with_targets();
  char path[1024], err[MESH_ERR_LEN] = "";
  snprintf(path, sizeof(path), "%s/sphere.glb", test_tmpdir());
  ASSERT_OK(mesh_export(m, NULL, path, MESH_FORMAT_GLB, err, sizeof(err)), err);
  cJSON *root = glb_json(path);
  cJSON *gm = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "meshes"), 0);
  cJSON *names = cJSON_GetObjectItem(cJSON_GetObjectItem(gm, "extras"), "targetNames");
  ASSERT_EQ(cJSON_GetArraySize(names), 2);
  ASSERT(strcmp(cJSON_GetArrayItem(names, 0)->valuestring, "stretch_up") == 0);
  ASSERT(strcmp(cJSON_GetArrayItem(names, 1)->valuestring, "bulge_left") == 0);
  cJSON *weights = cJSON_GetObjectItem(gm, "weights");
  ASSERT_NEAR(cJSON_GetArrayItem(weights, 1)->valuedouble, 0.75, 0);
  cJSON *prim = cJSON_GetArrayItem(cJSON_GetObjectItem(gm, "primitives"), 0);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(prim, "targets")), 2);
  ASSERT(cJSON_GetObjectItem(root, "extensionsUsed") == NULL); /* nothing unused advertised */
  cJSON_Delete(root);
  mesh_destroy(m);
}

TEST(glb_export_round_trips_through_import) {
  mesh *m = sphere_with_targets();
  char path[1024], err[MESH_ERR_LEN] = "";
  snprintf(path, sizeof(path), "%s/rt.glb", test_tmpdir());
  ASSERT_OK(mesh_export(m, NULL, path, MESH_FORMAT_AUTO, err, sizeof(err)), err);
  mesh *r = NULL;
  ASSERT_OK(mesh_import(path, NULL, &r, err, sizeof(err)), err);
  ASSERT_EQ(r->vertex_count, m->vertex_count);
  ASSERT_EQ(r->triangle_count, m->triangle_count);
  for (uint32_t i = 0; i < 3 * m->vertex_count; i++) /* equal as numbers (-0 reads back as 0) */
    ASSERT(r->positions[i] == m->positions[i]);
  ASSERT(memcmp(r->triangles, m->triangles, sizeof(uint32_t) * 3 * m->triangle_count) == 0);
  ASSERT(r->uvs != NULL);
  ASSERT(memcmp(r->uvs, m->uvs, sizeof(float) * 2 * m->vertex_count) == 0);
  ASSERT_EQ(r->target_count, 2);
  float *a = malloc(sizeof(float) * 3 * m->vertex_count), *b = malloc(sizeof(float) * 3 * m->vertex_count);
  for (uint32_t t = 0; t < 2; t++) {
    ASSERT(strcmp(r->targets[t].name, m->targets[t].name) == 0);
    ASSERT_NEAR(r->targets[t].default_weight, m->targets[t].default_weight, 0);
    float w[2] = {0, 0};
    w[t] = 1.0f;
    mesh_evaluate(m, w, NULL, a);
    mesh_evaluate(r, w, NULL, b);
    for (uint32_t i = 0; i < 3 * m->vertex_count; i++) ASSERT_NEAR(a[i], b[i], 1e-6);
  }
  free(a);
  free(b);
  mesh_destroy(r);
  mesh_destroy(m);
}

TEST(export_to_an_unwritable_place_or_unknown_extension_fails_cleanly) {
  mesh *m = oracle_icosphere(1, 1.0);
  char err[MESH_ERR_LEN] = "";
  ASSERT_EQ(mesh_export(m, NULL, "/nonexistent/dir/x.obj", MESH_FORMAT_AUTO, err, sizeof(err)), MESH_EIO);
  ASSERT_STR_CONTAINS(err, "/nonexistent/dir/x.obj");
  ASSERT_EQ(mesh_export(m, NULL, "/tmp/x.fbx", MESH_FORMAT_AUTO, err, sizeof(err)), MESH_EINVAL);
  ASSERT_STR_CONTAINS(err, ".obj or .glb");
  mesh_destroy(m);
}
