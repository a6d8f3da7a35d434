/*
 * vw_shaders.h — internal to viewer/: the GLSL sources of the GPU passes (all in vw_shaders.c)
 * and the one function that compiles and links them.
 *
 * DOES NOT set uniforms or run anything (vw_gpu.c does).
 */
#ifndef DEFORMD_VW_SHADERS_H
#define DEFORMD_VW_SHADERS_H

#include "vw_gl.h"

typedef struct vw__program {
  GLuint id;
} vw__program;

typedef struct vw__program_desc {
  const char *label;              /* names the program in error messages */
  const char *vs;                 /* vertex shader source (required) */
  const char *fs;                 /* fragment shader source; NULL for transform-feedback-only */
  const char *const *feedback;    /* transform feedback varyings, interleaved into buffer 0 */
  int feedback_count;
} vw__program_desc;

/* Compiles and links `d`. Returns 0, or VW_ESHADER with "<label> vertex shader: <info log>"
 * (or "... link: <log>") in `err`, or VW_EGL. *p is zeroed on failure. */
int vw__program_make(vw__program *p, const vw__program_desc *d, char *err, size_t errlen);
void vw__program_free(vw__program *p);

/* The passes of vw_gpu.c (see vw_gpu.h for what each computes). */
typedef enum vw__pass {
  VW__PASS_MORPH = 0,  /* render vertex -> morphed position (vec3) */
  VW__PASS_FACES,      /* welded triangle -> 3 × (unit normal, corner angle) */
  VW__PASS_NORMALS,    /* welded vertex -> unit normal (vec4, w = 0) */
  VW__PASS_COUNT
} vw__pass;

/* The descriptor of a pass's program (static storage). */
const vw__program_desc *vw__pass_program(vw__pass pass);

/* The programs of vw_render.c: the lit mesh and the 2D overlay. */
typedef enum vw__render_kind { VW__RENDER_MESH = 0, VW__RENDER_UI = 1 } vw__render_kind;
const vw__program_desc *vw__render_program(vw__render_kind kind);

/* Uniform arrays of the morph shader are ivec4/vec4 packed: VW_GPU_MAX_ACTIVE / 4 of each. */
#define VW__MORPH_VEC4S (VW_GPU_MAX_ACTIVE / 4)

#endif
