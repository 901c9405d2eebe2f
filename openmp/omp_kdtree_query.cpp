// CPU kNN search of the classic heap-ordered kd-tree: the caller's Node
// array, read once into the search layout of kd_search.h (and checked in the
// same pass), then searched by the engine's one kd-tree walk (box pruning,
// ties pruned by index).
//
// The view. The heap's nodes above the bottom kBucketLevels levels stay
// inner nodes, each holding its own point and splitting at it (left subtree
// <= the point's coordinate on the level's dimension, right subtree >=, as
// the layout guarantees); each subtree rooted kBucketLevels levels above the
// bottom becomes one leaf bucket, its points gathered side by side. Nodes
// keep their heap numbers, so node i's children are still 2i+1 and 2i+2.
//
// The check. A node is wrong when its own fields are (check_node_fields) or
// when it lies outside the box its ancestors' splits allow (what
// check_node_order rejects, without walking every node's ancestors: each
// node's box comes from its parent's, the upper levels a level at a time).
// The error names the smallest wrong node: nodes below a wrong
// one have larger numbers, so a defect found under it never changes the
// minimum. Then the ids must form a permutation. Upper nodes and buckets are
// independent work items, so the check and the read are one parallel pass
// over the array, as fast as memory allows.
#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

#include "../common/error.h"
#include "../common/first_index.h"
#include "kd_search.h"
#include "omp_engine.h"

namespace knn {
namespace omp {
namespace {

// Buckets of up to 2^5 - 1 = 31 points: as long as a leaf of the index
// kd-tree (and of nanoflann at its best), short enough to scan. Measured on
// a shared 2-core AMD EPYC (mpQueryAll, 1 thread, n = 10^6 uniform,
// 2 * 10^5 queries, best of 3 in each of two alternating rounds, ms at
// k = 8 / k = 100): 3 levels (7 points) 512, 506 / 3222, 3323; 4 (15) 460,
// 473 / 3096, 3051; 5 (31) 452, 448 / 3025, 3019; 6 (63) 466, 459 / 3000,
// 3036. Shallower buckets put more single-point inner nodes on every path;
// deeper ones scan more points per bucket.
constexpr int kBucketLevels = 5;
constexpr int kBucketNodes = (1 << kBucketLevels) - 1;

struct Box {
  float lo[3], hi[3];
};

// What the check has seen: the smallest wrong node and which ids occur.
class TreeCheck {
 public:
  explicit TreeCheck(int64_t n) : shape_(n), first_bad_(n), seen_(static_cast<size_t>(n)) {}

  // Node i, in the box its ancestors allow; marks its id when it is valid.
  void node(const Node* tree, int64_t i, const Box& box) {
    const Node& node = tree[i];
    bool fine = check_node_fields(node, shape_, i) == kTreeOk;
    for (int d = 0; d < 3 && fine; ++d) fine = box.lo[d] <= node.p[d] && node.p[d] <= box.hi[d];
    if (!fine) return note_defect(i);
    // One flag per id, set by a plain store (an atomic read-modify-write
    // per node, as a bitset needs, costs more than the rest of the pass).
    seen_[static_cast<size_t>(node.id)].store(1, std::memory_order_relaxed);
  }

  // Throws KNN_ERR_INVALID_TREE for the first defect, as check_tree says.
  void finish(const Node* tree) const {
    const int64_t n = shape_.n;
    const int64_t bad = first_bad_.load(std::memory_order_relaxed);
    if (bad < n)
      fail(KNN_ERR_INVALID_TREE, tree_defect_message(bad, check_node(tree, bad), tree[bad].id));
    // Every id is in range now, so they form a permutation unless one
    // repeats, and then another is missing.
    const bool id_missing =
        first_index_where(n, [&](int64_t id) {
          return seen_[static_cast<size_t>(id)].load(std::memory_order_relaxed) == 0;
        }) < n;
    if (!id_missing) return;
    std::vector<bool> first_seen(static_cast<size_t>(n), false);
    for (int64_t i = 0; i < n; ++i) {
      if (first_seen[tree[i].id])
        fail(KNN_ERR_INVALID_TREE, tree_defect_message(i, kTreeDuplicateId, tree[i].id));
      first_seen[tree[i].id] = true;
    }
  }

 private:
  struct NodeCoord {
    const Node* tree;
    float operator()(int64_t j, int d) const { return tree[j].p[d]; }
  };
  int check_node(const Node* tree, int64_t i) const {
    const int defect = check_node_fields(tree[i], shape_, i);
    return defect != kTreeOk ? defect : check_node_order(NodeCoord{tree}, i, 0);
  }
  void note_defect(int64_t i) {
    int64_t known = first_bad_.load(std::memory_order_relaxed);
    while (i < known && !first_bad_.compare_exchange_weak(known, i, std::memory_order_relaxed)) {
    }
  }

