/*
 * dfm_multires.c — the multiresolution path for meshes a direct solve cannot make interactive:
 * a gesture solved on a simplified proxy of the mesh, with the mesh's detail carried by a
 * smooth embedding (dfm.h's dfm_multires; the hierarchical scheme of Kobbelt, Campagna, Vorsatz
 * and Seidel 1998, "Interactive multi-resolution modeling on arbitrary meshes", with ARAP on the
 * coarse level as in Manson and Schaefer 2012's "Hierarchical deformation of locally rigid
 * meshes", and the detail in local frames turned by the proxy's rotations).
 *
 *   proxy     meshopt_simplify to about params->multires_proxy vertices; its vertices are mesh
 *             vertices, renumbered in mesh order.
 *   binding   each mesh vertex's nearest proxy vertex along the mesh's edges (Dijkstra from all
 *             proxy vertices at once, so a vertex binds to its own sheet, not one across a thin
 *             gap); then the nearest point on the proxy triangles around that vertex: two
 *             barycentric coordinates and the offset from that point at rest. Parts of the mesh
 *             the proxy lost (small separate pieces) stay at rest, as the exact solve holds a
 *             piece nothing constrains (pinned).
 *   per drag  the proxy's solve (dfm_system.c); each proxy vertex's rotation fitted to its ring
 *             of proxy edges (ARAP's local step, uniform weights, warm-started); each mesh vertex
 *             at Σ bₖ x'ₖ + (Σ bₖ Rₖ) d, the barycentric blend of its triangle's corners and of
 *             their rotations applied to its offset d. The blend is continuous across proxy
 *             edges (corners are shared), and exact for a rigid motion (every Rₖ the same R).
 *             Handles then go exactly to the drag's transform and anchors stay at rest.
 *
 * DOES NOT build or solve the proxy's system: dfm_system.c does, on what this file prepares.
 */
#include <math.h>
#include <meshoptimizer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfm_internal.h"

#define UNBOUND UINT32_MAX

int dfm__multires_pick(const dfm_params *p, uint32_t n) {
  if (p->multires != DFM_MULTIRES_AUTO) return p->multires == DFM_MULTIRES_ON;
  return !p->roi && p->soft_count == 0 && n >= (p->multires_min ? p->multires_min : DFM_MULTIRES_MIN);
}

size_t dfm_multires_gesture_bytes(const dfm_params *params, uint32_t vertices) {
  if (!dfm__multires_pick(params, vertices)) return 0;
  uint32_t proxy = params->multires_proxy ? params->multires_proxy : DFM_MULTIRES_PROXY;
  return dfm_memory_gesture_bytes(proxy < vertices ? proxy : vertices) + (size_t)DFM_MULTIRES_VERTEX_BYTES * vertices;
}

void dfm__multires_free(dfm__multires *m) {
  if (!m) return;
  free(m->proxy_vertex);
  free(m->topo.triangles);
  mesh_adjacency_fini(&m->adj);
  free(m->rest);
  free((void *)m->params.roi);
  free((void *)m->params.handle);
  free((void *)m->params.anchors);
  free(m->io);
  free(m->R);
  free(m->bind_corner);
  free(m->xr);
  free(m->bind);
  free(m->mesh_rest);
  free(m->moves);
  free(m->handle);
  free(m->anchor);
  free(m);
}

void dfm_distance(const double *a, const double *b, uint32_t n, double diag, double *max_frac, double *rms_frac) {
  double worst = 0, sum = 0;
  for (uint32_t v = 0; v < n; v++) {
    double d2 = 0;
    for (int k = 0; k < 3; k++) d2 += (a[3 * (size_t)v + k] - b[3 * (size_t)v + k]) * (a[3 * (size_t)v + k] - b[3 * (size_t)v + k]);
    sum += d2;
    if (d2 > worst) worst = d2;
  }
  *max_frac = sqrt(worst) / diag;
  *rms_frac = n ? sqrt(sum / n) / diag : 0;
}

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

