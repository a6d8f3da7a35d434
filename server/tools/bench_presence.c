/*
 * bench_presence.c — `deform-bench presence`: presence fan-out (docs/protocol.md §16).
 *
 *   deform-bench presence [--editors 50] [--viewers 500] [--rate 60] [--seconds 10] [--json]
 *                         [--deformd PATH]
 *
 * A fresh deformd --demo; E editors (stream connections granted "presence") each move their
 * cursor and camera RATE times a second, and V viewers granted "presence" watch. Every STATE an
 * editor sends carries its send time (microseconds of the bench's monotonic clock, split over
 * two float32 fields that hold integers exactly), so each STATE record a viewer receives gives
 * one delivery latency: send -> server (coalesced to 60 Hz, newest wins) -> viewer, all on
 * loopback, measured in one process on one clock. The run reports p50/p99/max of those, the
 * records delivered against the records a viewer could at most get (each editor's newest state
 * once per 60 Hz period: the rest coalesce), the server's CPU (utime + stime over the measured
 * seconds, as a share of one core) and what server.stats says (updates sent, skipped).
 *
 * One thread sends for every editor; one thread reads every connection (epoll), editors too (an
 * editor that stopped reading would have its input paused by the server's backpressure). On a
 * 2-core machine the bench's own reading shares the cores with deformd: its latencies are an
 * upper bound of the server's.
 *
 * DOES NOT compare against a goal: docs/performance.md states the goal beside the figures.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
#include "proto_caps.h"
#include "proto_presence.h"

#define STAMP_SPLIT 1048576.0 /* t_us = hi * 2^20 + lo: both below 2^24, exact in a float */

typedef struct pconn {
  client_conn c;
  int editor;
  uint8_t *buf;
  size_t len, cap;
  int joined;
  char why[160];
} pconn;

typedef struct pbench {
  int editors, viewers;
  double rate, seconds;
  pconn *conns; /* editors first */
  atomic_int measuring, done;
  uint64_t t0_us;
  uint64_t *lat_us;
  size_t nlat, lat_cap;
  uint64_t records, frames, bytes;
  atomic_ullong sent;
  int failed;
} pbench;

static uint64_t now_us(void) { return client_now_ns() / 1000; }

static int hello(pbench *b, pconn *p, int port, int editor, int i, char *err, size_t errlen) {
  char author[32];
  snprintf(author, sizeof(author), "%s-%d", editor ? "editor" : "viewer", i);
  proto_hello_opts o = {.caps = PROTO_CAP_BIT(PROTO_CAP_PRESENCE), .author = {author, (uint16_t)strlen(author)}};
  (void)b;
  if (client_connect(&p->c, "127.0.0.1", port, err, errlen) != 0) return -1;
  p->editor = editor;
  return client_hello2(&p->c, "demo", editor ? PROTO_ROLE_EDITOR : PROTO_ROLE_VIEWER, NULL, &o) == 0 ? 0 : -1;
}

static void add_lat(pbench *b, uint64_t us) {
  if (b->nlat == b->lat_cap) {
    size_t cap = b->lat_cap ? 2 * b->lat_cap : 65536;
    uint64_t *g = realloc(b->lat_us, cap * sizeof(*g));
    if (!g) return;
    b->lat_us = g;
    b->lat_cap = cap;
  }
  b->lat_us[b->nlat++] = us;
}

/* One whole frame a connection received. */
static void on_frame(pbench *b, pconn *p, const proto_header *h, const uint8_t *payload, uint64_t now) {
  if (h->type == PROTO_SNAPSHOT) p->joined = 1;
  if (h->type == PROTO_ERROR || h->type == PROTO_BYE) snprintf(p->why, sizeof(p->why), "the server sent ERROR/BYE");
  if (h->type != PROTO_PRESENCE || p->editor || !atomic_load(&b->measuring)) return;
  b->frames++;
  b->bytes += PROTO_HEADER_SIZE + h->length;
  proto_presence_iter it;
  proto_presence_rec r;
  proto_presence_iter_init(&it, payload, h->length);
  while (proto_presence_next(&it, &r) == 1) {
    if (r.kind != PROTO_PRES_STATE) continue;
    uint64_t sent = (uint64_t)r.u.state.eye[0] * (uint64_t)STAMP_SPLIT + (uint64_t)r.u.state.eye[1];
    if (sent < b->t0_us || sent > now) continue; /* from before the measured seconds */
    b->records++;
    add_lat(b, now - sent);
  }
}

