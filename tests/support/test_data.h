// Test data: point sets of the shapes that break spatial search (uniform,
// clustered, all identical, heavy duplicates, flat, collinear, integer grids,
// far from the origin, signed zeros), generated from a seed alone.
//
// The generator is our own (SplitMix64 and Box-Muller) rather than <random>'s
// distributions, whose output differs between standard libraries: a seed
// printed by a failing test reproduces the same data on every platform.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "knn_gpgpu.h"

namespace knn_test {

// ---- Random numbers ---------------------------------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}

  uint64_t next() {  // SplitMix64
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n).
  int64_t below(int64_t n) {
    return n <= 1 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n));
  }
  double normal() {                     // Box-Muller, one value per call
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// ---- Distributions ------------------------------------------------------------

// The largest coordinate magnitude the distance-based calls accept in `dim`
// dimensions, as knn_gpgpu.h states it: 2^floor((125 - ceil(log2 dim)) / 2).
inline float coordinate_limit(int dim) {
  int ceil_log2 = 0;
  while ((int64_t{1} << ceil_log2) < dim) ++ceil_log2;
  return std::ldexp(1.0f, (125 - ceil_log2) / 2);
}

enum class Dist {
  Uniform,      // [-1, 1) in every coordinate
  Clustered,    // Gaussian blobs (sigma 0.5) around 24 fixed centres in [-100, 100)
  Identical,    // every point the same
  Duplicates,   // drawn from a fixed set of 7 distinct points
  Plane,        // last coordinate constant: an axis-aligned plane
  Line,         // integer first coordinate, the others constant
  Grid,         // integer coordinates in [0, 6): many equal distances
  LargeOffset,  // +-1e6 offsets with a spread of 1000, negative and large
  SignedZero,   // coordinates from {-0.0, +0.0, -1, 1}
  Tiny,         // |x| < 2e-19: squared distances in the subnormal range or 0
  Huge,         // |x| up to the library's coordinate limit: distances near FLT_MAX
};

inline const char* dist_name(Dist d) {
  switch (d) {
    case Dist::Uniform: return "Uniform";
    case Dist::Clustered: return "Clustered";
    case Dist::Identical: return "Identical";
    case Dist::Duplicates: return "Duplicates";
    case Dist::Plane: return "Plane";
    case Dist::Line: return "Line";
    case Dist::Grid: return "Grid";
    case Dist::LargeOffset: return "LargeOffset";
    case Dist::SignedZero: return "SignedZero";
    case Dist::Tiny: return "Tiny";
    case Dist::Huge: return "Huge";
  }
  return "?";
}

inline std::vector<Dist> all_dists() {
  return {Dist::Uniform,    Dist::Clustered, Dist::Identical, Dist::Duplicates,
          Dist::Plane,      Dist::Line,      Dist::Grid,      Dist::LargeOffset,
          Dist::SignedZero, Dist::Tiny,      Dist::Huge};
}

// How gtest prints a Dist parameter.
inline void PrintTo(Dist d, std::ostream* os) { *os << dist_name(d); }

// Name for parameterized test instances ("Uniform", ...).
struct DistName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    return dist_name(info.param);
  }
};

