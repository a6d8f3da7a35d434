/*
 * test_caps.c — capabilities negotiated in HELLO (docs/protocol.md §14) against a real deformd:
 * viewers of protocol versions 1 and 2 that ask for no capability receive exactly the bytes the
 * server received them before capabilities existed; a viewer that asks for one is granted it and
 * otherwise gets the same frames; unknown names are skipped, not refused; malformed lists are
 * refused with a reason.
 *
 * The oracle for "exactly today's bytes" is tests/deformd/stream_bytes_e71ec77.txt: every frame
 * three viewers (version 1; version 2 quantised; version 2 lossless) received through a scripted
 * session (join, weights, sculpt offsets over JSON-RPC and over a binary EDIT, an undo) from the
 * deformd built at commit e71ec77, the last one without capabilities (recorded again from e71ec77
 * with the face branch's shared/mesh_demo.c, the head with ARKit's 52 targets: only the three
 * SNAPSHOT lines changed; and again with today's shared/mesh_order.c in place of its
 * vertex-cache order, the session's triangle order since 2026-12-03: the SNAPSHOTs and the
 * version 2 DELTAs, whose ranks follow the triangles, changed, no other frame). Small frames are kept
 * whole (hex), SNAPSHOTs as length and FNV-1a 64 hash. To record it again from another build:
 *   CAPS_RECORD=FILE DEFORMD_BIN=that/deformd build/tests/test-deformd
 *     v1_and_v2_viewers_that_ask_for_no_capability_get_the_bytes_of_the_server_before_capabilities
 */
#include <stdarg.h>
#include <unistd.h>

#include "harness.h"
#include "proto_caps.h"
#include "proto_presence.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};

/* ---- recording what a viewer receives ------------------------------------------------------- */

typedef struct rec {
  char *text; /* one line per frame */
  size_t len, cap;
  int frames;
} rec;

static void rec_printf(rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rec_printf(rec *r, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(r->text ? r->text + r->len : NULL, r->text ? r->cap - r->len : 0, fmt, ap);
    va_end(ap);
    if (r->text && (size_t)n < r->cap - r->len) {
      r->len += (size_t)n;
      return;
    }
    r->cap = (r->cap + (size_t)n + 1) * 2;
    r->text = realloc(r->text, r->cap);
    ASSERT(r->text != NULL);
  }
}