  TreeShape shape_;
  std::atomic<int64_t> first_bad_;
  std::vector<std::atomic<uint8_t>> seen_;
};

// The one pass over a caller's array: into `out` unless NULL, through
// `check` unless NULL (a whole tree: root_dim 0).
void read_tree(const Node* tree, int64_t n, int root_dim, SearchTree* out, TreeCheck* check) {
  if (n == 0) {
    if (out) out->allocate(3, 0, 0);
    return;
  }
  const TreeShape shape(n);
  // The bucket level is complete (it is the root, or 2+ levels above the
  // last), so every node above it has both children and no bucket is empty.
  const int cut = std::max(0, shape.levels - kBucketLevels);
  const int64_t upper = (int64_t{1} << cut) - 1;
  const int64_t buckets = int64_t{1} << cut;
  if (out) out->allocate(3, n, upper + buckets);
  std::vector<float> boxes(out ? static_cast<size_t>(buckets) * 6 : 0);
  // The check's boxes of the nodes down to the bucket roots, each from its
  // parent's, a level at a time.
  std::vector<Box> node_box(check ? static_cast<size_t>(upper + buckets) : 0);
  auto child_box = [&](int64_t g, const Box& parent_box, int parent_level) {
    const int64_t parent = (g - 1) / 2;
    const int dim = split_dim(parent_level, root_dim);
    Box b = parent_box;
    (g == 2 * parent + 1 ? b.hi : b.lo)[dim] = tree[parent].p[dim];
    return b;
  };
  auto place = [&](int64_t position, const Node& node) {
    for (int d = 0; d < 3; ++d) out->plane(d)[position] = node.p[d];
    out->ids[static_cast<size_t>(position)] = node.id;
  };
#pragma omp parallel
  {
    if (check) {
      const float inf = std::numeric_limits<float>::infinity();
#pragma omp single
      node_box[0] = Box{{-inf, -inf, -inf}, {inf, inf, inf}};
      for (int level = 1; level <= cut; ++level) {
        const int64_t first = (int64_t{1} << level) - 1;
#pragma omp for schedule(static)
        for (int64_t g = first; g < 2 * first + 1; ++g)
          node_box[static_cast<size_t>(g)] =
              child_box(g, node_box[static_cast<size_t>((g - 1) / 2)], level - 1);
      }
    }
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < upper; ++i) {
      if (check) check->node(tree, i, node_box[static_cast<size_t>(i)]);
      if (!out) continue;
      const int dim = split_dim(node_level(i), root_dim);
      SearchNode& s = out->nodes[static_cast<size_t>(i)];
      s.first_child = static_cast<int32_t>(2 * i + 1);
      s.split_dim = dim;
      s.left_max = s.right_min = tree[i].p[dim];
      s.begin = static_cast<int32_t>(i);
      s.end = static_cast<int32_t>(i + 1);
      place(i, tree[i]);
    }
#pragma omp for schedule(dynamic, 64)
    for (int64_t q = 0; q < buckets; ++q) {
      const int64_t root = upper + q;
      Box box[kBucketNodes];  // of the bucket's nodes, numbered as a heap from its root
      if (check) box[0] = node_box[static_cast<size_t>(root)];
      int64_t position = upper + shape.segment_start(cut, q);
      SearchNode* s = out ? &out->nodes[static_cast<size_t>(root)] : nullptr;
      float* lo = out ? &boxes[static_cast<size_t>(q) * 6] : nullptr;
      float* hi = out ? lo + 3 : nullptr;
      if (s) {
        s->begin = static_cast<int32_t>(position);
        s->min_index = std::numeric_limits<int32_t>::max();
        std::fill(lo, lo + 3, std::numeric_limits<float>::infinity());
        std::fill(hi, hi + 3, -std::numeric_limits<float>::infinity());
      }
      int level = cut;
      for (int64_t width = 1, first = root; first < n; width *= 2, first = 2 * first + 1, ++level) {
        for (int64_t g = first; g < std::min(n, first + width); ++g) {
          const Node& node = tree[g];
          if (check) {
            const int64_t local = width - 1 + (g - first);
            if (local > 0) box[local] = child_box(g, box[(local - 1) / 2], level - 1);
            check->node(tree, g, box[local]);
          }
          if (!s) continue;
          place(position++, node);
          s->min_index = std::min(s->min_index, node.id);
          for (int d = 0; d < 3; ++d)
            lo[d] = std::min(lo[d], node.p[d]), hi[d] = std::max(hi[d], node.p[d]);
        }
      }
      if (s) s->end = static_cast<int32_t>(position);
    }
  }
  if (!out) return;
  SearchTree& t = *out;
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
}

}  // namespace

void check_tree(const Node* tree, int64_t n) {
  TreeCheck check(n);
  read_tree(tree, n, 0, nullptr, &check);
  check.finish(tree);
}

SearchTree classic_search_tree(const Node* tree, int64_t n, int root_dim) {
  SearchTree t;
  read_tree(tree, n, root_dim, &t, nullptr);
  return t;
}

void query_kdtree(const Node* tree, int64_t n, const Point* queries, int64_t m, int k,
                  int32_t* indices, float* sq_distances) {
  SearchTree t;
  TreeCheck check(n);
  read_tree(tree, n, 0, &t, &check);
  check.finish(tree);
  search_knn(t, reinterpret_cast<const float*>(queries), m, k, 0, indices, sq_distances);
}

}  // namespace omp
}  // namespace knn
