/*
 * srv.h — deformd's internal interfaces, one section per file, in the order the files depend
 * on each other: a section's functions call only into the sections above it (callbacks set by
 * a higher layer, such as a connection's srv_conn_ops or a reply's srv_reply_ops, are how a
 * lower one hands work back up). tests/layout checks that no two files call each other in a
 * circle.
 *
 *   errors, log, config, frames, JSON        srv_error.c srv_log.c srv_config.c srv_frame.c srv_json.c
 *   TLS over memory BIOs, the data folders   srv_tls.c srv_data.c
 *   WebSocket framing (wslay), the page      srv_ws.c srv_web_assets.c (generated from viewer/web/)
 *                                            srv_json_text.c
 *   the import worker                        srv_import.c
 *   connections (writes, fan-out policy)     srv_conn.c
 *   access: tokens, roles, the decision      srv_access.c
 *   clips of a session                       srv_anim.c
 *   a session on the wire (SNAPSHOT pieces,  srv_session_wire.c
 *     catch-ups, per codec)
 *   sessions, viewer classes, operations,    srv_session.c srv_session_op.c srv_state.c
 *     state copies
 *   gestures, brushes, blend solves, player  srv_gesture.c srv_brush.c srv_blend.c srv_anim_play.c
 *                                            srv_anim_compress.c
 *   jobs (import, export)                    srv_jobs.c
 *   JSON-RPC messages and params             srv_rpc.c
 *   JSON-RPC methods                         srv_methods.c srv_edit_rpc.c srv_blend_rpc.c srv_anim_rpc.c
 *                                            srv_history_rpc.c srv_token_rpc.c srv_transfer_rpc.c
 *   transports                               srv_stream.c (binary port) srv_rpc_conn.c (JSON-RPC port)
 *   many machines (srv_cluster.h): Redis,    srv_redis.c srv_link.c srv_cluster.c srv_publish.c
 *     links, lookups, publishing, relays,    srv_relay.c srv_forward.c srv_cluster_tokens.c
 *     forwarding, tokens, the registry and   srv_registry.c
 *     placement
 *                                            srv_http.c (HTTP port: the page, WebSocket upgrades)
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
#include "dfm_stroke.h"
#include "mesh.h"
#include "proto.h"
#include "proto2.h"

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
  int http_port;             /* the page and its WebSockets; 0 = any free port, -1 = off */
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
  char *admin_token;         /* the first administrator's token (DEFORMD_ADMIN_TOKEN,
                              * --admin-token-file, or the config file's "token"; never the
                              * command line): hashed at start, then wiped */
  char *tls_cert, *tls_key;  /* PEM files: TLS on every port when both are set */
  char **mesh_dirs;          /* --mesh-dir: more folders session.create reads */
  uint32_t mesh_dir_count;
  uint32_t max_upload_mb;    /* one mesh.upload's size */
  int insecure;              /* --insecure: another address than loopback without tokens */
  char *data_dir;            /* the store's directory; NULL: the default (srv_config_data_dir);
                              * "none": memory only */
  int durability_full;       /* SQLite synchronous=FULL (survives a power loss) instead of NORMAL */
  double history_days;       /* operations older than this are folded into a checkpoint; 0: kept */
  uint32_t import_memory_mb; /* the import worker's memory (srv_import.c) */
  uint32_t import_seconds;   /* ... and time */
  uint32_t import_workers;   /* ... and how many run at once */
  uint32_t max_file_mb;      /* mesh files larger than this are refused (0: no limit) */
  char *import_worker_path;  /* the program run as the import worker (NULL: none, imports fail) */
  srv_session_spec *sessions;
  uint32_t session_count;
  /* Many machines (docs/operations.md): */
  char *redis;               /* redis://HOST:PORT[/DB]: publish this primary's sessions there (or
                              * follow them, with relay); NULL: a single node */
  int relay;                 /* --relay: own no session, serve viewers from Redis */
  char *node_id;             /* this node's name in the registry; NULL: ADVERTISE:STREAM_PORT */
  char advertise[64];        /* the numeric address other nodes reach this one at ("": listen) */
  uint32_t snapshot_every;   /* a snapshot after this many frames of a session (100) */
  uint32_t stream_maxlen;    /* stream entries kept per session (about; 10 x snapshot_every) */
  uint32_t lease_ms;         /* the node's lease in the registry (3000), renewed every third */
  uint32_t replica_idle_ms;  /* a relay drops a replica with no viewer for this long (60000; 0: keeps it) */
  uint32_t redis_timeout_ms; /* a command unanswered this long means Redis stalled (5000) */
} srv_config;

/* Fills defaults. */
void srv_config_init(srv_config *c);
void srv_config_fini(srv_config *c);
/* Reads a JSON config file over the current values. Returns 0 or SRV_EPARAMS with a reason in
 * err. */
int srv_config_load(srv_config *c, const char *path, char *err, size_t errlen);
/* --data DIR|none, --durability normal|full. Each returns 0 or an SRV_E* code. */
int srv_config_set_data(srv_config *c, const char *dir);
int srv_config_set_durability(srv_config *c, const char *name);
/* The store's directory: --data, else $XDG_DATA_HOME/deformd, else ~/.local/share/deformd;
 * NULL for "none". `buf` holds a default that is built. */
const char *srv_config_data_dir(const srv_config *c, char *buf, size_t len);
/* The same from text already in memory (text[0..len), exact JSON: srv_json_check). Settings read
 * before a mistake is found stay set. */
int srv_config_load_text(srv_config *c, const char *text, size_t len, char *err, size_t errlen);
/* Adds a session to open at start. Copies both strings. Returns 0 or SRV_EINTERNAL. */
int srv_config_add_session(srv_config *c, const char *name, const char *mesh);
/* --mesh-dir PATH (copied). 0 or SRV_EINTERNAL. */
int srv_config_add_mesh_dir(srv_config *c, const char *path);
/* The administrator's token: replaces the one set (copied; the old copy is wiped). Reading it
 * from a file: the first line, at most PROTO_MAX_NAME bytes. Each returns 0 or SRV_EPARAMS with
 * a reason. */
int srv_config_set_admin_token(srv_config *c, const char *token, char *err, size_t errlen);
int srv_config_read_admin_token(srv_config *c, const char *path, char *err, size_t errlen);
/* Whether `addr` (a --listen value) is a loopback address: 127.0.0.0/8, ::1, localhost. */
int srv_config_is_loopback(const char *addr);

/* ---- TLS (srv_tls.c): OpenSSL through memory BIOs, a layer of srv_conn -------------------------- */

typedef struct srv_tls_ctx srv_tls_ctx;
typedef struct srv_tls srv_tls;

/* The server's certificate (chain, PEM) and key. Returns 0 or SRV_EPARAMS / SRV_EINTERNAL with
 * a reason. */
int srv_tls_ctx_create(const char *cert_file, const char *key_file, srv_tls_ctx **out, char *err, size_t errlen);
void srv_tls_ctx_destroy(srv_tls_ctx *t);
/* One accepted connection's TLS (server side). NULL when out of memory. */
srv_tls *srv_tls_create(srv_tls_ctx *ctx);
void srv_tls_destroy(srv_tls *t);
/* Ciphertext from the peer (copied), advancing the handshake. 0, or SRV_EPARAMS (the peer
 * does not speak TLS, or failed) with srv_tls_error. */
int srv_tls_feed(srv_tls *t, const uint8_t *in, size_t n);
/* Plaintext decrypted so far, up to cap bytes into out (*got; 0 when none yet). 0,
 * SRV_ESHUTDOWN (the peer said goodbye) or SRV_EPARAMS. */
