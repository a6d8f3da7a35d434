/*
 * dfm_memory.c — keeping the solver's memory faulted in between gestures (see dfm.h).
 *
 * A fresh 4 KiB page costs ~7.7 µs on this kind of VM (docs/performance.md): a gesture that
 * touches 88 MB for the first time (ARAP on 41k vertices) spends ~170 ms in page faults, a third
 * of a 16k-vertex region's 90 ms. glibc returns freed memory to the kernel (large blocks are
 * mmapped and unmapped, the heap top is trimmed) and gives every thread that allocates at the
 * same time an arena of its own, so even later gestures, running on other threads, fault much
 * of their memory again. Two settings and one warm-up fix that:
 *
 *   one arena (M_ARENA_MAX 1)     memory one thread frees is what the next gesture, on any
 *                                 thread, gets back; the solvers allocate a few large blocks
 *                                 per gesture, so the shared lock costs nothing measurable;
 *   a fixed mmap threshold        blocks up to 32 MiB (glibc's ceiling, where its adaptive
 *                                 threshold ends anyway) come from the heap;
 *   M_TOP_PAD / M_TRIM_THRESHOLD  free() keeps `reserve` bytes at the top of the heap instead
 *                                 of trimming them;
 *   the warm-up                   dfm_memory_reserve() writes that many bytes once (1 MiB blocks,
 *                                 allocated, written and freed), off any latency path: deformd
 *                                 does it on its thread pool once a session is open.
 *
 * Blocks above 32 MiB (the factor of a 160k-vertex system) stay mmapped and fault every time;
 * what is freed beyond the reserve still goes back to the kernel.
 *
 * DOES NOT replace malloc or track allocations; with another allocator (ASan's) mallopt does
 * nothing and the warm-up only costs its time.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dfm.h"

#define BLOCK ((size_t)1 << 20)
#define MMAP_CEILING (32 << 20) /* glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit */

static pthread_mutex_t reserve_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t reserved; /* bytes the heap keeps (grows only) */

void dfm_memory_init(void) {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, MMAP_CEILING);
}

size_t dfm_memory_gesture_bytes(uint32_t unknowns) {
  /* Measured ARAP gestures: 2.2 KiB per vertex at 41k (whole), 1.9 KiB per vertex of a 16k
   * region in a 164k mesh, 2.3 KiB at 164k (whole); the solver's peak, not counting the mesh. */
  return (size_t)unknowns * 2560;
}

size_t dfm_memory_estimate(uint32_t vertices) {
  /* Held to 1 GiB and a quarter of the RAM: the reserve stays with the process. */
  size_t bytes = dfm_memory_gesture_bytes(vertices), cap = (size_t)1 << 30;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && (size_t)pages / 4 * (size_t)page < cap) cap = (size_t)pages / 4 * (size_t)page;
  return bytes < cap ? bytes : cap;
}

double dfm_memory_reserve(size_t bytes) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_mutex_lock(&reserve_lock);
  if (bytes > (size_t)1 << 40) bytes = (size_t)1 << 40;
  if (bytes > reserved) {
    /* Keep it first, so that the frees below do not trim it away. */
    int pad = bytes > (size_t)0x7fffffff ? 0x7fffffff : (int)bytes;
    mallopt(M_TOP_PAD, pad);
    mallopt(M_TRIM_THRESHOLD, pad);
    size_t n = (bytes + BLOCK - 1) / BLOCK;
    void **blocks = calloc(n, sizeof(void *));
    if (blocks) {
      /* Every block written, all freed at once: they merge into the kept heap top. */
      for (size_t i = 0; i < n; i++)
        if ((blocks[i] = malloc(BLOCK)) != NULL) memset(blocks[i], 0, BLOCK);
      for (size_t i = n; i-- > 0;) free(blocks[i]);
      free(blocks);
      reserved = bytes;
    }
  }
  pthread_mutex_unlock(&reserve_lock);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
}

void dfm_memory_trim(void) {
  /* malloc_trim returns every whole free page of the heap (madvise), not only its top; the pad
   * keeps the reserve at the top. */
  malloc_trim(dfm_memory_reserved());
}

size_t dfm_memory_reserved(void) {
  pthread_mutex_lock(&reserve_lock);
  size_t r = reserved;
  pthread_mutex_unlock(&reserve_lock);
  return r;
}
