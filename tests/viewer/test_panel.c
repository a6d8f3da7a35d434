/*
 * test_panel.c — what deform-view's overlay shows and does, without a window: the slider
 * panel's rows, groups, filter, scrolling and clicks (vw_panel.c) against row arithmetic done
 * here; the status line's four states and its messages (vw_hud.c) against a real deformd in
 * each situation (a relay's lost primary included); and the connection's own thread
 * (vw_pump.c), which must read frames and PONGs while nobody polls, and carry main's
 * connection settings (several addresses, an author, the server's undo).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "vw_hud.h"
#include "vw_panel.h"
#include "vw_pump.h"

/* ---- the panel ---------------------------------------------------------------------------------- */

/* n names "t0", "t1", ... (no prefix), kept in `store`. */
static const char **plain_names(uint32_t n, char (*store)[16]) {
  const char **names = malloc(sizeof(char *) * n);
  for (uint32_t i = 0; i < n; i++) {
    snprintf(store[i], 16, "t%u", i);
    names[i] = store[i];
  }
  return names;
}

/* The y of the middle of visible row i of a panel laid out at y0 with rows of h (the first
 * row height is the filter line). */
static double row_y(double y0, double h, uint32_t i) { return y0 + h * (1 + i) + h / 2; }

TEST(panel_shows_whole_rows_scrolls_over_every_target_and_no_hidden_row_takes_a_click) {
  /* 84 targets (the faerie after compressing its clips) in a panel 660 px tall, rows of 22: the
   * filter line and 29 rows fit. */
  char store[84][16];
  const char **names = plain_names(84, store);
  vw_panel p;
  vw_panel_init(&p);
  ASSERT_OK(vw_panel_build(&p, names, 84), NULL);
  vw_panel_layout(&p, 1000, 30, 280, 660, 22);
  ASSERT_EQ(vw_panel_capacity(&p), 29);
  uint32_t first, n = vw_panel_visible(&p, &first);
  ASSERT_EQ(first, 0);
  ASSERT_EQ(n, 29);
  uint32_t t;
  double f;
  /* Row 5 is target 5; the strip below row 28 (where target 29 would be) takes nothing. */
  ASSERT_EQ(vw_panel_hit(&p, 1100, row_y(30, 22, 5), &t, &f), VW_PANEL_HIT_TARGET);
  ASSERT_EQ(t, 5);
  ASSERT_EQ(vw_panel_hit(&p, 1100, row_y(30, 22, 29), &t, &f), VW_PANEL_HIT_NONE);
  ASSERT_EQ(vw_panel_hit(&p, 1100, 30 + 5, &t, &f), VW_PANEL_HIT_NONE); /* the filter line */
  ASSERT_EQ(vw_panel_hit(&p, 900, row_y(30, 22, 5), &t, &f), VW_PANEL_HIT_NONE); /* left of it */
  /* Every pixel row of the panel: a hit is a row that is drawn, and it is that row's target. */
  for (double y = 30; y < 690; y += 1) {
    vw_panel_hit_kind k = vw_panel_hit(&p, 1100, y, &t, &f);
    if (k == VW_PANEL_HIT_NONE) continue;
    uint32_t i = (uint32_t)((y - 30) / 22) - 1;
    ASSERT(i < n);
    ASSERT_EQ(t, p.rows[first + i].index);
  }
  /* The wheel scrolls three rows at a time and stops at the last one; scrolled, row 0 is the
   * first row drawn, and the last target can be clicked. */
  vw_panel_scroll(&p, 3);
  ASSERT_EQ(vw_panel_visible(&p, &first), 29);
  ASSERT_EQ(first, 3);
  ASSERT_EQ(vw_panel_hit(&p, 1100, row_y(30, 22, 0), &t, &f), VW_PANEL_HIT_TARGET);
  ASSERT_EQ(t, 3);
  vw_panel_scroll(&p, 1000);
  ASSERT_EQ(vw_panel_visible(&p, &first), 29);
  ASSERT_EQ(first, 84 - 29);
  ASSERT_EQ(vw_panel_hit(&p, 1100, row_y(30, 22, 28), &t, &f), VW_PANEL_HIT_TARGET);
  ASSERT_EQ(t, 83);
  vw_panel_scroll(&p, -1000);
  vw_panel_visible(&p, &first);
  ASSERT_EQ(first, 0);
  /* The value: where along the slider the click is, held to it. */
  float x0, w;
  vw_panel_slider(&p, 5, &x0, &w);
  ASSERT_EQ(vw_panel_hit(&p, x0 + 0.25 * w, row_y(30, 22, 5), &t, &f), VW_PANEL_HIT_TARGET);
  ASSERT_NEAR(f, 0.25, 1e-6);
  ASSERT_NEAR(vw_panel_fraction(&p, 5, x0 - 50), 0.0, 0);
  ASSERT_NEAR(vw_panel_fraction(&p, 5, x0 + w + 50), 1.0, 0);
  ASSERT(vw_panel_fraction(&p, 60, x0) < 0); /* not drawn */
  /* A panel shorter than one row holds none and takes no click. */
  vw_panel_layout(&p, 1000, 30, 280, 30, 22);
  ASSERT_EQ(vw_panel_visible(&p, &first), 0);
  ASSERT_EQ(vw_panel_hit(&p, 1100, 45, &t, &f), VW_PANEL_HIT_NONE);
  vw_panel_fini(&p);
  free(names);
}

