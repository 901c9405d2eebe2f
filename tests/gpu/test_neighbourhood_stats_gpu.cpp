// The neighbourhood statistics (include/knn_gpgpu_stats.h) on the CUDA engine:
// bit for bit the OpenMP engine's answers (memcmp), on every CUDA structure,
// with host and device outputs, in chunks (the smallest device budget each
// call accepts), on several devices (a list of {0, 0} splits the points on
// one GPU; {0, 1} where there are two), over awkward clouds: 0, 1 and 2 points, k beyond n, odd
// sizes, duplicates, all points equal, planes, lines, clusters, huge and tiny coordinates. Skips
// without a device; any difference fails.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "knn_gpgpu.h"
#include "neighbourhood_oracle.h"

namespace {

using namespace knn_test;

// Everything one index answers, for the comparison.
template <typename Scalar>
struct Answers {
  std::vector<Scalar> toward, oriented, curvature, scores, kth;
  std::vector<int64_t> counts;
  std::vector<int32_t> inliers, radius_kept;
  int64_t n_inliers = -1, n_radius_kept = -1;
};

knn_options options_of(int backend, int structure) {
  knn_options o;
  knn_options_init_v2(&o);
  o.backend = backend;
  o.structure = structure;
  return o;
}

// The smallest budget each call accepts, to 4 KiB (with_smallest_budget):
// each call's fixed whole pages depend on the structure and the statistic,
// and what is left beside them then holds a few rows to a few hundred, so
// that the call runs in many chunks.
constexpr size_t kBudgetResolution = 4096;

// Everything one index answers, with the call's options, or with the
// smallest budget each call accepts (`call` then the base options).
template <typename Scalar>
Answers<Scalar> answer(const knn_index* ix, int64_t n, int k, Scalar radius,
                       const knn_options* call, bool smallest_budget = false) {
  const auto run = [&](auto op) {
    return smallest_budget ? knn_test::with_smallest_budget(*call, op, kBudgetResolution)
                           : op(call);
  };
  Answers<Scalar> a;
  const size_t rows = static_cast<size_t>(n);
  a.toward.resize(3 * rows), a.oriented.resize(3 * rows), a.curvature.resize(rows);
  a.scores.resize(rows), a.kth.resize(rows), a.counts.resize(rows);
  a.inliers.resize(rows), a.radius_kept.resize(rows);
  const Scalar viewpoint[3] = {Scalar(0.5), Scalar(-7), Scalar(3)};
  EXPECT_EQ(run([&](const knn_options* o) {
              return normals_call(ix, k, viewpoint, a.toward.data(), a.curvature.data(), o);
            }),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(run([&](const knn_options* o) {
              return normals_call(ix, k, nullptr, a.oriented.data(), nullptr, o);
            }),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(run([&](const knn_options* o) { return scores_call(ix, k, a.scores.data(), o); }),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(run([&](const knn_options* o) { return kth_call(ix, k, a.kth.data(), o); }), KNN_OK)
      << knn_last_error();
  EXPECT_EQ(run([&](const knn_options* o) { return counts_call(ix, radius, a.counts.data(), o); }),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(run([&](const knn_options* o) {
              return inliers_call<Scalar>(ix, k, 1.5, a.inliers.data(), &a.n_inliers, o);
            }),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(run([&](const knn_options* o) {
              return radius_inliers_call(ix, radius, 2, a.radius_kept.data(), &a.n_radius_kept, o);
            }),
            KNN_OK)
      << knn_last_error();
  return a;
}

template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& a, const std::vector<T>& b,
                                     const char* what) {
  if (a.size() == b.size() &&
      (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0))
    return ::testing::AssertionSuccess();
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure()
             << what << " differs first at " << i << ": " << a[i] << " against " << b[i];
  return ::testing::AssertionFailure() << what << ": sizes " << a.size() << " and " << b.size();
}

template <typename Scalar>
void expect_same(const Answers<Scalar>& gpu, const Answers<Scalar>& cpu, const std::string& where) {
  EXPECT_TRUE(same_bits(gpu.toward, cpu.toward, "normals towards the viewpoint")) << where;
  EXPECT_TRUE(same_bits(gpu.oriented, cpu.oriented, "normals without viewpoint")) << where;
  EXPECT_TRUE(same_bits(gpu.curvature, cpu.curvature, "curvature")) << where;
  EXPECT_TRUE(same_bits(gpu.scores, cpu.scores, "outlier scores")) << where;
  EXPECT_TRUE(same_bits(gpu.kth, cpu.kth, "k-th distances")) << where;
  EXPECT_TRUE(same_bits(gpu.counts, cpu.counts, "neighbour counts")) << where;
  EXPECT_TRUE(same_bits(gpu.inliers, cpu.inliers, "statistical inliers")) << where;
  EXPECT_TRUE(same_bits(gpu.radius_kept, cpu.radius_kept, "radius inliers")) << where;
  EXPECT_EQ(gpu.n_inliers, cpu.n_inliers) << where;
  EXPECT_EQ(gpu.n_radius_kept, cpu.n_radius_kept) << where;
}

struct Case {
  Cloud cloud;
  int64_t n;
  int k;
  double scale;  // coordinates times this (huge and tiny)
};

std::vector<Case> awkward_cases() {
  return {{Cloud::Sphere, 0, 8, 1},           {Cloud::Sphere, 1, 8, 1},
          {Cloud::Sphere, 2, 8, 1},           {Cloud::Plane, 17, 30, 1},
          {Cloud::NoisyScan, 1001, 16, 1},    {Cloud::Cylinder, 4099, 30, 1},
          {Cloud::Duplicates, 777, 12, 1},    {Cloud::AllEqual, 300, 10, 1},
          {Cloud::Line, 513, 7, 1},           {Cloud::Clusters, 2000, 100, 1},
          {Cloud::Offset, 3001, 16, 1},       {Cloud::Sphere, 2500, 1, 1},
          {Cloud::NoisyScan, 2000, 24, 1e15}, {Cloud::NoisyScan, 2000, 24, 1e-30}};
}

template <typename Scalar>
void compare_engines() {
  SKIP_WITHOUT_DEVICE();
  for (const Case& c : awkward_cases()) {
    std::vector<double> raw = make_cloud(c.cloud, c.n, 99);
    for (double& v : raw) v *= c.scale;
    const std::vector<Scalar> p = as_scalar<Scalar>(raw);
    const Scalar radius = static_cast<Scalar>(0.1 * c.scale);
    const IndexPtr cpu = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
    ASSERT_TRUE(cpu || c.n == 0) << knn_last_error();
    knn_index* empty = nullptr;
    if (c.n == 0) {
      ASSERT_EQ(knn_index_build(nullptr, 0, 3, nullptr, &empty), KNN_OK);
      knn_index_free(empty);
      continue;
    }
    const Answers<Scalar> want = answer<Scalar>(cpu.get(), c.n, c.k, radius, nullptr);
    for (const int structure : {KNN_STRUCTURE_AUTO, KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID,
                                KNN_STRUCTURE_BRUTE_FORCE}) {
      const knn_options o = options_of(KNN_BACKEND_CUDA, structure);
      knn_index* raw_ix = nullptr;
      int status;
      if constexpr (sizeof(Scalar) == 8)
        status = knn_index_build_f64(p.data(), c.n, 3, &o, &raw_ix);
      else
        status = knn_index_build(p.data(), c.n, 3, &o, &raw_ix);
      ASSERT_EQ(status, KNN_OK) << knn_last_error();
      const IndexPtr gpu(raw_ix);
      const std::string where = std::string(cloud_name(c.cloud)) + " n " + std::to_string(c.n) +
                                " k " + std::to_string(c.k) + " structure " +
                                std::to_string(structure) + " scale " + std::to_string(c.scale);
      expect_same(answer<Scalar>(gpu.get(), c.n, c.k, radius, nullptr), want, where);
      // Chunks: the smallest budget each call accepts.
      const knn_options small = options_of(KNN_BACKEND_CUDA, structure);
      expect_same(answer<Scalar>(gpu.get(), c.n, c.k, radius, &small, true), want,
                  where + " chunked");
      // Several devices: {0, 0} splits the points on one GPU; {0, 1} where two exist.
      knn_options split = options_of(KNN_BACKEND_CUDA, structure);
      split.device_count = 2;
      split.devices[0] = 0, split.devices[1] = 0;
      expect_same(answer<Scalar>(gpu.get(), c.n, c.k, radius, &split), want, where + " {0,0}");
      if (cuGetDeviceCount() >= 2) {
        split.devices[1] = 1;
        expect_same(answer<Scalar>(gpu.get(), c.n, c.k, radius, &split), want, where + " {0,1}");
      }
    }
  }
}

TEST(NeighbourhoodStatsGpu, Float32SameBitsAsOpenMP) { compare_engines<float>(); }
TEST(NeighbourhoodStatsGpu, Float64SameBitsAsOpenMP) { compare_engines<double>(); }

// A large cloud: the default device budget, k = 30, beside the CPU.
TEST(NeighbourhoodStatsGpu, LargeCloudSameBits) {
  SKIP_WITHOUT_DEVICE();
  const int64_t n = 300000;
  const std::vector<float> p = as_scalar<float>(make_cloud(Cloud::NoisyScan, n, 5));
  const IndexPtr cpu = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO);
  const IndexPtr gpu = build(p, KNN_BACKEND_CUDA, KNN_STRUCTURE_AUTO);
  ASSERT_TRUE(cpu && gpu) << knn_last_error();
  std::vector<float> a(3 * n), b(3 * n), ca(n), cb(n);
  ASSERT_EQ(knn_index_normals(cpu.get(), 30, nullptr, a.data(), ca.data(), nullptr), KNN_OK);
  ASSERT_EQ(knn_index_normals(gpu.get(), 30, nullptr, b.data(), cb.data(), nullptr), KNN_OK);
  EXPECT_TRUE(same_bits(a, b, "normals"));
  EXPECT_TRUE(same_bits(ca, cb, "curvature"));
  ASSERT_EQ(knn_index_outlier_scores(cpu.get(), 16, ca.data(), nullptr), KNN_OK);
  ASSERT_EQ(knn_index_outlier_scores(gpu.get(), 16, cb.data(), nullptr), KNN_OK);
  EXPECT_TRUE(same_bits(ca, cb, "outlier scores"));
}

#if defined(KNN_TEST_WITH_CUDA)
// Device outputs: the same bits as host outputs, on both backends (the
// OpenMP index writes them through host buffers).
template <typename Scalar>
void device_outputs() {
  SKIP_WITHOUT_DEVICE();
  const int64_t n = 3333;
  const int k = 20;
  const std::vector<Scalar> p = as_scalar<Scalar>(make_cloud(Cloud::Cylinder, n, 8));
  const IndexPtr cpu = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  const Answers<Scalar> want = answer<Scalar>(cpu.get(), n, k, Scalar(0.1), nullptr);
  for (const int backend : {KNN_BACKEND_CUDA, KNN_BACKEND_OPENMP}) {
    const IndexPtr ix = build(p, backend, KNN_STRUCTURE_AUTO);
    ASSERT_TRUE(ix) << knn_last_error();
    DeviceArray<Scalar> normals(3 * n), curvature(n), scores(n), kth(n);
    DeviceArray<int64_t> counts(n);
    DeviceArray<int32_t> kept(n);
    const Scalar viewpoint[3] = {Scalar(0.5), Scalar(-7), Scalar(3)};
    ASSERT_EQ(normals_call(ix.get(), k, viewpoint, normals.get(), curvature.get(), nullptr), KNN_OK)
        << knn_last_error();
    EXPECT_TRUE(same_bits(normals.to_host(3 * n), want.toward, "device normals"));
    EXPECT_TRUE(same_bits(curvature.to_host(n), want.curvature, "device curvature"));
    ASSERT_EQ(normals_call(ix.get(), k, nullptr, normals.get(), nullptr, nullptr), KNN_OK);
    EXPECT_TRUE(same_bits(normals.to_host(3 * n), want.oriented, "device oriented normals"));
    ASSERT_EQ(scores_call(ix.get(), k, scores.get(), nullptr), KNN_OK);
    EXPECT_TRUE(same_bits(scores.to_host(n), want.scores, "device scores"));
    ASSERT_EQ(kth_call(ix.get(), k, kth.get(), nullptr), KNN_OK);
    EXPECT_TRUE(same_bits(kth.to_host(n), want.kth, "device k-th distances"));
    ASSERT_EQ(counts_call(ix.get(), Scalar(0.1), counts.get(), nullptr), KNN_OK);
    EXPECT_TRUE(same_bits(counts.to_host(n), want.counts, "device counts"));
    int64_t n_kept = -1;
    ASSERT_EQ(inliers_call<Scalar>(ix.get(), k, 1.5, kept.get(), &n_kept, nullptr), KNN_OK);
    EXPECT_EQ(n_kept, want.n_inliers);
    EXPECT_TRUE(same_bits(kept.to_host(n), want.inliers, "device inliers"));
    // Mixed host and device outputs are refused, the outputs untouched.
    std::vector<Scalar> host_curvature(n, Scalar(42));
    EXPECT_EQ(normals_call(ix.get(), k, nullptr, normals.get(), host_curvature.data(), nullptr),
              KNN_ERR_INVALID_ARGUMENT);
    for (const Scalar v : host_curvature) EXPECT_EQ(v, Scalar(42));
  }
}

TEST(NeighbourhoodStatsGpu, DeviceOutputsFloat32) { device_outputs<float>(); }
TEST(NeighbourhoodStatsGpu, DeviceOutputsFloat64) { device_outputs<double>(); }
#endif

}  // namespace
