// Determinism: the same input gives the byte-identical tree and the identical
// results on every run and for every OpenMP thread count.
// (This test links OpenMP only to set the thread count of the calling thread.)
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "classic_helpers.h"
#include "index_test_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

class Determinism : public ::testing::TestWithParam<Dist> {
 protected:
  void SetUp() override { saved_threads_ = omp_get_max_threads(); }
  void TearDown() override { omp_set_num_threads(saved_threads_); }
  int saved_threads_ = 1;
};

TEST_P(Determinism, RepeatedBuildsAreByteIdentical) {
  const Dist dist = GetParam();
  for (int n : {1, 17, 5000, 150001}) {
    const uint64_t seed = 31 + n;
    SCOPED_TRACE(describe(dist, n, 0, 0, seed));
    const std::vector<Point> points = make_points(dist, n, seed);
    int status = -1;
    const std::vector<Node> first = build_with(&mpBuildKdTree, points, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    for (BuildFn fn : {&mpBuildKdTree, &buildKdTree, &mpBuildKdTree}) {
      const std::vector<Node> again = build_with(fn, points, &status);
      ASSERT_EQ(status, KNN_OK) << status_text(status);
      ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(Node)), 0);
    }
  }
}

TEST_P(Determinism, ThreadCountChangesNothing) {
  const Dist dist = GetParam();
  const int n = 150001, m = 1500, k = 16;
  const uint64_t seed = 1234;
  SCOPED_TRACE(describe(dist, n, m, k, seed));
  const std::vector<Point> points = make_points(dist, n, seed);
  const std::vector<Point> queries = make_query_points(dist, m, seed);

  omp_set_num_threads(1);
  int status = -1;
  const std::vector<Node> tree_1 = build_with(&mpBuildKdTree, points, &status);
  ASSERT_EQ(status, KNN_OK) << status_text(status);
  const std::vector<int> result_1 = query_ok(&mpQueryAll, "mpQueryAll", queries, tree_1, k);
  const std::vector<int> auto_1 = query_ok(&queryAll, "queryAll", queries, tree_1, k);

  for (int threads : {saved_threads_, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    omp_set_num_threads(threads);
    const std::vector<Node> tree_t = build_with(&mpBuildKdTree, points, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    ASSERT_TRUE(same_tree_bytes(tree_1, tree_t));
    ASSERT_TRUE(same_rows(result_1, query_ok(&mpQueryAll, "mpQueryAll", queries, tree_t, k), m, k));
    ASSERT_TRUE(same_rows(auto_1, query_ok(&queryAll, "queryAll", queries, tree_t, k), m, k));
  }
  ASSERT_TRUE(same_rows(result_1, auto_1, m, k));

  // knn_brute_force as well.
  const int bm = 500, bn = 20000;
  std::vector<int> ind_1(bm * k), ind_t(bm * k);
  std::vector<float> sq_1(bm * k), sq_t(bm * k);
  omp_set_num_threads(1);
  KNN_ASSERT_OK(
      knn_brute_force(&points[0].p[0], bn, &queries[0].p[0], bm, 3, k, sq_1.data(), ind_1.data()));
  omp_set_num_threads(saved_threads_);
  KNN_ASSERT_OK(
      knn_brute_force(&points[0].p[0], bn, &queries[0].p[0], bm, 3, k, sq_t.data(), ind_t.data()));
  EXPECT_EQ(ind_1, ind_t);
  EXPECT_TRUE(same_bits(sq_1, sq_t));
}

// The OpenMP index kd-tree: n large enough that the first two levels split
// in chunks run as tasks (more than 131072 points a node), the answers
// equal to the oracle's and the same for 1, 3 and all threads, in float32
// (against the brute-force oracle) and float64 (against the float64
// brute-force index), in a dimension with its own compiled loops (3) and
// one without (7).
TEST_P(Determinism, IndexKdTreeAnswersAreTheSameForAnyThreadCount) {
  const Dist dist = GetParam();
  const int64_t n = 270001, m = 200;
  const int k = 8;
  for (int dim : {3, 7}) {
    const uint64_t seed = 77 + dim;
    SCOPED_TRACE(describe(dist, n, m, k, seed, ("dim=" + std::to_string(dim)).c_str()));
    const std::vector<float> points = make_rows(dist, n, dim, seed);
    const std::vector<float> queries = make_query_rows(dist, m, dim, seed + 1);
    const KnnResult want = oracle_knn(points.data(), n, queries.data(), m, dim, k);
    const std::vector<double> points64(points.begin(), points.end());
    const std::vector<double> queries64(queries.begin(), queries.end());
    const auto query64 = [&](int structure, int threads) {
      const knn_options opt = options_for({KNN_BACKEND_OPENMP, structure}, threads);
      knn_index* index = nullptr;
      EXPECT_EQ(knn_index_build_f64(points64.data(), n, dim, &opt, &index), KNN_OK)
          << knn_last_error();
      std::pair<std::vector<int32_t>, std::vector<double>> rows{
          std::vector<int32_t>(static_cast<size_t>(m) * k, -7),
          std::vector<double>(static_cast<size_t>(m) * k, -7.0)};
      EXPECT_EQ(knn_index_query_f64(index, queries64.data(), m, k, rows.first.data(),
                                    rows.second.data(), &opt),
                KNN_OK)
          << knn_last_error();
      EXPECT_EQ(knn_index_free(index), KNN_OK);
      return rows;
    };
    const auto want64 = query64(KNN_STRUCTURE_BRUTE_FORCE, 0);
    for (int threads : {1, 3, 0}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      const knn_options opt = options_for({KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE}, threads);
      IndexHandle index = build_index(points, dim, opt);
      ASSERT_TRUE(index);
      EXPECT_TRUE(same_knn(want, query_index(index.get(), queries, dim, k, &opt)));
      const auto got64 = query64(KNN_STRUCTURE_KDTREE, threads);
      EXPECT_EQ(got64.first, want64.first);
      EXPECT_TRUE(same_bits(got64.second, want64.second));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Distributions, Determinism,
                         ::testing::Values(Dist::Uniform, Dist::Clustered, Dist::Duplicates,
                                           Dist::Plane, Dist::Grid, Dist::SignedZero),
                         DistName());

}  // namespace
}  // namespace knn_test
