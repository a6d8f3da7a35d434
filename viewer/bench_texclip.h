/*
 * bench_texclip.h — `deform-view-bench texclip` (bench_texclip.c): the texture clip pass's cost
 * per component.
 */
#ifndef DEFORMD_BENCH_TEXCLIP_H
#define DEFORMD_BENCH_TEXCLIP_H

/* argv[1] is "texclip"; returns the process's exit status. */
int bench_texclip_main(int argc, char **argv, const char *cmdline);
/* Shared with bench_view.c: CLOCK_MONOTONIC in ms, and a qsort order for doubles. */
double bench_now_ms(void);
int bench_cmp_double(const void *a, const void *b);

#endif
