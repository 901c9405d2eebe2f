// The header's refusals by count alone (include/knn_gpgpu.h, general rules,
// "Counts"), written from the contract's words in 128-bit arithmetic of
// their own: whether a call must be refused with KNN_ERR_INVALID_ARGUMENT
// before it reads, allocates or writes anything. Shared by the count fuzzer
// (tests/api/test_count_fuzz.cpp) and the libFuzzer target fuzz/fuzz_counts.cpp;
// no gtest, no library code.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

#include "knn_gpgpu.h"

namespace knn_counts {

// a * b of two non-negative int64 values, exactly, as a 128-bit (high, low)
// pair built from 32-bit halves (portable: MSVC has no __int128).
struct Product {
  uint64_t high, low;
};
inline Product multiply(uint64_t a, uint64_t b) {
  const uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
  const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const uint64_t middle = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
  return {p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32), (middle << 32) | (p00 & 0xFFFFFFFFu)};
}
// a * b > limit, for a, b >= 0.
inline bool product_above(int64_t a, int64_t b, uint64_t limit) {
  const Product p = multiply(static_cast<uint64_t>(a), static_cast<uint64_t>(b));
  return p.high != 0 || p.low > limit;
}

constexpr uint64_t kMaxBytes = PTRDIFF_MAX;

// rows * row_length elements of `bytes` each cannot be one array.
inline bool beyond(int64_t rows, int64_t row_length, int bytes) {
  if (rows <= 0 || row_length <= 0) return false;
  if (product_above(rows, row_length, kMaxBytes)) return true;
  const int64_t elements = rows * row_length;  // at most PTRDIFF_MAX here
  return product_above(elements, bytes, kMaxBytes);
}
// rows + 1 int64 offsets cannot be one array: (rows + 1) * 8 > PTRDIFF_MAX.
inline bool offsets_beyond(int64_t rows) {
  return rows >= 0 && (rows == INT64_MAX || product_above(rows + 1, 8, kMaxBytes));
}

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
// knn_index_count_neighbors: m queries, n_radii radii (and outputs of n_radii).
inline bool count_neighbors_refused(int64_t m, int64_t n_radii, int dim, int scalar) {
  return m < 0 || n_radii < 0 || beyond(m, dim, scalar) || beyond(n_radii, 1, 8);
}
// knn_index_radius_pairs: room for `capacity` pairs of two int64.
inline bool radius_pairs_refused(int64_t capacity) {
  return capacity < 0 || beyond(capacity, 2, 8);
}
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

// Triangle meshes (include/knn_gpgpu_mesh.h): m points of three scalars,
// and the report's int counts.
inline bool mesh_build_refused(int64_t n_vertices, int64_t n_triangles) {
  return n_vertices < 0 || n_vertices > INT32_MAX || n_triangles < 1 ||
         n_triangles > KNN_MESH_MAX_TRIANGLES;
}
inline bool mesh_query_refused(int64_t m, int scalar) { return m < 0 || beyond(m, 3, scalar); }
inline bool mesh_report_refused(int64_t m, int n_percentiles, int n_bins, int scalar) {
  return mesh_query_refused(m, scalar) || n_percentiles < 0 || n_bins < 0;
}
// knn_mesh_align (and _ex, whose params carry the iterations): m points and
// the iteration cap.
inline bool mesh_align_refused(int64_t m, int max_iterations, int scalar) {
  return mesh_query_refused(m, scalar) || max_iterations < 0;
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
