// Point-in-polygon on the CUDA backend, through the public API: against the
// exact brute-force oracle of tests/support/pip_oracle.h where that is affordable,
// and against the OpenMP backend (itself checked against the oracle in
// test_pip_cpu) on the large cases: many small polygons, polygons of 10^5
// vertices, output split into chunks. Every test skips with "no CUDA device"
// where cuGetDeviceCount() is 0, except the host check of the exact
// segment/box test the GPU query prunes with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../cuda/quadtree/quadtree_geometry.h"
#include "gpu_test_support.h"
#include "knn_gpgpu.h"
#include "pip_api_calls.h"
#include "pip_f64_cases.h"
#include "pip_oracle.h"

namespace knn_test {
namespace {

knn_options options(int backend, int leaf_size = 0) {
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = backend;
  opt.leaf_size = leaf_size;
  return opt;
}

// Builds a quadtree with `opt`, counts, fills; polygon p's points as given.
PipAnswer points_in_polygons(const std::vector<float>& xy, const PolygonArrays& set,
                             const knn_options& opt) {
  knn_quadtree* tree = nullptr;
  const int built = knn_quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, &tree);
  EXPECT_EQ(built, KNN_OK) << knn_last_error();
  if (built != KNN_OK) return {};
  const PipAnswer answer = count_then_fill(tree, set, opt, true);
  EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
  return answer;
}

void expect_same(const PipAnswer& got, const PipAnswer& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t p = 0; p < got.size(); ++p)
    ASSERT_EQ(got[p], expected[p]) << what << ": polygon " << p << " (" << expected[p].size()
                                   << " points expected, " << got[p].size() << " found)";
}

// The CUDA backend with several leaf capacities against the exact oracle.
void expect_cuda_matches_oracle(const std::vector<float>& xy, const PolygonArrays& set,
                                const std::string& what) {
  const PipAnswer expected = oracle_points_in_polygons(xy, set);
  for (const int leaf_size : {0, 1, 7, 1000})
    expect_same(points_in_polygons(xy, set, options(KNN_BACKEND_CUDA, leaf_size)), expected,
                what + ", leaf_size " + std::to_string(leaf_size));
}

// The CUDA backend against the OpenMP backend.
void expect_cuda_matches_openmp(const std::vector<float>& xy, const PolygonArrays& set,
                                const std::string& what, knn_options cuda_opt) {
  const PipAnswer expected = points_in_polygons(xy, set, options(KNN_BACKEND_OPENMP));
  expect_same(points_in_polygons(xy, set, cuda_opt), expected, what);
}

// Rectangles, convex and concave stars of both orientations, polygons with
// holes (one touching the outer ring at a vertex) over [lo, hi]^2.
PolygonArrays assorted_polygons(std::mt19937_64& rng, float lo, float hi, int count) {
  std::uniform_real_distribution<float> u(lo, hi);
  const float s = hi - lo;
  PolygonArrays set;
  for (int i = 0; i < count; ++i) {
    const float cx = u(rng), cy = u(rng);
    switch (i % 4) {
      case 0: {
        const float x = u(rng), y = u(rng);
        set.add_polygon(
            rectangle(std::min(cx, x), std::min(cy, y), std::max(cx, x), std::max(cy, y)));
        break;
      }
      case 1:
        set.add_polygon(star(rng, cx, cy, 0.25f * s, 0.25f * s, 5 + i % 29, i % 8 == 1));
        break;
      case 2:
        set.add_polygon(star(rng, cx, cy, 0.03f * s, 0.35f * s, 9 + i % 50, i % 8 == 2));
        break;
      default:
        set.add_polygon(rectangle(cx - 0.3f * s, cy - 0.3f * s, cx + 0.3f * s, cy + 0.3f * s));
        set.add_hole(star(rng, cx, cy, 0.05f * s, 0.15f * s, 11, true));
        set.add_hole({{cx + 0.3f * s, cy + 0.3f * s},
                      {cx + 0.2f * s, cy + 0.25f * s},
                      {cx + 0.25f * s, cy + 0.2f * s}});
        break;
    }
  }
  return set;
}