TEST(panel_groups_targets_by_prefix_folds_groups_and_filters_by_typed_text) {
  /* The targets of a compressed clip "run" (run.mean, run.pc1 ... run.pc12), of "idle" (3),
   * two of the demo head's, and "blink.L": a prefix only one target has makes no group. */
  const char *names[20];
  char store[20][16];
  uint32_t n = 0;
  names[n++] = "smile_L";
  for (int i = 0; i <= 12; i++) {
    if (i == 0) snprintf(store[n], 16, "run.mean");
    else snprintf(store[n], 16, "run.pc%d", i);
    names[n] = store[n];
    n++;
  }
  names[n++] = "blink.L";
  for (int i = 1; i <= 3; i++) {
    snprintf(store[n], 16, "idle.pc%d", i);
    names[n] = store[n];
    n++;
  }
  names[n++] = "jaw_open";
  vw_panel p;
  vw_panel_init(&p);
  ASSERT_OK(vw_panel_build(&p, names, n), NULL);
  /* smile_L, [run], its 13, blink.L, [idle], its 3, jaw_open. */
  ASSERT_EQ(p.nrows, 1 + 1 + 13 + 1 + 1 + 3 + 1);
  ASSERT_EQ(p.rows[0].kind, VW_PANEL_TARGET);
  ASSERT_EQ(p.rows[1].kind, VW_PANEL_GROUP);
  ASSERT_STR_CONTAINS(p.group_name[p.rows[1].index], "run");
  ASSERT_EQ(p.rows[1].count, 13);
  for (uint32_t i = 2; i < 15; i++) {
    ASSERT_EQ(p.rows[i].kind, VW_PANEL_TARGET);
    ASSERT_EQ(p.rows[i].indent, 1);
    ASSERT(strncmp(names[p.rows[i].index], "run.", 4) == 0);
  }
  ASSERT(p.rows[15].kind == VW_PANEL_TARGET && p.rows[15].indent == 0 && p.rows[15].index == 14); /* blink.L */
  uint32_t idle = p.rows[16].index;
  ASSERT_EQ(p.rows[16].count, 3);
  /* A click on a header says which group; folding it hides its rows, unfolding shows them. */
  vw_panel_layout(&p, 0, 0, 300, 2000, 20);
  uint32_t t;
  double f;
  ASSERT_EQ(vw_panel_hit(&p, 50, row_y(0, 20, 16), &t, &f), VW_PANEL_HIT_GROUP);
  ASSERT_EQ(t, idle);
  vw_panel_toggle(&p, idle);
  ASSERT_OK(vw_panel_build(&p, names, n), NULL);
  ASSERT_EQ(p.nrows, 21 - 3);
  ASSERT_EQ(p.rows[17].index, n - 1); /* jaw_open follows the folded header */
  /* Typing "PC1" (case ignored): run.pc1, run.pc10-12 and idle.pc1, under their headers,
   * shown although idle is folded; the other targets go. */
  ASSERT_EQ(vw_panel_edit_char(&p, 'P'), 0); /* not editing yet */
  /* As deform-view sends them: the '/' key begins editing, then GLFW's character event of that
   * same '/' arrives, and is not text; a '/' typed after it is. */
  vw_panel_edit_begin(&p, '/');
  ASSERT_EQ(vw_panel_edit_char(&p, '/'), 0);
  ASSERT_EQ(p.filter[0], '\0');
  ASSERT_EQ(vw_panel_edit_char(&p, '/'), 1);
  ASSERT_EQ(vw_panel_edit_backspace(&p), 1);
  ASSERT_EQ(p.filter[0], '\0');
  ASSERT_EQ(vw_panel_edit_char(&p, 'P'), 1);
  ASSERT_EQ(vw_panel_edit_char(&p, 'C'), 1);
  ASSERT_EQ(vw_panel_edit_char(&p, '1'), 1);
  ASSERT_EQ(vw_panel_edit_char(&p, 0x7f), 0); /* not printable */
  ASSERT_EQ(vw_panel_edit_char(&p, 0xe9), 0); /* not ASCII */
  ASSERT_OK(vw_panel_build(&p, names, n), NULL);
  uint32_t targets = 0, groups = 0;
  for (uint32_t i = 0; i < p.nrows; i++) {
    if (p.rows[i].kind == VW_PANEL_GROUP) {
      groups++;
      continue;
    }
    targets++;
    const char *name = names[p.rows[i].index];
    ASSERT(strstr(name, "pc1") != NULL);
  }
  ASSERT_EQ(targets, 5);
  ASSERT_EQ(groups, 2);
  /* Backspace twice: "P" keeps every pc and nothing of the demo head. */
  ASSERT_EQ(vw_panel_edit_backspace(&p), 1);
  ASSERT_EQ(vw_panel_edit_backspace(&p), 1);
  ASSERT_OK(vw_panel_build(&p, names, n), NULL);
  targets = 0;
  for (uint32_t i = 0; i < p.nrows; i++) targets += p.rows[i].kind == VW_PANEL_TARGET;
  ASSERT_EQ(targets, 12 + 3 + 1); /* run.pc1-12, idle.pc1-3, jaw_open ("p" in "open") */
  vw_panel_edit_end(&p);
  ASSERT_EQ(vw_panel_edit_backspace(&p), 0); /* not editing any more */
  ASSERT_STR_CONTAINS(p.filter, "P");
  vw_panel_fini(&p);
}

