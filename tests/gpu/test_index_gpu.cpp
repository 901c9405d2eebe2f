// The CUDA bucket kd-tree (cuda/kdtree/index_kdtree*.cu) and the CUDA helpers every
// index engine shares (cuda/core/index_support.cu, cuda/core/query_chunks.cu), against
// the oracles (tests/support/oracle.h, tests/support/index_oracle.h) and the OpenMP kd-tree,
// bit for bit: dims 1..32 (compile-time and run-time distance loops), k from
// 1 past the register, warp and heap list limits and beyond n, every data
// shape of test_data.h, all-kNN with and without self, radius rows and
// counts, leaf sizes, device-resident inputs and outputs, a forced small
// device budget. The tree's shape arithmetic and the memory model are
// checked on the host (its box bound, common/float_math.h, in
// test_float_math); every device test skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../../cuda/cuda_index.h"
#include "../../cuda/index_memory_model.h"
#include "../../cuda/kdtree/bucket_tree_shape.h"
#include "../../cuda/kdtree/index_kdtree_memory.h"
#include "../../engine/device_budget.h"
#include "engine_calls.h"
#include "gpu_test_support.h"
#include "index_oracle.h"
#include "index_test_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "scoped_env.h"
#include "test_data.h"
#include "timing.h"

#if defined(KNN_TEST_WITH_CUDA)
#include <cuda_runtime.h>

#include "../../cuda/kdtree/index_kdtree.cuh"
#endif

