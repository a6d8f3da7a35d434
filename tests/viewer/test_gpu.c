/*
 * test_gpu.c — the viewer's GPU passes against their CPU references: morph against
 * mesh_evaluate, normals against mesh_compute_normals(MESH_NORMALS_ANGLE), on the demo head,
 * icospheres, a UV-seamed sphere and real meshes (Wuson: 51 parts; spider.obj: UV seams).
 *
 * Each test opens a hidden GLFW window (OpenGL 3.3 core). They need an X display: tests/run.sh
 * starts Xvfb when DISPLAY is empty; by hand use `xvfb-run -a ctest ...`.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NODELETE */
#include <dlfcn.h>
#include <link.h>
#include <time.h>
#include <unistd.h>

#include "oracle.h"
#include "test.h"
#include "vw_context.h"
#include "vw_gl.h"
#include "vw_gpu.h"
#include "vw_shaders.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static void open_gl(vw_context *c) {
  char err[512];
  int rc = vw_context_init(c, 64, 64, 1, "test-viewer-gpu", err, sizeof(err));
  if (rc != 0) test__fail(__FILE__, __LINE__, "no GL context (%d): %s", rc, err);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static void rng_seed(uint64_t s) { rng_state = s * 0x9e3779b97f4a7c15ull + 1; }
static double rnd(void) { /* uniform [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53;
}
static double rnd_range(double lo, double hi) { return lo + (hi - lo) * rnd(); }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Adds `n` localized bump targets (a smooth push along the normal direction p/|p| around a
 * random centre, `amp` at the centre) and, when `noisy`, one dense random target. */
static void add_bump_targets(mesh *m, uint32_t n, double amp, int noisy) {
  float *dense = malloc(sizeof(float) * 3 * m->vertex_count);
  double diag = mesh_bbox_diagonal(m);
  for (uint32_t i = 0; i < n; i++) {
    memset(dense, 0, sizeof(float) * 3 * m->vertex_count);
    uint32_t centre = (uint32_t)(rnd() * m->vertex_count);
    const float *c = m->positions + 3 * (size_t)centre;
    double radius = rnd_range(0.1, 0.35) * diag;
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      const float *p = m->positions + 3 * (size_t)v;
      double d2 = 0, pl = 0;
      for (int k = 0; k < 3; k++) {
        d2 += ((double)p[k] - c[k]) * ((double)p[k] - c[k]);
        pl += (double)p[k] * p[k];
      }
      double r = sqrt(d2) / radius;
      if (r >= 1.0 || pl == 0.0) continue;
      double s = amp * (1 - r * r) * (1 - r * r) / sqrt(pl);
      for (int k = 0; k < 3; k++) dense[3 * (size_t)v + k] = (float)(s * p[k]);
    }
    char name[32];
    snprintf(name, sizeof(name), "bump%u", m->target_count);
    ASSERT_OK(mesh_add_target_dense(m, name, dense, 0.0f), name);
  }
  if (noisy) {
    for (size_t i = 0; i < 3 * (size_t)m->vertex_count; i++) dense[i] = (float)(rnd_range(-1, 1) * amp * 0.1);
    ASSERT_OK(mesh_add_target_dense(m, "noise", dense, 0.0f), NULL);
  }
  free(dense);
}

/* Weights in [-1.5, 1.5], a fraction `zeros` of them exactly 0. */
static void random_weights(float *w, uint32_t n, double zeros) {
  for (uint32_t i = 0; i < n; i++) w[i] = rnd() < zeros ? 0.0f : (float)rnd_range(-1.5, 1.5);
}

static void random_offsets(float *o, uint32_t first, uint32_t count, double amp) {
  for (size_t i = 3 * (size_t)first; i < 3 * ((size_t)first + count); i++) o[i] = (float)rnd_range(-amp, amp);
}

