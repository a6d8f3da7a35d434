/*
 * mesh_io.h — where a mesh comes from and where it goes: import through assimp (with the header
 * checks and the confinement beneath a folder), export to OBJ and GLB, opening files beneath a
 * folder, the exact byte blob the import worker and the store use, and the generated demo
 * meshes.
 *
 * DOES NOT decide which folders a client may read (server/deformd/files/) and keeps no state:
 * every function is synchronous and may run on any thread. Ownership is said per function.
 */
#ifndef DEFORMD_MESH_IO_H
#define DEFORMD_MESH_IO_H

#include <stddef.h>
#include <stdint.h>

#include "mesh_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Import and export (mesh_import.c, mesh_export.c)
 */

typedef struct mesh_import_opts {
  uint32_t max_vertices;    /* refuse files with more render vertices; 0 = 5,000,000 */
  uint32_t max_frames;      /* keyframes read from MD2/MD3; 0 = all */
  int keep_unreferenced;    /* non-zero: do not drop vertices no triangle uses (tests only) */
  /* Confinement (a server importing what a client names): when root_count > 0, `path` is a
   * name relative to one of these folders (open descriptors, tried in order), and the mesh and
   * every file it refers to are opened beneath the folder it was found in (mesh_open_beneath):
   * no absolute path, no "..", no symlink out. A name found in none of them, or one that is not
   * a relative name (mesh_name_ok), fails with MESH_ENOENT and one message that says nothing
   * about why. */
  const int *roots;
  uint32_t root_count;
  int redact;               /* non-zero: error messages echo nothing read from the file (names
                             * in it become '…', assimp's own messages are reduced to the
                             * format and a reason) */
  uint64_t max_file_bytes;  /* refuse larger files (MESH_ETOOBIG); 0 = no limit */
} mesh_import_opts;

#define MESH_DEFAULT_MAX_VERTICES 5000000u

/* Imports a mesh file through assimp: OBJ, PLY (ASCII, binary, triangle strips), OFF, STL,
 * glTF 2.0 / GLB (morph targets, extras.targetNames, mesh.weights, morph-weight animations as
 * weight clips), MD2 / MD3 (all keyframes, grouped into clips by frame name), and anything else
 * assimp reads. Polygons are triangulated, points and lines dropped, every mesh of the file
 * placed by its node transform and joined into one mesh with submesh ranges, render vertices
 * that are identical in every attribute merged, unreferenced ones dropped.
 * Before assimp reads a file, the counts its header declares are checked against the file's
 * size wherever the format has them (OFF, PLY, MD2, MD3), and a lying header is refused.
 * `opts` may be NULL. On success *out is a new mesh the caller frees with mesh_destroy().
 * On failure returns a MESH_E* code, writes the reason into `err`, and leaves *out NULL.
 * Thread-safe: imports may run concurrently on different threads. */
int mesh_import(const char *path, const mesh_import_opts *opts, mesh **out, char *err,
                size_t errlen);

typedef enum mesh_format {
  MESH_FORMAT_AUTO = 0,  /* from the file name's extension */
  MESH_FORMAT_OBJ,
  MESH_FORMAT_GLB
} mesh_format;

/* The same into memory: *out (malloc'ed, the caller frees it) of *len bytes, in `fmt` (OBJ or
 * GLB; AUTO is MESH_EINVAL here). Returns 0 or a MESH_E* code with a reason in `err`. */
int mesh_export_mem(const mesh *m, const float *positions, mesh_format fmt, uint8_t **out, size_t *len,
                    char *err, size_t errlen);

/* What mesh_export_mem_opts adds; zeros are mesh_export_mem. */
typedef struct mesh_export_opts {
  int z_up; /* the positions are Z-up: GLB (Y-up by the glTF spec) gets the root node rotation
             * -90° about X, so that the vertex data stays as it is and an importer shows it
             * upright; OBJ has no up axis and is written as it is */
  const char *mtllib; /* OBJ: the MTL file it names (mtllib, usemtl material<i> per submesh); NULL: none */
} mesh_export_opts;
int mesh_export_mem_opts(const mesh *m, const float *positions, mesh_format fmt, const mesh_export_opts *opts,
                         uint8_t **out, size_t *len, char *err, size_t errlen);

/* An OBJ with its materials as files: the PNG of each image (`stem`_N.png), the MTL (`stem`.mtl,
 * Kd and map_Kd per submesh) and last the OBJ `obj_name` (naming the MTL), `stem` being its file
 * name without ".obj" and each name in its folder; only the OBJ when no submesh has a colour or a
 * texture. *files (count entries) is malloc'ed: free with mesh_export_files_free. Returns 0 or a
 * MESH_E* code with a reason. */
typedef struct mesh_export_file {
  char *name;
  uint8_t *bytes;
  size_t len;
} mesh_export_file;
int mesh_export_obj_files(const mesh *m, const float *positions, const char *obj_name, mesh_export_file **files,
                          uint32_t *count, char *err, size_t errlen);
void mesh_export_files_free(mesh_export_file *files, uint32_t count);

/* Writes the mesh to `path` (an OBJ with its MTL and PNGs beside it, mesh_export_obj_files). `positions` replaces the mesh's own positions when not NULL (the
 * current shape of a session); normals are recomputed from whichever positions are written.
 * OBJ keeps the render vertex order exactly (v i is vertex i-1). GLB goes through assimp's
 * glTF 2 exporter and carries the morph targets with extras.targetNames and default weights.
 * Returns 0 or a MESH_E* code with a reason in `err`. */
