// Several devices per call on the GPU (include/knn_gpgpu.h, "Several
// devices"): every split answers bit for bit like one device and like the
// CPU engine. On one GPU a two-way split is forced onto it (devices {0, 0},
// KNN_DEVICES=0,0); the tests named TwoDevices* use devices 0 and 1 and skip
// where there is only one. The float64 (_f64) calls take the same split and
// are checked the same way. Everything skips without a device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "classic_helpers.h"
#include "gpu_test_support.h"
#include "index_test_helpers.h"
#include "scoped_env.h"
#include "test_data.h"

namespace {

using knn_test::Dist;
using knn_test::IndexHandle;
using knn_test::KnnResult;
using knn_test::RadiusResult;

#define SKIP_WITHOUT_TWO_DEVICES()                                             \
  do {                                                                         \
    if (cuGetDeviceCount() < 2) GTEST_SKIP() << "fewer than two CUDA devices"; \
  } while (0)

using knn_test::ScopedEnv;

knn_options options(int backend, int structure, std::initializer_list<int> devices = {}) {
  knn_options o;
  knn_options_init_v2(&o);
  o.backend = backend;
  o.structure = structure;
  for (int d : devices) o.devices[o.device_count++] = d;
  return o;
}

// The same calls on three indexes over the same points: the CUDA engine on
// one device, the CUDA engine split over `devices`, and the CPU engine.
struct ThreeIndexes {
  IndexHandle one, split, cpu;
  ThreeIndexes(const std::vector<float>& points, int dim, int structure,
               std::initializer_list<int> devices) {
    one = knn_test::build_index(points, dim, options(KNN_BACKEND_CUDA, structure, {0}));
    split = knn_test::build_index(points, dim, options(KNN_BACKEND_CUDA, structure, devices));
    cpu = knn_test::build_index(points, dim, options(KNN_BACKEND_OPENMP, structure));
  }
  bool ok() const { return one && split && cpu; }
};

void expect_all_calls_agree(const ThreeIndexes& ix, const std::vector<float>& points,
                            const std::vector<float>& queries, int dim, int k) {
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  const KnnResult want = knn_test::query_index(ix.cpu.get(), queries, dim, k);
  EXPECT_TRUE(knn_test::same_knn(want, knn_test::query_index(ix.one.get(), queries, dim, k)));
  EXPECT_TRUE(knn_test::same_knn(want, knn_test::query_index(ix.split.get(), queries, dim, k)));
  // A call's own list over the build's: three shares on the one-device index.
  const knn_options three = options(KNN_BACKEND_AUTO, KNN_STRUCTURE_AUTO, {0, 0, 0});
  EXPECT_TRUE(
      knn_test::same_knn(want, knn_test::query_index(ix.one.get(), queries, dim, k, &three)));
  for (bool exclude : {false, true}) {
    const KnnResult self = knn_test::query_self(ix.cpu.get(), n, k, exclude);
    EXPECT_TRUE(knn_test::same_knn(self, knn_test::query_self(ix.one.get(), n, k, exclude)))
        << "exclude " << exclude;
    EXPECT_TRUE(knn_test::same_knn(self, knn_test::query_self(ix.split.get(), n, k, exclude)))
        << "exclude " << exclude;
  }
  const float radius = 0.25f;
  for (int width : {0, k}) {
    const RadiusResult r = knn_test::radius_index(ix.cpu.get(), queries, dim, radius, width);
    EXPECT_TRUE(knn_test::same_radius(
        r, knn_test::radius_index(ix.split.get(), queries, dim, radius, width)))
        << "width " << width;
  }
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  std::vector<int64_t> want_counts(static_cast<size_t>(m)), got_counts(want_counts.size(), -7);
  ASSERT_EQ(
      knn_index_radius_count(ix.cpu.get(), queries.data(), m, radius, want_counts.data(), nullptr),
      KNN_OK);
  ASSERT_EQ(
      knn_index_radius_count(ix.split.get(), queries.data(), m, radius, got_counts.data(), nullptr),
      KNN_OK)
      << knn_last_error();
  EXPECT_EQ(want_counts, got_counts);
}

class MultiGpuIndex : public ::testing::TestWithParam<int> {};

TEST_P(MultiGpuIndex, ForcedTwoWaySplitOnOneDeviceIsBitIdentical) {
  SKIP_WITHOUT_DEVICE();
  const int structure = GetParam();
  const int dim = structure == KNN_STRUCTURE_BRUTE_FORCE ? 5 : 3;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{20011}}) {
    for (Dist dist : {Dist::Uniform, Dist::Duplicates}) {
      const std::vector<float> points = knn_test::make_rows(dist, n, dim, 100 + n);
      ThreeIndexes ix(points, dim, structure, {0, 0});
      ASSERT_TRUE(ix.ok());
      for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{5003}}) {
        const std::vector<float> queries = knn_test::make_query_rows(dist, m, dim, 7 + m);
        // k > n where n is small; a long list (33: a warp's list) otherwise.
        for (int k : {1, 8, n < 30 ? static_cast<int>(n) + 3 : 33}) {
          SCOPED_TRACE(knn_test::describe(dist, n, m, k, 0, knn_test::structure_name(structure)));
          expect_all_calls_agree(ix, points, queries, dim, k);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Structures, MultiGpuIndex,
                         ::testing::Values(KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID,
                                           KNN_STRUCTURE_BRUTE_FORCE));

TEST(MultiGpu, EmptyIndexGivesMissingSlotsOnEveryShare) {
  SKIP_WITHOUT_DEVICE();
  knn_options o = options(KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE, {0, 0});
  knn_index* index = nullptr;
  ASSERT_EQ(knn_index_build(nullptr, 0, 3, &o, &index), KNN_OK) << knn_last_error();
  IndexHandle handle(index);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 9, 3, 1);
  const KnnResult r = knn_test::query_index(index, queries, 3, 4, &o);
  for (int i : r.idx) EXPECT_EQ(i, -1);
  for (float d : r.dist) EXPECT_EQ(d, std::numeric_limits<float>::infinity());
  EXPECT_EQ(knn_index_query_self(index, 4, 1, nullptr, nullptr), KNN_OK);
}