/* Largest per-component |gpu - cpu| of the morphed positions; fails above `tol`. */
static double check_morph(vw_gpu *g, const mesh *m, const float *weights, const float *offsets, double tol,
                          const char *what) {
  char err[512];
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  size_t n = 3 * (size_t)m->vertex_count;
  float *gpu = malloc(sizeof(float) * n), *cpu = malloc(sizeof(float) * n);
  ASSERT_OK(vw_gpu_read_positions(g, gpu), "read positions");
  mesh_evaluate(m, weights, offsets, cpu);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)gpu[i] - cpu[i]);
    if (!(d <= worst)) worst = d, at = i;
  }
  fprintf(stderr, "  morph %s: max |gpu - cpu| %.3g (tolerance %.3g)\n", what, worst, tol);
  if (!(worst <= tol))
    test__fail(__FILE__, __LINE__, "%s: vertex %zu component %zu: gpu %.9g cpu %.9g (|diff| %.3g > %.3g)", what,
               at / 3, at % 3, gpu[at], cpu[at], worst, tol);
  free(gpu);
  free(cpu);
  return worst;
}

/* Largest angle (degrees) between GPU and CPU normals of the shape the GPU holds now (morphed
 * with `weights` and `offsets`); fails above `max_deg`. Zero normals must match zero normals. */
static double check_normals(vw_gpu *g, const mesh *m, const mesh_topology *t, const float *weights,
                            const float *offsets, double max_deg, const char *what) {
  char err[512];
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  size_t n = 3 * (size_t)m->vertex_count;
  float *shape = malloc(sizeof(float) * n), *cpu = malloc(sizeof(float) * n), *gpu = malloc(sizeof(float) * n);
  mesh_evaluate(m, weights, offsets, shape);
  mesh_compute_normals(m, t, shape, MESH_NORMALS_ANGLE, cpu);
  ASSERT_OK(vw_gpu_read_normals(g, gpu), "read normals");
  double worst = 0;
  uint32_t at = 0, zeros = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *a = gpu + 3 * (size_t)v, *b = cpu + 3 * (size_t)v;
    double la = sqrt((double)a[0] * a[0] + (double)a[1] * a[1] + (double)a[2] * a[2]);
    double lb = sqrt((double)b[0] * b[0] + (double)b[1] * b[1] + (double)b[2] * b[2]);
    if (lb == 0.0) {
      if (la != 0.0)
        test__fail(__FILE__, __LINE__, "%s: vertex %u: cpu normal is 0, gpu (%g %g %g)", what, v, a[0], a[1], a[2]);
      zeros++;
      continue;
    }
    if (fabs(la - 1.0) > 1e-5)
      test__fail(__FILE__, __LINE__, "%s: vertex %u: gpu normal length %.9g", what, v, la);
    double c = (a[0] * (double)b[0] + a[1] * (double)b[1] + a[2] * (double)b[2]) / (la * lb);
    double deg = acos(c > 1 ? 1 : (c < -1 ? -1 : c)) * 180.0 / M_PI;
    if (!(deg <= worst)) worst = deg, at = v;
  }
  fprintf(stderr, "  normals %s: max angle %.4f deg at vertex %u (%u zero normals)\n", what, worst, at, zeros);
  if (!(worst <= max_deg))
    test__fail(__FILE__, __LINE__, "%s: vertex %u: gpu (%g %g %g) vs cpu (%g %g %g): %.4f deg > %.2f", what, at,
               gpu[3 * at], gpu[3 * at + 1], gpu[3 * at + 2], cpu[3 * at], cpu[3 * at + 1], cpu[3 * at + 2], worst,
               max_deg);
  /* Render vertices of one welded vertex (UV seam copies) read one texel: identical bits. */
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    uint32_t first = t->topo_render[t->topo_offsets[t->render_to_topo[v]]];
    if (memcmp(gpu + 3 * (size_t)v, gpu + 3 * (size_t)first, 3 * sizeof(float)) != 0)
      test__fail(__FILE__, __LINE__, "%s: seam copies %u and %u have different normals", what, v, first);
  }
  free(shape);
  free(cpu);
  free(gpu);
  return worst;
}

/* ---- context -------------------------------------------------------------------------------- */

TEST(gpu_context_without_a_display_fails_naming_xvfb) {
  unsetenv("DISPLAY");
  unsetenv("WAYLAND_DISPLAY");
  vw_context c;
  char err[512] = "";
  ASSERT_EQ(vw_context_init(&c, 64, 64, 1, "no display", err, sizeof(err)), VW_EGL);
  fprintf(stderr, "  %s\n", err);
  ASSERT_STR_CONTAINS(err, "Xvfb");
  ASSERT(c.window == NULL);
  vw_context_fini(&c); /* harmless after a failed init */
}

