// The oracle of the neighbourhood statistics tests (include/knn_gpgpu_stats.h),
// shared by tests/api/test_neighbourhood_stats.cpp and its GPU twin: the test
// clouds (spheres, planes, cylinders, noisy scans, clusters, offsets and the
// degenerate cases), a brute-force kNN in the index's own squared distance
// (the test flags forbid fused multiply-add), and principal components in
// long double by the closed form of a symmetric 3 x 3 eigenproblem: an
// independent route to the normal the library finds by Jacobi rotations.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "knn_gpgpu.h"

namespace knn_test {

enum class Cloud {
  Sphere,
  Plane,
  Cylinder,
  NoisyScan,
  Clusters,
  Offset,  // a sphere translated by 1e6
  AllEqual,
  Line,
  Duplicates
};

inline const char* cloud_name(Cloud c) {
  switch (c) {
    case Cloud::Sphere: return "Sphere";
    case Cloud::Plane: return "Plane";
    case Cloud::Cylinder: return "Cylinder";
    case Cloud::NoisyScan: return "NoisyScan";
    case Cloud::Clusters: return "Clusters";
    case Cloud::Offset: return "Offset";
    case Cloud::AllEqual: return "AllEqual";
    case Cloud::Line: return "Line";
    case Cloud::Duplicates: return "Duplicates";
  }
  return "?";
}

// n points of x, y, z (as doubles; float tests round them).
inline std::vector<double> make_cloud(Cloud cloud, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> p(static_cast<size_t>(3 * n));
  auto on_sphere = [&](double* q, double r, double cx, double cy, double cz) {
    double x, y, z, l;
    do {
      x = g(rng), y = g(rng), z = g(rng);
      l = std::sqrt(x * x + y * y + z * z);
    } while (l < 1e-3);
    q[0] = cx + r * x / l, q[1] = cy + r * y / l, q[2] = cz + r * z / l;
  };
  for (int64_t i = 0; i < n; ++i) {
    double* q = &p[static_cast<size_t>(3 * i)];
    switch (cloud) {
      case Cloud::Sphere: on_sphere(q, 1.0, 0, 0, 0); break;
      case Cloud::Offset: on_sphere(q, 1.0, 1e6, -2e6, 5e5); break;
      case Cloud::Plane: {  // tilted: z = 0.3 x - 0.2 y + 1
        const double x = u(rng), y = u(rng);
        q[0] = x, q[1] = y, q[2] = 0.3 * x - 0.2 * y + 1;
        break;
      }
      case Cloud::Cylinder: {
        const double t = 3.14159265358979 * u(rng);
        q[0] = std::cos(t), q[1] = std::sin(t), q[2] = 2 * u(rng);
        break;
      }
      case Cloud::NoisyScan: {  // a wavy height field with noise
        const double x = u(rng), y = u(rng);
        q[0] = x, q[1] = y, q[2] = 0.1 * std::sin(3 * x) * std::cos(2 * y) + 1e-3 * g(rng);
        break;
      }
      case Cloud::Clusters: {
        const int c = static_cast<int>(i % 4);
        q[0] = 10.0 * c + 0.05 * g(rng), q[1] = 0.05 * g(rng), q[2] = -3.0 * c + 0.05 * g(rng);
        break;
      }
      case Cloud::AllEqual: q[0] = 0.5, q[1] = -0.25, q[2] = 2.0; break;
      case Cloud::Line: {
        const double t = u(rng);
        q[0] = 1 + 2 * t, q[1] = -t, q[2] = 0.5 * t;
        break;
      }
      case Cloud::Duplicates: {  // 40 distinct points on a sphere, each many times
        std::mt19937_64 at(static_cast<uint64_t>(i % 40) + seed);
        std::normal_distribution<double> h(0.0, 1.0);
        const double x = h(at), y = h(at), z = h(at), l = std::sqrt(x * x + y * y + z * z);
        q[0] = x / l, q[1] = y / l, q[2] = z / l;
        break;
      }
    }
  }
  return p;
}

template <typename Scalar>
std::vector<Scalar> as_scalar(const std::vector<double>& p) {
  return std::vector<Scalar>(p.begin(), p.end());
}

// The library's squared distance in Scalar (each operation rounded).
template <typename Scalar>
Scalar sq_distance(const Scalar* a, const Scalar* b) {
  const Scalar dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
  const Scalar xx = dx * dx, yy = dy * dy, zz = dz * dz;
  const Scalar s = xx + yy;
  return s + zz;
}

// The first `take` of all points by (squared distance, index) from point i.
template <typename Scalar>
std::vector<std::pair<Scalar, int32_t>> nearest(const std::vector<Scalar>& p, int64_t i,
                                                int64_t take) {
  const int64_t n = static_cast<int64_t>(p.size() / 3);
  std::vector<std::pair<Scalar, int32_t>> all(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    all[static_cast<size_t>(j)] = {
        sq_distance(&p[static_cast<size_t>(3 * i)], &p[static_cast<size_t>(3 * j)]),
        static_cast<int32_t>(j)};
  take = std::min(take, n);
  std::partial_sort(all.begin(), all.begin() + take, all.end());
  all.resize(static_cast<size_t>(take));
  return all;
}

struct OracleShape {
  long double normal[3];  // unit, sign arbitrary
  long double l[3];       // ascending eigenvalues of the scatter
  long double curvature;
};

// PCA of the neighbourhood in long double: closed-form eigenvalues
// (trigonometric), the eigenvector of the smallest from the largest cross
// product of two rows of (A - l0 I).
template <typename Scalar>
OracleShape oracle_shape(const std::vector<Scalar>& p,
                         const std::vector<std::pair<Scalar, int32_t>>& list) {
  long double mean[3] = {0, 0, 0};
  for (const auto& e : list)
    for (int c = 0; c < 3; ++c) mean[c] += p[static_cast<size_t>(3 * e.second + c)];
  for (long double& m : mean) m /= static_cast<long double>(list.size());
  long double a[3][3] = {};
  for (const auto& e : list) {
    long double d[3];
    for (int c = 0; c < 3; ++c) d[c] = p[static_cast<size_t>(3 * e.second + c)] - mean[c];
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) a[r][c] += d[r] * d[c];
  }
  OracleShape s{};
  const long double p1 = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2];
  const long double q = (a[0][0] + a[1][1] + a[2][2]) / 3;
  const long double p2 = (a[0][0] - q) * (a[0][0] - q) + (a[1][1] - q) * (a[1][1] - q) +
                         (a[2][2] - q) * (a[2][2] - q) + 2 * p1;
  if (p2 == 0) {
    s.l[0] = s.l[1] = s.l[2] = q;
    s.normal[0] = 0, s.normal[1] = 0, s.normal[2] = 1;
    s.curvature = q > 0 ? 1.0L / 3 : 0;
    return s;
  }
  const long double pp = std::sqrt(p2 / 6);
  long double b[3][3];
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) b[r][c] = (a[r][c] - (r == c ? q : 0)) / pp;
  const long double det = b[0][0] * (b[1][1] * b[2][2] - b[1][2] * b[2][1]) -
                          b[0][1] * (b[1][0] * b[2][2] - b[1][2] * b[2][0]) +
                          b[0][2] * (b[1][0] * b[2][1] - b[1][1] * b[2][0]);
  const long double half = std::max(-1.0L, std::min(1.0L, det / 2));
  const long double phi = std::acos(half) / 3;
  const long double pi = 3.141592653589793238462643383279502884L;
  s.l[2] = q + 2 * pp * std::cos(phi);
  s.l[0] = q + 2 * pp * std::cos(phi + 2 * pi / 3);
  s.l[1] = 3 * q - s.l[0] - s.l[2];
  long double m[3][3];
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m[r][c] = a[r][c] - (r == c ? s.l[0] : 0);
  long double best[3] = {0, 0, 0}, best_len = -1;
  for (int r0 = 0; r0 < 3; ++r0)
    for (int r1 = r0 + 1; r1 < 3; ++r1) {
      const long double x[3] = {m[r0][1] * m[r1][2] - m[r0][2] * m[r1][1],
                                m[r0][2] * m[r1][0] - m[r0][0] * m[r1][2],
                                m[r0][0] * m[r1][1] - m[r0][1] * m[r1][0]};
      const long double len = std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
      if (len > best_len) best_len = len, std::copy(x, x + 3, best);
    }
  for (int c = 0; c < 3; ++c) s.normal[c] = best[c] / best_len;
  const long double sum = std::max(s.l[0], 0.0L) + s.l[1] + s.l[2];
  s.curvature = sum > 0 ? std::max(s.l[0], 0.0L) / sum : 0;
  return s;
}

