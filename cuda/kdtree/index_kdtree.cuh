// The CUDA bucket kd-tree of the index API (issue #4): its device data, the
// build and the search. Shape: cuda/kdtree/bucket_tree_shape.h.
//
// Layout. Points are stored in bucket order as AoS (dim scalars per point):
// the search runs queries sorted by leaf, so the threads of a warp mostly
// read the same point at the same time (one broadcast), and one point is
// one or two cache lines for the dims we serve; SoA would spread a point over
// dim lines. ids[j] is the caller's index of bucket slot j. A 3-D tree packs
// each point with its index instead (packs_bucket_points): four scalars
// (x, y, z, the index's bits), read as one DevicePoint3 (core/float4_point.cuh),
// so that one load brings a point and its index. Every node, inner or leaf,
// has a tight box (lo[dim], hi[dim]) in heap order; nothing else is stored
// (the split value is implied by the children's boxes).
//
// Scalar: float for the float32 index, double for the float64 one; the
// points, boxes, queries and distances are all of that type, and the build
// and the search are the same templates for both (explicitly instantiated in
// index_kdtree_build.cu and index_kdtree_search.cu). A double row of dim
// coordinates is contiguous like a float one, so a warp's loads stay
// coalesced (twice the bytes).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../core/cuda_support.h"
#include "../core/memory_model.h"
#include "bucket_tree_shape.h"
#include "index_kdtree_memory.h"

namespace knn {
namespace cuda {

template <typename Scalar>
struct BucketTreeView {
  int64_t n;
  int dim;
  int levels;
  const Scalar* points;    // n * dim, bucket order (null when packed)
  const int32_t* ids;      // n (null when packed)
  const Scalar* packed;    // packs_bucket_points(dim): n * 4, bucket order; else null
  const Scalar* boxes;     // (2^(levels+1) - 1) * 2 * dim: lo then hi per node
  const int32_t* min_ids;  // 2^(levels+1) - 1: the least id below each node
};

// The device data of one tree. `input` keeps the points in the caller's order
// too: knn_self runs them as device queries so that rows come out in input
// order with no gather.
template <typename Scalar>
struct BucketTree {
  int64_t n = 0;
  int dim = 0;
  int levels = 0;
  DeviceBuffer<Scalar> input;
  DeviceBuffer<Scalar> points;
  DeviceBuffer<int32_t> ids;
  DeviceBuffer<Scalar> packed;
  DeviceBuffer<Scalar> boxes;
  DeviceBuffer<int32_t> min_ids;

  BucketTreeView<Scalar> view() const {
    return BucketTreeView<Scalar>{n,         dim,          levels,      points.get(),
                                  ids.get(), packed.get(), boxes.get(), min_ids.get()};
  }
};

// Builds the tree of n points (dim coordinates each) already copied into
// tree.input on the device; tree.n/dim/levels are set by the caller.
template <typename Scalar>
void build_bucket_tree(BucketTree<Scalar>& tree, cudaStream_t stream);

// The search of one chunk. k-lists of `k` (0: counting only, radius calls).
// For radius calls (radius_sq >= 0) a point enters when its squared distance
// is <= radius_sq, the subtree test prunes on radius_sq, and counts[i] gets
// the true number of points within; kNN calls pass radius_sq < 0 and no counts.
template <typename Scalar>
struct SearchRequest {
  const Scalar* queries;  // m * dim, device
  int64_t m;
  int k;
  Scalar radius_sq;      // < 0: kNN
  int32_t* indices;      // m rows of row_width, or null
  Scalar* sq_distances;  // m rows of row_width, or null
  int32_t* counts;       // m, or null
  int row_width;         // >= k
};

// Device scratch of one pipeline slot, grown on demand.
template <typename Scalar>
struct SearchScratch {
  DeviceBuffer<uint32_t> keys[2];
  DeviceBuffer<int32_t> order[2];
  DeviceBuffer<unsigned char> cub_temp;
  DeviceBuffer<int32_t> heap_index;  // k-lists beyond the warp lists
  DeviceBuffer<Scalar> heap_dist;
  DeviceBuffer<int32_t> wide_index;  // exclude_self: rows of k + 1 before the drop
  DeviceBuffer<Scalar> wide_dist;
};

template <typename Scalar>
void search_bucket_tree(const BucketTreeView<Scalar>& tree, const SearchRequest<Scalar>& request,
                        SearchScratch<Scalar>& scratch, cudaStream_t stream);

// exclude_self: rows of k + 1 (wide_*, count of them, queries first.. of the
// call) to rows of k without each query's own index, or without the last
// entry where the own index is absent. wide_dist may be null when
// sq_distances is.
template <typename Scalar>
void drop_self(const int32_t* wide_index, const Scalar* wide_dist, int64_t count, int64_t first,
               int k, int32_t* indices, Scalar* sq_distances, cudaStream_t stream);

// Which k-list the search uses for k. Register lists stop at 16: a list of
// 32 took 213 registers per thread (12% occupancy; 3-D all-kNN of 10^7 with
// k = 30 ran 386 ms on an H100). Up to kKdTreeMaxSharedHeapK a heap per
// thread in shared memory (a warp per query where the device's shared memory
// cannot hold a warp's heaps), up to kMaxWarpK a warp per query, beyond that
// a heap per thread in device scratch. The heaps lead the warp lists at
// short lists and fall behind as they leave fewer threads on an SM: H200,
// 3-D, 10^7 x 10^7 uniform, query ms, every index equal, warp lists against
// heaps (of four children a node in that run): k = 17 88.0 -> 37.2, k = 30 101.7 -> 56.7 (clustered
// 101.7 -> 59.8), k = 48 122.5 -> 94.0, k = 64 138.7 -> 141.9, k = 100 185.0 -> 271.8 (on a sphere
// 123.0 -> 176.1).
constexpr int kKdTreeMaxSharedHeapK = 48;
enum class ListKind { kRegister1, kRegister8, kRegister16, kSharedHeap, kWarp, kHeap };
KNN_HD ListKind list_kind_for(int k) {
  return k <= 1                       ? ListKind::kRegister1
         : k <= 8                     ? ListKind::kRegister8
         : k <= 16                    ? ListKind::kRegister16
         : k <= kKdTreeMaxSharedHeapK ? ListKind::kSharedHeap
         : k <= kMaxWarpK             ? ListKind::kWarp
                                      : ListKind::kHeap;
}

}  // namespace cuda
}  // namespace knn
