// What a caller controls must never end the process or go wrong silently
// (issue #20): thread counts beyond what OpenMP can start, sizes whose
// products overflow, memory helpers asked about absurd sizes, coordinates
// whose squared distances would overflow float32, and handles that are
// freed, freed twice or not handles at all. Each answer is checked against
// the oracles of tests/support/oracle.h, tests/support/index_oracle.h and
// tests/support/pip_oracle.h.
#include <gtest/gtest.h>

#include <atomic>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "classic_helpers.h"
#include "index_oracle.h"
#include "index_test_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "pip_oracle.h"
#include "scoped_env.h"
#include "test_data.h"

namespace knn_test {
namespace {

knn_options cpu(int structure, int threads = 0, int leaf_size = 0) {
  return options_for({KNN_BACKEND_OPENMP, structure}, threads, leaf_size);
}

// ---- 1. Thread counts ---------------------------------------------------------------

// INT_MAX threads made libgomp try to allocate 481 GB and exit(1). They are
// reduced to KNN_MAX_THREADS_PER_PROCESSOR per processor; the answers stay exact.
TEST(Threads, HugeThreadCountsAreCapped) {
  const int dim = 3, k = 5;
  const std::vector<float> points = make_rows(Dist::Uniform, 2000, dim, 1);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 600, dim, 2);
  const KnnResult want = oracle_knn(points.data(), 2000, queries.data(), 600, dim, k);
  for (const int structure :
       {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
    SCOPED_TRACE(structure_name(structure));
    const knn_options opt = cpu(structure, INT_MAX);
    const IndexHandle index = build_index(points, dim, opt);
    ASSERT_TRUE(index);
    EXPECT_TRUE(same_knn(want, query_index(index.get(), queries, dim, k, &opt)));
    const RadiusResult r = radius_index(index.get(), queries, dim, 0.2f, 8, &opt);
    EXPECT_TRUE(
        same_radius(oracle_radius(points.data(), 2000, queries.data(), 600, dim, 0.2f, 8), r));
  }
  // Point in polygon: the build and both queries.
  std::mt19937_64 rng(3);
  const std::vector<float> xy = uniform_points(rng, 3000, -4, 4);
  PolygonArrays set;
  set.add_polygon(star(rng, 0, 0, 1, 3, 11, false));
  set.add_polygon(rectangle(-3, -3, -1, 2));
  const knn_options opt = cpu(KNN_STRUCTURE_AUTO, INT_MAX);
  knn_quadtree* tree = nullptr;
  ASSERT_EQ(knn_quadtree_build(xy.data(), 3000, &opt, &tree), KNN_OK) << knn_last_error();
  std::vector<int64_t> counts(2, -7);
  ASSERT_EQ(
      knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                   set.polygon_offsets.data(), 2, counts.data(), &opt),
      KNN_OK)
      << knn_last_error();
  const auto want_pip = oracle_points_in_polygons(xy, set);
  std::vector<int64_t> offsets{0, counts[0], counts[0] + counts[1]};
  std::vector<int64_t> found(static_cast<size_t>(offsets[2]), -7);
  ASSERT_EQ(
      knn_points_in_polygons(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                             set.polygon_offsets.data(), 2, offsets.data(), found.data(), &opt),
      KNN_OK)
      << knn_last_error();
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(counts[p], static_cast<int64_t>(want_pip[p].size()));
    EXPECT_TRUE(std::equal(want_pip[p].begin(), want_pip[p].end(), found.begin() + offsets[p]));
  }
  EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
}

#if defined(__linux__)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KNN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KNN_TEST_SANITIZED 1
#endif
#endif

extern "C" char** environ;

