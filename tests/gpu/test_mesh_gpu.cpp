// The CUDA mesh engine (cuda/mesh/) against a float64-free brute force over
// every triangle written here from the one definition
// (common/geometry/triangle.h: the same bits by construction, ids, squared
// distances, closest points, weights), against the pseudonormal signs of the
// brute force's feature on closed meshes, against the OpenMP engine bit for
// bit (signs of open meshes included), and its deviation report against the
// report's definitions (common/geometry/deviation.h) computed on the host
// from the per-point values. Awkward meshes (one triangle, degenerate
// triangles, duplicates, huge offsets, tiny coordinates, closed and open),
// max_distance, float and double, host and device arrays, chunks forced by a
// small device budget, the build's memory refusal, allocation faults and
// cancellation.
//
// Every test skips with "no CUDA device" where cuGetDeviceCount() is 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../common/error.h"
#include "../../common/geometry/deviation.h"
#include "../../common/geometry/triangle.h"
#include "../../common/geometry/winding.h"
#include "../../cuda/mesh/mesh_layout.h"
#include "../../engine/cancel.h"
#include "../../engine/mesh_engine.h"
#include "gpu_test_support.h"
#include "mesh_test_cases.h"
#include "scoped_env.h"

namespace knn_test {
namespace {

// The brute force: every triangle by the one definition, ties to the smaller
// id; signs by the closest feature's pseudonormal (closed meshes; open
// meshes keep the unsigned distance, their signs are the OpenMP engine's).
template <class S>
Answers<S> brute_force(const TestMesh<S>& mesh, const std::vector<S>& points, S max_distance) {
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  Answers<S> a(m);
  const S max_sq = max_distance * max_distance;
  const S nan = std::numeric_limits<S>::quiet_NaN(), inf = std::numeric_limits<S>::infinity();
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < m; ++i) {
    const Vec3<S> q{points[3 * i], points[3 * i + 1], points[3 * i + 2]};
    S best = max_sq;
    int32_t id = -1;
    knn::geometry::TrianglePoint<S> p{};
    for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
      const auto c = knn::geometry::closest_point_on_triangle(q, mesh.corner(t, 0),
                                                              mesh.corner(t, 1), mesh.corner(t, 2));
      if (knn::geometry::is_closer(c.sq_distance, static_cast<int32_t>(t), best, id))
        best = c.sq_distance, id = static_cast<int32_t>(t), p = c;
    }
    a.ids[i] = id;
    if (id < 0) {
      a.sq[i] = a.signed_d[i] = inf;
      for (int d = 0; d < 3; ++d) a.closest[3 * i + d] = a.bary[3 * i + d] = nan;
      continue;
    }
    a.sq[i] = p.sq_distance;
    a.closest[3 * i] = p.closest.x, a.closest[3 * i + 1] = p.closest.y,
                  a.closest[3 * i + 2] = p.closest.z;
    for (int d = 0; d < 3; ++d) a.bary[3 * i + d] = p.weights[d];
    const S distance = std::sqrt(p.sq_distance);
    bool inside = false;
    if (mesh.closed && distance > 0) {
      Vec3<S> normal;
      const Vec3<S> ca = mesh.corner(id, 0), cb = mesh.corner(id, 1), cc = mesh.corner(id, 2);
      if (p.feature == knn::geometry::TriangleFeature::kFace) {
        normal = knn::geometry::cross3(knn::geometry::sub3(cb, ca), knn::geometry::sub3(cc, ca));
      } else if (knn::geometry::is_edge(p.feature)) {
        const S* e = &mesh.edge_normals[9 * id + 3 * knn::geometry::edge_of(p.feature)];
        normal = {e[0], e[1], e[2]};
      } else {
        const int32_t v = mesh.triangles[3 * id + knn::geometry::corner_of(p.feature)];
        normal = {mesh.vertex_normals[3 * v], mesh.vertex_normals[3 * v + 1],
                  mesh.vertex_normals[3 * v + 2]};
      }
      inside = knn::geometry::pseudonormal_says_inside(q, p.closest, normal);
    }
    a.signed_d[i] = inside ? -distance : distance;
  }
  return a;
}

