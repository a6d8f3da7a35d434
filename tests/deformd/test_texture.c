/*
 * test_texture.c — TEXTURE frames (capability "texture", docs/protocol.md §17) against a real
 * deformd: a viewer granted "texture" gets the session's materials and each image once, right
 * after its SNAPSHOT, and never again while edits and other joins go on; a viewer that did not
 * ask gets none; a session without materials sends its MATERIALS (saying so) and no image.
 *
 * The oracle is the in-process import of the same file (mesh_import): submesh ranges, base
 * colours, texture indices and every pixel must be what the client's replica rebuilt.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proto_caps.h"
#include "proto_texture.h"
#include "test.h"

static const char *const demo_args[] = {"--demo", NULL};
static const proto_hello_opts with_texture = {.caps = PROTO_CAP_BIT(PROTO_CAP_TEXTURE)};

/* Reads frames into `r` until it reaches `version`; returns how many were TEXTURE frames, and
 * checks that MATERIALS comes before any IMAGE. */
static int textures_until(client_conn *c, client_replica *r, uint64_t version, int *materials_first) {
  int count = 0;
  while (r->version < version) {
    proto_header h;
    const uint8_t *p;
    char err[256];
    ASSERT_OK(client_read_frame(c, 20000, &h, &p, err, sizeof(err)), err);
    ASSERT_OK(client_replica_apply(r, &h, p, err, sizeof(err)), err);
    if (h.type != PROTO_TEXTURE) continue;
    ASSERT_EQ(h.session_version, 0);
    proto_texture_view v;
    ASSERT_OK(proto_decode_texture(p, h.length, &v), NULL);
    if (count == 0 && materials_first) *materials_first = v.kind == PROTO_TEX_MATERIALS;
    count++;
  }
  return count;
}

static uint64_t sculpt_once(harness *h, const char *session, int vertex) {
  char params[160];
  snprintf(params, sizeof(params), "{\"session\":\"%s\",\"offsets\":{\"%d\":[0.001,0,0]}}", session, vertex);
  cJSON *r = harness_rpc_ok(h, "sculpt.set", params);
  uint64_t v = (uint64_t)cJSON_GetObjectItem(r, "version")->valuedouble;
  cJSON_Delete(r);
  return v;
}

/* The replica's materials and images against the file's own import (names: the images' names too;
 * a file read back from an export names them its own way). */
static void assert_materials(const mesh *got, const mesh *want, int names) {
  ASSERT_EQ(got->submesh_count, want->submesh_count);
  for (uint32_t i = 0; i < want->submesh_count; i++) {
    const mesh_submesh *a = &got->submeshes[i], *b = &want->submeshes[i];
    ASSERT_EQ(a->first_triangle, b->first_triangle);
    ASSERT_EQ(a->triangle_count, b->triangle_count);
    ASSERT_EQ(a->texture, b->texture);
    ASSERT_EQ(a->has_color, b->has_color);
    for (int k = 0; b->has_color && k < 4; k++) ASSERT(a->base_color[k] == b->base_color[k]);
  }
  ASSERT_EQ(got->image_count, want->image_count);
  for (uint32_t i = 0; i < want->image_count; i++) {
    const mesh_image *a = &got->images[i], *b = &want->images[i];
    ASSERT(a->rgba != NULL);
    if (names) {
      ASSERT_STR_CONTAINS(a->name, b->name);
      ASSERT_EQ(strlen(a->name), strlen(b->name));
    }
    ASSERT_EQ(a->width, b->width);
    ASSERT_EQ(a->height, b->height);
    ASSERT(memcmp(a->rgba, b->rgba, 4 * (size_t)b->width * b->height) == 0);
  }
}

static void assert_same_materials(const mesh *got, const mesh *want) { assert_materials(got, want, 1); }

