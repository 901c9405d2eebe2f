// Stress: 16 host threads make mixed calls for KNN_STRESS_SECONDS (default
// 3): builds and queries on shared trees through every entry point, brute
// force, the index and quadtree APIs, and bad-input calls, each checked
// against answers computed up front by the independent oracle (and against
// the status and message a bad call must give). CI runs it briefly, also
// under ASan (leaks) and TSan (races, scripts/checks/sanitizers.sh); run it
// longer with KNN_STRESS_SECONDS=600 ctest -L stress.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

constexpr int kThreads = 16;
constexpr int kPoints = 12000;
constexpr int kQueries = 1500;
constexpr int kMaxK = 16;
constexpr int kIndexDim = 5;

double stress_seconds() {
  const char* text = std::getenv("KNN_STRESS_SECONDS");
  const double seconds = text ? std::atof(text) : 0.0;
  return seconds > 0 ? seconds : 3.0;
}

// Everything the threads share, read-only, with the oracle's answers.
struct Fixture {
  std::vector<Point> points = make_points(Dist::Clustered, kPoints, 501);
  std::vector<Point> queries = make_query_points(Dist::Clustered, kQueries, 502);
  std::vector<Node> tree = reference_tree(points);
  KnnResult expected = oracle_knn(points, queries, kMaxK);
  // Index API data: dim 5 rows.
  std::vector<float> rows = make_rows(Dist::Duplicates, 3000, kIndexDim, 503);
  std::vector<float> row_queries = make_query_rows(Dist::Duplicates, 200, kIndexDim, 504);
  KnnResult rows_expected =
      oracle_knn(rows.data(), 3000, row_queries.data(), 200, kIndexDim, kMaxK);
  // Quadtree data: the x, y of the points, and a square none of them lies
  // on, so that the count inside it is plain to compute.
  std::vector<float> xy;
  float square[8] = {};
  int64_t inside = 0;

  Fixture() {
    const float lo = -30.5f, hi = 20.25f;
    const float corners[8] = {lo, lo, hi, lo, hi, hi, lo, hi};
    std::copy(corners, corners + 8, square);
    for (const Point& p : points) {
      xy.push_back(p.p[0]);
      xy.push_back(p.p[1]);
      if (p.p[0] == lo || p.p[0] == hi || p.p[1] == lo || p.p[1] == hi) std::abort();
      inside += p.p[0] > lo && p.p[0] < hi && p.p[1] > lo && p.p[1] < hi;
    }
  }
};

// The first failure any thread saw (the others are likely the same).
class Failures {
 public:
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (count_++ == 0) first_ = what;
  }
  int count() const { return count_; }
  const std::string& first() const { return first_; }

 private:
  std::mutex mutex_;
  int count_ = 0;
  std::string first_;
};

std::string failed(const char* call, int status) {
  return std::string(call) + ": " + status_text(status);
}

