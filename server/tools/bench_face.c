/*
 * bench_face.c — deform-bench face: latency from a face tracker's UDP datagram to the WEIGHTS
 * frame on the wire (docs/performance.md, Live face input).
 *
 *   deform-bench face [--deformd PATH] [--viewers N] [--hz H] [--seconds S] [--kind vmc|livelink]
 *                     [--threads] [--json]
 *
 * Starts deformd --demo with the input on, connects N viewers (protocol version 1, frames read
 * raw: no replica), and sends H frames a second for S seconds from this process: frame i sets
 * jawOpen to (i mod 1000 + 1) / 1024, exact in float32, so each viewer tells from the WEIGHTS
 * frame it receives which datagram it shows. The viewers are read by one thread, epoll over
 * their sockets (as deform-bench fanout reads), so what is timed is the server's path and the
 * kernel's, not a hundred reader threads waiting for two cores; --threads gives each viewer a
 * thread of its own instead. A datagram's latency, per viewer, is from just
 * before its sendto() to when that viewer's frame has been read; frames merged
 * into a newer one by the rate limit are counted, not timed. Reports p50, p99 and the largest
 * over every (frame, viewer), and how many frames were merged or never seen.
 *
 * DOES NOT replicate the session: viewers only decode WEIGHTS.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include "bench.h"
#include "client.h"
#include "proto.h"

#define MAX_FRAMES 100000

typedef struct face_opts {
  char deformd[4096];
  int viewers, json, livelink, threads;
  double hz, seconds;
} face_opts;

static uint64_t send_ns[MAX_FRAMES]; /* written before the datagram goes, read by the viewers */

typedef struct face_viewer {
  pthread_t th;
  client_conn c;
  int stream_port, jaw, frames;
  double *lat_ms; /* per frame index: the latency this viewer saw, or -1 */
  atomic_int ready; /* its SNAPSHOT has come whole */
} face_viewer;

static atomic_int viewers_stop;

/* One frame a viewer read at `now`: its SNAPSHOT's end, or a WEIGHTS frame to time. */
static void take_frame(face_viewer *v, const proto_header *h, const uint8_t *p, uint64_t now) {
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
      if (send_ns[i] && v->lat_ms[i] < 0) v->lat_ms[i] = (double)(now - send_ns[i]) / 1e6;
      break;
    }
  }
}

static void *viewer_main(void *arg) {
  face_viewer *v = arg;
  while (!atomic_load(&viewers_stop)) {
    proto_header h;
    const uint8_t *p;
    char err[128];
    int rc = client_read_frame(&v->c, 100, &h, &p, err, sizeof(err));
    uint64_t now = client_now_ns();
    if (rc == CLIENT_ETIMEDOUT) continue;
    if (rc) break;
    take_frame(v, &h, p, now);
  }
  return NULL;
}

/* Every viewer from one thread: epoll over their sockets, each ready one read to its last whole
 * frame (a partial frame stays buffered for the next wake-up). */
typedef struct epoll_reader {
  pthread_t th;
  face_viewer *v;
  int count, ep;
} epoll_reader;

