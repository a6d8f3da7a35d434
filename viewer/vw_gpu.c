/*
 * vw_gpu.c — the viewer's GPU morph and normal passes (see vw_gpu.h), built from the typed GL
 * handles of vw_gl.h and the pass programs of vw_shaders.h.
 *
 * Layout on the GPU (V render vertices, W welded vertices, F welded triangles):
 *   base, offsets      vertex buffers, 3 floats per render vertex (offsets: glBufferSubData)
 *   deltas             two buffer textures, RGBA16F and RGBA32F, target-major: texel slot·V + v;
 *                      each target lives in one of them (half when its worst-case half-float
 *                      error fits the budget), at a slot of its own
 *   positions          vertex buffer written by the morph pass (+ R32F texture view for pass 2)
 *   scratch            only when more than VW_GPU_MAX_ACTIVE targets are active: passes
 *                      ping-pong between it and positions so the last one lands in positions
 *   corners            per welded triangle, the 3 render vertices of its source triangle
 *   faces              pass 2 output, RGBA32F texels 3f + c: (unit normal, angle at corner c)
 *   first, corners_of  CSR welded vertex -> its corners (entries 3f + c), R32UI textures
 *   normals            pass 3 output, RGBA32F per welded vertex
 *   render_to_topo     R32UI per render vertex, for the renderer's normal lookup
 *
 * DOES NOT make the context, draw, or keep CPU copies of vertex arrays beyond the welded map
 * (for vw_gpu_read_normals) and the weights.
 */
#include "vw_gpu.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_gl.h"
#include "vw_shaders.h"

_Static_assert(VW_GPU_MAX_ACTIVE == VW__SHADERS_MAX_ACTIVE, "one morph pass sums what its uniform arrays hold");

/* ---- tests only ----------------------------------------------------------------------------- */

static long long limit_override;

void vw__gpu_limit_texels(long long texels) { limit_override = texels; }

/* ---- the handle ----------------------------------------------------------------------------- */

/* One delta texture: `slots` targets of V texels each, room for `cap`. */
typedef struct dtex {
  vw__gl_buffer buf;
  vw__gl_texture tex;
  GLenum format;
  size_t texel_bytes;
  uint32_t slots, cap;
  const char *label;
} dtex;

typedef struct pass {
  vw__gl_program prog;
  GLuint vao;
} pass;

struct vw_gpu {
  uint32_t vertex_count;    /* V: render vertices */
  uint32_t triangle_count;  /* render triangles */
  uint32_t topo_count;      /* W: welded vertices */
  uint32_t face_count;      /* F: welded triangles */
  long long max_texels;     /* GL_MAX_TEXTURE_BUFFER_SIZE (or the test override) */
  double half_budget;

  uint32_t target_count, target_cap;
  uint8_t *target_half;     /* per target: stored in dhalf (1) or dfull (0) */
  uint32_t *target_slot;    /* per target: its slot in that texture */
  float *weights;           /* per target, the last vw_gpu_set_weights */
  uint32_t *active;         /* active targets, half-float ones first */
  float *active_weight;
  uint32_t active_count, active_half;

  uint32_t *render_to_topo; /* V entries, for vw_gpu_read_normals */

  vw__gl_buffer base, offsets, positions, scratch, indices, corners, faces, normals, r2t, first, corners_of;
  vw__gl_texture positions_tex, faces_tex, normals_tex, r2t_tex, first_tex, corners_of_tex;
  dtex dhalf, dfull;
  pass morph, facep, normalp;
  GLint u_nhalf, u_count, u_base, u_weight;

  int dirty;
  uint64_t updates;
};

/* Fails with VW_ETOOBIG when a buffer texture of `texels` texels would exceed the GL limit. */
static int check_texels(const vw_gpu *g, unsigned long long texels, const char *what, char *err, size_t errlen) {
  if (texels <= (unsigned long long)g->max_texels) return 0;
  snprintf(err, errlen,
           "%s: %llu texels needed in one buffer texture, but this GL allows %lld "
           "(GL_MAX_TEXTURE_BUFFER_SIZE): the mesh does not fit on this GPU",
           what, texels, g->max_texels);
  return VW_ETOOBIG;
}

