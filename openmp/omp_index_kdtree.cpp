// The OpenMP bucket kd-tree of the index API, for any dimension.
//
// Build. The index keeps the points reordered so that every leaf ("bucket")
// holds a contiguous run of at most leaf_size points. A node splits its
// points at the median (nth_element by (coordinate, original index)) on the
// dimension where its bounding box is widest; every node keeps its tight
// bounding box and the smallest original index below it. Nodes are built
// level by level (breadth first, the children of a node side by side), each
// level's nodes in parallel, so the tree depends on the input alone.
//
// Search. Depth first, nearer child first. A node is skipped when no point in
// it can enter the list: the box distance (below) exceeds the current k-th
// distance, or equals it while every index in the node is larger than the
// k-th's (ties go to the smaller index, so such a point would lose the tie).
//
// Why the box distance is a lower bound of every point's float32 distance:
// per dimension it uses c = clamp(q, lo, hi), and for any point p of the box
// |q - c| <= |q - p| in exact arithmetic; float32 subtraction, squaring of a
// magnitude and addition are all monotone (rounding never reverses an order),
// so computing fl(q - c)^2 and summing in dimension order exactly as
// squared_distance does gives a value <= the point's squared_distance.
#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "../common/error.h"
#include "../common/float_math.h"
#include "../include/knn_gpgpu.h"
#include "../engine/index_engine.h"
#include "../engine/progress.h"
#include "omp_index_support.h"

namespace knn {
namespace omp {
namespace {

// Library default bucket size: large enough that the box tests per visited
// point stay cheap, small enough that a leaf scan stays short (see
// bench/bench_index_cpu.cpp for the measurements).
constexpr int kDefaultLeafSize = 32;
// Queries of one parallel work item (sorted by leaf, so neighbours in a block
// walk the same part of the tree).
constexpr int64_t kQueriesPerBlock = 256;

struct KdNode {
  int32_t begin = 0, end = 0;  // the node's points: bucket-order positions [begin, end)
  int32_t first_child = -1;    // children first_child and first_child + 1; -1 for a leaf
  int32_t min_index = 0;       // smallest original index among the node's points
  int32_t split_dim = 0;       // inner nodes: the split (used to place queries in leaves)
  float split_value = 0.0f;
};

class KdTreeIndex final : public IndexEngine {
 public:
  KdTreeIndex(const float* points, int64_t n, int dim, const IndexParams& params)
      : n_(n), dim_(dim), leaf_size_(params.leaf_size > 0 ? params.leaf_size : kDefaultLeafSize) {
    build(points, thread_count(params.threads), cancel_flag());
  }

  int backend() const override { return KNN_BACKEND_OPENMP; }
  int structure() const override { return KNN_STRUCTURE_KDTREE; }
  int64_t size() const override { return n_; }
  int dim() const override { return dim_; }

  void knn(const float* queries, int64_t m, int k, int32_t* indices, float* sq_distances,
           const CallParams& call) const override {
    const std::vector<int64_t> order = leaf_order(queries, m, call.threads);
    for_each_block(
        m, kQueriesPerBlock, thread_count(call.threads), cancel_flag(), [&] { return NeighborList(k, n_); },
        [&](NeighborList& list, int64_t b) {
          for (int64_t i = b * kQueriesPerBlock; i < std::min(m, (b + 1) * kQueriesPerBlock); ++i) {
            const int64_t q = order[static_cast<size_t>(i)];
            nearest(queries + q * dim_, list);
            list.write(k, -1, indices + q * k, sq_distances ? sq_distances + q * k : nullptr);
          }
        });
  }

  // The points are already in bucket order: walking them in that order gives
  // the locality the leaf sort gives external queries.
  void knn_self(int k, bool exclude_self, int32_t* indices, float* sq_distances,
                const CallParams& call) const override {
    const int64_t take = exclude_self ? int64_t{k} + 1 : k;
    for_each_block(
        n_, kQueriesPerBlock, thread_count(call.threads), cancel_flag(),
        [&] { return NeighborList(take, n_); },
        [&](NeighborList& list, int64_t b) {
          for (int64_t p = b * kQueriesPerBlock; p < std::min(n_, (b + 1) * kQueriesPerBlock);
               ++p) {
            const int64_t self = ids_[static_cast<size_t>(p)];
            nearest(&coords_[static_cast<size_t>(p * dim_)], list);
            list.write(k, exclude_self ? static_cast<int32_t>(self) : -1, indices + self * k,
                       sq_distances ? sq_distances + self * k : nullptr);
          }
        });
  }

