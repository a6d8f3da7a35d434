/*
 * test_anim.c — named animation clips: MD2/MD3 frames grouped by name, glTF morph-weight
 * animations as weight clips, and the clip checks of mesh_validate().
 *
 * Expected clips come from separate readings: oracle_md2_clips() reads MD2 frame names itself,
 * the glTF sample's sampler is decoded here from its JSON and .bin with cJSON, and the files
 * written here state their expected clips directly.
 */
#include <cjson/cJSON.h>
#include <stdint.h>

#include "oracle.h"
#include "test.h"

static mesh *import_ok(const char *path) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  ASSERT(m != NULL);
  return m;
}

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

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) test__fail(__FILE__, __LINE__, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  unsigned char *b = malloc((size_t)n + 1);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) test__fail(__FILE__, __LINE__, "short read of %s", path);
  fclose(f);
  *len = (size_t)n;
  return b;
}

static void expect_keyframe_clip(const mesh *m, uint32_t i, const char *name, uint32_t first,
                                 uint32_t count) {
  ASSERT(i < m->clip_count);
  const mesh_clip *c = &m->clips[i];
  if (strcmp(c->name, name) != 0)
    test__fail(__FILE__, __LINE__, "clip %u is '%s', expected '%s'", i, c->name, name);
  ASSERT_EQ(c->first_frame, first);
  ASSERT_EQ(c->frame_count, count);
  ASSERT_EQ(c->key_count, 0);
  ASSERT_NEAR(c->fps, 10.0, 0);
  ASSERT_EQ(mesh_find_clip(m, name), i);
}

/* ---- MD2 -------------------------------------------------------------------------------------- */

static void check_md2_clips(const char *rel) {
  oracle_clip *want;
  uint32_t n = oracle_md2_clips(test_assimp_model(rel), &want);
  mesh *m = import_ok(test_assimp_model(rel));
  fprintf(stderr, "%s: %u clips:", rel, m->clip_count);
  for (uint32_t i = 0; i < m->clip_count; i++)
    fprintf(stderr, " %s[%u+%u]", m->clips[i].name, m->clips[i].first_frame, m->clips[i].frame_count);
  fprintf(stderr, "\n");
  ASSERT_EQ(m->frame_count, 198);
  ASSERT(m->clip_count > n);
  uint32_t next = 0;
  for (uint32_t i = 0; i < n; i++) {
    expect_keyframe_clip(m, i, want[i].name, want[i].first, want[i].count);
    ASSERT_EQ(want[i].first, next); /* the name groups tile the frames */
    next += want[i].count;
  }
  ASSERT_EQ(next, 198);
  /* After them: the numbered variants (checked per file below), then the whole file. */
  expect_keyframe_clip(m, m->clip_count - 1, "all", 0, 198);
  /* Both files use Quake II's player animations, starting with 40 frames of "stand". */
  expect_keyframe_clip(m, 0, "stand", 0, 40);
  expect_keyframe_clip(m, 1, "run", 40, 6);
  expect_keyframe_clip(m, n - 1, "death", 178, 20);
  ASSERT_EQ(mesh_find_clip(m, "walk"), -1);
  free(want);
  mesh_destroy(m);
}

TEST(md2_faerie_clips_match_the_frame_names_in_the_file) { check_md2_clips("MD2/faerie.md2"); }

TEST(md2_sydney_clips_match_the_frame_names_in_the_file) {
  check_md2_clips("MD2/sydney.md2");
  /* Its names number no variants (pain1…pain12, death1…death20, run001…run006): no more clips
   * than the groups and "all". */
  oracle_clip *want;
  uint32_t n = oracle_md2_clips(test_assimp_model("MD2/sydney.md2"), &want);
  mesh *m = import_ok(test_assimp_model("MD2/sydney.md2"));
  ASSERT_EQ(m->clip_count, n + 1);
  free(want);
  mesh_destroy(m);
}

/* Quake II's numbered variants, as faerie.md2 names them (pain101…pain104, pain201…, pain301…;
 * death101…death106, death201…death206, death301…death308): each its own clip, the groups
 * "pain" and "death" kept. */
TEST(md2_numbered_variants_like_death101_death201_become_clips_of_their_own) {
  oracle_clip *want;
  uint32_t n = oracle_md2_clips(test_assimp_model("MD2/faerie.md2"), &want);
  mesh *m = import_ok(test_assimp_model("MD2/faerie.md2"));
  ASSERT_EQ(m->clip_count, n + 6 + 1);
  expect_keyframe_clip(m, n + 0, "pain1", 54, 4);
  expect_keyframe_clip(m, n + 1, "pain2", 58, 4);
  expect_keyframe_clip(m, n + 2, "pain3", 62, 4);
  expect_keyframe_clip(m, n + 3, "death1", 178, 6);
  expect_keyframe_clip(m, n + 4, "death2", 184, 6);
  expect_keyframe_clip(m, n + 5, "death3", 190, 8);
  ASSERT(mesh_find_clip(m, "pain") >= 0 && mesh_find_clip(m, "death") >= 0);
  free(want);
  mesh_destroy(m);
}

static int32_t get32(const unsigned char *b) {
  return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

static void set32(unsigned char *b, int32_t v) {
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)((uint32_t)v >> (8 * i));
}

static void md2_set_name(unsigned char *b, int32_t frame, const char *name) {
  unsigned char *at = b + get32(b + 56) + (size_t)get32(b + 16) * frame + 24;
  memset(at, 0, 16);
  memcpy(at, name, strlen(name));
}

TEST(md2_truncated_or_lying_files_are_refused_with_a_reason) {
  size_t n;
  unsigned char *b = slurp(test_assimp_model("MD2/faerie.md2"), &n);
  /* Cut inside the frames, and inside the GL commands after them. */
  refused(test_write_file("half.md2", b, n / 2), MESH_EFORMAT, "MD2: truncated");
  refused(test_write_file("nearly.md2", b, n - 7), MESH_EFORMAT, "MD2: truncated");
  refused(test_write_file("h.md2", b, 40), MESH_EFORMAT, "MD2");
  /* A header that claims far more frames than the file holds. */
  unsigned char *lie = malloc(n);
  memcpy(lie, b, n);
  set32(lie + 40, 1000000);
  refused(test_write_file("frames.md2", lie, n), MESH_EFORMAT, "1000000 frames");
  memcpy(lie, b, n);
  set32(lie + 16, 12); /* frame size smaller than a frame header */
  refused(test_write_file("framesize.md2", lie, n), MESH_EFORMAT, "frame size 12");
  memcpy(lie, b, n);
  set32(lie + 56, -5);
  refused(test_write_file("offset.md2", lie, n), MESH_EFORMAT, "MD2");
  free(lie);
  free(b);
}