TEST(gpu_error_codes_each_have_a_sentence_of_their_own) {
  const int codes[] = {VW_EGL, VW_ESHADER, VW_ENOMEM, VW_EINVAL, VW_ETOOBIG};
  const size_t n = sizeof(codes) / sizeof(codes[0]);
  const char *unknown = vw_strerror(-1);
  ASSERT_STR_CONTAINS(unknown, "unknown");
  for (size_t i = 0; i < n; i++) {
    ASSERT(strcmp(vw_strerror(codes[i]), unknown) != 0);
    for (size_t j = 0; j < i; j++) ASSERT(strcmp(vw_strerror(codes[i]), vw_strerror(codes[j])) != 0);
  }
  ASSERT_STR_CONTAINS(vw_strerror(VW_ETOOBIG), "GL limit");
}

TEST(gpu_context_is_opengl_3_3_core_with_buffer_textures) {
  vw_context c;
  open_gl(&c);
  GLint max_texels = 0, profile = 0, flags = 0;
  glGetIntegerv(GL_MAX_TEXTURE_BUFFER_SIZE, &max_texels);
  glGetIntegerv(GL_CONTEXT_PROFILE_MASK, &profile);
  glGetIntegerv(GL_CONTEXT_FLAGS, &flags);
  fprintf(stderr, "  GL %d.%d, renderer '%s', version '%s', GL_MAX_TEXTURE_BUFFER_SIZE %d\n", c.gl_major,
          c.gl_minor, c.renderer, (const char *)glGetString(GL_VERSION), max_texels);
  ASSERT(c.gl_major * 10 + c.gl_minor >= 33);
  ASSERT(profile & GL_CONTEXT_CORE_PROFILE_BIT);
  ASSERT(flags & GL_CONTEXT_FLAG_FORWARD_COMPATIBLE_BIT);
  ASSERT(max_texels >= 65536);
  ASSERT(c.renderer[0] != '\0');
  vw_context_fini(&c);
}

TEST(gpu_shader_that_does_not_compile_fails_with_its_info_log) {
  vw_context c;
  open_gl(&c);
  const vw__gl_program_desc bad = {.label = "broken test shader",
                                .vs = "#version 330 core\nvoid main() { gl_Position = vec4(undeclared); }\n"};
  vw__gl_program p;
  char err[1024] = "";
  ASSERT_EQ(vw__gl_program_make(&p, &bad, err, sizeof(err)), VW_ESHADER);
  ASSERT_EQ(p.id, 0);
  ASSERT_STR_CONTAINS(err, "broken test shader");
  ASSERT_STR_CONTAINS(err, "undeclared"); /* the info log names the culprit */
  /* A feedback varying the shader does not write fails at link time, with the link log. */
  static const char *const missing[] = {"v_nothing"};
  const vw__gl_program_desc bad_link = {.label = "unlinkable test shader",
                                     .vs = "#version 330 core\nout vec3 v_x;\nvoid main() { v_x = vec3(1.0); }\n",
                                     .feedback = missing,
                                     .feedback_count = 1};
  ASSERT_EQ(vw__gl_program_make(&p, &bad_link, err, sizeof(err)), VW_ESHADER);
  ASSERT_STR_CONTAINS(err, "unlinkable test shader did not link");
  /* Every program of vw_shaders.c builds: the passes, the renderer's, the benchmark's. */
  for (int i = 0; i < VW__SHADERS_PASS_COUNT; i++) {
    ASSERT_OK(vw__gl_program_make(&p, &vw__shaders_passes[i], err, sizeof(err)), err);
    vw__gl_program_free(&p);
  }
  const vw__gl_program_desc *others[] = {&vw__shaders_mesh, &vw__shaders_overlay, &vw__shaders_tutorial, &vw__shaders_texclip};
  for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
    ASSERT_OK(vw__gl_program_make(&p, others[i], err, sizeof(err)), err);
    vw__gl_program_free(&p);
  }
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

/* ---- morph ---------------------------------------------------------------------------------- */

