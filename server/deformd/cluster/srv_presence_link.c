/*
 * srv_presence_link.c — presence between the nodes of a cluster, over Redis pub/sub.
 *
 * Every node (primary or relay) that holds a session publishes its own participants' records
 * (srv_server.on_presence: INFO, LEAVE, STATE; the update's records, at most 60 a second) on
 * the channel deformd:presence:<session> and is subscribed (PSUBSCRIBE deformd:presence:*, on
 * a connection of its own) to everyone else's; what another node says is applied with
 * srv_presence_remote, so its participants are listed and drawn here as remote ones and sent
 * to this node's viewers with the same coalescing and slow-viewer rules as local ones.
 *
 * Why pub/sub and not the session's stream: presence is ephemeral (docs/architecture.md). The
 * stream is the durable order of operations, kept, trimmed and replayed on every relay's
 * reload; cursors in it would cost that for data nobody needs a second later, and a relay's
 * viewers' presence has to reach the primary, which reads no stream. Pub/sub keeps nothing, and
 * losing a message is harmless: every record carries absolute values, and each node publishes
 * its whole list once a second (so a node that joined, reconnected or missed a message is exact
 * again within a second), and a node not heard from in 5 s has its participants dropped.
 *
 * A message is: the publishing node's id, a zero byte, u8 full (1: the records are its whole
 * list), then PRESENCE records (docs/protocol.md §16). A node skips its own messages and those
 * for sessions it does not hold.
 *
 * DOES NOT keep participants (session/srv_presence.c) or touch the durable stream.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "srv_error.h"
#include "srv_log.h"
#include "srv_session.h"
#include "srv_presence.h"
#include "srv_cluster.h"

#define FULL_EVERY_MS 1000
#define NODE_GONE_MS 5000

/* A node heard from about a session. */
typedef struct heard {
  char *session;
  char node[SRV_NODE_ID_MAX];
  uint64_t last_ms;
} heard;

typedef struct srv_plink {
  srv_cluster *k;
  srv_redis *sub;
  heard *heard;
  uint32_t heard_n, heard_cap;
  uint64_t last_full;
  uint64_t published, received, publish_failures;
} srv_plink;

static void channel(char *buf, size_t len, const char *session) {
  size_t n = srv_cluster_key(buf, len, NULL, "presence:");
  snprintf(buf + n, len - n, "%s", session);
}

static void on_published(srv_redis *r, redisReply *reply, void *arg) {
  srv_plink *pl = arg;
  (void)r;
  if (!reply || reply->type == REDIS_REPLY_ERROR) pl->publish_failures++;
}

/* srv_server.on_presence: this node's records for `s`, to the others. */
static void on_presence(srv_server *srv, srv_session *s, const uint8_t *p, size_t n, int full) {
  srv_cluster *k = srv->cluster;
  srv_plink *pl = k ? k->plink : NULL;
  if (!pl || k->stopping || !srv_redis_ready(k->cmd)) return;
  size_t idlen = strlen(k->node_id);
  uint8_t *msg = malloc(idlen + 2 + n);
  if (!msg) return;
  memcpy(msg, k->node_id, idlen);
  msg[idlen] = 0;
  msg[idlen + 1] = (uint8_t)(full != 0);
  if (n) memcpy(msg + idlen + 2, p, n);
  char chan[PROTO_MAX_NAME + 64];
  channel(chan, sizeof(chan), s->name);
  const char *argv[] = {"PUBLISH", chan, (const char *)msg};
  size_t lens[] = {7, strlen(chan), idlen + 2 + n};
  if (srv_redis_command(k->cmd, srv->cfg.redis_timeout_ms, on_published, pl, 3, argv, lens) == 0) pl->published++;
  else pl->publish_failures++;
  free(msg);
}

/* Notes that `node` spoke about `session`; 1 when it had not before (it needs our whole list). */
static int note(srv_plink *pl, const char *session, const char *node, uint64_t now) {
  for (uint32_t i = 0; i < pl->heard_n; i++)
    if (strcmp(pl->heard[i].node, node) == 0 && strcmp(pl->heard[i].session, session) == 0) {
      pl->heard[i].last_ms = now;
      return 0;
    }
  if (pl->heard_n == pl->heard_cap) {
    uint32_t nc = pl->heard_cap ? pl->heard_cap * 2 : 8;
    heard *x = realloc(pl->heard, sizeof(heard) * nc);
    if (!x) return 0;
    pl->heard = x;
    pl->heard_cap = nc;
  }
  heard *h = &pl->heard[pl->heard_n];
  if (!(h->session = strdup(session))) return 0;
  snprintf(h->node, sizeof(h->node), "%s", node);
  h->last_ms = now;
  pl->heard_n++;
  return 1;
}

