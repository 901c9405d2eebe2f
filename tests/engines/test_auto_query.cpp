// AUTO at query time (issue #18, item 2): the planner's decision
// (serving_structure), the kd-tree an AUTO index adds on first use
// (BasicLazyKdTree) run over OpenMP engines (one build whatever the number of
// threads that ask, memory failures answered by the primary structure, host
// allocation failures injected at every allocation of the build), device
// copies kept per structure, the memory estimates, and the API: an AUTO index
// answers like every explicit structure and the oracle below and above the
// thresholds, float32 and float64. On the CPU an AUTO index adds the
// kd-tree only for queries away from the points and for short lists on
// points stacked at few locations (src/index_planner.h); the
// CUDA configs
// (skipped without a device) are where the API really adds it, from a device
// copy of the primary's points (each CUDA engine's copy_points_to_device,
// checked bit for bit), on device and host arrays, and with that copy's
// allocation failed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../../bench/adversarial_datasets.h"
#include "../../common/error.h"
#include "../../cuda/cuda_index.h"
#include "../../engine/index_engine.h"
#include "../../src/device_replicas.h"
#include "../../src/index_planner.h"
#include "../../src/lazy_kdtree.h"
#include "fake_devices.h"
#include "gpu_test_support.h"
#include "grid_test_support.h"
#include "host_alloc_hook.h"
#include "index_oracle.h"
#include "index_test_helpers.h"
#include "scoped_env.h"
#include "test_data.h"

namespace {

using knn::CallKind;
using knn_test::Dist;
namespace alloc_hook = knn_test::alloc_hook;

constexpr int kCuda = KNN_BACKEND_CUDA, kCpu = KNN_BACKEND_OPENMP;
// A list the kd-tree an AUTO CUDA grid index adds serves, which the grid
// itself could serve (its warp lists).
constexpr int kKdTreeServedK = 300;
static_assert(kKdTreeServedK > knn::kGpuGridMaxLeadingK && kKdTreeServedK <= knn::kGpuMaxListK);
constexpr int kGrid = KNN_STRUCTURE_GRID, kKdTree = KNN_STRUCTURE_KDTREE,
              kBrute = KNN_STRUCTURE_BRUTE_FORCE;

// ---- The decision ------------------------------------------------------------------

TEST(ServingStructure, GpuGridGivesWayToTheKdTreeFromLongListsOfNeighbours) {
  const int64_t n = 10000000;
  for (int k : {1, 8, 16, 30, 64, 100, 128, knn::kGpuGridMaxLeadingK})
    EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, k, CallKind::Nearest), kGrid) << k;
  for (int k : {knn::kGpuGridMaxLeadingK + 1, kKdTreeServedK, 2048, 2049, 100000})
    EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, k, CallKind::Nearest), kKdTree) << k;
  // Radius rows stay on the grid up to the list limit.
  for (int width : {0, 1, 100, knn::kGpuMaxListK})
    EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, width, CallKind::Radius), kGrid) << width;
  EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, knn::kGpuMaxListK + 1, CallKind::Radius),
            kKdTree);
  // The other backend and primaries are not affected.
  EXPECT_EQ(knn::serving_structure(kCpu, kGrid, n, 1000, CallKind::Nearest), kGrid);
  EXPECT_EQ(knn::serving_structure(kCuda, kBrute, n, 100, CallKind::Nearest), kBrute);
}

// A kNN call whose queries lie away from the points (the grid's
// share_of_isolated_queries, times n, above kGpuGridMaxIsolatedScan) goes to
// the kd-tree; the share is read only where the grid would serve a kNN call.
TEST(ServingStructure, GpuGridGivesWayToTheKdTreeForQueriesAwayFromThePoints) {
  const double limit = knn::kGpuGridMaxIsolatedScan;
  for (const int64_t n : {int64_t{1000000}, int64_t{100000000}}) {
    const double share = limit / static_cast<double>(n);
    for (int k : {1, 8, 32, 100, knn::kGpuGridMaxLeadingK}) {
      EXPECT_TRUE(knn::reads_isolated_share(kCuda, kGrid, n, k, CallKind::Nearest)) << k;
      for (double s : {0.0, share / 2, share})
        EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, k, CallKind::Nearest, s), kGrid) << s;
      for (double s : {share * 1.01, 0.5, 1.0})
        EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, k, CallKind::Nearest, s), kKdTree) << s;
    }
  }
  // However isolated, a small grid scans its points for them, so the share
  // is not even read there.
  const auto small = static_cast<int64_t>(knn::kGpuGridMaxIsolatedScan);
  EXPECT_EQ(knn::serving_structure(kCuda, kGrid, small, 8, CallKind::Nearest, 1.0), kGrid);
  EXPECT_FALSE(knn::reads_isolated_share(kCuda, kGrid, small, 8, CallKind::Nearest));
  EXPECT_TRUE(knn::reads_isolated_share(kCuda, kGrid, small + 1, 8, CallKind::Nearest));
  const int64_t n = 10000000;
  EXPECT_FALSE(
      knn::reads_isolated_share(kCuda, kGrid, n, knn::kGpuGridMaxLeadingK + 1, CallKind::Nearest));
  EXPECT_FALSE(knn::reads_isolated_share(kCuda, kGrid, n, 8, CallKind::Radius));
  EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, 8, CallKind::Radius, 1.0), kGrid);
  for (int primary : {kKdTree, kBrute}) {
    EXPECT_FALSE(knn::reads_isolated_share(kCuda, primary, n, 8, CallKind::Nearest));
    EXPECT_EQ(knn::serving_structure(kCuda, primary, 16384, 8, CallKind::Nearest, 1.0), primary);
  }
}

// On the CPU too (the OpenMP grid leads at every k, but scans every point
// for a query away from them), from kCpuGridMaxIsolatedScan, at any k.
TEST(ServingStructure, CpuGridGivesWayToTheKdTreeForQueriesAwayFromThePoints) {
  const double limit = knn::kCpuGridMaxIsolatedScan;
  for (const int64_t n : {int64_t{1000000}, int64_t{100000000}}) {
    const double share = limit / static_cast<double>(n);
    for (int k : {1, 8, 100, 1000}) {
      EXPECT_TRUE(knn::reads_isolated_share(kCpu, kGrid, n, k, CallKind::Nearest)) << k;
      for (double s : {0.0, share / 2, share})
        EXPECT_EQ(knn::serving_structure(kCpu, kGrid, n, k, CallKind::Nearest, s), kGrid) << s;
      for (double s : {share * 1.01, 0.5, 1.0})
        EXPECT_EQ(knn::serving_structure(kCpu, kGrid, n, k, CallKind::Nearest, s), kKdTree) << s;
    }
  }
  const auto small = static_cast<int64_t>(knn::kCpuGridMaxIsolatedScan);
  EXPECT_FALSE(knn::reads_isolated_share(kCpu, kGrid, small, 8, CallKind::Nearest));
  EXPECT_TRUE(knn::reads_isolated_share(kCpu, kGrid, small + 1, 8, CallKind::Nearest));
  EXPECT_EQ(knn::serving_structure(kCpu, kGrid, small, 8, CallKind::Nearest, 1.0), kGrid);
  const int64_t n = 10000000;
  EXPECT_FALSE(knn::reads_isolated_share(kCpu, kGrid, n, 8, CallKind::Radius));
  EXPECT_EQ(knn::serving_structure(kCpu, kGrid, n, 8, CallKind::Radius, 1.0), kGrid);
  for (int primary : {kKdTree, kBrute}) {
    EXPECT_FALSE(knn::reads_isolated_share(kCpu, primary, n, 8, CallKind::Nearest));
    EXPECT_EQ(knn::serving_structure(kCpu, primary, n, 8, CallKind::Nearest, 1.0), primary);
  }
}

