// The float64 CUDA index engines (issue #22): the bucket kd-tree, the uniform
// grid and the brute force over double (cuda/cuda_index.h, the same templates
// as the float32 engines), against an independent float64 brute force written
// here: plain loops in the contract's order (((d0*d0 + d1*d1) + d2*d2) + ...,
// each operation rounded to double; this file is compiled with
// -ffp-contract=off), rows sorted by (distance, index). Bit for bit, on
// awkward data: n = 0, 1, k > n, odd sizes, duplicates, all points equal,
// planes, lines, clusters, clouds at a UTM offset (4.5*10^6 m, millimetre
// spacing, where float32 cannot tell the points apart), huge and tiny
// (subnormal squares) coordinates; dims 1, 2, 3, 5, 8, 17; kNN, all-kNN with
// and without the own point, radius rows and counting; host and device
// arrays; a device budget small enough to force many query chunks.
//
// The bounds the searches prune with are checked on the host too (no device
// needed): the grid's cell bounds and the kd-tree's box distance in double
// never exceed the distance of a point they bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../common/grid_layout.h"
#include "../../cuda/core/query_chunks_memory.h"
#include "../../cuda/cuda_index.h"
#include "../../cuda/index_memory_model.h"
#include "../../cuda/kdtree/bucket_tree_shape.h"
#include "../../cuda/kdtree/index_kdtree_memory.h"
#include "engine_calls.h"
#include "gpu_test_support.h"
#include "knn_gpgpu.h"

namespace knn_test {
namespace {

using Engine64 = std::unique_ptr<knn::IndexEngine64>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Data ---------------------------------------------------------------------------

// splitmix64: the same stream on every platform (std distributions are not).
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  int64_t below(int64_t bound) { return static_cast<int64_t>(next() % uint64_t(bound)); }
};

enum class Shape { Uniform, Duplicates, AllEqual, Plane, Line, Clusters, Utm, Huge, Tiny };

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::Uniform: return "uniform";
    case Shape::Duplicates: return "duplicates";
    case Shape::AllEqual: return "all_equal";
    case Shape::Plane: return "plane";
    case Shape::Line: return "line";
    case Shape::Clusters: return "clusters";
    case Shape::Utm: return "utm";
    case Shape::Huge: return "huge";
    case Shape::Tiny: return "tiny";
  }
  return "?";
}

// n rows of dim doubles of the shape. Points and queries of one shape share
// the structure (the same seed family for centres and directions) and differ
// in their draws.
std::vector<double> make_rows(Shape shape, int64_t n, int dim, uint64_t seed) {
  Random structure{1000 + static_cast<uint64_t>(shape)};
  Random r{seed * 7919 + static_cast<uint64_t>(shape)};
  std::vector<double> rows(static_cast<size_t>(n) * dim);
  std::vector<double> base(dim), direction(dim);
  for (int d = 0; d < dim; ++d) base[d] = structure.unit(), direction[d] = structure.unit() - 0.5;
  std::vector<std::vector<double>> centres(6, std::vector<double>(dim));
  for (auto& c : centres)
    for (double& v : c) v = structure.unit() * 100.0;
  // Duplicates: 9 distinct points, drawn again and again.
  std::vector<std::vector<double>> distinct(9, std::vector<double>(dim));
  for (auto& p : distinct)
    for (double& v : p) v = std::floor(structure.unit() * 4.0);
  for (int64_t i = 0; i < n; ++i) {
    double* p = rows.data() + i * dim;
    switch (shape) {
      case Shape::Uniform:
        for (int d = 0; d < dim; ++d) p[d] = r.unit();
        break;
      case Shape::Duplicates: {
        const auto& src = distinct[static_cast<size_t>(r.below(9))];
        for (int d = 0; d < dim; ++d) p[d] = src[d];
        break;
      }
      case Shape::AllEqual:
        for (int d = 0; d < dim; ++d) p[d] = base[d];
        break;
      case Shape::Plane:  // the last coordinate fixed
        for (int d = 0; d < dim; ++d) p[d] = d == dim - 1 ? 0.25 : r.unit();
        break;
      case Shape::Line: {
        const double t = r.unit() * 10.0;
        for (int d = 0; d < dim; ++d) p[d] = base[d] + t * direction[d];
        break;
      }
      case Shape::Clusters: {
        const auto& c = centres[static_cast<size_t>(r.below(6))];
        for (int d = 0; d < dim; ++d) p[d] = c[d] + (r.unit() - 0.5) * 1e-3;
        break;
      }
      case Shape::Utm:  // a 1 m cube at (4.5e6, 5.5e6, 300) m, on a mm lattice with jitter
        for (int d = 0; d < dim; ++d) {
          const double offset = d == 0 ? 4.5e6 : (d == 1 ? 5.5e6 : 300.0);
          p[d] = offset + static_cast<double>(r.below(1000)) * 1e-3 + r.unit() * 1e-4;
        }
        break;
      case Shape::Huge:  // squared distances near 1e300, finite in any of the dims here
        for (int d = 0; d < dim; ++d) p[d] = (r.unit() - 0.5) * 1e150;
        break;
      case Shape::Tiny:  // squared differences subnormal
        for (int d = 0; d < dim; ++d) p[d] = r.unit() * 1e-160;
        break;
    }
  }
  return rows;
}

