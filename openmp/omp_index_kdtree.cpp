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
// second pass, over rows just written). Subtrees run as OpenMP tasks; the
// largest nodes also cut their passes into chunks run as tasks. Every step
// has one possible result (the order is total, the moves stable, boxes are
// minima and maxima), so the tree is the same for any thread count. The
// leaves are gathered into the search's planes at the end (hand_over), each
// from the buffer its depth left it in.
//
// Search: kd_search.h, on the tree handed over at the end of the build (the
// split's two sides become the children's bounds on the split dimension,
// the root's box the starting gaps).
//
// One template over the scalar type: float for knn_index_build, double for
// knn_index_build_f64.
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
#include "kd_search.h"
#include "omp_index_support.h"
#include "select_rank.h"

namespace knn {
namespace omp {
namespace {

// Subtrees of at most this many points are built by the task that reaches
// them (one task, one cancel check and one progress report each).
constexpr int64_t kTaskPoints = 16384;

// Nodes of more than this many points run their passes over chunks of
// kChunkPoints points, one task per chunk, so that the first levels, where
// there are fewer nodes than threads, use every thread too.
constexpr int64_t kChunkedNodePoints = 131072;
constexpr int64_t kChunkPoints = 32768;

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
      : n_(n),
        dim_(dim),
        leaf_size_(params.leaf_size > 0 ? params.leaf_size
                                        : kdtree_default_leaf_size(dim, LeafSizeFor::kCpu)) {
    build(points, team_size(params.threads), cancel_flag());
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
  using Key = SplitKey<Scalar>;

  // The caller's cancel flag, polled by every task before a large node (a
  // cancelled build skips the rest: exceptions cannot leave a task).
  struct Cancellation {
    const volatile int* flag;
    std::atomic<bool> stopped{false};
    bool stop() {
      if (cancel_requested(flag)) stopped.store(true, std::memory_order_relaxed);
      return stopped.load(std::memory_order_relaxed);
    }
  };

  // One build buffer: rows of dim_ scalars and their original indices.
  struct Buffer {
    std::unique_ptr<Scalar[]> rows;
    std::unique_ptr<int32_t[]> ids;
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

  // Runs body(slot, first, last) over the node's positions: for a chunked
  // node once per chunk, each a task (slot: the chunk's result slot), all
  // finished on return; else once over the whole node with slot -1.
  template <class Body>
  void over_chunks(const KdNode& node, Body body) {
    if (node.first_chunk < 0) {
      body(int64_t{-1}, int64_t{node.begin}, int64_t{node.end});
      return;
    }
    // An unsigned count: clang's taskloop compares its own unsigned trip
    // count with the loop's bound and warns (-Wsign-compare) on a signed one.
    const uint64_t chunks = static_cast<uint64_t>(node.chunks());
#pragma omp taskloop grainsize(1) default(shared)
    for (uint64_t c = 0; c < chunks; ++c) {
      const int64_t chunk = static_cast<int64_t>(c);
      const int64_t first = node.begin + chunk * kChunkPoints;
      body(node.first_chunk + chunk, first, std::min(first + kChunkPoints, int64_t{node.end}));
    }
  }

  // The node numbering and, for chunked nodes, their chunk slots: from n and
  // leaf_size alone.
  void make_shape() {
    nodes_.push_back(KdNode{0, static_cast<int32_t>(n_)});
    int64_t chunk_slots = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      KdNode node = nodes_[i];
      if (node.size() > kChunkedNodePoints) {
        node.first_chunk = static_cast<int32_t>(chunk_slots);
        chunk_slots += node.chunks();
      }
      if (node.size() > leaf_size_) {
        node.first_child = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(KdNode{node.begin, node.mid(), -1, 0, node.buffer ^ 1});
        nodes_.push_back(KdNode{node.mid(), node.end, -1, 0, node.buffer ^ 1});
      }
      nodes_[i] = node;
    }
    chunk_lefts_.assign(static_cast<size_t>(chunk_slots), 0);
    chunk_inside_.assign(static_cast<size_t>(chunk_slots), 0);
    chunk_boxes_.assign(static_cast<size_t>(chunk_slots) * 4 * dim_, Scalar{0});
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

  // Fits the boxes of the node's positions in `buffer`: those before
  // `split_at` into boxes[0], the others into boxes[1] (chunk by chunk for a
  // chunked node, the chunks' boxes merged). The two may be one box.
  void fit_boxes(const KdNode& node, int buffer, int64_t split_at, Scalar* const boxes[2]) {
    const auto fit = [&](int64_t first, int64_t last, Scalar* const into[2]) {
      empty_box(into[0]);
      empty_box(into[1]);
      with_dim([&](auto width) {
        widen_box_by_rows<width>(buffer, first, std::min(last, split_at), into[0]);
        widen_box_by_rows<width>(buffer, std::max(first, split_at), last, into[1]);
      });
    };
    if (node.first_chunk < 0) return fit(node.begin, node.end, boxes);
    over_chunks(node, [&](int64_t slot, int64_t first, int64_t last) {
      Scalar* const into[2] = {chunk_box(slot, 0), chunk_box(slot, 1)};
      fit(first, last, into);
    });
    const int64_t chunks = node.chunks();
    empty_box(boxes[0]);
    empty_box(boxes[1]);  // the same box as boxes[0] for the root
    for (int side = 0; side < 2; ++side)
      for (int64_t c = 0; c < chunks; ++c)
        merge_box(boxes[side], chunk_box(node.first_chunk + c, side));
  }

  // The root: the caller's rows copied into buffer 0 with their indices, and
  // the root's box.
  void fit_root(const Scalar* points) {
    const KdNode& root = nodes_[0];
    over_chunks(root, [&](int64_t, int64_t first, int64_t last) {
      std::copy(points + first * dim_, points + last * dim_, row(0, first));
      std::iota(&buffers_[0].ids[static_cast<size_t>(first)],
                &buffers_[0].ids[static_cast<size_t>(last)], static_cast<int32_t>(first));
    });
    Scalar* const boxes[2] = {box(0), box(0)};
    fit_boxes(root, 0, root.end, boxes);
  }

  Key key_at(int buffer, int64_t position, int dim) {
    return Key::of(row(buffer, position)[dim], buffers_[buffer].ids[static_cast<size_t>(position)]);
  }

  // The key of rank size / 2 among the node's keys on `dim`: the first of
  // the upper half, by select_rank over the node's keys. A chunked node
  // spreads the work over its chunks: an evenly spaced sample brackets the
  // rank between two of its keys, every chunk counts its keys below the
  // bracket and gathers those inside it (a few percent of them), and only
  // those go through select_rank. Should the bracket miss the rank (a sample
  // unlike the node), the selection runs over every key: the same key, found
  // slower.
  Key median_key(const KdNode& node, int dim) {
    Key* keys = &keys_[static_cast<size_t>(node.begin)];
    const int buffer = node.buffer;
    const int64_t size = node.size(), rank = node.mid() - node.begin;
    if (node.first_chunk >= 0) {
      int64_t samples = 32;  // about 4 sqrt(size), at most 4096
      while (samples < 4096 && samples * samples < 16 * size) samples *= 2;
      for (int64_t j = 0; j < samples; ++j)
        keys[j] = key_at(buffer, node.begin + j * size / samples, dim);
      std::sort(keys, keys + samples);
      // The sample's rank of the median is off by about sqrt(samples) / 2:
      // a bracket of 4 such errors either side.
      int64_t spread = 2;
      while (spread * spread < 4 * samples) ++spread;
      const int64_t at = rank * samples / size;
      const bool bounded_below = at - spread >= 0, bounded_above = at + spread < samples;
      const Key low = keys[bounded_below ? at - spread : 0];
      const Key high = keys[bounded_above ? at + spread : samples - 1];
      // Per chunk: its keys below `low` counted, those in [low, high]
      // gathered at the chunk's own positions of keys_.
      over_chunks(node, [&](int64_t slot, int64_t first, int64_t last) {
        Key* out = &keys_[static_cast<size_t>(first)];
        int64_t under = 0, taken = 0;
        for (int64_t p = first; p < last; ++p) {
          const Key key = key_at(buffer, p, dim);
          const bool is_below = bounded_below && key < low;
          const bool is_above = bounded_above && high < key;
          out[taken] = key;
          under += is_below;
          taken += !is_below && !is_above;
        }
        chunk_lefts_[static_cast<size_t>(slot)] = under;
        chunk_inside_[static_cast<size_t>(slot)] = taken;
      });
      // The chunks' keys side by side from the node's first position (each
      // moves down, never over keys still to move).
      int64_t below = 0, inside = 0;
      const int64_t chunks = node.chunks();
      for (int64_t c = 0; c < chunks; ++c) {
        const size_t slot = static_cast<size_t>(node.first_chunk + c);
        const Key* from = &keys[c * kChunkPoints];
        std::copy(from, from + chunk_inside_[slot], keys + inside);
        below += chunk_lefts_[slot];
        inside += chunk_inside_[slot];
      }
      if (below <= rank && rank < below + inside) return select_rank(keys, inside, rank - below);
    }
    over_chunks(node, [&](int64_t, int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p) keys[p - node.begin] = key_at(buffer, p, dim);
    });
    return select_rank(keys, size, rank);
  }

  // Moves positions [first, last) of the node's rows to the other buffer:
  // those below the median's key to out[0], the others to out[1], each in
  // order (the cursors advance). The side is an index, not a branch: it is a
  // coin toss on most data.
  template <int kDim>
  void move_sides(int buffer, int dim, Key median, int64_t first, int64_t last, int64_t out[2]) {
    const int width = kDim > 0 ? kDim : dim_;
    const Scalar* rows = buffers_[buffer].rows.get();
    const int32_t* ids = buffers_[buffer].ids.get();
    Scalar* out_rows = buffers_[buffer ^ 1].rows.get();
    int32_t* out_ids = buffers_[buffer ^ 1].ids.get();
    for (int64_t p = first; p < last; ++p) {
      const Scalar* x = rows + p * width;
      const int upper = !(Key::of(x[dim], ids[p]) < median);
      const int64_t to = out[upper]++;
      if constexpr (kDim == 0)
        std::copy(x, x + width, out_rows + to * width);
      else
        for (int d = 0; d < kDim; ++d) out_rows[to * kDim + d] = x[d];
      out_ids[to] = ids[p];
    }
  }

  // Splits an inner node: its median on its widest dimension, its rows moved
  // to the other buffer in the two children's ranges, the children's boxes.
  void split(size_t i) {
    KdNode& node = nodes_[i];
    node.split_dim = widest_dim(box(i));
    const int dim = node.split_dim;
    const Key median = median_key(node, dim);
    const int buffer = node.buffer;
    const auto move = [&](int64_t first, int64_t last, int64_t out[2]) {
      with_dim([&](auto width) { move_sides<width>(buffer, dim, median, first, last, out); });
    };
    if (node.first_chunk < 0) {
      int64_t out[2] = {node.begin, node.mid()};
      move(node.begin, node.end, out);
    } else {
      // Chunked: count each chunk's lower half, then move every chunk from
      // its own cursors.
      over_chunks(node, [&](int64_t slot, int64_t first, int64_t last) {
        int64_t lower = 0;
        for (int64_t p = first; p < last; ++p) lower += key_at(buffer, p, dim) < median;
        chunk_lefts_[static_cast<size_t>(slot)] = lower;
      });
      const int64_t chunks = node.chunks();
      int64_t lower_before = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t lower = chunk_lefts_[static_cast<size_t>(node.first_chunk + c)];
        chunk_lefts_[static_cast<size_t>(node.first_chunk + c)] = lower_before;
        lower_before += lower;
      }
      over_chunks(node, [&](int64_t slot, int64_t first, int64_t last) {
        const int64_t lower = chunk_lefts_[static_cast<size_t>(slot)];
        int64_t out[2] = {node.begin + lower, node.mid() + (first - node.begin) - lower};
        move(first, last, out);
      });
    }
    Scalar* const children[2] = {box(static_cast<size_t>(node.first_child)),
                                 box(static_cast<size_t>(node.first_child) + 1)};
    fit_boxes(node, buffer ^ 1, node.mid(), children);
  }

