// CGAL's AABB tree (header-only since CGAL 5.0) over Simple_cartesian<double>
// triangles: built with build() and accelerate_distance_queries() (the
// query hint structure, else built lazily by the first query), queried with
// closest_point_and_primitive() in an OpenMP parallel loop over the points
// (the tree is read-only then).
#include <CGAL/AABB_traits.h>
#include <CGAL/AABB_tree.h>
#include <CGAL/AABB_triangle_primitive.h>
#include <CGAL/Simple_cartesian.h>

#include "peer_driver.h"

using namespace knn_bench::mesh;

using Kernel = CGAL::Simple_cartesian<double>;
using Triangles = std::vector<Kernel::Triangle_3>;
using Primitive = CGAL::AABB_triangle_primitive<Kernel, Triangles::const_iterator>;
using Tree = CGAL::AABB_tree<CGAL::AABB_traits<Kernel, Primitive>>;

int main(int argc, char** argv) {
  return run_driver(argc, argv, [](const DriverArgs& args) {
    const Mesh mesh = read_mesh(mesh_path(args.dir, args.mesh), args.mesh);
    Triangles triangles;
    triangles.reserve(static_cast<size_t>(mesh.n_triangles()));
    auto vertex = [&](int32_t v) {
      const float* p = &mesh.vertices[static_cast<size_t>(3) * static_cast<size_t>(v)];
      return Kernel::Point_3(p[0], p[1], p[2]);
    };
    for (int64_t f = 0; f < mesh.n_triangles(); ++f) {
      const int32_t* t = &mesh.triangles[static_cast<size_t>(3 * f)];
      triangles.emplace_back(vertex(t[0]), vertex(t[1]), vertex(t[2]));
    }
    Tree tree;
    const double build_ms = timed_ms(
        args.repeats,
        [&] {
          tree.rebuild(triangles.cbegin(), triangles.cend());
          tree.accelerate_distance_queries();
        },
        [&] { tree.clear(); });
    for (const int64_t n : args.scan_sizes) {
      const Row row = read_row(args.dir, args.mesh, n);
      std::vector<double> sq_distances(static_cast<size_t>(n));
      std::vector<int32_t> ids(static_cast<size_t>(n));
      const double query_ms = timed_ms(args.repeats, [&] {
#pragma omp parallel for schedule(dynamic, 1024)
        for (int64_t i = 0; i < n; ++i) {
          const float* p = &row.scan[static_cast<size_t>(3 * i)];
          const Kernel::Point_3 q(p[0], p[1], p[2]);
          const auto hit = tree.closest_point_and_primitive(q);
          ids[static_cast<size_t>(i)] = static_cast<int32_t>(hit.second - triangles.cbegin());
          sq_distances[static_cast<size_t>(i)] = CGAL::squared_distance(q, hit.first);
        }
      });
      const Check check = check_against(
          row.oracle, mesh, 1e-12, [&](int64_t i) { return sq_distances[static_cast<size_t>(i)]; });
      print_result(row.name, "cgal", build_ms, query_ms, check);
    }
  });
}
