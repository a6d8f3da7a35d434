/*
 * mesh_geom.h — geometry over a mesh for solves, normals and reports: welding render vertices
 * into topology vertices, vertex/triangle adjacency, cotangent and uniform Laplacian weights,
 * vertex areas, the reference normals and the mesh statistics.
 *
 * DOES NOT solve anything (server/solve/) or touch a GPU; it computes into arrays it is given
 * or that its *_init functions allocate and *_fini frees.
 */
#ifndef DEFORMD_MESH_GEOM_H
#define DEFORMD_MESH_GEOM_H

#include <stddef.h>
#include <stdint.h>

#include "mesh_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Welding (mesh_weld.c): topology vertices for solves.
 *
 * Render vertices split at UV or normal seams share a position; solves and normals want one
 * vertex there. Welding merges render vertices whose positions lie within
 * `tolerance` × bbox diagonal of a representative, keeping both maps.
 */

typedef struct mesh_topology {
  uint32_t vertex_count;        /* topology vertices */
  uint32_t render_count;        /* render vertices of the source mesh */
  uint32_t *render_to_topo;     /* render_count entries */
  uint32_t *topo_offsets;       /* vertex_count + 1: CSR of topo -> render vertices */
  uint32_t *topo_render;        /* render_count entries */
  double *positions;            /* 3 * vertex_count: the representative render vertex's position */
  uint32_t triangle_count;      /* triangles whose three corners are distinct topology vertices */
  uint32_t *triangles;          /* 3 * triangle_count, in topology indices */
  uint32_t *triangle_source;    /* triangle_count: index of the render triangle each came from */
  uint32_t collapsed_count;     /* render triangles dropped because two corners welded together */
} mesh_topology;

#define MESH_WELD_DEFAULT_TOLERANCE 1e-6

/* Builds the welded topology of `m`. `tolerance` is relative to the bounding-box diagonal
 * (<= 0 means MESH_WELD_DEFAULT_TOLERANCE). Positions come from `positions` when not NULL,
 * else from m->positions. Returns 0 or MESH_ENOMEM. Free with mesh_topology_fini(). */
int mesh_topology_init(mesh_topology *t, const mesh *m, const float *positions, double tolerance);
void mesh_topology_fini(mesh_topology *t);

/* ---------------------------------------------------------------------------------------------
 * Adjacency (mesh_adjacency.c): CSR vertex -> vertex and vertex -> triangle over a topology.
 */

typedef struct mesh_adjacency {
  uint32_t vertex_count;
  uint32_t *vv_offsets;   /* vertex_count + 1 */
  uint32_t *vv;           /* neighbours of v: vv[vv_offsets[v] .. vv_offsets[v+1]), ascending */
  uint32_t *vt_offsets;   /* vertex_count + 1 */
  uint32_t *vt;           /* triangles around v, ascending */
} mesh_adjacency;

/* Builds adjacency for `triangle_count` triangles over `vertex_count` vertices.
 * Returns 0, MESH_ERANGE (an index >= vertex_count) or MESH_ENOMEM. Free with _fini(). */
int mesh_adjacency_init(mesh_adjacency *a, uint32_t vertex_count, const uint32_t *triangles,
                        uint32_t triangle_count);
void mesh_adjacency_fini(mesh_adjacency *a);

/* Position of `j` in v's neighbour list (an index into vv[]), or -1 when not adjacent. */
int64_t mesh_adjacency_edge(const mesh_adjacency *a, uint32_t v, uint32_t j);

/* ---------------------------------------------------------------------------------------------
 * Laplacian weights and vertex areas (mesh_laplacian.c)
 */

typedef enum mesh_cotan_mode {
  MESH_COTAN_CLAMPED = 0,  /* each cotangent clamped to [0, MESH_COT_MAX]: obtuse angles give 0 */
  MESH_COTAN_RAW = 1       /* signed cotangents, only limited to [-MESH_COT_MAX, MESH_COT_MAX] */
} mesh_cotan_mode;

/* Largest |cot| admitted: an angle of about 1e-5 rad. Keeps degenerate triangles finite. */
#define MESH_COT_MAX 1e5

