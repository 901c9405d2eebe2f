// The OpenMP bucket kd-tree of the index API, for any dimension.
//
// The tree. The index keeps the points reordered so that every leaf
// ("bucket") holds a contiguous run of at most leaf_size points. A node of
// more than leaf_size points splits at its median in (coordinate, original
// index) order on the dimension where its bounding box is widest: the lower
// half (the first size / 2 points) goes left. Every node keeps its tight
// bounding box and the smallest original index below it. Nodes are numbered
// breadth first, the children of a node side by side; which points a node
// holds depends on the data, but how many, and so the node numbering,
// depends on n and leaf_size alone (make_shape).
//
// Build. A node's split selects the median's key (select_rank over the
// node's keys), moves the node's rows into the other of two buffers, the
// lower half first, each half in its previous order (one streaming pass,
// reading and writing in order), and fits the two halves' boxes there (a
// second pass, over rows just written). The team of one parallel region
// takes the work as items from a queue allocated before the region opens:
// a subtree per item below kTaskPoints points, a node's split per item
// above, and for the largest nodes a chunk of one pass per item (the
// schedule, below; no OpenMP tasks, which libgomp allocates with a malloc
// that ends the process when it fails). Every step has one possible result
// (the order is total, the moves stable, boxes are minima and maxima), so
// the tree is the same for any thread count. The
// leaves are gathered into the search's planes at the end (hand_over), each
// from the buffer its depth left it in.
//
// Search: kd_search.h, on the tree handed over at the end of the build (the
// split's two sides become the children's bounds on the split dimension,
// the root's box the starting gaps).
//
// One template over the scalar type: float for knn_index_build, double for
// knn_index_build_f64.
//
// The class is here; its node splits are in omp_index_kdtree_split.cpp, its
// schedule and hand-over in omp_index_kdtree.cpp.

#pragma once

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/error.h"
#include "../common/float_math.h"
#include "../common/index_leaf_size.h"
#include "../engine/cancel.h"
#include "../engine/index_engine.h"
#include "../engine/progress.h"
#include "../include/knn_gpgpu.h"
#include "kd_pairs.h"
#include "kd_search.h"
#include "omp_index_support.h"
#include "omp_tuning.h"
#include "select_rank.h"
#include "wait_for_flag.h"

namespace knn {
namespace omp {

// A point's place in the order of one coordinate: (coordinate, original
// index), with -0 and +0 one value (inputs are finite). Float coordinates and
// the index pack into one unsigned 64-bit number, whose order is that order.
template <typename Scalar>
struct SplitKey;

template <>
struct SplitKey<float> {
  uint64_t bits;
  static SplitKey of(float coordinate, int32_t id) {
    return SplitKey{uint64_t{ordered_key(coordinate)} << 32 | static_cast<uint32_t>(id)};
  }
  bool operator<(const SplitKey& other) const { return bits < other.bits; }
};

template <>
struct SplitKey<double> {
  uint64_t coordinate;
  uint32_t id;
  static SplitKey of(double coordinate, int32_t id) {
    return SplitKey{ordered_key(coordinate), static_cast<uint32_t>(id)};
  }
  bool operator<(const SplitKey& other) const {  // no branch: see select_rank
    return (coordinate < other.coordinate) | ((coordinate == other.coordinate) & (id < other.id));
  }
};

struct KdNode {
  int32_t begin = 0, end = 0;  // the node's points: bucket-order positions [begin, end)
  int32_t first_child = -1;    // children first_child and first_child + 1; -1 for a leaf
  int32_t split_dim = 0;       // inner nodes: the dimension split at the median
  int32_t buffer = 0;          // which build buffer holds the node's rows: its depth's parity
  int32_t first_chunk = -1;    // chunked nodes: the slot of their first chunk's results
  int64_t size() const { return int64_t{end} - begin; }
  int32_t mid() const { return begin + (end - begin) / 2; }
  int64_t chunks() const { return (size() + kChunkPoints - 1) / kChunkPoints; }  // if chunked
};

template <typename Scalar>
class KdTreeIndex final : public BasicIndexEngine<Scalar> {
 public:
  KdTreeIndex(const Scalar* points, int64_t n, int dim, const IndexParams& params)
      : BasicIndexEngine<Scalar>({KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE, n, dim}),
        n_(n),
        dim_(dim),
        leaf_size_(kdtree_leaf_size(params.leaf_size, dim, LeafSizeFor::kCpu)) {
    build(points, team_size(params.threads), cancel_flag());
  }

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

