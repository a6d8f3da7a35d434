/*
 * pca.h — PCA compression of vertex animations: a clip of F frames of V render vertices becomes a
 * mean shape, K orthonormal components and K weights per frame (GPU Gems 3, ch. 15, "Playable
 * Universal Capture"), optionally one PCA per region of the mesh ("variable PCA").
 *
 * This module DOES:    centre the frames, decompose them in double (the F×F Gram matrix with
 *                      LAPACK dsyevr when F <= 3V, else dgesdd on the frames), find the numerical
 *                      rank, measure the maximum vertex error for every component count, choose
 *                      the count from a component budget or an error budget, store the result as
 *                      float, and project, reconstruct and measure single frames.
 * This module DOES NOT: quantise weights, encode frames, stream, or know about sessions and
 *                      threads. pca_build is synchronous and may take a while on big clips: the
 *                      server runs it on its thread pool. The other functions are cheap,
 *                      allocation-free and safe to call concurrently on one model.
 *
 * Errors: 0 or a negative PCA_E* code; pca_strerror() names the code, and `err` (may be NULL)
 * gets one line a user can act on ("frame 12 vertex 40 has a non-finite coordinate").
 *
 * Layout: a shape is 3V floats (x, y, z per vertex); frames are F shapes back to back; the basis
 * is K rows of 3V; weights are F rows of K. "Vertex error" is the Euclidean distance between a
 * vertex and its reconstruction, in the units of the positions.
 */
#ifndef DEFORMD_PCA_H
#define DEFORMD_PCA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: their own range, below -7000 (mesh -4xxx, protocol -5xxx, dfm -6xxx). */
enum {
  PCA_EINVAL = -7001,     /* bad argument: no frames, no vertices, no budget, bad region id */
  PCA_ENONFINITE = -7002, /* NaN or Inf in the frames (err names the frame and vertex) */
  PCA_ENOMEM = -7003,     /* allocation failed */
  PCA_ELAPACK = -7004,    /* LAPACK reported a failure (err quotes the routine and its info) */
  PCA_ETOOBIG = -7005     /* a dimension does not fit LAPACK's 32-bit integers */
};

/* Returns a static string naming `code` (any PCA_E* code or 0). */
const char *pca_strerror(int code);

/* Which decomposition pca_build used (or is asked to use). */
enum { PCA_AUTO = 0, PCA_GRAM = 1, PCA_SVD = 2 };

typedef struct pca_options {
  uint32_t components; /* > 0: keep exactly this many (clamped to the rank; see pca_model.clamped) */
  double max_error;    /* used when components == 0: the fewest components whose maximum vertex
                          error over all frames is <= max_error (same units as the positions) */
  int method;          /* PCA_AUTO (0): Gram when F <= 3V, else SVD. PCA_GRAM / PCA_SVD force one
                          (tests compare the two) */
} pca_options;

/* A compressed clip. Filled by pca_build(); every array is owned by the model and freed by
 * pca_fini(). Arrays of size zero are NULL (basis and weights when components == 0). */
typedef struct pca_model {
  uint32_t frame_count, vertex_count;
  uint32_t components;      /* K, the number kept */
  uint32_t rank;            /* numerical rank of the centred frames (see singular_values) */
  uint32_t requested;       /* opt->components (0 when K was chosen by max_error) */
  int clamped;              /* requested > rank: only `rank` components exist */
  int budget_met;           /* max_error <= opt->max_error (always 1 when components were given);
                               0 when even `rank` components cannot reach the budget */
  float *mean;              /* 3V */
  float *basis;             /* K × 3V: row k = component k; orthonormal (computed in double) */
  float *weights;           /* F × K: row f = frame f's weights, basis · (frame - mean) */
  double rms_error;         /* over all frames and vertices, of mean + Σ w·basis computed in
                               double from the float arrays as stored (pca_frame_error) */
  double max_error;         /* the largest vertex error of the same reconstruction */
  double *max_error_by_count; /* rank + 1: max vertex error keeping 0, 1, ..., rank components
                                 (in double, before the float rounding of the stored arrays) */
  double *rms_error_by_count; /* rank + 1: the same for the RMS vertex error */
  uint32_t singular_count;  /* min(F, 3V) */
  double *singular_values;  /* singular_count, descending, of the centred F × 3V frame matrix */
  double rank_tolerance;    /* singular values at or below it are noise: the float rounding of
                               the input positions, or the precision of the decomposition */
  int method;               /* PCA_GRAM or PCA_SVD: which decomposition was used */
  double build_ms;          /* wall time of pca_build */
} pca_model;