// The points, then every vertex of the polygons and their edges' midpoints.
std::vector<float> with_boundary_points(std::vector<float> xy, const PolygonArrays& set) {
  const std::vector<float> boundary = boundary_points(set);
  xy.insert(xy.end(), boundary.begin(), boundary.end());
  return xy;
}

// Integer geometry for the segment/box oracle: exact in int64.
struct IPoint {
  int64_t x, y;
};

int orient(IPoint a, IPoint b, IPoint p) {
  const int64_t d = (b.x - a.x) * (p.y - a.y) - (p.x - a.x) * (b.y - a.y);
  return (d > 0) - (d < 0);
}

bool within(IPoint a, IPoint b, IPoint p) {  // p collinear with a, b: on the closed segment?
  return std::min(a.x, b.x) <= p.x && p.x <= std::max(a.x, b.x) && std::min(a.y, b.y) <= p.y &&
         p.y <= std::max(a.y, b.y);
}

bool segments_meet(IPoint p1, IPoint p2, IPoint q1, IPoint q2) {
  const int o1 = orient(p1, p2, q1), o2 = orient(p1, p2, q2);
  const int o3 = orient(q1, q2, p1), o4 = orient(q1, q2, p2);
  if (o1 * o2 < 0 && o3 * o4 < 0) return true;
  return (o1 == 0 && within(p1, p2, q1)) || (o2 == 0 && within(p1, p2, q2)) ||
         (o3 == 0 && within(q1, q2, p1)) || (o4 == 0 && within(q1, q2, p2));
}

// The segment meets the closed box when an end lies in it or it meets a side.
bool oracle_segment_meets_box(IPoint a, IPoint b, IPoint lo, IPoint hi) {
  const auto in_box = [&](IPoint p) {
    return lo.x <= p.x && p.x <= hi.x && lo.y <= p.y && p.y <= hi.y;
  };
  if (in_box(a) || in_box(b)) return true;
  const IPoint c[4] = {lo, {hi.x, lo.y}, hi, {lo.x, hi.y}};
  for (int i = 0; i < 4; ++i)
    if (segments_meet(a, b, c[i], c[(i + 1) % 4])) return true;
  return false;
}

TEST(PipGpuGeometry, SegmentBoxTestIsExact) {
  // Coordinates offset + i/8 are exact floats; the oracle works on the i.
  std::mt19937_64 rng(60);
  std::uniform_int_distribution<int64_t> coordinate(-12, 12);
  for (const float offset : {0.0f, 1e6f, -3e5f}) {
    int meets = 0, misses = 0;
    for (int trial = 0; trial < 200000; ++trial) {
      const IPoint a{coordinate(rng), coordinate(rng)}, b{coordinate(rng), coordinate(rng)};
      IPoint lo{coordinate(rng), coordinate(rng)}, hi{coordinate(rng), coordinate(rng)};
      if (lo.x > hi.x) std::swap(lo.x, hi.x);
      if (lo.y > hi.y) std::swap(lo.y, hi.y);
      const auto f = [&](int64_t i) { return offset + static_cast<float>(i) / 8; };
      const bool expected = oracle_segment_meets_box(a, b, lo, hi);
      ASSERT_EQ(knn::quadtree::segment_meets_box(f(a.x), f(a.y), f(b.x), f(b.y), f(lo.x), f(lo.y),
                                                 f(hi.x), f(hi.y)),
                expected)
          << "segment (" << a.x << "," << a.y << ")-(" << b.x << "," << b.y << "), box (" << lo.x
          << "," << lo.y << ")-(" << hi.x << "," << hi.y << "), offset " << offset;
      ++(expected ? meets : misses);
    }
    EXPECT_GT(meets, 10000);
    EXPECT_GT(misses, 10000);
  }
}