int srv_tls_read(srv_tls *t, uint8_t *out, size_t cap, size_t *got);
/* Plaintext to send (copied): encrypted now, or once the handshake is done. 0 or an SRV_E*. */
int srv_tls_write(srv_tls *t, const void *data, size_t n);
/* The ciphertext waiting to be sent: *out malloc'ed (the caller frees it), NULL when none. */
int srv_tls_take_output(srv_tls *t, uint8_t **out, size_t *len);
/* Queues TLS's close_notify (sent with the next take_output). */
void srv_tls_close_notify(srv_tls *t);
const char *srv_tls_error(const srv_tls *t);

/* ---- the data folders (srv_data.c) --------------------------------------------------------- */

#define SRV_MAX_MESH_DIRS 16

typedef struct srv_data {
  int meshes, exports;            /* DIR/meshes and DIR/exports, -1 with --data none */
  int roots[SRV_MAX_MESH_DIRS + 1]; /* where meshes are looked up: meshes/ first, then each --mesh-dir */
  uint32_t root_count;
} srv_data;

/* Creates (when missing) and opens DIR/meshes and DIR/exports (dir NULL: --data none) and the
 * --mesh-dir folders. At start only. Returns 0 or SRV_EIO / SRV_EPARAMS with a reason. */
int srv_data_open(srv_data *d, const char *dir, char *const *mesh_dirs, uint32_t n, char *err, size_t errlen);
void srv_data_close(srv_data *d);

/* A file being written beneath a folder: a temporary name beside the final one. On the pool. */
typedef struct srv_data_temp {
  int fd, parent, own_parent;
  char tmp[64], base[256];
} srv_data_temp;

/* `name` (a relative name, mesh_name_ok) beneath dir_fd; `folder` names it in messages
 * ("meshes", "exports"). Each returns 0 or SRV_EIO with a reason; commit and discard close it. */
int srv_data_temp_open(int dir_fd, const char *name, const char *folder, srv_data_temp *t, char *err, size_t errlen);
int srv_data_temp_write(srv_data_temp *t, uint64_t offset, const void *data, size_t len, char *err, size_t errlen);
int srv_data_temp_commit(srv_data_temp *t, const char *name, const char *folder, char *err, size_t errlen);
void srv_data_temp_discard(srv_data_temp *t);
/* The whole file at once. */
int srv_data_write(int dir_fd, const char *name, const char *folder, const void *data, size_t len, char *err,
                   size_t errlen);
/* Sets a string option (copied). Returns 0 or SRV_EINTERNAL. */
int srv_config_set_string(char **field, const char *value);

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

typedef struct srv_store srv_store;
typedef struct srv_op srv_op;
struct srv_rpc_call;
typedef struct srv_before srv_before;

/* ---- authors (srv_author.c) --------------------------------------------------------------------- */

enum { SRV_AUTHOR_SERVER = 0, SRV_AUTHOR_PLAYER = 1 };

/* Author names by id (a linear table: a server sees a handful of people). */
typedef struct srv_authors {
  char **names;
  uint32_t count, cap;
} srv_authors;

int srv_authors_init(srv_authors *a);
void srv_authors_fini(srv_authors *a);
/* Sets the name of id (restore: the store's table). Returns 0 or SRV_EINTERNAL. */
int srv_authors_set(srv_authors *a, uint32_t id, const char *name);
const char *srv_authors_name(const srv_authors *a, uint32_t id);
int srv_authors_find(const srv_authors *a, const char *name); /* id, or -1 */
/* The id of `name`, added (and queued to the store when there is one) when new. */
int srv_authors_intern(srv_authors *a, srv_store *store, const char *name, uint32_t *id);

/* ---- access: the types (the functions are in srv_access.c, after the connections) -------------- */

/* Each role may do everything the ones before it may (docs/json-api.md §security). */
typedef enum srv_role {
  SRV_ROLE_NONE = 0,   /* nothing: a server with tokens, before a token was presented */
  SRV_ROLE_VIEWER = 1, /* watch, read methods */
  SRV_ROLE_EDITOR = 2, /* + edits, its own undo and redo */
  SRV_ROLE_OWNER = 3,  /* + target configuration, revert, export, close, the session's tokens */
  SRV_ROLE_ADMIN = 4   /* everything: session.create, mesh.upload, server.stats, every session */
} srv_role;

#define SRV_TOKEN_HASH 32              /* SHA-256 */
#define SRV_AUTH_CONN_FAILURES 3       /* failed attempts before a connection is closed */
#define SRV_AUTH_ADDR_FAILURES 10      /* ... before an address is refused unchecked */
#define SRV_AUTH_WINDOW_MS 60000       /* ... for the rest of this window */
#define SRV_AUTH_ADDRESSES 256         /* addresses remembered */

/* What a connection may do: a role on one session or on every one. */
typedef struct srv_grant {
  srv_role role;
  char session[PROTO_MAX_NAME + 1]; /* "" = every session */
  int64_t token;                    /* the token's id (0: the configured administrator's), -1 none */
} srv_grant;

typedef struct srv_token {
  int64_t id;                       /* 0: the configured administrator's token (not stored) */
  uint8_t hash[SRV_TOKEN_HASH];
  srv_role role;
  char *session;                    /* NULL: every session */
  char *user;                       /* the author of what is done with it */
  double created;                   /* seconds since the epoch */
} srv_token;

typedef struct srv_addr_failures {
  char addr[64];
  uint32_t count;                   /* failures in the window */
  uint64_t window_start;            /* uv_now() */
  int logged_refusal;
} srv_addr_failures;

typedef struct srv_access {
  srv_token *tokens;
  uint32_t count, cap;
  int64_t next_id;
  int enabled;                      /* a token existed at some point: both ports require one */
  srv_addr_failures addrs[SRV_AUTH_ADDRESSES];
  uint64_t failures, refused;       /* counters for server.stats */
} srv_access;

/* ---- the server's state (its functions are in srv_server.c, at the top) --------------------- */

typedef struct srv_conn srv_conn;
typedef struct srv_server srv_server;
/* A token stored in (or taken back from) the cluster: status 0 with its id, or an SRV_E* code
 * with the reason. */
typedef void (*srv_token_done_cb)(srv_server *s, void *arg, int status, int64_t id, const char *why);
typedef struct srv_session srv_session;

/* Bytes handed to stream sockets for one kind of viewer: a codec (0: protocol version 1;
 * 1 + shift: version 2 on that grid, shift 0 lossless) at a rate (Hz, 0 = every change). */
typedef struct srv_class_stat {
  uint8_t codec;
  float rate;
  uint32_t viewers;          /* connected now */
  uint64_t bytes, frames;
} srv_class_stat;
#define SRV_CLASS_STATS 64   /* kinds of viewer counted (later ones share the last slot) */

typedef struct srv_stats {
  uint64_t frames_sent, bytes_sent, frames_coalesced, clients_dropped, catchups_sent;
  uint64_t connections_accepted, connections_refused, rpc_requests, rpc_errors;
  uint64_t blend_factorisations, blend_solves, blend_fits; /* srv_blend.c */
  /* Stream bytes by message type (index = proto_type; a SNAPSHOT counts whole), and by viewer
   * class (srv_conn.c counts them as they are handed to the socket). */
  uint64_t type_bytes[PROTO_TARGET_META + 1], type_frames[PROTO_TARGET_META + 1];
  srv_class_stat classes[SRV_CLASS_STATS];
  uint32_t class_count;
} srv_stats;

