/*
 * test_import.c — importing real and hand-built files, checked against separate readings.
 */
#include <stdint.h>

#include "oracle.h"
#include "test.h"

static mesh *import_ok(const char *path) {
  char err[MESH_ERR_LEN];
  mesh *m = NULL;
  ASSERT_OK(mesh_import(path, NULL, &m, err, sizeof(err)), err);
  ASSERT(m != NULL);
  return m;
}

static void stats_of(const mesh *m, mesh_stats *s) {
  mesh_topology t;
  ASSERT_OK(mesh_topology_init(&t, m, NULL, 0), NULL);
  ASSERT_OK(mesh_compute_stats(m, &t, s), NULL);
  mesh_topology_fini(&t);
}

/* Stats of an OFF file equal the counts a separate OFF reader gives. */
static void check_off(const char *path) {
  oracle_counts want;
  oracle_off_counts(path, &want);
  mesh *m = import_ok(path);
  mesh_stats s;
  stats_of(m, &s);
  fprintf(stderr, "%s: V %u T %u topo %u cc %u boundary %u nonmanifold %u degenerate %u\n", path,
          s.vertices, s.triangles, s.topology_vertices, s.components, s.boundary_edges,
          s.nonmanifold_edges, s.degenerate_triangles);
  ASSERT_EQ(s.vertices, want.vertices); /* OFF has no attributes: render = distinct positions */
  ASSERT_EQ(s.topology_vertices, want.topology_vertices);
  ASSERT_EQ(s.triangles, want.triangles);
  ASSERT_EQ(s.components, want.components);
  ASSERT_EQ(s.boundary_edges, want.boundary_edges);
  ASSERT_EQ(s.nonmanifold_edges, want.nonmanifold_edges);
  ASSERT_EQ(s.degenerate_triangles, want.degenerate_triangles);
  ASSERT_EQ(s.targets, 0);
  ASSERT_EQ(s.frames, 0);
  mesh_destroy(m);
}

TEST(off_stats_match_a_separate_count_on_assimp_wuson) {
  check_off(test_assimp_model("OFF/Wuson.off")); /* 51 components, holes, non-manifold edges */
}

TEST(off_stats_match_a_separate_count_on_cgal_armadillo) {
  check_off(test_cgal_mesh("armadillo.off"));
}

TEST(off_stats_match_a_separate_count_on_cgal_elephant_and_holes) {
  check_off(test_cgal_mesh("elephant.off"));
  check_off(test_cgal_mesh("elephant-with-holes.off"));
}

TEST(off_stats_match_a_separate_count_on_several_components) {
  check_off(test_cgal_mesh("blobby_3cc.off"));
}

TEST(off_stats_match_a_separate_count_on_degenerate_triangles) {
  check_off(test_cgal_mesh("degtri_sliding.off"));
  oracle_counts want;
  oracle_off_counts(test_cgal_mesh("degtri_sliding.off"), &want);
  ASSERT(want.degenerate_triangles > 0); /* the file really has some */
}

static void check_md2(const char *rel) {
  uint32_t nframes, npoints;
  float *frames;
  oracle_md2_frames(test_assimp_model(rel), &nframes, &npoints, &frames);
  ASSERT_EQ(nframes, 198);
  mesh *m = import_ok(test_assimp_model(rel));
  ASSERT_EQ(m->frame_count, 198);
  ASSERT(m->frame_rate > 0);
  ASSERT(memcmp(m->frames, m->positions, sizeof(float) * 3 * m->vertex_count) == 0);
  /* Every frame holds exactly that frame's points of the file, in one fixed axis convention
   * (found on frame 0). MD2 stores bytes scaled per frame; distinct points are far further apart than 1e-3. */
  int perm = -1;
  for (uint32_t f = 0; f < nframes; f++) {
    const float *ours = m->frames + 3 * (size_t)m->vertex_count * f;
    if (!oracle_same_point_set(frames + 3 * (size_t)npoints * f, npoints, ours, m->vertex_count,
                               1e-3, &perm))
      test__fail(__FILE__, __LINE__, "%s frame %u differs from the file", rel, f);
  }
  /* And frames really differ: the animation is not frame 0 repeated. */
  ASSERT(memcmp(m->frames, m->frames + 3 * (size_t)m->vertex_count * 100,
                sizeof(float) * 3 * m->vertex_count) != 0);
  mesh_stats s;
  stats_of(m, &s);
  ASSERT_EQ(s.topology_vertices, npoints);
  free(frames);
  mesh_destroy(m);
}

