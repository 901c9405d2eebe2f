// knn_brute_force in dimensions 1, 2, 3, 5, 8 and 16 against the oracle:
// indices equal, squared distances bit-equal (the contract fixes the float32
// operation order), -1 / +infinity padding when k exceeds the reference set.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

class BruteForce : public ::testing::TestWithParam<int> {};

TEST_P(BruteForce, MatchesOracleBitForBit) {
  const int dim = GetParam();
  const int sizes[] = {0, 1, 2, 7, 8, 9, 32, 33, 34, 99, 100, 101, 1000};
  const int ks[] = {1, 2, 8, 33, 100};
  const int k_max = 100;
  for (Dist dist : all_dists())
    for (int n : sizes) {
      const uint64_t seed = 5000 + 131 * dim + n;
      const std::vector<float> ref = make_rows(dist, n, dim, seed);
      std::vector<float> queries = make_query_rows(dist, 150, dim, seed);
      queries.insert(queries.end(), ref.begin(), ref.end());  // queries == points
      const int m = static_cast<int>(queries.size() / dim);
      const KnnResult all = oracle_knn(ref.data(), n, queries.data(), m, dim, k_max);
      ASSERT_TRUE(kth_matches_double(ref.data(), n, queries.data(), m, dim, k_max, all.idx.data()))
          << describe(dist, n, m, k_max, seed) << " dim=" << dim << " (oracle)";
      for (int k : ks) {
        SCOPED_TRACE(describe(dist, n, m, k, seed) + " dim=" + std::to_string(dim));
        const KnnResult want = first_columns(all, k);
        std::vector<int> ind(static_cast<size_t>(m) * k, kSentinelInt);
        std::vector<float> sq(static_cast<size_t>(m) * k, -7.0f);
        KNN_ASSERT_OK(
            knn_brute_force(ref.data(), n, queries.data(), m, dim, k, sq.data(), ind.data()));
        ASSERT_TRUE(same_rows(want.idx, ind, m, k));
        ASSERT_TRUE(same_bits(want.dist, sq));
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Dims, BruteForce, ::testing::Values(1, 2, 3, 5, 8, 16),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "dim" + std::to_string(info.param);
                         });

TEST(BruteForceOutputs, EitherOutputMayBeNull) {
  const int dim = 5, n = 300, m = 40, k = 12;
  const std::vector<float> ref = make_rows(Dist::Grid, n, dim, 1);
  const std::vector<float> queries = make_query_rows(Dist::Grid, m, dim, 2);
  const KnnResult want = oracle_knn(ref.data(), n, queries.data(), m, dim, k);
  std::vector<int> ind(m * k, kSentinelInt);
  std::vector<float> sq(m * k, -7.0f);
  KNN_ASSERT_OK(knn_brute_force(ref.data(), n, queries.data(), m, dim, k, nullptr, ind.data()));
  EXPECT_TRUE(same_rows(want.idx, ind, m, k));
  KNN_ASSERT_OK(knn_brute_force(ref.data(), n, queries.data(), m, dim, k, sq.data(), nullptr));
  EXPECT_TRUE(same_bits(want.dist, sq));
  KNN_ASSERT_OK(knn_brute_force(ref.data(), n, queries.data(), m, dim, k, nullptr, nullptr));
}

TEST(BruteForceOutputs, HighDimensions) {
  for (int dim : {17, 64, 100}) {
    const int n = 400, m = 60, k = 9;
    for (Dist dist : {Dist::Uniform, Dist::Clustered, Dist::Grid, Dist::Huge}) {
      SCOPED_TRACE(describe(dist, n, m, k, 3) + " dim=" + std::to_string(dim));
      const std::vector<float> ref = make_rows(dist, n, dim, 3);
      const std::vector<float> queries = make_query_rows(dist, m, dim, 4);
      const KnnResult want = oracle_knn(ref.data(), n, queries.data(), m, dim, k);
      std::vector<int> ind(m * k, kSentinelInt);
      std::vector<float> sq(m * k, -7.0f);
      KNN_ASSERT_OK(
          knn_brute_force(ref.data(), n, queries.data(), m, dim, k, sq.data(), ind.data()));
      EXPECT_TRUE(same_rows(want.idx, ind, m, k));
      EXPECT_TRUE(same_bits(want.dist, sq));
    }
  }
}

TEST(BruteForceOutputs, PaddingIsMinusOneAndInfinity) {
  const int dim = 2, n = 3, m = 2, k = 6;
  const std::vector<float> ref = {0, 0, 1, 0, 0, 2};
  const std::vector<float> queries = {0, 0, 1, 1};
  std::vector<int> ind(m * k, kSentinelInt);
  std::vector<float> sq(m * k, -7.0f);
  KNN_ASSERT_OK(knn_brute_force(ref.data(), n, queries.data(), m, dim, k, sq.data(), ind.data()));
  EXPECT_EQ(ind, (std::vector<int>{0, 1, 2, -1, -1, -1, 1, 0, 2, -1, -1, -1}));
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sq, (std::vector<float>{0, 1, 4, inf, inf, inf, 1, 2, 2, inf, inf, inf}));
}

}  // namespace
}  // namespace knn_test
