// The index API on the CPU: every structure against the oracles, in many
// dimensions, sizes, k and degenerate data; all-kNN with and without the
// point itself; radius search; info; thread counts; the automatic choices.
// The suites are parameterised by IndexConfig so that the GPU tests can run
// the same cases on the CUDA backend (INSTANTIATE_TEST_SUITE_P there).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "index_test_helpers.h"

namespace knn_test {
namespace {

const int kDims[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 32};
const int64_t kSizes[] = {0, 1, 2, 1000, 4097};

// The oracle's rows cut to `cap` columns (padding where a row has fewer hits).
RadiusResult capped(const RadiusResult& all, int cap) {
  RadiusResult r = all;
  r.max_neighbors = cap;
  r.idx.assign(static_cast<size_t>(all.m) * cap, -1);
  r.dist.assign(static_cast<size_t>(all.m) * cap, std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < all.m; ++i)
    for (int j = 0; j < cap && j < all.max_neighbors; ++j) {
      r.idx[static_cast<size_t>(i * cap + j)] =
          all.idx[static_cast<size_t>(i * all.max_neighbors + j)];
      r.dist[static_cast<size_t>(i * cap + j)] =
          all.dist[static_cast<size_t>(i * all.max_neighbors + j)];
    }
  return r;
}

bool grid(const IndexConfig& c) { return c.structure == KNN_STRUCTURE_GRID; }

// The dimensions a config serves (the grid is 3-D).
std::vector<int> dims_of(const IndexConfig& c) {
  if (grid(c)) return {3};
  return std::vector<int>(std::begin(kDims), std::end(kDims));
}

class IndexKnn : public ::testing::TestWithParam<IndexConfig> {
 protected:
  void SetUp() override { KNN_SKIP_WITHOUT_BACKEND(GetParam()); }
};

// Every dimension and size, with k from 1 to beyond n; the distributions
// rotate over the cases so that each dimension meets several of them.
TEST_P(IndexKnn, MatchesOracleAcrossDimensionsSizesAndK) {
  const knn_options opt = options_for(GetParam());
  const std::vector<Dist> dists = {Dist::Uniform, Dist::Clustered, Dist::Duplicates, Dist::Grid,
                                   Dist::LargeOffset};
  int turn = 0;
  for (const int dim : dims_of(GetParam()))
    for (const int64_t n : kSizes)
      for (const int k : {1, 5, 100, 1024}) {
        if (k > 100 && n < 1000) continue;  // k > n is covered below for the small sizes
        const Dist dist = dists[static_cast<size_t>(turn++) % dists.size()];
        const int64_t m = k >= 1024 ? 40 : 150;
        expect_knn_like_oracle(opt, dist, n, m, dim, k, 100 + static_cast<uint64_t>(turn));
        if (HasFatalFailure()) return;
      }
}

TEST_P(IndexKnn, KBeyondTheSizePadsWithMissing) {
  const knn_options opt = options_for(GetParam());
  for (const int dim : dims_of(GetParam()))
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{37}}) {
      expect_knn_like_oracle(opt, Dist::Uniform, n, 20, dim, static_cast<int>(n) + 3, 7);
      const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 7);
      IndexHandle index = build_index(points, dim, opt);
      ASSERT_TRUE(index);
      const KnnResult got = query_index(index.get(), make_rows(Dist::Uniform, 5, dim, 8), dim,
                                        static_cast<int>(n) + 3);
      for (int64_t i = 0; i < 5; ++i)
        for (int j = static_cast<int>(n); j < got.k; ++j) {
          EXPECT_EQ(got.idx[static_cast<size_t>(i * got.k + j)], -1);
          EXPECT_EQ(got.dist[static_cast<size_t>(i * got.k + j)],
                    std::numeric_limits<float>::infinity());
        }
    }
}

// The data that breaks spatial search, in 3 and 8 dimensions.
TEST_P(IndexKnn, MatchesOracleOnDegenerateData) {
  const knn_options opt = options_for(GetParam());
  for (const int dim : {3, 8}) {
    if (grid(GetParam()) && dim != 3) continue;
    for (const Dist dist : all_dists())
      for (const int k : {1, 16}) {
        expect_knn_like_oracle(opt, dist, 3001, 120, dim, k, 11);
        if (HasFatalFailure()) return;
      }
  }
}

TEST_P(IndexKnn, SmallAndLargeLeavesGiveTheSameAnswer) {
  for (const int leaf : {1, 2, 7, 1000}) {
    knn_options opt = options_for(GetParam());
    opt.leaf_size = leaf;
    expect_knn_like_oracle(opt, Dist::Clustered, 2500, 100, 3, 9, 21);
    expect_knn_like_oracle(opt, Dist::Duplicates, 2500, 100, 3, 9, 22);
  }
}

