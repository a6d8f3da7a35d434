/*
 * srv_mask.h — each author's mask on a session: a value per topology vertex in [0, 1] (1: held)
 * that holds the vertices under that author's brushes and gestures, its steps, undo and redo,
 * and the row the store keeps of it.
 */
#ifndef DEFORMD_SRV_MASK_H
#define DEFORMD_SRV_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "dfm_brush.h"
#include "dfm_mask.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"
#include "srv_history.h"

#define SRV_MASK_UNDO_DEPTH 32        /* mask steps each author can undo, per session */
#define SRV_MASK_STEP_BYTES (8u << 20) /* ... within this much memory per author (oldest go first) */

typedef enum srv_mask_kind {
  SRV_MASK_STROKE = 1, /* mask.stroke: paint, erase or smooth along a path */
  SRV_MASK_CLEAR,      /* mask.clear: every value 0 */
  SRV_MASK_INVERT,     /* mask.invert: m -> 1 - m */
  SRV_MASK_AUTO        /* mask.auto: topology, normal or boundary */
} srv_mask_kind;

typedef enum srv_mask_auto { SRV_MASK_AUTO_TOPOLOGY = 0, SRV_MASK_AUTO_NORMAL, SRV_MASK_AUTO_BOUNDARY } srv_mask_auto;

/* One mask request (copied by srv_mask_request). */
typedef struct srv_mask_spec {
  srv_mask_kind kind;
  uint32_t author;              /* srv_authors id: whose mask */
  dfm_mask_tool tool;           /* STROKE */
  dfm_falloff falloff;          /* STROKE */
  const dfm_brush_sample *samples; /* STROKE: the path's points (radius, strength each) */
  uint32_t count;
  srv_mask_auto mode;           /* AUTO */
  uint32_t vertex;              /* AUTO topology and normal: the picked render vertex */
  double angle;                 /* AUTO normal: radians */
  uint32_t rings;               /* AUTO boundary: >= 1 */
  int add;                      /* AUTO: 1 keeps what was masked (max), 0 replaces the mask */
} srv_mask_spec;

/* What a mask step answers (SRV_RESULT_MASK). */
typedef struct srv_mask_done {
  uint64_t version;   /* the session's version: a mask leaves it as it was */
  uint64_t step;      /* the step it made (0: nothing changed) */
  uint32_t changed;   /* render vertices whose value changed */
  uint32_t masked;    /* render vertices with a value above 0 now */
  uint32_t dabs;      /* STROKE: dabs placed along the path */
} srv_mask_done;

/* Queues a mask request behind the session's other mask requests (one runs at a time, on the
 * pool); answers `reply` with a srv_mask_done once its step is made, or an error. Returns 0, or
 * SRV_EPARAMS / SRV_ELIMIT / SRV_EINTERNAL with a reason (nothing queued, reply untouched). */
int srv_mask_request(srv_server *srv, srv_session *s, const srv_mask_spec *spec, srv_reply reply, char *err,
                     size_t errlen);
/* The same for an EDIT MASK (docs/protocol.md §4.12): its fields checked and turned into a spec. */
int srv_mask_edit(srv_server *srv, srv_session *s, const proto_mask_edit *e, uint32_t author, srv_reply reply,
                  char *err, size_t errlen);
/* Sends `c` its author's mask as a MASK frame (empty when there is none), when `c` was granted
 * the capability "mask"; nothing otherwise. Every change of an author's mask is sent so to each
 * of that author's connections in the session, and to nobody else. */
struct srv_conn;
void srv_mask_send(srv_session *s, struct srv_conn *c);
/* 1 while a mask request of `author` is queued or running. */
int srv_mask_busy(const srv_session *s, uint32_t author);
/* The session is closing: waiting requests are answered with an error. */
void srv_mask_close_all(srv_session *s);

/* `author`'s mask per topology vertex, copied (caller frees), or NULL when it holds nothing
 * (also when out of memory: then nothing is held). On the loop thread. */
float *srv_mask_copy(const srv_session *s, uint32_t author);
/* `author`'s value at render vertex r (0 when there is no mask). */
float srv_mask_value(const srv_session *s, uint32_t author, uint32_t r);

/* Undo and redo of mask steps, in one order with the author's other steps (srv_history_wait.c
 * asks before srv_history_undo/redo): 1 when the author's newest undoable step (or the step
 * to redo) is a mask step, 0 when it is a history step or none. */
int srv_mask_undo_first(srv_session *s, uint32_t author);
int srv_mask_redo_first(srv_session *s, uint32_t author);
/* Undoes or redoes that mask step. Returns 0 with what it did (cause SRV_CAUSE_MASK, restored:
 * the render vertices set back), or SRV_ERANGE with a reason. */
int srv_mask_undo(srv_server *srv, srv_session *s, uint32_t author, int redo, srv_history_result *out, char *err,
                  size_t errlen);

/* The store's row of an author's mask (srv_store_put_mask): its values and undo steps. */
int srv_mask_encode(const srv_session *s, uint32_t author, proto_buf *b);
/* Restore: one stored row. Returns 0 or SRV_EIO with a reason (a row that does not read). */
int srv_mask_load(srv_session *s, uint32_t author, const uint8_t *p, size_t n, char *err, size_t errlen);
/* Restore, last: step ids continue above every stored mask step. */
void srv_mask_restore_done(srv_session *s);

#endif
