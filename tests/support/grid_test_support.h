// What the grid tests of both backends share: engine calls (engine_calls.h),
// queries far outside the data, and the check of KNN_STRUCTURE_GRID through
// the index API.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine_calls.h"
#include "index_test_helpers.h"
#include "test_data.h"

namespace knn_test {

// Queries around and far outside the data: the distribution's own queries,
// then points 1e3 and 1e6 box sizes away and at the ends of the accepted
// coordinate range (2^61 in 3-D).
inline std::vector<float> queries_with_outliers(Dist dist, int64_t m, uint64_t seed) {
  std::vector<float> q = make_query_rows(dist, m, 3, seed);
  const float edge = coordinate_limit(3);
  const float far[][3] = {{1e3f, -2e3f, 5e2f},
                          {-1e6f, 0.5f, 0.25f},
                          {0.0f, 3e6f, -3e6f},
                          {-1e18f, 1e18f, edge},
                          {edge, -edge, 0.0f}};
  for (const auto& f : far) q.insert(q.end(), f, f + 3);
  return q;
}

// The degenerate sets of issue #18: n collinear points `spacing` apart
// (at 1e-30 every float32 squared distance underflows to 0, so only the
// indices order the neighbours, and the k smallest may lie at the far end
// of the line). Along the x axis, or along the diagonal (1, 2, 3); indices
// ascend along the line or are shuffled.
enum class LineShape { Ascending, Shuffled, Diagonal };

inline const char* line_shape_name(LineShape s) {
  return s == LineShape::Ascending  ? "ascending"
         : s == LineShape::Shuffled ? "shuffled"
                                    : "diagonal";
}

inline std::vector<float> collinear_points(int64_t n, double spacing, LineShape shape) {
  std::vector<int64_t> step(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) step[static_cast<size_t>(i)] = i;
  if (shape == LineShape::Shuffled) {
    Rng rng(0x1173);
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(step[static_cast<size_t>(i)], step[static_cast<size_t>(rng.below(i + 1))]);
  }
  std::vector<float> rows(static_cast<size_t>(3 * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(step[static_cast<size_t>(i)]) * spacing;
    rows[static_cast<size_t>(3 * i)] = static_cast<float>(t);
    if (shape == LineShape::Diagonal) {
      rows[static_cast<size_t>(3 * i + 1)] = static_cast<float>(2 * t);
      rows[static_cast<size_t>(3 * i + 2)] = static_cast<float>(3 * t);
    }
  }
  return rows;
}

// The lines both grid engines are tested on: points 1e-30 apart (every
// distance 0: only indices decide) and 1.0 apart, indices ascending and
// shuffled, and 1e-30 apart along the diagonal.
struct CollinearCase {
  double spacing;
  LineShape shape;
  int64_t n;
};
inline std::vector<CollinearCase> collinear_cases() {
  return {{1e-30, LineShape::Ascending, 1200},
          {1e-30, LineShape::Shuffled, 1200},
          {1.0, LineShape::Ascending, 1200},
          {1.0, LineShape::Shuffled, 1200},
          {1e-30, LineShape::Diagonal, 1000}};
}

// n points on the tilted plane z = 0.3 x + 0.2 y + 5, x and y uniform in
// [-1, 1): a surface that is not axis-aligned, so no axis of the grid drops
// out, and at 20000 points a first grid of n / 3 cells sees about 40 points
// in a point's own cell (poor), a grid refined for a surface about 4.
inline std::vector<float> tilted_plane(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> rows(static_cast<size_t>(3 * n));
  for (size_t i = 0; i < rows.size(); i += 3) {
    const double x = rng.uniform(-1.0, 1.0), y = rng.uniform(-1.0, 1.0);
    rows[i] = static_cast<float>(x);
    rows[i + 1] = static_cast<float>(y);
    rows[i + 2] = static_cast<float>(0.3 * x + 0.2 * y + 5.0);
  }
  return rows;
}

// n points uniform in the unit cube less its middle [0.2, 0.8]^3 (a volume
// scan of a hollow object): the box stays filled enough for a first grid to
// be kept, and a query in the hole has no point within 0.1 at least.
inline std::vector<float> hollow_box(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> rows;
  rows.reserve(static_cast<size_t>(3 * n));
  while (rows.size() < static_cast<size_t>(3 * n)) {
    double p[3];
    bool inside = true;
    for (double& c : p) c = rng.uniform(0.0, 1.0), inside = inside && c > 0.2 && c < 0.8;
    if (!inside)
      rows.insert(rows.end(),
                  {static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2])});
  }
  return rows;
}

