// Deterministic point clouds shared by every benchmark (CPU and GPU), so that
// all figures in bench/RESULTS.md are measured on the same data.
//
//   uniform    uniform in the unit cube [0, 1)^3
//   clustered  64 Gaussian blobs (sigma 0.01, not clipped to the cube) whose
//              centres are uniform in the unit cube; every point picks a blob
//              uniformly at random
//   queries    a second, independent draw of the same distribution: the same
//              blob centres, a different sample seed (kQuerySeed)
//
// The generator is counter based (the splitmix64 finaliser applied to
// seed key + counter), so value i depends only on (seed, i): the output is
// the same for any thread count, and the first n points of a larger cloud
// are the n-point cloud. Generation runs over OpenMP threads when the
// including target is compiled with OpenMP, serially otherwise.
//
// Header-only; uses only the public header's Point type.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "knn_gpgpu.h"

namespace knn_bench {

// ---- Seeds ---------------------------------------------------------------
constexpr uint64_t kReferenceSeed = 1;          // the points a tree is built from
constexpr uint64_t kQuerySeed = 2;              // the queries
constexpr uint64_t kCentreSeed = 0x5eedc0ffee;  // blob centres of `clustered`

constexpr int kClusters = 64;
constexpr float kClusterSigma = 0.01f;

// ---- The random stream -------------------------------------------------
// splitmix64's output function: a bijection of 64-bit words whose outputs
// for consecutive inputs pass BigCrush.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class RandomStream {
 public:
  explicit RandomStream(uint64_t seed) : key_(mix64(seed + 0x9e3779b97f4a7c15ull)) {}

  // The counter-th 64-bit word of the stream.
  uint64_t word(uint64_t counter) const { return mix64(key_ + counter * 0x9e3779b97f4a7c15ull); }

  // Uniform in [0, 1) with 24 random bits (every float32 step of [0.5, 1)).
  float unit(uint64_t counter) const {
    return static_cast<float>(word(counter) >> 40) * (1.0f / 16777216.0f);
  }

  // Uniform in (0, 1]: safe for log().
  float unit_open_zero(uint64_t counter) const {
    return static_cast<float>((word(counter) >> 40) + 1) * (1.0f / 16777216.0f);
  }

  // Uniform integer in [0, bound), bound < 2^32 (multiply-shift, no modulo).
  uint32_t below(uint64_t counter, uint32_t bound) const {
    return static_cast<uint32_t>(((word(counter) >> 32) * bound) >> 32);
  }

 private:
  uint64_t key_;
};

// ---- Generators into caller buffers (pinned host memory works too) ------

// n points uniform in [0, 1)^3; point i uses words 3i .. 3i+2.
inline void fill_uniform(Point* out, int64_t n, uint64_t seed) {
  const RandomStream rng(seed);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t c = 3 * static_cast<uint64_t>(i);
    out[i].p[0] = rng.unit(c);
    out[i].p[1] = rng.unit(c + 1);
    out[i].p[2] = rng.unit(c + 2);
  }
}

// n rows of dim floats uniform in [0, 1); row i uses words i*dim .. i*dim+dim-1.
inline void fill_uniform_rows(float* out, int64_t n, int dim, uint64_t seed) {
  const RandomStream rng(seed);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < dim; ++d) {
      const int64_t at = i * dim + d;
      out[at] = rng.unit(static_cast<uint64_t>(at));
    }
}

// The blob centres of the clustered distribution (the same for the points
// and the queries: they depend on centre_seed only).
inline std::vector<Point> cluster_centres(int clusters = kClusters,
                                          uint64_t centre_seed = kCentreSeed) {
  std::vector<Point> centres(static_cast<size_t>(clusters));
  fill_uniform(centres.data(), clusters, centre_seed);
  return centres;
}

// n points of `clusters` Gaussian blobs of standard deviation sigma per axis.
// Point i uses words 5i .. 5i+4: the blob, then two Box-Muller pairs (three of
// whose four normals are used).
inline void fill_clustered(Point* out, int64_t n, uint64_t seed, int clusters = kClusters,
                           float sigma = kClusterSigma, uint64_t centre_seed = kCentreSeed) {
  const std::vector<Point> centres = cluster_centres(clusters, centre_seed);
  const Point* centre = centres.data();
  const RandomStream rng(seed);
  const float two_pi = 6.28318530717958647692f;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t c = 5 * static_cast<uint64_t>(i);
    const Point& at = centre[rng.below(c, static_cast<uint32_t>(clusters))];
    const float r0 = sigma * std::sqrt(-2.0f * std::log(rng.unit_open_zero(c + 1)));
    const float a0 = two_pi * rng.unit(c + 2);
    const float r1 = sigma * std::sqrt(-2.0f * std::log(rng.unit_open_zero(c + 3)));
    const float a1 = two_pi * rng.unit(c + 4);
    out[i].p[0] = at.p[0] + r0 * std::cos(a0);
    out[i].p[1] = at.p[1] + r0 * std::sin(a0);
    out[i].p[2] = at.p[2] + r1 * std::cos(a1);
  }
}

