// The classic 3-D API on the CPU (mpBuildKdTree/mpQueryAll, and
// buildKdTree/queryAll, which run on the CPU when no device is usable and must
// give the identical answer when one is): trees against the contract's
// reference layout and invariants, queries against the brute-force oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

const int kKs[] = {1, 2, 8, 33, 100};

struct NamedBuild {
  BuildFn fn;
  const char* name;
};
const NamedBuild kBuilds[] = {{&mpBuildKdTree, "mpBuildKdTree"}, {&buildKdTree, "buildKdTree"}};

struct NamedQuery {
  QueryFn fn;
  const char* name;
};
const NamedQuery kQueries[] = {{&mpQueryAll, "mpQueryAll"}, {&queryAll, "queryAll"}};

// Separate queries followed by the points themselves (queries == points).
std::vector<Point> queries_for(Dist dist, const std::vector<Point>& points, int separate,
                               uint64_t seed) {
  std::vector<Point> q = make_query_points(dist, separate, seed);
  q.insert(q.end(), points.begin(), points.end());
  return q;
}

// Every classic build gives a valid tree, byte for byte the reference one.
void assert_every_build_matches(const std::vector<Point>& points,
                                const std::vector<Node>& reference) {
  for (const NamedBuild& b : kBuilds) {
    SCOPED_TRACE(b.name);
    int status = -1;
    const std::vector<Node> tree = build_with(b.fn, points, &status);
    ASSERT_EQ(status, KNN_OK) << status_text(status);
    ASSERT_TRUE(tree_invariants_hold(points, tree.data()));
    ASSERT_TRUE(same_tree_bytes(reference, tree));
  }
}

// Every classic query gives the oracle's rows.
void assert_every_query_matches(const KnnResult& want, const std::vector<Point>& queries,
                                const std::vector<Node>& tree, int k) {
  const int m = static_cast<int>(queries.size());
  for (const NamedQuery& q : kQueries) {
    SCOPED_TRACE(q.name);
    ASSERT_TRUE(same_rows(want.idx, query_ok(q.fn, q.name, queries, tree, k), m, k));
  }
}

// The oracle runs once, for the largest k (and is itself checked in double);
// each k of `ks` then compares with its first columns. `note` goes with the
// description of the case.
void assert_queries_match_oracle(Dist dist, uint64_t seed, const std::vector<Point>& points,
                                 const std::vector<Point>& queries, const std::vector<int>& ks,
                                 const char* note = "") {
  const int64_t n = static_cast<int64_t>(points.size());
  const int64_t m = static_cast<int64_t>(queries.size());
  const int k_max = *std::max_element(ks.begin(), ks.end());
  const std::vector<Node> tree = build_tree(points);
  const KnnResult all = oracle_knn(points, queries, k_max);
  ASSERT_TRUE(kth_matches_double(points, queries, k_max, all.idx.data()))
      << describe(dist, n, m, k_max, seed) << " (the oracle itself)";
  for (int k : ks) {
    SCOPED_TRACE(describe(dist, n, m, k, seed, note));
    ASSERT_NO_FATAL_FAILURE(assert_every_query_matches(first_columns(all, k), queries, tree, k));
  }
}

class ClassicBuild : public ::testing::TestWithParam<Dist> {};
class ClassicQuery : public ::testing::TestWithParam<Dist> {};
class ClassicLargeTree : public ::testing::TestWithParam<Dist> {};

TEST_P(ClassicBuild, MatchesReferenceLayoutAndInvariants) {
  const Dist dist = GetParam();
  const int sizes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 1531, 4097};
  for (uint64_t seed : {1u, 2u, 3u})
    for (int n : sizes) {
      const uint64_t data_seed = seed * 100003 + n;
      SCOPED_TRACE(describe(dist, n, 0, 0, data_seed));
      const std::vector<Point> points = make_points(dist, n, data_seed);
      const std::vector<Node> reference = reference_tree(points);
      ASSERT_TRUE(tree_invariants_hold(points, reference.data())) << "(the test's own reference)";
      ASSERT_NO_FATAL_FAILURE(assert_every_build_matches(points, reference));
    }
}