/* IEEE binary16 from binary32, round to nearest even (overflow gives ±inf, NaN stays NaN). */
static uint16_t half_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (ax < 0x38800000u) {                                   /* below 2^-14: subnormal or zero */
    if (ax <= 0x33000000u) return (uint16_t)sign;           /* <= 2^-25 rounds to 0 (tie to even) */
    uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = (ax >> 13) - (112u << 10), rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

/* Worst-case absolute error of storing values up to `maxabs` as half floats: half the spacing
 * at the top binade (maxabs·2^-11), but never less than half the subnormal spacing (2^-25)
 * once anything is non-zero. */
static double half_error(double maxabs) {
  if (maxabs == 0.0) return 0.0;
  double e = maxabs * 0x1p-11;
  double sub = maxabs < 0x1p-25 ? maxabs : 0x1p-25;
  return e > sub ? e : sub;
}

/* Validates a target and says whether it goes to the half texture. */
static int classify_target(const vw_gpu *g, const mesh_target *t, int *half, char *err, size_t errlen) {
  double maxabs = 0.0;
  for (uint32_t k = 0; k < t->count; k++) {
    if (t->indices[k] >= g->vertex_count || (k > 0 && t->indices[k] <= t->indices[k - 1])) {
      snprintf(err, errlen, "target '%s': index %u (entry %u) out of range or not ascending (%u vertices)",
               t->name ? t->name : "", t->indices[k], k, g->vertex_count);
      return VW_EINVAL;
    }
    for (int c = 0; c < 3; c++) {
      double a = fabs((double)t->deltas[3 * (size_t)k + c]);
      if (!isfinite(a)) {
        snprintf(err, errlen, "target '%s': non-finite delta at vertex %u", t->name ? t->name : "", t->indices[k]);
        return VW_EINVAL;
      }
      if (a > maxabs) maxabs = a;
    }
  }
  *half = g->half_budget > 0.0 && maxabs <= 65504.0 && half_error(maxabs) <= g->half_budget;
  return 0;
}

/* Grows a delta texture to hold at least `need` slots, keeping the slots already uploaded
 * (copied on the GPU), and re-points its texture at the new buffer. */
static int dtex_reserve(vw_gpu *g, dtex *d, uint32_t need, char *err, size_t errlen) {
  if (need <= d->cap && d->buf.id) return 0;
  uint64_t per_slot = g->vertex_count ? g->vertex_count : 1;
  uint64_t fit = (uint64_t)g->max_texels / per_slot;
  char what[128];
  snprintf(what, sizeof(what), "the %s (%u targets x %u vertices)", d->label, need, g->vertex_count);
  int rc = check_texels(g, (unsigned long long)need * g->vertex_count, what, err, errlen);
  if (rc != 0) return rc;
  uint32_t cap = need;
  if (d->buf.id && need > d->cap) { /* appending: leave room for a few more */
    uint64_t grown = (uint64_t)d->cap + d->cap / 2 + 1;
    if (grown > fit) grown = fit;
    if (grown > cap) cap = (uint32_t)grown;
  }
  size_t slot_bytes = (size_t)g->vertex_count * d->texel_bytes;
  vw__gl_buffer nb;
  vw__gl_buffer_desc bd = {.size = (size_t)cap * slot_bytes, .usage = GL_STATIC_DRAW, .label = d->label};
  if ((rc = vw__gl_buffer_make(&nb, &bd, err, errlen)) != 0) return rc;
  if (d->buf.id && d->slots > 0) {
    glBindBuffer(GL_COPY_READ_BUFFER, d->buf.id);
    glBindBuffer(GL_COPY_WRITE_BUFFER, nb.id);
    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, (GLsizeiptr)((size_t)d->slots * slot_bytes));
    glBindBuffer(GL_COPY_READ_BUFFER, 0);
    glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
    if ((rc = vw__gl_check("copying the target deltas to a larger buffer", err, errlen)) != 0) {
      vw__gl_buffer_free(&nb);
      return rc;
    }
  }
  vw__gl_buffer_free(&d->buf);
  d->buf = nb;
  d->cap = cap;
  if (d->tex.id) {
    vw__gl_texture_attach(&d->tex, d->buf.id);
  } else {
    vw__gl_texture_desc td = {.buffer = d->buf.id, .format = d->format, .label = d->label};
    if ((rc = vw__gl_texture_make(&d->tex, &td, err, errlen)) != 0) return rc;
  }
  return vw__gl_check("re-allocating the target delta texture", err, errlen);
}

/* Writes target `t` densely (V texels, zero where it does not move a vertex) into slot `slot`.
 * `scratch` holds V texels of the widest format. */
