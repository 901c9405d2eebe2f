// The float64 index API (knn_index_build_f64 and the _f64 calls) against the
// float64 oracle of tests/support/index_oracle64.h, independent of the library. Every
// structure on the CPU, and on the GPU where a device is
// present (the CUDA configs skip cleanly otherwise).
//
// The data that motivates the family: clouds in a UTM frame (4.5e6 m east
// and north) at millimetre spacing, where float32 cannot even tell points
// 0.25 m apart; the float32 index answers differently there, the float64 one
// as the oracle, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "index_oracle64.h"
#include "index_test_helpers.h"

namespace knn_test {
namespace {

// ---- Data -------------------------------------------------------------------------

// A cloud in a UTM-like frame: x and y offset by 4.5e6 m, z by 100 m, every
// coordinate a whole number of millimetres inside a 10 m cube (in higher
// dimensions, every axis beyond z like z). Repeated values on purpose: the
// draws are 0..10000 mm, so ties occur in larger clouds.
std::vector<double> utm_rows(int64_t n, int dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> mm(0, 10000);
  std::vector<double> rows(static_cast<size_t>(n) * dim);
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < dim; ++d)
      rows[static_cast<size_t>(i * dim + d)] = (d < 2 ? 4.5e6 : 100.0) + mm(rng) * 0.001;
  return rows;
}

std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// ---- Calls of the _f64 family ---------------------------------------------------

IndexHandle build64(const std::vector<double>& points, int dim, const knn_options& opt) {
  knn_index* index = nullptr;
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  const int status =
      knn_index_build_f64(points.empty() ? nullptr : points.data(), n, dim, &opt, &index);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return IndexHandle(status == KNN_OK ? index : nullptr);
}

Rows64 query64(const knn_index* index, const std::vector<double>& queries, int dim, int k) {
  Rows64 r;
  r.m = static_cast<int64_t>(queries.size()) / dim;
  r.width = k;
  r.idx.assign(static_cast<size_t>(r.m) * k, -7);
  r.dist.assign(static_cast<size_t>(r.m) * k, -7.0);
  const int status = knn_index_query_f64(index, queries.empty() ? nullptr : queries.data(), r.m, k,
                                         r.idx.data(), r.dist.data(), nullptr);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return r;
}

Rows64 self64(const knn_index* index, int64_t n, int k, bool exclude_self) {
  Rows64 r;
  r.m = n;
  r.width = k;
  r.idx.assign(static_cast<size_t>(n) * k, -7);
  r.dist.assign(static_cast<size_t>(n) * k, -7.0);
  const int status =
      knn_index_query_self_f64(index, k, exclude_self ? 1 : 0, r.idx.data(), r.dist.data());
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return r;
}

Rows64 radius64(const knn_index* index, const std::vector<double>& queries, int dim, double radius,
                int max_neighbors) {
  Rows64 r;
  r.m = static_cast<int64_t>(queries.size()) / dim;
  r.width = max_neighbors;
  r.idx.assign(static_cast<size_t>(r.m) * max_neighbors, -7);
  r.dist.assign(static_cast<size_t>(r.m) * max_neighbors, -7.0);
  r.counts.assign(static_cast<size_t>(r.m), -7);
  const int status =
      knn_index_radius_f64(index, queries.empty() ? nullptr : queries.data(), r.m, radius,
                           max_neighbors, r.idx.data(), r.dist.data(), r.counts.data(), nullptr);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return r;
}

// The CSR form (count, offsets, fill) as the padded rows of the oracle:
// every row's entries, then -1 / +infinity up to max_neighbors.
Rows64 radius_csr64(const knn_index* index, const std::vector<double>& queries, int dim,
                    double radius, int max_neighbors) {
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  std::vector<int64_t> counts(static_cast<size_t>(m), -7), offsets(static_cast<size_t>(m) + 1);
  EXPECT_EQ(knn_index_radius_count_f64(index, queries.data(), m, radius, counts.data(), nullptr),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(knn_offsets_from_counts(counts.data(), m, offsets.data()), KNN_OK);
  const int64_t total = offsets.back();
  std::vector<int32_t> idx(static_cast<size_t>(total) + 1, -7);
  std::vector<double> dist(static_cast<size_t>(total) + 1, -7.0);
  EXPECT_EQ(knn_index_radius_fill_f64(index, queries.data(), m, radius, offsets.data(), idx.data(),
                                      dist.data(), nullptr),
            KNN_OK)
      << knn_last_error();
  Rows64 r;
  r.m = m;
  r.width = max_neighbors;
  r.idx.assign(static_cast<size_t>(m) * max_neighbors, -1);
  r.dist.assign(static_cast<size_t>(m) * max_neighbors, std::numeric_limits<double>::infinity());
  r.counts.assign(static_cast<size_t>(m), 0);
  for (int64_t i = 0; i < m; ++i) {
    r.counts[static_cast<size_t>(i)] = static_cast<int32_t>(counts[static_cast<size_t>(i)]);
    for (int64_t j = 0; j < counts[static_cast<size_t>(i)] && j < max_neighbors; ++j) {
      r.idx[static_cast<size_t>(i * max_neighbors + j)] =
          idx[static_cast<size_t>(offsets[static_cast<size_t>(i)] + j)];
      r.dist[static_cast<size_t>(i * max_neighbors + j)] =
          dist[static_cast<size_t>(offsets[static_cast<size_t>(i)] + j)];
    }
  }
  EXPECT_EQ(idx[static_cast<size_t>(total)], -7) << "fill wrote past offsets[m]";
  return r;
}

// Every call of the family on one index against the oracle.
void expect_every_call_like_oracle(const knn_options& opt, const std::vector<double>& points,
                                   const std::vector<double>& queries, int dim, int k,
                                   double radius, int max_neighbors) {
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  IndexHandle index = build64(points, dim, opt);
  ASSERT_TRUE(index);
  int scalar = -1;
  ASSERT_EQ(knn_index_scalar(index.get(), &scalar), KNN_OK);
  EXPECT_EQ(scalar, KNN_SCALAR_FLOAT64);
  EXPECT_TRUE(
      same_rows64(oracle_knn64(points, queries, dim, k), query64(index.get(), queries, dim, k)));
  if (n > 0) {
    EXPECT_TRUE(
        same_rows64(oracle_knn64(points, points, dim, k), self64(index.get(), n, k, false)));
    EXPECT_TRUE(
        same_rows64(oracle_knn64(points, points, dim, k, true), self64(index.get(), n, k, true)));
  }
  const Rows64 want = oracle_radius64(points, queries, dim, radius, max_neighbors);
  EXPECT_TRUE(same_rows64(want, radius64(index.get(), queries, dim, radius, max_neighbors)));
  if (!queries.empty()) {
    EXPECT_TRUE(same_rows64(want, radius_csr64(index.get(), queries, dim, radius, max_neighbors)));
  }
}

// ---- The configs --------------------------------------------------------------------

class IndexF64 : public ::testing::TestWithParam<IndexConfig> {
 protected:
  void SetUp() override { KNN_SKIP_WITHOUT_BACKEND(GetParam()); }
  bool grid() const { return GetParam().structure == KNN_STRUCTURE_GRID; }
  knn_options opt() const { return options_for(GetParam()); }
};

// The UTM cloud: float64 equals the oracle bit for bit, float32 does not.
TEST_P(IndexF64, UtmOffsetCloudIsExactWhereFloat32IsNot) {
  const int dim = 3, k = 8;
  const std::vector<double> points = utm_rows(4000, dim, 1);
  const std::vector<double> queries = utm_rows(300, dim, 2);
  const Rows64 want = oracle_knn64(points, queries, dim, k);
  IndexHandle index = build64(points, dim, opt());
  ASSERT_TRUE(index);
  EXPECT_TRUE(same_rows64(want, query64(index.get(), queries, dim, k)));
  // The float32 index over the same data, rounded: its neighbours differ.
  IndexHandle narrow = build_index(to_float(points), dim, opt());
  ASSERT_TRUE(narrow);
  const KnnResult f32 = query_index(narrow.get(), to_float(queries), dim, k);
  int64_t differ = 0;
  for (size_t s = 0; s < want.idx.size(); ++s)
    differ += static_cast<int32_t>(f32.idx[s]) != want.idx[s];
  EXPECT_GT(differ, 0) << "float32 should not resolve millimetres at 4.5e6";
  expect_every_call_like_oracle(opt(), points, queries, dim, k, 1.0, 12);
}

TEST_P(IndexF64, EveryDimensionMatchesTheOracle) {
  for (const int dim : {1, 2, 3, 5, 8, 17}) {
    if (grid() && dim != 3) continue;
    SCOPED_TRACE("dim=" + std::to_string(dim));
    const std::vector<double> points = utm_rows(900, dim, 10 + dim);
    const std::vector<double> queries = utm_rows(120, dim, 20 + dim);
    expect_every_call_like_oracle(opt(), points, queries, dim, 7, 1.5, 9);
  }
}

TEST_P(IndexF64, SmallAndDegenerateData) {
  const int dim = 3;
  const std::vector<double> queries = utm_rows(40, dim, 5);
  // n = 0, n = 1, k > n.
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    expect_every_call_like_oracle(opt(), utm_rows(n, dim, 6), queries, dim, 9, 3.0, 4);
  }
  // Duplicates: every point four times.
  std::vector<double> dup;
  const std::vector<double> base = utm_rows(300, dim, 7);
  for (int copy = 0; copy < 4; ++copy) dup.insert(dup.end(), base.begin(), base.end());
  {
    SCOPED_TRACE("duplicates");
    expect_every_call_like_oracle(opt(), dup, queries, dim, 10, 0.5, 16);
  }
  // All points equal: ties everywhere, broken by index.
  std::vector<double> same(1500 * dim);
  for (int64_t i = 0; i < 1500; ++i) {
    same[static_cast<size_t>(i * dim)] = 4500000.123;
    same[static_cast<size_t>(i * dim + 1)] = 4500000.456;
    same[static_cast<size_t>(i * dim + 2)] = 100.789;
  }
  SCOPED_TRACE("all equal");
  expect_every_call_like_oracle(opt(), same, queries, dim, 6, 10.0, 5);
}

// At the float64 coordinate limit 2^509 (dim 3) every call still answers
// exactly (nothing overflows); one ulp beyond, the build and the queries are
// refused naming the coordinate.
TEST_P(IndexF64, CoordinateRuleAtAndBeyondItsLimit) {
  const int dim = 3;
  const double limit = std::ldexp(1.0, 509);
  std::vector<double> points = {limit, -limit, limit, -limit, limit,  -limit, 0,     0,
                                0,     limit,  limit, limit,  -limit, -limit, -limit};
  const std::vector<double> queries = {-limit, limit, -limit, limit, -limit, limit, 0, 0, 0};
  expect_every_call_like_oracle(opt(), points, queries, dim, 5, limit, 5);
  const Rows64 far = oracle_knn64(points, queries, dim, 5);
  for (const double d : far.dist) EXPECT_TRUE(std::isfinite(d));

  points[4] = std::nextafter(limit, HUGE_VAL);
  knn_index* index = nullptr;
  knn_options o = opt();
  EXPECT_TRUE(fails_with(knn_index_build_f64(points.data(), 5, dim, &o, &index),
                         KNN_ERR_INVALID_ARGUMENT, "point 1 has coordinate"));
  EXPECT_NE(std::string(knn_last_error()).find("float64"), std::string::npos) << knn_last_error();
  EXPECT_EQ(index, nullptr);
  // Dimensions 3 to 8 share the limit 2^509; from dim 9 it is 2^508.
  if (grid()) o.structure = KNN_STRUCTURE_AUTO;  // the grid is 3-D only
  EXPECT_TRUE(
      fails_with(knn_index_build_f64(std::vector<double>(9, limit).data(), 1, 9, &o, &index),
                 KNN_ERR_INVALID_ARGUMENT, "dimension 0"));
  IndexHandle ok = build64(std::vector<double>(9, std::ldexp(1.0, 508)), 9, o);
  IndexHandle eight = build64(std::vector<double>(8, limit), 8, o);
  EXPECT_TRUE(eight);
  EXPECT_TRUE(ok);
}

TEST_P(IndexF64, NonFiniteDoublesAreNamedByIndex) {
  const int dim = 3;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> points = utm_rows(50, dim, 9);
  knn_options o = opt();
  knn_index* index = nullptr;
  points[static_cast<size_t>(17 * dim + 2)] = nan;
  EXPECT_TRUE(fails_with(knn_index_build_f64(points.data(), 50, dim, &o, &index),
                         KNN_ERR_NONFINITE_INPUT, "point 17 has a NaN coordinate (dimension 2)"));
  points[static_cast<size_t>(17 * dim + 2)] = 100.0;
  points[static_cast<size_t>(3 * dim + 0)] = -inf;
  EXPECT_TRUE(fails_with(knn_index_build_f64(points.data(), 50, dim, &o, &index),
                         KNN_ERR_NONFINITE_INPUT,
                         "point 3 has an infinite coordinate (dimension 0)"));
  EXPECT_EQ(index, nullptr);
  points[static_cast<size_t>(3 * dim + 0)] = 4.5e6;
  IndexHandle good = build64(points, dim, o);
  ASSERT_TRUE(good);
  std::vector<double> queries = utm_rows(10, dim, 3);
  queries[static_cast<size_t>(6 * dim + 1)] = inf;
  std::vector<int32_t> idx(10 * 4, -7);
  std::vector<double> dist(10 * 4, -7.0);
  EXPECT_TRUE(fails_with(
      knn_index_query_f64(good.get(), queries.data(), 10, 4, idx.data(), dist.data(), nullptr),
      KNN_ERR_NONFINITE_INPUT, "query 6 has an infinite coordinate (dimension 1)"));
  EXPECT_EQ(idx, std::vector<int32_t>(10 * 4, -7));
  EXPECT_TRUE(fails_with(knn_index_radius_f64(good.get(), queries.data(), 10, nan, 4, idx.data(),
                                              dist.data(), nullptr, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "radius is nan"));
}

#if defined(KNN_TEST_WITH_CUDA)
// Device arrays of doubles (points, queries, outputs, counts, offsets) give
// the oracle's rows, on both engines (the CUDA one reads them in place, the
// OpenMP one through host copies); a NaN in device queries is named.
TEST_P(IndexF64, DeviceArraysGiveTheOracleRows) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3, k = 8, m = 200;
  const std::vector<double> points = utm_rows(3000, dim, 71);
  std::vector<double> queries = utm_rows(m, dim, 72);
  const DeviceArray<double> p(points), q(queries);
  knn_index* raw = nullptr;
  const knn_options o = opt();
  ASSERT_EQ(knn_index_build_f64(p.get(), 3000, dim, &o, &raw), KNN_OK) << knn_last_error();
  IndexHandle index(raw);
  const Rows64 want = oracle_knn64(points, queries, dim, k);
  const DeviceArray<int32_t> idx(static_cast<size_t>(m) * k);
  const DeviceArray<double> dist(static_cast<size_t>(m) * k);
  ASSERT_EQ(knn_index_query_f64(index.get(), q.get(), m, k, idx.get(), dist.get(), nullptr), KNN_OK)
      << knn_last_error();
  Rows64 got;
  got.m = m;
  got.width = k;
  got.idx = idx.to_host(static_cast<size_t>(m) * k);
  got.dist = dist.to_host(static_cast<size_t>(m) * k);
  EXPECT_TRUE(same_rows64(want, got));
  const double radius = 0.8;
  const Rows64 rows = oracle_radius64(points, queries, dim, radius, 64);
  const DeviceArray<int64_t> counts(m);
  ASSERT_EQ(knn_index_radius_count_f64(index.get(), q.get(), m, radius, counts.get(), nullptr),
            KNN_OK)
      << knn_last_error();
  const std::vector<int64_t> host_counts = counts.to_host(m);
  std::vector<int64_t> offsets(m + 1, 0);
  for (int i = 0; i < m; ++i) {
    EXPECT_EQ(host_counts[i], rows.counts[i]) << "query " << i;
    offsets[i + 1] = offsets[i] + host_counts[i];
  }
  const DeviceArray<int64_t> device_offsets(offsets);
  const size_t total = static_cast<size_t>(offsets.back());
  const DeviceArray<int32_t> csr_idx(total);
  const DeviceArray<double> csr_dist(total);
  ASSERT_EQ(knn_index_radius_fill_f64(index.get(), q.get(), m, radius, device_offsets.get(),
                                      csr_idx.get(), csr_dist.get(), nullptr),
            KNN_OK)
      << knn_last_error();
  const std::vector<int32_t> fill_idx = csr_idx.to_host(total);
  const std::vector<double> fill_dist = csr_dist.to_host(total);
  for (int i = 0; i < m; ++i)
    for (int64_t j = 0; j < rows.counts[i] && j < rows.width; ++j) {
      const size_t at = static_cast<size_t>(offsets[i] + j);
      const size_t want_at = static_cast<size_t>(i) * rows.width + static_cast<size_t>(j);
      ASSERT_EQ(fill_idx[at], rows.idx[want_at]) << "query " << i << " entry " << j;
      ASSERT_EQ(std::memcmp(&fill_dist[at], &rows.dist[want_at], 8), 0);
    }
  queries[static_cast<size_t>(5 * dim + 2)] = std::numeric_limits<double>::quiet_NaN();
  const DeviceArray<double> bad(queries);
  EXPECT_TRUE(
      fails_with(knn_index_query_f64(index.get(), bad.get(), m, k, idx.get(), dist.get(), nullptr),
                 KNN_ERR_NONFINITE_INPUT, "query 5 has a NaN coordinate (dimension 2)"));
}
#endif

INSTANTIATE_TEST_SUITE_P(AllStructures, IndexF64,
                         ::testing::Values(IndexConfig{KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE},
                                           IndexConfig{KNN_BACKEND_OPENMP, KNN_STRUCTURE_GRID},
                                           IndexConfig{KNN_BACKEND_OPENMP,
                                                       KNN_STRUCTURE_BRUTE_FORCE},
                                           IndexConfig{KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO},
                                           IndexConfig{KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE},
                                           IndexConfig{KNN_BACKEND_CUDA, KNN_STRUCTURE_GRID},
                                           IndexConfig{KNN_BACKEND_CUDA, KNN_STRUCTURE_BRUTE_FORCE},
                                           IndexConfig{KNN_BACKEND_CUDA, KNN_STRUCTURE_AUTO}),
                         IndexConfigName());

// A large AUTO index: AUTO picks the grid (3-D) or the kd-tree beyond the
// brute-force sizes, so the structures are exercised as AUTO serves them.
TEST(IndexF64Auto, LargeCloudsPickATreeAndStayExact) {
  for (const int dim : {3, 5}) {
    SCOPED_TRACE("dim=" + std::to_string(dim));
    const std::vector<double> points = utm_rows(20000, dim, 40 + dim);
    const std::vector<double> queries = utm_rows(200, dim, 50 + dim);
    knn_options o;
    knn_options_init(&o);
    o.backend = KNN_BACKEND_OPENMP;
    IndexHandle index = build64(points, dim, o);
    ASSERT_TRUE(index);
    int structure = -1;
    ASSERT_EQ(knn_index_info(index.get(), nullptr, nullptr, nullptr, &structure), KNN_OK);
    EXPECT_NE(structure, KNN_STRUCTURE_BRUTE_FORCE);
    EXPECT_TRUE(same_rows64(oracle_knn64(points, queries, dim, 30),
                            query64(index.get(), queries, dim, 30)));
  }
}

// ---- The two families do not mix ---------------------------------------------------

TEST(IndexF64Families, TheOtherFamilyIsRefusedNamingTheRightCall) {
  const int dim = 3, m = 4;
  const std::vector<double> points64 = utm_rows(100, dim, 31);
  const std::vector<float> points32 = to_float(points64);
  knn_options o;
  knn_options_init(&o);
  o.backend = KNN_BACKEND_OPENMP;
  IndexHandle wide = build64(points64, dim, o);
  IndexHandle narrow = build_index(points32, dim, o);
  ASSERT_TRUE(wide && narrow);
  int scalar = -1;
  ASSERT_EQ(knn_index_scalar(narrow.get(), &scalar), KNN_OK);
  EXPECT_EQ(scalar, KNN_SCALAR_FLOAT32);
  EXPECT_TRUE(fails_with(knn_index_scalar(narrow.get(), nullptr), KNN_ERR_INVALID_ARGUMENT,
                         "scalar is NULL"));
  EXPECT_TRUE(
      fails_with(knn_index_scalar(nullptr, &scalar), KNN_ERR_INVALID_ARGUMENT, "index is NULL"));

  const std::vector<double> q64(points64.begin(), points64.begin() + m * dim);
  const std::vector<float> q32(points32.begin(), points32.begin() + m * dim);
  std::vector<int32_t> idx(100 * 3, -7), counts(m, -7);
  std::vector<int64_t> wide_counts(m, -7), offsets(m + 1, 0);
  std::vector<double> d64(100 * 3, -7.0);
  std::vector<float> d32(100 * 3, -7.0f);
  const auto untouched = [&] {
    return idx == std::vector<int32_t>(100 * 3, -7) && d64 == std::vector<double>(100 * 3, -7.0) &&
           d32 == std::vector<float>(100 * 3, -7.0f) && counts == std::vector<int32_t>(m, -7) &&
           wide_counts == std::vector<int64_t>(m, -7);
  };
  const int bad = KNN_ERR_INVALID_ARGUMENT;
  // A float call on a float64 index.
  EXPECT_TRUE(
      fails_with(knn_index_query(wide.get(), q32.data(), m, 3, idx.data(), d32.data(), nullptr),
                 bad, "call knn_index_query_f64"));
  EXPECT_TRUE(fails_with(knn_index_query_self(wide.get(), 3, 1, idx.data(), d32.data()), bad,
                         "call knn_index_query_self_f64"));
  EXPECT_TRUE(fails_with(knn_index_radius(wide.get(), q32.data(), m, 1.0f, 3, idx.data(),
                                          d32.data(), counts.data(), nullptr),
                         bad, "call knn_index_radius_f64"));
  EXPECT_TRUE(fails_with(
      knn_index_radius_count(wide.get(), q32.data(), m, 1.0f, wide_counts.data(), nullptr), bad,
      "call knn_index_radius_count_f64"));
  EXPECT_TRUE(fails_with(knn_index_radius_fill(wide.get(), q32.data(), m, 1.0f, offsets.data(),
                                               idx.data(), d32.data(), nullptr),
                         bad, "call knn_index_radius_fill_f64"));
  // A float64 call on a float index.
  EXPECT_TRUE(fails_with(
      knn_index_query_f64(narrow.get(), q64.data(), m, 3, idx.data(), d64.data(), nullptr), bad,
      "built by knn_index_build) and knn_index_query_f64 takes a float64 index; call "
      "knn_index_query instead"));
  EXPECT_TRUE(fails_with(knn_index_query_self_f64(narrow.get(), 3, 0, idx.data(), d64.data()), bad,
                         "call knn_index_query_self instead"));
  EXPECT_TRUE(fails_with(knn_index_radius_f64(narrow.get(), q64.data(), m, 1.0, 3, idx.data(),
                                              d64.data(), counts.data(), nullptr),
                         bad, "call knn_index_radius instead"));
  EXPECT_TRUE(fails_with(
      knn_index_radius_count_f64(narrow.get(), q64.data(), m, 1.0, wide_counts.data(), nullptr),
      bad, "call knn_index_radius_count instead"));
  EXPECT_TRUE(fails_with(knn_index_radius_fill_f64(narrow.get(), q64.data(), m, 1.0, offsets.data(),
                                                   idx.data(), d64.data(), nullptr),
                         bad, "call knn_index_radius_fill instead"));
  EXPECT_TRUE(untouched());
  // The precision-free calls serve both.
  int64_t n = -1;
  EXPECT_EQ(knn_index_info(wide.get(), &n, nullptr, nullptr, nullptr), KNN_OK);
  EXPECT_EQ(n, 100);
}

// ---- Serialization --------------------------------------------------------------

// CRC-32C bit by bit (the library uses tables): the test's own.
uint32_t crc32c_bitwise(const unsigned char* data, size_t bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) {
    c ^= data[i];
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

template <class T>
void put(std::vector<unsigned char>& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

// The serialized form as the format documents it (src/index_format.h),
// assembled here field by field.
template <class Scalar>
std::vector<unsigned char> expected_buffer(const std::vector<Scalar>& points, int dim,
                                           int structure, int leaf_size) {
  const uint64_t n = points.size() / dim, payload = points.size() * sizeof(Scalar);
  std::vector<unsigned char> out(64 + payload + 4, 0);
  std::memcpy(out.data(), "KNNGINDX", 8);
  const bool wide = sizeof(Scalar) == 8;
  put<uint32_t>(out, 8, wide ? 2 : 1);
  put<uint32_t>(out, 12, 0x01020304u);
  put<uint32_t>(out, 16, 64);
  put<uint32_t>(out, 20, static_cast<uint32_t>(dim));
  put<uint64_t>(out, 24, n);
  put<int32_t>(out, 32, structure);
  put<int32_t>(out, 36, leaf_size);
  put<uint64_t>(out, 40, payload);
  if (wide) put<uint32_t>(out, 48, 1);
  if (payload) std::memcpy(out.data() + 64, points.data(), payload);
  put<uint32_t>(out, 64 + payload, crc32c_bitwise(out.data(), 64 + payload));
  return out;
}

TEST(IndexF64Serialize, Version2RoundTripAndVersion1Unchanged) {
  knn_options o;
  knn_options_init(&o);
  o.backend = KNN_BACKEND_OPENMP;
  o.structure = KNN_STRUCTURE_KDTREE;
  o.leaf_size = 5;
  const int dim = 3;
  const std::vector<double> points = utm_rows(700, dim, 61);
  const std::vector<double> queries = utm_rows(50, dim, 62);
  IndexHandle wide = build64(points, dim, o);
  ASSERT_TRUE(wide);
  const std::vector<unsigned char> bytes = serialize(wide.get());
  EXPECT_EQ(bytes, expected_buffer(points, dim, KNN_STRUCTURE_KDTREE, 5));
  knn_index* raw = nullptr;
  ASSERT_EQ(knn_index_deserialize(bytes.data(), bytes.size(), &o, &raw), KNN_OK)
      << knn_last_error();
  IndexHandle loaded(raw);
  int scalar = -1;
  ASSERT_EQ(knn_index_scalar(loaded.get(), &scalar), KNN_OK);
  EXPECT_EQ(scalar, KNN_SCALAR_FLOAT64);
  EXPECT_TRUE(
      same_rows64(oracle_knn64(points, queries, dim, 6), query64(loaded.get(), queries, dim, 6)));
  EXPECT_EQ(serialize(loaded.get()), bytes);

  // float32 keeps writing version 1, byte for byte.
  const std::vector<float> narrow_points = to_float(points);
  IndexHandle narrow = build_index(narrow_points, dim, o);
  ASSERT_TRUE(narrow);
  EXPECT_EQ(serialize(narrow.get()), expected_buffer(narrow_points, dim, KNN_STRUCTURE_KDTREE, 5));

  // A version-2 buffer with another scalar field, and a version-1 buffer
  // with one, are refused (checksums fixed so that the field is what fails).
  for (const uint32_t version : {1u, 2u})
    for (const uint32_t field : {0u, 1u, 2u, 0xFFFFFFFFu}) {
      std::vector<unsigned char> b =
          version == 2 ? bytes : expected_buffer(narrow_points, dim, KNN_STRUCTURE_KDTREE, 5);
      if ((version == 2) == (field == 1)) continue;  // the valid combinations
      put<uint32_t>(b, 48, field);
      put<uint32_t>(b, b.size() - 4, crc32c_bitwise(b.data(), b.size() - 4));
      knn_index* refused = reinterpret_cast<knn_index*>(&b);
      EXPECT_EQ(knn_index_deserialize(b.data(), b.size(), &o, &refused), KNN_ERR_INVALID_ARGUMENT)
          << "version " << version << " scalar field " << field;
      EXPECT_EQ(refused, nullptr);
      const std::string message = knn_last_error();
      EXPECT_TRUE(message.find(version == 2 ? "scalar field" : "reserved header byte 48") !=
                  std::string::npos)
          << message;
    }
}

TEST(IndexF64Estimates, CountDoubleStorage) {
  for (const int structure :
       {KNN_STRUCTURE_AUTO, KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
    knn_options o;
    knn_options_init(&o);
    o.structure = structure;
    const size_t b32 = knn_estimate_build_bytes(1000000, 3, &o);
    const size_t b64 = knn_estimate_build_bytes_f64(1000000, 3, &o);
    EXPECT_GT(b64, b32);
    EXPECT_LE(b64, 2 * b32);
    const size_t q32 = knn_estimate_query_bytes(100000, 8, 1000000, 3, &o);
    const size_t q64 = knn_estimate_query_bytes_f64(100000, 8, 1000000, 3, &o);
    EXPECT_GT(q64, q32);
    EXPECT_LE(q64, 2 * q32);
  }
  EXPECT_EQ(knn_estimate_build_bytes_f64(-1, 3, nullptr), 0u);
  EXPECT_EQ(knn_estimate_build_bytes_f64(int64_t{1} << 40, 3, nullptr), SIZE_MAX);
  EXPECT_EQ(knn_estimate_query_bytes_f64(INT64_MAX, 8, 1000, 3, nullptr), SIZE_MAX);
}

}  // namespace
}  // namespace knn_test
