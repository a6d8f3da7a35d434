/*
 * test_anim.c — animation clips through a real deformd: PCA compression of MD2 keyframe clips,
 * playback as weight frames, crossfades, recordings of a session's own states and glTF weight
 * clips. The oracle is always the source data: the frames the test imports itself from the
 * MD2 file (or the weights it set), compared with the positions a viewer replica rebuilds from
 * what the server streamed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "oracle.h"
#include "test.h"

static const char *const no_args[] = {"--demo", NULL};

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static uint64_t version_of(cJSON *r) {
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

static uint64_t session_version(harness *h, const char *session) {
  char p[128];
  snprintf(p, sizeof(p), "{\"session\":\"%s\"}", session);
  return version_of(harness_rpc_ok(h, "state.get", p));
}

static void open_session(harness *h, const char *name, const char *path) {
  char p[1200];
  snprintf(p, sizeof(p), "{\"session\":\"%s\",\"mesh\":\"%s\"}", name, path);
  cJSON_Delete(harness_rpc_ok(h, "session.create", p));
}

/* Max distance between the replica's positions and `want` (3V floats). */
static double max_distance(const client_replica *r, const float *want) {
  uint32_t n = r->mesh->vertex_count;
  float *p = malloc(sizeof(float) * 3 * n);
  ASSERT_OK(client_replica_positions(r, p), NULL);
  double worst = 0;
  for (uint32_t v = 0; v < n; v++) {
    double e2 = 0;
    for (int k = 0; k < 3; k++) {
      double d = (double)p[3 * v + k] - want[3 * v + k];
      e2 += d * d;
    }
    worst = fmax(worst, sqrt(e2));
  }
  free(p);
  return worst;
}

/* What stepping through a compressed clip put on the wire and what the viewer rebuilt. */
typedef struct stepped {
  double worst;        /* the viewer's largest vertex error against the MD2 frames */
  double bytes;        /* the streamed WEIGHTS frames' bytes, summed */
  uint32_t frames;     /* WEIGHTS frames in a quantised-run form */
  uint32_t narrow;     /* of which 8-bit (QRUN8) */
} stepped;

/* Plays clip `name` (compressed to K components from target `first`), pauses, and seeks through
 * its frames 1, 2, ..., F-1, 0: every seek streams one frame, which this reads off the wire
 * (checking its form and size against its mode) and applies to the replica. */
static stepped step_clip(harness *h, client_conn *v, client_replica *r, const mesh *m, const char *session,
                         const char *name, uint32_t K, uint32_t first) {
  const mesh_clip *clip = &m->clips[mesh_find_clip(m, name)];
  size_t n3 = 3 * (size_t)m->vertex_count;
  char p[256], err[256];
  snprintf(p, sizeof(p), "{\"session\":\"%s\",\"clip\":\"%s\"}", session, name);
  cJSON_Delete(harness_rpc_ok(h, "anim.play", p));
  snprintf(p, sizeof(p), "{\"session\":\"%s\"}", session);
  cJSON_Delete(harness_rpc_ok(h, "anim.pause", p));
  harness_follow(v, r, session_version(h, session), 10000);
  stepped st = {0, 0, 0, 0};
  for (uint32_t i = 1; i <= clip->frame_count; i++) {
    uint32_t f = i % clip->frame_count;
    snprintf(p, sizeof(p), "{\"session\":\"%s\",\"frame\":%u}", session, f);
    cJSON_Delete(harness_rpc_ok(h, "anim.seek", p));
    uint64_t want = session_version(h, session);
    while (r->version < want) {
      proto_header hd;
      const uint8_t *payload;
      ASSERT_OK(client_read_frame(v, 5000, &hd, &payload, err, sizeof(err)), err);
      if (hd.type == PROTO_WEIGHTS) {
        proto_weights_view w;
        ASSERT_OK(proto_decode_weights(payload, hd.length, NULL, &w), NULL);
        if (w.mode == PROTO_WEIGHTS_QRUN || w.mode == PROTO_WEIGHTS_QRUN8) {
          int narrow = w.mode == PROTO_WEIGHTS_QRUN8;
          ASSERT_EQ(w.first, first);
          ASSERT_EQ(w.count, K);
          ASSERT_EQ((size_t)PROTO_HEADER_SIZE + hd.length, (size_t)PROTO_HEADER_SIZE + 11 + (narrow ? 1u : 2u) * K);
          st.bytes += PROTO_HEADER_SIZE + hd.length;
          st.frames++;
          st.narrow += (uint32_t)narrow;
        }
      }
      ASSERT_OK(client_replica_apply(r, &hd, payload, err, sizeof(err)), err);
    }
    st.worst = fmax(st.worst, max_distance(r, m->frames + n3 * (clip->first_frame + f)));
  }
  return st;
}

