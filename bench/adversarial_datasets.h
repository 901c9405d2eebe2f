// The adversarial point clouds of bench_auto (issue 53): 3-D distributions
// on which a structure chooser can pick the slower structure. Each is
// deterministic (counter-based, datasets.h's RandomStream): point i depends
// only on (distribution, seed, i), so the points are the same on every
// machine and thread count, and the tests build the same clouds.
//
// A distribution gives its points and its queries (a second draw with
// kQuerySeed, or points of its own where the queries are the point of the
// row: away from the points, outside their box).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "datasets.h"

namespace knn_bench {

enum class Adversarial {
  Uniform,         // the baseline: uniform in the unit cube
  QueriesInCube,   // points on a sphere's surface, queries filling its cube
  QueriesOutside,  // uniform points, queries in a box 3 units away
  DensityRamp,     // density along x falling as x^-0.9 (x = u^10)
  FarOutliers,     // uniform, and 16 points 10^4 away (the box is 10^4 wide)
  MixedScales,     // 8 Gaussian clusters, sigma from 1e-1 down to 1e-5
  Helix,           // a helix of 20 turns, off every axis
  BoxFaces,        // the six faces of the unit cube
  Lattice,         // an integer lattice (every distance tied many times)
  Duplicates,      // n / 16 distinct points, each 16 times
  TwoClouds,       // two uniform unit cubes 10^4 apart
  Collinear,       // a line along the cube's diagonal
  ThinShell,       // a spherical shell 1e-3 thick
  HeavyTails,      // Cauchy coordinates (a few points very far)
  Clustered,       // 64 Gaussian blobs (datasets.h)
  TiltedPlane,     // a plane off every axis
  SprayedSurface,  // a scan: a sphere's surface, 1 point in 200 sprayed over its cube
  Count
};

inline const char* adversarial_name(Adversarial d) {
  static const char* const names[] = {
      "uniform",      "queries-in-cube", "queries-outside", "density-ramp", "far-outliers",
      "mixed-scales", "helix",           "box-faces",       "lattice",      "duplicates",
      "two-clouds",   "collinear",       "thin-shell",      "heavy-tails",  "clustered",
      "tilted-plane", "sprayed-surface"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(Adversarial::Count),
                "one name per distribution");
  return names[static_cast<int>(d)];
}

inline bool parse_adversarial(const std::string& text, Adversarial* out) {
  for (int d = 0; d < static_cast<int>(Adversarial::Count); ++d)
    if (text == adversarial_name(static_cast<Adversarial>(d))) {
      *out = static_cast<Adversarial>(d);
      return true;
    }
  return false;
}

namespace adversarial_detail {

constexpr float kTwoPi = 6.28318530717958647692f;

// A standard normal from two uniform words.
inline float normal(const RandomStream& rng, uint64_t c) {
  return std::sqrt(-2.0f * std::log(rng.unit_open_zero(c))) * std::cos(kTwoPi * rng.unit(c + 1));
}

// A uniform direction (Marsaglia-free: normalised Gaussian triple).
inline void on_sphere(const RandomStream& rng, uint64_t c, float radius, float* p) {
  float v[3] = {normal(rng, c), normal(rng, c + 2), normal(rng, c + 4)};
  const float len = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  for (int a = 0; a < 3; ++a) p[a] = 0.5f + radius * v[a] / (len > 0 ? len : 1.0f);
}

// Point i of distribution d drawn with `seed` (the queries use kQuerySeed).
inline void adversarial_point(Adversarial d, const RandomStream& rng, int64_t n, int64_t i,
                              bool query, float* p) {
  const uint64_t c = 8 * static_cast<uint64_t>(i);
  switch (d) {
    case Adversarial::Uniform:
      for (int a = 0; a < 3; ++a) p[a] = rng.unit(c + a);
      return;
    case Adversarial::QueriesInCube:
      if (query) {
        for (int a = 0; a < 3; ++a) p[a] = rng.unit(c + a);
      } else {
        on_sphere(rng, c, 0.5f, p);
      }
      return;
    case Adversarial::QueriesOutside:
      for (int a = 0; a < 3; ++a) p[a] = rng.unit(c + a) + (query && a == 0 ? 4.0f : 0.0f);
      return;
    case Adversarial::DensityRamp: {
      const float u = rng.unit(c);
      float x = u * u;
      x *= x;
      x *= x;
      p[0] = x * u * u;  // u^10
      p[1] = rng.unit(c + 1);
      p[2] = rng.unit(c + 2);
      return;
    }
    case Adversarial::FarOutliers:
      for (int a = 0; a < 3; ++a) p[a] = rng.unit(c + a);
      if (!query && i % (n / 16 > 0 ? n / 16 : 1) == 7) p[i % 3] += 1e4f;
      return;
    case Adversarial::MixedScales: {
      const uint32_t blob = rng.below(c, 8);
      const float sigma = 0.1f * std::pow(10.0f, -4.0f * static_cast<float>(blob) / 7.0f);
      const float centre = 0.1f + 0.1f * static_cast<float>(blob);
      for (int a = 0; a < 3; ++a) p[a] = centre + sigma * normal(rng, c + 1 + 2 * a);
      return;
    }
    case Adversarial::Helix: {
      const float t = rng.unit(c) * 20.0f * kTwoPi;
      const float r = 0.2f;
      // Along the cube's diagonal, not an axis.
      const float s = t / (20.0f * kTwoPi);
      const float cx = r * std::cos(t), cy = r * std::sin(t);
      p[0] = s + 0.7071f * cx - 0.4082f * cy;
      p[1] = s - 0.7071f * cx - 0.4082f * cy;
      p[2] = s + 0.8165f * cy;
      return;
    }
    case Adversarial::BoxFaces: {
      const uint32_t face = rng.below(c, 6);
      p[0] = rng.unit(c + 1);
      p[1] = rng.unit(c + 2);
      p[2] = rng.unit(c + 3);
      p[face % 3] = face < 3 ? 0.0f : 1.0f;
      if (query) p[face % 3] += 0.01f * (rng.unit(c + 4) - 0.5f);
      return;
    }
    case Adversarial::Lattice: {
      int64_t side = static_cast<int64_t>(std::cbrt(static_cast<double>(n)));
      while ((side + 1) * (side + 1) * (side + 1) <= n) ++side;
      if (side < 1) side = 1;
      const int64_t j =
          (query ? static_cast<int64_t>(rng.below(c, 1u << 31)) : i) % (side * side * side);
      p[0] = static_cast<float>(j % side);
      p[1] = static_cast<float>((j / side) % side);
      p[2] = static_cast<float>(j / (side * side));
      if (query && rng.below(c + 1, 2) == 1)
        for (int a = 0; a < 3; ++a) p[a] += 0.5f;  // equidistant from 8 points
      return;
    }
    case Adversarial::Duplicates: {
      const uint64_t distinct = 8 * static_cast<uint64_t>(query ? i : i / 16);
      for (int a = 0; a < 3; ++a) p[a] = rng.unit(distinct + a);
      return;
    }
    case Adversarial::TwoClouds:
      for (int a = 0; a < 3; ++a) p[a] = rng.unit(c + a) + (rng.below(c + 3, 2) ? 1e4f : 0.0f);
      return;
    case Adversarial::Collinear: {
      const float t = rng.unit(c);
      p[0] = t;
      p[1] = 0.5f * t + 0.25f;
      p[2] = 0.25f * t + 0.5f;
      return;
    }
    case Adversarial::ThinShell: {
      const float r = 0.5f + 1e-3f * rng.unit(c + 6);
      on_sphere(rng, c, r, p);
      return;
    }
    case Adversarial::HeavyTails:
      for (int a = 0; a < 3; ++a) {
        const float u = rng.unit_open_zero(c + a);
        p[a] = 0.01f * std::tan(0.5f * kTwoPi * (0.999f * u - 0.4995f));
      }
      return;
    case Adversarial::Clustered:
    case Adversarial::Count: return;  // generated in bulk (fill_clustered)
    case Adversarial::TiltedPlane: {
      const float u = rng.unit(c), v = rng.unit(c + 1);
      p[0] = u;
      p[1] = 0.6f * u + 0.8f * v;
      p[2] = 0.8f * u - 0.6f * v + 0.5f;
      return;
    }
    case Adversarial::SprayedSurface:
      // The spray is part of the cloud, so an all-kNN call asks for the
      // neighbours of points alone in their cells (src/index_planner.h).
      if (i % 200 == 7) {
        for (int a = 0; a < 3; ++a) p[a] = rng.unit(c + a);
      } else {
        on_sphere(rng, c, 0.5f, p);
      }
      return;
  }
}

}  // namespace adversarial_detail

// n points (query false) or queries (true) of distribution d.
inline std::vector<Point> adversarial_cloud(Adversarial d, int64_t n, bool query) {
  std::vector<Point> out(static_cast<size_t>(n));
  if (d == Adversarial::Clustered) {
    fill_clustered(out.data(), n, query ? kQuerySeed : kReferenceSeed);
    return out;
  }
  const RandomStream rng(query ? kQuerySeed : kReferenceSeed);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    adversarial_detail::adversarial_point(d, rng, n, i, query, out[static_cast<size_t>(i)].p);
  return out;
}

}  // namespace knn_bench
