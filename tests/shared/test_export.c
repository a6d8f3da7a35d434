/*
 * test_export.c — OBJ and GLB export, read back by other readers.
 */
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The materials of `r` (read back from an export) are `m`'s: the same submeshes with the same
 * colours, each textured one with the very pixels of its image, and the same UVs under every
 * vertex, so every texel lies under the vertex it lay under. */
static void assert_same_materials(const mesh *m, const mesh *r) {
  ASSERT_EQ(r->triangle_count, m->triangle_count);
  ASSERT_EQ(r->submesh_count, m->submesh_count);
  ASSERT(r->uvs != NULL);
  /* Corner by corner (the reader joins vertices the export's recomputed normals made equal). */
  for (uint32_t i = 0; i < 3 * m->triangle_count; i++) {
    uint32_t a = m->triangles[i], b = r->triangles[i];
    for (int k = 0; k < 3; k++) ASSERT_NEAR(r->positions[3 * b + k], m->positions[3 * a + k], 1e-6);
    for (int k = 0; k < 2; k++) ASSERT_NEAR(r->uvs[2 * b + k], m->uvs[2 * a + k], 1e-6);
  }
  for (uint32_t i = 0; i < m->submesh_count; i++) {
    const mesh_submesh *a = &m->submeshes[i], *b = &r->submeshes[i];
    ASSERT_EQ(b->first_triangle, a->first_triangle);
    ASSERT_EQ(b->triangle_count, a->triangle_count);
    ASSERT_EQ(b->has_color, a->has_color);
    for (int k = 0; a->has_color && k < 4; k++) ASSERT_NEAR(b->base_color[k], a->base_color[k], 1e-7);
    ASSERT_EQ(b->texture != 0, a->texture != 0);
    if (!a->texture) continue;
    const mesh_image *x = &m->images[a->texture - 1], *y = &r->images[b->texture - 1];
    ASSERT_EQ(y->width, x->width);
    ASSERT_EQ(y->height, x->height);
    ASSERT(memcmp(y->rgba, x->rgba, 4 * (size_t)x->width * x->height) == 0);
  }
}

TEST(a_glb_export_embeds_the_textures_and_reads_back_with_the_same_pixels_colours_and_uvs) {
  mesh *m = NULL, *r = NULL;
  char err[MESH_ERR_LEN] = "", path[1024];
  ASSERT_OK(mesh_import(test_assimp_model("OBJ/spider.obj"), NULL, &m, err, sizeof(err)), err);
  ASSERT(m->image_count == 4);
  snprintf(path, sizeof(path), "%s/spider.glb", test_tmpdir());
  ASSERT_OK(mesh_export(m, NULL, path, MESH_FORMAT_AUTO, err, sizeof(err)), err);
  ASSERT_OK(mesh_import(path, NULL, &r, err, sizeof(err)), err);
  assert_same_materials(m, r);
  /* The images are in the file itself, as glTF says: buffer views of PNG. */
  cJSON *j = glb_json(path);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "images")), 4);
  ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "materials")), (int)m->submesh_count);
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "images"), 0), "mimeType")->valuestring,
                      "image/png");
  cJSON_Delete(j);
  mesh_destroy(r);
  mesh_destroy(m);
}

TEST(an_obj_export_writes_an_mtl_and_pngs_beside_it_and_reads_back_with_the_same_pixels_colours_and_uvs) {
  mesh *m = NULL, *r = NULL;
  char err[MESH_ERR_LEN] = "", path[1024];
  ASSERT_OK(mesh_import(test_assimp_model("OBJ/spider.obj"), NULL, &m, err, sizeof(err)), err);
  snprintf(path, sizeof(path), "%s/out/spider-now.obj", test_tmpdir());
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/out", test_tmpdir());
  mkdir(dir, 0700);
  ASSERT_OK(mesh_export(m, NULL, path, MESH_FORMAT_AUTO, err, sizeof(err)), err);
  for (uint32_t i = 0; i < m->image_count; i++) {
    char png[1100];
    snprintf(png, sizeof(png), "%s/spider-now_%u.png", dir, i);
    ASSERT(access(png, R_OK) == 0);
  }
  ASSERT_OK(mesh_import(path, NULL, &r, err, sizeof(err)), err);
  assert_same_materials(m, r);
  mesh_destroy(r);
  /* A mesh without materials: the OBJ alone, naming no MTL (today's bytes). */
  mesh *plain = sphere_with_targets();
  mesh_export_file *files;
  uint32_t n;
  ASSERT_OK(mesh_export_obj_files(plain, NULL, "x/plain.obj", &files, &n, err, sizeof(err)), err);
  ASSERT_EQ(n, 1);
  ASSERT(strcmp(files[0].name, "x/plain.obj") == 0);
  uint8_t *mem;
  size_t len;
  ASSERT_OK(mesh_export_mem(plain, NULL, MESH_FORMAT_OBJ, &mem, &len, err, sizeof(err)), err);
  ASSERT(len == files[0].len && memcmp(mem, files[0].bytes, len) == 0);
  free(mem);
  mesh_export_files_free(files, n);
  ASSERT_OK(mesh_export_obj_files(m, NULL, "x/spider.obj", &files, &n, err, sizeof(err)), err);
  ASSERT_EQ(n, m->image_count + 2);
  ASSERT(strcmp(files[n - 1].name, "x/spider.obj") == 0 && strcmp(files[n - 2].name, "x/spider.mtl") == 0);
  ASSERT(strcmp(files[0].name, "x/spider_0.png") == 0);
  ASSERT_STR_CONTAINS((const char *)files[n - 1].bytes, "mtllib spider.mtl\n");
  mesh_export_files_free(files, n);
  mesh_destroy(plain);
  mesh_destroy(m);
}