TEST(a_compressed_md2_clip_streams_frames_viewers_rebuild_within_the_error_budget) {
  const char *path = test_assimp_model("MD2/faerie.md2");
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  int ci = mesh_find_clip(m, "run");
  ASSERT(ci >= 0);
  const mesh_clip *clip = &m->clips[ci];
  double diag = mesh_bbox_diagonal(m);
  harness h;
  harness_start(&h, "demo", no_args);
  open_session(&h, "faerie", path);
  /* The server lists the same clips as the mesh core. */
  cJSON *list = harness_rpc_ok(&h, "anim.list", "{\"session\":\"faerie\"}");
  ASSERT_EQ((uint32_t)cJSON_GetArraySize(cJSON_GetObjectItem(list, "clips")), m->clip_count);
  cJSON_Delete(list);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "faerie", PROTO_ROLE_VIEWER, NULL);
  cJSON *rep = harness_rpc_ok(&h, "anim.compress", "{\"session\":\"faerie\",\"clip\":\"run\",\"max_error\":0.005}");
  uint32_t K = (uint32_t)cJSON_GetObjectItem(rep, "components")->valueint;
  double streamed = cJSON_GetObjectItem(rep, "streamed_max_error")->valuedouble;
  double bytes = cJSON_GetObjectItem(rep, "bytes_per_frame")->valuedouble;
  uint32_t n8 = (uint32_t)cJSON_GetObjectItem(rep, "frames_8bit")->valueint;
  int met = cJSON_IsTrue(cJSON_GetObjectItem(rep, "budget_met"));
  fprintf(stderr, "run: %u frames -> %u components, streamed max error %.4g (%.3f%% of the diagonal), %g bytes/frame, %.1fx\n",
          clip->frame_count, K, streamed, 100 * streamed / diag, bytes,
          cJSON_GetObjectItem(rep, "ratio")->valuedouble);
  ASSERT(K >= 1 && K < clip->frame_count);
  uint32_t first = (uint32_t)cJSON_GetObjectItem(rep, "first_component")->valueint;
  cJSON_Delete(rep);
  /* The basis reached the viewer as K + 1 new targets. */
  harness_follow(&v, &r, session_version(&h, "faerie"), 10000);
  ASSERT_EQ(r.mesh->target_count, K + 1);
  /* Step through every frame (paused): what the viewer rebuilds is within the reported streamed
   * error of the original MD2 frame, and within the budget when the report says it is met; the
   * frames on the wire are the reported sizes, 8-bit as often as reported. */
  stepped st = step_clip(&h, &v, &r, m, "faerie", "run", K, first);
  fprintf(stderr, "viewer's max error over the clip: %.4g (reported %.4g); %u of %u frames 8-bit\n", st.worst, streamed,
          st.narrow, st.frames);
  ASSERT(st.worst <= streamed * (1 + 1e-4) + 1e-6 * diag);
  if (met) ASSERT(st.worst <= 0.005 * diag * (1 + 1e-4));
  ASSERT_EQ(st.frames, clip->frame_count);
  ASSERT_EQ(st.narrow, n8);
  ASSERT(fabs(st.bytes / st.frames - bytes) < 1e-9);
  /* Playing streams one frame per animation frame: at 10 fps, a few in 400 ms. */
  uint64_t before = session_version(&h, "faerie");
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"faerie\",\"clip\":\"run\",\"speed\":2}"));
  sleep_ms(400);
  cJSON *pl = harness_rpc_ok(&h, "anim.pause", "{\"session\":\"faerie\"}");
  ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(pl, "playing")));
  cJSON_Delete(pl);
  uint64_t after = session_version(&h, "faerie");
  fprintf(stderr, "%llu frames streamed in 400 ms at 2 x 10 fps\n", (unsigned long long)(after - before));
  ASSERT(after - before >= 3);
  harness_follow(&v, &r, after, 10000);
  /* Stop takes the clip out of the shape: back to the base positions. */
  cJSON_Delete(harness_rpc_ok(&h, "anim.stop", "{\"session\":\"faerie\"}"));
  harness_follow(&v, &r, session_version(&h, "faerie"), 10000);
  ASSERT(max_distance(&r, m->positions) < 1e-5 * diag);
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
  mesh_destroy(m);
}

