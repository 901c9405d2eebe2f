// The self pairs search of kd_pairs.h.
#include "kd_pairs.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

#include "../common/error.h"
#include "../common/float_math.h"
#include "../common/static_dim.h"
#include "../engine/progress.h"
#include "omp_index_support.h"

namespace knn {
namespace omp {
namespace {

// A pair as one number, (smaller id, larger id): both ids are int32 and
// not negative.
inline uint64_t packed_pair(int32_t a, int32_t b) {
  const auto lo = static_cast<uint64_t>(std::min(a, b)), hi = static_cast<uint64_t>(std::max(a, b));
  return lo << 32 | hi;
}

// Pairs a thread keeps before it adds them to the shared total (one atomic
// per point would meet the other threads' on every point).
constexpr int64_t kFlushPairs = 4096;

}  // namespace

// What the walk needs beyond the search tree: every node's tight box and the
// positions its subtree covers, and the leaves in position order. The index
// kd-tree's inner nodes hold no points, and a node's children split its
// positions, left first.
template <typename Scalar>
struct NodeExtents {
  std::vector<Scalar> boxes;         // per node: dim lows, then dim highs
  std::vector<int32_t> first, last;  // per node: its subtree's positions [first, last)
  std::vector<int32_t> leaves;

  explicit NodeExtents(const BasicSearchTree<Scalar>& t) {
    const size_t count = t.nodes.size(), dim = static_cast<size_t>(t.dim);
    boxes.resize(count * 2 * dim);
    first.resize(count);
    last.resize(count);
    // Children are numbered after their parent: walking back, both children
    // of a node are done before it.
    for (size_t i = count; i-- > 0;) {
      const BasicSearchNode<Scalar>& node = t.nodes[i];
      Scalar* box = &boxes[i * 2 * dim];
      if (node.first_child < 0) {
        if (node.begin < node.end) leaves.push_back(static_cast<int32_t>(i));
        first[i] = node.begin;
        last[i] = node.end;
        for (size_t d = 0; d < dim; ++d) {
          const Scalar* x = t.plane(static_cast<int>(d));
          Scalar lo = std::numeric_limits<Scalar>::infinity(), hi = -lo;
          for (int32_t p = node.begin; p < node.end; ++p)
            lo = std::min(lo, x[p]), hi = std::max(hi, x[p]);
          box[d] = lo;
          box[dim + d] = hi;
        }
        continue;
      }
      const size_t left = static_cast<size_t>(node.first_child), right = left + 1;
      first[i] = first[left];
      last[i] = last[right];
      const Scalar* a = &boxes[left * 2 * dim];
      const Scalar* b = &boxes[right * 2 * dim];
      for (size_t d = 0; d < dim; ++d) {
        box[d] = std::min(a[d], b[d]);
        box[dim + d] = std::max(a[dim + d], b[dim + d]);
      }
    }
    std::sort(leaves.begin(), leaves.end(), [&](int32_t a, int32_t b) {
      return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)];
    });
  }
  const Scalar* box(int32_t node, int dim) const {
    return &boxes[static_cast<size_t>(node) * 2 * static_cast<size_t>(dim)];
  }
};

namespace {

// One thread's pairs: kept while the threads' kept pairs together stay
// within the capacity, counted always.
struct PairSlot {
  std::vector<uint64_t> kept;
  int64_t found = 0;
};

// The threads' shared state: the pairs all have kept and whether that has
// passed the capacity (then nobody keeps any more).
struct KeptTotal {
  int64_t capacity;
  std::atomic<int64_t> kept{0};
  std::atomic<bool> over{false};
};

class PairSink {
 public:
  PairSink(PairSlot& slot, KeptTotal& total) : slot_(slot), total_(total) {}

  void add(int32_t a, int32_t b) {
    ++slot_.found;
    if (keep_) slot_.kept.push_back(packed_pair(a, b));
  }
  // Between points: adds what was kept to the shared total once enough has
  // piled up (always, with `force`), and stops keeping once it is over.
  void settle(bool force) {
    if (keep_) {
      const int64_t pending = static_cast<int64_t>(slot_.kept.size()) - flushed_;
      if (pending >= kFlushPairs || (force && pending > 0)) {
        flushed_ = static_cast<int64_t>(slot_.kept.size());
        if (total_.kept.fetch_add(pending, std::memory_order_relaxed) + pending > total_.capacity)
          total_.over.store(true, std::memory_order_relaxed);
      }
    }
    if (keep_ && total_.over.load(std::memory_order_relaxed)) {
      keep_ = false;
      std::vector<uint64_t>().swap(slot_.kept);  // they will not be written: free them now
    }
  }

