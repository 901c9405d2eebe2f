// Validation of a caller's Node array before any query reads it, so that a
// tree that is not a tree gives KNN_ERR_INVALID_TREE instead of wrong answers
// or reads out of bounds. One pass over the nodes (fields, finiteness, the
// order against every ancestor's split, the ids), each subtree of the top
// levels a task.
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "../common/error.h"
#include "../common/first_index.h"
#include "omp_engine.h"

namespace knn {
namespace omp {

namespace {

struct NodeCoord {
  const Node* tree;
  float operator()(int64_t j, int d) const { return tree[j].p[d]; }
};

int check_node(const Node* tree, const TreeShape& shape, int64_t i) {
  const int defect = check_node_fields(tree[i], shape, i);
  return defect != kTreeOk ? defect : check_node_order(NodeCoord{tree}, i, 0);
}

// Subtrees smaller than this are checked by the task that reaches them.
constexpr int64_t kTaskCutoff = 16384;

struct Box {
  float lo[3], hi[3];
};

// The one pass of the check: every node once, each subtree of the top
// levels by its own task.
class TreeWalk {
 public:
  TreeWalk(const Node* tree, int64_t n) : tree_(tree), shape_(n), seen_(static_cast<size_t>(n)) {}

  // The smallest node of the subtree at i (n if none) whose own fields are
  // wrong (check_node_fields) or that lies outside the box its ancestors'
  // splits allow (what check_node_order rejects, found without walking every
  // node's ancestors). A subtree is left at its root's defect: the nodes
  // below it have larger numbers. The ids of the nodes passed are marked.
  int64_t first_defect(int64_t i, int level, const Box& box) {
    const int64_t n = shape_.n;
    if (i >= n) return n;
    const Node& node = tree_[i];
    if (check_node_fields(node, shape_, i) != kTreeOk) return i;
    for (int d = 0; d < 3; ++d)
      if (!(box.lo[d] <= node.p[d] && node.p[d] <= box.hi[d])) return i;
    seen_[static_cast<size_t>(node.id)].store(1, std::memory_order_relaxed);
    const int dim = split_dim(level, 0);
    Box left = box, right = box;
    left.hi[dim] = node.p[dim];
    right.lo[dim] = node.p[dim];
    int64_t in_left = n, in_right = n;
    const int64_t q = i - ((int64_t{1} << level) - 1);
    if (shape_.subtree_size(level + 1, 2 * q) > kTaskCutoff) {
#pragma omp task shared(in_left)
      in_left = first_defect(2 * i + 1, level + 1, left);
      in_right = first_defect(2 * i + 2, level + 1, right);
#pragma omp taskwait
    } else {  // no task at all: even an undeferred one costs a runtime call
      in_left = first_defect(2 * i + 1, level + 1, left);
      in_right = first_defect(2 * i + 2, level + 1, right);
    }
    return in_left < in_right ? in_left : in_right;
  }

  // Whether some id was not marked, meaningful once no defect was found:
  // the n ids are then all in range, so they form a permutation unless one
  // repeats, and then another is missing.
  bool id_missing() const {
    return first_index_where(shape_.n, [&](int64_t id) {
             return seen_[static_cast<size_t>(id)].load(std::memory_order_relaxed) == 0;
           }) < shape_.n;
  }

 private:
  const Node* tree_;
  TreeShape shape_;
  // One flag per id, set by a plain store (an atomic read-modify-write per
  // node, as a bitset needs, cost more than the rest of the walk).
  std::vector<std::atomic<uint8_t>> seen_;
};

}  // namespace

void check_tree(const Node* tree, int64_t n) {
  const TreeShape shape(n);
  TreeWalk walk(tree, n);
  const float inf = std::numeric_limits<float>::infinity();
  int64_t first_bad = n;
#pragma omp parallel
#pragma omp single
  first_bad = walk.first_defect(0, 0, Box{{-inf, -inf, -inf}, {inf, inf, inf}});
  if (first_bad < n)
    fail(KNN_ERR_INVALID_TREE,
         tree_defect_message(first_bad, check_node(tree, shape, first_bad), tree[first_bad].id));
  if (!walk.id_missing()) return;
  std::vector<bool> first_seen(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i) {
    if (first_seen[tree[i].id])
      fail(KNN_ERR_INVALID_TREE, tree_defect_message(i, kTreeDuplicateId, tree[i].id));
    first_seen[tree[i].id] = true;
  }
}

}  // namespace omp
}  // namespace knn
