/*
 * mesh_md3.c — MD3 keyframes.
 *
 * assimp 5.2's MD3 reader always returns frame 0 (AI_CONFIG_IMPORT_MD3_KEYFRAME is read but
 * never used), so the frames are read here. assimp still reads the surfaces, UVs and frame 0;
 * this file only supplies each surface's vertex positions for a given frame, laid out the way
 * assimp lays out frame 0 (three vertices per triangle, corners in file order). mesh_import
 * checks that layout against assimp's frame 0 before trusting it. It also points at the frame
 * headers, whose names ("idle01", "walk01", …) become the mesh's clips.
 *
 * DOES NOT read tags, shaders or skins.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mesh_internal.h"

static uint32_t rd32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int16_t rd16(const unsigned char *b) {
  return (int16_t)(uint16_t)((uint16_t)b[0] | (uint16_t)b[1] << 8);
}

void mesh__md3_fini(mesh__md3 *f) {
  free(f->data);
  free(f->surfaces);
  memset(f, 0, sizeof(*f));
}

/* Every count and offset is checked against the file size before anything is read. */
int mesh__md3_load(const char *path, mesh__md3 *f, char *err, size_t errlen) {
  memset(f, 0, sizeof(*f));
  FILE *fp = fopen(path, "rb");
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
  uint32_t nsurf = rd32(h + 84), ofs_frames = rd32(h + 92), ofs_surf = rd32(h + 100);
  if (f->frame_count == 0 || nsurf > 4096 || ofs_surf > f->size) goto bad;
  /* Frame headers: min_bounds[3], max_bounds[3], local_origin[3], radius, name[16]. */
  if ((uint64_t)ofs_frames + 56ull * f->frame_count > f->size) goto bad;
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
    uint32_t frames = rd32(sh + 72), nv = rd32(sh + 80), nt = rd32(sh + 84);
    uint32_t ofs_tri = rd32(sh + 88), ofs_xyz = rd32(sh + 100), ofs_end = rd32(sh + 104);
    if (frames != f->frame_count) {
      mesh__set_err(err, errlen, "MD3 surface %u has %u frames, the header %u", s, frames,
                    f->frame_count);
      rc = MESH_EMISMATCH;
      goto fail;
    }
    /* 64-bit arithmetic: no count can wrap the bounds checks. */
    if ((uint64_t)at + ofs_tri + 12ull * nt > f->size ||
        (uint64_t)at + ofs_xyz + 8ull * nv * frames > f->size || ofs_end == 0 ||
        (uint64_t)at + ofs_end > f->size)
      goto bad;
    mesh__md3_surface *out = &f->surfaces[f->surface_count++];
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
  mesh__md3_fini(f);
  return rc;
}

void mesh__md3_expand(const mesh__md3 *f, uint32_t surface, uint32_t frame, float *out) {
  const mesh__md3_surface *s = &f->surfaces[surface];
  const unsigned char *xyz = s->xyz + 8 * (size_t)s->vertex_count * frame;
  for (uint32_t c = 0; c < 3 * s->triangle_count; c++) {
    uint32_t v = rd32(s->triangles + 4 * (size_t)c);
    /* MD3 stores coordinates as int16 in units of 1/64. */
    for (int k = 0; k < 3; k++) out[3 * (size_t)c + k] = rd16(xyz + 8 * (size_t)v + 2 * k) * (1.0f / 64.0f);
  }
}
