/*
 * oracle.h — independent references the mesh-core tests compare against.
 *
 * Nothing here calls the mesh core's geometry code: the OFF and MD2 readers are written from
 * the file format descriptions, counts use plain sorting and union-find over raw indices, and
 * the analytic shapes are generated directly. When a test and the code under test agree, it is
 * because two separate implementations agree.
 */
#ifndef DEFORMD_TEST_ORACLE_H
#define DEFORMD_TEST_ORACLE_H

#include <stdint.h>

#include "mesh.h"

/* Counts read straight from an OFF file: unreferenced vertices ignored, vertices with equal
 * coordinates counted once (`vertices`), then welded greedily in file order to the nearest
 * earlier representative within 1e-6 of the bounding-box diagonal (`topology_vertices`), and
 * everything topological counted on the welded ids. Polygons count as corners - 2 triangles;
 * their diagonals are interior, so edge counts do not depend on how they are split. */
typedef struct oracle_counts {
  uint32_t vertices;       /* distinct referenced positions */
  uint32_t topology_vertices;
  uint32_t triangles;      /* sum over faces of (corners - 2) */
  uint32_t components;
  uint32_t boundary_edges;
  uint32_t nonmanifold_edges;
  uint32_t degenerate_triangles; /* only meaningful for all-triangle files */
} oracle_counts;

/* Parses `path` as OFF. Fails the test on a parse error. */
void oracle_off_counts(const char *path, oracle_counts *out);

/* Decompressed MD2 frames: positions of every xyz vertex referenced by a triangle, per frame,
 * as read from the file. *frames has frame_count * point_count * 3 floats; caller frees. */
void oracle_md2_frames(const char *path, uint32_t *frame_count, uint32_t *point_count,
                       float **frames);

/* A clip as the file's frame names define it. */
typedef struct oracle_clip {
  char name[17];
  uint32_t first, count;
} oracle_clip;

/* MD2 frame names read straight from the file (header field num_frames and ofs_frames, frame
 * name at byte 24 of each frame), each with its trailing digits removed, and runs of equal
 * prefixes counted. *clips is malloc'ed (caller frees); returns the number of runs. Fails the
 * test when a name is empty or all digits (these files have none). */
uint32_t oracle_md2_clips(const char *path, oracle_clip **clips);

/* Whether point sets a and b cover each other within `tol` (every point of one has a point of
 * the other that close) after a signed axis permutation of a: the permutation is searched (all
 * 48) when *perm < 0 and reported in *perm, or fixed when *perm >= 0. Returns 1 if so. */
int oracle_same_point_set(const float *a, uint32_t na, const float *b, uint32_t nb, double tol,
                          int *perm);

/* Triangle area by Heron's formula (not the cross product the code uses). */
double oracle_heron_area(const double *p, const double *q, const double *r);

/* Builders of analytic meshes (plain arrays into a new mesh, no import):
 * an n×n grid of squares with spacing h in the XY plane, each split along the (i,j)-(i+1,j+1)
 * diagonal; a grid of equilateral triangles; an icosphere of radius r; a UV sphere with a seam
 * (vertices on the seam meridian duplicated with u = 0 and u = 1). */
mesh *oracle_grid(uint32_t n, double h);
mesh *oracle_equilateral_grid(uint32_t n, double h);
mesh *oracle_icosphere(uint32_t levels, double r);
mesh *oracle_uv_sphere(uint32_t rings, uint32_t segments, double r);

/* How much a deformation creases a surface: for every edge shared by exactly two triangles
 * (found by sorting raw index pairs; edges with one or more than two triangles are skipped, as
 * are triangles of zero area in either shape, and triangles whose smallest angle at rest is
 * under `min_angle_deg`: a needle's normal swings under any motion of its apex, crease or not),
 * the signed dihedral angle — the angle between the
 * two triangles' normals, positive where the edge is convex — in `rest` and in `now` (3 doubles
 * per vertex), and the change between them wrapped to [0°, 180°]. A triangle folded over its
 * neighbour reads close to 180°. */
typedef struct oracle_crease {
  double max_deg;       /* the largest change */
  uint32_t over;        /* edges whose change exceeds the threshold */
  uint32_t edges;       /* edges measured */
  uint32_t worst_edge[2]; /* the vertices of the edge with the largest change */
} oracle_crease;

void oracle_dihedral_change(const uint32_t *triangles, uint32_t triangle_count, const double *rest,
                            const double *now, double threshold_deg, double min_angle_deg, oracle_crease *out);

/* Writes a one-surface MD3 into b (room for 108 + 56·n + 300 + 32·n bytes): a tetrahedron that
 * moves 1/2 along x per frame, frames named names[0 .. nframes-1]. Returns the file size. */
size_t oracle_write_md3(unsigned char *b, const char *const *names, uint32_t nframes);

/* Whether any run of k bytes of data[0..n) appears in the string s (a message that quotes a
 * file). */
int oracle_has_run_of(const char *s, const uint8_t *data, size_t n, size_t k);

#endif