namespace knn_test {
namespace {

using Engine = std::unique_ptr<knn::IndexEngine>;

Engine gpu_tree(const std::vector<float>& points, int dim, int leaf_size = 0) {
  knn::IndexParams params;
  params.leaf_size = leaf_size;
  return knn::cuda::build_kdtree_index(points.empty() ? nullptr : points.data(),
                                       static_cast<int64_t>(points.size()) / dim, dim, params);
}

Engine cpu_tree(const std::vector<float>& points, int dim) {
  knn::IndexParams params;
  params.leaf_size = knn::cuda::kKdTreeDefaultLeafSize;
  return knn::omp::build_kdtree_index(points.empty() ? nullptr : points.data(),
                                      static_cast<int64_t>(points.size()) / dim, dim, params);
}

// ---- The tree's shape and bound, on the host ------------------------------------------

TEST(KdTreeShape, LevelsAreTheFewestThatKeepLeavesWithinTheLeafSize) {
  EXPECT_EQ(knn::cuda::bucket_tree_levels(0, 32), 0);
  EXPECT_EQ(knn::cuda::bucket_tree_levels(32, 32), 0);
  EXPECT_EQ(knn::cuda::bucket_tree_levels(33, 32), 1);
  EXPECT_EQ(knn::cuda::bucket_tree_levels(10000000, 32), 19);  // 10^7 / 2^19 = 19.07
  for (const int64_t n : {1, 2, 3, 31, 64, 65, 1000, 4097, 100003})
    for (const int leaf : {1, 2, 5, 32}) {
      const int levels = knn::cuda::bucket_tree_levels(n, leaf);
      const int64_t largest = (n + (int64_t{1} << levels) - 1) >> levels;
      EXPECT_LE(largest, leaf) << "n=" << n << " leaf=" << leaf;
      if (levels > 0) {
        const int64_t above = (n + (int64_t{1} << (levels - 1)) - 1) >> (levels - 1);
        EXPECT_GT(above, leaf) << "n=" << n << " leaf=" << leaf << ": one level too many";
      }
    }
}

TEST(KdTreeShape, SegmentsTileThePointsAndChildrenSplitTheirParent) {
  for (const int64_t n : {1, 2, 3, 7, 100, 4097, 100003})
    for (const int leaf : {1, 2, 32}) {
      const int levels = knn::cuda::bucket_tree_levels(n, leaf);
      for (int level = 0; level <= levels; ++level) {
        const int64_t nodes = int64_t{1} << level;
        ASSERT_EQ(knn::cuda::segment_start(n, level, 0), 0);
        ASSERT_EQ(knn::cuda::segment_start(n, level, nodes), n);
        for (int64_t q = 0; q < nodes; ++q) {
          const int64_t start = knn::cuda::segment_start(n, level, q);
          const int64_t end = knn::cuda::segment_start(n, level, q + 1);
          ASSERT_LE(start, end);
          if (leaf >= 2) {
            ASSERT_LT(start, end) << "empty node with leaf_size >= 2";
          }
          if (level < levels) {  // children: the parent's segment in halves
            ASSERT_EQ(knn::cuda::segment_start(n, level + 1, 2 * q), start);
            ASSERT_EQ(knn::cuda::segment_start(n, level + 1, 2 * q + 2), end);
            const int64_t mid = knn::cuda::segment_start(n, level + 1, 2 * q + 1);
            ASSERT_LE(std::abs((mid - start) - (end - mid)), 1) << "n=" << n << " q=" << q;
          }
          for (int64_t j = start; j < end; ++j)
            ASSERT_EQ(knn::cuda::segment_of(n, level, j), q) << "n=" << n << " j=" << j;
        }
      }
    }
}

TEST(KdTreeMemory, EstimatesGrowAndCoverTheEnginesBufferList) {
  namespace plan = knn::cuda::index_memory;
  const int leaf = knn::cuda::kKdTreeDefaultLeafSize;
  // Whole pages: equal for small sizes, never smaller for larger ones.
  size_t last = 0;
  for (const int64_t n : {0, 1, 1000, 100003, 10000000}) {
    const size_t build = knn::cuda::kdtree_build_bytes(n, 3, leaf);
    EXPECT_GE(build, last);
    EXPECT_GE(build, knn::cuda::kdtree_resident_bytes(n, 3, leaf));
    EXPECT_GE(plan::kdtree_build_bytes(n, 3), build);
    last = build;
  }
  EXPECT_LT(knn::cuda::kdtree_build_bytes(100003, 3, leaf),
            knn::cuda::kdtree_build_bytes(10000000, 3, leaf));
  EXPECT_LT(knn::cuda::kdtree_build_bytes(10000000, 3, leaf),
            knn::cuda::kdtree_build_bytes(10000000, 4, leaf));
  EXPECT_LT(knn::cuda::kdtree_query_bytes(1000, 5, 100003, 3, leaf),
            knn::cuda::kdtree_query_bytes(1000, 6, 100003, 3, leaf));
  EXPECT_LT(knn::cuda::kdtree_query_bytes(1000, 5, 100003, 3, leaf),
            knn::cuda::kdtree_query_bytes(1001, 5, 100003, 3, leaf));
  // Beyond the warp lists (k + 1 for exclude_self) the heaps of both slots count.
  const int warp_k = knn::cuda::kMaxWarpK;
  EXPECT_GT(knn::cuda::kdtree_query_bytes(1000, warp_k, 100003, 3, leaf),
            knn::cuda::kdtree_query_bytes(1000, warp_k - 1, 100003, 3, leaf) +
                2 * 1000 * size_t{8} * warp_k);
  for (const int structure : {KNN_STRUCTURE_AUTO, KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID})
    EXPECT_GE(plan::query_bytes(structure, 1 << 20, 30, 10000000, 3),
              knn::cuda::kdtree_query_bytes(1 << 20, 30, 10000000, 3, leaf));
}

TEST(KdTreeMemory, DeviceArrayChunksTakeNoMoreThanTheSameCallFromHostArrays) {
  using knn::cuda::kdtree_call_bytes_per_query;
  using knn::cuda::kdtree_max_chunk;
  knn::CallParams host_call;
  knn::CallParams device_call;
  device_call.queries_on_device = device_call.outputs_on_device = true;
  knn::CallParams mixed_call;  // device queries (knn_self), host rows
  mixed_call.queries_on_device = true;
  for (const int dim : {1, 3, 5, 12, 32})
    for (const int k : {1, 5, 30, 1000})
      for (const bool exclude_self : {false, true}) {
        const int k_search = exclude_self ? k + 1 : k;
        EXPECT_EQ(kdtree_max_chunk(dim, k_search, k, exclude_self, true, true, false, host_call),
                  knn::cuda::kMaxChunkQueries);
        const size_t staged_bytes = static_cast<size_t>(knn::cuda::kMaxChunkQueries) *
                                    kdtree_call_bytes_per_query(dim, k_search, k, exclude_self,
                                                                true, true, false, host_call);
        for (const knn::CallParams& call : {device_call, mixed_call}) {
          const int64_t chunk =
              kdtree_max_chunk(dim, k_search, k, exclude_self, true, true, false, call);
          EXPECT_GE(chunk, knn::cuda::kMaxChunkQueries) << "dim " << dim << " k " << k;
          EXPECT_LE(chunk, INT32_MAX);
          EXPECT_LE(static_cast<size_t>(chunk) * kdtree_call_bytes_per_query(dim, k_search, k,
                                                                             exclude_self, true,
                                                                             true, false, call),
                    staged_bytes)
              << "dim " << dim << " k " << k << " exclude_self " << exclude_self;
        }
        // With every array on the device, short rows and no exclude_self
        // scratch, the staging saved buys a chunk several times larger.
        if (dim >= 3 && k == 5 && !exclude_self) {
          EXPECT_GE(
              kdtree_max_chunk(dim, k_search, k, exclude_self, true, true, false, device_call),
              4 * knn::cuda::kMaxChunkQueries);
        }
      }
}

TEST(KdTreeMemory, DefaultLeafSizeDependsOnDimensionAndEstimatesUseTheSmallest) {
  for (int dim = 1; dim <= 32; ++dim) {
    const int leaf = knn::cuda::kdtree_default_leaf_size(dim);
    EXPECT_EQ(leaf, dim >= 7 ? 128 : dim <= 3 ? 64 : 32) << "dim " << dim;
    const int long_list_leaf = knn::cuda::kdtree_long_list_leaf_size(dim);
    EXPECT_EQ(long_list_leaf, dim <= 3 ? 128 : leaf) << "dim " << dim;
    // A larger leaf means a shallower tree, so the estimate made with the
    // smallest default bounds the trees actually built (AUTO's lazy kd-tree
    // included).
    for (const int built : {leaf, long_list_leaf}) {
      EXPECT_GE(built, knn::cuda::kKdTreeDefaultLeafSize);
      EXPECT_LE(knn::cuda::kdtree_build_bytes(1000003, dim, built),
                knn::cuda::kdtree_build_bytes(1000003, dim, knn::cuda::kKdTreeDefaultLeafSize));
    }
  }
}

// ---- The shared helpers ---------------------------------------------------------------

TEST(IndexSupport, HostMemoryIsNotDeviceMemory) {
  std::vector<float> host(16, 1.0f);
  EXPECT_FALSE(knn::cuda::is_device_pointer(host.data()));
  EXPECT_FALSE(knn::cuda::is_device_pointer(nullptr));
  int on_stack = 0;
  EXPECT_FALSE(knn::cuda::is_device_pointer(&on_stack));
#if defined(KNN_TEST_WITH_CUDA)
  // No error may be left behind for the next CUDA call to trip over.
  if (cuGetDeviceCount() > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
#endif
}

// ---- The device build against the tree's definition ---------------------------------

#if defined(KNN_TEST_WITH_CUDA)

// Builds the device tree of `rows` and checks every node on the host: its box
// is the tight box of its segment's points, and an inner node's children are
// the (coordinate, index) median split of its widest side (the largest
// spread in the scalar's arithmetic, ties to the smaller dimension). Every
// bucket row is its id's input row (-0.0 may come back as +0.0: one key).
template <typename Scalar>
void expect_median_tree(const std::vector<Scalar>& rows, int64_t n, int dim, int leaf) {
  namespace kd = knn::cuda;
  kd::BucketTree<Scalar> tree;
  tree.n = n, tree.dim = dim, tree.levels = kd::bucket_tree_levels(n, leaf);
  tree.input.allocate(rows.size());
  if (!rows.empty()) {
    ASSERT_EQ(cudaMemcpy(tree.input.get(), rows.data(), rows.size() * sizeof(Scalar),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  kd::build_bucket_tree(tree, nullptr);
  const auto download = [](const auto& buffer, size_t count) {
    std::vector<std::remove_const_t<std::remove_pointer_t<decltype(buffer.get())>>> host(count);
    if (count) {
      EXPECT_EQ(
          cudaMemcpy(host.data(), buffer.get(), count * sizeof(host[0]), cudaMemcpyDeviceToHost),
          cudaSuccess);
    }
    return host;
  };
  std::vector<int32_t> ids;
  std::vector<Scalar> points;
  if (kd::packs_bucket_points(dim)) {
    // x, y, z and the index's bits (int32 in a float, int64 in a double).
    constexpr int width = kd::kPackedPointScalars;
    static_assert(width == 4, "a packed point is x, y, z and the index");
    const std::vector<Scalar> packed = download(tree.packed, static_cast<size_t>(n) * width);
    for (int64_t j = 0; j < n; ++j) {
      points.insert(points.end(), packed.begin() + width * j, packed.begin() + width * j + 3);
      std::conditional_t<sizeof(Scalar) == 4, int32_t, int64_t> id;
      std::memcpy(&id, &packed[width * j + 3], sizeof id);
      ids.push_back(static_cast<int32_t>(id));
    }
  } else {
    ids = download(tree.ids, static_cast<size_t>(n));
    points = download(tree.points, static_cast<size_t>(n) * dim);
  }
  const std::vector<Scalar> boxes =
      download(tree.boxes, kd::bucket_tree_box_floats(tree.levels, dim));
  const std::vector<int32_t> min_ids = download(tree.min_ids, kd::bucket_tree_nodes(tree.levels));
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    ASSERT_TRUE(ids[j] >= 0 && ids[j] < n && !seen[ids[j]]) << "ids are not a permutation";
    seen[ids[j]] = 1;
    for (int d = 0; d < dim; ++d)
      ASSERT_EQ(points[j * dim + d], rows[int64_t{ids[j]} * dim + d]) << "bucket row " << j;
  }
  const Scalar inf = std::numeric_limits<Scalar>::infinity();
  for (int level = 0; level <= tree.levels; ++level)
    for (int64_t q = 0; q < (int64_t{1} << level); ++q) {
      const int64_t start = kd::segment_start(n, level, q),
                    end = kd::segment_start(n, level, q + 1);
      const Scalar* lo = boxes.data() + (kd::first_node_of_level(level) + q) * 2 * dim;
      const Scalar* hi = lo + dim;
      int32_t least = std::numeric_limits<int32_t>::max();  // an empty leaf's
      for (int64_t j = start; j < end; ++j) least = std::min(least, ids[j]);
      ASSERT_EQ(min_ids[kd::first_node_of_level(level) + q], least)
          << "least id of node " << q << " of level " << level;
      Scalar widest = -inf;
      int widest_dim = 0;
      for (int d = 0; d < dim; ++d) {
        Scalar low = inf, high = -inf;
        for (int64_t j = start; j < end; ++j)
          low = std::min(low, points[j * dim + d]), high = std::max(high, points[j * dim + d]);
        ASSERT_TRUE(lo[d] == low && hi[d] == high)
            << "box of node " << q << " of level " << level << ", dim " << d;
        const Scalar spread = high - low;  // one rounding, as on the device
        if (start < end && spread > widest) widest = spread, widest_dim = d;
      }
      if (level == tree.levels || start == end) continue;
      const int64_t mid = kd::segment_start(n, level + 1, 2 * q + 1);
      // (coordinate, index) order: the left child's largest below the right's least.
      const auto key = [&](int64_t j) {
        return std::make_pair(points[j * dim + widest_dim], ids[j]);
      };
      auto left_max = key(start), right_min = key(end - 1);
      for (int64_t j = start; j < mid; ++j) left_max = std::max(left_max, key(j));
      for (int64_t j = mid; j < end; ++j) right_min = std::min(right_min, key(j));
      if (mid > start && mid < end) {
        ASSERT_LT(left_max, right_min) << "split of node " << q << " of level " << level;
      }
    }
}

// Both tiers of the build (levels split in global memory, subtrees in shared
// memory), the path with neither (rows too wide for shared memory), every
// data shape, leaves of 1 and 2 (empty leaves), float and double.
TEST(KdTreeGpuBuild, EveryNodeIsTheMedianSplitOfItsWidestSide) {
  SKIP_WITHOUT_DEVICE();
  for (const Dist dist :
       {Dist::Uniform, Dist::Clustered, Dist::Identical, Dist::Duplicates, Dist::Plane, Dist::Line,
        Dist::Grid, Dist::LargeOffset, Dist::SignedZero, Dist::Tiny, Dist::Huge})
    for (const int dim : {1, 3, 7})
      for (const int64_t n : {1, 2, 3, 1000, 4097, 70001}) {
        SCOPED_TRACE(describe(dist, n, 0, 0, 61, ("dim=" + std::to_string(dim)).c_str()));
        const std::vector<float> rows = make_rows(dist, n, dim, 61 + n);
        for (const int leaf : {1, 2, 64}) expect_median_tree(rows, n, dim, leaf);
        if (n == 4097) {
          std::vector<double> wide(rows.size());
          for (size_t i = 0; i < rows.size(); ++i)
            wide[i] = rows[i] + (rows[i] == 0 ? 0.0 : rows[i] * 1e-12 * static_cast<double>(i % 7));
          expect_median_tree(wide, n, dim, 2);
          expect_median_tree(wide, n, dim, 64);
        }
      }
  for (const Dist dist : {Dist::Uniform, Dist::Clustered, Dist::Duplicates}) {
    const std::vector<float> rows = make_rows(dist, 1500001, 3, 62);
    expect_median_tree(rows, 1500001, 3, 64);
    const std::vector<float> wide = make_rows(dist, 700, 1500, 63);
    expect_median_tree(wide, 700, 1500, 128);
  }
}
#endif  // KNN_TEST_WITH_CUDA

// ---- kNN against the oracle and the OpenMP engine ----------------------------------------

// Every dim, k through every k-list kind, sizes 0, 1, 2 and two awkward ones.
class KdTreeGpuDims : public ::testing::TestWithParam<int> {};

TEST_P(KdTreeGpuDims, KnnMatchesOracleAndOpenMP) {
  SKIP_WITHOUT_DEVICE();
  const int dim = GetParam();
  for (const int64_t n : {0, 1, 2, 1000, 4097}) {
    const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 11 + n);
    const std::vector<float> queries = make_query_rows(Dist::Uniform, 300, dim, 12 + n);
    Engine gpu = gpu_tree(points, dim);
    Engine cpu = cpu_tree(points, dim);
    std::vector<int> ks = {1, 5, 12, 30, 100, static_cast<int>(n) + 3};
    if (n == 4097) ks.push_back(1024);
    for (const int k : ks) {
      SCOPED_TRACE(
          describe(Dist::Uniform, n, 300, k, 11 + n, ("dim=" + std::to_string(dim)).c_str()));
      const KnnResult got = engine_knn(*gpu, queries, k);
      EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), 300, dim, k), got));
      EXPECT_TRUE(same_knn(engine_knn(*cpu, queries, k), got));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dims, KdTreeGpuDims,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14, 16, 17, 32));

// Every data shape, in 3-D and in 7-D, for kNN, all-kNN and radius.
class KdTreeGpuDist : public ::testing::TestWithParam<Dist> {};

TEST_P(KdTreeGpuDist, EveryCallMatchesTheOracles) {
  SKIP_WITHOUT_DEVICE();
  const Dist dist = GetParam();
  for (const int dim : {3, 7}) {
    const int64_t n = 4097, m = 400;
    SCOPED_TRACE(describe(dist, n, m, 0, 21, ("dim=" + std::to_string(dim)).c_str()));
    const std::vector<float> points = make_rows(dist, n, dim, 21);
    const std::vector<float> queries = make_query_rows(dist, m, dim, 22);
    Engine gpu = gpu_tree(points, dim);
    for (const int k : {1, 8, 33})
      EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, k),
                           engine_knn(*gpu, queries, k)))
          << "k=" << k;
    for (const bool exclude : {false, true})
      EXPECT_TRUE(
          same_knn(oracle_self(points.data(), n, dim, 6, exclude), engine_self(*gpu, 6, exclude)))
          << "exclude_self=" << exclude;
    // A radius around the median distance of the 10th neighbour.
    const KnnResult tenth = oracle_knn(points.data(), n, queries.data(), m, dim, 10);
    std::vector<float> d10;
    for (int64_t i = 0; i < m; ++i) d10.push_back(tenth.dist[i * 10 + 9]);
    std::nth_element(d10.begin(), d10.begin() + m / 2, d10.end());
    const float radius = std::isfinite(d10[m / 2]) ? std::sqrt(d10[m / 2]) : 1.0f;
    for (const int cap : {0, 4, 40})
      EXPECT_TRUE(same_radius(oracle_radius(points.data(), n, queries.data(), m, dim, radius, cap),
                              engine_radius(*gpu, queries, radius, cap)))
          << "max_neighbors=" << cap << " radius=" << radius;
  }
}

