/*
 * srv_store.h — the durable store: SQLite in WAL mode, written by its own thread, read by read-only
 * connections on any thread.
 *
 * DOES NOT know sessions: it keeps rows and blobs that session/ encodes (srv_record.c).
 */
#ifndef DEFORMD_SRV_STORE_H
#define DEFORMD_SRV_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "mesh.h"

typedef struct srv_store srv_store;
#define SRV_STORE_HASH 32 /* bytes of a token's hash (SHA-256) in its row */

typedef struct srv_store_reader srv_store_reader;

/* Called on the loop thread once what was queued before it is committed: status 0, or SRV_EIO
 * with SQLite's reason when the commit failed. */
typedef void (*srv_store_cb)(void *arg, int status, const char *err);

typedef struct srv_store_op {
  uint64_t first_version, version; /* the versions the record covers */
  uint64_t step;                   /* the undo step it belongs to */
  uint32_t author;                 /* srv_authors id */
  double time;                     /* seconds since the epoch */
  int kind;                        /* srv_cause */
  uint32_t changed;                /* vertices or targets it changed */
  const void *body;
  size_t len;
} srv_store_op;

typedef struct srv_store_stats {
  uint64_t records_queued, bytes_queued, ops_queued, commits_requested, commits, commit_failures,
      bytes_committed;
} srv_store_stats;

/* Opens (creating it and DIR when missing) DIR/deformd.sqlite3 in WAL mode with synchronous
 * FULL or NORMAL, and starts the writer thread. Runs on the loop thread before it serves
 * anyone. Returns 0 or SRV_EIO / SRV_EINTERNAL with a reason. */
int srv_store_open(uv_loop_t *loop, const char *dir, int full, srv_store **out, char *err, size_t errlen);
/* Commits what is queued, stops the writer and closes the handles (freed by the loop). */
void srv_store_close(srv_store *st);
/* Queue records (copied) into the batch of this loop iteration. Each returns 0 or
 * SRV_EINTERNAL. */
/* `up`: the session's up axis, 'y' or 'z' (schema 3's sessions.up). */
int srv_store_put_session(srv_store *st, int64_t sid, const char *name, double created, char up,
                          const void *mesh_blob, size_t len);
int srv_store_delete_session(srv_store *st, int64_t sid);
int srv_store_put_author(srv_store *st, uint32_t id, const char *name);
int srv_store_put_op(srv_store *st, int64_t sid, const srv_store_op *op);
int srv_store_put_checkpoint(srv_store *st, int64_t sid, uint64_t version, const void *body, size_t len);
/* The same with the undo history it was taken with (srv_history.c's bytes; both are copied). */
int srv_store_put_checkpoint_history(srv_store *st, int64_t sid, uint64_t version, const void *body, size_t len,
                                     const void *history, size_t hlen);
/* What undo or redo step `step` (of `author`, srv_cause `cause`) acted on (a revert: the version
 * it went back to) and how many vertices and targets it left as others had set them. */
int srv_store_put_step(srv_store *st, int64_t sid, uint64_t step, uint64_t undo_of, uint32_t skipped, uint32_t author,
                       int cause);
int srv_store_put_clip(srv_store *st, int64_t sid, const char *name, const void *body, size_t len);
/* An animated texture clip (srv_texclip.c's bytes, copied), by name; schema 5. */
int srv_store_put_texclip(srv_store *st, int64_t sid, const char *name, const void *body, size_t len);
/* An author's mask with its undo steps (srv_mask.c's bytes, copied), replacing the row before. */
int srv_store_put_mask(srv_store *st, int64_t sid, uint32_t author, const void *body, size_t len);
/* A session's face mapping as JSON text (srv_face.c, copied), replacing the row before. */
int srv_store_put_face_map(srv_store *st, int64_t sid, const char *json, size_t len);
/* Access tokens (srv_access.c): the hash only, never the token. */
int srv_store_put_token(srv_store *st, int64_t id, const uint8_t hash[32], int role, const char *session,
                        const char *user, double created);
int srv_store_delete_token(srv_store *st, int64_t id);
/* Drops the session's operations and checkpoints older than its newest checkpoint at or below
 * `version` (that checkpoint holds their result). */
