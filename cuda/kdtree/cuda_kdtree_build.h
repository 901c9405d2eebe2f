// Device-side kd-tree build, for the engine and for benchmarks that time the
// build with the data already on the device (CUDA types: .cu files only).
#pragma once

#include <cuda_runtime.h>

#include "../../common/kdtree_layout.h"
#include "../core/cuda_support.h"

namespace knn {
namespace cuda {

// Entries to the left and right of their node's median in a range of an
// axis array, counted since the range's last segment start (head: the range
// holds one); the build's partition passes scan these.
struct SegmentCounts {
  unsigned head;
  unsigned left, right;
};

// Device memory of one build of n points (sizes: memory_model.h).
class BuildWorkspace {
 public:
  explicit BuildWorkspace(int64_t n);
  int64_t capacity() const { return n_; }

 private:
  friend void build_kdtree_on_device(const Point*, int64_t, Node*, BuildWorkspace&, cudaStream_t);
  int64_t n_;
  DeviceBuffer<float4> axis_[4];               // (x, y, z, id) sorted by each axis, plus a spare
  DeviceBuffer<uint32_t> keys_[2];             // radix sort keys, double-buffered
  DeviceBuffer<int32_t> ids_[2];               // radix sort payload, double-buffered
  DeviceBuffer<SegmentCounts> tile_totals_;    // per partition tile
  DeviceBuffer<SegmentCounts> tile_prefixes_;  // the tiles before each, combined
  DeviceBuffer<float4*> axis_pointers_;        // the three axis arrays, for the last levels
  DeviceBuffer<unsigned char> cub_temp_;
};

// Builds the tree of n device points into the device array `tree`; the work
// is queued on `stream` (no host round trip inside).
void build_kdtree_on_device(const Point* points, int64_t n, Node* tree, BuildWorkspace& ws,
                            cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
