// Radius search into CSR rows (knn_index_radius_count, knn_offsets_from_counts,
// knn_index_radius_fill) on every structure, against the brute-force radius
// oracle (tests/support/index_oracle.h) with every hit kept: counts equal, rows equal
// and distances bit-equal. The CUDA configs run the same cases where a device
// is present and skip elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "index_oracle64.h"
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

// ---- Pairs within a radius, neighbour counts (knn_index_radius_pairs,
// knn_index_count_neighbors) against brute force over every pair ----------------

// The indexed points twice: as built (float32), and as doubles in a float64
// index of the same config.
struct TwinIndexes {
  IndexHandle f32, f64;
  std::vector<double> points64;
};

TwinIndexes build_twins(const std::vector<float>& points, int dim, const knn_options& opt) {
  TwinIndexes t;
  t.f32 = build_index(points, dim, opt);
  t.points64.assign(points.begin(), points.end());
  knn_index* index = nullptr;
  EXPECT_EQ(knn_index_build_f64(t.points64.empty() ? nullptr : t.points64.data(),
                                static_cast<int64_t>(points.size()) / dim, dim, &opt, &index),
            KNN_OK)
      << knn_last_error();
  t.f64.reset(index);
  return t;
}

// The squared distance of rows a and b as each index computes it: the
// contract's float32 sum, or the float64 one.
double pair_sq(const TwinIndexes& t, const std::vector<float>& points, bool f64, int64_t a,
               int64_t b, int dim) {
  if (f64) return sq_distance64(&t.points64[a * dim], &t.points64[b * dim], dim);
  return contract_sq_distance(&points[a * dim], &points[b * dim], dim);
}

// A radius as a float32 index takes it: rounded, and infinite beyond float's range.
float float_radius(double radius) {
  return radius > std::numeric_limits<float>::max() ? std::numeric_limits<float>::infinity()
                                                    : static_cast<float>(radius);
}

// Every pair (i, j), i < j, the documented predicate keeps, in (i, j) order.
std::vector<int64_t> oracle_pairs(const TwinIndexes& t, const std::vector<float>& points, int dim,
                                  bool f64, double radius) {
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  const float r = float_radius(radius);
  std::vector<int64_t> pairs;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      const double d = pair_sq(t, points, f64, i, j, dim);
      if (f64 ? d <= radius * radius : static_cast<float>(d) <= f32_mul(r, r)) {
        pairs.push_back(i);
        pairs.push_back(j);
      }
    }
  return pairs;
}

