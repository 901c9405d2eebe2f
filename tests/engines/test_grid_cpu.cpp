// The OpenMP uniform grid (omp::build_grid_index) against the brute-force
// oracle: every distribution of test_data.h, awkward sizes, k from 1 to
// beyond n, queries far outside the box, radius rows and counts, all-kNN
// with and without self, the clustered fallback, collinear and all-tied
// data (issue #18) with their cost as a ratio, and the exactness of the
// shell bounds of common/grid_layout.h on their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "../../common/float_math.h"
#include "../../common/grid_layout.h"
#include "../../common/grid_walk.h"
#include "grid_test_support.h"
#include "test_data.h"
#include "timing.h"

namespace knn_test {
namespace {

std::unique_ptr<knn::IndexEngine> build_grid(const std::vector<float>& points, int leaf_size = 0) {
  knn::IndexParams params;
  params.leaf_size = leaf_size;
  return knn::omp::build_grid_index(points.data(), static_cast<int64_t>(points.size() / 3), params);
}

class GridCpu : public ::testing::TestWithParam<Dist> {};

// Below kGridMinPointsToJudge every distribution keeps its grid, however
// poor: the search itself is checked on all of them.
TEST_P(GridCpu, KnnMatchesOracle) {
  for (const int64_t n : {1, 2, 37, 1000}) {
    const uint64_t seed = 11 + static_cast<uint64_t>(n);
    const std::vector<float> points = make_rows(GetParam(), n, 3, seed);
    const std::vector<float> queries = queries_with_outliers(GetParam(), 301, seed + 1);
    auto grid = build_grid(points);
    ASSERT_NE(grid, nullptr);
    EXPECT_EQ(grid->structure(), KNN_STRUCTURE_GRID);
    EXPECT_EQ(grid->size(), n);
    for (const int k : {1, 8, 100}) {
      SCOPED_TRACE(describe(GetParam(), n, static_cast<int64_t>(queries.size() / 3), k, seed));
      const KnnResult expected = oracle_knn(points.data(), n, queries.data(),
                                            static_cast<int64_t>(queries.size() / 3), 3, k);
      const KnnResult actual = engine_knn(*grid, queries, k);
      EXPECT_TRUE(same_knn(expected, actual));
      EXPECT_TRUE(kth_matches_double(points.data(), n, queries.data(),
                                     static_cast<int64_t>(queries.size() / 3), 3, k,
                                     actual.idx.data()));
    }
  }
}

TEST_P(GridCpu, SelfMatchesOracle) {
  const int64_t n = 777;
  const std::vector<float> points = make_rows(GetParam(), n, 3, 5);
  auto grid = build_grid(points);
  ASSERT_NE(grid, nullptr);
  for (const int k : {1, 8}) {
    for (const bool exclude : {false, true}) {
      SCOPED_TRACE(describe(GetParam(), n, n, k, 5, exclude ? "exclude_self" : "with self"));
      EXPECT_TRUE(
          same_knn(oracle_self(points.data(), n, 3, k, exclude), engine_self(*grid, k, exclude)));
    }
  }
}

TEST_P(GridCpu, RadiusMatchesOracle) {
  const int64_t n = 900;
  const std::vector<float> points = make_rows(GetParam(), n, 3, 9);
  const std::vector<float> queries = queries_with_outliers(GetParam(), 200, 10);
  const int64_t m = static_cast<int64_t>(queries.size() / 3);
  auto grid = build_grid(points);
  ASSERT_NE(grid, nullptr);
  const float scale = radius_scale(GetParam());
  for (const float fraction : {0.0f, 0.05f, 0.3f, 4.0f}) {
    for (const int cap : {0, 5, 64}) {
      const float radius = scale * fraction;
      SCOPED_TRACE(describe(GetParam(), n, 200, cap, 9, "radius"));
      SCOPED_TRACE(radius);
      EXPECT_TRUE(same_radius(oracle_radius(points.data(), n, queries.data(), m, 3, radius, cap),
                              engine_radius(*grid, queries, radius, cap)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDistributions, GridCpu, ::testing::ValuesIn(all_dists()), DistName());

TEST(GridCpuSizes, EmptyIndexAnswersMissing) {
  auto grid = build_grid({});
  ASSERT_NE(grid, nullptr);
  const std::vector<float> queries = {0.0f, 1.0f, 2.0f, -5.0f, 3.0f, 1e30f};
  const KnnResult r = engine_knn(*grid, queries, 3);
  for (size_t i = 0; i < r.idx.size(); ++i) {
    EXPECT_EQ(r.idx[i], -1);
    EXPECT_TRUE(std::isinf(r.dist[i]));
  }
  EXPECT_EQ(engine_radius(*grid, queries, 1e30f, 0).counts, std::vector<int>({0, 0}));
}

TEST(GridCpuSizes, UniformNonPowersOfTwo) {
  for (const int64_t n : {4099, 20011}) {
    const std::vector<float> points = make_rows(Dist::Uniform, n, 3, 3);
    const std::vector<float> queries = queries_with_outliers(Dist::Uniform, 1501, 4);
    auto grid = build_grid(points);
    ASSERT_NE(grid, nullptr) << "uniform data must make a good grid";
    for (const int k : {1, 8, 100}) {
      SCOPED_TRACE(describe(Dist::Uniform, n, 1506, k, 3));
      EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), 1506, 3, k),
                           engine_knn(*grid, queries, k)));
    }
  }
}

TEST(GridCpuSizes, KLargerThanN) {
  const std::vector<float> points = make_rows(Dist::Uniform, 5, 3, 8);
  const std::vector<float> queries = queries_with_outliers(Dist::Uniform, 7, 8);
  auto grid = build_grid(points);
  ASSERT_NE(grid, nullptr);
  const KnnResult r = engine_knn(*grid, queries, 8);
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), 5, queries.data(), 12, 3, 8), r));
  EXPECT_EQ(r.idx[5], -1);  // slots 5..7 of every row are missing
}

