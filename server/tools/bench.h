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

#endif
