// The neighbourhood statistics (include/knn_gpgpu_stats.h) on the OpenMP
// engine against tests/support/neighbourhood_oracle.h: brute-force kNN in the index's
// own squared distance and principal components in long double by the closed
// form (the library uses Jacobi rotations in float64), on spheres, planes,
// cylinders, noisy scans, clusters, a 1e6 offset and the degenerate clouds;
// the orientation rules; outlier scores, inliers, k-th distances and counts
// bit for bit against the same formulas; the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "knn_gpgpu.h"
#include "neighbourhood_oracle.h"

namespace {

using namespace knn_test;

constexpr int kStructures[] = {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE};

// Normals of a cloud against the oracle: the line within `bound` rad where
// the eigen-gap allows ((l1 - l0) >= 1e-8 (l0 + l1 + l2)), the curvature
// within 1e-9, the viewpoint rule, bit-identical on every structure.
// Returns the largest angle seen (where the gap allows).
template <typename Scalar>
double check_normals(Cloud cloud, int64_t n, int k, double bound) {
  const std::vector<Scalar> p = as_scalar<Scalar>(make_cloud(cloud, n, 7));
  const Scalar viewpoint[3] = {Scalar(0.25), Scalar(3), Scalar(-2)};
  std::vector<Scalar> first_normals, first_curvature;
  double worst = 0;
  for (const int structure : kStructures) {
    const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, structure);
    EXPECT_TRUE(ix) << knn_last_error();
    if (!ix) return worst;
    std::vector<Scalar> normals(static_cast<size_t>(3 * n)), curvature(static_cast<size_t>(n));
    EXPECT_EQ(normals_call(ix.get(), k, viewpoint, normals.data(), curvature.data(), nullptr),
              KNN_OK)
        << knn_last_error();
    if (first_normals.empty()) {
      first_normals = normals, first_curvature = curvature;
    } else {
      EXPECT_EQ(0,
                std::memcmp(normals.data(), first_normals.data(), normals.size() * sizeof(Scalar)))
          << cloud_name(cloud) << " structure " << structure;
      EXPECT_EQ(0, std::memcmp(curvature.data(), first_curvature.data(),
                               curvature.size() * sizeof(Scalar)));
    }
  }
  for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 300)) {
    const Scalar* normal = &first_normals[static_cast<size_t>(3 * i)];
    const Scalar* at = &p[static_cast<size_t>(3 * i)];
    long double length = 0, facing = 0;
    for (int c = 0; c < 3; ++c) {
      EXPECT_TRUE(std::isfinite(normal[c]));
      length += static_cast<long double>(normal[c]) * normal[c];
      facing +=
          static_cast<long double>(normal[c]) * (static_cast<long double>(viewpoint[c]) - at[c]);
    }
    EXPECT_NEAR(static_cast<double>(length), 1.0, 1e-6) << i;
    EXPECT_GE(static_cast<double>(facing), -1e-12) << "point " << i << " faces away";
    const auto list = nearest(p, i, k);
    const OracleShape s = oracle_shape(p, list);
    const long double sum = s.l[0] + s.l[1] + s.l[2];
    EXPECT_NEAR(static_cast<double>(first_curvature[static_cast<size_t>(i)]),
                static_cast<double>(s.curvature), 1e-9 + 1e-6 * (sizeof(Scalar) == 4))
        << cloud_name(cloud) << " point " << i;
    if (sum > 0 && (s.l[1] - s.l[0]) >= 1e-8L * sum) {
      const double angle = line_angle(normal, s.normal);
      worst = std::max(worst, angle);
      EXPECT_LE(angle, bound) << cloud_name(cloud) << " point " << i << " k " << k;
    }
  }
  return worst;
}

TEST(NeighbourhoodNormals, Float64WithinOneMicroradianOfTheOracle) {
  double worst = 0;
  for (const Cloud c : {Cloud::Sphere, Cloud::Plane, Cloud::Cylinder, Cloud::NoisyScan,
                        Cloud::Clusters, Cloud::Offset})
    for (const int k : {3, 10, 30})
      worst = std::max(worst, check_normals<double>(c, 1500, k, 1e-5));
  std::printf("float64 normals: largest angle to the oracle %.3g rad\n", worst);
}

