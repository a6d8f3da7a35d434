/*
 * srv_brush.h — brush strokes, and what a stroke costs before it runs.
 */
#ifndef DEFORMD_SRV_BRUSH_H
#define DEFORMD_SRV_BRUSH_H

#include <stddef.h>
#include <stdint.h>

#include "dfm_brush.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"

/* What a stroke answers once applied (SRV_RESULT_BRUSH_STROKE). */
typedef struct srv_brush_stroked {
  uint64_t version;        /* the session's version after it */
  uint32_t moved_vertices; /* vertices whose offset changed */
  uint32_t dabs;           /* dabs placed along the path */
} srv_brush_stroked;

/* Queues a stroke (copied: `samples` are the points of its path) behind the session's other
 * strokes; answers `reply` with a srv_brush_stroked once applied, or with
 * SRV_ELIMIT when its dabs' work is over max_brush_work. Returns 0 or an SRV_E* code. */
int srv_brush_stroke(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                     uint32_t count, uint32_t author, srv_reply reply, char *err, size_t errlen);
/* The same for the next piece of a stroke connection `conn` sends as its pointer moves: with
 * `piece` set, the points continue that connection's last stroke of the same brush (its path,
 * its dab spacing, its starting shape), or begin a new one when there is none. `author` (an
 * srv_authors id) owns the resulting operations, one undo step per stroke; `conn` 0 is none. */
int srv_brush_stroke_piece(srv_server *srv, srv_session *s, const dfm_brush *brush, const dfm_brush_sample *samples,
                           uint32_t count, uint32_t author, uint32_t conn, int piece, srv_reply reply, char *err,
                           size_t errlen);
/* The session is closing: waiting strokes are answered with an error. */
void srv_brush_close_all(srv_session *s);
/* 1 when a stroke of `author`'s is queued or running in the session. */
int srv_brush_busy(const srv_session *s, uint32_t author);

/* What a stroke costs, before it runs (srv_brush_budget.c), in touched-vertex units: `touched`
 * bounds the vertices its dabs (and their mirror images) move, `scanned` counts the distance
 * checks, and `work` = touched + scanned / SRV_BRUSH_SCAN_RATIO is what max_brush_work bounds.
 * srv_brush.c passes the dabs a stroke's path places (dfm_stroke_dabs), not its points. */
#define SRV_BRUSH_SCAN_RATIO 100
typedef struct srv_brush_cost {
  uint64_t touched, scanned, work;
} srv_brush_cost;
/* The cost of `count` dabs over `n` positions (3 doubles each), with their mirror images across
 * the plane of `mirror_axis` (dfm_brush_mirror_axis: 0 x, 1 y, 2 z, -1 none). 0 or SRV_EINTERNAL. */
int srv_brush_work(const double *positions, uint32_t n, const dfm_brush_sample *samples, uint32_t count,
                   int mirror_axis, srv_brush_cost *out);

#endif