static int dtex_upload(vw_gpu *g, dtex *d, uint32_t slot, const mesh_target *t, void *scratch, char *err,
                       size_t errlen) {
  size_t V = g->vertex_count;
  memset(scratch, 0, V * d->texel_bytes);
  if (d->format == GL_RGBA16F) {
    uint16_t *h = scratch;
    for (uint32_t k = 0; k < t->count; k++)
      for (int c = 0; c < 3; c++) h[4 * (size_t)t->indices[k] + c] = half_from_float(t->deltas[3 * (size_t)k + c]);
  } else {
    float *f = scratch;
    for (uint32_t k = 0; k < t->count; k++)
      for (int c = 0; c < 3; c++) f[4 * (size_t)t->indices[k] + c] = t->deltas[3 * (size_t)k + c];
  }
  glBindBuffer(GL_COPY_WRITE_BUFFER, d->buf.id);
  glBufferSubData(GL_COPY_WRITE_BUFFER, (GLintptr)((size_t)slot * V * d->texel_bytes), (GLsizeiptr)(V * d->texel_bytes),
                  scratch);
  glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
  return vw__gl_check("uploading target deltas", err, errlen);
}

static int grow_targets(vw_gpu *g, uint32_t need) {
  if (need <= g->target_cap) return 0;
  uint32_t cap = g->target_cap ? g->target_cap * 2 : 16;
  while (cap < need) cap *= 2;
  uint8_t *h = realloc(g->target_half, cap);
  if (h) g->target_half = h;
  uint32_t *s = realloc(g->target_slot, sizeof(uint32_t) * cap);
  if (s) g->target_slot = s;
  float *w = realloc(g->weights, sizeof(float) * cap);
  if (w) g->weights = w;
  uint32_t *a = realloc(g->active, sizeof(uint32_t) * cap);
  if (a) g->active = a;
  float *aw = realloc(g->active_weight, sizeof(float) * cap);
  if (aw) g->active_weight = aw;
  if (!h || !s || !w || !a || !aw) return VW_ENOMEM;
  for (uint32_t i = g->target_cap; i < cap; i++) g->weights[i] = 0.0f;
  g->target_cap = cap;
  return 0;
}

/* Adds `count` targets: classify, make room in the texture(s) once, then upload one by one. */
static int add_targets(vw_gpu *g, const mesh_target *targets, uint32_t count, char *err, size_t errlen) {
  int rc;
  if ((rc = grow_targets(g, g->target_count + count)) != 0) {
    snprintf(err, errlen, "out of memory for %u targets", g->target_count + count);
    return rc;
  }
  uint32_t halves = g->dhalf.slots, fulls = g->dfull.slots;
  for (uint32_t i = 0; i < count; i++) {
    int half = 0;
    if ((rc = classify_target(g, &targets[i], &half, err, errlen)) != 0) return rc;
    g->target_half[g->target_count + i] = (uint8_t)half;
    if (half) halves++;
    else fulls++;
  }
  if ((rc = dtex_reserve(g, &g->dhalf, halves, err, errlen)) != 0) return rc;
  if ((rc = dtex_reserve(g, &g->dfull, fulls, err, errlen)) != 0) return rc;
  void *scratch = malloc(((size_t)g->vertex_count + 1) * 16);
  if (!scratch) {
    snprintf(err, errlen, "out of memory for one target's dense deltas");
    return VW_ENOMEM;
  }
  for (uint32_t i = 0; i < count && rc == 0; i++) {
    uint32_t ti = g->target_count;
    dtex *d = g->target_half[ti] ? &g->dhalf : &g->dfull;
    rc = dtex_upload(g, d, d->slots, &targets[i], scratch, err, errlen);
    if (rc == 0) {
      g->target_slot[ti] = d->slots++;
      g->weights[ti] = 0.0f;
      g->target_count++;
    }
  }
  free(scratch);
  return rc;
}

static int make_pass(pass *p, vw__shaders_pass which, char *err, size_t errlen) {
  int rc = vw__gl_program_make(&p->prog, &vw__shaders_passes[which], err, errlen);
  if (rc != 0) return rc;
  glGenVertexArrays(1, &p->vao);
  return vw__gl_check("creating a vertex array", err, errlen);
}

static void free_pass(pass *p) {
  vw__gl_program_free(&p->prog);
  if (p->vao) glDeleteVertexArrays(1, &p->vao);
  p->vao = 0;
}

