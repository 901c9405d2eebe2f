// The CUDA brute-force index (cuda/brute_force/index_brute_force.cu) against the
// oracles (tests/support/oracle.h, tests/support/index_oracle.h) and the OpenMP brute force:
// dimensions 1..100 (compile-time and run-time paths), k from 1 to the
// warp-list limit and beyond n, few queries (the split-and-merge path) and
// many, every distribution of test_data.h, all-kNN with and without self,
// radius rows and counts, device-resident inputs and outputs, and a forced
// small device budget (chunks). The plan of index_memory_model.h is checked
// on the host; every device test skips where there is no CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../../cuda/cuda_index.h"
#include "../../cuda/index_memory_model.h"
#include "engine_calls.h"
#include "gpu_test_support.h"
#include "index_oracle.h"
#include "index_test_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

namespace plan = knn::cuda::index_memory;

std::unique_ptr<knn::IndexEngine> gpu_index(const std::vector<float>& points, int dim) {
  return knn::cuda::build_brute_force_index(points.empty() ? nullptr : points.data(),
                                            static_cast<int64_t>(points.size()) / dim, dim,
                                            knn::IndexParams{});
}

// ---- The plan, on the host ----------------------------------------------------------

TEST(BruteForcePlan, ListLengthIsTheRowPlusSelfCappedByThePoints) {
  EXPECT_EQ(plan::brute_force_list_k(5, false, 1000), 5);
  EXPECT_EQ(plan::brute_force_list_k(5, true, 1000), 6);
  EXPECT_EQ(plan::brute_force_list_k(5, true, 3), 3);
  EXPECT_EQ(plan::brute_force_list_k(0, false, 10), 0);
  EXPECT_EQ(plan::brute_force_list_k(10, false, 0), 0);
}

TEST(BruteForcePlan, SplitsOnlyWhenQueriesAreFewAndWithinTheCaps) {
  EXPECT_EQ(plan::brute_force_splits(int64_t{1} << 19, int64_t{1} << 20, 5), 1);
  EXPECT_EQ(plan::brute_force_splits(1, int64_t{1} << 20, 5), plan::kBruteMaxThreadSplits);
  EXPECT_EQ(plan::brute_force_splits(1, 1000, 5), 1);  // too few points to share out
  EXPECT_EQ(plan::brute_force_splits(1, 4097, 100), 5);
  EXPECT_EQ(plan::brute_force_splits(1, int64_t{1} << 24, 100), plan::kBruteMaxWarpSplits);
  EXPECT_EQ(plan::brute_force_splits(0, 100, 5), 1);
  int64_t previous = plan::brute_force_splits(1, 1 << 22, 8);
  for (int64_t m = 2; m <= (1 << 18); m = m * 3 / 2 + 1) {
    const int64_t s = plan::brute_force_splits(m, 1 << 22, 8);
    EXPECT_GE(s, 1);
    EXPECT_LE(s, previous) << "m=" << m;  // more queries never split more
    previous = s;
  }
}

// The engine plans with the device's latency-hiding threads (launch_policy.h):
// a smaller device never splits more, a larger one is held to the memory
// model's figure, so the estimate still bounds the engine's scratch.
TEST(BruteForcePlan, DeviceBusyThreadsNeverSplitMoreThanTheModel) {
  const int64_t n = int64_t{1} << 22;
  for (const int list_k : {5, 100})
    for (const int64_t m : {1, 7, 100, 4096, 100000}) {
      const int64_t model = plan::brute_force_splits(m, n, list_k);
      EXPECT_EQ(plan::brute_force_splits(m, n, list_k, plan::kBruteBusyThreads), model);
      EXPECT_EQ(plan::brute_force_splits(m, n, list_k, 64 * plan::kBruteBusyThreads), model)
          << "m=" << m << " list_k=" << list_k;
      int64_t previous = model;
      for (const int64_t busy :
           {int64_t{100000}, int64_t{15360}, int64_t{1000}, int64_t{1}, int64_t{0}}) {
        const int64_t s = plan::brute_force_splits(m, n, list_k, busy);
        EXPECT_GE(s, 1);
        EXPECT_LE(s, previous) << "m=" << m << " list_k=" << list_k << " busy=" << busy;
        previous = s;
      }
    }
  // A laptop GPU (20 SMs x 1536 threads / 2) splits 100 queries' points less.
  EXPECT_EQ(plan::brute_force_splits(100, n, 5), plan::kBruteMaxThreadSplits);
  EXPECT_EQ(plan::brute_force_splits(100, n, 5, 15360), 154);
}