TEST(md2_faerie_loads_all_198_frames) { check_md2("MD2/faerie.md2"); }

TEST(md2_sydney_loads_all_198_frames) { check_md2("MD2/sydney.md2"); }

/* ---- MD3: written here, so the expected frames are known exactly ---------------------------- */

static void put32(unsigned char *b, size_t *at, uint32_t v) {
  for (int i = 0; i < 4; i++) b[(*at)++] = (unsigned char)(v >> (8 * i));
}
static void put16(unsigned char *b, size_t *at, int16_t v) {
  b[(*at)++] = (unsigned char)((uint16_t)v & 0xff);
  b[(*at)++] = (unsigned char)((uint16_t)v >> 8);
}
static void putf(unsigned char *b, size_t *at, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put32(b, at, u);
}
static void putname(unsigned char *b, size_t *at, const char *s, size_t n) {
  memset(b + *at, 0, n);
  memcpy(b + *at, s, strlen(s));
  *at += n;
}

/* Surface s, frame f, vertex v: a tetrahedron (s = 0) and a box (s = 1), each moved per frame. */
static const float tet[4][3] = {{0, 0, 0}, {4, 0, 0}, {0, 5, 0}, {0, 0, 6}}; /* no symmetry */
static const uint32_t tet_tris[4][3] = {{0, 2, 1}, {0, 1, 3}, {0, 3, 2}, {1, 2, 3}};
static const float box[8][3] = {{10, 0, 0}, {12, 0, 0}, {12, 2, 0}, {10, 2, 0},
                                {10, 0, 3}, {12, 0, 3}, {12, 2, 3}, {10, 2, 3}};
static const uint32_t box_tris[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7},
                                         {0, 1, 5}, {0, 5, 4}, {3, 7, 6}, {3, 6, 2},
                                         {0, 4, 7}, {0, 7, 3}, {1, 2, 6}, {1, 6, 5}};

static void md3_point(int s, uint32_t f, uint32_t v, float out[3]) {
  const float *p = s == 0 ? tet[v] : box[v];
  /* Multiples of 1/64, MD3's quantum, so the file stores them exactly. */
  out[0] = p[0] + 1.5f * (float)f;
  out[1] = p[1] * (1.0f + 0.25f * (float)f);
  out[2] = p[2] - (s == 1 ? 0.5f * (float)f : 0.0f);
}

static size_t write_md3(unsigned char *b, uint32_t nframes) {
  size_t at = 0;
  const uint32_t nsurf = 2, hdr = 108, frame_sz = 56;
  memcpy(b, "IDP3", 4);
  at = 4;
  put32(b, &at, 15);
  putname(b, &at, "model", 64);
  put32(b, &at, 0);
  put32(b, &at, nframes);
  put32(b, &at, 0);     /* tags */
  put32(b, &at, nsurf);
  put32(b, &at, 0);     /* skins */
  put32(b, &at, hdr);   /* ofs_frames */
  put32(b, &at, hdr + frame_sz * nframes); /* ofs_tags (none) */
  put32(b, &at, hdr + frame_sz * nframes); /* ofs_surfaces */
  size_t eof_at = at;
  put32(b, &at, 0);     /* ofs_eof, patched below */
  for (uint32_t f = 0; f < nframes; f++) {
    for (int k = 0; k < 6; k++) putf(b, &at, k < 3 ? -20.0f : 20.0f);
    for (int k = 0; k < 3; k++) putf(b, &at, 0.0f);
    putf(b, &at, 40.0f);
    putname(b, &at, "frame", 16);
  }
  for (uint32_t s = 0; s < nsurf; s++) {
    uint32_t nv = s == 0 ? 4 : 8, nt = s == 0 ? 4 : 12;
    const uint32_t(*tris)[3] = s == 0 ? tet_tris : box_tris;
    size_t start = at;
    uint32_t ofs_shader = 108, ofs_tri = ofs_shader + 68, ofs_st = ofs_tri + 12 * nt,
             ofs_xyz = ofs_st + 8 * nv, ofs_end = ofs_xyz + 8 * nv * nframes;
    memcpy(b + at, "IDP3", 4);
    at += 4;
    putname(b, &at, s == 0 ? "body" : "head", 64);
    put32(b, &at, 0);
    put32(b, &at, nframes);
    put32(b, &at, 1); /* shaders */
    put32(b, &at, nv);
    put32(b, &at, nt);
    put32(b, &at, ofs_tri);
    put32(b, &at, ofs_shader);
    put32(b, &at, ofs_st);
    put32(b, &at, ofs_xyz);
    put32(b, &at, ofs_end);
    putname(b, &at, "skin", 64);
    put32(b, &at, 0);
    for (uint32_t t = 0; t < nt; t++)
      for (int c = 0; c < 3; c++) put32(b, &at, tris[t][c]);
    for (uint32_t v = 0; v < nv; v++) {
      putf(b, &at, 0.1f * (float)v);
      putf(b, &at, 0.5f);
    }
    for (uint32_t f = 0; f < nframes; f++)
      for (uint32_t v = 0; v < nv; v++) {
        float p[3];
        md3_point((int)s, f, v, p);
        for (int k = 0; k < 3; k++) put16(b, &at, (int16_t)lrintf(p[k] * 64.0f));
        put16(b, &at, 0);
      }
    ASSERT_EQ(at - start, ofs_end);
  }
  size_t end = at;
  at = eof_at;
  put32(b, &at, (uint32_t)end);
  return end;
}

