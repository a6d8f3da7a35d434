/*
 * fuzz_import.c — libFuzzer target: the import worker's work, in-process, on every format the
 * server reads (OBJ, PLY, OFF, STL, glTF, GLB, MD2, MD3): the header checks, assimp, our
 * keyframe and animation readers, the name repair, the reply the worker would send, and the
 * parent's reading of that reply back into a mesh (srv_import_parse_reply, mesh_blob_read).
 *
 * Input: byte 0 chooses the file name's extension, the rest is the file. Limits are small
 * (20,000 vertices, 1 MiB files, MD2/MD3 frames capped by the format's own header check) so
 * that the fuzzer spends its time on parsing, not on big meshes.
 *
 * A crash inside assimp itself is what the worker process exists for: `make fuzz` runs this
 * target with -fork and -ignore_crashes, and tests/fuzz/README.md says how a finding becomes a
 * regression input (replayed here when our code was at fault and is fixed, or through
 * `deformd --check-mesh --isolate` when assimp's).
 *
 * DOES NOT spawn the worker process (srv_import.c's parent side is tested in
 * tests/deformd/test_import_worker.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mesh.h"
#include "srv_json_text.h"
#include "srv_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const extensions[] = {"obj", "ply", "off", "stl", "gltf", "glb", "md2", "md3"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static char dir[256];
  if (!dir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/deformd-fuzz-import-%d", base && base[0] ? base : "/tmp", (int)getpid());
    mkdir(dir, 0700);
  }
  char path[320];
  snprintf(path, sizeof(path), "%s/input.%s", dir, extensions[data[0] % 8]);
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fwrite(data + 1, 1, size - 1, f);
  fclose(f);
  size_t len = 0;
  uint8_t *reply = srv_import_reply(path, NULL, 0, 20000, 1, 256, &len);
  unlink(path);
  if (!reply) return 0;
  size_t at = 0, blen = 0;
  char why[512];
  if (srv_import_parse_reply(reply, len, &at, &blen, why, sizeof(why)) == 0) {
    mesh *m = NULL;
    char err[MESH_ERR_LEN];
    /* What the worker sends, the server must take back: a valid mesh, with UTF-8 names. */
    if (mesh_blob_read(reply + at, blen, 20000, &m, err, sizeof(err)) != 0) abort();
    for (uint32_t t = 0; t < m->target_count; t++)
      if (!srv_utf8_valid(m->targets[t].name, strlen(m->targets[t].name))) abort();
    for (uint32_t c = 0; c < m->clip_count; c++)
      if (!srv_utf8_valid(m->clips[c].name, strlen(m->clips[c].name))) abort();
    mesh_destroy(m);
  } else if (why[0] == '\0') {
    abort(); /* a refusal always says why */
  }
  free(reply);
  return 0;
}