  // Builds the subtree of node i, whose box is fitted; returns its node
  // count. Subtrees of more than kTaskPoints points build their children as
  // tasks, poll the cancel flag and report their own progress.
  int64_t build_subtree(size_t i, Cancellation& cancel, knn_progress* report) {
    KdNode& node = nodes_[i];
    const bool large = node.size() > kTaskPoints;
    if (large && cancel.stop()) return 0;
    if (node.first_child < 0) {
      if (large) progress_add(report, 1);
      return 1;
    }
    split(i);
    const size_t left = static_cast<size_t>(node.first_child);
    if (!large)
      return 1 + build_subtree(left, cancel, report) + build_subtree(left + 1, cancel, report);
    progress_add(report, 1);
#pragma omp task default(shared) firstprivate(left)
    {
      const int64_t count = build_subtree(left, cancel, report);
      if (nodes_[left].size() <= kTaskPoints) progress_add(report, count);
    }
    {
      const int64_t count = build_subtree(left + 1, cancel, report);
      if (nodes_[left + 1].size() <= kTaskPoints) progress_add(report, count);
    }
#pragma omp taskwait
    return 1;
  }

  void build(const Scalar* points, int threads, const volatile int* cancel) {
    if (n_ == 0) {
      search_.allocate(dim_, 0, 0);
      return;
    }
    throw_if_cancelled(cancel);  // the tasks poll before large nodes only
    // Every leaf holds more than half a leaf (its parent held more than a
    // leaf and split in halves), so this bounds the node count.
    const int64_t max_leaves = n_ / ((int64_t{leaf_size_} + 1) / 2) + 1;
    if (2 * max_leaves > INT32_MAX)
      fail(KNN_ERR_UNSUPPORTED,
           format("a kd-tree of %lld points with leaf_size %d needs more than 2^31 nodes; use a "
                  "larger leaf_size",
                  static_cast<long long>(n_), leaf_size_));
    nodes_.reserve(static_cast<size_t>(2 * max_leaves));
    make_shape();
    // Progress in nodes, and one more unit for the hand-over.
    knn_progress* const report = progress();
    progress_begin(report, KNN_PROGRESS_BUILD, static_cast<int64_t>(nodes_.size()) + 1);
    const size_t scalars = static_cast<size_t>(n_) * static_cast<size_t>(dim_);
    for (Buffer& b : buffers_) {
      b.rows.reset(new Scalar[scalars]);
      b.ids.reset(new int32_t[static_cast<size_t>(n_)]);
    }
    keys_.reset(new Key[static_cast<size_t>(n_)]);
    boxes_.resize(nodes_.size() * 2 * static_cast<size_t>(dim_));
    Cancellation cancellation{cancel};
#pragma omp parallel num_threads(threads)
#pragma omp single
    {
      fit_root(points);
      const int64_t count = build_subtree(0, cancellation, report);
      if (nodes_[0].size() <= kTaskPoints) progress_add(report, count);
    }
    if (cancellation.stopped.load()) throw_cancelled();
    hand_over(threads);
    progress_add(report, 1);
  }

