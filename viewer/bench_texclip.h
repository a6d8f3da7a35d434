/*
 * bench_texclip.h — `deform-view-bench texclip` (bench_texclip.c): the texture clip pass's cost
 * per component.
 */
#ifndef DEFORMD_BENCH_TEXCLIP_H
#define DEFORMD_BENCH_TEXCLIP_H

/* argv[1] is "texclip"; returns the process's exit status. */
int bench_texclip_main(int argc, char **argv, const char *cmdline);

#endif