// OMP_NUM_THREADS=512 with 16 MiB stacks (8 GiB of them) in a process whose
// address space may grow by 1 GiB (tests/api/limits_child.cpp, on two
// processors): the index build and query with opt.threads = 4 and the
// classic build and query (OMP_NUM_THREADS, capped at
// KNN_MAX_THREADS_PER_PROCESSOR per processor) answer right or fail
// cleanly. The coordinate check's parallel scan (first_index_where) asked
// for omp_get_max_threads() threads whatever opt.threads said, as the
// classic calls asked for OMP_NUM_THREADS uncapped, and libgomp ended the
// process ("Thread creation failed") when the limit stopped it.
TEST(Threads, ManyOpenMPThreadsUnderAMemoryLimit) {
#ifdef KNN_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer's own mappings do not fit an address-space limit";
#else
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool omp = false;
    for (const char* name : {"OMP_NUM_THREADS=", "OMP_STACKSIZE=", "GOMP_STACKSIZE=",
                             "OMP_DYNAMIC=", "OMP_THREAD_LIMIT=", "OMP_WAIT_POLICY="})
      omp |= entry.rfind(name, 0) == 0;
    if (!omp) env_text.push_back(entry);
  }
  for (const char* entry : {"OMP_NUM_THREADS=512", "OMP_STACKSIZE=16M", "OMP_WAIT_POLICY=passive"})
    env_text.emplace_back(entry);
  std::vector<char*> envp;
  for (std::string& entry : env_text) envp.push_back(&entry[0]);
  envp.push_back(nullptr);
  std::string path = KNN_LIMITS_CHILD, budget_mib = "1024";
  char* const argv[] = {&path[0], &budget_mib[0], nullptr};
  // Two processors at most, so that the cap (4 threads a processor) stays
  // within the limit on any machine.
  cpu_set_t mine, two;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  CPU_ZERO(&two);
  for (int cpu = 0, kept = 0; cpu < CPU_SETSIZE && kept < 2; ++cpu)
    if (CPU_ISSET(cpu, &mine)) CPU_SET(cpu, &two), ++kept;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sched_setaffinity(0, sizeof two, &two);
    execve(argv[0], argv, envp.data());
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: libgomp ended the process; 2: a call failed or answered wrong (its stderr above)";
#endif
}
#endif

// ---- 4. Sizes whose products overflow --------------------------------------------------