TEST(gpu_morph_matches_mesh_evaluate_on_the_demo_head) {
  vw_context c;
  open_gl(&c);
  rng_seed(1);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  char err[512];
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_half_targets(g), 0);
  ASSERT_EQ(vw_gpu_target_count(g), m->target_count);
  double tol = 1e-5 * mesh_bbox_diagonal(m);
  float *w = calloc(m->target_count, sizeof(float));
  float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  check_morph(g, m, NULL, NULL, tol, "demo head at rest");
  for (int round = 0; round < 4; round++) {
    random_weights(w, m->target_count, 0.3);
    random_offsets(off, 0, m->vertex_count, 0.005);
    vw_gpu_set_weights(g, w, m->target_count);
    vw_gpu_set_offsets(g, 0, m->vertex_count, off);
    check_morph(g, m, w, off, tol, "demo head, random weights and offsets");
  }
  free(w);
  free(off);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

TEST(gpu_morph_sums_more_active_targets_than_one_pass_holds) {
  vw_context c;
  open_gl(&c);
  rng_seed(2);
  mesh *m = oracle_icosphere(4, 1.0); /* 2562 vertices */
  add_bump_targets(m, 3 * VW_GPU_MAX_ACTIVE - 10, 0.05, 1);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  char err[512];
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  double tol = 1e-5 * mesh_bbox_diagonal(m);
  float *w = calloc(m->target_count, sizeof(float));
  float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  random_offsets(off, 0, m->vertex_count, 0.01);
  vw_gpu_set_offsets(g, 0, m->vertex_count, off);
  /* 1, 2 and 3 slices of VW_GPU_MAX_ACTIVE (odd and even counts of ping-pong passes). */
  const uint32_t actives[] = {VW_GPU_MAX_ACTIVE, VW_GPU_MAX_ACTIVE + 1, 2 * VW_GPU_MAX_ACTIVE + 7, m->target_count, 3};
  for (size_t r = 0; r < sizeof(actives) / sizeof(actives[0]); r++) {
    memset(w, 0, sizeof(float) * m->target_count);
    for (uint32_t k = 0; k < actives[r]; k++) {
      uint32_t i;
      do i = (uint32_t)(rnd() * m->target_count);
      while (w[i] != 0.0f);
      w[i] = (float)rnd_range(0.1, 1.2) * (rnd() < 0.4 ? -1.0f : 1.0f);
    }
    vw_gpu_set_weights(g, w, m->target_count);
    ASSERT_EQ(vw_gpu_active_targets(g), actives[r]);
    char what[64];
    snprintf(what, sizeof(what), "icosphere, %u active targets", actives[r]);
    check_morph(g, m, w, off, tol, what);
  }
  free(w);
  free(off);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

TEST(gpu_morph_follows_added_targets_and_partial_offset_ranges) {
  vw_context c;
  open_gl(&c);
  rng_seed(3);
  mesh *m = oracle_icosphere(3, 2.0);
  add_bump_targets(m, 5, 0.1, 0);
  /* The targets appended later: made on a copy so the handle starts with only the first 5. */
  mesh *later = oracle_icosphere(3, 2.0);
  add_bump_targets(later, 40, 0.1, 1);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  char err[512];
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  double tol = 1e-5 * mesh_bbox_diagonal(m);
  float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  float *w = calloc(m->target_count + later->target_count, sizeof(float));
  random_weights(w, m->target_count, 0.2);
  vw_gpu_set_weights(g, w, m->target_count);
  check_morph(g, m, w, off, tol, "5 targets");
  /* Append one by one (the texture grows several times), weights follow. */
  for (uint32_t i = 0; i < later->target_count; i++) {
    const mesh_target *nt = &later->targets[i];
    ASSERT_OK(vw_gpu_add_target(g, nt, err, sizeof(err)), err);
    ASSERT_OK(mesh_add_target_sparse(m, nt->name, nt->count, nt->indices, nt->deltas, 0.0f), NULL);
    ASSERT_EQ(vw_gpu_target_count(g), m->target_count);
    if (i % 8 == 0 || i + 1 == later->target_count) {
      random_weights(w, m->target_count, 0.3);
      vw_gpu_set_weights(g, w, m->target_count);
      check_morph(g, m, w, off, tol, "after vw_gpu_add_target");
    }
  }
  /* Partial offset ranges: the rest of the buffer keeps what it had. */
  for (int r = 0; r < 6; r++) {
    uint32_t first = (uint32_t)(rnd() * m->vertex_count);
    uint32_t count = 1 + (uint32_t)(rnd() * (m->vertex_count - first));
    random_offsets(off, first, count, 0.05);
    vw_gpu_set_offsets(g, first, count, off + 3 * (size_t)first);
    check_morph(g, m, w, off, tol, "after a partial offset range");
  }
  /* A range running past the end is clipped, not written out of bounds. */
  random_offsets(off, m->vertex_count - 10, 10, 0.05);
  vw_gpu_set_offsets(g, m->vertex_count - 10, 1000, off + 3 * (size_t)(m->vertex_count - 10));
  check_morph(g, m, w, off, tol, "after a clipped offset range");
  /* A bad target is refused and changes nothing. */
  uint32_t bad_index = m->vertex_count;
  float bad_delta[3] = {1, 2, 3};
  mesh_target bad = {.name = "bad", .count = 1, .indices = &bad_index, .deltas = bad_delta};
  ASSERT_EQ(vw_gpu_add_target(g, &bad, err, sizeof(err)), VW_EINVAL);
  ASSERT_STR_CONTAINS(err, "out of range");
  ASSERT_EQ(vw_gpu_target_count(g), m->target_count);
  check_morph(g, m, w, off, tol, "after a refused target");
  free(w);
  free(off);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  mesh_destroy(later);
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

/* The worst-case error of storing `maxabs` as a half float, computed independently of the
 * code under test: half the spacing of halves in maxabs's binade, or of the subnormals. */
static double half_bound(double maxabs) {
  if (maxabs == 0) return 0;
  int e;
  frexp(maxabs, &e); /* maxabs in [2^(e-1), 2^e) */
  double spacing = ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);
  return spacing / 2;
}

TEST(gpu_morph_with_half_floats_stays_within_the_budget) {
  vw_context c;
  open_gl(&c);
  rng_seed(4);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  add_bump_targets(m, 4, 0.05, 0); /* bigger than the face shapes: stay float under budget B */
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  double diag = mesh_bbox_diagonal(m);
  double *maxabs = calloc(m->target_count, sizeof(double));
  for (uint32_t i = 0; i < m->target_count; i++)
    for (size_t k = 0; k < 3 * (size_t)m->targets[i].count; k++)
      if (fabs(m->targets[i].deltas[k]) > maxabs[i]) maxabs[i] = fabs(m->targets[i].deltas[k]);
  float *w = calloc(m->target_count, sizeof(float));
  float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  /* A large budget: every target is half. A budget between the face shapes' and the bumps'
   * error: a mix, exactly as predicted from max|Δ|. */
  double smallest = 1e30, largest = 0;
  for (uint32_t i = 0; i < m->target_count; i++) {
    if (maxabs[i] * 0x1p-11 < smallest) smallest = maxabs[i] * 0x1p-11;
    if (maxabs[i] * 0x1p-11 > largest) largest = maxabs[i] * 0x1p-11;
  }
  const double budgets[] = {1.0, sqrt(smallest * largest)};
  for (int b = 0; b < 2; b++) {
    vw_gpu *g = NULL;
    char err[512];
    ASSERT_OK(vw_gpu_create(m, &t, budgets[b], &g, err, sizeof(err)), err);
    uint32_t want = 0;
    for (uint32_t i = 0; i < m->target_count; i++) want += maxabs[i] * 0x1p-11 <= budgets[b];
    fprintf(stderr, "  budget %.3g: %u of %u targets half\n", budgets[b], vw_gpu_half_targets(g), m->target_count);
    ASSERT_EQ(vw_gpu_half_targets(g), want);
    ASSERT(want > 0);
    if (b == 1) ASSERT(want < m->target_count);
    for (int round = 0; round < 3; round++) {
      random_weights(w, m->target_count, 0.25);
      random_offsets(off, 0, m->vertex_count, 0.002);
      vw_gpu_set_weights(g, w, m->target_count);
      vw_gpu_set_offsets(g, 0, m->vertex_count, off);
      double allowed = 1e-5 * diag;
      for (uint32_t i = 0; i < m->target_count; i++)
        if (maxabs[i] * 0x1p-11 <= budgets[b]) allowed += fabs(w[i]) * half_bound(maxabs[i]);
      check_morph(g, m, w, off, allowed, "half floats within the budget");
    }
    vw_gpu_destroy(g);
  }
  free(maxabs);
  free(w);
  free(off);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

TEST(gpu_update_runs_the_passes_only_when_something_changed) {
  vw_context c;
  open_gl(&c);
  mesh *m = oracle_icosphere(2, 1.0);
  add_bump_targets(m, 3, 0.1, 0);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  char err[512];
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_updates(g), 0);
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_updates(g), 1);
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_updates(g), 1);
  float w[3] = {0, 0, 0};
  vw_gpu_set_weights(g, w, 3); /* same as before: nothing to do */
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_updates(g), 1);
  w[1] = 0.5f;
  vw_gpu_set_weights(g, w, 3);
  ASSERT_EQ(vw_gpu_active_targets(g), 1);
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_updates(g), 2);
  vw_gpu_set_weights(g, w, 3);
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_updates(g), 2);
  float o[3] = {0.1f, 0, 0};
  vw_gpu_set_offsets(g, 7, 1, o);
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_updates(g), 3);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  vw_context_fini(&c);
}