template <class S>
void expect_matches_brute_force(const TestMesh<S>& mesh, const Answers<S>& gpu,
                                const std::vector<S>& points, S max_distance) {
  const Answers<S> expected = brute_force(mesh, points, max_distance);
  EXPECT_SAME_BITS(expected.ids, gpu.ids);
  EXPECT_SAME_BITS(expected.sq, gpu.sq);
  EXPECT_SAME_BITS(expected.closest, gpu.closest);
  EXPECT_SAME_BITS(expected.bary, gpu.bary);
  if (mesh.closed) {
    EXPECT_SAME_BITS(expected.signed_d, gpu.signed_d);
  } else {
    for (size_t i = 0; i < gpu.signed_d.size(); ++i)
      ASSERT_EQ(std::abs(gpu.signed_d[i]), expected.signed_d[i]) << "point " << i;
  }
}

// The OpenMP engine answers with the same bits, signs of open meshes
// included.
template <class S>
void expect_same_as_openmp(const TestMesh<S>& mesh, const Answers<S>& gpu,
                           const std::vector<S>& points, S max_distance) {
  const auto cpu = knn::omp::build_mesh(mesh.geometry(), knn::MeshParams{});
  const Answers<S> expected = engine_closest(*cpu, points, max_distance);
  EXPECT_SAME_BITS(expected.ids, gpu.ids);
  EXPECT_SAME_BITS(expected.sq, gpu.sq);
  EXPECT_SAME_BITS(expected.closest, gpu.closest);
  EXPECT_SAME_BITS(expected.bary, gpu.bary);
  EXPECT_SAME_BITS(expected.signed_d, gpu.signed_d);
}

template <class S>
void run_awkward_cases() {
  for (auto& c : awkward_meshes<S>()) {
    SCOPED_TRACE(c.name);
    const auto engine = knn::cuda::build_mesh(c.mesh.geometry(), knn::MeshParams{});
    ASSERT_EQ(engine->backend(), KNN_BACKEND_CUDA);
    ASSERT_EQ(engine->n_triangles(), c.mesh.n_triangles());
    const std::vector<S> points = points_for(c.mesh, 500, 11);
    for (const double max_distance :
         {std::numeric_limits<double>::infinity(), 0.1 * c.scale, 0.0}) {
      SCOPED_TRACE(max_distance);
      const S limit = static_cast<S>(max_distance);
      const Answers<S> gpu = engine_closest(*engine, points, limit);
      expect_matches_brute_force(c.mesh, gpu, points, limit);
      expect_same_as_openmp(c.mesh, gpu, points, limit);
    }
  }
}

TEST(MeshGpu, AwkwardMeshesMatchBruteForceFloat) {
  SKIP_WITHOUT_DEVICE();
  run_awkward_cases<float>();
}

TEST(MeshGpu, AwkwardMeshesMatchBruteForceDouble) {
  SKIP_WITHOUT_DEVICE();
  run_awkward_cases<double>();
}

// Outputs left NULL are not written and change nothing in the others; a
// small device budget cuts the call into many chunks with the same answers.
template <class S>
void run_nulls_and_chunks() {
  const TestMesh<S> mesh = torus<S>(50, 30);
  const auto engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
  const std::vector<S> points = points_for(mesh, 5000, 21);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const S inf = std::numeric_limits<S>::infinity();
  const Answers<S> whole = engine_closest(*engine, points, inf);
  expect_matches_brute_force(mesh, whole, points, inf);
  std::vector<int32_t> ids(static_cast<size_t>(m), 7);
  knn::MeshResults<S> only_ids;
  only_ids.triangle_ids = ids.data();
  engine->closest(points.data(), m, inf, only_ids, knn::MeshParams{});
  EXPECT_EQ(ids, whole.ids);
  // Chunks of 1000 points: their staging (points, ids and 11 scalars) and
  // ordering.
  knn::MeshParams small;
  small.device_memory_limit = knn::cuda::kMeshChunkFixedBytes +
                              1000 * (11 * sizeof(S) + 4 + knn::cuda::kMeshChunkOrderBytesPerPoint);
  const Answers<S> chunked = engine_closest(*engine, points, inf, small);
  EXPECT_SAME_BITS(whole.ids, chunked.ids);
  EXPECT_SAME_BITS(whole.sq, chunked.sq);
  EXPECT_SAME_BITS(whole.closest, chunked.closest);
  EXPECT_SAME_BITS(whole.bary, chunked.bary);
  EXPECT_SAME_BITS(whole.signed_d, chunked.signed_d);
}