/* Reads what is there on p and handles every whole frame. -1 when the connection failed. */
static int drain(pbench *b, pconn *p, uint8_t *scratch, size_t cap) {
  for (int i = 0; i < 16; i++) {
    ssize_t n = recv(p->c.fd, scratch, cap, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      snprintf(p->why, sizeof(p->why), "%s", n == 0 ? "closed by the server" : strerror(errno));
      return -1;
    }
    if (p->len + (size_t)n > p->cap) {
      size_t nc = p->cap ? p->cap : 65536;
      while (nc < p->len + (size_t)n) nc *= 2;
      uint8_t *g = realloc(p->buf, nc);
      if (!g) return -1;
      p->buf = g;
      p->cap = nc;
    }
    memcpy(p->buf + p->len, scratch, (size_t)n);
    p->len += (size_t)n;
    if ((size_t)n < cap) break;
  }
  uint64_t now = now_us();
  size_t at = 0;
  while (p->len - at >= PROTO_HEADER_SIZE) {
    proto_header h;
    if (proto_header_decode(p->buf + at, NULL, &h) != 0) {
      snprintf(p->why, sizeof(p->why), "a frame header that does not decode");
      return -1;
    }
    if (p->len - at - PROTO_HEADER_SIZE < h.length) break;
    on_frame(b, p, &h, p->buf + at + PROTO_HEADER_SIZE, now);
    at += PROTO_HEADER_SIZE + h.length;
  }
  memmove(p->buf, p->buf + at, p->len - at);
  p->len -= at;
  return 0;
}

/* Every editor's next STATE, RATE times a second, the editors spread over the period. */
static void *sender_main(void *arg) {
  pbench *b = arg;
  uint64_t period = (uint64_t)(1e6 / b->rate), start = now_us();
  proto_buf out;
  proto_buf_init(&out);
  for (uint64_t tick = 0; !atomic_load(&b->done) && !g_stop; tick++) {
    for (int e = 0; e < b->editors && !atomic_load(&b->done); e++) {
      uint64_t due = start + tick * period + period * (uint64_t)e / (uint64_t)b->editors, now = now_us();
      if (due > now) usleep((useconds_t)(due - now));
      now = now_us();
      float a = (float)(tick * 0.05 + e);
      proto_presence_state s = {0, PROTO_PRES_CURSOR | PROTO_PRES_CAMERA, PROTO_TOOL_BRUSH0 + 5,
                                {0.05f * sinf(a), 0.05f * cosf(a), 0.1f}, {0, 0, 1}, 0.02f,
                                {(float)(now / (uint64_t)STAMP_SPLIT), (float)(now % (uint64_t)STAMP_SPLIT), 2},
                                {0, 0, 0}, 0.7f};
      out.len = 0;
      size_t at = proto_presence_begin(&out);
      proto_presence_put_state(&out, &s);
      proto_presence_end(&out, at);
      if (client_send(&b->conns[e].c, out.data, out.len) != 0) {
        b->failed = 1;
        break;
      }
      atomic_fetch_add(&b->sent, 1);
    }
  }
  proto_buf_fini(&out);
  return NULL;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return a < c ? -1 : a > c;
}

static double pct_ms(const uint64_t *s, size_t n, double q) {
  if (n == 0) return NAN;
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return (double)s[i] / 1000.0;
}

static double stat_of(client_conn *rpc, const char *key) {
  cJSON *res = NULL, *error = NULL;
  double v = -1;
  if (client_rpc(rpc, "server.stats", NULL, 10000, &res, &error) == 0 && res) {
    cJSON *p = cJSON_GetObjectItem(res, "presence");
    cJSON *x = p ? cJSON_GetObjectItem(p, key) : NULL;
    if (cJSON_IsNumber(x)) v = x->valuedouble;
  }
  cJSON_Delete(res);
  cJSON_Delete(error);
  return v;
}

