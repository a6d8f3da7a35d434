/*
 * bench_view.c — `deform-view-bench`: frame time of deform-view's GPU path against the common
 * tutorial approach, on the same mesh, in the same run, in the same GL context.
 *
 *   deform-view-bench [--vertices V] [--targets T] [--active A] [--sculpt S] [--frames F]
 *                     [--size WxH] [--json] [--pick]
 *   deform-view-bench texclip ...   (the texture clip pass: bench_texclip.c)
 *
 * The mesh: a V-vertex wavy grid, T targets (smooth bumps, each moving ~10% of the vertices),
 * and per frame: A weights change (a different set each frame) and S consecutive vertices get
 * new sculpt offsets. Both paths draw the lit mesh into a W×H off-screen framebuffer and
 * glFinish, so a frame's time includes the GPU's work (with Mesa llvmpipe, on the CPU cores).
 *
 *   gpu       what deform-view does: new weights = the active list only; the sculpt range by
 *             glBufferSubData; morph + normals passes by transform feedback; draw.
 *   tutorial  morph on the CPU (every target with a non-zero weight, every vertex), normals on the
 *             CPU (area-weighted face normals summed per vertex), glBufferSubData of the whole
 *             position and normal arrays, draw.
 *
 * --pick times picking instead (issue 26): F pointer moves at pixels spread over the view, each
 * after the shape changed (S sculpted vertices, as during a stroke), by the CPU pick deform-view
 * had (read the morphed positions back, then a ray against every triangle: vw_edit_pick) and by
 * the GPU pick (vw_pick_at: one pixel of IDs drawn and read back). The two must name the same
 * vertex; the count of those that differ (ties between corners) is printed.
 */
#include <epoxy/gl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vw_camera.h"
#include "vw_context.h"
#include "vw_gl.h"
#include "vw_edit.h"
#include "vw_gpu.h"
#include "vw_pick.h"
#include "vw_render.h"
#include "vw_shaders.h"
#include "bench_texclip.h"


/* A wavy n × n grid in [-1, 1]² with T smooth bump targets. */
static mesh *make_mesh(uint32_t n, uint32_t T) {
  mesh *m = mesh_create();
  if (!m || mesh_alloc(m, n * n, 2 * (n - 1) * (n - 1), 0, 0) != 0) return NULL;
  for (uint32_t j = 0; j < n; j++)
    for (uint32_t i = 0; i < n; i++) {
      float x = -1 + 2.0f * i / (n - 1), y = -1 + 2.0f * j / (n - 1);
      float *p = m->positions + 3 * ((size_t)j * n + i);
      p[0] = x, p[1] = y, p[2] = 0.05f * sinf(6 * x) * cosf(5 * y);
    }
  uint32_t f = 0;
  for (uint32_t j = 0; j + 1 < n; j++)
    for (uint32_t i = 0; i + 1 < n; i++) {
      uint32_t a = j * n + i, b = a + 1, c = a + n, d = c + 1;
      uint32_t *t = m->triangles + 6 * (size_t)f++;
      t[0] = a, t[1] = b, t[2] = d, t[3] = a, t[4] = d, t[5] = c;
    }
  m->submeshes = calloc(1, sizeof(mesh_submesh));
  m->submesh_count = 1;
  m->submeshes[0].name = calloc(1, 1);
  m->submeshes[0].vertex_count = m->vertex_count;
  m->submeshes[0].triangle_count = m->triangle_count;
  float *dense = malloc(sizeof(float) * 3 * m->vertex_count);
  uint64_t s = 12345;
  for (uint32_t t = 0; t < T; t++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float cx = ((s >> 33) % 1000) / 500.0f - 1, cy = ((s >> 13) % 1000) / 500.0f - 1;
    for (uint32_t v = 0; v < m->vertex_count; v++) {
      const float *p = m->positions + 3 * (size_t)v;
      float d2 = (p[0] - cx) * (p[0] - cx) + (p[1] - cy) * (p[1] - cy);
      float w = d2 < 0.13f ? 0.1f * (1 - d2 / 0.13f) * (1 - d2 / 0.13f) : 0.0f;
      dense[3 * (size_t)v] = 0, dense[3 * (size_t)v + 1] = 0, dense[3 * (size_t)v + 2] = w;
    }
    char name[16];
    snprintf(name, sizeof(name), "t%u", t);
    mesh_add_target_dense(m, name, dense, 0);
  }
  free(dense);
  mesh_update_bounds(m);
  return m;
}