TEST(MeshGpu, NullOutputsAndChunksFloat) {
  SKIP_WITHOUT_DEVICE();
  run_nulls_and_chunks<float>();
}

TEST(MeshGpu, NullOutputsAndChunksDouble) {
  SKIP_WITHOUT_DEVICE();
  run_nulls_and_chunks<double>();
}

// Signs of open meshes from the winding number: points well inside the
// tube are inside, points far away outside, whatever the hole.
TEST(MeshGpu, OpenMeshSignsFarFromTheHole) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<double> mesh = open_torus<double>(60, 30);
  const auto engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
  // On the tube's core circle opposite the hole, and far outside.
  const std::vector<double> points = {-1, 0, 0, 0, -1, 0, 0, 0, 0, 5, 5, 5, -1, 0, 0.9};
  const Answers<double> a =
      engine_closest(*engine, points, std::numeric_limits<double>::infinity());
  EXPECT_LT(a.signed_d[0], 0);
  EXPECT_LT(a.signed_d[1], 0);
  EXPECT_GT(a.signed_d[2], 0);
  EXPECT_GT(a.signed_d[3], 0);
  EXPECT_GT(a.signed_d[4], 0);
}

#if defined(KNN_TEST_WITH_CUDA)
// Device arrays in place, and a mix of host and device arrays.
template <class S>
void run_device_arrays() {
  const TestMesh<S> mesh = soup<S>(400, 31);
  const auto engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
  const std::vector<S> points = points_for(mesh, 3000, 32);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const S limit = S(0.2);
  const Answers<S> host = engine_closest(*engine, points, limit);
  expect_matches_brute_force(mesh, host, points, limit);
  DeviceArray<S> d_points(points), d_sq(m), d_closest(3 * m), d_signed(m);
  DeviceArray<int32_t> d_ids(m);
  Answers<S> mixed(m);
  knn::MeshResults<S> out{d_ids.get(), mixed.sq.data(), d_closest.get(), mixed.bary.data(),
                          d_signed.get()};
  engine->closest(d_points.get(), m, limit, out, knn::MeshParams{});
  EXPECT_EQ(d_ids.to_host(m), host.ids);
  EXPECT_SAME_BITS(mixed.sq, host.sq);
  EXPECT_SAME_BITS(d_closest.to_host(3 * m), host.closest);
  EXPECT_SAME_BITS(mixed.bary, host.bary);
  EXPECT_SAME_BITS(d_signed.to_host(m), host.signed_d);
  knn::MeshResults<S> device_out{d_ids.get(), d_sq.get(), nullptr, nullptr, nullptr};
  engine->closest(points.data(), m, limit, device_out, knn::MeshParams{});
  EXPECT_EQ(d_ids.to_host(m), host.ids);
  EXPECT_SAME_BITS(d_sq.to_host(m), host.sq);
}

TEST(MeshGpu, DeviceArraysFloat) {
  SKIP_WITHOUT_DEVICE();
  run_device_arrays<float>();
}

TEST(MeshGpu, DeviceArraysDouble) {
  SKIP_WITHOUT_DEVICE();
  run_device_arrays<double>();
}
#endif

