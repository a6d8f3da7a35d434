/*
 * srv_import.h — the import worker: untrusted mesh files parsed in a child process with memory and time
 * limits, its reply read back on the loop.
 */
#ifndef DEFORMD_SRV_IMPORT_H
#define DEFORMD_SRV_IMPORT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct srv_import srv_import;

typedef struct srv_import_limits {
  const char *worker;     /* the program run as `WORKER --import-worker ... -- FILE` (borrowed) */
  uint32_t memory_mb;     /* what the worker may map beyond what it maps at start; also its
                           * resident-memory ceiling, watched from here */
  uint32_t seconds;       /* CPU time, and wall-clock time before it is killed */
  uint32_t max_vertices;  /* mesh_import_opts.max_vertices */
  uint32_t max_file_mb;   /* larger files are refused; 0 = no limit */
  uint32_t max_running;   /* workers at once (0: 4); later imports wait */
  uint32_t max_waiting;   /* imports waiting (0: 256); more are refused with SRV_ELIMIT */
} srv_import_limits;

typedef struct srv_import srv_import;

/* The imports of one loop: running children and the queue. Embedded (srv_server.importer). */
typedef struct srv_importer {
  uv_loop_t *loop;
  srv_import_limits limits;
  srv_import *running, *waiting;
  uint32_t running_count, waiting_count;
  int stopping;
  uint64_t started, failed; /* counters for server.stats */
} srv_importer;

/* Called on the loop thread once per import: status 0 with `blob` (a mesh_blob, malloc'ed: the
 * callee owns it and frees it with free()) of `len` bytes, or SRV_EMESH (the file was refused,
 * the worker crashed or passed a limit), SRV_ESHUTDOWN or SRV_EINTERNAL with a reason. */
typedef void (*srv_import_cb)(void *arg, int status, uint8_t *blob, size_t len, const char *why);

void srv_importer_init(srv_importer *im, uv_loop_t *loop, const srv_import_limits *limits);
/* Starts (or queues) the import of `path`. With root_count > 0 (a client's name), `path` is a
 * relative name looked up beneath those folders (open descriptors: the worker inherits them and
 * opens nothing else, mesh_open_beneath) and the reasons quote nothing of the file; with 0 it
 * is the operator's path, as it is. Returns 0 (cb is called later) or SRV_ELIMIT, SRV_ESHUTDOWN
 * or SRV_EINTERNAL with a reason in err (cb is never called). */
int srv_import_start(srv_importer *im, const char *path, const int *roots, uint32_t root_count, srv_import_cb cb,
                     void *arg, char *err, size_t errlen);
/* Stopping: queued imports are answered SRV_ESHUTDOWN now, running workers are killed (and
 * answered SRV_ESHUTDOWN once they are gone). */
void srv_import_shutdown(srv_importer *im);
/* `deformd --import-worker [--import-memory-mb N] [--import-seconds N] [--max-vertices N]
 * [--max-file-mb N] [--roots K] -- FILE`: the child's side; with --roots, FILE is a name beneath
 * the folders open on descriptors 3 .. 3+K-1. Never returns on success (it _exits). */
int srv_import_worker_main(int argc, char **argv);
/* The worker's work without the process (the fuzz target runs it in-process): imports `path`
 * (beneath `roots` when root_count > 0, as srv_import_start), names made UTF-8, and returns its
 * reply bytes (malloc'ed, *len bytes), or NULL when out of memory. */
uint8_t *srv_import_reply(const char *path, const int *roots, uint32_t root_count, uint32_t max_vertices,
                          uint32_t max_file_mb, uint32_t memory_mb, size_t *len);
/* The parent's reading of a reply: 0 with the mesh blob at b[*blob_at .. + *blob_len), or
 * SRV_EMESH with the reason the worker gave or what is wrong with the reply. */
int srv_import_parse_reply(const uint8_t *b, size_t n, size_t *blob_at, size_t *blob_len, char *why,
                           size_t whylen);

#endif
