/*
 * proto2_mesh.h — what the version 2 tests (test_proto2.c, test_entropy.c) share: a mesh loaded
 * as a session holds it, and the session's offset quantum for it.
 */
#ifndef DEFORMD_TEST_PROTO2_MESH_H
#define DEFORMD_TEST_PROTO2_MESH_H

#include "mesh.h"

/* "demo" or a file: bounds updated, triangles in the session's cache order. Caller destroys. */
mesh *proto2_test_load(const char *what);
/* float(bbox diagonal · 2^-20), as srv_session.c picks it (1e-6 for a point). */
float proto2_test_quantum(const mesh *m);

#endif
