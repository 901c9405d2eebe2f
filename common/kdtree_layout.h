// The shape of the library's kd-tree: a balanced binary tree stored in heap
// order (node i has children 2i+1 and 2i+2), its last level filled from the
// left. Both engines derive every position from the functions here, which is
// what makes the GPU and CPU builds byte-identical.
//
// Levels are counted from the root (level 0). A node is named by its level l
// and its position q within the level; its heap index is 2^l - 1 + q.
#pragma once

#include <cstdint>

#include <string>

#if defined(_MSC_VER) && !defined(__CUDA_ARCH__)
#include <intrin.h>
#endif

#include "../include/knn_gpgpu.h"
#include "error.h"
#include "float_math.h"
#include "host_device.h"

namespace knn {

static_assert(sizeof(Point) == 12, "Point must be 3 packed floats");
static_assert(sizeof(Node) == 24, "Node must be 24 bytes");

// Number of levels of an n-node tree: ceil(log2(n + 1)).
KNN_HD int tree_levels(int64_t n) {
  int levels = 0;
  while ((int64_t{1} << levels) - 1 < n) ++levels;
  return levels;
}

// Level of heap node i: floor(log2(i + 1)).
KNN_HD int node_level(int64_t i) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(i + 1));
#elif defined(_MSC_VER)
  unsigned long top = 0;
  _BitScanReverse64(&top, static_cast<unsigned long long>(i + 1));
  return static_cast<int>(top);
#else
  return 63 - __builtin_clzll(static_cast<unsigned long long>(i + 1));
#endif
}

struct TreeShape {
  int64_t n;           // nodes in the tree
  int levels;          // tree_levels(n)
  int64_t last_count;  // nodes on the last level

  KNN_HD explicit TreeShape(int64_t n_nodes)
      : n(n_nodes),
        levels(tree_levels(n_nodes)),
        last_count(n_nodes - ((levels > 0) ? (int64_t{1} << (levels - 1)) - 1 : 0)) {}

  // Nodes in the subtree of the level-l node at position q.
  KNN_HD int64_t subtree_size(int l, int64_t q) const {
    if (l >= levels) return 0;
    const int below = levels - 1 - l;          // levels under l, last excluded
    const int64_t span = int64_t{1} << below;  // last-level slots under the node
    int64_t on_last = last_count - q * span;
    on_last = on_last < 0 ? 0 : (on_last > span ? span : on_last);
    return (span - 1) + on_last;
  }

  // Nodes at levels >= l that lie in the subtrees of level-l nodes left of q:
  // where the points of node (l, q) start when the points still to be placed
  // at level l are kept in node order.
  KNN_HD int64_t segment_start(int l, int64_t q) const {
    if (l >= levels) return n;
    const int below = levels - 1 - l;
    const int64_t span = int64_t{1} << below;
    const int64_t on_last = q * span < last_count ? q * span : last_count;
    return q * (span - 1) + on_last;
  }

  // Rank (0-based, in (coordinate, index) order) of node (l, q)'s own point
  // among the points of its subtree: the size of its left subtree.
  KNN_HD int64_t median_rank(int l, int64_t q) const { return subtree_size(l + 1, 2 * q); }

  // Inverse of segment_start: the level-l node whose points hold position j
  // of the level's node-ordered array. Nodes left of q0 have full last-level
  // slots (2*span - 1 points each), node q0 is partial, the rest have span - 1.
  KNN_HD int64_t segment_of(int l, int64_t j) const {
    const int below = levels - 1 - l;
    const int64_t span = int64_t{1} << below;
    const int64_t full = 2 * span - 1;
    const int64_t q0 = last_count / span;
    const int64_t full_end = q0 * full;
    if (j < full_end) return j / full;
    const int64_t partial_end = full_end + (span - 1) + (last_count - q0 * span);
    if (j < partial_end) return q0;
    return q0 + 1 + (j - partial_end) / (span - 1);
  }

