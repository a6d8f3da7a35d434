/*
 * test_confine.c — confined imports (a name resolved beneath folders, never a path anywhere),
 * messages that echo nothing a file says, and exports into memory.
 *
 * Oracles: the plain (unconfined) import of the same file, the file's own bytes (no run of
 * them appears in a redacted message), and mesh_export's file for mesh_export_mem.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mesh_internal.h"
#include "oracle.h"
#include "test.h"

/* A folder under the test's tmpdir (made once per name) and an open descriptor on it. */
static const char *folder(const char *name, int *fd) {
  static char buf[4][1024];
  static int slot;
  char *p = buf[slot++ % 4];
  snprintf(p, 1024, "%s/%s", test_tmpdir(), name);
  mkdir(p, 0700);
  if (fd) {
    *fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT(*fd >= 0);
  }
  return p;
}

static int import_in(int root, const char *name, int redact, mesh **m, char *err) {
  mesh_import_opts o = {.roots = &root, .root_count = 1, .redact = redact};
  return mesh_import(name, &o, m, err, MESH_ERR_LEN);
}

TEST(confined_import_by_relative_name_gives_the_same_mesh_as_the_plain_import) {
  int root;
  const char *dir = folder("meshes-same", &root);
  char path[1200];
  mkdir(strcat(strcpy(path, dir), "/OFF"), 0700);
  strcat(path, "/Wuson.off");
  test_copy_file(test_assimp_model("OFF/Wuson.off"), path);
  mesh *a = NULL, *b = NULL;
  char err[MESH_ERR_LEN] = "";
  ASSERT_OK(mesh_import(test_assimp_model("OFF/Wuson.off"), NULL, &a, err, sizeof(err)), err);
  ASSERT_OK(import_in(root, "OFF/Wuson.off", 1, &b, err), err);
  ASSERT_EQ(b->vertex_count, a->vertex_count);
  ASSERT_EQ(b->triangle_count, a->triangle_count);
  ASSERT(memcmp(a->positions, b->positions, sizeof(float) * 3 * a->vertex_count) == 0);
  ASSERT(memcmp(a->triangles, b->triangles, sizeof(uint32_t) * 3 * a->triangle_count) == 0);
  mesh_destroy(a);
  mesh_destroy(b);
  close(root);
}

TEST(confined_import_answers_one_message_for_missing_outside_absolute_and_symlinked_names) {
  int root;
  const char *dir = folder("meshes-escape", &root);
  const char *outside = folder("outside", NULL);
  char target[1200], link[1200];
  snprintf(target, sizeof(target), "%s/secret.off", outside);
  test_copy_file(test_assimp_model("OFF/Wuson.off"), target);
  snprintf(link, sizeof(link), "%s/out.off", dir);
  ASSERT_EQ(symlink(target, link), 0);
  snprintf(link, sizeof(link), "%s/rel.off", dir);
  ASSERT_EQ(symlink("../outside/secret.off", link), 0);
  snprintf(link, sizeof(link), "%s/dangling.off", dir);
  ASSERT_EQ(symlink("../outside/nothing.off", link), 0);
  snprintf(link, sizeof(link), "%s/folder.off", dir);
  mkdir(link, 0700);
  /* Every name that is not a readable mesh beneath the folder: existing or not, outside or not. */
  const char *names[] = {target, "../outside/secret.off", "out.off", "rel.off", "dangling.off", "missing.off",
                         "folder.off", "a/../../outside/secret.off", "./rel.off", "x\nsecret.off", ""};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    mesh *m = NULL;
    char err[MESH_ERR_LEN] = "", want[2 * MESH_ERR_LEN];
    ASSERT_EQ(import_in(root, names[i], 1, &m, err), MESH_ENOENT);
    ASSERT(m == NULL);
    /* The same sentence around the echoed name (control characters shown as '?'). */
    char shown[256];
    size_t k = 0;
    for (const char *c = names[i]; *c; c++) shown[k++] = (unsigned char)*c < 0x20 ? '?' : *c;
    shown[k] = '\0';
    snprintf(want, sizeof(want), "no mesh called '%s' in the mesh folders (a mesh is named by its path relative to "
             "one of them)", shown);
    if (strcmp(err, want) != 0) test__fail(__FILE__, __LINE__, "name '%s': '%s'", names[i], err);
  }
  /* The same file through a plain import is readable: the refusals above are the confinement. */
  mesh *m = NULL;
  char err[MESH_ERR_LEN] = "";
  ASSERT_OK(mesh_import(target, NULL, &m, err, sizeof(err)), err);
  mesh_destroy(m);
  close(root);
}

