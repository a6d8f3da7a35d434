/*
 * srv_import.c — untrusted mesh files are parsed in a short-lived child process, never in the
 * process that holds everyone's sessions.
 *
 * assimp is a large C++ parser with a long record of memory-safety bugs, and several of its
 * readers believe the counts a file declares (a 45-byte OFF drove deformd to 3 GB in 2.4 s; an
 * MD3 with 2^31 tags to 13 GB in 5 s). So an import is a child: `deformd --import-worker`,
 * spawned through libuv (uv_spawn), which limits itself (address space: what it maps at start
 * plus --import-memory-mb; CPU: --import-seconds; no core files, no files written), imports the
 * file with mesh_import(), makes the names it found valid UTF-8, and writes the result to its
 * stdout, a pipe:
 *
 *   "DFMI" u32 version=1 i32 status u32 reason_len reason[reason_len]
 *   then, when status is 0: u64 blob_len blob[blob_len]   (mesh_blob.c's format)
 *
 * The parent reads the pipe on the loop (bounded by the memory limit), kills the child after
 * --import-seconds of wall time or when its resident memory passes the limit (read from /proc
 * every 100 ms: the only memory limit in sanitizer builds, whose shadow memory needs the whole
 * address space), and turns a crash, a limit or a timeout into SRV_EMESH with a reason. The
 * blob is decoded by the caller on the thread pool (mesh_blob_read checks every count against
 * the bytes present: the child is no more trusted than the file it read). At most
 * `max_running` children run at once; later imports wait in order.
 *
 * DOES NOT decode the blob or open sessions (srv_jobs.c), or run anything but the worker.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uv.h>
#include "mesh.h"
#include "srv_import.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_json_text.h"
#include "srv_data.h"

#define REPLY_MAGIC "DFMI"
#define REPLY_VERSION 1u
#define REPLY_HEAD 16u /* magic, version, status, reason length */
#define WATCH_MS 100
#define SRV_IMPORT_MAX_ROOTS (SRV_MAX_MESH_DIRS + 1)
#define ROOT_FD0 3 /* the child finds its folders on descriptors 3, 4, ... */

#if defined(__SANITIZE_ADDRESS__)
#define SRV_IMPORT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SRV_IMPORT_ASAN 1
#endif
#endif

typedef enum kill_reason { KILL_NONE, KILL_TIME, KILL_MEMORY, KILL_SIZE, KILL_SHUTDOWN } kill_reason;

struct srv_import {
  srv_importer *im;
  char *path;
  int roots[SRV_IMPORT_MAX_ROOTS]; /* a client's name: the folders it is looked up beneath */
  uint32_t root_count;             /* 0: the operator's path */
  srv_import_cb cb;
  void *arg;
  uv_process_t proc;
  uv_pipe_t out;
  uv_timer_t timer;
  int open_handles;   /* close callbacks still to come */
  int spawned, exited, eof, answered;
  int64_t exit_status;
  int term_signal;
  kill_reason killed;
  uint8_t *buf;
  size_t len, cap;
  uint64_t started_ms;
  struct srv_import *next, *prev;
};

/* ---- the parent ---------------------------------------------------------------------------- */

void srv_importer_init(srv_importer *im, uv_loop_t *loop, const srv_import_limits *limits) {
  memset(im, 0, sizeof(*im));
  im->loop = loop;
  im->limits = *limits;
  if (im->limits.max_running == 0) im->limits.max_running = 4;
  if (im->limits.max_waiting == 0) im->limits.max_waiting = 256;
}

static void list_remove(srv_import **head, srv_import *x) {
  if (x->prev) x->prev->next = x->next;
  else if (*head == x) *head = x->next;
  if (x->next) x->next->prev = x->prev;
  x->next = x->prev = NULL;
}

static void import_free(srv_import *x) {
  free(x->path);
  free(x->buf);
  free(x);
}

static void on_handle_closed(uv_handle_t *h) {
  srv_import *x = h->data;
  if (--x->open_handles == 0 && x->answered) import_free(x);
}

