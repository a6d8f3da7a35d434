/*
 * test_files.c — the data directory as a boundary (session.create reads only beneath the mesh
 * folders, session.export writes only beneath exports/, no error quotes a file), and files in
 * and out over JSON-RPC (mesh.upload, downloads through session.export).
 *
 * Oracles: the mesh core's import of the original file (geometry after a round trip), the
 * file's own bytes (no run of them in an error), the file system (nothing appears outside),
 * mesh_evaluate() (a download of an older version), and the tests' own base64.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "oracle.h"
#include "test.h"

#define ADMIN "files-admin-token-1"

/* Files in a folder whose names start with `prefix`. */
static int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

/* ---- reading: session.create beneath the mesh folders ------------------------------------------ */

TEST(session_create_reads_only_beneath_the_mesh_folders_and_answers_one_message) {
  const char *dir = test_tmp_path("data-read");
  const char *const args[] = {"--data", dir, "--demo", NULL};
  harness h;
  harness_start(&h, "demo", args);
  /* A symlink in meshes/ to a file outside it (one the server could read), and a dangling one. */
  char link[1200];
  snprintf(link, sizeof(link), "%s/meshes/out.off", dir);
  ASSERT_EQ(symlink(test_assimp_model("OFF/Wuson.off"), link), 0);
  snprintf(link, sizeof(link), "%s/meshes/dangling.off", dir);
  ASSERT_EQ(symlink("/nonexistent/none.off", link), 0);
  /* Existing and missing files outside, by every road: each gets the same sentence around the
   * name it gave (before, "/etc/passwd" was "unknown format" and "/etc/nope" "No such file"). */
  const char *names[] = {"/etc/passwd",       "/etc/nonexistent-file", "../../../../../../etc/passwd",
                         "../../../../../../etc/nope", "out.off", "dangling.off", "missing.off",
                         "OFF/../../../../../etc/passwd"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    char params[600], msg[600], want[800];
    snprintf(params, sizeof(params), "{\"session\":\"x\",\"mesh\":\"%s\"}", names[i]);
    ASSERT_EQ(harness_rpc_err(&h, "session.create", params, msg, sizeof(msg)), -32004);
    snprintf(want, sizeof(want), "mesh refused: no mesh called '%s' in the mesh folders (a mesh is named by its path "
             "relative to one of them)", names[i]);
    if (strcmp(msg, want) != 0) test__fail(__FILE__, __LINE__, "%s: %s", names[i], msg);
  }
  /* The same file by its name in a mesh folder opens. */
  cJSON_Delete(harness_rpc_ok(&h, "session.create", "{\"session\":\"wuson\",\"mesh\":\"OFF/Wuson.off\"}"));
  /* blend.fit's shapes are names in the same folders. */
  char msg[600];
  ASSERT_EQ(harness_rpc_err(&h, "blend.fit", "{\"session\":\"demo\",\"shape\":\"/etc/passwd\"}", msg, sizeof(msg)),
            -32004);
  ASSERT_STR_CONTAINS(msg, "no mesh called '/etc/passwd' in the mesh folders");
  harness_stop(&h);
}

TEST(no_import_error_quotes_the_file_it_read) {
  const char *dir = test_tmp_path("data-quote");
  const char *const args[] = {"--data", dir, NULL};
  harness h;
  harness_start(&h, NULL, args);
  /* A copy of the password file in meshes/ under extensions whose readers quote what they choke
   * on (the OpenGEX reader quoted 50 bytes of it). */
  size_t n = 0;
  uint8_t *secret = test_read_file("/etc/passwd", &n);
  const char *exts[] = {"ogex", "obj", "off", "ply", "stl", "dae", "gltf"};
  for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
    char path[1200], params[300], msg[1024];
    snprintf(path, sizeof(path), "%s/meshes/p.%s", dir, exts[i]);
    test_copy_file("/etc/passwd", path);
    snprintf(params, sizeof(params), "{\"session\":\"p%zu\",\"mesh\":\"p.%s\"}", i, exts[i]);
    ASSERT_EQ(harness_rpc_err(&h, "session.create", params, msg, sizeof(msg)), -32004);
    fprintf(stderr, "p.%s: %s\n", exts[i], msg);
    if (oracle_has_run_of(msg, secret, n, 12)) test__fail(__FILE__, __LINE__, "p.%s: the error quotes the file: %s", exts[i], msg);
  }
  free(secret);
  harness_stop(&h);
}