TEST(md3_with_two_surfaces_becomes_one_mesh_with_submeshes_and_all_frames) {
  static unsigned char buf[16384];
  const uint32_t nframes = 5;
  size_t len = write_md3(buf, nframes);
  mesh *m = import_ok(test_write_file("model.md3", buf, len));
  ASSERT_EQ(m->submesh_count, 2);
  ASSERT_EQ(m->triangle_count, 16);
  ASSERT_EQ(m->frame_count, nframes);
  uint32_t tris = 0;
  for (uint32_t s = 0; s < 2; s++) tris += m->submeshes[s].triangle_count;
  ASSERT_EQ(tris, 16);
  ASSERT(m->submeshes[0].triangle_count == 4 || m->submeshes[0].triangle_count == 12);
  int perm = -1;
  for (uint32_t f = 0; f < nframes; f++) {
    float want[12][3];
    for (uint32_t v = 0; v < 12; v++) md3_point(v < 4 ? 0 : 1, f, v < 4 ? v : v - 4, want[v]);
    if (!oracle_same_point_set(&want[0][0], 12, m->frames + 3 * (size_t)m->vertex_count * f,
                               m->vertex_count, 1.0 / 128.0, &perm))
      test__fail(__FILE__, __LINE__, "frame %u differs from what was written", f);
  }
  mesh_stats s;
  stats_of(m, &s);
  ASSERT_EQ(s.topology_vertices, 12);
  ASSERT_EQ(s.components, 2);
  ASSERT_EQ(s.boundary_edges, 0);
  mesh_destroy(m);
}

/* ---- glTF: morph targets, names, default weights, node transforms, several meshes --------- */

static void b64(const unsigned char *in, size_t n, char *out) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                 (i + 2 < n ? in[i + 2] : 0);
    out[o++] = tab[v >> 18 & 63];
    out[o++] = tab[v >> 12 & 63];
    out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? tab[v & 63] : '=';
  }
  out[o] = '\0';
}

static const float face_pos[4][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}};
static const float face_smile[4][3] = {{0, 0, 0}, {0, 0.5f, 0}, {0, 0, 0}, {0, 0, 0}};
static const float face_blink[4][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0.25f}, {0, 0, 0.125f}};
static const uint16_t face_idx[6] = {0, 1, 2, 0, 2, 3};
static const float hat_pos[3][3] = {{0, 0, 5}, {1, 0, 5}, {0, 1, 5}};
static const float hat_smile[3][3] = {{0, 0, 1}, {0, 0, 0}, {0, 0, 0}};
static const uint16_t hat_idx[4] = {0, 1, 2, 0}; /* 3 used, padded to 8 bytes */

