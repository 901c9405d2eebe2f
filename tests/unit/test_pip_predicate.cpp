// The exact point-in-polygon predicate (common/pip_predicate.h) on the host,
// against the big-integer oracle (tests/support/pip_oracle.h) and hand-computed cases.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "../../common/pip_predicate.h"
#include "../../common/quadtree_layout.h"
#include "pip_oracle.h"

namespace knn_test {
namespace {

using knn::pip::inside_polygon;
using knn::pip::orientation_sign;
using knn::pip::ring_crossing_parity;

bool inside(const PolygonArrays& set, int64_t polygon, float x, float y) {
  return inside_polygon(x, y, set.xy.data(), set.ring_offsets.data(), set.polygon_offsets[polygon],
                        set.polygon_offsets[polygon + 1]);
}

// A float of random sign, significand and exponent in [min_exp, max_exp].
float random_float(std::mt19937_64& rng, int min_exp, int max_exp) {
  std::uniform_real_distribution<double> significand(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(min_exp, max_exp);
  const float f = static_cast<float>(std::ldexp(significand(rng), exponent(rng)));
  return rng() & 1 ? -f : f;
}

struct OrientationCase {
  float ax, ay, bx, by, px, py;
};

// Checks orientation_sign against the oracle; returns the oracle's sign.
int expect_orientation(const OrientationCase& c) {
  const int expected = oracle_orientation(c.ax, c.ay, c.bx, c.by, c.px, c.py);
  EXPECT_EQ(orientation_sign(c.ax, c.ay, c.bx, c.by, c.px, c.py), expected)
      << std::hexfloat << "a=(" << c.ax << "," << c.ay << ") b=(" << c.bx << "," << c.by << ") p=("
      << c.px << "," << c.py << ")";
  return expected;
}

TEST(PipPredicate, OrientationOfRandomFloatsOfEveryMagnitude) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20000; ++i) {
    const int lo = i % 2 ? -149 : -20, hi = i % 3 ? 20 : 127;
    expect_orientation({random_float(rng, lo, hi), random_float(rng, lo, hi),
                        random_float(rng, lo, hi), random_float(rng, lo, hi),
                        random_float(rng, lo, hi), random_float(rng, lo, hi)});
  }
}

// p = a + t (b - a) rounded to float: within an ulp of the line, so the double
// evaluation is inside its error bound and the exact fallback decides; on a
// common grid, p lies exactly on the line.
TEST(PipPredicate, OrientationOfPointsRoundedOntoTheLine) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> t(-2.0, 3.0);
  int zero = 0, positive = 0, negative = 0;
  for (int i = 0; i < 20000; ++i) {
    const int lo = i % 4 == 0 ? -140 : -10, hi = i % 4 == 1 ? 120 : 10;
    float ax = random_float(rng, lo, hi), ay = random_float(rng, lo, hi);
    float bx = random_float(rng, lo, hi), by = random_float(rng, lo, hi);
    double s = t(rng);
    if (i % 3 == 0) {  // a, b, p on a common grid: p exactly on the line
      const int e = static_cast<int>(rng() % 200) - 100;
      ax = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), e);
      ay = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), e);
      bx = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), e);
      by = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), e);
      s = std::floor(s * 16) / 16;
    }
    const float px = static_cast<float>(ax + s * (static_cast<double>(bx) - ax));
    const float py = static_cast<float>(ay + s * (static_cast<double>(by) - ay));
    const int sign = expect_orientation({ax, ay, bx, by, px, py});
    (sign == 0 ? zero : sign > 0 ? positive : negative)++;
  }
  // The cases must really be near-degenerate and of every outcome.
  EXPECT_GT(zero, 100);
  EXPECT_GT(positive, 1000);
  EXPECT_GT(negative, 1000);
}

