// The sign of a signed distance (contract section 6), defined once for every
// engine: the pseudonormal test for closed, consistently oriented meshes and
// the generalized winding number for the others.
//
// Both are evaluated in double whatever the mesh's scalar, with rounded ops
// only (common/float_math.h) and an arctangent of our own (the device's and
// the host's atan2 differ in their last bits), so every engine decides the
// same sign.
#pragma once

#include "../float_math.h"
#include "../host_device.h"
#include "triangle.h"

namespace knn {
namespace geometry {

constexpr double kPi = 3.14159265358979323846;

// atan(z) for z in [0, 1], to about 1e-13: reduced to |z| <= tan(pi / 8) by
// atan(z) = pi/4 + atan((z - 1) / (z + 1)), then the odd Taylor series to
// z^31 (|z|^33 / 33 < 1e-13 there), in Horner's order.
KNN_HD double atan_unit(double z) {
  double offset = 0.0;
  if (z > 0.41421356237309503) {
    z = div_rn(sub_rn(z, 1.0), add_rn(z, 1.0));
    offset = kPi / 4;
  }
  const double z2 = mul_rn(z, z);
  double series = 0.0;
  for (int k = 15; k >= 0; --k) {
    const double coefficient = div_rn(k % 2 == 0 ? 1.0 : -1.0, static_cast<double>(2 * k + 1));
    series = add_rn(coefficient, mul_rn(z2, series));
  }
  return add_rn(offset, mul_rn(z, series));
}

// atan2(y, x) in (-pi, pi], from atan_unit; atan2(0, 0) = 0.
KNN_HD double portable_atan2(double y, double x) {
  const double ay = y < 0 ? -y : y, ax = x < 0 ? -x : x;
  if (ax == 0.0 && ay == 0.0) return 0.0;
  double angle = ay <= ax ? atan_unit(div_rn(ay, ax)) : sub_rn(kPi / 2, atan_unit(div_rn(ax, ay)));
  if (x < 0) angle = sub_rn(kPi, angle);
  return y < 0 ? -angle : angle;
}

KNN_HD Vec3<double> to_double3(const Vec3<float>& v) { return {v.x, v.y, v.z}; }
KNN_HD Vec3<double> to_double3(const Vec3<double>& v) { return v; }

KNN_HD double norm3(const Vec3<double>& v) { return sqrt_rn(dot3(v, v)); }

// The solid angle of triangle (a, b, c) seen from q, signed: positive when q
// lies behind the triangle's front face (a -> b -> c counter-clockwise seen
// from the front), as Van Oosterom and Strackee's formula gives it.
KNN_HD double solid_angle(const Vec3<double>& q, const Vec3<double>& a, const Vec3<double>& b,
                          const Vec3<double>& c) {
  const Vec3<double> qa = sub3(a, q), qb = sub3(b, q), qc = sub3(c, q);
  const double la = norm3(qa), lb = norm3(qb), lc = norm3(qc);
  const double numerator = dot3(qa, cross3(qb, qc));
  const double denominator =
      add_rn(add_rn(add_rn(mul_rn(mul_rn(la, lb), lc), mul_rn(dot3(qa, qb), lc)),
                    mul_rn(dot3(qa, qc), lb)),
             mul_rn(dot3(qb, qc), la));
  return mul_rn(2.0, portable_atan2(numerator, denominator));
}

// The far-field solid angle of a cluster of triangles seen from q: its
// area-weighted normal sum (sum of (b - a) x (c - a) / 2) placed at its
// area-weighted centre, N.(centre - q) / |centre - q|^3 (the first term of
// Barill et al.'s expansion, "Fast winding numbers for soups and clouds",
// SIGGRAPH 2018).
KNN_HD double dipole_solid_angle(const Vec3<double>& q, const Vec3<double>& centre,
                                 const Vec3<double>& area_normal) {
  const Vec3<double> d = sub3(centre, q);
  const double r2 = dot3(d, d);
  const double r = sqrt_rn(r2);
  return div_rn(dot3(area_normal, d), mul_rn(r2, r));
}

// A point is inside an open mesh when its winding number (the solid angles'
// sum over 4 pi) is at least one half.
KNN_HD bool winding_says_inside(double solid_angle_sum) { return solid_angle_sum >= 2 * kPi; }

// A point at positive distance from a closed, consistently oriented mesh is
// inside when the vector from its closest point to it points against the
// pseudonormal of the closest feature (Baerentzen and Aanaes, "Signed
// distance computation using the angle weighted pseudonormal", 2005).
template <typename Scalar>
KNN_HD bool pseudonormal_says_inside(const Vec3<Scalar>& q, const Vec3<Scalar>& closest,
                                     const Vec3<Scalar>& pseudonormal) {
  return dot3(sub3(q, closest), pseudonormal) < Scalar(0);
}

}  // namespace geometry
}  // namespace knn
