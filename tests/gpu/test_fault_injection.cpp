// Device allocation failures, forced: KNN_FAULT_DEVICE_ALLOC=N makes the N-th
// device allocation fail (cuda/core/cuda_support.h). For N = 1, 2, 3, ... until a
// call makes no allocation fail, every allocation site must give
// KNN_ERR_DEVICE_OUT_OF_MEMORY with missing values in the outputs (the CUDA
// calls) or the CPU path with the exact answer (the automatic calls), leak no
// device memory, and leave the library working. Also: a device memory limit
// smaller than one chunk, and a soak loop whose device memory stays flat.
// Skips with "no CUDA device" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

// Large enough for buildKdTree to choose the GPU (2^15 points and up).
constexpr int kPoints = 50000;
constexpr int kQueries = 20000;
constexpr int kK = 8;
// More allocations than any call makes: the walk must end well before.
constexpr int kMaxWalk = 500;

class FaultInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    unsetenv("KNN_FAULT_DEVICE_ALLOC");
    unsetenv("KNN_DEVICE_MEMORY_LIMIT");
    unsetenv("KNN_CPU_SHARE");
    points_ = make_points(Dist::Clustered, kPoints, 81);
    queries_ = make_query_points(Dist::Clustered, kQueries, 82);
    tree_ = build_tree(points_);
    expected_ = query_ok(&mpQueryAll, "mpQueryAll", queries_, tree_, kK);
    // Warm-up: the first kernel launches load modules and grow the context,
    // which takes device memory that is never given back.
    int status = -1;
    build_with(&cuBuildKdTree, points_, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    query_with(&cuQueryAll, queries_, tree_, kK, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    // Uniform points take the grid of the tree's points, whose kernels load
    // at their first call too.
    const std::vector<Point> uniform = make_points(Dist::Uniform, kPoints, 85);
    query_with(&cuQueryAll, make_query_points(Dist::Uniform, kQueries, 86), build_tree(uniform), kK,
               &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
  }
  void TearDown() override {
    unsetenv("KNN_FAULT_DEVICE_ALLOC");
    unsetenv("KNN_DEVICE_MEMORY_LIMIT");
  }

  std::vector<Point> points_, queries_;
  std::vector<Node> tree_;
  std::vector<int> expected_;
};

bool all_missing(const std::vector<int>& v) {
  for (int x : v)
    if (x != -1) return false;
  return true;
}
bool all_missing(const std::vector<Node>& tree) {
  for (const Node& node : tree)
    if (node.id != -1 || node.left != -1 || node.right != -1) return false;
  return true;
}

// Runs `call` with allocation N failing; returns its status, and checks that
// the device's free memory is the same after the call as before.
// The call's knn_last_error() text: read before getFreeBytesOnGpu() below,
// which, like every call, clears it.
std::string fault_message;

template <class Call>
int with_fault(int n, Call call) {
  // A fresh suffix re-arms the hook even for the N of the previous call
  // (the hook restarts its count whenever the variable's text changes).
  static int generation = 0;
  const size_t before = getFreeBytesOnGpu();
  const std::string setting = std::to_string(n) + "#" + std::to_string(++generation);
  setenv("KNN_FAULT_DEVICE_ALLOC", setting.c_str(), 1);
  const int status = call();
  fault_message = knn_last_error();
  unsetenv("KNN_FAULT_DEVICE_ALLOC");
  const size_t after = getFreeBytesOnGpu();
  EXPECT_EQ(after, before) << "allocation " << n << " failing: " << status_text(status)
                           << "; device memory leaked (" << before << " free before, " << after
                           << " after)";
  return status;
}

// Walks N = 1, 2, ... over a CUDA-only call until it succeeds; every failure
// must be the injected one, with missing outputs. Returns the N that passed.
template <class Call, class Missing>
int walk_cuda_call(const char* name, Call call, Missing outputs_missing) {
  for (int n = 1; n <= kMaxWalk; ++n) {
    const int status = with_fault(n, call);
    if (status == KNN_OK) return n;
    EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY)
        << name << " allocation " << n << ": " << status_text(status);
    EXPECT_NE(fault_message.find("fault injection"), std::string::npos)
        << name << ": " << fault_message;
    EXPECT_TRUE(outputs_missing()) << name << " allocation " << n << ": outputs half-written";
    if (::testing::Test::HasFailure()) return n;
  }
  ADD_FAILURE() << name << " still fails after " << kMaxWalk << " injected faults";
  return kMaxWalk;
}

