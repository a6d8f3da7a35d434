/*
 * srv_session.h — sessions: the mesh, its targets and live state, the server's table.
 */
#ifndef DEFORMD_SRV_SESSION_H
#define DEFORMD_SRV_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proto.h"
#include "proto2.h"
#include "mesh.h"
#include "srv_frame.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_op.h"

typedef struct srv_anim srv_anim;
typedef struct srv_gesture srv_gesture;
typedef struct srv_history srv_history;
typedef struct srv_masks srv_masks;

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
  srv_frame *attributes_e;   /* the same in the `entropy` capability's coding (§12.11) */
  srv_frame **targets;       /* one record per target, made when first needed */
  srv_frame **targets_e;     /* the same for `entropy` joins (target_cap entries too) */
  uint32_t target_cap;
  int job;                   /* a job is encoding `attributes`; joins wait in `waiting` */
  srv_conn **waiting;        /* waiting_count joins, each referenced (answered the last first) */
  uint32_t waiting_count, waiting_cap;
  void (*ready)(srv_conn *c, int status); /* what to tell each waiting join (srv_stream.c) */
} srv_codec;

typedef struct srv_gesture srv_gesture;

struct srv_session {
  int refs;                  /* the server's table holds one; each running job one more */
  int closed;                /* removed from the server: jobs finishing now apply nothing */
  char *name;
  mesh *mesh;                /* positions and triangles never change; targets are only added */
  mesh_topology topo;        /* welded topology of the base mesh (solves, brushes) */
  mesh_adjacency adj;        /* over topo's triangles */
  int64_t *mesh_order;       /* AMD's order of topo's vertices (dfm_mesh_order), for whole-mesh
                              * gestures; NULL until srv_job_gesture_prep's job is done (or below
                              * DFM_MESH_ORDER_MIN vertices); never changes once set */
  struct dfm_symbolic *mesh_symbolic; /* its symbolic analysis in that order (dfm_mesh_symbolic),
                              * set by the same job with mesh_order; never changes once set */
  struct dfm_proxy *proxy;   /* the multiresolution path's proxy (dfm_proxy_build): made by that
                              * job from DFM_MULTIRES_MIN vertices, or kept from the first gesture
                              * on the path; never changes once set */
  int prep_job;              /* that job: 0 none, 1 waiting for the one running, 2 running */
  mesh_stats stats;
  srv_target *targets;       /* per target: range, set value, mute, drivers */
  float offset_quantum;
  char up;                   /* 'y' or 'z': which file axis points up (viewers, exports); never changes */
  uint64_t version;
  float *weights;            /* target_count: the weights viewers apply (see srv_target) */
  uint64_t *weight_version;  /* target_count: version that last changed it */
  int32_t *offsets;          /* 3 * vertex_count quantised sculpt offsets */
  uint64_t *block_version;   /* per block of 64 vertices */
  uint64_t *vertex_version;  /* per vertex: what version 2 catch-ups and paced updates send */
  srv_frame *mesh_body;      /* SNAPSHOT pieces shared by every join: positions, triangles, UVs */
  srv_frame **target_parts;  /* ... and one per target */
  srv_frame **textures;      /* TEXTURE frames, once per join (srv_texture.c): MATERIALS, IMAGEs */
  uint32_t texture_count;
  uint32_t target_cap;
  uint64_t *target_version;  /* per target: the version that created it (0: from the file) */
  proto_trav trav;           /* the traversal of the triangles (version 2 bodies) */
  srv_frame *triangles2;     /* version 2's triangles piece: the bytes `trav` was built from */
  srv_frame *triangles2e;    /* the same bytes rANS-coded, for `entropy` joins (§12.11) */
  srv_codec *codecs[SRV_CODECS]; /* version 2 pieces per codec, made when first joined */
  struct srv_class *classes; /* subscribers by codec and rate (srv_fanout.c) */
  srv_conn *subscribers;     /* linked through their c->sub (srv_fanout.c) */
  uint32_t subscriber_count;
  uint64_t ops_applied;
  srv_gesture *gestures;     /* editing gestures in progress (srv_gesture.c) */
  uint32_t gesture_count;
  size_t gesture_bytes;      /* their estimated memory (the session's budget) */
  struct stroke *strokes, *strokes_tail; /* brush strokes waiting, in order (srv_brush.c) */
  uint32_t stroke_count;
  int brush_running;
  uint32_t brush_author;     /* whose stroke runs, while brush_running */
  struct history_wait *history_waiting; /* undo/redo waiting for their author's edits (srv_history_wait.c) */
  struct stroke_piece *pieces; /* where strokes sent in pieces stand, per connection (srv_brush.c) */
  struct srv_blend *blend;   /* blendshape solves: cached pin factors, the pending solve (srv_blend.c) */
  struct srv_anim *anim;     /* clips, player and recorder (srv_anim*.c) */
  struct srv_history *history; /* steps, undo and redo (srv_history.c) */
  struct srv_presence *presence; /* participants, cursors, cameras (srv_presence.c); never stored */
  void (*history_fini)(srv_session *s); /* set with `history`: frees it with the session */
  struct srv_masks *masks;   /* each author's mask, its steps and requests (srv_mask.c), or NULL */
  void (*masks_fini)(srv_session *s); /* set with `masks`: frees them with the session */
  struct srv_face_map *face_map; /* face.map_set's mapping (srv_face.c), or NULL: the default */
  void (*face_map_fini)(srv_session *s); /* set with `face_map`: frees it with the session */
  struct srv_texclips *texclips; /* animated texture clips (srv_texclip.c), or NULL */
  void (*texclips_fini)(srv_session *s); /* set with `texclips`: frees them with the session */
  int64_t store_id;          /* the store's id (0: not stored) */
  uint32_t base_targets;     /* targets the stored mesh has; later ones come from operations */
  int restoring;             /* replaying the store: on_applied records history, writes nothing */
  uint64_t retained_version; /* --history-days: history before this was folded (or is being) */
  struct srv_session *next;  /* server's session list */
};