#if defined(KNN_TEST_WITH_CUDA)
// Device arrays in and out, on the device of the index and (two devices) on
// the other one, whose shares then move by peer copies.
void expect_device_arrays_agree(knn_index* split, knn_index* cpu, int array_device, int dim) {
  const int64_t m = 4099;
  const int k = 9;
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, m, dim, 77);
  const KnnResult want = knn_test::query_index(cpu, queries, dim, k);
  int previous = -1;
  ASSERT_EQ(cudaGetDevice(&previous), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(array_device), cudaSuccess);
  {
    knn_test::DeviceArray<float> q(queries);
    knn_test::DeviceArray<int32_t> idx(static_cast<size_t>(m) * k);
    knn_test::DeviceArray<float> dist(static_cast<size_t>(m) * k);
    ASSERT_EQ(cudaSetDevice(previous), cudaSuccess);
    ASSERT_EQ(knn_index_query(split, q.get(), m, k, idx.get(), dist.get(), nullptr), KNN_OK)
        << knn_last_error();
    int after = -1;
    ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
    EXPECT_EQ(after, previous) << "the caller's current device changed";
    const std::vector<int32_t> got_idx = idx.to_host(static_cast<size_t>(m) * k);
    EXPECT_TRUE(
        knn_test::same_rows(want.idx, std::vector<int>(got_idx.begin(), got_idx.end()), m, k));
    EXPECT_TRUE(knn_test::same_bits(want.dist, dist.to_host(static_cast<size_t>(m) * k)));
    // All-kNN into device rows, with the extra slot dropped.
    const int64_t n = 20011;
    const KnnResult self = knn_test::query_self(cpu, n, k, true);
    knn_test::DeviceArray<int32_t> self_idx(static_cast<size_t>(n) * k);
    knn_test::DeviceArray<float> self_dist(static_cast<size_t>(n) * k);
    ASSERT_EQ(knn_index_query_self(split, k, 1, self_idx.get(), self_dist.get()), KNN_OK)
        << knn_last_error();
    const std::vector<int32_t> got_self = self_idx.to_host(static_cast<size_t>(n) * k);
    EXPECT_TRUE(
        knn_test::same_rows(self.idx, std::vector<int>(got_self.begin(), got_self.end()), n, k));
    EXPECT_TRUE(knn_test::same_bits(self.dist, self_dist.to_host(static_cast<size_t>(n) * k)));
  }
  cudaSetDevice(previous);
}

