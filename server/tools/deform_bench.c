/*
 * deform_bench.c — deform-bench, deformd's benchmark program.
 *
 *   deform-bench fanout --viewers N[,N...] --rate HZ --seconds S [--relays R] [--sculpt HZ] [--tls] [--json]
 *                       [--deformd PATH] [--redis-server PATH]
 *
 * fanout: for each N, spawns a fresh `deformd --demo` on free loopback ports, joins N viewers
 * (one thread, epoll over N non-blocking sockets) and waits until every one has its SNAPSHOT,
 * then one editor thread sends HZ binary EDIT frames per second for S seconds, each setting
 * target 0 (jaw_open) to seq·2^-20 so that a viewer decoding a WEIGHTS frame knows which edit
 * it carries and when it was sent (CLOCK_MONOTONIC, same process). Reported per N: deliveries
 * expected vs received, frames/s, p50/p99/max edit→viewer latency, mean WEIGHTS frame size,
 * server CPU (/proc/<pid>/stat over the measured interval, % of one core), the bench's own CPU,
 * the whole machine's busy CPU (to spot other load), and server.stats counters. Skipped edits
 * are "coalesced" when a later frame superseded them and "lost" when the viewer never got past
 * them; "no-loss" means every viewer ended at the final version and nobody was dropped.
 *
 * Output: a table on stdout, or with --json one JSON object per result (one line each). Both
 * carry the exact command line. Progress goes to stderr.
 *
 * --relays R: the viewers join R relays (round robin) of one primary through a redis-server of
 * the bench's own (bench_cluster.c); the editor edits on the primary, so latency is editor →
 * primary → Redis → relay → viewer, and CPU is reported per process (primary, relays, Redis)
 * and per delivered frame. --sculpt HZ: a second editor sends a 64-vertex offsets EDIT that
 * often (DELTA frames to every viewer, counted but not timed). --tls: deformd speaks TLS on every
 * port (a throw-away EC P-256 certificate made with the openssl command), and every client of
 * the bench verifies it: the same run, encrypted per connection (one node only).
 *
 * (`deform-bench stream` is bench_stream.c; solve, brush and blend are bench_solve.c, bench_blend.c;
 * undo is bench_undo.c.)
 *
 * DOES NOT: tune or restart the server, measure anything but loopback, isolate itself from the
 * server (both share the machine's cores), decode meshes (SNAPSHOT payloads are skipped, not
 * buffered: 500 × 2.5 MB for nothing), or carry on past a deformd that misbehaves — it reports
 * and stops. The deformd child is always SIGTERMed and reaped, on every exit path.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "dfm.h"
#include "client.h"

#define BENCH_MAX_RUNS 16
#define BENCH_KEEP_MAX (1u << 20) /* largest frame payload a viewer buffers to decode */
#define BENCH_SEQ_SCALE 1048576.0 /* weight = seq / 2^20, exact in a float for seq < 2^20 */


static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

typedef struct bench_opts {
  uint32_t viewers[BENCH_MAX_RUNS];
  int runs;
  double rate, seconds;
  int json;
  int relays;
  double sculpt;             /* Hz of the sculpt stream, 0: none */
  int tls;                   /* --tls */
  char tls_dir[64];          /* the throw-away certificate's folder ("" before it is made) */
  char redis_server[4096];
  char deformd[4096];
  char *cmdline; /* owned */
} bench_opts;

/* Busy time of the whole machine (every core, every process) in seconds, from /proc/stat: it
 * shows how much of the CPU went to neither deformd nor the bench. */
static double host_busy_s(void) {
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {0};
  int k = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7])
            : 0;
  if (f) fclose(f);
  if (k != 8) return -1;
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- JSON-RPC helpers ------------------------------------------------------------------------ */

/* Calls `method` with {"session":"demo"} or no params. Returns the result (caller frees) or
 * NULL; *rpc_error tells an error answer from no answer. */
static cJSON *rpc_call(client_conn *rpc, const char *method, int with_session, int *rpc_error) {
  cJSON *params = NULL, *result = NULL, *error = NULL;
  if (with_session) {
    params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "session", "demo");
  }
  int rc = client_rpc(rpc, method, params, 30000, &result, &error);
  cJSON_Delete(params);
  cJSON_Delete(error);
  if (rpc_error) *rpc_error = rc == CLIENT_ERPC;
  return rc == 0 ? result : NULL;
}

static double json_num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* ---- viewers ------------------------------------------------------------------------------- */

typedef struct viewer {
  int fd;
  client_conn conn;          /* --tls: the connection (TLS state), read with client_read_some */
  uint8_t hdr[PROTO_HEADER_SIZE];
  size_t hdr_have;
  proto_header h;
  int in_payload, keep; /* reading a payload; buffering it (or skipping it) */
  uint8_t *payload;
  size_t pay_have, pay_cap;
  int joined, dead;
  uint64_t last_version;
  uint32_t max_seq, delivered, catchups, order_errors, deltas;
  char why[128];
} viewer;

typedef struct fanout {
  viewer *v;
  uint32_t n, joined, dead;
  uint32_t target;            /* index of jaw_open */
  uint32_t edits;             /* planned */
  _Atomic uint64_t *send_ns;  /* [1..edits]: when the editor sent seq */
  uint64_t *lat;              /* latency samples, ns */
  size_t nlat, lat_cap;
  uint64_t weights_frames, weights_bytes;
  uint64_t last_rx_ns; /* when a viewer last received bytes */
  int oom;
  /* editor */
  client_conn editor;
  double rate;
  atomic_uint sent;
  atomic_int editor_done;
  /* the sculpt stream (--sculpt) */
  client_conn sculptor;
  double sculpt_rate;
  atomic_uint sculpt_sent;
  atomic_int sculptor_done;
  uint64_t start_version;
  const char *tls_ca;         /* --tls: the certificate every client verifies; NULL in clear */
} fanout;