// The report by its definitions (deviation.h), from the per-point values.
template <class S>
void expect_report_of(const std::vector<S>& values, const knn::DeviationRequest& request,
                      const knn::DeviationSummary& got, const std::vector<double>& percentiles_got,
                      const std::vector<int64_t>& bins_got) {
  std::vector<S> measured;
  for (const S v : values)
    if (v < std::numeric_limits<S>::infinity()) measured.push_back(v);
  std::sort(measured.begin(), measured.end());
  const int64_t count = static_cast<int64_t>(measured.size());
  EXPECT_EQ(got.measured, count);
  EXPECT_EQ(got.beyond, static_cast<int64_t>(values.size()) - count);
  if (count == 0) {
    EXPECT_TRUE(std::isnan(got.min) && std::isnan(got.max) && std::isnan(got.mean) &&
                std::isnan(got.rms));
    return;
  }
  EXPECT_EQ(got.min, double(measured.front()));
  EXPECT_EQ(got.max, double(measured.back()));
  std::vector<double> sums, squares;
  for (int64_t first = 0; first < count; first += knn::geometry::kDeviationSumBlock) {
    const int64_t length = std::min(knn::geometry::kDeviationSumBlock, count - first);
    sums.push_back(knn::geometry::block_sum(measured.data(), first, length, false));
    squares.push_back(knn::geometry::block_sum(measured.data(), first, length, true));
  }
  const int64_t blocks = static_cast<int64_t>(sums.size());
  EXPECT_EQ(got.mean, knn::geometry::sum_of_block_sums(sums.data(), blocks) / double(count));
  EXPECT_EQ(got.rms,
            std::sqrt(knn::geometry::sum_of_block_sums(squares.data(), blocks) / double(count)));
  for (int p = 0; p < request.n_percentiles; ++p)
    EXPECT_EQ(percentiles_got[p],
              double(measured[knn::geometry::percentile_position(request.percentiles[p], count)]))
        << "percentile " << request.percentiles[p];
  const double t = request.tolerance;
  int64_t within = 0, above = 0, below = 0, below_bins = 0, above_bins = 0;
  std::vector<int64_t> bins(static_cast<size_t>(request.n_bins), 0);
  for (const S v : measured) {
    const double d = v;
    within += -t <= d && d <= t, above += d > t, below += d < -t;
    if (request.n_bins == 0) continue;
    const double* e = request.bin_edges;
    if (d < e[0]) {
      ++below_bins;
    } else if (d > e[request.n_bins]) {
      ++above_bins;
    } else {
      int b = 0;
      while (b + 1 < request.n_bins && !(d < e[b + 1])) ++b;
      ++bins[b];
    }
  }
  EXPECT_EQ(got.within_tolerance, within);
  EXPECT_EQ(got.above_tolerance, above);
  EXPECT_EQ(got.below_tolerance, below);
  EXPECT_EQ(got.below_bins, below_bins);
  EXPECT_EQ(got.above_bins, above_bins);
  EXPECT_EQ(bins_got, bins);
}

template <class S>
struct Report {
  knn::DeviationSummary summary;
  std::vector<double> percentile_values;
  std::vector<int64_t> bin_counts;
  std::vector<S> values;  // per point, when asked for
};

template <class S>
Report<S> report_of(const knn::MeshEngine<S>& engine, const std::vector<S>& points, S max_distance,
                    const knn::DeviationRequest& request, bool with_values,
                    const knn::MeshParams& call) {
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  Report<S> r;
  r.percentile_values.assign(static_cast<size_t>(request.n_percentiles), 7);
  r.bin_counts.assign(static_cast<size_t>(request.n_bins), 7);
  r.summary.percentile_values = r.percentile_values.data();
  r.summary.bin_counts = r.bin_counts.data();
  if (with_values) r.values.assign(static_cast<size_t>(m), 7);
  engine.deviation(points.data(), m, max_distance, request, &r.summary,
                   with_values ? r.values.data() : nullptr, call);
  return r;
}

