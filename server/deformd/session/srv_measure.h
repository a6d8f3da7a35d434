/*
 * srv_measure.h — a multiresolution gesture measured against the exact solve: its drags
 * recorded as they are solved, then replayed, in order, through the exact system on the thread
 * pool after deform.end (JSON-RPC "measure_exact").
 *
 * The replay gives the distance that matters to the person dragging: the shape the gesture left
 * against the one the exact solve would have left after the same solves. ARAP carries each
 * drag's rotations into the next, so every solve is replayed, not only the last.
 *
 * DOES NOT schedule anything or answer anyone: srv_gesture.c queues srv_measure_run and answers
 * deform.end with the result.
 */
#ifndef DEFORMD_SRV_MEASURE_H
#define DEFORMD_SRV_MEASURE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mesh.h"
#include "dfm.h"
#include "srv_gesture.h"

/* The most solves a gesture records (80 bytes each): past it deform.end says it did not measure. */
#define SRV_MEASURE_MAX_DRAGS 100000u

typedef struct srv_measure {
  /* The exact system's parameters: the gesture's, multires off, with its own copies of the
   * handle, region and anchors (topology vertices, after the mask's anchors were added). */
  dfm_params params;
  uint32_t *handle, *roi, *anchors;
  dfm_xform *drags;         /* the transforms solved, pivots filled in, in order */
  uint32_t count, cap;
  int lost;                 /* a drag could not be recorded (out of memory, or past the cap) */
  atomic_int stop;          /* set on the loop (the session closed, the connection went away) */
  srv_gesture_ended result;
} srv_measure;

/* Takes the gesture's parameters; the arrays are copied. Returns 0 or DFM_ENOMEM. */
int srv_measure_init(srv_measure *m, const dfm_params *gesture);
void srv_measure_fini(srv_measure *m);
/* A solve the gesture applied: recorded, or m->lost set. */
void srv_measure_record(srv_measure *m, const dfm_xform *xf);
/* What the replay needs on top of the gesture (the exact system's estimate and its output), in
 * bytes, and its unknowns for the messages. */
size_t srv_measure_bytes(const srv_measure *m, uint32_t vertices, uint64_t *unknowns);
/* On the pool: the exact system from `rest` (3 per topology vertex), every recorded drag
 * solved in turn, and the last result against `solved` (the gesture's last output), the
 * distances over `diag` (the mesh's bounding-box diagonal, as deform-bench divides by). Fills
 * m->result (but its version), or its reason. */
void srv_measure_run(srv_measure *m, const mesh_topology *t, const mesh_adjacency *adj, const double *rest,
                     const double *solved, double diag);

#endif
