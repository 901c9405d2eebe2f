// The tiled GPU brute force behind the CUDA brute-force index, at the device
// level: points and queries already on the device, one call per chunk of
// queries, on the caller's stream. The engine (index_brute_force.cu) and the
// kernel-only benchmark call it; sizes and the split plan come from
// index_memory_model.h so that the memory helpers answer without a device.
//
// How it searches. Every query meets every point; no m x n distance matrix
// exists. Lists of up to kBruteRegisterK neighbours live in registers, one
// thread per query, the points streamed through shared memory a tile at a
// time (dimensions 1-9, 12 and 16 are compile-time, the query in registers;
// others are read in place); longer lists (up to kMaxWarpK) are shared-memory
// lists of one warp per query (warp_list.cuh), the lanes taking 32 points at
// a time. When
// there are too few queries to fill the GPU, the points are split into parts
// searched by different blocks, and the parts' sorted lists are merged
// pairwise by rank: (distance, index) pairs are unique, so every entry knows
// its place in the merged list exactly and the answer is the unsplit one.
//
// Scalar: float for the float32 index, double for the float64 one; points,
// queries and distances are all of that type, and every kernel is the same
// template for both (instantiated in index_brute_force.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../common/neighbor.h"
#include "../core/cuda_support.h"

namespace knn {
namespace cuda {

// The indexed points: n rows of dim scalars, device memory.
template <typename Scalar>
struct BruteForcePoints {
  const Scalar* rows;
  int64_t n;
  int dim;
};

// What one chunk asks for. Rows of `row_width` (k, or max_neighbors) hold the
// nearest points with squared distance <= max_sq in (distance, index) order,
// then -1 / +infinity. With exclude_self, query i of the chunk is point
// self_first + i and the search keeps one more neighbour than the row shows,
// dropping that point where it appears (else the last one).
template <typename Scalar>
struct BruteForceRequest {
  int row_width = 0;
  Scalar max_sq = Scalar(0);  // +infinity for kNN
  bool exclude_self = false;
  int64_t self_first = 0;
};

// Device outputs of one chunk (count rows); any of them may be null.
template <typename Scalar>
struct BruteForceOutputs {
  int32_t* indices;
  Scalar* sq_distances;
  int32_t* counts;  // true number of points within max_sq
};

// Device scratch of the split search for up to `queries` queries at a time
// (empty when the plan does not split). Reused across chunks on one stream.
template <typename Scalar>
class BruteForceScratch {
 public:
  BruteForceScratch() = default;
  BruteForceScratch(int64_t queries, int64_t splits, int list_k);
  int64_t queries() const { return queries_; }
  int64_t splits() const { return splits_; }
  int list_k() const { return list_k_; }
  BasicNeighbor<Scalar>* lists() const { return lists_.get(); }
  BasicNeighbor<Scalar>* merged() const { return merged_.get(); }
  int32_t* counts() const { return counts_.get(); }

 private:
  int64_t queries_ = 0;
  int64_t splits_ = 1;
  int list_k_ = 0;
  DeviceBuffer<BasicNeighbor<Scalar>> lists_;   // queries * splits * list_k: each part's list
  DeviceBuffer<BasicNeighbor<Scalar>> merged_;  // queries * ceil(splits / 2) * list_k: merges
  DeviceBuffer<int32_t> counts_;                // queries * splits: each part's count
};

// Searches m device queries (rows of points.dim scalars) against the points
// with the reference set split into `splits` parts (brute_force_splits();
// the scratch must have been made for at least m queries and the same
// splits and list length when splits > 1). Asynchronous on `stream`.
// Throws KNN_ERR_UNSUPPORTED when the list would exceed kMaxWarpK.
template <typename Scalar>
void brute_force_search(const BruteForcePoints<Scalar>& points, const Scalar* queries, int64_t m,
                        const BruteForceRequest<Scalar>& request,
                        const BruteForceOutputs<Scalar>& out, int64_t splits,
                        BruteForceScratch<Scalar>& scratch, cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