TEST(BruteForcePlan, ScratchOnlyForSplitsAndCallBytesGrow) {
  EXPECT_EQ(plan::brute_force_scratch_per_query(1, 100), 0u);
  EXPECT_EQ(plan::brute_force_scratch_fixed(1), 0u);
  EXPECT_GT(plan::brute_force_scratch_per_query(3, 100),
            plan::brute_force_scratch_per_query(2, 100));
  // The estimate bounds the scratch of every chunk the engine can plan.
  for (const int list_k : {1, 5, 16, 17, 100, 2048})
    for (const int64_t m : {1, 7, 100, 4096, 100000})
      for (const int64_t n : {int64_t{2000}, int64_t{1} << 22}) {
        const int64_t s = plan::brute_force_splits(m, n, list_k);
        EXPECT_LE(
            m * plan::brute_force_scratch_per_query(s, list_k) + plan::brute_force_scratch_fixed(s),
            plan::brute_force_scratch_bound(m, list_k))
            << "m=" << m << " n=" << n << " list_k=" << list_k;
      }
  // ... and grows with every size.
  const size_t base = plan::brute_force_call_bytes(1000, 8, false, 3);
  EXPECT_GT(base, 0u);
  for (const int64_t m : {1000, 1001, 4096, 100000, 1 << 20})
    EXPECT_GE(plan::brute_force_call_bytes(m, 8, false, 3), base) << "m=" << m;
  size_t previous = 0;
  for (const int k : {1, 8, 16, 17, 64, 1024, 2048}) {
    const size_t bytes = plan::brute_force_call_bytes(1000, k, false, 3);
    EXPECT_GE(bytes, previous) << "k=" << k;
    previous = bytes;
  }
  EXPECT_GE(plan::brute_force_call_bytes(1000, 8, false, 30), base);
}

// ---- kNN against the oracle ----------------------------------------------------------

class BruteForceGpuDim : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { SKIP_WITHOUT_DEVICE(); }
};

// n = 0, 1, 2 (k > n), 1000 and 4097 (partial tiles); m = 1 and 7 run split
// into parts and merged, m = 300 mostly not; k up to the warp lists.
TEST_P(BruteForceGpuDim, KnnMatchesOracle) {
  const int dim = GetParam();
  constexpr int kMaxK = 100;
  for (const int64_t n : {0, 1, 2, 1000, 4097}) {
    for (const int64_t m : {1, 7, 300}) {
      const uint64_t seed = static_cast<uint64_t>(dim * 1000 + n + m);
      const std::vector<float> points = make_rows(Dist::Uniform, n, dim, seed);
      const std::vector<float> queries = make_query_rows(Dist::Uniform, m, dim, seed + 1);
      auto index = gpu_index(points, dim);
      const KnnResult all = oracle_knn(points.data(), n, queries.data(), m, dim, kMaxK);
      for (const int k : {1, 5, 32, kMaxK}) {
        SCOPED_TRACE(
            describe(Dist::Uniform, n, m, k, seed, ("dim=" + std::to_string(dim)).c_str()));
        const KnnResult got = engine_knn(*index, queries, k);
        EXPECT_TRUE(same_knn(first_columns(all, k), got));
        EXPECT_TRUE(
            kth_matches_double(points.data(), n, queries.data(), m, dim, k, got.idx.data()));
      }
    }
  }
}

// Every compile-time dim (static_dim.h), then run-time ones.
INSTANTIATE_TEST_SUITE_P(Dims, BruteForceGpuDim,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                           17, 32, 100));

// Long lists (one warp per query), split and unsplit, up to kMaxWarpK, and
// k beyond n (rows padded with -1 / +infinity).
TEST(BruteForceGpu, LongListsMatchOracle) {
  SKIP_WITHOUT_DEVICE();
  for (const int dim : {3, 16}) {
    const int64_t n = 4097;
    const std::vector<float> points = make_rows(Dist::Clustered, n, dim, 17);
    auto index = gpu_index(points, dim);
    for (const int64_t m : {1, 5, 2000}) {
      const std::vector<float> queries = make_query_rows(Dist::Clustered, m, dim, 18 + m);
      const KnnResult all =
          oracle_knn(points.data(), n, queries.data(), m, dim, knn::cuda::kMaxWarpK);
      for (const int k : {17, 1024, knn::cuda::kMaxWarpK}) {
        SCOPED_TRACE(
            describe(Dist::Clustered, n, m, k, 17, ("dim=" + std::to_string(dim)).c_str()));
        EXPECT_TRUE(same_knn(first_columns(all, k), engine_knn(*index, queries, k)));
      }
    }
  }
  // k = 3000 > n = 1000: the list is n long and the row padded.
  const std::vector<float> points = make_rows(Dist::Uniform, 1000, 5, 19);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 9, 5, 20);
  auto index = gpu_index(points, 5);
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), 1000, queries.data(), 9, 5, 3000),
                       engine_knn(*index, queries, 3000)));
}