TEST(md2_frames_without_usable_names_become_one_clip_called_all) {
  size_t n;
  unsigned char *b = slurp(test_assimp_model("MD2/faerie.md2"), &n);
  md2_set_name(b, 17, ""); /* one nameless frame is enough */
  mesh *m = import_ok(test_write_file("noname.md2", b, n));
  ASSERT_EQ(m->clip_count, 1);
  expect_keyframe_clip(m, 0, "all", 0, 198);
  mesh_destroy(m);
  md2_set_name(b, 17, "0017"); /* digits only: no prefix left */
  m = import_ok(test_write_file("digits.md2", b, n));
  ASSERT_EQ(m->clip_count, 1);
  expect_keyframe_clip(m, 0, "all", 0, 198);
  mesh_destroy(m);
  free(b);
}

TEST(md2_prefix_that_comes_back_later_gets_a_unique_clip_name) {
  size_t n;
  unsigned char *b = slurp(test_assimp_model("MD2/faerie.md2"), &n);
  /* Frames 46..53 ("attack1".."attack8") renamed to "stand1".."stand8"; "run" keeps 40..45. */
  for (int f = 46; f < 54; f++) {
    char name[16];
    snprintf(name, sizeof(name), "stand%d", f - 45);
    md2_set_name(b, f, name);
  }
  mesh *m = import_ok(test_write_file("again.md2", b, n));
  expect_keyframe_clip(m, 0, "stand", 0, 40);
  expect_keyframe_clip(m, 1, "run", 40, 6);
  expect_keyframe_clip(m, 2, "stand_46", 46, 8);
  expect_keyframe_clip(m, 3, "pain", 54, 12);
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  mesh_destroy(m);
  free(b);
}

TEST(md2_clips_stop_at_the_frames_that_were_read) {
  mesh_import_opts opts = {.max_frames = 43};
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(test_assimp_model("MD2/faerie.md2"), &opts, &m, err, sizeof(err)), err);
  ASSERT_EQ(m->frame_count, 43);
  ASSERT_EQ(m->clip_count, 3);
  expect_keyframe_clip(m, 0, "stand", 0, 40);
  expect_keyframe_clip(m, 1, "run", 40, 3);
  expect_keyframe_clip(m, 2, "all", 0, 43);
  mesh_destroy(m);
}

/* ---- MD3: a one-surface file written here with the given frame names (oracle_write_md3) ---- */

static size_t write_md3(unsigned char *b, const char *const *names, uint32_t nframes) {
  return oracle_write_md3(b, names, nframes);
}

static void put32(unsigned char *b, size_t *at, uint32_t v) {
  for (int i = 0; i < 4; i++) b[(*at)++] = (unsigned char)(v >> (8 * i));
}

TEST(md3_frames_are_grouped_into_clips_by_name) {
  static unsigned char buf[8192];
  const char *names[] = {"idle1", "idle2", "idle3", "walk01", "walk02", "walk03", "walk04",
                         "idle4", "taunt"};
  size_t len = write_md3(buf, names, 9);
  mesh *m = import_ok(test_write_file("named.md3", buf, len));
  ASSERT_EQ(m->frame_count, 9);
  ASSERT_EQ(m->clip_count, 5);
  expect_keyframe_clip(m, 0, "idle", 0, 3);
  expect_keyframe_clip(m, 1, "walk", 3, 4);
  expect_keyframe_clip(m, 2, "idle_7", 7, 1);
  expect_keyframe_clip(m, 3, "taunt", 8, 1);
  expect_keyframe_clip(m, 4, "all", 0, 9);
  mesh_destroy(m);

  /* Clips stop where max_frames stopped the frames. */
  mesh_import_opts opts = {.max_frames = 5};
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_import(test_write_file("named.md3", buf, len), &opts, &m, err, sizeof(err)), err);
  ASSERT_EQ(m->clip_count, 3);
  expect_keyframe_clip(m, 0, "idle", 0, 3);
  expect_keyframe_clip(m, 1, "walk", 3, 2);
  expect_keyframe_clip(m, 2, "all", 0, 5);
  mesh_destroy(m);
}

TEST(md3_frames_without_names_become_one_clip_called_all) {
  static unsigned char buf[8192];
  const char *names[] = {"", "", "", ""};
  size_t len = write_md3(buf, names, 4);
  mesh *m = import_ok(test_write_file("nameless.md3", buf, len));
  ASSERT_EQ(m->clip_count, 1);
  expect_keyframe_clip(m, 0, "all", 0, 4);
  mesh_destroy(m);
  /* A name with a control character is no name either. */
  const char *odd[] = {"run1", "run\x01", "run3"};
  len = write_md3(buf, odd, 3);
  m = import_ok(test_write_file("odd.md3", buf, len));
  ASSERT_EQ(m->clip_count, 1);
  expect_keyframe_clip(m, 0, "all", 0, 3);
  mesh_destroy(m);
}

TEST(md3_whose_frame_table_lies_outside_the_file_is_refused) {
  static unsigned char buf[8192];
  const char *names[] = {"a1", "a2"};
  size_t len = write_md3(buf, names, 2);
  size_t at = 92;
  put32(buf, &at, (uint32_t)len - 20); /* ofs_frames: two 56-byte frames do not fit there */
  refused(test_write_file("frames.md3", buf, len), MESH_EFORMAT, "outside the file");
}

/* ---- MD3: Quake III's animation.cfg ------------------------------------------------------ */

