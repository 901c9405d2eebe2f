// The statistics of one neighbourhood (include/knn_gpgpu_stats.h): the
// normal and surface variation by principal components, the mean and the
// k-th distance to the nearest others. The library's one definition,
// compiled by every engine for host and device, over float or double points.
//
// Everything is computed in float64 whatever the points' scalar, with every
// operation one rounding (common/float_math.h: +, -, *, / and sqrt are
// correctly rounded on both sides and never fused), in the order written
// here, so the OpenMP and CUDA engines give the same bits. No library call
// whose result may differ between host and device (no atan2, no cbrt, no
// trigonometry): the eigenvectors come from Jacobi rotations, which need
// only a square root and a division.
#pragma once

#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"

namespace knn {

enum class NeighbourhoodStatistic {
  Normals,       // lists of k (the point itself first): normal, curvature
  MeanDistance,  // lists of k + 1: mean distance to the k nearest others
  KthDistance    // lists of k + 1: distance to the k-th nearest other
};

// A normal before orientation (unit, in float64) and its surface variation.
struct NeighbourhoodShape {
  double normal[3];
  double curvature;
};

namespace neighbourhood_detail {

KNN_HD double magnitude(double x) { return x < 0 ? -x : x; }

// 2^e as a double, for -1022 <= e <= 1023 (exact: built from its bits).
KNN_HD double power_of_two(int e) {
  return scalar_of_bits<double>(static_cast<uint64_t>(e + 1023) << 52);
}

// The binary exponent e of x > 0 with x in [2^(e-1), 2^e), from its bits
// (subnormals included), so host and device agree without frexp.
KNN_HD int binary_exponent(double x) {
  const uint64_t bits = bits_of(x);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  if (field != 0) return field - 1022;
  uint64_t mantissa = bits & ((uint64_t{1} << 52) - 1);
  int e = -1022;
  while (mantissa < (uint64_t{1} << 52)) {
    mantissa <<= 1;
    --e;
  }
  return e + 1;
}

// x * 2^-e in two exact steps (each factor a normal power of two), so that
// any exponent of a finite double can be undone.
KNN_HD double scale_down(double x, int e) {
  const int half = -e / 2;
  return mul_rn(mul_rn(x, power_of_two(half)), power_of_two(-e - half));
}

// One Jacobi rotation of the symmetric 3 x 3 matrix a (and the columns of v)
// that zeroes a[p][q] (Numerical Recipes' form, every step rounded).
KNN_HD void rotate(double a[3][3], double v[3][3], int p, int q) {
  const double apq = a[p][q];
  const double theta = div_rn(sub_rn(a[q][q], a[p][p]), mul_rn(2.0, apq));
  const double size = magnitude(theta);
  // Beyond 2^500 theta^2 would overflow; t is then 1 / (2 theta) to rounding.
  double t = size > 0x1p500 ? div_rn(1.0, mul_rn(2.0, size))
                            : div_rn(1.0, add_rn(size, sqrt_rn(add_rn(mul_rn(size, size), 1.0))));
  if (theta < 0) t = -t;
  const double c = div_rn(1.0, sqrt_rn(add_rn(mul_rn(t, t), 1.0)));
  const double s = mul_rn(t, c);
  a[p][p] = sub_rn(a[p][p], mul_rn(t, apq));
  a[q][q] = add_rn(a[q][q], mul_rn(t, apq));
  a[p][q] = a[q][p] = 0.0;
  for (int r = 0; r < 3; ++r) {
    if (r != p && r != q) {
      const double arp = a[r][p], arq = a[r][q];
      a[r][p] = a[p][r] = sub_rn(mul_rn(c, arp), mul_rn(s, arq));
      a[r][q] = a[q][r] = add_rn(mul_rn(s, arp), mul_rn(c, arq));
    }
    const double vrp = v[r][p], vrq = v[r][q];
    v[r][p] = sub_rn(mul_rn(c, vrp), mul_rn(s, vrq));
    v[r][q] = add_rn(mul_rn(s, vrp), mul_rn(c, vrq));
  }
}

// max over j and c of |d_j[c] - mean[c]| (each difference rounded), from
// the lowest and highest d_j[c] of each coordinate alone: a rounded
// subtraction is monotone in d, so over a coordinate's d_j the magnitude is
// largest at its lowest or its highest d: the same value as the maximum over
// every j, without a second pass over the points.
KNN_HD double largest_deviation(const double lowest[3], const double highest[3],
                                const double mean[3]) {
  double largest = 0.0;
  for (int c = 0; c < 3; ++c) {
    const double below = magnitude(sub_rn(lowest[c], mean[c]));
    const double above = magnitude(sub_rn(highest[c], mean[c]));
    if (below > largest) largest = below;
    if (above > largest) largest = above;
  }
  return largest;
}

}  // namespace neighbourhood_detail

// The cyclic Jacobi sweeps of the header: pairs (0,1), (0,2), (1,2); an entry
// is rotated away when its magnitude exceeds 2^-60 times the larger of its
// two diagonal entries; at most kJacobiSweeps sweeps, ending after one that
// rotated nothing. a becomes diagonal (the eigenvalues), v's columns the
// eigenvectors.
constexpr int kJacobiSweeps = 64;

KNN_HD void jacobi_eigen3(double a[3][3], double v[3][3]) {
  using neighbourhood_detail::magnitude;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) v[r][c] = r == c ? 1.0 : 0.0;
  constexpr int kPairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  for (int sweep = 0; sweep < kJacobiSweeps; ++sweep) {
    bool rotated = false;
    for (const auto& pair : kPairs) {
      const int p = pair[0], q = pair[1];
      const double larger =
          magnitude(a[p][p]) > magnitude(a[q][q]) ? magnitude(a[p][p]) : magnitude(a[q][q]);
      if (!(magnitude(a[p][q]) > mul_rn(0x1p-60, larger))) continue;
      neighbourhood_detail::rotate(a, v, p, q);
      rotated = true;
    }
    if (!rotated) break;
  }
}