// m = 2^62 queries: m * k and m * max_neighbors overflowed int64 (UBSan) and
// the finite-coordinate scan then read far past the caller's array. Refused
// before anything is read, outputs untouched.
TEST(Overflow, OutputSlotsBeyondTheAddressSpace) {
  const std::vector<float> points = make_rows(Dist::Uniform, 100, 3, 4);
  const knn_options opt = cpu(KNN_STRUCTURE_KDTREE);
  const IndexHandle index = build_index(points, 3, opt);
  ASSERT_TRUE(index);
  const int64_t m = int64_t{1} << 62;
  std::vector<float> one_query(3, 0.5f);
  std::vector<int32_t> idx(4, 77);
  std::vector<float> dist(4, 7.0f);
  std::vector<int32_t> counts(4, 77);
  EXPECT_TRUE(fails_with(
      knn_index_query(index.get(), one_query.data(), m, 2, idx.data(), dist.data(), &opt),
      KNN_ERR_INVALID_ARGUMENT, "m * k = 4611686018427387904 * 2 elements of 4 bytes exceed"));
  EXPECT_TRUE(fails_with(knn_index_radius(index.get(), one_query.data(), m, 1.0f, 4, idx.data(),
                                          dist.data(), counts.data(), &opt),
                         KNN_ERR_INVALID_ARGUMENT, "m * max_neighbors"));
  // Few enough slots, but m rows of dim floats are more than memory holds.
  EXPECT_TRUE(fails_with(
      knn_index_query(index.get(), one_query.data(), m / 4, 1, idx.data(), dist.data(), &opt),
      KNN_ERR_INVALID_ARGUMENT, "m * dim"));
  EXPECT_TRUE(fails_with(knn_index_radius(index.get(), one_query.data(), m, 1.0f, 0, nullptr,
                                          nullptr, counts.data(), &opt),
                         KNN_ERR_INVALID_ARGUMENT, "m * dim"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(idx[i], 77);
    EXPECT_EQ(dist[i], 7.0f);
    EXPECT_EQ(counts[i], 77);
  }
}

// The CSR calls (issue 51): m = INT64_MAX made radius_fill compute m + 1
// (signed overflow) and crash; m = 2^62 passed radius_count and radius_fill
// unchecked, which then allocated m counts (HOST_OUT_OF_MEMORY, INTERNAL, or
// an ASan abort). Both precisions refuse them naming the count, outputs
// untouched, and answer the next call as the oracle does.
template <class Scalar>
void csr_counts_refused(int (*count)(const knn_index*, const Scalar*, int64_t, Scalar, int64_t*,
                                     const knn_options*),
                        int (*fill)(const knn_index*, const Scalar*, int64_t, Scalar,
                                    const int64_t*, int32_t*, Scalar*, const knn_options*),
                        const IndexHandle& index, const std::vector<Scalar>& queries,
                        const std::vector<float>& points, const knn_options& opt) {
  const std::string bytes = sizeof(Scalar) == 8 ? "8" : "4";
  std::vector<int64_t> counts(4, 77), offsets = {0, 0, 0, 0, 0};
  std::vector<int32_t> idx(4, 77);
  std::vector<Scalar> dist(4, Scalar{7});
  EXPECT_TRUE(fails_with(fill(index.get(), queries.data(), INT64_MAX, 1, offsets.data(), idx.data(),
                              dist.data(), &opt),
                         KNN_ERR_INVALID_ARGUMENT,
                         "m * dim = 9223372036854775807 * 3 elements of " + bytes));
  const int64_t m = int64_t{1} << 62;
  EXPECT_TRUE(fails_with(count(index.get(), queries.data(), m, 1, counts.data(), &opt),
                         KNN_ERR_INVALID_ARGUMENT,
                         "m * dim = 4611686018427387904 * 3 elements of " + bytes + " bytes"));
  EXPECT_TRUE(fails_with(
      fill(index.get(), queries.data(), m, 1, offsets.data(), idx.data(), dist.data(), &opt),
      KNN_ERR_INVALID_ARGUMENT, "m * dim = 4611686018427387904 * 3"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(counts[i], 77);
    EXPECT_EQ(idx[i], 77);
    EXPECT_EQ(dist[i], Scalar{7});
  }
  const int64_t m_ok = static_cast<int64_t>(queries.size()) / 3;
  ASSERT_EQ(count(index.get(), queries.data(), m_ok, 1, counts.data(), &opt), KNN_OK);
  const RadiusResult want =
      oracle_radius(points.data(), static_cast<int64_t>(points.size()) / 3,
                    std::vector<float>(queries.begin(), queries.end()).data(), m_ok, 3, 1.0f, 0);
  for (int64_t i = 0; i < m_ok; ++i) EXPECT_EQ(counts[i], want.counts[i]) << "query " << i;
}

TEST(Overflow, CsrCallsRefuseImpossibleCounts) {
  const std::vector<float> points = make_rows(Dist::Uniform, 200, 3, 7);
  const std::vector<float> q32 = make_query_rows(Dist::Uniform, 4, 3, 8);
  const knn_options opt = cpu(KNN_STRUCTURE_KDTREE);
  const IndexHandle index32 = build_index(points, 3, opt);
  ASSERT_TRUE(index32);
  csr_counts_refused<float>(knn_index_radius_count, knn_index_radius_fill, index32, q32, points,
                            opt);
  const std::vector<double> points64(points.begin(), points.end());
  const std::vector<double> q64(q32.begin(), q32.end());
  knn_index* raw64 = nullptr;
  ASSERT_EQ(knn_index_build_f64(points64.data(), 200, 3, &opt, &raw64), KNN_OK);
  const IndexHandle index64(raw64);
  csr_counts_refused<double>(knn_index_radius_count_f64, knn_index_radius_fill_f64, index64, q64,
                             points, opt);
}

// m + 1 offsets of knn_offsets_from_counts and of a fill in dim 1 (where
// m * dim fits) beyond the address space: named, offsets untouched.
TEST(Overflow, OffsetsBeyondTheAddressSpace) {
  const std::vector<int64_t> counts = {1, 2};
  std::vector<int64_t> offsets(3, 77);
  EXPECT_TRUE(fails_with(knn_offsets_from_counts(counts.data(), INT64_MAX, offsets.data()),
                         KNN_ERR_INVALID_ARGUMENT,
                         "m is 9223372036854775807; offsets holds m + 1 int64 entries"));
  EXPECT_EQ(offsets, std::vector<int64_t>(3, 77));
  const std::vector<float> points = make_rows(Dist::Uniform, 50, 1, 9);
  const knn_options opt = cpu(KNN_STRUCTURE_KDTREE);
  const IndexHandle index = build_index(points, 1, opt);
  ASSERT_TRUE(index);
  std::vector<int32_t> idx(3, 77);
  const int64_t m = PTRDIFF_MAX / 8;  // m * 1 floats fit; m + 1 int64 offsets do not
  EXPECT_TRUE(fails_with(knn_index_radius_fill(index.get(), points.data(), m, 1.0f, offsets.data(),
                                               idx.data(), nullptr, &opt),
                         KNN_ERR_INVALID_ARGUMENT, "offsets holds m + 1 int64 entries"));
  EXPECT_EQ(idx, std::vector<int32_t>(3, 77));
  EXPECT_EQ(knn_offsets_from_counts(counts.data(), 2, offsets.data()), KNN_OK);
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 1, 3}));
}

