/*
 * test_import_broken.c — bad input is refused with a clear reason, never a crash.
 *
 * Real broken files come from Debian's assimp-testmodels; the rest are written here.
 */
#include "oracle.h"
#include "test.h"

/* Imports `path`, expects failure with `code` and a reason containing `needle`. */
static void refused(const char *path, int code, const char *needle) {
  char err[MESH_ERR_LEN] = "";
  mesh *m = (mesh *)1;
  int rc = mesh_import(path, NULL, &m, err, sizeof(err));
  fprintf(stderr, "%s -> %d (%s): %s\n", path, rc, mesh_strerror(rc), err);
  ASSERT_EQ(rc, code);
  ASSERT(m == NULL);
  ASSERT_STR_CONTAINS(err, needle);
}

TEST(missing_file_is_refused) {
  refused("/nonexistent/dir/head.glb", MESH_ENOENT, "No such file");
  refused(test_tmpdir(), MESH_ENOENT, "not a regular file");
}

TEST(unknown_format_is_refused) {
  const char junk[] = "this is not a mesh\n\x01\x02\x03 garbage garbage\n";
  refused(test_write_file("junk.xyz", junk, sizeof(junk) - 1), MESH_EFORMAT, "unknown or unsupported format");
}

TEST(files_without_triangles_are_refused) {
  refused(test_assimp_model("PLY/points.ply"), MESH_ENOTRIS, "no triangles");
  refused(test_assimp_model("OBJ/point_cloud.obj"), MESH_ENOTRIS, "no triangles");
  const char lines[] = "v 0 0 0\nv 1 0 0\nv 0 1 0\nl 1 2\nl 2 3\n";
  refused(test_write_file("lines.obj", lines, sizeof(lines) - 1), MESH_ENOTRIS, "no triangles");
}

TEST(gltf_with_infinite_coordinates_is_refused) {
  refused(test_assimp_model("glTF2/BoxWithInfinites-glTF-Binary/BoxWithInfinites.glb"),
          MESH_ENONFINITE, "non-finite");
}

TEST(obj_with_nan_coordinates_is_refused) {
  const char obj[] = "v 0 0 0\nv 1 nan 0\nv 0 1 0\nf 1 2 3\n";
  refused(test_write_file("nan.obj", obj, sizeof(obj) - 1), MESH_ENONFINITE, "non-finite");
}

TEST(gltf_with_indices_out_of_range_is_refused) {
  refused(test_assimp_model("glTF2/IndexOutOfRange/IndexOutOfRange.gltf"), MESH_ERANGE,
          "index out of range");
  refused(test_assimp_model("glTF2/IndexOutOfRange/AllIndicesOutOfRange.gltf"), MESH_ERANGE,
          "index out of range");
}

TEST(obj_with_indices_out_of_range_is_refused) {
  const char obj[] = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n";
  char err[MESH_ERR_LEN] = "";
  mesh *m = NULL;
  int rc = mesh_import(test_write_file("range.obj", obj, sizeof(obj) - 1), NULL, &m, err, sizeof(err));
  fprintf(stderr, "range.obj -> %d: %s\n", rc, err);
  ASSERT(rc != 0);
  ASSERT(m == NULL);
  ASSERT(err[0] != '\0');
}

TEST(gltf_with_missing_buffer_is_refused) {
  refused(test_assimp_model("glTF2/MissingBin/BoxTextured.gltf"), MESH_EFORMAT, "BoxTextured0.bin");
}

TEST(off_whose_header_lies_is_refused) {
  /* assimp reads this file without failing; its log says what is wrong. */
  refused(test_assimp_model("OFF/invalid.off"), MESH_EFORMAT, "OFF");
}

TEST(gltf_with_wrong_vertex_count_for_triangles_is_refused) {
  refused(test_assimp_model("glTF2/IncorrectVertexArrays/Cube.gltf"), MESH_EFORMAT, "dropped");
}

TEST(mesh_over_the_vertex_limit_is_refused) {
  mesh_import_opts opts = {.max_vertices = 1000};
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_EQ(mesh_import(test_cgal_mesh("armadillo.off"), &opts, &m, err, sizeof(err)), MESH_ETOOBIG);
  ASSERT_STR_CONTAINS(err, "over the limit of 1000");
  ASSERT(m == NULL);
  opts.max_vertices = 0; /* the default, 5,000,000, takes it */
  ASSERT_OK(mesh_import(test_cgal_mesh("armadillo.off"), &opts, &m, err, sizeof(err)), err);
  mesh_destroy(m);
}

TEST(truncated_files_are_refused_without_crashing) {
  /* Prefixes of PLY (binary and ASCII: assimp hangs or aborts on these unless they are checked
   * first), GLB, MD2, OBJ and OFF files: refused or, for prefixes that are still complete
   * meshes, accepted — never a hang or a crash (ASan runs this too). */
  const char *files[] = {"PLY/cube_binary.ply", "PLY/cube.ply", "PLY/Wuson.ply",
                         "glTF2/BoxTextured-glTF-Binary/BoxTextured.glb", "MD2/faerie.md2",
                         "OBJ/spider.obj", "OFF/Wuson.off"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    FILE *f = fopen(test_assimp_model(files[i]), "rb");
    ASSERT(f != NULL);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    size_t cuts[] = {1, 4, 16, 64, n / 3, n / 2, n - 7, n - 1};
    for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
      const char *ext = strrchr(files[i], '.');
      char name[64];
      snprintf(name, sizeof(name), "cut%zu%s", c, ext);
      char err[MESH_ERR_LEN] = "";
      mesh *m = NULL;
      int rc = mesh_import(test_write_file(name, buf, cuts[c]), NULL, &m, err, sizeof(err));
      if (rc) {
        ASSERT(m == NULL);
        ASSERT(err[0] != '\0');
      } else {
        ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
        mesh_destroy(m);
      }
    }
  }
}

TEST(truncated_ply_strips_are_refused) {
  const char ply[] = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                     "property float z\nelement tristrips 1\nproperty list int int vertex_indices\n"
                     "end_header\n0 0 0\n1 0 0\n0 1 0\n7 0 1 2\n";
  char err[MESH_ERR_LEN] = "";
  mesh *m = NULL;
  int rc = mesh_import(test_write_file("cut.ply", ply, sizeof(ply) - 1), NULL, &m, err, sizeof(err));
  fprintf(stderr, "cut.ply -> %d: %s\n", rc, err);
  ASSERT(rc != 0);
  ASSERT(m == NULL);
}

TEST(ply_strips_with_indices_out_of_range_are_refused) {
  const char ply[] = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                     "property float z\nelement tristrips 1\nproperty list int int vertex_indices\n"
                     "end_header\n0 0 0\n1 0 0\n0 1 0\n4 0 1 2 7\n";
  refused(test_write_file("range.ply", ply, sizeof(ply) - 1), MESH_ERANGE, "references vertex 7");
}
