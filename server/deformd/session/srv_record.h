/*
 * srv_record.h — operation records and checkpoints as bytes: what the store and the cluster keep.
 */
#ifndef DEFORMD_SRV_RECORD_H
#define DEFORMD_SRV_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "srv_op.h"
#include "srv_session.h"

/* A decoded record: the op and the arrays it points into (owned). */
typedef struct srv_record_op {
  srv_op op;
  uint32_t *indices;
  float *values;
  int32_t *q;
  int16_t *wq;
  char *name;
  srv_new_target *added;
  srv_target meta;
  uint32_t one_index;
} srv_record_op;

/* Appends the record of `op` (applied with `before`) to b; *changed says how many vertices or
 * targets it changed. Returns 0 or SRV_EINTERNAL. */
int srv_record_encode_op(const srv_session *s, const srv_op *op, const srv_before *before, proto_buf *b,
                         uint32_t *changed);
/* Decodes a record against the session's current state (offset records are relative to it).
 * Returns 0 or SRV_EIO with a reason. */
int srv_record_decode_op(const srv_session *s, const uint8_t *p, size_t n, srv_record_op *r, char *err,
                         size_t errlen);
void srv_record_op_fini(srv_record_op *r);
/* A session's whole state at its version. Returns 0 or SRV_EINTERNAL. */
int srv_record_encode_checkpoint(const srv_session *s, proto_buf *b);
/* Loads a checkpoint into a session fresh from its stored mesh (version 0, nothing applied, no
 * subscribers): invariant 5's one exception, see srv_session_op.c. Returns 0 or SRV_EIO. */
int srv_record_load_checkpoint(srv_session *s, const uint8_t *p, size_t n, char *err, size_t errlen);

#endif
