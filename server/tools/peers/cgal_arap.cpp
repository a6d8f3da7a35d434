// cgal_arap.cpp — the CGAL peer of `deform-bench solve MESH --mode arap --roi all --iters 1
// --border sharp`: CGAL 5.5's Surface_mesh_deformation (SRE_ARAP, its default Eigen solver) on
// the whole mesh with the same handle and the same drags, timed the same way.
//
//   cgal_arap MESH [--handle H] [--drags D]     (prints one JSON line)
//
// The handle is deform-bench's: the H vertices (default 50) nearest the topmost (largest y)
// vertex by Dijkstra over the edges. The region is the handle's whole connected part, so only
// the handle is held (deformd's --border sharp; parts it does not reach are fixed, as deformd
// pins parts no constraint reaches). Each drag moves the handle as deform-bench does (up by a tenth of
// the bounding-box diagonal over the drags, sideways by a sine, turning to 0.3 rad about z
// around the handle's centroid) and runs one iteration (deform(1, 0)), warm-started from the
// last. "prefactor" is insert_roi/insert_control plus preprocess() (the factorisation).
// The mesh is read as a polygon soup and welded (identical points merged), as deformd does.
//
// Built and run by deploy/bench_cgal.sh, not by the project's build: CGAL (Debian libcgal-dev)
// is not a dependency of deformd or its tests (`bash deploy/deps.sh --peers` installs it).
#include <CGAL/Polygon_mesh_processing/orient_polygon_soup.h>
#include <CGAL/Polygon_mesh_processing/polygon_soup_to_polygon_mesh.h>
#include <CGAL/Polygon_mesh_processing/repair_polygon_soup.h>
#include <CGAL/IO/polygon_soup_io.h>
#include <CGAL/Simple_cartesian.h>
#include <CGAL/Surface_mesh.h>
#include <CGAL/Surface_mesh_deformation.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <queue>
#include <string>
#include <vector>

typedef CGAL::Simple_cartesian<double> Kernel;
typedef Kernel::Point_3 Point;
typedef CGAL::Surface_mesh<Point> Mesh;
typedef Mesh::Vertex_index Vertex;
typedef CGAL::Surface_mesh_deformation<Mesh, CGAL::Default, CGAL::Default, CGAL::SRE_ARAP> Deformation;

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static bool load(const char *path, Mesh &mesh) {
  namespace PMP = CGAL::Polygon_mesh_processing;
  std::vector<Point> points;
  std::vector<std::vector<std::size_t>> polygons;
  if (!CGAL::IO::read_polygon_soup(path, points, polygons) || polygons.empty()) return false;
  PMP::merge_duplicate_points_in_polygon_soup(points, polygons);
  PMP::orient_polygon_soup(points, polygons); // may duplicate points at non-manifold vertices
  PMP::polygon_soup_to_polygon_mesh(points, polygons, mesh);
  return !mesh.is_empty();
}

// The h vertices nearest `top` by edge length (Dijkstra), `top` first.
static std::vector<Vertex> nearest(const Mesh &mesh, Vertex top, std::size_t h) {
  std::vector<double> dist(mesh.number_of_vertices(), INFINITY);
  std::vector<char> done(mesh.number_of_vertices(), 0);
  typedef std::pair<double, std::size_t> Item;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  std::vector<Vertex> out;
  dist[top] = 0;
  queue.push(Item(0, top));
  while (!queue.empty() && out.size() < h) {
    Item it = queue.top();
    queue.pop();
    Vertex v(static_cast<Mesh::size_type>(it.second));
    if (done[v]) continue;
    done[v] = 1;
    out.push_back(v);
    for (Vertex u : CGAL::vertices_around_target(mesh.halfedge(v), mesh)) {
      double d = it.first + std::sqrt(CGAL::squared_distance(mesh.point(v), mesh.point(u)));
      if (d < dist[u]) dist[u] = d, queue.push(Item(d, u));
    }
  }
  return out;
}

static double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  int i = static_cast<int>(std::ceil(p * v.size())) - 1;
  return v[std::max(0, std::min(static_cast<int>(v.size()) - 1, i))];
}