/* ---- writing: session.export beneath exports/ -------------------------------------------------- */

TEST(session_export_writes_only_beneath_exports) {
  const char *dir = test_tmp_path("data-write");
  const char *const args[] = {"--data", dir, "--demo", NULL};
  harness h;
  harness_start(&h, "demo", args);
  /* A folder inside exports/ that is a symlink to one outside. */
  const char *outside = test_tmp_path("outside-exports");
  mkdir(outside, 0700);
  char link[1200];
  snprintf(link, sizeof(link), "%s/exports/away", dir);
  ASSERT_EQ(symlink(outside, link), 0);
  char abs[1200], params[1600], msg[600];
  snprintf(abs, sizeof(abs), "%s/abs.glb", outside);
  const char *paths[] = {"../escape.glb", abs, "a\\nb.glb", "sub/../../escape.glb", "x.txt", "", "."};
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"path\":\"%s\"}", paths[i]);
    ASSERT_EQ(harness_rpc_err(&h, "session.export", params, msg, sizeof(msg)), -32602);
  }
  ASSERT_EQ(harness_rpc_err(&h, "session.export", "{\"session\":\"demo\",\"path\":\"away/x.glb\"}", msg, sizeof(msg)),
            -32008);
  ASSERT_EQ(harness_rpc_err(&h, "session.export", "{\"session\":\"demo\",\"path\":\"nofolder/x.glb\"}", msg, sizeof(msg)),
            -32008);
  /* Nothing landed outside exports/. */
  ASSERT_EQ(count_files(outside, "abs"), 0);
  ASSERT_EQ(count_files(outside, "x"), 0);
  ASSERT_EQ(count_files(dir, "escape"), 0);
  ASSERT_EQ(count_files(test_tmpdir(), "escape"), 0);
  /* A name in exports/ is written there: the shape the server has, vertex for vertex. The demo
   * has a skin, so the file names its MTL (now.mtl, with the image now_0.png beside it) and
   * each submesh's material; the download is one OBJ without them, otherwise the same bytes. */
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.6}}"));
  cJSON_Delete(harness_rpc_ok(&h, "session.export", "{\"session\":\"demo\",\"path\":\"now.obj\"}"));
  char file[1200];
  snprintf(file, sizeof(file), "%s/exports/now.obj", dir);
  size_t n = 0, m = 0;
  uint8_t *written = test_read_file(file, &n);
  uint8_t *downloaded = harness_download(&h, "demo", "obj", -1, &m);
  size_t kept = 0;
  for (size_t i = 0; i < n;) { /* the written file without its mtllib and usemtl lines */
    const uint8_t *nl = memchr(written + i, '\n', n - i);
    size_t len = nl ? (size_t)(nl - (written + i)) + 1 : n - i;
    if (!(len >= 7 && (memcmp(written + i, "mtllib ", 7) == 0 || memcmp(written + i, "usemtl ", 7) == 0)))
      memmove(written + kept, written + i, len), kept += len;
    i += len;
  }
  ASSERT(kept < n); /* it named its materials */
  ASSERT_EQ(kept, m);
  ASSERT(memcmp(written, downloaded, m) == 0);
  snprintf(file, sizeof(file), "%s/exports", dir);
  ASSERT_EQ(count_files(file, "now.mtl"), 1);
  ASSERT_EQ(count_files(file, "now_0.png"), 1);
  free(written);
  free(downloaded);
  harness_stop(&h);
  /* Without a data directory there is nowhere to write: paths are refused, downloads work. */
  const char *const none[] = {"--demo", NULL};
  harness_start(&h, "demo", none);
  ASSERT_EQ(harness_rpc_err(&h, "session.export", "{\"session\":\"demo\",\"path\":\"now.obj\"}", msg, sizeof(msg)),
            -32009);
  ASSERT_STR_CONTAINS(msg, "download");
  uint32_t nv = 0;
  free(harness_server_positions(&h, "demo", &nv));
  ASSERT(nv > 40000);
  harness_stop(&h);
}