TEST(PipGpuGeometry, SegmentBoxTestIsExactForDoubles) {
  // Near-degenerate double geometry at a UTM offset: boxes whose corners lie
  // on the segment's line or one ulp off it, against the exact oracle
  // (oracle_orientation on the doubles).
  std::mt19937_64 rng(70);
  std::uniform_real_distribution<double> u(-1.0, 1.0), fraction(0.0, 1.0);
  std::uniform_int_distribution<int> ulps(-1, 1);
  const double inf = std::numeric_limits<double>::infinity();
  int meets = 0, misses = 0;
  for (const double offset : {0.0, 4.5e6, -1e-3}) {
    for (int trial = 0; trial < 20000; ++trial) {
      const double ax = offset + u(rng), ay = offset + u(rng);
      const double bx = offset + u(rng), by = offset + u(rng);
      // A corner on (or one ulp off) the line through a and b.
      const double t = 2 * fraction(rng) - 0.5;
      double cx = ax + t * (bx - ax), cy = ay + t * (by - ay);
      const int k = ulps(rng);
      if (k != 0) cx = std::nextafter(cx, k > 0 ? inf : -inf);
      const double w = std::ldexp(fraction(rng), -(trial % 40));
      const double h = std::ldexp(fraction(rng), -(trial % 37));
      const bool corner_low = trial % 2 == 0;
      const double lo_x = corner_low ? cx : cx - w, lo_y = corner_low ? cy : cy - h;
      const double hi_x = corner_low ? cx + w : cx, hi_y = corner_low ? cy + h : cy;
      // Exact oracle: an end in the box, or the segment meeting a side.
      const auto in_box = [&](double x, double y) {
        return lo_x <= x && x <= hi_x && lo_y <= y && y <= hi_y;
      };
      const auto on_closed = [](double px, double py, double qx, double qy, double x, double y) {
        return std::min(px, qx) <= x && x <= std::max(px, qx) && std::min(py, qy) <= y &&
               y <= std::max(py, qy);
      };
      const auto meet = [&](double p1x, double p1y, double p2x, double p2y, double q1x, double q1y,
                            double q2x, double q2y) {
        const int o1 = oracle_orientation(p1x, p1y, p2x, p2y, q1x, q1y);
        const int o2 = oracle_orientation(p1x, p1y, p2x, p2y, q2x, q2y);
        const int o3 = oracle_orientation(q1x, q1y, q2x, q2y, p1x, p1y);
        const int o4 = oracle_orientation(q1x, q1y, q2x, q2y, p2x, p2y);
        if (o1 * o2 < 0 && o3 * o4 < 0) return true;
        return (o1 == 0 && on_closed(p1x, p1y, p2x, p2y, q1x, q1y)) ||
               (o2 == 0 && on_closed(p1x, p1y, p2x, p2y, q2x, q2y)) ||
               (o3 == 0 && on_closed(q1x, q1y, q2x, q2y, p1x, p1y)) ||
               (o4 == 0 && on_closed(q1x, q1y, q2x, q2y, p2x, p2y));
      };
      const double corner[4][2] = {{lo_x, lo_y}, {hi_x, lo_y}, {hi_x, hi_y}, {lo_x, hi_y}};
      bool expected = in_box(ax, ay) || in_box(bx, by);
      for (int i = 0; i < 4 && !expected; ++i)
        expected = meet(ax, ay, bx, by, corner[i][0], corner[i][1], corner[(i + 1) % 4][0],
                        corner[(i + 1) % 4][1]);
      ASSERT_EQ(knn::quadtree::segment_meets_box(ax, ay, bx, by, lo_x, lo_y, hi_x, hi_y), expected)
          << "segment (" << ax << "," << ay << ")-(" << bx << "," << by << "), box (" << lo_x << ","
          << lo_y << ")-(" << hi_x << "," << hi_y << ")";
      ++(expected ? meets : misses);
    }
  }
  EXPECT_GT(meets, 5000);
  EXPECT_GT(misses, 5000);
}