static void set_sampler(GLuint prog, const char *name, GLint unit) {
  GLint loc = glGetUniformLocation(prog, name);
  if (loc >= 0) glUniform1i(loc, unit);
}

/* Builds the CSR welded vertex -> corners (entries 3f + c) of the topology's triangles. */
static int build_corner_csr(const mesh_topology *t, uint32_t **first_out, uint32_t **entries_out) {
  uint32_t W = t->vertex_count, F = t->triangle_count;
  uint32_t *first = calloc((size_t)W + 2, sizeof(uint32_t));
  uint32_t *entries = malloc(sizeof(uint32_t) * (3 * (size_t)F + 1));
  if (!first || !entries) {
    free(first);
    free(entries);
    return VW_ENOMEM;
  }
  for (size_t i = 0; i < 3 * (size_t)F; i++) first[t->triangles[i] + 2]++;
  for (uint32_t v = 0; v < W; v++) first[v + 2] += first[v + 1];
  for (size_t i = 0; i < 3 * (size_t)F; i++) entries[first[t->triangles[i] + 1]++] = (uint32_t)i;
  /* first[v] now holds the start of v: the shifted counting leaves first[0..W] as the CSR. */
  *first_out = first;
  *entries_out = entries;
  return 0;
}

static int check_input(const mesh *m, const mesh_topology *t, char *err, size_t errlen) {
  if (t->render_count != m->vertex_count) {
    snprintf(err, errlen, "topology is of %u render vertices, the mesh has %u", t->render_count, m->vertex_count);
    return VW_EINVAL;
  }
  for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++)
    if (m->triangles[i] >= m->vertex_count) {
      snprintf(err, errlen, "triangle %zu references vertex %u of %u", i / 3, m->triangles[i], m->vertex_count);
      return VW_EINVAL;
    }
  for (uint32_t v = 0; v < m->vertex_count; v++)
    if (t->render_to_topo[v] >= t->vertex_count) {
      snprintf(err, errlen, "render vertex %u maps to welded vertex %u of %u", v, t->render_to_topo[v], t->vertex_count);
      return VW_EINVAL;
    }
  for (uint32_t f = 0; f < t->triangle_count; f++) {
    if (t->triangle_source[f] >= m->triangle_count) {
      snprintf(err, errlen, "welded triangle %u comes from render triangle %u of %u", f, t->triangle_source[f],
               m->triangle_count);
      return VW_EINVAL;
    }
    for (int c = 0; c < 3; c++)
      if (t->triangles[3 * (size_t)f + c] >= t->vertex_count) {
        snprintf(err, errlen, "welded triangle %u references welded vertex %u of %u", f, t->triangles[3 * (size_t)f + c],
                 t->vertex_count);
        return VW_EINVAL;
      }
  }
  if (m->target_count > 0 && m->targets == NULL) {
    snprintf(err, errlen, "mesh claims %u targets but has none", m->target_count);
    return VW_EINVAL;
  }
  return 0;
}

