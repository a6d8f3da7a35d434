/*
 * srv.h — deformd's internal interfaces, one section per file, in the order the files depend
 * on each other: a section's functions call only into the sections above it (callbacks set by
 * a higher layer, such as a connection's srv_conn_ops or a reply's srv_reply_ops, are how a
 * lower one hands work back up). tests/layout checks that no two files call each other in a
 * circle.
 *
 *   errors, log, config, frames, JSON        srv_error.c srv_log.c srv_config.c srv_frame.c srv_json.c
 *                                            srv_json_text.c
 *   the import worker                        srv_import.c
 *   connections (writes, fan-out policy)     srv_conn.c
 *   clips of a session                       srv_anim.c
 *   sessions, operations, state copies       srv_session.c srv_session_op.c srv_state.c
 *   gestures, brushes, blend solves, player  srv_gesture.c srv_brush.c srv_blend.c srv_anim_play.c
 *                                            srv_anim_compress.c
 *   jobs (import, export)                    srv_jobs.c
 *   JSON-RPC messages and params             srv_rpc.c
 *   JSON-RPC methods                         srv_methods.c srv_edit_rpc.c srv_blend_rpc.c srv_anim_rpc.c
 *   transports                               srv_stream.c (binary port) srv_rpc_conn.c (JSON-RPC port)
 *   the server (listeners, tick, signals)    srv_server.c
 *
 * Threading: everything here belongs to the loop thread except the *_work functions that run
 * on the libuv thread pool, which touch only the job struct they are given. A handle (server,
 * session, connection) is freed only from its close path on the loop thread; a request (a
 * write, a job) owns what it carries until its callback runs.
 *
 * Errors: the service's own vocabulary is SRV_E* (negative, like libuv's UV_E*); only the
 * transports turn them into JSON-RPC codes (srv_rpc.c) or PROTO_ERR_* codes (srv_stream.c).
 *
 * Every state change goes through srv_session_apply() with an srv_op record: that is the only
 * mutator of session state.
 */
#ifndef DEFORMD_SRV_H
#define DEFORMD_SRV_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dfm.h"
#include "dfm_brush.h"
#include "mesh.h"
#include "proto.h"

/* ---- errors (srv_error.c) -------------------------------------------------------------------- */

/* What a request can fail with. The transports map each to a JSON-RPC code (docs/json-api.md
 * lists them) and to a PROTO_ERR_* code for binary connections. */
typedef enum srv_error {
  SRV_EPARAMS = -3001,    /* a parameter is missing, of the wrong type or malformed */
  SRV_ENOSESSION = -3002, /* no session by that name (or it closed meanwhile) */
  SRV_ENOTARGET = -3003,  /* no target by that name */
  SRV_ENOTFINITE = -3004, /* a number is NaN or infinite (or overflows float32) */
  SRV_EMESH = -3005,      /* a mesh file was refused */
  SRV_EEXIST = -3006,     /* a session by that name exists */
  SRV_ERANGE = -3007,     /* a value or index outside what the session allows */
  SRV_ELIMIT = -3008,     /* a server limit (sessions, gestures, pins, memory) */
  SRV_EIO = -3009,        /* writing a file failed */
  SRV_EACCES = -3010,     /* not authenticated, or not allowed */
  SRV_ENOGESTURE = -3011, /* no gesture by that id */
  SRV_ESOLVER = -3012,    /* a solver failed (the reason says why) */
  SRV_EBUSY = -3013,      /* the session is busy with something that must end first */
  SRV_ENOCLIP = -3014,    /* no clip by that name */
  SRV_ENOMETHOD = -3015,  /* no such JSON-RPC method */
  SRV_ESHUTDOWN = -3016,  /* the server is stopping */
  SRV_EINTERNAL = -3017   /* out of memory, or a job that could not start */
} srv_error;

/* A short name for an SRV_E* code ("unknown session"), for logs. */
const char *srv_strerror(int code);

/* ---- logging (srv_log.c) --------------------------------------------------------------------- */

typedef enum srv_log_level { SRV_LOG_ERROR, SRV_LOG_WARN, SRV_LOG_INFO, SRV_LOG_DEBUG } srv_log_level;