struct srv_server {
  uv_loop_t *loop;
  srv_config cfg;
  uv_tcp_t stream_listener, rpc_listener;
  uv_tcp_t http_listener;    /* open when cfg.http_port >= 0 */
  int stream_port, rpc_port, http_port; /* as bound (the ports asked for may be 0) */
  uint32_t opening;          /* command-line sessions not open yet: the ports line waits for them */
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
  /* Every applied operation, with what it changed as it was before (srv_history.c records it
   * for undo and the store): set by srv_server.c, called by srv_session_apply. */
  void (*on_applied)(srv_server *srv, srv_session *s, const srv_op *op, uint64_t version,
                     const srv_before *before);
  /* A stroke or a drag of the session was applied (or failed): undo and redo that waited for
   * their author's edits may run now (srv_history_rpc.c). Set by srv_server.c. */
  void (*on_edits_settled)(srv_server *srv, srv_session *s);
  srv_store *store;          /* NULL: memory only (--data none) */
  srv_authors authors;
  int64_t next_session_id;   /* the store's session ids */
  uint64_t retention_ms;     /* uv_now() of the last --history-days pass */
  char **reserved;           /* names of stored sessions that did not restore: not reusable */
  uint32_t reserved_count;
  srv_access access;         /* tokens and who may do what (srv_access.c) */
  srv_data data;             /* the folders clients name files in (srv_data.c) */
  srv_tls_ctx *tls;          /* TLS on every port (NULL: none) */
  char *node_token;          /* --redis: the administrator's token, kept to reach other nodes
                              * (srv_forward.c); NULL otherwise (it is wiped once hashed) */
  /* Many machines (--redis, srv_registry.c). The hooks below are NULL on a single node; each is
   * how a lower layer hands a request up to the cluster layer. */
  struct srv_cluster *cluster;
  /* srv_methods_dispatch, after the access check: nonzero when the call was taken (sent to
   * the session's owner, or placed on another node). */
  int (*route_rpc)(srv_server *s, struct srv_rpc_call *call, const char *method, cJSON *params);
  /* srv_stream.c: an EDIT frame (header included) on a connection whose session this node
   * does not own; nonzero when taken. */
  int (*route_edit)(srv_conn *c, const uint8_t *frame, size_t len);
  /* srv_stream.c: a HELLO for a session this node does not hold; nonzero when taken (a relay
   * loads the session, then calls `again` with the same HELLO, or fails the connection). */
  int (*route_join)(srv_conn *c, const char *session, const uint8_t *hello, size_t n,
                    void (*again)(srv_conn *c, const uint8_t *hello, size_t n));
  void (*on_session_added)(srv_server *s, srv_session *x); /* srv_session_add */
  void (*on_session_removed)(srv_server *s, srv_session *x); /* srv_session_close */
  void (*on_conn_closed)(srv_conn *c);  /* both transports' on_close */
  void (*on_joined)(srv_conn *c);       /* a viewer got its SNAPSHOT */
  void (*on_open_failed)(srv_server *s, const char *name); /* srv_jobs.c: a session did not open */
  void (*stats_extra)(srv_server *s, cJSON *r); /* server.stats */
  /* srv_token_rpc.c, srv_access.c: with --redis tokens are the cluster's (srv_cluster_tokens.c).
   * token_create stores a new token's record (never the token) in Redis and calls done with
   * its id, unique in the cluster; token_revoke takes a token back on every node (done may be
   * NULL: nobody waits). Each returns 0 (done runs later) or SRV_EBUSY with the reason in why
   * (done never runs). */
  int (*token_create)(srv_server *s, const srv_token *record, srv_token_done_cb done, void *arg, char *why,
                      size_t whylen);
  int (*token_revoke)(srv_server *s, int64_t id, srv_token_done_cb done, void *arg, char *why, size_t whylen);
};

/* ---- JSON views (srv_json.c, declared in srv_json.h for deformd --check-mesh) ---------------- */

#include "srv_json.h"

/* ---- WebSocket framing (srv_ws.c) and the page's files (srv_web_assets.c) --------------------- */

/* One WebSocket connection's framing: wslay's event API reads messages (fragments joined,
 * control frames answered, the size limit kept), wslay's frame API writes message headers. */
typedef struct srv_ws srv_ws;

/* Where a WebSocket hands things back up (the connection, srv_conn.c). */
typedef struct srv_ws_cbs {
  void (*message)(void *arg, const uint8_t *p, size_t n); /* a whole message of the kind expected */
  void (*write)(void *arg, const uint8_t *p, size_t n);   /* control bytes to send (copied) */
} srv_ws_cbs;

#define SRV_WS_HEADER_MAX 10 /* bytes of a server's (unmasked) frame header */

/* text: the endpoint takes text messages (JSON-RPC), else binary ones (the stream protocol); a
 * message of the other kind, or over max_message bytes, closes it. Returns 0 or SRV_EINTERNAL. */
int srv_ws_create(srv_ws **out, int text, uint64_t max_message, const srv_ws_cbs *cbs, void *arg);
void srv_ws_destroy(srv_ws *ws);
/* Reads `n` received bytes (all of them). Returns 0, or SRV_EPARAMS once the peer closed or broke
 * the protocol (the close frame that answers it has gone to cbs->write): finish the connection. */
int srv_ws_feed(srv_ws *ws, const uint8_t *p, size_t n);
/* Sends a close frame (once) with a code and a reason (cut to 123 bytes). */
void srv_ws_close(srv_ws *ws, uint16_t code, const char *reason);
/* The most an unfinished message may hold from now on (the connection's input limit, which
 * grows once HELLO or auth has been accepted). */
void srv_ws_set_max_message(srv_ws *ws, uint64_t max_message);
/* Payload bytes of the data message being received that wslay holds (0 between messages). */
uint64_t srv_ws_pending(const srv_ws *ws);
/* Rewrites one write of `n` buffers as WebSocket messages without copying them: binary, one
 * message per protocol frame (a buffer may hold several frames, a frame span several buffers);
 * text, one message of everything less a trailing newline. *out and *headers are malloc'ed (the
 * caller frees both once written). Returns 0, or SRV_EPARAMS when the bytes are not whole
 * frames, SRV_EINTERNAL when out of memory. */
int srv_ws_wrap(srv_ws *ws, const uv_buf_t *in, unsigned n, uv_buf_t **out, unsigned *outn, uint8_t **headers);
/* Sec-WebSocket-Accept for a Sec-WebSocket-Key (SHA-1 and base64, nettle). Returns 0, or
 * SRV_EPARAMS when the key is not 16 bytes in base64. */
int srv_ws_accept_key(const char *key, size_t len, char out[29]);

/* The files of viewer/web/, compiled in: NULL when there is no such file. */
typedef struct srv_web_asset {
  const char *name;         /* "index.html", "main.js", ... */
  const char *content_type;
  const uint8_t *data;
  size_t len;
} srv_web_asset;
const srv_web_asset *srv_web_asset_find(const char *name, size_t len);

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

/* SRV_CONN_HTTP: a connection on the HTTP port until it upgrades to a WebSocket, when it becomes
 * a stream or JSON-RPC connection like those of the TCP ports. */
typedef enum srv_conn_kind { SRV_CONN_STREAM = 1, SRV_CONN_RPC = 2, SRV_CONN_HTTP = 3 } srv_conn_kind;

/* What the transport that owns a connection does with it (srv_stream.c, srv_rpc_conn.c,
 * srv_http.c). */
