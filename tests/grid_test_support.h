// What the grid tests of both backends share: calls of an engine (src/
// index_engine.h, linked from knn_gpgpu_engines) into the result types of
// the index oracles, and queries far outside the data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../src/index_engine.h"
#include "index_test_helpers.h"

namespace knn_test {

inline KnnResult engine_knn(const knn::IndexEngine& engine, const std::vector<float>& queries, int k,
                            bool want_distances = true) {
  KnnResult r;
  r.m = static_cast<int64_t>(queries.size() / 3);
  r.k = k;
  r.idx.assign(static_cast<size_t>(r.m) * k, -7);
  r.dist.assign(static_cast<size_t>(r.m) * k, -7.0f);
  engine.knn(queries.data(), r.m, k, r.idx.data(), want_distances ? r.dist.data() : nullptr,
             knn::CallParams{});
  return r;
}

inline KnnResult engine_self(const knn::IndexEngine& engine, int k, bool exclude_self) {
  KnnResult r;
  r.m = engine.size();
  r.k = k;
  r.idx.assign(static_cast<size_t>(r.m) * k, -7);
  r.dist.assign(static_cast<size_t>(r.m) * k, -7.0f);
  engine.knn_self(k, exclude_self, r.idx.data(), r.dist.data(), knn::CallParams{});
  return r;
}

// max_neighbors == 0 is a counting call: no rows, counts only. Without
// want_distances the distance row is not asked for (and stays -7).
inline RadiusResult engine_radius(const knn::IndexEngine& engine, const std::vector<float>& queries,
                                  float radius, int max_neighbors, bool want_distances = true) {
  RadiusResult r;
  r.m = static_cast<int64_t>(queries.size() / 3);
  r.max_neighbors = max_neighbors;
  r.idx.assign(static_cast<size_t>(r.m) * max_neighbors, -7);
  r.dist.assign(static_cast<size_t>(r.m) * max_neighbors, -7.0f);
  r.counts.assign(static_cast<size_t>(r.m), -7);
  const bool rows = max_neighbors > 0;
  engine.radius(queries.data(), r.m, radius, max_neighbors, rows ? r.idx.data() : nullptr,
                rows && want_distances ? r.dist.data() : nullptr, r.counts.data(),
                knn::CallParams{});
  return r;
}

// Queries around and far outside the data: the distribution's own queries,
// then points 1e3 and 1e6 box sizes away and at the float range's ends.
inline std::vector<float> queries_with_outliers(Dist dist, int64_t m, uint64_t seed) {
  std::vector<float> q = make_query_rows(dist, m, 3, seed);
  const float far[][3] = {{1e3f, -2e3f, 5e2f}, {-1e6f, 0.5f, 0.25f}, {0.0f, 3e6f, -3e6f},
                          {-1e30f, 1e30f, 2e38f}, {3e38f, -3e38f, 0.0f}};
  for (const auto& f : far) q.insert(q.end(), f, f + 3);
  return q;
}

}  // namespace knn_test