/* ---- uploads and downloads ---------------------------------------------------------------------- */

/* Uploads the local file `path` as `name` in chunks of `chunk` bytes (base64 by the tests' own
 * encoder). */
static void upload(harness *h, const char *path, const char *name, size_t chunk) {
  size_t n = 0;
  uint8_t *data = test_read_file(path, &n);
  size_t off = 0;
  do {
    size_t k = n - off < chunk ? n - off : chunk;
    char *b64 = test_base64_encode(data + off, k);
    size_t plen = strlen(b64) + 512;
    char *params = malloc(plen);
    snprintf(params, plen, "{\"name\":\"%s\",\"data\":\"%s\",\"offset\":%zu,\"final\":%s}", name, b64, off,
             off + k == n ? "true" : "false");
    cJSON *r = harness_rpc_ok(h, "mesh.upload", params);
    ASSERT_EQ(cJSON_GetObjectItem(r, "offset")->valuedouble, off + k);
    cJSON_Delete(r);
    free(params);
    free(b64);
    off += k;
  } while (off < n);
  free(data);
}

/* A triangle as its three corners' positions, in the rotation that compares smallest (the
 * winding kept; a triangle with two equal corners has one such rotation too), for comparing
 * geometry whatever the vertex numbering. */
typedef struct tri_pos {
  float c[9];
} tri_pos;

static int cmp_tri(const void *a, const void *b) { return memcmp(a, b, sizeof(tri_pos)); }

static tri_pos *triangles_of(const mesh *m, const float *pos, uint32_t *count) {
  tri_pos *t = malloc(sizeof(tri_pos) * (m->triangle_count + 1));
  for (uint32_t f = 0; f < m->triangle_count; f++) {
    const float *c[3];
    for (int k = 0; k < 3; k++) c[k] = pos + 3 * (size_t)m->triangles[3 * f + k];
    for (int r = 0; r < 3; r++) {
      tri_pos x;
      for (int k = 0; k < 3; k++) memcpy(x.c + 3 * k, c[(r + k) % 3], sizeof(float) * 3);
      if (r == 0 || memcmp(&x, &t[f], sizeof(x)) < 0) t[f] = x;
    }
  }
  qsort(t, m->triangle_count, sizeof(tri_pos), cmp_tri);
  *count = m->triangle_count;
  return t;
}

/* Same triangles at the same positions (as multisets), and the same positions with each target
 * at weight 1 when both have targets. */