/* ---- the tutorial path (its program: vw__shaders_tutorial) ------------------------------------ */

/* CPU morph of the active targets and area-weighted normals, as tutorials do it. */
static void cpu_frame(const mesh *m, const float *w, const float *offsets, float *pos, float *nrm) {
  size_t n3 = 3 * (size_t)m->vertex_count;
  for (size_t i = 0; i < n3; i++) pos[i] = m->positions[i] + offsets[i];
  for (uint32_t t = 0; t < m->target_count; t++) {
    if (w[t] == 0) continue;
    const mesh_target *tg = &m->targets[t];
    for (uint32_t k = 0; k < tg->count; k++)
      for (int c = 0; c < 3; c++) pos[3 * (size_t)tg->indices[k] + c] += w[t] * tg->deltas[3 * (size_t)k + c];
  }
  memset(nrm, 0, sizeof(float) * n3);
  for (uint32_t f = 0; f < m->triangle_count; f++) {
    const uint32_t *tr = m->triangles + 3 * (size_t)f;
    const float *a = pos + 3 * (size_t)tr[0], *b = pos + 3 * (size_t)tr[1], *c = pos + 3 * (size_t)tr[2];
    float e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    float n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    for (int k = 0; k < 3; k++)
      for (int d = 0; d < 3; d++) nrm[3 * (size_t)tr[k] + d] += n[d];
  }
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    float *n = nrm + 3 * (size_t)v, l = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    if (l > 0) n[0] /= l, n[1] /= l, n[2] /= l;
  }
}

/* The command line as given, so a result names the run that produced it. */
static void join_args(int argc, char **argv, char *out, size_t cap) {
  size_t at = 0;
  out[0] = '\0';
  for (int i = 0; i < argc && at + 1 < cap; i++) {
    int n = snprintf(out + at, cap - at, "%s%s", i ? " " : "", argv[i]);
    if (n < 0) break;
    at += (size_t)n < cap - at ? (size_t)n : cap - at - 1;
  }
}

/* What one run measures, from the command line. */
typedef struct view_args {
  uint32_t V, T, A, S, F; /* vertices, targets, active targets, sculpted vertices, frames */
  int W, H, json, pick;   /* framebuffer size; JSON output; --pick */
  uint32_t grid;          /* the mesh is a grid x grid square: ceil(sqrt(V)) */
} view_args;

/* Reads the command line into *o. Returns 0, or 2 after printing the usage or what is wrong. */
static int parse_args(int argc, char **argv, view_args *o) {
  uint32_t V = 100000, T = 52, A = 8, S = 500, F = 120;
  int W = 1280, H = 720, json = 0, pick = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(a, "--json") == 0) json = 1;
    else if (strcmp(a, "--pick") == 0) pick = 1;
    else if (strcmp(a, "--vertices") == 0) V = (uint32_t)atoi(v), i++;
    else if (strcmp(a, "--targets") == 0) T = (uint32_t)atoi(v), i++;
    else if (strcmp(a, "--active") == 0) A = (uint32_t)atoi(v), i++;
    else if (strcmp(a, "--sculpt") == 0) S = (uint32_t)atoi(v), i++;
    else if (strcmp(a, "--frames") == 0) F = (uint32_t)atoi(v), i++;
    else if (strcmp(a, "--size") == 0 && sscanf(v, "%dx%d", &W, &H) == 2) i++;
    else {
      fprintf(stderr, "usage: deform-view-bench [--vertices V] [--targets T] [--active A] [--sculpt S] [--frames F] "
                      "[--size WxH] [--json] [--pick]\n");
      return 2;
    }
  }
  uint32_t n = (uint32_t)ceil(sqrt((double)V));
  if (n < 4 || T < A || A < 1 || F < 10 || W < 16 || H < 16) {
    fprintf(stderr, "deform-view-bench: need vertices >= 16, 1 <= active <= targets, frames >= 10\n");
    return 2;
  }
  *o = (view_args){V, T, A, S, F, W, H, json, pick, n};
  return 0;
}