static int parse(int argc, char **argv, pbench *b, int *json, const char **deformd) {
  b->editors = 50, b->viewers = 500, b->rate = 60, b->seconds = 10;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) {
      *json = 1;
      continue;
    }
    if (!v) return -1;
    if (strcmp(a, "--editors") == 0) b->editors = atoi(v);
    else if (strcmp(a, "--viewers") == 0) b->viewers = atoi(v);
    else if (strcmp(a, "--rate") == 0) b->rate = atof(v);
    else if (strcmp(a, "--seconds") == 0) b->seconds = atof(v);
    else if (strcmp(a, "--deformd") == 0) *deformd = v;
    else return -1;
    i++;
  }
  return b->editors >= 1 && b->viewers >= 1 && b->rate > 0 && b->seconds > 0 ? 0 : -1;
}

/* Joins everyone and waits for every SNAPSHOT. */
static int join_all(pbench *b, int port, int ep, uint8_t *scratch, size_t cap, char *err, size_t errlen) {
  int n = b->editors + b->viewers, joined = 0;
  for (int i = 0; i < n; i++) {
    pconn *p = &b->conns[i];
    if (hello(b, p, port, i < b->editors, i, err, errlen) != 0) return -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = p};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, p->c.fd, &ev) != 0) return -1;
  }
  uint64_t deadline = now_us() + 120000000ull;
  while (joined < n) {
    if (now_us() > deadline || g_stop) {
      snprintf(err, errlen, "%d of %d connections joined in 120 s", joined, n);
      return -1;
    }
    struct epoll_event ev[64];
    int k = epoll_wait(ep, ev, 64, 100);
    for (int i = 0; i < k; i++) {
      pconn *p = ev[i].data.ptr;
      int was = p->joined;
      if (drain(b, p, scratch, cap) != 0) {
        snprintf(err, errlen, "a connection failed while joining: %s", p->why);
        return -1;
      }
      joined += p->joined && !was;
    }
  }
  return 0;
}

