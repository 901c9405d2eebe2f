// The Morton order of chunks of 3-D points (common/geometry/mesh_bvh.h
// point_order_code, the OpenMP engine's too): answered in that
// order, neighbouring threads walk the same nodes and read the same points,
// in cache. The order changes no answer (each depends on its point alone);
// the mesh queries and the neighbourhood statistics take their chunks in it,
// as the OpenMP engine does (openmp/point_order.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda_support.h"
#include "memory_model.h"

namespace knn {
namespace cuda {

// A box in float64; points outside it order in its border cells.
struct OrderBox {
  double lo[3], hi[3];
};

// The smallest box holding two boxes: the reduction of box_of_points (and
// of the mesh build's centroid box).
struct BoxUnion {
  __host__ __device__ OrderBox operator()(const OrderBox& a, const OrderBox& b) const {
    OrderBox r;
    for (int d = 0; d < 3; ++d) {
      r.lo[d] = fmin(a.lo[d], b.lo[d]);
      r.hi[d] = fmax(a.hi[d], b.hi[d]);
    }
    return r;
  }
};

// The box of n device points (rows of x, y, z), by one CUB reduction on
// `stream`; returns when it is on the host. Empty (lo > hi) when n is 0.
template <typename Scalar>
OrderBox box_of_points(const Scalar* points, int64_t n, cudaStream_t stream);

// Its device memory: memory_model.h kPointOrderBytesPerPoint and
// kPointOrderFixedBytes.
class PointOrder {
 public:
  // Buffers for chunks of up to `capacity` points.
  explicit PointOrder(int64_t capacity);

  // The positions 0 .. count - 1 of the device points (rows of x, y, z)
  // ascending by Morton code in `box` (ties by position), in device memory
  // valid until the next sort; queued on `stream`.
  template <typename Scalar>
  const int32_t* sort(const Scalar* points, int64_t count, const OrderBox& box,
                      cudaStream_t stream);

 private:
  int64_t capacity_;
  DeviceBuffer<uint32_t> codes_, codes_sorted_;
  DeviceBuffer<int32_t> order_, order_sorted_;
  size_t temp_bytes_ = 0;
  DeviceBuffer<unsigned char> temp_;
};

}  // namespace cuda
}  // namespace knn