  bool radius_bins(const Scalar* queries, int64_t m, Scalar radius, const RadiusBins& bins,
                   int64_t* counts, double* sums, const CallParams& call) const override {
    return search_radius_bins(search_, queries, m, mul_rn(radius, radius), bins, call.threads,
                              counts, sums);
  }

  int64_t radius_pairs(Scalar radius, int64_t capacity, int64_t* pairs,
                       const CallParams& call) const override {
    return search_self_pairs(search_, pair_extents_, mul_rn(radius, radius), call.threads, capacity,
                             pairs);
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
  using Key = SplitKey<Scalar>;

  // One build buffer: rows of dim_ scalars and their original indices.
  struct Buffer {
    std::unique_ptr<Scalar[]> rows;
    std::unique_ptr<int32_t[]> ids;
  };

  // A chunked node's split between the passes of its level.
  struct ChunkedSplit {
    Key low{}, high{};  // the sample's bracket of the median's key
    bool bounded_below = false, bounded_above = false;
    bool bracketed = false;  // the median's key lies within the bracket
    Key median{};
  };

  Scalar* row(int buffer, int64_t position) {
    return &buffers_[buffer].rows[static_cast<size_t>(position) * dim_];
  }
  Scalar* box(size_t node) { return &boxes_[node * 2 * dim_]; }  // dim_ lows, then dim_ highs
  Scalar* chunk_box(int64_t slot, int side) {
    return &chunk_boxes_[(static_cast<size_t>(slot) * 2 + side) * 2 * dim_];
  }

  void empty_box(Scalar* b) const {
    std::fill(b, b + dim_, std::numeric_limits<Scalar>::infinity());
    std::fill(b + dim_, b + 2 * dim_, -std::numeric_limits<Scalar>::infinity());
  }
  void widen_box(Scalar* b, const Scalar* x) const {
    for (int d = 0; d < dim_; ++d) {
      b[d] = std::min(b[d], x[d]);
      b[dim_ + d] = std::max(b[dim_ + d], x[d]);
    }
  }
  void merge_box(Scalar* b, const Scalar* other) const {
    for (int d = 0; d < dim_; ++d) {
      b[d] = std::min(b[d], other[d]);
      b[dim_ + d] = std::max(b[dim_ + d], other[dim_ + d]);
    }
  }

  // The dimension of widest spread, ties to the smaller one. Spreads are
  // compared in double: hi - lo can overflow float32 for huge data (and
  // cannot overflow double within the float64 coordinate rule).
  int widest_dim(const Scalar* b) const {
    int widest = 0;
    for (int d = 1; d < dim_; ++d)
      if (double(b[dim_ + d]) - double(b[d]) > double(b[dim_ + widest]) - double(b[widest]))
        widest = d;
    return widest;
  }

  size_t chunked_index(size_t ordinal) const { return static_cast<size_t>(chunked_[ordinal]); }
  KdNode& chunked_node(size_t ordinal) { return nodes_[chunked_index(ordinal)]; }

  // The node numbering and, for chunked nodes (inner nodes of more than
  // kChunkedNodePoints points), their chunk slots: from n and leaf_size alone.
  void make_shape() {
    nodes_.push_back(KdNode{0, static_cast<int32_t>(n_)});
    int64_t chunk_slots = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      KdNode node = nodes_[i];
      if (node.size() > leaf_size_) {
        if (node.size() > kChunkedNodePoints) {
          node.first_chunk = static_cast<int32_t>(chunk_slots);
          chunk_slots += node.chunks();
          chunked_.push_back(static_cast<int32_t>(i));
          chunk_owner_.resize(static_cast<size_t>(chunk_slots),
                              static_cast<int32_t>(chunked_.size() - 1));
        }
        node.first_child = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(KdNode{node.begin, node.mid(), -1, 0, node.buffer ^ 1});
        nodes_.push_back(KdNode{node.mid(), node.end, -1, 0, node.buffer ^ 1});
      }
      nodes_[i] = node;
    }
    chunk_lefts_.assign(static_cast<size_t>(chunk_slots), 0);
    chunk_inside_.assign(static_cast<size_t>(chunk_slots), 0);
    chunk_boxes_.assign(static_cast<size_t>(chunk_slots) * 4 * dim_, Scalar{0});
    splits_.resize(chunked_.size());
  }