TEST(gpu_mesh_larger_than_a_buffer_texture_fails_naming_the_limit) {
  vw_context c;
  open_gl(&c);
  mesh *m = oracle_icosphere(2, 1.0); /* 162 vertices, 320 triangles: 960 face texels */
  add_bump_targets(m, 20, 0.1, 0);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  char err[512];
  /* Pretend the GL allows 3000 texels: 20 targets × 162 texels do not fit. */
  vw__gpu_limit_texels(3000);
  ASSERT_EQ(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), VW_ETOOBIG);
  ASSERT(g == NULL);
  fprintf(stderr, "  %s\n", err);
  ASSERT_STR_CONTAINS(err, "GL_MAX_TEXTURE_BUFFER_SIZE");
  ASSERT_STR_CONTAINS(err, "20 targets");
  /* 18 fit exactly; the 19th appended does not, and the handle keeps working. */
  uint32_t all = m->target_count;
  m->target_count = 18;
  vw__gpu_limit_texels(18 * 162);
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  ASSERT_EQ(vw_gpu_add_target(g, &m->targets[18], err, sizeof(err)), VW_ETOOBIG);
  fprintf(stderr, "  %s\n", err);
  ASSERT_STR_CONTAINS(err, "GL_MAX_TEXTURE_BUFFER_SIZE");
  ASSERT_EQ(vw_gpu_target_count(g), 18);
  float w[18];
  random_weights(w, 18, 0.2);
  vw_gpu_set_weights(g, w, 18);
  check_morph(g, m, w, NULL, 1e-5 * mesh_bbox_diagonal(m), "after a refused target");
  m->target_count = all;
  vw__gpu_limit_texels(0);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  vw_context_fini(&c);
}

