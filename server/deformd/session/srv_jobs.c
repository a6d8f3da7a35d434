/*
 * srv_jobs.c — work that must not run on the loop thread: opening a session on a mesh file
 * (read by the import worker, srv_import.c, then decoded here on the pool) or on the generated
 * demo head, then keeping enough heap written for its gestures
 * (dfm_memory_reserve, after the session is open: session.create does not wait for it), and
 * a session's shape as a file (beneath exports/, or in memory for a download).
 *
 * Each job is a request (uv_work_t) that owns its inputs and outputs until its after-work
 * callback runs on the loop thread, which is the only place results touch the server.
 *
 * DOES NOT touch server state from the thread pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfm.h"
#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "mesh_demo_texclip.h"
#include "srv_jobs.h"
#include "srv_error.h"
#include "srv_log.h"
#include "srv_store.h"
#include "srv_data.h"
#include "srv_import.h"
#include "srv_server.h"
#include "srv_session.h"
#include "srv_state.h"
#include "srv_record.h"
#include "srv_history.h"
#include "srv_restore.h"

typedef struct open_job {
  uv_work_t req;
  srv_server *srv;
  char *name, *path;
  int roots[SRV_MAX_MESH_DIRS + 1]; /* a client's name is looked up beneath these */
  uint32_t root_count;              /* 0: the operator's path (the command line), as it is */
  uint32_t max_vertices;
  int64_t reserve_mb;
  uint8_t *blob;        /* the import worker's mesh (mesh_blob.c), decoded on the pool; then,
                         * when a store keeps the imported mesh, the same bytes for it */
  size_t blob_len;
  srv_session *session;
  int confined;         /* a client's name, not the operator's path */
  int dress;            /* the operator's demo head (--demo): its skin and "smile-frown" clip */
  int want_blob;        /* a store keeps the imported mesh */
  char up;              /* the session's up axis, 'y' or 'z', or 0: the file's own, else 'y' */
  int status;
  char err[MESH_ERR_LEN + 64];
  srv_open_cb done;
  void *arg;
} open_job;

static void open_work(uv_work_t *req) {
  open_job *j = req->data;
  mesh *m = NULL;
  if (!j->blob) {
    j->status = mesh_demo_head(&m);
    if (j->status == 0 && j->dress && (j->status = mesh_demo_dress(m)) != 0) mesh_destroy(m);
    if (j->status) snprintf(j->err, sizeof(j->err), "cannot build the demo head: %s", mesh_strerror(j->status));
  } else {
    /* The worker is no more trusted than the file it read: every count is checked again. */
    char why[MESH_ERR_LEN];
    j->status = mesh_blob_read(j->blob, j->blob_len, j->max_vertices, &m, why, sizeof(why));
    if (j->status) snprintf(j->err, sizeof(j->err), "the importer's mesh is invalid: %s", why);
    if (j->status || !j->want_blob) { /* else the store keeps these very bytes: they read back to m */
      free(j->blob);
      j->blob = NULL;
    }
  }
  /* What the store keeps is the mesh as imported, before the session takes it (and before any
   * operation): the worker's blob, or for the demo head one made here. */
  if (j->status == 0 && j->want_blob && !j->blob && (j->status = mesh_blob_write(m, &j->blob, &j->blob_len)) != 0) {
    snprintf(j->err, sizeof(j->err), "cannot store the mesh: %s", mesh_strerror(j->status));
    mesh_destroy(m);
  }
  if (j->status == 0) j->status = srv_session_create(j->name, m, &j->session, j->err, sizeof(j->err));
  if (j->status == 0 && srv_history_init(j->session) != 0) {
    j->status = MESH_ENOMEM;
    snprintf(j->err, sizeof(j->err), "out of memory");
  }
}

/* The heap a session's gestures will use, written once on the pool (server/dfm_memory.c):
 * writing fresh pages costs ~7.7 µs each on this kind of VM, a third of a small region's
 * prefactor if the first gesture paid for it. */
typedef struct reserve_job {
  uv_work_t req;
  srv_server *srv;
  char *name;
  size_t bytes;
  double ms;
} reserve_job;

static void reserve_work(uv_work_t *req) {
  reserve_job *j = req->data;
  j->ms = dfm_memory_reserve(j->bytes);
}

static void reserve_done(uv_work_t *req, int status) {
  reserve_job *j = req->data;
  j->srv->pending_jobs--;
  if (status == 0 && j->ms > 0)
    srv_log(SRV_LOG_DEBUG, "session %s: heap kept for gestures %.0f MiB (%.0f ms to write)", j->name,
            (double)dfm_memory_reserved() / 1048576.0, j->ms);
  free(j->name);
  free(j);
}

