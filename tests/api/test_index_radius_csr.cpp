// Radius search into CSR rows (knn_index_radius_count, knn_offsets_from_counts,
// knn_index_radius_fill) on every structure, against the brute-force radius
// oracle (tests/support/index_oracle.h) with every hit kept: counts equal, rows equal
// and distances bit-equal. The CUDA configs run the same cases where a device
// is present and skip elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "index_test_helpers.h"

namespace knn_test {
namespace {

class RadiusCsr : public ::testing::TestWithParam<IndexConfig> {
 protected:
  void SetUp() override { KNN_SKIP_WITHOUT_BACKEND(GetParam()); }
};

// Every structure, several dimensions, sizes and radii (0, small, large,
// infinite: every point), on data with ties and duplicates.
TEST_P(RadiusCsr, MatchesOracle) {
  const knn_options opt = options_for(GetParam());
  const std::vector<int> dims =
      GetParam().structure == KNN_STRUCTURE_GRID ? std::vector<int>{3} : std::vector<int>{1, 3, 8};
  const Dist dists[] = {Dist::Uniform, Dist::Duplicates, Dist::Clustered, Dist::Grid};
  int turn = 0;
  for (const int dim : dims)
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{1500}}) {
      const Dist dist = dists[turn++ % 4];
      const std::vector<float> points = make_rows(dist, n, dim, 40 + turn);
      const std::vector<float> queries = make_query_rows(dist, 300, dim, 41 + turn);
      IndexHandle index = build_index(points, dim, opt);
      ASSERT_TRUE(index);
      for (const float radius : {0.0f, 0.05f, 0.3f, std::numeric_limits<float>::infinity()}) {
        SCOPED_TRACE(describe(dist, n, 300, 0, 40 + turn, ("dim=" + std::to_string(dim)).c_str()));
        SCOPED_TRACE(radius);
        const RadiusResult want = oracle_radius(points.data(), n, queries.data(), 300, dim, radius,
                                                static_cast<int>(std::max<int64_t>(n, 1)));
        EXPECT_TRUE(same_as_oracle(want, radius_csr(index.get(), queries, dim, radius), true));
        if (radius == 0.3f) {
          EXPECT_TRUE(
              same_as_oracle(want, radius_csr(index.get(), queries, dim, radius, false), false));
        }
      }
    }
}

// Rows long enough that the fill stages them in several runs (2^22 padded
// slots each), and one query with every point among queries with few: the
// runs split around it.
TEST_P(RadiusCsr, LongAndSkewedRowsAcrossStagingRuns) {
  const knn_options opt = options_for(GetParam());
  const int dim = 3;
  const int64_t n = 6000, m = 1600;
  // A fifth of the points on the centre of the cube, the rest uniform.
  std::vector<float> points = make_rows(Dist::Uniform, n, dim, 7);
  std::fill(points.begin(), points.begin() + n / 5 * dim, 0.5f);
  std::vector<float> queries = make_query_rows(Dist::Uniform, m, dim, 8);
  IndexHandle index = build_index(points, dim, opt);
  ASSERT_TRUE(index);
  // Radius 2 covers most of the cube: every query finds thousands (about
  // 8e6 slots). The CUDA brute force keeps rows of at most kMaxWarpK (2048) entries and
  // refuses longer ones, as the contract says; the others fill them.
  const RadiusResult all =
      oracle_radius(points.data(), n, queries.data(), m, dim, 2.0f, static_cast<int>(n));
  if (GetParam().backend == KNN_BACKEND_CUDA && GetParam().structure == KNN_STRUCTURE_BRUTE_FORCE) {
    std::vector<int64_t> offsets(static_cast<size_t>(m) + 1, 0);
    for (int64_t i = 0; i < m; ++i)
      offsets[static_cast<size_t>(i + 1)] =
          offsets[static_cast<size_t>(i)] + all.counts[static_cast<size_t>(i)];
    std::vector<int32_t> idx(static_cast<size_t>(offsets.back()), -7);
    EXPECT_TRUE(fails_with(knn_index_radius_fill(index.get(), queries.data(), m, 2.0f,
                                                 offsets.data(), idx.data(), nullptr, nullptr),
                           KNN_ERR_UNSUPPORTED, "keeps at most 2048 neighbours per query"));
  } else {
    EXPECT_TRUE(same_as_oracle(all, radius_csr(index.get(), queries, dim, 2.0f), true));
  }
  // Radius 0.1 finds a few dozen, except for the queries on the centre,
  // which find the 1200 there too.
  const float radius = 0.1f;
  for (int64_t i = 0; i < m; i += 400) std::fill_n(queries.begin() + i * dim, dim, 0.5f);
  const RadiusResult some =
      oracle_radius(points.data(), n, queries.data(), m, dim, radius, static_cast<int>(n));
  EXPECT_TRUE(same_as_oracle(some, radius_csr(index.get(), queries, dim, radius), true));
}

