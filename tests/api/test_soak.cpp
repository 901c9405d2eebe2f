// Soak: build / query / free cycles of every object type, error paths
// included, for KNN_SOAK_SECONDS (default 15), with the process's memory
// checked to stay flat: the heap in use (mallinfo2, glibc) must come back to
// what it was after the first rounds, and the resident set (/proc/self/statm)
// must not grow beyond a small allowance. Each round makes, on the CPU
// engine:
//   - an index of every structure (kd-tree, grid, brute force, auto) with a
//     kNN, a self kNN and a radius query, then frees it;
//   - a quadtree with point-in-polygon counts and lists, then frees it;
//   - a classic tree (mpBuildKdTree + mpQueryAll, buildKdTree + queryAll)
//     and knn_brute_force;
//   - calls that fail: NaN points, bad options, a grid of dim 2, invalid
//     polygons, an invalid tree, a cancelled query, NULL handles.
// Answers are checked against the oracle in the first round and for
// consistency (the same as the first round) afterwards, so a round that
// leaks or corrupts state shows as either. An index of 20,000 points holds
// ~240 KB: one leaked per round grows the heap by megabytes within seconds.
// Run it longer with KNN_SOAK_SECONDS=600 ctest -R test_soak.
#include <gtest/gtest.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

constexpr int kPoints = 20000;
constexpr int kQueries = 200;
constexpr int kK = 8;

// ASan holds freed blocks in its quarantine (256 MB by default) and keeps
// its own heap statistics: there the levels mean nothing, and LeakSanitizer
// checks at exit what the levels check here.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

double soak_seconds() {
  const char* text = std::getenv("KNN_SOAK_SECONDS");
  const double seconds = text ? std::atof(text) : 0.0;
  return seconds > 0 ? seconds : 15.0;
}

// Resident set in bytes, 0 where /proc is missing.
int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * 4096 : 0;
}

// Heap bytes in use, -1 where the C library cannot tell.
int64_t heap_in_use() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

struct Data {
  std::vector<float> rows = make_rows(Dist::Clustered, kPoints, 3, 901);
  std::vector<float> queries = make_query_rows(Dist::Clustered, kQueries, 3, 902);
  std::vector<float> rows5 = make_rows(Dist::Duplicates, 4000, 5, 903);
  std::vector<Point> points = to_points(rows);
  std::vector<Point> query_points = to_points(queries);
  KnnResult expected = oracle_knn(rows.data(), kPoints, queries.data(), kQueries, 3, kK);
  std::vector<float> xy;  // x, y of the points
  // Two polygons over the points' bounding box: the middle 80 % with the
  // middle 20 % as a hole, and a triangle in a corner.
  std::vector<float> vertices;
  Data() {
    float lo[2] = {rows[0], rows[1]}, hi[2] = {rows[0], rows[1]};
    for (int i = 0; i < kPoints; ++i)
      for (int d = 0; d < 2; ++d) {
        const float v = rows[3 * static_cast<size_t>(i) + d];
        xy.push_back(v);
        lo[d] = std::min(lo[d], v);
        hi[d] = std::max(hi[d], v);
      }
    const float fractions[11][2] = {{0.1f, 0.1f}, {0.9f, 0.1f}, {0.9f, 0.9f}, {0.1f, 0.9f},
                                    {0.4f, 0.4f}, {0.6f, 0.4f}, {0.6f, 0.6f}, {0.4f, 0.6f},
                                    {0.0f, 0.0f}, {0.3f, 0.0f}, {0.0f, 0.3f}};
    for (const auto& f : fractions)
      for (int d = 0; d < 2; ++d) vertices.push_back(lo[d] + f[d] * (hi[d] - lo[d]));
  }
};

// What one round computes; rounds after the first must give the same.
struct Answers {
  std::vector<std::vector<int32_t>> index_knn;  // per structure
  std::vector<int32_t> self5, radius_counts;
  std::vector<int64_t> pip_counts, pip_lists;
  std::vector<int> classic, brute;
  bool operator==(const Answers& o) const {
    return index_knn == o.index_knn && self5 == o.self5 && radius_counts == o.radius_counts &&
           pip_counts == o.pip_counts && pip_lists == o.pip_lists && classic == o.classic &&
           brute == o.brute;
  }
};

