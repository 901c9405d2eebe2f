// Oracles of the index API beyond plain kNN (tests/support/oracle.h has that, in any
// dimension): all-kNN of the points themselves with and without the point's
// own index, and radius search. Written from the contract's words, by brute
// force, with the contract's float32 distance (contract_sq_distance).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "oracle.h"

namespace knn_test {

// Row i: the k nearest of the n points to point i; with exclude_self, every
// point but i itself competes (other points equal to it stay).
inline KnnResult oracle_self(const float* points, int64_t n, int dim, int k, bool exclude_self) {
  KnnResult r;
  r.m = n;
  r.k = k;
  r.idx.assign(static_cast<size_t>(n) * k, -1);
  r.dist.assign(static_cast<size_t>(n) * k, std::numeric_limits<float>::infinity());
  const int64_t competitors = exclude_self ? n - 1 : n;
  const size_t keep = static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(k, competitors)));
  parallel_for(n, [&](int64_t i) {
    KBest best(keep);
    offer_rows(points + i * dim, points, n, dim, exclude_self ? i : -1, best);
    best.write(r.idx.data() + static_cast<size_t>(i) * k,
               r.dist.data() + static_cast<size_t>(i) * k);
  });
  return r;
}

struct RadiusResult {
  int64_t m = 0;
  int max_neighbors = 0;
  std::vector<int> idx;     // m * max_neighbors, -1 past the hits
  std::vector<float> dist;  // m * max_neighbors, +infinity past the hits
  std::vector<int> counts;  // m true counts
};

// Appends to hits the rows of points (n rows of dim) within contract
// distance r2 of q; only the hits leave the unchecked loop (oracle.h).
KNN_ORACLE_UNCHECKED inline void collect_within(const float* q, const float* points, int64_t n,
                                                int dim, float r2,
                                                std::vector<std::pair<float, int>>& hits) {
  for (int64_t j = 0; j < n; ++j) {
    const float d = contract_sq_distance(q, points + j * dim, dim);
    if (d <= r2) hits.push_back({d, static_cast<int>(j)});
  }
}

// The points with contract distance <= radius*radius (float32 product), in
// (distance, index) order, max_neighbors per row, and the true counts.
inline RadiusResult oracle_radius(const float* points, int64_t n, const float* queries, int64_t m,
                                  int dim, float radius, int max_neighbors) {
  RadiusResult r;
  r.m = m;
  r.max_neighbors = max_neighbors;
  const size_t slots = static_cast<size_t>(m) * static_cast<size_t>(max_neighbors);
  r.idx.assign(slots, -1);
  r.dist.assign(slots, std::numeric_limits<float>::infinity());
  r.counts.assign(static_cast<size_t>(m), 0);
  const float r2 = f32_mul(radius, radius);
  parallel_for(m, [&](int64_t i) {
    std::vector<std::pair<float, int>> hits;
    collect_within(queries + i * dim, points, n, dim, r2, hits);
    std::sort(hits.begin(), hits.end());
    r.counts[static_cast<size_t>(i)] = static_cast<int>(hits.size());
    for (size_t j = 0; j < hits.size() && j < static_cast<size_t>(max_neighbors); ++j) {
      r.idx[static_cast<size_t>(i) * max_neighbors + j] = hits[j].second;
      r.dist[static_cast<size_t>(i) * max_neighbors + j] = hits[j].first;
    }
  });
  return r;
}

}  // namespace knn_test