static void *epoll_main(void *arg) {
  epoll_reader *r = arg;
  struct epoll_event ev[64];
  while (!atomic_load(&viewers_stop)) {
    int n = epoll_wait(r->ep, ev, 64, 100);
    uint64_t now = client_now_ns();
    for (int k = 0; k < n; k++) {
      face_viewer *v = ev[k].data.ptr;
      for (;;) {
        proto_header h;
        const uint8_t *p;
        char err[128];
        if (client_read_frame(&v->c, 0, &h, &p, err, sizeof(err)) != 0) break;
        take_frame(v, &h, p, now);
      }
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

static int parse(int argc, char **argv, face_opts *o) {
  memset(o, 0, sizeof(*o));
  o->viewers = 100, o->hz = 60, o->seconds = 10;
  bench_default_deformd(o->deformd, sizeof(o->deformd));
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) o->json = 1;
    else if (strcmp(a, "--threads") == 0) o->threads = 1;
    else if (strcmp(a, "--deformd") == 0 && v) snprintf(o->deformd, sizeof(o->deformd), "%s", v), i++;
    else if (strcmp(a, "--viewers") == 0 && v) o->viewers = atoi(v), i++;
    else if (strcmp(a, "--hz") == 0 && v) o->hz = atof(v), i++;
    else if (strcmp(a, "--seconds") == 0 && v) o->seconds = atof(v), i++;
    else if (strcmp(a, "--kind") == 0 && v) o->livelink = strcmp(v, "livelink") == 0, i++;
    else {
      fprintf(stderr, "usage: deform-bench face [--deformd PATH] [--viewers N] [--hz H] [--seconds S] "
                      "[--kind vmc|livelink] [--threads] [--json]\n");
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
  int joined = 0;
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
    for (int i = 0; i < frames; i++) x->lat_ms[i] = -1;
    if (client_connect(&x->c, "127.0.0.1", child.stream_port, err, sizeof(err)) != 0 ||
        client_hello(&x->c, "demo", PROTO_ROLE_VIEWER, NULL) != 0) {
      fprintf(stderr, "deform-bench face: viewer %d: %s\n", joined, err);
      free(x->lat_ms);
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
  uint64_t t0 = client_now_ns();
  for (int i = 0; i < frames && !g_stop; i++) {
    uint64_t due = t0 + (uint64_t)((double)i * 1e9 / o.hz), now = client_now_ns();
    if (due > now) usleep((useconds_t)((due - now) / 1000));
    uint8_t d[512];
    size_t n = encode_frame(o.livelink, (float)(i % 1000 + 1) / 1024.0f, i, d);
    send_ns[i] = client_now_ns();
    sendto(fd, d, n, 0, (struct sockaddr *)&to, sizeof(to));
  }
  close(fd);
  usleep(500000);
  status = 0;
out:
  atomic_store(&viewers_stop, 1);
  size_t n = 0, unseen = 0;
  if (!o.threads && joined) pthread_join(reader.th, NULL);
  if (reader.ep >= 0) close(reader.ep);
  for (int k = 0; k < joined; k++) {
    if (o.threads) pthread_join(v[k].th, NULL);
    for (int i = 0; i < frames; i++)
      if (v[k].lat_ms[i] >= 0) all[n++] = v[k].lat_ms[i];
      else unseen++;
    free(v[k].lat_ms);
    client_close(&v[k].c);
  }
  cJSON *stats = NULL, *rerr = NULL, *p = cJSON_CreateObject();
  double merged = -1;
  if (status == 0 && client_rpc(&rpc, "face.list", p, 10000, &stats, &rerr) == 0)
    merged = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(stats, "inputs"), 0), "merged")->valuedouble;
  cJSON_Delete(stats);
  cJSON_Delete(rerr);
  cJSON_Delete(p);
  if (status == 0 && n) {
    qsort(all, n, sizeof(double), cmp_d);
    double p50 = all[n / 2], p99 = all[(size_t)(0.99 * (double)(n - 1))], worst = all[n - 1];
    if (o.json)
      printf("{\"bench\":\"face\",\"kind\":\"%s\",\"readers\":\"%s\",\"viewers\":%d,\"hz\":%g,\"frames\":%d,\"timed\":%zu,"
             "\"merged\":%.0f,\"unseen\":%zu,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"cmdline\":\"%s\"}\n",
             o.livelink ? "livelink" : "vmc", o.threads ? "threads" : "epoll", o.viewers, o.hz, frames, n, merged, unseen,
             p50, p99, worst, cmdline);
    else
      printf("face %s (%s): %d viewers, %g Hz, %d frames (%.0f merged): datagram -> WEIGHTS read, over %zu "
             "(frame, viewer): p50 %.3f ms, p99 %.3f ms, max %.3f ms; %zu not seen\n",
             o.livelink ? "livelink" : "vmc", o.threads ? "a thread per viewer" : "one epoll reader", o.viewers, o.hz,
             frames, merged, n, p50, p99, worst, unseen);
  } else if (status == 0) {
    fprintf(stderr, "deform-bench face: no frame reached a viewer\n");
    status = 1;
  }
  if (rpc_open) client_close(&rpc);
  free(all);
  free(v);
  bench_child_stop(&child);
  return status;
}
