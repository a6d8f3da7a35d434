/*
 * oracle.c — independent references for the mesh-core tests (see oracle.h).
 */
#include "oracle.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* ---- OFF ------------------------------------------------------------------------------------ */

typedef struct tok {
  FILE *f;
} tok;

/* Next whitespace-separated token, skipping '#' comments. Returns 0 at end of file. */
static int next_token(tok *t, char *buf, size_t n) {
  int c;
  for (;;) {
    c = fgetc(t->f);
    if (c == EOF) return 0;
    if (c == '#') {
      while (c != EOF && c != '\n') c = fgetc(t->f);
      continue;
    }
    if (!isspace(c)) break;
  }
  size_t k = 0;
  while (c != EOF && !isspace(c) && k + 1 < n) {
    buf[k++] = (char)c;
    c = fgetc(t->f);
  }
  if (c != EOF) ungetc(c, t->f); /* a newline ends the face line for skip_line() */
  buf[k] = '\0';
  return 1;
}

/* Reads the rest of the current line (after a face's indices: optional colour values). */
static void skip_line(tok *t) {
  int c;
  do c = fgetc(t->f);
  while (c != EOF && c != '\n');
}

typedef struct pkey {
  float p[3];
  uint32_t idx;
} pkey;

static int cmp_pkey(const void *a, const void *b) {
  const pkey *x = a, *y = b;
  for (int k = 0; k < 3; k++)
    if (x->p[k] != y->p[k]) return x->p[k] < y->p[k] ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static uint32_t find_root(uint32_t *parent, uint32_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

/* The OFF reader keeps it simple: all faces in memory, as (count, indices...) runs. */
void oracle_off_counts(const char *path, oracle_counts *out) {
  memset(out, 0, sizeof(*out));
  FILE *f = fopen(path, "r");
  if (!f) test__fail(__FILE__, __LINE__, "cannot open %s", path);
  tok t = {f};
  char buf[128];
  if (!next_token(&t, buf, sizeof(buf)) || strcmp(buf, "OFF") != 0)
    test__fail(__FILE__, __LINE__, "%s: not an OFF file", path);
  next_token(&t, buf, sizeof(buf));
  uint32_t nv = (uint32_t)strtoul(buf, NULL, 10);
  next_token(&t, buf, sizeof(buf));
  uint32_t nf = (uint32_t)strtoul(buf, NULL, 10);
  next_token(&t, buf, sizeof(buf)); /* edge count, unused */
  float *pos = malloc(sizeof(float) * 3 * (nv + 1));
  for (uint32_t v = 0; v < nv; v++)
    for (int k = 0; k < 3; k++) {
      if (!next_token(&t, buf, sizeof(buf))) test__fail(__FILE__, __LINE__, "%s: short file", path);
      pos[3 * v + k] = strtof(buf, NULL);
    }
  size_t fcap = 1024, flen = 0;
  uint32_t *faces = malloc(sizeof(uint32_t) * fcap);
  uint8_t *referenced = calloc(nv + 1, 1);
  for (uint32_t fi = 0; fi < nf; fi++) {
    if (!next_token(&t, buf, sizeof(buf))) test__fail(__FILE__, __LINE__, "%s: short file", path);
    uint32_t k = (uint32_t)strtoul(buf, NULL, 10);
    if (flen + k + 1 > fcap) faces = realloc(faces, sizeof(uint32_t) * (fcap = 2 * (flen + k + 1)));
    faces[flen++] = k;
    for (uint32_t c = 0; c < k; c++) {
      if (!next_token(&t, buf, sizeof(buf))) test__fail(__FILE__, __LINE__, "%s: short file", path);
      uint32_t v = (uint32_t)strtoul(buf, NULL, 10);
      if (v >= nv) test__fail(__FILE__, __LINE__, "%s: index out of range", path);
      faces[flen++] = v;
      if (k >= 3) referenced[v] = 1;
    }
    skip_line(&t);
  }
  fclose(f);

  /* Distinct referenced positions: sort by coordinates, equal neighbours share an id. */
  pkey *keys = malloc(sizeof(pkey) * (nv + 1));
  uint32_t nk = 0;
  for (uint32_t v = 0; v < nv; v++) {
    if (!referenced[v]) continue;
    memcpy(keys[nk].p, pos + 3 * v, sizeof(float) * 3);
    keys[nk++].idx = v;
  }
  qsort(keys, nk, sizeof(pkey), cmp_pkey);
  uint32_t *first = malloc(sizeof(uint32_t) * (nv + 1)); /* file vertex -> first equal vertex */
  for (uint32_t i = 0; i < nk; i++) {
    int same = i > 0 && memcmp(keys[i].p, keys[i - 1].p, sizeof(keys[i].p)) == 0;
    first[keys[i].idx] = same ? first[keys[i - 1].idx] : keys[i].idx;
    if (!same) out->vertices++;
  }
  /* Weld: in file order, each distinct position joins the nearest earlier representative within
   * 1e-6 of the bounding-box diagonal, else becomes one. Candidates come from a window of the
   * x-sorted list (keys is sorted by x first). */
  double lo[3], hi[3];
  for (int k = 0; k < 3; k++) lo[k] = hi[k] = nk ? keys[0].p[k] : 0;
  for (uint32_t i = 0; i < nk; i++)
    for (int k = 0; k < 3; k++) {
      if (keys[i].p[k] < lo[k]) lo[k] = keys[i].p[k];
      if (keys[i].p[k] > hi[k]) hi[k] = keys[i].p[k];
    }
  double tol = 1e-6 * sqrt((hi[0] - lo[0]) * (hi[0] - lo[0]) + (hi[1] - lo[1]) * (hi[1] - lo[1]) +
                           (hi[2] - lo[2]) * (hi[2] - lo[2]));
  uint32_t *slot = malloc(sizeof(uint32_t) * (nv + 1)); /* file vertex -> index in keys */
  for (uint32_t i = 0; i < nk; i++) slot[keys[i].idx] = i;
  uint32_t *weld = malloc(sizeof(uint32_t) * (nv + 1)); /* file vertex -> welded id */
  uint32_t *rep_of_id = malloc(sizeof(uint32_t) * (nv + 1));
  int64_t *id_at = malloc(sizeof(int64_t) * (nk + 1)); /* keys slot -> welded id if representative */
  for (uint32_t i = 0; i < nk; i++) id_at[i] = -1;
  uint32_t nweld = 0;
  for (uint32_t v = 0; v < nv; v++) {
    if (!referenced[v]) continue;
    if (first[v] != v) {
      weld[v] = weld[first[v]];
      continue;
    }
    uint32_t s0 = slot[v];
    int64_t best = -1;
    double best_d = tol * tol;
    for (int dir = -1; dir <= 1; dir += 2) {
      for (int64_t j = (int64_t)s0 + dir; j >= 0 && j < (int64_t)nk; j += dir) {
        if (fabs((double)keys[j].p[0] - pos[3 * v]) > tol) break;
        if (id_at[j] < 0) continue;
        double d = 0;
        for (int k = 0; k < 3; k++) d += ((double)keys[j].p[k] - pos[3 * v + k]) * ((double)keys[j].p[k] - pos[3 * v + k]);
        if (d < best_d || (d == best_d && best >= 0 && id_at[j] < best) || (d <= best_d && best < 0)) {
          best = id_at[j];
          best_d = d;
        }
      }
    }
    if (best < 0) {
      best = nweld++;
      id_at[s0] = best;
      rep_of_id[best] = v;
    }
    weld[v] = (uint32_t)best;
  }

  uint32_t *parent = malloc(sizeof(uint32_t) * (nweld + 1));
  for (uint32_t i = 0; i < nweld; i++) parent[i] = i;
  size_t ecap = 1024, ne = 0;
  uint64_t *edges = malloc(sizeof(uint64_t) * ecap);
  for (size_t at = 0; at < flen;) {
    uint32_t k = faces[at];
    const uint32_t *fv = faces + at + 1;
    at += k + 1;
    if (k < 3) continue;
    out->triangles += k - 2;
    for (uint32_t c = 0; c < k; c++) {
      uint32_t a = find_root(parent, weld[fv[c]]), b = find_root(parent, weld[fv[(c + 1) % k]]);
      if (a != b) parent[a < b ? b : a] = a < b ? a : b;
    }
    if (k == 3) {
      uint32_t ids[3] = {weld[fv[0]], weld[fv[1]], weld[fv[2]]};
      if (ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2]) {
        out->degenerate_triangles++;
        continue; /* collapsed: no edges */
      }
      double p[3][3], l2max = 0;
      for (int c = 0; c < 3; c++)
        for (int d = 0; d < 3; d++) p[c][d] = pos[3 * rep_of_id[ids[c]] + d];
      for (int c = 0; c < 3; c++) {
        double l2 = 0;
        for (int d = 0; d < 3; d++) l2 += (p[(c + 1) % 3][d] - p[c][d]) * (p[(c + 1) % 3][d] - p[c][d]);
        if (l2 > l2max) l2max = l2;
      }
      if (2.0 * oracle_heron_area(p[0], p[1], p[2]) <= 1e-6 * l2max) out->degenerate_triangles++;
    }
    for (uint32_t c = 0; c < k; c++) {
      uint32_t a = weld[fv[c]], b = weld[fv[(c + 1) % k]];
      if (a == b) continue;
      if (ne == ecap) edges = realloc(edges, sizeof(uint64_t) * (ecap *= 2));
      edges[ne++] = ((uint64_t)(a < b ? a : b) << 32) | (a < b ? b : a);
    }
  }
  qsort(edges, ne, sizeof(uint64_t), cmp_u64);
  for (size_t i = 0; i < ne;) {
    size_t j = i;
    while (j < ne && edges[j] == edges[i]) j++;
    if (j - i == 1) out->boundary_edges++;
    if (j - i >= 3) out->nonmanifold_edges++;
    i = j;
  }
  out->topology_vertices = nweld;
  for (uint32_t i = 0; i < nweld; i++)
    if (find_root(parent, i) == i) out->components++;
  free(pos);
  free(faces);
  free(referenced);
  free(keys);
  free(first);
  free(slot);
  free(weld);
  free(rep_of_id);
  free(id_at);
  free(parent);
  free(edges);
}

/* ---- MD2 ------------------------------------------------------------------------------------ */

static int32_t le32(const unsigned char *b) {
  return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

static float lef(const unsigned char *b) {
  uint32_t u = (uint32_t)le32(b);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void oracle_md2_frames(const char *path, uint32_t *frame_count, uint32_t *point_count,
                       float **frames) {
  FILE *f = fopen(path, "rb");
  if (!f) test__fail(__FILE__, __LINE__, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  unsigned char *b = malloc((size_t)n);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) test__fail(__FILE__, __LINE__, "short read");
  fclose(f);
  /* Header: ident version skinw skinh framesize nskins nxyz nst ntris nglcmds nframes
   * ofs_skins ofs_st ofs_tris ofs_frames ofs_glcmds ofs_end (17 little-endian int32). */
  if (memcmp(b, "IDP2", 4) != 0) test__fail(__FILE__, __LINE__, "%s: not MD2", path);
  int32_t framesize = le32(b + 16), nxyz = le32(b + 24), ntris = le32(b + 32);
  int32_t nframes = le32(b + 40), ofs_tris = le32(b + 52), ofs_frames = le32(b + 56);
  uint8_t *referenced = calloc((size_t)nxyz, 1);
  for (int32_t t = 0; t < ntris; t++) /* triangle: 3 xyz indices (int16), 3 st indices */
    for (int c = 0; c < 3; c++) {
      int idx = b[ofs_tris + 12 * t + 2 * c] | b[ofs_tris + 12 * t + 2 * c + 1] << 8;
      if (idx < nxyz) referenced[idx] = 1;
    }
  uint32_t np = 0;
  for (int32_t i = 0; i < nxyz; i++) np += referenced[i];
  float *out = malloc(sizeof(float) * 3 * (size_t)np * (size_t)nframes);
  for (int32_t fr = 0; fr < nframes; fr++) {
    /* Frame: scale[3], translate[3], name[16], then nxyz × (x, y, z, normal index) bytes. */
    const unsigned char *fb = b + ofs_frames + (size_t)framesize * fr;
    uint32_t k = 0;
    for (int32_t i = 0; i < nxyz; i++) {
      if (!referenced[i]) continue;
      for (int d = 0; d < 3; d++)
        out[3 * ((size_t)fr * np + k) + d] = fb[40 + 4 * i + d] * lef(fb + 4 * d) + lef(fb + 12 + 4 * d);
      k++;
    }
  }
  *frame_count = (uint32_t)nframes;
  *point_count = np;
  *frames = out;
  free(referenced);
  free(b);
}

uint32_t oracle_md2_clips(const char *path, oracle_clip **clips) {
  FILE *f = fopen(path, "rb");
  if (!f) test__fail(__FILE__, __LINE__, "cannot open %s", path);
  unsigned char h[68];
  if (fread(h, 1, sizeof(h), f) != sizeof(h)) test__fail(__FILE__, __LINE__, "short read");
  int32_t framesize = le32(h + 16), nframes = le32(h + 40), ofs_frames = le32(h + 56);
  oracle_clip *out = calloc((size_t)nframes, sizeof(*out));
  uint32_t n = 0;
  for (int32_t fr = 0; fr < nframes; fr++) {
    char name[17] = {0};
    if (fseek(f, ofs_frames + (long)framesize * fr + 24, SEEK_SET) != 0 || fread(name, 1, 16, f) != 16)
      test__fail(__FILE__, __LINE__, "%s: frame %d is not in the file", path, fr);
    /* Cut at the last character that is not a digit. */
    int keep = -1;
    for (int i = 0; name[i]; i++)
      if (!isdigit((unsigned char)name[i])) keep = i;
    if (keep < 0) test__fail(__FILE__, __LINE__, "%s: frame %d has no usable name", path, fr);
    name[keep + 1] = '\0';
    if (n > 0 && strcmp(out[n - 1].name, name) == 0) {
      out[n - 1].count++;
    } else {
      memcpy(out[n].name, name, sizeof(name));
      out[n].first = (uint32_t)fr;
      out[n].count = 1;
      n++;
    }
  }
  fclose(f);
  *clips = out;
  return n;
}

/* ---- point sets ----------------------------------------------------------------------------- */

typedef struct pt3 {
  double p[3];
} pt3;

static int cmp_pt3_x(const void *a, const void *b) {
  double x = ((const pt3 *)a)->p[0], y = ((const pt3 *)b)->p[0];
  return (x > y) - (x < y);
}

static void permute(const float *p, uint32_t n, int perm, pt3 *out) {
  static const int axes[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const int *ax = axes[perm / 8];
  for (uint32_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) out[i].p[k] = ((perm >> k) & 1 ? -1.0 : 1.0) * p[3 * (size_t)i + ax[k]];
}

/* Whether every point of `a` has a point of `b` within tol (b sorted by x). */
static int covered(const pt3 *a, uint32_t na, const pt3 *b, uint32_t nb, double tol) {
  for (uint32_t i = 0; i < na; i++) {
    uint32_t lo = 0, hi = nb;
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo) / 2;
      if (b[mid].p[0] < a[i].p[0] - tol) lo = mid + 1;
      else hi = mid;
    }
    int hit = 0;
    for (uint32_t j = lo; j < nb && b[j].p[0] <= a[i].p[0] + tol && !hit; j++) {
      double d2 = 0;
      for (int k = 0; k < 3; k++) d2 += (a[i].p[k] - b[j].p[k]) * (a[i].p[k] - b[j].p[k]);
      hit = d2 <= tol * tol;
    }
    if (!hit) return 0;
  }
  return 1;
}

int oracle_same_point_set(const float *a, uint32_t na, const float *b, uint32_t nb, double tol,
                          int *perm) {
  pt3 *pa = malloc(sizeof(pt3) * (na + 1)), *pb = malloc(sizeof(pt3) * (nb + 1));
  pt3 *sa = malloc(sizeof(pt3) * (na + 1));
  permute(b, nb, 0, pb);
  qsort(pb, nb, sizeof(pt3), cmp_pt3_x);
  int found = 0;
  for (int p = (*perm >= 0 ? *perm : 0); p < (*perm >= 0 ? *perm + 1 : 48) && !found; p++) {
    permute(a, na, p, pa);
    memcpy(sa, pa, sizeof(pt3) * na);
    qsort(sa, na, sizeof(pt3), cmp_pt3_x);
    if (covered(pa, na, pb, nb, tol) && covered(pb, nb, sa, na, tol)) {
      *perm = p;
      found = 1;
    }
  }
  free(pa);
  free(pb);
  free(sa);
  return found;
}

double oracle_heron_area(const double *p, const double *q, const double *r) {
  double a = 0, b = 0, c = 0;
  for (int k = 0; k < 3; k++) {
    a += (q[k] - p[k]) * (q[k] - p[k]);
    b += (r[k] - q[k]) * (r[k] - q[k]);
    c += (p[k] - r[k]) * (p[k] - r[k]);
  }
  a = sqrt(a), b = sqrt(b), c = sqrt(c);
  /* Kahan's numerically stable form: sort a >= b >= c. */
  double t;
  if (a < b) t = a, a = b, b = t;
  if (b < c) t = b, b = c, c = t;
  if (a < b) t = a, a = b, b = t;
  double s = (a + (b + c)) * (c - (a - b)) * (c + (a - b)) * (a + (b - c));
  return s > 0 ? 0.25 * sqrt(s) : 0.0;
}

/* ---- analytic meshes ------------------------------------------------------------------------- */

static mesh *alloc_mesh(uint32_t nv, uint32_t nt, int uvs) {
  mesh *m = mesh_create();
  ASSERT(m != NULL);
  ASSERT_OK(mesh_alloc(m, nv, nt, 0, uvs), NULL);
  m->submeshes = calloc(1, sizeof(mesh_submesh));
  m->submeshes[0].name = calloc(1, 1);
  m->submeshes[0].triangle_count = nt;
  m->submeshes[0].vertex_count = nv;
  m->submesh_count = 1;
  return m;
}

mesh *oracle_grid(uint32_t n, double h) {
  uint32_t side = n + 1;
  mesh *m = alloc_mesh(side * side, 2 * n * n, 0);
  for (uint32_t j = 0; j < side; j++)
    for (uint32_t i = 0; i < side; i++) {
      float *p = m->positions + 3 * (j * side + i);
      p[0] = (float)(i * h), p[1] = (float)(j * h), p[2] = 0.0f;
    }
  uint32_t *t = m->triangles;
  for (uint32_t j = 0; j < n; j++)
    for (uint32_t i = 0; i < n; i++) {
      uint32_t a = j * side + i, b = a + 1, c = a + side + 1, d = a + side;
      *t++ = a, *t++ = b, *t++ = c;
      *t++ = a, *t++ = c, *t++ = d;
    }
  mesh_update_bounds(m);
  return m;
}

mesh *oracle_equilateral_grid(uint32_t n, double h) {
  uint32_t side = n + 1;
  mesh *m = alloc_mesh(side * side, 2 * n * n, 0);
  for (uint32_t j = 0; j < side; j++)
    for (uint32_t i = 0; i < side; i++) {
      float *p = m->positions + 3 * (j * side + i);
      /* Rows shifted by half a step: every triangle equilateral. */
      p[0] = (float)((i + 0.5 * j) * h), p[1] = (float)(j * h * sqrt(3.0) / 2.0), p[2] = 0.0f;
    }
  uint32_t *t = m->triangles;
  for (uint32_t j = 0; j < n; j++)
    for (uint32_t i = 0; i < n; i++) {
      uint32_t a = j * side + i, b = a + 1, c = a + side + 1, d = a + side;
      *t++ = a, *t++ = b, *t++ = d;
      *t++ = b, *t++ = c, *t++ = d;
    }
  mesh_update_bounds(m);
  return m;
}

mesh *oracle_icosphere(uint32_t levels, double r) {
  const double phi = (1.0 + sqrt(5.0)) / 2.0;
  double base[12][3] = {{-1, phi, 0}, {1, phi, 0},  {-1, -phi, 0}, {1, -phi, 0},
                        {0, -1, phi}, {0, 1, phi},  {0, -1, -phi}, {0, 1, -phi},
                        {phi, 0, -1}, {phi, 0, 1},  {-phi, 0, -1}, {-phi, 0, 1}};
  uint32_t faces[20][3] = {{0, 11, 5}, {0, 5, 1},  {0, 1, 7},   {0, 7, 10}, {0, 10, 11},
                           {1, 5, 9},  {5, 11, 4}, {11, 10, 2}, {10, 7, 6}, {7, 1, 8},
                           {3, 9, 4},  {3, 4, 2},  {3, 2, 6},   {3, 6, 8},  {3, 8, 9},
                           {4, 9, 5},  {2, 4, 11}, {6, 2, 10},  {8, 6, 7},  {9, 8, 1}};
  uint32_t nv = 12, nt = 20;
  uint32_t maxv = 10 * (1u << (2 * levels)) + 2, maxt = 20 * (1u << (2 * levels));
  double *v = malloc(sizeof(double) * 3 * maxv);
  uint32_t *t = malloc(sizeof(uint32_t) * 3 * maxt);
  memcpy(v, base, sizeof(base));
  memcpy(t, faces, sizeof(faces));
  for (uint32_t l = 0; l < levels; l++) {
    /* Midpoints keyed by their (sorted) edge, found by sorting all edges once. */
    uint64_t *keys = malloc(sizeof(uint64_t) * 3 * nt);
    for (uint32_t f = 0; f < nt; f++)
      for (int c = 0; c < 3; c++) {
        uint32_t a = t[3 * f + c], b = t[3 * f + (c + 1) % 3];
        keys[3 * f + c] = ((uint64_t)(a < b ? a : b) << 32) | (a < b ? b : a);
      }
    uint64_t *sorted = malloc(sizeof(uint64_t) * 3 * nt);
    memcpy(sorted, keys, sizeof(uint64_t) * 3 * nt);
    qsort(sorted, 3 * nt, sizeof(uint64_t), cmp_u64);
    uint32_t ne = 0;
    for (uint32_t i = 0; i < 3 * nt; i++)
      if (i == 0 || sorted[i] != sorted[i - 1]) sorted[ne++] = sorted[i];
    for (uint32_t e = 0; e < ne; e++) {
      uint32_t a = (uint32_t)(sorted[e] >> 32), b = (uint32_t)sorted[e];
      for (int k = 0; k < 3; k++) v[3 * (nv + e) + k] = 0.5 * (v[3 * a + k] + v[3 * b + k]);
    }
    uint32_t *nt2 = malloc(sizeof(uint32_t) * 12 * nt);
    for (uint32_t f = 0; f < nt; f++) {
      uint32_t mid[3];
      for (int c = 0; c < 3; c++) {
        uint64_t *hit = bsearch(&keys[3 * f + c], sorted, ne, sizeof(uint64_t), cmp_u64);
        mid[c] = nv + (uint32_t)(hit - sorted);
      }
      uint32_t a = t[3 * f], b = t[3 * f + 1], c = t[3 * f + 2];
      uint32_t q[12] = {a, mid[0], mid[2], b, mid[1], mid[0], c, mid[2], mid[1], mid[0], mid[1], mid[2]};
      memcpy(nt2 + 12 * f, q, sizeof(q));
    }
    nv += ne;
    nt *= 4;
    memcpy(t, nt2, sizeof(uint32_t) * 3 * nt);
    free(nt2);
    free(keys);
    free(sorted);
  }
  mesh *m = alloc_mesh(nv, nt, 0);
  for (uint32_t i = 0; i < nv; i++) {
    double len = sqrt(v[3 * i] * v[3 * i] + v[3 * i + 1] * v[3 * i + 1] + v[3 * i + 2] * v[3 * i + 2]);
    for (int k = 0; k < 3; k++) m->positions[3 * i + k] = (float)(r * v[3 * i + k] / len);
  }
  memcpy(m->triangles, t, sizeof(uint32_t) * 3 * nt);
  free(v);
  free(t);
  mesh_update_bounds(m);
  return m;
}

mesh *oracle_uv_sphere(uint32_t rings, uint32_t segments, double r) {
  /* Rows 1..rings-1 have segments+1 vertices (the last duplicates the first with u = 1), plus
   * one vertex per pole. */
  uint32_t row = segments + 1;
  uint32_t nv = (rings - 1) * row + 2;
  uint32_t nt = 2 * segments * (rings - 1);
  mesh *m = alloc_mesh(nv, nt, 1);
  const double pi = 3.14159265358979323846;
  for (uint32_t j = 1; j < rings; j++)
    for (uint32_t i = 0; i <= segments; i++) {
      double th = pi * j / rings, ph = 2.0 * pi * (i % segments) / segments;
      uint32_t v = (j - 1) * row + i;
      m->positions[3 * v] = (float)(r * sin(th) * cos(ph));
      m->positions[3 * v + 1] = (float)(r * cos(th));
      m->positions[3 * v + 2] = (float)(-r * sin(th) * sin(ph));
      m->uvs[2 * v] = (float)i / (float)segments;
      m->uvs[2 * v + 1] = (float)j / (float)rings;
    }
  uint32_t north = nv - 2, south = nv - 1;
  m->positions[3 * north + 1] = (float)r;
  m->positions[3 * south + 1] = (float)-r;
  m->uvs[2 * north] = 0.5f, m->uvs[2 * south] = 0.5f, m->uvs[2 * south + 1] = 1.0f;
  uint32_t *t = m->triangles;
  for (uint32_t i = 0; i < segments; i++) {
    *t++ = north, *t++ = i, *t++ = i + 1;
    uint32_t last = (rings - 2) * row;
    *t++ = south, *t++ = last + i + 1, *t++ = last + i;
  }
  for (uint32_t j = 1; j + 1 < rings; j++)
    for (uint32_t i = 0; i < segments; i++) {
      uint32_t a = (j - 1) * row + i, b = a + 1, c = a + row + 1, d = a + row;
      *t++ = a, *t++ = d, *t++ = c;
      *t++ = a, *t++ = c, *t++ = b;
    }
  mesh_update_bounds(m);
  return m;
}

/* ---- dihedral angles -------------------------------------------------------------------------- */

typedef struct edge_ref {
  uint32_t a, b; /* a < b */
  uint32_t tri;
  int8_t forward; /* the triangle runs a -> b (1) or b -> a (0) */
} edge_ref;

static int cmp_edge_ref(const void *x, const void *y) {
  const edge_ref *p = x, *q = y;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  if (p->b != q->b) return p->b < q->b ? -1 : 1;
  return (p->tri > q->tri) - (p->tri < q->tri);
}

/* Unit normal of triangle t; 0 when its area is zero. */
static int tri_normal(const uint32_t *tris, uint32_t t, const double *p, double n[3]) {
  const double *a = p + 3 * (size_t)tris[3 * t], *b = p + 3 * (size_t)tris[3 * t + 1], *c = p + 3 * (size_t)tris[3 * t + 2];
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  n[0] = u[1] * v[2] - u[2] * v[1], n[1] = u[2] * v[0] - u[0] * v[2], n[2] = u[0] * v[1] - u[1] * v[0];
  double len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  if (!(len > 0) || !isfinite(len)) return 0;
  n[0] /= len, n[1] /= len, n[2] /= len;
  return 1;
}

/* The signed angle (degrees) between the normals of the triangles on either side of edge a-b:
 * t1 runs a -> b. Positive when the surface turns away from its normals across the edge
 * (convex). NAN when either triangle has no area. */
static double signed_dihedral(const uint32_t *tris, uint32_t t1, uint32_t t2, uint32_t a, uint32_t b, const double *p) {
  double n1[3], n2[3];
  if (!tri_normal(tris, t1, p, n1) || !tri_normal(tris, t2, p, n2)) return NAN;
  double e[3] = {p[3 * (size_t)b] - p[3 * (size_t)a], p[3 * (size_t)b + 1] - p[3 * (size_t)a + 1],
                 p[3 * (size_t)b + 2] - p[3 * (size_t)a + 2]};
  double el = sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
  double cr[3] = {n1[1] * n2[2] - n1[2] * n2[1], n1[2] * n2[0] - n1[0] * n2[2], n1[0] * n2[1] - n1[1] * n2[0]};
  double sinv = (cr[0] * e[0] + cr[1] * e[1] + cr[2] * e[2]) / el;
  double cosv = n1[0] * n2[0] + n1[1] * n2[1] + n1[2] * n2[2];
  return atan2(sinv, cosv) * 180.0 / M_PI;
}

/* The smallest corner angle of triangle t, in degrees (law of cosines on the side lengths). */
static double min_corner_angle(const uint32_t *tris, uint32_t t, const double *p) {
  double len[3];
  for (int c = 0; c < 3; c++) {
    const double *a = p + 3 * (size_t)tris[3 * t + c], *b = p + 3 * (size_t)tris[3 * t + (c + 1) % 3];
    len[c] = sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
  }
  double best = 180.0;
  for (int c = 0; c < 3; c++) {
    double x = len[c], y = len[(c + 1) % 3], z = len[(c + 2) % 3]; /* the angle opposite z */
    if (!(x > 0 && y > 0)) return 0.0;
    double cosv = (x * x + y * y - z * z) / (2 * x * y);
    cosv = cosv > 1 ? 1 : cosv < -1 ? -1 : cosv;
    double a = acos(cosv) * 180.0 / M_PI;
    if (a < best) best = a;
  }
  return best;
}

void oracle_dihedral_change(const uint32_t *triangles, uint32_t triangle_count, const double *rest,
                            const double *now, double threshold_deg, double min_angle_deg, oracle_crease *out) {
  memset(out, 0, sizeof(*out));
  size_t ne = 3 * (size_t)triangle_count;
  edge_ref *e = malloc(sizeof(edge_ref) * (ne + 1));
  ASSERT(e);
  for (uint32_t t = 0; t < triangle_count; t++)
    for (int c = 0; c < 3; c++) {
      uint32_t u = triangles[3 * t + c], v = triangles[3 * t + (c + 1) % 3];
      edge_ref *r = &e[3 * (size_t)t + c];
      r->a = u < v ? u : v, r->b = u < v ? v : u, r->tri = t, r->forward = u < v;
    }
  qsort(e, ne, sizeof(edge_ref), cmp_edge_ref);
  for (size_t i = 0; i < ne;) {
    size_t j = i;
    while (j < ne && e[j].a == e[i].a && e[j].b == e[i].b) j++;
    if (j - i == 2 && e[i].a != e[i].b && (min_angle_deg <= 0 || (min_corner_angle(triangles, e[i].tri, rest) >= min_angle_deg &&
                                                                   min_corner_angle(triangles, e[i + 1].tri, rest) >= min_angle_deg))) {
      /* Orient the edge along the first triangle's winding. */
      uint32_t a = e[i].forward ? e[i].a : e[i].b, b = e[i].forward ? e[i].b : e[i].a;
      double d0 = signed_dihedral(triangles, e[i].tri, e[i + 1].tri, a, b, rest);
      double d1 = signed_dihedral(triangles, e[i].tri, e[i + 1].tri, a, b, now);
      if (isfinite(d0) && isfinite(d1)) {
        double d = fabs(d1 - d0);
        if (d > 180.0) d = 360.0 - d;
        out->edges++;
        if (d > threshold_deg) out->over++;
        if (d > out->max_deg) out->max_deg = d, out->worst_edge[0] = e[i].a, out->worst_edge[1] = e[i].b;
      }
    }
    i = j;
  }
  free(e);
}

/* ---- an MD3 writer ---------------------------------------------------------------------------- */

static void md3_put32(unsigned char *b, size_t *at, uint32_t v) {
  for (int i = 0; i < 4; i++) b[(*at)++] = (unsigned char)(v >> (8 * i));
}
static void md3_putf(unsigned char *b, size_t *at, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  md3_put32(b, at, u);
}
static void md3_putname(unsigned char *b, size_t *at, const char *s, size_t n) {
  memset(b + *at, 0, n);
  memcpy(b + *at, s, strlen(s) < n ? strlen(s) : n);
  *at += n;
}

/* A tetrahedron moved along x by frame. Returns the file size. */
size_t oracle_write_md3(unsigned char *b, const char *const *names, uint32_t nframes) {
  static const int16_t tet[4][3] = {{0, 0, 0}, {256, 0, 0}, {0, 320, 0}, {0, 0, 384}};
  static const uint32_t tris[4][3] = {{0, 2, 1}, {0, 1, 3}, {0, 3, 2}, {1, 2, 3}};
  const uint32_t hdr = 108, frame_sz = 56, nv = 4, nt = 4;
  size_t at = 0;
  memcpy(b, "IDP3", 4);
  at = 4;
  md3_put32(b, &at, 15);
  md3_putname(b, &at, "model", 64);
  md3_put32(b, &at, 0);
  md3_put32(b, &at, nframes);
  md3_put32(b, &at, 0); /* tags */
  md3_put32(b, &at, 1); /* surfaces */
  md3_put32(b, &at, 0); /* skins */
  md3_put32(b, &at, hdr);
  md3_put32(b, &at, hdr + frame_sz * nframes);
  md3_put32(b, &at, hdr + frame_sz * nframes);
  size_t eof_at = at;
  md3_put32(b, &at, 0);
  for (uint32_t f = 0; f < nframes; f++) {
    for (int k = 0; k < 6; k++) md3_putf(b, &at, k < 3 ? -20.0f : 20.0f);
    for (int k = 0; k < 3; k++) md3_putf(b, &at, 0.0f);
    md3_putf(b, &at, 40.0f);
    md3_putname(b, &at, names[f], 16);
  }
  uint32_t ofs_shader = 108, ofs_tri = ofs_shader + 68, ofs_st = ofs_tri + 12 * nt,
           ofs_xyz = ofs_st + 8 * nv, ofs_end = ofs_xyz + 8 * nv * nframes;
  memcpy(b + at, "IDP3", 4);
  at += 4;
  md3_putname(b, &at, "body", 64);
  md3_put32(b, &at, 0);
  md3_put32(b, &at, nframes);
  md3_put32(b, &at, 1);
  md3_put32(b, &at, nv);
  md3_put32(b, &at, nt);
  md3_put32(b, &at, ofs_tri);
  md3_put32(b, &at, ofs_shader);
  md3_put32(b, &at, ofs_st);
  md3_put32(b, &at, ofs_xyz);
  md3_put32(b, &at, ofs_end);
  md3_putname(b, &at, "skin", 64);
  md3_put32(b, &at, 0);
  for (uint32_t t = 0; t < nt; t++)
    for (int c = 0; c < 3; c++) md3_put32(b, &at, tris[t][c]);
  for (uint32_t v = 0; v < nv; v++) {
    md3_putf(b, &at, 0.25f * (float)v);
    md3_putf(b, &at, 0.5f);
  }
  for (uint32_t f = 0; f < nframes; f++)
    for (uint32_t v = 0; v < nv; v++) {
      for (int k = 0; k < 3; k++) {
        int16_t x = (int16_t)(tet[v][k] + (k == 0 ? 32 * (int)f : 0));
        b[at++] = (unsigned char)((uint16_t)x & 0xff);
        b[at++] = (unsigned char)((uint16_t)x >> 8);
      }
      b[at++] = 0;
      b[at++] = 0;
    }
  size_t end = at;
  at = eof_at;
  md3_put32(b, &at, (uint32_t)end);
  return end;
}

int oracle_has_run_of(const char *s, const uint8_t *data, size_t n, size_t k) {
  size_t ls = strlen(s);
  for (size_t i = 0; i + k <= ls; i++)
    for (size_t j = 0; j + k <= n; j++)
      if (memcmp(s + i, data + j, k) == 0) return 1;
  return 0;
}