static void start_reserve(srv_server *s, const char *name, size_t bytes) {
  reserve_job *j = calloc(1, sizeof(*j));
  if (!j) return; /* only a first gesture that is slower */
  j->srv = s;
  j->name = strdup(name);
  j->bytes = bytes;
  j->req.data = j;
  if (!j->name || uv_queue_work(s->loop, &j->req, reserve_work, reserve_done) != 0) {
    free(j->name);
    free(j);
    return;
  }
  s->pending_jobs++;
}

/* What makes a big session's gestures start sooner, made once on the pool when it opens or is
 * restored: its mesh's AMD order (whole-mesh gestures restrict it instead of ordering their
 * columns) and the symbolic analysis in that order (those with only a handle's worth of fixed
 * vertices factorise without analysing) and, past the multiresolution path's size, that path's
 * proxy. */
typedef struct prep_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session; /* referenced while the job runs */
  int want_order, want_proxy; /* decided on the loop: the pool reads nothing the loop may set */
  int64_t *order;
  dfm_symbolic *symbolic;
  dfm_proxy *proxy;
  double order_ms, proxy_ms;
} prep_job;

static void prep_work(uv_work_t *req) {
  prep_job *j = req->data;
  const srv_session *x = j->session;
  uint64_t t0 = uv_hrtime();
  if (j->want_order && dfm_mesh_order(&x->adj, &j->order) != 0) j->order = NULL; /* gestures order their own */
  if (j->order && dfm_mesh_symbolic(&x->adj, j->order, &j->symbolic) != 0) j->symbolic = NULL; /* or analyse */
  uint64_t t1 = uv_hrtime();
  char err[256];
  if (j->want_proxy && dfm_proxy_build(&x->topo, &x->adj, x->topo.positions, 0, &j->proxy, err, sizeof(err)) != 0)
    j->proxy = NULL; /* a gesture on the path makes its own, and says why if it cannot */
  j->order_ms = (double)(t1 - t0) / 1e6;
  j->proxy_ms = (double)(uv_hrtime() - t1) / 1e6;
}

static void prep_done(uv_work_t *req, int status) {
  prep_job *j = req->data;
  srv_session *x = j->session;
  j->srv->pending_jobs--;
  x->prep_job = 0;
  if (status == 0 && !x->closed) {
    if (j->order && !x->mesh_order) {
      x->mesh_order = j->order, j->order = NULL;
      x->mesh_symbolic = j->symbolic, j->symbolic = NULL;
    }
    if (j->proxy && !x->proxy) x->proxy = j->proxy, j->proxy = NULL;
    srv_log(SRV_LOG_DEBUG, "session %s: ready for whole-mesh gestures: its mesh's order and analysis in %.0f ms, its proxy in %.0f ms",
            x->name, j->order_ms, j->proxy_ms);
  }
  free(j->order);
  dfm_mesh_symbolic_free(j->symbolic);
  dfm_proxy_free(j->proxy);
  srv_session_unref(x);
  srv_server *s = j->srv;
  free(j);
  s->prep_running = 0;
  /* The next session waiting, in the server's list (a closed one has left it). */
  for (srv_session *w = s->stopping ? NULL : s->sessions; w; w = w->next)
    if (w->prep_job == 1) {
      w->prep_job = 0;
      srv_job_gesture_prep(s, w);
      break;
    }
}

/* One at a time: a restart with several big sessions must not take every pool thread from
 * the gestures, imports and exports of the others for seconds. */
void srv_job_gesture_prep(srv_server *s, srv_session *x) {
  int order = !x->mesh_order && x->topo.vertex_count >= DFM_MESH_ORDER_MIN;
  int proxy = !x->proxy && x->topo.vertex_count >= DFM_MULTIRES_MIN;
  if (x->prep_job || (!order && !proxy)) return;
  if (s->prep_running) {
    x->prep_job = 1; /* prep_done starts it */
    return;
  }
  prep_job *j = calloc(1, sizeof(*j));
  if (!j) return; /* only gestures that start slower */
  j->srv = s;
  j->session = x;
  j->want_order = order, j->want_proxy = proxy;
  j->req.data = j;
  srv_session_ref(x);
  if (uv_queue_work(s->loop, &j->req, prep_work, prep_done) != 0) {
    srv_session_unref(x);
    free(j);
    return;
  }
  x->prep_job = 2;
  s->prep_running = 1;
  s->pending_jobs++;
}