TEST(MultiGpu, DeviceArraysOnAForcedSplit) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, 20011, 3, 5);
  ThreeIndexes ix(points, 3, KNN_STRUCTURE_KDTREE, {0, 0});
  ASSERT_TRUE(ix.ok());
  expect_device_arrays_agree(ix.split.get(), ix.cpu.get(), 0, 3);
}

TEST(MultiGpu, TwoDevicesDeviceArraysOnEitherDevice) {
  SKIP_WITHOUT_TWO_DEVICES();
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, 20011, 3, 5);
  for (std::initializer_list<int> devices : {std::initializer_list<int>{0, 1}, {1, 0}, {0, 1, 1}}) {
    ThreeIndexes ix(points, 3, KNN_STRUCTURE_KDTREE, devices);
    ASSERT_TRUE(ix.ok());
    for (int array_device : {0, 1}) {
      SCOPED_TRACE("arrays on device " + std::to_string(array_device));
      expect_device_arrays_agree(ix.split.get(), ix.cpu.get(), array_device, 3);
    }
  }
}
#endif

TEST(MultiGpu, TwoDevicesEveryStructureAgrees) {
  SKIP_WITHOUT_TWO_DEVICES();
  for (int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
    const std::vector<float> points = knn_test::make_rows(Dist::Duplicates, 30011, 3, 8);
    const std::vector<float> queries = knn_test::make_query_rows(Dist::Duplicates, 7001, 3, 9);
    for (std::initializer_list<int> devices :
         {std::initializer_list<int>{0, 1}, {1, 0}, {1, 1, 0, 0}}) {
      ThreeIndexes ix(points, 3, structure, devices);
      ASSERT_TRUE(ix.ok());
      expect_all_calls_agree(ix, points, queries, 3, 12);
    }
  }
  // An index built on device 1 (the current device there) splits with device 0.
  ASSERT_EQ(cuSetDevice(1), KNN_OK);
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, 10007, 3, 4);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 3001, 3, 4);
  IndexHandle on_one =
      knn_test::build_index(points, 3, options(KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE, {1, 0}));
  ASSERT_EQ(cuSetDevice(0), KNN_OK);
  IndexHandle cpu =
      knn_test::build_index(points, 3, options(KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE));
  ASSERT_TRUE(on_one && cpu);
  EXPECT_TRUE(knn_test::same_knn(knn_test::query_index(cpu.get(), queries, 3, 10),
                                 knn_test::query_index(on_one.get(), queries, 3, 10)));
  EXPECT_EQ(cuGetDevice(), 0);
}

// ---- The classic API and KNN_DEVICES ---------------------------------------------

void expect_classic_agrees(int64_t n, int64_t m, int k) {
  const std::vector<Point> points = knn_test::make_points(Dist::Duplicates, n, 3 + n);
  const std::vector<Point> queries = knn_test::make_query_points(Dist::Uniform, m, 5 + m);
  const std::vector<Node> tree = knn_test::build_tree(points);
  SCOPED_TRACE(knn_test::describe(Dist::Duplicates, n, m, k, 0, "classic"));
  const std::vector<int> want = knn_test::query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k);
  EXPECT_EQ(want, knn_test::query_ok(&queryAll, "queryAll", queries, tree, k));
  EXPECT_EQ(want, knn_test::query_ok(&cuQueryAll, "cuQueryAll", queries, tree, k));
}

TEST(MultiGpu, ClassicQueryAllSplitByTheEnvironment) {
  SKIP_WITHOUT_DEVICE();
  const ScopedEnv env("KNN_DEVICES", "0,0");
  for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{100003}})
    for (int k : {1, 8, 100}) expect_classic_agrees(20011, m, k);
  expect_classic_agrees(5, 1000, 8);  // k > n
  // The CPU share of queryAll takes part beside both shares.
  const ScopedEnv cpu_share("KNN_CPU_SHARE", "1");
  expect_classic_agrees(50021, 300007, 32);
}

