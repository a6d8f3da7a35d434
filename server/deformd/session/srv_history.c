/*
 * srv_history.c — a session's history: every applied operation grouped into steps (one
 * weights.set, one gesture from begin to end, one brush stroke, one target creation, one blend
 * result, one undo ...), what each step changed (before and after, per vertex and per target),
 * per-author undo and redo, and the records the store keeps (srv_record.c).
 *
 * Undo is per author, as in Figma and Yjs's UndoManager: history.undo reverts the caller's
 * newest step that is not undone, as a new operation; redo re-applies the step the caller
 * undid last, until the caller makes a new step. Two rules:
 *   - sculpt offsets: each step keeps its own change per vertex (after - before, summed over
 *     its operations, in the quantised integers); undo subtracts that change from the offsets
 *     the vertices have now and redo adds it again. Later steps of others that overlap stay on
 *     top, the surface moves back continuously (no plateau where someone else worked since),
 *     and undo then redo gives back the same offsets bit for bit (srv_history_apply.c).
 *   - target settings and set values: a target that has another value now than the step left
 *     it with was changed by someone since: it keeps that value and counts as skipped. The
 *     comparison is on values, so undoing one's own newer step first never makes an older one
 *     "changed by someone else".
 * A gesture's change is a field like a stroke's: undo subtracts it as it is, ARAP's rotations
 * are not solved again (docs/architecture.md, "Undo").
 *
 * Memory: each step keeps its before/after values; the newest `undo_depth` undoable steps of
 * each author keep them (srv_history_set_undo_depth, the undo_depth setting), older steps only
 * their summary (history.list shows them, history.revert reaches them through the store).
 *
 * Restarts: what undo needs survives kill -9 and a clean stop alike. Each undo, redo and revert
 * stores a step row (what it acted on, what it skipped); each checkpoint stores the history as
 * it was (srv_history_encode: the payloads, undone flags, redo stacks, step numbers). A restore
 * loads the newest checkpoint's history, then replays the operations after it through
 * srv_history_on_applied, where an undo or redo step found in the step rows marks its step
 * undone (or not) and moves its author's redo stack as history.undo and .redo did.
 *
 * DOES NOT touch the store's file (srv_store.c), parse requests (srv_history_rpc.c) or build the
 * operations an undo, redo or revert applies (srv_history_apply.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "proto.h"
#include "mesh.h"
#include "srv_history.h"
#include "srv_error.h"
#include "srv_bytes.h"
#include "srv_log.h"
#include "srv_store.h"
#include "srv_author.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_record.h"
#include "srv_history_apply.h"

typedef struct srv_step {
  uint64_t id;
  uint32_t author;
  uint8_t cause;
  uint8_t undone;
  uint8_t has_payload;    /* 0: too old to undo (or a step undo never takes) */
  uint64_t undo_of;       /* UNDO / REDO: the step they act on */
  double time;            /* of its first operation */
  double last_time;       /* of its newest */
  uint32_t slider;        /* an EDIT of one weight: its target + 1 (consecutive ones merge) */
  uint64_t first_version, last_version;
  uint32_t ops, changed;   /* changed = vertices + targets, or (restored steps) what the store counted */
  uint32_t vertices, targets; /* what it changed, while its payload was built */
  uint32_t targets_added;
  uint32_t skipped;       /* UNDO / REDO / REVERT: vertices and targets left as others set them */
  hist_offsets off;
  hist_targets tg;
} srv_step;

/* A step row read back from the store (restore only). */
typedef struct step_meta {
  uint64_t step, undo_of;
  uint32_t skipped, author;
  uint8_t cause;
  uint8_t seen; /* its step was made again (or is made now, having no operations) */
} step_meta;

struct srv_history {
  srv_step *steps; /* ascending id */
  step_meta *meta; /* restore: the stored step rows, by step (freed when the restore ends) */
  uint32_t nmeta;
  uint32_t count, cap;
  uint64_t next_id;
  /* per author: the steps it undid, newest last (its redo stack) */
  struct redo {
    uint32_t author;
    uint64_t *ids;
    uint32_t n, cap;
  } *redo;
  uint32_t nredo;
  size_t payload_bytes; /* what the steps' before/after values take */
  double replay_time;   /* restore: the stored time of the operation being replayed (0: now) */
  /* checkpoints: what was logged since the last one */
  uint32_t ops_since_checkpoint;
  size_t bytes_since_checkpoint;
};

static uint32_t undo_depth = SRV_HISTORY_UNDO_DEPTH;

void srv_history_set_undo_depth(uint32_t steps) { undo_depth = steps ? steps : 1; }