// The normal (before orientation) and surface variation of the m >= 1 points
// point(0) .. point(m - 1), each a pointer to 3 scalars, in list order
// (point(0) the nearest: the point itself or a point equal to it).
template <typename Scalar, typename PointAt>
KNN_HD NeighbourhoodShape neighbourhood_shape(int64_t m, PointAt point) {
  using namespace neighbourhood_detail;
  const Scalar* origin = point(0);
  const double o[3] = {double(origin[0]), double(origin[1]), double(origin[2])};
  // The mean of d_j = q_j - q_1, and the range of each coordinate of the d_j.
  double mean[3] = {0.0, 0.0, 0.0};
  double lowest[3], highest[3];
  for (int64_t j = 0; j < m; ++j) {
    const Scalar* q = point(j);
    for (int c = 0; c < 3; ++c) {
      const double d = sub_rn(double(q[c]), o[c]);
      mean[c] = add_rn(mean[c], d);
      lowest[c] = j == 0 || d < lowest[c] ? d : lowest[c];
      highest[c] = j == 0 || d > highest[c] ? d : highest[c];
    }
  }
  const double count = double(m);
  for (int c = 0; c < 3; ++c) mean[c] = div_rn(mean[c], count);
  // The largest |e_j| component, e_j = d_j - mean, whose power of two scales
  // the e_j.
  const double largest = largest_deviation(lowest, highest, mean);
  NeighbourhoodShape shape{{0.0, 0.0, 1.0}, 0.0};
  if (largest == 0.0) return shape;  // all points equal (or m = 1)
  const int exponent = binary_exponent(largest);
  double a[3][3] = {{0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}};
  for (int64_t j = 0; j < m; ++j) {
    const Scalar* q = point(j);
    double e[3];
    for (int c = 0; c < 3; ++c)
      e[c] = scale_down(sub_rn(sub_rn(double(q[c]), o[c]), mean[c]), exponent);
    for (int r = 0; r < 3; ++r)
      for (int c = r; c < 3; ++c) a[r][c] = add_rn(a[r][c], mul_rn(e[r], e[c]));
  }
  a[1][0] = a[0][1];
  a[2][0] = a[0][2];
  a[2][1] = a[1][2];
  double v[3][3];
  jacobi_eigen3(a, v);
  int low = 0;
  for (int c = 1; c < 3; ++c)
    if (a[c][c] < a[low][low]) low = c;
  // Rounding may leave an eigenvalue of a flat set a little below 0.
  const double l[3] = {a[0][0] > 0 ? a[0][0] : 0.0, a[1][1] > 0 ? a[1][1] : 0.0,
                       a[2][2] > 0 ? a[2][2] : 0.0};
  const double sum = add_rn(add_rn(l[0], l[1]), l[2]);
  shape.curvature = sum > 0 ? div_rn(l[low], sum) : 0.0;
  const double n[3] = {v[0][low], v[1][low], v[2][low]};
  const double length =
      sqrt_rn(add_rn(add_rn(mul_rn(n[0], n[0]), mul_rn(n[1], n[1])), mul_rn(n[2], n[2])));
  int big = 0;
  for (int c = 1; c < 3; ++c)
    if (magnitude(n[c]) > magnitude(n[big])) big = c;
  const double sign = n[big] < 0 ? -1.0 : 1.0;
  for (int c = 0; c < 3; ++c) shape.normal[c] = div_rn(mul_rn(sign, n[c]), length);
  return shape;
}