static void start_waiting(srv_importer *im);

/* Answers the caller once: `blob` (taken) on success, else a code and a reason. */
static void answer(srv_import *x, int status, uint8_t *blob, size_t len, const char *why) {
  srv_importer *im = x->im;
  x->answered = 1;
  if (status) im->failed++;
  x->cb(x->arg, status, blob, len, why);
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int srv_import_parse_reply(const uint8_t *b, size_t n, size_t *blob_at, size_t *blob_len, char *why,
                           size_t whylen) {
  if (!b || n < REPLY_HEAD || memcmp(b, REPLY_MAGIC, 4) != 0 || rd32(b + 4) != REPLY_VERSION) {
    snprintf(why, whylen, "the importer's reply is malformed (%zu bytes)", n);
    return SRV_EMESH;
  }
  int32_t status = (int32_t)rd32(b + 8);
  uint32_t rlen = rd32(b + 12);
  if (rlen > n - REPLY_HEAD || rlen > 4096) {
    snprintf(why, whylen, "the importer's reply is malformed (reason of %u bytes)", rlen);
    return SRV_EMESH;
  }
  if (status != 0) {
    snprintf(why, whylen, "%.*s", (int)rlen, (const char *)b + REPLY_HEAD);
    if (!why[0]) snprintf(why, whylen, "%s", mesh_strerror(status));
    return SRV_EMESH;
  }
  size_t at = REPLY_HEAD + rlen;
  if (n - at < 8) {
    snprintf(why, whylen, "the importer's reply ends before its mesh");
    return SRV_EMESH;
  }
  uint64_t bl = (uint64_t)rd32(b + at) | (uint64_t)rd32(b + at + 4) << 32;
  if (bl != n - at - 8) {
    snprintf(why, whylen, "the importer's reply holds %zu bytes of mesh, not the %llu it announces",
             n - at - 8, (unsigned long long)bl);
    return SRV_EMESH;
  }
  *blob_at = at + 8;
  *blob_len = (size_t)bl;
  return 0;
}

/* The child has exited and its pipe is closed: say what happened. */
static void finish(srv_import *x) {
  srv_importer *im = x->im;
  const srv_import_limits *L = &im->limits;
  list_remove(&im->running, x);
  im->running_count--;
  if (x->open_handles > 0 && !uv_is_closing((uv_handle_t *)&x->timer)) {
    uv_timer_stop(&x->timer);
    uv_close((uv_handle_t *)&x->timer, on_handle_closed);
  }
  char why[MESH_ERR_LEN + 128];
  int status = SRV_EMESH;
  size_t at = 0, blen = 0;
  switch (x->killed) {
    case KILL_TIME:
      snprintf(why, sizeof(why), "the importer did not finish within %u s (--import-seconds)", L->seconds);
      break;
    case KILL_MEMORY:
      snprintf(why, sizeof(why), "the importer used more than %u MiB (--import-memory-mb)", L->memory_mb);
      break;
    case KILL_SIZE:
      snprintf(why, sizeof(why), "the importer's reply passed %u MiB", L->memory_mb);
      break;
    case KILL_SHUTDOWN:
      status = SRV_ESHUTDOWN;
      snprintf(why, sizeof(why), "the server is shutting down");
      break;
    case KILL_NONE:
      if (x->term_signal == SIGXCPU || x->term_signal == SIGKILL) {
        /* RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL one second later. */
        snprintf(why, sizeof(why), "the importer used more than %u s of CPU (--import-seconds)", L->seconds);
      } else if (x->term_signal) {
        snprintf(why, sizeof(why), "the importer crashed (signal %d, %s) reading the file", x->term_signal,
                 strsignal(x->term_signal));
      } else if (x->exit_status != 0) {
        snprintf(why, sizeof(why), "the importer failed (exit status %lld)", (long long)x->exit_status);
      } else {
        status = srv_import_parse_reply(x->buf, x->len, &at, &blen, why, sizeof(why));
      }
      break;
  }
  if (status == 0) {
    memmove(x->buf, x->buf + at, blen);
    uint8_t *blob = x->buf;
    x->buf = NULL;
    answer(x, 0, blob, blen, NULL);
  } else {
    srv_log(SRV_LOG_INFO, "import of %s refused: %s", x->path, why);
    answer(x, status, NULL, 0, why);
  }
  if (x->open_handles == 0) import_free(x);
  start_waiting(im);
}

static void maybe_finish(srv_import *x) {
  if (x->exited && x->eof && !x->answered) finish(x);
}

static void on_exit_cb(uv_process_t *p, int64_t exit_status, int term_signal) {
  srv_import *x = p->data;
  x->exited = 1;
  x->exit_status = exit_status;
  x->term_signal = term_signal;
  uv_close((uv_handle_t *)p, on_handle_closed);
  maybe_finish(x);
}

static void kill_child(srv_import *x, kill_reason why) {
  if (x->exited || x->killed) return;
  x->killed = why;
  uv_process_kill(&x->proc, SIGKILL);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  srv_import *x = h->data;
  (void)suggested;
  size_t limit = (size_t)x->im->limits.memory_mb << 20;
  if (x->cap - x->len < 65536) {
    size_t cap = x->cap ? 2 * x->cap : 65536;
    if (cap > limit + 65536) cap = limit + 65536;
    uint8_t *g = cap > x->cap ? realloc(x->buf, cap) : NULL;
    if (!g) {
      *buf = uv_buf_init(NULL, 0); /* on_read gets UV_ENOBUFS */
      return;
    }
    x->buf = g;
    x->cap = cap;
  }
  *buf = uv_buf_init((char *)x->buf + x->len, (unsigned)(x->cap - x->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  srv_import *x = s->data;
  (void)buf;
  if (n > 0) {
    x->len += (size_t)n;
    if (x->len > (size_t)x->im->limits.memory_mb << 20) kill_child(x, KILL_SIZE);
    return;
  }
  if (n == 0) return;
  if (n == UV_ENOBUFS) kill_child(x, KILL_SIZE);
  x->eof = 1;
  uv_close((uv_handle_t *)&x->out, on_handle_closed);
  maybe_finish(x);
}

/* Resident memory of `pid` in bytes, from /proc (0 when unknown). A small kernel-made file: no
 * disk is touched. */
static uint64_t resident_bytes(int pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/statm", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  unsigned long long size = 0, rss = 0;
  int got = fscanf(f, "%llu %llu", &size, &rss);
  fclose(f);
  return got == 2 ? rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static void on_watch(uv_timer_t *t) {
  srv_import *x = t->data;
  if (x->exited) return;
  const srv_import_limits *L = &x->im->limits;
  if (uv_now(x->im->loop) - x->started_ms >= (uint64_t)L->seconds * 1000) {
    kill_child(x, KILL_TIME);
    return;
  }
  if (resident_bytes(x->proc.pid) > (uint64_t)L->memory_mb << 20) kill_child(x, KILL_MEMORY);
}

static int spawn(srv_import *x) {
  srv_importer *im = x->im;
  const srv_import_limits *L = &im->limits;
  char mem[24], sec[24], verts[24], file[24], roots[24];
  snprintf(mem, sizeof(mem), "%u", L->memory_mb);
  snprintf(sec, sizeof(sec), "%u", L->seconds);
  snprintf(verts, sizeof(verts), "%u", L->max_vertices);
  snprintf(file, sizeof(file), "%u", L->max_file_mb);
  snprintf(roots, sizeof(roots), "%u", x->root_count);
  char *args[] = {(char *)L->worker, "--import-worker", "--import-memory-mb", mem, "--import-seconds", sec,
                  "--max-vertices", verts, "--max-file-mb", file, "--roots", roots, "--", x->path, NULL};
  uv_pipe_init(im->loop, &x->out, 0);
  x->out.data = x;
  x->open_handles = 1;
  uv_stdio_container_t stdio[ROOT_FD0 + SRV_IMPORT_MAX_ROOTS];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = (uv_stdio_flags)(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = (uv_stream_t *)&x->out;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  /* The mesh folders, as descriptors (the child cannot name a folder it was not given). */
  for (uint32_t i = 0; i < x->root_count; i++) {
    stdio[ROOT_FD0 + i].flags = UV_INHERIT_FD;
    stdio[ROOT_FD0 + i].data.fd = x->roots[i];
  }
  uv_process_options_t o;
  memset(&o, 0, sizeof(o));
  o.file = L->worker;
  o.args = args;
  o.exit_cb = on_exit_cb;
  o.stdio_count = ROOT_FD0 + (int)x->root_count;
  o.stdio = stdio;
  x->proc.data = x;
  int rc = uv_spawn(im->loop, &x->proc, &o);
  if (rc) {
    /* libuv leaves the process handle needing a close too after a failed spawn. */
    x->open_handles++;
    uv_close((uv_handle_t *)&x->proc, on_handle_closed);
    uv_close((uv_handle_t *)&x->out, on_handle_closed);
    return rc;
  }
  x->open_handles++; /* the process */
  x->spawned = 1;
  x->started_ms = uv_now(im->loop);
  uv_read_start((uv_stream_t *)&x->out, on_alloc, on_read);
  uv_timer_init(im->loop, &x->timer);
  x->timer.data = x;
  x->open_handles++;
  uv_timer_start(&x->timer, on_watch, WATCH_MS, WATCH_MS);
  x->next = im->running;
  if (im->running) im->running->prev = x;
  im->running = x;
  im->running_count++;
  im->started++;
  return 0;
}

static void start_waiting(srv_importer *im) {
  while (im->waiting && im->running_count < im->limits.max_running && !im->stopping) {
    srv_import *x = im->waiting;
    list_remove(&im->waiting, x);
    im->waiting_count--;
    int rc = spawn(x);
    if (rc) {
      char why[160];
      snprintf(why, sizeof(why), "cannot start the importer: %s", uv_strerror(rc));
      srv_log(SRV_LOG_WARN, "import of %s: %s", x->path, why);
      answer(x, SRV_EINTERNAL, NULL, 0, why);
      if (x->open_handles == 0) import_free(x);
    }
  }
}

int srv_import_start(srv_importer *im, const char *path, const int *roots, uint32_t root_count, srv_import_cb cb,
                     void *arg, char *err, size_t errlen) {
  if (im->stopping) {
    snprintf(err, errlen, "the server is shutting down");
    return SRV_ESHUTDOWN;
  }
  if (!im->limits.worker) {
    snprintf(err, errlen, "no import worker is configured");
    return SRV_EINTERNAL;
  }
  if (strlen(path) >= 4096) {
    /* No file system takes it, and no child's argument list could carry it. */
    snprintf(err, errlen, "the file name is %zu bytes long", strlen(path));
    return SRV_EMESH;
  }
  if (root_count > SRV_IMPORT_MAX_ROOTS) {
    snprintf(err, errlen, "too many mesh folders");
    return SRV_EINTERNAL;
  }
  int now = im->running_count < im->limits.max_running;
  if (!now && im->waiting_count >= im->limits.max_waiting) {
    snprintf(err, errlen, "%u imports are already waiting (the limit)", im->waiting_count);
    return SRV_ELIMIT;
  }
  srv_import *x = calloc(1, sizeof(*x));
  if (x) x->path = strdup(path);
  if (!x || !x->path) {
    free(x);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  x->im = im;
  if (root_count) memcpy(x->roots, roots, sizeof(int) * root_count);
  x->root_count = root_count;
  x->cb = cb;
  x->arg = arg;
  if (now) {
    int rc = spawn(x);
    if (rc) {
      snprintf(err, errlen, "cannot start the importer: %s", uv_strerror(rc));
      srv_log(SRV_LOG_WARN, "import of %s: %s", path, err);
      x->answered = 1; /* freed by the close callbacks; the caller answers */
      return SRV_EINTERNAL;
    }
    return 0;
  }
  /* Appended to the end of the queue, so imports start in the order they were asked for. */
  srv_import **pp = &im->waiting, *prev = NULL;
  while (*pp) prev = *pp, pp = &(*pp)->next;
  *pp = x;
  x->prev = prev;
  im->waiting_count++;
  return 0;
}

void srv_import_shutdown(srv_importer *im) {
  im->stopping = 1;
  while (im->waiting) {
    srv_import *x = im->waiting;
    list_remove(&im->waiting, x);
    im->waiting_count--;
    answer(x, SRV_ESHUTDOWN, NULL, 0, "the server is shutting down");
    import_free(x);
  }
  for (srv_import *x = im->running; x; x = x->next) kill_child(x, KILL_SHUTDOWN);
}

/* ---- the child ----------------------------------------------------------------------------- */

/* Address space the process has mapped now, in bytes (from /proc/self/statm). */
static uint64_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0;
  int got = fscanf(f, "%llu", &size);
  fclose(f);
  return got == 1 ? size * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static int write_all(int fd, const void *data, size_t n) {
  const uint8_t *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void put32(uint8_t *p, uint32_t x) {
  for (int k = 0; k < 4; k++) p[k] = (uint8_t)(x >> (8 * k));
}

static void put_head(uint8_t *b, int status, uint32_t rlen) {
  memcpy(b, REPLY_MAGIC, 4);
  put32(b + 4, REPLY_VERSION);
  put32(b + 8, (uint32_t)status);
  put32(b + 12, rlen);
}

/* The reply for `status` (and the mesh when 0), malloc'ed; NULL when out of memory. */
static uint8_t *build_reply(int status, const char *reason, const mesh *m, size_t *len) {
  size_t rlen = reason ? strlen(reason) : 0;
  if (rlen > 4096) rlen = 4096;
  size_t blen = 0;
  if (status == 0) {
    status = mesh_blob_size(m, &blen);
    if (status) reason = "the mesh is too large to send", rlen = strlen(reason);
  }
  size_t total = REPLY_HEAD + rlen + (status == 0 ? 8 + blen : 0);
  uint8_t *b = malloc(total);
  if (!b) return NULL;
  put_head(b, status, (uint32_t)rlen);
  if (rlen) memcpy(b + REPLY_HEAD, reason, rlen);
  if (status == 0) {
    uint8_t *p = b + REPLY_HEAD + rlen;
    put32(p, (uint32_t)blen);
    put32(p + 4, (uint32_t)((uint64_t)blen >> 32));
    if (mesh_blob_encode(m, p + 8, blen) != 0) {
      free(b);
      return build_reply(MESH_EINVAL, "the mesh could not be written", NULL, len);
    }
  }
  *len = total;
  return b;
}

/* Names from files reach clients as JSON strings and are how clients address targets and
 * clips: bytes that are not UTF-8 become U+FFFD here, once, so that the name a client reads is
 * the name it can send back. 0 or MESH_ENOMEM. */
static int fix_name(char **name) {
  if (!*name || srv_utf8_valid(*name, strlen(*name))) return 0;
  char *fixed = srv_json_utf8_fix(*name, strlen(*name), NULL);
  if (!fixed) return MESH_ENOMEM;
  free(*name);
  *name = fixed;
  return 0;
}

static int fix_names(mesh *m) {
  int rc = 0;
  for (uint32_t i = 0; i < m->target_count && !rc; i++) rc = fix_name(&m->targets[i].name);
  for (uint32_t i = 0; i < m->clip_count && !rc; i++) rc = fix_name(&m->clips[i].name);
  for (uint32_t i = 0; i < m->submesh_count && !rc; i++) rc = fix_name(&m->submeshes[i].name);
  for (uint32_t i = 0; i < m->image_count && !rc; i++) rc = fix_name(&m->images[i].name);
  return rc;
}

uint8_t *srv_import_reply(const char *path, const int *roots, uint32_t root_count, uint32_t max_vertices,
                          uint32_t max_file_mb, uint32_t memory_mb, size_t *len) {
  mesh_import_opts opts = {.max_vertices = max_vertices, .max_file_bytes = (uint64_t)max_file_mb << 20,
                           .roots = roots, .root_count = root_count, .redact = root_count > 0};
  char err[MESH_ERR_LEN] = "";
  mesh *m = NULL;
  int rc = mesh_import(path, &opts, &m, err, sizeof(err));
  if (rc == 0 && (rc = fix_names(m)) != 0) snprintf(err, sizeof(err), "out of memory");
  if (rc == MESH_ENOMEM) {
    size_t n = strlen(err);
    snprintf(err + n, sizeof(err) - n, " (the importer may use %u MiB: --import-memory-mb)", memory_mb);
  }
  uint8_t *b = build_reply(rc, rc ? err : NULL, m, len);
  mesh_destroy(m);
  return b;
}

static int parse_u32(const char *s, uint32_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (!s[0] || !end || *end || v > UINT32_MAX) return -1;
  *out = (uint32_t)v;
  return 0;
}

int srv_import_worker_main(int argc, char **argv) {
  uint32_t memory_mb = 4096, seconds = 60, max_vertices = 0, max_file_mb = 0, root_count = 0;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint32_t *slot = NULL;
    if (strcmp(a, "--import-worker") == 0) continue;
    if (strcmp(a, "--") == 0) {
      path = v;
      break;
    }
    if (strcmp(a, "--import-memory-mb") == 0) slot = &memory_mb;
    else if (strcmp(a, "--import-seconds") == 0) slot = &seconds;
    else if (strcmp(a, "--max-vertices") == 0) slot = &max_vertices;
    else if (strcmp(a, "--max-file-mb") == 0) slot = &max_file_mb;
    else if (strcmp(a, "--roots") == 0) slot = &root_count;
    if (!slot || !v || parse_u32(v, slot) != 0) {
      fprintf(stderr, "deformd --import-worker: bad argument '%s'\n", a);
      return 2;
    }
    i++;
  }
  if (!path) {
    fprintf(stderr, "deformd --import-worker: no file (usage: ... -- FILE)\n");
    return 2;
  }
  if (root_count > SRV_IMPORT_MAX_ROOTS) {
    fprintf(stderr, "deformd --import-worker: at most %u folders\n", (unsigned)SRV_IMPORT_MAX_ROOTS);
    return 2;
  }
  int roots[SRV_IMPORT_MAX_ROOTS];
  for (uint32_t i = 0; i < root_count; i++) roots[i] = ROOT_FD0 + (int)i;
  /* Limits first, before the file is opened. No core file: a crash here is expected and says
   * nothing about the server. No file may be written. */
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
  setrlimit(RLIMIT_FSIZE, &none);
  struct rlimit cpu = {seconds, (rlim_t)seconds + 1};
  setrlimit(RLIMIT_CPU, &cpu);
#ifndef SRV_IMPORT_ASAN
  /* What the program maps at start (libraries, thread stacks) differs between machines: the
   * limit is what the import may add to it. */
  uint64_t base = mapped_bytes();
  struct rlimit as = {(rlim_t)(base + ((uint64_t)memory_mb << 20)), (rlim_t)(base + ((uint64_t)memory_mb << 20))};
  setrlimit(RLIMIT_AS, &as);
#else
  (void)mapped_bytes;
#endif
  size_t len = 0;
  uint8_t *reply = srv_import_reply(path, roots, root_count, max_vertices, max_file_mb, memory_mb, &len);
  int wrc;
  if (reply) {
    wrc = write_all(1, reply, len);
  } else {
    uint8_t head[REPLY_HEAD];
    put_head(head, MESH_ENOMEM, 0);
    wrc = write_all(1, head, sizeof(head));
  }
  /* _exit: nothing to flush, and no exit handlers (a sanitizer's leak scan would change the
   * status after the reply is out). */
  _exit(wrc == 0 ? 0 : 3);
}