// The angle between two lines (sign ignored), in radians.
template <typename A, typename B>
double line_angle(const A* a, const B* b) {
  long double d = 0, la = 0, lb = 0;
  for (int c = 0; c < 3; ++c)
    d += static_cast<long double>(a[c]) * b[c], la += static_cast<long double>(a[c]) * a[c],
        lb += static_cast<long double>(b[c]) * b[c];
  const long double cosine = std::min(1.0L, std::fabs(d) / std::sqrt(la * lb));
  // acos loses precision near 1: the sine from the cross product instead.
  const long double x[3] = {
      a[1] * static_cast<long double>(b[2]) - a[2] * static_cast<long double>(b[1]),
      a[2] * static_cast<long double>(b[0]) - a[0] * static_cast<long double>(b[2]),
      a[0] * static_cast<long double>(b[1]) - a[1] * static_cast<long double>(b[0])};
  const long double sine = std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]) / std::sqrt(la * lb);
  return static_cast<double>(std::atan2(sine, cosine));
}

// The mean distance to the k nearest others and the k-th one, as the header
// defines them, from the brute-force list of k + 1.
template <typename Scalar>
std::pair<double, double> oracle_distances(const std::vector<Scalar>& p, int64_t i, int k) {
  const int64_t n = static_cast<int64_t>(p.size() / 3);
  const auto list = nearest(p, i, int64_t{k} + 1);
  const int64_t others = std::min<int64_t>(k, n - 1);
  double sum = 0;
  for (int64_t j = 1; j <= others; ++j)
    sum += std::sqrt(static_cast<double>(list[static_cast<size_t>(j)].first));
  const double mean = others > 0 ? sum / static_cast<double>(others) : 0.0;
  const double kth =
      others < k ? HUGE_VAL : std::sqrt(static_cast<double>(list[static_cast<size_t>(k)].first));
  return {mean, kth};
}

