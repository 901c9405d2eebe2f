// The engines without the ABI layer (issue #47, item 3): this program links
// the object libraries knn_engine_base, knn_engine_omp and, in CUDA builds,
// knn_engine_cuda, and no file of src/. Every object of those libraries is
// linked whether referenced or not, so an engine that still called into src/
// (the cancel and progress registries once lived there) fails the link. The
// tests then run the engines through engine/ alone: a kd-tree's kNN against a
// float64 brute force, the cancel registry stopping a call, the progress
// registry reporting a build, and (CUDA builds with a device) the CUDA
// kd-tree against the OpenMP one bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "../common/error.h"
#include "../engine/cancel.h"
#include "../engine/index_engine.h"
#include "../engine/progress.h"
#if defined(KNN_TEST_WITH_CUDA_ENGINE)
#include "../cuda/cuda_engine.h"
#include "../cuda/cuda_index.h"
#endif

namespace {

constexpr int kDim = 3;
constexpr int kK = 5;

std::vector<float> random_points(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> coordinate(-1.0f, 1.0f);
  std::vector<float> p(static_cast<size_t>(n) * kDim);
  for (float& v : p) v = coordinate(rng);
  return p;
}

// The k nearest of each query by the float64 squared distance, ties by index.
// The engines compute in float32; with random coordinates of 24-bit
// mantissas no two float64 distances of one query round to the same float,
// so the orders agree and the indices must match exactly.
std::vector<int32_t> brute_force(const std::vector<float>& points,
                                 const std::vector<float>& queries) {
  const size_t n = points.size() / kDim, m = queries.size() / kDim;
  std::vector<int32_t> rows;
  for (size_t q = 0; q < m; ++q) {
    std::vector<std::pair<double, int32_t>> d(n);
    for (size_t i = 0; i < n; ++i) {
      double s = 0;
      for (int c = 0; c < kDim; ++c) {
        const double g = double{queries[q * kDim + c]} - double{points[i * kDim + c]};
        s += g * g;
      }
      d[i] = {s, static_cast<int32_t>(i)};
    }
    std::partial_sort(d.begin(), d.begin() + kK, d.end());
    for (int j = 0; j < kK; ++j) rows.push_back(d[static_cast<size_t>(j)].second);
  }
  return rows;
}

knn::IndexParams params() {
  knn::IndexParams p;
  p.leaf_size = 8;
  p.threads = 2;
  return p;
}

TEST(EnginesLinkAlone, OpenMpKdTreeAnswersAsTheOracle) {
  const std::vector<float> points = random_points(3000, 1), queries = random_points(200, 2);
  const auto engine = knn::omp::build_kdtree_index<float>(points.data(), 3000, kDim, params());
  std::vector<int32_t> indices(200 * kK);
  std::vector<float> distances(200 * kK);
  knn::CallParams call;
  call.threads = 2;
  engine->knn(queries.data(), 200, kK, indices.data(), distances.data(), call);
  EXPECT_EQ(indices, brute_force(points, queries));
}

TEST(EnginesLinkAlone, TheCancelRegistryStopsAnEngineCall) {
  const std::vector<float> points = random_points(3000, 3);
  const auto engine = knn::omp::build_kdtree_index<float>(points.data(), 3000, kDim, params());
  volatile int flag = 1;
  knn::set_cancel_flag(&flag);
  std::vector<int32_t> indices(3000 * kK);
  int status = 0;
  try {
    engine->knn_self(kK, false, indices.data(), nullptr, knn::CallParams{});
  } catch (const knn::Error& e) {
    status = e.status();
  }
  knn::set_cancel_flag(nullptr);
  EXPECT_EQ(status, KNN_ERR_CANCELLED);
}

TEST(EnginesLinkAlone, TheProgressRegistryReportsABuild) {
  const std::vector<float> points = random_points(5000, 4);
  knn_progress record{};
  knn::progress_clear(&record);
  knn::set_progress(&record);
  const auto engine = knn::omp::build_kdtree_index<float>(points.data(), 5000, kDim, params());
  knn::set_progress(nullptr);
  EXPECT_EQ(record.stage, KNN_PROGRESS_BUILD);
  EXPECT_GT(record.total, 1);
  EXPECT_EQ(record.done, record.total);
  EXPECT_EQ(record.sequence, 1);
}

#if defined(KNN_TEST_WITH_CUDA_ENGINE)
TEST(EnginesLinkAlone, CudaKdTreeAnswersAsTheOpenMpOne) {
  if (knn::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  knn::cuda::set_device(0);
  const std::vector<float> points = random_points(3000, 5), queries = random_points(200, 6);
  const auto gpu = knn::cuda::build_kdtree_index<float>(points.data(), 3000, kDim, params());
  const auto cpu = knn::omp::build_kdtree_index<float>(points.data(), 3000, kDim, params());
  std::vector<int32_t> gpu_indices(200 * kK), cpu_indices(200 * kK);
  std::vector<float> gpu_distances(200 * kK), cpu_distances(200 * kK);
  gpu->knn(queries.data(), 200, kK, gpu_indices.data(), gpu_distances.data(), knn::CallParams{});
  cpu->knn(queries.data(), 200, kK, cpu_indices.data(), cpu_distances.data(), knn::CallParams{});
  EXPECT_EQ(gpu_indices, cpu_indices);
  EXPECT_EQ(gpu_distances, cpu_distances);
  EXPECT_EQ(gpu_indices, brute_force(points, queries));
}
#endif

}  // namespace