// Float64: the CUDA backend with several leaf capacities against the exact
// oracle on the shared double cases (pip_f64_cases.h).
void expect_cuda_matches_oracle_f64(const F64Case& c) {
  const PipAnswer expected = oracle_points_in_polygons(c.xy, c.polygons);
  for (const int leaf_size : {0, 1, 7, 1000})
    expect_same(build_count_fill(c.xy, c.polygons, options(KNN_BACKEND_CUDA, leaf_size)), expected,
                std::string(c.name) + ", leaf_size " + std::to_string(leaf_size));
}

TEST(PipGpuF64, UtmLatLonAndTilingMatchOracle) {
  SKIP_WITHOUT_DEVICE();
  expect_cuda_matches_oracle_f64(utm_case(71));
  expect_cuda_matches_oracle_f64(latlon_case(72));
  const F64Case tiling = tiling_case(73, 5);
  expect_cuda_matches_oracle_f64(tiling);
  expect_cuda_matches_oracle_f64(scaled_case(tiling, 498, "tiling scaled by 2^498"));
  expect_cuda_matches_oracle_f64(scaled_case(tiling, -480, "tiling scaled by 2^-480"));
  expect_cuda_matches_oracle_f64(extreme_range_case(76));
}

TEST(PipGpuF64, MixedPrecisionMatchesOracle) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(74);
  const PolygonArrays set = assorted_polygons(rng, -20, 20, 24);
  const std::vector<float> xy = with_boundary_points(uniform_points(rng, 5000, -25, 25), set);
  const std::vector<double> xy64(xy.begin(), xy.end());
  const PolygonArraysd set64 = set.as<double>();
  const PipAnswer expected = oracle_points_in_polygons(xy64, set64);
  const knn_options opt = options(KNN_BACKEND_CUDA);
  expect_same(build_count_fill(xy64, set64, opt), expected, "double tree, double polygons");
  expect_same(build_count_fill(xy, set64, opt), expected, "float tree, double polygons");
  expect_same(build_count_fill(xy64, set, opt), expected, "double tree, float polygons");
  expect_same(build_count_fill(xy, set, opt), expected, "float tree, float polygons");
}

// Thousands of small double polygons (the thread path) and one of 2 * 10^4
// vertices (the warp path) at a UTM offset, CUDA against OpenMP.
TEST(PipGpuF64, ThreadAndWarpPathsMatchOpenMp) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(75);
  const double x0 = 4500000.0, y0 = 5500000.0, mm = 0.001;
  PolygonArraysd set;
  for (int j = 0; j < 64; ++j)
    for (int i = 0; i < 64; ++i) {
      const double ax = x0 + i * mm, ay = y0 + j * mm;
      set.add_polygon({{ax, ay}, {ax + mm, ay}, {ax + mm, ay + mm}});
      set.add_polygon({{ax, ay}, {ax + mm, ay + mm}, {ax, ay + mm}});
    }
  set.add_polygon(star_ring(rng, x0 + 0.032, y0 + 0.032, 0.03, 20000));
  std::uniform_real_distribution<double> u(0.0, 0.064);
  std::vector<double> xy;
  for (int k = 0; k < 200000; ++k) push_point(xy, x0 + u(rng), y0 + u(rng));
  for (int i = 0; i <= 256; ++i)
    for (int j = 0; j <= 256; ++j) push_point(xy, x0 + i * 0.25 * mm, y0 + j * 0.25 * mm);
  const PipAnswer expected = build_count_fill(xy, set, options(KNN_BACKEND_OPENMP));
  expect_same(build_count_fill(xy, set, options(KNN_BACKEND_CUDA)), expected, "CUDA");
  knn_options chunked = options(KNN_BACKEND_CUDA);
  chunked.device_memory_limit = size_t{16} << 20;
  expect_same(build_count_fill(xy, set, chunked), expected, "CUDA, chunked fill");
}