/* A connection of the bench to deformd on `port`: TLS verified against f->tls_ca with --tls. */
static int connect_to(const fanout *f, client_conn *c, int port, char *err, size_t errlen) {
  if (client_connect(c, "127.0.0.1", port, err, errlen) != 0) return -1;
  if (f->tls_ca && client_tls_start(c, "127.0.0.1", f->tls_ca, 10000, err, errlen) != 0) {
    client_close(c);
    return -1;
  }
  return 0;
}

static void viewer_fail(fanout *f, viewer *v, const char *why) {
  if (v->dead) return;
  v->dead = 1;
  f->dead++;
  snprintf(v->why, sizeof(v->why), "%s", why);
}

static void add_latency(fanout *f, uint64_t ns) {
  if (f->nlat == f->lat_cap) {
    size_t cap = f->lat_cap ? 2 * f->lat_cap : 4096;
    uint64_t *g = realloc(f->lat, cap * sizeof(*g));
    if (!g) {
      f->oom = 1;
      return;
    }
    f->lat = g;
    f->lat_cap = cap;
  }
  f->lat[f->nlat++] = ns;
}

static void on_weights(fanout *f, viewer *v, uint64_t now) {
  proto_weights_view w;
  int rc = proto_decode_weights(v->payload, v->h.length, NULL, &w);
  if (rc) {
    viewer_fail(f, v, proto_strerror(rc));
    return;
  }
  if (v->h.session_version <= v->last_version) v->order_errors++;
  v->last_version = v->h.session_version;
  f->weights_frames++;
  f->weights_bytes += PROTO_HEADER_SIZE + v->h.length;
  if (v->h.flags & PROTO_FLAG_CATCHUP) v->catchups++;
  else v->delivered++;
  proto_iter it;
  uint32_t t;
  float value;
  proto_weights_begin(&w, &it);
  while (proto_weights_next(&it, &t, &value)) {
    if (t != f->target) continue;
    double s = (double)value * BENCH_SEQ_SCALE;
    uint32_t seq = (uint32_t)s;
    if ((double)seq != s || seq == 0 || seq > f->edits) continue; /* not one of ours */
    uint64_t sent = atomic_load_explicit(&f->send_ns[seq], memory_order_acquire);
    if (sent && now >= sent) add_latency(f, now - sent);
    if (seq > v->max_seq) v->max_seq = seq;
  }
}

static void on_frame(fanout *f, viewer *v, uint64_t now) {
  switch (v->h.type) {
    case PROTO_SNAPSHOT:
      if (!v->joined) f->joined++;
      v->joined = 1;
      v->last_version = v->h.session_version;
      break;
    case PROTO_WEIGHTS:
      on_weights(f, v, now);
      break;
    case PROTO_DELTA: /* the sculpt stream: counted, in order */
      if (v->h.session_version <= v->last_version) v->order_errors++;
      v->last_version = v->h.session_version;
      v->deltas++;
      break;
    case PROTO_ERROR:
    case PROTO_BYE: {
      proto_error e;
      char why[128] = "ERROR/BYE frame";
      if (proto_decode_error(v->payload, v->h.length, &e) == 0)
        snprintf(why, sizeof(why), "server said %u: %.*s", e.code, (int)e.message.len, e.message.ptr);
      viewer_fail(f, v, why);
      break;
    }
    default:
      break;
  }
}

/* Feeds received bytes through the viewer's frame parser. */
static void viewer_feed(fanout *f, viewer *v, const uint8_t *p, size_t n, uint64_t now) {
  while (n > 0 && !v->dead) {
    if (!v->in_payload) {
      size_t take = PROTO_HEADER_SIZE - v->hdr_have < n ? PROTO_HEADER_SIZE - v->hdr_have : n;
      memcpy(v->hdr + v->hdr_have, p, take);
      v->hdr_have += take;
      p += take;
      n -= take;
      if (v->hdr_have < PROTO_HEADER_SIZE) return;
      int rc = proto_header_decode(v->hdr, NULL, &v->h);
      if (rc) {
        viewer_fail(f, v, proto_strerror(rc));
        return;
      }
      v->in_payload = 1;
      v->pay_have = 0;
      v->keep = v->h.type != PROTO_SNAPSHOT && v->h.type != PROTO_DELTA && v->h.length <= BENCH_KEEP_MAX;
      if (v->keep && v->h.length > v->pay_cap) {
        uint8_t *g = realloc(v->payload, v->h.length);
        if (!g) {
          viewer_fail(f, v, "out of memory");
          return;
        }
        v->payload = g;
        v->pay_cap = v->h.length;
      }
    } else {
      size_t left = v->h.length - v->pay_have, take = left < n ? left : n;
      if (v->keep) memcpy(v->payload + v->pay_have, p, take);
      v->pay_have += take;
      p += take;
      n -= take;
    }
    if (v->pay_have == v->h.length) {
      on_frame(f, v, now);
      v->in_payload = 0;
      v->hdr_have = 0;
    }
  }
}

/* Reads what is ready on a viewer (a bounded number of reads per wakeup). */
static void viewer_read(fanout *f, viewer *v, uint8_t *scratch, size_t cap) {
  if (v->conn.tls) { /* until SSL has nothing more: what it buffered, epoll does not report */
    for (long r; !v->dead && (r = client_read_some(&v->conn, scratch, cap)) != 0;) {
      if (r < 0) {
        viewer_fail(f, v, client_strerror((int)r));
        return;
      }
      f->last_rx_ns = client_now_ns();
      viewer_feed(f, v, scratch, (size_t)r, f->last_rx_ns);
    }
    return;
  }
  for (int i = 0; i < 8 && !v->dead; i++) {
    ssize_t r = recv(v->fd, scratch, cap, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) {
      viewer_fail(f, v, r == 0 ? "connection closed by the server" : strerror(errno));
      return;
    }
    f->last_rx_ns = client_now_ns();
    viewer_feed(f, v, scratch, (size_t)r, f->last_rx_ns);
    if ((size_t)r < cap) return;
  }
}

/* Waits up to timeout_ms for events and handles them. Returns -1 on an epoll failure. */
static int pump(fanout *f, int ep, uint8_t *scratch, size_t cap, int timeout_ms) {
  struct epoll_event ev[64];
  int k = epoll_wait(ep, ev, 64, timeout_ms);
  if (k < 0) return errno == EINTR ? 0 : -1;
  for (int i = 0; i < k; i++) viewer_read(f, ev[i].data.ptr, scratch, cap);
  return 0;
}