void expect_status(int got, int want, const char* call) {
  EXPECT_EQ(got, want) << call << ": " << status_text(got);
  if (want != KNN_OK) {
    EXPECT_NE(knn_last_error()[0], '\0') << call << ": no message";
  }
}

Answers round(const Data& d) {
  Answers a;
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  for (int structure :
       {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE, KNN_STRUCTURE_AUTO}) {
    opt.structure = structure;
    knn_index* index = nullptr;
    expect_status(knn_index_build(d.rows.data(), kPoints, 3, &opt, &index), KNN_OK, "build");
    std::vector<int32_t> idx(static_cast<size_t>(kQueries) * kK, -7);
    std::vector<float> dist(idx.size());
    expect_status(
        knn_index_query(index, d.queries.data(), kQueries, kK, idx.data(), dist.data(), nullptr),
        KNN_OK, "query");
    a.index_knn.push_back(idx);
    std::vector<int32_t> counts(kQueries, -7);
    expect_status(knn_index_radius(index, d.queries.data(), kQueries, 0.5f, 0, nullptr, nullptr,
                                   counts.data(), nullptr),
                  KNN_OK, "radius");
    if (structure == KNN_STRUCTURE_KDTREE) a.radius_counts = counts;
    expect_status(knn_index_free(index), KNN_OK, "free");
  }
  // A 5-D index with a self query; and failing builds.
  opt.structure = KNN_STRUCTURE_KDTREE;
  opt.leaf_size = 4;
  knn_index* index5 = nullptr;
  expect_status(knn_index_build(d.rows5.data(), 4000, 5, &opt, &index5), KNN_OK, "build 5-D");
  a.self5.assign(static_cast<size_t>(4000) * 4, -7);
  expect_status(knn_index_query_self(index5, 4, 1, a.self5.data(), nullptr), KNN_OK, "self");
  expect_status(knn_index_free(index5), KNN_OK, "free 5-D");
  std::vector<float> bad = d.rows;
  bad[3 * 777 + 1] = std::numeric_limits<float>::quiet_NaN();
  knn_index* none = nullptr;
  expect_status(knn_index_build(bad.data(), kPoints, 3, &opt, &none), KNN_ERR_NONFINITE_INPUT,
                "build NaN");
  opt.structure = KNN_STRUCTURE_GRID;
  expect_status(knn_index_build(d.rows.data(), kPoints / 2, 2, &opt, &none), KNN_ERR_UNSUPPORTED,
                "grid 2-D");
  opt.threads = -1;
  expect_status(knn_index_build(d.rows.data(), kPoints, 3, &opt, &none), KNN_ERR_INVALID_ARGUMENT,
                "bad options");
  EXPECT_EQ(none, nullptr);
  expect_status(knn_index_free(nullptr), KNN_OK, "free NULL");
  expect_status(knn_index_query(nullptr, d.queries.data(), 1, 1, a.self5.data(), nullptr, nullptr),
                KNN_ERR_INVALID_ARGUMENT, "query NULL");

  // Quadtree and point in polygon: a square with a hole, a triangle.
  knn_quadtree* tree = nullptr;
  expect_status(knn_quadtree_build(d.xy.data(), kPoints, nullptr, &tree), KNN_OK, "quadtree");
  const float* vertices = d.vertices.data();
  const int64_t rings[] = {0, 4, 8, 11};
  const int64_t polygons[] = {0, 2, 3};
  a.pip_counts.assign(2, -7);
  expect_status(knn_points_in_polygons_count(tree, vertices, rings, 3, polygons, 2,
                                             a.pip_counts.data(), nullptr),
                KNN_OK, "pip count");
  const int64_t offsets[] = {0, a.pip_counts[0], a.pip_counts[0] + a.pip_counts[1]};
  a.pip_lists.assign(static_cast<size_t>(offsets[2]), -7);
  expect_status(knn_points_in_polygons(tree, vertices, rings, 3, polygons, 2, offsets,
                                       a.pip_lists.data(), nullptr),
                KNN_OK, "pip lists");
  const int64_t bad_rings[] = {0, 2, 8, 11};  // a ring of 2 vertices
  std::vector<int64_t> untouched(2, -7);
  expect_status(knn_points_in_polygons_count(tree, vertices, bad_rings, 3, polygons, 2,
                                             untouched.data(), nullptr),
                KNN_ERR_INVALID_ARGUMENT, "pip bad ring");
  expect_status(knn_quadtree_free(tree), KNN_OK, "quadtree free");

  // The classic API, a cancelled query, an invalid tree, brute force.
  const std::vector<Node> nodes = build_tree(d.points);
  a.classic.assign(static_cast<size_t>(kQueries) * kK, -7);
  expect_status(
      mpQueryAll(d.query_points.data(), nodes.data(), kQueries, kPoints, kK, a.classic.data()),
      KNN_OK, "mpQueryAll");
  std::vector<Node> single(static_cast<size_t>(kPoints));
  expect_status(buildKdTree(d.points.data(), kPoints, single.data()), KNN_OK, "buildKdTree");
  std::vector<int> serial(a.classic.size(), -7);
  expect_status(
      queryAll(d.query_points.data(), single.data(), kQueries, kPoints, kK, serial.data()), KNN_OK,
      "queryAll");
  EXPECT_EQ(serial, a.classic);
  volatile int cancel = 1;
  knn_set_cancel_flag(&cancel);
  expect_status(
      mpQueryAll(d.query_points.data(), nodes.data(), kQueries, kPoints, kK, serial.data()),
      KNN_ERR_CANCELLED, "cancelled query");
  knn_set_cancel_flag(nullptr);
  std::vector<Node> broken = nodes;
  broken[5].left = kPoints + 3;
  expect_status(
      mpQueryAll(d.query_points.data(), broken.data(), kQueries, kPoints, kK, serial.data()),
      KNN_ERR_INVALID_TREE, "invalid tree");
  a.brute.assign(static_cast<size_t>(kQueries) * kK, -7);
  expect_status(knn_brute_force(d.rows.data(), kPoints, d.queries.data(), kQueries, 3, kK, nullptr,
                                a.brute.data()),
                KNN_OK, "brute force");
  return a;
}