// n points whose density along x grows as x^3 (y and z uniform in [0, 1)):
// filled enough for a first grid to be kept, and ever sparser towards
// x = 0, where a query's 3 x 3 x 3 cells often hold no point though its
// nearest lie a few cells on.
inline std::vector<float> density_ramp(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> rows(static_cast<size_t>(3 * n));
  for (size_t i = 0; i < rows.size(); i += 3) {
    rows[i] = static_cast<float>(std::pow(rng.uniform(0.0, 1.0), 0.25));
    rows[i + 1] = static_cast<float>(rng.uniform(0.0, 1.0));
    rows[i + 2] = static_cast<float>(rng.uniform(0.0, 1.0));
  }
  return rows;
}

// m queries uniform in [lo, hi)^3.
inline std::vector<float> queries_in_cube(int64_t m, double lo, double hi, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> rows(static_cast<size_t>(3 * m));
  for (float& c : rows) c = static_cast<float>(rng.uniform(lo, hi));
  return rows;
}

// Points with a region the grid's walks cross empty or nearly so, and m
// queries there: a hollow box's hole (queries in [0.25, 0.75]^3, some deep
// in it, some near its walls) and a density ramp's sparse end (x < 0.1).
struct SparseRegionCase {
  const char* name;
  std::vector<float> points, queries;
};
inline std::vector<SparseRegionCase> sparse_region_cases(int64_t n, int64_t m) {
  std::vector<SparseRegionCase> cases;
  cases.push_back({"hollow box", hollow_box(n, 71), queries_in_cube(m, 0.25, 0.75, 72)});
  cases.push_back({"density ramp", density_ramp(n, 73), queries_in_cube(m, 0.0, 0.1, 74)});
  return cases;
}

// Queries for a line: every 7th point, the same moved half a spacing off
// the line, and a few far outside it.
inline std::vector<float> collinear_queries(const std::vector<float>& line, double spacing) {
  std::vector<float> q;
  for (size_t i = 0; i < line.size(); i += 21) {
    q.insert(q.end(), line.begin() + static_cast<std::ptrdiff_t>(i),
             line.begin() + static_cast<std::ptrdiff_t>(i) + 3);
    for (int a = 0; a < 3; ++a) q.push_back(static_cast<float>(line[i + a] + 0.5 * spacing));
  }
  const float far[][3] = {{-1.0f, 0.0f, 0.0f}, {0.0f, 1e3f, -1e3f}, {1e6f, 1e6f, 1e6f}};
  for (const auto& f : far) q.insert(q.end(), f, f + 3);
  return q;
}

// Points on curves (common/grid_layout.h "Curves"): the x axis (a first
// grid of one row of cells, each a Poisson target: not poor), the same with
// noise 1e-5 across it 100 away from the origin, a diagonal line, the same
// 1e4 away (float32 spacing 1e-3 there: few distinct coordinates), a helix,
// a circle in the plane z = 0.5 (its grid is poor, and kept once refined
// where curves are not refused) and a tilted circle. n points each, t
// uniform along the curve.
struct CurveCase {
  const char* name;
  std::vector<float> points;
};
inline std::vector<CurveCase> curve_cases(int64_t n, uint64_t seed) {
  const double kTau = 6.283185307179586;
  const auto curve = [&](uint64_t salt, double noise, double offset, auto&& at) {
    Rng rng(seed + salt);
    std::vector<float> rows(static_cast<size_t>(3 * n));
    for (size_t i = 0; i < rows.size(); i += 3) {
      double p[3];
      at(rng.uniform(), p);
      for (int a = 0; a < 3; ++a)
        rows[i + a] = static_cast<float>(p[a] + offset + noise * rng.normal());
    }
    return rows;
  };
  std::vector<CurveCase> cases;
  const auto x_axis = [](double t, double* p) { p[0] = t, p[1] = 0.5, p[2] = 0.5; };
  cases.push_back({"x axis", curve(1, 0.0, 0.0, x_axis)});
  cases.push_back({"x axis, noise 1e-5, offset 100", curve(2, 1e-5, 100.0, x_axis)});
  const auto diagonal = [](double t, double* p) { p[0] = t, p[1] = 2.0 * t, p[2] = -t; };
  cases.push_back({"diagonal", curve(3, 0.0, 0.0, diagonal)});
  cases.push_back({"diagonal, offset 1e4", curve(7, 0.0, 1e4, diagonal)});
  cases.push_back({"helix", curve(4, 1e-6, 0.0, [&](double t, double* p) {
                     p[0] = std::cos(3 * kTau * t), p[1] = std::sin(3 * kTau * t), p[2] = t;
                   })});
  cases.push_back({"circle in z = 0.5", curve(5, 0.0, 0.0, [&](double t, double* p) {
                     p[0] = std::cos(kTau * t), p[1] = std::sin(kTau * t), p[2] = 0.5;
                   })});
  cases.push_back({"tilted circle", curve(6, 0.0, 0.0, [&](double t, double* p) {
                     p[0] = std::cos(kTau * t), p[1] = 0.6 * std::sin(kTau * t),
                     p[2] = 0.8 * std::sin(kTau * t);
                   })});
  return cases;
}