/* Sarge's animation.cfg as Quake III ships it (keywords, comments, tabs), trimmed of nothing. */
static const char sarge_cfg[] =
    "// animation config file\n\nsex m\n\nheadoffset 0 0 0\nfootsteps normal\n\n"
    "// first frame, num frames, looping frames, frames per second\n\n"
    "0\t30\t0\t20\t\t// BOTH_DEATH1\n29\t1\t0\t20\t\t// BOTH_DEAD1\n"
    "30\t30\t0\t20\t\t// BOTH_DEATH2\n59\t1\t0\t20\t\t// BOTH_DEAD2\n"
    "60\t30\t0\t20\t\t// BOTH_DEATH3\n89\t1\t0\t20\t\t// BOTH_DEAD3\n\n"
    "90\t40\t0\t20\t\t// TORSO_GESTURE\n130\t6\t0\t15\t\t// TORSO_ATTACK\n"
    "136\t6\t0\t15\t\t// TORSO_ATTACK2\n142\t5\t0\t20\t\t// TORSO_DROP\n"
    "147\t4\t0\t20\t\t// TORSO_RAISE\n151\t1\t0\t15\t\t// TORSO_STAND\n"
    "152\t1\t0\t15\t\t// TORSO_STAND2\n\n"
    "153\t8\t8\t20\t\t// LEGS_WALKCR\n161\t12\t12\t20\t\t// LEGS_WALK\n"
    "173\t11\t11\t21\t\t// LEGS_RUN\n184\t10\t10\t20\t\t// LEGS_BACK\n"
    "194\t10\t10\t15\t\t// LEGS_SWIM\n204\t10\t0\t15\t\t// LEGS_JUMP\n"
    "214\t6\t0\t15\t\t// LEGS_LAND\n220\t8\t0\t15\t\t// LEGS_JUMPB\n"
    "228\t1\t0\t15\t\t// LEGS_LANDB\n229\t10\t10\t15\t\t// LEGS_IDLE\n"
    "239\t10\t10\t15\t\t// LEGS_IDLECR\n249\t7\t7\t15\t\t// LEGS_TURN\n";

/* The animations as the game numbers them for each part, written out from the table above: the
 * legs' first frames less 153 - 90 = 63 in lower.md3. */
typedef struct want_clip {
  const char *name;
  uint32_t first, count, loop;
  float fps;
  int once;
} want_clip;

static const want_clip both_clips[] = {{"BOTH_DEATH1", 0, 30, 0, 20, 1}, {"BOTH_DEAD1", 29, 1, 0, 20, 1},
                                       {"BOTH_DEATH2", 30, 30, 0, 20, 1}, {"BOTH_DEAD2", 59, 1, 0, 20, 1},
                                       {"BOTH_DEATH3", 60, 30, 0, 20, 1}, {"BOTH_DEAD3", 89, 1, 0, 20, 1}};
static const want_clip legs_clips[] = {{"LEGS_WALKCR", 90, 8, 0, 20, 0},  {"LEGS_WALK", 98, 12, 0, 20, 0},
                                       {"LEGS_RUN", 110, 11, 0, 21, 0},   {"LEGS_BACK", 121, 10, 0, 20, 0},
                                       {"LEGS_SWIM", 131, 10, 0, 15, 0},  {"LEGS_JUMP", 141, 10, 0, 15, 1},
                                       {"LEGS_LAND", 151, 6, 0, 15, 1},   {"LEGS_JUMPB", 157, 8, 0, 15, 1},
                                       {"LEGS_LANDB", 165, 1, 0, 15, 1},  {"LEGS_IDLE", 166, 10, 0, 15, 0},
                                       {"LEGS_IDLECR", 176, 10, 0, 15, 0}, {"LEGS_TURN", 186, 7, 0, 15, 0}};
static const want_clip torso_clips[] = {{"TORSO_GESTURE", 90, 40, 0, 20, 1}, {"TORSO_ATTACK", 130, 6, 0, 15, 1},
                                        {"TORSO_ATTACK2", 136, 6, 0, 15, 1}, {"TORSO_DROP", 142, 5, 0, 20, 1},
                                        {"TORSO_RAISE", 147, 4, 0, 20, 1},   {"TORSO_STAND", 151, 1, 0, 15, 1},
                                        {"TORSO_STAND2", 152, 1, 0, 15, 1}};

static void expect_cfg_clip(const mesh *m, uint32_t i, const want_clip *w) {
  ASSERT(i < m->clip_count);
  const mesh_clip *c = &m->clips[i];
  if (strcmp(c->name, w->name) != 0) test__fail(__FILE__, __LINE__, "clip %u is '%s', expected '%s'", i, c->name, w->name);
  ASSERT_EQ(c->first_frame, w->first);
  ASSERT_EQ(c->frame_count, w->count);
  ASSERT_EQ(c->loop_frames, w->loop);
  ASSERT_EQ(c->play_once, w->once);
  ASSERT_NEAR(c->fps, w->fps, 0);
}

/* An MD3 of `frames` frames called `name`, with `cfg` beside it. */
static mesh *import_player_part(const char *name, uint32_t frames, const char *cfg) {
  static unsigned char buf[1 << 17];
  const char **names = calloc(frames, sizeof(char *));
  for (uint32_t f = 0; f < frames; f++) names[f] = "";
  size_t len = write_md3(buf, names, frames);
  free(names);
  test_write_file("animation.cfg", cfg, strlen(cfg));
  return import_ok(test_write_file(name, buf, len));
}

TEST(md3_player_legs_get_the_animation_cfg_clips_in_the_games_order) {
  mesh *m = import_player_part("lower.md3", 193, sarge_cfg);
  ASSERT_EQ(m->clip_count, 6 + 12 + 1);
  for (uint32_t i = 0; i < 6; i++) expect_cfg_clip(m, i, &both_clips[i]);
  for (uint32_t i = 0; i < 12; i++) expect_cfg_clip(m, 6 + i, &legs_clips[i]);
  expect_keyframe_clip(m, 18, "all", 0, 193); /* the whole file stays a clip */
  ASSERT_EQ(mesh_find_clip(m, "TORSO_GESTURE"), -1);
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  mesh_destroy(m);
}

