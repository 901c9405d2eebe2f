// Float64 point-in-polygon cases shared by the CPU and GPU tests: data where
// float32 would not do (UTM offsets at millimetre spacing, latitude/longitude
// features of 1e-9 degree, tilings with double vertices), with points on and
// one ulp either side of every edge and vertex. The answers come from the
// exact oracle of pip_oracle.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "pip_oracle.h"

namespace knn_test {

struct F64Case {
  const char* name;
  std::vector<double> xy;  // points
  PolygonArraysd polygons;
};

inline void push_point(std::vector<double>& xy, double x, double y) {
  xy.push_back(x);
  xy.push_back(y);
}

// For every edge of `set`: its first vertex, a point at a random fraction of
// the way along it (rounded: on or within an ulp of the line), and that point
// and the vertex moved one ulp left, right, down and up.
inline void add_near_edge_points(const PolygonArraysd& set, std::mt19937_64& rng,
                                 std::vector<double>& xy) {
  std::uniform_real_distribution<double> fraction(0.0, 1.0);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < set.n_rings(); ++r)
    for (int64_t v = set.ring_offsets[r]; v < set.ring_offsets[r + 1]; ++v) {
      const int64_t w = v + 1 < set.ring_offsets[r + 1] ? v + 1 : set.ring_offsets[r];
      const double ax = set.xy[2 * v], ay = set.xy[2 * v + 1];
      const double bx = set.xy[2 * w], by = set.xy[2 * w + 1];
      const double t = fraction(rng);
      const double on[2][2] = {{ax, ay}, {ax + t * (bx - ax), ay + t * (by - ay)}};
      for (const auto& p : on) {
        push_point(xy, p[0], p[1]);
        push_point(xy, std::nextafter(p[0], -inf), p[1]);
        push_point(xy, std::nextafter(p[0], inf), p[1]);
        push_point(xy, p[0], std::nextafter(p[1], -inf));
        push_point(xy, p[0], std::nextafter(p[1], inf));
      }
    }
}

// A concave star of `vertices` vertices around (cx, cy), radii r * [0.4, 1].
inline std::vector<Vec2d> star_ring(std::mt19937_64& rng, double cx, double cy, double r,
                                    int vertices) {
  std::uniform_real_distribution<double> unit(0.4, 1.0);
  std::vector<Vec2d> ring;
  for (int i = 0; i < vertices; ++i) {
    const double angle = 2 * 3.141592653589793 * i / vertices;
    const double radius = r * unit(rng);
    ring.push_back({cx + radius * std::cos(angle), cy + radius * std::sin(angle)});
  }
  return ring;
}

// A UTM-like frame: x ~ 4.5e6 m, y ~ 5.5e6 m, points on a millimetre grid
// (as doubles: base + i * 0.001), polygons of 1 mm .. 6 cm with vertices on
// the same grid (so many points lie exactly on edges and vertices) or off it.
inline F64Case utm_case(uint64_t seed) {
  F64Case c{"UTM offsets at millimetre spacing", {}, {}};
  std::mt19937_64 rng(seed);
  const double x0 = 4500000.0, y0 = 5500000.0, mm = 0.001;
  const int side = 80;
  for (int i = 0; i < side; ++i)
    for (int j = 0; j < side; ++j) push_point(c.xy, x0 + i * mm, y0 + j * mm);
  std::uniform_int_distribution<int> cell(0, side - 1);
  auto grid = [&](int i, int j) { return Vec2d{x0 + i * mm, y0 + j * mm}; };
  for (int p = 0; p < 6; ++p) {
    const int i = cell(rng) / 2, j = cell(rng) / 2;
    const int w = 1 + cell(rng) / 3, h = 1 + cell(rng) / 3;
    c.polygons.add_polygon({grid(i, j), grid(i + w, j), grid(i + w, j + h), grid(i, j + h)});
  }
  c.polygons.add_polygon({grid(3, 3), grid(60, 10), grid(20, 70)});  // slanted edges on the grid
  c.polygons.add_polygon(star_ring(rng, x0 + 0.04, y0 + 0.04, 0.03, 23));
  c.polygons.add_hole(star_ring(rng, x0 + 0.04, y0 + 0.04, 0.008, 9));
  add_near_edge_points(c.polygons, rng, c.xy);
  return c;
}