// Points on a plane and on a line get one cell on their flat axes, and the
// answers stay exact at sizes where the grid is judged.
TEST(GridCpuSizes, FlatDataGetsOneCellOnFlatAxes) {
  const std::vector<float> plane = make_rows(Dist::Plane, 20000, 3, 21);
  float lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = hi[a] = plane[a];
    for (size_t i = a; i < plane.size(); i += 3)
      lo[a] = std::min(lo[a], plane[i]), hi[a] = std::max(hi[a], plane[i]);
  }
  const knn::GridLayout layout =
      knn::make_grid_layout(lo, hi, 20000, knn::kGridDefaultPointsPerCell);
  EXPECT_EQ(layout.cells[2], 1);
  EXPECT_GT(layout.cells[0], 50);
  EXPECT_GT(layout.cells[1], 50);
  auto grid = build_grid(plane);
  ASSERT_NE(grid, nullptr);
  const std::vector<float> queries = queries_with_outliers(Dist::Plane, 501, 22);
  EXPECT_TRUE(same_knn(oracle_knn(plane.data(), 20000, queries.data(), 506, 3, 8),
                       engine_knn(*grid, queries, 8)));
}

// ---- Degenerate data (issue #18) -------------------------------------------------

// Collinear points 1e-30 apart (every distance 0: only indices decide; in
// ascending order the k smallest lie at the far end of the line from most
// queries) and 1.0 apart, k up to 1000: the oracle's rows, all-kNN, queries
// on, beside and far from the line, and radius rows.
TEST(GridCpuDegenerate, CollinearMatchesOracle) {
  for (const CollinearCase& c : collinear_cases()) {
    SCOPED_TRACE(line_shape_name(c.shape));
    SCOPED_TRACE(c.spacing);
    const std::vector<float> points = collinear_points(c.n, c.spacing, c.shape);
    auto grid = build_grid(points);
    ASSERT_NE(grid, nullptr);
    const std::vector<float> queries = collinear_queries(points, c.spacing);
    const int64_t m = static_cast<int64_t>(queries.size() / 3);
    const KnnResult self = oracle_self(points.data(), c.n, 3, 1000, true);
    const KnnResult near = oracle_knn(points.data(), c.n, queries.data(), m, 3, 1000);
    for (const int k : {1, 8, 100, 1000}) {
      SCOPED_TRACE(k);
      EXPECT_TRUE(same_knn(first_columns(self, k), engine_self(*grid, k, true)));
      EXPECT_TRUE(same_knn(first_columns(near, k), engine_knn(*grid, queries, k)));
    }
    for (const double radius : {0.0, 4.0 * c.spacing}) {
      const float r = static_cast<float>(radius);
      EXPECT_TRUE(same_radius(oracle_radius(points.data(), c.n, queries.data(), m, 3, r, 16),
                              engine_radius(*grid, queries, r, 16)));
    }
  }
  // Along a diagonal the points fill few cells of a 3-D grid: the build
  // refuses it (the API serves it with the kd-tree).
  EXPECT_EQ(build_grid(collinear_points(2100, 1e-30, LineShape::Diagonal)), nullptr);
}

// The complexity of a search whose distances are all tied: the line 1e-30
// apart against the same line 1.0 apart (the same cells and walk; distances
// end the walk there), all-kNN at k = 100, timed as a ratio in one process
// so that a loaded machine does not matter. Measured 4-13 on two loaded
// cores: the spread line is the grid's best case (a few cells, each
// insertion at the end of the list), while a tied query fills its list from
// its own cells and then replaces every entry with the smallest indices,
// and each of its squared distances underflows (slow on x86). The limit is
// the one of the kd-tree's all-tied case (test_cpu_pathological). Without
// the tie rules every query walked every cell (2,100 points, k = 8: ~100
// times the spread line; at 10,000 points minutes). A smaller k is not
// timed: its few milliseconds are at the mercy of the machine's load.
TEST(GridCpuDegenerate, TiedLineCostsLittleMoreThanSpreadLine) {
  constexpr int64_t kPoints = 10000;
  constexpr int k = 100;
  constexpr double kMaxRatio = 30.0;
  auto spread = build_grid(collinear_points(kPoints, 1.0, LineShape::Ascending));
  ASSERT_NE(spread, nullptr);
  for (const LineShape shape : {LineShape::Ascending, LineShape::Shuffled}) {
    auto tied = build_grid(collinear_points(kPoints, 1e-30, shape));
    ASSERT_NE(tied, nullptr);
    const double base = best_seconds(5, [&] { engine_self(*spread, k, true); });
    const double seconds = best_seconds(5, [&] { engine_self(*tied, k, true); });
    std::printf("  1e-30 line (%s), k = %d: %.4f s against %.4f s, ratio %.2f (limit %.0f)\n",
                line_shape_name(shape), k, seconds, base, seconds / base, kMaxRatio);
    EXPECT_LE(seconds, kMaxRatio * base) << line_shape_name(shape);
  }
}