int mesh_export(const mesh *m, const float *positions, const char *path, mesh_format fmt,
                char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------
 * Files beneath a folder (mesh_file.c)
 */

/* openat2(root_fd, name, flags | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): `name`
 * must resolve inside the folder root_fd names, through no absolute path, ".." or symlink that
 * leaves it (Linux 5.6 or later). `mode` applies with O_CREAT. Returns the descriptor or a
 * negative errno (-EXDEV for a name that would leave the folder). */
int mesh_open_beneath(int root_fd, const char *name, int flags, unsigned mode);

/* Whether `name` is a relative name a client may give: 1 to max_len bytes, components
 * separated by single '/', none empty, "." or "..", no leading '/', no control character or
 * backslash. Syntax only: nothing is opened. */
int mesh_name_ok(const char *name, size_t max_len);

/* ---------------------------------------------------------------------------------------------
 * Blobs (mesh_blob.c): a whole mesh as one exact byte string — positions, normals, UVs,
 * triangles, targets (names, default weights, sparse deltas), keyframes, clips, submeshes and
 * bounds — little-endian, versioned ("DFMB" + version), ending in a CRC-32. The import worker
 * sends meshes over a pipe in it; the session store keeps imported meshes in it. A round trip
 * gives back every value bit for bit.
 */

/* Exact size in bytes of m's blob. Returns 0, MESH_EINVAL (an array missing for its count) or
 * MESH_ETOOBIG (does not fit in size_t). */
int mesh_blob_size(const mesh *m, size_t *len);

/* Writes m's blob into dst, which must be exactly mesh_blob_size() bytes long (`len`).
 * Returns 0 or MESH_EINVAL / MESH_ETOOBIG; nothing is allocated. */
int mesh_blob_encode(const mesh *m, uint8_t *dst, size_t len);

/* m's blob in a fresh malloc'ed buffer: *out (the caller frees it with free()) of *len bytes.
 * Returns 0, MESH_EINVAL, MESH_ETOOBIG or MESH_ENOMEM (then *out is NULL). */
int mesh_blob_write(const mesh *m, uint8_t **out, size_t *len);

/* Reads a blob of `n` bytes. Every count is checked against the bytes present before anything
 * is allocated for it; a mesh with more than `max_vertices` vertices (0 = MESH_DEFAULT_MAX_VERTICES)
 * is refused; the result passes mesh_validate(). On success *out is a new mesh the caller frees
 * with mesh_destroy(). On failure returns MESH_EFORMAT (bad magic or version, truncated, CRC
 * mismatch, trailing bytes, a name with a NUL), MESH_ETOOBIG, MESH_ENOMEM or what
 * mesh_validate() found, with a reason in `err`, and leaves *out NULL. Never reads outside
 * p[0..n). */
int mesh_blob_read(const uint8_t *p, size_t n, uint32_t max_vertices, mesh **out, char *err,
                   size_t errlen);

/* CRC-32 as zlib and PNG compute it (reflected polynomial 0xEDB88320), used for the blob's
 * trailer. */
uint32_t mesh_blob_crc32(const uint8_t *p, size_t n);

/* ---------------------------------------------------------------------------------------------
 * Demo head (mesh_demo.c)
 */

/* Generates the bundled demo head deterministically: a closed head-like surface of about 40k
 * render vertices with UVs (split at a seam behind the head), normals, and 16 named blendshapes
 * (jaw_open, smile_L/R, frown_L/R, brow_up_L/R, brow_down_L/R, blink_L/R, cheek_puff,
 * nose_wide, lip_pucker, mouth_left, mouth_right). Units are metres, +Y up, the face looks
 * towards +Z. Returns 0 or MESH_ENOMEM; *out is owned by the caller (mesh_destroy). */
int mesh_demo_head(mesh **out);

/* An icosphere of `radius`: the icosahedron subdivided `levels` times (10·4^levels + 2
 * vertices; 6 gives 40962, 7 gives 163842), the shape benchmarks compare solvers on. Returns 0,
 * MESH_EINVAL (levels > 10) or MESH_ENOMEM. */
int mesh_demo_icosphere(uint32_t levels, double radius, mesh **out);

/* A closed bumpy sphere of radius about 1 as a volumetric scan reconstructs one: extracted from
 * an (n + 1)^3 grid of samples over [-1.25, 1.25]^3 by marching tetrahedra, every vertex on a
 * grid edge (so most share two or one coordinates with their neighbours exactly; n = 40 gives
 * about 20k vertices). The same bits on every run. Returns 0, MESH_EINVAL (n outside 4..256) or
 * MESH_ENOMEM. */
int mesh_demo_voxel_sphere(uint32_t n, mesh **out);

#ifdef __cplusplus
}
#endif

/* Decodes an image file's bytes (PNG, JPEG, BMP, TGA through stb_image; 8-bit paletted and
 * 24/32-bit PCX) into out->width, height and rgba (RGBA8, row 0 the top; the caller frees rgba;
 * out->name is left NULL). Returns 0; MESH_EFORMAT with a reason for bytes that are no image read
 * here, a truncated one, or one over MESH_MAX_IMAGE_SIDE a side (checked before allocating);
 * MESH_ENOMEM. (mesh_image.c) */
int mesh_image_decode(const uint8_t *bytes, size_t len, mesh_image *out, char *err, size_t errlen);
/* The image as PNG (stb_image_write; RGB when every pixel is opaque, else RGBA): *out malloc'ed,
 * the caller frees it. Returns 0 or MESH_ENOMEM. (mesh_export_mat.c) */
int mesh_image_png(const mesh_image *im, uint8_t **out, size_t *len);

#endif /* DEFORMD_MESH_IO_H */
