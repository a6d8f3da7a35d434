/*
 * mesh_clip.c — building named animation clips: keyframe clips from per-frame names (MD2, MD3)
 * and weight clips from morph-weight channels (glTF), resampled onto one time line.
 *
 * DOES NOT read files (mesh_md2.c, mesh_md3.c and mesh_gltf_anim.c do), check clips (mesh.c's
 * mesh_validate does) or play them back (the server does).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

/* ---- keyframe clips ------------------------------------------------------------------------- */

/* The name of a frame with trailing digits stripped, into `out` (17 bytes). Returns its length,
 * or 0 when the name is unusable: empty, not printable ASCII, or digits only. A name that fills
 * all 16 bytes has no NUL; that is allowed. */
static size_t frame_prefix(const char *name, char *out) {
  size_t n = 0;
  while (n < MESH__FRAME_NAME_LEN && name[n] != '\0') {
    unsigned char c = (unsigned char)name[n];
    if (c < 0x21 || c > 0x7e) return 0;
    n++;
  }
  while (n > 0 && name[n - 1] >= '0' && name[n - 1] <= '9') n--;
  memcpy(out, name, n);
  out[n] = '\0';
  return n;
}

typedef struct frame_group {
  char prefix[MESH__FRAME_NAME_LEN + 1];
  uint32_t first, count;
  int repeat; /* an earlier group has the same prefix */
} frame_group;

static int cmp_group(const void *a, const void *b) {
  const frame_group *x = *(const frame_group *const *)a, *y = *(const frame_group *const *)b;
  int c = strcmp(x->prefix, y->prefix);
  if (c) return c;
  return (x->first > y->first) - (x->first < y->first);
}

/* A group's clip name: its prefix, or "<prefix>_<first frame>" for a prefix seen before. */
static void group_name(const frame_group *g, char *name, size_t len) {
  if (g->repeat)
    snprintf(name, len, "%s_%u", g->prefix, g->first);
  else
    snprintf(name, len, "%s", g->prefix);
}

/* Appends a keyframe clip unless one has that name already (room was made by the caller).
 * 0 or MESH_ENOMEM. */
static int add_clip(mesh *m, const char *name, uint32_t first, uint32_t count, float fps) {
  if (mesh_find_clip(m, name) >= 0) return 0;
  mesh_clip *c = &m->clips[m->clip_count];
  memset(c, 0, sizeof(*c));
  c->name = mesh__strdup(name);
  if (!c->name) return MESH_ENOMEM;
  c->fps = fps;
  c->first_frame = first;
  c->frame_count = count;
  m->clip_count++;
  return 0;
}

/* The digits a frame name ends with (at most 15), or 0 when fewer than `min` end it. */
static size_t frame_digits(const char *name, char *digits, size_t min) {
  size_t n = 0;
  while (n < MESH__FRAME_NAME_LEN && name[n] != '\0') n++;
  size_t d = 0;
  while (d < n && name[n - 1 - d] >= '0' && name[n - 1 - d] <= '9') d++;
  if (d < min) return 0;
  memcpy(digits, name + n - d, d);
  digits[d] = '\0';
  return d;
}

/* Quake II numbers the variants of one animation inside its frame names: death101…death106,
 * death201…death206, death301…death308 are three deaths of 6, 6 and 8 frames. A group splits
 * into clips "<group><v>" only when every name ends in three or more digits, the leading ones
 * (all but the last two) count 1, 2, …, k (k >= 2) in runs, and each run's last two digits
 * count 01, 02, …: so "run001…run006" or "stand01…stand40" never split. */
