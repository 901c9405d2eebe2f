// The header's refusals by count alone (include/knn_gpgpu.h, general rules,
// "Counts"), written from the contract's words in 128-bit arithmetic of
// their own: whether a call must be refused with KNN_ERR_INVALID_ARGUMENT
// before it reads, allocates or writes anything. Shared by the count fuzzer
// (tests/test_count_fuzz.cpp) and the libFuzzer target fuzz/fuzz_counts.cpp;
// no gtest, no library code.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

#include "knn_gpgpu.h"

namespace knn_counts {

using Wide = __int128;
constexpr Wide kMaxBytes = PTRDIFF_MAX;

// rows * row_length elements of `bytes` each cannot be one array.
inline bool beyond(int64_t rows, int64_t row_length, int bytes) {
  if (rows <= 0 || row_length <= 0) return false;
  const Wide elements = Wide{rows} * Wide{row_length};
  return elements > kMaxBytes || elements * bytes > kMaxBytes;
}
// rows + 1 int64 offsets cannot be one array.
inline bool offsets_beyond(int64_t rows) { return Wide{rows} + 1 > kMaxBytes / 8; }

// The index API; `scalar` is 4 for the float calls, 8 for the _f64 ones.
inline bool index_query_refused(int64_t m, int k, int dim, int scalar) {
  return m < 0 || k < 1 || beyond(m, k, scalar) || beyond(m, dim, scalar);
}
inline bool index_radius_refused(int64_t m, int max_neighbors, int dim, int scalar) {
  return m < 0 || max_neighbors < 0 || beyond(m, max_neighbors, scalar) || beyond(m, dim, scalar);
}
inline bool radius_count_refused(int64_t m, int dim, int scalar) {
  return m < 0 || beyond(m, dim, scalar) || beyond(m, 1, 8);
}
inline bool radius_fill_refused(int64_t m, int dim, int scalar) {
  return m < 0 || beyond(m, dim, scalar) || offsets_beyond(m);
}
inline bool offsets_from_counts_refused(int64_t m) { return m < 0 || offsets_beyond(m); }
inline bool index_build_refused(int64_t n, int dim) {
  return n < 0 || n > INT32_MAX || dim < 1 || dim > KNN_INDEX_MAX_DIM;
}

// Point in polygon.
inline bool quadtree_build_refused(int64_t n) { return n < 0 || n > INT32_MAX; }
inline bool polygon_counts_refused(int64_t n_polygons, int64_t n_rings) {
  return n_polygons < 0 || n_rings < 0 || offsets_beyond(n_polygons) || offsets_beyond(n_rings);
}
// ring_offsets[n_rings] vertices of two scalars each.
inline bool vertex_count_refused(int64_t vertices, int scalar) {
  return beyond(vertices, 2, scalar);
}

// The classic API and knn_brute_force (int counts, float32).
inline bool classic_query_refused(int n_qp, int n_tree, int k) {
  return n_qp < 0 || n_tree < 0 || k < 1 || beyond(n_qp, k, 4);
}
inline bool brute_force_refused(int n_ref, int n_query, int dim, int k) {
  return n_ref < 0 || n_query < 0 || dim < 1 || k < 1 || beyond(n_ref, dim, 4) ||
         beyond(n_query, dim, 4) || beyond(n_query, k, 4);
}

}  // namespace knn_counts