// All-kNN of the points themselves. Duplicates: excluding self must drop only
// the point's own index, not its copies at distance 0.
TEST_P(IndexKnn, QuerySelfMatchesOracle) {
  const knn_options opt = options_for(GetParam());
  constexpr int kMaxK = 40;  // the oracle's rows for kMaxK; smaller k are its first columns
  for (const int dim : dims_of(GetParam())) {
    if (dim != 1 && dim != 3 && dim != 5 && dim != 32) continue;
    for (const Dist dist : {Dist::Duplicates, Dist::Identical, Dist::Uniform, Dist::Grid})
      for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{1500}}) {
        const std::vector<float> points = make_rows(dist, n, dim, 31);
        IndexHandle index = build_index(points, dim, opt);
        ASSERT_TRUE(index);
        for (const bool exclude : {false, true}) {
          const KnnResult want = oracle_self(points.data(), n, dim, kMaxK, exclude);
          for (const int k : {1, 4, kMaxK}) {
            SCOPED_TRACE(describe(dist, n, n, k, 31, exclude ? "exclude_self" : "with self"));
            SCOPED_TRACE("dim=" + std::to_string(dim));
            EXPECT_TRUE(same_knn(first_columns(want, k), query_self(index.get(), n, k, exclude)));
          }
        }
      }
  }
}

TEST_P(IndexKnn, QuerySelfWithSelfEqualsQueryingThePoints) {
  const knn_options opt = options_for(GetParam());
  const std::vector<float> points = make_rows(Dist::Grid, 2000, 3, 41);
  IndexHandle index = build_index(points, 3, opt);
  ASSERT_TRUE(index);
  EXPECT_TRUE(
      same_knn(query_index(index.get(), points, 3, 12), query_self(index.get(), 2000, 12, false)));
}