// An OpenMP AUTO index of `points` (rows of 3) answers each of `query_sets`
// at every k of `ks` bit for bit as an explicit kd-tree, and so does an
// explicit grid when `with_grid`.
void expect_auto_answers_as_explicit(const std::vector<float>& points,
                                     std::initializer_list<const std::vector<float>*> query_sets,
                                     std::initializer_list<int> ks, bool with_grid) {
  knn_options o;
  knn_options_init(&o);
  o.backend = kCpu;
  o.structure = KNN_STRUCTURE_AUTO;
  knn_test::IndexHandle automatic = knn_test::build_index(points, 3, o);
  o.structure = kKdTree;
  knn_test::IndexHandle kd = knn_test::build_index(points, 3, o);
  o.structure = kGrid;
  knn_test::IndexHandle grid = with_grid ? knn_test::build_index(points, 3, o) : nullptr;
  ASSERT_TRUE(automatic && kd && (grid || !with_grid));
  for (const std::vector<float>* queries : query_sets)
    for (int k : ks) {
      SCOPED_TRACE(k);
      const knn_test::KnnResult reference = knn_test::query_index(kd.get(), *queries, 3, k);
      EXPECT_TRUE(
          knn_test::same_knn(reference, knn_test::query_index(automatic.get(), *queries, 3, k)));
      if (with_grid) {
        EXPECT_TRUE(
            knn_test::same_knn(reference, knn_test::query_index(grid.get(), *queries, 3, k)));
      }
    }
}

// An OpenMP AUTO index over a hollow box: a call whose queries lie deep in
// the hole goes to the kd-tree (structure_serving_call over the OpenMP grid,
// which reads the queries' share), one among the points stays on the grid;
// through the API the AUTO index answers both as an explicit kd-tree does.
TEST(AutoQueryCpu, QueriesDeepInTheHoleOfAHollowBoxGoToTheKdTree) {
  const int64_t n = 20000, m = 2000;
  const std::vector<float> points = knn_test::hollow_box(n, 91);
  const std::vector<float> deep = knn_test::queries_in_cube(m, 0.3, 0.7, 92);
  const std::vector<float> among = knn_test::hollow_box(m, 93);
  const auto grid = knn::omp::build_grid_index(points.data(), n, knn::IndexParams{});
  ASSERT_NE(grid, nullptr);
  for (int k : {1, 8, 100, 1000}) {
    EXPECT_EQ(knn::structure_serving_call(*grid, n, k, CallKind::Nearest, deep.data(), m), kKdTree)
        << k;
    EXPECT_EQ(knn::structure_serving_call(*grid, n, k, CallKind::Nearest, among.data(), m), kGrid)
        << k;
  }
  expect_auto_answers_as_explicit(points, {&deep, &among}, {1, 8, 100}, false);
}

// The adversarial distributions of bench/bench_auto.cpp (issue 53): on each,
// an OpenMP AUTO index takes the primary structure and hands each kNN call to
// the structure that the rule of src/index_planner.h names (the decision, not
// timings), and answers bit for bit as the explicit kd-tree and grid do.
// Queries three box widths beyond the points' box are away from them
// (grid_walk.h, beyond_the_box), though the clamped cells by the box's face
// hold points: the kd-tree serves them (the grid served them before).
TEST(AutoQueryCpu, AdversarialDistributionsGetTheStructureTheRuleNames) {
  using knn_bench::Adversarial;
  struct Case {
    Adversarial d;
    int primary, serving;
  };
  const Case cases[] = {
      {Adversarial::Uniform, kGrid, kGrid},         {Adversarial::QueriesOutside, kGrid, kKdTree},
      {Adversarial::Collinear, kKdTree, kKdTree},   {Adversarial::Helix, kKdTree, kKdTree},
      {Adversarial::FarOutliers, kKdTree, kKdTree}, {Adversarial::Clustered, kKdTree, kKdTree}};
  const int64_t n = 8000, m = 400;
  for (const Case& c : cases) {
    SCOPED_TRACE(knn_bench::adversarial_name(c.d));
    const std::vector<Point> cloud = knn_bench::adversarial_cloud(c.d, n, false);
    const std::vector<Point> query_cloud = knn_bench::adversarial_cloud(c.d, m, true);
    const std::vector<float> points(&cloud[0].p[0], &cloud[0].p[0] + 3 * n);
    const std::vector<float> queries(&query_cloud[0].p[0], &query_cloud[0].p[0] + 3 * m);
    const auto primary = knn::build_index_engine<float>(kCpu, KNN_STRUCTURE_AUTO, points.data(), n,
                                                        3, knn::IndexParams{});
    ASSERT_NE(primary, nullptr);
    EXPECT_EQ(primary->structure(), c.primary);
    for (int k : {1, 8, 100})
      EXPECT_EQ(knn::structure_serving_call(*primary, n, k, CallKind::Nearest, queries.data(), m),
                c.serving)
          << k;
    expect_auto_answers_as_explicit(points, {&queries}, {1, 100}, true);
    if (HasFatalFailure()) return;
  }
}

// A scan: points on a surface, 1 in 200 sprayed over its cube
// (bench_auto's sprayed-surface). The sprayed points are indexed points, so
// each has itself around; those alone in their cells still count as away
// from the points (grid_walk.h away_from_points), and an all-kNN call
// (queries null) reads the share from the indexed points. On the GPU, where
// such a point's walk of empty shells costs the grid ten times the
// kd-tree's time (src/index_planner.h), that share makes a grid of 10^6
// such points give way; the surface alone keeps it.
TEST(AutoQueryCpu, TheSprayOfAScanIsSeenFromTheIndexedPoints) {
  using knn_bench::Adversarial;
  const int64_t n = 200000;
  const std::vector<Point> cloud =
      knn_bench::adversarial_cloud(Adversarial::SprayedSurface, n, false);
  const std::vector<float> points(&cloud[0].p[0], &cloud[0].p[0] + 3 * n);
  std::vector<float> surface;
  for (int64_t i = 0; i < n; ++i)
    if (i % 200 != 7) surface.insert(surface.end(), &points[3 * i], &points[3 * i] + 3);
  knn::IndexParams params;
  const auto sprayed = knn::omp::build_grid_index(points.data(), n, params);
  const auto clean =
      knn::omp::build_grid_index(surface.data(), static_cast<int64_t>(surface.size() / 3), params);
  ASSERT_NE(sprayed, nullptr);
  ASSERT_NE(clean, nullptr);
  const double share = sprayed->share_of_isolated_queries(nullptr, 0, knn::CallParams{});
  std::printf("  share of the indexed points away from the others: %.5f (spray 0.005)\n", share);
  EXPECT_GT(share, 0.0);
  EXPECT_LE(share, 0.005 + 1.0 / knn::kPlacementSampleQueries);
  EXPECT_EQ(clean->share_of_isolated_queries(nullptr, 0, knn::CallParams{}), 0.0);
  const int64_t scan = 1000000;
  EXPECT_EQ(knn::serving_structure(kCuda, kGrid, scan, 16, CallKind::Nearest, share), kKdTree);
  EXPECT_EQ(knn::serving_structure(kCuda, kGrid, scan, 16, CallKind::Nearest, 0.0), kGrid);
}

