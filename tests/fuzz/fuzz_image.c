/*
 * fuzz_image.c — libFuzzer target: the texture decoder (mesh_image_decode), as an import meets
 * the image files a mesh names: PNG, JPEG, BMP and TGA through stb_image, PCX of our own.
 *
 * What it checks besides memory safety: a decode either fails with a reason and no pixels, or
 * gives an image of 1 to MESH_MAX_IMAGE_SIDE pixels a side whose every byte can be read.
 *
 * DOES NOT read files (the bytes are the input).
 */
#include <stdint.h>
#include <stdlib.h>

#include "mesh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
volatile unsigned fuzz_image_sink; /* keeps the read of every pixel */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mesh_image im;
  char err[MESH_ERR_LEN] = "";
  int rc = mesh_image_decode(data, size, &im, err, sizeof(err));
  if (rc != 0) {
    if (err[0] == '\0' && rc != MESH_ENOMEM) abort(); /* a refusal says why */
    if (im.rgba) abort();
    return 0;
  }
  if (im.width < 1 || im.height < 1 || im.width > MESH_MAX_IMAGE_SIDE || im.height > MESH_MAX_IMAGE_SIDE) abort();
  unsigned sum = 0;
  for (size_t i = 0; i < 4 * (size_t)im.width * im.height; i++) sum += im.rgba[i]; /* every byte readable */
  fuzz_image_sink = sum;
  free(im.rgba);
  return 0;
}