// A tree that does not fit (KNN_DEVICE_MEMORY_LIMIT below it): its parts are
// served on every listed device at once and merged exactly.
void expect_split_tree_agrees(const char* device_list) {
  const std::vector<Point> points = knn_test::make_points(Dist::Uniform, 300000, 43);
  const std::vector<Point> queries = knn_test::make_query_points(Dist::Duplicates, 20000, 44);
  const std::vector<Node> tree = knn_test::build_tree(points);
  const ScopedEnv env("KNN_DEVICES", device_list);
  for (int k : {1, 8, 100}) {
    const std::vector<int> want = knn_test::query_ok(&mpQueryAll, "mpQueryAll", queries, tree, k);
    for (size_t limit : {size_t{3} << 20, getTreeSize(300000) / 2, getTreeSize(300000) / 5}) {
      SCOPED_TRACE(std::string(device_list) + " k " + std::to_string(k) + " limit " +
                   std::to_string(limit));
      const ScopedEnv limit_env("KNN_DEVICE_MEMORY_LIMIT", std::to_string(limit).c_str());
      EXPECT_EQ(want, knn_test::query_ok(&queryAll, "queryAll", queries, tree, k));
    }
  }
}

TEST(MultiGpu, ClassicTreeSplitOverAForcedTwoWayList) {
  SKIP_WITHOUT_DEVICE();
  expect_split_tree_agrees("0,0");
}

TEST(MultiGpu, TwoDevicesClassicTreeSplit) {
  SKIP_WITHOUT_TWO_DEVICES();
  expect_split_tree_agrees("0,1");
  expect_split_tree_agrees("1,0,1");
}

TEST(MultiGpu, IndexSplitByTheEnvironment) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, 40009, 3, 6);
  IndexHandle cpu =
      knn_test::build_index(points, 3, options(KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE));
  const KnnResult want = knn_test::query_self(cpu.get(), 40009, 16, true);
  const ScopedEnv env("KNN_DEVICES", "0,0");
  IndexHandle gpu =
      knn_test::build_index(points, 3, options(KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE));
  ASSERT_TRUE(cpu && gpu);
  EXPECT_TRUE(knn_test::same_knn(want, knn_test::query_self(gpu.get(), 40009, 16, true)));
}

TEST(MultiGpu, GarbageInTheEnvironmentIsRefusedAndTouchesNoOutput) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<Point> points = knn_test::make_points(Dist::Uniform, 5000, 1);
  const std::vector<Node> tree = knn_test::build_tree(points);
  const std::vector<float> rows = knn_test::make_rows(Dist::Uniform, 5000, 3, 1);
  IndexHandle gpu = knn_test::build_index(rows, 3, options(KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE));
  ASSERT_TRUE(gpu);
  for (const char* garbage : {"gpu0", "0,,1", "0,999", "-1"}) {
    const ScopedEnv env("KNN_DEVICES", garbage);
    int status = -1;
    const std::vector<int> result = knn_test::query_with(&queryAll, points, tree, 4, &status);
    EXPECT_TRUE(knn_test::fails_with(status, KNN_ERR_INVALID_ARGUMENT,
                                     std::string("KNN_DEVICES is \"") + garbage + "\""));
    for (int r : result) ASSERT_EQ(r, knn_test::kSentinelInt);
    std::vector<int32_t> idx(5000 * 4, -7);
    EXPECT_TRUE(knn_test::fails_with(
        knn_index_query(gpu.get(), rows.data(), 5000, 4, idx.data(), nullptr, nullptr),
        KNN_ERR_INVALID_ARGUMENT, "KNN_DEVICES is"));
    EXPECT_EQ(idx, std::vector<int32_t>(idx.size(), -7));
  }
  // A device number beyond those present, in the options.
  knn_options o = options(KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE, {0, cuGetDeviceCount()});
  knn_index* index = nullptr;
  EXPECT_TRUE(knn_test::fails_with(knn_index_build(rows.data(), 5000, 3, &o, &index),
                                   KNN_ERR_INVALID_ARGUMENT, "opt->devices[1] is"));
  EXPECT_EQ(index, nullptr);
}

TEST(MultiGpu, TwoDevicesClassicQueryAllByDefaultAndByList) {
  SKIP_WITHOUT_TWO_DEVICES();
  {
    const ScopedEnv unset("KNN_DEVICES", nullptr);  // the default: every device once m is large
    expect_classic_agrees(100003, 2 * KNN_MIN_QUERIES_PER_DEVICE + 5, 8);
  }
  for (const char* list : {"all", "1,0", "0,1,1"}) {
    const ScopedEnv env("KNN_DEVICES", list);
    SCOPED_TRACE(list);
    expect_classic_agrees(20011, 100003, 16);
    EXPECT_EQ(cuGetDevice(), 0);
  }
}

// ---- float64: the _f64 calls split exactly like the float calls -------------------

