/*
 * mesh_md3.c — MD3 keyframes.
 *
 * assimp 5.2's MD3 reader always returns frame 0 (AI_CONFIG_IMPORT_MD3_KEYFRAME is read but
 * never used), so the frames are read here. assimp still reads the surfaces, UVs and frame 0;
 * this file supplies each surface's vertex positions for every frame, laid out the way assimp
 * lays out frame 0 (three vertices per triangle, corners in file order). Each of assimp's meshes
 * is matched to the file surface whose frame 0 it reproduces exactly before any frame is
 * trusted, then placed by that mesh's node transform. The frame headers' names ("idle01",
 * "walk01", …) are returned too: they become the mesh's clips (mesh_clip.c).
 *
 * The same walk over the file, every count and offset checked against its size, runs before
 * assimp sees an MD3 (mesh__md3_check), so a file that lies is refused with a reason instead of
 * sending assimp's reader past its buffer or into a 13 GB allocation.
 *
 * DOES NOT read tags, shaders or skins, or import anything through assimp itself (mesh_import.c
 * passes in its scene of frame 0).
 */
#include <assimp/scene.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

/* The file, loaded whole and bounds-checked: every pointer below points into `data`. */
typedef struct md3_surface {
  uint32_t vertex_count, triangle_count;
  const unsigned char *triangles; /* 3 * triangle_count little-endian uint32 */
  const unsigned char *xyz;       /* frame_count * vertex_count * (int16 x, y, z, normal) */
} md3_surface;

typedef struct md3_file {
  unsigned char *data; /* the whole file */
  size_t size;
  uint32_t frame_count, surface_count;
  const unsigned char *frame_headers; /* frame_count × 56 bytes; the name at +40 */
  md3_surface *surfaces;
} md3_file;

static uint32_t rd32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int16_t rd16(const unsigned char *b) {
  return (int16_t)(uint16_t)((uint16_t)b[0] | (uint16_t)b[1] << 8);
}

static void md3_fini(md3_file *f) {
  free(f->data);
  free(f->surfaces);
  memset(f, 0, sizeof(*f));
}

/* Loads `path` whole. Every count and offset is checked against the file size before anything
 * is read. Returns 0 or a MESH_E* code with a reason; free with md3_fini. */