  void radius(const float* queries, int64_t m, float radius, int max_neighbors, int32_t* indices,
              float* sq_distances, int32_t* counts, const CallParams& call) const override {
    const float r2 = mul_rn(radius, radius);
    const std::vector<int64_t> order = leaf_order(queries, m, call.threads);
    const int64_t row = max_neighbors;
    for_each_block(
        m, kQueriesPerBlock, thread_count(call.threads), cancel_flag(), [] { return std::vector<Neighbor>(); },
        [&](std::vector<Neighbor>& found, int64_t b) {
          for (int64_t i = b * kQueriesPerBlock; i < std::min(m, (b + 1) * kQueriesPerBlock); ++i) {
            const int64_t q = order[static_cast<size_t>(i)];
            found.clear();
            const float* query = queries + q * dim_;
            if (max_neighbors == 0) {
              counts[q] = static_cast<int32_t>(count_within(query, r2));
              continue;
            }
            within(query, r2, found);
            write_radius_row(found, max_neighbors, indices + q * row,
                             sq_distances ? sq_distances + q * row : nullptr,
                             counts ? counts + q : nullptr);
          }
        });
  }

  void copy_points(float* host_rows) const override {
    for (int64_t p = 0; p < n_; ++p)
      std::copy(point(static_cast<int32_t>(p)), point(static_cast<int32_t>(p)) + dim_,
                host_rows + int64_t{ids_[static_cast<size_t>(p)]} * dim_);
  }

 private:
  const float* lo(int32_t node) const { return &boxes_[static_cast<size_t>(node) * 2 * dim_]; }
  const float* hi(int32_t node) const { return lo(node) + dim_; }
  const float* point(int32_t position) const {
    return &coords_[static_cast<size_t>(position) * dim_];
  }

  // Lower bound of squared_distance(q, p) for every p in the node's box (see
  // the top of the file).
  float box_distance(const float* q, int32_t node) const {
    const float* l = lo(node);
    const float* h = hi(node);
    float sum = 0.0f;
    for (int d = 0; d < dim_; ++d) {
      const float c = std::min(std::max(q[d], l[d]), h[d]);
      const float s = square_of_difference(q[d], c);
      sum = d == 0 ? s : add_rn(sum, s);
    }
    return sum;
  }

  void nearest(const float* q, NeighborList& list) const {
    list.reset();
    if (n_ > 0) nearest_in(0, q, list);
  }

  void nearest_in(int32_t node, const float* q, NeighborList& list) const {
    const KdNode& nd = nodes_[static_cast<size_t>(node)];
    if (nd.first_child < 0) {
      for (int32_t p = nd.begin; p < nd.end; ++p)
        list.offer(squared_distance(q, point(p), dim_), ids_[static_cast<size_t>(p)]);
      return;
    }
    int32_t near = nd.first_child, far = nd.first_child + 1;
    float near_bound = box_distance(q, near), far_bound = box_distance(q, far);
    if (far_bound < near_bound) {
      std::swap(near, far);
      std::swap(near_bound, far_bound);
    }
    if (list.may_improve(near_bound, nodes_[static_cast<size_t>(near)].min_index))
      nearest_in(near, q, list);
    if (list.may_improve(far_bound, nodes_[static_cast<size_t>(far)].min_index))
      nearest_in(far, q, list);
  }

  // Calls visit(position, sq_distance) for every point within r2 (any order).
  template <class Visit>
  void for_each_within(int32_t node, const float* q, float r2, Visit& visit) const {
    if (box_distance(q, node) > r2) return;
    const KdNode& nd = nodes_[static_cast<size_t>(node)];
    if (nd.first_child >= 0) {
      for_each_within(nd.first_child, q, r2, visit);
      for_each_within(nd.first_child + 1, q, r2, visit);
      return;
    }
    for (int32_t p = nd.begin; p < nd.end; ++p) {
      const float d = squared_distance(q, point(p), dim_);
      if (d <= r2) visit(p, d);
    }
  }