 private:
  PairSlot& slot_;
  KeptTotal& total_;
  int64_t flushed_ = 0;
  bool keep_ = !total_.over.load(std::memory_order_relaxed);
};

// The walk of one leaf (kd_pairs.h, "Search"). D is the dimension (0: the
// tree's, at run time).
template <int D, typename Scalar>
class PairWalk {
 public:
  PairWalk(const BasicSearchTree<Scalar>& tree, const NodeExtents<Scalar>& extents, Scalar r2,
           PairSink& sink)
      : t_(tree), e_(extents), r2_(r2), sink_(sink) {}

  void leaf(int32_t own) {
    const BasicSearchNode<Scalar>& mine = t_.nodes[static_cast<size_t>(own)];
    const Scalar* own_box = e_.box(own, dims());
    // Depth first; the stack holds at most one sibling per level.
    int32_t stack[2 * 64];
    int size = 0;
    stack[size++] = 0;
    while (size > 0) {
      const int32_t node = stack[--size];
      if (e_.last[static_cast<size_t>(node)] <= mine.begin) continue;  // wholly before the leaf
      const Scalar* box = e_.box(node, dims());
      if (boxes_distance(own_box, own_box + dims(), box, box + dims(), dims()) > r2_) continue;
      const BasicSearchNode<Scalar>& other = t_.nodes[static_cast<size_t>(node)];
      if (other.first_child >= 0) {
        stack[size++] = other.first_child + 1;
        stack[size++] = other.first_child;
      } else if (node == own) {
        within(mine);
      } else {
        across(mine, other, box);
      }
    }
  }

 private:
  int dims() const { return D > 0 ? D : t_.dim; }

  void load(int32_t p, Scalar* q) const {
    for (int d = 0; d < dims(); ++d) q[d] = t_.plane(d)[p];
  }

  // The pairs of point p (at coordinates q) and positions [from, to), a scan
  // block at a time (the planes are padded past the last position).
  void scan(int32_t p, const Scalar* q, int32_t from, int32_t to) {
    const int32_t id = t_.ids[static_cast<size_t>(p)];
    for (int32_t p0 = from; p0 < to; p0 += kScanLanes) {
      Scalar sums[kScanLanes];
      const Scalar* x0 = t_.plane(0) + p0;
      for (int j = 0; j < kScanLanes; ++j) sums[j] = square_of_difference(q[0], x0[j]);
      for (int d = 1; d < dims(); ++d) {
        const Scalar* x = t_.plane(d) + p0;
        const Scalar c = q[d];
        for (int j = 0; j < kScanLanes; ++j)
          sums[j] = add_rn(sums[j], square_of_difference(c, x[j]));
      }
      const int count = std::min(kScanLanes, to - p0);
      for (int j = 0; j < count; ++j)
        if (sums[j] <= r2_) sink_.add(id, t_.ids[static_cast<size_t>(p0 + j)]);
    }
  }

  void within(const BasicSearchNode<Scalar>& leaf) {
    Scalar fixed[D > 0 ? D : 1];
    Scalar* at = D > 0 ? fixed : wide_query();
    for (int32_t p = leaf.begin; p + 1 < leaf.end; ++p) {
      load(p, at);
      scan(p, at, p + 1, leaf.end);
      sink_.settle(false);
    }
  }

  void across(const BasicSearchNode<Scalar>& leaf, const BasicSearchNode<Scalar>& other,
              const Scalar* other_box) {
    Scalar fixed[D > 0 ? D : 1];
    Scalar* at = D > 0 ? fixed : wide_query();
    for (int32_t p = leaf.begin; p < leaf.end; ++p) {
      load(p, at);
      if (box_distance(at, other_box, other_box + dims(), dims()) > r2_) continue;
      scan(p, at, other.begin, other.end);
      sink_.settle(false);
    }
  }

  // The coordinates of a query of any dimension (D = 0).
  Scalar* wide_query() {
    if (wide_.size() < static_cast<size_t>(dims())) wide_.resize(static_cast<size_t>(dims()));
    return wide_.data();
  }