TEST(PipPredicate, OrientationNeedingMoreThanDoublePrecision) {
  // Differences of floats with far-apart exponents are not exact in double,
  // and products of such differences cancel below double's resolution.
  const float big = 1e30f, tiny = 1e-30f, one = 1.0f;
  const float next = std::nextafter(one, 2.0f);
  const std::vector<OrientationCase> cases = {
      {0, 0, big, big, tiny, tiny},           // on the diagonal, far apart
      {0, 0, big, big, tiny, 0},              // right of it by a hair
      {tiny, 0, big, big, 0, tiny},           // nearly collinear
      {-big, -tiny, big, tiny, one, 0},       // line through 0 with slope 1e-60
      {-big, -tiny, big, tiny, one, 1e-45f},  // subnormal above it
      {-big, -tiny, big, tiny, -one, -1e-45f},
      {one, one, next, next, 3 * one, 3 * one},  // collinear, ulp-spaced
      {one, next, next, one, 0, 0},
      {FLT_MAX, -FLT_MAX, -FLT_MAX, FLT_MAX, 0, 0},
      {FLT_MAX, -FLT_MAX, -FLT_MAX, FLT_MAX, 1e-45f, 0},
      {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX, 0, 0},  // zero-length edge
      {1e-45f, 0, 0, 1e-45f, 1e-45f, 1e-45f},
      {0.1f, 0.2f, 0.3f, 0.6f, 0.2f, 0.4f},
  };
  for (const OrientationCase& c : cases) expect_orientation(c);
  EXPECT_EQ(orientation_sign<float>(0, 0, big, big, tiny, tiny), 0);
  EXPECT_EQ(orientation_sign<float>(0, 0, big, big, tiny, 0), -1);
  EXPECT_EQ(orientation_sign<float>(-big, -tiny, big, tiny, one, 1e-45f), 1);
}

TEST(PipPredicate, UnitSquareBoundaryGoesRightAndUp) {
  PolygonArrays set;
  set.add_polygon(rectangle(0, 0, 1, 1));
  // Hand-computed from the rule: a boundary point belongs to the polygon when
  // the polygon lies to its right (or above, on a horizontal edge).
  EXPECT_TRUE(inside(set, 0, 0.5f, 0.5f));
  EXPECT_TRUE(inside(set, 0, 0.0f, 0.5f));   // left edge
  EXPECT_FALSE(inside(set, 0, 1.0f, 0.5f));  // right edge
  EXPECT_TRUE(inside(set, 0, 0.5f, 0.0f));   // bottom edge
  EXPECT_FALSE(inside(set, 0, 0.5f, 1.0f));  // top edge
  EXPECT_TRUE(inside(set, 0, 0.0f, 0.0f));
  EXPECT_FALSE(inside(set, 0, 1.0f, 0.0f));
  EXPECT_FALSE(inside(set, 0, 0.0f, 1.0f));
  EXPECT_FALSE(inside(set, 0, 1.0f, 1.0f));
  EXPECT_FALSE(inside(set, 0, -0.5f, 0.5f));
  EXPECT_FALSE(inside(set, 0, 1.5f, 0.5f));
  EXPECT_FALSE(inside(set, 0, 0.5f, -1e-45f));
}

TEST(PipPredicate, ClosingRepeatAndOrientationDoNotMatter) {
  PolygonArrays open_ccw, closed_ccw, closed_cw;
  open_ccw.add_polygon({{0, 0}, {4, 0}, {4, 3}, {2, 1}, {0, 3}});
  closed_ccw.add_polygon({{0, 0}, {4, 0}, {4, 3}, {2, 1}, {0, 3}, {0, 0}});
  closed_cw.add_polygon({{0, 0}, {0, 3}, {2, 1}, {4, 3}, {4, 0}, {0, 0}});
  for (float y = -0.5f; y <= 3.5f; y += 0.25f)
    for (float x = -0.5f; x <= 4.5f; x += 0.25f) {
      const bool expected = oracle_inside(open_ccw, 0, x, y);
      EXPECT_EQ(inside(open_ccw, 0, x, y), expected) << x << "," << y;
      EXPECT_EQ(inside(closed_ccw, 0, x, y), expected) << x << "," << y;
      EXPECT_EQ(inside(closed_cw, 0, x, y), expected) << x << "," << y;
    }
  // The notch: (2, 1) is the reflex vertex; (2, 2) lies above it, outside.
  EXPECT_FALSE(inside(open_ccw, 0, 2.0f, 2.0f));
  EXPECT_TRUE(inside(open_ccw, 0, 2.0f, 0.5f));
  EXPECT_TRUE(inside(open_ccw, 0, 2.0f, 1.0f));  // the vertex itself: right/up nudge is inside
}

