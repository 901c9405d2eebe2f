// Host allocation failure at every allocation, in the manner of SQLite's OOM
// tests (tests/support/host_alloc_hook.h): for N = 1, 2, 3, ... until a call makes
// fewer than N allocations, the N-th host allocation of the call fails
// (transient), or the N-th and every later one (persistent). Every public
// CPU entry point, on small inputs, must then
//   - return KNN_OK with the oracle's answer, or KNN_ERR_HOST_OUT_OF_MEMORY
//     with a non-empty knn_last_error() that says so;
//   - leave its outputs untouched or fully written with the missing value
//     (a handle output NULL), as the header documents;
//   - leave no allocation behind (live allocations before == after; with a
//     device, after <= before: see walk);
//   - let the next call, injection off, give the oracle's answer.
// Also, with the same hook: k-lists never grow with k beyond the data, and
// building then freeing an index leaves no memory behind.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "align_test_support.h"
#include "classic_helpers.h"
#include "host_alloc_hook.h"
#include "index_oracle.h"
#include "index_test_helpers.h"
#include "knn_gpgpu.h"
#include "mesh_api_calls.h"
#include "mesh_oracle.h"
#include "oracle.h"
#include "parallel_malloc_hook.h"
#include "pip_api_calls.h"
#include "pip_oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

namespace hook = alloc_hook;

// No call on these inputs makes nearly this many allocations: reaching it
// means the walk does not end.
constexpr int64_t kMaxWalk = 5000;
// Threads of every call: several, so that failures also strike inside the
// parallel regions, whatever the machine.
constexpr int kThreads = 4;

constexpr int32_t kUntouched = 0x5a5a5a5a;
constexpr float kUntouchedF = -7.25f;
constexpr float kInf = std::numeric_limits<float>::infinity();

// All of `v` equal to `value`.
template <class T>
bool all_equal(const std::vector<T>& v, T value) {
  return std::all_of(v.begin(), v.end(),
                     [&](const T& x) { return std::memcmp(&x, &value, sizeof x) == 0; });
}

// One entry point on fixed inputs: prepare() makes fresh outputs (injection
// off), call() runs it (injection on), then either matches_oracle() (after
// KNN_OK) or failed_cleanly() (after a failure) judges the outputs, and
// release() frees what a successful call handed out (injection off).
struct Case {
  std::string name;
  std::function<void()> prepare;
  std::function<int()> call;
  std::function<::testing::AssertionResult()> matches_oracle;
  std::function<::testing::AssertionResult()> failed_cleanly;
  std::function<void()> release = [] {};
};

::testing::AssertionResult check(bool ok, const std::string& what) {
  return ok ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << what;
}

// The walk of one case in one mode.
void walk(const Case& c, hook::Mode mode) {
  const char* mode_name = mode == hook::Mode::Transient ? "transient" : "persistent";
  const bool device_caches = cuGetDeviceCount() > 0;
  SCOPED_TRACE(c.name + ", " + mode_name);
  // First, injection off: the answer, and any lazily made library state.
  c.prepare();
  ASSERT_EQ(c.call(), KNN_OK) << knn_last_error();
  ASSERT_TRUE(c.matches_oracle());
  c.release();
  int64_t failing_calls = 0;
  for (int64_t nth = 1;; ++nth) {
    ASSERT_LT(nth, kMaxWalk) << "the call keeps allocating";
    SCOPED_TRACE("allocation " + std::to_string(nth) + " fails");
    c.prepare();
    const int64_t live_before = hook::live_count();
    hook::arm(nth, mode);
    const int status = c.call();
    hook::disarm();
    const bool injected = hook::failed() > 0;
    if (status == KNN_OK) {
      ASSERT_TRUE(c.matches_oracle());
      c.release();
    } else {
      ++failing_calls;
      const std::string message = knn_last_error();
      ASSERT_EQ(status, KNN_ERR_HOST_OUT_OF_MEMORY) << knn_status_string(status) << ": " << message;
      ASSERT_TRUE(injected) << "failed without an injected failure: " << message;
      ASSERT_NE(message.find("host memory allocation failed"), std::string::npos) << message;
      ASSERT_TRUE(c.failed_cleanly());
    }
    // (The checks above free whatever they allocate.) With a device, calls
    // that run there keep blocks of device and pinned memory between calls,
    // each idle device block with its fence (host allocations): a failed
    // call may free cached blocks, and their fences with them, so the count
    // may fall but never rise.
    if (device_caches) {
      ASSERT_LE(hook::live_count(), live_before)
          << "allocations left behind (status " << status << ")";
    } else {
      ASSERT_EQ(hook::live_count(), live_before)
          << "allocations left behind (status " << status << ")";
    }
    // The next call, injection off, works.
    c.prepare();
    ASSERT_EQ(c.call(), KNN_OK) << "the call after the failure: " << knn_last_error();
    ASSERT_TRUE(c.matches_oracle()) << "the call after the failure";
    c.release();
    if (!injected) {  // the call made fewer than nth allocations
      std::printf("[ walk     ] %-50s %-10s %3lld allocation points, %3lld calls failed\n",
                  c.name.c_str(), mode_name, static_cast<long long>(nth - 1),
                  static_cast<long long>(failing_calls));
      break;
    }
  }
  // Every case allocates: a walk that never failed a call tested nothing.
  EXPECT_GT(failing_calls, 0);
}

// ---- The inputs and their answers --------------------------------------------------

class HostOom : public ::testing::Test {
 protected:
  static constexpr int kK = 6;
  static constexpr int kDim = 5;  // knn_brute_force and the index kd-tree / brute force

  static void SetUpTestSuite() { omp_set_num_threads(kThreads); }

  void SetUp() override {
    points_ = make_points(Dist::Uniform, 300, 11);
    queries_ = make_query_points(Dist::Uniform, 90, 12);
    tree_ = reference_tree(points_);
    classic_ = oracle_knn(points_, queries_, kK);
    rows_ = make_rows(Dist::Clustered, 250, kDim, 13);
    query_rows_ = make_query_rows(Dist::Clustered, 70, kDim, 14);
    grid_rows_ = make_rows(Dist::Uniform, 400, 3, 15);
    grid_queries_ = make_query_rows(Dist::Uniform, 80, 3, 16);
    knn_options_init(&opt_);
    opt_.backend = KNN_BACKEND_OPENMP;
    opt_.threads = kThreads;
    std::mt19937_64 rng(17);
    xy_ = uniform_points(rng, 500, -10.0f, 10.0f);
    polygons_.add_polygon(rectangle(-5, -5, 5, 5));
    polygons_.add_hole(rectangle(-1, -1, 1, 1));
    polygons_.add_polygon(star(rng, 3, 3, 2, 6, 12, false));
    polygons_.add_polygon(star(rng, -4, 2, 1, 5, 9, true));
    pip_ = oracle_points_in_polygons(xy_, polygons_);
  }