// Queries: fresh draws of the shape, then copies of a few indexed points
// (distance exactly 0, ties among duplicates).
std::vector<double> make_queries(Shape shape, const std::vector<double>& points, int64_t m, int dim,
                                 uint64_t seed) {
  std::vector<double> q = make_rows(shape, m, dim, seed);
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  for (int64_t i = 0; i < std::min<int64_t>(n, m / 4); ++i)
    std::copy_n(points.begin() + (i * 7 % n) * dim, dim, q.begin() + i * dim);
  return q;
}

// ---- The oracle: float64 brute force in the contract's order ------------------------

double distance(const double* q, const double* p, int dim) {
  double sum = (q[0] - p[0]) * (q[0] - p[0]);
  for (int d = 1; d < dim; ++d) sum = sum + (q[d] - p[d]) * (q[d] - p[d]);
  return sum;
}

// Rows of `width` slots (-1 / +inf where there is nothing), counts for radius.
struct Rows {
  int64_t m = 0;
  int width = 0;
  std::vector<int32_t> idx;
  std::vector<double> dist;
  std::vector<int32_t> counts;
};

Rows empty_rows(int64_t m, int width, double fill_dist, int32_t fill_idx) {
  Rows r;
  r.m = m;
  r.width = width;
  r.idx.assign(static_cast<size_t>(m) * width, fill_idx);
  r.dist.assign(static_cast<size_t>(m) * width, fill_dist);
  r.counts.assign(static_cast<size_t>(m), fill_idx);
  return r;
}

// Every point as (distance, index) from q, sorted.
std::vector<std::pair<double, int32_t>> ranked(const std::vector<double>& points, int dim,
                                               const double* q) {
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  std::vector<std::pair<double, int32_t>> all;
  for (int64_t j = 0; j < n; ++j)
    all.emplace_back(distance(q, points.data() + j * dim, dim), static_cast<int32_t>(j));
  std::sort(all.begin(), all.end());
  return all;
}

Rows oracle_knn(const std::vector<double>& points, const std::vector<double>& queries, int dim,
                int k) {
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  Rows r = empty_rows(m, k, kInf, -1);
  for (int64_t i = 0; i < m; ++i) {
    const auto all = ranked(points, dim, queries.data() + i * dim);
    for (int j = 0; j < k && j < static_cast<int>(all.size()); ++j) {
      r.dist[i * k + j] = all[j].first;
      r.idx[i * k + j] = all[j].second;
    }
  }
  return r;
}