TEST(a_gltf_buffer_outside_the_folder_is_not_read_by_a_confined_import) {
  int root;
  const char *dir = folder("meshes-gltf", &root);
  char src[1200], from[1300], to[1300];
  snprintf(src, sizeof(src), "%s", test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf"));
  src[strlen(src) - 5] = '\0';
  /* Inside: the .gltf with its buffer beside it imports. */
  snprintf(from, sizeof(from), "%s.gltf", src);
  snprintf(to, sizeof(to), "%s/cube.gltf", dir);
  test_copy_file(from, to);
  snprintf(from, sizeof(from), "%s.bin", src);
  snprintf(to, sizeof(to), "%s/AnimatedMorphCube.bin", dir);
  test_copy_file(from, to);
  mesh *m = NULL;
  char err[MESH_ERR_LEN] = "";
  ASSERT_OK(import_in(root, "cube.gltf", 1, &m, err), err);
  uint32_t targets = m->target_count;
  ASSERT(targets >= 2);
  mesh_destroy(m);
  /* The same file naming its buffer "../elsewhere/AnimatedMorphCube.bin": readable unconfined,
   * refused confined. */
  const char *elsewhere = folder("elsewhere", NULL);
  snprintf(to, sizeof(to), "%s/AnimatedMorphCube.bin", elsewhere);
  test_copy_file(from, to);
  snprintf(from, sizeof(from), "%s.gltf", src);
  FILE *f = fopen(from, "rb");
  ASSERT(f != NULL);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  char *uri = strstr(text, "\"AnimatedMorphCube.bin\"");
  ASSERT(uri != NULL);
  static char patched[1 << 20];
  size_t head = (size_t)(uri - text);
  snprintf(patched, sizeof(patched), "%.*s\"../elsewhere/AnimatedMorphCube.bin\"%s", (int)head, text,
           uri + strlen("\"AnimatedMorphCube.bin\""));
  snprintf(to, sizeof(to), "%s/escape.gltf", dir);
  f = fopen(to, "wb");
  ASSERT(f != NULL);
  fputs(patched, f);
  fclose(f);
  ASSERT_OK(mesh_import(to, NULL, &m, err, sizeof(err)), err);
  ASSERT_EQ(m->target_count, targets);
  mesh_destroy(m);
  m = NULL;
  ASSERT(import_in(root, "escape.gltf", 1, &m, err) != 0);
  ASSERT(m == NULL);
  fprintf(stderr, "confined: %s\n", err);
  close(root);
}

TEST(redacted_import_errors_contain_no_bytes_of_the_file) {
  int root;
  const char *dir = folder("meshes-redact", &root);
  /* A text file with nothing a mesh reader accepts, under extensions whose readers quote what
   * they choke on (assimp's OpenGEX reader quoted 50 bytes of /etc/passwd), and a PLY whose
   * header line our own check used to echo. */
  static const char secret[] =
      "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
      "list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin\nirc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin\n";
  static const char ply[] = "ply\nformat ascii 1.0\nelement vertex 3\nproperty hunter2-password x\nend_header\n";
  struct {
    const char *name;
    const char *text;
  } files[] = {{"p.ogex", secret}, {"p.obj", secret}, {"p.off", secret}, {"p.gltf", secret},
               {"p.stl", secret}, {"p.dae", secret}, {"p.ply", ply}};
  int plain_leaks = 0;
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
    FILE *f = fopen(path, "wb");
    ASSERT(f != NULL);
    fputs(files[i].text, f);
    fclose(f);
    mesh *m = NULL;
    char err[MESH_ERR_LEN] = "";
    ASSERT(import_in(root, files[i].name, 1, &m, err) != 0);
    fprintf(stderr, "%s: %s\n", files[i].name, err);
    /* The name the caller gave may be echoed; no run of 12 bytes of the file (words like "property" may be both). */
    char without_name[MESH_ERR_LEN];
    snprintf(without_name, sizeof(without_name), "%s", err);
    char *at = strstr(without_name, files[i].name);
    if (at) memset(at, '#', strlen(files[i].name));
    if (oracle_has_run_of(without_name, (const uint8_t *)files[i].text, strlen(files[i].text), 12))
      test__fail(__FILE__, __LINE__, "%s: the message quotes the file: %s", files[i].name, err);
    ASSERT(!strstr(err, "hunter2") && !strstr(err, "root:x"));
    /* Unredacted, the same imports do quote some of them (what redaction is for). */
    m = NULL;
    ASSERT(import_in(root, files[i].name, 0, &m, err) != 0);
    at = strstr(err, files[i].name);
    if (at) memset(at, '#', strlen(files[i].name));
    plain_leaks += oracle_has_run_of(err, (const uint8_t *)files[i].text, strlen(files[i].text), 12);
    fprintf(stderr, "  unredacted: %s\n", err);
  }
  ASSERT(plain_leaks >= 2);
  close(root);
}