typedef struct srv_conn_ops {
  void (*on_data)(srv_conn *c);    /* bytes were appended to c->rbuf */
  void (*on_drained)(srv_conn *c); /* everything queued was written (may be NULL) */
  void (*on_close)(srv_conn *c);   /* closing: let go of what refers to it (may be NULL) */
  /* Accepted over a limit or while stopping: say why in the transport's terms, then finish. */
  void (*refuse)(srv_conn *c, int srv_code, const char *why);
  /* One whole WebSocket message (a stream frame, a JSON-RPC request), on WebSocket connections,
   * instead of on_data (NULL: the transport has no WebSocket endpoint). */
  void (*on_message)(srv_conn *c, const uint8_t *p, size_t n);
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
  srv_tls *tls;             /* TLS below the transport (srv_tls.c), NULL in clear */
  uint8_t *tls_in;          /* ciphertext read, before decryption */
  srv_grant grant;          /* what it may do (srv_access.c) */
  uint32_t auth_failures;   /* failed token attempts on this connection */
  int author_from_token;    /* its author is its token's user: hello and HELLO names are ignored */
  struct srv_transfer *transfer; /* rpc: an upload or download in progress (srv_transfer_rpc.c) */
  uint32_t author;          /* srv_authors id; 0 until named (srv_conn_author) */
  uint64_t accepted_at;     /* uv_now() at accept, at its latest HTTP request, or at its upgrade */
  uint64_t finish_deadline;
  char peer[64];

  uint8_t *rbuf; /* bytes received and not yet consumed */
  size_t rlen, rcap;
  size_t rcounted;          /* the part of rcap counted in srv_server.input_bytes */
  size_t wscounted;         /* ... and of the WebSocket message wslay is assembling */
  int input_full;           /* the server's input budget ran out while reading this one */
  uint64_t last_input_ms;   /* uv_now() when bytes last arrived (idle timeout) */

  /* stream connections */
  int hello_done;
  uint8_t role;
  uint16_t protocol;        /* the HELLO's protocol version */
  uint8_t codec;            /* what its frames are encoded with (srv_class_stat.codec) */
  float max_rate;           /* Hz granted, 0 = every change */
  int forward_only;         /* a relay's link for an editor's EDITs: no SNAPSHOT, no frames */
  int stat_slot;            /* its srv_stats.classes entry, -1 before HELLO */
  struct srv_class *cls;    /* the subscribers it shares frames with (srv_session.c) */
  srv_conn *join_next;      /* waiting for its codec's SNAPSHOT pieces (srv_session.c) */
  srv_session *session;
  srv_conn *sub_next;
  uint64_t sent_version;    /* the state version the queued frames bring the viewer to */
  size_t queued;            /* bytes handed to uv_write and not yet written */
  int lagging;              /* over the soft limit: frames are coalesced into a catch-up */
  uint64_t lagging_since;   /* uv_now() when it started lagging */

  /* rpc connections */
  int skipping;             /* discarding an oversized request up to its newline */

  /* HTTP-port connections */
  void *http;               /* the request parser until the upgrade (srv_http.c owns it) */
  srv_ws *ws;               /* after the upgrade: reads and writes are WebSocket messages */

  srv_conn *next, *prev;    /* the server's connection list */
};

/* A new connection handle in the server's list (not yet accepted: the listener calls uv_accept
 * on c->tcp, then srv_conn_start). Returns NULL when out of memory. */
srv_conn *srv_conn_create(srv_server *s, srv_conn_kind kind, const srv_conn_ops *ops);
/* Reads from the accepted socket; bytes go to ops->on_data. */
void srv_conn_start(srv_conn *c);
/* An HTTP connection whose upgrade was answered becomes a WebSocket of `kind` served by `ops`
 * (the same transports as the TCP ports, messages to ops->on_message); bytes already read after
 * the request (c->rbuf) are its first. Returns 0 or SRV_EINTERNAL (the caller fails it). */
int srv_conn_upgrade(srv_conn *c, srv_conn_kind kind, const srv_conn_ops *ops);
/* The author of what the connection changes: the name it gave (hello), else
 * anonymous-<connection id> (interned on first use). */
uint32_t srv_conn_author(srv_conn *c);
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
/* The srv_stats.classes slot for (codec, rate), made when new. */
int srv_conn_stat_slot(srv_server *s, uint8_t codec, float rate);

/* ---- access (srv_access.c): tokens, roles, the decision every transport asks ------------------ */

const char *srv_role_name(srv_role r);
int srv_role_parse(const char *name, srv_role *out); /* 0 or SRV_EPARAMS */
int srv_access_init(srv_access *a);
void srv_access_fini(srv_access *a);
/* Whether tokens are required (any token existed since start). */
int srv_access_enabled(const srv_access *a);
void srv_access_hash(const void *token, size_t len, uint8_t out[SRV_TOKEN_HASH]);
/* A new random token, "dfm_" + 43 base64url characters, into out (at least 48 bytes). */
int srv_access_make_token(char *out, size_t len);
/* Adds a token (strings copied; session NULL or "": every session). 0 or SRV_EINTERNAL. */
int srv_access_add(srv_access *a, int64_t id, const uint8_t hash[SRV_TOKEN_HASH], srv_role role, const char *session,
                   const char *user, double created);
const srv_token *srv_access_find(const srv_access *a, int64_t id);
/* Whether grant g may do what needs role `need` on `session`: NULL for what concerns no one
 * session (session.list, hello), "" for a method that names none. Never looks at whether the
 * session exists. */
int srv_access_allows(const srv_server *s, const srv_grant *g, srv_role need, const char *session);
/* The same, as 0 or SRV_EACCES with the one answer a refused client gets (`what` names the
 * method or the kind of connection). */
int srv_access_refusal(const srv_server *s, const srv_grant *g, srv_role need, const char *session, const char *what,
                       char *why, size_t whylen);
/* A token presented on connection c (len bytes, may hold anything): on success c's grant and
 * author become the token's; otherwise c keeps no rights, the failure is counted (per
 * connection and per address) and logged. Returns 0, SRV_EACCES (wrong, or a NUL in it) or
 * SRV_ELIMIT (too many failures from that address: not even checked), with a reason. */
int srv_access_login(srv_server *s, srv_conn *c, const char *token, size_t len, char *why, size_t whylen);
/* Knows a token from now on, and keeps it in the store when there is one: a new one, or one
 * another node of the cluster made. A token already known under `id` with the same hash stays
 * as it is; with another hash the old one is revoked first. 0 or SRV_EINTERNAL (nothing kept). */
int srv_access_put(srv_server *s, int64_t id, const uint8_t hash[SRV_TOKEN_HASH], srv_role role, const char *session,
                   const char *user, double created);
/* Removes a token (stored ones from the store too); connections using it lose their rights and
 * stream connections close. 0 or SRV_ERANGE (no such token). */
int srv_access_revoke(srv_server *s, int64_t id);
/* session.close: the tokens for that session go (in the cluster too, through token_revoke). */
void srv_access_session_closed(srv_server *s, const char *name);

/* ---- the durable store (srv_store.c): SQLite, written by its own thread ----------------------- */

typedef struct srv_store_reader srv_store_reader;

/* Called on the loop thread once what was queued before it is committed: status 0, or SRV_EIO
 * with SQLite's reason when the commit failed. */
typedef void (*srv_store_cb)(void *arg, int status, const char *err);

