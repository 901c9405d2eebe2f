// Cancellation (knn_set_cancel_flag): a flag set before a call stops it at
// once, a flag set by another thread during a long call stops it soon, and
// either way the outputs hold the missing values; a flag left at 0 changes
// nothing; NULL unregisters; the call after a cancel works.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "classic_helpers.h"
#include "oracle.h"
#include "test_data.h"

namespace {

using namespace knn_test;
using Clock = std::chrono::steady_clock;

// Registers `flag` for the calling thread for the scope's duration, so that
// a failing assertion never leaves a dangling flag registered.
class CancelScope {
 public:
  explicit CancelScope(const volatile int* flag) { EXPECT_EQ(knn_set_cancel_flag(flag), KNN_OK); }
  ~CancelScope() { knn_set_cancel_flag(nullptr); }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;
};

// The host's side of the flag's contract (knn_gpgpu.h): another thread sets
// it with an atomic store, which the library's atomic load pairs with (a
// plain store would be a data race, and TSan reports it).
void raise_from_another_thread(volatile int& flag) {
#if defined(__GNUC__) || defined(__clang__)
  __atomic_store_n(&flag, 1, __ATOMIC_RELAXED);
#else
  flag = 1;  // MSVC: a volatile store, as the header allows
#endif
}

// Runs `call` under `flag` with another thread raising the flag 10 ms after
// the call began; returns the call's status and how long the call went on
// after the flag was raised (seconds).
struct LateCancel {
  int status = -1;
  double lag_seconds = 0;
};
LateCancel cancel_10ms_into(volatile int& flag, const std::function<int()>& call) {
  flag = 0;
  std::atomic<bool> started{false};
  Clock::time_point set_at;
  std::thread canceller([&] {
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    set_at = Clock::now();
    raise_from_another_thread(flag);
  });
  LateCancel result;
  {
    CancelScope scope(&flag);
    started = true;
    result.status = call();
  }
  const Clock::time_point returned = Clock::now();
  canceller.join();
  result.lag_seconds = std::chrono::duration<double>(returned - set_at).count();
  return result;
}

bool all_missing(const std::vector<int>& result) {
  for (int v : result)
    if (v != -1) return false;
  return true;
}

bool all_missing(const std::vector<Node>& tree) {
  for (const Node& node : tree)
    if (node.id != -1 || node.left != -1 || node.right != -1 || !std::isinf(node.p[0]))
      return false;
  return true;
}

// The engines that answer in this build: the CPU always, CUDA and the
// planner's automatic choice too (which are the CPU here without a device).
struct QueryEngine {
  const char* name;
  QueryFn fn;
};
const QueryEngine kQueryEngines[] = {{"mpQueryAll", &mpQueryAll}, {"queryAll", &queryAll}};

TEST(Cancel, FlagSetBeforeQueryCancelsAndFillsMissing) {
  const std::vector<Point> points = make_points(Dist::Uniform, 3001, 11);
  const std::vector<Point> queries = make_query_points(Dist::Uniform, 777, 12);
  const std::vector<Node> tree = build_tree(points);
  volatile int flag = 1;
  CancelScope scope(&flag);
  for (const QueryEngine& engine : kQueryEngines) {
    int status = -1;
    const std::vector<int> result = query_with(engine.fn, queries, tree, 5, &status);
    EXPECT_EQ(status, KNN_ERR_CANCELLED) << engine.name << ": " << status_text(status);
    EXPECT_NE(std::string(knn_last_error()).find("cancel"), std::string::npos) << knn_last_error();
    EXPECT_TRUE(all_missing(result)) << engine.name << ": a cancelled call writes -1 everywhere";
  }
}

TEST(Cancel, FlagSetBeforeBuildCancelsAndFillsMissing) {
  const std::vector<Point> points = make_points(Dist::Clustered, 40000, 13);
  volatile int flag = 1;
  CancelScope scope(&flag);
  for (BuildFn fn : {&mpBuildKdTree, &buildKdTree}) {
    int status = -1;
    const std::vector<Node> tree = build_with(fn, points, &status);
    EXPECT_EQ(status, KNN_ERR_CANCELLED) << status_text(status);
    EXPECT_TRUE(all_missing(tree)) << "a cancelled build writes missing nodes everywhere";
  }
}

TEST(Cancel, ValidationComesFirstAndLeavesOutputsUntouched) {
  // A bad argument is reported as such even with the flag set, and a failed
  // validation writes nothing.
  const std::vector<Point> queries = make_query_points(Dist::Uniform, 10, 14);
  const std::vector<Node> tree = build_tree(make_points(Dist::Uniform, 100, 15));
  volatile int flag = 1;
  CancelScope scope(&flag);
  std::vector<int> result(10 * 3, kSentinelInt);
  EXPECT_EQ(mpQueryAll(queries.data(), tree.data(), 10, 100, 0, result.data()),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(result, std::vector<int>(30, kSentinelInt));
}

TEST(Cancel, ZeroFlagGivesTheNormalResult) {
  const std::vector<Point> points = make_points(Dist::Duplicates, 2049, 16);
  const std::vector<Point> queries = make_query_points(Dist::Duplicates, 513, 17);
  const std::vector<Node> tree = build_tree(points);
  const int k = 7;
  const KnnResult expected = oracle_knn(points, queries, k);
  volatile int flag = 0;
  CancelScope scope(&flag);
  for (const QueryEngine& engine : kQueryEngines) {
    const std::vector<int> result = query_ok(engine.fn, engine.name, queries, tree, k);
    EXPECT_TRUE(same_rows(expected.idx, result, static_cast<int64_t>(queries.size()), k))
        << engine.name;
  }
  int status = -1;
  const std::vector<Node> rebuilt = build_with(&mpBuildKdTree, points, &status);
  EXPECT_EQ(status, KNN_OK) << status_text(status);
  EXPECT_TRUE(same_tree_bytes(tree, rebuilt));
}

TEST(Cancel, NullUnregistersAndTheNextCallWorks) {
  const std::vector<Point> points = make_points(Dist::Grid, 999, 18);
  const std::vector<Point> queries = make_query_points(Dist::Grid, 100, 19);
  const std::vector<Node> tree = build_tree(points);
  const KnnResult expected = oracle_knn(points, queries, 4);
  volatile int flag = 1;
  {
    CancelScope scope(&flag);
    int status = -1;
    query_with(&mpQueryAll, queries, tree, 4, &status);
    ASSERT_EQ(status, KNN_ERR_CANCELLED) << status_text(status);
  }  // unregistered here, with the flag still set
  const std::vector<int> result = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, 4);
  EXPECT_TRUE(same_rows(expected.idx, result, 100, 4));
  EXPECT_STREQ(knn_last_error(), "");
}

TEST(Cancel, FlagIsPerThread) {
  // A flag registered on this thread does not cancel another thread's calls.
  const std::vector<Point> points = make_points(Dist::Uniform, 500, 20);
  const std::vector<Node> tree = build_tree(points);
  volatile int flag = 1;
  CancelScope scope(&flag);
  int other_status = -1;
  std::thread other([&] {
    std::vector<int> result(points.size() * 2);
    other_status = mpQueryAll(points.data(), tree.data(), 500, 500, 2, result.data());
  });
  other.join();
  EXPECT_EQ(other_status, KNN_OK) << status_text(other_status);
}

// The flag is raised once the call's progress record shows it has started
// (a sleep would race with a fast machine: since ties are pruned by index,
// no input makes this call slow by itself); 2^20 uniform queries leave most
// of the work to be cut short.
TEST(Cancel, FlagSetDuringLongQueryStopsIt) {
  const int n = 200000;
  const int m = 1 << 20;
  const std::vector<Point> points = make_points(Dist::Uniform, n, 21);
  const std::vector<Point> queries = make_points(Dist::Uniform, m, 22);
  const std::vector<Node> tree = build_tree(points);
  volatile int flag = 0;
  knn_progress progress{};
  Clock::time_point set_at;
  std::thread canceller([&] {
    while (__atomic_load_n(&progress.done, __ATOMIC_ACQUIRE) == 0) std::this_thread::yield();
    set_at = Clock::now();
    raise_from_another_thread(flag);
  });
  std::vector<int> result(static_cast<size_t>(m) * 4, kSentinelInt);
  int status = -1;
  {
    CancelScope scope(&flag);
    ASSERT_EQ(knn_set_progress(&progress), KNN_OK);
    status = mpQueryAll(queries.data(), tree.data(), m, n, 4, result.data());
    knn_set_progress(nullptr);
  }
  const Clock::time_point returned = Clock::now();
  canceller.join();
  ASSERT_EQ(status, KNN_ERR_CANCELLED)
      << status_text(status) << " (the call finished before the flag was seen)";
  const double lag = std::chrono::duration<double>(returned - set_at).count();
  EXPECT_LT(lag, 2.0) << "the call went on for " << lag << " s after the flag was set";
  EXPECT_TRUE(all_missing(result));

  // The library is usable at once, with the same flag reset.
  flag = 0;
  CancelScope scope(&flag);
  std::vector<int> small(8 * 2, kSentinelInt);
  EXPECT_EQ(mpQueryAll(queries.data(), tree.data(), 8, n, 2, small.data()), KNN_OK);
  const std::vector<Point> first(queries.begin(), queries.begin() + 8);
  EXPECT_EQ(small, oracle_knn(points, first, 2).idx);
}

// 2^22 points: the root's median selection alone takes tens of
// milliseconds, so a flag set 10 ms into the call finds the build running,
// and it stops before its next large subtree.
TEST(Cancel, FlagSetDuringLongBuildStopsIt) {
  const int n = 1 << 22;
  std::vector<Point> points(static_cast<size_t>(n));
  Rng rng(23);
  for (Point& p : points)
    for (float& c : p.p) c = static_cast<float>(rng.uniform());
  std::vector<Node> tree = sentinel_tree(points.size());
  volatile int flag = 0;
  const LateCancel run =
      cancel_10ms_into(flag, [&] { return mpBuildKdTree(points.data(), n, tree.data()); });
  ASSERT_EQ(run.status, KNN_ERR_CANCELLED)
      << status_text(run.status) << " (the build finished before the flag was set)";
  EXPECT_LT(run.lag_seconds, 2.0) << "the build went on for " << run.lag_seconds
                                  << " s after the flag was set";
  EXPECT_TRUE(all_missing(tree));
}

// The OpenMP index kd-tree's build: a flag set before the call stops it at
// once; a flag set while it runs (4 * 2^20 points in buckets of one: a long
// build) stops it before its next large subtree. Either way no index comes
// back, and the next build works.
TEST(Cancel, IndexKdTreeBuildStopsOnTheFlag) {
  const int dim = 3;
  const int64_t n = int64_t{1} << 22;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 29);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = KNN_STRUCTURE_KDTREE;
  opt.leaf_size = 1;
  volatile int flag = 1;
  knn_index* index = nullptr;
  {
    CancelScope scope(&flag);
    EXPECT_EQ(knn_index_build(points.data(), 1000, dim, &opt, &index), KNN_ERR_CANCELLED);
    EXPECT_EQ(index, nullptr);
  }
  const LateCancel run =
      cancel_10ms_into(flag, [&] { return knn_index_build(points.data(), n, dim, &opt, &index); });
  ASSERT_EQ(run.status, KNN_ERR_CANCELLED)
      << status_text(run.status) << " (the build finished before the flag was set)";
  EXPECT_EQ(index, nullptr);
  EXPECT_LT(run.lag_seconds, 2.0) << "the build went on for " << run.lag_seconds
                                  << " s after the flag was set";
  // Unaffected afterwards.
  ASSERT_EQ(knn_index_build(points.data(), 5000, dim, &opt, &index), KNN_OK) << knn_last_error();
  EXPECT_EQ(knn_index_free(index), KNN_OK);
}

}  // namespace