TEST(md3_player_torso_gets_the_both_and_torso_clips_and_others_get_what_their_frames_hold) {
  mesh *m = import_player_part("upper.md3", 153, sarge_cfg);
  ASSERT_EQ(m->clip_count, 6 + 7 + 1);
  for (uint32_t i = 0; i < 6; i++) expect_cfg_clip(m, i, &both_clips[i]);
  for (uint32_t i = 0; i < 7; i++) expect_cfg_clip(m, 6 + i, &torso_clips[i]);
  ASSERT_EQ(mesh_find_clip(m, "LEGS_WALK"), -1);
  mesh_destroy(m);
  /* Another name: every animation that starts within its 100 frames, cut at the last, no gap
   * taken out of the legs' numbers. */
  m = import_player_part("model.md3", 100, sarge_cfg);
  ASSERT_EQ(m->clip_count, 6 + 1 + 1);
  want_clip cut = {"TORSO_GESTURE", 90, 10, 0, 20, 1};
  expect_cfg_clip(m, 6, &cut);
  mesh_destroy(m);
}

TEST(md3_animation_cfg_that_does_not_parse_is_refused_naming_its_line) {
  static unsigned char buf[8192];
  const char *names[] = {"", "", "", ""};
  size_t len = write_md3(buf, names, 4);
  const char *bad = "sex m\n0 2 0 10 // BOTH_DEATH1\n1 x 0 10\n";
  test_write_file("animation.cfg", bad, strlen(bad));
  refused(test_write_file("lower.md3", buf, len), MESH_EFORMAT, "animation.cfg line 3: 'x' (BOTH_DEAD1) is not a whole number");
  const char *cut = "0 2 0 10\n1 1";
  test_write_file("animation.cfg", cut, strlen(cut));
  refused(test_write_file("lower.md3", buf, len), MESH_EFORMAT, "BOTH_DEAD1 stops after 2 of its 4 numbers");
  /* Keywords and comments alone: no animations, the frame names decide. */
  const char *none = "/* nothing */ sex f\nfootsteps boot\nfixedtorso\n";
  test_write_file("animation.cfg", none, strlen(none));
  mesh *m = import_ok(test_write_file("lower.md3", buf, len));
  ASSERT_EQ(m->clip_count, 1);
  expect_keyframe_clip(m, 0, "all", 0, 4);
  mesh_destroy(m);
}

/* ---- glTF: the Khronos sample, checked against its own sampler ----------------------------- */

/* Decodes float SCALAR accessor `index` of `doc` from `bin`. */
static float *oracle_accessor(const cJSON *doc, int index, const unsigned char *bin, size_t bin_len,
                              int *count) {
  const cJSON *acc = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "accessors"), index);
  ASSERT(acc != NULL);
  ASSERT_EQ(cJSON_GetObjectItem(acc, "componentType")->valueint, 5126);
  ASSERT(strcmp(cJSON_GetObjectItem(acc, "type")->valuestring, "SCALAR") == 0);
  int n = cJSON_GetObjectItem(acc, "count")->valueint;
  const cJSON *view = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "bufferViews"),
                                         cJSON_GetObjectItem(acc, "bufferView")->valueint);
  const cJSON *off_item = cJSON_GetObjectItem(view, "byteOffset");
  const cJSON *acc_off = cJSON_GetObjectItem(acc, "byteOffset");
  size_t off = (size_t)(off_item ? off_item->valueint : 0) + (size_t)(acc_off ? acc_off->valueint : 0);
  ASSERT(cJSON_GetObjectItem(view, "byteStride") == NULL);
  ASSERT(off + 4 * (size_t)n <= bin_len);
  float *out = malloc(sizeof(float) * (size_t)n);
  memcpy(out, bin + off, sizeof(float) * (size_t)n); /* little-endian host, as the tests assume */
  *count = n;
  return out;
}

TEST(gltf_animated_morph_cube_has_a_weight_clip_matching_its_sampler) {
  const char *path =
      test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf");
  size_t jlen, blen;
  char *json = (char *)slurp(path, &jlen);
  char bin_path[1024];
  snprintf(bin_path, sizeof(bin_path), "%.*s/AnimatedMorphCube.bin",
           (int)(strrchr(path, '/') - path), path);
  unsigned char *bin = slurp(bin_path, &blen);
  cJSON *doc = cJSON_ParseWithLength(json, jlen);
  ASSERT(doc != NULL);
  const cJSON *anim = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "animations"), 0);
  const cJSON *chan = cJSON_GetArrayItem(cJSON_GetObjectItem(anim, "channels"), 0);
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(chan, "target"), "path")->valuestring,
                "weights") == 0);
  const cJSON *sampler = cJSON_GetArrayItem(cJSON_GetObjectItem(anim, "samplers"),
                                            cJSON_GetObjectItem(chan, "sampler")->valueint);
  const cJSON *interp = cJSON_GetObjectItem(sampler, "interpolation");
  ASSERT(interp == NULL || strcmp(interp->valuestring, "LINEAR") == 0);
  int nt, nw;
  float *times = oracle_accessor(doc, cJSON_GetObjectItem(sampler, "input")->valueint, bin, blen, &nt);
  float *w = oracle_accessor(doc, cJSON_GetObjectItem(sampler, "output")->valueint, bin, blen, &nw);
  const cJSON *mesh_json = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "meshes"), 0);
  int ntargets = cJSON_GetArraySize(cJSON_GetObjectItem(
      cJSON_GetArrayItem(cJSON_GetObjectItem(mesh_json, "primitives"), 0), "targets"));
  ASSERT_EQ(ntargets, 2);
  ASSERT_EQ(nw, nt * ntargets);

  mesh *m = import_ok(path);
  ASSERT_EQ(m->target_count, 2);
  ASSERT_EQ(m->clip_count, 1);
  const mesh_clip *c = &m->clips[0];
  ASSERT(strcmp(c->name, cJSON_GetObjectItem(anim, "name")->valuestring) == 0); /* "Square" */
  ASSERT_EQ(mesh_find_clip(m, "Square"), 0);
  ASSERT_EQ(c->frame_count, 0);
  ASSERT_EQ(c->key_count, nt);
  ASSERT_EQ(nt, 127);
  ASSERT_EQ(c->target_count, 2);
  /* The file names no targets: the importer calls target j "target_<j>"; columns follow the
   * mesh's target order, whatever it is. */
  int col[2];
  for (int j = 0; j < 2; j++) {
    char name[16];
    snprintf(name, sizeof(name), "target_%d", j);
    col[j] = mesh_find_target(m, name);
    ASSERT(col[j] >= 0);
  }
  double wmin = 0, wmax = 0;
  for (int k = 0; k < nt; k++) {
    ASSERT_NEAR(c->times[k], times[k], 0); /* the same float bits */
    for (int j = 0; j < 2; j++) {
      float got = c->weights[(size_t)k * c->target_count + (size_t)col[j]];
      ASSERT_NEAR(got, w[2 * k + j], 0);
      if (got < wmin) wmin = got;
      if (got > wmax) wmax = got;
    }
  }
  ASSERT_NEAR(c->times[nt - 1], 4.19999743, 1e-6); /* the accessor's max */
  ASSERT(wmax > 0.9); /* the animation really moves both targets */
  /* The last key gives target 1 a weight of -1.5e-7, which assimp 5.2.5 reports as 0 (it clamps
   * negative weights); read from the file, it survives. */
  ASSERT(w[2 * (nt - 1) + 1] < 0);
  ASSERT_NEAR(c->weights[(size_t)(nt - 1) * c->target_count + (size_t)col[1]], w[2 * (nt - 1) + 1], 0);
  ASSERT(wmin < 0);
  fprintf(stderr, "AnimatedMorphCube: clip '%s', %u keys over %gs, weights in [%g, %g]\n", c->name,
          c->key_count, (double)c->times[nt - 1], wmin, wmax);
  mesh_destroy(m);
  free(times);
  free(w);
  cJSON_Delete(doc);
  free(json);
  free(bin);
}