INSTANTIATE_TEST_SUITE_P(Data, KdTreeGpuDist, ::testing::ValuesIn(all_dists()), DistName());

TEST(KdTreeGpu, LargeIndexMatchesTheOracle) {
  SKIP_WITHOUT_DEVICE();
  for (const int dim : {3, 5}) {
    const int64_t n = 100003, m = 1500;
    const int k = dim == 3 ? 30 : 5;
    SCOPED_TRACE(describe(Dist::Clustered, n, m, k, 31, ("dim=" + std::to_string(dim)).c_str()));
    const std::vector<float> points = make_rows(Dist::Clustered, n, dim, 31);
    const std::vector<float> queries = make_query_rows(Dist::Clustered, m, dim, 32);
    Engine gpu = gpu_tree(points, dim);
    const KnnResult got = engine_knn(*gpu, queries, k);
    EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, k), got));
    EXPECT_TRUE(kth_matches_double(points.data(), n, queries.data(), m, dim, k, got.idx.data()));
  }
}

// Two million points: the build's CUB temporaries and the query sort stay
// within the memory model (a larger request throws KNN_ERR_INTERNAL).
TEST(KdTreeGpu, MillionsOfPointsStayWithinTheMemoryModel) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3, k = 8;
  const int64_t n = int64_t{1} << 21, m = 700;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 35);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, m, dim, 36);
  Engine gpu = gpu_tree(points, dim);
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, k),
                       engine_knn(*gpu, queries, k)));
}

