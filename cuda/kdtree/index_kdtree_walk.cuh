// How a search of the bucket kd-tree (index_kdtree_search.cu) reads its
// query and the bucket points, the distances and the node test it bounds
// a walk with, and the walk, which the lanes of a warp take together.

#pragma once

#include <cstdint>

#include "../../common/float_math.h"
#include "index_kdtree.cuh"

namespace knn {
namespace cuda {

// A query's coordinates: in registers when DIM is known at compile time,
// else read through the cache from the query array. lane_coords(from, lanes)
// gives every lane of `lanes` lane `from`'s coordinates: for DIM > 0 the
// warp's rows in shared memory, which publish() fills once per query, so
// that a turn reads its owner's coordinates as broadcasts where it would
// otherwise shuffle DIM values into registers; for DIM == 0 the owner's row
// of the query array (the pointer is shuffled).
template <typename Scalar, int DIM>
struct QueryPoint {
  using Value = Scalar;
  static constexpr int kDim = DIM;
  Scalar c[DIM];
  const Scalar* rows = nullptr;  // the warp's 32 published queries, DIM scalars each

  __device__ QueryPoint(const Scalar* q, int) {
#pragma unroll
    for (int d = 0; d < DIM; ++d) c[d] = q[d];
  }
  __device__ int dim() const { return DIM; }
  __device__ const Scalar* coords() const { return c; }
  __device__ void publish(Scalar* warp_rows, unsigned lanes) {
    Scalar* row = warp_rows + threadIdx.x % 32 * DIM;
#pragma unroll
    for (int d = 0; d < DIM; ++d) row[d] = c[d];
    __syncwarp(lanes);
    rows = warp_rows;
  }
  __device__ const Scalar* lane_coords(int from, unsigned) const { return rows + from * DIM; }
};

template <typename Scalar>
struct QueryPoint<Scalar, 0> {
  using Value = Scalar;
  static constexpr int kDim = 0;
  const Scalar* c;
  int d;
  __device__ QueryPoint(const Scalar* q, int dim_) : c(q), d(dim_) {}
  __device__ int dim() const { return d; }
  __device__ const Scalar* coords() const { return c; }
  __device__ void publish(Scalar*, unsigned) {}
  __device__ const Scalar* lane_coords(int from, unsigned lanes) const {
    const auto row = reinterpret_cast<unsigned long long>(c);
    return reinterpret_cast<const Scalar*>(__shfl_sync(lanes, row, from));
  }
};

// A bucket point as the search reads it: its coordinates in registers when
// DIM is known at compile time (else its row), and its index. A tree that
// packs its points with their ids (packs_bucket_points: 3-D) is read in one
// load of both; other dims keep rows and ids apart, and the id is read only
// when it is asked for (a point that enters a list). Lanes that take turns
// over a leaf each hold one such point, read once per warp rather than once
// per turn.
template <typename Scalar, int DIM, bool Packed = packs_bucket_points(DIM)>
struct BucketPoint {
  Scalar c[DIM];
  __device__ BucketPoint(const BucketTreeView<Scalar>& t, int64_t j) {
#pragma unroll
    for (int d = 0; d < DIM; ++d) c[d] = t.points[j * DIM + d];
  }
  __device__ const Scalar* coords() const { return c; }
  __device__ int32_t id(const BucketTreeView<Scalar>& t, int64_t j) const { return t.ids[j]; }
};

template <typename Scalar, int DIM>
struct BucketPoint<Scalar, DIM, true> {
  static_assert(DIM == 3, "a packed point holds x, y and z");
  using Packed = DevicePoint3<Scalar>;
  static_assert(sizeof(typename Packed::Stored) == kPackedPointScalars * sizeof(Scalar),
                "the build packs kPackedPointScalars scalars a point");
  Scalar c[3];
  int32_t packed_id;
  __device__ BucketPoint(const BucketTreeView<Scalar>& t, int64_t j) {
    const auto v = Packed::load(reinterpret_cast<const typename Packed::Stored*>(t.packed) + j);
    c[0] = Packed::x(v), c[1] = Packed::y(v), c[2] = Packed::z(v);
    packed_id = Packed::id(v);
  }
  __device__ const Scalar* coords() const { return c; }
  __device__ int32_t id(const BucketTreeView<Scalar>&, int64_t) const { return packed_id; }
};

template <typename Scalar>
struct BucketPoint<Scalar, 0, false> {
  const Scalar* c;
  __device__ BucketPoint(const BucketTreeView<Scalar>& t, int64_t j) : c(t.points + j * t.dim) {}
  __device__ const Scalar* coords() const { return c; }
  __device__ int32_t id(const BucketTreeView<Scalar>& t, int64_t j) const { return t.ids[j]; }
};

template <class Query, class Point>
__device__ __forceinline__ typename Query::Value point_distance(const Query& q, const Point& p) {
  return squared_distance(q.coords(), p.coords(), q.dim());
}

// The least id of node's points.
template <typename Scalar>
__device__ __forceinline__ int32_t least_id(const BucketTreeView<Scalar>& t, uint32_t node) {
  return __ldg(&t.min_ids[node]);
}

// Whether a kNN list (or a radius call: radius_sq >= 0) wants a node whose
// points are at a squared distance of at least lower_bound: below the k-th
// distance it does, above it it does not, and at a tie the node's least id
// decides (read only then, so untied walks load nothing more).
template <typename Scalar, class List>
__device__ __forceinline__ bool wants_node(const List& list, Scalar radius_sq,
                                           const BucketTreeView<Scalar>& t, Scalar lower_bound,
                                           uint32_t node) {
  if (radius_sq >= Scalar(0)) return lower_bound <= radius_sq;
  const Scalar kth = list.bound();
  if (lower_bound != kth) return lower_bound < kth;
  return list.admits(lower_bound, least_id(t, node));
}

template <class Query>
__device__ __forceinline__ typename Query::Value node_distance(
    const Query& q, const BucketTreeView<typename Query::Value>& t, uint32_t node) {
  const typename Query::Value* lo = t.boxes + int64_t{node} * 2 * q.dim();
  return box_distance(q.coords(), lo, lo + q.dim(), q.dim());
}

// Depth-first walk, nearer child first, taken by the lanes of a warp
// together (each lane its own query, or all lanes one query): a node is
// entered when any lane wants it (wants_node), the nearer child is the one
// most lanes find nearer (at equal distances the one with the smaller least
// id, which wins the ties: then the other is skipped where its ids cannot
// beat the k-th), and a lane scans a leaf only when it wants the leaf itself. Lanes of neighbouring
// queries want mostly the same nodes, so a warp reads each box and each leaf point once for all its
// lanes instead of diverging into 32 walks (H100, k = 5, n = m: 2^21 points in 5-D 61 -> 45 ms,
// 2^20 in 9-D 580 -> 284 ms). Exact for every lane: a subtree is skipped only when its box is
// beyond every lane's bound. `lanes` holds the lanes that take part (all of them reach every step,
// scan_leaf included, which is told whether the lane's own bound admits the leaf).
template <class Query, class Visitor>
__device__ void walk_bucket_tree(const BucketTreeView<typename Query::Value>& t, const Query& q,
                                 Visitor& visitor, unsigned lanes) {
  using Scalar = typename Query::Value;
  uint32_t stack_node[kMaxTreeLevels];
  Scalar stack_dist[kMaxTreeLevels];
  int top = 0;
  const uint32_t first_leaf = first_node_of_level(t.levels);
  const int voters = __popc(lanes);
  uint32_t node = 0;
  Scalar dist = node_distance(q, t, 0);
  for (;;) {
    const bool wanted = visitor.wants(dist, node);
    if (__any_sync(lanes, wanted)) {
      if (node >= first_leaf) {
        const int64_t leaf = node - first_leaf;
        visitor.scan_leaf(segment_start(t.n, t.levels, leaf),
                          segment_start(t.n, t.levels, leaf + 1), wanted, lanes);
      } else {
        const uint32_t left = 2 * node + 1;
        const Scalar dl = node_distance(q, t, left);
        const Scalar dr = node_distance(q, t, left + 1);
        const bool left_nearer =
            dl < dr || (dl == dr && least_id(t, left) <= least_id(t, left + 1));
        const bool left_first = 2 * __popc(__ballot_sync(lanes, left_nearer)) >= voters;
        stack_node[top] = left_first ? left + 1 : left;
        stack_dist[top] = left_first ? dr : dl;
        ++top;
        node = left_first ? left : left + 1;
        dist = left_first ? dl : dr;
        continue;
      }
    }
    if (top == 0) return;
    --top;
    node = stack_node[top];
    dist = stack_dist[top];
  }
}

}  // namespace cuda
}  // namespace knn
