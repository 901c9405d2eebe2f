// The library's one definition of the squared distance, and float helpers
// that must give the same bits on the CPU and the GPU.
//
// The contract fixes the squared distance as ((d0*d0 + d1*d1) + d2*d2) + ...
// with every operation rounded to the index's scalar type (float32, or
// float64 for the _f64 entry points) and no fused multiply-add. On the
// device the _rn intrinsics forbid contraction; host code is compiled with
// -ffp-contract=off (see CMakeLists.txt), so plain operators are exact there.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "host_device.h"

namespace knn {

// mul_rn, add_rn, sub_rn and div_rn: one rounding each, never fused, in float and
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
KNN_ROUNDED_OP(div_rn, /, __fdiv_rn, __ddiv_rn)
#undef KNN_ROUNDED_OP

// The square root, correctly rounded on both sides (IEEE-754 requires it of
// the host's sqrt; the device's _rn intrinsics give the same bits).
#if defined(__CUDA_ARCH__)
KNN_HD float sqrt_rn(float a) { return __fsqrt_rn(a); }
KNN_HD double sqrt_rn(double a) { return __dsqrt_rn(a); }
#else
KNN_HD float sqrt_rn(float a) { return std::sqrt(a); }
KNN_HD double sqrt_rn(double a) { return std::sqrt(a); }
#endif

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

// The gap between the intervals [a_lo, a_hi] and [b_lo, b_hi] (0 where they
// meet), in the point distance's own subtraction: every rounded op is
// monotone, so it is never more than |fl(p - c)| for any c in the first and
// p in the second. The one per-axis bound of every engine's pruning
// (kd-tree boxes, the grid's box, the pairs' node against node).
template <typename Scalar>
KNN_HD Scalar intervals_gap(Scalar a_lo, Scalar a_hi, Scalar b_lo, Scalar b_hi) {
  return a_hi < b_lo ? sub_rn(b_lo, a_hi) : (a_lo > b_hi ? sub_rn(a_lo, b_hi) : Scalar(0));
}

// The gap from the point c to [lo, hi]: the first interval one point.
template <typename Scalar>
KNN_HD Scalar interval_gap(Scalar c, Scalar lo, Scalar hi) {
  return intervals_gap(c, c, lo, hi);
}

// Squared distance between the nearest points of the boxes [a_lo, a_hi] and
// [b_lo, b_hi] (dim coordinates each), in the point distance's own
// operations and order, in the index's scalar type (float, or double):
// every rounded op is monotone, so the result is never more than
// squared_distance(q, p) of any q in the first box and p in the second, and
// pruning only when it is strictly greater than the bound in force is
// exact. An empty box (lo = +inf, hi = -inf) is at +inf.
template <typename Scalar>
KNN_HD Scalar boxes_distance(const Scalar* a_lo, const Scalar* a_hi, const Scalar* b_lo,
                             const Scalar* b_hi, int dim) {
  Scalar sum = Scalar(0);
  for (int d = 0; d < dim; ++d) {
    const Scalar gap = intervals_gap(a_lo[d], a_hi[d], b_lo[d], b_hi[d]);
    sum = d == 0 ? mul_rn(gap, gap) : add_rn(sum, mul_rn(gap, gap));
  }
  return sum;
}

// Squared distance from q to the nearest point of the box [lo, hi]: the
// first box one point.
template <typename Scalar>
KNN_HD Scalar box_distance(const Scalar* q, const Scalar* lo, const Scalar* hi, int dim) {
  return boxes_distance(q, q, lo, hi, dim);
}

// The layout of an IEEE-754 scalar: the unsigned integer of its width, its
// sign bit, the bits of its exponent field and the width of its mantissa.
// The exponent field is every bit between the sign and the mantissa.
template <typename Unsigned, int kMantissa>
struct IeeeLayout {
  using Bits = Unsigned;
  static constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  static constexpr Bits kExponent = kSign - (Bits{1} << kMantissa);
  static constexpr int kMantissaBits = kMantissa;
};
template <typename Scalar>
struct FloatLayout;
template <>
struct FloatLayout<float> : IeeeLayout<uint32_t, 23> {};
template <>
struct FloatLayout<double> : IeeeLayout<uint64_t, 52> {};
static_assert(FloatLayout<float>::kExponent == 0x7f800000u, "binary32's exponent field");
static_assert(FloatLayout<double>::kExponent == 0x7ff0000000000000ull, "binary64's exponent field");
template <typename Scalar>
using FloatBits = typename FloatLayout<Scalar>::Bits;

template <typename Scalar>
KNN_HD FloatBits<Scalar> bits_of(Scalar f) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(Scalar) == 4)
    return __float_as_uint(f);
  else
    return static_cast<uint64_t>(__double_as_longlong(f));
#else
  FloatBits<Scalar> u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

template <typename Scalar>
KNN_HD Scalar scalar_of_bits(FloatBits<Scalar> u) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(Scalar) == 4)
    return __uint_as_float(u);
  else
    return __longlong_as_double(static_cast<long long>(u));
#else
  Scalar f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// A key whose unsigned order is the float order (32 bits for float, 64 for
// double): radix sorts on it sort by value. -0.0 maps to the key of +0.0
// because the two compare equal, and the tree build must treat them as a
// tie (broken by index) on both backends.
template <typename Scalar>
KNN_HD FloatBits<Scalar> ordered_key(Scalar f) {
  constexpr FloatBits<Scalar> kSign = FloatLayout<Scalar>::kSign;
  FloatBits<Scalar> u = bits_of(f);
  if (u == kSign) u = 0;
  return (u & kSign) ? ~u : (u | kSign);
}

// The value of an ordered key: the sign bit set means a non-negative value.
// The key of -0.0 gives +0.0.
template <typename Scalar>
KNN_HD Scalar scalar_from_ordered_key(FloatBits<Scalar> key) {
  constexpr FloatBits<Scalar> kSign = FloatLayout<Scalar>::kSign;
  return scalar_of_bits<Scalar>((key & kSign) ? (key & ~kSign) : ~key);
}

template <typename Scalar>
KNN_HD bool is_finite_float(Scalar f) {
  constexpr FloatBits<Scalar> kExponent = FloatLayout<Scalar>::kExponent;
  return (bits_of(f) & kExponent) != kExponent;
}

}  // namespace knn
