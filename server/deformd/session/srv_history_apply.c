/*
 * srv_history_apply.c — undo, redo and revert as operations: a step's payload applied back
 * through srv_session_check / srv_session_apply (invariant 5), on two rules
 * (docs/architecture.md, "Undo"):
 *   - sculpt offsets: the step's own change (after - before) is taken off the offsets the
 *     vertices have now (undo) or added again (redo), in the quantised integers: later steps of
 *     others that overlap stay on top, and undo then redo is exact (shift_offsets);
 *   - target settings and set values: set back only where they still hold what the step left;
 *     a target someone changed since keeps that value and counts as skipped (restore_targets).
 * A revert's payload (now -> then) is applied as absolute values, whatever they hold.
 *
 * DOES NOT build payloads, keep steps or redo stacks (srv_history.c), or talk to the store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_error.h"
#include "srv_history_apply.h"
#include "srv_op.h"
#include "srv_session.h"

int srv__history_same_settings(const srv_target *a, const srv_target *b) {
  return memcmp(&a->min, &b->min, sizeof(float)) == 0 && memcmp(&a->max, &b->max, sizeof(float)) == 0 &&
         a->muted == b->muted && a->driver_count == b->driver_count &&
         memcmp(a->drivers, b->drivers, sizeof(uint32_t) * a->driver_count) == 0;
}

/* One op of the undo, redo or revert: applied when it checks, else everything it held is
 * counted as skipped. */
static void apply_one(srv_server *srv, srv_session *s, const srv_op *op, hist_count *n) {
  char why[256];
  if (srv_session_check(s, op, why, sizeof(why)) != 0 || srv_session_apply(srv, s, op) == 0) n->skipped += op->count;
  else n->restored += op->count;
}

/* Targets: the ops that set what `from` holds back to what `to` holds, wherever the session
 * still has `from` (when check_from) or everywhere: settings, then set values. */
static int restore_targets(srv_server *srv, srv_session *s, const hist_targets *g, int forward, int check_from,
                           const srv_op *base, hist_count *n) {
  uint32_t *idx = malloc(sizeof(uint32_t) * ((size_t)g->n + 1));
  float *val = malloc(sizeof(float) * ((size_t)g->n + 1));
  if (!idx || !val) {
    free(idx), free(val);
    return SRV_EINTERNAL;
  }
  /* Settings first: a value may only fit the range it is restored with. */
  for (uint32_t i = 0; i < g->n; i++) {
    uint32_t t = g->idx[i];
    const srv_target *from = forward ? &g->before[i] : &g->after[i], *to = forward ? &g->after[i] : &g->before[i];
    if (srv__history_same_settings(from, to)) continue;
    if (check_from && !srv__history_same_settings(&s->targets[t], from)) {
      n->skipped++;
      continue;
    }
    srv_target meta = *to;
    srv_op op = *base;
    op.kind = SRV_OP_SET_TARGET_META, op.count = 1, op.indices = &t, op.meta = &meta;
    apply_one(srv, s, &op, n);
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < g->n; i++) {
    uint32_t t = g->idx[i];
    float from = forward ? g->before[i].value : g->after[i].value, to = forward ? g->after[i].value : g->before[i].value;
    if (memcmp(&from, &to, sizeof(float)) == 0 || s->targets[t].driver_count) continue;
    if (check_from && memcmp(&s->targets[t].value, &from, sizeof(float)) != 0) {
      n->skipped++;
      continue;
    }
    /* A restored value outside a range someone changed since is held to that range. */
    const srv_target *st = &s->targets[t];
    idx[k] = t;
    val[k++] = to < st->min ? st->min : to > st->max ? st->max : to;
  }
  if (k) {
    srv_op op = *base;
    op.kind = SRV_OP_SET_WEIGHTS, op.count = k, op.indices = idx, op.values = val;
    apply_one(srv, s, &op, n);
  }
  free(idx);
  free(val);
  return 0;
}

/* A SET_OFFSETS op of `base` in the making (the vertices ascending). */
typedef struct offsets_op {
  uint32_t n;
  uint32_t *idx;
  int32_t *q;
} offsets_op;