template <class S>
void expect_same_report(const Report<S>& a, const Report<S>& b) {
  EXPECT_EQ(a.summary.measured, b.summary.measured);
  EXPECT_EQ(a.summary.beyond, b.summary.beyond);
  EXPECT_EQ(a.summary.within_tolerance, b.summary.within_tolerance);
  EXPECT_EQ(a.summary.above_tolerance, b.summary.above_tolerance);
  EXPECT_EQ(a.summary.below_tolerance, b.summary.below_tolerance);
  EXPECT_EQ(a.summary.below_bins, b.summary.below_bins);
  EXPECT_EQ(a.summary.above_bins, b.summary.above_bins);
  const std::vector<double> sa = {a.summary.min, a.summary.max, a.summary.mean, a.summary.rms};
  const std::vector<double> sb = {b.summary.min, b.summary.max, b.summary.mean, b.summary.rms};
  EXPECT_SAME_BITS(sa, sb);
  EXPECT_SAME_BITS(a.percentile_values, b.percentile_values);
  EXPECT_EQ(a.bin_counts, b.bin_counts);
}

template <class S>
void run_deviation(const TestMesh<S>& mesh, S max_distance, int64_t chunk_points) {
  const auto engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
  // More than two blocks of the sums.
  const std::vector<S> points = points_for(mesh, 9000, 41);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const std::vector<double> percentiles = {0, 0.1, 25, 50, 99.9, 100};
  const std::vector<double> edges = {-0.3, -0.1, -0.01, 0, 0.01, 0.1, 0.3};
  knn::DeviationRequest request;
  request.tolerance = 0.05;
  request.percentiles = percentiles.data();
  request.n_percentiles = static_cast<int>(percentiles.size());
  request.bin_edges = edges.data();
  request.n_bins = static_cast<int>(edges.size()) - 1;
  // Chunks of chunk_points (0: as many as fit): every value and key, the
  // sort's temporaries and the summary's buffers, beside the staged points
  // and their ordering.
  knn::MeshParams call;
  if (chunk_points > 0)
    call.device_memory_limit = 2 * knn::cuda::aligned(static_cast<size_t>(m) * sizeof(S)) +
                               knn::cuda::cub_temp_bytes(m) + 6 * knn::cuda::kAllocAlignment +
                               knn::cuda::kMeshChunkFixedBytes +
                               static_cast<size_t>(chunk_points) *
                                   (3 * sizeof(S) + knn::cuda::kMeshChunkOrderBytesPerPoint);
  const Report<S> gpu = report_of(*engine, points, max_distance, request, true, call);
  EXPECT_SAME_BITS(engine_closest(*engine, points, max_distance).signed_d, gpu.values);
  expect_report_of(gpu.values, request, gpu.summary, gpu.percentile_values, gpu.bin_counts);
  // Without the per-point values: the same report.
  expect_same_report(gpu, report_of(*engine, points, max_distance, request, false, call));
  // The OpenMP engine's.
  const auto cpu = knn::omp::build_mesh(mesh.geometry(), knn::MeshParams{});
  const Report<S> expected = report_of(*cpu, points, max_distance, request, true, {});
  EXPECT_SAME_BITS(expected.values, gpu.values);
  expect_same_report(expected, gpu);
  // No bins and no percentiles (NULL arrays).
  knn::DeviationRequest bare;
  bare.tolerance = 0;
  expect_same_report(report_of(*cpu, points, max_distance, bare, false, {}),
                     report_of(*engine, points, max_distance, bare, false, call));
}

TEST(MeshGpu, DeviationReportFollowsItsDefinitions) {
  SKIP_WITHOUT_DEVICE();
  run_deviation(torus<float>(40, 20), 0.5f, 0);
  run_deviation(torus<double>(40, 20), std::numeric_limits<double>::infinity(), 0);
  run_deviation(open_torus<double>(40, 20), 0.2, 0);
  // Chunks of the signed distances forced by a small budget.
  run_deviation(torus<float>(40, 20), 0.5f, 1000);
  // Nothing measured: NaN statistics, zero counts.
  run_deviation(torus<float>(10, 6), 0.0f, 0);
}