// Equal points: every squared distance is 0 (all points equal, or points
// 1e-30 apart on a line, whose squared distances from the line's start
// underflow), so every row is the k smallest indices, and a walk that pruned only on distance would
// scan every leaf for every query. The least ids (BucketTreeView::min_ids) skip a tied node whose
// ids cannot beat the k-th: these queries cost about what queries among distinct points do, on
// every kind of list (registers, shared heaps, warp lists, heaps beyond them).
TEST(KdTreeGpu, TiedPointsCostAboutWhatDistinctPointsDo) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3;
  const int64_t n = int64_t{1} << 18, m = int64_t{1} << 16;
  std::vector<float> equal(static_cast<size_t>(n) * dim, 0.5f);
  std::vector<float> underflow(static_cast<size_t>(n) * dim, 0.0f);
  for (int64_t i = 0; i < n; ++i) underflow[i * dim] = 1e-30f * static_cast<float>(i % 1000);
  const std::vector<float> distinct = make_rows(Dist::Uniform, n, dim, 43);
  const std::vector<float> at_the_point(static_cast<size_t>(m) * dim, 0.5f);
  const std::vector<float> on_the_line(static_cast<size_t>(m) * dim, 0.0f);
  const std::vector<float> among_distinct(distinct.begin(), distinct.begin() + m * dim);
  const Engine equal_tree = gpu_tree(equal, dim);
  const Engine underflow_tree = gpu_tree(underflow, dim);
  const Engine distinct_tree = gpu_tree(distinct, dim);
  for (const int k : {1, 8, 16, 33, 100, knn::cuda::kMaxWarpK + 1}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const int64_t rows = k <= 16 ? m : k <= 100 ? m / 4 : 256;  // longer lists, fewer queries
    const std::vector<float> q_equal(at_the_point.begin(), at_the_point.begin() + rows * dim);
    const std::vector<float> q_line(on_the_line.begin(), on_the_line.begin() + rows * dim);
    const std::vector<float> q_distinct(among_distinct.begin(),
                                        among_distinct.begin() + rows * dim);
    KnnResult tied, underflowed;
    const double tied_s = median_seconds(3, [&] { tied = engine_knn(*equal_tree, q_equal, k); });
    const double underflow_s =
        median_seconds(3, [&] { underflowed = engine_knn(*underflow_tree, q_line, k); });
    const double untied_s = median_seconds(3, [&] { engine_knn(*distinct_tree, q_distinct, k); });
    std::vector<int> want;
    for (int64_t i = 0; i < rows; ++i)
      for (int j = 0; j < k; ++j) want.push_back(j);
    EXPECT_EQ(tied.idx, want);
    EXPECT_EQ(underflowed.idx, want);  // (1e-30 j)^2 underflows to 0 in float
    EXPECT_LT(tied_s, 20.0 * untied_s + 0.05) << "equal " << tied_s << " s, distinct " << untied_s;
    EXPECT_LT(underflow_s, 20.0 * untied_s + 0.05)
        << "underflowing " << underflow_s << " s, distinct " << untied_s;
  }
}

