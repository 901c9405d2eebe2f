// Validation of a caller's Node array before any query reads it, so that a
// tree that is not a tree gives KNN_ERR_INVALID_TREE instead of wrong answers
// or reads out of bounds.
#include <atomic>
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

}  // namespace

void check_tree(const Node* tree, int64_t n) {
  const TreeShape shape(n);
  const int64_t first_bad =
      first_index_where(n, [&](int64_t i) { return check_node(tree, shape, i) != kTreeOk; });
  if (first_bad < n)
    fail(KNN_ERR_INVALID_TREE, tree_defect_message(first_bad, check_node(tree, shape, first_bad),
                                                   tree[first_bad].id));

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
