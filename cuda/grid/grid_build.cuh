// The resident CUDA grid (3-D) and its build on the device; the index engine
// (grid_build.cu) and the benchmark use it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "../../common/grid_layout.h"
#include "../core/cuda_support.h"
#include "grid_search.cuh"

namespace knn {
namespace cuda {

// Owns the device arrays a GridView points into.
template <typename Scalar>
struct DeviceGrid {
  using CellPoint = typename DevicePoint3<Scalar>::Stored;
  BasicGridLayout<Scalar> layout;
  int64_t n = 0;
  DeviceBuffer<Scalar> points;          // input order, rows of x, y, z
  DeviceBuffer<CellPoint> cell_points;  // cell order, with the original indices
  DeviceBuffer<uint32_t> starts;        // cell_count + 1
  double stacked_cell_points = 0.0;     // BasicIndexEngine::stacked_cell_points

  GridView<Scalar> view() const {
    return GridView<Scalar>{layout, cell_points.get(), starts.get(), points.get(), n};
  }
  // Bits of a cell key (what the query sort needs).
  int key_bits() const;
};

// Builds the grid of n points (rows of x, y, z; device memory when
// points_on_device, else host memory) aiming at `target` points per cell, on
// `stream`; returns when done. A poor grid is binned again with finer cells
// when `refine` (common/grid_layout.h "Surfaces"); nullptr when no grid
// tried is good, or with `refuse_curves` when the points lie on a curve
// ("Curves").
template <typename Scalar>
std::unique_ptr<DeviceGrid<Scalar>> build_device_grid(const Scalar* points, int64_t n,
                                                      bool points_on_device, int target,
                                                      bool refine, bool refuse_curves,
                                                      cudaStream_t stream);
// The same over points already in a device buffer (rows of x, y, z), which
// the grid keeps as its points in input order instead of a copy.
template <typename Scalar>
std::unique_ptr<DeviceGrid<Scalar>> build_device_grid(DeviceBuffer<Scalar> xyz, int64_t n,
                                                      int target, bool refine, bool refuse_curves,
                                                      cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