// All-kNN; with exclude_self, k + 1 are taken and the point's own index is
// dropped where it appears, else the (k+1)-th.
Rows oracle_self(const std::vector<double>& points, int dim, int k, bool exclude_self) {
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  Rows r = empty_rows(n, k, kInf, -1);
  for (int64_t i = 0; i < n; ++i) {
    auto all = ranked(points, dim, points.data() + i * dim);
    const int take = exclude_self ? k + 1 : k;
    if (static_cast<int>(all.size()) > take) all.resize(static_cast<size_t>(take));
    if (exclude_self) {
      auto own = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e.second == i; });
      if (own != all.end())
        all.erase(own);
      else if (static_cast<int>(all.size()) == take)
        all.pop_back();
    }
    for (int j = 0; j < k && j < static_cast<int>(all.size()); ++j) {
      r.dist[i * k + j] = all[j].first;
      r.idx[i * k + j] = all[j].second;
    }
  }
  return r;
}

Rows oracle_radius(const std::vector<double>& points, const std::vector<double>& queries, int dim,
                   double radius, int max_neighbors) {
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  const double r2 = radius * radius;
  Rows r = empty_rows(m, max_neighbors, kInf, -1);
  for (int64_t i = 0; i < m; ++i) {
    const auto all = ranked(points, dim, queries.data() + i * dim);
    int32_t count = 0;
    for (const auto& e : all) {
      if (!(e.first <= r2)) continue;
      if (count < max_neighbors) {
        r.dist[i * max_neighbors + count] = e.first;
        r.idx[i * max_neighbors + count] = e.second;
      }
      ++count;
    }
    r.counts[static_cast<size_t>(i)] = count;
  }
  return r;
}

// The first k slots of every row (k <= rows.width): the rows of a kNN call
// with k, since rows are sorted.
Rows prefix(const Rows& rows, int k) {
  Rows r = empty_rows(rows.m, k, kInf, -1);
  for (int64_t i = 0; i < rows.m; ++i)
    for (int j = 0; j < k; ++j) {
      r.idx[i * k + j] = rows.idx[i * rows.width + j];
      r.dist[i * k + j] = rows.dist[i * rows.width + j];
    }
  return r;
}

// Bit for bit: indices equal and distances with the same bits.
::testing::AssertionResult same_rows(const Rows& want, const Rows& got, bool with_counts) {
  if (want.idx.size() != got.idx.size()) return ::testing::AssertionFailure() << "row sizes differ";
  for (size_t s = 0; s < want.idx.size(); ++s) {
    uint64_t a = 0, b = 0;
    std::memcpy(&a, &want.dist[s], 8);
    std::memcpy(&b, &got.dist[s], 8);
    if (want.idx[s] != got.idx[s] || a != b)
      return ::testing::AssertionFailure()
             << "row " << s / std::max(want.width, 1) << " slot " << s % std::max(want.width, 1)
             << ": want (" << want.idx[s] << ", " << want.dist[s] << "), got (" << got.idx[s]
             << ", " << got.dist[s] << ")";
  }
  if (with_counts)
    for (size_t i = 0; i < want.counts.size(); ++i)
      if (want.counts[i] != got.counts[i])
        return ::testing::AssertionFailure()
               << "query " << i << ": count want " << want.counts[i] << ", got " << got.counts[i];
  return ::testing::AssertionSuccess();
}

// ---- Engine calls (host arrays; outputs start at -7, which no engine writes) --------

Rows engine_knn(const knn::IndexEngine64& e, const std::vector<double>& queries, int k,
                const knn::CallParams& call = {}) {
  Rows r = empty_rows(static_cast<int64_t>(queries.size()) / e.dim(), k, -7.0, -7);
  e.knn(queries.empty() ? nullptr : queries.data(), r.m, k, r.idx.data(), r.dist.data(), call);
  return r;
}

Rows engine_self(const knn::IndexEngine64& e, int k, bool exclude_self,
                 const knn::CallParams& call = {}) {
  Rows r = empty_rows(e.size(), k, -7.0, -7);
  e.knn_self(k, exclude_self, r.idx.data(), r.dist.data(), call);
  return r;
}