TEST_P(RadiusCsr, PairsWithinRadiusMatchOracle) {
  const knn_options opt = options_for(GetParam());
  const std::vector<int> dims =
      GetParam().structure == KNN_STRUCTURE_GRID ? std::vector<int>{3} : std::vector<int>{1, 3};
  const Dist dists[] = {Dist::Duplicates, Dist::Uniform, Dist::Clustered};
  int turn = 0;
  for (const int dim : dims)
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{600}}) {
      const Dist dist = dists[turn++ % 3];
      const std::vector<float> points = make_rows(dist, n, dim, 70 + turn);
      const TwinIndexes twins = build_twins(points, dim, opt);
      ASSERT_TRUE(twins.f32 && twins.f64);
      for (const bool f64 : {false, true})
        for (const double radius :
             {0.0, 0.05, 0.3, 1e300, std::numeric_limits<double>::infinity()}) {
          SCOPED_TRACE(describe(dist, n, 0, 0, 70 + turn, ("dim=" + std::to_string(dim)).c_str()));
          SCOPED_TRACE(std::string(f64 ? "float64" : "float32") + " radius " +
                       std::to_string(radius));
          const knn_index* index = f64 ? twins.f64.get() : twins.f32.get();
          const std::vector<int64_t> want = oracle_pairs(twins, points, dim, f64, radius);
          const int64_t total = static_cast<int64_t>(want.size()) / 2;
          int64_t count = -5;
          ASSERT_EQ(knn_index_radius_pairs(index, radius, nullptr, 0, nullptr, &count, nullptr),
                    KNN_OK)
              << knn_last_error();
          ASSERT_EQ(count, total);
          std::vector<int64_t> got(want.size() + 2, -7);
          count = -5;
          ASSERT_EQ(knn_index_radius_pairs(index, radius, nullptr, total + 1, got.data(), &count,
                                           nullptr),
                    KNN_OK)
              << knn_last_error();
          ASSERT_EQ(count, total);
          EXPECT_EQ(std::vector<int64_t>(got.begin(), got.begin() + 2 * total), want);
          EXPECT_EQ(got[2 * total], -7);  // nothing past the pairs
          // With the counts of the points themselves the call skips its own.
          std::vector<int64_t> own(static_cast<size_t>(n));
          if (n > 0) {
            ASSERT_EQ(f64 ? knn_index_radius_count_f64(index, twins.points64.data(), n, radius,
                                                       own.data(), nullptr)
                          : knn_index_radius_count(index, points.data(), n, float_radius(radius),
                                                   own.data(), nullptr),
                      KNN_OK)
                << knn_last_error();
            std::vector<int64_t> again(got.size(), -7);
            ASSERT_EQ(knn_index_radius_pairs(index, radius, own.data(), total, again.data(), &count,
                                             nullptr),
                      KNN_OK)
                << knn_last_error();
            EXPECT_EQ(again, got);
          }
          if (total > 0) {
            std::vector<int64_t> small(got.size(), -7);
            count = -5;
            EXPECT_EQ(knn_index_radius_pairs(index, radius, nullptr, total - 1, small.data(),
                                             &count, nullptr),
                      KNN_ERR_INVALID_ARGUMENT);
            EXPECT_NE(std::string(knn_last_error()).find("capacity"), std::string::npos);
            EXPECT_EQ(count, total);
            EXPECT_EQ(small, std::vector<int64_t>(got.size(), -7));  // untouched
          }
        }
    }
}

// Shapes where pairs tie at exactly the radius or all at 0, trees of tiny
// leaves (many leaves, each pair tested from the leaf of its smaller
// position on the OpenMP kd-tree), one thread and several, and a capacity one
// short then exact: the pairs are the oracle's, whatever the team.
TEST_P(RadiusCsr, PairsOnTiesLinesAndEqualPoints) {
  KNN_SKIP_WITHOUT_BACKEND(GetParam());
  struct Shape {
    const char* name;
    int dim;
    std::vector<float> points;
    std::vector<double> radii;
  };
  std::vector<Shape> shapes;
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}})
    shapes.push_back(
        {"tiny", 3, std::vector<float>(static_cast<size_t>(n) * 3, 0.25f), {0.0, 1.0}});
  Shape lattice{"lattice, each point twice", 3, {}, {0.0, 1.0, 2.0}};
  for (int copy = 0; copy < 2; ++copy)
    for (int x = 0; x < 6; ++x)
      for (int y = 0; y < 6; ++y)
        for (int z = 0; z < 6; ++z)
          lattice.points.insert(lattice.points.end(), {float(x), float(y), float(z)});
  shapes.push_back(lattice);
  shapes.push_back({"all equal", 3, std::vector<float>(300 * 3, 0.5f), {0.0, 0.1}});
  Shape line1{"line, 1-D", 1, {}, {0.25, 0.5}}, line3{"line in 3-D", 3, {}, {0.25, 0.5}};
  for (int k = 0; k < 200; ++k) {
    const float x = static_cast<float>((k * 37) % 200) * 0.25f;  // not in input order
    line1.points.push_back(x);
    line3.points.insert(line3.points.end(), {x, 1.0f, -2.0f});
  }
  shapes.push_back(line1);
  shapes.push_back(line3);
  for (const Shape& shape : shapes) {
    const knn_options build = options_for(GetParam(), 0, 3);
    if (GetParam().structure == KNN_STRUCTURE_GRID && shape.dim != 3) continue;
    const TwinIndexes twins = build_twins(shape.points, shape.dim, build);
    ASSERT_TRUE(twins.f32 && twins.f64);
    for (const bool f64 : {false, true})
      for (const double radius : shape.radii) {
        SCOPED_TRACE(std::string(shape.name) +
                     " n=" + std::to_string(shape.points.size() / static_cast<size_t>(shape.dim)) +
                     (f64 ? " float64" : " float32") + " radius " + std::to_string(radius));
        const knn_index* index = f64 ? twins.f64.get() : twins.f32.get();
        const std::vector<int64_t> want = oracle_pairs(twins, shape.points, shape.dim, f64, radius);
        const int64_t total = static_cast<int64_t>(want.size()) / 2;
        for (const int threads : {1, 4}) {
          SCOPED_TRACE("threads " + std::to_string(threads));
          const knn_options call = options_for(GetParam(), threads, 3);
          int64_t count = -5;
          std::vector<int64_t> got(want.size() + 2, -7);
          if (total > 0) {
            EXPECT_EQ(knn_index_radius_pairs(index, radius, nullptr, total - 1, got.data(), &count,
                                             &call),
                      KNN_ERR_INVALID_ARGUMENT);
            EXPECT_EQ(count, total);
            EXPECT_EQ(got, std::vector<int64_t>(want.size() + 2, -7));  // untouched
          }
          count = -5;
          ASSERT_EQ(
              knn_index_radius_pairs(index, radius, nullptr, total, got.data(), &count, &call),
              KNN_OK)
              << knn_last_error();
          EXPECT_EQ(count, total);
          EXPECT_EQ(std::vector<int64_t>(got.begin(), got.begin() + 2 * total), want);
          EXPECT_EQ(got[2 * total], -7);
        }
      }
  }
}