// leaf_size = INT_MAX: (leaf_size + 1) / 2 overflowed int (UBSan). One leaf
// holds everything; the answers are the oracle's.
TEST(Overflow, LargestLeafSize) {
  const int dim = 4, k = 7;
  const std::vector<float> points = make_rows(Dist::Clustered, 3000, dim, 5);
  const std::vector<float> queries = make_query_rows(Dist::Clustered, 300, dim, 6);
  const IndexHandle index = build_index(points, dim, cpu(KNN_STRUCTURE_KDTREE, 0, INT_MAX));
  ASSERT_TRUE(index);
  EXPECT_TRUE(same_knn(oracle_knn(points.data(), 3000, queries.data(), 300, dim, k),
                       query_index(index.get(), queries, dim, k)));
}

// The memory helpers never understate: 2^30 queries of k = 2^30 need at least
// their 2^62 bytes of results (the answer was 31 GB: the sum wrapped).
TEST(Overflow, MemoryHelpersSaturate) {
  const int big = 1 << 30;
  const size_t results = size_t{1} << 62;  // n_qp * k * 4 bytes
  EXPECT_GE(getNeededBytesForQueryAll(big, big, 1000), results);
  EXPECT_EQ(getNeededBytesForQueryAll(INT_MAX, INT_MAX, INT_MAX), SIZE_MAX);
  EXPECT_GE(getNeededBytesInSearch(big, big, 1000, 0, 0),
            size_t{1} << 63);  // heaps of 2 * 2^62 bytes
  EXPECT_EQ(getNeededBytesInSearch(INT_MAX, INT_MAX, 1000, 0, 0), SIZE_MAX);
  // Monotone in every argument around the saturation.
  EXPECT_GE(getNeededBytesForQueryAll(big, big, 1000),
            getNeededBytesForQueryAll(big, big / 2, 1000));
  EXPECT_GE(getNeededBytesForQueryAll(big, 4096, 1000),
            getNeededBytesForQueryAll(big / 2, 4096, 1000));
  EXPECT_GE(getNeededBytesInSearch(big, 4096, 1000, 0, 0), size_t{2} * big * 4096 * 4);
}

// ---- 5. Coordinates whose squared distances overflow float32 -------------------------------

// Points at the limit, +-L: every difference is at most 2L and the largest
// squared distance, dim * 4L^2, is still finite; so results match the oracle
// and no real neighbour reads as +infinity.
void expect_exact_at_the_limit(int dim) {
  SCOPED_TRACE("dim " + std::to_string(dim));
  const float limit = coordinate_limit(dim);
  std::vector<float> points = make_rows(Dist::Uniform, 200, dim, 7);
  for (float& v : points) v = v < 0 ? -limit : (v < 0.5f ? limit * 0.25f : limit);
  std::vector<float> queries = make_query_rows(Dist::Uniform, 40, dim, 8);
  for (float& v : queries) v = v < 0 ? limit : -limit;
  const int k = 5;
  const KnnResult want = oracle_knn(points.data(), 200, queries.data(), 40, dim, k);
  for (const float d : want.dist)
    ASSERT_TRUE(std::isfinite(d)) << "the oracle overflows: the limit is wrong";
  for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_BRUTE_FORCE}) {
    SCOPED_TRACE(structure_name(structure));
    const IndexHandle index = build_index(points, dim, cpu(structure));
    ASSERT_TRUE(index);
    EXPECT_TRUE(same_knn(want, query_index(index.get(), queries, dim, k)));
    EXPECT_TRUE(same_knn(oracle_self(points.data(), 200, dim, k, false),
                         query_self(index.get(), 200, k, false)));
  }
  std::vector<int> ind(40 * k, kSentinelInt);
  std::vector<float> sq(40 * k, -7.0f);
  KNN_EXPECT_OK(
      knn_brute_force(points.data(), 200, queries.data(), 40, dim, k, sq.data(), ind.data()));
  EXPECT_TRUE(same_rows(want.idx, ind, 40, k));
  EXPECT_TRUE(same_bits(want.dist, sq));
}

TEST(Coordinates, ExactAtTheLimit) {
  for (const int dim : {1, 2, 3, 4, 5, 16, 17, 100}) expect_exact_at_the_limit(dim);
  // The classic API (3-D) and the grid.
  const float limit = coordinate_limit(3);
  std::vector<Point> points = make_points(Dist::Uniform, 500, 9);
  for (Point& p : points)
    for (float& v : p.p) v = v < 0 ? -limit : limit * 0.5f;
  std::vector<Point> queries = make_query_points(Dist::Uniform, 50, 10);
  for (Point& q : queries)
    for (float& v : q.p) v = v < 0 ? limit : -limit;
  const std::vector<Node> tree = build_tree(points);
  EXPECT_TRUE(same_tree_bytes(reference_tree(points), tree));
  const KnnResult want = oracle_knn(points, queries, 4);
  for (QueryFn fn : {&mpQueryAll, &queryAll})
    EXPECT_TRUE(same_rows(want.idx, query_ok(fn, "query", queries, tree, 4), 50, 4));
  const std::vector<float> rows(&points[0].p[0], &points[0].p[0] + 1500);
  const std::vector<float> query_rows(&queries[0].p[0], &queries[0].p[0] + 150);
  const IndexHandle grid = build_index(rows, 3, cpu(KNN_STRUCTURE_GRID));
  ASSERT_TRUE(grid);
  EXPECT_TRUE(same_knn(want, query_index(grid.get(), query_rows, 3, 4)));
}