Rows engine_radius(const knn::IndexEngine64& e, const std::vector<double>& queries, double radius,
                   int max_neighbors, const knn::CallParams& call = {}) {
  Rows r = empty_rows(static_cast<int64_t>(queries.size()) / e.dim(), max_neighbors, -7.0, -7);
  const bool rows = max_neighbors > 0;
  e.radius(queries.data(), r.m, radius, max_neighbors, rows ? r.idx.data() : nullptr,
           rows ? r.dist.data() : nullptr, r.counts.data(), call);
  return r;
}

enum class Structure { KdTree, Grid, BruteForce };

const char* structure_name(Structure s) {
  return s == Structure::KdTree ? "kdtree" : (s == Structure::Grid ? "grid" : "brute_force");
}

Engine64 build(Structure s, const std::vector<double>& points, int dim,
               knn::IndexParams params = {}) {
  const double* p = points.empty() ? nullptr : points.data();
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  switch (s) {
    case Structure::KdTree: return knn::cuda::build_kdtree_index(p, n, dim, params);
    case Structure::Grid: return knn::cuda::build_grid_index(p, n, params);
    case Structure::BruteForce: return knn::cuda::build_brute_force_index(p, n, dim, params);
  }
  return nullptr;
}

// A radius that holds a few points of the first query: the square root of
// its 6th distance (or 1 where there are not 6 finite ones).
double some_radius(const std::vector<double>& points, const std::vector<double>& queries, int dim) {
  if (points.empty() || queries.empty()) return 1.0;
  const auto all = ranked(points, dim, queries.data());
  const size_t j = std::min<size_t>(5, all.size() - 1);
  return std::isfinite(all[j].first) ? std::sqrt(all[j].first) : 1.0;
}

// Every call of one engine against the oracle: kNN at k through the list
// kinds (registers, shared lists, warp lists) and past n, all-kNN with and
// without the own point, radius rows (a cap smaller and larger than the
// counts) and counting only.
void check_every_call(Structure s, Shape shape, int64_t n, int dim, uint64_t seed) {
  SCOPED_TRACE(std::string(structure_name(s)) + " " + shape_name(shape) + " n=" +
               std::to_string(n) + " dim=" + std::to_string(dim) + " seed=" + std::to_string(seed));
  const std::vector<double> points = make_rows(shape, n, dim, seed);
  const std::vector<double> queries = make_queries(shape, points, 97, dim, seed + 1);
  const Engine64 e = build(s, points, dim);
  ASSERT_NE(e, nullptr) << "the grid refused the data";
  ASSERT_EQ(e->size(), n);
  ASSERT_EQ(e->dim(), dim);
  for (const int k : {1, 5, 8, 16, 17, 33, static_cast<int>(n) + 2}) {
    if (k < 1) continue;
    EXPECT_TRUE(same_rows(oracle_knn(points, queries, dim, k), engine_knn(*e, queries, k), false))
        << "knn k=" << k;
  }
  for (const bool exclude : {false, true})
    for (const int k : {1, 8, 30})
      EXPECT_TRUE(
          same_rows(oracle_self(points, dim, k, exclude), engine_self(*e, k, exclude), false))
          << "knn_self k=" << k << " exclude_self=" << exclude;
  const double radius = some_radius(points, queries, dim);
  for (const int cap : {0, 3, 40})
    EXPECT_TRUE(same_rows(oracle_radius(points, queries, dim, radius, cap),
                          engine_radius(*e, queries, radius, cap), true))
        << "radius=" << radius << " max_neighbors=" << cap;
  // The resident copy is the caller's points, bit for bit.
  std::vector<double> copy(points.size(), -7.0);
  if (n > 0) e->copy_points(copy.data());
  EXPECT_TRUE(std::memcmp(copy.data(), points.data(), points.size() * sizeof(double)) == 0);
}

const Shape kShapes[] = {Shape::Uniform, Shape::Duplicates, Shape::AllEqual,
                         Shape::Plane,   Shape::Line,       Shape::Clusters,
                         Shape::Utm,     Shape::Huge,       Shape::Tiny};

// ---- Host: the double bounds never exceed a distance they bound ---------------------