// Float64 cells from logarithms: extents whose product under- or overflows
// a double still get cubic cells.
TEST(GridCpuDegenerate, Float64ExtremeExtentsKeepCubicCells) {
  for (const double extent : {1e-200, 1.0, 1e200}) {
    SCOPED_TRACE(extent);
    const double lo[3] = {0.0, 0.0, 0.0}, hi[3] = {extent, extent, extent};
    const knn::BasicGridLayout<double> g = knn::make_grid_layout(lo, hi, 8000, 3);
    EXPECT_EQ(g.cells[0], g.cells[1]);
    EXPECT_EQ(g.cells[1], g.cells[2]);
    EXPECT_GE(g.cells[0], 12);
    EXPECT_LE(g.cell_count(), 8000);
  }
}

// Clustered data and heavy duplicates make a poor grid: the build says so
// (nullptr) and the API falls back to the kd-tree; uniform data does not.
TEST(GridCpuOccupancy, PoorGridsAreRefused) {
  for (const Dist dist : {Dist::Clustered, Dist::Identical, Dist::Duplicates}) {
    SCOPED_TRACE(dist_name(dist));
    EXPECT_EQ(build_grid(make_rows(dist, 20000, 3, 31)), nullptr);
  }
  EXPECT_NE(build_grid(make_rows(Dist::Uniform, 20000, 3, 31)), nullptr);
  EXPECT_NE(build_grid(make_rows(Dist::LargeOffset, 20000, 3, 31)), nullptr);
}

// The sum of squared cell counts of `points` binned by `g` (grid_is_poor's
// measure), counted here independently of the engines.
uint64_t squared_counts(const knn::GridLayout& g, const std::vector<float>& points) {
  std::vector<uint64_t> count(static_cast<size_t>(g.cell_count()), 0);
  for (size_t i = 0; i < points.size(); i += 3)
    ++count[g.key_of(points[i], points[i + 1], points[i + 2])];
  uint64_t sum = 0;
  for (const uint64_t c : count) sum += c * c;
  return sum;
}

// The same sum over cells twice as wide (2 x 2 x 2 blocks of g's cells),
// from the points' cell coordinates.
uint64_t coarse_squared_counts(const knn::GridLayout& g, const std::vector<float>& points) {
  const int64_t cx = (g.cells[0] + 1) / 2, cy = (g.cells[1] + 1) / 2, cz = (g.cells[2] + 1) / 2;
  std::vector<uint64_t> count(static_cast<size_t>(cx * cy * cz), 0);
  for (size_t i = 0; i < points.size(); i += 3) {
    const int64_t x = g.cell_on_axis(points[i], 0) / 2, y = g.cell_on_axis(points[i + 1], 1) / 2,
                  z = g.cell_on_axis(points[i + 2], 2) / 2;
    ++count[static_cast<size_t>((z * cy + y) * cx + x)];
  }
  uint64_t sum = 0;
  for (const uint64_t c : count) sum += c * c;
  return sum;
}

knn::GridLayout first_layout(const std::vector<float>& points, int target) {
  float lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = hi[a] = points[a];
    for (size_t i = a; i < points.size(); i += 3)
      lo[a] = std::min(lo[a], points[i]), hi[a] = std::max(hi[a], points[i]);
  }
  return knn::make_grid_layout(lo, hi, static_cast<int64_t>(points.size() / 3), target);
}

// The k-nearest walk of grid_layout.h over a grid binned here (counting
// sort by cell key), with a list of the k best kept in a sorted vector: how
// it ended for q, and how many points its shells read.
struct WalkOutcome {
  knn::ShellWalk walk;
  int64_t read;
};
class BinnedPoints {
 public:
  BinnedPoints(const knn::GridLayout& g, const std::vector<float>& points)
      : g_(g), points_(points), starts_(static_cast<size_t>(g.cell_count()) + 1, 0) {
    const int64_t n = static_cast<int64_t>(points.size() / 3);
    std::vector<uint32_t> key(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      key[i] = g.key_of(points[3 * i], points[3 * i + 1], points[3 * i + 2]);
      ++starts_[key[i] + size_t{1}];
    }
    for (size_t c = 1; c < starts_.size(); ++c) starts_[c] += starts_[c - 1];
    std::vector<uint32_t> next(starts_.begin(), starts_.end() - 1);
    ids_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids_[next[key[i]]++] = static_cast<int32_t>(i);
  }

