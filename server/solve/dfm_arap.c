/*
 * dfm_arap.c — the as-rigid-as-possible half of a system (spokes-and-rims energy, Chao et al.
 * 2010; the equations are in dfm_system.c's banner). Built once per gesture: the active
 * triangles (those with a free corner) and their weights, the vertices that need a rotation, and
 * each vertex's star (arap_star, dfm_internal.h). Run at every iteration: the local step (one
 * rotation fitted per vertex, four at a time) and the rotations' part of the global step's
 * right-hand side. Also the energy, which tests check never increases.
 *
 * DOES NOT assemble, factorise or solve (dfm_system.c), or fit a rotation itself
 * (dfm_rotation.c). The tables are built beside the factorisation, on another of dfm_pool's
 * threads: they write only the system's ARAP fields.
 */
#include <stdlib.h>
#include <string.h>

#include "dfm_internal.h"

/* The rest edge opposite corner c of triangle tv. */
static inline void rest_edge(const double *rest, const uint32_t *tv, int c, double e[3]) {
  const double *p1 = rest + 3 * (size_t)tv[(c + 1) % 3], *p2 = rest + 3 * (size_t)tv[(c + 2) % 3];
  for (int k = 0; k < 3; k++) e[k] = p2[k] - p1[k];
}

/* Per-triangle contributions regrouped per vertex (see arap_star). For the local step, the
 * triangle's edge (a, b) opposite corner c adds c (p_b - p_a) e_cᵀ to the covariance of each of
 * its three corners' rotations: +c e_c to k_{r,b} and -c e_c to k_{r,a}. For the right-hand side
 * of free vertex j, the triangle adds ⅓ g_{t,j} to h_{j,u} for each of its corners u. */
/* Where u sits in v's star: 0 for v itself, 1 + its place among v's neighbours. */
static uint32_t star_slot(const mesh_adjacency *adj, uint32_t v, uint32_t u) {
  return u == v ? 0 : 1 + (uint32_t)(mesh_adjacency_edge(adj, v, u) - adj->vv_offsets[v]);
}

typedef struct local_stars_job {
  dfm_system *s;
  const mesh_adjacency *adj;
  const uint32_t *vt_off, *vt;
} local_stars_job;

static void local_stars_range(void *ctx, size_t lo, size_t hi) {
  const local_stars_job *job = ctx;
  dfm_system *s = job->s;
  const mesh_adjacency *adj = job->adj;
  const uint32_t *vt_off = job->vt_off, *vt = job->vt;
  const arap_tris *a = &s->tri;
  for (uint32_t r = (uint32_t)lo; r < (uint32_t)hi; r++) {
    uint32_t v = s->rot_vertex[r], base = s->local.off[r];
    s->local.idx[base] = v;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++)
      s->local.idx[base + 1 + e - adj->vv_offsets[v]] = adj->vv[e];
    for (uint32_t e = vt_off[v]; e < vt_off[v + 1]; e++) {
      uint32_t t = vt[e];
      const uint32_t *tv = a->v + 3 * (size_t)t;
      /* Each corner's place in the star, looked up once (each is an end of two edges). */
      uint32_t slot[3] = {star_slot(adj, v, tv[0]), star_slot(adj, v, tv[1]), star_slot(adj, v, tv[2])};
      for (int c = 0; c < 3; c++) {
        double w = a->c[3 * (size_t)t + c], ec[3];
        rest_edge(s->rest, tv, c, ec);
        double *ka = s->local.vec + 3 * ((size_t)base + slot[(c + 1) % 3]);
        double *kb = s->local.vec + 3 * ((size_t)base + slot[(c + 2) % 3]);
        for (int d = 0; d < 3; d++) ka[d] -= w * ec[d], kb[d] += w * ec[d];
      }
    }
  }
}

typedef struct global_stars_job {
  dfm_system *s;
  const mesh_adjacency *adj;
  const uint32_t *vt_off, *vt;
} global_stars_job;

