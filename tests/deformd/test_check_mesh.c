/*
 * test_check_mesh.c — `deformd --check-mesh` and `--write-demo` as a user runs them.
 */
#include <cjson/cJSON.h>
#include <sys/wait.h>

#include "test.h"

/* Runs the deformd binary with `args`; captures stdout into out (NUL-terminated) and stderr
 * into errbuf. Returns the exit status. */
static int run_deformd(const char *args, char *out, size_t outlen, char *errbuf, size_t errlen) {
  const char *bin = getenv("DEFORMD_BIN");
  ASSERT(bin != NULL);
  char cmd[4096], errpath[1024];
  snprintf(errpath, sizeof(errpath), "%s/stderr.txt", test_tmpdir());
  snprintf(cmd, sizeof(cmd), "'%s' --data none %s 2>'%s'", bin, args, errpath);
  FILE *p = popen(cmd, "r");
  ASSERT(p != NULL);
  size_t n = fread(out, 1, outlen - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  FILE *e = fopen(errpath, "r");
  n = e ? fread(errbuf, 1, errlen - 1, e) : 0;
  errbuf[n] = '\0';
  if (e) fclose(e);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(check_mesh_prints_the_stats_as_one_json_object) {
  static char out[65536], err[4096];
  char args[2048];
  snprintf(args, sizeof(args), "--check-mesh '%s'", test_assimp_model("OFF/Wuson.off"));
  ASSERT_EQ(run_deformd(args, out, sizeof(out), err, sizeof(err)), 0);
  cJSON *o = cJSON_Parse(out);
  ASSERT(o != NULL);
  const char *keys[] = {"vertices", "triangles", "topology_vertices", "components", "boundary_edges",
                        "nonmanifold_edges", "degenerate_triangles", "frames"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    ASSERT(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, keys[i])));
  ASSERT(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "targets")));
  ASSERT_EQ(cJSON_GetObjectItem(o, "triangles")->valueint, 3732); /* the file's face count */
  ASSERT(strchr(out, '\n') == out + strlen(out) - 1);             /* one line */
  cJSON_Delete(o);
}

TEST(check_mesh_refuses_a_broken_file_with_exit_2) {
  static char out[65536], err[4096];
  char args[2048];
  snprintf(args, sizeof(args), "--check-mesh '%s'",
           test_assimp_model("glTF2/BoxWithInfinites-glTF-Binary/BoxWithInfinites.glb"));
  ASSERT_EQ(run_deformd(args, out, sizeof(out), err, sizeof(err)), 2);
  cJSON *o = cJSON_Parse(out);
  ASSERT(o != NULL);
  ASSERT(cJSON_IsString(cJSON_GetObjectItem(o, "error")));
  ASSERT_STR_CONTAINS(cJSON_GetObjectItem(o, "error")->valuestring, "non-finite");
  ASSERT_STR_CONTAINS(err, "error");
  cJSON_Delete(o);
  ASSERT_EQ(run_deformd("--check-mesh /nonexistent.obj", out, sizeof(out), err, sizeof(err)), 2);
  ASSERT_STR_CONTAINS(out, "\"error\"");
}

TEST(write_demo_writes_a_glb_that_check_mesh_reads_back) {
  static char out[65536], err[4096];
  char args[2048];
  snprintf(args, sizeof(args), "--write-demo '%s/demo.glb'", test_tmpdir());
  ASSERT_EQ(run_deformd(args, out, sizeof(out), err, sizeof(err)), 0);
  snprintf(args, sizeof(args), "--check-mesh '%s/demo.glb'", test_tmpdir());
  ASSERT_EQ(run_deformd(args, out, sizeof(out), err, sizeof(err)), 0);
  cJSON *o = cJSON_Parse(out);
  ASSERT(o != NULL);
  cJSON *targets = cJSON_GetObjectItem(o, "targets");
  ASSERT(cJSON_GetArraySize(targets) >= 12);
  int has_jaw = 0;
  cJSON *t;
  cJSON_ArrayForEach(t, targets) has_jaw |= strcmp(t->valuestring, "jaw_open") == 0;
  ASSERT(has_jaw);
  ASSERT_EQ(cJSON_GetObjectItem(o, "boundary_edges")->valueint, 0);
  ASSERT_EQ(cJSON_GetObjectItem(o, "components")->valueint, 1);
  cJSON_Delete(o);
}

/* The heap reserve: a bad value on the command line or in the config file stops the server
 * before it listens, with the option's name and the accepted values. */
TEST(deformd_refuses_a_bad_reserve_with_a_reason) {
  static char out[4096], err[4096];
  ASSERT_EQ(run_deformd("--reserve-mb lots --stream-port 0 --rpc-port 0", out, sizeof(out), err, sizeof(err)), 1);
  ASSERT_STR_CONTAINS(err, "--reserve-mb needs an integer");
  char path[1024], args[2048];
  snprintf(path, sizeof(path), "%s/reserve.json", test_tmpdir());
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  fputs("{\"reserve_mb\": -3}", f);
  fclose(f);
  snprintf(args, sizeof(args), "--config '%s' --stream-port 0 --rpc-port 0", path);
  ASSERT_EQ(run_deformd(args, out, sizeof(out), err, sizeof(err)), 1);
  ASSERT_STR_CONTAINS(err, "\"reserve_mb\" must be -1 (automatic), 0 (none)");
}
