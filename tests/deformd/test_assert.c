/*
 * test_assert.c — the invariant checks (docs/architecture.md, "Invariants") run where NDEBUG is
 * not defined and are compiled out where it is: the service's SRV_ASSERT (base/srv_assert.h)
 * and the protocol's assert().
 *
 * Each case breaks an invariant on purpose in a child process and looks at how it ends: in a
 * build without NDEBUG (Debug, `make test-asan`) by SIGABRT with the broken condition on stderr;
 * with NDEBUG (RelWithDebInfo, `make test`; Release) normally and silently, the condition never
 * evaluated. This file is compiled with the same flags as the libraries it calls, so its own
 * NDEBUG says which build it is in.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "srv_assert.h"
#include "srv_frame.h"
#include "test.h"

typedef void (*breaker)(void);

/* Runs `fn` in a child; returns its wait status and what it wrote to stderr (up to cap-1 bytes). */
static int run_child(breaker fn, char *err, size_t cap) {
  int fds[2];
  ASSERT(pipe(fds) == 0);
  fflush(NULL);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    fn();
    _exit(0);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < cap && (r = read(fds[0], err + n, cap - 1 - n)) > 0) n += (size_t)r;
  err[n] = 0;
  close(fds[0]);
  int status = 0;
  ASSERT(waitpid(pid, &status, 0) == pid);
  return status;
}

static void expect_checked(breaker fn, const char *condition) {
  char err[4096];
  int status = run_child(fn, err, sizeof(err));
#ifdef NDEBUG
  (void)condition;
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(strlen(err), 0);
#else
  ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
  ASSERT_STR_CONTAINS(err, condition);
#endif
}

/* Invariant 8: a frame whose count has reached zero is referenced again. */
static void ref_a_released_frame(void) {
  proto_buf b;
  proto_buf_init(&b);
  proto_buf_append(&b, 4);
  srv_frame *f = srv_frame_from_buf(&b);
  f->refs = 0; /* as if released: the bytes are still here, so only the check can notice */
  srv_frame_ref(f);
}

static int evaluations;
/* Called only inside SRV_ASSERT, which NDEBUG compiles out: clang would call it unneeded. */
__attribute__((unused)) static int counted(void) { return ++evaluations; }

/* A condition with a side effect: evaluated (and false) only where checks run. */
static void side_effect_in_a_check(void) {
  SRV_ASSERT(counted() == 0);
  if (evaluations) _exit(3); /* evaluated, and yet it did not abort */
}

/* The protocol's own precondition: a quantum is positive (a session's, checked when set). */
static void quantize_on_a_zero_quantum(void) {
  int32_t q = proto_quantize(1.0f, 0.0f);
  (void)q;
}

TEST(srv_assert_aborts_on_a_broken_frame_count_only_without_ndebug) {
  expect_checked(ref_a_released_frame, "invariant broken: f->refs > 0");
}

TEST(srv_assert_evaluates_its_condition_only_without_ndebug) {
  expect_checked(side_effect_in_a_check, "invariant broken: counted() == 0");
}

TEST(protocol_asserts_run_only_without_ndebug) {
  expect_checked(quantize_on_a_zero_quantum, "quantum > 0");
}