// Float rows moved to a UTM-like offset (4.5*10^6 m), where only a double
// tells the points apart: the float64 index is the one answering.
std::vector<double> utm_rows(const std::vector<float>& rows) {
  std::vector<double> wide(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) wide[i] = 4.5e6 + rows[i];
  return wide;
}

IndexHandle build_index64(const std::vector<double>& points, int dim, const knn_options& o) {
  knn_index* index = nullptr;
  const int status = knn_index_build_f64(points.data(), static_cast<int64_t>(points.size()) / dim,
                                         dim, &o, &index);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return IndexHandle(status == KNN_OK ? index : nullptr);
}

// One call's outputs: rows of indices and squared distances, counts.
struct Rows64 {
  std::vector<int32_t> idx;
  std::vector<double> dist;
  std::vector<int64_t> counts;
};

::testing::AssertionResult same_rows64(const Rows64& want, const Rows64& got) {
  if (want.idx != got.idx) return ::testing::AssertionFailure() << "indices differ";
  if (want.counts != got.counts) return ::testing::AssertionFailure() << "counts differ";
  return knn_test::same_bits(want.dist, got.dist);
}

Rows64 query64(const knn_index* ix, const std::vector<double>& queries, int dim, int k) {
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  Rows64 r{std::vector<int32_t>(static_cast<size_t>(m) * k, -7),
           std::vector<double>(static_cast<size_t>(m) * k, -7.0),
           {}};
  EXPECT_EQ(knn_index_query_f64(ix, queries.data(), m, k, r.idx.data(), r.dist.data(), nullptr),
            KNN_OK)
      << knn_last_error();
  return r;
}

Rows64 query_self64(const knn_index* ix, int64_t n, int k, bool exclude) {
  Rows64 r{std::vector<int32_t>(static_cast<size_t>(n) * k, -7),
           std::vector<double>(static_cast<size_t>(n) * k, -7.0),
           {}};
  EXPECT_EQ(knn_index_query_self_f64(ix, k, exclude, r.idx.data(), r.dist.data()), KNN_OK)
      << knn_last_error();
  return r;
}

// Fixed rows of `width` (0: counting alone), then the counts of
// radius_count_f64 and the CSR rows of radius_fill_f64 (whose counting pass
// splits too).
std::vector<Rows64> radius64(const knn_index* ix, const std::vector<double>& queries, int dim,
                             double radius, int width, int fill_status = KNN_OK) {
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  std::vector<Rows64> r(3);
  r[0].idx.assign(static_cast<size_t>(m) * width, -7);
  r[0].dist.assign(r[0].idx.size(), -7.0);
  std::vector<int32_t> counts(static_cast<size_t>(m), -7);
  EXPECT_EQ(
      knn_index_radius_f64(ix, queries.data(), m, radius, width, width ? r[0].idx.data() : nullptr,
                           width ? r[0].dist.data() : nullptr, counts.data(), nullptr),
      KNN_OK)
      << knn_last_error();
  r[0].counts.assign(counts.begin(), counts.end());
  r[1].counts.assign(static_cast<size_t>(m), -7);
  EXPECT_EQ(knn_index_radius_count_f64(ix, queries.data(), m, radius, r[1].counts.data(), nullptr),
            KNN_OK)
      << knn_last_error();
  std::vector<int64_t> offsets(static_cast<size_t>(m) + 1);
  EXPECT_EQ(knn_offsets_from_counts(r[1].counts.data(), m, offsets.data()), KNN_OK);
  r[2].idx.assign(static_cast<size_t>(offsets.back()), -7);
  r[2].dist.assign(r[2].idx.size(), -7.0);
  EXPECT_EQ(knn_index_radius_fill_f64(ix, queries.data(), m, radius, offsets.data(),
                                      r[2].idx.data(), r[2].dist.data(), nullptr),
            fill_status)
      << knn_last_error();
  if (fill_status != KNN_OK) r[2] = Rows64{};
  return r;
}

