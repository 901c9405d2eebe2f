// The search of kd_search.h: one depth-first walk, compiled for each
// dimension up to kMaxStaticDim (the query and the gaps in registers,
// the distance loops unrolled) and once for any dimension, and the parallel
// drivers of kNN, all-kNN and radius queries.
#include "kd_search.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "../common/float_math.h"
#include "../common/static_dim.h"
#include "omp_index_support.h"

namespace knn {
namespace omp {
namespace {

// Queries of one parallel work item; they are taken in leaf order, so the
// queries of a block walk the same part of the tree.
constexpr int64_t kQueriesPerBlock = 256;

// A radius query's sink: every point the scan lets through (distance <= r2)
// is kept; subtrees whose bound exceeds r2 are skipped.
struct WithinRadius {
  float r2;
  std::vector<Neighbor>* found;  // NULL: count only
  int64_t count = 0;

  float limit() const { return r2; }
  bool may_improve(float bound, int32_t) const { return bound <= r2; }
  void offer(float sq_distance, int32_t index) {
    ++count;
    if (found) found->push_back(Neighbor{sq_distance, index});
  }
};

// One query's walk. D is the dimension (0: tree.dim at run time). The sink
// (NeighborList or WithinRadius) says what a subtree must beat, and takes
// every scanned point at distance <= limit().
template <int D, class Sink>
class Walk {
 public:
  Walk(const SearchTree& tree, const float* query, float* gaps, Sink& sink)
      : t_(tree), q_(query), gaps_(gaps), sink_(sink) {}

  void run() {
    if (t_.nodes.empty()) return;
    for (int d = 0; d < dims(); ++d) {
      const float c = q_[d];
      gaps_[d] = c < t_.lo[d] ? sub_rn(t_.lo[d], c) : (c > t_.hi[d] ? sub_rn(c, t_.hi[d]) : 0.0f);
    }
    const float bound = bound_with(0, gaps_[0]);
    if (sink_.may_improve(bound, t_.nodes[0].min_index)) visit(0, bound);
  }

 private:
  struct Side {
    int32_t node;
    float gap, bound;
  };

  int dims() const { return D > 0 ? D : t_.dim; }

  // The bound with gap s replaced, summed as the point distance is.
  float bound_with(int s, float gap) const {
    float sum = 0.0f;
    for (int d = 0; d < dims(); ++d) {
      const float g = d == s ? gap : gaps_[d];
      sum = d == 0 ? mul_rn(g, g) : add_rn(sum, mul_rn(g, g));
    }
    return sum;
  }

  // The node's own points, kScanLanes at a time (the planes are padded).
  void scan(const SearchNode& node) {
    for (int32_t p0 = node.begin; p0 < node.end; p0 += kScanLanes) {
      float acc[kScanLanes];
      const float* x0 = t_.plane(0) + p0;
      for (int j = 0; j < kScanLanes; ++j) acc[j] = square_of_difference(q_[0], x0[j]);
      for (int d = 1; d < dims(); ++d) {
        const float* x = t_.plane(d) + p0;
        const float c = q_[d];
        for (int j = 0; j < kScanLanes; ++j) acc[j] = add_rn(acc[j], square_of_difference(c, x[j]));
      }
      const int count = std::min(kScanLanes, node.end - p0);
      for (int j = 0; j < count; ++j)
        if (acc[j] <= sink_.limit()) sink_.offer(acc[j], t_.ids[static_cast<size_t>(p0 + j)]);
    }
  }

  void visit(int32_t index, float bound) {
    const SearchNode& node = t_.nodes[static_cast<size_t>(index)];
    scan(node);
    if (node.first_child < 0) return;
    const int s = node.split_dim;
    const float c = q_[s], gap = gaps_[s];
    const float left_gap = std::max(gap, c > node.left_max ? sub_rn(c, node.left_max) : 0.0f);
    const float right_gap = std::max(gap, c < node.right_min ? sub_rn(node.right_min, c) : 0.0f);
    Side near{node.first_child, left_gap, left_gap == gap ? bound : bound_with(s, left_gap)};
    Side far{node.first_child + 1, right_gap, right_gap == gap ? bound : bound_with(s, right_gap)};
    // Nearer first; between equal bounds, the smaller indices first (they
    // win the ties, so the other side may then be skipped).
    if (closer(far.bound, min_index(far), near.bound, min_index(near))) std::swap(near, far);
    enter(near, s, gap);
    enter(far, s, gap);
  }

  void enter(const Side& side, int s, float parent_gap) {
    if (!sink_.may_improve(side.bound, min_index(side))) return;
    gaps_[s] = side.gap;
    visit(side.node, side.bound);
    gaps_[s] = parent_gap;
  }

  int32_t min_index(const Side& side) const {
    return t_.nodes[static_cast<size_t>(side.node)].min_index;
  }