// The float32 bound the header states: the float64 computation on the float
// coordinates, rounded to float at the end.
TEST(NeighbourhoodNormals, Float32WithinTheStatedBound) {
  double worst = 0;
  for (const Cloud c : {Cloud::Sphere, Cloud::Plane, Cloud::Cylinder, Cloud::NoisyScan,
                        Cloud::Clusters, Cloud::Offset})
    for (const int k : {3, 10, 30}) worst = std::max(worst, check_normals<float>(c, 1500, k, 3e-7));
  std::printf("float32 normals: largest angle to the oracle %.3g rad\n", worst);
}

// A plane's normals are the plane's, a sphere's radial, to rounding.
TEST(NeighbourhoodNormals, KnownSurfaces) {
  const std::vector<double> plane = make_cloud(Cloud::Plane, 800, 3);
  const IndexPtr ix = build(plane, KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO);
  std::vector<double> normals(3 * 800), curvature(800);
  ASSERT_EQ(knn_index_normals_f64(ix.get(), 12, nullptr, normals.data(), curvature.data(), nullptr),
            KNN_OK);
  const double truth[3] = {-0.3, 0.2, 1.0};
  for (int i = 0; i < 800; ++i) {
    EXPECT_LE(line_angle(&normals[3 * i], truth), 1e-9) << i;
    EXPECT_LE(curvature[static_cast<size_t>(i)], 1e-12);
  }
}

