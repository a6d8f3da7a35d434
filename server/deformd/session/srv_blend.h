/*
 * srv_blend.h — blendshape weight solves: weights from dragged points, and fitting a whole shape.
 */
#ifndef DEFORMD_SRV_BLEND_H
#define DEFORMD_SRV_BLEND_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "srv_reply.h"
#include "srv_server.h"
#include "srv_session.h"

#define SRV_BLEND_MAX_PINS 10000 /* pins in one blend.solve or BLEND_PINS edit (SRV_ELIMIT over it) */

/* Pinned vertices and where they should go (blend.solve, EDIT BLEND_PINS). Arrays are copied. */
typedef struct srv_blend_pins_spec {
  const uint32_t *vertices;  /* pin_count render vertices (a vertex may repeat) */
  const double *positions;   /* 3 per pin */
  uint32_t pin_count;
  double lambda;             /* regularization, >= 0 */
  int keep_close;            /* regularise towards the current values (else towards 0) */
  const uint32_t *targets;   /* the targets to solve, or NULL: every one neither muted nor a combination */
  uint32_t target_count;
} srv_blend_pins_spec;

/* A whole shape to project onto the targets (blend.fit). Strings and arrays are copied. */
typedef struct srv_blend_fit_spec {
  const char *shape;         /* "sculpt" (the current look, sculpt layer included) or a mesh file */
  double lambda;
  int keep_close;
  const uint32_t *targets;   /* as for the pins */
  uint32_t target_count;
  int apply;                 /* also apply the weights (one SET_WEIGHTS op) */
} srv_blend_fit_spec;

/* Solved weights as answers name them: the targets' names in the session's mesh, the weights
 * as the floats that are applied. */
typedef struct srv_blend_weights {
  const srv_session *session;
  const uint32_t *targets;   /* count target indices */
  const double *w;           /* count weights */
  uint32_t count;
} srv_blend_weights;

/* What a pin solve answers once applied (SRV_RESULT_BLEND_SOLVE). */
typedef struct srv_blend_solved {
  uint64_t version;          /* the session's version after it */
  srv_blend_weights weights;
  double residual;           /* blend_result's */
  int iterations;
  uint32_t active;
} srv_blend_solved;

/* What a fit answers (SRV_RESULT_BLEND_FIT). */
typedef struct srv_blend_fitted {
  srv_blend_weights weights;
  double rms, max_error;     /* blend_fit_result's */
  uint32_t max_vertex;
  int iterations;
  uint32_t active;
  int applied;               /* the weights were applied: version is the session's after it */
  uint64_t version;
} srv_blend_fitted;

/* Each returns 0 (the reply is answered later) or an SRV_E* code with a reason in err (the
 * reply is untouched: the caller answers). Solves of one session coalesce: a request arriving
 * while one runs replaces the one waiting, and all are answered by the newest. */
int srv_blend_solve(srv_server *srv, srv_session *s, const srv_blend_pins_spec *spec, uint32_t author,
                    srv_reply reply, char *err, size_t errlen);
int srv_blend_solve_edit(srv_server *srv, srv_session *s, const proto_blend_pins *pins, uint32_t author,
                         srv_reply reply, char *err, size_t errlen);
int srv_blend_fit(srv_server *srv, srv_session *s, const srv_blend_fit_spec *spec, uint32_t author,
                  srv_reply reply, char *err, size_t errlen);
/* The session is closing: waiting solves are answered SRV_ENOSESSION, cached factors freed
 * (running jobs answer theirs and free the rest when they end). */
void srv_blend_close_all(srv_session *s);

#endif
