// The bounding volume hierarchy of a triangle mesh, defined once so that
// every engine builds the same tree (contract section 6).
//
// The tree is a linear BVH (Karras, "Maximizing parallelism in the
// construction of BVHs, octrees, and k-d trees", HPG 2012) over the
// triangles sorted by the Morton code of their centroids:
//   1. centroid(t) = ((a + b) + c) / 3 per coordinate, in double;
//   2. lo, hi = the least and greatest centroid coordinate per axis;
//   3. each coordinate is quantised to 21 bits (morton_cell) and the three
//      interleaved into a 63-bit code (morton_code3);
//   4. the triangles are sorted by (code, triangle id): the sorted position
//      of a triangle is its leaf;
//   5. the n - 1 internal nodes follow from the sorted codes alone
//      (karras_node_range, karras_split), node 0 the root; n = 1 has no
//      internal node and its root is leaf 0.
// Every step is a pure function of the triangles' coordinates, evaluated
// in rounded double ops, so the CPU build (sequential or threaded) and the
// GPU build (parallel, bottom-up) give the same nodes. What the tree serves
// is exact whatever its shape (the closest triangle does not depend on it);
// the shape matters to sums over it (the winding number of open meshes,
// common/geometry/winding.h), which are then also the same on every engine.
#pragma once

#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"

namespace knn {
namespace geometry {

constexpr int kMortonBitsPerAxis = 21;
constexpr uint32_t kMortonCells = 1u << kMortonBitsPerAxis;

// A child reference of an internal node: >= 0 is an internal node, < 0 the
// leaf (sorted triangle position) ~reference.
KNN_HD bool is_leaf_ref(int32_t ref) { return ref < 0; }
KNN_HD int32_t leaf_ref(int32_t sorted_position) { return ~sorted_position; }
KNN_HD int32_t leaf_of_ref(int32_t ref) { return ~ref; }

template <typename Scalar>
KNN_HD double triangle_centroid(Scalar a, Scalar b, Scalar c) {
  return div_rn(
      add_rn(add_rn(static_cast<double>(a), static_cast<double>(b)), static_cast<double>(c)), 3.0);
}

// The cell of coordinate x in [lo, hi] among kMortonCells (all in cell 0
// when the extent is 0).
KNN_HD uint32_t morton_cell(double x, double lo, double hi) {
  const double extent = sub_rn(hi, lo);
  if (!(extent > 0.0)) return 0;
  const double scaled = mul_rn(div_rn(sub_rn(x, lo), extent), static_cast<double>(kMortonCells));
  if (!(scaled > 0.0)) return 0;
  if (scaled >= static_cast<double>(kMortonCells - 1)) return kMortonCells - 1;
  return static_cast<uint32_t>(scaled);  // truncation: the same on both sides
}

// Spreads the 21 low bits of v to every third bit.
KNN_HD uint64_t spread_bits3(uint32_t v) {
  uint64_t x = v & 0x1fffffu;
  x = (x | x << 32) & 0x1f00000000ffffull;
  x = (x | x << 16) & 0x1f0000ff0000ffull;
  x = (x | x << 8) & 0x100f00f00f00f00full;
  x = (x | x << 4) & 0x10c30c30c30c30c3ull;
  x = (x | x << 2) & 0x1249249249249249ull;
  return x;
}

KNN_HD uint64_t morton_code3(uint32_t cx, uint32_t cy, uint32_t cz) {
  return spread_bits3(cx) << 2 | spread_bits3(cy) << 1 | spread_bits3(cz);
}

// The order in which both engines answer chunks of 3-D points
// (cuda/core/point_order.cuh, openmp/point_order.h): the Morton code of a
// point's cell among 2^kPointOrderBitsPerAxis an axis of the box [lo, hi]
// (points outside it in its border cells), the top bits of its morton_cell.
constexpr int kPointOrderBitsPerAxis = 10;

template <typename Scalar>
KNN_HD uint32_t point_order_code(const Scalar* point, const double* lo, const double* hi) {
  constexpr int drop = kMortonBitsPerAxis - kPointOrderBitsPerAxis;
  uint32_t cell[3];
  for (int d = 0; d < 3; ++d)
    cell[d] = morton_cell(static_cast<double>(point[d]), lo[d], hi[d]) >> drop;
  return static_cast<uint32_t>(morton_code3(cell[0], cell[1], cell[2]));
}

KNN_HD int leading_zeros64(uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(x));
#else
  return x == 0 ? 64 : __builtin_clzll(x);
#endif
}

// Karras' delta: the length of the common prefix of the keys at sorted
// positions i and j, (code, position) compared as one 127-bit key so that
// equal codes still split; -1 outside [0, n).
KNN_HD int karras_delta(const uint64_t* codes, int64_t n, int64_t i, int64_t j) {
  if (j < 0 || j >= n) return -1;
  const uint64_t x = codes[i] ^ codes[j];
  if (x != 0) return leading_zeros64(x);
  return 64 + leading_zeros64(static_cast<uint64_t>(i ^ j));
}

// The range of sorted positions [first, last] that internal node i covers.
KNN_HD void karras_node_range(const uint64_t* codes, int64_t n, int64_t i, int64_t* first,
                              int64_t* last) {
  const int direction =
      karras_delta(codes, n, i, i + 1) - karras_delta(codes, n, i, i - 1) > 0 ? 1 : -1;
  const int delta_min = karras_delta(codes, n, i, i - direction);
  int64_t length_max = 2;
  while (karras_delta(codes, n, i, i + length_max * direction) > delta_min) length_max *= 2;
  int64_t length = 0;
  for (int64_t step = length_max / 2; step >= 1; step /= 2)
    if (karras_delta(codes, n, i, i + (length + step) * direction) > delta_min) length += step;
  const int64_t j = i + length * direction;
  *first = direction > 0 ? i : j;
  *last = direction > 0 ? j : i;
}

// The last position of the left child of the node covering [first, last]:
// the left child covers [first, split], the right [split + 1, last]; a side
// of one position is a leaf, otherwise the internal node numbered split
// (left) or split + 1 (right).
KNN_HD int64_t karras_split(const uint64_t* codes, int64_t n, int64_t first, int64_t last) {
  const int common = karras_delta(codes, n, first, last);
  int64_t split = first;
  int64_t step = last - first;
  do {
    step = (step + 1) >> 1;
    const int64_t candidate = split + step;
    if (candidate < last && karras_delta(codes, n, first, candidate) > common) split = candidate;
  } while (step > 1);
  return split;
}

// The children of internal node i as references (leaf_ref for leaves).
KNN_HD void karras_children(const uint64_t* codes, int64_t n, int64_t i, int32_t* left,
                            int32_t* right) {
  int64_t first = 0, last = 0;
  karras_node_range(codes, n, i, &first, &last);
  const int64_t split = karras_split(codes, n, first, last);
  *left = split == first ? leaf_ref(static_cast<int32_t>(split)) : static_cast<int32_t>(split);
  *right = split + 1 == last ? leaf_ref(static_cast<int32_t>(split + 1))
                             : static_cast<int32_t>(split + 1);
}

}  // namespace geometry
}  // namespace knn
