/*
 * srv_anim.h — what the animation files of deformd share: a session's clips (srv_anim.c), the
 * player and recorder (srv_anim_play.c), PCA compression of a clip (srv_anim_compress.c), and
 * the anim.* JSON-RPC methods (srv_anim_rpc.c). The other session files have their own headers beside it.
 *
 * Clips come from three places: the keyframes of the session's mesh (MD2/MD3 frames, grouped by
 * the mesh core into named clips), glTF morph-weight animations (keys of target weights), and
 * recordings of the session's own states (anim.record_start / anim.record_stop). A frame clip
 * is streamed after PCA compression (anim.compress, GPU Gems 3 ch. 15): the mean and the kept
 * components become morph targets that every viewer receives once, and each animation frame is
 * then one WEIGHTS frame of K quantised weights. A weight clip streams its own target weights.
 *
 * Every weight change goes through srv_session_apply() as an operation, like any edit, so
 * versions, catch-ups and late joiners need nothing special.
 */
#ifndef DEFORMD_SRV_ANIM_H
#define DEFORMD_SRV_ANIM_H

#include <cjson/cJSON.h> /* the clip report, kept and stored as JSON */
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"

#define ANIM_TICK_MS 5
#define ANIM_MAX_FRAME_BYTES ((size_t)1 << 30) /* a clip evaluated for compression: F × 3V floats */

enum { CLIP_KEYFRAMES = 1, CLIP_WEIGHTS = 2, CLIP_RECORDED = 3 };

/* Sculpt offsets shared by consecutive recorded frames while they do not change. */
typedef struct anim_q {
  int refs;
  int32_t q[];
} anim_q;

typedef struct rec_frame {
  uint32_t target_count;
  float *weights;
  anim_q *offsets;
} rec_frame;

typedef struct srv_clip {
  char *name;
  int kind;
  float fps;              /* frames per second (keyframe and recorded clips) */
  uint32_t frame_count;   /* frames, or keys of a weight clip */
  uint32_t loop_frames;   /* KEYFRAMES: looping repeats only its last loop_frames frames (0: all) */
  int play_once;          /* KEYFRAMES: it never loops (Quake III's death animations) */
  const float *frames;    /* KEYFRAMES: into the mesh's frames */
  const mesh_clip *wclip; /* WEIGHTS: the mesh's clip */
  uint32_t wclip_targets; /* WEIGHTS: how many targets its keys cover */
  rec_frame *rec;         /* RECORDED: frame_count of them */
  mesh_target *rec_targets; /* RECORDED: the targets when the recording stopped (shallow) */
  uint32_t rec_target_count;
  /* After anim.compress: */
  int compressed, busy;
  uint32_t mean_target, first_component, components;
  float *frame_weights;   /* frame_count × components, each in [-1, 1] */
  uint8_t *frame_narrow;  /* frame_count: 1 where the frame streams 8-bit weights */
  cJSON *report;          /* the compression's report: JSON, as the store keeps it (owned) */
  struct srv_clip *next;
} srv_clip;

typedef struct anim_track {
  srv_clip *clip;
  double t;          /* seconds into the clip */
  int64_t shown;     /* the frame (or key) last streamed, -1 for none */
} anim_track;

typedef struct srv_anim {
  srv_clip *clips;
  int playing;
  anim_track cur, next; /* next.clip is set while crossfading into it */
  double fade_elapsed, fade_duration;
  double speed;
  int loop;
  uint64_t play_step;   /* the player's frames since anim.play: one history step */
  /* recording */
  int recording;
  char *rec_name;
  double rec_fps, rec_acc;
  uint32_t rec_max, rec_count, rec_cap;
  rec_frame *rec;
  anim_q *rec_q;
  uint64_t rec_q_version; /* the newest block version when rec_q was copied */
} srv_anim;

/* ---- clips (srv_anim.c) ---------------------------------------------------------------------- */

void srv_anim_q_unref(anim_q *q);
srv_clip *srv_anim_find_clip(const srv_anim *a, const char *name);
void srv_anim_add_clip(srv_anim *a, srv_clip *c); /* appended; the table owns it */
void srv_anim_clip_free(srv_clip *c);           /* a clip not (or no longer) in a table */
double srv_anim_clip_duration(const srv_clip *c);
/* The frame (or key) shown at time t. */
uint32_t srv_anim_clip_index(const srv_clip *c, double t);
/* The time at which frame (or key) `frame` of c starts. */
double srv_anim_clip_time(const srv_clip *c, uint32_t frame);

/* ---- the player and recorder (srv_anim_play.c) ----------------------------------------------- */