// Beyond the warp lists: heaps in device scratch, and exclude_self taking k+1
// across the warp/heap boundary.
TEST(KdTreeGpu, HeapListsBeyondTheWarpLimit) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3, k = knn::cuda::kMaxWarpK + 5;
  const int64_t n = 3001, m = 64;
  const std::vector<float> points = make_rows(Dist::Grid, n, dim, 41);
  const std::vector<float> queries = make_query_rows(Dist::Grid, m, dim, 42);
  Engine gpu = gpu_tree(points, dim);
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, k),
                       engine_knn(*gpu, queries, k)));
  const int boundary = knn::cuda::kMaxWarpK;  // k + 1 is a heap list
  EXPECT_TRUE(same_knn(oracle_self(points.data(), n, dim, boundary, true),
                       engine_self(*gpu, boundary, true)));
}

TEST(KdTreeGpu, EveryLeafSizeGivesTheSameAnswer) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 4, k = 12;
  const int64_t n = 2999, m = 333;
  const std::vector<float> points = make_rows(Dist::Duplicates, n, dim, 51);
  const std::vector<float> queries = make_query_rows(Dist::Duplicates, m, dim, 52);
  const KnnResult want = oracle_knn(points.data(), n, queries.data(), m, dim, k);
  for (const int leaf : {1, 2, 7, 64, 5000})
    EXPECT_TRUE(same_knn(want, engine_knn(*gpu_tree(points, dim, leaf), queries, k)))
        << "leaf_size=" << leaf;
}