  Case classic_build(const char* name, BuildFn fn) {
    auto tree = std::make_shared<std::vector<Node>>();
    return {name, [=] { *tree = sentinel_tree(points_.size()); },
            [=] { return fn(points_.data(), static_cast<int>(points_.size()), tree->data()); },
            [=] { return same_tree_bytes(tree_, *tree); },
            [=] {
              const std::vector<Node> untouched = sentinel_tree(points_.size());
              const Node missing{{kInf, kInf, kInf}, -1, -1, -1};
              return check(
                  std::memcmp(tree->data(), untouched.data(), tree->size() * sizeof(Node)) == 0 ||
                      all_equal(*tree, missing),
                  "the tree is neither untouched nor all missing");
            }};
  }

  Case classic_query(const char* name, QueryFn fn) {
    auto result = std::make_shared<std::vector<int>>();
    return {name, [=] { result->assign(queries_.size() * kK, kSentinelInt); },
            [=] {
              return fn(queries_.data(), tree_.data(), static_cast<int>(queries_.size()),
                        static_cast<int>(tree_.size()), kK, result->data());
            },
            [=] { return same_rows(classic_.idx, *result, classic_.m, kK); },
            [=] {
              return check(all_equal(*result, kSentinelInt) || all_equal(*result, -1),
                           "the result is neither untouched nor all -1");
            }};
  }

  Case brute_force() {
    struct Out {
      std::vector<int> idx;
      std::vector<float> dist;
    };
    auto out = std::make_shared<Out>();
    const int64_t n = static_cast<int64_t>(rows_.size()) / kDim;
    const int64_t m = static_cast<int64_t>(query_rows_.size()) / kDim;
    auto want =
        std::make_shared<KnnResult>(oracle_knn(rows_.data(), n, query_rows_.data(), m, kDim, kK));
    return {
        "knn_brute_force",
        [=] {
          out->idx.assign(static_cast<size_t>(m) * kK, kSentinelInt);
          out->dist.assign(static_cast<size_t>(m) * kK, kUntouchedF);
        },
        [=] {
          return knn_brute_force(rows_.data(), static_cast<int>(n), query_rows_.data(),
                                 static_cast<int>(m), kDim, kK, out->dist.data(), out->idx.data());
        },
        [=] {
          const auto rows = same_rows(want->idx, out->idx, m, kK);
          return rows ? same_bits(want->dist, out->dist) : rows;
        },
        [=] {
          return check((all_equal(out->idx, kSentinelInt) && all_equal(out->dist, kUntouchedF)) ||
                           (all_equal(out->idx, -1) && all_equal(out->dist, kInf)),
                       "the outputs are neither untouched nor all missing");
        }};
  }

  // ---- The index API ----------------------------------------------------------------

  const std::vector<float>& points_of(int structure) const {
    return structure == KNN_STRUCTURE_GRID ? grid_rows_ : rows_;
  }
  const std::vector<float>& queries_of(int structure) const {
    return structure == KNN_STRUCTURE_GRID ? grid_queries_ : query_rows_;
  }
  static int dim_of(int structure) { return structure == KNN_STRUCTURE_GRID ? 3 : kDim; }
  knn_options options_of(int structure) const {
    knn_options o = opt_;
    o.structure = structure;
    o.leaf_size = structure == KNN_STRUCTURE_KDTREE ? 8 : 0;  // a tree of several levels
    return o;
  }

  Case index_build(int structure) {
    auto out = std::make_shared<knn_index*>(nullptr);
    const std::vector<float>& points = points_of(structure);
    const int dim = dim_of(structure);
    const int64_t n = static_cast<int64_t>(points.size()) / dim;
    const std::vector<float>& queries = queries_of(structure);
    auto want = std::make_shared<KnnResult>(oracle_knn(
        points.data(), n, queries.data(), static_cast<int64_t>(queries.size()) / dim, dim, kK));
    const knn_options o = options_of(structure);
    return {std::string("knn_index_build ") + structure_name(structure),
            [=] { *out = reinterpret_cast<knn_index*>(out.get()); },
            [=] { return knn_index_build(points.data(), n, dim, &o, out.get()); },
            [=] {
              int64_t size = -1;
              if (knn_index_info(*out, &size, nullptr, nullptr, nullptr) != KNN_OK || size != n)
                return check(false, "the index built is not live or has the wrong size");
              return same_knn(*want, query_index(*out, queries, dim, kK, &o));
            },
            [=] { return check(*out == nullptr, "*out is not NULL after a failure"); },
            [=] {
              EXPECT_EQ(knn_index_free(*out), KNN_OK);
              *out = nullptr;
            }};
  }

  // An index built once (injection off) that the query cases share.
  std::shared_ptr<knn_index> shared_index(int structure) {
    const std::vector<float>& points = points_of(structure);
    const int dim = dim_of(structure);
    knn_index* index = nullptr;
    const knn_options o = options_of(structure);
    EXPECT_EQ(
        knn_index_build(points.data(), static_cast<int64_t>(points.size()) / dim, dim, &o, &index),
        KNN_OK)
        << knn_last_error();
    int built = -1;
    knn_index_info(index, nullptr, nullptr, nullptr, &built);
    EXPECT_EQ(built, structure) << "the case does not test the structure it names";
    return std::shared_ptr<knn_index>(index,
                                      [](knn_index* i) { EXPECT_EQ(knn_index_free(i), KNN_OK); });
  }

  struct Rows {
    std::vector<int32_t> idx;
    std::vector<float> dist;
    std::vector<int32_t> counts;
    void reset(size_t slots, size_t rows) {
      idx.assign(slots, kUntouched);
      dist.assign(slots, kUntouchedF);
      counts.assign(rows, kUntouched);
    }
    ::testing::AssertionResult untouched_or_missing() const {
      const bool untouched = all_equal(idx, kUntouched) && all_equal(dist, kUntouchedF) &&
                             all_equal(counts, kUntouched);
      const bool missing = all_equal(idx, int32_t{-1}) && all_equal(dist, kInf) &&
                           (all_equal(counts, int32_t{0}) || all_equal(counts, kUntouched));
      return check(untouched || missing, "the outputs are neither untouched nor all missing");
    }
  };

