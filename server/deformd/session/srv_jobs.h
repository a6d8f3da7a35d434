/*
 * srv_jobs.h — background jobs: opening a session from a file, exporting, restoring an earlier version.
 */
#ifndef DEFORMD_SRV_JOBS_H
#define DEFORMD_SRV_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "mesh.h"
#include "srv_server.h"
#include "srv_session.h"

/* Opens a session from a mesh file (read by the import worker, decoded on the thread pool) or
 * "demo" (generated on the pool), then calls `done` on the loop thread with 0 and the new
 * session added to the server, or an SRV_E* code and a reason. With `confined` (a client's
 * request) mesh_path is a name looked up beneath the mesh folders (srv_data) and the reasons
 * quote nothing of the file; without, it is the operator's path. Returns 0, or an SRV_E* code
 * with a reason in err (then `done` is never called). */
typedef void (*srv_open_cb)(srv_server *s, void *arg, int status, srv_session *session,
                            const char *err);
/* `up`: 'y' or 'z', the session's up axis (srv_session.up; the store keeps it), or 0: the file's
 * own (mesh.file_up: an FBX file's UpAxis), else 'y'. */
int srv_job_open_session(srv_server *s, const char *name, const char *mesh_path, int confined, char up,
                         srv_open_cb done, void *arg, char *err, size_t errlen);

/* For a session of at least DFM_MESH_ORDER_MIN welded vertices, on the pool: its mesh's
 * fill-reducing order (dfm_mesh_order: a whole-mesh gesture then restricts it instead of running
 * AMD, 0.4-0.6 s of the dragon's prefactor) and, from DFM_MULTIRES_MIN vertices, its
 * multiresolution proxy (dfm_proxy_build: a gesture on that path then binds to it instead of
 * simplifying the mesh again). Called when a session opens or is restored; a gesture begun
 * before it is done makes its own. */
void srv_job_gesture_prep(srv_server *s, srv_session *session);

/* The current shape of a session as a file in `format` (OBJ or GLB), made on the thread pool
 * (the positions are captured now, on the loop thread): written as `name` beneath dir_fd
 * (srv_data_write), or, with dir_fd < 0, handed to `done` as bytes (which it then owns and
 * frees). `done` gets 0 or SRV_EIO with a reason. */
typedef void (*srv_export_cb)(srv_server *s, void *arg, int status, uint8_t *bytes, size_t len, const char *err);
int srv_job_export(srv_server *s, srv_session *session, mesh_format format, int dir_fd, const char *name,
                   srv_export_cb done, void *arg);

/* Rebuilds `session` as it was at `version` from the store, on the pool, once what is applied
 * now is committed; `done` gets it (borrowed for the call) or an error. With `checkpoint`, that
 * state is also stored as a checkpoint and the history before it folded into it (compaction).
 * Returns 0, or SRV_ERANGE / SRV_EINTERNAL with a reason (done is not called). */
typedef void (*srv_restore_cb)(srv_server *s, void *arg, int status, srv_session *session, const srv_session *old,
                               const char *err);
int srv_job_restore_at(srv_server *s, srv_session *session, uint64_t version, int checkpoint, srv_restore_cb done,
                       void *arg, char *err, size_t errlen);

#endif
