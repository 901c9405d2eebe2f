// What the OpenMP engine's alignment steps share (the mesh's,
// mesh/omp_mesh_align.cpp, and the point cloud's, omp_cloud_align.cpp): the
// trim's threshold ranked on the host and the blocks of a step summed on the
// team, then added in block order (common/geometry/align_terms.h), as the
// CUDA engine ranks and sums them on the device (cuda/core/align_sums.cuh).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/geometry/align_terms.h"
#include "../engine/cancel.h"

namespace knn {
namespace omp {

// The threshold of a step's kept points among m: max_sq, lowered where
// kept_fraction < 1 to the squared distance at the trimming rank
// (geometry::trim_position) among the points with a correspondence (ids[i]
// >= 0) within max_sq.
template <typename Scalar>
double kept_threshold(const int32_t* ids, const Scalar* sq, int64_t m, double max_sq,
                      double kept_fraction, const volatile int* cancel) {
  if (!(kept_fraction < 1.0)) return max_sq;
  std::vector<Scalar> measured;
  resize_polling(measured, static_cast<size_t>(m), cancel);
  size_t count = 0;
  for (int64_t i = 0; i < m; ++i)
    if (ids[i] >= 0 && static_cast<double>(sq[i]) <= max_sq) measured[count++] = sq[i];
  if (count == 0) return max_sq;
  const auto at =
      measured.begin() + geometry::trim_position(kept_fraction, static_cast<int64_t>(count));
  std::nth_element(measured.begin(), at, measured.begin() + static_cast<std::ptrdiff_t>(count));
  return static_cast<double>(*at);
}

// The sums of m points: block_sums(first, count) of every block of
// kAlignSumBlock points on `threads` threads, then the blocks in order.
// block_sums must not throw (it runs inside the parallel loop).
template <class BlockSums>
geometry::AlignSums sum_blocks_in_order(int64_t m, int threads, const BlockSums& block_sums,
                                        const volatile int* cancel) {
  const int64_t block = geometry::kAlignSumBlock;
  const int64_t blocks = (m + block - 1) / block;
  std::vector<geometry::AlignSums> sums;
  resize_polling(sums, static_cast<size_t>(blocks), cancel);
  // No exceptions, and cheap beside the search: a plain loop (the
  // progress counts the search's points only).
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t b = 0; b < blocks; ++b)
    sums[static_cast<size_t>(b)] = block_sums(b * block, std::min(block, m - b * block));
  return geometry::sum_of_blocks(sums.data(), blocks);
}

}  // namespace omp
}  // namespace knn