// Points stacked 16 at each of n / 16 uniform locations (bench_auto's
// duplicates) grow their cells' occupancy like a curve's from one scale to
// the next, but like a volume's two steps up (common/grid_layout.h "Stacked
// points"): an AUTO index keeps its grid (the kd-tree was its primary
// before), and on both backends the kd-tree serves lists shorter than a
// point's crowded cell, the grid longer ones; answers bit for bit as the
// explicit structures'.
TEST(AutoQueryCpu, StackedPointsKeepTheGridAndShortListsGoToTheKdTree) {
  using knn_bench::Adversarial;
  const int64_t n = 8000, m = 400;
  const std::vector<Point> cloud = knn_bench::adversarial_cloud(Adversarial::Duplicates, n, false);
  const std::vector<Point> query_cloud =
      knn_bench::adversarial_cloud(Adversarial::Duplicates, m, true);
  const std::vector<float> points(&cloud[0].p[0], &cloud[0].p[0] + 3 * n);
  const std::vector<float> queries(&query_cloud[0].p[0], &query_cloud[0].p[0] + 3 * m);
  const auto primary = knn::build_index_engine<float>(kCpu, KNN_STRUCTURE_AUTO, points.data(), n, 3,
                                                      knn::IndexParams{});
  ASSERT_NE(primary, nullptr);
  ASSERT_EQ(primary->structure(), kGrid);
  const double crowd = primary->stacked_cell_points();
  EXPECT_GT(crowd, 16.0);  // the 16 at its own location, and its neighbours
  EXPECT_LT(crowd, 32.0);
  for (int k : {1, 8}) {
    EXPECT_EQ(knn::structure_serving_call(*primary, n, k, CallKind::Nearest, queries.data(), m),
              kKdTree)
        << k;
    EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, k, CallKind::Nearest, 0.0, crowd), kKdTree)
        << k;
  }
  for (int k : {100, 1000}) {
    EXPECT_EQ(knn::structure_serving_call(*primary, n, k, CallKind::Nearest, queries.data(), m),
              kGrid)
        << k;
    EXPECT_EQ(knn::structure_serving_call<float>(*primary, n, k, CallKind::Nearest, nullptr, n),
              kGrid)
        << k;
  }
  EXPECT_EQ(knn::serving_structure(kCpu, kGrid, n, 8, CallKind::Radius, 0.0, crowd), kGrid);
  EXPECT_EQ(knn::serving_structure(kCuda, kGrid, n, 100, CallKind::Nearest, 0.0, crowd), kGrid);
  // Points on a line stacked alike stay a curve: the kd-tree is the primary.
  std::vector<float> stacked_line(static_cast<size_t>(3 * n));
  for (int64_t i = 0; i < n; ++i) {
    const float t = static_cast<float>(i / 16) / static_cast<float>(n / 16);
    stacked_line[static_cast<size_t>(3 * i)] = t;
    stacked_line[static_cast<size_t>(3 * i + 1)] = 0.5f * t + 0.25f;
    stacked_line[static_cast<size_t>(3 * i + 2)] = 0.25f * t + 0.5f;
  }
  EXPECT_EQ(knn::build_index_engine<float>(kCpu, KNN_STRUCTURE_AUTO, stacked_line.data(), n, 3,
                                           knn::IndexParams{})
                ->structure(),
            kKdTree);
  expect_auto_answers_as_explicit(points, {&queries}, {1, 8, 100}, true);
}

TEST(ServingStructure, GpuBruteForceGivesWayOnlyWhereItWouldRefuse) {
  for (CallKind kind : {CallKind::Nearest, CallKind::Radius}) {
    // Its lists hold at most n entries: at most 2048 points never refuse.
    for (int k : {1, 100, 2048, 5000, 1 << 30})
      EXPECT_EQ(knn::serving_structure(kCuda, kBrute, 2048, k, kind), kBrute) << k;
    for (int k : {1, 100, 2048})
      EXPECT_EQ(knn::serving_structure(kCuda, kBrute, 16384, k, kind), kBrute) << k;
    for (int k : {2049, 16384, 1 << 30})
      EXPECT_EQ(knn::serving_structure(kCuda, kBrute, 16384, k, kind), kKdTree) << k;
  }
  EXPECT_FALSE(knn::primary_refuses(kCuda, kBrute, 2049, 2048));
  EXPECT_TRUE(knn::primary_refuses(kCuda, kBrute, 2049, 2049));
  EXPECT_FALSE(knn::primary_refuses(kCuda, kBrute, 2048, 2049));
  EXPECT_TRUE(knn::primary_refuses(kCuda, kGrid, 20000, 2049));
  EXPECT_FALSE(knn::primary_refuses(kCuda, kKdTree, 20000, 1 << 30));
}

TEST(ServingStructure, TheCpuAndTheKdTreeKeepTheirStructure) {
  for (int k : {1, 64, 100, 2049, 1 << 30}) {
    for (CallKind kind : {CallKind::Nearest, CallKind::Radius}) {
      for (int primary : {kGrid, kKdTree, kBrute}) {
        EXPECT_EQ(knn::serving_structure(kCpu, primary, 10000000, k, kind), primary) << k;
        EXPECT_FALSE(knn::primary_refuses(kCpu, primary, 10000000, k));
      }
      EXPECT_EQ(knn::serving_structure(kCuda, kKdTree, 10000000, k, kind), kKdTree) << k;
    }
  }
}

// ---- The lazy kd-tree over OpenMP engines ---------------------------------------------

template <typename Scalar>
using EngineOf = std::unique_ptr<knn::BasicIndexEngine<Scalar>>;

// Rows of the test's precision; the float64 rows need a double's mantissa.
template <typename Scalar>
std::vector<Scalar> in_precision(const std::vector<float>& rows) {
  std::vector<Scalar> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    out[i] = static_cast<Scalar>(rows[i]) * (sizeof(Scalar) == 8 ? 1.0 + 0x1p-40 : 1.0);
  return out;
}

knn::CallParams two_threads() {
  knn::CallParams call;
  call.threads = 2;
  return call;
}

// A primary grid of n 3-D points and the kd-tree build an index would hand
// the holder (the points from the primary, in input order), counting builds.
template <typename Scalar>
struct LazyCase {
  std::vector<Scalar> points;
  int64_t n;
  EngineOf<Scalar> primary;
  knn::BasicLazyKdTree<Scalar> lazy;
  std::atomic<int> builds{0};

  explicit LazyCase(int64_t count, Dist dist = Dist::Uniform)
      : points(in_precision<Scalar>(knn_test::make_rows(dist, count, 3, 41))), n(count) {
    primary = knn::omp::build_grid_index(points.data(), n, knn::IndexParams{});
  }
  typename knn::BasicLazyKdTree<Scalar>::Builder builder() {
    return [this] {
      ++builds;
      std::vector<Scalar> rows(points.size());
      primary->copy_points(rows.data());
      return knn::omp::build_kdtree_index(rows.data(), n, 3, knn::IndexParams{});
    };
  }
};

// kNN rows of `engine` for the queries, k per row.
template <typename Scalar>
std::pair<std::vector<int>, std::vector<Scalar>> knn_rows(const knn::BasicIndexEngine<Scalar>& e,
                                                          const std::vector<Scalar>& queries,
                                                          int k) {
  const int64_t m = static_cast<int64_t>(queries.size()) / 3;
  std::vector<int> idx(static_cast<size_t>(m) * k, -7);
  std::vector<Scalar> sq(idx.size(), Scalar{-7});
  e.knn(queries.data(), m, k, idx.data(), sq.data(), two_threads());
  return {idx, sq};
}

template <typename Scalar>
void expect_lazy_kdtree_answers_like_the_primary() {
  LazyCase<Scalar> c(3000);
  ASSERT_TRUE(c.primary);
  ASSERT_EQ(c.primary->structure(), kGrid);
  // The primary's own structure: no build.
  EXPECT_EQ(&c.lazy.serving(*c.primary, kGrid, true, c.builder()), c.primary.get());
  EXPECT_EQ(c.builds.load(), 0);
  EXPECT_EQ(c.lazy.built(), nullptr);
  const auto& kd = c.lazy.serving(*c.primary, kKdTree, true, c.builder());
  EXPECT_EQ(kd.structure(), kKdTree);
  EXPECT_EQ(c.lazy.built(), &kd);
  EXPECT_EQ(&c.lazy.serving(*c.primary, kKdTree, true, c.builder()), &kd);
  EXPECT_EQ(c.builds.load(), 1);
  const std::vector<Scalar> queries =
      in_precision<Scalar>(knn_test::make_query_rows(Dist::Uniform, 200, 3, 43));
  for (int k : {1, 64, 100, 2100}) {
    const auto want = knn_rows(*c.primary, queries, k), got = knn_rows(kd, queries, k);
    EXPECT_TRUE(knn_test::same_rows(want.first, got.first, 200, k)) << k;
    EXPECT_TRUE(knn_test::same_bits(want.second, got.second)) << k;
  }
  for (bool exclude : {false, true}) {
    const int k = 70;
    std::vector<int> wi(static_cast<size_t>(c.n) * k), gi(wi.size(), -7);
    std::vector<Scalar> wd(wi.size()), gd(wi.size(), Scalar{-7});
    c.primary->knn_self(k, exclude, wi.data(), wd.data(), two_threads());
    kd.knn_self(k, exclude, gi.data(), gd.data(), two_threads());
    EXPECT_TRUE(knn_test::same_rows(wi, gi, c.n, k)) << exclude;
    EXPECT_TRUE(knn_test::same_bits(wd, gd)) << exclude;
  }
}