// Many chunks on both pipeline slots, then a budget too small for one query.
TEST(KdTreeGpu, SmallDeviceBudgetGivesTheSameAnswer) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3, k = 30;
  const int64_t n = 100003;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 61);
  Engine gpu = gpu_tree(points, dim);
  const KnnResult whole = engine_self(*gpu, k, true);
  knn::CallParams call;
  call.device_memory_limit = size_t{64} << 20;
  knn::CallParams self_call = call;  // what knn_self runs: the index's own points as queries
  self_call.queries_on_device = true;
  const size_t per_query =
      knn::cuda::kdtree_call_bytes_per_query(dim, k + 1, k, true, true, true, false, self_call);
  ASSERT_LT(
      static_cast<int64_t>(
          (call.device_memory_limit - knn::cuda::kdtree_call_fixed_bytes(self_call)) / per_query),
      n / 3)
      << "the budget must force several chunks";
  EXPECT_TRUE(same_knn(whole, engine_self(*gpu, k, true, call)));
  EXPECT_TRUE(same_knn(
      oracle_self(points.data(), 4000, dim, k, true),
      engine_self(*gpu_tree(std::vector<float>(points.begin(), points.begin() + 4000 * dim), dim),
                  k, true, call)));
  call.device_memory_limit = size_t{1} << 20;
  EXPECT_EQ(status_of([&] { engine_self(*gpu, k, true, call); }), KNN_ERR_DEVICE_OUT_OF_MEMORY);
}

// All-kNN into fresh host memory (malloc'd, no page written yet), large
// enough (77 MB of rows) that the copy-out faults the pages in on threads of
// its own while the device searches (engine/page_toucher.h), in several
// chunks: the rows are those of the same call into warm memory and those of
// the OpenMP kd-tree, bit for bit.
TEST(KdTreeGpu, AllKnnIntoFreshHostMemoryAnswersAsIntoWarmMemory) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3, k = 48;
  const int64_t n = 200000;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 67);
  Engine gpu = gpu_tree(points, dim);
  knn::CallParams call;
  // 50 MiB of fixed whole pages (two pipeline slots), the rest ~18000 rows a chunk.
  call.device_memory_limit = size_t{64} << 20;
  const size_t values = static_cast<size_t>(n) * k;
  ASSERT_GE(values * (sizeof(int32_t) + sizeof(float)), size_t{64} << 20);
  auto* fresh_idx = static_cast<int32_t*>(std::malloc(values * sizeof(int32_t)));
  auto* fresh_dist = static_cast<float*>(std::malloc(values * sizeof(float)));
  ASSERT_TRUE(fresh_idx && fresh_dist);
  gpu->knn_self(k, false, fresh_idx, fresh_dist, call);
  KnnResult cold;
  cold.m = n;
  cold.k = k;
  cold.idx.assign(fresh_idx, fresh_idx + values);
  cold.dist.assign(fresh_dist, fresh_dist + values);
  std::free(fresh_idx);
  std::free(fresh_dist);
  EXPECT_TRUE(same_knn(engine_self(*gpu, k, false, call), cold));
  EXPECT_TRUE(same_knn(engine_self(*cpu_tree(points, dim), k, false), cold));
}

