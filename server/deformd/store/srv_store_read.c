/*
 * srv_store_read.c — reading the store, on any thread: each reader has its own read-only
 * connection (WAL lets it read beside the writer thread of srv_store.c), and hands rows and blobs
 * to callbacks or copies.
 *
 * DOES NOT write, and does not know what the rows mean (srv_record.c, srv_restore.c do).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "srv_store.h"
#include "srv_error.h"

/* ---- reads, on any thread ----------------------------------------------------------------------- */

struct srv_store_reader {
  sqlite3 *db;
};

int srv_store_reader_open(const char *db_path, srv_store_reader **out, char *err, size_t errlen) {
  *out = NULL;
  srv_store_reader *r = calloc(1, sizeof(*r));
  if (!r) return SRV_EINTERNAL;
  /* On a read-only file system a WAL database without its -shm file opens only as immutable
   * (nothing can change it there anyway). */
  char dir[1100], uri[3400];
  snprintf(dir, sizeof(dir), "%s", db_path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  struct statvfs fs;
  int ro = statvfs(slash ? dir : ".", &fs) == 0 && (fs.f_flag & ST_RDONLY);
  size_t k = (size_t)snprintf(uri, sizeof(uri), "file:");
  for (const char *p = db_path; *p && k + 4 < sizeof(uri); p++) {
    if (*p == '?' || *p == '#' || *p == '%') k += (size_t)snprintf(uri + k, sizeof(uri) - k, "%%%02X", (unsigned char)*p);
    else uri[k++] = *p;
  }
  snprintf(uri + k, sizeof(uri) - k, "%s", ro ? "?immutable=1" : "");
  int rc = sqlite3_open_v2(uri, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "cannot read %s: %s", db_path, sqlite3_errmsg(r->db));
    sqlite3_close(r->db);
    free(r);
    return SRV_EIO;
  }
  sqlite3_busy_timeout(r->db, 5000);
  *out = r;
  return 0;
}

void srv_store_reader_close(srv_store_reader *r) {
  if (!r) return;
  sqlite3_close(r->db);
  free(r);
}

/* Runs `sql` with the integer parameters given and calls row() for each row until it returns
 * nonzero. Returns 0 or SRV_EIO with a reason. */
static int query(srv_store_reader *r, const char *sql, const int64_t *params, int nparams,
                 int (*row)(sqlite3_stmt *s, void *arg), void *arg, char *err, size_t errlen) {
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(r->db, sql, -1, &s, NULL);
  for (int i = 0; rc == SQLITE_OK && i < nparams; i++) rc = sqlite3_bind_int64(s, i + 1, params[i]);
  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && row(s, arg) != 0) {
      rc = SQLITE_DONE; /* the callback stopped it (its context says why) */
      break;
    }
  }
  if (rc != SQLITE_DONE) snprintf(err, errlen, "reading the store: %s", sqlite3_errmsg(r->db));
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : SRV_EIO;
}

static int copy_blob(sqlite3_stmt *s, int col, uint8_t **out, size_t *len) {
  const void *p = sqlite3_column_blob(s, col);
  size_t n = (size_t)sqlite3_column_bytes(s, col);
  *out = malloc(n ? n : 1);
  if (!*out) return -1;
  if (n) memcpy(*out, p, n);
  *len = n;
  return 0;
}

typedef struct rows_ctx {
  srv_store_row_cb cb;
  void *arg;
} rows_ctx;

static int session_row(sqlite3_stmt *s, void *arg) {
  rows_ctx *c = arg;
  srv_store_row row = {0};
  row.session = sqlite3_column_int64(s, 0);
  row.name = (const char *)sqlite3_column_text(s, 1);
  row.time = sqlite3_column_double(s, 2);
  const unsigned char *up = sqlite3_column_text(s, 3);
  row.up = up && up[0] == 'z' ? 'z' : 'y';
  return c->cb(&row, c->arg);
}

int srv_store_read_sessions(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  /* A store a newer deformd has not migrated yet (--check-store reads it as it is) has no up
   * column before schema 3: its sessions are Y-up. */
  int version = 0;
  char ignored[64];
  if (srv__store_recognise(r->db, &version, ignored, sizeof(ignored)) != SQLITE_OK || version < 3)
    return query(r, "SELECT id, name, created, 'y' FROM sessions ORDER BY id", NULL, 0, session_row, &c, err, errlen);
  return query(r, "SELECT id, name, created, up FROM sessions ORDER BY id", NULL, 0, session_row, &c, err, errlen);
}

static int blob_row(sqlite3_stmt *s, void *arg) {
  srv_store_blob *b = arg;
  b->version = (uint64_t)sqlite3_column_int64(s, 0);
  return copy_blob(s, 1, &b->data, &b->len) != 0;
}