// AUTO on `backend` over points on curves: no grid serves (knn_index_info
// reports the kd-tree: on a curve the grid walks two cells of a row, or r^2
// cells of a refined grid, for r of curve), and the answers are the
// oracle's, 200 queries on and beside the curve, k up to `max_k`. Explicit
// KNN_STRUCTURE_GRID keeps its grid on the x axis (the caller asked for it).
inline void expect_auto_refuses_grids_on_curves(int backend, int64_t n, int max_k) {
  for (const CurveCase& c : curve_cases(n, 97)) {
    SCOPED_TRACE(c.name);
    IndexHandle index = build_index(c.points, 3, IndexConfig{backend, KNN_STRUCTURE_AUTO});
    ASSERT_TRUE(index);
    int structure = -1;
    ASSERT_EQ(knn_index_info(index.get(), nullptr, nullptr, nullptr, &structure), KNN_OK);
    EXPECT_EQ(structure, KNN_STRUCTURE_KDTREE);
    std::vector<float> queries;
    for (size_t i = 0; i < c.points.size(); i += 3 * static_cast<size_t>(n / 100))
      for (const float shift : {0.0f, 1e-3f})
        for (int a = 0; a < 3; ++a) queries.push_back(c.points[i + a] + shift);
    const int64_t m = static_cast<int64_t>(queries.size() / 3);
    const KnnResult expected = oracle_knn(c.points.data(), n, queries.data(), m, 3, max_k);
    for (const int k : {1, 16, max_k}) {
      SCOPED_TRACE(k);
      EXPECT_TRUE(same_knn(first_columns(expected, k), query_index(index.get(), queries, 3, k)));
    }
  }
  const std::vector<float> line = curve_cases(n, 97).front().points;
  IndexHandle grid = build_index(line, 3, IndexConfig{backend, KNN_STRUCTURE_GRID});
  ASSERT_TRUE(grid);
  int structure = -1;
  ASSERT_EQ(knn_index_info(grid.get(), nullptr, nullptr, nullptr, &structure), KNN_OK);
  EXPECT_EQ(structure, KNN_STRUCTURE_GRID);
}

// A length at the scale of the distribution's spread: radii of 0 to 4 times
// it reach from "nothing" to "everything".
inline float radius_scale(Dist dist) {
  return dist == Dist::Clustered     ? 100.0f
         : dist == Dist::LargeOffset ? 1000.0f
         : dist == Dist::Tiny        ? 1e-19f
         : dist == Dist::Huge        ? 1e18f
         : dist == Dist::Line        ? 100.0f
                                     : 1.0f;
}

// KNN_STRUCTURE_GRID on `backend` through the API: a grid for uniform data,
// the kd-tree (reported by knn_index_info) for clustered data, the same bits
// as the oracles either way.
inline void expect_grid_or_reported_fallback(int backend) {
  for (const Dist dist : {Dist::Uniform, Dist::Clustered}) {
    SCOPED_TRACE(dist_name(dist));
    const std::vector<float> points = make_rows(dist, 20000, 3, 91);
    const std::vector<float> queries = queries_with_outliers(dist, 700, 92);
    const int64_t m = static_cast<int64_t>(queries.size() / 3);
    IndexHandle index = build_index(points, 3, IndexConfig{backend, KNN_STRUCTURE_GRID});
    ASSERT_TRUE(index);
    int64_t n = 0;
    int dim = 0, reported_backend = -1, structure = -1;
    ASSERT_EQ(knn_index_info(index.get(), &n, &dim, &reported_backend, &structure), KNN_OK);
    EXPECT_EQ(reported_backend, backend);
    EXPECT_EQ(structure, dist == Dist::Uniform ? KNN_STRUCTURE_GRID : KNN_STRUCTURE_KDTREE);
    EXPECT_TRUE(same_knn(oracle_knn(points.data(), 20000, queries.data(), m, 3, 8),
                         query_index(index.get(), queries, 3, 8)));
    EXPECT_TRUE(same_knn(oracle_self(points.data(), 20000, 3, 4, true),
                         query_self(index.get(), 20000, 4, true)));
    EXPECT_TRUE(same_radius(oracle_radius(points.data(), 20000, queries.data(), m, 3, 0.1f, 16),
                            radius_index(index.get(), queries, 3, 0.1f, 16)));
  }
}

}  // namespace knn_test
