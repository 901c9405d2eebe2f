// The CUDA engine against the OpenMP engine (itself checked against the
// oracle in the CPU tests): byte-identical trees, identical query results on
// every path queryAll can take (chunks, tree split, CPU share, CPU fallback),
// honest memory helpers, and host threads sharing one tree.
//
// Every test skips with "no CUDA device" where cuGetDeviceCount() is 0, and
// fails loudly on any difference where there is a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"
#include "timing.h"

namespace knn_test {
namespace {

const char* const kLimitVar = "KNN_DEVICE_MEMORY_LIMIT";
const char* const kCpuShareVar = "KNN_CPU_SHARE";

// Sets an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ScopedEnv(const char* name, size_t bytes) : ScopedEnv(name, std::to_string(bytes)) {}
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

void clear_planner_environment() {
  unsetenv(kLimitVar);
  unsetenv(kCpuShareVar);
}

#define SKIP_WITHOUT_DEVICE()                                      \
  do {                                                             \
    if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"; \
    clear_planner_environment();                                   \
  } while (0)

std::string mib(size_t bytes) { return std::to_string(bytes / (1024.0 * 1024.0)) + " MiB"; }

// Queries for a tree: separate ones plus every `stride`-th point (queries ==
// points), `m` in all.
std::vector<Point> mixed_queries(Dist dist, const std::vector<Point>& points, int m,
                                 uint64_t seed) {
  const int from_points = points.empty() ? 0 : m / 2;
  std::vector<Point> q = make_query_points(dist, m - from_points, seed);
  Rng rng(seed + 3);
  for (int i = 0; i < from_points; ++i) q.push_back(points[rng.below(points.size())]);
  return q;
}

// ---- Builds ---------------------------------------------------------------------------

class GpuBuild : public ::testing::TestWithParam<Dist> {
 protected:
  void SetUp() override { SKIP_WITHOUT_DEVICE(); }
};

TEST_P(GpuBuild, ByteIdenticalToCpuBuild) {
  const Dist dist = GetParam();
  const int sizes[] = {0, 1, 2, 3, 7, 1000, 4097, 100003, 1 << 20};
  for (uint64_t seed : {1u, 2u, 3u})
    for (int n : sizes) {
      if (n == (1 << 20) && seed > 1) continue;
      const uint64_t data_seed = seed * 7919 + n;
      SCOPED_TRACE(describe(dist, n, 0, 0, data_seed));
      const std::vector<Point> points = make_points(dist, n, data_seed);
      int status = -1;
      const std::vector<Node> cpu = build_with(&mpBuildKdTree, points, &status);
      ASSERT_EQ(status, KNN_OK) << "mpBuildKdTree: " << status_text(status);
      const std::vector<Node> gpu = build_with(&cuBuildKdTree, points, &status);
      ASSERT_EQ(status, KNN_OK) << "cuBuildKdTree: " << status_text(status);
      ASSERT_TRUE(same_tree_bytes(cpu, gpu)) << "cuBuildKdTree vs mpBuildKdTree";
      ASSERT_TRUE(tree_invariants_hold(points, gpu.data()));
      const std::vector<Node> automatic = build_with(&buildKdTree, points, &status);
      ASSERT_EQ(status, KNN_OK) << "buildKdTree: " << status_text(status);
      ASSERT_TRUE(same_tree_bytes(cpu, automatic)) << "buildKdTree vs mpBuildKdTree";
    }
}

TEST_P(GpuBuild, AutomaticBuildUnderAMemoryLimitFallsBackIdentically) {
  const Dist dist = GetParam();
  const int n = 300000;
  const std::vector<Point> points = make_points(dist, n, 17);
  const std::vector<Node> cpu = build_tree(points);
  for (size_t limit : {getNeededBytesForBuildingKdTree(n), getNeededBytesForBuildingKdTree(n) / 3,
                       size_t{1} << 20}) {
    SCOPED_TRACE(describe(dist, n, 0, 0, 17) + " limit " + mib(limit));
    ScopedEnv env(kLimitVar, limit);
    int status = -1;
    const std::vector<Node> tree = build_with(&buildKdTree, points, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    ASSERT_TRUE(same_tree_bytes(cpu, tree));
  }
}

// ---- Queries ---------------------------------------------------------------------------

class GpuQuery : public ::testing::TestWithParam<Dist> {
 protected:
  void SetUp() override { SKIP_WITHOUT_DEVICE(); }
};

bool many_ties(Dist d) {
  return d == Dist::Identical || d == Dist::Duplicates || d == Dist::Line ||
         d == Dist::SignedZero || d == Dist::Huge;
}

TEST_P(GpuQuery, CuQueryAllAndQueryAllIdenticalToCpu) {
  const Dist dist = GetParam();
  const int ks[] = {1, 2, 3, 5, 8, 16, 31, 32, 33, 64, 100, 1024};
  for (int n : {0, 1, 2, 3, 7, 1000, 100003}) {
    const uint64_t seed = 31337 + n;
    const std::vector<Point> points = make_points(dist, n, seed);
    const std::vector<Node> tree = build_tree(points);
    for (int k : ks) {
      // Keep the CPU reference affordable: fewer queries for large k and
      // for data where every query ties with thousands of points.
      int m = k >= 256 ? 1000 : 10000;
      if (n > 10000 && many_ties(dist)) m = k >= 256 ? 200 : 1000;
      const std::vector<Point> queries = mixed_queries(dist, points, m, seed + k);
      SCOPED_TRACE(describe(dist, n, m, k, seed + k));
      const std::vector<int> cpu = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k);
      const std::vector<int> gpu = query_ok(&cuQueryAll, "cuQueryAll", queries, tree, k);
      ASSERT_TRUE(same_rows(cpu, gpu, m, k)) << "cuQueryAll vs mpQueryAll";
      const std::vector<int> automatic = query_ok(&queryAll, "queryAll", queries, tree, k);
      ASSERT_TRUE(same_rows(cpu, automatic, m, k)) << "queryAll vs mpQueryAll";
    }
  }
}

TEST_P(GpuQuery, MillionPointsMillionQueries) {
  const Dist dist = GetParam();
  if (many_ties(dist) || dist == Dist::Grid)
    GTEST_SKIP() << "covered at smaller sizes; the CPU reference is too slow with this many ties";
  const int n = 1 << 20, m = 1 << 20, k = 8;
  const std::vector<Point> points = make_points(dist, n, 5);
  const std::vector<Node> tree = build_tree(points);
  const std::vector<Point> queries = mixed_queries(dist, points, m, 6);
  SCOPED_TRACE(describe(dist, n, m, k, 5));
  const std::vector<int> cpu = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k);
  ASSERT_TRUE(same_rows(cpu, query_ok(&cuQueryAll, "cuQueryAll", queries, tree, k), m, k));
  ASSERT_TRUE(same_rows(cpu, query_ok(&queryAll, "queryAll", queries, tree, k), m, k));
}

// Short lists with about as many queries as points: the planner answers
// them on the grid of the tree's points (src/query_planner.cpp) where the
// points make a good grid, else on the tree. Either way the rows are the
// CPU's, on every distribution.
TEST_P(GpuQuery, ShortListsOnTheGridOfTheTreesPoints) {
  const Dist dist = GetParam();
  const int n = many_ties(dist) ? 20000 : 80000;
  const int m = many_ties(dist) ? 5000 : n;
  const std::vector<Point> points = make_points(dist, n, 91);
  const std::vector<Node> tree = build_tree(points);
  for (int k : {1, 4, 8, 16, 17, 31, 32}) {
    const std::vector<Point> queries = mixed_queries(dist, points, m, 92 + k);
    SCOPED_TRACE(describe(dist, n, m, k, 92 + k));
    const std::vector<int> cpu = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k);
    ASSERT_TRUE(same_rows(cpu, query_ok(&cuQueryAll, "cuQueryAll", queries, tree, k), m, k))
        << "cuQueryAll vs mpQueryAll";
    ASSERT_TRUE(same_rows(cpu, query_ok(&queryAll, "queryAll", queries, tree, k), m, k))
        << "queryAll vs mpQueryAll";
  }
}

// All points equal: every squared distance is 0, so every row is the k
// smallest indices (ties go to the smaller index), and a search that
// pruned only on distance would visit every node for every query (O(n) a
// query). The tree search skips a tied subtree whose least id cannot beat
// the k-th (TreeView::min_ids), so these queries cost about what queries
// among distinct points do: the ratio bounds it far below n.
TEST(GpuQueryTies, AllEqualPointsCostAboutWhatDistinctPointsDo) {
  SKIP_WITHOUT_DEVICE();
  const int n = 1 << 18, m = 1 << 16;
  const std::vector<Point> equal = make_points(Dist::Identical, n, 95);
  const std::vector<Point> distinct = make_points(Dist::Uniform, n, 96);
  const std::vector<Node> equal_tree = build_tree(equal);
  const std::vector<Node> distinct_tree = build_tree(distinct);
  const std::vector<Point> at_the_point(m, equal[0]);
  const std::vector<Point> among_distinct(distinct.begin(), distinct.begin() + m);
  for (const int k : {1, 8, 16, 33}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    std::vector<int> rows;
    const double tied = median_seconds(
        3, [&] { rows = query_ok(&cuQueryAll, "cuQueryAll", at_the_point, equal_tree, k); });
    const double untied = median_seconds(
        3, [&] { query_ok(&cuQueryAll, "cuQueryAll", among_distinct, distinct_tree, k); });
    std::vector<int> want;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < k; ++j) want.push_back(j);
    EXPECT_EQ(rows, want);
    EXPECT_LT(tied, 20.0 * untied + 0.05) << "all equal " << tied << " s, distinct " << untied;
  }
}

