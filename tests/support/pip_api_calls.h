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

// Options for the OpenMP engine with the given leaf size and threads.
inline knn_options openmp_options(int leaf_size = 0, int threads = 0) {
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.leaf_size = leaf_size;
  opt.threads = threads;
  return opt;
}

// Polygon p's point indices, in the order the API gives them.
using PipAnswer = std::vector<std::vector<int64_t>>;

// The entry points of each vertex precision, so that one template calls
// either.
inline int pip_count(const knn_quadtree* tree, const PolygonArrays& set, int64_t* counts,
                     const knn_options& opt) {
  return knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                      set.polygon_offsets.data(), set.n_polygons(), counts, &opt);
}
inline int pip_count(const knn_quadtree* tree, const PolygonArraysd& set, int64_t* counts,
                     const knn_options& opt) {
  return knn_points_in_polygons_count_f64(tree, set.xy.data(), set.ring_offsets.data(),
                                          set.n_rings(), set.polygon_offsets.data(),
                                          set.n_polygons(), counts, &opt);
}
inline int pip_fill(const knn_quadtree* tree, const PolygonArrays& set, const int64_t* offsets,
                    int64_t* indices, const knn_options& opt) {
  return knn_points_in_polygons(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                set.polygon_offsets.data(), set.n_polygons(), offsets, indices,
                                &opt);
}
inline int pip_fill(const knn_quadtree* tree, const PolygonArraysd& set, const int64_t* offsets,
                    int64_t* indices, const knn_options& opt) {
  return knn_points_in_polygons_f64(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                    set.polygon_offsets.data(), set.n_polygons(), offsets, indices,
                                    &opt);
}
inline int quadtree_build(const std::vector<float>& xy, const knn_options& opt,
                          knn_quadtree** tree) {
  return knn_quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, tree);
}
inline int quadtree_build(const std::vector<double>& xy, const knn_options& opt,
                          knn_quadtree** tree) {
  return knn_quadtree_build_f64(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, tree);
}

// With `guard_slot`, the index array gets one slot past the end that must
// stay unwritten (the test fails otherwise).
template <class T>
PipAnswer count_then_fill(const knn_quadtree* tree, const BasicPolygonArrays<T>& set,
                          const knn_options& opt, bool guard_slot) {
  const int64_t n_polygons = set.n_polygons();
  std::vector<int64_t> counts(static_cast<size_t>(n_polygons), -7);
  EXPECT_EQ(pip_count(tree, set, counts.data(), opt), KNN_OK) << knn_last_error();
  std::vector<int64_t> offsets{0};
  for (const int64_t c : counts) offsets.push_back(offsets.back() + c);
  std::vector<int64_t> indices(static_cast<size_t>(offsets.back()) + (guard_slot ? 1 : 0), -7);
  EXPECT_EQ(pip_fill(tree, set, offsets.data(), indices.data(), opt), KNN_OK) << knn_last_error();
  if (guard_slot) {
    EXPECT_EQ(indices.back(), -7) << "written past the end of point_indices";
  }
  PipAnswer answer(static_cast<size_t>(n_polygons));
  for (int64_t p = 0; p < n_polygons; ++p)
    answer[p].assign(indices.begin() + offsets[p], indices.begin() + offsets[p + 1]);
  return answer;
}

// Builds a tree of points xy (float or double) with `opt`, counts and fills
// with `set` (either), frees the tree; polygon p's points as given.
template <class P, class T>
PipAnswer build_count_fill(const std::vector<P>& xy, const BasicPolygonArrays<T>& set,
                           const knn_options& opt) {
  knn_quadtree* tree = nullptr;
  const int built = quadtree_build(xy, opt, &tree);
  EXPECT_EQ(built, KNN_OK) << knn_last_error();
  if (built != KNN_OK) return {};
  const PipAnswer answer = count_then_fill(tree, set, opt, true);
  EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
  return answer;
}

}  // namespace knn_test