/* ---- the editor thread ------------------------------------------------------------------------- */

static void *editor_main(void *arg) {
  fanout *f = arg;
  uint64_t period = (uint64_t)(1e9 / f->rate), t0 = client_now_ns();
  proto_buf b;
  proto_buf_init(&b);
  uint8_t sink[4096];
  for (uint32_t seq = 1; seq <= f->edits && !g_stop; seq++) {
    uint64_t at = t0 + (uint64_t)(seq - 1) * period;
    struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !g_stop) {
    }
    float value = (float)((double)seq / BENCH_SEQ_SCALE);
    if (proto_encode_edit_weights(&b, seq, 1, &f->target, &value) != 0) break;
    atomic_store_explicit(&f->send_ns[seq], client_now_ns(), memory_order_release);
    if (client_send_buf(&f->editor, &b) != 0) break;
    atomic_store(&f->sent, seq);
    /* The editor is a subscriber too: drain its copy of every frame so it never lags. Refused
     * edits show up as a final version short of start + sent. */
    while (client_read_some(&f->editor, sink, sizeof(sink)) > 0) {
    }
  }
  proto_buf_fini(&b);
  atomic_store(&f->editor_done, 1);
  return NULL;
}

/* The sculpt stream: 64 vertices' offsets, absolute values that change with each edit, until
 * the weights editor is done. */
static void *sculptor_main(void *arg) {
  fanout *f = arg;
  uint64_t period = (uint64_t)(1e9 / f->sculpt_rate), t0 = client_now_ns();
  proto_buf b;
  proto_buf_init(&b);
  uint8_t sink[4096];
  uint32_t idx[64];
  int32_t q[3 * 64];
  for (uint32_t seq = 1; !g_stop && !atomic_load(&f->editor_done); seq++) {
    uint64_t at = t0 + (uint64_t)(seq - 1) * period;
    struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !g_stop) {
    }
    if (atomic_load(&f->editor_done)) break;
    for (int k = 0; k < 64; k++) {
      idx[k] = 20000 + (uint32_t)k;
      q[3 * k] = (int32_t)(seq % 200) * 10;
      q[3 * k + 1] = k;
      q[3 * k + 2] = -(int32_t)(seq % 50);
    }
    if (proto_encode_edit_offsets(&b, seq, 64, idx, q) != 0 || client_send_buf(&f->sculptor, &b) != 0) break;
    atomic_store(&f->sculpt_sent, seq);
    while (client_read_some(&f->sculptor, sink, sizeof(sink)) > 0) {
    }
  }
  proto_buf_fini(&b);
  atomic_store(&f->sculptor_done, 1);
  return NULL;
}

/* ---- one fanout run ----------------------------------------------------------------------------- */

typedef struct fanout_result {
  uint32_t viewers, edits_sent, at_final, viewers_dropped, viewers_caught_up, order_errors;
  double rate, seconds, elapsed_s, join_s;
  uint64_t expected, delivered, catchup_frames, coalesced, lost, final_version;
  double fps, min_ms, p50_ms, p99_ms, max_ms, bytes_per_frame, server_cpu_pct, bench_cpu_pct, host_cpu_pct;
  double srv_coalesced, srv_dropped, srv_catchups;
  int relays;
  double relay_cpu_pct, relay_cpu_max_pct, redis_cpu_pct, cpu_us_per_delivery;
  uint64_t sculpt_sent, sculpt_frames;
  int goal_nothing_lost; /* every viewer at the final version and no client dropped */
  char first_error[160];
} fanout_result;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_ms(const uint64_t *s, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)ceil(p * (double)n);
  return (double)s[i ? i - 1 : 0] / 1e6;
}

/* Connects the editor and waits for its snapshot; learns the session version. */
static int editor_join(fanout *f, client_conn *ed, int port, char *err, size_t errlen) {
  if (connect_to(f, ed, port, err, errlen) != 0) return -1;
  /* A server that stops reading must not hang the editor thread forever. */
  struct timeval tv = {10, 0};
  setsockopt(ed->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (client_hello(ed, "demo", PROTO_ROLE_EDITOR, NULL) != 0) {
    snprintf(err, errlen, "editor: cannot send HELLO");
    return -1;
  }
  for (;;) {
    proto_header h;
    const uint8_t *p;
    int rc = client_read_frame(ed, 30000, &h, &p, err, errlen);
    if (rc) {
      if (rc == CLIENT_ETIMEDOUT) snprintf(err, errlen, "editor: no SNAPSHOT within 30 s");
      return -1;
    }
    if (h.type == PROTO_ERROR || h.type == PROTO_BYE) {
      snprintf(err, errlen, "editor refused by the server");
      return -1;
    }
    if (h.type == PROTO_SNAPSHOT) {
      f->start_version = h.session_version;
      ed->len = ed->off = 0; /* drop the 2.5 MB from the buffer */
      return 0;
    }
  }
}

/* Finds jaw_open (target 0 in the demo head) and checks it spans [0, 1]. */
static int find_target(client_conn *rpc, uint32_t *out, char *err, size_t errlen) {
  cJSON *list = rpc_call(rpc, "targets.list", 1, NULL);
  const cJSON *t;
  int rc = -1;
  snprintf(err, errlen, "session demo has no target jaw_open with range [0, 1]");
  cJSON_ArrayForEach(t, list) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    if (cJSON_IsString(name) && strcmp(name->valuestring, "jaw_open") == 0 &&
        json_num(t, "min") <= 0 && json_num(t, "max") >= 1) {
      *out = (uint32_t)json_num(t, "index");
      rc = 0;
    }
  }
  cJSON_Delete(list);
  return rc;
}

/* Waits until the demo session answers state.get (it opens on the server's thread pool after
 * the ports are printed; 30 s at most), then finds its jaw_open target. */
