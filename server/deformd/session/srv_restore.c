/*
 * srv_restore.c — a session rebuilt from the store, on any thread: its stored mesh, the newest
 * checkpoint at or below the version asked for, then every operation record after it replayed
 * through srv_session_check() and srv_session_apply() — the code that applied it the first
 * time — so the result is bit-identical to the session that wrote them. Used at start (every
 * stored session, up to its last version, with its history) and by history.revert and
 * session.export {version} (a scratch copy at an older version).
 *
 * Also `deformd --check-store` (srv_check_store_main): every stored session restored the same
 * way, read-only, to say which ones would not come back.
 *
 * DOES NOT touch the server: the session it returns is added to the server by the caller, on
 * the loop thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mesh.h"
#include "srv_restore.h"
#include "srv_error.h"
#include "srv_store.h"
#include "srv_server.h"
#include "srv_op.h"
#include "srv_session.h"
#include "srv_record.h"
#include "srv_history.h"
#include "srv_mask.h"
#include "srv_anim.h"
#include "srv_face.h"
#include "srv_texclip.h"

typedef struct replay_ctx {
  srv_server *fake;   /* on_applied only: history without writes */
  srv_session *s;
  int rc;
  uint64_t last;
  int applied_bad; /* a record applied as another version: the state is past what the log says */
  char *err;
  size_t errlen;
} replay_ctx;

static int replay_row(const srv_store_row *row, void *arg) {
  replay_ctx *c = arg;
  srv_record_op r;
  int rc = srv_record_decode_op(c->s, row->op.body, row->op.len, &r, c->err, c->errlen);
  if (rc == 0) {
    r.op.author = row->op.author;
    r.op.cause = (uint8_t)row->op.kind;
    r.op.step = row->op.step;
    char why[256];
    srv_history_set_replay_time(c->s, row->op.time);
    rc = srv_session_check(c->s, &r.op, why, sizeof(why));
    if (rc) {
      snprintf(c->err, c->errlen, "version %llu does not apply again: %s", (unsigned long long)row->op.version, why);
      rc = SRV_EIO;
    } else if (srv_session_apply(c->fake, c->s, &r.op) != row->op.first_version ||
               row->op.version < row->op.first_version) {
      snprintf(c->err, c->errlen, "version %llu replays as %llu", (unsigned long long)row->op.version,
               (unsigned long long)c->s->version);
      c->applied_bad = 1;
      rc = SRV_EIO;
    } else {
      /* A face input's coalesced run (srv_face.c) covers versions first..last: applied as one
       * operation, the session continues at its last version, where the live session was. The
       * session is not in the server's table yet (invariant 10), so nobody sees the jump. */
      c->s->version = row->op.version;
    }
    srv_record_op_fini(&r);
  }
  c->rc = rc;
  c->last = row->op.version;
  return rc != 0;
}

typedef struct steps_ctx {
  srv_session *s;
  int rc;
} steps_ctx;

static int step_row(const srv_store_row *row, void *arg) {
  steps_ctx *c = arg;
  srv_history_entry e = {0};
  e.step = row->op.step;
  e.author = row->op.author;
  e.cause = row->op.kind;
  e.time = row->op.time;
  e.first_version = row->op.first_version;
  e.last_version = row->op.version;
  e.ops = 1;
  e.changed = row->op.changed;
  c->rc = srv_history_add_old_step(c->s, &e);
  return c->rc != 0;
}

static int meta_row(const srv_store_row *row, void *arg) {
  steps_ctx *c = arg;
  c->rc = srv_history_add_step_meta(c->s, row->op.step, row->op.first_version, row->op.changed, row->op.author,
                                    row->op.kind);
  return c->rc != 0;
}

typedef struct name_ctx {
  int64_t sid;
  char *name;
  double created;
  char up; /* the session row's up axis */
} name_ctx;

static int name_row(const srv_store_row *row, void *arg) {
  name_ctx *c = arg;
  if (row->session != c->sid) return 0;
  c->name = strdup(row->name);
  c->created = row->time;
  c->up = row->up;
  return 1;
}

typedef struct clip_ctx {
  srv_session *s;
  int rc;
  char *err;
  size_t errlen;
} clip_ctx;

static int clip_row(const srv_store_row *row, void *arg) {
  clip_ctx *c = arg;
  c->rc = srv_record_load_clip(c->s, row->name, row->op.body, row->op.len, c->err, c->errlen);
  return c->rc != 0;
}

static int texclip_row(const srv_store_row *row, void *arg) {
  clip_ctx *c = arg;
  c->rc = srv_texclip_load(c->s, row->name, row->op.body, row->op.len, c->err, c->errlen);
  return c->rc != 0;
}

