/*
 * bench_face.c — deform-bench face: latency from a face tracker's UDP datagram to the WEIGHTS
 * frame on the wire (docs/performance.md, Live face input).
 *
 *   deform-bench face [--deformd PATH] [--viewers N] [--hz H] [--seconds S] [--kind vmc|livelink]
 *                     [--threads] [--reader batch|idle|normal] [--json]
 *
 * Starts deformd --demo with the input on, connects N viewers (protocol version 1, frames read
 * raw: no replica), and sends H frames a second for S seconds from this process: frame i sets
 * jawOpen to (i mod 1000 + 1) / 1024, exact in float32, so each viewer tells from the WEIGHTS
 * frame it receives which datagram it shows. The viewers are read by one thread, epoll over
 * their sockets (as deform-bench fanout reads); --threads gives each viewer a thread of its own
 * instead. The readers run as SCHED_BATCH (--reader normal: as any thread), so that the wake-up
 * each write of the fan-out gives them does not preempt deformd's loop in the middle of it (on
 * two cores, 100 viewers: 2,100-3,600 preemptions of the loop in 10 s as normal threads,
 * 320-1,700 as batch ones; --reader idle: SCHED_IDLE, which measured no better than batch). Frames merged into a newer one by the rate limit are counted, not
 * timed.
 *
 * Two latencies per (frame, viewer), both from just before the datagram's sendto():
 *   wire: to the kernel's receive timestamp of the viewer's bytes (SO_TIMESTAMPNS, the
 *         SCM_TIMESTAMPNS of the recvmsg that read the frame's last bytes). On loopback the
 *         kernel stamps a segment when the server's write() hands it to the loopback device,
 *         so this is the moment the frame was on the wire, whenever the bench gets to read
 *         it — what issue 28's goal names.
 *   read: to when this process had read the frame (CLOCK_MONOTONIC after the read): the wire
 *         figure plus the wait of the bench's own reader for a core.
 * It also prints what the server measured of its part (face.list latency_us: the UDP receive
 * callback to the last viewer's write returned).
 *
 * DOES NOT replicate the session: viewers only decode WEIGHTS.
 */
#define _GNU_SOURCE /* SCHED_BATCH (sched.h) */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include "bench.h"
#include "client.h"
#include "proto.h"

#define MAX_FRAMES 100000

typedef struct face_opts {
  char deformd[4096];
  int viewers, json, livelink, threads, batch;
  double hz, seconds;
} face_opts;

/* Written before the datagram goes, read by the viewers: CLOCK_MONOTONIC (the "read" latency)
 * and CLOCK_REALTIME (the clock of the kernel's receive timestamps). */
static uint64_t send_ns[MAX_FRAMES], send_rt_ns[MAX_FRAMES];

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct face_viewer {
  pthread_t th;
  client_conn c;
  int stream_port, jaw, frames;
  double *lat_ms;  /* per frame index: the latency to this viewer's read, or -1 */
  double *wire_ms; /* the same to the kernel's receive timestamp */
  atomic_int ready; /* its SNAPSHOT has come whole */
} face_viewer;

static atomic_int viewers_stop;

/* One frame a viewer read at `now` (monotonic) whose last bytes the kernel stamped at `wire`
 * (realtime; 0: no stamp came): its SNAPSHOT's end, or a WEIGHTS frame to time. */
