// The engine's device form of a point: (x, y, z, id) in one float4, the id's
// bits in w, so that one 16-byte load brings a whole point.
#pragma once

#include <cstdint>

namespace knn {
namespace cuda {

__device__ __forceinline__ float coord(const float4& v, int dim) {
  return dim == 0 ? v.x : (dim == 1 ? v.y : v.z);
}

__device__ __forceinline__ int32_t id_of(const float4& v) { return __float_as_int(v.w); }

}  // namespace cuda
}  // namespace knn