TEST(a_texture_crosses_the_wire_once_per_join_and_never_again) {
  harness h;
  harness_start(&h, "demo", demo_args);
  harness_rpc_done(&h, "session.create", "{\"session\":\"spider\",\"mesh\":\"OBJ/spider.obj\"}");
  mesh *m = NULL;
  char err[256];
  ASSERT_OK(mesh_import(test_assimp_model("OBJ/spider.obj"), NULL, &m, err, sizeof(err)), err);
  ASSERT(m->image_count >= 2 && m->submesh_count >= 2);
  int per_join = 1 + (int)m->image_count, first = 0;

  client_conn a, b, plain;
  client_replica ra, rb, rp;
  harness_join2(&h, &a, &ra, "spider", PROTO_ROLE_VIEWER, NULL, &with_texture);
  harness_join2(&h, &plain, &rp, "spider", PROTO_ROLE_VIEWER, NULL, &(proto_hello_opts){0});
  uint64_t v1 = sculpt_once(&h, "spider", 1);
  ASSERT_EQ(textures_until(&a, &ra, v1, &first), per_join);
  ASSERT(first);
  assert_same_materials(ra.mesh, m);
  /* A second join, and more edits: a's count stays; b gets its own once. */
  harness_join2(&h, &b, &rb, "spider", PROTO_ROLE_VIEWER, NULL, &with_texture);
  sculpt_once(&h, "spider", 2);
  sculpt_once(&h, "spider", 3);
  uint64_t v2 = sculpt_once(&h, "spider", 4);
  ASSERT_EQ(textures_until(&a, &ra, v2, NULL), 0);
  ASSERT_EQ(textures_until(&b, &rb, v2, NULL), per_join);
  assert_same_materials(rb.mesh, m);
  ASSERT_EQ(textures_until(&plain, &rp, v2, NULL), 0); /* did not ask */
  ASSERT_EQ(rp.texture_serial, 0);
  ASSERT_EQ(ra.texture_serial, (uint32_t)per_join);
  /* A join again is a new join: the textures once more. */
  client_close(&a);
  client_replica_fini(&ra);
  harness_join2(&h, &a, &ra, "spider", PROTO_ROLE_VIEWER, NULL, &with_texture);
  uint64_t v3 = sculpt_once(&h, "spider", 5);
  ASSERT_EQ(textures_until(&a, &ra, v3, NULL), per_join);
  assert_same_materials(ra.mesh, m);
  /* The server counted the same: three joins' worth. */
  cJSON *st = harness_rpc_ok(&h, "server.stats", NULL);
  const cJSON *frames = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "frames_by_type"), "TEXTURE");
  ASSERT(frames != NULL);
  ASSERT_EQ(frames->valueint, 3 * per_join);
  /* The bytes per join docs/performance.md quotes: four SNAPSHOTs (two codecs), three joins' TEXTUREs. */
  const cJSON *bytes = cJSON_GetObjectItem(st, "bytes_by_type");
  fprintf(stderr, "spider.obj: SNAPSHOT %.0f bytes in 4 joins, TEXTURE %.0f bytes in 3\n",
          cJSON_GetObjectItem(bytes, "SNAPSHOT")->valuedouble, cJSON_GetObjectItem(bytes, "TEXTURE")->valuedouble);
  cJSON_Delete(st);
  /* An OFF file has no materials: a viewer granted "texture" is told so, in one MATERIALS. */
  harness_rpc_done(&h, "session.create", "{\"session\":\"cube\",\"mesh\":\"OFF/Cube.off\"}");
  client_conn d;
  client_replica rd;
  harness_join2(&h, &d, &rd, "cube", PROTO_ROLE_VIEWER, NULL, &with_texture);
  uint64_t vd = sculpt_once(&h, "cube", 1);
  ASSERT_EQ(textures_until(&d, &rd, vd, &first), 1);
  ASSERT(first);
  ASSERT_EQ(rd.mesh->image_count, 0);
  for (uint32_t i = 0; i < rd.mesh->submesh_count; i++) ASSERT(!rd.mesh->submeshes[i].has_color && !rd.mesh->submeshes[i].texture);
  client_close(&d), client_replica_fini(&rd);
  client_close(&a), client_replica_fini(&ra);
  client_close(&b), client_replica_fini(&rb);
  client_close(&plain), client_replica_fini(&rp);
  mesh_destroy(m);
  harness_stop(&h);
}

/* session.export: a GLB download embeds the textures; an OBJ written into exports/ has its MTL and
 * a PNG per image beside it. Both read back with the import's materials and pixels. */
TEST(session_export_carries_the_textures_in_a_glb_and_beside_an_obj) {
  const char *dir = test_tmp_path("export-textures");
  harness h;
  harness_start_on(&h, dir, "demo", "--demo");
  harness_rpc_done(&h, "session.create", "{\"session\":\"spider\",\"mesh\":\"OBJ/spider.obj\"}");
  mesh *m = NULL, *r = NULL;
  char err[256], path[1024];
  ASSERT_OK(mesh_import(test_assimp_model("OBJ/spider.obj"), NULL, &m, err, sizeof(err)), err);
  size_t n;
  uint8_t *glb = harness_download(&h, "spider", "glb", -1, &n);
  ASSERT_OK(mesh_import(test_write_file("spider-now.glb", glb, n), NULL, &r, err, sizeof(err)), err);
  assert_materials(r, m, 0);
  mesh_destroy(r);
  free(glb);
  harness_rpc_done(&h, "session.export", "{\"session\":\"spider\",\"path\":\"spider-now.obj\"}");
  snprintf(path, sizeof(path), "%s/exports/spider-now.obj", dir);
  ASSERT_OK(mesh_import(path, NULL, &r, err, sizeof(err)), err);
  assert_materials(r, m, 0);
  mesh_destroy(r);
  mesh_destroy(m);
  harness_stop(&h);
}
