/*
 * srv_forward.c — requests for a session another node owns, sent to that node: JSON-RPC calls
 * made on a relay (or on a primary that does not own the session, or a session.create that
 * placement put elsewhere) and the EDIT frames of editors who joined a relay.
 *
 * Each client connection gets its own link to each owner it needs (srv_link.c), so the owner
 * sees one connection per client: its author (replayed with `hello` when the client named one
 * here), its gestures (ended when the client goes), its answers in order. A JSON-RPC link
 * starts with `auth` when the cluster has a token; the client's access was checked here first,
 * in the same place as any call (srv_methods_dispatch). Answers come back verbatim; calls still
 * unanswered when a link fails are answered with an error naming the node. An EDIT link is a
 * HELLO version 2 with the FORWARD option (the owner sends WELCOME and ERRORs for refused
 * edits, no SNAPSHOT and no frames: the client gets those from the relay) followed by the
 * client's EDIT frames as they came; ERROR frames come back verbatim, so they name the
 * client's own request ids.
 *
 * DOES NOT decide who owns what (srv_registry.c) or apply anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "proto.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_json_text.h"
#include "srv_author.h"
#include "srv_conn.h"
#include "srv_fanout.h"
#include "srv_rpc.h"
#include "srv_cluster.h"

#define FWD_ID_AUTH "deformd-forward:auth"
#define FWD_ID_HELLO "deformd-forward:hello"

typedef struct fwd_call {
  struct fwd_call *next;
  cJSON *id;
} fwd_call;

typedef struct srv_fwd {
  struct srv_fwd *next;
  srv_cluster *k;
  srv_conn *conn;            /* referenced */
  char node[SRV_NODE_ID_MAX];
  int binary;                /* an EDIT link (else JSON-RPC) */
  srv_link *link;
  uint32_t author_sent;      /* the author id last replayed with hello */
  uint8_t *buf;              /* what arrived and is not yet a whole line or frame */
  size_t len, cap;
  fwd_call *calls;           /* JSON-RPC calls sent and not yet answered */
} srv_fwd;

static void free_fwd(srv_cluster *k, srv_fwd *f) {
  srv_fwd **pp = &k->fwds;
  while (*pp && *pp != f) pp = &(*pp)->next;
  if (*pp) *pp = f->next;
  while (f->calls) {
    fwd_call *c = f->calls;
    f->calls = c->next;
    cJSON_Delete(c->id);
    free(c);
  }
  srv_conn_unref(f->conn);
  free(f->buf);
  free(f);
}

static void send_line(srv_link *l, cJSON *o) {
  char *text = cJSON_PrintUnformatted(o);
  if (!text) return;
  size_t n = strlen(text);
  text[n] = '\n'; /* cJSON's terminator becomes the newline; written without it */
  srv_link_write(l, text, n + 1);
  free(text);
}

static cJSON *request(const char *id, const char *method, cJSON *params) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "jsonrpc", "2.0");
  if (id) cJSON_AddStringToObject(o, "id", id);
  cJSON_AddStringToObject(o, "method", method);
  if (params) cJSON_AddItemToObject(o, "params", params);
  return o;
}

/* ---- answers from the owner --------------------------------------------------------------------- */

/* Whether an answer's id (its raw text, as the owner echoed it byte for byte) is the id a
 * call was forwarded with. A call's id is the raw text the client sent (srv_rpc_conn.c keeps it
 * as a cJSON raw value), so texts are compared, never parsed values: "1e2" and "100" are two
 * ids. */
static int same_id(const cJSON *id, const char *text, size_t len) {
  if (!id || !text) return 0;
  char *mine = cJSON_IsRaw(id) ? NULL : cJSON_PrintUnformatted(id);
  const char *t = cJSON_IsRaw(id) ? id->valuestring : mine;
  int same = t && strlen(t) == len && memcmp(t, text, len) == 0;
  free(mine);
  return same;
}

