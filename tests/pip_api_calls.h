// Point in polygon through the public API as a host calls it: counts first,
// offsets made from them, then the indices; split back into one list per
// polygon for comparison with the oracle of pip_oracle.h.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "knn_gpgpu.h"
#include "pip_oracle.h"

namespace knn_test {

// Polygon p's point indices, in the order the API gives them.
using PipAnswer = std::vector<std::vector<int64_t>>;

// With `guard_slot`, the index array gets one slot past the end that must
// stay unwritten (the test fails otherwise).
inline PipAnswer count_then_fill(const knn_quadtree* tree, const PolygonArrays& set,
                                 const knn_options& opt, bool guard_slot) {
  const int64_t n_polygons = set.n_polygons();
  std::vector<int64_t> counts(static_cast<size_t>(n_polygons), -7);
  EXPECT_EQ(
      knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                   set.polygon_offsets.data(), n_polygons, counts.data(), &opt),
      KNN_OK)
      << knn_last_error();
  std::vector<int64_t> offsets{0};
  for (const int64_t c : counts) offsets.push_back(offsets.back() + c);
  std::vector<int64_t> indices(static_cast<size_t>(offsets.back()) + (guard_slot ? 1 : 0), -7);
  EXPECT_EQ(knn_points_in_polygons(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                   set.polygon_offsets.data(), n_polygons, offsets.data(),
                                   indices.data(), &opt),
            KNN_OK)
      << knn_last_error();
  if (guard_slot) {
    EXPECT_EQ(indices.back(), -7) << "written past the end of point_indices";
  }
  PipAnswer answer(static_cast<size_t>(n_polygons));
  for (int64_t p = 0; p < n_polygons; ++p)
    answer[p].assign(indices.begin() + offsets[p], indices.begin() + offsets[p + 1]);
  return answer;
}

}  // namespace knn_test