TEST(gltf_morph_targets_keep_names_default_weights_and_node_transforms) {
  unsigned char bin[512];
  size_t at = 0;
#define APPEND(x) (memcpy(bin + at, x, sizeof(x)), at += sizeof(x))
  APPEND(face_pos);   /* 0..48 */
  APPEND(face_idx);   /* 48..60 */
  APPEND(face_smile); /* 60..108 */
  APPEND(face_blink); /* 108..156 */
  APPEND(hat_pos);    /* 156..192 */
  APPEND(hat_idx);    /* 192..200 */
  APPEND(hat_smile);  /* 200..236 */
#undef APPEND
  char data[1024];
  b64(bin, at, data);
  char json[4096];
  snprintf(json, sizeof(json),
           "{\"asset\":{\"version\":\"2.0\"},\"scene\":0,\"scenes\":[{\"nodes\":[0,1]}],"
           "\"nodes\":[{\"mesh\":0,\"translation\":[10,0,0],\"scale\":[2,2,2]},{\"mesh\":1}],"
           "\"meshes\":["
           "{\"name\":\"face\",\"weights\":[0.25,0.5],\"extras\":{\"targetNames\":[\"smile\",\"blink\"]},"
           "\"primitives\":[{\"attributes\":{\"POSITION\":0},\"indices\":1,"
           "\"targets\":[{\"POSITION\":2},{\"POSITION\":3}]}]},"
           "{\"name\":\"hat\",\"weights\":[0.25],\"extras\":{\"targetNames\":[\"smile\"]},"
           "\"primitives\":[{\"attributes\":{\"POSITION\":4},\"indices\":5,"
           "\"targets\":[{\"POSITION\":6}]}]}],"
           "\"accessors\":["
           "{\"bufferView\":0,\"componentType\":5126,\"count\":4,\"type\":\"VEC3\",\"min\":[0,0,0],\"max\":[1,1,0]},"
           "{\"bufferView\":1,\"componentType\":5123,\"count\":6,\"type\":\"SCALAR\"},"
           "{\"bufferView\":2,\"componentType\":5126,\"count\":4,\"type\":\"VEC3\",\"min\":[0,0,0],\"max\":[0,0.5,0]},"
           "{\"bufferView\":3,\"componentType\":5126,\"count\":4,\"type\":\"VEC3\",\"min\":[0,0,0],\"max\":[0,0,0.25]},"
           "{\"bufferView\":4,\"componentType\":5126,\"count\":3,\"type\":\"VEC3\",\"min\":[0,0,5],\"max\":[1,1,5]},"
           "{\"bufferView\":5,\"componentType\":5123,\"count\":3,\"type\":\"SCALAR\"},"
           "{\"bufferView\":6,\"componentType\":5126,\"count\":3,\"type\":\"VEC3\",\"min\":[0,0,0],\"max\":[0,0,1]}],"
           "\"bufferViews\":["
           "{\"buffer\":0,\"byteOffset\":0,\"byteLength\":48},{\"buffer\":0,\"byteOffset\":48,\"byteLength\":12},"
           "{\"buffer\":0,\"byteOffset\":60,\"byteLength\":48},{\"buffer\":0,\"byteOffset\":108,\"byteLength\":48},"
           "{\"buffer\":0,\"byteOffset\":156,\"byteLength\":36},{\"buffer\":0,\"byteOffset\":192,\"byteLength\":6},"
           "{\"buffer\":0,\"byteOffset\":200,\"byteLength\":36}],"
           "\"buffers\":[{\"byteLength\":%zu,\"uri\":\"data:application/octet-stream;base64,%s\"}]}",
           at, data);
  mesh *m = import_ok(test_write_file("morph.gltf", json, strlen(json)));
  ASSERT_EQ(m->vertex_count, 7);
  ASSERT_EQ(m->triangle_count, 3);
  ASSERT_EQ(m->submesh_count, 2);
  ASSERT_EQ(m->target_count, 2);
  int smile = mesh_find_target(m, "smile"), blink = mesh_find_target(m, "blink");
  ASSERT(smile >= 0 && blink >= 0);
  ASSERT_NEAR(m->targets[smile].default_weight, 0.25, 0);
  ASSERT_NEAR(m->targets[blink].default_weight, 0.5, 0);
  /* Dense copies of what we expect, in the mesh's own vertex order: find each face vertex by
   * its placed position 2p + (10, 0, 0), each hat vertex by p. */
  float *evald = malloc(sizeof(float) * 3 * m->vertex_count);
  float w[2] = {0, 0};
  w[smile] = 1.0f;
  mesh_evaluate(m, w, NULL, evald);
  int found = 0;
  for (uint32_t v = 0; v < m->vertex_count; v++) {
    const float *p = m->positions + 3 * v, *q = evald + 3 * v;
    for (int i = 0; i < 4; i++) {
      if (p[0] == 2 * face_pos[i][0] + 10 && p[1] == 2 * face_pos[i][1] && p[2] == 2 * face_pos[i][2]) {
        for (int k = 0; k < 3; k++) ASSERT_NEAR(q[k] - p[k], 2 * face_smile[i][k], 1e-6);
        found++;
      }
    }
    for (int i = 0; i < 3; i++) {
      if (p[0] == hat_pos[i][0] && p[1] == hat_pos[i][1] && p[2] == hat_pos[i][2]) {
        for (int k = 0; k < 3; k++) ASSERT_NEAR(q[k] - p[k], hat_smile[i][k], 1e-6);
        found++;
      }
    }
  }
  ASSERT_EQ(found, 7);
  /* blink lives only on the face; sparse storage keeps just the two vertices it moves. */
  ASSERT_EQ(m->targets[blink].count, 2);
  ASSERT_EQ(m->targets[smile].count, 2);
  free(evald);
  mesh_destroy(m);
}

