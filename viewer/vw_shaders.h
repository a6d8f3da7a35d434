/*
 * vw_shaders.h — internal to viewer/: every GLSL source of deform-view (all in vw_shaders.c),
 * each as the descriptor vw__gl_program_make compiles: a label, its stages and, for the
 * transform-feedback passes, the varyings they capture.
 *
 * DOES NOT compile, set uniforms or run anything: it is data. vw_gl.c compiles the descriptors;
 * vw_gpu.c runs the passes, vw_render.c draws with the mesh and overlay programs.
 */
#ifndef DEFORMD_VW_SHADERS_H
#define DEFORMD_VW_SHADERS_H

#include "vw_gl.h" /* vw__gl_program_desc */

/* The passes of vw_gpu.c (see vw_gpu.h for what each computes). */
typedef enum vw__shaders_pass {
  VW__SHADERS_MORPH = 0,  /* render vertex -> morphed position (vec3) */
  VW__SHADERS_FACES,      /* welded triangle -> 3 × (unit normal, corner angle) */
  VW__SHADERS_NORMALS,    /* welded vertex -> unit normal (vec4, w = 0) */
  VW__SHADERS_PASS_COUNT
} vw__shaders_pass;

extern const vw__gl_program_desc vw__shaders_passes[VW__SHADERS_PASS_COUNT];

/* vw_render.c: the lit mesh, the lit mesh with its wireframe (one pass, lines fading where
 * triangles are small on screen) and the 2D overlay. */
extern const vw__gl_program_desc vw__shaders_mesh;
extern const vw__gl_program_desc vw__shaders_wire;
extern const vw__gl_program_desc vw__shaders_overlay;

/* bench_view.c: the tutorial path it measures against (CPU-morphed positions and normals). */
extern const vw__gl_program_desc vw__shaders_tutorial;
/* Animated texture clips: a clip's frame rebuilt into its own texture (vw_texclip.c). */
extern const vw__gl_program_desc vw__shaders_texclip;

/* Active targets one morph pass sums: its uniform arrays are ivec4/vec4 packed, a quarter as
 * many of each. vw_gpu.h's VW_GPU_MAX_ACTIVE is this number (vw_gpu.c checks it), kept here
 * too so that the sources need nothing from vw_gpu. */
#define VW__SHADERS_MAX_ACTIVE 64
#define VW__SHADERS_MORPH_VEC4S (VW__SHADERS_MAX_ACTIVE / 4)

#endif
