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
// check_node_order rejects). Every node obeys every ancestor exactly when
// each node's two subtrees lie on their sides of its split, which the pass
// tests with the subtrees' extents, bottom up (TreeCheck::order): O(1) a
// node. Only a tree that fails there is checked node by node, against each
// ancestor, to name its smallest wrong node. Then the ids must form a
// permutation. Chunks of buckets are independent work items, so the check
// and the read are one parallel pass over the array; the upper nodes (one
// in 32) are finished after it.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

#include "../common/error.h"
#include "../common/first_index.h"
#include "../common/thread_scratch.h"
#include "kd_search.h"
#include "omp_engine.h"
#include "omp_tuning.h"

namespace knn {
namespace omp {
namespace {

struct Box {
  float lo[3], hi[3];

  static Box empty() {
    const float inf = std::numeric_limits<float>::infinity();
    return Box{{inf, inf, inf}, {-inf, -inf, -inf}};
  }
  void add(const float* p) {
    for (int d = 0; d < 3; ++d) lo[d] = std::min(lo[d], p[d]), hi[d] = std::max(hi[d], p[d]);
  }
  void add(const Box& b) {
    for (int d = 0; d < 3; ++d) lo[d] = std::min(lo[d], b.lo[d]), hi[d] = std::max(hi[d], b.hi[d]);
  }
};

// What the check has seen: whether some node may be wrong, and which ids
// occur.
class TreeCheck {
 public:
  explicit TreeCheck(int64_t n) : shape_(n), seen_(static_cast<size_t>(n)) {}

  // Node i's own fields; marks its id when they are valid.
  void node(const Node* tree, int64_t i) {
    const Node& node = tree[i];
    if (check_node_fields(node, shape_, i) != kTreeOk) return suspect();
    // One flag per id, set by a plain store (an atomic read-modify-write
    // per node, as a bitset needs, costs more than the rest of the pass).
    seen_[static_cast<size_t>(node.id)].store(1, std::memory_order_relaxed);
  }

  // Node i against the extents of its two subtrees' points on its split
  // dimension: every node obeys every ancestor's split exactly when every
  // node's subtrees lie on their sides of it. A NaN fails too (its fields
  // name it).
  void order(const Node* tree, int64_t i, int level, const Box& left, const Box* right) {
    const int dim = split_dim(level, 0);
    const float split = tree[i].p[dim];
    if (!(left.hi[dim] <= split) || (right && !(right->lo[dim] >= split))) suspect();
  }

