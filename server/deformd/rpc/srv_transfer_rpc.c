/*
 * srv_transfer_rpc.c — files in and out over JSON-RPC (docs/json-api.md): mesh.upload writes a
 * client's mesh into the data directory's meshes/ in chunks, session.export writes a session's
 * shape into exports/ ({path}) or sends it back in chunks (no path: a download).
 *
 * Chunks are base64 (OpenSSL's EVP_EncodeBlock / srv_base64_decode) in ordinary request and
 * answer lines. An upload is written to a temporary file beside its name and renamed over it
 * by the chunk marked final, so session.create never reads half a file; it belongs to its
 * connection (a connection that goes away takes its unfinished upload with it). A download's
 * file is made once (on the pool) and kept by its connection while the client asks for the
 * following chunks, keyed by session, version and format.
 *
 * Every file operation and every base64 decode runs on the thread pool; one job at a time per
 * connection (a client that does not wait for an answer is told so).
 *
 * DOES NOT check who may (srv_methods.c's dispatch, by this file's table: mesh.upload needs
 * admin, session.export owner) or resolve names itself (srv_data.c).
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>
#include "mesh.h"
#include "srv_base64.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_data.h"
#include "srv_server.h"
#include "srv_conn.h"
#include "srv_session.h"
#include "srv_jobs.h"
#include "srv_rpc.h"
#include "srv_methods.h"

#define DOWNLOAD_CHUNK (4u << 20)  /* bytes per download answer unless max_bytes says less */
#define DOWNLOAD_MAX (16u << 20)   /* ... and at most */

struct srv_transfer {
  srv_server *srv;
  srv_conn *conn;        /* NULL once the connection closed (a job may still run) */
  int busy;              /* a job of this connection runs */
  /* the upload in progress */
  char *name;            /* NULL: none */
  srv_data_temp temp;
  uint64_t received;
  int temp_open;
  /* the last download's file */
  srv_session *dl_session; /* referenced while cached: a session by that name made later differs */
  uint64_t dl_version;
  mesh_format dl_format;
  uint8_t *dl_bytes;
  size_t dl_len;
};

static srv_transfer *transfer_of(srv_conn *c) {
  if (!c->transfer) {
    c->transfer = calloc(1, sizeof(srv_transfer));
    if (c->transfer) {
      c->transfer->srv = c->server;
      c->transfer->conn = c;
      c->transfer->temp.fd = c->transfer->temp.parent = -1;
    }
  }
  return c->transfer;
}

/* The connection's transfer state when no job of it runs, or NULL after answering why not. */
static srv_transfer *idle_transfer(srv_rpc_call *call) {
  srv_transfer *t = transfer_of(call->conn);
  if (!t) srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
  else if (t->busy) srv_rpc_error(call, SRV_EBUSY, "one transfer at a time per connection: wait for the previous answer");
  else return t;
  return NULL;
}

static void drop_download(srv_transfer *t) {
  srv_session_unref(t->dl_session);
  t->dl_session = NULL;
  free(t->dl_bytes);
  t->dl_bytes = NULL;
  t->dl_len = 0;
}

static void transfer_free(srv_transfer *t) {
  drop_download(t);
  free(t->name);
  free(t);
}

/* ---- uploads ----------------------------------------------------------------------------------- */

typedef struct upload_job {
  uv_work_t req;
  srv_transfer *t;
  srv_rpc_call *call;    /* NULL: only the cleanup of a gone connection */
  int dir_fd;
  char *b64;             /* this chunk, still encoded */
  size_t b64_len;
  uint64_t offset;
  int start, final;
  uint64_t limit;        /* bytes the whole upload may have */
  uint64_t received;     /* after this chunk */
  int status;
  char err[320];
} upload_job;

static void upload_work(uv_work_t *req) {
  upload_job *j = req->data;
  srv_transfer *t = j->t;
  if (!j->call) { /* the connection went away: its unfinished upload too */
    if (t->temp_open) srv_data_temp_discard(&t->temp);
    t->temp_open = 0;
    return;
  }
  uint8_t *data = NULL;
  size_t len = 0;
  int d = srv_base64_decode(j->b64, j->b64_len, &data, &len);
  if (d) {
    j->status = d == -2 ? SRV_EINTERNAL : SRV_EPARAMS;
    snprintf(j->err, sizeof(j->err), d == -2 ? "out of memory" : "invalid params: \"data\" must be base64 (RFC 4648, "
             "padded, no line breaks)");
  } else if (j->offset + len > j->limit) {
    j->status = SRV_ELIMIT;
    snprintf(j->err, sizeof(j->err), "the upload would pass %llu bytes (--max-upload-mb): refused and discarded",
             (unsigned long long)j->limit);
  }
  if (j->status == 0 && j->start) { /* a new upload replaces the one in progress */
    if (t->temp_open) srv_data_temp_discard(&t->temp);
    t->temp_open = 0;
    j->status = srv_data_temp_open(j->dir_fd, t->name, "meshes", &t->temp, j->err, sizeof(j->err));
    t->temp_open = j->status == 0;
  }
  if (j->status == 0) j->status = srv_data_temp_write(&t->temp, j->offset, data, len, j->err, sizeof(j->err));
  j->received = j->offset + len;
  if (j->status == 0 && j->final) {
    j->status = srv_data_temp_commit(&t->temp, t->name, "meshes", j->err, sizeof(j->err));
    t->temp_open = 0;
  }
  if (j->status && t->temp_open) { /* a failed chunk ends the upload */
    srv_data_temp_discard(&t->temp);
    t->temp_open = 0;
  }
  free(data);
}