// Offsets that do not match the counts are refused, naming the first bad
// entry: before anything is written when no search could give them, else as
// the one search of the rows finds the first row that disagrees.
TEST_P(RadiusCsr, RefusesOffsetsThatDisagreeWithTheCounts) {
  const knn_options opt = options_for(GetParam());
  const std::vector<float> points = make_rows(Dist::Uniform, 500, 3, 3);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 20, 3, 4);
  IndexHandle index = build_index(points, 3, opt);
  ASSERT_TRUE(index);
  const Csr good = radius_csr(index.get(), queries, 3, 0.3f);
  ASSERT_GT(good.offsets.back(), 2);
  std::vector<int32_t> idx(static_cast<size_t>(good.offsets.back()) + 1, -7);
  std::vector<float> dist(idx.size(), -7.0f);
  // Offsets no search could give (offsets[0] not 0): nothing written.
  std::vector<int64_t> bad = good.offsets;
  bad[0] = 1;
  EXPECT_TRUE(fails_with(knn_index_radius_fill(index.get(), queries.data(), 20, 0.3f, bad.data(),
                                               idx.data(), dist.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "offsets[0] is 1 but the counts give 0"));
  for (size_t i = 0; i < idx.size(); ++i) {
    ASSERT_EQ(idx[i], -7) << "a refused fill wrote index slot " << i;
    ASSERT_EQ(dist[i], -7.0f) << "a refused fill wrote distance slot " << i;
  }
  bad = good.offsets;
  bad[5] += 1;
  EXPECT_TRUE(fails_with(knn_index_radius_fill(index.get(), queries.data(), 20, 0.3f, bad.data(),
                                               idx.data(), dist.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT,
                         "offsets[5] is " + std::to_string(bad[5]) + " but the counts give " +
                             std::to_string(good.offsets[5])));
  // Offsets a search could give, but of a larger radius, or all zero: the
  // fill searches each row once and stops at the first that disagrees, its
  // outputs (as long as the offsets say) all missing.
  const Csr wider = radius_csr(index.get(), queries, 3, 0.5f);
  const std::vector<int64_t> zeros(21, 0);
  for (const std::vector<int64_t>* offsets : {&wider.offsets, &zeros}) {
    int64_t first_bad = 1;
    while (good.offsets[static_cast<size_t>(first_bad)] ==
           (*offsets)[static_cast<size_t>(first_bad)])
      ++first_bad;
    std::vector<int32_t> wide_idx(static_cast<size_t>(offsets->back()), -7);
    std::vector<float> wide_dist(wide_idx.size(), -7.0f);
    EXPECT_TRUE(fails_with(
        knn_index_radius_fill(index.get(), queries.data(), 20, 0.3f, offsets->data(),
                              wide_idx.empty() ? nullptr : wide_idx.data(),
                              wide_dist.empty() ? nullptr : wide_dist.data(), nullptr),
        KNN_ERR_INVALID_ARGUMENT,
        "offsets[" + std::to_string(first_bad) + "] is " +
            std::to_string((*offsets)[static_cast<size_t>(first_bad)]) + " but the counts give " +
            std::to_string((*offsets)[static_cast<size_t>(first_bad - 1)] +
                           good.offsets[static_cast<size_t>(first_bad)] -
                           good.offsets[static_cast<size_t>(first_bad - 1)])));
    EXPECT_EQ(wide_idx, std::vector<int32_t>(wide_idx.size(), -1));
    EXPECT_EQ(wide_dist,
              std::vector<float>(wide_dist.size(), std::numeric_limits<float>::infinity()));
  }
  EXPECT_TRUE(fails_with(knn_index_radius_fill(index.get(), queries.data(), 20, 0.3f, nullptr,
                                               idx.data(), dist.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "offsets is NULL"));
  EXPECT_TRUE(fails_with(knn_index_radius_fill(index.get(), queries.data(), 20, 0.3f,
                                               good.offsets.data(), nullptr, dist.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "indices is NULL while offsets[m] is"));
  std::vector<int64_t> counts(20, -7);
  EXPECT_TRUE(fails_with(
      knn_index_radius_count(index.get(), queries.data(), 20, -1.0f, counts.data(), nullptr),
      KNN_ERR_INVALID_ARGUMENT, "radius is -1"));
  EXPECT_TRUE(
      fails_with(knn_index_radius_count(index.get(), queries.data(), 20, 0.3f, nullptr, nullptr),
                 KNN_ERR_INVALID_ARGUMENT, "counts is NULL while m is 20"));
  EXPECT_EQ(counts, std::vector<int64_t>(20, -7));
}

#if defined(KNN_TEST_WITH_CUDA)
// Device queries, counts, offsets and outputs (both engines: the CUDA one
// reads the queries in place, the OpenMP one through host copies) give the
// rows of the host call.
TEST_P(RadiusCsr, DeviceArraysGiveTheHostRows) {
  SKIP_WITHOUT_DEVICE();
  const knn_options opt = options_for(GetParam());
  const std::vector<float> points = make_rows(Dist::Uniform, 4000, 3, 31);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 500, 3, 32);
  IndexHandle index = build_index(points, 3, opt);
  ASSERT_TRUE(index);
  const Csr host = radius_csr(index.get(), queries, 3, 0.2f);
  const DeviceArray<float> q(queries);
  const DeviceArray<int64_t> counts(500);
  ASSERT_EQ(knn_index_radius_count(index.get(), q.get(), 500, 0.2f, counts.get(), nullptr), KNN_OK)
      << knn_last_error();
  EXPECT_EQ(counts.to_host(500), host.counts);
  const DeviceArray<int64_t> offsets(host.offsets);
  const size_t total = host.idx.size();
  const DeviceArray<int32_t> idx(total);
  const DeviceArray<float> dist(total);
  ASSERT_EQ(knn_index_radius_fill(index.get(), q.get(), 500, 0.2f, offsets.get(), idx.get(),
                                  dist.get(), nullptr),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(idx.to_host(total), host.idx);
  EXPECT_TRUE(same_bits(dist.to_host(total), host.dist));
}
#endif

const IndexConfig kConfigs[] = {
    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE},    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_BRUTE_FORCE},
    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_GRID},      {KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE},
    {KNN_BACKEND_CUDA, KNN_STRUCTURE_BRUTE_FORCE}, {KNN_BACKEND_CUDA, KNN_STRUCTURE_GRID},
};
INSTANTIATE_TEST_SUITE_P(All, RadiusCsr, ::testing::ValuesIn(kConfigs), IndexConfigName());