static void global_stars_range(void *ctx, size_t lo, size_t hi) {
  const global_stars_job *job = ctx;
  dfm_system *s = job->s;
  const mesh_adjacency *adj = job->adj;
  const uint32_t *vt_off = job->vt_off, *vt = job->vt;
  const arap_tris *a = &s->tri;
  for (uint32_t k = (uint32_t)lo; k < (uint32_t)hi; k++) {
    uint32_t v = s->free_vertex[k], base = s->global.off[k];
    s->global.idx[base] = (uint32_t)s->rot_slot[v];
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
      int32_t slot = s->rot_slot[adj->vv[e]];
      s->global.idx[base + 1 + e - adj->vv_offsets[v]] = (uint32_t)(slot >= 0 ? slot : s->rot_slot[v]);
    }
    for (uint32_t e = vt_off[v]; e < vt_off[v + 1]; e++) {
      uint32_t t = vt[e];
      const uint32_t *tv = a->v + 3 * (size_t)t;
      int j = tv[0] == v ? 0 : tv[1] == v ? 1 : 2;
      /* g_j = Σ_{k ≠ j} c_jk (p_j - p_k); the edge (j, k) is opposite the third corner. */
      const double *tc = a->c + 3 * (size_t)t, *pj = s->rest + 3 * (size_t)v;
      const double *pk1 = s->rest + 3 * (size_t)tv[(j + 1) % 3], *pk2 = s->rest + 3 * (size_t)tv[(j + 2) % 3];
      double gj[3];
      for (int d = 0; d < 3; d++) gj[d] = tc[(j + 2) % 3] * (pj[d] - pk1[d]) + tc[(j + 1) % 3] * (pj[d] - pk2[d]);
      for (int c = 0; c < 3; c++) {
        double *h = s->global.vec + 3 * ((size_t)base + star_slot(adj, v, tv[c]));
        for (int d = 0; d < 3; d++) h[d] += gj[d] * (1.0 / 3.0);
      }
    }
  }
}

static int build_stars(dfm_system *s, const mesh_adjacency *adj) {
  const arap_tris *a = &s->tri;
  uint32_t *vt_off = calloc((size_t)s->n + 2, sizeof(uint32_t));
  uint32_t *vt = malloc(sizeof(uint32_t) * 3 * ((size_t)s->ntris + 1));
  s->local.off = calloc((size_t)s->nrot_fit + 1, sizeof(uint32_t));
  s->global.off = calloc((size_t)s->nf + 1, sizeof(uint32_t));
  if (!vt_off || !vt || !s->local.off || !s->global.off) {
    free(vt_off);
    free(vt);
    return DFM_ENOMEM;
  }
  /* Active triangles around each vertex (CSR by vertex). */
  for (uint32_t t = 0; t < 3 * s->ntris; t++) vt_off[a->v[t] + 2]++;
  for (uint32_t v = 0; v < s->n; v++) vt_off[v + 2] += vt_off[v + 1];
  for (uint32_t t = 0; t < s->ntris; t++)
    for (int c = 0; c < 3; c++) vt[vt_off[a->v[3 * (size_t)t + c] + 1]++] = t;
  /* A star is the vertex and all its neighbours, in adjacency order; a neighbour that shares no
   * active triangle with it keeps a zero vector. */
  for (uint32_t r = 0; r < s->nrot_fit; r++) {
    uint32_t v = s->rot_vertex[r];
    s->local.off[r + 1] = s->local.off[r] + 1 + adj->vv_offsets[v + 1] - adj->vv_offsets[v];
  }
  for (uint32_t k = 0; k < s->nf; k++) {
    uint32_t v = s->free_vertex[k];
    s->global.off[k + 1] = s->global.off[k] + 1 + adj->vv_offsets[v + 1] - adj->vv_offsets[v];
  }
  size_t nl = s->local.off[s->nrot_fit], ng = s->global.off[s->nf];
  s->local.idx = malloc(sizeof(uint32_t) * (nl + 1));
  s->local.vec = calloc(3 * (nl + 1), sizeof(double));
  s->global.idx = malloc(sizeof(uint32_t) * (ng + 1));
  s->global.vec = calloc(3 * (ng + 1), sizeof(double));
  if (!s->local.idx || !s->local.vec || !s->global.idx || !s->global.vec) {
    free(vt_off);
    free(vt);
    return DFM_ENOMEM;
  }
  /* Local: the edge (a, b) opposite corner c adds -c e_c to k_{r,a} and +c e_c to k_{r,b}. */
  local_stars_job ljob = {s, adj, vt_off, vt};
  dfm_parallel_for(s->nrot_fit, dfm__grain(s->nrot_fit), local_stars_range, &ljob);
  /* Global: the triangle adds ⅓ g_{t,j} to h_{j,u} for each of its corners u. Every triangle
   * around a free vertex is active, so all its neighbours have rotations. */
  global_stars_job gjob = {s, adj, vt_off, vt};
  dfm_parallel_for(s->nf, dfm__grain(s->nf), global_stars_range, &gjob);
  free(vt_off);
  free(vt);
  return 0;
}