  static ::testing::AssertionResult same(const KnnResult& want, const Rows& got) {
    const std::vector<int> idx(got.idx.begin(), got.idx.end());
    const auto rows = same_rows(want.idx, idx, want.m, want.k);
    return rows ? same_bits(want.dist, got.dist) : rows;
  }

  Case index_query(int structure) {
    auto index = shared_index(structure);
    auto out = std::make_shared<Rows>();
    const std::vector<float>& points = points_of(structure);
    const std::vector<float>& queries = queries_of(structure);
    const int dim = dim_of(structure);
    const int64_t m = static_cast<int64_t>(queries.size()) / dim;
    auto want = std::make_shared<KnnResult>(oracle_knn(
        points.data(), static_cast<int64_t>(points.size()) / dim, queries.data(), m, dim, kK));
    const knn_options o = opt_;
    return {std::string("knn_index_query ") + structure_name(structure),
            [=] { out->reset(static_cast<size_t>(m) * kK, 0); },
            [=] {
              return knn_index_query(index.get(), queries.data(), m, kK, out->idx.data(),
                                     out->dist.data(), &o);
            },
            [=] { return same(*want, *out); }, [=] { return out->untouched_or_missing(); }};
  }

  Case index_query_self(int structure) {
    auto index = shared_index(structure);
    auto out = std::make_shared<Rows>();
    const std::vector<float>& points = points_of(structure);
    const int dim = dim_of(structure);
    const int64_t n = static_cast<int64_t>(points.size()) / dim;
    auto want = std::make_shared<KnnResult>(oracle_self(points.data(), n, dim, kK, true));
    return {
        std::string("knn_index_query_self ") + structure_name(structure),
        [=] { out->reset(static_cast<size_t>(n) * kK, 0); },
        [=] { return knn_index_query_self(index.get(), kK, 1, out->idx.data(), out->dist.data()); },
        [=] { return same(*want, *out); }, [=] { return out->untouched_or_missing(); }};
  }

  Case index_radius(int structure, int max_neighbors) {
    auto index = shared_index(structure);
    auto out = std::make_shared<Rows>();
    const std::vector<float>& points = points_of(structure);
    const std::vector<float>& queries = queries_of(structure);
    const int dim = dim_of(structure);
    const int64_t m = static_cast<int64_t>(queries.size()) / dim;
    const float radius = structure == KNN_STRUCTURE_GRID ? 0.4f : 3.0f;
    auto want = std::make_shared<RadiusResult>(
        oracle_radius(points.data(), static_cast<int64_t>(points.size()) / dim, queries.data(), m,
                      dim, radius, max_neighbors));
    const knn_options o = opt_;
    return {std::string("knn_index_radius ") + structure_name(structure) + " max_neighbors " +
                std::to_string(max_neighbors),
            [=] { out->reset(static_cast<size_t>(m) * max_neighbors, static_cast<size_t>(m)); },
            [=] {
              return knn_index_radius(index.get(), queries.data(), m, radius, max_neighbors,
                                      max_neighbors > 0 ? out->idx.data() : nullptr,
                                      max_neighbors > 0 ? out->dist.data() : nullptr,
                                      out->counts.data(), &o);
            },
            [=] {
              if (!std::equal(want->counts.begin(), want->counts.end(), out->counts.begin()))
                return check(false, "counts differ from the oracle's");
              const std::vector<int> idx(out->idx.begin(), out->idx.end());
              const auto rows = same_rows(want->idx, idx, m, max_neighbors);
              return rows ? same_bits(want->dist, out->dist) : rows;
            },
            [=] { return out->untouched_or_missing(); }};
  }

  // ---- The float64 family ----------------------------------------------------------------
  // The same engine code in double: one build walk and one query walk, on the
  // kd-tree's rows moved into a UTM frame (4.5e6 m), against a float64 brute
  // force written here.

  struct Rows64 {
    std::vector<int32_t> idx;
    std::vector<double> dist;
    void reset(size_t slots) {
      idx.assign(slots, kUntouched);
      dist.assign(slots, static_cast<double>(kUntouchedF));
    }
    ::testing::AssertionResult untouched_or_missing() const {
      const bool untouched =
          all_equal(idx, kUntouched) && all_equal(dist, static_cast<double>(kUntouchedF));
      const bool missing =
          all_equal(idx, int32_t{-1}) && all_equal(dist, std::numeric_limits<double>::infinity());
      return check(untouched || missing, "the outputs are neither untouched nor all missing");
    }
  };

