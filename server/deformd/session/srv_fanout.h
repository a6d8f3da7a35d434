/*
 * srv_fanout.h — the fan-out: which connections joined a session, its viewers' classes (by codec and
 * rate), and the delivery of each applied op's frames to them, paced or not.
 */
#ifndef DEFORMD_SRV_FANOUT_H
#define DEFORMD_SRV_FANOUT_H

#include <stdint.h>

#include "srv_frame.h"
#include "srv_conn.h"

typedef struct srv_session srv_session;

/* A stream connection joined `s` (its HELLO named it): srv_fanout_session(c) is `s` from now
 * until it leaves (srv_fanout_unsubscribe), whether or not it is sent frames. Returns 0 or
 * SRV_EINTERNAL (out of memory: it joined nothing). What it makes on `c` is freed by
 * srv_fanout_release. */
int srv_fanout_join(srv_conn *c, srv_session *s);
/* The session `c` joined, NULL when none (or once it left, or the session closed). */
srv_session *srv_fanout_session(const srv_conn *c);

/* Viewers: a connection that joined `s` (srv_fanout_join) is sent its frames in `codec`, in the
 * class of (codec, rate); a class at rate 0 gets every applied op's frame (srv_conn_deliver), a
 * paced one coalesced updates at most `rate` times a second. Returns the rate it got: `rate`,
 * or 0 (every change) when there was no memory for a paced class's timer. */
float srv_fanout_subscribe(srv_session *s, srv_conn *c, uint8_t codec, float rate);
/* Leaves its session: no more frames, srv_fanout_session(c) NULL (a no-op when it joined none). */
void srv_fanout_unsubscribe(srv_conn *c);
/* Frees what srv_fanout_join made on `c` (after it left; the handle is being freed). */
void srv_fanout_release(srv_conn *c);

/* The subscribers of `s`, newest first: srv_fanout_first, then srv_fanout_next until NULL
 * (unsubscribing the current one ends the walk: start again from srv_fanout_first). */
srv_conn *srv_fanout_first(const srv_session *s);
srv_conn *srv_fanout_next(const srv_conn *c);

/* Which codecs' frames an op must be encoded in: bit c set when a class at rate 0 uses codec c. */
uint32_t srv_fanout_live_codecs(const srv_session *s);
/* Hands frames[codec] (NULL: could not be encoded; subscribers fall behind and catch up) at
 * `version` to every subscriber at rate 0, and marks the paced classes. */
void srv_fanout_publish(srv_session *s, srv_frame *const *frames, uint64_t version);
/* 1 when `c` is in a paced class: once drained after lagging, it catches up with its class's
 * next update (srv_fanout_pace) instead of a catch-up frame of its own. */
int srv_fanout_paced(const srv_conn *c);
/* A paced connection drained after lagging: it gets its update with its class's next one. */
void srv_fanout_pace(srv_conn *c);

#endif
