// The mesh benchmark's data and oracle (bench/mesh_datasets.h), on which every
// figure of the side-by-side rests: the analytic meshes are closed and
// outward oriented (the library's own test of that, knn_mesh_info, and the
// signed volume against the shape's), the scans hold their 1 % of far
// outliers, and the float64 oracle agrees with the OpenMP engine's float64
// answers (two independent implementations of the distance).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "../../bench/mesh_datasets.h"
#include "knn_gpgpu.h"

namespace {

using namespace knn_bench::mesh;

// The signed volume enclosed by the triangles (> 0 when they face outward).
double signed_volume(const Mesh& mesh) {
  double sum = 0;
  for (int64_t f = 0; f < mesh.n_triangles(); ++f) {
    double p[3][3];
    for (int k = 0; k < 3; ++k)
      for (int d = 0; d < 3; ++d)
        p[k][d] = mesh.vertices[static_cast<size_t>(3 * mesh.triangles[3 * f + k] + d)];
    double c[3];
    cross(p[1], p[2], c);
    sum += dot(p[0], c);
  }
  return sum / 6;
}

knn_mesh* build_omp(const Mesh& mesh) {
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  const std::vector<double> v(mesh.vertices.begin(), mesh.vertices.end());
  knn_mesh* handle = nullptr;
  EXPECT_EQ(knn_mesh_build_f64(v.data(), mesh.n_vertices(), mesh.triangles.data(),
                               mesh.n_triangles(), &opt, &handle),
            KNN_OK)
      << knn_last_error();
  return handle;
}

TEST(MeshBenchData, AnalyticMeshesAreClosedOutwardAndNearTheirVolume) {
  const double pi = 3.14159265358979323846;
  const Mesh torus = make_torus(20000), bumpy = make_bumpy_sphere(20000);
  EXPECT_NEAR(static_cast<double>(torus.n_triangles()), 20000, 200);
  EXPECT_NEAR(static_cast<double>(bumpy.n_triangles()), 20000, 400);
  // The torus (R 1, r 0.35): 2 pi^2 R r^2; the bumps of the sphere average
  // out to about the unit ball's volume.
  EXPECT_NEAR(signed_volume(torus), 2 * pi * pi * 0.35 * 0.35, 0.01);
  EXPECT_NEAR(signed_volume(bumpy), 4 * pi / 3, 0.1);
  for (const Mesh* mesh : {&torus, &bumpy}) {
    knn_mesh* handle = build_omp(*mesh);
    int closed = -1;
    ASSERT_EQ(knn_mesh_info(handle, nullptr, nullptr, nullptr, nullptr, &closed), KNN_OK);
    EXPECT_EQ(closed, 1) << mesh->name;
    knn_mesh_free(handle);
  }
}

TEST(MeshBenchData, OracleMatchesTheOpenMpEngineAndScansHaveTheirOutliers) {
  for (const Mesh& mesh : {make_torus(3000), make_bumpy_sphere(3000)}) {
    const std::vector<float> scan = make_scan(mesh, 20000);
    const Oracle oracle = compute_oracle(mesh, scan);
    ASSERT_EQ(oracle.index.size(), static_cast<size_t>(kOracleSamples));
    knn_mesh* handle = build_omp(mesh);
    const std::vector<double> points(scan.begin(), scan.end());
    const int64_t m = static_cast<int64_t>(scan.size() / 3);
    std::vector<int32_t> ids(static_cast<size_t>(m));
    std::vector<double> sq(static_cast<size_t>(m));
    ASSERT_EQ(
        knn_mesh_closest_f64(handle, points.data(), m, std::numeric_limits<double>::infinity(),
                             ids.data(), sq.data(), nullptr, nullptr, nullptr),
        KNN_OK)
        << knn_last_error();
    knn_mesh_free(handle);
    const Check check = check_against(oracle, mesh, 1e-12, [&](int64_t i) { return sq[i]; });
    EXPECT_EQ(check.wrong, 0) << mesh.name << ": max error " << check.max_error;
    // Far outliers: beyond half the diagonal (the surface points lie within
    // a few noise sigmas of it): about 1 % of the scan.
    const double diagonal = bounding_box(mesh).diagonal();
    int64_t far = 0;
    for (const double d : sq) far += std::sqrt(d) > 0.5 * diagonal;
    EXPECT_GT(far, m / 200) << mesh.name;
    EXPECT_LT(far, m / 50) << mesh.name;
  }
}

TEST(MeshBenchData, FilesRoundTripAndNamesFollowTheSpec) {
  EXPECT_EQ(mesh_name_of("torus-1000000"), "torus-1e6");
  EXPECT_EQ(mesh_name_of("some/where/bunny00.off"), "bunny00");
  EXPECT_EQ(row_name("bumpy-1e6", 10000000), "bumpy-1e6_x_1e7");
  const std::string dir =
      (std::filesystem::temp_directory_path() / "knn_mesh_bench_data_test").string();
  std::filesystem::remove_all(dir);
  const std::string name = prepare_rows(dir, "torus-500", {300});
  const Row row = read_row(dir, name, 300);
  const Mesh mesh = make_torus(500);
  EXPECT_EQ(row.mesh.vertices, mesh.vertices);
  EXPECT_EQ(row.mesh.triangles, mesh.triangles);
  EXPECT_EQ(row.scan, make_scan(mesh, 300));
  EXPECT_EQ(row.oracle.sq_distance, compute_oracle(mesh, row.scan).sq_distance);
  std::filesystem::remove_all(dir);
}

}  // namespace