  WalkOutcome walk(const float q[3], int k) const {
    std::vector<knn::Neighbor> best;  // sorted, at most k
    const auto kth = [&] {
      return static_cast<int>(best.size()) == k
                 ? best.back()
                 : knn::Neighbor{std::numeric_limits<float>::infinity(), INT32_MAX};
    };
    const auto offer = [&](float d, int32_t id) {
      const knn::Neighbor c{d, id};
      if (static_cast<int>(best.size()) == k && !knn::closer(c, best.back())) return;
      best.insert(std::upper_bound(best.begin(), best.end(), c,
                                   [](const knn::Neighbor& a, const knn::Neighbor& b) {
                                     return knn::closer(a, b);
                                   }),
                  c);
      if (static_cast<int>(best.size()) > k) best.pop_back();
    };
    const auto distance = [&](int32_t id) {
      const float* p = &points_[3 * static_cast<size_t>(id)];
      return knn::squared_distance3(q[0], q[1], q[2], p[0], p[1], p[2]);
    };
    int64_t read = 0;
    const knn::ShellWalk walk = knn::walk_shells(
        g_, q, knn::isolated_walk_runs(static_cast<int64_t>(points_.size() / 3), k), kth,
        [&](uint32_t first, uint32_t last, const knn::CellScan<float>& scan) {
          for (uint32_t p = starts_[first]; p < starts_[last + size_t{1}]; ++p) {
            const int32_t id = ids_[p];
            if (scan.already_offered(id)) continue;
            offer(distance(id), id);
          }
          read += starts_[last + size_t{1}] - starts_[first];
          return static_cast<int64_t>(starts_[last + size_t{1}] - starts_[first]);
        },
        [&](int32_t first, int32_t last, const knn::ShellCube& cube) {
          for (int32_t id = first; id < last; ++id) {
            const float* p = &points_[3 * static_cast<size_t>(id)];
            if (!cube.contains(g_, p[0], p[1], p[2])) offer(distance(id), id);
          }
        });
    return {walk, read};
  }

 private:
  knn::GridLayout g_;
  const std::vector<float>& points_;
  std::vector<uint32_t> starts_;
  std::vector<int32_t> ids_;
};

// Queries where the points thin out (a density ramp) or stop (the hole of a
// hollow box): a walk whose list is not full after isolated_walk_runs runs
// gives up (ShellWalk::Isolated, here seen to happen after its shells read
// points, at lists longer than n / 64 runs fill from the sparse region), and
// the search then scans every point into
// an emptied list; a walk whose points lie a few shells on goes on and
// finishes. Both answer as the oracle.
TEST(GridCpuIsolated, WalksThatGiveUpOrGoOnAnswerAsTheOracle) {
  const int64_t n = 200000;
  for (const SparseRegionCase& c : sparse_region_cases(n, 120)) {
    SCOPED_TRACE(c.name);
    const int64_t m = static_cast<int64_t>(c.queries.size() / 3);
    const auto grid = build_grid(c.points);
    ASSERT_NE(grid, nullptr) << "the box is filled enough to keep a grid";
    const BinnedPoints binned(first_layout(c.points, knn::kGridDefaultPointsPerCell), c.points);
    int gave_up_after_reading = 0, finished = 0;
    for (const int k : {1, 8, 50, 400, 3000, 20000}) {
      SCOPED_TRACE(k);
      for (int64_t i = 0; i < m; ++i) {
        const WalkOutcome w = binned.walk(&c.queries[3 * static_cast<size_t>(i)], k);
        gave_up_after_reading += w.walk == knn::ShellWalk::Isolated && w.read > 0;
        finished += w.walk == knn::ShellWalk::Complete;
      }
      EXPECT_TRUE(same_knn(oracle_knn(c.points.data(), n, c.queries.data(), m, 3, k),
                           engine_knn(*grid, c.queries, k)));
    }
    EXPECT_GT(gave_up_after_reading, 0);
    EXPECT_GT(finished, 0);
  }
}

// A long list among the points is no isolated query: on a row of cells
// along x (20,000 points, a target each; the grid an explicit
// KNN_STRUCTURE_GRID keeps) every walk for k = 1000 reads two cells a shell
// and fills its list after some 330 runs, more than n / 64, and finishes
// (before, every one gave up there and its query scanned all n points:
// all-kNN 6.4 s against 0.14 on the kd-tree); an explicit grid answers as
// the oracle, and its all-kNN costs no more than a few times the kd-tree's
// (a ratio in one process: 1.4-3 on two loaded cores; the scan of all
// points made it 30-50).
TEST(GridCpuIsolated, LongListsAlongARowOfCellsAreWalkedNotScanned) {
  const int64_t n = 20000;
  const int k = 1000;
  const std::vector<float> line = curve_cases(n, 97).front().points;
  const BinnedPoints binned(first_layout(line, knn::kGridDefaultPointsPerCell), line);
  int64_t gave_up = 0;
  for (size_t i = 0; i < line.size(); i += 3 * 50)
    gave_up += binned.walk(&line[i], k).walk == knn::ShellWalk::Isolated;
  EXPECT_EQ(gave_up, 0);

  const auto grid = build_grid(line);
  ASSERT_NE(grid, nullptr);
  knn::IndexParams tree_params;
  const auto tree = knn::omp::build_kdtree_index(line.data(), n, 3, tree_params);
  std::vector<float> queries;
  for (size_t i = 0; i < line.size(); i += 3 * 200)
    queries.insert(queries.end(), &line[i], &line[i] + 3);
  const int64_t m = static_cast<int64_t>(queries.size() / 3);
  EXPECT_TRUE(
      same_knn(oracle_knn(line.data(), n, queries.data(), m, 3, k), engine_knn(*grid, queries, k)));
  constexpr double kMaxRatio = 10.0;
  const double tree_seconds = best_seconds(2, [&] { engine_self(*tree, k, false); });
  const double grid_seconds = best_seconds(2, [&] { engine_self(*grid, k, false); });
  std::printf("  all-kNN, 20,000 points on a line, k = %d: grid %.3f s, kd-tree %.3f s\n", k,
              grid_seconds, tree_seconds);
  EXPECT_LE(grid_seconds, kMaxRatio * tree_seconds);
}