  // Calls f(std::integral_constant<int, D>{}) with D = dim_ for the common
  // small dimensions, so that their per-point loops are compiled for that
  // width (a row's copy a few moves, a box in registers), and with D = 0
  // (dim_ at run time) for the others.
  template <class F>
  void with_dim(F f) const {
    switch (dim_) {
      case 1: return f(std::integral_constant<int, 1>{});
      case 2: return f(std::integral_constant<int, 2>{});
      case 3: return f(std::integral_constant<int, 3>{});
      case 4: return f(std::integral_constant<int, 4>{});
      case 8: return f(std::integral_constant<int, 8>{});
      default: return f(std::integral_constant<int, 0>{});
    }
  }

  // Widens box b by the rows of positions [first, last) of `buffer`.
  template <int kDim>
  void widen_box_by_rows(int buffer, int64_t first, int64_t last, Scalar* b) {
    if constexpr (kDim == 0) {
      for (int64_t p = first; p < last; ++p) widen_box(b, row(buffer, p));
    } else {
      Scalar low[kDim], high[kDim];
      for (int d = 0; d < kDim; ++d) low[d] = b[d], high[d] = b[kDim + d];
      const Scalar* rows = buffers_[buffer].rows.get();
      for (int64_t p = first; p < last; ++p)
        for (int d = 0; d < kDim; ++d) {
          low[d] = std::min(low[d], rows[p * kDim + d]);
          high[d] = std::max(high[d], rows[p * kDim + d]);
        }
      for (int d = 0; d < kDim; ++d) b[d] = low[d], b[kDim + d] = high[d];
    }
  }

  // Fits the boxes of positions [first, last) of `buffer`: those before
  // `split_at` into into[0], the others into into[1]. The two may be one box.
  void fit_range(int buffer, int64_t first, int64_t last, int64_t split_at, Scalar* const into[2]) {
    empty_box(into[0]);
    empty_box(into[1]);
    with_dim([&](auto width) {
      widen_box_by_rows<width>(buffer, first, std::min(last, split_at), into[0]);
      widen_box_by_rows<width>(buffer, std::max(first, split_at), last, into[1]);
    });
  }

  // The chunks' boxes of chunked node o merged into boxes[0] (the chunks'
  // first sides) and boxes[1] (their second), which may be one box.
  void merge_chunk_boxes(size_t o, Scalar* const boxes[2]) {
    const KdNode& node = chunked_node(o);
    empty_box(boxes[0]);
    empty_box(boxes[1]);
    for (int side = 0; side < 2; ++side)
      for (int64_t c = 0; c < node.chunks(); ++c)
        merge_box(boxes[side], chunk_box(node.first_chunk + c, side));
  }

  Scalar* child_box(const KdNode& node, int side) {
    return box(static_cast<size_t>(node.first_child + side));
  }

  // The caller's rows of positions [first, last) copied into buffer 0 with
  // their indices.
  void copy_rows(const Scalar* points, int64_t first, int64_t last) {
    std::copy(points + first * dim_, points + last * dim_, row(0, first));
    std::iota(&buffers_[0].ids[static_cast<size_t>(first)],
              &buffers_[0].ids[static_cast<size_t>(last)], static_cast<int32_t>(first));
  }

  Key key_at(int buffer, int64_t position, int dim) {
    return Key::of(row(buffer, position)[dim], buffers_[buffer].ids[static_cast<size_t>(position)]);
  }

  // ---- Splits (omp_index_kdtree_split.cpp) ----------------------------------------------
  void bracket(size_t o);
  void gather(size_t o, int64_t slot, int64_t first, int64_t last);
  void select_median(size_t o);
  void count_lower(size_t o, int64_t slot, int64_t first, int64_t last);
  void make_cursors(size_t o);
  template <int kDim>
  void move_sides(int buffer, int dim, Key median, int64_t first, int64_t last, int64_t out[2]);
  void move_range(const KdNode& node, Key median, int64_t first, int64_t last, int64_t out[2]);
  void move_chunk(size_t o, int64_t slot, int64_t first, int64_t last);
  void split_whole(size_t i);
  int64_t build_whole(size_t i);

  // ---- The schedule ----------------------------------------------------------------------
  // One parallel region runs the whole build from a queue of work items
  // allocated before it opens: each thread takes the next item once it is
  // published and runs it, and the item that completes a step publishes
  // what that step made ready (the last chunk of a pass runs the node's step
  // between passes and publishes the next pass's chunks; a split node
  // publishes its children). So the region has no barrier, no OpenMP task
  // and no allocation: an operator new that throws inside a region ends the
  // process, and so does libgomp when it cannot allocate a task.
  enum class Step : int32_t { kRootChunk, kGather, kCountLower, kMove, kFit, kNode };