static void take_frame(face_viewer *v, const proto_header *h, const uint8_t *p, uint64_t now, uint64_t wire) {
  if (h->type == PROTO_SNAPSHOT && !(h->flags & PROTO_FLAG_MORE)) atomic_store(&v->ready, 1);
  if (h->type != PROTO_WEIGHTS) return;
  proto_weights_view w;
  if (proto_decode_weights(p, h->length, NULL, &w) != 0) return;
  proto_iter it;
  uint32_t t;
  float x;
  proto_weights_begin(&w, &it);
  while (proto_weights_next(&it, &t, &x)) {
    if ((int)t != v->jaw) continue;
    long code = lroundf(x * 1024.0f) - 1; /* i mod 1000 */
    /* the newest frame with that code sent so far */
    for (long i = code; i >= 0 && i < v->frames; i += 1000) {
      if (i + 1000 < v->frames && send_ns[i + 1000] && send_ns[i + 1000] <= now) continue;
      if (send_ns[i] && v->lat_ms[i] < 0) {
        v->lat_ms[i] = (double)(now - send_ns[i]) / 1e6;
        if (wire) v->wire_ms[i] = ((double)wire - (double)send_rt_ns[i]) / 1e6;
      }
      break;
    }
  }
}

/* Reads what the socket has (waiting up to timeout_ms for it) into the viewer's buffer with
 * recvmsg, and the kernel's receive timestamp of its last bytes into *wire (realtime ns, 0 when
 * none came). Returns 0, CLIENT_ETIMEDOUT when nothing came, or an error. */
