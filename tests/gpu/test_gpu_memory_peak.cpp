// The memory helpers are upper bounds of what a real GPU call uses: while
// cuBuildKdTree / cuQueryAll run, a second thread samples the device's free
// memory; the drop below the level before the call must stay within
// getNeededBytesForBuildingKdTree / getNeededBytesForQueryAll.
// Skips with "no CUDA device" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "test_data.h"

namespace knn_test {
namespace {

// Runs `call` while sampling getFreeBytesOnGpu(); returns the largest drop
// below the free memory measured just before.
template <class Call>
size_t peak_device_use(Call call) {
  const size_t before = getFreeBytesOnGpu();
  std::atomic<bool> done{false};
  size_t lowest = before;
  std::thread sampler([&] {
    while (!done.load()) {
      lowest = std::min(lowest, getFreeBytesOnGpu());
      std::this_thread::yield();
    }
  });
  call();
  done = true;
  sampler.join();
  return before > lowest ? before - lowest : 0;
}

struct Case {
  Dist dist;
  int n, m, k;
};

class GpuMemoryPeak : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    unsetenv("KNN_DEVICE_MEMORY_LIMIT");
    unsetenv("KNN_CPU_SHARE");
  }
};

TEST_P(GpuMemoryPeak, WithinTheHelpers) {
  const Case c = GetParam();
  const std::vector<Point> points = make_points(c.dist, c.n, 71);
  const std::vector<Point> queries = make_query_points(c.dist, c.m, 72);
  std::vector<Node> tree(static_cast<size_t>(c.n));
  std::vector<int> result(static_cast<size_t>(c.m) * c.k);
  auto build = [&] {
    ASSERT_EQ(cuBuildKdTree(points.data(), c.n, tree.data()), KNN_OK) << knn_last_error();
  };
  auto query = [&] {
    ASSERT_EQ(cuQueryAll(queries.data(), tree.data(), c.m, c.n, c.k, result.data()), KNN_OK)
        << knn_last_error();
  };
  // Warm up: module loading and the kernels' local memory are the CUDA
  // context's, not the call's, and stay allocated afterwards.
  build();
  query();
  const size_t build_peak = peak_device_use(build);
  const size_t query_peak = peak_device_use(query);
  const size_t build_need = getNeededBytesForBuildingKdTree(c.n);
  const size_t query_need = getNeededBytesForQueryAll(c.m, c.k, c.n);
  EXPECT_LE(build_peak, build_need) << "cuBuildKdTree used more device memory than its helper says";
  EXPECT_LE(query_peak, query_need) << "cuQueryAll used more device memory than its helper says";
  std::printf("n %d m %d k %d: build peak %.1f MiB of %.1f; query peak %.1f MiB of %.1f\n", c.n,
              c.m, c.k, build_peak / 1048576.0, build_need / 1048576.0, query_peak / 1048576.0,
              query_need / 1048576.0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuMemoryPeak,
                         ::testing::Values(Case{Dist::Uniform, 1000, 1000, 8},
                                           Case{Dist::Uniform, 1000000, 1000000, 8},
                                           Case{Dist::Clustered, 3000000, 2000000, 100},
                                           Case{Dist::Uniform, 200000, 50000, 3000}));

// The index API's grid from host arrays (staged through the pipeline), with
// lists in registers (k = 8), binned rows (k = 100, and 255 with
// exclude_self: 256 entries, the largest rows) and warp lists (k = 300):
// what a query call takes beyond the resident index stays within
// knn_estimate_query_bytes for GRID.
TEST(GpuMemoryPeakIndex, GridCallsWithinTheEstimate) {
  if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  unsetenv("KNN_DEVICE_MEMORY_LIMIT");
  const int64_t n = 1000000, m = 1000000;
  const std::vector<float> points = make_rows(Dist::Uniform, n, 3, 73);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, m, 3, 74);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_CUDA;
  opt.structure = KNN_STRUCTURE_GRID;
  knn_index* index = nullptr;
  ASSERT_EQ(knn_index_build(points.data(), n, 3, &opt, &index), KNN_OK) << knn_last_error();
  int structure = -1;
  ASSERT_EQ(knn_index_info(index, nullptr, nullptr, nullptr, &structure), KNN_OK);
  ASSERT_EQ(structure, KNN_STRUCTURE_GRID);
  struct Call {
    int k;
    bool self;
  };
  for (const Call c : {Call{8, false}, Call{100, false}, Call{255, true}, Call{300, false}}) {
    std::vector<int32_t> indices(static_cast<size_t>(m) * c.k);
    std::vector<float> sq(indices.size());
    auto query = [&] {
      const int status =
          c.self ? knn_index_query_self(index, c.k, 1, indices.data(), sq.data())
                 : knn_index_query(index, queries.data(), m, c.k, indices.data(), sq.data(), &opt);
      ASSERT_EQ(status, KNN_OK) << knn_last_error();
    };
    query();  // warm-up: the context's own allocations stay
    const size_t peak = peak_device_use(query);
    const size_t need = knn_estimate_query_bytes(m, c.k, n, 3, &opt);
    EXPECT_LE(peak, need) << "k " << c.k;
    std::printf("grid index, n %lld m %lld k %d%s: query peak %.1f MiB of %.1f\n",
                static_cast<long long>(n), static_cast<long long>(m), c.k,
                c.self ? " (all-kNN, exclude_self)" : "", peak / 1048576.0, need / 1048576.0);
  }
  EXPECT_EQ(knn_index_free(index), KNN_OK);
}

}  // namespace
}  // namespace knn_test