int bench_presence_main(int argc, char **argv, const char *cmdline) {
  pbench b;
  memset(&b, 0, sizeof(b));
  int json = 0, rc = 1;
  const char *deformd = NULL;
  char path[4096] = "", err[512] = "";
  if (parse(argc, argv, &b, &json, &deformd) != 0) {
    fprintf(stderr, "usage: deform-bench presence [--editors N] [--viewers N] [--rate HZ] [--seconds S] [--json] "
                    "[--deformd PATH]\n");
    return 2;
  }
  if (!deformd) bench_default_deformd(path, sizeof(path));
  else snprintf(path, sizeof(path), "%s", deformd);
  int n = b.editors + b.viewers;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
    rl.rlim_cur = rl.rlim_max < (rlim_t)n + 64 ? rl.rlim_max : (rlim_t)n + 64;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  static const char *const args[] = {"--demo", "--data", "none", "--max-connections", "4096", NULL};
  bench_child child = {0};
  size_t cap = 1 << 16;
  uint8_t *scratch = malloc(cap);
  b.conns = calloc((size_t)n, sizeof(pconn));
  int ep = epoll_create1(0);
  client_conn rpc = {.fd = -1};
  pthread_t sender;
  int sending = 0;
  for (int i = 0; b.conns && i < n; i++) b.conns[i].c.fd = -1;
  if (!scratch || !b.conns || ep < 0 || bench_child_start(path, args, &child, err, sizeof(err)) != 0) goto out;
  if (client_connect(&rpc, "127.0.0.1", child.rpc_port, err, sizeof(err)) != 0) goto out;
  if (join_all(&b, child.stream_port, ep, scratch, cap, err, sizeof(err)) != 0) goto out;
  if (pthread_create(&sender, NULL, sender_main, &b) != 0) goto out;
  sending = 1;
  /* One second to settle (everyone's first lists), then the measured seconds. */
  uint64_t warm = now_us() + 1000000, end = warm + (uint64_t)(b.seconds * 1e6);
  double cpu0 = 0, skipped0 = 0, updates0 = 0, sent0 = 0;
  while (now_us() < end && !g_stop && !b.failed) {
    if (!atomic_load(&b.measuring) && now_us() >= warm) {
      cpu0 = bench_proc_cpu_s(child.pid);
      skipped0 = stat_of(&rpc, "skipped");
      updates0 = stat_of(&rpc, "updates");
      sent0 = (double)atomic_load(&b.sent);
      b.t0_us = now_us();
      atomic_store(&b.measuring, 1);
    }
    struct epoll_event ev[64];
    int k = epoll_wait(ep, ev, 64, 50);
    for (int i = 0; i < k; i++)
      if (drain(&b, ev[i].data.ptr, scratch, cap) != 0) {
        snprintf(err, sizeof(err), "a connection failed: %s", ((pconn *)ev[i].data.ptr)->why);
        goto out;
      }
  }
  atomic_store(&b.measuring, 0);
  double secs = (double)(now_us() - b.t0_us) / 1e6;
  double cpu = bench_proc_cpu_s(child.pid) - cpu0;
  double skipped = stat_of(&rpc, "skipped") - skipped0, updates = stat_of(&rpc, "updates") - updates0;
  double sent = (double)atomic_load(&b.sent) - sent0;
  qsort(b.lat_us, b.nlat, sizeof(uint64_t), cmp_u64);
  /* A viewer gets at most each editor's newest state once per 60 Hz update. */
  double most = (double)b.viewers * b.editors * secs * fmin(b.rate, 60.0);
  double p50 = pct_ms(b.lat_us, b.nlat, 0.5), p99 = pct_ms(b.lat_us, b.nlat, 0.99);
  double mx = b.nlat ? (double)b.lat_us[b.nlat - 1] / 1000.0 : NAN;
  if (json) {
    printf("{\"bench\":\"presence\",\"editors\":%d,\"viewers\":%d,\"rate\":%g,\"seconds\":%.2f,\"states_sent\":%.0f,"
           "\"records_delivered\":%llu,\"delivered_share\":%.4f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
           "\"server_cpu_core_share\":%.3f,\"updates_per_s\":%.0f,\"skipped\":%.0f,\"mb_per_s\":%.1f,\"command\":\"%s\"}\n",
           b.editors, b.viewers, b.rate, secs, sent, (unsigned long long)b.records, most > 0 ? (double)b.records / most : 0,
           p50, p99, mx, cpu / secs, updates / secs, skipped, (double)b.bytes / secs / 1e6, cmdline);
  } else {
    printf("%s\n", cmdline);
    printf("%d editors at %g Hz -> %d viewers, %.1f s measured\n", b.editors, b.rate, b.viewers, secs);
    printf("  states sent %.0f (%.0f/s); STATE records delivered %llu (%.1f %% of the most a 60 Hz update can carry)\n",
           sent, sent / secs, (unsigned long long)b.records, most > 0 ? 100.0 * (double)b.records / most : 0);
    printf("  delivery latency p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", p50, p99, mx);
    printf("  server CPU %.0f %% of one core; %.0f PRESENCE frames/s sent, %.0f skipped for slow viewers; %.1f MB/s to viewers\n",
           100.0 * cpu / secs, updates / secs, skipped, (double)b.bytes / secs / 1e6);
  }
  rc = 0;
out:
  atomic_store(&b.done, 1);
  if (sending) pthread_join(sender, NULL);
  if (rc) fprintf(stderr, "deform-bench presence: %s\n", err[0] ? err : "failed");
  for (int i = 0; b.conns && i < n; i++) {
    if (b.conns[i].c.fd >= 0) client_close(&b.conns[i].c);
    free(b.conns[i].buf);
  }
  if (rpc.fd >= 0) client_close(&rpc);
  if (child.pid > 0) bench_child_stop(&child);
  if (ep >= 0) close(ep);
  free(b.conns);
  free(b.lat_us);
  free(scratch);
  return rc;
}
