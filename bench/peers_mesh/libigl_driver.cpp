// libigl's AABB tree (igl/AABB.h, header-only): the tree of
// igl::point_mesh_squared_distance, built with init() and queried with
// squared_distance(), which runs over all cores (igl::parallel_for). Double
// precision, libigl's usual Eigen::MatrixXd.
#include <igl/AABB.h>

#include <Eigen/Core>

#include "peer_driver.h"

using namespace knn_bench::mesh;

int main(int argc, char** argv) {
  return run_driver(argc, argv, [](const DriverArgs& args) {
    const Mesh mesh = read_mesh(mesh_path(args.dir, args.mesh), args.mesh);
    Eigen::MatrixXd V(mesh.n_vertices(), 3);
    Eigen::MatrixXi F(mesh.n_triangles(), 3);
    for (int64_t i = 0; i < mesh.n_vertices(); ++i)
      for (int d = 0; d < 3; ++d) V(i, d) = mesh.vertices[static_cast<size_t>(3 * i + d)];
    for (int64_t i = 0; i < mesh.n_triangles(); ++i)
      for (int d = 0; d < 3; ++d) F(i, d) = mesh.triangles[static_cast<size_t>(3 * i + d)];
    igl::AABB<Eigen::MatrixXd, 3> tree;
    const double build_ms = timed_ms(
        args.repeats, [&] { tree.init(V, F); }, [&] { tree = igl::AABB<Eigen::MatrixXd, 3>(); });
    for (const int64_t n : args.scan_sizes) {
      const Row row = read_row(args.dir, args.mesh, n);
      Eigen::MatrixXd P(n, 3);
      for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < 3; ++d) P(i, d) = row.scan[static_cast<size_t>(3 * i + d)];
      Eigen::VectorXd sq_distances;
      Eigen::VectorXi ids;
      Eigen::MatrixXd closest;
      const double query_ms = timed_ms(
          args.repeats, [&] { tree.squared_distance(V, F, P, sq_distances, ids, closest); });
      const Check check =
          check_against(row.oracle, mesh, 1e-12, [&](int64_t i) { return sq_distances(i); });
      print_result(row.name, "libigl", build_ms, query_ms, check);
    }
  });
}
