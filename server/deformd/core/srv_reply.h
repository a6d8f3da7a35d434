/*
 * srv_reply.h — where an asynchronous answer goes: a transport's reply, handed down with a request.
 */
#ifndef DEFORMD_SRV_REPLY_H
#define DEFORMD_SRV_REPLY_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

/* A transport's way of answering one request (srv_rpc.c for JSON-RPC calls, srv_stream.c for
 * binary edits). Both functions answer, release `to`, and leave the reply empty. */
typedef struct srv_reply srv_reply;
typedef struct srv_reply_ops {
  void (*ok)(srv_reply *r, cJSON *result);                      /* takes `result` */
  void (*error)(srv_reply *r, int srv_code, const char *message); /* srv_code: SRV_E* */
} srv_reply_ops;

struct srv_reply {
  const srv_reply_ops *ops; /* NULL: nobody to answer */
  void *to;                 /* the transport's: a JSON-RPC call, or a referenced connection */
  uint32_t request_id;      /* binary edits: the id ERROR frames name */
};

/* Answers with `result` (taken) or with an error; a reply with nobody to answer drops them. */
static inline void srv_reply_ok(srv_reply *r, cJSON *result) {
  if (r->ops) r->ops->ok(r, result);
  else cJSON_Delete(result);
  r->ops = NULL;
  r->to = NULL;
}
static inline void srv_reply_error(srv_reply *r, int srv_code, const char *message) {
  if (r->ops) r->ops->error(r, srv_code, message);
  r->ops = NULL;
  r->to = NULL;
}

#endif