TEST_P(ClassicBuild, LargeTreeMatchesReference) {
  const Dist dist = GetParam();
  const int n = 100000;
  const uint64_t seed = 4242;
  SCOPED_TRACE(describe(dist, n, 0, 0, seed));
  const std::vector<Point> points = make_points(dist, n, seed);
  assert_every_build_matches(points, reference_tree(points));
}

TEST_P(ClassicQuery, MatchesOracle) {
  // Sizes around every k of kKs (k-1, k, k+1) and a few others; the oracle
  // runs once per data set for the largest k, smaller k use its first columns.
  const Dist dist = GetParam();
  const int sizes[] = {0, 1, 2, 3, 7, 8, 9, 32, 33, 34, 99, 100, 101, 1000, 1531};
  const std::vector<int> ks(std::begin(kKs), std::end(kKs));
  for (uint64_t seed : {11u, 12u})
    for (int n : sizes) {
      const uint64_t data_seed = seed * 1000003 + n;
      const std::vector<Point> points = make_points(dist, n, data_seed);
      const std::vector<Point> queries = queries_for(dist, points, 150, data_seed);
      ASSERT_NO_FATAL_FAILURE(assert_queries_match_oracle(
          dist, data_seed, points, queries, ks, "(queries: 150 separate, then the points)"));
    }
}

TEST_P(ClassicLargeTree, MatchesOracle) {
  const Dist dist = GetParam();
  const int n = 100000;
  const uint64_t seed = 777;
  const std::vector<Point> points = make_points(dist, n, seed);
  // 300 separate queries and 300 of the points themselves.
  std::vector<Point> queries = make_query_points(dist, 300, seed);
  Rng rng(seed);
  for (int i = 0; i < 300; ++i) queries.push_back(points[rng.below(n)]);
  assert_queries_match_oracle(dist, seed, points, queries, {1, 8, 100});
}

INSTANTIATE_TEST_SUITE_P(AllDistributions, ClassicBuild, ::testing::ValuesIn(all_dists()),
                         DistName());
INSTANTIATE_TEST_SUITE_P(AllDistributions, ClassicQuery, ::testing::ValuesIn(all_dists()),
                         DistName());
INSTANTIATE_TEST_SUITE_P(Some, ClassicLargeTree,
                         ::testing::Values(Dist::Uniform, Dist::Clustered, Dist::LargeOffset,
                                           Dist::Duplicates, Dist::Plane),
                         DistName());

// Many small random cases: a random distribution, size, query count and k
// per seed (the seed printed on failure rebuilds the case).
TEST(ClassicCpuSweep, RandomCasesMatchOracle) {
  const std::vector<Dist> dists = all_dists();
  for (uint64_t seed = 1; seed <= 1500; ++seed) {
    Rng pick(seed * 0x2545F4914F6CDD1Dull);
    const Dist dist = dists[pick.below(static_cast<int64_t>(dists.size()))];
    const int n = static_cast<int>(std::exp(pick.uniform(0.0, std::log(6000.0)))) - 1;
    const int separate = static_cast<int>(pick.below(120));
    const int k = pick.below(4) == 0 ? kKs[pick.below(5)] : 1 + static_cast<int>(pick.below(140));
    const std::vector<Point> points = make_points(dist, n, seed);
    std::vector<Point> queries = make_query_points(dist, separate, seed);
    for (int i = 0; i < 40 && n > 0; ++i) queries.push_back(points[pick.below(n)]);
    const int m = static_cast<int>(queries.size());
    SCOPED_TRACE(describe(dist, n, m, k, seed, "(ClassicCpuSweep)"));
    const std::vector<Node> tree = build_tree(points);
    ASSERT_TRUE(tree_invariants_hold(points, tree.data()));
    ASSERT_NO_FATAL_FAILURE(
        assert_every_query_matches(oracle_knn(points, queries, k), queries, tree, k));
  }
}

// ---- Specific cases the contract spells out -------------------------------------

