/*
 * srv_json.h — the JSON description of a mesh that `deformd --check-mesh` prints and the
 * `mesh.info` JSON-RPC method returns, and how floats are written as JSON.
 *
 * DOES NOT import or weld: it describes a mesh the caller already has.
 */
#ifndef DEFORMD_SRV_JSON_H
#define DEFORMD_SRV_JSON_H

#include <cjson/cJSON.h>

#include "mesh.h"

/* Builds {"vertices", "triangles", "topology_vertices", "components", "boundary_edges",
 * "nonmanifold_edges", "degenerate_triangles", "targets": [names], "frames", "submeshes",
 * "bbox": {"min", "max"}}. Returns a new cJSON object (caller frees with cJSON_Delete) or NULL
 * when out of memory. */
cJSON *srv_json_mesh_info(const mesh *m, const mesh_stats *s);

/* A float as a JSON number with the shortest decimal that reads back as the same float (0.8f
 * prints as 0.8, not 0.800000011920929), so what a script sets is what it reads. */
cJSON *srv_json_float(float f);

#endif
