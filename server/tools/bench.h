/*
 * bench.h — the subcommands of deform-bench that live outside deform_bench.c.
 *
 * Each takes the whole argv (argv[1] is the subcommand) and the command line as one string
 * (printed with every result so that it can be reproduced), and returns the exit status.
 */
#ifndef DEFORMD_BENCH_H
#define DEFORMD_BENCH_H

#include <stdatomic.h>
#include <stdio.h>
#include <sys/types.h>

extern atomic_int g_stop; /* bench_child.c; set on SIGINT/SIGTERM, every bench loop checks it */

/* A deformd child (bench_child.c). */
typedef struct bench_child {
  pid_t pid;
  int stream_port, rpc_port;
} bench_child;

/* Spawns `path ARGS... --stream-port 0 --rpc-port 0 --log-level warn` and reads its port line
 * (20 s at most). Returns 0, or -1 with a reason (the child, if any, is reaped). */
int bench_child_start(const char *path, const char *const *args, bench_child *c, char *err, size_t errlen);
/* SIGTERM, up to 5 s, then SIGKILL; reaps, and says on stderr how it ended when not cleanly. */
void bench_child_stop(bench_child *c);
void bench_child_kill(bench_child *c);
int bench_child_gone(const bench_child *c); /* 1 when it exited (not reaped yet) */
double bench_proc_cpu_s(pid_t pid);         /* utime + stime of pid in seconds, or -1 */
/* One line on stderr naming the machine a run's figures come from: the CPU's model, family and
 * model numbers (/proc/cpuinfo), the CPUs online and the load average. The same VM size on
 * another host measures differently (docs/performance.md, "Results on a Zen 4 VM"). */
void bench_machine(FILE *out);
/* Waits (30 s at most) until deformd on rpc_port has opened (or restored) `session`. 0 or -1. */
int bench_wait_session(int rpc_port, const char *session);
/* The deformd next to this program ("" when it cannot tell), into out. */
void bench_default_deformd(char *out, size_t len);
/* --tls: cert.pem and key.pem (EC P-256, for 127.0.0.1) in a new folder under $TMPDIR, named
 * into dir (len bytes). 0, or -1 with a message on stderr. bench_remove_certificate removes
 * the two files and the folder. */
int bench_make_certificate(char *dir, size_t len);
void bench_remove_certificate(const char *dir);

/* deform-bench fanout --relays R (bench_cluster.c): redis-server, a primary, R relays. */
#define BENCH_MAX_RELAYS 8
typedef struct bench_cluster {
  pid_t redis_pid;
  int redis_port;
  char url[64];
  char dir[64];
  bench_child primary;
  bench_child relays[BENCH_MAX_RELAYS];
  int relay_count;
} bench_cluster;
/* Starts them and waits until every relay has loaded the demo session. Returns 0, or -1 with a
 * reason (whatever started is stopped). */
int bench_cluster_start(const char *deformd, const char *redis_server, int relays, bench_cluster *c, char *err,
                        size_t errlen);
/* Stops every process it started (also the primary of a single-node run: relay_count 0). */
void bench_cluster_stop(bench_cluster *c);

int bench_solve_main(int argc, char **argv, const char *cmdline);
int bench_brush_main(int argc, char **argv, const char *cmdline);
int bench_blend_main(int argc, char **argv, const char *cmdline);
int bench_durable_main(int argc, char **argv, const char *cmdline);
int bench_stream_main(int argc, char **argv, const char *cmdline);
int bench_undo_main(int argc, char **argv, const char *cmdline);
int bench_presence_main(int argc, char **argv, const char *cmdline); /* bench_presence.c */
int bench_face_main(int argc, char **argv, const char *cmdline);
int bench_texclip_main(int argc, char **argv, const char *cmdline); /* bench_texclip.c */

#endif
