/*
 * srv_restore.h — restoring a session from the store.
 */
#ifndef DEFORMD_SRV_RESTORE_H
#define DEFORMD_SRV_RESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "srv_session.h"

/* Rebuilds stored session `sid` up to `up_to` (UINT64_MAX: all of it, with its clips) on any
 * thread: stored mesh, newest checkpoint at or below, the records after it replayed. With
 * with_history the steps are rebuilt (the replayed ones undoable). Returns 0 with a new
 * session (one reference, not in any server) or an SRV_E* code with a reason. */
int srv_restore_session(const char *db_path, int64_t sid, uint64_t up_to, int with_history, uint32_t max_vertices,
                        srv_session **out, char *err, size_t errlen);

/* A stored session that does not restore: the state the records before the first one that
 * fails made (no history, not in any server), for session.export. Returns 0 with it (one
 * reference) or an SRV_E* code with a reason (its mesh or checkpoint does not read). */
int srv_restore_readable(const char *db_path, int64_t sid, uint32_t max_vertices, srv_session **out, char *err,
                         size_t errlen);
/* deformd --check-store DIR: checks DIR/deformd.sqlite3 without writing to it — what the file is
 * (schema version), SQLite's integrity_check, then every session restored as a start would,
 * history included — and prints one line per finding on stdout. Returns the exit status: 0
 * sound, 1 no store deformd can read there (missing, unreadable, another program's, a newer
 * schema), 2 damaged (integrity_check fails, or a session does not restore). */
int srv_check_store_main(const char *dir, uint32_t max_vertices);

#endif