/* faerie's death clip needs 19 components for 0.5 %: 69 bytes a frame in 16-bit weights, 88×
 * smaller than its 6,036 bytes of positions. In 8-bit frames it is 50 bytes, and the frames a
 * viewer rebuilds still meet the budget. weight_bits 16 keeps every frame 16-bit. */
TEST(eight_bit_frames_stream_a_long_md2_clip_100_times_smaller_within_the_budget) {
  const char *path = test_assimp_model("MD2/faerie.md2");
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  const mesh_clip *clip = &m->clips[mesh_find_clip(m, "death")];
  double diag = mesh_bbox_diagonal(m), raw = 12.0 * m->vertex_count;
  harness h;
  harness_start(&h, "demo", no_args);
  open_session(&h, "faerie", path);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "faerie", PROTO_ROLE_VIEWER, NULL);
  for (int bits = 8; bits <= 16; bits += 8) {
    char p[256];
    snprintf(p, sizeof(p), "{\"session\":\"faerie\",\"clip\":\"death\",\"name\":\"d%d\",\"weight_bits\":%d}", bits, bits);
    cJSON *rep = harness_rpc_ok(&h, "anim.compress", p);
    uint32_t K = (uint32_t)cJSON_GetObjectItem(rep, "components")->valueint;
    uint32_t first = (uint32_t)cJSON_GetObjectItem(rep, "first_component")->valueint;
    double bytes = cJSON_GetObjectItem(rep, "bytes_per_frame")->valuedouble;
    double streamed = cJSON_GetObjectItem(rep, "streamed_max_error")->valuedouble;
    ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(rep, "budget_met")));
    ASSERT_EQ(cJSON_GetObjectItem(rep, "raw_bytes_per_frame")->valuedouble, raw);
    cJSON_Delete(rep);
    stepped st = step_clip(&h, &v, &r, m, "faerie", "death", K, first);
    fprintf(stderr, "death, weight_bits %d: K %u, %u of %u frames 8-bit, %.1f bytes/frame (%.1fx), viewer's max error "
                    "%.3f%% of the diagonal (reported %.3f%%)\n",
            bits, K, st.narrow, st.frames, st.bytes / st.frames, raw / (st.bytes / st.frames), 100 * st.worst / diag,
            100 * streamed / diag);
    ASSERT_EQ(st.frames, clip->frame_count);
    ASSERT(fabs(st.bytes / st.frames - bytes) < 1e-9);
    ASSERT(st.worst <= streamed * (1 + 1e-4) + 1e-6 * diag);
    ASSERT(st.worst <= 0.005 * diag * (1 + 1e-4));
    if (bits == 8) {
      ASSERT(K >= 15); /* long enough that 16-bit frames miss 100× (31 + 2K > 60) */
      ASSERT(st.narrow > 0);
      ASSERT(raw / (st.bytes / st.frames) >= 100.0);
    } else {
      ASSERT_EQ(st.narrow, 0);
      ASSERT(st.bytes / st.frames == PROTO_HEADER_SIZE + 11 + 2.0 * K);
    }
    /* The first compression's targets keep their weights: stop takes them to 0 before the next. */
    cJSON_Delete(harness_rpc_ok(&h, "anim.stop", "{\"session\":\"faerie\"}"));
  }
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
  mesh_destroy(m);
}