// Every _f64 call on the CUDA index split over `devices` (and, with a call's
// own list, on the one-device index) against the CPU engine, bit for bit.
void expect_f64_calls_agree(const std::vector<double>& points, const std::vector<double>& queries,
                            int dim, int structure, std::initializer_list<int> devices, int k) {
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  IndexHandle one = build_index64(points, dim, options(KNN_BACKEND_CUDA, structure, {0}));
  IndexHandle split = build_index64(points, dim, options(KNN_BACKEND_CUDA, structure, devices));
  IndexHandle cpu = build_index64(points, dim, options(KNN_BACKEND_OPENMP, structure));
  ASSERT_TRUE(one && split && cpu);
  const Rows64 want = query64(cpu.get(), queries, dim, k);
  EXPECT_TRUE(same_rows64(want, query64(one.get(), queries, dim, k)));
  EXPECT_TRUE(same_rows64(want, query64(split.get(), queries, dim, k)));
  const knn_options three = options(KNN_BACKEND_AUTO, KNN_STRUCTURE_AUTO, {0, 0, 0});
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  Rows64 listed{std::vector<int32_t>(static_cast<size_t>(m) * k, -7),
                std::vector<double>(static_cast<size_t>(m) * k, -7.0),
                {}};
  EXPECT_EQ(knn_index_query_f64(one.get(), queries.data(), m, k, listed.idx.data(),
                                listed.dist.data(), &three),
            KNN_OK)
      << knn_last_error();
  EXPECT_TRUE(same_rows64(want, listed));
  for (bool exclude : {false, true})
    EXPECT_TRUE(same_rows64(query_self64(cpu.get(), n, k, exclude),
                            query_self64(split.get(), n, k, exclude)))
        << "exclude " << exclude;
  // The CUDA brute force fills CSR rows of at most kCudaBruteForceMaxRow
  // neighbours (the header, knn_index_query); longer rows are UNSUPPORTED.
  constexpr int64_t kCudaBruteForceMaxRow = 2048;
  for (int width : {0, k}) {
    std::vector<Rows64> r = radius64(cpu.get(), queries, dim, 0.25, width);
    const int64_t longest =
        r[1].counts.empty() ? 0 : *std::max_element(r[1].counts.begin(), r[1].counts.end());
    const bool refused = structure == KNN_STRUCTURE_BRUTE_FORCE && longest > kCudaBruteForceMaxRow;
    if (refused) r[2] = Rows64{};
    const std::vector<Rows64> got =
        radius64(split.get(), queries, dim, 0.25, width, refused ? KNN_ERR_UNSUPPORTED : KNN_OK);
    for (size_t call = 0; call < r.size(); ++call)
      EXPECT_TRUE(same_rows64(r[call], got[call])) << "width " << width << " call " << call;
  }
}

TEST(MultiGpu, Float64ForcedTwoWaySplitOnOneDeviceIsBitIdentical) {
  SKIP_WITHOUT_DEVICE();
  for (int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
    const int dim = structure == KNN_STRUCTURE_BRUTE_FORCE ? 5 : 3;
    for (int64_t n : {int64_t{7}, int64_t{20011}}) {
      for (Dist dist : {Dist::Uniform, Dist::Duplicates}) {
        const std::vector<double> points = utm_rows(knn_test::make_rows(dist, n, dim, 200 + n));
        for (int64_t m : {int64_t{3}, int64_t{5003}}) {
          const std::vector<double> queries =
              utm_rows(knn_test::make_query_rows(dist, m, dim, 9 + m));
          for (int k : {1, n < 30 ? static_cast<int>(n) + 3 : 33}) {
            SCOPED_TRACE(knn_test::describe(dist, n, m, k, 0, knn_test::structure_name(structure)) +
                         " float64");
            expect_f64_calls_agree(points, queries, dim, structure, {0, 0}, k);
          }
        }
      }
    }
  }
}

TEST(MultiGpu, TwoDevicesFloat64EveryStructureAgrees) {
  SKIP_WITHOUT_TWO_DEVICES();
  const std::vector<double> points = utm_rows(knn_test::make_rows(Dist::Duplicates, 30011, 3, 8));
  const std::vector<double> queries =
      utm_rows(knn_test::make_query_rows(Dist::Duplicates, 7001, 3, 9));
  for (int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE})
    for (std::initializer_list<int> devices :
         {std::initializer_list<int>{0, 1}, {1, 0}, {1, 1, 0, 0}})
      expect_f64_calls_agree(points, queries, 3, structure, devices, 12);
}