  // The k nearest of each query by the contract's float64 distance, ties by index.
  static Rows64 oracle_knn64(const std::vector<double>& points, const std::vector<double>& queries,
                             int dim, int k) {
    const size_t n = points.size() / dim, m = queries.size() / dim;
    Rows64 r;
    r.idx.assign(m * k, -1);
    r.dist.assign(m * k, std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < m; ++i) {
      std::vector<std::pair<double, int32_t>> all;
      for (size_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int d = 0; d < dim; ++d) {
          const double t = queries[i * dim + d] - points[j * dim + d];
          sum = d == 0 ? t * t : sum + t * t;
        }
        all.emplace_back(sum, static_cast<int32_t>(j));
      }
      std::sort(all.begin(), all.end());
      for (size_t j = 0; j < std::min<size_t>(k, n); ++j) {
        r.idx[i * k + j] = all[j].second;
        r.dist[i * k + j] = all[j].first;
      }
    }
    return r;
  }

  static std::vector<double> in_utm_frame(const std::vector<float>& rows) {
    std::vector<double> wide(rows.begin(), rows.end());
    for (double& x : wide) x = 4.5e6 + x * 1e-3;
    return wide;
  }

  static ::testing::AssertionResult same64(const Rows64& want, const Rows64& got) {
    return check(want.idx == got.idx && std::memcmp(want.dist.data(), got.dist.data(),
                                                    want.dist.size() * sizeof(double)) == 0,
                 "the float64 rows differ from the oracle's");
  }

  Rows64 query64(knn_index* index, const std::vector<double>& queries, const knn_options& o) const {
    Rows64 r;
    r.reset(queries.size() / kDim * kK);
    EXPECT_EQ(
        knn_index_query_f64(index, queries.data(), static_cast<int64_t>(queries.size()) / kDim, kK,
                            r.idx.data(), r.dist.data(), &o),
        KNN_OK)
        << knn_last_error();
    return r;
  }

  Case index_build_f64() {
    auto out = std::make_shared<knn_index*>(nullptr);
    const auto points = std::make_shared<std::vector<double>>(in_utm_frame(rows_));
    const auto queries = std::make_shared<std::vector<double>>(in_utm_frame(query_rows_));
    const int64_t n = static_cast<int64_t>(points->size()) / kDim;
    auto want = std::make_shared<Rows64>(oracle_knn64(*points, *queries, kDim, kK));
    const knn_options o = options_of(KNN_STRUCTURE_KDTREE);
    return {"knn_index_build_f64 KdTree",
            [=] { *out = reinterpret_cast<knn_index*>(out.get()); },
            [=] { return knn_index_build_f64(points->data(), n, kDim, &o, out.get()); },
            [=] {
              int scalar = -1;
              if (knn_index_scalar(*out, &scalar) != KNN_OK || scalar != KNN_SCALAR_FLOAT64)
                return check(false, "the index built is not a live float64 index");
              return same64(*want, query64(*out, *queries, o));
            },
            [=] { return check(*out == nullptr, "*out is not NULL after a failure"); },
            [=] {
              EXPECT_EQ(knn_index_free(*out), KNN_OK);
              *out = nullptr;
            }};
  }

  Case index_query_f64() {
    const auto points = std::make_shared<std::vector<double>>(in_utm_frame(rows_));
    const auto queries = std::make_shared<std::vector<double>>(in_utm_frame(query_rows_));
    const knn_options o = options_of(KNN_STRUCTURE_KDTREE);
    knn_index* built = nullptr;
    EXPECT_EQ(knn_index_build_f64(points->data(), static_cast<int64_t>(points->size()) / kDim, kDim,
                                  &o, &built),
              KNN_OK)
        << knn_last_error();
    std::shared_ptr<knn_index> index(built,
                                     [](knn_index* i) { EXPECT_EQ(knn_index_free(i), KNN_OK); });
    auto out = std::make_shared<Rows64>();
    const int64_t m = static_cast<int64_t>(queries->size()) / kDim;
    auto want = std::make_shared<Rows64>(oracle_knn64(*points, *queries, kDim, kK));
    return {"knn_index_query_f64 KdTree", [=] { out->reset(static_cast<size_t>(m) * kK); },
            [=] {
              return knn_index_query_f64(index.get(), queries->data(), m, kK, out->idx.data(),
                                         out->dist.data(), &o);
            },
            [=] { return same64(*want, *out); }, [=] { return out->untouched_or_missing(); }};
  }

  // ---- Point in polygon ----------------------------------------------------------------

  std::vector<int64_t> pip_counts() const {
    std::vector<int64_t> counts;
    for (const auto& p : pip_) counts.push_back(static_cast<int64_t>(p.size()));
    return counts;
  }

  // The point-in-polygon cases run for each precision: P the points', V the
  // vertices' scalar (the _f64 calls when double), on the same values.
  template <class P>
  static const char* build_name() {
    return sizeof(P) == 8 ? "knn_quadtree_build_f64" : "knn_quadtree_build";
  }
  template <class V>
  static const char* count_name() {
    return sizeof(V) == 8 ? "knn_points_in_polygons_count_f64" : "knn_points_in_polygons_count";
  }
  template <class V>
  static const char* fill_name() {
    return sizeof(V) == 8 ? "knn_points_in_polygons_f64" : "knn_points_in_polygons";
  }

  template <class P>
  Case quadtree_build() {
    auto out = std::make_shared<knn_quadtree*>(nullptr);
    const knn_options o = opt_;
    const std::vector<int64_t> want = pip_counts();
    const std::vector<P> xy(xy_.begin(), xy_.end());
    const PolygonArrays polygons = polygons_;
    return {build_name<P>(),
            [=] { *out = reinterpret_cast<knn_quadtree*>(out.get()); },
            [=] { return knn_test::quadtree_build(xy, o, out.get()); },
            [=] {
              std::vector<int64_t> counts(want.size(), -7);
              const int status = knn_test::pip_count(*out, polygons, counts.data(), o);
              return check(status == KNN_OK && counts == want, "the quadtree built counts wrong");
            },
            [=] { return check(*out == nullptr, "*out is not NULL after a failure"); },
            [=] {
              EXPECT_EQ(knn_quadtree_free(*out), KNN_OK);
              *out = nullptr;
            }};
  }

  template <class P>
  std::shared_ptr<knn_quadtree> shared_quadtree() {
    knn_quadtree* tree = nullptr;
    EXPECT_EQ(knn_test::quadtree_build(std::vector<P>(xy_.begin(), xy_.end()), opt_, &tree), KNN_OK)
        << knn_last_error();
    return std::shared_ptr<knn_quadtree>(
        tree, [](knn_quadtree* t) { EXPECT_EQ(knn_quadtree_free(t), KNN_OK); });
  }

  template <class P, class V>
  Case pip_count() {
    auto tree = shared_quadtree<P>();
    auto counts = std::make_shared<std::vector<int64_t>>();
    const std::vector<int64_t> want = pip_counts();
    const knn_options o = opt_;
    const BasicPolygonArrays<V> polygons = polygons_.as<V>();
    const std::string name =
        std::string(count_name<V>()) + (sizeof(P) == 4 ? " (float tree)" : " (double tree)");
    return {name, [=] { counts->assign(want.size(), int64_t{kUntouched}); },
            [=] { return knn_test::pip_count(tree.get(), polygons, counts->data(), o); },
            [=] { return check(*counts == want, "counts differ from the oracle's"); },
            [=] {
              return check(
                  all_equal(*counts, int64_t{kUntouched}) || all_equal(*counts, int64_t{0}),
                  "counts are neither untouched nor all 0");
            }};
  }

  template <class P, class V>
  Case pip_fill() {
    auto tree = shared_quadtree<P>();
    auto indices = std::make_shared<std::vector<int64_t>>();
    std::vector<int64_t> offsets{0}, want;
    for (const auto& p : pip_) {
      offsets.push_back(offsets.back() + static_cast<int64_t>(p.size()));
      want.insert(want.end(), p.begin(), p.end());
    }
    const knn_options o = opt_;
    const BasicPolygonArrays<V> polygons = polygons_.as<V>();
    const std::string name =
        std::string(fill_name<V>()) + (sizeof(P) == 4 ? " (float tree)" : " (double tree)");
    return {name, [=] { indices->assign(want.size(), int64_t{kUntouched}); },
            [=] {
              return knn_test::pip_fill(tree.get(), polygons, offsets.data(), indices->data(), o);
            },
            [=] { return check(*indices == want, "indices differ from the oracle's"); },
            [=] {
              return check(
                  all_equal(*indices, int64_t{kUntouched}) || all_equal(*indices, int64_t{-1}),
                  "indices are neither untouched nor all -1");
            }};
  }

  // The mesh calls, for each precision S, on an icosphere and 60 points:
  // a build (its checks, copies, closedness test, pseudonormals, the
  // engine's tree) and the three query calls.
  template <class S>
  static std::string mesh_name(const char* call) {
    return std::string(call) + (sizeof(S) == 8 ? "_f64" : "");
  }
  // (The vertices are converted before the call: the test's own
  // allocations must not meet the injected failures.)
  template <class S>
  static int build_mesh(const std::vector<S>& v, const knn_mesh_oracle::Mesh& m,
                        const knn_options& o, knn_mesh** out) {
    return mesh_build(v.data(), m.n_vertices(), m.triangles.data(), m.n_triangles(), &o, out);
  }
  template <class S>
  std::vector<S> mesh_points() const {
    std::mt19937_64 rng(23);
    std::uniform_real_distribution<double> u(-1.6, 1.6);
    std::vector<S> q(3 * 60);
    for (S& c : q) c = static_cast<S>(u(rng));
    return q;
  }
  // The oracle's distance of every point, within `tolerance` of `got`
  // (squared when `squared`, else signed with the sign of |p| < 1).
  template <class S>
  static bool mesh_distances_right(const knn_mesh_oracle::Mesh& m, const std::vector<S>& q,
                                   const std::vector<S>& got, bool squared) {
    for (size_t i = 0; i < got.size(); ++i) {
      const knn_mesh_oracle::P3 p{q[3 * i], q[3 * i + 1], q[3 * i + 2]};
      const long double sq = knn_mesh_oracle::nearest(m, p).sq;
      const long double want = squared ? sq : std::sqrt(sq) * (norm2(p) < 0.81L ? -1 : 1);
      if (!squared && norm2(p) >= 0.81L && norm2(p) <= 1) continue;  // near the surface
      if (std::fabs(static_cast<long double>(got[i]) - want) > 1e-4L) return false;
    }
    return true;
  }

  template <class S>
  Case mesh_build_case() {
    auto out = std::make_shared<knn_mesh*>(nullptr);
    const knn_options o = opt_;
    const knn_mesh_oracle::Mesh m = mesh_;
    const std::vector<S> q = mesh_points<S>();
    const std::vector<S> v(m.vertices.begin(), m.vertices.end());
    return {mesh_name<S>("knn_mesh_build"),
            [=] { *out = reinterpret_cast<knn_mesh*>(out.get()); },
            [=] { return build_mesh<S>(v, m, o, out.get()); },
            [=] {
              std::vector<S> sd(q.size() / 3);
              const int status = mesh_signed_distance(*out, q.data(), sd.size(), S(INFINITY),
                                                      sd.data(), nullptr, &o);
              return check(status == KNN_OK && mesh_distances_right(m, q, sd, false),
                           "the mesh built answers wrong");
            },
            [=] { return check(*out == nullptr, "*out is not NULL after a failure"); },
            [=] {
              EXPECT_EQ(knn_mesh_free(*out), KNN_OK);
              *out = nullptr;
            }};
  }

  // A load (knn_mesh_deserialize): the buffer's checks, then its arrays
  // copied out and handed over to the build.
  template <class S>
  Case mesh_load_case() {
    auto out = std::make_shared<knn_mesh*>(nullptr);
    const knn_options o = opt_;
    const knn_mesh_oracle::Mesh m = mesh_;
    const std::vector<S> q = mesh_points<S>();
    const std::vector<unsigned char> saved = serialized(*shared_mesh<S>());
    return {std::string("knn_mesh_deserialize ") + (sizeof(S) == 8 ? "float64" : "float32"),
            [=] { *out = reinterpret_cast<knn_mesh*>(out.get()); },
            [=] { return knn_mesh_deserialize(saved.data(), saved.size(), &o, out.get()); },
            [=] {
              std::vector<S> sd(q.size() / 3);
              const int status = mesh_signed_distance(*out, q.data(), sd.size(), S(INFINITY),
                                                      sd.data(), nullptr, &o);
              return check(status == KNN_OK && mesh_distances_right(m, q, sd, false) &&
                               serialized(**out) == saved,
                           "the mesh loaded differs");
            },
            [=] { return check(*out == nullptr, "*out is not NULL after a failure"); },
            [=] {
              EXPECT_EQ(knn_mesh_free(*out), KNN_OK);
              *out = nullptr;
            }};
  }

  static std::vector<unsigned char> serialized(const knn_mesh& mesh) {
    size_t bytes = 0;
    EXPECT_EQ(knn_mesh_serialized_size(&mesh, &bytes), KNN_OK);
    std::vector<unsigned char> buffer(bytes);
    EXPECT_EQ(knn_mesh_serialize(&mesh, buffer.data(), bytes), KNN_OK) << knn_last_error();
    return buffer;
  }

  template <class S>
  std::shared_ptr<knn_mesh> shared_mesh() {
    knn_mesh* mesh = nullptr;
    const std::vector<S> v(mesh_.vertices.begin(), mesh_.vertices.end());
    EXPECT_EQ(build_mesh<S>(v, mesh_, opt_, &mesh), KNN_OK) << knn_last_error();
    return std::shared_ptr<knn_mesh>(mesh,
                                     [](knn_mesh* h) { EXPECT_EQ(knn_mesh_free(h), KNN_OK); });
  }

  template <class S>
  Case mesh_closest_case() {
    auto mesh = shared_mesh<S>();
    const knn_options o = opt_;
    const knn_mesh_oracle::Mesh m = mesh_;
    const std::vector<S> q = mesh_points<S>();
    const size_t n = q.size() / 3;
    auto ids = std::make_shared<std::vector<int32_t>>();
    auto sq = std::make_shared<std::vector<S>>();
    auto c = std::make_shared<std::vector<S>>();
    return {mesh_name<S>("knn_mesh_closest"),
            [=] {
              ids->assign(n, kUntouched);
              sq->assign(n, S(kUntouchedF));
              c->assign(3 * n, S(kUntouchedF));
            },
            [=] {
              return mesh_closest(mesh.get(), q.data(), n, S(INFINITY), ids->data(), sq->data(),
                                  c->data(), nullptr, &o);
            },
            [=] { return check(mesh_distances_right(m, q, *sq, true), "distances differ"); },
            [=] {
              const bool untouched = all_equal(*ids, kUntouched) &&
                                     all_equal(*sq, S(kUntouchedF)) &&
                                     all_equal(*c, S(kUntouchedF));
              const bool beyond = all_equal(*ids, -1) &&
                                  all_equal(*sq, std::numeric_limits<S>::infinity()) &&
                                  std::all_of(c->begin(), c->end(), [](S v) { return v != v; });
              return check(untouched || beyond, "outputs are neither untouched nor all beyond");
            }};
  }

  template <class S>
  Case mesh_report_case() {
    auto mesh = shared_mesh<S>();
    const knn_options o = opt_;
    const knn_mesh_oracle::Mesh m = mesh_;
    const std::vector<S> q = mesh_points<S>();
    const size_t n = q.size() / 3;
    auto sd = std::make_shared<std::vector<S>>();
    auto report = std::make_shared<knn_deviation_report>();
    return {mesh_name<S>("knn_mesh_deviation_report"),
            [=] {
              sd->assign(n, S(kUntouchedF));
              std::memset(report.get(), 0x5a, sizeof *report);
              report->struct_size = sizeof *report;
            },
            [=] {
              return mesh_report(mesh.get(), q.data(), n, S(INFINITY), 0.1, nullptr, 0, nullptr,
                                 nullptr, 0, nullptr, sd->data(), report.get(), &o);
            },
            [=] {
              return check(mesh_distances_right(m, q, *sd, false) &&
                               report->n_measured == static_cast<int64_t>(n),
                           "the report differs");
            },
            [=] {
              const bool untouched = all_equal(*sd, S(kUntouchedF)) && report->n_points != 0 &&
                                     report->n_points == int64_t{0x5a5a5a5a5a5a5a5a};
              const bool beyond = all_equal(*sd, std::numeric_limits<S>::infinity()) &&
                                  report->n_points == static_cast<int64_t>(n) &&
                                  report->n_beyond == static_cast<int64_t>(n) &&
                                  report->n_measured == 0;
              return check(untouched || beyond, "outputs are neither untouched nor all beyond");
            }};
  }

  // A fit (knn_mesh_align_ex, knn_index_align), trimmed to 90 % with the
  // coarse start: `align` runs it with these parameters. Right when it gives
  // the result of a run without failures, every field; untouched otherwise.
  static Case align_case(const std::string& name,
                         std::function<int(const knn_align_params*, knn_align_result*)> align,
                         int iterations) {
    knn_align_params params = knn_align_test::params_of(0, 0.9, iterations);
    params.coarse_start = 1;
    auto want = std::make_shared<knn_align_result>(knn_align_test::empty_result());
    EXPECT_EQ(align(&params, want.get()), KNN_OK) << name << knn_last_error();
    auto got = std::make_shared<knn_align_result>();
    return {name, [=] { *got = knn_align_test::empty_result(); },
            [=] { return align(&params, got.get()); },
            [=] {
              return check(std::memcmp(got.get(), want.get(), sizeof *want) == 0,
                           "the result differs from a run without failures");
            },
            [=] {
              const knn_align_result untouched = knn_align_test::empty_result();
              return check(std::memcmp(got.get(), &untouched, sizeof untouched) == 0,
                           "the result was written");
            }};
  }

  // The alignment to a mesh: its host arrays (the engine's per point search
  // results, the block sums, the starts of the coarse start).
  template <class S>
  Case mesh_align_case() {
    auto mesh = shared_mesh<S>();
    const knn_options o = opt_;
    const std::vector<S> q = mesh_points<S>();
    const int64_t n = static_cast<int64_t>(q.size() / 3);
    return align_case(
        mesh_name<S>("knn_mesh_align_ex"),
        [=](const knn_align_params* params, knn_align_result* r) {
          return mesh_align_ex(mesh.get(), q.data(), n, nullptr, params, r, &o);
        },
        5);
  }

  // The alignment to an index's points (knn_index_align, point to point):
  // its host arrays (the moved points, the k = 1 lists, the index's points,
  // the trimming's distances).
  Case index_align_case() {
    auto index = shared_index(KNN_STRUCTURE_GRID);
    const knn_options o = opt_;
    std::vector<float> q = points_of(KNN_STRUCTURE_GRID);
    for (size_t i = 0; i < q.size(); ++i) q[i] += i % 3 == 0 ? 0.01f : 0.0f;
    const int64_t m = static_cast<int64_t>(q.size() / 3);
    return align_case(
        "knn_index_align",
        [=](const knn_align_params* params, knn_align_result* r) {
          return knn_index_align(index.get(), q.data(), m, nullptr, nullptr, params, r, &o);
        },
        3);
  }

  // A neighbourhood statistic (knn_gpgpu_stats.h) of the grid's 3-D points:
  // `call` writes `count` values (and *n_kept where it has one). Right when
  // they equal a run without failures (tests/api/test_neighbourhood_stats.cpp
  // holds their oracle); after a failure untouched or all missing.
  template <class T>
  Case stats_case(const std::string& name, std::function<int(const knn_index*, T*, int64_t*)> call,
                  size_t count, T untouched, std::function<bool(T)> missing) {
    auto index = shared_index(KNN_STRUCTURE_GRID);
    auto want = std::make_shared<std::vector<T>>(count);
    auto got = std::make_shared<std::vector<T>>();
    // n_kept, where the call has one; else it stays as prepared.
    auto want_kept = std::make_shared<int64_t>(kUntouched);
    auto got_kept = std::make_shared<int64_t>(kUntouched);
    EXPECT_EQ(call(index.get(), want->data(), want_kept.get()), KNN_OK) << name << knn_last_error();
    return {name,
            [=] {
              got->assign(count, untouched);
              *got_kept = kUntouched;
            },
            [=] { return call(index.get(), got->data(), got_kept.get()); },
            [=] {
              return check(std::memcmp(got->data(), want->data(), count * sizeof(T)) == 0 &&
                               *got_kept == *want_kept,
                           "the values differ from a run without failures");
            },
            [=] {
              const bool same = all_equal(*got, untouched) && *got_kept == kUntouched;
              const bool all_missing = std::all_of(got->begin(), got->end(), missing);
              return check(same || all_missing,
                           "the outputs are neither untouched nor all missing");
            }};
  }

  std::vector<Case> stats_cases() {
    const knn_options o = opt_;
    const size_t n = points_of(KNN_STRUCTURE_GRID).size() / 3;
    const auto nan = [](float v) { return v != v; };
    const auto inf = [](float v) { return v == kInf; };
    const auto minus_one = [](int32_t v) { return v == -1; };
    const auto zero = [](int64_t v) { return v == 0; };
    return {stats_case<float>(
                "knn_index_normals (no viewpoint)",
                [o](const knn_index* ix, float* out, int64_t*) {
                  return knn_index_normals(ix, 6, nullptr, out, nullptr, &o);
                },
                3 * n, kUntouchedF, nan),
            stats_case<float>(
                "knn_index_outlier_scores",
                [o](const knn_index* ix, float* out, int64_t*) {
                  return knn_index_outlier_scores(ix, 6, out, &o);
                },
                n, kUntouchedF, inf),
            stats_case<float>(
                "knn_index_kth_distances",
                [o](const knn_index* ix, float* out, int64_t*) {
                  return knn_index_kth_distances(ix, 6, out, &o);
                },
                n, kUntouchedF, inf),
            stats_case<int32_t>(
                "knn_index_statistical_inliers",
                [o](const knn_index* ix, int32_t* out, int64_t* kept) {
                  return knn_index_statistical_inliers(ix, 6, 1.0, out, kept, &o);
                },
                n, kUntouched, minus_one),
            stats_case<int64_t>(
                "knn_index_neighbor_counts",
                [o](const knn_index* ix, int64_t* out, int64_t*) {
                  return knn_index_neighbor_counts(ix, 0.5f, out, &o);
                },
                n, kUntouched, zero),
            stats_case<int32_t>(
                "knn_index_radius_inliers",
                [o](const knn_index* ix, int32_t* out, int64_t* kept) {
                  return knn_index_radius_inliers(ix, 0.5f, 2, out, kept, &o);
                },
                n, kUntouched, minus_one)};
  }

  std::vector<Case> all_cases() {
    std::vector<Case> cases{classic_build("mpBuildKdTree", &mpBuildKdTree),
                            classic_build("buildKdTree", &buildKdTree),
                            classic_query("mpQueryAll", &mpQueryAll),
                            classic_query("queryAll", &queryAll), brute_force()};
    for (const int s : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
      cases.push_back(index_build(s));
      cases.push_back(index_query(s));
      cases.push_back(index_query_self(s));
      cases.push_back(index_radius(s, 4));
      cases.push_back(index_radius(s, 0));
    }
    cases.push_back(index_build_f64());
    cases.push_back(index_query_f64());
    cases.push_back(quadtree_build<float>());
    cases.push_back(pip_count<float, float>());
    cases.push_back(pip_fill<float, float>());
    cases.push_back(quadtree_build<double>());
    cases.push_back(pip_count<double, double>());
    cases.push_back(pip_fill<double, double>());
    cases.push_back(pip_count<float, double>());
    cases.push_back(mesh_build_case<float>());
    cases.push_back(mesh_build_case<double>());
    cases.push_back(mesh_load_case<float>());
    cases.push_back(mesh_load_case<double>());
    cases.push_back(mesh_closest_case<float>());
    cases.push_back(mesh_closest_case<double>());
    cases.push_back(mesh_report_case<float>());
    cases.push_back(mesh_report_case<double>());
    cases.push_back(mesh_align_case<float>());
    cases.push_back(mesh_align_case<double>());
    cases.push_back(index_align_case());
    for (Case& c : stats_cases()) cases.push_back(std::move(c));
    return cases;
  }

  std::vector<Point> points_, queries_;
  std::vector<Node> tree_;
  KnnResult classic_;
  std::vector<float> rows_, query_rows_, grid_rows_, grid_queries_;
  knn_options opt_{};
  std::vector<float> xy_;
  PolygonArrays polygons_;
  std::vector<std::vector<int64_t>> pip_;
  knn_mesh_oracle::Mesh mesh_ = knn_mesh_oracle::icosphere(1);
};

