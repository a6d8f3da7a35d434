/*
 * test_import_worker.c — untrusted mesh files are parsed by `deformd --import-worker`, a child
 * with memory and time limits: a file that lies, a worker that crashes, hangs, answers garbage
 * or passes its memory limit all become -32004 with a reason, and the server neither grows nor
 * stops serving.
 *
 * Oracles: the server's own resident memory read from /proc (its peak, VmHWM, so nothing that
 * came and went between two readings is missed), the byte counts of files written here, and a
 * valid MD3 built here that the same server accepts.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"

/* The 45-byte OFF of the issue: a triangle, and a header that declares 1,000,000,000 faces. */
static const char lying_off[] = "OFF\n3 1000000000 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";

static void put32(uint8_t *b, size_t at, uint32_t x) {
  for (int k = 0; k < 4; k++) b[at + (size_t)k] = (uint8_t)(x >> (8 * k));
}

static void putf(uint8_t *b, size_t at, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put32(b, at, u);
}

/* A real MD3 (Quake III's layout: header, frames, tags, surfaces): two octahedron surfaces, three
 * frames, one tag. Written into b (at least 4096 bytes); returns its size. */
static size_t build_md3(uint8_t *b) {
  static const int16_t v[6][3] = {{64, 0, 0}, {-64, 0, 0}, {0, 64, 0}, {0, -64, 0}, {0, 0, 64}, {0, 0, -64}};
  static const uint32_t t[8][3] = {{0, 2, 4}, {2, 1, 4}, {1, 3, 4}, {3, 0, 4},
                                   {2, 0, 5}, {1, 2, 5}, {3, 1, 5}, {0, 3, 5}};
  const uint32_t frames = 3, tags = 1, surfaces = 2, nv = 6, nt = 8;
  memset(b, 0, 4096);
  memcpy(b, "IDP3", 4);
  put32(b, 4, 15);
  memcpy(b + 8, "octahedra", 9);
  put32(b, 76, frames);
  put32(b, 80, tags);
  put32(b, 84, surfaces);
  size_t at = 108;
  put32(b, 92, (uint32_t)at); /* frames */
  for (uint32_t f = 0; f < frames; f++, at += 56) {
    for (int k = 0; k < 6; k++) putf(b, at + 4 * (size_t)k, k < 3 ? -3.0f : 3.0f);
    putf(b, at + 36, 3.0f);
    snprintf((char *)b + at + 40, 16, "wave%u", f + 1);
  }
  put32(b, 96, (uint32_t)at); /* tags */
  for (uint32_t f = 0; f < frames * tags; f++, at += 112) {
    memcpy(b + at, "tag_head", 8);
    putf(b, at + 76, 1.0f), putf(b, at + 92, 1.0f), putf(b, at + 108, 1.0f); /* identity axes */
  }
  put32(b, 100, (uint32_t)at); /* surfaces */
  for (uint32_t s = 0; s < surfaces; s++) {
    size_t sh = at;
    uint32_t ofs_shader = 108, ofs_tri = ofs_shader + 68, ofs_st = ofs_tri + 12 * nt, ofs_xyz = ofs_st + 8 * nv,
             ofs_end = ofs_xyz + 8 * nv * frames;
    memcpy(b + sh, "IDP3", 4);
    snprintf((char *)b + sh + 4, 64, "part%u", s);
    put32(b, sh + 72, frames);
    put32(b, sh + 76, 1);
    put32(b, sh + 80, nv);
    put32(b, sh + 84, nt);
    put32(b, sh + 88, ofs_tri);
    put32(b, sh + 92, ofs_shader);
    put32(b, sh + 96, ofs_st);
    put32(b, sh + 100, ofs_xyz);
    put32(b, sh + 104, ofs_end);
    memcpy(b + sh + ofs_shader, "skin", 4);
    for (uint32_t i = 0; i < nt; i++)
      for (int c = 0; c < 3; c++) put32(b, sh + ofs_tri + 12 * i + 4 * (size_t)c, t[i][c]);
    for (uint32_t i = 0; i < nv; i++) putf(b, sh + ofs_st + 8 * i, 0.1f * (float)i), putf(b, sh + ofs_st + 8 * i + 4, 0.5f);
    for (uint32_t f = 0; f < frames; f++)
      for (uint32_t i = 0; i < nv; i++)
        for (int k = 0; k < 3; k++) {
          int16_t x = (int16_t)(v[i][k] + (k == 0 ? (int16_t)(10 * f + 160 * s) : 0));
          b[sh + ofs_xyz + 8 * (f * nv + i) + 2 * (size_t)k] = (uint8_t)((uint16_t)x & 0xff);
          b[sh + ofs_xyz + 8 * (f * nv + i) + 2 * (size_t)k + 1] = (uint8_t)((uint16_t)x >> 8);
        }
    at += ofs_end;
  }
  put32(b, 104, (uint32_t)at); /* end of file */
  ASSERT(at <= 4096);
  return at;
}

