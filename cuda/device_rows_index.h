// Index engines over points that are already in device memory, for the other
// parts of cuda/ (a classic tree's points, scattered back into input order on
// the device, served as the index API's grid or bucket kd-tree). Device code
// only: src/ reaches the engines through cuda_index.h.
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

// build_kdtree_index (cuda_index.h) over n rows of dim scalars in `rows`,
// which the tree keeps as its points in input order instead of a copy
// (params.points_on_device is not read). The rows count against
// params.device_memory_limit as the build's own copy would.
template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index(DeviceBuffer<Scalar> rows, int64_t n,
                                                             int dim, const IndexParams& params);

}  // namespace cuda
}  // namespace knn