TEST(PipPredicate, HoleBoundaryBelongsToTheRegionRightOfIt) {
  PolygonArrays set;
  set.add_polygon(rectangle(0, 0, 10, 10));
  set.add_hole(rectangle(2, 2, 4, 4));
  EXPECT_TRUE(inside(set, 0, 1.0f, 3.0f));
  EXPECT_FALSE(inside(set, 0, 3.0f, 3.0f));
  EXPECT_FALSE(inside(set, 0, 2.0f, 3.0f));  // hole's left edge: nudged into the hole
  EXPECT_TRUE(inside(set, 0, 4.0f, 3.0f));   // hole's right edge: nudged out of it
  EXPECT_FALSE(inside(set, 0, 3.0f, 2.0f));  // hole's bottom edge: nudged up into it
  EXPECT_TRUE(inside(set, 0, 3.0f, 4.0f));
}

TEST(PipPredicate, RingParityOfDegenerateRings) {
  // Zero-area rings (all on a line, or back and forth) contain nothing.
  const std::vector<float> line = {0, 0, 1, 1, 2, 2, 1, 1};
  const std::vector<float> same = {5, 5, 5, 5, 5, 5};
  for (float x = -1; x <= 3; x += 0.5f)
    for (float y = -1; y <= 3; y += 0.5f) {
      EXPECT_EQ(ring_crossing_parity(x, y, line.data(), 0, 4), 0);
      EXPECT_EQ(ring_crossing_parity(x, y, same.data(), 0, 3), 0);
    }
}

// Polygons that tile a region: every point of the region's half-open extent
// is inside exactly one tile, on shared edges and vertices too, and the
// points on its right and top borders in none.
void expect_tiling(const PolygonArrays& tiles, float extent) {
  for (float y = -1.0f; y <= extent + 1.0f; y += 0.125f)
    for (float x = -1.0f; x <= extent + 1.0f; x += 0.125f) {
      int hits = 0;
      for (int64_t t = 0; t < tiles.n_polygons(); ++t) hits += inside(tiles, t, x, y) ? 1 : 0;
      const int expected = x >= 0 && x < extent && y >= 0 && y < extent ? 1 : 0;
      EXPECT_EQ(hits, expected) << "point (" << x << ", " << y << ")";
    }
}

TEST(PipPredicate, SquareTilingCountsEachPointOnce) {
  PolygonArrays tiles;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 4; ++i) {
      std::vector<Vec2> square = rectangle(i, j, i + 1, j + 1);
      if ((i + j) % 2) std::reverse(square.begin(), square.end());  // both orientations
      tiles.add_polygon(square);
    }
  expect_tiling(tiles, 4.0f);
}

TEST(PipPredicate, TriangleTilingCountsEachPointOnce) {
  // Each unit square cut along a diagonal (alternating): shared sloped edges.
  PolygonArrays tiles;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 4; ++i) {
      const Vec2 a{float(i), float(j)}, b{float(i + 1), float(j)}, c{float(i + 1), float(j + 1)},
          d{float(i), float(j + 1)};
      if ((i + j) % 2) {
        tiles.add_polygon({a, b, c});
        tiles.add_polygon({a, c, d});
      } else {
        tiles.add_polygon({a, b, d});
        tiles.add_polygon({b, c, d});
      }
    }
  expect_tiling(tiles, 4.0f);
}

TEST(PipPredicate, IrregularFanOwnsItsCentreAndSpokesOnce) {
  // Triangles around an off-grid centre with irregular float vertices; the
  // centre and points on the spokes (exactly representable or not) are
  // inside exactly one triangle, as the oracle confirms.
  std::mt19937_64 rng(13);
  PolygonArrays fan;
  const Vec2 centre{0.3f, -0.7f};
  const std::vector<Vec2> rim = star(rng, centre.x, centre.y, 0.5f, 3.0f, 9, false);
  for (size_t i = 0; i < rim.size(); ++i)
    fan.add_polygon({centre, rim[i], rim[(i + 1) % rim.size()]});
  std::vector<Vec2> probes{centre};
  std::uniform_real_distribution<double> t(0.0, 1.0);
  for (const Vec2& v : rim)
    for (int k = 0; k < 20; ++k) {
      const double s = t(rng);
      probes.push_back({static_cast<float>(centre.x + s * (v.x - centre.x)),
                        static_cast<float>(centre.y + s * (v.y - centre.y))});
    }
  for (const Vec2& p : probes) {
    int hits = 0;
    for (int64_t f = 0; f < fan.n_polygons(); ++f) {
      const bool in = inside(fan, f, p.x, p.y);
      EXPECT_EQ(in, oracle_inside(fan, f, p.x, p.y));
      hits += in ? 1 : 0;
    }
    EXPECT_EQ(hits, 1) << "point (" << p.x << ", " << p.y << ")";
  }
}

