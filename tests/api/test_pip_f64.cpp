// Float64 point in polygon (knn_quadtree_build_f64, knn_points_in_polygons*_f64)
// on the OpenMP backend, and the exact predicate on double inputs, against
// the exact rational oracle of tests/support/pip_oracle.h (integers scaled from the
// doubles, nothing shared with the library's expansions): points on and one
// ulp around edges and vertices, UTM and longitude/latitude frames, tilings,
// huge and tiny magnitudes at the ends of the documented range, every mix of
// float and double trees and polygons, and invalid input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../common/pip_predicate.h"
#include "knn_gpgpu.h"
#include "pip_api_calls.h"
#include "pip_f64_cases.h"
#include "pip_oracle.h"

namespace knn_test {
namespace {

void expect_same(const PipAnswer& got, const PipAnswer& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t p = 0; p < got.size(); ++p)
    ASSERT_EQ(got[p], expected[p]) << what << ": polygon " << p << " (" << expected[p].size()
                                   << " points expected, " << got[p].size() << " found)";
}

void expect_case_matches_oracle(const F64Case& c) {
  const PipAnswer expected = oracle_points_in_polygons(c.xy, c.polygons);
  for (size_t p = 0; p < expected.size(); ++p)  // the case tests something
    ASSERT_FALSE(expected[p].empty()) << c.name << ": no point inside polygon " << p;
  for (const int leaf_size : {0, 1, 7})
    for (const int threads : {1, 0})
      expect_same(build_count_fill(c.xy, c.polygons, openmp_options(leaf_size, threads)), expected,
                  std::string(c.name) + ", leaf_size " + std::to_string(leaf_size) + ", threads " +
                      std::to_string(threads));
}

// ---- The predicate on doubles ---------------------------------------------------

// A random double of magnitude 2^[lo, hi) with a full random mantissa.
double random_double(std::mt19937_64& rng, int lo, int hi) {
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(lo, hi - 1);
  std::bernoulli_distribution negative(0.5);
  const double v = std::ldexp(mantissa(rng), exponent(rng));
  return negative(rng) ? -v : v;
}

// Near-degenerate triples: p on the segment ab (rounded) and moved by a few
// ulps, at magnitudes 2^[lo, hi); every sign against the oracle.
void check_orientation_near_lines(uint64_t seed, int lo, int hi, int trials) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> fraction(0.0, 1.0);
  std::uniform_int_distribution<int> ulps(-2, 2);
  const double inf = std::numeric_limits<double>::infinity();
  for (int t = 0; t < trials; ++t) {
    const double ax = random_double(rng, lo, hi), ay = random_double(rng, lo, hi);
    const double bx = random_double(rng, lo, hi), by = random_double(rng, lo, hi);
    const double f = fraction(rng);
    double px = ax + f * (bx - ax), py = ay + f * (by - ay);
    for (int k = ulps(rng); k != 0; k += k > 0 ? -1 : 1)
      px = std::nextafter(px, k > 0 ? inf : -inf);
    for (int k = ulps(rng); k != 0; k += k > 0 ? -1 : 1)
      py = std::nextafter(py, k > 0 ? inf : -inf);
    const int expected = oracle_orientation(ax, ay, bx, by, px, py);
    ASSERT_EQ(knn::pip::orientation_sign<double>(ax, ay, bx, by, px, py), expected)
        << "a = (" << ax << ", " << ay << "), b = (" << bx << ", " << by << "), p = (" << px << ", "
        << py << ")";
    // The same points in the order (b, a): the sign flips.
    ASSERT_EQ(knn::pip::orientation_sign<double>(bx, by, ax, ay, px, py), -expected);
  }
}