static void same_geometry(const char *what, const mesh *want, const mesh *got, int with_targets) {
  float *pw = malloc(sizeof(float) * 3 * (want->vertex_count + 1)), *pg = malloc(sizeof(float) * 3 * (got->vertex_count + 1));
  uint32_t targets = with_targets ? want->target_count : 0;
  if (with_targets) ASSERT_EQ(got->target_count, want->target_count);
  for (uint32_t t = 0; t <= targets; t++) {
    float *ww = calloc(want->target_count + 1, sizeof(float)), *wg = calloc(got->target_count + 1, sizeof(float));
    if (t > 0) {
      ww[t - 1] = 1;
      wg[t - 1] = 1;
      ASSERT(strcmp(want->targets[t - 1].name, got->targets[t - 1].name) == 0);
    }
    mesh_evaluate(want, ww, NULL, pw);
    mesh_evaluate(got, wg, NULL, pg);
    uint32_t na, nb;
    tri_pos *a = triangles_of(want, pw, &na), *b = triangles_of(got, pg, &nb);
    if (na != nb) test__fail(__FILE__, __LINE__, "%s: %u triangles, want %u", what, nb, na);
    for (uint32_t i = 0; i < na; i++)
      if (memcmp(&a[i], &b[i], sizeof(tri_pos)) != 0)
        test__fail(__FILE__, __LINE__, "%s (target %u): triangle %u differs", what, t, i);
    free(a);
    free(b);
    free(ww);
    free(wg);
  }
  free(pw);
  free(pg);
}

/* The OBJ a download gives: vertex i is `v` line i (exact: %.9g), faces 1-based. */
static void same_obj(const char *what, const mesh *want, char *obj) {
  uint32_t nv = 0, nf = 0;
  uint32_t *tris = malloc(sizeof(uint32_t) * 3 * (want->triangle_count + 1));
  char *at = obj, *end = obj + strlen(obj), *line;
  while ((line = test_next_line(&at, end)) != NULL) {
    float v[3];
    unsigned a, b, c;
    if (sscanf(line, "v %f %f %f", &v[0], &v[1], &v[2]) == 3) {
      ASSERT(nv < want->vertex_count);
      if (memcmp(v, want->positions + 3 * (size_t)nv, sizeof(v)) != 0)
        test__fail(__FILE__, __LINE__, "%s: vertex %u differs", what, nv);
      nv++;
    } else if (sscanf(line, "f %u/%*u/%*u %u/%*u/%*u %u", &a, &b, &c) == 3 || sscanf(line, "f %u//%*u %u//%*u %u", &a, &b, &c) == 3) {
      ASSERT(nf < want->triangle_count);
      tris[3 * nf] = a - 1, tris[3 * nf + 1] = b - 1, tris[3 * nf + 2] = c - 1;
      nf++;
    }
  }
  if (nv != want->vertex_count) test__fail(__FILE__, __LINE__, "%s: %u vertices, want %u", what, nv, want->vertex_count);
  ASSERT_EQ(nf, want->triangle_count);
  mesh got = *want; /* the same vertices, the OBJ's triangles */
  got.triangles = tris;
  got.target_count = 0;
  same_geometry(what, want, &got, 0);
  free(tris);
}

