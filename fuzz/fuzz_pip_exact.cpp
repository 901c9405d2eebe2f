// Fuzz target: point-in-polygon answers against exact arithmetic. Points
// and polygon vertices are floats m * 2^e with |m| < 2^24 and e within 30 of
// a fuzzed base exponent (subnormal to 2^100), so each one is an exact
// integer multiple of 2^base below 2^54 and every orientation determinant is
// an exact __int128. A fuzzed precision puts the points, the vertices or
// both in float64 (knn_quadtree_build_f64, the _f64 polygon calls): doubles
// are m * 2^e with |m| < 2^53 and e within 8 of the base, below 2^61 times
// 2^base (the determinant still fits), over the whole range the _f64 calls
// accept (base from -485; up to 2^500) when both are doubles. The oracle applies the header's rule itself (even-odd
// crossings of a ray towards +x, half-open in y, a crossing strictly right
// of the point; common/pip_predicate.h is not used): counts and lists must
// equal it for every polygon. Points are often placed on vertices, on
// vertex coordinate lines and on edges' grid, where the boundary rule
// decides. Rings that keep fewer than 3 vertices once consecutive repeats
// are dropped must be refused (INVALID_ARGUMENT).
#include <algorithm>
#include <cmath>
#include <vector>

#include "fuzz_support.h"

namespace {

using knn_fuzz::check_status;
using knn_fuzz::expect;

struct Grid {
  int base;    // every value is a multiple of 2^base
  int spread;  // exponents from base to base + spread
};

// A grid value: a float, or (f64) a double of up to 53 significant bits.
double grid_value(FuzzedDataProvider& in, const Grid& g, bool f64) {
  const int64_t limit = f64 ? (int64_t{1} << 53) - 1 : int64_t{1} << 23;
  const int64_t m = in.ConsumeIntegralInRange<int64_t>(-limit, limit);
  // Small mantissas most of the time: collinear points, shared lines.
  const int small = in.ConsumeIntegralInRange<int>(-8, 8);
  const int e = g.base + in.ConsumeIntegralInRange<int>(0, g.spread);
  return std::ldexp(static_cast<double>(in.ConsumeBool() ? small : m), e);
}

// The exact integer v / 2^base (v is a multiple of it, below 2^61).
__int128 exact(double v, const Grid& g) {
  return static_cast<__int128>(static_cast<long long>(std::ldexp(v, -g.base)));
}

bool is_float(double v) { return static_cast<double>(static_cast<float>(v)) == v; }

// The header's rule for one point and one polygon (all its rings).
bool inside(const double* p, const std::vector<double>& xy, const std::vector<int64_t>& rings,
            int64_t first_ring, int64_t last_ring, const Grid& g) {
  const __int128 px = exact(p[0], g), py = exact(p[1], g);
  bool in = false;
  for (int64_t r = first_ring; r < last_ring; ++r) {
    const int64_t begin = rings[r], end = rings[r + 1];
    for (int64_t v = begin; v < end; ++v) {
      const int64_t w = v + 1 < end ? v + 1 : begin;
      const __int128 ax = exact(xy[2 * v], g), ay = exact(xy[2 * v + 1], g);
      const __int128 bx = exact(xy[2 * w], g), by = exact(xy[2 * w + 1], g);
      if ((ay > py) == (by > py)) continue;
      const __int128 det = (bx - ax) * (py - ay) - (px - ax) * (by - ay);
      if (det != 0 && (det > 0) == (by > ay)) in = !in;
    }
  }
  return in;
}

// Vertices left once consecutive repeats, the closing one included, go.
int64_t distinct(const std::vector<double>& xy, int64_t begin, int64_t end) {
  int64_t count = 0;
  for (int64_t v = begin; v < end; ++v) {
    const int64_t prev = v == begin ? end - 1 : v - 1;
    if (xy[2 * v] != xy[2 * prev] || xy[2 * v + 1] != xy[2 * prev + 1]) ++count;
  }
  return count;
}

// The calls of each precision.
int build(const std::vector<double>& points, bool f64, const knn_options* opt, knn_quadtree** out) {
  const int64_t n = static_cast<int64_t>(points.size() / 2);
  if (f64) return knn_quadtree_build_f64(points.data(), n, opt, out);
  const std::vector<float> narrow(points.begin(), points.end());  // exact: float grid values
  return knn_quadtree_build(narrow.data(), n, opt, out);
}

struct PolygonCalls {
  std::vector<double> xy;
  std::vector<float> narrow;  // xy as floats, when the vertices are floats
  bool f64;
  const std::vector<int64_t>& rings;
  const std::vector<int64_t>& polygons;