/* ---- the status line ------------------------------------------------------------------------------ */

static void poll_until(vw_net *n, vw_net_state want, int tries) {
  vw_net_changes ch;
  for (int i = 0; i < tries && n->state != want; i++) vw_net_poll(n, 10, &ch);
  ASSERT_EQ(n->state, want);
}

TEST(status_names_connecting_disconnected_read_only_and_editor_with_their_reasons) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  cJSON_Delete(harness_rpc_ok(&h, "session.create", "{\"session\":\"faerie\",\"mesh\":\"demo\"}"));
  char why[400];
  /* Before the first poll: connecting. */
  vw_net ed;
  vw_net_init(&ed, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_EDITOR);
  ASSERT_EQ(vw_hud_status(&ed, vw_net_now_ms(), why, sizeof(why)), VW_HUD_CONNECTING);
  ASSERT_STR_CONTAINS(why, "connecting");
  ASSERT(vw_hud_why_no_edit(&ed) != NULL);
  poll_until(&ed, VW_NET_LIVE, 500);
  ASSERT_EQ(vw_hud_status(&ed, vw_net_now_ms(), why, sizeof(why)), VW_HUD_EDITOR);
  ASSERT_EQ(why[0], '\0');
  ASSERT(vw_hud_why_no_edit(&ed) == NULL);
  /* A viewer by choice. */
  vw_net vi;
  vw_net_init(&vi, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  poll_until(&vi, VW_NET_LIVE, 500);
  ASSERT_EQ(vw_hud_status(&vi, vw_net_now_ms(), why, sizeof(why)), VW_HUD_READ_ONLY);
  ASSERT_STR_CONTAINS(why, "--role viewer");
  ASSERT_STR_CONTAINS(vw_hud_why_no_edit(&vi), "read-only");
  /* An unknown session: disconnected, and the reason names the sessions the server has. */
  vw_net un;
  vw_net_init(&un, "127.0.0.1", h.stream_port, "nope", NULL, PROTO_ROLE_EDITOR);
  poll_until(&un, VW_NET_DOWN, 500);
  ASSERT_EQ(vw_hud_status(&un, vw_net_now_ms(), why, sizeof(why)), VW_HUD_DISCONNECTED);
  ASSERT_STR_CONTAINS(why, "unknown session 'nope'");
  ASSERT_STR_CONTAINS(why, "'demo'");
  ASSERT_STR_CONTAINS(why, "'faerie'");
  ASSERT_STR_CONTAINS(why, "retrying in");
  ASSERT(strstr(why, "showing the last shape") == NULL); /* it never had one */
  /* An edit the server refuses flashes for a while and goes; the status stays EDITOR with no
   * stale error in it. */
  vw_hud hud;
  memset(&hud, 0, sizeof(hud));
  uint64_t now = vw_net_now_ms();
  vw_hud_watch(&hud, &ed, now);
  ASSERT(vw_hud_message(&hud, now) == NULL);
  uint32_t bad_target = 999;
  float w = 0.5f;
  ASSERT(vw_net_set_weights(&ed, 1, &bad_target, &w) != 0);
  vw_net_changes ch;
  for (int i = 0; i < 500 && ed.errors == 0; i++) vw_net_poll(&ed, 10, &ch);
  ASSERT_EQ(ed.errors, 1);
  now = vw_net_now_ms();
  vw_hud_watch(&hud, &ed, now);
  ASSERT_STR_CONTAINS(vw_hud_message(&hud, now), "edit refused");
  ASSERT(vw_hud_message(&hud, now + VW_HUD_FLASH_MS + 1) == NULL);
  ASSERT_EQ(vw_hud_status(&ed, now, why, sizeof(why)), VW_HUD_EDITOR);
  ASSERT_EQ(why[0], '\0');
  /* The server goes: disconnected, showing the last shape, with the server's reason. */
  harness_stop(&h);
  poll_until(&ed, VW_NET_DOWN, 500);
  ASSERT_EQ(vw_hud_status(&ed, vw_net_now_ms(), why, sizeof(why)), VW_HUD_DISCONNECTED);
  ASSERT_STR_CONTAINS(why, "showing the last shape");
  ASSERT_STR_CONTAINS(vw_hud_why_no_edit(&ed), "not connected");
  vw_net_fini(&un);
  vw_net_fini(&vi);
  vw_net_fini(&ed);
}