static int add_variants(mesh *m, const char (*names)[MESH__FRAME_NAME_LEN], const frame_group *g, float fps) {
  uint32_t run_first[100], run_count[100], runs = 0;
  for (uint32_t f = g->first; f < g->first + g->count; f++) {
    char digits[MESH__FRAME_NAME_LEN + 1];
    size_t d = frame_digits(names[f], digits, 3);
    if (d == 0) return 0;
    long frame = strtol(digits + d - 2, NULL, 10);
    digits[d - 2] = '\0';
    long variant = strtol(digits, NULL, 10);
    if (runs > 0 && variant == (long)runs && frame == (long)run_count[runs - 1] + 1) {
      run_count[runs - 1]++;
    } else if (variant == (long)runs + 1 && frame == 1 && runs < 100) {
      run_first[runs] = f;
      run_count[runs++] = 1;
    } else {
      return 0;
    }
  }
  if (runs < 2) return 0;
  char base[MESH__FRAME_NAME_LEN + 16];
  group_name(g, base, sizeof(base));
  size_t bl = strlen(base);
  int sep = bl > 0 && base[bl - 1] >= '0' && base[bl - 1] <= '9';
  for (uint32_t r = 0; r < runs; r++) {
    char name[MESH__FRAME_NAME_LEN + 32];
    snprintf(name, sizeof(name), "%s%s%u", base, sep ? "_" : "", r + 1);
    int rc = add_clip(m, name, run_first[r], run_count[r], fps);
    if (rc) return rc;
  }
  return 0;
}

int mesh__clip_from_frame_names(mesh *m, const char (*names)[MESH__FRAME_NAME_LEN],
                                uint32_t count, float fps) {
  if (m->frame_count == 0) return 0;
  if (count > m->frame_count) count = m->frame_count;
  frame_group *groups = NULL;
  frame_group **order = NULL;
  uint32_t ngroups = 0;
  int rc = MESH_ENOMEM;

  int usable = names != NULL && count == m->frame_count;
  if (usable) {
    groups = malloc(sizeof(*groups) * ((size_t)count + 1));
    if (!groups) goto out;
    for (uint32_t f = 0; f < count && usable; f++) {
      char prefix[MESH__FRAME_NAME_LEN + 1];
      if (frame_prefix(names[f], prefix) == 0) {
        usable = 0;
      } else if (ngroups > 0 && strcmp(groups[ngroups - 1].prefix, prefix) == 0) {
        groups[ngroups - 1].count++;
      } else {
        frame_group *g = &groups[ngroups++];
        memcpy(g->prefix, prefix, sizeof(prefix));
        g->first = f;
        g->count = 1;
        g->repeat = 0;
      }
    }
  }
  if (!usable) {
    free(groups);
    groups = malloc(sizeof(*groups));
    if (!groups) goto out;
    snprintf(groups[0].prefix, sizeof(groups[0].prefix), "all");
    groups[0].first = 0;
    groups[0].count = m->frame_count;
    groups[0].repeat = 0;
    ngroups = 1;
  }

  /* A prefix that comes back later ("stand", "run", "stand") names its later runs
   * "<prefix>_<first frame>". Prefixes never end in a digit, so such a name can equal neither a
   * plain prefix nor another repeat's name. Sorting finds the repeats in n log n, which matters
   * for files whose headers claim millions of frames. */
  order = malloc(sizeof(*order) * ngroups);
  if (!order) goto out;
  for (uint32_t i = 0; i < ngroups; i++) order[i] = &groups[i];
  qsort(order, ngroups, sizeof(*order), cmp_group);
  for (uint32_t i = 1; i < ngroups; i++)
    if (strcmp(order[i]->prefix, order[i - 1]->prefix) == 0) order[i]->repeat = 1;

  /* The clips in order: one per group; then each group's numbered variants (Quake II's
   * death1, death2, death3 within "death"); then "all" when there is more than one group, so
   * that the whole file stays one clip too. A name a clip already has (an animation.cfg's)
   * is not added twice. */
  uint32_t most = ngroups * 2 + 1;
  for (uint32_t i = 0; usable && i < ngroups; i++) most += groups[i].count;
  mesh_clip *grown = realloc(m->clips, sizeof(*grown) * ((size_t)m->clip_count + most));
  if (!grown) goto out;
  m->clips = grown;
  for (uint32_t i = 0; i < ngroups; i++) {
    const frame_group *g = &groups[i];
    char name[MESH__FRAME_NAME_LEN + 16];
    group_name(g, name, sizeof(name));
    rc = add_clip(m, name, g->first, g->count, fps);
    if (rc) goto out;
  }
  for (uint32_t i = 0; usable && i < ngroups; i++) {
    rc = add_variants(m, names, &groups[i], fps);
    if (rc) goto out;
  }
  if (ngroups > 1) rc = add_clip(m, "all", 0, m->frame_count, fps);

out:
  free(order);
  free(groups);
  return rc;
}