// The build refuses what mesh_build_bytes says does not fit, before it
// allocates; exactly that much is enough.
TEST(MeshGpu, BuildChecksItsBytesAgainstTheBudget) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<float> mesh = soup<float>(20000, 51);
  const size_t needed =
      knn::cuda::mesh_build_bytes_either(mesh.n_vertices(), mesh.n_triangles(), 4);
  knn::MeshParams params;
  params.device_memory_limit = needed - 1;
  try {
    knn::cuda::build_mesh(mesh.geometry(), params);
    ADD_FAILURE() << "a build over its budget went ahead";
  } catch (const knn::Error& e) {
    EXPECT_EQ(e.status(), KNN_ERR_DEVICE_OUT_OF_MEMORY);
    EXPECT_NE(std::string(e.what()).find(std::to_string(needed)), std::string::npos) << e.what();
  }
  params.device_memory_limit = needed;
  const auto engine = knn::cuda::build_mesh(mesh.geometry(), params);
  const std::vector<float> points = points_for(mesh, 200, 52);
  expect_matches_brute_force(mesh, engine_closest(*engine, points, 0.3f), points, 0.3f);
  // Estimates grow with the sizes and never wrap.
  EXPECT_LT(knn::cuda::mesh_build_bytes(1000, 1000, 4, true),
            knn::cuda::mesh_build_bytes(1000, 1000000, 4, true));
  EXPECT_LT(knn::cuda::mesh_build_bytes(1000, 1000000, 4, true),
            knn::cuda::mesh_build_bytes(1000, 1000000, 8, true));
  EXPECT_GT(knn::cuda::mesh_build_bytes(int64_t{1} << 31, KNN_MESH_MAX_TRIANGLES, 8, false),
            size_t{1} << 36);
}

// Every device allocation of a build and of a query made to fail in turn:
// a clean DEVICE_OUT_OF_MEMORY, and the next call works.
TEST(MeshGpu, AllocationFaultsFailCleanly) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<float> mesh = open_torus<float>(20, 10);
  const std::vector<float> points = points_for(mesh, 100, 61);
  const auto reference = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
  const Answers<float> expected = engine_closest(*reference, points, 1.0f);
  int faults = 0;
  for (int n = 1; n < 64; ++n) {
    const std::string fault = std::to_string(n);
    bool failed = false;
    try {
      const ScopedEnv env("KNN_FAULT_DEVICE_ALLOC", fault.c_str());
      const auto engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
      const Answers<float> got = engine_closest(*engine, points, 1.0f);
      EXPECT_EQ(got.ids, expected.ids);
    } catch (const knn::Error& e) {
      EXPECT_EQ(e.status(), KNN_ERR_DEVICE_OUT_OF_MEMORY) << e.what();
      failed = true;
      ++faults;
    }
    if (!failed) break;
  }
  EXPECT_GT(faults, 5);
  EXPECT_EQ(engine_closest(*reference, points, 1.0f).ids, expected.ids);
}

// A cancelled call throws CANCELLED and leaves every output "beyond" (the
// header's rule for a failure while the engine runs), host and device
// arrays alike; the next call answers.
template <class S>
void expect_all_beyond(const std::vector<int32_t>& ids, const std::vector<S>& sq,
                       const std::vector<S>& closest, const std::vector<S>& signed_d) {
  const S inf = std::numeric_limits<S>::infinity(), nan = std::numeric_limits<S>::quiet_NaN();
  EXPECT_EQ(ids, std::vector<int32_t>(ids.size(), -1));
  EXPECT_SAME_BITS(sq, std::vector<S>(sq.size(), inf));
  EXPECT_SAME_BITS(closest, std::vector<S>(closest.size(), nan));
  EXPECT_SAME_BITS(signed_d, std::vector<S>(signed_d.size(), inf));
}