/* A file test_write_file made, by the name a client gives it: relative to test_tmpdir(), one of
 * the harness's --mesh-dir folders. */
static const char *tmp_name(const char *path) {
  size_t n = strlen(test_tmpdir());
  return strncmp(path, test_tmpdir(), n) == 0 && path[n] == '/' ? path + n + 1 : path;
}

/* session.create of `path` (a file in test_tmpdir() or a name) must be refused with -32004 and
 * a reason containing `needle`. */
static void refused(harness *h, const char *session, const char *path, const char *needle) {
  char params[2048], msg[1024];
  snprintf(params, sizeof(params), "{\"session\":\"%s\",\"mesh\":\"%s\"}", session, tmp_name(path));
  ASSERT_EQ(harness_rpc_err(h, "session.create", params, msg, sizeof(msg)), -32004);
  fprintf(stderr, "%s: %s\n", session, msg);
  ASSERT_STR_CONTAINS(msg, needle);
}

TEST(a_lying_off_and_a_mutated_md3_are_refused_without_growing_the_server) {
  const char *off = test_write_file("lying.off", lying_off, sizeof(lying_off) - 1);
  ASSERT_EQ(sizeof(lying_off) - 1, 45);
  static uint8_t md3[4096], bad[4096];
  size_t n = build_md3(md3);
  const char *good = test_write_file("good.md3", md3, n);
  harness h;
  const char *const args[] = {"--reserve-mb", "0", NULL};
  harness_start(&h, NULL, args);
  uint64_t before = harness_server_memory(&h, "VmRSS");

  /* The intact model is a mesh: the checks below refuse lies, not MD3. */
  char params[1024];
  snprintf(params, sizeof(params), "{\"session\":\"md3\",\"mesh\":\"%s\"}", tmp_name(good));
  cJSON *r = harness_rpc_ok(&h, "session.create", params);
  ASSERT_EQ(cJSON_GetObjectItem(r, "vertices")->valueint, 12);
  cJSON_Delete(r);

  refused(&h, "off", off, "1000000000 faces");
  /* 2^31 tags (header offset 80): assimp sized its tag arrays from it and passed 13 GB. */
  memcpy(bad, md3, n);
  put32(bad, 80, 0x7fffffffu);
  refused(&h, "tags", test_write_file("tags.md3", bad, n), "tags");
  /* The surface count and the surfaces' offset (header offsets 84 and 100). */
  memcpy(bad, md3, n);
  put32(bad, 84, 200);
  put32(bad, 100, 90);
  refused(&h, "surfaces", test_write_file("surfaces.md3", bad, n), "MD3");
  memcpy(bad, md3, n);
  put32(bad, 84, 0x00ffffffu);
  refused(&h, "many", test_write_file("many.md3", bad, n), "MD3");
  memcpy(bad, md3, n);
  put32(bad, 100, 0x7ffffff0u);
  refused(&h, "offset", test_write_file("offset.md3", bad, n), "MD3");
  /* Inside the first surface: its vertex count and its triangles' offset. */
  size_t s0 = 108 + 56 * 3 + 112 * 3;
  memcpy(bad, md3, n);
  put32(bad, s0 + 80, 0x10000000u);
  refused(&h, "verts", test_write_file("verts.md3", bad, n), "MD3");
  memcpy(bad, md3, n);
  put32(bad, s0 + 88, 0x7fff0000u);
  refused(&h, "tris", test_write_file("tris.md3", bad, n), "MD3");

  /* The peak, not a reading now: growth that came and went counts too. */
  uint64_t peak = harness_server_memory(&h, "VmHWM");
  fprintf(stderr, "server resident before %.1f MB, peak after %.1f MB\n", (double)before / 1e6, (double)peak / 1e6);
  ASSERT(peak < before + 100000000ull);
  cJSON *list = harness_rpc_ok(&h, "session.list", NULL);
  ASSERT_EQ(cJSON_GetArraySize(list), 1);
  cJSON_Delete(list);
  harness_stop(&h);
}