/* ---- normals -------------------------------------------------------------------------------- */

TEST(gpu_normals_match_the_reference_on_spheres) {
  vw_context c;
  open_gl(&c);
  rng_seed(5);
  mesh *spheres[2] = {oracle_icosphere(5, 3.0), oracle_uv_sphere(48, 64, 1.0)};
  for (int s = 0; s < 2; s++) {
    mesh *m = spheres[s];
    add_bump_targets(m, 6, 0.15, 0);
    mesh_topology t;
    ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
    vw_gpu *g = NULL;
    char err[512];
    ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
    check_normals(g, m, &t, NULL, NULL, 0.5, s ? "uv sphere at rest" : "icosphere at rest");
    float *w = calloc(m->target_count, sizeof(float));
    float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
    random_weights(w, m->target_count, 0.2);
    random_offsets(off, 0, m->vertex_count, 0.002);
    vw_gpu_set_weights(g, w, m->target_count);
    vw_gpu_set_offsets(g, 0, m->vertex_count, off);
    check_normals(g, m, &t, w, off, 0.5, s ? "uv sphere deformed" : "icosphere deformed");
    if (s == 1) {
      /* The seam twins (first and last vertex of each ring) share their normal. */
      float *n = malloc(sizeof(float) * 3 * m->vertex_count);
      ASSERT_OK(vw_gpu_read_normals(g, n), NULL);
      for (uint32_t j = 0; j < 47; j++) ASSERT(memcmp(n + 3 * (j * 65), n + 3 * (j * 65 + 64), 12) == 0);
      free(n);
    }
    free(w);
    free(off);
    vw_gpu_destroy(g);
    mesh_topology_fini(&t);
    mesh_destroy(m);
  }
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

TEST(gpu_normals_match_the_reference_on_the_demo_head_across_its_uv_seam) {
  vw_context c;
  open_gl(&c);
  rng_seed(6);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT(t.vertex_count < m->vertex_count); /* the seam splits render vertices */
  vw_gpu *g = NULL;
  char err[512];
  ASSERT_OK(vw_gpu_create(m, &t, 1e-6 * mesh_bbox_diagonal(m), &g, err, sizeof(err)), err);
  check_normals(g, m, &t, NULL, NULL, 0.5, "demo head at rest");
  float *w = calloc(m->target_count, sizeof(float));
  float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  random_weights(w, m->target_count, 0.3);
  /* Offsets across the seam too, smooth enough to keep the surface a surface. */
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *p = m->positions + 3 * (size_t)v;
    off[3 * v] = 0.004f * sinf(40.0f * p[1]);
    off[3 * v + 2] = 0.004f * cosf(30.0f * p[0]);
  }
  vw_gpu_set_weights(g, w, m->target_count);
  vw_gpu_set_offsets(g, 0, m->vertex_count, off);
  /* The viewer's budget (1e-6 of the diagonal) keeps these few-millimetre shapes in float;
   * were any half, the shape error it allows is far too small to turn a normal by 0.5°. */
  check_normals(g, m, &t, w, off, 0.5, "demo head deformed");
  free(w);
  free(off);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

static void real_mesh_normals(const char *path, const char *name) {
  vw_context c;
  open_gl(&c);
  rng_seed(7);
  mesh *m = NULL;
  char err[512];
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  mesh_stats st;
  ASSERT_OK(mesh_compute_stats(m, &t, &st), NULL);
  fprintf(stderr, "  %s: %u render vertices, %u welded, %u triangles, %u components, %u degenerate\n", name,
          st.vertices, st.topology_vertices, st.triangles, st.components, st.degenerate_triangles);
  add_bump_targets(m, 8, 0.02 * mesh_bbox_diagonal(m), 0);
  vw_gpu *g = NULL;
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  char what[128];
  snprintf(what, sizeof(what), "%s at rest", name);
  check_normals(g, m, &t, NULL, NULL, 0.5, what);
  float *w = calloc(m->target_count, sizeof(float));
  float *off = calloc(3 * (size_t)m->vertex_count, sizeof(float));
  random_weights(w, m->target_count, 0.25);
  double d = mesh_bbox_diagonal(m);
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *p = m->positions + 3 * (size_t)v;
    off[3 * v + 1] = (float)(0.01 * d * sin(20.0 * p[0] / d));
  }
  vw_gpu_set_weights(g, w, m->target_count);
  vw_gpu_set_offsets(g, 0, m->vertex_count, off);
  snprintf(what, sizeof(what), "%s deformed", name);
  check_normals(g, m, &t, w, off, 0.5, what);
  check_morph(g, m, w, off, 1e-5 * d, what);
  free(w);
  free(off);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}