int vw_gpu_create(const mesh *m, const mesh_topology *t, double half_budget, vw_gpu **out, char *err, size_t errlen) {
  *out = NULL;
  if (err && errlen) err[0] = '\0';
  int rc = check_input(m, t, err, errlen);
  if (rc != 0) return rc;
  if (epoxy_gl_version() < 33) {
    snprintf(err, errlen, "the current context is OpenGL %d.%d; the passes need 3.3", epoxy_gl_version() / 10,
             epoxy_gl_version() % 10);
    return VW_EGL;
  }
  vw_gpu *g = calloc(1, sizeof(*g));
  if (!g) {
    snprintf(err, errlen, "out of memory");
    return VW_ENOMEM;
  }
  g->vertex_count = m->vertex_count;
  g->triangle_count = m->triangle_count;
  g->topo_count = t->vertex_count;
  g->face_count = t->triangle_count;
  g->half_budget = half_budget > 0.0 && isfinite(half_budget) ? half_budget : 0.0;
  GLint max_texels = 0;
  glGetIntegerv(GL_MAX_TEXTURE_BUFFER_SIZE, &max_texels);
  g->max_texels = limit_override > 0 ? limit_override : max_texels;
  if (g->max_texels > INT_MAX) g->max_texels = INT_MAX; /* texelFetch takes an int */
  g->dhalf = (dtex){.format = GL_RGBA16F, .texel_bytes = 8, .label = "half-float target deltas"};
  g->dfull = (dtex){.format = GL_RGBA32F, .texel_bytes = 16, .label = "float target deltas"};

  size_t V = m->vertex_count, W = t->vertex_count, F = t->triangle_count;
  uint32_t *corners = NULL, *first = NULL, *entries = NULL;
  /* Every texture that does not depend on the targets, checked against the limit up front. */
  if ((rc = check_texels(g, 3 * (unsigned long long)V, "the morphed positions (3 floats per vertex)", err, errlen)) ||
      (rc = check_texels(g, 3 * (unsigned long long)F, "the face normals", err, errlen)) ||
      (rc = check_texels(g, W + 1ull, "the welded vertex adjacency", err, errlen)) ||
      (rc = check_texels(g, V, "the render-to-welded map", err, errlen)))
    goto fail;

  rc = VW_ENOMEM;
  g->render_to_topo = malloc(sizeof(uint32_t) * (V + 1));
  corners = malloc(sizeof(uint32_t) * (3 * F + 1));
  if (!g->render_to_topo || !corners || build_corner_csr(t, &first, &entries) != 0) {
    snprintf(err, errlen, "out of memory for the topology of %zu vertices", W);
    goto fail;
  }
  memcpy(g->render_to_topo, t->render_to_topo, sizeof(uint32_t) * V);
  for (size_t f = 0; f < F; f++)
    for (int c = 0; c < 3; c++) corners[3 * f + c] = m->triangles[3 * (size_t)t->triangle_source[f] + c];

  float *zeros = calloc(3 * V + 1, sizeof(float));
  if (!zeros) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  const vw__gl_buffer_desc bufs[] = {
      {.size = 12 * V, .data = m->positions, .label = "base positions"},
      {.size = 12 * V, .data = zeros, .usage = GL_DYNAMIC_DRAW, .label = "sculpt offsets"},
      {.size = 12 * V, .data = m->positions, .usage = GL_DYNAMIC_COPY, .label = "morphed positions"},
      {.size = 12 * (size_t)m->triangle_count, .data = m->triangles, .label = "render triangles"},
      {.size = 12 * F, .data = corners, .label = "welded triangle corners"},
      {.size = 48 * F, .usage = GL_DYNAMIC_COPY, .label = "face normals"},
      {.size = 16 * W, .usage = GL_DYNAMIC_COPY, .label = "vertex normals"},
      {.size = 4 * V, .data = t->render_to_topo, .label = "render-to-welded map"},
      {.size = 4 * (W + 1), .data = first, .label = "welded vertex adjacency offsets"},
      {.size = 12 * F, .data = entries, .label = "welded vertex adjacency"},
  };
  vw__gl_buffer *dst[] = {&g->base, &g->offsets, &g->positions, &g->indices, &g->corners,
                       &g->faces, &g->normals, &g->r2t, &g->first, &g->corners_of};
  rc = 0;
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]) && rc == 0; i++)
    rc = vw__gl_buffer_make(dst[i], &bufs[i], err, errlen);
  free(zeros);
  if (rc != 0) goto fail;

  const struct {
    vw__gl_texture *tex;
    vw__gl_texture_desc d;
  } texs[] = {
      {&g->positions_tex, {.buffer = g->positions.id, .format = GL_R32F, .label = "morphed positions"}},
      {&g->faces_tex, {.buffer = g->faces.id, .format = GL_RGBA32F, .label = "face normals"}},
      {&g->normals_tex, {.buffer = g->normals.id, .format = GL_RGBA32F, .label = "vertex normals"}},
      {&g->r2t_tex, {.buffer = g->r2t.id, .format = GL_R32UI, .label = "render-to-welded map"}},
      {&g->first_tex, {.buffer = g->first.id, .format = GL_R32UI, .label = "adjacency offsets"}},
      {&g->corners_of_tex, {.buffer = g->corners_of.id, .format = GL_R32UI, .label = "adjacency"}},
  };
  for (size_t i = 0; i < sizeof(texs) / sizeof(texs[0]) && rc == 0; i++)
    rc = vw__gl_texture_make(texs[i].tex, &texs[i].d, err, errlen);
  if (rc != 0) goto fail;

  if ((rc = make_pass(&g->morph, VW__SHADERS_MORPH, err, errlen)) != 0 ||
      (rc = make_pass(&g->facep, VW__SHADERS_FACES, err, errlen)) != 0 ||
      (rc = make_pass(&g->normalp, VW__SHADERS_NORMALS, err, errlen)) != 0)
    goto fail;

  /* Fixed per-pass state: samplers on fixed units, the corner attribute of pass 2. */
  glUseProgram(g->morph.prog.id);
  set_sampler(g->morph.prog.id, "u_dhalf", 0);
  set_sampler(g->morph.prog.id, "u_dfull", 1);
  g->u_nhalf = glGetUniformLocation(g->morph.prog.id, "u_nhalf");
  g->u_count = glGetUniformLocation(g->morph.prog.id, "u_count");
  g->u_base = glGetUniformLocation(g->morph.prog.id, "u_base");
  g->u_weight = glGetUniformLocation(g->morph.prog.id, "u_weight");
  glUseProgram(g->facep.prog.id);
  set_sampler(g->facep.prog.id, "u_positions", 0);
  glUseProgram(g->normalp.prog.id);
  set_sampler(g->normalp.prog.id, "u_first", 0);
  set_sampler(g->normalp.prog.id, "u_corners", 1);
  set_sampler(g->normalp.prog.id, "u_faces", 2);
  glUseProgram(0);
  glBindVertexArray(g->facep.vao);
  glBindBuffer(GL_ARRAY_BUFFER, g->corners.id);
  glEnableVertexAttribArray(0);
  glVertexAttribIPointer(0, 3, GL_UNSIGNED_INT, 3 * sizeof(uint32_t), (void *)0);
  glBindVertexArray(0);
  glBindBuffer(GL_ARRAY_BUFFER, 0);
  if (g->u_nhalf < 0 || g->u_count < 0 || g->u_base < 0 || g->u_weight < 0) {
    snprintf(err, errlen, "morph pass: a uniform is missing after linking");
    rc = VW_ESHADER;
    goto fail;
  }
  if ((rc = vw__gl_check("setting up the passes", err, errlen)) != 0) goto fail;

  /* Both delta textures exist even when empty, so both samplers always have something bound. */
  if ((rc = dtex_reserve(g, &g->dhalf, 0, err, errlen)) != 0 || (rc = dtex_reserve(g, &g->dfull, 0, err, errlen)) != 0 ||
      (rc = add_targets(g, m->targets, m->target_count, err, errlen)) != 0)
    goto fail;

  free(corners);
  free(first);
  free(entries);
  g->dirty = 1;
  *out = g;
  return 0;