int srv_store_compact(srv_store *st, int64_t sid, uint64_t version);
/* Runs cb once everything queued so far is committed (at once when nothing is). */
int srv_store_after_commit(srv_store *st, srv_store_cb cb, void *arg);
/* Nonzero, with SQLite's reason, while writes fail (edits are then refused). */
int srv_store_failed(const srv_store *st, char *why, size_t len);
const char *srv_store_path(const srv_store *st);
void srv_store_get_stats(const srv_store *st, srv_store_stats *out);

/* Reading, on any thread, through a read-only connection of its own. Rows and blobs: */
typedef struct srv_store_row {
  int64_t session;
  const char *name; /* a session's, clip's or author's name (valid during the callback) */
  double time;
  srv_store_op op;  /* ops rows (body valid during the callback); author id for author rows;
                     * token rows: body/len the hash, kind the role, session the id */
  const char *scope; /* token rows: the session it is for, NULL for every session */
  char up;           /* session rows: 'y' or 'z' (a store before schema 3: 'y') */
} srv_store_row;
typedef int (*srv_store_row_cb)(const srv_store_row *row, void *arg); /* nonzero stops */
typedef struct srv_store_blob {
  uint64_t version;
  uint8_t *data; /* malloc'ed (caller frees); NULL when there is none */
  size_t len;
} srv_store_blob;

int srv_store_reader_open(const char *db_path, srv_store_reader **out, char *err, size_t errlen);
void srv_store_reader_close(srv_store_reader *r);
int srv_store_read_sessions(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
int srv_store_read_authors(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
int srv_store_read_mesh(srv_store_reader *r, int64_t sid, srv_store_blob *out, char *err, size_t errlen);
/* The newest checkpoint at or below `at_most` (out->data NULL when there is none). */
int srv_store_read_checkpoint(srv_store_reader *r, int64_t sid, uint64_t at_most, srv_store_blob *out, char *err,
                              size_t errlen);
/* The undo history stored with the checkpoint at exactly `version` (out->data NULL when none). */
int srv_store_read_checkpoint_history(srv_store_reader *r, int64_t sid, uint64_t version, srv_store_blob *out,
                                      char *err, size_t errlen);
/* The session's step rows (srv_store_put_step), by step: op.step, op.first_version (undo_of),
 * op.changed (skipped), op.author, op.kind (the cause). */
int srv_store_read_steps(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
/* Operations with after < version <= up_to, oldest first. */
int srv_store_read_ops(srv_store_reader *r, int64_t sid, uint64_t after, uint64_t up_to, srv_store_row_cb cb,
                       void *arg, char *err, size_t errlen);
/* The same without their bodies. */
int srv_store_read_ops_meta(srv_store_reader *r, int64_t sid, uint64_t after, uint64_t up_to, srv_store_row_cb cb,
                            void *arg, char *err, size_t errlen);
/* Up to `limit` operations below `before`, newest first, without their bodies. */
int srv_store_read_ops_before(srv_store_reader *r, int64_t sid, uint64_t before, uint32_t limit, srv_store_row_cb cb,
                              void *arg, char *err, size_t errlen);
int srv_store_read_clips(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
/* The session's texture clip rows in upload order: name, op.body, op.len (schema 5 on). */
int srv_store_read_texclips(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err,
                            size_t errlen);
/* The session's mask rows: op.author, op.body, op.len. */
int srv_store_read_masks(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
/* The session's face mapping (schema 5 on; out->data NULL when it has none). */
int srv_store_read_face_map(srv_store_reader *r, int64_t sid, srv_store_blob *out, char *err, size_t errlen);
int srv_store_read_tokens(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen);
/* PRAGMA integrity_check is "ok". */
int srv_store_integrity_ok(srv_store_reader *r, char *err, size_t errlen);
/* PRAGMA quick_check is "ok" (the checks that do not read every index: quick enough at start). */
int srv_store_quick_check(srv_store_reader *r, char *err, size_t errlen);
/* What the file is, written to by nobody: 0 with its schema version, or SRV_EIO with the reason
 * (after the file's name: "is not a deformd store …", "has schema version 7, newer …"). */
int srv_store_reader_schema(srv_store_reader *r, int *version, char *err, size_t errlen);

/* Module-internal (srv_store.c, srv_store_read.c): what an open SQLite file is, reading only.
 * Returns SQLITE_OK with *version (0: an empty database), SQLITE_NOTADB with why (after the
 * file's name: another program's database, a newer schema), or another SQLite code. */
typedef struct sqlite3 sqlite3;
int srv__store_recognise(sqlite3 *db, int *version, char *why, size_t whylen);

#endif
