/*
 * srv_store.c — the durable store: one SQLite database (WAL) in the data directory, written by
 * one writer thread in groups, read by restore and history jobs on the thread pool.
 *
 * Writes: the loop thread queues records (a session and its mesh, an operation, a checkpoint,
 * a clip, an author) into the open batch; at the end of each loop iteration (a uv_prepare
 * handle) the open batch goes to the writer thread, which commits everything waiting as one
 * transaction and then wakes the loop (uv_async) to run the callbacks that waited for it —
 * the JSON-RPC answers of the operations in it. Measured here (../shared/MEASURED.md): an
 * fsync costs ~3.5 ms, so one commit per loop iteration (or per group of them while a commit is
 * running) is what keeps 60 Hz editors fast under synchronous=FULL.
 *
 * Failure: when a transaction fails (disk full, read-only, I/O error) it is rolled back, the
 * callbacks waiting on it hear SRV_EIO with SQLite's reason, and the store reports itself
 * failed (srv_store_failed) so that the service refuses edits while viewers go on. The failed
 * records are kept, in order, and retried every second: the log is a chain (each offset record
 * is relative to the one before), so nothing may be skipped. A retry that succeeds clears the
 * failure.
 *
 * Reads (srv_store_reader_*, srv_store_read.c) open their own read-only connection on whatever
 * thread calls them (WAL lets them run beside the writer).
 *
 * DOES NOT know what the records mean: srv_record.c encodes and decodes them.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <uv.h>
#include "proto.h"
#include "mesh.h"
#include "srv_store.h"
#include "srv_error.h"
#include "srv_log.h"

#define STORE_FILE "deformd.sqlite3"
#define RETRY_MS 1000

typedef enum item_kind {
  ITEM_SESSION = 1, /* id, name, created, blob (mesh), version (quantum bits), up */
  ITEM_SESSION_DELETE,
  ITEM_AUTHOR,      /* id, name */
  ITEM_OP,          /* session, v0, v1, step, author, time, kind, blob */
  ITEM_CHECKPOINT,  /* session, v1 (version), blob: the body (v0 bytes), then the undo history */
  ITEM_CLIP,        /* session, name, blob */
  ITEM_COMPACT,     /* session, v1: history older than v1 is folded into the checkpoint at v1 */
  ITEM_TOKEN,       /* session (the token's id), op_kind (role), name (user), time, blob: hash +
                     * the session it is for (none: every session) */
  ITEM_TOKEN_DELETE, /* session (the token's id) */
  ITEM_STEP,        /* session, step, v1 (what it undid, redid or reverted to), changed (skipped), author,
                     * op_kind (its srv_cause) */
  ITEM_MASK,        /* session, author, blob: that author's mask and its undo steps (srv_mask.c) */
  ITEM_FACE_MAP,    /* session, blob: face.map_set's mapping as JSON text (srv_face.c) */
  ITEM_TEXCLIP      /* session, name, blob: an animated texture clip (srv_texclip.c) */
} item_kind;
#define ITEM_LAST ITEM_TEXCLIP

typedef struct item {
  item_kind kind;
  int64_t session;
  uint64_t v0, v1, step;
  uint32_t author, changed;
  int op_kind;
  char up;              /* ITEM_SESSION: the up axis, 'y' or 'z' */
  double time;
  char *name;
  uint8_t *blob;
  size_t len;
} item;

typedef struct waiter {
  srv_store_cb cb;
  void *arg;
} waiter;

typedef struct batch {
  item *items;
  uint32_t count, cap;
  waiter *waiters;
  uint32_t nwait, capwait;
  int status;        /* after the commit: 0 or SRV_EIO */
  int report_only;   /* carries no records: a failure's report, or "writable again" */
  char err[256];
  struct batch *next;
} batch;

struct srv_store {
  char path[1024];
  int full;
  sqlite3 *db;                 /* the writer thread's */
  uv_loop_t *loop;
  uv_prepare_t prepare;        /* hands the open batch over at the end of each iteration */
  uv_async_t async;            /* the writer's "done" bell */
  uv_timer_t retry;            /* while failed: wakes the writer to try again */
  batch *open;                 /* loop thread only */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  batch *todo, *todo_tail;     /* locked: waiting for the writer */
  batch *done, *done_tail;     /* locked: committed (or failed), for the loop */
  batch *failed, *failed_tail; /* writer only: to retry first, in order */
  int stop, retry_now;
  int readonly;                /* writer: db was opened read-only (a read-only file system) */
  sqlite3_stmt *stmt[ITEM_LAST + 1]; /* writer: prepared once, reset after each use */
  uv_timer_t ckpt_timer;       /* the WAL checkpoints run on the pool, not in a commit */
  uv_work_t ckpt_req;
  int ckpt_running;
  sqlite3 *ckpt_db;            /* the pool job's own connection */
  int ckpt_rc, ckpt_log, ckpt_copied; /* the pool job's last result, read in ckpt_done */
  int ckpt_behind;             /* loop thread: the last checkpoint left pages behind (logged once) */
  uint64_t inflight;           /* loop thread: batches handed over and not yet back */
  int is_failed;               /* loop thread's view */
  char failure[256];
  srv_store_stats stats;
};

/* ---- batches ----------------------------------------------------------------------------------- */

static void batch_free(batch *b) {
  if (!b) return;
  for (uint32_t i = 0; i < b->count; i++) {
    free(b->items[i].name);
    free(b->items[i].blob);
  }
  free(b->items);
  free(b->waiters);
  free(b);
}