static int md3_load(const char *path, md3_file *f, char *err, size_t errlen) {
  memset(f, 0, sizeof(*f));
  FILE *fp = mesh__fopen(path);
  if (!fp) {
    mesh__set_err(err, errlen, "cannot open '%s'", path);
    return MESH_ENOENT;
  }
  int rc = MESH_EFORMAT;
  if (fseek(fp, 0, SEEK_END) != 0) goto bad;
  long n = ftell(fp);
  if (n < 108) goto bad;
  rewind(fp);
  f->data = malloc((size_t)n);
  if (!f->data) {
    rc = MESH_ENOMEM;
    goto fail;
  }
  f->size = (size_t)n;
  if (fread(f->data, 1, f->size, fp) != f->size) goto bad;
  fclose(fp);
  fp = NULL;

  const unsigned char *h = f->data;
  if (memcmp(h, "IDP3", 4) != 0) goto bad;
  f->frame_count = rd32(h + 76);
  uint32_t ntags = rd32(h + 80), nsurf = rd32(h + 84), ofs_frames = rd32(h + 92);
  uint32_t ofs_tags = rd32(h + 96), ofs_surf = rd32(h + 100), ofs_eof = rd32(h + 104);
  if (nsurf > 4096) {
    mesh__set_err(err, errlen, "MD3: %u surfaces, more than 4096", nsurf);
    goto fail;
  }
  if (f->frame_count == 0 || ofs_surf > f->size || ofs_eof > f->size) goto bad;
  /* Frame headers: min_bounds[3], max_bounds[3], local_origin[3], radius, name[16]. */
  if ((uint64_t)ofs_frames + 56ull * f->frame_count > f->size) goto bad;
  /* Tags: 112 bytes (name[64], origin[3], axis[9]) per tag and frame. assimp sizes its tag
   * arrays from these counts before reading: 2^31 tags took it past 13 GB. */
  if ((uint64_t)ofs_tags + 112ull * ntags * f->frame_count > f->size) {
    mesh__set_err(err, errlen, "MD3: %u tags × %u frames of 112 bytes at byte %u lie outside the "
                  "file of %zu bytes", ntags, f->frame_count, ofs_tags, f->size);
    goto fail;
  }
  f->frame_headers = f->data + ofs_frames;
  f->surfaces = calloc(nsurf + 1, sizeof(*f->surfaces));
  if (!f->surfaces) {
    rc = MESH_ENOMEM;
    goto fail;
  }
  size_t at = ofs_surf;
  for (uint32_t s = 0; s < nsurf; s++) {
    if (at + 108 > f->size) goto bad;
    const unsigned char *sh = f->data + at;
    uint32_t frames = rd32(sh + 72), nshaders = rd32(sh + 76), nv = rd32(sh + 80), nt = rd32(sh + 84);
    uint32_t ofs_tri = rd32(sh + 88), ofs_shaders = rd32(sh + 92), ofs_st = rd32(sh + 96);
    uint32_t ofs_xyz = rd32(sh + 100), ofs_end = rd32(sh + 104);
    if (frames != f->frame_count) {
      mesh__set_err(err, errlen, "MD3 surface %u has %u frames, the header %u", s, frames,
                    f->frame_count);
      rc = MESH_EMISMATCH;
      goto fail;
    }
    /* 64-bit arithmetic: no count can wrap the bounds checks. */
    if ((uint64_t)at + ofs_tri + 12ull * nt > f->size ||
        (uint64_t)at + ofs_xyz + 8ull * nv * frames > f->size || ofs_end == 0 ||
        (uint64_t)at + ofs_end > f->size || (uint64_t)at + ofs_shaders + 68ull * nshaders > f->size ||
        (uint64_t)at + ofs_st + 8ull * nv > f->size)
      goto bad;
    md3_surface *out = &f->surfaces[f->surface_count++];
    out->vertex_count = nv;
    out->triangle_count = nt;
    out->triangles = f->data + at + ofs_tri;
    out->xyz = f->data + at + ofs_xyz;
    for (uint32_t t = 0; t < 3 * nt; t++)
      if (rd32(out->triangles + 4 * (size_t)t) >= nv) {
        mesh__set_err(err, errlen, "MD3 surface %u: triangle %u references vertex %u of %u", s,
                      t / 3, rd32(out->triangles + 4 * (size_t)t), nv);
        rc = MESH_ERANGE;
        goto fail;
      }
    at += ofs_end;
  }
  return 0;

bad:
  mesh__set_err(err, errlen, "MD3: header or surface offsets lie outside the file");
  rc = MESH_EFORMAT;
fail:
  if (fp) fclose(fp);
  md3_fini(f);
  return rc;
}

int mesh__md3_check(const char *path, char *err, size_t errlen) {
  md3_file f;
  int rc = md3_load(path, &f, err, errlen);
  if (rc == 0) md3_fini(&f);
  return rc;
}

/* Positions of surface `surface` at `frame`, three per triangle, corners in file order (the
 * layout assimp uses): `out` has 9 * triangle_count floats. */
static void md3_expand(const md3_file *f, uint32_t surface, uint32_t frame, float *out) {
  const md3_surface *s = &f->surfaces[surface];
  const unsigned char *xyz = s->xyz + 8 * (size_t)s->vertex_count * frame;
  for (uint32_t c = 0; c < 3 * s->triangle_count; c++) {
    uint32_t v = rd32(s->triangles + 4 * (size_t)c);
    /* MD3 stores coordinates as int16 in units of 1/64. */
    for (int k = 0; k < 3; k++) out[3 * (size_t)c + k] = rd16(xyz + 8 * (size_t)v + 2 * k) * (1.0f / 64.0f);
  }
}