TEST(LazyKdTree, BuiltOnceOnFirstUseAndAnswersLikeThePrimary) {
  expect_lazy_kdtree_answers_like_the_primary<float>();
}

TEST(LazyKdTree, Float64BuiltOnceOnFirstUseAndAnswersLikeThePrimary) {
  expect_lazy_kdtree_answers_like_the_primary<double>();
}

TEST(LazyKdTree, ThreadsAskingAtOnceShareOneBuildAndOneAnswer) {
  LazyCase<float> c(20000);
  ASSERT_TRUE(c.primary);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 300, 3, 47);
  const auto want = knn_rows(*c.primary, queries, 100);
  constexpr int kThreads = 8;
  std::vector<const knn::IndexEngine*> served(kThreads, nullptr);
  std::vector<std::pair<std::vector<int>, std::vector<float>>> rows(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      served[t] = &c.lazy.serving(*c.primary, kKdTree, true, c.builder());
      rows[t] = knn_rows(*served[t], queries, 100);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.builds.load(), 1);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(served[t], c.lazy.built()) << t;
    EXPECT_TRUE(knn_test::same_rows(want.first, rows[t].first, 300, 100)) << t;
    EXPECT_TRUE(knn_test::same_bits(want.second, rows[t].second)) << t;
  }
}

TEST(LazyKdTree, AMemoryFailureLeavesTheCallToThePrimaryAndALaterCallTriesAgain) {
  LazyCase<float> c(3000);
  ASSERT_TRUE(c.primary);
  for (int status : {KNN_ERR_DEVICE_OUT_OF_MEMORY, KNN_ERR_HOST_OUT_OF_MEMORY}) {
    const auto full = [&]() -> EngineOf<float> { knn::fail(status, "the device is full"); };
    EXPECT_EQ(&c.lazy.serving(*c.primary, kKdTree, true, full), c.primary.get());
    EXPECT_EQ(c.lazy.built(), nullptr);
    // Where the primary cannot serve the call, the memory failure is the call's.
    try {
      c.lazy.serving(*c.primary, kKdTree, false, full);
      ADD_FAILURE() << "no failure where the primary cannot serve";
    } catch (const knn::Error& e) {
      EXPECT_EQ(e.status(), status);
      EXPECT_STREQ(e.what(), "the device is full");
    }
  }
  const auto no_memory = []() -> EngineOf<float> { throw std::bad_alloc(); };
  EXPECT_EQ(&c.lazy.serving(*c.primary, kKdTree, true, no_memory), c.primary.get());
  EXPECT_THROW(c.lazy.serving(*c.primary, kKdTree, false, no_memory), std::bad_alloc);
  // Any other failure is the call's, whoever could serve it.
  const auto broken = []() -> EngineOf<float> { knn::fail(KNN_ERR_DEVICE, "fell off the bus"); };
  EXPECT_THROW(c.lazy.serving(*c.primary, kKdTree, true, broken), knn::Error);
  EXPECT_EQ(c.lazy.built(), nullptr);
  // Then a build that works.
  EXPECT_EQ(c.lazy.serving(*c.primary, kKdTree, true, c.builder()).structure(), kKdTree);
  EXPECT_EQ(c.builds.load(), 1);
}

// Every allocation of the kd-tree's build made to fail in turn (the copy of
// the points and the OpenMP engine's own): the primary answers each time,
// nothing is left behind, and once no allocation fails the kd-tree is built.
TEST(LazyKdTree, AHostAllocationFailureAnywhereInTheBuildFallsBackCleanly) {
  LazyCase<float> c(3000);
  ASSERT_TRUE(c.primary);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 50, 3, 53);
  const auto want = knn_rows(*c.primary, queries, 80);
  bool built = false;
  int fallbacks = 0;
  for (int64_t nth = 1; nth < 10000 && !built; ++nth) {
    SCOPED_TRACE("allocation " + std::to_string(nth));
    const int64_t live_before = alloc_hook::live_count();
    {
      knn::BasicLazyKdTree<float> lazy;
      alloc_hook::arm(nth, alloc_hook::Mode::Transient);
      const knn::IndexEngine* served = nullptr;
      try {
        served = &lazy.serving(*c.primary, kKdTree, true, c.builder());
      } catch (...) {
        alloc_hook::disarm();
        FAIL() << "the build's memory failure escaped the call";
      }
      const bool failed = alloc_hook::failed() > 0;
      alloc_hook::disarm();
      built = !failed;
      fallbacks += failed ? 1 : 0;
      EXPECT_EQ(served, failed ? c.primary.get() : lazy.built());
      const auto got = knn_rows(*served, queries, 80);
      EXPECT_TRUE(knn_test::same_rows(want.first, got.first, 50, 80));
      EXPECT_TRUE(knn_test::same_bits(want.second, got.second));
    }
    EXPECT_EQ(alloc_hook::live_count(), live_before);
  }
  EXPECT_TRUE(built);
  EXPECT_GT(fallbacks, 2);  // the copy of the points and the engine's own buffers
  std::printf("[          ] %d allocations of the build failed in turn\n", fallbacks);
}

// ---- Device copies per structure (OpenMP engines standing in for devices) ------------

TEST(DeviceCopies, EachDeviceKeepsACopyOfTheStructureThatServesTheCall) {
  LazyCase<float> c(3000);
  ASSERT_TRUE(c.primary);
  const knn::IndexEngine& kd = c.lazy.serving(*c.primary, kKdTree, true, c.builder());
  knn::BasicDeviceReplicas<float> replicas{knn_test::fake_ops()};
  std::atomic<int> copies{0};
  const knn::BasicCopyBuilder<float> build_like = [&](const float* host_points) {
    ++copies;
    return knn::omp::build_kdtree_index(host_points, c.n, 3, knn::IndexParams{});
  };
  const knn::BasicCopyBuilder<float> build_grid = [&](const float* host_points) {
    ++copies;
    return knn::omp::build_grid_index(host_points, c.n, knn::IndexParams{});
  };
  knn_test::fake_current = 0;
  EXPECT_EQ(replicas.prepare({0, 1}, true, *c.primary, 0, build_grid), (std::vector<int>{0, 1}));
  EXPECT_EQ(copies.load(), 1);
  EXPECT_EQ(replicas.on(1, *c.primary, 0).structure(), kGrid);
  // The kd-tree serves a call: device 1 gets a kd-tree copy beside the grid.
  EXPECT_EQ(replicas.prepare({0, 1}, true, kd, 0, build_like), (std::vector<int>{0, 1}));
  EXPECT_EQ(copies.load(), 2);
  EXPECT_EQ(replicas.on(1, kd, 0).structure(), kKdTree);
  EXPECT_EQ(replicas.on(1, *c.primary, 0).structure(), kGrid);
  EXPECT_EQ(&replicas.on(0, kd, 0), &kd);
  // Asked again, neither is built twice.
  replicas.prepare({0, 1}, true, kd, 0, build_like);
  replicas.prepare({0, 1}, true, *c.primary, 0, build_grid);
  EXPECT_EQ(copies.load(), 2);
  EXPECT_THROW(replicas.on(2, kd, 0), knn::Error);
}

// ---- Memory estimates ---------------------------------------------------------------

