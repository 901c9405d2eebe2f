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

}  // namespace
}  // namespace knn_test