int mesh__md3_read_frames(const char *path, const mesh__scene *g, uint32_t nframes, uint32_t vertex_count,
                          float **frames, char (**names)[MESH__FRAME_NAME_LEN], uint32_t *count, char *err,
                          size_t errlen) {
  *frames = NULL;
  *names = NULL;
  *count = 0;
  md3_file f;
  int rc = md3_load(path, &f, err, errlen);
  if (rc) return rc;
  uint32_t *surface_of = malloc(sizeof(uint32_t) * (g->count + 1));
  uint8_t *taken = calloc(f.surface_count + 1, 1);
  float *tmp = NULL;
  size_t tmp_len = 0;
  if (nframes > f.frame_count) nframes = f.frame_count;
  size_t per = 3 * (size_t)vertex_count;
  float *out = malloc(sizeof(float) * (per * nframes + 1));
  char (*out_names)[MESH__FRAME_NAME_LEN] = malloc(sizeof(*out_names) * ((size_t)nframes + 1));
  if (!surface_of || !taken || !out || !out_names) {
    rc = MESH_ENOMEM;
    goto done;
  }
  for (uint32_t fr = 0; fr < nframes; fr++)
    memcpy(out_names[fr], f.frame_headers + 56 * (size_t)fr + 40, MESH__FRAME_NAME_LEN);
  for (uint32_t i = 0; i < g->count; i++) {
    const struct aiMesh *am = g->items[i].mesh;
    surface_of[i] = UINT32_MAX;
    for (uint32_t s = 0; s < f.surface_count && surface_of[i] == UINT32_MAX; s++) {
      if (taken[s] || 3 * f.surfaces[s].triangle_count != am->mNumVertices) continue;
      if (tmp_len < 3 * (size_t)am->mNumVertices) {
        free(tmp);
        tmp_len = 3 * (size_t)am->mNumVertices;
        tmp = malloc(sizeof(float) * tmp_len);
        if (!tmp) {
          rc = MESH_ENOMEM;
          goto done;
        }
      }
      md3_expand(&f, s, 0, tmp);
      int same = 1;
      for (unsigned v = 0; v < am->mNumVertices && same; v++)
        same = tmp[3 * v] == am->mVertices[v].x && tmp[3 * v + 1] == am->mVertices[v].y &&
               tmp[3 * v + 2] == am->mVertices[v].z;
      if (same) {
        surface_of[i] = s;
        taken[s] = 1;
      }
    }
    if (surface_of[i] == UINT32_MAX) {
      mesh__set_err(err, errlen, "MD3: assimp's mesh %u matches no surface of the file", i);
      rc = MESH_EFORMAT;
      goto done;
    }
  }
  for (uint32_t fr = 0; fr < nframes; fr++) {
    float *dst = out + per * fr;
    uint32_t vb = 0;
    for (uint32_t i = 0; i < g->count; i++) {
      const struct aiMesh *am = g->items[i].mesh;
      md3_expand(&f, surface_of[i], fr, tmp);
      for (unsigned v = 0; v < am->mNumVertices; v++) {
        struct aiVector3D q = {tmp[3 * v], tmp[3 * v + 1], tmp[3 * v + 2]};
        double p[3];
        mesh__scene_point(&g->items[i].xf, &q, p);
        for (int k = 0; k < 3; k++) dst[3 * (size_t)(vb + v) + k] = (float)p[k];
      }
      vb += am->mNumVertices;
    }
  }
  *frames = out;
  *names = out_names;
  *count = nframes;
  out = NULL;
  out_names = NULL;
done:
  free(out);
  free(out_names);
  free(surface_of);
  free(taken);
  free(tmp);
  md3_fini(&f);
  return rc;
}
