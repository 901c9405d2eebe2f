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
// Search: kd_search.h, on the tree handed over at the end of the build (the
// split's two sides become the children's bounds on the split dimension,
// the root's box the starting gaps).
//
// One template over the scalar type: float for knn_index_build, double for
// knn_index_build_f64.
#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "../common/error.h"
#include "../common/float_math.h"
#include "../engine/index_engine.h"
#include "../engine/progress.h"
#include "../include/knn_gpgpu.h"
#include "kd_search.h"
#include "omp_index_support.h"

namespace knn {
namespace omp {
namespace {

// Library default bucket size: large enough that the box tests per visited
// point stay cheap, small enough that a leaf scan stays short (see
// bench/bench_index_cpu.cpp for the measurements).
constexpr int kDefaultLeafSize = 32;

struct KdNode {
  int32_t begin = 0, end = 0;  // the node's points: bucket-order positions [begin, end)
  int32_t first_child = -1;    // children first_child and first_child + 1; -1 for a leaf
  int32_t min_index = 0;       // smallest original index among the node's points
  int32_t split_dim = 0;       // inner nodes: the dimension split at the median
};

template <typename Scalar>
class KdTreeIndex final : public BasicIndexEngine<Scalar> {
 public:
  KdTreeIndex(const Scalar* points, int64_t n, int dim, const IndexParams& params)
      : n_(n), dim_(dim), leaf_size_(params.leaf_size > 0 ? params.leaf_size : kDefaultLeafSize) {
    build(points, thread_count(params.threads), cancel_flag());
  }

  int backend() const override { return KNN_BACKEND_OPENMP; }
  int structure() const override { return KNN_STRUCTURE_KDTREE; }
  int64_t size() const override { return n_; }
  int dim() const override { return dim_; }

  void knn(const Scalar* queries, int64_t m, int k, int32_t* indices, Scalar* sq_distances,
           const CallParams& call) const override {
    search_knn(search_, queries, m, k, call.threads, indices, sq_distances);
  }

  void knn_self(int k, bool exclude_self, int32_t* indices, Scalar* sq_distances,
                const CallParams& call) const override {
    search_knn_self(search_, k, exclude_self, call.threads, indices, sq_distances);
  }

  void radius(const Scalar* queries, int64_t m, Scalar radius, int max_neighbors, int32_t* indices,
              Scalar* sq_distances, int32_t* counts, const CallParams& call) const override {
    search_radius(search_, queries, m, mul_rn(radius, radius), max_neighbors, call.threads, indices,
                  sq_distances, counts);
  }

  // From the search layout: the build's own rows are freed once it is made.
  void copy_points(Scalar* host_rows) const override {
    for (int d = 0; d < dim_; ++d) {
      const Scalar* plane = search_.plane(d);
      for (int64_t p = 0; p < n_; ++p)
        host_rows[int64_t{search_.ids[static_cast<size_t>(p)]} * dim_ + d] = plane[p];
    }
  }

 private:
  // Fills the node's box and smallest index from its points (rows_ and ids_
  // of its range); returns the dimension of widest spread.
  int fit_box(KdNode& node, int32_t self) {
    Scalar* l = &boxes_[static_cast<size_t>(self) * 2 * dim_];
    Scalar* h = l + dim_;
    const Scalar* first = row(node.begin);
    std::copy(first, first + dim_, l);
    std::copy(first, first + dim_, h);
    node.min_index = ids_[static_cast<size_t>(node.begin)];
    for (int32_t p = node.begin + 1; p < node.end; ++p) {
      const Scalar* x = row(p);
      for (int d = 0; d < dim_; ++d) {
        l[d] = std::min(l[d], x[d]);
        h[d] = std::max(h[d], x[d]);
      }
      node.min_index = std::min(node.min_index, ids_[static_cast<size_t>(p)]);
    }
    int widest = 0;
    // Spreads compared in double: hi - lo can overflow float32 for huge data
    // (and cannot overflow double within the float64 coordinate rule).
    for (int d = 1; d < dim_; ++d)
      if (double(h[d]) - double(l[d]) > double(h[widest]) - double(l[widest])) widest = d;
    return widest;
  }

  // A point's place in the median selection: ordered by (coordinate, index)
  // as the tree's definition is (inputs are finite; -0 and +0 are one value,
  // tied by index); `from` is where its row is before the selection.
  struct Key {
    Scalar coord;
    int32_t id, from;
    bool operator<(const Key& other) const {
      return coord < other.coord || (coord == other.coord && id < other.id);
    }
  };

  const Scalar* row(int64_t position) const { return &rows_[static_cast<size_t>(position) * dim_]; }

