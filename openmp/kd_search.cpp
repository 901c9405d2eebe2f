// The search of kd_search.h: one walk (depth first, tied sides best first),
// compiled for each dimension up to kMaxStaticDim (the query and the gaps in
// registers, the distance loops unrolled) and once for any dimension, and the
// parallel drivers of kNN, all-kNN and radius queries.
#include "kd_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "../common/float_math.h"
#include "../common/prefetch.h"
#include "../common/static_dim.h"
#include "omp_index_support.h"
#include "omp_tuning.h"

namespace knn {
namespace omp {
namespace {

// Marks a loop over the lanes of a scan block, to be vectorized across the
// lanes. Left to itself, GCC unrolls such a short loop first and then
// vectorizes the loop over the dimensions around it instead, gathering each
// vector from four planes a scalar at a time: the scan ran 1.4x slower in
// 8-D, 1.9x in 16-D (GCC 12, x86-64 SSE2).
#if defined(__GNUC__)
#define KNN_EACH_LANE _Pragma("GCC unroll 1")
#else
#define KNN_EACH_LANE
#endif

// The position of the lowest set bit of a non-zero mask.
inline int lowest_set_bit(unsigned bits) {
#if defined(__GNUC__)
  return __builtin_ctz(bits);
#else
  int j = 0;
  for (; !(bits & 1u); bits >>= 1) ++j;
  return j;
#endif
}

// The first and last line of a row of `count` values, asked for ahead
// (common/prefetch.h): a query's coordinates (a read) and its result row (a
// write) are at a random place for each query taken in leaf order, and each
// was a cache miss that the walk then waited on (a seventh of mpQueryAll's
// time at k = 8, 10^6 queries).
template <typename T>
void prefetch_row(const T* row, int64_t count, bool for_write) {
  prefetch_line(row, for_write);
  prefetch_line(row + count - 1, for_write);
}

// How many queries ahead of the walk their coordinates and rows are asked
// for: one walk takes far longer than a miss, so the next but one suffices.
constexpr int64_t kPrefetchAhead = 2;

// A radius query's sink: every point the scan lets through (distance <= r2)
// is kept; subtrees whose bound exceeds r2 are skipped.
template <typename Scalar>
struct WithinRadius {
  Scalar r2;
  std::vector<BasicNeighbor<Scalar>>* found;  // NULL: count only
  int64_t count = 0;

  Scalar limit() const { return r2; }
  bool may_improve(Scalar bound, int32_t) const { return bound <= r2; }
  void offer(Scalar sq_distance, int32_t index) {
    ++count;
    if (found) found->push_back(BasicNeighbor<Scalar>{sq_distance, index});
  }
};

// A radius query's sink that counts into bins (search_radius_bins): what
// WithinRadius keeps, tallied by squared distance instead.
template <typename Scalar>
struct WithinRadiusBins {
  Scalar r2;
  BinTallies* tallies;
  int64_t block, query;

  Scalar limit() const { return r2; }
  bool may_improve(Scalar bound, int32_t) const { return bound <= r2; }
  void offer(Scalar sq_distance, int32_t index) {
    tallies->add(block, query, static_cast<double>(sq_distance), index);
  }
};

// A side of a split whose visit is put off: its node, its bound and smallest
// index (the queue's order), and where its gaps are kept.
template <typename Scalar>
struct Deferred {
  Scalar bound;
  int32_t min_index, node;
  size_t gaps_at;
};

// What a walk writes besides its sink, per thread and reused by every query:
// the gaps of the node being visited and the queue of deferred sides.
template <typename Scalar>
struct WalkScratch {
  std::vector<Scalar> gaps;
  std::vector<Deferred<Scalar>> deferred;  // a heap, smallest (bound, min_index) on top
  std::vector<Scalar> deferred_gaps;       // dim per deferred side, the first gaps_used in use
  size_t gaps_used = 0;
  explicit WalkScratch(int dim) : gaps(static_cast<size_t>(dim)) {}
};

// One query's walk. D is the dimension (0: tree.dim at run time). The sink
// (BasicNeighborList or WithinRadius) says what a subtree must beat, and
// takes every scanned point at distance <= limit().
//
// Order: depth first, the nearer child by (bound, min_index) first, except
// where the two children's bounds tie: then the one with the larger indices
// is deferred, and once the depth-first walk is done the deferred sides are
// taken up best first, by (bound, min_index) over all of them. Depth first
// alone degenerates where every distance ties (a cluster whose float32
// distances all underflow to 0): the nearer subtree's own k smallest indices
// become the k-th candidate, and the walk then enters ~k leaves of every
// sibling on the way up; best first, it enters about the leaves of the k
// smallest indices. Ties between bounds are rare otherwise, so the queue
// costs nothing on ordinary data.
template <int D, typename Scalar, class Sink>
class Walk {
 public:
  Walk(const BasicSearchTree<Scalar>& tree, const Scalar* query, WalkScratch<Scalar>& scratch,
       Sink& sink)
      : t_(tree), q_(query), gaps_(scratch.gaps.data()), scratch_(scratch), sink_(sink) {}