TEST(MeshGpu, CancelledCallsLeaveBeyondValues) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<float> mesh = torus<float>(20, 10);
  const auto engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
  const std::vector<float> points = points_for(mesh, 100, 71);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  volatile int flag = 1;
  knn::set_cancel_flag(&flag);
  Answers<float> host(m);
  try {
    engine->closest(points.data(), m, 1.0f, host.results(), knn::MeshParams{});
    ADD_FAILURE() << "a cancelled query went ahead";
  } catch (const knn::Error& e) {
    EXPECT_EQ(e.status(), KNN_ERR_CANCELLED);
  }
  expect_all_beyond(host.ids, host.sq, host.closest, host.signed_d);
  std::vector<float> values(static_cast<size_t>(m), 7);
  knn::DeviationSummary summary;
  try {
    engine->deviation(points.data(), m, 1.0f, knn::DeviationRequest{}, &summary, values.data(),
                      knn::MeshParams{});
    ADD_FAILURE() << "a cancelled report went ahead";
  } catch (const knn::Error& e) {
    EXPECT_EQ(e.status(), KNN_ERR_CANCELLED);
  }
  EXPECT_SAME_BITS(values,
                   std::vector<float>(values.size(), std::numeric_limits<float>::infinity()));
#if defined(KNN_TEST_WITH_CUDA)
  DeviceArray<int32_t> d_ids(std::vector<int32_t>(static_cast<size_t>(m), 7));
  DeviceArray<float> d_sq(std::vector<float>(static_cast<size_t>(m), 7));
  DeviceArray<float> d_closest(std::vector<float>(static_cast<size_t>(3 * m), 7));
  DeviceArray<float> d_signed(std::vector<float>(static_cast<size_t>(m), 7));
  try {
    engine->closest(points.data(), m, 1.0f,
                    {d_ids.get(), d_sq.get(), d_closest.get(), nullptr, d_signed.get()},
                    knn::MeshParams{});
    ADD_FAILURE() << "a cancelled query went ahead";
  } catch (const knn::Error& e) {
    EXPECT_EQ(e.status(), KNN_ERR_CANCELLED);
  }
  expect_all_beyond(d_ids.to_host(m), d_sq.to_host(m), d_closest.to_host(3 * m),
                    d_signed.to_host(m));
#endif
  knn::set_cancel_flag(nullptr);
  expect_matches_brute_force(mesh, engine_closest(*engine, points, 1.0f), points, 1.0f);
}

// 10^6 triangles, 10^6 points: the build and the query timed (printed), the
// answers of a sample checked against the brute force.
TEST(MeshGpu, MillionTrianglesMillionPoints) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<float> mesh = torus<float>(1000, 500);
  ASSERT_EQ(mesh.n_triangles(), 1000000);
  std::vector<float> points;
  std::mt19937_64 rng(81);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f), z(-0.5f, 0.5f);
  for (int i = 0; i < 1000000; ++i)
    points.push_back(u(rng)), points.push_back(u(rng)), points.push_back(z(rng));
  const int64_t m = 1000000;
  knn::cuda::build_mesh(torus<float>(10, 10).geometry(), knn::MeshParams{});  // context, modules
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  const auto engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
  const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<int32_t> ids(m);
  std::vector<float> sq(m), signed_d(m);
  const float inf = std::numeric_limits<float>::infinity();
  engine->closest(points.data(), m, inf, {ids.data(), sq.data()}, knn::MeshParams{});  // warm
  t0 = Clock::now();
  engine->closest(points.data(), m, inf, {ids.data(), sq.data()}, knn::MeshParams{});
  const double closest_s = std::chrono::duration<double>(Clock::now() - t0).count();
  t0 = Clock::now();
  knn::MeshResults<float> with_sign;
  with_sign.triangle_ids = ids.data();
  with_sign.signed_distances = signed_d.data();
  engine->closest(points.data(), m, inf, with_sign, knn::MeshParams{});
  const double signed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "[ mesh    ] 10^6 triangles (closed torus), 10^6 points (host arrays), float: "
      "build %.1f ms (incl. upload), closest %.1f ms, signed %.1f ms\n",
      1e3 * build_s, 1e3 * closest_s, 1e3 * signed_s);