TEST(ClassicCpu, QueryEqualToPointsFindsEveryCopyAtZeroInIndexOrder) {
  // Point 5 has copies at 1, 3 and 8; the query equal to them lists all four,
  // by index, before anything else - its own index 5 is not first.
  std::vector<Point> points(10);
  for (int i = 0; i < 10; ++i) points[i] = Point{{static_cast<float>(i), 0.5f * i, -1.0f * i}};
  for (int i : {1, 3, 8}) points[i] = Point{{5.0f, 2.5f, -5.0f}};
  const std::vector<Node> tree = build_tree(points);
  const std::vector<Point> queries = {points[5]};
  for (const NamedQuery& q : kQueries) {
    SCOPED_TRACE(q.name);
    const std::vector<int> got = query_ok(q.fn, q.name, queries, tree, 5);
    EXPECT_EQ(got, (std::vector<int>{1, 3, 5, 8, 4})) << "then the nearest other point, 4";
  }
}

TEST(ClassicCpu, PadsWithMinusOneWhenKExceedsTheTree) {
  const std::vector<Point> points = make_points(Dist::Uniform, 5, 3);
  const std::vector<Point> queries = make_query_points(Dist::Uniform, 7, 4);
  const std::vector<Node> tree = build_tree(points);
  const KnnResult want = oracle_knn(points, queries, 9);
  for (const NamedQuery& q : kQueries) {
    SCOPED_TRACE(q.name);
    const std::vector<int> got = query_ok(q.fn, q.name, queries, tree, 9);
    ASSERT_TRUE(same_rows(want.idx, got, 7, 9));
    for (int i = 0; i < 7; ++i) {
      std::vector<int> row(got.begin() + i * 9, got.begin() + i * 9 + 5);
      std::sort(row.begin(), row.end());
      EXPECT_EQ(row, (std::vector<int>{0, 1, 2, 3, 4})) << "query " << i;
      for (int j = 5; j < 9; ++j) EXPECT_EQ(got[i * 9 + j], -1) << "query " << i << " slot " << j;
    }
  }
}

TEST(ClassicCpu, VeryLargeKIsExactAndPadded) {
  const int n = 3000, m = 3;
  const std::vector<Point> points = make_points(Dist::Grid, n, 12);
  const std::vector<Point> queries = make_query_points(Dist::Grid, m, 13);
  const std::vector<Node> tree = build_tree(points);
  for (int k : {1024, 2999, 3000, 3001, 1000000}) {
    SCOPED_TRACE(describe(Dist::Grid, n, m, k, 12));
    const KnnResult want = oracle_knn(points, queries, k);
    ASSERT_NO_FATAL_FAILURE(assert_every_query_matches(want, queries, tree, k));
    std::vector<int> ind(static_cast<size_t>(m) * k, kSentinelInt);
    std::vector<float> sq(static_cast<size_t>(m) * k, -7.0f);
    KNN_ASSERT_OK(
        knn_brute_force(&points[0].p[0], n, &queries[0].p[0], m, 3, k, sq.data(), ind.data()));
    ASSERT_TRUE(same_rows(want.idx, ind, m, k));
    ASSERT_TRUE(same_bits(want.dist, sq));
  }
}

TEST(ClassicCpu, EmptyTreeAnswersMissingEverywhere) {
  const std::vector<Point> queries = make_query_points(Dist::Uniform, 4, 5);
  for (const NamedQuery& q : kQueries) {
    SCOPED_TRACE(q.name);
    std::vector<int> result(12, kSentinelInt);
    KNN_EXPECT_OK(q.fn(queries.data(), nullptr, 4, 0, 3, result.data()));
    EXPECT_EQ(result, std::vector<int>(12, -1));
  }
}

TEST(ClassicCpu, ZeroCountsAreValidAndWriteNothing) {
  const std::vector<Point> points = make_points(Dist::Uniform, 20, 6);
  const std::vector<Node> tree = build_tree(points);
  for (const NamedBuild& b : kBuilds) {
    KNN_EXPECT_OK(b.fn(nullptr, 0, nullptr));
    EXPECT_STREQ(knn_last_error(), "");
  }
  for (const NamedQuery& q : kQueries) {
    SCOPED_TRACE(q.name);
    KNN_EXPECT_OK(q.fn(nullptr, tree.data(), 0, 20, 4, nullptr));
    KNN_EXPECT_OK(q.fn(nullptr, nullptr, 0, 0, 4, nullptr));
    std::vector<int> result(8, kSentinelInt);
    KNN_EXPECT_OK(q.fn(points.data(), tree.data(), 0, 20, 4, result.data()));
    EXPECT_EQ(result, std::vector<int>(8, kSentinelInt));
  }
  std::vector<float> d(4, 1.5f);
  std::vector<int> ind(4, kSentinelInt);
  KNN_EXPECT_OK(knn_brute_force(nullptr, 0, nullptr, 0, 3, 4, nullptr, nullptr));
  KNN_EXPECT_OK(
      knn_brute_force(&points[0].p[0], 20, &points[0].p[0], 0, 3, 4, d.data(), ind.data()));
  EXPECT_EQ(ind, std::vector<int>(4, kSentinelInt));
}