static int wait_for_demo(fanout *f, client_conn *rpc, char *err, size_t errlen) {
  uint64_t deadline = client_now_ns() + 30000000000ull;
  for (int is_err = 1; is_err && !g_stop;) {
    cJSON *state = rpc_call(rpc, "state.get", 1, &is_err);
    if (!state && !is_err) {
      snprintf(err, errlen, "no JSON-RPC answer from deformd");
      return -1;
    }
    cJSON_Delete(state);
    if (is_err && client_now_ns() > deadline) {
      snprintf(err, errlen, "session demo did not open within 30 s");
      return -1;
    }
    if (is_err) usleep(50000);
  }
  if (g_stop || find_target(rpc, &f->target, err, errlen) != 0) return -1;
  return 0;
}

/* Joins every viewer (round robin over the relays when there are any) and waits for every
 * snapshot before the clock starts: 60 s plus 0.2 s per viewer at most. Sets res->join_s. */
static int join_viewers(fanout *f, const bench_opts *o, const bench_cluster *cluster, int ep, uint8_t *scratch,
                        fanout_result *res, char *err, size_t errlen) {
  uint32_t n = f->n;
  uint64_t t_join = client_now_ns();
  for (uint32_t i = 0; i < n && !g_stop; i++) {
    viewer *v = &f->v[i];
    client_conn c;
    int port = o->relays ? cluster->relays[i % (uint32_t)o->relays].stream_port : cluster->primary.stream_port;
    if (connect_to(f, &c, port, err, errlen) != 0) return -1;
    v->fd = c.fd; /* in clear, no read happened yet, so the client_conn owns nothing else */
    if (c.tls) v->conn = c; /* under TLS it owns the SSL state */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = v};
    if (client_hello(&c, "demo", PROTO_ROLE_VIEWER, NULL) != 0 ||
        fcntl(v->fd, F_SETFL, fcntl(v->fd, F_GETFL) | O_NONBLOCK) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, v->fd, &ev) != 0) {
      snprintf(err, errlen, "viewer %u: cannot join: %s", i, strerror(errno));
      return -1;
    }
    if (i % 16 == 15 && pump(f, ep, scratch, 1u << 18, 0) != 0) return -1;
  }
  uint64_t deadline = client_now_ns() + 60000000000ull + (uint64_t)n * 200000000ull;
  while (!g_stop && f->joined + f->dead < n && client_now_ns() < deadline)
    if (pump(f, ep, scratch, 1u << 18, 100) != 0) break;
  res->join_s = (double)(client_now_ns() - t_join) / 1e9;
  if (f->joined < n) {
    const viewer *bad = NULL;
    for (uint32_t i = 0; i < n && !bad; i++)
      if (f->v[i].dead) bad = &f->v[i];
    snprintf(err, errlen, "only %u of %u viewers got their snapshot in %.1f s%s%s", f->joined, n,
             res->join_s, bad ? ": " : "", bad ? bad->why : "");
    return -1;
  }
  return 0;
}

/* CPU seconds used so far by each process a run measures (-1 where unreadable). */
typedef struct cpu_marks {
  double server, self, host, redis;
  double relays[BENCH_MAX_RELAYS];
} cpu_marks;

static void cpu_mark(const bench_cluster *cluster, cpu_marks *m) {
  m->server = bench_proc_cpu_s(cluster->primary.pid);
  m->self = self_cpu_s();
  m->host = host_busy_s();
  m->redis = cluster->redis_pid ? bench_proc_cpu_s(cluster->redis_pid) : 0;
  for (int i = 0; i < cluster->relay_count; i++) m->relays[i] = bench_proc_cpu_s(cluster->relays[i].pid);
}

/* Pumps the viewers until, once the editor (and the sculptor) stopped, every live viewer is at
 * the final version, or nothing arrived for 1 s (an overloaded server may still be draining a
 * backlog long after the editor stopped; 60 s at most). */
static void pump_until_settled(fanout *f, int ep, uint8_t *scratch, int sculpting) {
  uint64_t done_at = 0;
  while (!g_stop) {
    if (pump(f, ep, scratch, 1u << 18, 5) != 0) break;
    if (!atomic_load(&f->editor_done) || (sculpting && !atomic_load(&f->sculptor_done))) continue;
    uint64_t now = client_now_ns(), final = f->start_version + atomic_load(&f->sent) + atomic_load(&f->sculpt_sent);
    if (!done_at) done_at = now;
    uint32_t behind = 0;
    for (uint32_t i = 0; i < f->n; i++) behind += !f->v[i].dead && f->v[i].last_version < final;
    if (behind == 0 || now > done_at + 60000000000ull ||
        (now > done_at + 1000000000ull && now > f->last_rx_ns + 1000000000ull))
      break;
  }
}

/* Fills the measured part of `res` from what the viewers counted, the server's stats and state
 * before (stats0) and after the run, and the CPU marks at both ends of `elapsed_s` (the
 * relays' first `relay_count`). */