// n rows of dim floats from kClusters Gaussian blobs in [0, 1)^dim, the
// any-dimension form of fill_clustered (the same points for dim = 3): row i
// uses words i*w .. i*w+w-1, w = 1 + 2 * ceil(dim / 2): the blob, then one
// Box-Muller pair per two coordinates.
inline void fill_clustered_rows(float* out, int64_t n, int dim, uint64_t seed,
                                int clusters = kClusters, float sigma = kClusterSigma,
                                uint64_t centre_seed = kCentreSeed) {
  std::vector<float> centres(static_cast<size_t>(clusters) * static_cast<size_t>(dim));
  fill_uniform_rows(centres.data(), clusters, dim, centre_seed);
  const float* centre = centres.data();
  const RandomStream rng(seed);
  const float two_pi = 6.28318530717958647692f;
  const uint64_t words = 1 + 2 * static_cast<uint64_t>((dim + 1) / 2);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t c = words * static_cast<uint64_t>(i);
    const float* at = centre + static_cast<size_t>(rng.below(c, static_cast<uint32_t>(clusters))) *
                                   static_cast<size_t>(dim);
    for (int d = 0; d < dim; d += 2) {
      const uint64_t pair = c + 1 + static_cast<uint64_t>(d);
      const float r = sigma * std::sqrt(-2.0f * std::log(rng.unit_open_zero(pair)));
      const float a = two_pi * rng.unit(pair + 1);
      out[i * dim + d] = at[d] + r * std::cos(a);
      if (d + 1 < dim) out[i * dim + d + 1] = at[d + 1] + r * std::sin(a);
    }
  }
}

// ---- Convenience: vectors and the named distributions ---------------------

inline std::vector<Point> uniform_points(int64_t n, uint64_t seed) {
  std::vector<Point> points(static_cast<size_t>(n));
  fill_uniform(points.data(), n, seed);
  return points;
}

inline std::vector<Point> clustered_points(int64_t n, uint64_t seed) {
  std::vector<Point> points(static_cast<size_t>(n));
  fill_clustered(points.data(), n, seed);
  return points;
}

enum class Distribution { Uniform, Clustered };

// n rows of dim floats, uniform in [0, 1)^dim (the any-dimension benchmarks).
inline std::vector<float> uniform_rows(int64_t n, int dim, uint64_t seed) {
  std::vector<float> rows(static_cast<size_t>(n) * static_cast<size_t>(dim));
  fill_uniform_rows(rows.data(), n, dim, seed);
  return rows;
}

// n rows of dim floats of the distribution d.
inline std::vector<float> make_rows(Distribution d, int64_t n, int dim, uint64_t seed) {
  if (d == Distribution::Uniform) return uniform_rows(n, dim, seed);
  std::vector<float> rows(static_cast<size_t>(n) * static_cast<size_t>(dim));
  fill_clustered_rows(rows.data(), n, dim, seed);
  return rows;
}

inline const char* distribution_name(Distribution d) {
  return d == Distribution::Uniform ? "uniform" : "clustered";
}

// "uniform" or "clustered"; false for anything else.
inline bool parse_distribution(const std::string& text, Distribution* out) {
  if (text == "uniform") {
    *out = Distribution::Uniform;
  } else if (text == "clustered") {
    *out = Distribution::Clustered;
  } else {
    return false;
  }
  return true;
}

inline void fill_points(Distribution d, Point* out, int64_t n, uint64_t seed) {
  if (d == Distribution::Uniform)
    fill_uniform(out, n, seed);
  else
    fill_clustered(out, n, seed);
}

inline std::vector<Point> make_points(Distribution d, int64_t n, uint64_t seed) {
  std::vector<Point> points(static_cast<size_t>(n));
  fill_points(d, points.data(), n, seed);
  return points;
}

// The reference cloud and the queries of a benchmark configuration.
inline std::vector<Point> reference_points(Distribution d, int64_t n) {
  return make_points(d, n, kReferenceSeed);
}
inline std::vector<Point> query_points(Distribution d, int64_t m) {
  return make_points(d, m, kQuerySeed);
}

}  // namespace knn_bench