TEST(BruteForceGpu, ListsBeyondTheWarpLimitAreRefusedWithAReason) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<float> points = make_rows(Dist::Uniform, 4097, 3, 21);
  auto index = gpu_index(points, 3);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 2, 3, 22);
  EXPECT_EQ(status_of([&] { engine_knn(*index, queries, knn::cuda::kMaxWarpK + 1); }),
            KNN_ERR_UNSUPPORTED);
}

class BruteForceGpuDist : public ::testing::TestWithParam<Dist> {
 protected:
  void SetUp() override { SKIP_WITHOUT_DEVICE(); }
};

// Duplicates, all-equal points, planes, lines, signed zeros, subnormal and
// overflowing distances: ties by index and +inf distances exactly as the oracle.
TEST_P(BruteForceGpuDist, KnnMatchesOracle) {
  for (const int dim : {3, 7, 13}) {
    const int64_t n = 1500;
    const std::vector<float> points = make_rows(GetParam(), n, dim, 31);
    auto index = gpu_index(points, dim);
    for (const int64_t m : {4, 600}) {
      const std::vector<float> queries = make_query_rows(GetParam(), m, dim, 32 + m);
      const KnnResult all = oracle_knn(points.data(), n, queries.data(), m, dim, 40);
      for (const int k : {1, 8, 40}) {
        SCOPED_TRACE(describe(GetParam(), n, m, k, 31, ("dim=" + std::to_string(dim)).c_str()));
        EXPECT_TRUE(same_knn(first_columns(all, k), engine_knn(*index, queries, k)));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, BruteForceGpuDist, ::testing::ValuesIn(all_dists()), DistName());

// ---- All-kNN and radius ----------------------------------------------------------------

TEST(BruteForceGpu, SelfMatchesOracle) {
  SKIP_WITHOUT_DEVICE();
  for (const Dist dist : {Dist::Uniform, Dist::Duplicates, Dist::Identical}) {
    for (const int dim : {2, 5, 20}) {
      for (const int64_t n : {1, 2, 999, 3000}) {  // 3000: split into parts
        const std::vector<float> points = make_rows(dist, n, dim, 41 + n);
        auto index = gpu_index(points, dim);
        for (const int k : {1, 4, 31}) {
          for (const bool exclude : {false, true}) {
            SCOPED_TRACE(describe(dist, n, n, k, 41 + n,
                                  (std::string("dim=") + std::to_string(dim) +
                                   (exclude ? " exclude_self" : " with self"))
                                      .c_str()));
            EXPECT_TRUE(same_knn(oracle_self(points.data(), n, dim, k, exclude),
                                 engine_self(*index, k, exclude)));
          }
        }
      }
    }
  }
}

TEST(BruteForceGpu, RadiusMatchesOracle) {
  SKIP_WITHOUT_DEVICE();
  struct Case {
    int dim;
    float radius;
  };
  for (const Case c : {Case{3, 0.3f}, Case{9, 1.1f}, Case{16, 1.6f}}) {
    const int64_t n = 3000;
    const std::vector<float> points = make_rows(Dist::Uniform, n, c.dim, 51);
    auto index = gpu_index(points, c.dim);
    for (const int64_t m : {3, 500}) {
      const std::vector<float> queries = make_query_rows(Dist::Uniform, m, c.dim, 52 + m);
      for (const int max_neighbors : {0, 5, 40}) {
        SCOPED_TRACE(describe(Dist::Uniform, n, m, max_neighbors, 51,
                              ("radius dim=" + std::to_string(c.dim)).c_str()));
        const RadiusResult want =
            oracle_radius(points.data(), n, queries.data(), m, c.dim, c.radius, max_neighbors);
        EXPECT_TRUE(same_radius(want, engine_radius(*index, queries, c.radius, max_neighbors)));
        // The case must exercise both full and truncated rows.
        if (max_neighbors == 5 && m == 500) {
          int over = 0;
          for (const int count : want.counts) over += count > max_neighbors;
          EXPECT_GT(over, 0);
        }
      }
    }
  }
}

// ---- Agreement with the OpenMP brute force --------------------------------------------

TEST(BruteForceGpu, AgreesWithOpenMPEngine) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 12;
  const int64_t n = 5000;
  const std::vector<float> points = make_rows(Dist::Clustered, n, dim, 61);
  const std::vector<float> queries = make_query_rows(Dist::Clustered, 700, dim, 62);
  auto gpu = gpu_index(points, dim);
  auto cpu = knn::omp::build_brute_force_index(points.data(), n, dim, knn::IndexParams{});
  for (const int k : {1, 10, 200}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    EXPECT_TRUE(same_knn(engine_knn(*cpu, queries, k), engine_knn(*gpu, queries, k)));
    EXPECT_TRUE(same_knn(engine_self(*cpu, k, true), engine_self(*gpu, k, true)));
  }
  EXPECT_TRUE(
      same_radius(engine_radius(*cpu, queries, 2.0f, 30), engine_radius(*gpu, queries, 2.0f, 30)));
}

// ---- Memory: device arrays in place, a small budget ------------------------------------

#if defined(KNN_TEST_WITH_CUDA)
TEST(BruteForceGpu, DeviceArraysAreUsedInPlace) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 6, k = 9;
  const int64_t n = 3000, m = 257;
  const std::vector<float> points = make_rows(Dist::Grid, n, dim, 71);
  const std::vector<float> queries = make_query_rows(Dist::Grid, m, dim, 72);
  DeviceArray<float> d_points(points), d_queries(queries);
  knn::IndexParams params;
  params.points_on_device = true;
  auto index = knn::cuda::build_brute_force_index(d_points.get(), n, dim, params);
  DeviceArray<int32_t> d_idx(static_cast<size_t>(m) * k);
  DeviceArray<float> d_dist(static_cast<size_t>(m) * k);
  knn::CallParams call;
  call.queries_on_device = call.outputs_on_device = true;
  index->knn(d_queries.get(), m, k, d_idx.get(), d_dist.get(), call);
  KnnResult got;
  got.m = m;
  got.k = k;
  for (const int32_t i : d_idx.to_host(static_cast<size_t>(m) * k)) got.idx.push_back(i);
  got.dist = d_dist.to_host(static_cast<size_t>(m) * k);
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, k), got));
  // Radius counts into a device array, host queries.
  DeviceArray<int32_t> d_counts(static_cast<size_t>(m));
  knn::CallParams outputs_only;
  outputs_only.outputs_on_device = true;
  index->radius(queries.data(), m, 1.5f, 0, nullptr, nullptr, d_counts.get(), outputs_only);
  const RadiusResult want = oracle_radius(points.data(), n, queries.data(), m, dim, 1.5f, 0);
  std::vector<int> counts;
  for (const int32_t c : d_counts.to_host(static_cast<size_t>(m))) counts.push_back(c);
  EXPECT_EQ(counts, want.counts);
}
#endif

