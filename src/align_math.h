// The host arithmetic of an alignment (knn_mesh_align): the eigenvectors of
// small symmetric matrices (cyclic Jacobi, a fixed order of rotations, so
// the same bits on every backend), rigid motions as 3 x 3 rotations and
// translations, and the exact rotation of a small angle vector. All in
// double; no state.
#pragma once

#include <array>
#include <cmath>

namespace knn {
namespace align {

using Vec3 = std::array<double, 3>;
using Mat3 = std::array<double, 9>;  // row-major

// x -> rotation x + translation.
struct Motion {
  Mat3 rotation{1, 0, 0, 0, 1, 0, 0, 0, 1};
  Vec3 translation{0, 0, 0};
};

inline double dot(const Vec3& a, const Vec3& b) {
  return (a[0] * b[0] + a[1] * b[1]) + a[2] * b[2];
}
inline Vec3 cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
inline Vec3 apply(const Mat3& r, const Vec3& x) {
  return {dot({r[0], r[1], r[2]}, x), dot({r[3], r[4], r[5]}, x), dot({r[6], r[7], r[8]}, x)};
}
inline Mat3 multiply(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      c[3 * i + j] = (a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j]) + a[3 * i + 2] * b[6 + j];
  return c;
}

// The eigen-decomposition of the symmetric N x N matrix a (row-major; only
// read): values ascending, vectors[k] the unit eigenvector of values[k].
// Cyclic Jacobi, rows then columns, until the off-diagonal part vanishes
// against the diagonal (or 100 sweeps).
template <int N>
void symmetric_eigen(const std::array<double, N * N>& a, std::array<double, N>& values,
                     std::array<std::array<double, N>, N>& vectors) {
  std::array<double, N* N> m = a;
  std::array<double, N * N> v{};
  for (int i = 0; i < N; ++i) v[i * N + i] = 1.0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0, diagonal = 0.0;
    for (int i = 0; i < N; ++i) {
      diagonal += m[i * N + i] * m[i * N + i];
      for (int j = i + 1; j < N; ++j) off += m[i * N + j] * m[i * N + j];
    }
    if (!(off > 1e-36 * diagonal)) break;
    for (int p = 0; p < N; ++p)
      for (int q = p + 1; q < N; ++q) {
        const double apq = m[p * N + q];
        if (apq == 0.0) continue;
        const double theta = (m[q * N + q] - m[p * N + p]) / (2.0 * apq);
        const double t =
            (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (int k = 0; k < N; ++k) {  // columns p and q
          const double mkp = m[k * N + p], mkq = m[k * N + q];
          m[k * N + p] = c * mkp - s * mkq;
          m[k * N + q] = s * mkp + c * mkq;
        }
        for (int k = 0; k < N; ++k) {  // rows p and q
          const double mpk = m[p * N + k], mqk = m[q * N + k];
          m[p * N + k] = c * mpk - s * mqk;
          m[q * N + k] = s * mpk + c * mqk;
        }
        for (int k = 0; k < N; ++k) {
          const double vkp = v[k * N + p], vkq = v[k * N + q];
          v[k * N + p] = c * vkp - s * vkq;
          v[k * N + q] = s * vkp + c * vkq;
        }
      }
  }
  std::array<int, N> order;
  for (int i = 0; i < N; ++i) order[i] = i;
  // Insertion sort by value, stable: the same order for equal values.
  for (int i = 1; i < N; ++i)
    for (int j = i; j > 0 && m[order[j] * N + order[j]] < m[order[j - 1] * N + order[j - 1]]; --j)
      std::swap(order[j], order[j - 1]);
  for (int k = 0; k < N; ++k) {
    values[k] = m[order[k] * N + order[k]];
    for (int i = 0; i < N; ++i) vectors[k][i] = v[i * N + order[k]];
  }
}

// The rotation by |w| radians about w (Rodrigues), exact for any angle.
inline Mat3 rotation_of(const Vec3& w) {
  const double angle = std::sqrt(dot(w, w));
  if (!(angle > 0.0)) return Motion{}.rotation;
  const Vec3 k{w[0] / angle, w[1] / angle, w[2] / angle};
  const double c = std::cos(angle), s = std::sin(angle), t = 1.0 - c;
  return {t * k[0] * k[0] + c,        t * k[0] * k[1] - s * k[2], t * k[0] * k[2] + s * k[1],
          t * k[1] * k[0] + s * k[2], t * k[1] * k[1] + c,        t * k[1] * k[2] - s * k[0],
          t * k[2] * k[0] - s * k[1], t * k[2] * k[1] + s * k[0], t * k[2] * k[2] + c};
}

// The nearest rotation of Gram-Schmidt's order: row 0 normalised, row 1
// made orthogonal to it and normalised, row 2 their cross product. Keeps
// the drift of repeated products from growing.
inline Mat3 orthonormalised(const Mat3& r) {
  Vec3 r0{r[0], r[1], r[2]}, r1{r[3], r[4], r[5]};
  const double n0 = std::sqrt(dot(r0, r0));
  for (double& x : r0) x /= n0;
  const double along = dot(r0, r1);
  for (int i = 0; i < 3; ++i) r1[i] -= along * r0[i];
  const double n1 = std::sqrt(dot(r1, r1));
  for (double& x : r1) x /= n1;
  const Vec3 r2 = cross(r0, r1);
  return {r0[0], r0[1], r0[2], r1[0], r1[1], r1[2], r2[0], r2[1], r2[2]};
}

}  // namespace align
}  // namespace knn