static batch *open_batch(srv_store *st) {
  if (!st->open) st->open = calloc(1, sizeof(batch));
  return st->open;
}

/* Appends an item to the open batch; copies name and blob. Returns 0 or SRV_EINTERNAL. */
static int push(srv_store *st, const item *it, const void *blob) {
  batch *b = open_batch(st);
  if (!b) return SRV_EINTERNAL;
  if (b->count == b->cap) {
    uint32_t cap = b->cap ? 2 * b->cap : 16;
    item *g = realloc(b->items, sizeof(item) * cap);
    if (!g) return SRV_EINTERNAL;
    b->items = g;
    b->cap = cap;
  }
  item c = *it;
  c.name = it->name ? strdup(it->name) : NULL;
  c.blob = NULL;
  if (it->len && blob) {
    c.blob = malloc(it->len);
    if (c.blob) memcpy(c.blob, blob, it->len);
  }
  if ((it->name && !c.name) || (it->len && blob && !c.blob)) {
    free(c.name);
    free(c.blob);
    return SRV_EINTERNAL;
  }
  b->items[b->count++] = c;
  st->stats.records_queued++;
  st->stats.bytes_queued += it->len;
  return 0;
}

/* ---- the writer thread ------------------------------------------------------------------------- */

static int exec(sqlite3 *db, const char *sql, char *err, size_t errlen) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) snprintf(err, errlen, "%s", msg ? msg : sqlite3_errstr(rc));
  sqlite3_free(msg);
  return rc;
}

static int write_item(srv_store *st, const item *it) {
  sqlite3 *db = st->db;
  static const char *const sql[] = {
      [ITEM_SESSION] = "INSERT OR REPLACE INTO sessions(id, name, created, mesh, up) VALUES (?1, ?2, ?3, ?4, ?5)",
      [ITEM_SESSION_DELETE] = "DELETE FROM sessions WHERE id = ?1",
      [ITEM_AUTHOR] = "INSERT OR IGNORE INTO authors(id, name) VALUES (?1, ?2)",
      [ITEM_OP] = "INSERT INTO ops(session, version, first_version, step, author, time, kind, body, changed) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
      [ITEM_CHECKPOINT] = "INSERT OR REPLACE INTO checkpoints(session, version, body, history) VALUES (?1, ?2, ?3, ?4)",
      [ITEM_CLIP] = "INSERT INTO clips(session, name, body, seq) VALUES (?1, ?2, ?3, (SELECT count(*) FROM clips)) "
                    "ON CONFLICT(session, name) DO UPDATE SET body = excluded.body",
      [ITEM_COMPACT] = NULL,
      [ITEM_TOKEN] = "INSERT INTO tokens(id, hash, role, session, user, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
      [ITEM_TOKEN_DELETE] = "DELETE FROM tokens WHERE id = ?1",
      [ITEM_STEP] = "INSERT OR REPLACE INTO steps(session, step, undo_of, skipped, author, kind) VALUES (?1, ?2, ?3, "
                    "?4, ?5, ?6)",
      [ITEM_MASK] = "INSERT OR REPLACE INTO masks(session, author, body) VALUES (?1, ?2, ?3)",
      [ITEM_FACE_MAP] = "INSERT OR REPLACE INTO face_maps(session, body) VALUES (?1, ?2)",
      [ITEM_TEXCLIP] = "INSERT INTO texclips(session, name, body, seq) VALUES (?1, ?2, ?3, (SELECT count(*) FROM "
                       "texclips)) ON CONFLICT(session, name) DO UPDATE SET body = excluded.body",
  };
  if (it->kind == ITEM_SESSION_DELETE) {
    /* The session's rows go with it (no ON DELETE CASCADE: explicit is easier to read). */
    const char *const del[] = {"DELETE FROM ops WHERE session = ?1", "DELETE FROM checkpoints WHERE session = ?1",
                               "DELETE FROM clips WHERE session = ?1", "DELETE FROM steps WHERE session = ?1",
                               "DELETE FROM masks WHERE session = ?1", "DELETE FROM face_maps WHERE session = ?1",
                               "DELETE FROM texclips WHERE session = ?1", "DELETE FROM sessions WHERE id = ?1"};
    for (int k = 0; k < (int)(sizeof(del) / sizeof(del[0])); k++) {
      sqlite3_stmt *s = NULL;
      int rc = sqlite3_prepare_v2(db, del[k], -1, &s, NULL);
      if (rc == SQLITE_OK) sqlite3_bind_int64(s, 1, it->session), rc = sqlite3_step(s);
      sqlite3_finalize(s);
      if (rc != SQLITE_DONE) return rc;
    }
    return SQLITE_OK;
  }
  if (it->kind == ITEM_COMPACT) {
    /* Everything before the newest checkpoint at or below v1 goes: that checkpoint holds it. */
    const char *const q[] = {
        "DELETE FROM ops WHERE session = ?1 AND version <= (SELECT max(version) FROM checkpoints "
        "WHERE session = ?1 AND version <= ?2)",
        "DELETE FROM checkpoints WHERE session = ?1 AND version < (SELECT max(version) FROM checkpoints "
        "WHERE session = ?1 AND version <= ?2)",
        "DELETE FROM steps WHERE session = ?1 AND step < (SELECT coalesce(min(step), 0) FROM ops WHERE session = ?1)"};
    for (int k = 0; k < 3; k++) {
      sqlite3_stmt *s = NULL;
      int rc = sqlite3_prepare_v2(db, q[k], -1, &s, NULL);
      if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, it->session);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)it->v1);
        rc = sqlite3_step(s);
      }
      sqlite3_finalize(s);
      if (rc != SQLITE_DONE) return rc;
    }
    return SQLITE_OK;
  }
  sqlite3_stmt *s = st->stmt[it->kind];
  int rc = SQLITE_OK;
  if (!s) rc = sqlite3_prepare_v3(db, sql[it->kind], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[it->kind], NULL);
  if (rc != SQLITE_OK) return rc;
  s = st->stmt[it->kind];
  switch (it->kind) {
    case ITEM_SESSION:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_text(s, 2, it->name, -1, SQLITE_STATIC);
      sqlite3_bind_double(s, 3, it->time);
      sqlite3_bind_blob64(s, 4, it->blob, it->len, SQLITE_STATIC);
      sqlite3_bind_text(s, 5, it->up == 'z' ? "z" : "y", 1, SQLITE_STATIC);
      break;
    case ITEM_AUTHOR:
      sqlite3_bind_int64(s, 1, it->author);
      sqlite3_bind_text(s, 2, it->name, -1, SQLITE_STATIC);
      break;
    case ITEM_OP:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_int64(s, 2, (sqlite3_int64)it->v1);
      sqlite3_bind_int64(s, 3, (sqlite3_int64)it->v0);
      sqlite3_bind_int64(s, 4, (sqlite3_int64)it->step);
      sqlite3_bind_int64(s, 5, it->author);
      sqlite3_bind_double(s, 6, it->time);
      sqlite3_bind_int(s, 7, it->op_kind);
      sqlite3_bind_blob64(s, 8, it->blob, it->len, SQLITE_STATIC);
      sqlite3_bind_int64(s, 9, it->changed);
      break;
    case ITEM_CHECKPOINT:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_int64(s, 2, (sqlite3_int64)it->v1);
      sqlite3_bind_blob64(s, 3, it->blob, it->v0, SQLITE_STATIC);
      if (it->len > it->v0) sqlite3_bind_blob64(s, 4, it->blob + it->v0, it->len - it->v0, SQLITE_STATIC);
      break;
    case ITEM_STEP:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_int64(s, 2, (sqlite3_int64)it->step);
      sqlite3_bind_int64(s, 3, (sqlite3_int64)it->v1);
      sqlite3_bind_int64(s, 4, it->changed);
      sqlite3_bind_int64(s, 5, it->author);
      sqlite3_bind_int(s, 6, it->op_kind);
      break;
    case ITEM_CLIP:
    case ITEM_TEXCLIP:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_text(s, 2, it->name, -1, SQLITE_STATIC);
      sqlite3_bind_blob64(s, 3, it->blob, it->len, SQLITE_STATIC);
      break;
    case ITEM_TOKEN:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_blob64(s, 2, it->blob, SRV_STORE_HASH, SQLITE_STATIC);
      sqlite3_bind_int(s, 3, it->op_kind);
      if (it->len > SRV_STORE_HASH)
        sqlite3_bind_text(s, 4, (const char *)it->blob + SRV_STORE_HASH, (int)(it->len - SRV_STORE_HASH), SQLITE_STATIC);
      sqlite3_bind_text(s, 5, it->name, -1, SQLITE_STATIC);
      sqlite3_bind_double(s, 6, it->time);
      break;
    case ITEM_TOKEN_DELETE:
      sqlite3_bind_int64(s, 1, it->session);
      break;
    case ITEM_MASK:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_int64(s, 2, it->author);
      sqlite3_bind_blob64(s, 3, it->blob, it->len, SQLITE_STATIC);
      break;
    case ITEM_FACE_MAP:
      sqlite3_bind_int64(s, 1, it->session);
      sqlite3_bind_blob64(s, 2, it->blob, it->len, SQLITE_STATIC);
      break;
    default:
      break;
  }
  rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void finalize_all(srv_store *st) {
  for (int k = 0; k <= ITEM_LAST; k++) {
    sqlite3_finalize(st->stmt[k]);
    st->stmt[k] = NULL;
  }
}