TEST(PipF64Predicate, NearDegenerateTriplesAtEveryScale) {
  check_orientation_near_lines(1, -2, 2, 20000);
  check_orientation_near_lines(2, 20, 24, 20000);     // UTM-like magnitudes
  check_orientation_near_lines(3, 480, 499, 5000);    // near the upper bound 2^500
  check_orientation_near_lines(4, -485, -470, 5000);  // near the lower bound 2^-485
  check_orientation_near_lines(5, -485, 499, 5000);   // every magnitude mixed in one test
}

TEST(PipF64Predicate, ExactlyCollinearAndSharedVertices) {
  // Collinear points with coordinates of 53 significant bits, which no
  // product fits in a double: det is exactly 0, and one ulp off it is not.
  const double a = 4503599627370497.0;  // 2^52 + 1
  EXPECT_EQ(knn::pip::orientation_sign<double>(0, 0, a, a, 3 * a, 3 * a), 0);
  EXPECT_EQ(knn::pip::orientation_sign<double>(0, 0, a, a, std::nextafter(3 * a, 0.0), 3 * a),
            oracle_orientation(0, 0, a, a, std::nextafter(3 * a, 0.0), 3 * a));
  const double x0 = 4500000.123456789, y0 = 5500000.987654321, d = 0.001;
  EXPECT_EQ(knn::pip::orientation_sign<double>(x0, y0, x0 + d, y0 + d, x0, y0), 0);
  EXPECT_EQ(knn::pip::orientation_sign<double>(x0, y0, x0 + d, y0 + d, x0 + d, y0 + d), 0);
  EXPECT_EQ(knn::pip::orientation_sign<double>(x0, y0, x0 + d, y0 + d, x0 + 2 * d, y0 + 2 * d),
            oracle_orientation(x0, y0, x0 + d, y0 + d, x0 + 2 * d, y0 + 2 * d));
  // The extreme magnitudes of the range in one determinant.
  const double big = std::ldexp(1.0, 500), tiny = std::ldexp(1.0, -485);
  EXPECT_EQ(knn::pip::orientation_sign<double>(-big, -tiny, big, tiny, 0, 0), 0);
  EXPECT_EQ(knn::pip::orientation_sign<double>(-big, -tiny, big, tiny, tiny, 0),
            oracle_orientation(-big, -tiny, big, tiny, tiny, 0));
  EXPECT_EQ(knn::pip::orientation_sign<double>(-big, -tiny, big, tiny, 0, tiny), 1);
}

TEST(PipF64Predicate, FloatInputsGiveTheFloatAnswer) {
  // The double instantiation on float values decides as the float one.
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int t = 0; t < 20000; ++t) {
    const float ax = u(rng), ay = u(rng), bx = u(rng), by = u(rng);
    const float px = t % 2 ? ax + 0.5f * (bx - ax) : u(rng),
                py = t % 2 ? ay + 0.5f * (by - ay) : u(rng);
    ASSERT_EQ(knn::pip::orientation_sign<double>(ax, ay, bx, by, px, py),
              knn::pip::orientation_sign<float>(ax, ay, bx, by, px, py));
  }
}