TEST(AutoEstimates, CountTheKdTreeBesideThePrimaryAndGrowWithEveryArgument) {
  knn_options opt;
  knn_options_init(&opt);
  const auto with = [&opt](int structure) {
    opt.structure = structure;
    return &opt;
  };
  for (int64_t n : {int64_t{2049}, int64_t{20000}, int64_t{1000000}}) {
    for (int k : {1, 8, 100, 3000}) {
      for (int dim : {2, 3, 20}) {
        const int64_t m = 100000;
        // Every structure AUTO may keep, and the kd-tree beside it.
        const size_t both = knn_estimate_build_bytes(n, dim, with(KNN_STRUCTURE_AUTO)) +
                            knn_estimate_build_bytes(n, dim, with(KNN_STRUCTURE_KDTREE));
        EXPECT_GE(knn_estimate_query_bytes(m, k, n, dim, with(KNN_STRUCTURE_AUTO)), both)
            << n << " " << k << " " << dim;
        const size_t both64 = knn_estimate_build_bytes_f64(n, dim, with(KNN_STRUCTURE_AUTO)) +
                              knn_estimate_build_bytes_f64(n, dim, with(KNN_STRUCTURE_KDTREE));
        EXPECT_GE(knn_estimate_query_bytes_f64(m, k, n, dim, with(KNN_STRUCTURE_AUTO)), both64);
        // Never below an explicit structure's figure.
        for (int s : {kGrid, kKdTree, kBrute}) {
          if (s == kGrid && dim != 3) continue;
          EXPECT_GE(knn_estimate_query_bytes(m, k, n, dim, with(KNN_STRUCTURE_AUTO)),
                    knn_estimate_query_bytes(m, k, n, dim, with(s)));
        }
      }
    }
  }
  // Non-decreasing in each argument across the point where the kd-tree counts.
  size_t previous = 0;
  for (int64_t n : {1, 100, 2048, 2049, 16384, 16385, 1000000}) {
    const size_t bytes = knn_estimate_query_bytes(1000, 100, n, 3, nullptr);
    EXPECT_GE(bytes, previous) << n;
    previous = bytes;
  }
  previous = 0;
  for (int dim = 1; dim <= 20; ++dim) {
    const size_t bytes = knn_estimate_query_bytes(1000, 100, 100000, dim, nullptr);
    EXPECT_GE(bytes, previous) << dim;
    previous = bytes;
  }
  previous = 0;
  for (int k : {1, 63, 64, 2048, 2049, 100000}) {
    const size_t bytes = knn_estimate_query_bytes(1000, k, 100000, 3, nullptr);
    EXPECT_GE(bytes, previous) << k;
    previous = bytes;
  }
}

// ---- The API: AUTO against every explicit structure and the oracle ------------------------

struct ApiCase {
  int backend;
  int64_t grid_n;   // above AUTO's brute-force size: the primary is the grid
  int64_t brute_n;  // AUTO's brute force, above the GPU's 2048-entry lists
};

class AutoQuery : public ::testing::TestWithParam<ApiCase> {
 protected:
  void SetUp() override {
    if (GetParam().backend == kCuda && cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  knn_options options(int structure) const {
    knn_options o;
    knn_options_init(&o);
    o.backend = GetParam().backend;
    o.structure = structure;
    return o;
  }
};

std::string case_name(const ::testing::TestParamInfo<ApiCase>& info) {
  return knn_test::backend_name(info.param.backend);
}

// kNN, all-kNN with and without the point itself, radius rows and CSR rows of
// an AUTO index against the explicit structures of the same backend (bit for
// bit) and the oracle, at k around the thresholds.
TEST_P(AutoQuery, AnswersLikeEveryStructureAndTheOracleAtEveryK) {
  const int64_t n = GetParam().grid_n;
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, n, 3, 61);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 60, 3, 62);
  knn_test::IndexHandle automatic = knn_test::build_index(points, 3, options(KNN_STRUCTURE_AUTO));
  knn_test::IndexHandle grid = knn_test::build_index(points, 3, options(kGrid));
  knn_test::IndexHandle kd = knn_test::build_index(points, 3, options(kKdTree));
  ASSERT_TRUE(automatic && grid && kd);
  int structure = -1;
  ASSERT_EQ(knn_index_info(automatic.get(), nullptr, nullptr, nullptr, &structure), KNN_OK);
  EXPECT_EQ(structure, kGrid);  // the primary, whatever serves a call
  for (int k : {1, 8, 44, 45, 100, knn::kGpuGridMaxLeadingK, kKdTreeServedK, 2100}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    const knn_test::KnnResult want =
        knn_test::oracle_knn(points.data(), n, queries.data(), 60, 3, k);
    const knn_test::KnnResult got = knn_test::query_index(automatic.get(), queries, 3, k);
    EXPECT_TRUE(knn_test::same_knn(want, got));
    EXPECT_TRUE(knn_test::same_knn(knn_test::query_index(kd.get(), queries, 3, k), got));
    if (k <= knn::kGpuMaxListK) {  // the CUDA grid refuses longer lists
      EXPECT_TRUE(knn_test::same_knn(knn_test::query_index(grid.get(), queries, 3, k), got));
    }
  }
  // Split over device lists: shares of one device ({0, 0}), and where there
  // are two, copies of the structure that serves on the other device.
  if (GetParam().backend == kCuda) {
    std::vector<std::vector<int>> lists{{0, 0}};
    if (cuGetDeviceCount() >= 2) lists.push_back({1, 0}), lists.push_back({0, 1, 1});
    for (const std::vector<int>& list : lists) {
      knn_options split;
      knn_options_init_v2(&split);
      split.device_count = static_cast<int>(list.size());
      std::copy(list.begin(), list.end(), split.devices);
      for (int k : {8, 100, kKdTreeServedK, 2100}) {
        SCOPED_TRACE("split k=" + std::to_string(k) + " over " + std::to_string(list.size()));
        EXPECT_TRUE(
            knn_test::same_knn(knn_test::query_index(kd.get(), queries, 3, k),
                               knn_test::query_index(automatic.get(), queries, 3, k, &split)));
      }
    }
  }
  for (int k : {8, 44, 100, knn::kGpuGridMaxLeadingK, kKdTreeServedK}) {
    for (bool exclude : {false, true}) {
      SCOPED_TRACE("self k=" + std::to_string(k) + " exclude=" + std::to_string(exclude));
      EXPECT_TRUE(knn_test::same_knn(knn_test::query_self(kd.get(), n, k, exclude),
                                     knn_test::query_self(automatic.get(), n, k, exclude)));
    }
  }
  const float radius = 0.3f;
  for (int width : {0, 100, 2100}) {
    const knn_test::RadiusResult got =
        knn_test::radius_index(automatic.get(), queries, 3, radius, width);
    EXPECT_TRUE(knn_test::same_radius(
        knn_test::oracle_radius(points.data(), n, queries.data(), 60, 3, radius, width), got))
        << width;
  }
}

// The brute force AUTO keeps for small n on the GPU refuses lists beyond 2048
// entries; an AUTO index answers them through its kd-tree, rows and CSR rows.
TEST_P(AutoQuery, ListsBeyondTheBruteForceLimitAreAnswered) {
  const int64_t n = GetParam().brute_n;
  const std::vector<float> points = knn_test::make_rows(Dist::Clustered, n, 3, 71);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Clustered, 5, 3, 72);
  knn_test::IndexHandle automatic = knn_test::build_index(points, 3, options(KNN_STRUCTURE_AUTO));
  knn_test::IndexHandle kd = knn_test::build_index(points, 3, options(kKdTree));
  ASSERT_TRUE(automatic && kd);
  const int k = 2100;
  EXPECT_TRUE(knn_test::same_knn(knn_test::oracle_knn(points.data(), n, queries.data(), 5, 3, k),
                                 knn_test::query_index(automatic.get(), queries, 3, k)));
  EXPECT_TRUE(knn_test::same_knn(knn_test::query_self(kd.get(), n, k, true),
                                 knn_test::query_self(automatic.get(), n, k, true)));
  // Every point within the radius: rows of n, then CSR rows of n each.
  const float everything = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(knn_test::same_radius(
      knn_test::oracle_radius(points.data(), n, queries.data(), 5, 3, everything, k),
      knn_test::radius_index(automatic.get(), queries, 3, everything, k)));
  std::vector<int64_t> counts(5, -1), offsets(6, -1);
  ASSERT_EQ(knn_index_radius_count(automatic.get(), queries.data(), 5, everything, counts.data(),
                                   nullptr),
            KNN_OK)
      << knn_last_error();
  ASSERT_EQ(knn_offsets_from_counts(counts.data(), 5, offsets.data()), KNN_OK);
  std::vector<int32_t> got(static_cast<size_t>(offsets[5]), -7), want(got.size(), -7);
  std::vector<float> got_d(got.size()), want_d(got.size());
  ASSERT_EQ(knn_index_radius_fill(automatic.get(), queries.data(), 5, everything, offsets.data(),
                                  got.data(), got_d.data(), nullptr),
            KNN_OK)
      << knn_last_error();
  ASSERT_EQ(knn_index_radius_fill(kd.get(), queries.data(), 5, everything, offsets.data(),
                                  want.data(), want_d.data(), nullptr),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(got, want);
  EXPECT_TRUE(knn_test::same_bits(want_d, got_d));
}

