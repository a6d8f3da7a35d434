/*
 * srv_reply.h — where an asynchronous answer goes: a transport's reply, handed down with a
 * request, and the typed result the session layer answers it with.
 *
 * The session layer (gestures, brush strokes, blendshape and animation jobs, undo and redo)
 * answers with a srv_result: a kind and a borrowed pointer to that kind's struct, declared in
 * the module's own header. Each transport encodes what it needs of it: JSON-RPC turns it into
 * the answer's JSON (rpc/srv_result_json.c), the binary port sends nothing (success is seen in
 * the frames of what was applied).
 *
 * DOES NOT build JSON, or know any struct behind a result (this header sits below session/).
 */
#ifndef DEFORMD_SRV_REPLY_H
#define DEFORMD_SRV_REPLY_H

#include <stddef.h>
#include <stdint.h>

/* Declared by the session modules that fill them. */
struct srv_gesture_begun;  /* session/srv_gesture.h */
struct srv_gesture_ended;  /* session/srv_gesture.h */
struct srv_brush_stroked;  /* session/srv_brush.h */
struct srv_blend_solved;   /* session/srv_blend.h */
struct srv_blend_fitted;   /* session/srv_blend.h */
struct srv_clip;           /* session/srv_anim.h */
struct srv_history_result; /* session/srv_history.h */
struct srv_mask_done;      /* session/srv_mask.h */
struct srv_texclip;        /* session/srv_texclip.h */

typedef enum srv_result_kind {
  SRV_RESULT_VERSION,        /* deform.drag, deform.end: the session's version after it */
  SRV_RESULT_GESTURE_BEGUN,  /* deform.begin: the gesture is factorised */
  SRV_RESULT_BRUSH_STROKE,   /* brush.stroke: a stroke (or piece of one) applied */
  SRV_RESULT_BLEND_SOLVE,    /* blend.solve: weights solved from pins and applied */
  SRV_RESULT_BLEND_FIT,      /* blend.fit: weights fitted to a shape (applied or not) */
  SRV_RESULT_ANIM_COMPRESS,  /* anim.compress: the clip, whose stored report is the answer */
  SRV_RESULT_HISTORY,        /* history.undo, history.redo: what it did, and whose it was */
  SRV_RESULT_MASK,           /* mask.stroke, .clear, .invert, .auto: the author's mask step */
  SRV_RESULT_TEXCLIP,        /* texclip.upload: the clip, whose report is the answer */
  SRV_RESULT_GESTURE_ENDED,  /* deform.end of a gesture begun with measure_exact: the version and the distance */
} srv_result_kind;

/* One answer. The pointers are borrowed: valid during the ok() call only, so a transport that
 * answers later encodes first. */
typedef struct srv_result {
  srv_result_kind kind;
  union {
    uint64_t version;
    const struct srv_gesture_begun *gesture_begun;
    const struct srv_gesture_ended *gesture_ended;
    const struct srv_brush_stroked *brush_stroked;
    const struct srv_blend_solved *blend_solved;
    const struct srv_blend_fitted *blend_fitted;
    const struct srv_clip *compressed;
    const struct srv_mask_done *mask;
    const struct srv_texclip *texclip;
    struct {
      const struct srv_history_result *result;
      uint32_t author;
    } history;
  };
} srv_result;

/* A transport's way of answering one request (srv_rpc.c for JSON-RPC calls, srv_stream.c for
 * binary edits). Both functions answer, release `to`, and leave the reply empty. */
typedef struct srv_reply srv_reply;
typedef struct srv_reply_ops {
  void (*ok)(srv_reply *r, const srv_result *result);             /* borrows `result` */
  void (*error)(srv_reply *r, int srv_code, const char *message); /* srv_code: SRV_E* */
} srv_reply_ops;

struct srv_reply {
  const srv_reply_ops *ops; /* NULL: nobody to answer */
  void *to;                 /* the transport's: a JSON-RPC call, or a referenced connection */
  uint32_t request_id;      /* binary edits: the id ERROR frames name */
};

/* Answers with `result` (borrowed) or with an error; a reply with nobody to answer drops them. */
static inline void srv_reply_ok(srv_reply *r, const srv_result *result) {
  if (r->ops) r->ops->ok(r, result);
  r->ops = NULL;
  r->to = NULL;
}
static inline void srv_reply_error(srv_reply *r, int srv_code, const char *message) {
  if (r->ops) r->ops->error(r, srv_code, message);
  r->ops = NULL;
  r->to = NULL;
}

#endif