TEST(PipGpu, UniformPointsAssortedPolygonsMatchOracle) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(61);
  const PolygonArrays set = assorted_polygons(rng, 0, 100, 40);
  const std::vector<float> xy = with_boundary_points(uniform_points(rng, 20011, 0, 100), set);
  expect_cuda_matches_oracle(xy, set, "uniform + boundary points");
}

TEST(PipGpu, ClusteredDuplicatedNegativePointsMatchOracle) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(62);
  const PolygonArrays set = assorted_polygons(rng, -50, 50, 24);
  std::normal_distribution<float> cluster(0, 1.5f);
  std::vector<float> xy;
  for (int i = 0; i < 6000; ++i) {
    const float c = i % 3 == 0 ? -20.0f : 10.0f;
    xy.push_back(c + cluster(rng));
    xy.push_back(c + cluster(rng));
  }
  for (int i = 0; i < 3000; ++i) {  // duplicates far beyond any leaf: the depth guard
    xy.push_back(-20.0f);
    xy.push_back(10.0f);
  }
  expect_cuda_matches_oracle(xy, set, "clustered with duplicates");
}

TEST(PipGpu, DegeneratePointSetsMatchOracle) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(63);
  PolygonArrays set = assorted_polygons(rng, 0, 10, 16);
  set.add_polygon(rectangle(3, 3, 4, 4));  // (3, 3) on its lower left corner: inside
  set.add_polygon(rectangle(2, 2, 3, 3));  // (3, 3) on its upper right corner: outside
  expect_cuda_matches_oracle(std::vector<float>(2 * 2049, 3.0f), set, "all points equal");
  expect_cuda_matches_oracle({3.0f, 3.5f}, set, "one point");
  std::vector<float> line;
  for (int i = 0; i < 5000; ++i) {  // a diagonal, and a horizontal line on edges
    line.push_back(i * 0.002f);
    line.push_back(i * 0.002f);
    line.push_back(i * 0.002f);
    line.push_back(3.0f);
  }
  expect_cuda_matches_oracle(line, set, "points on lines");
}

TEST(PipGpu, HugeAndTinyCoordinatesMatchOracle) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(64);
  // Centres within +-1.5e38: the span (3e38) and every vertex stay finite.
  const PolygonArrays huge = assorted_polygons(rng, -1.5e38f, 1.5e38f, 12);
  expect_cuda_matches_oracle(uniform_points(rng, 4000, -3e38f, 3e38f), huge, "huge");
  const PolygonArrays tiny = assorted_polygons(rng, -1e-36f, 1e-36f, 12);
  expect_cuda_matches_oracle(uniform_points(rng, 4000, -1e-36f, 1e-36f), tiny, "tiny");
}

TEST(PipGpu, SquareTilingPutsEveryGridPointInOneSquare) {
  SKIP_WITHOUT_DEVICE();
  PolygonArrays tiles;
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 16; ++i) tiles.add_polygon(rectangle(i, j, i + 1, j + 1));
  std::vector<float> xy;
  for (int i = -8; i <= 136; ++i)  // eighths: many points on shared edges and corners
    for (int j = -8; j <= 136; ++j) {
      xy.push_back(i * 0.125f);
      xy.push_back(j * 0.125f);
    }
  for (const int leaf_size : {0, 1, 4}) {
    const PipAnswer got = points_in_polygons(xy, tiles, options(KNN_BACKEND_CUDA, leaf_size));
    std::vector<int> hits(xy.size() / 2, 0);
    for (const std::vector<int64_t>& square : got)
      for (const int64_t i : square) ++hits[i];
    for (size_t i = 0; i < hits.size(); ++i) {
      const float x = xy[2 * i], y = xy[2 * i + 1];
      ASSERT_EQ(hits[i], x >= 0 && x < 16 && y >= 0 && y < 16 ? 1 : 0)
          << "(" << x << ", " << y << "), leaf_size " << leaf_size;
    }
    expect_same(got, oracle_points_in_polygons(xy, tiles), "tiling");
  }
}