// The _f64 family: AUTO against the explicit float64 brute force, bit for bit.
TEST_P(AutoQuery, Float64AnswersLikeTheBruteForceAtEveryK) {
  const int64_t n = GetParam().grid_n;
  const std::vector<double> points =
      in_precision<double>(knn_test::make_rows(Dist::Uniform, n, 3, 81));
  const std::vector<double> queries =
      in_precision<double>(knn_test::make_query_rows(Dist::Uniform, 40, 3, 82));
  knn_index* automatic = nullptr;
  knn_index* brute = nullptr;
  knn_options a = options(KNN_STRUCTURE_AUTO), b = options(kBrute);
  ASSERT_EQ(knn_index_build_f64(points.data(), n, 3, &a, &automatic), KNN_OK) << knn_last_error();
  ASSERT_EQ(knn_index_build_f64(points.data(), n, 3, &b, &brute), KNN_OK) << knn_last_error();
  for (int k : {8, 64, 100, kKdTreeServedK}) {
    std::vector<int32_t> gi(static_cast<size_t>(40) * k), wi(gi.size());
    std::vector<double> gd(gi.size()), wd(gi.size());
    ASSERT_EQ(knn_index_query_f64(automatic, queries.data(), 40, k, gi.data(), gd.data(), nullptr),
              KNN_OK)
        << knn_last_error();
    ASSERT_EQ(knn_index_query_f64(brute, queries.data(), 40, k, wi.data(), wd.data(), nullptr),
              KNN_OK)
        << knn_last_error();
    EXPECT_EQ(gi, wi) << k;
    EXPECT_TRUE(knn_test::same_bits(wd, gd)) << k;
    std::vector<int32_t> si(static_cast<size_t>(n) * k), ti(si.size());
    ASSERT_EQ(knn_index_query_self_f64(automatic, k, 1, si.data(), nullptr), KNN_OK);
    ASSERT_EQ(knn_index_query_self_f64(brute, k, 1, ti.data(), nullptr), KNN_OK);
    EXPECT_EQ(si, ti) << k;
  }
  EXPECT_EQ(knn_index_free(automatic), KNN_OK);
  EXPECT_EQ(knn_index_free(brute), KNN_OK);
}

// Several threads query one AUTO index at long lists at once (on the GPU the
// first ones build its kd-tree while the others wait): every answer is the
// explicit kd-tree's, and a saved AUTO index loads as one.
TEST_P(AutoQuery, ConcurrentLongListQueriesAndALoadedIndexAnswerAlike) {
  const int64_t n = GetParam().grid_n;
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, n, 3, 91);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 200, 3, 92);
  knn_test::IndexHandle automatic = knn_test::build_index(points, 3, options(KNN_STRUCTURE_AUTO));
  knn_test::IndexHandle kd = knn_test::build_index(points, 3, options(kKdTree));
  ASSERT_TRUE(automatic && kd);
  const int k = kKdTreeServedK;
  const knn_test::KnnResult want = knn_test::query_index(kd.get(), queries, 3, k);
  constexpr int kThreads = 6;
  std::vector<knn_test::KnnResult> got(kThreads);
  std::vector<int> status(kThreads, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      knn_test::KnnResult& r = got[t];
      r.m = 200, r.k = k;
      r.idx.assign(200 * k, -7), r.dist.assign(200 * k, -7.0f);
      knn_options one;
      knn_options_init(&one);
      one.threads = 1;
      status[t] = knn_index_query(automatic.get(), queries.data(), 200, k, r.idx.data(),
                                  r.dist.data(), &one);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(status[t], KNN_OK) << t;
    EXPECT_TRUE(knn_test::same_knn(want, got[t])) << t;
  }
  // Saved with its primary only, loaded (asking for AUTO) and queried again.
  const std::vector<unsigned char> saved = knn_test::serialize(automatic.get());
  knn_index* loaded = nullptr;
  knn_options load = options(KNN_STRUCTURE_AUTO);
  ASSERT_EQ(knn_index_deserialize(saved.data(), saved.size(), &load, &loaded), KNN_OK)
      << knn_last_error();
  int structure = -1;
  EXPECT_EQ(knn_index_info(loaded, nullptr, nullptr, nullptr, &structure), KNN_OK);
  EXPECT_EQ(structure, kGrid);
  EXPECT_TRUE(knn_test::same_knn(want, knn_test::query_index(loaded, queries, 3, k)));
  EXPECT_EQ(knn_test::serialize(loaded), saved);
  EXPECT_EQ(knn_index_free(loaded), KNN_OK);
}

// A kd-tree build that runs out of device memory (KNN_FAULT_DEVICE_ALLOC,
// cuda/core/fault_injection.cpp: the call's first device allocation is the
// device copy of the points the kd-tree is built from, the second the
// kd-tree's own storage) leaves a grid's call to the grid, with no error, and
// the next call builds the kd-tree; where the primary cannot serve (a brute
// force at k > 2048) the call fails with that status and missing values.
TEST(AutoQueryGpu, ADeviceOutOfMemoryInTheKdTreeBuildFallsBackToThePrimary) {
  if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  knn_options o;
  knn_options_init(&o);
  o.backend = kCuda;
  struct FaultCase {
    int64_t n;
    const char* allocation;  // KNN_FAULT_DEVICE_ALLOC
  };
  for (const FaultCase& c :
       {FaultCase{20000, "1#grid, points copy"}, FaultCase{20000, "2#grid, kd-tree storage"},
        FaultCase{5000, "1#brute, points copy"}}) {
    const int64_t n = c.n;
    const bool grid = n > 16384;  // else AUTO's brute force on the GPU
    const int k = grid ? kKdTreeServedK : 2100;
    SCOPED_TRACE(std::string(grid ? "grid primary, k = 128: " : "brute-force primary, k = 2100: ") +
                 c.allocation);
    const std::vector<float> points = knn_test::make_rows(Dist::Uniform, n, 3, 101);
    const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 30, 3, 102);
    const knn_test::KnnResult want =
        knn_test::oracle_knn(points.data(), n, queries.data(), 30, 3, k);
    knn_test::IndexHandle automatic = knn_test::build_index(points, 3, o);
    ASSERT_TRUE(automatic);
    std::vector<int32_t> idx(static_cast<size_t>(30) * k, -7);
    std::vector<float> sq(idx.size(), -7.0f);
    {
      const knn_test::ScopedEnv fault("KNN_FAULT_DEVICE_ALLOC", c.allocation);
      const int status =
          knn_index_query(automatic.get(), queries.data(), 30, k, idx.data(), sq.data(), nullptr);
      if (grid) {
        EXPECT_EQ(status, KNN_OK) << knn_last_error();
        EXPECT_STREQ(knn_last_error(), "");
        EXPECT_EQ(std::vector<int>(idx.begin(), idx.end()), want.idx);
        EXPECT_TRUE(knn_test::same_bits(want.dist, sq));
      } else {
        EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY) << knn_last_error();
        EXPECT_EQ(idx, std::vector<int32_t>(idx.size(), -1));
        EXPECT_EQ(sq, std::vector<float>(sq.size(), std::numeric_limits<float>::infinity()));
      }
    }
    EXPECT_TRUE(knn_test::same_knn(want, knn_test::query_index(automatic.get(), queries, 3, k)));
  }
}