TEST_P(RadiusCsr, CountNeighborsMatchOracle) {
  const knn_options opt = options_for(GetParam());
  const int dim = 3;
  const std::vector<float> points = make_rows(Dist::Duplicates, 700, dim, 81);
  const std::vector<float> queries = make_query_rows(Dist::Duplicates, 250, dim, 82);
  const std::vector<double> queries64(queries.begin(), queries.end());
  const TwinIndexes twins = build_twins(points, dim, opt);
  ASSERT_TRUE(twins.f32 && twins.f64);
  const int64_t n = 700, m = 250;
  // Any order, repeats, a negative radius (no pair) and +infinity (all).
  const std::vector<double> radii = {0.3, -1.0, 0.05, 0.0, 0.05, 1e300, 0.2, 0.11};
  const int64_t nr = static_cast<int64_t>(radii.size());
  std::vector<double> qw(m), pw(n);
  for (int64_t i = 0; i < m; ++i) qw[i] = 0.5 + static_cast<double>(i % 7) / 3.0;
  for (int64_t j = 0; j < n; ++j) pw[j] = 0.25 + static_cast<double>(j % 5);
  for (const bool f64 : {false, true}) {
    SCOPED_TRACE(f64 ? "float64" : "float32");
    std::vector<int64_t> want(nr, 0);
    std::vector<double> want_w(nr, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double d = f64 ? sq_distance64(&queries64[i * dim], &twins.points64[j * dim], dim)
                             : contract_sq_distance(&queries[i * dim], &points[j * dim], dim);
        for (int64_t b = 0; b < nr; ++b)
          if (radii[b] >= 0 && d <= radii[b] * radii[b]) {
            ++want[b];
            want_w[b] += qw[i] * pw[j];
          }
      }
    std::vector<int64_t> counts(nr, -3);
    std::vector<double> weighted(nr, -3.0);
    const int status = f64 ? knn_index_count_neighbors_f64(twins.f64.get(), queries64.data(), m,
                                                           radii.data(), nr, qw.data(), pw.data(),
                                                           counts.data(), weighted.data(), nullptr)
                           : knn_index_count_neighbors(twins.f32.get(), queries.data(), m,
                                                       radii.data(), nr, qw.data(), pw.data(),
                                                       counts.data(), weighted.data(), nullptr);
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    EXPECT_EQ(counts, want);
    EXPECT_EQ(want[1], 0);
    EXPECT_EQ(want[5], n * m);
    for (int64_t b = 0; b < nr; ++b)
      EXPECT_NEAR(weighted[b], want_w[b], 1e-12 * std::max(1.0, want_w[b])) << "radius " << b;
    // Without weights the sums are the counts; counts alone need no sums.
    std::vector<double> plain(nr, -3.0);
    std::fill(counts.begin(), counts.end(), -3);
    ASSERT_EQ(
        f64 ? knn_index_count_neighbors_f64(twins.f64.get(), queries64.data(), m, radii.data(), nr,
                                            nullptr, nullptr, counts.data(), plain.data(), nullptr)
            : knn_index_count_neighbors(twins.f32.get(), queries.data(), m, radii.data(), nr,
                                        nullptr, nullptr, counts.data(), plain.data(), nullptr),
        KNN_OK)
        << knn_last_error();
    EXPECT_EQ(counts, want);
    for (int64_t b = 0; b < nr; ++b) EXPECT_EQ(plain[b], static_cast<double>(want[b]));
  }
}

