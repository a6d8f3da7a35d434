/*
 * bench.h — the subcommands of deform-bench that live outside deform_bench.c.
 *
 * Each takes the whole argv (argv[1] is the subcommand) and the command line as one string
 * (printed with every result so that it can be reproduced), and returns the exit status.
 */
#ifndef DEFORMD_BENCH_H
#define DEFORMD_BENCH_H

int bench_solve_main(int argc, char **argv, const char *cmdline);
int bench_brush_main(int argc, char **argv, const char *cmdline);
int bench_blend_main(int argc, char **argv, const char *cmdline);
int bench_stream_main(int argc, char **argv, const char *cmdline);

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

/* Set by the benchmarks' SIGINT/SIGTERM handlers; loops that wait check it (bench_child.c). */
extern atomic_int bench_g_stop;

/* A `deformd --demo` child on free loopback ports (bench_child.c). */
typedef struct bench_child {
  pid_t pid;
  int stream_port, rpc_port;
} bench_child;
/* Spawns it and reads its port line: 0, or -1 with a reason. `path` is the deformd binary. */
int bench_child_start(const char *path, bench_child *c, char *err, size_t errlen);
/* SIGTERM (SIGKILL after 5 s) and reap; says on stderr how it ended when not cleanly. */
void bench_child_stop(bench_child *c);
/* 1 when the child has exited (it is left for bench_child_stop() to reap and report). */
int bench_child_gone(const bench_child *c);
/* The deformd next to this program ("" when it cannot tell), into out. */
void bench_default_deformd(char *out, size_t len);

#endif