  const BasicSearchTree<Scalar>& t_;
  const NodeExtents<Scalar>& e_;
  Scalar r2_;
  PairSink& sink_;
  std::vector<Scalar> wide_;
};

// The kept pairs, all of them, into pairs ordered by (i, j): a counting sort
// on i, then a sort of each i's run of j.
void write_ordered(std::vector<PairSlot>& slots, int64_t n, int64_t total, int team,
                   int64_t* pairs) {
  std::vector<int64_t> start(static_cast<size_t>(n) + 1, 0);
  for (const PairSlot& slot : slots)
    for (const uint64_t pair : slot.kept) ++start[static_cast<size_t>(pair >> 32) + 1];
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  if (start.back() != total) fail(KNN_ERR_INTERNAL, "the pairs kept are not those counted");
  std::unique_ptr<int32_t[]> second(new int32_t[static_cast<size_t>(total)]);
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (PairSlot& slot : slots) {
    for (const uint64_t pair : slot.kept)
      second[static_cast<size_t>(next[static_cast<size_t>(pair >> 32)]++)] =
          static_cast<int32_t>(pair & 0xffffffffu);
    std::vector<uint64_t>().swap(slot.kept);
  }
  // Nothing below allocates or throws: the region cannot end the process.
#pragma omp parallel for schedule(dynamic, 1024) num_threads(team_for(team, n, 4096))
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = start[static_cast<size_t>(i)], b = start[static_cast<size_t>(i) + 1];
    std::sort(second.get() + a, second.get() + b);
    for (int64_t e = a; e < b; ++e) {
      pairs[2 * e] = i;
      pairs[2 * e + 1] = second[static_cast<size_t>(e)];
    }
  }
}

}  // namespace

template <typename Scalar>
PairExtents<Scalar>::PairExtents() = default;
template <typename Scalar>
PairExtents<Scalar>::~PairExtents() = default;

template <typename Scalar>
const NodeExtents<Scalar>& PairExtents<Scalar>::of(const BasicSearchTree<Scalar>& tree) const {
  std::call_once(made_, [&] { extents_ = std::make_unique<const NodeExtents<Scalar>>(tree); });
  return *extents_;
}

template <typename Scalar>
int64_t search_self_pairs(const BasicSearchTree<Scalar>& tree, const PairExtents<Scalar>& kept,
                          Scalar r2, int threads, int64_t capacity, int64_t* pairs) {
  if (tree.size < 2 || tree.nodes.empty()) return 0;
  const NodeExtents<Scalar>& extents = kept.of(tree);
  const int64_t leaves = static_cast<int64_t>(extents.leaves.size());
  const int team = team_size(threads);
  std::vector<PairSlot> slots(static_cast<size_t>(team));
  KeptTotal total;
  total.capacity = pairs ? capacity : -1;
  if (pairs == nullptr) total.over.store(true);
  {
    const ProgressStage stage(KNN_PROGRESS_QUERY, leaves);
    with_static_dim(tree.dim, [&](auto dim) {
      struct State {
        PairSink sink;
        PairWalk<decltype(dim)::value, Scalar> walk;
        State(PairSlot& slot, KeptTotal& kept, const BasicSearchTree<Scalar>& t,
              const NodeExtents<Scalar>& e, Scalar r2_)
            : sink(slot, kept), walk(t, e, r2_, sink) {}
      };
      for_each_block(
          leaves, 1, team, cancel_flag(),
          [&] {
            const size_t me = static_cast<size_t>(omp_get_thread_num());
            if (me >= slots.size()) fail(KNN_ERR_INTERNAL, "a pairs search thread beyond its team");
            return std::make_unique<State>(slots[me], total, tree, extents, r2);
          },
          [&](auto& state, int64_t b) {
            state->walk.leaf(extents.leaves[static_cast<size_t>(b)]);
            state->sink.settle(true);
          });
    });
    stage.finish();
  }
  int64_t found = 0;
  for (const PairSlot& slot : slots) found += slot.found;
  if (pairs != nullptr && found <= capacity) write_ordered(slots, tree.size, found, team, pairs);
  return found;
}

template class PairExtents<float>;
template class PairExtents<double>;
template int64_t search_self_pairs<float>(const BasicSearchTree<float>&, const PairExtents<float>&,
                                          float, int, int64_t, int64_t*);
template int64_t search_self_pairs<double>(const BasicSearchTree<double>&,
                                           const PairExtents<double>&, double, int, int64_t,
                                           int64_t*);

}  // namespace omp
}  // namespace knn