static int offsets_op_init(offsets_op *w, uint32_t cap) {
  w->n = 0;
  w->idx = malloc(sizeof(uint32_t) * ((size_t)cap + 1));
  w->q = malloc(sizeof(int32_t) * 3 * ((size_t)cap + 1));
  return w->idx && w->q ? 0 : SRV_EINTERNAL;
}

static void offsets_op_apply(srv_server *srv, srv_session *s, offsets_op *w, const srv_op *base, hist_count *n) {
  if (w->n) {
    srv_op op = *base;
    op.kind = SRV_OP_SET_OFFSETS, op.count = w->n, op.indices = w->idx, op.q = w->q;
    apply_one(srv, s, &op, n);
  }
  free(w->idx);
  free(w->q);
}

/* The protocol's limit on a quantised offset component (PROTO_Q_MAX). */
#define HIST_Q_MAX ((1 << 30) - 1)

/* Undo and redo of sculpt offsets: the step's own change (after - before, see merge_offsets) is
 * taken off the offsets the vertices have now (undo) or added to them again (redo), in the
 * quantised integers, so that the surface moves back continuously wherever later steps of
 * others overlap, and redo after undo gives back the same offsets bit for bit. A vertex whose
 * value would leave the quantised range is left as it is (skipped). Builds the op; applies
 * nothing. */
static int shift_offsets(const srv_session *s, const hist_offsets *o, int forward, offsets_op *w, hist_count *n) {
  if (offsets_op_init(w, o->n)) return SRV_EINTERNAL;
  for (uint32_t i = 0; i < o->n; i++) {
    uint32_t v = o->idx[i];
    const int32_t *b = o->before + 3 * (size_t)i, *a = o->after + 3 * (size_t)i;
    const int32_t *now = s->offsets + 3 * (size_t)v, *left = forward ? b : a; /* what the step left */
    int32_t *q = w->q + 3 * (size_t)w->n;
    int out = 0, moved = 0;
    for (int c = 0; c < 3; c++) {
      int64_t d = (int64_t)a[c] - b[c], x = (int64_t)now[c] + (forward ? d : -d);
      out |= x > HIST_Q_MAX || x < -HIST_Q_MAX;
      moved |= d != 0;
      q[c] = (int32_t)x;
    }
    if (!moved) continue;
    if (out) {
      n->skipped++;
      continue;
    }
    n->overlapped += memcmp(now, left, 12) != 0;
    w->idx[w->n++] = v;
  }
  return 0;
}

/* Revert: every vertex of `o` gets its `after` value, whatever it holds now. Builds the op. */
static int set_offsets(const hist_offsets *o, offsets_op *w) {
  if (offsets_op_init(w, o->n)) return SRV_EINTERNAL;
  for (uint32_t i = 0; i < o->n; i++) {
    if (memcmp(o->before + 3 * (size_t)i, o->after + 3 * (size_t)i, 12) == 0) continue;
    w->idx[w->n] = o->idx[i];
    memcpy(w->q + 3 * (size_t)w->n++, o->after + 3 * (size_t)i, 12);
  }
  return 0;
}

/* The offsets op is built first, then the targets' ops apply, then the offsets op. */
int srv__history_apply(srv_server *srv, srv_session *s, const hist_offsets *o, const hist_targets *g, int forward,
                       int revert, uint32_t author, uint8_t cause, uint64_t step, hist_count *n, char *err,
                       size_t errlen) {
  memset(n, 0, sizeof(*n));
  srv_op base = {.author = author, .cause = cause, .step = step};
  offsets_op w = {0};
  int rc = revert ? set_offsets(o, &w) : shift_offsets(s, o, forward, &w, n);
  if (rc == 0) rc = restore_targets(srv, s, g, forward, !revert, &base, n);
  if (rc == 0) offsets_op_apply(srv, s, &w, &base, n);
  else free(w.idx), free(w.q);
  if (rc) snprintf(err, errlen, "out of memory");
  return rc;
}