TEST(PipGpu, ManySmallPolygonsMatchOpenMp) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(65);
  std::uniform_real_distribution<float> u(0, 1000);
  PolygonArrays set;
  for (int i = 0; i < 10000; ++i) {
    const float cx = u(rng), cy = u(rng);
    if (i % 2 == 0)
      set.add_polygon(rectangle(cx, cy, cx + 5 + i % 17, cy + 3 + i % 11));
    else
      set.add_polygon(star(rng, cx, cy, 1, 12, 6 + i % 30, i % 4 == 1));
  }
  const std::vector<float> xy = uniform_points(rng, 300007, 0, 1000);
  expect_cuda_matches_openmp(xy, set, "10^4 small polygons", options(KNN_BACKEND_CUDA));
  expect_cuda_matches_openmp(xy, set, "10^4 small polygons, leaf 1", options(KNN_BACKEND_CUDA, 1));
}

// Enough polygons of at most 32 edges for the thread-per-polygon path
// (cuda/quadtree/quadtree_thread_walk.cuh), mixed with warp-path polygons: a tiling of
// triangles with shared edges and vertices, grid points on those edges, small
// rectangles (closed rings too) with holes, stars, and one large rectangle
// whose inner nodes are emitted whole.
TEST(PipGpu, ManyFewEdgePolygonsTakeTheThreadPathAndMatchOracle) {
  SKIP_WITHOUT_DEVICE();
  constexpr int kTiles = 48;  // 2 * 48^2 = 4608 triangles
  std::mt19937_64 rng(68);
  PolygonArrays set;
  for (int j = 0; j < kTiles; ++j)
    for (int i = 0; i < kTiles; ++i) {
      const float x0 = i, y0 = j, x1 = i + 1, y1 = j + 1;
      if ((i + j) % 2 == 0) {
        set.add_polygon({{x0, y0}, {x1, y0}, {x1, y1}});
        set.add_polygon({{x0, y0}, {x1, y1}, {x0, y1}, {x0, y0}});  // closed ring
      } else {
        set.add_polygon({{x1, y0}, {x1, y1}, {x0, y1}});
        set.add_polygon({{x0, y0}, {x1, y0}, {x0, y1}});
      }
    }
  const int64_t triangles = set.n_polygons();
  std::uniform_real_distribution<float> u(0, kTiles);
  for (int i = 0; i < 300; ++i) {
    const float cx = std::floor(u(rng)), cy = std::floor(u(rng));
    set.add_polygon(rectangle(cx, cy, cx + 1 + i % 5, cy + 1 + i % 3));
    if (i % 3 == 0)
      set.add_hole({{cx + 0.25f, cy + 0.25f}, {cx + 0.75f, cy + 0.25f}, {cx + 0.5f, cy + 0.75f}});
    set.add_polygon(star(rng, cx, cy, 0.5f, 4, 3 + i % 30, i % 2 == 0));
  }
  set.add_polygon(rectangle(1, 1, kTiles - 1, kTiles - 1));
  set.add_polygon(star(rng, kTiles / 2, kTiles / 2, 5, 20, 200, false));  // warp path

  std::vector<float> grid;  // quarters: on edges, diagonals and vertices
  for (int i = -4; i <= 4 * kTiles + 4; ++i)
    for (int j = -4; j <= 4 * kTiles + 4; ++j) {
      grid.push_back(i * 0.25f);
      grid.push_back(j * 0.25f);
    }
  expect_cuda_matches_oracle(grid, set, "thread path, grid points");
  const PipAnswer got = points_in_polygons(grid, set, options(KNN_BACKEND_CUDA));
  std::vector<int> hits(grid.size() / 2, 0);
  for (int64_t p = 0; p < triangles; ++p)
    for (const int64_t i : got[p]) ++hits[i];
  for (size_t i = 0; i < hits.size(); ++i) {
    const float x = grid[2 * i], y = grid[2 * i + 1];
    ASSERT_EQ(hits[i], x >= 0 && x < kTiles && y >= 0 && y < kTiles ? 1 : 0)
        << "(" << x << ", " << y << ")";
  }
  const std::vector<float> xy = with_boundary_points(uniform_points(rng, 400009, 0, kTiles), set);
  expect_cuda_matches_openmp(xy, set, "thread path", options(KNN_BACKEND_CUDA));
  expect_cuda_matches_openmp(xy, set, "thread path, leaf 1000", options(KNN_BACKEND_CUDA, 1000));
  knn_options chunked = options(KNN_BACKEND_CUDA);
  chunked.device_memory_limit = size_t{16} << 20;
  expect_cuda_matches_openmp(xy, set, "thread path, chunked fill", chunked);
}