static void fanout_summarise(const bench_opts *o, fanout *f, int relay_count, const cpu_marks *m0,
                             const cpu_marks *m1, const cJSON *stats0, const cJSON *stats1, const cJSON *state, double elapsed_s,
                             fanout_result *res) {
  uint32_t n = f->n;
  double relay_s = 0;
  for (int i = 0; i < relay_count; i++) {
    double d = m1->relays[i] - m0->relays[i];
    relay_s += d;
    if (d > res->relay_cpu_max_pct) res->relay_cpu_max_pct = d; /* seconds, made % below */
  }
  res->elapsed_s = elapsed_s;
  res->edits_sent = atomic_load(&f->sent);
  res->final_version = (uint64_t)json_num(state, "version");
  res->expected = (uint64_t)n * res->edits_sent;
  for (uint32_t i = 0; i < n; i++) {
    const viewer *v = &f->v[i];
    res->delivered += v->delivered;
    res->catchup_frames += v->catchups;
    res->viewers_caught_up += v->catchups > 0;
    res->order_errors += v->order_errors;
    res->viewers_dropped += v->dead;
    res->at_final += !v->dead && v->last_version == res->final_version;
    /* Seqs up to the newest one seen were superseded; later ones never arrived. */
    uint32_t top = v->max_seq < res->edits_sent ? v->max_seq : res->edits_sent;
    res->coalesced += top > v->delivered ? top - v->delivered : 0;
    res->lost += res->edits_sent - top;
    if (v->dead && !res->first_error[0]) snprintf(res->first_error, sizeof(res->first_error), "%s", v->why);
  }
  res->fps = (double)(res->delivered + res->catchup_frames) / res->elapsed_s;
  qsort(f->lat, f->nlat, sizeof(uint64_t), cmp_u64);
  res->min_ms = f->nlat ? (double)f->lat[0] / 1e6 : 0;
  res->p50_ms = pct_ms(f->lat, f->nlat, 0.50);
  res->p99_ms = pct_ms(f->lat, f->nlat, 0.99);
  res->max_ms = f->nlat ? (double)f->lat[f->nlat - 1] / 1e6 : 0;
  res->bytes_per_frame = f->weights_frames ? (double)f->weights_bytes / (double)f->weights_frames : 0;
  res->server_cpu_pct = m0->server >= 0 && m1->server >= 0 ? 100.0 * (m1->server - m0->server) / res->elapsed_s : -1;
  res->bench_cpu_pct = 100.0 * (m1->self - m0->self) / res->elapsed_s;
  res->host_cpu_pct = m0->host >= 0 && m1->host >= 0 ? 100.0 * (m1->host - m0->host) / res->elapsed_s : -1;
  res->srv_coalesced = json_num(stats1, "frames_coalesced") - json_num(stats0, "frames_coalesced");
  res->srv_dropped = json_num(stats1, "clients_dropped") - json_num(stats0, "clients_dropped");
  res->srv_catchups = json_num(stats1, "catchups_sent") - json_num(stats0, "catchups_sent");
  for (uint32_t i = 0; i < n; i++) res->sculpt_frames += f->v[i].deltas;
  res->sculpt_sent = atomic_load(&f->sculpt_sent);
  res->relay_cpu_pct = 100.0 * relay_s / res->elapsed_s;
  res->relay_cpu_max_pct = 100.0 * res->relay_cpu_max_pct / res->elapsed_s;
  res->redis_cpu_pct = 100.0 * (m1->redis - m0->redis) / res->elapsed_s;
  /* What fanning one frame out to one viewer costs: the relays' CPU with relays, else the server's. */
  double fan_s = o->relays ? relay_s : m1->server - m0->server;
  uint64_t frames = res->delivered + res->catchup_frames + res->sculpt_frames;
  res->cpu_us_per_delivery = frames ? 1e6 * fan_s / (double)frames : 0;
  res->goal_nothing_lost = res->at_final == n && res->viewers_dropped == 0 && res->srv_dropped == 0;
  if (f->oom) snprintf(res->first_error, sizeof(res->first_error), "latency samples incomplete: out of memory");
}

static int run_fanout(const bench_opts *o, uint32_t n, fanout_result *res, char *err, size_t errlen) {
  memset(res, 0, sizeof(*res));
  res->viewers = n;
  res->rate = o->rate;
  res->seconds = o->seconds;
  int rc = -1, ep = -1, editor_started = 0, sculptor_started = 0;
  pthread_t editor_thread, sculptor_thread;
  uint8_t *scratch = NULL;
  cJSON *stats0 = NULL, *stats1 = NULL, *state = NULL;
  client_conn rpc = {.fd = -1};
  fanout f;
  memset(&f, 0, sizeof(f));
  f.editor.fd = -1;
  f.sculptor.fd = -1;
  f.sculpt_rate = o->sculpt;
  f.n = n;
  f.rate = o->rate;
  f.edits = (uint32_t)llround(o->rate * o->seconds);
  char cert[96], key[96];
  snprintf(cert, sizeof(cert), "%s/cert.pem", o->tls_dir);
  snprintf(key, sizeof(key), "%s/key.pem", o->tls_dir);
  const char *const fanout_args[] = {"--demo", "--data", "none", o->tls ? "--tls-cert" : NULL, cert, "--tls-key", key,
                                     NULL};
  f.tls_ca = o->tls ? cert : NULL;
  bench_cluster cluster;
  memset(&cluster, 0, sizeof(cluster));
  bench_child *child = &cluster.primary;
  res->relays = o->relays;
  fprintf(stderr, "deform-bench: fanout %u viewers: starting %s%s\n", n, o->deformd,
          o->relays ? " with redis-server and relays" : "");
  if (o->relays ? bench_cluster_start(o->deformd, o->redis_server, o->relays, &cluster, err, errlen)
                : bench_child_start(o->deformd, fanout_args, child, err, errlen)) {
    if (g_stop) snprintf(err, errlen, "interrupted");
    return -1;
  }

  if (connect_to(&f, &rpc, child->rpc_port, err, errlen) != 0 || wait_for_demo(&f, &rpc, err, errlen) != 0) goto out;
  f.send_ns = calloc((size_t)f.edits + 1, sizeof(*f.send_ns));
  f.v = calloc(n, sizeof(*f.v));
  scratch = malloc(1u << 18);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (!f.send_ns || !f.v || !scratch || ep < 0) {
    snprintf(err, errlen, "out of memory or epoll_create1 failed");
    goto out;
  }
  for (uint32_t i = 0; i < n; i++) f.v[i].fd = -1;
  if (editor_join(&f, &f.editor, child->stream_port, err, errlen) != 0) goto out;
  if (f.sculpt_rate > 0 && editor_join(&f, &f.sculptor, child->stream_port, err, errlen) != 0) goto out;
  if (join_viewers(&f, o, &cluster, ep, scratch, res, err, errlen) != 0) goto out;
  fprintf(stderr, "deform-bench: %u viewers joined in %.2f s; editing at %g Hz for %g s\n", n,
          res->join_s, o->rate, o->seconds);

  /* The measured interval: first edit until every viewer is at the final version, or until
   * the viewers settle (pump_until_settled). */
  stats0 = rpc_call(&rpc, "server.stats", 0, NULL);
  cpu_marks m0, m1;
  cpu_mark(&cluster, &m0);
  uint64_t t0 = client_now_ns();
  if (pthread_create(&editor_thread, NULL, editor_main, &f) != 0) {
    snprintf(err, errlen, "cannot start the editor thread");
    goto out;
  }
  editor_started = 1;
  if (f.sculpt_rate > 0) {
    if (pthread_create(&sculptor_thread, NULL, sculptor_main, &f) != 0) {
      snprintf(err, errlen, "cannot start the sculpt thread");
      goto out;
    }
    sculptor_started = 1;
  }
  pump_until_settled(&f, ep, scratch, sculptor_started);
  uint64_t t1 = client_now_ns();
  cpu_mark(&cluster, &m1);
  pthread_join(editor_thread, NULL);
  editor_started = 0;
  if (sculptor_started) pthread_join(sculptor_thread, NULL);
  sculptor_started = 0;
  stats1 = rpc_call(&rpc, "server.stats", 0, NULL);
  state = rpc_call(&rpc, "state.get", 1, NULL);
  if (!stats0 || !stats1 || !state) {
    snprintf(err, errlen, "no server.stats / state.get answer after the run%s",
             bench_child_gone(child) ? ": deformd is gone" : "");
    goto out;
  }
  fanout_summarise(o, &f, cluster.relay_count, &m0, &m1, stats0, stats1, state, (double)(t1 - t0) / 1e9, res);
  rc = g_stop ? -1 : 0;
out:
  if (editor_started || sculptor_started) g_stop = 1;
  if (editor_started) pthread_join(editor_thread, NULL);
  if (sculptor_started) pthread_join(sculptor_thread, NULL);
  if (f.sculptor.fd >= 0) client_close(&f.sculptor);
  for (uint32_t i = 0; f.v && i < n; i++) {
    if (f.v[i].conn.tls) client_close(&f.v[i].conn);
    else if (f.v[i].fd >= 0) close(f.v[i].fd);
    free(f.v[i].payload);
  }
  free(f.v);
  free((void *)f.send_ns);
  free(f.lat);
  free(scratch);
  if (ep >= 0) close(ep);
  cJSON_Delete(stats0);
  cJSON_Delete(stats1);
  cJSON_Delete(state);
  if (f.editor.fd >= 0) client_close(&f.editor);
  if (rpc.fd >= 0) client_close(&rpc);
  bench_cluster_stop(&cluster);
  if (rc && g_stop) snprintf(err, errlen, "interrupted");
  return rc;
}