static uint64_t fnv64(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* One frame as a line: who, its header fields, and its bytes (whole up to 512, else hashed). */
static void rec_frame(rec *r, const char *who, const proto_header *h, const uint8_t *payload) {
  size_t n = PROTO_HEADER_SIZE + h->length;
  const uint8_t *f = payload - PROTO_HEADER_SIZE; /* the client keeps the header before it */
  rec_printf(r, "%s %d type=%u flags=%u version=%llu len=%zu ", who, r->frames++, h->type, h->flags,
             (unsigned long long)h->session_version, n);
  if (n <= 512) {
    for (size_t i = 0; i < n; i++) rec_printf(r, "%02x", f[i]);
  } else {
    rec_printf(r, "fnv64=%016llx", (unsigned long long)fnv64(f, n));
  }
  rec_printf(r, "\n");
}

/* Reads frames into `r` until one without MORE brings the viewer to `version`. */
static void rec_until(client_conn *c, rec *r, const char *who, uint64_t version) {
  for (;;) {
    proto_header h;
    const uint8_t *p;
    char err[256];
    ASSERT_OK(client_read_frame(c, 10000, &h, &p, err, sizeof(err)), err);
    rec_frame(r, who, &h, p);
    if (h.type != PROTO_ERROR && !(h.flags & PROTO_FLAG_MORE) && h.session_version >= version) return;
  }
}

static uint64_t server_version(harness *h) {
  cJSON *r = harness_rpc_ok(h, "state.get", "{\"session\":\"demo\"}");
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static uint64_t rpc_version(harness *h, const char *method, const char *params) {
  cJSON *r = harness_rpc_ok(h, method, params);
  cJSON *v = cJSON_GetObjectItem(r, "version");
  uint64_t version = v ? (uint64_t)v->valuedouble : 0;
  cJSON_Delete(r);
  return version ? version : server_version(h);
}

/* Sends HELLO (version 1 when opts is NULL) and records WELCOME and SNAPSHOT. */
static void join(harness *h, client_conn *c, rec *r, const char *who, const proto_hello_opts *opts) {
  harness_connect(h, c, h->stream_port);
  ASSERT_OK(client_hello2(c, "demo", PROTO_ROLE_VIEWER, NULL, opts), NULL);
  rec_until(c, r, who, 0);                 /* WELCOME */
  ASSERT(strstr(r->text, "type=2 ") != NULL);
  rec_until(c, r, who, 0);                 /* SNAPSHOT */
}

/* A participant granted "presence" that moves its cursor before each change of the script
 * (NULL: none): viewers that did not ask for presence must not see a byte of it. */
static client_conn *mover;
static float mover_t;

static void move(void) {
  if (!mover) return;
  proto_buf b;
  proto_buf_init(&b);
  for (int k = 0; k < 5; k++) {
    size_t at = proto_presence_begin(&b);
    mover_t += 1;
    proto_presence_state s = {.flags = PROTO_PRES_CURSOR | PROTO_PRES_CAMERA, .tool = PROTO_TOOL_DEFORM,
                              .hit = {mover_t, 0, 0}, .normal = {0, 0, 1}, .radius = 0.05f,
                              .eye = {0, 0, 2}, .target = {0, 0, 0}, .fov = 0.8f};
    ASSERT_OK(proto_presence_put_state(&b, &s), NULL);
    ASSERT_OK(proto_presence_end(&b, at), NULL);
  }
  ASSERT_OK(client_send_buf(mover, &b), NULL);
  proto_buf_fini(&b);
  usleep(20000); /* past one presence period, so that an update is sent to whoever gets them */
}

/* ana's mask steps over JSON-RPC (with `ana`, a connection that said hello as ana): none of
 * them is a frame for anyone but ana's connections granted "mask". */
static void ana_masks(client_conn *ana, int round) {
  if (!ana) return;
  static const char *const calls[3][2] = {
      {"mask.stroke", "{\"session\":\"demo\",\"radius\":0.012,\"samples\":[{\"center\":[0.03,0.02,0.09]}]}"},
      {"mask.auto", "{\"session\":\"demo\",\"mode\":\"normal\",\"vertex\":20400,\"angle\":30,\"combine\":\"add\"}"},
      {"mask.invert", "{\"session\":\"demo\"}"}};
  cJSON *r = NULL;
  char msg[256];
  ASSERT_EQ(harness_call(ana, calls[round][0], calls[round][1], &r, msg, sizeof(msg)), 0);
  cJSON_Delete(r);
}

/* The scripted session: each change is read by every viewer before the next; with `ana`, ana's
 * mask steps in between (over JSON-RPC, and as a binary EDIT MASK of the editor as ana). */
static void script_masks(harness *h, client_conn *viewers, rec *recs, const char *const *names, int n, client_conn *ana);
static void script(harness *h, client_conn *viewers, rec *recs, const char *const *names, int n) {
  script_masks(h, viewers, recs, names, n, NULL);
}

static void script_masks(harness *h, client_conn *viewers, rec *recs, const char *const *names, int n, client_conn *ana) {
  uint64_t v;
#define ALL_READ(version)                                                                     \
  do {                                                                                        \
    for (int i_ = 0; i_ < n; i_++) rec_until(&viewers[i_], &recs[i_], names[i_], (version)); \
    move();                                                                                   \
  } while (0)
  move();
  ana_masks(ana, 0);
  v = rpc_version(h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0.8,\"jaw_open\":0.25}}");
  ALL_READ(v);
  ana_masks(ana, 1);
  v = rpc_version(h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"12\":[0.001,0,-0.002],\"20400\":[0,0.003,0]}}");
  ALL_READ(v);
  v = rpc_version(h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"smile_L\":0,\"blink_R\":1}}");
  ALL_READ(v);
  /* A binary EDIT from an editor (joined after the viewers, so their client ids stay put). */
  client_conn ed;
  client_replica er;
  harness_join(h, &ed, &er, "demo", PROTO_ROLE_EDITOR, NULL);
  uint64_t before = server_version(h);
  proto_buf b;
  proto_buf_init(&b);
  uint32_t idx[3] = {5, 6, 7};
  int32_t q[9] = {100, 0, -100, 0, 50, 0, -7, 7, 7};
  ASSERT_OK(proto_encode_edit_offsets(&b, 1, 3, idx, q), NULL);
  if (ana) { /* the editor as ana: a mask stroke by EDIT MASK, then the offsets */
    const float smp[5] = {0.03f, 0.02f, 0.09f, 0.02f, 1.0f};
    proto_buf m;
    proto_buf_init(&m);
    ASSERT_OK(proto_encode_edit_author(&m, 2, "ana"), NULL);
    ASSERT_OK(proto_encode_edit_mask(&m, 3, &(proto_mask_edit){.op = PROTO_MASK_STROKE, .count = 1}, smp), NULL);
    ASSERT_OK(client_send_buf(&ed, &m), NULL);
    proto_buf_fini(&m);
  }
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  proto_buf_fini(&b);
  v = before;
  for (int tries = 0; tries < 500 && v == before; tries++) {
    usleep(10000);
    v = server_version(h);
  }
  ASSERT(v > before);
  ALL_READ(v);
  ana_masks(ana, 2);
  v = rpc_version(h, "history.undo", "{\"session\":\"demo\"}");
  ALL_READ(v);
#undef ALL_READ
  client_replica_fini(&er);
  client_close(&ed);
}

static const char *const four_names[4] = {"v1", "v2", "v2-lossless", "v2"};

/* The recording's three viewers (version 1; version 2 quantised; version 2 lossless), in its
 * order, and a fourth of version 2 that asks for `caps`. */
static void join_four(harness *h, client_conn *viewers, rec *recs, uint32_t caps) {
  proto_hello_opts quantised = {0}, lossless = {.codec = PROTO_CODEC_LOSSLESS}, asks = {.caps = caps};
  join(h, &viewers[0], &recs[0], four_names[0], NULL);
  join(h, &viewers[1], &recs[1], four_names[1], &quantised);
  join(h, &viewers[2], &recs[2], four_names[2], &lossless);
  join(h, &viewers[3], &recs[3], four_names[3], &asks);
}

/* The first line where two recordings differ, for the failure message. */
static void assert_same_text(const char *got, const char *want, const char *what) {
  if (strcmp(got, want) == 0) return;
  int line = 1;
  const char *g = got, *w = want;
  while (*g && *g == *w) {
    if (*g == '\n') line++;
    g++, w++;
  }
  const char *gl = g, *wl = w;
  while (gl > got && gl[-1] != '\n') gl--;
  while (wl > want && wl[-1] != '\n') wl--;
  test__fail(__FILE__, __LINE__, "%s: line %d differs:\n  got  %.200s\n  want %.200s", what, line, gl, wl);
}

static void assert_first_line(const char *got, const char *want, const char *what) {
  if (strncmp(got, want, strlen(want)) != 0)
    test__fail(__FILE__, __LINE__, "%s:\n  got  %.*s\n  want %s", what, (int)strcspn(got, "\n"), got, want);
}

TEST(v1_and_v2_viewers_that_ask_for_no_capability_get_the_bytes_of_the_server_before_capabilities) {
  harness h;
  harness_start(&h, "demo", demo_args);
  /* The fourth asks for "noop" (not in the recording: the old server would not grant it). */
  client_conn viewers[4];
  rec recs[4] = {{0}};
  join_four(&h, viewers, recs, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  /* Two participants granted presence (one moving through the whole script, one watching what
   * it gets): they join after the recorded viewers, so those keep the client ids recorded. A
   * recording (CAPS_RECORD, from a server before capabilities) has neither: that server knows
   * no presence frames. */
  const char *record = getenv("CAPS_RECORD");
  if (record) {
    script(&h, viewers, recs, four_names, 4);
    goto recorded;
  }
  client_conn pat, watcher;
  proto_hello_opts pres = {.caps = PROTO_CAP_BIT(PROTO_CAP_PRESENCE), .author = {"pat", 3}};
  harness_connect(&h, &pat, h.stream_port);
  ASSERT_OK(client_hello2(&pat, "demo", PROTO_ROLE_VIEWER, NULL, &pres), NULL);
  rec prec = {0};
  rec_until(&pat, &prec, "pat", 0); /* WELCOME */
  rec_until(&pat, &prec, "pat", 0); /* SNAPSHOT */
  harness_connect(&h, &watcher, h.stream_port);
  ASSERT_OK(client_hello2(&watcher, "demo", PROTO_ROLE_VIEWER, NULL, &pres), NULL);
  mover = &pat;
  script(&h, viewers, recs, four_names, 4);
  mover = NULL;
  /* ... and the watcher did get pat's moves: the presence was there to be seen. */
  int presence_frames = 0;
  for (;;) {
    proto_header ph;
    const uint8_t *pp;
    char perr[256];
    if (client_read_frame(&watcher, 2000, &ph, &pp, perr, sizeof(perr)) != 0) break;
    if (ph.type == PROTO_PRESENCE && ++presence_frames >= 3) break;
  }
  ASSERT(presence_frames >= 3);
  client_close(&pat);
  client_close(&watcher);
  free(prec.text);
recorded:
  if (!record) {
    /* Granted in WELCOME: the no-caps WELCOME's bytes (its own client id, 5 in place of 3), with
     * the option list 8 bytes longer and the caps option last, then every other frame the same. */
    const char *welcome_v2 = "v2 0 type=2 flags=0 version=0 len=56 44464d4402000200240000000000000000000000"
                             "030000000100040064656d6f16000101000002040000000000030400fe95d33604010005\n";
    const char *welcome_caps = "v2 0 type=2 flags=0 version=0 len=64 44464d44020002002c0000000000000000000000"
                               "050000000100040064656d6f1e000101000002040000000000030400fe95d33604010005"
                               "07050004" "6e6f6f70\n";
    assert_first_line(recs[1].text, welcome_v2, "the WELCOME of a viewer that asked for nothing");
    assert_first_line(recs[3].text, welcome_caps, "a WELCOME that grants noop");
  }
  rec all = {0};
  for (int i = 0; i < 4; i++) {
    if (i < 3) rec_printf(&all, "%s", recs[i].text);
    client_close(&viewers[i]);
  }
  harness_stop(&h);
  if (record) {
    FILE *f = fopen(record, "w");
    ASSERT(f != NULL);
    fputs(all.text, f);
    ASSERT(fclose(f) == 0);
  } else {
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/deformd/stream_bytes_e71ec77.txt", getenv("DEFORMD_SOURCE_DIR"));
    size_t len;
    char *want = (char *)test_read_file(path, &len);
    assert_same_text(all.text, want, "the frames against those of the server at e71ec77");
    free(want);
    assert_same_text(strchr(recs[3].text, '\n') + 1, strchr(recs[1].text, '\n') + 1,
                     "the frames after WELCOME of a viewer granted noop and of one that asked for nothing");
  }
  for (int i = 0; i < 4; i++) free(recs[i].text);
  free(all.text);
}

/* ---- HELLOs written by hand: four_names this build does not know, malformed lists ------------------ */

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

/* A version 2 viewer HELLO for "demo" whose only option is caps with `value` (n bytes). */
static size_t hello_with_caps(uint8_t *f, const uint8_t *value, size_t n) {
  static const uint8_t head[] = {'D', 'F', 'M', 'D', 2, 0, PROTO_HELLO, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 2, 0, PROTO_ROLE_VIEWER, 0, 4, 0, 'd', 'e', 'm', 'o', 0, 0};
  size_t at = sizeof(head);
  memcpy(f, head, at);
  put16(f + at, (uint16_t)(3 + n)), at += 2;
  f[at++] = PROTO_OPT_CAPS;
  put16(f + at, (uint16_t)n), at += 2;
  if (n) memcpy(f + at, value, n); /* (an empty list: value may be NULL) */
  at += n;
  put16(f + 8, (uint16_t)(at - PROTO_HEADER_SIZE));
  return at;
}

/* Joins with a hand-written caps list: the WELCOME must end with the caps option `answer`
 * (alen bytes: tag, length, four_names) and decode to `granted`, and the SNAPSHOT follow. */
static void join_raw(harness *h, const uint8_t *value, size_t n, const uint8_t *answer, size_t alen,
                     uint32_t granted) {
  client_conn c;
  uint8_t f[2048];
  char err[256];
  harness_connect(h, &c, h->stream_port);
  ASSERT_OK(client_send(&c, f, hello_with_caps(f, value, n)), NULL);
  proto_header hd;
  const uint8_t *p;
  ASSERT_OK(client_read_frame(&c, 10000, &hd, &p, err, sizeof(err)), err);
  ASSERT_EQ(hd.type, PROTO_WELCOME);
  ASSERT(hd.length >= alen);
  ASSERT(memcmp(p + hd.length - alen, answer, alen) == 0);
  proto_welcome w;
  proto_welcome_opts o;
  ASSERT_OK(proto_decode_welcome2(p, hd.length, &w, &o), NULL);
  ASSERT_EQ(o.caps_option, 1);
  ASSERT_EQ(o.caps, granted);
  ASSERT_OK(client_read_frame(&c, 10000, &hd, &p, err, sizeof(err)), err);
  ASSERT_EQ(hd.type, PROTO_SNAPSHOT);
  client_close(&c);
}

TEST(a_viewer_that_asks_for_capabilities_this_server_does_not_know_is_granted_the_ones_it_does) {
  harness h;
  harness_start(&h, "demo", demo_args);
  /* Unknown names around a known one: only "noop" comes back. */
  static const uint8_t mixed[] = {11, 'p', 'r', 'e', 's', 'e', 'n', 'c', 'e', '.', 'v', '2', 4, 'n', 'o', 'o', 'p',
                                  6, 'z', 'z', '-', '9', '_', 'a'};
  static const uint8_t granted_noop[] = {PROTO_OPT_CAPS, 5, 0, 4, 'n', 'o', 'o', 'p'};
  join_raw(&h, mixed, sizeof(mixed), granted_noop, sizeof(granted_noop), PROTO_CAP_BIT(PROTO_CAP_NOOP));
  /* Only unknown names, or none: an empty answer, which still says the server knows capabilities. */
  static const uint8_t unknown[] = {8, 't', 'e', 'x', 't', 'u', 'r', 'e', 's'};
  static const uint8_t granted_none[] = {PROTO_OPT_CAPS, 0, 0};
  join_raw(&h, unknown, sizeof(unknown), granted_none, sizeof(granted_none), 0);
  join_raw(&h, NULL, 0, granted_none, sizeof(granted_none), 0);
  /* The client library's way: a list by name, the grant read back from WELCOME. */
  client_conn c;
  char err[256];
  proto_hello_opts o = {0};
  ASSERT_EQ(client_caps_parse("noop,textures", &o, err, sizeof(err)), CLIENT_EINVAL);
  ASSERT_STR_CONTAINS(err, "unknown capability 'textures' (this build knows: noop,up,bulk,mask,presence,texture,texclip,entropy)");
  ASSERT_OK(client_caps_parse("noop", &o, err, sizeof(err)), err);
  harness_connect(&h, &c, h.stream_port);
  ASSERT_OK(client_hello2(&c, "demo", PROTO_ROLE_VIEWER, NULL, &o), NULL);
  proto_welcome w;
  proto_welcome_opts wo;
  ASSERT_OK(client_read_welcome(&c, 10000, &w, &wo, err, sizeof(err)), err);
  ASSERT_EQ(wo.caps, PROTO_CAP_BIT(PROTO_CAP_NOOP));
  ASSERT_EQ(wo.caps_option, 1);
  client_close(&c);
  /* A version 1 viewer cannot ask (its HELLO has no options) and is told nothing. */
  harness_connect(&h, &c, h.stream_port);
  ASSERT_OK(client_hello(&c, "demo", PROTO_ROLE_VIEWER, NULL), NULL);
  ASSERT_OK(client_read_welcome(&c, 10000, &w, &wo, err, sizeof(err)), err);
  ASSERT_EQ(wo.protocol_version, PROTO_VERSION);
  ASSERT_EQ(wo.caps_option, 0);
  client_close(&c);
  harness_stop(&h);
}

/* The ERROR a hand-written caps list gets: MALFORMED, the reason, and a close. */
static void refused(harness *h, const uint8_t *value, size_t n, const char *why) {
  client_conn c;
  uint8_t f[2048];
  char err[512];
  harness_connect(h, &c, h->stream_port);
  ASSERT_OK(client_send(&c, f, hello_with_caps(f, value, n)), NULL);
  proto_welcome w;
  proto_welcome_opts o;
  ASSERT_EQ(client_read_welcome(&c, 10000, &w, &o, err, sizeof(err)), CLIENT_EMALFORMED);
  char want[256];
  snprintf(want, sizeof(want), "refused (error %d): malformed HELLO: %s", PROTO_ERR_MALFORMED, why);
  ASSERT_STR_CONTAINS(err, want);
  ASSERT(harness_closed(&c, 3000));
  client_close(&c);
}

TEST(a_malformed_capability_list_is_refused_with_a_reason) {
  harness h;
  harness_start(&h, "demo", demo_args);
  static const uint8_t twice[] = {4, 'n', 'o', 'o', 'p', 1, 'x', 4, 'n', 'o', 'o', 'p'};
  refused(&h, twice, sizeof(twice), "a capability named twice");
  static const uint8_t upper[] = {4, 'N', 'o', 'o', 'p'};
  refused(&h, upper, sizeof(upper), "a capability name holds a byte other than a-z 0-9 _ . -");
  static const uint8_t empty[] = {0};
  refused(&h, empty, sizeof(empty), "an empty capability name");
  static const uint8_t cut[] = {9, 'n', 'o', 'o', 'p'};
  refused(&h, cut, sizeof(cut), "a capability name runs past the end of the list");
  uint8_t many[33 * 3], longer[34];
  for (int i = 0; i < 33; i++) { /* "aa", "ab", ... "bg": all different */
    many[3 * i] = 2;
    many[3 * i + 1] = (uint8_t)('a' + i / 26);
    many[3 * i + 2] = (uint8_t)('a' + i % 26);
  }
  refused(&h, many, sizeof(many), "more than 32 capabilities");
  longer[0] = 33;
  memset(longer + 1, 'a', 33);
  refused(&h, longer, sizeof(longer), "a capability name over 32 bytes");
  /* The server still serves a well-formed HELLO after all of these. */
  client_conn c;
  client_replica r;
  proto_hello_opts o = {.caps = PROTO_CAP_BIT(PROTO_CAP_NOOP)};
  harness_join2(&h, &c, &r, "demo", PROTO_ROLE_VIEWER, NULL, &o);
  client_replica_fini(&r);
  client_close(&c);
  harness_stop(&h);
}

/* ---- "up": the session's up axis in WELCOME ---------------------------------------------------- */

/* Joins `session` as a version 2 viewer asking for `caps`; the WELCOME's payload into f. */
static size_t welcome_of(harness *h, const char *session, uint32_t caps, int with_caps, uint8_t *f, size_t cap,
                         proto_welcome_opts *o) {
  client_conn c;
  char err[256];
  harness_connect(h, &c, h->stream_port);
  proto_hello_opts ho = {.caps = caps, .caps_option = (uint8_t)with_caps};
  ASSERT_OK(client_hello2(&c, session, PROTO_ROLE_VIEWER, NULL, &ho), NULL);
  proto_header hd;
  const uint8_t *p;
  ASSERT_OK(client_read_frame(&c, 10000, &hd, &p, err, sizeof(err)), err);
  ASSERT_EQ(hd.type, PROTO_WELCOME);
  ASSERT(hd.length <= cap);
  memcpy(f, p, hd.length);
  proto_welcome w;
  ASSERT_OK(proto_decode_welcome2(p, hd.length, &w, o), NULL);
  client_close(&c);
  return hd.length;
}

TEST(a_viewer_that_asks_for_up_is_told_the_sessions_up_axis_in_welcome_and_others_get_todays_bytes) {
  harness h;
  harness_start(&h, "demo", demo_args);
  cJSON_Delete(harness_rpc_ok(&h, "session.create", "{\"session\":\"scan\",\"mesh\":\"demo\",\"up\":\"z\"}"));
  uint8_t f[512];
  proto_welcome_opts o;
  /* Asked: the caps option grants "up", then the up option (tag 8, length 1, 'z') ends the list. */
  static const uint8_t tail_z[] = {PROTO_OPT_CAPS, 3, 0, 2, 'u', 'p', PROTO_OPT_UP, 1, 0, 'z'};
  size_t n = welcome_of(&h, "scan", PROTO_CAP_BIT(PROTO_CAP_UP), 1, f, sizeof(f), &o);
  ASSERT(n >= sizeof(tail_z) && memcmp(f + n - sizeof(tail_z), tail_z, sizeof(tail_z)) == 0);
  ASSERT_EQ(o.caps, PROTO_CAP_BIT(PROTO_CAP_UP));
  ASSERT_EQ(o.up, 'z');
  /* The default session says 'y'. */
  static const uint8_t tail_y[] = {PROTO_OPT_CAPS, 3, 0, 2, 'u', 'p', PROTO_OPT_UP, 1, 0, 'y'};
  n = welcome_of(&h, "demo", PROTO_CAP_BIT(PROTO_CAP_UP), 1, f, sizeof(f), &o);
  ASSERT(n >= sizeof(tail_y) && memcmp(f + n - sizeof(tail_y), tail_y, sizeof(tail_y)) == 0);
  ASSERT_EQ(o.up, 'y');
  /* Not asked (no caps option, or "noop" only): no up option, the option list as before
   * capabilities (22 bytes: codec, rate, tolerance, shift), or that plus the noop grant. */
  n = welcome_of(&h, "scan", 0, 0, f, sizeof(f), &o);
  ASSERT_EQ(o.up, 0);
  ASSERT_EQ(o.caps_option, 0);
  size_t names = 4 + 1 + 1 + 2 + 4; /* client id, role, reserved, "scan" with its u16 length */
  ASSERT_EQ(n, names + 2 + 22);
  ASSERT_EQ(f[names] | f[names + 1] << 8, 22);
  n = welcome_of(&h, "scan", PROTO_CAP_BIT(PROTO_CAP_NOOP), 1, f, sizeof(f), &o);
  ASSERT_EQ(o.up, 0);
  static const uint8_t tail_noop[] = {PROTO_OPT_CAPS, 5, 0, 4, 'n', 'o', 'o', 'p'};
  ASSERT(memcmp(f + n - sizeof(tail_noop), tail_noop, sizeof(tail_noop)) == 0);
  /* A version 1 viewer cannot ask and is told nothing. */
  client_conn c;
  char err[256];
  proto_welcome w;
  harness_connect(&h, &c, h.stream_port);
  ASSERT_OK(client_hello(&c, "scan", PROTO_ROLE_VIEWER, NULL), NULL);
  ASSERT_OK(client_read_welcome(&c, 10000, &w, &o, err, sizeof(err)), err);
  ASSERT_EQ(o.protocol_version, PROTO_VERSION);
  ASSERT_EQ(o.up, 0);
  client_close(&c);
  harness_stop(&h);
}

/* ---- masks (§14.7): MASK frames to their author's connections granted "mask", nobody else ------- */

/* The frames of one recording after its first line (WELCOME), without its MASK lines and
 * without each line's name and frame number (a MASK frame shifts them). */
static char *without_masks(const char *text) {
  char *out = malloc(strlen(text) + 1), *o = out;
  const char *p = strchr(text, '\n') + 1;
  while (*p) {
    const char *e = strchr(p, '\n'), *t = strstr(p, " type=");
    size_t n = (size_t)(e - p) + 1;
    if (strncmp(t, " type=20 ", 9) != 0) memcpy(o, t, (size_t)(e - t) + 1), o += (size_t)(e - t) + 1;
    p += n;
  }
  *o = '\0';
  return out;
}

/* Reads until a MASK frame holding `count` vertices (frames of other kinds pass by). */
static void read_mask_of(client_conn *c, client_replica *r, uint32_t count) {
  for (;;) {
    proto_header h;
    const uint8_t *p;
    char err[256];
    ASSERT_OK(client_read_frame(c, 10000, &h, &p, err, sizeof(err)), err);
    ASSERT_OK(client_replica_apply(r, &h, p, err, sizeof(err)), err);
    if (h.type != PROTO_MASK) continue;
    proto_mask_view m;
    ASSERT_OK(proto_decode_mask(p, h.length, &m), NULL);
    if (m.count == count) return;
  }
}

TEST(mask_steps_send_nothing_to_viewers_without_the_mask_capability_and_their_bytes_stay_todays) {
  harness h;
  harness_start(&h, "demo", demo_args);
  /* Three viewers as the recording's, and a fourth granted "mask" (author: none, not ana). */
  client_conn viewers[4];
  rec recs[4] = {{0}};
  join_four(&h, viewers, recs, PROTO_CAP_BIT(PROTO_CAP_MASK));
  proto_hello_opts mask = {.caps = PROTO_CAP_BIT(PROTO_CAP_MASK)};
  ASSERT(strstr(recs[3].text, "07050004" "6d61736b") != NULL); /* granted: "mask" */
  rec_until(&viewers[3], &recs[3], four_names[3], 0);               /* its own (empty) mask after the snapshot */
  ASSERT(strstr(recs[3].text, " type=20 ") != NULL);
  client_conn ana; /* connected after the viewers, whose client ids the recording has */
  harness_connect(&h, &ana, h.rpc_port);
  cJSON *r = NULL;
  char msg[256];
  ASSERT_EQ(harness_call(&ana, "hello", "{\"author\":\"ana\"}", &r, msg, sizeof(msg)), 0);
  cJSON_Delete(r);
  /* ana's editor, granted "mask": its mask comes after each of ana's mask steps. */
  client_conn ed;
  client_replica er;
  harness_connect(&h, &ed, h.stream_port);
  client_replica_init(&er);
  ASSERT_OK(client_hello2(&ed, "demo", PROTO_ROLE_EDITOR, NULL, &mask), NULL);
  proto_buf b;
  proto_buf_init(&b);
  ASSERT_OK(proto_encode_edit_author(&b, 1, "ana"), NULL);
  ASSERT_OK(client_send_buf(&ed, &b), NULL);
  proto_buf_fini(&b);
  script_masks(&h, viewers, recs, four_names, 4, &ana);
  rec all = {0};
  for (int i = 0; i < 3; i++) rec_printf(&all, "%s", recs[i].text);
  char path[1024];
  snprintf(path, sizeof(path), "%s/tests/deformd/stream_bytes_e71ec77.txt", getenv("DEFORMD_SOURCE_DIR"));
  size_t len;
  char *want = (char *)test_read_file(path, &len);
  assert_same_text(all.text, want, "with ana's mask steps, the frames against those of the server at e71ec77");
  free(want);
  char *granted = without_masks(recs[3].text), *plain = without_masks(recs[1].text);
  assert_same_text(granted, plain, "a viewer granted mask, of another author, gets today's frames and its own mask");
  ASSERT_EQ(strstr(strstr(recs[3].text, " type=20 ") + 1, " type=20 "), NULL); /* one MASK: its own, on joining */
  /* ana's editor ends with ana's mask as mask.get answers it. */
  ASSERT_EQ(harness_call(&ana, "mask.get", "{\"session\":\"demo\"}", &r, msg, sizeof(msg)), 0);
  uint32_t n = (uint32_t)cJSON_GetArraySize(cJSON_GetObjectItem(r, "vertices"));
  ASSERT(n > 100);
  read_mask_of(&ed, &er, n);
  ASSERT(er.mask != NULL && er.mask_serial >= 4);
  cJSON *vs = cJSON_GetObjectItem(r, "vertices"), *ms = cJSON_GetObjectItem(r, "values");
  for (uint32_t i = 0; i < n; i++)
    ASSERT(er.mask[cJSON_GetArrayItem(vs, (int)i)->valueint] == (float)cJSON_GetArrayItem(ms, (int)i)->valuedouble);
  cJSON_Delete(r);
  free(granted);
  free(plain);
  client_replica_fini(&er);
  client_close(&ed);
  for (int i = 0; i < 4; i++) client_close(&viewers[i]), free(recs[i].text);
  free(all.text);
  client_close(&ana);
  harness_stop(&h);
}