int main(int argc, char **argv) {
  const char *path = nullptr;
  std::size_t handle_count = 50;
  int drags = 30;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--handle") && i + 1 < argc) handle_count = std::strtoul(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--drags") && i + 1 < argc) drags = std::atoi(argv[++i]);
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      std::fprintf(stderr, "usage: cgal_arap MESH [--handle H] [--drags D]\n");
      return 2;
    }
  }
  if (!path || drags < 1 || handle_count < 1) {
    std::fprintf(stderr, "usage: cgal_arap MESH [--handle H] [--drags D]\n");
    return 2;
  }
  Mesh mesh;
  if (!load(path, mesh)) {
    std::fprintf(stderr, "cgal_arap: cannot read a triangle mesh from %s\n", path);
    return 1;
  }
  CGAL::Bbox_3 box;
  Vertex top = *mesh.vertices().begin();
  for (Vertex v : mesh.vertices()) {
    box += mesh.point(v).bbox();
    if (!mesh.is_isolated(v) && (mesh.is_isolated(top) || mesh.point(v).y() > mesh.point(top).y())) top = v;
  }
  double diag = std::sqrt((box.xmax() - box.xmin()) * (box.xmax() - box.xmin()) +
                          (box.ymax() - box.ymin()) * (box.ymax() - box.ymin()) +
                          (box.zmax() - box.zmin()) * (box.zmax() - box.zmin()));
  std::vector<Vertex> handle = nearest(mesh, top, handle_count);
  double pivot[3] = {0, 0, 0};
  for (Vertex v : handle)
    for (int k = 0; k < 3; k++) pivot[k] += mesh.point(v)[k] / handle.size();
  std::vector<Point> rest;
  for (Vertex v : handle) rest.push_back(mesh.point(v));

  // The region: the handle's connected part. Parts no handle reaches (loose pieces of a scan,
  // or pieces the soup's orientation split off at non-manifold edges) stay outside it, fixed,
  // as deformd pins them; in the region they would make the system singular.
  std::vector<char> reached(mesh.number_of_vertices(), 0);
  std::vector<Vertex> region(1, top);
  reached[top] = 1;
  for (std::size_t i = 0; i < region.size(); i++)
    for (Vertex u : CGAL::vertices_around_target(mesh.halfedge(region[i]), mesh))
      if (!reached[u]) reached[u] = 1, region.push_back(u);

  double t0 = now_ms();
  Deformation deformation(mesh);
  deformation.insert_roi_vertices(region.begin(), region.end());
  deformation.insert_control_vertices(handle.begin(), handle.end());
  if (!deformation.preprocess()) {
    std::fprintf(stderr, "cgal_arap: preprocess failed (a part of the mesh no handle holds?)\n");
    return 1;
  }
  double prefactor = now_ms() - t0;

  std::vector<double> ms;
  for (int d = 0; d < drags; d++) {
    double f = static_cast<double>(d + 1) / drags, angle = 0.3 * f, c = std::cos(angle), s = std::sin(angle);
    double tx = 0.02 * diag * std::sin(6.0 * f), ty = 0.1 * diag * f;
    double t1 = now_ms();
    for (std::size_t i = 0; i < handle.size(); i++) {
      double x = rest[i].x() - pivot[0], y = rest[i].y() - pivot[1], z = rest[i].z() - pivot[2];
      deformation.set_target_position(handle[i], Point(c * x - s * y + pivot[0] + tx, s * x + c * y + pivot[1] + ty,
                                                       z + pivot[2]));
    }
    deformation.deform(1, 0);
    ms.push_back(now_ms() - t1);
  }
  std::printf("{\"peer\":\"cgal-5.5-sre-arap\",\"mesh\":\"%s\",\"vertices\":%zu,\"triangles\":%zu,\"region\":%zu,\"handle\":%zu,"
              "\"drags\":%d,\"prefactor_ms\":%.3f,\"first_drag_ms\":%.3f,\"drag_p50_ms\":%.3f,\"drag_p95_ms\":%.3f}\n",
              path, static_cast<std::size_t>(mesh.number_of_vertices()), static_cast<std::size_t>(mesh.number_of_faces()),
              region.size(), handle.size(), drags, prefactor, ms[0], percentile(ms, 0.5), percentile(ms, 0.95));
  return 0;
}