// The OpenMP grid's share of isolated queries (at most one point in the
// 3 x 3 x 3 cells around their own) against a count here over the points'
// cells: all of those deep in the hole of a hollow box, none of those among
// its points, and of the indexed points themselves (queries null) the
// outliers planted in the hole, each alone in its cells.
TEST(GridCpuIsolated, ShareOfIsolatedQueriesCountsTheEmptyNeighbourhoods) {
  const int64_t n = 200000;
  const std::vector<float> points = hollow_box(n, 81);
  const auto grid = build_grid(points);
  ASSERT_NE(grid, nullptr);
  const knn::GridLayout g = first_layout(points, knn::kGridDefaultPointsPerCell);
  std::vector<int64_t> in_cell(static_cast<size_t>(g.cell_count()), 0);
  for (size_t i = 0; i < points.size(); i += 3)
    ++in_cell[g.key_of(points[i], points[i + 1], points[i + 2])];
  const auto counted = [&](const std::vector<float>& queries) {
    const int64_t m = static_cast<int64_t>(queries.size() / 3);
    const int64_t sample = std::min<int64_t>(m, knn::kPlacementSampleQueries);
    int64_t isolated = 0;
    for (int64_t t = 0; t < sample; ++t) {
      const float* q = &queries[3 * static_cast<size_t>(t * m / sample)];
      int32_t c[3];
      for (int a = 0; a < 3; ++a) c[a] = g.cell_on_axis(q[a], a);
      int64_t around = 0;
      for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int32_t x = c[0] + dx, y = c[1] + dy, z = c[2] + dz;
            if (x >= 0 && y >= 0 && z >= 0 && x < g.cells[0] && y < g.cells[1] && z < g.cells[2])
              around += in_cell[g.key(x, y, z)];
          }
      isolated += around <= 1 ? 1 : 0;
    }
    return static_cast<double>(isolated) / static_cast<double>(sample);
  };
  const std::vector<float> deep = queries_in_cube(5000, 0.3, 0.7, 82);
  const std::vector<float> among = hollow_box(3000, 83);
  std::vector<float> mixed(deep.begin(), deep.begin() + 3 * 1000);
  mixed.insert(mixed.end(), among.begin(), among.end());
  const std::vector<float>* const sets[] = {&deep, &among, &mixed};
  for (const std::vector<float>* queries : sets) {
    const int64_t m = static_cast<int64_t>(queries->size() / 3);
    EXPECT_DOUBLE_EQ(grid->share_of_isolated_queries(queries->data(), m, knn::CallParams{}),
                     counted(*queries));
  }
  EXPECT_EQ(grid->share_of_isolated_queries(deep.data(), 5000, knn::CallParams{}), 1.0);
  EXPECT_EQ(grid->share_of_isolated_queries(among.data(), 3000, knn::CallParams{}), 0.0);
  EXPECT_EQ(grid->share_of_isolated_queries(deep.data(), 0, knn::CallParams{}), 0.0);
  // Queries two box widths beyond the box's face are away from the points
  // too, though the clamped cells by that face hold points (grid_walk.h,
  // beyond_the_box); the count above, which clamps, calls them near.
  std::vector<float> beyond = among;
  for (size_t i = 0; i < beyond.size(); i += 3) beyond[i] += 3.0f;
  EXPECT_EQ(counted(beyond), 0.0);
  EXPECT_EQ(grid->share_of_isolated_queries(beyond.data(), 3000, knn::CallParams{}), 1.0);
  knn::CallParams on_device;
  on_device.queries_on_device = true;  // not read: 0
  EXPECT_EQ(grid->share_of_isolated_queries(deep.data(), 5000, on_device), 0.0);
  // Queries null: the indexed points, each counting itself. A small box
  // (every point sampled) with one outlier at the centre of its hole.
  std::vector<float> small = hollow_box(4000, 84);
  const auto plain = build_grid(small);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->share_of_isolated_queries(nullptr, 0, knn::CallParams{}), 0.0);
  small.insert(small.end(), {0.5f, 0.5f, 0.5f});
  const auto with_outlier = build_grid(small);
  ASSERT_NE(with_outlier, nullptr);
  EXPECT_EQ(with_outlier->share_of_isolated_queries(nullptr, 0, knn::CallParams{}), 1.0 / 4001);
  EXPECT_EQ(with_outlier->share_of_isolated_queries(nullptr, 0, on_device), 1.0 / 4001);
  // As queries, the outlier is alone around itself, so isolated as well.
  EXPECT_EQ(with_outlier->share_of_isolated_queries(small.data() + 3 * 4000, 1, knn::CallParams{}),
            1.0);
}

