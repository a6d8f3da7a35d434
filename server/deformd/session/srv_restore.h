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

#endif