TEST(a_crossfade_ends_on_the_second_clip_with_the_first_at_zero) {
  const char *path = test_assimp_model("MD2/sydney.md2");
  harness h;
  harness_start(&h, "demo", no_args);
  open_session(&h, "syd", path);
  cJSON *a = harness_rpc_ok(&h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"run\",\"components\":4}");
  ASSERT_EQ(cJSON_GetObjectItem(a, "components")->valueint, 4);
  cJSON_Delete(a);
  cJSON_Delete(harness_rpc_ok(&h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"stand\",\"components\":6,\"name\":\"idle\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"syd\",\"clip\":\"run\"}"));
  cJSON *b = harness_rpc_ok(&h, "anim.blend", "{\"session\":\"syd\",\"clip\":\"stand\",\"duration\":0.2}");
  ASSERT(strcmp(cJSON_GetObjectItem(b, "blending_to")->valuestring, "stand") == 0);
  cJSON_Delete(b);
  sleep_ms(600);
  cJSON *l = harness_rpc_ok(&h, "anim.list", "{\"session\":\"syd\"}");
  cJSON *player = cJSON_GetObjectItem(l, "player");
  ASSERT(strcmp(cJSON_GetObjectItem(player, "clip")->valuestring, "stand") == 0);
  ASSERT(cJSON_GetObjectItem(player, "blending_to") == NULL);
  cJSON_Delete(l);
  cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"syd\"}"));
  cJSON *w = harness_rpc_ok(&h, "weights.get", "{\"session\":\"syd\"}");
  cJSON *ws = cJSON_GetObjectItem(w, "weights");
  ASSERT(cJSON_GetObjectItem(ws, "run.mean")->valuedouble == 0.0);
  for (int k = 1; k <= 4; k++) {
    char name[32];
    snprintf(name, sizeof(name), "run.pc%d", k);
    ASSERT(cJSON_GetObjectItem(ws, name)->valuedouble == 0.0);
  }
  ASSERT(cJSON_GetObjectItem(ws, "idle.mean")->valuedouble == 1.0);
  cJSON_Delete(w);
  /* Errors, each with its reason. */
  char msg[512];
  ASSERT_EQ(harness_rpc_err(&h, "anim.play", "{\"session\":\"syd\",\"clip\":\"nope\"}", msg, sizeof(msg)), -32013);
  ASSERT_EQ(harness_rpc_err(&h, "anim.play", "{\"session\":\"syd\",\"clip\":\"jump\"}", msg, sizeof(msg)), -32006);
  ASSERT_STR_CONTAINS(msg, "anim.compress");
  ASSERT_EQ(harness_rpc_err(&h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"jump\",\"components\":2,\"max_error\":0.01}",
                            msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"jump\",\"weight_bits\":12}", msg,
                            sizeof(msg)), -32602);
  ASSERT_STR_CONTAINS(msg, "\"weight_bits\" must be 8");
  ASSERT_EQ(harness_rpc_err(&h, "anim.seek", "{\"session\":\"syd\",\"frame\":100000}", msg, sizeof(msg)), -32602);
  ASSERT_EQ(harness_rpc_err(&h, "anim.blend", "{\"session\":\"syd\",\"clip\":\"run\"}", msg, sizeof(msg)), -32006);
  ASSERT_EQ(harness_rpc_err(&h, "anim.compress", "{\"session\":\"syd\",\"clip\":\"run\",\"components\":4}", msg, sizeof(msg)),
            -32006); /* its targets exist already: give another "name" */
  ASSERT_STR_CONTAINS(msg, "already has a target");
  harness_stop(&h);
}