// Points on a surface make a poor first grid; the finer grid chosen for a
// surface is good (within the cap), the build keeps it, and the answers stay
// the oracle's. AUTO on the CPU takes the kd-tree instead (it is faster
// there) and answers alike.
TEST(GridCpuSurfaces, TiltedPlaneGetsFinerCells) {
  const int64_t n = 20000;
  const int target = knn::kGridDefaultPointsPerCell;
  const std::vector<float> points = tilted_plane(n, 61);
  const knn::GridLayout first = first_layout(points, target);
  const uint64_t first_sum = squared_counts(first, points);
  ASSERT_TRUE(knn::grid_is_poor(first_sum, n, target)) << knn::mean_own_cell(first_sum, n);
  knn::GridLayout finer{};
  const uint64_t coarse_sum = coarse_squared_counts(first, points);
  const double exponent = knn::occupancy_exponent(first_sum, coarse_sum);
  EXPECT_GT(exponent, 1.6);  // a surface: the own-cell count grows as side^2
  EXPECT_LT(exponent, 2.4);
  ASSERT_TRUE(knn::finer_grid_layout(first, first_sum, coarse_sum, n, target, 0, finer));
  EXPECT_GE(finer.cell_count(), 2 * first.cell_count());
  EXPECT_LE(finer.cell_count(), knn::grid_max_cells(n));
  EXPECT_TRUE(knn::grid_is_kept(squared_counts(finer, points), n, target, 1))
      << knn::mean_own_cell(squared_counts(finer, points), n);

  ASSERT_NE(build_grid(points), nullptr);
  knn::IndexParams no_refinement;
  no_refinement.refine_grid = false;
  EXPECT_EQ(knn::omp::build_grid_index(points.data(), n, no_refinement), nullptr);

  std::vector<float> queries = tilted_plane(500, 62);
  const std::vector<float> outliers = queries_with_outliers(Dist::Uniform, 0, 63);
  queries.insert(queries.end(), outliers.begin(), outliers.end());
  const int64_t m = static_cast<int64_t>(queries.size() / 3);
  const KnnResult expected = oracle_knn(points.data(), n, queries.data(), m, 3, 12);
  for (const int structure : {KNN_STRUCTURE_GRID, KNN_STRUCTURE_AUTO}) {
    SCOPED_TRACE(structure);
    IndexHandle index = build_index(points, 3, IndexConfig{KNN_BACKEND_OPENMP, structure});
    ASSERT_TRUE(index);
    int served = -1;
    ASSERT_EQ(knn_index_info(index.get(), nullptr, nullptr, nullptr, &served), KNN_OK);
    EXPECT_EQ(served, structure == KNN_STRUCTURE_GRID ? KNN_STRUCTURE_GRID : KNN_STRUCTURE_KDTREE);
    EXPECT_TRUE(same_knn(expected, query_index(index.get(), queries, 3, 12)));
    EXPECT_TRUE(
        same_knn(oracle_self(points.data(), n, 3, 6, true), query_self(index.get(), n, 6, true)));
    EXPECT_TRUE(same_radius(oracle_radius(points.data(), n, queries.data(), m, 3, 0.02f, 24),
                            radius_index(index.get(), queries, 3, 0.02f, 24)));
  }
}

// Queries away from a surface (0.5 above a tilted plane whose finer grid has
// cells about 0.02 wide): no point lies in the 27 cells around theirs, so
// the search scans every point for them instead of walking shells of empty
// cells; the answers are the oracle's, mixed with queries on the plane.
TEST(GridCpuSurfaces, QueriesAwayFromTheSurfaceMatchTheOracle) {
  const int64_t n = 20000;
  const std::vector<float> points = tilted_plane(n, 61);
  const auto grid = build_grid(points);
  ASSERT_NE(grid, nullptr);
  std::vector<float> queries = tilted_plane(400, 62);
  for (size_t i = 2; i < queries.size(); i += 6) queries[i] += 0.5f;  // every other one
  const int64_t m = static_cast<int64_t>(queries.size() / 3);
  for (const int k : {1, 8, 30, 100}) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, 3, k),
                         engine_knn(*grid, queries, k)));
  }
}

// No finer grid where it cannot help or is not allowed: all points equal
// (no axis has an extent), clusters that no grid within the cap serves (the
// growth law says so before any binning), a grid at the cap already,
// refinements spent; and a refined grid is kept only when it is good, a
// first one unless poor.
TEST(GridCpuSurfaces, RefinementStopsWhereItCannotHelp) {
  const int64_t n = 20000;
  const int target = knn::kGridDefaultPointsPerCell;
  const uint64_t all_in_one = static_cast<uint64_t>(n) * static_cast<uint64_t>(n);
  knn::GridLayout out{};
  const knn::GridLayout equal = first_layout(make_rows(Dist::Identical, n, 3, 71), target);
  EXPECT_EQ(equal.cell_count(), 1);
  EXPECT_FALSE(knn::finer_grid_layout(equal, all_in_one, all_in_one, n, target, 0, out));

  const std::vector<float> blobs = make_rows(Dist::Clustered, n, 3, 73);
  const knn::GridLayout clustered = first_layout(blobs, target);
  const uint64_t blob_sum = squared_counts(clustered, blobs);
  ASSERT_TRUE(knn::grid_is_poor(blob_sum, n, target));
  EXPECT_FALSE(knn::finer_grid_layout(clustered, blob_sum, coarse_squared_counts(clustered, blobs),
                                      n, target, 0, out));

  const std::vector<float> plane = tilted_plane(n, 72);
  const knn::GridLayout first = first_layout(plane, target);
  const uint64_t sum = squared_counts(first, plane), coarse = coarse_squared_counts(first, plane);
  EXPECT_FALSE(
      knn::finer_grid_layout(first, sum, coarse, n, target, knn::kGridMaxRefinements, out));
  EXPECT_FALSE(knn::finer_grid_layout(first, sum, sum, n, target, 0, out));  // exponent 0
  // Capped however poor, and tried only where the law predicts a good grid.
  EXPECT_FALSE(knn::finer_grid_layout(first, all_in_one, 4 * all_in_one, n, target, 0, out));
  EXPECT_LE(out.cell_count(), knn::grid_max_cells(n));
  ASSERT_TRUE(knn::finer_grid_layout(first, sum, coarse, n, target, 0, out));
  EXPECT_FALSE(knn::finer_grid_layout(out, all_in_one, 4 * all_in_one, n, target, 1, out));

  const double wanted = static_cast<double>(target + 1);
  const auto sum_for = [&](double mean_own) {
    return static_cast<uint64_t>(mean_own * static_cast<double>(n));
  };
  EXPECT_TRUE(knn::grid_is_kept(sum_for(knn::kGridPoorOccupancyFactor * wanted), n, target, 0));
  EXPECT_FALSE(
      knn::grid_is_kept(sum_for(knn::kGridPoorOccupancyFactor * wanted + 1), n, target, 0));
  EXPECT_TRUE(knn::grid_is_kept(sum_for(knn::kGridRefinedOccupancyFactor * wanted), n, target, 1));
  EXPECT_FALSE(
      knn::grid_is_kept(sum_for(knn::kGridRefinedOccupancyFactor * wanted + 1), n, target, 1));
}