  void within(const float* q, float r2, std::vector<Neighbor>& found) const {
    auto keep = [&](int32_t p, float d) { found.push_back({d, ids_[static_cast<size_t>(p)]}); };
    if (n_ > 0) for_each_within(0, q, r2, keep);
  }

  int64_t count_within(const float* q, float r2) const {
    int64_t count = 0;
    auto add = [&](int32_t, float) { ++count; };
    if (n_ > 0) for_each_within(0, q, r2, add);
    return count;
  }

  // The leaf a query point falls into, by the splits from the root.
  int32_t leaf_of(const float* q) const {
    int32_t node = 0;
    while (nodes_[static_cast<size_t>(node)].first_child >= 0) {
      const KdNode& nd = nodes_[static_cast<size_t>(node)];
      node = nd.first_child + (q[nd.split_dim] < nd.split_value ? 0 : 1);
    }
    return node;
  }

  // Query numbers sorted by the node number of their leaf (a counting sort):
  // consecutive queries then search the same region of the tree.
  std::vector<int64_t> leaf_order(const float* queries, int64_t m, int threads) const {
    std::vector<int64_t> order(static_cast<size_t>(m));
    std::iota(order.begin(), order.end(), int64_t{0});
    if (n_ == 0 || m < 2 * kQueriesPerBlock) return order;
    std::vector<int32_t> leaf(static_cast<size_t>(m));
#pragma omp parallel for num_threads(thread_count(threads)) schedule(static)
    for (int64_t i = 0; i < m; ++i) leaf[static_cast<size_t>(i)] = leaf_of(queries + i * dim_);
    std::vector<int64_t> start(nodes_.size() + 1, 0);
    for (const int32_t l : leaf) ++start[static_cast<size_t>(l) + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (int64_t i = 0; i < m; ++i) order[static_cast<size_t>(start[leaf[static_cast<size_t>(i)]]++)] = i;
    return order;
  }

  // Fills the node's box and smallest index from its points (`points` in
  // input order, the node's original indices in ids_); returns the dimension
  // of widest spread.
  int fit_box(KdNode& node, int32_t self, const float* points) {
    float* l = &boxes_[static_cast<size_t>(self) * 2 * dim_];
    float* h = l + dim_;
    const float* first = points + int64_t{ids_[static_cast<size_t>(node.begin)]} * dim_;
    std::copy(first, first + dim_, l);
    std::copy(first, first + dim_, h);
    node.min_index = ids_[static_cast<size_t>(node.begin)];
    for (int32_t p = node.begin + 1; p < node.end; ++p) {
      const int32_t id = ids_[static_cast<size_t>(p)];
      const float* x = points + int64_t{id} * dim_;
      for (int d = 0; d < dim_; ++d) {
        l[d] = std::min(l[d], x[d]);
        h[d] = std::max(h[d], x[d]);
      }
      node.min_index = std::min(node.min_index, id);
    }
    int widest = 0;
    // Spreads compared in double: hi - lo can overflow float32 for huge data.
    for (int d = 1; d < dim_; ++d)
      if (double(h[d]) - double(l[d]) > double(h[widest]) - double(l[widest])) widest = d;
    return widest;
  }

  // Orders the node's original indices so that the lower half by (coordinate
  // on `dim`, index) comes first; returns the first position of the upper half.
  // The selection runs on (coordinate, index) pairs gathered once: comparing
  // through the indices would load two scattered coordinates per comparison
  // (10^6 points, two cores: d = 3 360 -> 273 ms, d = 8 478 -> 295 ms).
  // std::pair orders by coordinate, then index, as the tree's definition
  // does (inputs are finite; -0 and +0 are one value, tied by index). The
  // pairs go to keys[node.begin, node.end): the build's one scratch array of
  // n pairs, whose ranges are disjoint for the nodes of a level (allocated
  // before the parallel loop and freed with the build, so no allocation
  // happens inside the loop and no buffer outlives the call).
  int32_t split_at_median(const KdNode& node, int dim, const float* points,
                          std::pair<float, int32_t>* keys) {
    const int32_t mid = node.begin + (node.end - node.begin) / 2;
    for (int32_t p = node.begin; p < node.end; ++p) {
      const int32_t id = ids_[static_cast<size_t>(p)];
      keys[p] = {points[int64_t{id} * dim_ + dim], id};
    }
    std::nth_element(keys + node.begin, keys + mid, keys + node.end);
    for (int32_t p = node.begin; p < node.end; ++p) ids_[static_cast<size_t>(p)] = keys[p].second;
    return mid;
  }

  // Level by level: every node of a level fits its box and, when it holds
  // more than a leaf, selects its median (the level's nodes in parallel, on
  // disjoint ranges of ids_); then the level's children are appended. The
  // points are gathered into bucket order once, at the end.
  void build(const float* points, int threads, const volatile int* cancel) {
    ids_.resize(static_cast<size_t>(n_));
    std::iota(ids_.begin(), ids_.end(), 0);
    if (n_ == 0) return;
    // Every leaf holds more than half a leaf (its parent held more than a
    // leaf and split in halves), so this bounds the node count.
    const int64_t max_leaves = n_ / ((int64_t{leaf_size_} + 1) / 2) + 1;
    if (2 * max_leaves > INT32_MAX)
      fail(KNN_ERR_UNSUPPORTED,
           format("a kd-tree of %lld points with leaf_size %d needs more than 2^31 nodes; use a "
                  "larger leaf_size",
                  static_cast<long long>(n_), leaf_size_));
    // Progress in levels: halving n until a node fits a leaf bounds their
    // number; one more unit gathers the points.
    int64_t levels = 1;
    for (int64_t size = n_; size > leaf_size_; size = (size + 1) / 2) ++levels;
    knn_progress* const report = progress();
    progress_begin(report, KNN_PROGRESS_BUILD, levels + 1);
    std::vector<std::pair<float, int32_t>> keys(static_cast<size_t>(n_));
    nodes_.push_back(KdNode{0, static_cast<int32_t>(n_)});
    for (size_t level_begin = 0; level_begin < nodes_.size();) {
      throw_if_cancelled(cancel);
      const size_t level_end = nodes_.size();
      boxes_.resize(level_end * 2 * static_cast<size_t>(dim_));
      std::vector<int32_t> mids(level_end - level_begin, -1);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
      for (int64_t i = static_cast<int64_t>(level_begin); i < static_cast<int64_t>(level_end); ++i) {
        KdNode& node = nodes_[static_cast<size_t>(i)];
        const int widest = fit_box(node, static_cast<int32_t>(i), points);
        if (node.end - node.begin <= leaf_size_) continue;
        const int32_t mid = split_at_median(node, widest, points, keys.data());
        node.split_dim = widest;
        node.split_value = points[int64_t{ids_[static_cast<size_t>(mid)]} * dim_ + widest];
        mids[static_cast<size_t>(i) - level_begin] = mid;
      }
      for (size_t i = level_begin; i < level_end; ++i) {
        const int32_t mid = mids[i - level_begin];
        if (mid < 0) continue;
        const int32_t begin = nodes_[i].begin, end = nodes_[i].end;
        nodes_[i].first_child = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(KdNode{begin, mid});
        nodes_.push_back(KdNode{mid, end});
      }
      level_begin = level_end;
      progress_add(report, 1);
    }
    coords_.resize(static_cast<size_t>(n_) * dim_);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t p = 0; p < n_; ++p)
      std::copy(points + int64_t{ids_[static_cast<size_t>(p)]} * dim_,
                points + int64_t{ids_[static_cast<size_t>(p)]} * dim_ + dim_,
                &coords_[static_cast<size_t>(p) * dim_]);
  }

  int64_t n_;
  int dim_;
  int leaf_size_;
  std::vector<float> coords_;   // the points in bucket order, dim_ floats each
  std::vector<int32_t> ids_;    // original index of each bucket-order position
  std::vector<KdNode> nodes_;   // breadth first; node 0 is the root
  std::vector<float> boxes_;    // per node: dim_ lows, then dim_ highs
};

}  // namespace

std::unique_ptr<IndexEngine> build_kdtree_index(const float* points, int64_t n, int dim,
                                                const IndexParams& params) {
  return std::make_unique<KdTreeIndex>(points, n, dim, params);
}

}  // namespace omp
}  // namespace knn
