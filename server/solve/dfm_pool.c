/*
 * dfm_pool.c — the solvers' parallel loops: one pool of worker threads that sleep between jobs.
 *
 * The ARAP drag runs a few short parallel loops (local step, right-hand side) between long
 * serial or two-thread stretches (the triangular sweeps). OpenMP's idle threads spin after each
 * loop and, on a 2-core machine, take the core the next stretch needs: on the 41k sphere a drag
 * took 21.5–25 ms with libgomp's default wait policy and 17.7–19.8 ms with OMP_WAIT_POLICY=
 * passive, which a library cannot set for its host program (libgomp reads it at load time). So
 * the solvers use this pool instead: workers block on a condition variable, and a loop that
 * finds the pool busy (another solve on another libuv worker thread) runs on its caller alone.
 *
 * dfm_init() also keeps OpenBLAS on the calling thread, for the same reason: after each call
 * OpenBLAS's worker spins in sched_yield (a third of all samples while a 16k-vertex region was
 * prefactored, on the core the ARAP tables were being built on), while CHOLMOD's supernodes
 * here are too small to gain from a second BLAS thread. Alternating builds: the region's
 * prefactor 53-58 ms with one BLAS thread against 54-86 ms with two, the 41k sphere's first
 * gesture 138-229 against 237-243 ms, the 164k sphere's factorisation unchanged (0.49-0.58 s
 * against 0.44-0.62 s).
 *
 * DOES NOT know what the loops compute.
 */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfm.h"

#define POOL_MAX 16

static struct {
  pthread_once_t once;
  pthread_mutex_t busy;   /* held by the caller running a job on the pool */
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  int workers;
  unsigned long generation;
  int running;            /* workers still inside the current job */
  dfm_range_fn fn;
  void *ctx;
  size_t n, grain;
  atomic_size_t next;     /* the next chunk's start */
} pool = {.once = PTHREAD_ONCE_INIT,
          .busy = PTHREAD_MUTEX_INITIALIZER,
          .lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Takes chunks of the current job until none is left. */
static void work(dfm_range_fn fn, void *ctx, size_t n, size_t grain) {
  for (;;) {
    size_t begin = atomic_fetch_add(&pool.next, grain);
    if (begin >= n) return;
    fn(ctx, begin, begin + grain < n ? begin + grain : n);
  }
}

static void *worker(void *arg) {
  (void)arg;
  unsigned long seen = 0;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.lock);
    seen = pool.generation;
    dfm_range_fn fn = pool.fn;
    void *ctx = pool.ctx;
    size_t n = pool.n, grain = pool.grain;
    pthread_mutex_unlock(&pool.lock);
    work(fn, ctx, n, grain);
    pthread_mutex_lock(&pool.lock);
    if (--pool.running == 0) pthread_cond_signal(&pool.done);
  }
  return NULL;
}

static void start(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int want = cores > 1 ? (int)(cores > POOL_MAX ? POOL_MAX : cores) - 1 : 0;
  for (int i = 0; i < want; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, worker, NULL) == 0) pool.workers++;
    pthread_attr_destroy(&attr);
  }
}

int dfm_pool_threads(void) {
  pthread_once(&pool.once, start);
  return pool.workers + 1;
}

void dfm_parallel_for(size_t n, size_t grain, dfm_range_fn fn, void *ctx) {
  if (grain == 0) grain = 1;
  if (n == 0) return;
  if (n <= grain || dfm_pool_threads() == 1 || pthread_mutex_trylock(&pool.busy) != 0) {
    fn(ctx, 0, n); /* small, single core, or the pool is serving another solve */
    return;
  }
  pthread_mutex_lock(&pool.lock);
  pool.fn = fn, pool.ctx = ctx, pool.n = n, pool.grain = grain;
  atomic_store(&pool.next, 0);
  pool.running = pool.workers;
  pool.generation++;
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  work(fn, ctx, n, grain);
  pthread_mutex_lock(&pool.lock);
  while (pool.running > 0) pthread_cond_wait(&pool.done, &pool.lock);
  pthread_mutex_unlock(&pool.lock);
  pthread_mutex_unlock(&pool.busy);
}

void dfm_init(void) {
  dfm_memory_init();
  openblas_set_num_threads(1);
}

/* OpenBLAS picks its kernels when it loads, from the CPU's family and model; one it does not
 * know (0.3.21, Debian 12's, and this VM's Xeon, family 6 model 207) gets its Prescott kernels,
 * SSE3 only, though the CPU has AVX-512. Those are CHOLMOD's dense updates: the dragon's
 * factorisation took 0.62-1.10 s (median 0.84) with them and 0.46-0.61 s (median 0.58) with
 * the SkylakeX kernels, alternated (docs/performance.md). OPENBLAS_CORETYPE names the kernels,
 * but only before the library loads, so the program starts itself again with it set. */
static const char *blas_kernels_wanted(void) {
  if (getenv("OPENBLAS_CORETYPE")) return NULL; /* the user's choice, or ours already */
  const char *core = openblas_get_corename();
  if (!core || strcmp(core, "Prescott") != 0) return NULL;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return NULL;
}

void dfm_blas_kernels(char **argv) {
  const char *want = blas_kernels_wanted();
  if (!want || setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE"); /* could not: carry on with the kernels OpenBLAS chose */
}

const char *dfm_blas_core(void) { return openblas_get_corename(); }
