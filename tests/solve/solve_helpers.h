/*
 * solve_helpers.h — what several test files of tests/solve share: a mesh with its welded
 * topology and adjacency (fixture), and three drags of two systems compared (drag_both).
 *
 * DOES NOT hold oracles (tests/support/oracle.h does) or tests.
 */
#ifndef DEFORMD_TEST_SOLVE_HELPERS_H
#define DEFORMD_TEST_SOLVE_HELPERS_H

#include <stdint.h>

#include "dfm.h"
#include "mesh.h"

typedef struct fixture {
  mesh *m;
  mesh_topology t;
  mesh_adjacency a;
  double diag;
} fixture;

/* Takes m (freed by fixture_fini) and builds its topology and adjacency. */
void fixture_init(fixture *f, mesh *m);
void fixture_fini(fixture *f);

/* Three drags of s[0] and s[1] (into a and b): the handle around `top` moves up and turns
 * about axis `axis`; the results must agree within tol × the diagonal and the mesh must move. */
void drag_both(fixture *f, dfm_system *s[2], double *a, double *b, uint32_t top, int axis, double tol,
               dfm_mode mode, const char *what);

#endif