// Longitude/latitude near Sydney with features of 1e-9 degree (about 0.1 mm):
// a float32 rounds them away entirely (its spacing at 151 is 1.5e-5).
inline F64Case latlon_case(uint64_t seed) {
  F64Case c{"longitude/latitude with 1e-9 degree features", {}, {}};
  std::mt19937_64 rng(seed);
  const double lon = 151.2093, lat = -33.8688, f = 1e-9;
  for (int i = -5; i < 45; ++i)
    for (int j = -5; j < 45; ++j) push_point(c.xy, lon + i * 0.5 * f, lat + j * 0.5 * f);
  // A border with a 1e-9 degree notch, and a thin sliver between two states.
  c.polygons.add_polygon({{lon, lat},
                          {lon + 30 * f, lat},
                          {lon + 30 * f, lat + 10 * f},
                          {lon + 15 * f, lat + 10 * f},
                          {lon + 15 * f, lat + 11 * f},
                          {lon + 14 * f, lat + 11 * f},
                          {lon + 14 * f, lat + 10 * f},
                          {lon, lat + 10 * f}});
  c.polygons.add_polygon({{lon, lat + 10 * f}, {lon + 30 * f, lat + 10 * f}, {lon, lat + 11 * f}});
  c.polygons.add_polygon(star_ring(rng, lon + 20 * f, lat + 25 * f, 12 * f, 17));
  add_near_edge_points(c.polygons, rng, c.xy);
  return c;
}

// A g x g tiling of [1, 2]^2 by quadrilaterals whose interior vertices are
// jittered doubles shared exactly by the four tiles around them; points:
// random, and on and one ulp around every edge and vertex.
inline F64Case tiling_case(uint64_t seed, int g) {
  F64Case c{"tiling with shared double vertices", {}, {}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(-0.3, 0.3), unit(1.0, 2.0);
  std::vector<Vec2d> corner(static_cast<size_t>((g + 1) * (g + 1)));
  for (int i = 0; i <= g; ++i)
    for (int j = 0; j <= g; ++j) {
      const bool inner_x = i > 0 && i<g, inner_y = j> 0 && j < g;
      corner[i * (g + 1) + j] = {1.0 + (i + (inner_x ? jitter(rng) : 0.0)) / g,
                                 1.0 + (j + (inner_y ? jitter(rng) : 0.0)) / g};
    }
  for (int i = 0; i < g; ++i)
    for (int j = 0; j < g; ++j) {
      const auto at = [&](int a, int b) { return corner[(i + a) * (g + 1) + (j + b)]; };
      c.polygons.add_polygon({at(0, 0), at(1, 0), at(1, 1), at(0, 1)});
    }
  for (int k = 0; k < 2000; ++k) push_point(c.xy, unit(rng), unit(rng));
  add_near_edge_points(c.polygons, rng, c.xy);
  return c;
}

// One tree over the whole accepted range: points from 2^-485 to 2^500 (and
// 0) in magnitude, so the 2^16 cell grid spans 2^501 and every point near 0
// shares one cell; polygons at both ends (a tiny triangle around 0, a huge
// one, a huge one with a hole of tiny size) and points on and one ulp around
// their edges.
inline F64Case extreme_range_case(uint64_t seed) {
  F64Case c{"the whole range in one tree", {}, {}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-485, 499);
  for (int k = 0; k < 3000; ++k) {
    const double x = std::ldexp(unit(rng), exponent(rng)), y = std::ldexp(unit(rng), exponent(rng));
    push_point(c.xy, std::fabs(x) < std::ldexp(1.0, -485) ? 0.0 : x,
               std::fabs(y) < std::ldexp(1.0, -485) ? 0.0 : y);
  }
  const double tiny = std::ldexp(1.0, -470), huge = std::ldexp(1.0, 498);
  c.polygons.add_polygon({{-tiny, -tiny}, {3 * tiny, -tiny}, {-tiny, 2 * tiny}});
  c.polygons.add_polygon({{-huge, -huge}, {huge, -0.5 * huge}, {0.25 * huge, huge}});
  c.polygons.add_polygon({{-huge, -huge}, {huge, -huge}, {huge, huge}, {-huge, huge}});
  c.polygons.add_hole({{-tiny, -tiny}, {tiny, -tiny}, {tiny, tiny}, {-tiny, tiny}});
  add_near_edge_points(c.polygons, rng, c.xy);
  for (double& v : c.xy)  // one ulp off a coordinate of 2^-485 may leave the range
    if (std::fabs(v) < std::ldexp(1.0, -485)) v = 0.0;
  return c;
}

// The case with every coordinate multiplied by 2^e (exact; the answers are
// the same, since the predicate is invariant under that scaling).
inline F64Case scaled_case(const F64Case& base, int e, const char* name) {
  F64Case c{name, base.xy, base.polygons};
  for (double& v : c.xy) v = std::ldexp(v, e);
  for (double& v : c.polygons.xy) v = std::ldexp(v, e);
  return c;
}

}  // namespace knn_test
