// The CUDA search of the uniform grid (3-D): k nearest and radius, for one
// chunk of queries already on the device.
//
// Queries are sorted by cell key first, so the threads of a warp serve
// neighbouring queries and read the same cells (their points stay in L1/L2).
// k nearest walks the shells of common/grid_layout.h with the exact bounds
// (a query with no point in the 3 x 3 x 3 cells around its own scans every
// point instead, by one warp: the walk would cross row after row of empty
// cells):
//   - lists of up to kGridRegisterK entries (grid_memory.h, which gives the
//     limits and their figures): one thread per query, the list in
//     registers (knn_lists.cuh RegisterList);
//   - up to kGridMaxHeapTake (44): one thread per query, the list a heap in
//     shared memory (knn_lists.cuh HeapList), as many threads a block as
//     the device's shared memory holds heaps for;
//   - up to kMaxBinnedTake (256): one thread per query appending its
//     candidates to a binned row (core/binned_rows.cuh), which a warp sorts
//     afterwards; a query whose row overflows goes to the warp search;
//   - longer lists, or heaps that do not fit the shared memory: one warp
//     per query, the list in shared memory (warp_list.cuh WarpList), the
//     lanes sharing each cell's points;
// radius walks exactly the cells whose bound is within the radius, one
// thread per query, keeping its row sorted in place.
//
// Scalar: float for the float32 index, double for the float64 one; the
// points, queries, bounds and distances are all of that type, and the
// kernels are the same templates for both (cell points in the layout of
// core/float4_point.cuh DevicePoint3).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../common/grid_layout.h"
#include "../core/cuda_support.h"
#include "../core/float4_point.cuh"
#include "grid_memory.h"

namespace knn {
namespace cuda {

// The resident grid as the kernels read it (device pointers).
template <typename Scalar>
struct GridView {
  using CellPoint = typename DevicePoint3<Scalar>::Stored;
  BasicGridLayout<Scalar> layout;
  const CellPoint* cell_points;  // the n points in cell order: x, y, z, original index bits
  const uint32_t* starts;        // cell_count + 1 positions into cell_points
  const Scalar* points;          // the n points in input order (rows of x, y, z)
  int64_t n;
};

// Longest list the warp search can hold on the current device (its shared
// memory per block); longer requests are refused with KNN_ERR_UNSUPPORTED.
template <typename Scalar>
int grid_max_list_k();

// Sort scratch of one pipeline slot, for chunks of up to `capacity` queries.
class GridSearchScratch {
 public:
  GridSearchScratch() = default;
  GridSearchScratch(int64_t capacity, int key_bits);
  int64_t capacity() const { return capacity_; }

  DeviceBuffer<uint32_t> keys[2], order[2];
  // The queries the thread search hands to the warp search (isolated ones,
  // and those whose binned rows overflow: grid_search.cu) and their count.
  DeviceBuffer<uint32_t> handed_over;
  DeviceBuffer<unsigned> handed_over_count;
  DeviceBuffer<unsigned char> cub_temp;
  // The binned rows of a chunk and their ends (binned_rows.cuh), allocated
  // at the first chunk that keeps its lists there
  // (grid_scratch_bytes_per_query, grid_memory.h, counts them).
  DeviceBuffer<unsigned char> binned_entries, binned_ends;
  size_t cub_bytes = 0;
  int key_bits = 1;

 private:
  int64_t capacity_ = 0;
};

// k nearest of `count` queries (rows of 3 scalars) into rows of k. With
// self_first >= 0 the queries are the indexed points self_first,
// self_first + 1, ... and each row leaves out its own index (the list keeps
// k + 1 and drops it, or the last one when it is not among them).
template <typename Scalar>
void grid_knn(const GridView<Scalar>& grid, const Scalar* queries, int64_t count, int k,
              int64_t self_first, int32_t* indices, Scalar* sq_distances,
              GridSearchScratch& scratch, cudaStream_t stream);

// Points within r2 (squared distance <= r2) of each query: rows of
// max_neighbors (indices may be null only when max_neighbors is 0), counts
// the true numbers; sq_distances and counts may be null.
template <typename Scalar>
void grid_radius(const GridView<Scalar>& grid, const Scalar* queries, int64_t count, Scalar r2,
                 int max_neighbors, int32_t* indices, Scalar* sq_distances, int32_t* counts,
                 GridSearchScratch& scratch, cudaStream_t stream);

// How many of `sample` evenly spaced queries out of `count` (rows of 3
// scalars, device memory; row i * count / sample) have no indexed point in
// the 3 x 3 x 3 cells around their own; waited for.
template <typename Scalar>
int64_t count_isolated_queries(const GridView<Scalar>& grid, const Scalar* queries, int64_t count,
                               int64_t sample, cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