/* The point of triangle abc nearest p, as barycentric coordinates (Ericson, "Real-Time Collision
 * Detection", 5.1.5); returns its squared distance (INFINITY for a degenerate triangle). */
static double nearest_on_triangle(const double p[3], const double a[3], const double b[3], const double c[3],
                                  double w[3]) {
  double ab[3], ac[3], ap[3], bp[3], cp[3];
  for (int k = 0; k < 3; k++) ab[k] = b[k] - a[k], ac[k] = c[k] - a[k], ap[k] = p[k] - a[k], bp[k] = p[k] - b[k], cp[k] = p[k] - c[k];
  double d1 = dot3(ab, ap), d2 = dot3(ac, ap), d3 = dot3(ab, bp), d4 = dot3(ac, bp), d5 = dot3(ab, cp), d6 = dot3(ac, cp);
  double va = d3 * d6 - d5 * d4, vb = d5 * d2 - d1 * d6, vc = d1 * d4 - d3 * d2;
  if (d1 <= 0 && d2 <= 0) w[0] = 1, w[1] = 0, w[2] = 0;
  else if (d3 >= 0 && d4 <= d3) w[0] = 0, w[1] = 1, w[2] = 0;
  else if (d6 >= 0 && d5 <= d6) w[0] = 0, w[1] = 0, w[2] = 1;
  else if (vc <= 0 && d1 >= 0 && d3 <= 0 && d1 - d3 > 0) w[1] = d1 / (d1 - d3), w[0] = 1 - w[1], w[2] = 0;
  else if (vb <= 0 && d2 >= 0 && d6 <= 0 && d2 - d6 > 0) w[2] = d2 / (d2 - d6), w[0] = 1 - w[2], w[1] = 0;
  else if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0 && (d4 - d3) + (d5 - d6) > 0)
    w[2] = (d4 - d3) / ((d4 - d3) + (d5 - d6)), w[1] = 1 - w[2], w[0] = 0;
  else if (va + vb + vc > 0) w[1] = vb / (va + vb + vc), w[2] = vc / (va + vb + vc), w[0] = 1 - w[1] - w[2];
  else return INFINITY;
  double q2 = 0;
  for (int k = 0; k < 3; k++) {
    double d = p[k] - (w[0] * a[k] + w[1] * b[k] + w[2] * c[k]);
    q2 += d * d;
  }
  return q2;
}

/* What a mesh's proxy is, once made (dfm_proxy_build): a gesture's system copies it. */
struct dfm_proxy {
  uint32_t n, target;     /* mesh vertices; the proxy's target vertex count it was made for */
  uint32_t np, nt;        /* proxy vertices and triangles */
  uint32_t *proxy_vertex; /* np: the mesh vertex each proxy vertex is */
  uint32_t *triangles;    /* 3 nt, in proxy vertices */
  uint32_t *proxy_of;     /* n: each mesh vertex's proxy vertex, or UNBOUND */
  uint32_t *near;         /* n: its nearest proxy vertex along the mesh's edges, every proxy vertex a seed */
  double *dist;           /* n: the distance to it along them */
  double ms;
};

void dfm_proxy_free(dfm_proxy *x) {
  if (!x) return;
  free(x->proxy_vertex);
  free(x->triangles);
  free(x->proxy_of);
  free(x->near);
  free(x->dist);
  free(x);
}