static void upload_done(uv_work_t *req, int status);

/* A transfer whose connection is gone and whose jobs are done: its unfinished upload is
 * discarded on the pool (in job j, reused, or a new one), then it is freed. Takes j (may be
 * NULL). */
static void release_orphan(srv_transfer *t, upload_job *j) {
  if (t->temp_open) {
    if (!j) j = calloc(1, sizeof(*j));
    if (j) {
      free(j->b64);
      j->b64 = NULL;
      j->call = NULL;
      j->t = t;
      j->req.data = j;
      t->busy = 1;
      if (uv_queue_work(t->srv->loop, &j->req, upload_work, upload_done) == 0) {
        t->srv->pending_jobs++;
        return;
      }
      t->busy = 0;
    }
    srv_data_temp_discard(&t->temp); /* no job could start: once, here */
    t->temp_open = 0;
  }
  if (j) free(j->b64);
  free(j);
  transfer_free(t);
}

static void upload_done(uv_work_t *req, int status) {
  upload_job *j = req->data;
  srv_transfer *t = j->t;
  t->srv->pending_jobs--;
  t->busy = 0;
  if (status == UV_ECANCELED && j->status == 0) {
    j->status = SRV_ESHUTDOWN;
    snprintf(j->err, sizeof(j->err), "the server is shutting down");
  }
  if (j->call) {
    if (j->status) {
      free(t->name);
      t->name = NULL;
      t->received = 0;
      srv_rpc_error(j->call, j->status, "%s", j->err);
    } else {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", t->name);
      cJSON_AddNumberToObject(o, "offset", (double)j->received);
      cJSON_AddBoolToObject(o, "final", j->final);
      t->received = j->received;
      if (j->final) {
        srv_log(SRV_LOG_INFO, "mesh %s uploaded (%llu bytes) by connection %u", t->name,
                (unsigned long long)j->received, j->call->conn->id);
        free(t->name);
        t->name = NULL;
        t->received = 0;
      }
      srv_rpc_reply(j->call, o);
    }
  }
  if (!t->conn) { /* the connection closed meanwhile */
    release_orphan(t, j);
    return;
  }
  free(j->b64);
  free(j);
}

/* mesh.upload {name, data, offset, final?} */
static void srv_m_mesh_upload(srv_server *s, srv_rpc_call *call, cJSON *params) {
  if (s->data.meshes < 0) {
    srv_rpc_error(call, SRV_EACCES, "this server keeps no files (--data none): mesh.upload needs a data directory");
    return;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(params, "data");
  if (!cJSON_IsString(name) || !mesh_name_ok(name->valuestring, 255)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"name\" must be a file name in meshes/ (relative, no '..', "
                  "no control characters, at most 255 bytes)");
    return;
  }
  if (!cJSON_IsString(data)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"data\" must be a base64 string");
    return;
  }
  double off = 0;
  int fin = 0, r;
  if ((r = srv_rpc_number(call, params, "offset", &off)) < 0) return;
  if (r == 0 || off < 0 || off != (double)(uint64_t)off) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"offset\" must be the bytes sent so far (0 to start)");
    return;
  }
  if (srv_rpc_bool(call, params, "final", &fin) < 0) return;
  srv_transfer *t = idle_transfer(call);
  if (!t) return;
  int start = off == 0;
  if (!start && (!t->name || strcmp(t->name, name->valuestring) != 0 || (uint64_t)off != t->received)) {
    srv_rpc_error(call, SRV_ERANGE, "offset %.0f does not continue an upload of '%s' on this connection (%s %llu "
                  "bytes): start again at offset 0", off, name->valuestring,
                  t->name && strcmp(t->name, name->valuestring) == 0 ? "it has" : "none in progress; it has",
                  (unsigned long long)(t->name && strcmp(t->name, name->valuestring) == 0 ? t->received : 0));
    return;
  }
  upload_job *j = calloc(1, sizeof(*j));
  size_t n = strlen(data->valuestring);
  if (j) j->b64 = malloc(n + 1);
  char *nm = start ? strdup(name->valuestring) : NULL;
  if (!j || !j->b64 || (start && !nm)) {
    if (j) free(j->b64);
    free(j);
    free(nm);
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  if (start) {
    free(t->name);
    t->name = nm;
    t->received = 0;
  }
  memcpy(j->b64, data->valuestring, n + 1);
  j->b64_len = n;
  j->t = t;
  j->call = call;
  j->dir_fd = s->data.meshes;
  j->offset = (uint64_t)off;
  j->start = start;
  j->final = fin;
  j->limit = (uint64_t)s->cfg.max_upload_mb << 20;
  j->req.data = j;
  t->busy = 1;
  if (uv_queue_work(s->loop, &j->req, upload_work, upload_done) != 0) {
    t->busy = 0;
    free(j->b64);
    free(j);
    srv_rpc_error(call, SRV_EINTERNAL, "cannot start the upload");
    return;
  }
  s->pending_jobs++;
}

