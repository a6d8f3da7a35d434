/*
 * srv_gesture.h — editing gestures: a handle dragged with Laplacian, biharmonic or ARAP editing.
 */
#ifndef DEFORMD_SRV_GESTURE_H
#define DEFORMD_SRV_GESTURE_H

#include <stddef.h>
#include <stdint.h>

#include "dfm.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"

typedef struct srv_gesture_spec {
  uint32_t id;            /* 0: the server picks one */
  uint32_t author;        /* srv_authors id: its operations are one undo step of this author */
  dfm_mode mode;
  int iterations;
  const uint32_t *handle; /* render vertices */
  uint32_t handle_count;
  int64_t pick;           /* render vertex, or -1: the handle is it and what lies within handle_radius */
  double handle_radius;
  const uint32_t *roi;    /* render vertices, or NULL: within roi_radius of the handle, or everything */
  uint32_t roi_count;
  double roi_radius;
  const uint32_t *anchors;
  uint32_t anchor_count;
  /* Soft constraints: render vertex, weight (>= 0, relative to an edge), and where it is pulled
   * (3 per vertex; NAN: where it is at begin). soft_position may be NULL: all NAN. */
  const uint32_t *soft;
  const double *soft_weight, *soft_position;
  uint32_t soft_count;
  int sharp_border;       /* the plain solve: a kink where the region meets what holds it */
  int detached;           /* does not end with the connection that began it (JSON-RPC "detached") */
  dfm_multires multires;  /* the multiresolution path: by size (AUTO, 0), or JSON-RPC "multires" */
  uint32_t proxy_vertices; /* JSON-RPC "proxy_vertices": the proxy's target size (0: DFM_MULTIRES_PROXY) */
  int measure_exact;      /* JSON-RPC "measure_exact": after deform.end, the gesture's drags are
                           * replayed through the exact solve and deform.end answers the distance */
} srv_gesture_spec;

/* What deform.begin answers once the gesture is factorised (SRV_RESULT_GESTURE_BEGUN). */
typedef struct srv_gesture_begun {
  uint32_t gesture;
  dfm_mode mode;
  int smooth_border;        /* the region's border is smooth (asked for, or biharmonic) */
  uint32_t region_vertices; /* topology vertices the gesture may move */
  uint32_t free, pinned;    /* dfm_info's */
  double prefactor_ms;      /* analysis and factorisation */
  double pivot[3];          /* the default pivot: the handle's centroid at begin */
  int multires;             /* solved on a proxy of proxy_vertices (dfm_info's) */
  uint32_t proxy_vertices;
  int mesh_order;           /* its columns' order is the session's mesh order restricted (dfm_info's order_from_mesh) */
  int proxy_reused;         /* multires: the session's proxy, not one made for this gesture (dfm_info's) */
  int mesh_analysis;        /* its factor took the session's symbolic analysis (dfm_info's symbolic_from_mesh) */
  int measure_exact;        /* asked for: deform.end will answer the distance from the exact solve */
} srv_gesture_begun;

/* What deform.end answers for a gesture begun with measure_exact (SRV_RESULT_GESTURE_ENDED):
 * the shape its last drag solved against the same drags replayed, in order, through the exact
 * solve from the same shape at begin (srv_gesture_measure.c). */
typedef struct srv_gesture_ended {
  uint64_t version;
  int measured;             /* 0: `reason` says why not */
  uint32_t drags;           /* the solves replayed (drags that arrived while one solved collapse, as they did live) */
  double max_over_diag;     /* the largest vertex distance over the mesh's bounding-box diagonal */
  double rms_over_diag;     /* the RMS over the welded vertices, over the diagonal */
  double max_distance;      /* the largest vertex distance in mesh units */
  double exact_prefactor_ms, exact_replay_ms;
  char reason[256];
} srv_gesture_ended;

/* Each returns 0 (the reply is answered later) or an SRV_E* code with a reason in err (the
 * reply is untouched: the caller answers). */
int srv_gesture_begin(srv_server *srv, srv_session *s, const srv_gesture_spec *spec, uint32_t owner,
                      srv_reply reply, char *err, size_t errlen);
int srv_gesture_drag(srv_server *srv, srv_session *s, uint32_t id, const dfm_xform *xf, int pivot_given,
                     srv_reply reply, char *err, size_t errlen);
int srv_gesture_end(srv_server *srv, srv_session *s, uint32_t id, srv_reply reply, char *err, size_t errlen);
/* Gestures not dragged for idle_ms end (detached gestures have no connection to end with). */
void srv_gesture_expire(srv_server *srv, srv_session *s, uint64_t idle_ms);
/* A connection went away: its gestures end (owner 0 means none: nothing happens). */
void srv_gesture_drop_owner(srv_server *srv, srv_session *s, uint32_t owner);
/* The session is closing: every gesture ends (those with a job running when it finishes). */
void srv_gesture_close_all(srv_session *s);
/* 1 when a drag of `author`'s is solving or waiting to be applied in the session. */
int srv_gesture_busy(const srv_session *s, uint32_t author);

#endif
