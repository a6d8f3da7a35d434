/*
 * vw_gpu.h — the viewer's GPU side of the one formula: morph and normals on the GPU.
 *
 *   position[v] = base[v] + sculpt[v] + Σ over active targets w_i · Δ_i[v]
 *
 * A vw_gpu handle owns the GL objects for one mesh: base positions and sculpt offsets (vertex
 * buffers), the target deltas (buffer textures, one texel per target and vertex, half floats
 * where the precision budget allows, else 32-bit floats), the welded topology's triangles and
 * vertex→triangle adjacency (buffer textures), and the outputs of the passes:
 *
 *   1. morph   (transform feedback): the morphed position of every render vertex, summing only
 *              the active (non-zero) targets, at most VW_GPU_MAX_ACTIVE per pass;
 *   2. faces   (transform feedback): per welded triangle, its unit normal and corner angles;
 *   3. normals (transform feedback): per welded vertex, the angle-weighted sum over its
 *              triangles, normalised — the same rule as mesh_compute_normals(MESH_NORMALS_ANGLE),
 *              so render vertices split at a UV seam share one normal.
 *
 * Updates are small: vw_gpu_set_weights changes the active list (no buffer of vertices is
 * touched), vw_gpu_set_offsets uploads one range of the sculpt buffer (glBufferSubData).
 * vw_gpu_update reruns the three passes only when something changed since the last run.
 *
 * Drawing reads the morphed positions (vertex buffer) and the normals (buffer texture, via the
 * render→welded map): see vw_gpu_positions_buffer / vw_gpu_normals_texture.
 *
 * DOES NOT create the GL context (vw_context.c does), decode frames, or draw anything on screen
 * (vw_render.c does). Every function must be called with the handle's context current.
 * Errors: 0 or a negative VW_E* code (vw_gl.h), with a reason (shader info log, GL error) in
 * `err`.
 */
#ifndef DEFORMD_VW_GPU_H
#define DEFORMD_VW_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"

#define VW_GPU_MAX_ACTIVE 64 /* active targets per morph pass (more take several passes) */

typedef struct vw_gpu vw_gpu;

/* Uploads `m` (base positions, triangles, every target) and its welded topology `t` (built by
 * the caller with mesh_topology_init; both may go after this returns). `half_budget` is the
 * largest error a target may get from half-float storage, in mesh units (the caller passes
 * e.g. 1e-6 of the bounding-box diagonal; 0 = never half). *out is a new handle: destroy with
 * vw_gpu_destroy (context current). */
int vw_gpu_create(const mesh *m, const mesh_topology *t, double half_budget, vw_gpu **out, char *err, size_t errlen);
void vw_gpu_destroy(vw_gpu *g);

/* Appends a target (a TARGET frame): its deltas join the texture (re-allocated as needed; the
 * targets already there are copied on the GPU). It starts with weight 0. Returns 0, VW_EINVAL
 * (an index out of range or not ascending, a non-finite delta), VW_ETOOBIG (V × targets no
 * longer fits one buffer texture) or VW_EGL / VW_ENOMEM; on failure the handle is unchanged. */
int vw_gpu_add_target(vw_gpu *g, const mesh_target *target, char *err, size_t errlen);

/* All target weights (target_count floats, the replica's): only non-zero ones are summed.
 * Targets beyond target_count weigh 0; weights beyond the handle's targets are ignored. Marks
 * the handle dirty only when the weights actually changed. */
void vw_gpu_set_weights(vw_gpu *g, const float *weights, uint32_t target_count);

/* Sculpt offsets of render vertices [first, first + count) (3 floats each, dequantised). The
 * range is clipped to the vertex count. */
void vw_gpu_set_offsets(vw_gpu *g, uint32_t first, uint32_t count, const float *offsets);

/* Runs the passes if anything changed since the last call. Returns 0 or VW_EGL. */
int vw_gpu_update(vw_gpu *g, char *err, size_t errlen);

/* For drawing: the buffer holding 3 floats of morphed position per render vertex, the buffer
 * texture of unit normals per welded vertex (RGBA32F texels, xyz used), and the buffer texture
 * mapping render vertex → welded vertex (R32UI). GL names; owned by the handle. */
unsigned vw_gpu_positions_buffer(const vw_gpu *g);
unsigned vw_gpu_normals_texture(const vw_gpu *g);
unsigned vw_gpu_render_to_topo_texture(const vw_gpu *g);
unsigned vw_gpu_index_buffer(const vw_gpu *g); /* the render triangles (GL_ELEMENT_ARRAY_BUFFER) */
uint32_t vw_gpu_vertex_count(const vw_gpu *g);
uint32_t vw_gpu_triangle_count(const vw_gpu *g);

/* Reads the current outputs back (after vw_gpu_update): 3 floats per render vertex. For tests,
 * picking and screenshots of state; not used per frame. Return 0 or VW_EGL. */
int vw_gpu_read_positions(vw_gpu *g, float *out);
int vw_gpu_read_normals(vw_gpu *g, float *out); /* per render vertex, via the welded map */

/* How many targets are stored as half floats (the rest as 32-bit floats), and the passes run. */
uint32_t vw_gpu_half_targets(const vw_gpu *g);
uint64_t vw_gpu_updates(const vw_gpu *g);
uint32_t vw_gpu_target_count(const vw_gpu *g);   /* targets uploaded so far */
uint32_t vw_gpu_active_targets(const vw_gpu *g); /* non-zero weights in the active list */

/* Tests only: pretend GL_MAX_TEXTURE_BUFFER_SIZE is `texels` (0 = the context's own value), so
 * the "does not fit" path can be exercised on a GL whose real limit is large. */
void vw__gpu_limit_texels(long long texels);

#endif