static int mask_row(const srv_store_row *row, void *arg) {
  clip_ctx *c = arg;
  c->rc = srv_mask_load(c->s, row->op.author, row->op.body, row->op.len, c->err, c->errlen);
  return c->rc != 0;
}

/* srv_restore_session; with `partial`, a failure in the replay leaves there the session as the
 * records before the one that failed made it (or NULL). */
static int restore(const char *db_path, int64_t sid, uint64_t up_to, int with_history, uint32_t max_vertices,
                   srv_session **out, srv_session **partial, char *err, size_t errlen) {
  *out = NULL;
  if (partial) *partial = NULL;
  int replayed = 0;
  srv_store_reader *r = NULL;
  srv_session *s = NULL;
  srv_server *fake = NULL;
  srv_store_blob mesh_bytes = {0}, cp = {0};
  name_ctx nc = {sid, NULL, 0, 'y'};
  int rc = srv_store_reader_open(db_path, &r, err, errlen);
  if (rc) goto out;
  rc = srv_store_read_sessions(r, name_row, &nc, err, errlen);
  if (rc == 0 && !nc.name) {
    snprintf(err, errlen, "the store has no session %lld", (long long)sid);
    rc = SRV_ENOSESSION;
  }
  if (rc) goto out;
  rc = srv_store_read_mesh(r, sid, &mesh_bytes, err, errlen);
  if (rc) goto out;
  mesh *m = NULL;
  char why[MESH_ERR_LEN];
  if (mesh_blob_read(mesh_bytes.data, mesh_bytes.len, max_vertices, &m, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "the stored mesh of session '%s' does not read: %s", nc.name, why);
    rc = SRV_EIO;
    goto out;
  }
  if (srv_session_create(nc.name, m, &s, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "session '%s': %s", nc.name, why);
    rc = SRV_EIO;
    goto out;
  }
  s->store_id = sid;
  s->up = nc.up;
  s->base_targets = s->mesh->target_count;
  s->restoring = 1;
  if (with_history && srv_history_init(s) != 0) {
    rc = SRV_EINTERNAL;
    goto out;
  }
  if (with_history) { /* what each undo, redo and revert acted on */
    steps_ctx mc = {s, 0};
    rc = srv_store_read_steps(r, sid, meta_row, &mc, err, errlen);
    if (rc == 0) rc = mc.rc;
    if (rc) goto out;
  }
  rc = srv_store_read_checkpoint(r, sid, up_to, &cp, err, errlen);
  if (rc) goto out;
  if (cp.data && (rc = srv_record_load_checkpoint(s, cp.data, cp.len, err, errlen)) != 0) goto out;
  if (with_history) { /* the steps before the checkpoint: listed, not undoable */
    steps_ctx sc = {s, 0};
    rc = srv_store_read_ops_meta(r, sid, 0, s->version, step_row, &sc, err, errlen);
    if (rc == 0) rc = sc.rc;
    if (rc) goto out;
    /* ... and the undo history the checkpoint was taken with: those steps undo again. */
    srv_store_blob hb = {0};
    if (cp.data) rc = srv_store_read_checkpoint_history(r, sid, cp.version, &hb, err, errlen);
    if (rc == 0 && hb.data) rc = srv_history_load(s, hb.data, hb.len, err, errlen);
    free(hb.data);
    if (rc) goto out;
  }
  fake = calloc(1, sizeof(*fake));
  if (!fake) {
    rc = SRV_EINTERNAL;
    goto out;
  }
  fake->on_applied = with_history ? srv_history_on_applied : NULL;
  replay_ctx rcx = {fake, s, 0, s->version, 0, err, errlen};
  rc = srv_store_read_ops(r, sid, s->version, up_to, replay_row, &rcx, err, errlen);
  if (rc == 0) rc = rcx.rc;
  replayed = !rcx.applied_bad;
  if (rc) goto out;
  if (up_to == UINT64_MAX) {
    clip_ctx cc = {s, 0, err, errlen};
    rc = srv_store_read_clips(r, sid, clip_row, &cc, err, errlen);
    if (rc == 0) rc = cc.rc;
    /* The authors' masks (schema 4 on): the current ones, beside the shape, not in it. */
    int schema = 0;
    if (rc == 0) rc = srv_store_reader_schema(r, &schema, err, errlen);
    if (rc == 0 && schema >= 4) rc = srv_store_read_masks(r, sid, mask_row, &cc, err, errlen);
    if (rc == 0) rc = cc.rc;
    if (rc == 0 && schema >= 5) rc = srv_store_read_texclips(r, sid, texclip_row, &cc, err, errlen);
    if (rc == 0) rc = cc.rc;
    if (rc == 0) srv_mask_restore_done(s);
    /* Its face mapping (schema 5 on), as face.map_set last left it. */
    srv_store_blob fm = {0};
    if (rc == 0 && schema >= 5) rc = srv_store_read_face_map(r, sid, &fm, err, errlen);
    if (rc == 0 && fm.data) rc = srv_face_map_load(s, fm.data, fm.len, err, errlen);
    free(fm.data);
    if (rc) goto out;
  } else if (s->version != up_to) {
    snprintf(err, errlen, "version %llu of session '%s' is not in the store (its history starts later or ends at %llu)",
             (unsigned long long)up_to, nc.name, (unsigned long long)s->version);
    rc = SRV_ERANGE;
    goto out;
  }
  srv_history_set_replay_time(s, 0);
  srv_history_restore_done(s);
  s->restoring = 0;
  *out = s;
  s = NULL;
out:
  if (s && partial && replayed) {
    srv_history_set_replay_time(s, 0);
    srv_history_restore_done(s);
    s->restoring = 0;
    *partial = s;
    s = NULL;
  }
  srv_session_unref(s);
  free(fake);
  free(nc.name);
  free(mesh_bytes.data);
  free(cp.data);
  srv_store_reader_close(r);
  return rc;
}

