// CPU kNN search of the classic heap-ordered kd-tree: the caller's Node
// array, read once into the search layout of kd_search.h, then searched by
// the engine's one kd-tree walk (box pruning, ties pruned by index).
//
// The view. The heap's nodes above the bottom kBucketLevels levels stay
// inner nodes, each holding its own point and splitting at it (left subtree
// <= the point's coordinate on the level's dimension, right subtree >=, as
// the layout guarantees); each subtree rooted kBucketLevels levels above the
// bottom becomes one leaf bucket, its points gathered side by side. Nodes
// keep their heap numbers, so node i's children are still 2i+1 and 2i+2.
#include <algorithm>
#include <limits>
#include <vector>

#include "kd_search.h"
#include "omp_engine.h"
#include "thread_scratch.h"

namespace knn {
namespace omp {
namespace {

// Buckets of up to 2^5 - 1 = 31 points: as long as a leaf of the index
// kd-tree (and of nanoflann at its best), short enough to scan.
constexpr int kBucketLevels = 5;

void place(SearchTree& t, int64_t position, const Node& node) {
  for (int d = 0; d < 3; ++d) t.plane(d)[position] = node.p[d];
  t.ids[static_cast<size_t>(position)] = node.id;
}

}  // namespace

SearchTree classic_search_tree(const Node* tree, int64_t n, int root_dim) {
  SearchTree t;
  if (n == 0) {
    t.allocate(3, 0, 0);
    return t;
  }
  const TreeShape shape(n);
  // The bucket level is complete (it is the root, or 2+ levels above the
  // last), so every node above it has both children and no bucket is empty.
  const int cut = std::max(0, shape.levels - kBucketLevels);
  const int64_t upper = (int64_t{1} << cut) - 1;
  const int64_t buckets = int64_t{1} << cut;
  t.allocate(3, n, upper + buckets);
  std::vector<float> boxes(static_cast<size_t>(buckets) * 6);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < upper; ++i) {
    const int dim = split_dim(node_level(i), root_dim);
    SearchNode& s = t.nodes[static_cast<size_t>(i)];
    s.first_child = static_cast<int32_t>(2 * i + 1);
    s.split_dim = dim;
    s.left_max = s.right_min = tree[i].p[dim];
    s.begin = static_cast<int32_t>(i);
    s.end = static_cast<int32_t>(i + 1);
    place(t, i, tree[i]);
  }
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t q = 0; q < buckets; ++q) {
    SearchNode& s = t.nodes[static_cast<size_t>(upper + q)];
    int64_t position = upper + shape.segment_start(cut, q);
    s.begin = static_cast<int32_t>(position);
    s.min_index = std::numeric_limits<int32_t>::max();
    float* lo = &boxes[static_cast<size_t>(q) * 6];
    float* hi = lo + 3;
    std::fill(lo, lo + 3, std::numeric_limits<float>::infinity());
    std::fill(hi, hi + 3, -std::numeric_limits<float>::infinity());
    for (int64_t width = 1, first = upper + q; first < n; width *= 2, first = 2 * first + 1) {
      for (int64_t g = first; g < std::min(n, first + width); ++g) {
        place(t, position++, tree[g]);
        s.min_index = std::min(s.min_index, tree[g].id);
        for (int d = 0; d < 3; ++d)
          lo[d] = std::min(lo[d], tree[g].p[d]), hi[d] = std::max(hi[d], tree[g].p[d]);
      }
    }
    s.end = static_cast<int32_t>(position);
  }
  for (int64_t i = upper - 1; i >= 0; --i)
    t.nodes[static_cast<size_t>(i)].min_index =
        std::min({tree[i].id, t.nodes[static_cast<size_t>(2 * i + 1)].min_index,
                  t.nodes[static_cast<size_t>(2 * i + 2)].min_index});
  for (int d = 0; d < 3; ++d) {
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int64_t q = 0; q < buckets; ++q)
      lo = std::min(lo, boxes[static_cast<size_t>(q) * 6 + d]),
      hi = std::max(hi, boxes[static_cast<size_t>(q) * 6 + 3 + d]);
    for (int64_t i = 0; i < upper; ++i)
      lo = std::min(lo, tree[i].p[d]), hi = std::max(hi, tree[i].p[d]);
    t.lo[static_cast<size_t>(d)] = lo;
    t.hi[static_cast<size_t>(d)] = hi;
  }
  return t;
}

void query_kdtree(const Node* tree, int64_t n, int root_dim, const Point* queries, int64_t m, int k,
                  int32_t* indices, float* sq_distances) {
  search_knn(classic_search_tree(tree, n, root_dim), reinterpret_cast<const float*>(queries), m, k,
             0, indices, sq_distances);
}

}  // namespace omp
}  // namespace knn
