/*
 * mesh.h — the mesh core shared by deformd (server) and deform-view (viewer).
 *
 * A mesh is what a session deforms: render vertices (positions, optional normals and UVs),
 * triangles, named morph targets stored sparsely, optional keyframe animation, named animation
 * clips (ranges of keyframes, or target weights over time), and submesh ranges that remember
 * which part of the source file each triangle came from.
 *
 * This module DOES:   import (assimp), animation clips found in the file, validation, export
 *                     (OBJ, GLB), welding into topology vertices, adjacency, Laplacian weights,
 *                     vertex areas, reference normals, statistics, and the generated demo head.
 * This module DOES NOT: know about sockets, sessions, versions, threads or GPUs, or play clips
 *                     back (the server samples and compresses them). Every function here is
 *                     synchronous and touches only the memory it is given; callers decide which
 *                     thread runs it (the server runs imports on its thread pool).
 *
 * Errors: functions return 0 or a negative MESH_E* code; mesh_strerror() names the code. Where a
 * reason is more specific than the code ("triangle 12 references vertex 99 of 24"), the function
 * takes an `err` buffer and writes one readable line into it.
 */
#ifndef DEFORMD_MESH_H
#define DEFORMD_MESH_H

/* The parts, each with its own banner: the handle and its data, import/export/blobs/demo
 * meshes, and the geometry (welding, adjacency, Laplacian, normals, statistics). */
#include "mesh_core.h"
#include "mesh_geom.h"
#include "mesh_io.h"

#endif /* DEFORMD_MESH_H */