/* Active triangles (a free corner), the vertices needing rotations, and both adjacencies. */
int dfm__arap_prepare(dfm_system *s, const mesh_topology *topo, const mesh_adjacency *adj, double floor) {
  uint32_t n = s->n;
  uint32_t *list = malloc(sizeof(uint32_t) * ((size_t)adj->vt_offsets[n] + 1));
  uint8_t *mark = calloc((size_t)topo->triangle_count + 1, 1);
  if (!list || !mark) {
    free(list);
    free(mark);
    return DFM_ENOMEM;
  }
  uint32_t count = 0;
  for (uint32_t k = 0; k < s->nf; k++) {
    uint32_t v = s->free_vertex[k];
    for (uint32_t e = adj->vt_offsets[v]; e < adj->vt_offsets[v + 1]; e++)
      if (!mark[adj->vt[e]]) mark[adj->vt[e]] = 1, list[count++] = adj->vt[e];
  }
  free(mark);
  arap_tris *a = &s->tri;
  a->v = malloc(sizeof(uint32_t) * 3 * ((size_t)count + 1));
  a->c = malloc(sizeof(double) * 3 * ((size_t)count + 1));
  s->rot_slot = malloc(sizeof(int32_t) * (n + 1));
  s->rot_vertex = malloc(sizeof(uint32_t) * (n + 1));
  if (!a->v || !a->c || !s->rot_slot || !s->rot_vertex) {
    free(list);
    return DFM_ENOMEM;
  }
  memset(s->rot_slot, 0xff, sizeof(int32_t) * n);
  /* With a smooth border the free vertices' rotations come first: only those are fitted, and
   * the constrained vertices' rotations after them are prescribed by the drag. (Plain ARAP
   * numbers them as its triangles meet them, which keeps a star's rotations close in memory.) */
  for (uint32_t k = 0; k < s->nf && s->p.smooth_border; k++) {
    s->rot_slot[s->free_vertex[k]] = (int32_t)s->nrot;
    s->rot_vertex[s->nrot++] = s->free_vertex[k];
  }
  for (uint32_t i = 0; i < count; i++) {
    const uint32_t *t = topo->triangles + 3 * (size_t)list[i];
    uint32_t ti = s->ntris++;
    uint32_t *tv = a->v + 3 * (size_t)ti;
    double *tc = a->c + 3 * (size_t)ti;
    double cot[3];
    if (s->p.uniform) cot[0] = cot[1] = cot[2] = 1.0;
    else if (s->tri_cot) memcpy(cot, s->tri_cot + 3 * (size_t)list[i], sizeof(cot)); /* the weights' */
    else mesh_triangle_cotangents(s->rest, t, MESH_COTAN_CLAMPED, cot);
    for (int c = 0; c < 3; c++) {
      tv[c] = t[c];
      tc[c] = 0.5 * cot[c] < 0.5 * floor ? 0.5 * floor : 0.5 * cot[c];
      if (s->rot_slot[t[c]] < 0) {
        s->rot_slot[t[c]] = (int32_t)s->nrot;
        s->rot_vertex[s->nrot++] = t[c];
      }
    }
  }
  free(list);
  s->nrot_fit = s->p.smooth_border ? s->nf : s->nrot;
  int rc = build_stars(s, adj);
  if (rc) return rc;
  s->R = malloc(sizeof(double) * 9 * ((size_t)s->nrot + 1));
  if (!s->R) return DFM_ENOMEM;
  memset(s->R + 9 * (size_t)s->nrot, 0, sizeof(double) * 9); /* the stars' sums read into it */
  if (s->p.smooth_border) {
    /* The rotation term's scale: an edge's squared length, so that bend is a pure number. */
    double l2 = 0;
    for (uint32_t t = 0; t < s->ntris; t++)
      for (int c = 0; c < 3; c++) {
        double e[3];
        rest_edge(s->rest, s->tri.v + 3 * (size_t)t, c, e);
        l2 += e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
      }
    s->bend = s->ntris ? DFM_ARAP_BEND * l2 / (3.0 * s->ntris) : 0;
    /* The neighbours' rotations summed, per fitted slot (= free column): at first all are
     * the identity, so each sum is its degree times it. */
    s->Rsum = calloc(9 * ((size_t)s->nf + 1), sizeof(double));
    if (!s->Rsum) return DFM_ENOMEM;
    for (uint32_t k = 0; k < s->nf; k++) {
      double deg = (double)(s->global.off[k + 1] - s->global.off[k] - 1);
      s->Rsum[9 * (size_t)k] = s->Rsum[9 * (size_t)k + 4] = s->Rsum[9 * (size_t)k + 8] = deg;
    }
  }
  for (uint32_t r = 0; r < s->nrot; r++) {
    static const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    memcpy(s->R + 9 * (size_t)r, id, sizeof(id));
  }
  return 0;
}

