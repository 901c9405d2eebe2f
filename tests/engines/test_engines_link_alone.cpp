// The engines without the ABI layer (issue #47, item 3): this program links
// the object libraries knn_engine_base, knn_engine_omp and knn_engine_cuda
// (without CUDA, the engine's stand-in: cuda/no_cuda/), and no file of src/.
// Every object of those libraries is linked whether referenced or not, so an
// engine that still called into src/ (the cancel and progress registries
// once lived there) fails the link. The tests then run the engines through
// engine/ alone: a kd-tree's kNN against a float64 brute force, the cancel
// registry stopping a call, the progress registry reporting a build, and
// (CUDA builds with a device) the CUDA kd-tree against the OpenMP one bit for
// bit. The backends (engine/backend.h) link alone too: the OpenMP backend's
// structures against the oracle, and the CUDA backend's devices and
// estimates as its engine reports them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "../../common/error.h"
#include "../../cuda/cuda_backend.h"
#include "../../cuda/cuda_engine.h"
#include "../../cuda/cuda_index.h"
#include "../../cuda/index_memory_model.h"
#include "../../engine/backend.h"
#include "../../engine/cancel.h"
#include "../../engine/index_engine.h"
#include "../../engine/progress.h"
#include "../../openmp/omp_backend.h"

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

// The status a call throws, 0 when it returns.
template <class Call>
int status_of(Call call) {
  try {
    call();
  } catch (const knn::Error& e) {
    return e.status();
  }
  return 0;
}

std::vector<int32_t> knn_rows(const knn::IndexEngine& engine, const std::vector<float>& queries) {
  const int64_t m = static_cast<int64_t>(queries.size() / kDim);
  std::vector<int32_t> indices(static_cast<size_t>(m) * kK);
  knn::CallParams call;
  call.threads = 2;
  engine.knn(queries.data(), m, kK, indices.data(), nullptr, call);
  return indices;
}

TEST(EnginesLinkAlone, TheOpenMpBackendBuildsEachStructureOfItsEngine) {
  const knn::Backend& omp = knn::omp::omp_backend();
  EXPECT_EQ(omp.kind(), KNN_BACKEND_OPENMP);
  const std::vector<float> points = random_points(3000, 7), queries = random_points(200, 8);
  const std::vector<int32_t> expected = brute_force(points, queries);
  const auto kdtree = omp.build_kdtree_index(points.data(), 3000, kDim, params());
  const auto brute = omp.build_brute_force_index(points.data(), 3000, kDim, params());
  const auto grid = omp.build_grid_index(points.data(), 3000, params());
  ASSERT_NE(grid, nullptr);  // uniform points make a good grid
  EXPECT_EQ(kdtree->structure(), KNN_STRUCTURE_KDTREE);
  EXPECT_EQ(brute->structure(), KNN_STRUCTURE_BRUTE_FORCE);
  EXPECT_EQ(grid->structure(), KNN_STRUCTURE_GRID);
  EXPECT_EQ(knn_rows(*kdtree, queries), expected);
  EXPECT_EQ(knn_rows(*brute, queries), expected);
  EXPECT_EQ(knn_rows(*grid, queries), expected);
  // The kd-tree of another engine's points: the brute force's, in input order.
  const auto of_brute = omp.build_kdtree_index_of(*brute, params());
  EXPECT_EQ(of_brute->structure(), KNN_STRUCTURE_KDTREE);
  EXPECT_EQ(of_brute->backend(), KNN_BACKEND_OPENMP);
  EXPECT_EQ(knn_rows(*of_brute, queries), expected);
}

TEST(EnginesLinkAlone, TheOpenMpBackendHasNoDevices) {
  const knn::Backend& omp = knn::omp::omp_backend();
  const std::vector<float> points = random_points(10, 9);
  EXPECT_EQ(omp.device_count(), 0);
  EXPECT_EQ(omp.current_device(), -1);
  EXPECT_FALSE(omp.is_device_pointer(points.data()));
  EXPECT_EQ(omp.device_of(points.data()), -1);
  EXPECT_EQ(omp.index_build_bytes(KNN_STRUCTURE_AUTO, 1000, 3, 4), 0u);
  EXPECT_EQ(omp.device_budget(0).bytes(), 0u);
  EXPECT_EQ(status_of([&] { omp.allocate(64); }), KNN_ERR_INTERNAL);
  EXPECT_EQ(status_of([&] { omp.set_device(0); }), KNN_ERR_INTERNAL);
}

// The CUDA backend is its engine's: the devices the runtime reports (none in
// a build without CUDA, where every device operation says so) and the
// estimates of its memory model, with each argument in its place.
TEST(EnginesLinkAlone, TheCudaBackendIsItsEngines) {
  const knn::Backend& cuda = knn::cuda::cuda_backend();
  EXPECT_EQ(cuda.kind(), KNN_BACKEND_CUDA);
  EXPECT_EQ(cuda.device_count(), knn::cuda::device_count());
  namespace memory = knn::cuda::index_memory;
  for (int structure :
       {KNN_STRUCTURE_AUTO, KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
    EXPECT_EQ(cuda.index_build_bytes(structure, 100000, 3, 8),
              memory::build_bytes(structure, 100000, 3, 8));
    EXPECT_EQ(cuda.index_query_bytes(structure, 5000, 40, 100000, 3, 8),
              memory::query_bytes(structure, 5000, 40, 100000, 3, 8));
  }
  EXPECT_EQ(cuda.kdtree_query_bytes(5000, 40, 100000, 4, 16, 8),
            knn::cuda::kdtree_query_bytes(5000, 40, 100000, 4, 16, 8));
  EXPECT_EQ(cuda.classic_kdtree_query_bytes(5000, 40, 100000),
            memory::classic_kdtree_query_bytes(5000, 40, 100000));
  EXPECT_EQ(cuda.classic_grid_query_bytes(5000, 40, 100000),
            memory::classic_grid_query_bytes(5000, 40, 100000));
  EXPECT_GT(knn::cuda::mesh_build_bytes(1000, 2000, 4, true),
            knn::cuda::mesh_build_bytes(1000, 2000, 4, false));
  EXPECT_EQ(cuda.mesh_build_bytes(1000, 2000, 4),
            knn::cuda::mesh_build_bytes_either(1000, 2000, 4));
  if (knn::cuda::device_count() == 0) {
    EXPECT_EQ(cuda.current_device(), -1);
    EXPECT_EQ(status_of([&] { cuda.allocate(64); }), KNN_ERR_NO_DEVICE);
    EXPECT_EQ(status_of([&] { cuda.copy_stream(); }), KNN_ERR_NO_DEVICE);
    return;
  }
  cuda.set_device(0);
  EXPECT_EQ(cuda.current_device(), 0);
  const std::vector<float> points = random_points(3000, 10), queries = random_points(200, 11);
  const auto kdtree = cuda.build_kdtree_index(points.data(), 3000, kDim, params());
  EXPECT_EQ(kdtree->backend(), KNN_BACKEND_CUDA);
  EXPECT_EQ(knn_rows(*kdtree, queries), brute_force(points, queries));
  const std::unique_ptr<knn::DeviceAllocation> buffer =
      cuda.allocate(sizeof(float) * points.size());
  EXPECT_TRUE(cuda.is_device_pointer(buffer->get()));
  EXPECT_EQ(buffer->device(), 0);
  cuda.copy_to_device(buffer->get(), points.data(), sizeof(float) * points.size());
  std::vector<float> back(points.size());
  cuda.copy_to_host(back.data(), buffer->get(), sizeof(float) * back.size());
  EXPECT_EQ(back, points);
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