/* ---- glTF written here: target order, negative weights, cubic splines, several channels ---- */

typedef struct gltf_builder {
  unsigned char bin[4096];
  size_t len;
  cJSON *root, *accessors, *views;
} gltf_builder;

/* Appends `n` floats as an accessor of `type` (SCALAR or VEC3); returns its index. */
static int gb_floats(gltf_builder *b, const float *v, int n, const char *type) {
  int comps = strcmp(type, "VEC3") == 0 ? 3 : 1;
  cJSON *view = cJSON_CreateObject();
  cJSON_AddNumberToObject(view, "buffer", 0);
  cJSON_AddNumberToObject(view, "byteOffset", (double)b->len);
  cJSON_AddNumberToObject(view, "byteLength", 4.0 * n);
  cJSON_AddItemToArray(b->views, view);
  memcpy(b->bin + b->len, v, sizeof(float) * (size_t)n);
  b->len += sizeof(float) * (size_t)n;
  cJSON *acc = cJSON_CreateObject();
  cJSON_AddNumberToObject(acc, "bufferView", cJSON_GetArraySize(b->views) - 1);
  cJSON_AddNumberToObject(acc, "componentType", 5126);
  cJSON_AddNumberToObject(acc, "count", n / comps);
  cJSON_AddStringToObject(acc, "type", type);
  if (comps == 3) { /* POSITION accessors must carry min and max */
    float lo[3], hi[3];
    for (int k = 0; k < 3; k++) lo[k] = hi[k] = v[k];
    for (int i = 1; i < n / 3; i++)
      for (int k = 0; k < 3; k++) {
        if (v[3 * i + k] < lo[k]) lo[k] = v[3 * i + k];
        if (v[3 * i + k] > hi[k]) hi[k] = v[3 * i + k];
      }
    cJSON_AddItemToObject(acc, "min", cJSON_CreateFloatArray(lo, 3));
    cJSON_AddItemToObject(acc, "max", cJSON_CreateFloatArray(hi, 3));
  }
  cJSON_AddItemToArray(b->accessors, acc);
  return cJSON_GetArraySize(b->accessors) - 1;
}

/* A one-triangle mesh at height z with targets moving corner j by (0, 0, j + 1). */
static void gb_mesh(gltf_builder *b, cJSON *meshes, const char *name, float z,
                    const char *const *targets, int ntargets) {
  float pos[9] = {0, 0, z, 1, 0, z, 0, 1, z};
  cJSON *prim = cJSON_CreateObject();
  cJSON *attrs = cJSON_AddObjectToObject(prim, "attributes");
  cJSON_AddNumberToObject(attrs, "POSITION", gb_floats(b, pos, 9, "VEC3"));
  cJSON *tl = cJSON_AddArrayToObject(prim, "targets");
  cJSON *names = cJSON_CreateArray();
  for (int j = 0; j < ntargets; j++) {
    float d[9] = {0};
    d[3 * j + 2] = (float)(j + 1);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "POSITION", gb_floats(b, d, 9, "VEC3"));
    cJSON_AddItemToArray(tl, t);
    cJSON_AddItemToArray(names, cJSON_CreateString(targets[j]));
  }
  cJSON *mesh_json = cJSON_CreateObject();
  cJSON_AddStringToObject(mesh_json, "name", name);
  cJSON *prims = cJSON_AddArrayToObject(mesh_json, "primitives");
  cJSON_AddItemToArray(prims, prim);
  cJSON_AddItemToObject(cJSON_AddObjectToObject(mesh_json, "extras"), "targetNames", names);
  cJSON_AddItemToArray(meshes, mesh_json);
}

/* Adds a channel on `node` for `path` with its own sampler to animation `anim`. */
static void gb_channel(gltf_builder *b, cJSON *anim, int node, const char *path, const char *interp,
                       const float *times, int nkeys, const float *out, int nout) {
  cJSON *samplers = cJSON_GetObjectItem(anim, "samplers");
  cJSON *s = cJSON_CreateObject();
  cJSON_AddNumberToObject(s, "input", gb_floats(b, times, nkeys, "SCALAR"));
  cJSON_AddNumberToObject(s, "output", gb_floats(b, out, nout, strcmp(path, "weights") ? "VEC3" : "SCALAR"));
  if (interp) cJSON_AddStringToObject(s, "interpolation", interp);
  cJSON_AddItemToArray(samplers, s);
  cJSON *c = cJSON_CreateObject();
  cJSON_AddNumberToObject(c, "sampler", cJSON_GetArraySize(samplers) - 1);
  cJSON *t = cJSON_AddObjectToObject(c, "target");
  cJSON_AddNumberToObject(t, "node", node);
  cJSON_AddStringToObject(t, "path", path);
  cJSON_AddItemToArray(cJSON_GetObjectItem(anim, "channels"), c);
}

static cJSON *gb_animation(cJSON *anims, const char *name) {
  cJSON *a = cJSON_CreateObject();
  if (name) cJSON_AddStringToObject(a, "name", name);
  cJSON_AddArrayToObject(a, "channels");
  cJSON_AddArrayToObject(a, "samplers");
  cJSON_AddItemToArray(anims, a);
  return a;
}

