/*
 * srv_options.c — deformd's option table and the three readers made from it: the command line
 * (srv_options_parse_argv), the JSON config file (srv_config_load_text) and --help
 * (srv_options_usage), in the manner of Redis's standardConfig table (config.c).
 *
 * The table lists every setting once: its flag and/or config key, type, bounds, default and help
 * line. The generic types are read here by offset into srv_config; a row with behaviour of its
 * own points at a setter below the table. A flag that is refused (--token) has a row only so that
 * its refusal says why; --help never lists it.
 *
 * The config file is one JSON object; every key is optional, unknown keys are ignored, and the
 * bounded integers of "limits" are read from that nested object (deploy/deformd.json is an
 * example with every key). A token is never a command-line option (every user of the machine can
 * read /proc/PID/cmdline): the administrator's comes from DEFORMD_ADMIN_TOKEN (main.c),
 * --admin-token-file FILE or the file's "token".
 *
 * DOES NOT read anything on the loop thread (all of it runs before the loop starts), nor know what
 * a setting does once set: srv_config.h says that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "proto.h"
#include "mesh.h"
#include "srv_config.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_json_text.h"
#include "srv_options.h"

/* ---- setters of the rows with behaviour of their own (defined after the table) ---------------- */

static int cli_config(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_check_mesh(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_check_store(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_isolate(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_write_demo(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_help(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_demo(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_mesh(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_session(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_sessions(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_up(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_http_port(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_http_port(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_durability(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_durability(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_log_level(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_log_level(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_reserve(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_reserve(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_token_file(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int cli_token(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_token(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_mesh_dir(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_mesh_dirs(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_redis(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_redis(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int cli_face_port(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen);
static int key_face_port(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);
static int key_face_allow(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen);

/* ---- the table --------------------------------------------------------------------------------- */

#define FIELD(f) .offset = offsetof(srv_config, f), .size = sizeof(((srv_config *)0)->f)
/* A bounded integer with a flag and a key: the common row. */
#define INT_ROW(fl, k, a, g, f, lo, hi, d, h) \
  {.flag = fl, .key = k, .arg = a, .type = SRV_OPT_INT, .group = g, FIELD(f), .min = lo, .max = hi, .def = d, .help = h}
#define U32 4294967295.0

static const srv_option TABLE[] = {
    /* What to do instead of serving (main.c runs it). */
    {.flag = "--check-mesh", .arg = "FILE", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_MODE, .cli = cli_check_mesh,
     .help = "print a mesh's statistics as one JSON object (exit 2 if refused)"},
    {.flag = "--isolate", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_MODE, .cli = cli_isolate,
     .help = "with --check-mesh: parse the file in the import worker, with its limits"},
    {.flag = "--check-store", .arg = "DIR", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_MODE, .cli = cli_check_store,
     .help = "check a data directory's store, writing nothing (exit 0 sound, 1 not a store it can read, 2 damaged)"},
    {.flag = "--write-demo", .arg = "OUT.glb", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_MODE, .cli = cli_write_demo,
     .help = "write the bundled demo head (GLB or OBJ)"},
    {.flag = "--config", .arg = "FILE", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_MODE, .flags = SRV_OPT_EARLY,
     .cli = cli_config, .help = "the JSON config file, read before the other options, which override it"},
    {.flag = "--help", .alias = "-h", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_MODE, .cli = cli_help,
     .help = "print this and exit"},

    /* The server. */
    {.flag = "--listen", .key = "listen", .arg = "ADDR", .type = SRV_OPT_TEXT, .group = SRV_OPT_G_SERVER,
     FIELD(listen), .def = "localhost", .what = "numeric addresses, comma-separated",
     .help = "numeric addresses to listen on, comma-separated (e.g. 0.0.0.0,::); localhost: 127.0.0.1 and ::1"},
    INT_ROW("--stream-port", "stream_port", "N", SRV_OPT_G_SERVER, stream_port, 0, 65535, "7450",
            "binary stream port; 0: any free port"),
    INT_ROW("--rpc-port", "rpc_port", "N", SRV_OPT_G_SERVER, rpc_port, 0, 65535, "7451",
            "JSON-RPC port; 0: any free port"),
    {.flag = "--http-port", .key = "http_port", .arg = "N|off", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_SERVER,
     FIELD(http_port), .max = 65535, .def = "7452", .cli = cli_http_port, .set_key = key_http_port,
     .help = "the browser viewer (http://ADDR:N/?session=NAME) and its WebSockets /ws/stream and "
             "/ws/rpc; 0: any free port; off: none"},
    {.flag = "--demo", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_SERVER, .cli = cli_demo,
     .help = "open a session named 'demo' on the bundled demo head"},
    {.flag = "--mesh", .arg = "FILE", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_SERVER, .flags = SRV_OPT_REPEAT,
     .cli = cli_mesh, .help = "the mesh of the --session NAME that follows"},
    {.flag = "--up", .arg = "y|z", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_SERVER, .flags = SRV_OPT_REPEAT,
     .cli = cli_up, .help = "the up axis of the --session NAME that follows (default: the file's own where it "
                            "says, as an FBX file does, else y)"},
    {.flag = "--session", .key = "sessions", .arg = "NAME", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_SERVER,
     .flags = SRV_OPT_REPEAT, .cli = cli_session, .set_key = key_sessions,
     .help = "after --mesh FILE: open a session NAME on FILE at start; in the config file "
             "[{\"session\": NAME, \"mesh\": FILE or \"demo\", \"up\": \"y\" or \"z\" (optional)}, ...]"},
    {.flag = "--data", .key = "data", .arg = "DIR|none", .type = SRV_OPT_STRING, .group = SRV_OPT_G_SERVER,
     FIELD(data_dir), .min = 1, .max = 900, .what = "a directory path, or \"none\" (memory only)",
     .help = "where sessions and their history are kept (default $XDG_DATA_HOME/deformd, else "
             "~/.local/share/deformd); none: memory only, nothing survives a restart"},
    {.flag = "--durability", .key = "durability", .arg = "normal|full", .type = SRV_OPT_CUSTOM,
     .group = SRV_OPT_G_SERVER, FIELD(durability_full), .def = "normal", .cli = cli_durability,
     .set_key = key_durability,
     .help = "normal: a killed process loses nothing it acknowledged; full: neither does a "
             "power loss (an fsync per commit)"},
    {.flag = "--history-days", .key = "history_days", .arg = "N", .type = SRV_OPT_NUMBER, .group = SRV_OPT_G_SERVER,
     FIELD(history_days), .max = 1e6, .def = "0", .what = "a number of days >= 0 (0 keeps everything)",
     .help = "fold operations older than N days into a checkpoint; 0: keep all"},
    INT_ROW("--undo-depth", "undo_depth", "N", SRV_OPT_G_SERVER, undo_depth, 1, 100000, "100",
            "steps per author and session that stay undoable, across restarts"),
    {.flag = "--log-level", .key = "log_level", .arg = "L", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_SERVER,
     FIELD(log_level), .def = "info", .cli = cli_log_level, .set_key = key_log_level,
     .help = "error, warn, info or debug"},
    {.flag = "--reserve-mb", .key = "reserve_mb", .arg = "N|auto", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_SERVER,
     FIELD(reserve_mb), .max = 1048576, .def = "auto", .cli = cli_reserve, .set_key = key_reserve,
     .help = "heap kept written for gestures, so that a gesture's first touch of memory does not "
             "fault (auto: ~2.5 KiB per vertex of the largest session, at most 1 GiB; 0: none; "
             "in the config file -1 is auto)"},
    {.flag = "--import-worker-path", .key = "import_worker_path", .arg = "P", .type = SRV_OPT_STRING,
     .group = SRV_OPT_G_SERVER, FIELD(import_worker_path), .min = 1, .max = 4096, .what = "the path of a program",
     .help = "the program run as the import worker (default: this deformd)"},

    /* Access (docs/json-api.md, Security). */
    {.key = "token", .arg = "T", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_ACCESS, .set_key = key_token,
     .help = "the first administrator's token; also $DEFORMD_ADMIN_TOKEN (read, then removed from "
             "the environment) or --admin-token-file, never the command line; once any token "
             "exists, both ports require one"},
    {.flag = "--admin-token-file", .arg = "F", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_ACCESS, .cli = cli_token_file,
     .help = "the administrator's token from the first line of file F"},
    {.flag = "--token", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_ACCESS, .flags = SRV_OPT_REFUSED, .cli = cli_token,
     .help = "refused: see DEFORMD_ADMIN_TOKEN and --admin-token-file"},
    {.flag = "--insecure", .type = SRV_OPT_SWITCH, .group = SRV_OPT_G_ACCESS, FIELD(insecure),
     .help = "listen on another address than loopback without any token"},
    {.flag = "--tls-cert", .key = "tls_cert", .arg = "F", .type = SRV_OPT_STRING, .group = SRV_OPT_G_ACCESS,
     FIELD(tls_cert), .min = 1, .max = 4096, .what = "a file path",
     .help = "TLS on every port, with --tls-key: the PEM certificate chain"},
    {.flag = "--tls-key", .key = "tls_key", .arg = "F", .type = SRV_OPT_STRING, .group = SRV_OPT_G_ACCESS,
     FIELD(tls_key), .min = 1, .max = 4096, .what = "a file path", .help = "... and its PEM key"},

    /* Files clients may name (the data directory, see --data). */
    {.flag = "--mesh-dir", .key = "mesh_dirs", .arg = "PATH", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_FILES,
     .flags = SRV_OPT_REPEAT, .cli = cli_mesh_dir, .set_key = key_mesh_dirs,
     .help = "a read-only folder session.create also reads; in the config file an array"},
    {.flag = "--max-upload-mb", .key = "limits.max_upload_mb", .arg = "N", .type = SRV_OPT_INT,
     .group = SRV_OPT_G_FILES, FIELD(max_upload_mb), .min = 1, .max = 1048576, .below = SRV_OPT_BELOW_TAKEN,
     .def = "512", .help = "largest mesh.upload"},

    /* Many machines (docs/operations.md). */
    {.flag = "--redis", .key = "redis", .arg = "redis://HOST:PORT[/DB]", .type = SRV_OPT_CUSTOM,
     .group = SRV_OPT_G_CLUSTER, FIELD(redis), .min = 8, .max = 512, .cli = cli_redis, .set_key = key_redis,
     .help = "publish every session's frames to a Redis Stream and join the registry (a primary), "
             "or with --relay follow them"},
    {.flag = "--relay", .key = "relay", .type = SRV_OPT_SWITCH, .group = SRV_OPT_G_CLUSTER, FIELD(relay),
     .help = "own no session: serve viewers from Redis, forward edits and JSON-RPC calls to each "
             "session's primary (needs --redis)"},
    {.flag = "--node-id", .key = "node_id", .arg = "ID", .type = SRV_OPT_STRING, .group = SRV_OPT_G_CLUSTER,
     FIELD(node_id), .min = 1, .max = 80, .what = "a name of 1 to 80 bytes",
     .help = "this node's name in the registry (default ADVERTISE:STREAM_PORT)"},
    {.flag = "--advertise", .key = "advertise", .arg = "ADDR", .type = SRV_OPT_TEXT, .group = SRV_OPT_G_CLUSTER,
     FIELD(advertise), .what = "a numeric address",
     .help = "the numeric address other nodes and clients reach this one at (default: the "
             "--listen address)"},
    {.flag = "--snapshot-every", .key = "snapshot_every", .arg = "K", .type = SRV_OPT_INT, .group = SRV_OPT_G_CLUSTER,
     FIELD(snapshot_every), .min = 1, .max = 1e6, .below = SRV_OPT_BELOW_RAISED, .def = "100",
     .help = "store a session's snapshot after every K frames"},
    INT_ROW("--stream-maxlen", "stream_maxlen", "N", SRV_OPT_G_CLUSTER, stream_maxlen, 0, 1e9, NULL,
            "stream entries kept per session, about (default 10 x K, at least 1000)"),
    {.flag = "--lease-ms", .key = "lease_ms", .arg = "N", .type = SRV_OPT_INT, .group = SRV_OPT_G_CLUSTER,
     FIELD(lease_ms), .min = 300, .max = 3600000, .below = SRV_OPT_BELOW_RAISED, .def = "3000",
     .help = "the node's lease in the registry: a primary silent this long is 'lost' to relays"},
    {.flag = "--redis-timeout-ms", .key = "redis_timeout_ms", .arg = "N", .type = SRV_OPT_INT,
     .group = SRV_OPT_G_CLUSTER, FIELD(redis_timeout_ms), .min = 100, .max = 3600000,
     .below = SRV_OPT_BELOW_RAISED, .def = "5000",
     .help = "a Redis command unanswered this long means Redis stalled: the connection is dropped "
             "and made again"},
    INT_ROW("--replica-idle-ms", "replica_idle_ms", "N", SRV_OPT_G_CLUSTER, replica_idle_ms, 0, 86400000, "60000",
            "a relay loads a session when a viewer (or, with its primary lost, a read) first asks "
            "for it, and drops it once it has had no viewer this long; 0: keeps it"),

    /* Live face input (docs/operations.md, Face input): UDP on the loop, unauthenticated. */
    {.flag = "--vmc-port", .key = "vmc_port", .arg = "N|off", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_FACE,
     FIELD(vmc_port), .max = 65535, .def = "off", .cli = cli_face_port, .set_key = key_face_port,
     .help = "receive VMC (OSC over UDP: /VMC/Ext/Blend/Val, /VMC/Ext/Blend/Apply) on this UDP port; "
             "0: any free port; off: none"},
    {.flag = "--vmc-listen", .key = "vmc_listen", .arg = "ADDR", .type = SRV_OPT_TEXT, .group = SRV_OPT_G_FACE,
     FIELD(vmc_listen), .def = "127.0.0.1", .what = "a numeric address",
     .help = "the numeric address the VMC input binds; senders other than loopback need \"face_allow\""},
    {.flag = "--vmc-session", .key = "vmc_session", .arg = "NAME", .type = SRV_OPT_STRING, .group = SRV_OPT_G_FACE,
     FIELD(vmc_session), .min = 1, .max = PROTO_MAX_NAME, .what = "a session name of 1 to 255 bytes",
     .help = "the session the VMC input drives (default demo)"},
    {.flag = "--livelink-port", .key = "livelink_port", .arg = "N|off", .type = SRV_OPT_CUSTOM,
     .group = SRV_OPT_G_FACE, FIELD(livelink_port), .max = 65535, .def = "off", .cli = cli_face_port,
     .set_key = key_face_port,
     .help = "receive Live Link Face frames (UDP, packet version 6) on this port; 0: any free port; off: none"},
    {.flag = "--livelink-listen", .key = "livelink_listen", .arg = "ADDR", .type = SRV_OPT_TEXT,
     .group = SRV_OPT_G_FACE, FIELD(livelink_listen), .def = "127.0.0.1", .what = "a numeric address",
     .help = "the numeric address the Live Link input binds; senders other than loopback need \"face_allow\""},
    {.flag = "--livelink-session", .key = "livelink_session", .arg = "NAME", .type = SRV_OPT_STRING,
     .group = SRV_OPT_G_FACE, FIELD(livelink_session), .min = 1, .max = PROTO_MAX_NAME,
     .what = "a session name of 1 to 255 bytes", .help = "the session the Live Link input drives (default demo)"},
    {.key = "face_allow", .arg = "[ADDR, ...]", .type = SRV_OPT_CUSTOM, .group = SRV_OPT_G_FACE,
     .set_key = key_face_allow,
     .help = "numeric source addresses the face inputs accept besides loopback (UDP proves nothing: "
             "anyone who can send from one of them drives the session)"},
    {.flag = "--face-map", .key = "face_map", .arg = "FILE", .type = SRV_OPT_STRING, .group = SRV_OPT_G_FACE,
     FIELD(face_map), .min = 1, .max = 4096, .what = "a file path",
     .help = "a mapping file (JSON, docs/json-api.md face.map_set) for the inputs' sessions, read at start"},
    INT_ROW("--face-rate", "face_rate", "N", SRV_OPT_G_FACE, face_rate, 1, 1000, "60",
            "weight applies per second per input, at most; a faster source is merged (the newest value "
            "of each name lands at the next apply)"),
    INT_ROW("--face-idle-ms", "face_idle_ms", "N", SRV_OPT_G_FACE, face_idle_ms, 50, 3600000, "1000",
            "a pause this long ends a take: one history step per take, and its run stored"),
    INT_ROW("--face-flush-ms", "face_flush_ms", "N", SRV_OPT_G_FACE, face_flush_ms, 100, 3600000, "5000",
            "during a take its coalesced run is stored at least this often (what kill -9 can lose)"),

    /* Bounds: per connection, per request, per session. */
    INT_ROW("--soft-limit", "limits.soft_limit", "BYTES", SRV_OPT_G_LIMITS, soft_limit, 0, 1e12, "1048576",
            "per-connection unsent bytes before frames coalesce"),
    INT_ROW("--hard-limit", "limits.hard_limit", "BYTES", SRV_OPT_G_LIMITS, hard_limit, 0, 1e12, "268435456",
            "per-connection unsent bytes before a drop"),
    INT_ROW("--slow-timeout-ms", "limits.slow_timeout_ms", "N", SRV_OPT_G_LIMITS, slow_timeout_ms, 0, U32, "10000",
            "a connection lagging this long is dropped"),
    INT_ROW("--hello-timeout-ms", "limits.hello_timeout_ms", "N", SRV_OPT_G_LIMITS, hello_timeout_ms, 0, U32,
            "10000", "a stream connection must send HELLO within this, and a JSON-RPC one pass auth "
                     "when there is a token"),
    INT_ROW("--idle-timeout-ms", "limits.idle_timeout_ms", "N", SRV_OPT_G_LIMITS, idle_timeout_ms, 0, U32, "600000",
            "close connections silent this long with nothing in flight; 0: never"),
    INT_ROW("--max-unauth-input", "limits.max_unauth_input", "BYTES", SRV_OPT_G_LIMITS, max_unauth_input, 0, 1e12,
            "65536", "unfinished input held before HELLO/auth, and for viewers"),
    {.flag = "--max-input-mb", .key = "limits.max_input_mb", .arg = "N", .type = SRV_OPT_INT, .group = SRV_OPT_G_LIMITS,
     FIELD(max_input_total), .max = 1048576, .shift = 20, .def = "256",
     .help = "unfinished input held for all connections together"},
    INT_ROW("--max-connections", "limits.max_connections", "N", SRV_OPT_G_LIMITS, max_connections, 0, 1e6, "4096",
            "further connections are refused with a reason"),
    INT_ROW("--max-request", "limits.max_request", "BYTES", SRV_OPT_G_LIMITS, max_request, 0, 1e12, "67108864",
            "largest JSON-RPC request line"),
    INT_ROW("--max-frame", "limits.max_frame", "BYTES", SRV_OPT_G_LIMITS, max_frame, 0, U32, "67108864",
            "largest incoming binary frame"),
    INT_ROW(NULL, "limits.max_json_depth", "N", SRV_OPT_G_LIMITS, max_json_depth, 0, 1000, "64",
            "JSON-RPC requests nested deeper are refused"),
    {.flag = "--max-vertices", .key = "limits.max_vertices", .arg = "N", .type = SRV_OPT_INT, .group = SRV_OPT_G_LIMITS,
     FIELD(max_vertices), .min = 1, .max = U32, .below = SRV_OPT_BELOW_TAKEN, .def = "5000000",
     .help = "refuse meshes with more vertices"},
    INT_ROW(NULL, "limits.max_sessions", "N", SRV_OPT_G_LIMITS, max_sessions, 0, 1e6, "64",
            "session.create past this many sessions is refused"),
    INT_ROW(NULL, "limits.gesture_idle_ms", "N", SRV_OPT_G_LIMITS, gesture_idle_ms, 0, U32, "600000",
            "gestures not begun or dragged for this long end"),
    INT_ROW("--session-memory-mb", "limits.session_memory_mb", "N", SRV_OPT_G_LIMITS, session_memory_mb, 0, U32,
            "2048", "gestures' estimated memory per session; deform.begin past it is refused"),
    INT_ROW("--client-memory-mb", "limits.client_memory_mb", "N", SRV_OPT_G_LIMITS, client_memory_mb, 0, U32, "1024",
            "the same per connection that began them"),
    INT_ROW("--max-brush-work", "limits.max_brush_work", "N", SRV_OPT_G_LIMITS, max_brush_work, 0, 1e15, "50000000",
            "a brush stroke's work in touched vertices (samples x vertices each moves, + samples x "
            "vertices / 100 for the scans); more is refused (the default: 5 to 13 s of one core)"),
    INT_ROW("--max-file-mb", "limits.max_file_mb", "N", SRV_OPT_G_LIMITS, max_file_mb, 0, U32, "1024",
            "refuse mesh files larger than this; 0: no limit"),
    {.flag = "--import-memory-mb", .key = "limits.import_memory_mb", .arg = "N", .type = SRV_OPT_INT,
     .group = SRV_OPT_G_LIMITS, FIELD(import_memory_mb), .min = 1, .max = 1048576, .below = SRV_OPT_BELOW_KEPT,
     .def = "4096", .help = "memory the import worker may add to what it maps at start"},
    {.flag = "--import-seconds", .key = "limits.import_seconds", .arg = "N", .type = SRV_OPT_INT,
     .group = SRV_OPT_G_LIMITS, FIELD(import_seconds), .min = 1, .max = 86400, .below = SRV_OPT_BELOW_KEPT,
     .def = "60", .help = "CPU and wall-clock seconds the import worker may take"},
    {.flag = "--import-workers", .key = "limits.import_workers", .arg = "N", .type = SRV_OPT_INT,
     .group = SRV_OPT_G_LIMITS, FIELD(import_workers), .min = 1, .max = 1024, .below = SRV_OPT_BELOW_KEPT,
     .def = "4", .help = "import workers running at once; later imports wait"},
};

#define TABLE_LEN (sizeof(TABLE) / sizeof(TABLE[0]))

const srv_option *srv_options_table(size_t *count) {
  *count = TABLE_LEN;
  return TABLE;
}

const srv_option *srv_options_find_flag(const char *flag) {
  for (size_t i = 0; i < TABLE_LEN; i++)
    if ((TABLE[i].flag && strcmp(TABLE[i].flag, flag) == 0) || (TABLE[i].alias && strcmp(TABLE[i].alias, flag) == 0))
      return &TABLE[i];
  return NULL;
}

const srv_option *srv_options_find_key(const char *key) {
  for (size_t i = 0; i < TABLE_LEN; i++)
    if (TABLE[i].key && strcmp(TABLE[i].key, key) == 0) return &TABLE[i];
  return NULL;
}

/* ---- the generic types --------------------------------------------------------------------------- */

static void *field(srv_config *c, const srv_option *o) { return (char *)c + o->offset; }

/* Integer fields are 4 bytes (int, uint32_t) or 8 (size_t, uint64_t, int64_t); the values stored
 * here are never negative, so the unsigned store is the same bits in every one of them. */
static void store_int(srv_config *c, const srv_option *o, double v) {
  uint64_t x = (uint64_t)v << o->shift;
  if (o->size == sizeof(uint32_t)) *(uint32_t *)field(c, o) = (uint32_t)x;
  else *(uint64_t *)field(c, o) = x;
}

/* The name a config key is known by in refusals: the last part ("max_frame" of "limits.max_frame"),
 * as before there was a table. */
static const char *key_name(const srv_option *o) {
  const char *dot = strrchr(o->key, '.');
  return dot ? dot + 1 : o->key;
}

static int cli_int(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  char *end = NULL;
  double v = strtod(value, &end);
  if (!end || *end || !(v >= o->min) || v > o->max || v != (double)(long long)v) {
    snprintf(err, errlen, "%s needs an integer between %.0f and %.0f, not '%s'", o->flag, o->min, o->max, value);
    return SRV_EPARAMS;
  }
  store_int(cli->cfg, o, v);
  return 0;
}

static int key_int(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  double lo = o->below == SRV_OPT_BELOW_REFUSED ? o->min : 0, x = v->valuedouble;
  if (!cJSON_IsNumber(v) || x < lo || x > o->max || x != (double)(long long)x) {
    snprintf(err, errlen, "\"%s\" must be an integer between %.0f and %.0f", key_name(o), lo, o->max);
    return SRV_EPARAMS;
  }
  if (x < o->min && o->below == SRV_OPT_BELOW_KEPT) return 0;
  store_int(c, o, x < o->min && o->below == SRV_OPT_BELOW_RAISED ? o->min : x);
  return 0;
}

/* Whether a string's length fits the row: TEXT, shorter than its array; STRING, min to max. */
static int text_fits(const srv_option *o, const char *s) {
  size_t n = strlen(s);
  if (o->type == SRV_OPT_TEXT) return n < o->size;
  return n >= (size_t)o->min && n <= (size_t)o->max;
}

static int store_text(srv_config *c, const srv_option *o, const char *s) {
  if (o->type == SRV_OPT_TEXT) {
    snprintf(field(c, o), o->size, "%s", s);
    return 0;
  }
  return srv_config_set_string(field(c, o), s);
}

/* The generic reader of a flag's value, by the row's type. */
static int cli_generic(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  char *end = NULL;
  double v;
  switch (o->type) {
  case SRV_OPT_INT: return cli_int(cli, o, value, err, errlen);
  case SRV_OPT_NUMBER:
    v = strtod(value, &end);
    if (!end || *end || !(v >= o->min) || v > o->max) {
      snprintf(err, errlen, "%s needs %s, not '%s'", o->flag, o->what, value);
      return SRV_EPARAMS;
    }
    *(double *)field(cli->cfg, o) = v;
    return 0;
  case SRV_OPT_SWITCH: *(int *)field(cli->cfg, o) = 1; return 0;
  case SRV_OPT_TEXT:
  case SRV_OPT_STRING:
    if (!text_fits(o, value)) {
      snprintf(err, errlen, "%s takes %s, not '%s'", o->flag, o->what, value);
      return SRV_EPARAMS;
    }
    if (store_text(cli->cfg, o, value)) {
      snprintf(err, errlen, "out of memory");
      return SRV_EPARAMS;
    }
    return 0;
  case SRV_OPT_CUSTOM: break;
  }
  snprintf(err, errlen, "%s: no reader", o->flag); /* a row without its setter: a bug in the table */
  return SRV_EINTERNAL;
}

/* The generic reader of a config key's value, by the row's type. */
static int key_generic(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  switch (o->type) {
  case SRV_OPT_INT: return key_int(c, o, v, err, errlen);
  case SRV_OPT_NUMBER:
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= o->min) || v->valuedouble > o->max) {
      snprintf(err, errlen, "\"%s\" must be %s", key_name(o), o->what);
      return SRV_EPARAMS;
    }
    *(double *)field(c, o) = v->valuedouble;
    return 0;
  case SRV_OPT_SWITCH:
    if (!cJSON_IsBool(v)) {
      snprintf(err, errlen, "\"%s\" must be true or false", key_name(o));
      return SRV_EPARAMS;
    }
    *(int *)field(c, o) = cJSON_IsTrue(v);
    return 0;
  case SRV_OPT_TEXT:
  case SRV_OPT_STRING:
    if (!cJSON_IsString(v) || !text_fits(o, v->valuestring)) {
      snprintf(err, errlen, "\"%s\" must be %s", key_name(o), o->what);
      return SRV_EPARAMS;
    }
    if (store_text(c, o, v->valuestring)) {
      snprintf(err, errlen, "out of memory");
      return SRV_EPARAMS;
    }
    return 0;
  case SRV_OPT_CUSTOM: break;
  }
  snprintf(err, errlen, "\"%s\": no reader", o->key);
  return SRV_EINTERNAL;
}

/* ---- the setters ----------------------------------------------------------------------------------- */

static int cli_config(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o;
  return srv_config_load(cli->cfg, value, err, errlen);
}

static int cli_check_mesh(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o, (void)err, (void)errlen;
  cli->check_mesh = value;
  return 0;
}

static int cli_check_store(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o, (void)err, (void)errlen;
  cli->check_store = value;
  return 0;
}

static int cli_isolate(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o, (void)value, (void)err, (void)errlen;
  cli->isolate = 1;
  return 0;
}

static int cli_write_demo(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o, (void)err, (void)errlen;
  cli->write_demo = value;
  return 0;
}

static int cli_help(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)cli, (void)o, (void)value, (void)err, (void)errlen;
  return 1;
}

static int cli_demo(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o, (void)value;
  if (srv_config_add_session(cli->cfg, "demo", "demo", 0) == 0) return 0;
  snprintf(err, errlen, "out of memory");
  return SRV_EPARAMS;
}

static int cli_mesh(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o, (void)err, (void)errlen;
  cli->pending_mesh = value;
  return 0;
}

/* "y" or "z": an up axis (session.create's up). */
static int up_axis(const char *value) { return strcmp(value, "y") == 0 || strcmp(value, "z") == 0; }

static int cli_up(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o;
  if (!up_axis(value)) {
    snprintf(err, errlen, "--up takes y or z (the file's axis that points up), not '%s'", value);
    return SRV_EPARAMS;
  }
  cli->pending_up = value;
  return 0;
}

static int cli_session(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o;
  if (!cli->pending_mesh) {
    snprintf(err, errlen, "--session NAME must follow --mesh FILE");
    return SRV_EPARAMS;
  }
  if (!value[0] || strlen(value) > PROTO_MAX_NAME) {
    snprintf(err, errlen, "--session takes a name of 1 to %d bytes", PROTO_MAX_NAME);
    return SRV_EPARAMS;
  }
  if (srv_config_add_session(cli->cfg, value, cli->pending_mesh, cli->pending_up ? cli->pending_up[0] : 0)) {
    snprintf(err, errlen, "out of memory");
    return SRV_EPARAMS;
  }
  cli->pending_mesh = cli->pending_up = NULL;
  return 0;
}

static int key_sessions(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  (void)o;
  if (!cJSON_IsArray(v)) {
    snprintf(err, errlen, "\"sessions\" must be an array");
    return SRV_EPARAMS;
  }
  const cJSON *s;
  cJSON_ArrayForEach(s, v) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "session");
    const cJSON *mesh_path = cJSON_GetObjectItemCaseSensitive(s, "mesh");
    const cJSON *up = cJSON_GetObjectItemCaseSensitive(s, "up");
    if (!cJSON_IsString(name) || !cJSON_IsString(mesh_path) || !name->valuestring[0] ||
        strlen(name->valuestring) > PROTO_MAX_NAME) {
      snprintf(err, errlen, "each entry of \"sessions\" needs \"session\" (a name of 1 to %d bytes) and "
               "\"mesh\" strings", PROTO_MAX_NAME);
      return SRV_EPARAMS;
    }
    if (up && !(cJSON_IsString(up) && up_axis(up->valuestring))) {
      snprintf(err, errlen, "\"up\" in an entry of \"sessions\" must be \"y\" or \"z\" (the file's axis that "
               "points up)");
      return SRV_EPARAMS;
    }
    if (srv_config_add_session(c, name->valuestring, mesh_path->valuestring, up ? up->valuestring[0] : 0)) {
      snprintf(err, errlen, "out of memory");
      return SRV_EPARAMS;
    }
  }
  return 0;
}

static int cli_http_port(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  if (strcmp(value, "off") != 0) return cli_int(cli, o, value, err, errlen);
  cli->cfg->http_port = -1;
  return 0;
}

static int key_http_port(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  if (!cJSON_IsString(v) || strcmp(v->valuestring, "off") != 0) return key_int(c, o, v, err, errlen);
  c->http_port = -1;
  return 0;
}

static int cli_durability(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o;
  if (srv_config_set_durability(cli->cfg, value) == 0) return 0;
  snprintf(err, errlen, "--durability takes normal or full");
  return SRV_EPARAMS;
}

static int key_durability(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  (void)o;
  if (cJSON_IsString(v) && srv_config_set_durability(c, v->valuestring) == 0) return 0;
  snprintf(err, errlen, "\"durability\" must be \"normal\" or \"full\"");
  return SRV_EPARAMS;
}

static int cli_log_level(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o;
  if (srv_log_parse_level(value, &cli->cfg->log_level) == 0) return 0;
  snprintf(err, errlen, "--log-level takes error, warn, info or debug");
  return SRV_EPARAMS;
}

static int key_log_level(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  (void)o;
  if (cJSON_IsString(v) && srv_log_parse_level(v->valuestring, &c->log_level) == 0) return 0;
  snprintf(err, errlen, "\"log_level\" must be error, warn, info or debug");
  return SRV_EPARAMS;
}

static int cli_reserve(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  if (strcmp(value, "auto") != 0) return cli_int(cli, o, value, err, errlen);
  cli->cfg->reserve_mb = -1;
  return 0;
}

/* The file spells auto -1 (it had no string for it). */
static int key_reserve(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  double x = v->valuedouble;
  if (!cJSON_IsNumber(v) || x != (double)(long long)x || x < -1 || x > o->max) {
    snprintf(err, errlen, "\"reserve_mb\" must be -1 (automatic), 0 (none) or a size in MiB up to %.0f", o->max);
    return SRV_EPARAMS;
  }
  c->reserve_mb = (int64_t)x;
  return 0;
}

static int cli_token_file(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o;
  return srv_config_read_admin_token(cli->cfg, value, err, errlen);
}

static int cli_token(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)cli, (void)o, (void)value;
  snprintf(err, errlen, "--token is not accepted: a token on the command line is visible to every user of "
                        "this machine (/proc/PID/cmdline). Give the administrator's token in the environment "
                        "(DEFORMD_ADMIN_TOKEN) or in a file (--admin-token-file FILE)");
  return SRV_EPARAMS;
}

static int key_token(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  (void)o;
  if (cJSON_IsString(v) && srv_config_set_admin_token(c, v->valuestring, err, errlen) == 0) return 0;
  snprintf(err, errlen, "\"token\" (the administrator's) must be a string of 1 to %d bytes without control "
           "characters", PROTO_MAX_NAME);
  return SRV_EPARAMS;
}

static int cli_mesh_dir(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  (void)o;
  if (srv_config_add_mesh_dir(cli->cfg, value) == 0) return 0;
  snprintf(err, errlen, "out of memory");
  return SRV_EPARAMS;
}

static int key_mesh_dirs(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  (void)o;
  const cJSON *d;
  int ok = cJSON_IsArray(v);
  cJSON_ArrayForEach(d, v) ok = ok && cJSON_IsString(d) && srv_config_add_mesh_dir(c, d->valuestring) == 0;
  if (ok) return 0;
  snprintf(err, errlen, "\"mesh_dirs\" must be an array of folder paths");
  return SRV_EPARAMS;
}

static int redis_fits(const srv_option *o, const char *s) {
  return strncmp(s, "redis://", 8) == 0 && strlen(s) <= (size_t)o->max;
}

static int cli_redis(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  if (!redis_fits(o, value)) {
    snprintf(err, errlen, "--redis takes redis://HOST:PORT[/DB], not '%s'", value);
    return SRV_EPARAMS;
  }
  if (srv_config_set_string(&cli->cfg->redis, value) == 0) return 0;
  snprintf(err, errlen, "out of memory");
  return SRV_EPARAMS;
}

static int key_redis(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  if (!cJSON_IsString(v) || !redis_fits(o, v->valuestring)) {
    snprintf(err, errlen, "\"redis\" must be an address redis://HOST:PORT[/DB]");
    return SRV_EPARAMS;
  }
  if (srv_config_set_string(&c->redis, v->valuestring) == 0) return 0;
  snprintf(err, errlen, "out of memory");
  return SRV_EPARAMS;
}

static int cli_face_port(srv_cli *cli, const srv_option *o, const char *value, char *err, size_t errlen) {
  if (strcmp(value, "off") != 0) return cli_int(cli, o, value, err, errlen);
  *(int *)field(cli->cfg, o) = -1;
  return 0;
}

static int key_face_port(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  if (!cJSON_IsString(v) || strcmp(v->valuestring, "off") != 0) return key_int(c, o, v, err, errlen);
  *(int *)field(c, o) = -1;
  return 0;
}

static int key_face_allow(srv_config *c, const srv_option *o, const cJSON *v, char *err, size_t errlen) {
  (void)o;
  const cJSON *d;
  int ok = cJSON_IsArray(v);
  cJSON_ArrayForEach(d, v) ok = ok && cJSON_IsString(d) && d->valuestring[0] && strlen(d->valuestring) < 64 &&
                                srv_config_add_face_allow(c, d->valuestring) == 0;
  if (ok) return 0;
  snprintf(err, errlen, "\"face_allow\" must be an array of numeric addresses");
  return SRV_EPARAMS;
}

/* ---- the command line ------------------------------------------------------------------------------ */

/* One pass over argv: the SRV_OPT_EARLY rows when `early`, the others when not. */
/* A switch (a flag that takes no value) where a value was expected: `--check-mesh --isolate FILE`
 * means what `--check-mesh FILE --isolate` does, so the two are swapped in argv and the switch is
 * read first. (A file really named like a switch: write ./--isolate.) */
static const srv_option *switch_at(int argc, char **argv, int i) {
  const srv_option *o = i < argc ? srv_options_find_flag(argv[i]) : NULL;
  return o && !o->arg && !(o->flags & SRV_OPT_REFUSED) ? o : NULL;
}

static int parse_pass(srv_cli *cli, int argc, char **argv, int early, int *usage, char *err, size_t errlen) {
  for (int i = 1; i < argc; i++) {
    const srv_option *o = srv_options_find_flag(argv[i]);
    if (o && o->arg && switch_at(argc, argv, i + 1)) {
      char *tmp = argv[i];
      argv[i] = argv[i + 1];
      argv[i + 1] = tmp;
      o = srv_options_find_flag(argv[i]);
    }
    const char *value = o && o->arg ? (i + 1 < argc ? argv[i + 1] : NULL) : NULL;
    if (!o || (o->arg && !value)) {
      if (early) continue; /* the second pass says so */
      snprintf(err, errlen, "unknown or incomplete option '%s'", argv[i]);
      *usage = 1;
      return SRV_EPARAMS;
    }
    if (value) i++;
    if (!(o->flags & SRV_OPT_EARLY) != !early) continue;
    int rc = o->cli ? o->cli(cli, o, value, err, errlen) : cli_generic(cli, o, value, err, errlen);
    if (rc) return rc;
  }
  return 0;
}

/* What no single option can check: the options that go together. */
static int check_together(const srv_cli *cli, char *err, size_t errlen) {
  const srv_config *c = cli->cfg;
  if (cli->pending_mesh) snprintf(err, errlen, "--mesh %s needs --session NAME", cli->pending_mesh);
  else if (cli->pending_up) snprintf(err, errlen, "--up %s needs --mesh FILE --session NAME", cli->pending_up);
  else if (c->relay && !c->redis)
    snprintf(err, errlen, "--relay needs --redis redis://HOST:PORT[/DB] (what it relays)");
  else if (c->relay && c->session_count)
    snprintf(err, errlen, "a relay owns no session: --demo, --mesh and \"sessions\" belong on a primary");
  else if (!c->tls_cert != !c->tls_key) snprintf(err, errlen, "--tls-cert and --tls-key go together");
  else if (c->relay && (c->vmc_port >= 0 || c->livelink_port >= 0))
    snprintf(err, errlen, "a relay owns no session: --vmc-port and --livelink-port belong on a primary");
  else return 0;
  return SRV_EPARAMS;
}

int srv_options_parse_argv(srv_cli *cli, int argc, char **argv, int *usage, char *err, size_t errlen) {
  *usage = 0;
  int rc = parse_pass(cli, argc, argv, 1, usage, err, errlen);
  if (rc == 0) rc = parse_pass(cli, argc, argv, 0, usage, err, errlen);
  return rc ? rc : check_together(cli, err, errlen);
}

/* ---- --help ------------------------------------------------------------------------------------------ */

static const char *const GROUP_TITLE[SRV_OPT_G_COUNT] = {
    [SRV_OPT_G_MODE] = "instead of serving",
    [SRV_OPT_G_SERVER] = "server options",
    [SRV_OPT_G_ACCESS] = "access (docs/json-api.md, Security)",
    [SRV_OPT_G_FILES] = "files clients may name (the data directory, see --data)",
    [SRV_OPT_G_CLUSTER] = "many machines (docs/operations.md)",
    [SRV_OPT_G_FACE] = "live face input (docs/operations.md)",
    [SRV_OPT_G_LIMITS] = "bounds",
};

#define HELP_COLUMN 26
#define HELP_WIDTH 100

/* Prints `text` from column `col`, wrapped at HELP_WIDTH with continuation lines at HELP_COLUMN. */
static void usage_words(FILE *out, int col, const char *text) {
  for (const char *p = text; *p;) {
    size_t n = strcspn(p, " ");
    if (col > HELP_COLUMN && col + 1 + (int)n > HELP_WIDTH) col = fprintf(out, "\n%*s", HELP_COLUMN, "") - 1;
    else if (col > HELP_COLUMN) col += fprintf(out, " ");
    col += fprintf(out, "%.*s", (int)n, p);
    p += n + strspn(p + n, " ");
  }
}

/* One row: the flag (or, config file only, the key) and its value, the help line, whether it
 * repeats, then the default and the config key. */
static void usage_row(FILE *out, const srv_option *o) {
  char left[96], tail[160] = "";
  if (o->flag)
    snprintf(left, sizeof(left), "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->flag,
             o->arg ? " " : "", o->arg ? o->arg : "");
  else snprintf(left, sizeof(left), "\"%s\": %s", o->key, o->arg ? o->arg : "");
  if ((int)strlen(left) > HELP_COLUMN - 3) fprintf(out, "  %s\n%*s", left, HELP_COLUMN, "");
  else fprintf(out, "  %-*s ", HELP_COLUMN - 3, left);
  usage_words(out, HELP_COLUMN, o->help);
  fputc('\n', out);
  if (o->flags & SRV_OPT_REPEAT) snprintf(tail, sizeof(tail), "repeatable%s", o->def || o->key ? "; " : "");
  if (o->def) snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), "default %s", o->def);
  if (o->key && o->flag)
    snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), "%sconfig file \"%s\"", o->def ? "; " : "", o->key);
  if (tail[0]) fprintf(out, "%*s%s\n", HELP_COLUMN, "", tail);
}

void srv_options_usage(FILE *out) {
  fprintf(out, "usage: deformd [options]                  run the server\n"
               "       deformd --check-mesh [--isolate] FILE\n"
               "       deformd --write-demo OUT.glb\n");
  for (int g = 0; g < SRV_OPT_G_COUNT; g++) {
    fprintf(out, "\n%s:\n", GROUP_TITLE[g]);
    for (size_t i = 0; i < TABLE_LEN; i++)
      if (TABLE[i].group == (srv_opt_group)g && !(TABLE[i].flags & SRV_OPT_REFUSED)) usage_row(out, &TABLE[i]);
  }
  fprintf(out, "\nA setting with a flag and a config key takes the flag's value when both are given; a key\n"
               "limits.NAME is NAME in the config file's \"limits\" object.\n"
               "The chosen ports are printed on stdout as one line, stream_port=N rpc_port=M http_port=H\n"
               "(without http_port when it is off; then vmc_port=V and livelink_port=L for the face\n"
               "inputs that are on), once the sessions named by --demo and --session are open (or have\n"
               "failed to open).\n");
}

/* ---- the config file ----------------------------------------------------------------------------------- */

int srv_config_load(srv_config *c, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open config file '%s'", path);
    return SRV_EPARAMS;
  }
  char *text = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 4096) {
      if (cap > (1u << 20)) {
        fclose(f);
        free(text);
        snprintf(err, errlen, "config file '%s' is larger than 1 MiB", path);
        return SRV_EPARAMS;
      }
      cap = cap ? 2 * cap : 8192;
      char *g = realloc(text, cap + 1);
      if (!g) {
        fclose(f);
        free(text);
        snprintf(err, errlen, "out of memory");
        return SRV_EPARAMS;
      }
      text = g;
    }
    size_t n = fread(text + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  text[len] = '\0';
  char why[256];
  int rc = srv_config_load_text(c, text, len, why, sizeof(why));
  free(text);
  if (rc) snprintf(err, errlen, "config file '%s': %s", path, why);
  return rc;
}

/* The key's value in root, or in root's "limits" for "limits.NAME"; NULL if absent. */
static const cJSON *key_value(const cJSON *root, const cJSON *limits, const char *key) {
  if (strncmp(key, "limits.", 7) == 0) return limits ? cJSON_GetObjectItemCaseSensitive(limits, key + 7) : NULL;
  return cJSON_GetObjectItemCaseSensitive(root, key);
}

int srv_config_load_text(srv_config *c, const char *text, size_t len, char *err, size_t errlen) {
  /* Exact JSON, like every request: one value, UTF-8, RFC 8259 numbers, no NUL in a string. */
  srv_json_scan scan;
  char why[160];
  if (srv_json_check(text, len, 64, &scan, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "not valid JSON: %s", why);
    return SRV_EPARAMS;
  }
  if (scan.nul_anywhere) {
    snprintf(err, errlen, "a string contains a NUL character (\\u0000)");
    return SRV_EPARAMS;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  if (!cJSON_IsObject(root)) {
    snprintf(err, errlen, "%s", root ? "not a JSON object" : "out of memory");
    cJSON_Delete(root);
    return SRV_EPARAMS;
  }
  int rc = 0;
  const cJSON *limits = cJSON_GetObjectItemCaseSensitive(root, "limits");
  if (limits && !cJSON_IsObject(limits)) {
    snprintf(err, errlen, "\"limits\" must be an object");
    rc = SRV_EPARAMS;
  }
  for (size_t i = 0; i < TABLE_LEN && rc == 0; i++) {
    const srv_option *o = &TABLE[i];
    const cJSON *v = o->key ? key_value(root, limits, o->key) : NULL;
    if (v) rc = o->set_key ? o->set_key(c, o, v, err, errlen) : key_generic(c, o, v, err, errlen);
  }
  cJSON_Delete(root);
  return rc;
}
