// CPU kNN search of the heap-ordered kd-tree: visit a node, descend the near
// side first, and enter the far side only when the splitting plane is not
// farther than the current k-th candidate. The plane bound is computed in the
// same float arithmetic as the distances, so it never exceeds the distance of
// any point behind the plane and the pruning is exact (ties included: only a
// bound strictly greater than the k-th distance prunes).
#include <atomic>
#include <vector>

#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "knn_list.h"
#include "omp_engine.h"
#include "thread_scratch.h"

namespace knn {
namespace omp {
namespace {

struct Search {
  const Node* tree;
  TreeShape shape;
  int root_dim;

  void visit(const float* q, int64_t node, int level, KnnList& list) const {
    if (node >= shape.n) return;
    const Node& here = tree[node];
    list.offer(squared_distance3(q[0], q[1], q[2], here.p[0], here.p[1], here.p[2]), here.id);
    const int dim = split_dim(level, root_dim);
    const float diff = sub_rn(q[dim], here.p[dim]);
    const int64_t near_child = 2 * node + (diff <= 0.0f ? 1 : 2);
    const int64_t far_child = (4 * node + 3) - near_child;
    visit(q, near_child, level + 1, list);
    if (mul_rn(diff, diff) <= list.worst()) visit(q, far_child, level + 1, list);
  }
};

// Levels of the subtrees queries are grouped by: about 256 nodes, a few
// kilobytes, which stay in cache while the group's queries read them.
constexpr int kGroupLevels = 8;

// The queries in an order where neighbours in the order descend into the same
// subtree (heap order spreads a subtree's nodes over the whole array, so
// queries in their input order would each read from cold memory).
std::vector<int64_t> locality_order(const Node* tree, const TreeShape& shape, int root_dim,
                                    const Point* queries, int64_t m) {
  const int levels = shape.levels > kGroupLevels ? shape.levels - kGroupLevels : 0;
  std::vector<int64_t> order(static_cast<size_t>(m));
  std::vector<int64_t> group(static_cast<size_t>(m));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) group[i] = descend(tree, queries[i].p, levels, root_dim);
  std::vector<int64_t> start((size_t{1} << levels) + 1, 0);
  for (int64_t i = 0; i < m; ++i) ++start[group[i] + 1];
  for (size_t g = 1; g < start.size(); ++g) start[g] += start[g - 1];
  for (int64_t i = 0; i < m; ++i) order[start[group[i]]++] = i;
  return order;
}

}  // namespace

void query_kdtree(const Node* tree, int64_t n, int root_dim, const Point* queries, int64_t m,
                  int k, int32_t* indices, float* sq_distances) {
  const Search search{tree, TreeShape(n), root_dim};
  const std::vector<int64_t> order = locality_order(tree, search.shape, root_dim, queries, m);
  // The flag is registered per host thread: take it here, on the caller's
  // thread, and let every worker poll it. Exceptions cannot leave a parallel
  // loop, so a cancelled loop skips its remaining queries and throws after.
  const volatile int* const cancel = cancel_flag();
  knn_progress* const report = progress();
  std::atomic<bool> stopped{false};
  const int capacity = list_capacity(k, n);
  ThreadScratch<Neighbor> storage(omp_get_max_threads(), static_cast<size_t>(capacity));
#pragma omp parallel num_threads(storage.threads())
  {
    Neighbor* const mine = storage.mine();
    // Progress per kProgressQueries answered by this thread, not per query.
    constexpr int64_t kProgressQueries = 1024;
    int64_t unreported = 0;
#pragma omp for schedule(dynamic, 256)
    for (int64_t at = 0; at < m; ++at) {
      if (stopped.load(std::memory_order_relaxed)) continue;
      if (cancel_requested(cancel)) {
        stopped.store(true, std::memory_order_relaxed);
        continue;
      }
      const int64_t i = order[at];
      KnnList list(mine, capacity);
      search.visit(queries[i].p, 0, 0, list);
      const int64_t row = i * k;
      list.write(indices ? indices + row : nullptr, sq_distances ? sq_distances + row : nullptr, k);
      if (++unreported == kProgressQueries) {
        progress_add(report, unreported);
        unreported = 0;
      }
    }
    progress_add(report, unreported);
  }
  if (stopped.load()) throw_cancelled();
}

}  // namespace omp
}  // namespace knn