TEST_F(FaultInjection, BuildOnDeviceFailsCleanlyAtEveryAllocation) {
  std::vector<Node> tree;
  const int passed = walk_cuda_call(
      "cuBuildKdTree",
      [&] {
        tree = sentinel_tree(points_.size());
        return cuBuildKdTree(points_.data(), kPoints, tree.data());
      },
      [&] { return all_missing(tree); });
  EXPECT_GT(passed, 1) << "cuBuildKdTree made no device allocation";
  EXPECT_TRUE(same_tree_bytes(tree_, tree));
  // buildKdTree builds on the CPU when the device runs out: same tree.
  for (int n = 1; n <= passed; ++n) {
    std::vector<Node> autobuilt = sentinel_tree(points_.size());
    const int status =
        with_fault(n, [&] { return buildKdTree(points_.data(), kPoints, autobuilt.data()); });
    ASSERT_EQ(status, KNN_OK) << "buildKdTree, allocation " << n << ": " << status_text(status);
    ASSERT_TRUE(same_tree_bytes(tree_, autobuilt)) << "allocation " << n;
  }
}

// Walks every device allocation of cuQueryAll over these queries and tree
// (clean failures until it succeeds), then fails each of them under queryAll,
// which never fails for lack of device memory: the CPU answers.
void walk_query_calls(const std::vector<Point>& queries, const std::vector<Node>& tree,
                      const std::vector<int>& expected, int k = kK) {
  const int m = static_cast<int>(queries.size()), n = static_cast<int>(tree.size());
  std::vector<int> result;
  const int passed = walk_cuda_call(
      "cuQueryAll",
      [&] {
        result.assign(expected.size(), kSentinelInt);
        return cuQueryAll(queries.data(), tree.data(), m, n, k, result.data());
      },
      [&] { return all_missing(result); });
  EXPECT_GT(passed, 1) << "cuQueryAll made no device allocation";
  EXPECT_TRUE(same_rows(expected, result, m, k));
  for (int nth = 1; nth <= passed; ++nth) {
    std::vector<int> automatic(expected.size(), kSentinelInt);
    const int status = with_fault(
        nth, [&] { return queryAll(queries.data(), tree.data(), m, n, k, automatic.data()); });
    ASSERT_EQ(status, KNN_OK) << "queryAll, allocation " << nth << ": " << status_text(status);
    ASSERT_TRUE(same_rows(expected, automatic, m, k)) << "allocation " << nth;
  }
}

// The fixture's clustered points.
TEST_F(FaultInjection, QueryOnDeviceFailsCleanlyAtEveryAllocation) {
  walk_query_calls(queries_, tree_, expected_);
}

// Uniform points make a good grid: cuQueryAll answers on the grid of the
// tree's points (src/query_planner.cpp), whose allocations are walked here.
TEST_F(FaultInjection, QueryOnTheGridOfTheTreesPointsFailsCleanlyAtEveryAllocation) {
  const std::vector<Point> points = make_points(Dist::Uniform, kPoints, 83);
  const std::vector<Node> tree = build_tree(points);
  const std::vector<Point> queries = make_query_points(Dist::Uniform, kQueries, 84);
  walk_query_calls(queries, tree, query_ok(&mpQueryAll, "mpQueryAll", queries, tree, kK));
}

// The same grid with lists of 30: binned rows (cuda/core/binned_rows.cuh),
// whose kernels load at their first call (the warm-up here).
TEST_F(FaultInjection, QueryOnTheGridWithBinnedRowsFailsCleanlyAtEveryAllocation) {
  constexpr int k = 30;
  const std::vector<Point> points = make_points(Dist::Uniform, kPoints, 87);
  const std::vector<Node> tree = build_tree(points);
  const std::vector<Point> queries = make_query_points(Dist::Uniform, kQueries, 88);
  int status = -1;
  query_with(&cuQueryAll, queries, tree, k, &status);
  ASSERT_EQ(status, KNN_OK) << status_text(status);
  walk_query_calls(queries, tree, query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k), k);
}