TEST(Float64Bounds, GridCellBoundsAreLowerBoundsAtAUtmOffset) {
  const int64_t n = 3000;
  for (const Shape shape : {Shape::Utm, Shape::Uniform, Shape::Clusters, Shape::Tiny}) {
    SCOPED_TRACE(shape_name(shape));
    const std::vector<double> points = make_rows(shape, n, 3, 5);
    const std::vector<double> queries = make_queries(shape, points, 200, 3, 6);
    double lo[3] = {kInf, kInf, kInf}, hi[3] = {-kInf, -kInf, -kInf};
    for (int64_t j = 0; j < n; ++j)
      for (int a = 0; a < 3; ++a)
        lo[a] = std::min(lo[a], points[j * 3 + a]), hi[a] = std::max(hi[a], points[j * 3 + a]);
    const knn::BasicGridLayout<double> g =
        knn::make_grid_layout(static_cast<const double*>(lo), static_cast<const double*>(hi), n,
                              knn::kGridDefaultPointsPerCell);
    ASSERT_GT(g.cell_count(), 1);
    for (int64_t i = 0; i < 200; ++i) {
      const double* q = queries.data() + i * 3;
      const int32_t qc[3] = {g.cell_on_axis(q[0], 0), g.cell_on_axis(q[1], 1),
                             g.cell_on_axis(q[2], 2)};
      for (int64_t j = 0; j < n; ++j) {
        const double* p = points.data() + j * 3;
        const double d = distance(q, p, 3);
        const double bound = g.cell_bound(q, qc, g.cell_on_axis(p[0], 0), g.cell_on_axis(p[1], 1),
                                          g.cell_on_axis(p[2], 2));
        ASSERT_LE(bound, d) << "query " << i << " point " << j;
        // Beyond the shell of Chebyshev radius r around the query's cell.
        int32_t r = 0;
        for (int a = 0; a < 3; ++a) r = std::max(r, std::abs(g.cell_on_axis(p[a], a) - qc[a]));
        if (r > 0) {
          ASSERT_LE(g.beyond_shell_bound(q, qc, r - 1), d) << "query " << i;
        }
      }
    }
  }
}

TEST(Float64Bounds, BoxDistanceIsALowerBoundInDouble) {
  for (const int dim : {1, 3, 5, 17}) {
    const std::vector<double> points = make_rows(Shape::Utm, 500, dim, 8);
    const std::vector<double> queries = make_rows(Shape::Utm, 100, dim, 9);
    std::vector<double> lo(dim, kInf), hi(dim, -kInf);
    for (int64_t j = 0; j < 500; ++j)
      for (int d = 0; d < dim; ++d)
        lo[d] = std::min(lo[d], points[j * dim + d]), hi[d] = std::max(hi[d], points[j * dim + d]);
    for (int64_t i = 0; i < 100; ++i) {
      const double bound = knn::box_distance(queries.data() + i * dim, lo.data(), hi.data(), dim);
      for (int64_t j = 0; j < 500; ++j)
        ASSERT_LE(bound, distance(queries.data() + i * dim, points.data() + j * dim, dim));
    }
    EXPECT_EQ(knn::box_distance(points.data(), lo.data(), hi.data(), dim), 0.0);
  }
}

// ---- Host: the memory models count 8-byte scalars -----------------------------------

TEST(Float64Memory, DoubleEstimatesCoverTheWiderData) {
  for (const int64_t n : {int64_t{100000}, int64_t{10000000}})
    for (const int dim : {3, 8}) {
      using knn::cuda::index_memory::build_bytes;
      using knn::cuda::index_memory::query_bytes;
      for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID,
                                  KNN_STRUCTURE_BRUTE_FORCE, KNN_STRUCTURE_AUTO}) {
        // The resident points alone: n * dim doubles.
        EXPECT_GE(build_bytes(structure, n, dim, 8), size_t(n) * dim * 8);
        EXPECT_GT(build_bytes(structure, n, dim, 8), build_bytes(structure, n, dim, 4));
        EXPECT_GT(query_bytes(structure, n, 30, n, dim, 8),
                  query_bytes(structure, n, 30, n, dim, 4));
      }
      EXPECT_GT(knn::cuda::kdtree_build_bytes(n, dim, 32, 8),
                knn::cuda::kdtree_build_bytes(n, dim, 32, 4));
    }
  knn::CallParams host_call;
  EXPECT_EQ(knn::cuda::pipeline_bytes_per_query(3, 8, true, true, false, host_call, 8),
            size_t{knn::cuda::kPipelineSlots} * (3 * 8 + 8 * (4 + 8)));
}

