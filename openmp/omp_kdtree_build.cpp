// CPU kd-tree build: median selection in (coordinate, index) order
// (select_rank.h), a node's points a contiguous range of one array. The order
// is total, so the set of points on each side of every median is unique and
// the tree does not depend on the thread count.
//
// The work is planned before the parallel region opens: every node of more
// than kTaskCutoff points is split by one work item, every smaller subtree
// built whole by one, in breadth-first order (a list allocated on the calling
// thread). The team takes the items in that order, each once its parent's is
// done. So the region allocates nothing: no operator new that could throw
// where nothing catches it, and no OpenMP task, which libgomp allocates with
// a malloc that ends the process when it fails.
#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "../engine/cancel.h"
#include "omp_engine.h"
#include "omp_tuning.h"
#include "select_rank.h"
#include "wait_for_flag.h"

namespace knn {
namespace omp {
namespace {

struct Item {
  float p[3];
  int32_t id;
};

// The caller's cancel flag, polled before every large node (a cancelled
// build skips the rest, small subtrees too: exceptions cannot leave the
// region).
struct Cancellation {
  LoopStop stop;

  bool stop_before(int64_t count) { return count <= kTaskCutoff ? stop.stopped() : stop.poll(); }
};

// Selects the median of the level-`level` node at position q among its
// count points (items[0, count)), smaller ones first, and writes the node;
// returns its rank, the size of its left subtree.
int64_t place_median(Item* items, int64_t count, int level, int64_t q, const TreeShape& shape,
                     Node* tree) {
  const int dim = split_dim(level, 0);
  const int64_t rank = shape.median_rank(level, q);
  // select_rank against std::nth_element, 10^6 points: 125 -> 61 ms on two
  // threads, 222 -> 114 ms on one, clustered. The coordinates are read
  // before the call: read in its arguments, GCC 12 scheduled the loads
  // differently and the build took 2% longer (59.0 -> 60.5 ms, 2 threads).
  select_rank(items, count, rank, [dim](const Item& a, const Item& b) {
    const float ca = a.p[dim], cb = b.p[dim];
    return before_on_axis(ca, a.id, cb, b.id);
  });
  const int64_t node = (int64_t{1} << level) - 1 + q;
  const Item& median = items[rank];
  tree[node] = Node{{median.p[0], median.p[1], median.p[2]},
                    static_cast<int>(shape.child_or_none(2 * node + 1)),
                    static_cast<int>(shape.child_or_none(2 * node + 2)),
                    median.id};
  return rank;
}

void build_subtree(Item* items, int64_t count, int level, int64_t q, const TreeShape& shape,
                   Node* tree) {
  if (count == 0) return;
  const int64_t rank = place_median(items, count, level, q, shape, tree);
  build_subtree(items, rank, level + 1, 2 * q, shape, tree);
  build_subtree(items + rank + 1, count - rank - 1, level + 1, 2 * q + 1, shape, tree);
}

// One work item: the level-`level` node at position q, whose subtree's
// points are items[begin, begin + count); its parent's item, or -1.
struct Work {
  int64_t begin, count, q, parent;
  int level;
};

// The items of a tree of n points, breadth first: large nodes, whose two
// children follow as items of their own, and whole small subtrees.
std::vector<Work> plan_work(const TreeShape& shape) {
  std::vector<Work> work{Work{0, shape.n, 0, -1, 0}};
  for (size_t i = 0; i < work.size(); ++i) {
    const Work w = work[i];
    if (w.count <= kTaskCutoff) continue;
    const int64_t rank = shape.median_rank(w.level, w.q);
    const int64_t parent = static_cast<int64_t>(i);
    work.push_back(Work{w.begin, rank, 2 * w.q, parent, w.level + 1});
    if (w.count - rank - 1 > 0)
      work.push_back(
          Work{w.begin + rank + 1, w.count - rank - 1, 2 * w.q + 1, parent, w.level + 1});
  }
  return work;
}

}  // namespace

void build_kdtree(const Point* points, int64_t n, Node* tree) {
  if (n == 0) return;
  const int threads = team_size(kClassicThreads);
  std::vector<Item> items(static_cast<size_t>(n));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    items[i] = Item{{points[i].p[0], points[i].p[1], points[i].p[2]}, static_cast<int32_t>(i)};
  const TreeShape shape(n);
  const std::vector<Work> work = plan_work(shape);
  const size_t count = work.size();
  std::unique_ptr<std::atomic<bool>[]> done(new std::atomic<bool>[count]);
  for (size_t i = 0; i < count; ++i) done[i].store(false, std::memory_order_relaxed);
  std::atomic<size_t> next{0};
  Cancellation cancel{LoopStop(cancel_flag())};
#pragma omp parallel num_threads(threads)
  for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
    const Work& w = work[i];
    // Taken in breadth-first order, so the parent's item was taken earlier,
    // by a thread that waits for nothing taken after it.
    if (w.parent >= 0) wait_for_flag(done[static_cast<size_t>(w.parent)], [] { return false; });
    if (!cancel.stop_before(w.count)) {
      Item* const at = items.data() + w.begin;
      if (w.count > kTaskCutoff)
        place_median(at, w.count, w.level, w.q, shape, tree);
      else
        build_subtree(at, w.count, w.level, w.q, shape, tree);
    }
    done[i].store(true, std::memory_order_release);
  }
  if (cancel.stop.stopped()) throw_cancelled();
}

}  // namespace omp
}  // namespace knn
