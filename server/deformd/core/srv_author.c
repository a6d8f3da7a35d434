/*
 * srv_author.c — authors: the names every operation records as its author (the user of an
 * access token, a name given with `hello`, or anonymous-<connection id>), kept as small ids
 * that the store maps to names once.
 *
 * Ids are server-wide and stable across restarts (the store keeps the table). Id 0 is "server"
 * (what the service does by itself), id 1 "player" (animation playback).
 *
 * DOES NOT authenticate anyone: it only names.
 */
#include <stdlib.h>
#include <string.h>

#include "srv_author.h"
#include "srv_error.h"
#include "srv_store.h"

static int grow(srv_authors *a) {
  uint32_t cap = a->cap ? 2 * a->cap : 16;
  char **g = realloc(a->names, sizeof(char *) * cap);
  if (!g) return SRV_EINTERNAL;
  a->names = g;
  a->cap = cap;
  return 0;
}

int srv_authors_init(srv_authors *a) {
  memset(a, 0, sizeof(*a));
  if (srv_authors_set(a, SRV_AUTHOR_SERVER, "server") || srv_authors_set(a, SRV_AUTHOR_PLAYER, "player"))
    return SRV_EINTERNAL;
  return 0;
}

void srv_authors_fini(srv_authors *a) {
  for (uint32_t i = 0; i < a->count; i++) free(a->names[i]);
  free(a->names);
  memset(a, 0, sizeof(*a));
}

int srv_authors_set(srv_authors *a, uint32_t id, const char *name) {
  while (id >= a->cap)
    if (grow(a)) return SRV_EINTERNAL;
  while (a->count <= id) a->names[a->count++] = NULL;
  char *copy = strdup(name);
  if (!copy) return SRV_EINTERNAL;
  free(a->names[id]);
  a->names[id] = copy;
  return 0;
}

const char *srv_authors_name(const srv_authors *a, uint32_t id) {
  return id < a->count && a->names[id] ? a->names[id] : "unknown";
}

int srv_authors_find(const srv_authors *a, const char *name) {
  for (uint32_t i = 0; i < a->count; i++)
    if (a->names[i] && strcmp(a->names[i], name) == 0) return (int)i;
  return -1;
}

int srv_authors_intern(srv_authors *a, srv_store *store, const char *name, uint32_t *id) {
  int found = srv_authors_find(a, name);
  if (found >= 0) {
    *id = (uint32_t)found;
    return 0;
  }
  uint32_t n = a->count;
  if (srv_authors_set(a, n, name)) return SRV_EINTERNAL;
  if (store && srv_store_put_author(store, n, name)) return SRV_EINTERNAL;
  *id = n;
  return 0;
}
