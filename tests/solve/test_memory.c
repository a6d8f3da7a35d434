/*
 * test_memory.c — the memory kept between gestures (server/solve/dfm_memory.c): what the heap
 * reserve keeps is reused by another thread without page faults, counted with getrusage.
 */
#include <pthread.h>
#include <sys/resource.h>

#include "dfm.h"
#include "test.h"

/* dfm_memory_reserve: after keeping 64 MiB, another thread allocating and writing 48 MiB in
 * 1 MiB blocks (a gesture on the thread pool) finds the pages already there. Without the reserve
 * each of its 12,288 pages would fault once (glibc returns freed memory to the kernel); the
 * test allows a tenth of that. Under ASan, whose allocator ignores mallopt, only the
 * bookkeeping is checked. */
typedef struct fault_job {
  long faults;
} fault_job;

static void *allocate_and_write(void *arg) {
  fault_job *job = arg;
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  void *blocks[48];
  for (int i = 0; i < 48; i++) {
    blocks[i] = malloc((size_t)1 << 20);
    ASSERT(blocks[i] != NULL);
    memset(blocks[i], 7, (size_t)1 << 20);
  }
  getrusage(RUSAGE_SELF, &r1);
  for (int i = 0; i < 48; i++) free(blocks[i]);
  job->faults = r1.ru_minflt - r0.ru_minflt;
  return NULL;
}

TEST(memory_kept_by_the_reserve_is_reused_by_other_threads_without_page_faults) {
  dfm_memory_init();
  ASSERT_EQ(dfm_memory_reserved(), 0);
  ASSERT(dfm_memory_estimate(16000) >= (size_t)16000 * 1900); /* the measured 1.9-2.3 KiB/vertex */
  double ms = dfm_memory_reserve((size_t)64 << 20);
  ASSERT(ms >= 0);
  ASSERT_EQ(dfm_memory_reserved(), (size_t)64 << 20);
  dfm_memory_reserve((size_t)16 << 20); /* grows only */
  ASSERT_EQ(dfm_memory_reserved(), (size_t)64 << 20);
  fault_job job = {0};
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, allocate_and_write, &job), 0);
  pthread_join(t, NULL);
  fprintf(stderr, "48 MiB written by another thread after a 64 MiB reserve (%.1f ms): %ld page faults of 12288 pages\n",
          ms, job.faults);
#if !defined(__SANITIZE_ADDRESS__)
  ASSERT(job.faults < 12288 / 10);
#endif
}