typedef struct local_job {
  dfm_system *s;
  const double *p;
} local_job;

/* The stars' sums below run three lanes of a four-double vector at a time: a star's vector k (or
 * h) and a rotation's row are read four doubles at a time, and the fourth lane, which reads the
 * next entry's first value (the tables and R end with a zeroed entry of padding), is never
 * used. */
typedef double arap_v4 __attribute__((vector_size(32)));
#define ARAP_LOAD4(dst, src) memcpy(&(dst), (src), sizeof(arap_v4))
/* The stars' sums read positions (the covariance) or rotations (the right-hand side) at random:
 * each asks for the one this many entries ahead. (For the rotations that gained nothing on a Zen
 * 4 host; on a Zen 5 host the right-hand side took 0.925-0.950 of the time without.) */
#define STAR_AHEAD 16

/* GCC builds an AVX2 clone beside the default (as dfm_rotation.c's dfm_fit_rotation4, which
 * says why clang builds keep the default only). */
#if defined(__clang__)
#define ARAP_CLONES
#else
#define ARAP_CLONES __attribute__((target_clones("avx2", "default")))
#endif

ARAP_CLONES static void local_range(void *ctx, size_t lo, size_t hi) {
  const local_job *job = ctx;
  dfm_system *s = job->s;
  const double *p = job->p;
  const arap_star *st = &s->local;
  uint32_t end = st->off[hi];
  /* Four rotations at a time through dfm_fit_rotation4, the rest one by one. */
  for (uint32_t r = (uint32_t)lo; r < (uint32_t)hi; r += 4) {
    uint32_t lanes = hi - r < 4 ? (uint32_t)(hi - r) : 4;
    double M[36], *R[4];
    for (uint32_t l = 0; l < lanes; l++) {
      /* M = Σ x kᵀ, a row of M per coordinate of x: the same products summed in the same order
       * as nine scalar sums. */
      arap_v4 m0 = {0, 0, 0, 0}, m1 = m0, m2 = m0;
      for (uint32_t e = st->off[r + l]; e < st->off[r + l + 1]; e++) {
        if (e + STAR_AHEAD < end) __builtin_prefetch(p + 3 * (size_t)st->idx[e + STAR_AHEAD], 0, 3);
        const double *x = p + 3 * (size_t)st->idx[e];
        arap_v4 k;
        ARAP_LOAD4(k, st->vec + 3 * (size_t)e);
        m0 += x[0] * k, m1 += x[1] * k, m2 += x[2] * k;
      }
      double *m = M + 9 * l;
      for (int c = 0; c < 3; c++) m[c] = m0[c], m[3 + c] = m1[c], m[6 + c] = m2[c];
      if (s->bend > 0) {
        /* Smooth rotations: + bend · Σ_j R_j over the neighbours, as the last right-hand side
         * pass summed them (slot r is free column r with a smooth border). */
        const double *S = s->Rsum + 9 * (size_t)(r + l), b = s->bend;
        for (int i = 0; i < 9; i++) m[i] += b * S[i];
      }
      R[l] = s->R + 9 * (size_t)(r + l);
    }
    if (lanes == 4) {
      dfm_fit_rotation4(M, R);
    } else {
      for (uint32_t l = 0; l < lanes; l++) dfm_fit_rotation(M + 9 * l, R[l]);
    }
  }
}