TEST(redaction_keeps_the_callers_name_and_replaces_other_quotes) {
  char err[MESH_ERR_LEN];
  snprintf(err, sizeof(err), "'x.ply': PLY: bad property line 'secret stuff' (\"more\") in assimp's reader");
  mesh__redact(err, sizeof(err), 1);
  ASSERT(strcmp(err, "'x.ply': PLY: bad property line '\xe2\x80\xa6' (\"\xe2\x80\xa6\") in assimp's reader") == 0);
}

TEST(mesh_name_ok_takes_relative_names_only) {
  const char *good[] = {"a.obj", "MD2/faerie.md2", "a b/c.d", "x..y.obj", ".hidden.obj"};
  const char *bad[] = {"", "/etc/passwd", "../x.obj", "a/../b.obj", "a//b.obj", "a/", "./a.obj", "a/./b",
                       "x\ny.obj", "a\\b.obj", "tab\t.obj"};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    if (!mesh_name_ok(good[i], 1024)) test__fail(__FILE__, __LINE__, "'%s' refused", good[i]);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (mesh_name_ok(bad[i], 1024)) test__fail(__FILE__, __LINE__, "'%s' accepted", bad[i]);
  ASSERT(!mesh_name_ok("abcdef.obj", 5));
}

TEST(mesh_open_beneath_refuses_every_way_out) {
  int root;
  const char *dir = folder("beneath", &root);
  char p[1200];
  snprintf(p, sizeof(p), "%s/in.txt", dir);
  FILE *f = fopen(p, "w");
  fputs("x", f);
  fclose(f);
  snprintf(p, sizeof(p), "%s/up", dir);
  ASSERT_EQ(symlink("..", p), 0);
  int fd = mesh_open_beneath(root, "in.txt", O_RDONLY, 0);
  ASSERT(fd >= 0);
  close(fd);
  ASSERT_EQ(mesh_open_beneath(root, "../beneath/in.txt", O_RDONLY, 0), -EXDEV);
  ASSERT_EQ(mesh_open_beneath(root, "/etc/hostname", O_RDONLY, 0), -EXDEV);
  ASSERT_EQ(mesh_open_beneath(root, "up/beneath/in.txt", O_RDONLY, 0), -EXDEV);
  ASSERT_EQ(mesh_open_beneath(root, "/proc/self/root/etc/hostname", O_RDONLY, 0), -EXDEV);
  /* Creating is confined the same way. */
  ASSERT(mesh_open_beneath(root, "up/new.txt", O_WRONLY | O_CREAT | O_EXCL, 0600) < 0);
  snprintf(p, sizeof(p), "%s/new.txt", test_tmpdir());
  ASSERT(access(p, F_OK) != 0);
  close(root);
}

TEST(export_into_memory_gives_the_bytes_of_the_file_export) {
  mesh *m = oracle_uv_sphere(8, 12, 1.0);
  for (int fmt = MESH_FORMAT_OBJ; fmt <= MESH_FORMAT_GLB; fmt++) {
    char path[1024], err[MESH_ERR_LEN] = "";
    snprintf(path, sizeof(path), "%s/mem.%s", test_tmpdir(), fmt == MESH_FORMAT_OBJ ? "obj" : "glb");
    ASSERT_OK(mesh_export(m, NULL, path, (mesh_format)fmt, err, sizeof(err)), err);
    uint8_t *bytes = NULL;
    size_t len = 0;
    ASSERT_OK(mesh_export_mem(m, NULL, (mesh_format)fmt, &bytes, &len, err, sizeof(err)), err);
    FILE *f = fopen(path, "rb");
    ASSERT(f != NULL);
    uint8_t *disk = malloc(len + 1);
    ASSERT_EQ(fread(disk, 1, len + 1, f), len);
    fclose(f);
    ASSERT(memcmp(disk, bytes, len) == 0);
    free(disk);
    free(bytes);
  }
  mesh_destroy(m);
}