static void open_job_free(open_job *j) {
  free(j->blob);
  free(j->name);
  free(j->path);
  free(j);
}

static void open_done(uv_work_t *req, int status) {
  open_job *j = req->data;
  srv_server *s = j->srv;
  s->pending_jobs--;
  if (status == UV_ECANCELED || s->stopping) {
    srv_session_unref(j->session);
    j->session = NULL;
    j->status = SRV_ESHUTDOWN;
    snprintf(j->err, sizeof(j->err), "the server is shutting down");
  } else if (j->status == 0 && (srv_session_find(s, j->name) || srv_session_name_taken(s, j->name))) {
    srv_session_unref(j->session);
    j->session = NULL;
    j->status = SRV_EEXIST;
    snprintf(j->err, sizeof(j->err), "a session called '%s' already exists", j->name);
  } else if (j->status == 0 && s->session_count >= s->cfg.max_sessions) {
    srv_session_unref(j->session);
    j->session = NULL;
    j->status = SRV_ELIMIT;
    snprintf(j->err, sizeof(j->err), "the server already has %u sessions (its limit)", s->session_count);
  } else if (j->status) {
    j->status = SRV_EMESH; /* the reason says what the importer refused */
  } else {
    /* before the store records it; the session's axis never changes afterwards */
    j->session->up = j->up ? j->up : j->session->mesh->file_up == 'z' ? 'z' : 'y';
    /* The imported targets are the mesh's, with a store or without: a relay's blob carries them
     * (srv_publish.c), so a weight clip over them (the demo's "smile-frown") reads there too. */
    j->session->base_targets = j->session->mesh->target_count;
    if (s->store) {
      srv_session *x = j->session;
      x->store_id = s->next_session_id++;
      uv_timeval64_t now;
      uv_gettimeofday(&now);
      if (srv_store_put_session(s->store, x->store_id, x->name, (double)now.tv_sec + now.tv_usec / 1e6, x->up,
                                j->blob, j->blob_len) != 0)
        srv_log(SRV_LOG_ERROR, "session %s: cannot queue it for the store (out of memory)", x->name);
    }
    srv_session_add(s, j->session);
    if (j->reserve_mb != 0)
      start_reserve(s, j->name, j->reserve_mb < 0 ? dfm_memory_estimate(j->session->mesh->vertex_count)
                                                  : (size_t)j->reserve_mb << 20);
    srv_job_gesture_prep(s, j->session); /* after the reserve: the pool takes them in turn */
  }
  j->done(s, j->arg, j->status, j->session, j->err);
  open_job_free(j);
}

/* The worker is done with the file: decode its mesh on the pool, or say why there is none. */
static void on_imported(void *arg, int status, uint8_t *blob, size_t len, const char *why) {
  open_job *j = arg;
  srv_server *s = j->srv;
  if (status == 0) {
    j->blob = blob;
    j->blob_len = len;
    if (uv_queue_work(s->loop, &j->req, open_work, open_done) == 0) return;
    status = SRV_EINTERNAL;
    why = "cannot start decoding the mesh";
  }
  s->pending_jobs--;
  snprintf(j->err, sizeof(j->err), "%s", why);
  j->done(s, j->arg, status, NULL, j->err);
  open_job_free(j);
}

int srv_job_open_session(srv_server *s, const char *name, const char *mesh_path, int confined, char up,
                         srv_open_cb done, void *arg, char *err, size_t errlen) {
  open_job *j = calloc(1, sizeof(*j));
  if (!j) {
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  j->srv = s;
  j->confined = confined && strcmp(mesh_path, "demo") != 0;
  j->dress = !confined && strcmp(mesh_path, "demo") == 0;
  if (j->confined) {
    memcpy(j->roots, s->data.roots, sizeof(j->roots));
    j->root_count = s->data.root_count;
  }
  j->name = strdup(name);
  j->path = strdup(mesh_path);
  j->max_vertices = s->cfg.max_vertices;
  j->reserve_mb = s->cfg.reserve_mb;
  j->want_blob = s->store != NULL;
  j->up = up == 'z' || up == 'y' ? up : 0;
  j->done = done;
  j->arg = arg;
  j->req.data = j;
  int rc = SRV_EINTERNAL;
  snprintf(err, errlen, "out of memory");
  if (j->name && j->path) {
    /* "demo" is generated here; a file is read by the import worker (srv_import.c). */
    if (strcmp(mesh_path, "demo") == 0) {
      snprintf(err, errlen, "cannot start the import");
      rc = uv_queue_work(s->loop, &j->req, open_work, open_done) == 0 ? 0 : SRV_EINTERNAL;
    } else if (j->confined && j->root_count == 0) {
      snprintf(err, errlen, "no mesh called '%s': this server has no mesh folders (give it --data DIR or --mesh-dir PATH)",
               mesh_path);
      rc = SRV_EMESH;
    } else {
      /* A client's name is looked up beneath the mesh folders by the worker (srv_import.c); the
       * operator's path (root_count 0) as it is. */
      rc = srv_import_start(&s->importer, mesh_path, j->roots, j->root_count, on_imported, j, err, errlen);
    }
  }
  if (rc) {
    open_job_free(j);
    return rc;
  }
  s->pending_jobs++;
  return 0;
}

typedef struct export_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session; /* referenced: its mesh stays alive even if the session is closed */
  srv_state state;
  mesh_format format;
  int dir_fd;           /* write `name` beneath it; -1: keep the bytes (a download) */
  char *name;
  uint8_t *bytes;       /* the file, made on the pool */
  size_t len;
  int status;
  char err[MESH_ERR_LEN + 64];
  srv_export_cb done;
  void *arg;
} export_job;