typedef struct srv_store_op {
  uint64_t first_version, version; /* the versions the record covers */
  uint64_t step;                   /* the undo step it belongs to */
  uint32_t author;                 /* srv_authors id */
  double time;                     /* seconds since the epoch */
  int kind;                        /* srv_cause */
  uint32_t changed;                /* vertices or targets it changed */
  const void *body;
  size_t len;
} srv_store_op;

typedef struct srv_store_stats {
  uint64_t records_queued, bytes_queued, ops_queued, commits_requested, commits, commit_failures,
      bytes_committed;
} srv_store_stats;

/* Opens (creating it and DIR when missing) DIR/deformd.sqlite3 in WAL mode with synchronous
 * FULL or NORMAL, and starts the writer thread. Runs on the loop thread before it serves
 * anyone. Returns 0 or SRV_EIO / SRV_EINTERNAL with a reason. */
int srv_store_open(uv_loop_t *loop, const char *dir, int full, srv_store **out, char *err, size_t errlen);
/* Commits what is queued, stops the writer and closes the handles (freed by the loop). */
void srv_store_close(srv_store *st);
/* Queue records (copied) into the batch of this loop iteration. Each returns 0 or
 * SRV_EINTERNAL. */
int srv_store_put_session(srv_store *st, int64_t sid, const char *name, double created, const void *mesh_blob,
                          size_t len);
int srv_store_delete_session(srv_store *st, int64_t sid);
int srv_store_put_author(srv_store *st, uint32_t id, const char *name);
int srv_store_put_op(srv_store *st, int64_t sid, const srv_store_op *op);
int srv_store_put_checkpoint(srv_store *st, int64_t sid, uint64_t version, const void *body, size_t len);
int srv_store_put_clip(srv_store *st, int64_t sid, const char *name, const void *body, size_t len);
/* Access tokens (srv_access.c): the hash only, never the token. */
int srv_store_put_token(srv_store *st, int64_t id, const uint8_t hash[32], int role, const char *session,
                        const char *user, double created);
int srv_store_delete_token(srv_store *st, int64_t id);
/* Drops the session's operations and checkpoints older than its newest checkpoint at or below
 * `version` (that checkpoint holds their result). */
int srv_store_compact(srv_store *st, int64_t sid, uint64_t version);
/* Runs cb once everything queued so far is committed (at once when nothing is). */
int srv_store_after_commit(srv_store *st, srv_store_cb cb, void *arg);
/* Nonzero, with SQLite's reason, while writes fail (edits are then refused). */
int srv_store_failed(const srv_store *st, char *why, size_t len);
const char *srv_store_path(const srv_store *st);
void srv_store_get_stats(const srv_store *st, srv_store_stats *out);

/* Reading, on any thread, through a read-only connection of its own. Rows and blobs: */
typedef struct srv_store_row {
  int64_t session;
  const char *name; /* a session's, clip's or author's name (valid during the callback) */
  double time;
  srv_store_op op;  /* ops rows (body valid during the callback); author id for author rows;
                     * token rows: body/len the hash, kind the role, session the id */
  const char *scope; /* token rows: the session it is for, NULL for every session */
} srv_store_row;
typedef int (*srv_store_row_cb)(const srv_store_row *row, void *arg); /* nonzero stops */
typedef struct srv_store_blob {
  uint64_t version;
  uint8_t *data; /* malloc'ed (caller frees); NULL when there is none */
  size_t len;
} srv_store_blob;

