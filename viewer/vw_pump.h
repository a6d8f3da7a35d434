/*
 * vw_pump.h — deform-view's connection, read on a thread of its own: the thread polls vw_net
 * as data arrives and adds up what changed, and the render loop takes the sum once per frame.
 * So frames arriving while a frame is drawn wait for no one, and a PONG is read when it
 * arrives: the round trip the overlay shows is the network's and the server's, not the render
 * loop's (which, drawing a wireframe in software at 2 frames a second, added 25–260 ms).
 *
 * Every use of the vw_net (its replica, its state, its edits) from the render thread happens
 * between vw_pump_lock and vw_pump_unlock; the thread holds the lock only while it polls
 * without waiting, and waits for the socket, and for DNS when it looks a host name up before
 * a connect, outside it (a slow resolver never freezes the window).
 *
 * DOES NOT decode frames (vw_net.c does) or touch GL.
 */
#ifndef DEFORMD_VW_PUMP_H
#define DEFORMD_VW_PUMP_H

#include <pthread.h>

#include "vw_net.h"

/* How the thread looks a host name up (client_resolve's contract); it runs with no lock held. */
typedef int (*vw_pump_resolve_fn)(const char *host, int port, struct addrinfo **res, char *err, size_t errlen);

typedef struct vw_pump {
  vw_net *net;
  vw_pump_resolve_fn resolve;
  pthread_t thread;
  pthread_mutex_t lock;
  int running, stop;
  vw_net_changes pending; /* what changed since the render loop last took it */
} vw_pump;

/* Starts the thread on `net` (already vw_net_init'ed; the pump does not own it). Returns 0 or
 * -1 (no thread: the caller may poll the net itself). */
int vw_pump_start(vw_pump *p, vw_net *net);
/* The same with another way to look names up (tests: one that waits for them). */
int vw_pump_start_resolving(vw_pump *p, vw_net *net, vw_pump_resolve_fn resolve);
/* Stops and joins the thread (a pump that never started is fine). */
void vw_pump_stop(vw_pump *p);

void vw_pump_lock(vw_pump *p);
void vw_pump_unlock(vw_pump *p);
/* With the lock held: what changed since the last take, in *out; the sum starts again. */
void vw_pump_take(vw_pump *p, vw_net_changes *out);
/* With the lock held: 1 when the replica holds a SNAPSHOT not taken yet, so its mesh (vertex
 * and target counts, triangles) may not be the one the render loop has uploaded. */
int vw_pump_snapshot_waiting(const vw_pump *p);

/* Adds what one poll changed (ch) to a sum of earlier polls (acc), as if one poll had seen it
 * all: a SNAPSHOT replaces everything before it (the sum keeps only what came after); offset
 * ranges join; new targets add up; the flags OR. */
void vw_pump_merge(vw_net_changes *acc, const vw_net_changes *ch);

#endif