TEST(gpu_normals_match_the_reference_on_wuson_with_51_parts) {
  real_mesh_normals(test_assimp_model("OFF/Wuson.off"), "Wuson.off");
}

TEST(gpu_normals_match_the_reference_on_the_uv_seamed_spider) {
  real_mesh_normals(test_assimp_model("OBJ/spider.obj"), "spider.obj");
}

TEST(gpu_normals_match_the_reference_on_the_elephant) {
  real_mesh_normals(test_cgal_mesh("elephant.off"), "elephant.off");
}

TEST(gpu_vertex_without_a_proper_triangle_gets_a_zero_normal) {
  vw_context c;
  open_gl(&c);
  /* A quad (two good triangles), a collinear triangle whose far corner (vertex 6) has no other
   * triangle, and an isolated vertex 7 that no triangle uses. */
  mesh *m = mesh_create();
  ASSERT_OK(mesh_alloc(m, 8, 3, 0, 0), NULL);
  const float p[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {2, 0, 0}, {3, 0, 0}, {4, 0, 0}, {5, 5, 5}};
  const uint32_t tri[3][3] = {{0, 1, 2}, {0, 2, 3}, {4, 5, 6}};
  memcpy(m->positions, p, sizeof(p));
  memcpy(m->triangles, tri, sizeof(tri));
  mesh_update_bounds(m);
  char err[512];
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  ASSERT_OK(vw_gpu_create(m, &t, 0, &g, err, sizeof(err)), err);
  check_normals(g, m, &t, NULL, NULL, 0.5, "degenerate and isolated");
  float n[8 * 3];
  ASSERT_OK(vw_gpu_read_normals(g, n), NULL);
  for (int v = 4; v < 8; v++)
    for (int k = 0; k < 3; k++) ASSERT(n[3 * v + k] == 0.0f);
  ASSERT_NEAR(n[2], 1.0, 1e-6); /* the quad faces +Z */
  /* Moving vertex 6 off the line makes its triangle real: the normal appears. */
  float o[3] = {0, 1, 0};
  vw_gpu_set_offsets(g, 6, 1, o);
  float off[8 * 3] = {0};
  off[3 * 6 + 1] = 1;
  check_normals(g, m, &t, NULL, off, 0.5, "degenerate made real");
  ASSERT_OK(vw_gpu_read_normals(g, n), NULL);
  ASSERT_NEAR(n[3 * 6 + 2], 1.0, 1e-6);
  ASSERT(n[3 * 7] == 0.0f && n[3 * 7 + 1] == 0.0f && n[3 * 7 + 2] == 0.0f);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
  mesh_destroy(m);
  vw_context_fini(&c);
}

