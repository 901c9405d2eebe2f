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
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../common/neighbor.h"
#include "../core/cuda_support.h"

namespace knn {
namespace cuda {

// The indexed points: n rows of dim floats, device memory.
struct BruteForcePoints {
  const float* rows;
  int64_t n;
  int dim;
};

// What one chunk asks for. Rows of `row_width` (k, or max_neighbors) hold the
// nearest points with squared distance <= max_sq in (distance, index) order,
// then -1 / +infinity. With exclude_self, query i of the chunk is point
// self_first + i and the search keeps one more neighbour than the row shows,
// dropping that point where it appears (else the last one).
struct BruteForceRequest {
  int row_width = 0;
  float max_sq = 0.0f;  // +infinity for kNN
  bool exclude_self = false;
  int64_t self_first = 0;
};

// Device outputs of one chunk (count rows); any of them may be null.
struct BruteForceOutputs {
  int32_t* indices;
  float* sq_distances;
  int32_t* counts;  // true number of points within max_sq
};

// Device scratch of the split search for up to `queries` queries at a time
// (empty when the plan does not split). Reused across chunks on one stream.
class BruteForceScratch {
 public:
  BruteForceScratch() = default;
  BruteForceScratch(int64_t queries, int64_t splits, int list_k);
  int64_t queries() const { return queries_; }

 private:
  friend void brute_force_search(const BruteForcePoints&, const float*, int64_t,
                                 const BruteForceRequest&, const BruteForceOutputs&, int64_t,
                                 BruteForceScratch&, cudaStream_t);
  int64_t queries_ = 0;
  int64_t splits_ = 1;
  int list_k_ = 0;
  DeviceBuffer<Neighbor> lists_;   // queries * splits * list_k: each part's list
  DeviceBuffer<Neighbor> merged_;  // queries * ceil(splits / 2) * list_k: merge rounds
  DeviceBuffer<int32_t> counts_;   // queries * splits: each part's count
};

// Searches m device queries (rows of points.dim floats) against the points
// with the reference set split into `splits` parts (brute_force_splits();
// the scratch must have been made for at least m queries and the same
// splits and list length when splits > 1). Asynchronous on `stream`.
// Throws KNN_ERR_UNSUPPORTED when the list would exceed kMaxWarpK.
void brute_force_search(const BruteForcePoints& points, const float* queries, int64_t m,
                        const BruteForceRequest& request, const BruteForceOutputs& out,
                        int64_t splits, BruteForceScratch& scratch, cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