static void rpc_line(srv_fwd *f, const char *line, size_t n) {
  cJSON *o = cJSON_ParseWithLength(line, n);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
  if (cJSON_IsString(id) && strncmp(id->valuestring, "deformd-forward:", 16) == 0) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (e) {
      char *t = cJSON_PrintUnformatted(e);
      srv_log(SRV_LOG_WARN, "forwarding to %s: %s refused: %s", f->node, id->valuestring + 16, t ? t : "?");
      free(t);
    }
    cJSON_Delete(o);
    return;
  }
  srv_json_scan scan;
  char why[128];
  if (srv_json_check(line, n, f->k->srv->cfg.max_json_depth, &scan, why, sizeof(why)) != 0) scan.id = NULL;
  for (fwd_call **pp = &f->calls; scan.id && *pp; pp = &(*pp)->next)
    if (same_id((*pp)->id, scan.id, scan.id_len)) {
      fwd_call *c = *pp;
      *pp = c->next;
      cJSON_Delete(c->id);
      free(c);
      break;
    }
  cJSON_Delete(o);
  /* The answer as the owner wrote it: the client's id, result or error. */
  char *copy = malloc(n + 1);
  if (!copy) return;
  memcpy(copy, line, n);
  copy[n] = '\n';
  srv_conn_send_copy(f->conn, copy, n + 1);
  free(copy);
}

static void edit_frame(srv_fwd *f, const uint8_t *p, size_t n) {
  uint8_t type = p[6];
  if (type == PROTO_ERROR) srv_conn_send_copy(f->conn, p, n); /* names the client's request */
}

static int grow(srv_fwd *f, size_t need) {
  if (f->cap - f->len >= need) return 0;
  size_t cap = f->cap ? f->cap : 65536;
  while (cap - f->len < need) cap *= 2;
  uint8_t *g = realloc(f->buf, cap);
  if (!g) return -1;
  f->buf = g;
  f->cap = cap;
  return 0;
}

static void on_link_close(srv_link *l, const char *why);

static void on_link_data(srv_link *l, const uint8_t *p, size_t n) {
  srv_fwd *f = srv_link_data(l);
  size_t limit = f->binary ? (size_t)f->k->srv->cfg.max_frame + PROTO_HEADER_SIZE : f->k->srv->cfg.max_request;
  if (grow(f, n) != 0 || f->len + n > limit + 65536) {
    srv_link_close(l);
    on_link_close(l, "an answer over the size limit");
    return;
  }
  memcpy(f->buf + f->len, p, n);
  f->len += n;
  size_t at = 0;
  if (f->binary) {
    while (f->len - at >= PROTO_HEADER_SIZE) {
      proto_header h;
      if (proto_header_decode(f->buf + at, &f->k->srv->limits, &h) != 0) {
        srv_link_close(l);
        on_link_close(l, "a bad frame header");
        return;
      }
      if (f->len - at - PROTO_HEADER_SIZE < h.length) break;
      edit_frame(f, f->buf + at, PROTO_HEADER_SIZE + (size_t)h.length);
      at += PROTO_HEADER_SIZE + (size_t)h.length;
    }
  } else {
    for (;;) {
      uint8_t *nl = memchr(f->buf + at, '\n', f->len - at);
      if (!nl) break;
      size_t len = (size_t)(nl - (f->buf + at));
      if (len) rpc_line(f, (const char *)f->buf + at, len);
      at += len + 1;
    }
  }
  memmove(f->buf, f->buf + at, f->len - at);
  f->len -= at;
}

/* The owner went away: calls it did not answer are answered here. */
static void on_link_close(srv_link *l, const char *why) {
  srv_fwd *f = srv_link_data(l);
  srv_log(SRV_LOG_INFO, "forwarding to %s closed: %s", f->node, why);
  for (fwd_call *c = f->calls; c; c = c->next) {
    char msg[256];
    snprintf(msg, sizeof(msg), "the session's node %s went away before answering (%s)", f->node, why);
    srv_rpc_send_error(f->conn, c->id, srv_rpc_code(SRV_EBUSY), msg);
    c->id = NULL; /* taken */
  }
  if (f->binary) {
    char msg[256];
    snprintf(msg, sizeof(msg), "the link for edits to node %s closed (%s); the next edit opens a new one", f->node, why);
    srv_conn_send_error(f->conn, PROTO_ERR_INVALID, 0, msg);
  }
  free_fwd(f->k, f);
}

static const srv_link_ops link_ops = {on_link_data, on_link_close};

/* ---- links per connection --------------------------------------------------------------------------- */