// Queries away from a plane of points: a few of them (the grid answers and
// scans every point for those) or all of them (the tree answers instead).
TEST(GpuQueryPlacement, QueriesOffAPlaneOfPoints) {
  SKIP_WITHOUT_DEVICE();
  const int n = 150000, m = 60000, k = 8;
  const std::vector<Point> points = make_points(Dist::Plane, n, 93);
  const std::vector<Node> tree = build_tree(points);
  for (int every : {1, 50}) {
    std::vector<Point> queries = make_query_points(Dist::Uniform, m, 94 + every);
    for (int i = 0; i < m; ++i) queries[i].p[2] = i % every == 0 ? 3.0f - queries[i].p[2] : 0.25f;
    SCOPED_TRACE("1 query in " + std::to_string(every) + " off the plane");
    const std::vector<int> cpu = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k);
    ASSERT_TRUE(same_rows(cpu, query_ok(&cuQueryAll, "cuQueryAll", queries, tree, k), m, k))
        << "cuQueryAll vs mpQueryAll";
    ASSERT_TRUE(same_rows(cpu, query_ok(&queryAll, "queryAll", queries, tree, k), m, k))
        << "queryAll vs mpQueryAll";
  }
}

INSTANTIATE_TEST_SUITE_P(AllDistributions, GpuBuild, ::testing::ValuesIn(all_dists()), DistName());
INSTANTIATE_TEST_SUITE_P(AllDistributions, GpuQuery, ::testing::ValuesIn(all_dists()), DistName());