  void run() {
    if (t_.nodes.empty()) return;
    for (int d = 0; d < dims(); ++d) gaps_[d] = interval_gap(q_[d], t_.lo[d], t_.hi[d]);
    scratch_.deferred.clear();
    scratch_.gaps_used = 0;
    Side next{0, gaps_[0], bound_with(0, gaps_[0])};
    if (!sink_.may_improve(next.bound, min_index(next))) return;
    do {
      visit(next.node, next.bound);
    } while (take_deferred(next));
  }

 private:
  struct Side {
    int32_t node;
    Scalar gap, bound;
  };

  int dims() const { return D > 0 ? D : t_.dim; }

  // The bound with gap s replaced, summed as the point distance is.
  Scalar bound_with(int s, Scalar gap) const {
    Scalar sum = 0;
    for (int d = 0; d < dims(); ++d) {
      const Scalar g = d == s ? gap : gaps_[d];
      sum = d == 0 ? mul_rn(g, g) : add_rn(sum, mul_rn(g, g));
    }
    return sum;
  }

  // The node's own points, kScanLanes at a time (the planes are padded). A
  // block none of whose lanes reaches the limit (most blocks, once the list
  // is full) is rejected by one vector comparison; in the others only the
  // lanes within the limit are visited, by the bits of the comparison's
  // mask, each tested again as the limit shrinks with every offer. Against a
  // test of every lane (a branch that goes either way while the list fills
  // and at large k), query time on 10^6 uniform points, 2 threads, medians
  // of 3-5 paired runs: mpQueryAll 9% less at k = 8 (10^6 queries), 12% at
  // k = 100 (725 -> 639 ms, 2 * 10^5 queries); the index kd-tree at k = 100
  // 9% less in 3-D and in 8-D.
  void scan(const BasicSearchNode<Scalar>& node) {
    for (int32_t p0 = node.begin; p0 < node.end; p0 += kScanLanes) {
      Scalar sums[kScanLanes];
      block_distances(p0, sums);
      const int count = std::min(kScanLanes, node.end - p0);
      for (unsigned lanes = lanes_within(sums) & ((1u << count) - 1); lanes != 0;
           lanes &= lanes - 1) {
        const int j = lowest_set_bit(lanes);
        if (sums[j] <= sink_.limit()) sink_.offer(sums[j], t_.ids[static_cast<size_t>(p0 + j)]);
      }
    }
  }

  // The squared distances of the kScanLanes points from position p0, each
  // summed in dimension order: one vector operation per dimension and step.
  void block_distances(int32_t p0, Scalar (&sums)[kScanLanes]) const {
    const Scalar* x0 = t_.plane(0) + p0;
    KNN_EACH_LANE
    for (int j = 0; j < kScanLanes; ++j) sums[j] = square_of_difference(q_[0], x0[j]);
    for (int d = 1; d < dims(); ++d) {
      const Scalar* x = t_.plane(d) + p0;
      const Scalar c = q_[d];
      KNN_EACH_LANE
      for (int j = 0; j < kScanLanes; ++j) sums[j] = add_rn(sums[j], square_of_difference(c, x[j]));
    }
  }

  // Bit j set where lane j is within the limit. Written with a table of the
  // bits so that GCC vectorizes it (a comparison, a mask and an or per
  // vector); with a shift by j it compiles to a scalar loop.
  unsigned lanes_within(const Scalar (&sums)[kScanLanes]) const {
    static constexpr unsigned kLaneBit[] = {1, 2, 4, 8, 16, 32, 64, 128};
    static_assert(sizeof kLaneBit / sizeof kLaneBit[0] == kScanLanes, "a bit per lane");
    const Scalar limit = sink_.limit();
    unsigned lanes = 0;
    KNN_EACH_LANE
    for (int j = 0; j < kScanLanes; ++j) lanes |= sums[j] <= limit ? kLaneBit[j] : 0u;
    return lanes;
  }