TEST_F(HostOom, TransientFailureAtEveryAllocation) {
  for (const Case& c : all_cases()) {
    walk(c, hook::Mode::Transient);
    if (HasFatalFailure()) return;
  }
}

TEST_F(HostOom, PersistentFailureFromEveryAllocation) {
  for (const Case& c : all_cases()) {
    walk(c, hook::Mode::Persistent);
    if (HasFatalFailure()) return;
  }
}

// A load copies its buffer's arrays once: the copies become the mesh's own,
// so that its host memory at its peak is a build's from the caller's arrays
// (which copies them once), not one copy of the input more.
TEST_F(HostOom, MeshLoadCopiesItsInputOnce) {
  const knn_mesh_oracle::Mesh m = knn_mesh_oracle::icosphere(5);
  knn_options o = opt_;
  o.threads = 1;  // the same allocations on every run
  const auto peak_of = [](const auto& call) {
    const int64_t before = hook::live_bytes();
    hook::reset_peak();
    call();
    return hook::peak_live_bytes() - before;
  };
  knn_mesh *built = nullptr, *loaded = nullptr;
  const int64_t build_peak = peak_of(
      [&] { ASSERT_EQ(build_mesh<double>(m.vertices, m, o, &built), KNN_OK) << knn_last_error(); });
  const std::vector<unsigned char> saved = serialized(*built);
  const int64_t load_peak = peak_of([&] {
    ASSERT_EQ(knn_mesh_deserialize(saved.data(), saved.size(), &o, &loaded), KNN_OK)
        << knn_last_error();
  });
  EXPECT_EQ(serialized(*loaded), saved);
  const int64_t input = static_cast<int64_t>(saved.size());
  EXPECT_LT(load_peak, build_peak + input / 2)
      << "a load's peak of " << load_peak << " bytes against a build's " << build_peak << " (input "
      << input << " bytes)";
  EXPECT_EQ(knn_mesh_free(built), KNN_OK);
  EXPECT_EQ(knn_mesh_free(loaded), KNN_OK);
}