fail:
  free(corners);
  free(first);
  free(entries);
  vw_gpu_destroy(g);
  return rc;
}

void vw_gpu_destroy(vw_gpu *g) {
  if (!g) return;
  free_pass(&g->normalp);
  free_pass(&g->facep);
  free_pass(&g->morph);
  vw__gl_texture_free(&g->dfull.tex);
  vw__gl_buffer_free(&g->dfull.buf);
  vw__gl_texture_free(&g->dhalf.tex);
  vw__gl_buffer_free(&g->dhalf.buf);
  vw__gl_texture *texs[] = {&g->positions_tex, &g->faces_tex, &g->normals_tex,
                         &g->r2t_tex,       &g->first_tex, &g->corners_of_tex};
  for (size_t i = 0; i < sizeof(texs) / sizeof(texs[0]); i++) vw__gl_texture_free(texs[i]);
  vw__gl_buffer *bufs[] = {&g->base,  &g->offsets, &g->positions, &g->scratch, &g->indices, &g->corners,
                        &g->faces, &g->normals, &g->r2t,       &g->first,   &g->corners_of};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) vw__gl_buffer_free(bufs[i]);
  free(g->target_half);
  free(g->target_slot);
  free(g->weights);
  free(g->active);
  free(g->active_weight);
  free(g->render_to_topo);
  free(g);
}

int vw_gpu_add_target(vw_gpu *g, const mesh_target *target, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  return add_targets(g, target, 1, err, errlen);
}

/* Rebuilds the active list from g->weights: half-float targets first (the shader reads the two
 * textures in that order), each group in target order. */
static void rebuild_active(vw_gpu *g) {
  uint32_t n = 0;
  for (int want = 1; want >= 0; want--) {
    for (uint32_t i = 0; i < g->target_count; i++)
      if (g->weights[i] != 0.0f && g->target_half[i] == want) {
        g->active[n] = i;
        g->active_weight[n] = g->weights[i];
        n++;
      }
    if (want == 1) g->active_half = n;
  }
  g->active_count = n;
}

