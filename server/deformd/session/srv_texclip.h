/*
 * srv_texclip.h — a session's animated texture clips (GPU Gems 3 ch. 15's texture PCA): made
 * from an uploaded image sequence on the thread pool, sent once per join as TEXCLIP frames,
 * played as TEXWEIGHTS frames on the clock of the vertex clip each one follows
 * (docs/json-api.md "Animated texture clips", docs/protocol.md §18).
 *
 * A texture clip follows one of the session's clips (anim.list): while the player shows that
 * clip at time t, the texture clip shows its frame floor(t · fps) (its last frame past its end);
 * during an anim.blend crossfade both clips' texture clips are listed, weighted 1 − α and α.
 * Texture weights are not operations: they never bump the session's version or reach the
 * history (the vertex weights of the same playback do), and a late joiner gets the latest frame.
 *
 * DOES NOT parse requests (rpc/srv_texclip_rpc.c) or decompose (server/solve/texpca.c, run from
 * here on the pool). Stored with the session (the store's texclips table, schema 5): the
 * TEXCLIP frame's bytes, the clip followed, the per-frame weights and the report.
 */
#ifndef DEFORMD_SRV_TEXCLIP_H
#define DEFORMD_SRV_TEXCLIP_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include "mesh_texpca.h"
#include "proto.h"
#include "texpca.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"

#define SRV_TEXCLIP_MAX_FRAMES 1000u
#define SRV_TEXCLIP_MAX_BYTES ((size_t)256 << 20) /* the decoded frames as floats (F × W × H × 12) */
#define SRV_TEXCLIP_MAX_CLIPS 32u                 /* per session */

typedef struct srv_texclip {
  char *name;
  uint32_t id;
  char *follows;            /* the session clip whose clock it plays on */
  float fps;
  mesh_texclip clip;
  struct srv_frame *frame;  /* its TEXCLIP frame, encoded once (shared by every join) */
  cJSON *report;            /* what texclip.upload answered */
  struct srv_texclip *next;
} srv_texclip;

/* What texclip.upload asks for. The arrays move into the job (the request's copies). */
typedef struct srv_texclip_spec {
  char *name, *follows;
  float fps;
  char **frames;            /* frame_count base64 strings of PNG or JPEG files (owned) */
  uint32_t frame_count;
  mesh_texclip_rect rects[MESH_TEXCLIP_MAX_WINDOWS - 1];
  texpca_budget budget[MESH_TEXCLIP_MAX_WINDOWS]; /* [0] the whole texture, [i] rects[i - 1] */
  uint32_t rect_count;
} srv_texclip_spec;

/* Frees what a spec still owns (after a failed start) and zeroes it. */
void srv_texclip_spec_fini(srv_texclip_spec *spec);

/* Starts decoding and compressing on the pool; answers `reply` with the clip (SRV_RESULT_TEXCLIP)
 * or an error. Returns 0 (the spec's arrays now the job's), or SRV_EEXIST, SRV_ENOCLIP,
 * SRV_ELIMIT, SRV_EINTERNAL with a reason (the spec is left to the caller). */
int srv_texclip_upload(srv_server *srv, srv_session *s, srv_texclip_spec *spec, srv_reply reply, char *err,
                       size_t errlen);

/* The demo session's texture clip (`deformd --demo`, srv_server.c): SRV_TEXCLIP_DEMO, following
 * "smile-frown" (mesh_demo_dress), its frames made by mesh_demo_texclip and compressed on the pool
 * with texclip.upload's default budgets and the cheek and brow windows; nobody is answered (the
 * log says what it made). Returns 0, or srv_texclip_upload's errors with a reason. */
#define SRV_TEXCLIP_DEMO "blush-wrinkles"
int srv_texclip_demo(srv_server *srv, srv_session *s, char *err, size_t errlen);
/* A stored texture clip (srv_store_read_texclips' body, srv_texclip.c's encoding) added to a
 * session being restored (on the pool: the session is nobody else's yet). Returns 0, or
 * SRV_EDAMAGED / SRV_EINTERNAL with a reason. */
int srv_texclip_load(srv_session *s, const char *name, const uint8_t *p, size_t n, char *err, size_t errlen);

/* The session's texture clips, in upload order (NULL: none). */
const srv_texclip *srv_texclip_first(const srv_session *s);

/* A joining connection granted "texclip": every clip's TEXCLIP frame, then the latest
 * TEXWEIGHTS. Returns 0 or SRV_EINTERNAL (its queue refused a frame). */
int srv_texclip_join(srv_session *s, struct srv_conn *c);

/* The player moved (srv_anim_play.c): sends a TEXWEIGHTS frame to every connection granted
 * "texclip" when what the texture clips show changed (and hands it to srv->on_texclip). */
void srv_texclip_show(srv_server *srv, srv_session *s);

/* A clip's stored body (what the store's texclips table and a relay's Redis keep, read back by
 * srv_texclip_load) appended to b. Returns 0 or SRV_EINTERNAL. */
int srv_texclip_encode(const srv_texclip *t, proto_buf *b);
/* The last TEXWEIGHTS frame shown (NULL: none yet). */
const struct srv_frame *srv_texclip_weights(const srv_session *s);
int srv_texclip_has(const srv_session *s, const char *name);

/* A relay's replica (cluster/srv_relay.c) follows its primary's texture clips: a clip's stored
 * body added (ignored when the replica has it already) and its TEXCLIP sent to the replica's
 * viewers granted "texclip"; a TEXWEIGHTS frame (header included) kept for late joiners and,
 * with `send`, sent to them. Each returns 0, or SRV_EDAMAGED / SRV_EINTERNAL with a reason. */
int srv_texclip_follow_clip(srv_session *s, const char *name, const uint8_t *p, size_t n, char *err, size_t errlen);
int srv_texclip_follow_weights(srv_session *s, const uint8_t *frame, size_t n, int send, char *err, size_t errlen);

#endif