/* The proxy's triangles: meshopt_simplify's, the vertices they use renumbered in mesh order. */
static int simplify(dfm_proxy *x, const mesh_topology *topo, const double *rest, char *err, size_t errlen) {
  uint32_t n = topo->vertex_count;
  size_t ni = 3 * (size_t)topo->triangle_count, kept = ni;
  unsigned int *idx = malloc(sizeof(unsigned int) * (ni + 1));
  if (!idx) return DFM_ENOMEM;
  if (x->target < n) {
    float *pos = malloc(sizeof(float) * 3 * ((size_t)n + 1));
    if (!pos) {
      free(idx);
      return DFM_ENOMEM;
    }
    for (size_t i = 0; i < 3 * (size_t)n; i++) pos[i] = (float)rest[i];
    /* About two triangles per vertex; the error bound left open, so the count decides. */
    size_t want = 6 * (size_t)x->target;
    kept = meshopt_simplify(idx, topo->triangles, ni, pos, n, sizeof(float) * 3, want < ni ? want : ni, 1.0f, 0, NULL);
    free(pos);
  } else {
    memcpy(idx, topo->triangles, sizeof(uint32_t) * ni);
  }
  uint32_t *proxy_of = x->proxy_of;
  for (uint32_t v = 0; v < n; v++) proxy_of[v] = UNBOUND;
  for (size_t i = 0; i < kept; i++) proxy_of[idx[i]] = 0;
  uint32_t np = 0;
  for (uint32_t v = 0; v < n; v++)
    if (proxy_of[v] == 0) proxy_of[v] = np++;
  x->np = np;
  x->proxy_vertex = malloc(sizeof(uint32_t) * ((size_t)np + 1));
  if (!x->proxy_vertex || kept < 3) {
    free(idx);
    if (kept < 3 && err && errlen) snprintf(err, errlen, "the mesh's proxy for the multiresolution path has no triangles");
    return kept < 3 ? DFM_EINVAL : DFM_ENOMEM;
  }
  for (uint32_t v = 0; v < n; v++)
    if (proxy_of[v] != UNBOUND) x->proxy_vertex[proxy_of[v]] = v;
  for (size_t i = 0; i < kept; i++) idx[i] = proxy_of[idx[i]];
  x->triangles = idx;
  x->nt = (uint32_t)(kept / 3);
  return 0;
}

static double edge_length(const double *rest, uint32_t u, uint32_t v) {
  double d[3] = {rest[3 * (size_t)u] - rest[3 * (size_t)v], rest[3 * (size_t)u + 1] - rest[3 * (size_t)v + 1],
                 rest[3 * (size_t)u + 2] - rest[3 * (size_t)v + 2]};
  return sqrt(dot3(d, d));
}

/* In Dijkstra's order (order[count]) every vertex's predecessor comes first: each unlabelled
 * vertex takes the label of the labelled neighbour it is nearest through, at the distance
 * `searched` gives a neighbour in `within` (NULL: every vertex) and `kept` any other. */
static void take_labels(const mesh_adjacency *adj, const double *rest, const uint32_t *order, uint32_t count,
                        const uint8_t *within, const double *searched, const double *kept, uint32_t *near) {
  for (uint32_t i = 0; i < count; i++) {
    uint32_t v = order[i];
    if (near[v] != UNBOUND) continue;
    double best = INFINITY;
    for (uint32_t e = adj->vv_offsets[v]; e < adj->vv_offsets[v + 1]; e++) {
      uint32_t u = adj->vv[e];
      if (near[u] == UNBOUND) continue;
      double via = (!within || within[u] ? searched[u] : kept[u]) + edge_length(rest, u, v);
      if (via < best) best = via, near[v] = near[u];
    }
  }
}

/* Each mesh vertex's nearest proxy vertex (every one a seed), a proxy index into near, along the
 * mesh's edges, and the distance to it into dist; UNBOUND on parts of the mesh none is on. */
static int nearest_proxy(uint32_t np, const uint32_t *proxy_vertex, const mesh_adjacency *adj, const double *rest,
                         const uint32_t *proxy_of, uint32_t *near, double *dist) {
  uint32_t n = adj->vertex_count, ns = 0;
  uint32_t *order = malloc(sizeof(uint32_t) * ((size_t)n + 1)), count = 0;
  uint32_t *seeds = malloc(sizeof(uint32_t) * ((size_t)np + 1));
  for (uint32_t q = 0; seeds && q < np; q++) seeds[ns++] = proxy_vertex[q];
  int rc = order && seeds ? dfm__geodesic_distances(adj, rest, seeds, ns, INFINITY, 0, dist, order, &count)
                                  : DFM_ENOMEM;
  free(seeds);
  for (uint32_t v = 0; v < n; v++) near[v] = proxy_of[v];
  if (rc == 0) take_labels(adj, rest, order, count, NULL, dist, dist, near);
  free(order);
  return rc;
}

