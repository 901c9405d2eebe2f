// The shape of the library's kd-tree: a balanced binary tree stored in heap
// order (node i has children 2i+1 and 2i+2), its last level filled from the
// left. Both engines derive every position from the functions here, which is
// what makes the GPU and CPU builds byte-identical.
//
// Levels are counted from the root (level 0). A node is named by its level l
// and its position q within the level; its heap index is 2^l - 1 + q.
#pragma once

#include <cstdint>

#include "../include/knn_gpgpu.h"
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
#else
  return 63 - __builtin_clzll(static_cast<unsigned long long>(i + 1));
#endif
}

struct TreeShape {
  int64_t n;          // nodes in the tree
  int levels;         // tree_levels(n)
  int64_t last_count; // nodes on the last level

  KNN_HD explicit TreeShape(int64_t n_nodes)
      : n(n_nodes),
        levels(tree_levels(n_nodes)),
        last_count(n_nodes - ((levels > 0) ? (int64_t{1} << (levels - 1)) - 1 : 0)) {}

  // Nodes in the subtree of the level-l node at position q.
  KNN_HD int64_t subtree_size(int l, int64_t q) const {
    if (l >= levels) return 0;
    const int below = levels - 1 - l;                   // levels under l, last excluded
    const int64_t span = int64_t{1} << below;           // last-level slots under the node
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

  KNN_HD int64_t child_or_none(int64_t child) const { return child < n ? child : -1; }
};

// Split dimension of a node at `level` in a tree whose root splits on
// `root_dim` (0 for whole trees; subtrees cut from a tree keep their dims).
KNN_HD int split_dim(int level, int root_dim) { return (level + root_dim) % 3; }

// What is wrong with node i of a tree, checked locally: links, id range,
// finite coordinates, and the kd order against every ancestor. Returns a
// TreeDefect code (0 = fine); duplicate ids need a global pass on top.
enum TreeDefect : int {
  kTreeOk = 0,
  kTreeBadLink = 1,
  kTreeBadId = 2,
  kTreeNonFinite = 3,
  kTreeOutOfOrder = 4,
  kTreeDuplicateId = 5,
};

KNN_HD int check_tree_node(const Node* tree, int64_t n, int64_t i, int root_dim) {
  const Node& node = tree[i];
  const TreeShape shape(n);
  if (node.left != shape.child_or_none(2 * i + 1) || node.right != shape.child_or_none(2 * i + 2))
    return kTreeBadLink;
  if (node.id < 0 || node.id >= n) return kTreeBadId;
  for (int d = 0; d < 3; ++d)
    if (!is_finite_float(node.p[d])) return kTreeNonFinite;
  for (int64_t child = i; child > 0;) {
    const int64_t parent = (child - 1) / 2;
    const int dim = split_dim(node_level(parent), root_dim);
    const float split = tree[parent].p[dim];
    const bool in_left = (child == 2 * parent + 1);
    if (in_left ? !(node.p[dim] <= split) : !(node.p[dim] >= split)) return kTreeOutOfOrder;
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

}  // namespace knn