// One step beyond the limit, in points or in queries: refused, naming the
// row, dimension and limit, outputs untouched. Before, points at 3e38 gave
// +infinity for real neighbours, the value of a missing slot, silently.
TEST(Coordinates, RefusedBeyondTheLimit) {
  for (const int dim : {1, 3, 16, 4096}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const float beyond = std::nextafter(coordinate_limit(dim), FLT_MAX);
    std::vector<float> points = make_rows(Dist::Uniform, 30, dim, 11);
    std::vector<float> queries = make_query_rows(Dist::Uniform, 5, dim, 12);
    knn_index* index = nullptr;
    points[7 * dim + dim - 1] = -beyond;
    EXPECT_TRUE(fails_with(knn_index_build(points.data(), 30, dim, nullptr, &index),
                           KNN_ERR_INVALID_ARGUMENT, "point 7 has coordinate"));
    EXPECT_NE(std::string(knn_last_error()).find("(dimension " + std::to_string(dim - 1) + ")"),
              std::string::npos);
    EXPECT_NE(std::string(knn_last_error()).find("squared distances stay finite"),
              std::string::npos);
    EXPECT_EQ(index, nullptr);
    points[7 * dim + dim - 1] = 0.5f;
    const IndexHandle good = build_index(points, dim, cpu(KNN_STRUCTURE_KDTREE));
    ASSERT_TRUE(good);
    queries[3 * dim] = beyond;
    std::vector<int32_t> idx(5 * 2, 77);
    EXPECT_TRUE(
        fails_with(knn_index_query(good.get(), queries.data(), 5, 2, idx.data(), nullptr, nullptr),
                   KNN_ERR_INVALID_ARGUMENT, "query 3 has coordinate"));
    for (const int32_t i : idx) EXPECT_EQ(i, 77);
    std::vector<int> ind(5 * 2, kSentinelInt);
    EXPECT_TRUE(fails_with(
        knn_brute_force(points.data(), 30, queries.data(), 5, dim, 2, nullptr, ind.data()),
        KNN_ERR_INVALID_ARGUMENT, "query point 3 has coordinate"));
    for (const int i : ind) EXPECT_EQ(i, kSentinelInt);
  }
  // The classic API, and a NaN still reports as non-finite.
  std::vector<Point> points = make_points(Dist::Uniform, 20, 13);
  points[4].p[1] = 3e38f;
  std::vector<Node> tree = sentinel_tree(20);
  EXPECT_TRUE(fails_with(mpBuildKdTree(points.data(), 20, tree.data()), KNN_ERR_INVALID_ARGUMENT,
                         "point 4 has coordinate 3e+38 (dimension 1)"));
  points[4].p[1] = NAN;
  EXPECT_TRUE(fails_with(buildKdTree(points.data(), 20, tree.data()), KNN_ERR_NONFINITE_INPUT,
                         "point 4 has a NaN coordinate (dimension 1)"));
}

// A caller's tree (a saved one, edited) whose points break the rule is
// refused before any query, every engine alike, with the result untouched:
// a valid tree whose largest point was moved beyond the limit (it stays the
// largest, so the tree's order still holds).
TEST(Coordinates, TreeBeyondTheLimitIsRefused) {
  std::vector<Point> points = make_points(Dist::Uniform, 20, 14);
  std::vector<Node> tree = sentinel_tree(20);
  ASSERT_EQ(mpBuildKdTree(points.data(), 20, tree.data()), KNN_OK);
  Node* largest = &tree[0];
  for (Node& node : tree)
    if (node.p[0] > largest->p[0]) largest = &node;
  largest->p[0] = std::nextafter(coordinate_limit(3), FLT_MAX);
  const std::vector<Point> queries = make_points(Dist::Uniform, 4, 15);
  for (const auto query : {mpQueryAll, cuQueryAll, queryAll}) {
    std::vector<int> result(4 * 3, kSentinelInt);
    const int status = query(queries.data(), tree.data(), 4, 20, 3, result.data());
    if (status == KNN_ERR_NO_DEVICE) continue;  // cuQueryAll without a GPU
    EXPECT_TRUE(fails_with(status, KNN_ERR_INVALID_TREE, "has coordinate"));
    for (const int i : result) EXPECT_EQ(i, kSentinelInt);
  }
}