  int count(const knn_quadtree* tree, int64_t* counts, const knn_options* opt) const {
    const int64_t n_rings = static_cast<int64_t>(rings.size()) - 1;
    const int64_t n_polygons = static_cast<int64_t>(polygons.size()) - 1;
    return f64 ? knn_points_in_polygons_count_f64(tree, xy.data(), rings.data(), n_rings,
                                                  polygons.data(), n_polygons, counts, opt)
               : knn_points_in_polygons_count(tree, narrow.data(), rings.data(), n_rings,
                                              polygons.data(), n_polygons, counts, opt);
  }
  int fill(const knn_quadtree* tree, const int64_t* offsets, int64_t* indices,
           const knn_options* opt) const {
    const int64_t n_rings = static_cast<int64_t>(rings.size()) - 1;
    const int64_t n_polygons = static_cast<int64_t>(polygons.size()) - 1;
    return f64 ? knn_points_in_polygons_f64(tree, xy.data(), rings.data(), n_rings,
                                            polygons.data(), n_polygons, offsets, indices, opt)
               : knn_points_in_polygons(tree, narrow.data(), rings.data(), n_rings,
                                        polygons.data(), n_polygons, offsets, indices, opt);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  // Bit 0: points in float64; bit 1: vertices in float64.
  const int precision = in.ConsumeIntegralInRange<int>(0, 3);
  const bool points_f64 = (precision & 1) != 0, vertices_f64 = (precision & 2) != 0;
  Grid g;
  if (points_f64 && vertices_f64) {
    g.base = in.ConsumeIntegralInRange<int>(-485, 430);
    g.spread = in.ConsumeIntegralInRange<int>(0, 8);
  } else {
    g.base = in.ConsumeIntegralInRange<int>(-149, 70);
    g.spread = in.ConsumeIntegralInRange<int>(0, precision == 0 ? 30 : 8);
  }

  // Polygons: 1..3, each with 1..3 rings of 3..8 vertices.
  std::vector<double> xy;
  std::vector<int64_t> rings{0}, polygons{0};
  const int n_polygons = in.ConsumeIntegralInRange<int>(1, 3);
  for (int p = 0; p < n_polygons; ++p) {
    for (int r = in.ConsumeIntegralInRange<int>(1, 3); r > 0; --r) {
      for (int v = in.ConsumeIntegralInRange<int>(3, 8); v > 0; --v) {
        // A repeat of an earlier vertex now and then (shared vertices,
        // repeats, closed rings).
        if (!xy.empty() && in.ConsumeIntegralInRange<int>(0, 5) == 0) {
          const size_t from = in.ConsumeIntegralInRange<size_t>(0, xy.size() / 2 - 1);
          xy.push_back(xy[2 * from]);
          xy.push_back(xy[2 * from + 1]);
        } else {
          xy.push_back(grid_value(in, g, vertices_f64));
          xy.push_back(grid_value(in, g, vertices_f64));
        }
      }
      rings.push_back(static_cast<int64_t>(xy.size() / 2));
    }
    polygons.push_back(static_cast<int64_t>(rings.size()) - 1);
  }
  const int64_t n_rings = static_cast<int64_t>(rings.size()) - 1;
  bool valid = true;
  for (int64_t r = 0; r < n_rings; ++r) valid = valid && distinct(xy, rings[r], rings[r + 1]) >= 3;

  // Points: fresh grid values, vertices, or a vertex's x with another's y
  // (float points take a double vertex's coordinate only when it is a float).
  const int64_t n_points = in.ConsumeIntegralInRange<int64_t>(0, 200);
  std::vector<double> points(static_cast<size_t>(n_points) * 2);
  const size_t n_vertices = xy.size() / 2;
  for (int64_t i = 0; i < n_points; ++i) {
    double* p = &points[static_cast<size_t>(i) * 2];
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        p[0] = grid_value(in, g, points_f64);
        p[1] = grid_value(in, g, points_f64);
        break;
      case 1: {
        const size_t v = in.ConsumeIntegralInRange<size_t>(0, n_vertices - 1);
        p[0] = xy[2 * v];
        p[1] = xy[2 * v + 1];
        break;
      }
      default:
        p[0] = xy[2 * in.ConsumeIntegralInRange<size_t>(0, n_vertices - 1)];
        p[1] = xy[2 * in.ConsumeIntegralInRange<size_t>(0, n_vertices - 1) + 1];
        break;
    }
    for (int d = 0; d < 2; ++d)
      if (!points_f64 && !is_float(p[d])) p[d] = grid_value(in, g, false);
  }

  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.leaf_size = in.ConsumeIntegralInRange<int>(0, 6);
  opt.threads = in.ConsumeIntegralInRange<int>(0, 2);
  knn_quadtree* tree = nullptr;
  int status = build(points, points_f64, &opt, &tree);
  check_status(status);
  expect(status == KNN_OK && tree != nullptr, "a quadtree build of finite points failed", status);

