/*
 * srv_face.h — live face input as one more author of weight changes: named values from a tracker
 * (VMC, Live Link Face) mapped onto a session's targets, applied at most `face_rate` times a
 * second per input, grouped into one history step per take, and kept in the store as coalesced
 * runs instead of one record per frame (docs/architecture.md, Live face input).
 *
 * The ports (ports/srv_face_udp.c) own the sockets and decode datagrams; they hand each value to
 * srv_face_set and each finished frame to srv_face_commit. Everything here runs on the loop.
 *
 * DOES NOT read sockets or decode packets (protocol/proto_osc.h, proto_livelink.h), nor answer
 * JSON-RPC (rpc/srv_face_rpc.c).
 */
#ifndef DEFORMD_SRV_FACE_H
#define DEFORMD_SRV_FACE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "srv_server.h"

typedef struct srv_face srv_face;
typedef struct srv_face_input srv_face_input;

#define SRV_FACE_MAX_NAMES 256 /* distinct names one frame may carry; a packet with more is dropped */
#define SRV_FACE_NAME 64       /* bytes of a source name, NUL included; longer names are unknown */
#define SRV_FACE_MAX_ENTRIES 4096 /* (source, target) pairs in one session's mapping */

typedef enum srv_face_kind { SRV_FACE_VMC = 1, SRV_FACE_LIVELINK = 2 } srv_face_kind;

/* What an input counts (face.list shows each). */
typedef enum srv_face_counter {
  SRV_FACE_PACKETS,       /* datagrams received from an accepted source */
  SRV_FACE_FRAMES,        /* frames finished (a VMC Apply, a Live Link datagram) */
  SRV_FACE_APPLIED,       /* weight changes applied (one operation each) */
  SRV_FACE_MERGED,        /* frames merged into a newer one before an apply (rate limit) */
  SRV_FACE_HELD,          /* frames that waited for the rate limit's next token (applied late) */
  SRV_FACE_MALFORMED,     /* datagrams dropped: truncated, bad type tags, wrong size or version */
  SRV_FACE_NONFINITE,     /* datagrams dropped: a NaN or Inf value */
  SRV_FACE_TOO_MANY,      /* datagrams dropped: more than SRV_FACE_MAX_NAMES names in one frame */
  SRV_FACE_REFUSED,       /* datagrams dropped: a source address neither loopback nor allowed */
  SRV_FACE_IGNORED,       /* OSC messages of other addresses (bones, root, status): skipped */
  SRV_FACE_UNKNOWN,       /* names no mapping entry or target takes (counted per frame applied) */
  SRV_FACE_NO_SESSION,    /* applies skipped: the input's session is not open here */
  SRV_FACE_COUNTERS
} srv_face_counter;

/* One input as face.list shows it. Strings are the input's (valid until srv_face_destroy). */
typedef struct srv_face_info {
  srv_face_kind kind;
  int port;
  const char *listen, *session, *author;
  uint32_t rate;
  uint64_t counts[SRV_FACE_COUNTERS];
  uint64_t take_step;          /* the history step of the take in progress (0: none) */
  uint64_t run_first_version;  /* the first version not yet stored as a run (0: none) */
  uint64_t runs_stored;        /* coalesced records handed to the store */
  /* The server's part of the latency, over the last SRV_FACE_LATENCY_SAMPLES frames applied
   * straight from a datagram: its receive callback to the op applied, its frame written to
   * every viewer (microseconds; latency_samples 0: none yet). */
  uint32_t latency_samples;
  double latency_p50_us, latency_p99_us, latency_max_us;
} srv_face_info;

#define SRV_FACE_LATENCY_SAMPLES 1024

/* The server's face state (srv->face), made at start. Returns 0 or UV_ENOMEM. */
int srv_face_create(srv_server *srv);
/* Stores every open run, ends every take and closes the inputs' timers (the loop frees them);
 * srv_server_stop calls it. */
