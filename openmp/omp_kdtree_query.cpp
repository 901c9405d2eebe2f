// CPU kNN search of the classic heap-ordered kd-tree: the caller's Node
// array, read once into the search layout of kd_search.h (and checked in the
// same pass), then searched by the engine's one kd-tree walk (box pruning,
// ties pruned by index).
//
// The view. The heap's nodes above the bottom kBucketLevels levels become
// inner nodes without points of their own; each subtree rooted
// kBucketLevels levels above the bottom becomes one leaf bucket, its points
// gathered side by side, joined by the points of the inner nodes, each
// pushed down into the bucket its descent reaches (push_down). Each side of
// an inner node is bounded on the split dimension by the extent of its
// points (nanoflann's tight split bounds), not by the split itself. Nodes
// keep their heap numbers, so node i's children are still 2i+1 and 2i+2.
// Against inner nodes that each hold their split point (measured on a shared
// 2-core AMD EPYC, mpQueryAll, 1 thread, n = 10^6 uniform, 2 * 10^5
// queries, best of 3, two alternating rounds): k = 8 285, 271 -> 250,
// 240 ms; k = 100 1869, 1865 -> 1511, 1523 ms. A walk no longer scans a far
// point at every level on its way down (at k = 100 those filled the list
// with poor candidates, so that more later ones entered it), and a query
// between two sides' points is at a distance from both.
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

// Where the points of the upper nodes go: each descends from its node's left
// child (its coordinate on the node's split is the split itself) through the
// upper levels, equal coordinates going left, into the bucket it reaches,
// whose box it then lies in. Bucket q holds pushed nodes
// nodes[first[q], first[q + 1]), in node order.
struct PushedPoints {
  std::vector<int64_t> first, nodes;
};

PushedPoints push_down(const Node* tree, int64_t upper, int root_dim) {
  const int64_t buckets = upper + 1;
  std::vector<int64_t> bucket(static_cast<size_t>(upper));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < upper; ++i) {
    const float* p = tree[i].p;
    int64_t j = 2 * i + 1;
    for (int level = node_level(j); j < upper; ++level) {
      const int dim = split_dim(level, root_dim);
      j = p[dim] <= tree[j].p[dim] ? 2 * j + 1 : 2 * j + 2;
    }
    bucket[static_cast<size_t>(i)] = j - upper;
  }
  PushedPoints pushed{std::vector<int64_t>(static_cast<size_t>(buckets) + 1, 0),
                      std::vector<int64_t>(static_cast<size_t>(upper))};
  for (const int64_t q : bucket) ++pushed.first[static_cast<size_t>(q) + 1];
  for (int64_t q = 0; q < buckets; ++q)
    pushed.first[static_cast<size_t>(q) + 1] += pushed.first[static_cast<size_t>(q)];
  std::vector<int64_t> next(pushed.first.begin(), pushed.first.end() - 1);
  for (int64_t i = 0; i < upper; ++i)
    pushed.nodes[static_cast<size_t>(next[static_cast<size_t>(bucket[static_cast<size_t>(i)])]++)] =
        i;
  return pushed;
}

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
  PushedPoints pushed;
  if (out) {
    out->allocate(3, n, upper + buckets);
    pushed = push_down(tree, upper, root_dim);
  }
  // The extent of each search node's points (out only).
  std::vector<Box> extent(out ? static_cast<size_t>(upper + buckets) : 0);
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
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < upper; ++i) check->node(tree, i, node_box[static_cast<size_t>(i)]);
    }
#pragma omp for schedule(dynamic, 64)
    for (int64_t q = 0; q < buckets; ++q) {
      const int64_t root = upper + q;
      Box box[kBucketNodes];  // of the bucket's nodes, numbered as a heap from its root
      if (check) box[0] = node_box[static_cast<size_t>(root)];
      SearchNode* s = out ? &out->nodes[static_cast<size_t>(root)] : nullptr;
      Box* e = out ? &extent[static_cast<size_t>(root)] : nullptr;
      int64_t position = 0;
      auto place = [&](const Node& node) {
        for (int d = 0; d < 3; ++d) {
          out->plane(d)[position] = node.p[d];
          e->lo[d] = std::min(e->lo[d], node.p[d]);
          e->hi[d] = std::max(e->hi[d], node.p[d]);
        }
        out->ids[static_cast<size_t>(position++)] = node.id;
        s->min_index = std::min(s->min_index, node.id);
      };
      if (s) {
        position = shape.segment_start(cut, q) + pushed.first[static_cast<size_t>(q)];
        s->begin = static_cast<int32_t>(position);
        s->min_index = std::numeric_limits<int32_t>::max();
        const float inf = std::numeric_limits<float>::infinity();
        *e = Box{{inf, inf, inf}, {-inf, -inf, -inf}};
        for (int64_t j = pushed.first[static_cast<size_t>(q)];
             j < pushed.first[static_cast<size_t>(q) + 1]; ++j)
          place(tree[pushed.nodes[static_cast<size_t>(j)]]);
      }
      int level = cut;
      for (int64_t width = 1, first = root; first < n; width *= 2, first = 2 * first + 1, ++level) {
        for (int64_t g = first; g < std::min(n, first + width); ++g) {
          if (check) {
            const int64_t local = width - 1 + (g - first);
            if (local > 0) box[local] = child_box(g, box[(local - 1) / 2], level - 1);
            check->node(tree, g, box[local]);
          }
          if (s) place(tree[g]);
        }
      }
      if (s) s->end = static_cast<int32_t>(position);
    }
  }
  if (!out) return;
  // The inner nodes, bottom up: no points of their own; each side's bound is
  // the extent of its points on the split dimension (nanoflann's tight split
  // bounds: a query between the two sides is at a distance from both).
  SearchTree& t = *out;
  for (int64_t i = upper - 1; i >= 0; --i) {
    const size_t left = static_cast<size_t>(2 * i + 1), right = left + 1;
    SearchNode& s = t.nodes[static_cast<size_t>(i)];
    const int dim = split_dim(node_level(i), root_dim);
    s.first_child = static_cast<int32_t>(left);
    s.split_dim = dim;
    s.left_max = extent[left].hi[dim];
    s.right_min = extent[right].lo[dim];
    s.begin = s.end = 0;
    s.min_index = std::min(t.nodes[left].min_index, t.nodes[right].min_index);
    Box& e = extent[static_cast<size_t>(i)];
    for (int d = 0; d < 3; ++d) {
      e.lo[d] = std::min(extent[left].lo[d], extent[right].lo[d]);
      e.hi[d] = std::max(extent[left].hi[d], extent[right].hi[d]);
    }
  }
  for (int d = 0; d < 3; ++d) {
    t.lo[static_cast<size_t>(d)] = extent[0].lo[d];
    t.hi[static_cast<size_t>(d)] = extent[0].hi[d];
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