  const PolygonCalls calls{xy, std::vector<float>(xy.begin(), xy.end()), vertices_f64, rings,
                           polygons};
  std::vector<int64_t> counts(static_cast<size_t>(n_polygons), -7);
  status = calls.count(tree, counts.data(), &opt);
  check_status(status);
  if (!valid) {
    expect(status == KNN_ERR_INVALID_ARGUMENT, "a degenerate ring was accepted", status);
    for (int64_t c : counts) expect(c == -7, "a refused call wrote its counts", status);
    check_status(knn_quadtree_free(tree));
    return 0;
  }
  expect(status == KNN_OK, "valid polygons were refused", status);

  std::vector<int64_t> offsets(static_cast<size_t>(n_polygons) + 1, 0);
  std::vector<std::vector<int64_t>> want(static_cast<size_t>(n_polygons));
  for (int p = 0; p < n_polygons; ++p) {
    for (int64_t i = 0; i < n_points; ++i)
      if (inside(&points[static_cast<size_t>(i) * 2], xy, rings, polygons[p], polygons[p + 1], g))
        want[p].push_back(i);
    if (counts[p] != static_cast<int64_t>(want[p].size())) {
      std::fprintf(stderr, "polygon %d: count %lld, exact %zu\n", p,
                   static_cast<long long>(counts[p]), want[p].size());
      knn_fuzz::finding("a point-in-polygon count differs from exact arithmetic", status);
    }
    offsets[p + 1] = offsets[p] + counts[p];
  }
  std::vector<int64_t> indices(static_cast<size_t>(offsets.back()), -7);
  status = calls.fill(tree, offsets.data(), indices.data(), &opt);
  check_status(status);
  expect(status == KNN_OK, "the lists failed where the counts succeeded", status);
  for (int p = 0; p < n_polygons; ++p)
    expect(std::equal(want[p].begin(), want[p].end(), indices.begin() + offsets[p]),
           "a point-in-polygon list differs from exact arithmetic", status);
  check_status(knn_quadtree_free(tree));
  return 0;
}