// Radius: several radii (0 finds only equal points; huge finds all), full
// rows, rows capped below the true count, and counting-only calls.
TEST_P(IndexKnn, RadiusMatchesOracle) {
  const knn_options opt = options_for(GetParam());
  for (const int dim : dims_of(GetParam())) {
    if (dim == 1 || dim == 7 || dim == 12) continue;  // the rest cover the shapes
    for (const Dist dist : {Dist::Uniform, Dist::Duplicates, Dist::Clustered, Dist::Grid}) {
      const int64_t n = 2500, m = 120;
      const std::vector<float> points = make_rows(dist, n, dim, 51);
      const std::vector<float> queries = make_query_rows(dist, m, dim, 52);
      IndexHandle index = build_index(points, dim, opt);
      ASSERT_TRUE(index);
      const float typical = dist == Dist::Clustered ? 1.5f : 0.6f * std::sqrt(float(dim));
      for (const float radius :
           {0.0f, typical * 0.25f, typical, 1e30f, std::numeric_limits<float>::infinity()}) {
        // Rows of n hold every hit; smaller caps are their first columns.
        const RadiusResult all =
            oracle_radius(points.data(), n, queries.data(), m, dim, radius, static_cast<int>(n));
        for (const int cap : {0, 3, 64, 3000}) {
          SCOPED_TRACE(describe(
              dist, n, m, cap, 51,
              ("dim=" + std::to_string(dim) + " radius=" + std::to_string(radius)).c_str()));
          EXPECT_TRUE(
              same_radius(capped(all, cap), radius_index(index.get(), queries, dim, radius, cap)));
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_P(IndexKnn, RadiusOnEmptyAndTinyIndexes) {
  const knn_options opt = options_for(GetParam());
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}}) {
    const std::vector<float> points = make_rows(Dist::Duplicates, n, 3, 61);
    const std::vector<float> queries = make_query_rows(Dist::Duplicates, 30, 3, 62);
    IndexHandle index = build_index(points, 3, opt);
    ASSERT_TRUE(index);
    for (const int cap : {0, 4})
      EXPECT_TRUE(same_radius(oracle_radius(points.data(), n, queries.data(), 30, 3, 5.0f, cap),
                              radius_index(index.get(), queries, 3, 5.0f, cap)));
  }
}

TEST_P(IndexKnn, InfoReportsWhatServesTheIndex) {
  const std::vector<float> points = make_rows(Dist::Uniform, 3000, 3, 71);
  IndexHandle index = build_index(points, 3, options_for(GetParam()));
  ASSERT_TRUE(index);
  int64_t n = -1;
  int dim = -1, backend = -1, structure = -1;
  ASSERT_EQ(knn_index_info(index.get(), &n, &dim, &backend, &structure), KNN_OK);
  EXPECT_EQ(n, 3000);
  EXPECT_EQ(dim, 3);
  EXPECT_EQ(backend, GetParam().backend);
  // Uniform data makes a good grid; only the grid may fall back (to the kd-tree).
  if (grid(GetParam())) {
    EXPECT_TRUE(structure == KNN_STRUCTURE_GRID || structure == KNN_STRUCTURE_KDTREE);
  } else {
    EXPECT_EQ(structure, GetParam().structure);
  }
  EXPECT_EQ(knn_index_info(index.get(), nullptr, nullptr, nullptr, nullptr), KNN_OK);
}

// Thread counts of the build and of the call change nothing in the answer.
TEST_P(IndexKnn, OneThreadAndAllThreadsGiveIdenticalOutput) {
  const std::vector<float> points = make_rows(Dist::Clustered, 4097, 3, 81);
  const std::vector<float> queries = make_query_rows(Dist::Clustered, 700, 3, 82);
  IndexHandle one = build_index(points, 3, options_for(GetParam(), 1));
  IndexHandle all = build_index(points, 3, options_for(GetParam(), 0));
  ASSERT_TRUE(one && all);
  knn_options call = options_for(GetParam(), 1);
  EXPECT_TRUE(same_knn(query_index(one.get(), queries, 3, 10, &call),
                       query_index(all.get(), queries, 3, 10)));
  EXPECT_TRUE(same_radius(radius_index(one.get(), queries, 3, 2.0f, 20, &call),
                          radius_index(all.get(), queries, 3, 2.0f, 20)));
  EXPECT_TRUE(same_knn(query_self(one.get(), 4097, 6, true), query_self(all.get(), 4097, 6, true)));
}

// A cancelled call fails with KNN_ERR_CANCELLED and leaves every slot missing.
TEST_P(IndexKnn, CancelledCallsLeaveMissingValues) {
  const std::vector<float> points = make_rows(Dist::Uniform, 3000, 3, 91);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 500, 3, 92);
  IndexHandle index = build_index(points, 3, options_for(GetParam()));
  ASSERT_TRUE(index);
  volatile int flag = 1;
  ASSERT_EQ(knn_set_cancel_flag(&flag), KNN_OK);
  std::vector<int32_t> idx(500 * 5, 9);
  std::vector<float> dist(500 * 5, 9.0f);
  std::vector<int32_t> counts(500, 9);
  const int query_status =
      knn_index_query(index.get(), queries.data(), 500, 5, idx.data(), dist.data(), nullptr);
  const int radius_status = knn_index_radius(index.get(), queries.data(), 500, 1.0f, 0, nullptr,
                                             nullptr, counts.data(), nullptr);
  ASSERT_EQ(knn_set_cancel_flag(nullptr), KNN_OK);
  EXPECT_EQ(query_status, KNN_ERR_CANCELLED);
  EXPECT_EQ(radius_status, KNN_ERR_CANCELLED);
  EXPECT_EQ(idx, std::vector<int32_t>(idx.size(), -1));
  EXPECT_EQ(dist, std::vector<float>(dist.size(), std::numeric_limits<float>::infinity()));
  EXPECT_EQ(counts, std::vector<int32_t>(counts.size(), 0));
  // The index still answers once the flag is gone.
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), 3000, queries.data(), 500, 3, 5),
                       query_index(index.get(), queries, 3, 5)));
}

const IndexConfig kCpuConfigs[] = {
    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE},
    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_BRUTE_FORCE},
    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_GRID},
};
INSTANTIATE_TEST_SUITE_P(Cpu, IndexKnn, ::testing::ValuesIn(kCpuConfigs), IndexConfigName());

// ---- Automatic choices ------------------------------------------------------

int built_structure(const std::vector<float>& points, int dim, const knn_options& opt) {
  IndexHandle index = build_index(points, dim, opt);
  int structure = -1;
  if (index) {
    EXPECT_EQ(knn_index_info(index.get(), nullptr, nullptr, nullptr, &structure), KNN_OK);
  }
  return structure;
}

TEST(IndexAuto, PicksBruteForceForFewPointsOrManyDimensions) {
  const knn_options opt = options_for({KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO});
  EXPECT_EQ(built_structure(make_rows(Dist::Uniform, 500, 3, 1), 3, opt),
            KNN_STRUCTURE_BRUTE_FORCE);
  EXPECT_EQ(built_structure(make_rows(Dist::Uniform, 5000, 40, 1), 40, opt),
            KNN_STRUCTURE_BRUTE_FORCE);
  EXPECT_EQ(built_structure(make_rows(Dist::Uniform, 5000, 5, 1), 5, opt), KNN_STRUCTURE_KDTREE);
  const int three_d = built_structure(make_rows(Dist::Uniform, 5000, 3, 1), 3, opt);
  EXPECT_TRUE(three_d == KNN_STRUCTURE_GRID || three_d == KNN_STRUCTURE_KDTREE) << three_d;
}