  void visit(int32_t index, Scalar bound) {
    const BasicSearchNode<Scalar>& node = t_.nodes[static_cast<size_t>(index)];
    scan(node);
    if (node.first_child < 0) return;
    const int s = node.split_dim;
    const Scalar c = q_[s], gap = gaps_[s];
    const Scalar left_gap = std::max(gap, c > node.left_max ? sub_rn(c, node.left_max) : Scalar{0});
    const Scalar right_gap =
        std::max(gap, c < node.right_min ? sub_rn(node.right_min, c) : Scalar{0});
    Side near{node.first_child, left_gap, left_gap == gap ? bound : bound_with(s, left_gap)};
    Side far{node.first_child + 1, right_gap, right_gap == gap ? bound : bound_with(s, right_gap)};
    // Nearer first; between equal bounds, the smaller indices first (they
    // win the ties, so the other side may then be skipped), and the other
    // side is deferred.
    if (closer(far.bound, min_index(far), near.bound, min_index(near))) std::swap(near, far);
    if (far.bound == near.bound) {
      if (sink_.may_improve(far.bound, min_index(far))) defer(far, s);
      enter(near, s, gap);
      return;
    }
    enter(near, s, gap);
    enter(far, s, gap);
  }

  void enter(const Side& side, int s, Scalar parent_gap) {
    if (!sink_.may_improve(side.bound, min_index(side))) return;
    gaps_[s] = side.gap;
    visit(side.node, side.bound);
    gaps_[s] = parent_gap;
  }

  void defer(const Side& side, int s) {
    // The store only grows (where every side of a tied cluster is deferred,
    // a vector insertion per side cost a sixth of the search).
    std::vector<Scalar>& store = scratch_.deferred_gaps;
    const size_t at = scratch_.gaps_used, dim = static_cast<size_t>(dims());
    if (store.size() < at + dim) store.resize(std::max(2 * store.size(), at + dim));
    for (size_t d = 0; d < dim; ++d) store[at + d] = gaps_[d];  // a few scalars: no memcpy call
    store[at + static_cast<size_t>(s)] = side.gap;
    scratch_.gaps_used = at + dim;
    scratch_.deferred.push_back(Deferred<Scalar>{side.bound, min_index(side), side.node, at});
    std::push_heap(scratch_.deferred.begin(), scratch_.deferred.end(), Later{});
  }

  // The deferred side to visit next, its gaps in gaps_; false when none may
  // improve (every other is at or after the first in (bound, min_index)).
  bool take_deferred(Side& next) {
    auto& queue = scratch_.deferred;
    if (queue.empty() || !sink_.may_improve(queue.front().bound, queue.front().min_index))
      return false;
    std::pop_heap(queue.begin(), queue.end(), Later{});
    const Deferred<Scalar> side = queue.back();
    queue.pop_back();
    const Scalar* gaps = scratch_.deferred_gaps.data() + side.gaps_at;
    for (int d = 0; d < dims(); ++d) gaps_[d] = gaps[d];
    next = Side{side.node, Scalar{0}, side.bound};
    return true;
  }

  struct Later {
    bool operator()(const Deferred<Scalar>& a, const Deferred<Scalar>& b) const {
      return closer(b.bound, b.min_index, a.bound, a.min_index);
    }
  };

  int32_t min_index(const Side& side) const {
    return t_.nodes[static_cast<size_t>(side.node)].min_index;
  }