TEST(status_of_an_editor_with_a_viewer_token_says_read_only_for_want_of_the_role) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start_token(&h, "demo", args, "s3cret");
  cJSON *r = harness_rpc_ok(&h, "token.create", "{\"role\":\"viewer\",\"user\":\"pat\"}");
  char token[96];
  snprintf(token, sizeof(token), "%s", cJSON_GetObjectItem(r, "token")->valuestring);
  cJSON_Delete(r);
  /* Asked to edit with a token that only watches: refused as an editor, watching instead. */
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", token, PROTO_ROLE_EDITOR);
  vw_net_changes ch;
  for (int i = 0; i < 1000 && !(n.state == VW_NET_LIVE && n.replica.have_snapshot); i++) vw_net_poll(&n, 10, &ch);
  char why[400];
  ASSERT_EQ(vw_hud_status(&n, vw_net_now_ms(), why, sizeof(why)), VW_HUD_READ_ONLY);
  ASSERT_STR_CONTAINS(why, "token");
  ASSERT_STR_CONTAINS(why, "edit");
  vw_net_fini(&n);
  harness_stop(&h);
}

/* A relay says its primary is lost (ERROR PRIMARY_LOST, request 0: vw_net sets primary_lost and
 * keeps the connection, as test_relay.c checks of the wire). The status is then READ-ONLY, with
 * the reason, even for an editor the server granted, and an edit is held back with the same
 * reason. The status is the connection's: it goes when the connection goes. */