/* Commits the batches of `list` (in order) as one transaction. Returns SQLITE_OK or the code,
 * with SQLite's reason in err. */
static int commit(srv_store *st, batch *list, char *err, size_t errlen) {
  sqlite3 *db = st->db;
  int rc = exec(db, "BEGIN IMMEDIATE", err, errlen);
  for (batch *b = list; rc == SQLITE_OK && b; b = b->next)
    for (uint32_t i = 0; rc == SQLITE_OK && i < b->count; i++) {
      rc = write_item(st, &b->items[i]);
      if (rc != SQLITE_OK) snprintf(err, errlen, "%s", sqlite3_errmsg(db));
    }
  if (rc == SQLITE_OK) {
    rc = exec(db, "COMMIT", err, errlen);
  }
  if (rc != SQLITE_OK) {
    char ignored[64];
    exec(db, "ROLLBACK", ignored, sizeof(ignored));
  }
  return rc;
}

static int reopen_rw(srv_store *st, char *why, size_t whylen);

static void *writer_main(void *arg) {
  srv_store *st = arg;
  pthread_mutex_lock(&st->lock);
  for (;;) {
    while (!st->stop && !st->todo && !((st->failed || st->readonly) && st->retry_now))
      pthread_cond_wait(&st->cond, &st->lock);
    if (st->stop && !st->todo) break;
    if (st->readonly) {
      st->retry_now = 0;
      pthread_mutex_unlock(&st->lock);
      char why[256];
      int ok = reopen_rw(st, why, sizeof(why)) == SQLITE_OK;
      pthread_mutex_lock(&st->lock);
      if (ok) { /* writable again: tell the loop (the batches waiting are written below) */
        batch *report = calloc(1, sizeof(batch));
        if (report) {
          report->report_only = 1;
          if (st->done_tail) st->done_tail->next = report;
          else st->done = report;
          st->done_tail = report;
        }
        pthread_mutex_unlock(&st->lock);
        uv_async_send(&st->async);
        pthread_mutex_lock(&st->lock);
      }
      if (!ok && !st->todo) continue; /* still read-only; what waits fails below like a full disk */
    }
    /* Failed batches come first: their records are older than anything waiting. */
    batch *list = st->todo;
    st->todo = st->todo_tail = NULL;
    st->retry_now = 0;
    pthread_mutex_unlock(&st->lock);
    batch *all = st->failed;
    if (all) {
      st->failed_tail->next = list;
      list = all;
    }
    st->failed = st->failed_tail = NULL;
    char err[256] = "";
    int rc = list ? commit(st, list, err, sizeof(err)) : SQLITE_OK;
    pthread_mutex_lock(&st->lock);
    for (batch *b = list, *next; b; b = next) {
      next = b->next;
      b->next = NULL;
      b->status = rc == SQLITE_OK ? 0 : SRV_EIO;
      snprintf(b->err, sizeof(b->err), "%s", err);
      /* A failed batch is reported now and kept for the retry: its records stay in order. The
       * loop gets a copy of the report (its waiters), the writer keeps the records. */
      if (rc != SQLITE_OK) {
        batch *report = calloc(1, sizeof(batch));
        if (report) {
          report->report_only = 1;
          report->status = SRV_EIO;
          snprintf(report->err, sizeof(report->err), "%s", err);
          report->waiters = b->waiters, report->nwait = b->nwait;
          b->waiters = NULL, b->nwait = b->capwait = 0;
          if (st->done_tail) st->done_tail->next = report;
          else st->done = report;
          st->done_tail = report;
        }
        if (st->failed_tail) st->failed_tail->next = b;
        else st->failed = b;
        st->failed_tail = b;
      } else {
        if (st->done_tail) st->done_tail->next = b;
        else st->done = b;
        st->done_tail = b;
      }
    }
    pthread_mutex_unlock(&st->lock);
    uv_async_send(&st->async);
    pthread_mutex_lock(&st->lock);
  }
  pthread_mutex_unlock(&st->lock);
  return NULL;
}