TEST(IndexAuto, BackendIsTheCpuWithoutADevice) {
  if (cuGetDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present: AUTO may pick it";
  IndexHandle index = build_index(make_rows(Dist::Uniform, 100, 3, 2), 3,
                                  options_for({KNN_BACKEND_AUTO, KNN_STRUCTURE_AUTO}));
  ASSERT_TRUE(index);
  int backend = -1;
  ASSERT_EQ(knn_index_info(index.get(), nullptr, nullptr, &backend, nullptr), KNN_OK);
  EXPECT_EQ(backend, KNN_BACKEND_OPENMP);
}

// AUTO backend and structure (and NULL options) answer exactly what every
// explicit structure answers.
TEST(IndexAuto, AnswersLikeEveryExplicitChoice) {
  for (const int dim : {2, 3, 20})
    for (const int64_t n : {int64_t{300}, int64_t{6000}}) {
      SCOPED_TRACE("dim=" + std::to_string(dim) + " n=" + std::to_string(n));
      const std::vector<float> points = make_rows(Dist::Clustered, n, dim, 3);
      const std::vector<float> queries = make_query_rows(Dist::Clustered, 200, dim, 4);
      knn_index* raw = nullptr;
      ASSERT_EQ(knn_index_build(points.data(), n, dim, nullptr, &raw), KNN_OK) << knn_last_error();
      IndexHandle automatic(raw);
      const KnnResult want = query_index(automatic.get(), queries, dim, 7);
      const RadiusResult want_radius = radius_index(automatic.get(), queries, dim, 2.0f, 10);
      for (const int structure :
           {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_BRUTE_FORCE, KNN_STRUCTURE_GRID}) {
        if (structure == KNN_STRUCTURE_GRID && dim != 3) continue;
        IndexHandle index = build_index(points, dim, options_for({KNN_BACKEND_OPENMP, structure}));
        ASSERT_TRUE(index);
        EXPECT_TRUE(same_knn(want, query_index(index.get(), queries, dim, 7)));
        EXPECT_TRUE(same_radius(want_radius, radius_index(index.get(), queries, dim, 2.0f, 10)));
      }
    }
}

// Large k takes the heap path of the k-best lists; the order must still be
// exact, ties by index included.
TEST(IndexCpu, LargeKOnManyTies) {
  for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_BRUTE_FORCE})
    expect_knn_like_oracle(options_for({KNN_BACKEND_OPENMP, structure}), Dist::Grid, 4097, 30, 2,
                           3000, 5);
}

// Squared distances on float's subnormal grid (coordinates near 1e-22):
// the kd-tree's kNN walks start from a bound taken from the thread's
// previous query, which rounding can put below the k-th distance here; the
// walk that ends short goes again from an open list. The rows are the brute
// force's, bit for bit, queried and all-kNN, at scales where that happens.
TEST(IndexCpu, SubnormalDistancesAnswerLikeTheBruteForce) {
  for (const float scale : {1e-21f, 1e-22f, 3e-23f}) {
    std::vector<float> points = make_rows(Dist::Uniform, 3000, 3, 17);
    for (float& x : points) x *= scale;
    IndexHandle tree =
        build_index(points, 3, options_for({KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE}));
    IndexHandle brute =
        build_index(points, 3, options_for({KNN_BACKEND_OPENMP, KNN_STRUCTURE_BRUTE_FORCE}));
    ASSERT_TRUE(tree && brute);
    for (const int k : {8, 30}) {
      SCOPED_TRACE(::testing::Message() << "scale " << scale << ", k " << k);
      EXPECT_TRUE(
          same_knn(query_index(brute.get(), points, 3, k), query_index(tree.get(), points, 3, k)));
      EXPECT_TRUE(
          same_knn(query_self(brute.get(), 3000, k, true), query_self(tree.get(), 3000, k, true)));
    }
  }
}

// The index keeps its own copy: changing the caller's array after the build
// changes nothing.
TEST(IndexCpu, IndexOwnsItsPoints) {
  std::vector<float> points = make_rows(Dist::Uniform, 3000, 4, 6);
  const std::vector<float> original = points;
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 50, 4, 7);
  for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_BRUTE_FORCE}) {
    points = original;
    IndexHandle index = build_index(points, 4, options_for({KNN_BACKEND_OPENMP, structure}));
    ASSERT_TRUE(index);
    std::fill(points.begin(), points.end(), 123.0f);
    EXPECT_TRUE(same_knn(oracle_knn(original.data(), 3000, queries.data(), 50, 4, 6),
                         query_index(index.get(), queries, 4, 6)));
  }
}

}  // namespace
}  // namespace knn_test
