/*
 * srv_config.h — the server's settings (srv_config): defaults, the data directory, the administrator's
 * token. The command line and the config file that fill it are read by srv_options.h's table.
 */
#ifndef DEFORMD_SRV_CONFIG_H
#define DEFORMD_SRV_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"
#include "srv_log.h"

typedef struct srv_session_spec {
  char *name;
  char *mesh; /* a path, or "demo" */
  char up;    /* 'y' or 'z' (--up, the entry's "up"), or 0: the file's own, else 'y' */
} srv_session_spec;

typedef struct srv_config {
  char listen[256];          /* numeric addresses, comma-separated, or "localhost" (127.0.0.1 and,
                              * where the machine has IPv6, ::1) */
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
  uint32_t undo_depth;       /* steps per author and session that stay undoable, restarts included */
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
  /* Live face input (docs/operations.md, Face input): UDP, unauthenticated. */
  int vmc_port, livelink_port;   /* VMC (OSC) and Live Link Face inputs: -1 off (default), 0 any free port */
  char vmc_listen[64], livelink_listen[64]; /* the numeric address each binds (127.0.0.1) */
  char *vmc_session, *livelink_session;     /* the session each drives (NULL: "demo") */
  uint32_t face_rate;            /* weight applies per second per input, at most (60) */
  uint32_t face_idle_ms;         /* a pause this long ends a take: its history step and stored run (1000) */
  uint32_t face_flush_ms;        /* during a take, its run is stored at least this often (5000) */
  char **face_allow;             /* numeric source addresses accepted besides loopback */
  uint32_t face_allow_count;
  char *face_map;                /* a mapping file (JSON) for the inputs' sessions, read at start */
} srv_config;

/* Fills defaults. */
void srv_config_init(srv_config *c);
void srv_config_fini(srv_config *c);
/* --data DIR|none, --durability normal|full. Each returns 0 or an SRV_E* code. */
int srv_config_set_data(srv_config *c, const char *dir);
int srv_config_set_durability(srv_config *c, const char *name);
/* The store's directory: --data, else $XDG_DATA_HOME/deformd, else ~/.local/share/deformd;
 * NULL for "none". `buf` holds a default that is built. */
const char *srv_config_data_dir(const srv_config *c, char *buf, size_t len);
/* Adds a session to open at start, with its up axis ('y', 'z' or 0: the file's own). Copies both
 * strings. Returns 0 or SRV_EINTERNAL. */
int srv_config_add_session(srv_config *c, const char *name, const char *mesh, char up);
/* --mesh-dir PATH (copied). 0 or SRV_EINTERNAL. */
int srv_config_add_mesh_dir(srv_config *c, const char *path);
/* The administrator's token: replaces the one set (copied; the old copy is wiped). Reading it
 * from a file: the first line, at most PROTO_MAX_NAME bytes. Each returns 0 or SRV_EPARAMS with
 * a reason. */
int srv_config_set_admin_token(srv_config *c, const char *token, char *err, size_t errlen);
int srv_config_read_admin_token(srv_config *c, const char *path, char *err, size_t errlen);
/* Whether `addr` (a --listen value) is loopback only: every address of the list in 127.0.0.0/8,
 * ::1 or localhost. */
int srv_config_is_loopback(const char *addr);
#define SRV_MAX_LISTEN 8 /* addresses one --listen may name ("localhost" counts two) */
/* The --listen value as addresses (each at most 63 bytes; "localhost" gives 127.0.0.1 and ::1,
 * the second marked optional: a machine without IPv6 cannot bind it). Returns how many, or -1
 * when an entry is empty, too long, or past SRV_MAX_LISTEN. */
int srv_config_listen_addresses(const char *list, char out[SRV_MAX_LISTEN][64], int optional[SRV_MAX_LISTEN]);
/* Adds an address to face_allow (copied). 0 or SRV_EINTERNAL. */
int srv_config_add_face_allow(srv_config *c, const char *addr);
/* Sets a string option (copied). Returns 0 or SRV_EINTERNAL. */
int srv_config_set_string(char **field, const char *value);

#endif