// ---- queryAll's forced paths ----------------------------------------------------------------

class GpuPaths : public ::testing::Test {
 protected:
  void SetUp() override { SKIP_WITHOUT_DEVICE(); }

  void prepare(Dist dist, int n, int m, uint64_t seed) {
    points_ = make_points(dist, n, seed);
    tree_ = build_tree(points_);
    queries_ = mixed_queries(dist, points_, m, seed + 1);
  }
  std::vector<int> cpu(int k) { return query_ok(&mpQueryAll, "mpQueryAll", queries_, tree_, k); }
  int m() const { return static_cast<int>(queries_.size()); }
  int n() const { return static_cast<int>(tree_.size()); }

  std::vector<Point> points_, queries_;
  std::vector<Node> tree_;
};

TEST_F(GpuPaths, ManyQueryChunks) {
  prepare(Dist::Clustered, 200000, 600000, 41);
  for (int k : {1, 8, 33}) {
    const std::vector<int> want = cpu(k);
    const size_t needed = getNeededBytesForQueryAll(m(), k, n());
    size_t limit = needed / 4;
    if (limit <= getTreeSize(n())) limit = getTreeSize(n()) + (needed - getTreeSize(n())) / 4;
    for (const char* share : {"0", "1"}) {
      SCOPED_TRACE("k " + std::to_string(k) + " limit " + mib(limit) + " of " + mib(needed) +
                   " KNN_CPU_SHARE=" + share);
      ScopedEnv limit_env(kLimitVar, limit);
      ScopedEnv share_env(kCpuShareVar, share);
      ASSERT_TRUE(same_rows(want, query_ok(&queryAll, "queryAll", queries_, tree_, k), m(), k));
    }
  }
}

TEST_F(GpuPaths, TreeSplitAtManyLimits) {
  prepare(Dist::Uniform, 300000, 20000, 43);
  for (int k : {1, 8, 100}) {
    const std::vector<int> want = cpu(k);
    const size_t needed = getNeededBytesForQueryAll(m(), k, n());
    // Limits from just below the whole call down to far below the tree: which
    // ones split the tree, chunk, or fall back to the CPU is the planner's
    // business; every one must give the same answer.
    std::vector<size_t> limits = {size_t{3} << 20, getTreeSize(n()) / 2, getTreeSize(n())};
    for (double f : {0.97, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2})
      limits.push_back(static_cast<size_t>(f * static_cast<double>(needed)));
    for (size_t limit : limits)
      for (const char* share : {"0", "1"}) {
        SCOPED_TRACE("k " + std::to_string(k) + " limit " + mib(limit) + " of " + mib(needed) +
                     " KNN_CPU_SHARE=" + share);
        ScopedEnv limit_env(kLimitVar, limit);
        ScopedEnv share_env(kCpuShareVar, share);
        ASSERT_TRUE(same_rows(want, query_ok(&queryAll, "queryAll", queries_, tree_, k), m(), k));
      }
  }
}