// KNN_DEVICE_MEMORY_LIMIT limits the calls that set no device_memory_limit
// of their own (the index engines ignored it before and planned from the
// free memory), the call's own limit wins over it, and a value that is no
// number of bytes is refused.
TEST(KdTreeGpu, EnvironmentLimitAppliesWhereTheCallSetsNone) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3, k = 30;
  const int64_t n = 100003;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 63);
  Engine gpu = gpu_tree(points, dim);
  const KnnResult whole = engine_self(*gpu, k, true);
  const knn::CallParams no_limit;
  {
    const ScopedEnv tiny(knn::kDeviceMemoryLimitVar, "1048576");
    std::string message;
    try {
      engine_self(*gpu, k, true, no_limit);
    } catch (const knn::Error& e) {
      EXPECT_EQ(e.status(), KNN_ERR_DEVICE_OUT_OF_MEMORY);
      message = e.what();
    }
    EXPECT_NE(message.find("budget is 1048576 bytes, the KNN_DEVICE_MEMORY_LIMIT"),
              std::string::npos)
        << "message: " << message;
    knn::CallParams own;
    own.device_memory_limit = size_t{64} << 20;
    EXPECT_TRUE(same_knn(whole, engine_self(*gpu, k, true, own)));
  }
  {
    const ScopedEnv malformed(knn::kDeviceMemoryLimitVar, "64MiB");
    EXPECT_EQ(status_of([&] { engine_self(*gpu, k, true, no_limit); }), KNN_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(same_knn(whole, engine_self(*gpu, k, true, no_limit)));
}

// Every CUDA index build honours the limit in force (device_memory_limit,
// else KNN_DEVICE_MEMORY_LIMIT) against its estimate, not the kd-tree alone:
// an explicit CUDA build beyond it is refused, an AUTO build goes to the CPU.
TEST(IndexGpuBuild, EveryStructureHonoursTheLimitInForce) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 3;
  const int64_t n = 100003;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 65);
  const size_t limit = size_t{1} << 20;  // below every structure's estimate
  for (const bool from_environment : {false, true}) {
    const ScopedEnv env(knn::kDeviceMemoryLimitVar,
                        from_environment ? std::to_string(limit).c_str() : nullptr);
    for (const int structure :
         {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
      SCOPED_TRACE(std::string(from_environment ? "environment" : "option") + ", structure " +
                   std::to_string(structure));
      knn_options opt;
      knn_options_init_v2(&opt);
      opt.structure = structure;
      opt.device_memory_limit = from_environment ? 0 : limit;
      opt.backend = KNN_BACKEND_CUDA;
      knn_index* index = nullptr;
      EXPECT_EQ(knn_index_build(points.data(), n, dim, &opt, &index), KNN_ERR_DEVICE_OUT_OF_MEMORY);
      EXPECT_EQ(index, nullptr);
      const std::string why = knn_last_error();
      EXPECT_NE(why.find(std::string("more than the ") +
                         (from_environment ? "KNN_DEVICE_MEMORY_LIMIT" : "device_memory_limit") +
                         " (1048576)"),
                std::string::npos)
          << why;
      opt.backend = KNN_BACKEND_AUTO;
      ASSERT_EQ(knn_index_build(points.data(), n, dim, &opt, &index), KNN_OK) << knn_last_error();
      int backend = -1;
      EXPECT_EQ(knn_index_info(index, nullptr, nullptr, &backend, nullptr), KNN_OK);
      EXPECT_EQ(backend, KNN_BACKEND_OPENMP);
      knn_index_free(index);
    }
  }
}

#if defined(KNN_TEST_WITH_CUDA)
std::vector<int> as_ints(const std::vector<int32_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

TEST(IndexSupport, DeviceHelpersOnDeviceArrays) {
  SKIP_WITHOUT_DEVICE();
  std::vector<float> values(100000, 1.0f);
  values[77777] = NAN;
  values[99999] = INFINITY;
  DeviceArray<float> d_values(values);
  EXPECT_TRUE(knn::cuda::is_device_pointer(d_values.get()));
  const float limit = FLT_MAX;
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_values.get(), 100000, limit), 77777);
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_values.get(), 77777, limit), -1);
  // The magnitude bound: 1.0 passes at 1.0, not below it; -2 counts as 2.
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_values.get(), 77777, 1.0f), -1);
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_values.get(), 77777, 0.5f), 0);
  values[123] = -2.0f;
  DeviceArray<float> d_negative(values);
  EXPECT_EQ(knn::cuda::first_beyond_on_device(d_negative.get(), 77777, 1.5f), 123);
  DeviceArray<int32_t> d_idx(1000);
  DeviceArray<float> d_dist(1000);
  knn::cuda::fill_missing_on_device(d_idx.get(), d_dist.get(), 1000);
  for (const int32_t i : d_idx.to_host(1000)) ASSERT_EQ(i, -1);
  for (const float d : d_dist.to_host(1000)) ASSERT_EQ(d, INFINITY);
  std::vector<float> back(100);
  knn::cuda::copy_to_host(back.data(), d_values.get(), 100 * sizeof(float));
  EXPECT_EQ(back, std::vector<float>(values.begin(), values.begin() + 100));
}