  const BasicSearchTree<Scalar>& t_;
  const Scalar* q_;
  Scalar* gaps_;
  WalkScratch<Scalar>& scratch_;
  Sink& sink_;
};

template <int D, typename Scalar, class Sink>
void walk(const BasicSearchTree<Scalar>& tree, const Scalar* query, WalkScratch<Scalar>& scratch,
          Sink& sink) {
  Walk<D, Scalar, Sink>(tree, query, scratch, sink).run();
}

// Query numbers in the order of the part of the tree they fall into, left
// to right: a stable counting sort on the first levels of each query's
// descent (at most kOrderLevels, no more bins than queries, and fewer on
// teams so large that their counts would pass kOrderCounts). Every step runs
// on the team, each thread counting into its own bins. The order only
// decides which queries share a cache; every row is the same in any order.
constexpr int kOrderLevels = 16;
constexpr int64_t kOrderCounts = int64_t{1} << 22;  // bins x threads, at most (32 MiB)

template <typename Scalar>
std::unique_ptr<int64_t[]> leaf_order(const BasicSearchTree<Scalar>& t, const Scalar* queries,
                                      int64_t m, int threads) {
  std::unique_ptr<int64_t[]> order(new int64_t[static_cast<size_t>(m)]);
  if (t.nodes.empty() || m < 2 * kKdSearchQueriesPerBlock) {
    std::iota(order.get(), order.get() + m, int64_t{0});
    return order;
  }
  int levels = 0;
  while (levels < kOrderLevels && (int64_t{2} << levels) <= m &&
         (int64_t{threads} << (levels + 1)) <= kOrderCounts)
    ++levels;
  const int64_t bins = int64_t{1} << levels;
  std::unique_ptr<uint32_t[]> bin(new uint32_t[static_cast<size_t>(m)]);
  std::unique_ptr<int64_t[]> counts(new int64_t[static_cast<size_t>(bins * threads)]);
  std::unique_ptr<int64_t[]> bin_start(new int64_t[static_cast<size_t>(bins)]);
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t first = m * me / team, last = m * (me + 1) / team;
    int64_t* const mine = counts.get() + me * bins;
    std::fill(mine, mine + bins, int64_t{0});
    // kDescents queries go down side by side, a level at a time: their node
    // loads are independent, so the misses of the lower levels overlap
    // (mpQueryAll, k = 8, 10^6 x 10^6, 2 threads: 420-455 -> 402-407 ms;
    // 4 side by side gained nothing, 16 no more than 8).
    constexpr int kDescents = 8;
    for (int64_t i0 = first; i0 < last; i0 += kDescents) {
      const int lanes = static_cast<int>(std::min<int64_t>(kDescents, last - i0));
      const BasicSearchNode<Scalar>* nd[kDescents];
      uint32_t path[kDescents];
      int depth[kDescents];
      for (int j = 0; j < lanes; ++j) nd[j] = &t.nodes[0], path[j] = 0, depth[j] = 0;
      for (int level = 0; level < levels; ++level) {
        for (int j = 0; j < lanes; ++j) {
          if (nd[j]->first_child < 0) continue;
          const Scalar* q = queries + (i0 + j) * t.dim;
          const uint32_t right = q[nd[j]->split_dim] <= nd[j]->left_max ? 0 : 1;
          path[j] = 2 * path[j] + right;
          ++depth[j];
          nd[j] = &t.nodes[static_cast<size_t>(nd[j]->first_child + right)];
        }
      }
      for (int j = 0; j < lanes; ++j) {
        const uint32_t b = path[j] << (levels - depth[j]);
        bin[static_cast<size_t>(i0 + j)] = b;
        ++mine[b];
      }
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t b = 0; b < bins; ++b) {
      int64_t total = 0;
      for (int th = 0; th < team; ++th) total += counts[static_cast<size_t>(th * bins + b)];
      bin_start[static_cast<size_t>(b)] = total;
    }
#pragma omp single
    {
      int64_t sum = 0;
      for (int64_t b = 0; b < bins; ++b)
        sum += std::exchange(bin_start[static_cast<size_t>(b)], sum);
    }
#pragma omp for schedule(static)
    for (int64_t b = 0; b < bins; ++b) {
      int64_t next = bin_start[static_cast<size_t>(b)];
      for (int th = 0; th < team; ++th)
        next += std::exchange(counts[static_cast<size_t>(th * bins + b)], next);
    }
    for (int64_t i = first; i < last; ++i)
      order[static_cast<size_t>(mine[bin[static_cast<size_t>(i)]]++)] = i;
  }
  return order;
}

// Per-thread buffers of a kNN driver, allocated when a thread takes its
// first block.
template <typename Scalar>
struct KnnState {
  BasicNeighborList<Scalar> list;
  WalkScratch<Scalar> walk;
  std::vector<Scalar> query;
  // The thread's last query and its k-th squared distance (+infinity: none).
  std::vector<double> previous;
  double previous_kth = std::numeric_limits<double>::infinity();
  KnnState(int64_t take, const BasicSearchTree<Scalar>& t)
      : list(take, t.size),
        walk(t.dim),
        query(static_cast<size_t>(t.dim)),
        previous(static_cast<size_t>(t.dim)) {}
};

// The k nearest of `query` into state.list. Queries come in leaf order, so
// the thread's last one is near: its k nearest lie within sqrt(kth) + |q - p|
// of this one (the triangle inequality), and the walk starts with that bound
// (widened by 2^-10 against rounding) instead of an open list, offering
// only what lies within it from its first leaf on. The bound is a hint,
// never a premise: a walk under it that ends with its list short (fewer
// points that close) is walked again from an open list, so every row is
// the one the open walk gives.
template <int D, typename Scalar>
void walk_knn(const BasicSearchTree<Scalar>& tree, const Scalar* query, KnnState<Scalar>& state) {
  double bound = std::numeric_limits<double>::infinity();
  if (state.previous_kth < bound) {
    double gap = 0;
    for (int d = 0; d < tree.dim; ++d) {
      const double e = static_cast<double>(query[d]) - state.previous[static_cast<size_t>(d)];
      gap += e * e;
    }
    const double reach = std::sqrt(state.previous_kth) + std::sqrt(gap);
    bound = reach * reach * (1 + 1.0 / 1024);
  }
  const bool hinted = bound < static_cast<double>(std::numeric_limits<Scalar>::max());
  if (hinted)
    state.list.reset(static_cast<Scalar>(bound));
  else
    state.list.reset();
  walk<D>(tree, query, state.walk, state.list);
  if (hinted && !state.list.full()) {
    state.list.reset();
    walk<D>(tree, query, state.walk, state.list);
  }
  for (int d = 0; d < tree.dim; ++d) state.previous[static_cast<size_t>(d)] = query[d];
  state.previous_kth = state.list.full() ? static_cast<double>(state.list.limit())
                                         : std::numeric_limits<double>::infinity();
}

}  // namespace

template <typename Scalar>
void search_knn(const BasicSearchTree<Scalar>& tree, const Scalar* queries, int64_t m, int k,
                int threads, int32_t* indices, Scalar* sq_distances) {
  const int team = team_size(threads);
  const std::unique_ptr<int64_t[]> order = leaf_order(tree, queries, m, team);
  with_static_dim(tree.dim, [&](auto dim) {
    for_each_block(
        m, kKdSearchQueriesPerBlock, team, cancel_flag(), [&] { return KnnState<Scalar>(k, tree); },
        [&](KnnState<Scalar>& state, int64_t b) {
          for (int64_t i = b * kKdSearchQueriesPerBlock;
               i < std::min(m, (b + 1) * kKdSearchQueriesPerBlock); ++i) {
            if (i + kPrefetchAhead < m) {
              const int64_t ahead = order[static_cast<size_t>(i + kPrefetchAhead)];
              prefetch_row(queries + ahead * tree.dim, tree.dim, false);
              prefetch_row(indices + ahead * k, k, true);
              if (sq_distances) prefetch_row(sq_distances + ahead * k, k, true);
            }
            const int64_t q = order[static_cast<size_t>(i)];
            walk_knn<decltype(dim)::value>(tree, queries + q * tree.dim, state);
            state.list.write(k, -1, indices + q * k, sq_distances ? sq_distances + q * k : nullptr);
          }
        });
  });
}

template <typename Scalar>
void search_knn_self(const BasicSearchTree<Scalar>& tree, int k, bool exclude_self, int threads,
                     int32_t* indices, Scalar* sq_distances) {
  const int64_t n = tree.size;
  const int64_t take = exclude_self ? int64_t{k} + 1 : k;
  with_static_dim(tree.dim, [&](auto dim) {
    for_each_block(
        n, kKdSearchQueriesPerBlock, team_size(threads), cancel_flag(),
        [&] { return KnnState<Scalar>(take, tree); },
        [&](KnnState<Scalar>& state, int64_t b) {
          // Positions are in tree order: consecutive points are neighbours.
          for (int64_t p = b * kKdSearchQueriesPerBlock;
               p < std::min(n, (b + 1) * kKdSearchQueriesPerBlock); ++p) {
            if (p + kPrefetchAhead < n) {
              const int64_t ahead = int64_t{tree.ids[static_cast<size_t>(p + kPrefetchAhead)]} * k;
              prefetch_row(indices + ahead, k, true);
              if (sq_distances) prefetch_row(sq_distances + ahead, k, true);
            }
            for (int d = 0; d < tree.dim; ++d)
              state.query[static_cast<size_t>(d)] = tree.plane(d)[p];
            const int32_t self = tree.ids[static_cast<size_t>(p)];
            walk_knn<decltype(dim)::value>(tree, state.query.data(), state);
            const int64_t row = int64_t{self} * k;
            state.list.write(k, exclude_self ? self : -1, indices + row,
                             sq_distances ? sq_distances + row : nullptr);
          }
        });
  });
}

template <typename Scalar>
void search_radius(const BasicSearchTree<Scalar>& tree, const Scalar* queries, int64_t m, Scalar r2,
                   int max_neighbors, int threads, int32_t* indices, Scalar* sq_distances,
                   int32_t* counts) {
  const int team = team_size(threads);
  const std::unique_ptr<int64_t[]> order = leaf_order(tree, queries, m, team);
  struct RadiusState {
    std::vector<BasicNeighbor<Scalar>> found;
    WalkScratch<Scalar> walk;
  };
  const int64_t row = max_neighbors;
  with_static_dim(tree.dim, [&](auto dim) {
    for_each_block(
        m, kKdSearchQueriesPerBlock, team, cancel_flag(),
        [&] {
          return RadiusState{{}, WalkScratch<Scalar>(tree.dim)};
        },
        [&](RadiusState& state, int64_t b) {
          for (int64_t i = b * kKdSearchQueriesPerBlock;
               i < std::min(m, (b + 1) * kKdSearchQueriesPerBlock); ++i) {
            if (i + kPrefetchAhead < m)
              prefetch_row(queries + order[static_cast<size_t>(i + kPrefetchAhead)] * tree.dim,
                           tree.dim, false);
            const int64_t q = order[static_cast<size_t>(i)];
            state.found.clear();
            WithinRadius<Scalar> sink{r2, max_neighbors > 0 ? &state.found : nullptr};
            walk<decltype(dim)::value>(tree, queries + q * tree.dim, state.walk, sink);
            if (max_neighbors == 0) {
              counts[q] = static_cast<int32_t>(sink.count);
              continue;
            }
            write_radius_row(state.found, max_neighbors, indices + q * row,
                             sq_distances ? sq_distances + q * row : nullptr,
                             counts ? counts + q : nullptr);
          }
        });
  });
}

template <typename Scalar>
bool search_radius_bins(const BasicSearchTree<Scalar>& tree, const Scalar* queries, int64_t m,
                        Scalar r2, const RadiusBins& bins, int threads, int64_t* counts,
                        double* sums) {
  const int64_t blocks = (m + kKdSearchQueriesPerBlock - 1) / kKdSearchQueriesPerBlock;
  if (!BinTallies::fit(blocks, bins)) return false;
  const int team = team_size(threads);
  const std::unique_ptr<int64_t[]> order = leaf_order(tree, queries, m, team);
  BinTallies tallies(bins, blocks, sums != nullptr);
  with_static_dim(tree.dim, [&](auto dim) {
    for_each_block(
        m, kKdSearchQueriesPerBlock, team, cancel_flag(),
        [&] { return WalkScratch<Scalar>(tree.dim); },
        [&](WalkScratch<Scalar>& walk_scratch, int64_t b) {
          for (int64_t i = b * kKdSearchQueriesPerBlock;
               i < std::min(m, (b + 1) * kKdSearchQueriesPerBlock); ++i) {
            const int64_t q = order[static_cast<size_t>(i)];
            WithinRadiusBins<Scalar> sink{r2, &tallies, b, q};
            walk<decltype(dim)::value>(tree, queries + q * tree.dim, walk_scratch, sink);
          }
        });
  });
  tallies.add_up(counts, sums);
  return true;
}

// The two scalar types of the engines.
#define KNN_KD_SEARCH_INSTANTIATE(Scalar)                                                          \
  template void search_knn<Scalar>(const BasicSearchTree<Scalar>&, const Scalar*, int64_t, int,    \
                                   int, int32_t*, Scalar*);                                        \
  template void search_knn_self<Scalar>(const BasicSearchTree<Scalar>&, int, bool, int, int32_t*,  \
                                        Scalar*);                                                  \
  template void search_radius<Scalar>(const BasicSearchTree<Scalar>&, const Scalar*, int64_t,      \
                                      Scalar, int, int, int32_t*, Scalar*, int32_t*);              \
  template bool search_radius_bins<Scalar>(const BasicSearchTree<Scalar>&, const Scalar*, int64_t, \
                                           Scalar, const RadiusBins&, int, int64_t*, double*);
KNN_KD_SEARCH_INSTANTIATE(float)
KNN_KD_SEARCH_INSTANTIATE(double)
#undef KNN_KD_SEARCH_INSTANTIATE

}  // namespace omp
}  // namespace knn