/* Cotangent edge weights w_ij = (cot α_ij + cot β_ij) / 2, one per entry of a->vv (so the weight
 * of edge (i, j) is at the same index as j in i's list; the matrix is symmetric).
 * `positions` are 3 doubles per vertex. `weights` has a->vv_offsets[vertex_count] entries. */
void mesh_cotan_weights(const mesh_adjacency *a, const double *positions,
                        const uint32_t *triangles, uint32_t triangle_count, mesh_cotan_mode mode,
                        double *weights);

/* The cotangents of the three corner angles of one triangle (cot[c] at corner c, opposite edge
 * (c+1, c+2)), limited and clamped by `mode` like mesh_cotan_weights(). All zero when two
 * corners share an index. */
void mesh_triangle_cotangents(const double *positions, const uint32_t *tri, mesh_cotan_mode mode,
                              double cot[3]);

/* Uniform (graph) weights: 1 for every edge. Same layout as mesh_cotan_weights(). */
void mesh_uniform_weights(const mesh_adjacency *a, double *weights);

typedef enum mesh_area_mode {
  MESH_AREA_MIXED = 0,     /* Meyer et al. 2003: Voronoi, falling back to area/2 or /4 when obtuse */
  MESH_AREA_VORONOI = 1,   /* pure circumcentric Voronoi (can be negative near obtuse angles) */
  MESH_AREA_BARYCENTRIC = 2
} mesh_area_mode;

/* Per-vertex area, `areas` has vertex_count entries. Mixed and barycentric areas sum to the
 * surface area exactly; degenerate triangles contribute nothing. */
void mesh_vertex_areas(uint32_t vertex_count, const double *positions, const uint32_t *triangles,
                       uint32_t triangle_count, mesh_area_mode mode, double *areas);

/* Area of triangle (a, b, c) given 3 doubles per vertex. */
double mesh_triangle_area(const double *positions, const uint32_t *tri);

/* ---------------------------------------------------------------------------------------------
 * Reference normals (mesh_normals.c): the CPU oracle for the viewer's GPU normals.
 */

typedef enum mesh_normal_mode {
  MESH_NORMALS_ANGLE = 0,  /* face normals weighted by the corner angle (Thürmer & Wüthrich) */
  MESH_NORMALS_AREA = 1    /* face normals weighted by the face area */
} mesh_normal_mode;

/* Unit normals per render vertex (3 * m->vertex_count floats) for the shape `positions`
 * (NULL = m->positions), accumulated over the welded topology `t` so that render vertices on a
 * seam get the same normal. A vertex with no non-degenerate triangle gets (0, 0, 0). */
void mesh_compute_normals(const mesh *m, const mesh_topology *t, const float *positions,
                          mesh_normal_mode mode, float *normals);

/* ---------------------------------------------------------------------------------------------
 * Statistics (mesh_stats.c)
 */

typedef struct mesh_stats {
  uint32_t vertices;              /* render vertices */
  uint32_t triangles;
  uint32_t topology_vertices;     /* after welding */
  uint32_t components;            /* connected components over the welded triangles */
  uint32_t boundary_edges;        /* welded edges with exactly one triangle */
  uint32_t nonmanifold_edges;     /* welded edges with three or more triangles */
  uint32_t degenerate_triangles;  /* two corners weld together, or the area is ~0 */
  uint32_t targets;
  uint32_t frames;
  uint32_t submeshes;
} mesh_stats;

/* A triangle is degenerate when its height over its longest edge is at most this fraction of
 * that edge (2·area <= eps·longest²): slivers with an angle under ~1e-6 rad and collapsed
 * triangles, at any scale. */
#define MESH_DEGENERATE_EPS 1e-6

/* Fills `s` from `m` and its topology `t`. Returns 0 or MESH_ENOMEM. */
int mesh_compute_stats(const mesh *m, const mesh_topology *t, mesh_stats *s);

/* Whether triangle `tri` (3 indices into `positions`, 3 doubles each) is degenerate by the rule
 * above. Repeated indices count as degenerate too. */
int mesh_triangle_is_degenerate(const double *positions, const uint32_t *tri);

#ifdef __cplusplus
}
#endif

#endif /* DEFORMD_MESH_GEOM_H */