static void b64(const unsigned char *in, size_t n, char *out) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                 (i + 2 < n ? in[i + 2] : 0);
    out[o++] = tab[v >> 18 & 63];
    out[o++] = tab[v >> 12 & 63];
    out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? tab[v & 63] : '=';
  }
  out[o] = '\0';
}

/* Writes the builder's document as `name`: .gltf with a data: URI, or .glb with a BIN chunk. */
static const char *gb_write(gltf_builder *b, const char *name) {
  int glb = strstr(name, ".glb") != NULL;
  cJSON *buf = cJSON_CreateObject();
  cJSON_AddNumberToObject(buf, "byteLength", (double)b->len);
  if (!glb) {
    char *data = malloc(b->len * 4 / 3 + 64);
    strcpy(data, "data:application/octet-stream;base64,");
    b64(b->bin, b->len, data + strlen(data));
    cJSON_AddStringToObject(buf, "uri", data);
    free(data);
  }
  cJSON *buffers = cJSON_CreateArray();
  cJSON_AddItemToArray(buffers, buf);
  cJSON_AddItemToObject(b->root, "buffers", buffers);
  char *text = cJSON_PrintUnformatted(b->root);
  cJSON_DeleteItemFromObject(b->root, "buffers");
  const char *path;
  if (!glb) {
    path = test_write_file(name, text, strlen(text));
  } else {
    size_t jl = (strlen(text) + 3) & ~(size_t)3, bl = (b->len + 3) & ~(size_t)3;
    size_t total = 12 + 8 + jl + 8 + bl;
    unsigned char *g = calloc(1, total);
    size_t at = 0;
    memcpy(g, "glTF", 4);
    at = 4;
    put32(g, &at, 2);
    put32(g, &at, (uint32_t)total);
    put32(g, &at, (uint32_t)jl);
    put32(g, &at, 0x4E4F534Au);
    memset(g + at, ' ', jl);
    memcpy(g + at, text, strlen(text));
    at += jl;
    put32(g, &at, (uint32_t)bl);
    put32(g, &at, 0x004E4942u);
    memcpy(g + at, b->bin, b->len);
    path = test_write_file(name, g, total);
    free(g);
  }
  free(text);
  return path;
}

/* Nodes 0 "hat" (target blink), 1 "face" (smile, blink), 2 "brow" (frown) are in the scene;
 * node 3 shows the face again outside it. The importer meets blink first, so its targets are
 * blink, smile, frown: the face's weights [smile, blink] land in columns [1, 0]. */
static void gb_scene(gltf_builder *b) {
  memset(b, 0, sizeof(*b));
  b->root = cJSON_CreateObject();
  cJSON_AddStringToObject(cJSON_AddObjectToObject(b->root, "asset"), "version", "2.0");
  cJSON_AddNumberToObject(b->root, "scene", 0);
  cJSON *scene = cJSON_CreateObject();
  int roots[3] = {0, 1, 2};
  cJSON_AddItemToObject(scene, "nodes", cJSON_CreateIntArray(roots, 3));
  cJSON *scenes = cJSON_AddArrayToObject(b->root, "scenes");
  cJSON_AddItemToArray(scenes, scene);
  cJSON *nodes = cJSON_AddArrayToObject(b->root, "nodes");
  int node_mesh[4] = {0, 1, 2, 1};
  for (int i = 0; i < 4; i++) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddNumberToObject(n, "mesh", node_mesh[i]);
    cJSON_AddItemToArray(nodes, n);
  }
  b->accessors = cJSON_AddArrayToObject(b->root, "accessors");
  b->views = cJSON_AddArrayToObject(b->root, "bufferViews");
  cJSON *meshes = cJSON_AddArrayToObject(b->root, "meshes");
  const char *hat[] = {"blink"}, *face[] = {"smile", "blink"}, *brow[] = {"frown"};
  gb_mesh(b, meshes, "hat", 0, hat, 1);
  gb_mesh(b, meshes, "face", 5, face, 2);
  gb_mesh(b, meshes, "brow", 10, brow, 1);
  cJSON_AddArrayToObject(b->root, "animations");
}

static void build_animations(gltf_builder *b) {
  cJSON *anims = cJSON_GetObjectItem(b->root, "animations");
  /* 0 "talk": the face, linear, with a negative weight (assimp would clamp it to 0). */
  const float t3[3] = {0, 1, 2}, talk[6] = {0, 0, -0.5f, 1, 1, 0.25f};
  gb_channel(b, gb_animation(anims, "talk"), 1, "weights", NULL, t3, 3, talk, 6);
  /* 1 unnamed: the face, cubic; per key in-tangents, values, out-tangents (assimp would mix
   * the 9s and 7s into the weights). */
  const float t2[2] = {0, 0.5f}, cubic[12] = {9, 9, 0.1f, 0.2f, 7, 7, 9, 9, 0.3f, 0.4f, 7, 7};
  gb_channel(b, gb_animation(anims, NULL), 1, "weights", "CUBICSPLINE", t2, 2, cubic, 12);
  /* 2 "both": the hat stepped on [0, 1], the brow linear on [0.5, 1.5]. */
  cJSON *both = gb_animation(anims, "both");
  const float ts[2] = {0, 1}, step[2] = {0.5f, 1.0f}, tl[2] = {0.5f, 1.5f}, lin[2] = {0.2f, 0.4f};
  gb_channel(b, both, 0, "weights", "STEP", ts, 2, step, 2);
  gb_channel(b, both, 2, "weights", NULL, tl, 2, lin, 2);
  /* 3 "talk" again: the brow. */
  const float up[2] = {0, 1};
  gb_channel(b, gb_animation(anims, "talk"), 2, "weights", NULL, ts, 2, up, 2);
  /* 4 "move": a translation only, no weights: no clip. */
  const float move[6] = {0, 0, 0, 1, 0, 0};
  gb_channel(b, gb_animation(anims, "move"), 0, "translation", NULL, ts, 2, move, 6);
  /* 5 "offstage": the face node outside the scene: no clip. */
  gb_channel(b, gb_animation(anims, "offstage"), 3, "weights", NULL, ts, 2, (const float[4]){1, 1, 1, 1}, 4);
}