// A float32 index counts by d * d <= r * r in double, not by the float32
// product of knn_index_radius: two points 1 apart (squared distance 1.0f)
// are not within r = 1 - 2^-40, though (float)r * (float)r is 1.
TEST_P(RadiusCsr, CountNeighborsComparesInDouble) {
  const knn_options opt = options_for(GetParam());
  if (GetParam().structure == KNN_STRUCTURE_GRID) GTEST_SKIP() << "the grid is 3-D";
  const std::vector<float> points = {0.0f, 1.0f};
  IndexHandle index = build_index(points, 1, opt);
  ASSERT_TRUE(index);
  const double radii[] = {1.0 - std::ldexp(1.0, -40), 1.0};
  int64_t counts[2] = {-1, -1};
  ASSERT_EQ(knn_index_count_neighbors(index.get(), points.data(), 2, radii, 2, nullptr, nullptr,
                                      counts, nullptr, nullptr),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(counts[0], 2);  // each point with itself
  EXPECT_EQ(counts[1], 4);
}

TEST_P(RadiusCsr, PairsAndCountsRefuseBadArguments) {
  const knn_options opt = options_for(GetParam());
  const std::vector<float> points = make_rows(Dist::Uniform, 50, 3, 90);
  const TwinIndexes twins = build_twins(points, 3, opt);
  ASSERT_TRUE(twins.f32 && twins.f64);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<int64_t> pairs(8, -7);
  int64_t count = -5;
  EXPECT_EQ(knn_index_radius_pairs(twins.f32.get(), nan, nullptr, 4, pairs.data(), &count, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(
      knn_index_radius_pairs(twins.f32.get(), -0.5, nullptr, 4, pairs.data(), &count, nullptr),
      KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(
      knn_index_radius_pairs(twins.f32.get(), 0.1, nullptr, 4, pairs.data(), nullptr, nullptr),
      KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_index_radius_pairs(twins.f32.get(), 0.1, nullptr, 4, nullptr, &count, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(
      knn_index_radius_pairs(twins.f32.get(), 0.1, nullptr, -1, pairs.data(), &count, nullptr),
      KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_index_radius_pairs(twins.f32.get(), 0.1, nullptr, INT64_MAX / 2, pairs.data(),
                                   &count, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_index_radius_pairs(nullptr, 0.1, nullptr, 4, pairs.data(), &count, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(count, -5);
  EXPECT_EQ(pairs, std::vector<int64_t>(8, -7));
  // Counts no search gives are refused before anything is written; counts
  // that only the fill's search disagrees with fail it, pairs all -1.
  std::vector<int64_t> own(50, 1);
  own[3] = 0;
  EXPECT_EQ(
      knn_index_radius_pairs(twins.f32.get(), 0.0, own.data(), 4, pairs.data(), &count, nullptr),
      KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("self_counts[3]"), std::string::npos);
  EXPECT_EQ(pairs, std::vector<int64_t>(8, -7));
  own[3] = 2;
  own[4] = 2;  // a pair (3, 4) that a radius of 0 does not hold
  EXPECT_EQ(
      knn_index_radius_pairs(twins.f32.get(), 0.0, own.data(), 4, pairs.data(), &count, nullptr),
      KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(pairs, (std::vector<int64_t>{-1, -1, -7, -7, -7, -7, -7, -7}));
  count = -5;
  std::fill(pairs.begin(), pairs.end(), -7);

  const double radii[] = {0.1, nan};
  std::vector<int64_t> counts(2, -3);
  std::vector<double> weighted(2, -3.0);
  EXPECT_EQ(knn_index_count_neighbors(twins.f32.get(), points.data(), 50, radii, 2, nullptr,
                                      nullptr, counts.data(), weighted.data(), nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("radii[1]"), std::string::npos);
  EXPECT_EQ(knn_index_count_neighbors(twins.f32.get(), points.data(), 50, radii, 1, nullptr,
                                      nullptr, nullptr, nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_index_count_neighbors(twins.f32.get(), points.data(), 50, nullptr, 1, nullptr,
                                      nullptr, counts.data(), nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_index_count_neighbors(twins.f32.get(), points.data(), -1, radii, 1, nullptr,
                                      nullptr, counts.data(), nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  // The twin of the other precision is refused, naming the right one.
  EXPECT_EQ(knn_index_count_neighbors(twins.f64.get(), points.data(), 50, radii, 1, nullptr,
                                      nullptr, counts.data(), nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("knn_index_count_neighbors_f64"), std::string::npos);
  std::vector<float> bad = points;
  bad[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(knn_index_count_neighbors(twins.f32.get(), bad.data(), 50, radii, 1, nullptr, nullptr,
                                      counts.data(), weighted.data(), nullptr),
            KNN_ERR_NONFINITE_INPUT);
  EXPECT_EQ(counts, std::vector<int64_t>(2, -3));
  EXPECT_EQ(weighted, std::vector<double>(2, -3.0));
  // The next call works.
  ASSERT_EQ(knn_index_count_neighbors(twins.f32.get(), points.data(), 50, radii, 1, nullptr,
                                      nullptr, counts.data(), nullptr, nullptr),
            KNN_OK)
      << knn_last_error();
  EXPECT_GE(counts[0], 50);
}

// An AUTO index on the CPU that serves its calls with a grid answers the
// pairs from the kd-tree it adds (each pair found once): the same pairs as
// the oracle and as a grid forced by the caller (every point's row).
TEST(RadiusPairs, AutoGridIndexAnswersFromItsKdTree) {
  const int dim = 3;
  const int64_t n = 3000;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 91);
  knn_options automatic;
  knn_options_init(&automatic);
  automatic.backend = KNN_BACKEND_OPENMP;
  const TwinIndexes twins = build_twins(points, dim, automatic);
  const TwinIndexes grid =
      build_twins(points, dim, options_for({KNN_BACKEND_OPENMP, KNN_STRUCTURE_GRID}));
  ASSERT_TRUE(twins.f32 && twins.f64 && grid.f32 && grid.f64);
  for (const bool f64 : {false, true}) {
    const knn_index* index = f64 ? twins.f64.get() : twins.f32.get();
    int structure = -1;
    ASSERT_EQ(knn_index_info(index, nullptr, nullptr, nullptr, &structure), KNN_OK);
    ASSERT_EQ(structure, KNN_STRUCTURE_GRID) << "AUTO no longer picks the grid here";
    for (const double radius : {0.03, 0.1}) {
      SCOPED_TRACE(std::string(f64 ? "float64" : "float32") + " radius " + std::to_string(radius));
      const std::vector<int64_t> want = oracle_pairs(twins, points, dim, f64, radius);
      const int64_t total = static_cast<int64_t>(want.size()) / 2;
      ASSERT_GT(total, 0);
      const knn_index* forced_grid = f64 ? grid.f64.get() : grid.f32.get();
      for (const knn_index* asked : {index, forced_grid}) {
        std::vector<int64_t> got(want.size(), -7);
        int64_t count = -5;
        ASSERT_EQ(
            knn_index_radius_pairs(asked, radius, nullptr, total, got.data(), &count, nullptr),
            KNN_OK)
            << knn_last_error();
        ASSERT_EQ(count, total);
        EXPECT_EQ(got, want);
      }
    }
  }
}

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
