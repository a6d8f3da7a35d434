/*
 * srv_assert.h — SRV_ASSERT: the service's check of its own invariants (docs/architecture.md,
 * "Invariants"), for the program's own mistakes only.
 *
 * Active where NDEBUG is not defined: the Debug build (`make test-asan`, CMAKE_BUILD_TYPE=Debug)
 * prints the condition, file and line and aborts. RelWithDebInfo and Release (`make test`,
 * `make check-builds`, packages) define NDEBUG and compile every SRV_ASSERT out: the condition
 * is not evaluated (it stays inside sizeof, so a variable used only there is not "unused").
 * Only cheap conditions belong here, since Debug runs every test with them.
 *
 * DOES NOT check input: anything a client, a file, the store or Redis can send is refused with
 * an error code, never asserted.
 */
#ifndef DEFORMD_SRV_ASSERT_H
#define DEFORMD_SRV_ASSERT_H

#ifdef NDEBUG
#define SRV_ASSERT(cond) ((void)sizeof(!(cond)))
#else
#include <stdio.h>
#include <stdlib.h>

/* Reports a broken invariant and aborts: the state that broke it cannot be trusted further. */
static inline void srv__assert_fail(const char *cond, const char *file, int line, const char *func) {
  fprintf(stderr, "deformd: %s:%d: %s: invariant broken: %s\n", file, line, func, cond);
  abort();
}
#define SRV_ASSERT(cond) ((cond) ? (void)0 : srv__assert_fail(#cond, __FILE__, __LINE__, __func__))
#endif

#endif
