/*
 * srv_history_wait.c — undo and redo in order with their author's edits: an undo or redo that
 * comes while that author's strokes or drags are still queued or solving waits, per session,
 * until they have applied, so an undo right after a stroke takes the stroke back, all of it.
 * Both ports ask here (srv_history_rpc.c for history.undo/redo, srv_stream.c for UNDO/REDO
 * edits); srv_server.c runs what waited when a session's edits settle, and fails it when the
 * session closes.
 *
 * DOES NOT undo anything itself (srv_history.c) or encode the answer (each port does, from the
 * srv_result it is given).
 */
#include <stdio.h>
#include <stdlib.h>

#include "proto.h"
#include "srv_error.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"
#include "srv_history.h"
#include "srv_gesture.h"
#include "srv_brush.h"
#include "srv_mask.h"

/* An undo or redo that came while its author's strokes or drags were still queued or solving:
 * it runs once they have applied, in the order requests came (per session). */
struct history_wait {
  struct history_wait *next;
  uint32_t author;
  int redo;
  srv_reply reply;
};

static void run_now(srv_server *s, srv_session *x, uint32_t author, int redo, srv_reply *reply) {
  srv_history_result res;
  char err[512];
  int rc;
  /* A mask step of the author's may be newer than the author's other steps (srv_mask.c). */
  if (redo ? srv_mask_redo_first(x, author) : srv_mask_undo_first(x, author))
    rc = srv_mask_undo(s, x, author, redo, &res, err, sizeof(err));
  else
    rc = redo ? srv_history_redo(s, x, author, &res, err, sizeof(err))
              : srv_history_undo(s, x, author, &res, err, sizeof(err));
  if (rc) srv_reply_error(reply, rc, err);
  else srv_reply_ok(reply, &(srv_result){.kind = SRV_RESULT_HISTORY, .history = {&res, author}});
}

static int author_busy(const srv_session *x, uint32_t author) {
  return srv_brush_busy(x, author) || srv_gesture_busy(x, author) || srv_mask_busy(x, author);
}

void srv_history_ask(srv_server *s, srv_session *x, uint32_t author, int redo, srv_reply reply) {
  if (!x->history) {
    char why[PROTO_MAX_NAME + 64];
    snprintf(why, sizeof(why), "session '%s' keeps no history", x->name);
    srv_reply_error(&reply, SRV_EINTERNAL, why);
    return;
  }
  /* A gesture in progress is a step not finished yet: what it has applied is undone, its next
   * drag starts a new step. Strokes and drags already sent come first. */
  int queued = 0;
  for (const struct history_wait *w = x->history_waiting; w; w = w->next) queued |= w->author == author;
  if (!queued && !author_busy(x, author)) {
    run_now(s, x, author, redo, &reply);
    return;
  }
  struct history_wait *w = calloc(1, sizeof(*w));
  if (!w) {
    srv_reply_error(&reply, SRV_EINTERNAL, "out of memory");
    return;
  }
  w->author = author;
  w->redo = redo;
  w->reply = reply;
  struct history_wait **pp = &x->history_waiting;
  while (*pp) pp = &(*pp)->next;
  *pp = w;
}

void srv_history_settled(srv_server *s, srv_session *x) {
  /* Each author's first waiting request, if the author has nothing left in flight; a later one
   * of the same author waits for the earlier. */
  for (int ran = 1; ran && x->history_waiting && !x->closed;) {
    ran = 0;
    for (struct history_wait **pp = &x->history_waiting; *pp; pp = &(*pp)->next) {
      struct history_wait *w = *pp;
      int earlier = 0;
      for (const struct history_wait *v = x->history_waiting; v != w; v = v->next) earlier |= v->author == w->author;
      if (earlier || author_busy(x, w->author)) continue;
      *pp = w->next;
      run_now(s, x, w->author, w->redo, &w->reply);
      free(w);
      ran = 1; /* the list changed: look again from the start */
      break;
    }
  }
}

void srv_history_close_waiting(srv_session *x) {
  while (x->history_waiting) {
    struct history_wait *w = x->history_waiting;
    x->history_waiting = w->next;
    srv_reply_error(&w->reply, SRV_ENOSESSION, "the session was closed");
    free(w);
  }
}
