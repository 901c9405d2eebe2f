// The point-to-plane normal equations of one alignment step (knn_mesh_align,
// include/knn_gpgpu_mesh.h), defined once for every engine, host and device,
// so that the OpenMP and CUDA engines sum the same terms in the same order
// and the fit is the same transform bit for bit on both.
//
// One step, for the m scan points x_i and the current motion x -> R x + t:
//   p_i  = R x_i + t in double (move_point: each row ((R0 x + R1 y) + R2 z) + t,
//          every operation rounded, no FMA);
//   q_i  = p_i rounded to the mesh's scalar: the point the engine's closest
//          search answers (the closest triangle T_i, squared distance s_i);
//   kept: T_i exists and s_i <= the step's threshold (compared in double:
//          max_correspondence^2, lowered to the nearest-rank order statistic
//          of the s_i within it when a kept fraction trims: trim_position);
//   c_i  = the closest point of T_i to q_i (common/geometry/triangle.h), in
//          double;
//   n_i  = T_i's unit normal (b - a) x (c - a) normalised, in double; a
//          triangle without area uses (p_i - c_i) / |p_i - c_i| instead, and
//          a point on it (p_i = c_i) adds no term (it still counts as kept);
//   u_i  = (p_i - o) / L, o and L the frame's centre and length, so that
//          rotations and translations are of one scale in A;
//   J_i  = [u_i x n_i, n_i] (6), r_i = (c_i - p_i) . n_i;
//   A    = sum J_i J_i^T (21 entries of its upper triangle, row by row),
//   b    = sum J_i r_i, plus the sum of the kept s_i and their count.
// Sums: in double, point by point in point order within blocks of
// kAlignSumBlock points (align_block_sums), then the blocks in order
// (add_block, sum_of_blocks). The solution (w, v) of A (w, v) = b is the small motion
// x -> x + (w / L) x (x - o) + v that best moves the points onto the planes.
//
// Against a point cloud (knn_index_align) the same rows, with c_i the
// nearest index point q_j (kept by its list's squared distance s_i) and n_i
// its caller-given normal (add_cloud_term: normalised in double; a zero or
// non-finite one falls back as a triangle without area does), or without
// normals the three rows of the planes through q_j along x, y and z
// (point-to-point); cloud_block_sums sums them block by block as above.
#pragma once

#include <cmath>
#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"
#include "triangle.h"