// ---- Device: every engine, every call, against the oracle ---------------------------

class Float64Engines : public ::testing::TestWithParam<std::tuple<Structure, int>> {};

TEST_P(Float64Engines, EveryShapeAndCallMatchesTheFloat64Oracle) {
  SKIP_WITHOUT_DEVICE();
  const Structure s = std::get<0>(GetParam());
  const int dim = std::get<1>(GetParam());
  for (const int64_t n : {0, 1, 2, 3}) check_every_call(s, Shape::Uniform, n, dim, 40 + n);
  for (const Shape shape : kShapes) check_every_call(s, shape, 517, dim, 50);
}

std::string engine_param_name(const ::testing::TestParamInfo<std::tuple<Structure, int>>& info) {
  return std::string(structure_name(std::get<0>(info.param))) + "_dim" +
         std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AnyDim, Float64Engines,
                         ::testing::Combine(::testing::Values(Structure::KdTree,
                                                              Structure::BruteForce),
                                            ::testing::Values(1, 2, 3, 5, 8, 17)),
                         engine_param_name);
INSTANTIATE_TEST_SUITE_P(Grid3D, Float64Engines,
                         ::testing::Combine(::testing::Values(Structure::Grid),
                                            ::testing::Values(3)),
                         engine_param_name);

// Larger indexes (deeper trees, many grid cells, brute-force splits), and
// the leaf sizes of the kd-tree.
TEST(Float64EnginesLarge, DeepStructuresMatchTheOracle) {
  SKIP_WITHOUT_DEVICE();
  for (const Shape shape : {Shape::Utm, Shape::Clusters, Shape::Uniform}) {
    const int dim = 3;
    const std::vector<double> points = make_rows(shape, 20011, dim, 60);
    const std::vector<double> queries = make_queries(shape, points, 300, dim, 61);
    const Rows want = oracle_knn(points, queries, dim, 100);
    for (const Structure s : {Structure::KdTree, Structure::Grid, Structure::BruteForce}) {
      SCOPED_TRACE(std::string(structure_name(s)) + " " + shape_name(shape));
      const Engine64 e = build(s, points, dim);
      if (s == Structure::Grid && e == nullptr) {
        EXPECT_EQ(shape, Shape::Clusters) << "only clustered data makes a poor grid";
        continue;
      }
      ASSERT_NE(e, nullptr);
      for (const int k : {8, 30, 100})
        EXPECT_TRUE(same_rows(prefix(want, k), engine_knn(*e, queries, k), false)) << "k=" << k;
    }
  }
  for (const int leaf : {1, 2, 7, 128}) {
    SCOPED_TRACE("leaf_size=" + std::to_string(leaf));
    const std::vector<double> points = make_rows(Shape::Utm, 3001, 5, 62);
    const std::vector<double> queries = make_queries(Shape::Utm, points, 200, 5, 63);
    knn::IndexParams params;
    params.leaf_size = leaf;
    const Engine64 e = build(Structure::KdTree, points, 5, params);
    EXPECT_TRUE(same_rows(oracle_knn(points, queries, 5, 8), engine_knn(*e, queries, 8), false));
    EXPECT_TRUE(same_rows(oracle_self(points, 5, 8, true), engine_self(*e, 8, true), false));
  }
}

