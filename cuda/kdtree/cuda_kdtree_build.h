// Device-side kd-tree build, for the engine and for benchmarks that time the
// build with the data already on the device (CUDA types: .cu files only).
#pragma once

#include <cuda_runtime.h>

#include "../../common/kdtree_layout.h"
#include "../core/cuda_support.h"
#include "../core/memory_model.h"

namespace knn {
namespace cuda {

// Device memory of one build of n points (sizes: memory_model.h).
class BuildWorkspace {
 public:
  explicit BuildWorkspace(int64_t n);
  int64_t capacity() const { return n_; }

 private:
  friend void build_kdtree_on_device(const Point*, int64_t, Node*, BuildWorkspace&, cudaStream_t);
  int64_t n_;
  SplitBuildPlan plan_;
  DeviceArena arena_;  // the build's scratch (split_build_scratch_bytes)
};

// Builds the tree of n device points (n = the workspace's capacity) into
// the device array `tree`, on `stream`, and waits for it.
void build_kdtree_on_device(const Point* points, int64_t n, Node* tree, BuildWorkspace& ws,
                            cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