void srv_log_set_level(srv_log_level level);
int srv_log_parse_level(const char *name, srv_log_level *out);
void srv_log(srv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- configuration (srv_config.c) ------------------------------------------------------------ */

typedef struct srv_session_spec {
  char *name;
  char *mesh; /* a path, or "demo" */
} srv_session_spec;

typedef struct srv_config {
  char listen[64];           /* numeric address or "localhost" */
  int stream_port, rpc_port; /* 0 = any free port */
  srv_log_level log_level;
  uint32_t max_frame;        /* incoming binary frames */
  size_t max_request;        /* one JSON-RPC request line */
  int max_json_depth;
  size_t soft_limit;         /* per-connection queued bytes before coalescing */
  size_t hard_limit;         /* per-connection queued bytes before dropping */
  uint32_t slow_timeout_ms;  /* lagging longer than this: dropped */
  uint32_t hello_timeout_ms; /* stream connections must say HELLO within this, and JSON-RPC
                              * connections pass `auth` when the server has a token */
  uint32_t idle_timeout_ms;  /* a connection that sends nothing for this long, with nothing in
                              * flight, is closed (0: never) */
  size_t max_unauth_input;   /* bytes a connection may hold of an unfinished message before it
                              * has said HELLO (stream) or passed auth (JSON-RPC with a token),
                              * and stream viewers always */
  size_t max_input_total;    /* bytes of unfinished messages held for all connections together,
                              * beyond the first 64 KiB each */
  uint32_t gesture_idle_ms;  /* gestures not dragged for this long end */
  uint32_t max_connections;
  uint32_t max_vertices;     /* meshes refused above this */
  uint32_t max_sessions;
  uint32_t session_memory_mb; /* gestures' estimated memory per session (srv_gesture.c) */
  uint32_t client_memory_mb;  /* ... per connection that began them */
  uint64_t max_brush_work;    /* a stroke's srv_brush_cost.work; more is refused */
  int64_t reserve_mb;        /* heap kept faulted in for gestures (dfm_memory_reserve): -1 =
                              * dfm_memory_estimate of each session's mesh, at most 1 GiB or a
                              * quarter of the RAM; 0 = none */
  char *token;               /* when set: stream editors present it in HELLO, JSON-RPC
                              * connections call `auth` with it first */
  uint32_t import_memory_mb; /* the import worker's memory (srv_import.c) */
  uint32_t import_seconds;   /* ... and time */
  uint32_t import_workers;   /* ... and how many run at once */
  uint32_t max_file_mb;      /* mesh files larger than this are refused (0: no limit) */
  char *import_worker_path;  /* the program run as the import worker (NULL: none, imports fail) */
  srv_session_spec *sessions;
  uint32_t session_count;
} srv_config;

/* Fills defaults. */
void srv_config_init(srv_config *c);
void srv_config_fini(srv_config *c);
/* Reads a JSON config file over the current values. Returns 0 or SRV_EPARAMS with a reason in
 * err. */
int srv_config_load(srv_config *c, const char *path, char *err, size_t errlen);
/* The same from text already in memory (text[0..len), exact JSON: srv_json_check). Settings read
 * before a mistake is found stay set. */
int srv_config_load_text(srv_config *c, const char *text, size_t len, char *err, size_t errlen);
/* Adds a session to open at start. Copies both strings. Returns 0 or SRV_EINTERNAL. */
int srv_config_add_session(srv_config *c, const char *name, const char *mesh);

/* ---- the import worker (srv_import.c): untrusted files parsed in a child process -------------- */

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
/* Starts (or queues) the import of `path`. Returns 0 (cb is called later) or SRV_ELIMIT,
 * SRV_ESHUTDOWN or SRV_EINTERNAL with a reason in err (cb is never called). */
int srv_import_start(srv_importer *im, const char *path, srv_import_cb cb, void *arg, char *err, size_t errlen);
/* Stopping: queued imports are answered SRV_ESHUTDOWN now, running workers are killed (and
 * answered SRV_ESHUTDOWN once they are gone). */
void srv_import_shutdown(srv_importer *im);
/* `deformd --import-worker [--import-memory-mb N] [--import-seconds N] [--max-vertices N]
 * [--max-file-mb N] -- FILE`: the child's side. Never returns on success (it _exits). */
int srv_import_worker_main(int argc, char **argv);
/* The worker's work without the process (the fuzz target runs it in-process): imports `path`,
 * names made UTF-8, and returns its reply bytes (malloc'ed, *len bytes), or NULL when out of
 * memory. */
uint8_t *srv_import_reply(const char *path, uint32_t max_vertices, uint32_t max_file_mb, uint32_t memory_mb,
                          size_t *len);
/* The parent's reading of a reply: 0 with the mesh blob at b[*blob_at .. + *blob_len), or
 * SRV_EMESH with the reason the worker gave or what is wrong with the reply. */
int srv_import_parse_reply(const uint8_t *b, size_t n, size_t *blob_at, size_t *blob_len, char *why,
                           size_t whylen);

/* ---- frames (srv_frame.c): encoded once, shared by reference --------------------------------- */

typedef struct srv_frame {
  int refs;
  size_t len;
  uint8_t *data; /* malloc'ed; freed with the last reference */
} srv_frame;

/* Takes ownership of the bytes of `b` (which is reset). Returns NULL when out of memory or when
 * b->failed. The new frame has one reference. */
srv_frame *srv_frame_from_buf(proto_buf *b);
srv_frame *srv_frame_ref(srv_frame *f);
void srv_frame_unref(srv_frame *f);

/* ---- the server's state (its functions are in srv_server.c, at the top) --------------------- */

typedef struct srv_conn srv_conn;
typedef struct srv_server srv_server;
typedef struct srv_session srv_session;

typedef struct srv_stats {
  uint64_t frames_sent, bytes_sent, frames_coalesced, clients_dropped, catchups_sent;
  uint64_t connections_accepted, connections_refused, rpc_requests, rpc_errors;
  uint64_t blend_factorisations, blend_solves, blend_fits; /* srv_blend.c */
} srv_stats;

struct srv_server {
  uv_loop_t *loop;
  srv_config cfg;
  uv_tcp_t stream_listener, rpc_listener;
  uv_signal_t sigint, sigterm;
  uv_timer_t tick; /* slow-connection checks */
  srv_session *sessions;
  uint32_t session_count;
  srv_conn *conns;
  uint32_t conn_count;
  uint32_t next_conn_id;
  int pending_jobs;
  int stopping;
  size_t input_bytes;        /* connections' read buffers beyond 64 KiB each (max_input_total) */
  size_t trim_freed;         /* gesture memory freed since the heap was last trimmed (srv_gesture.c) */
  int trim_running;
  uint64_t started_ms;
  srv_stats stats;
  proto_limits limits;
  srv_importer importer;     /* import workers (srv_import.c) */
  uv_timer_t anim_timer;     /* playback and recording (srv_anim_play.c), running only while needed */
  int anim_timer_init, anim_timer_on;
  uint64_t anim_last_ms;
  /* What else a closing session must stop (its gestures, strokes, solves, player): set by
   * srv_server.c, called by srv_session_close. */
  void (*on_session_close)(srv_session *s);
};

/* ---- JSON views (srv_json.c, declared in srv_json.h for deformd --check-mesh) ---------------- */

#include "srv_json.h"

/* ---- JSON text (srv_json_text.c): exact JSON in, valid UTF-8 out ------------------------------- */

enum { SRV_JSON_ESYNTAX = -1, SRV_JSON_EDEPTH = -2 };

/* What srv_json_check() learned about a request line. */
typedef struct srv_json_scan {
  int is_object;        /* the value is an object */
  const char *id;       /* the raw text of its first "id" member's value (into the checked
                         * text), or NULL when it has none */
  size_t id_len;
  int nul_in_method;    /* an escaped NUL in the "method" member's string */
  int nul_in_params;    /* an escaped NUL in any string (name or value) under "params" */
  int nul_anywhere;     /* an escaped NUL in any string at all */
  int depth;            /* deepest nesting ([ and {, the outer object is 1) */
  int too_deep;
} srv_json_scan;

/* Checks that text[0..n) is exactly one JSON value as RFC 8259 defines it, in UTF-8, nested at
 * most max_depth deep, with blank space around it and nothing else. Returns 0, SRV_JSON_ESYNTAX
 * or SRV_JSON_EDEPTH with a reason naming the byte in err. */
int srv_json_check(const char *text, size_t n, int max_depth, srv_json_scan *out, char *err, size_t errlen);

/* Bytes of the UTF-8 character at p (1-4), or 0 when p[0..n) does not start with one. */
size_t srv_utf8_char(const uint8_t *p, size_t n);
int srv_utf8_valid(const char *s, size_t n);
/* A malloc'ed, NUL-terminated copy of s[0..n) in which every byte that is not part of a valid
 * UTF-8 character is U+FFFD; its length in *out_len (may be NULL). NULL when out of memory. */
char *srv_json_utf8_fix(const char *s, size_t n, size_t *out_len);

#define SRV_QUOTE_MAX 64                  /* bytes of a user's string an error message echoes */
#define SRV_QUOTE_BUF (SRV_QUOTE_MAX + 4) /* ... with "…" and the NUL */
/* `s` as an error message may echo it: itself when it is valid UTF-8 of at most 64 bytes, else
 * its first whole characters up to 64 bytes followed by "…" (written into buf). */
const char *srv_json_quote(const char *s, char buf[SRV_QUOTE_BUF]);

/* ---- connections (srv_conn.c) ------------------------------------------------------------------ */

typedef enum srv_conn_kind { SRV_CONN_STREAM = 1, SRV_CONN_RPC = 2 } srv_conn_kind;

/* What the transport that owns a connection does with it (srv_stream.c, srv_rpc_conn.c). */
typedef struct srv_conn_ops {
  void (*on_data)(srv_conn *c);    /* bytes were appended to c->rbuf */
  void (*on_drained)(srv_conn *c); /* everything queued was written (may be NULL) */
  void (*on_close)(srv_conn *c);   /* closing: let go of what refers to it (may be NULL) */
  /* Accepted over a limit or while stopping: say why in the transport's terms, then finish. */
  void (*refuse)(srv_conn *c, int srv_code, const char *why);
} srv_conn_ops;

struct srv_conn {
  uv_tcp_t tcp; /* first: the handle's address is the connection's */
  srv_server *server;
  srv_conn_kind kind;
  const srv_conn_ops *ops;
  uint32_t id;
  int refs;     /* the handle holds one; jobs answering this connection hold one each */
  int closing;
  int finishing;            /* saying goodbye: no more reads, closed when written */
  int read_paused;          /* output over the soft limit: input waits (backpressure) */
  int authed;               /* rpc: passed `auth` (only matters when a token is set) */
  uint64_t accepted_at;     /* uv_now() at accept */
  uint64_t finish_deadline;
  char peer[64];

  uint8_t *rbuf; /* bytes received and not yet consumed */
  size_t rlen, rcap;
  size_t rcounted;          /* the part of rcap counted in srv_server.input_bytes */
  int input_full;           /* the server's input budget ran out while reading this one */
  uint64_t last_input_ms;   /* uv_now() when bytes last arrived (idle timeout) */

  /* stream connections */
  int hello_done;
  uint8_t role;
  srv_session *session;
  srv_conn *sub_next;
  uint64_t sent_version;    /* the state version the queued frames bring the viewer to */
  size_t queued;            /* bytes handed to uv_write and not yet written */
  int lagging;              /* over the soft limit: frames are coalesced into a catch-up */
  uint64_t lagging_since;   /* uv_now() when it started lagging */

  /* rpc connections */
  int skipping;             /* discarding an oversized request up to its newline */

  srv_conn *next, *prev;    /* the server's connection list */
};

/* A new connection handle in the server's list (not yet accepted: the listener calls uv_accept
 * on c->tcp, then srv_conn_start). Returns NULL when out of memory. */
srv_conn *srv_conn_create(srv_server *s, srv_conn_kind kind, const srv_conn_ops *ops);
/* Reads from the accepted socket; bytes go to ops->on_data. */
void srv_conn_start(srv_conn *c);
/* Queues `f` on the connection (takes a new reference). Returns 0 or a negative errno. */
int srv_conn_send(srv_conn *c, srv_frame *f);
/* Queues raw bytes that are copied (replies, errors). */
int srv_conn_send_copy(srv_conn *c, const void *data, size_t len);
/* Sends several frames as one write (SNAPSHOT head + shared mesh part + state part). */
int srv_conn_send_parts(srv_conn *c, srv_frame **parts, int n);
/* Sends an ERROR frame (code PROTO_ERR_*, naming request_id or 0) on a stream connection. The
 * one place ERROR frames are built. */
void srv_conn_send_error(srv_conn *c, uint16_t code, uint32_t request_id, const char *message);
/* Sends an ERROR (stream connections; best effort, never waits for a slow peer) and closes the
 * connection. */
void srv_conn_fail(srv_conn *c, uint16_t code, const char *message);
/* Sends `last` (may be NULL), stops reading, and closes once it is written (or after 2 s). */
void srv_conn_finish(srv_conn *c, srv_frame *last);
void srv_conn_close(srv_conn *c);
void srv_conn_ref(srv_conn *c);
void srv_conn_unref(srv_conn *c);
/* Fan-out to one subscriber (invariants 1 and 3): queues `f`, which brings it to `version`, or
 * marks it lagging (f NULL, or over the soft limit) so that it is caught up once drained; over
 * the hard limit it is dropped with an ERROR. */
void srv_conn_deliver(srv_conn *c, srv_frame *f, uint64_t version);

/* ---- replies: where an asynchronous answer goes ---------------------------------------------- */

/* A transport's way of answering one request (srv_rpc.c for JSON-RPC calls, srv_stream.c for
 * binary edits). Both functions answer, release `to`, and leave the reply empty. */
typedef struct srv_reply srv_reply;
typedef struct srv_reply_ops {
  void (*ok)(srv_reply *r, cJSON *result);                      /* takes `result` */
  void (*error)(srv_reply *r, int srv_code, const char *message); /* srv_code: SRV_E* */
} srv_reply_ops;

struct srv_reply {
  const srv_reply_ops *ops; /* NULL: nobody to answer */
  void *to;                 /* the transport's: a JSON-RPC call, or a referenced connection */
  uint32_t request_id;      /* binary edits: the id ERROR frames name */
};

/* Answers with `result` (taken) or with an error; a reply with nobody to answer drops them. */
static inline void srv_reply_ok(srv_reply *r, cJSON *result) {
  if (r->ops) r->ops->ok(r, result);
  else cJSON_Delete(result);
  r->ops = NULL;
  r->to = NULL;
}
static inline void srv_reply_error(srv_reply *r, int srv_code, const char *message) {
  if (r->ops) r->ops->error(r, srv_code, message);
  r->ops = NULL;
  r->to = NULL;
}

/* ---- animation clips (srv_anim.c; the player in srv_anim_play.c, compression in
 *      srv_anim_compress.c, methods in srv_anim_rpc.c, shared types in srv_anim.h) ----------- */

/* Builds the session's clips from its mesh (keyframe clips and glTF weight clips). Called by
 * srv_session_create; srv_anim_fini frees them with the session. Returns 0 or MESH_ENOMEM. */
int srv_anim_init(srv_session *s);
void srv_anim_fini(srv_session *s);

/* ---- operations and sessions (srv_session.c, srv_session_op.c, srv_state.c) ------------------- */

typedef enum srv_op_kind {
  SRV_OP_SET_WEIGHTS = 1, /* absolute weights of some targets (not combination targets) */
  SRV_OP_SET_OFFSETS = 2, /* absolute quantised sculpt offsets of some vertices (ascending) */
  SRV_OP_ADD_TARGET = 3,  /* the sculpt layer becomes a new target `name` at weight 1; the
                           * layer is cleared, so the shape does not change */
  SRV_OP_SET_TARGET_META = 4, /* target indices[0] gets the range, mute flag and drivers of `meta` */
  SRV_OP_ADD_TARGETS = 5,     /* `count` new targets from `added`, appended in order (PCA bases) */
  SRV_OP_SET_WEIGHTS_QRUN = 6 /* targets first..first+count-1 get proto_qweight(wq[i], wscale) */
} srv_op_kind;

/* A target to append (SRV_OP_ADD_TARGETS). Arrays are borrowed for the call. */
typedef struct srv_new_target {
  const char *name;
  uint32_t count;          /* moved vertices */
  const uint32_t *indices; /* ascending render vertices */
  const float *deltas;     /* 3 per vertex */
  float weight, min, max;  /* its weight (set value) and range */
} srv_new_target;

/* A target's live settings. Its weight on the wire (srv_session.weights) is derived:
 *   muted                      -> 0
 *   combination (drivers > 0)  -> the product of the drivers' weights
 *   otherwise                  -> value
 * Drivers are never combination targets themselves, so one pass settles every weight. */
typedef struct srv_target {
  float min, max;          /* the range `value` must lie in; within [-10, 10] */
  float value;             /* the weight clients set */
  uint8_t muted;
  uint8_t driver_count;
  uint32_t drivers[PROTO_MAX_DRIVERS];
  uint64_t meta_version;   /* the version that last changed range, mute or drivers (0: the file's) */
} srv_target;

#define SRV_WEIGHT_LIMIT 10.0f /* ranges may reach [-10, 10], like Blender's slider_min/max */

/* An operation record: who, what, parameters. Arrays are borrowed for the call. */
typedef struct srv_op {
  srv_op_kind kind;
  uint32_t author; /* connection id */
  uint32_t count;
  const uint32_t *indices; /* target or vertex indices */
  const float *values;     /* SET_WEIGHTS */
  const int32_t *q;        /* SET_OFFSETS: 3 per entry */
  const char *name;        /* ADD_TARGET */
  const srv_target *meta;  /* SET_TARGET_META: min, max, muted, drivers (value is ignored) */
  const srv_new_target *added; /* ADD_TARGETS: `count` of them */
  uint32_t first;          /* SET_WEIGHTS_QRUN */
  const int16_t *wq;
  float wscale;
} srv_op;

#define SRV_BLOCK_SHIFT 6 /* vertex versions are kept per block of 64 vertices */

typedef struct srv_gesture srv_gesture;

struct srv_session {
  int refs;                  /* the server's table holds one; each running job one more */
  int closed;                /* removed from the server: jobs finishing now apply nothing */
  char *name;
  mesh *mesh;                /* positions and triangles never change; targets are only added */
  mesh_topology topo;        /* welded topology of the base mesh (solves, brushes) */
  mesh_adjacency adj;        /* over topo's triangles */
  mesh_stats stats;
  srv_target *targets;       /* per target: range, set value, mute, drivers */
  float offset_quantum;
  uint64_t version;
  float *weights;            /* target_count: the weights viewers apply (see srv_target) */
  uint64_t *weight_version;  /* target_count: version that last changed it */
  int32_t *offsets;          /* 3 * vertex_count quantised sculpt offsets */
  uint64_t *block_version;   /* per block of 64 vertices */
  srv_frame *mesh_body;      /* SNAPSHOT pieces shared by every join: positions, triangles, UVs */
  srv_frame **target_parts;  /* ... and one per target */
  uint32_t target_cap;
  uint64_t *target_version;  /* per target: the version that created it (0: from the file) */
  srv_conn *subscribers;     /* intrusive list through srv_conn.sub_next */
  uint32_t subscriber_count;
  uint64_t ops_applied;
  srv_gesture *gestures;     /* editing gestures in progress (srv_gesture.c) */
  uint32_t gesture_count;
  size_t gesture_bytes;      /* their estimated memory (the session's budget) */
  struct stroke *strokes, *strokes_tail; /* brush strokes waiting, in order (srv_brush.c) */
  uint32_t stroke_count;
  int brush_running;
  struct srv_blend *blend;   /* blendshape solves: cached pin factors, the pending solve (srv_blend.c) */
  struct srv_anim *anim;     /* clips, player and recorder (srv_anim*.c) */
  struct srv_session *next;  /* server's session list */
};

/* A copy of a session's state that a thread-pool job can evaluate while the loop goes on:
 * weights and offsets copied, targets copied shallowly (their arrays never change or move). */
typedef struct srv_state {
  mesh view;          /* the session's mesh with `targets` pointing at the copy below */
  mesh_target *targets;
  float *weights;
  int32_t *offsets;
  float quantum;
} srv_state;

/* srv_state.c: captures on the loop thread (two memcpy and a small copy). Returns 0 or
 * MESH_ENOMEM. */
int srv_state_capture(const srv_session *s, srv_state *st);
void srv_state_release(srv_state *st);
/* base + Σ w·Δ + offsets per render vertex (3 × vertices floats), on any thread. */
int srv_state_shape(const srv_state *st, float *out);

/* Builds a session around `m` (takes ownership) and its encoded mesh part. Returns 0 or a
 * MESH_E* code with a reason; on failure `m` is destroyed. Runs on any thread (touches nothing
 * shared). */
int srv_session_create(const char *name, mesh *m, srv_session **out, char *err, size_t errlen);
void srv_session_ref(srv_session *s);
void srv_session_unref(srv_session *s); /* destroys it with the last reference */
void srv_session_destroy(srv_session *s);

/* The server's table of sessions. */
srv_session *srv_session_find(srv_server *srv, const char *name);
void srv_session_add(srv_server *srv, srv_session *s);
/* Removes the session from the table: its viewers get BYE(SESSION_CLOSED) and are closed, what
 * is running on it stops (srv_server.on_session_close), and the table's reference goes. */
void srv_session_close(srv_server *srv, srv_session *s, const char *why);

/* Viewers: a subscribed connection gets every applied op's frame (srv_conn_deliver). */
void srv_session_subscribe(srv_session *s, srv_conn *c);
void srv_session_unsubscribe(srv_conn *c); /* no-op when c is not subscribed */
/* Hands `f` (NULL: could not be encoded; subscribers fall behind and catch up) at `version` to
 * every subscriber. */
void srv_session_publish(srv_session *s, srv_frame *f, uint64_t version);

/* Target t as the protocol describes it (name, default, range, flags, drivers, deltas). */
proto_target_desc srv_session_target_desc(const srv_session *s, uint32_t t);
/* Encodes target t's SNAPSHOT part into s->target_parts[t] (grown as needed): after a target is
 * added or its settings change. Returns 0 or a MESH_E* code. */
int srv_session_encode_target(srv_session *s, uint32_t t);
/* Encodes the frames that bring a receiver from `since` to the current version: a WEIGHTS frame
 * of every target changed since then and a DELTA of every vertex in a block changed since then.
 * Appends to `b` (nothing when since == version). Returns 0 or a PROTO_E* code. */
int srv_session_encode_since(const srv_session *s, uint64_t since, uint8_t flags, proto_buf *b);
/* The frames a joining viewer is sent as its SNAPSHOT, in order: a per-join head (frame header
 * and mesh counts), the shared body and target pieces (referenced), a per-join state part.
 * *parts is malloc'ed and holds one reference to each frame. Returns 0 or MESH_ENOMEM. */
int srv_session_snapshot_parts(const srv_session *s, srv_frame ***parts, uint32_t *count);
/* Encodes the state part of a SNAPSHOT (current weights, non-zero offsets). */
int srv_session_encode_state(const srv_session *s, proto_buf *b);

/* Validates `op` against the session (indices in range and ordered, values finite and within
 * each target's range). Returns 0 or SRV_ERANGE with a reason; applies nothing on failure. */
int srv_session_check(const srv_session *s, const srv_op *op, char *err, size_t errlen);
/* Applies a checked op: state updated, version bumped, one frame encoded and fanned out to
 * every subscriber. Returns the new version, or 0 when out of memory (state unchanged). */
uint64_t srv_session_apply(srv_server *srv, srv_session *s, const srv_op *op);
/* Sets the sculpt offsets of `vertices` (NULL: every vertex) back to zero, as one op. Returns 0
 * with the new version and how many vertices changed, or an SRV_E* code with a reason. */
int srv_session_reset(srv_server *srv, srv_session *s, uint32_t author, const uint32_t *vertices,
                      uint32_t count, uint64_t *version, uint32_t *reset, char *err, size_t errlen);

/* ---- editing gestures (srv_gesture.c) ------------------------------------------------------- */

typedef struct srv_gesture_spec {
  uint32_t id;            /* 0: the server picks one */
  dfm_mode mode;
  int iterations;
  const uint32_t *handle; /* render vertices */
  uint32_t handle_count;
  int64_t pick;           /* render vertex, or -1: the handle is it and what lies within handle_radius */
  double handle_radius;
  const uint32_t *roi;    /* render vertices, or NULL: within roi_radius of the handle, or everything */
  uint32_t roi_count;
  double roi_radius;
  const uint32_t *anchors;
  uint32_t anchor_count;
  int detached;           /* does not end with the connection that began it (JSON-RPC "detached") */
} srv_gesture_spec;

/* Each returns 0 (the reply is answered later) or an SRV_E* code with a reason in err (the
 * reply is untouched: the caller answers). */
int srv_gesture_begin(srv_server *srv, srv_session *s, const srv_gesture_spec *spec, uint32_t owner,
                      srv_reply reply, char *err, size_t errlen);
int srv_gesture_drag(srv_server *srv, srv_session *s, uint32_t id, const dfm_xform *xf, int pivot_given,
                     srv_reply reply, char *err, size_t errlen);
int srv_gesture_end(srv_server *srv, srv_session *s, uint32_t id, srv_reply reply, char *err, size_t errlen);
/* Gestures not dragged for idle_ms end (detached gestures have no connection to end with). */
void srv_gesture_expire(srv_server *srv, srv_session *s, uint64_t idle_ms);
/* A connection went away: its gestures end (owner 0 means none: nothing happens). */
void srv_gesture_drop_owner(srv_server *srv, srv_session *s, uint32_t owner);
/* The session is closing: every gesture ends (those with a job running when it finishes). */
void srv_gesture_close_all(srv_session *s);

/* ---- brush strokes (srv_brush.c) -------------------------------------------------------------- */

/* Queues a stroke (copied) behind the session's other strokes; answers `reply` with
 * {"version", "moved_vertices"} once applied. Returns 0 or an SRV_E* code. */
int srv_brush_stroke(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                     uint32_t count, uint32_t author, srv_reply reply, char *err, size_t errlen);
/* The session is closing: waiting strokes are answered with an error. */
void srv_brush_close_all(srv_session *s);

/* What a stroke costs, before it runs (srv_brush_budget.c), in touched-vertex units: `touched`
 * bounds the vertices its samples (and their mirror images) move, `scanned` counts the distance
 * checks, and `work` = touched + scanned / SRV_BRUSH_SCAN_RATIO is what max_brush_work bounds. */
#define SRV_BRUSH_SCAN_RATIO 100
typedef struct srv_brush_cost {
  uint64_t touched, scanned, work;
} srv_brush_cost;
/* The cost of `count` samples over `n` positions (3 doubles each). 0 or SRV_EINTERNAL. */
int srv_brush_work(const double *positions, uint32_t n, const dfm_brush_sample *samples, uint32_t count,
                   int mirror_x, srv_brush_cost *out);

/* ---- blendshape weight solves (srv_blend.c) ------------------------------------------------- */

#define SRV_BLEND_MAX_PINS 10000 /* pins in one blend.solve or BLEND_PINS edit (SRV_ELIMIT over it) */

/* Pinned vertices and where they should go (blend.solve, EDIT BLEND_PINS). Arrays are copied. */
typedef struct srv_blend_pins_spec {
  const uint32_t *vertices;  /* pin_count render vertices (a vertex may repeat) */
  const double *positions;   /* 3 per pin */
  uint32_t pin_count;
  double lambda;             /* regularization, >= 0 */
  int keep_close;            /* regularise towards the current values (else towards 0) */
  const uint32_t *targets;   /* the targets to solve, or NULL: every one neither muted nor a combination */
  uint32_t target_count;
} srv_blend_pins_spec;

/* A whole shape to project onto the targets (blend.fit). Strings and arrays are copied. */
typedef struct srv_blend_fit_spec {
  const char *shape;         /* "sculpt" (the current look, sculpt layer included) or a mesh file */
  double lambda;
  int keep_close;
  const uint32_t *targets;   /* as for the pins */
  uint32_t target_count;
  int apply;                 /* also apply the weights (one SET_WEIGHTS op) */
} srv_blend_fit_spec;

/* Each returns 0 (the reply is answered later) or an SRV_E* code with a reason in err (the
 * reply is untouched: the caller answers). Solves of one session coalesce: a request arriving
 * while one runs replaces the one waiting, and all are answered by the newest. */
int srv_blend_solve(srv_server *srv, srv_session *s, const srv_blend_pins_spec *spec, uint32_t author,
                    srv_reply reply, char *err, size_t errlen);
int srv_blend_solve_edit(srv_server *srv, srv_session *s, const proto_blend_pins *pins, uint32_t author,
                         srv_reply reply, char *err, size_t errlen);
int srv_blend_fit(srv_server *srv, srv_session *s, const srv_blend_fit_spec *spec, uint32_t author,
                  srv_reply reply, char *err, size_t errlen);
/* The session is closing: waiting solves are answered SRV_ENOSESSION, cached factors freed
 * (running jobs answer theirs and free the rest when they end). */
void srv_blend_close_all(srv_session *s);

/* ---- animation playback and recording (srv_anim_play.c) ------------------------------------ */

/* The session is closing: playback and recording stop. */
void srv_anim_close(srv_session *s);
/* The server is stopping: the animation timer closes. */
void srv_anim_shutdown(srv_server *srv);

/* ---- background jobs (srv_jobs.c) ----------------------------------------------------------------- */

/* Opens a session from a mesh path (read by the import worker, decoded on the thread pool) or
 * "demo" (generated on the pool), then calls `done` on the loop thread with 0 and the new
 * session added to the server, or an SRV_E* code and a reason. Returns 0, or an SRV_E* code
 * with a reason in err (then `done` is never called). */
typedef void (*srv_open_cb)(srv_server *s, void *arg, int status, srv_session *session,
                            const char *err);
int srv_job_open_session(srv_server *s, const char *name, const char *mesh_path, srv_open_cb done,
                         void *arg, char *err, size_t errlen);

/* Writes the current shape of a session to a file on the thread pool (the positions are
 * captured now, on the loop thread). `done` gets 0 or SRV_EIO with a reason. */
typedef void (*srv_export_cb)(srv_server *s, void *arg, int status, const char *err);
int srv_job_export(srv_server *s, srv_session *session, const char *path, srv_export_cb done,
                   void *arg);

/* ---- JSON-RPC messages and params (srv_rpc.c) ------------------------------------------------- */

/* A request being answered, possibly later (after a job). */
typedef struct srv_rpc_call {
  srv_conn *conn; /* referenced */
  cJSON *id;      /* owned copy of the request id */
} srv_rpc_call;

/* The JSON-RPC code an SRV_E* code is answered with (docs/json-api.md §errors). */
int srv_rpc_code(int srv_code);
/* Sends {"jsonrpc":"2.0","id":...,"result":result} (takes `result`) and frees the call. */
void srv_rpc_reply(srv_rpc_call *call, cJSON *result);
/* Sends an error object for an SRV_E* code and frees the call. */
void srv_rpc_error(srv_rpc_call *call, int srv_code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A reply that answers `call` (for the domain modules' asynchronous answers). */
srv_reply srv_rpc_reply_to(srv_rpc_call *call);
/* Writes one error response line with a JSON-RPC `code` (the transport's own -32700/-32600,
 * or srv_rpc_code of an SRV_E*) to `c`; takes `id` (NULL: null). */
void srv_rpc_send_error(srv_conn *c, cJSON *id, int code, const char *message);

/* Param readers. Each returns 0 when the key is absent, 1 when it was read, and -1 after
 * answering the call with SRV_EPARAMS (wrong type) or SRV_ENOTFINITE (a number that is not
 * finite). */
int srv_rpc_number(srv_rpc_call *call, const cJSON *params, const char *key, double *out);
int srv_rpc_numbers(srv_rpc_call *call, const cJSON *params, const char *key, int n, double *out);
int srv_rpc_bool(srv_rpc_call *call, const cJSON *params, const char *key, int *out);
/* An array of vertex indices (integers >= 0); *out is malloc'ed (caller frees; NULL when
 * absent). */
int srv_rpc_vertices(srv_rpc_call *call, const cJSON *params, const char *key, uint32_t **out, uint32_t *count);
/* The session named by params.session, or NULL after answering the call with SRV_EPARAMS (not a
 * string) or SRV_ENOSESSION. */
srv_session *srv_rpc_want_session(srv_server *s, srv_rpc_call *call, const cJSON *params);

/* ---- JSON-RPC methods (srv_methods.c: table and session/server methods; srv_edit_rpc.c,
 *      srv_blend_rpc.c, srv_anim_rpc.c: the rest) -------------------------------------------- */

typedef void (*srv_method_fn)(srv_server *s, srv_rpc_call *call, cJSON *params);

/* Runs `method` with `params`. Either answers now (srv_rpc_reply / srv_rpc_error) or keeps the
 * call for an asynchronous answer. `call` is owned by the callee from here on. */
void srv_methods_dispatch(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params);

/* srv_edit_rpc.c: targets, weights, sculpt offsets, gestures and brushes. */
void srv_m_targets_list(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_targets_configure(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_targets_create_from_sculpt(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_weights_set(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_weights_get(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_sculpt_set(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_sculpt_get(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_begin(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_drag(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_end(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_deform_reset(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_brush_stroke(srv_server *s, srv_rpc_call *call, cJSON *params);

/* srv_blend_rpc.c */
void srv_m_blend_solve(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_blend_fit(srv_server *s, srv_rpc_call *call, cJSON *params);

/* srv_anim_rpc.c */
void srv_m_anim_list(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_compress(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_play(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_pause(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_stop(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_seek(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_speed(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_loop(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_blend(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_record_start(srv_server *srv, srv_rpc_call *call, cJSON *params);
void srv_m_anim_record_stop(srv_server *srv, srv_rpc_call *call, cJSON *params);

/* ---- transports (srv_stream.c: the binary port; srv_rpc_conn.c: the JSON-RPC port) ----------- */

extern const srv_conn_ops srv_stream_ops;
extern const srv_conn_ops srv_rpc_conn_ops;

/* ---- the server (srv_server.c) ------------------------------------------------------------------ */

int srv_server_start(srv_server *s, uv_loop_t *loop, const srv_config *cfg);
/* Stops accepting, says BYE to every client, closes everything; the loop then ends. */
void srv_server_stop(srv_server *s, const char *why);
void srv_server_fini(srv_server *s);

#endif
