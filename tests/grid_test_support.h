// What the grid tests of both backends share: engine calls (engine_calls.h),
// queries far outside the data, and the check of KNN_STRUCTURE_GRID through
// the index API.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine_calls.h"
#include "index_test_helpers.h"

namespace knn_test {

// Queries around and far outside the data: the distribution's own queries,
// then points 1e3 and 1e6 box sizes away and at the ends of the accepted
// coordinate range (2^61 in 3-D).
inline std::vector<float> queries_with_outliers(Dist dist, int64_t m, uint64_t seed) {
  std::vector<float> q = make_query_rows(dist, m, 3, seed);
  const float edge = coordinate_limit(3);
  const float far[][3] = {{1e3f, -2e3f, 5e2f},
                          {-1e6f, 0.5f, 0.25f},
                          {0.0f, 3e6f, -3e6f},
                          {-1e18f, 1e18f, edge},
                          {edge, -edge, 0.0f}};
  for (const auto& f : far) q.insert(q.end(), f, f + 3);
  return q;
}

// A length at the scale of the distribution's spread: radii of 0 to 4 times
// it reach from "nothing" to "everything".
inline float radius_scale(Dist dist) {
  return dist == Dist::Clustered     ? 100.0f
         : dist == Dist::LargeOffset ? 1000.0f
         : dist == Dist::Tiny        ? 1e-19f
         : dist == Dist::Huge        ? 1e18f
         : dist == Dist::Line        ? 100.0f
                                     : 1.0f;
}

// KNN_STRUCTURE_GRID on `backend` through the API: a grid for uniform data,
// the kd-tree (reported by knn_index_info) for clustered data, the same bits
// as the oracles either way.
inline void expect_grid_or_reported_fallback(int backend) {
  for (const Dist dist : {Dist::Uniform, Dist::Clustered}) {
    SCOPED_TRACE(dist_name(dist));
    const std::vector<float> points = make_rows(dist, 20000, 3, 91);
    const std::vector<float> queries = queries_with_outliers(dist, 700, 92);
    const int64_t m = static_cast<int64_t>(queries.size() / 3);
    IndexHandle index = build_index(points, 3, IndexConfig{backend, KNN_STRUCTURE_GRID});
    ASSERT_TRUE(index);
    int64_t n = 0;
    int dim = 0, reported_backend = -1, structure = -1;
    ASSERT_EQ(knn_index_info(index.get(), &n, &dim, &reported_backend, &structure), KNN_OK);
    EXPECT_EQ(reported_backend, backend);
    EXPECT_EQ(structure, dist == Dist::Uniform ? KNN_STRUCTURE_GRID : KNN_STRUCTURE_KDTREE);
    EXPECT_TRUE(same_knn(oracle_knn(points.data(), 20000, queries.data(), m, 3, 8),
                         query_index(index.get(), queries, 3, 8)));
    EXPECT_TRUE(same_knn(oracle_self(points.data(), 20000, 3, 4, true),
                         query_self(index.get(), 20000, 4, true)));
    EXPECT_TRUE(same_radius(oracle_radius(points.data(), 20000, queries.data(), m, 3, 0.1f, 16),
                            radius_index(index.get(), queries, 3, 0.1f, 16)));
  }
}

}  // namespace knn_test
