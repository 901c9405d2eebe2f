// The engines' device form of a 3-D point with its index, so that one load
// brings a whole point. float: (x, y, z, id) in one float4, the id's bits in
// w (one 16-byte load; the classic engine reads it through coord/id_of).
// double: DevicePoint3<double>, (x, y) and (z, id bits) in two double2 (32
// bytes, two 16-byte loads that stay coalesced across a warp).
#pragma once

#include <cstdint>

namespace knn {
namespace cuda {

__device__ __forceinline__ float coord(const float4& v, int dim) {
  return dim == 0 ? v.x : (dim == 1 ? v.y : v.z);
}

__device__ __forceinline__ int32_t id_of(const float4& v) { return __float_as_int(v.w); }

// Stored: the device type; make/load/x/y/z/id: the same operations for
// every scalar type, so that a kernel templated on Scalar reads its points
// through DevicePoint3<Scalar> alone.
template <typename Scalar>
struct DevicePoint3;

template <>
struct DevicePoint3<float> {
  using Stored = float4;
  static __device__ __forceinline__ Stored make(float x, float y, float z, int32_t id) {
    return make_float4(x, y, z, __int_as_float(id));
  }
  static __device__ __forceinline__ Stored load(const Stored* p) { return __ldg(p); }
  static __device__ __forceinline__ float x(const Stored& v) { return v.x; }
  static __device__ __forceinline__ float y(const Stored& v) { return v.y; }
  static __device__ __forceinline__ float z(const Stored& v) { return v.z; }
  static __device__ __forceinline__ int32_t id(const Stored& v) { return id_of(v); }
};

template <>
struct DevicePoint3<double> {
  struct Stored {
    double2 xy;
    double2 z_id;  // the id's bits in the second half
  };
  static __device__ __forceinline__ Stored make(double x, double y, double z, int32_t id) {
    return Stored{make_double2(x, y), make_double2(z, __longlong_as_double(id))};
  }
  static __device__ __forceinline__ Stored load(const Stored* p) {
    return Stored{__ldg(&p->xy), __ldg(&p->z_id)};
  }
  static __device__ __forceinline__ double x(const Stored& v) { return v.xy.x; }
  static __device__ __forceinline__ double y(const Stored& v) { return v.xy.y; }
  static __device__ __forceinline__ double z(const Stored& v) { return v.z_id.x; }
  static __device__ __forceinline__ int32_t id(const Stored& v) {
    return static_cast<int32_t>(__double_as_longlong(v.z_id.y));
  }
};

}  // namespace cuda
}  // namespace knn
