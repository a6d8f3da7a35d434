/*
 * redis_harness.h — a redis-server of the test's own for the tests of relays: started on a free
 * loopback port with its own directory under test_tmpdir(), no persistence unless asked, killed
 * when the test process exits.
 */
#ifndef DEFORMD_TEST_REDIS_HARNESS_H
#define DEFORMD_TEST_REDIS_HARNESS_H

#include <sys/types.h>

typedef struct redis_harness {
  pid_t pid;
  int port;
  char dir[1024];
  char url[128]; /* redis://127.0.0.1:PORT */
} redis_harness;

/* Starts redis-server ($REDIS_SERVER, else redis-server on PATH) on `port` (0: a free one) and
 * waits until it answers PING. */
void redis_harness_start(redis_harness *r, int port);
/* SIGKILL and wait: the data it held is gone (nothing is persisted). */
void redis_harness_kill(redis_harness *r);
/* SIGSTOP / SIGCONT: a Redis that stops answering without closing its connections. */
void redis_harness_pause(redis_harness *r, int paused);
/* One command in Redis' inline form ("DBSIZE"); the first line of the answer, into out (for a
 * bulk string, its value: "p1" for HGET of a field holding p1; "$-1" for none). */
void redis_harness_command(const redis_harness *r, const char *command, char *out, size_t outlen);
/* Every key and every value Redis holds (hashes, sets, strings, streams, lists, sorted sets,
 * by type), one string a line, values as their raw bytes — binary ones hold NULs: search it
 * with memmem over *len bytes (malloc'ed; caller frees). */
char *redis_harness_dump(const redis_harness *r, size_t *len);

#endif