  // Reorders the node's range of ids_ and rows_ so that the lower half by
  // (coordinate on `dim`, index) comes first; returns the first position of
  // the upper half. Everything it touches is the node's own contiguous range
  // (of rows_, keys_ and spare_), so nodes of a level run side by side and
  // every pass reads memory in order (through the input's indices, each pass
  // was a cache miss per point).
  int32_t split_at_median(const KdNode& node, int dim) {
    const int32_t mid = node.begin + (node.end - node.begin) / 2;
    Key* keys = &keys_[static_cast<size_t>(node.begin)];
    const int64_t count = node.end - node.begin;
    for (int32_t p = node.begin; p < node.end; ++p)
      keys[p - node.begin] = Key{row(p)[dim], ids_[static_cast<size_t>(p)], p};
    std::nth_element(keys, keys + (mid - node.begin), keys + count);
    for (int32_t p = node.begin; p < node.end; ++p) {
      const Key& key = keys[p - node.begin];
      ids_[static_cast<size_t>(p)] = key.id;
      std::copy(row(key.from), row(key.from) + dim_, &spare_[static_cast<size_t>(p) * dim_]);
    }
    std::copy(&spare_[static_cast<size_t>(node.begin) * dim_],
              &spare_[static_cast<size_t>(node.end) * dim_],
              &rows_[static_cast<size_t>(node.begin) * dim_]);
    return mid;
  }

  // Level by level: every node of a level fits its box and, when it holds
  // more than a leaf, selects its median (the level's nodes in parallel, on
  // disjoint ranges of ids_ and rows_); then the level's children are
  // appended. Every buffer is sized before the first parallel region.
  void build(const Scalar* points, int threads, const volatile int* cancel) {
    ids_.resize(static_cast<size_t>(n_));
    std::iota(ids_.begin(), ids_.end(), 0);
    if (n_ == 0) {
      search_.allocate(dim_, 0, 0);
      return;
    }
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
    rows_.assign(points, points + n_ * dim_);
    spare_.resize(rows_.size());
    keys_.resize(static_cast<size_t>(n_));
    nodes_.reserve(static_cast<size_t>(2 * max_leaves));
    boxes_.reserve(static_cast<size_t>(2 * max_leaves) * 2 * dim_);
    nodes_.push_back(KdNode{0, static_cast<int32_t>(n_)});
    for (size_t level_begin = 0; level_begin < nodes_.size();) {
      throw_if_cancelled(cancel);
      const size_t level_end = nodes_.size();
      boxes_.resize(level_end * 2 * static_cast<size_t>(dim_));
      std::vector<int32_t> mids(level_end - level_begin, -1);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
      for (int64_t i = static_cast<int64_t>(level_begin); i < static_cast<int64_t>(level_end);
           ++i) {
        KdNode& node = nodes_[static_cast<size_t>(i)];
        const int widest = fit_box(node, static_cast<int32_t>(i));
        if (node.end - node.begin <= leaf_size_) continue;
        const int32_t mid = split_at_median(node, widest);
        node.split_dim = widest;
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
    hand_over(threads);
  }

  // Fills search_ from the built tree: the points in bucket order (one plane
  // per dimension), each inner node's two sides as the bounds its children
  // lie within on the split dimension. The build's arrays are freed.
  void hand_over(int threads) {
    std::vector<Scalar>().swap(spare_);
    std::vector<Key>().swap(keys_);
    search_.allocate(dim_, n_, static_cast<int64_t>(nodes_.size()));
    search_.ids = ids_;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t p = 0; p < n_; ++p)
      for (int d = 0; d < dim_; ++d) search_.plane(d)[p] = row(p)[d];
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const KdNode& node = nodes_[i];
      auto& s = search_.nodes[i];
      s.min_index = node.min_index;
      s.first_child = node.first_child;
      if (node.first_child < 0) {
        s.begin = node.begin, s.end = node.end;
        continue;
      }
      s.split_dim = node.split_dim;
      s.left_max = boxes_[(static_cast<size_t>(node.first_child) * 2 + 1) * dim_ + node.split_dim];
      s.right_min = boxes_[(static_cast<size_t>(node.first_child) + 1) * 2 * dim_ + node.split_dim];
    }
    std::copy(boxes_.begin(), boxes_.begin() + dim_, search_.lo.begin());
    std::copy(boxes_.begin() + dim_, boxes_.begin() + 2 * dim_, search_.hi.begin());
    std::vector<int32_t>().swap(ids_);
    std::vector<Scalar>().swap(rows_);
    std::vector<KdNode>().swap(nodes_);
    std::vector<Scalar>().swap(boxes_);
  }

  int64_t n_;
  int dim_;
  int leaf_size_;
  BasicSearchTree<Scalar> search_;  // what the queries search (kd_search.h)
  // The build's arrays, freed by hand_over:
  std::vector<int32_t> ids_;   // original index of each bucket-order position
  std::vector<Scalar> rows_;   // the points in the same order, dim_ scalars each
  std::vector<Scalar> spare_;  // rows being reordered by a split
  std::vector<Key> keys_;      // the selections' keys, at their nodes' positions
  std::vector<KdNode> nodes_;  // breadth first; node 0 is the root
  std::vector<Scalar> boxes_;  // per node: dim_ lows, then dim_ highs
};

}  // namespace

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index(const Scalar* points, int64_t n,
                                                             int dim, const IndexParams& params) {
  return std::make_unique<KdTreeIndex<Scalar>>(points, n, dim, params);
}

template std::unique_ptr<IndexEngine> build_kdtree_index(const float*, int64_t, int,
                                                         const IndexParams&);
template std::unique_ptr<IndexEngine64> build_kdtree_index(const double*, int64_t, int,
                                                           const IndexParams&);

}  // namespace omp
}  // namespace knn
