// The exact point-in-polygon predicate both quadtree engines use, so that
// their answers are identical bit for bit (contract section 4).
//
// Rule (even-odd, crossing count): a ray leaves p = (px, py) towards +x; an
// edge (a, b) counts when
//   (a.y > py) != (b.y > py)        half-open in y: a vertex on the ray's line
//                                    counts as below it, so a ray through a
//                                    vertex counts it once, and horizontal or
//                                    zero-length edges never count;
//   and the crossing lies strictly right of p, i.e. the orientation
//   det = (b.x-a.x)*(py-a.y) - (px-a.x)*(b.y-a.y) is nonzero with the sign of
//   (b.y - a.y).
// p is inside a polygon when the total over all its rings (outer + holes) is
// odd.
//
// Boundary rule: the rule above answers, for every p, exactly what the
// even-odd rule answers for the point p + (e, d) with 0 < d << e infinitely
// small (p nudged right, then a little up): nudging up turns "a.y > py" into
// "a.y > py + d", which is the same test; an edge through p is no longer
// crossed right of the nudged point (det becomes -e*(b.y-a.y)), and other
// edges keep their sign. The nudged point lies on no edge of any polygon, so
// for polygons that tile a region (shared edges and vertices) a point of the
// region's interior is inside exactly one tile, whether it sits on a shared
// edge, a shared vertex or a horizontal edge; a point on the boundary belongs
// to the tile to its right, or above when the boundary there is horizontal.
//
// Exactness: the sign of det is decided exactly for float32 inputs, and for
// float64 inputs whose coordinates are all 0 or of magnitude in
// [kMinMagnitude, kMaxMagnitude] below (the _f64 entry points check it), in
// any mix of the two (a float converts to double exactly). det is first
// evaluated in double with an error bound; only when |det| is within the
// bound it is recomputed exactly with floating-point expansions (two-sum,
// and two-product by Dekker splitting, so host and device agree without
// depending on fused multiply-add). The same instructions serve both input
// types: for floats the double arithmetic only has more room.
#pragma once

#include <cstdint>

#include "host_device.h"

// The exact fallback is rare: kept out of line so that the fast path inlines
// into the callers' loops (and, on the device, costs no registers there).
#if defined(__CUDACC__)
#define KNN_PIP_COLD __host__ __device__ __noinline__ inline
#elif defined(__GNUC__) || defined(__clang__)
#define KNN_PIP_COLD __attribute__((noinline)) inline
#elif defined(_MSC_VER)
#define KNN_PIP_COLD __declspec(noinline) inline
#else
#define KNN_PIP_COLD inline
#endif