  const SearchTree& t_;
  const float* q_;
  float* gaps_;
  Sink& sink_;
};

template <int D, class Sink>
void walk(const SearchTree& tree, const float* query, float* gaps, Sink& sink) {
  Walk<D, Sink>(tree, query, gaps, sink).run();
}

// Query numbers sorted by the leaf each query falls into (a counting sort).
std::vector<int64_t> leaf_order(const SearchTree& t, const float* queries, int64_t m, int threads) {
  std::vector<int64_t> order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (t.nodes.empty() || m < 2 * kQueriesPerBlock) return order;
  std::vector<int32_t> leaf(static_cast<size_t>(m));
  std::vector<int64_t> start(t.nodes.size() + 1, 0);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    const float* q = queries + i * t.dim;
    int32_t node = 0;
    for (const SearchNode* nd = &t.nodes[0]; nd->first_child >= 0;
         nd = &t.nodes[static_cast<size_t>(node)])
      node = nd->first_child + (q[nd->split_dim] <= nd->left_max ? 0 : 1);
    leaf[static_cast<size_t>(i)] = node;
  }
  for (const int32_t l : leaf) ++start[static_cast<size_t>(l) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  for (int64_t i = 0; i < m; ++i)
    order[static_cast<size_t>(start[static_cast<size_t>(leaf[static_cast<size_t>(i)])]++)] = i;
  return order;
}

// Per-thread buffers of a kNN driver, allocated when a thread takes its
// first block.
struct KnnState {
  NeighborList list;
  std::vector<float> gaps, query;
  KnnState(int64_t take, const SearchTree& t)
      : list(take, t.size), gaps(static_cast<size_t>(t.dim)), query(static_cast<size_t>(t.dim)) {}
};

}  // namespace

void search_knn(const SearchTree& tree, const float* queries, int64_t m, int k, int threads,
                int32_t* indices, float* sq_distances) {
  const int team = thread_count(threads);
  const std::vector<int64_t> order = leaf_order(tree, queries, m, team);
  with_static_dim(tree.dim, [&](auto dim) {
    for_each_block(
        m, kQueriesPerBlock, team, cancel_flag(), [&] { return KnnState(k, tree); },
        [&](KnnState& state, int64_t b) {
          for (int64_t i = b * kQueriesPerBlock; i < std::min(m, (b + 1) * kQueriesPerBlock); ++i) {
            const int64_t q = order[static_cast<size_t>(i)];
            state.list.reset();
            walk<decltype(dim)::value>(tree, queries + q * tree.dim, state.gaps.data(), state.list);
            state.list.write(k, -1, indices + q * k, sq_distances ? sq_distances + q * k : nullptr);
          }
        });
  });
}

void search_knn_self(const SearchTree& tree, int k, bool exclude_self, int threads,
                     int32_t* indices, float* sq_distances) {
  const int64_t n = tree.size;
  const int64_t take = exclude_self ? int64_t{k} + 1 : k;
  with_static_dim(tree.dim, [&](auto dim) {
    for_each_block(
        n, kQueriesPerBlock, thread_count(threads), cancel_flag(),
        [&] { return KnnState(take, tree); },
        [&](KnnState& state, int64_t b) {
          // Positions are in tree order: consecutive points are neighbours.
          for (int64_t p = b * kQueriesPerBlock; p < std::min(n, (b + 1) * kQueriesPerBlock); ++p) {
            for (int d = 0; d < tree.dim; ++d)
              state.query[static_cast<size_t>(d)] = tree.plane(d)[p];
            const int32_t self = tree.ids[static_cast<size_t>(p)];
            state.list.reset();
            walk<decltype(dim)::value>(tree, state.query.data(), state.gaps.data(), state.list);
            const int64_t row = int64_t{self} * k;
            state.list.write(k, exclude_self ? self : -1, indices + row,
                             sq_distances ? sq_distances + row : nullptr);
          }
        });
  });
}

void search_radius(const SearchTree& tree, const float* queries, int64_t m, float r2,
                   int max_neighbors, int threads, int32_t* indices, float* sq_distances,
                   int32_t* counts) {
  const int team = thread_count(threads);
  const std::vector<int64_t> order = leaf_order(tree, queries, m, team);
  struct RadiusState {
    std::vector<Neighbor> found;
    std::vector<float> gaps;
  };
  const int64_t row = max_neighbors;
  with_static_dim(tree.dim, [&](auto dim) {
    for_each_block(
        m, kQueriesPerBlock, team, cancel_flag(),
        [&] {
          return RadiusState{{}, std::vector<float>(static_cast<size_t>(tree.dim))};
        },
        [&](RadiusState& state, int64_t b) {
          for (int64_t i = b * kQueriesPerBlock; i < std::min(m, (b + 1) * kQueriesPerBlock); ++i) {
            const int64_t q = order[static_cast<size_t>(i)];
            state.found.clear();
            WithinRadius sink{r2, max_neighbors > 0 ? &state.found : nullptr};
            walk<decltype(dim)::value>(tree, queries + q * tree.dim, state.gaps.data(), sink);
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

}  // namespace omp
}  // namespace knn