// ---- Curves (grid_layout.h "Curves") ---------------------------------------------

// n points on the unit sphere (a scan's surface).
std::vector<float> sphere_surface(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> rows(static_cast<size_t>(3 * n));
  for (size_t i = 0; i < rows.size(); i += 3) {
    const double x = rng.normal(), y = rng.normal(), z = rng.normal();
    const double r = std::sqrt(x * x + y * y + z * z);
    rows[i] = static_cast<float>(x / r), rows[i + 1] = static_cast<float>(y / r),
    rows[i + 2] = static_cast<float>(z / r);
  }
  return rows;
}

// The occupancy of a grid and its coarse grid, counted here independently of
// the engines, tells points on a curve from points on a surface or in a
// volume: the curves' first grids (kept on the x axis, poor elsewhere) are
// on a curve; uniform, axis-aligned and tilted planes, a sphere, a hollow
// box and a density ramp are not, nor are the finer grids of the surfaces
// (a GPU AUTO build refines them and tests those grids too).
TEST(GridCpuCurves, OccupancyTellsCurvesFromSurfacesAndVolumes) {
  const int64_t n = 20000;
  const int target = knn::kGridDefaultPointsPerCell;
  const auto on_curve = [&](const knn::GridLayout& g, const std::vector<float>& points) {
    return knn::grid_on_curve(squared_counts(g, points), coarse_squared_counts(g, points), n);
  };
  for (const CurveCase& c : curve_cases(n, 97)) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(on_curve(first_layout(c.points, target), c.points));
  }
  const std::vector<float> line = curve_cases(n, 97).front().points;
  EXPECT_FALSE(knn::grid_is_poor(squared_counts(first_layout(line, target), line), n, target));

  const std::vector<float> plane = tilted_plane(n, 61), sphere = sphere_surface(n, 62);
  const std::vector<std::pair<const char*, std::vector<float>>> others = {
      {"uniform", make_rows(Dist::Uniform, n, 3, 63)},
      {"axis-aligned plane", make_rows(Dist::Plane, n, 3, 64)},
      {"tilted plane", plane},
      {"sphere", sphere},
      {"hollow box", hollow_box(n, 65)},
      {"density ramp", density_ramp(n, 66)}};
  for (const auto& [name, points] : others) {
    SCOPED_TRACE(name);
    const knn::GridLayout first = first_layout(points, target);
    const uint64_t sum = squared_counts(first, points),
                   coarse = coarse_squared_counts(first, points);
    EXPECT_FALSE(knn::grid_on_curve(sum, coarse, n));
    knn::GridLayout finer{};
    if (knn::grid_is_kept(sum, n, target, 0) ||
        !knn::finer_grid_layout(first, sum, coarse, n, target, 0, finer))
      continue;
    EXPECT_FALSE(on_curve(finer, points)) << finer.cell_count();
  }
  // Below kGridMinPointsToJudge nothing is judged.
  EXPECT_FALSE(knn::grid_on_curve(1000, 1000, 1000));
}

// The engine refuses grids on curves when asked to (AUTO asks, on both
// backends), refined or not, and keeps the others; without refuse_curves
// (an explicit KNN_STRUCTURE_GRID) the x axis keeps its row of cells.
TEST(GridCpuCurves, TheBuildRefusesCurvesWhenAsked) {
  const int64_t n = 20000;
  for (const bool refine : {false, true}) {
    SCOPED_TRACE(refine);
    knn::IndexParams params;
    params.refine_grid = refine;
    params.refuse_curves = true;
    for (const CurveCase& c : curve_cases(n, 97)) {
      SCOPED_TRACE(c.name);
      EXPECT_EQ(knn::omp::build_grid_index(c.points.data(), n, params), nullptr);
    }
    for (const std::vector<float>& points :
         {make_rows(Dist::Uniform, n, 3, 63), make_rows(Dist::Plane, n, 3, 64), hollow_box(n, 65),
          sphere_surface(n, 62)})
      EXPECT_NE(knn::omp::build_grid_index(points.data(), n, params), nullptr);
    const std::vector<float> plane = tilted_plane(n, 61);  // poor: kept once refined
    EXPECT_EQ(knn::omp::build_grid_index(plane.data(), n, params) != nullptr, refine);
  }
  EXPECT_NE(build_grid(curve_cases(n, 97).front().points), nullptr);
}

