// Point-in-polygon through the public API on the OpenMP backend, against the
// brute-force oracle of tests/support/pip_oracle.h: awkward point sets, every kind of
// polygon, boundary points, leaf sizes and thread counts, invalid input.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "knn_gpgpu.h"
#include "pip_api_calls.h"
#include "pip_oracle.h"

namespace knn_test {
namespace {

// Owns a quadtree; fails the test when the build fails.
class Quadtree {
 public:
  Quadtree(const std::vector<float>& xy, const knn_options& opt) {
    EXPECT_EQ(knn_quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, &tree_),
              KNN_OK)
        << knn_last_error();
  }
  ~Quadtree() { EXPECT_EQ(knn_quadtree_free(tree_), KNN_OK); }
  Quadtree(const Quadtree&) = delete;
  Quadtree& operator=(const Quadtree&) = delete;
  const knn_quadtree* get() const { return tree_; }

 private:
  knn_quadtree* tree_ = nullptr;
};

void expect_matches_oracle(const std::vector<float>& xy, const PolygonArrays& set,
                           const std::string& what) {
  const std::vector<std::vector<int64_t>> expected = oracle_points_in_polygons(xy, set);
  for (const int leaf_size : {0, 1, 5, 1000})
    for (const int threads : {1, 0}) {
      const knn_options opt = openmp_options(leaf_size, threads);
      const Quadtree tree(xy, opt);
      const std::vector<std::vector<int64_t>> got = count_then_fill(tree.get(), set, opt, false);
      for (int64_t p = 0; p < set.n_polygons(); ++p)
        ASSERT_EQ(got[p], expected[p])
            << what << ": polygon " << p << ", leaf_size " << leaf_size << ", threads " << threads;
    }
}

// Polygons of every kind over [lo, hi]^2.
PolygonArrays mixed_polygons(std::mt19937_64& rng, float lo, float hi, int count) {
  std::uniform_real_distribution<float> u(lo, hi);
  const float span = hi - lo;
  PolygonArrays set;
  for (int i = 0; i < count; ++i) {
    const float cx = u(rng), cy = u(rng);
    switch (i % 6) {
      case 0: {  // axis-aligned rectangle
        const float x = u(rng), y = u(rng);
        set.add_polygon(
            rectangle(std::min(cx, x), std::min(cy, y), std::max(cx, x), std::max(cy, y)));
        break;
      }
      case 1:  // convex, clockwise
        set.add_polygon(star(rng, cx, cy, 0.2f * span, 0.2f * span, 3 + i % 13, true));
        break;
      case 2:  // concave star
        set.add_polygon(star(rng, cx, cy, 0.02f * span, 0.3f * span, 7 + i % 40, false));
        break;
      case 3:  // with two holes, one of them touching the outer ring at a vertex
        set.add_polygon(
            rectangle(cx - 0.2f * span, cy - 0.2f * span, cx + 0.2f * span, cy + 0.2f * span));
        set.add_hole(star(rng, cx, cy, 0.05f * span, 0.1f * span, 9, true));
        set.add_hole({{cx + 0.2f * span, cy + 0.2f * span},
                      {cx + 0.15f * span, cy + 0.18f * span},
                      {cx + 0.18f * span, cy + 0.15f * span}});
        break;
      case 4:  // closed ring with repeated vertices, and a zero-area spike
        set.add_polygon({{cx, cy},
                         {cx + 0.1f * span, cy},
                         {cx + 0.1f * span, cy},
                         {cx + 0.1f * span, cy + 0.1f * span},
                         {cx + 0.3f * span, cy + 0.3f * span},
                         {cx + 0.1f * span, cy + 0.1f * span},
                         {cx, cy + 0.1f * span},
                         {cx, cy}});
        break;
      default:  // many rings: a multipart polygon of small disjoint squares
        set.add_polygon(rectangle(cx, cy, cx + 0.01f * span, cy + 0.01f * span));
        for (int k = 1; k < 6; ++k)
          set.add_hole(rectangle(cx + 0.02f * k * span, cy, cx + 0.02f * k * span + 0.01f * span,
                                 cy + 0.01f * span));
        break;
    }
  }
  return set;
}

TEST(PipCpu, UniformPointsAndMixedPolygons) {
  std::mt19937_64 rng(21);
  const PolygonArrays set = mixed_polygons(rng, 0, 100, 60);
  std::vector<float> xy = uniform_points(rng, 3001, 0, 100);
  const std::vector<float> boundary = boundary_points(set);
  xy.insert(xy.end(), boundary.begin(), boundary.end());
  expect_matches_oracle(xy, set, "uniform + boundary points");
}

TEST(PipCpu, ClusteredDuplicatedAndNegativePoints) {
  std::mt19937_64 rng(22);
  const PolygonArrays set = mixed_polygons(rng, -50, 50, 30);
  std::normal_distribution<float> cluster(0, 2);
  std::vector<float> xy;
  for (int i = 0; i < 1500; ++i) {
    const float cx = i % 3 == 0 ? -20.0f : 15.0f;
    xy.push_back(cx + cluster(rng));
    xy.push_back(cx + cluster(rng));
  }
  for (int i = 0; i < 700; ++i) {  // exact duplicates, more than a leaf holds
    xy.push_back(-20.0f);
    xy.push_back(-20.0f);
  }
  expect_matches_oracle(xy, set, "clustered with duplicates");
}

TEST(PipCpu, AllPointsEqual) {
  std::mt19937_64 rng(23);
  PolygonArrays set = mixed_polygons(rng, 0, 10, 12);
  set.add_polygon(rectangle(3, 3, 4, 4));  // the point on its corner: inside
  set.add_polygon(rectangle(2, 2, 3, 3));  // the point on its far corner: outside
  expect_matches_oracle(std::vector<float>(2 * 517, 3.0f), set, "all points at (3, 3)");
}

TEST(PipCpu, PointsOnALineAndOnAGrid) {
  std::mt19937_64 rng(24);
  const PolygonArrays set = mixed_polygons(rng, 0, 16, 30);
  std::vector<float> xy;
  for (int i = 0; i < 1000; ++i) {  // a diagonal line
    xy.push_back(i * 0.016f);
    xy.push_back(i * 0.016f);
  }
  for (int i = 0; i <= 64; ++i)  // a grid with many points on rectangle edges
    for (int j = 0; j <= 64; ++j) {
      xy.push_back(i * 0.25f);
      xy.push_back(j * 0.25f);
    }
  expect_matches_oracle(xy, set, "line and grid");
}

TEST(PipCpu, HugeAndTinyCoordinates) {
  std::mt19937_64 rng(25);
  const PolygonArrays huge = mixed_polygons(rng, -1.5e38f, 1.5e38f, 18);  // spans stay finite
  expect_matches_oracle(uniform_points(rng, 1500, -1.5e38f, 1.5e38f), huge, "huge");
  const PolygonArrays tiny = mixed_polygons(rng, -1e-36f, 1e-36f, 18);
  expect_matches_oracle(uniform_points(rng, 1500, -1e-36f, 1e-36f), tiny, "tiny");
}

TEST(PipCpu, SquareTilingPutsEveryGridPointInOneSquare) {
  PolygonArrays tiles;
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 8; ++i) tiles.add_polygon(rectangle(i, j, i + 1, j + 1));
  std::vector<float> xy;
  for (int i = -4; i <= 36; ++i)
    for (int j = -4; j <= 36; ++j) {
      xy.push_back(i * 0.25f);
      xy.push_back(j * 0.25f);
    }
  const knn_options opt = openmp_options(4);
  const Quadtree tree(xy, opt);
  const std::vector<std::vector<int64_t>> got = count_then_fill(tree.get(), tiles, opt, false);
  std::vector<int> hits(xy.size() / 2, 0);
  for (const std::vector<int64_t>& square : got)
    for (const int64_t i : square) ++hits[i];
  for (size_t i = 0; i < hits.size(); ++i) {
    const float x = xy[2 * i], y = xy[2 * i + 1];
    EXPECT_EQ(hits[i], x >= 0 && x < 8 && y >= 0 && y < 8 ? 1 : 0) << "(" << x << ", " << y << ")";
  }
}