#if defined(KNN_TEST_WITH_CUDA)
// Device arrays of doubles in and out, on the index's device or (two
// devices) the other one, whose shares then move by peer copies of 8-byte
// distances and queries.
void expect_f64_device_arrays_agree(std::initializer_list<int> devices, int array_device) {
  const int64_t n = 20011, m = 4099;
  const int k = 9;
  const std::vector<double> points = utm_rows(knn_test::make_rows(Dist::Uniform, n, 3, 15));
  const std::vector<double> queries = utm_rows(knn_test::make_query_rows(Dist::Uniform, m, 3, 16));
  IndexHandle split =
      build_index64(points, 3, options(KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE, devices));
  IndexHandle cpu = build_index64(points, 3, options(KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE));
  ASSERT_TRUE(split && cpu);
  const Rows64 want = query64(cpu.get(), queries, 3, k);
  const Rows64 want_self = query_self64(cpu.get(), n, k, true);
  int previous = -1;
  ASSERT_EQ(cudaGetDevice(&previous), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(array_device), cudaSuccess);
  {
    knn_test::DeviceArray<double> q(queries);
    knn_test::DeviceArray<int32_t> idx(static_cast<size_t>(m) * k);
    knn_test::DeviceArray<double> dist(static_cast<size_t>(m) * k);
    knn_test::DeviceArray<int32_t> self_idx(static_cast<size_t>(n) * k);
    knn_test::DeviceArray<double> self_dist(static_cast<size_t>(n) * k);
    ASSERT_EQ(cudaSetDevice(previous), cudaSuccess);
    ASSERT_EQ(knn_index_query_f64(split.get(), q.get(), m, k, idx.get(), dist.get(), nullptr),
              KNN_OK)
        << knn_last_error();
    EXPECT_TRUE(same_rows64(want, Rows64{idx.to_host(static_cast<size_t>(m) * k),
                                         dist.to_host(static_cast<size_t>(m) * k),
                                         {}}));
    ASSERT_EQ(knn_index_query_self_f64(split.get(), k, 1, self_idx.get(), self_dist.get()), KNN_OK)
        << knn_last_error();
    EXPECT_TRUE(same_rows64(want_self, Rows64{self_idx.to_host(static_cast<size_t>(n) * k),
                                              self_dist.to_host(static_cast<size_t>(n) * k),
                                              {}}));
    int after = -1;
    ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
    EXPECT_EQ(after, previous) << "the caller's current device changed";
  }
  cudaSetDevice(previous);
}

TEST(MultiGpu, Float64DeviceArraysOnAForcedSplit) {
  SKIP_WITHOUT_DEVICE();
  expect_f64_device_arrays_agree({0, 0}, 0);
}

TEST(MultiGpu, TwoDevicesFloat64DeviceArraysOnEitherDevice) {
  SKIP_WITHOUT_TWO_DEVICES();
  for (std::initializer_list<int> devices : {std::initializer_list<int>{0, 1}, {1, 0}})
    for (int array_device : {0, 1}) {
      SCOPED_TRACE("arrays on device " + std::to_string(array_device));
      expect_f64_device_arrays_agree(devices, array_device);
    }
}
#endif

// A device allocation that fails inside a share: a status and every slot
// missing, or (where the engine recovers with smaller chunks) the answer.
TEST(MultiGpu, AFailingShareLeavesEveryOutputMissing) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<float> points = knn_test::make_rows(Dist::Uniform, 20011, 3, 2);
  ThreeIndexes ix(points, 3, KNN_STRUCTURE_KDTREE, {0, 0});
  ASSERT_TRUE(ix.ok());
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, 9001, 3, 3);
  const KnnResult want = knn_test::query_index(ix.cpu.get(), queries, 3, 8);
  for (const char* nth : {"1", "2", "3", "5"}) {
    std::vector<int32_t> idx(9001 * 8, -7);
    std::vector<float> dist(idx.size(), -7.0f);
    int status;
    {
      const ScopedEnv fault("KNN_FAULT_DEVICE_ALLOC", nth);
      status = knn_index_query(ix.split.get(), queries.data(), 9001, 8, idx.data(), dist.data(),
                               nullptr);
    }
    SCOPED_TRACE(std::string("allocation ") + nth + ": " + knn_last_error());
    if (status == KNN_OK) {
      EXPECT_TRUE(knn_test::same_rows(want.idx, std::vector<int>(idx.begin(), idx.end()), 9001, 8));
      continue;
    }
    EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY);
    for (int32_t i : idx) ASSERT_EQ(i, -1);
    for (float d : dist) ASSERT_EQ(d, std::numeric_limits<float>::infinity());
    // The next call works.
    EXPECT_TRUE(knn_test::same_knn(want, knn_test::query_index(ix.split.get(), queries, 3, 8)));
  }
}

}  // namespace