TEST(status_of_an_editor_on_a_relay_whose_primary_is_lost_is_read_only_until_the_connection_goes) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_EDITOR);
  poll_until(&n, VW_NET_LIVE, 500);
  char why[400];
  ASSERT_EQ(vw_hud_status(&n, vw_net_now_ms(), why, sizeof(why)), VW_HUD_EDITOR);
  n.primary_lost = 1;
  ASSERT(vw_net_can_edit(&n)); /* the role is still the editor's: it is the relay that refuses */
  ASSERT_EQ(vw_hud_status(&n, vw_net_now_ms(), why, sizeof(why)), VW_HUD_READ_ONLY);
  ASSERT_STR_CONTAINS(why, "primary lost");
  ASSERT_STR_CONTAINS(vw_hud_why_no_edit(&n), "primary lost");
  harness_stop(&h);
  poll_until(&n, VW_NET_DOWN, 500);
  ASSERT_EQ(n.primary_lost, 0);
  ASSERT_EQ(vw_hud_status(&n, vw_net_now_ms(), why, sizeof(why)), VW_HUD_DISCONNECTED);
  ASSERT(strstr(why, "primary lost") == NULL);
  vw_net_fini(&n);
}

TEST(the_key_table_names_each_key_once_and_deform_view_help_prints_it) {
  for (size_t i = 0; i < vw_hud_key_count; i++) {
    ASSERT(vw_hud_keys[i].keys[0] && vw_hud_keys[i].action[0]);
    for (size_t j = 0; j < i; j++) ASSERT(strcmp(vw_hud_keys[i].keys, vw_hud_keys[j].keys) != 0);
  }
  const char *bin = getenv("DEFORM_VIEW");
  ASSERT(bin != NULL);
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "%s --help", bin);
  FILE *f = popen(cmd, "r");
  ASSERT(f != NULL);
  char *out = calloc(1, 65536);
  size_t len = fread(out, 1, 65535, f);
  ASSERT_EQ(pclose(f), 0);
  out[len] = '\0';
  ASSERT_STR_CONTAINS(out, "usage: deform-view");
  for (size_t i = 0; i < vw_hud_key_count; i++) {
    ASSERT_STR_CONTAINS(out, vw_hud_keys[i].keys);
    ASSERT_STR_CONTAINS(out, vw_hud_keys[i].action);
  }
  free(out);
}

/* ---- the connection's thread ------------------------------------------------------------------------ */

TEST(pump_merges_what_polls_changed_as_one_poll_would) {
  vw_net_changes acc;
  memset(&acc, 0, sizeof(acc));
  vw_net_changes a = {.weights = 1, .offsets_first = 100, .offsets_end = 164, .frames = 2};
  vw_net_changes b = {.new_targets = 2, .offsets_first = 20, .offsets_end = 40, .frames = 1, .partial = 1};
  vw_pump_merge(&acc, &a);
  vw_pump_merge(&acc, &b);
  ASSERT(acc.weights == 1 && acc.new_targets == 2 && acc.frames == 3 && acc.partial == 1);
  ASSERT(acc.offsets_first == 20 && acc.offsets_end == 164);
  vw_net_changes none = {.frames = 0};
  vw_pump_merge(&acc, &none);
  ASSERT(acc.offsets_first == 20 && acc.offsets_end == 164 && acc.partial == 0);
  /* A snapshot makes what came before moot; what comes after it still counts. */
  vw_net_changes snap = {.snapshot = 1, .frames = 1};
  vw_pump_merge(&acc, &snap);
  ASSERT(acc.snapshot == 1 && acc.weights == 0 && acc.new_targets == 0 && acc.offsets_end == acc.offsets_first);
  vw_pump_merge(&acc, &a);
  ASSERT(acc.snapshot == 1 && acc.weights == 1 && acc.offsets_first == 100 && acc.offsets_end == 164);
}

