// What the tests of the fits (knn_mesh_align*, knn_index_align*) share: rigid
// transforms built, applied, inverted and compared in double, independently
// of the library, and the parameter and result records of a call.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "knn_gpgpu.h"

namespace knn_align_test {

using Transform = std::array<double, 16>;  // row-major 4 x 4
using V3 = std::array<double, 3>;

inline knn_options options(int backend, int threads = 0) {
  knn_options o;
  knn_options_init(&o);
  o.backend = backend;
  o.threads = threads;
  return o;
}

// The rotation by `angle` about `axis` (any length), then the translation.
inline Transform rigid(V3 axis, double angle, V3 shift) {
  const double len = std::sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
  const double k[3] = {axis[0] / len, axis[1] / len, axis[2] / len};
  const double c = std::cos(angle), s = std::sin(angle), t = 1 - c;
  return {t * k[0] * k[0] + c,
          t * k[0] * k[1] - s * k[2],
          t * k[0] * k[2] + s * k[1],
          shift[0],
          t * k[1] * k[0] + s * k[2],
          t * k[1] * k[1] + c,
          t * k[1] * k[2] - s * k[0],
          shift[1],
          t * k[2] * k[0] - s * k[1],
          t * k[2] * k[1] + s * k[0],
          t * k[2] * k[2] + c,
          shift[2],
          0,
          0,
          0,
          1};
}

inline V3 map_point(const Transform& t, const double* x) {
  V3 y;
  for (int i = 0; i < 3; ++i)
    y[i] = t[4 * i] * x[0] + t[4 * i + 1] * x[1] + t[4 * i + 2] * x[2] + t[4 * i + 3];
  return y;
}

// The inverse of a rigid transform: R^T, -R^T t.
inline Transform inverse(const Transform& t) {
  Transform r{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) r[4 * i + j] = t[4 * j + i];
    r[4 * i + 3] = -(t[i] * t[3] + t[4 + i] * t[7] + t[8 + i] * t[11]);
  }
  r[15] = 1;
  return r;
}

// Points (x, y, z rows) mapped by t.
inline std::vector<double> moved(const std::vector<double>& points, const Transform& t) {
  std::vector<double> out(points.size());
  for (size_t i = 0; i + 2 < points.size(); i += 3) {
    const V3 y = map_point(t, &points[i]);
    std::copy(y.begin(), y.end(), out.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return out;
}

// How far two transforms are apart: the angle of R_a R_b^T, and the largest
// distance between the images of `points` (x, y, z rows).
struct Gap {
  double angle;
  double shift;
};
inline Gap gap(const Transform& a, const Transform& b, const std::vector<double>& points) {
  double trace = 0;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 3; ++k) trace += a[4 * i + k] * b[4 * i + k];
  Gap g{std::acos(std::min(1.0, std::max(-1.0, (trace - 1) / 2))), 0};
  for (size_t i = 0; i + 2 < points.size(); i += 3) {
    const V3 p = map_point(a, &points[i]), q = map_point(b, &points[i]);
    g.shift =
        std::max(g.shift, std::sqrt((p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) +
                                    (p[2] - q[2]) * (p[2] - q[2])));
  }
  return g;
}

inline knn_align_params params_of(double max_correspondence, double fraction, int iterations) {
  knn_align_params p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.max_correspondence = max_correspondence;
  p.kept_fraction = fraction;
  p.max_iterations = iterations;
  return p;
}

// A result record of the right size whose every other byte is 0x5a: what a
// call writes shows, and what a refused call must leave stays comparable.
inline knn_align_result empty_result() {
  knn_align_result r;
  std::memset(&r, 0x5a, sizeof r);
  r.struct_size = sizeof r;
  return r;
}

inline Transform transform_of(const knn_align_result& r) {
  Transform t;
  std::copy(r.transform, r.transform + 16, t.begin());
  return t;
}

}  // namespace knn_align_test