/* ---- output ------------------------------------------------------------------------------------ */

static void print_table_head(const bench_opts *o) {
  printf("# %s\n", o->cmdline);
  printf("%7s %5s %8s %9s %9s %7s %7s %7s %7s %7s %7s %8s %9s %9s %6s %5s %7s %7s %6s %9s %9s %8s %s\n",
         "viewers", "edits", "expected", "delivered", "frames/s", "p50 ms", "p99 ms", "max ms", "B/frame", "srv CPU",
         "cli CPU", "host CPU", "coalesced", "caught-up", "lost", "drop", "final", "no-loss", "relays", "relay CPU",
         "redis CPU", "us/deliv", "sculpt frames");
}

static void print_result(const bench_opts *o, const fanout_result *r) {
  if (!o->json) {
    char final[32];
    snprintf(final, sizeof(final), "%u/%u", r->at_final, r->viewers);
    printf("%7u %5u %8llu %9llu %9.0f %7.3f %7.3f %7.3f %7.1f %6.1f%% %6.1f%% %7.1f%% %9llu %9u %6llu %5.0f %7s %7s "
           "%6d %8.1f%% %8.1f%% %8.2f %llu/%llu\n",
           r->viewers, r->edits_sent, (unsigned long long)r->expected,
           (unsigned long long)r->delivered, r->fps, r->p50_ms, r->p99_ms, r->max_ms,
           r->bytes_per_frame, r->server_cpu_pct, r->bench_cpu_pct, r->host_cpu_pct,
           (unsigned long long)r->coalesced,
           r->viewers_caught_up, (unsigned long long)r->lost, r->srv_dropped, final,
           r->goal_nothing_lost ? "yes" : "NO", r->relays, r->relay_cpu_pct, r->redis_cpu_pct, r->cpu_us_per_delivery,
           (unsigned long long)r->sculpt_frames, (unsigned long long)r->sculpt_sent * r->viewers);
    if (r->first_error[0]) printf("#   first viewer error: %s\n", r->first_error);
    fflush(stdout);
    return;
  }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "bench", "fanout");
  cJSON_AddStringToObject(j, "command", o->cmdline);
  const struct {
    const char *key;
    double value;
  } num[] = {{"viewers", r->viewers}, {"rate_hz", r->rate}, {"seconds", r->seconds},
             {"join_s", r->join_s}, {"elapsed_s", r->elapsed_s}, {"edits", r->edits_sent},
             {"expected", (double)r->expected}, {"delivered", (double)r->delivered},
             {"catchup_frames", (double)r->catchup_frames}, {"frames_per_s", r->fps},
             {"min_ms", r->min_ms}, {"p50_ms", r->p50_ms}, {"p99_ms", r->p99_ms},
             {"max_ms", r->max_ms}, {"bytes_per_frame", r->bytes_per_frame},
             {"server_cpu_pct", r->server_cpu_pct}, {"bench_cpu_pct", r->bench_cpu_pct},
             {"host_cpu_pct", r->host_cpu_pct},
             {"coalesced", (double)r->coalesced}, {"lost", (double)r->lost},
             {"viewers_caught_up", r->viewers_caught_up}, {"viewers_dropped", r->viewers_dropped},
             {"order_errors", r->order_errors}, {"final_version", (double)r->final_version},
             {"viewers_at_final", r->at_final}, {"frames_coalesced", r->srv_coalesced},
             {"clients_dropped", r->srv_dropped}, {"catchups_sent", r->srv_catchups},
             {"relays", r->relays}, {"relay_cpu_pct", r->relay_cpu_pct}, {"relay_cpu_max_pct", r->relay_cpu_max_pct},
             {"redis_cpu_pct", r->redis_cpu_pct}, {"cpu_us_per_delivery", r->cpu_us_per_delivery},
             {"sculpt_edits", (double)r->sculpt_sent}, {"sculpt_frames", (double)r->sculpt_frames}};
  for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++)
    cJSON_AddNumberToObject(j, num[i].key, num[i].value);
  cJSON_AddBoolToObject(j, "nothing_lost", r->goal_nothing_lost);
  if (r->first_error[0]) cJSON_AddStringToObject(j, "first_error", r->first_error);
  char *text = cJSON_PrintUnformatted(j);
  if (text) printf("%s\n", text);
  fflush(stdout);
  free(text);
  cJSON_Delete(j);
}