int srv_store_read_mesh(srv_store_reader *r, int64_t sid, srv_store_blob *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  int rc = query(r, "SELECT 0, mesh FROM sessions WHERE id = ?1", &sid, 1, blob_row, out, err, errlen);
  if (rc == 0 && !out->data) {
    snprintf(err, errlen, "session %lld has no stored mesh", (long long)sid);
    return SRV_EIO;
  }
  return rc;
}

int srv_store_read_checkpoint(srv_store_reader *r, int64_t sid, uint64_t at_most, srv_store_blob *out, char *err,
                              size_t errlen) {
  memset(out, 0, sizeof(*out));
  int64_t p[2] = {sid, at_most > INT64_MAX ? INT64_MAX : (int64_t)at_most};
  return query(r, "SELECT version, body FROM checkpoints WHERE session = ?1 AND version <= ?2 ORDER BY version DESC "
                  "LIMIT 1",
               p, 2, blob_row, out, err, errlen);
}

int srv_store_read_checkpoint_history(srv_store_reader *r, int64_t sid, uint64_t version, srv_store_blob *out,
                                      char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  int64_t p[2] = {sid, version > INT64_MAX ? INT64_MAX : (int64_t)version};
  int rc = query(r, "SELECT version, history FROM checkpoints WHERE session = ?1 AND version = ?2 AND history IS NOT "
                    "NULL", p, 2, blob_row, out, err, errlen);
  return rc;
}

static int step_row(sqlite3_stmt *s, void *arg) {
  rows_ctx *c = arg;
  srv_store_row row = {0};
  row.session = sqlite3_column_int64(s, 0);
  row.op.step = (uint64_t)sqlite3_column_int64(s, 1);
  row.op.first_version = (uint64_t)sqlite3_column_int64(s, 2);
  row.op.changed = (uint32_t)sqlite3_column_int64(s, 3);
  row.op.author = (uint32_t)sqlite3_column_int64(s, 4);
  row.op.kind = sqlite3_column_int(s, 5);
  return c->cb(&row, c->arg);
}

int srv_store_read_steps(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  return query(r, "SELECT session, step, undo_of, skipped, author, kind FROM steps WHERE session = ?1 ORDER BY step",
               &sid, 1,
               step_row, &c, err, errlen);
}

static int op_row(sqlite3_stmt *s, void *arg) {
  rows_ctx *c = arg;
  srv_store_row row = {0};
  row.session = sqlite3_column_int64(s, 0);
  row.op.version = (uint64_t)sqlite3_column_int64(s, 1);
  row.op.first_version = (uint64_t)sqlite3_column_int64(s, 2);
  row.op.step = (uint64_t)sqlite3_column_int64(s, 3);
  row.op.author = (uint32_t)sqlite3_column_int64(s, 4);
  row.op.time = sqlite3_column_double(s, 5);
  row.op.kind = sqlite3_column_int(s, 6);
  row.op.body = sqlite3_column_blob(s, 7);
  row.op.len = (size_t)sqlite3_column_bytes(s, 7);
  row.op.changed = (uint32_t)sqlite3_column_int64(s, 8);
  return c->cb(&row, c->arg);
}

int srv_store_read_ops(srv_store_reader *r, int64_t sid, uint64_t after, uint64_t up_to, srv_store_row_cb cb,
                       void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  int64_t p[3] = {sid, (int64_t)after, up_to > INT64_MAX ? INT64_MAX : (int64_t)up_to};
  return query(r, "SELECT session, version, first_version, step, author, time, kind, body, changed FROM ops WHERE session = ?1 "
                  "AND version > ?2 AND version <= ?3 ORDER BY version",
               p, 3, op_row, &c, err, errlen);
}

int srv_store_read_ops_meta(srv_store_reader *r, int64_t sid, uint64_t after, uint64_t up_to, srv_store_row_cb cb,
                            void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  int64_t p[3] = {sid, (int64_t)after, up_to > INT64_MAX ? INT64_MAX : (int64_t)up_to};
  return query(r, "SELECT session, version, first_version, step, author, time, kind, NULL, changed FROM ops WHERE session = ?1 "
                  "AND version > ?2 AND version <= ?3 ORDER BY version",
               p, 3, op_row, &c, err, errlen);
}

int srv_store_read_ops_before(srv_store_reader *r, int64_t sid, uint64_t before, uint32_t limit, srv_store_row_cb cb,
                              void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  int64_t p[3] = {sid, (int64_t)before, (int64_t)limit};
  return query(r, "SELECT session, version, first_version, step, author, time, kind, NULL, changed FROM ops WHERE session = ?1 "
                  "AND version < ?2 ORDER BY version DESC LIMIT ?3",
               p, 3, op_row, &c, err, errlen);
}