  // kNode: node `node`, which is not chunked: one of more than kTaskPoints
  // points is split (its children are items of their own), a smaller
  // subtree built whole. The other steps: chunk `slot` of chunked node
  // chunked_[node].
  struct Item {
    Step step;
    int32_t node;
    int64_t slot;
  };

  struct Queue {
    std::unique_ptr<Item[]> items;
    std::unique_ptr<std::atomic<bool>[]> published;
    size_t size = 0;  // every item the build publishes
    std::atomic<size_t> taken{0}, filled{0};
  };

  // The items the build publishes: the root's chunks (a chunked root), four
  // passes over every chunk of every chunked node, and every node that is
  // not chunked but whose parent is chunked or holds more than kTaskPoints
  // points (and the root, when not chunked).
  size_t item_count() const {
    size_t count = nodes_[0].first_chunk >= 0 ? static_cast<size_t>(nodes_[0].chunks()) : 1;
    count += 4 * chunk_owner_.size();
    for (const KdNode& node : nodes_) {
      if (node.first_child < 0 || (node.first_chunk < 0 && node.size() <= kTaskPoints)) continue;
      for (int side = 0; side < 2; ++side)
        count += nodes_[static_cast<size_t>(node.first_child + side)].first_chunk < 0;
    }
    return count;
  }

  void publish(Step step, int32_t node, int64_t first_slot, int64_t count) {
    const size_t at = queue_.filled.fetch_add(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) {
      queue_.items[at + static_cast<size_t>(j)] = Item{step, node, first_slot + j};
      queue_.published[at + static_cast<size_t>(j)].store(true, std::memory_order_release);
    }
  }

  // The next pass over chunked node o's chunks.
  void publish_pass(Step step, size_t o) {
    const KdNode& node = chunked_node(o);
    pending_[o].store(node.chunks(), std::memory_order_relaxed);
    publish(step, static_cast<int32_t>(o), node.first_chunk, node.chunks());
  }

  // Whether this chunk was the last of its node's pass.
  bool last_of_pass(size_t o) { return pending_[o].fetch_sub(1, std::memory_order_acq_rel) == 1; }

  // Node i's box is fitted: its split (or subtree) may start.
  void publish_node(size_t i) {
    const KdNode& node = nodes_[i];
    if (node.first_chunk < 0) return publish(Step::kNode, static_cast<int32_t>(i), 0, 1);
    const size_t o = static_cast<size_t>(chunk_owner_[static_cast<size_t>(node.first_chunk)]);
    if (cancel_->poll()) return;
    bracket(o);
    publish_pass(Step::kGather, o);
  }

  // The schedule's work and the hand-over (omp_index_kdtree.cpp).
  void run(const Item& item);
  void work();
  void build(const Scalar* points, int threads, const volatile int* cancel);
  void hand_over(int threads);

  int64_t n_;
  int dim_;
  int leaf_size_;
  BasicSearchTree<Scalar> search_;    // what the queries search (kd_search.h)
  PairExtents<Scalar> pair_extents_;  // the pairs search's, made on its first call
  // The build's arrays, freed by hand_over:
  Buffer buffers_[2];
  std::unique_ptr<Key[]> keys_;        // the selections' keys, at their nodes' positions
  std::vector<KdNode> nodes_;          // breadth first; node 0 is the root
  std::vector<Scalar> boxes_;          // per node: dim_ lows, then dim_ highs
  std::vector<int64_t> chunk_lefts_;   // per chunk slot: its count below the median (or a
                                       // sample's bracket), then its cursor
  std::vector<int64_t> chunk_inside_;  // per chunk slot: its keys inside a sample's bracket
  std::vector<Scalar> chunk_boxes_;    // per chunk slot: the boxes of its two sides
  std::vector<int32_t> chunked_;       // the chunked nodes, breadth first
  std::vector<int32_t> chunk_owner_;   // per chunk slot: its node's place in chunked_
  std::vector<ChunkedSplit> splits_;   // per chunked node: its split between passes
  std::unique_ptr<std::atomic<int64_t>[]> pending_;  // per chunked node: its pass's chunks to go
  Queue queue_;
  // The build's call, for its work items:
  const Scalar* points_ = nullptr;
  LoopStop* cancel_ = nullptr;  // the caller's flag, polled before every large node
  knn_progress* report_ = nullptr;
};

}  // namespace omp
}  // namespace knn
