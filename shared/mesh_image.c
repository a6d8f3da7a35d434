/*
 * mesh_image.c — the base-colour textures a mesh file names, decoded to RGBA8.
 *
 * PNG, JPEG, BMP and TGA go through stb_image (Debian's libstb, compiled in); PCX, which Quake
 * II's MD2 skins usually are and stb_image does not read, is decoded here: 8-bit paletted (one
 * plane and the 256-colour palette after a 0x0C byte at the end) and 24/32-bit (three or four
 * planes of 8 bits), run-length encoded as ZSoft's format says. Every size is checked against
 * the bytes present and against MESH_MAX_IMAGE_SIDE before anything is allocated, so a lying
 * header costs nothing (the import worker's memory limit is the last guard, not the first).
 *
 * A texture's name is resolved as the import resolves everything else a file names: beside the
 * mesh file, through mesh__fopen (beneath its folder when the import is confined).
 *
 * DOES NOT resample, convert colour spaces (the bytes are the file's: sRGB for every format read
 * here) or flip: row 0 is the top of the image, as in the files; UVs say where v = 0 lies.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>

#include "mesh.h"
#include "mesh_internal.h"

#define PCX_HEADER 128u
#define PCX_PALETTE 769u /* 0x0C and 256 RGB triples, at the end of an 8-bit file */

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

static int side_ok(uint64_t w, uint64_t h) {
  return w >= 1 && h >= 1 && w <= MESH_MAX_IMAGE_SIDE && h <= MESH_MAX_IMAGE_SIDE;
}

static int is_pcx(const uint8_t *b, size_t n) {
  return n >= PCX_HEADER && b[0] == 0x0A && b[1] <= 5 && b[2] == 1;
}

/* ZSoft PCX, version 5: header, then per scanline `planes` runs of `bpl` bytes, RLE coded
 * (a byte with its top two bits set repeats the next byte that many times, the low six bits). */
static int decode_pcx(const uint8_t *b, size_t n, mesh_image *out, char *err, size_t errlen) {
  uint32_t bits = b[3], planes = b[65], bpl = le16(b + 66);
  uint64_t w = (uint64_t)le16(b + 8) - le16(b + 4) + 1, h = (uint64_t)le16(b + 10) - le16(b + 6) + 1;
  if (le16(b + 8) < le16(b + 4) || le16(b + 10) < le16(b + 6) || !side_ok(w, h)) {
    mesh__set_err(err, errlen, "PCX image of %llu x %llu pixels (at most %u a side)", (unsigned long long)w,
                  (unsigned long long)h, MESH_MAX_IMAGE_SIDE);
    return MESH_EFORMAT;
  }
  int paletted = bits == 8 && planes == 1, rgb = bits == 8 && (planes == 3 || planes == 4);
  if (!paletted && !rgb) {
    mesh__set_err(err, errlen, "PCX image with %u planes of %u bits (8-bit paletted and 24/32-bit are read)",
                  planes, bits);
    return MESH_EFORMAT;
  }
  if (bpl < w) {
    mesh__set_err(err, errlen, "PCX scanlines of %u bytes for %llu pixels", bpl, (unsigned long long)w);
    return MESH_EFORMAT;
  }
  size_t end = n;
  const uint8_t *palette = NULL;
  if (paletted) {
    if (n < PCX_HEADER + PCX_PALETTE || b[n - PCX_PALETTE] != 0x0C) {
      mesh__set_err(err, errlen, "8-bit PCX image without its 256-colour palette");
      return MESH_EFORMAT;
    }
    palette = b + n - PCX_PALETTE + 1;
    end = n - PCX_PALETTE;
  }
  uint64_t line = (uint64_t)planes * bpl, total = line * h;
  /* A run codes at most 63 bytes in 2: a file shorter than that cannot hold the image. */
  if (total > 32 * (uint64_t)(end - PCX_HEADER) + 63) {
    mesh__set_err(err, errlen, "PCX image ends before its %llu x %llu pixels", (unsigned long long)w,
                  (unsigned long long)h);
    return MESH_EFORMAT;
  }
  uint8_t *raw = malloc(total), *rgba = malloc(w * h * 4);
  if (!raw || !rgba) {
    free(raw), free(rgba);
    return MESH_ENOMEM;
  }
  size_t at = PCX_HEADER;
  uint64_t k = 0;
  while (k < total && at < end) {
    uint8_t c = b[at++];
    uint32_t count = 1;
    if ((c & 0xC0) == 0xC0) {
      count = c & 0x3Fu;
      if (at >= end) break;
      c = b[at++];
    }
    for (; count > 0 && k < total; count--) raw[k++] = c;
  }
  if (k < total) {
    free(raw), free(rgba);
    mesh__set_err(err, errlen, "PCX image ends after %llu of its %llu bytes", (unsigned long long)k,
                  (unsigned long long)total);
    return MESH_EFORMAT;
  }
  for (uint64_t y = 0; y < h; y++)
    for (uint64_t x = 0; x < w; x++) {
      uint8_t *px = rgba + 4 * (y * w + x);
      const uint8_t *row = raw + y * line;
      if (paletted) {
        memcpy(px, palette + 3 * row[x], 3);
        px[3] = 255;
      } else {
        for (uint32_t p = 0; p < 3; p++) px[p] = row[p * bpl + x];
        px[3] = planes == 4 ? row[3 * bpl + x] : 255;
      }
    }
  free(raw);
  out->width = (uint32_t)w, out->height = (uint32_t)h, out->rgba = rgba;
  return 0;
}