TEST(ClassicCpu, SignedZerosAreOneValueTiedByIndex) {
  // -0.0 and +0.0 compare equal: the build orders them by index, keeps each
  // point's own bits in the node, and queries see distance 0 for both.
  const float nz = -0.0f;
  const std::vector<Point> points = {{{0.0f, 0.0f, 0.0f}}, {{nz, nz, nz}},     {{nz, 0.0f, nz}},
                                     {{0.0f, nz, 0.0f}},   {{1.0f, nz, 0.0f}}, {{nz, 1.0f, nz}},
                                     {{nz, nz, 1.0f}}};
  assert_every_build_matches(points, reference_tree(points));
  const std::vector<Node> tree = build_tree(points);
  const std::vector<Point> queries = {{{0.0f, 0.0f, 0.0f}}, {{nz, nz, nz}}, {{nz, 0.0f, 0.0f}}};
  for (const NamedQuery& q : kQueries) {
    SCOPED_TRACE(q.name);
    const std::vector<int> got = query_ok(q.fn, q.name, queries, tree, 7);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(std::vector<int>(got.begin() + 7 * i, got.begin() + 7 * i + 7),
                (std::vector<int>{0, 1, 2, 3, 4, 5, 6}))
          << "query " << i;
  }
}

TEST(ClassicCpu, ValidTreeThatIsNotTheCanonicalOneIsQueriedExactly) {
  // All points equal: any id permutation satisfies links and kd order, so the
  // queries must accept it and still rank by index, not by tree position.
  const std::vector<Point> points = make_points(Dist::Identical, 9, 1);
  std::vector<Node> tree = build_tree(points);
  for (int i = 0; i < 9; ++i) tree[i].id = 8 - i;
  const std::vector<Point> queries = {points[0], {{3.0f, 2.0f, 1.0f}}};
  for (const NamedQuery& q : kQueries) {
    SCOPED_TRACE(q.name);
    const std::vector<int> got = query_ok(q.fn, q.name, queries, tree, 4);
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  }
}

TEST(ClassicCpu, SavedCopyOfTheTreeAnswersTheSame) {
  const std::vector<Point> points = make_points(Dist::Clustered, 3000, 8);
  const std::vector<Point> queries = make_query_points(Dist::Clustered, 500, 9);
  const std::vector<Node> tree = build_tree(points);
  std::vector<unsigned char> saved(getTreeSize(3000));
  ASSERT_EQ(saved.size(), tree.size() * sizeof(Node));
  std::memcpy(saved.data(), tree.data(), saved.size());
  std::vector<Node> loaded(3000);
  std::memcpy(loaded.data(), saved.data(), saved.size());
  const std::vector<int> a = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, 8);
  const std::vector<int> b = query_ok(&mpQueryAll, "mpQueryAll", queries, loaded, 8);
  EXPECT_TRUE(same_rows(a, b, 500, 8));
}

TEST(ClassicCpu, TreeQueriesAgreeWithBruteForceApi) {
  for (Dist dist : all_dists()) {
    SCOPED_TRACE(dist_name(dist));
    const std::vector<Point> points = make_points(dist, 2000, 21);
    const std::vector<Point> queries = make_query_points(dist, 300, 22);
    const std::vector<Node> tree = build_tree(points);
    const int k = 17;
    const std::vector<int> tree_result = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k);
    std::vector<int> ind(300 * k, kSentinelInt);
    std::vector<float> dist_out(300 * k);
    KNN_ASSERT_OK(knn_brute_force(&points[0].p[0], 2000, &queries[0].p[0], 300, 3, k,
                                  dist_out.data(), ind.data()));
    EXPECT_TRUE(same_rows(ind, tree_result, 300, k));
  }
}

}  // namespace
}  // namespace knn_test