/* ---- weight clips --------------------------------------------------------------------------- */

/* Past this many floats (1 GiB) a clip's weight array is refused rather than allocated. */
#define MAX_CLIP_WEIGHTS (1u << 28)

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Value v of channel `ch` at key k (the value, not a tangent). */
static float key_value(const mesh__weight_channel *ch, uint32_t k, uint32_t v) {
  size_t vc = ch->value_count;
  if (ch->interp == MESH__INTERP_CUBIC) return ch->values[3 * vc * k + vc + v];
  return ch->values[vc * k + v];
}

/* Samples every value of `ch` at time t into out[value_count]. *cursor is the last key at or
 * before the previous (smaller or equal) t, so a sweep over ascending times is linear. Times
 * equal to a key give that key's values exactly. */
static void sample_channel(const mesh__weight_channel *ch, uint32_t *cursor, double t, double *out) {
  uint32_t n = ch->key_count, vc = ch->value_count;
  if (t <= ch->times[0] || n == 1) {
    for (uint32_t v = 0; v < vc; v++) out[v] = key_value(ch, 0, v);
    return;
  }
  if (t >= ch->times[n - 1]) {
    for (uint32_t v = 0; v < vc; v++) out[v] = key_value(ch, n - 1, v);
    return;
  }
  while (*cursor + 1 < n && ch->times[*cursor + 1] <= t) (*cursor)++;
  uint32_t k = *cursor;
  double t0 = ch->times[k], t1 = ch->times[k + 1];
  if (t == t0 || ch->interp == MESH__INTERP_STEP) {
    for (uint32_t v = 0; v < vc; v++) out[v] = key_value(ch, k, v);
    return;
  }
  double d = t1 - t0, s = (t - t0) / d;
  for (uint32_t v = 0; v < vc; v++) {
    double v0 = key_value(ch, k, v), v1 = key_value(ch, k + 1, v);
    if (ch->interp == MESH__INTERP_LINEAR) {
      out[v] = v0 + s * (v1 - v0);
    } else {
      /* glTF's cubic Hermite spline: out-tangent b of key k, in-tangent a of key k + 1, both
       * scaled by the key interval. */
      double b0 = ch->values[3 * (size_t)vc * k + 2 * (size_t)vc + v];
      double a1 = ch->values[3 * (size_t)vc * (k + 1) + v];
      double s2 = s * s, s3 = s2 * s;
      out[v] = (2 * s3 - 3 * s2 + 1) * v0 + (s3 - 2 * s2 + s) * d * b0 + (-2 * s3 + 3 * s2) * v1 +
               (s3 - s2) * d * a1;
    }
  }
}

static int check_channel(const mesh__weight_channel *ch, uint32_t c, const char *name, char *err,
                         size_t errlen) {
  if (ch->key_count == 0) {
    mesh__set_err(err, errlen, "animation '%s': channel %u has no keys", name, c);
    return MESH_EFORMAT;
  }
  for (uint32_t k = 0; k < ch->key_count; k++) {
    if (!isfinite(ch->times[k])) {
      mesh__set_err(err, errlen, "animation '%s': channel %u, key %u has a non-finite time", name,
                    c, k);
      return MESH_ENONFINITE;
    }
    if (k > 0 && !(ch->times[k] > ch->times[k - 1])) {
      mesh__set_err(err, errlen,
                    "animation '%s': channel %u, key %u at %gs does not come after key %u at %gs",
                    name, c, k, (double)ch->times[k], k - 1, (double)ch->times[k - 1]);
      return MESH_EFORMAT;
    }
  }
  size_t nv = (size_t)ch->key_count * ch->value_count * (ch->interp == MESH__INTERP_CUBIC ? 3 : 1);
  for (size_t i = 0; i < nv; i++) {
    if (!isfinite(ch->values[i])) {
      mesh__set_err(err, errlen, "animation '%s': channel %u has a non-finite weight", name, c);
      return MESH_ENONFINITE;
    }
  }
  return 0;
}