static srv_fwd *link_for(srv_cluster *k, const srv_node *node, srv_conn *c, int binary) {
  for (srv_fwd *f = k->fwds; f; f = f->next)
    if (f->conn == c && f->binary == binary && strcmp(f->node, node->id) == 0) return f;
  srv_fwd *f = calloc(1, sizeof(*f));
  if (!f) return NULL;
  f->k = k;
  f->conn = c;
  f->binary = binary;
  snprintf(f->node, sizeof(f->node), "%s", node->id);
  f->link = srv_link_open(k->srv->loop, binary ? node->stream : node->rpc, &link_ops, f);
  if (!f->link) {
    free(f);
    return NULL;
  }
  srv_conn_ref(c);
  f->next = k->fwds;
  k->fwds = f;
  const char *token = k->srv->node_token; /* the administrator's: every node of a cluster has it */
  if (binary) {
    proto_buf b;
    proto_buf_init(&b);
    const srv_session *s = srv_fanout_session(c);
    const char *name = s ? s->name : "";
    proto_hello h = {PROTO_VERSION_2, PROTO_ROLE_EDITOR, {name, (uint16_t)strlen(name)},
                     {token ? token : "", (uint16_t)(token ? strlen(token) : 0)}};
    proto_hello_opts o = {0};
    const char *author = c->author ? srv_authors_name(&k->srv->authors, c->author) : NULL;
    if (author) o.author = (proto_str){author, (uint16_t)strlen(author)}; /* named in its HELLO here */
    if (proto_encode_hello_forward(&b, &h, &o) == 0) srv_link_write(f->link, b.data, b.len);
    proto_buf_fini(&b);
  } else if (token) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "token", token);
    cJSON *o = request(FWD_ID_AUTH, "auth", p);
    send_line(f->link, o);
    cJSON_Delete(o);
  }
  return f;
}

void srv_forward_rpc(srv_cluster *k, const srv_node *node, srv_rpc_call *call, const char *method,
                     const cJSON *params) {
  srv_conn *c = call->conn;
  srv_fwd *f = link_for(k, node, c, 0);
  if (!f) {
    srv_rpc_error(call, SRV_EINTERNAL, "cannot reach node %s at %s", node->id, node->rpc);
    return;
  }
  if (c->author && c->author != f->author_sent) { /* the author it named here, there too */
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "author", srv_authors_name(&k->srv->authors, c->author));
    cJSON *o = request(FWD_ID_HELLO, "hello", p);
    send_line(f->link, o);
    cJSON_Delete(o);
    f->author_sent = c->author;
  }
  cJSON *o = request(NULL, method, params ? cJSON_Duplicate(params, 1) : NULL);
  if (call->id) {
    cJSON_AddItemToObject(o, "id", cJSON_Duplicate(call->id, 1));
    fwd_call *fc = malloc(sizeof(*fc));
    if (fc) { /* at the tail: answered in the order sent if the link fails */
      fwd_call **tail = &f->calls;
      while (*tail) tail = &(*tail)->next;
      fc->id = call->id;
      fc->next = NULL;
      call->id = NULL;
      *tail = fc;
    }
  }
  send_line(f->link, o);
  cJSON_Delete(o);
  k->stats.forwarded_rpc++;
  srv_rpc_call_free(call);
}

void srv_forward_edit(srv_cluster *k, const srv_node *node, srv_conn *c, const uint8_t *frame, size_t len) {
  srv_fwd *f = link_for(k, node, c, 1);
  if (!f || srv_link_write(f->link, frame, len) != 0) {
    uint32_t rid = len >= PROTO_HEADER_SIZE + 4 ? proto_load_u32(frame + PROTO_HEADER_SIZE) : 0;
    char msg[256];
    snprintf(msg, sizeof(msg), "cannot reach the session's primary %s at %s", node->id, node->stream);
    srv_conn_send_error(c, PROTO_ERR_INVALID, rid, msg);
    return;
  }
  k->stats.forwarded_edits++;
}

void srv_forward_conn_closed(srv_cluster *k, srv_conn *c) {
  for (srv_fwd *f = k->fwds, *next; f; f = next) {
    next = f->next;
    if (f->conn != c) continue;
    srv_link_close(f->link);
    free_fwd(k, f);
  }
}

void srv_forward_fini(srv_cluster *k) {
  while (k->fwds) {
    srv_fwd *f = k->fwds;
    srv_link_close(f->link);
    free_fwd(k, f);
  }
}