/* OBJ cannot carry targets: it gets the evaluated shape (base + sculpt + Σ w·Δ, baked). GLB keeps
 * the session as a glTF file should: POSITION is the base with the sculpt layer, the targets are
 * its morph targets and the current weights their default weights, so a glTF viewer shows the
 * current shape and Blender a neutral base with working sliders (the weights not applied twice). */
static void export_work(uv_work_t *req) {
  export_job *j = req->data;
  const mesh *m = &j->state.view;
  float *shape = malloc(sizeof(float) * (3 * (size_t)m->vertex_count + 1));
  int glb = j->format == MESH_FORMAT_GLB;
  if (glb) srv_state_weights_as_defaults(&j->state);
  if (!shape || (glb ? srv_state_base_sculpt(&j->state, shape) : srv_state_shape(&j->state, shape)) != 0) {
    free(shape);
    j->status = MESH_ENOMEM;
    snprintf(j->err, sizeof(j->err), "out of memory");
    return;
  }
  /* A Z-up session's GLB gets a root rotation (glTF is Y-up); the vertex data stays the
   * session's coordinates. session->up never changes, so the pool may read it. */
  mesh_export_opts eo = {.z_up = j->session->up == 'z'};
  if (!glb && j->dir_fd >= 0) { /* an OBJ in exports/: its MTL and PNGs beside it, the OBJ last */
    mesh_export_file *files;
    uint32_t n;
    j->status = mesh_export_obj_files(m, shape, j->name, &files, &n, j->err, sizeof(j->err));
    for (uint32_t i = 0; j->status == 0 && i < n; i++)
      j->status = srv_data_write(j->dir_fd, files[i].name, "exports", files[i].bytes, files[i].len, j->err, sizeof(j->err));
    mesh_export_files_free(files, n); /* NULL and 0 when the export failed */
    free(shape);
    return;
  }
  j->status = mesh_export_mem_opts(m, shape, j->format, &eo, &j->bytes, &j->len, j->err, sizeof(j->err));
  free(shape);
  if (j->status == 0 && j->dir_fd >= 0) {
    j->status = srv_data_write(j->dir_fd, j->name, "exports", j->bytes, j->len, j->err, sizeof(j->err));
    free(j->bytes);
    j->bytes = NULL;
  }
}

static void export_done(uv_work_t *req, int status) {
  export_job *j = req->data;
  j->srv->pending_jobs--;
  if (status == UV_ECANCELED) {
    j->status = SRV_EIO;
    snprintf(j->err, sizeof(j->err), "cancelled");
  } else if (j->status) {
    j->status = SRV_EIO;
  }
  j->done(j->srv, j->arg, j->status, j->status ? NULL : j->bytes, j->len, j->err);
  if (j->status) free(j->bytes);
  srv_state_release(&j->state);
  srv_session_unref(j->session);
  free(j->name);
  free(j);
}

int srv_job_export(srv_server *s, srv_session *session, mesh_format format, int dir_fd, const char *name,
                   srv_export_cb done, void *arg) {
  export_job *j = calloc(1, sizeof(*j));
  if (!j) return UV_ENOMEM;
  j->format = format;
  j->dir_fd = dir_fd;
  /* Copy the state now: the loop may change it while the job runs. */
  j->name = dir_fd >= 0 ? strdup(name) : NULL;
  if ((dir_fd >= 0 && !j->name) || srv_state_capture(session, &j->state) != 0) {
    free(j->name);
    free(j);
    return UV_ENOMEM;
  }
  j->srv = s;
  j->session = session;
  srv_session_ref(session);
  j->done = done;
  j->arg = arg;
  j->req.data = j;
  int rc = uv_queue_work(s->loop, &j->req, export_work, export_done);
  if (rc) {
    srv_session_unref(session);
    srv_state_release(&j->state);
    free(j->name);
    free(j);
    return rc;
  }
  s->pending_jobs++;
  return 0;
}