#if defined(KNN_TEST_WITH_CUDA)
  {
    DeviceArray<float> d_points(points), d_sq(m), d_signed(m);
    DeviceArray<int32_t> d_ids(m);
    engine->closest(d_points.get(), m, inf, {d_ids.get(), d_sq.get()}, knn::MeshParams{});
    t0 = Clock::now();
    engine->closest(d_points.get(), m, inf, {d_ids.get(), d_sq.get()}, knn::MeshParams{});
    const double device_closest_s = std::chrono::duration<double>(Clock::now() - t0).count();
    knn::MeshResults<float> device_sign;
    device_sign.triangle_ids = d_ids.get();
    device_sign.signed_distances = d_signed.get();
    t0 = Clock::now();
    engine->closest(d_points.get(), m, inf, device_sign, knn::MeshParams{});
    const double device_signed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("[ mesh    ] the same with device arrays: closest %.1f ms, signed %.1f ms\n",
                1e3 * device_closest_s, 1e3 * device_signed_s);
    EXPECT_EQ(d_ids.to_host(m), ids);
    EXPECT_SAME_BITS(d_signed.to_host(m), signed_d);
  }
#endif
  // The OpenMP engine on this host's cores: every answer the same.
  t0 = Clock::now();
  const auto cpu = knn::omp::build_mesh(mesh.geometry(), knn::MeshParams{});
  const double cpu_build_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<int32_t> cpu_ids(m);
  std::vector<float> cpu_signed(m);
  t0 = Clock::now();
  cpu->closest(points.data(), m, inf,
               {cpu_ids.data(), nullptr, nullptr, nullptr, cpu_signed.data()}, knn::MeshParams{});
  const double cpu_signed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("[ mesh    ] OpenMP engine, same data: build %.1f ms, signed %.1f ms\n",
              1e3 * cpu_build_s, 1e3 * cpu_signed_s);
  EXPECT_EQ(cpu_ids, ids);
  EXPECT_SAME_BITS(cpu_signed, signed_d);
  std::vector<float> sample;
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < m; i += m / 97) {
    picked.push_back(i);
    for (int d = 0; d < 3; ++d) sample.push_back(points[3 * i + d]);
  }
  const Answers<float> expected = brute_force(mesh, sample, inf);
  for (size_t s = 0; s < picked.size(); ++s) {
    EXPECT_EQ(ids[picked[s]], expected.ids[s]) << "point " << picked[s];
    EXPECT_EQ(signed_d[picked[s]], expected.signed_d[s]) << "point " << picked[s];
  }
}

// 10^7 triangles of an open mesh (winding moments and clusters built too):
// the build timed (printed, upload included), a sample of answers checked
// against the brute force.
TEST(MeshGpu, TenMillionTriangleBuild) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<float> mesh = open_torus<float>(5000, 1002);
  ASSERT_GT(mesh.n_triangles(), 9990000);
  knn::cuda::build_mesh(torus<float>(10, 10).geometry(), knn::MeshParams{});  // context, modules
  double best_s = 1e9;
  std::unique_ptr<knn::MeshEngine<float>> engine;
  for (int run = 0; run < 3; ++run) {
    engine.reset();
    const auto t0 = std::chrono::steady_clock::now();
    engine = knn::cuda::build_mesh(mesh.geometry(), knn::MeshParams{});
    best_s = std::min(best_s,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf(
      "[ mesh    ] build of %lld triangles (open torus, float, host arrays): %.1f ms (best of 3)\n",
      static_cast<long long>(mesh.n_triangles()), 1e3 * best_s);
  const std::vector<float> points = {0.5f, 0.1f, 0.0f, -1.0f, 0.0f, 0.2f,
                                     2.0f, 2.0f, 2.0f, 1.0f,  0.0f, 0.0f};
  const float inf = std::numeric_limits<float>::infinity();
  const Answers<float> gpu = engine_closest(*engine, points, inf);
  const Answers<float> expected = brute_force(mesh, points, inf);
  EXPECT_SAME_BITS(expected.ids, gpu.ids);
  EXPECT_SAME_BITS(expected.sq, gpu.sq);
}

}  // namespace
}  // namespace knn_test