void vw_gpu_set_weights(vw_gpu *g, const float *weights, uint32_t target_count) {
  int changed = 0;
  for (uint32_t i = 0; i < g->target_count; i++) {
    float w = weights && i < target_count ? weights[i] : 0.0f;
    if (memcmp(&w, &g->weights[i], sizeof(w)) != 0) {
      g->weights[i] = w;
      changed = 1;
    }
  }
  if (!changed) return;
  uint32_t before = g->active_count;
  rebuild_active(g);
  /* A weight that went from 0 to -0 changes nothing drawn; anything else does. */
  if (g->active_count > 0 || before > 0) g->dirty = 1;
}

void vw_gpu_set_offsets(vw_gpu *g, uint32_t first, uint32_t count, const float *offsets) {
  if (first >= g->vertex_count || count == 0 || offsets == NULL) return;
  if (count > g->vertex_count - first) count = g->vertex_count - first;
  glBindBuffer(GL_COPY_WRITE_BUFFER, g->offsets.id);
  glBufferSubData(GL_COPY_WRITE_BUFFER, (GLintptr)(12 * (size_t)first), (GLsizeiptr)(12 * (size_t)count), offsets);
  glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
  VW_GL_CHECK();
  g->dirty = 1;
}

static void bind_texture(GLuint unit, const vw__gl_texture *t) {
  glActiveTexture(GL_TEXTURE0 + unit);
  glBindTexture(GL_TEXTURE_BUFFER, t->id);
}

/* Pass 1, in slices of VW_GPU_MAX_ACTIVE active targets. Slice k reads the previous slice's
 * output; outputs alternate between positions and scratch so that the last slice writes
 * positions. Returns 0 or VW_E* when the scratch buffer cannot be made. */
static int run_morph(vw_gpu *g, char *err, size_t errlen) {
  uint32_t V = g->vertex_count;
  uint32_t slices = g->active_count == 0 ? 1 : (g->active_count + VW_GPU_MAX_ACTIVE - 1) / VW_GPU_MAX_ACTIVE;
  if (slices > 1 && g->scratch.id == 0) {
    vw__gl_buffer_desc d = {.size = 12 * (size_t)V, .usage = GL_DYNAMIC_COPY, .label = "morph scratch positions"};
    int rc = vw__gl_buffer_make(&g->scratch, &d, err, errlen);
    if (rc != 0) return rc;
  }
  glUseProgram(g->morph.prog.id);
  glBindVertexArray(g->morph.vao);
  bind_texture(0, &g->dhalf.tex);
  bind_texture(1, &g->dfull.tex);
  GLint base[VW_GPU_MAX_ACTIVE];
  float weight[VW_GPU_MAX_ACTIVE];
  GLuint src = g->base.id;
  for (uint32_t k = 0; k < slices; k++) {
    uint32_t from = k * VW_GPU_MAX_ACTIVE, to = from + VW_GPU_MAX_ACTIVE;
    if (to > g->active_count) to = g->active_count;
    uint32_t n = to - from, nhalf = 0;
    memset(base, 0, sizeof(base));
    memset(weight, 0, sizeof(weight));
    for (uint32_t i = 0; i < n; i++) {
      uint32_t a = from + i, ti = g->active[a];
      if (a < g->active_half) nhalf++;
      base[i] = (GLint)((uint64_t)g->target_slot[ti] * V); /* fits: checked against max_texels */
      weight[i] = g->active_weight[a];
    }
    glUniform1i(g->u_nhalf, (GLint)nhalf);
    glUniform1i(g->u_count, (GLint)n);
    glUniform4iv(g->u_base, VW__SHADERS_MORPH_VEC4S, base);
    glUniform4fv(g->u_weight, VW__SHADERS_MORPH_VEC4S, weight);
    glBindBuffer(GL_ARRAY_BUFFER, src);
    glEnableVertexAttribArray(0);
    glVertexAttribPointer(0, 3, GL_FLOAT, GL_FALSE, 12, (void *)0);
    if (k == 0) {
      glBindBuffer(GL_ARRAY_BUFFER, g->offsets.id);
      glEnableVertexAttribArray(1);
      glVertexAttribPointer(1, 3, GL_FLOAT, GL_FALSE, 12, (void *)0);
    } else {
      glDisableVertexAttribArray(1);
      glVertexAttrib3f(1, 0.0f, 0.0f, 0.0f); /* offsets were added by the first slice */
    }
    GLuint dst = (slices - 1 - k) % 2 == 0 ? g->positions.id : g->scratch.id;
    glBindBufferBase(GL_TRANSFORM_FEEDBACK_BUFFER, 0, dst);
    glBeginTransformFeedback(GL_POINTS);
    glDrawArrays(GL_POINTS, 0, (GLsizei)V);
    glEndTransformFeedback();
    VW_GL_CHECK();
    src = dst;
  }
  glBindBuffer(GL_ARRAY_BUFFER, 0);
  return 0;
}