TEST(NeighbourhoodNormals, DegenerateNeighbourhoods) {
  // All points equal: (0, 0, 1) before orientation, curvature 0.
  for (const int k : {1, 5, 50}) {
    const std::vector<double> same = make_cloud(Cloud::AllEqual, 20, 1);
    const IndexPtr ix = build(same, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
    std::vector<double> normals(60), curvature(20);
    ASSERT_EQ(
        knn_index_normals_f64(ix.get(), k, nullptr, normals.data(), curvature.data(), nullptr),
        KNN_OK);
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(normals[3 * i], 0.0);
      EXPECT_EQ(normals[3 * i + 1], 0.0);
      EXPECT_EQ(normals[3 * i + 2], 1.0);
      EXPECT_EQ(curvature[static_cast<size_t>(i)], 0.0);
    }
  }
  // Collinear: a unit normal perpendicular to the line, curvature ~0, no NaN.
  const std::vector<double> line = make_cloud(Cloud::Line, 300, 2);
  const double direction[3] = {2, -1, 0.5};
  for (const int k : {2, 3, 16}) {
    const IndexPtr ix = build(line, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
    std::vector<double> normals(900), curvature(300);
    ASSERT_EQ(
        knn_index_normals_f64(ix.get(), k, nullptr, normals.data(), curvature.data(), nullptr),
        KNN_OK);
    for (int i = 0; i < 300; ++i) {
      const double* nn = &normals[static_cast<size_t>(3 * i)];
      EXPECT_NEAR(nn[0] * nn[0] + nn[1] * nn[1] + nn[2] * nn[2], 1.0, 1e-12);
      EXPECT_NEAR(line_angle(nn, direction), 1.5707963267948966, 1e-6) << i;
      EXPECT_LE(curvature[static_cast<size_t>(i)], 1e-12);
      EXPECT_GE(curvature[static_cast<size_t>(i)], 0.0);
    }
  }
}

// n = 1, k > n (all points), k = 1, and duplicates.
TEST(NeighbourhoodNormals, SmallAndLargeK) {
  const std::vector<double> one = {1, 2, 3};
  const IndexPtr single = build(one, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  double normal[3] = {9, 9, 9}, curvature = 9;
  ASSERT_EQ(knn_index_normals_f64(single.get(), 4, nullptr, normal, &curvature, nullptr), KNN_OK);
  EXPECT_EQ(normal[0], 0.0);
  EXPECT_EQ(normal[1], 0.0);
  EXPECT_EQ(normal[2], 1.0);
  EXPECT_EQ(curvature, 0.0);

  // k beyond n takes all n: the same as k = n.
  const std::vector<double> p = make_cloud(Cloud::NoisyScan, 40, 5);
  const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  std::vector<double> at_n(120), beyond(120), c_n(40), c_beyond(40);
  ASSERT_EQ(knn_index_normals_f64(ix.get(), 40, nullptr, at_n.data(), c_n.data(), nullptr), KNN_OK);
  ASSERT_EQ(knn_index_normals_f64(ix.get(), 1000, nullptr, beyond.data(), c_beyond.data(), nullptr),
            KNN_OK);
  EXPECT_EQ(0, std::memcmp(at_n.data(), beyond.data(), 120 * sizeof(double)));
  EXPECT_EQ(0, std::memcmp(c_n.data(), c_beyond.data(), 40 * sizeof(double)));
  // All 40 points: one neighbourhood, one line for every normal.
  for (int i = 1; i < 40; ++i) EXPECT_LE(line_angle(&at_n[3 * i], &at_n[0]), 1e-12);

  // k = 1: the point alone, (0, 0, 1); the orientation graph has no edges,
  // so each point is its own seed (z >= 0 kept).
  std::vector<double> k1(120);
  ASSERT_EQ(knn_index_normals_f64(ix.get(), 1, nullptr, k1.data(), nullptr, nullptr), KNN_OK);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(k1[static_cast<size_t>(3 * i + 2)], 1.0);

  // Duplicates: every copy of a point has the same neighbourhood coordinates.
  check_normals<double>(Cloud::Duplicates, 400, 12, 1e-5);
}

// Without a viewpoint: a closed sphere ends all outward (its top point's
// normal has z > 0), and two separate spheres are each decided alike.
TEST(NeighbourhoodNormals, ConsistentOrientationWithoutViewpoint) {
  std::vector<double> p = make_cloud(Cloud::Sphere, 2000, 11);
  const std::vector<double> second = make_cloud(Cloud::Sphere, 1500, 12);
  for (size_t i = 0; i < second.size(); i += 3) {
    p.push_back(second[i] + 10);
    p.push_back(second[i + 1]);
    p.push_back(second[i + 2] - 4);
  }
  for (const int structure : kStructures) {
    const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, structure);
    const int64_t n = static_cast<int64_t>(p.size() / 3);
    for (const int k : {10, 30}) {
      std::vector<double> normals(static_cast<size_t>(3 * n));
      ASSERT_EQ(knn_index_normals_f64(ix.get(), k, nullptr, normals.data(), nullptr, nullptr),
                KNN_OK);
      int64_t inward = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double cx = i < 2000 ? 0 : 10, cz = i < 2000 ? 0 : -4;
        const double* q = &p[static_cast<size_t>(3 * i)];
        const double* nn = &normals[static_cast<size_t>(3 * i)];
        if (nn[0] * (q[0] - cx) + nn[1] * q[1] + nn[2] * (q[2] - cz) < 0) ++inward;
      }
      EXPECT_EQ(inward, 0) << "structure " << structure << " k " << k;
    }
  }
}

// The viewpoint rule at its edge: a plane seen edge-on (dot exactly 0)
// keeps the sign convention (largest component positive).
TEST(NeighbourhoodNormals, ViewpointInThePlaneKeepsTheConvention) {
  std::vector<double> p;
  for (int x = 0; x < 10; ++x)
    for (int y = 0; y < 10; ++y) p.insert(p.end(), {double(x), double(y), 0.0});
  const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  std::vector<double> normals(300);
  const double edge_on[3] = {4, 5, 0}, above[3] = {4, 5, -3};
  ASSERT_EQ(knn_index_normals_f64(ix.get(), 8, edge_on, normals.data(), nullptr, nullptr), KNN_OK);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(normals[static_cast<size_t>(3 * i + 2)], 1.0) << i;
  ASSERT_EQ(knn_index_normals_f64(ix.get(), 8, above, normals.data(), nullptr, nullptr), KNN_OK);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(normals[static_cast<size_t>(3 * i + 2)], -1.0) << i;
}