/* A stand-in worker that crashes, hangs or answers garbage, depending on the file's name. */
static const char fake_worker[] =
    "#!/bin/sh\n"
    "for last; do :; done\n"
    "case \"$last\" in\n"
    "  *crash*) kill -SEGV $$ ;;\n"
    "  *hang*) exec sleep 600 ;;\n"
    "  *short*) printf 'DFMI' ;;\n"
    "  *) printf 'garbage' ;;\n"
    "esac\n";

TEST(a_crashing_hanging_or_garbled_import_worker_fails_only_that_request) {
  const char *worker = test_write_file("worker.sh", fake_worker, sizeof(fake_worker) - 1);
  ASSERT(chmod(worker, 0755) == 0);
  char crash[1024], hang[1024], shortf[1024], garbage[1024];
  snprintf(crash, sizeof(crash), "%s", test_write_file("crash.off", "OFF\n", 4));
  snprintf(hang, sizeof(hang), "%s", test_write_file("hang.off", "OFF\n", 4));
  snprintf(shortf, sizeof(shortf), "%s", test_write_file("short.off", "OFF\n", 4));
  snprintf(garbage, sizeof(garbage), "%s", test_write_file("garbage.off", "OFF\n", 4));
  harness h;
  const char *const args[] = {"--demo", "--import-worker-path", worker, "--import-seconds", "1", NULL};
  harness_start(&h, "demo", args);
  refused(&h, "a", crash, "crashed (signal 11");
  refused(&h, "b", hang, "did not finish within 1 s");
  refused(&h, "c", shortf, "reply is malformed");
  refused(&h, "d", garbage, "reply is malformed");
  /* The server goes on: the demo session answers, and a blend.fit against a file takes the
   * same way (and fails the same way). */
  cJSON *r = harness_rpc_ok(&h, "state.get", "{\"session\":\"demo\"}");
  ASSERT_EQ(cJSON_GetObjectItem(r, "version")->valueint, 0);
  cJSON_Delete(r);
  char params[1200], msg[512];
  snprintf(params, sizeof(params), "{\"session\":\"demo\",\"shape\":\"%s\"}", tmp_name(crash));
  ASSERT_EQ(harness_rpc_err(&h, "blend.fit", params, msg, sizeof(msg)), -32004);
  ASSERT_STR_CONTAINS(msg, "crashed");
  harness_stop(&h);
}

TEST(an_import_over_the_worker_memory_limit_is_refused_naming_the_limit) {
  char folder[1024];
  snprintf(folder, sizeof(folder), "%s", test_dragon("dragon_vrip.ply")); /* 34 MB of PLY, 437k vertices */
  *strrchr(folder, '/') = '\0';
  harness h;
  const char *const args[] = {"--import-memory-mb", "32", "--mesh-dir", folder, NULL};
  harness_start(&h, NULL, args);
  uint64_t before = harness_server_memory(&h, "VmRSS");
  refused(&h, "dragon", "dragon_vrip.ply", "32 MiB");
  ASSERT(harness_server_memory(&h, "VmHWM") < before + 100000000ull);
  /* A small file still fits. */
  char params[1024];
  snprintf(params, sizeof(params), "{\"session\":\"cube\",\"mesh\":\"OFF/Cube.off\"}");
  cJSON_Delete(harness_rpc_ok(&h, "session.create", params));
  harness_stop(&h);
}