TEST(Soak, CyclesOfEveryObjectKeepMemoryFlat) {
#if !defined(__linux__)
  GTEST_SKIP() << "reads /proc/self/statm";
#endif
  const Data d;
  const double seconds = soak_seconds();
  // The first rounds grow the OpenMP pool, the thread caches and the heap's
  // arenas to their working size; they are the baseline.
  const Answers first = round(d);
  for (size_t s = 0; s < first.index_knn.size(); ++s) {
    SCOPED_TRACE("structure " + std::to_string(s));
    for (size_t i = 0; i < first.index_knn[s].size(); ++i)
      ASSERT_EQ(first.index_knn[s][i], d.expected.idx[i]) << "slot " << i;
  }
  for (size_t i = 0; i < first.classic.size(); ++i) ASSERT_EQ(first.classic[i], d.expected.idx[i]);
  ASSERT_EQ(first.brute, first.classic);
  ASSERT_GT(first.pip_counts[0], 0);
  ASSERT_GT(first.pip_counts[1], 0);
  for (int warm = 0; warm < 2; ++warm) ASSERT_TRUE(round(d) == first);
  const int64_t heap0 = heap_in_use();
  const int64_t rss0 = resident_bytes();

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  int64_t rounds = 0, heap_max = heap0, rss_max = rss0;
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(round(d) == first) << "round " << rounds << " answered differently";
    ++rounds;
    heap_max = std::max(heap_max, heap_in_use());
    rss_max = std::max(rss_max, resident_bytes());
  }
  const int64_t heap1 = heap_in_use();
  const int64_t rss1 = resident_bytes();
  std::printf(
      "soak: %lld rounds in %.0f s; heap in use %lld -> %lld bytes (max %lld), "
      "resident %lld -> %lld bytes (max %lld)\n",
      static_cast<long long>(rounds), seconds, static_cast<long long>(heap0),
      static_cast<long long>(heap1), static_cast<long long>(heap_max), static_cast<long long>(rss0),
      static_cast<long long>(rss1), static_cast<long long>(rss_max));
  ASSERT_GE(rounds, 2) << "too few rounds to tell";
  if (kAddressSanitizer) return;
  // Between rounds nothing the library made is alive: the heap in use is
  // back where it was, up to the allocator's own bookkeeping.
  if (heap0 >= 0) {
    EXPECT_LE(heap1 - heap0, 256 * 1024) << "the heap grows round after round";
  }
  // The resident set may move with fragmentation, not with the rounds.
  if (rss0 > 0) {
    EXPECT_LE(rss_max - rss0, 16 * 1024 * 1024) << "the resident set grows";
  }
}

}  // namespace
}  // namespace knn_test
