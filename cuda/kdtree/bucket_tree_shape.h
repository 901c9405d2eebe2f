// The implicit shape of the CUDA bucket kd-tree (cuda/kdtree/index_kdtree.cuh):
// which points every node holds, as pure arithmetic on (n, level, position),
// so that the build and the search need no child pointers and the host can
// test the arithmetic. KNN_HD: compiled for host and device.
//
// The tree is complete: `levels` levels of splits under the root, leaves at
// depth `levels`. Node q of level l (heap number 2^l - 1 + q) holds the points
// at bucket-order positions [segment_start(n, l, q), segment_start(n, l, q+1)),
// where segment_start(n, l, q) = floor(q * n / 2^l). A node's two children
// split its segment into halves whose sizes differ by at most one, and every
// point sits in exactly one leaf. With leaf_size >= 2 no segment is empty; with leaf_size 1 some
// leaves may be (the search gives them an empty box).
#pragma once

#include <cstdint>

#include "../../common/float_math.h"
#include "../../common/host_device.h"

namespace knn {
namespace cuda {

// Deepest tree the search's fixed-size stack supports (n < 2^31 points and
// leaf_size >= 1 never need more).
constexpr int kMaxTreeLevels = 31;

// The most points a node of `level` holds: ceil(n / 2^level).
KNN_HD int64_t bucket_tree_most_points(int64_t n, int level) {
  return (n + (int64_t{1} << level) - 1) >> level;
}

// Fewest split levels that leave at most leaf_size points in every leaf.
KNN_HD int bucket_tree_levels(int64_t n, int leaf_size) {
  int levels = 0;
  while (levels < kMaxTreeLevels && bucket_tree_most_points(n, levels) > leaf_size) ++levels;
  return levels;
}

KNN_HD int64_t segment_start(int64_t n, int level, int64_t q) {
  return (q * n) >> level;  // q <= 2^31 and n < 2^31: no overflow
}

// The node of `level` whose segment holds position j (0 <= j < n): the
// largest q with segment_start(n, level, q) <= j.
KNN_HD int64_t segment_of(int64_t n, int level, int64_t j) { return (((j + 1) << level) - 1) / n; }

KNN_HD uint32_t first_node_of_level(int level) { return (uint32_t{1} << level) - 1; }

// Whether the tree keeps each bucket point with its index in
// kPackedPointScalars scalars (x, y, z, the index's bits; index_kdtree.cuh)
// rather than rows and ids apart: in 3-D, where one load (16 bytes for
// float, two for double) then brings both, for the bytes of a row and an id
// (float; double: 32 against 28).
constexpr int kPackedPointScalars = 4;
KNN_HD constexpr bool packs_bucket_points(int dim) { return dim == 3; }

}  // namespace cuda
}  // namespace knn