/* Local step: one rotation per vertex of an active triangle (per free vertex with a smooth
 * border), fitted to the current shape. */
void dfm__arap_local_step(dfm_system *s, const double *p) {
  local_job job = {s, p};
  dfm_parallel_for(s->nrot_fit, dfm__grain(s->nrot_fit), local_range, &job);
}

typedef struct rotation_rhs_job {
  dfm_system *s;
  const double *p, *soft_target;
} rotation_rhs_job;

ARAP_CLONES static void rotation_rhs_range(void *ctx, size_t lo, size_t hi) {
  const rotation_rhs_job *job = ctx;
  dfm_system *s = job->s;
  const arap_star *st = &s->global;
  uint32_t end = st->off[hi];
  /* b_k = Σ_e R_e h_e: row i of R times h, summed lane by lane over the star, the lanes added
   * at the end. With a smooth border the same pass sums the neighbours' rotations, already
   * loaded, for the next local step's smoothness term (the star's first entry is the vertex
   * itself). */
  for (uint32_t k = (uint32_t)lo; k < (uint32_t)hi; k++) {
    arap_v4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, s0 = a0, s1 = a0, s2 = a0;
    for (uint32_t e = st->off[k]; e < st->off[k + 1]; e++) {
      if (e + STAR_AHEAD < end) { /* both cache lines of a rotation (72 bytes at a multiple of 8) */
        const double *ahead = s->R + 9 * (size_t)st->idx[e + STAR_AHEAD];
        __builtin_prefetch(ahead, 0, 3), __builtin_prefetch(ahead + 8, 0, 3);
      }
      const double *R = s->R + 9 * (size_t)st->idx[e];
      arap_v4 h, r0, r1, r2;
      ARAP_LOAD4(h, st->vec + 3 * (size_t)e);
      ARAP_LOAD4(r0, R), ARAP_LOAD4(r1, R + 3), ARAP_LOAD4(r2, R + 6);
      a0 += r0 * h, a1 += r1 * h, a2 += r2 * h;
      if (s->Rsum && e > st->off[k]) s0 += r0, s1 += r1, s2 += r2;
    }
    double kn[3];
    dfm__known_rhs_row(s, job->p, job->soft_target, k, kn);
    s->rhs[k] = (dfm_v4){kn[0] + (a0[0] + a0[1] + a0[2]), kn[1] + (a1[0] + a1[1] + a1[2]), kn[2] + (a2[0] + a2[1] + a2[2]), 0};
    if (s->Rsum) {
      double *S = s->Rsum + 9 * (size_t)k;
      for (int c = 0; c < 3; c++) S[c] = s0[c], S[3 + c] = s1[c], S[6 + c] = s2[c];
    }
  }
}

/* Global step right-hand side: the knowns' and soft targets' part plus b_j = Σ_u R_u h_{j,u}. */
void dfm__arap_rhs(dfm_system *s, const double *p, const double *soft_target) {
  rotation_rhs_job job = {s, p, soft_target};
  dfm_parallel_for(s->nf, dfm__grain(s->nf), rotation_rhs_range, &job);
}

/* The spokes-and-rims energy Σ_t Σ_c c_t,c Σ_k |(p_b - p_a) - R_k e_c|² over the active
 * triangles, with the rotations of the last local step. */
double dfm__arap_energy(const dfm_system *s, const double *p) {
  double E = 0;
  for (uint32_t t = 0; t < s->ntris; t++) {
    const uint32_t *tv = s->tri.v + 3 * (size_t)t;
    const double *tc = s->tri.c + 3 * (size_t)t;
    for (int c = 0; c < 3; c++) {
      const double *a = p + 3 * (size_t)tv[(c + 1) % 3], *b = p + 3 * (size_t)tv[(c + 2) % 3];
      double ed[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, te[3];
      rest_edge(s->rest, tv, c, te);
      for (int k = 0; k < 3; k++) {
        const double *R = s->R + 9 * (size_t)s->rot_slot[tv[k]];
        double diff2 = 0;
        for (int i = 0; i < 3; i++) {
          double re = R[3 * i] * te[0] + R[3 * i + 1] * te[1] + R[3 * i + 2] * te[2];
          diff2 += (ed[i] - re) * (ed[i] - re);
        }
        E += tc[c] * diff2;
      }
    }
  }
  return E;
}