TEST(PipCpu, FewLargePolygonsSplitAcrossThreads) {
  // Fewer polygons than threads: the engine splits each over subtrees.
  std::mt19937_64 rng(26);
  PolygonArrays set;
  set.add_polygon(star(rng, 50, 50, 10, 49, 300, false));
  set.add_hole(star(rng, 50, 50, 2, 8, 50, true));
  set.add_polygon(rectangle(0, 0, 100, 100));
  const std::vector<float> xy = uniform_points(rng, 20000, 0, 100);
  const std::vector<std::vector<int64_t>> expected = oracle_points_in_polygons(xy, set);
  for (const int threads : {1, 2, 7}) {
    const knn_options opt = openmp_options(16, threads);
    const Quadtree tree(xy, opt);
    EXPECT_EQ(count_then_fill(tree.get(), set, opt, false), expected) << "threads " << threads;
  }
  EXPECT_EQ(expected[1].size(), 20000u);
}

TEST(PipCpu, EmptyInputs) {
  const knn_options opt = openmp_options();
  PolygonArrays set;
  set.add_polygon(rectangle(0, 0, 1, 1));
  {  // no points
    knn_quadtree* tree = nullptr;
    ASSERT_EQ(knn_quadtree_build(nullptr, 0, &opt, &tree), KNN_OK) << knn_last_error();
    int64_t count = -1;
    EXPECT_EQ(knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), 1,
                                           set.polygon_offsets.data(), 1, &count, &opt),
              KNN_OK);
    EXPECT_EQ(count, 0);
    const int64_t offsets[] = {0, 0};
    EXPECT_EQ(knn_points_in_polygons(tree, set.xy.data(), set.ring_offsets.data(), 1,
                                     set.polygon_offsets.data(), 1, offsets, nullptr, &opt),
              KNN_OK)
        << knn_last_error();
    // No polygons (all arrays NULL).
    EXPECT_EQ(knn_points_in_polygons_count(tree, nullptr, nullptr, 0, nullptr, 0, nullptr, &opt),
              KNN_OK)
        << knn_last_error();
    EXPECT_EQ(knn_points_in_polygons(tree, nullptr, nullptr, 0, nullptr, 0, nullptr, nullptr, &opt),
              KNN_OK)
        << knn_last_error();
    EXPECT_EQ(knn_points_in_polygons(tree, set.xy.data(), set.ring_offsets.data(), 1,
                                     set.polygon_offsets.data(), 1, nullptr, nullptr, &opt),
              KNN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(knn_last_error()).find("out_offsets is NULL"), std::string::npos);
    EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
  }
  {  // one point, inside
    const std::vector<float> xy = {0.5f, 0.25f};
    const Quadtree tree(xy, opt);
    EXPECT_EQ(count_then_fill(tree.get(), set, opt, false), std::vector<std::vector<int64_t>>{{0}});
  }
}

