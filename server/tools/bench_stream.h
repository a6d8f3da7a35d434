/*
 * bench_stream.h — what bench_stream.c shares with bench_stream_parts.c (`deform-bench stream`).
 */
#ifndef DEFORMD_BENCH_STREAM_H
#define DEFORMD_BENCH_STREAM_H

#include <stddef.h>

#include "mesh.h"

/* A version 2 join on the default grid, piece by piece (bytes), and its decode time in process. */
typedef struct bench_parts {
  size_t triangles, positions, uvs, targets, total;
  double decode_ms_median, decode_ms_min, decode_ms_max;
  int same_positions; /* both codings decoded to the same float bits */
} bench_parts;

/* Sizes of `m`'s SNAPSHOT in today's coding (out[0]) and the entropy coding (out[1]), and `runs`
 * decodes of each, alternating. Returns 0 or -1. */
int bench_stream_parts(const mesh *m, float quantum, int runs, bench_parts out[2]);
/* Writes the two SNAPSHOT payloads of `m` (as bench_stream_parts builds them) to PREFIX.quantised
 * and PREFIX.entropy, for the page's decode benchmark (tests/web/bench_decode.mjs). 0 or -1. */
int bench_stream_save(const mesh *m, float quantum, const char *prefix);

#endif