TEST(PipF64Predicate, RangeBounds) {
  EXPECT_TRUE(knn::pip::in_exact_range(0.0));
  EXPECT_TRUE(knn::pip::in_exact_range(-0.0));
  EXPECT_TRUE(knn::pip::in_exact_range(std::ldexp(1.0, 500)));
  EXPECT_TRUE(knn::pip::in_exact_range(-std::ldexp(1.0, -485)));
  EXPECT_FALSE(knn::pip::in_exact_range(std::nextafter(std::ldexp(1.0, 500), 1e300)));
  EXPECT_FALSE(knn::pip::in_exact_range(std::nextafter(std::ldexp(1.0, -485), 0.0)));
  EXPECT_FALSE(knn::pip::in_exact_range(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(knn::pip::in_exact_range(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_EQ(knn::pip::kMaxMagnitude, std::ldexp(1.0, 500));
  EXPECT_EQ(knn::pip::kMinMagnitude, std::ldexp(1.0, -485));
  // Every float lies inside.
  EXPECT_TRUE(knn::pip::in_exact_range(static_cast<double>(std::numeric_limits<float>::max())));
  EXPECT_TRUE(
      knn::pip::in_exact_range(static_cast<double>(std::numeric_limits<float>::denorm_min())));
}

// ---- Through the API ---------------------------------------------------------------

TEST(PipF64Cpu, UtmOffsetsAtMillimetreSpacing) { expect_case_matches_oracle(utm_case(11)); }

TEST(PipF64Cpu, LongitudeLatitudeWithNanodegreeFeatures) {
  expect_case_matches_oracle(latlon_case(12));
}

TEST(PipF64Cpu, TilingPutsEveryInnerPointInExactlyOneTile) {
  const F64Case c = tiling_case(13, 6);
  expect_case_matches_oracle(c);
  const PipAnswer got = build_count_fill(c.xy, c.polygons, openmp_options());
  std::vector<int> tiles(c.xy.size() / 2, 0);
  for (const auto& points : got)
    for (const int64_t i : points) ++tiles[static_cast<size_t>(i)];
  for (size_t i = 0; i < tiles.size(); ++i) {
    const double x = c.xy[2 * i], y = c.xy[2 * i + 1];
    const bool inner = x > 1.0 && x < 2.0 && y > 1.0 && y < 2.0;
    if (inner) {
      ASSERT_EQ(tiles[i], 1) << "point " << i << " (" << x << ", " << y << ")";
    } else {
      ASSERT_LE(tiles[i], 1) << "point " << i << " (" << x << ", " << y << ")";
    }
  }
}

TEST(PipF64Cpu, HugeAndTinyMagnitudesGiveTheUnscaledAnswer) {
  // Scaling every coordinate by a power of two changes no sign: the answers
  // at the ends of the range equal the answer at 1 (and the oracle's).
  const F64Case base = tiling_case(14, 4);
  const PipAnswer expected = oracle_points_in_polygons(base.xy, base.polygons);
  expect_same(build_count_fill(base.xy, base.polygons, openmp_options()), expected, base.name);
  for (const int e : {498, 300, -300, -480}) {
    const F64Case c = scaled_case(base, e, "scaled tiling");
    expect_same(oracle_points_in_polygons(c.xy, c.polygons), expected,
                "oracle scaled by 2^" + std::to_string(e));
    for (const int leaf_size : {0, 1})
      expect_same(build_count_fill(c.xy, c.polygons, openmp_options(leaf_size)), expected,
                  "scaled by 2^" + std::to_string(e));
  }
}

TEST(PipF64Cpu, TheWholeRangeInOneTree) { expect_case_matches_oracle(extreme_range_case(16)); }

TEST(PipF64Cpu, MixedPrecisionEqualsTheAllDoubleAnswer) {
  // Float-representable data: every mix of tree and polygon precision gives
  // the all-double answer, which is the oracle's.
  std::mt19937_64 rng(15);
  PolygonArrays polygons;
  for (int p = 0; p < 12; ++p)
    polygons.add_polygon(star(rng, static_cast<float>(-50 + 10 * p), 3.0f, 4.0f, 20.0f, 13, p % 2));
  polygons.add_hole(rectangle(55.0f, -1.0f, 58.0f, 2.0f));
  std::vector<float> xy = uniform_points(rng, 3000, -80.0f, 80.0f);
  const std::vector<float> boundary = boundary_points(polygons);
  xy.insert(xy.end(), boundary.begin(), boundary.end());
  const std::vector<double> xy64(xy.begin(), xy.end());
  const PolygonArraysd polygons64 = polygons.as<double>();
  const PipAnswer expected = oracle_points_in_polygons(xy64, polygons64);
  const knn_options opt = openmp_options();
  expect_same(build_count_fill(xy64, polygons64, opt), expected, "double tree, double polygons");
  expect_same(build_count_fill(xy, polygons64, opt), expected, "float tree, double polygons");
  expect_same(build_count_fill(xy64, polygons, opt), expected, "double tree, float polygons");
  expect_same(build_count_fill(xy, polygons, opt), expected, "float tree, float polygons");
}

TEST(PipF64Cpu, DoubleAnswersDifferFromRoundingToFloat) {
  // The reason for the _f64 calls: a city 4e-6 degree inside a border,
  // rounded to float32 (spacing 1.5e-5 there), lands on the border and falls
  // outside. The double call keeps it in.
  const double east = static_cast<double>(153.6f);
  PolygonArraysd border;
  border.add_polygon({{113.0, -35.0}, {east, -35.0}, {east, -10.0}, {113.0, -10.0}});
  const std::vector<double> city = {east - 4e-6, -20.0};
  expect_same(build_count_fill(city, border, openmp_options()), PipAnswer{{0}}, "double");
  const std::vector<float> rounded(city.begin(), city.end());
  expect_same(build_count_fill(rounded, border.as<float>(), openmp_options()), PipAnswer{{}},
              "rounded to float");
}

// ---- Invalid input -------------------------------------------------------------------

class PipF64BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(knn_quadtree_build_f64(xy_.data(), 3, nullptr, &tree_), KNN_OK) << knn_last_error();
    good_.add_polygon({{0, 0}, {1, 0}, {1, 1}});
  }
  void TearDown() override { EXPECT_EQ(knn_quadtree_free(tree_), KNN_OK); }

  static void expect_refused(int status, int want, const std::string& message_part) {
    EXPECT_EQ(status, want) << knn_last_error();
    EXPECT_NE(std::string(knn_last_error()).find(message_part), std::string::npos)
        << knn_last_error();
  }
  int count(const PolygonArraysd& set) {
    counts_.assign(static_cast<size_t>(set.n_polygons()), -7);
    return knn_points_in_polygons_count_f64(tree_, set.xy.data(), set.ring_offsets.data(),
                                            set.n_rings(), set.polygon_offsets.data(),
                                            set.n_polygons(), counts_.data(), nullptr);
  }

  std::vector<double> xy_ = {0.25, 0.125, 2.0, 2.0, 0.5, 0.25};
  knn_quadtree* tree_ = nullptr;
  PolygonArraysd good_;
  std::vector<int64_t> counts_;
};

TEST_F(PipF64BadInput, TheGoodCallWorks) {
  ASSERT_EQ(count(good_), KNN_OK) << knn_last_error();
  EXPECT_EQ(counts_[0], 2);
}

TEST_F(PipF64BadInput, NonFinitePointsAreNamed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  knn_quadtree* tree = nullptr;
  std::vector<double> xy = {0, 0, 1, 1, 2, nan};
  expect_refused(knn_quadtree_build_f64(xy.data(), 3, nullptr, &tree), KNN_ERR_NONFINITE_INPUT,
                 "point 2 has a NaN coordinate (dimension 1)");
  EXPECT_EQ(tree, nullptr);
  xy = {0, 0, -inf, 1, 2, 2};
  expect_refused(knn_quadtree_build_f64(xy.data(), 3, nullptr, &tree), KNN_ERR_NONFINITE_INPUT,
                 "point 1 has an infinite coordinate (dimension 0)");
  EXPECT_EQ(tree, nullptr);
}

TEST_F(PipF64BadInput, PointsOutsideTheExactRangeAreNamed) {
  knn_quadtree* tree = nullptr;
  std::vector<double> xy = {0, 0, 1, 1e-200, 2, 2};
  expect_refused(knn_quadtree_build_f64(xy.data(), 3, nullptr, &tree), KNN_ERR_INVALID_ARGUMENT,
                 "point 1 has coordinate 9.9999999999999998e-201 (dimension 1)");
  EXPECT_EQ(tree, nullptr);
  xy = {0, 0, 1, 1, std::nextafter(std::ldexp(1.0, 500), 1e300), 2};
  expect_refused(knn_quadtree_build_f64(xy.data(), 3, nullptr, &tree), KNN_ERR_INVALID_ARGUMENT,
                 "point 2 has coordinate");
  EXPECT_NE(std::string(knn_last_error()).find("[2^-485, 2^500]"), std::string::npos);
  EXPECT_EQ(tree, nullptr);
  // The bounds themselves and zero are accepted.
  xy = {0, -0.0, std::ldexp(1.0, 500), std::ldexp(-1.0, -485)};
  ASSERT_EQ(knn_quadtree_build_f64(xy.data(), 2, nullptr, &tree), KNN_OK) << knn_last_error();
  EXPECT_EQ(knn_quadtree_free(tree), KNN_OK);
}

TEST_F(PipF64BadInput, BadVerticesAreNamedAndCountsUntouched) {
  PolygonArraysd bad = good_;
  bad.add_polygon({{0, 0}, {2, 0}, {2, std::numeric_limits<double>::infinity()}});
  expect_refused(count(bad), KNN_ERR_NONFINITE_INPUT, "vertex 5 has an infinite coordinate");
  EXPECT_EQ(counts_, std::vector<int64_t>(2, -7));
  bad = good_;
  bad.add_polygon({{0, 0}, {1e151, 0}, {2, 2}});
  expect_refused(count(bad), KNN_ERR_INVALID_ARGUMENT, "vertex 4 has coordinate 1e+151");
  EXPECT_EQ(counts_, std::vector<int64_t>(2, -7));
  bad = good_;
  bad.add_polygon({{0, 0}, {1, 0}, {1, 0}, {0, 0}});
  expect_refused(count(bad), KNN_ERR_INVALID_ARGUMENT, "ring 1");
  EXPECT_EQ(counts_, std::vector<int64_t>(2, -7));
}

TEST_F(PipF64BadInput, FillChecksOffsetsAndHandles) {
  const int64_t wrong[2] = {0, 1};
  int64_t indices[3] = {-7, -7, -7};
  expect_refused(
      knn_points_in_polygons_f64(tree_, good_.xy.data(), good_.ring_offsets.data(), good_.n_rings(),
                                 good_.polygon_offsets.data(), 1, wrong, indices, nullptr),
      KNN_ERR_INVALID_ARGUMENT, "out_offsets[1] is 1 but the counts give 2");
  EXPECT_EQ(indices[0], -7);
  const int64_t right[2] = {0, 2};
  ASSERT_EQ(
      knn_points_in_polygons_f64(tree_, good_.xy.data(), good_.ring_offsets.data(), good_.n_rings(),
                                 good_.polygon_offsets.data(), 1, right, indices, nullptr),
      KNN_OK)
      << knn_last_error();
  EXPECT_EQ(indices[0], 0);
  EXPECT_EQ(indices[1], 2);
  EXPECT_EQ(indices[2], -7);
  int64_t junk[8] = {0};
  int64_t counts[1] = {-7};
  expect_refused(
      knn_points_in_polygons_count_f64(reinterpret_cast<knn_quadtree*>(junk), good_.xy.data(),
                                       good_.ring_offsets.data(), good_.n_rings(),
                                       good_.polygon_offsets.data(), 1, counts, nullptr),
      KNN_ERR_INVALID_ARGUMENT, "not a live quadtree");
  EXPECT_EQ(counts[0], -7);
  knn_quadtree* tree = nullptr;
  expect_refused(knn_quadtree_build_f64(xy_.data(), 3, nullptr, nullptr), KNN_ERR_INVALID_ARGUMENT,
                 "out is NULL");
  expect_refused(knn_quadtree_build_f64(nullptr, 3, nullptr, &tree), KNN_ERR_INVALID_ARGUMENT,
                 "xy is NULL");
}

}  // namespace
}  // namespace knn_test