// Outlier scores and k-th distances: exactly the header's formulas.
template <typename Scalar>
void check_distances(Cloud cloud, int64_t n) {
  const std::vector<Scalar> p = as_scalar<Scalar>(make_cloud(cloud, n, 21));
  std::vector<IndexPtr> indexes;
  for (const int structure : kStructures)
    indexes.push_back(build(p, KNN_BACKEND_OPENMP, structure));
  for (const int k : {1, 4, 16, static_cast<int>(n), static_cast<int>(n) + 3}) {
    std::vector<std::pair<double, double>> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = oracle_distances(p, i, k);
    for (const IndexPtr& ix : indexes) {
      std::vector<Scalar> scores(static_cast<size_t>(n)), kth(static_cast<size_t>(n));
      ASSERT_EQ(scores_call(ix.get(), k, scores.data(), nullptr), KNN_OK) << knn_last_error();
      ASSERT_EQ(kth_call(ix.get(), k, kth.data(), nullptr), KNN_OK) << knn_last_error();
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(scores[static_cast<size_t>(i)],
                  static_cast<Scalar>(want[static_cast<size_t>(i)].first))
            << cloud_name(cloud) << " k " << k << " point " << i;
        EXPECT_EQ(kth[static_cast<size_t>(i)],
                  static_cast<Scalar>(want[static_cast<size_t>(i)].second))
            << cloud_name(cloud) << " k " << k << " point " << i;
      }
    }
  }
}

TEST(NeighbourhoodDistances, MatchTheBruteForce) {
  for (const Cloud c : {Cloud::NoisyScan, Cloud::Clusters, Cloud::Duplicates, Cloud::Offset}) {
    check_distances<double>(c, 200);
    check_distances<float>(c, 200);
  }
  // n = 1: no others, score 0, k-th distance +infinity.
  const IndexPtr one = build(std::vector<float>{1, 2, 3}, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  float score = 5, kth = 5;
  ASSERT_EQ(knn_index_outlier_scores(one.get(), 3, &score, nullptr), KNN_OK);
  ASSERT_EQ(knn_index_kth_distances(one.get(), 1, &kth, nullptr), KNN_OK);
  EXPECT_EQ(score, 0.0f);
  EXPECT_EQ(kth, std::numeric_limits<float>::infinity());
  // The largest k: lists no longer than the points there are.
  const std::vector<float> p = as_scalar<float>(make_cloud(Cloud::NoisyScan, 30, 3));
  const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  std::vector<float> at_max(30), at_n(30), normals_max(90), normals_n(90);
  ASSERT_EQ(knn_index_outlier_scores(ix.get(), INT32_MAX, at_max.data(), nullptr), KNN_OK);
  ASSERT_EQ(knn_index_outlier_scores(ix.get(), 29, at_n.data(), nullptr), KNN_OK);
  EXPECT_EQ(at_max, at_n);
  ASSERT_EQ(knn_index_kth_distances(ix.get(), INT32_MAX, at_max.data(), nullptr), KNN_OK);
  for (const float d : at_max) EXPECT_EQ(d, std::numeric_limits<float>::infinity());
  ASSERT_EQ(knn_index_normals(ix.get(), INT32_MAX, nullptr, normals_max.data(), nullptr, nullptr),
            KNN_OK);
  ASSERT_EQ(knn_index_normals(ix.get(), 30, nullptr, normals_n.data(), nullptr, nullptr), KNN_OK);
  EXPECT_EQ(normals_max, normals_n);
}

template <typename Scalar>
void check_inliers(Cloud cloud, int64_t n, int k, double ratio) {
  std::vector<double> raw = make_cloud(cloud, n, 31);
  // A few far points to drop.
  for (int64_t i = 0; i < n; i += 37) raw[static_cast<size_t>(3 * i)] += 5.0 + double(i % 7);
  const std::vector<Scalar> p = as_scalar<Scalar>(raw);
  const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO);
  std::vector<double> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    s[static_cast<size_t>(i)] =
        static_cast<double>(static_cast<Scalar>(oracle_distances(p, i, k).first));
  double sum = 0;
  for (const double v : s) sum += v;
  const double mean = sum / double(n);
  double squares = 0;
  for (const double v : s) squares += (v - mean) * (v - mean);
  const double threshold = mean + ratio * (n > 1 ? std::sqrt(squares / double(n - 1)) : 0.0);
  std::vector<int32_t> want;
  for (int64_t i = 0; i < n; ++i)
    if (s[static_cast<size_t>(i)] <= threshold) want.push_back(static_cast<int32_t>(i));
  std::vector<int32_t> kept(static_cast<size_t>(n), 7);
  int64_t n_kept = -1;
  ASSERT_EQ(inliers_call<Scalar>(ix.get(), k, ratio, kept.data(), &n_kept, nullptr), KNN_OK)
      << knn_last_error();
  ASSERT_EQ(n_kept, static_cast<int64_t>(want.size()));
  EXPECT_LT(n_kept, n);  // the far points go
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(kept[static_cast<size_t>(i)], i < n_kept ? want[static_cast<size_t>(i)] : -1) << i;
}