/* ---- an older state from the store ------------------------------------------------------------- */

/* history.revert, session.export {version} and compaction rebuild the session at an older
 * version on the pool (srv_restore_session): after the store has committed everything applied
 * so far, so the version asked for is there to be read. */
typedef struct restore_job {
  uv_work_t req;
  srv_server *srv;
  srv_session *session; /* referenced */
  char *db_path;
  int64_t sid;
  uint64_t version;
  int checkpoint;       /* compaction: also encode the old state as a checkpoint */
  uint32_t max_vertices;
  srv_session *old;     /* result */
  proto_buf cp;
  int status;
  char err[512];
  srv_restore_cb done;
  void *arg;
} restore_job;

static void restore_work(uv_work_t *req) {
  restore_job *j = req->data;
  j->status = srv_restore_session(j->db_path, j->sid, j->version, 0, j->max_vertices, &j->old, j->err, sizeof(j->err));
  if (j->status == 0 && j->checkpoint && srv_record_encode_checkpoint(j->old, &j->cp) != 0) {
    j->status = SRV_EINTERNAL;
    snprintf(j->err, sizeof(j->err), "out of memory");
  }
}

static void restore_done(uv_work_t *req, int status) {
  restore_job *j = req->data;
  j->srv->pending_jobs--;
  if (status == UV_ECANCELED && j->status == 0) {
    j->status = SRV_ESHUTDOWN;
    snprintf(j->err, sizeof(j->err), "the server is shutting down");
  }
  if (j->session->closed && j->status == 0) {
    j->status = SRV_ENOSESSION;
    snprintf(j->err, sizeof(j->err), "session '%s' was closed meanwhile", j->session->name);
  }
  if (j->status == 0 && j->checkpoint && j->srv->store) {
    srv_store_put_checkpoint(j->srv->store, j->sid, j->version, j->cp.data, j->cp.len);
    srv_store_compact(j->srv->store, j->sid, j->version);
  }
  j->done(j->srv, j->arg, j->status, j->session, j->old, j->err);
  srv_session_unref(j->old);
  srv_session_unref(j->session);
  proto_buf_fini(&j->cp);
  free(j->db_path);
  free(j);
}

static void restore_start(void *arg, int status, const char *err) {
  restore_job *j = arg;
  if (status == 0 && uv_queue_work(j->srv->loop, &j->req, restore_work, restore_done) == 0) {
    j->srv->pending_jobs++;
    return;
  }
  j->status = status ? status : SRV_EINTERNAL;
  snprintf(j->err, sizeof(j->err), "%s", status ? err : "cannot start the job");
  j->done(j->srv, j->arg, j->status, j->session, NULL, j->err);
  srv_session_unref(j->session);
  free(j->db_path);
  free(j);
}

int srv_job_restore_at(srv_server *s, srv_session *session, uint64_t version, int checkpoint, srv_restore_cb done,
                       void *arg, char *err, size_t errlen) {
  if (!s->store || !session->store_id) {
    snprintf(err, errlen, "session '%s' has no stored history (the server runs with --data none)", session->name);
    return SRV_ERANGE;
  }
  if (version > session->version) {
    snprintf(err, errlen, "version %llu is ahead of session '%s' (at %llu)", (unsigned long long)version,
             session->name, (unsigned long long)session->version);
    return SRV_ERANGE;
  }
  restore_job *j = calloc(1, sizeof(*j));
  if (!j || !(j->db_path = strdup(srv_store_path(s->store)))) {
    free(j);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  j->srv = s;
  j->session = session;
  j->sid = session->store_id;
  j->version = version;
  j->checkpoint = checkpoint;
  j->max_vertices = s->cfg.max_vertices;
  proto_buf_init(&j->cp);
  j->done = done;
  j->arg = arg;
  j->req.data = j;
  srv_session_ref(session);
  if (srv_store_after_commit(s->store, restore_start, j) != 0) {
    srv_session_unref(session);
    free(j->db_path);
    free(j);
    snprintf(err, errlen, "out of memory");
    return SRV_EINTERNAL;
  }
  return 0;
}
