// The CUDA engine's interface to its backend (cuda/cuda_backend.cpp, what the
// rest of the library sees) and to the engine's tests. Plain C++ (no CUDA
// types), so that the backend compiles with the host compiler; a build
// without CUDA links cuda/no_cuda/no_cuda_engine.cpp instead, whose functions
// report no device.
// All functions throw knn::Error on failure and use the calling thread's
// current device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <memory>

#include "../common/kdtree_layout.h"
#include "../common/non_copyable.h"
#include "../engine/device_budget.h"
#include "../engine/index_engine.h"
#include "core/memory_model.h"

namespace knn {
namespace cuda {

// Number of usable devices; 0 without a driver, a device, or CUDA support.
int device_count();
void set_device(int device);
int current_device();        // -1 when there is none
size_t free_device_bytes();  // 0 when there is no device

// What a call may allocate on the current device, the one budget of every
// GPU plan (engine/device_budget.h): call_limit (device_memory_limit; 0:
// none), else KNN_DEVICE_MEMORY_LIMIT, never more than the device's free
// memory less the margin. 0 bytes without a device. A malformed
// KNN_DEVICE_MEMORY_LIMIT throws KNN_ERR_INVALID_ARGUMENT.
inline DeviceBudget device_budget(size_t call_limit) {
  return device_budget_of(call_limit, std::getenv(kDeviceMemoryLimitVar), free_device_bytes());
}

// ---- Tree build (device bytes: memory_model.h) ----------------------------
// Builds the tree of n host points into the host array `tree`.
void build_kdtree(const Point* points, int64_t n, Node* tree);

// ---- Classic queries: the tree's points on the device -------------------
// Host threads that copy between the caller's arrays and pinned staging.
constexpr int kHostCopyThreads = 8;

// A classic tree on the current device, for the engines that answer its
// queries: the tree's own heap layout serves no search (src/query_planner.cpp
// builds the grid or the bucket kd-tree of its points and queries that).
class DeviceTree : NonCopyable {
 public:
  // Uploads a host Node array of n nodes whose root splits on root_dim; with
  // `check`, validates it on the device as omp::check_tree does on the CPU
  // (same first defect, same message; throws KNN_ERR_INVALID_TREE).
  DeviceTree(const Node* tree, int64_t n, int root_dim, bool check);
  ~DeviceTree();

  int64_t size() const;

  // The tree's points as an index engine of the current device, from the
  // nodes already there: the points take their input order back from the
  // nodes' ids, so the engine answers with the same indices (Node.id) and
  // the same ties as the tree, and keeps them as its points in input order
  // (no copy). The grid (cuda_index.h build_grid_index; nullptr when the
  // points make a poor grid) or the bucket kd-tree (build_kdtree_index).
  std::unique_ptr<IndexEngine> grid_of_points(const IndexParams& params) const;
  std::unique_ptr<IndexEngine> kdtree_of_points(const IndexParams& params) const;

 private:
  struct Impl;
  [[maybe_unused]] Impl* impl_;  // unused by the stubs of a build without CUDA
};

}  // namespace cuda
}  // namespace knn