  KNN_HD int64_t child_or_none(int64_t child) const { return child < n ? child : -1; }
};

// The order in which a node's median is chosen: by coordinate on the split
// axis, ties by the smaller original index (-0.0 and +0.0 tie, as floats do).
// Computed without a branch: in the CPU build's median selection the outcome
// is unpredictable, and the short-circuit form made the build 2x slower.
KNN_HD bool before_on_axis(float coord_a, int32_t id_a, float coord_b, int32_t id_b) {
  return (coord_a < coord_b) | ((coord_a == coord_b) & (id_a < id_b));
}

// Split dimension of a node at `level` in a tree whose root splits on
// `root_dim` (0 for whole trees; subtrees cut from a tree keep their dims).
KNN_HD int split_dim(int level, int root_dim) { return (level + root_dim) % 3; }

// Where a point's descent through the first `levels` levels of a tree leads
// (equal coordinates go left): the position of the level-`levels` node it
// reaches. `levels` must be below the tree's own number of levels.
inline int64_t descend(const Node* tree, const float* q, int levels, int root_dim) {
  int64_t b = 0;
  for (int level = 0; level < levels; ++level) {
    const int dim = split_dim(level, root_dim);
    b = 2 * b + (q[dim] <= tree[b].p[dim] ? 1 : 2);
  }
  return b - ((int64_t{1} << levels) - 1);
}

// Checks of a caller's tree, shared by both engines so that they accept the
// same arrays and name the same first defect. A TreeDefect code; 0 = fine.
enum TreeDefect : int {
  kTreeOk = 0,
  kTreeBadLink = 1,
  kTreeBadId = 2,
  kTreeNonFinite = 3,
  kTreeOutOfOrder = 4,
  kTreeDuplicateId = 5,
};

// What node i says about itself: links, id range, finite coordinates.
KNN_HD int check_node_fields(const Node& node, const TreeShape& shape, int64_t i) {
  if (node.left != shape.child_or_none(2 * i + 1) || node.right != shape.child_or_none(2 * i + 2))
    return kTreeBadLink;
  if (node.id < 0 || node.id >= shape.n) return kTreeBadId;
  for (int d = 0; d < 3; ++d)
    if (!is_finite_float(node.p[d])) return kTreeNonFinite;
  return kTreeOk;
}

// Node i against the split of every ancestor; coord(j, d) reads coordinate d
// of node j (each engine reads its own copy of the tree).
template <class CoordOf>
KNN_HD int check_node_order(const CoordOf& coord, int64_t i, int root_dim) {
  for (int64_t child = i; child > 0;) {
    const int64_t parent = (child - 1) / 2;
    const int dim = split_dim(node_level(parent), root_dim);
    const float split = coord(parent, dim), c = coord(i, dim);
    const bool in_left = (child == 2 * parent + 1);
    if (in_left ? !(c <= split) : !(c >= split)) return kTreeOutOfOrder;
    child = parent;
  }
  return kTreeOk;
}

KNN_HD const char* tree_defect_text(int defect) {
  switch (defect) {
    case kTreeBadLink: return "has child links that are not the heap layout (2i+1, 2i+2 or -1)";
    case kTreeBadId: return "has an id outside [0, n_tree)";
    case kTreeNonFinite: return "has a NaN or infinite coordinate";
    case kTreeOutOfOrder: return "breaks the kd order against an ancestor's split";
    case kTreeDuplicateId: return "repeats an id of an earlier node";
    default: return "is valid";
  }
}

// The knn_last_error() text of a rejected tree; both engines use it.
inline std::string tree_defect_message(int64_t node, int defect, int id) {
  std::string text = format("node %lld %s", static_cast<long long>(node), tree_defect_text(defect));
  if (defect == kTreeDuplicateId || defect == kTreeBadId) text += format(" (id %d)", id);
  return text;
}

}  // namespace knn