TEST(a_recording_of_the_sessions_own_states_compresses_back_to_them) {
  harness h;
  harness_start(&h, "demo", no_args);
  cJSON_Delete(harness_rpc_ok(&h, "anim.record_start", "{\"session\":\"demo\",\"clip\":\"take1\",\"fps\":20}"));
  const char *poses[3] = {"{\"session\":\"demo\",\"weights\":{\"smile_L\":1}}",
                          "{\"session\":\"demo\",\"weights\":{\"smile_L\":0,\"jaw_open\":0.8}}",
                          "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.2,\"blink_R\":1}}"};
  for (int i = 0; i < 3; i++) {
    cJSON_Delete(harness_rpc_ok(&h, "weights.set", poses[i]));
    sleep_ms(250);
  }
  cJSON *st = harness_rpc_ok(&h, "anim.record_stop", "{\"session\":\"demo\"}");
  uint32_t frames = (uint32_t)cJSON_GetObjectItem(st, "frames")->valueint;
  cJSON_Delete(st);
  ASSERT(frames >= 4);
  /* Four distinct shapes (rest and three poses): three components make the clip exact. */
  cJSON *rep = harness_rpc_ok(&h, "anim.compress", "{\"session\":\"demo\",\"clip\":\"take1\",\"components\":3}");
  double streamed = cJSON_GetObjectItem(rep, "streamed_max_error")->valuedouble;
  cJSON_Delete(rep);
  mesh *m = NULL;
  ASSERT_OK(mesh_demo_head(&m), NULL);
  fprintf(stderr, "take1: %u frames, streamed max error %.3g (diagonal %.3g)\n", frames, streamed, mesh_bbox_diagonal(m));
  ASSERT(streamed < 1e-4 * mesh_bbox_diagonal(m));
  /* Playing it back over a session at rest gives the last pose at the last frame. */
  cJSON_Delete(harness_rpc_ok(&h, "weights.set",
                              "{\"session\":\"demo\",\"weights\":{\"smile_L\":0,\"jaw_open\":0,\"blink_R\":0}}"));
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"demo\",\"clip\":\"take1\",\"loop\":false}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"demo\"}"));
  char p[128];
  snprintf(p, sizeof(p), "{\"session\":\"demo\",\"frame\":%u}", frames - 1);
  cJSON_Delete(harness_rpc_ok(&h, "anim.seek", p));
  harness_follow(&v, &r, session_version(&h, "demo"), 10000);
  float *w = calloc(m->target_count, sizeof(float)), *want = malloc(sizeof(float) * 3 * m->vertex_count);
  w[mesh_find_target(m, "jaw_open")] = 0.2f;
  w[mesh_find_target(m, "blink_R")] = 1.0f;
  mesh_evaluate(m, w, NULL, want);
  double e = max_distance(&r, want);
  fprintf(stderr, "last frame vs the last pose: %.3g\n", e);
  ASSERT(e <= streamed + 1e-6 * mesh_bbox_diagonal(m));
  free(w);
  free(want);
  mesh_destroy(m);
  client_replica_fini(&r);
  client_close(&v);
  char msg[256];
  ASSERT_EQ(harness_rpc_err(&h, "anim.record_stop", "{\"session\":\"demo\"}", msg, sizeof(msg)), -32006);
  harness_stop(&h);
}

TEST(a_gltf_weight_animation_plays_its_keys_as_weights) {
  const char *path = test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf");
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  ASSERT(m->clip_count >= 1 && m->clips[0].key_count >= 2);
  const mesh_clip *c = &m->clips[0];
  harness h;
  harness_start(&h, "demo", no_args);
  open_session(&h, "cube", path);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "cube", PROTO_ROLE_VIEWER, NULL);
  char p[512];
  snprintf(p, sizeof(p), "{\"session\":\"cube\",\"clip\":\"%s\"}", c->name);
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", p));
  cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"cube\"}"));
  for (uint32_t k = 0; k < c->key_count; k += (c->key_count > 8 ? c->key_count / 8 : 1)) {
    snprintf(p, sizeof(p), "{\"session\":\"cube\",\"frame\":%u}", k);
    cJSON_Delete(harness_rpc_ok(&h, "anim.seek", p));
    harness_follow(&v, &r, session_version(&h, "cube"), 10000);
    for (uint32_t t = 0; t < m->target_count; t++) {
      float want = c->weights[(size_t)k * m->target_count + t];
      want = want < 0 ? 0 : want > 1 ? 1 : want; /* the targets' default range [0, 1] */
      ASSERT(r.weights[t] == want);
    }
  }
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
  mesh_destroy(m);
}

/* "Variable PCA": a region of the head gets its own components for the same budget; the report
 * compares with one PCA of the whole mesh, and viewers rebuild the frames within the reported
 * error, as for a single PCA. */