// n rows of dim floats drawn from `dist`.
inline std::vector<float> make_rows(Dist dist, int64_t n, int dim, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> rows(static_cast<size_t>(n) * static_cast<size_t>(dim));
  auto at = [&](int64_t i, int d) -> float& { return rows[static_cast<size_t>(i) * dim + d]; };
  switch (dist) {
    case Dist::Uniform:
      for (float& v : rows) v = static_cast<float>(rng.uniform(-1.0, 1.0));
      break;
    case Dist::Clustered: {
      // The blob centres are fixed, so that points and queries made from
      // different seeds share the same blobs.
      constexpr int kClusters = 24;
      Rng centre_rng(0xC1057E25ull);
      std::vector<double> centres(static_cast<size_t>(kClusters) * dim);
      for (double& c : centres) c = centre_rng.uniform(-100.0, 100.0);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = rng.below(kClusters);
        for (int d = 0; d < dim; ++d)
          at(i, d) =
              static_cast<float>(centres[static_cast<size_t>(c) * dim + d] + 0.5 * rng.normal());
      }
      break;
    }
    case Dist::Identical:
      for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < dim; ++d) at(i, d) = 0.375f * static_cast<float>(d + 1) - 1.0f;
      break;
    case Dist::Duplicates: {
      // A fixed set of 7 points (shared by points and queries of any seed).
      Rng set_rng(0xD0B1Eull);
      std::vector<float> set(7 * static_cast<size_t>(dim));
      for (float& v : set) v = static_cast<float>(set_rng.uniform(-4.0, 4.0));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t s = rng.below(7);
        for (int d = 0; d < dim; ++d) at(i, d) = set[static_cast<size_t>(s) * dim + d];
      }
      break;
    }
    case Dist::Plane:
      for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < dim; ++d)
          at(i, d) = d == dim - 1 ? 0.25f : static_cast<float>(rng.uniform(-1.0, 1.0));
      break;
    case Dist::Line: {
      const int64_t span = std::max<int64_t>(1, n / 4);
      for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < dim; ++d)
          at(i, d) = d == 0 ? static_cast<float>(rng.below(span)) : 1.0f;
      break;
    }
    case Dist::Grid:
      for (float& v : rows) v = static_cast<float>(rng.below(6));
      break;
    case Dist::LargeOffset:
      for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < dim; ++d)
          at(i, d) = static_cast<float>((d % 2 == 0 ? -1.0e6 : 1.0e6) + rng.uniform(0.0, 1000.0));
      break;
    case Dist::SignedZero: {
      static const float choices[4] = {-0.0f, 0.0f, -1.0f, 1.0f};
      for (float& v : rows) v = choices[rng.below(4)];
      break;
    }
    case Dist::Tiny:
      for (float& v : rows) v = static_cast<float>(rng.uniform(-2e-19, 2e-19));
      break;
    case Dist::Huge: {
      // Magnitudes 1e10 .. half the coordinate limit with random signs
      // (queries add noise up to the other half): squared distances up to
      // about 2^127, as large as the library accepts (beyond the limit it
      // refuses the input: knn_gpgpu.h, "Coordinates").
      const double top = std::log10(0.5 * coordinate_limit(dim));
      for (float& v : rows) {
        const double magnitude = std::pow(10.0, rng.uniform(10.0, top));
        v = static_cast<float>(rng.below(2) ? magnitude : -magnitude);
      }
      break;
    }
  }
  return rows;
}

// Queries for data of `dist`: the even ones drawn from the distribution itself
// (they hit its duplicates and ties), the odd ones moved off it by noise.
inline std::vector<float> make_query_rows(Dist dist, int64_t m, int dim, uint64_t seed) {
  std::vector<float> rows = make_rows(dist, m, dim, seed ^ 0x5eed5eed5eedull);
  Rng rng(seed + 77);
  const double scale = dist == Dist::Clustered     ? 5.0
                       : dist == Dist::LargeOffset ? 50.0
                       : dist == Dist::Tiny        ? 1e-19
                       : dist == Dist::Huge        ? 0.5 * coordinate_limit(dim)
                                                   : 0.75;
  for (int64_t i = 1; i < m; i += 2)
    for (int d = 0; d < dim; ++d) {
      float& v = rows[static_cast<size_t>(i) * dim + d];
      v = static_cast<float>(v + scale * rng.uniform(-1.0, 1.0));
    }
  return rows;
}

inline std::vector<Point> to_points(const std::vector<float>& rows) {
  std::vector<Point> points(rows.size() / 3);
  if (!points.empty()) std::memcpy(points.data(), rows.data(), points.size() * sizeof(Point));
  return points;
}

inline std::vector<Point> make_points(Dist dist, int64_t n, uint64_t seed) {
  return to_points(make_rows(dist, n, 3, seed));
}

inline std::vector<Point> make_query_points(Dist dist, int64_t m, uint64_t seed) {
  return to_points(make_query_rows(dist, m, 3, seed));
}

// Text for SCOPED_TRACE: everything needed to rebuild a failing case.
inline std::string describe(Dist dist, int64_t n, int64_t m, int k, uint64_t seed,
                            const char* extra = "") {
  std::ostringstream s;
  s << "dist=" << dist_name(dist) << " n=" << n << " m=" << m << " k=" << k << " seed=" << seed
    << (extra[0] ? " " : "") << extra;
  return s.str();
}

}  // namespace knn_test