// An index that KNN_BACKEND_AUTO put on the GPU answers every call that its
// device has no memory for (KNN_DEVICE_MEMORY_LIMIT below one query) on the
// CPU, exactly, with no error (src/index_api.cpp, CpuFallback): kNN at a
// short list (the grid's) and a long one (the kd-tree AUTO adds, whose build
// does not fit either), all-kNN, radius rows and CSR radius rows. An index
// built for KNN_BACKEND_CUDA still fails with DEVICE_OUT_OF_MEMORY and the
// missing values, and once memory is back both answer on the device.
TEST(AutoQueryGpu, ACallTheDeviceHasNoMemoryForIsAnsweredOnTheCpu) {
  if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 20000, m = 300;
  const float radius = 0.1f;
  const int max_neighbors = 64;
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, n, 3, 131);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, m, 3, 132);
  knn_options o;
  knn_options_init(&o);
  knn_test::IndexHandle automatic = knn_test::build_index(points, 3, o);
  o.backend = kCuda;
  knn_test::IndexHandle on_device = knn_test::build_index(points, 3, o);
  ASSERT_TRUE(automatic && on_device);
  int backend = -1;
  ASSERT_EQ(knn_index_info(automatic.get(), nullptr, nullptr, &backend, nullptr), KNN_OK);
  ASSERT_EQ(backend, kCuda) << "AUTO must put this index on the GPU";
  const knn_test::RadiusResult within =
      knn_test::oracle_radius(points.data(), n, queries.data(), m, 3, radius, max_neighbors);
  ASSERT_LT(*std::max_element(within.counts.begin(), within.counts.end()), max_neighbors);
  for (const bool memory_back : {false, true}) {
    SCOPED_TRACE(memory_back ? "memory back" : "no device memory for one query");
    const knn_test::ScopedEnv limit("KNN_DEVICE_MEMORY_LIMIT", memory_back ? "0" : "4096");
    for (const int k : {8, 100, kKdTreeServedK})
      EXPECT_TRUE(
          knn_test::same_knn(knn_test::oracle_knn(points.data(), n, queries.data(), m, 3, k),
                             knn_test::query_index(automatic.get(), queries, 3, k)))
          << "k = " << k;
    EXPECT_TRUE(knn_test::same_knn(knn_test::oracle_self(points.data(), n, 3, 8, true),
                                   knn_test::query_self(automatic.get(), n, 8, true)));
    EXPECT_TRUE(knn_test::same_radius(
        within, knn_test::radius_index(automatic.get(), queries, 3, radius, max_neighbors)));
    EXPECT_TRUE(knn_test::same_as_oracle(
        within, knn_test::radius_csr(automatic.get(), queries, 3, radius), true));
    std::vector<int32_t> idx(static_cast<size_t>(m) * 8, -7);
    std::vector<float> sq(idx.size(), -7.0f);
    const int status =
        knn_index_query(on_device.get(), queries.data(), m, 8, idx.data(), sq.data(), nullptr);
    if (memory_back) {
      EXPECT_EQ(status, KNN_OK) << knn_last_error();
      continue;
    }
    EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY) << knn_last_error();
    EXPECT_EQ(idx, std::vector<int32_t>(idx.size(), -1));
    EXPECT_EQ(sq, std::vector<float>(sq.size(), std::numeric_limits<float>::infinity()));
  }
}

// A CSR fill whose device attempt at one staging run fails for memory
// (KNN_FAULT_DEVICE_ALLOC walks the call's device allocations) and which the
// CPU then answers: the rows equal the device's, and the progress stage
// begins again from the rows done before that run (sequence + 1), so that a
// reader polling it never sees more rows done than the call has; without
// the restart the run's rows were counted by the attempt and again by the
// CPU.
TEST(AutoQueryGpu, AFallbackRunBeginsItsProgressStageAgain) {
  if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 20000, m = 20000;
  const float radius = 0.4f;  // about 670 points a query inside [-1, 1)^3: several staging runs
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, n, 3, 141);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, m, 3, 142);
  knn_options o;
  knn_options_init(&o);
  knn_test::IndexHandle automatic = knn_test::build_index(points, 3, o);
  ASSERT_TRUE(automatic);
  const knn_test::Csr want = knn_test::radius_csr(automatic.get(), queries, 3, radius);
  // Staging runs hold 2^22 slots of the run's widest row (src/index_api.cpp).
  ASSERT_GT(*std::max_element(want.counts.begin(), want.counts.end()) * m, int64_t{1} << 23)
      << "the fill must take several staging runs";
  knn_progress record{};
  ASSERT_EQ(knn_set_progress(&record), KNN_OK);
  int fallbacks = 0;
  for (int fault = 1; fault <= 16; ++fault) {
    SCOPED_TRACE("device allocation " + std::to_string(fault) + " fails");
    std::vector<int32_t> idx(want.idx.size(), -7);
    std::vector<float> dist(want.dist.size(), -7.0f);
    std::atomic<bool> stop{false}, overshoot{false};
    std::thread reader([&] {
      while (!stop.load()) {
        const int32_t stage = __atomic_load_n(&record.stage, __ATOMIC_ACQUIRE);
        const int64_t total = __atomic_load_n(&record.total, __ATOMIC_ACQUIRE);
        const int64_t done = __atomic_load_n(&record.done, __ATOMIC_ACQUIRE);
        if (stage == KNN_PROGRESS_QUERY && done > total) overshoot = true;
      }
    });
    const int32_t sequence = record.sequence;
    int status = KNN_OK;
    {
      const knn_test::ScopedEnv env("KNN_FAULT_DEVICE_ALLOC",
                                    (std::to_string(fault) + "#fill").c_str());
      status = knn_index_radius_fill(automatic.get(), queries.data(), m, radius,
                                     want.offsets.data(), idx.data(), dist.data(), nullptr);
    }
    stop = true;
    reader.join();
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    EXPECT_EQ(idx, want.idx);
    EXPECT_EQ(dist, want.dist);
    EXPECT_FALSE(overshoot.load()) << "a reader saw more rows done than the call has";
    EXPECT_EQ(record.done, m);
    EXPECT_EQ(record.total, m);
    fallbacks += record.sequence - sequence - 1;
  }
  ASSERT_EQ(knn_set_progress(nullptr), KNN_OK);
  EXPECT_GT(fallbacks, 0) << "no staging run fell back to the CPU";
}

#if defined(KNN_TEST_WITH_CUDA)
// Every CUDA engine writes its points in input order into device memory
// (what the kd-tree an AUTO index adds is built from) and into host memory,
// both bit for bit the rows it was built from, float and double, from host
// and from device points.
template <typename Scalar>
void expect_engines_copy_their_input_rows() {
  constexpr int64_t n = 20000;
  for (const int dim : {3, 5}) {
    const std::vector<Scalar> points =
        in_precision<Scalar>(knn_test::make_rows(Dist::Uniform, n, dim, 111));
    const knn_test::DeviceArray<Scalar> device_points(points);
    for (const bool from_device : {false, true}) {
      knn::IndexParams params;
      params.points_on_device = from_device;
      const Scalar* source = from_device ? device_points.get() : points.data();
      std::vector<std::unique_ptr<knn::BasicIndexEngine<Scalar>>> engines;
      engines.push_back(knn::cuda::build_kdtree_index(source, n, dim, params));
      engines.push_back(knn::cuda::build_brute_force_index(source, n, dim, params));
      if (dim == 3) engines.push_back(knn::cuda::build_grid_index(source, n, params));
      for (const auto& engine : engines) {
        ASSERT_TRUE(engine);
        SCOPED_TRACE("structure " + std::to_string(engine->structure()) + ", dim " +
                     std::to_string(dim) + (from_device ? ", device points" : ", host points"));
        const knn_test::DeviceArray<Scalar> rows(points.size());
        engine->copy_points_to_device(rows.get());
        const std::vector<Scalar> on_device = rows.to_host(points.size());
        EXPECT_EQ(std::memcmp(on_device.data(), points.data(), points.size() * sizeof(Scalar)), 0);
        std::vector<Scalar> on_host(points.size(), Scalar(-7));
        engine->copy_points(on_host.data());
        EXPECT_EQ(std::memcmp(on_host.data(), points.data(), points.size() * sizeof(Scalar)), 0);
      }
    }
  }
}

TEST(AutoQueryGpu, EveryEngineCopiesItsPointsToTheDeviceInInputOrder) {
  SKIP_WITHOUT_DEVICE();
  expect_engines_copy_their_input_rows<float>();
  expect_engines_copy_their_input_rows<double>();
}