static int read_stamped(face_viewer *v, int timeout_ms, uint64_t *wire) {
  client_conn *c = &v->c;
  *wire = 0;
  if (timeout_ms > 0) {
    struct pollfd pfd = {c->fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return CLIENT_ETIMEDOUT;
  }
  if (c->off > 0) { /* unread bytes to the front, as client.c keeps them */
    memmove(c->buf, c->buf + c->off, c->len - c->off);
    c->len -= c->off;
    c->off = 0;
  }
  if (c->cap - c->len < 65536) {
    size_t cap = c->cap ? 2 * c->cap : 131072;
    uint8_t *g = realloc(c->buf, cap);
    if (!g) return CLIENT_ENOMEM;
    c->buf = g;
    c->cap = cap;
  }
  union {
    char buf[CMSG_SPACE(sizeof(struct timespec)) * 2];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = {c->buf + c->len, c->cap - c->len};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
  ssize_t r = recvmsg(c->fd, &m, MSG_DONTWAIT);
  if (r < 0) return errno == EAGAIN || errno == EINTR ? CLIENT_ETIMEDOUT : CLIENT_EIO;
  if (r == 0) return CLIENT_ECLOSED;
  c->len += (size_t)r;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
      struct timespec ts;
      memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
      *wire = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
  return 0;
}

/* Every whole frame in the viewer's buffer, timed; a partial one stays for the next read. */
static int take_buffered(face_viewer *v, uint64_t now, uint64_t wire) {
  client_conn *c = &v->c;
  while (c->len - c->off >= PROTO_HEADER_SIZE) {
    proto_header h;
    if (proto_header_decode(c->buf + c->off, &c->limits, &h) != 0) return CLIENT_EMALFORMED;
    if (c->len - c->off < PROTO_HEADER_SIZE + (size_t)h.length) break;
    take_frame(v, &h, c->buf + c->off + PROTO_HEADER_SIZE, now, wire);
    c->off += PROTO_HEADER_SIZE + h.length;
  }
  return 0;
}

static void reader_sched(void);

static void *viewer_main(void *arg) {
  face_viewer *v = arg;
  reader_sched();
  while (!atomic_load(&viewers_stop)) {
    uint64_t wire;
    int rc = read_stamped(v, 100, &wire);
    uint64_t now = client_now_ns();
    if (rc == CLIENT_ETIMEDOUT) continue;
    if (rc || take_buffered(v, now, wire)) break;
  }
  return NULL;
}

/* Every viewer from one thread: epoll over their sockets, each ready one read once (what it
 * has), its whole frames timed. */
typedef struct epoll_reader {
  pthread_t th;
  face_viewer *v;
  int count, ep;
} epoll_reader;

/* --reader batch (the default; idle: SCHED_IDLE; normal: as any thread): the readers run as SCHED_BATCH, so that a wake-up of theirs (each write of the
 * fan-out wakes one) does not preempt deformd's loop in the middle of its writes on a machine
 * with fewer cores than runnable threads; the wire figure does not depend on when they read. */
static int reader_batch; /* 0 normal, 1 batch, 2 idle */

static void reader_sched(void) {
  struct sched_param sp = {0};
  if (reader_batch) pthread_setschedparam(pthread_self(), reader_batch == 2 ? SCHED_IDLE : SCHED_BATCH, &sp);
}

static void *epoll_main(void *arg) {
  epoll_reader *r = arg;
  reader_sched();
  struct epoll_event ev[64];
  while (!atomic_load(&viewers_stop)) {
    int n = epoll_wait(r->ep, ev, 64, 100);
    for (int k = 0; k < n; k++) {
      face_viewer *v = ev[k].data.ptr;
      uint64_t wire;
      if (read_stamped(v, 0, &wire) != 0) continue;
      take_buffered(v, client_now_ns(), wire);
    }
  }
  return NULL;
}

static size_t osc_str(uint8_t *b, const char *s) {
  size_t n = strlen(s) + 1, padded = (n + 3) & ~(size_t)3;
  memset(b, 0, padded);
  memcpy(b, s, n - 1);
  return padded;
}

static size_t be32(uint8_t *b, uint32_t v) {
  b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8), b[3] = (uint8_t)v;
  return 4;
}

/* One frame as the trackers send it: VMC, a bundle of Val jawOpen then Apply; Live Link Face,
 * a version 6 datagram with jawOpen (value 17) set. */
static size_t encode_frame(int livelink, float jaw, int frame, uint8_t *out) {
  uint32_t w;
  memcpy(&w, &jaw, 4);
  size_t at = 0;
  if (!livelink) {
    uint8_t val[64], apply[32];
    size_t nv = osc_str(val, "/VMC/Ext/Blend/Val");
    nv += osc_str(val + nv, ",sf");
    nv += osc_str(val + nv, "jawOpen");
    nv += be32(val + nv, w);
    size_t na = osc_str(apply, "/VMC/Ext/Blend/Apply");
    na += osc_str(apply + na, ",");
    memcpy(out, "#bundle\0\0\0\0\0\0\0\0\1", 16);
    at = 16;
    at += be32(out + at, (uint32_t)nv);
    memcpy(out + at, val, nv), at += nv;
    at += be32(out + at, (uint32_t)na);
    memcpy(out + at, apply, na), at += na;
    return at;
  }
  out[0] = 6, out[1] = out[2] = out[3] = 0, at = 4;
  memset(out + at, '0', 37), out[at] = '$', at += 37;
  at += be32(out + at, 5);
  memcpy(out + at, "bench", 5), at += 5;
  at += be32(out + at, (uint32_t)frame), at += be32(out + at, 0), at += be32(out + at, 60), at += be32(out + at, 1);
  out[at++] = 61;
  for (int i = 0; i < 61; i++) at += be32(out + at, i == 17 ? w : 0);
  return at;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* How often the thread `tid` of process `pid` was taken off its core while it could run
 * (nonvoluntary_ctxt_switches: preempted), or -1. deformd's loop is its main thread. */
static long preempted(pid_t pid, pid_t tid) {
  char path[64], line[128];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
  FILE *f = fopen(path, "r");
  long n = -1;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &n) == 1) break;
  if (f) fclose(f);
  return n;
}

/* The 1-minute load average, or -1. */
static double load1(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f && fscanf(f, "%lf", &l) != 1) l = -1;
  if (f) fclose(f);
  return l;
}

/* Sorts xs and gives its median, 99th percentile and largest. */
static void percentiles(double *xs, size_t n, double *p50, double *p99, double *max) {
  qsort(xs, n, sizeof(double), cmp_d);
  *p50 = xs[n / 2], *p99 = xs[(size_t)(0.99 * (double)(n - 1))], *max = xs[n - 1];
}

