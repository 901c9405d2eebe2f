// Thread safety: many host threads querying one tree at once (and building
// at once) get exactly what a single thread gets.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

constexpr int kThreads = 8;

// Runs body(t) on kThreads threads released together.
template <class Body>
void run_together(Body body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      body(t);
    });
  for (std::thread& th : threads) th.join();
}

struct Job {
  std::vector<Point> queries;
  int k;
  std::vector<int> expected;
};

class Concurrency : public ::testing::TestWithParam<Dist> {};

TEST_P(Concurrency, ThreadsQueryingOneTreeGetTheSingleThreadedAnswer) {
  const Dist dist = GetParam();
  const int n = 60000;
  const uint64_t seed = 99;
  const std::vector<Point> points = make_points(dist, n, seed);
  const std::vector<Node> tree = build_tree(points);
  const int ks[kThreads] = {1, 2, 5, 8, 16, 33, 64, 100};

  std::vector<Job> jobs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    jobs[t].queries = make_query_points(dist, 1500 + 100 * t, seed + 1 + t);
    jobs[t].k = ks[t];
    jobs[t].expected = query_ok(&mpQueryAll, "mpQueryAll", jobs[t].queries, tree, ks[t]);
  }
  struct NamedQuery {
    QueryFn fn;
    const char* name;
  };
  for (const NamedQuery& q :
       {NamedQuery{&mpQueryAll, "mpQueryAll"}, NamedQuery{&queryAll, "queryAll"}})
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE(std::string(q.name) + " round " + std::to_string(round) + " " +
                   describe(dist, n, 0, 0, seed));
      std::vector<std::vector<int>> got(kThreads);
      std::vector<int> status(kThreads, -1);
      std::vector<std::string> error(kThreads);
      run_together([&](int t) {
        // Half the threads query the shared tree in two halves, so calls of
        // different sizes overlap too.
        const Job& job = jobs[t];
        const int m = static_cast<int>(job.queries.size());
        got[t].assign(static_cast<size_t>(m) * job.k, kSentinelInt);
        if (t % 2 == 0) {
          status[t] = q.fn(job.queries.data(), tree.data(), m, n, job.k, got[t].data());
        } else {
          const int half = m / 2;
          status[t] = q.fn(job.queries.data(), tree.data(), half, n, job.k, got[t].data());
          if (status[t] == KNN_OK)
            status[t] = q.fn(job.queries.data() + half, tree.data(), m - half, n, job.k,
                             got[t].data() + static_cast<size_t>(half) * job.k);
        }
        error[t] = knn_last_error();
      });
      for (int t = 0; t < kThreads; ++t) {
        SCOPED_TRACE("thread " + std::to_string(t) + " k " + std::to_string(jobs[t].k));
        ASSERT_EQ(status[t], KNN_OK) << knn_status_string(status[t]) << ": " << error[t];
        EXPECT_EQ(error[t], "");
        ASSERT_TRUE(same_rows(jobs[t].expected, got[t],
                              static_cast<int64_t>(jobs[t].queries.size()), jobs[t].k));
      }
    }
}

TEST_P(Concurrency, ThreadsBuildingAtOnceGetIdenticalTrees) {
  const Dist dist = GetParam();
  std::vector<std::vector<Point>> inputs(kThreads);
  std::vector<std::vector<Node>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    inputs[t] = make_points(dist, 20000 + 3001 * (t % 3), 500 + t % 3);
    expected[t] = reference_tree(inputs[t]);
  }
  for (BuildFn fn : {&mpBuildKdTree, &buildKdTree}) {
    std::vector<std::vector<Node>> got(kThreads);
    std::vector<int> status(kThreads, -1);
    run_together([&](int t) { got[t] = build_with(fn, inputs[t], &status[t]); });
    for (int t = 0; t < kThreads; ++t) {
      SCOPED_TRACE("thread " + std::to_string(t));
      ASSERT_EQ(status[t], KNN_OK);
      ASSERT_TRUE(same_tree_bytes(expected[t], got[t]));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Distributions, Concurrency,
                         ::testing::Values(Dist::Uniform, Dist::Clustered, Dist::Grid), DistName());

}  // namespace
}  // namespace knn_test