// The API's build and query of either scalar type (knn_index_build or
// knn_index_build_f64 and their queries).
int build_any(const float* points, int64_t n, const knn_options* o, knn_index** out) {
  return knn_index_build(points, n, 3, o, out);
}
int build_any(const double* points, int64_t n, const knn_options* o, knn_index** out) {
  return knn_index_build_f64(points, n, 3, o, out);
}
int query_any(knn_index* index, const float* queries, int64_t m, int k, int32_t* indices,
              float* sq_distances) {
  return knn_index_query(index, queries, m, k, indices, sq_distances, nullptr);
}
int query_any(knn_index* index, const double* queries, int64_t m, int k, int32_t* indices,
              double* sq_distances) {
  return knn_index_query_f64(index, queries, m, k, indices, sq_distances, nullptr);
}

// n points and m queries of `dist` in Scalar (3-D; the queries from seed + 1),
// on the host and copied to the device.
template <typename Scalar>
struct HostAndDeviceRows {
  HostAndDeviceRows(Dist dist, int64_t n, int64_t m, uint64_t seed)
      : points(in_precision<Scalar>(knn_test::make_rows(dist, n, 3, seed))),
        queries(in_precision<Scalar>(knn_test::make_query_rows(dist, m, 3, seed + 1))),
        device_points(points),
        device_queries(queries) {}
  const std::vector<Scalar> points, queries;
  const knn_test::DeviceArray<Scalar> device_points, device_queries;
};

// The kd-tree an AUTO grid index adds, built from the grid's device copy of
// the points: its first call on device arrays, then host arrays, answer bit
// for bit like an explicit kd-tree (and, in float32, the oracle), at k = 128
// (the kd-tree serves, the grid could) and 2100 (beyond the grid's lists),
// for an index built from host and from device points.
template <typename Scalar>
void expect_lazy_kdtree_from_device_points_answers_like_an_explicit_one() {
  constexpr int64_t n = 20000, m = 40;
  const HostAndDeviceRows<Scalar> rows(Dist::Uniform, n, m, 121);
  knn_options o;
  knn_options_init(&o);
  o.backend = kCuda;
  o.structure = kKdTree;
  knn_index* explicit_kd = nullptr;
  ASSERT_EQ(build_any(rows.points.data(), n, &o, &explicit_kd), KNN_OK) << knn_last_error();
  knn_test::IndexHandle kd(explicit_kd);
  o.structure = KNN_STRUCTURE_AUTO;
  for (const bool from_device : {false, true}) {
    knn_index* raw = nullptr;
    ASSERT_EQ(build_any(from_device ? rows.device_points.get() : rows.points.data(), n, &o, &raw),
              KNN_OK)
        << knn_last_error();
    knn_test::IndexHandle automatic(raw);
    int structure = -1;
    ASSERT_EQ(knn_index_info(automatic.get(), nullptr, nullptr, nullptr, &structure), KNN_OK);
    EXPECT_EQ(structure, kGrid);
    for (const int k : {kKdTreeServedK, 2100}) {
      SCOPED_TRACE("k=" + std::to_string(k) + (from_device ? ", device points" : ", host points"));
      const size_t slots = static_cast<size_t>(m) * k;
      std::vector<int32_t> want_i(slots, -7), host_i(slots, -7);
      std::vector<Scalar> want_d(slots, Scalar(-7)), host_d(slots, Scalar(-7));
      ASSERT_EQ(query_any(kd.get(), rows.queries.data(), m, k, want_i.data(), want_d.data()),
                KNN_OK)
          << knn_last_error();
      const knn_test::DeviceArray<int32_t> device_i(slots);
      const knn_test::DeviceArray<Scalar> device_d(slots);
      ASSERT_EQ(query_any(automatic.get(), rows.device_queries.get(), m, k, device_i.get(),
                          device_d.get()),
                KNN_OK)
          << knn_last_error();
      ASSERT_EQ(query_any(automatic.get(), rows.queries.data(), m, k, host_i.data(), host_d.data()),
                KNN_OK)
          << knn_last_error();
      EXPECT_EQ(device_i.to_host(slots), want_i);
      EXPECT_TRUE(knn_test::same_bits(want_d, device_d.to_host(slots)));
      EXPECT_EQ(host_i, want_i);
      EXPECT_TRUE(knn_test::same_bits(want_d, host_d));
      if constexpr (std::is_same_v<Scalar, float>) {
        const knn_test::KnnResult oracle =
            knn_test::oracle_knn(rows.points.data(), n, rows.queries.data(), m, 3, k);
        EXPECT_EQ(std::vector<int>(host_i.begin(), host_i.end()), oracle.idx);
        EXPECT_TRUE(knn_test::same_bits(oracle.dist, host_d));
      }
    }
  }
}

// The CPU fallback of an AUTO-placed index (above) on device arrays: points,
// queries and outputs in device memory, float32 and float64; the rows it
// writes through host buffers are bit for bit an OpenMP index's.
template <typename Scalar>
void expect_the_cpu_fallback_to_answer_on_device_arrays() {
  constexpr int64_t n = 20000, m = 40;
  constexpr int k = 12;
  const HostAndDeviceRows<Scalar> rows(Dist::Clustered, n, m, 141);
  knn_options o;
  knn_options_init(&o);
  o.backend = kCpu;
  knn_index* raw = nullptr;
  ASSERT_EQ(build_any(rows.points.data(), n, &o, &raw), KNN_OK) << knn_last_error();
  const knn_test::IndexHandle on_cpu(raw);
  o.backend = KNN_BACKEND_AUTO;
  ASSERT_EQ(build_any(rows.device_points.get(), n, &o, &raw), KNN_OK) << knn_last_error();
  const knn_test::IndexHandle automatic(raw);
  int backend = -1;
  ASSERT_EQ(knn_index_info(automatic.get(), nullptr, nullptr, &backend, nullptr), KNN_OK);
  ASSERT_EQ(backend, kCuda) << "AUTO must put this index on the GPU";
  const size_t slots = static_cast<size_t>(m) * k;
  std::vector<int32_t> want_i(slots, -7);
  std::vector<Scalar> want_d(slots, Scalar(-7));
  ASSERT_EQ(query_any(on_cpu.get(), rows.queries.data(), m, k, want_i.data(), want_d.data()),
            KNN_OK)
      << knn_last_error();
  const knn_test::ScopedEnv limit("KNN_DEVICE_MEMORY_LIMIT", "4096");
  const knn_test::DeviceArray<int32_t> device_i(slots);
  const knn_test::DeviceArray<Scalar> device_d(slots);
  ASSERT_EQ(
      query_any(automatic.get(), rows.device_queries.get(), m, k, device_i.get(), device_d.get()),
      KNN_OK)
      << knn_last_error();
  EXPECT_EQ(device_i.to_host(slots), want_i);
  EXPECT_TRUE(knn_test::same_bits(want_d, device_d.to_host(slots)));
}

TEST(AutoQueryGpu, TheCpuFallbackAnswersOnDeviceArraysInBothPrecisions) {
  SKIP_WITHOUT_DEVICE();
  expect_the_cpu_fallback_to_answer_on_device_arrays<float>();
  expect_the_cpu_fallback_to_answer_on_device_arrays<double>();
}

TEST(AutoQueryGpu, TheLazyKdTreeBuiltFromDevicePointsAnswersOnDeviceAndHostArrays) {
  SKIP_WITHOUT_DEVICE();
  expect_lazy_kdtree_from_device_points_answers_like_an_explicit_one<float>();
  expect_lazy_kdtree_from_device_points_answers_like_an_explicit_one<double>();
}
#endif

// CPU: AUTO's brute force up to 2048 points (the rows are capped by n there);
// GPU: up to 16384, so 5000 points make its lists of 2100 refused by the
// brute force itself.
INSTANTIATE_TEST_SUITE_P(Backends, AutoQuery,
                         ::testing::Values(ApiCase{kCpu, 3000, 1500}, ApiCase{kCuda, 20000, 5000}),
                         case_name);

}  // namespace