// dot(n, v - p) of the header's orientation rule, in float64:
// ((n_x (v_x - p_x) + n_y (v_y - p_y)) + n_z (v_z - p_z)).
template <typename Scalar>
KNN_HD double facing(const Scalar* normal, const Scalar* viewpoint, const Scalar* p) {
  double sum = 0.0;
  for (int c = 0; c < 3; ++c) {
    const double term = mul_rn(double(normal[c]), sub_rn(double(viewpoint[c]), double(p[c])));
    sum = c == 0 ? term : add_rn(sum, term);
  }
  return sum;
}

// The mean Euclidean distance to the m nearest others, from the squared
// distances of a list whose entry 0 is the point itself (distance 0) and
// entries 1 .. m the others: square roots in float64 summed nearest first,
// divided by m; 0 when m is 0.
template <typename Scalar>
KNN_HD double mean_other_distance(const Scalar* sq_distances, int64_t m) {
  if (m == 0) return 0.0;
  double sum = 0.0;
  for (int64_t j = 1; j <= m; ++j) sum = add_rn(sum, sqrt_rn(double(sq_distances[j])));
  return div_rn(sum, double(m));
}

// The statistic of point i (what, over the n points of `points`, rows of
// x, y, z) from its list of list_k entries, nearest first (indices, and
// squared distances in the points' scalar): writes value[0 .. 2] and
// *curvature (if not null) for normals, else value[0]. Normals are rounded
// to Scalar, then, with a viewpoint, negated where facing() is negative.
template <typename Scalar>
KNN_HD void write_statistic(NeighbourhoodStatistic what, int k, int list_k, int64_t n,
                            const Scalar* points, const int32_t* indices,
                            const Scalar* sq_distances, int64_t i, Scalar* value, Scalar* curvature,
                            const Scalar* viewpoint) {
  if (what == NeighbourhoodStatistic::Normals) {
    const int64_t m = n < list_k ? n : list_k;
    const NeighbourhoodShape shape =
        neighbourhood_shape<Scalar>(m, [&](int64_t j) { return points + 3 * int64_t{indices[j]}; });
    for (int c = 0; c < 3; ++c) value[c] = Scalar(shape.normal[c]);
    if (viewpoint && facing(value, viewpoint, points + 3 * i) < 0)
      for (int c = 0; c < 3; ++c) value[c] = -value[c];
    if (curvature) *curvature = Scalar(shape.curvature);
    return;
  }
  const int64_t others = n - 1 < k ? n - 1 : k;
  if (what == NeighbourhoodStatistic::MeanDistance) {
    *value = Scalar(mean_other_distance(sq_distances, others));
    return;
  }
  *value = others < k ? Scalar(HUGE_VAL) : Scalar(sqrt_rn(double(sq_distances[k])));
}

}  // namespace knn