TEST(gltf_sample_animated_morph_cube_has_two_targets) {
  mesh *m = import_ok(test_assimp_model("glTF2/glTF-Sample-Models/AnimatedMorphCube-glTF/AnimatedMorphCube.gltf"));
  ASSERT_EQ(m->target_count, 2);
  ASSERT_EQ(m->vertex_count, 24);
  mesh_stats s;
  stats_of(m, &s);
  ASSERT_EQ(s.topology_vertices, 8);
  ASSERT_EQ(s.boundary_edges, 0);
  for (uint32_t t = 0; t < 2; t++) ASSERT(m->targets[t].count > 0);
  mesh_destroy(m);
}

TEST(glb_with_many_nodes_becomes_one_mesh_with_a_submesh_per_node_mesh) {
  mesh *m = import_ok(test_assimp_model("glTF2/2CylinderEngine-glTF-Binary/2CylinderEngine.glb"));
  ASSERT(m->submesh_count > 10);
  uint64_t tris = 0;
  for (uint32_t s = 0; s < m->submesh_count; s++) {
    const mesh_submesh *sm = &m->submeshes[s];
    ASSERT_EQ(sm->first_triangle, tris);
    tris += sm->triangle_count;
    /* A submesh's triangles use only its own vertex range. */
    for (uint32_t f = sm->first_triangle; f < sm->first_triangle + sm->triangle_count; f++)
      for (int c = 0; c < 3; c++) {
        uint32_t v = m->triangles[3 * f + c];
        ASSERT(v >= sm->first_vertex && v < sm->first_vertex + sm->vertex_count);
      }
  }
  ASSERT_EQ(tris, m->triangle_count);
  mesh_destroy(m);
}

/* ---- PLY: ASCII, binary and triangle strips -------------------------------------------------- */

TEST(ply_ascii_and_binary_cubes_import_the_same) {
  mesh *a = import_ok(test_assimp_model("PLY/cube.ply"));
  mesh *b = import_ok(test_assimp_model("PLY/cube_binary.ply"));
  mesh_stats sa, sb;
  stats_of(a, &sa);
  stats_of(b, &sb);
  ASSERT_EQ(sa.triangles, 12);
  ASSERT_EQ(sb.triangles, 12);
  ASSERT_EQ(sa.topology_vertices, 8);
  ASSERT_EQ(sb.topology_vertices, 8);
  ASSERT_EQ(sa.boundary_edges + sb.boundary_edges, 0);
  mesh_destroy(a);
  mesh_destroy(b);
}

/* The strip 0 1 2 3 4 5, -1, 6 7 8 gives (0 1 2) (2 1 3) (2 3 4) (4 3 5) (6 7 8). */
static const uint32_t strip_want[5][3] = {{0, 1, 2}, {2, 1, 3}, {2, 3, 4}, {4, 3, 5}, {6, 7, 8}};