  // Fills search_ from the built tree: the points in bucket order (one plane
  // per dimension, each leaf from the buffer it was built in), each inner
  // node's two sides as the bounds its children lie within on the split
  // dimension, every node's smallest index. The build's arrays are freed.
  void hand_over(int threads) {
    keys_.reset();
    search_.allocate(dim_, n_, static_cast<int64_t>(nodes_.size()));
    const int64_t node_count = static_cast<int64_t>(nodes_.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
    for (int64_t i = 0; i < node_count; ++i) {
      const KdNode& node = nodes_[static_cast<size_t>(i)];
      if (node.first_child >= 0) continue;
      const int32_t* ids = buffers_[node.buffer].ids.get();
      int32_t min_index = INT32_MAX;
      for (int64_t p = node.begin; p < node.end; ++p) {
        const Scalar* x = row(node.buffer, p);
        for (int d = 0; d < dim_; ++d) search_.plane(d)[p] = x[d];
        search_.ids[static_cast<size_t>(p)] = ids[p];
        min_index = std::min(min_index, ids[p]);
      }
      auto& s = search_.nodes[static_cast<size_t>(i)];
      s.begin = node.begin, s.end = node.end, s.min_index = min_index;
    }
    // Children come after their parent: backwards, every child is done first.
    for (size_t i = nodes_.size(); i-- > 0;) {
      const KdNode& node = nodes_[i];
      if (node.first_child < 0) continue;
      auto& s = search_.nodes[i];
      const size_t left = static_cast<size_t>(node.first_child);
      s.first_child = node.first_child;
      s.split_dim = node.split_dim;
      s.min_index = std::min(search_.nodes[left].min_index, search_.nodes[left + 1].min_index);
      s.left_max = box(left)[dim_ + node.split_dim];
      s.right_min = box(left + 1)[node.split_dim];
    }
    std::copy(box(0), box(0) + dim_, search_.lo.begin());
    std::copy(box(0) + dim_, box(0) + 2 * dim_, search_.hi.begin());
    for (Buffer& b : buffers_) b = Buffer{};
    std::vector<KdNode>().swap(nodes_);
    std::vector<Scalar>().swap(boxes_);
    std::vector<int64_t>().swap(chunk_lefts_);
    std::vector<int64_t>().swap(chunk_inside_);
    std::vector<Scalar>().swap(chunk_boxes_);
  }

  int64_t n_;
  int dim_;
  int leaf_size_;
  BasicSearchTree<Scalar> search_;  // what the queries search (kd_search.h)
  // The build's arrays, freed by hand_over:
  Buffer buffers_[2];
  std::unique_ptr<Key[]> keys_;        // the selections' keys, at their nodes' positions
  std::vector<KdNode> nodes_;          // breadth first; node 0 is the root
  std::vector<Scalar> boxes_;          // per node: dim_ lows, then dim_ highs
  std::vector<int64_t> chunk_lefts_;   // per chunk slot: its count below the median (or a
                                       // sample's bracket), then its cursor
  std::vector<int64_t> chunk_inside_;  // per chunk slot: its keys inside a sample's bracket
  std::vector<Scalar> chunk_boxes_;    // per chunk slot: the boxes of its two sides
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