/* ---- timings (printed, not asserted) --------------------------------------------------------- */

static void time_updates(const char *name, mesh *m, uint32_t active) {
  mesh_topology t;
  double t0 = now_ms();
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  vw_gpu *g = NULL;
  char err[512];
  double t1 = now_ms();
  ASSERT_OK(vw_gpu_create(m, &t, 1e-6 * mesh_bbox_diagonal(m), &g, err, sizeof(err)), err);
  glFinish();
  double t2 = now_ms();
  float *w = calloc(m->target_count, sizeof(float));
  ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err); /* warm-up: first draw compiles variants */
  glFinish();
  double best = 1e30, sum = 0, submit_sum = 0;
  const int runs = 10;
  for (int r = 0; r < runs; r++) {
    memset(w, 0, sizeof(float) * m->target_count);
    for (uint32_t k = 0; k < active; k++) w[(k * 7 + (uint32_t)r) % m->target_count] = 0.1f * (float)(k + 1 + r);
    vw_gpu_set_weights(g, w, m->target_count);
    double a = now_ms();
    ASSERT_OK(vw_gpu_update(g, err, sizeof(err)), err);
    double b = now_ms();
    glFinish();
    double e = now_ms() - a;
    submit_sum += b - a;
    sum += e;
    if (e < best) best = e;
  }
  fprintf(stderr,
          "  TIMING %s: %u vertices (%u welded, %u triangles), %u targets (%u half), %u active: "
          "vw_gpu_update + glFinish best %.2f ms, mean %.2f ms (submit %.2f ms); create %.1f ms, weld %.1f ms\n",
          name, m->vertex_count, t.vertex_count, t.triangle_count, m->target_count, vw_gpu_half_targets(g), active,
          best, sum / runs, submit_sum / runs, t2 - t1, t1 - t0);
  free(w);
  vw_gpu_destroy(g);
  mesh_topology_fini(&t);
}

TEST(gpu_update_timings_on_the_demo_head_and_a_large_icosphere) {
  vw_context c;
  open_gl(&c);
  fprintf(stderr, "  GL %d.%d on %s\n", c.gl_major, c.gl_minor, c.renderer);
  rng_seed(8);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  time_updates("demo head", m, 8);
  mesh_destroy(m);
  /* Icospheres come in 40962 and 163842 vertices: time the larger, and a 100k UV sphere. */
  ASSERT_OK(mesh_demo_icosphere(7, 1.0, &m), NULL);
  add_bump_targets(m, 52, 0.05, 0);
  time_updates("icosphere level 7", m, 8);
  mesh_destroy(m);
  m = oracle_uv_sphere(250, 400, 1.0); /* 99851 vertices */
  add_bump_targets(m, 52, 0.05, 0);
  time_updates("uv sphere 100k", m, 8);
  mesh_destroy(m);
  ASSERT_EQ(glGetError(), GL_NO_ERROR);
  vw_context_fini(&c);
}
