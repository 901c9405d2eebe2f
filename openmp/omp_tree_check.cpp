// Validation of a caller's Node array before any query reads it, so that a
// tree that is not a tree gives KNN_ERR_INVALID_TREE instead of wrong answers
// or reads out of bounds.
#include <atomic>
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

// The smallest node of the subtree at i that lies outside the box its
// ancestors' splits allow (n if none): the nodes check_node_order rejects,
// found in O(n) instead of walking every node's ancestors.
int64_t first_out_of_order(const Node* tree, const TreeShape& shape, int64_t i, int level,
                           const Box& box) {
  const int64_t n = shape.n;
  if (i >= n) return n;
  const Node& node = tree[i];
  for (int d = 0; d < 3; ++d)
    if (!(box.lo[d] <= node.p[d] && node.p[d] <= box.hi[d])) return i;  // below it: larger indices
  const int dim = split_dim(level, 0);
  Box left = box, right = box;
  left.hi[dim] = node.p[dim];
  right.lo[dim] = node.p[dim];
  int64_t in_left = n;
  const int64_t q = i - ((int64_t{1} << level) - 1);
#pragma omp task if (shape.subtree_size(level + 1, 2 * q) > kTaskCutoff) shared(in_left)
  in_left = first_out_of_order(tree, shape, 2 * i + 1, level + 1, left);
  const int64_t in_right = first_out_of_order(tree, shape, 2 * i + 2, level + 1, right);
#pragma omp taskwait
  return in_left < in_right ? in_left : in_right;
}

}  // namespace

void check_tree(const Node* tree, int64_t n) {
  const TreeShape shape(n);
  const int64_t bad_fields = first_index_where(
      n, [&](int64_t i) { return check_node_fields(tree[i], shape, i) != kTreeOk; });
  const float inf = std::numeric_limits<float>::infinity();
  int64_t bad_order = n;
#pragma omp parallel
#pragma omp single
  bad_order = first_out_of_order(tree, shape, 0, 0, Box{{-inf, -inf, -inf}, {inf, inf, inf}});
  const int64_t first_bad = bad_fields < bad_order ? bad_fields : bad_order;
  if (first_bad < n)
    fail(KNN_ERR_INVALID_TREE,
         tree_defect_message(first_bad, check_node(tree, shape, first_bad), tree[first_bad].id));

  // Every id is in range; they form a permutation unless one repeats.
  std::vector<std::atomic<uint32_t>> seen(static_cast<size_t>((n + 31) / 32));
  std::atomic<bool> repeated{false};
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bit = 1u << (tree[i].id % 32);
    if (seen[tree[i].id / 32].fetch_or(bit, std::memory_order_relaxed) & bit) repeated = true;
  }
  if (!repeated) return;
  std::vector<bool> first_seen(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i) {
    if (first_seen[tree[i].id])
      fail(KNN_ERR_INVALID_TREE, tree_defect_message(i, kTreeDuplicateId, tree[i].id));
    first_seen[tree[i].id] = true;
  }
}

}  // namespace omp
}  // namespace knn