// One randomly chosen call, checked; returns "" when it behaved.
std::string one_call(const Fixture& f, Rng& rng) {
  switch (rng.below(8)) {
    case 0:
    case 1: {  // kNN of a random slice of the queries on the shared tree
      const int k = static_cast<int>(1 + rng.below(kMaxK));
      const int first = static_cast<int>(rng.below(kQueries));
      const int m = static_cast<int>(1 + rng.below(kQueries - first));
      std::vector<int> result(static_cast<size_t>(m) * k, kSentinelInt);
      const QueryFn fn = rng.below(2) ? &mpQueryAll : &queryAll;
      const int status = fn(f.queries.data() + first, f.tree.data(), m, kPoints, k, result.data());
      if (status != KNN_OK) return failed("query", status);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < k; ++j)
          if (result[static_cast<size_t>(i) * k + j] != f.expected.idx[(first + i) * kMaxK + j])
            return "query " + std::to_string(first + i) + " slot " + std::to_string(j) + " differs";
      return "";
    }
    case 2: {  // a build of a prefix of the points
      const int n = static_cast<int>(1 + rng.below(kPoints));
      const std::vector<Point> part(f.points.begin(), f.points.begin() + n);
      std::vector<Node> tree = sentinel_tree(static_cast<size_t>(n));
      const BuildFn fn = rng.below(2) ? &mpBuildKdTree : &buildKdTree;
      const int status = fn(part.data(), n, tree.data());
      if (status != KNN_OK) return failed("build", status);
      if (!same_tree_bytes(reference_tree(part), tree)) return "a built tree differs";
      return "";
    }
    case 3: {  // brute force, with distances
      const int k = static_cast<int>(1 + rng.below(kMaxK));
      std::vector<int> idx(static_cast<size_t>(200) * k);
      std::vector<float> dist(idx.size());
      const int status = knn_brute_force(f.rows.data(), 3000, f.row_queries.data(), 200, kIndexDim,
                                         k, dist.data(), idx.data());
      if (status != KNN_OK) return failed("knn_brute_force", status);
      const KnnResult want = first_columns(f.rows_expected, k);
      if (idx != want.idx || !same_bits(want.dist, dist)) return "brute force differs";
      return "";
    }
    case 4: {  // the index API (UNSUPPORTED until its engines are merged)
      knn_index* index = nullptr;
      int status = knn_index_build(f.rows.data(), 3000, kIndexDim, nullptr, &index);
      if (status == KNN_ERR_UNSUPPORTED && index == nullptr) return "";
      if (status != KNN_OK) return failed("knn_index_build", status);
      const int k = static_cast<int>(1 + rng.below(kMaxK));
      std::vector<int32_t> idx(static_cast<size_t>(200) * k);
      std::vector<float> dist(idx.size());
      status =
          knn_index_query(index, f.row_queries.data(), 200, k, idx.data(), dist.data(), nullptr);
      const int freed = knn_index_free(index);
      if (status != KNN_OK) return failed("knn_index_query", status);
      if (freed != KNN_OK) return failed("knn_index_free", freed);
      const KnnResult want = first_columns(f.rows_expected, k);
      if (std::vector<int>(idx.begin(), idx.end()) != want.idx || !same_bits(want.dist, dist))
        return "index query differs";
      return "";
    }
    case 5: {  // point in polygon (UNSUPPORTED until its engine is merged)
      knn_quadtree* qt = nullptr;
      int status = knn_quadtree_build(f.xy.data(), kPoints, nullptr, &qt);
      if (status == KNN_ERR_UNSUPPORTED && qt == nullptr) return "";
      if (status != KNN_OK) return failed("knn_quadtree_build", status);
      const int64_t rings[2] = {0, 4}, polygons[2] = {0, 1};
      int64_t count = -1;
      status = knn_points_in_polygons_count(qt, f.square, rings, 1, polygons, 1, &count, nullptr);
      const int freed = knn_quadtree_free(qt);
      if (status != KNN_OK) return failed("knn_points_in_polygons_count", status);
      if (freed != KNN_OK) return failed("knn_quadtree_free", freed);
      if (count != f.inside)
        return "polygon count " + std::to_string(count) + ", expected " + std::to_string(f.inside);
      return "";
    }
    case 6: {  // bad input: the status, the message, and no write
      std::vector<int> result(8, kSentinelInt);
      int status = mpQueryAll(f.queries.data(), f.tree.data(), 2, kPoints, 0, result.data());
      if (status != KNN_ERR_INVALID_ARGUMENT || std::string(knn_last_error()).empty())
        return failed("k = 0", status);
      std::vector<Point> nan_query(f.queries.begin(), f.queries.begin() + 2);
      nan_query[1].p[2] = std::numeric_limits<float>::quiet_NaN();
      status = queryAll(nan_query.data(), f.tree.data(), 2, kPoints, 4, result.data());
      if (status != KNN_ERR_NONFINITE_INPUT) return failed("NaN query", status);
      if (std::string(knn_last_error()).find('1') == std::string::npos)
        return std::string("the NaN message does not name query 1: ") + knn_last_error();
      if (result != std::vector<int>(8, kSentinelInt)) return "a refused call wrote its output";
      return "";
    }
    default: {  // an invalid tree: a node of the root's left subtree beyond it in x
      std::vector<Node> broken(f.tree.begin(), f.tree.end());
      broken[1].p[0] = broken[0].p[0] + 1000.0f;
      std::vector<int> result(4, kSentinelInt);
      const int status = mpQueryAll(f.queries.data(), broken.data(), 1, kPoints, 4, result.data());
      if (status != KNN_ERR_INVALID_TREE) return failed("invalid tree", status);
      if (result != std::vector<int>(4, kSentinelInt)) return "an invalid tree's query wrote";
      return "";
    }
  }
}

TEST(Stress, MixedCallsFromManyThreadsMatchTheOracle) {
  const Fixture fixture;
  const double seconds = stress_seconds();
  const auto stop_at = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  Failures failures;
  std::atomic<long> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Rng rng(9000 + t);
      do {
        const std::string problem = one_call(fixture, rng);
        calls.fetch_add(1);
        if (!problem.empty()) failures.add("thread " + std::to_string(t) + ": " + problem);
      } while (std::chrono::steady_clock::now() < stop_at && failures.count() == 0);
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.count(), 0) << failures.first();
  EXPECT_GE(calls.load(), kThreads);
  std::printf("[ stress   ] %ld calls from %d threads in %.1f s\n", calls.load(), kThreads,
              seconds);
}

}  // namespace
}  // namespace knn_test
