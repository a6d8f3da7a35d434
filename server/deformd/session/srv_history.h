/*
 * srv_history.h — history: steps, undo, redo, revert.
 */
#ifndef DEFORMD_SRV_HISTORY_H
#define DEFORMD_SRV_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "srv_reply.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"

typedef struct srv_history srv_history;

#define SRV_HISTORY_UNDO_DEPTH 100            /* default undo_depth: undoable steps per author and session */
#define SRV_HISTORY_BYTES (16u << 20)         /* ... within this much memory per session (oldest go first) */
#define SRV_HISTORY_STEPS 100000              /* steps history.list shows from memory, per session */
#define SRV_CHECKPOINT_OPS 1000               /* a checkpoint after this many logged operations */
#define SRV_CHECKPOINT_BYTES (4u << 20)       /* ... or this many bytes of records */

typedef struct srv_history srv_history;

/* What an undo, redo or revert did (an undo or redo answers it as SRV_RESULT_HISTORY). */
typedef struct srv_history_result {
  uint64_t version;          /* the session's version after it */
  uint64_t step;             /* the step undone or redone */
  uint64_t step_first_version, step_last_version;
  int cause;                 /* that step's srv_cause */
  uint64_t new_step;         /* the step this made */
  /* restored: vertices that took the step's own change back (or again) and targets set back;
   * skipped: targets left as others changed them since, and vertices left because the result
   * would leave the quantised offset range; overlapped: restored vertices that others changed
   * since (their change stays on top). */
  uint32_t restored, skipped, overlapped;
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
  int undo_of_cause;         /* UNDO / REDO: that step's cause (0 when it is no longer listed) */
} srv_history_entry;
typedef int (*srv_history_entry_cb)(const srv_history_entry *e, void *arg); /* nonzero stops */

int srv_history_init(srv_session *s);
void srv_history_fini(srv_session *s);
/* A step id for operations that belong together (a gesture, a playback, an undo). */
uint64_t srv_history_new_step_id(srv_session *s);
/* Restore: step ids continue above `id` (mask steps take theirs from this counter, srv_mask.c). */
void srv_history_reserve_step_ids(srv_session *s, uint64_t id);
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
/* How many steps per author and session stay undoable (the undo_depth setting), for every
 * session of the process; set once at start. */
void srv_history_set_undo_depth(uint32_t steps);
/* Restore, first: a stored step row (srv_store_read_steps), in step order. Returns 0 or
 * SRV_EINTERNAL. */
int srv_history_add_step_meta(srv_session *s, uint64_t step, uint64_t undo_of, uint32_t skipped, uint32_t author,
                              int cause);
/* Restore, after the checkpoint and the steps before it: the history stored with that
 * checkpoint (srv_history_encode). Returns 0 or SRV_EIO / SRV_EINTERNAL with a reason. */
int srv_history_load(srv_session *s, const uint8_t *p, size_t n, char *err, size_t errlen);
/* Restore, last: frees what only the restore needed. */
void srv_history_restore_done(srv_session *s);
/* Appends the history as a checkpoint keeps it: undo payloads, undone flags, redo stacks, step
 * numbers, the newest summaries. Returns 0 or SRV_EINTERNAL. */
int srv_history_encode(const srv_session *s, proto_buf *b);

/* srv_history_wait.c. Undo (redo = 0) or redo for `author`, answered through `reply` with
 * SRV_RESULT_HISTORY or an error. It runs once the author's strokes and drags already sent to
 * the session have applied, so an undo right after a stroke takes the stroke back, all of it. */
void srv_history_ask(srv_server *s, srv_session *x, uint32_t author, int redo, srv_reply reply);
/* on_edits_settled: runs what waited and may run now. */
void srv_history_settled(srv_server *s, srv_session *x);
/* The session is closing: what waited is answered with an error. */
void srv_history_close_waiting(srv_session *x);

#endif
