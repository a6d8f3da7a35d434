/*
 * mesh.c — the mesh handle: allocation, sparse targets, clips, bounds, evaluation, validation.
 *
 * The assert()s check callers' own mistakes, never a file's content (that is mesh_validate's,
 * with error codes); they run in the Debug build and NDEBUG compiles them out of the others.
 *
 * DOES NOT import, weld or compute geometry; see the other mesh_*.c files.
 */
#include "mesh.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh_internal.h"

const char *mesh_strerror(int code) {
  switch (code) {
    case 0: return "success";
    case MESH_ENOENT: return "file not found or unreadable";
    case MESH_EFORMAT: return "unsupported or malformed file";
    case MESH_ENOTRIS: return "no triangles";
    case MESH_ENONFINITE: return "non-finite value (NaN or Inf)";
    case MESH_ERANGE: return "index out of range";
    case MESH_ETOOBIG: return "mesh exceeds the configured limit";
    case MESH_ENOMEM: return "out of memory";
    case MESH_EINVAL: return "invalid argument";
    case MESH_EIO: return "write failed";
    case MESH_EMISMATCH: return "frames or targets do not match the mesh";
    default: break;
  }
  if (code < 0 && code > -4000) return strerror(-code);
  return "unknown error";
}

void mesh__set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (err == NULL || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

char *mesh__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

mesh *mesh_create(void) {
  mesh *m = calloc(1, sizeof(*m));
  return m;
}

/* Frees what a target owns and zeroes it. */
static void target_fini(mesh_target *t) {
  free(t->name);
  free(t->indices);
  free(t->deltas);
  memset(t, 0, sizeof(*t));
}

void mesh__clip_fini(mesh_clip *c) {
  free(c->name);
  free(c->times);
  free(c->weights);
  memset(c, 0, sizeof(*c));
}

void mesh_destroy(mesh *m) {
  if (m == NULL) return;
  free(m->positions);
  free(m->normals);
  free(m->uvs);
  free(m->triangles);
  for (uint32_t i = 0; i < m->target_count; i++) target_fini(&m->targets[i]);
  free(m->targets);
  free(m->frames);
  for (uint32_t i = 0; i < m->clip_count; i++) mesh__clip_fini(&m->clips[i]);
  free(m->clips);
  for (uint32_t i = 0; i < m->submesh_count; i++) free(m->submeshes[i].name);
  free(m->submeshes);
  for (uint32_t i = 0; i < m->image_count; i++) free(m->images[i].name), free(m->images[i].rgba);
  free(m->images);
  free(m);
}

int mesh_alloc(mesh *m, uint32_t vertex_count, uint32_t triangle_count, int with_normals,
               int with_uvs) {
  float *p = calloc((size_t)vertex_count * 3 + 1, sizeof(float));
  uint32_t *t = calloc((size_t)triangle_count * 3 + 1, sizeof(uint32_t));
  float *n = with_normals ? calloc((size_t)vertex_count * 3 + 1, sizeof(float)) : NULL;
  float *uv = with_uvs ? calloc((size_t)vertex_count * 2 + 1, sizeof(float)) : NULL;
  if (!p || !t || (with_normals && !n) || (with_uvs && !uv)) {
    free(p);
    free(t);
    free(n);
    free(uv);
    return MESH_ENOMEM;
  }
  free(m->positions);
  free(m->triangles);
  free(m->normals);
  free(m->uvs);
  m->positions = p;
  m->triangles = t;
  m->normals = n;
  m->uvs = uv;
  m->vertex_count = vertex_count;
  m->triangle_count = triangle_count;
  return 0;
}

/* Appends *t to m->targets, taking ownership of its arrays (t is zeroed). 0 or MESH_ENOMEM. */
static int push_target(mesh *m, mesh_target *t) {
  mesh_target *grown = realloc(m->targets, sizeof(*grown) * (m->target_count + 1));
  if (grown == NULL) return MESH_ENOMEM;
  m->targets = grown;
  m->targets[m->target_count++] = *t;
  memset(t, 0, sizeof(*t));
  return 0;
}

int mesh_add_target_dense(mesh *m, const char *name, const float *dense, float default_weight) {
  uint32_t count = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *d = dense + 3 * (size_t)v;
    if (!isfinite(d[0]) || !isfinite(d[1]) || !isfinite(d[2])) return MESH_ENONFINITE;
    if (d[0] != 0.0f || d[1] != 0.0f || d[2] != 0.0f) count++;
  }
  if (!isfinite(default_weight)) return MESH_ENONFINITE;
  mesh_target t = {0};
  t.name = mesh__strdup(name ? name : "");
  t.indices = malloc(sizeof(uint32_t) * (count + 1));
  t.deltas = malloc(sizeof(float) * 3 * (count + 1));
  if (!t.name || !t.indices || !t.deltas) {
    target_fini(&t);
    return MESH_ENOMEM;
  }
  t.default_weight = default_weight;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *d = dense + 3 * (size_t)v;
    if (d[0] == 0.0f && d[1] == 0.0f && d[2] == 0.0f) continue;
    t.indices[t.count] = v;
    memcpy(t.deltas + 3 * (size_t)t.count, d, sizeof(float) * 3);
    t.count++;
  }
  int rc = push_target(m, &t);
  if (rc) target_fini(&t);
  return rc;
}