// With every allocation failing from the first, the message still says what
// happened: it needs no allocation of its own.
TEST_F(HostOom, MessageWithoutMemory) {
  std::vector<int> result(queries_.size() * kK, kSentinelInt);
  hook::arm(1, hook::Mode::Persistent);
  const int status = mpQueryAll(queries_.data(), tree_.data(), static_cast<int>(queries_.size()),
                                static_cast<int>(tree_.size()), kK, result.data());
  hook::disarm();
  EXPECT_EQ(status, KNN_ERR_HOST_OUT_OF_MEMORY);
  EXPECT_STREQ(knn_last_error(), "mpQueryAll: host memory allocation failed");
}

// ---- Sizes the caller controls ------------------------------------------------------

// k far beyond the data: the per-thread k-lists hold at most n entries (they
// were k entries each, allocated inside the parallel region, where a failure
// ends the process).
TEST_F(HostOom, KListsDoNotGrowWithK) {
  const int k = 4000000;  // 16 MB of results per query; a k-list would be 32 MB a thread
  const std::vector<Point> few(points_.begin(), points_.begin() + 10);
  const std::vector<Node> tree = reference_tree(few);
  const std::vector<Point> one(queries_.begin(), queries_.begin() + 1);
  const KnnResult want = oracle_knn(few, one, 10);
  for (QueryFn fn : {&mpQueryAll, &queryAll}) {
    std::vector<int> result(k, kSentinelInt);
    hook::reset_largest();
    KNN_ASSERT_OK(fn(one.data(), tree.data(), 1, 10, k, result.data()));
    EXPECT_LT(hook::largest_request(), size_t{1} << 20);
    EXPECT_TRUE(std::equal(want.idx.begin(), want.idx.end(), result.begin()));
    EXPECT_TRUE(std::all_of(result.begin() + 10, result.end(), [](int i) { return i == -1; }));
  }
  std::vector<int> ind(k, kSentinelInt);
  std::vector<float> sq(k, kUntouchedF);
  hook::reset_largest();
  KNN_ASSERT_OK(knn_brute_force(&few[0].p[0], 10, &one[0].p[0], 1, 3, k, sq.data(), ind.data()));
  EXPECT_LT(hook::largest_request(), size_t{1} << 20);
  EXPECT_TRUE(std::equal(want.idx.begin(), want.idx.end(), ind.begin()));
  EXPECT_TRUE(std::all_of(ind.begin() + 10, ind.end(), [](int i) { return i == -1; }));
  EXPECT_TRUE(std::all_of(sq.begin() + 10, sq.end(), [](float d) { return d == kInf; }));
}