TEST(PipGpu, PolygonsOfHundredThousandVerticesMatchOpenMp) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(66);
  PolygonArrays set;
  set.add_polygon(star(rng, 50, 50, 20, 49, 100000, false));
  set.add_hole(star(rng, 50, 50, 3, 15, 20000, true));
  set.add_polygon(star(rng, 30, 60, 5, 25, 100000, true));
  set.add_polygon(rectangle(10, 10, 90, 90));
  const std::vector<float> xy = with_boundary_points(uniform_points(rng, 200003, 0, 100), set);
  expect_cuda_matches_openmp(xy, set, "10^5 vertices", options(KNN_BACKEND_CUDA));
  // Independent check of points far from every edge.
  const PipAnswer got = points_in_polygons(xy, set, options(KNN_BACKEND_CUDA));
  for (int64_t p = 0; p < set.n_polygons(); ++p) {
    std::vector<char> inside(xy.size() / 2, 0);
    for (const int64_t i : got[p]) inside[i] = 1;
    for (size_t i = 0; i < inside.size(); i += 97) {
      const int expected = long_double_inside(set, p, xy[2 * i], xy[2 * i + 1], 1e-4L);
      if (expected < 0) continue;  // near an edge: the exact oracles decide those
      ASSERT_EQ(inside[i], expected) << "polygon " << p << ", point " << i;
    }
  }
}

TEST(PipGpu, OutputSplitIntoChunksMatchesOpenMp) {
  SKIP_WITHOUT_DEVICE();
  // Overlapping polygons that hold 3 million indices in all, with a device
  // memory limit that forces the fill into several chunks.
  std::mt19937_64 rng(67);
  PolygonArrays set;
  for (int i = 0; i < 12; ++i) set.add_polygon(star(rng, 50, 50, 40, 60, 40 + i, i % 2 == 0));
  const std::vector<float> xy = uniform_points(rng, 300000, 0, 100);
  knn_options opt = options(KNN_BACKEND_CUDA);
  opt.device_memory_limit = size_t{16} << 20;
  expect_cuda_matches_openmp(xy, set, "chunked fill", opt);
}

TEST(PipGpu, EmptyInputs) {
  SKIP_WITHOUT_DEVICE();
  PolygonArrays set;
  set.add_polygon(rectangle(0, 0, 1, 1));
  expect_same(points_in_polygons({}, set, options(KNN_BACKEND_CUDA)), PipAnswer(1), "no points");
  expect_same(points_in_polygons({0.5f, 0.5f}, PolygonArrays(), options(KNN_BACKEND_CUDA)),
              PipAnswer(), "no polygons");
}

}  // namespace
}  // namespace knn_test