namespace knn {
namespace geometry {

constexpr int64_t kAlignSumBlock = 1024;

// The motion of one step and the frame of its normal equations.
struct AlignFrame {
  double rotation[9];  // R, row-major
  double translation[3];
  double centre[3];      // o
  double inverse_scale;  // 1 / L
};

struct AlignSums {
  double normal_matrix[21];  // A's upper triangle, row by row
  double right_side[6];      // b
  double sq_distances;       // sum of the kept s_i
  int64_t kept;
};

KNN_HD AlignSums no_align_sums() {
  AlignSums s;
  for (int k = 0; k < 21; ++k) s.normal_matrix[k] = 0.0;
  for (int k = 0; k < 6; ++k) s.right_side[k] = 0.0;
  s.sq_distances = 0.0;
  s.kept = 0;
  return s;
}

// total += block, entry by entry.
KNN_HD void add_block(AlignSums& total, const AlignSums& block) {
  for (int k = 0; k < 21; ++k)
    total.normal_matrix[k] = add_rn(total.normal_matrix[k], block.normal_matrix[k]);
  for (int k = 0; k < 6; ++k)
    total.right_side[k] = add_rn(total.right_side[k], block.right_side[k]);
  total.sq_distances = add_rn(total.sq_distances, block.sq_distances);
  total.kept += block.kept;
}

// The sums of `count` blocks, added in block order (the engines' blocks,
// wherever each block was summed).
inline AlignSums sum_of_blocks(const AlignSums* blocks, int64_t count) {
  AlignSums total = no_align_sums();
  for (int64_t b = 0; b < count; ++b) add_block(total, blocks[b]);
  return total;
}

template <typename Scalar>
KNN_HD Vec3<double> move_point(const AlignFrame& f, const Scalar* x) {
  const double x0 = static_cast<double>(x[0]), x1 = static_cast<double>(x[1]),
               x2 = static_cast<double>(x[2]);
  double p[3];
  for (int r = 0; r < 3; ++r) {
    const double* row = f.rotation + 3 * r;
    p[r] = add_rn(add_rn(add_rn(mul_rn(row[0], x0), mul_rn(row[1], x1)), mul_rn(row[2], x2)),
                  f.translation[r]);
  }
  return {p[0], p[1], p[2]};
}

template <typename Scalar>
KNN_HD Vec3<Scalar> rounded3(const Vec3<double>& p) {
  return {static_cast<Scalar>(p.x), static_cast<Scalar>(p.y), static_cast<Scalar>(p.z)};
}

template <typename Scalar>
KNN_HD Vec3<double> widened3(const Vec3<Scalar>& p) {
  return {static_cast<double>(p.x), static_cast<double>(p.y), static_cast<double>(p.z)};
}

// The search limit in the mesh's scalar for a threshold in double: rounding
// is monotone, so every s_i <= max_sq is within it.
template <typename Scalar>
KNN_HD Scalar search_limit(double max_sq) {
  return static_cast<Scalar>(max_sq);
}

// The sorted position of the trimming threshold among `measured` > 0
// squared distances: the nearest rank ceil(fraction * measured) - 1,
// clamped to [0, measured - 1]. Every point at the value there is kept (ties
// may keep a few more than the fraction).
inline int64_t trim_position(double fraction, int64_t measured) {
  const double rank = std::ceil(mul_rn(fraction, static_cast<double>(measured)));
  int64_t position = static_cast<int64_t>(rank) - 1;
  if (position < 0) position = 0;
  if (position > measured - 1) position = measured - 1;
  return position;
}

// Adds the row of one plane: the moved point p (double) against the plane
// through `target` with unit normal n: J = [u x n, n], r = (target - p) . n.
KNN_HD void add_plane_row(AlignSums& s, const AlignFrame& f, const Vec3<double>& p,
                          const Vec3<double>& target, const Vec3<double>& n) {
  const Vec3<double> u = {mul_rn(sub_rn(p.x, f.centre[0]), f.inverse_scale),
                          mul_rn(sub_rn(p.y, f.centre[1]), f.inverse_scale),
                          mul_rn(sub_rn(p.z, f.centre[2]), f.inverse_scale)};
  const Vec3<double> turn = cross3(u, n);
  const double j[6] = {turn.x, turn.y, turn.z, n.x, n.y, n.z};
  const double r = dot3(sub3(target, p), n);
  int k = 0;
  for (int row = 0; row < 6; ++row) {
    for (int col = row; col < 6; ++col, ++k)
      s.normal_matrix[k] = add_rn(s.normal_matrix[k], mul_rn(j[row], j[col]));
    s.right_side[row] = add_rn(s.right_side[row], mul_rn(j[row], r));
  }
}

// Adds the plane row of p against `target` along n (double, any length):
// n normalised; a zero or non-finite n uses (p - target) / |p - target|
// instead, and a point on its target (p = target) adds no row.
KNN_HD void add_plane_row_along(AlignSums& s, const AlignFrame& f, const Vec3<double>& p,
                                const Vec3<double>& target, Vec3<double> n) {
  double length = sqrt_rn(dot3(n, n));
  if (!(length > 0.0) || !is_finite_float(length)) {
    n = sub3(p, target);
    length = sqrt_rn(dot3(n, n));
    if (!(length > 0.0)) return;
  }
  n = {div_rn(n.x, length), div_rn(n.y, length), div_rn(n.z, length)};
  add_plane_row(s, f, p, target, n);
}

// Adds the term of the point p (moved, in double), whose closest point on
// triangle (a, b, c) is `closest` at squared distance sq.
template <typename Scalar>
KNN_HD void add_point_term(AlignSums& s, const AlignFrame& f, const Vec3<double>& p,
                           const Vec3<Scalar>& a, const Vec3<Scalar>& b, const Vec3<Scalar>& c,
                           const TrianglePoint<Scalar>& at) {
  s.sq_distances = add_rn(s.sq_distances, static_cast<double>(at.sq_distance));
  s.kept += 1;
  const Vec3<double> da = widened3(a);
  const Vec3<double> n = cross3(sub3(widened3(b), da), sub3(widened3(c), da));
  add_plane_row_along(s, f, p, widened3(at.closest), n);
}

// Adds the term of the point p (moved, in double) against its nearest
// point `target` of a point cloud (knn_index_align) at squared distance sq
// (the index's): point-to-plane along the target's normal (3 scalars; its
// length does not matter; zero or not finite: along p - target) when
// `normal` is given, else point-to-point: the three rows of the planes
// through the target along x, y and z, in that order, whose sum is
// |target - p|^2 linearised.
template <typename Scalar>
KNN_HD void add_cloud_term(AlignSums& s, const AlignFrame& f, const Vec3<double>& p,
                           const Scalar* target, const Scalar* normal, Scalar sq) {
  s.sq_distances = add_rn(s.sq_distances, static_cast<double>(sq));
  s.kept += 1;
  const Vec3<double> q = {static_cast<double>(target[0]), static_cast<double>(target[1]),
                          static_cast<double>(target[2])};
  if (normal != nullptr) {
    add_plane_row_along(s, f, p, q,
                        {static_cast<double>(normal[0]), static_cast<double>(normal[1]),
                         static_cast<double>(normal[2])});
    return;
  }
  add_plane_row(s, f, p, q, {1.0, 0.0, 0.0});
  add_plane_row(s, f, p, q, {0.0, 1.0, 0.0});
  add_plane_row(s, f, p, q, {0.0, 0.0, 1.0});
}

// The sums of the scan points [first, first + count) (one block) against a
// point cloud, in order: per point its nearest target's index (negative:
// none) and squared distance, for the points kept by max_sq; targets and
// normals (or null) 3 scalars per target point.
template <typename Scalar>
KNN_HD AlignSums cloud_block_sums(const Scalar* points, const int32_t* nearest,
                                  const Scalar* sq_distances, int64_t first, int64_t count,
                                  double max_sq, const AlignFrame& f, const Scalar* targets,
                                  const Scalar* normals) {
  AlignSums s = no_align_sums();
  for (int64_t i = first; i < first + count; ++i) {
    const int32_t j = nearest[i];
    if (j < 0 || !(static_cast<double>(sq_distances[i]) <= max_sq)) continue;
    add_cloud_term(s, f, move_point(f, points + 3 * i), targets + 3 * int64_t{j},
                   normals != nullptr ? normals + 3 * int64_t{j} : nullptr, sq_distances[i]);
  }
  return s;
}

// The sums of the points [first, first + count) (one block), in order:
// points (x, y, z each) and per point its closest triangle's handle
// (negative: none) and squared distance, for the points kept by max_sq.
// corners(handle, a, b, c) gives a triangle's corners in the engine's
// storage.
template <typename Scalar, class Corners>
KNN_HD AlignSums align_block_sums(const Scalar* points, const int32_t* handles,
                                  const Scalar* sq_distances, int64_t first, int64_t count,
                                  double max_sq, const AlignFrame& f, const Corners& corners) {
  AlignSums s = no_align_sums();
  for (int64_t i = first; i < first + count; ++i) {
    const int32_t handle = handles[i];
    if (handle < 0 || !(static_cast<double>(sq_distances[i]) <= max_sq)) continue;
    const Vec3<double> p = move_point(f, points + 3 * i);
    Vec3<Scalar> a, b, c;
    corners(handle, a, b, c);
    const TrianglePoint<Scalar> at = closest_point_on_triangle(rounded3<Scalar>(p), a, b, c);
    add_point_term(s, f, p, a, b, c, at);
  }
  return s;
}

}  // namespace geometry
}  // namespace knn