// 10^5 points, so that the kd-tree builds share their nodes out over the
// threads (the walks above build trees too small for that), with every
// malloc made inside a parallel region failing throughout besides
// (parallel_malloc_hook.h): libgomp ended the process (exit 1) when it
// could not allocate one of the OpenMP tasks the builds were made of.
TEST_F(HostOom, LargeBuildsAtEveryAllocation) {
  if (!parallel_malloc::available()) GTEST_SKIP() << "the malloc hook needs glibc";
  points_ = make_points(Dist::Uniform, 100000, 31);
  tree_ = reference_tree(points_);
  rows_ = make_rows(Dist::Clustered, 100000, kDim, 32);
  parallel_malloc::arm();
  for (const Case& c :
       {classic_build("mpBuildKdTree", &mpBuildKdTree), classic_build("buildKdTree", &buildKdTree),
        index_build(KNN_STRUCTURE_KDTREE), index_build_f64()}) {
    walk(c, hook::Mode::Persistent);
    if (HasFatalFailure()) break;
  }
  parallel_malloc::disarm();
}

// knn_index_radius_count's counts after a failure in its search are all 0,
// as the header says, even when every allocation from there on fails: the
// zeros need no memory of their own.
TEST_F(HostOom, RadiusCountZeroesTheCountsWithoutMemory) {
  const int structure = KNN_STRUCTURE_KDTREE;
  const auto index = shared_index(structure);
  const std::vector<float>& queries = queries_of(structure);
  const int64_t m = static_cast<int64_t>(queries.size()) / dim_of(structure);
  const knn_options o = options_of(structure);
  std::vector<int64_t> counts;
  bool zeroed = false;
  for (int64_t nth = 1;; ++nth) {
    ASSERT_LT(nth, kMaxWalk) << "the call keeps allocating";
    SCOPED_TRACE("allocation " + std::to_string(nth) + " and every later one fail");
    counts.assign(static_cast<size_t>(m), int64_t{kUntouched});
    hook::arm(nth, hook::Mode::Persistent);
    const int status =
        knn_index_radius_count(index.get(), queries.data(), m, 3.0f, counts.data(), &o);
    hook::disarm();
    if (status == KNN_OK) break;
    ASSERT_EQ(status, KNN_ERR_HOST_OUT_OF_MEMORY) << knn_last_error();
    const bool all_zero = all_equal(counts, int64_t{0});
    ASSERT_TRUE(all_zero || all_equal(counts, int64_t{kUntouched})) << "counts half written";
    zeroed = zeroed || all_zero;
  }
  EXPECT_TRUE(zeroed) << "no failure left the counts all 0";
}

// Building and freeing an index gives back every byte: no buffer of the
// build (the kd-tree's median keys were thread_local, about 8 bytes per
// point per OpenMP thread) outlives the call.
TEST_F(HostOom, NothingKeptAfterIndexFree) {
  const int dim = 7;
  const std::vector<float> points = make_rows(Dist::Uniform, 100000, dim, 21);
  // The library's lazily made state (the registry of live handles) first.
  knn_index* warm_up = nullptr;
  KNN_ASSERT_OK(knn_index_build(points.data(), 10, dim, &opt_, &warm_up));
  KNN_ASSERT_OK(knn_index_free(warm_up));
  for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_BRUTE_FORCE}) {
    knn_options o = opt_;
    o.structure = structure;
    SCOPED_TRACE(structure_name(structure));
    const int64_t before = hook::live_bytes();
    knn_index* index = nullptr;
    KNN_ASSERT_OK(knn_index_build(points.data(), 100000, dim, &o, &index));
    KNN_ASSERT_OK(knn_index_free(index));
    EXPECT_EQ(hook::live_bytes(), before);
  }
}

}  // namespace
}  // namespace knn_test
