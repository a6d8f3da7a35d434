/*
 * srv_op.h — operation records (invariant 5 of docs/architecture.md): the only way session state changes
 * (the one exception, loading a checkpoint into a fresh session, is described in srv_session_op.c).
 */
#ifndef DEFORMD_SRV_OP_H
#define DEFORMD_SRV_OP_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "srv_server.h"

typedef struct srv_session srv_session;

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
  SRV_CAUSE_REVERT,          /* history.revert */
  SRV_CAUSE_MASK,            /* mask.*: a step of an author's mask (srv_mask.c), never an operation */
  SRV_CAUSE_FACE             /* a face input's frames (one step per take, srv_face.c) */
} srv_cause;

/* An operation record: who, what, parameters. Arrays are borrowed for the call. */
struct srv_op {
  srv_op_kind kind;
  uint32_t author; /* srv_authors id */
  uint8_t cause;   /* srv_cause */
  uint64_t step;   /* the undo step it belongs to (srv_history_step), or 0: a step of its own */
  uint8_t live;    /* a face input's frame: the store gets its take's coalesced run from srv_face.c
                    * instead of this record */
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

#endif