TEST(an_upload_of_every_supported_format_round_trips_through_download_with_identical_geometry) {
  const char *dir = test_tmp_path("data-formats");
  const char *const args[] = {"--data", dir, NULL};
  harness h;
  harness_start_token(&h, NULL, args, ADMIN); /* uploads need an admin token */
  /* An MD3 made here (no MD3 in Debian's test models). */
  static unsigned char md3[16384];
  const char *frames[4] = {"idle1", "idle2", "run1", "run2"};
  size_t md3_len = oracle_write_md3(md3, frames, 4);
  const char *md3_path = test_write_file("tetra.md3", md3, md3_len);
  const struct {
    const char *files[2]; /* the mesh, and a file it needs */
    int targets;          /* compare the targets too */
  } cases[] = {
      {{"OBJ/WusonOBJ.obj"}, 0},
      {{"PLY/Wuson.ply"}, 0},
      {{"PLY/cube_binary.ply"}, 0},
      {{"OFF/Wuson.off"}, 0},
      {{"STL/Spider_ascii.stl"}, 0},
      {{"STL/Spider_binary.stl"}, 0},
      {{"glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf",
        "glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.bin"}, 1},
      {{"glTF2/BoxTextured-glTF-Binary/BoxTextured.glb"}, 0},
      {{"MD2/faerie.md2"}, 0},
      {{NULL}, 0}, /* the MD3 */
      {{"Collada/duck.dae"}, 0},
      {{"FBX/box.fbx"}, 0},
      {{"3DS/fels.3ds"}, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *main_path = cases[i].files[0] ? test_assimp_model(cases[i].files[0]) : md3_path;
    char local[1024];
    snprintf(local, sizeof(local), "%s", main_path);
    const char *name = strrchr(local, '/') + 1;
    /* Small chunks, so that every file takes several (and the offsets are checked). */
    for (int f = 0; f < 2 && (f == 0 || cases[i].files[f]); f++) {
      const char *p = f == 0 ? local : test_assimp_model(cases[i].files[f]);
      upload(&h, p, strrchr(p, '/') + 1, 40000);
    }
    char params[600];
    snprintf(params, sizeof(params), "{\"session\":\"s%zu\",\"mesh\":\"%s\"}", i, name);
    cJSON_Delete(harness_rpc_ok(&h, "session.create", params));
    /* The oracle: the mesh core's own import of the original file. */
    mesh *want = NULL;
    char err[MESH_ERR_LEN];
    ASSERT_OK(mesh_import(local, NULL, &want, err, sizeof(err)), err);
    char session[16];
    snprintf(session, sizeof(session), "s%zu", i);
    size_t n = 0;
    uint8_t *obj = harness_download(&h, session, "obj", -1, &n);
    obj[n] = '\0';
    same_obj(name, want, (char *)obj);
    free(obj);
    uint8_t *glb = harness_download(&h, session, "glb", -1, &n);
    char back[1024];
    snprintf(back, sizeof(back), "%s/back-%zu.glb", test_tmpdir(), i);
    FILE *fp = fopen(back, "wb");
    ASSERT_EQ(fwrite(glb, 1, n, fp), n);
    fclose(fp);
    free(glb);
    mesh *got = NULL;
    ASSERT_OK(mesh_import(back, NULL, &got, err, sizeof(err)), err);
    same_geometry(name, want, got, cases[i].targets);
    fprintf(stderr, "%s: %u vertices, %u triangles, %u targets round-trip\n", name, want->vertex_count,
            want->triangle_count, want->target_count);
    mesh_destroy(got);
    mesh_destroy(want);
  }
  harness_stop(&h);
}

TEST(uploads_continue_only_at_their_offset_stay_within_the_limit_and_leave_nothing_when_abandoned) {
  const char *dir = test_tmp_path("data-upload");
  const char *const args[] = {"--data", dir, "--max-upload-mb", "1", NULL};
  harness h;
  harness_start(&h, NULL, args);
  char meshes[1200], msg[600];
  snprintf(meshes, sizeof(meshes), "%s/meshes", dir);
  char *b64 = test_base64_encode("0123456789", 10);
  char params[1400];
  snprintf(params, sizeof(params), "{\"name\":\"a.off\",\"data\":\"%s\",\"offset\":0}", b64);
  cJSON_Delete(harness_rpc_ok(&h, "mesh.upload", params));
  /* Not where it left off. */
  snprintf(params, sizeof(params), "{\"name\":\"a.off\",\"data\":\"%s\",\"offset\":11}", b64);
  ASSERT_EQ(harness_rpc_err(&h, "mesh.upload", params, msg, sizeof(msg)), -32006);
  snprintf(params, sizeof(params), "{\"name\":\"b.off\",\"data\":\"%s\",\"offset\":10}", b64);
  ASSERT_EQ(harness_rpc_err(&h, "mesh.upload", params, msg, sizeof(msg)), -32006);
  /* Not base64, and names that are not names in meshes/. */
  ASSERT_EQ(harness_rpc_err(&h, "mesh.upload", "{\"name\":\"c.off\",\"data\":\"@@@@\",\"offset\":0}", msg, sizeof(msg)),
            -32602);
  const char *bad[] = {"../c.off", "/tmp/c.off", "a/../../c.off", "x\\ny.off", ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(params, sizeof(params), "{\"name\":\"%s\",\"data\":\"%s\",\"offset\":0,\"final\":true}", bad[i], b64);
    ASSERT_EQ(harness_rpc_err(&h, "mesh.upload", params, msg, sizeof(msg)), -32602);
  }
  ASSERT_EQ(count_files(dir, "c.off"), 0);
  ASSERT(access("/tmp/c.off", F_OK) != 0);
  free(b64);
  /* Over --max-upload-mb: refused, and the partial file is gone. */
  static uint8_t big[700000];
  char *b = test_base64_encode(big, sizeof(big));
  size_t plen = strlen(b) + 200;
  char *p = malloc(plen);
  snprintf(p, plen, "{\"name\":\"big.off\",\"data\":\"%s\",\"offset\":0}", b);
  cJSON_Delete(harness_rpc_ok(&h, "mesh.upload", p));
  snprintf(p, plen, "{\"name\":\"big.off\",\"data\":\"%s\",\"offset\":%zu}", b, sizeof(big));
  ASSERT_EQ(harness_rpc_err(&h, "mesh.upload", p, msg, sizeof(msg)), -32007);
  free(p);
  free(b);
  ASSERT_EQ(count_files(meshes, "big.off"), 0);
  ASSERT_EQ(count_files(meshes, ".deformd-"), 0); /* every failed chunk ended its upload */
  /* A connection that goes away mid-upload leaves nothing (the temporary file is removed on the
   * server's pool: wait for it). */
  client_close(&h.rpc);
  char err[256];
  ASSERT_OK(client_connect(&h.rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  b64 = test_base64_encode("0123456789", 10);
  snprintf(params, sizeof(params), "{\"name\":\"d.off\",\"data\":\"%s\",\"offset\":0}", b64);
  free(b64);
  cJSON_Delete(harness_rpc_ok(&h, "mesh.upload", params));
  ASSERT_EQ(count_files(meshes, ".deformd-"), 1);
  client_close(&h.rpc);
  int left = 1;
  for (int i = 0; i < 200 && left; i++) {
    left = count_files(meshes, ".deformd-");
    if (left) usleep(50000);
  }
  ASSERT_EQ(left, 0);
  ASSERT_EQ(count_files(meshes, "d.off"), 0);
  ASSERT_OK(client_connect(&h.rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  /* --data none: no files at all. */
  harness_stop(&h);
  const char *const none[] = {NULL};
  harness_start(&h, NULL, none);
  ASSERT_EQ(harness_rpc_err(&h, "mesh.upload", "{\"name\":\"a.off\",\"data\":\"\",\"offset\":0,\"final\":true}", msg,
                            sizeof(msg)),
            -32009);
  harness_stop(&h);
}

TEST(a_download_in_chunks_is_of_one_version_while_the_session_changes) {
  const char *dir = test_tmp_path("data-download");
  const char *const args[] = {"--data", dir, "--demo", NULL};
  harness h;
  harness_start(&h, "demo", args);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.75}}"));
  /* The first chunk names the version; the session changes; the rest asks for that version. */
  cJSON *r = harness_rpc_ok(&h, "session.export", "{\"session\":\"demo\",\"format\":\"obj\",\"max_bytes\":1000000}");
  uint64_t version = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  size_t total = (size_t)cJSON_GetObjectItem(r, "total")->valuedouble;
  ASSERT_EQ(version, 1);
  ASSERT(total > 3000000);
  uint8_t *file = malloc(total + 1);
  size_t have = 0, n = 0;
  ASSERT_OK(test_base64_decode(cJSON_GetObjectItem(r, "data")->valuestring, file, total, &n), NULL);
  ASSERT_EQ(n, 1000000);
  have = n;
  cJSON_Delete(r);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.1,\"smile_L\":1}}"));
  while (have < total) {
    char params[200];
    snprintf(params, sizeof(params), "{\"session\":\"demo\",\"format\":\"obj\",\"offset\":%zu,\"version\":%llu,"
             "\"max_bytes\":1000000}", have, (unsigned long long)version);
    r = harness_rpc_ok(&h, "session.export", params);
    ASSERT_EQ(cJSON_GetObjectItem(r, "offset")->valuedouble, have);
    ASSERT_OK(test_base64_decode(cJSON_GetObjectItem(r, "data")->valuestring, file + have, total - have, &n), NULL);
    have += n;
    cJSON_Delete(r);
  }
  file[total] = '\0';
  /* Oracle: the demo head at version 1's weights, by mesh_evaluate. */
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  float *w = calloc(m->target_count, sizeof(float));
  w[mesh_find_target(m, "jaw_open")] = 0.75f;
  float *pos = malloc(sizeof(float) * 3 * m->vertex_count);
  mesh_evaluate(m, w, NULL, pos);
  uint32_t v = 0;
  uint8_t *copy = malloc(total + 1);
  memcpy(copy, file, total + 1);
  char *at = (char *)copy, *line;
  while (v < m->vertex_count && (line = test_next_line(&at, (char *)copy + total)) != NULL) {
    float p[3];
    if (sscanf(line, "v %f %f %f", &p[0], &p[1], &p[2]) == 3) {
      if (memcmp(p, pos + 3 * (size_t)v, sizeof(p)) != 0) test__fail(__FILE__, __LINE__, "vertex %u differs", v);
      v++;
    }
  }
  free(copy);
  ASSERT_EQ(v, m->vertex_count);
  /* A new connection asking for version 1 later gets the same bytes (rebuilt from the store). */
  client_close(&h.rpc);
  char err[256];
  ASSERT_OK(client_connect(&h.rpc, "127.0.0.1", h.rpc_port, err, sizeof(err)), err);
  size_t again_len = 0;
  uint8_t *again = harness_download(&h, "demo", "obj", (int64_t)version, &again_len);
  ASSERT_EQ(again_len, total);
  ASSERT(memcmp(again, file, total) == 0);
  free(again);
  free(file);
  free(pos);
  free(w);
  mesh_destroy(m);
  harness_stop(&h);
}

/* A GLB download keeps the session as a glTF file should (issue: it baked the expression into
 * POSITION with every default weight 0, so Blender lost the neutral face and applied a smile
 * twice): POSITION is the base with the sculpt layer, the targets are the morph targets, and
 * the current weights their default weights. Oracles: the OBJ download (the evaluated shape,
 * exact) now, and again with every weight at 0 (base + sculpt). */
TEST(a_glb_download_keeps_the_base_the_targets_and_the_weights_as_default_weights) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set",
                              "{\"session\":\"demo\",\"offsets\":{\"20400\":[0,0.004,0.002],\"100\":[0.001,0,0]}}"));
  cJSON_Delete(harness_rpc_ok(&h, "weights.set",
                              "{\"session\":\"demo\",\"weights\":{\"smile_L\":1,\"smile_R\":1,\"jaw_open\":0.5}}"));
  uint32_t nv = 0, nb = 0;
  float *shape = harness_server_positions(&h, "demo", &nv);
  size_t n = 0;
  uint8_t *glb = harness_download(&h, "demo", "glb", -1, &n);
  char path[1024];
  snprintf(path, sizeof(path), "%s/now.glb", test_tmpdir());
  FILE *fp = fopen(path, "wb");
  ASSERT_EQ(fwrite(glb, 1, n, fp), n);
  fclose(fp);
  free(glb);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set",
                              "{\"session\":\"demo\",\"weights\":{\"smile_L\":0,\"smile_R\":0,\"jaw_open\":0}}"));
  float *base = harness_server_positions(&h, "demo", &nb);
  ASSERT_EQ(nb, nv);
  mesh *got = NULL;
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_import(path, NULL, &got, err, sizeof(err)), err);
  ASSERT_EQ(got->vertex_count, nv);
  ASSERT_EQ(got->target_count, 68);
  const double diagonal = mesh_bbox_diagonal(got), tol = 1e-5 * diagonal;
  /* The default weights are the session's weights. */
  float *w = calloc(got->target_count, sizeof(float)), *zero = calloc(got->target_count, sizeof(float));
  for (uint32_t t = 0; t < got->target_count; t++) {
    const char *name = got->targets[t].name;
    float want = strcmp(name, "smile_L") == 0 || strcmp(name, "smile_R") == 0 ? 1.0f
                 : strcmp(name, "jaw_open") == 0                             ? 0.5f
                                                                             : 0.0f;
    if (got->targets[t].default_weight != want)
      test__fail(__FILE__, __LINE__, "target %s: default weight %g, the session's weight %g", name,
                 got->targets[t].default_weight, want);
    w[t] = got->targets[t].default_weight;
  }
  /* POSITION is base + sculpt; at its default weights the file is the session's current shape. */
  float *p = malloc(sizeof(float) * 3 * nv);
  double worst_base = 0, worst_shape = 0;
  mesh_evaluate(got, zero, NULL, p);
  for (size_t i = 0; i < 3 * (size_t)nv; i++) worst_base = fmax(worst_base, fabs(p[i] - base[i]));
  mesh_evaluate(got, w, NULL, p);
  for (size_t i = 0; i < 3 * (size_t)nv; i++) worst_shape = fmax(worst_shape, fabs(p[i] - shape[i]));
  fprintf(stderr, "GLB: base + sculpt within %.3g, current shape within %.3g (diagonal %.3g)\n", worst_base,
          worst_shape, diagonal);
  ASSERT(worst_base <= tol);
  ASSERT(worst_shape <= tol);
  free(p);
  free(w);
  free(zero);
  free(shape);
  free(base);
  mesh_destroy(got);
  harness_stop(&h);
}