// A budget that holds a few hundred queries of k = 1000 at a time: many
// chunks, each split into parts, on both pipeline slots.
TEST(BruteForceGpu, SmallDeviceBudgetRunsInChunks) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 4, k = 1000;
  const int64_t n = 4097, m = 3000;
  const std::vector<float> points = make_rows(Dist::Duplicates, n, dim, 81);
  const std::vector<float> queries = make_query_rows(Dist::Duplicates, m, dim, 82);
  auto index = gpu_index(points, dim);
  knn::CallParams call;
  call.device_memory_limit = size_t{60} << 20;
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, k),
                       engine_knn(*index, queries, k, call)));
  call.device_memory_limit = size_t{1} << 20;  // not even one query's staging
  EXPECT_EQ(status_of([&] { engine_knn(*index, queries, k, call); }), KNN_ERR_DEVICE_OUT_OF_MEMORY);
}

// ---- Through the public API ----------------------------------------------------------------

TEST(BruteForceGpu, PublicApiServesCudaBruteForce) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 9;
  const int64_t n = 2500, m = 130;
  const std::vector<float> points = make_rows(Dist::LargeOffset, n, dim, 91);
  const std::vector<float> queries = make_query_rows(Dist::LargeOffset, m, dim, 92);
  IndexHandle index =
      build_index(points, dim, IndexConfig{KNN_BACKEND_CUDA, KNN_STRUCTURE_BRUTE_FORCE});
  ASSERT_TRUE(index);
  int64_t size = 0;
  int got_dim = 0, backend = 0, structure = 0;
  ASSERT_EQ(knn_index_info(index.get(), &size, &got_dim, &backend, &structure), KNN_OK);
  EXPECT_EQ(size, n);
  EXPECT_EQ(got_dim, dim);
  EXPECT_EQ(backend, KNN_BACKEND_CUDA);
  EXPECT_EQ(structure, KNN_STRUCTURE_BRUTE_FORCE);
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, 7),
                       query_index(index.get(), queries, dim, 7)));
  EXPECT_TRUE(
      same_knn(oracle_self(points.data(), n, dim, 3, true), query_self(index.get(), n, 3, true)));
  EXPECT_TRUE(same_radius(oracle_radius(points.data(), n, queries.data(), m, dim, 300.0f, 4),
                          radius_index(index.get(), queries, dim, 300.0f, 4)));
}

}  // namespace
}  // namespace knn_test