/* The mesh vertices bound to proxy vertices `use` leaves out (pieces that hold no handle or
 * anchor) bound again, to the nearest kept one. Every other vertex keeps its label and distance,
 * since its nearest seed is still there; so a search over the left-out vertices alone, started
 * from their kept neighbours' distances, gives what a search from the kept seeds over the whole
 * mesh would, at a fraction of its cost. */
static int relabel_left_out(const dfm_proxy *x, const mesh_adjacency *adj, const double *rest, const uint8_t *use,
                            uint32_t *near) {
  uint32_t n = adj->vertex_count, count = 0;
  uint8_t *within = calloc((size_t)n + 1, 1);
  double *dist = malloc(sizeof(double) * ((size_t)n + 1));
  uint32_t *order = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  int rc = within && dist && order ? 0 : DFM_ENOMEM;
  for (uint32_t v = 0; rc == 0 && v < n; v++) {
    dist[v] = INFINITY;
    if (near[v] != UNBOUND && !use[near[v]]) within[v] = 1, near[v] = UNBOUND;
  }
  for (uint32_t v = 0; rc == 0 && v < n; v++)
    for (uint32_t e = within[v] ? adj->vv_offsets[v] : 0; within[v] && e < adj->vv_offsets[v + 1]; e++) {
      uint32_t u = adj->vv[e];
      if (!within[u] && near[u] != UNBOUND) dist[v] = fmin(dist[v], x->dist[u] + edge_length(rest, u, v));
    }
  if (rc == 0) rc = dfm__geodesic_resume(adj, rest, within, dist, order, &count);
  if (rc == 0) take_labels(adj, rest, order, count, within, dist, x->dist, near);
  free(within);
  free(dist);
  free(order);
  return rc;
}

/* Marks in `use` the proxy vertices of the proxy's pieces (connected by its triangles) that
 * hold a handle or an anchor. The simplifier can cut a piece off where the mesh narrows to a
 * strip one triangle wide; the proxy's solve would hold it still, so its mesh vertices bind to
 * the pieces that move instead. Returns how many vertices it leaves out, or -1 (no memory). */
static long constrained_pieces(const dfm__multires *m, uint8_t *use) {
  uint32_t np = m->np, *stack = malloc(sizeof(uint32_t) * ((size_t)np + 1)), top = 0;
  if (!stack) return -1;
  memset(use, 0, np);
  const dfm_params *p = &m->params;
  for (uint32_t i = 0; i < p->handle_count + p->anchor_count; i++) {
    uint32_t q = i < p->handle_count ? p->handle[i] : p->anchors[i - p->handle_count];
    if (!use[q]) use[q] = 1, stack[top++] = q;
    while (top > 0) {
      uint32_t v = stack[--top];
      for (uint32_t e = m->adj.vv_offsets[v]; e < m->adj.vv_offsets[v + 1]; e++)
        if (!use[m->adj.vv[e]]) use[m->adj.vv[e]] = 1, stack[top++] = m->adj.vv[e];
    }
  }
  free(stack);
  long left = 0;
  for (uint32_t q = 0; q < np; q++) left += !use[q];
  return left;
}

typedef struct bind_job {
  dfm__multires *m;
  const uint32_t *near;
} bind_job;

/* Binds mesh vertices [lo, hi) to the nearest point of the proxy triangles round their nearest
 * proxy vertex. */