/* ---- the loop's side ----------------------------------------------------------------------------- */

static void hand_over(srv_store *st) {
  batch *b = st->open;
  if (!b || (b->count == 0 && b->nwait == 0)) return;
  st->open = NULL;
  st->inflight++;
  st->stats.commits_requested++;
  pthread_mutex_lock(&st->lock);
  if (st->todo_tail) st->todo_tail->next = b;
  else st->todo = b;
  st->todo_tail = b;
  pthread_cond_signal(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

static void on_prepare(uv_prepare_t *h) { hand_over(h->data); }

static void on_retry(uv_timer_t *t) {
  srv_store *st = t->data;
  pthread_mutex_lock(&st->lock);
  st->retry_now = 1;
  pthread_cond_signal(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

static void on_done(uv_async_t *h) {
  srv_store *st = h->data;
  pthread_mutex_lock(&st->lock);
  batch *list = st->done;
  st->done = st->done_tail = NULL;
  int still_failed = st->failed != NULL;
  pthread_mutex_unlock(&st->lock);
  for (batch *b = list, *next; b; b = next) {
    next = b->next;
    if (b->report_only && b->status == 0) {
      /* writable again (a read-only file system that is not any more) */
    } else if (b->status == 0) {
      st->inflight--;
      st->stats.commits++;
      st->stats.bytes_committed += 0;
      for (uint32_t i = 0; i < b->count; i++) st->stats.bytes_committed += b->items[i].len;
    } else {
      st->stats.commit_failures++;
      if (!st->is_failed)
        srv_log(SRV_LOG_ERROR, "store %s: cannot write: %s; edits are refused until it can", st->path, b->err);
      snprintf(st->failure, sizeof(st->failure), "%s", b->err);
      st->is_failed = 1;
    }
    for (uint32_t i = 0; i < b->nwait; i++) b->waiters[i].cb(b->waiters[i].arg, b->status, b->err);
    batch_free(b);
  }
  if (st->is_failed && !still_failed) {
    srv_log(SRV_LOG_INFO, "store %s: writing again; edits are accepted", st->path);
    st->is_failed = 0;
    st->failure[0] = '\0';
  }
  if (st->is_failed && !uv_is_active((uv_handle_t *)&st->retry)) uv_timer_start(&st->retry, on_retry, RETRY_MS, RETRY_MS);
  if (!st->is_failed) uv_timer_stop(&st->retry);
}

/* ---- WAL checkpoints, on the pool ------------------------------------------------------------- */

#define CKPT_WAL_BYTES_N 4194304 /* a checkpoint once the WAL is this large (bytes) */
#define CKPT_WAL_BYTES ((size_t)CKPT_WAL_BYTES_N)
#define STORE_STR_(x) #x
#define STORE_STR(x) STORE_STR_(x)

/* Copies the WAL into the database beside the writer. A PASSIVE checkpoint copies what no
 * reader still needs and never waits; when it copied everything, a TRUNCATE follows that takes
 * the file back to zero bytes if no reader or writer is inside the WAL right now (it does not
 * wait: the busy timeout is zero, the next tick tries again). Otherwise the writer starts the
 * WAL over from its beginning at its next commit (journal_size_limit trims the file then), so
 * the file stays near CKPT_WAL_BYTES under steady load. The counts go back to the loop, which
 * logs them when the WAL falls behind. */
static void ckpt_work(uv_work_t *req) {
  srv_store *st = req->data;
  st->ckpt_rc = SQLITE_CANTOPEN;
  st->ckpt_log = st->ckpt_copied = -1;
  if (!st->ckpt_db &&
      sqlite3_open_v2(st->path, &st->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
    sqlite3_close(st->ckpt_db);
    st->ckpt_db = NULL;
    return;
  }
  sqlite3_busy_timeout(st->ckpt_db, 0);
  /* SQLite 3.40: a connection that has read nothing has not opened the WAL index yet, and a
   * checkpoint on it returns OK with log = -1 and copies nothing. One read opens it. */
  st->ckpt_rc = sqlite3_exec(st->ckpt_db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
  if (st->ckpt_rc != SQLITE_OK) return;
  st->ckpt_rc = sqlite3_wal_checkpoint_v2(st->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &st->ckpt_log,
                                          &st->ckpt_copied);
  if (st->ckpt_rc == SQLITE_OK && st->ckpt_log >= 0 && st->ckpt_copied == st->ckpt_log) {
    int log = -1, copied = -1; /* (SQLITE_BUSY: someone is inside the WAL; the next tick tries again) */
    sqlite3_wal_checkpoint_v2(st->ckpt_db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &copied);
  }
}

static void store_free(srv_store *st) {
  sqlite3_close(st->ckpt_db);
  pthread_mutex_destroy(&st->lock);
  pthread_cond_destroy(&st->cond);
  free(st);
}

static void ckpt_done(uv_work_t *req, int status) {
  srv_store *st = req->data;
  (void)status;
  st->ckpt_running = 0;
  int behind = st->ckpt_rc != SQLITE_OK || st->ckpt_log < 0 || st->ckpt_copied < st->ckpt_log;
  if (behind && !st->ckpt_behind && st->stop == 0)
    srv_log(SRV_LOG_WARN, "store %s: the WAL checkpoint %s (%d of %d pages copied); the WAL grows until it can",
            st->path, st->ckpt_rc != SQLITE_OK ? sqlite3_errstr(st->ckpt_rc) : "falls behind a reader",
            st->ckpt_copied, st->ckpt_log);
  else if (!behind && st->ckpt_behind && st->stop == 0)
    srv_log(SRV_LOG_INFO, "store %s: the WAL checkpoint caught up (%d pages)", st->path, st->ckpt_log);
  st->ckpt_behind = behind;
  if (st->stop == 5) store_free(st); /* closed while this ran: the last one out frees */
}

static void on_ckpt_timer(uv_timer_t *t) {
  srv_store *st = t->data;
  char wal[1100];
  struct stat sb;
  snprintf(wal, sizeof(wal), "%s-wal", st->path);
  if (st->ckpt_running || st->readonly || stat(wal, &sb) != 0 || (size_t)sb.st_size < CKPT_WAL_BYTES) return;
  st->ckpt_req.data = st;
  if (uv_queue_work(st->loop, &st->ckpt_req, ckpt_work, ckpt_done) == 0) st->ckpt_running = 1;
}

/* The store is freed once its four handles are closed (stop counts them from 1) and no
 * checkpoint job runs. */
static void on_handle_closed(uv_handle_t *h) {
  srv_store *st = h->data;
  if (++st->stop < 5 || st->ckpt_running) return;
  store_free(st);
}

/* The schema, one step per version: a new file runs every step, an older one the steps after
 * its user_version, each in a transaction of its own. Version 1 is what deformd wrote before
 * the schema had versions (its tables were always created IF NOT EXISTS). */
#define SCHEMA_VERSION 6
static const char *const schema_steps[SCHEMA_VERSION + 1] = {
    [1] = "CREATE TABLE IF NOT EXISTS sessions(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created REAL, "
          "mesh BLOB);"
          "CREATE TABLE IF NOT EXISTS authors(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
          "CREATE TABLE IF NOT EXISTS ops(session INTEGER NOT NULL, version INTEGER NOT NULL, first_version "
          "INTEGER NOT NULL, step INTEGER NOT NULL, author INTEGER NOT NULL, time REAL NOT NULL, kind INTEGER NOT "
          "NULL, body BLOB, changed INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(session, version)) WITHOUT ROWID;"
          "CREATE TABLE IF NOT EXISTS checkpoints(session INTEGER NOT NULL, version INTEGER NOT NULL, body BLOB, "
          "PRIMARY KEY(session, version)) WITHOUT ROWID;"
          "CREATE TABLE IF NOT EXISTS clips(session INTEGER NOT NULL, name TEXT NOT NULL, body BLOB, seq INTEGER "
          "NOT NULL, PRIMARY KEY(session, name)) WITHOUT ROWID;"
          "CREATE TABLE IF NOT EXISTS tokens(id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, role INTEGER NOT "
          "NULL, session TEXT, user TEXT NOT NULL, created REAL NOT NULL);",
    /* 2: what an undo or redo acted on (a revert: the version it went back to), and the undo
     * history a checkpoint was taken with (srv_history.c encodes it). */
    [2] = "CREATE TABLE IF NOT EXISTS steps(session INTEGER NOT NULL, step INTEGER NOT NULL, undo_of INTEGER NOT "
          "NULL, skipped INTEGER NOT NULL, author INTEGER NOT NULL, kind INTEGER NOT NULL, PRIMARY KEY(session, "
          "step)) WITHOUT ROWID;"
          "ALTER TABLE checkpoints ADD COLUMN history BLOB;",
    /* 3: the session's up axis (session.create's `up`); sessions stored before it are Y-up. */
    [3] = "ALTER TABLE sessions ADD COLUMN up TEXT NOT NULL DEFAULT 'y';",
    /* 4: each author's mask and its undo steps, one row per session and author (srv_mask.c
     * encodes the body); a mask is not an operation, so it is not in ops. */
    [4] = "CREATE TABLE IF NOT EXISTS masks(session INTEGER NOT NULL, author INTEGER NOT NULL, body BLOB NOT NULL, "
          "PRIMARY KEY(session, author)) WITHOUT ROWID;",
    /* 5: a session's face mapping (face.map_set), one row per session: the JSON face.map_get
     * answers with; a mapping is not an operation (it changes no weight), so it is not in ops. */
    [5] = "CREATE TABLE IF NOT EXISTS face_maps(session INTEGER NOT NULL PRIMARY KEY, body BLOB NOT NULL) "
          "WITHOUT ROWID;",
    /* 6: animated texture clips (texclip.upload; srv_texclip.c encodes the body), in upload order. */
    [6] = "CREATE TABLE IF NOT EXISTS texclips(session INTEGER NOT NULL, name TEXT NOT NULL, body BLOB NOT NULL, seq "
          "INTEGER NOT NULL, PRIMARY KEY(session, name)) WITHOUT ROWID;",
};

static int64_t pragma_int(sqlite3 *db, const char *sql, int *rc) {
  sqlite3_stmt *s = NULL;
  int64_t v = 0;
  *rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
  if (*rc == SQLITE_OK && (*rc = sqlite3_step(s)) == SQLITE_ROW) v = sqlite3_column_int64(s, 0), *rc = SQLITE_OK;
  sqlite3_finalize(s);
  return v;
}

/* Reads (and writes nothing) what the file is: *version its schema version, 0 for an empty
 * database. Returns SQLITE_OK, SQLITE_NOTADB with the reason (to follow the file's name) for a
 * file deformd must not take (another program's database, a newer deformd's), or another
 * SQLite code. */
int srv__store_recognise(sqlite3 *db, int *version, char *why, size_t whylen) {
  int rc;
  int64_t uv = pragma_int(db, "PRAGMA user_version", &rc);
  int64_t tables = rc == SQLITE_OK ? pragma_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", &rc) : 0;
  int64_t ours = rc == SQLITE_OK ? pragma_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                                  "name IN ('sessions', 'ops')", &rc) : 0;
  if (rc != SQLITE_OK) {
    snprintf(why, whylen, "%s", sqlite3_errmsg(db));
    return rc;
  }
  *version = (int)uv;
  if (uv > SCHEMA_VERSION) {
    snprintf(why, whylen, "has schema version %lld, newer than this deformd's %d (a newer deformd wrote it): "
             "run that version, or give another --data", (long long)uv, SCHEMA_VERSION);
    return SQLITE_NOTADB;
  }
  if ((uv == 0 && tables == 0) || (uv >= 1 && ours == 2)) return SQLITE_OK;
  snprintf(why, whylen, "is not a deformd store (user_version %lld, %lld tables%s); it is left as it is",
           (long long)uv, (long long)tables, uv ? ", no sessions and ops" : "");
  return SQLITE_NOTADB;
}

/* Brings the schema from `from` to SCHEMA_VERSION, one transaction per step. A version 1 store
 * runs step 1 again (IF NOT EXISTS): one last opened by an older deformd may lack a table. */
static int migrate(srv_store *st, int from, char *why, size_t whylen) {
  int rc = SQLITE_OK;
  for (int v = from > 1 ? from + 1 : 1; rc == SQLITE_OK && v <= SCHEMA_VERSION; v++) {
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; COMMIT", v);
    rc = exec(st->db, "BEGIN IMMEDIATE", why, whylen);
    if (rc == SQLITE_OK) rc = exec(st->db, schema_steps[v], why, whylen);
    if (rc == SQLITE_OK) rc = exec(st->db, sql, why, whylen);
    if (rc != SQLITE_OK) {
      char ignored[64];
      exec(st->db, "ROLLBACK", ignored, sizeof(ignored));
    }
  }
  if (rc == SQLITE_OK && from > 0)
    srv_log(SRV_LOG_INFO, "store %s: schema version %d migrated to %d", st->path, from, SCHEMA_VERSION);
  return rc;
}

/* Opens the database for writing: what it is first (nothing is written into a file deformd
 * does not recognise), then WAL, the durability asked for, the schema. Returns an SQLite code
 * with the reason in why: SQLITE_NOTADB for a file that is not to be taken. */
static int open_rw(srv_store *st, char *why, size_t whylen) {
  int version = 0;
  int rc = sqlite3_open_v2(st->path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(st->db, 5000);
    rc = srv__store_recognise(st->db, &version, why, whylen);
    /* Closing must not fold a WAL it did not write into a file it does not take. */
    if (rc == SQLITE_NOTADB) sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
  }
  if (rc == SQLITE_OK) rc = exec(st->db, "PRAGMA journal_mode = WAL", why, whylen);
  if (rc == SQLITE_OK)
    rc = exec(st->db, st->full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL", why, whylen);
  if (rc == SQLITE_OK && version < SCHEMA_VERSION) rc = migrate(st, version, why, whylen);
  /* Commits never checkpoint the WAL (that copy and its fsyncs would land on an editor's
   * answer): a pool job does it beside them (ckpt_work). */
  if (rc == SQLITE_OK) rc = exec(st->db, "PRAGMA wal_autocheckpoint = 0", why, whylen);
  /* When a commit starts the WAL over (everything in it copied), the file is cut to this. */
  if (rc == SQLITE_OK) rc = exec(st->db, "PRAGMA journal_size_limit = " STORE_STR(CKPT_WAL_BYTES_N), why, whylen);
  if (rc != SQLITE_OK && !why[0]) snprintf(why, whylen, "%s", sqlite3_errmsg(st->db));
  return rc;
}

/* The writer's second chance on a read-only file system: the read-only handle goes, a
 * writable one comes if it can. */
static int reopen_rw(srv_store *st, char *why, size_t whylen) {
  finalize_all(st);
  sqlite3_close(st->db);
  st->db = NULL;
  why[0] = '\0';
  int rc = open_rw(st, why, whylen);
  if (rc == SQLITE_OK) {
    st->readonly = 0;
    return rc;
  }
  sqlite3_close(st->db);
  st->db = NULL;
  sqlite3_open_v2(st->path, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  return rc;
}

int srv_store_open(uv_loop_t *loop, const char *dir, int full, srv_store **out, char *err, size_t errlen) {
  *out = NULL;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot create the data directory %s: %s", dir, strerror(errno));
    return SRV_EIO;
  }
  srv_store *st = calloc(1, sizeof(*st));
  if (!st) return SRV_EINTERNAL;
  snprintf(st->path, sizeof(st->path), "%s/%s", dir, STORE_FILE);
  st->full = full;
  st->loop = loop;
  char why[256] = "";
  int rc = open_rw(st, why, sizeof(why));
  struct statvfs fs;
  if (rc != SQLITE_OK && rc != SQLITE_NOTADB && access(st->path, R_OK) == 0 && statvfs(dir, &fs) == 0 &&
      (fs.f_flag & ST_RDONLY)) {
    /* A read-only file system: serve what is stored, refuse edits, and try again every second
     * (an operator may remount it). */
    sqlite3_close(st->db);
    st->db = NULL;
    if (sqlite3_open_v2(st->path, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK) {
      st->readonly = 1;
      st->is_failed = 1;
      snprintf(st->failure, sizeof(st->failure), "the data directory %s is on a read-only file system", dir);
      srv_log(SRV_LOG_ERROR, "store %s: %s; sessions are served, edits are refused until it is writable", st->path,
              st->failure);
      rc = SQLITE_OK;
    }
  }
  if (rc != SQLITE_OK) {
    if (rc == SQLITE_NOTADB) snprintf(err, errlen, "%s %s", st->path, why);
    else snprintf(err, errlen, "cannot open %s: %s", st->path, why[0] ? why : sqlite3_errmsg(st->db));
    sqlite3_close(st->db);
    free(st);
    return SRV_EIO;
  }
  pthread_mutex_init(&st->lock, NULL);
  pthread_cond_init(&st->cond, NULL);
  uv_prepare_init(loop, &st->prepare);
  st->prepare.data = st;
  uv_prepare_start(&st->prepare, on_prepare);
  uv_async_init(loop, &st->async, on_done);
  st->async.data = st;
  uv_timer_init(loop, &st->retry);
  st->retry.data = st;
  uv_timer_init(loop, &st->ckpt_timer);
  st->ckpt_timer.data = st;
  uv_timer_start(&st->ckpt_timer, on_ckpt_timer, 1000, 1000);
  if (pthread_create(&st->thread, NULL, writer_main, st) != 0) {
    snprintf(err, errlen, "cannot start the store's writer thread");
    sqlite3_close(st->db);
    st->stop = 1; /* the handles' close callbacks free st */
    uv_close((uv_handle_t *)&st->prepare, on_handle_closed);
    uv_close((uv_handle_t *)&st->async, on_handle_closed);
    uv_close((uv_handle_t *)&st->retry, on_handle_closed);
    uv_close((uv_handle_t *)&st->ckpt_timer, on_handle_closed);
    return SRV_EINTERNAL;
  }
  if (st->readonly) uv_timer_start(&st->retry, on_retry, RETRY_MS, RETRY_MS);
  else srv_log(SRV_LOG_INFO, "store %s (WAL, synchronous=%s)", st->path, full ? "FULL" : "NORMAL");
  *out = st;
  return 0;
}

void srv_store_close(srv_store *st) {
  if (!st) return;
  hand_over(st);
  pthread_mutex_lock(&st->lock);
  st->stop = 1;
  pthread_cond_signal(&st->cond);
  pthread_mutex_unlock(&st->lock);
  pthread_join(st->thread, NULL);
  /* What committed in the last moments: run its callbacks (answers go nowhere now). */
  on_done(&st->async);
  batch_free(st->open);
  for (batch *b = st->failed, *next; b; b = next) {
    next = b->next;
    batch_free(b);
  }
  for (batch *b = st->todo, *next; b; b = next) {
    next = b->next;
    batch_free(b);
  }
  /* The last checkpoint folds the WAL in, so a clean stop leaves one file. */
  char ignored[64];
  if (st->db && !st->readonly) exec(st->db, "PRAGMA wal_checkpoint(TRUNCATE)", ignored, sizeof(ignored));
  finalize_all(st);
  sqlite3_close(st->db);
  uv_close((uv_handle_t *)&st->prepare, on_handle_closed);
  uv_close((uv_handle_t *)&st->async, on_handle_closed);
  uv_close((uv_handle_t *)&st->retry, on_handle_closed);
  uv_close((uv_handle_t *)&st->ckpt_timer, on_handle_closed);
}

/* ---- queued writes ----------------------------------------------------------------------------- */

int srv_store_put_session(srv_store *st, int64_t sid, const char *name, double created, char up,
                          const void *mesh_blob, size_t len) {
  item it = {.kind = ITEM_SESSION, .session = sid, .name = (char *)name, .time = created, .len = len, .up = up};
  return push(st, &it, mesh_blob);
}

int srv_store_delete_session(srv_store *st, int64_t sid) {
  item it = {.kind = ITEM_SESSION_DELETE, .session = sid};
  return push(st, &it, NULL);
}

int srv_store_put_author(srv_store *st, uint32_t id, const char *name) {
  item it = {.kind = ITEM_AUTHOR, .author = id, .name = (char *)name};
  return push(st, &it, NULL);
}

int srv_store_put_op(srv_store *st, int64_t sid, const srv_store_op *op) {
  item it = {.kind = ITEM_OP, .session = sid, .v0 = op->first_version, .v1 = op->version, .step = op->step,
             .author = op->author, .changed = op->changed, .time = op->time, .op_kind = op->kind, .len = op->len};
  st->stats.ops_queued++;
  return push(st, &it, op->body);
}

int srv_store_put_checkpoint(srv_store *st, int64_t sid, uint64_t version, const void *body, size_t len) {
  return srv_store_put_checkpoint_history(st, sid, version, body, len, NULL, 0);
}

int srv_store_put_checkpoint_history(srv_store *st, int64_t sid, uint64_t version, const void *body, size_t len,
                                     const void *history, size_t hlen) {
  uint8_t *both = malloc(len + hlen + 1);
  if (!both) return SRV_EINTERNAL;
  if (len) memcpy(both, body, len);
  if (hlen) memcpy(both + len, history, hlen);
  item it = {.kind = ITEM_CHECKPOINT, .session = sid, .v0 = len, .v1 = version, .len = len + hlen};
  int rc = push(st, &it, both);
  free(both);
  return rc;
}

int srv_store_put_step(srv_store *st, int64_t sid, uint64_t step, uint64_t undo_of, uint32_t skipped, uint32_t author,
                       int cause) {
  item it = {.kind = ITEM_STEP, .session = sid, .step = step, .v1 = undo_of, .changed = skipped, .author = author,
             .op_kind = cause};
  return push(st, &it, NULL);
}

int srv_store_put_clip(srv_store *st, int64_t sid, const char *name, const void *body, size_t len) {
  item it = {.kind = ITEM_CLIP, .session = sid, .name = (char *)name, .len = len};
  return push(st, &it, body);
}

int srv_store_put_texclip(srv_store *st, int64_t sid, const char *name, const void *body, size_t len) {
  item it = {.kind = ITEM_TEXCLIP, .session = sid, .name = (char *)name, .len = len};
  return push(st, &it, body);
}

int srv_store_put_mask(srv_store *st, int64_t sid, uint32_t author, const void *body, size_t len) {
  item it = {.kind = ITEM_MASK, .session = sid, .author = author, .len = len};
  return push(st, &it, body);
}

int srv_store_put_face_map(srv_store *st, int64_t sid, const char *json, size_t len) {
  item it = {.kind = ITEM_FACE_MAP, .session = sid, .len = len};
  return push(st, &it, json);
}

int srv_store_compact(srv_store *st, int64_t sid, uint64_t version) {
  item it = {.kind = ITEM_COMPACT, .session = sid, .v1 = version};
  return push(st, &it, NULL);
}

int srv_store_put_token(srv_store *st, int64_t id, const uint8_t hash[SRV_STORE_HASH], int role, const char *session,
                        const char *user, double created) {
  size_t ns = session ? strlen(session) : 0;
  uint8_t blob[SRV_STORE_HASH + PROTO_MAX_NAME];
  if (ns > PROTO_MAX_NAME) return SRV_EPARAMS;
  memcpy(blob, hash, SRV_STORE_HASH);
  if (ns) memcpy(blob + SRV_STORE_HASH, session, ns);
  item it = {.kind = ITEM_TOKEN, .session = id, .op_kind = role, .name = (char *)user, .time = created,
             .len = SRV_STORE_HASH + ns};
  return push(st, &it, blob);
}

int srv_store_delete_token(srv_store *st, int64_t id) {
  item it = {.kind = ITEM_TOKEN_DELETE, .session = id};
  return push(st, &it, NULL);
}

int srv_store_after_commit(srv_store *st, srv_store_cb cb, void *arg) {
  if (!st->open || (st->open->count == 0 && st->open->nwait == 0)) {
    if (st->inflight == 0 && !st->is_failed) {
      cb(arg, 0, "");
      return 0;
    }
  }
  /* Behind everything queued so far: the open batch, which commits after those in flight. */
  batch *b = open_batch(st);
  if (!b) return SRV_EINTERNAL;
  if (b->nwait == b->capwait) {
    uint32_t cap = b->capwait ? 2 * b->capwait : 8;
    waiter *g = realloc(b->waiters, sizeof(waiter) * cap);
    if (!g) return SRV_EINTERNAL;
    b->waiters = g;
    b->capwait = cap;
  }
  b->waiters[b->nwait++] = (waiter){cb, arg};
  return 0;
}

int srv_store_failed(const srv_store *st, char *why, size_t len) {
  if (!st || !st->is_failed) return 0;
  snprintf(why, len, "%s", st->failure);
  return 1;
}

const char *srv_store_path(const srv_store *st) { return st->path; }

void srv_store_get_stats(const srv_store *st, srv_store_stats *out) { *out = st->stats; }
