// The pairs of a kd-tree's own points within a radius, each found once: the
// OpenMP kd-tree's answer to knn_index_radius_pairs (engine/index_engine.h,
// radius_pairs).
//
// Search. Every leaf walks the tree once with its tight box: a node is
// entered only when its positions reach past the leaf's first one (nodes
// cover contiguous positions, so the nodes wholly before the leaf hold no
// pair that the earlier leaves have not found) and the box-to-box bound is
// <= r2. At a leaf after it, each of its points is tested against the
// other's box, then scanned; at itself, each point against the later ones.
// So every pair is tested once, from the leaf of its smaller position, with
// the radius search's own distance (square_of_difference summed in
// dimension order, which is symmetric bit for bit: fl(a - b) = -fl(b - a))
// and predicate (<= r2); each bound is made of the same monotone rounded
// operations from gaps no larger than the coordinate differences, so it
// never exceeds a pair's distance and prunes nothing the predicate keeps.
//
// Output. Pairs go into per-thread buffers as (smaller id, larger id) while
// their number stays within the caller's capacity, and are counted on after
// that; when they all fit, a counting sort by the first id and a sort of
// each first id's run give the order by (i, j).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "../common/non_copyable.h"
#include "kd_search.h"

namespace knn {
namespace omp {

template <typename Scalar>
struct NodeExtents;  // kd_pairs.cpp

// A tree's node extents, made on its first pairs search and kept with the
// engine (the tree never changes): later searches, at any radius, reuse them.
template <typename Scalar>
class PairExtents : NonCopyable {
 public:
  PairExtents();
  ~PairExtents();
  const NodeExtents<Scalar>& of(const BasicSearchTree<Scalar>& tree) const;

 private:
  mutable std::once_flag made_;
  mutable std::unique_ptr<const NodeExtents<Scalar>> extents_;
};

// The number of pairs i < j of the tree's points (original indices) whose
// squared distance is <= r2. pairs (host, 2 * capacity int64) receives them,
// ordered by i then j, only when pairs is not NULL and they number at most
// capacity; otherwise it is untouched. threads 0: all. `extents` is the
// tree's own (the engine keeps it beside the tree).
template <typename Scalar>
int64_t search_self_pairs(const BasicSearchTree<Scalar>& tree, const PairExtents<Scalar>& extents,
                          Scalar r2, int threads, int64_t capacity, int64_t* pairs);

}  // namespace omp
}  // namespace knn
