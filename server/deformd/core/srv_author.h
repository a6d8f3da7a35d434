/*
 * srv_author.h — author names by id: who made each operation.
 */
#ifndef DEFORMD_SRV_AUTHOR_H
#define DEFORMD_SRV_AUTHOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct srv_store srv_store;

enum { SRV_AUTHOR_SERVER = 0, SRV_AUTHOR_PLAYER = 1 };

/* Author names by id (a linear table: a server sees a handful of people). */
typedef struct srv_authors {
  char **names;
  uint32_t count, cap;
} srv_authors;

int srv_authors_init(srv_authors *a);
void srv_authors_fini(srv_authors *a);
/* Sets the name of id (restore: the store's table). Returns 0 or SRV_EINTERNAL. */
int srv_authors_set(srv_authors *a, uint32_t id, const char *name);
const char *srv_authors_name(const srv_authors *a, uint32_t id);
int srv_authors_find(const srv_authors *a, const char *name); /* id, or -1 */
/* The id of `name`, added (and queued to the store when there is one) when new. */
int srv_authors_intern(srv_authors *a, srv_store *store, const char *name, uint32_t *id);

#endif