struct IndexFree {
  void operator()(knn_index* ix) const { knn_index_free(ix); }
};
using IndexPtr = std::unique_ptr<knn_index, IndexFree>;

template <typename Scalar>
IndexPtr build(const std::vector<Scalar>& p, int backend, int structure, int dim = 3) {
  knn_options o;
  knn_options_init(&o);
  o.backend = backend;
  o.structure = structure;
  knn_index* ix = nullptr;
  const int64_t n = static_cast<int64_t>(p.size()) / dim;
  int status;
  if constexpr (sizeof(Scalar) == 8)
    status = knn_index_build_f64(p.data(), n, dim, &o, &ix);
  else
    status = knn_index_build(p.data(), n, dim, &o, &ix);
  if (status != KNN_OK) return IndexPtr(nullptr);
  return IndexPtr(ix);
}

// The calls of each precision under one name.
inline int normals_call(const knn_index* ix, int k, const float* v, float* n, float* c,
                        const knn_options* o) {
  return knn_index_normals(ix, k, v, n, c, o);
}
inline int normals_call(const knn_index* ix, int k, const double* v, double* n, double* c,
                        const knn_options* o) {
  return knn_index_normals_f64(ix, k, v, n, c, o);
}
inline int scores_call(const knn_index* ix, int k, float* s, const knn_options* o) {
  return knn_index_outlier_scores(ix, k, s, o);
}
inline int scores_call(const knn_index* ix, int k, double* s, const knn_options* o) {
  return knn_index_outlier_scores_f64(ix, k, s, o);
}
inline int kth_call(const knn_index* ix, int k, float* s, const knn_options* o) {
  return knn_index_kth_distances(ix, k, s, o);
}
inline int kth_call(const knn_index* ix, int k, double* s, const knn_options* o) {
  return knn_index_kth_distances_f64(ix, k, s, o);
}
inline int counts_call(const knn_index* ix, float r, int64_t* c, const knn_options* o) {
  return knn_index_neighbor_counts(ix, r, c, o);
}
inline int counts_call(const knn_index* ix, double r, int64_t* c, const knn_options* o) {
  return knn_index_neighbor_counts_f64(ix, r, c, o);
}
template <typename Scalar>
int inliers_call(const knn_index* ix, int k, double ratio, int32_t* kept, int64_t* n_kept,
                 const knn_options* o) {
  if constexpr (sizeof(Scalar) == 8)
    return knn_index_statistical_inliers_f64(ix, k, ratio, kept, n_kept, o);
  else
    return knn_index_statistical_inliers(ix, k, ratio, kept, n_kept, o);
}
inline int radius_inliers_call(const knn_index* ix, float r, int64_t c, int32_t* kept,
                               int64_t* n_kept, const knn_options* o) {
  return knn_index_radius_inliers(ix, r, c, kept, n_kept, o);
}
inline int radius_inliers_call(const knn_index* ix, double r, int64_t c, int32_t* kept,
                               int64_t* n_kept, const knn_options* o) {
  return knn_index_radius_inliers_f64(ix, r, c, kept, n_kept, o);
}

}  // namespace knn_test