int mesh_add_target_sparse(mesh *m, const char *name, uint32_t count, const uint32_t *indices,
                           const float *deltas, float default_weight) {
  assert(count == 0 || (indices && deltas));
  for (uint32_t k = 0; k < count; k++) {
    if (indices[k] >= m->vertex_count || (k > 0 && indices[k] <= indices[k - 1])) return MESH_ERANGE;
    for (int c = 0; c < 3; c++)
      if (!isfinite(deltas[3 * (size_t)k + c])) return MESH_ENONFINITE;
  }
  if (!isfinite(default_weight)) return MESH_ENONFINITE;
  mesh_target t = {0};
  t.name = mesh__strdup(name ? name : "");
  t.indices = malloc(sizeof(uint32_t) * ((size_t)count + 1));
  t.deltas = malloc(sizeof(float) * 3 * ((size_t)count + 1));
  if (!t.name || !t.indices || !t.deltas) {
    target_fini(&t);
    return MESH_ENOMEM;
  }
  memcpy(t.indices, indices, sizeof(uint32_t) * count);
  memcpy(t.deltas, deltas, sizeof(float) * 3 * (size_t)count);
  t.count = count;
  t.default_weight = default_weight;
  int rc = push_target(m, &t);
  if (rc) target_fini(&t);
  return rc;
}

void mesh_remove_last_target(mesh *m) {
  assert(m->target_count > 0); /* it undoes an add that succeeded */
  if (m->target_count == 0) return;
  target_fini(&m->targets[--m->target_count]);
}

int mesh_find_target(const mesh *m, const char *name) {
  for (uint32_t i = 0; i < m->target_count; i++)
    if (strcmp(m->targets[i].name, name) == 0) return (int)i;
  return -1;
}

int mesh_targets_same(const mesh_target *a, const mesh_target *b) {
  return a->count == b->count && memcmp(a->indices, b->indices, sizeof(uint32_t) * a->count) == 0 &&
         memcmp(a->deltas, b->deltas, sizeof(float) * 3 * (size_t)a->count) == 0;
}

/* The first target of the window before t that is the same as t, or -1. */
static int64_t first_same(const mesh *m, uint32_t t) {
  for (uint32_t u = t > MESH_COPY_WINDOW ? t - MESH_COPY_WINDOW : 0; u < t; u++)
    if (mesh_targets_same(&m->targets[u], &m->targets[t])) return u;
  return -1;
}

int64_t mesh_target_copy_of(const mesh *m, uint32_t t) {
  assert(t < m->target_count);
  int64_t u = first_same(m, t);
  /* u with a twin in its own window may be a copy itself: t is then coded in full. */
  return u >= 0 && first_same(m, (uint32_t)u) < 0 ? u : -1;
}