TEST(OffsetsFromCounts, RunningSumAndRefusals) {
  const std::vector<int64_t> counts = {3, 0, int64_t{1} << 40, 2};
  std::vector<int64_t> offsets(5, -7);
  ASSERT_EQ(knn_offsets_from_counts(counts.data(), 4, offsets.data()), KNN_OK);
  const int64_t big = int64_t{1} << 40;  // beyond 2^31: offsets are 64-bit
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 3, 3, 3 + big, 5 + big}));
  std::vector<int64_t> untouched(5, -7);
  const std::vector<int64_t> negative = {1, -2, 3, 4};
  EXPECT_TRUE(fails_with(knn_offsets_from_counts(negative.data(), 4, untouched.data()),
                         KNN_ERR_INVALID_ARGUMENT, "counts[1] is -2"));
  const std::vector<int64_t> huge = {1, INT64_MAX, 1, 1};
  EXPECT_TRUE(fails_with(knn_offsets_from_counts(huge.data(), 4, untouched.data()),
                         KNN_ERR_INVALID_ARGUMENT, "counts up to counts[1] sum beyond INT64_MAX"));
  EXPECT_EQ(untouched, std::vector<int64_t>(5, -7));
  int64_t single = -7;
  ASSERT_EQ(knn_offsets_from_counts(nullptr, 0, &single), KNN_OK);
  EXPECT_EQ(single, 0);
  EXPECT_TRUE(fails_with(knn_offsets_from_counts(counts.data(), 4, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "offsets is NULL"));
}

}  // namespace
}  // namespace knn_test