// AUTO over curves: the kd-tree serves, with the oracle's answers, up to k =
// 1000. Before, the x axis kept a grid of one row of cells, whose walks
// gave up before their lists of 1000 filled and scanned all n points
// (20,000 points, all-kNN: 6.9 s against the kd-tree's 0.14 on 2 cores).
TEST(GridCpuCurves, AutoServesCurvesWithTheKdTree) {
  expect_auto_refuses_grids_on_curves(KNN_BACKEND_OPENMP, 6000, 1000);
}

// The target points per cell (IndexParams.leaf_size) changes the grid, never
// the answer.
TEST(GridCpuOccupancy, LeafSizeChangesNothingButSpeed) {
  const std::vector<float> points = make_rows(Dist::Uniform, 3000, 3, 41);
  const std::vector<float> queries = queries_with_outliers(Dist::Uniform, 400, 42);
  const KnnResult reference = engine_knn(*build_grid(points, 3), queries, 16);
  for (const int leaf : {1, 2, 17, 500, 100000}) {
    SCOPED_TRACE(leaf);
    auto grid = build_grid(points, leaf);
    ASSERT_NE(grid, nullptr);
    EXPECT_TRUE(same_knn(reference, engine_knn(*grid, queries, 16)));
  }
}

// ---- Through the index API ------------------------------------------------------

// KNN_STRUCTURE_GRID on the OpenMP backend, through the index API.
TEST(GridCpuApi, GridOrReportedFallback) { expect_grid_or_reported_fallback(KNN_BACKEND_OPENMP); }

// ---- The bounds alone -------------------------------------------------------------

struct BoundCase {
  std::vector<float> points, queries;
  knn::GridLayout layout;
};

BoundCase bound_case(Dist dist, int64_t n, int target, uint64_t seed) {
  BoundCase c{make_rows(dist, n, 3, seed), queries_with_outliers(dist, 200, seed + 1), {}};
  float lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = hi[a] = c.points[a];
    for (size_t i = a; i < c.points.size(); i += 3)
      lo[a] = std::min(lo[a], c.points[i]), hi[a] = std::max(hi[a], c.points[i]);
  }
  c.layout = knn::make_grid_layout(lo, hi, n, target);
  return c;
}

// For every query and point: the cell bound of the point's cell and the
// bound beyond every shell that excludes the point never exceed the point's
// float32 distance. With target 1 the cells are as small as they get, so
// many points sit on or near cell boundaries.
TEST(GridBounds, NeverExceedTheFloatDistance) {
  for (const Dist dist : all_dists()) {
    SCOPED_TRACE(dist_name(dist));
    const BoundCase c = bound_case(dist, 2000, 1, 51);
    const knn::GridLayout& g = c.layout;
    int64_t violations = 0;
    for (size_t qi = 0; qi < c.queries.size(); qi += 3) {
      const float* q = &c.queries[qi];
      const int32_t qc[3] = {g.cell_on_axis(q[0], 0), g.cell_on_axis(q[1], 1),
                             g.cell_on_axis(q[2], 2)};
      for (size_t pi = 0; pi < c.points.size(); pi += 3) {
        const float* p = &c.points[pi];
        const int32_t pc[3] = {g.cell_on_axis(p[0], 0), g.cell_on_axis(p[1], 1),
                               g.cell_on_axis(p[2], 2)};
        const float d = contract_sq_distance(q, p, 3);
        if (g.cell_bound(q, qc, pc[0], pc[1], pc[2]) > d) ++violations;
        int32_t ring = 0;
        for (int a = 0; a < 3; ++a) ring = std::max(ring, std::abs(pc[a] - qc[a]));
        if (ring > 0 && g.beyond_shell_bound(q, qc, ring - 1) > d) ++violations;
      }
    }
    EXPECT_EQ(violations, 0);
  }
}

// The bounds are not vacuous: far cells give a positive bound, so the walk
// does stop early (a bound of 0 everywhere would pass the test above).
TEST(GridBounds, PruneFarCells) {
  const BoundCase c = bound_case(Dist::Uniform, 8000, 3, 61);
  const knn::GridLayout& g = c.layout;
  const float q[3] = {0.0f, 0.0f, 0.0f};
  const int32_t qc[3] = {g.cell_on_axis(0.0f, 0), g.cell_on_axis(0.0f, 1), g.cell_on_axis(0.0f, 2)};
  EXPECT_EQ(g.cell_bound(q, qc, qc[0], qc[1], qc[2]), 0.0f);
  EXPECT_GT(g.cell_bound(q, qc, qc[0] + 2, qc[1], qc[2]), 0.0f);
  EXPECT_GT(g.beyond_shell_bound(q, qc, 1), 0.0f);
  const float width = static_cast<float>(g.width[0]);
  // Beyond shell 1, a point is at least one full cell away on some axis.
  EXPECT_GE(g.beyond_shell_bound(q, qc, 1), 0.99f * width * width);
  EXPECT_FALSE(g.shell_covers_grid(qc, 1));
  EXPECT_TRUE(g.shell_covers_grid(qc, g.cells[0] + g.cells[1] + g.cells[2]));
}

}  // namespace
}  // namespace knn_test