TEST(PipCpu, AutoBackendFallsBackToOpenMpWithoutDevice) {
  const std::vector<float> xy = {0.5f, 0.5f, 2, 2};
  knn_quadtree* tree = nullptr;
  ASSERT_EQ(knn_quadtree_build(xy.data(), 2, nullptr, &tree), KNN_OK) << knn_last_error();
  PolygonArrays set;
  set.add_polygon(rectangle(0, 0, 1, 1));
  int64_t count = -1;
  EXPECT_EQ(knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), 1,
                                         set.polygon_offsets.data(), 1, &count, nullptr),
            KNN_OK);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);

  knn_options cuda;
  knn_options_init(&cuda);
  cuda.backend = KNN_BACKEND_CUDA;
  tree = reinterpret_cast<knn_quadtree*>(&tree);
  const int status = knn_quadtree_build(xy.data(), 2, &cuda, &tree);
  if (status == KNN_OK) {  // a device is present: nothing more to check here
    EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
    return;
  }
  EXPECT_EQ(status, KNN_ERR_NO_DEVICE) << knn_last_error();
  EXPECT_EQ(tree, nullptr);
}

TEST(PipCpu, CancelledCallZeroesTheCounts) {
  std::mt19937_64 rng(27);
  const std::vector<float> xy = uniform_points(rng, 5000, 0, 1);
  const knn_options opt = openmp_options();
  const Quadtree tree(xy, opt);
  PolygonArrays set;
  set.add_polygon(rectangle(0, 0, 0.5f, 0.5f));
  volatile int flag = 1;
  ASSERT_EQ(knn_set_cancel_flag(&flag), KNN_OK);
  int64_t count = -7;
  const int status =
      knn_points_in_polygons_count(tree.get(), set.xy.data(), set.ring_offsets.data(), 1,
                                   set.polygon_offsets.data(), 1, &count, &opt);
  ASSERT_EQ(knn_set_cancel_flag(nullptr), KNN_OK);
  EXPECT_EQ(status, KNN_ERR_CANCELLED);
  EXPECT_EQ(count, 0);
}