/* --pick: the CPU pick and the GPU pick at o->F pixels, each after a change of shape. */
static int bench_pick(const view_args *o, const mesh *m, vw_gpu *g, const vw_camera *cam, unsigned fb,
                      const char *cmdline, const char *renderer) {
  char err[1024];
  vw_pick *pk = NULL;
  if (vw_pick_create(&pk, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-view-bench: %s\n", err);
    return 1;
  }
  size_t n3 = 3 * (size_t)m->vertex_count;
  float *pos = malloc(sizeof(float) * n3), *off = calloc(n3, sizeof(float));
  double *tc = malloc(sizeof(double) * o->F), *tgp = malloc(sizeof(double) * o->F);
  uint32_t hits = 0, differ = 0;
  for (uint32_t f = 0; f < o->F; f++) {
    uint32_t first = (f * 997u) % (m->vertex_count - o->S);
    for (uint32_t i = 0; i < o->S; i++) off[3 * (size_t)(first + i) + 2] = 0.002f * sinf(0.2f * f + i);
    vw_gpu_set_offsets(g, first, o->S, off + 3 * (size_t)first);
    if (vw_gpu_update(g, err, sizeof(err)) != 0) break;
    glFinish();
    float px = o->W * (0.2f + 0.6f * (float)((f * 37u) % 101) / 100), py = o->H * (0.2f + 0.6f * (float)((f * 53u) % 97) / 96);
    float hc[3], hg[3];
    uint32_t vc = 0, vg = 0, tri;
    double t0 = bench_now_ms();
    vec3 org, dir;
    vw_camera_ray(cam, o->W, o->H, px, py, org, dir);
    int cpu = vw_gpu_read_positions(g, pos) == 0 && vw_edit_pick(pos, m->triangles, m->triangle_count, org, dir, hc, &vc);
    double t1 = bench_now_ms();
    int gpu = vw_pick_at(pk, g, cam, o->W, o->H, px, py, m->triangles, fb, hg, &tri, &vg, err, sizeof(err));
    double t2 = bench_now_ms();
    tc[f] = t1 - t0, tgp[f] = t2 - t1;
    hits += cpu == 1;
    differ += cpu != gpu || (cpu == 1 && vc != vg);
  }
  qsort(tc + 10, o->F - 10, sizeof(double), bench_cmp_double);
  qsort(tgp + 10, o->F - 10, sizeof(double), bench_cmp_double);
  uint32_t mid = 10 + (o->F - 10) / 2, p95 = 10 + (uint32_t)((o->F - 10) * 0.95);
  if (o->json)
    printf("{\"bench\":\"pick\",\"command\":\"%s\",\"renderer\":\"%s\",\"vertices\":%u,\"triangles\":%u,\"moves\":%u,"
           "\"hits\":%u,\"differ\":%u,\"cpu_p50_ms\":%.3f,\"cpu_p95_ms\":%.3f,\"gpu_p50_ms\":%.3f,\"gpu_p95_ms\":%.3f}\n",
           cmdline, renderer, m->vertex_count, m->triangle_count, o->F, hits, differ, tc[mid], tc[p95], tgp[mid], tgp[p95]);
  else
    printf("# %s\n# renderer: %s\n%u vertices, %u triangles, %u pointer moves (%u on the mesh, %u named another "
           "vertex)\n  cpu pick (read back + ray)  p50 %.2f ms  p95 %.2f ms\n  gpu pick (ID pixel)        p50 %.2f ms  "
           "p95 %.2f ms\n",
           cmdline, renderer, m->vertex_count, m->triangle_count, o->F, hits, differ, tc[mid], tc[p95], tgp[mid], tgp[p95]);
  vw_pick_destroy(pk);
  free(pos), free(off), free(tc), free(tgp);
  return 0;
}

int main(int argc, char **argv) {
  char cmdline[1024];
  join_args(argc, argv, cmdline, sizeof(cmdline));
  if (argc >= 2 && strcmp(argv[1], "texclip") == 0) return bench_texclip_main(argc, argv, cmdline);
  view_args o;
  if (parse_args(argc, argv, &o) != 0) return 2;
  const uint32_t T = o.T, A = o.A, S = o.S, F = o.F;
  const int W = o.W, H = o.H, json = o.json;
  mesh *m = make_mesh(o.grid, T);
  if (!m) return 1;
  char err[1024];
  vw_context ctx;
  if (vw_context_init(&ctx, W, H, 1, "deform-view-bench", err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-view-bench: %s (run it under Xvfb when there is no display)\n", err);
    return 1;
  }
  int rc;
  vw__gl_framebuffer fb;
  const vw__gl_framebuffer_desc fd = {.width = W, .height = H, .label = "off-screen framebuffer"};
  if ((rc = vw__gl_framebuffer_make(&fb, &fd, err, sizeof(err))) != 0) {
    fprintf(stderr, "deform-view-bench: %s\n", err);
    return 1;
  }
  glBindFramebuffer(GL_FRAMEBUFFER, fb.id);
  mesh_topology topo;
  if (mesh_topology_init(&topo, m, NULL, 0) != 0) return 1;
  vw_gpu *g = NULL;
  vw_render *r = NULL;
  if ((rc = vw_gpu_create(m, &topo, 0, &g, err, sizeof(err))) != 0 ||
      (rc = vw_render_create(&r, err, sizeof(err))) != 0) {
    fprintf(stderr, "deform-view-bench: %s\n", err[0] ? err : vw_strerror(rc));
    return 1;
  }
  vw_camera cam;
  memset(&cam, 0, sizeof(cam));
  cam.fov = glm_rad(40.0f);
  vw_camera_frame(&cam, m->bbox_min, m->bbox_max);
  cam.pitch = glm_rad(30.0f);
  if (o.pick) return bench_pick(&o, m, g, &cam, fb.id, cmdline, ctx.renderer);
  size_t n3 = 3 * (size_t)m->vertex_count;
  float *w = calloc(T, sizeof(float)), *off = calloc(n3, sizeof(float));
  float *pos = malloc(sizeof(float) * n3), *nrm = malloc(sizeof(float) * n3);
  double *tg = malloc(sizeof(double) * F), *tt = malloc(sizeof(double) * F);
  /* The tutorial's program and buffers: positions and normals, re-uploaded whole every frame. */
  vw__gl_program prog;
  vw__gl_buffer vbo[2];
  const vw__gl_buffer_desc vd[2] = {{.size = sizeof(float) * n3, .usage = GL_DYNAMIC_DRAW, .label = "positions"},
                                    {.size = sizeof(float) * n3, .usage = GL_DYNAMIC_DRAW, .label = "normals"}};
  if ((rc = vw__gl_program_make(&prog, &vw__shaders_tutorial, err, sizeof(err))) != 0 ||
      (rc = vw__gl_buffer_make(&vbo[0], &vd[0], err, sizeof(err))) != 0 ||
      (rc = vw__gl_buffer_make(&vbo[1], &vd[1], err, sizeof(err))) != 0) {
    fprintf(stderr, "deform-view-bench: %s\n", err);
    return 1;
  }
  GLint u_vp = glGetUniformLocation(prog.id, "uViewProj");
  GLuint vao;
  glGenVertexArrays(1, &vao);
  glBindVertexArray(vao);
  for (int k = 0; k < 2; k++) {
    glBindBuffer(GL_ARRAY_BUFFER, vbo[k].id);
    glEnableVertexAttribArray((GLuint)k);
    glVertexAttribPointer((GLuint)k, 3, GL_FLOAT, GL_FALSE, 0, (void *)0);
  }
  glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, vw_gpu_index_buffer(g));
  glBindVertexArray(0);
  mat4 view, proj, vp;
  vw_camera_matrices(&cam, W, H, view, proj);
  glm_mat4_mul(proj, view, vp);
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t f = 0; f < F; f++) {
      /* This frame's edits: A weights move (a window sliding over the targets), and S vertices get new offsets. */
      memset(w, 0, sizeof(float) * T);
      for (uint32_t k = 0; k < A; k++) w[(f + k * (T / A)) % T] = 0.5f + 0.5f * sinf(0.1f * f + k);
      uint32_t first = (f * 997u) % (m->vertex_count - S);
      for (uint32_t i = 0; i < S; i++) off[3 * (size_t)(first + i) + 2] = 0.01f * sinf(0.2f * f + i);
      double t0 = bench_now_ms();
      if (pass == 0) {
        vw_gpu_set_weights(g, w, T);
        vw_gpu_set_offsets(g, first, S, off + 3 * (size_t)first);
        if (vw_gpu_update(g, err, sizeof(err)) != 0) {
          fprintf(stderr, "deform-view-bench: %s\n", err);
          return 1;
        }
        glBindFramebuffer(GL_FRAMEBUFFER, fb.id);
        vw_render_scene(r, g, &cam, W, H, 0);
      } else {
        cpu_frame(m, w, off, pos, nrm);
        glBindBuffer(GL_ARRAY_BUFFER, vbo[0].id);
        glBufferSubData(GL_ARRAY_BUFFER, 0, (GLsizeiptr)(sizeof(float) * n3), pos);
        glBindBuffer(GL_ARRAY_BUFFER, vbo[1].id);
        glBufferSubData(GL_ARRAY_BUFFER, 0, (GLsizeiptr)(sizeof(float) * n3), nrm);
        glBindFramebuffer(GL_FRAMEBUFFER, fb.id);
        glViewport(0, 0, W, H);
        glClearColor(0.16f, 0.17f, 0.19f, 1);
        glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
        glEnable(GL_DEPTH_TEST);
        glUseProgram(prog.id);
        glUniformMatrix4fv(u_vp, 1, GL_FALSE, (const float *)vp);
        glBindVertexArray(vao);
        glDrawElements(GL_TRIANGLES, (GLsizei)(3 * m->triangle_count), GL_UNSIGNED_INT, (void *)0);
        glBindVertexArray(0);
      }
      glFinish();
      (pass == 0 ? tg : tt)[f] = bench_now_ms() - t0;
      for (uint32_t i = 0; i < S; i++) off[3 * (size_t)(first + i) + 2] = 0; /* next frame starts clean */
      if (pass == 0) vw_gpu_set_offsets(g, first, S, off + 3 * (size_t)first);
    }
  }
  /* The first frames warm caches and compile shaders: leave out the first 10 of each. */
  qsort(tg + 10, F - 10, sizeof(double), bench_cmp_double);
  qsort(tt + 10, F - 10, sizeof(double), bench_cmp_double);
  uint32_t mid = 10 + (F - 10) / 2, p95 = 10 + (uint32_t)((F - 10) * 0.95);
  if (json)
    printf("{\"bench\":\"view\",\"command\":\"%s\",\"renderer\":\"%s\",\"vertices\":%u,\"triangles\":%u,\"targets\":%u,"
           "\"active\":%u,\"sculpt\":%u,\"frames\":%u,\"width\":%d,\"height\":%d,\"gpu_p50_ms\":%.3f,\"gpu_p95_ms\":%.3f,"
           "\"tutorial_p50_ms\":%.3f,\"tutorial_p95_ms\":%.3f,\"ratio\":%.2f,\"half_targets\":%u}\n",
           cmdline, ctx.renderer, m->vertex_count, m->triangle_count, T, A, S, F, W, H, tg[mid], tg[p95], tt[mid], tt[p95],
           tt[mid] / tg[mid], vw_gpu_half_targets(g));
  else
    printf("# %s\n# renderer: %s, GL %d.%d\n%u vertices, %u triangles, %u targets (%u active), %u sculpted vertices per "
           "frame, %dx%d\n  gpu (deform-view)  p50 %.2f ms  p95 %.2f ms\n  tutorial (CPU)     p50 %.2f ms  p95 %.2f ms\n"
           "  ratio %.2fx\n",
           cmdline, ctx.renderer, ctx.gl_major, ctx.gl_minor, m->vertex_count, m->triangle_count, T, A, S, W, H, tg[mid],
           tg[p95], tt[mid], tt[p95], tt[mid] / tg[mid]);
  vw__gl_buffer_free(&vbo[0]);
  vw__gl_buffer_free(&vbo[1]);
  glDeleteVertexArrays(1, &vao);
  vw__gl_program_free(&prog);
  vw__gl_framebuffer_free(&fb);
  vw_render_destroy(r);
  vw_gpu_destroy(g);
  vw_context_fini(&ctx);
  mesh_topology_fini(&topo);
  mesh_destroy(m);
  free(w), free(off), free(pos), free(nrm), free(tg), free(tt);
  return 0;
}