// Point in polygon decides exactly for any finite float: points and polygons
// near +-3e38 need no limit.
TEST(Coordinates, PointInPolygonHasNoLimit) {
  std::mt19937_64 rng(14);
  const std::vector<float> xy = uniform_points(rng, 2000, -3e38f, 3e38f);
  PolygonArrays set;
  set.add_polygon(rectangle(-3e38f, -3e38f, 1e38f, 2e38f));
  set.add_polygon(star(rng, 0, 0, 5e37f, 2.5e38f, 17, true));
  const auto want = oracle_points_in_polygons(xy, set);
  knn_quadtree* tree = nullptr;
  const knn_options opt = cpu(KNN_STRUCTURE_AUTO);
  ASSERT_EQ(knn_quadtree_build(xy.data(), 2000, &opt, &tree), KNN_OK) << knn_last_error();
  std::vector<int64_t> counts(2, -7);
  ASSERT_EQ(
      knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                   set.polygon_offsets.data(), 2, counts.data(), &opt),
      KNN_OK)
      << knn_last_error();
  EXPECT_EQ(counts[0], static_cast<int64_t>(want[0].size()));
  EXPECT_EQ(counts[1], static_cast<int64_t>(want[1].size()));
  EXPECT_GT(counts[0], 0);
  EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
}

// ---- 8. Stale and foreign handles ------------------------------------------------------------

