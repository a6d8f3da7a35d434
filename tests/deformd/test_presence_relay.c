/*
 * test_presence_relay.c — presence across the nodes of a cluster (cluster/srv_presence_link.c):
 * a participant on the primary and one on a relay see each other's author, cursor and camera
 * exactly as sent, flagged remote, and a participant that leaves one node leaves the other's
 * list; Redis keeps no key for any of it (pub/sub only).
 */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "presence_client.h"
#include "proto_caps.h"
#include "redis_harness.h"
#include "test.h"

TEST(participants_on_a_primary_and_on_a_relay_see_each_others_cursors_and_leaving) {
  redis_harness rd;
  harness p, r;
  redis_harness_start(&rd, 0);
  const char *pargs[] = {"--redis", rd.url, "--lease-ms", "1000", "--redis-timeout-ms", "1000", "--demo", NULL};
  harness_start(&p, "demo", pargs);
  const char *rargs[] = {"--relay", "--redis", rd.url, "--lease-ms", "1000", "--redis-timeout-ms", "1000",
                         "--hello-timeout-ms", "60000", NULL};
  harness_start(&r, NULL, rargs);
  client_conn a, b;
  client_replica ra, rb;
  heard wa, wb;
  presence_join(&p, "demo", &a, &ra, &wa, PROTO_ROLE_EDITOR, "ana");
  /* The relay loads the session when bob's HELLO asks for it (it may need the registry first). */
  for (int tries = 0;; tries++) {
    cJSON *st = harness_rpc_ok(&r, "server.stats", NULL);
    const cJSON *sessions = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "cluster"), "sessions");
    int listed = cJSON_GetArraySize(sessions) > 0;
    cJSON_Delete(st);
    if (listed) break;
    ASSERT(tries < 3000);
    usleep(20000);
  }
  presence_join(&r, "demo", &b, &rb, &wb, PROTO_ROLE_VIEWER, "bob");
  /* Each hears of the other through Redis, flagged remote. */
  heard_until(&b, &rb, &wb, heard_author, "ana");
  heard_until(&a, &ra, &wa, heard_author, "bob");
  for (int i = 0; i < wb.n; i++)
    if (strcmp(wb.p[i].author, "ana") == 0) ASSERT_EQ(wb.p[i].flags, PROTO_PRES_EDITING | PROTO_PRES_REMOTE);
  /* ana moves on the primary: bob on the relay gets her last state exactly, and back. */
  uint32_t ana_on_relay = 0, bob_on_primary = 0;
  for (int i = 0; i < wb.n; i++)
    if (strcmp(wb.p[i].author, "ana") == 0) ana_on_relay = wb.p[i].id;
  for (int i = 0; i < wa.n; i++)
    if (strcmp(wa.p[i].author, "bob") == 0) bob_on_primary = wa.p[i].id;
  ASSERT(ana_on_relay != 0 && bob_on_primary != 0);
  proto_presence_state sa = presence_sample(0), sb = presence_sample(100);
  for (int k = 0; k < 20; k++) {
    sa = presence_sample((float)k);
    presence_send_state(&a, &sa);
  }
  presence_send_state(&b, &sb);
  want_state wsa = {ana_on_relay, &sa}, wsb = {bob_on_primary, &sb};
  heard_until(&b, &rb, &wb, heard_state, &wsa);
  heard_until(&a, &ra, &wa, heard_state, &wsb);
  /* presence.list on the primary lists bob, remote. */
  cJSON *list = harness_rpc_ok(&p, "presence.list", "{\"session\":\"demo\"}");
  int found = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(list, "participants"))
    if (strcmp(cJSON_GetObjectItem(e, "author")->valuestring, "bob") == 0)
      found = cJSON_IsTrue(cJSON_GetObjectItem(e, "remote")) && cJSON_GetObjectItem(e, "cursor") != NULL;
  ASSERT(found);
  cJSON_Delete(list);
  /* Redis holds no key of presence. */
  size_t len;
  char *dump = redis_harness_dump(&rd, &len);
  ASSERT(memmem(dump, len, "presence", 8) == NULL);
  free(dump);
  /* bob leaves the relay: ana is told. */
  client_replica_fini(&rb);
  client_close(&b);
  heard_until(&a, &ra, &wa, heard_left, &bob_on_primary);
  client_replica_fini(&ra);
  client_close(&a);
  harness_stop(&r);
  harness_stop(&p);
  redis_harness_kill(&rd);
}