static double now_s(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static size_t payload_size(const srv_step *st) {
  return (size_t)st->off.cap * (sizeof(uint32_t) + 24) + (size_t)st->tg.cap * (sizeof(uint32_t) + 2 * sizeof(srv_target));
}

static void step_drop_payload(srv_step *st) {
  free(st->off.idx);
  free(st->off.before);
  free(st->off.after);
  free(st->tg.idx);
  free(st->tg.before);
  free(st->tg.after);
  memset(&st->off, 0, sizeof(st->off));
  memset(&st->tg, 0, sizeof(st->tg));
  st->has_payload = 0;
}

void srv_history_fini(srv_session *s) {
  srv_history *h = s->history;
  if (!h) return;
  for (uint32_t i = 0; i < h->count; i++) step_drop_payload(&h->steps[i]);
  free(h->steps);
  for (uint32_t i = 0; i < h->nredo; i++) free(h->redo[i].ids);
  free(h->redo);
  free(h->meta);
  free(h);
  s->history = NULL;
}

int srv_history_init(srv_session *s) {
  s->history = calloc(1, sizeof(srv_history));
  if (!s->history) return MESH_ENOMEM;
  s->history->next_id = 1;
  s->history_fini = srv_history_fini;
  return 0;
}

static srv_step *find_step(const srv_history *h, uint64_t id) {
  uint32_t lo = 0, hi = h->count;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (h->steps[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < h->count && h->steps[lo].id == id ? &h->steps[lo] : NULL;
}

static struct redo *redo_of(srv_history *h, uint32_t author, int create);

static const step_meta *find_meta(const srv_history *h, uint64_t step) {
  uint32_t lo = 0, hi = h->nmeta;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (h->meta[mid].step < step) lo = mid + 1;
    else hi = mid;
  }
  return lo < h->nmeta && h->meta[lo].step == step ? &h->meta[lo] : NULL;
}

static srv_step *new_step(srv_history *h, uint64_t id, uint32_t author, uint8_t cause);

/* Restore: an undo or redo that changed nothing (everything it would have set, others had
 * changed) has no operation to replay, yet it marked its step and moved the redo stack. Its
 * row is made a step when the replay reaches a newer step id (undo and redo are made at once,
 * so nothing of theirs comes later), or at the end. */
static void made_before(srv_history *h, uint64_t id) {
  for (uint32_t i = 0; i < h->nmeta && h->meta[i].step < id; i++) {
    step_meta *m = &h->meta[i];
    if (m->seen || (m->cause != SRV_CAUSE_UNDO && m->cause != SRV_CAUSE_REDO)) continue;
    m->seen = 1;
    if (!find_step(h, m->step)) new_step(h, m->step, m->author, m->cause);
  }
}

/* Restore: a step of the store's made again. An undo or redo does to its step and its
 * author's redo stack what srv_history_undo/_redo did the first time. */
static void restored_step(srv_history *h, srv_step *st) {
  step_meta *m = (step_meta *)find_meta(h, st->id);
  if (!m) return;
  m->seen = 1;
  st->undo_of = m->undo_of;
  st->skipped = m->skipped;
  if (st->cause != SRV_CAUSE_UNDO && st->cause != SRV_CAUSE_REDO) return;
  srv_step *target = find_step(h, m->undo_of);
  struct redo *r = redo_of(h, st->author, st->cause == SRV_CAUSE_UNDO);
  if (st->cause == SRV_CAUSE_UNDO) {
    if (target) target->undone = 1;
    if (r && r->n == r->cap) {
      uint32_t cap = r->cap ? 2 * r->cap : 8;
      uint64_t *g = realloc(r->ids, sizeof(uint64_t) * cap);
      if (g) r->ids = g, r->cap = cap;
    }
    if (r && r->n < r->cap) r->ids[r->n++] = m->undo_of;
  } else {
    if (target) target->undone = 0;
    while (r && r->n && r->ids[r->n - 1] != m->undo_of) r->n--; /* (those redo skipped as gone) */
    if (r && r->n) r->n--;
  }
}

static srv_step *new_step(srv_history *h, uint64_t id, uint32_t author, uint8_t cause) {
  if (h->count >= SRV_HISTORY_STEPS) { /* the oldest tenth goes (summaries and payloads) */
    uint32_t drop = SRV_HISTORY_STEPS / 10;
    for (uint32_t i = 0; i < drop; i++) {
      h->payload_bytes -= payload_size(&h->steps[i]);
      step_drop_payload(&h->steps[i]);
    }
    memmove(h->steps, h->steps + drop, sizeof(srv_step) * (h->count - drop));
    h->count -= drop;
  }
  if (h->count == h->cap) {
    uint32_t cap = h->cap ? 2 * h->cap : 64;
    srv_step *g = realloc(h->steps, sizeof(*g) * cap);
    if (!g) return NULL;
    h->steps = g;
    h->cap = cap;
  }
  /* Ids are taken as a step's first operation applies, so a new step is nearly always the
   * newest; one that is not still goes where its id sorts (find_step searches by id). */
  uint32_t at = h->count;
  while (at > 0 && h->steps[at - 1].id > id) at--;
  memmove(h->steps + at + 1, h->steps + at, sizeof(srv_step) * (h->count - at));
  h->count++;
  srv_step *st = &h->steps[at];
  memset(st, 0, sizeof(*st));
  st->id = id;
  st->author = author;
  st->cause = cause;
  st->has_payload = cause != SRV_CAUSE_ANIM_PLAY && cause != SRV_CAUSE_ANIM_COMPRESS;
  st->time = h->replay_time > 0 ? h->replay_time : now_s();
  if (id >= h->next_id) h->next_id = id + 1;
  if (h->nmeta) restored_step(h, st);
  return st;
}

/* new_step, during a restore first making the undo and redo steps before it that changed
 * nothing (made_before). */
static srv_step *new_step_in_order(srv_history *h, uint64_t id, uint32_t author, uint8_t cause) {
  if (h->nmeta) made_before(h, id);
  return new_step(h, id, author, cause);
}

uint64_t srv_history_new_step_id(srv_session *s) { return s->history->next_id++; }

void srv_history_reserve_step_ids(srv_session *s, uint64_t id) {
  if (id >= s->history->next_id) s->history->next_id = id + 1;
}

void srv_history_set_replay_time(srv_session *s, double t) {
  if (s->history) s->history->replay_time = t;
}

static struct redo *redo_of(srv_history *h, uint32_t author, int create) {
  for (uint32_t i = 0; i < h->nredo; i++)
    if (h->redo[i].author == author) return &h->redo[i];
  if (!create) return NULL;
  struct redo *g = realloc(h->redo, sizeof(*g) * (h->nredo + 1));
  if (!g) return NULL;
  h->redo = g;
  memset(&h->redo[h->nredo], 0, sizeof(h->redo[0]));
  h->redo[h->nredo].author = author;
  return &h->redo[h->nredo++];
}

/* ---- payloads ---------------------------------------------------------------------------------- */

static int ensure_offsets(hist_offsets *o, uint32_t need) {
  if (need <= o->cap) return 0;
  uint32_t cap = o->cap ? o->cap : 64;
  while (cap < need) cap *= 2;
  uint32_t *i = realloc(o->idx, sizeof(uint32_t) * cap);
  if (i) o->idx = i;
  int32_t *b = realloc(o->before, sizeof(int32_t) * 3 * (size_t)cap);
  if (b) o->before = b;
  int32_t *a = realloc(o->after, sizeof(int32_t) * 3 * (size_t)cap);
  if (a) o->after = a;
  if (!i || !b || !a) return -1;
  o->cap = cap;
  return 0;
}

/* Adds a - b to what o holds (saturating: a step's own change stays a change of int32s). */
static void add_change(int32_t *o, const int32_t *a, const int32_t *b) {
  for (int c = 0; c < 3; c++) {
    int64_t v = (int64_t)o[c] + a[c] - b[c];
    o[c] = (int32_t)(v > INT32_MAX ? INT32_MAX : v < -INT32_MAX ? -INT32_MAX : v);
  }
}

/* Merges n ascending vertices (before values, after values) into o: a vertex seen before keeps
 * its first `before` and adds this change to its `after`, so that after - before is what the
 * step itself changed even where someone else's operation came between two of its own. */
static int merge_offsets(hist_offsets *o, const uint32_t *idx, const int32_t *before, const int32_t *after,
                         uint32_t n) {
  if (n == 0) return 0;
  if (ensure_offsets(o, o->n + n)) return -1;
  /* Merge from the back into the grown arrays, so nothing is copied twice. */
  uint32_t extra = 0;
  for (uint32_t i = 0, j = 0; i < n; i++) {
    while (j < o->n && o->idx[j] < idx[i]) j++;
    if (j == o->n || o->idx[j] != idx[i]) extra++;
  }
  int64_t a = (int64_t)o->n - 1, b = (int64_t)n - 1, w = (int64_t)(o->n + extra) - 1;
  while (b >= 0) {
    if (a >= 0 && o->idx[a] > idx[b]) {
      o->idx[w] = o->idx[a];
      memcpy(o->before + 3 * w, o->before + 3 * a, 12);
      memcpy(o->after + 3 * w, o->after + 3 * a, 12);
      a--;
    } else if (a >= 0 && o->idx[a] == idx[b]) {
      o->idx[w] = o->idx[a];
      memcpy(o->before + 3 * w, o->before + 3 * a, 12);
      memmove(o->after + 3 * w, o->after + 3 * a, 12);
      add_change(o->after + 3 * w, after + 3 * b, before + 3 * b);
      a--, b--;
    } else {
      o->idx[w] = idx[b];
      memcpy(o->before + 3 * w, before + 3 * b, 12);
      memcpy(o->after + 3 * w, after + 3 * b, 12);
      b--;
    }
    w--;
  }
  o->n += extra;
  return 0;
}

/* Records target t's settings before and after (the first before, the latest after). */
static int merge_target(hist_targets *g, uint32_t t, const srv_target *before, const srv_target *after) {
  uint32_t j = 0;
  while (j < g->n && g->idx[j] < t) j++;
  if (j < g->n && g->idx[j] == t) {
    g->after[j] = *after;
    return 0;
  }
  if (g->n == g->cap) {
    uint32_t cap = g->cap ? 2 * g->cap : 8;
    uint32_t *i = realloc(g->idx, sizeof(uint32_t) * cap);
    if (i) g->idx = i;
    srv_target *b = realloc(g->before, sizeof(srv_target) * cap);
    if (b) g->before = b;
    srv_target *a = realloc(g->after, sizeof(srv_target) * cap);
    if (a) g->after = a;
    if (!i || !b || !a) return -1;
    g->cap = cap;
  }
  memmove(g->idx + j + 1, g->idx + j, sizeof(uint32_t) * (g->n - j));
  memmove(g->before + j + 1, g->before + j, sizeof(srv_target) * (g->n - j));
  memmove(g->after + j + 1, g->after + j, sizeof(srv_target) * (g->n - j));
  g->idx[j] = t;
  g->before[j] = *before;
  g->after[j] = *after;
  g->n++;
  return 0;
}

/* Adds what `op` changed (before: as captured by srv_session_apply; after: the session now). */
static int add_payload(srv_step *st, const srv_session *s, const srv_op *op, const srv_before *b) {
  switch (op->kind) {
    case SRV_OP_SET_OFFSETS:
      return merge_offsets(&st->off, op->indices, b->q, op->q, op->count);
    case SRV_OP_ADD_TARGET: { /* the sculpt moved into a target at weight 1: both are undone */
      uint32_t t = b->target_count;
      const mesh_target *mt = &s->mesh->targets[t];
      int32_t *zero = calloc(3 * ((size_t)mt->count + 1), sizeof(int32_t));
      int rc = zero ? merge_offsets(&st->off, mt->indices, b->q, zero, mt->count) : -1;
      free(zero);
      srv_target before = s->targets[t];
      before.value = 0.0f;
      if (rc == 0) rc = merge_target(&st->tg, t, &before, &s->targets[t]);
      st->targets_added++;
      return rc;
    }
    case SRV_OP_SET_WEIGHTS:
    case SRV_OP_SET_WEIGHTS_QRUN:
      for (uint32_t i = 0; i < op->count; i++) {
        uint32_t t = op->kind == SRV_OP_SET_WEIGHTS ? op->indices[i] : op->first + i;
        srv_target before = s->targets[t];
        before.value = b->values[i];
        if (merge_target(&st->tg, t, &before, &s->targets[t])) return -1;
      }
      return 0;
    case SRV_OP_SET_TARGET_META:
      return merge_target(&st->tg, op->indices[0], b->meta, &s->targets[op->indices[0]]);
    case SRV_OP_ADD_TARGETS:
      st->targets_added += op->count;
      return 0;
  }
  return 0;
}

/* Keeps the payloads of the newest `undo_depth` undoable steps of `author`. */
static void trim_payloads(srv_history *h, uint32_t author) {
  uint32_t kept = 0;
  for (uint32_t i = h->count; i-- > 0;) {
    srv_step *st = &h->steps[i];
    if (st->author != author || !st->has_payload) continue;
    if (st->cause == SRV_CAUSE_UNDO || st->cause == SRV_CAUSE_REDO || ++kept > undo_depth) {
      /* (undo never takes undo/redo steps: redo re-applies the step itself) */
      h->payload_bytes -= payload_size(st);
      step_drop_payload(st);
    }
  }
}

/* ---- the hook ---------------------------------------------------------------------------------- */

static void log_op(srv_server *srv, srv_session *s, const srv_op *op, const srv_step *st, uint64_t version,
                   const srv_before *b) {
  proto_buf rec;
  proto_buf_init(&rec);
  uint32_t changed = 0;
  if (srv_record_encode_op(s, op, b, &rec, &changed) != 0) {
    srv_log(SRV_LOG_ERROR, "session %s: cannot encode version %llu for the store (out of memory)", s->name,
            (unsigned long long)version);
    proto_buf_fini(&rec);
    return;
  }
  srv_store_op so = {version, version, st->id, op->author, st->time, st->cause, changed, rec.data, rec.len};
  if (srv_store_put_op(srv->store, s->store_id, &so) != 0)
    srv_log(SRV_LOG_ERROR, "session %s: cannot queue version %llu for the store (out of memory)", s->name,
            (unsigned long long)version);
  srv_history *h = s->history;
  h->ops_since_checkpoint++;
  h->bytes_since_checkpoint += rec.len;
  proto_buf_fini(&rec);
  if (h->ops_since_checkpoint >= SRV_CHECKPOINT_OPS || h->bytes_since_checkpoint >= SRV_CHECKPOINT_BYTES)
    srv_history_checkpoint(srv, s);
}

void srv_history_checkpoint(srv_server *srv, srv_session *s) {
  if (!srv->store || !s->store_id) return;
  proto_buf cp, hist;
  proto_buf_init(&cp);
  proto_buf_init(&hist);
  if (srv_record_encode_checkpoint(s, &cp) == 0 && srv_history_encode(s, &hist) == 0 &&
      srv_store_put_checkpoint_history(srv->store, s->store_id, s->version, cp.data, cp.len, hist.data, hist.len) == 0) {
    s->history->ops_since_checkpoint = 0;
    s->history->bytes_since_checkpoint = 0;
  } else {
    srv_log(SRV_LOG_WARN, "session %s: cannot write a checkpoint (out of memory); restart replays more", s->name);
  }
  proto_buf_fini(&cp);
  proto_buf_fini(&hist);
}

void srv_history_on_applied(srv_server *srv, srv_session *s, const srv_op *op, uint64_t version,
                            const srv_before *b) {
  srv_history *h = s->history;
  if (!h) return;
  srv_step *st = op->step ? find_step(h, op->step) : NULL;
  /* A slider dragged in a viewer is one binary EDIT per mouse move: consecutive edits of the
   * same one weight by the same author, less than a second apart, are one step. */
  uint32_t slider = op->cause == SRV_CAUSE_EDIT && op->kind == SRV_OP_SET_WEIGHTS && op->count == 1 ? op->indices[0] + 1 : 0;
  if (!st && slider && h->count) {
    srv_step *last = &h->steps[h->count - 1];
    double t = h->replay_time > 0 ? h->replay_time : now_s();
    if (last->slider == slider && last->author == op->author && !last->undone && t - last->last_time < 1.0) st = last;
  }
  if (!st) st = new_step_in_order(h, op->step ? op->step : h->next_id, op->author, op->cause);
  if (st && st->ops == 0) st->slider = slider;
  if (!st) {
    srv_log(SRV_LOG_WARN, "session %s: version %llu is not in the history (out of memory)", s->name,
            (unsigned long long)version);
  } else {
    if (st->ops == 0) st->first_version = version;
    st->last_version = version;
    st->last_time = h->replay_time > 0 ? h->replay_time : now_s();
    st->ops++;
    size_t had = payload_size(st);
    if (st->has_payload && add_payload(st, s, op, b) != 0) {
      h->payload_bytes -= had;
      had = 0;
      step_drop_payload(st);
      srv_log(SRV_LOG_WARN, "session %s: step %llu cannot be undone (out of memory)", s->name,
              (unsigned long long)st->id);
    }
    if (st->has_payload) {
      st->vertices = st->off.n;
      st->targets = st->tg.n;
    } else if (op->kind == SRV_OP_SET_OFFSETS) {
      st->vertices += op->count; /* (an upper bound: a vertex may repeat) */
    } else if (op->kind == SRV_OP_SET_WEIGHTS || op->kind == SRV_OP_SET_WEIGHTS_QRUN) {
      st->targets += op->count;
    }
    st->changed = st->vertices + st->targets + (op->kind == SRV_OP_ADD_TARGETS ? op->count : 0);
    if (op->cause != SRV_CAUSE_UNDO && op->cause != SRV_CAUSE_REDO && op->cause != SRV_CAUSE_ANIM_PLAY &&
        op->author != SRV_AUTHOR_SERVER) {
      struct redo *r = redo_of(h, op->author, 0); /* a new step of one's own ends one's redo */
      if (r) r->n = 0;
    }
    h->payload_bytes += payload_size(st) - had;
    if (st->ops == 1 && st->has_payload) trim_payloads(h, op->author);
    /* The oldest payloads go first once the session's budget is spent. */
    for (uint32_t i = 0; i < h->count && h->payload_bytes > SRV_HISTORY_BYTES; i++)
      if (&h->steps[i] != st && h->steps[i].has_payload) {
        h->payload_bytes -= payload_size(&h->steps[i]);
        step_drop_payload(&h->steps[i]);
      }
  }
  /* A face input's live frame is not a record: srv_face.c stores its take as coalesced runs. */
  if (srv->store && s->store_id && !s->restoring && st && !op->live) log_op(srv, s, op, st, version, b);
}

/* ---- undo, redo, revert --------------------------------------------------------------------------- */

/* What an undo, redo or revert acted on, for the next start (srv_history_add_step_meta). */
static void put_step_row(srv_server *srv, srv_session *s, const srv_step *made) {
  if (!made || !srv->store || !s->store_id) return;
  if (srv_store_put_step(srv->store, s->store_id, made->id, made->undo_of, made->skipped, made->author, made->cause) !=
      0)
    srv_log(SRV_LOG_WARN, "session %s: step %llu is not stored (out of memory); a restart lists it without what it "
            "undid", s->name, (unsigned long long)made->id);
}

static void fill_result(srv_history_result *r, const srv_session *s, const srv_step *done, const srv_step *made,
                        const hist_count *n) {
  memset(r, 0, sizeof(*r));
  r->version = s->version;
  r->step = done ? done->id : 0;
  r->step_first_version = done ? done->first_version : 0;
  r->step_last_version = done ? done->last_version : 0;
  r->cause = done ? done->cause : 0;
  r->new_step = made ? made->id : 0;
  r->restored = n->restored;
  r->skipped = n->skipped;
  r->overlapped = n->overlapped;
}

/* Applies `target`'s payload again, backwards (undo) or forwards (redo), as a new step of
 * `author` that names it; *made is that step (NULL when out of memory: the change stands). The
 * pointer `target` may be stale afterwards (the history can grow or drop its oldest). */
static int replay(srv_server *srv, srv_session *s, const srv_step *target, int forward, uint32_t author, int cause,
                  srv_step **made, hist_count *n, char *err, size_t errlen) {
  srv_history *h = s->history;
  uint64_t id = target->id, step = srv_history_new_step_id(s);
  hist_offsets o = target->off;
  hist_targets g = target->tg;
  int rc = srv__history_apply(srv, s, &o, &g, forward, 0, author, cause, step, n, err, errlen);
  if (rc) return rc;
  *made = find_step(h, step);
  if (!*made) *made = new_step(h, step, author, cause); /* nothing was left to change */
  if (*made) {
    (*made)->undo_of = id;
    (*made)->skipped = n->skipped;
  }
  return 0;
}

int srv_history_undo(srv_server *srv, srv_session *s, uint32_t author, srv_history_result *out, char *err,
                     size_t errlen) {
  srv_history *h = s->history;
  srv_step *target = NULL;
  int too_old = 0;
  for (uint32_t i = h->count; i-- > 0;) {
    srv_step *st = &h->steps[i];
    if (st->author != author || st->undone || st->cause == SRV_CAUSE_UNDO || st->cause == SRV_CAUSE_REDO ||
        st->cause == SRV_CAUSE_ANIM_PLAY || st->cause == SRV_CAUSE_ANIM_COMPRESS)
      continue;
    if (!st->has_payload) {
      too_old = 1;
      break;
    }
    target = st;
    break;
  }
  if (!target) {
    snprintf(err, errlen, "%s has nothing to undo in session '%s'%s", srv_authors_name(&srv->authors, author), s->name,
             too_old ? " (older steps are no longer kept for undo)" : "");
    return SRV_ERANGE;
  }
  uint64_t id = target->id;
  hist_count n;
  srv_step *made;
  int rc = replay(srv, s, target, 0, author, SRV_CAUSE_UNDO, &made, &n, err, errlen);
  if (rc) return rc;
  target = find_step(h, id); /* the history may have moved (grown, or dropped its oldest) */
  if (target) target->undone = 1;
  struct redo *r = redo_of(h, author, 1);
  if (r && r->n == r->cap) {
    uint32_t cap = r->cap ? 2 * r->cap : 8;
    uint64_t *g2 = realloc(r->ids, sizeof(uint64_t) * cap);
    if (g2) r->ids = g2, r->cap = cap;
  }
  if (r && r->n < r->cap) r->ids[r->n++] = id;
  fill_result(out, s, target, made, &n);
  put_step_row(srv, s, made);
  return 0;
}

int srv_history_redo(srv_server *srv, srv_session *s, uint32_t author, srv_history_result *out, char *err,
                     size_t errlen) {
  srv_history *h = s->history;
  struct redo *r = redo_of(h, author, 0);
  srv_step *target = NULL;
  while (r && r->n && !target) {
    target = find_step(h, r->ids[r->n - 1]);
    if (!target || !target->undone || !target->has_payload) target = NULL, r->n--;
  }
  if (!target) {
    snprintf(err, errlen, "%s has nothing to redo in session '%s'", srv_authors_name(&srv->authors, author), s->name);
    return SRV_ERANGE;
  }
  uint64_t id = target->id;
  hist_count n;
  srv_step *made;
  int rc = replay(srv, s, target, 1, author, SRV_CAUSE_REDO, &made, &n, err, errlen);
  if (rc) return rc;
  target = find_step(h, id);
  if (target) target->undone = 0;
  r = redo_of(h, author, 0);
  if (r && r->n) r->n--;
  fill_result(out, s, target, made, &n);
  put_step_row(srv, s, made);
  return 0;
}

int srv_history_revert(srv_server *srv, srv_session *s, const srv_session *old, uint32_t author,
                       srv_history_result *out, char *err, size_t errlen) {
  /* Everything that differs between now and `old` (the same mesh at an earlier version), as a
   * payload from now (before) to then (after), applied forward without a check. */
  hist_offsets o = {0};
  hist_targets g = {0};
  uint32_t nv = s->mesh->vertex_count;
  int rc = 0;
  for (uint32_t v = 0; rc == 0 && v < nv; v++) {
    const int32_t *a = s->offsets + 3 * (size_t)v, *b = old->offsets + 3 * (size_t)v;
    if (memcmp(a, b, 12) != 0) rc = merge_offsets(&o, &v, a, b, 1);
  }
  for (uint32_t t = 0; rc == 0 && t < s->mesh->target_count; t++) {
    srv_target then = t < old->mesh->target_count ? old->targets[t] : s->targets[t];
    if (t >= old->mesh->target_count) then.value = 0.0f; /* made since: it contributes nothing then */
    if (!srv__history_same_settings(&s->targets[t], &then) || memcmp(&s->targets[t].value, &then.value, sizeof(float)) != 0)
      rc = merge_target(&g, t, &s->targets[t], &then);
  }
  hist_count n = {0, 0, 0};
  uint64_t step = srv_history_new_step_id(s);
  if (rc == 0)
    rc = srv__history_apply(srv, s, &o, &g, 1, 1, author, SRV_CAUSE_REVERT, step, &n, err, errlen);
  else
    snprintf(err, errlen, "out of memory"), rc = SRV_EINTERNAL;
  free(o.idx), free(o.before), free(o.after);
  free(g.idx), free(g.before), free(g.after);
  if (rc) return rc;
  srv_step *made = find_step(s->history, step);
  if (!made) made = new_step(s->history, step, author, SRV_CAUSE_REVERT);
  if (made) made->undo_of = old->version;
  fill_result(out, s, NULL, made, &n);
  put_step_row(srv, s, made);
  out->step_last_version = old->version;
  return 0;
}

/* ---- listing ---------------------------------------------------------------------------------- */

const char *srv_history_cause_name(int cause) {
  static const char *const names[] = {"?", "edit", "weights.set", "sculpt.set", "deform.reset", "gesture", "brush",
                                      "blend.solve", "blend.fit", "targets.create_from_sculpt", "targets.configure",
                                      "anim.compress", "anim.play", "undo", "redo", "revert", "mask", "face"};
  return cause > 0 && cause <= SRV_CAUSE_FACE ? names[cause] : names[0];
}

int srv_history_list(const srv_session *s, uint64_t before_version, uint32_t limit, srv_history_entry_cb cb,
                     void *arg) {
  const srv_history *h = s->history;
  uint32_t n = 0;
  for (uint32_t i = h->count; i-- > 0 && n < limit;) {
    const srv_step *st = &h->steps[i];
    if (st->ops == 0 || st->first_version >= before_version) continue;
    srv_history_entry e = {st->id,      st->author,         st->cause,       st->time,   st->first_version,
                           st->last_version, st->ops,       st->changed,     st->vertices, st->targets,
                           st->targets_added, st->undone,   st->has_payload, st->undo_of, st->skipped, 0};
    const srv_step *of = st->cause == SRV_CAUSE_UNDO || st->cause == SRV_CAUSE_REDO ? find_step(h, st->undo_of) : NULL;
    if (of) e.undo_of_cause = of->cause;
    if (cb(&e, arg)) return 1;
    n++;
  }
  return 0;
}

/* The steps restore found in the store, before its replay (summaries only, in order). */
int srv_history_add_old_step(srv_session *s, const srv_history_entry *e) {
  srv_history *h = s->history;
  srv_step *st = h->count ? &h->steps[h->count - 1] : NULL;
  if (!st || st->id != e->step) {
    st = new_step_in_order(h, e->step, e->author, e->cause);
    if (!st) return SRV_EINTERNAL;
    st->first_version = e->first_version;
    st->time = e->time;
  }
  st->has_payload = 0;
  st->last_version = e->last_version;
  st->ops += e->ops;
  st->changed += e->changed;
  return 0;
}

uint64_t srv_history_version_before(const srv_session *s, double t) {
  const srv_history *h = s->history;
  uint64_t v = 0;
  for (uint32_t i = 0; h && i < h->count; i++)
    if (h->steps[i].ops && h->steps[i].time < t && h->steps[i].last_version > v) v = h->steps[i].last_version;
  return v;
}

/* ---- across restarts ------------------------------------------------------------------------------ */

int srv_history_add_step_meta(srv_session *s, uint64_t step, uint64_t undo_of, uint32_t skipped, uint32_t author,
                              int cause) {
  srv_history *h = s->history;
  if (h->nmeta && h->meta[h->nmeta - 1].step >= step) return 0; /* (rows come by step) */
  step_meta *g = realloc(h->meta, sizeof(*g) * (h->nmeta + 1));
  if (!g) return SRV_EINTERNAL;
  h->meta = g;
  h->meta[h->nmeta++] = (step_meta){step, undo_of, skipped, author, (uint8_t)cause, 0};
  if (step >= h->next_id) h->next_id = step + 1; /* an undo that changed nothing took a number too */
  return 0;
}

void srv_history_restore_done(srv_session *s) {
  if (!s->history) return;
  made_before(s->history, UINT64_MAX); /* the undos and redos after every replayed step */
  free(s->history->meta);
  s->history->meta = NULL;
  s->history->nmeta = 0;
}

/* The bytes: a format byte, then varints (srv_bytes.h); floats as float64, which holds a float32 exactly. */
#define HISTORY_FORMAT 1
#define HISTORY_SUMMARIES 1000 /* the newest steps whose whole summary a checkpoint keeps */

static void h_target(proto_buf *b, const srv_target *t) {
  double v[3] = {t->min, t->max, t->value};
  for (int i = 0; i < 3; i++) srv_bytes_f64(b, v[i]); /* (float32 values are exact in a double) */
  srv_bytes_varint(b, t->muted);
  srv_bytes_varint(b, t->driver_count);
  for (uint32_t i = 0; i < t->driver_count; i++) srv_bytes_varint(b, t->drivers[i]);
  srv_bytes_varint(b, t->meta_version);
}

static void g_target(srv_bytes_cur *c, srv_target *t) {
  memset(t, 0, sizeof(*t));
  t->min = (float)srv_bytes_get_f64(c);
  t->max = (float)srv_bytes_get_f64(c);
  t->value = (float)srv_bytes_get_f64(c);
  t->muted = (uint8_t)srv_bytes_get_varint(c);
  uint64_t n = srv_bytes_get_varint(c);
  if (n > PROTO_MAX_DRIVERS) c->bad = 1, n = 0;
  t->driver_count = (uint8_t)n;
  for (uint32_t i = 0; i < n; i++) t->drivers[i] = (uint32_t)srv_bytes_get_varint(c);
  t->meta_version = srv_bytes_get_varint(c);
}

int srv_history_encode(const srv_session *s, proto_buf *b) {
  const srv_history *h = s->history;
  if (!h) return 0;
  uint8_t fmt = HISTORY_FORMAT;
  srv_bytes_put(b, &fmt, 1);
  srv_bytes_varint(b, h->next_id);
  uint32_t n = 0;
  for (uint32_t i = 0; i < h->count; i++) {
    const srv_step *st = &h->steps[i];
    n += st->has_payload || st->undone || st->undo_of || i + HISTORY_SUMMARIES >= h->count;
  }
  srv_bytes_varint(b, n);
  for (uint32_t i = 0; i < h->count; i++) {
    const srv_step *st = &h->steps[i];
    if (!(st->has_payload || st->undone || st->undo_of || i + HISTORY_SUMMARIES >= h->count)) continue;
    uint64_t f[] = {st->id,           st->author,       st->cause,        st->undone,      st->has_payload,
                    st->undo_of,      st->slider,       st->first_version, st->last_version, st->ops,
                    st->changed,      st->vertices,     st->targets,      st->targets_added, st->skipped};
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) srv_bytes_varint(b, f[k]);
    srv_bytes_f64(b, st->time);
    srv_bytes_f64(b, st->last_time);
    if (!st->has_payload) continue;
    srv_bytes_varint(b, st->off.n);
    for (uint32_t j = 0; j < st->off.n; j++) srv_bytes_varint(b, st->off.idx[j]);
    for (size_t j = 0; j < 3 * (size_t)st->off.n; j++) srv_bytes_zigzag(b, st->off.before[j]);
    for (size_t j = 0; j < 3 * (size_t)st->off.n; j++) srv_bytes_zigzag(b, st->off.after[j]);
    srv_bytes_varint(b, st->tg.n);
    for (uint32_t j = 0; j < st->tg.n; j++) {
      srv_bytes_varint(b, st->tg.idx[j]);
      h_target(b, &st->tg.before[j]);
      h_target(b, &st->tg.after[j]);
    }
  }
  srv_bytes_varint(b, h->nredo);
  for (uint32_t i = 0; i < h->nredo; i++) {
    srv_bytes_varint(b, h->redo[i].author);
    srv_bytes_varint(b, h->redo[i].n);
    for (uint32_t j = 0; j < h->redo[i].n; j++) srv_bytes_varint(b, h->redo[i].ids[j]);
  }
  return b->failed ? SRV_EINTERNAL : 0;
}

/* One step of the bytes into the history (made when the store's rows no longer list it). */
static int load_step(srv_history *h, const srv_session *s, srv_bytes_cur *c) {
  uint64_t f[15];
  for (int k = 0; k < 15; k++) f[k] = srv_bytes_get_varint(c);
  double t0 = srv_bytes_get_f64(c), t1 = srv_bytes_get_f64(c);
  if (c->bad) return SRV_EIO;
  srv_step *st = find_step(h, f[0]);
  if (!st) st = new_step(h, f[0], (uint32_t)f[1], (uint8_t)f[2]);
  if (!st) return SRV_EINTERNAL;
  h->payload_bytes -= payload_size(st);
  step_drop_payload(st);
  st->author = (uint32_t)f[1], st->cause = (uint8_t)f[2], st->undone = (uint8_t)f[3];
  st->has_payload = (uint8_t)f[4], st->undo_of = f[5], st->slider = (uint32_t)f[6];
  st->first_version = f[7], st->last_version = f[8], st->ops = (uint32_t)f[9], st->changed = (uint32_t)f[10];
  st->vertices = (uint32_t)f[11], st->targets = (uint32_t)f[12], st->targets_added = (uint32_t)f[13];
  st->skipped = (uint32_t)f[14];
  st->time = t0, st->last_time = t1;
  if (!st->has_payload) return 0;
  uint64_t n = srv_bytes_get_varint(c);
  if (c->bad || n > s->mesh->vertex_count || ensure_offsets(&st->off, (uint32_t)n + 1)) return SRV_EIO;
  for (uint64_t j = 0; j < n; j++) st->off.idx[j] = (uint32_t)srv_bytes_get_varint(c);
  for (size_t j = 0; j < 3 * n; j++) st->off.before[j] = (int32_t)srv_bytes_get_zigzag(c);
  for (size_t j = 0; j < 3 * n; j++) st->off.after[j] = (int32_t)srv_bytes_get_zigzag(c);
  st->off.n = (uint32_t)n;
  n = srv_bytes_get_varint(c);
  for (uint64_t j = 0; !c->bad && j < n; j++) {
    uint32_t t = (uint32_t)srv_bytes_get_varint(c);
    srv_target before, after;
    g_target(c, &before);
    g_target(c, &after);
    if (c->bad || t >= s->mesh->target_count || merge_target(&st->tg, t, &before, &after)) return SRV_EIO;
  }
  for (uint32_t j = 0; j < st->off.n; j++)
    if (st->off.idx[j] >= s->mesh->vertex_count || (j && st->off.idx[j] <= st->off.idx[j - 1])) return SRV_EIO;
  h->payload_bytes += payload_size(st);
  return c->bad ? SRV_EIO : 0;
}

int srv_history_load(srv_session *s, const uint8_t *p, size_t n, char *err, size_t errlen) {
  srv_history *h = s->history;
  srv_bytes_cur c = {p, p + n, 0};
  int rc = n && p[0] == HISTORY_FORMAT ? 0 : SRV_EIO;
  c.p++;
  uint64_t next = rc ? 0 : srv_bytes_get_varint(&c), count = rc ? 0 : srv_bytes_get_varint(&c);
  for (uint64_t i = 0; rc == 0 && i < count; i++) rc = load_step(h, s, &c);
  uint64_t nredo = rc ? 0 : srv_bytes_get_varint(&c);
  for (uint32_t i = 0; i < h->nredo; i++) h->redo[i].n = 0; /* the checkpoint's stacks replace them */
  for (uint64_t i = 0; rc == 0 && !c.bad && i < nredo; i++) {
    uint32_t author = (uint32_t)srv_bytes_get_varint(&c);
    uint64_t k = srv_bytes_get_varint(&c);
    struct redo *r = redo_of(h, author, 1);
    if (!r || c.bad || k > (uint64_t)(c.end - c.p)) {
      rc = r ? SRV_EIO : SRV_EINTERNAL;
      break;
    }
    uint64_t *ids = realloc(r->ids, sizeof(uint64_t) * (k + 1));
    if (!ids) {
      rc = SRV_EINTERNAL;
      break;
    }
    r->ids = ids, r->cap = (uint32_t)k + 1, r->n = (uint32_t)k;
    for (uint64_t j = 0; j < k; j++) r->ids[j] = srv_bytes_get_varint(&c);
  }
  if (rc == 0 && c.bad) rc = SRV_EIO;
  if (rc == 0 && next > h->next_id) h->next_id = next;
  if (rc) snprintf(err, errlen, "the undo history stored with version %llu does not read%s",
                   (unsigned long long)s->version, rc == SRV_EINTERNAL ? " (out of memory)" : "");
  return rc;
}