int srv_store_reader_open(const char *db_path, srv_store_reader **out, char *err, size_t errlen);
void srv_store_reader_close(srv_store_reader *r);
int srv_store_read_sessions(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
int srv_store_read_authors(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
int srv_store_read_mesh(srv_store_reader *r, int64_t sid, srv_store_blob *out, char *err, size_t errlen);
/* The newest checkpoint at or below `at_most` (out->data NULL when there is none). */
int srv_store_read_checkpoint(srv_store_reader *r, int64_t sid, uint64_t at_most, srv_store_blob *out, char *err,
                              size_t errlen);
/* Operations with after < version <= up_to, oldest first. */
int srv_store_read_ops(srv_store_reader *r, int64_t sid, uint64_t after, uint64_t up_to, srv_store_row_cb cb,
                       void *arg, char *err, size_t errlen);
/* The same without their bodies. */
int srv_store_read_ops_meta(srv_store_reader *r, int64_t sid, uint64_t after, uint64_t up_to, srv_store_row_cb cb,
                            void *arg, char *err, size_t errlen);
/* Up to `limit` operations below `before`, newest first, without their bodies. */
int srv_store_read_ops_before(srv_store_reader *r, int64_t sid, uint64_t before, uint32_t limit, srv_store_row_cb cb,
                              void *arg, char *err, size_t errlen);
int srv_store_read_clips(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
int srv_store_read_tokens(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
/* PRAGMA integrity_check is "ok". */
int srv_store_integrity_ok(srv_store_reader *r, char *err, size_t errlen);

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

/* What made an operation: history.list names it, undo groups by it. */
typedef enum srv_cause {
  SRV_CAUSE_EDIT = 1,        /* a binary EDIT of weights or offsets */
  SRV_CAUSE_WEIGHTS_SET,     /* weights.set */
  SRV_CAUSE_SCULPT_SET,      /* sculpt.set */
  SRV_CAUSE_RESET,           /* deform.reset, EDIT RESET */
  SRV_CAUSE_GESTURE,         /* deform.begin .. deform.end (one step) */
  SRV_CAUSE_BRUSH,           /* brush.stroke */
  SRV_CAUSE_BLEND_SOLVE,     /* blend.solve, EDIT BLEND_PINS */
  SRV_CAUSE_BLEND_FIT,       /* blend.fit with apply */
  SRV_CAUSE_TARGET_CREATE,   /* targets.create_from_sculpt */
  SRV_CAUSE_TARGET_CONFIGURE,/* targets.configure */
  SRV_CAUSE_ANIM_COMPRESS,   /* anim.compress: the basis targets */
  SRV_CAUSE_ANIM_PLAY,       /* the player's frames (one step per anim.play) */
  SRV_CAUSE_UNDO,            /* history.undo */
  SRV_CAUSE_REDO,            /* history.redo */
  SRV_CAUSE_REVERT           /* history.revert */
} srv_cause;

/* An operation record: who, what, parameters. Arrays are borrowed for the call. */
struct srv_op {
  srv_op_kind kind;
  uint32_t author; /* srv_authors id */
  uint8_t cause;   /* srv_cause */
  uint64_t step;   /* the undo step it belongs to (srv_history_step), or 0: a step of its own */
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
};

/* What an operation changed, as it was before, for on_applied (undo and the store's offset
 * diffs). Arrays are borrowed for the call. */
struct srv_before {
  const int32_t *q;         /* SET_OFFSETS: 3 per op index; ADD_TARGET: 3 per vertex of the new target */
  const float *values;      /* SET_WEIGHTS: per op index; SET_WEIGHTS_QRUN: per target of the run */
  const srv_target *meta;   /* SET_TARGET_META: the target's settings */
  uint32_t target_count;    /* the targets before (ADD_TARGET(S) append after them) */
};

#define SRV_BLOCK_SHIFT 6 /* vertex versions are kept per block of 64 vertices */

/* Codecs: 0 is protocol version 1; 1 + shift is version 2 on the grid quantum · 2^shift
 * (shift 0: lossless). SRV_DEFAULT_SHIFT is what a version 2 viewer gets unless it asks for a
 * coarser tolerance or lossless: half a step is 2^-16 of the bounding box's diagonal. */
#define SRV_CODECS (PROTO_MAX_SHIFT + 2)
#define SRV_DEFAULT_SHIFT 5
#define SRV_CODEC_V1 0
#define SRV_CODEC_LOSSLESS 1
static inline uint8_t srv_codec_shift(uint8_t codec) { return codec ? (uint8_t)(codec - 1) : 0; }

/* A session's SNAPSHOT pieces for one version 2 codec (srv_session_wire.c): encoded once,
 * shared by every join with that codec. */
typedef struct srv_codec {
  proto_grid2 grid;
  srv_frame *attributes;     /* positions and UVs on the grid (made on the pool) */
  srv_frame **targets;       /* one record per target, made when first needed */
  uint32_t target_cap;
  int job;                   /* a job is encoding `attributes`; joins wait in `waiting` */
  srv_conn *waiting;         /* through srv_conn.join_next, each referenced */
  void (*ready)(srv_conn *c, int status); /* what to tell each waiting join (srv_stream.c) */
} srv_codec;

/* Subscribers that are sent the same bytes: one codec, one rate (srv_session.c). A class at a
 * rate (> 0) is paced: changes mark it, and at most `rate` times a second its members get one
 * coalesced update each (encoded once per distinct version they are at: normally once). */
typedef struct srv_class {
  struct srv_class *next;
  srv_session *session;      /* NULL once the session let go of it (the timer is closing) */
  uint8_t codec;
  float rate;
  uint32_t members;
  uint64_t last_ms;          /* paced: when members were last sent an update */
  uv_timer_t *timer;         /* paced: runs while a change waits */
} srv_class;

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
  uint64_t *vertex_version;  /* per vertex: what version 2 catch-ups and paced updates send */
  srv_frame *mesh_body;      /* SNAPSHOT pieces shared by every join: positions, triangles, UVs */
  srv_frame **target_parts;  /* ... and one per target */
  uint32_t target_cap;
  uint64_t *target_version;  /* per target: the version that created it (0: from the file) */
  proto_trav trav;           /* the traversal of the triangles (version 2 bodies) */
  srv_frame *triangles2;     /* version 2's triangles piece: the bytes `trav` was built from */
  srv_codec *codecs[SRV_CODECS]; /* version 2 pieces per codec, made when first joined */
  srv_class *classes;        /* subscribers by codec and rate */
  srv_conn *subscribers;     /* intrusive list through srv_conn.sub_next */
  uint32_t subscriber_count;
  uint64_t ops_applied;
  srv_gesture *gestures;     /* editing gestures in progress (srv_gesture.c) */
  uint32_t gesture_count;
  size_t gesture_bytes;      /* their estimated memory (the session's budget) */
  struct stroke *strokes, *strokes_tail; /* brush strokes waiting, in order (srv_brush.c) */
  uint32_t stroke_count;
  int brush_running;
  uint32_t brush_author;     /* whose stroke runs, while brush_running */
  struct history_wait *history_waiting; /* undo/redo waiting for their author's edits (srv_history_rpc.c) */
  struct stroke_piece *pieces; /* where strokes sent in pieces stand, per connection (srv_brush.c) */
  struct srv_blend *blend;   /* blendshape solves: cached pin factors, the pending solve (srv_blend.c) */
  struct srv_anim *anim;     /* clips, player and recorder (srv_anim*.c) */
  struct srv_history *history; /* steps, undo and redo (srv_history.c) */
  void (*history_fini)(srv_session *s); /* set with `history`: frees it with the session */
  int64_t store_id;          /* the store's id (0: not stored) */
  uint32_t base_targets;     /* targets the stored mesh has; later ones come from operations */
  int restoring;             /* replaying the store: on_applied records history, writes nothing */
  uint64_t retained_version; /* --history-days: history before this was folded (or is being) */
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

/* Builds a session around `m` (takes ownership) and its encoded mesh part: triangles put in
 * vertex-cache order (and the corner rotation protocol version 2 gives them), the SNAPSHOT
 * pieces of version 1 and of version 2 at the default grid and lossless. Returns 0 or a MESH_E*
 * code with a reason; on failure `m` is destroyed. Runs on any thread (touches nothing
 * shared). */
int srv_session_create(const char *name, mesh *m, srv_session **out, char *err, size_t errlen);
void srv_session_ref(srv_session *s);
void srv_session_unref(srv_session *s); /* destroys it with the last reference */
void srv_session_destroy(srv_session *s);

/* The server's table of sessions. */
srv_session *srv_session_find(srv_server *srv, const char *name);
void srv_session_add(srv_server *srv, srv_session *s);
/* Names of stored sessions that did not restore: a new session may not take one. */
void srv_session_reserve_name(srv_server *srv, const char *name);
int srv_session_name_taken(const srv_server *srv, const char *name);
/* Removes the session from the table: its viewers get BYE(SESSION_CLOSED) and are closed, what
 * is running on it stops (srv_server.on_session_close), and the table's reference goes. */
void srv_session_close(srv_server *srv, srv_session *s, const char *why);

/* Viewers: a subscribed connection joins the class of its codec and max_rate; a class at rate 0
 * gets every applied op's frame (srv_conn_deliver), a paced one coalesced updates. */
void srv_session_subscribe(srv_session *s, srv_conn *c);
void srv_session_unsubscribe(srv_conn *c); /* no-op when c is not subscribed */
/* Which codecs' frames an op must be encoded in: bit c set when a class at rate 0 uses codec c. */
uint32_t srv_session_live_codecs(const srv_session *s);
/* Hands frames[codec] (NULL: could not be encoded; subscribers fall behind and catch up) at
 * `version` to every subscriber at rate 0, and marks the paced classes. */
void srv_session_publish(srv_session *s, srv_frame *const *frames, uint64_t version);
/* A paced connection drained after lagging: it gets its update with its class's next one. */
void srv_session_pace(srv_conn *c);
/* Makes sure codec `codec`'s SNAPSHOT pieces exist, then calls ready(c, 0), at once or after a
 * job on the pool, or ready(c, SRV_E*) when they cannot be made or the session closed. Holds a
 * reference to `c` meanwhile. */
void srv_session_codec_wait(srv_server *srv, srv_session *s, uint8_t codec, srv_conn *c,
                            void (*ready)(srv_conn *c, int status));

/* ---- a session on the wire (srv_session_wire.c) ---------------------------------------------- */

/* Target t as the protocol describes it (name, default, range, flags, drivers, deltas). */
proto_target_desc srv_session_target_desc(const srv_session *s, uint32_t t);
/* Encodes target t's SNAPSHOT part into s->target_parts[t] (grown as needed), and drops its
 * version 2 records (made again when needed): after a target is added or its settings change.
 * Returns 0 or a MESH_E* code. */
int srv_session_encode_target(srv_session *s, uint32_t t);
/* The version 1 pieces, the triangles of version 2 and their traversal, for a new session. */
int srv_session_encode_parts(srv_session *s);
/* Codec `codec`'s grid and pieces: attributes encoded here (any thread: touches only the
 * immutable mesh and the traversal's tables). Returns 0, MESH_EINVAL (that grid does not fit
 * the mesh) or MESH_ENOMEM. */
int srv_session_codec_init(const srv_session *s, uint8_t codec, srv_codec *out);
void srv_session_codec_fini(srv_codec *c);
/* Encodes the frames that bring a receiver from `since` to the current version, in `codec`:
 * new targets, changed settings, a WEIGHTS frame of every target changed since then and a
 * DELTA (version 1: every vertex in a 64-vertex block changed since then; version 2: exactly
 * the vertices changed). Every frame but the last carries MORE. Appends to `b` (nothing when
 * since == version). Returns 0 or a PROTO_E* code. */
int srv_session_encode_since(srv_session *s, uint64_t since, uint8_t flags, uint8_t codec, proto_buf *b);
/* The frames a joining viewer is sent as its SNAPSHOT, in `codec` (whose pieces must exist), in
 * order: a per-join head (frame header and mesh counts), the shared pieces (referenced), a
 * per-join state part. *parts is malloc'ed and holds one reference to each frame. Returns 0 or
 * MESH_ENOMEM. */
int srv_session_snapshot_parts(srv_session *s, uint8_t codec, srv_frame ***parts, uint32_t *count);
/* The frames a DELTA of these offsets, or a TARGET of target t, is in `codec`. */
int srv_session_encode_delta(srv_session *s, uint8_t codec, uint64_t version, uint8_t flags, uint32_t count,
                             const uint32_t *indices, const int32_t *q, proto_buf *b);
int srv_session_encode_target_add(srv_session *s, uint8_t codec, uint64_t version, uint8_t flags, uint32_t t,
                                  proto_buf *b);

/* Validates `op` against the session (indices in range and ordered, values finite and within
 * each target's range). Returns 0 or SRV_ERANGE with a reason; applies nothing on failure. */
int srv_session_check(const srv_session *s, const srv_op *op, char *err, size_t errlen);
/* Applies a checked op: state updated, version bumped, one frame encoded and fanned out to
 * every subscriber. Returns the new version, or 0 when out of memory (state unchanged). */
uint64_t srv_session_apply(srv_server *srv, srv_session *s, const srv_op *op);
/* Appends one target with its state (weight, range) and SNAPSHOT piece, created at `version`
 * (used by ADD_TARGET(S) and by restoring a checkpoint). Returns 0 or a MESH_E* code with the
 * state unchanged (the arrays may have grown). */
int srv_session_append_target(srv_session *s, const srv_new_target *t, uint64_t version);
/* Sets the sculpt offsets of `vertices` (NULL: every vertex) back to zero, as one op. Returns 0
 * with the new version and how many vertices changed, or an SRV_E* code with a reason. */
int srv_session_reset(srv_server *srv, srv_session *s, uint32_t author, const uint32_t *vertices,
                      uint32_t count, uint64_t *version, uint32_t *reset, char *err, size_t errlen);

/* ---- operation records and checkpoints as bytes (srv_record.c) ------------------------------ */

/* A decoded record: the op and the arrays it points into (owned). */
typedef struct srv_record_op {
  srv_op op;
  uint32_t *indices;
  float *values;
  int32_t *q;
  int16_t *wq;
  char *name;
  srv_new_target *added;
  srv_target meta;
  uint32_t one_index;
} srv_record_op;

/* Appends the record of `op` (applied with `before`) to b; *changed says how many vertices or
 * targets it changed. Returns 0 or SRV_EINTERNAL. */
int srv_record_encode_op(const srv_session *s, const srv_op *op, const srv_before *before, proto_buf *b,
                         uint32_t *changed);
/* Decodes a record against the session's current state (offset records are relative to it).
 * Returns 0 or SRV_EIO with a reason. */
int srv_record_decode_op(const srv_session *s, const uint8_t *p, size_t n, srv_record_op *r, char *err,
                         size_t errlen);
void srv_record_op_fini(srv_record_op *r);
/* A session's whole state at its version. Returns 0 or SRV_EINTERNAL. */
int srv_record_encode_checkpoint(const srv_session *s, proto_buf *b);
/* Loads a checkpoint into a session fresh from its stored mesh. Returns 0 or SRV_EIO. */
int srv_record_load_checkpoint(srv_session *s, const uint8_t *p, size_t n, char *err, size_t errlen);

/* ---- history: steps, undo, redo, revert (srv_history.c) ------------------------------------------ */

#define SRV_HISTORY_UNDO_DEPTH 64             /* undoable steps kept per author and session */
#define SRV_HISTORY_BYTES (16u << 20)         /* ... within this much memory per session (oldest go first) */
#define SRV_HISTORY_STEPS 100000              /* steps history.list shows from memory, per session */
#define SRV_CHECKPOINT_OPS 1000               /* a checkpoint after this many logged operations */
#define SRV_CHECKPOINT_BYTES (4u << 20)       /* ... or this many bytes of records */

typedef struct srv_history srv_history;

/* What an undo, redo or revert did. */
typedef struct srv_history_result {
  uint64_t version;          /* the session's version after it */
  uint64_t step;             /* the step undone or redone */
  uint64_t step_first_version, step_last_version;
  int cause;                 /* that step's srv_cause */
  uint64_t new_step;         /* the step this made */
  uint32_t restored, skipped; /* vertices and targets set back; left as others changed them */
} srv_history_result;

/* One step as history.list shows it. */
typedef struct srv_history_entry {
  uint64_t step;
  uint32_t author;
  int cause;
  double time;
  uint64_t first_version, last_version;
  uint32_t ops, changed, vertices, targets, targets_added;
  int undone, undoable;
  uint64_t undo_of;          /* UNDO / REDO: the step; REVERT: the version reverted to */
  uint32_t skipped;
} srv_history_entry;
typedef int (*srv_history_entry_cb)(const srv_history_entry *e, void *arg); /* nonzero stops */

int srv_history_init(srv_session *s);
void srv_history_fini(srv_session *s);
/* A step id for operations that belong together (a gesture, a playback, an undo). */
uint64_t srv_history_new_step_id(srv_session *s);
/* srv_server.on_applied: records the step and, with a store, the operation's record. */
void srv_history_on_applied(srv_server *srv, srv_session *s, const srv_op *op, uint64_t version,
                            const srv_before *before);
/* Queues a checkpoint of the session's state now (with a store). */
void srv_history_checkpoint(srv_server *srv, srv_session *s);
/* Each returns 0 with what it did, or SRV_ERANGE (nothing to undo/redo) / SRV_EINTERNAL with a
 * reason. */
int srv_history_undo(srv_server *srv, srv_session *s, uint32_t author, srv_history_result *out, char *err,
                     size_t errlen);
int srv_history_redo(srv_server *srv, srv_session *s, uint32_t author, srv_history_result *out, char *err,
                     size_t errlen);
/* Brings s to the state `old` holds (the same session restored at an earlier version) as one
 * new step of `author`. */
int srv_history_revert(srv_server *srv, srv_session *s, const srv_session *old, uint32_t author,
                       srv_history_result *out, char *err, size_t errlen);
/* Steps whose first version is below before_version, newest first, at most `limit`. Returns 1
 * when cb stopped it. */
int srv_history_list(const srv_session *s, uint64_t before_version, uint32_t limit, srv_history_entry_cb cb,
                     void *arg);
const char *srv_history_cause_name(int cause);
/* The newest version whose step began before time t (seconds since the epoch); 0 if none. */
uint64_t srv_history_version_before(const srv_session *s, double t);
/* Restore: the stored time of the operation replayed next (0 after the replay). */
void srv_history_set_replay_time(srv_session *s, double t);
/* Restore: a step found in the store before the replayed tail (summary only, not undoable). */
int srv_history_add_old_step(srv_session *s, const srv_history_entry *e);

/* ---- restoring from the store (srv_restore.c) -------------------------------------------------- */

/* Rebuilds stored session `sid` up to `up_to` (UINT64_MAX: all of it, with its clips) on any
 * thread: stored mesh, newest checkpoint at or below, the records after it replayed. With
 * with_history the steps are rebuilt (the replayed ones undoable). Returns 0 with a new
 * session (one reference, not in any server) or an SRV_E* code with a reason. */
int srv_restore_session(const char *db_path, int64_t sid, uint64_t up_to, int with_history, uint32_t max_vertices,
                        srv_session **out, char *err, size_t errlen);

/* ---- editing gestures (srv_gesture.c) ------------------------------------------------------- */

typedef struct srv_gesture_spec {
  uint32_t id;            /* 0: the server picks one */
  uint32_t author;        /* srv_authors id: its operations are one undo step of this author */
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
  /* Soft constraints: render vertex, weight (>= 0, relative to an edge), and where it is pulled
   * (3 per vertex; NAN: where it is at begin). soft_position may be NULL: all NAN. */
  const uint32_t *soft;
  const double *soft_weight, *soft_position;
  uint32_t soft_count;
  int sharp_border;       /* the plain solve: a kink where the region meets what holds it */
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
/* 1 when a drag of `author`'s is solving or waiting to be applied in the session. */
int srv_gesture_busy(const srv_session *s, uint32_t author);

/* ---- brush strokes (srv_brush.c) -------------------------------------------------------------- */

/* Queues a stroke (copied: `samples` are the points of its path) behind the session's other
 * strokes; answers `reply` with {"version", "moved_vertices", "dabs"} once applied, or with
 * SRV_ELIMIT when its dabs' work is over max_brush_work. Returns 0 or an SRV_E* code. */
int srv_brush_stroke(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                     uint32_t count, uint32_t author, srv_reply reply, char *err, size_t errlen);
/* The same for the next piece of a stroke connection `conn` sends as its pointer moves: with
 * `piece` set, the points continue that connection's last stroke of the same brush (its path,
 * its dab spacing, its starting shape), or begin a new one when there is none. `author` (an
 * srv_authors id) owns the resulting operations, one undo step per stroke; `conn` 0 is none. */
int srv_brush_stroke_piece(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                           uint32_t count, uint32_t author, uint32_t conn, int piece, srv_reply reply, char *err,
                           size_t errlen);
/* The session is closing: waiting strokes are answered with an error. */
void srv_brush_close_all(srv_session *s);
/* 1 when a stroke of `author`'s is queued or running in the session. */
int srv_brush_busy(const srv_session *s, uint32_t author);

/* What a stroke costs, before it runs (srv_brush_budget.c), in touched-vertex units: `touched`
 * bounds the vertices its dabs (and their mirror images) move, `scanned` counts the distance
 * checks, and `work` = touched + scanned / SRV_BRUSH_SCAN_RATIO is what max_brush_work bounds.
 * srv_brush.c passes the dabs a stroke's path places (dfm_stroke_dabs), not its points. */
#define SRV_BRUSH_SCAN_RATIO 100
typedef struct srv_brush_cost {
  uint64_t touched, scanned, work;
} srv_brush_cost;
/* The cost of `count` dabs over `n` positions (3 doubles each). 0 or SRV_EINTERNAL. */
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

/* Opens a session from a mesh file (read by the import worker, decoded on the thread pool) or
 * "demo" (generated on the pool), then calls `done` on the loop thread with 0 and the new
 * session added to the server, or an SRV_E* code and a reason. With `confined` (a client's
 * request) mesh_path is a name looked up beneath the mesh folders (srv_data) and the reasons
 * quote nothing of the file; without, it is the operator's path. Returns 0, or an SRV_E* code
 * with a reason in err (then `done` is never called). */
typedef void (*srv_open_cb)(srv_server *s, void *arg, int status, srv_session *session,
                            const char *err);
int srv_job_open_session(srv_server *s, const char *name, const char *mesh_path, int confined, srv_open_cb done,
                         void *arg, char *err, size_t errlen);

/* The current shape of a session as a file in `format` (OBJ or GLB), made on the thread pool
 * (the positions are captured now, on the loop thread): written as `name` beneath dir_fd
 * (srv_data_write), or, with dir_fd < 0, handed to `done` as bytes (which it then owns and
 * frees). `done` gets 0 or SRV_EIO with a reason. */
typedef void (*srv_export_cb)(srv_server *s, void *arg, int status, uint8_t *bytes, size_t len, const char *err);
int srv_job_export(srv_server *s, srv_session *session, mesh_format format, int dir_fd, const char *name,
                   srv_export_cb done, void *arg);

/* Rebuilds `session` as it was at `version` from the store, on the pool, once what is applied
 * now is committed; `done` gets it (borrowed for the call) or an error. With `checkpoint`, that
 * state is also stored as a checkpoint and the history before it folded into it (compaction).
 * Returns 0, or SRV_ERANGE / SRV_EINTERNAL with a reason (done is not called). */
typedef void (*srv_restore_cb)(srv_server *s, void *arg, int status, srv_session *session, const srv_session *old,
                               const char *err);
int srv_job_restore_at(srv_server *s, srv_session *session, uint64_t version, int checkpoint, srv_restore_cb done,
                       void *arg, char *err, size_t errlen);

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
/* Frees a call without answering it (someone else answers: a forwarded request). */
void srv_rpc_call_free(srv_rpc_call *call);
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

/* Runs `method` with `params` if the connection's grant allows it (srv_access.c). Either
 * answers now (srv_rpc_reply / srv_rpc_error) or keeps the call for an asynchronous answer.
 * `call` is owned by the callee from here on. */
void srv_methods_dispatch(srv_server *s, srv_rpc_call *call, const char *method, cJSON *params);
/* The method table: names and the role each needs (the tests read it). */
size_t srv_methods_count(void);
const char *srv_methods_name(size_t i);
srv_role srv_methods_role(size_t i);

/* srv_token_rpc.c: auth and the tokens. */
void srv_m_auth(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_token_create(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_token_list(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_token_revoke(srv_server *s, srv_rpc_call *call, cJSON *params);

/* srv_transfer_rpc.c: mesh.upload, session.export (into exports/, or a download in chunks). */
typedef struct srv_transfer srv_transfer;
void srv_m_mesh_upload(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_session_export(srv_server *s, srv_rpc_call *call, cJSON *params);
/* The connection closes: its unfinished upload is discarded, its kept download freed. */
void srv_transfer_release(srv_conn *c);

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

/* srv_history_rpc.c */
void srv_m_hello(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_undo(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_redo(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_list(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_revert(srv_server *s, srv_rpc_call *call, cJSON *params);
void srv_m_history_compact(srv_server *s, srv_rpc_call *call, cJSON *params);
/* Undo (redo = 0) or redo for `author`, answered through `reply` ({version, author, step, ...}
 * or an error). It runs once the author's strokes and drags already sent to the session have
 * applied, so an undo right after a stroke takes the stroke back, all of it. */
void srv_history_ask(srv_server *s, srv_session *x, uint32_t author, int redo, srv_reply reply);
/* on_edits_settled: runs what waited and may run now. */
void srv_history_settled(srv_server *s, srv_session *x);
/* The session is closing: what waited is answered with an error. */
void srv_history_close_waiting(srv_session *x);

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
/* srv_http.c: the page's files, and the upgrades to /ws/stream and /ws/rpc. */
extern const srv_conn_ops srv_http_ops;

/* ---- the server (srv_server.c) ------------------------------------------------------------------ */

int srv_server_start(srv_server *s, uv_loop_t *loop, const srv_config *cfg);
/* Stops accepting, says BYE to every client, closes everything; the loop then ends. */
void srv_server_stop(srv_server *s, const char *why);
void srv_server_fini(srv_server *s);

#endif