// Float32 cannot separate points a millimetre apart at 4.5e6 (its spacing
// there is 0.5 m): the float64 engines must, and do what the oracle does.
TEST(Float64EnginesLarge, UtmOffsetCloudIsResolvedWhereFloat32IsNot) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<double> points = make_rows(Shape::Utm, 2000, 3, 70);
  int64_t float_collisions = 0;
  for (int64_t j = 1; j < 2000; ++j)
    float_collisions += static_cast<float>(points[j * 3]) == static_cast<float>(points[0]);
  ASSERT_GT(float_collisions, 100) << "the data must be beyond float32's resolution";
  const Rows want = oracle_self(points, 3, 8, true);
  for (const Structure s : {Structure::KdTree, Structure::Grid, Structure::BruteForce}) {
    SCOPED_TRACE(structure_name(s));
    const Engine64 e = build(s, points, 3);
    ASSERT_NE(e, nullptr);
    EXPECT_TRUE(same_rows(want, engine_self(*e, 8, true), false));
  }
}

#if defined(KNN_TEST_WITH_CUDA)
// A device budget for one call of m host queries (rows of `width`, 3-D,
// doubles) that leaves room for about 40 queries a chunk beyond the engine's
// fixed bytes: the engines' own formulas (index_kdtree_memory.h,
// grid_build.cu chunk_for, index_brute_force.cu run). The brute force's
// split plan is the model's (the device's busy threads never split more).
size_t small_budget(Structure s, int64_t n, int64_t m, int width, bool exclude_self,
                    bool want_counts) {
  using namespace knn::cuda;
  const knn::CallParams call;  // host arrays
  const size_t pipeline = pipeline_bytes_per_query(3, width, true, true, want_counts, call, 8);
  size_t fixed = 0, per_query = 0;
  switch (s) {
    case Structure::KdTree:
      fixed = kdtree_call_fixed_bytes(call);
      per_query = kdtree_call_bytes_per_query(3, width + (exclude_self ? 1 : 0), width,
                                              exclude_self, true, true, want_counts, call, 8);
      break;
    case Structure::Grid:  // 20 scratch bytes a query (kGridScratchBytesPerQuery)
      fixed = pipeline_fixed_bytes(call) +
              kPipelineSlots * (4 * kAllocAlignment + cub_temp_bytes(kMaxChunkQueries));
      per_query = pipeline + kPipelineSlots * 20;
      break;
    case Structure::BruteForce: {
      const int list_k = index_memory::brute_force_list_k(width, exclude_self, n);
      const int64_t splits =
          index_memory::brute_force_splits(std::min(m, kMaxChunkQueries), n, list_k);
      fixed = pipeline_fixed_bytes(call) +
              kPipelineSlots * index_memory::brute_force_scratch_fixed(splits);
      per_query = pipeline +
                  kPipelineSlots * index_memory::brute_force_scratch_per_query(splits, list_k, 8);
      break;
    }
  }
  return fixed + 40 * per_query;
}