TEST(pump_reads_frames_and_pongs_while_the_render_thread_does_not_poll) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  vw_net n;
  vw_net_init(&n, "127.0.0.1", h.stream_port, "demo", NULL, PROTO_ROLE_EDITOR);
  vw_pump p;
  ASSERT_OK(vw_pump_start(&p, &n), NULL);
  /* Nobody polls here: the thread joins, and takes the snapshot and then a weight change. */
  vw_net_changes got;
  memset(&got, 0, sizeof(got));
  for (int i = 0; i < 1000 && !got.snapshot; i++) {
    usleep(10000);
    vw_net_changes ch;
    vw_pump_lock(&p);
    vw_pump_take(&p, &ch);
    vw_pump_unlock(&p);
    vw_pump_merge(&got, &ch);
  }
  ASSERT(got.snapshot);
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"blink_L\":0.5}}"));
  int weights = 0;
  double latency = -1;
  for (int i = 0; i < 1000 && (!weights || latency < 0); i++) {
    usleep(10000);
    vw_net_changes ch;
    vw_pump_lock(&p);
    vw_pump_take(&p, &ch);
    latency = n.latency_ms;
    vw_pump_unlock(&p);
    weights |= ch.weights;
  }
  ASSERT(weights);
  ASSERT(latency >= 0); /* a PING went out and its PONG was read, all on the pump's thread */
  vw_pump_lock(&p);
  ASSERT_NEAR(n.replica.weights[mesh_find_target(n.replica.mesh, "blink_L")], 0.5, 0);
  vw_pump_unlock(&p);
  vw_pump_stop(&p);
  vw_net_fini(&n);
  harness_stop(&h);
}

/* A resolver that holds every lookup until the test lets it go (a DNS server that does not
 * answer), then resolves as the client does. */
static struct {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int entered, released;
  char host[256];
} slow_dns = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, ""};

static int slow_resolve(const char *host, int port, struct addrinfo **res, char *err, size_t errlen) {
  pthread_mutex_lock(&slow_dns.m);
  slow_dns.entered++;
  snprintf(slow_dns.host, sizeof(slow_dns.host), "%s", host);
  pthread_cond_broadcast(&slow_dns.cv);
  while (!slow_dns.released) pthread_cond_wait(&slow_dns.cv, &slow_dns.m);
  pthread_mutex_unlock(&slow_dns.m);
  return client_resolve(host, port, res, err, errlen);
}

/* While the pump's thread waits for a host name to resolve, the render thread can take the lock
 * (the window keeps drawing); the answer then serves the connect. Bounded waits only: on
 * failure the lock stays out of reach for 10 s. */
TEST(pump_looks_host_names_up_without_holding_the_render_threads_lock) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  vw_net n;
  vw_net_init(&n, "localhost", h.stream_port, "demo", NULL, PROTO_ROLE_VIEWER);
  vw_pump p;
  ASSERT_OK(vw_pump_start_resolving(&p, &n, slow_resolve), NULL);
  pthread_mutex_lock(&slow_dns.m);
  while (!slow_dns.entered) pthread_cond_wait(&slow_dns.cv, &slow_dns.m);
  pthread_mutex_unlock(&slow_dns.m);
  ASSERT_STR_CONTAINS(slow_dns.host, "localhost");
  /* The lookup is in progress: the lock is free for the render loop. */
  int took = 0;
  for (int i = 0; i < 1000 && !took; i++) {
    if (pthread_mutex_trylock(&p.lock) == 0) took = 1;
    else usleep(10000);
  }
  ASSERT(took);
  ASSERT(n.state != VW_NET_LIVE);
  pthread_mutex_unlock(&p.lock);
  pthread_mutex_lock(&slow_dns.m);
  slow_dns.released = 1;
  pthread_cond_broadcast(&slow_dns.cv);
  pthread_mutex_unlock(&slow_dns.m);
  /* The name resolves and the viewer joins with that answer. */
  int live = 0;
  for (int i = 0; i < 1000 && !live; i++) {
    usleep(10000);
    vw_pump_lock(&p);
    live = n.state == VW_NET_LIVE && n.replica.have_snapshot;
    vw_pump_unlock(&p);
  }
  ASSERT(live);
  vw_pump_stop(&p);
  vw_net_fini(&n);
  harness_stop(&h);
}