// Device points, queries and outputs: the zero-copy path, also for all-kNN
// and radius counts; the same answer as host arrays.
TEST(KdTreeGpu, DeviceArraysAreUsedInPlace) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 6, k = 9;
  const int64_t n = 3000, m = 257;
  const std::vector<float> points = make_rows(Dist::Clustered, n, dim, 71);
  const std::vector<float> queries = make_query_rows(Dist::Clustered, m, dim, 72);
  DeviceArray<float> d_points(points), d_queries(queries);
  knn::IndexParams params;
  params.points_on_device = true;
  Engine gpu = knn::cuda::build_kdtree_index(d_points.get(), n, dim, params);
  knn::CallParams call;
  call.queries_on_device = call.outputs_on_device = true;
  DeviceArray<int32_t> d_idx(static_cast<size_t>(n) * k);
  DeviceArray<float> d_dist(static_cast<size_t>(n) * k);
  gpu->knn(d_queries.get(), m, k, d_idx.get(), d_dist.get(), call);
  KnnResult got{m, k, as_ints(d_idx.to_host(static_cast<size_t>(m) * k)),
                d_dist.to_host(static_cast<size_t>(m) * k)};
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), n, queries.data(), m, dim, k), got));
  gpu->knn_self(k, true, d_idx.get(), d_dist.get(), call);
  KnnResult self{n, k, as_ints(d_idx.to_host(static_cast<size_t>(n) * k)),
                 d_dist.to_host(static_cast<size_t>(n) * k)};
  EXPECT_TRUE(same_knn(oracle_self(points.data(), n, dim, k, true), self));
  DeviceArray<int32_t> d_counts(static_cast<size_t>(m));
  gpu->radius(d_queries.get(), m, 2.5f, 0, nullptr, nullptr, d_counts.get(), call);
  EXPECT_EQ(as_ints(d_counts.to_host(static_cast<size_t>(m))),
            oracle_radius(points.data(), n, queries.data(), m, dim, 2.5f, 0).counts);
}
#endif

// ---- Through the public API ------------------------------------------------------------

TEST(KdTreeGpu, PublicApiServesTheCudaKdTreeLikeOpenMP) {
  SKIP_WITHOUT_DEVICE();
  const int dim = 9;
  const int64_t n = 5000, m = 321;
  const std::vector<float> points = make_rows(Dist::LargeOffset, n, dim, 91);
  const std::vector<float> queries = make_query_rows(Dist::LargeOffset, m, dim, 92);
  IndexHandle gpu = build_index(points, dim, IndexConfig{KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE});
  IndexHandle cpu = build_index(points, dim, IndexConfig{KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE});
  ASSERT_TRUE(gpu);
  ASSERT_TRUE(cpu);
  int backend = 0, structure = 0;
  ASSERT_EQ(knn_index_info(gpu.get(), nullptr, nullptr, &backend, &structure), KNN_OK);
  EXPECT_EQ(backend, KNN_BACKEND_CUDA);
  EXPECT_EQ(structure, KNN_STRUCTURE_KDTREE);
  for (const int k : {1, 5, 64})
    EXPECT_TRUE(
        same_knn(query_index(cpu.get(), queries, dim, k), query_index(gpu.get(), queries, dim, k)))
        << "k=" << k;
  EXPECT_TRUE(same_knn(query_self(cpu.get(), n, 7, true), query_self(gpu.get(), n, 7, true)));
  EXPECT_TRUE(same_radius(radius_index(cpu.get(), queries, dim, 500.0f, 6),
                          radius_index(gpu.get(), queries, dim, 500.0f, 6)));
}

// AUTO on the GPU follows the measured crossover (src/index_planner.h): the
// kd-tree at any size up to dim 12, from 2^(dim + 4) points at dim 13..16,
// never above; brute force for up to 16384 points.
TEST(KdTreeGpu, AutoPicksTheStructureByDimensionAndSize) {
  SKIP_WITHOUT_DEVICE();
  struct Case {
    int dim;
    int64_t n;
    int expected;
  };
  const Case cases[] = {{12, 16384, KNN_STRUCTURE_BRUTE_FORCE},
                        {12, 16385, KNN_STRUCTURE_KDTREE},
                        {14, (1 << 18) - 1, KNN_STRUCTURE_BRUTE_FORCE},
                        {14, 1 << 18, KNN_STRUCTURE_KDTREE},
                        {17, 1 << 18, KNN_STRUCTURE_BRUTE_FORCE}};
  for (const Case& c : cases) {
    const std::vector<float> points = make_rows(Dist::Uniform, c.n, c.dim, 93);
    IndexHandle index =
        build_index(points, c.dim, IndexConfig{KNN_BACKEND_CUDA, KNN_STRUCTURE_AUTO});
    ASSERT_TRUE(index);
    int structure = 0;
    ASSERT_EQ(knn_index_info(index.get(), nullptr, nullptr, nullptr, &structure), KNN_OK);
    EXPECT_EQ(structure, c.expected) << "dim " << c.dim << ", n " << c.n;
  }
}

}  // namespace
}  // namespace knn_test