/* ---- command line ------------------------------------------------------------------------------- */

static void usage(FILE *out) {
  fprintf(out,
          "usage: deform-bench fanout --viewers N[,N...] --rate HZ --seconds S [--relays R] [--sculpt HZ] [--tls]\n"
          "                           [--json] [--deformd PATH] [--redis-server PATH]\n"
          "       deform-bench solve MESH --mode arap --roi N --iters K --drags D [--handle H] [--border smooth|sharp]\n"
          "                          [--multires [--proxy N] [--no-exact]] [--subdivide L] [--json]\n"
          "       deform-bench brush MESH --brush KIND --touch N --samples S [--strength W] [--guard] [--per-call K]\n"
          "                    [--falloff F] [--mirror] [--json]\n"
          "       deform-bench durable [--editors N] [--rate HZ] [--seconds S] [--ops N] [--modes none,normal,full]\n"
          "       deform-bench blend [--targets T] [--pins P] [--drags D] [--frames F] [--vertices V]\n"
          "                          [--max-error E] [--clips FILE...] [--json]\n"
          "       deform-bench stream [--json] [--dragon PLY] [--no-dragon] [--drags N] [--strokes N]\n"
          "                           [--seconds S] [--deformd PATH]\n"
          "       deform-bench undo [--later 1,10,100] [--repeat R] [--data none] [--json] [--deformd PATH]\n"
          "       deform-bench presence [--editors 50] [--viewers 500] [--rate 60] [--seconds 10] [--json]\n"
          "       deform-bench face [--viewers N] [--hz H] [--seconds S] [--kind vmc|livelink] [--threads]\n"
          "                    [--reader batch|normal] [--json]\n"
          "                         [--deformd PATH]\n"
          "       deform-bench texclip [--size N] [--frames F] [--max-error E[,E...]] [--json]\n"
          "\n"
          "  MESH     a mesh file, icosphere:LEVEL or grid:N\n"
          "  solve    prefactor and per-drag time of a Laplacian/ARAP/biharmonic gesture (in process)\n"
          "  brush    time per brush sample touching about N vertices (in process)\n"
          "  blend    direct-manipulation weight solve per drag, PCA build time, and bytes per streamed\n"
          "           frame of PCA-compressed MD2/MD3 clips against raw positions (in process)\n"
          "  durable  editors' answer latency with --data none / --durability normal / full, log bytes per\n"
          "           operation and per changed vertex, restart time of a session with N operations\n"
          "  (the viewer's frame-time benchmark is deform-view-bench, built with the viewer)\n"
          "  stream   bytes on the wire per protocol version and codec: joins of the demo head and the\n"
          "           dragon scan, and traces (ARAP drag, brush strokes, PCA playback of faerie.md2, a\n"
          "           52-target weight animation at 60 Hz) against raw positions and sparse float32\n"
          "  face     a face tracker's UDP datagrams (VMC or Live Link Face) at H Hz to deformd --demo:\n"
          "           latency from each datagram to the WEIGHTS frame on the wire (kernel receive\n"
          "           timestamp) and read by each of N viewers, and the server's own part\n"
          "  fanout   one editor sends HZ weight edits/s for S s to a fresh deformd --demo;\n"
          "           N viewers on loopback measure delivery, latency and what was coalesced;\n"
          "           --relays R: the viewers join R relays of the primary through a redis-server of\n"
          "           its own (CPU per process and per delivered frame); --sculpt HZ: a second editor\n"
          "           sends a 64-vertex sculpt edit that often; --tls: deformd on TLS (a throw-away\n"
          "           certificate), every client verifying it (one node)\n"
          "  undo     history.undo of an inflate under N later overlapping strokes of another author: time\n"
          "           (send to committed answer) and crease / offset jump before and after\n"
          "  presence E editors move cursors and cameras at HZ to V viewers of a fresh deformd --demo:\n"
          "           delivery latency p50/p99/max, records delivered, server CPU, frames skipped\n"
          "  texclip  animated texture PCA of the demo head's blush/furrow clip against raw RGB, PNG and JPEG\n"
          "           frames: bytes per frame and error (in process)\n"
          "  --json   one JSON object per result instead of a table\n"
          "  --deformd PATH   server binary (default: deformd next to deform-bench)\n");
}

/* The command line, shell-quoted where needed, so a result can be reproduced. */
static char *join_argv(int argc, char **argv) {
  size_t cap = 1;
  for (int i = 0; i < argc; i++) cap += 4 * strlen(argv[i]) + 3;
  char *s = malloc(cap), *p = s;
  if (!s) return NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    int quote = a[0] == '\0' || strpbrk(a, " \t\n'\"\\$`*?;&|<>()[]{}~#!") != NULL;
    if (i) *p++ = ' ';
    if (quote) *p++ = '\'';
    for (; *a; a++) {
      if (*a == '\'' && quote) {
        memcpy(p, "'\\''", 4);
        p += 4;
      } else {
        *p++ = *a;
      }
    }
    if (quote) *p++ = '\'';
  }
  *p = '\0';
  return s;
}