static void expect_weights(const mesh *m, const mesh_clip *c, uint32_t key, double blink,
                           double smile, double frown) {
  ASSERT_EQ(c->target_count, 3);
  const float *row = c->weights + (size_t)key * c->target_count;
  ASSERT_NEAR(row[mesh_find_target(m, "blink")], blink, 1e-6);
  ASSERT_NEAR(row[mesh_find_target(m, "smile")], smile, 1e-6);
  ASSERT_NEAR(row[mesh_find_target(m, "frown")], frown, 1e-6);
}

static void check_written_animations(const char *name) {
  gltf_builder b;
  gb_scene(&b);
  build_animations(&b);
  mesh *m = import_ok(gb_write(&b, name));
  cJSON_Delete(b.root);
  ASSERT_EQ(m->target_count, 3);
  ASSERT_EQ(mesh_find_target(m, "blink"), 0);
  ASSERT_EQ(mesh_find_target(m, "smile"), 1);
  ASSERT_EQ(mesh_find_target(m, "frown"), 2);
  for (uint32_t i = 0; i < m->clip_count; i++)
    fprintf(stderr, "%s: clip %u '%s' keys %u\n", name, i, m->clips[i].name, m->clips[i].key_count);
  ASSERT_EQ(m->clip_count, 4);
  ASSERT_EQ(mesh_find_clip(m, "move"), -1);
  ASSERT_EQ(mesh_find_clip(m, "offstage"), -1);

  const mesh_clip *c = &m->clips[mesh_find_clip(m, "talk")];
  ASSERT_EQ(c->key_count, 3);
  ASSERT_EQ(c->frame_count, 0);
  for (int k = 0; k < 3; k++) ASSERT_NEAR(c->times[k], k, 0);
  expect_weights(m, c, 0, 0, 0, 0);
  expect_weights(m, c, 1, 1, -0.5, 0); /* negative weights survive */
  expect_weights(m, c, 2, 0.25, 1, 0);

  ASSERT_EQ(mesh_find_clip(m, "animation1"), 1);
  c = &m->clips[1];
  ASSERT_EQ(c->key_count, 2);
  ASSERT_NEAR(c->times[1], 0.5, 0);
  expect_weights(m, c, 0, 0.2, 0.1, 0); /* cubic: the values, not the tangents */
  expect_weights(m, c, 1, 0.4, 0.3, 0);

  /* Two channels on different time lines: resampled onto the union 0, 0.5, 1, 1.5. */
  c = &m->clips[mesh_find_clip(m, "both")];
  ASSERT_EQ(c->key_count, 4);
  const double times[4] = {0, 0.5, 1, 1.5};
  for (int k = 0; k < 4; k++) ASSERT_NEAR(c->times[k], times[k], 0);
  expect_weights(m, c, 0, 0.5, 0, 0.2); /* brow before its first key: its first value */
  expect_weights(m, c, 1, 0.5, 0, 0.2); /* hat stepped: still 0.5 */
  expect_weights(m, c, 2, 1.0, 0, 0.3); /* brow halfway */
  expect_weights(m, c, 3, 1.0, 0, 0.4); /* hat after its last key: its last value */

  /* The second "talk" takes its animation index. */
  ASSERT_EQ(mesh_find_clip(m, "talk_3"), 3);
  expect_weights(m, &m->clips[3], 1, 0, 0, 1);
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  mesh_destroy(m);
}

TEST(gltf_weight_clips_follow_the_importers_target_order_and_keep_negative_and_cubic_weights) {
  check_written_animations("anims.gltf");
}

TEST(glb_weight_clips_are_read_from_the_binary_chunk) { check_written_animations("anims.glb"); }

TEST(gltf_animation_whose_sampler_does_not_fit_its_targets_is_refused) {
  gltf_builder b;
  gb_scene(&b);
  cJSON *anims = cJSON_GetObjectItem(b.root, "animations");
  const float t2[2] = {0, 1}, three[3] = {0, 1, 0};
  gb_channel(&b, gb_animation(anims, "short"), 1, "weights", NULL, t2, 2, three, 3);
  refused(gb_write(&b, "short.gltf"), MESH_EFORMAT, "3 outputs for 2 keys and 2 targets");
  cJSON_Delete(b.root);

  gb_scene(&b);
  anims = cJSON_GetObjectItem(b.root, "animations");
  const float back[3] = {0, 1, 1}, w[3] = {0, 1, 0};
  gb_channel(&b, gb_animation(anims, "stuck"), 0, "weights", NULL, back, 3, w, 3);
  refused(gb_write(&b, "stuck.gltf"), MESH_EFORMAT, "does not come after");
  cJSON_Delete(b.root);
}

TEST(gltf_weight_samplers_that_crash_assimp_are_refused_before_it_reads_them) {
  /* assimp 5.2.5 divides by the key count (SIGFPE on no keys) and, for CUBICSPLINE, takes
   * outputs / keys - 2 as the target count (wrapping below zero on short outputs). */
  gltf_builder b;
  gb_scene(&b);
  cJSON *anims = cJSON_GetObjectItem(b.root, "animations");
  const float t2[2] = {0, 1}, w2[2] = {0, 1};
  gb_channel(&b, gb_animation(anims, "empty"), 0, "weights", NULL, t2, 2, w2, 2);
  cJSON *acc = cJSON_GetArrayItem(b.accessors, cJSON_GetArraySize(b.accessors) - 2);
  cJSON_SetNumberValue(cJSON_GetObjectItem(acc, "count"), 0); /* the input */
  refused(gb_write(&b, "nokeys.gltf"), MESH_EFORMAT, "0 keys and 2 outputs (no keys)");
  cJSON_Delete(b.root);

  gb_scene(&b);
  anims = cJSON_GetObjectItem(b.root, "animations");
  const float w3[3] = {0, 1, 0};
  gb_channel(&b, gb_animation(anims, "thin"), 0, "weights", "CUBICSPLINE", t2, 2, w3, 3);
  refused(gb_write(&b, "thin.glb"), MESH_EFORMAT, "CUBICSPLINE needs 3 outputs per key");
  cJSON_Delete(b.root);
}

/* ---- validation and target bookkeeping ---------------------------------------------------------- */