int vw_gpu_update(vw_gpu *g, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!g->dirty) return 0;
  int rc = 0;
  glEnable(GL_RASTERIZER_DISCARD);
  if (g->vertex_count > 0) rc = run_morph(g, err, errlen);
  if (rc == 0 && g->face_count > 0) {
    glUseProgram(g->facep.prog.id);
    glBindVertexArray(g->facep.vao);
    bind_texture(0, &g->positions_tex);
    glBindBufferBase(GL_TRANSFORM_FEEDBACK_BUFFER, 0, g->faces.id);
    glBeginTransformFeedback(GL_POINTS);
    glDrawArrays(GL_POINTS, 0, (GLsizei)g->face_count);
    glEndTransformFeedback();
    VW_GL_CHECK();
  }
  if (rc == 0 && g->topo_count > 0) {
    glUseProgram(g->normalp.prog.id);
    glBindVertexArray(g->normalp.vao);
    bind_texture(0, &g->first_tex);
    bind_texture(1, &g->corners_of_tex);
    bind_texture(2, &g->faces_tex);
    glBindBufferBase(GL_TRANSFORM_FEEDBACK_BUFFER, 0, g->normals.id);
    glBeginTransformFeedback(GL_POINTS);
    glDrawArrays(GL_POINTS, 0, (GLsizei)g->topo_count);
    glEndTransformFeedback();
    VW_GL_CHECK();
  }
  /* Leave the state the renderer expects: rasterising on, nothing bound. */
  glBindBufferBase(GL_TRANSFORM_FEEDBACK_BUFFER, 0, 0);
  for (GLuint u = 3; u-- > 0;) bind_texture(u, &(vw__gl_texture){0});
  glBindVertexArray(0);
  glUseProgram(0);
  glDisable(GL_RASTERIZER_DISCARD);
  if (rc == 0) rc = vw__gl_check("running the morph and normal passes", err, errlen);
  if (rc != 0) return rc;
  g->dirty = 0;
  g->updates++;
  return 0;
}

unsigned vw_gpu_positions_buffer(const vw_gpu *g) { return g->positions.id; }
unsigned vw_gpu_normals_texture(const vw_gpu *g) { return g->normals_tex.id; }
unsigned vw_gpu_render_to_topo_texture(const vw_gpu *g) { return g->r2t_tex.id; }
unsigned vw_gpu_index_buffer(const vw_gpu *g) { return g->indices.id; }
uint32_t vw_gpu_vertex_count(const vw_gpu *g) { return g->vertex_count; }
uint32_t vw_gpu_triangle_count(const vw_gpu *g) { return g->triangle_count; }
uint32_t vw_gpu_half_targets(const vw_gpu *g) { return g->dhalf.slots; }
uint64_t vw_gpu_updates(const vw_gpu *g) { return g->updates; }
uint32_t vw_gpu_target_count(const vw_gpu *g) { return g->target_count; }
uint32_t vw_gpu_active_targets(const vw_gpu *g) { return g->active_count; }

static int read_buffer(GLuint id, size_t bytes, void *out) {
  if (bytes == 0) return 0;
  glBindBuffer(GL_COPY_READ_BUFFER, id);
  glGetBufferSubData(GL_COPY_READ_BUFFER, 0, (GLsizeiptr)bytes, out);
  glBindBuffer(GL_COPY_READ_BUFFER, 0);
  return glGetError() == GL_NO_ERROR ? 0 : VW_EGL;
}

int vw_gpu_read_positions(vw_gpu *g, float *out) {
  return read_buffer(g->positions.id, 12 * (size_t)g->vertex_count, out);
}

int vw_gpu_read_normals(vw_gpu *g, float *out) {
  size_t W = g->topo_count;
  float *welded = malloc(16 * W + 16);
  if (!welded) return VW_ENOMEM;
  int rc = read_buffer(g->normals.id, 16 * W, welded);
  if (rc == 0)
    for (uint32_t v = 0; v < g->vertex_count; v++)
      memcpy(out + 3 * (size_t)v, welded + 4 * (size_t)g->render_to_topo[v], 3 * sizeof(float));
  free(welded);
  return rc;
}