int64_t mesh_target_entry(const mesh_target *t, uint32_t v) {
  uint32_t lo = 0, hi = t->count;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (t->indices[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->count && t->indices[lo] == v ? (int64_t)lo : -1;
}

int mesh_find_clip(const mesh *m, const char *name) {
  for (uint32_t i = 0; i < m->clip_count; i++)
    if (strcmp(m->clips[i].name, name) == 0) return (int)i;
  return -1;
}

void mesh_update_bounds(mesh *m) {
  if (m->vertex_count == 0) {
    memset(m->bbox_min, 0, sizeof(m->bbox_min));
    memset(m->bbox_max, 0, sizeof(m->bbox_max));
    return;
  }
  for (int k = 0; k < 3; k++) m->bbox_min[k] = m->bbox_max[k] = m->positions[k];
  for (uint32_t v = 1; v < m->vertex_count; v++) {
    for (int k = 0; k < 3; k++) {
      float x = m->positions[3 * (size_t)v + k];
      if (x < m->bbox_min[k]) m->bbox_min[k] = x;
      if (x > m->bbox_max[k]) m->bbox_max[k] = x;
    }
  }
}

double mesh_bbox_diagonal(const mesh *m) {
  double s = 0.0;
  for (int k = 0; k < 3; k++) {
    double d = (double)m->bbox_max[k] - (double)m->bbox_min[k];
    s += d * d;
  }
  return sqrt(s);
}

void mesh_evaluate(const mesh *m, const float *weights, const float *offsets, float *out) {
  size_t n = 3 * (size_t)m->vertex_count;
  /* Accumulate in double so the reference does not depend on the order targets are summed. */
  double *acc = malloc(sizeof(double) * (n + 1));
  if (acc == NULL) {
    /* Fall back to float accumulation rather than fail: the function has no error path. */
    for (size_t i = 0; i < n; i++) out[i] = m->positions[i] + (offsets ? offsets[i] : 0.0f);
    for (uint32_t t = 0; weights && t < m->target_count; t++) {
      const mesh_target *tg = &m->targets[t];
      if (weights[t] == 0.0f) continue;
      for (uint32_t k = 0; k < tg->count; k++)
        for (int c = 0; c < 3; c++)
          out[3 * (size_t)tg->indices[k] + c] += weights[t] * tg->deltas[3 * (size_t)k + c];
    }
    return;
  }
  for (size_t i = 0; i < n; i++) acc[i] = (double)m->positions[i] + (offsets ? offsets[i] : 0.0);
  for (uint32_t t = 0; weights && t < m->target_count; t++) {
    const mesh_target *tg = &m->targets[t];
    double w = weights[t];
    if (w == 0.0) continue;
    for (uint32_t k = 0; k < tg->count; k++)
      for (int c = 0; c < 3; c++)
        acc[3 * (size_t)tg->indices[k] + c] += w * (double)tg->deltas[3 * (size_t)k + c];
  }
  for (size_t i = 0; i < n; i++) out[i] = (float)acc[i];
  free(acc);
}

static int first_nonfinite(const float *a, size_t n, size_t *at) {
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) {
      *at = i;
      return 1;
    }
  }
  return 0;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int validate_clip(const mesh *m, uint32_t i, char *err, size_t errlen) {
  const mesh_clip *c = &m->clips[i];
  if (c->name == NULL || c->name[0] == '\0') {
    mesh__set_err(err, errlen, "clip %u has no name", i);
    return MESH_EINVAL;
  }
  if (c->frame_count > 0) {
    if (c->key_count != 0) {
      mesh__set_err(err, errlen, "clip '%s' has both frames and weight keys", c->name);
      return MESH_EINVAL;
    }
    if ((uint64_t)c->first_frame + c->frame_count > m->frame_count) {
      mesh__set_err(err, errlen, "clip '%s' covers frames %u..%llu but the mesh has %u frames",
                    c->name, c->first_frame,
                    (unsigned long long)c->first_frame + c->frame_count - 1, m->frame_count);
      return MESH_ERANGE;
    }
    if (!(c->fps > 0.0f) || !isfinite(c->fps)) {
      mesh__set_err(err, errlen, "clip '%s': frame rate %g is not a positive number", c->name,
                    (double)c->fps);
      return MESH_EINVAL;
    }
    if (c->loop_frames > c->frame_count) {
      mesh__set_err(err, errlen, "clip '%s' loops over its last %u frames but has %u", c->name, c->loop_frames,
                    c->frame_count);
      return MESH_EINVAL;
    }
    return 0;
  }
  if (c->key_count == 0) {
    mesh__set_err(err, errlen, "clip '%s' has neither frames nor weight keys", c->name);
    return MESH_EINVAL;
  }
  if (c->times == NULL || (c->weights == NULL && c->target_count > 0)) {
    mesh__set_err(err, errlen, "clip '%s' has %u keys but no %s", c->name, c->key_count,
                  c->times == NULL ? "times" : "weights");
    return MESH_EINVAL;
  }
  if (c->target_count > m->target_count) {
    mesh__set_err(err, errlen, "clip '%s' weighs %u targets but the mesh has %u", c->name,
                  c->target_count, m->target_count);
    return MESH_ERANGE;
  }
  for (uint32_t k = 0; k < c->key_count; k++) {
    if (!isfinite(c->times[k])) {
      mesh__set_err(err, errlen, "clip '%s': key %u has a non-finite time", c->name, k);
      return MESH_ENONFINITE;
    }
    if (k > 0 && !(c->times[k] > c->times[k - 1])) {
      mesh__set_err(err, errlen, "clip '%s': key %u at %gs does not come after key %u at %gs",
                    c->name, k, (double)c->times[k], k - 1, (double)c->times[k - 1]);
      return MESH_EINVAL;
    }
  }
  size_t at;
  if (first_nonfinite(c->weights, (size_t)c->key_count * c->target_count, &at)) {
    mesh__set_err(err, errlen, "clip '%s': weight of target '%s' at key %zu is not finite",
                  c->name, m->targets[at % c->target_count].name, at / c->target_count);
    return MESH_ENONFINITE;
  }
  return 0;
}

/* Names must be unique: sorted copies of the name pointers, so a file with many clips costs
 * n log n, not n². */
static int validate_clips(const mesh *m, char *err, size_t errlen) {
  if (m->clip_count == 0) return 0;
  if (m->clips == NULL) {
    mesh__set_err(err, errlen, "mesh declares %u clips but has no clip array", m->clip_count);
    return MESH_EINVAL;
  }
  for (uint32_t i = 0; i < m->clip_count; i++) {
    int rc = validate_clip(m, i, err, errlen);
    if (rc) return rc;
  }
  const char **names = malloc(sizeof(*names) * m->clip_count);
  if (names == NULL) {
    mesh__set_err(err, errlen, "out of memory checking %u clip names", m->clip_count);
    return MESH_ENOMEM;
  }
  for (uint32_t i = 0; i < m->clip_count; i++) names[i] = m->clips[i].name;
  qsort(names, m->clip_count, sizeof(*names), cmp_name);
  int rc = 0;
  for (uint32_t i = 1; i < m->clip_count && rc == 0; i++) {
    if (strcmp(names[i], names[i - 1]) == 0) {
      mesh__set_err(err, errlen, "two clips are called '%s'", names[i]);
      rc = MESH_EINVAL;
    }
  }
  free(names);
  return rc;
}

int mesh_validate(const mesh *m, char *err, size_t errlen) {
  size_t at;
  if (m->vertex_count > 0 && m->positions == NULL) {
    mesh__set_err(err, errlen, "mesh has %u vertices but no positions", m->vertex_count);
    return MESH_EINVAL;
  }
  if (first_nonfinite(m->positions, 3 * (size_t)m->vertex_count, &at)) {
    mesh__set_err(err, errlen, "vertex %zu has a non-finite coordinate (%g)", at / 3,
                  (double)m->positions[at]);
    return MESH_ENONFINITE;
  }
  if (m->normals && first_nonfinite(m->normals, 3 * (size_t)m->vertex_count, &at)) {
    mesh__set_err(err, errlen, "normal of vertex %zu is not finite", at / 3);
    return MESH_ENONFINITE;
  }
  if (m->uvs && first_nonfinite(m->uvs, 2 * (size_t)m->vertex_count, &at)) {
    mesh__set_err(err, errlen, "UV of vertex %zu is not finite", at / 2);
    return MESH_ENONFINITE;
  }
  for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++) {
    if (m->triangles[i] >= m->vertex_count) {
      mesh__set_err(err, errlen, "triangle %zu references vertex %u but the mesh has %u vertices",
                    i / 3, m->triangles[i], m->vertex_count);
      return MESH_ERANGE;
    }
  }
  for (uint32_t t = 0; t < m->target_count; t++) {
    const mesh_target *tg = &m->targets[t];
    for (uint32_t k = 0; k < tg->count; k++) {
      if (tg->indices[k] >= m->vertex_count || (k > 0 && tg->indices[k] <= tg->indices[k - 1])) {
        mesh__set_err(err, errlen, "morph target '%s': vertex index %u out of range or unsorted",
                      tg->name, tg->indices[k]);
        return MESH_ERANGE;
      }
    }
    if (first_nonfinite(tg->deltas, 3 * (size_t)tg->count, &at)) {
      mesh__set_err(err, errlen, "morph target '%s' has a non-finite delta at vertex %u",
                    tg->name, tg->indices[at / 3]);
      return MESH_ENONFINITE;
    }
    if (!isfinite(tg->default_weight)) {
      mesh__set_err(err, errlen, "morph target '%s' has a non-finite default weight", tg->name);
      return MESH_ENONFINITE;
    }
  }
  if (m->frame_count > 0) {
    if (m->frames == NULL) {
      mesh__set_err(err, errlen, "mesh declares %u frames but has no frame data", m->frame_count);
      return MESH_EINVAL;
    }
    if (first_nonfinite(m->frames, 3 * (size_t)m->vertex_count * m->frame_count, &at)) {
      size_t per = 3 * (size_t)m->vertex_count;
      mesh__set_err(err, errlen, "frame %zu: vertex %zu has a non-finite coordinate", at / per,
                    (at % per) / 3);
      return MESH_ENONFINITE;
    }
    if (!(m->frame_rate > 0.0f) || !isfinite(m->frame_rate)) {
      mesh__set_err(err, errlen, "frame rate %g is not a positive number", (double)m->frame_rate);
      return MESH_EINVAL;
    }
  }
  for (uint32_t s = 0; s < m->submesh_count; s++) {
    const mesh_submesh *sm = &m->submeshes[s];
    if ((uint64_t)sm->first_triangle + sm->triangle_count > m->triangle_count ||
        (uint64_t)sm->first_vertex + sm->vertex_count > m->vertex_count) {
      mesh__set_err(err, errlen, "submesh %u range lies outside the mesh", s);
      return MESH_ERANGE;
    }
    if (sm->texture > m->image_count) {
      mesh__set_err(err, errlen, "submesh %u names texture %u but the mesh has %u", s, sm->texture, m->image_count);
      return MESH_ERANGE;
    }
    for (int k = 0; k < 4 && sm->has_color; k++)
      if (!(sm->base_color[k] >= 0.0f && sm->base_color[k] <= 1.0f)) {
        mesh__set_err(err, errlen, "submesh %u has a base colour outside [0, 1]", s);
        return MESH_EINVAL;
      }
  }
  if (m->image_count > MESH_MAX_IMAGES) {
    mesh__set_err(err, errlen, "mesh has %u textures, more than %u", m->image_count, MESH_MAX_IMAGES);
    return MESH_ETOOBIG;
  }
  for (uint32_t i = 0; i < m->image_count; i++) {
    const mesh_image *im = &m->images[i];
    if (!im->name || !im->rgba || im->width == 0 || im->height == 0 || im->width > MESH_MAX_IMAGE_SIDE ||
        im->height > MESH_MAX_IMAGE_SIDE) {
      mesh__set_err(err, errlen, "texture %u is empty or larger than %u pixels a side", i, MESH_MAX_IMAGE_SIDE);
      return MESH_EINVAL;
    }
  }
  return validate_clips(m, err, errlen);
}