/* ---- exports and downloads ------------------------------------------------------------------------ */

typedef struct export_req {
  srv_rpc_call *call;
  srv_transfer *t;       /* downloads: where the file is kept */
  mesh_format format;
  int download;
  uint64_t version;
  uint64_t offset, max_bytes;
  srv_session *session;  /* referenced */
  char name[];           /* exports/: the file's name */
} export_req;

static const char *format_name(mesh_format f) { return f == MESH_FORMAT_OBJ ? "obj" : "glb"; }

/* One chunk of the kept file as the answer. */
static void answer_chunk(srv_rpc_call *call, srv_transfer *t, uint64_t offset, uint64_t max_bytes) {
  if (offset > t->dl_len) {
    srv_rpc_error(call, SRV_ERANGE, "offset %llu is past the end of the file (%zu bytes)", (unsigned long long)offset,
                  t->dl_len);
    return;
  }
  size_t n = t->dl_len - offset < max_bytes ? t->dl_len - (size_t)offset : (size_t)max_bytes;
  char *b64 = malloc(4 * ((n + 2) / 3) + 1);
  if (!b64) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  EVP_EncodeBlock((unsigned char *)b64, t->dl_bytes + offset, (int)n);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "data", b64);
  free(b64);
  cJSON_AddNumberToObject(o, "offset", (double)offset);
  cJSON_AddNumberToObject(o, "total", (double)t->dl_len);
  cJSON_AddStringToObject(o, "format", format_name(t->dl_format));
  cJSON_AddNumberToObject(o, "version", (double)t->dl_version);
  srv_rpc_reply(call, o);
}

static void export_req_free(export_req *e) {
  srv_session_unref(e->session);
  free(e);
}

static void on_exported(srv_server *s, void *arg, int status, uint8_t *bytes, size_t len, const char *err) {
  export_req *e = arg;
  (void)s;
  srv_transfer *t = e->t;
  if (t) t->busy = 0;
  if (status) {
    free(bytes);
    srv_rpc_error(e->call, SRV_EIO, "export failed: %s", err);
  } else if (!e->download) {
    srv_rpc_reply(e->call, cJSON_CreateTrue());
  } else if (!t->conn) { /* nobody to answer any more */
    free(bytes);
    srv_rpc_error(e->call, SRV_ESHUTDOWN, "the connection closed");
  } else {
    drop_download(t);
    t->dl_session = e->session;
    e->session = NULL;
    t->dl_version = e->version;
    t->dl_format = e->format;
    t->dl_bytes = bytes;
    t->dl_len = len;
    answer_chunk(e->call, t, e->offset, e->max_bytes);
  }
  if (t && !t->conn && !t->busy) transfer_free(t);
  export_req_free(e);
}

static int start_export(srv_server *s, srv_session *x, export_req *e) {
  if (e->t) e->t->busy = 1;
  int rc = srv_job_export(s, x, e->format, e->download ? -1 : s->data.exports, e->name, on_exported, e);
  if (rc && e->t) e->t->busy = 0;
  return rc;
}