TEST_F(FaultInjection, MemoryLimitBelowOneChunk) {
  setenv("KNN_DEVICE_MEMORY_LIMIT", "4096", 1);
  int status = -1;
  const std::vector<int> automatic = query_with(&queryAll, queries_, tree_, kK, &status);
  EXPECT_EQ(status, KNN_OK) << status_text(status);
  EXPECT_TRUE(same_rows(expected_, automatic, kQueries, kK));
  const std::vector<int> on_device = query_with(&cuQueryAll, queries_, tree_, kK, &status);
  EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY) << status_text(status);
  EXPECT_TRUE(all_missing(on_device));
  const std::vector<Node> built = build_with(&buildKdTree, points_, &status);
  EXPECT_EQ(status, KNN_OK) << status_text(status);
  EXPECT_TRUE(same_tree_bytes(tree_, built));
  unsetenv("KNN_DEVICE_MEMORY_LIMIT");
  // And without the limit the device answers again.
  const std::vector<int> again = query_with(&cuQueryAll, queries_, tree_, kK, &status);
  EXPECT_EQ(status, KNN_OK) << status_text(status);
  EXPECT_TRUE(same_rows(expected_, again, kQueries, kK));
}

// A KNN_DEVICE_MEMORY_LIMIT that is no number of bytes is refused, not read
// as another limit ("8G" was 8 bytes, which sent queryAll to the CPU and
// failed cuQueryAll for memory); the classic build reads it too.
TEST_F(FaultInjection, MalformedMemoryLimitIsRefused) {
  setenv("KNN_DEVICE_MEMORY_LIMIT", "8G", 1);
  for (auto [query, name] : {std::pair<QueryFn, const char*>{&queryAll, "queryAll"},
                             std::pair<QueryFn, const char*>{&cuQueryAll, "cuQueryAll"}}) {
    int status = -1;
    query_with(query, queries_, tree_, kK, &status);
    EXPECT_EQ(status, KNN_ERR_INVALID_ARGUMENT) << name << ": " << status_text(status);
    EXPECT_NE(std::string(knn_last_error()).find("KNN_DEVICE_MEMORY_LIMIT is \"8G\""),
              std::string::npos)
        << name << ": " << knn_last_error();
  }
  int status = -1;
  build_with(&buildKdTree, points_, &status);
  EXPECT_EQ(status, KNN_ERR_INVALID_ARGUMENT) << status_text(status);
  setenv("KNN_DEVICE_MEMORY_LIMIT", "0", 1);  // no limit, as device_memory_limit = 0
  EXPECT_TRUE(
      same_rows(expected_, query_with(&cuQueryAll, queries_, tree_, kK, &status), kQueries, kK));
  EXPECT_EQ(status, KNN_OK) << status_text(status);
  unsetenv("KNN_DEVICE_MEMORY_LIMIT");
}

// Many calls in a row, on every path: the device's free memory must come
// back to where it started.
TEST_F(FaultInjection, SoakLeavesDeviceMemoryFlat) {
  const char* seconds_text = std::getenv("KNN_STRESS_SECONDS");
  const int rounds = seconds_text ? 10 * std::max(1, std::atoi(seconds_text)) : 20;
  const size_t before = getFreeBytesOnGpu();
  for (int r = 0; r < rounds; ++r) {
    int status = -1;
    const std::vector<Node> built =
        build_with(r % 2 ? &cuBuildKdTree : &buildKdTree, points_, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    ASSERT_TRUE(same_tree_bytes(tree_, built));
    const std::vector<int> result =
        query_with(r % 2 ? &cuQueryAll : &queryAll, queries_, tree_, kK, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    ASSERT_TRUE(same_rows(expected_, result, kQueries, kK));
    // A failing call in between must not leak either.
    std::vector<int> bad(4);
    ASSERT_EQ(cuQueryAll(queries_.data(), tree_.data(), 1, kPoints, 0, bad.data()),
              KNN_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(getFreeBytesOnGpu(), before)
      << "device memory is not flat after " << rounds << " rounds";
}

}  // namespace
}  // namespace knn_test