// A second free, and any call on a freed index, read the freed handle
// (ASan: heap-use-after-free). The registry of live handles refuses them
// without touching the memory.
TEST(Handles, IndexFreedTwiceOrUsedAfterFree) {
  const std::vector<float> points = make_rows(Dist::Uniform, 50, 3, 15);
  const knn_options opt = cpu(KNN_STRUCTURE_KDTREE);
  knn_index* index = nullptr;
  ASSERT_EQ(knn_index_build(points.data(), 50, 3, &opt, &index), KNN_OK);
  ASSERT_EQ(knn_index_free(index), KNN_OK);
  EXPECT_TRUE(fails_with(knn_index_free(index), KNN_ERR_INVALID_ARGUMENT, "not a live index"));
  int64_t n = -1;
  EXPECT_TRUE(fails_with(knn_index_info(index, &n, nullptr, nullptr, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "not a live index"));
  EXPECT_EQ(n, -1);
  std::vector<int32_t> idx(2, 77);
  EXPECT_TRUE(fails_with(knn_index_query(index, points.data(), 1, 2, idx.data(), nullptr, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "not a live index"));
  EXPECT_TRUE(fails_with(knn_index_query_self(index, 1, 0, idx.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "not a live index"));
  EXPECT_EQ(idx[0], 77);
  // A pointer into a live index is not an index either.
  knn_index* live = nullptr;
  ASSERT_EQ(knn_index_build(points.data(), 50, 3, &opt, &live), KNN_OK);
  knn_index* inside = reinterpret_cast<knn_index*>(reinterpret_cast<char*>(live) + 8);
  EXPECT_TRUE(fails_with(knn_index_free(inside), KNN_ERR_INVALID_ARGUMENT, "not a live index"));
  EXPECT_EQ(knn_index_info(live, &n, nullptr, nullptr, nullptr), KNN_OK);
  EXPECT_EQ(n, 50);
  EXPECT_EQ(knn_index_free(live), KNN_OK);
}

// Two threads free one index at once: exactly one succeeds.
TEST(Handles, ConcurrentDoubleFree) {
  const std::vector<float> points = make_rows(Dist::Uniform, 50, 3, 16);
  for (int round = 0; round < 50; ++round) {
    knn_index* index = nullptr;
    ASSERT_EQ(knn_index_build(points.data(), 50, 3, nullptr, &index), KNN_OK);
    std::atomic<int> ok{0};
    auto free_it = [&] {
      if (knn_index_free(index) == KNN_OK) ++ok;
    };
    std::thread a(free_it), b(free_it);
    a.join();
    b.join();
    ASSERT_EQ(ok.load(), 1);
  }
}

TEST(Handles, QuadtreeFreedTwiceOrUsedAfterFree) {
  const std::vector<float> xy{0, 0, 1, 1, 2, 0.5f};
  knn_quadtree* tree = nullptr;
  ASSERT_EQ(knn_quadtree_build(xy.data(), 3, nullptr, &tree), KNN_OK);
  ASSERT_EQ(knn_quadtree_free(tree), KNN_OK);
  EXPECT_TRUE(fails_with(knn_quadtree_free(tree), KNN_ERR_INVALID_ARGUMENT, "not a live quadtree"));
  PolygonArrays set;
  set.add_polygon(rectangle(-1, -1, 3, 3));
  std::vector<int64_t> counts(1, -7);
  EXPECT_TRUE(fails_with(
      knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), 1,
                                   set.polygon_offsets.data(), 1, counts.data(), nullptr),
      KNN_ERR_INVALID_ARGUMENT, "not a live quadtree"));
  EXPECT_EQ(counts[0], -7);
}

// ---- 6. The device environment -----------------------------------------------------

// Junk in KNN_DEVICES or KNN_DEVICE_MEMORY_LIMIT passed on a host without a
// GPU, where nothing read them, so a setting that worked there failed on a
// GPU host. Every call that would read them on a GPU host checks them on
// every host: INVALID_ARGUMENT naming the variable and its text, outputs
// untouched; a call whose options override the variable, or that runs on
// OpenMP alone, does not read it. The answers of the calls that pass are the
// oracle's.
class DeviceEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    // Made before the junk is set: the index and the quadtree may use a device.
    index_ = build_index(points_, 3, knn_options_defaults());
    ASSERT_TRUE(index_);
    ASSERT_EQ(knn_quadtree_build(xy_.data(), 3, nullptr, &quadtree_), KNN_OK) << knn_last_error();
    polygons_.add_polygon(rectangle(-1, -1, 3, 3));
  }
  void TearDown() override { EXPECT_EQ(knn_quadtree_free(quadtree_), KNN_OK); }

  static knn_options knn_options_defaults() {
    knn_options o;
    knn_options_init_v2(&o);
    return o;
  }

  // Every call that reads `variable` refuses its junk `text`.
  void expect_refused_everywhere(const char* variable, const char* text, bool index_build_reads,
                                 bool pip_reads, bool build_kd_tree_reads) {
    const ScopedEnv junk(variable, text);
    const std::string words = std::string(variable) + " is \"" + text + "\"";
    SCOPED_TRACE(words);
    const knn_options defaults = knn_options_defaults();
    knn_index* built = nullptr;
    if (index_build_reads) {
      EXPECT_TRUE(fails_with(knn_index_build(points_.data(), kN, 3, &defaults, &built),
                             KNN_ERR_INVALID_ARGUMENT, words));
      EXPECT_EQ(built, nullptr);
    }
    std::vector<int32_t> indices(kM * kK, -7);
    std::vector<float> distances(kM * kK, -7.0f);
    EXPECT_TRUE(fails_with(knn_index_query(index_.get(), queries_.data(), kM, kK, indices.data(),
                                           distances.data(), &defaults),
                           KNN_ERR_INVALID_ARGUMENT, words));
    EXPECT_TRUE(fails_with(knn_index_query_self(index_.get(), kK, 0, indices.data(), nullptr),
                           KNN_ERR_INVALID_ARGUMENT, words));
    std::vector<int64_t> radius_counts(kM, -7);
    EXPECT_TRUE(fails_with(knn_index_radius_count(index_.get(), queries_.data(), kM, 0.2f,
                                                  radius_counts.data(), &defaults),
                           KNN_ERR_INVALID_ARGUMENT, words));
    EXPECT_EQ(indices, std::vector<int32_t>(kM * kK, -7));
    EXPECT_EQ(distances, std::vector<float>(kM * kK, -7.0f));
    EXPECT_EQ(radius_counts, std::vector<int64_t>(kM, -7));
    int64_t counts[1] = {-7};
    if (pip_reads) {
      knn_quadtree* tree = nullptr;
      EXPECT_TRUE(fails_with(knn_quadtree_build(xy_.data(), 3, nullptr, &tree),
                             KNN_ERR_INVALID_ARGUMENT, words));
      EXPECT_EQ(tree, nullptr);
      EXPECT_TRUE(fails_with(knn_points_in_polygons_count(
                                 quadtree_, polygons_.xy.data(), polygons_.ring_offsets.data(), 1,
                                 polygons_.polygon_offsets.data(), 1, counts, nullptr),
                             KNN_ERR_INVALID_ARGUMENT, words));
      EXPECT_EQ(counts[0], -7);
    }
    const std::vector<Point> classic_points = to_points(points_);
    const std::vector<Point> classic_queries = to_points(queries_);
    int status = -1;
    if (build_kd_tree_reads) {
      const std::vector<Node> tree = build_with(&buildKdTree, classic_points, &status);
      EXPECT_TRUE(fails_with(status, KNN_ERR_INVALID_ARGUMENT, words));
      EXPECT_EQ(tree[0].id, sentinel_tree(1)[0].id);
    }
    const std::vector<Node> tree = build_tree(classic_points);
    const std::vector<int> result = query_with(&queryAll, classic_queries, tree, kK, &status);
    EXPECT_TRUE(fails_with(status, KNN_ERR_INVALID_ARGUMENT, words));
    EXPECT_EQ(result, std::vector<int>(result.size(), kSentinelInt));

    // What does not read the variable answers: OpenMP alone, and (for the
    // memory limit) a call that sets its own.
    const KnnResult want = oracle_knn(points_.data(), kN, queries_.data(), kM, 3, kK);
    const knn_options openmp = cpu(KNN_STRUCTURE_KDTREE);
    const IndexHandle on_cpu = build_index(points_, 3, openmp);
    ASSERT_TRUE(on_cpu);
    EXPECT_TRUE(same_knn(want, query_index(on_cpu.get(), queries_, 3, kK, &openmp)));
    EXPECT_TRUE(same_rows(want.idx, query_ok(&mpQueryAll, "mpQueryAll", classic_queries, tree, kK),
                          kM, kK));
  }

  static constexpr int64_t kN = 300, kM = 40;
  static constexpr int kK = 4;
  const std::vector<float> points_ = make_rows(Dist::Uniform, kN, 3, 61);
  const std::vector<float> queries_ = make_query_rows(Dist::Uniform, kM, 3, 62);
  const std::vector<float> xy_{0, 0, 1, 1, 2, 0.5f};
  IndexHandle index_;
  knn_quadtree* quadtree_ = nullptr;
  PolygonArrays polygons_;
};