/* A first run for a user whose home has no ~/.local/share (a new account, a container): the
 * default data directory and its missing parents are made, 0700, and the server starts (it said
 * "cannot create the data directory …/.local/share/deformd: No such file or directory"). */
TEST(a_first_run_with_an_empty_home_makes_the_default_data_directory) {
  const char *home = test_tmp_path("empty-home");
  ASSERT(mkdir(home, 0755) == 0 || errno == EEXIST);
  char out[1200], cmd[4096];
  snprintf(out, sizeof(out), "%s/ports", home);
  snprintf(cmd, sizeof(cmd),
           "cd / && env -u XDG_DATA_HOME -u DEFORMD_ADMIN_TOKEN HOME='%s' '%s' --demo --stream-port 0 --rpc-port 0 "
           "--http-port 0 >'%s' 2>'%s.log' & pid=$!; "
           "for i in $(seq 600); do grep -q stream_port '%s' && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done; "
           "kill $pid; wait $pid",
           home, getenv("DEFORMD_BIN"), out, out, out);
  ASSERT_EQ(system(cmd), 0); /* it stopped on SIGTERM with status 0 */
  FILE *f = fopen(out, "r");
  char line[256] = "";
  ASSERT(f && fgets(line, sizeof(line), f));
  fclose(f);
  ASSERT_STR_CONTAINS(line, "stream_port=");
  const char *made[] = {"/.local", "/.local/share", "/.local/share/deformd"};
  for (size_t i = 0; i < 3; i++) {
    char p[1300];
    snprintf(p, sizeof(p), "%s%s", home, made[i]);
    struct stat st;
    ASSERT(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    ASSERT_EQ(st.st_mode & 0777, 0700);
  }
  char db[1300];
  snprintf(db, sizeof(db), "%s/.local/share/deformd/deformd.sqlite3", home);
  ASSERT(access(db, F_OK) == 0);
}