TEST(PipPredicate, RandomStarsAgreeWithBothOracles) {
  std::mt19937_64 rng(14);
  for (int s = 0; s < 40; ++s) {
    PolygonArrays set;
    set.add_polygon(star(rng, 0, 0, 0.2f, 1.0f, 5 + s, s % 2 == 1));
    if (s % 3 == 0) set.add_hole(star(rng, 0, 0, 0.05f, 0.15f, 7, s % 2 == 0));
    const std::vector<float> xy = uniform_points(rng, 500, -1.2f, 1.2f);
    int decided = 0;
    for (size_t i = 0; i < xy.size() / 2; ++i) {
      const bool got = inside(set, 0, xy[2 * i], xy[2 * i + 1]);
      EXPECT_EQ(got, oracle_inside(set, 0, xy[2 * i], xy[2 * i + 1]));
      const int independent = long_double_inside(set, 0, xy[2 * i], xy[2 * i + 1], 1e-6L);
      if (independent < 0) continue;
      ++decided;
      EXPECT_EQ(got, independent == 1);
    }
    EXPECT_GT(decided, 400);
  }
}

// ---- Quadtree layout (common/quadtree_layout.h) -----------------------------------

TEST(QuadtreeLayout, MortonKeysInterleaveColumnAndRow) {
  using knn::quadtree::morton_key;
  EXPECT_EQ(morton_key(0, 0), 0u);
  EXPECT_EQ(morton_key(1, 0), 1u);
  EXPECT_EQ(morton_key(0, 1), 2u);
  EXPECT_EQ(morton_key(3, 5), 0b100111u);  // x = 011, y = 101 -> y2 x2 y1 x1 y0 x0
  EXPECT_EQ(morton_key(0xffff, 0), 0x55555555u);
  EXPECT_EQ(morton_key(0, 0xffff), 0xaaaaaaaau);
  // A key's quadrant at each depth is (row bit, column bit) of that level.
  const uint32_t key = morton_key(0xa5c3, 0x3c5a);
  uint32_t first = 0;
  for (int depth = 0; depth < knn::quadtree::kMaxDepth; ++depth) {
    const uint32_t q = knn::quadtree::child_quadrant(key, depth);
    const int bit = knn::quadtree::kMaxDepth - 1 - depth;
    EXPECT_EQ(q, ((0xa5c3u >> bit) & 1u) | (((0x3c5au >> bit) & 1u) << 1)) << "depth " << depth;
    first = knn::quadtree::child_first_key(first, depth, q);
  }
  EXPECT_EQ(first, key);
}

TEST(QuadtreeLayout, QuantisationIsMonotoneAndClamped) {
  using knn::quadtree::make_quantiser;
  using knn::quadtree::quantise;
  for (const float extent : {1e-30f, 1.0f, 1024.0f, 3e38f}) {
    const float lo = -extent, hi = extent;
    const knn::quadtree::Quantiser q = make_quantiser(lo, lo, hi, hi);
    EXPECT_EQ(quantise(lo, q.min_x, q.scale_x), 0u);
    EXPECT_EQ(quantise(hi, q.min_x, q.scale_x), knn::quadtree::kMaxCell);
    uint32_t previous = 0;
    for (int i = 0; i <= 1000; ++i) {
      const float v = lo + (hi / 500) * i;
      const uint32_t cell = quantise(std::min(v, hi), q.min_x, q.scale_x);
      EXPECT_GE(cell, previous) << "extent " << extent << " step " << i;
      previous = cell;
    }
  }
  const knn::quadtree::Quantiser flat = make_quantiser(5, 5, 5, 5);  // all points equal
  EXPECT_EQ(quantise(5, flat.min_x, flat.scale_x), 0u);
}

}  // namespace
}  // namespace knn_test