TEST_F(GpuPaths, CpuShareOnAndOff) {
  prepare(Dist::Uniform, 100003, 300000, 47);
  for (int k : {1, 16, 100}) {
    const std::vector<int> want = cpu(k);
    for (const char* share : {"1", "0"}) {
      SCOPED_TRACE("k " + std::to_string(k) + " KNN_CPU_SHARE=" + share);
      ScopedEnv share_env(kCpuShareVar, share);
      ASSERT_TRUE(same_rows(want, query_ok(&queryAll, "queryAll", queries_, tree_, k), m(), k));
    }
  }
}

TEST_F(GpuPaths, CuQueryAllBelowTheTreeFailsThenRecovers) {
  prepare(Dist::Uniform, 300000, 5000, 53);
  const int k = 8;
  const std::vector<int> want = cpu(k);
  {
    ScopedEnv limit_env(kLimitVar, getTreeSize(n()) / 4);
    int status = -1;
    const std::vector<int> got = query_with(&cuQueryAll, queries_, tree_, k, &status);
    EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY) << status_text(status);
    EXPECT_STRNE(knn_last_error(), "");
    const bool untouched = got == std::vector<int>(got.size(), kSentinelInt);
    const bool all_missing = got == std::vector<int>(got.size(), -1);
    EXPECT_TRUE(untouched || all_missing) << "a failed call leaves the result untouched or all -1";
    // queryAll never fails for lack of device memory.
    ASSERT_TRUE(same_rows(want, query_ok(&queryAll, "queryAll", queries_, tree_, k), m(), k));
  }
  ASSERT_TRUE(same_rows(want, query_ok(&cuQueryAll, "cuQueryAll", queries_, tree_, k), m(), k))
      << "the call after a DEVICE_OUT_OF_MEMORY";
  EXPECT_STREQ(knn_last_error(), "");
}

TEST_F(GpuPaths, MemoryHelperIsHonest) {
  struct Case {
    Dist dist;
    int n, m, k;
  };
  const Case cases[] = {
      {Dist::Uniform, 1000, 1000, 1},          {Dist::Clustered, 300000, 100000, 8},
      {Dist::Grid, 100003, 20000, 100},        {Dist::Uniform, 50000, 3000, 1024},
      {Dist::Uniform, 1000, (1 << 21) + 5, 4}, {Dist::Duplicates, 4097, 7, 33}};
  for (const Case& c : cases) {
    prepare(c.dist, c.n, c.m, 59 + c.k);
    const std::vector<int> want = cpu(c.k);
    const size_t needed = getNeededBytesForQueryAll(c.m, c.k, c.n);
    SCOPED_TRACE(describe(c.dist, c.n, c.m, c.k, 59 + c.k) + " limit " + mib(needed));
    ScopedEnv limit_env(kLimitVar, needed);
    ASSERT_TRUE(
        same_rows(want, query_ok(&cuQueryAll, "cuQueryAll", queries_, tree_, c.k), c.m, c.k));
  }
}

// ---- Device selection and host threads --------------------------------------------------------

TEST_F(GpuPaths, DeviceSelection) {
  const int count = cuGetDeviceCount();
  EXPECT_GE(cuGetDevice(), 0);
  EXPECT_LT(cuGetDevice(), count);
  EXPECT_GT(getFreeBytesOnGpu(), 0u);
  EXPECT_EQ(cuSetDevice(count), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cuSetDevice(-1), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cuSetDevice(0), KNN_OK) << knn_last_error();
  EXPECT_EQ(cuGetDevice(), 0);
}

TEST_F(GpuPaths, FourHostThreadsShareOneTree) {
  prepare(Dist::Clustered, 200000, 50000, 61);
  const int ks[4] = {1, 8, 33, 100};
  std::vector<std::vector<int>> want(4);
  for (int t = 0; t < 4; ++t) want[t] = cpu(ks[t]);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<int>> got(4);
    std::vector<int> status(4, -1);
    std::vector<std::string> error(4);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < 4) std::this_thread::yield();
        const QueryFn fn = (t + round) % 2 == 0 ? &cuQueryAll : &queryAll;
        got[t] = query_with(fn, queries_, tree_, ks[t], &status[t]);
        error[t] = knn_last_error();
      });
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < 4; ++t) {
      SCOPED_TRACE("round " + std::to_string(round) + " thread " + std::to_string(t) + " (" +
                   ((t + round) % 2 == 0 ? "cuQueryAll" : "queryAll") + ") k " +
                   std::to_string(ks[t]));
      ASSERT_EQ(status[t], KNN_OK) << knn_status_string(status[t]) << ": " << error[t];
      ASSERT_TRUE(same_rows(want[t], got[t], m(), ks[t]));
    }
  }
}

}  // namespace
}  // namespace knn_test