static int clip_row(sqlite3_stmt *s, void *arg) {
  rows_ctx *c = arg;
  srv_store_row row = {0};
  row.name = (const char *)sqlite3_column_text(s, 0);
  row.op.body = sqlite3_column_blob(s, 1);
  row.op.len = (size_t)sqlite3_column_bytes(s, 1);
  return c->cb(&row, c->arg);
}

int srv_store_read_clips(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  /* In the order they were first stored: recorded clips join the list in that order. */
  return query(r, "SELECT name, body FROM clips WHERE session = ?1 ORDER BY seq", &sid, 1, clip_row, &c, err, errlen);
}

int srv_store_read_texclips(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err,
                            size_t errlen) {
  rows_ctx c = {cb, arg};
  return query(r, "SELECT name, body FROM texclips WHERE session = ?1 ORDER BY seq", &sid, 1, clip_row, &c, err,
               errlen);
}

static int mask_row(sqlite3_stmt *s, void *arg) {
  rows_ctx *c = arg;
  srv_store_row row = {0};
  row.op.author = (uint32_t)sqlite3_column_int64(s, 0);
  row.op.body = sqlite3_column_blob(s, 1);
  row.op.len = (size_t)sqlite3_column_bytes(s, 1);
  return c->cb(&row, c->arg);
}

int srv_store_read_masks(srv_store_reader *r, int64_t sid, srv_store_row_cb cb, void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  return query(r, "SELECT author, body FROM masks WHERE session = ?1 ORDER BY author", &sid, 1, mask_row, &c, err, errlen);
}

int srv_store_read_face_map(srv_store_reader *r, int64_t sid, srv_store_blob *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  return query(r, "SELECT 0, body FROM face_maps WHERE session = ?1", &sid, 1, blob_row, out, err, errlen);
}

static int author_row(sqlite3_stmt *s, void *arg) {
  rows_ctx *c = arg;
  srv_store_row row = {0};
  row.op.author = (uint32_t)sqlite3_column_int64(s, 0);
  row.name = (const char *)sqlite3_column_text(s, 1);
  return c->cb(&row, c->arg);
}

int srv_store_read_authors(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  return query(r, "SELECT id, name FROM authors ORDER BY id", NULL, 0, author_row, &c, err, errlen);
}

static int token_row(sqlite3_stmt *s, void *arg) {
  rows_ctx *c = arg;
  srv_store_row row = {0};
  row.session = sqlite3_column_int64(s, 0);
  row.op.body = sqlite3_column_blob(s, 1);
  row.op.len = (size_t)sqlite3_column_bytes(s, 1);
  row.op.kind = sqlite3_column_int(s, 2);
  row.scope = (const char *)sqlite3_column_text(s, 3);
  row.name = (const char *)sqlite3_column_text(s, 4);
  row.time = sqlite3_column_double(s, 5);
  return row.op.len == SRV_STORE_HASH && row.name ? c->cb(&row, c->arg) : 0; /* a damaged row grants nothing */
}

int srv_store_read_tokens(srv_store_reader *r, srv_store_row_cb cb, void *arg, char *err, size_t errlen) {
  rows_ctx c = {cb, arg};
  return query(r, "SELECT id, hash, role, session, user, created FROM tokens ORDER BY id", NULL, 0, token_row, &c, err,
               errlen);
}

static int check_pragma(srv_store_reader *r, const char *pragma, char *err, size_t errlen) {
  sqlite3_stmt *s = NULL;
  int ok = 0;
  char sql[64];
  snprintf(sql, sizeof(sql), "PRAGMA %s", pragma);
  if (sqlite3_prepare_v2(r->db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(s, 0);
    ok = t && strcmp(t, "ok") == 0;
    if (!ok) snprintf(err, errlen, "%s: %s", pragma, t ? t : "?");
  } else {
    snprintf(err, errlen, "%s: %s", pragma, sqlite3_errmsg(r->db));
  }
  sqlite3_finalize(s);
  return ok;
}

int srv_store_integrity_ok(srv_store_reader *r, char *err, size_t errlen) {
  return check_pragma(r, "integrity_check", err, errlen);
}

int srv_store_quick_check(srv_store_reader *r, char *err, size_t errlen) {
  return check_pragma(r, "quick_check", err, errlen);
}

int srv_store_reader_schema(srv_store_reader *r, int *version, char *err, size_t errlen) {
  int rc = srv__store_recognise(r->db, version, err, errlen);
  if (rc == SQLITE_OK && *version == 0) {
    snprintf(err, errlen, "is empty");
    rc = SQLITE_NOTADB;
  }
  return rc == SQLITE_OK ? 0 : SRV_EIO;
}