/* A grid with 4 keyframes and the given clips (copied). */
static mesh *mesh_with_clips(const mesh_clip *clips, uint32_t n) {
  mesh *m = oracle_grid(2, 1.0);
  m->frame_count = 4;
  m->frame_rate = 10;
  size_t per = 3 * (size_t)m->vertex_count;
  m->frames = malloc(sizeof(float) * per * 4);
  for (int f = 0; f < 4; f++) memcpy(m->frames + per * f, m->positions, sizeof(float) * per);
  m->clips = calloc(n + 1, sizeof(mesh_clip));
  for (uint32_t i = 0; i < n; i++) {
    m->clips[i] = clips[i];
    m->clips[i].name = clips[i].name ? strdup(clips[i].name) : NULL;
    if (clips[i].key_count) {
      m->clips[i].times = malloc(sizeof(float) * clips[i].key_count);
      memcpy(m->clips[i].times, clips[i].times, sizeof(float) * clips[i].key_count);
      m->clips[i].weights = calloc((size_t)clips[i].key_count * clips[i].target_count + 1, sizeof(float));
    }
  }
  m->clip_count = n;
  return m;
}

static void expect_invalid(const mesh_clip *clips, uint32_t n, int code, const char *needle) {
  mesh *m = mesh_with_clips(clips, n);
  char err[MESH_ERR_LEN] = "";
  int rc = mesh_validate(m, err, sizeof(err));
  fprintf(stderr, "-> %d: %s\n", rc, err);
  ASSERT_EQ(rc, code);
  ASSERT_STR_CONTAINS(err, needle);
  mesh_destroy(m);
}

TEST(validate_catches_clips_out_of_range_unnamed_duplicated_or_unordered) {
  mesh_clip ok[2] = {{.name = "a", .fps = 10, .first_frame = 0, .frame_count = 2},
                     {.name = "b", .fps = 10, .first_frame = 2, .frame_count = 2}};
  mesh *m = mesh_with_clips(ok, 2);
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  ASSERT_EQ(mesh_find_clip(m, "b"), 1);
  ASSERT_EQ(mesh_find_clip(m, "c"), -1);
  mesh_destroy(m);

  mesh_clip past = {.name = "walk", .fps = 10, .first_frame = 2, .frame_count = 3};
  expect_invalid(&past, 1, MESH_ERANGE, "clip 'walk' covers frames 2..4 but the mesh has 4 frames");
  mesh_clip wrap = {.name = "wrap", .fps = 10, .first_frame = UINT32_MAX, .frame_count = 2};
  expect_invalid(&wrap, 1, MESH_ERANGE, "'wrap'");
  mesh_clip twice[2] = {ok[0], ok[0]};
  expect_invalid(twice, 2, MESH_EINVAL, "two clips are called 'a'");
  mesh_clip unnamed = {.name = "", .fps = 10, .frame_count = 1};
  expect_invalid(&unnamed, 1, MESH_EINVAL, "clip 0 has no name");
  mesh_clip slow = {.name = "slow", .fps = 0, .frame_count = 1};
  expect_invalid(&slow, 1, MESH_EINVAL, "frame rate");
  mesh_clip empty = {.name = "empty"};
  expect_invalid(&empty, 1, MESH_EINVAL, "neither frames nor weight keys");

  /* Weight clips on a mesh without targets: times still checked. */
  float back[3] = {0, 2, 1};
  mesh_clip unordered = {.name = "back", .key_count = 3, .times = back};
  expect_invalid(&unordered, 1, MESH_EINVAL, "key 2 at 1s does not come after key 1 at 2s");
  float nan_time[2] = {0, NAN};
  mesh_clip nan_clip = {.name = "nan", .key_count = 2, .times = nan_time};
  expect_invalid(&nan_clip, 1, MESH_ENONFINITE, "non-finite time");
}

TEST(validate_catches_non_finite_clip_weights) {
  mesh *m = mesh_with_clips(NULL, 0);
  float *d = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  d[2] = 1;
  ASSERT_OK(mesh_add_target_dense(m, "lift", d, 0), NULL);
  free(d);
  free(m->clips);
  m->clips = calloc(1, sizeof(mesh_clip));
  m->clips[0].name = strdup("lift");
  m->clips[0].key_count = 2;
  m->clips[0].target_count = 1;
  m->clips[0].times = malloc(2 * sizeof(float));
  m->clips[0].times[0] = 0;
  m->clips[0].times[1] = 1;
  m->clips[0].weights = malloc(2 * sizeof(float));
  m->clips[0].weights[0] = 0;
  m->clips[0].weights[1] = INFINITY;
  m->clip_count = 1;
  char err[MESH_ERR_LEN] = "";
  ASSERT_EQ(mesh_validate(m, err, sizeof(err)), MESH_ENONFINITE);
  ASSERT_STR_CONTAINS(err, "weight of target 'lift' at key 1");
  m->clips[0].weights[1] = 1;
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  /* Without the target it weighs, the clip is out of range. */
  mesh_remove_last_target(m);
  ASSERT_EQ(mesh_validate(m, err, sizeof(err)), MESH_ERANGE);
  ASSERT_STR_CONTAINS(err, "clip 'lift' weighs 1 targets but the mesh has 0");
  mesh_destroy(m);
}

TEST(weight_clips_keep_their_columns_when_targets_are_added_later) {
  /* The server appends sculpted targets while clips play: a clip's arrays must not move. */
  gltf_builder b;
  gb_scene(&b);
  build_animations(&b);
  mesh *m = import_ok(gb_write(&b, "rows.gltf"));
  cJSON_Delete(b.root);
  int talk = mesh_find_clip(m, "talk");
  ASSERT(talk >= 0);
  const float *before = m->clips[talk].weights;
  float *d = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  d[0] = 1;
  ASSERT_OK(mesh_add_target_dense(m, "sculpt", d, 0), NULL);
  ASSERT_EQ(m->target_count, 4);
  const mesh_clip *c = &m->clips[talk];
  ASSERT(c->weights == before);
  expect_weights(m, c, 1, 1, -0.5, 0); /* still three per key */
  expect_weights(m, c, 2, 0.25, 1, 0);
  char err[MESH_ERR_LEN];
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  mesh_remove_last_target(m);
  ASSERT_OK(mesh_validate(m, err, sizeof(err)), err);
  free(d);
  mesh_destroy(m);
}