static int parse(int argc, char **argv, face_opts *o) {
  memset(o, 0, sizeof(*o));
  o->viewers = 100, o->hz = 60, o->seconds = 10, o->batch = 1;
  bench_default_deformd(o->deformd, sizeof(o->deformd));
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) o->json = 1;
    else if (strcmp(a, "--threads") == 0) o->threads = 1;
    else if (strcmp(a, "--reader") == 0 && v && (strcmp(v, "batch") == 0 || strcmp(v, "normal") == 0 || strcmp(v, "idle") == 0))
      o->batch = strcmp(v, "batch") == 0 ? 1 : strcmp(v, "idle") == 0 ? 2 : 0, i++;
    else if (strcmp(a, "--deformd") == 0 && v) snprintf(o->deformd, sizeof(o->deformd), "%s", v), i++;
    else if (strcmp(a, "--viewers") == 0 && v) o->viewers = atoi(v), i++;
    else if (strcmp(a, "--hz") == 0 && v) o->hz = atof(v), i++;
    else if (strcmp(a, "--seconds") == 0 && v) o->seconds = atof(v), i++;
    else if (strcmp(a, "--kind") == 0 && v) o->livelink = strcmp(v, "livelink") == 0, i++;
    else {
      fprintf(stderr, "usage: deform-bench face [--deformd PATH] [--viewers N] [--hz H] [--seconds S] "
                      "[--kind vmc|livelink] [--threads] [--reader batch|idle|normal] [--json]\n");
      return -1;
    }
  }
  if (o->viewers < 1 || o->viewers > 4000 || !(o->hz > 0) || o->hz * o->seconds >= MAX_FRAMES || !(o->seconds > 0)) {
    fprintf(stderr, "deform-bench face: 1 to 4000 viewers, --hz × --seconds under %d frames\n", MAX_FRAMES);
    return -1;
  }
  return 0;
}

/* The input's port (face.list) and jawOpen's target index (targets.list). */
static int look_up(client_conn *rpc, int *port, int *jaw) {
  cJSON *r = NULL, *e = NULL, *p = cJSON_CreateObject();
  *port = *jaw = -1;
  if (client_rpc(rpc, "face.list", p, 10000, &r, &e) == 0) {
    const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "inputs"), 0);
    if (in) *port = cJSON_GetObjectItem(in, "port")->valueint;
  }
  cJSON_Delete(r);
  cJSON_Delete(e);
  r = e = NULL;
  cJSON_AddStringToObject(p, "session", "demo");
  if (client_rpc(rpc, "targets.list", p, 10000, &r, &e) == 0) {
    int k = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, r) {
      if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, "jawOpen") == 0) *jaw = k;
      k++;
    }
  }
  cJSON_Delete(r);
  cJSON_Delete(e);
  cJSON_Delete(p);
  return *port > 0 && *jaw >= 0 ? 0 : -1;
}

