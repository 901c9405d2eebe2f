// The device side of an alignment step (common/geometry/align_terms.h), one
// place for the mesh's step (cuda/mesh/mesh_align.cu) and the point cloud's
// (cuda/stats/cloud_align.cu): the scan moved and rounded to the search's
// scalar, the trim's threshold ranked by a CUB sort of the squared
// distances, every block of kAlignSumBlock points summed by one thread in
// point order, and the blocks' sums brought back and added in block order on
// the host (geometry::sum_of_blocks), as the OpenMP engine adds the blocks
// its threads sum (openmp/omp_align_sums.h): the same bits on both engines.
// No floating-point atomics: each block's sum has one writer, and the order
// of every addition is fixed by the blocks alone, not by the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../../common/geometry/align_terms.h"
#include "cuda_support.h"
#include "launch_policy.h"
#include "radix_sort_temp.cuh"

namespace knn {
namespace cuda {

// The most scan points one chunk of a step moves and searches at once (a
// multiple of kAlignSumBlock).
constexpr int64_t kAlignChunkPoints = int64_t{1} << 22;
static_assert(kAlignChunkPoints % geometry::kAlignSumBlock == 0, "whole sum blocks per chunk");

// The blocks of kAlignSumBlock points that m points make.
KNN_HD int64_t align_sum_blocks(int64_t m) {
  return (m + geometry::kAlignSumBlock - 1) / geometry::kAlignSumBlock;
}

// Moves `count` points (x, y, z each, device memory) by the frame's motion,
// each rounded to Scalar (geometry::move_point, rounded3), into `moved`
// (3 count scalars), queued on `stream`.
template <typename Scalar>
void move_points(const Scalar* points, int64_t count, const geometry::AlignFrame& frame,
                 Scalar* moved, cudaStream_t stream);

// The ranking of a trim's threshold among the m points of a call: the
// device scratch of its sort (the keys twice, CUB's temporaries, the
// count), allocated once, then threshold() for every step.
template <typename Scalar>
class TrimRanking {
 public:
  // Device bytes of the scratch for m points at most.
  static size_t bytes(int64_t m);
  explicit TrimRanking(int64_t m);
  // The threshold of a step's kept points among the m (device arrays: per
  // point its correspondence's id, negative for none, and squared
  // distance), the value the OpenMP engine ranks on the host
  // (openmp/omp_align_sums.h kept_threshold): max_sq, lowered where
  // kept_fraction < 1 to the squared distance at the trimming rank
  // (geometry::trim_position) among the points with a correspondence within
  // max_sq. Waits for `stream`.
  double threshold(const int32_t* ids, const Scalar* sq, double max_sq, double kept_fraction,
                   cudaStream_t stream);

 private:
  using Key = typename OrderedKey<Scalar>::type;
  int64_t m_;
  DeviceBuffer<Key> keys_, sorted_keys_;
  DeviceBuffer<unsigned char> temp_;
  size_t temp_bytes_ = 0;
  DeviceBuffer<int64_t> measured_;
};

// sums[b] = block_sums(first, count) for every block b of `count` points: a
// thread per block (grid stride: the grid does not change the sums).
template <class BlockSums>
__global__ void sum_each_block(int64_t count, BlockSums block_sums, geometry::AlignSums* sums) {
  const int64_t blocks = align_sum_blocks(count);
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = b * geometry::kAlignSumBlock;
    sums[b] = block_sums(first, min(geometry::kAlignSumBlock, count - first));
  }
}

// Queues sum_each_block on `stream`.
template <class BlockSums>
void sum_blocks(int64_t count, const BlockSums& block_sums, geometry::AlignSums* sums,
                cudaStream_t stream) {
  const int64_t blocks = align_sum_blocks(count);
  if (blocks == 0) return;
  sum_each_block<<<grid_stride_blocks(sum_each_block<BlockSums>, kBlock, blocks), kBlock, 0,
                   stream>>>(count, block_sums, sums);
  check_launch("align: sum_each_block");
}

// The step's sums: `blocks` block sums of device memory, brought back and
// added in block order on the host. Waits for `stream`.
geometry::AlignSums blocks_in_order(const geometry::AlignSums* sums, int64_t blocks,
                                    cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