TEST(NeighbourhoodInliers, StatisticalRuleMatchesTheOracle) {
  for (const double ratio : {-0.5, 1.0, 2.0}) {
    check_inliers<float>(Cloud::NoisyScan, 500, 8, ratio);
    check_inliers<double>(Cloud::Sphere, 500, 16, ratio);
  }
}

template <typename Scalar>
void check_radius(Cloud cloud, int64_t n, Scalar radius, int64_t min_neighbors) {
  const std::vector<Scalar> p = as_scalar<Scalar>(make_cloud(cloud, n, 41));
  const Scalar r2 = radius * radius;
  for (const int structure : kStructures) {
    const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, structure);
    std::vector<int64_t> counts(static_cast<size_t>(n));
    ASSERT_EQ(counts_call(ix.get(), radius, counts.data(), nullptr), KNN_OK) << knn_last_error();
    std::vector<int32_t> want;
    for (int64_t i = 0; i < n; ++i) {
      int64_t others = 0;
      for (int64_t j = 0; j < n; ++j)
        if (j != i &&
            sq_distance(&p[static_cast<size_t>(3 * i)], &p[static_cast<size_t>(3 * j)]) <= r2)
          ++others;
      EXPECT_EQ(counts[static_cast<size_t>(i)], others) << i;
      if (others >= min_neighbors) want.push_back(static_cast<int32_t>(i));
    }
    std::vector<int32_t> kept(static_cast<size_t>(n));
    int64_t n_kept = -1;
    ASSERT_EQ(radius_inliers_call(ix.get(), radius, min_neighbors, kept.data(), &n_kept, nullptr),
              KNN_OK);
    ASSERT_EQ(n_kept, static_cast<int64_t>(want.size()));
    for (int64_t i = 0; i < n_kept; ++i)
      EXPECT_EQ(kept[static_cast<size_t>(i)], want[static_cast<size_t>(i)]);
  }
}

TEST(NeighbourhoodDensity, RadiusCountsAndInliers) {
  check_radius<float>(Cloud::Clusters, 400, 0.08f, 5);
  check_radius<double>(Cloud::NoisyScan, 400, 0.1, 3);
  check_radius<double>(Cloud::Duplicates, 200, 0.0, 4);
}

// Chunks: lists of k + 1 = 101 entries make the OpenMP engine reduce 41,528
// rows at a time (runs of its Morton order of all the points); 45,000
// points take two chunks, every point written once (none left NaN), checked
// on a sample.
TEST(NeighbourhoodDistances, SeveralChunks) {
  const int64_t n = 45000;
  const std::vector<double> p = make_cloud(Cloud::NoisyScan, n, 51);
  const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO);
  std::vector<double> scores(static_cast<size_t>(n), std::nan(""));
  ASSERT_EQ(knn_index_outlier_scores_f64(ix.get(), 100, scores.data(), nullptr), KNN_OK);
  EXPECT_EQ(std::count_if(scores.begin(), scores.end(), [](double s) { return std::isnan(s); }), 0);
  for (int64_t i = 0; i < n; i += 997)
    EXPECT_EQ(scores[static_cast<size_t>(i)], oracle_distances(p, i, 100).first) << i;
  EXPECT_EQ(scores[static_cast<size_t>(n - 1)], oracle_distances(p, n - 1, 100).first);
}

