// The library's one definition of the squared distance, and float helpers
// that must give the same bits on the CPU and the GPU.
//
// The contract fixes the squared distance as ((d0*d0 + d1*d1) + d2*d2) + ...
// with every operation rounded to the index's scalar type (float32, or
// float64 for the _f64 entry points) and no fused multiply-add. On the
// device the _rn intrinsics forbid contraction; host code is compiled with
// -ffp-contract=off (see CMakeLists.txt), so plain operators are exact there.
#pragma once

#include <cstdint>
#include <cstring>

#include "host_device.h"

namespace knn {

// mul_rn, add_rn and sub_rn: one rounding each, never fused, in float and
// in double. The _rn intrinsics forbid contraction on the device; the host
// compiler is told not to contract (-ffp-contract=off).
#if defined(__CUDA_ARCH__)
#define KNN_ROUNDED_OP(name, op, float_intrinsic, double_intrinsic)     \
  KNN_HD float name(float a, float b) { return float_intrinsic(a, b); } \
  KNN_HD double name(double a, double b) { return double_intrinsic(a, b); }
#else
#define KNN_ROUNDED_OP(name, op, float_intrinsic, double_intrinsic) \
  KNN_HD float name(float a, float b) { return a op b; }            \
  KNN_HD double name(double a, double b) { return a op b; }
#endif
KNN_ROUNDED_OP(mul_rn, *, __fmul_rn, __dmul_rn)
KNN_ROUNDED_OP(add_rn, +, __fadd_rn, __dadd_rn)
KNN_ROUNDED_OP(sub_rn, -, __fsub_rn, __dsub_rn)
#undef KNN_ROUNDED_OP

template <typename Scalar>
KNN_HD Scalar square_of_difference(Scalar q, Scalar p) {
  const Scalar d = sub_rn(q, p);
  return mul_rn(d, d);
}

// Squared distance between two points of `dim` coordinates, in the fixed order.
template <typename Scalar>
KNN_HD Scalar squared_distance(const Scalar* q, const Scalar* p, int dim) {
  Scalar sum = square_of_difference(q[0], p[0]);
  for (int i = 1; i < dim; ++i) sum = add_rn(sum, square_of_difference(q[i], p[i]));
  return sum;
}

template <typename Scalar>
KNN_HD Scalar squared_distance3(Scalar qx, Scalar qy, Scalar qz, Scalar px, Scalar py, Scalar pz) {
  return add_rn(add_rn(square_of_difference(qx, px), square_of_difference(qy, py)),
                square_of_difference(qz, pz));
}

KNN_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

// A key whose unsigned order is the float order: radix sorts on it sort by
// value. -0.0 maps to the key of +0.0 because the two compare equal, and the
// tree build must treat them as a tie (broken by index) on both backends.
KNN_HD uint32_t ordered_float_key(float f) {
  uint32_t u = float_bits(f);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

KNN_HD uint64_t double_bits(double f) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(f));
#else
  uint64_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

// The float64 twin of ordered_float_key.
KNN_HD uint64_t ordered_double_key(double f) {
  uint64_t u = double_bits(f);
  if (u == 0x8000000000000000ull) u = 0;
  return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}

KNN_HD bool is_finite_float(float f) { return (float_bits(f) & 0x7f800000u) != 0x7f800000u; }
KNN_HD bool is_finite_float(double f) {
  return (double_bits(f) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

}  // namespace knn