namespace knn {
namespace pip {

// The range of float64 coordinates the exact predicate accepts (the bounds
// of float32 lie inside it). Why these bounds:
//  - no overflow: coordinates of magnitude <= 2^500 have differences <= 2^501
//    (their Dekker split scales them by 2^27 + 1), products of differences
//    <= 2^1002, and every partial sum of the exact expansion below stays
//    under 2^1006;
//  - no underflow: a nonzero double of magnitude >= 2^-485 is a multiple of
//    2^-537 (its last significant bit), so are the differences, their two-sum
//    parts and Dekker halves, and every product of two of them is a multiple
//    of 2^-1074, the smallest double: each is representable once it has at
//    most 53 significant bits, subnormal or not, so the error-free
//    transformations stay error free and the filter's bound below holds.
constexpr double kMaxMagnitude = 0x1p500;   // about 3.3e150
constexpr double kMinMagnitude = 0x1p-485;  // about 1.0e-146

// Whether a float64 coordinate lies in that range (0 included).
KNN_HD bool in_exact_range(double v) {
  const double magnitude = v < 0.0 ? -v : v;
  return magnitude == 0.0 || (magnitude >= kMinMagnitude && magnitude <= kMaxMagnitude);
}

// The type a mix of point and vertex coordinates is computed in: float when
// both are float, else double.
template <class A, class B>
using Common = decltype(A() + B());

KNN_HD double dadd(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

KNN_HD double dsub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

KNN_HD double dmul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

KNN_HD double dabs(double a) { return a < 0.0 ? -a : a; }

// a + b = sum + err exactly (Knuth's two-sum; no condition on the order).
KNN_HD void two_sum(double a, double b, double& sum, double& err) {
  sum = dadd(a, b);
  const double b_virtual = dsub(sum, a);
  const double a_virtual = dsub(sum, b_virtual);
  err = dadd(dsub(a, a_virtual), dsub(b, b_virtual));
}

// a = hi + lo with hi and lo of at most 26 significant bits each (Dekker).
// No overflow: every value split here is a difference of coordinates or a
// part of one, below 2^130 for floats and 2^501 for doubles in range, and
// 2^501 * (2^27 + 1) is far inside double; nonzero values split are at least
// 2^-537 (see kMinMagnitude), so c is never subnormal.
KNN_HD void split(double a, double& hi, double& lo) {
  const double c = dmul(134217729.0, a);  // 2^27 + 1
  const double a_big = dsub(c, a);
  hi = dsub(c, a_big);
  lo = dsub(a, hi);
}

// a * b = product + err exactly (Dekker's two-product). No underflow: every
// factor is a multiple of 2^-149 (the float grid), or of 2^-537 for doubles
// in range, so every partial product and err are multiples of 2^-1074 with
// at most 53 significant bits: representable.
KNN_HD void two_product(double a, double b, double& product, double& err) {
  product = dmul(a, b);
  double a_hi, a_lo, b_hi, b_lo;
  split(a, a_hi, a_lo);
  split(b, b_hi, b_lo);
  const double err1 = dsub(product, dmul(a_hi, b_hi));
  const double err2 = dsub(err1, dmul(a_lo, b_hi));
  const double err3 = dsub(err2, dmul(a_hi, b_lo));
  err = dsub(dmul(a_lo, b_lo), err3);
}

// Adds q to the nonoverlapping expansion e[0..length) (increasing magnitude,
// zeros removed) and returns the new length (Shewchuk's grow-expansion with
// zero elimination); e needs room for one more component.
KNN_HD int grow_expansion(double* e, int length, double q) {
  int out = 0;
  for (int i = 0; i < length; ++i) {
    double sum, err;
    two_sum(q, e[i], sum, err);
    q = sum;
    if (err != 0.0) e[out++] = err;
  }
  if (q != 0.0) e[out++] = q;
  return out;
}

// Adds (a_hi + a_lo) * (b_hi + b_lo) * sign exactly into the expansion.
KNN_HD int add_exact_product(double* e, int length, double a_hi, double a_lo, double b_hi,
                             double b_lo, double sign) {
  const double a_parts[2] = {a_hi, a_lo};
  const double b_parts[2] = {b_hi, b_lo};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      double product, err;
      two_product(a_parts[i], b_parts[j], product, err);
      length = grow_expansion(e, length, sign * err);
      length = grow_expansion(e, length, sign * product);
    }
  }
  return length;
}

// Exact sign (-1, 0, +1) of (bx-ax)*(py-ay) - (px-ax)*(by-ay), T float or
// double (in range).
template <class T>
KNN_PIP_COLD int exact_orientation_sign(T ax, T ay, T bx, T by, T px, T py) {
  // Each difference is exactly hi + lo in double (two-sum); each product of
  // two such sums is eight exact doubles; the sixteen are summed into a
  // nonoverlapping expansion whose largest component carries the sign.
  double ex_hi, ex_lo, ey_hi, ey_lo, qx_hi, qx_lo, qy_hi, qy_lo;
  two_sum(bx, -static_cast<double>(ax), ex_hi, ex_lo);
  two_sum(py, -static_cast<double>(ay), qy_hi, qy_lo);
  two_sum(px, -static_cast<double>(ax), qx_hi, qx_lo);
  two_sum(by, -static_cast<double>(ay), ey_hi, ey_lo);
  double e[17];
  int length = 0;
  length = add_exact_product(e, length, ex_hi, ex_lo, qy_hi, qy_lo, 1.0);
  length = add_exact_product(e, length, qx_hi, qx_lo, ey_hi, ey_lo, -1.0);
  if (length == 0) return 0;
  return e[length - 1] > 0.0 ? 1 : -1;
}

// Sign of det = (bx-ax)*(py-ay) - (px-ax)*(by-ay): which side of the line
// a->b the point p lies on (+1 left, -1 right, 0 on the line), exact.
template <class T>
KNN_HD int orientation_sign(T ax, T ay, T bx, T by, T px, T py) {
  // Inputs are exact in double. Each of the four differences is rounded once
  // (relative error <= u = 2^-53) and each product once more, so the computed
  // t1, t2 are within ((1+u)^3 - 1)/(1-u)^3 < 3.01u of the exact products,
  // relative; the final subtraction adds at most u * (|t1| + |t2|). The total
  // error is below 4.01u * (|t1| + |t2|); the bound used, 2^-50 = 8u times the
  // rounded sum |t1| + |t2|, is larger still. Underflow: for floats nonzero
  // products are at least 2^-298. For doubles in range every exact result is
  // a multiple of 2^-1074 (see kMinMagnitude), so a subnormal one is exact.
  // When |t1| + |t2| < 2^-1023, each factor of t1 and t2 is below 2^-486 (a
  // nonzero one is at least 2^-537), so the differences and products were
  // exact and det is too; otherwise 2^-50 * (|t1| + |t2|) >= 2^-1073 loses at
  // most 2^-1075, a quarter of itself, when rounded, and still exceeds the
  // error. Ties with the bound, zero included, go to the exact path.
  const double t1 = dmul(dsub(bx, ax), dsub(py, ay));
  const double t2 = dmul(dsub(px, ax), dsub(by, ay));
  const double det = dsub(t1, t2);
  const double bound = dmul(8.881784197001252e-16, dadd(dabs(t1), dabs(t2)));  // 2^-50
  if (det > bound) return 1;
  if (-det > bound) return -1;
  return exact_orientation_sign(ax, ay, bx, by, px, py);
}

// Whether edge (a, b) crosses the ray from p towards +x under the rule above.
// Callers mixing float and double name T = Common<...> (exact conversions).
template <class T>
KNN_HD bool edge_crosses_ray(T ax, T ay, T bx, T by, T px, T py) {
  if ((ay > py) == (by > py)) return false;
  const int side = orientation_sign(ax, ay, bx, by, px, py);
  // The crossing is right of p when det has the sign of (b.y - a.y), which is
  // nonzero here because the edge straddles the ray's line.
  return by > ay ? side > 0 : side < 0;
}

// Parity (0/1) of crossings of the ray from (px, py) towards +x with the ring
// [begin, end) of xy (x, y pairs). The ring closes itself: its last edge runs
// from vertex end-1 back to vertex begin; a closing vertex equal to the first
// adds a zero-length edge, which never counts.
template <class P, class V>
KNN_HD int ring_crossing_parity(P px, P py, const V* xy, int64_t begin, int64_t end) {
  if (end - begin < 2) return 0;
  int parity = 0;
  V ax = xy[2 * (end - 1)];
  V ay = xy[2 * (end - 1) + 1];
  for (int64_t v = begin; v < end; ++v) {
    const V bx = xy[2 * v];
    const V by = xy[2 * v + 1];
    if (edge_crosses_ray<Common<P, V>>(ax, ay, bx, by, px, py)) parity ^= 1;
    ax = bx;
    ay = by;
  }
  return parity;
}

// Inside polygon = odd total parity over its rings [first_ring, end_ring),
// ring r spanning vertices [ring_offsets[r], ring_offsets[r+1]).
template <class P, class V>
KNN_HD bool inside_polygon(P px, P py, const V* xy, const int64_t* ring_offsets, int64_t first_ring,
                           int64_t end_ring) {
  int parity = 0;
  for (int64_t r = first_ring; r < end_ring; ++r)
    parity ^= ring_crossing_parity(px, py, xy, ring_offsets[r], ring_offsets[r + 1]);
  return parity != 0;
}

}  // namespace pip
}  // namespace knn
