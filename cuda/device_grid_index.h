// The grid index over points that are already in device memory, for the
// other structures of cuda/ (a classic tree's points, scattered back into
// input order on the device, binned as the index API's grid). Device code
// only: src/ reaches the grid through cuda_index.h.
#pragma once

#include <cstdint>
#include <memory>

#include "../engine/index_engine.h"
#include "core/cuda_support.h"

namespace knn {
namespace cuda {

// build_grid_index (cuda_index.h) over the rows of x, y, z in `xyz`, which
// the grid keeps as its points in input order instead of a copy; nullptr
// when the points make a poor grid (params.points_on_device is not read).
template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_grid_index(DeviceBuffer<Scalar> xyz, int64_t n,
                                                           const IndexParams& params);

}  // namespace cuda
}  // namespace knn