// Refusals: a status, a message, and outputs untouched.
TEST(NeighbourhoodStats, RefusalsLeaveOutputsUntouched) {
  const std::vector<float> p = as_scalar<float>(make_cloud(Cloud::Sphere, 50, 1));
  const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  const IndexPtr flat =
      build(std::vector<float>{0, 0, 1, 1, 2, 0}, KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE, 2);
  const IndexPtr wide = build(as_scalar<double>(make_cloud(Cloud::Sphere, 50, 1)),
                              KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE);
  ASSERT_TRUE(ix && flat && wide);
  std::vector<float> out(150, 42.0f);
  std::vector<int32_t> kept(50, 42);
  std::vector<int64_t> counts(50, 42);
  int64_t n_kept = 42;
  const float nan_view[3] = {0, NAN, 0};
  auto expect_refused = [&](int status, const char* what) {
    EXPECT_EQ(status, KNN_ERR_INVALID_ARGUMENT) << what;
    EXPECT_STRNE(knn_last_error(), "") << what;
    for (const float v : out) EXPECT_EQ(v, 42.0f) << what;
    for (const int32_t v : kept) EXPECT_EQ(v, 42) << what;
    for (const int64_t v : counts) EXPECT_EQ(v, 42) << what;
    EXPECT_EQ(n_kept, 42) << what;
  };
  expect_refused(knn_index_normals(ix.get(), 0, nullptr, out.data(), nullptr, nullptr), "k 0");
  expect_refused(knn_index_normals(ix.get(), -3, nullptr, out.data(), nullptr, nullptr), "k < 0");
  expect_refused(knn_index_normals(flat.get(), 3, nullptr, out.data(), nullptr, nullptr), "2-D");
  EXPECT_NE(std::string(knn_last_error()).find("3-D"), std::string::npos);
  expect_refused(knn_index_normals(ix.get(), 3, nullptr, nullptr, out.data(), nullptr), "NULL");
  expect_refused(knn_index_normals(ix.get(), 3, nan_view, out.data(), nullptr, nullptr),
                 "NaN view");
  expect_refused(knn_index_normals(wide.get(), 3, nullptr, out.data(), nullptr, nullptr), "family");
  EXPECT_NE(std::string(knn_last_error()).find("knn_index_normals_f64"), std::string::npos);
  expect_refused(knn_index_normals(nullptr, 3, nullptr, out.data(), nullptr, nullptr),
                 "NULL index");
  expect_refused(knn_index_outlier_scores(ix.get(), 0, out.data(), nullptr), "scores k 0");
  expect_refused(knn_index_outlier_scores(ix.get(), 3, nullptr, nullptr), "scores NULL");
  expect_refused(knn_index_outlier_scores(flat.get(), 3, out.data(), nullptr), "scores 2-D");
  expect_refused(knn_index_kth_distances(ix.get(), 0, out.data(), nullptr), "kth k 0");
  expect_refused(knn_index_statistical_inliers(ix.get(), 3, NAN, kept.data(), &n_kept, nullptr),
                 "ratio NaN");
  expect_refused(knn_index_statistical_inliers(ix.get(), 3, 1.0, kept.data(), nullptr, nullptr),
                 "n_kept NULL");
  expect_refused(knn_index_statistical_inliers(ix.get(), 3, 1.0, nullptr, &n_kept, nullptr),
                 "kept NULL");
  expect_refused(knn_index_neighbor_counts(ix.get(), -1.0f, counts.data(), nullptr), "radius < 0");
  expect_refused(knn_index_neighbor_counts(ix.get(), NAN, counts.data(), nullptr), "radius NaN");
  expect_refused(knn_index_neighbor_counts(ix.get(), 1.0f, nullptr, nullptr), "counts NULL");
  expect_refused(knn_index_radius_inliers(ix.get(), 1.0f, -1, kept.data(), &n_kept, nullptr),
                 "min < 0");
  // The next call works.
  std::vector<float> normals(150);
  EXPECT_EQ(knn_index_normals(ix.get(), 3, nullptr, normals.data(), nullptr, nullptr), KNN_OK);
}