static void on_message(srv_redis *r, const char *chan, size_t clen, const char *msg, size_t mlen, void *arg) {
  srv_plink *pl = arg;
  srv_cluster *k = pl->k;
  (void)r;
  char prefix[64];
  size_t pn = srv_cluster_key(prefix, sizeof(prefix), NULL, "presence:");
  const char *nul = memchr(msg, 0, mlen);
  if (k->stopping || clen <= pn || clen - pn > PROTO_MAX_NAME || !nul || (size_t)(nul - msg) >= SRV_NODE_ID_MAX ||
      (size_t)(nul - msg) + 2 > mlen)
    return;
  if (strcmp(msg, k->node_id) == 0) return; /* our own */
  char name[PROTO_MAX_NAME + 1];
  memcpy(name, chan + pn, clen - pn);
  name[clen - pn] = 0;
  srv_session *s = srv_session_find(k->srv, name);
  if (!s || s->closed) return;
  size_t at = (size_t)(nul - msg) + 1;
  int full = msg[at] != 0;
  pl->received++;
  if (note(pl, name, msg, uv_now(k->srv->loop))) srv_presence_publish_all(s); /* a node new to us */
  int rc = srv_presence_remote(k->srv, s, msg, (const uint8_t *)msg + at + 1, mlen - at - 1, full);
  if (rc) srv_log(SRV_LOG_WARN, "presence from node %s for session %s refused: %s", msg, name, proto_strerror(rc));
}

static void on_state(srv_redis *r, int ready, void *arg) {
  srv_plink *pl = arg;
  char pattern[64];
  srv_cluster_key(pattern, sizeof(pattern), NULL, "presence:*");
  if (ready && srv_redis_psubscribe(r, pattern, on_message, pl) != 0)
    srv_log(SRV_LOG_WARN, "presence: could not subscribe to %s", pattern);
  if (ready) pl->last_full = 0; /* back: everyone's whole list soon */
}

int srv_presence_link_start(srv_cluster *k) {
  srv_plink *pl = calloc(1, sizeof(*pl));
  if (!pl) return SRV_EINTERNAL;
  pl->k = k;
  k->plink = pl;
  if (srv_redis_create(k->srv->loop, &k->url, "presence", on_state, pl, &pl->sub) != 0) return SRV_EINTERNAL;
  k->srv->on_presence = on_presence;
  return 0;
}

void srv_presence_link_tick(srv_cluster *k) {
  srv_plink *pl = k->plink;
  if (!pl || k->stopping) return;
  uint64_t now = uv_now(k->srv->loop);
  if (now - pl->last_full >= FULL_EVERY_MS) {
    pl->last_full = now;
    for (srv_session *s = k->srv->sessions; s; s = s->next)
      if (srv_presence_count(s)) srv_presence_publish_all(s);
  }
  for (uint32_t i = 0; i < pl->heard_n;) {
    heard *h = &pl->heard[i];
    if (now - h->last_ms < NODE_GONE_MS) {
      i++;
      continue;
    }
    srv_session *s = srv_session_find(k->srv, h->session);
    if (s) srv_presence_remote_gone(s, h->node);
    free(h->session);
    *h = pl->heard[--pl->heard_n];
  }
}

void srv_presence_link_stop(srv_cluster *k) {
  srv_plink *pl = k->plink;
  if (!pl) return;
  k->srv->on_presence = NULL;
  srv_redis_destroy(pl->sub);
  for (uint32_t i = 0; i < pl->heard_n; i++) free(pl->heard[i].session);
  free(pl->heard);
  free(pl);
  k->plink = NULL;
}

cJSON *srv_presence_link_stats(const srv_cluster *k) {
  cJSON *o = cJSON_CreateObject();
  const srv_plink *pl = k->plink;
  cJSON_AddNumberToObject(o, "published", pl ? (double)pl->published : 0);
  cJSON_AddNumberToObject(o, "received", pl ? (double)pl->received : 0);
  cJSON_AddNumberToObject(o, "publish_failures", pl ? (double)pl->publish_failures : 0);
  cJSON_AddNumberToObject(o, "nodes_heard", pl ? pl->heard_n : 0);
  return o;
}
