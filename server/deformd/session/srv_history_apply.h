/*
 * srv_history_apply.h — what a history step keeps of what it changed (its payload), and the
 * operations that apply a payload back: undo, redo and revert (srv_history_apply.c).
 * Internal to the history (srv_history.c); nothing else includes it.
 *
 * A new kind of payload (a mask, say) goes beside hist_offsets and hist_targets here, with its
 * own apply function beside shift_offsets / restore_targets, called from srv__history_apply.
 */
#ifndef DEFORMD_SRV_HISTORY_APPLY_H
#define DEFORMD_SRV_HISTORY_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "srv_op.h"
#include "srv_server.h"
#include "srv_session.h"

/* A step's sculpt offsets, ascending vertices: `before` is the value before the step first set
 * the vertex; after - before is the step's own change (merge_offsets in srv_history.c), which
 * undo takes off and redo puts back. */
typedef struct hist_offsets {
  uint32_t n, cap;
  uint32_t *idx;
  int32_t *before, *after; /* 3 each */
} hist_offsets;

typedef struct hist_targets { /* ascending targets: set values and settings */
  uint32_t n, cap;
  uint32_t *idx;
  srv_target *before, *after;
} hist_targets;

/* What an undo, redo or revert did: vertices and targets it set (restored), those it left as
 * they are (skipped), and of the restored vertices those someone changed since (overlapped). */
typedef struct hist_count {
  uint32_t restored, skipped, overlapped;
} hist_count;

/* Whether two targets have the same range, mute flag and drivers. */
int srv__history_same_settings(const srv_target *a, const srv_target *b);

/* Applies a payload backwards (undo) or forwards (redo; a revert's payload with `revert`) as
 * step `step` of `author` with `cause`, through srv_session_apply, counting into *n. The
 * payload's arrays are borrowed and read before any op applies (an op's history hook may drop
 * old payloads). Returns 0, or SRV_EINTERNAL with a reason (out of memory). */
int srv__history_apply(srv_server *srv, srv_session *s, const hist_offsets *o, const hist_targets *g, int forward,
                       int revert, uint32_t author, uint8_t cause, uint64_t step, hist_count *n, char *err,
                       size_t errlen);

#endif