/* The weight of target `name` in the replica the pump's thread fills, once it reads `want`
 * (10 s at most; NAN while not live), looked at under the lock as the render loop does. */
static float pumped_weight(vw_pump *p, const vw_net *n, const char *name, float want) {
  float seen = NAN;
  for (int i = 0; i < 1000 && seen != want; i++) {
    usleep(10000);
    vw_pump_lock(p);
    int t = n->state == VW_NET_LIVE ? mesh_find_target(n->replica.mesh, name) : -1;
    seen = t >= 0 ? n->replica.weights[t] : NAN;
    vw_pump_unlock(p);
  }
  return seen;
}

/* The pump with main's connection settings: an author, two addresses of which the first is
 * dead. The status names the address tried next; the thread then reaches the second, and edits
 * and undo sent from this (the render) thread under the lock go out and come back: the weight
 * set, then undone by the server's history of this author, as the replica the thread fills
 * shows. */
TEST(pump_reaches_the_second_address_and_carries_an_edit_and_its_authors_undo) {
  harness h;
  const char *const args[] = {"--demo", NULL};
  harness_start(&h, "demo", args);
  int dead = harness_free_port();
  vw_net n;
  vw_net_init(&n, "127.0.0.1", dead, "demo", NULL, PROTO_ROLE_EDITOR);
  vw_net_set_author(&n, "ana");
  vw_net_set_protocol(&n, PROTO_VERSION_2, NULL);
  ASSERT_OK(vw_net_add_address(&n, "127.0.0.1", h.stream_port), NULL);
  poll_until(&n, VW_NET_DOWN, 500);
  char why[400], want[64];
  ASSERT_EQ(vw_hud_status(&n, vw_net_now_ms(), why, sizeof(why)), VW_HUD_DISCONNECTED);
  snprintf(want, sizeof(want), "retrying 127.0.0.1:%d in", h.stream_port);
  ASSERT_STR_CONTAINS(why, want);
  vw_pump p;
  ASSERT_OK(vw_pump_start(&p, &n), NULL);
  /* blink_L starts at 0: once the thread reads that, the replica is the second address's. */
  ASSERT_NEAR(pumped_weight(&p, &n, "blink_L", 0.0f), 0.0, 0);
  vw_pump_lock(&p);
  ASSERT(vw_net_can_edit(&n));
  ASSERT_EQ(n.port, h.stream_port);
  uint32_t t = (uint32_t)mesh_find_target(n.replica.mesh, "blink_L");
  float w = 0.75f;
  ASSERT(vw_net_set_weights(&n, 1, &t, &w) != 0);
  vw_pump_unlock(&p);
  ASSERT_NEAR(pumped_weight(&p, &n, "blink_L", 0.75f), 0.75, 0);
  vw_pump_lock(&p);
  ASSERT(vw_net_history(&n, 0) != 0);
  vw_pump_unlock(&p);
  ASSERT_NEAR(pumped_weight(&p, &n, "blink_L", 0.0f), 0.0, 0);
  cJSON *list = harness_rpc_ok(&h, "history.list", "{\"session\":\"demo\"}");
  cJSON *steps = cJSON_GetObjectItem(list, "steps");
  ASSERT_EQ(cJSON_GetArraySize(steps), 2); /* the edit and its undo, both ana's */
  for (int i = 0; i < 2; i++)
    ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, i), "author")->valuestring, "ana") == 0);
  cJSON_Delete(list);
  vw_pump_stop(&p);
  vw_net_fini(&n);
  harness_stop(&h);
}