int srv_restore_session(const char *db_path, int64_t sid, uint64_t up_to, int with_history, uint32_t max_vertices,
                        srv_session **out, char *err, size_t errlen) {
  return restore(db_path, sid, up_to, with_history, max_vertices, out, NULL, err, errlen);
}

int srv_restore_readable(const char *db_path, int64_t sid, uint32_t max_vertices, srv_session **out, char *err,
                         size_t errlen) {
  srv_session *whole = NULL;
  int rc = restore(db_path, sid, UINT64_MAX, 0, max_vertices, &whole, out, err, errlen);
  if (rc == 0) *out = whole; /* (it restores after all) */
  return *out ? 0 : rc ? rc : SRV_EIO;
}

/* ---- deformd --check-store ------------------------------------------------------------------- */

typedef struct list_ctx {
  int64_t *ids;
  char **names;
  uint32_t n;
  int failed;
} list_ctx;

static int list_row(const srv_store_row *row, void *arg) {
  list_ctx *l = arg;
  int64_t *ids = realloc(l->ids, sizeof(int64_t) * (l->n + 1));
  if (ids) l->ids = ids;
  char **names = realloc(l->names, sizeof(char *) * (l->n + 1));
  if (names) l->names = names;
  if (!ids || !names || !(l->names[l->n] = strdup(row->name ? row->name : "?"))) return l->failed = 1;
  l->ids[l->n++] = row->session;
  return 0;
}

int srv_check_store_main(const char *dir, uint32_t max_vertices) {
  char path[1100], err[1024];
  snprintf(path, sizeof(path), "%s/deformd.sqlite3", dir);
  if (access(path, R_OK) != 0) {
    printf("%s: no store to read: %s\n", path, strerror(errno));
    return 1;
  }
  srv_store_reader *r = NULL;
  int version = 0, status = 0;
  list_ctx l = {0};
  if (srv_store_reader_open(path, &r, err, sizeof(err)) != 0) {
    printf("%s\n", err);
    return 1;
  }
  if (srv_store_reader_schema(r, &version, err, sizeof(err)) != 0) {
    printf("%s %s\n", path, err);
    srv_store_reader_close(r);
    return 1;
  }
  if (srv_store_integrity_ok(r, err, sizeof(err))) {
    printf("%s: schema version %d, integrity_check ok\n", path, version);
  } else {
    printf("%s: schema version %d, damaged: %s\n", path, version, err);
    status = 2;
  }
  if (srv_store_read_sessions(r, list_row, &l, err, sizeof(err)) != 0 || l.failed) {
    printf("%s: the sessions do not read: %s\n", path, l.failed ? "out of memory" : err);
    status = 2;
  }
  srv_store_reader_close(r);
  uint32_t damaged = 0;
  for (uint32_t i = 0; i < l.n; i++) {
    srv_session *s = NULL;
    if (srv_restore_session(path, l.ids[i], UINT64_MAX, 1, max_vertices, &s, err, sizeof(err)) == 0) {
      printf("session %s: ok at version %llu\n", l.names[i], (unsigned long long)s->version);
      srv_session_unref(s);
    } else {
      printf("session %s: damaged: %s\n", l.names[i], err);
      damaged++;
      status = 2;
    }
    free(l.names[i]);
  }
  printf("%u session%s, %u damaged\n", l.n, l.n == 1 ? "" : "s", damaged);
  free(l.names);
  free(l.ids);
  return status;
}