// ---- Invalid input: a status, a message naming the fault, outputs untouched -------

struct BadCall {
  int status;
  std::string message;
};

BadCall count_with(const knn_quadtree* tree, const PolygonArrays& set, int64_t* counts) {
  const int status =
      knn_points_in_polygons_count(tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                   set.polygon_offsets.data(), set.n_polygons(), counts, nullptr);
  return {status, knn_last_error()};
}

void expect_refused(const BadCall& call, int status, const std::string& words) {
  EXPECT_EQ(call.status, status) << call.message;
  EXPECT_NE(call.message.find(words), std::string::npos) << call.message;
}

class PipBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    const knn_options opt = openmp_options();
    ASSERT_EQ(knn_quadtree_build(xy_.data(), 3, &opt, &tree_), KNN_OK);
    good_.add_polygon(rectangle(0, 0, 1, 1));
    good_.add_polygon(rectangle(0, 0, 2, 2));
    good_.add_hole(rectangle(0.5f, 0.5f, 1.5f, 1.5f));
  }
  void TearDown() override { EXPECT_EQ(knn_quadtree_free(tree_), KNN_OK); }

  const std::vector<float> xy_ = {0.25f, 0.25f, 1, 1, 5, 5};
  knn_quadtree* tree_ = nullptr;
  PolygonArrays good_;
  int64_t counts_[4] = {-7, -7, -7, -7};
};

TEST_F(PipBadInput, BuildRefusesBadPointsAndOptions) {
  knn_quadtree* tree = reinterpret_cast<knn_quadtree*>(&tree);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> bad = {0, 0, 1, 1, 2, nan};
  EXPECT_EQ(knn_quadtree_build(bad.data(), 3, nullptr, &tree), KNN_ERR_NONFINITE_INPUT);
  EXPECT_NE(std::string(knn_last_error()).find("point 2"), std::string::npos) << knn_last_error();
  EXPECT_EQ(tree, nullptr);
  EXPECT_EQ(knn_quadtree_build(nullptr, 3, nullptr, &tree), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_quadtree_build(xy_.data(), -1, nullptr, &tree), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_quadtree_build(xy_.data(), 3, nullptr, nullptr), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_quadtree_build(xy_.data(), int64_t{1} << 31, nullptr, &tree),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("at most"), std::string::npos);
  knn_options opt = openmp_options();
  opt.leaf_size = -1;
  EXPECT_EQ(knn_quadtree_build(xy_.data(), 3, &opt, &tree), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("leaf_size"), std::string::npos);
  opt = openmp_options();
  opt.backend = 9;
  EXPECT_EQ(knn_quadtree_build(xy_.data(), 3, &opt, &tree), KNN_ERR_INVALID_ARGUMENT);
  opt = openmp_options();
  opt.struct_size = 0;
  EXPECT_EQ(knn_quadtree_build(xy_.data(), 3, &opt, &tree), KNN_ERR_INVALID_ARGUMENT);
}