TEST(region_budgets_report_their_saving_and_viewers_rebuild_within_the_error) {
  const char *path = test_assimp_model("MD2/faerie.md2");
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  const mesh_clip *clip = &m->clips[mesh_find_clip(m, "wave")];
  double ymax = m->bbox_max[1], ymin = m->bbox_min[1];
  char *p = malloc(16 * m->vertex_count + 256);
  int at = sprintf(p, "{\"session\":\"faerie\",\"clip\":\"wave\",\"regions\":[[");
  uint32_t head = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++)
    if (m->positions[3 * v + 1] > ymax - 0.2 * (ymax - ymin)) at += sprintf(p + at, "%s%u", head++ ? "," : "", v);
  sprintf(p + at, "]]}");
  ASSERT(head > 10);
  harness h;
  harness_start(&h, "demo", no_args);
  open_session(&h, "faerie", path);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "faerie", PROTO_ROLE_VIEWER, NULL);
  cJSON *rep = harness_rpc_ok(&h, "anim.compress", p);
  free(p);
  cJSON *regs = cJSON_GetObjectItem(rep, "regions");
  ASSERT_EQ(cJSON_GetArraySize(regs), 2);
  ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(regs, 0), "vertices")->valueint, (int)head);
  uint32_t K = (uint32_t)cJSON_GetObjectItem(rep, "components")->valueint;
  ASSERT_EQ(K, (uint32_t)(cJSON_GetObjectItem(cJSON_GetArrayItem(regs, 0), "components")->valueint +
                          cJSON_GetObjectItem(cJSON_GetArrayItem(regs, 1), "components")->valueint));
  int global = cJSON_GetObjectItem(rep, "global_components")->valueint;
  ASSERT(global >= 1);
  /* The saving at the clip's mean bytes per weight: (bytes_per_frame - 31) / K. */
  double per_weight = (cJSON_GetObjectItem(rep, "bytes_per_frame")->valuedouble - 31.0) / K;
  ASSERT(per_weight >= 1.0 && per_weight <= 2.0);
  ASSERT(fabs(cJSON_GetObjectItem(rep, "saving_bytes_per_frame")->valuedouble - per_weight * (global - (int)K)) < 1e-9);
  double streamed = cJSON_GetObjectItem(rep, "streamed_max_error")->valuedouble;
  fprintf(stderr, "wave: regions %u components, one PCA %d; streamed max error %.4g\n", K, global, streamed);
  cJSON_Delete(rep);
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"faerie\",\"clip\":\"wave\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.pause", "{\"session\":\"faerie\"}"));
  size_t n3 = 3 * (size_t)m->vertex_count;
  double worst = 0;
  for (uint32_t f = 0; f < clip->frame_count; f++) {
    char q[128];
    snprintf(q, sizeof(q), "{\"session\":\"faerie\",\"frame\":%u}", f);
    cJSON_Delete(harness_rpc_ok(&h, "anim.seek", q));
    harness_follow(&v, &r, session_version(&h, "faerie"), 10000);
    worst = fmax(worst, max_distance(&r, m->frames + n3 * (clip->first_frame + f)));
  }
  ASSERT(worst <= streamed * (1 + 1e-4) + 1e-6 * mesh_bbox_diagonal(m));
  ASSERT(worst <= 0.005 * mesh_bbox_diagonal(m) * (1 + 1e-4));
  client_replica_fini(&r);
  client_close(&v);
  harness_stop(&h);
  mesh_destroy(m);
}

/* Compressing adds targets over a sculpted mesh: the sculpt stays, in the server and in every
 * viewer (a TARGET never clears offsets; only a target made from the sculpt comes with a DELTA
 * that does). */
TEST(compressing_a_clip_leaves_the_sculpt_layer_alone_in_every_viewer) {
  harness h;
  harness_start(&h, "demo", no_args);
  client_conn v;
  client_replica r;
  harness_join(&h, &v, &r, "demo", PROTO_ROLE_VIEWER, NULL);
  cJSON_Delete(harness_rpc_ok(&h, "sculpt.set", "{\"session\":\"demo\",\"offsets\":{\"5\":[0.01,0,0],\"20400\":[0,0.004,0]}}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.record_start", "{\"session\":\"demo\",\"clip\":\"c\",\"fps\":50}"));
  cJSON_Delete(harness_rpc_ok(&h, "weights.set", "{\"session\":\"demo\",\"weights\":{\"jaw_open\":0.5}}"));
  sleep_ms(100);
  cJSON_Delete(harness_rpc_ok(&h, "anim.record_stop", "{\"session\":\"demo\"}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.compress", "{\"session\":\"demo\",\"clip\":\"c\",\"components\":1}"));
  uint64_t ver = session_version(&h, "demo");
  harness_follow(&v, &r, ver, 10000);
  client_conn late;
  client_replica lr;
  harness_join(&h, &late, &lr, "demo", PROTO_ROLE_VIEWER, NULL);
  uint32_t n;
  float *server = harness_server_positions(&h, "demo", &n);
  float *got = malloc(sizeof(float) * 3 * n);
  client_replica *all[2] = {&r, &lr};
  for (int k = 0; k < 2; k++) {
    ASSERT(all[k]->offsets[3 * 5] != 0.0f);
    ASSERT_OK(client_replica_positions(all[k], got), NULL);
    for (uint32_t i = 0; i < 3 * n; i++) ASSERT(got[i] == server[i]);
  }
  free(got);
  free(server);
  client_replica_fini(&r);
  client_replica_fini(&lr);
  client_close(&v);
  client_close(&late);
  harness_stop(&h);
}