/* Builds a session around `m` (takes ownership) and its encoded mesh part: triangles put in
 * walk order (mesh_order.c, and the corner rotation protocol version 2 gives them), the SNAPSHOT
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
/* Stored sessions that did not restore: listed as damaged with the reason, answered with
 * SRV_EDAMAGED, and a new session may not take the name until an owner closes it. */
void srv_session_mark_damaged(srv_server *srv, const char *name, int64_t store_id, const char *why);
/* Keeps `readable` (takes the reference) with the damaged session `name`, for session.export. */
void srv_session_damaged_readable(srv_server *srv, const char *name, srv_session *readable);
const srv_damaged *srv_session_find_damaged(const srv_server *srv, const char *name);
/* A name kept from reuse without being damaged (a copy another node of a cluster owns now). */
void srv_session_reserve_name(srv_server *srv, const char *name);
/* Forgets a damaged session (session.close deletes its rows). */
void srv_session_forget_damaged(srv_server *srv, const char *name);
int srv_session_name_taken(const srv_server *srv, const char *name);
/* Removes the session from the table: its viewers get BYE(SESSION_CLOSED) and are closed, what
 * is running on it stops (srv_server.on_session_close), and the table's reference goes. */
void srv_session_close(srv_server *srv, srv_session *s, const char *why);

/* Makes sure codec `codec`'s SNAPSHOT pieces exist, then calls ready(c, 0), at once or after a
 * job on the pool, or ready(c, SRV_E*) when they cannot be made or the session closed. Holds a
 * reference to `c` meanwhile. */
void srv_session_codec_wait(srv_server *srv, srv_session *s, uint8_t codec, srv_conn *c,
                            void (*ready)(srv_conn *c, int status));

#endif