int bench_face_main(int argc, char **argv, const char *cmdline) {
  face_opts o;
  if (parse(argc, argv, &o)) return 2;
  reader_batch = o.batch;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)o.viewers + 64) {
    rl.rlim_cur = rl.rlim_max < (rlim_t)o.viewers + 64 ? rl.rlim_max : (rlim_t)o.viewers + 64;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  const char *args[] = {"--demo", "--data", "none", "--http-port", "off", o.livelink ? "--livelink-port" : "--vmc-port", "0", NULL};
  bench_child child;
  char err[512];
  if (bench_child_start(o.deformd, args, &child, err, sizeof(err)) != 0) {
    fprintf(stderr, "deform-bench face: %s\n", err);
    return 1;
  }
  int status = 1, port, jaw, frames = (int)round(o.hz * o.seconds);
  client_conn rpc;
  int rpc_open = 0;
  face_viewer *v = calloc((size_t)o.viewers, sizeof(face_viewer));
  double *all = malloc(sizeof(double) * (size_t)frames * (size_t)o.viewers);
  double *wire = malloc(sizeof(double) * (size_t)frames * (size_t)o.viewers);
  int joined = 0;
  long loop_preempted = -1;
  double load_begin = -1, load_end = -1;
  if ((rpc_open = client_connect(&rpc, "127.0.0.1", child.rpc_port, err, sizeof(err)) == 0) == 0 ||
      look_up(&rpc, &port, &jaw) != 0) {
    fprintf(stderr, "deform-bench face: no face input or no jawOpen target\n");
    goto out;
  }
  epoll_reader reader = {.v = v, .ep = o.threads ? -1 : epoll_create1(0)};
  for (; joined < o.viewers; joined++) {
    face_viewer *x = &v[joined];
    x->jaw = jaw, x->frames = frames;
    x->lat_ms = malloc(sizeof(double) * (size_t)frames);
    x->wire_ms = malloc(sizeof(double) * (size_t)frames);
    for (int i = 0; i < frames; i++) x->lat_ms[i] = x->wire_ms[i] = -1;
    int on = 1;
    if (client_connect(&x->c, "127.0.0.1", child.stream_port, err, sizeof(err)) != 0 ||
        setsockopt(x->c.fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) != 0 ||
        client_hello(&x->c, "demo", PROTO_ROLE_VIEWER, NULL) != 0) {
      fprintf(stderr, "deform-bench face: viewer %d: %s\n", joined, err[0] ? err : strerror(errno));
      free(x->lat_ms);
      free(x->wire_ms);
      goto out;
    }
    if (o.threads) {
      pthread_create(&x->th, NULL, viewer_main, x);
    } else {
      struct epoll_event e = {.events = EPOLLIN, .data.ptr = x};
      epoll_ctl(reader.ep, EPOLL_CTL_ADD, x->c.fd, &e);
    }
  }
  if (!o.threads) pthread_create(&reader.th, NULL, epoll_main, &reader);
  /* every viewer has its SNAPSHOT before the first datagram (60 s at most) */
  for (int k = 0, waited = 0; k < joined && waited < 6000; waited++) {
    while (k < joined && atomic_load(&v[k].ready)) k++;
    if (k < joined) usleep(10000);
  }
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  long pre0 = preempted(child.pid, child.pid);
  double load_start = load1();
  uint64_t t0 = client_now_ns();
  for (int i = 0; i < frames && !g_stop; i++) {
    uint64_t due = t0 + (uint64_t)((double)i * 1e9 / o.hz), now = client_now_ns();
    if (due > now) usleep((useconds_t)((due - now) / 1000));
    uint8_t d[512];
    size_t n = encode_frame(o.livelink, (float)(i % 1000 + 1) / 1024.0f, i, d);
    send_rt_ns[i] = realtime_ns();
    send_ns[i] = client_now_ns();
    sendto(fd, d, n, 0, (struct sockaddr *)&to, sizeof(to));
  }
  close(fd);
  usleep(500000);
  long pre1 = preempted(child.pid, child.pid);
  loop_preempted = pre0 >= 0 && pre1 >= 0 ? pre1 - pre0 : -1;
  load_end = load1();
  load_begin = load_start;
  status = 0;
out:
  atomic_store(&viewers_stop, 1);
  size_t n = 0, nw = 0, unseen = 0;
  if (!o.threads && joined) pthread_join(reader.th, NULL);
  if (reader.ep >= 0) close(reader.ep);
  for (int k = 0; k < joined; k++) {
    if (o.threads) pthread_join(v[k].th, NULL);
    for (int i = 0; i < frames; i++) {
      if (v[k].lat_ms[i] >= 0) all[n++] = v[k].lat_ms[i];
      else unseen++;
      if (v[k].wire_ms[i] >= 0) wire[nw++] = v[k].wire_ms[i];
    }
    free(v[k].lat_ms);
    free(v[k].wire_ms);
    client_close(&v[k].c);
  }
  cJSON *stats = NULL, *rerr = NULL, *p = cJSON_CreateObject();
  double merged = -1, held = -1, srv_p50 = -1, srv_p99 = -1, srv_max = -1;
  if (status == 0 && client_rpc(&rpc, "face.list", p, 10000, &stats, &rerr) == 0) {
    const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(stats, "inputs"), 0);
    merged = cJSON_GetObjectItem(in, "merged")->valuedouble;
    const cJSON *h = cJSON_GetObjectItem(in, "held"); /* (a deformd before the counter has none) */
    held = cJSON_IsNumber(h) ? h->valuedouble : -1;
    const cJSON *lat = cJSON_GetObjectItem(in, "latency_us");
    if (cJSON_IsObject(lat)) {
      srv_p50 = cJSON_GetObjectItem(lat, "p50")->valuedouble / 1000;
      srv_p99 = cJSON_GetObjectItem(lat, "p99")->valuedouble / 1000;
      srv_max = cJSON_GetObjectItem(lat, "max")->valuedouble / 1000;
    }
  }
  cJSON_Delete(stats);
  cJSON_Delete(rerr);
  cJSON_Delete(p);
  if (status == 0 && n) {
    double r50, r99, rmax, w50 = -1, w99 = -1, wmax = -1;
    percentiles(all, n, &r50, &r99, &rmax);
    if (nw) percentiles(wire, nw, &w50, &w99, &wmax);
    if (o.json)
      printf("{\"bench\":\"face\",\"kind\":\"%s\",\"readers\":\"%s%s\",\"viewers\":%d,\"hz\":%g,\"frames\":%d,\"timed\":%zu,"
             "\"merged\":%.0f,\"held\":%.0f,\"unseen\":%zu,\"wire_timed\":%zu,\"wire_p50_ms\":%.3f,\"wire_p99_ms\":%.3f,"
             "\"wire_max_ms\":%.3f,\"read_p50_ms\":%.3f,\"read_p99_ms\":%.3f,\"read_max_ms\":%.3f,"
             "\"server_p50_ms\":%.3f,\"server_p99_ms\":%.3f,\"server_max_ms\":%.3f,\"loop_preempted\":%ld,"
             "\"load_begin\":%.2f,\"load_end\":%.2f,\"cmdline\":\"%s\"}\n",
             o.livelink ? "livelink" : "vmc", o.threads ? "threads" : "epoll", o.batch == 2 ? " idle" : o.batch ? " batch" : "", o.viewers, o.hz, frames, n,
             merged, held, unseen,
             nw, w50, w99, wmax, r50, r99, rmax, srv_p50, srv_p99, srv_max, loop_preempted, load_begin, load_end, cmdline);
    else
      printf("face %s (%s%s): %d viewers, %g Hz, %d frames (%.0f merged, %.0f held for the rate), over %zu (frame, viewer), "
             "%zu not seen:\n"
             "  datagram -> WEIGHTS on the wire (kernel timestamp): p50 %.3f ms, p99 %.3f ms, max %.3f ms\n"
             "  datagram -> WEIGHTS read by the bench:              p50 %.3f ms, p99 %.3f ms, max %.3f ms\n"
             "  server, receive -> last write (face.list):          p50 %.3f ms, p99 %.3f ms, max %.3f ms\n"
             "  deformd's loop thread preempted %ld times while the frames were sent; load average %.2f -> %.2f\n",
             o.livelink ? "livelink" : "vmc", o.threads ? "a thread per viewer" : "one epoll reader",
             o.batch == 2 ? ", SCHED_IDLE" : o.batch ? ", SCHED_BATCH" : "", o.viewers, o.hz,
             frames, merged, held, n, unseen, w50, w99, wmax, r50, r99, rmax, srv_p50, srv_p99, srv_max, loop_preempted,
             load_begin, load_end);
  } else if (status == 0) {
    fprintf(stderr, "deform-bench face: no frame reached a viewer\n");
    status = 1;
  }
  if (rpc_open) client_close(&rpc);
  free(all);
  free(wire);
  free(v);
  bench_child_stop(&child);
  return status;
}