/* Compresses `frame_count` frames (frame_count × 3·vertex_count floats, not kept) into *out.
 * The rank counts the singular values above rank_tolerance; components beyond it would only
 * encode float rounding noise and are never kept. With opt->components == 0 the count is the
 * fewest meeting opt->max_error, checked again on the float arrays as stored (one more component
 * is taken if rounding pushed the error over); if no count up to the rank meets it, K = rank and
 * budget_met = 0 (not an error).
 * Returns 0, PCA_EINVAL, PCA_ENONFINITE, PCA_ENOMEM, PCA_ELAPACK or PCA_ETOOBIG with a reason
 * in `err`. On success the caller frees *out with pca_fini(); on failure *out is zeroed. */
int pca_build(const float *frames, uint32_t frame_count, uint32_t vertex_count,
              const pca_options *opt, pca_model *out, char *err, size_t errlen);

/* Frees everything the model owns and zeroes it. A zeroed model is allowed. */
void pca_fini(pca_model *m);

/* weights[k] = basis_k · (shape - mean), K floats, computed in double. */
void pca_project(const pca_model *m, const float *shape, float *weights);

/* out = mean + Σ_k weights[k] · basis_k (3V floats), computed in double then rounded. */
void pca_reconstruct(const pca_model *m, const float *weights, float *out);

/* The RMS and maximum vertex error of `frame` against mean + Σ weights·basis (computed in
 * double from the float arrays), for arbitrary weights, e.g. after the server quantised them.
 * Either output may be NULL. */
void pca_frame_error(const pca_model *m, const float *frame, const float *weights, double *rms,
                     double *max);

/* ---------------------------------------------------------------------------------------------
 * Region budgets ("variable PCA", GPU Gems 3 ch. 15): the mesh is split into regions and each
 * gets its own PCA over its own vertices, with the fewest components meeting the same max_error
 * budget. Regions that move little (the back of a head) need few components; busy ones (the
 * mouth) need many, instead of every vertex paying for the busiest region's count.
 */

typedef struct pca_region {
  uint32_t vertex_count;
  uint32_t *vertices;   /* vertex_count ascending mesh vertex indices (owned); NULL when empty */
  pca_model model;      /* the region's PCA: its shapes are 3·vertex_count floats in the order
                           of `vertices` (a sparse basis); zeroed when the region is empty */
} pca_region;

typedef struct pca_regions {
  uint32_t frame_count, vertex_count, region_count;
  pca_region *regions;        /* region_count (owned) */
  uint32_t total_components;  /* Σ K_r: the weights streamed per frame */
  int budget_met;             /* every region met its budget */
  double rms_error;           /* over the whole mesh and all frames (stored float arrays) */
  double max_error;           /* the largest vertex error of any region */
  double build_ms;
} pca_regions;

/* One PCA per region: region_of_vertex has V entries in [0, region_count). With
 * opt->components > 0 every region keeps that many (clamped to its rank); otherwise each region
 * gets the fewest components meeting opt->max_error. Empty regions are allowed (no components).
 * Returns 0 or a PCA_E* code with a reason in `err` ("region 2: ..."). On success the caller
 * frees *out with pca_regions_fini(); on failure *out is zeroed. */
int pca_build_regions(const float *frames, uint32_t frame_count, uint32_t vertex_count,
                      const uint32_t *region_of_vertex, uint32_t region_count,
                      const pca_options *opt, pca_regions *out, char *err, size_t errlen);

/* Frees everything and zeroes *r. A zeroed struct is allowed. */
void pca_regions_fini(pca_regions *r);

/* Writes the whole shape (3V floats) from `weights`: total_components floats, region 0's first,
 * then region 1's, ... (the order a stream would carry them). */
void pca_regions_reconstruct(const pca_regions *r, const float *weights, float *out);

#ifdef __cplusplus
}
#endif

#endif