void srv_face_shutdown(srv_server *srv);
/* Frees what srv_face_create made, after the loop has closed the timers (srv_server_fini). */
void srv_face_destroy(srv_server *srv);

/* A new input of `kind`, bound by its port at `listen`:`port`, driving the session named
 * `session`; its author is "vmc:PORT" or "livelink:PORT". Strings are copied. Returns the input
 * (owned by srv->face) or NULL with a reason. */
srv_face_input *srv_face_input_add(srv_server *srv, srv_face_kind kind, const char *listen, int port,
                                   const char *session, char *err, size_t errlen);
void srv_face_count(srv_face_input *in, srv_face_counter which);
/* The datagram being handed over was received at `ns` (uv_hrtime); 0 once it is done. A frame
 * it applies at once is timed from there (srv_face_info.latency_*). */
void srv_face_received(srv_face_input *in, uint64_t ns);
/* One value of the frame being built (name[0..len), newest wins per name). Returns 0, or -1
 * when the frame already has SRV_FACE_MAX_NAMES names (the caller drops the packet). */
int srv_face_set(srv_face_input *in, const char *name, size_t len, float value);
/* The frame being built is finished: merged into the pending one (each name's newest value),
 * applied now if the input's last apply was 1/rate ago or more, else at the next tick. */
void srv_face_commit(srv_face_input *in);
/* Forgets the frame being built (a packet that turned out malformed after some values). */
void srv_face_discard(srv_face_input *in);

/* srv_server.on_applied, before the history's: an operation that is not a face input's live
 * frame first stores the open runs on that session, so the store's versions stay contiguous. */
void srv_face_on_applied(srv_server *srv, srv_session *s, const srv_op *op, uint64_t version);

/* The inputs, for face.list: 0 .. count-1. */
uint32_t srv_face_input_count(const srv_server *srv);
void srv_face_input_info(const srv_server *srv, uint32_t i, srv_face_info *out);

/* A session's mapping from source names to targets (see docs/json-api.md face.map_set):
 * {"identity": bool, "presets": bool, "map": {SOURCE: TARGET | [{"target": T, "gain": g,
 * "offset": o}, ...]}}. Replaces the session's mapping (srv_session.face_map) and, with a store,
 * queues it as the session's face_maps row (the caller's answer waits for the commit); targets
 * are looked up by name at each apply (a target added later is found). Returns 0, SRV_EPARAMS
 * with a reason, or SRV_EINTERNAL (out of memory: the old mapping stays). */
int srv_face_map_set(srv_server *srv, srv_session *s, const cJSON *mapping, char *err, size_t errlen);
/* A stored mapping (the face_maps row's JSON text, srv_restore.c, any thread) becomes the
 * session's. Returns 0 or SRV_EIO with a reason. */
int srv_face_map_load(srv_session *s, const uint8_t *json, size_t len, char *err, size_t errlen);
/* --face-map FILE's mapping (the same JSON), for `sessions` (the two inputs' sessions) while
 * they have none of their own: a mapping set by face.map_set, stored, wins over it. Returns 0 or
 * SRV_EPARAMS / SRV_EINTERNAL with a reason. */
int srv_face_map_file(srv_server *srv, const cJSON *mapping, const char *const sessions[2], char *err, size_t errlen);
/* The mapping that drives the session as that JSON (its own, else the file's where it is an
 * input's session, else the default). Caller deletes it; NULL when out of memory. */
cJSON *srv_face_map_get(const srv_server *srv, const srv_session *s);

/* The default mapping's VRM 1.0 presets: preset i's name and its (target, gain) pairs; NULL
 * past the last. (Tests and docs read the table.) */
typedef struct srv_face_preset {
  const char *name;
  struct {
    const char *target;
    float gain;
  } to[4];
} srv_face_preset;
const srv_face_preset *srv_face_preset_at(uint32_t i);

#endif