static void bind_range(void *ctx, size_t lo, size_t hi) {
  const bind_job *job = ctx;
  dfm__multires *m = job->m;
  const uint32_t *tris = m->topo.triangles;
  for (size_t v = lo; v < hi; v++) {
    const double *p = m->mesh_rest + 3 * v;
    uint32_t q = job->near[v], best_t = UNBOUND;
    double best = INFINITY, bw[3] = {0, 0, 0};
    for (uint32_t e = q == UNBOUND ? 0 : m->adj.vt_offsets[q]; q != UNBOUND && e < m->adj.vt_offsets[q + 1]; e++) {
      const uint32_t *t = tris + 3 * (size_t)m->adj.vt[e];
      double w[3] = {0, 0, 0};
      double d2 = nearest_on_triangle(p, m->rest + 3 * (size_t)t[0], m->rest + 3 * (size_t)t[1], m->rest + 3 * (size_t)t[2], w);
      if (d2 < best) best = d2, best_t = m->adj.vt[e], memcpy(bw, w, sizeof(bw));
    }
    if (q != UNBOUND && best_t == UNBOUND && m->adj.vt_offsets[q] < m->adj.vt_offsets[q + 1]) {
      /* Only degenerate triangles round q: bound to q itself, a corner of the first. */
      best_t = m->adj.vt[m->adj.vt_offsets[q]];
      for (int c = 0; c < 3; c++) bw[c] = tris[3 * (size_t)best_t + c] == q;
    }
    uint32_t *corner = m->bind_corner + 3 * v;
    float *b = m->bind + 5 * v;
    corner[0] = corner[1] = corner[2] = UNBOUND;
    if (best_t == UNBOUND) continue;
    const uint32_t *t = tris + 3 * (size_t)best_t;
    memcpy(corner, t, sizeof(uint32_t) * 3);
    /* The offset from the point the stored (float) coordinates give, so that they add up. */
    b[0] = (float)bw[0], b[1] = (float)bw[1];
    double w0 = b[0], w1 = b[1], w2 = 1.0 - w0 - w1;
    for (int k = 0; k < 3; k++)
      b[2 + k] = (float)(p[k] - (w0 * m->rest[3 * (size_t)t[0] + k] + w1 * m->rest[3 * (size_t)t[1] + k] +
                                 w2 * m->rest[3 * (size_t)t[2] + k]));
  }
}

/* The proxy vertices `near` maps a list of mesh vertices to, ascending, except those marked
 * `skip` (may be NULL); mark (np bytes, zeroed on return) is scratch. */
static uint32_t *map_list(const uint32_t *list, uint32_t count, const uint32_t *near, uint32_t np, uint8_t *mark,
                          const uint8_t *skip, uint32_t *out_count) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < count; i++)
    if (!skip || !skip[near[list[i]]]) mark[near[list[i]]] = 1;
  uint32_t *out = malloc(sizeof(uint32_t) * ((size_t)count + 1));
  for (uint32_t q = 0; q < np; q++)
    if (mark[q]) {
      if (out) out[k++] = q;
      mark[q] = 0;
    }
  *out_count = k;
  return out;
}