/* A Quake III model's animation.cfg reaches the server's clips: anim.list shows the looping
 * frames and the animations that play once, and the player keeps to them (a looping clip goes
 * back to its looping frames, not to its first; a clip that plays once stops on its last). */
static double player_num(harness *h, const char *key, int *playing) {
  cJSON *l = harness_rpc_ok(h, "anim.list", "{\"session\":\"q3\"}");
  const cJSON *p = cJSON_GetObjectItem(l, "player");
  double v = cJSON_GetObjectItem(p, key)->valuedouble;
  if (playing) *playing = cJSON_IsTrue(cJSON_GetObjectItem(p, "playing"));
  cJSON_Delete(l);
  return v;
}

TEST(an_md3_with_an_animation_cfg_plays_its_clips_as_the_cfg_says) {
  static unsigned char buf[16384];
  const char *names[20];
  for (int f = 0; f < 20; f++) names[f] = "";
  size_t len = oracle_write_md3(buf, names, 20);
  const char *cfg = "sex m\n0\t10\t0\t10\t// BOTH_DEATH1\n10\t10\t4\t20\t// BOTH_DEAD1\n";
  test_write_file("animation.cfg", cfg, strlen(cfg));
  const char *path = test_write_file("model.md3", buf, len);
  harness h;
  harness_start(&h, "demo", no_args);
  open_session(&h, "q3", path);
  cJSON *list = harness_rpc_ok(&h, "anim.list", "{\"session\":\"q3\"}");
  const cJSON *clips = cJSON_GetObjectItem(list, "clips");
  const cJSON *death = cJSON_GetArrayItem(clips, 0), *dead = cJSON_GetArrayItem(clips, 1);
  ASSERT(strcmp(cJSON_GetObjectItem(death, "name")->valuestring, "BOTH_DEATH1") == 0);
  ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(death, "play_once")));
  ASSERT(cJSON_GetObjectItem(death, "loop_frames") == NULL);
  ASSERT(strcmp(cJSON_GetObjectItem(dead, "name")->valuestring, "BOTH_DEAD1") == 0);
  ASSERT_EQ(cJSON_GetObjectItem(dead, "frames")->valueint, 10);
  ASSERT_EQ(cJSON_GetObjectItem(dead, "fps")->valueint, 20);
  ASSERT_EQ(cJSON_GetObjectItem(dead, "loop_frames")->valueint, 4);
  ASSERT(cJSON_GetObjectItem(dead, "play_once") == NULL);
  ASSERT(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(clips, cJSON_GetArraySize(clips) - 1), "name")->valuestring, "all") == 0);
  cJSON_Delete(list);
  cJSON_Delete(harness_rpc_ok(&h, "anim.compress", "{\"session\":\"q3\",\"clip\":\"BOTH_DEAD1\",\"max_error\":0.01}"));
  cJSON_Delete(harness_rpc_ok(&h, "anim.compress", "{\"session\":\"q3\",\"clip\":\"BOTH_DEATH1\",\"max_error\":0.01}"));
  /* Looping BOTH_DEAD1: once it has shown its last frame (9), it only ever shows 6..9. */
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"q3\",\"clip\":\"BOTH_DEAD1\",\"loop\":true}"));
  int seen_last = 0, after = 0, playing;
  uint64_t deadline = client_now_ns() + 10000000000ull;
  while (after < 20 && client_now_ns() < deadline) {
    int frame = (int)player_num(&h, "frame", &playing);
    ASSERT(playing);
    if (seen_last) {
      ASSERT(frame >= 6 && frame <= 9);
      after++;
    }
    seen_last |= frame == 9;
    usleep(15000);
  }
  ASSERT(seen_last && after == 20);
  /* BOTH_DEATH1 plays once even with loop on: it stops on frame 9. */
  cJSON_Delete(harness_rpc_ok(&h, "anim.play", "{\"session\":\"q3\",\"clip\":\"BOTH_DEATH1\",\"loop\":true}"));
  deadline = client_now_ns() + 10000000000ull;
  do {
    usleep(50000);
    player_num(&h, "frame", &playing);
  } while (playing && client_now_ns() < deadline);
  ASSERT(!playing);
  ASSERT_EQ((int)player_num(&h, "frame", NULL), 9);
  harness_stop(&h);
}