/* Each returns 0 or an SRV_E* code with a reason; nothing changes on failure. */
int srv_anim_play(srv_server *srv, srv_session *s, srv_clip *c, double speed, int loop, uint32_t frame, char *err,
                  size_t errlen);
void srv_anim_pause(srv_session *s);
void srv_anim_stop(srv_server *srv, srv_session *s);
/* Moves the clip playing (or paused) to time t (seconds, within its duration). */
int srv_anim_seek(srv_server *srv, srv_session *s, double t, char *err, size_t errlen);
/* Crossfades from the clip playing to c over `duration` seconds. */
int srv_anim_crossfade(srv_server *srv, srv_session *s, srv_clip *c, double duration, char *err, size_t errlen);
/* Starts recording the session's state at `fps` into a new clip `name` (at most max_frames). */
int srv_anim_record_start(srv_server *srv, srv_session *s, const char *name, double fps, uint32_t max_frames,
                          char *err, size_t errlen);
/* Stops the recording; the new clip joins the session's clips (*out). */
int srv_anim_record_stop(srv_session *s, srv_clip **out, char *err, size_t errlen);

/* ---- compression (srv_anim_compress.c) ------------------------------------------------------- */

typedef struct srv_anim_compress_spec {
  uint32_t components;  /* kept components, or 0: as many as max_error needs */
  double max_error_rel; /* relative to the bounding-box diagonal (components == 0) */
  int weight_bits;      /* 8: 8-bit frames where the budget allows; 16: always 16-bit */
  const char *prefix;   /* the new targets' names: "<prefix>.mean", "<prefix>.pc1", ... */
  uint32_t *region_of;  /* per vertex: its region (taken; NULL: one PCA over every vertex) */
  uint32_t region_count;
  uint32_t author;      /* srv_authors id of who asked */
} srv_anim_compress_spec;

/* Compresses clip c on the thread pool; `reply` gets SRV_RESULT_ANIM_COMPRESS, the clip, whose
 * report is the answer (docs/json-api.md anim.compress).
 * Returns 0 (answered later) or an SRV_E* code with a reason (the reply is untouched and
 * spec->region_of was freed). */
int srv_anim_compress(srv_server *srv, srv_session *s, srv_clip *c, srv_anim_compress_spec *spec, srv_reply reply,
                      char *err, size_t errlen);

/* Queues clip c's record (recorded frames, compressed state) for the store (srv_anim_compress.c). */
void srv_anim_store_clip(srv_server *srv, srv_session *s, const srv_clip *c);

/* ---- clip records (srv_record.c): what the store keeps of a clip ---------------------------- */

/* A recording's frames and a compression's results. Returns 0 or SRV_EINTERNAL. */
int srv_record_encode_clip(const srv_session *s, const srv_clip *c, proto_buf *b);
/* Adds the recorded clip, or sets the compressed state of the session's clip, `name`. Returns 0
 * or SRV_EIO with a reason. */
int srv_record_load_clip(srv_session *s, const char *name, const uint8_t *p, size_t n, char *err, size_t errlen);

/* ---- animation clips (srv_anim.c; the player in srv_anim_play.c, compression in
 *      srv_anim_compress.c, methods in srv_anim_rpc.c, shared types in srv_anim.h) ----------- */

/* Builds the session's clips from its mesh (keyframe clips and glTF weight clips). Called by
 * srv_session_create; srv_anim_fini frees them with the session. Returns 0 or MESH_ENOMEM. */
int srv_anim_init(srv_session *s);
void srv_anim_fini(srv_session *s);

/* ---- animation playback and recording (srv_anim_play.c) ------------------------------------ */

/* The session is closing: playback and recording stop. */
void srv_anim_close(srv_session *s);
/* The server is stopping: the animation timer closes. */
void srv_anim_shutdown(srv_server *srv);

/* ---- animation clips (srv_anim.c; the player in srv_anim_play.c, compression in
 *      srv_anim_compress.c, methods in srv_anim_rpc.c, shared types in srv_anim.h) ----------- */

/* Builds the session's clips from its mesh (keyframe clips and glTF weight clips). Called by
 * srv_session_create; srv_anim_fini frees them with the session. Returns 0 or MESH_ENOMEM. */
int srv_anim_init(srv_session *s);
void srv_anim_fini(srv_session *s);

/* ---- animation playback and recording (srv_anim_play.c) ------------------------------------ */

/* The session is closing: playback and recording stop. */
void srv_anim_close(srv_session *s);
/* The server is stopping: the animation timer closes. */
void srv_anim_shutdown(srv_server *srv);

#endif
