// CPU kd-tree build: recursive median selection in (coordinate, index) order
// (select_rank.h), one OpenMP task per large subtree. The order is total, so
// the set of points on each side of every median is unique and the tree does
// not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <vector>

#include "../engine/cancel.h"
#include "omp_engine.h"
#include "select_rank.h"

namespace knn {
namespace omp {
namespace {

struct Item {
  float p[3];
  int32_t id;
};

// Subtrees smaller than this are built by the task that reaches them.
constexpr int64_t kTaskCutoff = 16384;

// The caller's cancel flag, polled by every task before a large subtree (a
// cancelled build skips the rest: exceptions cannot leave a task).
struct Cancellation {
  const volatile int* flag;
  std::atomic<bool> stopped{false};

  bool stop_before(int64_t count) {
    if (count <= kTaskCutoff) return false;
    if (cancel_requested(flag)) stopped.store(true, std::memory_order_relaxed);
    return stopped.load(std::memory_order_relaxed);
  }
};

void build_subtree(Item* items, int64_t count, int level, int64_t q, const TreeShape& shape,
                   Node* tree, Cancellation& cancel) {
  if (count == 0 || cancel.stop_before(count)) return;
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
  Item* right = items + rank + 1;
  const int64_t right_count = count - rank - 1;
#pragma omp task if (rank > kTaskCutoff) default(none) firstprivate(items, rank, level, q) \
    shared(shape, tree, cancel)
  build_subtree(items, rank, level + 1, 2 * q, shape, tree, cancel);
  build_subtree(right, right_count, level + 1, 2 * q + 1, shape, tree, cancel);
#pragma omp taskwait
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
  Cancellation cancel{cancel_flag()};
#pragma omp parallel num_threads(threads)
#pragma omp single
  build_subtree(items.data(), n, 0, 0, shape, tree, cancel);
  if (cancel.stopped.load()) throw_cancelled();
}

}  // namespace omp
}  // namespace knn