TEST_F(DeviceEnvironment, JunkMemoryLimitIsRefusedWithOrWithoutADevice) {
  for (const char* junk : {"8G", "-1", " 64", "99999999999999999999999"})
    expect_refused_everywhere("KNN_DEVICE_MEMORY_LIMIT", junk, true, true, true);
  // A call that sets device_memory_limit never reads the variable.
  const ScopedEnv junk("KNN_DEVICE_MEMORY_LIMIT", "8G");
  knn_options limited;
  knn_options_init(&limited);
  limited.device_memory_limit = size_t{1} << 30;
  knn_index* index = nullptr;
  EXPECT_EQ(knn_index_build(points_.data(), kN, 3, &limited, &index), KNN_OK) << knn_last_error();
  EXPECT_TRUE(same_knn(oracle_knn(points_.data(), kN, queries_.data(), kM, 3, kK),
                       query_index(index, queries_, 3, kK, &limited)));
  EXPECT_EQ(knn_index_free(index), KNN_OK);
  int64_t counts[1] = {-7};
  EXPECT_EQ(
      knn_points_in_polygons_count(quadtree_, polygons_.xy.data(), polygons_.ring_offsets.data(), 1,
                                   polygons_.polygon_offsets.data(), 1, counts, &limited),
      KNN_OK)
      << knn_last_error();
  EXPECT_EQ(counts[0], 3);
}

TEST_F(DeviceEnvironment, JunkDeviceListIsRefusedWithOrWithoutADevice) {
  // Point in polygon and buildKdTree run on one device: they never read it.
  for (const char* junk : {"gpu0", "0,", "-1", "0;1", "ALL"})
    expect_refused_everywhere("KNN_DEVICES", junk, true, false, false);
  const ScopedEnv junk("KNN_DEVICES", "gpu0");
  int64_t counts[1] = {-7};
  EXPECT_EQ(
      knn_points_in_polygons_count(quadtree_, polygons_.xy.data(), polygons_.ring_offsets.data(), 1,
                                   polygons_.polygon_offsets.data(), 1, counts, nullptr),
      KNN_OK)
      << knn_last_error();
  EXPECT_EQ(counts[0], 3);
  // A call that names its devices never reads the variable.
  knn_options listed;
  knn_options_init_v2(&listed);
  listed.backend = KNN_BACKEND_AUTO;
  listed.device_count = 1;
  listed.devices[0] = 0;
  knn_index* index = nullptr;
  EXPECT_EQ(knn_index_build(points_.data(), kN, 3, &listed, &index), KNN_OK) << knn_last_error();
  EXPECT_TRUE(same_knn(oracle_knn(points_.data(), kN, queries_.data(), kM, 3, kK),
                       query_index(index, queries_, 3, kK, &listed)));
  EXPECT_EQ(knn_index_free(index), KNN_OK);
}

}  // namespace
}  // namespace knn_test