static void on_restored(srv_server *s, void *arg, int status, srv_session *x, const srv_session *old, const char *err) {
  export_req *e = arg;
  (void)x;
  if (e->t) e->t->busy = 0;
  if (status) {
    srv_rpc_error(e->call, status, "%s", err);
  } else if (start_export(s, (srv_session *)old, e) == 0) {
    return;
  } else {
    srv_rpc_error(e->call, SRV_EINTERNAL, "cannot start the export");
  }
  if (e->t && !e->t->conn && !e->t->busy) transfer_free(e->t);
  export_req_free(e);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* session.export {session, path?, version?, format?, offset?, max_bytes?} */
static void srv_m_session_export(srv_server *s, srv_rpc_call *call, cJSON *params) {
  const cJSON *named = cJSON_GetObjectItemCaseSensitive(params, "session");
  const srv_damaged *d = cJSON_IsString(named) ? srv_session_find_damaged(s, named->valuestring) : NULL;
  srv_session *x = d && d->readable ? d->readable : srv_rpc_want_session(s, call, params); /* (what reads of it) */
  if (!x) return;
  const cJSON *path = cJSON_GetObjectItemCaseSensitive(params, "path");
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(params, "format");
  double v = 0, off = 0, max = DOWNLOAD_CHUNK;
  int rv, ro, rm;
  if ((rv = srv_rpc_number(call, params, "version", &v)) < 0 || (ro = srv_rpc_number(call, params, "offset", &off)) < 0 ||
      (rm = srv_rpc_number(call, params, "max_bytes", &max)) < 0)
    return;
  if (rv && (v < 0 || v != (double)(uint64_t)v)) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"version\" must be a version (an integer >= 0)");
    return;
  }
  mesh_format format = MESH_FORMAT_GLB;
  if (path) {
    if (!cJSON_IsString(path) || !mesh_name_ok(path->valuestring, 255) ||
        !(ends_with(path->valuestring, ".obj") || ends_with(path->valuestring, ".glb"))) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"path\" must be a file name in the exports folder ending in "
                    ".obj or .glb (relative, no '..'); leave it out to download the file instead");
      return;
    }
    if (s->data.exports < 0) {
      srv_rpc_error(call, SRV_EACCES, "this server writes no files (--data none): leave out \"path\" to download "
                    "the file instead");
      return;
    }
    format = ends_with(path->valuestring, ".obj") ? MESH_FORMAT_OBJ : MESH_FORMAT_GLB;
  } else if (fmt) {
    if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "obj") != 0 && strcmp(fmt->valuestring, "glb") != 0)) {
      srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"format\" must be \"obj\" or \"glb\"");
      return;
    }
    format = fmt->valuestring[0] == 'o' ? MESH_FORMAT_OBJ : MESH_FORMAT_GLB;
  }
  if (!path && ((ro && (off < 0 || off != (double)(uint64_t)off)) ||
                (rm && (max < 1 || max > DOWNLOAD_MAX || max != (double)(uint64_t)max)))) {
    srv_rpc_error(call, SRV_EPARAMS, "invalid params: \"offset\" must be a byte offset and \"max_bytes\" 1 to %u",
                  DOWNLOAD_MAX);
    return;
  }
  uint64_t version = rv ? (uint64_t)v : x->version;
  srv_transfer *t = NULL;
  if (!path) {
    if (!(t = idle_transfer(call))) return;
    if (t->dl_bytes && t->dl_session == x && t->dl_version == version && t->dl_format == format) {
      answer_chunk(call, t, (uint64_t)off, (uint64_t)max); /* the next chunk of the kept file */
      return;
    }
  }
  size_t nl = path ? strlen(path->valuestring) : 0;
  export_req *e = calloc(1, sizeof(*e) + nl + 1);
  if (!e) {
    srv_rpc_error(call, SRV_EINTERNAL, "out of memory");
    return;
  }
  e->call = call;
  e->t = t;
  e->format = format;
  e->download = !path;
  e->version = version;
  e->offset = (uint64_t)off;
  e->max_bytes = (uint64_t)max;
  e->session = x;
  srv_session_ref(x);
  if (path) memcpy(e->name, path->valuestring, nl + 1);
  int rc;
  char err[512] = "cannot start the export";
  if (version != x->version) { /* an older state, rebuilt from the store first */
    if (t) t->busy = 1;
    rc = srv_job_restore_at(s, x, version, 0, on_restored, e, err, sizeof(err));
    if (rc && t) t->busy = 0;
  } else {
    rc = start_export(s, x, e) ? SRV_EINTERNAL : 0;
  }
  if (rc) {
    export_req_free(e);
    srv_rpc_error(call, rc, "%s", err);
  }
}

/* The connection closes: an unfinished upload is discarded (on the pool), a kept download
 * freed; a job still running finishes that itself. */
void srv_transfer_release(srv_conn *c) {
  srv_transfer *t = c->transfer;
  if (!t) return;
  c->transfer = NULL;
  t->conn = NULL;
  if (!t->busy) release_orphan(t, NULL); /* else the running job's end does it */
}

/* The methods of this file and the role each needs (dispatch: srv_methods.c). */
static const srv_method methods[] = {
    {"session.export", srv_m_session_export, SRV_METHOD_ON, SRV_ROLE_OWNER},
    {"mesh.upload", srv_m_mesh_upload, SRV_METHOD_PARAMS, SRV_ROLE_ADMIN},
};
const srv_method_table srv_transfer_rpc_methods = {methods, sizeof(methods) / sizeof(methods[0])};