static void check_strip_mesh(const mesh *m) {
  ASSERT_EQ(m->vertex_count, 9);
  ASSERT_EQ(m->triangle_count, 5);
  for (int f = 0; f < 5; f++)
    for (int c = 0; c < 3; c++) {
      /* Vertex i of the file sits at x = i (a zig-zag in y): recover file indices by x. */
      uint32_t v = m->triangles[3 * f + c];
      ASSERT_EQ(lrintf(m->positions[3 * v]), strip_want[f][c]);
    }
}

TEST(ply_triangle_strips_become_all_their_triangles) {
  char ascii[2048];
  int n = snprintf(ascii, sizeof(ascii),
                   "ply\nformat ascii 1.0\ncomment strips\nelement vertex 9\nproperty float x\n"
                   "property float y\nproperty float z\nelement tristrips 1\n"
                   "property list int int vertex_indices\nend_header\n");
  for (int i = 0; i < 9; i++) n += snprintf(ascii + n, sizeof(ascii) - (size_t)n, "%d %d 0\n", i, i % 2);
  n += snprintf(ascii + n, sizeof(ascii) - (size_t)n, "10 0 1 2 3 4 5 -1 6 7 8\n");
  mesh *a = import_ok(test_write_file("strips.ply", ascii, (size_t)n));
  check_strip_mesh(a);
  mesh_destroy(a);

  /* The same in binary big-endian with uchar counts and int indices. */
  unsigned char bin[1024];
  const char *hdr = "ply\nformat binary_big_endian 1.0\nelement vertex 9\nproperty float x\n"
                    "property float y\nproperty float z\nelement tristrips 1\n"
                    "property list uchar int vertex_indices\nend_header\n";
  size_t at = strlen(hdr);
  memcpy(bin, hdr, at);
  for (int i = 0; i < 9; i++) {
    float p[3] = {(float)i, (float)(i % 2), 0};
    for (int k = 0; k < 3; k++) {
      uint32_t u;
      memcpy(&u, &p[k], 4);
      for (int s = 3; s >= 0; s--) bin[at++] = (unsigned char)(u >> (8 * s));
    }
  }
  int32_t strip[10] = {0, 1, 2, 3, 4, 5, -1, 6, 7, 8};
  bin[at++] = 10;
  for (int i = 0; i < 10; i++)
    for (int s = 3; s >= 0; s--) bin[at++] = (unsigned char)((uint32_t)strip[i] >> (8 * s));
  mesh *b = import_ok(test_write_file("strips_be.ply", bin, at));
  check_strip_mesh(b);
  mesh_destroy(b);
}

TEST(stl_sphere_from_cgal_is_closed) {
  mesh *m = import_ok(test_cgal_mesh("sphere.stl"));
  mesh_stats s;
  stats_of(m, &s);
  /* The binary STL header counts the triangles: read it directly. */
  FILE *f = fopen(test_cgal_mesh("sphere.stl"), "rb");
  unsigned char h[84];
  ASSERT(fread(h, 1, 84, f) == 84);
  fclose(f);
  uint32_t count = (uint32_t)h[80] | (uint32_t)h[81] << 8 | (uint32_t)h[82] << 16 | (uint32_t)h[83] << 24;
  if (memcmp(h, "solid", 5) != 0) ASSERT_EQ(s.triangles, count);
  ASSERT_EQ(s.boundary_edges, 0);
  ASSERT_EQ(s.nonmanifold_edges, 0);
  ASSERT_EQ(s.components, 1);
  /* Euler characteristic of a sphere on the welded topology. */
  ASSERT_EQ((int64_t)s.topology_vertices - 3 * (int64_t)s.triangles / 2 + s.triangles, 2);
  mesh_destroy(m);
}

TEST(obj_with_polygons_is_triangulated) {
  /* A pentagon and a quad sharing an edge. */
  const char obj[] = "v 0 0 0\nv 2 0 0\nv 3 1 0\nv 1 2 0\nv -1 1 0\nv 2 -2 0\nv 0 -2 0\n"
                     "f 1 2 3 4 5\nf 1 7 6 2\n";
  mesh *m = import_ok(test_write_file("poly.obj", obj, sizeof(obj) - 1));
  ASSERT_EQ(m->triangle_count, 3 + 2);
  mesh_stats s;
  stats_of(m, &s);
  ASSERT_EQ(s.boundary_edges, 7); /* 5 + 4 polygon edges minus the shared one, counted once */
  ASSERT_EQ(s.components, 1);
  mesh_destroy(m);
}
