/*
 * mesh_md2.c — MD2 frame names and keyframes.
 *
 * assimp reads MD2 geometry but only one keyframe per import (the one
 * AI_CONFIG_IMPORT_MD2_KEYFRAME names), and never reports the frame names, which are what names
 * the animations: "stand01" … "stand40", "run1" … "run6". So this file
 *   - reads the names from the header and the frame table, after checking every count and
 *     offset it uses against the file size. The importer calls it before assimp sees the file,
 *     so a truncated or lying file is refused with a precise reason (assimp only says "File is
 *     too small");
 *   - reads keyframes 1 .. n-1 with one more assimp import each (mesh_import.c read frame 0),
 *     placed like frame 0 by the node transforms (mesh_scene.c).
 *
 * DOES NOT read skins, texture coordinates, triangles or GL commands (assimp's frame 0 import
 * gives those), or decode MD2 vertices itself.
 */
#include <assimp/cimport.h>
#include <assimp/scene.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

/* The header: 17 little-endian int32 (ident, version, skinwidth, skinheight, framesize,
 * num_skins, num_xyz, num_st, num_tris, num_glcmds, num_frames, ofs_skins, ofs_st, ofs_tris,
 * ofs_frames, ofs_glcmds, ofs_end). A frame: scale[3] and translate[3] floats, name[16], then
 * num_xyz packed vertices of 4 bytes. */
enum { MD2_HEADER = 68, MD2_FRAME_NAME_AT = 24, MD2_FRAME_FIXED = 40 };

static int32_t rd32(const unsigned char *b) {
  return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

int mesh__md2_frame_names(const char *path, char (**names)[MESH__FRAME_NAME_LEN], uint32_t *count,
                          char *err, size_t errlen) {
  *names = NULL;
  *count = 0;
  char (*out)[MESH__FRAME_NAME_LEN] = NULL;
  int rc = MESH_EFORMAT;
  FILE *f = mesh__fopen(path);
  if (!f) {
    mesh__set_err(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return MESH_ENOENT;
  }
  unsigned char h[MD2_HEADER];
  if (fseek(f, 0, SEEK_END) != 0) goto io;
  long size = ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0) goto io;
  if ((size_t)size < sizeof(h) || fread(h, 1, sizeof(h), f) != sizeof(h)) {
    mesh__set_err(err, errlen, "MD2: the file has %ld bytes, less than the %d-byte header", size,
                  MD2_HEADER);
    goto fail;
  }
  if (memcmp(h, "IDP2", 4) != 0 || rd32(h + 4) != 8) {
    mesh__set_err(err, errlen, "MD2: not an MD2 version 8 file (version %d)", rd32(h + 4));
    goto fail;
  }
  int32_t framesize = rd32(h + 16), num_xyz = rd32(h + 24), num_frames = rd32(h + 40);
  int32_t ofs_frames = rd32(h + 56), ofs_end = rd32(h + 64);
  if (num_frames <= 0 || num_xyz < 0 || ofs_frames < MD2_HEADER || ofs_end < MD2_HEADER) {
    mesh__set_err(err, errlen, "MD2: the header is inconsistent (%d frames, %d vertices, frames "
                  "at %d, end at %d)", num_frames, num_xyz, ofs_frames, ofs_end);
    goto fail;
  }
  if ((int64_t)framesize < MD2_FRAME_FIXED + 4 * (int64_t)num_xyz) {
    mesh__set_err(err, errlen, "MD2: frame size %d is too small for %d vertices", framesize,
                  num_xyz);
    goto fail;
  }
  uint64_t frames_end = (uint64_t)ofs_frames + (uint64_t)framesize * (uint64_t)num_frames;
  if (frames_end > (uint64_t)size) {
    mesh__set_err(err, errlen, "MD2: truncated or lying header: %d frames of %d bytes end at byte "
                  "%llu, but the file has %ld bytes", num_frames, framesize,
                  (unsigned long long)frames_end, size);
    goto fail;
  }
  if ((uint64_t)ofs_end > (uint64_t)size) {
    mesh__set_err(err, errlen, "MD2: truncated: the header says the file has %d bytes, but it "
                  "has %ld", ofs_end, size);
    goto fail;
  }
  out = calloc((size_t)num_frames, sizeof(*out));
  if (!out) {
    rc = MESH_ENOMEM;
    goto fail;
  }
  for (int32_t i = 0; i < num_frames; i++) {
    long at = (long)ofs_frames + (long)framesize * i + MD2_FRAME_NAME_AT;
    if (fseek(f, at, SEEK_SET) != 0 || fread(out[i], 1, MESH__FRAME_NAME_LEN, f) != MESH__FRAME_NAME_LEN)
      goto io;
  }
  fclose(f);
  *names = out;
  *count = (uint32_t)num_frames;
  return 0;

io:
  mesh__set_err(err, errlen, "MD2: reading the file failed");
fail:
  free(out);
  fclose(f);
  return rc;
}

int mesh__md2_read_frames(const char *path, uint32_t nframes, const float *frame0, uint32_t vertex_count,
                          const char *assimp_error, float **frames, char *err, size_t errlen) {
  *frames = NULL;
  size_t per = 3 * (size_t)vertex_count;
  float *out = malloc(sizeof(float) * (per * nframes + 1));
  if (!out) return MESH_ENOMEM;
  memcpy(out, frame0, sizeof(float) * per);
  int rc = 0;
  for (uint32_t fr = 1; fr < nframes && rc == 0; fr++) {
    const struct aiScene *sc = NULL;
    if ((rc = mesh__scene_read(path, (int)fr, &sc)) != 0) break;
    if (!sc) {
      mesh__set_err(err, errlen, "keyframe %u of %u: %s", fr, nframes,
                    assimp_error[0] && !mesh__redacting() ? assimp_error : "assimp could not read it");
      rc = MESH_EFORMAT;
      break;
    }
    mesh__scene g;
    rc = mesh__scene_gather(sc, &g);
    uint64_t nv = 0;
    for (uint32_t i = 0; rc == 0 && i < g.count; i++) nv += g.items[i].mesh->mNumVertices;
    if (rc == 0 && nv != vertex_count) {
      mesh__set_err(err, errlen, "keyframe %u has %llu vertices, frame 0 has %u", fr,
                    (unsigned long long)nv, vertex_count);
      rc = MESH_EMISMATCH;
    }
    float *dst = out + per * fr;
    for (uint32_t i = 0, vb = 0; rc == 0 && i < g.count; i++) {
      const struct aiMesh *am = g.items[i].mesh;
      for (unsigned v = 0; v < am->mNumVertices && rc == 0; v++) {
        double p[3];
        mesh__scene_point(&g.items[i].xf, &am->mVertices[v], p);
        for (int k = 0; k < 3; k++) {
          if (!isfinite(p[k])) {
            mesh__set_err(err, errlen, "keyframe %u: vertex %u has a non-finite coordinate", fr,
                          vb + v);
            rc = MESH_ENONFINITE;
          }
          dst[3 * (size_t)(vb + v) + k] = (float)p[k];
        }
      }
      vb += am->mNumVertices;
    }
    mesh__scene_fini(&g);
    aiReleaseImport(sc);
  }
  if (rc != 0) {
    free(out);
    return rc;
  }
  *frames = out;
  return 0;
}