int mesh_image_decode(const uint8_t *bytes, size_t len, mesh_image *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  if (!bytes || len == 0 || len > INT32_MAX) {
    mesh__set_err(err, errlen, "empty or oversized image file");
    return MESH_EFORMAT;
  }
  if (is_pcx(bytes, len)) return decode_pcx(bytes, len, out, err, errlen);
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(bytes, (int)len, &w, &h, &comp)) {
    mesh__set_err(err, errlen, "not an image this build reads (PNG, JPEG, BMP, TGA, PCX): %s", stbi_failure_reason());
    return MESH_EFORMAT;
  }
  if (!side_ok((uint64_t)w, (uint64_t)h)) {
    mesh__set_err(err, errlen, "image of %d x %d pixels (at most %u a side)", w, h, MESH_MAX_IMAGE_SIDE);
    return MESH_EFORMAT;
  }
  uint8_t *px = stbi_load_from_memory(bytes, (int)len, &w, &h, &comp, 4);
  if (!px) {
    mesh__set_err(err, errlen, "the image does not decode: %s", stbi_failure_reason());
    return MESH_EFORMAT;
  }
  /* stb's allocation is malloc's (its default), but the mesh frees with free(): copy to be sure
   * whatever stb was built with. */
  size_t bytes_out = (size_t)w * (size_t)h * 4;
  out->rgba = malloc(bytes_out);
  if (!out->rgba) {
    stbi_image_free(px);
    return MESH_ENOMEM;
  }
  memcpy(out->rgba, px, bytes_out);
  stbi_image_free(px);
  out->width = (uint32_t)w, out->height = (uint32_t)h;
  return 0;
}

int mesh__image_read(const char *path, size_t max_bytes, mesh_image *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  FILE *f = mesh__fopen(path);
  if (!f) {
    mesh__set_err(err, errlen, "no such file");
    return MESH_ENOENT;
  }
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (n == cap) {
      if (cap >= max_bytes) {
        mesh__set_err(err, errlen, "image file larger than %zu bytes", max_bytes);
        rc = MESH_ETOOBIG;
        break;
      }
      size_t grown = cap ? 2 * cap : 65536;
      if (grown > max_bytes) grown = max_bytes;
      uint8_t *p = realloc(buf, grown);
      if (!p) {
        rc = MESH_ENOMEM;
        break;
      }
      buf = p, cap = grown;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  if (rc == 0) rc = mesh_image_decode(buf, n, out, err, errlen);
  free(buf);
  return rc;
}
