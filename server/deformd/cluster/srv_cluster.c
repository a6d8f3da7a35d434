/*
 * srv_cluster.c — what the cluster's files look up in their shared state (srv_cluster.h): the
 * Redis key of a session's part, a node by id, a session's owner by the last registry survey.
 *
 * DOES NOT talk to Redis or change the state (srv_registry.c fills it).
 */
#include <stdio.h>
#include <string.h>

#include "srv_cluster.h"

size_t srv_cluster_key(char *buf, size_t len, const char *session, const char *what) {
  int n = session ? snprintf(buf, len, "deformd:s:%s:%s", session, what) : snprintf(buf, len, "deformd:%s", what);
  return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

const srv_node *srv_cluster_node(const srv_cluster *k, const char *id) {
  for (uint32_t i = 0; i < k->node_count; i++)
    if (strcmp(k->nodes[i].id, id) == 0) return &k->nodes[i];
  return NULL;
}

const srv_node *srv_cluster_owner(const srv_cluster *k, const char *session) {
  for (uint32_t i = 0; i < k->owner_count; i++)
    if (strcmp(k->owners[i].session, session) == 0) return srv_cluster_node(k, k->owners[i].node);
  return NULL;
}