static int parse_opts(int argc, char **argv, bench_opts *o) {
  memset(o, 0, sizeof(*o));
  if (argc < 2 || strcmp(argv[1], "fanout") != 0) return -1;
  bench_default_deformd(o->deformd, sizeof(o->deformd));
  snprintf(o->redis_server, sizeof(o->redis_server), "redis-server");
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--viewers") == 0 && val) {
      for (const char *p = argv[++i]; *p; p = *end == ',' ? end + 1 : end) {
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 100000 || o->runs == BENCH_MAX_RUNS || (*end && *end != ',')) {
          fprintf(stderr, "deform-bench: --viewers takes up to %d counts 1..100000, e.g. 1,10,100\n",
                  BENCH_MAX_RUNS);
          return -2;
        }
        o->viewers[o->runs++] = (uint32_t)v;
      }
    } else if (strcmp(a, "--rate") == 0 && val) {
      o->rate = strtod(argv[++i], &end);
      if (*end || !(o->rate > 0 && o->rate <= 100000)) return -2;
    } else if (strcmp(a, "--seconds") == 0 && val) {
      o->seconds = strtod(argv[++i], &end);
      if (*end || !(o->seconds > 0 && o->seconds <= 3600)) return -2;
    } else if (strcmp(a, "--deformd") == 0 && val) {
      snprintf(o->deformd, sizeof(o->deformd), "%s", argv[++i]);
    } else if (strcmp(a, "--redis-server") == 0 && val) {
      snprintf(o->redis_server, sizeof(o->redis_server), "%s", argv[++i]);
    } else if (strcmp(a, "--relays") == 0 && val) {
      o->relays = (int)strtol(argv[++i], &end, 10);
      if (*end || o->relays < 0 || o->relays > BENCH_MAX_RELAYS) {
        fprintf(stderr, "deform-bench: --relays takes 0 to %d\n", BENCH_MAX_RELAYS);
        return -2;
      }
    } else if (strcmp(a, "--tls") == 0) {
      o->tls = 1;
    } else if (strcmp(a, "--sculpt") == 0 && val) {
      o->sculpt = strtod(argv[++i], &end);
      if (*end || !(o->sculpt >= 0 && o->sculpt <= 1000)) return -2;
    } else {
      fprintf(stderr, "deform-bench: unknown or incomplete option '%s'\n", a);
      return -2;
    }
  }
  if (o->runs == 0 || o->rate <= 0 || o->seconds <= 0 || !o->deformd[0]) return -2;
  if (o->tls && o->relays) {
    fprintf(stderr, "deform-bench: --tls measures one node: leave out --relays\n");
    return -2;
  }
  double edits = round(o->rate * o->seconds);
  if (edits < 1 || edits >= 1048576.0) {
    fprintf(stderr, "deform-bench: --rate × --seconds must give 1 to 1048575 edits\n");
    return -2;
  }
  o->cmdline = join_argv(argc, argv);
  return o->cmdline ? 0 : -2;
}

int main(int argc, char **argv) {
  dfm_blas_kernels(argv); /* as deformd does */
  dfm_init(); /* as deformd does: the in-process benches time the same heap and BLAS */
  if (argc >= 2 && argv[1][0] != '-') bench_machine(stderr);
  if (argc >= 2 && (strcmp(argv[1], "solve") == 0 || strcmp(argv[1], "brush") == 0 || strcmp(argv[1], "blend") == 0 ||
                    strcmp(argv[1], "durable") == 0 || strcmp(argv[1], "stream") == 0 || strcmp(argv[1], "undo") == 0 ||
                    strcmp(argv[1], "presence") == 0 || strcmp(argv[1], "face") == 0 || strcmp(argv[1], "texclip") == 0)) {
    char *cmdline = join_argv(argc, argv);
    const char *c = cmdline ? cmdline : "";
    if (strcmp(argv[1], "stream") == 0 || strcmp(argv[1], "durable") == 0 || strcmp(argv[1], "undo") == 0 ||
        strcmp(argv[1], "presence") == 0 || strcmp(argv[1], "face") == 0) { /* they start deformd, which must not outlive ^C */
      struct sigaction sa;
      memset(&sa, 0, sizeof(sa));
      sa.sa_handler = on_signal;
      sigaction(SIGINT, &sa, NULL);
      sigaction(SIGTERM, &sa, NULL);
      signal(SIGPIPE, SIG_IGN);
    }
    int status = strcmp(argv[1], "solve") == 0   ? bench_solve_main(argc, argv, c)
                 : strcmp(argv[1], "brush") == 0 ? bench_brush_main(argc, argv, c)
                 : strcmp(argv[1], "blend") == 0 ? bench_blend_main(argc, argv, c)
                 : strcmp(argv[1], "stream") == 0 ? bench_stream_main(argc, argv, c)
                 : strcmp(argv[1], "undo") == 0   ? bench_undo_main(argc, argv, c)
                 : strcmp(argv[1], "presence") == 0 ? bench_presence_main(argc, argv, c)
                 : strcmp(argv[1], "face") == 0 ? bench_face_main(argc, argv, c)
                 : strcmp(argv[1], "texclip") == 0 ? bench_texclip_main(argc, argv, c)
                                                 : bench_durable_main(argc, argv, c);
    free(cmdline);
    return status;
  }
  bench_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc) {
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
      usage(stdout);
      return 0;
    }
    usage(stderr);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal; /* no SA_RESTART: blocking calls return EINTR and see g_stop */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* Room for the largest run's sockets. */
  uint32_t most = 0;
  for (int i = 0; i < o.runs; i++) most = o.viewers[i] > most ? o.viewers[i] : most;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < most + 64) {
    rl.rlim_cur = rl.rlim_max < most + 64 ? rl.rlim_max : most + 64;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (o.tls && bench_make_certificate(o.tls_dir, sizeof(o.tls_dir)) != 0) {
    free(o.cmdline);
    return 1;
  }
  if (!o.json) print_table_head(&o);
  rc = 0;
  for (int i = 0; i < o.runs && !g_stop; i++) {
    fanout_result r;
    char err[512];
    if (run_fanout(&o, o.viewers[i], &r, err, sizeof(err)) != 0) {
      fprintf(stderr, "deform-bench: fanout with %u viewers failed: %s\n", o.viewers[i], err);
      rc = 1;
      break;
    }
    print_result(&o, &r);
  }
  if (o.tls_dir[0]) bench_remove_certificate(o.tls_dir);
  free(o.cmdline);
  return rc;
}