// Device-resident points, queries and outputs, and a device budget that
// forces chunks of a few dozen queries (several pipeline turns on both slots).
TEST(Float64EnginesDevice, DeviceArraysAndSmallBudgetMatchTheOracle) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3, k = 8, cap = 5;
  const int64_t n = 4001, m = 1003;
  const std::vector<double> points = make_rows(Shape::Utm, n, dim, 80);
  const std::vector<double> queries = make_queries(Shape::Utm, points, m, dim, 81);
  const Rows want_knn = oracle_knn(points, queries, dim, k);
  const double radius = some_radius(points, queries, dim);
  const Rows want_radius = oracle_radius(points, queries, dim, radius, cap);
  const Rows want_self = oracle_self(points, dim, k, true);

  DeviceArray<double> d_points(points), d_queries(queries);
  for (const Structure s : {Structure::KdTree, Structure::Grid, Structure::BruteForce}) {
    SCOPED_TRACE(structure_name(s));
    knn::IndexParams params;
    params.points_on_device = true;
    const Engine64 e = [&] {
      switch (s) {
        case Structure::KdTree:
          return knn::cuda::build_kdtree_index(d_points.get(), n, dim, params);
        case Structure::Grid: return knn::cuda::build_grid_index(d_points.get(), n, params);
        default: return knn::cuda::build_brute_force_index(d_points.get(), n, dim, params);
      }
    }();
    ASSERT_NE(e, nullptr);

    // Device arrays in and out.
    knn::CallParams on_device;
    on_device.queries_on_device = on_device.outputs_on_device = true;
    DeviceArray<int32_t> d_idx(static_cast<size_t>(m) * k);
    DeviceArray<double> d_dist(static_cast<size_t>(m) * k);
    e->knn(d_queries.get(), m, k, d_idx.get(), d_dist.get(), on_device);
    Rows got = empty_rows(m, k, 0, 0);
    got.idx = d_idx.to_host(got.idx.size());
    got.dist = d_dist.to_host(got.dist.size());
    EXPECT_TRUE(same_rows(want_knn, got, false)) << "device knn";

    DeviceArray<int32_t> d_self_idx(static_cast<size_t>(n) * k);
    DeviceArray<double> d_self_dist(static_cast<size_t>(n) * k);
    e->knn_self(k, true, d_self_idx.get(), d_self_dist.get(), on_device);
    Rows got_self = empty_rows(n, k, 0, 0);
    got_self.idx = d_self_idx.to_host(got_self.idx.size());
    got_self.dist = d_self_dist.to_host(got_self.dist.size());
    EXPECT_TRUE(same_rows(want_self, got_self, false)) << "device knn_self";

    DeviceArray<int32_t> d_r_idx(static_cast<size_t>(m) * cap), d_counts(static_cast<size_t>(m));
    DeviceArray<double> d_r_dist(static_cast<size_t>(m) * cap);
    e->radius(d_queries.get(), m, radius, cap, d_r_idx.get(), d_r_dist.get(), d_counts.get(),
              on_device);
    Rows got_radius = empty_rows(m, cap, 0, 0);
    got_radius.idx = d_r_idx.to_host(got_radius.idx.size());
    got_radius.dist = d_r_dist.to_host(got_radius.dist.size());
    got_radius.counts = d_counts.to_host(got_radius.counts.size());
    EXPECT_TRUE(same_rows(want_radius, got_radius, true)) << "device radius";

    // Host arrays through budgets of a few dozen queries a chunk.
    knn::CallParams small;
    small.device_memory_limit = small_budget(s, n, m, k, false, false);
    EXPECT_TRUE(same_rows(want_knn, engine_knn(*e, queries, k, small), false)) << "chunked knn";
    small.device_memory_limit = small_budget(s, n, n, k, true, false);
    EXPECT_TRUE(same_rows(want_self, engine_self(*e, k, true, small), false)) << "chunked knn_self";
    small.device_memory_limit = small_budget(s, n, m, cap, false, true);
    EXPECT_TRUE(same_rows(want_radius, engine_radius(*e, queries, radius, cap, small), true))
        << "chunked radius";
  }
}

TEST(Float64EnginesDevice, FillMissingAndFirstBeyondOnDoubles) {
  SKIP_WITHOUT_DEVICE();
  std::vector<double> values(1000, 1.0);
  values[617] = 3.0e200;
  values[800] = std::numeric_limits<double>::quiet_NaN();
  DeviceArray<double> d_values(values);
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_values.get(), 1000, 1e200), 617);
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_values.get(), 617, 1e200), -1);
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_values.get(), 1000, 1e300), 800);
  // A value float32 would round to its limit is still beyond it in double.
  values.assign(10, 1.0);
  values[3] = std::nextafter(2.0, 3.0);
  DeviceArray<double> d_close(values);
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_close.get(), 10, 2.0), 3);

  DeviceArray<int32_t> d_idx(std::vector<int32_t>(100, 5));
  DeviceArray<double> d_dist(std::vector<double>(100, 5.0));
  knn::cuda::fill_missing_on_device(d_idx.get(), d_dist.get(), 60);
  const std::vector<int32_t> idx = d_idx.to_host(100);
  const std::vector<double> dist = d_dist.to_host(100);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(idx[i], i < 60 ? -1 : 5) << i;
    EXPECT_EQ(dist[i], i < 60 ? kInf : 5.0) << i;
  }
}
#endif

}  // namespace
}  // namespace knn_test