int mesh__clip_from_weight_channels(mesh *m, const char *name, uint32_t index,
                                    const mesh__weight_channel *ch, uint32_t n, char *err,
                                    size_t errlen) {
  char fallback[32];
  if (name == NULL || name[0] == '\0') {
    snprintf(fallback, sizeof(fallback), "animation%u", index);
    name = fallback;
  }
  int reaches = 0;
  uint64_t total_keys = 0;
  for (uint32_t c = 0; c < n; c++) {
    int rc = check_channel(&ch[c], c, name, err, errlen);
    if (rc) return rc;
    for (uint32_t v = 0; v < ch[c].value_count; v++)
      reaches |= ch[c].target_of[v] >= 0 && (uint32_t)ch[c].target_of[v] < m->target_count;
    total_keys += ch[c].key_count;
  }
  if (!reaches) return 0;

  mesh_clip clip;
  memset(&clip, 0, sizeof(clip));
  double *row = NULL;
  uint32_t *cursor = NULL;
  uint32_t maxvc = 0;
  int rc = MESH_ENOMEM;
  for (uint32_t c = 0; c < n; c++)
    if (ch[c].value_count > maxvc) maxvc = ch[c].value_count;
  if (total_keys * m->target_count > MAX_CLIP_WEIGHTS || total_keys > MAX_CLIP_WEIGHTS) {
    mesh__set_err(err, errlen, "animation '%s': %llu keys × %u targets is over the limit", name,
                  (unsigned long long)total_keys, m->target_count);
    return MESH_ETOOBIG;
  }

  /* The clip's time line: the union of the channels' key times. */
  clip.times = malloc(sizeof(float) * (total_keys + 1));
  if (!clip.times) goto fail;
  uint32_t nk = 0;
  for (uint32_t c = 0; c < n; c++) {
    memcpy(clip.times + nk, ch[c].times, sizeof(float) * ch[c].key_count);
    nk += ch[c].key_count;
  }
  if (n > 1) {
    qsort(clip.times, nk, sizeof(float), cmp_float);
    uint32_t u = 1;
    for (uint32_t k = 1; k < nk; k++)
      if (clip.times[k] != clip.times[u - 1]) clip.times[u++] = clip.times[k];
    nk = u;
  }
  clip.key_count = nk;
  clip.target_count = m->target_count;
  clip.weights = calloc((size_t)nk * m->target_count + 1, sizeof(float));
  row = malloc(sizeof(double) * ((size_t)maxvc + 1));
  cursor = calloc((size_t)n + 1, sizeof(uint32_t));
  if (!clip.weights || !row || !cursor) goto fail;
  /* Channels that drive the same target (a mesh instanced twice): the later channel wins. */
  for (uint32_t k = 0; k < nk; k++) {
    float *dst = clip.weights + (size_t)k * m->target_count;
    for (uint32_t c = 0; c < n; c++) {
      sample_channel(&ch[c], &cursor[c], clip.times[k], row);
      for (uint32_t v = 0; v < ch[c].value_count; v++) {
        int t = ch[c].target_of[v];
        if (t >= 0 && (uint32_t)t < m->target_count) dst[t] = (float)row[v];
      }
    }
  }

  /* A name already taken gets the animation's index appended. A generated name can itself be
   * taken only by a file that asks for it, so the loop ends quickly on real files and is
   * bounded by the number of clips on hostile ones. */
  size_t len = strlen(name) + 24;
  clip.name = malloc(len);
  if (!clip.name) goto fail;
  snprintf(clip.name, len, "%s", name);
  while (mesh_find_clip(m, clip.name) >= 0) {
    char *longer = malloc(strlen(clip.name) + 24);
    if (!longer) goto fail;
    sprintf(longer, "%s_%u", clip.name, index);
    free(clip.name);
    clip.name = longer;
  }

  mesh_clip *grown = realloc(m->clips, sizeof(*grown) * ((size_t)m->clip_count + 1));
  if (!grown) goto fail;
  m->clips = grown;
  m->clips[m->clip_count++] = clip;
  free(row);
  free(cursor);
  return 0;

fail:
  mesh__clip_fini(&clip);
  free(row);
  free(cursor);
  if (rc == MESH_ENOMEM) mesh__set_err(err, errlen, "animation '%s': out of memory", name);
  return rc;
}
