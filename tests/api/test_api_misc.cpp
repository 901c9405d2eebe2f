// The parts of the ABI around the searches: status texts, version, the
// per-thread last error, the index and quadtree entry points of this release,
// the CUDA entry points without a device, and the memory helpers.
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "test_data.h"

namespace knn_test {
namespace {

// ---- Status texts and version -------------------------------------------------------

TEST(StatusString, EveryCodeHasItsOwnStaticText) {
  const int codes[] = {KNN_OK,
                       KNN_ERR_INVALID_ARGUMENT,
                       KNN_ERR_NONFINITE_INPUT,
                       KNN_ERR_HOST_OUT_OF_MEMORY,
                       KNN_ERR_DEVICE_OUT_OF_MEMORY,
                       KNN_ERR_NO_DEVICE,
                       KNN_ERR_DEVICE,
                       KNN_ERR_INVALID_TREE,
                       KNN_ERR_UNSUPPORTED,
                       KNN_ERR_CANCELLED,
                       KNN_ERR_INTERNAL};
  std::set<std::string> seen;
  for (int code : codes) {
    const char* text = knn_status_string(code);
    ASSERT_NE(text, nullptr) << "code " << code;
    EXPECT_GT(std::strlen(text), 0u) << "code " << code;
    EXPECT_EQ(std::string(text).find("unknown status"), std::string::npos) << "code " << code;
    EXPECT_TRUE(seen.insert(text).second) << "code " << code << " shares its text: " << text;
    EXPECT_EQ(text, knn_status_string(code)) << "not a static text";
  }
}

TEST(StatusString, ValuesAreTheReleasedOnes) {
  EXPECT_EQ(KNN_OK, 0);
  EXPECT_EQ(KNN_ERR_INVALID_ARGUMENT, 1);
  EXPECT_EQ(KNN_ERR_NONFINITE_INPUT, 2);
  EXPECT_EQ(KNN_ERR_HOST_OUT_OF_MEMORY, 3);
  EXPECT_EQ(KNN_ERR_DEVICE_OUT_OF_MEMORY, 4);
  EXPECT_EQ(KNN_ERR_NO_DEVICE, 5);
  EXPECT_EQ(KNN_ERR_DEVICE, 6);
  EXPECT_EQ(KNN_ERR_INVALID_TREE, 7);
  EXPECT_EQ(KNN_ERR_UNSUPPORTED, 8);
  EXPECT_EQ(KNN_ERR_CANCELLED, 9);
  EXPECT_EQ(KNN_ERR_INTERNAL, 10);
}

TEST(StatusString, UnknownCodesSaySo) {
  for (int code : {-1, 11, 12, 99, 1000, INT_MIN, INT_MAX}) {
    const char* text = knn_status_string(code);
    ASSERT_NE(text, nullptr) << "code " << code;
    EXPECT_NE(std::string(text).find("unknown status"), std::string::npos)
        << "code " << code << ": " << text;
  }
}

TEST(Version, MatchesTheHeader) {
  EXPECT_EQ(knn_version(), KNN_VERSION_NUMBER);
  EXPECT_EQ(KNN_VERSION_NUMBER,
            KNN_VERSION_MAJOR * 10000 + KNN_VERSION_MINOR * 100 + KNN_VERSION_PATCH);
}

// ---- knn_last_error -------------------------------------------------------------------

int fail_once() {
  std::vector<Node> tree(4);
  return mpBuildKdTree(nullptr, 4, tree.data());
}

int succeed_once() {
  const std::vector<Point> points = make_points(Dist::Uniform, 4, 1);
  std::vector<Node> tree(4);
  return mpBuildKdTree(points.data(), 4, tree.data());
}

TEST(LastError, EmptyAfterSuccessAndNeverNull) {
  ASSERT_NE(knn_last_error(), nullptr);
  ASSERT_EQ(fail_once(), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(knn_last_error(), "");
  ASSERT_EQ(succeed_once(), KNN_OK);
  ASSERT_NE(knn_last_error(), nullptr);
  EXPECT_STREQ(knn_last_error(), "");
}

TEST(LastError, ReadingTheStatusTextKeepsTheMessage) {
  // status = f(); print(knn_status_string(status), knn_last_error()) must work.
  const int status = fail_once();
  ASSERT_EQ(status, KNN_ERR_INVALID_ARGUMENT);
  const std::string first = knn_last_error();
  ASSERT_FALSE(first.empty());
  knn_status_string(status);
  EXPECT_EQ(knn_last_error(), first) << "knn_status_string cleared the message";
  EXPECT_EQ(knn_last_error(), first) << "reading the message cleared it";
}

TEST(LastError, IsPerThread) {
  ASSERT_EQ(fail_once(), KNN_ERR_INVALID_ARGUMENT);
  const std::string mine = knn_last_error();
  ASSERT_FALSE(mine.empty());

  std::string fresh_thread, after_success, after_failure;
  std::thread([&] {
    const char* text = knn_last_error();
    fresh_thread = text ? text : "(NULL)";
    succeed_once();
    after_success = knn_last_error();
    std::vector<Node> tree(4);
    std::vector<Point> points(4);
    points[2].p[1] = std::numeric_limits<float>::quiet_NaN();
    mpBuildKdTree(points.data(), 4, tree.data());
    after_failure = knn_last_error();
  }).join();
  EXPECT_EQ(fresh_thread, "") << "a thread that has not called the library has no error";
  EXPECT_EQ(after_success, "");
  EXPECT_NE(after_failure.find("point 2"), std::string::npos) << after_failure;
  EXPECT_EQ(knn_last_error(), mine) << "another thread's calls changed this thread's error";
}

TEST(LastError, ManyThreadsKeepTheirOwnMessages) {
  constexpr int kThreads = 8;
  std::vector<std::string> got(kThreads);
  std::vector<int> status(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &got, &status] {
      std::vector<Point> points = make_points(Dist::Uniform, 64, t);
      points[10 + t].p[0] = std::numeric_limits<float>::infinity();
      std::vector<Node> tree(64);
      for (int round = 0; round < 50; ++round) {
        status[t] = mpBuildKdTree(points.data(), 64, tree.data());
        got[t] = knn_last_error();
        if (got[t].find("point " + std::to_string(10 + t)) == std::string::npos) return;
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(status[t], KNN_ERR_NONFINITE_INPUT) << "thread " << t;
    EXPECT_NE(got[t].find("point " + std::to_string(10 + t)), std::string::npos)
        << "thread " << t << ": " << got[t];
  }
}

// ---- Index and quadtree API: not served by this release ----------------------------------
// (Replace these with behaviour tests when the engines land.)

void expect_unsupported_or_invalid(int status, const char* call) {
  EXPECT_TRUE(status == KNN_ERR_UNSUPPORTED || status == KNN_ERR_INVALID_ARGUMENT)
      << call << ": " << status_text(status);
  EXPECT_STRNE(knn_last_error(), "") << call;
}

// Regression (fuzz/fuzz_api_args): sizes beyond any index overflowed the
// byte arithmetic; they now saturate, and the largest servable sizes still
// get finite, growing answers.
TEST(IndexApi, EstimatesSaturateBeyondAnyIndex) {
  const int64_t max_n = INT32_MAX;
  EXPECT_EQ(knn_estimate_build_bytes(INT64_MAX, KNN_INDEX_MAX_DIM, nullptr), SIZE_MAX);
  EXPECT_EQ(knn_estimate_build_bytes(max_n + 1, 3, nullptr), SIZE_MAX);
  EXPECT_EQ(knn_estimate_build_bytes(1000, KNN_INDEX_MAX_DIM + 1, nullptr), SIZE_MAX);
  EXPECT_EQ(knn_estimate_query_bytes(INT64_MAX, 100, 1000, 3, nullptr), SIZE_MAX);
  EXPECT_EQ(knn_estimate_query_bytes(INT64_MAX, INT32_MAX, INT64_MAX, INT32_MAX, nullptr),
            SIZE_MAX);
  const size_t widest = knn_estimate_build_bytes(max_n, KNN_INDEX_MAX_DIM, nullptr);
  EXPECT_LT(widest, SIZE_MAX);
  EXPECT_GT(widest, knn_estimate_build_bytes(max_n, 16, nullptr));
  const size_t most = knn_estimate_query_bytes(max_n, 1024, max_n, KNN_INDEX_MAX_DIM, nullptr);
  EXPECT_LT(most, SIZE_MAX);
  EXPECT_GT(most, knn_estimate_query_bytes(max_n, 1024, max_n, 16, nullptr));
}

TEST(IndexApi, HandleCallsFailCleanlyWithoutAnIndex) {
  const std::vector<float> queries = make_rows(Dist::Uniform, 10, 3, 2);
  std::vector<int32_t> ind(10 * 4, kSentinelInt);
  std::vector<float> sq(10 * 4, -7.0f);
  std::vector<int32_t> counts(10, kSentinelInt);
  int64_t n = -5;
  int dim = -5, backend = -5, structure = -5;
  expect_unsupported_or_invalid(knn_index_info(nullptr, &n, &dim, &backend, &structure),
                                "knn_index_info");
  expect_unsupported_or_invalid(
      knn_index_query(nullptr, queries.data(), 10, 4, ind.data(), sq.data(), nullptr),
      "knn_index_query");
  expect_unsupported_or_invalid(knn_index_query_self(nullptr, 4, 1, ind.data(), sq.data()),
                                "knn_index_query_self");
  expect_unsupported_or_invalid(knn_index_radius(nullptr, queries.data(), 10, 0.5f, 4, ind.data(),
                                                 sq.data(), counts.data(), nullptr),
                                "knn_index_radius");
  EXPECT_EQ(ind, std::vector<int32_t>(40, kSentinelInt));
  EXPECT_EQ(sq, std::vector<float>(40, -7.0f));
  EXPECT_EQ(counts, std::vector<int32_t>(10, kSentinelInt));
}

TEST(IndexApi, FreeOfNullIsFine) {
  ASSERT_EQ(fail_once(), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_index_free(nullptr), KNN_OK);
  EXPECT_STREQ(knn_last_error(), "");
  ASSERT_EQ(fail_once(), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_quadtree_free(nullptr), KNN_OK);
  EXPECT_STREQ(knn_last_error(), "");
}

TEST(IndexApi, OptionsInitSetsTheDefaults) {
  knn_options_init(nullptr);  // ignored, no crash
  knn_options opt;
  std::memset(&opt, 0x5c, sizeof opt);
  knn_options_init(&opt);
  // Version 1 only: a caller built against the 40-byte struct gets no write past it.
  const size_t v1_end = offsetof(knn_options, device_memory_limit) + sizeof(size_t);
  EXPECT_EQ(opt.struct_size, v1_end);
  EXPECT_EQ(opt.backend, KNN_BACKEND_AUTO);
  EXPECT_EQ(opt.device, -1);
  EXPECT_EQ(opt.structure, KNN_STRUCTURE_AUTO);
  EXPECT_EQ(opt.leaf_size, 0);
  EXPECT_EQ(opt.threads, 0);
  EXPECT_EQ(opt.device_memory_limit, 0u);
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&opt);
  for (size_t b = v1_end; b < sizeof opt; ++b) EXPECT_EQ(bytes[b], 0x5c) << "byte " << b;

  knn_options_init_v2(nullptr);  // ignored, no crash
  std::memset(&opt, 0x5c, sizeof opt);
  knn_options_init_v2(&opt);
  EXPECT_EQ(opt.struct_size, sizeof(knn_options));
  EXPECT_EQ(opt.device, -1);
  EXPECT_EQ(opt.device_memory_limit, 0u);
  EXPECT_EQ(opt.device_count, 0);
  for (int d : opt.devices) EXPECT_EQ(d, -1);
}

TEST(IndexApi, EstimatesArePositiveAndGrow) {
  const int64_t ns[] = {1, 100, 10000, 1000000, 100000000, 3000000000LL};
  for (int dim : {1, 3, 16}) {
    size_t previous = 0;
    for (int64_t n : ns) {
      const size_t bytes = knn_estimate_build_bytes(n, dim, nullptr);
      EXPECT_GT(bytes, 0u) << "n " << n << " dim " << dim;
      EXPECT_GE(bytes, previous) << "n " << n << " dim " << dim;
      previous = bytes;
    }
    EXPECT_GT(knn_estimate_build_bytes(3000000000LL, dim, nullptr),
              knn_estimate_build_bytes(1, dim, nullptr));
    EXPECT_GT(knn_estimate_build_bytes(3000000000LL, dim, nullptr), size_t{3000000000ULL} * dim)
        << "a device index over 3e9 points holds them (64-bit sizes)";
  }
  EXPECT_LE(knn_estimate_build_bytes(100000, 3, nullptr),
            knn_estimate_build_bytes(100000, 16, nullptr));
  size_t previous = 0;
  for (int64_t m : ns) {
    const size_t bytes = knn_estimate_query_bytes(m, 8, 100000, 3, nullptr);
    EXPECT_GT(bytes, 0u) << "m " << m;
    EXPECT_GE(bytes, previous) << "m " << m;
    previous = bytes;
  }
  previous = 0;
  for (int k : {1, 2, 8, 100, 1024}) {
    const size_t bytes = knn_estimate_query_bytes(100000, k, 100000, 3, nullptr);
    EXPECT_GE(bytes, previous) << "k " << k;
    previous = bytes;
  }
  EXPECT_GT(knn_estimate_query_bytes(100000, 1024, 100000, 3, nullptr),
            knn_estimate_query_bytes(100000, 1, 100000, 3, nullptr));
  EXPECT_GT(knn_estimate_query_bytes(100000000, 100, 100000000, 3, nullptr), size_t{40000000000ULL})
      << "1e8 queries x 100 neighbours are 4e10 bytes of indices alone";
}

// ---- CUDA entry points on a machine without a device --------------------------------------

class NoDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuGetDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  }
};

TEST_F(NoDevice, DeviceQueriesSayNone) {
  EXPECT_EQ(cuGetDeviceCount(), 0);
  EXPECT_EQ(cuGetDevice(), -1);
  EXPECT_EQ(getFreeBytesOnGpu(), 0u);
  EXPECT_EQ(cuSetDevice(0), KNN_ERR_NO_DEVICE);
  EXPECT_STRNE(knn_last_error(), "");
  const int status = cuSetDevice(-1);
  EXPECT_TRUE(status == KNN_ERR_NO_DEVICE || status == KNN_ERR_INVALID_ARGUMENT)
      << status_text(status);
  EXPECT_EQ(cuSetDevice(1), KNN_ERR_NO_DEVICE);
}

TEST_F(NoDevice, CudaOnlyCallsFailAndAutomaticOnesRunOnTheCpu) {
  const std::vector<Point> points = make_points(Dist::Clustered, 500, 3);
  const std::vector<Point> queries = make_query_points(Dist::Clustered, 100, 4);
  int status = -1;
  build_with(&cuBuildKdTree, points, &status);
  EXPECT_EQ(status, KNN_ERR_NO_DEVICE) << status_text(status);
  EXPECT_STRNE(knn_last_error(), "");

  const std::vector<Node> tree = build_tree(points);
  std::vector<int> result = query_with(&cuQueryAll, queries, tree, 6, &status);
  EXPECT_EQ(status, KNN_ERR_NO_DEVICE) << status_text(status);
  EXPECT_STRNE(knn_last_error(), "");
  const bool untouched = result == std::vector<int>(600, kSentinelInt);
  const bool all_missing = result == std::vector<int>(600, -1);
  EXPECT_TRUE(untouched || all_missing) << "a failed call leaves the output untouched or all -1";

  const std::vector<Node> auto_tree = build_with(&buildKdTree, points, &status);
  EXPECT_EQ(status, KNN_OK) << status_text(status);
  EXPECT_EQ(std::memcmp(auto_tree.data(), tree.data(), tree.size() * sizeof(Node)), 0);
  const std::vector<int> auto_result = query_ok(&queryAll, "queryAll", queries, tree, 6);
  const std::vector<int> cpu_result = query_ok(&mpQueryAll, "mpQueryAll", queries, tree, 6);
  EXPECT_EQ(auto_result, cpu_result);
}

// ---- Memory helpers --------------------------------------------------------------------------

const int kCounts[] = {0, 1, 2, 3, 100, 1000, 4096, 4097, 65536, 1000000, 100000000, INT_MAX};
const int kKsForMemory[] = {1, 2, 8, 32, 33, 100, 1024, 4096};

// f is non-decreasing over `values` and positive where the value is positive.
template <class F, class Values>
void expect_monotone(const char* what, const Values& values, F f) {
  size_t previous = 0;
  bool first = true;
  for (int v : values) {
    const size_t bytes = f(v);
    if (v > 0) {
      EXPECT_GT(bytes, 0u) << what << "(" << v << ")";
    }
    if (!first) {
      EXPECT_GE(bytes, previous) << what << " shrinks at " << v;
    }
    previous = bytes;
    first = false;
  }
}

TEST(MemoryHelpers, TreeSizeIs24BytesPerNodeIn64Bits) {
  for (int n : kCounts) EXPECT_EQ(getTreeSize(n), size_t{24} * static_cast<size_t>(n)) << n;
  EXPECT_EQ(getTreeSize(INT_MAX), size_t{51539607528ULL});
  for (int n : {-1, -100, INT_MIN}) EXPECT_EQ(getTreeSize(n), 0u) << n;
}

TEST(MemoryHelpers, NegativeArgumentsGiveZero) {
  for (int bad : {-1, INT_MIN}) {
    EXPECT_EQ(getNeededBytesForBuildingKdTree(bad), 0u);
    EXPECT_EQ(getNeededBytesForQueryAll(bad, 8, 1000), 0u);
    EXPECT_EQ(getNeededBytesForQueryAll(1000, bad, 1000), 0u);
    EXPECT_EQ(getNeededBytesForQueryAll(1000, 8, bad), 0u);
    EXPECT_EQ(getNeededBytesInSearch(bad, 8, 1000, 0, 0), 0u);
    EXPECT_EQ(getNeededBytesInSearch(1000, bad, 1000, 0, 0), 0u);
    EXPECT_EQ(getNeededBytesInSearch(1000, 8, bad, 0, 0), 0u);
    EXPECT_EQ(getNeededBytesInSearch(1000, 8, 1000, bad, 0), 0u);
    EXPECT_EQ(getNeededBytesInSearch(1000, 8, 1000, 0, bad), 0u);
  }
}

TEST(MemoryHelpers, BuildBytesArePositiveMonotoneAnd64Bit) {
  expect_monotone("getNeededBytesForBuildingKdTree", kCounts,
                  [](int n) { return getNeededBytesForBuildingKdTree(n); });
  // The device holds at least the points (12 bytes each) while it builds.
  EXPECT_GE(getNeededBytesForBuildingKdTree(INT_MAX), size_t{12} * INT_MAX);
  EXPECT_GE(getNeededBytesForBuildingKdTree(100000000), size_t{12} * 100000000);
}

TEST(MemoryHelpers, QueryBytesArePositiveMonotoneInEachArgumentAnd64Bit) {
  for (int k : {1, 8, 100})
    for (int n_tree : {1, 1000, 1000000})
      expect_monotone("getNeededBytesForQueryAll(n_qp)", kCounts,
                      [&](int n_qp) { return getNeededBytesForQueryAll(n_qp, k, n_tree); });
  for (int n_qp : {1, 1000, 1000000})
    for (int n_tree : {1, 1000, 1000000})
      expect_monotone("getNeededBytesForQueryAll(k)", kKsForMemory,
                      [&](int k) { return getNeededBytesForQueryAll(n_qp, k, n_tree); });
  for (int n_qp : {1, 1000, 1000000})
    for (int k : {1, 8, 100})
      expect_monotone("getNeededBytesForQueryAll(n_tree)", kCounts,
                      [&](int n_tree) { return getNeededBytesForQueryAll(n_qp, k, n_tree); });
  // The whole call at once: 1e8 queries x 100 neighbours are 4e10 bytes of
  // result indices alone, so no 32-bit wrap and no chunked figure.
  EXPECT_GT(getNeededBytesForQueryAll(100000000, 100, 100000000), size_t{40000000000ULL});
  EXPECT_GE(getNeededBytesForQueryAll(INT_MAX, 1024, 1), size_t{4} * 1024 * INT_MAX);
  // The device holds the tree for a query.
  EXPECT_GE(getNeededBytesForQueryAll(1, 1, 100000000), size_t{12} * 100000000);
}

TEST(MemoryHelpers, SearchBytesArePositiveAndMonotone) {
  expect_monotone("getNeededBytesInSearch(n_qp)", kCounts,
                  [](int n_qp) { return getNeededBytesInSearch(n_qp, 8, 100000, 0, 0); });
  expect_monotone("getNeededBytesInSearch(k)", kKsForMemory,
                  [](int k) { return getNeededBytesInSearch(100000, k, 100000, 0, 0); });
  expect_monotone("getNeededBytesInSearch(n_tree)", kCounts,
                  [](int n_tree) { return getNeededBytesInSearch(100000, 8, n_tree, 0, 0); });
  for (int threads : {0, 32, 128, 1024})
    for (int blocks : {0, 1, 80, 1000})
      EXPECT_GT(getNeededBytesInSearch(100000, 8, 100000, threads, blocks), 0u)
          << threads << " x " << blocks;
}

}  // namespace
}  // namespace knn_test