// n = 0: nothing read or written.
TEST(NeighbourhoodStats, EmptyIndex) {
  knn_index* raw = nullptr;
  ASSERT_EQ(knn_index_build(nullptr, 0, 3, nullptr, &raw), KNN_OK);
  const IndexPtr ix(raw);
  int64_t n_kept = 5;
  EXPECT_EQ(knn_index_normals(ix.get(), 3, nullptr, nullptr, nullptr, nullptr), KNN_OK);
  EXPECT_EQ(knn_index_outlier_scores(ix.get(), 3, nullptr, nullptr), KNN_OK);
  EXPECT_EQ(knn_index_kth_distances(ix.get(), 3, nullptr, nullptr), KNN_OK);
  EXPECT_EQ(knn_index_neighbor_counts(ix.get(), 1.0f, nullptr, nullptr), KNN_OK);
  EXPECT_EQ(knn_index_statistical_inliers(ix.get(), 3, 1.0, nullptr, &n_kept, nullptr), KNN_OK);
  EXPECT_EQ(n_kept, 0);
}

// Cancellation: a raised flag stops the call with CANCELLED and the missing
// values in every output; progress counts the points of each stage.
TEST(NeighbourhoodStats, CancellationAndProgress) {
  const int64_t n = 5000;
  const std::vector<float> p = as_scalar<float>(make_cloud(Cloud::NoisyScan, n, 4));
  const IndexPtr ix = build(p, KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO);
  std::vector<float> normals(3 * n, 1.0f), curvature(n, 1.0f), scores(n, 1.0f);
  volatile int flag = 1;
  ASSERT_EQ(knn_set_cancel_flag(&flag), KNN_OK);
  EXPECT_EQ(knn_index_normals(ix.get(), 10, nullptr, normals.data(), curvature.data(), nullptr),
            KNN_ERR_CANCELLED);
  EXPECT_EQ(knn_index_outlier_scores(ix.get(), 10, scores.data(), nullptr), KNN_ERR_CANCELLED);
  ASSERT_EQ(knn_set_cancel_flag(nullptr), KNN_OK);
  for (const float v : normals) EXPECT_TRUE(std::isnan(v));
  for (const float v : curvature) EXPECT_TRUE(std::isnan(v));
  for (const float v : scores) EXPECT_EQ(v, std::numeric_limits<float>::infinity());

  knn_progress progress;
  ASSERT_EQ(knn_set_progress(&progress), KNN_OK);
  ASSERT_EQ(knn_index_outlier_scores(ix.get(), 10, scores.data(), nullptr), KNN_OK);
  EXPECT_EQ(progress.stage, KNN_PROGRESS_QUERY);
  EXPECT_EQ(progress.total, n);
  EXPECT_EQ(progress.done, n);
  EXPECT_EQ(progress.sequence, 1);
  ASSERT_EQ(knn_index_normals(ix.get(), 10, nullptr, normals.data(), nullptr, nullptr), KNN_OK);
  EXPECT_EQ(progress.done, n);
  EXPECT_EQ(progress.sequence, 4);  // the search, the graph's search, the propagation
  ASSERT_EQ(knn_set_progress(nullptr), KNN_OK);
}

TEST(NeighbourhoodStats, Estimates) {
  EXPECT_EQ(knn_estimate_stats_bytes(-1, 3, nullptr), 0u);
  EXPECT_EQ(knn_estimate_stats_bytes(10, 0, nullptr), 0u);
  EXPECT_EQ(knn_estimate_stats_bytes(int64_t{1} << 40, 3, nullptr), SIZE_MAX);
  const size_t small = knn_estimate_stats_bytes(1000, 16, nullptr);
  EXPECT_GT(small, 1000u * 16 * 8);
  EXPECT_GE(knn_estimate_stats_bytes(2000, 16, nullptr), small);
  EXPECT_GE(knn_estimate_stats_bytes(1000, 32, nullptr), small);
  EXPECT_GT(knn_estimate_stats_bytes_f64(1000, 16, nullptr), small);
}

}  // namespace
