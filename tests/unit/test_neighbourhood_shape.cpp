// The neighbourhood definition's largest deviation (common/geometry/
// neighbourhood.h largest_deviation), which scales the covariance: taken
// from each coordinate's lowest and highest difference alone, it must equal
// the maximum of |d_j - mean| over every point, as the definition states it.
// Checked on random sets of many magnitudes, large offsets against small
// spreads (the differences round), subnormal spreads, repeated values and
// single points.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../../common/geometry/neighbourhood.h"

namespace {

// max over j, c of |fl(d_j[c] - mean[c])|, every difference looked at.
double largest_by_every_point(const std::vector<double>& d, const double mean[3]) {
  double largest = 0.0;
  for (size_t j = 0; j < d.size() / 3; ++j)
    for (int c = 0; c < 3; ++c) largest = std::fmax(largest, std::fabs(d[3 * j + c] - mean[c]));
  return largest;
}

TEST(NeighbourhoodShape, LargestDeviationFromTheRangeIsTheMaximumOverEveryPoint) {
  std::mt19937_64 rng(49);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-1070, 60), count(1, 120), pick(0, 3);
  for (int trial = 0; trial < 20000; ++trial) {
    const int m = count(rng);
    const double spread = std::ldexp(1.0, exponent(rng));
    const double offset = pick(rng) == 0 ? std::ldexp(unit(rng), exponent(rng) + 40) : 0.0;
    std::vector<double> d(static_cast<size_t>(3 * m));
    for (double& x : d) x = pick(rng) == 1 && &x != d.data() ? d[0] : offset + spread * unit(rng);
    double mean[3], lowest[3], highest[3];
    for (int c = 0; c < 3; ++c) {
      double sum = 0.0;
      lowest[c] = highest[c] = d[static_cast<size_t>(c)];
      for (int j = 0; j < m; ++j) {
        const double x = d[static_cast<size_t>(3 * j + c)];
        sum += x;
        lowest[c] = std::fmin(lowest[c], x);
        highest[c] = std::fmax(highest[c], x);
      }
      // Any mean will do, also one off the points' range.
      mean[c] = pick(rng) == 2 ? sum / m + spread * unit(rng) : sum / m;
    }
    const double expected = largest_by_every_point(d, mean);
    const double got = knn::neighbourhood_detail::largest_deviation(lowest, highest, mean);
    ASSERT_EQ(got, expected) << "trial " << trial << ", " << m << " points, spread " << spread;
  }
}

}  // namespace