  // Throws KNN_ERR_INVALID_TREE for the first defect, as check_tree says.
  void finish(const Node* tree) const {
    const int64_t n = shape_.n;
    if (suspect_.load(std::memory_order_relaxed)) {
      // Only a wrong tree gets here: name its smallest wrong node, each node
      // checked against its ancestors one by one.
      const int64_t bad = first_index_where(
          n, kClassicThreads, [&](int64_t i) { return check_node(tree, i) != kTreeOk; });
      if (bad < n)
        fail(KNN_ERR_INVALID_TREE, tree_defect_message(bad, check_node(tree, bad), tree[bad].id));
    }
    // Every id is in range now, so they form a permutation unless one
    // repeats, and then another is missing.
    const bool id_missing =
        first_index_where(n, kClassicThreads, [&](int64_t id) {
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
  void suspect() { suspect_.store(true, std::memory_order_relaxed); }

  TreeShape shape_;
  std::atomic<bool> suspect_{false};
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
#pragma omp parallel for num_threads(team_size(kClassicThreads)) schedule(static)
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
  // Per node down to the bucket roots: the extent of the points of its heap
  // subtree (check) and of its search node (out; a bucket's includes the
  // points pushed into it).
  std::vector<Box> subtree(check ? static_cast<size_t>(upper + buckets) : 0);
  std::vector<Box> extent(out ? static_cast<size_t>(upper + buckets) : 0);
  // The upper nodes, bottom up. A search node has no points of its own; each
  // side is bounded on the split dimension by the extent of its points
  // (nanoflann's tight split bounds: a query between the two sides' points is
  // at a distance from both).
  auto finish_upper = [&](int64_t i, int level) {
    const size_t left = static_cast<size_t>(2 * i + 1), right = left + 1;
    if (check) {
      check->order(tree, i, level, subtree[left], &subtree[right]);
      Box& b = subtree[static_cast<size_t>(i)];
      b = Box::empty();
      b.add(tree[i].p);
      b.add(subtree[left]);
      b.add(subtree[right]);
    }
    if (!out) return;
    SearchNode& s = out->nodes[static_cast<size_t>(i)];
    const int dim = split_dim(level, root_dim);
    s.first_child = static_cast<int32_t>(left);
    s.split_dim = dim;
    s.left_max = extent[left].hi[dim];
    s.right_min = extent[right].lo[dim];
    s.begin = s.end = 0;
    s.min_index = std::min(out->nodes[left].min_index, out->nodes[right].min_index);
    Box& e = extent[static_cast<size_t>(i)];
    e = extent[left];
    e.add(extent[right]);
  };
  // Work items of kChunkBuckets neighbouring buckets, read a level at a time,
  // bottom up: each level of a chunk is one contiguous run of the array (a
  // bucket at a time, the five levels' short runs far apart in memory made
  // the pass wait on memory).
  const int64_t chunks = (buckets + kChunkBuckets - 1) / kChunkBuckets;
  // The subtree extents of a thread's chunk, bucket c's node `local`
  // (numbered as a heap from the bucket's root) at c * kBucketNodes + local.
  ThreadScratch<Box> below(team_size(kClassicThreads), check ? kChunkBuckets * kBucketNodes : 0);
#pragma omp parallel num_threads(below.threads())
  {
    if (check) {
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < upper; ++i) check->node(tree, i);
    }
    Box* const mine = below.mine();
    int64_t position[kChunkBuckets];
    int32_t min_index[kChunkBuckets];
    Box e[kChunkBuckets];
    // A point into bucket c's next slot, its extent and smallest index.
    auto place = [&](int c, const Node& node) {
      for (int d = 0; d < 3; ++d) out->plane(d)[position[c]] = node.p[d];
      out->ids[static_cast<size_t>(position[c]++)] = node.id;
      e[c].add(node.p);
      min_index[c] = std::min(min_index[c], node.id);
    };
#pragma omp for schedule(dynamic, 1)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t q0 = chunk * kChunkBuckets;
      const int count = static_cast<int>(std::min<int64_t>(kChunkBuckets, buckets - q0));
      for (int c = 0; c < count; ++c) {
        const int64_t q = q0 + c;
        position[c] = out ? shape.segment_start(cut, q) + pushed.first[static_cast<size_t>(q)] : 0;
        min_index[c] = std::numeric_limits<int32_t>::max();
        e[c] = Box::empty();
        if (out)
          out->nodes[static_cast<size_t>(upper + q)].begin = static_cast<int32_t>(position[c]);
      }
      for (int local_level = kBucketLevels - 1; local_level >= 0; --local_level) {
        const int64_t first = ((upper + 1) << local_level) - 1 + (q0 << local_level);
        const int64_t last = std::min(n, first + (int64_t{count} << local_level));
        for (int64_t g = first; g < last; ++g) {
          const int c = static_cast<int>((g - first) >> local_level);
          const Node& node = tree[g];
          if (check) {
            check->node(tree, g);
            const int local = static_cast<int>((int64_t{1} << local_level) - 1 +
                                               ((g - first) & ((int64_t{1} << local_level) - 1)));
            Box* const bucket_boxes = mine + c * kBucketNodes;
            Box& b = bucket_boxes[local];
            b = Box{{node.p[0], node.p[1], node.p[2]}, {node.p[0], node.p[1], node.p[2]}};
            const int64_t child_g = 2 * g + 1;
            if (local_level + 1 < kBucketLevels && child_g < n) {
              const int child = 2 * local + 1;
              const Box* right = child_g + 1 < n ? &bucket_boxes[child + 1] : nullptr;
              check->order(tree, g, cut + local_level, bucket_boxes[child], right);
              b.add(bucket_boxes[child]);
              if (right) b.add(*right);
            }
          }
          if (out) place(c, node);
        }
      }
      for (int c = 0; c < count; ++c) {
        const int64_t q = q0 + c;
        if (check) subtree[static_cast<size_t>(upper + q)] = mine[c * kBucketNodes];
        if (!out) continue;
        for (int64_t j = pushed.first[static_cast<size_t>(q)];
             j < pushed.first[static_cast<size_t>(q) + 1]; ++j)
          place(c, tree[pushed.nodes[static_cast<size_t>(j)]]);
        SearchNode& s = out->nodes[static_cast<size_t>(upper + q)];
        s.end = static_cast<int32_t>(position[c]);
        s.min_index = min_index[c];
        extent[static_cast<size_t>(upper + q)] = e[c];
      }
    }
    // Levels of many nodes are shared out (a barrier each); the ones above
    // are finished by one thread (for 10^6 points 13 levels, 8191 nodes:
    // 13 barriers fewer). A thread that sleeps at a barrier (OMP_WAIT_POLICY
    // =passive, or libgomp's throttled spin on a loaded machine) waits for
    // a core before it goes on.
    int level = cut - 1;
    for (; level >= 0 && (int64_t{1} << level) >= kSharedUpperLevelNodes; --level) {
      const int64_t first = (int64_t{1} << level) - 1;
#pragma omp for schedule(static)
      for (int64_t i = first; i < 2 * first + 1; ++i) finish_upper(i, level);
    }
#pragma omp single nowait
    for (; level >= 0; --level) {
      const int64_t first = (int64_t{1} << level) - 1;
      for (int64_t i = first; i < 2 * first + 1; ++i) finish_upper(i, level);
    }
  }
  if (!out) return;
  for (int d = 0; d < 3; ++d) {
    out->lo[static_cast<size_t>(d)] = extent[0].lo[d];
    out->hi[static_cast<size_t>(d)] = extent[0].hi[d];
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
  search_knn(t, reinterpret_cast<const float*>(queries), m, k, kClassicThreads, indices,
             sq_distances);
}

}  // namespace omp
}  // namespace knn
