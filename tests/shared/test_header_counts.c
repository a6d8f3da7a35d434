/*
 * test_header_counts.c — the counts a file's header declares are checked against the file's
 * size before assimp reads it (mesh_off.c, mesh_md3.c), and files over max_file_bytes are
 * refused unread.
 *
 * Oracles: the byte counts of the files written here, and the same files with honest headers,
 * which import.
 */
#include "mesh.h"
#include "test.h"

static void refused(const char *path, const mesh_import_opts *opts, int code, const char *needle) {
  char err[MESH_ERR_LEN] = "";
  mesh *m = (mesh *)1;
  int rc = mesh_import(path, opts, &m, err, sizeof(err));
  fprintf(stderr, "%s -> %d: %s\n", path, rc, err);
  ASSERT_EQ(rc, code);
  ASSERT(m == NULL);
  ASSERT_STR_CONTAINS(err, needle);
}

static void imports(const char *path, uint32_t triangles) {
  char err[MESH_ERR_LEN] = "";
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  ASSERT_EQ(m->triangle_count, triangles);
  mesh_destroy(m);
}

TEST(off_header_declaring_more_faces_than_the_file_holds_is_refused_unread) {
  static const char lie[] = "OFF\n3 1000000000 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  ASSERT_EQ(sizeof(lie) - 1, 45);
  refused(test_write_file("lie.off", lie, sizeof(lie) - 1), NULL, MESH_EFORMAT,
          "declares 3 vertices and 1000000000 faces");
  /* The same triangle with an honest header, and with a comment and the keyword variants. */
  static const char honest[] = "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  imports(test_write_file("honest.off", honest, sizeof(honest) - 1), 1);
  static const char counts_next_line[] = "# made by hand\nOFF\n\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  imports(test_write_file("comment.off", counts_next_line, sizeof(counts_next_line) - 1), 1);
  /* A vertex count that lies: 2^40 vertices in a few bytes, and no counts at all. */
  static const char verts[] = "OFF\n1099511627776 1 0\n0 0 0\n";
  refused(test_write_file("verts.off", verts, sizeof(verts) - 1), NULL, MESH_EFORMAT, "1099511627776 vertices");
  static const char none[] = "OFF\n";
  refused(test_write_file("none.off", none, sizeof(none) - 1), NULL, MESH_EFORMAT, "no vertex and face counts");
  /* A file named otherwise is recognised by its keyword. */
  refused(test_write_file("lie.txt", lie, sizeof(lie) - 1), NULL, MESH_EFORMAT, "1000000000 faces");
  /* Real files pass: assimp-testmodels' OFF/Wuson.off (3732 faces). */
  imports(test_assimp_model("OFF/Wuson.off"), 3732);
}

TEST(files_over_max_file_bytes_are_refused_before_they_are_read) {
  static const char honest[] = "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  const char *path = test_write_file("small.off", honest, sizeof(honest) - 1);
  mesh_import_opts opts = {.max_file_bytes = sizeof(honest) - 2};
  char want[64];
  snprintf(want, sizeof(want), "has %zu bytes, more than the limit of %zu", sizeof(honest) - 1, sizeof(honest) - 2);
  refused(path, &opts, MESH_ETOOBIG, want);
  opts.max_file_bytes = sizeof(honest) - 1;
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, &opts, &m, err, sizeof(err)), err);
  mesh_destroy(m);
}