// The quadtree calls refuse the options an index call refuses, with the same
// messages (they took an unknown structure or a device below -1 silently);
// a device number or list entry beyond the devices present is refused where
// devices are present (a GPU host), as an index build refuses it.
TEST_F(PipBadInput, OptionsAreCheckedAsTheIndexCallsCheckThem) {
  const std::vector<float> points = {0, 0, 0, 1, 1, 1};
  auto index_message = [&](const knn_options& opt) {
    knn_index* index = nullptr;
    EXPECT_EQ(knn_index_build(points.data(), 2, 3, &opt, &index), KNN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(index, nullptr);
    const std::string message = knn_last_error();
    return message.substr(message.find(": ") + 2);  // less the function's name
  };
  auto expect_every_call_refuses = [&](const knn_options& opt) {
    const std::string words = index_message(opt);
    SCOPED_TRACE(words);
    knn_quadtree* tree = reinterpret_cast<knn_quadtree*>(&tree);
    expect_refused({knn_quadtree_build(xy_.data(), 3, &opt, &tree), knn_last_error()},
                   KNN_ERR_INVALID_ARGUMENT, words);
    EXPECT_EQ(tree, nullptr);
    const std::vector<double> xy64(xy_.begin(), xy_.end());
    tree = reinterpret_cast<knn_quadtree*>(&tree);
    expect_refused({knn_quadtree_build_f64(xy64.data(), 3, &opt, &tree), knn_last_error()},
                   KNN_ERR_INVALID_ARGUMENT, words);
    EXPECT_EQ(tree, nullptr);
  };
  auto expect_queries_refuse = [&](const knn_options& opt) {
    const std::string words = index_message(opt);
    SCOPED_TRACE(words);
    expect_refused({pip_count(tree_, good_, counts_, opt), knn_last_error()},
                   KNN_ERR_INVALID_ARGUMENT, words);
    expect_refused({pip_count(tree_, good_.as<double>(), counts_, opt), knn_last_error()},
                   KNN_ERR_INVALID_ARGUMENT, words);
    const int64_t offsets[3] = {0, 1, 2};
    int64_t indices[2] = {-7, -7};
    expect_refused({pip_fill(tree_, good_, offsets, indices, opt), knn_last_error()},
                   KNN_ERR_INVALID_ARGUMENT, words);
    expect_refused({pip_fill(tree_, good_.as<double>(), offsets, indices, opt), knn_last_error()},
                   KNN_ERR_INVALID_ARGUMENT, words);
    EXPECT_EQ(indices[0], -7);
    EXPECT_EQ(counts_[0], -7);
  };
  for (const int backend : {KNN_BACKEND_AUTO, KNN_BACKEND_OPENMP}) {
    knn_options opt;
    knn_options_init_v2(&opt);
    opt.backend = backend;
    opt.structure = 42;
    expect_every_call_refuses(opt);
    expect_queries_refuse(opt);
    opt.structure = -1;
    expect_every_call_refuses(opt);
    opt.structure = KNN_STRUCTURE_AUTO;
    opt.device = -2;
    expect_every_call_refuses(opt);
    expect_queries_refuse(opt);
  }
  const int devices = cuGetDeviceCount();
  if (devices > 0) {
    knn_options opt;
    knn_options_init_v2(&opt);
    opt.device = devices;
    expect_every_call_refuses(opt);
    opt.device = -1;
    opt.device_count = 1;
    opt.devices[0] = devices;
    expect_every_call_refuses(opt);
  }
  // Every valid structure is accepted (and ignored: the tree is a quadtree).
  for (const int structure :
       {KNN_STRUCTURE_AUTO, KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
    knn_options opt = openmp_options();
    opt.structure = structure;
    knn_quadtree* tree = nullptr;
    ASSERT_EQ(knn_quadtree_build(xy_.data(), 3, &opt, &tree), KNN_OK) << knn_last_error();
    int64_t counts[2] = {-7, -7};
    EXPECT_EQ(pip_count(tree, good_, counts, opt), KNN_OK) << knn_last_error();
    EXPECT_EQ(counts[0], 1);
    EXPECT_EQ(counts[1], 1);
    EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
  }
}

TEST_F(PipBadInput, NotAQuadtree) {
  int64_t junk[8] = {0};
  expect_refused(count_with(reinterpret_cast<knn_quadtree*>(junk), good_, counts_),
                 KNN_ERR_INVALID_ARGUMENT, "not a live quadtree");
  expect_refused(count_with(nullptr, good_, counts_), KNN_ERR_INVALID_ARGUMENT, "tree is NULL");
  EXPECT_EQ(knn_quadtree_free(reinterpret_cast<knn_quadtree*>(junk)), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(counts_[0], -7);
}

TEST_F(PipBadInput, ShortRings) {
  PolygonArrays two;
  two.add_polygon({{0, 0}, {1, 1}});
  expect_refused(count_with(tree_, two, counts_), KNN_ERR_INVALID_ARGUMENT, "ring 0");
  PolygonArrays closed_segment;                       // 4 vertices, but the closing repeat and a
  closed_segment.add_polygon(rectangle(0, 0, 1, 1));  // repeated one leave 2
  closed_segment.add_hole({{0, 0}, {1, 1}, {1, 1}, {0, 0}});
  expect_refused(count_with(tree_, closed_segment, counts_), KNN_ERR_INVALID_ARGUMENT,
                 "ring 1 (vertices 4..8) has fewer than 3 vertices");
  EXPECT_EQ(counts_[0], -7);
  PolygonArrays closed_triangle;  // 4 vertices, 3 distinct: fine
  closed_triangle.add_polygon({{0, 0}, {2, 0}, {0, 2}, {0, 0}});
  EXPECT_EQ(count_with(tree_, closed_triangle, counts_).status, KNN_OK);
  // (0.25, 0.25) inside; (1, 1) on the hypotenuse belongs to the side right of it.
  EXPECT_EQ(counts_[0], 1);
}

TEST_F(PipBadInput, BadOffsets) {
  PolygonArrays set = good_;
  set.ring_offsets[1] = 5;  // ring 0 ends after ring 1 starts... then decreases
  set.ring_offsets[2] = 4;
  expect_refused(count_with(tree_, set, counts_), KNN_ERR_INVALID_ARGUMENT,
                 "ring_offsets decreases at ring 1");
  set = good_;
  set.ring_offsets[0] = 1;
  expect_refused(count_with(tree_, set, counts_), KNN_ERR_INVALID_ARGUMENT, "ring_offsets[0] is 1");
  set = good_;
  set.polygon_offsets[2] = 4;  // past the 3 rings
  expect_refused(count_with(tree_, set, counts_), KNN_ERR_INVALID_ARGUMENT,
                 "it must equal n_rings = 3");
  set = good_;
  set.polygon_offsets[1] = 0;  // polygon 0 without rings
  expect_refused(count_with(tree_, set, counts_), KNN_ERR_INVALID_ARGUMENT,
                 "polygon 0 has no ring");
  set = good_;
  set.polygon_offsets[1] = 3;  // decreasing after
  set.polygon_offsets[2] = 2;
  set.polygon_offsets.push_back(3);
  expect_refused(count_with(tree_, set, counts_), KNN_ERR_INVALID_ARGUMENT,
                 "polygon_offsets decreases at polygon 1");
  EXPECT_EQ(knn_points_in_polygons_count(tree_, good_.xy.data(), good_.ring_offsets.data(), 3,
                                         good_.polygon_offsets.data(), -1, counts_, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_points_in_polygons_count(tree_, good_.xy.data(), good_.ring_offsets.data(), 3,
                                         nullptr, 2, counts_, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_points_in_polygons_count(tree_, good_.xy.data(), good_.ring_offsets.data(), 3,
                                         good_.polygon_offsets.data(), 2, nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_points_in_polygons_count(tree_, nullptr, good_.ring_offsets.data(), 3,
                                         good_.polygon_offsets.data(), 2, counts_, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("vertices_xy is NULL"), std::string::npos);
  EXPECT_EQ(counts_[0], -7);
}

// Wrong ring offsets on every entry point, float and double vertices: each
// is refused before a vertex is read, naming the first bad offset, with the
// outputs untouched. An offset beyond the address space (2^60 float
// vertices, 2^59 double ones) was taken as the vertex count: the calls failed
// with INTERNAL or HOST_OUT_OF_MEMORY sizing their work by it, instead of
// naming the offset.
template <class T>
void expect_wrong_ring_offsets_refused(const knn_quadtree* tree,
                                       const BasicPolygonArrays<T>& good) {
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  const int64_t beyond_address_space = (int64_t{1} << 62) / static_cast<int64_t>(sizeof(T));
  struct Wrong {
    std::vector<int64_t> ring_offsets;
    std::string words;
  };
  const std::vector<Wrong> wrong = {
      {{0, 4, 3, 12},
       "ring_offsets decreases at ring 1: ring_offsets[1] = 4 > ring_offsets[2] = 3"},
      {{0, -4, 8, 12},
       "ring_offsets decreases at ring 0: ring_offsets[0] = 0 > ring_offsets[1] = -4"},
      {{-1, 4, 8, 12}, "ring_offsets[0] is -1; it must be 0"},
      {{0, 4, 13, 12},
       "ring_offsets decreases at ring 2: ring_offsets[2] = 13 > ring_offsets[3] = 12"},
      {{0, 4, 8, kHuge}, "ring_offsets[3] is 9223372036854775807; at most"},
      {{0, 4, beyond_address_space, beyond_address_space},
       "ring_offsets[2] is " + std::to_string(beyond_address_space) + "; at most"},
  };
  const knn_options opt = openmp_options();
  for (const Wrong& w : wrong) {
    BasicPolygonArrays<T> set = good;
    set.ring_offsets = w.ring_offsets;
    int64_t counts[2] = {-7, -7};
    EXPECT_EQ(pip_count(tree, set, counts, opt), KNN_ERR_INVALID_ARGUMENT) << w.words;
    EXPECT_NE(std::string(knn_last_error()).find(w.words), std::string::npos) << knn_last_error();
    EXPECT_EQ(counts[0], -7);
    EXPECT_EQ(counts[1], -7);
    const int64_t offsets[3] = {0, 1, 2};
    int64_t indices[2] = {-7, -7};
    EXPECT_EQ(pip_fill(tree, set, offsets, indices, opt), KNN_ERR_INVALID_ARGUMENT) << w.words;
    EXPECT_NE(std::string(knn_last_error()).find(w.words), std::string::npos) << knn_last_error();
    EXPECT_EQ(indices[0], -7);
    EXPECT_EQ(indices[1], -7);
  }
  // The same polygons with right offsets are answered: the next call works.
  int64_t counts[2] = {-7, -7};
  EXPECT_EQ(pip_count(tree, good, counts, opt), KNN_OK) << knn_last_error();
  EXPECT_EQ(counts[0], 1);
  EXPECT_EQ(counts[1], 1);
}

TEST_F(PipBadInput, WrongRingOffsetsOnEveryEntryPoint) {
  ASSERT_EQ(good_.ring_offsets, (std::vector<int64_t>{0, 4, 8, 12}));
  expect_wrong_ring_offsets_refused(tree_, good_);
  expect_wrong_ring_offsets_refused(tree_, good_.as<double>());
}

TEST_F(PipBadInput, NonFiniteVertex) {
  PolygonArrays set = good_;
  set.xy[2 * 6 + 1] = std::numeric_limits<float>::infinity();
  expect_refused(count_with(tree_, set, counts_), KNN_ERR_NONFINITE_INPUT,
                 "vertex 6 has an infinite coordinate (dimension 1)");
  EXPECT_EQ(counts_[0], -7);
}

TEST_F(PipBadInput, OutOffsetsThatDisagreeWithTheCounts) {
  ASSERT_EQ(count_with(tree_, good_, counts_).status, KNN_OK);
  ASSERT_EQ(counts_[0], 1);  // (0.25, 0.25)
  ASSERT_EQ(counts_[1], 1);  // (0.25, 0.25); (1, 1) is in the hole
  int64_t indices[4] = {-7, -7, -7, -7};
  const int64_t wrong[][3] = {{0, 2, 2}, {1, 2, 3}, {0, 1, 3}};
  for (const auto& offsets : wrong) {
    EXPECT_EQ(knn_points_in_polygons(tree_, good_.xy.data(), good_.ring_offsets.data(), 3,
                                     good_.polygon_offsets.data(), 2, offsets, indices, nullptr),
              KNN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(knn_last_error()).find("out_offsets"), std::string::npos);
    EXPECT_EQ(indices[0], -7);
  }
  const int64_t right[] = {0, 1, 2};
  EXPECT_EQ(knn_points_in_polygons(tree_, good_.xy.data(), good_.ring_offsets.data(), 3,
                                   good_.polygon_offsets.data(), 2, right, nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_points_in_polygons(tree_, good_.xy.data(), good_.ring_offsets.data(), 3,
                                   good_.polygon_offsets.data(), 2, right, indices, nullptr),
            KNN_OK);
  EXPECT_EQ(indices[0], 0);
  EXPECT_EQ(indices[1], 0);
  EXPECT_EQ(indices[2], -7);
}

}  // namespace
}  // namespace knn_test
