// The float64 oracle of the index API (the _f64 calls), independent of the
// library: plain loops computing the contract's squared distance ((d0*d0 +
// d1*d1) + d2*d2) + ... in double (the tests are compiled with
// -ffp-contract=off), sorted by (distance, index).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace knn_test {

inline double sq_distance64(const double* q, const double* p, int dim) {
  double sum = (q[0] - p[0]) * (q[0] - p[0]);
  for (int d = 1; d < dim; ++d) {
    const double t = q[d] - p[d];
    sum = sum + t * t;
  }
  return sum;
}

struct Rows64 {
  int64_t m = 0;
  int width = 0;
  std::vector<int32_t> idx;
  std::vector<double> dist;
  std::vector<int32_t> counts;  // radius only
};

// The `keep` nearest points of one query as (distance, index), sorted;
// keep < 0: every point with distance <= r2, sorted.
inline std::vector<std::pair<double, int32_t>> ranked(const std::vector<double>& points, int dim,
                                                      const double* q, int64_t keep,
                                                      double r2 = 0) {
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  std::vector<std::pair<double, int32_t>> all;
  all.reserve(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const double d = sq_distance64(q, &points[static_cast<size_t>(j * dim)], dim);
    if (keep >= 0 || d <= r2) all.emplace_back(d, static_cast<int32_t>(j));
  }
  if (keep >= 0 && keep < n) {
    std::nth_element(all.begin(), all.begin() + keep, all.end());
    all.resize(static_cast<size_t>(keep));
  }
  std::sort(all.begin(), all.end());
  return all;
}

// k nearest of each query; `self` >= 0 drops that index (all-kNN without self).
inline Rows64 oracle_knn64(const std::vector<double>& points, const std::vector<double>& queries,
                           int dim, int k, bool exclude_self = false) {
  Rows64 r;
  r.m = static_cast<int64_t>(queries.size()) / dim;
  r.width = k;
  r.idx.assign(static_cast<size_t>(r.m) * k, -1);
  r.dist.assign(static_cast<size_t>(r.m) * k, std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < r.m; ++i) {
    int j = 0;
    for (const auto& [d, index] :
         ranked(points, dim, &queries[static_cast<size_t>(i * dim)], int64_t{k} + 1)) {
      if (j == k) break;
      if (exclude_self && index == i) continue;
      r.idx[static_cast<size_t>(i * k + j)] = index;
      r.dist[static_cast<size_t>(i * k + j)] = d;
      ++j;
    }
  }
  return r;
}

inline Rows64 oracle_radius64(const std::vector<double>& points, const std::vector<double>& queries,
                              int dim, double radius, int max_neighbors) {
  const double r2 = radius * radius;
  Rows64 r;
  r.m = static_cast<int64_t>(queries.size()) / dim;
  r.width = max_neighbors;
  r.idx.assign(static_cast<size_t>(r.m) * max_neighbors, -1);
  r.dist.assign(static_cast<size_t>(r.m) * max_neighbors, std::numeric_limits<double>::infinity());
  r.counts.assign(static_cast<size_t>(r.m), 0);
  for (int64_t i = 0; i < r.m; ++i) {
    int j = 0;
    for (const auto& [d, index] :
         ranked(points, dim, &queries[static_cast<size_t>(i * dim)], -1, r2)) {
      ++r.counts[static_cast<size_t>(i)];
      if (j < max_neighbors) {
        r.idx[static_cast<size_t>(i * max_neighbors + j)] = index;
        r.dist[static_cast<size_t>(i * max_neighbors + j)] = d;
        ++j;
      }
    }
  }
  return r;
}

inline ::testing::AssertionResult same_rows64(const Rows64& want, const Rows64& got) {
  if (want.counts != got.counts) return ::testing::AssertionFailure() << "counts differ";
  for (size_t s = 0; s < want.idx.size(); ++s) {
    uint64_t a, b;
    std::memcpy(&a, &want.dist[s], 8);
    std::memcpy(&b, &got.dist[s], 8);
    if (want.idx[s] != got.idx[s] || a != b)
      return ::testing::AssertionFailure()
             << "row " << s / std::max(want.width, 1) << " slot " << s % std::max(want.width, 1)
             << ": got (" << got.idx[s] << ", " << got.dist[s] << "), the oracle's (" << want.idx[s]
             << ", " << want.dist[s] << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace knn_test