/* The gesture in the proxy's numbering; the mesh's handles and anchors kept for the drags. */
static int proxy_params(dfm__multires *m, const dfm_params *p, const uint32_t *near) {
  uint8_t *mark = calloc((size_t)m->np + 1, 1), *is_handle = calloc((size_t)m->np + 1, 1);
  int rc = mark && is_handle ? 0 : DFM_ENOMEM;
  dfm_params *q = &m->params;
  *q = *p;
  q->roi = q->handle = q->anchors = q->soft = NULL;
  q->soft_weight = q->soft_position = NULL;
  q->roi_count = q->handle_count = q->anchor_count = q->soft_count = 0;
  q->multires = DFM_MULTIRES_OFF;
  q->proxy = NULL;
  q->mesh_order = NULL;
  q->mesh_symbolic = NULL;
  if (rc == 0) {
    uint32_t nh;
    uint32_t *h = map_list(p->handle, p->handle_count, near, m->np, mark, NULL, &nh);
    q->handle = h, q->handle_count = nh;
    for (uint32_t i = 0; h && i < nh; i++) is_handle[h[i]] = 1;
    q->anchors = map_list(p->anchors, p->anchor_count, near, m->np, mark, is_handle, &q->anchor_count);
    if (p->roi) {
      for (uint32_t i = 0; h && i < nh; i++) mark[h[i]] = 1;
      q->roi = map_list(p->roi, p->roi_count, near, m->np, mark, NULL, &q->roi_count);
    }
    if (!h || !q->anchors || (p->roi && !q->roi)) rc = DFM_ENOMEM;
  }
  m->nh = p->handle_count, m->na = p->anchor_count;
  m->handle = malloc(sizeof(uint32_t) * ((size_t)m->nh + 1));
  m->anchor = malloc(sizeof(uint32_t) * ((size_t)m->na + 1));
  m->moves = calloc((size_t)m->n + 1, 1);
  if (rc == 0 && m->handle && m->anchor && m->moves) {
    memcpy(m->handle, p->handle, sizeof(uint32_t) * m->nh);
    if (m->na) memcpy(m->anchor, p->anchors, sizeof(uint32_t) * m->na);
    if (!p->roi) memset(m->moves, 1, m->n);
    for (uint32_t i = 0; p->roi && i < p->roi_count; i++) m->moves[p->roi[i]] = 1;
    for (uint32_t i = 0; i < m->nh; i++) m->moves[m->handle[i]] = 1;
  } else {
    rc = DFM_ENOMEM;
  }
  free(mark);
  free(is_handle);
  return rc;
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

int dfm_proxy_build(const mesh_topology *topo, const mesh_adjacency *adj, const double *rest, uint32_t target,
                    dfm_proxy **out, char *err, size_t errlen) {
  *out = NULL;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint32_t n = topo->vertex_count;
  dfm_proxy *x = calloc(1, sizeof(*x));
  if (!x) return DFM_ENOMEM;
  x->n = n;
  x->target = target ? target : DFM_MULTIRES_PROXY;
  x->proxy_of = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  x->near = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  x->dist = malloc(sizeof(double) * ((size_t)n + 1));
  int rc = x->proxy_of && x->near && x->dist ? simplify(x, topo, rest, err, errlen) : DFM_ENOMEM;
  if (rc == 0) rc = nearest_proxy(x->np, x->proxy_vertex, adj, rest, x->proxy_of, x->near, x->dist);
  if (rc) {
    if (rc == DFM_ENOMEM && err && errlen) snprintf(err, errlen, "out of memory building the multiresolution proxy");
    dfm_proxy_free(x);
    return rc;
  }
  x->ms = ms_since(&t0);
  *out = x;
  return 0;
}

/* The proxy's topology, adjacency and rest shape (from the gesture's rest) in m, from x. */
static int take_proxy(dfm__multires *m, const dfm_proxy *x, const double *rest) {
  m->np = x->np;
  m->proxy_vertex = malloc(sizeof(uint32_t) * ((size_t)x->np + 1));
  m->rest = malloc(sizeof(double) * 3 * ((size_t)x->np + 1));
  uint32_t *tris = malloc(sizeof(uint32_t) * 3 * ((size_t)x->nt + 1));
  if (!m->proxy_vertex || !m->rest || !tris) {
    free(tris);
    return DFM_ENOMEM;
  }
  memcpy(m->proxy_vertex, x->proxy_vertex, sizeof(uint32_t) * x->np);
  memcpy(tris, x->triangles, sizeof(uint32_t) * 3 * x->nt);
  for (uint32_t q = 0; q < x->np; q++) memcpy(m->rest + 3 * (size_t)q, rest + 3 * (size_t)x->proxy_vertex[q], sizeof(double) * 3);
  m->topo.vertex_count = x->np;
  m->topo.triangle_count = x->nt;
  m->topo.triangles = tris;
  return mesh_adjacency_init(&m->adj, x->np, tris, x->nt) != 0 ? DFM_ENOMEM : 0;
}

int dfm__multires_init(dfm__multires **out, const mesh_topology *topo, const mesh_adjacency *adj, const double *rest,
                       const dfm_params *params, char *err, size_t errlen) {
  *out = NULL;
  if (params->soft_count > 0) {
    if (err && errlen) snprintf(err, errlen, "the multiresolution path takes no soft constraints");
    return DFM_EINVAL;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint32_t n = topo->vertex_count;
  uint32_t target = params->multires_proxy ? params->multires_proxy : DFM_MULTIRES_PROXY;
  /* The caller's proxy when it is this mesh's at this size; else one made here, the same way. */
  const dfm_proxy *x = params->proxy && params->proxy->n == n && params->proxy->target == target ? params->proxy : NULL;
  dfm_proxy *made = NULL;
  int rc = 0;
  if (!x) {
    rc = dfm_proxy_build(topo, adj, rest, target, &made, err, errlen);
    if (rc) return rc;
    x = made;
  }
  dfm__multires *m = calloc(1, sizeof(*m));
  uint32_t *near = malloc(sizeof(uint32_t) * ((size_t)n + 1));
  rc = m && near ? 0 : DFM_ENOMEM;
  if (rc == 0) {
    m->n = n;
    m->proxy_reused = made == NULL;
    m->simplify_ms = made ? made->ms : 0;
    m->mesh_rest = malloc(sizeof(double) * 3 * ((size_t)n + 1));
    m->bind_corner = malloc(sizeof(uint32_t) * 3 * ((size_t)n + 1));
    m->bind = malloc(sizeof(float) * 5 * ((size_t)n + 1));
    rc = m->mesh_rest && m->bind_corner && m->bind ? 0 : DFM_ENOMEM;
  }
  if (rc == 0) rc = take_proxy(m, x, rest);
  uint8_t *use = m ? malloc((size_t)m->np + 1) : NULL;
  if (rc == 0 && !use) rc = DFM_ENOMEM;
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (rc == 0) {
    memcpy(near, x->near, sizeof(uint32_t) * n);
    rc = proxy_params(m, params, near);
  }
  long left = rc == 0 ? constrained_pieces(m, use) : 0;
  if (left < 0) rc = DFM_ENOMEM;
  if (rc == 0 && left > 0) rc = relabel_left_out(x, adj, rest, use, near);
  free(use);
  if (m) m->near_ms = ms_since(&t1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (rc == 0) {
    memcpy(m->mesh_rest, rest, sizeof(double) * 3 * n);
    bind_job job = {m, near};
    dfm_parallel_for(n, dfm__grain(n), bind_range, &job);
  }
  if (m) m->bind_ms = ms_since(&t1);
  if (rc == 0) {
    m->io = malloc(sizeof(double) * 3 * ((size_t)m->np + 1));
    m->R = malloc(sizeof(double) * 9 * ((size_t)m->np + 1));
    m->xr = aligned_alloc(64, sizeof(dfm__frame) * ((size_t)m->np + 1));
    rc = m->io && m->R && m->xr ? 0 : DFM_ENOMEM;
  }
  if (rc == 0) {
    memcpy(m->io, m->rest, sizeof(double) * 3 * m->np);
    for (uint32_t q = 0; q < m->np; q++)
      for (int k = 0; k < 9; k++) m->R[9 * (size_t)q + k] = k % 4 == 0;
  }
  dfm_proxy_free(made);
  free(near);
  if (rc) {
    if (rc == DFM_ENOMEM && err && errlen) snprintf(err, errlen, "out of memory building the multiresolution proxy");
    dfm__multires_free(m);
    return rc;
  }
  m->ms = ms_since(&t0);
  *out = m;
  return 0;
}

/* The covariance of proxy vertex q's ring (rest edges against solved ones): what its rotation
 * is fitted to. */
static void ring_covariance(const dfm__multires *m, size_t q, double M[9]) {
  const double *x = m->rest + 3 * q, *y = m->io + 3 * q;
  double s[9] = {0}; /* a local the compiler keeps in registers, unlike M */
  for (uint32_t e = m->adj.vv_offsets[q]; e < m->adj.vv_offsets[q + 1]; e++) {
    const double *xj = m->rest + 3 * (size_t)m->adj.vv[e], *yj = m->io + 3 * (size_t)m->adj.vv[e];
    double a0 = x[0] - xj[0], a1 = x[1] - xj[1], a2 = x[2] - xj[2], b0 = y[0] - yj[0], b1 = y[1] - yj[1], b2 = y[2] - yj[2];
    s[0] += b0 * a0, s[1] += b0 * a1, s[2] += b0 * a2;
    s[3] += b1 * a0, s[4] += b1 * a1, s[5] += b1 * a2;
    s[6] += b2 * a0, s[7] += b2 * a1, s[8] += b2 * a2;
  }
  memcpy(M, s, sizeof(s));
}

/* Each proxy vertex's rotation, fitted to its ring four at a time, for [lo, hi); then its
 * position and rotation side by side in xr. */
static void rotation_range(void *ctx, size_t lo, size_t hi) {
  dfm__multires *m = ctx;
  size_t q = lo;
  for (; q + 4 <= hi; q += 4) {
    double M[36], *R[4] = {m->R + 9 * q, m->R + 9 * (q + 1), m->R + 9 * (q + 2), m->R + 9 * (q + 3)};
    for (int i = 0; i < 4; i++) ring_covariance(m, q + (size_t)i, M + 9 * i);
    dfm_fit_rotation4(M, R);
  }
  for (; q < hi; q++) {
    double M[9];
    ring_covariance(m, q, M);
    dfm_fit_rotation(M, m->R + 9 * q);
  }
  for (q = lo; q < hi; q++) {
    memcpy(m->xr[q].x, m->io + 3 * q, sizeof(double) * 3);
    for (int k = 0; k < 9; k++) m->xr[q].R[k] = (float)m->R[9 * q + k];
  }
}

typedef struct embed_job {
  dfm__multires *m;
  double *out;
  int bad;
} embed_job;

/* Mesh vertices [lo, hi) that move, from the proxy's positions and rotations. */
static void embed_range(void *ctx, size_t lo, size_t hi) {
  embed_job *job = ctx;
  const dfm__multires *m = job->m;
  const dfm__frame *xr = m->xr;
  int bad = 0;
  for (size_t v = lo; v < hi; v++) {
    if (!m->moves[v]) continue;
    double *o = job->out + 3 * v;
    const uint32_t *t = m->bind_corner + 3 * v;
    if (t[0] == UNBOUND) {
      memcpy(o, m->mesh_rest + 3 * v, sizeof(double) * 3);
      continue;
    }
    const float *b = m->bind + 5 * v;
    double w[3] = {b[0], b[1], 1.0 - (double)b[0] - (double)b[1]}, d[3] = {b[2], b[3], b[4]};
    /* Scalars written out, not out[] or a loop over k: -O2 kept a loop's sums in memory. */
    double a0 = 0, a1 = 0, a2 = 0;
    for (int c = 0; c < 3; c++) {
      const double *x = xr[t[c]].x;
      const float *Rc = xr[t[c]].R;
      a0 += w[c] * (x[0] + Rc[0] * d[0] + Rc[1] * d[1] + Rc[2] * d[2]);
      a1 += w[c] * (x[1] + Rc[3] * d[0] + Rc[4] * d[1] + Rc[5] * d[2]);
      a2 += w[c] * (x[2] + Rc[6] * d[0] + Rc[7] * d[1] + Rc[8] * d[2]);
    }
    o[0] = a0, o[1] = a1, o[2] = a2;
    bad |= !isfinite(a0 + a1 + a2);
  }
  if (bad) __atomic_store_n(&job->bad, 1, __ATOMIC_RELAXED);
}

int dfm__multires_embed(dfm__multires *m, const dfm_xform *xf, double *out) {
  dfm_parallel_for(m->np, dfm__grain(m->np), rotation_range, m);
  embed_job job = {m, out, 0};
  dfm_parallel_for(m->n, dfm__grain(m->n), embed_range, &job);
  if (job.bad) return DFM_ENONFINITE;
  for (uint32_t i = 0; i < m->nh; i++) dfm_xform_apply(xf, m->mesh_rest + 3 * (size_t)m->handle[i], out + 3 * (size_t)m->handle[i]);
  for (uint32_t i = 0; i < m->na; i++)
    memcpy(out + 3 * (size_t)m->anchor[i], m->mesh_rest + 3 * (size_t)m->anchor[i], sizeof(double) * 3);
  return 0;
}