TEST(files_over_max_file_mb_are_refused_before_they_are_read) {
  harness h;
  const char *const args[] = {"--max-file-mb", "1", NULL};
  harness_start(&h, NULL, args);
  static char big[(1 << 20) + 10];
  memset(big, ' ', sizeof(big));
  memcpy(big, "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n", 34);
  refused(&h, "big", test_write_file("big.off", big, sizeof(big)), "more than the limit of 1048576");
  harness_stop(&h);
}

TEST(check_mesh_isolate_reads_the_file_in_the_worker) {
  const char *bin = getenv("DEFORMD_BIN");
  char cmd[4096], out[4096] = "";
  const char *off = test_write_file("lying.off", lying_off, sizeof(lying_off) - 1);
  snprintf(cmd, sizeof(cmd), "'%s' --check-mesh '%s' --isolate 2>/dev/null", bin, off);
  FILE *p = popen(cmd, "r");
  size_t got = fread(out, 1, sizeof(out) - 1, p);
  out[got] = '\0';
  ASSERT_EQ(WEXITSTATUS(pclose(p)), 2);
  ASSERT_STR_CONTAINS(out, "1000000000 faces");
  /* Either order: --isolate before the file, as `deformd --check-mesh --isolate FILE`, too. */
  snprintf(cmd, sizeof(cmd), "'%s' --check-mesh --isolate '%s' 2>/dev/null", bin, test_assimp_model("MD2/faerie.md2"));
  p = popen(cmd, "r");
  got = fread(out, 1, sizeof(out) - 1, p);
  out[got] = '\0';
  ASSERT_EQ(WEXITSTATUS(pclose(p)), 0);
  cJSON *o = cJSON_Parse(out);
  ASSERT(o != NULL);
  ASSERT_EQ(cJSON_GetObjectItem(o, "frames")->valueint, 198);
  cJSON_Delete(o);
}

/* Findings of the import fuzz target that crash or leak inside assimp itself (the worker exists
 * for them; tests/fuzz/README.md): each is refused, or read, by an isolated --check-mesh, with a
 * JSON answer and exit status 2 or 0, never a crash of deformd. Byte 0 of a finding picks the
 * file's extension, as in tests/fuzz/fuzz_import.c. */
TEST(fuzz_findings_inside_assimp_are_answered_by_the_import_worker) {
  static const char *const ext[] = {"obj", "ply", "off", "stl", "gltf", "glb", "md2", "md3"};
  const char *src = getenv("DEFORMD_SOURCE_DIR");
  ASSERT(src != NULL);
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/tests/fuzz/regress/import-isolated", src);
  DIR *d = opendir(dir);
  ASSERT(d != NULL);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char in[2048], out[1024], cmd[4096], reply[8192] = "";
    snprintf(in, sizeof(in), "%s/%s", dir, e->d_name);
    FILE *f = fopen(in, "rb");
    ASSERT(f != NULL);
    static unsigned char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    ASSERT(len >= 1);
    snprintf(out, sizeof(out), "%s/finding.%s", test_tmpdir(), ext[buf[0] % 8]);
    f = fopen(out, "wb");
    fwrite(buf + 1, 1, len - 1, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "'%s' --check-mesh '%s' --isolate --import-seconds 10 2>/dev/null", getenv("DEFORMD_BIN"), out);
    FILE *p = popen(cmd, "r");
    size_t got = fread(reply, 1, sizeof(reply) - 1, p);
    reply[got] = '\0';
    int status = pclose(p);
    fprintf(stderr, "%s: exit %d: %.160s", e->d_name, WEXITSTATUS(status), reply);
    ASSERT(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 2));
    cJSON *o = cJSON_Parse(reply);
    ASSERT(cJSON_IsObject(o));
    cJSON_Delete(o);
    n++;
  }
  closedir(d);
  ASSERT(n > 0);
}
